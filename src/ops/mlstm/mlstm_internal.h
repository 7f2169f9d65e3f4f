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

/* The split path's chunk slots per head for chunks of L tokens: dense, chunk
 * c of sequence s is slot c * nseq + s (ceil(S / L) nseq in all); packed,
 * sequence s's chunks start at cu[s] / L + s (S / L + nseq, S the total). */
int64_t alloy_mlstm_split_slots(int64_t S, int64_t L, int64_t nseq, int packed);

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

/* One launch of an mLSTM kernel file (launch.c): template T = dt (and TO =
 * out_dt where to_named is set: the backward's outputs), the template ints and bools, the int32 launch constants, float32 `scale` and
 * `eps`, groups threadgroups of `threads` with `smem` bytes of threadgroup
 * memory (at least 16), the inputs and the outputs (at most
 * ALLOY_MLSTM_MAX_OUTPUTS). No launch for groups <= 0; too many groups is an
 * error naming fn. */
enum { ALLOY_MLSTM_MAX_OUTPUTS = 16 };
typedef struct alloy_mlstm_named {
    const char *name;
    int64_t value;
} alloy_mlstm_named;
typedef struct alloy_mlstm_launch_spec {
    const char *fn;
    alloy_kernel *kernel;
    alloy_stream *stream;
    alloy_dtype dt, out_dt;
    int to_named;
    const alloy_mlstm_named *tints, *tbools, *consts;
    int n_tints, n_tbools, n_consts;
    double scale, eps;
    alloy_array **ins, **outs;
    int n_ins, n_outs;
    int64_t groups;
    uint32_t threads;
    size_t smem;
} alloy_mlstm_launch_spec;
alloy_status alloy_mlstm_launch(const alloy_mlstm_launch_spec *spec);

/* The split forward of chunkwise.c run for the backward (inputs already
 * checked; L the caller's chunk length): h (float32 inputs only; NULL for
 * 16-bit ones, whose backward needs none), the final states (float32) and,
 * in one window, every slot's chunk-start state (c_chunk in q's dtype,
 * n_chunk float32), m (m_chunk) and gate record (g_chunk: w_j, e_last at L,
 * L + 4 floats); L the chunk length it ran (at most 64), vec whether the
 * rows of q, k, v and h take 16-byte accesses. scaled (float32 inputs): on
 * float16 tiles with exponents (the forward of precision DEFAULT; no h,
 * c_chunk float16 tiles with factors ce, g_chunk the scaled record of 2 L + 4
 * floats, mlstm_chunkwise.metal). ALLOY_ERROR_UNSUPPORTED where the split path
 * does not take these sizes. Free with alloy_mlstm_saved_free. */
typedef struct alloy_mlstm_saved {
    int64_t L, nslots;   /* the chunk length run; slots per head (the scratch's first dimension) */
    int vec;
    alloy_array *h, *c_out, *n_out, *m_out, *c_chunk, *n_chunk, *m_chunk, *g_chunk;
    /* scaled: q, k, v as float16 rows (rows[0..2]), their exponents (xe) and the state tiles' factors (ce) */
    alloy_array *rows[3], *xe, *ce;
} alloy_mlstm_saved;
alloy_status alloy_mlstm_split_forward(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i, alloy_array *f,
                                       alloy_array *c_initial, alloy_array *n_initial, alloy_array *m_initial,
                                       alloy_array *cu_seqlens, int64_t L, double eps, int scaled, alloy_stream *stream,
                                       alloy_mlstm_saved *sv);

/* q, k and v (or, k and v NULL, q alone) as float16 rows with a power-of-two exponent each
 * (mlstm_f16_rows.metal, chunkwise.c): out[0..2] the rows, out[3] the exponents (int32, q's rows, then k's,
 * then v's); queued on stream. */
alloy_status alloy_mlstm_f16_rows(alloy_array *q, alloy_array *k, alloy_array *v, alloy_stream *stream,
                                  alloy_array **out);
void alloy_mlstm_saved_free(alloy_mlstm_saved *sv);

/* The split kernels' template RB (mlstm_tiles.h's mc_row_tiles MODE): 1, or
 * for timing ALLOY_MLSTM_RB_<KERNEL><PHASE>=0|1|2 (KERNEL FWD or GRAD, e.g.
 * ALLOY_MLSTM_RB_GRAD2 for the backward's chunk walk). */
int alloy_mlstm_row_tiles_mode(const char *kernel, int phase);

/* Whether the split kernels may copy q, k and v in 16-byte pieces (cp.async
 * on CUDA): rows a whole number of pieces, row-contiguous operands 16-byte
 * aligned (chunkwise.c). */
int alloy_mlstm_vec_rows(alloy_array *q, alloy_array *k, alloy_array *v, int64_t DHQK, int64_t DHHV, size_t tsize);

/* A forward's chunk record for the backward (alloy_mlstm_chunkwise_backward_kept),
 * checked by the caller: the forward's h (float32 inputs), final C and n, and
 * kept[0..3] = c_chunk, n_chunk, m_chunk, g_chunk (alloy_mlstm_saved's); a
 * float16-tile record also kept[4..8] = ce, rows[0..2], xe. */
typedef struct alloy_mlstm_kept_in {
    alloy_array *h, *c_final, *n_final, *kept[ALLOY_MLSTM_KEPT];
} alloy_mlstm_kept_in;

/* The chunk-parallel backward (chunkwise_backward_split.c) into the
 * prepared gradient arrays g[8] (dq, dk, dv, di, df, and, with the initial
 * states, dc_initial, dn_initial, dm_initial); inputs already checked. kin
 * non-NULL: the forward's record instead of running the forward again.
 * scaled (float32 inputs; with kin, a float16-tile record): on float16 tiles
 * with exponents (method CHUNKED_DEFAULT). ALLOY_ERROR_UNSUPPORTED (nothing written) where it does not take these
 * sizes: the caller then runs the exact kernel. */
alloy_status alloy_mlstm_backward_split(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i,
                                        alloy_array *f, alloy_array *c_initial, alloy_array *n_initial,
                                        alloy_array *m_initial, alloy_array *cu_seqlens, alloy_array *dh,
                                        alloy_array *dc_final, alloy_array *dn_final, alloy_array *dm_final,
                                        int64_t L, double eps, int scaled, const alloy_mlstm_kept_in *kin,
                                        alloy_stream *stream, alloy_array *const *g);

#endif
