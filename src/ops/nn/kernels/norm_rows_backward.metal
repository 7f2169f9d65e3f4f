// norm_rows_backward: the backward of norm_rows in one pass over x and dy:
// dx of each group, and partial sums of dweight and dbias. Same layout as
// norm_rows (WG SIMD groups per group of n = DH elements, lane q = (sg % WG)
// * 32 + lane holding chunks (i * 32 * WG + q) * V of x and dy as raw bits,
// 16-byte accesses with VEC, w reread from cache, sums across the WG SIMD
// groups in order through threadgroup memory). With g = dy * w and x^ = (x -
// mu) * rstd:
//   RMS == 1: dx = rstd * (g - x^ * mean(g x^))                (mu = 0)
//   RMS == 0: dx = rstd * (g - mean(g) - x^ * mean(g x^))
// Threadgroup p serves head h = p % G of the rows r = sg / WG + RW * (p / G)
// + RW * PT * k (RW = 8 / WG). With up to 4 chunks a lane for float32 and 2
// for float16 (PF; not bfloat16, whose unpacked values then spill) each SIMD group issues the loads of its next row's x and dy before it works on the
// current row, so they stay in flight through its reductions and stores. Each lane sums dy * x^ (and dy for LayerNorm)
// of its columns over its rows in float A in threadgroup memory (the dynamic
// alloy_threadgroup_memory: per SIMD group NS = 1 or 2 sums of NE = NC * V
// elements of its 32 lanes, lane-consecutive words, so no bank conflicts and
// no barrier: a lane reads and writes only its own words), not in registers,
// which leave room for the group's x and dy. At the end the RW row sets' sums
// are added in order and written as partial row u = p / G:
//   part[u * 2D + h * DH + j] = sum dy x^,  part[u * 2D + D + h * DH + j] = sum dy (0 for RMS)
// (column_sum then adds the rows in order: deterministic).
// Launch constants: long R (rows), long PT, int DH, int G, A eps. Template: T
// (data), A (accumulation; part is A), NC (chunks per lane), WG (SIMD groups
// per group: 1, 2, 4 or 8), VEC (16-byte accesses), RMS (RMSNorm: no dbias).
// Launch: grid = (PT * G * 256, 1, 1), threadgroup = (256, 1, 1), threadgroup
// memory 8 * NS * NE * 32 * sizeof(A) bytes.
//! name: alloy_nn_norm_rows_backward
//! inputs: x w dy
//! outputs: dx part
//! template: T=float32
//! template: A=float32
//! template: VEC=1
//! template: NC=1
//! template: WG=1
//! template: RMS=0
//! template: MINB=2
//! header:
// MINB threadgroups of 256 threads per SM (norm.c: 2, at most 128 registers a thread)
#undef ALLOY_CUDA_LAUNCH_BOUNDS
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(256, ALLOY_TEMPLATE_MINB)
#include "src/ops/nn/kernels/chunk.h"
//! body:
constexpr int V = 16 / int(sizeof(T));
constexpr int NE = NC * V;
constexpr int RW = 8 / WG;
constexpr int NS = RMS != 0 ? 1 : 2;
const int lane = int(thread_index_in_simdgroup), sg = int(simdgroup_index_in_threadgroup);
const int q = (sg % WG) * 32 + lane, sr = sg / WG;
const int tid = int(thread_index_in_threadgroup);
const long p = long(threadgroup_position_in_grid.x);
const int h = int(p % long(G));
const long D = long(G) * long(DH), hw = long(h) * long(DH);
threadgroup A tred[2][4][8];
// this SIMD group's sums: word (k * NE + i * V + e) * 32 + lane, k = 0 (dy x^) or 1 (dy)
threadgroup A *acc = (threadgroup A *)alloy_threadgroup_memory;
const int a0 = sg * (NS * NE * 32) + lane;
for (int k = 0; k < NS * NE; k++) acc[a0 + k * 32] = A(0);
int par = 0;
// the chunks of x and dy of this row (ux, ud) and, with PF, of the next (uxn, udn); every chunk's loads
// are issued before any is used
// bfloat16: spills; float16 with 4 chunks a lane (rows of 1024): slower on an
// H100 (81.6% of copy against 89.5% without, bench/RESULTS.md), 2 chunks faster
constexpr bool PF = !is_same<T, bfloat>::value && (sizeof(T) == 4 ? NC <= 4 : NC <= 2);
const long step = PT * RW;
uint4 ux[NC], ud[NC], uxn[PF ? NC : 1], udn[PF ? NC : 1];
if constexpr (PF) {
    const long r = (p / long(G)) * RW + long(sr);
    const long base = (r * long(G) + long(h)) * long(DH);
    for (int i = 0; i < NC; i++) {
        const int col = (i * 32 * WG + q) * V;
        ux[i] = nn_chunk_load<T, VEC>(x, base + col, r < R ? DH - col : 0);
        ud[i] = nn_chunk_load<T, VEC>(dy, base + col, r < R ? DH - col : 0);
    }
}
for (long r0 = (p / long(G)) * RW; r0 < R; r0 += step) {
    const long r = r0 + long(sr);
    const bool ok = r < R;
    const long base = (r * long(G) + long(h)) * long(DH);
    if constexpr (PF) {
        const long rn = r + step, basen = (rn * long(G) + long(h)) * long(DH);
        for (int i = 0; i < NC; i++) {
            const int col = (i * 32 * WG + q) * V;
            uxn[i] = nn_chunk_load<T, VEC>(x, basen + col, rn < R ? DH - col : 0);
            udn[i] = nn_chunk_load<T, VEC>(dy, basen + col, rn < R ? DH - col : 0);
        }
    } else {
        for (int i = 0; i < NC; i++) {
            const int col = (i * 32 * WG + q) * V;
            ux[i] = nn_chunk_load<T, VEC>(x, base + col, ok ? DH - col : 0);
            ud[i] = nn_chunk_load<T, VEC>(dy, base + col, ok ? DH - col : 0);
        }
    }
    A mu = A(0);
    if (RMS == 0) {
        A s = A(0);
        for (int i = 0; i < NC; i++)
            for (int e = 0; e < V; e++) s += nn_chunk_elem<T, A>(ux[i], e);
        A tot = simd_sum(s);
        if (WG > 1) {
            if (lane == 0) tred[par][0][sg] = tot;
            threadgroup_barrier(mem_flags::mem_threadgroup);
            tot = A(0);
            for (int k = 0; k < WG; k++) tot += tred[par][0][sr * WG + k];
        }
        mu = tot / A(DH);
    }
    A s2 = A(0);
    for (int i = 0; i < NC; i++)
        for (int e = 0; e < V; e++)
            if ((i * 32 * WG + q) * V + e < DH) {
                const A dv = nn_chunk_elem<T, A>(ux[i], e) - mu;
                s2 += dv * dv;
            }
    A tot2 = simd_sum(s2);
    if (WG > 1) {
        if (lane == 0) tred[par][1][sg] = tot2;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        tot2 = A(0);
        for (int k = 0; k < WG; k++) tot2 += tred[par][1][sr * WG + k];
    }
    const A rstd = A(1) / sqrt(tot2 / A(DH) + eps);
    // sums of g and g x^ (dy and w read as 0 past the group)
    A sg1 = A(0), sgx = A(0);
    for (int i = 0; i < NC; i++) {
        const int col = (i * 32 * WG + q) * V;
        const uint4 wu = nn_chunk_load<T, VEC>(w, hw + col, ok ? DH - col : 0);
        for (int e = 0; e < V; e++) {
            const A xh = col + e < DH ? (nn_chunk_elem<T, A>(ux[i], e) - mu) * rstd : A(0);
            const A gk = nn_chunk_elem<T, A>(ud[i], e) * nn_chunk_elem<T, A>(wu, e);
            sg1 += gk;
            sgx += gk * xh;
        }
    }
    A tg = A(0);
    if (RMS == 0) {
        const A t = simd_sum(sg1);
        tg = t;
    }
    A tgx = simd_sum(sgx);
    if (WG > 1) {
        if (lane == 0) {
            tred[par][2][sg] = tg;
            tred[par][3][sg] = tgx;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        tg = A(0);
        tgx = A(0);
        for (int k = 0; k < WG; k++) {
            tg += tred[par][2][sr * WG + k];
            tgx += tred[par][3][sr * WG + k];
        }
    }
    par ^= 1;
    const A mg = tg / A(DH), mgx = tgx / A(DH);
    if (ok)
        for (int i = 0; i < NC; i++) {
            const int col = (i * 32 * WG + q) * V;
            if (col >= DH) continue;
            const uint4 wu = nn_chunk_load<T, VEC>(w, hw + col, DH - col);
            A o[V];
            for (int e = 0; e < V; e++) {
                const A xh = col + e < DH ? (nn_chunk_elem<T, A>(ux[i], e) - mu) * rstd : A(0);
                const A d = nn_chunk_elem<T, A>(ud[i], e);
                o[e] = rstd * (d * nn_chunk_elem<T, A>(wu, e) - mg - xh * mgx);
                acc[a0 + (i * V + e) * 32] += d * xh;
                if (RMS == 0) acc[a0 + (NE + i * V + e) * 32] += d;
            }
            nn_chunk_store<T, A, VEC>(dx, base + col, DH - col, o);
        }
    if constexpr (PF)
        for (int i = 0; i < NC; i++) {
            ux[i] = uxn[i];
            ud[i] = udn[i];
        }
}
threadgroup_barrier(mem_flags::mem_threadgroup);
// column j of the head: chunk c = j / V of lane q = c % (32 WG) of chunk row i = c / (32 WG); the RW row
// sets' sums added in order of sr
const long u = p / long(G);
for (int j = tid; j < DH; j += 256) {
    const int c = j / V, e = j % V, i = c / (32 * WG), qq = c % (32 * WG);
    A sw = A(0), sb = A(0);
    for (int k = 0; k < RW; k++) {
        const int o0 = (k * WG + qq / 32) * (NS * NE * 32) + (i * V + e) * 32 + qq % 32;
        sw += acc[o0];
        if (RMS == 0) sb += acc[o0 + NE * 32];
    }
    part[u * 2 * D + hw + j] = sw;
    part[u * 2 * D + D + hw + j] = sb;
}
