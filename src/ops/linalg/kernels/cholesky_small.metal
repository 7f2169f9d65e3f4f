// cholesky_small: Cholesky factorizations of a batch of n x n matrices,
// n <= NB <= 32 (GPU path for small n; any backend runs it correctly).
// A = L L^T with the lower triangle of A read (upper == 0), or A = U^T U with
// the upper triangle read (upper == 1); the factor is written row-major with
// zeros in the other triangle. info[b] = 0, or the 1-based index of the
// first pivot that is not positive (or is NaN); the matrix then holds
// columns 0..info-2 of the factor and, in rows and columns >= info-1, the
// Schur complement that was left (its first diagonal element is the failed
// pivot), as documented in docs/linalg.md.
//
// Layout: threadgroups of 64 threads; NB consecutive threads own one matrix
// (64 / NB matrices per group, a matrix never straddles a SIMD group) and
// thread r of a matrix holds row r of the working matrix in registers.
// The group's matrices are loaded into threadgroup memory with contiguous
// (coalesced) reads of the referenced triangle, and written back the same way.
// Step k of the right-looking factorization: every thread publishes its
// element of column k in a per-SIMD-group buffer (double-buffered, so one
// simdgroup_barrier per step), reads the pivot d, and updates its row:
// l_rk = a_rk / sqrt(d), a_rj -= (l_rk / sqrt(d)) a_jk for j > k, reading
// the published column four elements at a time. Every thread updates all
// of j > k, also its row's part above the diagonal (j > r): those elements
// are never read as factor values nor written, and skipping the masks
// halves the instructions of the step.
// Template: T (float32, float64), NB (4, 8, 16 or 32; n <= NB).
// Launch constants: int64 n, batch, sa_b, sa_r, sa_c, a_off, l_off, i_off;
// int32 upper. A(b, p, q) = A[a_off + b*sa_b + p*sa_r + q*sa_c] (any strides),
// L(b, p, q) = L[l_off + b*n*n + p*n + q], info(b) = info[i_off + b].
// Launch: grid = (ceil(batch / (64 / NB)) * 64, 1, 1), threadgroup = (64, 1, 1).
//! name: alloy_cholesky_small
//! inputs: A
//! outputs: L info
//! ensure_row_contiguous: false
//! template: T=float32
//! template: NB=32
//! body:
constexpr int TG = 64;
constexpr int MPG = TG / NB;       // matrices per group
constexpr int LD = NB + 1;         // row stride of the staging area (conflict-free columns)
threadgroup T stage[MPG * NB * LD];
threadgroup vec<T, 4> colv[2 * TG / 4]; // element e at colv[e / 4][e % 4]; NB is a multiple of 4
const int tid = int(thread_index_in_threadgroup);
const int mat = tid / NB, r = tid % NB;
const long g0 = long(threadgroup_position_in_grid.x) * MPG;
const long left = batch - g0;
const int nmat = left < MPG ? int(left) : MPG;
const int nn = int(n);

// Load the referenced triangle of the group's matrices: element e of the
// group is (matrix m, row p, column q) in memory order (walked without
// divisions: e advances by TG); it lands at stage[m][i][j] with (i, j) its
// place in the lower-triangular factor.
const long per = long(nn) * nn;
const long total = long(nmat) * per;
const int dm = per > 0 ? int(TG / per) : 0;
const int dp = per > 0 ? int((TG % per) / nn) : 0;
const int dq = per > 0 ? int(TG % nn) : 0;
int m0 = 0, p0 = 0, q0 = 0;
if (per > 0) {
    m0 = int(tid / per);
    const long rem = tid - long(m0) * per;
    p0 = int(rem / nn);
    q0 = int(rem - long(p0) * nn);
}
{
    int m = m0, p = p0, q = q0;
    for (long e = tid; e < total; e += TG) {
        const bool ref = upper ? q >= p : q <= p;
        if (ref) {
            const T v = A[a_off + (g0 + m) * sa_b + long(p) * sa_r + long(q) * sa_c];
            if (upper) stage[(m * NB + q) * LD + p] = v;
            else stage[(m * NB + p) * LD + q] = v;
        }
        q += dq;
        if (q >= nn) { q -= nn; p++; }
        p += dp;
        if (p >= nn) { p -= nn; m++; }
        m += dm;
    }
}
threadgroup_barrier(mem_flags::mem_threadgroup);

T a[NB];
const bool live = mat < nmat && r < nn;
#pragma unroll
for (int j = 0; j < NB; j++) a[j] = (live && j <= r) ? stage[(mat * NB + r) * LD + j] : T(0);

int info_m = 0;
const int base = mat * NB;
#pragma unroll
for (int k = 0; k < NB; k++) {
    if (k >= nn) break;
    const int half = (k & 1) * TG;
    colv[(half + tid) >> 2][tid & 3] = a[k];
    simdgroup_barrier(mem_flags::mem_threadgroup);
    const T d = colv[(half + base + k) >> 2][k & 3];
    if (info_m == 0 && !(d > T(0))) info_m = k + 1;
    if (info_m == 0) {
        const T s = sqrt(d);
        const T inv = T(1) / s;
        const T l = r == k ? s : a[k] * inv;
        const T li = l * inv;
        if (r >= k) a[k] = l;
        #pragma unroll
        for (int j4 = (k + 1) & ~3; j4 < NB; j4 += 4) {
            const vec<T, 4> c = colv[(half + base + j4) >> 2];
            #pragma unroll
            for (int e = 0; e < 4; e++)
                if (j4 + e > k) a[j4 + e] = fma(-li, c[e], a[j4 + e]);
        }
    }
}

// Write back: each thread its row, then the group's matrices in memory
// order (the other triangle as zeros).
if (live) {
    #pragma unroll
    for (int j = 0; j < NB; j++)
        if (j <= r) stage[(mat * NB + r) * LD + j] = a[j];
}
if (mat < nmat && r == 0) info[i_off + g0 + mat] = info_m;
threadgroup_barrier(mem_flags::mem_threadgroup);
{
    auto Lg = L + (l_off + g0 * per);
    int m = m0, p = p0, q = q0;
    for (long e = tid; e < total; e += TG) {
        T v = T(0);
        if (upper) {
            if (q >= p) v = stage[(m * NB + q) * LD + p];
        } else {
            if (q <= p) v = stage[(m * NB + p) * LD + q];
        }
        Lg[e] = v;
        q += dq;
        if (q >= nn) { q -= nn; p++; }
        p += dp;
        if (p >= nn) { p -= nn; m++; }
        m += dm;
    }
}
