/* norm.c — RMSNorm and LayerNorm over the last dimension, optionally per
 * head (alloy/nn.h), forward and backward.
 *
 * Groups of head_dim elements that fit in the registers of at most 8 SIMD
 * groups (ROWS_MAX_NC 16-byte chunks per lane, kept as raw bits: 8192
 * float32, 16384 16-bit elements; one SIMD group up to 1024 float32 / 2048
 * 16-bit elements, 16-bit LayerNorm's backward 1024) take the one-pass
 * kernels: norm_rows (forward) and norm_rows_backward (dx and partial sums of
 * dweight and dbias, in threadgroup memory, in the same pass), then
 * column_sum adds the partial sums in order. Larger groups: one threadgroup
 * per group (norm_forward; norm_backward for dx and each group's statistics,
 * norm_param_partials for the partial sums over blocks of rows, then
 * column_sum).
 *
 * The _stats forms: the forward also writes each group's (mean, rstd) —
 * stats (R, G, 2) in the accumulation dtype, R the rows, G the groups a row —
 * and the backward reads them instead of recomputing them (every kernel's
 * template STATS): the row backward then has no statistics round, one pass
 * and one reduction round a row. */
#include <math.h>
#include <string.h>

#include "ops/env_override.h"
#include "core/error.h"
#include "ops/nn/nn_internal.h"

static const char FWD_FILE[] = "src/ops/nn/kernels/norm_forward.metal";
static const char BWD_FILE[] = "src/ops/nn/kernels/norm_backward.metal";
static const char PART_FILE[] = "src/ops/nn/kernels/norm_param_partials.metal";
static const char ROWS_FILE[] = "src/ops/nn/kernels/norm_rows.metal";
static const char ROWS_BWD_FILE[] = "src/ops/nn/kernels/norm_rows_backward.metal";

/* At most this many threadgroups per launch (a grid-stride loop does the rest). */
static const int64_t MAX_TGS = 65536;

/* The one-pass kernels: at most this many 16-byte chunks of a group per
 * lane (a chunk is 4 registers whatever the dtype); the backward's column
 * sums live in threadgroup memory, at most ROWS_BWD_SMEM bytes a threadgroup
 * where a group fits in it (else up to twice that). */
enum { ROWS_MAX_NC = 8, ROWS_BWD_SMEM = 64 * 1024 };

/* The forward's threadgroups per SM in the grid's sizing: enough for one
 * round up to about 8.6 M rows on an H100 (the grid stays under 2^31
 * threads; more rows loop). */
enum { ROWS_ONE_ROUND = 8192 };
/* ... and with its next row loaded ahead (fwd_pf) */
enum { FWD_PF_TGS = 16 };

/* The backward's threadgroups per SM (its launch bound MINB): 2, at most
 * 128 registers a thread — except the backward from saved statistics over
 * float32 rows that one SIMD group holds in 8 chunks a lane (rows of 1024):
 * 1 (H200, 8 x 8192 x 1024, two rounds: RMSNorm 90.6-90.7 -> 91.8-91.9% of
 * copy, LayerNorm 87.5 -> 91.9-92.0; 16-bit rows lost 2-7 points with 1);
 * ALLOY_NN_NORM_BWD_MINB=k for timing only. */
static int64_t bwd_minb(alloy_dtype dt, int64_t nc, int64_t wg, int stats) {
    return alloy_ops_env_int("ALLOY_NN_NORM_BWD_MINB", 1, 8, stats && dt == ALLOY_FLOAT32 && nc == 8 && wg == 1 ? 1 : 2);
}

/* Threadgroups of 256 threads per SM in the grid. The forward: one round, a
 * threadgroup per 8 / wg rows, as many as the rows ask for (H100, 64 M
 * elements: 97-99% of copy against 86-94% with the grid sized to the SMs and
 * each SIMD group looping over its rows, with or without loading the next
 * row ahead) — except small groups, whose rows are looped over with the next
 * one loaded ahead (pf: FWD_PF_TGS an SM); ALLOY_NN_NORM_TGS=k sizes it to k
 * an SM with the rows looped over, for timing only. The backward: as many as
 * are resident (bwd_minb), and its threadgroup memory must fit too (227 KB an
 * SM on Hopper). */
static int64_t rows_per_sm(int fwd, int pf, int64_t smem, int64_t minb) {
    int64_t k = fwd ? alloy_ops_env_int("ALLOY_NN_NORM_TGS", 1, ROWS_ONE_ROUND, pf ? FWD_PF_TGS : ROWS_ONE_ROUND)
                    : minb;
    if (smem > 0 && (227 * 1024) / (smem + 1024) < k) k = (227 * 1024) / (smem + 1024);
    return k > 0 ? k : 1;
}

/* The backward's variant (norm_rows_backward's templates), each overridable
 * for timing by ALLOY_NN_NORM_BWD_<NAME>=k (FULL only to 0: its checks are
 * what keeps a group that the chunks do not tile in bounds):
 *   PD    rows loaded ahead: one with up to 2 chunks a lane, and with 3-4 for
 *         float32, else none (registers; bwd_pd). On an H100
 *         two rows ahead were slower (per-head bfloat16 LayerNorm 76.7% of copy
 *         against 85.0%), and so was one for float16 with 4 chunks (81.6%
 *         against 89.5%, VSUM 0). On an H200 one row ahead with VSUM took
 *         16-bit LayerNorm's rows of 1024 from 73 to 82% (bfloat16) and 71 to
 *         78% (float16), and RMSNorm's from 89 to 79-80%: LayerNorm takes it.
 *   REGS  the column sums in registers where a lane has at most 16
 *         elements and they and the row's x and dy chunks take at most 48
 *         registers, else in threadgroup memory. For LayerNorm since the
 *         vector column sums: on an H200 (same call, two rounds) its 16-bit
 *         heads of 512 went from 84.8 to 93.1-93.5% of copy (float16) and
 *         85.8 to 87.5% (bfloat16); on an H100, before those sums, registers
 *         had been slower there (84.9% against 88.4%, bfloat16). Rows of 1024
 *         (32 elements a lane) stay in threadgroup memory: forced into
 *         registers they spill (bfloat16 26%, float16 46%).
 *   SPLIT 1: the deviations' squares in a pass of their own, reduced before
 *         the g sums (the order of the kernel before), 0: in the g sums' pass.
 *   VSUM  1: that pass's sums reduced as one vector (their shuffles
 *         interleaved), 0: one simd_sum after another. 1 for 16-bit LayerNorm
 *         (its pass has two sums and the squares): on an H200 its per-head
 *         rows went from 72 to 77% of copy (bfloat16) and 69 to 73% (float16);
 *         float32 LayerNorm's rows moved by 1% (not taken). */
static int bwd_pd(alloy_dtype dt, int rms, int stats, int64_t nc) {
    /* 16-bit LayerNorm's rows of 3-4 chunks a lane load none ahead since its statistics come from saved values
     * or from shifted sums (H200, rows of 1024, two rounds: from saved statistics bfloat16 84.2-84.9 -> 91.0-91.4%
     * of copy, float16 88.1 -> 91.8, one row ahead spilled; recomputed with SHIFT, bfloat16 89.4-89.5 ->
     * 90.8-90.9, float16 88.7-88.9 either way, where one row ahead spilled 20 bytes) */
    /* float32 LayerNorm recomputing its statistics over 3-4 chunks a lane (heads of 512) loads none ahead
     * either (H200, 2 x 8192 x 4096, two rounds: 94.4-94.6% of copy against 88.6; from saved statistics it
     * keeps one, 92.9-93.0 against 92.0-92.1 without) */
    const int ahead = nc <= 2 || (nc <= 4 && alloy_dtype_size(dt) == 4 && (rms || stats));
    return (int)alloy_ops_env_int("ALLOY_NN_NORM_BWD_PD", 0, 2, ahead);
}

/* ONEPASS: LayerNorm's statistics in one reduction round (norm_rows_backward:
 * the lanes' counts, means, squared deviations and g sums combined pairwise)
 * instead of the mean's round and then the pass's. On for float32 groups of
 * 1024 and more: on an H200 (same call) float32 rows of 1024 went from 84.6
 * to 91.2% of copy, while heads of 512 fell from 85.7 to 74.8% and 16-bit
 * groups from about 80 to 55% (512: 40%). ALLOY_NN_NORM_BWD_ONEPASS=0 or 1
 * overrides. */
static int bwd_onepass(alloy_dtype dt, int rms, int64_t DH) {
    const int dflt = dt == ALLOY_FLOAT32 && DH >= 1024;
    return !rms && (int)alloy_ops_env_int("ALLOY_NN_NORM_BWD_ONEPASS", 0, 1, dflt);
}

/* LayerNorm's statistics in one round from sums shifted by the row's first
 * element (norm_rows_backward.metal's SHIFT): 16-bit data with groups up to
 * 4096 only, where its cancellation stays below the result's rounding. On
 * an H200 (three rounds, two calls) float16's rows of 1024 gained 0.6-1.0
 * points of copy and its heads of 512 2.7-2.9; bfloat16 heads gained 0.7-2.2
 * while its rows of 1024 lost 0.2-1.2 with one row loaded ahead and gain
 * 1.3-1.5 with none (bwd_pd; same call, two rounds). ALLOY_NN_NORM_BWD_SHIFT=0|1
 * overrides. */
static int bwd_shift(alloy_dtype dt, int rms, int64_t DH) {
    return !rms && alloy_dtype_size(dt) == 2 && DH <= 4096 &&
           (int)alloy_ops_env_int("ALLOY_NN_NORM_BWD_SHIFT", 0, 1, 1);
}

static int bwd_vsum(alloy_dtype dt, int rms) {
    return (int)alloy_ops_env_int("ALLOY_NN_NORM_BWD_VSUM", 0, 1, !rms && alloy_dtype_size(dt) == 2);
}

/* OPQ: 16-bit widening as opaque instructions at each use (chunk.h): ptxas
 * for sm_90 then keeps the packed words live, and per-head bfloat16
 * LayerNorm's backward with its sums in registers (REGS) goes from 52 bytes
 * of spills at 128 registers to none. On for bfloat16 (H200, two rounds in
 * one call: per-head LayerNorm 86.4 -> 92.9% of copy, rows of 1024 87.2 ->
 * 88.0%, RMSNorm 91.5 -> 92.1%), and for float16 LayerNorm since it loads no
 * row ahead (bwd_pd; H200, two rounds in one call: rows of 1024 87.2-87.5 ->
 * 90.9-91.0%, from saved statistics 92.1-92.2 -> 92.5-92.9, heads of 512
 * 96.4 either way; float16 RMSNorm had been within the noise, off).
 * ALLOY_NN_NORM_BWD_OPQ=0|1 overrides. */
static int bwd_opq(alloy_dtype dt, int rms, int stats) {
    /* not for RMSNorm from saved statistics (H200, bfloat16 rows of 1024, two rounds: 87.1-87.3% of copy with
     * it, 92.1 without) */
    const int dflt = dt == ALLOY_BFLOAT16 ? !(rms && stats) : !rms;
    return alloy_dtype_size(dt) == 2 && (int)alloy_ops_env_int("ALLOY_NN_NORM_BWD_OPQ", 0, 1, dflt);
}

static int bwd_regs(alloy_dtype dt, int rms, int64_t nc) {
    const int64_t ne = nc * (16 / (int64_t)alloy_dtype_size(dt));
    const int64_t words = (rms ? 1 : 2) * ne * (int64_t)alloy_dtype_size(alloy_nn_accum(dt)) / 4;
    return (int)alloy_ops_env_int("ALLOY_NN_NORM_BWD_REGS", 0, 1, ne <= 16 && 8 * nc + words <= 48);
}

/* Whether the forward loads each row's next row ahead (norm_rows' PF), its
 * grid then FWD_PF_TGS threadgroups an SM with the rows looped over: for
 * groups of at most 1 KB held by one SIMD group (16-bit heads of 512 and
 * smaller ones), whose one-round grid keeps too few bytes in flight (H200,
 * 16-bit LayerNorm heads of 512: 82 -> 93% of copy; 8 threadgroups an SM
 * 92%, 4 86%); off for larger groups, whose one-round grid reached 97-99%
 * (H100). ALLOY_NN_NORM_PF=0 or 1 overrides it, for timing; never for
 * bfloat16 with 8 chunks a lane, whose unpacked values then spill. */
static int fwd_pf(alloy_dtype dt, int64_t DH, int64_t nc, int64_t wg) {
    const int small = wg == 1 && DH * (int64_t)alloy_dtype_size(dt) <= 1024;
    return alloy_ops_env_int("ALLOY_NN_NORM_PF", 0, 1, small) && !(dt == ALLOY_BFLOAT16 && nc >= 8);
}

/* The forward's SIMD groups a threadgroup: for groups one SIMD group holds
 * on the one-round grid, 1 for float32 groups over 2 KiB and 2 for smaller
 * ones and for 16-bit data (H200, 8 x 8192 x 1024, two rounds alternating,
 * % of copy: RMSNorm / LayerNorm float32 96.2 / 95.7 with threadgroups of 8
 * groups, 98.0 / 97.4 with 1; bfloat16 96.9 / 96.3 -> 97.8 / 96.7 with 2,
 * float16 95.8 / 94.6 -> 96.7 / 96.7; torch.compile's LayerNorm forward runs
 * blocks of one warp, a row each). Float32 heads of 512 take 2 so that the
 * grid stays under the rate at which the SMs start threadgroups of an
 * overlapping launch (H200, 2 x 8192 x 4096, two rounds: RMSNorm / LayerNorm
 * 100.4-100.5 / 100.2-100.3% of copy against 80.6-80.7 / 80.4-80.5 with 1;
 * rows of 1024 keep 1: 99.8-99.9 against 98.3 with 2). Else 8 (threadgroups
 * of 256 threads, 8 / wg groups each; float64 too).
 * ALLOY_NN_NORM_FWD_SG=1, 2, 4 or 8 (at least wg) overrides, for timing. */
static int64_t fwd_sg(alloy_dtype dt, int64_t dh, int64_t wg, int pf) {
    const size_t size = alloy_dtype_size(dt);
    const int64_t fit = wg == 1 && !pf && size <= 4 ? (size == 4 ? (dh * 4 <= 2048 ? 2 : 1) : 2) : 8;
    int64_t sg = alloy_ops_env_int("ALLOY_NN_NORM_FWD_SG", 1, 8, fit);
    if (sg != 1 && sg != 2 && sg != 4) sg = 8;
    return sg < wg ? wg : sg;
}

/* The SMs the grids are sized for: the device's, or an H100's 132 where it
 * has none (the CPU). */
static int64_t sm_count(alloy_device *dev) {
    const int n = alloy_device_multiprocessor_count(dev);
    return n > 0 ? n : 132;
}

/* The sizes every norm call shares. */
typedef struct norm_dims {
    int64_t D, DH, G, R, groups;
    /* the one-pass kernels: chunks per lane (0: not used), SIMD groups per group, threadgroups per head,
     * the backward's threadgroup memory in bytes */
    int64_t nc, wg, pt, smem;
    int pf; /* the forward loads each row's next row ahead (fwd_pf) */
    int64_t sg; /* SIMD groups a threadgroup (fwd_sg; the backward 8) */
} norm_dims;

static alloy_status check_common(const char *fn, int rms, alloy_array *x, alloy_array *weight, alloy_array *bias,
                                 alloy_array *dy, int64_t head_dim, double eps, alloy_stream *stream, int stats,
                                 norm_dims *d) {
    alloy_status st = alloy_nn_check_x(fn, x, 1, stream);
    if (st != ALLOY_OK) return st;
    alloy_device *dev = alloy_array_device(x);
    const alloy_dtype dt = alloy_array_dtype(x);
    const int nd = alloy_array_ndim(x);
    const int64_t D = alloy_array_shape(x)[nd - 1];
    if (!(eps >= 0) || !isfinite(eps))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: eps is %g; it must be finite and >= 0", fn, eps);
    if (head_dim < 0 || (head_dim > 0 && D % head_dim != 0))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: head_dim is %lld; it must be 0 (the whole last dimension) or divide x's last "
                           "dimension %lld",
                           fn, (long long)head_dim, (long long)D);
    if (D > INT32_MAX)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: x's last dimension %lld is too large", fn, (long long)D);
    const int64_t s_w[1] = {D};
    if ((st = alloy_nn_check(fn, "weight", weight, dev, dt, 1, s_w)) != ALLOY_OK) return st;
    if (bias && (st = alloy_nn_check(fn, "bias", bias, dev, dt, 1, s_w)) != ALLOY_OK) return st;
    if (dy && (st = alloy_nn_check(fn, "dy", dy, dev, dt, nd, alloy_array_shape(x))) != ALLOY_OK) return st;
    d->D = D;
    d->DH = head_dim > 0 ? head_dim : D;
    d->G = d->DH > 0 ? D / d->DH : 0;
    d->R = D > 0 ? alloy_array_size(x) / D : 0;
    d->groups = d->R * d->G;
    /* chunks per lane and SIMD groups per group, powers of two (few specialisations): the fewest SIMD
     * groups that hold the group with at most ROWS_MAX_NC chunks per lane (no barrier in the row loop
     * with one), the backward's sums (NS of them, NE = nc * V elements a lane, float32/float64) within
     * ROWS_BWD_SMEM where they can be, else within twice that */
    const int64_t V = 16 / (int64_t)alloy_dtype_size(dt), need = (d->DH + 32 * V - 1) / (32 * V);
    const int64_t ns = rms ? 1 : 2, acc_size = (int64_t)alloy_dtype_size(alloy_nn_accum(dt));
    d->nc = 0;
    d->wg = 1;
    d->smem = 0;
    /* ALLOY_NN_NORM_BWD_MAXNC=k: the backward's chunks per lane at most k (more SIMD groups a group), for
     * timing only */
    const int64_t max_nc = dy ? alloy_ops_env_int("ALLOY_NN_NORM_BWD_MAXNC", 1, ROWS_MAX_NC, ROWS_MAX_NC) : ROWS_MAX_NC;
    for (int pass = 0; pass < 2 && !d->nc; pass++) {
        const int64_t cap = (int64_t)ROWS_BWD_SMEM << pass;
        for (int64_t wg = 1; wg <= 8 && !d->nc; wg *= 2)
            for (int64_t nc = 1; nc <= max_nc; nc *= 2)
                if (nc * wg >= need && (!dy || 256 * ns * nc * V * acc_size <= cap)) {
                    d->nc = nc;
                    d->wg = wg;
                    break;
                }
    }
    if (dy && d->nc) d->smem = 256 * ns * d->nc * V * acc_size;
    /* threadgroups per head: as many in all as rows_per_sm sizes the grid for (the forward: one round, or
     * FWD_PF_TGS an SM for small groups; the backward: what the SMs hold at once), and as many rounds of
     * 8 / wg rows each (no SIMD group idles in a last round while others work) */
    d->pf = !dy && d->nc && fwd_pf(dt, d->DH, d->nc, d->wg);
    d->sg = !dy && d->nc ? fwd_sg(dt, d->DH, d->wg, d->pf) : 8;
    /* (rows_per_sm counts threadgroups of 256 threads) */
    const int64_t tgs = sm_count(dev) * rows_per_sm(!dy, d->pf, d->smem, bwd_minb(dt, d->nc, d->wg, stats)) * (8 / d->sg);
    const int64_t rw = d->sg / d->wg, per_head = tgs / d->G > 1 ? tgs / d->G : 1, blocks = (d->R + rw - 1) / rw;
    const int64_t rounds = (blocks + per_head - 1) / per_head;
    d->pt = rounds > 0 ? (blocks + rounds - 1) / rounds : 0;
    if (d->G > (INT32_MAX / (32 * d->sg)) / (d->pt > 0 ? d->pt : 1)) d->nc = 0; /* the grid would not fit */
    return ALLOY_OK;
}

/* The launch of norm_rows / norm_rows_backward over the arrays `ops` (for
 * the 16-byte check). */
static alloy_status rows_launch(alloy_launch *l, const norm_dims *d, int fwd, int rms, double eps, alloy_dtype dt,
                                int stats, int n_ops, alloy_array *const *ops) {
    const int64_t V = 16 / (int64_t)alloy_dtype_size(dt);
    const int vec = d->DH % V == 0 && alloy_ops_aligned16(n_ops, ops);
    alloy_status st = alloy_launch_set_grid(l, (uint32_t)(d->pt * d->G * 32 * d->sg), 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, (uint32_t)(32 * d->sg), 1, 1);
    if (st == ALLOY_OK && fwd) st = alloy_launch_add_template_int(l, "SG", (int)d->sg);
    if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "NC", (int)d->nc);
    if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "WG", (int)d->wg);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "R", ALLOY_INT64, d->R);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "PT", ALLOY_INT64, d->pt);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "DH", ALLOY_INT32, d->DH);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "G", ALLOY_INT32, d->G);
    /* the forward reads rms as a constant, the backward as the template RMS */
    if (st == ALLOY_OK && fwd) st = alloy_launch_set_constant_int(l, "rms", ALLOY_INT32, rms);
    if (st == ALLOY_OK && !fwd) st = alloy_launch_add_template_int(l, "RMS", rms);
    if (st == ALLOY_OK && !fwd) st = alloy_launch_set_threadgroup_memory(l, (size_t)d->smem);
    if (st == ALLOY_OK && !fwd) st = alloy_launch_add_template_int(l, "MINB", (int)bwd_minb(dt, d->nc, d->wg, stats));
    if (st == ALLOY_OK && !fwd) st = alloy_launch_add_template_int(l, "OPQ", bwd_opq(dt, rms, stats));
    if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "VEC", vec);
    /* FULL: the lanes' chunks tile the group exactly, so no element is checked. Backward: always; forward:
     * LayerNorm of 16-bit data (H200, 8 x 8192 x 1024, same call, two rounds, % of copy: bf16 / f16 96.2-96.3
     * / 95.0 against 95.1 / 93.5; RMSNorm's 16-bit 96.6-96.7 / 95.7 against 96.9 / 95.9 and float32's 91.0-91.6
     * against 95.7-96.3 lost with it). ALLOY_NN_NORM_FWD_FULL=0|1, ALLOY_NN_NORM_BWD_FULL=0 for timing */
    const int full_default = !fwd || (!rms && alloy_dtype_size(dt) == 2);
    if (st == ALLOY_OK)
        st = alloy_launch_add_template_int(
            l, "FULL",
            vec && d->nc * 32 * d->wg * V == d->DH &&
                alloy_ops_env_int(fwd ? "ALLOY_NN_NORM_FWD_FULL" : "ALLOY_NN_NORM_BWD_FULL", 0, 1, full_default));
    if (st == ALLOY_OK && !fwd) st = alloy_launch_add_template_int(l, "PD", bwd_pd(dt, rms, stats, d->nc));
    if (st == ALLOY_OK && !fwd) st = alloy_launch_add_template_int(l, "REGS", bwd_regs(dt, rms, d->nc));
    if (st == ALLOY_OK && !fwd)
        st = alloy_launch_add_template_int(l, "SPLIT", (int)alloy_ops_env_int("ALLOY_NN_NORM_BWD_SPLIT", 0, 1, 0));
    if (st == ALLOY_OK && !fwd)
        st = alloy_launch_add_template_int(l, "VSUM", bwd_vsum(dt, rms));
    if (st == ALLOY_OK && !fwd) st = alloy_launch_add_template_int(l, "ONEPASS", bwd_onepass(dt, rms, d->DH));
    if (st == ALLOY_OK && !fwd) st = alloy_launch_add_template_int(l, "SHIFT", bwd_shift(dt, rms, d->DH));
    if (st == ALLOY_OK && fwd) st = alloy_launch_add_template_int(l, "PF", d->pf);
    if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "STATS", stats);
    if (st == ALLOY_OK) st = alloy_launch_set_constant(l, "eps", alloy_nn_accum(dt), eps);
    return st;
}

/* The launch shape of one threadgroup per group and the constants the
 * forward and backward kernels share. */
static alloy_status group_launch(alloy_launch *l, const norm_dims *d, int rms, double eps, alloy_dtype dt,
                                 int stats) {
    const int64_t tgs = d->groups < MAX_TGS ? d->groups : MAX_TGS;
    alloy_status st = alloy_launch_set_grid(l, (uint32_t)(tgs * 128), 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, 128, 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "groups", ALLOY_INT64, d->groups);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "tgs", ALLOY_INT64, tgs);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "DH", ALLOY_INT32, d->DH);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "G", ALLOY_INT32, d->G);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "rms", ALLOY_INT32, rms);
    if (st == ALLOY_OK) st = alloy_launch_set_constant(l, "eps", alloy_nn_accum(dt), eps);
    if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "STATS", stats);
    return st;
}

/* The statistics' shape, (R, G, 2). */
static void stats_shape(const norm_dims *d, int64_t shape[3]) {
    shape[0] = d->R;
    shape[1] = d->G;
    shape[2] = 2;
}

/* A caller's saved statistics: the accumulation dtype, (R, G, 2), x's device. */
static alloy_status check_saved(const char *fn, const norm_dims *d, alloy_array *x, alloy_array *saved) {
    if (!saved) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: stats is NULL", fn);
    const alloy_dtype at = alloy_nn_accum(alloy_array_dtype(x));
    if (alloy_array_dtype(saved) != at)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: stats is %s but must be %s (the statistics' dtype for %s x)",
                           fn, alloy_dtype_name(alloy_array_dtype(saved)), alloy_dtype_name(at),
                           alloy_dtype_name(alloy_array_dtype(x)));
    int64_t shape[3];
    stats_shape(d, shape);
    return alloy_nn_check(fn, "stats", saved, alloy_array_device(x), at, 3, shape);
}

static alloy_status norm_forward(const char *fn, int rms, alloy_array *x, alloy_array *weight, alloy_array *bias,
                                 int64_t head_dim, double eps, alloy_stream *stream, alloy_array **y,
                                 int want_stats, alloy_array **stats) {
    norm_dims d;
    memset(&d, 0, sizeof d);
    alloy_status st = check_common(fn, rms, x, weight, bias, NULL, head_dim, eps, stream, 0, &d);
    if (st != ALLOY_OK) return st;
    alloy_device *dev = alloy_array_device(x);
    const alloy_dtype dt = alloy_array_dtype(x);
    alloy_array *o = NULL, *os = NULL;
    int created = 0, created_s = 0;
    st = alloy_nn_prepare_out(fn, "y", y, dev, dt, alloy_array_ndim(x), alloy_array_shape(x), &o, &created);
    if (st != ALLOY_OK) return st;
    if (want_stats) {
        int64_t s_stats[3];
        stats_shape(&d, s_stats);
        st = alloy_nn_prepare_out(fn, "stats", stats, dev, alloy_nn_accum(dt), 3, s_stats, &os, &created_s);
        if (st != ALLOY_OK) {
            if (created) alloy_array_free(o);
            return st;
        }
    }
    if (d.groups > 0) {
        alloy_launch *l = NULL;
        alloy_array *ops[4] = {x, weight, bias, o};
        st = alloy_launch_new(&l);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, o);
        /* without statistics the kernel's stats slot is y, never written */
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, os ? os : o);
        if (st == ALLOY_OK)
            st = d.nc ? rows_launch(l, &d, 1, rms, eps, dt, os != NULL, 4, ops)
                      : group_launch(l, &d, rms, eps, dt, os != NULL);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "has_b", ALLOY_INT32, bias != NULL);
        alloy_array *ins[3] = {x, weight, bias ? bias : weight}; /* without bias, weight stands in unread */
        if (st == ALLOY_OK) st = alloy_nn_apply(d.nc ? ROWS_FILE : FWD_FILE, l, dt, 3, ins, 2, stream);
        alloy_launch_free(l);
    }
    if (st != ALLOY_OK) {
        if (created) alloy_array_free(o);
        if (created_s) alloy_array_free(os);
        return st;
    }
    if (created) *y = o;
    if (created_s) *stats = os;
    return ALLOY_OK;
}

alloy_status alloy_nn_rms_norm(alloy_array *x, alloy_array *weight, int64_t head_dim, double eps,
                               alloy_stream *stream, alloy_array **y) {
    return norm_forward("alloy_nn_rms_norm", 1, x, weight, NULL, head_dim, eps, stream, y, 0, NULL);
}

alloy_status alloy_nn_layer_norm(alloy_array *x, alloy_array *weight, alloy_array *bias, int64_t head_dim,
                                 double eps, alloy_stream *stream, alloy_array **y) {
    return norm_forward("alloy_nn_layer_norm", 0, x, weight, bias, head_dim, eps, stream, y, 0, NULL);
}

alloy_status alloy_nn_rms_norm_stats(alloy_array *x, alloy_array *weight, int64_t head_dim, double eps,
                                     alloy_stream *stream, alloy_array **y, alloy_array **stats) {
    return norm_forward("alloy_nn_rms_norm_stats", 1, x, weight, NULL, head_dim, eps, stream, y, 1, stats);
}

alloy_status alloy_nn_layer_norm_stats(alloy_array *x, alloy_array *weight, alloy_array *bias, int64_t head_dim,
                                       double eps, alloy_stream *stream, alloy_array **y, alloy_array **stats) {
    return norm_forward("alloy_nn_layer_norm_stats", 0, x, weight, bias, head_dim, eps, stream, y, 1, stats);
}

/* dweight and dbias from x, dy and the groups' statistics: partial sums over
 * blocks of rows, then the blocks in order. A slot not asked for is written
 * into scratch. */
static alloy_status param_grads(const norm_dims *d, int rms, alloy_array *x, alloy_array *dy, alloy_array *stats,
                                alloy_array *ow, alloy_array *ob, alloy_stream *stream) {
    alloy_device *dev = alloy_array_device(x);
    const alloy_dtype dt = alloy_array_dtype(x), at = alloy_nn_accum(dt);
    const int64_t RB = alloy_nn_rows_per_part(d->R), P = (d->R + RB - 1) / RB;
    const int64_t s_part[2] = {P > 0 ? P : 1, 2 * d->D}, s_w[1] = {d->D};
    alloy_array *part = NULL, *sw = NULL, *sb = NULL;
    alloy_status st = alloy_array_new(dev, at, 2, s_part, &part);
    if (st == ALLOY_OK && !ow) st = alloy_array_new(dev, dt, 1, s_w, &sw);
    if (st == ALLOY_OK && !ob) st = alloy_array_new(dev, dt, 1, s_w, &sb);
    alloy_launch *l = NULL;
    if (st == ALLOY_OK) st = alloy_launch_new(&l);
    if (st == ALLOY_OK && P > 0) {
        st = alloy_launch_add_output_array(l, part);
        if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)((d->D + 127) / 128 * 128), (uint32_t)P, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, 128, 1, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "R", ALLOY_INT64, d->R);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "RB", ALLOY_INT64, RB);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "P", ALLOY_INT64, P);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "D", ALLOY_INT32, d->D);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "DH", ALLOY_INT32, d->DH);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "rms", ALLOY_INT32, rms);
        alloy_array *ins[3] = {x, dy, stats};
        if (st == ALLOY_OK) st = alloy_nn_apply(PART_FILE, l, dt, 3, ins, 1, stream);
        if (st == ALLOY_OK) st = alloy_launch_reset(l);
    }
    if (st == ALLOY_OK) st = alloy_nn_column_sum(part, P, 2 * d->D, d->D, ow ? ow : sw, ob ? ob : sb, dt, stream);
    alloy_launch_free(l);
    alloy_array_free(part);
    alloy_array_free(sw);
    alloy_array_free(sb);
    return st;
}

/* The one-pass backward: norm_rows_backward writes dx and the partial sums
 * (PT * PR, 2D) of dweight and dbias, column_sum adds them up (into scratch for a
 * slot not asked for; not at all when neither is). */
static alloy_status rows_backward(const norm_dims *d, int rms, double eps, alloy_array *x, alloy_array *weight,
                                  alloy_array *dy, alloy_array *saved, alloy_array *ox, alloy_array *ow,
                                  alloy_array *ob, alloy_stream *stream) {
    alloy_device *dev = alloy_array_device(x);
    const alloy_dtype dt = alloy_array_dtype(x);
    const int64_t P = d->pt, s_part[2] = {P > 0 ? P : 1, 2 * d->D}, s_w[1] = {d->D};
    alloy_array *part = NULL, *sw = NULL, *sb = NULL;
    alloy_status st = alloy_array_new(dev, alloy_nn_accum(dt), 2, s_part, &part);
    if (st == ALLOY_OK && d->groups > 0) {
        alloy_launch *l = NULL;
        alloy_array *ops[4] = {x, weight, dy, ox};
        st = alloy_launch_new(&l);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, ox);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, part);
        if (st == ALLOY_OK) st = rows_launch(l, d, 0, rms, eps, dt, saved != NULL, 4, ops);
        alloy_array *ins[4] = {x, weight, dy, saved ? saved : x}; /* without saved statistics x stands in unread */
        if (st == ALLOY_OK) st = alloy_nn_apply(ROWS_BWD_FILE, l, dt, 4, ins, 2, stream);
        alloy_launch_free(l);
    }
    if (st == ALLOY_OK && (ow || ob)) {
        if (!ow) st = alloy_array_new(dev, dt, 1, s_w, &sw);
        if (st == ALLOY_OK && !ob) st = alloy_array_new(dev, dt, 1, s_w, &sb);
        if (st == ALLOY_OK) st = alloy_nn_column_sum(part, P, 2 * d->D, d->D, ow ? ow : sw, ob ? ob : sb, dt, stream);
    }
    alloy_array_free(part);
    alloy_array_free(sw);
    alloy_array_free(sb);
    return st;
}

static alloy_status norm_backward(const char *fn, int rms, alloy_array *x, alloy_array *weight, alloy_array *dy,
                                  int with_saved, alloy_array *saved, int64_t head_dim, double eps,
                                  alloy_stream *stream, alloy_array **dx, alloy_array **dweight,
                                  alloy_array **dbias) {
    norm_dims d;
    memset(&d, 0, sizeof d);
    alloy_status st = check_common(fn, rms, x, weight, NULL, NULL, head_dim, eps, stream, 0, &d);
    if (st == ALLOY_OK && !dy) st = alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: dy is NULL", fn);
    if (st == ALLOY_OK) st = check_common(fn, rms, x, weight, NULL, dy, head_dim, eps, stream, with_saved, &d);
    if (st == ALLOY_OK && with_saved) st = check_saved(fn, &d, x, saved);
    if (st != ALLOY_OK) return st;
    alloy_device *dev = alloy_array_device(x);
    const alloy_dtype dt = alloy_array_dtype(x);
    const int64_t s_w[1] = {d.D};
    alloy_array *ox = NULL, *ow = NULL, *ob = NULL, *stats = NULL;
    int cx = 0, cw = 0, cb = 0;
    st = alloy_nn_prepare_out(fn, "dx", dx, dev, dt, alloy_array_ndim(x), alloy_array_shape(x), &ox, &cx);
    if (st == ALLOY_OK && dweight) st = alloy_nn_prepare_out(fn, "dweight", dweight, dev, dt, 1, s_w, &ow, &cw);
    if (st == ALLOY_OK && dbias) st = alloy_nn_prepare_out(fn, "dbias", dbias, dev, dt, 1, s_w, &ob, &cb);
    if (st == ALLOY_OK && d.nc && d.D > 0) {
        st = rows_backward(&d, rms, eps, x, weight, dy, saved, ox, ow, ob, stream);
    } else if (st == ALLOY_OK && d.D > 0 && !saved) {
        const int64_t s_stats[1] = {2 * (d.groups > 0 ? d.groups : 1)};
        st = alloy_array_new(dev, alloy_nn_accum(dt), 1, s_stats, &stats);
    }
    if (st == ALLOY_OK && !d.nc && d.groups > 0) {
        alloy_launch *l = NULL;
        st = alloy_launch_new(&l);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, ox);
        /* the saved statistics are read, not written: the stats slot is then dx, never written */
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, saved ? ox : stats);
        if (st == ALLOY_OK) st = group_launch(l, &d, rms, eps, dt, saved != NULL);
        alloy_array *ins[4] = {x, weight, dy, saved ? saved : x}; /* without saved statistics x stands in unread */
        if (st == ALLOY_OK) st = alloy_nn_apply(BWD_FILE, l, dt, 4, ins, 2, stream);
        alloy_launch_free(l);
    }
    if (st == ALLOY_OK && !d.nc && (ow || ob) && d.D > 0)
        st = param_grads(&d, rms, x, dy, saved ? saved : stats, ow, ob, stream);
    alloy_array_free(stats);
    if (st != ALLOY_OK) {
        if (cx) alloy_array_free(ox);
        if (cw) alloy_array_free(ow);
        if (cb) alloy_array_free(ob);
        return st;
    }
    if (cx) *dx = ox;
    if (cw) *dweight = ow;
    if (cb) *dbias = ob;
    return ALLOY_OK;
}

alloy_status alloy_nn_rms_norm_backward(alloy_array *x, alloy_array *weight, alloy_array *dy, int64_t head_dim,
                                        double eps, alloy_stream *stream, alloy_array **dx,
                                        alloy_array **dweight) {
    return norm_backward("alloy_nn_rms_norm_backward", 1, x, weight, dy, 0, NULL, head_dim, eps, stream, dx,
                         dweight, NULL);
}

alloy_status alloy_nn_rms_norm_backward_stats(alloy_array *x, alloy_array *weight, alloy_array *dy,
                                              alloy_array *stats, int64_t head_dim, alloy_stream *stream,
                                              alloy_array **dx, alloy_array **dweight) {
    return norm_backward("alloy_nn_rms_norm_backward_stats", 1, x, weight, dy, 1, stats, head_dim, 0, stream, dx,
                         dweight, NULL);
}

alloy_status alloy_nn_layer_norm_backward(alloy_array *x, alloy_array *weight, alloy_array *dy, int64_t head_dim,
                                          double eps, alloy_stream *stream, alloy_array **dx,
                                          alloy_array **dweight, alloy_array **dbias) {
    return norm_backward("alloy_nn_layer_norm_backward", 0, x, weight, dy, 0, NULL, head_dim, eps, stream, dx,
                         dweight, dbias);
}

alloy_status alloy_nn_layer_norm_backward_stats(alloy_array *x, alloy_array *weight, alloy_array *dy,
                                                alloy_array *stats, int64_t head_dim, alloy_stream *stream,
                                                alloy_array **dx, alloy_array **dweight, alloy_array **dbias) {
    return norm_backward("alloy_nn_layer_norm_backward_stats", 0, x, weight, dy, 1, stats, head_dim, 0, stream, dx,
                         dweight, dbias);
}
