// norm_rows: RMSNorm or LayerNorm of groups of n = DH consecutive elements
// (a row of x, or one head of it) by WG SIMD groups (32 lanes each; WG = 1
// for groups up to 32 * NC * V elements) per group, the group held in
// registers between the statistics and the normalisation (x is read once).
// Lane q = (sg % WG) * 32 + lane of the group's SIMD groups holds chunks i =
// 0 .. NC-1 of V = 16 / sizeof(T) elements at columns (i * 32 * WG + q) * V
// (NC * 32 * WG * V >= n) as their raw bits (chunk.h: 4 registers a chunk, so
// few registers a thread and many SIMD groups per SM keep many loads in
// flight); with VEC (n % V == 0; x, y, w, b 16-byte aligned) each chunk is
// one 16-byte load or store, else V guarded scalar accesses. w and b are
// reread for each row from cache (L1) rather than held in registers.
// Statistics in A: simd_sum, then (WG > 1) the WG SIMD groups' sums
// added in order through threadgroup memory (double-buffered by the parity
// of the row round, so one barrier per statistic); the variance from the
// deviations, so a constant group gives 0:
//   rms == 1: y = x * rstd * w,            rstd = 1 / sqrt(mean(x^2) + eps)
//   rms == 0: y = (x - mu) * rstd * w + b, rstd = 1 / sqrt(mean((x - mu)^2) + eps)
// Threadgroup p (SG SIMD groups, RW = SG / WG groups at a time) serves head h =
// p % G of the rows r = sg / WG + RW * (p / G) + RW * PT * k (PT threadgroups
// per head; norm.c sizes the grid for one round: PT covers every row, so
// each SIMD group normalises one row — on an H100 that reached 97-99% of
// copy, against 86-94% with the grid sized to the SMs and the rows looped).
// With PF each SIMD group issues the loads of its next row before it works
// on the current one (two rows of chunks in registers; launch bounds: 4
// threadgroups an SM, 3 with 4 chunks a lane, 2 with 8), for looped rows;
// norm.c turns it on only with ALLOY_NN_NORM_PF=1 (for timing).
// Launch constants: long R (rows), long PT, int DH, int G, int rms, int has_b,
// A eps. Template: T (data), A (accumulation), NC (chunks per lane), WG (SIMD
// groups per group: 1, 2, 4 or 8), VEC (16-byte accesses), PF (load the next
// row ahead), FULL (the lanes' chunks tile the group exactly: NC * 32 * WG *
// V == DH, so no element is checked against DH), SG (SIMD groups a
// threadgroup: 8, or 1, 2, 4 >= WG for timing, norm.c's fwd_sg), STATS (each
// group's (mu, rstd) into stats[2 (r G + h)] and the word after, A, by the
// group's first lane; without it stats is not written and norm.c binds y
// there).
// Launch: grid = (PT * G * 32 * SG, 1, 1), threadgroup = (32 * SG, 1, 1).
//! name: alloy_nn_norm_rows
//! inputs: x w b
//! outputs: y stats
//! template: T=float32
//! template: A=float32
//! template: VEC=1
//! template: NC=1
//! template: WG=1
//! template: PF=1
//! template: FULL=0
//! template: SG=8
//! template: STATS=0
//! header:
// at most 64 registers a thread (four threadgroups of 256 threads per SM, or as
// many threads in smaller ones); with PF 80 (three) with 4 chunks a lane, 128
// (two) with 8: norm.c sizes the grid
#undef ALLOY_CUDA_LAUNCH_BOUNDS
#define ALLOY_CUDA_LAUNCH_BOUNDS                                                                           \
    __launch_bounds__(32 * ALLOY_TEMPLATE_SG,                                                              \
                      (ALLOY_TEMPLATE_PF == 0 ? 4 : ALLOY_TEMPLATE_NC >= 8 ? 2 : ALLOY_TEMPLATE_NC >= 4 ? 3 : 4) * \
                          (8 / ALLOY_TEMPLATE_SG))
#include "src/ops/nn/kernels/chunk.h"
//! body:
// overlapping launches (alloy_launch_set_overlap, ALLOY_OPS_OVERLAP): the kernel before ends first, the next may start
alloy_wait_previous_kernel();
alloy_start_next_kernel();
constexpr int V = 16 / int(sizeof(T));
constexpr int RW = SG / WG;
const int lane = int(thread_index_in_simdgroup), sg = int(simdgroup_index_in_threadgroup);
const int q = (sg % WG) * 32 + lane, sr = sg / WG;
const long p = long(threadgroup_position_in_grid.x);
const int h = int(p % long(G));
const long hw = long(h) * long(DH);
threadgroup A tred[2][2][SG];
int par = 0;
// the chunks of this row (u) and of the next (un); every chunk's load is issued before any is used
uint4 u[NC], un[PF != 0 ? NC : 1];
const long step = PT * RW;
if constexpr (PF != 0) {
    const long r = (p / long(G)) * RW + long(sr);
    const long base = (r * long(G) + long(h)) * long(DH);
    for (int i = 0; i < NC; i++) {
        const int col = (i * 32 * WG + q) * V;
        u[i] = nn_chunk_load<T, VEC>(x, base + col, r < R ? DH - col : 0);
    }
}
for (long r0 = (p / long(G)) * RW; r0 < R; r0 += step) {
    const long r = r0 + long(sr), rn = r + step;
    const bool ok = r < R;
    const long base = (r * long(G) + long(h)) * long(DH), basen = (rn * long(G) + long(h)) * long(DH);
    for (int i = 0; i < NC; i++) {
        const int col = (i * 32 * WG + q) * V;
        if constexpr (PF != 0) un[i] = nn_chunk_load<T, VEC>(x, basen + col, rn < R ? DH - col : 0);
        else u[i] = nn_chunk_load<T, VEC>(x, base + col, ok ? DH - col : 0);
    }
    A mu = A(0);
    if (rms == 0) {
        A s = A(0);
        for (int i = 0; i < NC; i++)
            for (int e = 0; e < V; e++) s += nn_chunk_elem<T, A>(u[i], e);
        A tot = simd_sum(s);
        if (WG > 1) {
            if (lane == 0) tred[par][0][sg] = tot;
            threadgroup_barrier(mem_flags::mem_threadgroup);
            tot = A(0);
            for (int k = 0; k < WG; k++) tot += tred[par][0][sr * WG + k];
        }
        mu = tot / A(DH); // a division: an exact sum n c gives mu = c exactly
    }
    A s2 = A(0);
    for (int i = 0; i < NC; i++)
        for (int e = 0; e < V; e++)
            if (FULL != 0 || (i * 32 * WG + q) * V + e < DH) {
                const A d = nn_chunk_elem<T, A>(u[i], e) - mu;
                s2 += d * d;
            }
    A tot2 = simd_sum(s2);
    if (WG > 1) {
        if (lane == 0) tred[par][1][sg] = tot2;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        tot2 = A(0);
        for (int k = 0; k < WG; k++) tot2 += tred[par][1][sr * WG + k];
    }
    par ^= 1;
    const A rstd = A(1) / sqrt(tot2 / A(DH) + eps);
    if (STATS != 0 && ok && q == 0) {
        stats[2 * (r * long(G) + long(h))] = mu;
        stats[2 * (r * long(G) + long(h)) + 1] = rstd;
    }
    if (ok)
        for (int i = 0; i < NC; i++) {
            const int col = (i * 32 * WG + q) * V;
            if (FULL == 0 && col >= DH) continue;
            const uint4 wu = nn_chunk_load<T, VEC>(w, hw + col, DH - col);
            const uint4 bu = nn_chunk_load<T, VEC>(b, hw + col, has_b != 0 ? DH - col : 0);
            A o[V];
            for (int e = 0; e < V; e++)
                o[e] = (nn_chunk_elem<T, A>(u[i], e) - mu) * rstd * nn_chunk_elem<T, A>(wu, e) +
                       nn_chunk_elem<T, A>(bu, e);
            nn_chunk_store<T, A, VEC>(y, base + col, DH - col, o);
        }
    if constexpr (PF != 0)
        for (int i = 0; i < NC; i++) u[i] = un[i];
}
