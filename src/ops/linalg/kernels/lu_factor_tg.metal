// lu_factor_tg: LU with partial pivoting (LAPACK getrf) of a batch of
// matrices, one threadgroup per matrix, for the sizes the SIMD-group kernel
// does not take (n > 32; any n works).
//   A, LU, ipiv, info: as lu_factor_warp (A may be the same buffer as LU).
// Launch constants: int n, int ld (the row stride of the working copy: an
// odd number >= n in threadgroup memory, n in device memory), long batch.
// Template: T (float or double), SMEM: true = the matrix is factored in
// dynamic threadgroup memory (n * ld * sizeof(T) bytes, given at launch),
// false = in place in LU (device memory, for matrices too large for
// threadgroup memory).
// Launch: grid = (batch * NT, 1, 1) threads, threadgroup = (NT, 1, 1), NT a
// multiple of 32 (at most 1024): one threadgroup per matrix.
//
// Right-looking, one column per step, three phases between barriers:
//   S  simdgroup 0 finds the pivot: each lane scans rows k + lane, k + lane
//      + 32, ... keeping the first maximum of |a(i,k)|, then a butterfly
//      over the lanes keeps the largest, ties to the smallest row (LAPACK's
//      i?amax; NaN counts as larger than every number); lane 0 records the
//      pivot row, its value and the old a(k,k), and writes ipiv[k];
//   A  every thread: rows k and p are swapped (whole rows, as LAPACK) and
//      the column under the pivot is divided by it (left as it is when the
//      pivot is exactly zero: info records the first such step);
//   B  the trailing matrix takes its rank-1 update, simdgroups over rows and
//      lanes over columns (the pivot row's elements cached in registers).
//! name: alloy_lu_factor_tg
//! inputs: A
//! outputs: LU ipiv info
//! template: T=float32
//! template: SMEM=true
//! header:
inline uint alloy_lu_key(float x) { return as_type<uint>(fabs(x)); }
inline ulong alloy_lu_key(double x) { return as_type<ulong>(fabs(x)); }

// (The threadgroup arrays sv, sp come by reference: under ALLOY_CPU_DEBUG
// they are checked array objects, which a by-value parameter would copy.)
// The factorization of one matrix held at W (row stride ld), by the NT
// threads of a threadgroup. Returns info (meaningful in thread 0).
template <class Tp, class P, class PI, class Sc, class Si>
int alloy_lu_tg_factor(P W, int n, int ld, PI ipv, Sc &sv, Si &sp, int tid, int nt) {
  typedef decltype(alloy_lu_key(Tp(0))) Key;
  constexpr int UC = 8; // pivot-row elements cached per lane
  const int tx = tid & 31, ty = tid >> 5, ny = nt >> 5;
  int first_zero = 0;
  for (int k = 0; k < n; k++) {
    // S: the pivot
    if (ty == 0) {
      Key best = Key(0);
      int bi = INT_MAX;
      for (int i = k + tx; i < n; i += 32) {
        const Key key = alloy_lu_key(Tp(W[long(i) * ld + k]));
        if (bi == INT_MAX || key > best) {
          best = key;
          bi = i;
        }
      }
      for (uint o = 16u; o > 0u; o >>= 1) {
#if defined(ALLOY_BACKEND_CUDA) // simdgroup 0 whole (no partial groups): full-mask intrinsics
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
      if (tx == 0) {
        const Tp piv = W[long(bi) * ld + k];
        sp[0] = bi;
        sv[0] = piv;
        sv[1] = W[long(k) * ld + k];
        ipv[k] = bi + 1;
        if (piv == Tp(0) && first_zero == 0) first_zero = k + 1;
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
    // A: swap rows k and p, scale the column under the pivot
    const int p = sp[0];
    const Tp piv = sv[0], akk = sv[1];
    if (p != k)
      for (int j = tid; j < n; j += nt)
        if (j != k) {
          const Tp t = W[long(k) * ld + j];
          W[long(k) * ld + j] = W[long(p) * ld + j];
          W[long(p) * ld + j] = t;
        }
    if (tid == 0) W[long(k) * ld + k] = piv;
    for (int i = k + 1 + tid; i < n; i += nt) {
      const Tp x = i == p ? akk : Tp(W[long(i) * ld + k]);
      W[long(i) * ld + k] = piv != Tp(0) ? x / piv : x;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
    // B: the rank-1 update of the trailing matrix
    for (int j0 = k + 1; j0 < n; j0 += 32 * UC) {
      Tp u[UC];
#pragma unroll
      for (int c = 0; c < UC; c++) {
        const int j = j0 + tx + 32 * c;
        u[c] = j < n ? Tp(W[long(k) * ld + j]) : Tp(0);
      }
      for (int i = k + 1 + ty; i < n; i += ny) {
        const Tp l = W[long(i) * ld + k];
#pragma unroll
        for (int c = 0; c < UC; c++) {
          const int j = j0 + tx + 32 * c;
          if (j < n) W[long(i) * ld + j] = Tp(W[long(i) * ld + j]) - l * u[c];
        }
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
  }
  return first_zero;
}
//! body:
threadgroup T s_val[2];
threadgroup int s_row[1];
const int tid = int(thread_index_in_threadgroup);
const int nt = int(threads_per_threadgroup.x);
const long mat = long(threadgroup_position_in_grid.x);
if (mat < batch) {
    const long base = mat * long(n) * long(n);
    const int tx = tid & 31, ty = tid >> 5, ny = nt >> 5;
    int first_zero = 0;
    if (SMEM) {
        threadgroup T *W = (threadgroup T *)alloy_threadgroup_memory;
        for (int i = ty; i < n; i += ny)
            for (int j = tx; j < n; j += 32) W[long(i) * ld + j] = A[base + long(i) * n + j];
        threadgroup_barrier(mem_flags::mem_threadgroup);
        first_zero = alloy_lu_tg_factor<T>(W, n, ld, ipiv + mat * n, s_val, s_row, tid, nt);
        for (int i = ty; i < n; i += ny)
            for (int j = tx; j < n; j += 32) LU[base + long(i) * n + j] = W[long(i) * ld + j];
    } else {
        // in place in LU (a copy of A first unless A is LU)
        for (int i = ty; i < n; i += ny)
            for (int j = tx; j < n; j += 32) LU[base + long(i) * n + j] = A[base + long(i) * n + j];
        threadgroup_barrier(mem_flags::mem_device);
        first_zero = alloy_lu_tg_factor<T>(LU + base, n, ld, ipiv + mat * n, s_val, s_row, tid, nt);
    }
    if (tid == 0) info[mat] = first_zero;
}
