/* bench_cpu_pocl.c — the CPU peer benchmark of issue 12 (bench/RESULTS.md):
 * the same kernels through alloy's CPU device (the example kernel files, and
 * bench/kernels/ for the barrier microbenchmark) and as OpenCL C through
 * PoCL's CPU device (hand-written equivalents below: same algorithm, same
 * work-group sizes), plus a plain C loop on the same number of threads as the
 * ceiling where one is meaningful. One process; calls interleaved (alloy,
 * PoCL, C, alloy, ...); median of 9 after one warm-up each. Checks that
 * alloy's and PoCL's outputs agree and prints a markdown table.
 *
 * OpenCL is loaded at run time (dlopen libOpenCL.so.1, the ICD loader of
 * ocl-icd-libopencl1), so this builds without OpenCL headers and, without
 * PoCL, runs alloy and the C loops alone and says "PoCL not installed".
 * Debian: apt-get install pocl-opencl-icd ocl-icd-opencl-dev.
 *
 * Usage: bench_cpu_pocl [reps, default 9]
 * Threads: alloy and the C loops use ALLOY_NUM_THREADS or all cores; PoCL its
 * own default (all cores). The C loops are built with the benchmark's flags
 * (no -march; alloy's kernels get -march=native, docs/dialect.md "CPU"). */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"

/* ---- the few OpenCL 1.2 declarations this program needs ----------------- */

typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef cl_ulong cl_bitfield;
typedef struct _cl_platform_id *cl_platform_id;
typedef struct _cl_device_id *cl_device_id;
typedef struct _cl_context *cl_context;
typedef struct _cl_command_queue *cl_command_queue;
typedef struct _cl_mem *cl_mem;
typedef struct _cl_program *cl_program;
typedef struct _cl_kernel *cl_kernel;
typedef struct _cl_event *cl_event;
typedef intptr_t cl_context_properties;

#define CL_SUCCESS 0
#define CL_TRUE 1
#define CL_DEVICE_TYPE_CPU (1u << 1)
#define CL_PLATFORM_VERSION 0x0901
#define CL_PLATFORM_NAME 0x0902
#define CL_DEVICE_NAME 0x102B
#define CL_DEVICE_MAX_COMPUTE_UNITS 0x1002
#define CL_MEM_READ_WRITE (1u << 0)
#define CL_MEM_COPY_HOST_PTR (1u << 5)
#define CL_PROGRAM_BUILD_LOG 0x1183

static struct {
    cl_int (*GetPlatformIDs)(cl_uint, cl_platform_id *, cl_uint *);
    cl_int (*GetPlatformInfo)(cl_platform_id, cl_uint, size_t, void *, size_t *);
    cl_int (*GetDeviceIDs)(cl_platform_id, cl_bitfield, cl_uint, cl_device_id *, cl_uint *);
    cl_int (*GetDeviceInfo)(cl_device_id, cl_uint, size_t, void *, size_t *);
    cl_context (*CreateContext)(const cl_context_properties *, cl_uint, const cl_device_id *,
                                void (*)(const char *, const void *, size_t, void *), void *,
                                cl_int *);
    cl_command_queue (*CreateCommandQueue)(cl_context, cl_device_id, cl_bitfield, cl_int *);
    cl_program (*CreateProgramWithSource)(cl_context, cl_uint, const char **, const size_t *,
                                          cl_int *);
    cl_int (*BuildProgram)(cl_program, cl_uint, const cl_device_id *, const char *,
                           void (*)(cl_program, void *), void *);
    cl_int (*GetProgramBuildInfo)(cl_program, cl_device_id, cl_uint, size_t, void *, size_t *);
    cl_kernel (*CreateKernel)(cl_program, const char *, cl_int *);
    cl_int (*SetKernelArg)(cl_kernel, cl_uint, size_t, const void *);
    cl_mem (*CreateBuffer)(cl_context, cl_bitfield, size_t, void *, cl_int *);
    cl_int (*EnqueueNDRangeKernel)(cl_command_queue, cl_kernel, cl_uint, const size_t *,
                                   const size_t *, const size_t *, cl_uint, const cl_event *,
                                   cl_event *);
    cl_int (*EnqueueReadBuffer)(cl_command_queue, cl_mem, cl_uint, size_t, size_t, void *, cl_uint,
                                const cl_event *, cl_event *);
    cl_int (*Finish)(cl_command_queue);
    cl_int (*ReleaseMemObject)(cl_mem);
    cl_int (*ReleaseKernel)(cl_kernel);
    cl_int (*ReleaseProgram)(cl_program);
} cl;

static cl_context cl_ctx;
static cl_device_id cl_dev;
static cl_command_queue cl_q;
static char cl_desc[512];

#define CL_CHECK(expr)                                                                        \
    do {                                                                                      \
        cl_int e_ = (expr);                                                                   \
        if (e_ != CL_SUCCESS) {                                                               \
            fprintf(stderr, "%s:%d: %s failed: OpenCL error %d\n", __FILE__, __LINE__, #expr, \
                    (int)e_);                                                                 \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

/* Loads the ICD loader and picks PoCL's CPU device; 0 (with a reason) if absent. */
static int pocl_open(char *why, size_t why_len) {
    void *h = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { snprintf(why, why_len, "PoCL not installed (no libOpenCL.so.1)"); return 0; }
#define SYM(f)                                                                       \
    if (!(*(void **)&cl.f = dlsym(h, "cl" #f))) {                                    \
        snprintf(why, why_len, "PoCL not installed (libOpenCL.so.1 lacks cl%s)", #f); \
        return 0;                                                                    \
    }
    SYM(GetPlatformIDs) SYM(GetPlatformInfo) SYM(GetDeviceIDs) SYM(GetDeviceInfo)
    SYM(CreateContext) SYM(CreateCommandQueue) SYM(CreateProgramWithSource) SYM(BuildProgram)
    SYM(GetProgramBuildInfo) SYM(CreateKernel) SYM(SetKernelArg) SYM(CreateBuffer)
    SYM(EnqueueNDRangeKernel) SYM(EnqueueReadBuffer) SYM(Finish) SYM(ReleaseMemObject)
    SYM(ReleaseKernel) SYM(ReleaseProgram)
#undef SYM
    cl_platform_id plats[16];
    cl_uint np = 0;
    if (cl.GetPlatformIDs(16, plats, &np) != CL_SUCCESS || np == 0) {
        snprintf(why, why_len, "PoCL not installed (no OpenCL platform)");
        return 0;
    }
    for (cl_uint i = 0; i < np && i < 16; i++) {
        char name[256] = "", ver[256] = "";
        cl.GetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof name, name, NULL);
        cl.GetPlatformInfo(plats[i], CL_PLATFORM_VERSION, sizeof ver, ver, NULL);
        if (!strstr(name, "Portable Computing Language") && !strstr(ver, "PoCL") &&
            !strstr(ver, "pocl"))
            continue;
        cl_uint nd = 0;
        if (cl.GetDeviceIDs(plats[i], CL_DEVICE_TYPE_CPU, 1, &cl_dev, &nd) != CL_SUCCESS || !nd)
            continue;
        char dname[256] = "";
        cl_uint cu = 0;
        cl.GetDeviceInfo(cl_dev, CL_DEVICE_NAME, sizeof dname, dname, NULL);
        cl.GetDeviceInfo(cl_dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
        snprintf(cl_desc, sizeof cl_desc, "%s; %s; %u compute units", ver, dname, cu);
        cl_int err;
        cl_ctx = cl.CreateContext(NULL, 1, &cl_dev, NULL, NULL, &err);
        CL_CHECK(err);
        cl_q = cl.CreateCommandQueue(cl_ctx, cl_dev, 0, &err);
        CL_CHECK(err);
        return 1;
    }
    snprintf(why, why_len, "PoCL not installed (no PoCL CPU device among the OpenCL platforms)");
    return 0;
}

static cl_kernel cl_build(const char *src, const char *name) {
    cl_int err;
    cl_program p = cl.CreateProgramWithSource(cl_ctx, 1, &src, NULL, &err);
    CL_CHECK(err);
    if (cl.BuildProgram(p, 1, &cl_dev, "", NULL, NULL) != CL_SUCCESS) {
        char log[8192] = "";
        cl.GetProgramBuildInfo(p, cl_dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        fprintf(stderr, "OpenCL build of %s failed:\n%s\n", name, log);
        exit(1);
    }
    cl_kernel k = cl.CreateKernel(p, name, &err);
    CL_CHECK(err);
    cl.ReleaseProgram(p);
    return k;
}

static cl_mem cl_buf(size_t bytes, const void *init) {
    cl_int err;
    cl_mem m = cl.CreateBuffer(cl_ctx, CL_MEM_READ_WRITE | (init ? CL_MEM_COPY_HOST_PTR : 0),
                               bytes, (void *)init, &err);
    CL_CHECK(err);
    return m;
}

/* ---- the OpenCL C equivalents ---------------------------------------------- */

static const char *CL_GEMM_AV =
    "__kernel void gemm_av(__global const float *A, __global const float *V,\n"
    "                      __global float *C, uint m, uint n, uint k) {\n"
    "    __local float Asub[16][16];\n"
    "    __local float Vsub[16][16];\n"
    "    uint tx = get_local_id(0), ty = get_local_id(1);\n"
    "    uint col = get_group_id(0) * 16 + tx, row = get_group_id(1) * 16 + ty;\n"
    "    float acc = 0.0f;\n"
    "    for (uint t0 = 0; t0 < n; t0 += 16) {\n"
    "        uint a_col = t0 + tx, v_row = t0 + ty;\n"
    "        Asub[ty][tx] = (row < m && a_col < n) ? A[(size_t)row * n + a_col] : 0.0f;\n"
    "        Vsub[ty][tx] = (v_row < n && col < k) ? V[(size_t)v_row * k + col] : 0.0f;\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "        for (uint p = 0; p < 16; ++p) acc = fma(Asub[ty][p], Vsub[p][tx], acc);\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    if (row < m && col < k) C[(size_t)row * k + col] = acc;\n"
    "}\n";

static const char *CL_GEMM_AT_B =
    "__kernel void gemm_at_b(__global const float *A, __global const float *B,\n"
    "                        __global float *Z, uint m, uint n, uint k) {\n"
    "    __local float Asub[16][16];\n"
    "    __local float Bsub[16][16];\n"
    "    uint tx = get_local_id(0), ty = get_local_id(1);\n"
    "    uint zr0 = get_group_id(1) * 16, zr = zr0 + ty;\n"
    "    uint col = get_group_id(0) * 16 + tx;\n"
    "    float acc = 0.0f;\n"
    "    for (uint t0 = 0; t0 < m; t0 += 16) {\n"
    "        uint r = t0 + ty;\n"
    "        Asub[ty][tx] = (r < m && zr0 + tx < n) ? A[(size_t)r * n + zr0 + tx] : 0.0f;\n"
    "        Bsub[ty][tx] = (r < m && col < k) ? B[(size_t)r * k + col] : 0.0f;\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "        for (uint p = 0; p < 16; ++p) acc = fma(Asub[p][ty], Bsub[p][tx], acc);\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    if (zr < n && col < k) Z[(size_t)zr * k + col] = acc;\n"
    "}\n";

static const char *CL_SOFT_CAP =
    "__kernel void soft_cap(__global const float *x, float c, __global float *out, uint size) {\n"
    "    uint i = get_global_id(0);\n"
    "    if (i >= size) return;\n"
    "    out[i] = c * tanh(x[i] / c);\n"
    "}\n";

static const char *CL_BARRIER_ROUNDS =
    "__kernel void barrier_rounds(int rounds, __global float *out) {\n"
    "    __local float buf[2][256];\n"
    "    uint t = get_local_id(0), n = get_local_size(0);\n"
    "    float acc = 0.0f;\n"
    "    for (int r = 0; r < rounds; ++r) {\n"
    "        buf[r & 1][t] = (float)(r + (int)t);\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "        acc += buf[r & 1][(t + 1) % n];\n"
    "    }\n"
    "    out[get_global_id(0)] = acc;\n"
    "}\n";

/* simd_sum over 32 lanes becomes a tree in local memory within each 32-lane
 * segment of the group (work-group size <= 256, a multiple of 32). */
static const char *CL_QR_COL_DOT_SIMD =
    "__kernel void qr_col_dot_simd(__global const float *Q, __global const float *v,\n"
    "                              __global float *out, uint m, uint k) {\n"
    "    __local float part[256];\n"
    "    uint gid = get_global_id(0), lid = get_local_id(0);\n"
    "    uint col = gid / 32, lane = gid % 32;\n"
    "    float partial = 0.0f;\n"
    "    if (col < k)\n"
    "        for (uint r = lane; r < m; r += 32)\n"
    "            partial = fma(Q[(size_t)r * k + col], v[r], partial);\n"
    "    part[lid] = partial;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    for (uint s = 16; s > 0; s >>= 1) {\n"
    "        if (lane < s) part[lid] += part[lid + s];\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    if (lane == 0 && col < k) out[col] = part[lid];\n"
    "}\n";

static const char *CL_IVF_TOPK_L2 =
    "#define K 8\n"
    "#define POOL 1024\n"
    "#define NONE 0xFFFFFFFFu\n"
    "__kernel void ivf_topk_l2(__global const float *Q, __global const float *X,\n"
    "                          __global const int *ids, __global float *out_vals,\n"
    "                          __global int *out_ids, uint b, uint d, uint m) {\n"
    "    __local float pool_val[POOL];\n"
    "    __local uint pool_row[POOL];\n"
    "    uint query = get_group_id(0), tid = get_local_id(0), tpb = get_local_size(0);\n"
    "    if (query >= b) return;\n"
    "    size_t out_base = (size_t)query * K;\n"
    "    if (tpb * (uint)K > POOL) {\n"
    "        for (uint s = tid; s < (uint)K; s += tpb) {\n"
    "            out_vals[out_base + s] = NAN;\n"
    "            out_ids[out_base + s] = -2;\n"
    "        }\n"
    "        return;\n"
    "    }\n"
    "    float best_val[K];\n"
    "    uint best_row[K];\n"
    "    for (int s = 0; s < K; ++s) { best_val[s] = INFINITY; best_row[s] = NONE; }\n"
    "    size_t q_base = (size_t)query * d;\n"
    "    for (uint row = tid; row < m; row += tpb) {\n"
    "        size_t x_base = (size_t)row * d;\n"
    "        float dist = 0.0f;\n"
    "        for (uint j = 0; j < d; ++j) {\n"
    "            float diff = X[x_base + j] - Q[q_base + j];\n"
    "            dist = fma(diff, diff, dist);\n"
    "        }\n"
    "        if (dist < best_val[K - 1]) {\n"
    "            int s = K - 1;\n"
    "            while (s > 0 && dist < best_val[s - 1]) {\n"
    "                best_val[s] = best_val[s - 1];\n"
    "                best_row[s] = best_row[s - 1];\n"
    "                --s;\n"
    "            }\n"
    "            best_val[s] = dist;\n"
    "            best_row[s] = row;\n"
    "        }\n"
    "    }\n"
    "    for (int s = 0; s < K; ++s) {\n"
    "        pool_val[tid * K + s] = best_val[s];\n"
    "        pool_row[tid * K + s] = best_row[s];\n"
    "    }\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    for (int s = 0; s < K; ++s) {\n"
    "        float v = best_val[s];\n"
    "        uint r = best_row[s];\n"
    "        uint j = tid * K + s;\n"
    "        uint rank = (uint)s;\n"
    "        for (uint u = 0; u < tpb && rank < (uint)K; ++u) {\n"
    "            if (u == tid) continue;\n"
    "            uint lo = 0, hi = (uint)K;\n"
    "            while (lo < hi) {\n"
    "                uint mid = (lo + hi) / 2;\n"
    "                uint jj = u * K + mid;\n"
    "                float cv = pool_val[jj];\n"
    "                uint cr = pool_row[jj];\n"
    "                bool before = cv < v || (cv == v && (cr < r || (cr == r && jj < j)));\n"
    "                if (before) lo = mid + 1; else hi = mid;\n"
    "            }\n"
    "            rank += lo;\n"
    "        }\n"
    "        if (rank >= (uint)K) break;\n"
    "        out_vals[out_base + rank] = v;\n"
    "        out_ids[out_base + rank] = r == NONE ? -1 : ids[r];\n"
    "    }\n"
    "}\n";

/* ---- the plain C loops (the ceiling), split over threads ------------------- */

static int n_threads;

typedef void (*par_fn)(void *ctx, int64_t lo, int64_t hi);
typedef struct { par_fn fn; void *ctx; int64_t lo, hi; } par_slice;

static void *par_run(void *p) {
    par_slice *s = p;
    s->fn(s->ctx, s->lo, s->hi);
    return NULL;
}

/* Runs fn over [0, n) in n_threads contiguous slices. */
static void par_for(int64_t n, par_fn fn, void *ctx) {
    pthread_t th[64];
    par_slice sl[64];
    for (int t = 0; t < n_threads; t++) {
        sl[t] = (par_slice){fn, ctx, n * t / n_threads, n * (t + 1) / n_threads};
        if (t) pthread_create(&th[t], NULL, par_run, &sl[t]);
    }
    par_run(&sl[0]);
    for (int t = 1; t < n_threads; t++) pthread_join(th[t], NULL);
}

typedef struct {
    const float *a, *b;
    float *out;
    const int *ids;
    int64_t m, n, k; /* sizes; meaning per kernel */
    float c;
    int rounds;
    float *out2;
    int *iout;
} cctx;

/* C = A V, row by row: C[i,:] += A[i,p] * V[p,:] (vectorises over j). */
static void c_gemm_av(void *p, int64_t lo, int64_t hi) {
    cctx *c = p;
    for (int64_t i = lo; i < hi; i++) {
        float *crow = c->out + i * c->k;
        for (int64_t j = 0; j < c->k; j++) crow[j] = 0.0f;
        for (int64_t q = 0; q < c->n; q++) {
            float a = c->a[i * c->n + q];
            const float *vrow = c->b + q * c->k;
            for (int64_t j = 0; j < c->k; j++) crow[j] += a * vrow[j];
        }
    }
}

/* Z = A^T B, rows i of Z in [lo, hi): Z[i,:] += A[r,i] * B[r,:]. */
static void c_gemm_at_b(void *p, int64_t lo, int64_t hi) {
    cctx *c = p;
    for (int64_t i = lo; i < hi; i++)
        for (int64_t j = 0; j < c->k; j++) c->out[i * c->k + j] = 0.0f;
    for (int64_t r = 0; r < c->m; r++) {
        const float *brow = c->b + r * c->k;
        for (int64_t i = lo; i < hi; i++) {
            float a = c->a[r * c->n + i];
            float *zrow = c->out + i * c->k;
            for (int64_t j = 0; j < c->k; j++) zrow[j] += a * brow[j];
        }
    }
}

static void c_soft_cap(void *p, int64_t lo, int64_t hi) {
    cctx *c = p;
    for (int64_t i = lo; i < hi; i++) c->out[i] = c->c * tanhf(c->a[i] / c->c);
}

/* The barrier benchmark as work-group loops: groups [lo, hi) of k threads. */
static void c_barrier_rounds(void *p, int64_t lo, int64_t hi) {
    cctx *c = p;
    int64_t n = c->k;
    float buf[2][256], acc[256];
    for (int64_t g = lo; g < hi; g++) {
        for (int64_t t = 0; t < n; t++) acc[t] = 0.0f;
        for (int r = 0; r < c->rounds; r++) {
            for (int64_t t = 0; t < n; t++) buf[r & 1][t] = (float)(r + (int)t);
            for (int64_t t = 0; t < n; t++) acc[t] += buf[r & 1][(t + 1) % n];
        }
        for (int64_t t = 0; t < n; t++) c->out[g * n + t] = acc[t];
    }
}

/* c = Q^T v for columns [lo, hi): row by row over the slice (vectorises). */
static void c_col_dot(void *p, int64_t lo, int64_t hi) {
    cctx *c = p;
    for (int64_t j = lo; j < hi; j++) c->out[j] = 0.0f;
    for (int64_t r = 0; r < c->m; r++) {
        float vr = c->b[r];
        const float *qrow = c->a + r * c->k;
        for (int64_t j = lo; j < hi; j++) c->out[j] += qrow[j] * vr;
    }
}

/* Per query in [lo, hi): all distances, K best by insertion (ties: lower row). */
#define IVF_K 8
static void c_ivf_topk(void *p, int64_t lo, int64_t hi) {
    cctx *c = p;
    int64_t d = c->n, m = c->m;
    for (int64_t qi = lo; qi < hi; qi++) {
        float bv[IVF_K];
        int64_t br[IVF_K];
        for (int s = 0; s < IVF_K; s++) bv[s] = INFINITY, br[s] = -1;
        const float *q = c->a + qi * d;
        for (int64_t row = 0; row < m; row++) {
            const float *x = c->b + row * d;
            float dist = 0.0f;
            for (int64_t j = 0; j < d; j++) {
                float diff = x[j] - q[j];
                dist += diff * diff;
            }
            if (dist < bv[IVF_K - 1]) {
                int s = IVF_K - 1;
                while (s > 0 && dist < bv[s - 1]) bv[s] = bv[s - 1], br[s] = br[s - 1], --s;
                bv[s] = dist;
                br[s] = row;
            }
        }
        for (int s = 0; s < IVF_K; s++) {
            c->out[qi * IVF_K + s] = bv[s];
            c->iout[qi * IVF_K + s] = br[s] < 0 ? -1 : c->ids[br[s]];
        }
    }
}

/* ---- one benchmark case ------------------------------------------------------ */

static alloy_device *dev;
static int have_pocl;

typedef struct bcase {
    const char *kernel;
    char problem[96];
    /* alloy */
    alloy_kernel_file *file;
    alloy_kernel *ak;
    alloy_launch *al;
    int n_in, n_out;
    alloy_array *ins[4], *outs[2];
    /* PoCL */
    cl_kernel ck;
    cl_uint dims;
    size_t gws[2], lws[2];
    cl_mem cl_outs[2];
    /* C loop (fn NULL: none) */
    par_fn cfn;
    int64_t cn;
    cctx cc;
    /* results */
    int int_out[2];   /* output j holds int32 */
    size_t out_len[2];
    double exact;     /* 1: alloy and PoCL must agree bit for bit */
    double rtol;      /* else: |a-p| <= rtol * max(1, |p|) */
    double t_alloy, t_pocl, t_c;
    double per_barrier_div; /* > 0: ns per thread and barrier = t / this */
    char agree[96];
} bcase;

static void load_kernel(bcase *b, const char *relpath) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", ALLOY_SOURCE_DIR, relpath);
    BENCH_CHECK(alloy_kernel_file_load(path, &b->file));
    BENCH_CHECK(alloy_kernel_file_new_kernel(b->file, &b->ak));
}

static alloy_array *a_from(alloy_dtype dt, int ndim, const int64_t *shape, const void *src) {
    alloy_array *a;
    BENCH_CHECK(alloy_array_from_host(dev, dt, ndim, shape, src, &a));
    return a;
}

static alloy_array *a_out(alloy_dtype dt, int ndim, const int64_t *shape) {
    alloy_array *a;
    BENCH_CHECK(alloy_array_new(dev, dt, ndim, shape, &a));
    return a;
}

static void a_launch(bcase *b, uint32_t gx, uint32_t gy, uint32_t tx, uint32_t ty) {
    BENCH_CHECK(alloy_launch_new(&b->al));
    for (int j = 0; j < b->n_out; j++) BENCH_CHECK(alloy_launch_add_output_array(b->al, b->outs[j]));
    BENCH_CHECK(alloy_launch_set_grid(b->al, gx, gy, 1));
    BENCH_CHECK(alloy_launch_set_threadgroup(b->al, tx, ty, 1));
    BENCH_CHECK(alloy_kernel_file_add_templates(b->file, b->al));
}

static double run_alloy(bcase *b) {
    alloy_array *res[2] = {NULL, NULL};
    double t0 = bench_now();
    BENCH_CHECK(alloy_kernel_apply(b->ak, b->n_in, b->ins, b->al, NULL, res));
    BENCH_CHECK(alloy_device_synchronize(dev));
    double t = bench_now() - t0;
    for (int j = 0; j < b->n_out; j++) alloy_array_free(res[j]);
    return t;
}

static double run_pocl(bcase *b) {
    double t0 = bench_now();
    CL_CHECK(cl.EnqueueNDRangeKernel(cl_q, b->ck, b->dims, NULL, b->gws, b->lws, 0, NULL, NULL));
    CL_CHECK(cl.Finish(cl_q));
    return bench_now() - t0;
}

static double run_c(bcase *b) {
    double t0 = bench_now();
    par_for(b->cn, b->cfn, &b->cc);
    return bench_now() - t0;
}

static int reps = 9;

static void measure(bcase *b) {
    double ta[64], tp[64], tc[64];
    run_alloy(b); /* compile, first touch */
    if (have_pocl) run_pocl(b);
    if (b->cfn) run_c(b);
    for (int r = 0; r < reps; r++) {
        ta[r] = run_alloy(b);
        if (have_pocl) tp[r] = run_pocl(b);
        if (b->cfn) tc[r] = run_c(b);
    }
    b->t_alloy = bench_median(ta, reps);
    b->t_pocl = have_pocl ? bench_median(tp, reps) : -1;
    b->t_c = b->cfn ? bench_median(tc, reps) : -1;
    if (!have_pocl) { snprintf(b->agree, sizeof b->agree, "-"); return; }
    /* alloy's outputs against PoCL's */
    size_t mismatches = 0, total = 0;
    double worst = 0;
    for (int j = 0; j < b->n_out; j++) {
        size_t n = b->out_len[j];
        void *pc = malloc(n * 4);
        CL_CHECK(cl.EnqueueReadBuffer(cl_q, b->cl_outs[j], CL_TRUE, 0, n * 4, pc, 0, NULL, NULL));
        const void *pa = alloy_array_data(b->outs[j]);
        total += n;
        for (size_t i = 0; i < n; i++) {
            if (b->int_out[j]) {
                mismatches += ((const int32_t *)pa)[i] != ((const int32_t *)pc)[i];
                continue;
            }
            float x = ((const float *)pa)[i], y = ((const float *)pc)[i];
            if (b->exact) {
                mismatches += memcmp(&x, &y, 4) != 0;
            } else {
                double e = fabs((double)x - y) / fmax(1.0, fabs((double)y));
                if (!(e <= b->rtol)) mismatches++;
                if (e > worst) worst = e;
            }
        }
        free(pc);
    }
    if (b->exact)
        snprintf(b->agree, sizeof b->agree, mismatches ? "DIFFER (%zu of %zu)" : "identical",
                 mismatches, total);
    else if (mismatches)
        snprintf(b->agree, sizeof b->agree, "DIFFER (%zu of %zu, worst %.2g)", mismatches, total,
                 worst);
    else
        snprintf(b->agree, sizeof b->agree, "agree (rel. %.1g)", worst);
}

static void set_args(cl_kernel k, int n, const size_t *sizes, const void *const *vals) {
    for (int i = 0; i < n; i++) CL_CHECK(cl.SetKernelArg(k, (cl_uint)i, sizes[i], vals[i]));
}

static float *rnd(size_t n, float lo, float hi, unsigned seed) {
    float *p = malloc(n * sizeof *p);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = lo + (hi - lo) * (float)((s >> 40) * (1.0 / 16777216.0));
    }
    return p;
}

/* ---- the cases ---------------------------------------------------------------- */

/* Tiled GEMMs: A V (A m x n, V n x k) and A^T B (A m x n, B m x k). */
static void case_gemm(bcase *b, int at_b, uint32_t m, uint32_t n, uint32_t k) {
    b->kernel = at_b ? "gemm_at_b" : "gemm_av";
    snprintf(b->problem, sizeof b->problem, "%ux%ux%u fp32, 16x16 tiles", m, n, k);
    load_kernel(b, at_b ? "examples/gemm_at_b.metal" : "examples/gemm_av.metal");
    uint32_t zr = at_b ? n : m; /* rows of the result */
    int64_t sa[2] = {m, n}, sb[2] = {at_b ? m : n, k}, sz[2] = {zr, k};
    float *A = rnd((size_t)m * n, -1, 1, 1), *B = rnd((size_t)sb[0] * k, -1, 1, 2);
    b->n_in = 2, b->n_out = 1;
    b->ins[0] = a_from(ALLOY_FLOAT32, 2, sa, A);
    b->ins[1] = a_from(ALLOY_FLOAT32, 2, sb, B);
    b->outs[0] = a_out(ALLOY_FLOAT32, 2, sz);
    uint32_t gx = (k + 15) / 16 * 16, gy = (zr + 15) / 16 * 16;
    a_launch(b, gx, gy, 16, 16);
    b->out_len[0] = (size_t)zr * k;
    b->exact = 1; /* same fma sequence on both sides */
    if (have_pocl) {
        b->ck = cl_build(at_b ? CL_GEMM_AT_B : CL_GEMM_AV, b->kernel);
        cl_mem ma = cl_buf((size_t)m * n * 4, A), mb = cl_buf((size_t)sb[0] * k * 4, B);
        b->cl_outs[0] = cl_buf(b->out_len[0] * 4, NULL);
        size_t s[6] = {sizeof(cl_mem), sizeof(cl_mem), sizeof(cl_mem), 4, 4, 4};
        const void *v[6] = {&ma, &mb, &b->cl_outs[0], &m, &n, &k};
        set_args(b->ck, 6, s, v);
        b->dims = 2, b->gws[0] = gx, b->gws[1] = gy, b->lws[0] = b->lws[1] = 16;
    }
    b->cfn = at_b ? c_gemm_at_b : c_gemm_av;
    b->cn = zr;
    b->cc = (cctx){.a = alloy_array_data(b->ins[0]), .b = alloy_array_data(b->ins[1]),
                   .out = malloc(b->out_len[0] * 4), .m = m, .n = n, .k = k};
    free(A);
    free(B);
}

static void case_soft_cap(bcase *b, uint32_t n) {
    b->kernel = "soft_cap";
    float cap = 15.0f;
    snprintf(b->problem, sizeof b->problem, "%u floats (16 M), cap %g, groups of 256", n, cap);
    load_kernel(b, "examples/soft_cap.metal");
    int64_t sn = n;
    float *x = rnd(n, -8 * cap, 8 * cap, 3);
    b->n_in = 2, b->n_out = 1;
    b->ins[0] = a_from(ALLOY_FLOAT32, 1, &sn, x);
    BENCH_CHECK(alloy_array_scalar(dev, ALLOY_FLOAT32, cap, &b->ins[1]));
    b->outs[0] = a_out(ALLOY_FLOAT32, 1, &sn);
    a_launch(b, n, 1, 256, 1);
    b->out_len[0] = n;
    b->rtol = 1e-6; /* tanh implementations may differ by an ulp or two */
    if (have_pocl) {
        b->ck = cl_build(CL_SOFT_CAP, "soft_cap");
        cl_mem mx = cl_buf((size_t)n * 4, x);
        b->cl_outs[0] = cl_buf((size_t)n * 4, NULL);
        size_t s[4] = {sizeof(cl_mem), 4, sizeof(cl_mem), 4};
        const void *v[4] = {&mx, &cap, &b->cl_outs[0], &n};
        set_args(b->ck, 4, s, v);
        b->dims = 1, b->gws[0] = n, b->lws[0] = 256;
    }
    b->cfn = c_soft_cap;
    b->cn = n;
    b->cc = (cctx){.a = alloy_array_data(b->ins[0]), .out = malloc((size_t)n * 4), .c = cap};
    free(x);
}

static void case_barrier(bcase *b, uint32_t groups, uint32_t tg, int rounds) {
    b->kernel = "barrier_rounds";
    snprintf(b->problem, sizeof b->problem, "%u groups of %u threads, %d barriers each", groups,
             tg, rounds);
    load_kernel(b, "bench/kernels/barrier_rounds.metal");
    int64_t n = (int64_t)groups * tg;
    b->n_in = 1, b->n_out = 1;
    BENCH_CHECK(alloy_array_scalar(dev, ALLOY_INT32, rounds, &b->ins[0]));
    b->outs[0] = a_out(ALLOY_FLOAT32, 1, &n);
    a_launch(b, (uint32_t)n, 1, tg, 1);
    b->out_len[0] = (size_t)n;
    b->exact = 1; /* small integers: exact in fp32 */
    b->per_barrier_div = (double)n * rounds;
    if (have_pocl) {
        b->ck = cl_build(CL_BARRIER_ROUNDS, "barrier_rounds");
        b->cl_outs[0] = cl_buf((size_t)n * 4, NULL);
        size_t s[2] = {4, sizeof(cl_mem)};
        const void *v[2] = {&rounds, &b->cl_outs[0]};
        set_args(b->ck, 2, s, v);
        b->dims = 1, b->gws[0] = (size_t)n, b->lws[0] = tg;
    }
    b->cfn = c_barrier_rounds;
    b->cn = groups;
    b->cc = (cctx){.out = malloc((size_t)n * 4), .k = tg, .rounds = rounds};
}

static void case_col_dot(bcase *b, uint32_t m, uint32_t k, uint32_t tg) {
    b->kernel = "qr_col_dot_simd";
    snprintf(b->problem, sizeof b->problem, "Q %ux%u, simd_sum over 32 lanes, groups of %u", m, k,
             tg);
    load_kernel(b, "examples/qr_col_dot_simd.metal");
    int64_t sq[2] = {m, k}, sv = m, so = k;
    float *Q = rnd((size_t)m * k, -1, 1, 4), *v = rnd(m, -1, 1, 5);
    b->n_in = 2, b->n_out = 1;
    b->ins[0] = a_from(ALLOY_FLOAT32, 2, sq, Q);
    b->ins[1] = a_from(ALLOY_FLOAT32, 1, &sv, v);
    b->outs[0] = a_out(ALLOY_FLOAT32, 1, &so);
    a_launch(b, k * 32, 1, tg, 1);
    b->out_len[0] = k;
    b->rtol = 1e-5; /* simd_sum's order against the tree's */
    if (have_pocl) {
        b->ck = cl_build(CL_QR_COL_DOT_SIMD, "qr_col_dot_simd");
        cl_mem mq = cl_buf((size_t)m * k * 4, Q), mv = cl_buf((size_t)m * 4, v);
        b->cl_outs[0] = cl_buf((size_t)k * 4, NULL);
        size_t s[5] = {sizeof(cl_mem), sizeof(cl_mem), sizeof(cl_mem), 4, 4};
        const void *vv[5] = {&mq, &mv, &b->cl_outs[0], &m, &k};
        set_args(b->ck, 5, s, vv);
        b->dims = 1, b->gws[0] = (size_t)k * 32, b->lws[0] = tg;
    }
    b->cfn = c_col_dot;
    b->cn = k;
    b->cc = (cctx){.a = alloy_array_data(b->ins[0]), .b = alloy_array_data(b->ins[1]),
                   .out = malloc((size_t)k * 4), .m = m, .k = k};
    free(Q);
    free(v);
}

static void case_ivf(bcase *b, uint32_t nb, uint32_t d, uint32_t m, uint32_t tpb) {
    b->kernel = "ivf_topk_l2";
    snprintf(b->problem, sizeof b->problem, "%u queries, %u rows of %u, K=8, groups of %u", nb, m,
             d, tpb);
    load_kernel(b, "examples/ivf_topk_l2.metal"); /* template K=8 from the file */
    int64_t sq[2] = {nb, d}, sx[2] = {m, d}, si = m, so[2] = {nb, IVF_K};
    float *Q = rnd((size_t)nb * d, -1, 1, 6), *X = rnd((size_t)m * d, -1, 1, 7);
    int32_t *ids = malloc((size_t)m * 4);
    for (uint32_t i = 0; i < m; i++) ids[i] = (int32_t)(1000000 + 7 * i);
    b->n_in = 3, b->n_out = 2;
    b->ins[0] = a_from(ALLOY_FLOAT32, 2, sq, Q);
    b->ins[1] = a_from(ALLOY_FLOAT32, 2, sx, X);
    b->ins[2] = a_from(ALLOY_INT32, 1, &si, ids);
    b->outs[0] = a_out(ALLOY_FLOAT32, 2, so);
    b->outs[1] = a_out(ALLOY_INT32, 2, so);
    a_launch(b, nb * tpb, 1, tpb, 1);
    b->out_len[0] = b->out_len[1] = (size_t)nb * IVF_K;
    b->int_out[1] = 1;
    b->exact = 1; /* same fma sequence; same merge */
    if (have_pocl) {
        b->ck = cl_build(CL_IVF_TOPK_L2, "ivf_topk_l2");
        cl_mem mq = cl_buf((size_t)nb * d * 4, Q), mx = cl_buf((size_t)m * d * 4, X),
               mi = cl_buf((size_t)m * 4, ids);
        b->cl_outs[0] = cl_buf(b->out_len[0] * 4, NULL);
        b->cl_outs[1] = cl_buf(b->out_len[1] * 4, NULL);
        size_t s[8] = {sizeof(cl_mem), sizeof(cl_mem), sizeof(cl_mem), sizeof(cl_mem),
                       sizeof(cl_mem), 4, 4, 4};
        const void *v[8] = {&mq, &mx, &mi, &b->cl_outs[0], &b->cl_outs[1], &nb, &d, &m};
        set_args(b->ck, 8, s, v);
        b->dims = 1, b->gws[0] = (size_t)nb * tpb, b->lws[0] = tpb;
    }
    b->cfn = c_ivf_topk;
    b->cn = nb;
    b->cc = (cctx){.a = alloy_array_data(b->ins[0]), .b = alloy_array_data(b->ins[1]),
                   .ids = alloy_array_data(b->ins[2]), .out = malloc(b->out_len[0] * 4),
                   .iout = malloc(b->out_len[1] * 4), .m = m, .n = d};
    free(Q);
    free(X);
    free(ids);
}

static void fmt_ms(char *buf, size_t n, double t) {
    if (t < 0) snprintf(buf, n, "-");
    else snprintf(buf, n, "%.2f ms", t * 1e3);
}

int main(int argc, char **argv) {
    if (argc > 1) reps = atoi(argv[1]);
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    const char *e = getenv("ALLOY_NUM_THREADS");
    n_threads = e ? atoi(e) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 64) n_threads = 64;
    BENCH_CHECK(alloy_device_get("cpu", &dev));
    char why[256] = "";
    have_pocl = pocl_open(why, sizeof why);
    printf("alloy: %s (%s)\n", alloy_device_name(dev), alloy_device_description(dev));
    printf("PoCL:  %s\n", have_pocl ? cl_desc : why);
    printf("C loops: %d threads; median of %d interleaved runs after one warm-up each\n\n",
           n_threads, reps);
    fflush(stdout);

    enum { NCASES = 6 };
    static bcase cases[NCASES];
    case_gemm(&cases[0], 0, 512, 512, 512);
    case_soft_cap(&cases[1], 1u << 24);
    case_barrier(&cases[2], 256, 256, 64);
    case_col_dot(&cases[3], 16384, 256, 256);
    case_gemm(&cases[4], 1, 512, 512, 512);
    case_ivf(&cases[5], 64, 64, 16384, 128);

    for (int i = 0; i < NCASES; i++) {
        measure(&cases[i]);
        fprintf(stderr, "  %s done\n", cases[i].kernel);
    }

    printf("| kernel | problem | alloy | PoCL | C loop | alloy / PoCL | alloy / C | outputs "
           "(alloy vs PoCL) |\n|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < NCASES; i++) {
        bcase *b = &cases[i];
        char ta[32], tp[32], tc[32], rp[32] = "-", rc[32] = "-";
        fmt_ms(ta, sizeof ta, b->t_alloy);
        fmt_ms(tp, sizeof tp, b->t_pocl);
        fmt_ms(tc, sizeof tc, b->t_c);
        if (b->t_pocl > 0) snprintf(rp, sizeof rp, "%.2fx", b->t_alloy / b->t_pocl);
        if (b->t_c > 0) snprintf(rc, sizeof rc, "%.2fx", b->t_alloy / b->t_c);
        printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", b->kernel, b->problem, ta, tp, tc,
               rp, rc, b->agree);
    }
    for (int i = 0; i < NCASES; i++) {
        bcase *b = &cases[i];
        if (b->per_barrier_div <= 0) continue;
        printf("\n%s: ns per thread and barrier (whole kernel time / (threads x barriers)): "
               "alloy %.2f",
               b->kernel, b->t_alloy * 1e9 / b->per_barrier_div);
        if (b->t_pocl > 0) printf(", PoCL %.2f", b->t_pocl * 1e9 / b->per_barrier_div);
        if (b->t_c > 0) printf(", C loop %.2f", b->t_c * 1e9 / b->per_barrier_div);
        printf("\n");
    }
    for (int i = 0; i < NCASES; i++) {
        bcase *b = &cases[i];
        if (!strcmp(b->kernel, "gemm_av") || !strcmp(b->kernel, "gemm_at_b")) {
            double flop = 2.0 * 512 * 512 * 512;
            printf("%s GFLOP/s: alloy %.2f", b->kernel, flop / b->t_alloy * 1e-9);
            if (b->t_pocl > 0) printf(", PoCL %.2f", flop / b->t_pocl * 1e-9);
            if (b->t_c > 0) printf(", C loop %.2f", flop / b->t_c * 1e-9);
            printf("\n");
        }
    }
    int bad = 0;
    for (int i = 0; i < NCASES; i++) bad |= strstr(cases[i].agree, "DIFFER") != NULL;
    if (have_pocl)
        printf("\nalloy and PoCL outputs: %s\n",
               bad ? "SOME DIFFER (see the table)" : "all agree (see the table)");
    else
        printf("\n%s: alloy and the C loops only\n", why);
    return bad;
}
