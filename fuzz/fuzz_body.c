/* fuzz_body.c — libFuzzer target for the body path: kernel construction
 * (name checks, token scan, analysis) and the generation of the CPU and CUDA
 * translation units for a launch, on arbitrary bytes as the body. Nothing is
 * compiled: the compilers are not under test, alloy's text handling is. The
 * first byte picks the input's rank and whether a header is split off. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloy/alloy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static alloy_device *dev;
    static alloy_array *x[3];
    if (!dev) {
        if (alloy_device_get("cpu", &dev) != ALLOY_OK) abort();
        int64_t shape[3] = {3, 2, 2};
        for (int r = 0; r < 3; r++)
            if (alloy_array_new(dev, ALLOY_FLOAT32, r + 1, shape, &x[r]) != ALLOY_OK) abort();
    }
    if (size == 0) return 0;
    const int rank = data[0] % 3, split_header = (data[0] >> 2) & 1;
    char *text = malloc(size);
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0; /* bodies are C strings: the text ends at the first NUL */
    char *body = text, *header = NULL;
    if (split_header) { /* the text before the first form feed is the header */
        char *ff = strchr(text, '\f');
        if (ff) {
            *ff = 0;
            header = text;
            body = ff + 1;
        }
    }
    const char *in[] = {"x"}, *out[] = {"out"};
    alloy_kernel *k = NULL;
    if (alloy_kernel_new("fuzz", 1, in, 1, out, body, header, 1, 0, &k) == ALLOY_OK) {
        alloy_launch *l = NULL;
        int64_t n = 4;
        if (alloy_launch_new(&l) == ALLOY_OK &&
            alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32) == ALLOY_OK &&
            alloy_launch_set_grid(l, 5, 3, 1) == ALLOY_OK &&
            alloy_launch_set_threadgroup(l, 4, 2, 1) == ALLOY_OK &&
            alloy_launch_add_template_dtype(l, "T", ALLOY_BFLOAT16) == ALLOY_OK) {
            char *src = NULL;
            if (alloy_kernel_generated_source(k, 1, &x[rank], l, dev, &src) == ALLOY_OK) free(src);
        }
        alloy_launch_free(l);
        alloy_kernel_free(k);
    }
    free(text);
    return 0;
}
