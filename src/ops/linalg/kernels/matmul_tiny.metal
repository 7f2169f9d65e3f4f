// matmul_tiny: C = alpha * A B + beta * C for batches of matrices with M and
// N at most 32 (10 000 products of 32 x 32, say), any K. The interface of
// matmul_simt (strides, offsets, alpha, beta as launch constants; templates
// TIN, TOUT, ACC): exact products and sums in ACC.
// One SIMD group per matrix, G = 2 per threadgroup: lane l owns rows
// 4(l / 4) .. + 3 and columns 4(l % 4) .. + 3 and 16 + 4(l % 4) .. + 3 (32
// accumulators), so four steps of k read 4 rows of A and 8 of B as 16-byte
// threadgroup reads for 128 fused multiply-adds. K in blocks of 32 through
// threadgroup memory: A's rows padded to 36 elements (the two rows a quarter
// warp reads at once are 16 banks apart), B's rows of 32.
// The grid may hold fewer threadgroups than the batch needs (the op launches
// about as many as are resident at once): threadgroup g of P takes matrices
// (g + tP) G + sg, t = 0, 1, ..., so each SIMD group runs a sequence of
// (matrix, K block) steps. Float32 matrices of 32 x 32 blocks (aligned, unit
// column strides, K a multiple of 32) stream through two stages: the next
// step's 16-byte copies (cp.async on CUDA) are in flight during this step's
// products, so the loads of one matrix overlap the arithmetic and the
// stores of the one before (without it every resident group loaded, then
// computed, then stored in lockstep, and memory idled through the middle).
// Everything else fills one stage element by element, zeros outside.
// Launch: grid = (P * 32G, 1, 1) for any P >= 1, threadgroup = (32G, 1, 1).
//! name: alloy_matmul_tiny
//! inputs: A B
//! outputs: C
//! ensure_row_contiguous: false
//! template: TIN=float32
//! template: TOUT=float32
//! template: ACC=float32
//! header:
/* Rows of threadgroup memory: float4 chunks for a float ACC (16-byte reads
 * and copies), else ACC elements. c is a column, c0 and c multiples of 4
 * where four are moved at once. */
METAL_FUNC void mm_tiny_set(threadgroup float4 *row, int c, float v) { row[c / 4][c % 4] = v; }
template <class T> METAL_FUNC void mm_tiny_set(threadgroup T *row, int c, T v) { row[c] = v; }
/* row[c .. c + 3] = src[i .. i + 3]: on CUDA an asynchronous 16-byte copy
 * (src + i 16-byte aligned; mm_tiny_wait_but_one makes it land), else a
 * plain one */
METAL_FUNC void mm_tiny_copy4(threadgroup float4 *row, int c, const device float *src, long i) {
#if defined(ALLOY_BACKEND_CUDA)
    uint d;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(d) : "l"(row + c / 4));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src + i) : "memory");
#else
    row[c / 4] = *(const device float4 *)(src + i);
#endif
}
template <class U> METAL_FUNC void mm_tiny_copy4(threadgroup float4 *row, int c, const device U *src, long i) {
    row[c / 4] = float4(float(src[i]), float(src[i + 1]), float(src[i + 2]), float(src[i + 3]));
}
template <class T, class U> METAL_FUNC void mm_tiny_copy4(threadgroup T *row, int c, const device U *src, long i) {
    for (int e = 0; e < 4; e++) row[c + e] = T(src[i + e]);
}
/* the copies issued before the last commit but `pending` have landed */
METAL_FUNC void mm_tiny_commit() {
#if defined(ALLOY_BACKEND_CUDA)
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
METAL_FUNC void mm_tiny_wait_but_one() {
#if defined(ALLOY_BACKEND_CUDA)
    asm volatile("cp.async.wait_group 1;" ::: "memory");
#endif
}
/* v[0 .. 3] = row[c .. c + 3] */
METAL_FUNC void mm_tiny_get4(const threadgroup float4 *row, int c, thread float *v) {
    const float4 u = row[c / 4];
    v[0] = u.x; v[1] = u.y; v[2] = u.z; v[3] = u.w;
}
template <class T> METAL_FUNC void mm_tiny_get4(const threadgroup T *row, int c, thread T *v) {
    for (int e = 0; e < 4; e++) v[e] = row[c + e];
}
/* b[0 .. 7] = row[c0 .. c0 + 3], row[16 + c0 .. + 3] */
METAL_FUNC void mm_tiny_get8(const threadgroup float4 *row, int c0, thread float *b) {
    mm_tiny_get4(row, c0, b);
    mm_tiny_get4(row, 16 + c0, b + 4);
}
template <class T> METAL_FUNC void mm_tiny_get8(const threadgroup T *row, int c0, thread T *b) {
    mm_tiny_get4(row, c0, b);
    mm_tiny_get4(row, 16 + c0, b + 4);
}
/* c[i .. i + 3] = alpha v + beta c (c read only when `read`): one 16-byte
 * load and store for float32 outputs (c + i 16-byte aligned), else element
 * by element */
METAL_FUNC void mm_tiny_put4(device float *c, long i, const thread float *v, float al, float be, bool read) {
    float4 x = float4(al * v[0], al * v[1], al * v[2], al * v[3]);
    if (read) x = fma(float4(be), *(device float4 *)(c + i), x);
    *(device float4 *)(c + i) = x;
}
template <class T, class A>
METAL_FUNC void mm_tiny_put4(device T *c, long i, const thread A *v, A al, A be, bool read) {
#pragma unroll
    for (int e = 0; e < 4; e++) {
        A x = al * v[e];
        if (read) x = fma(be, A(c[i + e]), x);
        c[i + e] = T(x);
    }
}
/* this lane's 4 x 8 block of a matrix of C (row pitch ldc, M x N), alpha acc
 * + beta C: 16-byte stores where `vec` (float32 C, 16-byte aligned rows,
 * N = 32), else element by element inside the matrix */
template <class T, class A>
METAL_FUNC void mm_tiny_store(device T *c, long ldc, long M, long N, bool vec, int r0, int c0, thread A (*acc)[8],
                              A al, A be, bool read) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const long m = r0 + i;
        if (m >= M) continue;
        if (vec) {
            mm_tiny_put4(c, m * ldc + c0, acc[i], al, be, read);
            mm_tiny_put4(c, m * ldc + 16 + c0, acc[i] + 4, al, be, read);
            continue;
        }
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const long n = (j < 4 ? c0 : 16 + c0 - 4) + j;
            if (n >= N) continue;
            A x = al * acc[i][j];
            if (read) x = fma(be, A(c[m * ldc + n]), x);
            c[m * ldc + n] = T(x);
        }
    }
}
/* acc[i][j] += sum_k A(r0 + i, k) B(k, c0 + j (j < 4), 16 + c0 + j - 4 (j >= 4))
 * over a block of 32 k: A's rows at `as` (AP elements of T apart), B's at
 * `bs` (BP apart); four steps of k per read of A's rows, in k order. */
template <int AP, int BP, class T, class A>
METAL_FUNC void mm_tiny_block(thread A (*acc)[8], const threadgroup T *as, const threadgroup T *bs, int r0, int c0) {
#pragma unroll 2
    for (int kk = 0; kk < 32; kk += 4) {
        A a[4][4];
#pragma unroll
        for (int i = 0; i < 4; i++) mm_tiny_get4(as + (r0 + i) * AP, kk, a[i]);
#pragma unroll
        for (int u = 0; u < 4; u++) {
            A b[8];
            mm_tiny_get8(bs + (kk + u) * BP, c0, b);
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 8; j++) acc[i][j] = fma(a[i][u], b[j], acc[i][j]);
        }
    }
}
template <class A> METAL_FUNC void mm_tiny_zero(thread A (*acc)[8]) {
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] = A(0);
}
//! body:
constexpr int BK = 32, G = 2, VW = sizeof(ACC) == 4 ? 4 : 1;
constexpr int NS = sizeof(ACC) == 4 ? 2 : 1; /* stages (double: one, to stay within 48 KB) */
using BV = metal::conditional_t<VW == 4, float4, ACC>;
threadgroup BV As[G][NS][32][36 / VW];
threadgroup BV Bs[G][NS][BK][32 / VW];
const int sg = int(thread_index_in_threadgroup) / 32, lane = int(thread_index_in_threadgroup) % 32;
const int r0 = 4 * (lane / 4), c0 = 4 * (lane % 4);
const long P = long(threadgroups_per_grid.x), tg = long(threadgroup_position_in_grid.x);
const long KB = (K + BK - 1) / BK;
// this threadgroup's rounds (the same for its SIMD groups: the barriers stay uniform)
const long units = (batch + G - 1) / G, rounds = tg < units ? (units - tg + P - 1) / P : 0;
const bool vec = NS == 2 && metal::is_same_v<TIN, float> && sa_k == 1 && sb_n == 1 && M == 32 && N == 32 &&
                 (K % BK) == 0 && (sa_m % 4) == 0 && (sb_k % 4) == 0 && ((sa_b | sb_b | a_off | b_off) % 4) == 0 &&
                 ((ulong)(&A[0]) % 16) == 0 && ((ulong)(&B[0]) % 16) == 0;
const bool vec_c = N == 32 && (sc_m % 4) == 0 && ((sc_b | c_off) % 4) == 0 && ((ulong)(&C[0]) % 16) == 0;
ACC acc[4][8];
mm_tiny_zero(acc);
if (vec) {
    // step s: round s / KB, K block s % KB; the copies of step s + 1 go out
    // before the products of step s
    const long steps = rounds * KB;
    for (long s = -1; s < steps; s++) {
        const long n = s + 1, nz = (tg + (n / KB) * P) * G + sg, nkb = n % KB;
        const int ns = int(n & 1);
        if (n < steps && nz < batch) {
            // lane l, pass h: row (or k) 4h + l / 8, columns 4(l % 8) .. + 3
            const device TIN *An = A + (a_off + nz * sa_b + nkb * BK);
            const device TIN *Bn = B + (b_off + nz * sb_b + nkb * BK * sb_k);
            #pragma unroll
            for (int h = 0; h < 8; h++) {
                const int r = 4 * h + lane / 8, c = 4 * (lane % 8);
                mm_tiny_copy4(&As[sg][ns][r][0], c, An, r * sa_m + c);
                mm_tiny_copy4(&Bs[sg][ns][r][0], c, Bn, r * sb_k + c);
            }
        }
        mm_tiny_commit();
        if (s >= 0) {
            // step s's copies have landed (step s + 1's may not have)
            mm_tiny_wait_but_one();
            simdgroup_barrier(mem_flags::mem_threadgroup);
            const long z = (tg + (s / KB) * P) * G + sg;
            const int ss = int(s & 1);
            if (z < batch) mm_tiny_block<36 / VW, 32 / VW>(acc, &As[sg][ss][0][0], &Bs[sg][ss][0][0], r0, c0);
            // every lane is done with stage ss before step s + 2 refills it
            simdgroup_barrier(mem_flags::mem_threadgroup);
            if (s % KB == KB - 1) {
                if (z < batch) mm_tiny_store(C + (c_off + z * sc_b), sc_m, 32, 32, vec_c, r0, c0, acc, ACC(alpha), ACC(beta), beta != 0.0);
                mm_tiny_zero(acc);
            }
        }
    }
} else {
    for (long t = 0; t < rounds; t++) {
        const long bz = (tg + t * P) * G + sg;
        const bool live = bz < batch; /* spare groups of the last round load zeros and store nothing */
        const device TIN *Ab = A + (a_off + (live ? bz : 0) * sa_b);
        const device TIN *Bb = B + (b_off + (live ? bz : 0) * sb_b);
        for (long k0 = 0; k0 < K; k0 += BK) {
            // element lane + 32 i: (row, k) of A, (k, column) of B
            for (int i = 0; i < 32; i++) {
                const long k = k0 + lane, kb = k0 + i;
                mm_tiny_set(&As[sg][0][i][0], lane, (live && i < M && k < K) ? ACC(Ab[i * sa_m + k * sa_k]) : ACC(0));
                mm_tiny_set(&Bs[sg][0][i][0], lane, (live && kb < K && lane < N) ? ACC(Bb[kb * sb_k + lane * sb_n]) : ACC(0));
            }
            simdgroup_barrier(mem_flags::mem_threadgroup);
            mm_tiny_block<36 / VW, 32 / VW>(acc, &As[sg][0][0][0], &Bs[sg][0][0][0], r0, c0);
            simdgroup_barrier(mem_flags::mem_threadgroup);
        }
        if (live) mm_tiny_store(C + (c_off + bz * sc_b), sc_m, M, N, vec_c, r0, c0, acc, ACC(alpha), ACC(beta), beta != 0.0);
        mm_tiny_zero(acc);
    }
}
