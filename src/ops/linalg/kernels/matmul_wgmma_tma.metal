// matmul_wgmma_tma: C = alpha * A B for bfloat16 or float16 operands and a
// 16-bit C on Hopper's tensor cores, with the copy engine (TMA) moving every
// tile: the loads of A and B into the 128-byte-swizzled layouts wgmma reads,
// and the stores of C. A is M x K and B is K x N with unit column strides and
// 16-byte aligned rows, C row-major with 16-byte aligned rows, beta == 0
// (with DIRECT, below: any C dtype and beta; the host sends everything else
// to matmul_wgmma, which this kernel otherwise follows: bench/experiments/NOTES.md, "Hopper bf16 GEMM mainloop
// without tensor maps", has the experiment behind both).
// Tensor maps (launch arguments the host encodes per launch, 128-byte
// swizzle): ta over A as (K, M, batch) with boxes of 64 x 128 x 1, tb over B
// as (N, K, batch) with boxes of 64 x 64 x 1, tc over C as (N, M, batch)
// with boxes of 64 x 64 x 1. A broadcast operand (batch stride 0) has a
// batch extent of 1 and is read at batch 0. The copy engine fills what lies
// outside a map with zeros and stores nothing there, so any M, N, K >= 1
// works with no bounds checks in the kernel.
// Design: 384 threads. Warpgroup 0 is the producer: one thread issues the
// copies of each K step (A's 128 x 64 box, B's four 64 x 64 boxes) into one
// of STAGES (3 or 4) stages of 48 KB and arms the stage's `full` mbarrier with the byte
// count; it waits on the stage's `empty` mbarrier before refilling it.
// Warpgroups 1 and 2 are the consumers, 64 x 256 of the 128 x 256 output tile
// each (128 float accumulators a thread): they wait on `full`, run four
// m64n256k16 wgmma a step and release the stage once the next step's wgmma
// are issued and the previous ones done. Registers move from the producer to
// the consumers with setmaxnreg (40 / 232). Persistent grid: threadgroup g
// of P takes tiles g, g + P, ... of batch x tile rows x tile columns (tile
// rows rasterised in groups of 8 per matrix), and the producer runs ahead
// across tiles, so a tile's first loads overlap the previous tile's
// epilogue.
// Epilogue: each consumer scales its accumulators by alpha, rounds them to
// TOUT and writes them with stmatrix into its own 32 KB of threadgroup
// memory in the layout of tc's boxes; one thread issues the four box stores
// and goes on — the stores drain while the next tile's products
// run, and the region is reused only after they have read it. With 4
// stages (a template, the op's 4: a fourth 48 KB stage in flight hides more
// of the loads' latency, 100 x 1024^3 on an H200 about 1.5% faster) only
// 16 KB a consumer remain, so the four boxes go in two passes of two, the
// second waiting for the first's stores to read the region.
// DIRECT (a template; the op's choice for float32/float64 C and beta): the epilogue of
// matmul_wgmma instead, straight from the accumulators (column pairs, or
// element by element at the edges), so any C dtype and beta work; tc must
// still be a valid map over C (the host gives boxes of 128 bytes x 64 rows)
// but is not used.
// OVW (a template, 0/1; the op's 1): the epilogue's
// instructions, during which the tensor cores wait, cut — each tile's first
// k16 product overwrites the accumulators (wgmma's scale-d 0) instead of 128
// zeroing moves, and alpha == 1 skips its 128 multiplies.
// LAG (a template, 0-2; timing only, no gain measured): warpgroup 2 starts LAG K steps after
// warpgroup 1 (named barrier 3), so that their epilogues no longer fall at
// the same time and one's products keep the tensor cores busy during the
// other's; the price is LAG stages of the leader's prefetch. The lag holds
// itself: a warpgroup alone on the tensor cores catches up what it lost
// during its own epilogue. LAG <= STAGES - 1: the leader's first LAG steps
// need no stage released by the follower.
// HALF (a template, 0/1; the op's 1): when the last
// round of tiles is at most half full (rem = tiles % P of them, P
// threadgroups), those tiles are computed as 2 * rem halves of 128 x 128
// (m64n128k16, two of B's boxes a K step), half h of tile t by threadgroup
// 2 (t - (tiles - rem)) + h after its whole tiles, so that the round takes
// about half a tile's time instead of a whole one (100 x 1024^3 on 132 SMs:
// 32 tiles left, 64 halves). The halves' code follows the whole tiles' loop,
// so no shape branch enters the main K loop (one there once cost ptxas's
// wgmma pipelining: bench/experiments/NOTES.md).
// On the CPU the body loops over the same tiles in the same order, element
// by element (the maps unused; the op never picks this kernel off a Hopper
// GPU).
// Launch: any grid of threadgroups of (384, 1, 1) (the op's: (P*384, 1, 1)
// with P = min(tiles, SMs)), threadgroup memory 3 * 48 KB + 64 KB + 2 KB
// (STAGES 4: 4 * 48 KB + 32 KB + 2 KB);
// launch constants as matmul_wgmma's.
//! name: alloy_matmul_wgmma_tma
//! inputs: A B
//! outputs: C
//! ensure_row_contiguous: false
//! template: TIN=bfloat16
//! template: TOUT=bfloat16
//! template: DIRECT=0
//! template: LAG=0
//! template: OVW=0
//! template: HALF=0
//! template: STAGES=3
//! header:
#undef ALLOY_CUDA_LAUNCH_BOUNDS /* one threadgroup of 384 threads per SM */
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(384, 1)
#include "src/ops/linalg/kernels/wgmma_tile.h"
#include "src/ops/linalg/kernels/tma_copy.h"
//! body:
constexpr int BM = 128, BN = 256, BK = 64;
constexpr int A_STAGE = BM * BK * 2, B_STAGE = BK * BN * 2, STAGE = A_STAGE + B_STAGE;
static_assert(STAGES == 3 || STAGES == 4, "STAGES: 3 or 4");
// a consumer's staging: its four 64 x 64 boxes of C at once with 3 stages; two at a time (two passes) with 4,
// which leave room for only 32 KB of staging
constexpr int CB = STAGES == 3 ? 4 : 2, C_PART = CB * 8192;
const uint tid = thread_index_in_threadgroup;
const int gm = int((M + BM - 1) / BM), gn = int((N + BN - 1) / BN);
const int tiles = int(batch) * gm * gn;
const int P = int(threadgroups_per_grid.x * threadgroups_per_grid.y * threadgroups_per_grid.z);
const int g0 = int(threadgroup_position_in_grid.x +
                   threadgroups_per_grid.x * (threadgroup_position_in_grid.y +
                                              threadgroups_per_grid.y * threadgroup_position_in_grid.z));
const float al = float(alpha), be = float(beta);

#if defined(ALLOY_BACKEND_CUDA)
threadgroup uchar *smem = (threadgroup uchar *)(((ulong)alloy_threadgroup_memory + 1023) & ~1023ul);
const uint sbase = mm_smem_u32(smem), cbase = sbase + uint(STAGES * STAGE);
const uint full0 = cbase + uint(2 * C_PART), empty0 = full0 + uint(8 * STAGES); /* mbarriers, 8 bytes each */
const int KT = int((K + BK - 1) / BK);
if (tid == 0) {
    for (int s = 0; s < STAGES; s++) {
        tma_bar_init(full0 + uint(8 * s), 1);  /* the producer's expect_tx */
        tma_bar_init(empty0 + uint(8 * s), 2); /* one arrival per consumer warpgroup */
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
threadgroup_barrier(mem_flags::mem_threadgroup);
// HALF: the last round's tiles in halves of 128 columns (see top); a
// threadgroup's work: its whole tiles g0, g0 + P, ... < whole, then at most
// one half (NB: B's 64-column boxes a K step, 4 for a whole tile)
const int rem = tiles % P;
const bool halves = HALF != 0 && rem > 0 && 2 * rem <= P;
const int whole = halves ? tiles - rem : tiles;
const int nwhole = g0 < whole ? (whole - g0 + P - 1) / P : 0;
const bool has_half = halves && g0 < 2 * rem;
struct whole_tile { static constexpr int nb() { return 4; } };
struct half_tile { static constexpr int nb() { return 2; } };
const int wg = int(tid / 128);
if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (tid == 0) {
        asm volatile("prefetch.tensormap [%0];\n" :: "l"(&ta) : "memory");
        asm volatile("prefetch.tensormap [%0];\n" :: "l"(&tb) : "memory");
        int it = 0; /* K steps issued, over all of this threadgroup's tiles */
        // the K steps of one tile (or half: columns from bn) into the stages
        auto produce = [&](auto shape, int tile, int col) {
            constexpr int NB = decltype(shape)::nb();
            long bz, bm, bn;
            mm_tile_origin<BM, BN>(tile, gm, gn, bz, bm, bn);
            const int za = sa_b == 0 ? 0 : int(bz), zb = sb_b == 0 ? 0 : int(bz);
            for (int t = 0; t < KT; t++, it++) {
                const int s = it % STAGES;
                const uint full = full0 + uint(8 * s), sa = sbase + uint(s * STAGE), sb = sa + A_STAGE;
                tma_bar_wait(empty0 + uint(8 * s), uint(((it / STAGES) & 1) ^ 1));
                tma_bar_expect(full, A_STAGE + NB * BK * 128);
                tma_load3(sa, ta, t * BK, int(bm), za, full);
                #pragma unroll
                for (int j = 0; j < NB; j++)
                    tma_load3(sb + uint(j * BK * 128), tb, int(bn) + col + 64 * j, t * BK, zb, full);
            }
        };
        for (int w = 0; w < nwhole; w++) produce(whole_tile{}, g0 + w * P, 0);
        if (has_half) produce(half_tile{}, whole + g0 / 2, 128 * (g0 % 2));
    }
} else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int cw = wg - 1, ctid = int(tid % 128), warp = ctid / 32, lane = ctid % 32;
    const uint region = cbase + uint(cw * C_PART);
    // stmatrix: lane 8q + r addresses row r of matrix q (rows 0-7 / 8-15 of
    // the warp's 16, column blocks j / j + 1)
    const int srow = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, sblk = lane >> 4;
    int it = 0; /* K steps consumed */
    float d[128]; /* a half tile uses d[0..63] */
    #pragma unroll
    for (int i = 0; i < 128; i++) d[i] = 0.0f;
    static_assert(LAG >= 0 && LAG < STAGES, "LAG: 0 to STAGES - 1");
    if (LAG > 0 && cw == 1 && (nwhole > 0 || has_half)) asm volatile("bar.sync 3, 256;\n" ::: "memory");
    // thread (warp w, lane l): rows bm + 64cw + 16w + l/4 (+8), columns
    // bn + 8j + 2(l%4) (+1), j < 8 NB; column pairs aligned for one store
    const bool pairs = ((c_off | sc_b | sc_m) & 1) == 0 && ((ulong)C % (2 * sizeof(TOUT))) == 0;
    // one tile (or half, columns from col): its K steps into d, then its epilogue; first: the threadgroup's
    // first (LAG's hand-over)
    auto tile_of = [&](auto shape, int tile, int col, bool first) {
        constexpr int NB = decltype(shape)::nb(), NA = NB * 32; /* accumulators a thread */
        if constexpr (OVW == 0) {
            if (!first) {
                #pragma unroll
                for (int i = 0; i < NA; i++) d[i] = 0.0f;
            }
        }
        for (int t = 0; t < KT; t++, it++) {
            const int s = it % STAGES;
            const uint sa = sbase + uint(s * STAGE + cw * (64 * 128)), sb = sbase + uint(s * STAGE + A_STAGE);
            tma_bar_wait(full0 + uint(8 * s), uint((it / STAGES) & 1));
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
            #pragma unroll
            for (int kk = 0; kk < BK / 16; kk++) {
                const ulong da = mm_desc(sa + uint(kk * 32), 16, 1024);
                const ulong db = mm_desc(sb + uint(kk * 2048), BK * 128, 1024);
                if constexpr (NB == 4) mm_wgmma_n256<TIN>(d, da, db, OVW == 0 || t > 0 || kk > 0);
                else mm_wgmma_n128<TIN>(d, da, db, OVW == 0 || t > 0 || kk > 0);
            }
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            // the previous step's products are done: its stage goes back
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
            if (t > 0 && ctid == 0) tma_bar_arrive(empty0 + uint(8 * ((it - 1) % STAGES)));
            /* LAG: warpgroup 1's first tile, after min(LAG, KT) steps, lets warpgroup 2 go */
            if (LAG > 0 && cw == 0 && first && t + 1 == min(LAG, KT)) asm volatile("bar.arrive 3, 256;\n" ::: "memory");
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        if (ctid == 0) tma_bar_arrive(empty0 + uint(8 * ((it - 1) % STAGES))); /* K >= 1: a step at least */
        long bz, bm, bn;
        mm_tile_origin<BM, BN>(tile, gm, gn, bz, bm, bn);
        bn += col;
        if constexpr (DIRECT != 0) {
            mm_epilogue_direct<TOUT, NB * 8>(C + (c_off + bz * sc_b), d, bm + cw * 64 + warp * 16 + lane / 4,
                                             bn + 2 * (lane % 4), M, N, sc_m,
                                             pairs && bm + BM <= M && bn + 64 * NB <= N, al, be, beta != 0.0);
            return;
        }
        if (OVW == 0 || al != 1.0f) {
            #pragma unroll
            for (int i = 0; i < NA; i++) d[i] *= al;
        }
        // passes of CB boxes (one pass with 3 stages): column block b (8 columns, 16 bytes) of row r goes to
        // box b / 8, chunk (b % 8) ^ (r % 8) of the box's 128-byte row r (the 128-byte swizzle)
        #pragma unroll
        for (int p0 = 0; p0 < NB; p0 += CB) {
            // the previous pass's (or tile's) stores have read the region
            if (ctid == 0) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
            mm_bar_warpgroup(cw);
            #pragma unroll
            for (int jj = 0; jj < 8 * CB; jj += 2) { /* a constant trip count: d's indices stay constants */
                const int j = 8 * p0 + jj, blk = j + sblk;
                if (j >= 8 * NB) break;
                mm_stmatrix4(region + uint(((blk >> 3) - p0) * 8192 + srow * 128 + (((blk & 7) ^ (srow & 7)) << 4)),
                             mm_pack2<TOUT>(d[4 * j], d[4 * j + 1]), mm_pack2<TOUT>(d[4 * j + 2], d[4 * j + 3]),
                             mm_pack2<TOUT>(d[4 * j + 4], d[4 * j + 5]), mm_pack2<TOUT>(d[4 * j + 6], d[4 * j + 7]));
            }
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); /* visible to the copy engine */
            mm_bar_warpgroup(cw);
            if (ctid == 0) {
                #pragma unroll
                for (int b = p0; b < (p0 + CB < NB ? p0 + CB : NB); b++)
                    tma_store3(tc, int(bn) + 64 * b, int(bm) + 64 * cw, int(bz), region + uint((b - p0) * 8192));
                asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
            }
        }
    };
    for (int w = 0; w < nwhole; w++) tile_of(whole_tile{}, g0 + w * P, 0, w == 0);
    if (has_half) tile_of(half_tile{}, whole + g0 / 2, 128 * (g0 % 2), nwhole == 0);
    if (ctid == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}
#else
// Other targets: the same tiles in the same order, element by element.
for (int tile = g0; tile < tiles; tile += P) {
    long bz, bm, bn;
    mm_tile_origin<BM, BN>(tile, gm, gn, bz, bm, bn);
    mm_tile_reference<BM, BN, TOUT>(A + (a_off + bz * sa_b), B + (b_off + bz * sb_b), C + (c_off + bz * sc_b), bm,
                                    bn, M, N, K, sa_m, sa_k, sb_k, sb_n, sc_m, al, be, DIRECT != 0 && beta != 0.0,
                                    int(tid), int(threads_per_threadgroup.x));
}
#endif
