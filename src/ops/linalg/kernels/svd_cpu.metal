// svd_cpu: singular value decomposition (NumPy's svd) of a batch of m x n
// matrices by one-sided (Hestenes) Jacobi, one thread per matrix (the CPU
// backend's path: no barriers, so each group runs as a plain loop; any
// backend runs it correctly, any m, n >= 0). Semantics, outputs, scaling,
// stopping rule and the completion of U as svd_tg:
//   A (batch, m, n) any strides -> s (batch, k), u (batch, m, ucols),
//   vh (batch, vrows, n) (u, vh only when `uv`), info (batch) int32
//   work (batch, M*N + N*N + 2N + 3M): G and V column-major, the values,
//        their order, and the completion's row sums, vector and products
// The pairs are taken in the cyclic order (p, q), p < q, row by row.
// Template: T. Launch constants: int32 m, n, uv, ucols, vrows, max_sweeps;
// int64 sa_b, sa_r, sa_c, a_off, z_off. Launch: grid = (batch, 1, 1),
// threadgroup = (1, 1, 1).
//! name: alloy_svd_cpu
//! inputs: A
//! outputs: s u vh info work
//! ensure_row_contiguous: false
//! template: T=float32
//! body:
const long bz = long(thread_position_in_grid.x);
const long z = z_off + bz;
const bool wide = m < n;
const int M = wide ? n : m, N = wide ? m : n;
const long mn = long(M) * N;
auto Ab = A + (a_off + bz * sa_b);
auto G = work + z * (mn + long(N) * N + 2 * N + 3 * M);
auto V = G + mn;
auto sig = V + long(N) * N;
auto ord = sig + N;
auto rn = ord + N;
auto xs = rn + M;
auto dots = xs + M;
auto sz = s + z * long(N);
const int ucn = wide ? vrows : ucols; // columns of U'
auto Up = wide ? vh + (uv ? z * long(vrows) * n : 0L) : u + (uv ? z * long(m) * ucols : 0L);
auto Vo = wide ? u + (uv ? z * long(m) * m : 0L) : vh + (uv ? z * long(vrows) * n : 0L);
const long urs = wide ? 1L : long(ucols), ucs = wide ? long(n) : 1L;
const long vrs = wide ? long(m) : 1L, vcs = wide ? 1L : long(n);
T amax = T(0);
bool bad = false;
for (int p = 0; p < m; p++)
    for (int q = 0; q < n; q++) {
        const T x = Ab[long(p) * sa_r + long(q) * sa_c];
        if (!isfinite(x)) bad = true;
        else amax = max(amax, T(fabs(x)));
        if (wide) G[long(p) * M + q] = x;
        else G[long(q) * M + p] = x;
    }
if (bad) {
    for (int j = 0; j < N; j++) sz[j] = T(NAN);
    if (uv) {
        for (int i = 0; i < M; i++)
            for (int c = 0; c < ucn; c++) Up[i * urs + c * ucs] = T(NAN);
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) Vo[i * vrs + j * vcs] = T(NAN);
    }
    info[z] = 1;
    return;
}
int ex = 0;
if (amax > T(0)) frexp(amax, ex);
for (long e = 0; e < mn; e++) G[e] = ldexp(T(G[e]), -ex);
if (uv)
    for (int j = 0; j < N; j++)
        for (int i = 0; i < N; i++) V[long(j) * N + i] = i == j ? T(1) : T(0);
const T eps = numeric_limits<T>::epsilon();
const T tol = eps * sqrt(T(M > 1 ? M : 1));
const T tiny = numeric_limits<T>::min() / (T(0.5) * eps);
int info_m = 2;
for (int sweep = 0; sweep < max_sweeps; sweep++) {
    bool rotated = false;
    for (int p = 0; p < N - 1; p++)
        for (int q = p + 1; q < N; q++) {
            auto gp = G + long(p) * M;
            auto gq = G + long(q) * M;
            T al = T(0), be = T(0), ga = T(0);
            for (int i = 0; i < M; i++) {
                const T x = gp[i], y = gq[i];
                al = fma(x, x, al);
                be = fma(y, y, be);
                ga = fma(x, y, ga);
            }
            const T na = sqrt(al), nb = sqrt(be);
            if (!(fabs(ga) > tol * na * nb) || na <= tiny || nb <= tiny) continue;
            rotated = true;
            const T zeta = (be - al) / (T(2) * ga);
            const T az = fabs(zeta);
            const T root = az > T(1) ? az * sqrt(T(1) + (T(1) / az) * (T(1) / az)) : sqrt(T(1) + az * az);
            const T tn = (zeta >= T(0) ? T(1) : T(-1)) / (az + root);
            const T c = T(1) / sqrt(T(1) + tn * tn), s_ = c * tn;
            for (int i = 0; i < M; i++) {
                const T x = gp[i], y = gq[i];
                gp[i] = c * x - s_ * y;
                gq[i] = s_ * x + c * y;
            }
            if (uv) {
                auto vp = V + long(p) * N;
                auto vq = V + long(q) * N;
                for (int i = 0; i < N; i++) {
                    const T x = vp[i], y = vq[i];
                    vp[i] = c * x - s_ * y;
                    vq[i] = s_ * x + c * y;
                }
            }
        }
    if (!rotated) {
        info_m = 0;
        break;
    }
}
// the values, descending (insertion sort of the indices, ties by index)
for (int j = 0; j < N; j++) {
    T ss = T(0);
    for (int i = 0; i < M; i++) ss = fma(T(G[long(j) * M + i]), T(G[long(j) * M + i]), ss);
    sig[j] = sqrt(ss);
}
for (int j = 0; j < N; j++) {
    const T sj = sig[j];
    int k = j;
    while (k > 0 && T(sig[long(ord[k - 1])]) < sj) {
        ord[k] = ord[k - 1];
        k--;
    }
    ord[k] = T(j);
}
for (int c = 0; c < N; c++) sz[c] = ldexp(T(sig[long(ord[c])]), ex);
if (uv) {
    for (int i = 0; i < N; i++)
        for (int c = 0; c < N; c++) Vo[i * vrs + c * vcs] = V[long(ord[c]) * N + i];
    int good = 0;
    for (int c = 0; c < N; c++) good += T(sig[long(ord[c])]) > tiny ? 1 : 0;
    for (int c = 0; c < good; c++) {
        const long j = long(ord[c]);
        const T inv_s = sig[j];
        for (int i = 0; i < M; i++) Up[i * urs + c * ucs] = T(G[j * M + i]) / inv_s;
    }
    // complete the basis (see svd_tg)
    for (int i = 0; i < M; i++) {
        T r = T(0);
        for (int c = 0; c < good; c++) r = fma(T(Up[i * urs + c * ucs]), T(Up[i * urs + c * ucs]), r);
        rn[i] = r;
    }
    for (int c = good; c < ucn; c++) {
        int best = 0;
        for (int i = 1; i < M; i++)
            if (T(rn[i]) < T(rn[best])) best = i;
        for (int i = 0; i < M; i++) xs[i] = i == best ? T(1) : T(0);
        for (int pass = 0; pass < 2; pass++) {
            for (int cc = 0; cc < c; cc++) {
                T d = T(0);
                for (int i = 0; i < M; i++) d = fma(T(Up[i * urs + cc * ucs]), T(xs[i]), d);
                dots[cc] = d;
            }
            for (int i = 0; i < M; i++) {
                T x = xs[i];
                for (int cc = 0; cc < c; cc++) x = fma(-T(dots[cc]), T(Up[i * urs + cc * ucs]), x);
                xs[i] = x;
            }
        }
        T nx = T(0);
        for (int i = 0; i < M; i++) nx = fma(T(xs[i]), T(xs[i]), nx);
        const T inv = T(1) / sqrt(nx);
        for (int i = 0; i < M; i++) {
            const T x = T(xs[i]) * inv;
            Up[i * urs + c * ucs] = x;
            rn[i] = fma(x, x, T(rn[i]));
        }
    }
}
info[z] = info_m;
