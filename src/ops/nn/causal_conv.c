/* causal_conv.c — the causal depthwise convolution over time (alloy/nn.h),
 * forward (causal_conv_forward, then causal_conv_state for the decoding
 * state: a separate launch, so the state is read whole before it is updated
 * in place) and backward (causal_conv_backward: dx, dstate and partial sums
 * of dw and db in one pass over x and dy; column_sum adds the partial sums
 * in order). Both kernels give each thread a chunk of channels (conv_chunk.h:
 * 16 bytes, 8 of 16-bit data) and runs of 32 timesteps (the K-1 halo from
 * cache), one vector access a chunk when C is a multiple of the chunk and the
 * operands are 16-byte aligned. */
#include "ops/env_override.h"
#include "core/error.h"
#include "ops/nn/nn_internal.h"

static const char FWD_FILE[] = "src/ops/nn/kernels/causal_conv_forward.metal";
static const char STATE_FILE[] = "src/ops/nn/kernels/causal_conv_state.metal";
static const char BWD_FILE[] = "src/ops/nn/kernels/causal_conv_backward.metal";

/* Timesteps per block of the kernels (their L; the forward's BL template:
 * float32 half of it, conv_fwd_l) and at most about this many threadgroups
 * of 32 x 8 threads in all: the forward 8 per SM of an H100 (more than fit
 * at once; nothing to sum afterwards; float32 32, conv_fwd_tgs), the
 * backward 2 (few partial sums of dw and db for column_sum; MINB per SM with
 * the timing override below). */
enum { CONV_L = 32, CONV_TGS_FWD = 1056, CONV_TGS_BWD = 264 };

/* STREAM (stream.h, both kernels): the streaming cache hint on CUDA, 1 on the
 * stores of y and dx, 2 on those and the loads of x and dy. The backward's
 * default is 1 and the forward's 0 (H200, 64 M elements, K 4: 1 lost 0.4-0.6
 * points forward in one round and gained backward in three, two calls —
 * float32 92.2-92.3 -> 92.6-92.7, bfloat16 87.8-88.1 -> 88.8-89.3, float16
 * 86.1-86.3 -> 86.4-86.8 —, 2 lost up to 9 points; the norms lost with it
 * everywhere, up to 5 points) — but 0 for float16's backward since its blocks
 * of 128 (H200, three rounds: 90.5% of copy against 90.3; bfloat16 lost
 * 0.6 that way); ALLOY_NN_CONV_STREAM=k says otherwise for both (timing). */
static int conv_stream(int dflt) { return (int)alloy_ops_env_int("ALLOY_NN_CONV_STREAM", 0, 2, dflt); }

/* The forward's threadgroups in all (the grid's sizing, conv_rows) and its
 * block of timesteps: float32 blocks of 16 and 32 threadgroups an SM of an
 * H100, a block each at 64 M elements (H200, 8 x 8192 x 1024, K 4, same
 * call: 93.1% of copy against 89.4-89.5 with blocks of 32 and 16 an SM,
 * 88.3 with 8, 85.0 with 2, 88.2 with blocks of 64 and 8 an SM); 16-bit data
 * blocks of 32 and 8 an SM (blocks of 16 and 32 an SM: 84.0-84.3 against
 * 90.8-91.3; 16 an SM: 0.5-0.8 points lower). ALLOY_NN_CONV_FWD_TGS=k
 * (132-8448) and ALLOY_NN_CONV_FWD_L=k (8-128) override, for timing. */
static int64_t conv_fwd_tgs(alloy_dtype dt) {
    return alloy_ops_env_int("ALLOY_NN_CONV_FWD_TGS", 132, 8448, dt == ALLOY_FLOAT32 ? 4 * CONV_TGS_FWD : CONV_TGS_FWD);
}
static int64_t conv_fwd_l(alloy_dtype dt) {
    return alloy_ops_env_int("ALLOY_NN_CONV_FWD_L", 8, 128, dt == ALLOY_FLOAT32 ? CONV_L / 2 : CONV_L);
}

typedef struct conv_dims {
    int64_t B, S, C, K;
} conv_dims;

static alloy_status check_operands(const char *fn, alloy_array *x, alloy_array *w, alloy_array *bias,
                                   alloy_array *state, alloy_array *dy, int need_dy, alloy_stream *stream,
                                   conv_dims *d) {
    alloy_status st = alloy_nn_check_x(fn, x, 3, stream);
    if (st != ALLOY_OK) return st;
    if (alloy_array_ndim(x) != 3)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: x must be 3-D (B, S, C), not %d-D", fn,
                           alloy_array_ndim(x));
    alloy_device *dev = alloy_array_device(x);
    const alloy_dtype dt = alloy_array_dtype(x);
    const int64_t *xs = alloy_array_shape(x);
    if (!w) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: w is NULL", fn);
    if (alloy_array_ndim(w) != 2 || alloy_array_shape(w)[1] < 1 || alloy_array_shape(w)[1] > ALLOY_NN_CONV_MAX_K)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: w must be (C, K) with 1 <= K <= %d", fn,
                           ALLOY_NN_CONV_MAX_K);
    d->B = xs[0], d->S = xs[1], d->C = xs[2], d->K = alloy_array_shape(w)[1];
    if (d->C > INT32_MAX / (ALLOY_NN_CONV_MAX_K + 1))
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: C = %lld is too large", fn, (long long)d->C);
    const int64_t s_w[2] = {d->C, d->K}, s_b[1] = {d->C}, s_s[3] = {d->B, d->K - 1, d->C};
    if ((st = alloy_nn_check(fn, "w", w, dev, dt, 2, s_w)) != ALLOY_OK) return st;
    if (bias && (st = alloy_nn_check(fn, "bias", bias, dev, dt, 1, s_b)) != ALLOY_OK) return st;
    if (state && (st = alloy_nn_check(fn, "state", state, dev, dt, 3, s_s)) != ALLOY_OK) return st;
    if (need_dy && !dy) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: dy is NULL", fn);
    if (dy && (st = alloy_nn_check(fn, "dy", dy, dev, dt, 3, xs)) != ALLOY_OK) return st;
    return ALLOY_OK;
}

/* Constants every convolution kernel reads. */
static alloy_status conv_constants(alloy_launch *l, const conv_dims *d) {
    alloy_status st = alloy_launch_set_constant_int(l, "S", ALLOY_INT64, d->S);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "C", ALLOY_INT32, d->C);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "K", ALLOY_INT32, d->K);
    return st;
}

/* A grid-stride launch over n items. */
static alloy_status stride_launch(alloy_launch *l, int64_t n) {
    const int64_t threads = alloy_nn_grid_threads(n);
    alloy_status st = alloy_launch_set_grid(l, (uint32_t)threads, 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, 256, 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "n", ALLOY_INT64, n);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "stride", ALLOY_INT64, threads);
    return st;
}

/* Channels per chunk (the kernels' V, conv_chunk.h): 4 of 16-bit data (8
 * bytes, so the kernels hold as many float registers as for float32: chunks
 * of 8 in 16 bytes at one threadgroup an SM, 16-byte accesses up to K = 4 and
 * no spills, lost 10 points in the backward — H200, 64 M elements, K 4, two
 * rounds: bfloat16 81.4-81.6% of copy against 91.4-91.5, float16 80.3-80.4
 * against 88.8), else 16 bytes' worth. */
static int64_t conv_chunk(alloy_dtype dt) {
    const int64_t e = (int64_t)alloy_dtype_size(dt);
    return e == 2 ? 4 : 16 / e;
}

/* The backward's form (causal_conv_backward.metal's templates), each
 * overridable for timing by ALLOY_NN_CONV_BWD_<NAME>=k:
 *   RING  the windows over the whole group of NB timesteps, moved by renaming:
 *         float32, and 16-bit data up to K = 4 (H200, 64 M elements, K 4, two
 *         rounds alternating, with 32-bit offsets and whole groups: bfloat16 /
 *         float16 83.5 / 87.5% of copy with NB 8 against 72.5 / 74.2 for the
 *         shifted windows in halves of 3 and 83.6 / 84.5 in whole groups of 6);
 *         16-bit data from K = 5 shift the windows (NB 8 spills there).
 *   NB    timesteps of x and dy loaded ahead: 8 (with RING), 6 for the
 *         shifted 16-bit windows (under the 128-register bound).
 *   PIPE  with the shifted windows, the group's timesteps in halves, each
 *         half's loads before the previous half's math: on (H200, before the
 *         32-bit offsets: bfloat16 77.4% of copy against 73.9%).
 *   MINB  threadgroups per SM (the launch bound): 1 for float32, 2 — at most
 *         128 registers a thread — for 16-bit data. On an H100 (K = 4) float32
 *         with 8 timesteps and one threadgroup an SM ran at 90.5% of copy
 *         against 88.4% with 4 and two; 16-bit data lost 10 points that way. */
static int conv_bwd_ring(alloy_dtype dt, int64_t K) {
    const int ring = dt == ALLOY_FLOAT32 || (alloy_dtype_size(dt) == 2 && K <= 4);
    return (int)alloy_ops_env_int("ALLOY_NN_CONV_BWD_RING", 0, 1, ring);
}
static int conv_bwd_nb(alloy_dtype dt, int64_t K) {
    return (int)alloy_ops_env_int("ALLOY_NN_CONV_BWD_NB", 1, 8, alloy_dtype_size(dt) == 2 && K > 4 ? 6 : 8);
}
static int conv_bwd_minb(alloy_dtype dt) {
    return (int)alloy_ops_env_int("ALLOY_NN_CONV_BWD_MINB", 1, 4, alloy_dtype_size(dt) == 2 ? 2 : 1);
}
/* The backward's threadgroups in all (MINB an SM of an H100: one round) and
 * its block of timesteps (32; 128 for float16: H200, 64 M elements, K 4, two
 * rounds, 90.3-90.4% of copy against 88.6-88.7 with 32 and 89.5 with 64 —
 * bfloat16 loses 1.5 points with 128); ALLOY_NN_CONV_BWD_TGS=k (132-8448; each
 * threadgroup row adds a partial row for column_sum) and
 * ALLOY_NN_CONV_BWD_L=k (8-128) override, for timing. More threadgroups lose
 * (H200, 64 M elements, K 4, same call, two rounds, % of copy, float32 /
 * bfloat16 / float16: 92.2 / 87.9 / 86.2 as is, 89.2 / 85.9 / 83.6 with 528,
 * 85.7 / 81.4 / 79.8 with 1056, 85.0 / 80.7 / 79.0 with 1056 and blocks of 16). */
static int64_t conv_bwd_tgs(alloy_dtype dt) {
    return alloy_ops_env_int("ALLOY_NN_CONV_BWD_TGS", 132, 8448, CONV_TGS_BWD / 2 * conv_bwd_minb(dt));
}
static int64_t conv_bwd_l(alloy_dtype dt) {
    return alloy_ops_env_int("ALLOY_NN_CONV_BWD_L", 8, 128, dt == ALLOY_FLOAT16 ? 4 * CONV_L : CONV_L);
}

/* Threadgroup rows (of 8 workers each) of a forward or backward launch. */
static int64_t conv_rows(const conv_dims *d, alloy_dtype dt, int64_t target, int64_t L) {
    const int64_t V = conv_chunk(dt), tiles = ((d->C + V - 1) / V + 31) / 32;
    const int64_t nblk = d->B * ((d->S + L - 1) / L), want = (nblk + 7) / 8;
    const int64_t per = target / tiles > 1 ? target / tiles : 1, rounds = (want + per - 1) / per;
    return rounds > 0 ? (want + rounds - 1) / rounds : 0; /* as many blocks for every worker */
}

/* The launch shape and constants of causal_conv_forward / _backward with
 * `rows` threadgroup rows; ops: the arrays for the 16-byte check. */
static alloy_status conv_launch(alloy_launch *l, const conv_dims *d, alloy_dtype dt, int64_t rows, int64_t L, int n_ops,
                                alloy_array *const *ops) {
    const int64_t V = conv_chunk(dt), tiles = ((d->C + V - 1) / V + 31) / 32;
    const int64_t ntb = (d->S + L - 1) / L;
    const int vec = d->C % V == 0 && alloy_ops_aligned16(n_ops, ops);
    alloy_status st = alloy_launch_set_grid(l, (uint32_t)(tiles * 32), (uint32_t)(rows * 8), 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, 32, 8, 1);
    if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "KT", (int)d->K);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "S", ALLOY_INT64, d->S);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "C", ALLOY_INT32, d->C);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "NTB", ALLOY_INT64, ntb);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "NBLK", ALLOY_INT64, d->B * ntb);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "NW", ALLOY_INT64, rows * 8);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "NWB", ALLOY_INT64, ntb > 0 ? rows * 8 / ntb : 0);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "NWR", ALLOY_INT64, ntb > 0 ? rows * 8 % ntb : 0);
    if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "VEC", vec);
    return st;
}

alloy_status alloy_nn_causal_conv1d(alloy_array *x, alloy_array *w, alloy_array *bias, alloy_array *state,
                                    alloy_stream *stream, alloy_array **y, alloy_array **state_out) {
    static const char FN[] = "alloy_nn_causal_conv1d";
    conv_dims d = {0, 0, 0, 0};
    alloy_status st = check_operands(FN, x, w, bias, state, NULL, 0, stream, &d);
    if (st != ALLOY_OK) return st;
    alloy_device *dev = alloy_array_device(x);
    const alloy_dtype dt = alloy_array_dtype(x);
    const int64_t s_s[3] = {d.B, d.K - 1, d.C};
    alloy_array *oy = NULL, *os = NULL;
    int cy = 0, cs = 0;
    st = alloy_nn_prepare_out(FN, "y", y, dev, dt, 3, alloy_array_shape(x), &oy, &cy);
    if (st == ALLOY_OK && state_out) st = alloy_nn_prepare_out(FN, "state_out", state_out, dev, dt, 3, s_s, &os, &cs);
    alloy_launch *l = NULL;
    if (st == ALLOY_OK) st = alloy_launch_new(&l);
    const int64_t n = d.B * d.S * d.C;
    if (st == ALLOY_OK && n > 0) {
        alloy_array *ops[3] = {x, state, oy};
        st = alloy_launch_add_output_array(l, oy);
        const int64_t L = conv_fwd_l(dt);
        if (st == ALLOY_OK) st = conv_launch(l, &d, dt, conv_rows(&d, dt, conv_fwd_tgs(dt), L), L, 3, ops);
        if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "BL", (int)L);
        if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "STREAM", conv_stream(0));
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "has_bias", ALLOY_INT32, bias != NULL);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "has_state", ALLOY_INT32, state != NULL);
        /* the timesteps in halves, each half's loads before the previous half's math (PIPE,
         * causal_conv_forward.metal) for float16: H200, 64 M elements, K 4, same call, % of copy 89.0
         * against 86.3 (float32 87.4 against 87.9, bfloat16 87.1 against 87.4: they keep whole blocks);
         * ALLOY_NN_CONV_FWD_PIPE=0|1 overrides */
        if (st == ALLOY_OK)
            st = alloy_launch_add_template_int(
                l, "PIPE", (int)alloy_ops_env_int("ALLOY_NN_CONV_FWD_PIPE", 0, 1, dt == ALLOY_FLOAT16));
        /* timesteps loaded ahead: 8 of float32, 16 of 16-bit data (128 bytes; float64 8); threadgroups of 256
         * threads per SM (the launch bound) 2; ALLOY_NN_CONV_FWD_NB=k (1-16), ALLOY_NN_CONV_FWD_MINB=k (1-4)
         * for timing */
        if (st == ALLOY_OK)
            st = alloy_launch_add_template_int(
                l, "NB", (int)alloy_ops_env_int("ALLOY_NN_CONV_FWD_NB", 1, 16, alloy_dtype_size(dt) == 2 ? 16 : 8));
        if (st == ALLOY_OK)
            st = alloy_launch_add_template_int(l, "MINB", (int)alloy_ops_env_int("ALLOY_NN_CONV_FWD_MINB", 1, 4, 2));
        /* absent operands: x stands in, never read */
        alloy_array *ins[4] = {x, w, bias ? bias : x, state ? state : x};
        if (st == ALLOY_OK) st = alloy_nn_apply(FWD_FILE, l, dt, 4, ins, 1, stream);
        if (st == ALLOY_OK) st = alloy_launch_reset(l);
    }
    if (st == ALLOY_OK && os && d.B * (d.K - 1) * d.C > 0) {
        st = alloy_launch_add_output_array(l, os);
        if (st == ALLOY_OK) st = stride_launch(l, d.B * d.C);
        if (st == ALLOY_OK) st = conv_constants(l, &d);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "has_state", ALLOY_INT32, state != NULL);
        alloy_array *ins[2] = {x, state ? state : x};
        if (st == ALLOY_OK) st = alloy_nn_apply(STATE_FILE, l, dt, 2, ins, 1, stream);
    }
    alloy_launch_free(l);
    if (st != ALLOY_OK) {
        if (cy) alloy_array_free(oy);
        if (cs) alloy_array_free(os);
        return st;
    }
    if (cy) *y = oy;
    if (cs) *state_out = os;
    return ALLOY_OK;
}

alloy_status alloy_nn_causal_conv1d_backward(alloy_array *x, alloy_array *w, alloy_array *state, alloy_array *dy,
                                             alloy_stream *stream, alloy_array **dx, alloy_array **dw,
                                             alloy_array **db, alloy_array **dstate) {
    static const char FN[] = "alloy_nn_causal_conv1d_backward";
    conv_dims d = {0, 0, 0, 0};
    alloy_status st = check_operands(FN, x, w, NULL, state, dy, 1, stream, &d);
    if (st != ALLOY_OK) return st;
    alloy_device *dev = alloy_array_device(x);
    const alloy_dtype dt = alloy_array_dtype(x);
    const int64_t s_w[2] = {d.C, d.K}, s_b[1] = {d.C}, s_s[3] = {d.B, d.K - 1, d.C};
    const int want_state = state && dstate;
    alloy_array *ox = NULL, *ow = NULL, *ob = NULL, *os = NULL;
    int cx = 0, cw = 0, cb = 0, cs = 0;
    st = alloy_nn_prepare_out(FN, "dx", dx, dev, dt, 3, alloy_array_shape(x), &ox, &cx);
    if (st == ALLOY_OK && dw) st = alloy_nn_prepare_out(FN, "dw", dw, dev, dt, 2, s_w, &ow, &cw);
    if (st == ALLOY_OK && db) st = alloy_nn_prepare_out(FN, "db", db, dev, dt, 1, s_b, &ob, &cb);
    if (st == ALLOY_OK && want_state) st = alloy_nn_prepare_out(FN, "dstate", dstate, dev, dt, 3, s_s, &os, &cs);
    const int64_t L = conv_bwd_l(dt), rows = conv_rows(&d, dt, conv_bwd_tgs(dt), L), M = d.C * (d.K + 1);
    const int64_t s_part[2] = {rows > 0 ? rows : 1, M};
    alloy_array *part = NULL, *sw = NULL, *sb = NULL;
    if (st == ALLOY_OK) st = alloy_array_new(dev, alloy_nn_accum(dt), 2, s_part, &part);
    if (st == ALLOY_OK && rows > 0 && d.C > 0) {
        alloy_launch *l = NULL;
        alloy_array *ops[5] = {x, state, dy, ox, os};
        st = alloy_launch_new(&l);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, ox);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, os ? os : ox); /* os absent: never written */
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, part);
        if (st == ALLOY_OK) st = conv_launch(l, &d, dt, rows, L, 5, ops);
        if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "BL", (int)L);
        if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "STREAM", conv_stream(dt == ALLOY_FLOAT16 ? 0 : 1));
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "has_state", ALLOY_INT32, state != NULL);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "want_state", ALLOY_INT32, want_state);
        if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "NB", conv_bwd_nb(dt, d.K));
        if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "MINB", conv_bwd_minb(dt));
        if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "RING", conv_bwd_ring(dt, d.K));
        /* with RING, a whole group's steps as straight code without a check each (H200, 64 M elements, K 4,
         * two rounds alternating in one call, % of copy: bfloat16 84.5 / 85.0 -> 88.3 / 88.2, float16
         * 85.1 / 85.2 -> 86.6 / 86.3, float32 91.7 / 91.6 -> 92.4 / 92.2); ALLOY_NN_CONV_BWD_WHOLE=0 turns
         * it off, for timing */
        if (st == ALLOY_OK)
            st = alloy_launch_add_template_int(l, "WHOLE", (int)alloy_ops_env_int("ALLOY_NN_CONV_BWD_WHOLE", 0, 1, 1));
        if (st == ALLOY_OK)
            st = alloy_launch_add_template_int(
                l, "PIPE", (int)alloy_ops_env_int("ALLOY_NN_CONV_BWD_PIPE", 0, 1, dt != ALLOY_FLOAT32));
        alloy_array *ins[4] = {x, w, state ? state : x, dy}; /* no state: x stands in, never read */
        if (st == ALLOY_OK) st = alloy_nn_apply(BWD_FILE, l, dt, 4, ins, 3, stream);
        alloy_launch_free(l);
    }
    if (st == ALLOY_OK && os && rows == 0) st = alloy_array_fill(os, 0); /* S = 0: no dy reaches the state */
    if (st == ALLOY_OK && (ow || ob) && d.C > 0) {
        if (!ow) st = alloy_array_new(dev, dt, 2, s_w, &sw);
        if (st == ALLOY_OK && !ob) st = alloy_array_new(dev, dt, 1, s_b, &sb);
        if (st == ALLOY_OK) st = alloy_nn_column_sum(part, rows, M, d.C * d.K, ow ? ow : sw, ob ? ob : sb, dt, stream);
    }
    alloy_array_free(part);
    alloy_array_free(sw);
    alloy_array_free(sb);
    if (st != ALLOY_OK) {
        if (cx) alloy_array_free(ox);
        if (cw) alloy_array_free(ow);
        if (cb) alloy_array_free(ob);
        if (cs) alloy_array_free(os);
        return st;
    }
    if (cx) *dx = ox;
    if (cw) *dw = ow;
    if (cb) *db = ob;
    if (cs) *dstate = os;
    return ALLOY_OK;
}
