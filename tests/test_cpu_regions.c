/* test_cpu_regions.c — bodies with barriers and SIMD-group functions on the
 * CPU's two paths: barrier regions as loops (src/dialect/regions.c) for
 * bodies whose barriers sit in group-uniform control flow, the fiber
 * scheduler for the others. Each body runs against a C simulation of its
 * GPU semantics (lockstep phases between barriers, returned threads out of
 * every later barrier and SIMD operation); integer-valued data keeps every
 * float result exact. The path each body takes is checked in its generated
 * source (not under ALLOY_CPU_DEBUG=1, which always uses fibers: the
 * _cpudebug twin runs the same bodies there). */
#include "kernel_util.h"

/* 1: regions as loops, 0: fibers, -1: the source could not be generated. */
static int loop_path(const ku_spec *s) {
    alloy_kernel *k = NULL;
    alloy_launch *l = NULL;
    alloy_device *cpu = NULL;
    char *src = NULL;
    int r = -1;
    if (alloy_device_get("cpu", &cpu) != ALLOY_OK) return -1;
    if (alloy_kernel_new(s->name, s->n_in, s->in_names, s->n_out, s->out_names, s->body, s->header, 1,
                         0, &k) != ALLOY_OK)
        return -1;
    if (alloy_launch_new(&l) == ALLOY_OK) {
        int ok = 1;
        for (int j = 0; j < s->n_out; j++)
            ok &= alloy_launch_add_output(l, 1, &s->out_n[j], s->out_dtype[j]) == ALLOY_OK;
        ok &= alloy_launch_set_grid(l, s->grid[0], s->grid[1] ? s->grid[1] : 1, 1) == ALLOY_OK;
        ok &= alloy_launch_set_threadgroup(l, s->tg[0], s->tg[1] ? s->tg[1] : 1, 1) == ALLOY_OK;
        if (ok && alloy_kernel_generated_source(k, s->n_in, s->in, l, cpu, &src) == ALLOY_OK && src)
            r = strstr(src, "void alloy_kernel_group(") != NULL &&
                strstr(src, "ALLOY_EXPORT_ void alloy_cpu_thread(") == NULL;
    }
    free(src);
    alloy_launch_free(l);
    alloy_kernel_free(k);
    return r;
}

static int debug_mode(void) {
    const char *d = getenv("ALLOY_CPU_DEBUG");
    return d && strcmp(d, "0") != 0 && *d;
}

static void check_path(const ku_spec *s, int want_loops) {
    if (debug_mode()) return;
    int p = loop_path(s);
    CHECK_MSG(p == want_loops, "kernel '%s': %s path expected, got %d", s->name,
              want_loops ? "loop" : "fiber", p);
}

/* ---- a tree reduction: a uniform loop whose variable changes in its header */

static const char *tree_body =
    "threadgroup float buf[64];\n"
    "uint t = thread_index_in_threadgroup;\n"
    "uint gid = thread_position_in_grid.x;\n"
    "uint n = threads_per_threadgroup.x;\n"
    "buf[t] = x[gid];\n"
    "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "for (uint s = 32; s > 0; s >>= 1) {\n"
    "    if (t < s && t + s < n) buf[t] += buf[t + s];\n"
    "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "}\n"
    "if (t == 0) out[threadgroup_position_in_grid.x] = buf[0];\n";

static void test_tree_reduction(void) {
    enum { N = 1000, TG = 64, G = (N + TG - 1) / TG };
    float x[N], out[G], ref[G];
    for (int i = 0; i < N; i++) x[i] = (float)((i * 37) % 101 - 50);
    for (int g = 0; g < G; g++) {
        float b[TG];
        int n = N - g * TG < TG ? N - g * TG : TG;
        for (int t = 0; t < n; t++) b[t] = x[g * TG + t];
        for (int s = 32; s > 0; s >>= 1)
            for (int t = 0; t < s; t++)
                if (t + s < n) b[t] += b[t + s];
        ref[g] = b[0];
    }
    ku_spec s = {0};
    s.name = "regions_tree";
    s.body = tree_body;
    s.n_in = 1;
    s.in_names[0] = "x";
    s.in[0] = ku_array(ALLOY_FLOAT32, N, x);
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = ALLOY_FLOAT32;
    s.out_n[0] = G;
    s.out_host[0] = out;
    s.grid[0] = N;
    s.tg[0] = TG;
    check_path(&s, 1);
    CHECK_OK(ku_run(&s));
    for (int g = 0; g < G; g++) CHECK_MSG(out[g] == ref[g], "group %d: %g, want %g", g, out[g], ref[g]);
    ku_free_inputs(&s);
}

/* ---- a later variable of an earlier block-local name ---------------------- */

/* `r` declared in a block of a region before the barrier loop and again in the loop, where it lives across
 * a barrier (kept per thread): the earlier region must not take the later variable's slots (declared only
 * with the loop's region) for its own `r` — it did, and with a statement first in the body (so that no slots
 * were declared before) the generated code did not compile. */
static const char *shadow_body =
    "alloy_wait_previous_kernel();\n"
    "constexpr int K = 2;\n"
    "threadgroup int tile[32];\n"
    "uint lid = thread_index_in_threadgroup;\n"
    "uint gid = thread_position_in_grid.x;\n"
    "int acc = 0;\n"
    "if constexpr (K > 1) {\n"
    "    const long r = long(gid) * 3;\n"
    "    acc += int(r);\n"
    "}\n"
    "for (int it = 0; it < K; it++) {\n"
    "    const int r = in[gid] + it;\n"
    "    tile[lid] = r;\n"
    "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "    acc += tile[(lid + 1) % 32] + r;\n"
    "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "}\n"
    "out[gid] = acc;\n";

static void test_shadowed_names(void) {
    enum { N = 96, TG = 32 };
    int32_t in[N], out[N], ref[N];
    for (int i = 0; i < N; i++) in[i] = (i * 29) % 61 - 30;
    for (int i = 0; i < N; i++) {
        const int g = i / TG, l = i % TG, nb = g * TG + (l + 1) % TG;
        ref[i] = i * 3;
        for (int it = 0; it < 2; it++) ref[i] += (in[nb] + it) + (in[i] + it);
    }
    ku_spec s = {0};
    s.name = "regions_shadow";
    s.body = shadow_body;
    s.n_in = 1;
    s.in_names[0] = "in";
    s.in[0] = ku_array(ALLOY_INT32, N, in);
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = ALLOY_INT32;
    s.out_n[0] = N;
    s.out_host[0] = out;
    s.grid[0] = N;
    s.tg[0] = TG;
    check_path(&s, 1);
    CHECK_OK(ku_run(&s));
    for (int i = 0; i < N; i++) CHECK_MSG(out[i] == ref[i], "out[%d] = %d, want %d", i, out[i], ref[i]);
    ku_free_inputs(&s);
}

/* ---- values live across barriers ------------------------------------------ */

/* Per-thread scalars, an array and a pointer kept across barriers; a `while`
 * and a `do` whose variables change in statements of their own; a uniform
 * `if` with a barrier in one branch; one thread returning early. */
static const char *live_body =
    "threadgroup int tile[32];\n"
    "uint lid = thread_index_in_threadgroup;\n"
    "uint gid = thread_position_in_grid.x;\n"
    "int acc = in[gid];\n"
    "int hist[3];\n"
    "hist[0] = 1; hist[1] = 2; hist[2] = 3;\n"
    "device int* o = out + gid * 4;\n"
    "tile[lid] = acc;\n"
    "if (gid == 37) { o[0] = -1; o[1] = -1; o[2] = -1; o[3] = -1; return; }\n"
    "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "uint step = 1;\n"
    "while (step < 32) {\n"
    "    int other = tile[(lid + step) % 32];\n"
    "    acc += other;\n"
    "    hist[step % 3] += other;\n"
    "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "    if (acc > 1000) acc -= 1000;\n"
    "    tile[lid] = acc;\n"
    "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "    step *= 2;\n"
    "}\n"
    "int rounds = 0;\n"
    "do {\n"
    "    rounds += 1;\n"
    "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "} while (rounds < 3);\n"
    "if (rounds == 3) {\n"
    "    acc += 7;\n"
    "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "} else {\n"
    "    acc -= 7;\n"
    "}\n"
    "o[0] = acc; o[1] = hist[0]; o[2] = hist[1]; o[3] = hist[2] + rounds;\n";

static void test_live_values(void) {
    enum { N = 64, TG = 32 };
    int32_t in[N], out[N * 4], ref[N * 4];
    for (int i = 0; i < N; i++) in[i] = (i * 13) % 29;
    for (int g = 0; g < N / TG; g++) {
        int tile[TG], acc[TG], hist[TG][3], dead[TG];
        for (int t = 0; t < TG; t++) {
            int gid = g * TG + t;
            acc[t] = in[gid];
            hist[t][0] = 1, hist[t][1] = 2, hist[t][2] = 3;
            tile[t] = acc[t];
            dead[t] = gid == 37;
        }
        for (int step = 1; step < 32; step *= 2) {
            int other[TG];
            for (int t = 0; t < TG; t++) other[t] = tile[(t + step) % 32];
            for (int t = 0; t < TG; t++) {
                if (dead[t]) continue;
                acc[t] += other[t];
                hist[t][step % 3] += other[t];
                if (acc[t] > 1000) acc[t] -= 1000;
                tile[t] = acc[t];
            }
        }
        for (int t = 0; t < TG; t++) {
            int *o = ref + (g * TG + t) * 4;
            if (dead[t]) {
                o[0] = o[1] = o[2] = o[3] = -1;
                continue;
            }
            o[0] = acc[t] + 7, o[1] = hist[t][0], o[2] = hist[t][1], o[3] = hist[t][2] + 3;
        }
    }
    ku_spec s = {0};
    s.name = "regions_live";
    s.body = live_body;
    s.n_in = 1;
    s.in_names[0] = "in";
    s.in[0] = ku_array(ALLOY_INT32, N, in);
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = ALLOY_INT32;
    s.out_n[0] = N * 4;
    s.out_host[0] = out;
    s.grid[0] = N;
    s.tg[0] = TG;
    check_path(&s, 1);
    CHECK_OK(ku_run(&s));
    for (int i = 0; i < N * 4; i++) CHECK_MSG(out[i] == ref[i], "out[%d] = %d, want %d", i, out[i], ref[i]);
    ku_free_inputs(&s);
}

/* ---- returns inside a uniform loop --------------------------------------------- */

/* Threads leave in different rounds of a loop with a barrier: a thread that
 * returned must not run the loop's regions again. */
static const char *leave_body = /* the loop's body is the only region */
    "for (int r = 0; r < 4; r++) {\n"
    "    if (int(thread_index_in_threadgroup % 4) == r) return;\n"
    "    out[thread_position_in_grid.x] += 1;\n"
    "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "}\n";

static void test_returns_in_loop(void) {
    enum { N = 128, TG = 64 };
    int32_t out[N];
    ku_spec s = {0};
    s.name = "regions_leave";
    s.body = leave_body;
    s.has_init = 1;
    s.init = 0;
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = ALLOY_INT32;
    s.out_n[0] = N;
    s.out_host[0] = out;
    s.grid[0] = N;
    s.tg[0] = TG;
    check_path(&s, 1);
    CHECK_OK(ku_run(&s));
    /* thread t runs rounds 0 .. t % 4 - 1, then leaves for good */
    for (int i = 0; i < N; i++) CHECK_MSG(out[i] == i % TG % 4, "out[%d] = %d, want %d", i, out[i], i % TG % 4);
}

/* ---- 2-D groups, partial at both edges --------------------------------------- */

static const char *rotate_body =
    "threadgroup float t[8][8];\n"
    "uint lx = thread_position_in_threadgroup.x, ly = thread_position_in_threadgroup.y;\n"
    "uint gx = thread_position_in_grid.x, gy = thread_position_in_grid.y;\n"
    "t[ly][lx] = x[gy * 37 + gx];\n"
    "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "uint w = threads_per_threadgroup.x, h = threads_per_threadgroup.y;\n"
    "out[gy * 37 + gx] = t[(ly + 1) % h][(lx + 1) % w];\n";

static void test_partial_2d(void) {
    enum { W = 37, H = 23 };
    float x[W * H], out[W * H], ref[W * H];
    for (int i = 0; i < W * H; i++) x[i] = (float)i;
    for (int gy = 0; gy < H; gy++)
        for (int gx = 0; gx < W; gx++) {
            int bx = gx / 8 * 8, by = gy / 8 * 8;
            int w = W - bx < 8 ? W - bx : 8, h = H - by < 8 ? H - by : 8;
            int rx = bx + (gx - bx + 1) % w, ry = by + (gy - by + 1) % h;
            ref[gy * W + gx] = x[ry * W + rx];
        }
    ku_spec s = {0};
    s.name = "regions_rotate";
    s.body = rotate_body;
    s.n_in = 1;
    s.in_names[0] = "x";
    s.in[0] = ku_array(ALLOY_FLOAT32, W * H, x);
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = ALLOY_FLOAT32;
    s.out_n[0] = W * H;
    s.out_host[0] = out;
    s.grid[0] = W;
    s.grid[1] = H;
    s.tg[0] = 8;
    s.tg[1] = 8;
    check_path(&s, 1);
    CHECK_OK(ku_run(&s));
    for (int i = 0; i < W * H; i++) CHECK_MSG(out[i] == ref[i], "out[%d] = %g, want %g", i, out[i], ref[i]);
    ku_free_inputs(&s);
}

/* ---- SIMD-group functions as region boundaries ----------------------------------- */

static const char *simd_body =
    "uint gid = thread_position_in_grid.x;\n"
    "if (keep[gid] == 0) return;\n"
    "float v = x[gid];\n"
    "float s = simd_sum(v);\n"
    "float pre = simd_prefix_exclusive_sum(v);\n"
    "float sh = simd_shuffle_xor(v, 1u);\n"
    "uint big = simd_any(v > 7.5f) ? 1u : 0u;\n"
    "float acc = 0.0f;\n"
    "for (int t = 0; t < 3; t++) acc += simd_sum(v * float(t + 1));\n"
    "out[gid * 5 + 0] = s; out[gid * 5 + 1] = pre; out[gid * 5 + 2] = sh;\n"
    "out[gid * 5 + 3] = float(big); out[gid * 5 + 4] = acc;\n";

static void test_simd_functions(void) {
    enum { N = 100, TG = 64 };
    float x[N], out[N * 5], ref[N * 5];
    uint32_t keep[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)((i * 5) % 11 - 3);
        keep[i] = i % 7 != 3;
    }
    for (int i = 0; i < N * 5; i++) ref[i] = -99.0f;
    for (int base = 0; base < N; base += 32) { /* TG is a multiple of 32 */
        int end = base + 32 < N ? base + 32 : N;
        float sum = 0, big = 0;
        for (int i = base; i < end; i++)
            if (keep[i]) sum += x[i], big = x[i] > 7.5f ? 1.0f : big;
        float pre = 0;
        for (int i = base; i < end; i++) {
            if (!keep[i]) continue;
            int partner = base + ((i - base) ^ 1);
            float *r = ref + i * 5;
            r[0] = sum;
            r[1] = pre;
            r[2] = partner < end && keep[partner] ? x[partner] : x[i];
            r[3] = big;
            r[4] = sum * 1 + sum * 2 + sum * 3;
            pre += x[i];
        }
    }
    ku_spec s = {0};
    s.name = "regions_simd";
    s.body = simd_body;
    s.n_in = 2;
    s.in_names[0] = "x";
    s.in[0] = ku_array(ALLOY_FLOAT32, N, x);
    s.in_names[1] = "keep";
    s.in[1] = ku_array(ALLOY_UINT32, N, keep);
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = ALLOY_FLOAT32;
    s.out_n[0] = N * 5;
    s.out_host[0] = out;
    s.grid[0] = N;
    s.tg[0] = TG;
    s.has_init = 1;
    s.init = -99.0;
    check_path(&s, 1);
    CHECK_OK(ku_run(&s));
    for (int i = 0; i < N * 5; i++) CHECK_MSG(out[i] == ref[i], "out[%d] = %g, want %g", i, out[i], ref[i]);
    ku_free_inputs(&s);
}

/* ---- bodies that keep the fiber path --------------------------------------------- */

/* A barrier under a condition that reads a buffer (not known to be uniform);
 * a loop whose bound is a per-thread value. Every thread still reaches
 * every barrier, so both run correctly on fibers. */
static const char *cond_body =
    "threadgroup float buf[64];\n"
    "uint t = thread_index_in_threadgroup;\n"
    "buf[t] = x[thread_position_in_grid.x];\n"
    "if (x[0] > -1e30f) { threadgroup_barrier(mem_flags::mem_threadgroup); }\n"
    "out[thread_position_in_grid.x] = buf[(t + 1) % 64];\n";
static const char *bound_body =
    "threadgroup float buf[64];\n"
    "uint t = thread_index_in_threadgroup;\n"
    "uint rounds = t / 64 + 2;\n" /* 2 for every thread, but per thread as written */
    "float acc = 0.0f;\n"
    "for (uint r = 0; r < rounds; r++) {\n"
    "    buf[t] = x[thread_position_in_grid.x] * float(r + 1);\n"
    "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "    acc += buf[(t + 1) % 64];\n"
    "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "}\n"
    "out[thread_position_in_grid.x] = acc;\n";

static void test_fiber_fallback(void) {
    enum { N = 128, TG = 64 };
    float x[N], out[N];
    for (int i = 0; i < N; i++) x[i] = (float)(i % 17);
    const char *bodies[2] = {cond_body, bound_body};
    const char *names[2] = {"regions_cond", "regions_bound"};
    for (int b = 0; b < 2; b++) {
        ku_spec s = {0};
        s.name = names[b];
        s.body = bodies[b];
        s.n_in = 1;
        s.in_names[0] = "x";
        s.in[0] = ku_array(ALLOY_FLOAT32, N, x);
        s.n_out = 1;
        s.out_names[0] = "out";
        s.out_dtype[0] = ALLOY_FLOAT32;
        s.out_n[0] = N;
        s.out_host[0] = out;
        s.grid[0] = N;
        s.tg[0] = TG;
        check_path(&s, 0);
        CHECK_OK(ku_run(&s));
        for (int i = 0; i < N; i++) {
            int g = i / TG * TG, t = i % TG;
            float nb = x[g + (t + 1) % TG];
            float want = b == 0 ? nb : nb * 1 + nb * 2;
            CHECK_MSG(out[i] == want, "%s: out[%d] = %g, want %g", names[b], i, out[i], want);
        }
        ku_free_inputs(&s);
    }
}

int main(void) {
    RUN(test_tree_reduction);
    RUN(test_live_values);
    RUN(test_shadowed_names);
    RUN(test_returns_in_loop);
    RUN(test_partial_2d);
    RUN(test_simd_functions);
    RUN(test_fiber_fallback);
    return harness_finish();
}
