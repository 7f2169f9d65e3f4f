/* test_msl_memory.c — spec §3 address spaces and barriers: `device`,
 * `constant`, `threadgroup` and `thread` pointers and references (incl. casts
 * like `(const device uint8_t*)p`), header helper functions taking
 * `threadgroup float*` / `thread float&`, program-scope `constant` tables,
 * `threadgroup T x[N]` declared in the body (private to each threadgroup),
 * `threadgroup_barrier` tree reductions over 1024 threads with a partial last
 * group, and `simdgroup_barrier`. */
#include "kernel_util.h"

static const char *as_header =
    "#include <metal_stdlib>\n"
    "using namespace metal;\n"
    "constant float kTable[4] = {1.0f, 10.0f, 100.0f, 1000.0f};\n"
    "inline void add_to(thread float& acc, float v) { acc += v; }\n"
    "inline float read_dev(const device float* p, uint i) { return p[i]; }\n"
    "inline void write_dev(device float& dst, float v) { dst = v; }\n"
    "inline float sum_tg(threadgroup float* buf, uint n) {\n"
    "  float s = 0.0f;\n"
    "  for (uint k = 0; k < n; k++) s += buf[k];\n"
    "  return s;\n"
    "}\n"
    "inline void fill_thread(thread float* arr, int n, float v) { for (int k = 0; k < n; k++) arr[k] = v + k; }\n";

/* Address-space qualified pointers/references in the body and in helpers. */
static void test_address_spaces(void) {
    const int n = 100;
    float *x = malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) x[i] = (float)(i % 17) - 8.0f;
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "uint l = thread_position_in_threadgroup.x;\n"
        "uint nt = threads_per_threadgroup.x;\n"
        "threadgroup float buf[32];\n"
        "buf[l] = x[i];\n"
        "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "float acc = 0.0f;\n"
        "add_to(acc, read_dev(x, i));\n"
        "add_to(acc, kTable[i % 4]);\n"
        "thread float loc[3];\n"
        "fill_thread(loc, 3, acc);\n"
        "thread float& r = loc[2];\n"
        "r *= 2.0f;\n"
        "threadgroup float* tp = &buf[0];\n"
        "float gs = sum_tg(tp, nt);\n"
        "const device uint8_t* bytes = (const device uint8_t*)x;\n"
        "uint b0 = bytes[4 * i + 3];                /* high byte of x[i] */\n"
        "device float* o = out + 4 * i;\n"
        "write_dev(o[0], loc[2]);\n"
        "o[1] = gs;\n"
        "o[2] = float(b0);\n"
        "device float& last = o[3];\n"
        "last = kTable[3] - float(l);\n";
    float *got = malloc(4 * n * sizeof(float));
    double *ref = malloc(4 * n * sizeof(double));
    const int tg = 32;
    for (int i = 0; i < n; i++) {
        int g = i / tg, l = i % tg, nt = (g + 1) * tg <= n ? tg : n - g * tg;
        double tab[4] = {1, 10, 100, 1000};
        double acc = x[i] + tab[i % 4];
        ref[4 * i + 0] = (acc + 2) * 2;
        double gs = 0;
        for (int k = 0; k < nt; k++) gs += x[g * tg + k];
        ref[4 * i + 1] = gs;
        uint32_t u = ku_f32_bits(x[i]);
        ref[4 * i + 2] = (double)(u >> 24); /* little-endian byte 3 */
        ref[4 * i + 3] = 1000.0 - l;
    }
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "address_spaces";
    s.body = body;
    s.header = as_header;
    s.n_in = 1;
    s.in_names[0] = "x";
    s.in[0] = ku_array(ALLOY_FLOAT32, n, x);
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = ALLOY_FLOAT32;
    s.out_n[0] = 4 * n;
    s.out_host[0] = got;
    s.grid[0] = (uint32_t)n;
    s.tg[0] = (uint32_t)tg;
    s.has_init = 1;
    s.init = NAN;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    CHECK(ku_cmp_f32("address_spaces", got, ref, 4 * n, 0, 0) == 0);
    free(x); free(got); free(ref);
}

/* `constant T*` / `constant T&` parameters bound to a program-scope constant
 * table (constant memory is read-only, so these are pointers to const). */
static void test_constant_pointers(void) {
    const char *header =
        "constant float kTable[4] = {1.0f, 10.0f, 100.0f, 1000.0f};\n"
        "constant int kScale = 3;\n"
        "inline float read_const(constant float* t, uint k) { return t[k]; }\n"
        "inline float read_const_ref(constant float& v) { return v; }\n"
        "inline int scale(constant int& s) { return s; }\n";
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "constant float* p = kTable + 1;\n"
        "out[i] = read_const(kTable, i % 4) + read_const_ref(kTable[3]) + p[0] + float(scale(kScale));\n";
    float got[9], dummy = 0;
    double ref[9];
    const double tab[4] = {1, 10, 100, 1000};
    for (int i = 0; i < 9; i++) ref[i] = tab[i % 4] + 1000 + 10 + 3;
    CHECK_OK(ku_run_1in1out("constant_pointers", body, header, ALLOY_FLOAT32, 1, &dummy,
                            ALLOY_FLOAT32, 9, got, 9, 4, NAN));
    CHECK(ku_cmp_f32("constant pointers", got, ref, 9, 0, 0) == 0);
}

/* Tree reduction in threadgroup memory over 1024-thread groups (and a
 * partial last group of 952), with threadgroup_barrier between levels. */
static void test_barrier_reduction_1024(void) {
    const int n = 3000, tg = 1024, ng = (n + tg - 1) / tg;
    float *x = malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) x[i] = (float)((int)(harness_rand_u64() % 21) - 10);
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "uint l = thread_position_in_threadgroup.x;\n"
        "uint nt = threads_per_threadgroup.x;\n"
        "threadgroup float red[1024];\n"
        "red[l] = x[i];\n"
        "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "for (uint stride = 512; stride > 0; stride >>= 1) {\n"
        "  if (l < stride && l + stride < nt) red[l] += red[l + stride];\n"
        "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "}\n"
        "if (l == 0) sums[threadgroup_position_in_grid.x] = red[0];\n"
        "/* every thread sees the group's total after the barrier */\n"
        "seen[i] = red[0];\n";
    float *sums = malloc(ng * sizeof(float)), *seen = malloc(n * sizeof(float));
    double *rs = calloc(ng, sizeof(double)), *rseen = malloc(n * sizeof(double));
    for (int i = 0; i < n; i++) rs[i / tg] += x[i];
    for (int i = 0; i < n; i++) rseen[i] = rs[i / tg];
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "barrier_reduce";
    s.body = body;
    s.n_in = 1;
    s.in_names[0] = "x";
    s.in[0] = ku_array(ALLOY_FLOAT32, n, x);
    s.n_out = 2;
    s.out_names[0] = "sums";
    s.out_names[1] = "seen";
    s.out_dtype[0] = s.out_dtype[1] = ALLOY_FLOAT32;
    s.out_n[0] = ng;
    s.out_n[1] = n;
    s.out_host[0] = sums;
    s.out_host[1] = seen;
    s.grid[0] = (uint32_t)n;
    s.tg[0] = (uint32_t)tg;
    s.has_init = 1;
    s.init = NAN;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    CHECK(ku_cmp_f32("group sums", sums, rs, ng, 0, 0) == 0);
    CHECK(ku_cmp_f32("seen", seen, rseen, n, 0, 0) == 0);
    free(x); free(sums); free(seen); free(rs); free(rseen);
}

/* Threadgroup memory is private to each group even when many groups run at
 * once: each group writes its id into the array, waits, and every thread
 * checks the whole array still holds its own group's id. Also 2-D
 * threadgroup arrays and mem_device / mem_none flags. */
static void test_threadgroup_private(void) {
    const int groups = 64, tg = 64, n = groups * tg;
    const char *body =
        "uint l = thread_index_in_threadgroup;\n"
        "uint g = threadgroup_position_in_grid.x;\n"
        "threadgroup uint ids[64];\n"
        "threadgroup float tile[8][8];\n"
        "ids[l] = g;\n"
        "tile[l / 8][l % 8] = float(g * 100 + l);\n"
        "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "uint bad = 0;\n"
        "for (uint k = 0; k < 64; k++) bad += (ids[k] != g) ? 1u : 0u;\n"
        "float t = tile[l % 8][l / 8];           /* transposed read */\n"
        "threadgroup_barrier(mem_flags::mem_device);\n"
        "threadgroup_barrier(mem_flags::mem_none);\n"
        "threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);\n"
        "out[2 * thread_position_in_grid.x] = float(bad);\n"
        "out[2 * thread_position_in_grid.x + 1] = t;\n";
    float *got = malloc(2 * n * sizeof(float));
    double *ref = malloc(2 * n * sizeof(double));
    for (int i = 0; i < n; i++) {
        int g = i / tg, l = i % tg;
        ref[2 * i] = 0;
        ref[2 * i + 1] = g * 100 + (l % 8) * 8 + l / 8;
    }
    float dummy = 0;
    CHECK_OK(ku_run_1in1out("tg_private", body, NULL, ALLOY_FLOAT32, 1, &dummy, ALLOY_FLOAT32,
                            2 * n, got, (uint32_t)n, (uint32_t)tg, NAN));
    CHECK(ku_cmp_f32("tg_private", got, ref, 2 * n, 0, 0) == 0);
    free(got); free(ref);
}

/* simdgroup_barrier: lanes publish values in threadgroup memory, wait on the
 * simdgroup barrier, read their neighbour's value (within the simdgroup). */
static void test_simdgroup_barrier(void) {
    const int n = 200, tg = 64;
    float *x = malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) x[i] = (float)i * 0.5f;
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "uint l = thread_index_in_threadgroup;\n"
        "uint lane = thread_index_in_simdgroup;\n"
        "uint sg = simdgroup_index_in_threadgroup;\n"
        "threadgroup float pub[64];\n"
        "for (int round = 0; round < 3; round++) {\n"
        "  pub[l] = in[i] + float(round);\n"
        "  simdgroup_barrier(mem_flags::mem_threadgroup);\n"
        "  uint src = sg * 32 + ((lane + 1) % 32);\n"
        "  uint nt = threads_per_threadgroup.x;\n"
        "  if (src < nt) out[3 * i + round] = pub[src];\n"
        "  else out[3 * i + round] = -1.0f;\n"
        "  simdgroup_barrier(mem_flags::mem_threadgroup);\n"
        "}\n";
    float *got = malloc(3 * n * sizeof(float));
    double *ref = malloc(3 * n * sizeof(double));
    for (int i = 0; i < n; i++) {
        int g = i / tg, l = i % tg, nt = (g + 1) * tg <= n ? tg : n - g * tg;
        int sg = l / 32, lane = l % 32;
        int src = sg * 32 + (lane + 1) % 32;
        for (int r = 0; r < 3; r++) {
            /* a source lane past the group's end is reported as -1 */
            ref[3 * i + r] = src < nt ? x[g * tg + src] + r : -1.0;
        }
    }
    CHECK_OK(ku_run_1in1out("simdgroup_barrier", body, NULL, ALLOY_FLOAT32, n, x, ALLOY_FLOAT32,
                            3 * n, got, (uint32_t)n, (uint32_t)tg, NAN));
    CHECK(ku_cmp_f32("simdgroup_barrier", got, ref, 3 * n, 0, 0) == 0);
    free(got); free(ref); free(x);
}

int main(void) {
    RUN(test_address_spaces);
    RUN(test_constant_pointers);
    RUN(test_barrier_reduction_1024);
    RUN(test_threadgroup_private);
    RUN(test_simdgroup_barrier);
    return harness_finish();
}
