/* test_cli.c — end-to-end tests of the `alloy` command-line tool: runs the
 * built binary (ALLOY_BINARY_DIR/alloy) with posix_spawn on .npy files that
 * this test writes with its OWN minimal writer (independent of tools/npy.c),
 * and checks the outputs against plain C references in double precision, the
 * exit codes (0 ok, 1 error, 2 usage) and that bad input never crashes it.
 * The device is ALLOY_DEVICE or cpu, like the other tests. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

extern char **environ;

static const char *cli_bin = ALLOY_BINARY_DIR "/alloy";
static char tmpdir[512];

static const char *device_name(void) {
    const char *d = getenv("ALLOY_DEVICE");
    return d && *d ? d : "cpu";
}

static const char *tpath(const char *name) {
    static char buf[8][1024];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (n + 1024 >= cap) b = realloc(b, cap *= 2);
        size_t got = fread(b + n, 1, cap - n - 1, f);
        n += got;
        if (!got) break;
    }
    fclose(f);
    b[n] = '\0';
    if (len) *len = n;
    return b;
}

/* The output of the last run. */
static char *run_out, *run_err;

/* Runs the CLI with args (NULL-terminated) and optional "KEY=VALUE" env
 * overrides (NULL-terminated, may be NULL). Returns the exit status, or -1
 * if it died from a signal (a crash). */
static int run_cli_env(const char *const *env_over, const char *const *args) {
    const char *argv[64];
    int n = 0;
    argv[n++] = cli_bin;
    for (int i = 0; args[i] && n < 63; i++) argv[n++] = args[i];
    argv[n] = NULL;

    const char *envp[512];
    int ne = 0;
    for (char **e = environ; *e && ne < 400; e++) {
        int overridden = 0;
        for (int k = 0; env_over && env_over[k]; k++) {
            size_t kl = strcspn(env_over[k], "=");
            if (!strncmp(*e, env_over[k], kl) && (*e)[kl] == '=') overridden = 1;
        }
        if (!overridden) envp[ne++] = *e;
    }
    for (int k = 0; env_over && env_over[k]; k++) envp[ne++] = env_over[k];
    envp[ne] = NULL;

    static char out_path[1024], err_path[1024];
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", tmpdir);
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", tmpdir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawn(&pid, cli_bin, &fa, NULL, (char *const *)argv, (char *const *)envp);
    posix_spawn_file_actions_destroy(&fa);
    free(run_out);
    free(run_err);
    run_out = run_err = NULL;
    if (rc != 0) {
        fprintf(stderr, "  posix_spawn(%s): %s\n", cli_bin, strerror(rc));
        run_out = strdup("");
        run_err = strdup("");
        return -2;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    run_out = slurp(out_path, NULL);
    run_err = slurp(err_path, NULL);
    if (!run_out) run_out = strdup("");
    if (!run_err) run_err = strdup("");
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    fprintf(stderr, "  alloy died from signal %d; stderr:\n%s\n", WTERMSIG(status), run_err);
    return -1;
}

#define RUN_CLI(...) run_cli_env(NULL, (const char *const[]){__VA_ARGS__, NULL})
#define RUN_CLI_ENV(env, ...) run_cli_env((env), (const char *const[]){__VA_ARGS__, NULL})

/* An exit code check that shows the child's stderr on failure. */
#define CHECK_RC(expr, want)                                                               \
    do {                                                                                   \
        int rc_ = (expr);                                                                  \
        CHECK_MSG(rc_ == (want), "exit %d (wanted %d); stderr: %s", rc_, (want), run_err); \
    } while (0)

/* ---- the test's own minimal .npy writer and reader ------------------------ */

static void write_npy(const char *path, const char *descr, int ndim, const int64_t *shape,
                      int fortran, const void *data, size_t nbytes) {
    char h[256];
    int n = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': %s, 'shape': (", descr,
                     fortran ? "True" : "False");
    for (int d = 0; d < ndim; d++) n += snprintf(h + n, sizeof h - (size_t)n, "%lld,", (long long)shape[d]);
    n += snprintf(h + n, sizeof h - (size_t)n, "), }");
    int total = 10 + n + 1, pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    unsigned short hl = (unsigned short)(n + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hl & 0xff, f);
    fputc(hl >> 8, f);
    fwrite(h, 1, (size_t)n, f);
    for (int i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    fwrite(data, 1, nbytes, f);
    fclose(f);
}

/* Reads a .npy the CLI wrote: checks the descr and shape text, returns the
 * data (malloc'd) or NULL. */
static void *read_npy(const char *path, const char *want_descr, const char *want_shape, size_t nbytes) {
    size_t len = 0;
    char *b = slurp(path, &len);
    if (!b) {
        CHECK_MSG(0, "cannot read %s", path);
        return NULL;
    }
    int ok = len >= 10 && !memcmp(b, "\x93NUMPY", 6);
    size_t hl = ok ? (size_t)(unsigned char)b[8] | ((size_t)(unsigned char)b[9] << 8) : 0;
    char descr[64], shape[128];
    snprintf(descr, sizeof descr, "'descr': '%s'", want_descr);
    snprintf(shape, sizeof shape, "'shape': %s", want_shape);
    ok = ok && b[6] == 1 && (10 + hl) % 64 == 0 && len == 10 + hl + nbytes;
    if (ok) {
        char save = b[10 + hl];
        b[10 + hl] = '\0';
        CHECK_MSG(strstr(b + 10, descr) && strstr(b + 10, shape) && strstr(b + 10, "'fortran_order': False"),
                  "header of %s: %s (wanted %s, %s)", path, b + 10, descr, shape);
        b[10 + hl] = save;
    }
    CHECK_MSG(ok, "%s is not a well-formed .npy of %zu data bytes (file has %zu bytes)", path, nbytes, len);
    if (!ok) {
        free(b);
        return NULL;
    }
    void *data = malloc(nbytes ? nbytes : 1);
    memcpy(data, b + 10 + hl, nbytes);
    free(b);
    return data;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

/* float -> bfloat16 -> float, round to nearest even (the reference). */
static float bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* ---- tests ---------------------------------------------------------------- */

static int have_binary(void) {
    if (access(cli_bin, X_OK) == 0) return 1;
    CHECK_MSG(0, "%s is not built (the alloy_cli target)", cli_bin);
    return 0;
}

static void test_help_and_usage(void) {
    if (!have_binary()) return;
    CHECK_RC(RUN_CLI("--help"), 0);
    CHECK(strstr(run_out, "run") && strstr(run_out, "compile") && strstr(run_out, "cache"));
    CHECK_RC(RUN_CLI("run", "--help"), 0);
    CHECK(strstr(run_out, "--grid") && strstr(run_out, "--output"));
    CHECK_RC(RUN_CLI("compile", "--help"), 0);
    CHECK_RC(RUN_CLI("cache", "--help"), 0);
    CHECK_RC(RUN_CLI("info", "--help"), 0);
    CHECK_RC(RUN_CLI("--version"), 0);
    CHECK(strstr(run_out, alloy_version()) != NULL);
    CHECK_RC(run_cli_env(NULL, (const char *const[]){NULL}), 2);
    CHECK_RC(RUN_CLI("frobnicate"), 2);
    CHECK(!strncmp(run_err, "alloy: ", 7));
    CHECK_RC(RUN_CLI("cache", "explode"), 2);
    CHECK_RC(RUN_CLI("info", "--bogus"), 2);
}

static void test_info(void) {
    if (!have_binary()) return;
    CHECK_RC(RUN_CLI("info"), 0);
    CHECK(strstr(run_out, alloy_version()) != NULL);
    CHECK(strstr(run_out, "cpu") != NULL);
    CHECK(strstr(run_out, "cache") != NULL);
    CHECK(strstr(run_out, "ALLOY_NUM_THREADS") != NULL);
    CHECK(strstr(run_out, "overlapping launches: ") != NULL);
}

/* The README example of docs/cli.md: soft_cap on 1000 random values. */
static void test_run_soft_cap(void) {
    if (!have_binary()) return;
    enum { N = 1000 };
    float x[N];
    harness_fill_f32(x, N, -60.0, 60.0);
    int64_t n = N;
    write_npy(tpath("x.npy"), "<f4", 1, &n, 0, x, sizeof x);
    char xin[1100], outspec[1100];
    snprintf(xin, sizeof xin, "x=%s", tpath("x.npy"));
    snprintf(outspec, sizeof outspec, "out:float32:1000=%s", tpath("out.npy"));
    CHECK_RC(RUN_CLI("run", ALLOY_SOURCE_DIR "/examples/soft_cap.metal", "--input", xin, "--input",
                     "cap=15", "--output", outspec, "--grid", "1000", "--threadgroup", "256",
                     "--device", device_name()),
             0);
    float *out = read_npy(tpath("out.npy"), "<f4", "(1000,)", sizeof x);
    if (!out) return;
    double ref[N];
    for (int i = 0; i < N; i++) ref[i] = 15.0 * tanh((double)x[i] / 15.0);
    size_t worst;
    double e = harness_max_err(out, ref, N, 1e-6, 1e-5, &worst);
    CHECK_MSG(e <= 1, "soft_cap: out[%zu] = %.9g, reference %.9g", worst, out[worst], ref[worst]);
    free(out);
}

static const char affine_kernel[] =
    "// affine2d: out = a * K + b on a 2-D int32 array; b is a 0-d scalar.\n"
    "//! name: affine2d\n"
    "//! inputs: a b\n"
    "//! outputs: out\n"
    "//! template: K=3\n"
    "//! body:\n"
    "uint2 p = thread_position_in_grid.xy;\n"
    "uint rows = uint(a_shape[0]), cols = uint(a_shape[1]);\n"
    "if (p.x >= cols || p.y >= rows) return;\n"
    "uint i = p.y * cols + p.x;\n"
    "out[i] = a[i] * K + b;\n";

/* 2-D int32 input stored in Fortran order, an int32 scalar, a template
 * override, a 2-D grid with partial threadgroups. */
static void test_run_2d_fortran_int(void) {
    if (!have_binary()) return;
    enum { R = 33, C = 29 };
    int32_t a[R][C], af[C][R];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) {
            a[i][j] = (int32_t)(harness_rand_u64() % 2001) - 1000;
            af[j][i] = a[i][j]; /* Fortran order: the first index is fastest */
        }
    int64_t shape[2] = {R, C};
    write_npy(tpath("a.npy"), "<i4", 2, shape, 1, af, sizeof af);
    write_text(tpath("affine2d.metal"), affine_kernel);
    char ain[1100], outspec[1100];
    snprintf(ain, sizeof ain, "a=%s", tpath("a.npy"));
    snprintf(outspec, sizeof outspec, "out:int32:33x29=%s", tpath("o2.npy"));
    CHECK_RC(RUN_CLI("run", tpath("affine2d.metal"), "--input", ain, "--input", "b=-7:int32",
                     "--template", "K=5", "--output", outspec, "--grid", "29,33", "--threadgroup",
                     "8,4", "--device", device_name()),
             0);
    int32_t *out = read_npy(tpath("o2.npy"), "<i4", "(33, 29)", sizeof a);
    if (!out) return;
    int bad = 0;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) {
            int64_t want = (int64_t)a[i][j] * 5 - 7;
            if (out[i * C + j] != want && bad++ < 3)
                CHECK_MSG(0, "out[%d][%d] = %d, want %lld", i, j, out[i * C + j], (long long)want);
        }
    CHECK(bad == 0);
    free(out);
}

/* --input NAME:bfloat16=float32.npy converts; a bfloat16 output is written as
 * float32 with a note; float16 round trips as <f2. */
static void test_run_dtype_conversions(void) {
    if (!have_binary()) return;
    enum { N = 37 };
    float x[N];
    harness_fill_f32(x, N, -100.0, 100.0);
    int64_t n = N;
    write_npy(tpath("xb.npy"), "<f4", 1, &n, 0, x, sizeof x);
    char in[1100], outspec[1100];
    snprintf(in, sizeof in, "inp:bfloat16=%s", tpath("xb.npy"));
    snprintf(outspec, sizeof outspec, "out:bfloat16:37=%s", tpath("ob.npy"));
    CHECK_RC(RUN_CLI("run", ALLOY_SOURCE_DIR "/examples/memcpy.metal", "--input", in, "--output",
                     outspec, "--grid", "37", "--threadgroup", "16", "--device", device_name()),
             0);
    CHECK(strstr(run_err, "note") && strstr(run_err, "float32"));
    float *out = read_npy(tpath("ob.npy"), "<f4", "(37,)", sizeof x);
    if (out) {
        int bad = 0;
        for (int i = 0; i < N; i++)
            if (out[i] != bf16_round(x[i]) && bad++ < 3)
                CHECK_MSG(0, "bf16 out[%d] = %.9g, want %.9g (x = %.9g)", i, out[i], bf16_round(x[i]), x[i]);
        free(out);
    }

    /* integers up to 2048 are exact in float16 */
    float xi[N];
    for (int i = 0; i < N; i++) xi[i] = (float)(i * 50 - 900);
    write_npy(tpath("xh.npy"), "<f4", 1, &n, 0, xi, sizeof xi);
    snprintf(in, sizeof in, "inp:float16=%s", tpath("xh.npy"));
    snprintf(outspec, sizeof outspec, "out:float16:37=%s", tpath("oh.npy"));
    CHECK_RC(RUN_CLI("run", ALLOY_SOURCE_DIR "/examples/memcpy.metal", "--input", in, "--output",
                     outspec, "--grid", "37", "--device", device_name()),
             0);
    uint16_t *h = read_npy(tpath("oh.npy"), "<f2", "(37,)", N * 2);
    if (h) {
        int bad = 0;
        for (int i = 0; i < N; i++) {
            /* decode IEEE half (all values here are normal or zero) */
            unsigned e = (h[i] >> 10) & 31, f = h[i] & 1023;
            double v = e ? ldexp(1024.0 + f, (int)e - 25) : ldexp((double)f, -24);
            if (h[i] & 0x8000) v = -v;
            if (v != xi[i] && bad++ < 3) CHECK_MSG(0, "half out[%d] = %g, want %g", i, v, (double)xi[i]);
        }
        free(h);
    }
}

/* --print with no output file; --grid 0 with --init-value fills and runs nothing. */
static void test_run_print_and_init(void) {
    if (!have_binary()) return;
    int32_t v[5] = {4, -3, 2, 10, 7};
    int64_t n = 5;
    write_npy(tpath("p.npy"), "<i4", 1, &n, 0, v, sizeof v);
    char in[1100];
    snprintf(in, sizeof in, "inp=%s", tpath("p.npy"));
    CHECK_RC(RUN_CLI("run", ALLOY_SOURCE_DIR "/examples/memcpy.metal", "--input", in, "--output",
                     "out:int32:5", "--grid", "5", "--print", "--device", device_name()),
             0);
    CHECK_MSG(strstr(run_out, "out int32 5: 4 -3 2 10 7") != NULL, "stdout: %s", run_out);

    char outspec[1100];
    snprintf(outspec, sizeof outspec, "out:float32:3x4=%s", tpath("init.npy"));
    CHECK_RC(RUN_CLI("run", ALLOY_SOURCE_DIR "/examples/memcpy.metal", "--input", in, "--output",
                     outspec, "--grid", "0", "--init-value", "2.5", "--print=3", "--device",
                     device_name()),
             0);
    CHECK_MSG(strstr(run_out, "out float32 3x4: 2.5 2.5 2.5 ... (12 elements)") != NULL, "stdout: %s",
              run_out);
    float *o = read_npy(tpath("init.npy"), "<f4", "(3, 4)", 12 * 4);
    if (o) {
        for (int i = 0; i < 12; i++) CHECK(o[i] == 2.5f);
        free(o);
    }
}

/* Bad input of every kind: clear message, exit 1 (error) or 2 (usage), no crash. */
static void test_run_errors(void) {
    if (!have_binary()) return;
    const char *k = ALLOY_SOURCE_DIR "/examples/soft_cap.metal";
    const char *dev = device_name();
    float x[4] = {1, 2, 3, 4};
    int64_t n = 4;
    write_npy(tpath("ok.npy"), "<f4", 1, &n, 0, x, sizeof x);
    char okin[1100], out[1100], garbage[1100], be[1100], missing[1100];
    snprintf(okin, sizeof okin, "x=%s", tpath("ok.npy"));
    snprintf(out, sizeof out, "out:float32:4=%s", tpath("e.npy"));
    write_text(tpath("garbage.npy"), "this is not a numpy file at all");
    snprintf(garbage, sizeof garbage, "x=%s", tpath("garbage.npy"));
    write_npy(tpath("be.npy"), ">f4", 1, &n, 0, x, sizeof x);
    snprintf(be, sizeof be, "x=%s", tpath("be.npy"));
    snprintf(missing, sizeof missing, "x=%s", tpath("does-not-exist.npy"));

    /* errors: exit 1 */
    CHECK_RC(RUN_CLI("run", tpath("no-such-kernel.metal"), "--input", okin, "--input", "cap=2",
                     "--output", out, "--grid", "4", "--device", dev),
             1);
    CHECK(!strncmp(run_err, "alloy: ", 7));
    CHECK_RC(RUN_CLI("run", k, "--input", missing, "--input", "cap=2", "--output", out, "--grid", "4",
                     "--device", dev),
             1);
    CHECK(!strncmp(run_err, "alloy: ", 7) && strstr(run_err, "does-not-exist.npy"));
    CHECK_RC(RUN_CLI("run", k, "--input", garbage, "--input", "cap=2", "--output", out, "--grid", "4",
                     "--device", dev),
             1);
    CHECK(strstr(run_err, "not a .npy") != NULL);
    CHECK_RC(RUN_CLI("run", k, "--input", be, "--input", "cap=2", "--output", out, "--grid", "4",
                     "--device", dev),
             1);
    CHECK(strstr(run_err, "big-endian") != NULL);
    write_text(tpath("broken.metal"),
               "//! name: broken\n//! inputs: x\n//! outputs: out\n//! body:\n"
               "uint i = thread_position_in_grid.x;\nout[i] = x[i] + this_is_not_declared;\n");
    CHECK_RC(RUN_CLI("run", tpath("broken.metal"), "--input", okin, "--output", out, "--grid", "4",
                     "--device", dev),
             1);
    CHECK(!strncmp(run_err, "alloy: ", 7) && strstr(run_err, "this_is_not_declared"));
    write_text(tpath("nodirectives.metal"), "uint i = 0;\n");
    CHECK_RC(RUN_CLI("run", tpath("nodirectives.metal"), "--input", okin, "--output", out, "--grid", "4",
                     "--device", dev),
             1);
    CHECK(!strncmp(run_err, "alloy: ", 7));
    CHECK_RC(RUN_CLI("run", k, "--input", okin, "--input", "cap=2", "--output", out, "--grid", "4",
                     "--device", "no-such-device"),
             1);
    CHECK(!strncmp(run_err, "alloy: ", 7));

    /* usage errors: exit 2 */
    char noshape[1100];
    snprintf(noshape, sizeof noshape, "out=%s", tpath("e.npy"));
    CHECK_RC(RUN_CLI("run", k, "--input", okin, "--input", "cap=2", "--output", noshape, "--grid", "4"), 2);
    CHECK(strstr(run_err, "no shape") != NULL);
    CHECK_RC(RUN_CLI("run", k, "--input", okin, "--input", "cap=2", "--output", out), 2); /* no --grid */
    CHECK(strstr(run_err, "--grid") != NULL);
    CHECK_RC(RUN_CLI("run", k, "--input", okin, "--input", "cap=2", "--output", out, "--grid", "4", "--frob"), 2);
    CHECK(strstr(run_err, "--frob") != NULL);
    CHECK_RC(RUN_CLI("run", k, "--input", okin, "--output", out, "--grid", "4", "--device", dev), 2);
    CHECK(strstr(run_err, "cap") != NULL); /* the missing input is named */
    CHECK_RC(RUN_CLI("run", k, "--input", okin, "--input", "cap=2", "--input", "y=3", "--output", out,
                     "--grid", "4", "--device", dev),
             2);
    CHECK(strstr(run_err, "\"y\"") != NULL);
    CHECK_RC(RUN_CLI("run", k, "--input", okin, "--input", "cap=2", "--output", out, "--grid", "4x4"), 2);
    CHECK_RC(RUN_CLI("run", k, "--input", okin, "--input", "cap=2", "--output", "out:float32:4q=f.npy",
                     "--grid", "4"),
             2);
    CHECK_RC(RUN_CLI("run", k, "--input", okin, "--input", "cap=2", "--output", out, "--grid", "4",
                     "--template", "T=notatype", "--device", dev),
             2);
    CHECK_RC(RUN_CLI("run", k, "--input", okin, "--input", "cap=300:int8", "--output", out, "--grid", "4",
                     "--device", dev),
             2);
    CHECK_RC(RUN_CLI("run", k, "--input"), 2);
    CHECK_RC(RUN_CLI("run", k, "--input", "x=", "--input", "cap=2", "--output", out, "--grid", "4"), 2);
}

static void test_compile(void) {
    if (!have_binary()) return;
    CHECK_RC(RUN_CLI("compile", ALLOY_SOURCE_DIR "/examples/soft_cap.metal", "--input", "x:float32:1000",
                     "--input", "cap:float32:scalar", "--output", "out:float32", "--device", device_name()),
             0);
    CHECK(strstr(run_out, "generated source") && strstr(run_out, "soft_cap") && strstr(run_out, "tanh"));
    CHECK(strstr(run_out, "resource report") != NULL);

    write_text(tpath("broken2.metal"),
               "//! name: broken2\n//! inputs: x\n//! outputs: out\n//! body:\n"
               "uint i = thread_position_in_grid.x;\nout[i] = x[i] + undeclared_thing;\n");
    CHECK_RC(RUN_CLI("compile", tpath("broken2.metal"), "--input", "x:float32", "--output", "out:float32",
                     "--device", device_name()),
             1);
    CHECK(!strncmp(run_err, "alloy: ", 7) && strstr(run_err, "undeclared_thing"));
    CHECK_RC(RUN_CLI("compile", ALLOY_SOURCE_DIR "/examples/soft_cap.metal", "--input", "x"), 2);
    CHECK_RC(RUN_CLI("compile", ALLOY_SOURCE_DIR "/examples/soft_cap.metal", "--input", "x:float32"), 2);
    CHECK(strstr(run_err, "cap") != NULL);
}

static void test_cache(void) {
    if (!have_binary()) return;
    char cache_env[1100];
    snprintf(cache_env, sizeof cache_env, "ALLOY_CACHE_DIR=%s", tpath("cache"));
    const char *env[] = {cache_env, "ALLOY_CACHE=1", NULL};
    CHECK_RC(RUN_CLI_ENV(env, "cache", "dir"), 0);
    CHECK_MSG(strstr(run_out, tpath("cache")) != NULL, "cache dir printed: %s", run_out);

    int32_t v[3] = {1, 2, 3};
    int64_t n = 3;
    write_npy(tpath("c.npy"), "<i4", 1, &n, 0, v, sizeof v);
    char in[1100];
    snprintf(in, sizeof in, "inp=%s", tpath("c.npy"));
    CHECK_RC(RUN_CLI_ENV(env, "run", ALLOY_SOURCE_DIR "/examples/memcpy.metal", "--input", in,
                         "--output", "out:int32:3", "--grid", "3", "--print", "--device", "cpu"),
             0);
    CHECK_RC(RUN_CLI_ENV(env, "cache", "stats"), 0);
    CHECK_MSG(strstr(run_out, "entries: ") && !strstr(run_out, "entries: 0\n"),
              "a CPU kernel should have left a cache entry: %s", run_out);
    CHECK_RC(RUN_CLI_ENV(env, "cache", "clear"), 0);
    CHECK_RC(RUN_CLI_ENV(env, "cache", "stats"), 0);
    CHECK_MSG(strstr(run_out, "entries: 0\n") != NULL, "after clear: %s", run_out);

    const char *off[] = {"ALLOY_CACHE=0", NULL};
    CHECK_RC(RUN_CLI_ENV(off, "cache", "dir"), 1);
    CHECK(strstr(run_err, "disabled") != NULL);
    CHECK_RC(RUN_CLI_ENV(off, "info"), 0);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* The JSON rows of `op` in run_out (one per `"op": "<op>"`), each checked
 * to carry `field` with lo < value < hi; returns how many there are. */
static int json_rows(const char *op, const char *field, double lo, double hi) {
    char key[64], name[64];
    snprintf(key, sizeof key, "\"op\": \"%s\"", op);
    snprintf(name, sizeof name, "\"%s\": ", field);
    int rows = 0;
    for (const char *p = run_out; (p = strstr(p, key)) != NULL; p++) {
        rows++;
        const char *e = strstr(p, name);
        CHECK_MSG(e != NULL, "%s row without %s", op, field);
        if (e) {
            const double x = strtod(e + strlen(name), NULL);
            CHECK_MSG(x > lo && x < hi, "%s %s", field, e + strlen(name));
        }
    }
    return rows;
}

/* The value of `field` in run_out's JSON row whose case is `name` (NAN when there is none). */
static double json_case(const char *name, const char *field) {
    char key[96], fname[64];
    snprintf(key, sizeof key, "\"case\": \"%s\"", name);
    snprintf(fname, sizeof fname, "\"%s\": ", field);
    const char *p = strstr(run_out, key), *e = p ? strstr(p, fname) : NULL, *end = p ? strchr(p, '}') : NULL;
    return e && end && e < end ? strtod(e + strlen(fname), NULL) : NAN;
}

/* `alloy bench linalg` on the CPU: the quick rows of one op (and of qr) as
 * JSON, each with a small backward error; an unknown op is a usage error. */
static void test_bench_linalg(void) {
    if (!have_binary()) return;
    CHECK_RC(RUN_CLI("bench", "linalg", "--device", "cpu", "--quick", "--json", "--only", "cholesky f32"), 0);
    int rows = json_rows("cholesky", "error", -INFINITY, 1e-5);
    CHECK_MSG(rows == 2, "%d cholesky rows in: %s", rows, run_out);
    CHECK(strstr(run_out, "lu_factor") == NULL);
    /* the qr rows (Q and R of the reduced mode, error max(|A-QR|/|A|, |Q^TQ-I|)) */
    CHECK_RC(RUN_CLI("bench", "linalg", "--device", "cpu", "--quick", "--json", "--only", "qr f32"), 0);
    rows = json_rows("qr", "error", -INFINITY, 1e-5);
    CHECK_MSG(rows == 2, "%d qr rows in: %s", rows, run_out);
    CHECK_RC(RUN_CLI("bench", "nosuchop"), 2);
}

/* `alloy bench nn` and the mLSTM training rows on the CPU: the quick rows of
 * one op as JSON with the copy's share and a small error; the backward and
 * forward+backward rows of `alloy bench mlstm` with the gradients' error
 * against the float64 backward. */
static void test_bench_nn_and_mlstm_backward(void) {
    if (!have_binary()) return;
    CHECK_RC(RUN_CLI("bench", "nn", "--device", "cpu", "--quick", "--json", "--only", "softcap f32"), 0);
    json_rows("nn", "copy_share", -INFINITY, INFINITY);
    int rows = json_rows("nn", "error", -INFINITY, 1e-5);
    CHECK_MSG(rows == 2, "%d softcap rows in: %s", rows, run_out);
    CHECK(strstr(run_out, "rmsnorm") == NULL);
    /* alternatives of --only, separated by | (an empty one, here the last, matches nothing) */
    CHECK_RC(RUN_CLI("bench", "nn", "--device", "cpu", "--quick", "--json", "--only", "softcap f32 fwd|rmsnorm bf16 bwd|"),
             0);
    rows = json_rows("nn", "error", -INFINITY, 1e-1);
    /* (the second alternative also matches "rmsnorm bf16 bwd stats": the backward from saved statistics) */
    CHECK_MSG(rows == 3, "%d rows for two alternatives in: %s", rows, run_out);
    CHECK(strstr(run_out, "\"rmsnorm bf16 bwd stats\"") != NULL);
    CHECK(strstr(run_out, "softcap f32 bwd") == NULL && strstr(run_out, "rmsnorm bf16 fwd") == NULL);
    /* the float32 rows at precision HIGH and at DEFAULT (float16 tiles both ways: TF32's rounding) */
    CHECK_RC(RUN_CLI("bench", "mlstm", "--device", "cpu", "--quick", "--json", "--only", "bwd f32"), 0);
    rows = json_rows("mlstm", "error", -INFINITY, 1e-2);
    CHECK_MSG(rows == 4, "%d backward rows in: %s", rows, run_out);
    CHECK(json_case("bwd f32 small", "error") < 1e-4);
    CHECK(json_case("fwd+bwd f32 small", "error") < 1e-4);
    CHECK(json_case("bwd f32 small default", "error") < 1e-2);
    CHECK(json_case("fwd+bwd f32 small default", "error") < 1e-2);
    /* the kept record's row (on the CPU a float32 record: exact products), its error from its own run */
    CHECK_RC(RUN_CLI("bench", "mlstm", "--device", "cpu", "--quick", "--json", "--only", "kept f32"), 0);
    rows = json_rows("mlstm", "error", -INFINITY, 1e-4);
    CHECK_MSG(rows == 1, "%d kept rows in: %s", rows, run_out);
}

/* `alloy bench --once` (for sanitizers): each row's call made once, its
 * float64 check still done, the step rows' copy reference still measured; an
 * option it does not know is a usage error. */
static void test_bench_once(void) {
    if (!have_binary()) return;
    CHECK_RC(RUN_CLI("bench", "mlstm", "--device", "cpu", "--quick", "--once", "--json", "--only", "chunkwise f32"),
             0);
    int rows = json_rows("mlstm", "error", -INFINITY, 1e-4); /* the row at precision HIGH and its "tf32" twin */
    CHECK_MSG(rows == 2, "%d chunkwise f32 rows in: %s", rows, run_out);
    CHECK(strstr(run_out, "\"case\": \"chunkwise f32 small tf32\"") != NULL);
    CHECK_RC(RUN_CLI("bench", "mlstm", "--device", "cpu", "--quick", "--once", "--json", "--only", "step"), 0);
    rows = json_rows("mlstm", "copy_share", 0, INFINITY); /* in place, new states, C in place, the roof */
    CHECK_MSG(rows == 4, "%d step rows in: %s", rows, run_out);
    CHECK(strstr(run_out, "\"case\": \"step bf16 7B C in place\"") != NULL);
    CHECK(strstr(run_out, "\"case\": \"step roof: in-place update\"") != NULL);
    CHECK_RC(RUN_CLI("bench", "mlstm", "--twice"), 2);
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/alloy-cli-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "mkdtemp(%s): %s\n", tmpdir, strerror(errno));
        return 1;
    }
    RUN(test_help_and_usage);
    RUN(test_info);
    RUN(test_run_soft_cap);
    RUN(test_run_2d_fortran_int);
    RUN(test_run_dtype_conversions);
    RUN(test_run_print_and_init);
    RUN(test_run_errors);
    RUN(test_compile);
    RUN(test_cache);
    RUN(test_bench_linalg);
    RUN(test_bench_nn_and_mlstm_backward);
    RUN(test_bench_once);
    free(run_out);
    free(run_err);
    if (!harness_failed) nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    else fprintf(stderr, "files kept in %s\n", tmpdir);
    return harness_finish();
}
