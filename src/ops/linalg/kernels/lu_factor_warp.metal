// lu_factor_warp: LU with partial pivoting (LAPACK getrf) of a batch of small
// matrices, n <= W <= 32, each held in the registers of W lanes of a SIMD
// group (32 / W matrices per simdgroup, no threadgroup memory, no barriers).
//   A   (batch, n, n) row-major, float or double (template T); may be the
//       same buffer as LU (in place: every lane reads its row before the
//       first SIMD operation and writes only after the last)
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
// |x| as an unsigned integer that orders like |x| (NaN above infinity).
inline uint alloy_lu_key(float x) { return as_type<uint>(fabs(x)); }
inline ulong alloy_lu_key(double x) { return as_type<ulong>(fabs(x)); }
// Whole-simdgroup exchanges. The launch pads the grid to whole
// threadgroups and the control flow around every call is uniform, so all
// 32 lanes take part: on CUDA the warp intrinsics with a full mask (the
// portable simd_* functions first compute the active lanes, which costs
// more than the shuffle itself); elsewhere the MSL functions.
template <class X> inline X alloy_lu_shfl(X v, uint src) {
#if defined(ALLOY_BACKEND_CUDA)
  return __shfl_sync(0xffffffffu, v, int(src));
#else
  return simd_shuffle(v, src);
#endif
}
template <class X> inline X alloy_lu_shfl_xor(X v, uint mask) {
#if defined(ALLOY_BACKEND_CUDA)
  return __shfl_xor_sync(0xffffffffu, v, int(mask));
#else
  return simd_shuffle_xor(v, mask);
#endif
}
inline uint alloy_lu_ballot(bool b) {
#if defined(ALLOY_BACKEND_CUDA)
  return __ballot_sync(0xffffffffu, b);
#else
  return uint(ulong(simd_ballot(b)));
#endif
}
//! body:
typedef decltype(alloy_lu_key(T(0))) Key;
const uint lane = thread_index_in_simdgroup;
const int r = int(lane % uint(W));
const uint seg = lane - uint(r);
const long mat = long(thread_position_in_grid.x / uint(W));
const bool mine = mat < batch && r < n;
const long base = mat * long(n) * long(n);
T a[W];
#pragma unroll
for (int j = 0; j < W; j++) a[j] = (mine && j < n) ? T(A[base + long(r) * n + j]) : T(0);
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
        if (j < n) LU[base + long(pos) * n + j] = a[j];
    ipiv[mat * n + r] = my_ipiv;
    if (r == 0) info[mat] = first_zero;
}
