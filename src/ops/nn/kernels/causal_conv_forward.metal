// causal_conv_forward: causal depthwise convolution over time,
//   y[b,t,c] = bias[c] + sum_{j<KT} w[c,j] * x[b, t-KT+1+j, c]
// where time tau < 0 reads state[b, KT-1+tau, c] (has_state) or 0.
// Each thread serves one chunk of V channels c0 = cc * V .. (conv_chunk.h: 4
// float32 / float16 / bfloat16, 2 float64) and walks blocks of L = 32
// consecutive timesteps, keeping the last KT-1 inputs in registers (a block's
// halo, read again after the previous block's thread read it, comes from
// cache), its taps and bias in registers, and loading NB = 8 timesteps (16 of
// 16-bit data: 128 bytes either way) before using them. With VEC (C % V == 0;
// x, state, y 16-byte aligned) a chunk is one 16-byte (16-bit data: 8-byte)
// access, else up to V scalar ones. Threadgroups of 32 x 8: x over 32 channel chunks (a SIMD group
// reads 32 consecutive chunks of a row), y over 8 of the NW workers; worker k
// takes blocks k, k + NW, ... of the NBLK = B * NTB blocks (NTB = ceil(S/L)).
// Launch constants: long S, int C, long NTB, long NBLK, long NW,
// int has_bias, int has_state. Template: T (data), A (accumulation), KT
// (taps), VEC (vector accesses; a template, so the kernel carries one
// path's registers), PIPE (1: the block's timesteps in halves of NB, each
// half's loads issued before the previous half's math; causal_conv.c).
// Launch: grid = (ceil(ceil(C/V)/32)*32, NW, 1),
// threadgroup = (32, 8, 1).
//! name: alloy_nn_causal_conv_forward
//! inputs: x w bias state
//! outputs: y
//! template: T=float32
//! template: A=float32
//! template: VEC=1
//! template: KT=4
//! template: PIPE=0
//! header:
// at most 128 registers a thread: two threadgroups of 256 threads per SM
#undef ALLOY_CUDA_LAUNCH_BOUNDS
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(256, 2)
#include "src/ops/nn/kernels/conv_chunk.h"
//! body:
constexpr int V = sizeof(T) == 2 ? 4 : 16 / int(sizeof(T)); // conv_chunk.h
constexpr int L = 32, NB = sizeof(T) == 2 ? 16 : 8; // 128 bytes of x in flight a thread
constexpr bool vec = VEC != 0;
const int CC = (C + V - 1) / V;
const int cc = int(thread_position_in_grid.x);
if (cc < CC) {
    const int c0 = cc * V, m = min(V, C - c0);
    A wr[KT * V], bs[V], hw[KT * V];
    for (int e = 0; e < V; e++) {
        for (int j = 0; j < KT; j++) wr[j * V + e] = e < m ? A(w[(c0 + e) * KT + j]) : A(0);
        bs[e] = has_bias != 0 && e < m ? A(bias[c0 + e]) : A(0);
    }
    for (long blk = long(thread_position_in_grid.y); blk < NBLK; blk += NW) {
        const long b = blk / NTB, t0 = (blk % NTB) * L, t1 = min(S, t0 + L);
        // hw[j], j < KT-1: the input at time t-KT+1+j (t0's halo first)
        for (int j = 0; j < KT - 1; j++) {
            const long tau = t0 - (KT - 1) + j;
            uint4 u = uint4(0u, 0u, 0u, 0u);
            if (tau >= 0) u = nn_ldbits(&x[(b * S + tau) * C + c0], m, vec);
            else if (has_state != 0) u = nn_ldbits(&state[(b * (KT - 1) + (KT - 1) + tau) * C + c0], m, vec);
            nn_unpack<T>(u, &hw[j * V]);
        }
        // G timesteps from tb loaded into raw, then used (outputs stored)
        auto load = [&](thread uint4 *raw, long tb, int G) {
            for (int s = 0; s < G; s++)
                raw[s] = tb + s < t1 ? nn_ldbits(&x[(b * S + tb + s) * C + c0], m, vec) : uint4(0u, 0u, 0u, 0u);
        };
        auto use = [&](const thread uint4 *raw, long tb, int G) {
            for (int s = 0; s < G; s++) {
                if (tb + s >= t1) break;
                nn_unpack<T>(raw[s], &hw[(KT - 1) * V]);
                A o[V];
                for (int e = 0; e < V; e++) {
                    A acc = bs[e];
                    for (int j = 0; j < KT; j++) acc += wr[j * V + e] * hw[j * V + e];
                    o[e] = acc;
                }
                nn_stbits(&y[(b * S + tb + s) * C + c0], nn_pack<T>(o), m, vec);
                for (int k = 0; k < (KT - 1) * V; k++) hw[k] = hw[k + V];
            }
        };
        if constexpr (PIPE != 0) {
            constexpr int H = NB / 2;
            struct half_x { uint4 r[H]; };
            nn_conv_halves<H, half_x>(t0, t1, [&](thread half_x &u, long tb) { load(u.r, tb, H); },
                                      [&](thread half_x &u, long tb) { use(u.r, tb, H); });
        } else {
            for (long tb = t0; tb < t1; tb += NB) {
                uint4 raw[NB];
                load(raw, tb, NB);
                use(raw, tb, NB);
            }
        }
    }
}
