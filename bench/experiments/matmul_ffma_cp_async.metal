// EXPERIMENT (not in the build; see NOTES.md, "Exact float32 GEMM on CUDA cores"): slower than
// matmul_simt on the H100. Time it with gemm_variant.c (FILE@128,64,128,0).
// matmul_ffma: C = alpha * A B + beta * C in exact float32 on CUDA cores
// (fused multiply-adds, float accumulation: precision "highest") for
// float32 operands whose rows are unit-stride and 16-byte aligned — the
// layout matmul_simt would otherwise take. Same launch constants as
// matmul_simt (M N K, strides in elements, offsets, alpha, beta; beta == 0:
// C is not read); C any float dtype (template TOUT).
// Why a second SIMT kernel: matmul_simt stages each K step through
// registers (it transposes A on the way), which costs registers and leaves
// one step of prefetch. Here the tiles go straight from device memory to
// threadgroup memory in 16-byte asynchronous copies (cp.async on CUDA;
// plain copies elsewhere), STAGES deep, with the bytes past the matrices
// zero-filled, so any M, N, K works.
// Tiles: 128 (M) x 64 (N) per threadgroup of 128 threads (four SIMD groups
// in 2 x 2, each 64 x 32), K steps of BK = 8; each thread owns 8 rows (r,
// r + 8, ..., r + 56 of its group's 64) times 8 columns (two runs of 4, 16
// apart). A's tile keeps A's rows (K-major, two 16-byte chunks per row);
// the chunk of row m is stored at chunk c ^ ((m >> 2) & 1), so the eight
// rows a SIMD group reads at once fall in eight different bank groups. Each
// thread reads 4 K values of a row at once (one 16-byte read feeds 32
// multiply-adds), B's rows 16 bytes at a time. Two threadgroups per SM
// (__launch_bounds__(128, 2): up to 255 registers, room to hold the next
// fragments while multiplying). Threadgroups are rasterised in groups of 8
// tile rows for L2 reuse.
// Launch: grid = (ceil(N/64)*128, ceil(M/128), batch), threadgroup = (128, 1, 1).
//! name: alloy_matmul_ffma
//! inputs: A B
//! outputs: C
//! ensure_row_contiguous: false
//! template: TOUT=float32
//! header:
#undef ALLOY_CUDA_LAUNCH_BOUNDS /* two threadgroups of 128 threads per SM */
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(128, 2)
/* one 16-byte chunk from device to threadgroup memory, `bytes` (0..16) of
 * it read and the rest zero-filled; asynchronous on CUDA (waited for by
 * mf_wait), immediate elsewhere */
METAL_FUNC void mf_copy16(threadgroup float *dst, const device float *src, int bytes) {
#if defined(ALLOY_BACKEND_CUDA)
    uint d;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(d) : "l"(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(bytes) : "memory");
#else
    for (int e = 0; e < 4; e++) dst[e] = e * 4 < bytes ? src[e] : 0.0f;
#endif
}
METAL_FUNC void mf_commit() {
#if defined(ALLOY_BACKEND_CUDA)
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
/* this thread's copies but its last N commit groups have landed */
template <int N> METAL_FUNC void mf_wait() {
#if defined(ALLOY_BACKEND_CUDA)
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}
//! body:
constexpr int BM = 128, BN = 64, BK = 8, STAGES = 4;
threadgroup float4 As4[STAGES * BM * BK / 4];
threadgroup float4 Bs4[STAGES * BK * BN / 4];
threadgroup float *As = (threadgroup float *)(&As4[0]);
threadgroup float *Bs = (threadgroup float *)(&Bs4[0]);

const int tid = int(thread_index_in_threadgroup);
const long bz = long(threadgroup_position_in_grid.z);
const int gn = int(threadgroups_per_grid.x), gm = int(threadgroups_per_grid.y);
const int lin = int(threadgroup_position_in_grid.x) + int(threadgroup_position_in_grid.y) * gn;
const int per = 8 * gn, grp = lin / per, first = grp * 8;
const int rows = gm - first < 8 ? gm - first : 8;
const long m0 = long(first + (lin % per) % rows) * BM;
const long n0 = long((lin % per) / rows) * BN;
const device float *Ab = A + (a_off + bz * sa_b);
const device float *Bb = B + (b_off + bz * sb_b);
auto Cb = C + (c_off + bz * sc_b);

// The copies of one K step: row tid of A's tile (its CPR 16-byte chunks)
// and BK / 8 chunks of B's tile (chunk tid % 16 of rows tid / 16 + 8 q).
// Chunk c of A's row m is stored at c ^ ((m / RPL) % CPR): the rows that
// share a 128-byte line of threadgroup memory get different chunk orders.
// Each thread's source pointers advance by one K step per step; only the
// byte counts (zero past the matrices) are computed per copy.
constexpr int CPR = BK / 4, RPL = 8 / CPR;
const bool a_ok = m0 + tid < M;
const device float *a_src = Ab + (a_ok ? (m0 + tid) * sa_m : 0);
const int b_r = tid >> 4, b_c = (tid & 15) * 4;
const long b_col = n0 + b_c;
const int b_bytes = b_col >= N ? 0 : N - b_col >= 4 ? 16 : int(N - b_col) * 4;
const device float *b_src = Bb + (b_bytes ? b_r * sb_k + b_col : 0);
const int a_dst = tid * BK, a_sw = (tid / RPL) % CPR, b_dst = b_r * BN + b_c;
auto issue = [&](int s, long k0) {
    const long kr = K - k0; // K values left from this step's first
    for (int c = 0; c < CPR; c++) {
        const long rem = kr - c * 4;
        const int bytes = !a_ok || rem <= 0 ? 0 : rem >= 4 ? 16 : int(rem) * 4;
        mf_copy16(As + s * BM * BK + a_dst + ((c ^ a_sw) * 4), bytes ? a_src + c * 4 : Ab, bytes);
    }
    for (int q = 0; q < BK / 8; q++) {
        const int bytes = kr > b_r + 8 * q ? b_bytes : 0;
        mf_copy16(Bs + s * BK * BN + b_dst + 8 * q * BN, bytes ? b_src + 8 * q * sb_k : Bb, bytes);
    }
    a_src += BK;
    b_src += BK * sb_k;
};

// SIMD groups in (BM / 64) x (BN / 32), each 64 x 32: lane (r, cg) owns
// rows r + 8 i and columns cg * 4 + j, 16 + cg * 4 + j of its group's tile.
const int warp = tid >> 5, lane = tid & 31;
const int wm = (warp / (BN / 32)) * 64, wn = (warp % (BN / 32)) * 32;
const int r = lane >> 2, cg = lane & 3;
const int sw = (r / RPL) % CPR; // the same for rows wm + r + 8 i (wm a multiple of 8)
float acc[8][8];
for (int i = 0; i < 8; i++)
    for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;

const long KT = (K + BK - 1) / BK;
for (int s = 0; s < STAGES - 1; s++) {
    if (s < KT) issue(s, long(s) * BK);
    mf_commit();
}
int s_read = 0, s_write = STAGES - 1;
for (long kt = 0; kt < KT; kt++) {
    mf_wait<STAGES - 2>();
    // every thread's copies of step kt have landed, and every thread is done
    // with step kt - 1, whose stage the next copies overwrite
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (kt + STAGES - 1 < KT) issue(s_write, (kt + STAGES - 1) * BK);
    mf_commit();
    s_write = s_write == STAGES - 1 ? 0 : s_write + 1;
    const int s = s_read;
    s_read = s_read == STAGES - 1 ? 0 : s_read + 1;
    const threadgroup float *as = As + (s * BM + wm + r) * BK;
    const threadgroup float *bs = Bs + s * BK * BN + wn + cg * 4;
    #pragma unroll
    for (int c = 0; c < CPR; c++) {
        float4 a[8];
        #pragma unroll
        for (int i = 0; i < 8; i++) a[i] = *(const threadgroup float4 *)(as + i * 8 * BK + ((c ^ sw) * 4));
        #pragma unroll
        for (int e = 0; e < 4; e++) {
            const float4 b0 = *(const threadgroup float4 *)(bs + (c * 4 + e) * BN);
            const float4 b1 = *(const threadgroup float4 *)(bs + (c * 4 + e) * BN + 16);
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
            #pragma unroll
            for (int i = 0; i < 8; i++) {
                const float x = e == 0 ? a[i].x : e == 1 ? a[i].y : e == 2 ? a[i].z : a[i].w;
                #pragma unroll
                for (int j = 0; j < 8; j++) acc[i][j] = fma(x, b[j], acc[i][j]);
            }
        }
    }
}
mf_wait<0>();

// Epilogue: C = alpha * acc (+ beta * C), rounded once into C's dtype.
const float al = float(alpha), be = float(beta);
for (int i = 0; i < 8; i++) {
    const long m = m0 + wm + r + 8 * i;
    if (m >= M) continue;
    for (int j = 0; j < 8; j++) {
        const long n = n0 + wn + (j < 4 ? cg * 4 + j : 16 + cg * 4 + j - 4);
        if (n >= N) continue;
        float v = al * acc[i][j];
        if (beta != 0.0) v = fma(be, float(Cb[m * sc_m + n]), v);
        Cb[m * sc_m + n] = TOUT(v);
    }
}
