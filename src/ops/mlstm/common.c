/* common.c — argument checks shared by the mLSTM operations
 * (mlstm_internal.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/env_override.h"
#include "ops/mlstm/mlstm_internal.h"

static void shape_text(char *buf, size_t cap, int nd, const int64_t *shape) {
    size_t used = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < nd && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (used < cap) snprintf(buf + used, cap - used, "%s)", nd == 1 ? "," : "");
}

static int same_shape(const alloy_array *x, int nd, const int64_t *shape) {
    if (alloy_array_ndim(x) != nd) return 0;
    for (int d = 0; d < nd; d++)
        if (alloy_array_shape(x)[d] != shape[d]) return 0;
    return 1;
}

alloy_status alloy_mlstm_check(const char *fn, const char *name, alloy_array *x, alloy_device *dev,
                               alloy_dtype dt, int nd, const int64_t *shape) {
    if (!x) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, name);
    if (alloy_array_device(x) != dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s lives on %s but q on %s", fn, name,
                           alloy_device_name(alloy_array_device(x)), alloy_device_name(dev));
    if (alloy_array_dtype(x) != dt)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s is %s but must be %s", fn, name,
                           alloy_dtype_name(alloy_array_dtype(x)), alloy_dtype_name(dt));
    if (!same_shape(x, nd, shape)) {
        char want[200], got[200];
        shape_text(want, sizeof want, nd, shape);
        shape_text(got, sizeof got, alloy_array_ndim(x), alloy_array_shape(x));
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s has shape %s but must have shape %s", fn, name,
                           got, want);
    }
    return ALLOY_OK;
}

alloy_status alloy_mlstm_check_q(const char *fn, alloy_array *q, int nd, alloy_stream *stream) {
    if (!q) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: q is NULL", fn);
    if (alloy_array_ndim(q) != nd) {
        char got[200];
        shape_text(got, sizeof got, alloy_array_ndim(q), alloy_array_shape(q));
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: q has shape %s but must be %d-D %s", fn, got, nd,
                           nd == 3 ? "(B, NH, DHQK)" : "(B, NH, S, DHQK)");
    }
    const alloy_dtype dt = alloy_array_dtype(q);
    if (dt != ALLOY_FLOAT32 && dt != ALLOY_FLOAT16 && dt != ALLOY_BFLOAT16)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: q is %s; it must be float32, float16 or bfloat16",
                           fn, alloy_dtype_name(dt));
    if (alloy_array_shape(q)[nd - 1] < 1)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: q's last dimension (DHQK) is 0; it must be >= 1",
                           fn);
    if (alloy_array_shape(q)[nd - 1] > INT32_MAX / 2)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: DHQK %lld is too large", fn,
                           (long long)alloy_array_shape(q)[nd - 1]);
    alloy_device *dev = alloy_array_device(q);
    if (stream && alloy_stream_device(stream) != dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: the stream belongs to %s but q lives on %s", fn,
                           alloy_device_name(alloy_stream_device(stream)), alloy_device_name(dev));
    return ALLOY_OK;
}

alloy_status alloy_mlstm_prepare_out(const char *fn, const char *name, alloy_array **slot, alloy_device *dev,
                                     alloy_dtype dt, int nd, const int64_t *shape, alloy_array **res,
                                     int *created) {
    *res = NULL;
    *created = 0;
    if (!slot)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: %s is NULL (pass the address of an alloy_array *, NULL or a given array)", fn,
                           name);
    alloy_array *x = *slot;
    if (!x) {
        alloy_status st = alloy_array_new(dev, dt, nd, shape, res);
        if (st == ALLOY_OK) *created = 1;
        return st;
    }
    alloy_status st = alloy_mlstm_check(fn, name, x, dev, dt, nd, shape);
    if (st != ALLOY_OK) return st;
    if (!alloy_array_is_row_contiguous(x))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s must be row-contiguous (it is written in place)",
                           fn, name);
    *res = x;
    return ALLOY_OK;
}

alloy_status alloy_mlstm_check_eps(const char *fn, double eps) {
    if (!(eps >= 0) || !isfinite(eps))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: eps is %g; it must be finite and >= 0", fn, eps);
    return ALLOY_OK;
}

alloy_status alloy_mlstm_chunk_length(const char *fn, int chunk_size, int64_t *len) {
    const int64_t L = chunk_size == 0 ? ALLOY_MLSTM_DEFAULT_CHUNK : chunk_size;
    if (L < 16 || L > 1024 || (L & (L - 1)) != 0)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: chunk_size is %d; it must be a power of two from 16 to 1024 (0: the default, %d)", fn,
                           chunk_size, ALLOY_MLSTM_DEFAULT_CHUNK);
    *len = L;
    return ALLOY_OK;
}

int alloy_mlstm_row_tiles_mode(const char *kernel, int phase) {
    char name[40];
    snprintf(name, sizeof name, "ALLOY_MLSTM_RB_%s%d", kernel, phase);
    return (int)alloy_ops_env_int(name, 0, 2, 1);
}

int64_t alloy_mlstm_split_slots(int64_t S, int64_t L, int64_t nseq, int packed) {
    return packed ? S / L + nseq : (S + L - 1) / L * nseq;
}

alloy_status alloy_mlstm_check_sequences(const char *fn, alloy_array *q, alloy_array *k, alloy_array *v,
                                         alloy_array *i, alloy_array *f, alloy_mlstm_dims *d) {
    alloy_device *dev = alloy_array_device(q);
    const alloy_dtype dt = alloy_array_dtype(q);
    const int64_t *qs = alloy_array_shape(q);
    d->B = qs[0], d->NH = qs[1], d->S = qs[2], d->DHQK = qs[3];
    if (!v) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: v is NULL", fn);
    if (alloy_array_ndim(v) != 4 || alloy_array_shape(v)[3] < 1 || alloy_array_shape(v)[3] > INT32_MAX / 2)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: v must be (B, NH, S, DHHV) with 1 <= DHHV", fn);
    if (d->S > INT32_MAX / 2)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: S = %lld is too long", fn, (long long)d->S);
    d->DHHV = alloy_array_shape(v)[3];
    const int64_t qk[4] = {d->B, d->NH, d->S, d->DHQK}, vv[4] = {d->B, d->NH, d->S, d->DHHV};
    const int64_t g[3] = {d->B, d->NH, d->S};
    memcpy(d->qk, qk, sizeof qk);
    memcpy(d->v, vv, sizeof vv);
    memcpy(d->g, g, sizeof g);
    alloy_status st = alloy_mlstm_check(fn, "k", k, dev, dt, 4, d->qk);
    if (st == ALLOY_OK) st = alloy_mlstm_check(fn, "v", v, dev, dt, 4, d->v);
    if (st == ALLOY_OK) st = alloy_mlstm_check(fn, "i", i, dev, dt, 3, d->g);
    if (st == ALLOY_OK) st = alloy_mlstm_check(fn, "f", f, dev, dt, 3, d->g);
    return st;
}

/* On a device whose memory is the host's, the offsets are read and checked
 * (0, non-decreasing, ending at the packed length); elsewhere reading them
 * would wait for the device, so the kernels only clamp each sequence to
 * [0, total]. */
static alloy_status check_cu_values(const char *fn, alloy_array *cu, int64_t nseq, int64_t total) {
    if (alloy_device_backend(alloy_array_device(cu)) != ALLOY_BACKEND_CPU) return ALLOY_OK;
    int32_t *x = malloc(sizeof(int32_t) * (size_t)(nseq + 1));
    if (!x) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    alloy_status st = alloy_array_copy_to_host(cu, x, sizeof(int32_t) * (size_t)(nseq + 1));
    if (st == ALLOY_OK) {
        if (x[0] != 0)
            st = alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: cu_seqlens[0] is %d; it must be 0", fn, (int)x[0]);
        for (int64_t s = 0; s < nseq && st == ALLOY_OK; s++)
            if (x[s + 1] < x[s])
                st = alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                                 "%s: cu_seqlens decreases at index %lld (%d after %d); it must be non-decreasing", fn,
                                 (long long)(s + 1), (int)x[s + 1], (int)x[s]);
        if (st == ALLOY_OK && x[nseq] != total)
            st = alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                             "%s: cu_seqlens ends at %d but the packed inputs hold %lld tokens", fn, (int)x[nseq],
                             (long long)total);
    }
    free(x);
    return st;
}

alloy_status alloy_mlstm_check_cu_seqlens(const char *fn, alloy_array *cu, alloy_device *dev, int64_t B, int64_t S,
                                          int64_t *nseq) {
    *nseq = B;
    if (!cu) return ALLOY_OK;
    if (alloy_array_device(cu) != dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: cu_seqlens lives on %s but q on %s", fn,
                           alloy_device_name(alloy_array_device(cu)), alloy_device_name(dev));
    if (alloy_array_dtype(cu) != ALLOY_INT32)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: cu_seqlens is %s but must be int32", fn,
                           alloy_dtype_name(alloy_array_dtype(cu)));
    if (alloy_array_ndim(cu) != 1 || alloy_array_shape(cu)[0] < 1)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: cu_seqlens must be 1-D with N + 1 >= 1 entries (the sequences' offsets)", fn);
    if (B != 1)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: with cu_seqlens, q must be (1, NH, total, DHQK) (packed sequences), not B = %lld", fn,
                           (long long)B);
    *nseq = alloy_array_shape(cu)[0] - 1;
    return check_cu_values(fn, cu, *nseq, S);
}
