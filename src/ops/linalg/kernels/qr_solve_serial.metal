// qr_solve_serial: least-squares solutions from a Householder QR, one thread
// per matrix and all its right-hand sides: the CPU backend's kernel (no
// barriers or SIMD operations). Inputs, outputs, info and the two cases
// (tall: x = R^-1 (Q^T b)(0:n); wide: x = Q [R^-T b; 0]) exactly as in
// qr_solve.metal.
// Launch constants: int32 m, n, nrhs, int64 batch, float64 tol.
// Template: T (float32, float64), WIDE.
// Launch: grid = (batch, 1, 1) threads, threadgroup = (1, 1, 1); dynamic
// threadgroup memory max(m, n, 1) * sizeof(T) per threadgroup.
//! name: alloy_qr_solve_serial
//! inputs: H tau B
//! outputs: X info
//! template: T=float32
//! template: WIDE=false
//! body:
const long mat = long(thread_position_in_grid.x);
if (mat < batch) {
    threadgroup T *x = (threadgroup T *)alloy_threadgroup_memory;
    const int k = min(m, n);
    const int mm = WIDE ? n : m, nn = WIDE ? m : n;
    const int len = max(m, n);
    const long hb = mat * long(mm) * nn, tb = mat * long(k);
    T rmax = T(0);
    bool nan_seen = false;
    for (int i = 0; i < k; i++) {
        const T d = fabs(T(H[hb + long(i) * nn + i]));
        rmax = d > rmax ? d : rmax;
        nan_seen = nan_seen || d != d;
    }
    const T thr = T(tol) * rmax;
    int bad = -1;
    for (int i = 0; i < k && bad < 0; i++)
        if (nan_seen || !(fabs(T(H[hb + long(i) * nn + i])) > thr)) bad = i;
    info[mat] = bad + 1;
    for (int c = 0; c < nrhs; c++) {
        const long bb = mat * long(m) * nrhs + c, xb = mat * long(n) * nrhs + c;
        for (int i = 0; i < len; i++) x[i] = i < m ? T(B[bb + long(i) * nrhs]) : T(0);
        if (!WIDE) {
            for (int j = 0; j < k; j++) {
                T s = x[j];
                for (int i = j + 1; i < m; i++) s = fma(T(H[hb + long(i) * nn + j]), T(x[i]), s);
                const T ts = T(tau[tb + j]) * s;
                x[j] = T(x[j]) - ts;
                for (int i = j + 1; i < m; i++) x[i] = fma(-T(H[hb + long(i) * nn + j]), ts, T(x[i]));
            }
            for (int i = k - 1; i >= 0; i--) {
                T s = x[i];
                for (int q = i + 1; q < k; q++) s = fma(-T(H[hb + long(i) * nn + q]), T(x[q]), s);
                x[i] = s / T(H[hb + long(i) * nn + i]);
            }
        } else {
            for (int i = 0; i < k; i++) {
                T s = x[i];
                for (int q = 0; q < i; q++) s = fma(-T(H[hb + long(q) * nn + i]), T(x[q]), s);
                x[i] = s / T(H[hb + long(i) * nn + i]);
            }
            for (int j = k - 1; j >= 0; j--) {
                T s = x[j];
                for (int i = j + 1; i < n; i++) s = fma(T(H[hb + long(i) * nn + j]), T(x[i]), s);
                const T ts = T(tau[tb + j]) * s;
                x[j] = T(x[j]) - ts;
                for (int i = j + 1; i < n; i++) x[i] = fma(-T(H[hb + long(i) * nn + j]), ts, T(x[i]));
            }
        }
        for (int r = 0; r < n; r++) X[xb + long(r) * nrhs] = bad < 0 ? T(x[r]) : T(NAN);
    }
}
