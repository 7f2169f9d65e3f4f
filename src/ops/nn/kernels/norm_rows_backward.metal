// norm_rows_backward: the backward of norm_rows in one pass over x and dy:
// dx of each group, and partial sums of dweight and dbias. Same layout as
// norm_rows (WG SIMD groups per group of n = DH elements, lane q = (sg % WG)
// * 32 + lane holding chunks (i * 32 * WG + q) * V of x and dy as raw bits,
// 16-byte accesses with VEC, sums across the WG SIMD groups in order through
// threadgroup memory). With g = dy * w and x^ = (x - mu) * rstd:
//   RMS == 1: dx = rstd * (g - x^ * mean(g x^))                (mu = 0)
//   RMS == 0: dx = rstd * (g - mean(g) - x^ * mean(g x^))
// and mean(g x^) = rstd * mean(g (x - mu)), so after LayerNorm's mean one
// pass over the row gives the deviations' squares and the sums of g and
// g (x - mu) (RMSNorm: mu = 0, one pass for all). Their simd_sums run one
// after another (simd_sum branches on the active lanes), or with VSUM as one
// simd_sum of a vector, whose shuffles interleave. With ONEPASS (LayerNorm
// only) there is no mean round: each lane takes its elements' count, mean m_l,
// squared deviations from m_l and the sums of g and g (x - m_l), and the
// lanes (then the WG SIMD groups, in order) combine them pairwise — the mean
// and the deviations' squares by Chan's update, the sum of g (x - m) moved to
// the combined mean by + G (m_l - m) — in one reduction round instead of two.
// With SHIFT (LayerNorm, one SIMD group a row) the round's sums are of d = x - x0,
// x0 the row's first element: mean(d), sum d^2 - sum d mean(d) = sum (x - mu)^2
// and sum g d - mean(d) sum g = sum g (x - mu), one vector simd_sum of four and
// no combination step. The cancellation costs at most about DH float32 ulps of
// the variance (x0 at most sqrt(DH) deviations from the mean): below a 16-bit
// result's rounding up to DH = 4096 (norm.c offers it for 16-bit data only);
// a constant row gives d = 0, its mean exactly.
// Threadgroup p serves head h = p % G of the rows r = sg / WG + RW * (p / G)
// + RW * PT * k (RW = 8 / WG). Each SIMD group issues the loads of x and dy
// PD rows ahead of the row it works on (PD from norm.c: 0, 1 or 2), so they
// stay in flight through the reductions and stores of the rows between.
// Each lane sums dy * x^ (and dy for LayerNorm) of its columns over its rows
// in float A: in registers with REGS (norm.c: RMSNorm with at most 16
// elements a lane; 16-bit data then also keeps its weight chunks there,
// WREG, instead of rereading them from cache for each row), else in
// threadgroup memory (the dynamic alloy_threadgroup_memory: per SIMD group
// NS = 1 or 2 sums of NE = NC * V elements of its 32 lanes, in vectors of
// VA = 4 (2 for float64), lane-consecutive, so that a lane reads and writes
// VA sums with one 16-byte access, without bank conflicts and without a
// barrier: a lane touches only its own words), leaving the registers to the
// group's x and dy. At the end the register sums go to those words, and the
// RW row sets' sums are added in order and written as partial row u = p / G:
//   part[u * 2D + h * DH + j] = sum dy x^,  part[u * 2D + D + h * DH + j] = sum dy (0 for RMS)
// (column_sum then adds the rows in order: deterministic).
// Launch constants: long R (rows), long PT, int DH, int G, A eps. Template: T
// (data), A (accumulation; part is A), NC (chunks per lane), WG (SIMD groups
// per group: 1, 2, 4 or 8), VEC (16-byte accesses), RMS (RMSNorm: no dbias),
// FULL (VEC and NC * 32 * WG * V == DH: every element of every chunk lies in
// the group, so no element is checked), PD (rows loaded ahead), REGS (column
// sums in registers), SPLIT (a round of its own for the deviations' squares:
// a timing variant), VSUM (the pass's sums reduced as one vector), ONEPASS
// (LayerNorm's statistics in one round), SHIFT (the same from shifted sums),
// MINB (launch bound), OPQ (16-bit elements widened by opaque instructions
// at each use on CUDA: chunk.h), STATS (the forward's statistics read from
// saved, (mu, rstd) in A at saved[2 (r G + h)], loaded with the row's x and
// dy: no statistics round, the pass sums g (LayerNorm) and g (x - mu) alone;
// RMSNorm's mean slot is not read. Without it norm.c binds x to saved).
// Launch: grid = (PT * G * 256, 1, 1), threadgroup = (256, 1, 1), threadgroup
// memory 8 * NS * NE * 32 * sizeof(A) bytes.
//! name: alloy_nn_norm_rows_backward
//! inputs: x w dy saved
//! outputs: dx part
//! template: T=float32
//! template: A=float32
//! template: VEC=1
//! template: NC=1
//! template: WG=1
//! template: RMS=0
//! template: FULL=0
//! template: PD=1
//! template: REGS=0
//! template: SPLIT=0
//! template: VSUM=0
//! template: ONEPASS=0
//! template: SHIFT=0
//! template: MINB=2
//! template: OPQ=0
//! template: STATS=0
//! header:
// MINB threadgroups of 256 threads per SM (norm.c: 2, at most 128 registers a thread)
#undef ALLOY_CUDA_LAUNCH_BOUNDS
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(256, ALLOY_TEMPLATE_MINB)
#if ALLOY_TEMPLATE_OPQ
#define ALLOY_NN_OPAQUE_BF16
#define ALLOY_NN_OPAQUE_F16
#endif
#include "src/ops/nn/kernels/chunk.h"
// ONEPASS: the statistics of two disjoint sets of a row's elements, a (the
// lower lane or SIMD group) and b, as one: count, mean, squared deviations
// from the mean, sum of g and sum of g (x - mean). Both lanes of a pair
// compute the same operations in the same order, so they agree bit for bit.
template <class A>
METAL_FUNC void nn_stats_combine(thread A &n, thread A &m, thread A &m2, thread A &g, thread A &gx, A nb, A mb,
                                 A m2b, A gb, A gxb) {
    const A na = n, nt = na + nb;
    if (nt == A(0)) return;
    const A d = mb - m, mt = m + d * (nb / nt);
    m2 = m2 + m2b + d * d * (na * nb / nt);
    gx = gx + g * (m - mt) + (gxb + gb * (mb - mt));
    g = g + gb;
    m = mt;
    n = nt;
}
//! body:
// overlapping launches (alloy_launch_set_overlap, ALLOY_OPS_OVERLAP): the kernel before ends first, the next may start
alloy_wait_previous_kernel();
alloy_start_next_kernel();
constexpr int V = 16 / int(sizeof(T));
constexpr int NE = NC * V;
constexpr int RW = 8 / WG;
constexpr int NS = RMS != 0 ? 1 : 2;
// the column sums in registers with REGS (norm.c), else in threadgroup memory; the weight's chunks held
// in registers for 16-bit data then (otherwise reread from cache for each row)
constexpr bool REG = REGS != 0;
// SHIFT: LayerNorm's statistics in one round from sums shifted by the row's first element (one SIMD group a
// row, the two-round and ONEPASS forms off)
constexpr bool SHIFTED = SHIFT != 0 && RMS == 0 && WG == 1 && SPLIT == 0 && ONEPASS == 0;
constexpr bool WREG = REG && sizeof(T) == 2;
const int lane = int(thread_index_in_simdgroup), sg = int(simdgroup_index_in_threadgroup);
const int q = (sg % WG) * 32 + lane, sr = sg / WG;
const int tid = int(thread_index_in_threadgroup);
const long p = long(threadgroup_position_in_grid.x);
const int h = int(p % long(G));
const long D = long(G) * long(DH), hw = long(h) * long(DH);
const A rdh = A(1) / A(DH);
threadgroup A tred[2][ONEPASS != 0 ? 5 : 4][8];
// this SIMD group's sums: sum j = k * NE + i * V + e (k = 0: dy x^, 1: dy) of lane l in word
// ((j / VA) * 32 + l) * VA + j % VA (V, so NE, is a multiple of VA): lane l's sums VA m .. VA m + VA - 1
// are one vector
constexpr int VA = V < 4 ? V : 4;
typedef vec<A, VA> accv;
auto acc_word = [](int j, int l) { return (j / VA * 32 + l) * VA + j % VA; };
threadgroup A *acc = (threadgroup A *)alloy_threadgroup_memory + sg * (NS * NE * 32);
threadgroup accv *accl = (threadgroup accv *)acc + lane;
A rw_[REG ? NE : 1], rb_[REG && RMS == 0 ? NE : 1];
uint4 wv[WREG ? NC : 1];
if constexpr (REG) {
    for (int k = 0; k < NE; k++) rw_[k] = A(0);
    if (RMS == 0)
        for (int k = 0; k < NE; k++) rb_[k] = A(0);
} else {
    for (int k = 0; k < NS * NE / VA; k++) accl[k * 32] = accv(A(0));
}
if constexpr (WREG)
    for (int i = 0; i < NC; i++) {
        const int col = (i * 32 * WG + q) * V;
        wv[i] = nn_chunk_load<T, VEC>(w, hw + col, DH - col);
    }
int par = 0;
const long step = PT * RW;
// the chunks of x and dy of this row (ux, ud) and of the PD rows after it (uxa, uda; uxb, udb), their
// loads issued PD rows ahead so they stay in flight through the reductions and stores of the rows
// between; every chunk's loads are issued before any is used
uint4 ux[NC], ud[NC], uxa[PD >= 1 ? NC : 1], uda[PD >= 1 ? NC : 1], uxb[PD >= 2 ? NC : 1], udb[PD >= 2 ? NC : 1];
// (STATS) the rows' saved mu and rstd, loaded with their x and dy
A smu = A(0), srs = A(0), smua = A(0), srsa = A(0), smub = A(0), srsb = A(0);
#define NORM_LOAD_ROW(bx, bd, bm, bs, rr)                                                      \
    {                                                                                          \
        const long rl = (rr), basel = (rl * long(G) + long(h)) * long(DH);                     \
        for (int i = 0; i < NC; i++) {                                                         \
            const int col = (i * 32 * WG + q) * V;                                             \
            bx[i] = nn_chunk_load<T, VEC>(x, basel + col, rl < R ? DH - col : 0);              \
            bd[i] = nn_chunk_load<T, VEC>(dy, basel + col, rl < R ? DH - col : 0);             \
        }                                                                                      \
        if (STATS != 0 && rl < R) {                                                            \
            bm = RMS == 0 ? A(saved[2 * (rl * long(G) + long(h))]) : A(0);                    \
            bs = A(saved[2 * (rl * long(G) + long(h)) + 1]);                                   \
        }                                                                                      \
    }
const long r00 = (p / long(G)) * RW + long(sr);
if constexpr (PD >= 1) NORM_LOAD_ROW(ux, ud, smu, srs, r00)
if constexpr (PD >= 2) NORM_LOAD_ROW(uxa, uda, smua, srsa, r00 + step)
// a group's sum over its WG SIMD groups, in order, from slot k of tred[par] (after lane 0 of each wrote
// its value there and a barrier)
#define NORM_GROUP_SUM(v, k)                                                         \
    {                                                                                \
        v = A(0);                                                                    \
        for (int kk = 0; kk < WG; kk++) v += tred[par][k][sr * WG + kk];             \
    }
for (long r0 = (p / long(G)) * RW; r0 < R; r0 += step) {
    const long r = r0 + long(sr);
    const bool ok = r < R;
    const long base = (r * long(G) + long(h)) * long(DH);
    if constexpr (PD == 0) NORM_LOAD_ROW(ux, ud, smu, srs, r)
    if constexpr (PD == 1) NORM_LOAD_ROW(uxa, uda, smua, srsa, r + step)
    if constexpr (PD == 2) NORM_LOAD_ROW(uxb, udb, smub, srsb, r + 2 * step)
    // LayerNorm: the mean first, then in one pass the deviations' squares and the sums of g = dy w and
    // g (x - mu); RMSNorm (mu = 0): that pass alone.
    // Elements past the group read as 0 (x, dy and w alike) and their deviations are taken as 0.
    A mu = A(0);
    A s2 = A(0), sg1 = A(0), sgx = A(0);
    if constexpr (STATS != 0) {
        // the forward's statistics: one pass for the sums of g and g (x - mu), one reduction round
        mu = smu;
        for (int i = 0; i < NC; i++) {
            const int col = (i * 32 * WG + q) * V;
            uint4 wu = uint4(0u, 0u, 0u, 0u);
            if constexpr (!WREG) wu = nn_chunk_load<T, VEC>(w, hw + col, ok ? DH - col : 0);
            for (int e = 0; e < V; e++) {
                const bool in = FULL != 0 || col + e < DH;
                const A dv = in ? nn_chunk_elem<T, A>(ux[i], e) - mu : A(0);
                const A gk = nn_chunk_elem<T, A>(ud[i], e) * nn_chunk_elem<T, A>(WREG ? wv[i] : wu, e);
                if (RMS == 0) sg1 += gk;
                sgx += gk * dv;
            }
        }
        if constexpr (RMS == 0) {
            const vec<A, 2> t = simd_sum(vec<A, 2>(sgx, sg1));
            sgx = t.x;
            sg1 = t.y;
        } else {
            sgx = simd_sum(sgx);
        }
        if (WG > 1) {
            if (lane == 0) {
                tred[par][2][sg] = sgx;
                tred[par][3][sg] = sg1;
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            NORM_GROUP_SUM(sgx, 2)
            NORM_GROUP_SUM(sg1, 3)
        }
    } else if constexpr (ONEPASS != 0 && RMS == 0 && SPLIT == 0) {
        // this lane's count, mean, squared deviations and g sums, then the pairwise combination (see top)
        A n = A(0), sx = A(0);
        for (int i = 0; i < NC; i++) {
            const int col = (i * 32 * WG + q) * V;
            for (int e = 0; e < V; e++)
                if (FULL != 0 || col + e < DH) {
                    sx += nn_chunk_elem<T, A>(ux[i], e);
                    n += A(1);
                }
        }
        A m = n > A(0) ? sx / n : A(0);
        for (int i = 0; i < NC; i++) {
            const int col = (i * 32 * WG + q) * V;
            uint4 wu = uint4(0u, 0u, 0u, 0u);
            if constexpr (!WREG) wu = nn_chunk_load<T, VEC>(w, hw + col, ok ? DH - col : 0);
            for (int e = 0; e < V; e++) {
                const bool in = FULL != 0 || col + e < DH;
                const A dv = in ? nn_chunk_elem<T, A>(ux[i], e) - m : A(0);
                const A gk = nn_chunk_elem<T, A>(ud[i], e) * nn_chunk_elem<T, A>(WREG ? wv[i] : wu, e);
                s2 += dv * dv;
                sg1 += gk;
                sgx += gk * dv;
            }
        }
        for (uint o = 1; o < 32; o *= 2) {
            const A nb = simd_shuffle_xor(n, o), mb = simd_shuffle_xor(m, o), m2b = simd_shuffle_xor(s2, o);
            const A gb = simd_shuffle_xor(sg1, o), gxb = simd_shuffle_xor(sgx, o);
            const bool up = (uint(lane) & o) != 0u;   // the pair's lower lane's values first, in both
            A na = up ? nb : n, ma = up ? mb : m, m2a = up ? m2b : s2, ga = up ? gb : sg1, gxa = up ? gxb : sgx;
            nn_stats_combine<A>(na, ma, m2a, ga, gxa, up ? n : nb, up ? m : mb, up ? s2 : m2b, up ? sg1 : gb,
                                up ? sgx : gxb);
            n = na, m = ma, s2 = m2a, sg1 = ga, sgx = gxa;
        }
        if (WG > 1) {
            if (lane == 0) {
                tred[par][0][sg] = n, tred[par][1][sg] = m, tred[par][2][sg] = s2;
                tred[par][3][sg] = sg1, tred[par][4][sg] = sgx;
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            n = tred[par][0][sr * WG], m = tred[par][1][sr * WG], s2 = tred[par][2][sr * WG];
            sg1 = tred[par][3][sr * WG], sgx = tred[par][4][sr * WG];
            for (int kk = 1; kk < WG; kk++) {
                const int at = sr * WG + kk;
                nn_stats_combine<A>(n, m, s2, sg1, sgx, tred[par][0][at], tred[par][1][at], tred[par][2][at],
                                    tred[par][3][at], tred[par][4][at]);
            }
        }
        mu = m;
    } else {
        // the pass's centre: LayerNorm's mean, from a round of its own; with SHIFT the row's first element
        // x0 (lane 0's), the pass's sums then moved to the mean (see top)
        A x0 = A(0);
        if constexpr (SHIFTED) {
            x0 = simd_broadcast(nn_chunk_elem<T, A>(ux[0], 0), 0u);
        } else if (RMS == 0) {
            A s = A(0);
            for (int i = 0; i < NC; i++)
                for (int e = 0; e < V; e++) s += nn_chunk_elem<T, A>(ux[i], e);
            A tot = simd_sum(s);
            if (WG > 1) {
                if (lane == 0) tred[par][0][sg] = tot;
                threadgroup_barrier(mem_flags::mem_threadgroup);
                NORM_GROUP_SUM(tot, 0)
            }
            mu = tot / A(DH);
        }
        if constexpr (SPLIT != 0) {
            // the deviations' squares in a round of their own, before the sums of g (timing variant)
            for (int i = 0; i < NC; i++) {
                const int col = (i * 32 * WG + q) * V;
                for (int e = 0; e < V; e++) {
                    const A dv = FULL != 0 || col + e < DH ? nn_chunk_elem<T, A>(ux[i], e) - mu : A(0);
                    s2 += dv * dv;
                }
            }
            s2 = simd_sum(s2);
            if (WG > 1) {
                if (lane == 0) tred[par][1][sg] = s2;
                threadgroup_barrier(mem_flags::mem_threadgroup);
                NORM_GROUP_SUM(s2, 1)
            }
        }
        const A centre = SHIFTED ? x0 : mu;
        A s1 = A(0);   // (SHIFT: the sum of the deviations from x0)
        for (int i = 0; i < NC; i++) {
            const int col = (i * 32 * WG + q) * V;
            uint4 wu = uint4(0u, 0u, 0u, 0u);
            if constexpr (!WREG) wu = nn_chunk_load<T, VEC>(w, hw + col, ok ? DH - col : 0);
            for (int e = 0; e < V; e++) {
                const bool in = FULL != 0 || col + e < DH;
                const A dv = in ? nn_chunk_elem<T, A>(ux[i], e) - centre : A(0);
                const A gk = nn_chunk_elem<T, A>(ud[i], e) * nn_chunk_elem<T, A>(WREG ? wv[i] : wu, e);
                if constexpr (SHIFTED) s1 += dv;
                if (SPLIT == 0) s2 += dv * dv;
                sg1 += gk;
                sgx += gk * dv;
            }
        }
        if constexpr (SHIFTED) {
            // the four sums as one vector, then moved from x0 to mu = x0 + mean(d) (one SIMD group a row)
            const vec<A, 4> t = simd_sum(vec<A, 4>(s1, s2, sgx, sg1));
            const A md = t.x * rdh;
            mu = x0 + md;
            s2 = max(t.y - t.x * md, A(0));
            sgx = t.z - md * t.w;
            sg1 = t.w;
        } else if constexpr (VSUM != 0 && SPLIT == 0 && RMS == 0) {
            // the three sums as one vector: its shuffles interleave instead of three chains in a row
            const vec<A, 3> t = simd_sum(vec<A, 3>(s2, sgx, sg1));
            s2 = t.x;
            sgx = t.y;
            sg1 = t.z;
        } else if constexpr (VSUM != 0 && SPLIT == 0) {
            const vec<A, 2> t = simd_sum(vec<A, 2>(s2, sgx));
            s2 = t.x;
            sgx = t.y;
        } else {
            if (SPLIT == 0) s2 = simd_sum(s2);
            sgx = simd_sum(sgx);
            if (RMS == 0) sg1 = simd_sum(sg1);
        }
        if (WG > 1) {
            if (lane == 0) {
                if (SPLIT == 0) tred[par][1][sg] = s2;
                tred[par][2][sg] = sgx;
                tred[par][3][sg] = sg1;
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            if (SPLIT == 0) NORM_GROUP_SUM(s2, 1)
            NORM_GROUP_SUM(sgx, 2)
            NORM_GROUP_SUM(sg1, 3)
        }
    }
    par ^= 1;
    // (the means of the sums by rdh = 1 / DH, one division a thread instead of three a row; LayerNorm's mean
    // above stays a division, so that a constant row's mean is its value exactly)
    const A rstd = STATS != 0 ? srs : A(1) / sqrt(s2 * rdh + eps);
    // dx = rstd (g - mean(g) - x^ mean(g x^)), mean(g x^) = rstd mean(g (x - mu))
    const A mg = RMS == 0 ? sg1 * rdh : A(0), mgx = rstd * (sgx * rdh);
    if (ok)
        for (int i = 0; i < NC; i++) {
            const int col = (i * 32 * WG + q) * V;
            if (FULL == 0 && col >= DH) continue;
            uint4 wu = uint4(0u, 0u, 0u, 0u);
            if constexpr (!WREG) wu = nn_chunk_load<T, VEC>(w, hw + col, DH - col);
            A o[V], cw[V], cb[V];
            for (int e = 0; e < V; e++) {
                const A xh = FULL != 0 || col + e < DH ? (nn_chunk_elem<T, A>(ux[i], e) - mu) * rstd : A(0);
                const A d = nn_chunk_elem<T, A>(ud[i], e);
                const A gk = d * nn_chunk_elem<T, A>(WREG ? wv[i] : wu, e);
                o[e] = rstd * (gk - mg - xh * mgx);
                cw[e] = d * xh;
                cb[e] = d;
                if constexpr (REG) {
                    rw_[i * V + e] += cw[e];
                    if (RMS == 0) rb_[i * V + e] += cb[e];
                }
            }
            if constexpr (!REG)
                for (int e = 0; e < V; e += VA) {
                    // VA sums a 16-byte access (see acc above)
                    accv tw, tb;
                    for (int c = 0; c < VA; c++) tw[c] = cw[e + c], tb[c] = cb[e + c];
                    const int m = (i * V + e) / VA;
                    accl[m * 32] += tw;
                    if (RMS == 0) accl[(NE / VA + m) * 32] += tb;
                }
            nn_chunk_store<T, A, VEC>(dx, base + col, DH - col, o);
        }
    for (int i = 0; i < NC; i++) {
        if constexpr (PD >= 1) {
            ux[i] = uxa[i];
            ud[i] = uda[i];
        }
        if constexpr (PD >= 2) {
            uxa[i] = uxb[i];
            uda[i] = udb[i];
        }
    }
    if constexpr (PD >= 1) smu = smua, srs = srsa;
    if constexpr (PD >= 2) smua = smub, srsa = srsb;
}
#undef NORM_GROUP_SUM
#undef NORM_LOAD_ROW
if constexpr (REG) {
    for (int k = 0; k < NE; k++) acc[acc_word(k, lane)] = rw_[k];
    if (RMS == 0)
        for (int k = 0; k < NE; k++) acc[acc_word(NE + k, lane)] = rb_[k];
}
threadgroup_barrier(mem_flags::mem_threadgroup);
// column j of the head: chunk c = j / V of lane q = c % (32 WG) of chunk row i = c / (32 WG); the RW row
// sets' sums added in order of sr
const long u = p / long(G);
for (int j = tid; j < DH; j += 256) {
    const int c = j / V, e = j % V, i = c / (32 * WG), qq = c % (32 * WG);
    A sw = A(0), sb = A(0);
    const threadgroup A *acc0 = (const threadgroup A *)alloy_threadgroup_memory;
    for (int k = 0; k < RW; k++) {
        const int o0 = (k * WG + qq / 32) * (NS * NE * 32) + acc_word(i * V + e, qq % 32);
        sw += acc0[o0];
        if (RMS == 0) sb += acc0[o0 + NE * 32];
    }
    part[u * 2 * D + hw + j] = sw;
    part[u * 2 * D + D + hw + j] = sb;
}
