/* test_cuda_dlpack.c — DLPack export and import of CUDA device arrays
 * (kDLCUDA): the tensor describes device memory of the right device, a round
 * trip shares that memory, and a kernel's writes through the imported array
 * are visible through the original. Skips without a CUDA device. */
#include "harness.h"

static alloy_device *cuda(void) {
    alloy_device *d = NULL;
    return alloy_device_get("cuda", &d) == ALLOY_OK ? d : NULL;
}

static void test_export_import_roundtrip(void) {
    alloy_device *dev = cuda();
    if (!dev) { SKIP("no CUDA device"); return; }
    int64_t shape[2] = {33, 7};
    float host[33 * 7];
    for (int i = 0; i < 33 * 7; i++) host[i] = (float)i * 0.5f;
    alloy_array *a = NULL, *b = NULL;
    CHECK_OK(alloy_array_from_host(dev, ALLOY_FLOAT32, 2, shape, host, &a));
    if (!a) return;
    DLManagedTensorVersioned *t = NULL;
    CHECK_OK(alloy_array_to_dlpack(a, &t));
    if (!t) { alloy_array_free(a); return; }
    CHECK(t->dl_tensor.device.device_type == kDLCUDA);
    CHECK(t->dl_tensor.device.device_id == 0);
    CHECK(t->dl_tensor.data == alloy_array_data(a));
    CHECK(t->dl_tensor.dtype.code == kDLFloat && t->dl_tensor.dtype.bits == 32);
    CHECK(t->dl_tensor.shape[0] == 33 && t->dl_tensor.shape[1] == 7);
    CHECK_OK(alloy_array_from_dlpack(t, &b));
    if (b) {
        CHECK(alloy_array_device(b) == dev);
        CHECK(alloy_array_data(b) == alloy_array_data(a)); /* no copy */
        /* a kernel writes through b; a sees it */
        static const char *in[] = {"x"}, *out[] = {"y"};
        alloy_kernel *k = NULL;
        CHECK_OK(alloy_kernel_new("dl_double", 1, in, 1, out,
                                  "uint i = thread_position_in_grid.x;\n"
                                  "if (i < uint(x_shape[0] * x_shape[1])) y[i] = 2.0f * x[i];\n",
                                  NULL, 1, 0, &k));
        alloy_launch *l = NULL;
        CHECK_OK(alloy_launch_new(&l));
        CHECK_OK(alloy_launch_add_output_array(l, b));
        CHECK_OK(alloy_launch_set_grid(l, 33 * 7, 1, 1));
        CHECK_OK(alloy_launch_set_threadgroup(l, 64, 1, 1));
        alloy_array *res = NULL;
        CHECK_OK(alloy_kernel_apply(k, 1, &a, l, NULL, &res));
        float got[33 * 7];
        CHECK_OK(alloy_array_copy_to_host(a, got, sizeof got));
        int bad = 0;
        for (int i = 0; i < 33 * 7; i++) bad += got[i] != host[i] * 2.0f;
        CHECK_MSG(bad == 0, "%d elements differ", bad);
        alloy_array_free(res);
        alloy_launch_free(l);
        alloy_kernel_free(k);
        alloy_array_free(b); /* runs the tensor's deleter: drops its reference to a */
    } else {
        t->deleter(t);
    }
    alloy_array_free(a);
}

static void test_legacy_export(void) {
    alloy_device *dev = cuda();
    if (!dev) { SKIP("no CUDA device"); return; }
    int64_t n = 5;
    alloy_array *a = NULL;
    CHECK_OK(alloy_array_new(dev, ALLOY_BFLOAT16, 1, &n, &a));
    if (!a) return;
    DLManagedTensor *t = NULL;
    CHECK_OK(alloy_array_to_dlpack_legacy(a, &t));
    if (t) {
        CHECK(t->dl_tensor.device.device_type == kDLCUDA);
        CHECK(t->dl_tensor.dtype.code == kDLBfloat && t->dl_tensor.dtype.bits == 16);
        t->deleter(t);
    }
    alloy_array_free(a);
}

int main(void) {
    RUN(test_export_import_roundtrip);
    RUN(test_legacy_export);
    return harness_finish();
}
