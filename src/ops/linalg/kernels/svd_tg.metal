// svd_tg: singular value decomposition (NumPy's svd) of a batch of m x n
// matrices by one-sided (Hestenes) Jacobi, one threadgroup per matrix (the
// GPU path; any backend runs it correctly, max(m, n) <= 256).
//   A    (batch, m, n) any strides
//   s    (batch, k), k = min(m, n): singular values, descending
//   u    (batch, m, ucols): left singular vectors (only when `uv`)
//   vh   (batch, vrows, n): right singular vectors as rows (only when `uv`)
//   info (batch) int32: 0 converged, 1 a NaN or Inf was read (s, u, vh
//        NaN), 2 not converged after max_sweeps sweeps (the last sweep's
//        decomposition is returned)
//   work (batch, M*N + N*N): G and V when they do not live in threadgroup
//        memory (SMEM false); else a dummy
// G is the tall one of A and A^T: M = max(m, n) rows, N = k columns (G = A
// when m >= n, else G = A^T). Jacobi makes G's columns orthogonal: G V = U'
// diag(sigma), sigma_j = ||g_j||, u'_j = g_j / sigma_j. Then A = U' S V^T
// (tall) or A = V S U'^T (wide): U' goes to u (tall) or vh (wide) and V to
// vh (tall) or u (wide). U' is completed to an orthonormal basis where a
// column is missing (full_matrices with M > N, or sigma_j too small to
// normalise g_j: below 2^-(exponent range) relative to max |a|): each new
// column starts from the unit vector e_i of the row i least covered by the
// columns so far (smallest sum of squares along the row, so ||(I - U U^T)
// e_i||^2 >= (M - cols) / M) and is orthogonalised against all of them
// twice (classical Gram-Schmidt with reorthogonalisation), then normalised.
// Template: T (float32, float64), SMEM (true: G column-major and V in
// dynamic threadgroup memory, (M*N + N*N) * sizeof(T) bytes), REG (the
// sweeps in registers, see alloy_svd_warp_sweeps: M, N <= 32 and NT = 32),
// EIGH (alloy_eigh's register path, see alloy_eigh_reg_run: SMEM, REG,
// m == n <= 32, NT = 32, 3 n^2 elements of dynamic threadgroup memory;
// `upper` names the triangle read; with COLS = 32 and CH = H instead
// alloy_eigh_cols_run: NT = 32 H, alloy_eigh_cols_elems(n, H, sizeof(T))
// elements of dynamic threadgroup memory, MINB the launch bound's
// threadgroups per SM, NOV (only with CH = 1) V not accumulated in the
// sweeps but taken from G's columns), COLS and CH (COLS > 0, with SMEM: the sweeps of
// alloy_svd_cols_sweeps with NP = COLS, H = CH: NT = NP H, max(m, n) <= 64 H,
// N <= NP, NP in 32, 64, 128 (H = 2 for 128); dynamic threadgroup memory
// 2 NP H (64 + 16 / sizeof(T)) + 4 NP + 8 elements).
// Launch constant int32 upper (read with EIGH only).
// Launch constants: int32 m, n, uv, ucols, vrows, max_sweeps; int64 batch,
// sa_b, sa_r, sa_c, a_off, z_off. A(b, p, q) = A[a_off + b*sa_b + p*sa_r +
// q*sa_c]; matrix b of the launch is matrix z = z_off + b of the outputs.
// Launch: grid = (batch * NT, 1, 1), threadgroup = (NT, 1, 1), NT a
// multiple of 32.
//
// G is scaled by a power of two so that max |a| is in [0.5, 1) (exact). A
// sweep is N' - 1 steps of the round-robin tournament over N' = N rounded
// up to even (as eigh_tg); in each step the N'/2 disjoint pairs are shared
// out over the SIMD groups, and one SIMD group does a whole pair: its lanes
// run down the rows for alpha = ||g_p||^2, beta = ||g_q||^2 and gamma =
// g_p . g_q (simd_sum), and if |gamma| > tol sqrt(alpha) sqrt(beta) (tol =
// sqrt(M) eps, LAPACK's gesvj) it rotates g_p, g_q and v_p, v_q at once
// (zeta = (beta - alpha) / 2 gamma, t = sign(zeta) / (|zeta| + sqrt(1 +
// zeta^2)), c = 1 / sqrt(1 + t^2), s = c t); one barrier per step. The
// norms are recomputed at every pair from the columns (not updated), so
// tiny singular values keep their relative accuracy. The iteration ends
// after a sweep whose largest |gamma| / (sqrt(alpha) sqrt(beta)) was at
// most M eps: below that the computed gamma is rounding noise of the dot
// product (its error grows like M eps in the worst case), and waiting for
// a sweep with no rotation at all (every noise value under the sharper
// sqrt(M) eps) can take longer than max_sweeps for large M in float64.
//! name: alloy_svd_tg
//! inputs: A
//! outputs: s u vh info work
//! ensure_row_contiguous: false
//! template: T=float32
//! template: SMEM=true
//! template: REG=false
//! template: EIGH=false
//! template: COLS=0
//! template: CH=1
//! template: MINB=1
//! header:
// eigh's COLS variants cap the registers at what MINB threadgroups per SM
// need (MINB, given only by those launches: see alloy_eigh_cols_run)
#ifdef ALLOY_TEMPLATE_MINB
#undef ALLOY_CUDA_LAUNCH_BOUNDS
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(32 * ALLOY_TEMPLATE_CH, ALLOY_TEMPLATE_MINB)
#endif
// the rows of G a thread holds in the COLS path
#define ALLOY_SVD_COLS_MR 64
// COLS and CH through their macros: launches that do not give them (eigh's) get 0 and 1
#ifdef ALLOY_TEMPLATE_COLS
#define ALLOY_SVD_COLS_NP int(ALLOY_TEMPLATE_COLS)
#else
#define ALLOY_SVD_COLS_NP 0
#endif
// NOV (eigh's COLS without V in the sweeps, alloy_eigh_cols_run): only eigh's COLS launches give it
#ifdef ALLOY_TEMPLATE_NOV
#define ALLOY_SVD_COLS_NOV bool(ALLOY_TEMPLATE_NOV)
#else
#define ALLOY_SVD_COLS_NOV false
#endif
#ifdef ALLOY_TEMPLATE_CH
#define ALLOY_SVD_COLS_H int(ALLOY_TEMPLATE_CH)
#else
#define ALLOY_SVD_COLS_H 1
#endif
inline void alloy_svd_pair(int r, int i, int N, thread int &p, thread int &q) {
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

template <class T, class R>
inline T alloy_svd_group_sum(T x, R &red, int tid, int nt) {
    x = simd_sum(x);
    if ((tid & 31) == 0) red[tid >> 5] = x;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    T s = T(0);
    for (int k = 0; k < (nt + 31) / 32; k++) s += red[k];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return s;
}
template <class T, class R>
inline T alloy_svd_group_max(T x, R &red, int tid, int nt) {
    x = simd_max(x);
    if ((tid & 31) == 0) red[tid >> 5] = x;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    T s = T(0);
    for (int k = 0; k < (nt + 31) / 32; k++) s = max(s, T(red[k]));
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return s;
}

// Exchanges with lane `src` of the SIMD group (every lane calls it).
template <class X> inline X alloy_svd_shfl(X v, int src) {
#if defined(ALLOY_BACKEND_CUDA)
    return __shfl_sync(0xffffffffu, v, src);
#else
    return simd_shuffle(v, ushort(src));
#endif
}

// The sweeps of a matrix with M, N <= 32 in the registers of one SIMD group
// (REG): lane j holds column j of G and of V. At each step of the same
// round-robin tournament the lane receives its partner's column with one
// shuffle per row, both lanes of a pair compute alpha, beta and gamma in the
// same order (bit-identical), so they agree on the rotation, and each
// rewrites only its own column; V's columns are exchanged the same way.
// No barrier and no threadgroup memory traffic during the sweeps. Returns
// info (0 converged, 2 not).
template <class T, class P>
int alloy_svd_warp_sweeps(P G, P V, int M, int N, bool uv, int max_sweeps, T tol, T tol_stop, T tiny,
                          int lane, thread int &used) {
    T g[32], v[32];
#pragma unroll
    for (int i = 0; i < 32; i++) {
        g[i] = (lane < N && i < M) ? T(G[long(lane) * M + i]) : T(0);
        v[i] = (uv && lane < N && i < N) ? T(V[long(lane) * N + i]) : T(0);
    }
    const int Np = N + (N & 1);
    int info = 2;
    used = 0;
    for (int sweep = 0; sweep < max_sweeps; sweep++) {
        used = sweep + 1;
        T worst = T(0);
        for (int r = 0; r < Np - 1; r++) {
            // partner of index `lane` at step r: (Np-1, r) and pairs summing to 2r mod (Np-1)
            int pj;
            if (lane >= Np) pj = lane;
            else if (lane == Np - 1) pj = r;
            else if (lane == r) pj = Np - 1;
            else pj = (2 * r - lane + 2 * (Np - 1)) % (Np - 1);
            const bool live = lane < N && pj < N && pj != lane;
            const int src = pj < 32 ? pj : lane;
            const bool isp = lane < pj; // this lane holds g_p (the smaller index)
            // four interleaved partial sums: short dependency chains, and
            // the same order in both lanes of a pair (bit-identical results)
            T o[32], sa[4] = {T(0), T(0), T(0), T(0)}, sg[4] = {T(0), T(0), T(0), T(0)};
#pragma unroll
            for (int i = 0; i < 32; i++) {
                o[i] = alloy_svd_shfl(g[i], src);
                sa[i & 3] = fma(g[i], g[i], sa[i & 3]);
            }
            const T own = (sa[0] + sa[1]) + (sa[2] + sa[3]);
            const T oth = alloy_svd_shfl(own, src);
            // gamma = sum g_p[i] g_q[i] (the product commutes: the same bits in both lanes)
#pragma unroll
            for (int i = 0; i < 32; i++) sg[i & 3] = fma(g[i], o[i], sg[i & 3]);
            const T ga = (sg[0] + sg[1]) + (sg[2] + sg[3]);
            const T al = isp ? own : oth, be = isp ? oth : own;
            const T na = sqrt(al), nb = sqrt(be);
            bool rot = false;
            T c = T(1), sn = T(0);
            if (live && na > tiny && nb > tiny) {
                const T rel = fabs(ga) / (na * nb);
                if (!(rel <= worst)) worst = rel;
                if (fabs(ga) > tol * na * nb) {
                    rot = true;
                    const T zeta = (be - al) / (T(2) * ga);
                    const T az = fabs(zeta);
                    const T root = az > T(1) ? az * sqrt(T(1) + (T(1) / az) * (T(1) / az)) : sqrt(T(1) + az * az);
                    const T tn = (zeta >= T(0) ? T(1) : T(-1)) / (az + root);
                    c = T(1) / sqrt(T(1) + tn * tn);
                    sn = c * tn;
                }
            }
            // p' = c p - s q, q' = s p + c q
            if (rot) {
#pragma unroll
                for (int i = 0; i < 32; i++) g[i] = isp ? c * g[i] - sn * o[i] : sn * o[i] + c * g[i];
            }
            if (uv) {
#pragma unroll
                for (int i = 0; i < 32; i++) o[i] = alloy_svd_shfl(v[i], src);
                if (rot) {
#pragma unroll
                    for (int i = 0; i < 32; i++) v[i] = isp ? c * v[i] - sn * o[i] : sn * o[i] + c * v[i];
                }
            }
        }
        worst = simd_max(worst);
        if (worst <= tol_stop) {
            info = 0;
            break;
        }
    }
    if (lane < N) {
#pragma unroll
        for (int i = 0; i < 32; i++) {
            if (i < M) G[long(lane) * M + i] = g[i];
            if (uv && i < N) V[long(lane) * N + i] = v[i];
        }
    }
    return info;
}

// COLS path, V: thread (i, h) holds row i of V, pairs h Q .. h Q + Q - 1 of
// the round-robin step (Q = NP / 2H), as a[k] and b[k]: the columns in the
// pair's two ring slots. Ring order: slot rho < NP - 1 holds column (rho +
// r) mod (NP - 1) at step r and slot NP - 1 column NP - 1; pair P of every
// step is the slot pair (P, NP - 1 - P) (P = 0: (0, NP - 1)), so a[k] is
// slot P = h Q + k and b[k] slot NP - 1 - P, and the indices are
// compile-time constants. cs[P] = (c, s'): a' = c a - s' b, b' = s' a + c b
// (s' = s when slot a holds the lower column index, else -s). After the
// step the ring turns by one (slot rho takes slot rho + 1): a[k] <- a[k+1],
// the last a <- the next half's first a (own b[Q-1] in the last half);
// b[k] <- b[k-1], b[0] <- the previous half's last b (pair 0's b is the
// fixed slot), b[1] of pair 1 <- pair 0's a (the wrap). With H = 2 the two
// halves of a row are neighbouring lanes and swap one value a step.
template <class T, int Q, int H, class CB>
inline void alloy_svd_cols_vstep(thread T (&a)[Q], thread T (&b)[Q], CB cs, int h, int lane) {
#pragma unroll
    for (int k = 0; k < Q; k++) {
        const vec<T, 2> w = cs[h * Q + k];
        const T x = a[k], y = b[k];
        a[k] = w.x * x - w.y * y;
        b[k] = w.y * x + w.x * y;
    }
    const T a0 = a[0], b0 = b[0], bl = b[Q - 1];
    T recv = bl;
    if (H > 1) recv = alloy_svd_shfl(h == 0 ? bl : a0, lane ^ 1);
#pragma unroll
    for (int k = 0; k < Q - 1; k++) a[k] = a[k + 1];
    a[Q - 1] = h == H - 1 ? bl : recv;
#pragma unroll
    for (int k = Q - 1; k > 1; k--) b[k] = b[k - 1];
    b[1] = h == 0 ? a0 : b0;
    b[0] = h == 0 ? b0 : recv;
}

// The sweeps of an M x N matrix with M <= H MR, N <= NP (NP H threads,
// COLS): thread (j, h) = (t / H, t % H) holds rows h MR .. h MR + MR - 1 of
// column j of G (MR registers; rows past M and columns past N zero: zero
// columns are never rotated) and its part of row j of V (alloy_svd_cols_vstep).
// At each step of the round-robin tournament (NP - 1 steps a sweep, as
// alloy_svd_pair) a thread stores its part of its column in threadgroup
// memory (two buffers by step parity, so one barrier a step suffices), with
// the squared norm (the halves' sums added by the two lanes in either order:
// the same bits), reads its partner's part after the barrier, forms gamma =
// g_p . g_q with the same products, order and halves' sum as the partner's
// threads (the same bits, so all agree on the rotation), takes alpha and
// beta as the owners computed them, and rewrites only its own part; one
// thread of each pair stores (c, s') for V, whose rows apply the step's
// rotations after the next barrier. No reduction beyond the two halves and
// one barrier per step; only G goes through threadgroup memory. Where the
// whole matrix is one SIMD group (NP H == 32: NP = 32, H = 1) the partner's
// column and norm come by one shuffle per row instead (half the traffic of a
// store and a load, no exchange buffers) and the step's barrier is the SIMD
// group's. A pair counts against convergence when |gamma| > tol_stop
// ||g_p|| ||g_q|| (the relative gamma's test without its division). G (ld
// M) and V (ld N) are read at the start and written back at the end; xb,
// the exchange buffers (2 NP H parts of MR + W elements, W = 16 /
// sizeof(T); unused when NP H == 32), may alias them. Returns info (0
// converged, 2 not); `used` the sweeps run.
// NOV (one SIMD group, lane j holds column j < N of G in g): the columns
// normalised, then one pass of modified Gram-Schmidt in column order
// (column k broadcast by shuffles, the later columns lose their component
// along it), then normalised again. For the nearly orthonormal columns of
// converged sweeps (|cos| <= tol_stop) the broadcast column is used as it
// is: its norm is 1 to O(tol_stop^2), far below the rounding; `exact`
// (unconverged sweeps, columns far from orthogonal) renormalises each
// column before it is broadcast (the classic MGS). o is scratch.
template <class T, int MR> inline void alloy_svd_cols_normalise(thread T (&g)[MR], int N, int lane) {
    T sa[4] = {T(0), T(0), T(0), T(0)};
#pragma unroll
    for (int i = 0; i < MR; i++) sa[i & 3] = fma(g[i], g[i], sa[i & 3]);
    const T inv = lane < N ? T(1) / sqrt((sa[0] + sa[1]) + (sa[2] + sa[3])) : T(0);
#pragma unroll
    for (int i = 0; i < MR; i++) g[i] *= inv;
}

template <class T, int MR>
inline void alloy_svd_cols_orth(thread T (&g)[MR], thread T (&o)[MR], int N, int lane, bool exact) {
    alloy_svd_cols_normalise<T, MR>(g, N, lane);
    for (int k = 0; k < N; k++) {
        if (exact && lane == k) alloy_svd_cols_normalise<T, MR>(g, N, lane);
        T sd[4] = {T(0), T(0), T(0), T(0)};
#pragma unroll
        for (int i = 0; i < MR; i++) {
            o[i] = alloy_svd_shfl(g[i], k);
            sd[i & 3] = fma(g[i], o[i], sd[i & 3]);
        }
        const T d = lane > k ? (sd[0] + sd[1]) + (sd[2] + sd[3]) : T(0);
#pragma unroll
        for (int i = 0; i < MR; i++) g[i] = fma(-d, o[i], g[i]);
    }
    alloy_svd_cols_normalise<T, MR>(g, N, lane);
}

template <int NT> inline void alloy_svd_cols_barrier() {
    if (NT == 32) simdgroup_barrier(mem_flags::mem_threadgroup);
    else threadgroup_barrier(mem_flags::mem_threadgroup);
}

template <class T, int MR, int NP, int H, bool NOV = false, class P, class XB, class TB, class CB>
int alloy_svd_cols_sweeps(P G, P V, int M, int N, bool uv, int max_sweeps, T tol, T tol_stop, T tiny, int tid, XB xb,
                          TB nrm, CB csb, TB wred, thread int &used) {
    constexpr int K = NP - 1, NH = NP / 2, Q = NH / H, W = 16 / sizeof(T), CW = MR / W, S = CW + 1;
    constexpr bool WARP = NP * H == 32;
    const int j = tid / H, h = tid - j * H, lane = tid & 31, r0 = h * MR;
    static_assert(!NOV || NP * H == 32, "NOV: one SIMD group");
    T g[MR], o[MR], a[Q], b[Q];
#pragma unroll
    for (int i = 0; i < MR; i++) g[i] = (j < N && r0 + i < M) ? T(G[long(j) * M + r0 + i]) : T(0);
    if constexpr (!NOV) {
#pragma unroll
        for (int k = 0; k < Q; k++) {
            const int ca = h * Q + k, cb = ca == 0 ? K : K - ca; // the columns of the slots at step 0
            a[k] = (uv && j < N && ca < N) ? T(V[long(ca) * N + j]) : ca == j ? T(1) : T(0);
            b[k] = (uv && j < N && cb < N) ? T(V[long(cb) * N + j]) : cb == j ? T(1) : T(0);
        }
    }
    alloy_svd_cols_barrier<NP * H>();
    const int MW = (min(max(M - r0, 0), MR) + W - 1) / W; // vectors of this part that hold rows < M
    int info = 2;
    used = 0;
    for (int sweep = 0; sweep < max_sweeps; sweep++) {
        used = sweep + 1;
        T worst = T(0); // 1 once a pair of the sweep is above tol_stop (or NaN)
        for (int r = 0; r < K; r++) {
            const int par = r & 1;
            // the partner, this column's pair and ring slot (a: the lower slot)
            int pj, pair;
            bool slot_a;
            if (j == K) {
                pj = r;
                pair = 0;
                slot_a = false;
            } else {
                const int rho = (j - r + K) % K;
                pj = rho == 0 ? K : (2 * r - j + 2 * K) % K;
                slot_a = rho < NH;
                pair = slot_a ? rho : K - rho;
            }
            const bool isp = j < pj; // this thread holds g_p (the lower index)
            // ||g_j||^2 in four interleaved partial sums (+ the other half), published with the column
            T sa[4] = {T(0), T(0), T(0), T(0)};
#pragma unroll
            for (int i = 0; i < MR; i++) sa[i & 3] = fma(g[i], g[i], sa[i & 3]);
            T own = (sa[0] + sa[1]) + (sa[2] + sa[3]);
            if (H > 1) own = own + alloy_svd_shfl(own, lane ^ 1);
            T oth;
            if constexpr (WARP) {
#pragma unroll
                for (int i = 0; i < MR; i++) o[i] = alloy_svd_shfl(g[i], pj);
                oth = alloy_svd_shfl(own, pj);
                if constexpr (!NOV) {
                    alloy_svd_cols_barrier<NP * H>(); // the previous step's (c, s') are in csb
                    if (uv && r > 0) alloy_svd_cols_vstep<T, Q, H>(a, b, csb + (par ^ 1) * NH, h, lane);
                }
            } else {
                auto mine = xb + ((par * NP + j) * H + h) * S;
#pragma unroll
                for (int c = 0; c < CW; c++)
                    if (c < MW) {
                        vec<T, W> x;
#pragma unroll
                        for (int w = 0; w < W; w++) x[w] = g[c * W + w];
                        mine[c] = x;
                    }
                if (h == 0) nrm[par * NP + j] = own;
                alloy_svd_cols_barrier<NP * H>();
                if (uv && r > 0) alloy_svd_cols_vstep<T, Q, H>(a, b, csb + (par ^ 1) * NH, h, lane);
                auto theirs = xb + ((par * NP + pj) * H + h) * S;
#pragma unroll
                for (int c = 0; c < CW; c++) {
                    vec<T, W> x = c < MW ? vec<T, W>(theirs[c]) : vec<T, W>(T(0));
#pragma unroll
                    for (int w = 0; w < W; w++) o[c * W + w] = x[w];
                }
                oth = nrm[par * NP + pj];
            }
            // gamma: the same products and order in every thread of the pair (the same bits)
            T sg[4] = {T(0), T(0), T(0), T(0)};
#pragma unroll
            for (int i = 0; i < MR; i++) sg[i & 3] = fma(g[i], o[i], sg[i & 3]);
            T ga = (sg[0] + sg[1]) + (sg[2] + sg[3]);
            if (H > 1) ga = ga + alloy_svd_shfl(ga, lane ^ 1);
            const T al = isp ? own : oth, be = isp ? oth : own;
            const T na = sqrt(al), nb = sqrt(be);
            T c = T(1), sn = T(0);
            if (na > tiny && nb > tiny) {
                const T nn = na * nb;
                if (!(fabs(ga) <= tol_stop * nn)) worst = T(1);
                if (fabs(ga) > tol * nn) {
                    const T zeta = (be - al) / (T(2) * ga);
                    const T az = fabs(zeta);
                    const T root = az > T(1) ? az * sqrt(T(1) + (T(1) / az) * (T(1) / az)) : sqrt(T(1) + az * az);
                    const T tn = (zeta >= T(0) ? T(1) : T(-1)) / (az + root);
                    c = T(1) / sqrt(T(1) + tn * tn);
                    sn = c * tn;
                    // p' = c p - s q, q' = s p + c q: own' = c own + s2 partner
                    const T s2 = isp ? -sn : sn;
#pragma unroll
                    for (int i = 0; i < MR; i++) g[i] = c * g[i] + s2 * o[i];
                }
            }
            if (!NOV && isp && h == 0) csb[par * NH + pair] = vec<T, 2>(c, slot_a ? sn : -sn);
        }
        // the sweep's verdict over the group; the last step's V
        // (one SIMD group: simd_max is the verdict, and no slot in wred is
        // rewritten by lane 0 while another lane still reads it)
        worst = simd_max(worst);
        if (!WARP && lane == 0) wred[tid >> 5] = worst;
        alloy_svd_cols_barrier<NP * H>();
        if constexpr (!NOV)
            if (uv) alloy_svd_cols_vstep<T, Q, H>(a, b, csb + ((K - 1) & 1) * NH, h, lane);
        T all = worst;
        if constexpr (!WARP)
            for (int k = 0; k < NP * H / 32; k++) all = max(all, T(wred[k]));
        if (all == T(0)) {
            info = 0;
            break;
        }
    }
    if constexpr (NOV) {
        // V: G's columns normalised, and orthonormalised where `uv` asks
        // (alloy_svd_cols_orth; twice, each pass renormalising, where the
        // sweeps did not converge)
        if (uv || info != 0) alloy_svd_cols_orth<T, MR>(g, o, N, lane, info != 0);
        else alloy_svd_cols_normalise<T, MR>(g, N, lane);
        if (info != 0) alloy_svd_cols_orth<T, MR>(g, o, N, lane, true);
        if (j < N) {
#pragma unroll
            for (int i = 0; i < MR; i++)
                if (i < N) V[long(j) * N + i] = g[i];
        }
        return info;
    }
    // after whole sweeps the ring is back in column order
    if (j < N) {
#pragma unroll
        for (int i = 0; i < MR; i++)
            if (r0 + i < M) G[long(j) * M + r0 + i] = g[i];
        if (uv) {
#pragma unroll
            for (int k = 0; k < Q; k++) {
                const int ca = h * Q + k, cb = ca == 0 ? K : K - ca;
                if (ca < N) V[long(ca) * N + j] = a[k];
                if (cb < N) V[long(cb) * N + j] = b[k];
            }
        }
    }
    return info;
}

// EIGH (n <= 32, one SIMD group): NumPy's eigh of the symmetric n x n
// matrix whose lower (upper == 0) or upper triangle A holds, through the
// singular value decomposition of B = A' + sigma I, A' = A 2^-e (max |a'|
// in [0.5, 1)) and sigma the smallest shift Gershgorin's discs prove
// enough (max_i sum_{j != i} |a'_ij| - a'_ii, at least 0, with a margin of
// 2 n eps for its rounding), so that B is positive semidefinite and its
// singular values and vectors are its eigenvalues and eigenvectors (a
// small shift keeps ||B|| near ||A'||, and the rounding of the rotations
// with it): the register sweeps turn B's columns into G = B V = V D,
// then, once converged, G is recomputed as B V from a kept copy of A' and
// the sweeps go on (usually one more): that drops the rounding the
// rotations left between G and B V, which otherwise grows with the number
// of rotations and reaches the residual. The eigenvalues are the Rayleigh
// quotients lambda_j = v_j^T A' v_j 2^e (no cancellation against sigma),
// ascending (ties by index), with V's columns in that order. V is computed
// with or without `vectors`, so the values are the same either way. G, V
// and the copy A' are n x n column-major in threadgroup memory.
template <class T, class P, class AP, class WO, class VO, class S, class I>
int alloy_eigh_reg_run(P G, P V, P Ac, AP Ab, long sa_r, long sa_c, bool upper, int n, bool vectors, int max_sweeps,
                       WO wout, VO vout, int lane, S &lam, I &perm) {
    const long nsq = long(n) * n;
    T amax = T(0), bad = T(0);
    for (long e = lane; e < nsq; e += 32) {
        const int p = int(e / n), q = int(e - long(p) * n);
        if (upper ? q < p : q > p) continue;
        const T x = Ab[long(p) * sa_r + long(q) * sa_c];
        if (!isfinite(x)) bad = T(1);
        else amax = max(amax, T(fabs(x)));
        G[long(p) * n + q] = x;
        G[long(q) * n + p] = x;
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);
    amax = simd_max(amax);
    bad = simd_max(bad);
    if (bad != T(0)) {
        for (int i = lane; i < n; i += 32) wout[i] = T(NAN);
        if (vectors)
            for (long e = lane; e < nsq; e += 32) vout[e] = T(NAN);
        return 1;
    }
    int ex = 0;
    if (amax > T(0)) frexp(amax, ex);
    for (long e = lane; e < nsq; e += 32) {
        const T x = ldexp(T(G[e]), -ex);
        G[e] = x;
        Ac[e] = x;
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);
    // Gershgorin: every eigenvalue >= min_i (a_ii - sum_{j != i} |a_ij|)
    T low = T(0);
    for (int i = lane; i < n; i += 32) {
        T r = T(0);
        for (int j = 0; j < n; j++)
            if (j != i) r += fabs(T(G[long(j) * n + i]));
        low = max(low, r - T(G[long(i) * n + i]));
    }
    const T sigma = simd_max(low) * (T(1) + T(2 * n) * numeric_limits<T>::epsilon());
    for (int j = lane; j < n; j += 32) G[long(j) * n + j] = T(G[long(j) * n + j]) + sigma;
    for (long e = lane; e < nsq; e += 32) {
        const int j = int(e / n), i = int(e - long(j) * n);
        V[e] = i == j ? T(1) : T(0);
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);
    const T eps = numeric_limits<T>::epsilon();
    // A sharper stop than the SVD's: the residual ||A V - V Lambda|| grows
    // with the columns' last relative couplings (about tol_stop ||B||),
    // and for n <= 32 the dot products' noise stays well under 2 sqrt(n) eps.
    const T tol = eps * sqrt(T(n > 1 ? n : 1)), tol_stop = T(2) * tol;
    const T tiny = numeric_limits<T>::min() / (T(0.5) * eps);
    int used = 0;
    int info = alloy_svd_warp_sweeps<T>(G, V, n, n, true, max_sweeps, tol, tol_stop, tiny, lane, used);
    simdgroup_barrier(mem_flags::mem_threadgroup);
    if (info == 0 && used < max_sweeps) {
        // G = A' V + sigma V, row i by lane i (lanes read consecutive
        // elements of A' and one broadcast element of V: no bank conflicts)
        if (lane < n)
            for (int j = 0; j < n; j++) {
                T w = T(0);
                for (int k = 0; k < n; k++) w = fma(T(Ac[long(k) * n + lane]), T(V[long(j) * n + k]), w);
                G[long(j) * n + lane] = fma(sigma, T(V[long(j) * n + lane]), w);
            }
        simdgroup_barrier(mem_flags::mem_threadgroup);
        int more = 0;
        info = alloy_svd_warp_sweeps<T>(G, V, n, n, true, max_sweeps - used, tol, tol_stop, tiny, lane, more);
        simdgroup_barrier(mem_flags::mem_threadgroup);
    }
    // Rayleigh quotients v_j^T A' v_j: lane i forms (A' v_j)_i v_ij, the
    // SIMD group sums over i
    for (int j = 0; j < n; j++) {
        T q = T(0);
        if (lane < n) {
            T w = T(0);
            for (int k = 0; k < n; k++) w = fma(T(Ac[long(k) * n + lane]), T(V[long(j) * n + k]), w);
            q = T(V[long(j) * n + lane]) * w;
        }
        q = simd_sum(q);
        if (lane == 0) lam[j] = q;
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);
    for (int j = lane; j < n; j += 32) {
        const T lj = lam[j];
        int rank = 0;
        for (int i = 0; i < n; i++) {
            const T li = lam[i];
            rank += (li < lj || (li == lj && i < j)) ? 1 : 0;
        }
        perm[rank] = j;
        wout[rank] = ldexp(lj, ex);
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);
    if (vectors)
        for (long e = lane; e < nsq; e += 32) {
            const int i = int(e / n), k = int(e - long(i) * n);
            vout[e] = V[long(perm[k]) * n + i];
        }
    return info;
}

// Its dynamic threadgroup memory in elements of T for n <= 32, NP = 32 and
// H (alloy_eigh_cols_run's layout): G and V (2 n^2) or the exchange buffers
// where they are larger, rounded up to 4, then 2 NP norms, NP / 2 (c, s')
// pairs for each of two steps, 4 sweep verdicts.
inline long alloy_eigh_cols_elems(int n, int H, int es) {
    const long xn = H == 1 ? 0L : 2L * 32 * H * (32 / H + 16 / es), m2 = 2L * n * n;
    return ((m2 > xn ? m2 : xn) + 3) / 4 * 4 + 4 * 32 + 4;
}

// Row `lane` of A' = A 2^-ex (symmetric, from the triangle `upper` names)
// into ai: the matrix is read (coalesced where A is) into the free G
// storage P (column-major), then each lane takes its row, conflict-free;
// barriers before and after, so P may be overwritten next.
template <class T, int NT, class P, class AP>
inline void alloy_eigh_cols_rows(thread T (&ai)[32], P G, AP Ab, long sa_r, long sa_c, bool upper, int n, int ex,
                                 int tid) {
    const int lane = tid & 31;
    for (long e = tid; e < long(n) * n; e += NT) {
        const int p = int(e / n), q = int(e - long(p) * n); // A(p, q) -> G[q n + p]
        if (upper ? q < p : q > p) continue;
        const T x = ldexp(T(Ab[long(p) * sa_r + long(q) * sa_c]), -ex);
        G[long(q) * n + p] = x;
        G[long(p) * n + q] = x;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
#pragma unroll
    for (int k = 0; k < 32; k++) ai[k] = (k < n && lane < n) ? T(G[long(k) * n + lane]) : T(0);
    threadgroup_barrier(mem_flags::mem_threadgroup);
}

// EIGH with COLS (n <= 32, NP = 32, H threads per column: NT = 32 H): the
// method of alloy_eigh_reg_run (shift, restart, Rayleigh quotients,
// ranking, info) with the sweeps of alloy_svd_cols_sweeps (MR = 32 / H rows
// of G per thread; for H = 1 the threadgroup is one SIMD group and the
// columns travel by shuffles). One difference: the first sweeps stop, and
// G is recomputed as B V, once a sweep's largest relative gamma is at most
// sqrt(tol_stop) instead of tol_stop; the sweeps after the restart end at
// tol_stop as before (usually one: the convergence is quadratic), so the
// sweep the first phase spent confirming tol_stop is saved, and fewer
// rotations separate the restart from the end. Converging at sqrt(tol_stop)
// with no sweep left for the second phase is info 2. G and V are n x n
// column-major in dyn (alloy_eigh_cols_elems), the exchange buffers alias
// them during the sweeps, and A' is read from `a` again (scaled by the same
// power of two: the same bits) for the restart and the Rayleigh quotients,
// where lane i of each SIMD group holds row i of A' in registers and forms
// (A' v_j)_i for the columns j of its SIMD group (j = group, group + H, ...).
// NOV (H = 1): V is not accumulated in the sweeps (no rotations of V's rows,
// no (c, s') through threadgroup memory, 32 registers fewer); B = A' +
// (sigma + 1) I, so every eigenvalue d_j of B is at least 1 and the
// converged G = B V = V D has columns d_j v_j that never vanish. After the
// first phase V is G's columns normalised and orthonormalised (one pass of
// modified Gram-Schmidt: the restart G = B V is an eigen-decomposition only
// for an orthogonal V); after the second phase V is G's columns normalised
// (orthonormal to about tol_stop; measured within the bounds with margin).
// Sweeps that did not converge get two exact Gram-Schmidt passes instead,
// so V is orthonormal with info 2 too.
template <class T, int NP, int H, bool NOV, class AP, class WO, class VO, class R>
int alloy_eigh_cols_run(threadgroup T *dyn, AP Ab, long sa_r, long sa_c, bool upper, int n, bool vectors,
                        int max_sweeps, WO wout, VO vout, int tid, R &red) {
    constexpr int NT = NP * H, MR = 32 / H;
    const long nsq = long(n) * n;
    const long r0 = alloy_eigh_cols_elems(n, H, int(sizeof(T))) - 4 * NP - 4;
    threadgroup T *G = dyn, *V = dyn + nsq;
    auto xb = (threadgroup vec<T, 16 / sizeof(T)> *)dyn;
    threadgroup T *nrm = dyn + r0;
    auto csb = (threadgroup vec<T, 2> *)(dyn + r0 + 2 * NP);
    threadgroup T *wred = dyn + r0 + 4 * NP;
    // after the sweeps: the Rayleigh quotients and the ranking where the norms and (c, s') were
    threadgroup T *lam = nrm;
    auto perm = (threadgroup int *)(dyn + r0 + 2 * NP);
    const int lane = tid & 31, grp = tid >> 5;
    T amax = T(0), bad = T(0);
    for (long e = tid; e < nsq; e += NT) {
        const int p = int(e / n), q = int(e - long(p) * n);
        if (upper ? q < p : q > p) continue;
        const T x = Ab[long(p) * sa_r + long(q) * sa_c];
        if (!isfinite(x)) bad = T(1);
        else amax = max(amax, T(fabs(x)));
        G[long(p) * n + q] = x;
        G[long(q) * n + p] = x;
    }
    amax = alloy_svd_group_max<T>(amax, red, tid, NT);
    bad = alloy_svd_group_max<T>(bad, red, tid, NT);
    if (bad != T(0)) {
        for (int i = tid; i < n; i += NT) wout[i] = T(NAN);
        if (vectors)
            for (long e = tid; e < nsq; e += NT) vout[e] = T(NAN);
        return 1;
    }
    int ex = 0;
    if (amax > T(0)) frexp(amax, ex);
    for (long e = tid; e < nsq; e += NT) G[e] = ldexp(T(G[e]), -ex);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // Gershgorin: every eigenvalue >= min_i (a_ii - sum_{j != i} |a_ij|)
    T low = T(0);
    for (int i = tid; i < n; i += NT) {
        T r = T(0);
        for (int j = 0; j < n; j++)
            if (j != i) r += fabs(T(G[long(j) * n + i]));
        low = max(low, r - T(G[long(i) * n + i]));
    }
    // NOV: a margin of 1 past Gershgorin's shift, so every eigenvalue of B is >= 1 (B's columns never vanish)
    const T sigma = alloy_svd_group_max<T>(low, red, tid, NT) * (T(1) + T(2 * n) * numeric_limits<T>::epsilon()) +
                    (NOV ? T(1) : T(0));
    for (int j = tid; j < n; j += NT) G[long(j) * n + j] = T(G[long(j) * n + j]) + sigma;
    if (!NOV)
        for (long e = tid; e < nsq; e += NT) {
            const int j = int(e / n), i = int(e - long(j) * n);
            V[e] = i == j ? T(1) : T(0);
        }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const T eps = numeric_limits<T>::epsilon();
    const T tol = eps * sqrt(T(n > 1 ? n : 1)), tol_stop = T(2) * tol;
    const T tiny = numeric_limits<T>::min() / (T(0.5) * eps);
    int used = 0;
    // NOV: uv = true orthonormalises G's columns into V (the restart needs an orthogonal V)
    int info = alloy_svd_cols_sweeps<T, MR, NP, H, NOV>(G, V, n, n, true, max_sweeps, tol, sqrt(tol_stop), tiny, tid,
                                                        xb, nrm, csb, wred, used);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    T ai[32];
    if (info == 0 && used == max_sweeps) info = 2; // no sweep left to reach tol_stop
    else if (info == 0) {
        // G = A' V + sigma V: lane i of group grp forms G(i, j) for j = grp, grp + H, ...
        alloy_eigh_cols_rows<T, NT>(ai, G, Ab, sa_r, sa_c, upper, n, ex, tid);
        if (lane < n)
            for (int j = grp; j < n; j += H) {
                T w = T(0);
#pragma unroll
                for (int k = 0; k < 32; k++)
                    if (k < n) w = fma(ai[k], T(V[long(j) * n + k]), w);
                G[long(j) * n + lane] = fma(sigma, T(V[long(j) * n + lane]), w);
            }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        int more = 0;
        // NOV: uv = false only normalises G's columns into V (orthonormal to
        // about tol_stop once converged: measured enough, one Gram-Schmidt less)
        info = alloy_svd_cols_sweeps<T, MR, NP, H, NOV>(G, V, n, n, !NOV, max_sweeps - used, tol, tol_stop, tiny, tid,
                                                        xb, nrm, csb, wred, more);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    // Rayleigh quotients v_j^T A' v_j: lane i forms (A' v_j)_i v_ij, its SIMD group sums over i
    alloy_eigh_cols_rows<T, NT>(ai, G, Ab, sa_r, sa_c, upper, n, ex, tid);
    for (int j = grp; j < n; j += H) {
        T q = T(0);
        if (lane < n) {
            T w = T(0);
#pragma unroll
            for (int k = 0; k < 32; k++)
                if (k < n) w = fma(ai[k], T(V[long(j) * n + k]), w);
            q = T(V[long(j) * n + lane]) * w;
        }
        q = simd_sum(q);
        if (lane == 0) lam[j] = q;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int j = tid; j < n; j += NT) {
        const T lj = lam[j];
        int rank = 0;
        for (int i = 0; i < n; i++) {
            const T li = lam[i];
            rank += (li < lj || (li == lj && i < j)) ? 1 : 0;
        }
        perm[rank] = j;
        wout[rank] = ldexp(lj, ex);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (vectors)
        for (long e = tid; e < nsq; e += NT) {
            const int i = int(e / n), k = int(e - long(i) * n);
            vout[e] = V[long(perm[k]) * n + i];
        }
    return info;
}

// One matrix. G (M x N, column-major, ld M) and V (N x N, column-major) in
// threadgroup or device memory; U'(i, c) = Up[i * urs + c * ucs] and
// V(i, j) -> Vp[i * vrs + j * vcs] in the outputs; ucols: the columns of
// U' (M or N). XNP (0: off) and XH are NP and H of alloy_svd_cols_sweeps
// (the COLS path), whose buffers xb, nrm, csb, wred are used only then.
// Returns info.
template <class T, bool REG, int XNP, int XH, class P, class AP, class SO, class UO, class R, class S, class I, class XB,
          class CB>
int alloy_svd_tg_run(P G, P V, AP Ab, long sa_r, long sa_c, bool wide, int M, int N, bool uv, int ucols,
                     int max_sweeps, SO sout, UO Up, long urs, long ucs, UO Vp, long vrs, long vcs, int tid, int nt,
                     R &red, S &sig, S &xs, S &rn, S &dots, I &perm, XB xb, P nrm, CB csb, P wred) {
    const int lane = tid & 31, warp = tid >> 5, nw = nt >> 5;
    const long mn = long(M) * N;
    T amax = T(0), bad = T(0);
    for (long e = tid; e < mn; e += nt) {
        // e runs along A's rows (p the row of A, q its column)
        const int an = wide ? M : N;
        const int p = int(e / an), q = int(e - long(p) * an);
        const T x = Ab[long(p) * sa_r + long(q) * sa_c];
        if (!isfinite(x)) bad = T(1);
        else amax = max(amax, T(fabs(x)));
        const int i = wide ? q : p, j = wide ? p : q; // G(i, j)
        G[long(j) * M + i] = x;
    }
    amax = alloy_svd_group_max<T>(amax, red, tid, nt);
    bad = alloy_svd_group_max<T>(bad, red, tid, nt);
    if (bad != T(0)) {
        for (int j = tid; j < N; j += nt) sout[j] = T(NAN);
        if (uv) {
            for (long e = tid; e < long(M) * ucols; e += nt) {
                const int i = int(e / ucols), c = int(e - long(i) * ucols);
                Up[i * urs + c * ucs] = T(NAN);
            }
            for (long e = tid; e < long(N) * N; e += nt) {
                const int i = int(e / N), j = int(e - long(i) * N);
                Vp[i * vrs + j * vcs] = T(NAN);
            }
        }
        return 1;
    }
    int ex = 0;
    if (amax > T(0)) frexp(amax, ex);
    for (long e = tid; e < mn; e += nt) G[e] = ldexp(T(G[e]), -ex);
    if (uv)
        for (long e = tid; e < long(N) * N; e += nt) {
            const int j = int(e / N), i = int(e - long(j) * N);
            V[e] = i == j ? T(1) : T(0);
        }
    threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
    const T eps = numeric_limits<T>::epsilon();
    const T tol = eps * sqrt(T(M > 1 ? M : 1));
    const T tol_stop = eps * T(M > 1 ? M : 1);
    // columns below this norm (relative to max |a| ~ 1) are negligible
    const T tiny = numeric_limits<T>::min() / (T(0.5) * eps);
    const int Np = N + (N & 1), np = Np / 2;
    int info = 2;
    if (REG) {
        int used = 0;
        info = alloy_svd_warp_sweeps<T>(G, V, M, N, uv, max_sweeps, tol, tol_stop, tiny, lane, used);
        threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
    } else if constexpr (XNP > 0) {
        int used = 0;
        info = alloy_svd_cols_sweeps<T, ALLOY_SVD_COLS_MR, XNP, XH>(G, V, M, N, uv, max_sweeps, tol, tol_stop, tiny,
                                                                     tid, xb, nrm, csb, wred, used);
        threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
    }
    for (int sweep = 0; sweep <= max_sweeps && !REG && !XNP; sweep++) {
        if (sweep == max_sweeps) break;
        T worst = T(0); // largest |gamma| / (||g_p|| ||g_q||) of the sweep
        for (int r = 0; r < Np - 1; r++) {
            for (int t = warp; t < np; t += nw) {
                int p, q;
                alloy_svd_pair(r, t, Np, p, q);
                if (q >= N) continue;
                auto gp = G + long(p) * M;
                auto gq = G + long(q) * M;
                T al = T(0), be = T(0), ga = T(0);
                for (int i = lane; i < M; i += 32) {
                    const T x = gp[i], y = gq[i];
                    al = fma(x, x, al);
                    be = fma(y, y, be);
                    ga = fma(x, y, ga);
                }
                al = simd_sum(al);
                be = simd_sum(be);
                ga = simd_sum(ga);
                const T na = sqrt(al), nb = sqrt(be);
                if (na <= tiny || nb <= tiny) continue;
                const T rel = fabs(ga) / (na * nb);
                if (!(rel <= worst)) worst = rel; // NaN too
                if (!(fabs(ga) > tol * na * nb)) continue;
                const T zeta = (be - al) / (T(2) * ga);
                const T az = fabs(zeta);
                const T root = az > T(1) ? az * sqrt(T(1) + (T(1) / az) * (T(1) / az)) : sqrt(T(1) + az * az);
                const T tn = (zeta >= T(0) ? T(1) : T(-1)) / (az + root);
                const T c = T(1) / sqrt(T(1) + tn * tn), s = c * tn;
                for (int i = lane; i < M; i += 32) {
                    const T x = gp[i], y = gq[i];
                    gp[i] = c * x - s * y;
                    gq[i] = s * x + c * y;
                }
                if (uv) {
                    auto vp = V + long(p) * N;
                    auto vq = V + long(q) * N;
                    for (int i = lane; i < N; i += 32) {
                        const T x = vp[i], y = vq[i];
                        vp[i] = c * x - s * y;
                        vq[i] = s * x + c * y;
                    }
                }
            }
            threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
        }
        worst = alloy_svd_group_max<T>(worst, red, tid, nt);
        if (worst <= tol_stop) {
            info = 0;
            break;
        }
    }
    // the singular values, ranked (descending, ties by index)
    for (int j = warp; j < N; j += nw) {
        auto gj = G + long(j) * M;
        T ss = T(0);
        for (int i = lane; i < M; i += 32) ss = fma(T(gj[i]), T(gj[i]), ss);
        ss = simd_sum(ss);
        if (lane == 0) sig[j] = sqrt(ss);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int j = tid; j < N; j += nt) {
        const T sj = sig[j];
        int rank = 0;
        for (int i = 0; i < N; i++) {
            const T si = sig[i];
            rank += (si > sj || (si == sj && i < j)) ? 1 : 0;
        }
        perm[rank] = j;
        sout[rank] = ldexp(sj, ex);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (!uv) return info;
    // V, columns in the order of the values
    for (long e = tid; e < long(N) * N; e += nt) {
        const int i = int(e / N), c = int(e - long(i) * N);
        Vp[i * vrs + c * vcs] = V[long(perm[c]) * N + i];
    }
    // U': the normalised columns; how many there are (they come first)
    int good = 0;
    for (int c = 0; c < N; c++) good += T(sig[perm[c]]) > tiny ? 1 : 0;
    for (long e = tid; e < long(M) * N; e += nt) {
        const int i = int(e / N), c = int(e - long(i) * N);
        if (c < good) {
            const int j = perm[c];
            Up[i * urs + c * ucs] = T(G[long(j) * M + i]) / T(sig[j]);
        }
    }
    if (good == ucols) return info;
    threadgroup_barrier(mem_flags::mem_device);
    // complete the basis: row sums of squares of the columns so far
    for (int i = tid; i < M; i += nt) {
        T r = T(0);
        for (int c = 0; c < good; c++) {
            const T x = Up[i * urs + c * ucs];
            r = fma(x, x, r);
        }
        rn[i] = r;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int c = good; c < ucols; c++) {
        int best = 0;
        for (int i = 1; i < M; i++)
            if (T(rn[i]) < T(rn[best])) best = i;
        for (int i = tid; i < M; i += nt) xs[i] = i == best ? T(1) : T(0);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (int pass = 0; pass < 2; pass++) {
            for (int cc = tid; cc < c; cc += nt) {
                T d = T(0);
                for (int i = 0; i < M; i++) d = fma(T(Up[i * urs + cc * ucs]), T(xs[i]), d);
                dots[cc] = d;
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            for (int i = tid; i < M; i += nt) {
                T x = xs[i];
                for (int cc = 0; cc < c; cc++) x = fma(-T(dots[cc]), T(Up[i * urs + cc * ucs]), x);
                xs[i] = x;
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
        T nx = T(0);
        for (int i = tid; i < M; i += nt) nx = fma(T(xs[i]), T(xs[i]), nx);
        nx = alloy_svd_group_sum<T>(nx, red, tid, nt);
        const T inv = T(1) / sqrt(nx);
        for (int i = tid; i < M; i += nt) {
            const T x = T(xs[i]) * inv;
            Up[i * urs + c * ucs] = x;
            rn[i] = fma(x, x, T(rn[i]));
        }
        threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
    }
    return info;
}
//! body:
threadgroup T red[32];
threadgroup T sig[256];
threadgroup T xs[256];
threadgroup T rn[256];
threadgroup T dots[256];
threadgroup int perm[256];
const int tid = int(thread_index_in_threadgroup);
const int nt = int(threads_per_threadgroup.x);
const long bz = long(threadgroup_position_in_grid.x);
const long z = z_off + bz;
const bool wide = m < n;
const int M = wide ? n : m, N = wide ? m : n;
const long mn = long(M) * N;
auto Ab = A + (a_off + bz * sa_b);
auto sz = s + z * long(N);
// U' and V in the outputs (see the file's comment)
const int vrows_ = vrows;
const int ucn = wide ? vrows_ : ucols; // columns of U'
auto Up = wide ? vh + (uv ? z * long(vrows_) * n : 0L) : u + (uv ? z * long(m) * ucols : 0L);
auto Vo = wide ? u + (uv ? z * long(m) * m : 0L) : vh + (uv ? z * long(vrows_) * n : 0L);
const long urs = wide ? 1L : long(ucols), ucs = wide ? long(n) : 1L;
const long vrs = wide ? long(m) : 1L, vcs = wide ? 1L : long(n);
int info_m;
if (EIGH) { // s: w (batch, n), u: v (batch, n, n); m == n
    threadgroup T *dyn = (threadgroup T *)alloy_threadgroup_memory;
    if constexpr (ALLOY_SVD_COLS_NP == 32) // the COLS sweeps (alloy_eigh_cols_run)
        info_m = alloy_eigh_cols_run<T, 32, ALLOY_SVD_COLS_H, ALLOY_SVD_COLS_NOV>(
            dyn, Ab, sa_r, sa_c, upper != 0, n, uv != 0, max_sweeps, sz, u + (uv ? z * long(n) * n : 0L), tid, red);
    else
        info_m = alloy_eigh_reg_run<T>(dyn, dyn + long(n) * n, dyn + 2 * long(n) * n, Ab, sa_r, sa_c, upper != 0, n,
                                       uv != 0, max_sweeps, sz, u + (uv ? z * long(n) * n : 0L), tid, sig, perm);
} else if (SMEM) {
    threadgroup T *dyn = (threadgroup T *)alloy_threadgroup_memory;
    // COLS: the exchange buffers over G and V, then the norms, (c, s') and the sweep maxima
    constexpr int cnp = ALLOY_SVD_COLS_NP, ch = ALLOY_SVD_COLS_H;
    const long xn = 2L * cnp * ch * (ALLOY_SVD_COLS_MR + 16 / long(sizeof(T)));
    auto xb = (threadgroup vec<T, 16 / sizeof(T)> *)dyn;
    auto csb = (threadgroup vec<T, 2> *)(dyn + xn + 2 * cnp);
    info_m = alloy_svd_tg_run<T, REG, cnp, ch>(dyn, dyn + mn, Ab, sa_r, sa_c, wide, M, N, uv != 0, ucn, max_sweeps, sz,
                                               Up, urs, ucs, Vo, vrs, vcs, tid, nt, red, sig, xs, rn, dots, perm, xb,
                                               dyn + xn, csb, dyn + xn + 4 * cnp);
} else {
    auto wk = work + z * (mn + long(N) * N);
    info_m = alloy_svd_tg_run<T, REG, 0, 1>(wk, wk + mn, Ab, sa_r, sa_c, wide, M, N, uv != 0, ucn, max_sweeps, sz, Up, urs,
                                         ucs, Vo, vrs, vcs, tid, nt, red, sig, xs, rn, dots, perm, wk, wk, wk, wk);
}
if (tid == 0) info[z] = info_m;
