/* tensor_map.c — checks a tensor map against the input or output it describes.
 *
 * The rules are those cuTensorMapEncodeTiled enforces (CUDA 12/13, tiled
 * mode, no interleave), checked here on every backend so a kernel that runs
 * on the CPU is not refused on a GPU, plus memory safety: every element the
 * map can address lies inside the array's elements, because the copy engine
 * reads (or writes) whatever the map names. */
#include <stdint.h>

#include "error.h"
#include "tensor_map.h"

#define TWO_POW_32 (1LL << 32)
#define TWO_POW_40 (1LL << 40)

alloy_status alloy_tensor_map_check(const char *kernel, const alloy_tensor_map_arg *m,
                                    const alloy_tensor_map_target *t) {
    const alloy_tensor_map_spec *s = &m->spec;
    const char *k = kernel, *n = m->name;
    const long long es = (long long)alloy_dtype_size(t->dtype);
    if (t->ndim == 0)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': tensor map '%s': %s %d ('%s') is 0-d; a tensor map "
                           "describes an array", k, n, t->role, t->index, t->name);
    if (es != 1 && es != 2 && es != 4 && es != 8)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': tensor map '%s': %s '%s' has %lld-byte elements (1, 2, 4 "
                           "or 8 bytes)", k, n, t->role, t->name, es);
    if (s->rank < 1 || s->rank > ALLOY_TENSOR_MAP_MAX_RANK)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': tensor map '%s': rank = %d is out of range [1, %d]", k, n,
                           s->rank, ALLOY_TENSOR_MAP_MAX_RANK);
    if (s->offset < 0)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': tensor map '%s': offset = %lld is negative", k, n,
                           (long long)s->offset);
    for (int d = 0; d < s->rank; d++)
        if (s->dims[d] < 1 || s->dims[d] > TWO_POW_32)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "kernel '%s': tensor map '%s': dims[%d] = %lld is out of range [1, "
                               "2^32]", k, n, d, (long long)s->dims[d]);
    if (s->strides[0] != 1)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': tensor map '%s': strides[0] = %lld must be 1 (the copy "
                           "engine reads the innermost dimension contiguously)", k, n,
                           (long long)s->strides[0]);
    for (int d = 1; d < s->rank; d++) {
        const long long st = (long long)s->strides[d];
        if (st <= 0)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "kernel '%s': tensor map '%s': strides[%d] = %lld must be positive",
                               k, n, d, st);
        if (st >= TWO_POW_40 / es) /* es divides 2^40: the byte stride is below 2^40 exactly then */
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "kernel '%s': tensor map '%s': strides[%d] = %lld elements of %lld "
                               "bytes is 2^40 bytes or more", k, n, d, st, es);
        if (st * es % 16)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "kernel '%s': tensor map '%s': strides[%d] = %lld elements = %lld "
                               "bytes is not a multiple of 16 bytes", k, n, d, st, st * es);
    }
    for (int d = 0; d < s->rank; d++)
        if (s->box[d] < 1 || s->box[d] > 256)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "kernel '%s': tensor map '%s': box[%d] = %u is out of range [1, 256]",
                               k, n, d, s->box[d]);
    const long long row = (long long)s->box[0] * es;
    if (row % 16)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': tensor map '%s': box[0] = %u elements = %lld bytes is not a "
                           "multiple of 16 bytes", k, n, s->box[0], row);
    if (s->swizzle != 0 && s->swizzle != 32 && s->swizzle != 64 && s->swizzle != 128)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': tensor map '%s': swizzle = %u is not 0, 32, 64 or 128 "
                           "(bytes)", k, n, s->swizzle);
    if (s->swizzle && row > (long long)s->swizzle)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': tensor map '%s': box[0] = %u elements = %lld bytes is wider "
                           "than the swizzle span of %u bytes", k, n, s->box[0], row, s->swizzle);
    /* The last element the map can address, in elements from the array's
     * first one (the first is `offset` >= 0: strides are positive). */
    long long last = (long long)s->offset, reach, end;
    int over = 0;
    for (int d = 1; d < s->rank; d++) {
        over |= __builtin_mul_overflow((long long)s->dims[d] - 1, (long long)s->strides[d], &reach);
        over |= __builtin_add_overflow(last, reach, &last);
    }
    over |= __builtin_add_overflow(last, (long long)s->dims[0] - 1, &last);
    /* byte just past that element, from the array's first element */
    over |= __builtin_add_overflow(last, 1LL, &end) || __builtin_mul_overflow(end, es, &end);
    const long long limit = t->span_lo + (long long)t->span_bytes;
    if (over || end > limit)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': tensor map '%s': offset + (dims - 1) * strides reaches "
                           "element %s%lld of %s '%s', which holds elements up to %lld: the map "
                           "must lie inside the %s (offset, dims, strides)", k, n,
                           over ? "beyond " : "", over ? (long long)INT64_MAX : last, t->role, t->name,
                           limit / es - 1, t->role);
    if (t->data) {
        const uintptr_t base = (uintptr_t)t->data + (uintptr_t)(s->offset * es);
        if (base % 16)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "kernel '%s': tensor map '%s': the base address (%s '%s' + offset "
                               "%lld elements) is not 16-byte aligned (it is %u bytes past a "
                               "16-byte boundary)", k, n, t->role, t->name, (long long)s->offset,
                               (unsigned)(base % 16));
    }
    return ALLOY_OK;
}
