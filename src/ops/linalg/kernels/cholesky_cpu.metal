// cholesky_cpu: Cholesky factorizations of a batch of n x n matrices, one
// thread per matrix (the CPU backend's path: no barriers, so each group runs
// as a plain loop; any backend runs it correctly, any n >= 0). Semantics as
// cholesky_small: A = L L^T from the lower triangle (upper == 0) or A = U^T U
// from the upper one (upper == 1), the factor row-major with zeros in the
// other triangle, info[b] = 0 or the 1-based index of the first pivot that is
// not positive (or NaN), the matrix then holding columns 0..info-2 of the
// factor and the Schur complement left in rows and columns >= info-1.
//
// The referenced triangle is copied into the output as a lower triangle, then
// factored in place row by row (Cholesky-Banachiewicz: every element is a dot
// product of two contiguous rows, summed in four interleaved partial sums),
// and for an upper factorization transposed in place.
// Template: T (float32, float64).
// Launch constants: int64 n, sa_b, sa_r, sa_c, a_off, l_off, i_off; int32
// upper. A(b, p, q) = A[a_off + b*sa_b + p*sa_r + q*sa_c] (any strides),
// L(b, p, q) = L[l_off + b*n*n + p*n + q], info(b) = info[i_off + b].
// Launch: grid = (batch, 1, 1), threadgroup = (1, 1, 1).
//! name: alloy_cholesky_cpu
//! inputs: A
//! outputs: L info
//! ensure_row_contiguous: false
//! template: T=float32
//! header:
// sum_{q < len} x[q] y[q], four partial sums (independent chains).
template <class T, class P>
inline T alloy_chol_dot(P x, P y, int len) {
    T s0 = T(0), s1 = T(0), s2 = T(0), s3 = T(0);
    int q = 0;
    for (; q + 4 <= len; q += 4) {
        s0 = fma(T(x[q]), T(y[q]), s0);
        s1 = fma(T(x[q + 1]), T(y[q + 1]), s1);
        s2 = fma(T(x[q + 2]), T(y[q + 2]), s2);
        s3 = fma(T(x[q + 3]), T(y[q + 3]), s3);
    }
    for (; q < len; q++) s0 = fma(T(x[q]), T(y[q]), s0);
    return (s0 + s1) + (s2 + s3);
}
//! body:
const long bz = long(thread_position_in_grid.x);
const int nn = int(n);
const long per = long(nn) * nn;
auto Ab = A + (a_off + bz * sa_b);
auto Lb = L + (l_off + bz * per);
for (int i = 0; i < nn; i++)
    for (int j = 0; j < nn; j++)
        Lb[long(i) * nn + j] = j > i ? T(0) : (upper ? Ab[long(j) * sa_r + long(i) * sa_c]
                                                     : Ab[long(i) * sa_r + long(j) * sa_c]);
// Row i: L(i, j) = (A(i, j) - L(i, :j) . L(j, :j)) / L(j, j), then the pivot.
// After a failed pivot at `lim`, later rows get their columns < lim and the
// Schur complement A(i, j) - L(i, :lim) . L(j, :lim) for j >= lim.
int lim = nn, info_m = 0;
for (int i = 0; i < nn; i++) {
    auto Li = Lb + long(i) * nn;
    for (int j = 0; j <= i; j++) {
        auto Lj = Lb + long(j) * nn;
        const int len = j < lim ? j : lim;
        const T s = T(Li[j]) - alloy_chol_dot<T>(Li, Lj, len);
        if (j >= lim) {
            Li[j] = s;
        } else if (j < i) {
            Li[j] = s / T(Lj[j]);
        } else if (s > T(0)) {
            Li[j] = sqrt(s);
        } else { // not positive, or NaN
            Li[j] = s;
            lim = i;
            info_m = i + 1;
        }
    }
}
if (upper) {
    for (int i = 0; i < nn; i++)
        for (int j = 0; j < i; j++) {
            Lb[long(j) * nn + i] = Lb[long(i) * nn + j];
            Lb[long(i) * nn + j] = T(0);
        }
}
info[i_off + bz] = info_m;
