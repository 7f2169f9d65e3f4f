/* test_kernel_api.c — spec §2 kernel-API semantics through the public API:
 * grid counts threads; threadgroup clamped to the grid; partial edge groups
 * in 1-D/2-D/3-D where out-of-grid threads never run (counted with an atomic
 * output) and threads_per_threadgroup is the actual size; every thread
 * attribute vs the formulas of the dialect contract; template int/bool/dtype;
 * `<in>_shape/_strides/_ndim` only on a token match; 0-d inputs as values;
 * atomic_outputs and init_value; ensure_row_contiguous on and off; verbose;
 * zero-size grids; the one-time "grid counts threads" warning;
 * caller-provided outputs written in place; streams; concurrent launches;
 * launches that overlap the previous kernel (alloy_launch_set_overlap);
 * launch constants (by value, not part of the compiled specialisation). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "kernel_util.h"
#include "core/program_cache.h"

#include <pthread.h>
#include <unistd.h>

/* ---- the one-time warning (must run first: it is process-wide) ---------- */

static int warn_count;
static char warn_text[512];
static void count_warning(const char *message, void *user) {
    (void)user;
    if (strstr(message, "grid") || strstr(message, "thread")) {
        warn_count++;
        snprintf(warn_text, sizeof warn_text, "%s", message);
    }
}

static void test_grid_warning_once(void) {
    alloy_set_warning_handler(count_warning, NULL);
    float x[4] = {1, 2, 3, 4}, got[4];
    for (int rep = 0; rep < 3; rep++)
        CHECK_OK(ku_run_1in1out("warn_once", "uint i = thread_position_in_grid.x;\n"
                                "out[i] = in[i] * 2.0f;\n", NULL, ALLOY_FLOAT32, 4, x,
                                ALLOY_FLOAT32, 4, got, 4, 32, NAN));
    CHECK_MSG(warn_count == 1, "grid < threadgroup warned %d times (want once): %s", warn_count,
              warn_text);
    /* the body still ran over exactly the 4 threads */
    for (int i = 0; i < 4; i++) CHECK(got[i] == 2 * x[i]);
    /* no warning when grid >= threadgroup */
    int before = warn_count;
    float y[64] = {0}, gy[64];
    CHECK_OK(ku_run_1in1out("warn_none", "out[thread_position_in_grid.x] = 1.0f;\n", NULL,
                            ALLOY_FLOAT32, 64, y, ALLOY_FLOAT32, 64, gy, 64, 32, NAN));
    CHECK(warn_count == before);
    alloy_set_warning_handler(NULL, NULL);
}

/* ---- executions: every in-grid thread exactly once, none outside -------- */

static void run_count(const char *label, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t tx,
                      uint32_t ty, uint32_t tz) {
    int64_t n = (int64_t)gx * gy * gz;
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "count_runs";
    s.body = "uint3 p = thread_position_in_grid;\n"
             "bool inside = p.x < uint(GX) && p.y < uint(GY) && p.z < uint(GZ);\n"
             "uint gid = inside ? p.x + p.y * uint(GX) + p.z * uint(GX) * uint(GY)\n"
             "                  : uint(GX) * uint(GY) * uint(GZ);\n"
             "atomic_fetch_add_explicit(&cnt[gid], 1u, memory_order_relaxed);\n"
             "uint3 t = threads_per_threadgroup;\n"
             "atomic_fetch_add_explicit(&sizes[gid], t.x + 1000u * t.y + 1000000u * t.z,\n"
             "                          memory_order_relaxed);\n";
    float dummy = 0;
    s.n_in = 1;
    s.in_names[0] = "d";
    s.in[0] = ku_array(ALLOY_FLOAT32, 1, &dummy);
    s.n_out = 2;
    s.out_names[0] = "cnt";
    s.out_names[1] = "sizes";
    s.out_dtype[0] = s.out_dtype[1] = ALLOY_UINT32;
    s.out_n[0] = s.out_n[1] = n + 1;
    uint32_t *cnt = malloc((size_t)(n + 1) * 4), *sizes = malloc((size_t)(n + 1) * 4);
    s.out_host[0] = cnt;
    s.out_host[1] = sizes;
    s.grid[0] = gx; s.grid[1] = gy; s.grid[2] = gz;
    s.tg[0] = tx; s.tg[1] = ty; s.tg[2] = tz;
    s.atomic_outputs = 1;
    s.has_init = 1;
    s.init = 0;
    s.n_tmpl = 3;
    const char *tn[3] = {"GX", "GY", "GZ"};
    uint32_t tv[3] = {gx, gy, gz};
    for (int t = 0; t < 3; t++) {
        s.tmpl[t].name = tn[t];
        s.tmpl[t].kind = 0;
        s.tmpl[t].ivalue = tv[t];
    }
    alloy_status st = ku_run(&s);
    ku_free_inputs(&s);
    CHECK_MSG(st == ALLOY_OK, "%s: %s", label, alloy_last_error());
    uint32_t cx = tx < gx ? tx : gx, cy = ty < gy ? ty : gy, cz = tz < gz ? tz : gz;
    int bad = 0;
    for (uint32_t z = 0; z < gz; z++)
        for (uint32_t y = 0; y < gy; y++)
            for (uint32_t x = 0; x < gx; x++) {
                int64_t g = x + (int64_t)y * gx + (int64_t)z * gx * gy;
                uint32_t ax = (x / cx + 1) * cx <= gx ? cx : gx - x / cx * cx;
                uint32_t ay = (y / cy + 1) * cy <= gy ? cy : gy - y / cy * cy;
                uint32_t az = (z / cz + 1) * cz <= gz ? cz : gz - z / cz * cz;
                uint32_t want = ax + 1000u * ay + 1000000u * az;
                if (cnt[g] != 1 || sizes[g] != want) {
                    if (bad < 5)
                        fprintf(stderr, "  %s (%u,%u,%u): ran %u times, size code %u want %u\n",
                                label, x, y, z, cnt[g], sizes[g], want);
                    bad++;
                }
            }
    CHECK_MSG(bad == 0, "%s: %d threads wrong", label, bad);
    CHECK_MSG(cnt[n] == 0, "%s: %u threads outside the grid ran", label, cnt[n]);
    free(cnt); free(sizes);
}

static void test_grid_counts_threads(void) { run_count("1-D 1000/256", 1000, 1, 1, 256, 1, 1); }
static void test_threadgroup_clamped(void) { run_count("1-D 10/256", 10, 1, 1, 256, 1, 1); }
static void test_partial_2d(void) { run_count("2-D 37x19/8x8", 37, 19, 1, 8, 8, 1); }
static void test_partial_3d(void) { run_count("3-D 13x7x5/4x4x4", 13, 7, 5, 4, 4, 4); }
static void test_clamp_3d(void) { run_count("3-D 3x50x2/32x4x8", 3, 50, 2, 32, 4, 8); }

/* ---- every attribute vs the formulas ------------------------------------ */

#define KA 38
static const char *attr_body =
    "uint3 p = thread_position_in_grid;\n"
    "uint gid = p.x + p.y * threads_per_grid.x + p.z * threads_per_grid.x * threads_per_grid.y;\n"
    "device uint* o = out + 38 * gid;\n"
    "uint3 v[9] = {thread_position_in_grid, thread_position_in_threadgroup,\n"
    "              threadgroup_position_in_grid, threads_per_threadgroup,\n"
    "              dispatch_threads_per_threadgroup, threads_per_grid, threadgroups_per_grid,\n"
    "              grid_size, grid_origin};\n"
    "for (int k = 0; k < 9; k++) { o[3*k] = v[k].x; o[3*k+1] = v[k].y; o[3*k+2] = v[k].z; }\n"
    "o[27] = thread_index_in_threadgroup;\n"
    "o[28] = thread_index_in_simdgroup;\n"
    "o[29] = simdgroup_index_in_threadgroup;\n"
    "o[30] = threads_per_simdgroup;\n"
    "o[31] = thread_execution_width;\n"
    "o[32] = thread_index_in_quadgroup;\n"
    "o[33] = quadgroup_index_in_threadgroup;\n"
    "o[34] = simdgroups_per_threadgroup;\n"
    "o[35] = quadgroups_per_threadgroup;\n"
    "o[36] = dispatch_simdgroups_per_threadgroup;\n"
    "o[37] = dispatch_quadgroups_per_threadgroup;\n";

static void run_attributes(const char *label, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t tx,
                           uint32_t ty, uint32_t tz) {
    int64_t n = (int64_t)gx * gy * gz;
    uint32_t *got = malloc((size_t)n * KA * 4);
    float dummy = 0;
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "attributes";
    s.body = attr_body;
    s.n_in = 1;
    s.in_names[0] = "d";
    s.in[0] = ku_array(ALLOY_FLOAT32, 1, &dummy);
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = ALLOY_UINT32;
    s.out_n[0] = n * KA;
    s.out_host[0] = got;
    s.grid[0] = gx; s.grid[1] = gy; s.grid[2] = gz;
    s.tg[0] = tx; s.tg[1] = ty; s.tg[2] = tz;
    s.has_init = 1;
    s.init = 4000000000.0;
    alloy_status st = ku_run(&s);
    ku_free_inputs(&s);
    CHECK_MSG(st == ALLOY_OK, "%s: %s", label, alloy_last_error());
    uint32_t g[3] = {gx, gy, gz}, t[3] = {tx, ty, tz}, c[3], ng[3];
    for (int d = 0; d < 3; d++) {
        c[d] = t[d] < g[d] ? t[d] : g[d];
        ng[d] = (g[d] + c[d] - 1) / c[d];
    }
    uint32_t ctot = c[0] * c[1] * c[2];
    static const char *names[KA] = {
        "tpig.x", "tpig.y", "tpig.z", "tpitg.x", "tpitg.y", "tpitg.z", "tgpig.x", "tgpig.y",
        "tgpig.z", "tptg.x", "tptg.y", "tptg.z", "dtptg.x", "dtptg.y", "dtptg.z", "tpg.x",
        "tpg.y", "tpg.z", "tgpg.x", "tgpg.y", "tgpg.z", "grid_size.x", "grid_size.y",
        "grid_size.z", "grid_origin.x", "grid_origin.y", "grid_origin.z", "tiitg", "tiisg",
        "sgitg", "threads_per_simdgroup", "thread_execution_width", "tiiqg", "qgitg",
        "simdgroups_per_tg", "quadgroups_per_tg", "dispatch_simdgroups", "dispatch_quadgroups"};
    int bad = 0;
    for (uint32_t z = 0; z < gz; z++)
        for (uint32_t y = 0; y < gy; y++)
            for (uint32_t x = 0; x < gx; x++) {
                uint32_t pp[3] = {x, y, z}, l[3], b[3], a[3];
                int full = 1;
                for (int d = 0; d < 3; d++) {
                    b[d] = pp[d] / c[d];
                    l[d] = pp[d] % c[d];
                    a[d] = (b[d] + 1) * c[d] <= g[d] ? c[d] : g[d] - b[d] * c[d];
                    if (a[d] != c[d]) full = 0;
                }
                uint32_t r[KA];
                for (int d = 0; d < 3; d++) {
                    r[d] = pp[d]; r[3 + d] = l[d]; r[6 + d] = b[d]; r[9 + d] = a[d];
                    r[12 + d] = c[d]; r[15 + d] = g[d]; r[18 + d] = ng[d]; r[21 + d] = g[d];
                    r[24 + d] = 0;
                }
                uint32_t ti = l[0] + l[1] * c[0] + l[2] * c[0] * c[1];
                r[27] = ti; r[28] = ti % 32; r[29] = ti / 32; r[30] = 32; r[31] = 32;
                r[32] = ti % 4; r[33] = ti / 4;
                r[34] = (ctot + 31) / 32; r[35] = (ctot + 3) / 4;
                r[36] = (ctot + 31) / 32; r[37] = (ctot + 3) / 4;
                int64_t gid = x + (int64_t)y * gx + (int64_t)z * gx * gy;
                const uint32_t *o = got + gid * KA;
                for (int k = 0; k < KA; k++) {
                    /* simdgroups/quadgroups per threadgroup are only pinned down for
                     * full groups (edge groups have fewer live threads) */
                    if (!full && (k == 34 || k == 35)) continue;
                    if (o[k] != r[k]) {
                        if (bad < 8)
                            fprintf(stderr, "  %s thread (%u,%u,%u): %s = %u, want %u\n", label, x,
                                    y, z, names[k], o[k], r[k]);
                        bad++;
                    }
                }
            }
    CHECK_MSG(bad == 0, "%s: %d attribute values wrong", label, bad);
    free(got);
}

static void test_attributes_1d(void) { run_attributes("attrs 1-D 100/64", 100, 1, 1, 64, 1, 1); }
static void test_attributes_2d(void) { run_attributes("attrs 2-D 20x9/16x4", 20, 9, 1, 16, 4, 1); }
static void test_attributes_3d(void) {
    run_attributes("attrs 3-D 9x5x7/4x2x3", 9, 5, 7, 4, 2, 3);
}

/* ---- templates ------------------------------------------------------------ */

static void run_template(alloy_dtype T, int64_t N, int B, const float *x, int n) {
    uint16_t h[16];
    float f[16];
    int32_t iv[16];
    void *host = T == ALLOY_FLOAT16 ? (void *)h : T == ALLOY_INT32 ? (void *)iv : (void *)f;
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "templated";
    s.body = "uint i = thread_position_in_grid.x;\n"
             "T v = T(x[i]) * T(N);\n"
             "if (B) v = v + T(1);\n"
             "out[i] = v;\n";
    s.n_in = 1;
    s.in_names[0] = "x";
    s.in[0] = ku_array(ALLOY_FLOAT32, n, x);
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = T;
    s.out_n[0] = n;
    s.out_host[0] = host;
    s.grid[0] = (uint32_t)n;
    s.tg[0] = 4;
    s.n_tmpl = 3;
    s.tmpl[0].name = "T"; s.tmpl[0].kind = 2; s.tmpl[0].dvalue = T;
    s.tmpl[1].name = "N"; s.tmpl[1].kind = 0; s.tmpl[1].ivalue = N;
    s.tmpl[2].name = "B"; s.tmpl[2].kind = 1; s.tmpl[2].ivalue = B;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    for (int i = 0; i < n; i++) {
        double want = x[i] * (double)N + (B ? 1 : 0);
        double got = T == ALLOY_FLOAT16 ? ku_f16_value(h[i]) : T == ALLOY_INT32 ? iv[i] : f[i];
        CHECK_MSG(got == want, "T=%s N=%lld B=%d: out[%d] = %g, want %g", alloy_dtype_name(T),
                  (long long)N, B, i, got, want);
    }
}

static void test_templates(void) {
    float x[13];
    for (int i = 0; i < 13; i++) x[i] = (float)(i - 6);
    run_template(ALLOY_FLOAT32, 3, 1, x, 13);
    run_template(ALLOY_FLOAT32, 5, 0, x, 13); /* same kernel, other values: recompiled */
    run_template(ALLOY_FLOAT16, -7, 1, x, 13);
    run_template(ALLOY_INT32, 1000000, 0, x, 13);
}

/* Template ints as array sizes (threadgroup arrays), header templates,
 * METAL_FUNC, #define, the ALLOY_BACKEND_* macros, and int templates as
 * ALLOY_TEMPLATE_* macros in the header. */
static void test_templates_in_declarations(void) {
    const int n = 96;
    float x[96];
    for (int i = 0; i < n; i++) x[i] = (float)(i % 9);
    const char *header =
        "#define SCALE 2.0f\n"
        "#if ALLOY_TEMPLATE_TG == 32 && ALLOY_TEMPLATE_TG * 2 > 63\n"
        "#define BONUS 0.5f\n"
        "#else\n"
        "#define BONUS 0.0f\n"
        "#endif\n"
        "template <typename U> METAL_FUNC U twice(U v) { return v * U(2); }\n";
    const char *body =
        "uint l = thread_position_in_threadgroup.x;\n"
        "uint i = thread_position_in_grid.x;\n"
        "threadgroup T buf[TG];\n"
        "buf[l] = T(x[i]);\n"
        "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "T s = T(0);\n"
        "for (int k = 0; k < TG; k++) s += buf[k];\n"
        "int backend = 0;\n"
        "#ifdef ALLOY_BACKEND_CPU\n"
        "backend += 1;\n"
        "#endif\n"
        "#ifdef ALLOY_BACKEND_CUDA\n"
        "backend += 2;\n"
        "#endif\n"
        "out[i] = float(twice(s)) * SCALE + float(backend) * 1000.0f + BONUS;\n";
    float got[96];
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "templates_decl";
    s.body = body;
    s.header = header;
    s.n_in = 1;
    s.in_names[0] = "x";
    s.in[0] = ku_array(ALLOY_FLOAT32, n, x);
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = ALLOY_FLOAT32;
    s.out_n[0] = n;
    s.out_host[0] = got;
    s.grid[0] = (uint32_t)n;
    s.tg[0] = 32;
    s.has_init = 1;
    s.init = NAN;
    s.n_tmpl = 2;
    s.tmpl[0].name = "TG"; s.tmpl[0].kind = 0; s.tmpl[0].ivalue = 32;
    s.tmpl[1].name = "T"; s.tmpl[1].kind = 2; s.tmpl[1].dvalue = ALLOY_FLOAT32;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    double backend = alloy_device_backend(ku_device()) == ALLOY_BACKEND_CPU ? 1 : 2;
    double ref[96];
    for (int i = 0; i < n; i++) {
        double sum = 0;
        for (int k = 0; k < 32; k++) sum += x[(i / 32) * 32 + k];
        ref[i] = sum * 2 * 2 + backend * 1000 + 0.5;
    }
    CHECK(ku_cmp_f32("templates in declarations", got, ref, n, 0, 0) == 0);
}

/* ---- shapes, strides, ndim; token match; 0-d inputs ------------------------ */

static int mentions_token(const char *src, const char *tok) {
    size_t n = strlen(tok);
    for (const char *p = strstr(src, tok); p; p = strstr(p + 1, tok)) {
        char before = p == src ? ' ' : p[-1], after = p[n];
        int idb = before == '_' || (before >= 'a' && before <= 'z') ||
                  (before >= 'A' && before <= 'Z') || (before >= '0' && before <= '9');
        int ida = after == '_' || (after >= 'a' && after <= 'z') ||
                  (after >= 'A' && after <= 'Z') || (after >= '0' && after <= '9');
        if (!idb && !ida) return 1;
    }
    return 0;
}

static void test_shape_token_match(void) {
    float x[15];
    for (int i = 0; i < 15; i++) x[i] = (float)i;
    int64_t shape[2] = {3, 5};
    /* body mentions max_shape (contains "x_shape" as a substring only) */
    const char *body = "uint i = thread_position_in_grid.x;\n"
                       "int max_shape = 4;\n"
                       "out[i] = x[i] + float(max_shape);\n";
    alloy_kernel *k = NULL;
    const char *in_names[] = {"x"}, *out_names[] = {"out"};
    CHECK_OK(alloy_kernel_new("token_match", 1, in_names, 1, out_names, body, NULL, 1, 0, &k));
    alloy_array *in = ku_array_nd(ALLOY_FLOAT32, 2, shape, x);
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    int64_t n = 15;
    CHECK_OK(alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_grid(l, 15, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 8, 1, 1));
    char *src = NULL;
    CHECK_OK(alloy_kernel_generated_source(k, 1, &in, l, NULL, &src));
    if (src) {
        CHECK_MSG(!mentions_token(src, "x_shape"), "x_shape generated for a body that only "
                                                   "mentions max_shape");
        CHECK(!mentions_token(src, "x_strides") && !mentions_token(src, "x_ndim"));
        CHECK(strstr(src, "max_shape") != NULL);
        free(src);
    }
    alloy_array *out = NULL;
    CHECK_OK(alloy_kernel_apply(k, 1, &in, l, NULL, &out));
    float got[15] = {0};
    if (out) CHECK_OK(alloy_array_copy_to_host(out, got, sizeof got));
    for (int i = 0; i < 15; i++) CHECK(got[i] == x[i] + 4);
    alloy_array_free(out);
    alloy_array_free(in);
    alloy_launch_free(l);
    alloy_kernel_free(k);

    /* the real names: shape (int), strides (int64, elements), ndim */
    const char *body2 = "uint i = thread_position_in_grid.x;\n"
                        "if (i == 0) {\n"
                        "  out[0] = x_shape[0]; out[1] = x_shape[1];\n"
                        "  out[2] = int(x_strides[0]); out[3] = int(x_strides[1]); out[4] = x_ndim;\n"
                        "  out[5] = int(sizeof(x_strides[0])); out[6] = int(sizeof(x_shape[0]));\n"
                        "}\n";
    int32_t got2[7];
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "shape_strides";
    s.body = body2;
    s.n_in = 1;
    s.in_names[0] = "x";
    s.in[0] = ku_array_nd(ALLOY_FLOAT32, 2, shape, x);
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = ALLOY_INT32;
    s.out_n[0] = 7;
    s.out_host[0] = got2;
    s.grid[0] = 1;
    s.tg[0] = 1;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    int32_t ref2[7] = {3, 5, 5, 1, 2, 8, 4};
    CHECK(ku_cmp_i32("shape/strides/ndim", got2, ref2, 7) == 0);
}

static void test_scalar_inputs(void) {
    const int n = 21;
    float a[21];
    for (int i = 0; i < n; i++) a[i] = (float)i * 0.25f;
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "scalar_inputs";
    s.body = "uint i = thread_position_in_grid.x;\n"
             "out[i] = a[i] * s + float(k) + (flag ? 100.0f : 0.0f) + float(h);\n";
    s.n_in = 5;
    s.in_names[0] = "a";
    s.in_names[1] = "s";
    s.in_names[2] = "k";
    s.in_names[3] = "flag";
    s.in_names[4] = "h";
    s.in[0] = ku_array(ALLOY_FLOAT32, n, a);
    CHECK_OK(alloy_array_scalar(ku_device(), ALLOY_FLOAT32, 2.5, &s.in[1]));
    CHECK_OK(alloy_array_scalar(ku_device(), ALLOY_INT32, -7, &s.in[2]));
    CHECK_OK(alloy_array_scalar(ku_device(), ALLOY_BOOL, 1, &s.in[3]));
    CHECK_OK(alloy_array_scalar(ku_device(), ALLOY_FLOAT16, 0.5, &s.in[4]));
    float got[21];
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = ALLOY_FLOAT32;
    s.out_n[0] = n;
    s.out_host[0] = got;
    s.grid[0] = n;
    s.tg[0] = 8;
    s.has_init = 1;
    s.init = NAN;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    double ref[21];
    for (int i = 0; i < n; i++) ref[i] = a[i] * 2.5 - 7 + 100 + 0.5;
    CHECK(ku_cmp_f32("0-d inputs", got, ref, n, 0, 0) == 0);
}

/* ---- atomic outputs with an init value ------------------------------------ */

static void test_atomic_outputs_init(void) {
    const int n = 999;
    int32_t v[999];
    for (int i = 0; i < n; i++) v[i] = i % 10;
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "atomic_init";
    s.body = "uint i = thread_position_in_grid.x;\n"
             "atomic_fetch_add_explicit(&out[v[i]], 1, memory_order_relaxed);\n";
    s.n_in = 1;
    s.in_names[0] = "v";
    s.in[0] = ku_array(ALLOY_INT32, n, v);
    int32_t got[10];
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = ALLOY_INT32;
    s.out_n[0] = 10;
    s.out_host[0] = got;
    s.grid[0] = n;
    s.tg[0] = 64;
    s.atomic_outputs = 1;
    s.has_init = 1;
    s.init = 5;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    for (int b = 0; b < 10; b++) CHECK_MSG(got[b] == 5 + 100 - (b == 9), "bin %d = %d", b, got[b]);
}

/* init_value converted to each output dtype; unwritten elements keep it. */
static void test_init_value_dtypes(void) {
    const alloy_dtype dts[] = {ALLOY_FLOAT32, ALLOY_FLOAT16, ALLOY_BFLOAT16, ALLOY_INT32,
                               ALLOY_UINT8, ALLOY_INT64, ALLOY_FLOAT64};
    const int nd = (int)(sizeof dts / sizeof dts[0]);
    for (int d = 0; d < nd; d++) {
        unsigned char buf[8 * 10];
        float dummy = 0;
        CHECK_OK(ku_run_1in1out("init_value", "uint i = thread_position_in_grid.x;\n"
                                "if (i % 2 == 0) out[i] = 0;\n", NULL, ALLOY_FLOAT32, 1, &dummy,
                                dts[d], 10, buf, 10, 4, 7));
        for (int i = 0; i < 10; i++) {
            double v;
            const unsigned char *p = buf + i * alloy_dtype_size(dts[d]);
            switch (dts[d]) {
            case ALLOY_FLOAT32: { float f; memcpy(&f, p, 4); v = f; break; }
            case ALLOY_FLOAT16: { uint16_t b; memcpy(&b, p, 2); v = ku_f16_value(b); break; }
            case ALLOY_BFLOAT16: { uint16_t b; memcpy(&b, p, 2); v = ku_bf16_value(b); break; }
            case ALLOY_INT32: { int32_t q; memcpy(&q, p, 4); v = q; break; }
            case ALLOY_UINT8: v = p[0]; break;
            case ALLOY_INT64: { int64_t q; memcpy(&q, p, 8); v = (double)q; break; }
            default: { double q; memcpy(&q, p, 8); v = q; break; }
            }
            CHECK_MSG(v == (i % 2 ? 7 : 0), "%s out[%d] = %g", alloy_dtype_name(dts[d]), i, v);
        }
    }
}

/* ---- ensure_row_contiguous ------------------------------------------------ */

static void test_row_contiguous(void) {
    /* a (4, 6) transposed view of a 6x4 buffer (strides 1, 4), offset 0 */
    float buf[24];
    for (int i = 0; i < 24; i++) buf[i] = (float)(i * 3 + 1);
    int64_t shape[2] = {4, 6}, strides[2] = {1, 4};
    double rowmajor[24], raw[24];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 6; c++) rowmajor[r * 6 + c] = buf[r + c * 4];
    for (int i = 0; i < 24; i++) raw[i] = buf[i];
    for (int mode = 0; mode < 3; mode++) {
        alloy_array *v = NULL;
        CHECK_OK(ku_view_of_host(buf, 24, ALLOY_FLOAT32, 2, shape, strides, 0, &v));
        if (!v) return;
        CHECK(!alloy_array_is_row_contiguous(v));
        ku_spec s;
        memset(&s, 0, sizeof s);
        s.name = "row_contiguous";
        /* mode 0: copied, plain indexing sees row-major; mode 1: passed as is,
         * plain indexing sees the buffer; mode 2: as is, indexing via strides */
        s.body = mode < 2 ? "uint i = thread_position_in_grid.x;\nout[i] = x[i];\n"
                          : "uint i = thread_position_in_grid.x;\n"
                            "out[i] = x[(i / 6) * x_strides[0] + (i % 6) * x_strides[1]];\n";
        s.not_row_contiguous = mode > 0;
        s.n_in = 1;
        s.in_names[0] = "x";
        s.in[0] = v;
        float got[24];
        s.n_out = 1;
        s.out_names[0] = "out";
        s.out_dtype[0] = ALLOY_FLOAT32;
        s.out_n[0] = 24;
        s.out_host[0] = got;
        s.grid[0] = 24;
        s.tg[0] = 8;
        s.has_init = 1;
        s.init = NAN;
        CHECK_OK(ku_run(&s));
        ku_free_inputs(&s);
        const char *what[3] = {"ensure_row_contiguous=1", "ensure_row_contiguous=0 raw",
                               "ensure_row_contiguous=0 strides"};
        CHECK(ku_cmp_f32(what[mode], got, mode == 1 ? raw : rowmajor, 24, 0, 0) == 0);
    }
    /* an offset view, row-contiguous after the offset: passed with the offset */
    alloy_array *v = NULL;
    int64_t n = 10;
    CHECK_OK(ku_view_of_host(buf, 24, ALLOY_FLOAT32, 1, &n, NULL, 5, &v));
    float got[10];
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "offset_view";
    s.body = "uint i = thread_position_in_grid.x;\nout[i] = x[i];\n";
    s.n_in = 1;
    s.in_names[0] = "x";
    s.in[0] = v;
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = ALLOY_FLOAT32;
    s.out_n[0] = 10;
    s.out_host[0] = got;
    s.grid[0] = 10;
    s.tg[0] = 4;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    for (int i = 0; i < 10; i++) CHECK(got[i] == buf[5 + i]);
}

/* ---- verbose prints the generated source to stdout ------------------------ */

static void test_verbose(void) {
    fflush(stdout);
    FILE *tmp = tmpfile();
    if (!tmp) { SKIP("no tmpfile"); return; }
    int saved = dup(1);
    dup2(fileno(tmp), 1);
    alloy_kernel *k = NULL;
    const char *in_names[] = {"x"}, *out_names[] = {"out"};
    alloy_status st = alloy_kernel_new("verbose_kernel", 1, in_names, 1, out_names,
                                       "float verbose_marker_q7 = 2.0f;\n"
                                       "out[thread_position_in_grid.x] = x[0] * verbose_marker_q7;\n",
                                       NULL, 1, 0, &k);
    alloy_launch *l = NULL;
    alloy_launch_new(&l);
    int64_t n = 3;
    alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32);
    alloy_launch_set_grid(l, 3, 1, 1);
    alloy_launch_set_threadgroup(l, 3, 1, 1);
    alloy_launch_set_verbose(l, 1);
    float one = 1.5f;
    alloy_array *in = ku_array(ALLOY_FLOAT32, 1, &one), *out = NULL;
    alloy_status st2 = st == ALLOY_OK ? alloy_kernel_apply(k, 1, &in, l, NULL, &out) : st;
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    CHECK_MSG(st == ALLOY_OK && st2 == ALLOY_OK, "%s", alloy_last_error());
    fseek(tmp, 0, SEEK_END);
    long size = ftell(tmp);
    rewind(tmp);
    char *text = malloc((size_t)size + 1);
    size_t len = fread(text, 1, (size_t)size, tmp);
    text[len] = 0;
    fclose(tmp);
    CHECK_MSG(strstr(text, "verbose_marker_q7") != NULL, "verbose printed %zu bytes without the body",
              len);
    free(text);
    float got[3] = {0};
    if (out) alloy_array_copy_to_host(out, got, sizeof got);
    CHECK(got[0] == 3.0f && got[2] == 3.0f);
    alloy_array_free(in);
    alloy_array_free(out);
    alloy_launch_free(l);
    alloy_kernel_free(k);
}

/* ---- zero-size grids ------------------------------------------------------- */

static void test_zero_grid(void) {
    const uint32_t grids[3][3] = {{0, 1, 1}, {5, 0, 2}, {4, 4, 0}};
    for (int g = 0; g < 3; g++) {
        alloy_kernel *k = NULL;
        const char *in_names[] = {"x"}, *out_names[] = {"out"};
        CHECK_OK(alloy_kernel_new("zero_grid", 1, in_names, 1, out_names,
                                  "out[thread_position_in_grid.x] = 99.0f;\n", NULL, 1, 0, &k));
        int64_t n = 8;
        alloy_array *out = NULL;
        CHECK_OK(alloy_array_new(ku_device(), ALLOY_FLOAT32, 1, &n, &out));
        if (!out) return;
        CHECK_OK(alloy_array_fill(out, 3));
        alloy_launch *l = NULL;
        CHECK_OK(alloy_launch_new(&l));
        CHECK_OK(alloy_launch_add_output_array(l, out));
        CHECK_OK(alloy_launch_set_grid(l, grids[g][0], grids[g][1], grids[g][2]));
        CHECK_OK(alloy_launch_set_threadgroup(l, 4, 1, 1));
        float one = 1;
        alloy_array *in = ku_array(ALLOY_FLOAT32, 1, &one), *res = NULL;
        CHECK_OK(alloy_kernel_apply(k, 1, &in, l, NULL, &res));
        float got[8];
        CHECK_OK(alloy_array_copy_to_host(out, got, sizeof got));
        for (int i = 0; i < 8; i++)
            CHECK_MSG(got[i] == 3.0f, "grid %u,%u,%u ran the body", grids[g][0], grids[g][1],
                      grids[g][2]);
        alloy_array_free(res);
        alloy_array_free(in);
        alloy_array_free(out);
        alloy_launch_free(l);
        alloy_kernel_free(k);
    }
}

/* ---- caller-provided outputs ---------------------------------------------- */

static void test_caller_outputs(void) {
    int64_t shape[2] = {4, 5}, n = 7;
    alloy_array *mine = NULL;
    CHECK_OK(alloy_array_new(ku_device(), ALLOY_INT32, 2, shape, &mine));
    if (!mine) return;
    CHECK_OK(alloy_array_fill(mine, -1));
    void *data_before = alloy_array_data(mine);
    alloy_kernel *k = NULL;
    const char *in_names[] = {"x"}, *out_names[] = {"a", "b"};
    CHECK_OK(alloy_kernel_new("caller_outputs", 1, in_names, 2, out_names,
                              "uint i = thread_position_in_grid.x;\n"
                              "if (i < 10) a[i] = int(i) * 2 + int(x[0]);\n"
                              "if (i < 7) b[i] = float(i) + 0.5f;\n",
                              NULL, 1, 0, &k));
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output_array(l, mine));
    CHECK_OK(alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_grid(l, 20, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 8, 1, 1));
    float one = 100;
    alloy_array *in = ku_array(ALLOY_FLOAT32, 1, &one), *outs[2] = {0};
    CHECK_OK(alloy_kernel_apply(k, 1, &in, l, NULL, outs));
    CHECK(outs[0] == mine);
    CHECK(alloy_array_data(mine) == data_before);
    int32_t got[20];
    CHECK_OK(alloy_array_copy_to_host(mine, got, sizeof got));
    for (int i = 0; i < 20; i++) CHECK_MSG(got[i] == (i < 10 ? 2 * i + 100 : -1), "a[%d] = %d", i, got[i]);
    float gb[7] = {0};
    if (outs[1]) {
        CHECK(alloy_array_dtype(outs[1]) == ALLOY_FLOAT32 && alloy_array_size(outs[1]) == 7);
        CHECK_OK(alloy_array_copy_to_host(outs[1], gb, sizeof gb));
    }
    for (int i = 0; i < 7; i++) CHECK(gb[i] == i + 0.5f);
    alloy_array_free(outs[0]);
    alloy_array_free(outs[1]);
    alloy_array_free(in);
    alloy_launch_free(l);
    alloy_kernel_free(k);
    /* the caller's reference is still valid after the returned one is dropped */
    CHECK(alloy_array_size(mine) == 20);
    alloy_array_free(mine);
}

/* ---- streams, compile API, set_outputs, concurrent launches --------------- */

static void test_stream_and_compile(void) {
    alloy_stream *st = NULL;
    CHECK_OK(alloy_stream_new(ku_device(), &st));
    alloy_kernel *k = NULL;
    const char *in_names[] = {"x"}, *out_names[] = {"y"};
    CHECK_OK(alloy_kernel_new("on_stream", 1, in_names, 1, out_names,
                              "uint i = thread_position_in_grid.x;\ny[i] = x[i] + 1.0f;\n", NULL, 1,
                              0, &k));
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    int nd[1] = {1};
    int64_t sh[1] = {33};
    const int64_t *shp[1] = {sh};
    alloy_dtype dt[1] = {ALLOY_FLOAT32};
    CHECK_OK(alloy_launch_set_outputs(l, 1, nd, shp, 1, dt));
    CHECK_OK(alloy_launch_set_grid(l, 33, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 32, 1, 1));
    float x[33];
    for (int i = 0; i < 33; i++) x[i] = (float)i;
    alloy_array *in = ku_array(ALLOY_FLOAT32, 33, x), *out = NULL;
    alloy_compile_result cr;
    memset(&cr, 0, sizeof cr);
    CHECK_OK(alloy_kernel_compile(k, 1, &in, l, NULL, &cr));
    CHECK(cr.source && strstr(cr.source, "x[i] + 1.0f"));
    alloy_compile_result_clear(&cr);
    memset(&cr, 0, sizeof cr);
    CHECK_OK(alloy_kernel_compile(k, 1, &in, l, NULL, &cr));
    CHECK_MSG(cr.from_cache == 1, "second compile from_cache = %d (want 1: memory)", cr.from_cache);
    alloy_compile_result_clear(&cr);
    CHECK_OK(alloy_kernel_apply(k, 1, &in, l, st, &out));
    CHECK_OK(alloy_stream_synchronize(st));
    float got[33] = {0};
    if (out) CHECK_OK(alloy_array_copy_to_host(out, got, sizeof got));
    for (int i = 0; i < 33; i++) CHECK(got[i] == x[i] + 1);
    alloy_array_free(out);
    alloy_array_free(in);
    alloy_launch_free(l);
    alloy_kernel_free(k);
    alloy_stream_free(st);
}

/* alloy_launch_set_overlap: a kernel that lets the next one start at once (alloy_start_next_kernel) and
 * writes 2^22 floats, each the end of a dependent chain, then a kernel launched to overlap it that waits
 * (alloy_wait_previous_kernel) and reads them in reverse, and a third, overlapping the second, that rewrites
 * the first one's input: with a wait that did not hold, the second would read stale or partial values, the
 * third would race the second's reads — on a GPU with overlapping launches; elsewhere an ordinary launch. */
static void test_overlapping_launch(void) {
    alloy_stream *st = NULL;
    CHECK_OK(alloy_stream_new(ku_device(), &st));
    const int64_t n = (int64_t)1 << 22;
    const char *one[] = {"x"}, *y_names[] = {"y"}, *z_names[] = {"z"};
    alloy_kernel *kp = NULL, *kc = NULL, *kw = NULL;
    CHECK_OK(alloy_kernel_new("overlap_producer", 1, one, 1, y_names,
                              "alloy_start_next_kernel();\n"
                              "uint i = thread_position_in_grid.x;\n"
                              "float v = x[i];\n"
                              "for (int r = 0; r < 64; r++) v = v * 0.5f + 1.0f;\n"
                              "y[i] = v + float(i);\n", NULL, 1, 0, &kp));
    const char *two[] = {"y"};
    CHECK_OK(alloy_kernel_new("overlap_consumer", 1, two, 1, z_names,
                              "uint i = thread_position_in_grid.x;\n"
                              "uint j = uint(y_shape[0]) - 1u - i;\n"
                              "float before = float(j) * 0.25f;   // work that needs nothing of the producer\n"
                              "alloy_wait_previous_kernel();\n"
                              "z[i] = y[j] - before;\n", NULL, 1, 0, &kc));
    const char *three[] = {"src"}, *w_names[] = {"x"};
    CHECK_OK(alloy_kernel_new("overlap_rewriter", 1, three, 1, w_names,
                              "alloy_wait_previous_kernel();\n"
                              "x[thread_position_in_grid.x] = src[0];\n", NULL, 1, 0, &kw));
    float *x = malloc((size_t)n * sizeof(float)), *got = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 1000) * 0.001f;
    alloy_array *in = ku_array(ALLOY_FLOAT32, n, x), *y = NULL, *z = NULL, *w = NULL;
    const float seven = 7.0f;
    alloy_array *src = ku_array(ALLOY_FLOAT32, 1, &seven);
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_grid(l, (uint32_t)n, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 256, 1, 1));
    CHECK_OK(alloy_kernel_apply(kp, 1, &in, l, st, &y));
    CHECK_OK(alloy_launch_set_overlap(l, 1));
    if (y) CHECK_OK(alloy_kernel_apply(kc, 1, &y, l, st, &z));
    CHECK_OK(alloy_launch_reset(l));
    CHECK_OK(alloy_launch_add_output_array(l, in));
    CHECK_OK(alloy_launch_set_grid(l, (uint32_t)n, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 256, 1, 1));
    CHECK_OK(alloy_launch_set_overlap(l, 1));
    CHECK_OK(alloy_kernel_apply(kw, 1, &src, l, st, &w));
    CHECK_OK(alloy_stream_synchronize(st));
    if (z) {
        CHECK_OK(alloy_array_copy_to_host(z, got, (size_t)n * sizeof(float)));
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < n; i++) {
            const int64_t j = n - 1 - i;
            float v = x[j];
            for (int r = 0; r < 64; r++) v = v * 0.5f + 1.0f;
            const float want = (v + (float)j) - (float)j * 0.25f;
            if (got[i] != want && bad++ == 0) first = i;
        }
        CHECK_MSG(bad == 0, "overlapping consumer: %lld of %lld wrong, first z[%lld] = %g", (long long)bad,
                  (long long)n, (long long)first, first >= 0 ? got[first] : 0.0);
    }
    CHECK_OK(alloy_array_copy_to_host(in, got, (size_t)n * sizeof(float)));
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += got[i] != 7.0f;
    CHECK_MSG(bad == 0, "overlapping rewriter: %lld of %lld not written", (long long)bad, (long long)n);
    CHECK(alloy_launch_set_overlap(NULL, 1) == ALLOY_ERROR_INVALID_ARGUMENT);
    /* the overlap's instructions are compiled in exactly where the launch overlaps: where the device does not
     * overlap launches (the CPU, ALLOY_CUDA_OVERLAP=0, older GPUs or drivers) an overlapping launch is compiled
     * as the ordinary one, so it finds that one's program */
    const int overlaps = alloy_device_overlaps_launches(ku_device());
    if (alloy_device_backend(ku_device()) == ALLOY_BACKEND_CPU) CHECK(overlaps == 0);
    for (int on = 0; on <= 1; on++) {
        CHECK_OK(alloy_launch_set_overlap(l, on));
        char *src_text = NULL;
        CHECK_OK(alloy_kernel_generated_source(kw, 1, &src, l, ku_device(), &src_text));
        const int defined = src_text && strstr(src_text, "#define ALLOY_OVERLAP_LAUNCH") != NULL;
        CHECK_MSG(defined == (on && overlaps), "overlap %d on a device that %s: ALLOY_OVERLAP_LAUNCH %s", on,
                  overlaps ? "overlaps launches" : "does not", defined ? "defined" : "not defined");
        free(src_text);
        alloy_compile_result cr;
        CHECK_OK(alloy_kernel_compile(kw, 1, &src, l, ku_device(), &cr));
        if (on && !overlaps) CHECK_MSG(cr.from_cache == 1, "the overlapping form compiled apart (%d)", cr.from_cache);
        alloy_compile_result_clear(&cr);
    }
    free(x), free(got);
    alloy_array_free(in), alloy_array_free(src), alloy_array_free(y), alloy_array_free(z), alloy_array_free(w);
    alloy_launch_free(l);
    alloy_kernel_free(kp), alloy_kernel_free(kc), alloy_kernel_free(kw);
    alloy_stream_free(st);
}

typedef struct conc_arg {
    alloy_kernel *k;
    int id;
    int ok;
} conc_arg;

static void *conc_worker(void *p) {
    conc_arg *a = p;
    a->ok = 1;
    for (int rep = 0; rep < 5; rep++) {
        float x[100];
        for (int i = 0; i < 100; i++) x[i] = (float)(i + a->id * 1000 + rep);
        alloy_launch *l = NULL;
        int64_t n = 100;
        if (alloy_launch_new(&l) != ALLOY_OK) { a->ok = 0; return NULL; }
        alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32);
        alloy_launch_set_grid(l, 100, 1, 1);
        alloy_launch_set_threadgroup(l, 32, 1, 1);
        alloy_array *in = NULL, *out = NULL;
        alloy_array_from_host(ku_device(), ALLOY_FLOAT32, 1, &n, x, &in);
        if (alloy_kernel_apply(a->k, 1, &in, l, NULL, &out) != ALLOY_OK) a->ok = 0;
        float got[100] = {0};
        if (out) alloy_array_copy_to_host(out, got, sizeof got);
        for (int i = 0; i < 100; i++)
            if (got[i] != x[i] * 3) a->ok = 0;
        alloy_array_free(in);
        alloy_array_free(out);
        alloy_launch_free(l);
    }
    return NULL;
}

static void test_concurrent_launches(void) {
    alloy_kernel *k = NULL;
    const char *in_names[] = {"x"}, *out_names[] = {"y"};
    char body[160];
    /* a body unique to this process run, so the first launches really compile */
    snprintf(body, sizeof body,
             "uint i = thread_position_in_grid.x;\ny[i] = x[i] * 3.0f; /* %ld */\n",
             (long)getpid());
    ku_device();
    CHECK_OK(alloy_kernel_new("concurrent", 1, in_names, 1, out_names, body, NULL, 1, 0, &k));
    pthread_t th[4];
    conc_arg args[4];
    for (int t = 0; t < 4; t++) {
        args[t].k = k;
        args[t].id = t;
        args[t].ok = 0;
        pthread_create(&th[t], NULL, conc_worker, &args[t]);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        CHECK_MSG(args[t].ok, "thread %d got wrong results", t);
    }
    alloy_kernel_free(k);
}

/* ---- launch constants ------------------------------------------------------ */

/* out[i] = a * x[i] + b (+ n when flag), with a, b, n, flag by-value
 * constants: new values reuse the compiled kernel, errors name the constant. */
static void test_launch_constants(void) {
    alloy_device *dev = ku_device();
    const char *in[] = {"x"}, *out[] = {"out"};
    alloy_kernel *k = NULL;
    CHECK_OK(alloy_kernel_new("constants", 1, in, 1, out,
                              "uint i = thread_position_in_grid.x;\n"
                              "out[i] = float(a * double(x[i]) + double(b)) + (flag ? float(n) : 0.0f);\n",
                              NULL, 1, 0, &k));
    float x[37];
    for (int i = 0; i < 37; i++) x[i] = (float)(i - 11);
    alloy_array *xa = ku_array(ALLOY_FLOAT32, 37, x), *res = NULL;
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    int64_t n = 37;
    CHECK_OK(alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_grid(l, 37, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 32, 1, 1));
    const double as[3] = {2.5, -1.0, 1e-3};
    const float bs[3] = {0.25f, 7.0f, -3.5f};
    const int64_t ns[3] = {5000000000LL, -3, 0};
    long builds0 = 0;
    for (int r = 0; r < 3; r++) {
        CHECK_OK(alloy_launch_set_constant(l, "a", ALLOY_FLOAT64, as[r]));
        CHECK_OK(alloy_launch_set_constant(l, "b", ALLOY_FLOAT32, bs[r]));
        CHECK_OK(alloy_launch_set_constant_int(l, "n", ALLOY_INT64, ns[r]));
        CHECK_OK(alloy_launch_set_constant_int(l, "flag", ALLOY_BOOL, r != 2));
        if (r == 1) builds0 = alloy_program_cache_builds(dev);
        CHECK_OK(alloy_kernel_apply(k, 1, &xa, l, NULL, &res));
        float got[37];
        if (res) CHECK_OK(alloy_array_copy_to_host(res, got, sizeof got));
        double ref[37];
        for (int i = 0; i < 37; i++)
            ref[i] = (float)(as[r] * x[i] + bs[r]) + (r != 2 ? (float)ns[r] : 0.0f);
        CHECK(res && ku_cmp_f32("constants", got, ref, 37, 0, 0) == 0);
        alloy_array_free(res);
        res = NULL;
    }
    CHECK_MSG(alloy_program_cache_builds(dev) == builds0,
              "a new constant value compiled the kernel again (%ld builds)",
              alloy_program_cache_builds(dev) - builds0);
    /* errors */
    CHECK_FAILS(alloy_launch_set_constant(l, "a", ALLOY_FLOAT32, 1.0), ALLOY_ERROR_INVALID_ARGUMENT,
                "keeps its dtype");
    CHECK_FAILS(alloy_launch_set_constant(l, "c", ALLOY_FLOAT16, 1.0), ALLOY_ERROR_INVALID_ARGUMENT,
                "'c': dtype float16");
    CHECK_FAILS(alloy_launch_set_constant(l, "m", ALLOY_INT32, 1.5), ALLOY_ERROR_INVALID_ARGUMENT,
                "is not a int32 value");
    CHECK_FAILS(alloy_launch_set_constant_int(l, "m", ALLOY_INT32, 1LL << 40), ALLOY_ERROR_INVALID_ARGUMENT,
                "out of range");
    CHECK_FAILS(alloy_launch_set_constant(l, "thread_position_in_grid", ALLOY_FLOAT32, 1.0),
                ALLOY_ERROR_INVALID_ARGUMENT, "thread_position_in_grid");
    CHECK_FAILS(alloy_launch_add_template_int(l, "a", 1), ALLOY_ERROR_INVALID_ARGUMENT,
                "launch constant");
    CHECK_OK(alloy_launch_set_constant(l, "x", ALLOY_FLOAT32, 1.0));
    CHECK_FAILS(alloy_kernel_apply(k, 1, &xa, l, NULL, &res), ALLOY_ERROR_INVALID_ARGUMENT,
                "launch constant 'x' has the name of an input");
    /* a constant the body needs but the launch lacks: a compile error naming it */
    CHECK_OK(alloy_launch_reset(l));
    CHECK_OK(alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_grid(l, 37, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 32, 1, 1));
    CHECK_FAILS(alloy_kernel_apply(k, 1, &xa, l, NULL, &res), ALLOY_ERROR_COMPILE, "flag");
    alloy_launch_free(l);
    alloy_array_free(xa);
    alloy_kernel_free(k);
}

int main(void) {
    RUN(test_grid_warning_once);
    RUN(test_grid_counts_threads);
    RUN(test_threadgroup_clamped);
    RUN(test_partial_2d);
    RUN(test_partial_3d);
    RUN(test_clamp_3d);
    RUN(test_attributes_1d);
    RUN(test_attributes_2d);
    RUN(test_attributes_3d);
    RUN(test_templates);
    RUN(test_templates_in_declarations);
    RUN(test_shape_token_match);
    RUN(test_scalar_inputs);
    RUN(test_atomic_outputs_init);
    RUN(test_init_value_dtypes);
    RUN(test_row_contiguous);
    RUN(test_verbose);
    RUN(test_zero_grid);
    RUN(test_caller_outputs);
    RUN(test_stream_and_compile);
    RUN(test_concurrent_launches);
    RUN(test_overlapping_launch);
    RUN(test_launch_constants);
    return harness_finish();
}
