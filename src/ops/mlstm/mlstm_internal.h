/* mlstm_internal.h — what the mLSTM operations (step.c, parallel.c,
 * chunkwise.c, chunkwise_backward.c) share:
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

/* eps: finite and >= 0. */
alloy_status alloy_mlstm_check_eps(const char *fn, double eps);

/* chunk_size: 0 (ALLOY_MLSTM_DEFAULT_CHUNK) or a power of two from 16 to
 * 1024; *len receives the chunk length. */
alloy_status alloy_mlstm_chunk_length(const char *fn, int chunk_size, int64_t *len);

/* The sizes of whole sequences, (B, NH, S, DHQK / DHHV), and the shapes of
 * q and k, of v (and h), and of the gates. */
typedef struct alloy_mlstm_dims {
    int64_t B, NH, S, DHQK, DHHV;
    int64_t qk[4], v[4], g[3];
} alloy_mlstm_dims;

/* k, v, i, f against an already checked q (B, NH, S, DHQK): v (B, NH, S,
 * DHHV) with DHHV >= 1, S within the kernels' limit, every operand on q's
 * device with q's dtype and its shape. */
alloy_status alloy_mlstm_check_sequences(const char *fn, alloy_array *q, alloy_array *k, alloy_array *v,
                                         alloy_array *i, alloy_array *f, alloy_mlstm_dims *d);

/* The output `*slot` (called `name`): a given array must live on dev, have
 * dtype dt and this shape, and be row-contiguous; NULL makes a new one.
 * `*res` receives the array to write; `*created` says whether it is new. */
alloy_status alloy_mlstm_prepare_out(const char *fn, const char *name, alloy_array **slot, alloy_device *dev,
                                     alloy_dtype dt, int nd, const int64_t *shape, alloy_array **res,
                                     int *created);

/* cu_seqlens (NULL: dense, *nseq = B): on q's device, int32, 1-D (N + 1,),
 * q packed (B = 1); *nseq receives N. On the CPU the values are checked too
 * (cu[0] = 0, non-decreasing, cu[N] = S, the packed length); errors name
 * cu_seqlens. */
alloy_status alloy_mlstm_check_cu_seqlens(const char *fn, alloy_array *cu, alloy_device *dev, int64_t B, int64_t S,
                                          int64_t *nseq);

#endif
