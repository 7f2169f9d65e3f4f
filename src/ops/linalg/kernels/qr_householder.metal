// qr_householder: Householder QR (LAPACK geqrf semantics) of a batch of
// m x n matrices M, and what is built on it: R, the reduced or complete Q
// (LAPACK orgqr), the raw factor (geqrf's packed reflectors and tau), or an
// orthonormal basis with the sign fix of torch.nn.init.orthogonal_. The GPU
// path (any backend runs it correctly, any m, n >= 0).
//   A   (batch, m, n) row-major, or with TRANS its transpose (batch, n, m):
//       M = A^T; A may be the same buffer as Q (every matrix is read whole
//       before its outputs are written).
//   Q   MODE 0, 4: (batch, m, k) (k = min(m, n)), MODE 1: (batch, m, m),
//       MODE 3: the raw factor h (batch, m, n): R on and above the
//       diagonal, reflector j below it in column j (its leading 1 not
//       stored); with TRANS, Q^T is written instead ((batch, k, m) for
//       MODE 4).
//   R   MODE 0, 2: (batch, k, n), MODE 1: (batch, m, n) (zeros below the
//       diagonal); MODE 3: tau (batch, k).
//   WS  scratch, (batch, m, ld) elements, used only when !SMEM (then the
//       launch must hold exactly one matrix per threadgroup and no more
//       threadgroups than matrices: WG > 1).
// Unused outputs may be any array (they are not touched).
// MODE: 0 reduced (Q, R), 1 complete (Q, R), 2 R only, 3 raw (h, tau),
// 4 reduced Q only. SIGNFIX (MODE 4): column c of Q times gain * sign(R(c,c))
// (sign(0) = +1). H_j = I - tau_j v_j v_j^T with LAPACK's dlarfg choice:
// beta = -sign(alpha) * ||(alpha, x)||, R(j,j) = beta, tau = (beta - alpha)
// / beta, v = (1, x / (alpha - beta)); tau = 0 (H = I) when x is zero.
//
// Layout: each matrix is worked on by G = S * WG threads: WG units of S
// lanes (WG = 1: S = 8, 16 or 32 lanes of one SIMD group, several matrices
// per threadgroup and SIMD group, synchronised with simdgroup_barrier;
// WG > 1: S = 32, one threadgroup of WG SIMD groups per matrix, with
// threadgroup_barrier). The working matrix W (m rows, row stride ld, odd in
// threadgroup memory so that lanes walking down a column hit distinct banks)
// lives in dynamic threadgroup memory (SMEM) or in WS; the reflector
// vectors (double-buffered), tau and R's diagonal always in threadgroup
// memory after it.
// Factorization, step j: every unit takes columns c = j+1+w, j+1+w+WG, ...
// of the trailing matrix, its lanes split the rows: the dot product v^T W(:,c)
// is a butterfly over the S lanes, then the lanes update their rows. Unit 0
// takes column j+1 first and, right after updating it, computes reflector
// j+1 from it (look-ahead: its norm, scaled by the column's largest |x| so
// that nothing under- or overflows, and NaN propagates), so each step needs
// one synchronisation. Q is then formed in place as orgqr does (backwards,
// H_0 ... H_{k-1} applied to the identity's columns), again one
// synchronisation per reflector, the next vector prefetched into the other
// buffer.
// Template: T (float32, float64), S (8, 16, 32), WG (1, 2, 4, 8), SMEM,
// MODE, SIGNFIX, TRANS.
// Launch constants: int32 m, n, ld (>= max(n, columns of Q)), int64 batch,
// float64 gain.
// Launch: grid = (groups * NT, 1, 1), threadgroup = (NT, 1, 1), NT a
// multiple of 32 and of G; NT / G matrices per threadgroup. Dynamic
// threadgroup memory: (NT / G) * ((SMEM ? m * ld : 0) + 2 * m + 2 * k + 2)
// elements of T.
//! name: alloy_qr_householder
//! inputs: A
//! outputs: Q R WS
//! template: T=float32
//! template: S=32
//! template: WG=1
//! template: SMEM=true
//! template: MODE=0
//! template: SIGNFIX=false
//! template: TRANS=false
//! header:
// Butterflies over the S lanes of a unit (xor offsets below S stay inside
// it); every lane gets the same bits (each level adds the same two values).
template <int S, class X> inline X alloy_qrh_sum(X v) {
#pragma unroll
  for (uint o = uint(S) / 2u; o > 0u; o >>= 1) {
#if defined(ALLOY_BACKEND_CUDA)
    v += __shfl_xor_sync(0xffffffffu, v, int(o)); // whole simdgroups execute this
#else
    v += simd_shuffle_xor(v, o);
#endif
  }
  return v;
}
// The larger of two magnitudes, NaN winning.
template <class X> inline X alloy_qrh_bigger(X a, X b) { return (b > a || b != b) ? b : a; }
template <int S, class X> inline X alloy_qrh_max(X v) {
#pragma unroll
  for (uint o = uint(S) / 2u; o > 0u; o >>= 1) {
#if defined(ALLOY_BACKEND_CUDA)
    v = alloy_qrh_bigger(v, X(__shfl_xor_sync(0xffffffffu, v, int(o))));
#else
    v = alloy_qrh_bigger(v, X(simd_shuffle_xor(v, o)));
#endif
  }
  return v;
}
template <int WG> inline void alloy_qrh_sync() {
  if (WG == 1) simdgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
  else threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
}

// Reflector j from column j of W (rows j..m-1), by the S lanes of one unit
// (lane l): v (with v[j] = 1) into vb, tau and beta = R(j,j) into taus[j],
// dsv[j].
template <int S, class Tp, class PW, class PV>
inline void alloy_qrh_reflector(PW W, int ld, int m, int j, int l, PV vb, PV taus, PV dsv) {
  const Tp alpha = W[long(j) * ld + j];
  Tp mx = Tp(0);
  for (int i = j + 1 + l; i < m; i += S) mx = alloy_qrh_bigger(mx, Tp(fabs(Tp(W[long(i) * ld + j]))));
  mx = alloy_qrh_max<S>(mx);
  // No branch around the butterfly: units that share a SIMD group (other
  // matrices, or a past-the-batch unit of zeros) may disagree on mx == 0,
  // and a shuffle some lanes skip hangs the group on CUDA. A zero column
  // sums zeros (divided by 1) and its norm is 0.
  const Tp scale = mx != Tp(0) ? mx : Tp(1);
  Tp ss = Tp(0);
  for (int i = j + 1 + l; i < m; i += S) {
    const Tp y = Tp(W[long(i) * ld + j]) / scale;
    ss = fma(y, y, ss);
  }
  const Tp xnorm = mx * sqrt(alloy_qrh_sum<S>(ss));
  Tp tau = Tp(0), beta = alpha, scal = Tp(1);
  if (xnorm != Tp(0)) {
    const Tp big = max(fabs(alpha), xnorm);
    const Tp ra = alpha / big, rx = xnorm / big;
    const Tp h = big * sqrt(ra * ra + rx * rx);
    beta = alpha >= Tp(0) ? -h : h;
    tau = (beta - alpha) / beta;
    scal = Tp(1) / (alpha - beta);
  }
  for (int i = j + 1 + l; i < m; i += S) vb[i] = Tp(W[long(i) * ld + j]) * scal;
  if (l == 0) {
    vb[j] = Tp(1);
    taus[j] = tau;
    dsv[j] = beta;
  }
}

// The whole computation for one matrix; W its working matrix, sm its
// threadgroup scratch (vb: 2m, taus: k, dsv: k).
template <class Tp, int S, int WG, int MODE, bool SIGNFIX, bool TRANS, class PA, class PO, class PW, class PS>
inline void alloy_qrh_run(PA A, PO Q, PO R, PW W, PS sm, int m, int n, int ld, long mat, bool live,
                          int t, Tp gain) {
  constexpr int G = S * WG;
  const int w = t / S, l = t % S;
  const int k = min(m, n);
  PS vb = sm, taus = sm + 2 * m, dsv = sm + 2 * m + k;
  const long abase = mat * long(m) * long(n);
  // load M
  for (int i = w; i < m; i += WG)
    for (int j = l; j < n; j += S)
      W[long(i) * ld + j] = live ? (TRANS ? Tp(A[abase + long(j) * m + i]) : Tp(A[abase + long(i) * n + j])) : Tp(0);
  alloy_qrh_sync<WG>();
  // factor
  if (w == 0 && k > 0) alloy_qrh_reflector<S, Tp>(W, ld, m, 0, l, vb, taus, dsv);
  alloy_qrh_sync<WG>();
  for (int j = 0; j < k; j++) {
    PS cur = vb + (j & 1) * m, nxt = vb + ((j + 1) & 1) * m;
    const Tp tau = taus[j];
    for (int c = j + 1 + w; c < n; c += WG) {
      Tp s = Tp(0);
      for (int i = j + l; i < m; i += S) s = fma(Tp(cur[i]), Tp(W[long(i) * ld + c]), s);
      const Tp ts = tau * alloy_qrh_sum<S>(s);
      for (int i = j + l; i < m; i += S) W[long(i) * ld + c] = fma(-Tp(cur[i]), ts, Tp(W[long(i) * ld + c]));
      if (c == j + 1 && j + 1 < k) { // unit 0: the next reflector from the column just updated
        simdgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
        alloy_qrh_reflector<S, Tp>(W, ld, m, j + 1, l, nxt, taus, dsv);
      }
    }
    for (int i = j + 1 + t; i < m; i += G) W[long(i) * ld + j] = cur[i];
    if (t == 0) W[long(j) * ld + j] = dsv[j];
    alloy_qrh_sync<WG>();
  }
  if (MODE == 3) { // raw: h and tau
    if (live) {
      for (int i = w; i < m; i += WG)
        for (int j = l; j < n; j += S) Q[abase + long(i) * n + j] = W[long(i) * ld + j];
      for (int j = t; j < k; j += G) R[mat * k + j] = taus[j];
    }
    return;
  }
  if (MODE <= 2) { // R
    const int rr = MODE == 1 ? m : k;
    if (live)
      for (int i = w; i < rr; i += WG)
        for (int j = l; j < n; j += S) R[mat * long(rr) * n + long(i) * n + j] = j >= i ? Tp(W[long(i) * ld + j]) : Tp(0);
    if (MODE == 2) return;
    alloy_qrh_sync<WG>();
  }
  // Q = H_0 ... H_{k-1} applied to the first kq columns of the identity
  const int kq = MODE == 1 ? m : k;
  for (int i = w; i < m; i += WG)
    for (int c = k + l; c < kq; c += S) W[long(i) * ld + c] = i == c ? Tp(1) : Tp(0);
  if (k > 0) {
    PS first = vb + ((k - 1) & 1) * m;
    for (int r = k + t; r < m; r += G) first[r] = W[long(r) * ld + k - 1];
    if (t == 0) first[k - 1] = Tp(1);
  }
  alloy_qrh_sync<WG>();
  for (int i = k - 1; i >= 0; i--) {
    PS cur = vb + (i & 1) * m, nxt = vb + ((i + 1) & 1) * m;
    const Tp tau = taus[i];
    for (int c = i + 1 + w; c < kq; c += WG) {
      Tp s = Tp(0);
      for (int r = i + l; r < m; r += S) s = fma(Tp(cur[r]), Tp(W[long(r) * ld + c]), s);
      const Tp ts = tau * alloy_qrh_sum<S>(s);
      for (int r = i + l; r < m; r += S) W[long(r) * ld + c] = fma(-Tp(cur[r]), ts, Tp(W[long(r) * ld + c]));
    }
    for (int r = t; r < m; r += G) W[long(r) * ld + i] = r < i ? Tp(0) : r == i ? Tp(1) - tau : -tau * Tp(cur[r]);
    if (i > 0) {
      for (int r = i + t; r < m; r += G) nxt[r] = W[long(r) * ld + i - 1];
      if (t == 0) nxt[i - 1] = Tp(1);
    }
    alloy_qrh_sync<WG>();
  }
  if (live) {
    const long qbase = mat * long(m) * kq;
    for (int i = w; i < m; i += WG)
      for (int c = l; c < kq; c += S) {
        Tp x = W[long(i) * ld + c];
        if (SIGNFIX) x *= Tp(dsv[c]) < Tp(0) ? -gain : gain;
        if (TRANS) Q[qbase + long(c) * m + i] = x;
        else Q[qbase + long(i) * kq + c] = x;
      }
  }
}
//! body:
constexpr int G = S * WG;
const int tid = int(thread_index_in_threadgroup);
const int mpg = int(threads_per_threadgroup.x) / G;
const int slot = tid / G, t = tid % G;
const long mat = long(threadgroup_position_in_grid.x) * mpg + slot;
const bool live = mat < batch;
const int k = min(m, n);
const long side = 2 * long(m) + 2 * k + 2;
const long per = (SMEM ? long(m) * ld : 0) + side;
threadgroup T *mine = (threadgroup T *)alloy_threadgroup_memory + slot * per;
if (SMEM)
  alloy_qrh_run<T, S, WG, MODE, SIGNFIX, TRANS>(A, Q, R, mine + side, mine, m, n, ld, mat, live, t, T(gain));
else
  alloy_qrh_run<T, S, WG, MODE, SIGNFIX, TRANS>(A, Q, R, WS + mat * long(m) * ld, mine, m, n, ld, mat, live, t,
                                                T(gain));
