// cholesky_tiled: Cholesky factorizations of a batch of n x n matrices, one
// threadgroup per matrix with the whole lower triangle in threadgroup memory
// (GPU path for n > 128 while it fits; any backend runs it correctly, any
// n >= 0 whose storage the launch provides). Semantics as cholesky_small:
// A = L L^T from the lower triangle (upper == 0) or A = U^T U from the upper
// one (upper == 1), the factor row-major with zeros in the other triangle,
// info[b] = 0 or the 1-based index of the first pivot that is not positive
// (or NaN), the matrix then holding columns 0..info-2 of the factor and the
// Schur complement left in rows and columns >= info-1.
//
// Storage (dynamic threadgroup memory): the lower triangle by block rows of
// 32: block row I (rows 32I..32I+31) keeps columns 0..32I+31 with row stride
// 32I + 36 (a multiple of 4 that is 4 mod 32: a thread per row reads 16-byte
// pieces without bank conflicts), then Pt, the current panel's columns below
// its diagonal block, transposed (Pt[l * PL + i - r0], PL = 32 (nblk - 1)).
// Blocked right-looking, panels of 32 columns, with a lookahead of one
// diagonal block and two threadgroup barriers per panel q:
//  1. every thread takes a row below the diagonal block and solves it
//     against the block's factor (held transposed in Dt with the reciprocals
//     of its diagonal: x_l = (a_l - sum_{m<l} x_m l_lm) / l_ll, the row in
//     registers), into the storage and into Pt;
//  2. SIMD group 0 applies the panel to the next diagonal block (its row in
//     registers) and factors it, one column per step with one
//     SIMD-group barrier (as cholesky_small), into the storage, Dt and the
//     reciprocals, while the other SIMD groups apply the panel to the rest of
//     the trailing lower triangle, a 32 x 32 tile per SIMD group at a time,
//     8 x 4 elements per thread with the panel read as 16-byte broadcasts
//     from Pt (3 reads per 32 FMAs) and the tile read and written once.
// After a failed pivot at column j of a diagonal block, steps 1 and 2 run
// with the block's first j columns (step 2 on every tile, by every SIMD
// group) and the loop stops. Loads and stores go by 32 x 32 tiles, a SIMD
// group reading 32 consecutive elements at once along whichever of the
// referenced triangle's directions is contiguous in memory.
// Template: T (float32, float64), NW (SIMD groups per threadgroup, >= 2),
// MINB (the groups per SM the CUDA register budget is made for).
// Launch constants: int64 n, sa_b, sa_r, sa_c, a_off, l_off, i_off; int32
// upper. A(b, p, q) = A[a_off + b*sa_b + p*sa_r + q*sa_c] (any strides),
// L(b, p, q) = L[l_off + b*n*n + p*n + q], info(b) = info[i_off + b].
// Launch: grid = (batch * 32 NW, 1, 1), threadgroup = (32 NW, 1, 1); dynamic
// threadgroup memory (base(nblk) + 32 PL) * sizeof(T) with nblk = ceil(n / 32),
// base(I) = 512 I (I + 1) + 128 I, PL = max(32 (nblk - 1), 4).
//! name: alloy_cholesky_tiled
//! inputs: A
//! outputs: L info
//! ensure_row_contiguous: false
//! template: T=float32
//! template: NW=16
//! template: MINB=1
//! header:
#undef ALLOY_CUDA_LAUNCH_BOUNDS
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(ALLOY_TEMPLATE_NW * 32, ALLOY_TEMPLATE_MINB)

// Block row I of the storage: where it starts, its row stride, and where
// element (i, j), j < 32 (i / 32 + 1), lives.
inline int alloy_tl_base(int I) { return 512 * I * (I + 1) + 128 * I; }
inline int alloy_tl_ld(int I) { return 32 * I + 36; }
inline int alloy_tl_at(int i, int j) { return alloy_tl_base(i >> 5) + (i & 31) * alloy_tl_ld(i >> 5) + j; }

// SIMD group 0's barriers in the diagonal block's factorization: all its
// lanes take part (the grid is whole threadgroups, nothing returns early),
// so on CUDA this kernel's simdgroup_barrier is __syncwarp with a full mask
// (the prelude's first computes the active lanes, about a dozen instructions).
#if defined(ALLOY_BACKEND_CUDA)
#define simdgroup_barrier(flags) __syncwarp(0xffffffffu)
#endif

// Tile t (row-major over the lower block triangle) as block row and column.
inline void alloy_tl_tile(int t, thread int &I, thread int &J) {
    I = 0;
    while ((I + 1) * (I + 2) / 2 <= t) I++;
    J = t - I * (I + 1) / 2;
}

// SIMD group 0, lane r: applies the previous panel (Pt, rows from k0 =
// 32 q) to diagonal block q if `update`, then factors it; row r in
// registers. Leaves the block in S, its transpose in Dt (Dt[l * 32 + r] =
// L(k0 + r, k0 + l)) and the reciprocals of its diagonal in dinv; returns 0
// or the 1-based column of the block whose pivot failed (left unreduced).
template <class T, class SP, class CP>
inline int alloy_tl_diag(SP S, SP Pt, int PL, int q, int n, bool update, int r, SP Dt, SP dinv, CP colv) {
    const int k0 = 32 * q, pb = n - k0 < 32 ? n - k0 : 32;
    const int row = alloy_tl_at(k0 + r, k0);
    T a[32];
    #pragma unroll
    for (int c = 0; c < 8; c++) {
        const vec<T, 4> v = r < pb ? ((threadgroup vec<T, 4> *)(S + row))[c] : vec<T, 4>(T(0));
        #pragma unroll
        for (int e = 0; e < 4; e++) a[4 * c + e] = v[e];
    }
    if (update) {
        #pragma unroll 2
        for (int l = 0; l < 32; l++) {
            const T pr = Pt[l * PL + r];
            #pragma unroll
            for (int c = 0; c < 8; c++) {
                const vec<T, 4> pc = ((threadgroup vec<T, 4> *)(Pt + l * PL))[c];
                #pragma unroll
                for (int e = 0; e < 4; e++) a[4 * c + e] = fma(-pr, pc[e], a[4 * c + e]);
            }
        }
        if (r >= pb) {
            #pragma unroll
            for (int j = 0; j < 32; j++) a[j] = T(0);
        }
    }
    int bad = 0;
    #pragma unroll
    for (int k = 0; k < 32; k++) {
        if (k >= pb) break;
        const int h = (k & 1) * 8;
        colv[h + (r >> 2)][r & 3] = a[k];
        simdgroup_barrier(mem_flags::mem_threadgroup);
        const T d = colv[h + (k >> 2)][k & 3];
        if (bad == 0 && !(d > T(0))) bad = k + 1;
        if (bad == 0) {
            const T s = sqrt(d);
            const T inv = T(1) / s;
            const T l = r == k ? s : a[k] * inv;
            const T li = l * inv;
            a[k] = l;
            if (r == k) dinv[k] = inv;
            #pragma unroll
            for (int j4 = (k + 1) & ~3; j4 < 32; j4 += 4) {
                const vec<T, 4> c = colv[h + (j4 >> 2)];
                #pragma unroll
                for (int e = 0; e < 4; e++)
                    if (j4 + e > k) a[j4 + e] = fma(-li, c[e], a[j4 + e]);
            }
        }
    }
    if (r < pb) {
        #pragma unroll
        for (int c = 0; c < 8; c++) {
            vec<T, 4> v;
            #pragma unroll
            for (int e = 0; e < 4; e++) v[e] = a[4 * c + e];
            ((threadgroup vec<T, 4> *)(S + row))[c] = v;
        }
    }
    #pragma unroll
    for (int l = 0; l < 32; l++) Dt[l * 32 + r] = a[l];
    return bad;
}

// Rows i >= r0 = 32 (q + 1) of panel q solved against the diagonal block:
// its first w columns (w < 32 after a failed pivot: the later columns get
// the Schur complement's update from those), into S and Pt; rows >= n
// (the last block row's padding) put zeros into Pt.
template <class T, class SP>
inline void alloy_tl_trsm(SP S, SP Pt, int PL, int q, int w, int n, int npad, int tid, int nt, SP Dt, SP dinv) {
    const int k0 = 32 * q, r0 = k0 + 32;
    for (int i = r0 + tid; i < npad; i += nt) {
        T x[32];
        if (i < n) {
            const int row = alloy_tl_at(i, k0);
            #pragma unroll
            for (int c = 0; c < 8; c++) {
                const vec<T, 4> v = ((threadgroup vec<T, 4> *)(S + row))[c];
                #pragma unroll
                for (int e = 0; e < 4; e++) x[4 * c + e] = v[e];
            }
            #pragma unroll
            for (int l = 0; l < 32; l++) {
                if (l >= w) break;
                x[l] *= dinv[l];
                #pragma unroll
                for (int m4 = (l + 1) & ~3; m4 < 32; m4 += 4) {
                    const vec<T, 4> dv = ((threadgroup vec<T, 4> *)(Dt + l * 32))[m4 >> 2];
                    #pragma unroll
                    for (int e = 0; e < 4; e++)
                        if (m4 + e > l) x[m4 + e] = fma(-x[l], dv[e], x[m4 + e]);
                }
            }
            #pragma unroll
            for (int c = 0; c < 8; c++) {
                vec<T, 4> v;
                #pragma unroll
                for (int e = 0; e < 4; e++) v[e] = x[4 * c + e];
                ((threadgroup vec<T, 4> *)(S + row))[c] = v;
            }
        } else {
            #pragma unroll
            for (int l = 0; l < 32; l++) x[l] = T(0);
        }
        #pragma unroll
        for (int l = 0; l < 32; l++) Pt[l * PL + (i - r0)] = x[l];
    }
}

// Tile (I, J) of the trailing lower triangle (rows 32I.., columns 32J..)
// less the panel's product over its first w columns; Pt's rows start at
// r0. Lane (ty, tx) = (lane / 8, lane % 8) takes rows 8 ty..8 ty+7 and
// columns 4 tx..4 tx+3 of the tile.
template <class T, class SP>
inline void alloy_tl_syrk_tile(SP S, SP Pt, int PL, int r0, int I, int J, int w, int lane) {
    const int ty = lane >> 3, tx = lane & 7;
    const int pi = 32 * I - r0 + 8 * ty, pj = 32 * J - r0 + 4 * tx;
    T acc[8][4];
    #pragma unroll
    for (int u = 0; u < 8; u++)
        #pragma unroll
        for (int v = 0; v < 4; v++) acc[u][v] = T(0);
    #pragma unroll 4
    for (int l = 0; l < w; l++) {
        const vec<T, 4> ra = *((threadgroup vec<T, 4> *)(Pt + l * PL + pi));
        const vec<T, 4> rb = *((threadgroup vec<T, 4> *)(Pt + l * PL + pi + 4));
        const vec<T, 4> cv = *((threadgroup vec<T, 4> *)(Pt + l * PL + pj));
        #pragma unroll
        for (int u = 0; u < 4; u++)
            #pragma unroll
            for (int v = 0; v < 4; v++) {
                acc[u][v] = fma(ra[u], cv[v], acc[u][v]);
                acc[u + 4][v] = fma(rb[u], cv[v], acc[u + 4][v]);
            }
    }
    const int ld = alloy_tl_ld(I);
    const int o = alloy_tl_base(I) + 8 * ty * ld + 32 * J + 4 * tx;
    #pragma unroll
    for (int u = 0; u < 8; u++) {
        threadgroup vec<T, 4> *p = (threadgroup vec<T, 4> *)(S + o + u * ld);
        vec<T, 4> s = *p;
        #pragma unroll
        for (int v = 0; v < 4; v++) s[v] -= acc[u][v];
        *p = s;
    }
}
//! body:
static_assert(NW >= 2, "cholesky_tiled needs two SIMD groups or more");
constexpr int NT = NW * 32;
threadgroup T Dt[32 * 32];          // the diagonal block's factor, transposed
threadgroup T dinv[32];             // reciprocals of its diagonal
threadgroup vec<T, 4> colv[16];     // SIMD group 0's published column, double-buffered
threadgroup int flag[1];            // the diagonal block's failed column (1-based) or 0
const int tid = int(thread_index_in_threadgroup);
const int warp = tid >> 5, lane = tid & 31;
const long bz = long(threadgroup_position_in_grid.x);
const int nn = int(n), nblk = (nn + 31) >> 5, npad = 32 * nblk;
const int PL = nblk > 1 ? 32 * (nblk - 1) : 4;
threadgroup T *S = (threadgroup T *)alloy_threadgroup_memory;
threadgroup T *Pt = S + alloy_tl_base(nblk);
auto Ab = A + (a_off + bz * sa_b);
auto Lb = L + (l_off + bz * long(nn) * nn);
// The L view of the input: L(i, m) = Ab[i * si + m * sm], m <= i.
const long si = upper ? sa_c : sa_r, sm = upper ? sa_r : sa_c;

// Load by 32 x 32 tiles of the lower block triangle, zeros outside the
// referenced triangle and the matrix: lane c reads column c of the tile's
// rows (or row c of its columns where the L view's rows are adjacent).
{
    const bool lanes_m = si != 1;
    const int ntiles = nblk * (nblk + 1) / 2;
    for (int t = warp; t < ntiles; t += NW) {
        int I, J;
        alloy_tl_tile(t, I, J);
        T v[32];
        #pragma unroll
        for (int s = 0; s < 32; s++) {
            const int i = 32 * I + (lanes_m ? s : lane), m = 32 * J + (lanes_m ? lane : s);
            v[s] = (m <= i && i < nn) ? T(Ab[long(i) * si + long(m) * sm]) : T(0);
        }
        #pragma unroll
        for (int s = 0; s < 32; s++) {
            const int i = 32 * I + (lanes_m ? s : lane), m = 32 * J + (lanes_m ? lane : s);
            S[alloy_tl_at(i, m)] = v[s];
        }
    }
}
threadgroup_barrier(mem_flags::mem_threadgroup);
if (warp == 0) {
    const int b0 = nblk > 0 ? alloy_tl_diag<T>(S, Pt, PL, 0, nn, false, lane, &Dt[0], &dinv[0], &colv[0]) : 0;
    if (lane == 0) flag[0] = b0;
}
threadgroup_barrier(mem_flags::mem_threadgroup);

int info_m = 0;
for (int q = 0; q < nblk; q++) {
    const int bad = flag[0];
    const int pb = nn - 32 * q < 32 ? nn - 32 * q : 32;
    const int w = bad ? bad - 1 : pb;
    if (q + 1 < nblk) {
        alloy_tl_trsm<T>(S, Pt, PL, q, w, nn, npad, tid, NT, &Dt[0], &dinv[0]);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const int r0 = 32 * (q + 1);
        const bool look = bad == 0; // SIMD group 0 takes the next diagonal block
        if (look && warp == 0) {
            const int b1 = alloy_tl_diag<T>(S, Pt, PL, q + 1, nn, true, lane, &Dt[0], &dinv[0], &colv[0]);
            if (lane == 0) flag[0] = b1;
        } else if (w > 0) {
            const int first = look ? 1 : 0, workers = NW - first;
            int t = 0;
            for (int J = q + 1; J < nblk; J++)
                for (int I = J; I < nblk; I++) {
                    if (look && J == q + 1 && I == q + 1) continue;
                    if (t % workers == warp - first) alloy_tl_syrk_tile<T>(S, Pt, PL, r0, I, J, w, lane);
                    t++;
                }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (bad) {
        info_m = 32 * q + bad;
        break;
    }
}
if (tid == 0) info[i_off + bz] = info_m;

// Store by 32 x 32 tiles of the whole result, lane c writing column c of
// the tile's rows: the lower factor, or its transpose for upper, zeros in
// the other triangle.
for (int t = warp; t < nblk * nblk; t += NW) {
    const int I = t / nblk, J = t - I * nblk;
    const int p0 = 32 * I, c = 32 * J + lane;
    #pragma unroll 8
    for (int s = 0; s < 32; s++) {
        const int p = p0 + s;
        if (p < nn && c < nn) {
            T v = T(0);
            if (upper) {
                if (c >= p) v = S[alloy_tl_at(c, p)];
            } else {
                if (c <= p) v = S[alloy_tl_at(p, c)];
            }
            Lb[long(p) * nn + c] = v;
        }
    }
}
