/* bench.h — what the `alloy bench` tables share (tools/cmd_bench.c, the
 * driver and matmul; tools/cmd_bench_linalg.c, the factorizations;
 * tools/cmd_bench_mlstm.c and cmd_bench_mlstm_bwd.c, the mLSTM cell;
 * tools/cmd_bench_nn.c, the fused ops): the
 * clock, the timing method, the random fill, the copy reference
 * (tools/bench_copy.c). */
#ifndef ALLOY_TOOLS_BENCH_H
#define ALLOY_TOOLS_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "alloy/alloy.h"

double bench_now_s(void); /* monotonic seconds */

/* Median seconds per call of fn over `reps` batches of `per` back-to-back
 * calls (after a warm-up call), each batch ended by one synchronisation of
 * `s`. fn returns non-zero on failure (then -1 is returned). */
typedef int (*bench_fn)(void *ctx);
double bench_time_calls(bench_fn fn, void *ctx, alloy_stream *s, int per, int reps);
/* The median of v[0..n-1] (n >= 1; v is sorted in place). */
double bench_median(double *v, int n);
/* Set by --once: bench_time_calls makes its first call only (for sanitizers). */
extern int bench_once;

/* Whether a row labelled `label` is wanted by --only TEXT: always without
 * TEXT, else when one of TEXT's '|'-separated alternatives occurs in the
 * label ("layernorm bf16 bwd|layernorm-mh bf16 bwd"; an empty alternative
 * matches nothing). */
int bench_label_wanted(const char *label, const char *only);

/* n values uniform in [-1, 1) (xorshift on *state), stored as dt. */
void bench_fill_random(alloy_dtype dt, int64_t n, void *raw, uint64_t *state);

/* The device-to-device copy reference (bench_copy.c): the copy rate for a
 * byte count, measured once per count in the run. */
enum { BENCH_COPY_CACHE = 32 };
typedef struct bench_copy {
    void *cuda_lib; /* libcuda, loaded on CUDA */
    /* cuMemcpyDtoDAsync; NULL: unavailable (the CPU, or no driver) */
    int (*memcpy_dtod)(unsigned long long, unsigned long long, size_t, void *);
    /* the rates measured so far, by half the byte count (the size copied) */
    size_t bytes[BENCH_COPY_CACHE];
    double rate[BENCH_COPY_CACHE], rate_kernel[BENCH_COPY_CACHE], rate_other[BENCH_COPY_CACHE];
    int n;
} bench_copy;
/* Empties *c and on CUDA loads the driver's copy on the device's context.
 * 1: the driver's copy is available; 0: the copy kernel only (always on the CPU). */
int bench_copy_init(bench_copy *c, alloy_device *dev);
void bench_copy_free(bench_copy *c);
/* The copy rate (bytes read and written per second) for a total of
 * total_bytes; *kernel_rate and *other_rate the two copies' (other: the
 * driver's or memcpy; -1 when unavailable). -1 on failure. */
double bench_copy_rate(bench_copy *c, alloy_device *dev, alloy_stream *s, size_t total_bytes, double *kernel_rate,
                       double *other_rate);
/* The share of the copy rate that op reaches moving total_bytes a call,
 * measured in `rounds` rounds of (a median of 3 batches of op_per calls of
 * op, then of the copy) — the faster copy of bench_copy_rate, which it
 * measures first if not yet — and the median of the rounds' ratios; *op_time
 * the median of the op's times. Adjacent batches see the same clocks, so
 * the ratio does not drift with the GPU's temperature over a long run. -1
 * on failure. */
double bench_copy_share_interleaved(bench_copy *c, alloy_device *dev, alloy_stream *s, size_t total_bytes,
                                    bench_fn op, void *op_ctx, int op_per, int rounds, double *op_time);
/* rate's share of copy_rate as text ("93.1%", "-" without a copy rate) in buf; returns buf. */
const char *bench_copy_share(double rate, double copy_rate, char *buf, size_t size);
/* A JSON row's copy members, each followed by ", ": copy_bytes_per_s,
 * copy_kernel_bytes_per_s, copy_driver_bytes_per_s (copy_memcpy_bytes_per_s
 * on the CPU) and copy_share (rate / copy_rate, -1 without a copy rate). */
void bench_copy_json(alloy_device *dev, double rate, double copy_rate, double kernel_rate, double other_rate);

/* A second reference (bench_copy.c): an update in place of total_bytes / 2
 * bytes, each 16-byte word read and written back by one thread — the traffic
 * of a state updated in place (the mLSTM step's C), whose share of the copy
 * says how near the copy an in-place kernel can come at all. */
typedef struct bench_inplace {
    alloy_kernel *kern;
    alloy_launch *launch;
    alloy_array *a;
    alloy_stream *s;
} bench_inplace;
alloy_status bench_inplace_init(bench_inplace *c, alloy_device *dev, alloy_stream *s, size_t total_bytes);
int bench_inplace_run(void *c); /* a bench_fn: one launch; 0 on success */
void bench_inplace_free(bench_inplace *c);

/* `alloy bench linalg`: the batched factorizations (cmd_bench_linalg.c). */
int bench_linalg(alloy_device *dev, int quick, const char *only, int json);

/* `alloy bench mlstm`: the mLSTM cell's chunkwise form and step (cmd_bench_mlstm.c). */
int bench_mlstm(alloy_device *dev, int quick, const char *only, int json);
/* Its forward+backward rows (cmd_bench_mlstm_bwd.c); returns the number of failed rows. */
int bench_mlstm_backward(alloy_device *dev, alloy_stream *s, int quick, const char *only, int json);

/* `alloy bench nn`: the fused ops of alloy/nn.h against the copy bandwidth (cmd_bench_nn.c). */
int bench_nn(alloy_device *dev, int quick, const char *only, int json);

#endif
