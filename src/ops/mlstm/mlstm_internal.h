/* mlstm_internal.h — what the mLSTM operations (step.c, parallel.c,
 * chunkwise.c) share:
 * checks of the operands (errors name the argument) and of given outputs. */
#ifndef ALLOY_OPS_MLSTM_INTERNAL_H
#define ALLOY_OPS_MLSTM_INTERNAL_H

#include "alloy/alloy.h"
#include "alloy/mlstm.h"

/* Checks that `x` (called `name` in messages of `fn`) is non-NULL, lives on
 * dev, has dtype dt and exactly this shape (nd dimensions). */
alloy_status alloy_mlstm_check(const char *fn, const char *name, alloy_array *x, alloy_device *dev,
                               alloy_dtype dt, int nd, const int64_t *shape);

/* The first operand, q: non-NULL, nd dimensions, float32, float16 or
 * bfloat16, on the stream's device when a stream is given. */
alloy_status alloy_mlstm_check_q(const char *fn, alloy_array *q, int nd, alloy_stream *stream);

/* The output `*slot` (called `name`): a given array must live on dev, have
 * dtype dt and this shape, and be row-contiguous; NULL makes a new one.
 * `*res` receives the array to write; `*created` says whether it is new. */
alloy_status alloy_mlstm_prepare_out(const char *fn, const char *name, alloy_array **slot, alloy_device *dev,
                                     alloy_dtype dt, int nd, const int64_t *shape, alloy_array **res,
                                     int *created);

#endif
