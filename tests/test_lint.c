/* test_lint.c — `alloy lint`: for every rule a case that fires (with the
 * right line) and a close case that must not; Python extraction (string
 * kinds, names followed to their literal, launches, f-strings); the
 * repository's own examples are clean; the CLI's text and JSON output and
 * exit status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "harness.h"
#include "lint/lint.h"

/* Lints Python text; returns how many findings of `rule` there are, and
 * the line of the first in *line. */
static int py(const char *text, const char *rule, int *line) {
    alloy_lint_report r = {0};
    CHECK_OK(alloy_lint_python(text, strlen(text), &r));
    int n = 0;
    for (int i = 0; i < r.n; i++)
        if (!strcmp(r.v[i].rule, rule)) {
            if (!n && line) *line = r.v[i].line;
            n++;
        }
    alloy_lint_report_free(&r);
    return n;
}

/* py() on a kernel definition followed by one launch line. */
static int py_launch(const char *kernel, const char *launch, const char *rule, int *line) {
    char buf[2048];
    snprintf(buf, sizeof buf, "%s%s\n", kernel, launch);
    return py(buf, rule, line);
}

/* Lints a kernel file's text the way the CLI does. */
static int metal(const char *text, const char *rule, int *line) {
    alloy_kernel_file *f = NULL;
    CHECK_OK(alloy_kernel_file_parse(text, strlen(text), "t.metal", &f));
    if (!f) return -1;
    alloy_lint_kernel k = {.name = alloy_kernel_file_name(f),
                           .body = alloy_kernel_file_body(f),
                           .body_line = alloy_kernel_file_body_line(f),
                           .outputs = alloy_kernel_file_outputs(f),
                           .n_outputs = alloy_kernel_file_n_outputs(f),
                           .atomic_outputs = alloy_kernel_file_atomic_outputs(f),
                           .in_kernel_file = 1};
    alloy_lint_report r = {0};
    alloy_lint_kernel_check(&k, &r);
    int n = 0;
    for (int i = 0; i < r.n; i++)
        if (!strcmp(r.v[i].rule, rule)) {
            if (!n && line) *line = r.v[i].line;
            n++;
        }
    alloy_lint_report_free(&r);
    alloy_kernel_file_free(f);
    return n;
}

#define HEAD "//! name: k\n//! inputs: x\n//! outputs: out\n//! body:\n" /* body line 1 = file line 5 */

static void test_kernel_definition(void) {
    int line = 0;
    CHECK(metal(HEAD "// the whole function\nkernel void k(device float* out [[buffer(0)]]) { out[0] = 1; }\n",
                "kernel-definition", &line) == 1 && line == 6);
    CHECK(metal(HEAD "float kernel_value = 1.0f; // a name that starts with kernel\nout[0] = kernel_value;\n",
                "kernel-definition", NULL) == 0);
}

static void test_grid_rules(void) {
    const char *pre = "import mlx.core as mx\n"
                      "k = mx.fast.metal_kernel(name='k', input_names=['x'], output_names=['out'],\n"
                      "    source='uint i = thread_position_in_grid.x; if (i < n) out[i] = x[i];')\n";
    int line = 0;
    CHECK(py_launch(pre, "out = k(inputs=[x], grid=((n + 255) // 256, 1, 1), threadgroup=(256, 1, 1))", "grid-is-threadgroup-count", &line) == 1 && line == 4);
    CHECK(py_launch(pre, "out = k(inputs=[x], grid=(math.ceil(n / 128), 1, 1), threadgroup=(128, 1, 1))", "grid-is-threadgroup-count", NULL) == 1);
    CHECK(py_launch(pre, "out = k(inputs=[x], grid=(4, 1, 1), threadgroup=(256, 1, 1))", "grid-is-threadgroup-count", NULL) == 1);
    /* threads, and a grid rounded up to a multiple of the group: fine */
    CHECK(py_launch(pre, "out = k(inputs=[x], grid=(n, 1, 1), threadgroup=(256, 1, 1))", "grid-is-threadgroup-count", NULL) == 0);
    const char *rounded = "out = k(inputs=[x], grid=((n + 255) // 256 * 256, 1, 1), threadgroup=(256, 1, 1))";
    CHECK(py_launch(pre, rounded, "grid-is-threadgroup-count", NULL) == 0);
    CHECK(py_launch(pre, rounded, "unguarded-output-write", NULL) == 0); /* the body checks i < n */
}

static void test_divergent_barrier(void) {
    int line = 0;
    CHECK(metal(HEAD "uint l = thread_position_in_threadgroup.x;\n"
                     "if (l < 16) {\n"
                     "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
                     "}\nout[0] = 0;\n",
                "barrier-in-divergent-branch", &line) == 1 && line == 7);
    /* a loop whose trip count depends on the thread */
    CHECK(metal(HEAD "for (uint k = thread_index_in_threadgroup; k < 100; k += 32)\n"
                     "  threadgroup_barrier(mem_flags::mem_threadgroup);\nout[0] = 0;\n",
                "barrier-in-divergent-branch", NULL) == 1);
    /* uniform conditions, and a loop variable reusing a tainted name */
    CHECK(metal(HEAD "uint l = thread_position_in_threadgroup.x;\n"
                     "for (int i = int(l); i < 64; i += 32) out[i] = 0;\n"
                     "for (int i = 0; i < int(x_shape[0]); i++) {\n"
                     "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
                     "}\n"
                     "if (threadgroup_position_in_grid.x == 0) threadgroup_barrier(mem_flags::mem_none);\n",
                "barrier-in-divergent-branch", NULL) == 0);
}

static void test_threadgroup_race(void) {
    int line = 0;
    CHECK(metal(HEAD "threadgroup float t[32];\n"
                     "uint l = thread_index_in_threadgroup;\n"
                     "t[l] = x[l];\n"
                     "out[l] = t[31 - l];\n",
                "threadgroup-race", &line) == 1 && line == 8);
    /* with the barrier; own element; a reduction step reading before writing */
    CHECK(metal(HEAD "threadgroup float t[32];\n"
                     "uint l = thread_index_in_threadgroup;\n"
                     "t[l] = x[l];\n"
                     "float mine = t[l];\n"
                     "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
                     "for (uint s = 16; s > 0; s >>= 1) {\n"
                     "  if (l < s) t[l] += t[l + s];\n"
                     "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
                     "}\n"
                     "out[l] = t[0] + mine;\n",
                "threadgroup-race", NULL) == 0);
}

static void test_output_read_first(void) {
    int line = 0;
    CHECK(metal(HEAD "uint i = thread_position_in_grid.x;\nout[i] += x[i];\n", "output-read-before-write", &line) == 1 &&
          line == 6);
    CHECK(metal(HEAD "uint i = thread_position_in_grid.x;\nout[i] = x[i];\nout[i] += 1.0f;\n",
                "output-read-before-write", NULL) == 0);
    /* a launch with init_value makes it fine; one without makes it an error */
    const char *k = "k = mx.fast.metal_kernel(name='acc', input_names=['x'], output_names=['out'],\n"
                    "    source='''\nout[0] += x[thread_position_in_grid.x];\n''')\n";
    char buf[768];
    CHECK(py_launch(k, "k(inputs=[x], grid=(8, 1, 1), threadgroup=(8, 1, 1), init_value=0)", "output-read-before-write", NULL) == 0);
    snprintf(buf, sizeof buf, "%sk(inputs=[x], grid=(8, 1, 1), threadgroup=(8, 1, 1))\n", k);
    alloy_lint_report r = {0};
    CHECK_OK(alloy_lint_python(buf, strlen(buf), &r));
    int found = 0;
    for (int i = 0; i < r.n; i++)
        if (!strcmp(r.v[i].rule, "output-read-before-write")) {
            found = 1;
            CHECK(r.v[i].level == ALLOY_LINT_ERROR && r.v[i].line == 3);
        }
    CHECK(found);
    alloy_lint_report_free(&r);
}

static void test_unguarded_write(void) {
    const char *k = "k = metal_kernel(name='k', input_names=['x'], output_names=['out'],\n"
                    "    source='uint i = thread_position_in_grid.x;\\nout[i] = x[i] * 2;')\n";
    int line = 0;
    CHECK(py_launch(k, "k(inputs=[x], grid=(-(-n // 64) * 64, 1, 1), threadgroup=(64, 1, 1))", "unguarded-output-write", &line) == 1 && line == 2); /* a one-line literal: its line */
    CHECK(py_launch(k, "k(inputs=[x], grid=(n, 1, 1), threadgroup=(64, 1, 1))", "unguarded-output-write", NULL) == 0); /* the grid counts exactly n threads */
}

static void test_small_threadgroup_array(void) {
    const char *k = "k = metal_kernel(name='k', input_names=['x'], output_names=['out'], source=SRC)\n";
    char buf[1024];
    int line = 0;
    snprintf(buf, sizeof buf,
             "SRC = \"\"\"\nthreadgroup float t[64];\nuint l = thread_position_in_threadgroup.x;\n"
             "t[l] = x[l];\nthreadgroup_barrier(mem_flags::mem_threadgroup);\nout[l] = t[l];\n\"\"\"\n%s"
             "k(inputs=[x], grid=(256, 1, 1), threadgroup=(128, 1, 1))\n",
             k);
    CHECK(py(buf, "threadgroup-array-too-small", &line) == 1 && line == 4);
    snprintf(buf, sizeof buf,
             "SRC = \"\"\"\nthreadgroup float t[128];\nuint l = thread_position_in_threadgroup.x;\n"
             "t[l] = x[l];\nthreadgroup_barrier(mem_flags::mem_threadgroup);\nout[l] = t[l];\n\"\"\"\n%s"
             "k(inputs=[x], grid=(256, 1, 1), threadgroup=(128, 1, 1))\n",
             k);
    CHECK(py(buf, "threadgroup-array-too-small", NULL) == 0);
}

static void test_division_in_loop(void) {
    int line = 0;
    CHECK(metal(HEAD "uint n = uint(x_shape[1]);\nfloat s = 0;\n"
                     "for (uint k = 0; k < 64; k++) s += x[k / n + k % n];\nout[0] = s;\n",
                "division-in-loop", &line) == 1 && line == 7);
    CHECK(metal(HEAD "constexpr uint N = 8;\nfloat s = 0;\n"
                     "for (uint k = 0; k < 64; k++) s += x[k / N] / 3.0f;\nuint n = uint(x_shape[1]);\n"
                     "out[0] = s / float(n);\n",
                "division-in-loop", NULL) == 0);
}

static void test_atomic_without_init(void) {
    const char *k = "k = mx.fast.metal_kernel(name='h', input_names=['x'], output_names=['out'],\n"
                    "    atomic_outputs=True, source=r'''\n"
                    "atomic_fetch_add_explicit(&out[0], x[thread_position_in_grid.x], memory_order_relaxed);\n''')\n";
    int line = 0;
    CHECK(py_launch(k, "out = k(inputs=[x], grid=(64, 1, 1), threadgroup=(64, 1, 1))", "atomic-outputs-without-init", &line) == 1 && line == 5);
    CHECK(py_launch(k, "out = k(inputs=[x], grid=(64, 1, 1), threadgroup=(64, 1, 1), init_value=0.0)", "atomic-outputs-without-init", NULL) == 0);
    CHECK(py_launch(k, "out = k(inputs=[x], **launch)", "atomic-outputs-without-init", NULL) == 0); /* unknown */
}

static void test_python_extraction(void) {
    /* a source built by a call is reported as not checked; f-strings are checked with each `{...}` as an
     * opaque name (`{{` `}}` are braces); names follow their literal */
    int line = 0;
    CHECK(py("k = mx.fast.metal_kernel(name='f', input_names=[], output_names=['o'], source=make(v))\n",
             "unresolved-source", &line) == 1 && line == 1);
    CHECK(py("k = mx.fast.metal_kernel(name='f', input_names=[], output_names=['o'], source=f'o[0] = {v};')\n",
             "unresolved-source", NULL) == 0);
    CHECK(py("k = metal_kernel(name='f', input_names=[], output_names=['o'], source=f'''\n"
             "uint l = thread_position_in_threadgroup.x;\n"
             "if (l < {half}) {{ threadgroup_barrier(mem_flags::mem_threadgroup); }}\n"
             "o[l] = {scale};\n''')\n",
             "barrier-in-divergent-branch", &line) == 1 && line == 3);
    CHECK(py("# metal_kernel( in a comment\ns = 'metal_kernel(' # and in a string\n", "unresolved-source", NULL) == 0);
    CHECK(py("SRC = (\n  'uint l = thread_position_in_threadgroup.x;\\n'\n  'if (l < 2) threadgroup_barrier(mem_flags::mem_threadgroup);\\n'\n)\n"
             "k = metal_kernel(name='k', input_names=[], output_names=['o'], source=SRC)\n",
             "barrier-in-divergent-branch", &line) == 1 && line == 3); /* parenthesised literals, one per line */
    CHECK(py("SRC = 'uint l = thread_position_in_threadgroup.x;\\n' 'if (l < 2) threadgroup_barrier(mem_flags::mem_threadgroup);\\n'\n"
             "k = metal_kernel(name='k', input_names=[], output_names=['o'], source=SRC)\n",
             "barrier-in-divergent-branch", &line) == 1 && line == 1);
}

/* Runs the CLI (through ALLOY_TEST_LAUNCHER in a cross build) with stdout
 * into out_path; returns its exit status. */
static int run_cli(const char *out_path, const char *const *args) {
    char *argv[16] = {(char *)ALLOY_BINARY_DIR "/alloy"};
    int n = 1;
    for (; args[n - 1] && n < 15; n++) argv[n] = (char *)args[n - 1];
    argv[n] = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644), null = open("/dev/null", O_WRONLY);
        if (fd < 0 || null < 0) _exit(127);
        dup2(fd, 1);
        dup2(null, 2);
        harness_exec(argv[0], argv);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = calloc(1, 1 << 16);
    if (b) b[fread(b, 1, (1 << 16) - 1, f)] = 0;
    fclose(f);
    return b;
}

static void test_cli(void) {
    char dir[] = "/tmp/alloy-lint-XXXXXX";
    if (!mkdtemp(dir)) return;
    char bad[256], out[256];
    snprintf(bad, sizeof bad, "%s/bad.metal", dir);
    snprintf(out, sizeof out, "%s/out.txt", dir);
    FILE *f = fopen(bad, "w");
    fputs(HEAD "uint l = thread_position_in_threadgroup.x;\nif (l < 4) threadgroup_barrier(mem_flags::mem_threadgroup);\n"
               "out[l] = 0;\n",
          f);
    fclose(f);
    /* the repository's examples are clean */
    const char *clean[] = {"lint", ALLOY_SOURCE_DIR "/examples/gemm_av.metal", ALLOY_SOURCE_DIR "/examples/soft_cap.metal",
                           ALLOY_SOURCE_DIR "/examples/ivf_topk_l2.metal", ALLOY_SOURCE_DIR "/examples/mlstm_step.metal",
                           ALLOY_SOURCE_DIR "/examples/qr_col_dot_simd.metal",
                           ALLOY_SOURCE_DIR "/python/examples/exp_elementwise.py", NULL};
    CHECK(run_cli(out, clean) == 0);
    char *text = slurp(out);
    CHECK(text && text[0] == 0);
    free(text);
    const char *one[] = {"lint", bad, NULL};
    CHECK(run_cli(out, one) == 1);
    text = slurp(out);
    CHECK(text && strstr(text, "bad.metal:6: error: [barrier-in-divergent-branch]") && strstr(text, "(fix: "));
    free(text);
    const char *json[] = {"lint", "--format", "json", bad, NULL};
    CHECK(run_cli(out, json) == 1);
    text = slurp(out);
    CHECK(text && text[0] == '[' && strstr(text, "\"rule\": \"barrier-in-divergent-branch\"") &&
          strstr(text, "\"line\": 6") && strstr(text, "\"level\": \"error\""));
    free(text);
    const char *missing[] = {"lint", "/nonexistent/x.metal", NULL};
    CHECK(run_cli(out, missing) == 2);
    const char *usage[] = {"lint", NULL};
    CHECK(run_cli(out, usage) == 2);
    remove(bad);
    remove(out);
    rmdir(dir);
}

int main(void) {
    RUN(test_kernel_definition);
    RUN(test_grid_rules);
    RUN(test_divergent_barrier);
    RUN(test_threadgroup_race);
    RUN(test_output_read_first);
    RUN(test_unguarded_write);
    RUN(test_small_threadgroup_array);
    RUN(test_division_in_loop);
    RUN(test_atomic_without_init);
    RUN(test_python_extraction);
    RUN(test_cli);
    return harness_finish();
}
