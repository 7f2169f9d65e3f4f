/* test_kernel_errors.c — every user error of the kernel API is answered by a
 * status AND a message that says what was wrong: wrong input counts,
 * template problems, invalid/duplicate/reserved names, oversized
 * threadgroups, a missing compiler, compile errors mapped to the body's and
 * header's own line numbers, mismatched output lists, whole-kernel sources,
 * zero outputs; and a corrupt disk-cache entry is detected and rebuilt (in
 * child processes with their own cache directory). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "kernel_util.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *argv0;

static const char *simple_body = "uint i = thread_position_in_grid.x;\nout[i] = a[i] + 1.0f;\n";

/* A launch with one float output of n elements on an n-thread grid. */
static alloy_launch *simple_launch(int64_t n) {
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    if (!l) return NULL;
    CHECK_OK(alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_grid(l, (uint32_t)n, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 32, 1, 1));
    return l;
}

static alloy_kernel *simple_kernel(const char *name, const char *body, const char *header) {
    const char *in_names[] = {"a"}, *out_names[] = {"out"};
    alloy_kernel *k = NULL;
    CHECK_OK(alloy_kernel_new(name, 1, in_names, 1, out_names, body, header, 1, 0, &k));
    return k;
}

static void test_wrong_input_count(void) {
    alloy_kernel *k = simple_kernel("wrong_inputs", simple_body, NULL);
    alloy_launch *l = simple_launch(4);
    float x[4] = {0};
    alloy_array *in[2] = {ku_array(ALLOY_FLOAT32, 4, x), ku_array(ALLOY_FLOAT32, 4, x)};
    alloy_array *out = NULL;
    CHECK_FAILS(alloy_kernel_apply(k, 2, in, l, NULL, &out), ALLOY_ERROR_INVALID_ARGUMENT,
                "input");
    CHECK_FAILS(alloy_kernel_apply(k, 0, in, l, NULL, &out), ALLOY_ERROR_INVALID_ARGUMENT,
                "input");
    CHECK(out == NULL);
    alloy_array_free(in[0]);
    alloy_array_free(in[1]);
    alloy_launch_free(l);
    alloy_kernel_free(k);
}

/* A template problem may be caught when added or when applied; either way
 * the status is INVALID_ARGUMENT and the message names `needle`. */
static void expect_template_error(alloy_status add_status, alloy_kernel *k, alloy_launch *l,
                                  const char *needle, const char *what) {
    if (add_status != ALLOY_OK) {
        CHECK_MSG(add_status == ALLOY_ERROR_INVALID_ARGUMENT && strstr(alloy_last_error(), needle),
                  "%s: %s: %s", what, alloy_status_name(add_status), alloy_last_error());
        return;
    }
    float x[4] = {0};
    alloy_array *in = ku_array(ALLOY_FLOAT32, 4, x), *out = NULL;
    CHECK_FAILS(alloy_kernel_apply(k, 1, &in, l, NULL, &out), ALLOY_ERROR_INVALID_ARGUMENT,
                needle);
    alloy_array_free(in);
    alloy_array_free(out);
}

static void test_template_errors(void) {
    alloy_kernel *k = simple_kernel("template_errors", simple_body, NULL);
    alloy_launch *l = simple_launch(4);
    CHECK_OK(alloy_launch_add_template_int(l, "Ndup", 1));
    expect_template_error(alloy_launch_add_template_int(l, "Ndup", 2), k, l, "Ndup",
                          "duplicate template name");
    alloy_launch_free(l);

    l = simple_launch(4);
    expect_template_error(alloy_launch_add_template_int(l, "a", 2), k, l, "a",
                          "template name = input name");
    alloy_launch_free(l);

    l = simple_launch(4);
    expect_template_error(alloy_launch_add_template_bool(l, "out", 1), k, l, "out",
                          "template name = output name");
    alloy_launch_free(l);

    l = simple_launch(4);
    expect_template_error(alloy_launch_add_template_dtype(l, "T", (alloy_dtype)99), k, l, "dtype",
                          "invalid dtype");
    alloy_launch_free(l);

    l = simple_launch(4);
    expect_template_error(alloy_launch_add_template_int(l, "float", 1), k, l, "float",
                          "keyword template name");
    alloy_launch_free(l);

    l = simple_launch(4);
    expect_template_error(alloy_launch_add_template_int(l, "2N", 1), k, l, "2N",
                          "invalid template name");
    alloy_launch_free(l);
    alloy_kernel_free(k);
}

static void test_invalid_names(void) {
    const char *bad[] = {"1x", "float", "thread_position_in_grid", "kernel", "x-y", "",
                         "threadgroup", "a_shape"};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        const char *in_names[] = {"a", bad[b]}, *out_names[] = {"out"};
        alloy_kernel *k = NULL;
        /* "a_shape" clashes with the generated name of input `a` */
        CHECK_FAILS(alloy_kernel_new("bad_names", 2, in_names, 1, out_names, simple_body, NULL, 1,
                                     0, &k),
                    ALLOY_ERROR_INVALID_ARGUMENT, bad[b]);
        CHECK(k == NULL);
        alloy_kernel_free(k);
        /* the same names as outputs */
        const char *in1[] = {"a"}, *outs2[] = {bad[b]};
        k = NULL;
        CHECK_FAILS(alloy_kernel_new("bad_names", 1, in1, 1, outs2, simple_body, NULL, 1, 0, &k),
                    ALLOY_ERROR_INVALID_ARGUMENT, bad[b]);
        alloy_kernel_free(k);
    }
    /* duplicates: two inputs `a`, an input and an output both `a` */
    const char *dup_in[] = {"a", "a"}, *out1[] = {"out"}, *in1[] = {"a"}, *dup_out[] = {"a"};
    alloy_kernel *k = NULL;
    CHECK_FAILS(alloy_kernel_new("dups", 2, dup_in, 1, out1, simple_body, NULL, 1, 0, &k),
                ALLOY_ERROR_INVALID_ARGUMENT, "a");
    CHECK_FAILS(alloy_kernel_new("dups", 1, in1, 1, dup_out, simple_body, NULL, 1, 0, &k),
                ALLOY_ERROR_INVALID_ARGUMENT, "a");
    /* an invalid kernel name */
    CHECK_FAILS(alloy_kernel_new("my kernel", 1, in1, 1, out1, simple_body, NULL, 1, 0, &k),
                ALLOY_ERROR_INVALID_ARGUMENT, "my kernel");
    CHECK(k == NULL);
}

static void test_zero_outputs_and_whole_kernel(void) {
    const char *in1[] = {"a"}, *out1[] = {"out"};
    alloy_kernel *k = NULL;
    CHECK_FAILS(alloy_kernel_new("no_outputs", 1, in1, 0, NULL, simple_body, NULL, 1, 0, &k),
                ALLOY_ERROR_INVALID_ARGUMENT, "output");
    CHECK(k == NULL);
    const char *whole =
        "#include <metal_stdlib>\n"
        "using namespace metal;\n"
        "kernel void add_one(device const float* a [[buffer(0)]],\n"
        "                    device float* out [[buffer(1)]],\n"
        "                    uint i [[thread_position_in_grid]]) {\n"
        "  out[i] = a[i] + 1.0f;\n"
        "}\n";
    CHECK_FAILS(alloy_kernel_new("whole_kernel", 1, in1, 1, out1, whole, NULL, 1, 0, &k),
                ALLOY_ERROR_INVALID_ARGUMENT, "body");
    CHECK(k == NULL);
    /* NULL source */
    CHECK_FAILS(alloy_kernel_new("null_source", 1, in1, 1, out1, NULL, NULL, 1, 0, &k),
                ALLOY_ERROR_INVALID_ARGUMENT, "");
}

static void test_threadgroup_too_large(void) {
    alloy_kernel *k = simple_kernel("tg_too_large", simple_body, NULL);
    float x[4096] = {0};
    alloy_array *in = ku_array(ALLOY_FLOAT32, 4096, x), *out = NULL;
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    int64_t n = 4096;
    CHECK_OK(alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_grid(l, 64, 64, 2));
    alloy_status st = alloy_launch_set_threadgroup(l, 32, 32, 2);
    if (st == ALLOY_OK) {
        CHECK_FAILS(alloy_kernel_apply(k, 1, &in, l, NULL, &out), ALLOY_ERROR_INVALID_ARGUMENT,
                    "1024");
    } else {
        CHECK_MSG(st == ALLOY_ERROR_INVALID_ARGUMENT && strstr(alloy_last_error(), "1024"),
                  "%s: %s", alloy_status_name(st), alloy_last_error());
    }
    /* 1024 exactly is fine (after the clamp against the grid too) */
    CHECK_OK(alloy_launch_set_threadgroup(l, 32, 32, 1));
    CHECK_OK(alloy_kernel_apply(k, 1, &in, l, NULL, &out));
    alloy_array_free(out);
    out = NULL;
    /* 2048 requested but clamped by a small grid to 64 x 1 x 1: fine */
    CHECK_OK(alloy_launch_set_grid(l, 64, 1, 1));
    if (alloy_launch_set_threadgroup(l, 2048, 1, 1) == ALLOY_OK) {
        alloy_status s2 = alloy_kernel_apply(k, 1, &in, l, NULL, &out);
        /* either accepted after clamping or refused naming 1024; never silent */
        CHECK_MSG(s2 == ALLOY_OK || strstr(alloy_last_error(), "1024"), "%s",
                  alloy_last_error());
    }
    alloy_array_free(out);
    alloy_array_free(in);
    alloy_launch_free(l);
    alloy_kernel_free(k);
}

/* Compile errors are mapped to `<name>.body:LINE` / `<name>.header:LINE`. */
static void test_compile_errors(void) {
    float x[4] = {0};
    alloy_array *in = ku_array(ALLOY_FLOAT32, 4, x), *out = NULL;
    alloy_launch *l = simple_launch(4);

    alloy_kernel *k = simple_kernel("bad_body",
                                    "uint i = thread_position_in_grid.x;\n"
                                    "float y = a[i];\n"
                                    "out[i] = y +* ;\n"
                                    "out[i] = 2.0f;\n",
                                    NULL);
    CHECK_FAILS(alloy_kernel_apply(k, 1, &in, l, NULL, &out), ALLOY_ERROR_COMPILE,
                "bad_body.body:3");
    /* the compile API reports the same log and the generated source */
    alloy_compile_result cr;
    memset(&cr, 0, sizeof cr);
    CHECK_FAILS(alloy_kernel_compile(k, 1, &in, l, NULL, &cr), ALLOY_ERROR_COMPILE,
                "bad_body.body:3");
    CHECK(cr.log && strstr(cr.log, "bad_body.body:3"));
    CHECK(cr.source && strstr(cr.source, "y +* ;"));
    alloy_compile_result_clear(&cr);
    alloy_kernel_free(k);

    k = simple_kernel("bad_header", simple_body,
                      "inline float helper(float v) { return v * 2.0f; }\n"
                      "inline float broken(float v) { return v undefined_thing; }\n");
    CHECK_FAILS(alloy_kernel_apply(k, 1, &in, l, NULL, &out), ALLOY_ERROR_COMPILE,
                "bad_header.header:2");
    alloy_kernel_free(k);

    /* an undeclared identifier names itself */
    k = simple_kernel("undeclared", "uint i = thread_position_in_grid.x;\nout[i] = nope_xyz;\n",
                      NULL);
    CHECK_FAILS(alloy_kernel_apply(k, 1, &in, l, NULL, &out), ALLOY_ERROR_COMPILE, "nope_xyz");
    alloy_kernel_free(k);
    CHECK(out == NULL);
    alloy_array_free(in);
    alloy_launch_free(l);
}

/* Unsupported MSL constructs (textures, samplers) are errors naming the
 * construct, at construction or at compile time. */
static void test_unsupported_constructs(void) {
    const char *bodies[2] = {
        "uint i = thread_position_in_grid.x;\ntexture2d<float> tex;\nout[i] = a[i];\n",
        "uint i = thread_position_in_grid.x;\nsampler smp;\nout[i] = a[i];\n"};
    const char *needles[2] = {"texture2d", "sampler"};
    for (int b = 0; b < 2; b++) {
        const char *in_names[] = {"a"}, *out_names[] = {"out"};
        alloy_kernel *k = NULL;
        alloy_status st = alloy_kernel_new("unsupported", 1, in_names, 1, out_names, bodies[b],
                                           NULL, 1, 0, &k);
        if (st == ALLOY_OK) {
            float x[4] = {0};
            alloy_array *in = ku_array(ALLOY_FLOAT32, 4, x), *out = NULL;
            alloy_launch *l = simple_launch(4);
            st = alloy_kernel_apply(k, 1, &in, l, NULL, &out);
            alloy_array_free(in);
            alloy_array_free(out);
            alloy_launch_free(l);
            alloy_kernel_free(k);
        }
        CHECK_MSG(st != ALLOY_OK && strstr(alloy_last_error(), needles[b]),
                  "%s: %s: %s", needles[b], alloy_status_name(st), alloy_last_error());
    }
}

/* ALLOY_CXX is read when the CPU backend starts, so the missing compiler is
 * tried in a child process started with ALLOY_CXX=/nonexistent/c++ (and the
 * disk cache off, so nothing can come from it). */
static int nocxx_child(void) {
    alloy_device *dev = NULL;
    if (alloy_device_get("cpu", &dev) != ALLOY_OK) {
        fprintf(stderr, "  child: no cpu device: %s\n", alloy_last_error());
        return 2;
    }
    const char *in_names[] = {"a"}, *out_names[] = {"out"};
    alloy_kernel *k = NULL;
    if (alloy_kernel_new("no_compiler", 1, in_names, 1, out_names, simple_body, NULL, 1, 0, &k) !=
        ALLOY_OK)
        return 3;
    alloy_launch *l = NULL;
    alloy_launch_new(&l);
    int64_t n = 4;
    alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32);
    alloy_launch_set_grid(l, 4, 1, 1);
    alloy_launch_set_threadgroup(l, 4, 1, 1);
    float x[4] = {0};
    alloy_array *in = NULL, *out = NULL;
    alloy_array_from_host(dev, ALLOY_FLOAT32, 1, &n, x, &in);
    alloy_status st = alloy_kernel_apply(k, 1, &in, l, NULL, &out);
    int rc = 0;
    if (st != ALLOY_ERROR_COMPILER_MISSING) {
        fprintf(stderr, "  child: %s: %s\n", alloy_status_name(st), alloy_last_error());
        rc = 4;
    } else if (!strstr(alloy_last_error(), "/nonexistent/c++")) {
        fprintf(stderr, "  child: message does not name the compiler: %s\n", alloy_last_error());
        rc = 5;
    }
    alloy_array_free(in);
    alloy_array_free(out);
    alloy_launch_free(l);
    alloy_kernel_free(k);
    return rc;
}

static int run_child_env(const char *mode, const char *a1, const char *a2, const char *env_name,
                         const char *env_value);

static void test_compiler_missing(void) {
    if (alloy_device_backend(ku_device()) != ALLOY_BACKEND_CPU) {
        SKIP("ALLOY_CXX only matters on the CPU backend");
        return;
    }
    int rc = run_child_env("--nocxx-child", "", "", "ALLOY_CXX", "/nonexistent/c++");
    CHECK_MSG(rc == 0, "missing-compiler child failed (%d)", rc);
}

static void test_output_list_mismatch(void) {
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    int nd[2] = {1, 1};
    int64_t s0[1] = {4}, s1[1] = {5};
    const int64_t *shapes[2] = {s0, s1};
    alloy_dtype dts[1] = {ALLOY_FLOAT32};
    CHECK_FAILS(alloy_launch_set_outputs(l, 2, nd, shapes, 1, dts), ALLOY_ERROR_INVALID_ARGUMENT,
                "");
    /* shapes for two outputs on a one-output kernel: refused at apply */
    alloy_dtype dts2[2] = {ALLOY_FLOAT32, ALLOY_FLOAT32};
    CHECK_OK(alloy_launch_set_outputs(l, 2, nd, shapes, 2, dts2));
    CHECK_OK(alloy_launch_set_grid(l, 4, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 4, 1, 1));
    alloy_kernel *k = simple_kernel("output_mismatch", simple_body, NULL);
    float x[4] = {0};
    alloy_array *in = ku_array(ALLOY_FLOAT32, 4, x), *outs[2] = {0};
    CHECK_FAILS(alloy_kernel_apply(k, 1, &in, l, NULL, outs), ALLOY_ERROR_INVALID_ARGUMENT,
                "output");
    /* no outputs at all in the launch */
    alloy_launch *l2 = NULL;
    CHECK_OK(alloy_launch_new(&l2));
    CHECK_OK(alloy_launch_set_grid(l2, 4, 1, 1));
    CHECK_FAILS(alloy_kernel_apply(k, 1, &in, l2, NULL, outs), ALLOY_ERROR_INVALID_ARGUMENT,
                "output");
    /* an invalid output dtype and a negative dimension */
    CHECK_FAILS(alloy_launch_add_output(l2, 1, s0, (alloy_dtype)77), ALLOY_ERROR_INVALID_ARGUMENT,
                "");
    int64_t neg = -3;
    alloy_status st = alloy_launch_add_output(l2, 1, &neg, ALLOY_FLOAT32);
    if (st == ALLOY_OK)
        CHECK_FAILS(alloy_kernel_apply(k, 1, &in, l2, NULL, outs), ALLOY_ERROR_INVALID_ARGUMENT,
                    "");
    else
        CHECK(st == ALLOY_ERROR_INVALID_ARGUMENT);
    alloy_array_free(in);
    alloy_launch_free(l);
    alloy_launch_free(l2);
    alloy_kernel_free(k);
}

/* ---- corrupt disk-cache entry, in child processes ------------------------ */

/* Child: with the cache at `dir`, compile and run a fixed kernel; exit code 0
 * if the results are right, 10 + from_cache otherwise... the expected
 * from_cache value is passed in `want_from` (-1 = don't care). */
static int cache_child(const char *dir, int want_from) {
    setenv("ALLOY_CACHE_DIR", dir, 1);
    unsetenv("ALLOY_CACHE");
    alloy_kernel *k = NULL;
    const char *in_names[] = {"a"}, *out_names[] = {"out"};
    if (alloy_kernel_new("cache_victim", 1, in_names, 1, out_names,
                         "uint i = thread_position_in_grid.x;\nout[i] = a[i] * 3.0f + 1.0f;\n",
                         NULL, 1, 0, &k) != ALLOY_OK)
        return 2;
    alloy_launch *l = NULL;
    alloy_launch_new(&l);
    int64_t n = 50;
    alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32);
    alloy_launch_set_grid(l, 50, 1, 1);
    alloy_launch_set_threadgroup(l, 16, 1, 1);
    float x[50], got[50];
    for (int i = 0; i < 50; i++) x[i] = (float)i;
    alloy_device *dev = NULL;
    if (alloy_device_get("cpu", &dev) != ALLOY_OK) return 3;
    alloy_array *in = NULL, *out = NULL;
    alloy_array_from_host(dev, ALLOY_FLOAT32, 1, &n, x, &in);
    alloy_compile_result cr;
    memset(&cr, 0, sizeof cr);
    alloy_status st = alloy_kernel_compile(k, 1, &in, l, dev, &cr);
    int from = cr.from_cache;
    alloy_compile_result_clear(&cr);
    if (st != ALLOY_OK) {
        fprintf(stderr, "  child compile: %s\n", alloy_last_error());
        return 4;
    }
    int rc = 0;
    if (alloy_kernel_apply(k, 1, &in, l, NULL, &out) != ALLOY_OK) {
        fprintf(stderr, "  child apply: %s\n", alloy_last_error());
        rc = 5;
    } else {
        alloy_array_copy_to_host(out, got, sizeof got);
        for (int i = 0; i < 50; i++)
            if (got[i] != x[i] * 3 + 1) rc = 6;
        if (!rc && want_from >= 0 && from != want_from) {
            fprintf(stderr, "  child: from_cache = %d, want %d\n", from, want_from);
            rc = 7;
        }
    }
    alloy_array_free(in);
    alloy_array_free(out);
    alloy_launch_free(l);
    alloy_kernel_free(k);
    return rc;
}

static int run_child_env(const char *mode, const char *a1, const char *a2, const char *env_name,
                         const char *env_value) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (env_name) setenv(env_name, env_value, 1);
        if (!strcmp(mode, "--nocxx-child")) setenv("ALLOY_CACHE", "0", 1);
        char *child_argv[] = {(char *)argv0, (char *)mode, (char *)a1, (char *)a2, NULL};
        harness_exec(argv0, child_argv);
        _exit(99);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status)
                             : 100 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static int run_child(const char *dir, int want_from) {
    char want[16];
    snprintf(want, sizeof want, "%d", want_from);
    return run_child_env("--cache-child", dir, want, NULL, NULL);
}

/* Finds regular files under `dir` (recursively) whose names end in `suffix`
 * and flips bytes in the middle of each; returns how many were corrupted. */
static int corrupt_files(const char *dir, const char *suffix) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            count += corrupt_files(path, suffix);
            continue;
        }
        size_t nl = strlen(e->d_name), sl = strlen(suffix);
        if (!S_ISREG(st.st_mode) || nl < sl || strcmp(e->d_name + nl - sl, suffix)) continue;
        FILE *f = fopen(path, "r+b");
        if (!f) continue;
        long mid = (long)st.st_size / 2;
        unsigned char b[64];
        fseek(f, mid, SEEK_SET);
        size_t got = fread(b, 1, sizeof b, f);
        for (size_t i = 0; i < got; i++) b[i] ^= 0xA5;
        fseek(f, mid, SEEK_SET);
        fwrite(b, 1, got, f);
        fclose(f);
        count++;
    }
    closedir(d);
    return count;
}

static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) remove_tree(path);
        else unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static void test_corrupt_cache_entry(void) {
    if (alloy_device_backend(ku_device()) != ALLOY_BACKEND_CPU) {
        SKIP("the corrupt-entry test uses the CPU backend's shared objects");
        return;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/alloy-cache-test-XXXXXX", tmp && *tmp ? tmp : P_tmpdir);
    if (!mkdtemp(dir)) { SKIP("mkdtemp failed"); return; }
    /* 1: compile into the empty cache (compiled now) */
    int rc = run_child(dir, 0);
    CHECK_MSG(rc == 0, "first child failed (%d)", rc);
    char cpu_dir[4200];
    snprintf(cpu_dir, sizeof cpu_dir, "%s/cpu", dir);
    int n = corrupt_files(cpu_dir, ".so");
    if (n == 0) n = corrupt_files(dir, ".so");
    CHECK_MSG(n > 0, "no .so found in the cache directory");
    /* 2: the corrupt entry must be detected and rebuilt (compiled now, right results) */
    rc = run_child(dir, 0);
    CHECK_MSG(rc == 0, "child after corruption failed (%d): the corrupt entry was %s", rc,
              rc == 7 ? "loaded instead of rebuilt" : "not handled");
    /* 3: the rebuilt entry is good and loads from disk */
    rc = run_child(dir, 2);
    CHECK_MSG(rc == 0, "child after the rebuild failed (%d)", rc);
    remove_tree(dir);
}

int main(int argc, char **argv) {
    argv0 = argv[0];
    if (argc == 4 && !strcmp(argv[1], "--cache-child")) return cache_child(argv[2], atoi(argv[3]));
    if (argc == 4 && !strcmp(argv[1], "--nocxx-child")) return nocxx_child();
    RUN(test_corrupt_cache_entry);
    RUN(test_wrong_input_count);
    RUN(test_template_errors);
    RUN(test_invalid_names);
    RUN(test_zero_outputs_and_whole_kernel);
    RUN(test_threadgroup_too_large);
    RUN(test_compile_errors);
    RUN(test_unsupported_constructs);
    RUN(test_compiler_missing);
    RUN(test_output_list_mismatch);
    return harness_finish();
}
