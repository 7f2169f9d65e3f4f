// lu_factor_blocked: LU with partial pivoting (LAPACK getrf) of a batch of
// matrices, one threadgroup per matrix, blocked right-looking: the GPU path
// for n > 32 (any n >= 1 works, on any backend).
//   A, LU, ipiv, info: as lu_factor_warp (A may be the same buffer as LU).
// Launch constants: int n, int ld (row stride of the working matrix: n | 1
// in threadgroup memory, n in device memory), long batch.
// Template: T (float or double), SMEM: true = the matrix is factored in
// dynamic threadgroup memory (n * ld elements); false = in place in LU
// (device memory), with the current panel (n x 33 elements), the block row
// of U (32 x n elements) and a row map (n int32) in dynamic threadgroup
// memory, in that order.
// Launch: grid = (batch * NT, 1, 1) threads, threadgroup = (NT, 1, 1), NT a
// multiple of 32: one threadgroup per matrix.
//
// Panels of up to 32 columns; for each panel at column k0 (pb columns):
//  1. the panel (rows k0..n-1) is factored one column at a time, two
//     barriers per column: simdgroup 0 finds the pivot (each lane the first
//     maximum of |a(i,k)| over its rows, then a butterfly, ties to the
//     smaller row: LAPACK's i?amax, NaN above every number) and swaps the
//     two rows within the panel; then every thread takes rows below the
//     pivot, divides the column by the pivot (left as it is when the pivot is
//     exactly zero: info records the first such step) and updates the rest
//     of the panel's row;
//  2. one thread per column outside the panel applies the panel's row
//     interchanges to its column (LAPACK's laswp: the result is that of
//     swapping whole rows at every step) and, right of the panel, solves
//     L11 U12 = A12 for its column (unit lower triangle, blocks of 8 rows in
//     registers);
//  3. the trailing matrix takes A22 -= L21 U12: 16 x 32 tiles, one per
//     simdgroup at a time, each thread 4 rows x 4 columns (columns strided by
//     8: conflict-free reads of U12, whole 32-byte sectors of device memory).
// Every element takes its updates a - l u one at a time, in the order of
// the unblocked algorithm, each a fused multiply-add (the tile's sums start
// from the element, not from zero): the roundings are those of the
// unblocked right-looking LU, so equal rows stay equal and a repeated row
// still gives an exactly zero pivot.
// In device memory the panel is copied to threadgroup memory for steps 1
// and 3 (and back after 1); step 2 reads each row that moves once (the row
// map says which original row ends up where) and stages the block row in
// threadgroup memory, where it is solved and read by step 3.
//! name: alloy_lu_factor_blocked
//! inputs: A
//! outputs: LU ipiv info
//! template: T=float32
//! template: SMEM=true
//! header:
// |x| as an unsigned integer that orders like |x| (NaN above infinity).
inline uint alloy_lu_key(float x) { return as_type<uint>(fabs(x)); }
inline ulong alloy_lu_key(double x) { return as_type<ulong>(fabs(x)); }

// Step 1: factors the pb panel columns, pan(i, c) = pan[i * ldp + c] for rows
// i >= k0 (absolute row numbers), swapping rows within the panel only. The
// pivot rows go to prow[c] and ipiv; rmap (when not null) follows the swaps:
// rmap[i] is the original row now at row i. Returns first_zero updated
// (meaningful in simdgroup 0).
template <class Tp, class PP, class PI, class SI, class RI>
inline int alloy_lub_panel(PP pan, int ldp, int n, int k0, int pb, PI ipv, SI prow, RI rmap, bool track,
                           int first_zero, int tid, int nt) {
  typedef decltype(alloy_lu_key(Tp(0))) Key;
  const int lane = tid & 31, warp = tid >> 5;
  for (int c = 0; c < pb; c++) {
    const int k = k0 + c;
    if (warp == 0) {
      Key best = Key(0);
      int bi = INT_MAX;
      for (int i = k + lane; i < n; i += 32) {
        const Key key = alloy_lu_key(Tp(pan[long(i) * ldp + c]));
        if (bi == INT_MAX || key > best) {
          best = key;
          bi = i;
        }
      }
      for (uint o = 16u; o > 0u; o >>= 1) {
#if defined(ALLOY_BACKEND_CUDA) // simdgroup 0 whole: full-mask intrinsics
        const Key ob = __shfl_xor_sync(0xffffffffu, best, int(o));
        const int oi = __shfl_xor_sync(0xffffffffu, bi, int(o));
#else
        const Key ob = simd_shuffle_xor(best, o);
        const int oi = simd_shuffle_xor(bi, o);
#endif
        if (ob > best || (ob == best && oi < bi)) {
          best = ob;
          bi = oi;
        }
      }
      // each lane swaps one column of the panel (no lane reads another's)
      if (bi != k && lane < pb) {
        const Tp t = pan[long(k) * ldp + lane];
        pan[long(k) * ldp + lane] = pan[long(bi) * ldp + lane];
        pan[long(bi) * ldp + lane] = t;
      }
      if (best == Key(0) && first_zero == 0) first_zero = k + 1; // |pivot| == 0
      if (lane == 0) {
        prow[c] = bi;
        ipv[k] = bi + 1;
        if (track && bi != k) {
          const int t = rmap[k];
          rmap[k] = rmap[bi];
          rmap[bi] = t;
        }
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const Tp piv = pan[long(k) * ldp + c];
    for (int i = k + 1 + tid; i < n; i += nt) {
      const Tp x = pan[long(i) * ldp + c];
      const Tp l = piv != Tp(0) ? x / piv : x;
      pan[long(i) * ldp + c] = l;
      for (int j = c + 1; j < pb; j++)
        pan[long(i) * ldp + j] = fma(-l, Tp(pan[long(k) * ldp + j]), Tp(pan[long(i) * ldp + j]));
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  return first_zero;
}

// Step 2's solve for one column j: u(r) -= sum_{q<r} L(r, q) u(q), u(r) =
// U[r * ldu + j], L(r, q) = pan[(k0 + r) * ldp + q] (unit diagonal), in
// blocks of 8 rows held in registers (sums in LAPACK's order, q rising).
template <class Tp, class PP, class UP>
inline void alloy_lub_trsm_col(PP pan, int ldp, UP U, int ldu, int k0, int pb, int j) {
  for (int r0 = 0; r0 < pb; r0 += 8) {
    Tp x[8];
#pragma unroll
    for (int t = 0; t < 8; t++) x[t] = r0 + t < pb ? Tp(U[long(r0 + t) * ldu + j]) : Tp(0);
    for (int q = 0; q < r0; q++) {
      const Tp uq = U[long(q) * ldu + j];
#pragma unroll
      for (int t = 0; t < 8; t++)
        if (r0 + t < pb) x[t] = fma(-Tp(pan[long(k0 + r0 + t) * ldp + q]), uq, x[t]);
    }
#pragma unroll
    for (int s = 0; s < 8; s++)
#pragma unroll
      for (int t = s + 1; t < 8; t++)
        if (r0 + t < pb) x[t] = fma(-Tp(pan[long(k0 + r0 + t) * ldp + r0 + s]), x[s], x[t]);
#pragma unroll
    for (int t = 0; t < 8; t++)
      if (r0 + t < pb) U[long(r0 + t) * ldu + j] = x[t];
  }
}

// Step 3: W(i, j) -= sum_{l<pb} pan(i, l) U(l, j) for i, j >= r0.
template <class Tp, class WP, class PP, class UP>
inline void alloy_lub_update(WP W, int ld, PP pan, int ldp, UP U, int ldu, int n, int r0, int pb, int tid,
                             int nt) {
  const int warp = tid >> 5, lane = tid & 31, nwarps = nt >> 5;
  const int m = n - r0;
  const int rb = (m + 15) >> 4, cb = (m + 31) >> 5;
  const int ty = lane >> 3, tx = lane & 7;
  for (int t = warp; t < rb * cb; t += nwarps) {
    const int bi = t / cb, bj = t - bi * cb;
    const int i0 = r0 + bi * 16 + 4 * ty, j0 = r0 + bj * 32 + tx;
    int ri[4], cj[4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
      ri[u] = i0 + u < n ? i0 + u : n - 1;
      cj[u] = j0 + 8 * u < n ? j0 + 8 * u : n - 1;
    }
    Tp acc[4][4];
#pragma unroll
    for (int u = 0; u < 4; u++)
#pragma unroll
      for (int v = 0; v < 4; v++) acc[u][v] = W[long(ri[u]) * ld + cj[v]];
    for (int l = 0; l < pb; l++) {
      Tp a[4], b[4];
#pragma unroll
      for (int u = 0; u < 4; u++) {
        a[u] = pan[long(ri[u]) * ldp + l];
        b[u] = U[long(l) * ldu + cj[u]];
      }
#pragma unroll
      for (int u = 0; u < 4; u++)
#pragma unroll
        for (int v = 0; v < 4; v++) acc[u][v] = fma(-a[u], b[v], acc[u][v]);
    }
#pragma unroll
    for (int u = 0; u < 4; u++) {
      if (i0 + u >= n) continue;
#pragma unroll
      for (int v = 0; v < 4; v++) {
        const int j = j0 + 8 * v;
        if (j < n) W[long(i0 + u) * ld + j] = acc[u][v];
      }
    }
  }
}

// The factorization of the matrix at W (row stride ld) by the threadgroup
// (see the file's comment). sm: W is the threadgroup memory at dyn; else W
// is device memory and dyn holds the panel (n x 33), the block row of U
// (32 x n) and the row map (n int32). Returns info (meaningful in thread 0).
template <class Tp, class WP, class DP, class PI, class SI>
inline int alloy_lub_factor(WP W, int ld, DP dyn, bool sm, int n, PI ipv, SI prow, int tid, int nt) {
  int first_zero = 0;
  const int ldp = sm ? ld : 33, ldu = sm ? ld : n;
  threadgroup int *rmap = (threadgroup int *)(dyn + (sm ? 0L : long(n) * 33 + 32L * n));
  for (int k0 = 0; k0 < n; k0 += 32) {
    const int pb = n - k0 < 32 ? n - k0 : 32, r0 = k0 + pb;
    auto pan = sm ? dyn + k0 : dyn;
    auto U = sm ? dyn + long(k0) * ld : dyn + long(n) * 33;
    if (!sm) {
      for (int e = tid; e < (n - k0) * 32; e += nt) {
        const int i = k0 + (e >> 5), c = e & 31;
        if (c < pb) pan[long(i) * 33 + c] = W[long(i) * ld + k0 + c];
      }
      for (int i = k0 + tid; i < n; i += nt) rmap[i] = i;
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    first_zero = alloy_lub_panel<Tp>(pan, ldp, n, k0, pb, ipv, prow, rmap, !sm, first_zero, tid, nt);
    // step 2 (the panel's barriers have published prow and rmap)
    for (int j = tid; j < n; j += nt) {
      if (j >= k0 && j < r0) continue;
      if (sm) {
        for (int c = 0; c < pb; c++) {
          const int p = prow[c];
          if (p != k0 + c) {
            const Tp t = W[long(k0 + c) * ld + j];
            W[long(k0 + c) * ld + j] = W[long(p) * ld + j];
            W[long(p) * ld + j] = t;
          }
        }
      } else {
        // every read of an original row before the writes: the block row's
        // final contents to U's column j, then the rows below the block that
        // took a block row (a block row's original is still in W)
        for (int r = 0; r < pb; r++) U[long(r) * ldu + j] = W[long(rmap[k0 + r]) * ld + j];
        for (int c = 0; c < pb; c++) {
          const int p = prow[c];
          if (p >= r0) W[long(p) * ld + j] = W[long(rmap[p]) * ld + j];
        }
      }
      if (j >= r0) alloy_lub_trsm_col<Tp>(pan, ldp, U, ldu, k0, pb, j);
      if (!sm)
        for (int r = 0; r < pb; r++) W[long(k0 + r) * ld + j] = U[long(r) * ldu + j];
    }
    if (!sm)
      for (int e = tid; e < (n - k0) * 32; e += nt) {
        const int i = k0 + (e >> 5), c = e & 31;
        if (c < pb) W[long(i) * ld + k0 + c] = pan[long(i) * 33 + c];
      }
    threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
    if (r0 < n) {
      alloy_lub_update<Tp>(W, ld, pan, ldp, U, ldu, n, r0, pb, tid, nt);
      threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
    }
  }
  return first_zero;
}
//! body:
threadgroup int s_prow[32];
const int tid = int(thread_index_in_threadgroup);
const int nt = int(threads_per_threadgroup.x);
const long mat = long(threadgroup_position_in_grid.x);
if (mat < batch) {
    const long base = mat * long(n) * long(n);
    const int tx = tid & 31, ty = tid >> 5, ny = nt >> 5;
    threadgroup T *dyn = (threadgroup T *)alloy_threadgroup_memory;
    int first_zero = 0;
    if (SMEM) {
        for (int i = ty; i < n; i += ny)
            for (int j = tx; j < n; j += 32) dyn[long(i) * ld + j] = A[base + long(i) * n + j];
        threadgroup_barrier(mem_flags::mem_threadgroup);
        first_zero = alloy_lub_factor<T>(dyn, ld, dyn, true, n, ipiv + mat * n, &s_prow[0], tid, nt);
        for (int i = ty; i < n; i += ny)
            for (int j = tx; j < n; j += 32) LU[base + long(i) * n + j] = dyn[long(i) * ld + j];
    } else {
        // in place in LU (a copy of A first unless A is LU)
        for (int i = ty; i < n; i += ny)
            for (int j = tx; j < n; j += 32) LU[base + long(i) * n + j] = A[base + long(i) * n + j];
        threadgroup_barrier(mem_flags::mem_device);
        first_zero = alloy_lub_factor<T>(LU + base, n, dyn, false, n, ipiv + mat * n, &s_prow[0], tid, nt);
    }
    if (tid == 0) info[mat] = first_zero;
}
