/* det.c — determinants from the LU factorization (alloy/linalg.h):
 * alloy_det (NumPy's linalg.det) and alloy_slogdet (NumPy's linalg.slogdet).
 * Each factors its operand into scratch with the kernels of lu.c, then one
 * thread per matrix reduces U's diagonal and the pivots' parity
 * (kernels/lu_det.metal, kernels/lu_slogdet.metal); both launches go on the
 * caller's stream and nothing waits for the device. */
#include <stdint.h>
#include <stdlib.h>

#include "alloy/alloy.h"
#include "alloy/linalg.h"
#include "core/error.h"
#include "ops/catalog.h"
#include "ops/linalg/lu_internal.h"

static const char DET_FILE[] = "src/ops/linalg/kernels/lu_det.metal";
static const char SLOGDET_FILE[] = "src/ops/linalg/kernels/lu_slogdet.metal";

/* Factors a into scratch and runs `file` with the given outputs. */
static alloy_status reduce(const alloy_lu_square *s, alloy_array *a, const char *file, int nout,
                           alloy_array **outs, alloy_stream *stream) {
    if (s->batch == 0) return ALLOY_OK;
    alloy_array *lu = NULL, *ipiv = NULL, *info = NULL;
    alloy_status st = alloy_lu_scratch(s, &lu, &ipiv, &info);
    if (st == ALLOY_OK) st = alloy_lu_run_factor(s, ALLOY_LU_AUTO, a, lu, ipiv, info, stream);
    alloy_kernel *k = NULL;
    alloy_launch *l = NULL;
    if (st == ALLOY_OK) st = alloy_catalog_kernel(file, &k);
    if (st == ALLOY_OK) st = alloy_launch_new(&l);
    for (int i = 0; i < nout && st == ALLOY_OK; i++) st = alloy_launch_add_output_array(l, outs[i]);
    if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "T", s->dt);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "n", ALLOY_INT32, s->n);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "batch", ALLOY_INT64, s->batch);
    if (st == ALLOY_OK && s->batch > (int64_t)(UINT32_MAX / 2))
        st = alloy_error(ALLOY_ERROR_UNSUPPORTED, "%lld matrices are too many for one launch (split the batch)",
                         (long long)s->batch);
    if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)s->batch, 1, 1);
    if (st == ALLOY_OK)
        st = alloy_launch_set_threadgroup(l, alloy_device_backend(s->dev) == ALLOY_BACKEND_CPU ? 1 : 64, 1, 1);
    alloy_array *ins[2] = {lu, ipiv}, *res[2] = {NULL, NULL};
    if (st == ALLOY_OK) st = alloy_kernel_apply(k, 2, ins, l, stream, res);
    alloy_array_free(res[0]);
    alloy_array_free(res[1]);
    alloy_launch_free(l);
    alloy_array_free(lu);
    alloy_array_free(ipiv);
    alloy_array_free(info);
    return st;
}

alloy_status alloy_det(alloy_array *a, alloy_stream *stream, alloy_array **det) {
    static const char fn[] = "alloy_det";
    if (!det)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: det is NULL (pass the address of an alloy_array *: NULL for a new array)", fn);
    alloy_lu_square s;
    alloy_status st = alloy_lu_check_square(fn, "a", a, stream, &s);
    if (st != ALLOY_OK) return st;
    alloy_array *D = NULL;
    int newD = 0;
    st = alloy_lu_prepare_out(fn, "det", det, s.dev, s.dt, s.nd - 2, s.shape, &D, &newD);
    if (st == ALLOY_OK) st = reduce(&s, a, DET_FILE, 1, &D, stream);
    if (st != ALLOY_OK) {
        if (newD) alloy_array_free(D);
        return st;
    }
    if (newD) *det = D;
    return ALLOY_OK;
}

alloy_status alloy_slogdet(alloy_array *a, alloy_stream *stream, alloy_array **sign, alloy_array **logabsdet) {
    static const char fn[] = "alloy_slogdet";
    if (!sign || !logabsdet)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: %s is NULL (pass the address of an alloy_array *: NULL for a new array)", fn,
                           !sign ? "sign" : "logabsdet");
    alloy_lu_square s;
    alloy_status st = alloy_lu_check_square(fn, "a", a, stream, &s);
    if (st != ALLOY_OK) return st;
    if (*sign && *sign == *logabsdet)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: sign and logabsdet are the same array", fn);
    alloy_array *outs[2] = {NULL, NULL};
    int newS = 0, newL = 0;
    st = alloy_lu_prepare_out(fn, "sign", sign, s.dev, s.dt, s.nd - 2, s.shape, &outs[0], &newS);
    if (st == ALLOY_OK) st = alloy_lu_prepare_out(fn, "logabsdet", logabsdet, s.dev, s.dt, s.nd - 2, s.shape, &outs[1], &newL);
    if (st == ALLOY_OK) st = reduce(&s, a, SLOGDET_FILE, 2, outs, stream);
    if (st != ALLOY_OK) {
        if (newS) alloy_array_free(outs[0]);
        if (newL) alloy_array_free(outs[1]);
        return st;
    }
    if (newS) *sign = outs[0];
    if (newL) *logabsdet = outs[1];
    return ALLOY_OK;
}
