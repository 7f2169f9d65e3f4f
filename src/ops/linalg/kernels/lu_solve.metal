// lu_solve: A X = B (or A^T X = B) from LAPACK's LU factorization of A
// (getrs), for a batch: P A = L U, LU and ipiv as lu_factor_* write them.
//   LU   (batch, n, n), ipiv (batch, n) int32 (1-based; an entry outside
//        [1, n] acts as no interchange), B (batch, n, nrhs), X (batch, n,
//        nrhs); X may be the same buffer as B (each simdgroup reads its
//        column whole before writing it). With IDENT, B is the identity
//        (not read; any array may be bound) and X = A^-1 (nrhs = n).
// Launch constants: int n, int ld (row stride of the copy of LU in
// threadgroup memory, odd), int nrhs, int cols (right-hand sides per
// threadgroup), int tiles (threadgroups per matrix = ceil(nrhs / cols)),
// long batch.
// Template: T (float or double), Q = ceil(n / 32) (registers per lane),
// TRANS (solve with A^T), IDENT (B = I), SMEM (LU copied into dynamic
// threadgroup memory, n * ld * sizeof(T) bytes; else read from LU in place).
// Dynamic threadgroup memory: that copy (with SMEM), then 2 n int32.
// Launch: grid = (batch * tiles * NT, 1, 1) threads, threadgroup = (NT, 1, 1)
// with NT a multiple of 32: threadgroup g solves matrix g / tiles, columns
// (g % tiles) * cols + w, + NT/32, ... (w its simdgroup).
//
// One simdgroup per right-hand side: lane l holds rows l, l + 32, ... of
// the column in registers; each substitution step broadcasts the finished
// row with one shuffle and every lane updates its rows, so the triangular
// solves need no barrier (only loading LU into threadgroup memory does).
//   A X = B:   y = P b (ipiv's swaps), L y' = y (unit lower), U x = y'.
//   A^T X = B: U^T w = b, L^T y = w, x = P^T y (P A = L U, so
//              A^T = U^T L^T P).
//! name: alloy_lu_solve
//! inputs: LU ipiv B
//! outputs: X
//! template: T=float32
//! template: Q=1
//! template: TRANS=false
//! template: IDENT=false
//! template: SMEM=true
//! header:
// Element (i, k) of x's column, every lane: x row k lives in lane k % 32,
// register k / 32 (selected without dynamic indexing).
template <int Q, class Tp> inline Tp alloy_lus_row(const thread Tp *x, int k) {
  Tp s = x[0];
#pragma unroll
  for (int q = 1; q < Q; q++)
    if (q == (k >> 5)) s = x[q];
#if defined(ALLOY_BACKEND_CUDA)
  return __shfl_sync(0xffffffffu, s, k & 31); // every lane of the simdgroup is here
#else
  return simd_shuffle(s, uint(k & 31));
#endif
}
template <int Q, class Tp> inline void alloy_lus_set(thread Tp *x, int k, int lane, Tp v) {
#pragma unroll
  for (int q = 0; q < Q; q++)
    if (q == (k >> 5) && lane == (k & 31)) x[q] = v;
}

// Solves one column held in x (rows lane + 32 q) with the factor at F
// (row stride ld).
template <int Q, bool TR, class Tp, class P>
inline void alloy_lus_column(thread Tp *x, P F, int n, int ld, int lane) {
  if (!TR) {
    for (int k = 0; k < n; k++) { // L y = x, unit diagonal
      const Tp xk = alloy_lus_row<Q>(x, k);
#pragma unroll
      for (int q = 0; q < Q; q++) {
        const int i = lane + 32 * q;
        if (i > k && i < n) x[q] = x[q] - Tp(F[long(i) * ld + k]) * xk;
      }
    }
    for (int k = n - 1; k >= 0; k--) { // U x = y
      const Tp xk = alloy_lus_row<Q>(x, k) / Tp(F[long(k) * ld + k]);
      alloy_lus_set<Q>(x, k, lane, xk);
#pragma unroll
      for (int q = 0; q < Q; q++) {
        const int i = lane + 32 * q;
        if (i < k) x[q] = x[q] - Tp(F[long(i) * ld + k]) * xk;
      }
    }
  } else {
    for (int k = 0; k < n; k++) { // U^T w = b (lower, U(k,i) is U^T(i,k))
      const Tp xk = alloy_lus_row<Q>(x, k) / Tp(F[long(k) * ld + k]);
      alloy_lus_set<Q>(x, k, lane, xk);
#pragma unroll
      for (int q = 0; q < Q; q++) {
        const int i = lane + 32 * q;
        if (i > k && i < n) x[q] = x[q] - Tp(F[long(k) * ld + i]) * xk;
      }
    }
    for (int k = n - 1; k >= 0; k--) { // L^T y = w, unit diagonal
      const Tp xk = alloy_lus_row<Q>(x, k);
#pragma unroll
      for (int q = 0; q < Q; q++) {
        const int i = lane + 32 * q;
        if (i < k) x[q] = x[q] - Tp(F[long(k) * ld + i]) * xk;
      }
    }
  }
}
//! body:
const int tid = int(thread_index_in_threadgroup);
const int nt = int(threads_per_threadgroup.x);
const int lane = tid & 31, w = tid >> 5, nw = nt >> 5;
const long g = long(threadgroup_position_in_grid.x);
const long mat = g / tiles;
const int c0 = int(g % tiles) * cols;
const int cend = min(c0 + cols, nrhs);
const long fbase = mat * long(n) * long(n);
const long xbase = mat * long(n) * long(nrhs);
// perm: the row of B that row r of P B comes from, in threadgroup memory
// after the matrix (LAPACK's swaps applied in order by one thread, from a
// copy of ipiv that the whole group loads first: one thread reading ipiv
// from device memory pays a memory latency per swap).
threadgroup int *pr = (threadgroup int *)(alloy_threadgroup_memory + (SMEM ? long(n) * ld * long(sizeof(T)) : 0));
threadgroup int *pv = pr + n;
if (mat < batch) {
    for (int k = tid; k < n; k += nt) pv[k] = ipiv[mat * n + k];
    if (SMEM) {
        threadgroup T *F = (threadgroup T *)alloy_threadgroup_memory;
        for (int i = w; i < n; i += nw)
            for (int j = lane; j < n; j += 32) F[long(i) * ld + j] = LU[fbase + long(i) * n + j];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0) {
        for (int r = 0; r < n; r++) pr[r] = r;
        for (int k = 0; k < n; k++) {
            int p = pv[k] - 1;
            if (p < 0 || p >= n) p = k;
            const int t = pr[k];
            pr[k] = pr[p];
            pr[p] = t;
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int c = c0 + w; c < cend; c += nw) {
        T x[Q];
        #pragma unroll
        for (int q = 0; q < Q; q++) {
            const int i = lane + 32 * q;
            T v = T(0);
            if (i < n) {
                const int src = TRANS ? i : pr[i];
                if (IDENT) v = src == c ? T(1) : T(0);
                else v = B[xbase + long(src) * nrhs + c];
            }
            x[q] = v;
        }
        if (SMEM) alloy_lus_column<Q, TRANS>(x, (threadgroup T *)alloy_threadgroup_memory, n, ld, lane);
        else alloy_lus_column<Q, TRANS>(x, LU + fbase, n, n, lane);
        #pragma unroll
        for (int q = 0; q < Q; q++) {
            const int i = lane + 32 * q;
            if (i < n) X[xbase + long(TRANS ? pr[i] : i) * nrhs + c] = x[q];
        }
    }
}
