// eigh_tg: symmetric eigendecomposition (NumPy's eigh) of a batch of n x n
// matrices by two-sided Jacobi, one threadgroup per matrix (the GPU path;
// any backend runs it correctly, 0 <= n <= 256).
//   A    (batch, n, n) any strides; only the lower (upper == 0) or upper
//        (upper == 1) triangle is read
//   w    (batch, n): eigenvalues, ascending
//   v    (batch, n, n): eigenvectors as columns, v(:, k) for w(k) (written
//        only when `vectors`; else a dummy)
//   info (batch) int32: 0 converged, 1 a NaN or Inf was read (w and v are
//        NaN), 2 not converged after max_sweeps sweeps (the last sweep's
//        values and vectors are returned)
//   work (batch, 2, n, n): the working matrix and the vectors when they do
//        not live in threadgroup memory (SMEM false); else a dummy
// Template: T (float32, float64), SMEM (true: the matrix and the vectors in
// dynamic threadgroup memory, 2 * n * ld * sizeof(T) bytes, ld = n | 1).
// Launch constants: int32 n, upper, vectors, max_sweeps; int64 batch, sa_b,
// sa_r, sa_c, a_off, z_off, ld. A(b, p, q) = A[a_off + b*sa_b + p*sa_r +
// q*sa_c]; matrix b of the launch is matrix z = z_off + b of the outputs.
// Launch: grid = (batch * NT, 1, 1), threadgroup = (NT, 1, 1), NT a
// multiple of 32.
//
// The matrix is symmetrised into W (both triangles) and scaled by a power
// of two so that max |a| is in [0.5, 1) (exact; no overflow in the
// rotations). Sweeps run while the off-diagonal Frobenius norm is above
// n u ||A||_F (u the unit roundoff: the level of the rounding noise in
// the off-diagonal elements themselves). A sweep is N - 1 parallel steps of
// the round-robin ("circle") tournament over N = n rounded up to even
// indices (index n is a dummy when n is odd): at step r the pairs are
// (N-1, r) and ((r+i) mod (N-1), (r-i) mod (N-1)) for i = 1..N/2-1, so
// every pair meets once per sweep and the N/2 rotations of a step are
// disjoint. A pair whose |a_pq| <= u ||A||_F is not rotated: rotating
// elements at the rounding level inside a cluster of equal eigenvalues
// turns by large, meaningless angles that spread the couplings to the other
// eigenvalues around and make the convergence linear. Each step: (1) one thread per pair computes its rotation from
// a_pp, a_qq, a_pq (Rutishauser's formulas: zeta = (a_qq - a_pp) / 2a_pq,
// t = sign(zeta) / (|zeta| + sqrt(1 + zeta^2)), c = 1/sqrt(1+t^2), s = ct);
// barrier; (2) W <- J^T W J in 2 x 2 blocks: the block of pairs (t, u) and
// its mirror are read, rotated on both sides and written by one thread (the
// diagonal blocks get a_pp - t a_pq, a_qq + t a_pq and an exact zero), so
// the update is in place and W stays exactly symmetric; V <- V J, one
// thread per (row, pair); barrier. The eigenvalues are W's diagonal at the
// end, ranked (ties by index) and written with the vectors in that order.
//! name: alloy_eigh_tg
//! inputs: A
//! outputs: w v info work
//! ensure_row_contiguous: false
//! template: T=float32
//! template: SMEM=true
//! header:
// The pair (p < q) of slot i at step r of the circle tournament on N
// indices (N even).
inline void alloy_eigh_pair(int r, int i, int N, thread int &p, thread int &q) {
    int a, b;
    if (i == 0) {
        a = N - 1;
        b = r;
    } else {
        a = (r + i) % (N - 1);
        b = (r - i + N - 1) % (N - 1);
    }
    p = a < b ? a : b;
    q = a < b ? b : a;
}

// The Jacobi rotation that zeroes the (p, q) element of the symmetric 2 x 2
// matrix [[app, apq], [apq, aqq]]: c, s and t = s / c.
template <class T>
inline void alloy_eigh_rotation(T app, T aqq, T apq, thread T &c, thread T &s, thread T &t) {
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

// Sum (or max) of x over the threadgroup, in every thread. red: 32 slots.
template <class T, class R>
inline T alloy_eigh_group_sum(T x, R &red, int tid, int nt) {
    x = simd_sum(x);
    if ((tid & 31) == 0) red[tid >> 5] = x;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    T s = T(0);
    for (int k = 0; k < (nt + 31) / 32; k++) s += red[k];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return s;
}
template <class T, class R>
inline T alloy_eigh_group_max(T x, R &red, int tid, int nt) {
    x = simd_max(x);
    if ((tid & 31) == 0) red[tid >> 5] = x;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    T s = T(0);
    for (int k = 0; k < (nt + 31) / 32; k++) s = max(s, T(red[k]));
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return s;
}

// The whole decomposition of one matrix; W and V hold n x n matrices with
// row stride ld (threadgroup or device memory). Returns info.
template <class T, class P, class AP, class WO, class VO, class R, class C, class I>
int alloy_eigh_tg_run(P W, P V, long ld, AP Ab, long sa_r, long sa_c, WO wout, VO vout, int n, bool upper,
                      bool vectors, int max_sweeps, int tid, int nt, R &red, C &cs, I &perm) {
    const long nsq = long(n) * n;
    // load the referenced triangle into both triangles of W
    T amax = T(0), bad = T(0);
    for (long e = tid; e < nsq; e += nt) {
        const int p = int(e / n), q = int(e - long(p) * n);
        if (upper ? q < p : q > p) continue;
        const T x = Ab[long(p) * sa_r + long(q) * sa_c];
        if (!isfinite(x)) bad = T(1);
        else amax = max(amax, T(fabs(x)));
        W[long(p) * ld + q] = x;
        W[long(q) * ld + p] = x;
    }
    amax = alloy_eigh_group_max<T>(amax, red, tid, nt);
    bad = alloy_eigh_group_max<T>(bad, red, tid, nt);
    if (bad != T(0)) {
        for (int i = tid; i < n; i += nt) wout[i] = T(NAN);
        if (vectors)
            for (long e = tid; e < nsq; e += nt) vout[e] = T(NAN);
        return 1;
    }
    int ex = 0;
    if (amax > T(0)) frexp(amax, ex);
    // scale by 2^-ex, V = I, ||A||_F^2
    T nrm = T(0);
    for (long e = tid; e < nsq; e += nt) {
        const int i = int(e / n), j = int(e - long(i) * n);
        const T x = ldexp(T(W[long(i) * ld + j]), -ex);
        W[long(i) * ld + j] = x;
        nrm = fma(x, x, nrm);
        if (vectors) V[long(i) * ld + j] = i == j ? T(1) : T(0);
    }
    nrm = alloy_eigh_group_sum<T>(nrm, red, tid, nt);
    const T u = T(0.5) * numeric_limits<T>::epsilon();
    const T tol = u * T(n > 1 ? n : 1);
    const T tol2 = tol * tol * nrm;
    const T skip = u * sqrt(nrm); // |a_pq| at or below: no rotation
    const int N = n + (n & 1), np = N / 2;
    int info = 2;
    for (int sweep = 0; sweep <= max_sweeps; sweep++) {
        T off = T(0);
        for (long e = tid; e < nsq; e += nt) {
            const int i = int(e / n), j = int(e - long(i) * n);
            const T x = W[long(i) * ld + j];
            if (i != j) off = fma(x, x, off);
        }
        off = alloy_eigh_group_sum<T>(off, red, tid, nt);
        if (off <= tol2) {
            info = 0;
            break;
        }
        if (sweep == max_sweeps) break;
        for (int r = 0; r < N - 1; r++) {
            for (int t = tid; t < np; t += nt) {
                int p, q;
                alloy_eigh_pair(r, t, N, p, q);
                T c = T(1), s = T(0), tn = T(0);
                if (q < n && fabs(T(W[long(p) * ld + q])) > skip)
                    alloy_eigh_rotation<T>(T(W[long(p) * ld + p]), T(W[long(q) * ld + q]), T(W[long(p) * ld + q]), c,
                                           s, tn);
                cs[3 * t] = c;
                cs[3 * t + 1] = s;
                cs[3 * t + 2] = tn;
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            // W <- J^T W J, the blocks (t, u) with t <= u and their mirrors
            for (int e = tid; e < np * np; e += nt) {
                const int t = e / np, uu = e - t * np;
                if (uu < t) continue;
                int p, q, p2, q2;
                alloy_eigh_pair(r, t, N, p, q);
                const T c = cs[3 * t], s = cs[3 * t + 1];
                if (uu == t) {
                    if (q < n && s != T(0)) {
                        const T apq = W[long(p) * ld + q], tn = cs[3 * t + 2];
                        W[long(p) * ld + p] = T(W[long(p) * ld + p]) - tn * apq;
                        W[long(q) * ld + q] = T(W[long(q) * ld + q]) + tn * apq;
                        W[long(p) * ld + q] = T(0);
                        W[long(q) * ld + p] = T(0);
                    }
                    continue;
                }
                alloy_eigh_pair(r, uu, N, p2, q2);
                const T c2 = cs[3 * uu], s2 = cs[3 * uu + 1];
                const bool hq = q < n, hq2 = q2 < n;
                // x = W(rows p,q ; cols p2,q2), absent (dummy) entries 0
                T x00 = W[long(p) * ld + p2];
                T x01 = hq2 ? T(W[long(p) * ld + q2]) : T(0);
                T x10 = hq ? T(W[long(q) * ld + p2]) : T(0);
                T x11 = (hq && hq2) ? T(W[long(q) * ld + q2]) : T(0);
                // rows: p' = c p - s q, q' = s p + c q
                const T y00 = c * x00 - s * x10, y10 = s * x00 + c * x10;
                const T y01 = c * x01 - s * x11, y11 = s * x01 + c * x11;
                // columns
                x00 = c2 * y00 - s2 * y01;
                x01 = s2 * y00 + c2 * y01;
                x10 = c2 * y10 - s2 * y11;
                x11 = s2 * y10 + c2 * y11;
                W[long(p) * ld + p2] = x00;
                W[long(p2) * ld + p] = x00;
                if (hq2) {
                    W[long(p) * ld + q2] = x01;
                    W[long(q2) * ld + p] = x01;
                }
                if (hq) {
                    W[long(q) * ld + p2] = x10;
                    W[long(p2) * ld + q] = x10;
                }
                if (hq && hq2) {
                    W[long(q) * ld + q2] = x11;
                    W[long(q2) * ld + q] = x11;
                }
            }
            // V <- V J: thread (row i, pair t); consecutive threads take
            // consecutive rows (distinct banks with ld odd)
            if (vectors) {
                for (int e = tid; e < n * np; e += nt) {
                    const int t = e / n, i = e - t * n;
                    int p, q;
                    alloy_eigh_pair(r, t, N, p, q);
                    if (q >= n) continue;
                    const T c = cs[3 * t], s = cs[3 * t + 1];
                    const T vp = V[long(i) * ld + p], vq = V[long(i) * ld + q];
                    V[long(i) * ld + p] = c * vp - s * vq;
                    V[long(i) * ld + q] = s * vp + c * vq;
                }
            }
            threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
        }
    }
    // rank the eigenvalues (ascending, ties by index)
    for (int i = tid; i < n; i += nt) {
        const T di = W[long(i) * ld + i];
        int rank = 0;
        for (int j = 0; j < n; j++) {
            const T dj = W[long(j) * ld + j];
            rank += (dj < di || (dj == di && j < i)) ? 1 : 0;
        }
        perm[rank] = i;
        wout[rank] = ldexp(di, ex);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (vectors)
        for (long e = tid; e < nsq; e += nt) {
            const int i = int(e / n), k = int(e - long(i) * n);
            vout[e] = V[long(i) * ld + perm[k]];
        }
    return info;
}
//! body:
threadgroup T red[32];
threadgroup T cs[3 * 128];
threadgroup int perm[256];
const int tid = int(thread_index_in_threadgroup);
const int nt = int(threads_per_threadgroup.x);
const long bz = long(threadgroup_position_in_grid.x);
const long z = z_off + bz;
const long nsq = long(n) * n;
auto Ab = A + (a_off + bz * sa_b);
auto wz = w + z * long(n);
auto vz = v + (vectors ? z * nsq : 0L);
int info_m;
if (SMEM) {
    threadgroup T *dyn = (threadgroup T *)alloy_threadgroup_memory;
    info_m = alloy_eigh_tg_run<T>(dyn, dyn + n * ld, ld, Ab, sa_r, sa_c, wz, vz, n, upper != 0, vectors != 0,
                                  max_sweeps, tid, nt, red, cs, perm);
} else {
    auto wk = work + z * 2 * nsq;
    info_m = alloy_eigh_tg_run<T>(wk, wk + nsq, ld, Ab, sa_r, sa_c, wz, vz, n, upper != 0, vectors != 0,
                                  max_sweeps, tid, nt, red, cs, perm);
}
if (tid == 0) info[z] = info_m;
