/* parallel.c — alloy_mlstm_parallel (alloy/mlstm.h): the quadratic form of
 * the mLSTM cell over whole sequences from zero states.
 *
 * One launch of mlstm_parallel on the caller's stream (one threadgroup per
 * (sequence, head, 32 queries, 32 columns of h), a FlashAttention-style loop
 * over key tiles with a running max; see the kernel file). Nothing waits for
 * the device and nothing is allocated when h is given and the inputs are
 * row-contiguous. S, the head sizes, scale and eps are launch constants. */
#include <math.h>
#include <stdint.h>

#include "core/error.h"
#include "ops/catalog.h"
#include "ops/mlstm/mlstm_internal.h"

static const char PAR_FILE[] = "src/ops/mlstm/kernels/mlstm_parallel.metal";

static const char FN[] = "alloy_mlstm_parallel";

alloy_status alloy_mlstm_parallel(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i,
                                  alloy_array *f, double eps, alloy_stream *stream, alloy_array **h) {
    alloy_status st = alloy_mlstm_check_q(FN, q, 4, stream);
    if (st != ALLOY_OK) return st;
    if ((st = alloy_mlstm_check_eps(FN, eps)) != ALLOY_OK) return st;
    alloy_device *dev = alloy_array_device(q);
    const alloy_dtype dt = alloy_array_dtype(q);
    const int64_t *qs = alloy_array_shape(q);
    const int64_t B = qs[0], NH = qs[1], S = qs[2], DHQK = qs[3];
    alloy_mlstm_dims dims;
    if ((st = alloy_mlstm_check_sequences(FN, q, k, v, i, f, &dims)) != ALLOY_OK) return st;
    const int64_t DHHV = dims.DHHV;
    const int64_t *s_v = dims.v;
    const int64_t BH = B * NH, qtiles = (S + 31) / 32, vtiles = (DHHV + 31) / 32;
    const int64_t groups = BH * qtiles * vtiles;
    if (groups > 0 && groups > (int64_t)(UINT32_MAX / 256))
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: B * NH * S * DHHV is too large for one launch", FN);

    alloy_array *oh = NULL;
    int created = 0;
    st = alloy_mlstm_prepare_out(FN, "h", h, dev, dt, 4, s_v, &oh, &created);
    alloy_kernel *kp = NULL;
    if (st == ALLOY_OK) st = alloy_catalog_kernel(PAR_FILE, &kp);
    if (st == ALLOY_OK && groups > 0) {
        alloy_launch *l = NULL;
        st = alloy_launch_new(&l);
        if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "T", dt);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, oh);
        if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)(groups * 256), 1, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, 256, 1, 1);
        const struct {
            const char *name;
            int64_t v;
        } ints[] = {{"S", S}, {"DHQK", DHQK}, {"DHHV", DHHV}, {"qtiles", qtiles}, {"vtiles", vtiles}};
        for (size_t e = 0; e < sizeof ints / sizeof ints[0] && st == ALLOY_OK; e++)
            st = alloy_launch_set_constant_int(l, ints[e].name, ALLOY_INT32, ints[e].v);
        if (st == ALLOY_OK) st = alloy_launch_set_constant(l, "scale", ALLOY_FLOAT32, 1.0 / sqrt((double)DHQK));
        if (st == ALLOY_OK) st = alloy_launch_set_constant(l, "eps", ALLOY_FLOAT32, eps);
        alloy_array *ins[5] = {q, k, v, i, f}, *res = NULL;
        if (st == ALLOY_OK) st = alloy_kernel_apply(kp, 5, ins, l, stream, &res);
        alloy_array_free(res);
        alloy_launch_free(l);
    }
    if (st != ALLOY_OK) {
        if (created) alloy_array_free(oh);
        return st;
    }
    if (created) *h = oh;
    return ALLOY_OK;
}
