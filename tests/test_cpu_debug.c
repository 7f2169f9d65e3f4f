/* test_cpu_debug.c — ALLOY_CPU_DEBUG=1 (set by this test before anything
 * launches): every fault is an error with the details the docs promise —
 * out-of-bounds reads and writes of inputs and outputs (through subscripts,
 * derived `device` pointers and casts), threadgroup arrays, output elements
 * no thread wrote (unless init_value is set), and threads that meet
 * different barriers — and correct kernels still give their results. The
 * seed and MSL tests also run whole under the mode (their _cpudebug twins
 * in tests/CMakeLists.txt). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static alloy_device *cpu;

/* Runs `body` (inputs x: n floats 0..n-1; output out: n floats) with
 * grid (n,1,1) and threadgroup (tg,1,1); init_value when init >= 0.
 * Returns the status; *out_values (if not NULL) gets the output. */
static alloy_status run(const char *name, const char *body, int n, unsigned tg, double init,
                        float *out_values) {
    float xs[64];
    for (int i = 0; i < n && i < 64; i++) xs[i] = (float)i;
    int64_t shape = n;
    alloy_array *x = NULL, *out = NULL;
    alloy_kernel *k = NULL;
    alloy_launch *l = NULL;
    const char *in[] = {"x"}, *outs[] = {"out"};
    alloy_status st = alloy_array_from_host(cpu, ALLOY_FLOAT32, 1, &shape, xs, &x);
    if (st == ALLOY_OK) st = alloy_kernel_new(name, 1, in, 1, outs, body, NULL, 1, 0, &k);
    if (st == ALLOY_OK) st = alloy_launch_new(&l);
    if (st == ALLOY_OK) st = alloy_launch_add_output(l, 1, &shape, ALLOY_FLOAT32);
    if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)n, 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, tg, 1, 1);
    if (st == ALLOY_OK && init >= 0) st = alloy_launch_set_init_value(l, init);
    if (st == ALLOY_OK) st = alloy_kernel_apply(k, 1, &x, l, NULL, &out);
    if (st == ALLOY_OK && out_values) st = alloy_array_copy_to_host(out, out_values, (size_t)n * 4);
    alloy_array_free(out);
    alloy_launch_free(l);
    alloy_kernel_free(k);
    alloy_array_free(x);
    return st;
}

static int has(const char *needle) {
    int ok = strstr(alloy_last_error(), needle) != NULL;
    if (!ok) fprintf(stderr, "    message: %s\n    lacks: %s\n", alloy_last_error(), needle);
    return ok;
}

static void test_write_past_the_end(void) {
    /* the body: reads x[8] first (the right side of `=` comes first) */
    CHECK(run("oob_copy", "uint i = thread_position_in_grid.x;\nout[i+1] = x[i+1];\n", 8, 8, -1, NULL) ==
          ALLOY_ERROR_LAUNCH);
    CHECK(has("kernel 'oob_copy' (ALLOY_CPU_DEBUG)") && has("input 'x'") && has("index 8") &&
          has("8 elements of 4 bytes") && has("thread position in grid (7,0,0), in threadgroup (7,0,0)") &&
          has("body line 2"));
    /* a write alone */
    CHECK(run("oob_write", "uint i = thread_position_in_grid.x;\n\nout[i + 1] = 1.0f;\n", 8, 4, 0, NULL) ==
          ALLOY_ERROR_LAUNCH);
    CHECK(has("output 'out'") && has("index 8") && has("in grid (7,0,0), in threadgroup (3,0,0)") &&
          has("body line 3"));
    /* below the start */
    CHECK(run("oob_neg", "int i = int(thread_position_in_grid.x) - 1;\nout[thread_position_in_grid.x] = x[i];\n",
              8, 8, -1, NULL) == ALLOY_ERROR_LAUNCH);
    CHECK(has("input 'x'") && has("index -1") && has("in grid (0,0,0)"));
}

static void test_derived_pointers(void) {
    CHECK(run("derived", "uint i = thread_position_in_grid.x;\n"
                         "device float* p = out + 4;\n"
                         "const device float* q = x;\n"
                         "p[i] = q[i];\n",
              8, 8, 0, NULL) == ALLOY_ERROR_LAUNCH);
    CHECK(has("output 'out'") && has("index 8") && has("in grid (4,0,0)") && has("body line 4"));
    /* a cast to a wider type: 16 bytes at element 6 of 8 floats run past the end */
    CHECK(run("cast", "uint i = thread_position_in_grid.x;\n"
                      "if (i == 0) *(device float4*)(out + 6) = float4(1.0f);\n",
              8, 8, 0, NULL) == ALLOY_ERROR_LAUNCH);
    CHECK(has("output 'out'") && has("16 bytes"));
    /* pointer arithmetic that stays inside is fine, and computes */
    float got[8];
    CHECK_OK(run("inside", "uint i = thread_position_in_grid.x;\n"
                           "const device float* row = x + (i / 4) * 4;\n"
                           "device float* o = out;\n"
                           "o += i;\n"
                           "*o = row[i % 4] * 2.0f;\n",
                 8, 8, -1, got));
    for (int i = 0; i < 8; i++) CHECK(got[i] == 2.0f * (float)i);
}

static void test_threadgroup_arrays(void) {
    CHECK(run("tg_oob", "threadgroup float t[4];\n"
                        "uint l = thread_position_in_threadgroup.x;\n"
                        "t[l] = x[thread_position_in_grid.x];\n"
                        "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
                        "out[thread_position_in_grid.x] = t[0];\n",
              8, 8, -1, NULL) == ALLOY_ERROR_LAUNCH);
    CHECK(has("threadgroup array") && has("index 4") && has("4 elements") && has("in threadgroup (4,0,0)"));
    CHECK(run("tg_2d", "threadgroup float t[2][3];\n"
                       "uint l = thread_position_in_threadgroup.x;\n"
                       "t[l % 2][l] = 1.0f;\n"
                       "out[thread_position_in_grid.x] = 0.0f;\n",
              8, 8, -1, NULL) == ALLOY_ERROR_LAUNCH);
    CHECK(has("threadgroup array") && has("index 3") && has("3 elements"));
    /* correct use: a reversal through threadgroup memory */
    float got[16];
    CHECK_OK(run("tg_ok", "threadgroup float t[8];\n"
                          "uint l = thread_position_in_threadgroup.x;\n"
                          "t[l] = x[thread_position_in_grid.x];\n"
                          "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
                          "out[thread_position_in_grid.x] = t[7 - l];\n",
                 16, 8, -1, got));
    for (int i = 0; i < 16; i++) CHECK(got[i] == (float)((i / 8) * 8 + 7 - i % 8));
}

static void test_unwritten_outputs(void) {
    CHECK(run("partial", "uint i = thread_position_in_grid.x;\nif (i < 5) out[i] = 1.0f;\n", 8, 8, -1, NULL) ==
          ALLOY_ERROR_LAUNCH);
    CHECK(has("3 of 8 elements of output 'out' were not written") && has("elements 5, 6, 7") &&
          has("init_value"));
    CHECK(run("sparse", "uint i = thread_position_in_grid.x;\nif (i % 7 != 3) out[i] = 0.0f;\n", 64, 32, -1,
              NULL) == ALLOY_ERROR_LAUNCH);
    CHECK(has("9 of 64 elements") && has("elements 3, 10, 17, 24, 31, 38, 45, 52, ..."));
    /* with init_value the unwritten elements keep it: no error */
    float got[8];
    CHECK_OK(run("partial_init", "uint i = thread_position_in_grid.x;\nif (i < 5) out[i] = 1.0f;\n", 8, 8, 2.0,
                 got));
    CHECK(got[4] == 1.0f && got[5] == 2.0f && got[7] == 2.0f);
    /* a kernel that writes a NaN or zero is not mistaken for unwritten */
    CHECK_OK(run("nan_ok", "uint i = thread_position_in_grid.x;\nout[i] = i == 2 ? NAN : 0.0f;\n", 8, 8, -1,
                 got));
}

static void test_barrier_divergence(void) {
    CHECK(run("split", "uint l = thread_position_in_threadgroup.x;\n"
                       "if (l < 4) {\n"
                       "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
                       "} else {\n"
                       "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
                       "}\n"
                       "out[thread_position_in_grid.x] = 0.0f;\n",
              8, 8, -1, NULL) == ALLOY_ERROR_LAUNCH);
    CHECK(has("barrier divergence in kernel 'split'") && has("the threads met different barriers") &&
          has("threads 0-3 wait at a threadgroup barrier at body line 3") &&
          has("at body line 5"));
    /* threads that skip a barrier and finish are allowed (they count as arrived) */
    float got[8];
    CHECK_OK(run("early_exit", "uint l = thread_position_in_threadgroup.x;\n"
                               "out[thread_position_in_grid.x] = 1.0f;\n"
                               "if (l >= 6) return;\n"
                               "threadgroup_barrier(mem_flags::mem_threadgroup);\n",
                 8, 8, -1, got));
}

/* The generated source says it is a debug build, and the same kernel
 * without the mode would be a different specialisation (cache key). */
static void test_generated_source(void) {
    const char *in[] = {"x"}, *outs[] = {"out"};
    alloy_kernel *k = NULL;
    alloy_launch *l = NULL;
    alloy_array *x = NULL;
    int64_t n = 4;
    CHECK_OK(alloy_kernel_new("src", 1, in, 1, outs, "out[0] = x[0];", NULL, 1, 0, &k));
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32));
    CHECK_OK(alloy_array_new(cpu, ALLOY_FLOAT32, 1, &n, &x));
    char *src = NULL;
    CHECK_OK(alloy_kernel_generated_source(k, 1, &x, l, cpu, &src));
    CHECK(src && strstr(src, "#define ALLOY_CPU_DEBUG 1"));
    CHECK(src && strstr(src, "alloy_dbg::ptr<const float> x("));
    free(src);
    alloy_array_free(x);
    alloy_launch_free(l);
    alloy_kernel_free(k);
}

int main(void) {
    setenv("ALLOY_CPU_DEBUG", "1", 1); /* read once, at the first launch */
    if (alloy_device_get("cpu", &cpu) != ALLOY_OK) {
        fprintf(stderr, "no CPU device: %s\n", alloy_last_error());
        return 1;
    }
    RUN(test_generated_source);
    RUN(test_write_past_the_end);
    RUN(test_derived_pointers);
    RUN(test_threadgroup_arrays);
    RUN(test_unwritten_outputs);
    RUN(test_barrier_divergence);
    return harness_finish();
}
