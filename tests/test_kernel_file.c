/* test_kernel_file.c — the kernel file parser (include/alloy/kernel_file.h,
 * the one parser of the format for the CLI, tests, benchmarks, linter and
 * Python): the directives, header/body splitting and line numbers, template
 * defaults and overrides, every malformed-file error with its line; and that
 * every seed example in examples/ loads and constructs a kernel
 * (alloy_kernel_new validates names and the body's shape). */
#include "seed_refs.h"

static void test_parse_minimal(void) {
    const char *text = "// a comment\n"
                       "\n"
                       "//! name: soft_cap\n"
                       "//! inputs: x cap\n"
                       "//! outputs: out\n"
                       "//! body:\n"
                       "uint i = thread_position_in_grid.x;\n"
                       "out[i] = x[i];\n";
    alloy_kernel_file *f = NULL;
    CHECK_OK(alloy_kernel_file_parse(text, strlen(text), "t.metal", &f));
    if (!f) return;
    CHECK(!strcmp(alloy_kernel_file_path(f), "t.metal"));
    CHECK(!strcmp(alloy_kernel_file_name(f), "soft_cap"));
    const char *const *in = alloy_kernel_file_inputs(f);
    CHECK(alloy_kernel_file_n_inputs(f) == 2 && !strcmp(in[0], "x") && !strcmp(in[1], "cap") && !in[2]);
    CHECK(alloy_kernel_file_n_outputs(f) == 1 && !strcmp(alloy_kernel_file_outputs(f)[0], "out"));
    CHECK(alloy_kernel_file_header(f) == NULL && alloy_kernel_file_header_line(f) == 0);
    CHECK(alloy_kernel_file_body_line(f) == 7);
    CHECK(!strcmp(alloy_kernel_file_body(f), "uint i = thread_position_in_grid.x;\nout[i] = x[i];\n"));
    CHECK(alloy_kernel_file_ensure_row_contiguous(f) == 1 && alloy_kernel_file_atomic_outputs(f) == 0);
    CHECK(alloy_kernel_file_n_templates(f) == 0);
    alloy_kernel_file_free(f);
    alloy_kernel_file_free(NULL);
    /* text without a final newline, given by length (not NUL-terminated) */
    char buf[128];
    const char *t2 = "//! name: k\n//! inputs:\n//! outputs: o\n//! body:\no[0] = 1;";
    size_t n2 = strlen(t2);
    memcpy(buf, t2, n2);
    buf[n2] = 'X'; /* past the given length: must not be read */
    CHECK_OK(alloy_kernel_file_parse(buf, n2, NULL, &f));
    if (f) {
        CHECK(!strcmp(alloy_kernel_file_body(f), "o[0] = 1;"));
        CHECK(!strcmp(alloy_kernel_file_path(f), "<kernel file>"));
        alloy_kernel_file_free(f);
    }
}

static void test_parse_full(void) {
    const char *text = "//! name: k2\r\n"
                       "//! inputs:\r\n"
                       "//! outputs: a, b\r\n"
                       "//! template: T=float16 N=12\r\n"
                       "//! template: B=true N=-3\r\n"
                       "//! ensure_row_contiguous: false\r\n"
                       "//! atomic_outputs: true\r\n"
                       "//! header:\r\n"
                       "#include <metal_stdlib>\r\n"
                       "// a header comment, and a blank line:\r\n"
                       "\r\n"
                       "//! body:\r\n"
                       "a[0] = 1;\r\n"
                       "//! not a directive any more: this is body text\r\n";
    alloy_kernel_file *f = NULL;
    CHECK_OK(alloy_kernel_file_parse(text, strlen(text), "t.metal", &f));
    if (!f) return;
    CHECK(alloy_kernel_file_n_inputs(f) == 0 && alloy_kernel_file_inputs(f)[0] == NULL);
    CHECK(alloy_kernel_file_n_outputs(f) == 2 && !strcmp(alloy_kernel_file_outputs(f)[1], "b"));
    CHECK(alloy_kernel_file_n_templates(f) == 3);
    alloy_kernel_file_template t;
    CHECK(alloy_kernel_file_find_template(f, "T", &t) && t.kind == ALLOY_KERNEL_FILE_TEMPLATE_DTYPE &&
          t.dtype == ALLOY_FLOAT16);
    CHECK(alloy_kernel_file_find_template(f, "N", &t) && /* the later value wins, in place */
          t.kind == ALLOY_KERNEL_FILE_TEMPLATE_INT && t.ivalue == -3);
    CHECK(alloy_kernel_file_find_template(f, "B", &t) && t.kind == ALLOY_KERNEL_FILE_TEMPLATE_BOOL &&
          t.ivalue == 1);
    CHECK(!alloy_kernel_file_find_template(f, "Z", &t));
    CHECK_OK(alloy_kernel_file_template_at(f, 1, &t));
    CHECK(!strcmp(t.name, "N")); /* file order */
    CHECK_FAILS(alloy_kernel_file_template_at(f, 3, &t), ALLOY_ERROR_INVALID_ARGUMENT, "no template argument 3");
    CHECK(alloy_kernel_file_ensure_row_contiguous(f) == 0 && alloy_kernel_file_atomic_outputs(f) == 1);
    const char *h = alloy_kernel_file_header(f);
    CHECK(h && alloy_kernel_file_header_line(f) == 9);
    CHECK(h && !strcmp(h, "#include <metal_stdlib>\r\n"
                          "// a header comment, and a blank line:\r\n\r\n"));
    CHECK(alloy_kernel_file_body_line(f) == 13);
    CHECK(strstr(alloy_kernel_file_body(f), "//! not a directive") != NULL);
    /* Overrides, as the CLI's flags apply them. */
    CHECK_OK(alloy_kernel_file_set_template(f, "T=float32"));
    CHECK_OK(alloy_kernel_file_set_template(f, "M=7"));
    CHECK(alloy_kernel_file_find_template(f, "T", &t) && t.dtype == ALLOY_FLOAT32);
    CHECK(alloy_kernel_file_n_templates(f) == 4);
    CHECK_FAILS(alloy_kernel_file_set_template(f, "oops"), ALLOY_ERROR_INVALID_ARGUMENT, "NAME=VALUE");
    CHECK_FAILS(alloy_kernel_file_set_template(f, "T=notatype"), ALLOY_ERROR_INVALID_ARGUMENT,
                "neither an integer, true/false nor a dtype");
    CHECK_OK(alloy_kernel_file_set_name(f, "renamed"));
    CHECK(!strcmp(alloy_kernel_file_name(f), "renamed"));
    CHECK_FAILS(alloy_kernel_file_set_name(f, "9x"), ALLOY_ERROR_INVALID_ARGUMENT, "not a C identifier");
    CHECK_OK(alloy_kernel_file_set_inputs(f, "p, q r"));
    CHECK(alloy_kernel_file_n_inputs(f) == 3 && !strcmp(alloy_kernel_file_inputs(f)[2], "r"));
    CHECK_FAILS(alloy_kernel_file_set_inputs(f, "p p"), ALLOY_ERROR_INVALID_ARGUMENT, "name \"p\" appears twice");
    CHECK(alloy_kernel_file_n_inputs(f) == 3); /* unchanged by the failed override */
    CHECK_FAILS(alloy_kernel_file_set_outputs(f, " "), ALLOY_ERROR_INVALID_ARGUMENT, "at least one output");
    alloy_kernel_file_set_ensure_row_contiguous(f, 1);
    alloy_kernel_file_set_atomic_outputs(f, 0);
    CHECK(alloy_kernel_file_ensure_row_contiguous(f) == 1 && alloy_kernel_file_atomic_outputs(f) == 0);
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_kernel_file_add_templates(f, l));
    alloy_launch_free(l);
    alloy_kernel_file_free(f);
}

/* Each malformed file fails with a message naming the file, the line (where
 * there is one) and the problem. */
static void test_parse_errors(void) {
    static const struct {
        const char *text, *needle;
    } cases[] = {
        {"//! name: a\n//! inputs: x\n//! outputs: y\n", "t.metal: no `//! body:`"},
        {"//! inputs: x\n//! outputs: y\n//! body:\ny[0]=x[0];\n", "no `//! name:`"},
        {"//! name: a\n//! outputs: y\n//! body:\ny[0]=1;\n", "no `//! inputs:`"},
        {"//! name: a\n//! inputs: x\n//! body:\ny[0]=1;\n", "no outputs"},
        {"//! name: a\n//! inputs: x\n//! outputs:\n//! body:\ny[0]=1;\n", "no outputs"},
        {"//! name: a\n//! inputs: x\n//! outputs: y\n//! body:\n  \n\n", "t.metal:5: the body is empty"},
        {"//! name: 1a\n", "t.metal:1: kernel name \"1a\""},
        {"//! name: a\n//! name: b\n", "t.metal:2: `//! name:` appears twice"},
        {"//! name: a\n//! inputs: x x\n", "t.metal:2: name \"x\" appears twice"},
        {"//! name: a\n//! inputs: x-y\n", "t.metal:2: \"x-y\" is not a valid name"},
        {"//! name: a\n//! inputs: x\n//! outputs: x\n//! body:\nx[0]=1;\n", "both an input and an output"},
        {"//! name: a\n//! grid: 4\n", "t.metal:2: unknown directive `//! grid:`"},
        {"//! name a\n", "t.metal:1: malformed directive"},
        {"//! name: a\nuint i = 0;\n//! body:\n", "t.metal:2: expected a `//! key: value`"},
        {"//! name: a\n//! header: x\n", "t.metal:2: `//! header:` takes no value"},
        {"//! name: a\n//! header:\n#define X 1\n//! inputs: x\n", "t.metal:4: only `//! body:` may follow"},
        {"//! name: a\n//! body: y[0]=1;\n", "t.metal:2: `//! body:` takes no value"},
        {"//! name: a\n//! template: T\n", "t.metal:2: template argument \"T\" is not NAME=VALUE"},
        {"//! name: a\n//! template: T=flt\n", "t.metal:2: template argument T: \"flt\""},
        {"//! name: a\n//! template: 9T=1\n", "t.metal:2: template name \"9T\""},
        {"//! name: a\n//! atomic_outputs: maybe\n", "t.metal:2: `//! atomic_outputs:` wants true or false"},
        {"//! name: a\n//! inputs: x\n//! outputs: y\n//! body:\ny[0]\0=1;\n", "t.metal: file contains a NUL byte"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        alloy_kernel_file *f = (alloy_kernel_file *)&f; /* must come back NULL */
        size_t len = strlen(cases[i].text);
        if (strstr(cases[i].needle, "NUL")) len += 1 + strlen(cases[i].text + len + 1);
        alloy_status st = alloy_kernel_file_parse(cases[i].text, len, "t.metal", &f);
        CHECK_MSG(st == ALLOY_ERROR_INVALID_ARGUMENT, "case %zu: %s", i, alloy_status_name(st));
        CHECK_MSG(strstr(alloy_last_error(), cases[i].needle) != NULL,
                  "case %zu: message \"%s\" lacks \"%s\"", i, alloy_last_error(), cases[i].needle);
        CHECK(f == NULL);
    }
}

static void test_load_errors(void) {
    alloy_kernel_file *f = NULL;
    CHECK_FAILS(alloy_kernel_file_load(ALLOY_SOURCE_DIR "/examples/no_such_kernel.metal", &f),
                ALLOY_ERROR_IO, "no_such_kernel.metal: cannot open");
    CHECK(f == NULL);
    CHECK_FAILS(alloy_kernel_file_load(ALLOY_SOURCE_DIR "/examples", &f), ALLOY_ERROR_IO, "examples");
    CHECK_FAILS(alloy_kernel_file_load(NULL, &f), ALLOY_ERROR_INVALID_ARGUMENT, "path is NULL");
    CHECK_FAILS(alloy_kernel_file_parse("", 0, "e.metal", NULL), ALLOY_ERROR_INVALID_ARGUMENT, "out is NULL");
    /* a file's errors carry its path and line */
    CHECK_OK(alloy_kernel_file_load(ALLOY_SOURCE_DIR "/examples/soft_cap.metal", &f));
    if (f) {
        CHECK(strstr(alloy_kernel_file_path(f), "examples/soft_cap.metal") != NULL);
        /* body line N is file line body_line + N - 1: the body's first line
         * in the file is the line after `//! body:` */
        CHECK(alloy_kernel_file_body_line(f) > 1);
        alloy_kernel *k = NULL;
        CHECK_OK(alloy_kernel_file_new_kernel(f, &k));
        CHECK(k && !strcmp(alloy_kernel_name(k), "soft_cap"));
        alloy_kernel_free(k);
        alloy_kernel_file_free(f);
    }
}

/* Every seed example parses, has the documented interface, and constructs. */
static void test_all_examples_construct(void) {
    static const struct {
        const char *file, *name;
        int n_in, n_out;
    } files[] = {
        {"soft_cap.metal", "soft_cap", 2, 1},       {"memcpy.metal", "memcpy", 1, 1},
        {"soft_cap_vec4.metal", "soft_cap_vec4", 2, 1}, {"memcpy_vec4.metal", "memcpy_vec4", 1, 1},
        {"exp.metal", "myexp", 1, 1},               {"depthwise3.metal", "depthwise3", 3, 1},
        {"qr_col_dot.metal", "qr_col_dot", 2, 1},   {"qr_col_dot_simd.metal", "qr_col_dot_simd", 2, 1},
        {"qr_update_vec.metal", "qr_update_vec", 3, 1}, {"gemm_av.metal", "gemm_av", 2, 1},
        {"gemm_at_b.metal", "gemm_at_b", 2, 1},     {"ivf_topk_l2.metal", "ivf_topk_l2", 3, 2},
        {"mlstm_step.metal", "mlstm_step", 8, 4},
    };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        seed_kernel sk;
        if (!seed_kernel_load(files[i].file, &sk)) continue;
        CHECK_MSG(!strcmp(alloy_kernel_file_name(sk.file), files[i].name), "%s: name %s", files[i].file,
                  alloy_kernel_file_name(sk.file));
        CHECK(alloy_kernel_file_n_inputs(sk.file) == files[i].n_in &&
              alloy_kernel_file_n_outputs(sk.file) == files[i].n_out);
        CHECK(alloy_kernel_num_inputs(sk.kernel) == files[i].n_in);
        CHECK(alloy_kernel_num_outputs(sk.kernel) == files[i].n_out);
        CHECK(!strcmp(alloy_kernel_name(sk.kernel), files[i].name));
        seed_kernel_free(&sk);
    }
}

int main(void) {
    RUN(test_parse_minimal);
    RUN(test_parse_full);
    RUN(test_parse_errors);
    RUN(test_load_errors);
    RUN(test_all_examples_construct);
    return harness_finish();
}
