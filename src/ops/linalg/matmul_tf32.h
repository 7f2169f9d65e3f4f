/* matmul_tf32.h — float32 GEMM on Hopper's TF32 tensor cores (matmul_tf32.c),
 * private to alloy_matmul. */
#ifndef ALLOY_OPS_LINALG_MATMUL_TF32_H
#define ALLOY_OPS_LINALG_MATMUL_TF32_H

#include <stdint.h>

#include "alloy/array.h"
#include "alloy/status.h"
#include "batch_layout.h"

/* One alloy_matmul call as matmul.c reduced it: `batch` products per launch of
 * M x K (a, strides sa_*) times K x N (b, strides sb_*) into c (strides sc_b,
 * sc_m, unit column stride), one launch per outer index of `bl` (operands 0,
 * 1, 2 = a, b, c). passes: 6 (precision "highest"), 3 ("high") or 1
 * ("default"). */
typedef struct alloy_matmul_tf32_job {
    alloy_array *a, *b, *c;
    int64_t M, N, K, batch;
    int64_t sa_b, sa_m, sa_k, sb_b, sb_k, sb_n, sc_b, sc_m;
    const alloy_batch_layout *bl;
    double alpha, beta;
    int passes;
} alloy_matmul_tf32_job;

/* Queues the products on `stream`. ALLOY_ERROR_OUT_OF_MEMORY when its
 * workspace (the operands rewritten as TF32 parts) cannot be allocated, and
 * ALLOY_ERROR_UNSUPPORTED when the sizes pass its launches' limits (M or N
 * over about 2 million, 2^31 tiles): nothing was queued then, and the caller
 * may take another kernel. */
alloy_status alloy_matmul_tf32(const alloy_matmul_tf32_job *j, alloy_stream *stream);

#endif
