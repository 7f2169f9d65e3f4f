// lu_slogdet: sign and log|det| from LAPACK's LU factorization, one thread
// per matrix, as NumPy's slogdet: sign = (-1)^(interchanges) * prod
// sign(U(k,k)), logabsdet = sum_k log|U(k,k)| (summed in T, k in order).
// A zero on U's diagonal (a singular matrix) gives sign 0 and logabsdet
// -inf, whatever else the matrix holds (NumPy's rule: LAPACK's info comes
// first); otherwise a NaN on the diagonal gives NaN for both. A 0 x 0
// matrix gives sign 1, logabsdet 0.
//   LU (batch, n, n), ipiv (batch, n) int32 -> sgn (batch), logdet
//   (batch) of T.
// Launch constants: int n, long batch. Template: T (float or double).
// Launch: grid = (batch, 1, 1) threads, any threadgroup.
//! name: alloy_lu_slogdet
//! inputs: LU ipiv
//! outputs: sgn logdet
//! template: T=float32
//! body:
const long mat = long(thread_position_in_grid.x);
if (mat < batch) {
    const long base = mat * long(n) * long(n);
    T s = T(1), la = T(0);
    bool zero = false, has_nan = false;
    for (int k = 0; k < n; k++) {
        const T u = LU[base + long(k) * n + k];
        if (ipiv[mat * n + k] != k + 1) s = -s;
        if (u == T(0)) zero = true;
        else if (isnan(u)) has_nan = true;
        else {
            if (u < T(0)) s = -s;
            la += log(fabs(u));
        }
    }
    if (zero) {
        s = T(0);
        la = -INFINITY;
    } else if (has_nan) {
        s = NAN;
        la = NAN;
    }
    sgn[mat] = s;
    logdet[mat] = la;
}
