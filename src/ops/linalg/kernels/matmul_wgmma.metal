// matmul_wgmma: C = alpha * A B + beta * C for bfloat16 or float16 operands
// on Hopper's tensor cores (sm_90a wgmma), float accumulation. A is M x K
// with unit column stride (rows 16-byte aligned), B is K x N with unit column
// stride (rows 16-byte aligned); other layouts go to matmul_simt. C any
// float dtype, C(b, m, n) = C[c_off + b*sc_b + m*sc_m + n]; a_off, b_off,
// c_off, the strides and sizes are launch constants as for matmul_simt.
// beta == 0: C is not read.
// Design (the experiment of bench/experiments/wgmma_gemm_bf16.cu): 128 x 256
// output tiles, each computed by a threadgroup of two warpgroups (256
// threads), each warpgroup 64 x 256 with 128 float accumulators per thread;
// K steps of 64 through 4 stages of 48 KB of dynamic threadgroup memory,
// filled with 16-byte cp.async into the 128-byte-swizzled layouts wgmma reads
// (A K-major; B MN-major, read transposed); bytes outside the matrices are
// zero-filled by cp.async, so any M, N, K works (rows must still be 16-byte
// aligned: K and N multiples of 8 for contiguous matrices). Tiles wholly
// inside the matrices use the plain 16-byte cp.async (the zero-filling form
// costs a fifth of the rate at 8192^3); every loop over the accumulators is
// unrolled so they stay in registers; `__launch_bounds__(256, 1)` (the
// header redefines ALLOY_CUDA_LAUNCH_BOUNDS, which the generated kernel
// carries) lets ptxas give them all the registers.
// Persistent grid: about one threadgroup per SM (the host passes the SM
// count); threadgroup g of P takes tiles g, g + P, g + 2P, ... of the
// batch x tile rows x tile columns, tile rows rasterised in groups of 8 per
// matrix for L2 reuse. The pipeline runs over a threadgroup's K steps of all
// its tiles as one sequence: the loads of a tile's first three steps are
// issued during the last steps of the previous tile, so its epilogue (the
// stores, which leave the tensor cores idle) overlaps them, and a short K
// (batches of 1024^3: 16 steps a tile) no longer pays a pipeline fill per
// tile. Epilogue, whole tiles: 16-bit outputs with beta == 0 and C's rows
// 16-byte aligned go through the stage of the tile's last K step (free then:
// the next tile's loads fill the other three) with stmatrix and leave in
// coalesced 16-byte stores; otherwise column pairs are stored straight from
// the accumulators (one 4-byte store for 16-bit outputs, 8 bytes for float)
// where C's pairs are aligned, with the beta == 0 test outside the loop.
// Only edge tiles check every element.
// On the CPU the body loops over the same tiles in the same order, element
// by element (tests run it there; the op never picks this kernel off a
// Hopper GPU).
// Launch: any grid of threadgroups of (256, 1, 1) (the op's: (P*256, 1, 1)
// with P = min(tiles, SMs)), threadgroup memory 4 * 48 KB + 1 KB.
//! name: alloy_matmul_wgmma
//! inputs: A B
//! outputs: C
//! ensure_row_contiguous: false
//! template: TIN=bfloat16
//! template: TOUT=bfloat16
//! header:
#undef ALLOY_CUDA_LAUNCH_BOUNDS /* one threadgroup of 256 threads per SM */
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(256, 1)
#include "src/ops/linalg/kernels/wgmma_tile.h"
//! body:
constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4;
constexpr int A_STAGE = BM * BK * 2, B_STAGE = BK * BN * 2, STAGE = A_STAGE + B_STAGE;
const uint tid = thread_index_in_threadgroup;
// The tiles (the host keeps their count below 2^31) and this threadgroup's
// share: tiles g0, g0 + P, g0 + 2P, ...
const int gm = int((M + BM - 1) / BM), gn = int((N + BN - 1) / BN);
const int per_mat = gm * gn, tiles = int(batch) * per_mat;
const int P = int(threadgroups_per_grid.x * threadgroups_per_grid.y * threadgroups_per_grid.z);
const int g0 = int(threadgroup_position_in_grid.x +
                   threadgroups_per_grid.x * (threadgroup_position_in_grid.y +
                                              threadgroups_per_grid.y * threadgroup_position_in_grid.z));
auto tile_at = [&](int tile, thread long &bz, thread long &bm, thread long &bn) {
    mm_tile_origin<BM, BN>(tile, gm, gn, bz, bm, bn);
};
const float al = float(alpha), be = float(beta);

#if defined(ALLOY_BACKEND_CUDA)
threadgroup uchar *smem = (threadgroup uchar *)(((ulong)alloy_threadgroup_memory + 1023) & ~1023ul);
const int wg = int(tid / 128);
const int KT = int((K + BK - 1) / BK);
const uint sbase = mm_smem_u32(smem);
// Each thread's chunks: A rows a_r + 32i (i < 4), chunk a_ch; B rows (k) b_r + 8i
// (i < 8), chunk b_cn. The swizzle depends on the row mod 8 only, which is the
// same for all of a thread's rows, so destinations and sources are computed once
// per tile.
const int a_r = int(tid) >> 3, a_ch = int(tid) & 7, b_r = int(tid) >> 5, b_cn = int(tid) & 31;
const uint a_dst = uint(a_r * 128 + ((a_ch ^ (a_r & 7)) << 4));
const uint b_dst = uint((b_cn >> 3) * (BK * 128) + b_r * 128 + (((b_cn & 7) ^ (b_r & 7)) << 4));

// The producer: the next K step to load is step lk of tile lt (lt >= tiles:
// none left). Its per-tile state is set by next_load_tile.
int lt = KT > 0 ? g0 : tiles, lk = 0;
const device TIN *a_src = A, *b_src = B;
uint a_rows = 0;   /* bit i: row a_r + 32i is inside M */
uint b_bytes = 0;  /* bytes of the thread's B chunk inside N */
bool interior = false; /* the whole 128 x 256 tile inside M and N: no row checks */
auto next_load_tile = [&]() {
    long bz, bm, bn;
    tile_at(lt, bz, bm, bn);
    a_src = A + (a_off + bz * sa_b + (bm + a_r) * sa_m + a_ch * 8);
    b_src = B + (b_off + bz * sb_b + b_r * sb_k + bn + b_cn * 8);
    a_rows = 0;
    for (int i = 0; i < 4; i++) a_rows |= (bm + a_r + 32 * i < M) ? (1u << i) : 0u;
    const long b_left = N - (bn + b_cn * 8);
    b_bytes = b_left <= 0 ? 0u : uint(b_left >= 8 ? 16 : b_left * 2);
    interior = bm + BM <= M && bn + BN <= N;
};
if (lt < tiles) next_load_tile();
// Loads the next K step (if any) into stage buf and commits one cp.async
// group either way: every call is one group, so the consumer's wait_group
// counts hold across tiles.
auto load_next = [&](int buf) {
    if (lt < tiles) {
        const long k0 = long(lk) * BK;
        const uint sa = sbase + uint(buf * STAGE), sb = sa + A_STAGE;
        if (interior && k0 + BK <= K) {
            #pragma unroll
            for (int i = 0; i < 4; i++)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(sa + a_dst + uint(i * 32 * 128)),
                             "l"(a_src + (32 * i * sa_m + k0)));
            #pragma unroll
            for (int i = 0; i < 8; i++)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(sb + b_dst + uint(i * 8 * 128)),
                             "l"(b_src + (k0 + 8 * i) * sb_k));
        } else {
            const long a_left = K - (k0 + a_ch * 8);
            const uint a_bytes = a_left <= 0 ? 0u : uint(a_left >= 8 ? 16 : a_left * 2);
            #pragma unroll
            for (int i = 0; i < 4; i++) {
                const uint v = (a_rows >> i) & 1u ? a_bytes : 0u;
                mm_cp16(sa + a_dst + uint(i * 32 * 128), v ? (const device void *)(a_src + (32 * i * sa_m + k0)) : (const device void *)A, v);
            }
            #pragma unroll
            for (int i = 0; i < 8; i++) {
                const uint v = (k0 + b_r + 8 * i < K) ? b_bytes : 0u;
                mm_cp16(sb + b_dst + uint(i * 8 * 128), v ? (const device void *)(b_src + (k0 + 8 * i) * sb_k) : (const device void *)B, v);
            }
        }
        if (++lk == KT) { /* on to this threadgroup's next tile */
            lk = 0;
            lt += P;
            if (lt < tiles) next_load_tile();
        }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
};

// C's column pairs are aligned for one store (columns 2(lane % 4) + 8j from a
// tile's first column, a multiple of 256, are even)
const bool pairs = ((c_off | sc_b | sc_m) & 1) == 0 && ((ulong)C % (2 * sizeof(TOUT))) == 0;
// 16-bit outputs with beta == 0 and rows of C 16-byte aligned: whole tiles go
// through shared memory (stmatrix) and leave in 16-byte stores, two rows of
// 256 bytes per warp instruction, instead of 64 stores of 4 bytes per thread
// that each touch 8 rows (false: the paired stores, for comparison)
constexpr bool STAGE_STORES = sizeof(TOUT) == 2;
const bool staged = STAGE_STORES && beta == 0.0 && ((c_off | sc_b | sc_m) & 7) == 0 && ((ulong)C & 15) == 0;
const int warp = int(tid % 128) / 32, lane = int(tid % 32);
for (int s = 0; s < STAGES - 1; s++) load_next(s);
int g = 0; /* the consumer's K step, counted over all of this threadgroup's tiles */
float d[128];
for (int tile = g0; tile < tiles; tile += P) {
    #pragma unroll
    for (int i = 0; i < 128; i++) d[i] = 0.0f;
    for (int t = 0; t < KT; t++, g++) {
        const int buf = g % STAGES;
        const uint sa = sbase + uint(buf * STAGE + wg * (64 * 128)), sb = sbase + uint(buf * STAGE + A_STAGE);
        // step g's group is done when at most STAGES - 2 newer ones are pending
        asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2) : "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        threadgroup_barrier(mem_flags::mem_threadgroup);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        #pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            const ulong da = mm_desc(sa + uint(kk * 32), 16, 1024);
            const ulong db = mm_desc(sb + uint(kk * 2048), BK * 128, 1024);
            mm_wgmma_n256<TIN>(d, da, db);
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        // step g - 1's products are done (in both warpgroups after the
        // barrier): its stage takes step g + STAGES - 1, maybe of the next tile
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        threadgroup_barrier(mem_flags::mem_threadgroup);
        load_next((g + STAGES - 1) % STAGES);
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    // Epilogue: thread (warp w, lane l) of warpgroup wg holds rows
    // bm + 64wg + 16w + l/4 (+8) and columns bn + 8j + 2(l%4) (+1), j < 32.
    long bz, bm, bn;
    tile_at(tile, bz, bm, bn);
    device TOUT *Cb = C + (c_off + bz * sc_b);
    const long row0 = bm + wg * 64 + warp * 16 + lane / 4, col0 = bn + 2 * (lane % 4);
    const bool whole = bm + BM <= M && bn + BN <= N;
    if constexpr (STAGE_STORES) if (staged && whole) {
        // The stage of the tile's last K step is free (the next tile's loads
        // go to the other three) once both warpgroups' products have read it;
        // it is refilled only after the next step's second barrier. Each
        // warpgroup stages its 64 x 256 half in two passes of 64 x 128 (16 KB,
        // rows of 256 bytes, the 16-byte chunks of a row XOR-swizzled by the
        // row mod 8: stmatrix's eight rows and a quarter warp's reads are
        // conflict-free).
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const uint region = sbase + uint(((g + STAGES - 1) % STAGES) * STAGE + wg * 16384);
        const int srow = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, sblk = lane >> 4;
        device TOUT *crow = Cb + ((bm + wg * 64) * sc_m + bn);
        #pragma unroll
        for (int pass = 0; pass < 2; pass++) {
            #pragma unroll
            for (int jj = 0; jj < 16; jj += 2) { /* column blocks jj, jj + 1 of the pass: 4 matrices */
                const int j = pass * 16 + jj, blk = jj + sblk;
                mm_stmatrix4(region + uint(srow * 256 + (((blk & 8) | ((blk ^ srow) & 7)) << 4)),
                             mm_pack2<TOUT>(al * d[4 * j], al * d[4 * j + 1]),
                             mm_pack2<TOUT>(al * d[4 * j + 2], al * d[4 * j + 3]),
                             mm_pack2<TOUT>(al * d[4 * j + 4], al * d[4 * j + 5]),
                             mm_pack2<TOUT>(al * d[4 * j + 6], al * d[4 * j + 7]));
            }
            mm_bar_warpgroup(wg);
            // thread t of the warpgroup: chunk t % 16 of rows t / 16 + 8i (all
            // eight reads first, then the stores)
            const int c = int(tid % 16), r0 = int(tid % 128) / 16;
            uint v[8][4];
            #pragma unroll
            for (int i = 0; i < 8; i++)
                mm_lds16(region + uint((r0 + 8 * i) * 256 + (((c & 8) | ((c ^ r0) & 7)) << 4)), v[i]);
            #pragma unroll
            for (int i = 0; i < 8; i++) mm_stg16(crow + ((r0 + 8 * i) * sc_m + pass * 128 + c * 8), v[i]);
            if (pass == 0) mm_bar_warpgroup(wg); /* read before the second pass overwrites */
        }
        continue;
    }
    mm_epilogue_direct<TOUT>(Cb, d, row0, col0, M, N, sc_m, pairs && whole, al, be, beta != 0.0);
}
asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#else
// Other targets: the same tiles in the same order, element by element.
for (int tile = g0; tile < tiles; tile += P) {
    long bz, bm, bn;
    tile_at(tile, bz, bm, bn);
    mm_tile_reference<BM, BN, TOUT>(A + (a_off + bz * sa_b), B + (b_off + bz * sb_b), C + (c_off + bz * sc_b), bm,
                                    bn, M, N, K, sa_m, sa_k, sb_k, sb_n, sc_m, al, be, beta != 0.0, int(tid),
                                    int(threads_per_threadgroup.x));
}
#endif
