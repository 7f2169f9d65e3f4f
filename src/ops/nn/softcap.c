/* softcap.c — alloy_nn_softcap and alloy_nn_softcap_backward (alloy/nn.h):
 * one elementwise launch each, one pass over the data; 16-byte vector
 * accesses when every operand is aligned (the kernels' scalar loop does the
 * rest). */
#include <math.h>

#include "core/error.h"
#include "ops/env_override.h"
#include "ops/nn/nn_internal.h"

static const char FWD_FILE[] = "src/ops/nn/kernels/softcap.metal";
static const char BWD_FILE[] = "src/ops/nn/kernels/softcap_backward.metal";

static alloy_status check_cap(const char *fn, double cap) {
    if (!(cap > 0) || !isfinite(cap))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: cap is %g; it must be finite and > 0", fn, cap);
    return ALLOY_OK;
}

/* Runs `path` over x (and dy when given) into a result of x's shape. */
static alloy_status elementwise(const char *fn, const char *path, const char *out_name, alloy_array *x,
                                alloy_array *dy, double cap, alloy_stream *stream, alloy_array **out) {
    alloy_status st = alloy_nn_check_x(fn, x, 0, stream);
    if (st == ALLOY_OK) st = check_cap(fn, cap);
    if (st != ALLOY_OK) return st;
    alloy_device *dev = alloy_array_device(x);
    const alloy_dtype dt = alloy_array_dtype(x);
    const int nd = alloy_array_ndim(x);
    const int64_t *shape = alloy_array_shape(x);
    if (dy && (st = alloy_nn_check(fn, "dy", dy, dev, dt, nd, shape)) != ALLOY_OK) return st;
    alloy_array *o = NULL;
    int created = 0;
    if ((st = alloy_nn_prepare_out(fn, out_name, out, dev, dt, nd, shape, &o, &created)) != ALLOY_OK) return st;
    const int64_t n = alloy_array_size(x);
    if (n > 0) {
        alloy_array *ops[3] = {x, dy, o};
        const int64_t V = 16 / (int64_t)alloy_dtype_size(dt);
        const int64_t nv = alloy_ops_aligned16(3, ops) ? n / V : 0, rest = n - nv * V;
        /* U 16-byte chunks a thread per round, loaded together, in threadgroups of tg threads. 16-bit
         * forwards: 1 in 128 (torch.compile's pointwise shape; H200, 64 M elements, same call, three rounds,
         * % of copy bf16 / f16: 100.6-100.7 / 99.9 against 95.7 / 95.6-95.7 with 2 in 256 and 97.7 / 98.1
         * with 2 in 128). float32's forward: 2 in 256 (one load a thread left it short of the copy: 98.5
         * against 96.1; U = 4: 96.9); not timed in 128. Backwards: 1 in 256, their two loads a chunk are
         * enough (102.1 / 91.7 / 92.0 against 101.6 / 81.4 / 89.4 with U = 2). ALLOY_NN_SOFTCAP_U=k (1-8)
         * and ALLOY_NN_SOFTCAP_TG=64|128|256 for timing */
        const int fwd16 = !dy && alloy_dtype_size(dt) == 2;
        const int64_t U = alloy_ops_env_int("ALLOY_NN_SOFTCAP_U", 1, 8, dy || fwd16 ? 1 : 2), nvu = (nv + U - 1) / U;
        const int64_t threads = alloy_nn_grid_threads(nvu > rest ? nvu : rest);
        alloy_launch *l = NULL;
        st = alloy_launch_new(&l);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, o);
        if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)threads, 1, 1);
        int64_t tg = alloy_ops_env_int("ALLOY_NN_SOFTCAP_TG", 64, 256, fwd16 ? 128 : 256);
        if (tg != 64 && tg != 128) tg = 256; /* like every override: a bad value leaves the default */
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, (uint32_t)tg, 1, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "n", ALLOY_INT64, n);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "nv", ALLOY_INT64, nv);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "stride", ALLOY_INT64, threads);
        if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "U", (int)U);
        /* 16-bit data: tanh (and 1 - tanh^2) from one exponential and one approximate division
         * (softcap_math.h: within 2^-16 relative, against the 16-bit result's 2^-11 or 2^-8) instead of
         * tanhf. On an H200 (same call, three rounds) the forward went from 94.3-94.7% of copy to
         * 95.6-95.7%, the backward from 91.6-91.9% to 102.3-102.6% (the copy ceiling moves two
         * streams, the backward three). ALLOY_NN_SOFTCAP_FAST=0 restores tanhf, for timing. */
        const int ft = alloy_dtype_size(dt) == 2 && alloy_ops_env_int("ALLOY_NN_SOFTCAP_FAST", 0, 1, 1);
        if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "FT", ft);
        if (st == ALLOY_OK) st = alloy_launch_set_constant(l, "cap", alloy_nn_accum(dt), cap);
        if (st == ALLOY_OK) st = alloy_launch_set_constant(l, "rc", alloy_nn_accum(dt), 1.0 / cap);
        alloy_array *ins[2] = {x, dy};
        if (st == ALLOY_OK) st = alloy_nn_apply(path, l, dt, dy ? 2 : 1, ins, 1, stream);
        alloy_launch_free(l);
    }
    if (st != ALLOY_OK) {
        if (created) alloy_array_free(o);
        return st;
    }
    if (created) *out = o;
    return ALLOY_OK;
}

alloy_status alloy_nn_softcap(alloy_array *x, double cap, alloy_stream *stream, alloy_array **y) {
    return elementwise("alloy_nn_softcap", FWD_FILE, "y", x, NULL, cap, stream, y);
}

alloy_status alloy_nn_softcap_backward(alloy_array *x, alloy_array *dy, double cap, alloy_stream *stream,
                                       alloy_array **dx) {
    static const char FN[] = "alloy_nn_softcap_backward";
    if (x && !dy) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: dy is NULL", FN);
    return elementwise(FN, BWD_FILE, "dx", x, dy, cap, stream, dx);
}
