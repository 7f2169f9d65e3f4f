/* test_core_gather.c — the core's built-in gather kernel (how non-contiguous
 * views become contiguous on devices the host cannot read), run on the test
 * device against a host loop over the same view. */
#include "harness.h"
#include "core/builtin_kernels.h"

/* Reference: element i of the row-major order of the view. */
static int64_t view_offset(int ndim, const int64_t *shape, const int64_t *strides, int64_t i) {
    int64_t loc = 0;
    for (int d = ndim - 1; d >= 0; d--) {
        loc += (i % shape[d]) * strides[d];
        i /= shape[d];
    }
    return loc;
}

static void check_view(alloy_dtype dt, int ndim, const int64_t *shape, const int64_t *strides,
                       int64_t offset, int64_t base_elems) {
    alloy_device *dev = harness_device();
    size_t item = alloy_dtype_size(dt);
    unsigned char *host = malloc((size_t)base_elems * item);
    for (int64_t i = 0; i < base_elems * (int64_t)item; i++) host[i] = (unsigned char)harness_rand_u64();
    alloy_array *base = NULL, *view = NULL, *out = NULL;
    CHECK_OK(alloy_array_from_host(dev, dt, 1, &base_elems, host, &base));
    if (!base) { free(host); return; }
    CHECK_OK(alloy_array_wrap(dev, alloy_array_data(base), dt, ndim, shape, strides, offset, NULL, NULL, &view));
    CHECK_OK(alloy_array_new(dev, dt, ndim, shape, &out));
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    if (view && out) {
        CHECK_OK(alloy_array_fill(out, 0));
        CHECK_OK(alloy_builtin_gather(view, out));
        unsigned char *got = malloc((size_t)(n ? n : 1) * item);
        CHECK_OK(alloy_array_copy_to_host(out, got, (size_t)n * item));
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t loc = offset + view_offset(ndim, shape, strides, i);
            if (memcmp(got + i * (int64_t)item, host + loc * (int64_t)item, item)) bad++;
        }
        CHECK_MSG(bad == 0, "%lld of %lld elements differ (dtype %s, ndim %d)", (long long)bad,
                  (long long)n, alloy_dtype_name(dt), ndim);
        /* copy_to_host of the view itself goes through the same path off the CPU */
        unsigned char *direct = malloc((size_t)(n ? n : 1) * item);
        CHECK_OK(alloy_array_copy_to_host(view, direct, (size_t)n * item));
        CHECK(memcmp(direct, got, (size_t)n * item) == 0);
        free(direct);
        free(got);
    }
    alloy_array_free(out);
    alloy_array_free(view);
    alloy_array_free(base);
    free(host);
}

static void test_transposed(void) {
    int64_t shape[2] = {33, 29}, strides[2] = {1, 33};
    for (int dt = 0; dt < ALLOY_DTYPE_COUNT; dt++) check_view((alloy_dtype)dt, 2, shape, strides, 0, 33 * 29);
}

static void test_negative_and_broadcast(void) {
    int64_t shape[3] = {4, 7, 5}, strides[3] = {0, -5, 1}; /* broadcast, reversed rows */
    check_view(ALLOY_FLOAT32, 3, shape, strides, 30, 35);
    check_view(ALLOY_FLOAT16, 3, shape, strides, 30, 35);
    check_view(ALLOY_INT64, 3, shape, strides, 30, 35);
}

static void test_sizes(void) {
    int64_t one[1] = {1}, s1[1] = {3};
    check_view(ALLOY_FLOAT32, 1, one, s1, 2, 3);
    int64_t big[1] = {100003}, s2[1] = {2};
    check_view(ALLOY_FLOAT32, 1, big, s2, 1, 200007);
    int64_t empty[2] = {0, 5}, s3[2] = {5, 1};
    check_view(ALLOY_FLOAT32, 2, empty, s3, 0, 1);
    int64_t eight[8] = {2, 3, 1, 2, 3, 1, 2, 2}, s8[8];
    int64_t s = 1;
    for (int d = 0; d < 8; d++) { s8[d] = s; s *= eight[d]; } /* column-major */
    check_view(ALLOY_UINT8, 8, eight, s8, 0, s);
}

int main(void) {
    harness_seed();
    RUN(test_transposed);
    RUN(test_negative_and_broadcast);
    RUN(test_sizes);
    return harness_finish();
}
