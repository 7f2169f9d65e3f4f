// eigh_tridiag: symmetric eigendecomposition (NumPy's eigh) of a batch of
// n x n matrices by Householder tridiagonalisation and the implicit QL
// method with Wilkinson shifts, one threadgroup per matrix (the GPU path for
// 32 < n <= 256; any backend runs it correctly, 0 <= n <= 256).
//   A    (batch, n, n) any strides; only the lower (upper == 0) or upper
//        (upper == 1) triangle is read
//   w    (batch, n): eigenvalues, ascending
//   v    (batch, n, n): eigenvectors as columns, v(:, k) for w(k) (written
//        only when `vectors`; else a dummy)
//   info (batch) int32: 0 converged, 1 a NaN or Inf was read (w and v are
//        NaN), 2 some eigenvalue took more than max_sweeps QL iterations
//        (see below; values and vectors are returned all the same)
//   work (batch, n, n): the working matrix when it does not live in
//        threadgroup memory (SMEM false); else a dummy
// Template: T (float32, float64), SMEM (true: the matrix in dynamic
// threadgroup memory, n * ld elements, ld = n | 1, before the small arrays).
// Dynamic threadgroup memory, always: (SMEM ? n * ld : 0) + 8 n + 32
// elements of T, then n + 4 int32.
// Launch constants: int32 n, upper, vectors, max_sweeps; int64 sa_b, sa_r,
// sa_c, a_off, z_off, ld. A(b, p, q) = A[a_off + b*sa_b + p*sa_r + q*sa_c];
// matrix b of the launch is matrix z = z_off + b of the outputs.
// Launch: grid = (batch * NT, 1, 1), threadgroup = (NT, 1, 1), NT a
// multiple of 32 and at least n + 32 (SIMD group 0 runs the QL chase, the
// others own one row of the vectors each while it runs).
//
// 1. The referenced triangle is loaded into both triangles of the working
//    matrix M and scaled by a power of two so that max |a| is in [0.5, 1)
//    (exact; nothing overflows below).
// 2. Tridiagonalisation (LAPACK's sytd2, lower): for column k the reflector
//    H = I - tau v v^T with v(k+1) = 1 maps M(k+1:, k) to beta e1; every SIMD
//    group computes the column's norm itself (the same lanes, the same
//    simd_sum, so every thread holds the same tau and beta and no barrier is
//    needed); p = tau M22 v (thread per row, reading M's columns: consecutive
//    threads, consecutive addresses); w = p - (tau/2)(p.v) v; M22 -= v w^T +
//    w v^T with each element's two products in the order of its (lower,
//    higher) index, so M stays exactly symmetric. Three barriers per column.
//    v is kept in row k of M. A column whose norm^2 is below
//    min_normal / u^2 is left as it is (tau = 0: its entries below the
//    subdiagonal, under 1e-12 of max |a| in float32, are dropped — far under
//    the n u ||A|| the method's backward error is anyway); so a diagonal
//    matrix gives Q = I exactly.
// 3. With vectors, Q = H_0 ... H_{n-3} is formed in place over the
//    reflectors (LAPACK's orgtr, backward accumulation), stored transposed:
//    M(c, r) = Q(r, c), so a row of Q is a column of M and the rotations
//    below touch consecutive addresses in consecutive threads.
// 4. Implicit QL with Wilkinson shifts (EISPACK's tql2) on the tridiagonal
//    d, e: e(m) is negligible when |e(m)| <= u (|d(m)| + |d(m+1)|) (a
//    relative test, as LAPACK's) or |e(m)| <= sqrt(n) u max |t_ij| (the
//    rounding noise a sweep leaves in e(l); each such deflation perturbs T by
//    at most sqrt(n) u ||A||_2, the order of the reduction's own backward
//    error, so the eigenvalues stay within the normwise bounds, and zero,
//    graded or clustered eigenvalues no longer stall). One thread runs the chase
//    (serial by nature); each sweep's rotations are recorded (c, s per plane)
//    in one of two buffers, and while the chase thread computes sweep j the
//    other SIMD groups apply sweep j - 1 to Q's rows, one row per thread,
//    walking the planes in order with the running column in a register: one
//    barrier per sweep and the vector work hidden behind the chase. The
//    rotation's r = sqrt(f^2 + g^2) is rescaled only where f^2 + g^2 is below
//    min_normal / u. Iterations are counted per eigenvalue as in tql2: one
//    that takes more than max_sweeps is accepted as it stands (info 2) and
//    the next one is worked on, so the values are the diagonal of Q^T A Q
//    with the off-diagonal part not yet reduced and the vectors stay
//    orthonormal.
// 5. The eigenvalues are ranked (ascending, ties by index) and written with
//    the vectors in that order.
//! name: alloy_eigh_tridiag
//! inputs: A
//! outputs: w v info work
//! ensure_row_contiguous: false
//! template: T=float32
//! template: SMEM=true
//! header:
// Sum (max) of x over the threadgroup, in every thread: lanes by simd_sum,
// then the SIMD groups in index order. red: 32 slots.
template <class T, class R>
inline T alloy_eigh_td_sum(T x, R red, int tid, int nt) {
    x = simd_sum(x);
    if ((tid & 31) == 0) red[tid >> 5] = x;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    T s = T(0);
    for (int k = 0; k < nt / 32; k++) s += red[k];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return s;
}
template <class T, class R>
inline T alloy_eigh_td_max(T x, R red, int tid, int nt) {
    x = simd_max(x);
    if ((tid & 31) == 0) red[tid >> 5] = x;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    T s = T(0);
    for (int k = 0; k < nt / 32; k++) s = max(s, T(red[k]));
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return s;
}

// Householder tridiagonalisation of the symmetric M (both triangles, row
// stride ld): d, e the tridiagonal, tau and the rows of M the reflectors.
// pw: n scratch slots, red: 32.
template <class T, class P, class S>
void alloy_eigh_td_reduce(P M, long ld, int n, S d, S e, S tau, S pw, S red, int tid, int nt) {
    const int lane = tid & 31, warp = tid >> 5, nw = nt >> 5;
    const T u = T(0.5) * numeric_limits<T>::epsilon();
    const T tiny = numeric_limits<T>::min() / (u * u);
    for (int k = 0; k + 2 < n; k++) {
        const int k1 = k + 1;
        P rowk = M + long(k) * ld;
        T part = T(0);
        for (int j = k + 2 + lane; j < n; j += 32) part = fma(T(rowk[j]), T(rowk[j]), part);
        const T sig2 = simd_sum(part); // the same value in every SIMD group
        const T alpha = rowk[k1];
        const T nrm2 = fma(alpha, alpha, sig2);
        if (!(sig2 > T(0) && nrm2 >= tiny)) { // nothing (or only dust) to annihilate
            if (tid == 0) {
                d[k] = rowk[k];
                e[k] = alpha;
                tau[k] = T(0);
            }
            continue;
        }
        const T beta = alpha >= T(0) ? -sqrt(nrm2) : sqrt(nrm2);
        const T tk = (beta - alpha) / beta;
        const T sc = T(1) / (alpha - beta);
        // p = tau M22 v from the raw column x (v = x sc, v(k+1) = 1)
        T pv = T(0);
        for (int i = k1 + tid; i < n; i += nt) {
            T a0 = T(0), a1 = T(0), a2 = T(0), a3 = T(0);
            int j = k + 2;
            for (; j + 3 < n; j += 4) {
                a0 = fma(T(M[long(j) * ld + i]), T(rowk[j]), a0);
                a1 = fma(T(M[long(j + 1) * ld + i]), T(rowk[j + 1]), a1);
                a2 = fma(T(M[long(j + 2) * ld + i]), T(rowk[j + 2]), a2);
                a3 = fma(T(M[long(j + 3) * ld + i]), T(rowk[j + 3]), a3);
            }
            for (; j < n; j++) a0 = fma(T(M[long(j) * ld + i]), T(rowk[j]), a0);
            const T p = tk * fma(sc, (a0 + a1) + (a2 + a3), T(M[long(k1) * ld + i]));
            const T vi = i == k1 ? T(1) : T(rowk[i]) * sc;
            pw[i] = p;
            pv = fma(p, vi, pv);
        }
        pv = simd_sum(pv);
        if (lane == 0) red[warp] = pv;
        threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
        T ptv = T(0);
        for (int q = 0; q < nw; q++) ptv += red[q];
        const T K = T(0.5) * tk * ptv;
        // w = p - K v; v replaces x in row k
        for (int i = k1 + tid; i < n; i += nt) {
            const T vi = i == k1 ? T(1) : T(rowk[i]) * sc;
            pw[i] = fma(-K, vi, T(pw[i]));
            if (i > k1) rowk[i] = vi;
        }
        if (tid == 0) {
            d[k] = rowk[k];
            e[k] = beta;
            tau[k] = tk;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
        // M22 -= v w^T + w v^T: columns by lane, rows by SIMD group, four
        // rows at a time (their loads issued before any store: the compiler
        // cannot move a load of M above a store to M by itself)
        for (int i = k1 + lane; i < n; i += 32) {
            const T vi = i == k1 ? T(1) : T(rowk[i]), wi = pw[i];
            for (int j = k1 + warp; j < n; j += 4 * nw) {
                T x[4], vj[4], wj[4];
                for (int q = 0; q < 4; q++) {
                    // past the end: row j again (this thread's own element: no other
                    // thread's store races the load), loaded, not stored
                    const int jq = j + q * nw < n ? j + q * nw : j;
                    x[q] = M[long(jq) * ld + i];
                    vj[q] = jq == k1 ? T(1) : T(rowk[jq]);
                    wj[q] = pw[jq];
                }
                for (int q = 0; q < 4; q++) {
                    const int jq = j + q * nw;
                    const T t = i <= jq ? fma(vi, wj[q], wi * vj[q]) : fma(vj[q], wi, wj[q] * vi);
                    if (jq < n) M[long(jq) * ld + i] = x[q] - t;
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
    }
    if (tid == 0) {
        if (n >= 2) {
            d[n - 2] = M[long(n - 2) * ld + (n - 2)];
            e[n - 2] = M[long(n - 1) * ld + (n - 2)];
        }
        if (n >= 1) {
            d[n - 1] = M[long(n - 1) * ld + (n - 1)];
            e[n - 1] = T(0);
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
}

// Q = H_0 ... H_{n-3} in place over the reflectors (row k of M: v_k, tau[k]),
// transposed: M(c, r) = Q(r, c). Stage k makes the block of rows and columns
// k+1.. (Q's column k+1 and the update of the columns after it); M's rows
// and columns before k+1 are written by later stages, row and column 0 last.
template <class T, class P, class S>
void alloy_eigh_td_form_q(P M, long ld, int n, S tau, S pw, int tid, int nt) {
    const int lane = tid & 31, warp = tid >> 5, nw = nt >> 5;
    if (tid == 0 && n >= 1) M[long(n - 1) * ld + (n - 1)] = T(1);
    threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
    for (int k = n - 3; k >= 0; k--) {
        const int k1 = k + 1;
        const T tk = tau[k];
        P rowk = M + long(k) * ld;
        if (tk != T(0)) { // pw(j) = tau (v . Q(:, j)), j > k + 1
            for (int j = k + 2 + tid; j < n; j += nt) {
                P qj = M + long(j) * ld;
                T a0 = T(0), a1 = T(0), a2 = T(0), a3 = T(0);
                int i = k + 2;
                for (; i + 3 < n; i += 4) {
                    a0 = fma(T(rowk[i]), T(qj[i]), a0);
                    a1 = fma(T(rowk[i + 1]), T(qj[i + 1]), a1);
                    a2 = fma(T(rowk[i + 2]), T(qj[i + 2]), a2);
                    a3 = fma(T(rowk[i + 3]), T(qj[i + 3]), a3);
                }
                for (; i < n; i++) a0 = fma(T(rowk[i]), T(qj[i]), a0);
                pw[j] = tk * ((a0 + a1) + (a2 + a3));
            }
            threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
        }
        // Q's column k+1 is e_{k+1} - tau v; the columns after it take
        // Q(k+1:, j) -= tau v (v . Q(:, j)) (Q(k+1, j) was 0). Columns of Q
        // (rows of M) by SIMD group, four at a time as in the reduction
        for (int i = k1 + lane; i < n; i += 32) {
            const T vi = i == k1 ? T(1) : T(rowk[i]);
            for (int j = k1 + warp; j < n; j += 4 * nw) {
                T x[4], tw[4];
                for (int q = 0; q < 4; q++) {
                    const int jq = j + q * nw < n ? j + q * nw : j; // as in the reduction
                    x[q] = M[long(jq) * ld + i];
                    tw[q] = tk != T(0) ? T(pw[jq]) : T(0);
                }
                for (int q = 0; q < 4; q++) {
                    const int jq = j + q * nw;
                    const T y = jq == k1 ? (i == k1 ? T(1) - tk : T(0) - tk * vi)
                                         : (i == k1 ? T(0) - tw[q] : fma(-tw[q], vi, x[q]));
                    if (jq < n) M[long(jq) * ld + i] = y;
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
    }
    for (int i = tid; i < n; i += nt) { // Q's row and column 0: e_0
        M[i] = i == 0 ? T(1) : T(0);
        if (i > 0) M[long(i) * ld] = T(0);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
}

// One implicit QL sweep with a Wilkinson shift on the first unreduced block
// at or after l (l and iter, the iterations spent on eigenvalue l, advance
// as eigenvalues converge; info becomes 2 where one takes more than
// max_sweeps). The rotation of plane (i, i+1) goes to cb[i], sb[i], for i
// from the returned m - 1 down to lo. Returns -1 when every eigenvalue has
// converged. e(m) is negligible at or below floor_e too. Run by one thread.
template <class T, class S>
int alloy_eigh_td_ql_sweep(S d, S e, S cb, S sb, int n, int max_sweeps, T floor_e, thread int &l, thread int &iter,
                           thread int &info, thread int &lo) {
    const T u = T(0.5) * numeric_limits<T>::epsilon();
    const T safe2 = numeric_limits<T>::min() / u;
    while (l < n) {
        // m: the first negligible e(m) at or after l, or n - 1; four
        // entries per step, their loads issued together (indices clamped to
        // n - 2: a repeated entry gives the same answer again)
        int m = l;
        while (m + 1 < n) {
            int ix[4];
            bool neg[4];
            for (int k = 0; k < 4; k++) ix[k] = min(m + k, n - 2);
            for (int k = 0; k < 4; k++) {
                const T ek = fabs(T(e[ix[k]])), sk = fabs(T(d[ix[k]])) + fabs(T(d[ix[k] + 1]));
                neg[k] = ek <= max(u * sk, floor_e);
            }
            if (neg[0] || neg[1] || neg[2] || neg[3]) {
                m = neg[0] ? ix[0] : neg[1] ? ix[1] : neg[2] ? ix[2] : ix[3];
                break;
            }
            m = min(m + 4, n - 1);
        }
        if (m == l) {
            l++;
            iter = 0;
            continue;
        }
        if (iter >= max_sweeps) { // accepted as it stands
            info = 2;
            l++;
            iter = 0;
            continue;
        }
        iter++;
        const T el = e[l], dl = d[l];
        T g = (T(d[l + 1]) - dl) / (T(2) * el);
        const T ag = fabs(g);
        const T root = ag > T(1) ? ag * sqrt(T(1) + (T(1) / ag) * (T(1) / ag)) : sqrt(T(1) + ag * ag);
        g = T(d[m]) - dl + el / (g + (g >= T(0) ? root : -root));
        T s = T(1), c = T(1), p = T(0);
        T dn = d[m], di = d[m - 1], ei = e[m - 1]; // d(i+1), d(i), e(i), loaded a step ahead
        int i = m - 1;
        for (; i >= l; i--) {
            const int ip = i > l ? i - 1 : l;
            const T di_next = d[ip], ei_next = e[ip];
            const T f = s * ei, b = c * ei, b2 = T(2) * b;
            const T r2 = fma(f, f, g * g);
            T r;
            if (r2 >= safe2) {
                r = sqrt(r2);
            } else { // rescaled (f^2 + g^2 would lose digits or underflow)
                const T mx = max(fabs(f), fabs(g));
                if (mx == T(0)) { // the block splits at i + 1 (tql2's recovery)
                    d[i + 1] = dn - p;
                    e[i + 1] = T(0);
                    e[m] = T(0);
                    lo = i + 1;
                    return m;
                }
                const T fs = f / mx, gs = g / mx;
                r = mx * sqrt(fma(fs, fs, gs * gs));
            }
            const T rinv = T(1) / r;
            e[i + 1] = r;
            s = f * rinv;
            c = g * rinv;
            g = dn - p;
            const T t = fma(di - g, s, c * b2);
            p = s * t;
            d[i + 1] = g + p;
            g = fma(c, t, -b);
            cb[i] = c;
            sb[i] = s;
            dn = di;
            di = di_next;
            ei = ei_next;
        }
        d[l] = dn - p;
        e[l] = g;
        e[m] = T(0);
        lo = l;
        return m;
    }
    return -1;
}

// The whole decomposition of one matrix in M (threadgroup or device memory,
// row stride ld); sm: the 8 n + 32 small slots, qs: n + 4 ints. Returns info
// (meaningful in thread 0).
template <class T, class P, class S, class I, class AP, class WO, class VO>
int alloy_eigh_td_run(P M, long ld, S sm, I qs, AP Ab, long sa_r, long sa_c, WO wout, VO vout, int n, bool upper,
                      bool vectors, int max_sweeps, int tid, int nt) {
    const long nsq = long(n) * n;
    S d = sm, e = sm + n, tau = sm + 2 * n, pw = sm + 3 * n, cs = sm + 4 * n, red = sm + 8 * n;
    I perm = qs + 4;
    // load the referenced triangle into both triangles of M
    T amax = T(0), bad = T(0);
    for (long q = tid; q < nsq; q += nt) {
        const int r = int(q / n), c = int(q - long(r) * n);
        if (upper ? c < r : c > r) continue;
        const T x = Ab[long(r) * sa_r + long(c) * sa_c];
        if (!isfinite(x)) bad = T(1);
        else amax = max(amax, T(fabs(x)));
        M[long(r) * ld + c] = x;
        M[long(c) * ld + r] = x;
    }
    amax = alloy_eigh_td_max<T>(amax, red, tid, nt);
    bad = alloy_eigh_td_max<T>(bad, red, tid, nt);
    if (bad != T(0)) {
        for (int i = tid; i < n; i += nt) wout[i] = T(NAN);
        if (vectors)
            for (long q = tid; q < nsq; q += nt) vout[q] = T(NAN);
        return 1;
    }
    int ex = 0;
    if (amax > T(0)) frexp(amax, ex);
    for (long q = tid; q < nsq; q += nt) {
        const int r = int(q / n), c = int(q - long(r) * n);
        M[long(r) * ld + c] = ldexp(T(M[long(r) * ld + c]), -ex);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
    alloy_eigh_td_reduce<T>(M, ld, n, d, e, tau, pw, red, tid, nt);
    if (vectors) alloy_eigh_td_form_q<T>(M, ld, n, tau, pw, tid, nt);
    int l = 0, iter = 0, info = 0, lo = 0;
    // the absolute deflation floor, sqrt(n) u max |t_ij| (<= sqrt(n) u
    // ||A||_2, the size of the reduction's own backward error): a sweep
    // leaves rounding noise of about that size in e(l) (it grows with n), so
    // a test relative to d(l), d(l+1) alone stalls where they are small next
    // to the rest (zero and graded eigenvalues), and a smaller floor stalls
    // inside clusters of eigenvalues a few u apart (the tests' float32
    // clusters took 15 to 33 sweeps for one eigenvalue with u max |t_ij|)
    T floor_e = T(0);
    if (tid == 0)
        for (int i = 0; i < n; i++) floor_e = max(floor_e, max(T(fabs(T(d[i]))), T(fabs(T(e[i])))));
    floor_e *= T(0.5) * numeric_limits<T>::epsilon() * sqrt(T(n > 1 ? n : 1));
    // sweep j's rotations in buffer j & 1 (c at cs + 2 n b, s n later), its
    // planes in qs[2b] (lo) and qs[2b + 1] (m, -1: done). Eigenvalues only
    // takes the same loop (one call site of the chase, so the GPU compiler
    // cannot round the two modes' values differently), without the vectors
    for (int j = 0;; j++) {
        const int b = j & 1;
        if (tid == 0) {
            const int m = alloy_eigh_td_ql_sweep<T>(d, e, cs + 2 * n * b, cs + 2 * n * b + n, n, max_sweeps,
                                                    floor_e, l, iter, info, lo);
            qs[2 * b] = lo;
            qs[2 * b + 1] = m;
        } else if (vectors && tid >= 32 && j > 0) { // sweep j - 1 on Q's row tid - 32
            const int pb = b ^ 1, plo = qs[2 * pb], phi = qs[2 * pb + 1];
            S cb = cs + 2 * n * pb, sb = cb + n;
            for (int r = tid - 32; r < n; r += nt - 32) {
                T x = M[long(phi) * ld + r]; // Q(r, i + 1), updated as i walks down
                for (int i = phi - 1; i >= plo; i--) {
                    const T y = M[long(i) * ld + r];
                    const T c = cb[i], s = sb[i];
                    M[long(i + 1) * ld + r] = fma(s, y, c * x);
                    x = fma(c, y, -s * x);
                }
                M[long(plo) * ld + r] = x;
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
        if (qs[2 * b + 1] < 0) break;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
    // rank the eigenvalues (ascending, ties by index)
    for (int i = tid; i < n; i += nt) {
        const T di = d[i];
        int rank = 0;
        for (int j = 0; j < n; j++) {
            const T dj = d[j];
            rank += (dj < di || (dj == di && j < i)) ? 1 : 0;
        }
        perm[rank] = i;
        wout[rank] = ldexp(di, ex);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (vectors) { // v(r, k) = Q(r, perm k) = M(perm k, r): rows by SIMD group
        const int lane = tid & 31, nw = nt >> 5;
        for (int r = tid >> 5; r < n; r += nw)
            for (int k = lane; k < n; k += 32) vout[long(r) * n + k] = M[long(perm[k]) * ld + r];
    }
    return info;
}
//! body:
const int tid = int(thread_index_in_threadgroup);
const int nt = int(threads_per_threadgroup.x);
const long bz = long(threadgroup_position_in_grid.x);
const long z = z_off + bz;
const long nsq = long(n) * n;
threadgroup T *dyn = (threadgroup T *)alloy_threadgroup_memory;
threadgroup T *sm = dyn + (SMEM ? long(n) * ld : 0L);
threadgroup int *qs = (threadgroup int *)(sm + 8 * n + 32);
auto Ab = A + (a_off + bz * sa_b);
auto wz = w + z * long(n);
auto vz = v + (vectors ? z * nsq : 0L);
int info_m;
if (SMEM)
    info_m = alloy_eigh_td_run<T>(dyn, ld, sm, qs, Ab, sa_r, sa_c, wz, vz, n, upper != 0, vectors != 0, max_sweeps,
                                  tid, nt);
else
    info_m = alloy_eigh_td_run<T>(work + z * nsq, ld, sm, qs, Ab, sa_r, sa_c, wz, vz, n, upper != 0, vectors != 0,
                                  max_sweeps, tid, nt);
if (tid == 0) info[z] = info_m;
