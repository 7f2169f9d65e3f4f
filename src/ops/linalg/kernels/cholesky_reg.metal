// cholesky_reg: Cholesky factorizations of a batch of n x n matrices,
// 32 < n <= NP (GPU path for mid-sized n; any backend runs it correctly, any
// 0 <= n <= NP). Semantics as cholesky_small: A = L L^T from the lower
// triangle (upper == 0) or A = U^T U from the upper one (upper == 1), the
// factor row-major with zeros in the other triangle, info[b] = 0 or the
// 1-based index of the first pivot that is not positive (or NaN), the matrix
// then holding columns 0..info-2 of the factor and the Schur complement left
// in rows and columns >= info-1.
//
// One threadgroup of TR x TC threads per matrix (TR = NP / R, TC = NP / C),
// the whole symmetric working matrix in registers: thread (tr, tc) holds the
// R x C elements (tr + TR u, tc + TC v), so no element moves during the
// factorization. Right-looking, one column per step and one barrier per
// step: at step k every thread reads the published row k (= column k of
// the symmetric trailing matrix) and 1 / sqrt(d_k) from threadgroup memory
// and updates its elements of columns j > k: a_ij -= (a_ik / s_k)(a_jk /
// s_k). The TC threads holding row k + 1 then publish it into the other
// half of a double buffer, and the one holding its diagonal publishes
// s_{k+1} = sqrt(d_{k+1}) and its reciprocal (or marks the pivot failed).
// Columns are scaled by 1 / s_k only when the factor is written, so the
// registers hold the unscaled right-looking values throughout. Rows <= k are
// updated too in columns > k: those are elements above the diagonal of
// finished rows, never read again, which spares a mask per row.
// Loads and stores go through threadgroup memory (the matrix, row stride
// ld = n | 1) so that device memory is read and written in order.
// Template: T (float32, float64), NP (padded size, 64 or 128), R, C (rows
// and columns per thread). Launch constants: int64 n, sa_b, sa_r, sa_c,
// a_off, l_off, i_off, ld; int32 upper. A(b, p, q) = A[a_off + b*sa_b +
// p*sa_r + q*sa_c] (any strides), L(b, p, q) = L[l_off + b*n*n + p*n + q],
// info(b) = info[i_off + b].
// Launch: grid = (batch * TR * TC, 1, 1), threadgroup = (TR * TC, 1, 1);
// dynamic threadgroup memory n * ld * sizeof(T) (at least 16 bytes).
//! name: alloy_cholesky_reg
//! inputs: A
//! outputs: L info
//! ensure_row_contiguous: false
//! template: T=float32
//! template: NP=64
//! template: R=4
//! template: C=8
//! header:
// Publishes a row of the working matrix (wrow: the C elements of register
// row u of a thread with tr == row % TR) into pub, and from the thread that
// holds its diagonal the pivot's root and reciprocal, or the failure
// (1-based) into *fail.
template <int C, int TC, class Tp, class PP, class PI>
inline void alloy_chol_publish(const thread Tp *wrow, int row, int tc, PP pub, PP sq, PP rs, PI fail) {
#pragma unroll
    for (int v = 0; v < C; v++) pub[tc + TC * v] = wrow[v];
    if (tc == row % TC) {
        const Tp d = pub[row]; // this thread's own element, just written
        if (d > Tp(0)) {
            const Tp s = sqrt(d);
            sq[row] = s;
            rs[row] = Tp(1) / s;
        } else {
            fail[0] = row + 1;
        }
    }
}
//! body:
constexpr int TR = NP / R, TC = NP / C, NT = TR * TC;
threadgroup T pub[2 * NP];  // row k of the working matrix, double-buffered
threadgroup T sq[NP];       // s_k = sqrt(d_k)
threadgroup T rs[NP];       // 1 / s_k
threadgroup int failed[2];  // per parity of the step: 1-based row whose pivot failed, or 0
const int tid = int(thread_index_in_threadgroup);
const int tc = tid % TC, tr = tid / TC;
const long bz = long(threadgroup_position_in_grid.x);
const int nn = int(n);
const long per = long(nn) * nn;
auto Ab = A + (a_off + bz * sa_b);
auto Lb = L + (l_off + bz * per);
threadgroup T *st = (threadgroup T *)alloy_threadgroup_memory;

// Load the referenced triangle (memory order) into st as the lower one.
for (long e = tid; e < per; e += NT) {
    const int p = int(e / nn), q = int(e - long(p) * nn);
    const bool ref = upper ? q >= p : q <= p;
    if (!ref) continue;
    const int i = upper ? q : p, j = upper ? p : q;
    st[long(i) * ld + j] = Ab[long(p) * sa_r + long(q) * sa_c];
}
if (tid < 2) failed[tid] = 0;
threadgroup_barrier(mem_flags::mem_threadgroup);

// The symmetric matrix into registers (zeros outside n x n).
T w[R][C];
#pragma unroll
for (int u = 0; u < R; u++) {
    const int i = tr + TR * u;
    #pragma unroll
    for (int v = 0; v < C; v++) {
        const int j = tc + TC * v;
        T x = T(0);
        if (i < nn && j < nn) x = j <= i ? T(st[long(i) * ld + j]) : T(st[long(j) * ld + i]);
        w[u][v] = x;
    }
}

if (nn > 0 && tr == 0) alloy_chol_publish<C, TC>(&w[0][0], 0, tc, &pub[0], &sq[0], &rs[0], &failed[0]);
threadgroup_barrier(mem_flags::mem_threadgroup);

int info_m = 0;
#pragma unroll
for (int uk = 0; uk < R; uk++) {        // k = uk * TR + tk: register row uk holds row k
    for (int tk = 0; tk < TR; tk++) {
        const int k = uk * TR + tk;
        if (k >= nn) break;
        const int f = failed[k & 1]; // written while row k was published, before the last barrier
        if (f != 0) {
            info_m = f;
            break;
        }
        const int half = (k & 1) * NP;
        const T inv = rs[k];
        T li[R], lj[C];
        #pragma unroll
        for (int u = 0; u < R; u++) li[u] = pub[half + tr + TR * u] * inv;
        #pragma unroll
        for (int v = 0; v < C; v++) lj[v] = pub[half + tc + TC * v] * inv;
        #pragma unroll
        for (int v = 0; v < C; v++)
            if (tc + TC * v > k) {
                #pragma unroll
                for (int u = 0; u < R; u++) w[u][v] = fma(-li[u], lj[v], w[u][v]);
            }
        // row k + 1 into the other half: register row uk, or uk + 1 past the end of a round
        const int k1 = k + 1;
        if (k1 < nn && tr == k1 % TR) {
            auto nxt = &pub[NP - half];
            auto fl = &failed[k1 & 1];
            if (tk + 1 < TR) alloy_chol_publish<C, TC>(&w[uk][0], k1, tc, nxt, &sq[0], &rs[0], fl);
            else if (uk + 1 < R) alloy_chol_publish<C, TC>(&w[uk + 1 < R ? uk + 1 : uk][0], k1, tc, nxt, &sq[0], &rs[0], fl);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (info_m != 0) break;
}
if (tid == 0) info[i_off + bz] = info_m;

// The factor into st (lower, row-major): columns j < kf = (info ? info - 1
// : n) scaled by 1 / s_j with s_j on the diagonal, the rest the Schur
// complement as it stands.
const int kf = info_m ? info_m - 1 : nn;
#pragma unroll
for (int u = 0; u < R; u++) {
    const int i = tr + TR * u;
    #pragma unroll
    for (int v = 0; v < C; v++) {
        const int j = tc + TC * v;
        if (i < nn && j <= i) {
            T x = w[u][v];
            if (j < kf) x = j == i ? T(sq[j]) : x * T(rs[j]);
            st[long(i) * ld + j] = x;
        }
    }
}
threadgroup_barrier(mem_flags::mem_threadgroup);
for (long e = tid; e < per; e += NT) {
    const int p = int(e / nn), q = int(e - long(p) * nn);
    T v = T(0);
    if (upper) {
        if (q >= p) v = st[long(q) * ld + p];
    } else {
        if (q <= p) v = st[long(p) * ld + q];
    }
    Lb[e] = v;
}
