/* test_threadgroup_memory.c — dynamic threadgroup memory
 * (alloy_launch_set_threadgroup_memory / `alloy_threadgroup_memory`): more
 * than 48 KB per group, shared by the group's threads, private to the group. */
#include "harness.h"

/* Each group fills `words` floats of its memory (strided over its threads),
 * waits, then every thread sums a slice written by other threads. */
static const char *BODY =
    "threadgroup float* mem = (threadgroup float*)alloy_threadgroup_memory;\n"
    "uint t = thread_index_in_threadgroup, T = threads_per_threadgroup.x;\n"
    "uint g = threadgroup_position_in_grid.x;\n"
    "for (uint i = t; i < uint(words); i += T) mem[i] = float(g * 100000u + i);\n"
    "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "float acc = 0.0f;\n"
    "for (uint i = (t + 1) % T; i < uint(words); i += T) acc += mem[i];\n"
    "out[thread_position_in_grid.x] = acc;\n";

static void run(uint32_t groups, uint32_t tg, int words) {
    alloy_device *dev = harness_device();
    static const char *in[] = {"words"}, *out[] = {"out"};
    alloy_kernel *k = NULL;
    CHECK_OK(alloy_kernel_new("tgmem", 1, in, 1, out, BODY, NULL, 1, 0, &k));
    alloy_array *w = NULL, *res = NULL;
    CHECK_OK(alloy_array_scalar(dev, ALLOY_INT32, words, &w));
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    int64_t n = (int64_t)groups * tg;
    CHECK_OK(alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_grid(l, (uint32_t)n, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, tg, 1, 1));
    CHECK_OK(alloy_launch_set_init_value(l, NAN));
    CHECK_OK(alloy_launch_set_threadgroup_memory(l, (size_t)words * 4));
    CHECK_OK(alloy_kernel_apply(k, 1, &w, l, NULL, &res));
    if (res) {
        float *got = malloc((size_t)n * sizeof *got);
        CHECK_OK(alloy_array_copy_to_host(res, got, (size_t)n * sizeof *got));
        int64_t bad = 0;
        for (int64_t x = 0; x < n; x++) {
            uint32_t g = (uint32_t)(x / tg), t = (uint32_t)(x % tg);
            double ref = 0;
            for (uint32_t i = (t + 1) % tg; i < (uint32_t)words; i += tg)
                ref += (double)(float)((double)g * 100000.0 + i);
            if (!(fabs(got[x] - ref) <= 1e-5 * fabs(ref) + 1e-3)) bad++;
        }
        CHECK_MSG(bad == 0, "%lld of %lld wrong", (long long)bad, (long long)n);
        free(got);
    }
    alloy_array_free(res);
    alloy_array_free(w);
    alloy_launch_free(l);
    alloy_kernel_free(k);
}

static void test_over_48k(void) { run(7, 256, 100 * 1024 / 4); }
static void test_small_groups(void) { run(33, 32, 3000); }

int main(void) {
    harness_seed();
    RUN(test_over_48k);
    RUN(test_small_groups);
    return harness_finish();
}
