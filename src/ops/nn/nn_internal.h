/* nn_internal.h — what the fused nn operations (softcap.c, norm.c,
 * causal_conv.c) share: operand and output checks (errors name the
 * argument), the accumulation dtype and a launch helper. */
#ifndef ALLOY_OPS_NN_INTERNAL_H
#define ALLOY_OPS_NN_INTERNAL_H

#include "alloy/alloy.h"
#include "ops/vector_access.h"

/* The first operand, x: non-NULL, float32/float16/bfloat16/float64, at least
 * min_nd dimensions, on the stream's device when a stream is given. */
alloy_status alloy_nn_check_x(const char *fn, alloy_array *x, int min_nd, alloy_stream *stream);

/* Another operand `name`: non-NULL, on dev, dtype dt, exactly this shape. */
alloy_status alloy_nn_check(const char *fn, const char *name, alloy_array *a, alloy_device *dev, alloy_dtype dt,
                            int nd, const int64_t *shape);

/* The output `*slot` (called `name`): a given array must live on dev, have
 * dtype dt and this shape, and be row-contiguous; NULL makes a new one.
 * `*res` receives the array to write; `*created` says whether it is new. */
alloy_status alloy_nn_prepare_out(const char *fn, const char *name, alloy_array **slot, alloy_device *dev,
                                  alloy_dtype dt, int nd, const int64_t *shape, alloy_array **res, int *created);

/* float64 sums for float64 data, float32 for the rest. */
alloy_dtype alloy_nn_accum(alloy_dtype dt);

/* Runs the catalog kernel `path` with templates T = dt and A =
 * alloy_nn_accum(dt) added to `launch`, and drops the references the apply
 * returns (the outputs were given to the launch). */
alloy_status alloy_nn_apply(const char *path, alloy_launch *launch, alloy_dtype dt, int n_inputs,
                            alloy_array **inputs, int n_outputs, alloy_stream *stream);

/* Threads of a 1-D grid-stride launch over n items (a multiple of 256, at
 * most 2^24: the loop covers the rest). */
int64_t alloy_nn_grid_threads(int64_t n);

/* The second stage of a deterministic row reduction (column_sum.metal):
 * the P rows of part (P, M), of dtype alloy_nn_accum(dt), summed in a fixed
 * order; columns below M1 into a, the rest into b (both of dtype dt). */
alloy_status alloy_nn_column_sum(alloy_array *part, int64_t P, int64_t M, int64_t M1, alloy_array *a,
                                 alloy_array *b, alloy_dtype dt, alloy_stream *stream);

/* Rows of each partial sum of a deterministic row reduction over `rows` rows
 * (at most 512 partial sums, each of at least 16 rows). */
int64_t alloy_nn_rows_per_part(int64_t rows);

#endif
