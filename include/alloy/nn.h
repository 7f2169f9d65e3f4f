/* alloy/nn.h — the catalog's fused neural-network operations of the xLSTM
 * block, forward and backward: soft-cap, RMSNorm and LayerNorm over the last
 * dimension (optionally per head) and the causal depthwise convolution over
 * time with a decoding state (docs/nn.md gives the math).
 *
 * Dtypes: every operand of one call shares one dtype: float32, float16,
 * bfloat16 or float64 (float64 where the backend has it: the CPU). Results
 * have that dtype; sums and statistics are float32 (float64 for float64).
 * Like every catalog operation, each call validates its arguments (an error
 * names the argument), runs on the given stream (NULL: x's device's default
 * stream) and never waits for the device. Output slots: NULL receives a new
 * array (caller frees); a given array is written (it must have the result's
 * shape and dtype, live on x's device and be row-contiguous) and stays the
 * caller's. Backward calls that reduce over rows (dweight, dbias, dw, db)
 * allocate small float32/float64 scratch arrays and sum in a fixed order, so
 * their results are deterministic. */
#ifndef ALLOY_NN_H
#define ALLOY_NN_H

#include "status.h"
#include "dtype.h"
#include "device.h"
#include "array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = cap * tanh(x / cap), elementwise, any shape; cap finite and > 0. */
alloy_status alloy_nn_softcap(alloy_array *x, double cap, alloy_stream *stream, alloy_array **y);

/* dx = dy * (1 - tanh(x / cap)^2); dy has x's shape and dtype. */
alloy_status alloy_nn_softcap_backward(alloy_array *x, alloy_array *dy, double cap, alloy_stream *stream,
                                       alloy_array **dx);

/* Normalisation over the last dimension D of x (ndim >= 1), in groups of
 * head_dim consecutive elements (0: head_dim = D, one group per row; else D
 * must be a multiple of head_dim — xLSTM's multi-head norm). Per group of n
 * elements, statistics in float32 (float64):
 *   RMSNorm:   y = x / sqrt(mean(x^2) + eps) * weight
 *   LayerNorm: y = (x - mean(x)) / sqrt(mean((x - mean)^2) + eps) * weight + bias
 * weight (D,) is required; bias (D,) may be NULL (no bias). eps finite, >= 0. */
alloy_status alloy_nn_rms_norm(alloy_array *x, alloy_array *weight, int64_t head_dim, double eps,
                               alloy_stream *stream, alloy_array **y);
alloy_status alloy_nn_layer_norm(alloy_array *x, alloy_array *weight, alloy_array *bias, int64_t head_dim,
                                 double eps, alloy_stream *stream, alloy_array **y);

/* Backward of the norms, from x and the upstream gradient dy (x's shape);
 * the statistics are recomputed from x (nothing is saved by the forward).
 * *dx (x's shape), *dweight (D,) = sum over rows of dy * x^ (x^ the
 * normalised x), *dbias (D,) = sum over rows of dy. dweight and dbias may be
 * NULL (not computed); dx must not be. */
alloy_status alloy_nn_rms_norm_backward(alloy_array *x, alloy_array *weight, alloy_array *dy, int64_t head_dim,
                                        double eps, alloy_stream *stream, alloy_array **dx,
                                        alloy_array **dweight);
alloy_status alloy_nn_layer_norm_backward(alloy_array *x, alloy_array *weight, alloy_array *dy, int64_t head_dim,
                                          double eps, alloy_stream *stream, alloy_array **dx,
                                          alloy_array **dweight, alloy_array **dbias);

/* The forward that also gives each group's statistics, what a framework keeps
 * between the passes (8 bytes a group for float32): y is the plain forward's,
 * bit for bit, and *stats (R, G, 2) — R = size(x) / D rows, G = D / head_dim
 * groups a row — holds each group's (mean, rstd) in float32 (float64 for
 * float64 x), rstd = 1 / sqrt(variance + eps); RMSNorm's mean is 0 and
 * its rstd 1 / sqrt(mean(x^2) + eps). stats NULL is an error (use the plain
 * forward); *stats NULL receives a new array, a given one is written. */
alloy_status alloy_nn_rms_norm_stats(alloy_array *x, alloy_array *weight, int64_t head_dim, double eps,
                                     alloy_stream *stream, alloy_array **y, alloy_array **stats);
alloy_status alloy_nn_layer_norm_stats(alloy_array *x, alloy_array *weight, alloy_array *bias, int64_t head_dim,
                                       double eps, alloy_stream *stream, alloy_array **y, alloy_array **stats);

/* The backward from saved statistics (the _stats forward's, for this x and
 * head_dim): the gradient at those statistics, without recomputing them —
 * the row kernels then make one pass and one reduction round a row. eps is
 * not needed (it is in rstd); RMSNorm's mean slot is not read. */
alloy_status alloy_nn_rms_norm_backward_stats(alloy_array *x, alloy_array *weight, alloy_array *dy,
                                              alloy_array *stats, int64_t head_dim, alloy_stream *stream,
                                              alloy_array **dx, alloy_array **dweight);
alloy_status alloy_nn_layer_norm_backward_stats(alloy_array *x, alloy_array *weight, alloy_array *dy,
                                                alloy_array *stats, int64_t head_dim, alloy_stream *stream,
                                                alloy_array **dx, alloy_array **dweight, alloy_array **dbias);

/* The largest kernel size of the causal depthwise convolution. */
#define ALLOY_NN_CONV_MAX_K 8

/* Causal depthwise convolution over time: x (B, S, C), w (C, K) with
 * 1 <= K <= ALLOY_NN_CONV_MAX_K, bias (C,) or NULL:
 *   y[b,t,c] = bias[c] + sum_{j<K} w[c,j] * x[b, t-K+1+j, c]
 * where a negative time reads the state: state (B, K-1, C) holds the K-1
 * inputs before x (state[b, K-1+tau, c] for time tau < 0), or zeros when state
 * is NULL. *y (B, S, C). state_out NULL: not computed; else it receives the
 * last K-1 inputs of (state, x) along time, (B, K-1, C) — the state for the
 * next call (decoding step by step: S = 1). In place: *state_out == state
 * updates the state (read fully by y's launch before it is overwritten). */
alloy_status alloy_nn_causal_conv1d(alloy_array *x, alloy_array *w, alloy_array *bias, alloy_array *state,
                                    alloy_stream *stream, alloy_array **y, alloy_array **state_out);

/* Its backward from dy (B, S, C): *dx (B, S, C), *dw (C, K), *db (C,) (NULL:
 * not computed), and *dstate (B, K-1, C), the gradient for the given state
 * (NULL slot or no state: not computed). */
alloy_status alloy_nn_causal_conv1d_backward(alloy_array *x, alloy_array *w, alloy_array *state, alloy_array *dy,
                                             alloy_stream *stream, alloy_array **dx, alloy_array **dw,
                                             alloy_array **db, alloy_array **dstate);

#ifdef __cplusplus
}
#endif

#endif
