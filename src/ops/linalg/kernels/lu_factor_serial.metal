// lu_factor_serial: LU with partial pivoting (LAPACK getrf), one thread per
// matrix: the CPU backend's kernel (no barriers or SIMD operations, so the
// backend runs each threadgroup as a plain loop and its workers take
// matrices in parallel), also launched on any device for n = 0 (where it
// only writes info = 0).
//   A, LU, ipiv, info: as lu_factor_warp (A may be the same buffer as LU).
// Launch constants: int n, long batch. Template: T (float or double).
// Launch: grid = (batch, 1, 1) threads, any threadgroup (the op uses 1 on
// the CPU, 64 elsewhere).
//
// LAPACK's unblocked right-looking order on the row-major matrix: pivot
// search down column k (the first maximum of |a(i,k)|, NaN above every
// number), a swap of whole rows, the column under the pivot divided by it
// (left as it is when the pivot is exactly zero), then the trailing rows
// updated along their contiguous elements (the loop the compiler
// vectorises).
//! name: alloy_lu_factor_serial
//! inputs: A
//! outputs: LU ipiv info
//! template: T=float32
//! header:
inline uint alloy_lu_key(float x) { return as_type<uint>(fabs(x)); }
inline ulong alloy_lu_key(double x) { return as_type<ulong>(fabs(x)); }

template <class Tp, class PA, class PL, class PI>
inline int alloy_lu_serial(PA src, PL a, PI ipv, int n) {
  typedef decltype(alloy_lu_key(Tp(0))) Key;
  const long nn = long(n) * n;
  for (long e = 0; e < nn; e++) a[e] = src[e];
  int first_zero = 0;
  for (int k = 0; k < n; k++) {
    int p = k;
    Key best = alloy_lu_key(Tp(a[long(k) * n + k]));
    for (int i = k + 1; i < n; i++) {
      const Key key = alloy_lu_key(Tp(a[long(i) * n + k]));
      if (key > best) {
        best = key;
        p = i;
      }
    }
    ipv[k] = p + 1;
    if (p != k)
      for (int j = 0; j < n; j++) {
        const Tp t = a[long(k) * n + j];
        a[long(k) * n + j] = a[long(p) * n + j];
        a[long(p) * n + j] = t;
      }
    const Tp piv = a[long(k) * n + k];
    if (piv == Tp(0)) {
      if (first_zero == 0) first_zero = k + 1;
    } else {
      for (int i = k + 1; i < n; i++) a[long(i) * n + k] = Tp(a[long(i) * n + k]) / piv;
    }
    for (int i = k + 1; i < n; i++) {
      const Tp l = a[long(i) * n + k];
      for (int j = k + 1; j < n; j++) a[long(i) * n + j] = Tp(a[long(i) * n + j]) - l * Tp(a[long(k) * n + j]);
    }
  }
  return first_zero;
}
//! body:
const long mat = long(thread_position_in_grid.x);
if (mat < batch) {
    const long base = mat * long(n) * long(n);
    info[mat] = alloy_lu_serial<T>(A + base, LU + base, ipiv + mat * n, n);
}
