// lu_factor_warp: LU with partial pivoting (LAPACK getrf) of a batch of small
// matrices, n <= W <= 32, each held in the registers of W lanes of a SIMD
// group (32 / W matrices per simdgroup, no threadgroup barriers). The
// simdgroup's matrices are one contiguous block of memory: they are read
// and written with consecutive lanes on consecutive elements, through a
// per-simdgroup staging area in threadgroup memory (rows padded to W + 1
// elements, so a lane walking its row meets no bank conflicts), instead of
// one row per lane, which touches 32 cache lines per access.
//   A   (batch, n, n) row-major, float or double (template T); may be the
//       same buffer as LU (in place: a simdgroup reads its whole block of
//       matrices before it writes any of it)
//   LU  (batch, n, n): L below the diagonal (unit diagonal implied), U on and
//       above it, rows in LAPACK's final order
//   ipiv (batch, n) int32: LAPACK's 1-based pivots (row k was interchanged
//       with row ipiv[k] - 1 at step k)
//   info (batch) int32: 0, or k + 1 for the first step k whose pivot is
//       exactly zero (the factorization is completed, as LAPACK does)
// Launch constants: int n, long batch. Template: T, W (8, 16 or 32, W >= n).
// Launch: grid = (ceil(batch * W / 128) * 128, 1, 1) threads, threadgroup =
// (128, 1, 1): lane r of each W-lane segment owns row r of its matrix; rows
// >= n and matrices >= batch are idle lanes that still take part in the
// SIMD operations (their control flow is uniform).
//
// Rows never move: each lane keeps `pos`, the position LAPACK's row swaps
// have given its row so far, and `done` once its row was chosen as a pivot.
// Step k: a butterfly over the segment picks the largest |a(:,k)| among the
// rows not done, ties to the smallest position (LAPACK's i?amax: the first
// index of the maximum; NaN counts as larger than every number, so a NaN
// column propagates); the pivot row is broadcast one element at a time and
// every remaining row subtracts its multiple. At the end each lane writes
// its row at its final position, which is exactly where LAPACK's swaps of
// whole rows leave it.
//! name: alloy_lu_factor_warp
//! inputs: A
//! outputs: LU ipiv info
//! template: T=float32
//! template: W=32
//! header:
#include "src/ops/linalg/kernels/lu_warp.h"
//! body:
typedef decltype(alloy_lu_key(T(0))) Key;
const uint lane = thread_index_in_simdgroup;
const int r = int(lane % uint(W));
const uint seg = lane - uint(r);
const long mat = long(thread_position_in_grid.x / uint(W));
const bool mine = mat < batch && r < n;
// Staging: the simdgroup's `cnt` matrices from mat0 on, row p of matrix mm
// at st[(mm * W + p) * (W + 1)] (lu_warp.h).
constexpr int LDS = W + 1;
threadgroup T stage[4 * 32 * LDS]; // 4 simdgroups of 128 threads, 32 rows each
threadgroup T *st = stage + simdgroup_index_in_threadgroup * (32 * LDS);
const long mat0 = long((thread_position_in_grid.x - lane) / uint(W));
const long left = batch - mat0;
const int cnt = left < long(32 / W) ? int(left > 0 ? left : 0) : 32 / W;
const long total = long(cnt) * (n * n);
alloy_lu_stage<W, true>(st, LDS, A, mat0 * (n * n), total, n, n, lane);
simdgroup_barrier(mem_flags::mem_threadgroup);
T a[W];
#pragma unroll
for (int j = 0; j < W; j++) a[j] = (mine && j < n) ? T(st[(int(seg) + r) * LDS + j]) : T(0);
simdgroup_barrier(mem_flags::mem_threadgroup); // every row read before any is written back
int pos = r;          // LAPACK's position of this row after the swaps so far
bool done = false;    // the row was a pivot
int my_ipiv = 0;      // lane r: ipiv[r]
int first_zero = 0;
const uint segmask = W == 32 ? 0xffffffffu : ((1u << uint(W)) - 1u);
#pragma unroll
for (int k = 0; k < W; k++) {
    if (k < n) {
        const T v = a[k];
        const bool cand = mine && !done;
        Key key = cand ? alloy_lu_key(v) : Key(0);
        int kp = cand ? pos : INT_MAX;
        #pragma unroll
        for (uint o = uint(W) / 2u; o > 0u; o >>= 1) {
            const Key ok = alloy_lu_shfl_xor(key, o);
            const int op = alloy_lu_shfl_xor(kp, o);
            if (ok > key || (ok == key && op < kp)) {
                key = ok;
                kp = op;
            }
        }
        const bool is_piv = cand && pos == kp;
        const uint bits = (alloy_lu_ballot(is_piv) >> seg) & segmask;
        const uint pl = bits ? seg + uint(ctz(bits)) : lane;
        const T piv = alloy_lu_shfl(v, pl);
        if (r == k) my_ipiv = kp + 1;
        if (is_piv) {
            pos = k;
            done = true;
        } else if (cand && pos == k) {
            pos = kp;
        }
        if (piv == T(0) && first_zero == 0) first_zero = k + 1;
        T l = v;
        if (mine && !done) {
            if (piv != T(0)) l = v / piv;
            a[k] = l;
        }
        #pragma unroll
        for (int j = k + 1; j < W; j++) {
            if (j < n) {
                const T u = alloy_lu_shfl(a[j], pl);
                if (mine && !done) a[j] = a[j] - l * u;
            }
        }
    }
}
if (mine) {
    #pragma unroll
    for (int j = 0; j < W; j++)
        if (j < n) st[(int(seg) + pos) * LDS + j] = a[j];
    ipiv[mat * n + r] = my_ipiv;
    if (r == 0) info[mat] = first_zero;
}
simdgroup_barrier(mem_flags::mem_threadgroup);
alloy_lu_stage<W, false>(st, LDS, LU, mat0 * (n * n), total, n, n, lane);
