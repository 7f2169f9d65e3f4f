// causal_conv_backward: the whole backward of causal_conv_forward in one pass
// over x and dy (ext = the state at negative times, or 0):
//   dx[b,s,c]     = sum_{j<KT, s+KT-1-j < S} w[c,j] * dy[b, s+KT-1-j, c]
//   dstate[b,i,c] = sum_{j <= i, i-j < S}    w[c,j] * dy[b, i-j, c]  (want_state)
//   dw[c,j] = sum_{b,t} dy[b,t,c] * ext(b, t-KT+1+j, c),  db[c] = sum_{b,t} dy[b,t,c]
// Layout as causal_conv_forward (a thread per chunk of V channels, conv_chunk.h,
// walks blocks of L = BL timesteps (a template: 32); worker k of NW takes blocks k, k + NW, ...;
// vector accesses with VEC), with two windows in registers: the KT inputs up
// to time t (for dw) and dy from t to t+KT-1 (for dx); NB timesteps of x and
// dy (causal_conv.c: 8, or 6 for 16-bit data with the shifted windows, under
// the 128-register bound) are loaded before use. Each thread sums dw and db of its channels over
// its blocks; the 8 workers of a threadgroup add theirs in threadgroup memory
// in order of y, and threadgroup row q (of NW / 8) writes
//   part[q*M + c*KT + j] (dw), part[q*M + C*KT + c] (db),  M = C*(KT+1)
// for column_sum, which adds the rows in order: deterministic.
// Launch constants: long S, int C, long NTB, long NBLK, long NW, long NWB, long NWR (NW = NWB * NTB + NWR),
// int has_state, int want_state. Template: T (data), A (accumulation; part
// is A), KT (taps), VEC (vector accesses; a template, so the kernel carries
// one path's registers), NB (timesteps loaded ahead), MINB (launch bound:
// threadgroups per SM), RING (1: the windows span the group of NB steps, moved by
// renaming; 0: shifted by a copy each step), PIPE (with RING 0: the block's
// timesteps in halves of NB, each half's loads issued before the previous
// half's math), WHOLE (with RING 1: a whole group's steps without a check
// each), BL (timesteps a block), STREAM (stream.h's cache hint: 1 on the stores of dx, 2 on those and
// the loads of x and dy): timing variants. Launch: grid = (ceil(ceil(C/V)/32)*32,
// NW, 1), threadgroup = (32, 8, 1).
//! name: alloy_nn_causal_conv_backward
//! inputs: x w state dy
//! outputs: dx dstate part
//! template: T=float32
//! template: A=float32
//! template: VEC=1
//! template: KT=4
//! template: NB=4
//! template: MINB=2
//! template: RING=0
//! template: PIPE=0
//! template: WHOLE=0
//! template: BL=32
//! template: STREAM=0
//! header:
// MINB threadgroups of 256 threads per SM (causal_conv.c: 2 for 16-bit data —
// at most 128 registers a thread —, 1 for float32)
#undef ALLOY_CUDA_LAUNCH_BOUNDS
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(256, ALLOY_TEMPLATE_MINB)
#define ALLOY_NN_STREAM (ALLOY_TEMPLATE_STREAM != 0)
#include "src/ops/nn/kernels/conv_chunk.h"
//! body:
// overlapping launches (alloy_launch_set_overlap, ALLOY_OPS_OVERLAP): the kernel before ends first, the next may start
alloy_wait_previous_kernel();
alloy_start_next_kernel();
constexpr int V = sizeof(T) == 2 ? 4 : 16 / int(sizeof(T)); // conv_chunk.h
constexpr int L = BL; // NB (template): timesteps of x and of dy loaded before use
constexpr int SL = STREAM >= 2 ? 1 : 0; // the loads of x and dy with stream.h's hint
constexpr bool vec = VEC != 0;
const int CC = (C + V - 1) / V;
const int cc = int(thread_position_in_grid.x);
const int lx = int(thread_position_in_threadgroup.x), ty = int(thread_position_in_threadgroup.y);
threadgroup A red[32 * (KT + 1) * V];
A gw[KT * V], gb[V];
for (int k = 0; k < KT * V; k++) gw[k] = A(0);
for (int e = 0; e < V; e++) gb[e] = A(0);
if (cc < CC) {
    const int c0 = cc * V, m = min(V, C - c0);
    A wr[KT * V], xw[KT * V], dyw[KT * V];
    for (int e = 0; e < V; e++)
        for (int j = 0; j < KT; j++) wr[j * V + e] = e < m ? A(w[(c0 + e) * KT + j]) : A(0);
    // the worker's block: sequence b, its q-th block of L timesteps (nn_conv_next: no division a block)
    long b = long(thread_position_in_grid.y) / NTB, q = long(thread_position_in_grid.y) % NTB;
    for (long blk = long(thread_position_in_grid.y); blk < NBLK; blk += NW, nn_conv_next(b, q, NWB, NWR, NTB)) {
        const long t0 = q * L;
        // the block's timesteps as offsets s = 0 .. n-1 from t0 (32-bit: one IMAD.WIDE an address, where
        // (b * S + t) * C + c0 in 64 bits took about ten instructions a load); dy at t0 + s + KT-1 lies
        // inside S for s < nd
        const int n = int(min(S - t0, long(L)));
        const int nd = int(max(0L, min(S - t0 - (KT - 1), long(n))));
        const auto xb = x + (b * S + t0) * C + c0;
        const auto dyb = dy + (b * S + t0) * C + c0;
        const auto dxb = dx + (b * S + t0) * C + c0;
        // xw[j], j < KT-1: ext at t-KT+1+j; dyw[i], i < KT-1: dy at t+i (0 past S)
        for (int j = 0; j < KT - 1; j++) {
            const int s = j - (KT - 1);
            uint4 u = uint4(0u, 0u, 0u, 0u), v = uint4(0u, 0u, 0u, 0u);
            if (t0 + s >= 0) u = nn_ldbits(&xb[long(s) * C], m, vec);
            else if (has_state != 0) u = nn_ldbits(&state[(b * (KT - 1) + (KT - 1) + t0 + s) * C + c0], m, vec);
            if (t0 + j < S) v = nn_ldbits(&dyb[long(j) * C], m, vec);
            nn_unpack<T>(u, &xw[j * V]);
            nn_unpack<T>(v, &dyw[j * V]);
        }
        if (want_state != 0 && t0 == 0) {
            for (int i = 0; i < KT - 1; i++) {
                A o[V];
                for (int e = 0; e < V; e++) {
                    A acc = A(0);
                    for (int j = 0; j <= i; j++) acc += wr[j * V + e] * dyw[(i - j) * V + e];
                    o[e] = acc;
                }
                nn_stbits(&dstate[(b * (KT - 1) + i) * C + c0], nn_pack<T>(o), m, vec);
            }
        }
        // G timesteps of x and of dy from offset sb loaded into rx, rd; then used (the windows shifted by a
        // copy a step). A whole group runs without a check a step: the windows then move by renaming,
        // where a step's exit (at n) kept them in fixed registers, 24 copies a step (K 4); the block's
        // last group checks.
        auto load = [&](thread uint4 *rx, thread uint4 *rd, int sb, int G) {
            const bool whole = sb + G <= nd;
            for (int k = 0; k < G; k++) {
                rx[k] = whole || sb + k < n ? nn_ldbits<SL>(&xb[long(sb + k) * C], m, vec) : uint4(0u, 0u, 0u, 0u);
                rd[k] = whole || sb + k < nd ? nn_ldbits<SL>(&dyb[long(sb + k + KT - 1) * C], m, vec)
                                             : uint4(0u, 0u, 0u, 0u);
            }
        };
        auto step = [&](uint4 rxk, uint4 rdk, int s) {
            nn_unpack<T>(rxk, &xw[(KT - 1) * V]);
            nn_unpack<T>(rdk, &dyw[(KT - 1) * V]);
            A o[V];
            for (int e = 0; e < V; e++) {
                A acc = A(0);
                for (int j = 0; j < KT; j++) acc += wr[j * V + e] * dyw[(KT - 1 - j) * V + e];
                o[e] = acc;
                const A d0 = dyw[e]; // dy at t
                for (int j = 0; j < KT; j++) gw[j * V + e] += d0 * xw[j * V + e];
                gb[e] += d0;
            }
            nn_stbits(&dxb[long(s) * C], nn_pack<T>(o), m, vec);
            for (int z = 0; z < (KT - 1) * V; z++) {
                xw[z] = xw[z + V];
                dyw[z] = dyw[z + V];
            }
        };
        auto use = [&](const thread uint4 *rx, const thread uint4 *rd, int sb, int G) {
            if (sb + G <= n) {
                for (int k = 0; k < G; k++) step(rx[k], rd[k], sb + k);
            } else {
                for (int k = 0; k < G && sb + k < n; k++) step(rx[k], rd[k], sb + k);
            }
        };
        // RING: the windows over G loaded timesteps from offset sb (xe[(s + j) V]: x at sb + s - KT + 1 + j;
        // de[(s + i) V]: dy at sb + s + i), every step's indices constants of the unrolled loop (G a constant
        // where it is inlined), so the window moves by renaming, not by copies (KT - 1 of them per group
        // instead of per step); steps from offset end on do nothing (their dy may be the next block of
        // timesteps', counted there). With WHOLE a whole group (end = sb + G: every step's check a constant)
        // is straight code, without a branch a step (bfloat16, K 4, NB 8: 417 instructions a group against
        // about 560); a block's last group checks.
        A xe[(KT - 1 + NB) * V], de[(KT - 1 + NB) * V];
        auto ring_steps = [&](const thread uint4 *rx, const thread uint4 *rd, int sb, int G, int end) {
            for (int z = 0; z < (KT - 1) * V; z++) {
                xe[z] = xw[z];
                de[z] = dyw[z];
            }
            #pragma unroll
            for (int s = 0; s < NB; s++) {
                if (s >= G) break;
                nn_unpack<T>(rx[s], &xe[(KT - 1 + s) * V]);
                nn_unpack<T>(rd[s], &de[(KT - 1 + s) * V]);
                if (sb + s >= end) continue;
                A o[V];
                for (int e = 0; e < V; e++) {
                    A acc = A(0);
                    for (int j = 0; j < KT; j++) acc += wr[j * V + e] * de[(s + KT - 1 - j) * V + e];
                    o[e] = acc;
                    const A d0 = de[s * V + e]; // dy at t
                    for (int j = 0; j < KT; j++) gw[j * V + e] += d0 * xe[(s + j) * V + e];
                    gb[e] += d0;
                }
                nn_stbits(&dxb[long(sb + s) * C], nn_pack<T>(o), m, vec);
            }
            for (int z = 0; z < (KT - 1) * V; z++) {
                xw[z] = xe[G * V + z];
                dyw[z] = de[G * V + z];
            }
        };
        // (two calls, so that a whole group's end is sb + G where it is inlined: its checks constants)
        auto ring = [&](const thread uint4 *rx, const thread uint4 *rd, int sb, int G) {
            if (WHOLE != 0 && sb + G <= n) ring_steps(rx, rd, sb, G, sb + G);
            else ring_steps(rx, rd, sb, G, n);
        };
        if constexpr (PIPE != 0 && RING == 0) {
            // the block's timesteps in halves of NB, each half's loads issued before the previous half's math
            constexpr int H = NB / 2 > 0 ? NB / 2 : 1;
            struct half_xd { uint4 x[H], d[H]; };
            nn_conv_halves<H, half_xd>(n, [&](thread half_xd &u, int sb) { load(u.x, u.d, sb, H); },
                                       [&](thread half_xd &u, int sb) { use(u.x, u.d, sb, H); });
            continue;
        }
        for (int sb = 0; sb < n; sb += NB) {
            uint4 rx[NB], rd[NB];
            load(rx, rd, sb, NB);
            if constexpr (RING != 0) ring(rx, rd, sb, NB);
            else use(rx, rd, sb, NB);
        }
    }
}
// the 8 workers' sums, added in order of y
for (int k = 0; k < 8; k++) {
    if (ty == k) {
        for (int j = 0; j < KT; j++)
            for (int e = 0; e < V; e++) {
                const int r = (lx * (KT + 1) + j) * V + e;
                red[r] = (k == 0 ? A(0) : red[r]) + gw[j * V + e];
            }
        for (int e = 0; e < V; e++) {
            const int r = (lx * (KT + 1) + KT) * V + e;
            red[r] = (k == 0 ? A(0) : red[r]) + gb[e];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
}
if (ty == 0 && cc < CC) {
    const int c0 = cc * V, m = min(V, C - c0);
    const long q = long(threadgroup_position_in_grid.y), M = long(C) * long(KT + 1);
    for (int e = 0; e < m; e++) {
        for (int j = 0; j < KT; j++) part[q * M + long(c0 + e) * KT + j] = red[(lx * (KT + 1) + j) * V + e];
        part[q * M + long(C) * KT + c0 + e] = red[(lx * (KT + 1) + KT) * V + e];
    }
}
