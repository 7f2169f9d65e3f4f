// matmul_wgmma_pingpong: matmul_wgmma_tma's product (bfloat16 or float16
// operands, 16-bit C, beta == 0, every move on the copy engine through the
// tensor maps ta, tb, tc) with the consumer warpgroups taking turns instead
// of sharing tiles: 128 x 128 output tiles, each computed whole by one
// consumer warpgroup (two m64n128k16 wgmma a k16 step, rows 0-63 and 64-127,
// 128 float accumulators a thread), warpgroup 1 taking a threadgroup's
// even tiles and warpgroup 2 its odd ones. The producer fills the stages in
// tile order, so one consumer's epilogue (stmatrix into its 32 KB of
// staging, box stores that drain on their own) runs while the other's
// products keep the tensor cores busy, and a tile is half as long: the last
// round of a batch idles less (100 x 1024^3: 6400 tiles, 48.5 rounds of 132
// against 24.2 of 128 x 256 tiles). The price: a K step moves 32 KB for
// half the products of matmul_wgmma_tma's 48 KB.
// Tensor maps: ta over A as (K, M, batch), boxes 64 x 128 x 1; tb over B as
// (N, K, batch), boxes 64 x 64 x 1; tc over C as (N, M, batch), boxes
// 64 x 128 x 1; 128-byte swizzle; a broadcast operand (batch stride 0) has a
// batch extent of 1 and is read at batch 0. Zero fill and clipped stores:
// any M, N, K >= 1. Five stages of 32 KB (A's box, B's two), full/empty
// mbarriers (a stage is released by the consumer that read it); the two
// consumers' K loops take turns through named barriers 3 and 4.
// On the CPU the body loops over the same tiles in the same order, element
// by element (the maps unused).
// Launch: any grid of threadgroups of (384, 1, 1) (the op's: (P*384, 1, 1)
// with P = min(tiles, SMs)), threadgroup memory 5 * 32 KB + 64 KB + 2 KB;
// launch constants as matmul_wgmma's.
//! name: alloy_matmul_wgmma_pingpong
//! inputs: A B
//! outputs: C
//! ensure_row_contiguous: false
//! template: TIN=bfloat16
//! template: TOUT=bfloat16
//! header:
#undef ALLOY_CUDA_LAUNCH_BOUNDS /* one threadgroup of 384 threads per SM */
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(384, 1)
#include "src/ops/linalg/kernels/wgmma_tile.h"
#include "src/ops/linalg/kernels/tma_copy.h"
//! body:
constexpr int BM = 128, BN = 128, BK = 64, STAGES = 5;
constexpr int A_STAGE = BM * BK * 2, B_STAGE = BK * BN * 2, STAGE = A_STAGE + B_STAGE;
constexpr int C_PART = BM * BN * 2; /* one consumer's staged tile: two boxes of 64 columns */
const uint tid = thread_index_in_threadgroup;
const int gm = int((M + BM - 1) / BM), gn = int((N + BN - 1) / BN);
const int tiles = int(batch) * gm * gn;
const int P = int(threadgroups_per_grid.x * threadgroups_per_grid.y * threadgroups_per_grid.z);
const int g0 = int(threadgroup_position_in_grid.x +
                   threadgroups_per_grid.x * (threadgroup_position_in_grid.y +
                                              threadgroups_per_grid.y * threadgroup_position_in_grid.z));
const float al = float(alpha);

#if defined(ALLOY_BACKEND_CUDA)
threadgroup uchar *smem = (threadgroup uchar *)(((ulong)alloy_threadgroup_memory + 1023) & ~1023ul);
const uint sbase = mm_smem_u32(smem), cbase = sbase + uint(STAGES * STAGE);
const uint full0 = cbase + uint(2 * C_PART), empty0 = full0 + uint(8 * STAGES); /* mbarriers, 8 bytes each */
const int KT = int((K + BK - 1) / BK);
if (tid == 0) {
    for (int s = 0; s < STAGES; s++) {
        tma_bar_init(full0 + uint(8 * s), 1);  /* the producer's expect_tx */
        tma_bar_init(empty0 + uint(8 * s), 1); /* the consumer that read the stage */
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
threadgroup_barrier(mem_flags::mem_threadgroup);
const int wg = int(tid / 128);
if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (tid == 0) {
        asm volatile("prefetch.tensormap [%0];\n" :: "l"(&ta) : "memory");
        asm volatile("prefetch.tensormap [%0];\n" :: "l"(&tb) : "memory");
        int it = 0; /* K steps issued, over all of this threadgroup's tiles */
        for (int tile = g0; tile < tiles; tile += P) {
            long bz, bm, bn;
            mm_tile_origin<BM, BN>(tile, gm, gn, bz, bm, bn);
            const int za = sa_b == 0 ? 0 : int(bz), zb = sb_b == 0 ? 0 : int(bz);
            for (int t = 0; t < KT; t++, it++) {
                const int s = it % STAGES;
                const uint full = full0 + uint(8 * s), sa = sbase + uint(s * STAGE), sb = sa + A_STAGE;
                tma_bar_wait(empty0 + uint(8 * s), uint(((it / STAGES) & 1) ^ 1));
                tma_bar_expect(full, STAGE);
                tma_load3(sa, ta, t * BK, int(bm), za, full);
                #pragma unroll
                for (int j = 0; j < BN / 64; j++) tma_load3(sb + uint(j * BK * 128), tb, int(bn) + 64 * j, t * BK, zb, full);
            }
        }
    }
} else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int cw = wg - 1, ctid = int(tid % 128), warp = ctid / 32, lane = ctid % 32;
    const uint region = cbase + uint(cw * C_PART);
    // stmatrix: lane 8q + r addresses row r of matrix q (rows 0-7 / 8-15 of
    // the warp's 16 in a half, column blocks j / j + 1)
    const int srow = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, sblk = lane >> 4;
    float d[128]; /* rows 0-63 of the tile in d[0..63], rows 64-127 in d[64..127] */
    // this warpgroup's tiles: the threadgroup's tiles i = cw, cw + 2, ...,
    // whose K steps are i * KT ... in the producer's count
    for (int i = cw; g0 + i * P < tiles; i += 2) {
        const int tile = g0 + i * P, it0 = i * KT;
        #pragma unroll
        for (int e = 0; e < 128; e++) d[e] = 0.0f;
        // the K loops take turns (named barriers 3: warpgroup 2's loop done,
        // 4: warpgroup 1's): a stage's parity wait only tells its last phase
        // from the one before, so the stages must be read in the producer's
        // order; the epilogues still overlap the other warpgroup's loop
        if (i > 0) {
            if (cw == 0) asm volatile("bar.sync 3, 256;\n" ::: "memory");
            else asm volatile("bar.sync 4, 256;\n" ::: "memory");
        }
        for (int t = 0; t < KT; t++) {
            const int it = it0 + t, s = it % STAGES;
            const uint sa = sbase + uint(s * STAGE), sb = sa + A_STAGE;
            tma_bar_wait(full0 + uint(8 * s), uint((it / STAGES) & 1));
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
            #pragma unroll
            for (int kk = 0; kk < BK / 16; kk++) {
                const ulong da0 = mm_desc(sa + uint(kk * 32), 16, 1024);
                const ulong da1 = mm_desc(sa + uint(64 * 128 + kk * 32), 16, 1024);
                const ulong db = mm_desc(sb + uint(kk * 2048), BK * 128, 1024);
                mm_wgmma_n128<TIN>(d, da0, db);
                mm_wgmma_n128<TIN>(d + 64, da1, db);
            }
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            // the previous step's products are done: its stage goes back
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
            if (t > 0 && ctid == 0) tma_bar_arrive(empty0 + uint(8 * ((it - 1) % STAGES)));
        }
        if (g0 + (i + 1) * P < tiles) { /* the other warpgroup has a next tile: its turn */
            if (cw == 0) asm volatile("bar.arrive 4, 256;\n" ::: "memory");
            else asm volatile("bar.arrive 3, 256;\n" ::: "memory");
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        if (KT > 0 && ctid == 0) tma_bar_arrive(empty0 + uint(8 * ((it0 + KT - 1) % STAGES)));
        long bz, bm, bn;
        mm_tile_origin<BM, BN>(tile, gm, gn, bz, bm, bn);
        // the previous tile's stores have read the region
        if (ctid == 0) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
        mm_bar_warpgroup(cw);
        // column block b (8 columns, 16 bytes) of row r: box b / 8 (16 KB,
        // 128 rows of 128 bytes), chunk (b % 8) ^ (r % 8) of its row r
        #pragma unroll
        for (int h = 0; h < 2; h++) {
            const int row = h * 64 + srow;
            #pragma unroll
            for (int j = 0; j < 16; j += 2) {
                const int blk = j + sblk;
                const thread float *q = d + 64 * h + 4 * j;
                mm_stmatrix4(region + uint((blk >> 3) * 16384 + row * 128 + (((blk & 7) ^ (row & 7)) << 4)),
                             mm_pack2<TOUT>(al * q[0], al * q[1]), mm_pack2<TOUT>(al * q[2], al * q[3]),
                             mm_pack2<TOUT>(al * q[4], al * q[5]), mm_pack2<TOUT>(al * q[6], al * q[7]));
            }
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); /* visible to the copy engine */
        mm_bar_warpgroup(cw);
        if (ctid == 0) {
            #pragma unroll
            for (int b = 0; b < BN / 64; b++) tma_store3(tc, int(bn) + 64 * b, int(bm), int(bz), region + uint(b * 16384));
            asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
        }
    }
    if (ctid == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}
#else
// Other targets: the same tiles in the same order, element by element.
for (int tile = g0; tile < tiles; tile += P) {
    long bz, bm, bn;
    mm_tile_origin<BM, BN>(tile, gm, gn, bz, bm, bn);
    mm_tile_reference<BM, BN, TOUT>(A + (a_off + bz * sa_b), B + (b_off + bz * sb_b), C + (c_off + bz * sc_b), bm,
                                    bn, M, N, K, sa_m, sa_k, sb_k, sb_n, sc_m, al, 0.0f, false, int(tid),
                                    int(threads_per_threadgroup.x));
}
#endif
