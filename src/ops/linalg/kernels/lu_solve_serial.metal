// lu_solve_serial: A X = B (or A^T X = B) from LAPACK's LU factorization
// (getrs), one thread per matrix and all its right-hand sides: the CPU
// backend's kernel (a plain loop; workers take matrices in parallel).
//   LU, ipiv, B, X: as lu_solve (X may be the same buffer as B; with IDENT,
//   B is not read and X = A^-1).
// Launch constants: int n, int nrhs, long batch.
// Template: T (float or double), TRANS, IDENT.
// Launch: grid = (batch, 1, 1) threads, any threadgroup.
//
// The rows of X are contiguous, so every step is a loop over the
// right-hand sides (vectorised): X = B, then
//   A X = B:   ipiv's swaps in order, L (unit lower) forward, U backward;
//   A^T X = B: U^T forward, L^T (unit upper) backward, ipiv's swaps in
//              reverse order.
// An ipiv entry outside [1, n] acts as no interchange.
//! name: alloy_lu_solve_serial
//! inputs: LU ipiv B
//! outputs: X
//! template: T=float32
//! template: TRANS=false
//! template: IDENT=false
//! header:
template <class Tp, class PX>
inline void alloy_lus_swap(PX x, int nrhs, int k, int p) {
  for (int c = 0; c < nrhs; c++) {
    const Tp t = x[long(k) * nrhs + c];
    x[long(k) * nrhs + c] = x[long(p) * nrhs + c];
    x[long(p) * nrhs + c] = t;
  }
}

template <class Tp, bool TR, bool ID, class PF, class PI, class PB, class PX>
inline void alloy_lus_serial(PF F, PI ipv, PB b, PX x, int n, int nrhs) {
  for (int i = 0; i < n; i++)
    for (int c = 0; c < nrhs; c++) x[long(i) * nrhs + c] = ID ? Tp(i == c ? 1 : 0) : Tp(b[long(i) * nrhs + c]);
  if (!TR) {
    for (int k = 0; k < n; k++) {
      const int p = ipv[k] - 1;
      if (p >= 0 && p < n && p != k) alloy_lus_swap<Tp>(x, nrhs, k, p);
    }
    for (int i = 1; i < n; i++)
      for (int k = 0; k < i; k++) {
        const Tp l = F[long(i) * n + k];
        for (int c = 0; c < nrhs; c++) x[long(i) * nrhs + c] = Tp(x[long(i) * nrhs + c]) - l * Tp(x[long(k) * nrhs + c]);
      }
    for (int i = n - 1; i >= 0; i--) {
      for (int k = i + 1; k < n; k++) {
        const Tp u = F[long(i) * n + k];
        for (int c = 0; c < nrhs; c++) x[long(i) * nrhs + c] = Tp(x[long(i) * nrhs + c]) - u * Tp(x[long(k) * nrhs + c]);
      }
      const Tp d = F[long(i) * n + i];
      for (int c = 0; c < nrhs; c++) x[long(i) * nrhs + c] = Tp(x[long(i) * nrhs + c]) / d;
    }
  } else {
    for (int i = 0; i < n; i++) {
      for (int k = 0; k < i; k++) {
        const Tp u = F[long(k) * n + i];
        for (int c = 0; c < nrhs; c++) x[long(i) * nrhs + c] = Tp(x[long(i) * nrhs + c]) - u * Tp(x[long(k) * nrhs + c]);
      }
      const Tp d = F[long(i) * n + i];
      for (int c = 0; c < nrhs; c++) x[long(i) * nrhs + c] = Tp(x[long(i) * nrhs + c]) / d;
    }
    for (int i = n - 2; i >= 0; i--)
      for (int k = i + 1; k < n; k++) {
        const Tp l = F[long(k) * n + i];
        for (int c = 0; c < nrhs; c++) x[long(i) * nrhs + c] = Tp(x[long(i) * nrhs + c]) - l * Tp(x[long(k) * nrhs + c]);
      }
    for (int k = n - 1; k >= 0; k--) {
      const int p = ipv[k] - 1;
      if (p >= 0 && p < n && p != k) alloy_lus_swap<Tp>(x, nrhs, k, p);
    }
  }
}
//! body:
const long mat = long(thread_position_in_grid.x);
if (mat < batch) {
    const long xb = mat * long(n) * long(nrhs);
    alloy_lus_serial<T, TRANS, IDENT>(LU + mat * long(n) * long(n), ipiv + mat * n, B + xb, X + xb, n, nrhs);
}
