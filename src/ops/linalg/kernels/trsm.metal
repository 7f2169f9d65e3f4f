// trsm: triangular solves for a batch of n x n triangular matrices and
// n x k right-hand sides, one or two in a row (two: the Cholesky solve,
// L then L^T). Runs on every backend (no barriers: the CPU runs each group
// as a plain loop).
//
// The host reduces every case (left/right side, lower/upper, transposed) to
// solving M X = B column by column, where M is lower triangular when
// rev == 0 and upper when rev == 1 (then the substitution runs backwards),
// read as M(p, q) = A[a_off + b*sa_b + p*m_r + q*m_c] (a transpose swaps the
// strides), and B, X are read/written as B[b_off + b*sb_b + p*sb_r + c*sb_c]
// (a right-side solve is the left-side solve of the transposes, so the host
// swaps those strides too). Only M's triangle is read; with unit != 0 its
// diagonal is not read either (taken as ones).
//
// One SIMD group of 32 threads per (matrix, chunk of 32 right-hand sides):
// thread c of the chunk solves column c on its own, the column kept in
// threadgroup memory (xs[p * 32 + c]: distinct banks across the group), M's
// elements read by all threads at once (one broadcast load): row p of a
// forward substitution is x_p = (b_p - sum_{q<p} m_pq x_q) / m_pp, summed as
// two interleaved chains. With nsolve == 2 the second solve (m2_r, m2_c,
// rev2) runs on the result of the first, in place.
// Template: T (float32, float64).
// Launch constants: int64 n, k, chunks, sa_b, a_off, sb_b, sb_r, sb_c, b_off,
// sx_b, sx_r, sx_c, x_off, m1_r, m1_c, m2_r, m2_c; int32 rev1, rev2, nsolve,
// unit. Dynamic threadgroup memory: n * 32 * sizeof(T).
// Launch: grid = (batch * chunks * 32, 1, 1), threadgroup = (32, 1, 1),
// chunks = ceil(k / 32).
//! name: alloy_trsm
//! inputs: A B
//! outputs: X
//! ensure_row_contiguous: false
//! template: T=float32
//! header:
// Solves M x = x in place for the column at xs[p * 32] (stride 32).
template <class T, class MP, class XP>
inline void alloy_trsm_column(MP M, long m_r, long m_c, bool rev, bool unit, int n, XP xs) {
    for (int ii = 0; ii < n; ii++) {
        const int p = rev ? n - 1 - ii : ii;
        const long row = long(p) * m_r;
        T s0 = xs[p * 32], s1 = T(0);
        int jj = 0;
        for (; jj + 2 <= ii; jj += 2) {
            const int q0 = rev ? n - 1 - jj : jj, q1 = rev ? n - 2 - jj : jj + 1;
            s0 = fma(-T(M[row + long(q0) * m_c]), xs[q0 * 32], s0);
            s1 = fma(-T(M[row + long(q1) * m_c]), xs[q1 * 32], s1);
        }
        if (jj < ii) {
            const int q0 = rev ? n - 1 - jj : jj;
            s0 = fma(-T(M[row + long(q0) * m_c]), xs[q0 * 32], s0);
        }
        const T s = s0 + s1;
        xs[p * 32] = unit ? s : s / T(M[row + long(p) * m_c]);
    }
}
//! body:
const long gid = long(thread_position_in_grid.x);
const int c = int(gid & 31);
const long blk = gid >> 5;
const long chunk = blk % chunks, bz = blk / chunks;
const long col = chunk * 32 + c;
if (col >= k) return;
const int nn = int(n);
threadgroup T *xs = (threadgroup T *)alloy_threadgroup_memory + c;
auto Bb = B + (b_off + bz * sb_b + col * sb_c);
auto Xb = X + (x_off + bz * sx_b + col * sx_c);
auto Ab = A + (a_off + bz * sa_b);
for (int p = 0; p < nn; p++) xs[p * 32] = Bb[long(p) * sb_r];
alloy_trsm_column<T>(Ab, m1_r, m1_c, rev1 != 0, unit != 0, nn, xs);
if (nsolve == 2) alloy_trsm_column<T>(Ab, m2_r, m2_c, rev2 != 0, false, nn, xs);
for (int p = 0; p < nn; p++) Xb[long(p) * sx_r] = xs[p * 32];
