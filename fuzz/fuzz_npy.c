/* fuzz_npy.c — libFuzzer target for the CLI's .npy reader (tools/npy.c):
 * arbitrary bytes as a .npy image must parse or fail with a message, never
 * read out of bounds or leak. A parsed array is written back out and read
 * again, and must come back the same. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    npy_array a;
    char err[512];
    if (npy_parse(data, size, "fuzz.npy", &a, err, sizeof err) != 0) return 0;
    if (a.dtype != ALLOY_BFLOAT16 && a.nbytes < (1u << 20)) {
        char path[] = "/tmp/alloy-fuzz-npy-XXXXXX";
        int fd = mkstemp(path);
        if (fd >= 0) {
            close(fd);
            npy_array b;
            if (npy_write(path, a.dtype, a.ndim, a.shape, a.data, err, sizeof err) == 0 &&
                npy_read(path, &b, err, sizeof err) == 0) {
                if (b.dtype != a.dtype || b.ndim != a.ndim || b.nbytes != a.nbytes ||
                    (a.nbytes && memcmp(a.data, b.data, a.nbytes) != 0))
                    abort(); /* what was written does not read back */
                npy_free(&b);
            }
            unlink(path);
        }
    }
    npy_free(&a);
    return 0;
}
