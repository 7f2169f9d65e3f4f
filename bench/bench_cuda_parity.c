/* bench_cuda_parity.c — is alloy's generated CUDA code free? The same
 * computations run, in one process on one stream, (a) as body-only kernels
 * through alloy and (b) as the CUDA C a programmer would write by hand
 * (blockIdx/threadIdx, sizes and scalars as by-value parameters), compiled by
 * the same NVRTC with the same architecture and launched with cuLaunchKernel.
 * Each case times batches of back-to-back launches between CUDA events,
 * alternating alloy and hand-written batches, and reports the medians and the
 * ratio alloy / hand (the target is <= 1.03).
 *
 * Cases: the examples' one-float-per-thread copy and soft-cap over 1 GiB of
 * float32 (and soft-cap once more with a grid 7 threads short of a whole
 * number of groups, so the out-of-grid check is in), their 16-byte (vec4)
 * variants, and a 2-D body that forms its
 * position from thread_position_in_threadgroup, threadgroup_position_in_grid
 * and threads_per_threadgroup. `--dump DIR` writes the hand-written cubins
 * there (alloy's are in its disk cache) for cuobjdump. The driver and NVRTC
 * are dlopen'd, as alloy does, so this builds without a CUDA toolkit. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "bench_util.h"

typedef int CUresult;
typedef void *CUmodule, *CUfunction, *CUstream, *CUevent;
typedef int nvrtcResult;
typedef void *nvrtcProgram;

static struct {
    CUresult (*cuModuleLoadData)(CUmodule *, const void *);
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*cuStreamCreate)(CUstream *, unsigned);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuEventCreate)(CUevent *, unsigned);
    CUresult (*cuEventRecord)(CUevent, CUstream);
    CUresult (*cuEventSynchronize)(CUevent);
    CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, unsigned, CUstream, void **, void **);
    CUresult (*cuDeviceGetAttribute)(int *, int, int);
    nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *, const char *, const char *, int,
                                      const char *const *, const char *const *);
    nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t *);
    nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char *);
    nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char *);
} api;

#define CU(expr)                                                                              \
    do {                                                                                      \
        CUresult r_ = (expr);                                                                 \
        if (r_) { fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #expr, r_); exit(1); } \
    } while (0)

static void *sym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) { fprintf(stderr, "missing symbol %s\n", name); exit(2); }
    return p;
}

static void load_apis(void) {
    void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu) { fprintf(stderr, "no CUDA driver: %s\n", dlerror()); exit(2); }
    static const char *const NVRTC[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                                        "/usr/local/cuda/lib64/libnvrtc.so"};
    void *nv = NULL;
    for (size_t i = 0; i < sizeof NVRTC / sizeof *NVRTC && !nv; i++)
        nv = dlopen(NVRTC[i], RTLD_NOW | RTLD_LOCAL);
    if (!nv) { fprintf(stderr, "no NVRTC\n"); exit(2); }
#define S(lib, f) *(void **)&api.f = sym(lib, #f)
    S(cu, cuModuleLoadData); S(cu, cuModuleGetFunction); S(cu, cuStreamSynchronize);
    S(cu, cuEventCreate); S(cu, cuEventRecord); S(cu, cuEventSynchronize);
    S(cu, cuEventElapsedTime); S(cu, cuLaunchKernel); S(cu, cuDeviceGetAttribute);
    *(void **)&api.cuStreamCreate = sym(cu, "cuStreamCreate");
    S(nv, nvrtcCreateProgram); S(nv, nvrtcCompileProgram); S(nv, nvrtcGetCUBINSize);
    S(nv, nvrtcGetCUBIN); S(nv, nvrtcGetProgramLogSize); S(nv, nvrtcGetProgramLog);
#undef S
}

/* The hand-written kernels: what a CUDA programmer writes for the same
 * computation as each body (same loads, stores and bounds). */
static const char HAND_SRC[] =
    "extern \"C\" __global__ void copy1(const float* x, float* out, unsigned long long n) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = x[i];\n"
    "}\n"
    "extern \"C\" __global__ void soft_cap1(const float* x, float* out, float cap,\n"
    "                                     unsigned long long n) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= n) return;\n"
    "  out[i] = cap * tanhf(x[i] / cap);\n"
    "}\n"
    "extern \"C\" __global__ void copy4(const unsigned char* src, unsigned char* dst,\n"
    "                                 unsigned long long nbytes) {\n"
    "  unsigned long long b = (unsigned long long)(blockIdx.x * blockDim.x + threadIdx.x) * 16;\n"
    "  if (b >= nbytes) return;\n"
    "  if (b + 16 <= nbytes && (unsigned long long)(src + b) % 16 == 0 &&\n"
    "      (unsigned long long)(dst + b) % 16 == 0) {\n"
    "    *(uint4*)(dst + b) = *(const uint4*)(src + b);\n"
    "  } else {\n"
    "    for (unsigned long long j = b; j < nbytes && j < b + 16; ++j) dst[j] = src[j];\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void soft_cap4(const float* x, float* out, float c,\n"
    "                                     unsigned long long size) {\n"
    "  unsigned long long i = (unsigned long long)(blockIdx.x * blockDim.x + threadIdx.x) * 4;\n"
    "  if (i >= size) return;\n"
    "  bool aligned = (unsigned long long)(x + i) % 16 == 0 &&\n"
    "                 (unsigned long long)(out + i) % 16 == 0;\n"
    "  if (i + 4 <= size && aligned) {\n"
    "    float4 v = *(const float4*)(x + i);\n"
    "    *(float4*)(out + i) = make_float4(c * tanhf(v.x / c), c * tanhf(v.y / c),\n"
    "                                      c * tanhf(v.z / c), c * tanhf(v.w / c));\n"
    "  } else {\n"
    "    for (unsigned long long j = i; j < size && j < i + 4; ++j) out[j] = c * tanhf(x[j] / c);\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void affine2d(const float* x, float* out, int rows, int cols) {\n"
    "  unsigned c = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  unsigned r = blockIdx.y * blockDim.y + threadIdx.y;\n"
    "  if (r < (unsigned)rows && c < (unsigned)cols)\n"
    "    out[r * cols + c] = x[r * cols + c] * 2.0f + 1.0f;\n"
    "}\n";

/* The 2-D body: its position from the group's position and size (the grid
 * is a whole number of groups here, so threads_per_threadgroup is the
 * dispatch size in every group). */
static const char AFFINE2D_BODY[] =
    "uint2 t = thread_position_in_threadgroup.xy;\n"
    "uint2 g = threadgroup_position_in_grid.xy;\n"
    "uint2 s = threads_per_threadgroup.xy;\n"
    "uint c = g.x * s.x + t.x, r = g.y * s.y + t.y;\n"
    "const uint rows = x_shape[0], cols = x_shape[1];\n"
    "if (r < rows && c < cols) out[r * cols + c] = x[r * cols + c] * 2.0f + 1.0f;\n";

static CUmodule compile_hand(int cc_major, int cc_minor, const char *dump_dir) {
    char arch[64];
    snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%d", cc_major, cc_minor);
    const char *opts[] = {arch, "--std=c++20", "-lineinfo"};
    nvrtcProgram p;
    if (api.nvrtcCreateProgram(&p, HAND_SRC, "hand.cu", 0, NULL, NULL)) exit(1);
    nvrtcResult r = api.nvrtcCompileProgram(p, 3, opts);
    size_t n = 0;
    api.nvrtcGetProgramLogSize(p, &n);
    if (n > 1) {
        char *log = malloc(n);
        api.nvrtcGetProgramLog(p, log);
        fprintf(stderr, "%s\n", log);
        free(log);
    }
    if (r) { fprintf(stderr, "hand-written kernels failed to compile\n"); exit(1); }
    api.nvrtcGetCUBINSize(p, &n);
    char *cubin = malloc(n);
    api.nvrtcGetCUBIN(p, cubin);
    if (dump_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/hand.cubin", dump_dir);
        FILE *f = fopen(path, "wb");
        if (f) { fwrite(cubin, 1, n, f); fclose(f); }
    }
    CUmodule m;
    CU(api.cuModuleLoadData(&m, cubin));
    free(cubin);
    return m;
}

static alloy_kernel *example(const char *file) {
    char path[2048];
    snprintf(path, sizeof path, "%s/examples/%s", ALLOY_SOURCE_DIR, file);
    alloy_kernel_file *f;
    BENCH_CHECK(alloy_kernel_file_load(path, &f));
    alloy_kernel *k;
    BENCH_CHECK(alloy_kernel_file_new_kernel(f, &k));
    alloy_kernel_file_free(f);
    return k;
}

typedef struct parity_case {
    const char *name;
    alloy_kernel *kernel;
    int n_in;
    alloy_array *in[2];
    alloy_launch *launch;
    CUfunction hand;
    void *hand_args[4];
    unsigned grid[3], block[3]; /* hand-written launch, in blocks */
    double bytes;
} parity_case;

enum { REPS = 20, BATCHES = 15 };

/* Milliseconds per launch of one batch. */
static double batch_ms(parity_case *c, alloy_stream *s, CUstream cs, CUevent e0, CUevent e1,
                       int use_alloy) {
    CU(api.cuEventRecord(e0, cs));
    for (int r = 0; r < REPS; r++) {
        if (use_alloy) {
            alloy_array *o;
            BENCH_CHECK(alloy_kernel_apply(c->kernel, c->n_in, c->in, c->launch, s, &o));
            alloy_array_free(o);
        } else {
            CU(api.cuLaunchKernel(c->hand, c->grid[0], c->grid[1], c->grid[2], c->block[0],
                                  c->block[1], c->block[2], 0, cs, c->hand_args, NULL));
        }
    }
    CU(api.cuEventRecord(e1, cs));
    CU(api.cuEventSynchronize(e1));
    float ms;
    CU(api.cuEventElapsedTime(&ms, e0, e1));
    return ms / REPS;
}

int main(int argc, char **argv) {
    const char *dump = argc > 2 && strcmp(argv[1], "--dump") == 0 ? argv[2] : NULL;
    load_apis();
    alloy_device *dev;
    BENCH_CHECK(alloy_device_get("cuda", &dev));
    CUstream cs;
    CU(api.cuStreamCreate(&cs, 1 /* non-blocking */));
    alloy_stream *s;
    BENCH_CHECK(alloy_stream_wrap(dev, cs, &s));
    int major = 0, minor = 0;
    CU(api.cuDeviceGetAttribute(&major, 75, 0));
    CU(api.cuDeviceGetAttribute(&minor, 76, 0));
    CUmodule hand = compile_hand(major, minor, dump);

    const int64_t n = (int64_t)1 << 28; /* 1 GiB of float32 */
    alloy_array *x, *out, *cap;
    BENCH_CHECK(alloy_array_new(dev, ALLOY_FLOAT32, 1, &n, &x));
    BENCH_CHECK(alloy_array_new(dev, ALLOY_FLOAT32, 1, &n, &out));
    BENCH_CHECK(alloy_array_fill(x, 0.75));
    BENCH_CHECK(alloy_array_scalar(dev, ALLOY_FLOAT32, 2.5, &cap));
    const int64_t rows = 16384, cols = 16384;
    alloy_array *x2, *out2;
    BENCH_CHECK(alloy_array_new(dev, ALLOY_FLOAT32, 2, (int64_t[]){rows, cols}, &x2));
    BENCH_CHECK(alloy_array_new(dev, ALLOY_FLOAT32, 2, (int64_t[]){rows, cols}, &out2));
    BENCH_CHECK(alloy_array_fill(x2, 0.5));

    void *px = alloy_array_data(x), *pout = alloy_array_data(out);
    void *px2 = alloy_array_data(x2), *pout2 = alloy_array_data(out2);
    unsigned long long un = (unsigned long long)n, nbytes = un * 4;
    float capv = 2.5f;
    int irows = (int)rows, icols = (int)cols;

    parity_case cases[6];
    memset(cases, 0, sizeof cases);
    const char *names[6] = {"copy, 1 float/thread", "soft-cap, 1 float/thread",
                            "copy, 16 B/thread (vec4)", "soft-cap, 16 B/thread (vec4)",
                            "2-D affine (group position x size + local)",
                            "soft-cap, 1 float/thread, partial last group"};
    const char *files[4] = {"memcpy.metal", "soft_cap.metal", "memcpy_vec4.metal",
                            "soft_cap_vec4.metal"};
    const char *hand_names[6] = {"copy1", "soft_cap1", "copy4", "soft_cap4", "affine2d",
                                 "soft_cap1"};
    unsigned long long short_n = un - 7; /* the partial case's grid */
    for (int i = 0; i < 6; i++) {
        parity_case *c = &cases[i];
        c->name = names[i];
        if (i < 4 || i == 5) {
            c->kernel = example(files[i == 5 ? 1 : i]);
        } else {
            const char *in_names[] = {"x"}, *out_names[] = {"out"};
            BENCH_CHECK(alloy_kernel_new("affine2d", 1, in_names, 1, out_names, AFFINE2D_BODY,
                                         NULL, 1, 0, &c->kernel));
        }
        CU(api.cuModuleGetFunction(&c->hand, hand, hand_names[i]));
        BENCH_CHECK(alloy_launch_new(&c->launch));
        int vec = i == 2 || i == 3;
        unsigned threads = (unsigned)(vec ? n / 4 : i == 5 ? (int64_t)short_n : n);
        c->in[0] = i == 4 ? x2 : x;
        c->in[1] = cap;
        c->n_in = i == 1 || i == 3 || i == 5 ? 2 : 1;
        BENCH_CHECK(alloy_launch_add_output_array(c->launch, i == 4 ? out2 : out));
        if (i == 4) {
            BENCH_CHECK(alloy_launch_set_grid(c->launch, (uint32_t)cols, (uint32_t)rows, 1));
            BENCH_CHECK(alloy_launch_set_threadgroup(c->launch, 32, 8, 1));
            c->grid[0] = (unsigned)(cols / 32), c->grid[1] = (unsigned)(rows / 8), c->grid[2] = 1;
            c->block[0] = 32, c->block[1] = 8, c->block[2] = 1;
            c->hand_args[0] = &px2, c->hand_args[1] = &pout2, c->hand_args[2] = &irows,
            c->hand_args[3] = &icols;
        } else {
            BENCH_CHECK(alloy_launch_set_grid(c->launch, threads, 1, 1));
            BENCH_CHECK(alloy_launch_set_threadgroup(c->launch, 256, 1, 1));
            c->grid[0] = (threads + 255) / 256, c->grid[1] = c->grid[2] = 1;
            c->block[0] = 256, c->block[1] = c->block[2] = 1;
            c->hand_args[0] = &px, c->hand_args[1] = &pout;
            if (i == 0) c->hand_args[2] = &un;
            if (i == 1 || i == 3) c->hand_args[2] = &capv, c->hand_args[3] = &un;
            if (i == 5) c->hand_args[2] = &capv, c->hand_args[3] = &short_n;
            if (i == 2) c->hand_args[2] = &nbytes;
        }
        c->bytes = 2.0 * (double)nbytes;
    }

    CUevent e0, e1;
    CU(api.cuEventCreate(&e0, 0));
    CU(api.cuEventCreate(&e1, 0));
    printf("| body | alloy ms | hand-written NVRTC ms | alloy / hand | alloy GB/s |\n"
           "|---|---|---|---|---|\n");
    double worst = 0;
    for (int i = 0; i < 6; i++) {
        parity_case *c = &cases[i];
        double ta[BATCHES], th[BATCHES];
        batch_ms(c, s, cs, e0, e1, 1); /* warm-up: compile, caches, clocks */
        batch_ms(c, s, cs, e0, e1, 0);
        for (int b = 0; b < BATCHES; b++) {
            ta[b] = batch_ms(c, s, cs, e0, e1, 1);
            th[b] = batch_ms(c, s, cs, e0, e1, 0);
        }
        double ma = bench_median(ta, BATCHES), mh = bench_median(th, BATCHES);
        double ratio = ma / mh;
        if (ratio > worst) worst = ratio;
        printf("| %s | %.4f | %.4f | %.3f | %.0f |\n", c->name, ma, mh, ratio,
               c->bytes / (ma * 1e-3) / 1e9);
    }
    printf("PARITY_WORST %.3f\n", worst);
    CU(api.cuStreamSynchronize(cs));
    for (int i = 0; i < 6; i++) {
        alloy_launch_free(cases[i].launch);
        alloy_kernel_free(cases[i].kernel);
    }
    alloy_array_free(x), alloy_array_free(out), alloy_array_free(cap);
    alloy_array_free(x2), alloy_array_free(out2);
    alloy_stream_free(s);
    return 0;
}
