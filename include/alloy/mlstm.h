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
#include "precision.h"

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
 * is allowed. With n and m updated in place the step is two launches (C and
 * h, then n and m), so a state is never read after it was overwritten; with
 * the new n and m in other arrays (a decoding loop's two state buffers) it is
 * one. DHQK, DHHV >= 1; eps >= 0 (1e-6 is mlstm_kernels' default). */
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

/* The chunk size alloy_mlstm_chunkwise uses when given 0. */
#define ALLOY_MLSTM_DEFAULT_CHUNK 64

/* The chunkwise form (prefill and training forward): whole sequences from
 * given or zero initial states, h and optionally the final states.
 *   Dense (cu_seqlens NULL): q, k (B, NH, S, DHQK), v (B, NH, S, DHHV),
 *   i, f (B, NH, S); N = B sequences of S tokens.
 *   Packed (cu_seqlens given): q, k (1, NH, T, DHQK), v (1, NH, T, DHHV),
 *   i, f (1, NH, T) hold N sequences back to back; cu_seqlens is int32
 *   (N + 1,), 0 = cu[0] <= cu[1] <= ... <= cu[N] = T (FlashAttention's
 *   varlen convention), sequence s the tokens cu[s] .. cu[s+1]-1. Each
 *   sequence runs alone from its own initial state (or zeros) and ends in its
 *   own final state. On the CPU the offsets are checked; on a GPU reading
 *   them would wait for the device, so they are not (each sequence is clamped
 *   to [0, T]; tokens outside every sequence are not written).
 * c_initial (N, NH, DHQK, DHHV), n_initial (N, NH, DHQK), m_initial (N, NH, 1),
 * float32: all three or none (none: zeros, m = 0). chunk_size: a power of two
 * from 16 to 1024, 0 for ALLOY_MLSTM_DEFAULT_CHUNK; any S >= 0 (a tail shorter
 * than a chunk is a shorter chunk; nothing is padded). DHQK from 1 to 512,
 * DHHV >= 1. Results: *h (the shape of v, q's dtype); the final states
 * *c_out, *n_out, *m_out (float32, the shapes of the initial states) when the
 * three slots are non-NULL (all three NULL: not computed). Each slot as in
 * alloy_mlstm_step: NULL receives a new array, a given one is written.
 * Equal to S recurrent steps (alloy_mlstm_step) for every chunk size.
 * chunk_size sets the blocking, which changes only the rounding: inputs run
 * chunks of min(chunk_size, 64) tokens and keep every chunk's starting state
 * in device scratch (DHQK x DHHV of the input dtype per chunk and head;
 * inputs that would need more than 2 GiB run in several windows), except
 * float32 inputs with DHQK over 256, which run chunk_size and need none
 * (docs/mlstm.md). */
alloy_status alloy_mlstm_chunkwise(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i, alloy_array *f,
                                   alloy_array *c_initial, alloy_array *n_initial, alloy_array *m_initial,
                                   alloy_array *cu_seqlens, int chunk_size, double eps, alloy_stream *stream,
                                   alloy_array **h, alloy_array **c_out, alloy_array **n_out, alloy_array **m_out);

/* alloy_mlstm_chunkwise with a choice of how float32 inputs' products are
 * rounded (alloy_mlstm_chunkwise is this with ALLOY_PRECISION_HIGH). On a
 * GPU, HIGH runs each product as three TF32 tensor-core products (float32
 * accuracy: about 1e-6 of max|h| at the 7B-model heads). DEFAULT rounds the
 * factors to 11 significant bits — TF32's, the precision of mlstm_kernels'
 * (TFLA's) float32 kernels — as float16 tiles with a power-of-two exponent
 * per row of q, k and v and per tile of the chunk states, so float32's range
 * stays: an error of about 5e-4 of max|h| at the 7B-model heads
 * (docs/mlstm.md gives the measurements), for speed. The CPU backend
 * computes exact float32 products whatever is asked (it has no faster
 * ones). HIGHEST (exact float32 products) has no kernel here:
 * ALLOY_ERROR_UNSUPPORTED naming `precision`. 16-bit inputs take any of the
 * three (their products are exact in float32). The backward's
 * alloy_mlstm_backward_method says how its products are rounded (CHUNKED_DEFAULT:
 * DEFAULT's float16 tiles); a forward that keeps its record (_keep) at DEFAULT
 * keeps the float16-tile record, for the backward at DEFAULT. */
alloy_status alloy_mlstm_chunkwise_with_precision(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i,
                                                  alloy_array *f, alloy_array *c_initial, alloy_array *n_initial,
                                                  alloy_array *m_initial, alloy_array *cu_seqlens, int chunk_size,
                                                  double eps, alloy_precision precision, alloy_stream *stream,
                                                  alloy_array **h, alloy_array **c_out, alloy_array **n_out,
                                                  alloy_array **m_out);

/* Training without the backward's recomputation: alloy_mlstm_chunkwise_with_precision
 * that also keeps its chunk record — every chunk's starting state and gate
 * record, which the chunk-parallel backward otherwise computes again — in
 * ALLOY_MLSTM_KEPT slots kept[0..8] (each must be NULL on entry; free what
 * they receive with alloy_array_free). Their layout is the library's: pass
 * them unchanged to alloy_mlstm_chunkwise_backward_kept with the same inputs.
 * kept[0..3] always receive arrays (the chunk states, n, m and the gate
 * records); kept[4..8] only for float32 inputs at precision DEFAULT on a GPU
 * (the forward on float16 tiles: the state tiles' factors, q, k and v as
 * float16 rows and the rows' exponents — the backward then runs
 * CHUNKED_DEFAULT on them), else they stay NULL. Memory: per chunk of
 * min(chunk_size, 64) tokens and head, DHQK DHHV elements of q's dtype
 * (float16 for the float16-tile record) and DHQK + chunk + 5 floats (twice
 * chunk for the float16-tile record, and ceil(DHQK / 64) DHHV factors), plus
 * the float16 rows (half of q, k and v's bytes); the 7B-model heads at B = 8,
 * S = 8192: 2.2 GB in bfloat16, 3.3 GB in float32 at DEFAULT. The final
 * states are required (c_out, n_out, m_out slots: the backward reads them).
 * Takes the inputs the chunk-parallel backward takes (bfloat16, and float32
 * with DHQK up to 256); others are an error naming `kept`. */
#define ALLOY_MLSTM_KEPT 9
alloy_status alloy_mlstm_chunkwise_keep(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i, alloy_array *f,
                                        alloy_array *c_initial, alloy_array *n_initial, alloy_array *m_initial,
                                        alloy_array *cu_seqlens, int chunk_size, double eps,
                                        alloy_precision precision, alloy_stream *stream, alloy_array **h,
                                        alloy_array **c_out, alloy_array **n_out, alloy_array **m_out,
                                        alloy_array **kept);

/* How alloy_mlstm_chunkwise_backward_with_method computes the gradient.
 *   EXACT: one threadgroup per (sequence, head) walks the sequence with
 *     float32 states kept as compensated sums (float64 for float64 inputs):
 *     every gradient to a few float32 roundings of its largest element, also
 *     where hostile gates make the gradients nearly cancelling differences —
 *     but serial along the sequence (seconds at S = 8192 with 7B-model heads).
 *   CHUNKED: parallel over chunks, as matrix products (on a GPU's tensor
 *     cores; the forward's operands: bfloat16, or float32 as three TF32
 *     products), bfloat16 and
 *     float32 inputs only: milliseconds where EXACT takes seconds. Its
 *     operands and the stored chunk states carry the input dtype's rounding,
 *     which nearly cancelling gradients do not average out: with hostile gates
 *     (input gates far above the stabiliser, forget gates near -40: states
 *     nearly rank one) a gradient element can be off by a fifth of the
 *     largest (bfloat16; 0.22 the worst measured) or 1e-2 of it (float32);
 *     docs/mlstm.md gives the measurements.
 *   CHUNKED_DEFAULT: CHUNKED for float32 inputs at precision DEFAULT (the
 *     forward's alloy_precision DEFAULT: TF32's 11 significant bits, as
 *     mlstm_kernels' float32 kernels): the operands as float16 tiles with a
 *     power-of-two exponent per row of q, k, v and dh and per tile of the
 *     chunk states and their gradients, so float32's range stays, at the
 *     16-bit path's speed; the gradient of the forward computed the same way
 *     (it runs that forward again), on every backend. Errors of a few 1e-3
 *     of each gradient's largest element on ordinary inputs; where q^ . n
 *     cancels to 1e-4 of its terms (the hostile gates above) an 11-bit state
 *     leaves no significant digit (docs/mlstm.md): CHUNKED or EXACT there.
 *     alloy_mlstm_chunkwise_backward_kept runs this from a record kept at
 *     DEFAULT on float16 tiles (kept[4..8] given), CHUNKED from others.
 *   AUTO (0): CHUNKED for bfloat16 inputs (where it takes the sizes: DHQK up
 *     to 512 and the chunk's threadgroup memory; else EXACT), EXACT for
 *     float32, float16 and float64. The environment variable
 *     ALLOY_MLSTM_BWD_PATH=exact|split, when set, replaces AUTO's choice
 *     (split: CHUNKED for bfloat16 and float32); an explicit method ignores it. */
typedef enum alloy_mlstm_backward_method {
    ALLOY_MLSTM_BACKWARD_AUTO = 0,
    ALLOY_MLSTM_BACKWARD_EXACT = 1,
    ALLOY_MLSTM_BACKWARD_CHUNKED = 2,
    ALLOY_MLSTM_BACKWARD_CHUNKED_DEFAULT = 3
} alloy_mlstm_backward_method;

/* The gradient of alloy_mlstm_chunkwise, dense or packed — through the
 * normaliser max(|q^ . n|, exp(-m)) + eps (the branch the forward took) and
 * the stabiliser m, which is a no-op for h except through that floor and eps
 * (the function's exact derivative; EXACT and CHUNKED differ in rounding).
 *   q, k, v, i, f, c_initial, n_initial, m_initial, cu_seqlens, chunk_size,
 *   eps: as the forward was called (initial states all three or none;
 *   cu_seqlens NULL for dense batches, else the packed sequences' offsets
 *   with the forward's rules: N sequences, states (N, NH, ...)). q's dtype
 *   may be float32, float16, bfloat16 or float64 (a double forward, for
 *   gradient checks); the states and the state gradients are then float64,
 *   else float32 (S_DT below), and every sum is S_DT.
 *   dh (the shape of v), q's dtype: the gradient of h.
 *   dc_final (N, NH, DHQK, DHHV), dn_final (N, NH, DHQK), dm_final
 *   (N, NH, 1), S_DT: the gradients of the final states, all three or none
 *   (none: zeros); N = B for dense batches.
 * Results: *dq, *dk (q's shape), *dv (v's), *di, *df (i's), q's dtype; when
 * the initial states are given, *dc_initial, *dn_initial, *dm_initial (their
 * shapes, S_DT) — the slots must then be non-NULL. Each slot: NULL receives a
 * new array, a given one (shape, dtype, device, row-contiguous) is written.
 * Saved between forward and backward: nothing; the call recomputes the chunk
 * states into device scratch, freed when the call's work has run. EXACT,
 * S_DT elements, dense:
 * N NH DHQK (DHHV + 1) (2 S / chunk_size + 2 chunk_size + 4) + N NH (S / chunk_size)
 * (so chunk_size near sqrt(S) uses the least; S / chunk_size rounded up);
 * packed, NH (S / chunk_size + N) in place of N NH (S / chunk_size) for the
 * chunk starts. CHUNKED (chunks of min(chunk_size, 64) tokens): per chunk
 * and head, its starting state and that state's gradient (2 DHQK DHHV
 * elements of q's dtype), two chunk x chunk matrices and 8 + 2 ceil(DHQK / 64)
 * floats per token. The result does not depend on chunk_size beyond
 * rounding. alloy_mlstm_chunkwise_backward is this with method AUTO; an
 * explicit CHUNKED for inputs or sizes it does not take is an error naming
 * `method`. */
alloy_status alloy_mlstm_chunkwise_backward_with_method(
    alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i, alloy_array *f, alloy_array *c_initial,
    alloy_array *n_initial, alloy_array *m_initial, alloy_array *cu_seqlens, alloy_array *dh, alloy_array *dc_final,
    alloy_array *dn_final, alloy_array *dm_final, int chunk_size, double eps, alloy_mlstm_backward_method method,
    alloy_stream *stream, alloy_array **dq, alloy_array **dk, alloy_array **dv, alloy_array **di, alloy_array **df,
    alloy_array **dc_initial, alloy_array **dn_initial, alloy_array **dm_initial);

/* alloy_mlstm_chunkwise_backward_with_method from the chunk record
 * alloy_mlstm_chunkwise_keep kept (no recomputation of the forward): method
 * CHUNKED_DEFAULT from a float16-tile record (kept[4..8] given: float32 at
 * DEFAULT on a GPU), CHUNKED from others. The same inputs as that forward, its
 * h (read for float32 inputs with a float32 record only; NULL is fine
 * otherwise), its final states c_final, n_final, and kept; the other
 * arguments and results as alloy_mlstm_chunkwise_backward_with_method. The
 * result is the recomputing call's (CHUNKED, or CHUNKED_DEFAULT for a
 * float16-tile record), bit for bit. kept arrays of another shape or dtype
 * (a record of other inputs or chunk size) are an error naming `kept`. */
alloy_status alloy_mlstm_chunkwise_backward_kept(
    alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i, alloy_array *f, alloy_array *c_initial,
    alloy_array *n_initial, alloy_array *m_initial, alloy_array *cu_seqlens, alloy_array *h, alloy_array *c_final,
    alloy_array *n_final, alloy_array *const *kept, alloy_array *dh, alloy_array *dc_final, alloy_array *dn_final,
    alloy_array *dm_final, int chunk_size, double eps, alloy_stream *stream, alloy_array **dq, alloy_array **dk,
    alloy_array **dv, alloy_array **di, alloy_array **df, alloy_array **dc_initial, alloy_array **dn_initial,
    alloy_array **dm_initial);

alloy_status alloy_mlstm_chunkwise_backward(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i,
                                            alloy_array *f, alloy_array *c_initial, alloy_array *n_initial,
                                            alloy_array *m_initial, alloy_array *cu_seqlens, alloy_array *dh,
                                            alloy_array *dc_final, alloy_array *dn_final, alloy_array *dm_final,
                                            int chunk_size, double eps, alloy_stream *stream, alloy_array **dq,
                                            alloy_array **dk, alloy_array **dv, alloy_array **di, alloy_array **df,
                                            alloy_array **dc_initial, alloy_array **dn_initial,
                                            alloy_array **dm_initial);

#ifdef __cplusplus
}
#endif

#endif
