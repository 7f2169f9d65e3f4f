/* test_dialect.c — the MSL dialect on its own: scanner, identifier mentions,
 * name rules, source analysis, the MSL-to-C++ rewrite and code generation.
 *
 * Pure text checks: no C++ compiler and no backend are needed, so these run
 * everywhere and pin down the exact shape of what the backends compile. */
#include <stdlib.h>
#include <string.h>

#include "dialect/dialect.h"
#include "dialect/rewrite.h"
#include "harness.h"

/* ---- helpers ------------------------------------------------------------- */

static int count_char(const char *s, char c) {
    int n = 0;
    for (; *s; s++) n += *s == c;
    return n;
}

static int tok_eq(const char *src, const alloy_token *t, const char *text) {
    return (size_t)t->len == strlen(text) && memcmp(src + t->start, text, (size_t)t->len) == 0;
}

/* Index of the first token with this text, or -1. */
static int find_tok(const char *src, const alloy_token *t, int n, const char *text) {
    for (int i = 0; i < n; i++)
        if (tok_eq(src, &t[i], text)) return i;
    return -1;
}

/* The rewrite of src (malloc'd), or NULL on failure. */
static char *rewrite(const char *src) {
    alloy_strbuf sb;
    alloy_sb_init(&sb);
    if (alloy_rewrite_msl(src, "the test source", 0, &sb) != ALLOY_OK) {
        fprintf(stderr, "  rewrite failed: %s\n", alloy_last_error());
        alloy_sb_free(&sb);
        return NULL;
    }
    if (sb.len == 0) alloy_sb_append(&sb, "");
    return alloy_sb_take(&sb);
}

/* Checks rewrite(src) == want, and that newlines are where they were. */
#define CHECK_REWRITE(src, want)                                                            \
    do {                                                                                    \
        char *got_ = rewrite(src);                                                          \
        CHECK_MSG(got_ && strcmp(got_, (want)) == 0, "\n    src:  [%s]\n    got:  [%s]\n"   \
                  "    want: [%s]", (src), got_ ? got_ : "(null)", (want));                 \
        if (got_) CHECK(count_char(got_, '\n') == count_char((src), '\n'));                 \
        free(got_);                                                                         \
    } while (0)

static int contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

/* ---- scanner ------------------------------------------------------------- */

static void test_scan_tricky(void) {
    const char *src =
        "int a = 1; // c \"x\n"                        /* 1 */
        "const char *s = \"http://x // no\";\n"         /* 2 */
        "char c = '\\''; /* block\n"                     /* 3 */
        "   end */ float f = 1.0f + 1.0h + 0x1Fu + 1e-3 + .5 + 1'000 + 2.5e+10;\n" /* 4, 5 */
        "#define X(a) \\\n"                              /* 6 */
        "   a + 1 // tail\n"                             /* 7 */
        "x[[y]] <<= ::a->b >>= c[d[e]];\n"               /* 8 */
        "  # pragma once\n"                              /* 9 */
        "auto r = R\"x(raw \" // )x\" + u8\"u\" + L'w';\n"; /* 10 */
    alloy_token *t = NULL;
    int n = 0;
    CHECK_OK(alloy_scan(src, "test", &t, &n));
    if (!t) return;

    int i = find_tok(src, t, n, "a");
    CHECK(i == 1 && t[i].kind == ALLOY_TOK_IDENT && t[i].line == 1 && t[i].col == 5);
    i = find_tok(src, t, n, "// c \"x");
    CHECK(i >= 0 && t[i].kind == ALLOY_TOK_COMMENT && t[i].line == 1);
    i = find_tok(src, t, n, "\"http://x // no\"");
    CHECK(i >= 0 && t[i].kind == ALLOY_TOK_STRING && t[i].line == 2 && t[i].col == 17);
    i = find_tok(src, t, n, "'\\''");
    CHECK(i >= 0 && t[i].kind == ALLOY_TOK_CHAR);
    i = find_tok(src, t, n, "/* block\n   end */");
    CHECK(i >= 0 && t[i].kind == ALLOY_TOK_COMMENT && t[i].line == 3);
    const char *numbers[] = {"1.0f", "1.0h", "0x1Fu", "1e-3", ".5", "1'000", "2.5e+10"};
    for (size_t k = 0; k < sizeof numbers / sizeof *numbers; k++) {
        i = find_tok(src, t, n, numbers[k]);
        CHECK_MSG(i >= 0 && t[i].kind == ALLOY_TOK_NUMBER && t[i].line == 4, "%s", numbers[k]);
    }
    i = find_tok(src, t, n, "float");
    CHECK(i >= 0 && t[i].line == 4 && t[i].col == 11);
    i = find_tok(src, t, n, "#define X(a) \\\n   a + 1 // tail");
    CHECK(i >= 0 && t[i].kind == ALLOY_TOK_PREPROC && t[i].line == 5);
    i = find_tok(src, t, n, "[[");
    CHECK(i >= 0 && t[i].kind == ALLOY_TOK_PUNCT && t[i].line == 7 && t[i].col == 2);
    CHECK(find_tok(src, t, n, "]]") >= 0);
    CHECK(find_tok(src, t, n, "<<=") >= 0);
    CHECK(find_tok(src, t, n, ">>=") >= 0);
    CHECK(find_tok(src, t, n, "::") >= 0);
    CHECK(find_tok(src, t, n, "->") >= 0);
    i = find_tok(src, t, n, "# pragma once");
    CHECK(i >= 0 && t[i].kind == ALLOY_TOK_PREPROC && t[i].line == 8 && t[i].col == 3);
    i = find_tok(src, t, n, "R\"x(raw \" // )x\"");
    CHECK(i >= 0 && t[i].kind == ALLOY_TOK_STRING && t[i].line == 9);
    i = find_tok(src, t, n, "u8\"u\"");
    CHECK(i >= 0 && t[i].kind == ALLOY_TOK_STRING);
    i = find_tok(src, t, n, "L'w'");
    CHECK(i >= 0 && t[i].kind == ALLOY_TOK_CHAR);
    /* nothing overlaps and every token is inside the text */
    for (int k = 1; k < n; k++) CHECK(t[k].start >= t[k - 1].start + t[k - 1].len);
    CHECK(t[n - 1].start + t[n - 1].len <= (int)strlen(src));
    free(t);

    /* an empty source has no tokens */
    CHECK_OK(alloy_scan("", "empty", &t, &n));
    CHECK(n == 0);
    free(t);
}

static void test_scan_errors(void) {
    alloy_token *t = NULL;
    int n = 0;
    CHECK_FAILS(alloy_scan("int a;\n/* open\n\n", "the body", &t, &n),
                ALLOY_ERROR_INVALID_ARGUMENT, "line 2");
    CHECK(contains(alloy_last_error(), "the body") && contains(alloy_last_error(), "comment"));
    CHECK_FAILS(alloy_scan("x = 1;\n\n s = \"abc\n;", "the header", &t, &n),
                ALLOY_ERROR_INVALID_ARGUMENT, "line 3");
    CHECK(contains(alloy_last_error(), "string"));
    CHECK_FAILS(alloy_scan("c = 'a", "src", &t, &n), ALLOY_ERROR_INVALID_ARGUMENT, "character");
    /* an apostrophe inside a directive is not an error */
    CHECK_OK(alloy_scan("#error don't\nint x;\n", "src", &t, &n));
    CHECK(n == 4);
    free(t);
}

static void test_mentions(void) {
    CHECK(alloy_source_mentions("y = max_shape[0] + x;", "x"));
    CHECK(!alloy_source_mentions("y = max_shape[0];", "x"));
    CHECK(!alloy_source_mentions("y = max_shape[0];", "max"));
    CHECK(alloy_source_mentions("y = max_shape[0];", "max_shape"));
    CHECK(!alloy_source_mentions("uint3 d = dispatch_threads_per_threadgroup;",
                                 "threads_per_threadgroup"));
    CHECK(alloy_source_mentions("uint3 d = dispatch_threads_per_threadgroup;",
                                "dispatch_threads_per_threadgroup"));
    CHECK(!alloy_source_mentions("// x_shape\n/* x_shape */ s = \"x_shape\"; c = 'x';",
                                 "x_shape"));
    CHECK(!alloy_source_mentions("int a = x_shape_2;", "x_shape"));
    CHECK(alloy_source_mentions("#define N(i) inp_shape[i]\n", "inp_shape"));
    CHECK(alloy_source_mentions("#if 1\nfloat v = inp_strides[0];\n#endif\n", "inp_strides"));
    CHECK(alloy_source_mentions("a.b->thread_position_in_grid", "thread_position_in_grid"));
    CHECK(!alloy_source_mentions(NULL, "x"));
    CHECK(!alloy_source_mentions("x", ""));
    /* unterminated text is scanned leniently */
    CHECK(alloy_source_mentions("x_ndim; /* open", "x_ndim"));
}

/* ---- names --------------------------------------------------------------- */

static void test_names(void) {
    const char *good[] = {"x", "inp", "out_0", "W", "_x", "kernel_weights", "textures",
                          "texture_coords", "simd_lane", "shape", "Tile"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECK_OK(alloy_check_identifier(good[i], "input"));
    CHECK_FAILS(alloy_check_identifier("float", "input"), ALLOY_ERROR_INVALID_ARGUMENT,
                "input name 'float' is an MSL type name");
    CHECK(contains(alloy_last_error(), "choose another name"));
    CHECK_FAILS(alloy_check_identifier("float4", "output"), ALLOY_ERROR_INVALID_ARGUMENT,
                "output name 'float4' is an MSL type name");
    const char *types[] = {"half", "bfloat", "uint3", "packed_half3", "half2x2", "bfloat16_t",
                           "int64_t", "atomic_int", "texture2d", "simdgroup_float8x8", "ulong4"};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        CHECK_FAILS(alloy_check_identifier(types[i], "input"), ALLOY_ERROR_INVALID_ARGUMENT,
                    "MSL type name");
    const char *kw[] = {"for", "return", "class", "template", "namespace", "auto"};
    for (size_t i = 0; i < sizeof kw / sizeof *kw; i++)
        CHECK_FAILS(alloy_check_identifier(kw[i], "input"), ALLOY_ERROR_INVALID_ARGUMENT,
                    "C++ keyword");
    const char *msl[] = {"device", "constant", "threadgroup", "thread", "kernel", "vertex"};
    for (size_t i = 0; i < sizeof msl / sizeof *msl; i++)
        CHECK_FAILS(alloy_check_identifier(msl[i], "input"), ALLOY_ERROR_INVALID_ARGUMENT,
                    "MSL keyword");
    CHECK_FAILS(alloy_check_identifier("threadgroup_barrier", "input"),
                ALLOY_ERROR_INVALID_ARGUMENT, "built-in");
    CHECK_FAILS(alloy_check_identifier("3x", "input"), ALLOY_ERROR_INVALID_ARGUMENT,
                "not a valid C identifier");
    CHECK_FAILS(alloy_check_identifier("a-b", "output"), ALLOY_ERROR_INVALID_ARGUMENT,
                "output name 'a-b' is not a valid C identifier");
    CHECK_FAILS(alloy_check_identifier("", "input"), ALLOY_ERROR_INVALID_ARGUMENT, "empty");
    CHECK_FAILS(alloy_check_identifier(NULL, "input"), ALLOY_ERROR_INVALID_ARGUMENT, "empty");
    CHECK_FAILS(alloy_check_identifier("alloy_x", "template argument"),
                ALLOY_ERROR_INVALID_ARGUMENT, "template argument name 'alloy_x' is reserved");
    CHECK_FAILS(alloy_check_identifier("ALLOY_N", "input"), ALLOY_ERROR_INVALID_ARGUMENT,
                "reserved");
    CHECK_FAILS(alloy_check_identifier("__x", "input"), ALLOY_ERROR_INVALID_ARGUMENT, "reserved");
    CHECK_FAILS(alloy_check_identifier("_X", "input"), ALLOY_ERROR_INVALID_ARGUMENT, "reserved");
    CHECK_FAILS(alloy_check_identifier("INFINITY", "input"), ALLOY_ERROR_INVALID_ARGUMENT,
                "prelude");
    char long_name[300];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    CHECK_FAILS(alloy_check_identifier(long_name, "input"), ALLOY_ERROR_INVALID_ARGUMENT,
                "at most 255");

    CHECK(alloy_attribute_count() == 20);
    int seen_grid = 0, seen_quad = 0;
    for (int i = 0; i < alloy_attribute_count(); i++) {
        const char *a = alloy_attribute_name(i);
        CHECK(a != NULL);
        if (!a) continue;
        seen_grid |= strcmp(a, "thread_position_in_grid") == 0;
        seen_quad |= strcmp(a, "dispatch_quadgroups_per_threadgroup") == 0;
        CHECK_FAILS(alloy_check_identifier(a, "input"), ALLOY_ERROR_INVALID_ARGUMENT,
                    "thread attribute");
    }
    CHECK(seen_grid && seen_quad);
    CHECK(alloy_attribute_name(-1) == NULL && alloy_attribute_name(20) == NULL);
}

/* ---- analysis ------------------------------------------------------------ */

static void test_analyze(void) {
    int sync = -1;
    CHECK_OK(alloy_analyze_source("k", "out[0] = inp[0];", NULL, &sync));
    CHECK(sync == 0);

    const char *whole =
        "#include <metal_stdlib>\n"
        "using namespace metal;\n"
        "kernel void soft_cap(device float* x [[buffer(0)]],\n"
        "                     uint id [[thread_position_in_grid]]) { x[id] = 0; }\n";
    CHECK_FAILS(alloy_analyze_source("soft_cap", whole, NULL, &sync),
                ALLOY_ERROR_INVALID_ARGUMENT, "the source is the body of a kernel");
    const char *msg = alloy_last_error();
    CHECK(contains(msg, "line 3") && contains(msg, "input_names") &&
          contains(msg, "output_names") && contains(msg, "between the braces"));
    CHECK_FAILS(alloy_analyze_source("k", "[[kernel]] void f(device float* x) {}", NULL, &sync),
                ALLOY_ERROR_INVALID_ARGUMENT, "the source is the body of a kernel");
    CHECK_FAILS(alloy_analyze_source("k", "template <typename T>\n[[ kernel ]]\nvoid f() {}",
                                     NULL, &sync),
                ALLOY_ERROR_INVALID_ARGUMENT, "line 2");
    CHECK_FAILS(alloy_analyze_source("k", "vertex float4 vs(uint v [[vertex_id]]) {}", NULL,
                                     &sync),
                ALLOY_ERROR_INVALID_ARGUMENT, "the source is the body of a kernel");
    CHECK_FAILS(alloy_analyze_source("k", "fragment half4 fs() { return 0; }", NULL, &sync),
                ALLOY_ERROR_INVALID_ARGUMENT, "the source is the body of a kernel");
    CHECK_FAILS(alloy_analyze_source("k", "out[0] = 1;", "kernel void g() {}", &sync),
                ALLOY_ERROR_INVALID_ARGUMENT, "header defines a kernel");
    /* `kernel` as an ordinary name, or in comments, is fine */
    CHECK_OK(alloy_analyze_source("k", "float kernel_w[3]; // kernel void f(\nout[0] = 1;",
                                  NULL, &sync));

    CHECK_FAILS(alloy_analyze_source("k", "float a = 0;\ntexture2d<float> t;\n", NULL, &sync),
                ALLOY_ERROR_COMPILE, "texture2d");
    CHECK(contains(alloy_last_error(), "line 2") && contains(alloy_last_error(), "textures"));
    CHECK_FAILS(alloy_analyze_source("k", "out[0] = 1;", "\n\nconstexpr sampler s;", &sync),
                ALLOY_ERROR_COMPILE, "line 3 of the header uses 'sampler'");
    CHECK_FAILS(alloy_analyze_source("k", "depth2d_array<float> d;", NULL, &sync),
                ALLOY_ERROR_COMPILE, "depth2d_array");
    CHECK_FAILS(alloy_analyze_source("k", "x = 1; /* open", NULL, &sync),
                ALLOY_ERROR_INVALID_ARGUMENT, "unterminated");
    CHECK(contains(alloy_last_error(), "body of kernel 'k'"));

    /* synchronisation */
    struct {
        const char *body, *header;
        int sync;
    } cases[] = {
        {"threadgroup_barrier(mem_flags::mem_threadgroup);", NULL, 1},
        {"float s = simd_sum(v);", NULL, 1},
        {"float s = metal::simd_shuffle_down(v, 1u);", NULL, 1},
        {"simdgroup_barrier(mem_flags::mem_none);", NULL, 1},
        {"simdgroup_float8x8 m;", NULL, 1},
        {"auto m = make_filled_simdgroup_matrix<float, 8, 8>(0.f);", NULL, 1},
        {"float q = quad_shuffle(v, 0);", NULL, 1},
        {"float q = simd_future_op(v);", NULL, 1},
        {"out[0] = red(x);", "float red(float v) { return simd_max(v); }", 1},
        {"out[0] = R(x);", "#define R(v) simd_sum(v)\n", 1},
        {"uint simd_lane = thread_index_in_simdgroup; out[simd_lane] = 0;", NULL, 0},
        {"if (simd_lane < 16) out[simd_lane] = simd_size;", "constant int simd_size = 32;", 0},
        {"uint g = simdgroup_index_in_threadgroup + simdgroups_per_threadgroup;", NULL, 0},
        {"// threadgroup_barrier(mem_flags::mem_threadgroup);\nout[0] = 1;", NULL, 0},
        {"const char *s = \"simd_sum(x)\";", NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sync = -1;
        CHECK_OK(alloy_analyze_source("k", cases[i].body, cases[i].header, &sync));
        CHECK_MSG(sync == cases[i].sync, "case %zu: %s", i, cases[i].body);
    }
}

/* ---- rewrite ------------------------------------------------------------- */

static void test_rewrite_address_spaces(void) {
    CHECK_REWRITE("threadgroup float buf[256];", "ALLOY_THREADGROUP float buf[256];");
    CHECK_REWRITE("x = 1;\n  threadgroup float a[2][3], b[4];",
                  "x = 1;\n  ALLOY_THREADGROUP float a[2][3], b[4];");
    CHECK_REWRITE("{ threadgroup atomic<int> count; }", "{ ALLOY_THREADGROUP atomic<int> count; }");
    CHECK_REWRITE("threadgroup vec<float*, 2> v;", "ALLOY_THREADGROUP vec<float*, 2> v;");
    CHECK_REWRITE("threadgroup float* p = buf;", "            float* p = buf;");
    CHECK_REWRITE("threadgroup float& r = buf[0];", "            float& r = buf[0];");
    CHECK_REWRITE("constant float K = 2.0f;", "ALLOY_CONSTANT float K = 2.0f;");
    CHECK_REWRITE("constant float lut[3] = {1, 2, 3};", "ALLOY_CONSTANT float lut[3] = {1, 2, 3};");
    CHECK_REWRITE("constant float* p = q;", "const    float* p = q;");
    CHECK_REWRITE("constant constexpr int N = 3;", "static   constexpr int N = 3;");
    CHECK_REWRITE("static constant int N = 3;", "static const    int N = 3;");
    CHECK_REWRITE("static constant constexpr const int N = 3;",
                  "static          constexpr const int N = 3;");
    CHECK_REWRITE("void f(device float* out, const device uint8_t* p, constant uint& n,\n"
                  "       threadgroup float* s, thread float& t);",
                  "void f(       float* out, const        uint8_t* p, const    uint& n,\n"
                  "                   float* s,        float& t);");
    CHECK_REWRITE("x = *(const device uint8_t*)p + ((device float4*)q)[i];",
                  "x = *(const        uint8_t*)p + ((       float4*)q)[i];");
    CHECK_REWRITE("device float* o = out + i;", "       float* o = out + i;");
    CHECK_REWRITE("thread float v = 0;", "       float v = 0;");
    /* not keywords here */
    CHECK_REWRITE("threadgroup_barrier(mem_flags::mem_threadgroup);",
                  "threadgroup_barrier(mem_flags::mem_threadgroup);");
    CHECK_REWRITE("s.device = 1; // device float* x\nc = \"threadgroup\";",
                  "s.device = 1; // device float* x\nc = \"threadgroup\";");
}

static void test_rewrite_attributes(void) {
    CHECK_REWRITE("uint tid [[thread_position_in_grid]];", "uint tid " "                           ;");
    CHECK_REWRITE("device float* x [[buffer(0)]],", "       float* x              ,");
    CHECK_REWRITE("[[max_total_threads_per_threadgroup(1024)]]\nint f();",
                  "                                           \nint f();");
    CHECK_REWRITE("if (a) [[likely]] { b(); }", "if (a) [[likely]] { b(); }");
    CHECK_REWRITE("[[maybe_unused]] int z = 0;", "[[maybe_unused]] int z = 0;");
    CHECK_REWRITE("case 1: [[fallthrough]];", "case 1: [[fallthrough]];");
    CHECK_REWRITE("[[gnu::always_inline]] inline int f();", "                       inline int f();");
    /* subscripts are left alone */
    CHECK_REWRITE("y = a[b[i]];", "y = a[b[i]];");
    CHECK_REWRITE("y = a[[b]];", "y = a[[b]];");
    CHECK_REWRITE("y = m[idx[i]][j];", "y = m[idx[i]][j];");
    /* unbalanced `[[` runs: each pushes two brackets (the fuzzer's heap overflow in the subscript table) */
    char opens[2 * 200 + 16] = "x = a";
    for (int k = 0; k < 200; k++) strcat(opens, "[[");
    alloy_strbuf sb;
    alloy_sb_init(&sb);
    (void)alloy_rewrite_msl(opens, "the test source", ALLOY_REWRITE_TENSOR, &sb); /* any text or an error */
    alloy_sb_free(&sb); /* ASan checks the subscript table's bounds */
}

static void test_rewrite_swizzles(void) {
    CHECK_REWRITE("float2 v = p.xy;", "float2 v = p.template alloy_swz<0,1>();");
    CHECK_REWRITE("c = col.bgra + q->zw;",
                  "c = col.template alloy_swz<2,1,0,3>() + q->template alloy_swz<2,3>();");
    CHECK_REWRITE("v.xy = w;", "v.template alloy_swz_ref<0,1>() = w;");
    CHECK_REWRITE("v.zx += 1.0f;", "v.template alloy_swz_ref<2,0>() += 1.0f;");
    CHECK_REWRITE("v.wzyx <<= 1;", "v.template alloy_swz_ref<3,2,1,0>() <<= 1;");
    CHECK_REWRITE("b = v.xy == w;", "b = v.template alloy_swz<0,1>() == w;");
    CHECK_REWRITE("f(v.xxx, v.rg)", "f(v.template alloy_swz<0,0,0>(), v.template alloy_swz<0,1>())");
    CHECK_REWRITE("v.yz /* c */ = w;", "v.template alloy_swz_ref<1,2>() /* c */ = w;");
    /* not swizzles */
    CHECK_REWRITE("a = v.x + v.y + c.r;", "a = v.x + v.y + c.r;");
    CHECK_REWRITE("a = v.xg + v.xyzwx + v.xs + xy;", "a = v.xg + v.xyzwx + v.xs + xy;");
    CHECK_REWRITE("a = s.xy_scale;", "a = s.xy_scale;");
}

static void test_rewrite_literals_and_directives(void) {
    CHECK_REWRITE("half a = 1.0h + 2h + 1e3h + 1.5H;",
                  "half a = half(1.0f) + half(2.0f) + half(1e3f) + half(1.5f);");
    CHECK_REWRITE("x = 1.0f + 0x1F + 0x1Fu + 1e-3;", "x = 1.0f + 0x1F + 0x1Fu + 1e-3;");
    CHECK_REWRITE("#include <metal_stdlib>\nusing namespace metal;\n",
                  "                       \nusing namespace metal;\n");
    CHECK_REWRITE("#include <metal_simdgroup>\n#include \"mine.h\"\n",
                  "                          \n#include \"mine.h\"\n");
    CHECK_REWRITE("#pragma METAL fp math_mode(fast)\n#pragma unroll\n",
                  "                                \n#pragma unroll\n");
    CHECK_REWRITE("#define LD(p) ((device float*)(p))[0]\n",
                  "#define LD(p) ((       float*)(p))[0]\n");
    CHECK_REWRITE("#define SH threadgroup float s[4];\n", "#define SH ALLOY_THREADGROUP float s[4];\n");
    CHECK_REWRITE("#define XY(v) \\\n  (v).xy\n",
                  "#define XY(v) \\\n  (v).template alloy_swz<0,1>()\n");
    CHECK_REWRITE("#if defined(device)\n#endif\n", "#if defined(device)\n#endif\n");
    CHECK_REWRITE("#define TG threadgroup\n#define CST constant\n",
                  "#define TG ALLOY_THREADGROUP\n#define CST const   \n");
}

static void test_rewrite_lines(void) {
    const char *src =
        "#include <metal_stdlib>\n"
        "using namespace metal;\n"
        "\n"
        "/* tile\n"
        "   loop */\n"
        "threadgroup float tile[32][33];\n"
        "uint3 g = thread_position_in_grid;   // [[x]]\n"
        "float4 v = ((const device float4*)inp)[g.x];\n"
        "v.xy = v.zw * 0.5h;\n"
        "#define F(x) \\\n"
        "   ((device float*)x)\n"
        "tile[g.y][g.x] = v.x [[maybe_unused]];\n"
        "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "out[g.x] = tile[g.x][g.y];";
    char *got = rewrite(src);
    CHECK(got != NULL);
    if (!got) return;
    CHECK(count_char(got, '\n') == count_char(src, '\n'));
    /* every line keeps its number: the n-th line of the result comes from the
     * n-th line of the source (check a few distinctive ones) */
    const char *p = got;
    int line = 1, ok_tile = 0, ok_barrier = 0, ok_out = 0;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (line == 6) ok_tile = len > 17 && memcmp(p, "ALLOY_THREADGROUP", 17) == 0;
        if (line == 13) ok_barrier = memcmp(p, "threadgroup_barrier(", 20) == 0;
        if (line == 14) ok_out = memcmp(p, "out[g.x]", 8) == 0;
        line++;
        p = e ? e + 1 : p + len;
    }
    CHECK(ok_tile && ok_barrier && ok_out);
    CHECK(contains(got, "v.template alloy_swz_ref<0,1>() = v.template alloy_swz<2,3>() * half(0.5f);"));
    CHECK(contains(got, "((const        float4*)inp)[g.x]"));
    CHECK(!contains(got, "device"));
    free(got);

    /* errors name the text and the line */
    alloy_strbuf sb;
    alloy_sb_init(&sb);
    CHECK_FAILS(alloy_rewrite_msl("a;\nb = \"open\n", "the body of kernel 'k'", 0, &sb),
                ALLOY_ERROR_INVALID_ARGUMENT, "line 2");
    alloy_sb_free(&sb);
}

/* ---- code generation ----------------------------------------------------- */

/* Every `#line N "alloy-generated.cpp"` must name the line that follows it. */
static int generated_lines_exact(const char *src) {
    int line = 1;
    for (const char *p = src; *p;) {
        int n;
        int end = 0;
        if (sscanf(p, "#line %d \"alloy-generated.cpp\"%n", &n, &end) == 1 && end > 0 &&
            n != line + 1) {
            fprintf(stderr, "  #line %d on line %d\n", n, line);
            return 0;
        }
        const char *e = strchr(p, '\n');
        if (!e) break;
        p = e + 1;
        line++;
    }
    return 1;
}

/* The first line after `#line 1 "<marker>"`, copied into buf. */
static int line_after(const char *src, const char *marker, char *buf, size_t cap) {
    const char *p = strstr(src, marker);
    if (!p) return 0;
    p = strchr(p, '\n');
    if (!p) return 0;
    p++;
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len >= cap) len = cap - 1;
    memcpy(buf, p, len);
    buf[len] = 0;
    return 1;
}

static void test_codegen_cpu(void) {
    const char *prelude = alloy_prelude(ALLOY_TARGET_CPU);
    CHECK(prelude != NULL);
    if (!prelude) return;
    CHECK(prelude == alloy_prelude(ALLOY_TARGET_CPU));
    CHECK(contains(prelude, "ALLOY_CPU_ABI_VERSION"));
    CHECK(alloy_prelude(ALLOY_TARGET_CUDA) != prelude);

    alloy_codegen_input inputs[] = {
        {"inp", ALLOY_FLOAT32, 0, 1},
        {"s", ALLOY_INT32, 1, 0},
        {"w", ALLOY_FLOAT16, 0, 2},
        {"idx", ALLOY_UINT32, 0, 1},
    };
    alloy_codegen_output outputs[] = {{"out", ALLOY_FLOAT32}, {"cnt", ALLOY_INT32}};
    alloy_template_arg templates[4];
    memset(templates, 0, sizeof templates);
    strcpy(templates[0].name, "T");
    templates[0].kind = ALLOY_TEMPLATE_DTYPE;
    templates[0].dvalue = ALLOY_BFLOAT16;
    strcpy(templates[1].name, "N");
    templates[1].kind = ALLOY_TEMPLATE_INT;
    templates[1].ivalue = -4;
    strcpy(templates[2].name, "B");
    templates[2].kind = ALLOY_TEMPLATE_BOOL;
    templates[2].ivalue = 1;
    strcpy(templates[3].name, "BIG");
    templates[3].kind = ALLOY_TEMPLATE_INT;
    templates[3].ivalue = 5000000000ll;
    const char *header = "#include <metal_stdlib>\n"
                         "inline float ld(const device float* p, int i) { return p[i]; }\n"
                         "#define WN w_ndim\n";
    const char *body = "uint i = thread_position_in_grid.x; // max_shape, idx_shape\n"
                       "if (i >= uint(inp_shape[0])) return;\n"
                       "out[i] = ld(inp, i) * s + float(w[i * w_strides[0]]) + WN + T(1) + N;\n"
                       "uint d = dispatch_threads_per_threadgroup.x + s_shape[0];";
    alloy_codegen_request req;
    memset(&req, 0, sizeof req);
    req.target = ALLOY_TARGET_CPU;
    req.kernel_name = "k";
    req.body = body;
    req.header = header;
    req.n_inputs = 4;
    req.inputs = inputs;
    req.n_outputs = 2;
    req.outputs = outputs;
    req.n_templates = 4;
    req.templates = templates;
    alloy_codegen_result res;
    CHECK_OK(alloy_codegen(&req, &res));
    const char *src = res.source;
    CHECK(src != NULL);
    if (!src) return;

    CHECK(contains(src, prelude));
    /* int and bool templates are macros in the header (not the dtype T) */
    CHECK(contains(src, "\nusing namespace metal;\n#define ALLOY_TEMPLATE_N (-4LL)\n"
                        "#define ALLOY_TEMPLATE_B (1LL)\n#define ALLOY_TEMPLATE_BIG (5000000000LL)\n"
                        "#line 1 \"k.header\"\n                       \ninline float"));
    CHECK(!contains(src, "ALLOY_TEMPLATE_T"));
    CHECK(contains(src, "\n#line 1 \"k.body\"\nuint i = thread_position_in_grid.x;"));
    CHECK(generated_lines_exact(src));
    char buf[256];
    CHECK(line_after(src, "#line 1 \"k.body\"", buf, sizeof buf) &&
          strcmp(buf, "uint i = thread_position_in_grid.x;") == 0);
    CHECK(contains(src, "inline float ld(const        float* p, int i)"));
    /* no barrier: one region, a loop over the group's threads */
    CHECK(contains(src, "void alloy_kernel_group(const alloy_cpu_group *alloy_g)"));
    CHECK(res.region_loops && !res.uses_sync);

    /* arguments, in slot order */
    CHECK(contains(src, "const float* inp = (const float*)alloy_a[0];"));
    CHECK(contains(src, "const int* inp_shape = (const int*)alloy_a[1];"));
    CHECK(contains(src, "const int32_t s = *(const int32_t*)alloy_a[2];")); /* read once per group */
    CHECK(contains(src, "const float16_t* w = (const float16_t*)alloy_a[3];"));
    CHECK(contains(src, "const int64_t* w_strides = (const int64_t*)alloy_a[4];"));
    CHECK(contains(src, "constexpr int w_ndim = 2;")); /* the rank is the specialisation's */
    CHECK(contains(src, "const uint32_t* idx = (const uint32_t*)alloy_a[5];"));
    CHECK(contains(src, "float* out = (float*)alloy_a[6];"));
    CHECK(contains(src, "int32_t* cnt = (int32_t*)alloy_a[7];"));
    CHECK(!contains(src, "inp_strides") && !contains(src, "inp_ndim"));
    CHECK(!contains(src, "w_shape"));
    CHECK(!contains(src, "idx_shape =") && !contains(src, "s_shape ="));
    CHECK(res.n_slots == 8);
    CHECK(res.input_slots && res.input_slots[0] == ALLOY_SLOT_SHAPE);
    CHECK(res.input_slots && res.input_slots[1] == 0);
    CHECK(res.input_slots && res.input_slots[2] == ALLOY_SLOT_STRIDES);
    CHECK(res.input_slots && res.input_slots[3] == 0);

    /* only the attributes mentioned */
    CHECK(contains(src, "uint3 thread_position_in_grid = uint3(alloy_gid[0] * alloy_tg[0] + "
                        "alloy_lx, alloy_gid[1] * alloy_tg[1] + alloy_ly, alloy_gid[2] * "
                        "alloy_tg[2] + alloy_lz);"));
    CHECK(contains(src, "uint3 dispatch_threads_per_threadgroup = uint3(alloy_tg[0], "
                        "alloy_tg[1], alloy_tg[2]);"));
    CHECK(!contains(src, " threads_per_threadgroup ="));
    CHECK(!contains(src, "thread_index_in_threadgroup"));
    CHECK(!contains(src, "grid_size"));

    /* template arguments */
    CHECK(contains(src, "using T [[maybe_unused]] = bfloat16_t;"));
    CHECK(contains(src, "constexpr int N = -4;"));
    CHECK(contains(src, "constexpr bool B = true;"));
    CHECK(contains(src, "constexpr long BIG = 5000000000L;"));

    /* entry points */
    CHECK(contains(src, "const unsigned alloy_cpu_abi = ALLOY_CPU_ABI_VERSION;"));
    CHECK(contains(src, "const int alloy_cpu_uses_sync = 0;"));
    CHECK(contains(src, "void alloy_cpu_group_loop(const alloy_cpu_group *g)"));
    CHECK(contains(src, "void alloy_cpu_thread(const alloy_cpu_group *g"));
    CHECK(count_char(src, '{') >= 1);
    CHECK(res.uses_sync == 0);
    alloy_codegen_result_clear(&res);
    CHECK(res.source == NULL && res.input_slots == NULL);

    /* atomic outputs, synchronisation, every attribute, no header */
    alloy_codegen_output aout[] = {{"acc", ALLOY_FLOAT32}};
    alloy_codegen_input ain[] = {{"x", ALLOY_FLOAT32, 0, 1}};
    alloy_strbuf b;
    alloy_sb_init(&b);
    alloy_sb_append(&b, "threadgroup float sh[64];\nthreadgroup_barrier(mem_flags::mem_threadgroup);\n");
    for (int a = 0; a < alloy_attribute_count(); a++)
        alloy_sb_printf(&b, "(void)%s;\n", alloy_attribute_name(a));
    alloy_sb_append(&b, "atomic_fetch_add_explicit(&acc[0], x[0], memory_order_relaxed);");
    char *body2 = alloy_sb_take(&b);
    memset(&req, 0, sizeof req);
    req.target = ALLOY_TARGET_CPU;
    req.kernel_name = "k2";
    req.body = body2;
    req.n_inputs = 1;
    req.inputs = ain;
    req.n_outputs = 1;
    req.outputs = aout;
    req.atomic_outputs = 1;
    CHECK_OK(alloy_codegen(&req, &res));
    src = res.source;
    if (src) {
        CHECK(contains(src, "atomic<float>* acc = (atomic<float>*)alloy_a[1];"));
        /* a barrier at the top level: regions as loops, no fibers */
        CHECK(res.uses_sync && res.region_loops);
        CHECK(contains(src, "const int alloy_cpu_uses_sync = 0;"));
        CHECK(contains(src, "ALLOY_THREADGROUP float sh[64];"));
        CHECK(!contains(src, ".header\""));
        CHECK(generated_lines_exact(src));
        for (int a = 0; a < alloy_attribute_count(); a++) {
            char decl[128];
            snprintf(decl, sizeof decl, " %s %s = ", alloy_attribute_is_vector(a) ? "uint3" : "uint",
                     alloy_attribute_name(a));
            CHECK_MSG(contains(src, decl), "%s", decl);
        }
        CHECK(contains(src, "uint thread_index_in_simdgroup = alloy_L % 32u;"));
        CHECK(contains(src, "uint quadgroups_per_threadgroup = (alloy_Llast + 3u) / 4u;"));
        CHECK(contains(src, "alloy_Llast = (alloy_sz[2] - 1u) * alloy_tg[0] * alloy_tg[1] + "
                            "(alloy_sz[1] - 1u) * alloy_tg[0] + alloy_sz[0];"));
        CHECK(res.uses_sync == 1 && res.n_slots == 2 && res.input_slots[0] == 0);
    }
    alloy_codegen_result_clear(&res);
    free(body2);

    /* a 0-d input never gets shape slots; the body's line 1 is line 1 */
    alloy_codegen_input sin[] = {{"alpha", ALLOY_FLOAT64, 1, 0}};
    memset(&req, 0, sizeof req);
    req.target = ALLOY_TARGET_CPU;
    req.kernel_name = "k3";
    req.body = "out[0] = alpha + alpha_shape[0] + alpha_ndim;";
    req.n_inputs = 1;
    req.inputs = sin;
    req.n_outputs = 1;
    req.outputs = aout;
    CHECK_OK(alloy_codegen(&req, &res));
    if (res.source) {
        CHECK(contains(res.source, "const double alpha = *(const double*)alloy_a[0];"));
        CHECK(contains(res.source, "float* acc = (float*)alloy_a[1];"));
        CHECK(!contains(res.source, "alpha_shape =") && !contains(res.source, "alpha_ndim ="));
        CHECK(res.n_slots == 2 && res.input_slots[0] == 0);
        CHECK(generated_lines_exact(res.source));
    }
    alloy_codegen_result_clear(&res);

    /* errors in the body are reported */
    req.body = "x = 1; /* open";
    CHECK_FAILS(alloy_codegen(&req, &res), ALLOY_ERROR_INVALID_ARGUMENT, "unterminated");
    CHECK(res.source == NULL);
    alloy_codegen_input bad[] = {{"x", ALLOY_DTYPE_COUNT, 0, 1}};
    req.body = "out[0] = 1;";
    req.inputs = bad;
    CHECK_FAILS(alloy_codegen(&req, &res), ALLOY_ERROR_INVALID_ARGUMENT, "dtype");
    alloy_codegen_input badname[] = {{"float", ALLOY_FLOAT32, 0, 1}};
    req.inputs = badname;
    CHECK_FAILS(alloy_codegen(&req, &res), ALLOY_ERROR_INVALID_ARGUMENT,
                "input name 'float' is an MSL type name");
    alloy_codegen_result_clear(&res);
}

/* The CUDA entry point's name: the kernel's, for profilers, as an identifier
 * that cannot meet a prelude function's. */
static void test_cuda_entry_name(void) {
    char e[ALLOY_CUDA_ENTRY_MAX];
    alloy_cuda_entry_name("myexp", e, sizeof e);
    CHECK(strcmp(e, "alloy_kernel_myexp") == 0);
    alloy_cuda_entry_name("alloy_mlstm_step", e, sizeof e);
    CHECK(strcmp(e, "alloy_kernel_mlstm_step") == 0);
    alloy_cuda_entry_name("alloy_", e, sizeof e);
    CHECK(strcmp(e, "alloy_kernel_alloy_") == 0);
    alloy_cuda_entry_name("exp", e, sizeof e); /* not the math function */
    CHECK(strcmp(e, "alloy_kernel_exp") == 0);
    alloy_cuda_entry_name("a-b.c d/\xc3\xa9", e, sizeof e);
    CHECK(strcmp(e, "alloy_kernel_a_b_c_d___") == 0);
    alloy_cuda_entry_name("", e, sizeof e);
    CHECK(strcmp(e, "alloy_kernel") == 0);
    alloy_cuda_entry_name(NULL, e, sizeof e);
    CHECK(strcmp(e, "alloy_kernel") == 0);
    char longname[300];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    memset(e, '#', sizeof e);
    alloy_cuda_entry_name(longname, e, sizeof e);
    CHECK(strlen(e) == sizeof e - 1 && strncmp(e, "alloy_kernel_xxx", 16) == 0 && e[sizeof e - 2] == 'x');
    char small[16];
    alloy_cuda_entry_name("myexp", small, sizeof small);
    CHECK(strcmp(small, "alloy_kernel_my") == 0);
}

/* The CUDA translation unit: the CUDA prelude, one `extern "C" __global__
 * alloy_kernel_<name>` whose parameters follow the slots (typed buffers, shapes and
 * strides by value, ndim as int, the launch info last), the out-of-grid
 * early return before the body, and the attribute formulas on
 * threadIdx/blockIdx/blockDim. */
static void test_codegen_cuda(void) {
    const char *prelude = alloy_prelude(ALLOY_TARGET_CUDA);
    CHECK(prelude != NULL);
    if (!prelude) return;
    CHECK(prelude == alloy_prelude(ALLOY_TARGET_CUDA));
    CHECK(contains(prelude, "#define ALLOY_BACKEND_CUDA 1"));
    CHECK(contains(prelude, "#define ALLOY_THREADGROUP __shared__"));
    CHECK(contains(prelude, "alloy_dyn_smem"));
    CHECK(contains(prelude, "mma.sync.aligned.m16n8k8"));
    CHECK(!contains(prelude, "ALLOY_CPU_ABI_VERSION"));
    /* the hooks come before the shared part, the CUDA part after it */
    const char *hooks = strstr(prelude, "#define ALLOY_LIBM_FAST(f) ALLOY_FAST_##f");
    const char *common = strstr(prelude, "#define ALLOY_PRELUDE_COMMON_H");
    const char *cuda = strstr(prelude, "#define ALLOY_PRELUDE_CUDA_H\n");
    CHECK(hooks && common && cuda && hooks < common && common < cuda);

    alloy_codegen_input inputs[] = {
        {"inp", ALLOY_FLOAT32, 0, 1},
        {"s", ALLOY_INT32, 1, 0},
        {"w", ALLOY_FLOAT16, 0, 2},
        {"idx", ALLOY_UINT32, 0, 1},
    };
    alloy_codegen_output outputs[] = {{"out", ALLOY_FLOAT32}, {"cnt", ALLOY_INT32}};
    alloy_template_arg templates[1];
    memset(templates, 0, sizeof templates);
    strcpy(templates[0].name, "T");
    templates[0].kind = ALLOY_TEMPLATE_DTYPE;
    templates[0].dvalue = ALLOY_BFLOAT16;
    const char *header = "inline float ld(const device float* p, int i) { return p[i]; }\n";
    const char *body = "uint i = thread_position_in_grid.x;\n"
                       "if (i >= uint(inp_shape[0])) return;\n"
                       "out[i] = ld(inp, i) * s + float(w[i * w_strides[0]]) + w_ndim + T(1);\n"
                       "uint d = threads_per_threadgroup.x + alloy_threadgroup_memory[0];";
    alloy_codegen_request req;
    memset(&req, 0, sizeof req);
    req.target = ALLOY_TARGET_CUDA;
    req.kernel_name = "k";
    req.body = body;
    req.header = header;
    req.geometry = ALLOY_GEOMETRY_ALL; /* every dimension partial and past 2^32 threads */
    req.n_inputs = 4;
    req.inputs = inputs;
    req.n_outputs = 2;
    req.outputs = outputs;
    req.n_templates = 1;
    req.templates = templates;
    alloy_codegen_result res;
    CHECK_OK(alloy_codegen(&req, &res));
    const char *src = res.source;
    CHECK(src != NULL);
    if (!src) return;
    CHECK(contains(src, prelude));
    CHECK(contains(src, "generated by alloy for the CUDA"));
    CHECK(contains(src, "\nusing namespace metal;\n#line 1 \"k.header\"\ninline float"));
    CHECK(generated_lines_exact(src));
    char buf[256];
    CHECK(line_after(src, "#line 1 \"k.body\"", buf, sizeof buf) &&
          strcmp(buf, "uint i = thread_position_in_grid.x;") == 0);

    /* the signature, in slot order; the same slots as on the CPU */
    CHECK(contains(src, "extern \"C\" __global__ void ALLOY_CUDA_LAUNCH_BOUNDS alloy_kernel_k(\n"
                        "    const float* alloy_a0,\n"
                        "    const __grid_constant__ alloy_i32x8 alloy_a1,\n"
                        "    const int32_t* alloy_a2,\n"
                        "    const float16_t* alloy_a3,\n"
                        "    const __grid_constant__ alloy_i64x8 alloy_a4,\n"
                        "    const uint32_t* alloy_a5,\n"
                        "    float* alloy_a6,\n"
                        "    int32_t* alloy_a7,\n"
                        "    const alloy_launch_info alloy_info) {\n"));
    CHECK(res.n_slots == 8);
    CHECK(res.input_slots && res.input_slots[0] == ALLOY_SLOT_SHAPE);
    CHECK(res.input_slots && res.input_slots[1] == 0);
    CHECK(res.input_slots && res.input_slots[2] == ALLOY_SLOT_STRIDES);
    CHECK(res.input_slots && res.input_slots[3] == 0);
    /* what the body sees */
    CHECK(contains(src, "const float* inp = alloy_a0;"));
    CHECK(contains(src, "const int* inp_shape = alloy_a1.v;"));
    CHECK(contains(src, "const int32_t& s = *alloy_a2;"));
    CHECK(contains(src, "const int64_t* w_strides = (const int64_t*)alloy_a4.v;"));
    CHECK(contains(src, "constexpr int w_ndim = 2;"));
    CHECK(contains(src, "float* out = alloy_a6;"));
    CHECK(contains(src, "unsigned char* alloy_threadgroup_memory = alloy_dyn_smem;"));
    CHECK(contains(src, "using T [[maybe_unused]] = bfloat16_t;"));
    /* out-of-grid threads leave before the body and before any attribute */
    const char *exit_at = strstr(src, ">= alloy_info.grid[2])\n    return;\n");
    const char *body_at = strstr(src, "#line 1 \"k.body\"");
    const char *attr_at = strstr(src, "uint3 threads_per_threadgroup =");
    CHECK(exit_at && body_at && attr_at && exit_at < attr_at && attr_at < body_at);
    CHECK(contains(src, "(unsigned long long)blockIdx.x * blockDim.x + threadIdx.x >= alloy_info.grid[0]"));
    /* the actual size of an edge group */
    CHECK(contains(src, "uint3 threads_per_threadgroup = uint3(alloy_sz[0], alloy_sz[1], alloy_sz[2]);"));
    CHECK(contains(src, "alloy_grid[0] - alloy_gid[0] * alloy_tg[0] < alloy_tg[0] ? "
                        "alloy_grid[0] - alloy_gid[0] * alloy_tg[0] : alloy_tg[0]"));
    /* the CUDA primitives the shared attribute formulas use */
    CHECK(contains(src, "const unsigned alloy_lx = threadIdx.x, alloy_ly = threadIdx.y, "
                        "alloy_lz = threadIdx.z;"));
    CHECK(contains(src, "const unsigned alloy_tg[3] = {blockDim.x, blockDim.y, blockDim.z};"));
    CHECK(contains(src, "const unsigned alloy_gid[3] = {blockIdx.x, blockIdx.y, blockIdx.z};"));
    CHECK(contains(src, "const unsigned alloy_grid[3] = {alloy_info.grid[0], alloy_info.grid[1], "
                        "alloy_info.grid[2]};"));
    CHECK(contains(src, "const unsigned alloy_groups[3] = {gridDim.x, gridDim.y, gridDim.z};"));
    /* the kernel ends with the body: nothing after its closing brace */
    size_t n = strlen(src);
    CHECK(n > 3 && strcmp(src + n - 2, "}\n") == 0);
    CHECK(!contains(src, "alloy_cpu_group"));
    /* an ordinary launch: the griddepcontrol pair is compiled out (ALLOY_OVERLAP_LAUNCH undefined) */
    CHECK(contains(prelude, "defined(ALLOY_OVERLAP_LAUNCH)"));
    CHECK(!contains(src, "#define ALLOY_OVERLAP_LAUNCH"));
    alloy_codegen_result_clear(&res);

    /* a launch that may overlap the previous kernel: defined before the prelude, the lines still exact */
    req.overlap = 1;
    CHECK_OK(alloy_codegen(&req, &res));
    src = res.source;
    CHECK(src && generated_lines_exact(src));
    const char *def = src ? strstr(src, "\n#define ALLOY_OVERLAP_LAUNCH 1\n") : NULL;
    const char *pre = src ? strstr(src, "#define ALLOY_PRELUDE_CUDA_H\n") : NULL;
    CHECK(def && pre && def < pre);
    CHECK(src && contains(src, "alloy_kernel_k("));
    alloy_codegen_result_clear(&res);
    req.overlap = 0;

    /* A grid of whole threadgroups: no out-of-grid check, full groups. */
    req.geometry = 0;
    CHECK_OK(alloy_codegen(&req, &res));
    if (res.source) {
        CHECK(!contains(res.source, "alloy_info.grid[0] ||") && !contains(res.source, "return;\n  [[maybe"));
        CHECK(!contains(res.source, ">= alloy_info.grid["));
        CHECK(contains(res.source, "const unsigned alloy_sz[3] = {\n      alloy_tg[0],\n      "
                                   "alloy_tg[1],\n      alloy_tg[2]};"));
        CHECK(generated_lines_exact(res.source));
    }
    alloy_codegen_result_clear(&res);
    /* Partial groups in x and z only, within 2^32 threads: 32-bit checks of x and z. */
    req.geometry = ALLOY_GEOMETRY_PARTIAL(0) | ALLOY_GEOMETRY_PARTIAL(2);
    CHECK_OK(alloy_codegen(&req, &res));
    if (res.source) {
        CHECK(contains(res.source, "  if (blockIdx.x * blockDim.x + threadIdx.x >= alloy_info.grid[0] ||\n"
                                   "      blockIdx.z * blockDim.z + threadIdx.z >= alloy_info.grid[2])\n"
                                   "    return;\n"));
        CHECK(!contains(res.source, "threadIdx.y >= alloy_info"));
        CHECK(!contains(res.source, "unsigned long long)blockIdx"));
        CHECK(contains(res.source, "      alloy_tg[1],\n"));
        CHECK(generated_lines_exact(res.source));
    }
    alloy_codegen_result_clear(&res);

    /* every attribute, atomic outputs, a 0-d input only */
    alloy_codegen_output aout[] = {{"acc", ALLOY_FLOAT32}};
    alloy_codegen_input ain[] = {{"x", ALLOY_FLOAT64, 1, 0}};
    alloy_strbuf b;
    alloy_sb_init(&b);
    alloy_sb_append(&b, "threadgroup float sh[64];\nthreadgroup_barrier(mem_flags::mem_threadgroup);\n");
    for (int a = 0; a < alloy_attribute_count(); a++)
        alloy_sb_printf(&b, "(void)%s;\n", alloy_attribute_name(a));
    alloy_sb_append(&b, "atomic_fetch_add_explicit(&acc[0], float(x) + x_shape[0], memory_order_relaxed);");
    char *body2 = alloy_sb_take(&b);
    memset(&req, 0, sizeof req);
    req.target = ALLOY_TARGET_CUDA;
    req.kernel_name = "k2";
    req.body = body2;
    req.n_inputs = 1;
    req.inputs = ain;
    req.n_outputs = 1;
    req.outputs = aout;
    req.atomic_outputs = 1;
    CHECK_OK(alloy_codegen(&req, &res));
    src = res.source;
    if (src) {
        CHECK(contains(src, "    const double* alloy_a0,\n    float* alloy_a1,\n"
                            "    const alloy_launch_info alloy_info) {\n"));
        CHECK(contains(src, "const double& x = *alloy_a0;"));
        CHECK(!contains(src, "x_shape ="));
        CHECK(contains(src, "atomic<float>* acc = (atomic<float>*)alloy_a1;"));
        CHECK(contains(src, "ALLOY_THREADGROUP float sh[64];"));
        CHECK(generated_lines_exact(src));
        for (int a = 0; a < alloy_attribute_count(); a++) {
            char decl[128];
            snprintf(decl, sizeof decl, " %s %s = ", alloy_attribute_is_vector(a) ? "uint3" : "uint",
                     alloy_attribute_name(a));
            CHECK_MSG(contains(src, decl), "%s", decl);
        }
        /* the formulas shared with the CPU, over the CUDA primitives */
        CHECK(contains(src, "uint3 thread_position_in_grid = uint3(alloy_gid[0] * alloy_tg[0] + alloy_lx, "
                            "alloy_gid[1] * alloy_tg[1] + alloy_ly, alloy_gid[2] * alloy_tg[2] + alloy_lz);"));
        CHECK(contains(src, "uint3 dispatch_threads_per_threadgroup = uint3(alloy_tg[0], alloy_tg[1], alloy_tg[2]);"));
        CHECK(contains(src, "uint3 threads_per_grid = uint3(alloy_grid[0], alloy_grid[1], alloy_grid[2]);"));
        CHECK(contains(src, "uint3 threadgroups_per_grid = uint3(alloy_groups[0], alloy_groups[1], "
                            "alloy_groups[2]);"));
        CHECK(contains(src, "uint thread_index_in_threadgroup = alloy_L;"));
        CHECK(contains(src, "alloy_L = alloy_lx + alloy_ly * alloy_tg[0] + alloy_lz * alloy_tg[0] * "
                            "alloy_tg[1];"));
        CHECK(contains(src, "uint thread_index_in_simdgroup = alloy_L % 32u;"));
        CHECK(contains(src, "uint simdgroups_per_threadgroup = (alloy_Llast + 31u) / 32u;"));
        CHECK(contains(src, "uint dispatch_simdgroups_per_threadgroup = (alloy_T + 31u) / 32u;"));
        CHECK(contains(src, "uint quadgroups_per_threadgroup = (alloy_Llast + 3u) / 4u;"));
        CHECK(contains(src, "alloy_Llast = (alloy_sz[2] - 1u) * alloy_tg[0] * alloy_tg[1] + "
                            "(alloy_sz[1] - 1u) * alloy_tg[0] + alloy_sz[0];"));
        CHECK(res.uses_sync == 1 && res.n_slots == 2 && res.input_slots[0] == 0);
    }
    alloy_codegen_result_clear(&res);
    free(body2);

    /* the same checks of the request as on the CPU */
    alloy_codegen_input badname[] = {{"float", ALLOY_FLOAT32, 0, 1}};
    req.body = "out[0] = 1;";
    req.inputs = badname;
    CHECK_FAILS(alloy_codegen(&req, &res), ALLOY_ERROR_INVALID_ARGUMENT,
                "input name 'float' is an MSL type name");
    CHECK(res.source == NULL);
}

int main(void) {
    RUN(test_scan_tricky);
    RUN(test_scan_errors);
    RUN(test_mentions);
    RUN(test_names);
    RUN(test_analyze);
    RUN(test_rewrite_address_spaces);
    RUN(test_rewrite_attributes);
    RUN(test_rewrite_swizzles);
    RUN(test_rewrite_literals_and_directives);
    RUN(test_rewrite_lines);
    RUN(test_codegen_cpu);
    RUN(test_cuda_entry_name);
    RUN(test_codegen_cuda);
    return harness_finish();
}
