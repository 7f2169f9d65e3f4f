/* bench_copy.c — the device-to-device copy reference of the bandwidth-bound
 * `alloy bench` rows (cmd_bench_nn.c's ops, cmd_bench_mlstm.c's step): the
 * copy rate for a byte count, measured in the same run.
 *
 * For a total of N bytes, a copy of N / 2 bytes (read and written: the same
 * total), as the faster of cuMemcpyDtoDAsync (the driver, loaded at run time)
 * and a kernel moving 16 bytes per thread, on CUDA; of memcpy and that kernel
 * on the CPU. Timing: bench_time_calls, batches of about 50 ms. Each byte
 * count is measured once (the rows share a few counts); an op's share of it
 * can also be measured in rounds alternating with the op
 * (bench_copy_share_interleaved), which takes the GPU's clock drift out.
 * Beside it, an update in place of the same bytes (bench_inplace_*): the
 * roof of a kernel that writes back what it reads. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct copy_ctx {
    alloy_kernel *kern;
    alloy_launch *launch;
    alloy_array *src, *dst;
    alloy_stream *s;
    const bench_copy *cu;
    size_t bytes;
} copy_ctx;

static const char COPY_BODY[] = "const ulong e = ulong(thread_position_in_grid.x);\n"
                                "if (e < n16) ((device uint4*)dst)[e] = ((const device uint4*)src)[e];\n";

static int run_copy_kernel(void *p) {
    copy_ctx *c = p;
    alloy_array *out = NULL;
    const alloy_status st = alloy_kernel_apply(c->kern, 1, &c->src, c->launch, c->s, &out);
    alloy_array_free(out);
    return st != ALLOY_OK;
}

static int run_copy_driver(void *p) {
    copy_ctx *c = p;
    return c->cu->memcpy_dtod((unsigned long long)(uintptr_t)alloy_array_data(c->dst),
                              (unsigned long long)(uintptr_t)alloy_array_data(c->src), c->bytes,
                              alloy_stream_native(c->s)) != 0;
}

static int run_copy_host(void *p) {
    copy_ctx *c = p;
    memcpy(alloy_array_data(c->dst), alloy_array_data(c->src), c->bytes);
    return 0;
}

/* The driver's copy on the thread's current context (alloy's primary context
 * of device `ordinal`, made current if the thread has none). 0: unavailable. */
static int cuda_copy_load(bench_copy *c, int ordinal) {
    c->cuda_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!c->cuda_lib) return 0;
    int (*memcpy_dtod)(unsigned long long, unsigned long long, size_t, void *);
    int (*ctx_get)(void **), (*ctx_set)(void *), (*device_get)(int *, int), (*primary_retain)(void **, int);
    *(void **)&memcpy_dtod = dlsym(c->cuda_lib, "cuMemcpyDtoDAsync_v2");
    *(void **)&ctx_get = dlsym(c->cuda_lib, "cuCtxGetCurrent");
    *(void **)&ctx_set = dlsym(c->cuda_lib, "cuCtxSetCurrent");
    *(void **)&device_get = dlsym(c->cuda_lib, "cuDeviceGet");
    *(void **)&primary_retain = dlsym(c->cuda_lib, "cuDevicePrimaryCtxRetain");
    if (!memcpy_dtod || !ctx_get || !ctx_set || !device_get || !primary_retain) return 0;
    void *ctx = NULL;
    if (ctx_get(&ctx) != 0) return 0;
    if (!ctx) {
        int d = 0;
        if (device_get(&d, ordinal) != 0 || primary_retain(&ctx, d) != 0 || ctx_set(ctx) != 0) return 0;
    }
    c->memcpy_dtod = memcpy_dtod;
    return 1;
}

int bench_copy_init(bench_copy *c, alloy_device *dev) {
    memset(c, 0, sizeof *c);
    if (alloy_device_backend(dev) != ALLOY_BACKEND_CUDA) return 0;
    /* a first allocation makes alloy's context current on this thread */
    alloy_array *probe = NULL;
    const int64_t one = 1;
    if (alloy_array_new(dev, ALLOY_UINT32, 1, &one, &probe) == ALLOY_OK) alloy_array_free(probe);
    const char *name = alloy_device_name(dev), *colon = strchr(name, ':');
    return cuda_copy_load(c, colon ? atoi(colon + 1) : 0);
}

void bench_copy_free(bench_copy *c) {
    if (c->cuda_lib) dlclose(c->cuda_lib);
    memset(c, 0, sizeof *c);
}

/* A launch of one thread per 16-byte word of `half` bytes (constant n16) writing `out`: the copy's and the
 * in-place update's. */
static alloy_status words16_launch(alloy_launch **l, alloy_array *out, size_t half) {
    alloy_status st = alloy_launch_new(l);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(*l, out);
    if (st == ALLOY_OK) st = alloy_launch_set_grid(*l, (uint32_t)(half / 16), 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(*l, 256, 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(*l, "n16", ALLOY_UINT64, (int64_t)(half / 16));
    return st;
}

/* The copy of half bytes: its kernel, launch and arrays (st: the first failure). */
static alloy_status copy_setup(copy_ctx *c, const bench_copy *cp, alloy_device *dev, alloy_stream *s, size_t half) {
    memset(c, 0, sizeof *c);
    c->s = s;
    c->cu = cp;
    c->bytes = half;
    const int64_t n = (int64_t)(half / 4);
    static const char *const in_names[] = {"src"}, *const out_names[] = {"dst"};
    alloy_status st = alloy_kernel_new("bench_copy16", 1, in_names, 1, out_names, COPY_BODY, NULL, 1, 0, &c->kern);
    if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_UINT32, 1, &n, &c->src);
    if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_UINT32, 1, &n, &c->dst);
    if (st == ALLOY_OK) st = alloy_array_fill(c->src, 1);
    if (st == ALLOY_OK) st = words16_launch(&c->launch, c->dst, half);
    return st;
}

static void copy_teardown(copy_ctx *c) {
    alloy_launch_free(c->launch);
    alloy_kernel_free(c->kern);
    alloy_array_free(c->src);
    alloy_array_free(c->dst);
}

/* calls per timed batch: about 50 ms at 2 TB/s (GPU) or 10 GB/s (CPU) */
static int copy_batch(int is_cuda, size_t half) {
    int per = (int)(is_cuda ? 0.05 * 2e12 / (double)(2 * half) : 0.05 * 1e10 / (double)(2 * half));
    return per < 1 ? 1 : per > 1000 ? 1000 : per;
}

double bench_copy_rate(bench_copy *cp, alloy_device *dev, alloy_stream *s, size_t total_bytes, double *kernel_rate,
                       double *other_rate) {
    const size_t half = total_bytes / 2 / 16 * 16;
    for (int e = 0; e < cp->n; e++)
        if (cp->bytes[e] == half) {
            *kernel_rate = cp->rate_kernel[e];
            *other_rate = cp->rate_other[e];
            return cp->rate[e];
        }
    const int is_cuda = alloy_device_backend(dev) == ALLOY_BACKEND_CUDA;
    copy_ctx c;
    const alloy_status st = copy_setup(&c, cp, dev, s, half);
    double tk = -1, to = -1;
    if (st == ALLOY_OK) {
        const int per = copy_batch(is_cuda, half);
        tk = bench_time_calls(run_copy_kernel, &c, s, per, is_cuda ? 9 : 5);
        if (is_cuda && cp->memcpy_dtod) to = bench_time_calls(run_copy_driver, &c, s, per, 9);
        else if (!is_cuda) to = bench_time_calls(run_copy_host, &c, s, per, 5);
    }
    if (tk < 0 && st == ALLOY_OK) fprintf(stderr, "alloy: bench: the copy kernel failed: %s\n", alloy_last_error());
    copy_teardown(&c);
    *kernel_rate = tk > 0 ? (double)(2 * half) / tk : -1;
    *other_rate = to > 0 ? (double)(2 * half) / to : -1;
    const double best = *kernel_rate > *other_rate ? *kernel_rate : *other_rate;
    if (cp->n < BENCH_COPY_CACHE) {
        cp->bytes[cp->n] = half;
        cp->rate[cp->n] = best;
        cp->rate_kernel[cp->n] = *kernel_rate;
        cp->rate_other[cp->n] = *other_rate;
        cp->n++;
    }
    return best;
}

double bench_copy_share_interleaved(bench_copy *cp, alloy_device *dev, alloy_stream *s, size_t total_bytes,
                                    bench_fn op, void *op_ctx, int op_per, int rounds, double *op_time) {
    double rk = -1, ro = -1;
    if (bench_copy_rate(cp, dev, s, total_bytes, &rk, &ro) <= 0) return -1;
    const int is_cuda = alloy_device_backend(dev) == ALLOY_BACKEND_CUDA;
    const bench_fn copy_fn = ro > rk ? (is_cuda ? run_copy_driver : run_copy_host) : run_copy_kernel;
    const size_t half = total_bytes / 2 / 16 * 16;
    copy_ctx c;
    alloy_status st = copy_setup(&c, cp, dev, s, half);
    double share[16], times[16];
    if (rounds > 16) rounds = 16;
    int n = 0;
    for (int r = 0; r < rounds && st == ALLOY_OK; r++) {
        const double to = bench_time_calls(op, op_ctx, s, op_per, 3);
        const double tc = bench_time_calls(copy_fn, &c, s, copy_batch(is_cuda, half), 3);
        if (to <= 0 || tc <= 0) break;
        share[n] = ((double)total_bytes / to) / ((double)(2 * half) / tc);
        times[n++] = to;
    }
    copy_teardown(&c);
    if (n < rounds) return -1;
    *op_time = bench_median(times, n);
    return bench_median(share, n);
}

/* Each thread's 16-byte word, read and written back changed (one bit flipped,
 * so that no launch leaves the memory as it found it). */
static const char INPLACE_BODY[] = "const ulong e = ulong(thread_position_in_grid.x);\n"
                                   "if (e < n16) { device uint4 *p = (device uint4*)a + e; *p = *p ^ uint4(1u); }\n";

alloy_status bench_inplace_init(bench_inplace *c, alloy_device *dev, alloy_stream *s, size_t total_bytes) {
    memset(c, 0, sizeof *c);
    c->s = s;
    const size_t half = total_bytes / 2 / 16 * 16;
    const int64_t n = (int64_t)(half / 4);
    static const char *const out_names[] = {"a"};
    alloy_status st = alloy_kernel_new("bench_inplace16", 0, NULL, 1, out_names, INPLACE_BODY, NULL, 1, 0, &c->kern);
    if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_UINT32, 1, &n, &c->a);
    if (st == ALLOY_OK) st = alloy_array_fill(c->a, 0);
    if (st == ALLOY_OK) st = words16_launch(&c->launch, c->a, half);
    return st;
}

int bench_inplace_run(void *p) {
    bench_inplace *c = p;
    alloy_array *out = NULL;
    const alloy_status st = alloy_kernel_apply(c->kern, 0, NULL, c->launch, c->s, &out);
    alloy_array_free(out);
    return st != ALLOY_OK;
}

void bench_inplace_free(bench_inplace *c) {
    alloy_launch_free(c->launch);
    alloy_kernel_free(c->kern);
    alloy_array_free(c->a);
    memset(c, 0, sizeof *c);
}

const char *bench_copy_share(double rate, double copy_rate, char *buf, size_t size) {
    if (copy_rate > 0) snprintf(buf, size, "%.1f%%", 100 * rate / copy_rate);
    else snprintf(buf, size, "-");
    return buf;
}

void bench_copy_json(alloy_device *dev, double rate, double copy_rate, double kernel_rate, double other_rate) {
    printf("\"copy_bytes_per_s\": %.6g, \"copy_kernel_bytes_per_s\": %.6g, \"copy_%s_bytes_per_s\": %.6g, "
           "\"copy_share\": %.4f, ",
           copy_rate, kernel_rate, alloy_device_backend(dev) == ALLOY_BACKEND_CUDA ? "driver" : "memcpy", other_rate,
           copy_rate > 0 ? rate / copy_rate : -1);
}
