// eigh_cpu: symmetric eigendecomposition (NumPy's eigh) of a batch of n x n
// matrices by cyclic two-sided Jacobi, one thread per matrix (the CPU
// backend's path: no barriers, so each group runs as a plain loop; any
// backend runs it correctly, any n >= 0). Semantics as eigh_tg:
//   A    (batch, n, n) any strides; lower (upper == 0) or upper triangle read
//   w    (batch, n): eigenvalues, ascending
//   v    (batch, n, n): eigenvectors as columns (only when `vectors`)
//   info (batch) int32: 0 converged, 1 NaN/Inf read (outputs NaN), 2 not
//        converged after max_sweeps sweeps
//   work (batch, 2 n^2 + n): the working matrix, the transposed vectors and
//        the order of the eigenvalues
// Template: T. Launch constants: int32 n, upper, vectors, max_sweeps; int64
// sa_b, sa_r, sa_c, a_off, z_off. Launch: grid = (batch, 1, 1), threadgroup
// = (1, 1, 1).
//
// The same scaling and stopping rule as eigh_tg (off-diagonal Frobenius norm
// <= n u ||A||_F, checked before each sweep), but the classic row-cyclic
// order: pairs (p, q), p < q, row by row, each rotation applied at once to
// rows and columns p and q of W (kept symmetric) and to rows p and q of
// V^T (contiguous: the rows of V^T are the eigenvectors). Pairs with
// |a_pq| <= u ||A||_F are not rotated (as in eigh_tg).
//! name: alloy_eigh_cpu
//! inputs: A
//! outputs: w v info work
//! ensure_row_contiguous: false
//! template: T=float32
//! header:
template <class T>
inline void alloy_eigh_cpu_rotation(T app, T aqq, T apq, thread T &c, thread T &s, thread T &t) {
    if (apq == T(0)) {
        c = T(1);
        s = T(0);
        t = T(0);
        return;
    }
    const T zeta = (aqq - app) / (T(2) * apq);
    const T az = fabs(zeta);
    const T root = az > T(1) ? az * sqrt(T(1) + (T(1) / az) * (T(1) / az)) : sqrt(T(1) + az * az);
    t = (zeta >= T(0) ? T(1) : T(-1)) / (az + root);
    c = T(1) / sqrt(T(1) + t * t);
    s = c * t;
}
//! body:
const long bz = long(thread_position_in_grid.x);
const long z = z_off + bz;
const int nn = int(n);
const long nsq = long(nn) * nn;
auto Ab = A + (a_off + bz * sa_b);
auto W = work + z * (2 * nsq + nn);
auto Vt = W + nsq;
auto ord = W + 2 * nsq;
auto wz = w + z * long(nn);
T amax = T(0);
bool bad = false;
for (int p = 0; p < nn; p++)
    for (int q = 0; q <= p; q++) {
        const T x = upper ? Ab[long(q) * sa_r + long(p) * sa_c] : Ab[long(p) * sa_r + long(q) * sa_c];
        if (!isfinite(x)) bad = true;
        else amax = max(amax, T(fabs(x)));
        W[long(p) * nn + q] = x;
        W[long(q) * nn + p] = x;
    }
if (bad) {
    for (int i = 0; i < nn; i++) wz[i] = T(NAN);
    if (vectors)
        for (long e = 0; e < nsq; e++) v[z * nsq + e] = T(NAN);
    info[z] = 1;
    return;
}
int ex = 0;
if (amax > T(0)) frexp(amax, ex);
T nrm = T(0);
for (long e = 0; e < nsq; e++) {
    const T x = ldexp(T(W[e]), -ex);
    W[e] = x;
    nrm = fma(x, x, nrm);
}
if (vectors)
    for (int i = 0; i < nn; i++)
        for (int j = 0; j < nn; j++) Vt[long(i) * nn + j] = i == j ? T(1) : T(0);
const T u = T(0.5) * numeric_limits<T>::epsilon();
const T tol = u * T(n > 1 ? n : 1);
const T tol2 = tol * tol * nrm;
const T skip = u * sqrt(nrm); // |a_pq| at or below: no rotation (see eigh_tg)
int info_m = 2;
for (int sweep = 0; sweep <= max_sweeps; sweep++) {
    T off = T(0);
    for (int i = 0; i < nn; i++)
        for (int j = 0; j < nn; j++)
            if (i != j) off = fma(T(W[long(i) * nn + j]), T(W[long(i) * nn + j]), off);
    if (off <= tol2) {
        info_m = 0;
        break;
    }
    if (sweep == max_sweeps) break;
    for (int p = 0; p < nn - 1; p++)
        for (int q = p + 1; q < nn; q++) {
            const T apq = W[long(p) * nn + q];
            if (fabs(apq) <= skip) continue;
            T c, s, t;
            alloy_eigh_cpu_rotation<T>(T(W[long(p) * nn + p]), T(W[long(q) * nn + q]), apq, c, s, t);
            auto Wp = W + long(p) * nn;
            auto Wq = W + long(q) * nn;
            for (int k = 0; k < nn; k++) {
                if (k == p || k == q) continue;
                const T xp = Wp[k], xq = Wq[k];
                const T yp = c * xp - s * xq, yq = s * xp + c * xq;
                Wp[k] = yp;
                Wq[k] = yq;
                W[long(k) * nn + p] = yp;
                W[long(k) * nn + q] = yq;
            }
            Wp[p] = T(Wp[p]) - t * apq;
            Wq[q] = T(Wq[q]) + t * apq;
            Wp[q] = T(0);
            Wq[p] = T(0);
            if (vectors) {
                auto Vp = Vt + long(p) * nn;
                auto Vq = Vt + long(q) * nn;
                for (int k = 0; k < nn; k++) {
                    const T xp = Vp[k], xq = Vq[k];
                    Vp[k] = c * xp - s * xq;
                    Vq[k] = s * xp + c * xq;
                }
            }
        }
}
// ascending order, ties by index (insertion sort of the indices)
for (int i = 0; i < nn; i++) {
    const T di = W[long(i) * nn + i];
    int k = i;
    while (k > 0 && T(W[long(ord[k - 1]) * nn + long(ord[k - 1])]) > di) {
        ord[k] = ord[k - 1];
        k--;
    }
    ord[k] = T(i);
}
for (int k = 0; k < nn; k++) {
    const long i = long(ord[k]);
    wz[k] = ldexp(T(W[i * nn + i]), ex);
}
if (vectors)
    for (int r = 0; r < nn; r++)
        for (int k = 0; k < nn; k++) v[z * nsq + long(r) * nn + k] = Vt[long(ord[k]) * nn + r];
info[z] = info_m;
