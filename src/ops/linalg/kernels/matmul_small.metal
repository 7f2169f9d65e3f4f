// matmul_small: C = alpha * A B + beta * C for small matrices (batches of
// 32 x 32 and the like), where a 128 x 128 tile would leave most threads idle.
// The interface of matmul_simt (strides, offsets, alpha, beta as launch
// constants; templates TIN, TOUT, ACC): exact products and sums in ACC.
// Tiles: 32 x 32 per threadgroup of 128 threads, K steps of 32 staged in
// threadgroup memory (each thread loads 8 elements of A and 8 of B per step,
// two 16-byte loads each for float32 tiles inside aligned matrices, zeros
// outside the matrices); thread (ty, tx) = (tid / 8, tid % 8) owns rows
// 2ty, 2ty+1 and columns tx, tx+8, tx+16, tx+24 (a warp reads 32 different
// banks of the B tile and broadcasts the A tile).
// Launch: grid = (ceil(N/32)*128, ceil(M/32), batch), threadgroup = (128, 1, 1).
//! name: alloy_matmul_small
//! inputs: A B
//! outputs: C
//! ensure_row_contiguous: false
//! template: TIN=float32
//! template: TOUT=float32
//! template: ACC=float32
//! body:
constexpr int BM = 32, BN = 32, BK = 32;
threadgroup ACC As[BM][BK + 1];
threadgroup ACC Bs[BK][BN];
const int tid = int(thread_index_in_threadgroup);
const long bz = long(threadgroup_position_in_grid.z);
const long m0 = long(threadgroup_position_in_grid.y) * BM;
const long n0 = long(threadgroup_position_in_grid.x) * BN;
auto Ab = A + (a_off + bz * sa_b);
auto Bb = B + (b_off + bz * sb_b);
auto Cb = C + (c_off + bz * sc_b);
const int ty = tid >> 3, tx = tid & 7;
ACC acc[2][4];
#pragma unroll
for (int i = 0; i < 2; i++)
    #pragma unroll
    for (int j = 0; j < 4; j++) acc[i][j] = ACC(0);
for (long k0 = 0; k0 < K; k0 += BK) {
    // 16-byte loads of float32 rows where the tile is inside and aligned
    if (metal::is_same_v<TIN, float> && sa_k == 1 && sb_n == 1 && (sa_m % 4) == 0 && (sb_k % 4) == 0 &&
        m0 + BM <= M && n0 + BN <= N && k0 + BK <= K && ((ulong)(&Ab[0]) % 16) == 0 && ((ulong)(&Bb[0]) % 16) == 0) {
        #pragma unroll
        for (int h = 0; h < 2; h++) {
            const int e = tid * 4 + 512 * h, r = e >> 5, c = e & 31;
            const float4 va = *(const device float4 *)(&Ab[(m0 + r) * sa_m + k0 + c]);
            As[r][c] = ACC(va.x); As[r][c + 1] = ACC(va.y); As[r][c + 2] = ACC(va.z); As[r][c + 3] = ACC(va.w);
            const float4 vb = *(const device float4 *)(&Bb[(k0 + r) * sb_k + n0 + c]);
            Bs[r][c] = ACC(vb.x); Bs[r][c + 1] = ACC(vb.y); Bs[r][c + 2] = ACC(vb.z); Bs[r][c + 3] = ACC(vb.w);
        }
    } else {
        // element e = tid + 128 i is (row e / 32, k e % 32) of A; (k, col) of B
        #pragma unroll
        for (int i = 0; i < 8; i++) {
            const int e = tid + 128 * i, r = e >> 5, c = e & 31;
            const long m = m0 + r, k = k0 + c;
            As[r][c] = (m < M && k < K) ? ACC(Ab[m * sa_m + k * sa_k]) : ACC(0);
            const long kb = k0 + r, n = n0 + c;
            Bs[r][c] = (kb < K && n < N) ? ACC(Bb[kb * sb_k + n * sb_n]) : ACC(0);
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    #pragma unroll 8
    for (int kk = 0; kk < BK; kk++) {
        const ACC a0 = As[2 * ty][kk], a1 = As[2 * ty + 1][kk];
        #pragma unroll
        for (int j = 0; j < 4; j++) {
            const ACC b = Bs[kk][tx + 8 * j];
            acc[0][j] = fma(a0, b, acc[0][j]);
            acc[1][j] = fma(a1, b, acc[1][j]);
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
}
const ACC al = ACC(alpha), be = ACC(beta);
#pragma unroll
for (int i = 0; i < 2; i++) {
    const long m = m0 + 2 * ty + i;
    if (m >= M) continue;
    #pragma unroll
    for (int j = 0; j < 4; j++) {
        const long n = n0 + tx + 8 * j;
        if (n >= N) continue;
        ACC v = al * acc[i][j];
        if (beta != 0.0) v = fma(be, ACC(Cb[m * sc_m + n]), v);
        Cb[m * sc_m + n] = TOUT(v);
    }
}
