/* test_cpu_pool.c — which launches the CPU backend runs on the caller alone
 * and which on its worker pool: a barrier-free launch of at most 2048
 * threads stays on the caller while its threads are light, and goes to the
 * pool from its second launch on once its first showed them heavy (the
 * catalog's CPU GEMM is one 64 x 128 tile a thread); every output element is
 * checked on both paths. Skips where the pool has one thread. */
#include "harness.h"
#include "backend/cpu/cpu_pool.h"

/* thread gid: a 32-bit LCG run `iters` times from a seed of gid */
static const char *heavy_body = "const uint gid = thread_position_in_grid.x;\n"
                                "uint v = gid * 2654435761u + 1u;\n"
                                "for (int i = 0; i < iters; i++) v = v * 1664525u + 1013904223u;\n"
                                "out[gid] = v;\n";
static const char *light_body = "const uint gid = thread_position_in_grid.x;\n"
                                "out[gid] = gid * 3u + 1u;\n";

static uint32_t heavy_ref(uint32_t gid, int iters) {
    uint32_t v = gid * 2654435761u + 1u;
    for (int i = 0; i < iters; i++) v = v * 1664525u + 1013904223u;
    return v;
}

/* One launch of `k` over n threads (threadgroups of 1); checks every element. */
static void launch(alloy_kernel *k, int heavy, int64_t n, int iters) {
    alloy_device *cpu = NULL;
    CHECK_OK(alloy_device_get("cpu", &cpu));
    alloy_stream *st = NULL; /* the CPU's stream, whatever ALLOY_DEVICE says (the GPU check sets cuda) */
    CHECK_OK(alloy_stream_default(cpu, &st));
    alloy_array *out = NULL, *res = NULL;
    CHECK_OK(alloy_array_new(cpu, ALLOY_UINT32, 1, &n, &out));
    CHECK_OK(alloy_array_fill(out, 0));
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output_array(l, out));
    CHECK_OK(alloy_launch_set_grid(l, (uint32_t)n, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 1, 1, 1));
    if (heavy) CHECK_OK(alloy_launch_set_constant_int(l, "iters", ALLOY_INT32, iters));
    CHECK_OK(alloy_kernel_apply(k, 0, NULL, l, st, &res));
    const uint32_t *o = out ? alloy_array_data(out) : NULL;
    int bad = 0;
    for (int64_t i = 0; o && i < n; i++)
        bad += o[i] != (heavy ? heavy_ref((uint32_t)i, iters) : (uint32_t)i * 3u + 1u);
    CHECK_MSG(o && bad == 0, "%s kernel: %d of %lld elements wrong", heavy ? "heavy" : "light", bad, (long long)n);
    alloy_array_free(res);
    alloy_array_free(out);
    alloy_launch_free(l);
}

static void test_inline_or_pool(void) {
    const char *dbg = getenv("ALLOY_CPU_DEBUG");
    if (dbg && *dbg && strcmp(dbg, "0") != 0) {
        SKIP("ALLOY_CPU_DEBUG runs every body on fibers, always on the pool");
        return;
    }
    if (alloy_cpu_pool_threads() < 2) {
        SKIP("the pool has one thread (one CPU or ALLOY_NUM_THREADS=1): every launch runs on the caller");
        return;
    }
    const char *names[1] = {"out"};
    alloy_kernel *heavy = NULL, *light = NULL;
    CHECK_OK(alloy_kernel_new("pool_heavy", 0, NULL, 1, names, heavy_body, NULL, 1, 0, &heavy));
    CHECK_OK(alloy_kernel_new("pool_light", 0, NULL, 1, names, light_body, NULL, 1, 0, &light));
    if (!heavy || !light) return;
    /* 16 threads of a million LCG steps (milliseconds each): the first launch on the caller, the next ones
     * on the pool; 8 threads of one store each stay on the caller (even under emulation) */
    size_t j0 = alloy_cpu_pool_jobs();
    launch(heavy, 1, 16, 1000000);
    CHECK_MSG(alloy_cpu_pool_jobs() == j0, "first heavy launch: %zu pool jobs, want 0", alloy_cpu_pool_jobs() - j0);
    launch(heavy, 1, 16, 1000000);
    launch(heavy, 1, 33, 1000000);
    CHECK_MSG(alloy_cpu_pool_jobs() == j0 + 2, "later heavy launches: %zu pool jobs, want 2",
              alloy_cpu_pool_jobs() - j0);
    j0 = alloy_cpu_pool_jobs();
    for (int r = 0; r < 3; r++) launch(light, 0, 8, 0);
    CHECK_MSG(alloy_cpu_pool_jobs() == j0, "light launches: %zu pool jobs, want 0", alloy_cpu_pool_jobs() - j0);
    alloy_kernel_free(heavy);
    alloy_kernel_free(light);
}

int main(void) {
    RUN(test_inline_or_pool);
    return harness_finish();
}
