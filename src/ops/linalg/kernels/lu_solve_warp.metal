// lu_solve_warp: A X = B for a batch of small matrices, n <= W <= 32, in one
// kernel: LU with partial pivoting exactly as lu_factor_warp (same register
// layout, pivots and roundings of the factor), the elimination applied to
// B's rows as it goes, then the back substitution U X = Y — LAPACK's getrf
// + getrs (numpy.linalg.solve) without the factor's round trip through
// device memory or a second launch. Lane r of a W-lane segment owns row r
// of its matrix and of B (nrhs <= R right-hand sides), all in registers.
//   A    (batch, n, n) row-major, float or double (template T)
//   B    (batch, n, nrhs) row-major ((batch, n) for nrhs = 1); may be the
//        same buffer as X, and A may be X where the shapes agree (a
//        simdgroup reads all of its matrices' A and B before it writes X)
//   X    (batch, n, nrhs) the solution; inf/NaN for a matrix whose factor
//        has an exactly zero pivot (as getrs gives), NaN for a NaN matrix
//   info (batch) int32: 0, or k + 1 for the first step k whose pivot is
//        exactly zero (LAPACK's getrf info, lu_factor_warp's)
// Launch constants: int n, int nrhs (1 <= nrhs <= R), long batch.
// Template: T, W (8, 16 or 32, W >= n), R (1, 2, 4, 8, 16 or 32, R >= nrhs).
// Launch: grid = (ceil(batch * W / 128) * 128, 1, 1) threads, threadgroup =
// (128, 1, 1), as lu_factor_warp.
//
// Elimination step k (lu_factor_warp's): the pivot row is found by a
// butterfly over the segment, broadcast one element at a time, and every
// remaining row subtracts its multiple — of its row of A and, with the same
// multiplier, of its row of B, so when the factor ends the lane of the row
// at position k holds row k of U and of Y = L^-1 P B. Back substitution:
// each lane first divides its row of U and of Y by its pivot (U becomes
// unit upper triangular; these divisions are independent, so the
// substitution's dependent chain is one shuffle and one multiply-add per
// step and right-hand side); then for k = n-1 down to 0 the lane at
// position k (found by a shuffle of the lane map recorded during the
// factor) broadcasts its finished x_k and the rows above subtract U(i,k)
// x_k. With nrhs = 1 B and X are read and written straight from device
// memory (the segment's lanes touch one contiguous run of elements);
// otherwise through the staging area, as A is.
//! name: alloy_lu_solve_warp
//! inputs: A B
//! outputs: X info
//! template: T=float32
//! template: W=32
//! template: R=1
//! header:
#include "src/ops/linalg/kernels/lu_warp.h"
//! body:
typedef decltype(alloy_lu_key(T(0))) Key;
const uint lane = thread_index_in_simdgroup;
const int r = int(lane % uint(W));
const uint seg = lane - uint(r);
const long mat = long(thread_position_in_grid.x / uint(W));
const bool mine = mat < batch && r < n;
// Staging (lu_warp.h): the simdgroup's `cnt` matrices from mat0 on, row p of
// matrix mm at st[(mm * W + p) * ld], ld = W + 1 for A and R + 1 for B and
// X (odd: a lane walking its row meets no bank conflicts).
constexpr int LDA = W + 1;
constexpr int LDB = R + 1;
constexpr int LDS = W > R ? LDA : LDB;
threadgroup T stage[4 * 32 * LDS]; // 4 simdgroups of 128 threads, 32 rows each
threadgroup T *st = stage + simdgroup_index_in_threadgroup * (32 * LDS);
const long mat0 = long((thread_position_in_grid.x - lane) / uint(W));
const long left = batch - mat0;
const int cnt = left < long(32 / W) ? int(left > 0 ? left : 0) : 32 / W;
alloy_lu_stage<W, true>(st, LDA, A, mat0 * (n * n), long(cnt) * (n * n), n, n, lane);
simdgroup_barrier(mem_flags::mem_threadgroup);
T a[W];
#pragma unroll
for (int j = 0; j < W; j++) a[j] = (mine && j < n) ? T(st[(int(seg) + r) * LDA + j]) : T(0);
simdgroup_barrier(mem_flags::mem_threadgroup); // every row of A read before B overwrites it
T b[R];
const long bbase = mat0 * long(n * nrhs), btotal = long(cnt) * (n * nrhs);
if (R == 1) {
    b[0] = mine ? T(B[mat * n + r]) : T(0);
} else {
    alloy_lu_stage<W, true>(st, LDB, B, bbase, btotal, n, nrhs, lane);
    simdgroup_barrier(mem_flags::mem_threadgroup);
    #pragma unroll
    for (int c = 0; c < R; c++) b[c] = (mine && c < nrhs) ? T(st[(int(seg) + r) * LDB + c]) : T(0);
}
int pos = r;          // LAPACK's position of this row after the swaps so far
bool done = false;    // the row was a pivot
T diag = T(1);        // its pivot, U(pos, pos)
int lane_of = int(lane); // lane r: the lane whose row ends at position r
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
        if (r == k) lane_of = int(pl);
        if (is_piv) {
            pos = k;
            done = true;
            diag = v;
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
        #pragma unroll
        for (int c = 0; c < R; c++) {
            const T u = alloy_lu_shfl(b[c], pl);
            if (mine && !done) b[c] = b[c] - l * u;
        }
    }
}
// U x = y: rows scaled by their pivots (a zero pivot gives inf/NaN there,
// which reaches x as getrs's division does), then unit upper substitution.
if (mine) {
    #pragma unroll
    for (int j = 0; j < W; j++)
        if (j < n) a[j] = a[j] / diag;
    #pragma unroll
    for (int c = 0; c < R; c++) b[c] = b[c] / diag;
}
#pragma unroll
for (int k = W - 1; k > 0; k--) {
    if (k < n) {
        const uint src = uint(alloy_lu_shfl(lane_of, seg + uint(k)));
        #pragma unroll
        for (int c = 0; c < R; c++) {
            const T xk = alloy_lu_shfl(b[c], src);
            if (pos < k) b[c] = b[c] - a[k] * xk;
        }
    }
}
if (R == 1) {
    if (mine) X[mat * n + pos] = b[0];
} else {
    simdgroup_barrier(mem_flags::mem_threadgroup); // every row of B read before X overwrites it
    if (mine) {
        #pragma unroll
        for (int c = 0; c < R; c++)
            if (c < nrhs) st[(int(seg) + pos) * LDB + c] = b[c];
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);
    alloy_lu_stage<W, false>(st, LDB, X, bbase, btotal, n, nrhs, lane);
}
if (mine && r == 0) info[mat] = first_zero;
