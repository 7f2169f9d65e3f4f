// lu_det: determinants from LAPACK's LU factorization, one thread per
// matrix: det(A) = (-1)^(number of interchanges) * prod_k U(k,k). The
// product is kept as a fraction in [0.5, 1) and a separate exponent (frexp
// after every factor), so it overflows or underflows only where the
// determinant itself does (one rounding per factor, as a plain product).
// A zero on U's diagonal gives +0; NaN or inf in the factor propagates;
// det of a 0 x 0 matrix is 1.
//   LU (batch, n, n), ipiv (batch, n) int32 -> det (batch) of T.
// Launch constants: int n, long batch. Template: T (float or double).
// Launch: grid = (batch, 1, 1) threads, any threadgroup.
//! name: alloy_lu_det
//! inputs: LU ipiv
//! outputs: det
//! template: T=float32
//! body:
const long mat = long(thread_position_in_grid.x);
if (mat < batch) {
    const long base = mat * long(n) * long(n);
    T m = T(1);
    long e = 0;
    bool neg = false;
    for (int k = 0; k < n; k++) {
        int ex = 0;
        m = frexp(m * T(LU[base + long(k) * n + k]), ex);
        e += ex;
        if (ipiv[mat * n + k] != k + 1) neg = !neg;
    }
    const int ec = int(e > 100000 ? 100000 : e < -100000 ? -100000 : e);
    const T d = m == T(0) ? T(0) : ldexp(m, ec);
    det[mat] = neg && m != T(0) ? -d : d;
}
