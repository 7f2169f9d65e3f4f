// cholesky_blocked: Cholesky factorizations of a batch of n x n matrices,
// one threadgroup per matrix (GPU path for n > 32; any backend runs it
// correctly, any n >= 0). Semantics as cholesky_small: A = L L^T from the
// lower triangle (upper == 0) or A = U^T U from the upper one (upper == 1),
// the factor row-major with zeros in the other triangle, info[b] = 0 or the
// 1-based index of the first pivot that is not positive (or NaN), the matrix
// then holding columns 0..info-2 of the factor and the Schur complement left
// in rows and columns >= info-1.
//
// The working matrix W (lower triangle, row-major, leading dimension ldw)
// lives in threadgroup memory when SMEM (dynamic memory of n * ldw elements,
// ldw = n | 1 so that threads reading down a column hit distinct banks), and
// otherwise in the output itself (ldw = n; the output of an upper
// factorization is transposed in place at the end), with the current panel
// copied into dynamic threadgroup memory (n x 33 elements).
// Blocked right-looking algorithm, panels of 32 columns; for each panel:
//  1. SIMD group 0 factors the 32 x 32 diagonal block in registers (thread r
//     holds row r; one simdgroup_barrier per column, as cholesky_small);
//  2. every thread takes rows below the block and solves them against the
//     block's transpose (trsm, right side: x_l = (a_l - sum_{q<l} x_q l_lq) /
//     l_ll, with LAPACK's reciprocal scaling), its row in registers, in
//     blocks of 8 columns: each block solved in registers, then its sums
//     taken from the later columns in W (the row's own storage) and those
//     read back — the whole 32-column triangle unrolled at once made ptxas
//     keep its 528 block values in flight (255 registers and 1.3 KB of
//     spills per thread; 72 registers, no spills, this way);
//  3. the trailing lower triangle is updated with the panel (syrk): 16 x 32
//     tiles of the lower triangle, one per SIMD group at a time, each thread
//     4 rows x 4 columns (columns strided by 8: conflict-free reads).
// After a failed pivot at column j of a panel, steps 2 and 3 run with the
// panel's first j columns only, and the loop stops.
// Template: T (float32, float64), SMEM (bool).
// Launch constants: int64 n, sa_b, sa_r, sa_c, a_off, l_off, i_off, ldw;
// int32 upper. A(b, p, q) = A[a_off + b*sa_b + p*sa_r + q*sa_c] (any strides),
// L(b, p, q) = L[l_off + b*n*n + p*n + q], info(b) = info[i_off + b].
// Launch: grid = (batch * TPG, 1, 1), threadgroup = (TPG, 1, 1) with TPG a
// multiple of 32 (128 or 256); dynamic threadgroup memory:
// SMEM: n * ldw * sizeof(T), else n * 33 * sizeof(T).
//! name: alloy_cholesky_blocked
//! inputs: A
//! outputs: L info
//! ensure_row_contiguous: false
//! template: T=float32
//! template: SMEM=true
//! header:
// Factors the pb x pb diagonal block at (k0, k0) of W in the registers of
// SIMD group 0 (lane r = row r), leaves it in W and in `diag` (32 x 33), the
// reciprocals of its diagonal in dinv, and returns 0 or the 1-based column of
// the block whose pivot failed (that column's pivot is left unreduced).
template <class T, class WP, class DP, class CP>
inline int alloy_chol_diag_block(WP W, long ldw, int k0, int pb, int r, DP diag, DP dinv, CP cbuf) {
    T a[32];
    #pragma unroll
    for (int j = 0; j < 32; j++) a[j] = (r < pb && j <= r) ? T(W[long(k0 + r) * ldw + k0 + j]) : T(0);
    int bad = 0;
    #pragma unroll
    for (int k = 0; k < 32; k++) {
        if (k >= pb) break;
        const int half = (k & 1) * 32;
        cbuf[half + r] = a[k];
        simdgroup_barrier(mem_flags::mem_threadgroup);
        const T d = cbuf[half + k];
        if (bad == 0 && !(d > T(0))) bad = k + 1;
        if (bad == 0) {
            const T s = sqrt(d);
            const T inv = T(1) / s;
            const T l = r == k ? s : a[k] * inv;
            if (r >= k) a[k] = l;
            if (r == k) dinv[k] = inv;
            #pragma unroll
            for (int j = k + 1; j < 32; j++) {
                if (j >= pb) break;
                if (j <= r) a[j] = fma(-l, cbuf[half + j] * inv, a[j]);
            }
        }
    }
    if (r < pb) {
        #pragma unroll
        for (int j = 0; j < 32; j++)
            if (j <= r) {
                W[long(k0 + r) * ldw + k0 + j] = a[j];
                diag[r * 33 + j] = a[j];
            }
    }
    return bad;
}

// The blocked factorization of W (see the file's comment); pan(i, l) =
// pan[i * ldp + l] is the current panel's column l at row i (rows >= k0);
// when pan_in_w it is W's own storage. Returns info.
template <class T, class WP, class PP, class DP, class CP, class IP>
inline int alloy_chol_blocked(WP W, long ldw, PP pan_base, long ldp, bool pan_in_w, int n, int tid, int nt,
                              DP diag, DP dinv, CP cbuf, IP shared_bad) {
    const int warp = tid >> 5, lane = tid & 31, nwarps = nt >> 5;
    int info = 0;
    for (int k0 = 0; k0 < n; k0 += 32) {
        const int pb = n - k0 < 32 ? n - k0 : 32;
        if (warp == 0) {
            const int bad = alloy_chol_diag_block<T>(W, ldw, k0, pb, lane, diag, dinv, cbuf);
            if (lane == 0) shared_bad[0] = bad;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
        const int bad = shared_bad[0];
        const int w = bad ? bad - 1 : pb;          // complete columns of this panel
        auto pan = pan_base + (pan_in_w ? long(k0) : 0L);
        // 2. the rows below the block: x diag^T = a (w columns)
        for (int i = k0 + pb + tid; i < n; i += nt) {
            T x[32];
            #pragma unroll
            for (int l = 0; l < 32; l++) x[l] = l < w ? T(W[long(i) * ldw + k0 + l]) : T(0);
            // in blocks of 8 columns (see the file's comment)
            #pragma unroll
            for (int l0 = 0; l0 < 32; l0 += 8) {
                #pragma unroll
                for (int l = l0; l < l0 + 8; l++) {
                    if (l >= w) break;
                    x[l] *= dinv[l];
                    #pragma unroll
                    for (int q = l + 1; q < l0 + 8; q++) {
                        if (q >= w) break;
                        x[q] = fma(-x[l], diag[q * 33 + l], x[q]);
                    }
                }
                #pragma unroll 1
                for (int q = l0 + 8; q < w; q++) {
                    T s = T(0);
                    #pragma unroll
                    for (int l = l0; l < l0 + 8; l++) s = fma(x[l], diag[q * 33 + l], s);
                    W[long(i) * ldw + k0 + q] -= s;   // x[q] -= s, q not a constant: through W
                }
                #pragma unroll
                for (int q = l0 + 8; q < 32; q++)
                    if (q < w) x[q] = T(W[long(i) * ldw + k0 + q]);
            }
            #pragma unroll
            for (int l = 0; l < 32; l++) {
                if (l >= w) break;
                W[long(i) * ldw + k0 + l] = x[l];
                if (!pan_in_w) pan[long(i) * ldp + l] = x[l];
            }
        }
        if (!pan_in_w) { // the block's own rows, for the update of its unfactored columns
            for (int e = tid; e < pb * 32; e += nt) {
                const int i = e >> 5, l = e & 31;
                if (l < w && l <= i) pan[long(k0 + i) * ldp + l] = diag[i * 33 + l];
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
        // 3. rows i >= r0, columns c0 <= c <= i: W(i, c) -= sum_{l<w} pan(i, l) pan(c, l)
        const int r0 = k0 + pb, c0 = k0 + w;
        if (w > 0 && r0 < n) {
            const int rb = (n - r0 + 15) >> 4, cb = (n - c0 + 31) >> 5;
            const int ty = lane >> 3, tx = lane & 7;
            for (int t = warp; t < rb * cb; t += nwarps) {
                const int bi = t / cb, bj = t - bi * cb;
                const int i0 = r0 + bi * 16, j0 = c0 + bj * 32;
                if (j0 > i0 + 15) continue; // above the diagonal
                T acc[4][4];
                #pragma unroll
                for (int u = 0; u < 4; u++)
                    #pragma unroll
                    for (int v = 0; v < 4; v++) acc[u][v] = T(0);
                int ri[4], cj[4];
                #pragma unroll
                for (int u = 0; u < 4; u++) {
                    const int i = i0 + 4 * ty + u, c = j0 + tx + 8 * u;
                    ri[u] = i < n ? i : n - 1;
                    cj[u] = c < n ? c : n - 1;
                }
                for (int l = 0; l < w; l++) {
                    T ai[4], bj4[4];
                    #pragma unroll
                    for (int u = 0; u < 4; u++) {
                        ai[u] = pan[long(ri[u]) * ldp + l];
                        bj4[u] = pan[long(cj[u]) * ldp + l];
                    }
                    #pragma unroll
                    for (int u = 0; u < 4; u++)
                        #pragma unroll
                        for (int v = 0; v < 4; v++) acc[u][v] = fma(ai[u], bj4[v], acc[u][v]);
                }
                #pragma unroll
                for (int u = 0; u < 4; u++) {
                    const int i = i0 + 4 * ty + u;
                    if (i >= n) continue;
                    #pragma unroll
                    for (int v = 0; v < 4; v++) {
                        const int c = j0 + tx + 8 * v;
                        if (c < n && c <= i) W[long(i) * ldw + c] -= acc[u][v];
                    }
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
        if (bad) {
            info = k0 + bad;
            break;
        }
    }
    return info;
}
//! body:
threadgroup T diag[32 * 33];
threadgroup T dinv[32];
threadgroup T cbuf[64];
threadgroup int shared_bad[1];
const int tid = int(thread_index_in_threadgroup);
const int nt = int(threads_per_threadgroup.x);
const long bz = long(threadgroup_position_in_grid.x);
const int nn = int(n);
const long per = long(nn) * nn;
auto Ab = A + (a_off + bz * sa_b);
auto Lb = L + (l_off + bz * per);
threadgroup T *dyn = (threadgroup T *)alloy_threadgroup_memory;

// Load the referenced triangle (memory order: coalesced reads) into W.
for (long e = tid; e < per; e += nt) {
    const int p = int(e / nn), q = int(e - long(p) * nn);
    const bool ref = upper ? q >= p : q <= p;
    if (!ref) continue;
    const T v = Ab[long(p) * sa_r + long(q) * sa_c];
    const int i = upper ? q : p, j = upper ? p : q;
    if (SMEM) dyn[long(i) * ldw + j] = v;
    else Lb[long(i) * nn + j] = v;
}
threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);

int info_m;
if (SMEM) info_m = alloy_chol_blocked<T>(dyn, ldw, dyn, ldw, true, nn, tid, nt, &diag[0], &dinv[0], &cbuf[0], &shared_bad[0]);
else info_m = alloy_chol_blocked<T>(Lb, long(nn), dyn, 33L, false, nn, tid, nt, &diag[0], &dinv[0], &cbuf[0], &shared_bad[0]);
if (tid == 0) info[i_off + bz] = info_m;

// Store: the factor in the requested orientation, zeros in the other triangle.
if (SMEM) {
    for (long e = tid; e < per; e += nt) {
        const int p = int(e / nn), q = int(e - long(p) * nn);
        T v = T(0);
        if (upper) {
            if (q >= p) v = dyn[long(q) * ldw + p];
        } else {
            if (q <= p) v = dyn[long(p) * ldw + q];
        }
        Lb[e] = v;
    }
} else {
    // W is the output (lower, row-major): zero the strict upper triangle,
    // or move the factor there (transposed) and zero the lower one.
    for (long e = tid; e < per; e += nt) {
        const int p = int(e / nn), q = int(e - long(p) * nn);
        if (q <= p) continue;
        if (upper) {
            Lb[e] = Lb[long(q) * nn + p];
            Lb[long(q) * nn + p] = T(0);
        } else {
            Lb[e] = T(0);
        }
    }
}
