// qr_solve: least-squares solutions from a Householder QR (the GPU path of
// alloy_lstsq; any backend runs it correctly). For each matrix A (m x n) of
// the batch and each right-hand side b (a column of B):
//   tall (WIDE false, m >= n): H, tau are the raw QR of A (h m x n, tau n):
//       x = R^-1 (Q^T b)(0:n), the minimiser of ||A x - b||;
//   wide (WIDE true, m < n): H, tau are the raw QR of A^T (h n x m, tau m):
//       A = R^T Q^T, x = Q [R^-T b; 0], the minimum-norm solution.
// info[b] = 0, or 1 + the first i with !(|R(i,i)| > tol * max_j |R(j,j)|)
// (R numerically rank deficient at tol, or NaN): that matrix's x is then
// NaN everywhere.
//   H (batch, mm, nn) with (mm, nn) = (m, n) tall, (n, m) wide; tau (batch,
//   min(m, n)); B (batch, m, nrhs); X (batch, n, nrhs); info (batch) int32.
// Launch constants: int32 m, n, nrhs, cols (right-hand sides per
// threadgroup, >= 1), tiles (threadgroups per matrix, >= 1), int64 batch,
// float64 tol.
// Template: T (float32, float64), WIDE.
// Launch: grid = (batch * tiles * NT, 1, 1), threadgroup = (NT, 1, 1), NT a
// multiple of 32; dynamic threadgroup memory (NT / 32) * max(m, n, 1) *
// sizeof(T). Threadgroup g solves matrix g / tiles, columns (g % tiles) *
// cols + w, + NT/32, ... (w its SIMD group).
//
// One SIMD group per right-hand side, its column in threadgroup memory, lane
// l owning rows l, l + 32, ...: a reflector is a dot product (a butterfly,
// simd_sum) and an update of each lane's own rows (row i always belongs to
// lane i % 32, so no lane reads another's rows without a barrier); a substitution step
// reads the row finished in the step before (one simdgroup_barrier per
// step), and each lane divides its own rows by R's diagonal at the end (the
// value every lane used).
//! name: alloy_qr_solve
//! inputs: H tau B
//! outputs: X info
//! template: T=float32
//! template: WIDE=false
//! body:
const int tid = int(thread_index_in_threadgroup);
const int lane = tid & 31, w = tid >> 5, nw = int(threads_per_threadgroup.x) >> 5;
const long g = long(threadgroup_position_in_grid.x);
const long mat = g / tiles;
const int c0 = int(g % tiles) * cols;
const int cend = min(c0 + cols, nrhs);
const int k = min(m, n);
const int mm = WIDE ? n : m, nn = WIDE ? m : n;
const int len = max(max(m, n), 1);
threadgroup T *x = (threadgroup T *)alloy_threadgroup_memory + long(w) * len;
if (mat < batch) {
    const long hb = mat * long(mm) * nn, tb = mat * long(k);
    // rank: R's diagonal against its largest element (NaN anywhere: bad)
    T rmax = T(0);
    for (int i = lane; i < k; i += 32) {
        const T d = fabs(T(H[hb + long(i) * nn + i]));
        rmax = (d > rmax || d != d) ? d : rmax;
    }
    rmax = simd_max(rmax);
    bool nan_seen = false;
    for (int i = lane; i < k; i += 32) nan_seen = nan_seen || H[hb + long(i) * nn + i] != H[hb + long(i) * nn + i];
    nan_seen = simd_any(nan_seen);
    const T thr = T(tol) * rmax;
    int bad = INT_MAX;
    for (int i = lane; i < k; i += 32)
        if (bad == INT_MAX && (nan_seen || !(fabs(T(H[hb + long(i) * nn + i])) > thr))) bad = i;
    bad = simd_min(bad);
    if (g % tiles == 0 && tid == 0) info[mat] = bad == INT_MAX ? 0 : bad + 1;
    for (int c = c0 + w; c < cend; c += nw) {
        const long bb = mat * long(m) * nrhs + c, xb = mat * long(n) * nrhs + c;
        for (int i = lane; i < len; i += 32) x[i] = i < m ? T(B[bb + long(i) * nrhs]) : T(0);
        if (!WIDE) {
            for (int j = 0; j < k; j++) { // Q^T b
                T s = T(0);
                for (int i = j + ((lane - j) & 31); i < m; i += 32) s = fma(i == j ? T(1) : T(H[hb + long(i) * nn + j]), T(x[i]), s);
                const T ts = T(tau[tb + j]) * simd_sum(s);
                for (int i = j + ((lane - j) & 31); i < m; i += 32) x[i] = fma(-(i == j ? T(1) : T(H[hb + long(i) * nn + j])), ts, T(x[i]));
            }
            for (int i = k - 1; i >= 0; i--) { // R x = c (x[i] keeps its undivided value)
                simdgroup_barrier(mem_flags::mem_threadgroup);
                const T xi = T(x[i]) / T(H[hb + long(i) * nn + i]);
                for (int r = lane; r < i; r += 32) x[r] = fma(-T(H[hb + long(r) * nn + i]), xi, T(x[r]));
            }
            for (int r = lane; r < k; r += 32) x[r] = T(x[r]) / T(H[hb + long(r) * nn + r]);
        } else {
            for (int i = 0; i < k; i++) { // R^T y = b
                simdgroup_barrier(mem_flags::mem_threadgroup);
                const T yi = T(x[i]) / T(H[hb + long(i) * nn + i]);
                for (int r = i + 1 + lane; r < k; r += 32) x[r] = fma(-T(H[hb + long(i) * nn + r]), yi, T(x[r]));
            }
            for (int r = lane; r < k; r += 32) x[r] = T(x[r]) / T(H[hb + long(r) * nn + r]);
            for (int j = k - 1; j >= 0; j--) { // x = Q [y; 0]
                T s = T(0);
                for (int i = j + ((lane - j) & 31); i < n; i += 32) s = fma(i == j ? T(1) : T(H[hb + long(i) * nn + j]), T(x[i]), s);
                const T ts = T(tau[tb + j]) * simd_sum(s);
                for (int i = j + ((lane - j) & 31); i < n; i += 32) x[i] = fma(-(i == j ? T(1) : T(H[hb + long(i) * nn + j])), ts, T(x[i]));
            }
        }
        for (int r = lane; r < n; r += 32) X[xb + long(r) * nrhs] = bad == INT_MAX ? T(x[r]) : T(NAN);
    }
}
