/* alloy/mlstm.h — the catalog's mLSTM cell (xLSTM's mLSTMexp: exponential
 * input gate, log-sigmoid forget gate, max stabiliser with m_0 = 0, normaliser
 * max(|q^ . n|, exp(-m)) + eps, q^ = q DHQK^-1/2; docs/mlstm.md gives the
 * equations). Layouts and shapes are those of NX-AI's mlstm_kernels: heads
 * before time, (B, NH, S, D).
 *
 * Inputs q, k, v, i, f share one dtype: float32, float16 or bfloat16; states
 * (C, n, m) are float32 and every sum is float32; h has the inputs' dtype.
 * Like every catalog operation, each call validates its arguments (an error
 * names the argument), runs on the given stream (NULL: the inputs' device's
 * default stream), never waits for the device, and allocates nothing on the
 * device when the caller gives every output and the inputs are
 * row-contiguous (a strided input is copied first). */
#ifndef ALLOY_MLSTM_H
#define ALLOY_MLSTM_H

#include "status.h"
#include "dtype.h"
#include "device.h"
#include "array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One recurrent step (generation): one token for each of B sequences.
 *   q, k (B, NH, DHQK), v (B, NH, DHHV), i, f (B, NH, 1) gate pre-activations;
 *   c (B, NH, DHQK, DHHV), n (B, NH, DHQK), m (B, NH, 1): the states, float32.
 * Results: *h (B, NH, DHHV) of q's dtype and the new states *c_out, *n_out,
 * *m_out (float32, the shapes of c, n, m). Each out slot: NULL receives a new
 * array (caller frees); a given array is written (it must have that shape and
 * dtype, live on q's device and be row-contiguous) and stays the caller's.
 * In place: pass the state itself as its output (*c_out == c, and likewise n,
 * m) and it is updated there; no other overlap between inputs and outputs
 * is allowed. The step is two launches (C and h, then n and m), so a state
 * is never read after it was overwritten. DHQK, DHHV >= 1; eps >= 0 (1e-6 is
 * mlstm_kernels' default). */
alloy_status alloy_mlstm_step(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i, alloy_array *f,
                              alloy_array *c, alloy_array *n, alloy_array *m, double eps, alloy_stream *stream,
                              alloy_array **h, alloy_array **c_out, alloy_array **n_out, alloy_array **m_out);

/* The quadratic (parallel) form over whole sequences from zero initial
 * states: q, k (B, NH, S, DHQK), v (B, NH, S, DHHV), i, f (B, NH, S) ->
 * *h (B, NH, S, DHHV) of q's dtype; equal to S recurrent steps from
 * (C, n, m) = 0 (the stabiliser includes m_0 = 0 as the step's does). Any
 * S >= 0, DHQK, DHHV >= 1. *h: NULL receives a new array; a given one is
 * written (shape, dtype, device, row-contiguous as above). */
alloy_status alloy_mlstm_parallel(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i,
                                  alloy_array *f, double eps, alloy_stream *stream, alloy_array **h);

#ifdef __cplusplus
}
#endif

#endif
