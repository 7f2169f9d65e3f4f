/* test_cuda_loader.c — the parts of the CUDA backend that work without a
 * GPU: the probe's explanation when there is no driver (what `alloy info`
 * prints), "auto" falling back to the CPU, and the device-free NVRTC compile
 * check (ALLOY_COMPILE_CHECK=cuda) on valid, invalid and Hopper-only sources,
 * and its record of the sources that passed.
 * Runs everywhere; the NVRTC checks skip where no NVRTC can be loaded. */
#include <dlfcn.h>
#include <stdlib.h>

#include "backend/cuda/cuda_internal.h"
#include "core/backend.h"
#include "core/disk_cache.h"
#include "harness.h"

static int cuda_index(void) {
    for (int i = 0; i < alloy_backend_count(); i++) {
        const char *name = NULL;
        if (alloy_backend_info(i, &name, NULL, NULL) == ALLOY_OK && strcmp(name, "cuda") == 0)
            return i;
    }
    return -1;
}

static int driver_present(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) dlclose(h);
    return h != NULL;
}

static void test_backend_listed_with_reason(void) {
    int i = cuda_index();
    CHECK(i >= 0);
    if (i < 0) return;
    const char *name = NULL, *detail = NULL;
    int available = -1;
    CHECK_OK(alloy_backend_info(i, &name, &available, &detail));
    CHECK(detail && *detail);
    fprintf(stderr, "  cuda: available=%d: %s\n", available, detail ? detail : "(null)");
    if (!available && !driver_present())
        CHECK_MSG(strstr(detail, "libcuda.so.1 not found") != NULL, "detail: %s", detail);
    if (available) CHECK(strstr(detail, "sm_") != NULL); /* a description */
}

static void test_unavailable_device_says_why(void) {
    int i = cuda_index();
    int available = 0;
    const char *detail = NULL;
    if (i < 0 || alloy_backend_info(i, NULL, &available, &detail) != ALLOY_OK) return;
    if (available) {
        SKIP("a CUDA device is available here");
        return;
    }
    alloy_device *d = NULL;
    CHECK_FAILS(alloy_device_get("cuda", &d), ALLOY_ERROR_UNAVAILABLE, detail);
    CHECK_FAILS(alloy_device_get("cuda:1", &d), ALLOY_ERROR_UNAVAILABLE, "unavailable");
    /* "auto" prefers a GPU but falls back to the CPU. */
    CHECK_OK(alloy_device_get("auto", &d));
    CHECK(d && strcmp(alloy_device_name(d), "cpu") == 0);
}

static const alloy_backend *cuda_backend(void) {
    const alloy_backend *b = alloy_backend_named("cuda");
    CHECK(b && b->compile_check);
    return b && b->compile_check ? b : NULL;
}

/* Runs the compile check; 1 if NVRTC could not be loaded (skip). */
static int check_source(const char *name, const char *src, alloy_status *st, char **log) {
    const alloy_backend *b = cuda_backend();
    if (!b) return 1;
    alloy_compile_job job = {name, src, "0000000000000000000000000000000000000000000000000000000000000000", 0, {0}};
    *log = NULL;
    *st = b->compile_check(&job, log);
    if (*st == ALLOY_ERROR_UNAVAILABLE) {
        fprintf(stderr, "  NVRTC unavailable: %s\n", alloy_last_error());
        CHECK(strstr(alloy_last_error(), "NVRTC") != NULL);
        return 1;
    }
    return 0;
}

#define PRELUDE                                                                                    \
    "struct alloy_launch_info { unsigned grid[3]; };\n"                                            \
    "struct alloy_i32x8 { int v[8]; };\n"                                                          \
    "struct alloy_i64x8 { long long v[8]; };\n"

static void test_compile_check_valid(void) {
    const char *src = PRELUDE
        "extern \"C\" __global__ void alloy_kernel(const float* a, alloy_i32x8 a_shape_v, float* out,\n"
        "                                          alloy_launch_info alloy_info) {\n"
        "  extern __shared__ unsigned char alloy_threadgroup_memory[];\n"
        "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i >= alloy_info.grid[0]) return;\n"
        "  alloy_threadgroup_memory[threadIdx.x] = 1;\n"
        "  __syncthreads();\n"
        "  out[i] = a[i] * 2.0f + a_shape_v.v[0] + alloy_threadgroup_memory[0];\n"
        "}\n";
    alloy_status st;
    char *log = NULL;
    if (check_source("valid", src, &st, &log)) {
        SKIP("NVRTC cannot be loaded here");
        return;
    }
    CHECK_MSG(st == ALLOY_OK, "%s: %s\n%s", alloy_status_name(st), alloy_last_error(), log ? log : "");
    free(log);
}

static void test_compile_check_invalid(void) {
    const char *src = PRELUDE
        "extern \"C\" __global__ void alloy_kernel(float* out, alloy_launch_info alloy_info) {\n"
        "  out[0] = undeclared_name\n"
        "}\n";
    alloy_status st;
    char *log = NULL;
    if (check_source("broken", src, &st, &log)) {
        SKIP("NVRTC cannot be loaded here");
        return;
    }
    CHECK(st == ALLOY_ERROR_COMPILE);
    CHECK(log != NULL);
    if (log) {
        CHECK_MSG(strstr(log, "error") != NULL, "log: %s", log);
        CHECK_MSG(strstr(log, "undeclared_name") != NULL, "log: %s", log);
        CHECK_MSG(strstr(log, "broken.cu") != NULL, "log names the kernel's file: %s", log);
    }
    free(log);
}

/* setmaxnreg exists only on sm_90a: the check must pick that target. */
static void test_compile_check_hopper_only(void) {
    const char *src = PRELUDE
        "extern \"C\" __global__ void alloy_kernel(int* out, alloy_launch_info alloy_info) {\n"
        "  asm volatile(\"setmaxnreg.inc.sync.aligned.u32 240;\");\n"
        "  out[threadIdx.x] = 1;\n"
        "}\n";
    alloy_status st;
    char *log = NULL;
    if (check_source("hopper", src, &st, &log)) {
        SKIP("NVRTC cannot be loaded here");
        return;
    }
    CHECK_MSG(st == ALLOY_OK, "%s: %s\n%s", alloy_status_name(st), alloy_last_error(), log ? log : "");
    free(log);
}

/* A passed check is recorded in the cache and not compiled again; a failed
 * one is not recorded; a corrupt record is ignored. Seen through a record
 * planted for a broken source: the check then passes without compiling it. */
static void test_compile_check_remembered(void) {
    const char *good = PRELUDE "extern \"C\" __global__ void alloy_kernel(int* out, alloy_launch_info alloy_info) {\n"
                               "  out[threadIdx.x] = 7;\n"
                               "}\n";
    const char *bad = PRELUDE "extern \"C\" __global__ void alloy_kernel(int* out, alloy_launch_info alloy_info) {\n"
                              "  out[0] = not_declared_here\n"
                              "}\n";
    alloy_status st;
    char *log = NULL;
    if (check_source("remembered", good, &st, &log)) {
        SKIP("NVRTC cannot be loaded here");
        return;
    }
    char *good_path = alloy_cuda_check_marker_path(good, "sm_90");
    char *bad_path = alloy_cuda_check_marker_path(bad, "sm_90");
    if (!good_path || !bad_path) {
        SKIP("the kernel cache is off");
    } else {
        CHECK_MSG(st == ALLOY_OK, "%s: %s", alloy_status_name(st), alloy_last_error());
        CHECK_MSG(access(good_path, F_OK) == 0, "no record of the passed check at %s", good_path);
        unlink(bad_path);
        free(log);
        check_source("remembered_bad", bad, &st, &log);
        CHECK(st == ALLOY_ERROR_COMPILE);
        CHECK_MSG(access(bad_path, F_OK) != 0, "a failed check was recorded at %s", bad_path);
        /* a record planted for the broken source: believed, as compiled kernels in the cache are */
        FILE *f = fopen(good_path, "rb");
        char rec[ALLOY_CACHE_TRAILER_SIZE + 1];
        size_t n = f ? fread(rec, 1, sizeof rec, f) : 0;
        if (f) fclose(f);
        CHECK_MSG(n == ALLOY_CACHE_TRAILER_SIZE, "the record holds %zu bytes, want an empty sealed entry", n);
        f = fopen(bad_path, "wb");
        CHECK(f != NULL);
        if (f) {
            fwrite(rec, 1, n, f);
            fclose(f);
        }
        free(log);
        check_source("remembered_bad", bad, &st, &log);
        CHECK_MSG(st == ALLOY_OK, "a recorded pass was compiled again: %s", alloy_status_name(st));
        /* a corrupt record is not: the source is compiled (and fails) again */
        f = fopen(bad_path, "r+b");
        if (f) {
            fputc('X', f);
            fclose(f);
        }
        free(log);
        check_source("remembered_bad", bad, &st, &log);
        CHECK_MSG(st == ALLOY_ERROR_COMPILE, "a corrupt record was believed: %s", alloy_status_name(st));
        unlink(bad_path);
    }
    free(good_path);
    free(bad_path);
    free(log);
}

/* The whole path through the public API with ALLOY_COMPILE_CHECK=cuda: the
 * kernel runs on the CPU and is also compiled by NVRTC. */
static void test_compile_check_through_api(void) {
    const alloy_backend *b = cuda_backend();
    if (!b) return;
    alloy_device *cpu = NULL;
    CHECK_OK(alloy_device_get("cpu", &cpu));
    const char *in[] = {"a"}, *out[] = {"b"};
    alloy_kernel *k = NULL;
    CHECK_OK(alloy_kernel_new("cuda_check_double", 1, in, 1, out,
                              "uint i = thread_position_in_grid.x; b[i] = 2 * a[i];", NULL, 1, 0, &k));
    float host[33];
    for (int i = 0; i < 33; i++) host[i] = (float)i;
    int64_t shape[1] = {33};
    alloy_array *a = NULL, *res = NULL;
    CHECK_OK(alloy_array_from_host(cpu, ALLOY_FLOAT32, 1, shape, host, &a));
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output(l, 1, shape, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_grid(l, 33, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 32, 1, 1));
    setenv("ALLOY_COMPILE_CHECK", "cuda", 1);
    alloy_status st = alloy_kernel_apply(k, 1, &a, l, NULL, &res);
    unsetenv("ALLOY_COMPILE_CHECK");
    if (st == ALLOY_ERROR_UNSUPPORTED || st == ALLOY_ERROR_UNAVAILABLE) {
        fprintf(stderr, "  %s\n", alloy_last_error());
        SKIP("CUDA code generation or NVRTC is not available in this build/machine");
    } else {
        CHECK_MSG(st == ALLOY_OK, "%s: %s", alloy_status_name(st), alloy_last_error());
        float back[33] = {0};
        if (st == ALLOY_OK) {
            CHECK_OK(alloy_array_copy_to_host(res, back, sizeof back));
            for (int i = 0; i < 33; i++) CHECK(back[i] == 2.0f * (float)i);
        }
    }
    alloy_array_free(res);
    alloy_array_free(a);
    alloy_launch_free(l);
    alloy_kernel_free(k);
}

int main(void) {
    unsetenv("ALLOY_DEVICE");
    RUN(test_backend_listed_with_reason);
    RUN(test_unavailable_device_says_why);
    RUN(test_compile_check_valid);
    RUN(test_compile_check_invalid);
    RUN(test_compile_check_hopper_only);
    RUN(test_compile_check_remembered);
    RUN(test_compile_check_through_api);
    return harness_finish();
}
