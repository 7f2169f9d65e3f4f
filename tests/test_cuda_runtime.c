/* test_cuda_runtime.c — the CUDA backend's runtime on a real GPU: the
 * caching allocator, copies and fills, kernel parameters and grid shapes,
 * dynamic shared memory over 48 KiB, limits, the disk cache, streams and
 * waits between them, wrapped external streams, out-of-memory, a kernel
 * fault (in a child process: a fault leaves the context unusable), many
 * streams and many host threads launching at once.
 *
 * Kernels here are raw CUDA sources following the runtime's entry-point
 * contract (one `extern "C" alloy_kernel`, buffers as pointers, the launch
 * info last), compiled through the backend directly, so they do not depend
 * on the MSL code generator; a few tests go through the public API too.
 * Without a CUDA device every test skips with the reason. */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/backend.h"
#include "core/sha256.h"
#include "harness.h"

static alloy_device *DEV;
static char WHY[1024];
static const char *SELF;

#define NEED_DEVICE()                                                                              \
    do {                                                                                           \
        if (!DEV) {                                                                                \
            SKIP(WHY);                                                                             \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* ---- raw kernels ------------------------------------------------------------------- */

#define PRELUDE                                                                                    \
    "struct alloy_launch_info { unsigned grid[3]; };\n"                                            \
    "struct alloy_i32x8 { int v[8]; };\n"                                                          \
    "struct alloy_i64x8 { long long v[8]; };\n"

static const char *K_IOTA = PRELUDE
    "extern \"C\" __global__ void alloy_kernel(int* out, alloy_launch_info info) {\n"
    "  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= info.grid[0]) return;\n"
    "  out[i] = (int)(i * 3 + 1);\n"
    "}\n";

static const char *K_SPIN_WRITE = PRELUDE
    "extern \"C\" __global__ void alloy_kernel(int* out, const long long* cycles,\n"
    "                                          alloy_launch_info info) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= info.grid[0]) return;\n"
    "  long long start = clock64();\n"
    "  while (clock64() - start < cycles[0]) { }\n"
    "  out[i] = (int)i + 7;\n"
    "}\n";

static const char *K_ADD_ONE = PRELUDE
    "extern \"C\" __global__ void alloy_kernel(int* out, alloy_launch_info info) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= info.grid[0]) return;\n"
    "  out[i] += 1;\n"
    "}\n";

static const char *K_PARAMS = PRELUDE
    "extern \"C\" __global__ void alloy_kernel(const float* a, alloy_i32x8 a_shape_v,\n"
    "                                          alloy_i64x8 a_strides_v,\n"
    "                                          long long* out, alloy_launch_info info) {\n"
    "  if (blockIdx.x != 0 || threadIdx.x != 0) return;\n"
    "  for (int k = 0; k < 8; k++) out[k] = a_shape_v.v[k];\n"
    "  for (int k = 0; k < 8; k++) out[8 + k] = a_strides_v.v[k];\n"
    "  out[16] = 0;\n"
    "  for (int k = 0; k < 3; k++) out[17 + k] = info.grid[k];\n"
    "  out[20] = (long long)(a[0] * 4.0f);\n"
    "}\n";

static const char *K_3D = PRELUDE
    "extern \"C\" __global__ void alloy_kernel(int* out, alloy_launch_info info) {\n"
    "  unsigned x = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  unsigned y = blockIdx.y * blockDim.y + threadIdx.y;\n"
    "  unsigned z = blockIdx.z * blockDim.z + threadIdx.z;\n"
    "  if (x >= info.grid[0] || y >= info.grid[1] || z >= info.grid[2]) return;\n"
    "  out[(z * info.grid[1] + y) * info.grid[0] + x] = (int)(x + 1000 * y + 1000000 * z);\n"
    "}\n";

static const char *K_SMEM = PRELUDE
    "extern \"C\" __global__ void alloy_kernel(unsigned char* out, const int* nbytes,\n"
    "                                          alloy_launch_info info) {\n"
    "  extern __shared__ unsigned char smem[];\n"
    "  int n = nbytes[0];\n"
    "  for (int j = threadIdx.x; j < n; j += blockDim.x)\n"
    "    smem[j] = (unsigned char)(j * 31 + blockIdx.x);\n"
    "  __syncthreads();\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= info.grid[0]) return;\n"
    "  int pos = n - 1 - (int)((threadIdx.x * 97u) % (unsigned)n);\n"
    "  out[i] = smem[pos];\n"
    "}\n";

static const char *K_BOUNDED = PRELUDE
    "extern \"C\" __global__ void __launch_bounds__(128) alloy_kernel(int* out,\n"
    "                                                                 alloy_launch_info info) {\n"
    "  out[threadIdx.x] = 1;\n"
    "}\n";

static const char *K_OOB = PRELUDE
    "extern \"C\" __global__ void alloy_kernel(int* out, alloy_launch_info info) {\n"
    "  out[threadIdx.x + (1ull << 40)] = 1;\n"
    "}\n";

static void *compile_raw_ex(const char *name, const char *src, int *from_disk) {
    char key[65];
    alloy_sha256_hex(src, strlen(src), key);
    alloy_compile_job job = {name, src, key, 0, {0}};
    void *prog = NULL;
    char *log = NULL;
    int fd = 0;
    alloy_status st = DEV->backend->compile(DEV, &job, &prog, &log, &fd);
    CHECK_MSG(st == ALLOY_OK, "compiling %s: %s: %s\n%s", name, alloy_status_name(st),
              alloy_last_error(), log ? log : "");
    free(log);
    if (from_disk) *from_disk = fd;
    return st == ALLOY_OK ? prog : NULL;
}

static void *compile_raw(const char *name, const char *src) { return compile_raw_ex(name, src, NULL); }

static alloy_arg buf_arg(void *p) {
    alloy_arg a;
    memset(&a, 0, sizeof a);
    a.kind = ALLOY_ARG_BUFFER;
    a.ptr = p;
    return a;
}

static alloy_status launch_raw(void *prog, const char *name, alloy_arg *args, int n, unsigned gx,
                               unsigned gy, unsigned gz, unsigned tx, unsigned ty, unsigned tz,
                               size_t smem, alloy_stream *s) {
    alloy_launch_args la;
    memset(&la, 0, sizeof la);
    la.kernel_name = name;
    la.n_args = n;
    la.args = args;
    la.grid[0] = gx, la.grid[1] = gy, la.grid[2] = gz;
    la.threadgroup[0] = tx, la.threadgroup[1] = ty, la.threadgroup[2] = tz;
    la.threadgroup_memory = smem;
    return DEV->backend->launch(DEV, prog, &la, s ? s : DEV->default_stream);
}

static void *dalloc(size_t bytes) {
    void *p = NULL;
    CHECK_OK(DEV->backend->mem_alloc(DEV, bytes, &p));
    return p;
}
static void dfree(void *p) { DEV->backend->mem_free(DEV, p); }
static alloy_status h2d(void *d, const void *h, size_t n, alloy_stream *s) {
    return DEV->backend->mem_copy(DEV, d, h, n, ALLOY_COPY_HOST_TO_DEVICE, s ? s : DEV->default_stream);
}
static alloy_status d2h(void *h, const void *d, size_t n, alloy_stream *s) {
    return DEV->backend->mem_copy(DEV, h, d, n, ALLOY_COPY_DEVICE_TO_HOST, s ? s : DEV->default_stream);
}
static alloy_status dfill(void *d, size_t count, const void *pat, size_t elem, alloy_stream *s) {
    return DEV->backend->mem_fill(DEV, d, count, pat, elem, s ? s : DEV->default_stream);
}

/* ---- memory ---------------------------------------------------------------------- */

static void test_allocator_reuse(void) {
    NEED_DEVICE();
    static const size_t sizes[] = {1, 33, 1000, 4096, 1000003, (size_t)70 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        void *a = dalloc(sizes[k]);
        CHECK(a != NULL);
        CHECK(((uintptr_t)a & 255) == 0); /* at least 256-byte aligned */
        dfree(a);
        void *b = dalloc(sizes[k]); /* one stream: the freed block comes back */
        CHECK_MSG(a == b, "size %zu: %p then %p", sizes[k], a, b);
        void *c = dalloc(sizes[k]); /* while b is live: another block */
        CHECK(c != b);
        dfree(b);
        dfree(c);
    }
}

static void test_copies(void) {
    NEED_DEVICE();
    static const size_t sizes[] = {1, 33, 1000, (1u << 20) + 3};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        unsigned char *h = malloc(n), *back = malloc(n);
        for (size_t i = 0; i < n; i++) h[i] = (unsigned char)(harness_rand_u64() >> 24);
        unsigned char *a = dalloc(n + 16), *b = dalloc(n + 16);
        CHECK_OK(h2d(a + 3, h, n, NULL));
        CHECK_OK(DEV->backend->mem_copy(DEV, b + 5, a + 3, n, ALLOY_COPY_DEVICE_TO_DEVICE,
                                        DEV->default_stream));
        memset(back, 0, n);
        CHECK_OK(d2h(back, b + 5, n, NULL));
        CHECK_MSG(memcmp(back, h, n) == 0, "size %zu", n);
        dfree(a);
        dfree(b);
        free(h);
        free(back);
    }
}

static void test_fill_patterns(void) {
    NEED_DEVICE();
    static const size_t counts[] = {1, 33, 1000, 4097};
    static const unsigned char pat[8] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
    static const unsigned char same[8] = {0x01, 0x02, 0x03, 0x04, 0x01, 0x02, 0x03, 0x04};
    for (size_t e = 1; e <= 8; e *= 2)
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
            for (int variant = 0; variant < (e == 8 ? 2 : 1); variant++) {
                const unsigned char *p = variant ? same : pat;
                size_t count = counts[k], bytes = (count + 10) * e;
                unsigned char *d = dalloc(bytes), *h = malloc(bytes);
                unsigned char guard = 0xAB;
                CHECK_OK(dfill(d, bytes, &guard, 1, NULL));
                CHECK_OK(dfill(d + 5 * e, count, p, e, NULL));
                CHECK_OK(d2h(h, d, bytes, NULL));
                size_t bad = 0;
                for (size_t i = 0; i < bytes; i++) {
                    size_t el = i / e;
                    unsigned char want = el >= 5 && el < 5 + count ? p[i % e] : guard;
                    bad += h[i] != want;
                }
                CHECK_MSG(bad == 0, "elem %zu count %zu variant %d: %zu bytes wrong", e, count,
                          variant, bad);
                dfree(d);
                free(h);
            }
}

static void test_array_fill_dtypes(void) {
    NEED_DEVICE();
    int64_t shape[2] = {3, 11};
    struct { alloy_dtype t; double v; } cases[] = {
        {ALLOY_FLOAT64, 1.5}, {ALLOY_INT64, -3}, {ALLOY_FLOAT32, -2.25},
        {ALLOY_FLOAT16, 0.5}, {ALLOY_INT8, -7}, {ALLOY_UINT64, 12345678901.0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        alloy_array *a = NULL;
        CHECK_OK(alloy_array_new(DEV, cases[c].t, 2, shape, &a));
        if (!a) continue;
        CHECK_OK(alloy_array_fill(a, cases[c].v));
        unsigned char h[33 * 8];
        CHECK_OK(alloy_array_copy_to_host(a, h, sizeof h));
        size_t e = alloy_dtype_size(cases[c].t);
        int bad = 0;
        for (int i = 0; i < 33; i++) {
            double got;
            switch (cases[c].t) {
            case ALLOY_FLOAT64: { double v; memcpy(&v, h + i * e, 8); got = v; break; }
            case ALLOY_INT64: { int64_t v; memcpy(&v, h + i * e, 8); got = (double)v; break; }
            case ALLOY_UINT64: { uint64_t v; memcpy(&v, h + i * e, 8); got = (double)v; break; }
            case ALLOY_FLOAT32: { float v; memcpy(&v, h + i * e, 4); got = v; break; }
            case ALLOY_INT8: got = (double)(int8_t)h[i]; break;
            default: { uint16_t v; memcpy(&v, h + i * e, 2); got = v == 0x3800 ? 0.5 : -1; break; }
            }
            bad += got != cases[c].v;
        }
        CHECK_MSG(bad == 0, "dtype %d: %d wrong", (int)cases[c].t, bad);
        alloy_array_free(a);
    }
}

static void test_array_roundtrip(void) {
    NEED_DEVICE();
    float h[1000], back[1000];
    for (int i = 0; i < 1000; i++) h[i] = (float)harness_uniform(-1, 1);
    int64_t shape[1] = {1000};
    alloy_array *a = NULL, *c = NULL;
    CHECK_OK(alloy_array_from_host(DEV, ALLOY_FLOAT32, 1, shape, h, &a));
    CHECK(a && alloy_array_device(a) == DEV);
    if (a) CHECK_OK(alloy_array_contiguous(a, &c));
    if (c) {
        CHECK_OK(alloy_array_copy_to_host(c, back, sizeof back));
        CHECK(memcmp(h, back, sizeof h) == 0);
    }
    alloy_array_free(c);
    alloy_array_free(a);
}

static void test_out_of_memory(void) {
    NEED_DEVICE();
    void *p = NULL;
    CHECK_FAILS(DEV->backend->mem_alloc(DEV, (size_t)1 << 50, &p), ALLOY_ERROR_OUT_OF_MEMORY,
                "out of memory");
    int64_t shape[1] = {(int64_t)1 << 40}; /* 4 TiB: reaches cuMemAlloc, which fails */
    alloy_array *a = NULL;
    CHECK_FAILS(alloy_array_new(DEV, ALLOY_FLOAT32, 1, shape, &a), ALLOY_ERROR_OUT_OF_MEMORY,
                "out of memory");
    void *q = dalloc(1000); /* still usable */
    CHECK(q != NULL);
    dfree(q);
}

/* ---- kernels ------------------------------------------------------------------------ */

static void test_kernel_parameters(void) {
    NEED_DEVICE();
    void *prog = compile_raw("params", K_PARAMS);
    if (!prog) return;
    float two = 2.0f;
    float *a = dalloc(sizeof two);
    long long *out = dalloc(21 * sizeof(long long));
    CHECK_OK(h2d(a, &two, sizeof two, NULL));
    alloy_arg args[4];
    args[0] = buf_arg(a);
    memset(&args[1], 0, sizeof args[1]);
    args[1].kind = ALLOY_ARG_SHAPE;
    memset(&args[2], 0, sizeof args[2]);
    args[2].kind = ALLOY_ARG_STRIDES;
    for (int k = 0; k < 8; k++) {
        args[1].shape[k] = 10 + k;
        args[2].strides[k] = ((int64_t)1 << 33) + k - 4; /* needs 64 bits */
    }
    args[3] = buf_arg(out);
    CHECK_OK(launch_raw(prog, "params", args, 4, 33, 2, 1, 32, 1, 1, 0, NULL));
    long long h[21];
    CHECK_OK(d2h(h, out, sizeof h, NULL));
    for (int k = 0; k < 8; k++) {
        CHECK(h[k] == 10 + k);
        CHECK(h[8 + k] == ((long long)1 << 33) + k - 4);
    }
    CHECK(h[16] == 0);
    CHECK(h[17] == 33 && h[18] == 2 && h[19] == 1);
    CHECK(h[20] == 8);
    dfree(a);
    dfree(out);
}

static void test_grid_3d_partial_groups(void) {
    NEED_DEVICE();
    void *prog = compile_raw("grid3d", K_3D);
    if (!prog) return;
    unsigned gx = 33, gy = 5, gz = 3;
    size_t n = (size_t)gx * gy * gz;
    int *d = dalloc(n * sizeof(int)), *h = malloc(n * sizeof(int));
    int minus = -1;
    CHECK_OK(dfill(d, n, &minus, 4, NULL));
    alloy_arg args[1] = {buf_arg(d)};
    CHECK_OK(launch_raw(prog, "grid3d", args, 1, gx, gy, gz, 4, 3, 2, 0, NULL));
    CHECK_OK(d2h(h, d, n * sizeof(int), NULL));
    size_t bad = 0;
    for (unsigned z = 0; z < gz; z++)
        for (unsigned y = 0; y < gy; y++)
            for (unsigned x = 0; x < gx; x++)
                bad += h[(z * gy + y) * gx + x] != (int)(x + 1000 * y + 1000000 * z);
    CHECK_MSG(bad == 0, "%zu wrong", bad);
    dfree(d);
    free(h);
}

static void test_grid_limits(void) {
    NEED_DEVICE();
    void *prog = compile_raw("iota", K_IOTA);
    if (!prog) return;
    /* 100003 threadgroups of one thread in x: beyond 65535, fine in x. */
    unsigned n = 100003;
    int *d = dalloc(n * sizeof(int)), *h = malloc(n * sizeof(int));
    alloy_arg args[1] = {buf_arg(d)};
    CHECK_OK(launch_raw(prog, "iota", args, 1, n, 1, 1, 1, 1, 1, 0, NULL));
    CHECK_OK(d2h(h, d, n * sizeof(int), NULL));
    size_t bad = 0;
    for (unsigned i = 0; i < n; i++) bad += h[i] != (int)(i * 3 + 1);
    CHECK_MSG(bad == 0, "%zu wrong", bad);
    /* 70000 threadgroups in y: over the device's limit, a clean error. */
    CHECK_FAILS(launch_raw(prog, "iota", args, 1, 1, 70000, 1, 1, 1, 1, 0, NULL),
                ALLOY_ERROR_INVALID_ARGUMENT, "threadgroups");
    /* blockDim.z is limited to 64 on NVIDIA GPUs. */
    CHECK_FAILS(launch_raw(prog, "iota", args, 1, 1, 1, 128, 1, 1, 128, 0, NULL),
                ALLOY_ERROR_INVALID_ARGUMENT, "iota");
    /* An empty grid launches nothing. */
    CHECK_OK(launch_raw(prog, "iota", args, 1, 0, 1, 1, 1, 1, 1, 0, NULL));
    dfree(d);
    free(h);
}

static void test_threadgroup_over_function_limit(void) {
    NEED_DEVICE();
    void *prog = compile_raw("bounded", K_BOUNDED);
    if (!prog) return;
    int *d = dalloc(1024 * sizeof(int));
    alloy_arg args[1] = {buf_arg(d)};
    CHECK_OK(launch_raw(prog, "bounded", args, 1, 128, 1, 1, 128, 1, 1, 0, NULL));
    CHECK_FAILS(launch_raw(prog, "bounded", args, 1, 256, 1, 1, 256, 1, 1, 0, NULL),
                ALLOY_ERROR_INVALID_ARGUMENT, "bounded");
    CHECK(harness_message_has("128") && harness_message_has("256"));
    CHECK_OK(alloy_device_synchronize(DEV));
    dfree(d);
}

static void run_smem(void *prog, int nbytes, unsigned groups, unsigned tg) {
    unsigned n = groups * tg;
    unsigned char *out = dalloc(n), *h = malloc(n);
    int *nb = dalloc(sizeof(int));
    CHECK_OK(h2d(nb, &nbytes, sizeof nbytes, NULL));
    alloy_arg args[2] = {buf_arg(out), buf_arg(nb)};
    CHECK_OK(launch_raw(prog, "smem", args, 2, n, 1, 1, tg, 1, 1, (size_t)nbytes, NULL));
    CHECK_OK(d2h(h, out, n, NULL));
    size_t bad = 0;
    for (unsigned i = 0; i < n; i++) {
        unsigned b = i / tg, t = i % tg;
        int pos = nbytes - 1 - (int)((t * 97u) % (unsigned)nbytes);
        bad += h[i] != (unsigned char)(pos * 31 + (int)b);
    }
    CHECK_MSG(bad == 0, "%d bytes of shared memory: %zu wrong", nbytes, bad);
    dfree(out);
    dfree(nb);
    free(h);
}

static void test_threadgroup_memory_over_48k(void) {
    NEED_DEVICE();
    void *prog = compile_raw("smem", K_SMEM);
    if (!prog) return;
    run_smem(prog, 100 * 1024, 7, 256);
    run_smem(prog, 1000, 3, 33);           /* smaller after the attribute was raised */
    run_smem(prog, 48 * 1024, 5, 128);     /* no attribute needed */
    run_smem(prog, 200 * 1024, 2, 1024);   /* raised again (Hopper: 227 KiB) */
    int *d = dalloc(64);
    alloy_arg args[2] = {buf_arg(d), buf_arg(d)};
    CHECK_FAILS(launch_raw(prog, "smem", args, 2, 32, 1, 1, 32, 1, 1, 400 * 1024, NULL),
                ALLOY_ERROR_INVALID_ARGUMENT, "threadgroup memory");
    dfree(d);
}

/* The same through the public API and the code generator (skips until the
 * CUDA code generator exists). */
static void test_threadgroup_memory_public_api(void) {
    NEED_DEVICE();
    static const char *in[] = {"words"}, *out[] = {"out"};
    const char *body =
        "uint t = thread_index_in_threadgroup, T = threads_per_threadgroup.x;\n"
        "threadgroup int* mem = (threadgroup int*)alloy_threadgroup_memory;\n"
        "for (uint i = t; i < uint(words); i += T) mem[i] = int(i) * 3;\n"
        "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "out[thread_position_in_grid.x] = mem[uint(words) - 1 - t];\n";
    alloy_kernel *k = NULL;
    CHECK_OK(alloy_kernel_new("tgmem_cuda", 1, in, 1, out, body, NULL, 1, 0, &k));
    int words = 100 * 1024 / 4;
    alloy_array *w = NULL, *res = NULL;
    CHECK_OK(alloy_array_scalar(DEV, ALLOY_INT32, words, &w));
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    int64_t n = 3 * 256;
    CHECK_OK(alloy_launch_add_output(l, 1, &n, ALLOY_INT32));
    CHECK_OK(alloy_launch_set_grid(l, (uint32_t)n, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 256, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup_memory(l, (size_t)words * 4));
    alloy_status st = alloy_kernel_apply(k, 1, &w, l, NULL, &res);
    if (st == ALLOY_ERROR_UNSUPPORTED) {
        SKIP("no CUDA code generation in this build");
    } else {
        CHECK_MSG(st == ALLOY_OK, "%s", alloy_last_error());
        if (res) {
            int h[3 * 256];
            CHECK_OK(alloy_array_copy_to_host(res, h, sizeof h));
            int bad = 0;
            for (int i = 0; i < 3 * 256; i++) bad += h[i] != (words - 1 - i % 256) * 3;
            CHECK_MSG(bad == 0, "%d wrong", bad);
        }
    }
    alloy_array_free(res);
    alloy_array_free(w);
    alloy_launch_free(l);
    alloy_kernel_free(k);
}

static void test_public_api_elementwise(void) {
    NEED_DEVICE();
    static const char *in[] = {"a"}, *out[] = {"b"};
    alloy_kernel *k = NULL;
    CHECK_OK(alloy_kernel_new("cuda_axpb", 1, in, 1, out,
                              "uint i = thread_position_in_grid.x; b[i] = 2.0f * a[i] + 1.0f;",
                              NULL, 1, 0, &k));
    static const int64_t sizes[] = {1, 33, 1000};
    for (int s = 0; s < 3 && k; s++) {
        int64_t n = sizes[s];
        float *h = malloc((size_t)n * 4), *back = malloc((size_t)n * 4);
        harness_fill_f32(h, (size_t)n, -3, 3);
        alloy_array *a = NULL, *res = NULL;
        CHECK_OK(alloy_array_from_host(DEV, ALLOY_FLOAT32, 1, &n, h, &a));
        alloy_launch *l = NULL;
        CHECK_OK(alloy_launch_new(&l));
        CHECK_OK(alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32));
        CHECK_OK(alloy_launch_set_grid(l, (uint32_t)n, 1, 1));
        CHECK_OK(alloy_launch_set_threadgroup(l, 256, 1, 1));
        alloy_status st = alloy_kernel_apply(k, 1, &a, l, NULL, &res);
        if (st == ALLOY_ERROR_UNSUPPORTED) {
            SKIP("no CUDA code generation in this build");
        } else {
            CHECK_MSG(st == ALLOY_OK, "%s", alloy_last_error());
            if (res) {
                CHECK_OK(alloy_array_copy_to_host(res, back, (size_t)n * 4));
                int bad = 0;
                for (int64_t i = 0; i < n; i++)
                    bad += fabs((double)back[i] - (2.0 * h[i] + 1.0)) > 1e-5;
                CHECK_MSG(bad == 0, "n %lld: %d wrong", (long long)n, bad);
            }
        }
        alloy_array_free(res);
        alloy_array_free(a);
        alloy_launch_free(l);
        free(h);
        free(back);
        if (st == ALLOY_ERROR_UNSUPPORTED) break;
    }
    alloy_kernel_free(k);
}

static void test_compile_error_and_report(void) {
    NEED_DEVICE();
    const char *bad = PRELUDE "extern \"C\" __global__ void alloy_kernel(int* out, alloy_launch_info i) {\n"
                              "  out[0] = nope;\n}\n";
    char key[65];
    alloy_sha256_hex(bad, strlen(bad), key);
    alloy_compile_job job = {"broken", bad, key, 0, {0}};
    void *prog = NULL;
    char *log = NULL;
    int fd = 0;
    CHECK(DEV->backend->compile(DEV, &job, &prog, &log, &fd) == ALLOY_ERROR_COMPILE);
    CHECK(log && strstr(log, "nope"));
    free(log);
    void *good = compile_raw("iota", K_IOTA);
    if (good && DEV->backend->program_report) {
        char *r = DEV->backend->program_report(DEV, good);
        CHECK(r && strstr(r, "registers") && (strstr(r, "sm_") || strstr(r, "compute_")));
        if (r) fprintf(stderr, "  %s\n", r);
        free(r);
    }
}

static int count_entries(const char *dir, char *one, size_t one_len) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".cubin") || strstr(e->d_name, ".ptx")) {
            n++;
            snprintf(one, one_len, "%s/%s", dir, e->d_name);
        }
    closedir(d);
    return n;
}

static void test_disk_cache_and_corruption(void) {
    NEED_DEVICE();
    const char *tmp = getenv("TMPDIR");
    char root[400];
    snprintf(root, sizeof root, "%.300s/alloy-cuda-cache-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) {
        SKIP("cannot create a temporary directory");
        return;
    }
    const char *old = getenv("ALLOY_CACHE_DIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("ALLOY_CACHE_DIR", root, 1);
    char dir[512], entry[1024] = "";
    snprintf(dir, sizeof dir, "%s/cuda", root);

    int fd = -1;
    void *p1 = compile_raw_ex("iota", K_IOTA, &fd);
    CHECK(p1 && fd == 0);
    CHECK(count_entries(dir, entry, sizeof entry) == 1);
    void *p2 = compile_raw_ex("iota", K_IOTA, &fd);
    CHECK(p2 && fd == 1);
    /* Corrupt one byte in the middle: rebuilt with a warning, not loaded. */
    FILE *f = fopen(entry, "r+b");
    CHECK(f != NULL);
    if (f) {
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, len / 2, SEEK_SET);
        int c = fgetc(f);
        fseek(f, len / 2, SEEK_SET);
        fputc(c ^ 0x5A, f);
        fclose(f);
    }
    void *p3 = compile_raw_ex("iota", K_IOTA, &fd);
    CHECK(p3 && fd == 0);
    if (p3) {
        int *d = dalloc(33 * sizeof(int)), h[33];
        alloy_arg args[1] = {buf_arg(d)};
        CHECK_OK(launch_raw(p3, "iota", args, 1, 33, 1, 1, 8, 1, 1, 0, NULL));
        CHECK_OK(d2h(h, d, sizeof h, NULL));
        for (int i = 0; i < 33; i++) CHECK(h[i] == i * 3 + 1);
        dfree(d);
    }
    void *p4 = compile_raw_ex("iota", K_IOTA, &fd);
    CHECK(p4 && fd == 1);

    if (entry[0]) unlink(entry);
    rmdir(dir);
    rmdir(root);
    if (saved) setenv("ALLOY_CACHE_DIR", saved, 1);
    else unsetenv("ALLOY_CACHE_DIR");
    free(saved);
}

/* ---- streams ------------------------------------------------------------------------ */

static void test_stream_wait_orders_work(void) {
    NEED_DEVICE();
    void *spin = compile_raw("spin_write", K_SPIN_WRITE), *add = compile_raw("add_one", K_ADD_ONE);
    if (!spin || !add) return;
    alloy_stream *A = NULL, *B = NULL;
    CHECK_OK(alloy_stream_new(DEV, &A));
    CHECK_OK(alloy_stream_new(DEV, &B));
    if (!A || !B) return;
    unsigned n = 1u << 16;
    int *buf = dalloc(n * sizeof(int)), *h = malloc(n * sizeof(int));
    long long cycles = 50 * 1000 * 1000, *cyc = dalloc(sizeof cycles);
    CHECK_OK(h2d(cyc, &cycles, sizeof cycles, NULL));
    int zero = 0;
    CHECK_OK(dfill(buf, n, &zero, 4, NULL));
    CHECK_OK(alloy_device_synchronize(DEV));
    alloy_arg args[2] = {buf_arg(buf), buf_arg(cyc)};
    CHECK_OK(launch_raw(spin, "spin_write", args, 2, n, 1, 1, 256, 1, 1, 0, A));
    CHECK_OK(alloy_stream_wait(B, A));
    CHECK_OK(launch_raw(add, "add_one", args, 1, n, 1, 1, 256, 1, 1, 0, B));
    CHECK_OK(d2h(h, buf, n * sizeof(int), B)); /* returns when B is done */
    size_t bad = 0;
    for (unsigned i = 0; i < n; i++) bad += h[i] != (int)i + 8;
    CHECK_MSG(bad == 0, "%zu of %u elements read before the writer finished", bad, n);
    CHECK_OK(alloy_stream_synchronize(A));
    dfree(buf);
    dfree(cyc);
    free(h);
    alloy_stream_free(A);
    alloy_stream_free(B);
}

typedef int (*cu_stream_create_fn)(void **stream, unsigned flags);
typedef int (*cu_stream_destroy_fn)(void *stream);
typedef int (*cu_ctx_get_current_fn)(void **ctx);
typedef int (*cu_primary_retain_fn)(void **ctx, int dev);
typedef int (*cu_primary_release_fn)(int dev);
typedef int (*cu_device_get_fn)(int *dev, int ordinal);

static void launch_and_check_on(alloy_stream *s, void *prog, const char *what) {
    unsigned n = 1000;
    int *d = dalloc(n * sizeof(int)), *h = malloc(n * sizeof(int));
    alloy_arg args[1] = {buf_arg(d)};
    CHECK_OK(launch_raw(prog, "iota", args, 1, n, 1, 1, 128, 1, 1, 0, s));
    CHECK_OK(alloy_stream_synchronize(s));
    CHECK_OK(d2h(h, d, n * sizeof(int), s));
    size_t bad = 0;
    for (unsigned i = 0; i < n; i++) bad += h[i] != (int)(i * 3 + 1);
    CHECK_MSG(bad == 0, "%s: %zu wrong", what, bad);
    dfree(d);
    free(h);
}

static void test_wrap_external_streams(void) {
    NEED_DEVICE();
    void *prog = compile_raw("iota", K_IOTA);
    if (!prog) return;
    /* Another alloy stream's handle. */
    alloy_stream *S = NULL, *W = NULL;
    CHECK_OK(alloy_stream_new(DEV, &S));
    void *native = S ? alloy_stream_native(S) : NULL;
    CHECK(native != NULL);
    CHECK_OK(alloy_stream_wrap(DEV, native, &W));
    if (W) {
        CHECK(alloy_stream_native(W) == native);
        launch_and_check_on(W, prog, "wrapped alloy stream");
        alloy_stream_free(W); /* frees the wrapper only */
    }
    if (S) launch_and_check_on(S, prog, "the stream after its wrapper was freed");
    alloy_stream_free(S);
    /* NULL: the legacy default stream. */
    alloy_stream *L = NULL;
    CHECK_OK(alloy_stream_wrap(DEV, NULL, &L));
    if (L) launch_and_check_on(L, prog, "legacy default stream");
    alloy_stream_free(L);

    /* A stream made with the driver directly, on the primary context that
     * alloy made current on this thread (what PyTorch and CuPy use). */
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(lib != NULL);
    if (!lib) return;
    cu_stream_create_fn create = (cu_stream_create_fn)dlsym(lib, "cuStreamCreate");
    cu_stream_destroy_fn destroy = (cu_stream_destroy_fn)dlsym(lib, "cuStreamDestroy_v2");
    cu_ctx_get_current_fn get_current = (cu_ctx_get_current_fn)dlsym(lib, "cuCtxGetCurrent");
    cu_primary_retain_fn retain = (cu_primary_retain_fn)dlsym(lib, "cuDevicePrimaryCtxRetain");
    cu_primary_release_fn release = (cu_primary_release_fn)dlsym(lib, "cuDevicePrimaryCtxRelease_v2");
    cu_device_get_fn device_get = (cu_device_get_fn)dlsym(lib, "cuDeviceGet");
    CHECK(create && destroy && get_current && retain && release && device_get);
    if (create && destroy && get_current && retain && release && device_get) {
        void *cur = NULL, *primary = NULL;
        int dev = -1;
        CHECK(get_current(&cur) == 0);
        CHECK(device_get(&dev, 0) == 0);
        CHECK(retain(&primary, dev) == 0);
        CHECK_MSG(cur == primary, "alloy's context %p is not the primary context %p", cur, primary);
        void *ext = NULL;
        CHECK(create(&ext, 1 /* non-blocking */) == 0);
        alloy_stream *E = NULL;
        CHECK_OK(alloy_stream_wrap(DEV, ext, &E));
        if (E) launch_and_check_on(E, prog, "driver-created stream");
        alloy_stream_free(E);
        CHECK(destroy(ext) == 0);
        release(dev);
        /* (A pointer that is not a stream cannot be checked: the driver
         * dereferences it. The API documents that the handle must be valid.) */
    }
    dlclose(lib);
}

static void test_many_streams(void) {
    NEED_DEVICE();
    void *spin = compile_raw("spin_write", K_SPIN_WRITE);
    if (!spin) return;
    enum { NS = 32 };
    alloy_stream *s[NS] = {0};
    int *bufs[NS];
    unsigned n = 1000;
    long long cycles = 100000, *cyc = dalloc(sizeof cycles);
    CHECK_OK(h2d(cyc, &cycles, sizeof cycles, NULL));
    for (int k = 0; k < NS; k++) {
        CHECK_OK(alloy_stream_new(DEV, &s[k]));
        bufs[k] = dalloc(n * sizeof(int));
    }
    CHECK_OK(alloy_device_synchronize(DEV)); /* cyc is on the default stream */
    for (int k = 0; k < NS; k++) {
        if (!s[k]) continue;
        int minus = -1;
        CHECK_OK(dfill(bufs[k], n, &minus, 4, s[k]));
        alloy_arg args[2] = {buf_arg(bufs[k]), buf_arg(cyc)};
        CHECK_OK(launch_raw(spin, "spin_write", args, 2, n - (unsigned)k, 1, 1, 64, 1, 1, 0, s[k]));
    }
    int *h = malloc(n * sizeof(int));
    for (int k = 0; k < NS; k++) {
        if (!s[k]) continue;
        CHECK_OK(d2h(h, bufs[k], n * sizeof(int), s[k]));
        size_t bad = 0;
        for (unsigned i = 0; i < n; i++) bad += h[i] != (i < n - (unsigned)k ? (int)i + 7 : -1);
        CHECK_MSG(bad == 0, "stream %d: %zu wrong", k, bad);
    }
    /* Memory freed while several streams run is reused only when safe. */
    for (int k = 0; k < NS; k++) dfree(bufs[k]);
    for (int round = 0; round < 3; round++) {
        int *x = dalloc(n * sizeof(int));
        alloy_arg args[2] = {buf_arg(x), buf_arg(cyc)};
        CHECK_OK(launch_raw(spin, "spin_write", args, 2, n, 1, 1, 64, 1, 1, 0, s[round]));
        CHECK_OK(d2h(h, x, n * sizeof(int), s[round]));
        size_t bad = 0;
        for (unsigned i = 0; i < n; i++) bad += h[i] != (int)i + 7;
        CHECK(bad == 0);
        dfree(x);
    }
    for (int k = 0; k < NS; k++) alloy_stream_free(s[k]);
    CHECK_OK(alloy_device_synchronize(DEV));
    dfree(cyc);
    free(h);
}

typedef struct thread_job {
    void *prog;
    int index;
    int failures;
    char msg[512];
} thread_job;

static void *thread_main(void *arg) {
    thread_job *j = arg;
    unsigned n = 1000;
    int reps = 100;
    alloy_stream *s = NULL;
    if (j->index % 2 && alloy_stream_new(DEV, &s) != ALLOY_OK) {
        snprintf(j->msg, sizeof j->msg, "stream: %s", alloy_last_error());
        j->failures++;
        return NULL;
    }
    alloy_stream *use = s ? s : DEV->default_stream;
    void *d = NULL;
    if (DEV->backend->mem_alloc(DEV, n * sizeof(int), &d) != ALLOY_OK) {
        snprintf(j->msg, sizeof j->msg, "alloc: %s", alloy_last_error());
        j->failures++;
        alloy_stream_free(s);
        return NULL;
    }
    int zero = 0;
    alloy_status st = DEV->backend->mem_fill(DEV, d, n, &zero, 4, use);
    alloy_arg args[1] = {buf_arg(d)};
    for (int r = 0; r < reps && st == ALLOY_OK; r++)
        st = launch_raw(j->prog, "add_one", args, 1, n, 1, 1, 128, 1, 1, 0, use);
    int *h = malloc(n * sizeof(int));
    if (st == ALLOY_OK) st = DEV->backend->mem_copy(DEV, h, d, n * sizeof(int),
                                                    ALLOY_COPY_DEVICE_TO_HOST, use);
    if (st != ALLOY_OK) {
        snprintf(j->msg, sizeof j->msg, "%s", alloy_last_error());
        j->failures++;
    } else {
        for (unsigned i = 0; i < n; i++)
            if (h[i] != reps) {
                snprintf(j->msg, sizeof j->msg, "element %u is %d, wanted %d", i, h[i], reps);
                j->failures++;
                break;
            }
    }
    free(h);
    DEV->backend->mem_free(DEV, d);
    alloy_stream_free(s);
    return NULL;
}

static void test_host_threads_launching(void) {
    NEED_DEVICE();
    void *prog = compile_raw("add_one", K_ADD_ONE);
    if (!prog) return;
    enum { NT = 8 };
    pthread_t t[NT];
    thread_job jobs[NT];
    for (int i = 0; i < NT; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].prog = prog;
        jobs[i].index = i;
        CHECK(pthread_create(&t[i], NULL, thread_main, &jobs[i]) == 0);
    }
    for (int i = 0; i < NT; i++) {
        pthread_join(t[i], NULL);
        CHECK_MSG(jobs[i].failures == 0, "thread %d: %s", i, jobs[i].msg);
    }
}

/* ---- a fault, in a child process -------------------------------------------------------- */

static int fault_child(void) {
    alloy_device *d = NULL;
    if (alloy_device_get("cuda", &d) != ALLOY_OK) return 77;
    DEV = d;
    void *prog = compile_raw("oob_writer", K_OOB);
    if (!prog) return 2;
    int *buf = dalloc(64);
    alloy_arg args[1] = {buf_arg(buf)};
    alloy_status st = launch_raw(prog, "oob_writer", args, 1, 32, 1, 1, 32, 1, 1, 0, NULL);
    if (st == ALLOY_OK) st = alloy_stream_synchronize(d->default_stream);
    fprintf(stderr, "  child: %s: %s\n", alloy_status_name(st), alloy_last_error());
    if (st != ALLOY_ERROR_LAUNCH) return 3;
    if (!strstr(alloy_last_error(), "oob_writer")) return 4;
    if (!strstr(alloy_last_error(), "while or after running kernel")) return 5;
    return 0;
}

static void test_fault_names_kernel(void) {
    NEED_DEVICE();
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        execl(SELF, SELF, "--fault-child", (char *)NULL);
        _exit(127);
    }
    CHECK(pid > 0);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--fault-child") == 0) return fault_child();
    SELF = "/proc/self/exe";
    static char self_path[4096];
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (n > 0) {
        self_path[n] = 0;
        SELF = self_path;
    } else if (argv[0]) {
        SELF = argv[0];
    }
    harness_seed();
    if (alloy_device_get("cuda", &DEV) != ALLOY_OK) {
        snprintf(WHY, sizeof WHY, "no CUDA device: %s", alloy_last_error());
        fprintf(stderr, "%s\n", WHY);
        DEV = NULL;
    } else {
        fprintf(stderr, "%s: %s\n", alloy_device_name(DEV), alloy_device_description(DEV));
    }
    RUN(test_allocator_reuse);
    RUN(test_copies);
    RUN(test_fill_patterns);
    RUN(test_array_fill_dtypes);
    RUN(test_array_roundtrip);
    RUN(test_out_of_memory);
    RUN(test_kernel_parameters);
    RUN(test_grid_3d_partial_groups);
    RUN(test_grid_limits);
    RUN(test_threadgroup_over_function_limit);
    RUN(test_threadgroup_memory_over_48k);
    RUN(test_threadgroup_memory_public_api);
    RUN(test_public_api_elementwise);
    RUN(test_compile_error_and_report);
    RUN(test_disk_cache_and_corruption);
    RUN(test_stream_wait_orders_work);
    RUN(test_wrap_external_streams);
    RUN(test_many_streams);
    RUN(test_host_threads_launching);
    RUN(test_fault_names_kernel);
    return harness_finish();
}
