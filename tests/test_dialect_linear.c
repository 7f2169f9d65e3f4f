/* test_dialect_linear.c — the body path (kernel construction, token scan,
 * rewrite, code generation) is linear in the body's length: 1 MB bodies of
 * patterns that once made a look-ahead rescan the rest of the text for every
 * token (`[[a,` repeated: an unclosed attribute per token; `threadgroup `
 * repeated: a declaration that never ends) and of other hostile shapes
 * (deep nesting, unclosed brackets, long swizzle chains, many directives)
 * must generate in bounded time.
 *
 * This guards complexity, not speed: the bound is generous (a quadratic
 * rewrite took minutes on the first pattern), and it is not applied under
 * sanitizers or an emulator, which slow everything down. Release-build figures are in
 * bench/RESULTS.md. Also checks that attributes are still recognised the
 * same way around the patterns (the results must not change). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TIME_BOUND_S 0.0 /* not applied */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TIME_BOUND_S 0.0
#endif
#endif
#ifndef TIME_BOUND_S
#define TIME_BOUND_S 5.0
#endif

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *repeat(const char *pattern, size_t bytes) {
    size_t len = strlen(pattern), reps = bytes / len;
    char *b = malloc(reps * len + 1);
    if (!b) return NULL;
    for (size_t i = 0; i < reps; i++) memcpy(b + i * len, pattern, len);
    b[reps * len] = 0;
    return b;
}

/* Generates the CPU source of `body` (a kernel with input x, output out);
 * returns the seconds taken, or -1 if generation failed. *src receives the
 * source when src is not NULL. */
static double generate(const char *body, char **src) {
    alloy_device *dev;
    if (alloy_device_get("cpu", &dev) != ALLOY_OK) return -1;
    int64_t n = 4;
    alloy_array *x;
    if (alloy_array_new(dev, ALLOY_FLOAT32, 1, &n, &x) != ALLOY_OK) return -1;
    const char *in[] = {"x"}, *out[] = {"out"};
    alloy_kernel *k = NULL;
    alloy_launch *l = NULL;
    char *s = NULL;
    double t0 = now_s(), t = -1;
    if (alloy_kernel_new("linear", 1, in, 1, out, body, NULL, 1, 0, &k) == ALLOY_OK &&
        alloy_launch_new(&l) == ALLOY_OK && alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32) == ALLOY_OK &&
        alloy_launch_set_grid(l, 4, 1, 1) == ALLOY_OK &&
        alloy_launch_set_threadgroup(l, 4, 1, 1) == ALLOY_OK &&
        alloy_kernel_generated_source(k, 1, &x, l, dev, &s) == ALLOY_OK)
        t = now_s() - t0;
    if (src) *src = s;
    else free(s);
    alloy_launch_free(l);
    alloy_kernel_free(k);
    alloy_array_free(x);
    return t;
}

static void test_pathological_bodies(void) {
    static const char *const PATTERNS[] = {
        "[[a,", "threadgroup ", "threadgroup <", "[[a::b(", "(", "[", "{", "x.xy", "a.",
        "device ", "constant ", "1.0h+", "#define A\n", "[[", "]]", "a<b>::", "x[[y]]",
        "threadgroup float* ", "const static ", "simd_sum(", "thread_position_in_grid ",
        "\"s\"", "/* c */", "// c\n", "a.xyzw.xyzw", NULL};
    for (int p = 0; PATTERNS[p]; p++) {
        char *body = repeat(PATTERNS[p], (size_t)1 << 20);
        CHECK(body != NULL);
        if (!body) return;
        double t = generate(body, NULL);
        /* Unbalanced text may still be rejected (e.g. an unclosed comment),
         * but these patterns are all valid token streams. */
        CHECK_MSG(t >= 0, "pattern '%s': %s", PATTERNS[p], alloy_last_error());
        /* no bound under an emulator (ALLOY_TEST_LAUNCHER: the AArch64 stage), where time means nothing */
        const char *emulated = getenv("ALLOY_TEST_LAUNCHER");
        if (TIME_BOUND_S > 0 && !(emulated && *emulated))
            CHECK_MSG(t < TIME_BOUND_S, "pattern '%s' x %zu: %.2f s to generate 1 MB", PATTERNS[p],
                      ((size_t)1 << 20) / strlen(PATTERNS[p]), t);
        free(body);
    }
}

/* The tables that replaced the rescans give the same answers: attributes
 * are erased where they were, and `[[` that is no attribute stays. */
static void test_attributes_unchanged(void) {
    struct {
        const char *body, *kept, *gone; /* in / not in the rewritten body */
    } cases[] = {
        {"uint i [[thread_position_in_grid]] = 0; out[i] = x[i];", "uint i ", "[[thread_position"},
        {"float a[[maybe_unused]] = 1; out[0] = a;", "float a[[maybe_unused]] = 1;", NULL},
        {"int q[4]; out[q[[0]]] = 1;", "out[q[[0]]] = 1;", NULL},
        {"[[a, out[0] = 1;", "[[a, out[0] = 1;", NULL},
        {"float v [[ clang::annotate(\"x\", (1)) ]] = 2; out[0] = v;", "= 2; out[0] = v;", "annotate"},
        {"uint t [[thread_index_in_simdgroup]]; [[a, b]] out[0] = x[t];", "out[0] = x[t];", "[[a, b]]"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char *src = NULL;
        double t = generate(cases[c].body, &src);
        CHECK_MSG(t >= 0 && src, "case %zu: %s", c, alloy_last_error());
        const char *body = src ? strstr(src, "#line 1 \"linear.body\"") : NULL;
        CHECK_MSG(body != NULL, "case %zu: no body section", c);
        if (body) {
            const char *end = strstr(body, "\n#line");
            size_t len = end ? (size_t)(end - body) : strlen(body);
            char *part = strndup(body, len);
            CHECK_MSG(part && strstr(part, cases[c].kept), "case %zu: '%s' not kept", c, cases[c].kept);
            CHECK_MSG(part && (!cases[c].gone || !strstr(part, cases[c].gone)), "case %zu: '%s' not erased",
                      c, cases[c].gone);
            free(part);
        }
        free(src);
    }
}

int main(void) {
    RUN(test_attributes_unchanged);
    RUN(test_pathological_bodies);
    return harness_finish();
}
