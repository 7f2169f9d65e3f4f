/* alloy/linalg.h — the catalog's dense linear algebra: matrix products.
 *
 * Catalog operations are kernels of the library's own (src/ops/linalg/
 * kernels/, one .metal file each) launched through the public runtime. Each validates its
 * arguments (an error names the argument), runs on the given stream (NULL:
 * the inputs' device's default stream), never waits for the device, and
 * allocates nothing on the device when the caller gives the output. */
#ifndef ALLOY_LINALG_H
#define ALLOY_LINALG_H

#include "status.h"
#include "dtype.h"
#include "device.h"
#include "array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What float32 products may give up for speed (float16, bfloat16 and
 * float64 always accumulate exactly in float / double). The error of each
 * is documented in docs/linalg.md. */
typedef enum alloy_precision {
    ALLOY_PRECISION_HIGHEST = 0, /* exact fp32 products and fp32 sums */
    ALLOY_PRECISION_HIGH = 1,    /* error no worse than an fp32 GEMM's (split tensor-core
                                    products where the device has them) */
    ALLOY_PRECISION_DEFAULT = 2  /* may round the factors to TF32 (10-bit mantissa) */
} alloy_precision;

typedef struct alloy_matmul_options {
    int transpose_a;           /* use the transpose of a's last two dimensions */
    int transpose_b;
    double alpha, beta;        /* out = alpha * a b + beta * out (beta needs a given out) */
    alloy_precision precision;
    int out_dtype_set;         /* 1: out_dtype below; 0: the inputs' dtype */
    alloy_dtype out_dtype;
} alloy_matmul_options;

/* transpose 0, alpha 1, beta 0, precision highest, the inputs' dtype. */
void alloy_matmul_options_init(alloy_matmul_options *options);

/* NumPy's matmul: a (..., M, K) times b (..., K, N) -> (..., M, N), leading
 * dimensions broadcast; a 1-D a is a row (its M dimension is dropped from the
 * result), a 1-D b a column (N dropped). a and b: the same dtype, float32,
 * float16, bfloat16 or float64, on the same device; any strides (transposed
 * and strided views are read in place). The result dtype is any of those
 * four.
 * `*out` NULL: a new array is returned there (caller frees; beta must be 0).
 * `*out` an array: it receives the result (it must have the result's shape
 * and dtype, live on the same device and be row-contiguous; beta may be
 * non-zero) and stays the caller's. `options` NULL: the defaults. */
alloy_status alloy_matmul(alloy_array *a, alloy_array *b, const alloy_matmul_options *options,
                          alloy_stream *stream, alloy_array **out);

#ifdef __cplusplus
}
#endif
#endif
