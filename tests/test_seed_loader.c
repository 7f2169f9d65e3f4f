/* test_seed_loader.c — the example file format parser (tests/example_loader.h,
 * shared with the CLI): the directives, header/body splitting and line
 * numbers, template defaults and overrides, every malformed-file error with
 * its line; and that every seed example in examples/ loads and constructs a
 * kernel (alloy_kernel_new validates names and the body's shape). */
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
    example_kernel ex;
    char err[256] = "";
    CHECK_MSG(example_parse(text, "t.metal", &ex, err, sizeof err) == 0, "%s", err);
    CHECK(!strcmp(ex.name, "soft_cap"));
    CHECK(ex.n_inputs == 2 && !strcmp(ex.inputs[0], "x") && !strcmp(ex.inputs[1], "cap"));
    CHECK(ex.n_outputs == 1 && !strcmp(ex.outputs[0], "out"));
    CHECK(ex.header == NULL);
    CHECK(ex.body_line == 7);
    CHECK(!strcmp(ex.body, "uint i = thread_position_in_grid.x;\nout[i] = x[i];\n"));
    CHECK(ex.ensure_row_contiguous == 1 && ex.atomic_outputs == 0 && ex.n_templates == 0);
    example_free(&ex);
    example_free(&ex); /* idempotent */
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
    example_kernel ex;
    char err[256] = "";
    CHECK_MSG(example_parse(text, "t.metal", &ex, err, sizeof err) == 0, "%s", err);
    CHECK(ex.n_inputs == 0);
    CHECK(ex.n_outputs == 2 && !strcmp(ex.outputs[1], "b"));
    CHECK(ex.n_templates == 3);
    const example_template *t = example_find_template(&ex, "T");
    CHECK(t && t->kind == EXAMPLE_TEMPLATE_DTYPE && t->dtype == ALLOY_FLOAT16);
    t = example_find_template(&ex, "N"); /* the later value wins */
    CHECK(t && t->kind == EXAMPLE_TEMPLATE_INT && t->ivalue == -3);
    t = example_find_template(&ex, "B");
    CHECK(t && t->kind == EXAMPLE_TEMPLATE_BOOL && t->ivalue == 1);
    CHECK(example_find_template(&ex, "Z") == NULL);
    CHECK(ex.ensure_row_contiguous == 0 && ex.atomic_outputs == 1);
    CHECK(ex.header && ex.header_line == 9);
    CHECK(ex.header && !strcmp(ex.header, "#include <metal_stdlib>\r\n"
                                          "// a header comment, and a blank line:\r\n\r\n"));
    CHECK(ex.body_line == 13);
    CHECK(ex.body && strstr(ex.body, "//! not a directive") != NULL);
    /* Overrides, as the CLI's --template applies them. */
    CHECK_MSG(example_set_template(&ex, "T=float32", err, sizeof err) == 0, "%s", err);
    CHECK_MSG(example_set_template(&ex, "M=7", err, sizeof err) == 0, "%s", err);
    t = example_find_template(&ex, "T");
    CHECK(t && t->dtype == ALLOY_FLOAT32);
    CHECK(ex.n_templates == 4);
    CHECK(example_set_template(&ex, "oops", err, sizeof err) != 0 && strstr(err, "NAME=VALUE"));
    CHECK(example_set_template(&ex, "T=notatype", err, sizeof err) != 0);
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(example_add_templates(&ex, l));
    alloy_launch_free(l);
    example_free(&ex);
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
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        example_kernel ex;
        char err[512] = "";
        int rc = example_parse(cases[i].text, "t.metal", &ex, err, sizeof err);
        CHECK_MSG(rc != 0, "case %zu parsed", i);
        CHECK_MSG(strstr(err, cases[i].needle) != NULL, "case %zu: message \"%s\" lacks \"%s\"", i,
                  err, cases[i].needle);
        CHECK(ex.name == NULL && ex.body == NULL); /* freed on failure */
    }
}

static void test_load_missing_file(void) {
    example_kernel ex;
    char err[512] = "";
    CHECK(example_load(ALLOY_SOURCE_DIR "/examples/no_such_kernel.metal", &ex, err, sizeof err) != 0);
    CHECK_MSG(strstr(err, "cannot open") != NULL, "%s", err);
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
        CHECK_MSG(!strcmp(sk.ex.name, files[i].name), "%s: name %s", files[i].file, sk.ex.name);
        CHECK(sk.ex.n_inputs == files[i].n_in && sk.ex.n_outputs == files[i].n_out);
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
    RUN(test_load_missing_file);
    RUN(test_all_examples_construct);
    return harness_finish();
}
