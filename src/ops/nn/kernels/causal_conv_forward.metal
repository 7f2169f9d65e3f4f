// causal_conv_forward: causal depthwise convolution over time,
//   y[b,t,c] = bias[c] + sum_{j<KT} w[c,j] * x[b, t-KT+1+j, c]
// where time tau < 0 reads state[b, KT-1+tau, c] (has_state) or 0.
// Each thread serves one chunk of V channels c0 = cc * V .. (conv_chunk.h: 4
// float32 / float16 / bfloat16, 2 float64) and walks blocks of L = 32
// consecutive timesteps (L: the template BL), keeping the last KT-1 inputs in registers (a block's
// halo, read again after the previous block's thread read it, comes from
// cache), its taps and bias in registers, and loading NB timesteps (a
// template) before using them. With VEC (C % V == 0;
// x, state, y 16-byte aligned) a chunk is one 16-byte (16-bit data: 8-byte)
// access, else up to V scalar ones. Threadgroups of 32 x 8: x over 32 channel chunks (a SIMD group
// reads 32 consecutive chunks of a row), y over 8 of the NW workers; worker k
// takes blocks k, k + NW, ... of the NBLK = B * NTB blocks (NTB = ceil(S/L)).
// Launch constants: long S, int C, long NTB, long NBLK, long NW, long NWB, long NWR (NW = NWB * NTB + NWR),
// int has_bias, int has_state. Template: T (data), A (accumulation), KT
// (taps), VEC (vector accesses; a template, so the kernel carries one
// path's registers), PIPE (1: the block's timesteps in halves of NB, each
// half's loads issued before the previous half's math; causal_conv.c), NB
// (timesteps loaded ahead: 8 float32, 16 of 16-bit data, 128 bytes either
// way), MINB (launch bound: threadgroups per SM), BL (timesteps a block:
// causal_conv.c; any length, a block's last group checks), STREAM (stream.h's cache hint: 1 on the
// stores of y, 2 on those and the loads of x).
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
//! template: NB=8
//! template: MINB=2
//! template: BL=32
//! template: STREAM=0
//! header:
// MINB threadgroups of 256 threads per SM (causal_conv.c: 2, at most 128 registers a thread)
#undef ALLOY_CUDA_LAUNCH_BOUNDS
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(256, ALLOY_TEMPLATE_MINB)
#define ALLOY_NN_STREAM (ALLOY_TEMPLATE_STREAM != 0)
#include "src/ops/nn/kernels/conv_chunk.h"
//! body:
// overlapping launches (alloy_launch_set_overlap, ALLOY_OPS_OVERLAP): the kernel before ends first, the next may start
alloy_wait_previous_kernel();
alloy_start_next_kernel();
constexpr int V = sizeof(T) == 2 ? 4 : 16 / int(sizeof(T)); // conv_chunk.h
constexpr int L = BL; // NB (template): timesteps of x loaded before use
constexpr int SL = STREAM >= 2 ? 1 : 0; // the loads of x with stream.h's hint
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
    // the worker's block: sequence b, its q-th block of L timesteps (nn_conv_next: no division a block)
    long b = long(thread_position_in_grid.y) / NTB, q = long(thread_position_in_grid.y) % NTB;
    for (long blk = long(thread_position_in_grid.y); blk < NBLK; blk += NW, nn_conv_next(b, q, NWB, NWR, NTB)) {
        const long t0 = q * L;
        // the block's timesteps as offsets s = 0 .. n-1 from t0 (32-bit: one IMAD.WIDE an address,
        // where (b * S + t) * C + c0 in 64 bits took about ten instructions a load)
        const int n = int(min(S - t0, long(L)));
        const auto xb = x + (b * S + t0) * C + c0;
        const auto yb = y + (b * S + t0) * C + c0;
        // hw[j], j < KT-1: the input at time t-KT+1+j (t0's halo first)
        for (int j = 0; j < KT - 1; j++) {
            const int s = j - (KT - 1);
            uint4 u = uint4(0u, 0u, 0u, 0u);
            if (t0 + s >= 0) u = nn_ldbits(&xb[long(s) * C], m, vec);
            else if (has_state != 0) u = nn_ldbits(&state[(b * (KT - 1) + (KT - 1) + t0 + s) * C + c0], m, vec);
            nn_unpack<T>(u, &hw[j * V]);
        }
        // G timesteps from offset sb loaded into raw, then used (outputs stored). A whole group runs
        // without a check a step: the windows then move by renaming, where a step's exit (at n)
        // kept them in fixed registers, 12 copies a step (K 4); the block's last group checks.
        auto load = [&](thread uint4 *raw, int sb, int G) {
            const bool whole = sb + G <= n;
            for (int k = 0; k < G; k++)
                raw[k] = whole || sb + k < n ? nn_ldbits<SL>(&xb[long(sb + k) * C], m, vec) : uint4(0u, 0u, 0u, 0u);
        };
        auto step = [&](uint4 r, int s) {
            nn_unpack<T>(r, &hw[(KT - 1) * V]);
            A o[V];
            for (int e = 0; e < V; e++) {
                A acc = bs[e];
                for (int j = 0; j < KT; j++) acc += wr[j * V + e] * hw[j * V + e];
                o[e] = acc;
            }
            nn_stbits(&yb[long(s) * C], nn_pack<T>(o), m, vec);
            for (int z = 0; z < (KT - 1) * V; z++) hw[z] = hw[z + V];
        };
        auto use = [&](const thread uint4 *raw, int sb, int G) {
            if (sb + G <= n) {
                for (int k = 0; k < G; k++) step(raw[k], sb + k);
            } else {
                for (int k = 0; k < G && sb + k < n; k++) step(raw[k], sb + k);
            }
        };
        if constexpr (PIPE != 0) {
            constexpr int H = NB / 2;
            struct half_x { uint4 r[H]; };
            nn_conv_halves<H, half_x>(n, [&](thread half_x &u, int sb) { load(u.r, sb, H); },
                                      [&](thread half_x &u, int sb) { use(u.r, sb, H); });
        } else {
            for (int sb = 0; sb < n; sb += NB) {
                uint4 raw[NB];
                load(raw, sb, NB);
                use(raw, sb, NB);
            }
        }
    }
}
