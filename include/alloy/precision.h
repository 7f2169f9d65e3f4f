/* alloy/precision.h — what float32 products may give up for speed, one enum
 * for every catalog op that takes the choice (alloy_matmul, the mLSTM
 * chunkwise forward). float16, bfloat16 and float64 inputs always accumulate
 * exactly in float / double; the error of each choice is documented with the
 * op (docs/linalg.md, docs/mlstm.md). */
#ifndef ALLOY_PRECISION_H
#define ALLOY_PRECISION_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum alloy_precision {
    ALLOY_PRECISION_HIGHEST = 0, /* fp32 products (exact, or to 2^-32 where split into
                                    tensor-core parts) and fp32 sums */
    ALLOY_PRECISION_HIGH = 1,    /* error no worse than an fp32 GEMM's (split tensor-core
                                    products where the device has them) */
    ALLOY_PRECISION_DEFAULT = 2  /* may round the factors to TF32 (10-bit mantissa) */
} alloy_precision;

#ifdef __cplusplus
}
#endif
#endif
