// qr_serial: Householder QR (LAPACK geqrf, then orgqr) of a batch of m x n
// matrices, one thread per matrix: the CPU backend's kernel (no barriers or
// SIMD operations, so the backend runs each threadgroup as a plain loop and
// its workers take matrices in parallel). Inputs, outputs, MODE, SIGNFIX,
// TRANS and the reflectors are exactly as in qr_householder.metal (the GPU
// kernel); WS is not used.
// Launch constants: int32 m, n, ld (columns of the working copy, >= n and
// >= the columns of Q), int64 batch, float64 gain.
// Template: T (float32, float64), MODE, SIGNFIX, TRANS.
// Launch: grid = (batch, 1, 1) threads, threadgroup = (1, 1, 1); dynamic
// threadgroup memory (m * ld + ld + 2 * min(m, n) + 2) * sizeof(T) per
// threadgroup.
//
// The working copy W is row-major, so the loops run along rows: applying
// H = I - tau v v^T to the trailing columns is w = W^T v accumulated row by
// row (w += v_i W(i, :)), then W(i, :) -= tau v_i w — contiguous loops the
// compiler vectorises. Reflector norms are scaled by the column's largest
// |x| (nothing under- or overflows; NaN propagates).
//! name: alloy_qr_serial
//! inputs: A
//! outputs: Q R WS
//! template: T=float32
//! template: MODE=0
//! template: SIGNFIX=false
//! template: TRANS=false
//! header:
template <class X> inline X alloy_qrs_bigger(X a, X b) { return (b > a || b != b) ? b : a; }

// H = I - tau v v^T (v in column j of W from row j, v_j = 1) applied to
// columns c0..c1-1, rows j..m-1.
template <class Tp, class PW>
inline void alloy_qrs_apply(PW W, PW wv, int ld, int m, int j, int c0, int c1, Tp tau) {
  if (c0 >= c1 || tau == Tp(0)) return;
  PW rj = W + long(j) * ld;
  for (int c = c0; c < c1; c++) wv[c] = rj[c];
  for (int i = j + 1; i < m; i++) {
    PW ri = W + long(i) * ld;
    const Tp vi = ri[j];
    for (int c = c0; c < c1; c++) wv[c] = fma(vi, Tp(ri[c]), Tp(wv[c]));
  }
  for (int c = c0; c < c1; c++) {
    wv[c] = tau * Tp(wv[c]);
    rj[c] = Tp(rj[c]) - Tp(wv[c]);
  }
  for (int i = j + 1; i < m; i++) {
    PW ri = W + long(i) * ld;
    const Tp vi = ri[j];
    for (int c = c0; c < c1; c++) ri[c] = fma(-vi, Tp(wv[c]), Tp(ri[c]));
  }
}

template <class Tp, int MODE, bool SIGNFIX, bool TRANS, class PA, class PO, class PW>
inline void alloy_qrs_run(PA A, PO Q, PO R, PW W, int m, int n, int ld, long mat, Tp gain) {
  const int k = min(m, n);
  PW wv = W + long(m) * ld, taus = wv + ld, dsv = taus + k;
  const long abase = mat * long(m) * long(n);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) W[long(i) * ld + j] = TRANS ? A[abase + long(j) * m + i] : A[abase + long(i) * n + j];
  for (int j = 0; j < k; j++) {
    const Tp alpha = W[long(j) * ld + j];
    Tp mx = Tp(0);
    for (int i = j + 1; i < m; i++) mx = alloy_qrs_bigger(mx, Tp(fabs(Tp(W[long(i) * ld + j]))));
    Tp xnorm = Tp(0);
    if (mx != Tp(0)) {
      Tp ss = Tp(0);
      for (int i = j + 1; i < m; i++) {
        const Tp y = Tp(W[long(i) * ld + j]) / mx;
        ss = fma(y, y, ss);
      }
      xnorm = mx * sqrt(ss);
    }
    Tp tau = Tp(0), beta = alpha;
    if (xnorm != Tp(0)) {
      const Tp big = max(fabs(alpha), xnorm);
      const Tp ra = alpha / big, rx = xnorm / big;
      const Tp h = big * sqrt(ra * ra + rx * rx);
      beta = alpha >= Tp(0) ? -h : h;
      tau = (beta - alpha) / beta;
      const Tp scal = Tp(1) / (alpha - beta);
      for (int i = j + 1; i < m; i++) W[long(i) * ld + j] = Tp(W[long(i) * ld + j]) * scal;
    }
    W[long(j) * ld + j] = Tp(1);
    alloy_qrs_apply<Tp>(W, wv, ld, m, j, j + 1, n, tau);
    W[long(j) * ld + j] = beta;
    taus[j] = tau;
    dsv[j] = beta;
  }
  if (MODE == 3) {
    for (long e = 0; e < long(m) * n; e++) Q[abase + e] = W[(e / n) * ld + e % n];
    for (int j = 0; j < k; j++) R[mat * k + j] = taus[j];
    return;
  }
  if (MODE <= 2) {
    const int rr = MODE == 1 ? m : k;
    for (int i = 0; i < rr; i++)
      for (int j = 0; j < n; j++) R[mat * long(rr) * n + long(i) * n + j] = j >= i ? Tp(W[long(i) * ld + j]) : Tp(0);
    if (MODE == 2) return;
  }
  // orgqr: columns k..kq-1 start as the identity's, then H_{k-1} ... H_0
  const int kq = MODE == 1 ? m : k;
  for (int i = 0; i < m; i++)
    for (int c = k; c < kq; c++) W[long(i) * ld + c] = i == c ? Tp(1) : Tp(0);
  for (int i = k - 1; i >= 0; i--) {
    const Tp tau = taus[i];
    W[long(i) * ld + i] = Tp(1);
    alloy_qrs_apply<Tp>(W, wv, ld, m, i, i + 1, kq, tau);
    for (int r = i + 1; r < m; r++) W[long(r) * ld + i] = -tau * Tp(W[long(r) * ld + i]);
    W[long(i) * ld + i] = Tp(1) - tau;
    for (int r = 0; r < i; r++) W[long(r) * ld + i] = Tp(0);
  }
  const long qbase = mat * long(m) * kq;
  for (int i = 0; i < m; i++)
    for (int c = 0; c < kq; c++) {
      Tp x = W[long(i) * ld + c];
      if (SIGNFIX) x *= Tp(dsv[c]) < Tp(0) ? -gain : gain;
      if (TRANS) Q[qbase + long(c) * m + i] = x;
      else Q[qbase + long(i) * kq + c] = x;
    }
}
//! body:
const long mat = long(thread_position_in_grid.x);
if (mat < batch)
  alloy_qrs_run<T, MODE, SIGNFIX, TRANS>(A, Q, R, (threadgroup T *)alloy_threadgroup_memory, m, n, ld, mat, T(gain));
