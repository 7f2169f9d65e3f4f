// matmul_tiny: C = alpha * A B + beta * C for batches of matrices with M and
// N at most 32 (10 000 products of 32 x 32, say), any K. The interface of
// matmul_simt (strides, offsets, alpha, beta as launch constants; templates
// TIN, TOUT, ACC): exact products and sums in ACC.
// One SIMD group per matrix, G per threadgroup (4; 2 for a double ACC, to stay
// within 48 KB of static threadgroup memory): lane l owns rows
// 4(l / 4) .. + 3 and columns 4(l % 4) .. + 3 and 16 + 4(l % 4) .. + 3 (32
// accumulators), so each step of k reads 4 values of A and 8 of B from
// threadgroup memory for 32 fused multiply-adds — matmul_small's 32 x 32
// tile spreads the same products over 128 threads at 6 reads for 8, and is
// bound by those reads. K in blocks of 32 through threadgroup memory
// (A's rows padded to 33: the four row reads of a step hit distinct banks;
// B's rows of 32: a quarter warp's 16-byte reads cover all banks); float32
// blocks inside aligned matrices arrive as 16-byte loads, the rest element
// by element with zeros outside.
// Launch: grid = (ceil(batch / G) * 32G, 1, 1), threadgroup = (32G, 1, 1).
//! name: alloy_matmul_tiny
//! inputs: A B
//! outputs: C
//! ensure_row_contiguous: false
//! template: TIN=float32
//! template: TOUT=float32
//! template: ACC=float32
//! header:
/* A row of B in threadgroup memory: float4 chunks for a float ACC (16-byte
 * reads), else ACC elements. Set element c; set c .. c + 3; read columns
 * c0 .. c0 + 3 and 16 + c0 .. + 3 (c0 a multiple of 4). */
METAL_FUNC void mm_tiny_set(threadgroup float4 *row, int c, float v) { row[c / 4][c % 4] = v; }
template <class T> METAL_FUNC void mm_tiny_set(threadgroup T *row, int c, T v) { row[c] = v; }
METAL_FUNC void mm_tiny_set4(threadgroup float4 *row, int c, float4 v) { row[c / 4] = v; }
template <class T> METAL_FUNC void mm_tiny_set4(threadgroup T *row, int c, float4 v) {
    row[c] = T(v.x);
    row[c + 1] = T(v.y);
    row[c + 2] = T(v.z);
    row[c + 3] = T(v.w);
}
METAL_FUNC void mm_tiny_get8(const threadgroup float4 *row, int c0, thread float *b) {
    const float4 u = row[c0 / 4], w = row[4 + c0 / 4];
    b[0] = u.x; b[1] = u.y; b[2] = u.z; b[3] = u.w;
    b[4] = w.x; b[5] = w.y; b[6] = w.z; b[7] = w.w;
}
template <class T> METAL_FUNC void mm_tiny_get8(const threadgroup T *row, int c0, thread T *b) {
    for (int j = 0; j < 4; j++) {
        b[j] = row[c0 + j];
        b[4 + j] = row[16 + c0 + j];
    }
}
//! body:
constexpr int BK = 32, G = sizeof(ACC) == 8 ? 2 : 4;
threadgroup ACC As[G][32][33];
// B's rows as float4 for a float ACC (16-byte reads), else as ACC
constexpr int VW = sizeof(ACC) == 4 ? 4 : 1;
using BV = metal::conditional_t<VW == 4, float4, ACC>;
threadgroup BV Bs[G][BK][32 / VW];
const int sg = int(thread_index_in_threadgroup) / 32, lane = int(thread_index_in_threadgroup) % 32;
const long bz = long(threadgroup_position_in_grid.x) * G + sg;
const bool live = bz < batch; /* the last threadgroup's spare groups load zeros and store nothing */
auto Ab = A + (a_off + (live ? bz : 0) * sa_b);
auto Bb = B + (b_off + (live ? bz : 0) * sb_b);
auto Cb = C + (c_off + (live ? bz : 0) * sc_b);
const int r0 = 4 * (lane / 4), c0 = 4 * (lane % 4);
ACC acc[4][8];
#pragma unroll
for (int i = 0; i < 4; i++)
    #pragma unroll
    for (int j = 0; j < 8; j++) acc[i][j] = ACC(0);
const bool vec = metal::is_same_v<TIN, float> && sa_k == 1 && sb_n == 1 && M == 32 && N == 32 &&
                 (sa_m % 4) == 0 && (sb_k % 4) == 0 && ((sa_b | sb_b | a_off | b_off) % 4) == 0 &&
                 ((ulong)(&A[0]) % 16) == 0 && ((ulong)(&B[0]) % 16) == 0;
for (long k0 = 0; k0 < K; k0 += BK) {
    if (vec && k0 + BK <= K) {
        // lane l, pass h: row (or k) 4h + l / 8, columns 4(l % 8) .. + 3
        #pragma unroll
        for (int h = 0; h < 8; h++) {
            const int r = 4 * h + lane / 8, c = 4 * (lane % 8);
            const float4 va = live ? *(const device float4 *)(&Ab[r * sa_m + k0 + c]) : float4(0.0f);
            As[sg][r][c] = ACC(va.x); As[sg][r][c + 1] = ACC(va.y); As[sg][r][c + 2] = ACC(va.z); As[sg][r][c + 3] = ACC(va.w);
            const float4 vb = live ? *(const device float4 *)(&Bb[(k0 + r) * sb_k + c]) : float4(0.0f);
            mm_tiny_set4(&Bs[sg][r][0], c, vb);
        }
    } else {
        // element lane + 32 i: (row, k) of A, (k, column) of B
        for (int i = 0; i < 32; i++) {
            const int r = i, c = lane;
            const long k = k0 + c, kb = k0 + r;
            As[sg][r][c] = (live && r < M && k < K) ? ACC(Ab[r * sa_m + k * sa_k]) : ACC(0);
            const ACC vb = (live && kb < K && c < N) ? ACC(Bb[kb * sb_k + c * sb_n]) : ACC(0);
            mm_tiny_set(&Bs[sg][r][0], c, vb);
        }
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);
    #pragma unroll 4
    for (int kk = 0; kk < BK; kk++) {
        ACC a[4], b[8];
        #pragma unroll
        for (int i = 0; i < 4; i++) a[i] = As[sg][r0 + i][kk];
        mm_tiny_get8(&Bs[sg][kk][0], c0, b);
        #pragma unroll
        for (int i = 0; i < 4; i++)
            #pragma unroll
            for (int j = 0; j < 8; j++) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);
}
if (live) {
    const ACC al = ACC(alpha), be = ACC(beta);
    #pragma unroll
    for (int i = 0; i < 4; i++) {
        const long m = r0 + i;
        if (m >= M) continue;
        #pragma unroll
        for (int j = 0; j < 8; j++) {
            const long n = (j < 4 ? c0 : 16 + c0 - 4) + j;
            if (n >= N) continue;
            ACC v = al * acc[i][j];
            if (beta != 0.0) v = fma(be, ACC(Cb[m * sc_m + n]), v);
            Cb[m * sc_m + n] = TOUT(v);
        }
    }
}
