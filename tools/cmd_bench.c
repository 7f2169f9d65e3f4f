/* cmd_bench.c — `alloy bench [OP...] [--device D] [--json] [--quick] [--only TEXT]`: the
 * catalog's benchmark table on one device. This file: the driver, the shared
 * timing (bench.h) and matmul; the factorizations are cmd_bench_linalg.c, the
 * mLSTM cell cmd_bench_mlstm.c (its training rows cmd_bench_mlstm_bwd.c),
 * the fused ops cmd_bench_nn.c.
 *
 * Per operation and size: the median time of several timed batches after a
 * warm-up (wall clock around back-to-back launches and one stream
 * synchronisation, the same for alloy and the peer), the rate, the share of
 * a ceiling measured here (the peer's rate on the same inputs: what the
 * hardware demonstrably does), the error of a sample of outputs against a
 * float64 reference (relative to sum |a||b|, so it is comparable across
 * sizes), and the peer's time, error and the ratio peer time / alloy time
 * (> 1: alloy is faster). Peers are loaded at run time and only where
 * present: cuBLAS (libcublas) on CUDA, OpenBLAS's cblas (libopenblas,
 * ALLOY_BLAS=path to choose a library) on the CPU. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "cli.h"

static const char *const USAGE =
    "usage: alloy bench [OP...] [options]\n"
    "\n"
    "  OP               matmul, linalg, mlstm, nn (default: every operation)\n"
    "  --device D       cpu, cuda, cuda:N or auto (default auto; ALLOY_DEVICE)\n"
    "  --json           one JSON object per line instead of the table\n"
    "  --quick          the smallest sizes only\n"
    "  --once           each row's operations a few times instead of timed batches\n"
    "                   (for compute-sanitizer; the times printed mean nothing)\n"
    "  --only TEXT      the sizes whose label contains TEXT (e.g. \"f32 high\", bf16,\n"
    "                   \"cholesky f64\", lu_factor), or one of TEXT's alternatives\n"
    "                   separated by | (\"layernorm bf16 bwd|layernorm-mh bf16 bwd\")\n"
    "\n"
    "Per operation and size: time (median of timed batches after a warm-up), rate,\n"
    "% of the peer's rate, error against float64 on a sample of outputs, and the\n"
    "peer (cuBLAS on CUDA, OpenBLAS on the CPU; ALLOY_BLAS=path picks the library)\n"
    "with the ratio peer time / alloy time. Peers are loaded at run time when present.\n"
    "linalg: cholesky, lu_factor, solve (one right-hand side), inv and det of batches\n"
    "of n x n matrices (float32 and float64): time, matrices per second, backward\n"
    "error of a sample against float64 on the host, and on the CPU a LAPACK peer\n"
    "(ALLOY_LAPACK=path; on CUDA, torch.linalg: bench/bench_linalg_torch.py).\n"
    "mlstm: the chunkwise forward at xLSTM 7B's head shape (NH 8, DHQK 256, DHHV 512;\n"
    "B=8 S=8192, S=8000, B=1 S=65536, f32 and bf16), the paper's shape, a packed batch\n"
    "of 64 sequences (cu_seqlens), the backward alone and forward+backward (\"bwd\",\n"
    "\"fwd+bwd\": B=8 S=8192 bf16 and f32, B=1 S=65536 bf16) and the step at B = 1, 16,\n"
    "256, 1024: time, TFLOP/s (the backward counted as twice the forward; GB/s of\n"
    "state for the step), time per token and the error against float64 on one\n"
    "(sequence, head); no peer in C (mlstm_kernels is Triton:\n"
    "bench/bench_mlstm_tfla.py). On the CPU and with --quick: small shapes.\n"
    "nn: soft-cap, RMSNorm, LayerNorm (per row and per head) and the causal conv1d\n"
    "(K = 4), forward and backward, 64 M elements in f32 and bf16: time, GB/s of the\n"
    "bytes the op must move, the device-to-device copy's GB/s for as many bytes\n"
    "(measured in the same run), the share of it, and the error against float64 on\n"
    "16 rows; PyTorch's peers: bench/bench_nn_torch.py. On the CPU and with --quick:\n"
    "128 K elements.\n";

double bench_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return v[n / 2];
}

int bench_label_wanted(const char *label, const char *only) {
    if (!only) return 1;
    for (const char *a = only;;) {
        const char *bar = strchr(a, '|');
        const size_t n = bar ? (size_t)(bar - a) : strlen(a);
        /* an empty alternative ("a||b", "a|") matches nothing; an empty TEXT, everything (as strstr) */
        if (n > 0 || !strchr(only, '|'))
            for (const char *p = label; strlen(p) >= n; p++)
                if (strncmp(p, a, n) == 0) return 1;
        if (!bar) return 0;
        a = bar + 1;
    }
}

/* ---- peers ---------------------------------------------------------------- */

typedef struct cublas_api {
    void *lib;
    void *handle;
    int (*create)(void **);
    int (*set_stream)(void *, void *);
    int (*gemm_ex)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *,
                   int, int, const void *, void *, int, int, int, int);
    int (*gemm_strided_batched_ex)(void *, int, int, int, int, int, const void *, const void *, int, int,
                                   long long, const void *, int, int, long long, const void *, void *, int,
                                   int, long long, int, int, int);
    char why[160];
} cublas_api;

static void cublas_load(cublas_api *c) {
    memset(c, 0, sizeof *c);
    static const char *const names[] = {"libcublas.so", "libcublas.so.13", "libcublas.so.12", NULL};
    const char *env = getenv("ALLOY_CUBLAS");
    if (env && *env) c->lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    for (int i = 0; !c->lib && names[i]; i++) c->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!c->lib) {
        snprintf(c->why, sizeof c->why, "libcublas not found (ALLOY_CUBLAS=path to name it)");
        return;
    }
    c->create = (int (*)(void **))dlsym(c->lib, "cublasCreate_v2");
    c->set_stream = (int (*)(void *, void *))dlsym(c->lib, "cublasSetStream_v2");
    *(void **)&c->gemm_ex = dlsym(c->lib, "cublasGemmEx");
    *(void **)&c->gemm_strided_batched_ex = dlsym(c->lib, "cublasGemmStridedBatchedEx");
    if (!c->create || !c->set_stream || !c->gemm_ex || !c->gemm_strided_batched_ex || c->create(&c->handle)) {
        snprintf(c->why, sizeof c->why, "libcublas loaded but unusable (symbols or cublasCreate)");
        c->handle = NULL;
    }
}

/* CUDA data types and compute types of cuBLAS */
enum { CU_R_32F = 0, CU_R_64F = 1, CU_R_16F = 2, CU_R_16BF = 14 };
enum { CUBLAS_COMPUTE_32F_ = 68, CUBLAS_COMPUTE_64F_ = 70, CUBLAS_COMPUTE_32F_FAST_TF32_ = 77 };

static int cuda_type(alloy_dtype dt) {
    switch (dt) {
    case ALLOY_FLOAT64: return CU_R_64F;
    case ALLOY_FLOAT16: return CU_R_16F;
    case ALLOY_BFLOAT16: return CU_R_16BF;
    default: return CU_R_32F;
    }
}

typedef struct blas_api {
    void *lib;
    const char *name;
    int ilp64; /* 64-bit integer arguments (NumPy's bundled OpenBLAS) */
    void *sgemm, *dgemm;
    char why[160];
} blas_api;
typedef void (*sgemm32_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                           float *, int);
typedef void (*dgemm32_fn)(int, int, int, int, int, int, double, const double *, int, const double *, int,
                           double, double *, int);
typedef void (*sgemm64_fn)(int, int, int, long long, long long, long long, float, const float *, long long,
                           const float *, long long, float, float *, long long);
typedef void (*dgemm64_fn)(int, int, int, long long, long long, long long, double, const double *, long long,
                           const double *, long long, double, double *, long long);

static void blas_load(blas_api *b) {
    memset(b, 0, sizeof *b);
    static const char *const names[] = {"libopenblas.so", "libopenblas.so.0", "libblas.so.3", NULL};
    /* (libblas.so.3 may be the reference BLAS: the table names the library) */
    const char *env = getenv("ALLOY_BLAS");
    if (env && *env) {
        b->lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        b->name = env;
    }
    for (int i = 0; !b->lib && names[i]; i++) {
        b->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        b->name = names[i];
    }
    if (!b->lib) {
        snprintf(b->why, sizeof b->why, "no OpenBLAS found (ALLOY_BLAS=path to name one)");
        return;
    }
    b->sgemm = dlsym(b->lib, "cblas_sgemm");
    b->dgemm = dlsym(b->lib, "cblas_dgemm");
    if (!b->sgemm) { /* NumPy's bundled OpenBLAS: prefixed names, 64-bit integers */
        b->sgemm = dlsym(b->lib, "scipy_cblas_sgemm64_");
        b->dgemm = dlsym(b->lib, "scipy_cblas_dgemm64_");
        b->ilp64 = 1;
    }
    if (!b->sgemm) snprintf(b->why, sizeof b->why, "%s has no cblas_sgemm", b->name);
}

/* ---- matmul ---------------------------------------------------------------- */

typedef struct mm_size {
    const char *label;
    alloy_dtype dt;
    alloy_precision prec;
    int64_t batch, m, n, k;
    int quick;      /* in --quick */
    alloy_dtype od; /* the result's */
} mm_size;

static const mm_size CUDA_SIZES[] = {
    {"f32 highest", ALLOY_FLOAT32, ALLOY_PRECISION_HIGHEST, 1, 1024, 1024, 1024, 1, ALLOY_FLOAT32},
    {"f32 highest", ALLOY_FLOAT32, ALLOY_PRECISION_HIGHEST, 1, 4096, 4096, 4096, 0, ALLOY_FLOAT32},
    {"f32 highest", ALLOY_FLOAT32, ALLOY_PRECISION_HIGHEST, 1, 8192, 8192, 8192, 0, ALLOY_FLOAT32},
    {"f32 high", ALLOY_FLOAT32, ALLOY_PRECISION_HIGH, 1, 4096, 4096, 4096, 0, ALLOY_FLOAT32},
    {"f32 high", ALLOY_FLOAT32, ALLOY_PRECISION_HIGH, 1, 8192, 8192, 8192, 0, ALLOY_FLOAT32},
    {"f32 default", ALLOY_FLOAT32, ALLOY_PRECISION_DEFAULT, 1, 8192, 8192, 8192, 0, ALLOY_FLOAT32},
    {"bf16", ALLOY_BFLOAT16, ALLOY_PRECISION_HIGHEST, 1, 2048, 2048, 2048, 1, ALLOY_BFLOAT16},
    {"bf16", ALLOY_BFLOAT16, ALLOY_PRECISION_HIGHEST, 1, 4096, 4096, 4096, 0, ALLOY_BFLOAT16},
    {"bf16", ALLOY_BFLOAT16, ALLOY_PRECISION_HIGHEST, 1, 8192, 8192, 8192, 0, ALLOY_BFLOAT16},
    {"f16", ALLOY_FLOAT16, ALLOY_PRECISION_HIGHEST, 1, 8192, 8192, 8192, 0, ALLOY_FLOAT16},
    {"bf16 to f32", ALLOY_BFLOAT16, ALLOY_PRECISION_HIGHEST, 1, 8192, 8192, 8192, 0, ALLOY_FLOAT32},
    {"f32 batched", ALLOY_FLOAT32, ALLOY_PRECISION_HIGHEST, 10000, 32, 32, 32, 1, ALLOY_FLOAT32},
    {"bf16 batched", ALLOY_BFLOAT16, ALLOY_PRECISION_HIGHEST, 100, 1024, 1024, 1024, 0, ALLOY_BFLOAT16},
    {"f64", ALLOY_FLOAT64, ALLOY_PRECISION_HIGHEST, 1, 2048, 2048, 2048, 0, ALLOY_FLOAT64},
};
static const mm_size CPU_SIZES[] = {
    {"f32", ALLOY_FLOAT32, ALLOY_PRECISION_HIGHEST, 1, 256, 256, 256, 1, ALLOY_FLOAT32},
    {"f32", ALLOY_FLOAT32, ALLOY_PRECISION_HIGHEST, 1, 1024, 1024, 1024, 0, ALLOY_FLOAT32},
    {"f64", ALLOY_FLOAT64, ALLOY_PRECISION_HIGHEST, 1, 512, 512, 512, 0, ALLOY_FLOAT64},
    {"f32 batched", ALLOY_FLOAT32, ALLOY_PRECISION_HIGHEST, 1000, 32, 32, 32, 1, ALLOY_FLOAT32},
};

typedef struct mm_result {
    double t, rate, err;
    double peer_t, peer_rate, peer_err;
    const char *peer;
    char peer_why[160];
} mm_result;

/* double -> bfloat16 bits, round to nearest even, for the fill's values: zero
 * or normal in bfloat16 (|x| >= 2^-53), never NaN or infinite; the same bits
 * as cli_convert gives them. */
static uint16_t fill_bf16(double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    const uint16_t sign = (uint16_t)((b >> 48) & 0x8000u);
    uint64_t v = b & 0x7fffffffffffffffull;
    if (v == 0) return sign;
    v += ((uint64_t)1 << 44) - 1 + ((v >> 45) & 1); /* carries into the exponent */
    const uint64_t e = (v >> 52) - 1023 + 127;
    return (uint16_t)(sign | (uint16_t)(e << 7) | (uint16_t)((v >> 45) & 0x7f));
}

void bench_fill_random(alloy_dtype dt, int64_t n, void *raw, uint64_t *state) {
    for (int64_t i = 0; i < n; i++) {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        double x = (double)(*state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
        /* the common dtypes inline (the 7B shapes draw hundreds of millions) */
        if (dt == ALLOY_FLOAT32) ((float *)raw)[i] = (float)x;
        else if (dt == ALLOY_BFLOAT16) ((uint16_t *)raw)[i] = fill_bf16(x);
        else if (dt == ALLOY_FLOAT64) ((double *)raw)[i] = x;
        else cli_convert(ALLOY_FLOAT64, &x, dt, (char *)raw + (size_t)i * alloy_dtype_size(dt), 1);
    }
}

/* The timing method of every table (bench.h). */
int bench_once = 0;

double bench_time_calls(bench_fn fn, void *ctx, alloy_stream *s, int per, int reps) {
    const double t_first = bench_now_s();
    if (fn(ctx)) return -1;
    if (alloy_stream_synchronize(s) != ALLOY_OK) return -1;
    if (bench_once) return bench_now_s() - t_first; /* --once: that call, untimed beyond it */
    double ts[64];
    if (reps > 64) reps = 64;
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now_s();
        for (int i = 0; i < per; i++)
            if (fn(ctx)) return -1;
        if (alloy_stream_synchronize(s) != ALLOY_OK) return -1;
        ts[r] = (bench_now_s() - t0) / per;
    }
    return bench_median(ts, reps);
}

typedef struct mm_ctx {
    alloy_array *a, *b, *c;
    alloy_matmul_options o;
    alloy_stream *s;
    const mm_size *z;
    /* peer */
    cublas_api *cb;
    blas_api *bl;
    void *ha, *hb, *hc; /* host copies for the CPU peer */
} mm_ctx;

static int run_alloy(void *p) {
    mm_ctx *x = p;
    return alloy_matmul(x->a, x->b, &x->o, x->s, &x->c) != ALLOY_OK;
}

static int run_cublas(void *p) {
    mm_ctx *x = p;
    const mm_size *z = x->z;
    const int t = cuda_type(z->dt), tc = cuda_type(z->od);
    /* float32 "default" against cuBLAS's TF32 mode; "high" and "highest" against SGEMM */
    const int comp = z->dt == ALLOY_FLOAT64                                           ? CUBLAS_COMPUTE_64F_
                     : z->dt == ALLOY_FLOAT32 && z->prec == ALLOY_PRECISION_DEFAULT ? CUBLAS_COMPUTE_32F_FAST_TF32_
                                                                                      : CUBLAS_COMPUTE_32F_;
    double one_d = 1.0, zero_d = 0.0;
    float one_f = 1.0f, zero_f = 0.0f;
    const void *one = z->dt == ALLOY_FLOAT64 ? (const void *)&one_d : (const void *)&one_f;
    const void *zero = z->dt == ALLOY_FLOAT64 ? (const void *)&zero_d : (const void *)&zero_f;
    /* row-major C = A B is column-major C^T = B^T A^T */
    if (z->batch == 1)
        return x->cb->gemm_ex(x->cb->handle, 0, 0, (int)z->n, (int)z->m, (int)z->k, one,
                              alloy_array_data(x->b), t, (int)z->n, alloy_array_data(x->a), t, (int)z->k, zero,
                              alloy_array_data(x->c), tc, (int)z->n, comp, -1) != 0;
    return x->cb->gemm_strided_batched_ex(
               x->cb->handle, 0, 0, (int)z->n, (int)z->m, (int)z->k, one, alloy_array_data(x->b), t, (int)z->n,
               z->k * z->n, alloy_array_data(x->a), t, (int)z->k, z->m * z->k, zero, alloy_array_data(x->c), tc,
               (int)z->n, z->m * z->n, (int)z->batch, comp, -1) != 0;
}

static int run_blas(void *p) {
    mm_ctx *x = p;
    const mm_size *z = x->z;
    for (int64_t bi = 0; bi < z->batch; bi++) {
        const size_t es = alloy_dtype_size(z->dt);
        const char *a = (const char *)x->ha + (size_t)(bi * z->m * z->k) * es;
        const char *b = (const char *)x->hb + (size_t)(bi * z->k * z->n) * es;
        char *c = (char *)x->hc + (size_t)(bi * z->m * z->n) * es;
        /* row-major (101), no transposes (111) */
        if (z->dt == ALLOY_FLOAT64 && x->bl->ilp64)
            ((dgemm64_fn)x->bl->dgemm)(101, 111, 111, z->m, z->n, z->k, 1.0, (const double *)a, z->k,
                                       (const double *)b, z->n, 0.0, (double *)c, z->n);
        else if (z->dt == ALLOY_FLOAT64)
            ((dgemm32_fn)x->bl->dgemm)(101, 111, 111, (int)z->m, (int)z->n, (int)z->k, 1.0, (const double *)a,
                                       (int)z->k, (const double *)b, (int)z->n, 0.0, (double *)c, (int)z->n);
        else if (x->bl->ilp64)
            ((sgemm64_fn)x->bl->sgemm)(101, 111, 111, z->m, z->n, z->k, 1.0f, (const float *)a, z->k,
                                       (const float *)b, z->n, 0.0f, (float *)c, z->n);
        else
            ((sgemm32_fn)x->bl->sgemm)(101, 111, 111, (int)z->m, (int)z->n, (int)z->k, 1.0f, (const float *)a,
                                       (int)z->k, (const float *)b, (int)z->n, 0.0f, (float *)c, (int)z->n);
    }
    return 0;
}

/* Max |c - ref| / sum_k |a b| over a sample of outputs (host data). */
static double sample_error(const mm_size *z, const void *ha, const void *hb, const void *hc) {
    const size_t es = alloy_dtype_size(z->dt), eo = alloy_dtype_size(z->od);
    double worst = 0;
    uint64_t st = 0x9e3779b97f4a7c15ull;
    for (int s = 0; s < 48; s++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        int64_t bi = (int64_t)((st >> 33) % (uint64_t)z->batch);
        int64_t i = (int64_t)((st >> 17) % (uint64_t)z->m), j = (int64_t)((st >> 40) % (uint64_t)z->n);
        double acc = 0, mag = 0;
        for (int64_t k = 0; k < z->k; k++) {
            double x = cli_to_double(z->dt, (const char *)ha + (size_t)((bi * z->m + i) * z->k + k) * es);
            double y = cli_to_double(z->dt, (const char *)hb + (size_t)((bi * z->k + k) * z->n + j) * es);
            acc += x * y;
            mag += fabs(x * y);
        }
        double g = cli_to_double(z->od, (const char *)hc + (size_t)((bi * z->m + i) * z->n + j) * eo);
        double e = fabs(g - acc) / (mag > 0 ? mag : 1);
        if (!(e <= worst)) worst = e; /* NaN wins */
    }
    return worst;
}

/* On the CPU, before either side's timing: the cores idle for 0.25 s. OpenBLAS's threads spin for about
 * 0.1 s after each call (2^28 cycles by default) before they sleep, and on a machine of few cores they took
 * the cores from alloy's workers timed right after them (1024^3 on 2 cores: 15-16.5 ms against 10.8 alone). */
static void cpu_idle(void) {
    const struct timespec t = {0, 250000000L};
    nanosleep(&t, NULL);
}

static int bench_matmul(alloy_device *dev, int quick, const char *only, int json) {
    const int is_cuda = alloy_device_backend(dev) == ALLOY_BACKEND_CUDA;
    const mm_size *sizes = is_cuda ? CUDA_SIZES : CPU_SIZES;
    const size_t n_sizes = is_cuda ? sizeof CUDA_SIZES / sizeof *CUDA_SIZES : sizeof CPU_SIZES / sizeof *CPU_SIZES;
    cublas_api cb;
    blas_api bl;
    memset(&cb, 0, sizeof cb);
    memset(&bl, 0, sizeof bl);
    if (is_cuda) cublas_load(&cb);
    else blas_load(&bl);
    alloy_stream *s = NULL;
    if (alloy_stream_default(dev, &s) != ALLOY_OK) return cli_alloy_error(ALLOY_ERROR_INTERNAL);
    if (is_cuda && cb.handle) cb.set_stream(cb.handle, alloy_stream_native(s));
    if (!json && !is_cuda && bl.sgemm) printf("peer: %s\n", bl.name);
    if (!json)
        printf("%-14s %-22s %10s %10s %8s %10s | %-7s %10s %10s %7s\n", "matmul", "size", "time", "rate",
               "% peer", "error", "peer", "time", "error", "ratio");
    int failures = 0;
    uint64_t rng = 0x1234567u;
    for (size_t zi = 0; zi < n_sizes; zi++) {
        const mm_size *z = &sizes[zi];
        if (quick && !z->quick) continue;
        if (!bench_label_wanted(z->label, only)) continue;
        int64_t sa[3] = {z->batch, z->m, z->k}, sb[3] = {z->batch, z->k, z->n}, sc[3] = {z->batch, z->m, z->n};
        const int nd = z->batch > 1 ? 3 : 2;
        const int64_t *pa = nd == 3 ? sa : sa + 1, *pb = nd == 3 ? sb : sb + 1, *pc = nd == 3 ? sc : sc + 1;
        const size_t es = alloy_dtype_size(z->dt), eo = alloy_dtype_size(z->od);
        const size_t na = (size_t)(z->batch * z->m * z->k), nb = (size_t)(z->batch * z->k * z->n),
                     nc = (size_t)(z->batch * z->m * z->n);
        mm_ctx x;
        memset(&x, 0, sizeof x);
        x.z = z;
        x.s = s;
        x.cb = &cb;
        x.bl = &bl;
        alloy_matmul_options_init(&x.o);
        x.o.precision = z->prec;
        x.o.out_dtype = z->od;
        x.o.out_dtype_set = 1;
        x.ha = malloc(na * es);
        x.hb = malloc(nb * es);
        x.hc = malloc(nc * eo);
        if (!x.ha || !x.hb || !x.hc) return cli_error("out of host memory for %s", z->label);
        bench_fill_random(z->dt, (int64_t)na, x.ha, &rng);
        bench_fill_random(z->dt, (int64_t)nb, x.hb, &rng);
        alloy_status st = alloy_array_from_host(dev, z->dt, nd, pa, x.ha, &x.a);
        if (st == ALLOY_OK) st = alloy_array_from_host(dev, z->dt, nd, pb, x.hb, &x.b);
        if (st == ALLOY_OK) st = alloy_array_new(dev, z->od, nd, pc, &x.c);
        mm_result r;
        memset(&r, 0, sizeof r);
        r.peer_t = -1;
        const double flops = 2.0 * (double)z->batch * (double)z->m * (double)z->n * (double)z->k;
        /* enough calls per batch for ~50 ms, at least 1 */
        double t1 = -1;
        if (st == ALLOY_OK) {
            double t0 = bench_now_s();
            if (run_alloy(&x) == 0 && alloy_stream_synchronize(s) == ALLOY_OK) t1 = bench_now_s() - t0;
        }
        if (t1 < 0) {
            fprintf(stderr, "alloy: bench matmul %s: %s\n", z->label, alloy_last_error());
            failures++;
        } else {
            int per = (int)(0.05 / (flops / 5e13 > 1e-6 ? flops / 5e13 : 1e-6));
            if (!is_cuda) per = (int)(0.2 / (flops / 2e10 > 1e-4 ? flops / 2e10 : 1e-4));
            if (per < 1) per = 1;
            if (per > 200) per = 200;
            if (!is_cuda && bl.sgemm) cpu_idle();
            r.t = bench_time_calls(run_alloy, &x, s, per, is_cuda ? 9 : 5);
            r.rate = flops / r.t;
            alloy_array_copy_to_host(x.c, x.hc, nc * eo);
            r.err = sample_error(z, x.ha, x.hb, x.hc);
            if (is_cuda && cb.handle) {
                r.peer = z->dt == ALLOY_FLOAT32 && z->prec == ALLOY_PRECISION_DEFAULT ? "cuBLAS-TF32" : "cuBLAS";
                r.peer_t = bench_time_calls(run_cublas, &x, s, per, 9);
                alloy_array_copy_to_host(x.c, x.hc, nc * eo);
                r.peer_err = sample_error(z, x.ha, x.hb, x.hc);
            } else if (!is_cuda && bl.sgemm && (z->dt == ALLOY_FLOAT32 || (z->dt == ALLOY_FLOAT64 && bl.dgemm))) {
                r.peer = "BLAS";
                cpu_idle();
                r.peer_t = bench_time_calls(run_blas, &x, s, per, 5);
                r.peer_err = sample_error(z, x.ha, x.hb, x.hc);
            } else {
                snprintf(r.peer_why, sizeof r.peer_why, "%s", is_cuda ? cb.why : bl.why);
            }
            if (r.peer_t > 0) r.peer_rate = flops / r.peer_t;
        }
        char size[64];
        if (z->batch > 1)
            snprintf(size, sizeof size, "%lldx %lldx%lldx%lld", (long long)z->batch, (long long)z->m,
                     (long long)z->n, (long long)z->k);
        else snprintf(size, sizeof size, "%lldx%lldx%lld", (long long)z->m, (long long)z->n, (long long)z->k);
        if (t1 >= 0) {
            if (json) {
                printf("{\"op\": \"matmul\", \"case\": \"%s\", \"size\": \"%s\", \"device\": \"%s\", "
                       "\"time_s\": %.6g, \"flops_per_s\": %.6g, \"error\": %.3g",
                       z->label, size, alloy_device_name(dev), r.t, r.rate, r.err);
                if (r.peer_t > 0)
                    printf(", \"peer\": \"%s\", \"peer_time_s\": %.6g, \"peer_error\": %.3g, \"ratio\": %.4f",
                           r.peer, r.peer_t, r.peer_err, r.peer_t / r.t);
                else printf(", \"peer\": null, \"peer_missing\": \"%s\"", r.peer_why);
                printf("}\n");
            } else {
                char rate[32];
                snprintf(rate, sizeof rate, "%.1f %s", r.rate > 1e12 ? r.rate / 1e12 : r.rate / 1e9,
                         r.rate > 1e12 ? "TF/s" : "GF/s");
                if (r.peer_t > 0)
                    printf("%-14s %-22s %8.3f ms %10s %7.1f%% %10.2e | %-7s %7.3f ms %10.2e %7.3f\n", z->label, size,
                           r.t * 1e3, rate, 100.0 * r.rate / r.peer_rate, r.err, r.peer, r.peer_t * 1e3,
                           r.peer_err, r.peer_t / r.t);
                else
                    printf("%-14s %-22s %8.3f ms %10s %8s %10.2e | peer unavailable: %s\n", z->label, size,
                           r.t * 1e3, rate, "-", r.err, r.peer_why);
            }
            fflush(stdout);
        }
        alloy_array_free(x.a);
        alloy_array_free(x.b);
        alloy_array_free(x.c);
        free(x.ha);
        free(x.hb);
        free(x.hc);
    }
    return failures ? CLI_ERROR : CLI_OK;
}

int cmd_bench(int argc, char **argv) {
    cli_set_command("bench");
    const char *device = "auto";
    const char *only = NULL;
    int json = 0, quick = 0, want_matmul = 0, want_linalg = 0, want_mlstm = 0, want_nn = 0, any_op = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (cli_is_help(argv[i])) {
            fputs(USAGE, stdout);
            return CLI_OK;
        }
        if ((r = cli_opt_value(argc, argv, &i, "--device", &v))) {
            if (r < 0) return CLI_USAGE;
            device = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--only", &v))) {
            if (r < 0) return CLI_USAGE;
            only = v;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else if (!strcmp(argv[i], "--once")) {
            bench_once = 1;
        } else if (argv[i][0] == '-') {
            return cli_usage("unknown option '%s'", argv[i]);
        } else if (!strcmp(argv[i], "matmul")) {
            want_matmul = any_op = 1;
        } else if (!strcmp(argv[i], "linalg")) {
            want_linalg = any_op = 1;
        } else if (!strcmp(argv[i], "mlstm")) {
            want_mlstm = any_op = 1;
        } else if (!strcmp(argv[i], "nn")) {
            want_nn = any_op = 1;
        } else {
            return cli_usage("unknown operation '%s' (the catalog's benchmarks: matmul, linalg, mlstm, nn)",
                             argv[i]);
        }
    }
    if (!any_op) want_matmul = want_linalg = want_mlstm = want_nn = 1;
    alloy_device *dev = NULL;
    alloy_status st = alloy_device_get(device, &dev);
    if (st != ALLOY_OK) return cli_alloy_error(st);
    if (!json) printf("device: %s\n", alloy_device_description(dev));
    int rc = CLI_OK;
    if (want_matmul) {
        int r = bench_matmul(dev, quick, only, json);
        if (r != CLI_OK) rc = r;
    }
    if (want_linalg) {
        int r = bench_linalg(dev, quick, only, json);
        if (r != CLI_OK) rc = r;
    }
    if (want_mlstm) {
        int r = bench_mlstm(dev, quick, only, json);
        if (r != CLI_OK) rc = r;
    }
    if (want_nn) {
        int r = bench_nn(dev, quick, only, json);
        if (r != CLI_OK) rc = r;
    }
    return rc;
}
