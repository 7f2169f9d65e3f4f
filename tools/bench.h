/* bench.h — what the `alloy bench` tables share (tools/cmd_bench.c, the
 * driver and matmul; tools/cmd_bench_linalg.c, the factorizations;
 * tools/cmd_bench_mlstm.c and cmd_bench_mlstm_bwd.c, the mLSTM cell;
 * tools/cmd_bench_nn.c, the fused ops): the
 * clock, the timing method, the random fill. */
#ifndef ALLOY_TOOLS_BENCH_H
#define ALLOY_TOOLS_BENCH_H

#include <stdint.h>

#include "alloy/alloy.h"

double bench_now_s(void); /* monotonic seconds */

/* Median seconds per call of fn over `reps` batches of `per` back-to-back
 * calls (after a warm-up call), each batch ended by one synchronisation of
 * `s`. fn returns non-zero on failure (then -1 is returned). */
typedef int (*bench_fn)(void *ctx);
double bench_time_calls(bench_fn fn, void *ctx, alloy_stream *s, int per, int reps);
/* Set by --once: bench_time_calls makes its first call only (for sanitizers). */
extern int bench_once;

/* n values uniform in [-1, 1) (xorshift on *state), stored as dt. */
void bench_fill_random(alloy_dtype dt, int64_t n, void *raw, uint64_t *state);

/* `alloy bench linalg`: the batched factorizations (cmd_bench_linalg.c). */
int bench_linalg(alloy_device *dev, int quick, const char *only, int json);

/* `alloy bench mlstm`: the mLSTM cell's chunkwise form and step (cmd_bench_mlstm.c). */
int bench_mlstm(alloy_device *dev, int quick, const char *only, int json);
/* Its forward+backward rows (cmd_bench_mlstm_bwd.c); returns the number of failed rows. */
int bench_mlstm_backward(alloy_device *dev, alloy_stream *s, int quick, const char *only, int json);

/* `alloy bench nn`: the fused ops of alloy/nn.h against the copy bandwidth (cmd_bench_nn.c). */
int bench_nn(alloy_device *dev, int quick, const char *only, int json);

#endif
