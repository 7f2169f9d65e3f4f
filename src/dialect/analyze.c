/* analyze.c — checks a kernel's body and header when the kernel is created,
 * and decides whether it synchronises.
 *
 * The most common porting mistake is to pass a whole `kernel void f(...)`
 * definition where MLX-style kernels take only the body; it is caught here
 * with an explanation instead of a confusing compiler log. MSL features alloy
 * cannot provide (textures, samplers, ...) are named with their line. The
 * synchronisation rule (barriers, SIMD/quad operations, simdgroup matrices)
 * decides whether the CPU backend must run threads as fibers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dialect/rewrite.h"

/* ---- synchronisation ----------------------------------------------------- */

static const char *const sync_names[] = {
    "threadgroup_barrier", "simdgroup_barrier",
    "simd_sum", "simd_product", "simd_max", "simd_min", "simd_and", "simd_or", "simd_xor",
    "simd_prefix_inclusive_sum", "simd_prefix_exclusive_sum", "simd_prefix_inclusive_product",
    "simd_prefix_exclusive_product", "simd_shuffle", "simd_shuffle_up", "simd_shuffle_down",
    "simd_shuffle_xor", "simd_shuffle_rotate_up", "simd_shuffle_rotate_down",
    "simd_shuffle_and_fill_up", "simd_shuffle_and_fill_down", "simd_broadcast",
    "simd_broadcast_first", "simd_ballot", "simd_any", "simd_all", "simd_is_first",
    "simd_active_threads_mask", "simd_vote",
    "quad_sum", "quad_product", "quad_max", "quad_min", "quad_and", "quad_or", "quad_xor",
    "quad_shuffle", "quad_shuffle_up", "quad_shuffle_down", "quad_shuffle_xor", "quad_broadcast",
    "quad_ballot", "quad_any", "quad_all", "quad_is_first",
    "simdgroup_matrix", "simdgroup_float8x8", "simdgroup_half8x8", "simdgroup_bfloat8x8",
    "simdgroup_load", "simdgroup_store", "simdgroup_multiply", "simdgroup_multiply_accumulate",
    "make_filled_simdgroup_matrix",
    "reduce_columns", /* a tensor operation whose threads meet in threadgroup memory */
    NULL};

static int ident_is(const char *id, int len, const char *word) {
    return (size_t)len == strlen(word) && memcmp(id, word, (size_t)len) == 0;
}

static int has_prefix(const char *id, int len, const char *prefix) {
    size_t pl = strlen(prefix);
    return (size_t)len > pl && memcmp(id, prefix, pl) == 0;
}

static void sync_cb(const char *id, int len, const char *next, int next_len, void *user) {
    int *found = user;
    if (*found) return;
    for (int i = 0; sync_names[i]; i++)
        if (ident_is(id, len, sync_names[i])) {
            *found = 1;
            return;
        }
    /* other SIMD/quad/simdgroup operations, when called */
    if ((has_prefix(id, len, "simd_") || has_prefix(id, len, "quad_") ||
         has_prefix(id, len, "simdgroup_")) &&
        next && next_len == 1 && next[0] == '(') {
        for (int a = 0; a < alloy_attribute_count(); a++)
            if (ident_is(id, len, alloy_attribute_name(a))) return;
        *found = 1;
    }
}

int alloy_sync_kind(const char *id, int len, const char *next, int next_len) {
    if (ident_is(id, len, "threadgroup_barrier") || ident_is(id, len, "simdgroup_barrier")) return 1;
    int found = 0;
    sync_cb(id, len, next, next_len, &found);
    return found ? 2 : 0;
}

int alloy_source_uses_sync(const char *src) {
    if (!src) return 0;
    size_t len = strlen(src);
    if (len > (size_t)0x7fffffff) return 1;
    int found = 0;
    if (alloy_for_each_ident(src, (int)len, sync_cb, &found) != ALLOY_OK) return 1;
    return found;
}

/* The names that bring in the tensor prelude (a body may spell the types
 * without `#include <metal_tensor>`, as the prelude is always there). */
static const char *const tensor_names[] = {
    "tensor", "cooperative_tensor", "extents", "dextents", "tensor_inline", "tensor_offset",
    "tensor_handle", "matmul2d", "matmul2d_descriptor", "mpp", "tensor_ops", "execution_thread",
    "execution_threads", "execution_simdgroup", "execution_simdgroups", "reduce_rows",
    "reduce_columns", "is_iterator_compatible", "reduction_operation", "dynamic_extent", NULL};

static void tensor_cb(const char *id, int len, const char *next, int next_len, void *user) {
    (void)next;
    (void)next_len;
    int *found = user;
    if (*found) return;
    for (int i = 0; tensor_names[i]; i++)
        if (ident_is(id, len, tensor_names[i])) {
            *found = 1;
            return;
        }
}

int alloy_source_uses_tensor_ops(const char *src) {
    if (!src) return 0;
    size_t len = strlen(src);
    if (len > (size_t)0x7fffffff) return 0;
    int found = 0;
    if (alloy_for_each_ident(src, (int)len, tensor_cb, &found) != ALLOY_OK) return 1;
    return found;
}

/* ---- checks -------------------------------------------------------------- */

static const struct {
    const char *name; /* exact identifier, or a prefix when it ends with '*' */
    const char *what;
} unsupported[] = {
    {"texture1d*", "textures"},
    {"texture2d*", "textures"},
    {"texture3d*", "textures"},
    {"texturecube*", "textures"},
    {"texture_buffer", "textures"},
    {"depth2d*", "depth textures"},
    {"depthcube*", "depth textures"},
    {"sampler", "samplers"},
    {"imageblock", "imageblocks"},
    {"threadgroup_imageblock", "imageblocks"},
    {"visible_function_table", "function tables"},
    {"intersection_function_table", "function tables"},
    {"acceleration_structure", "ray tracing"},
    {"primitive_acceleration_structure", "ray tracing"},
    {"instance_acceleration_structure", "ray tracing"},
    {"intersector", "ray tracing"},
    {"indirect_command_buffer", "indirect command buffers"},
    {"render_command", "indirect command buffers"},
    {"compute_command", "indirect command buffers"},
    {"mesh_grid_properties", "mesh shaders"},
};

static const char *unsupported_what(const char *id, int len) {
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++) {
        const char *n = unsupported[i].name;
        size_t nl = strlen(n);
        if (n[nl - 1] == '*') {
            if ((size_t)len >= nl - 1 && memcmp(id, n, nl - 1) == 0) return unsupported[i].what;
        } else if ((size_t)len == nl && memcmp(id, n, nl) == 0) {
            return unsupported[i].what;
        }
    }
    return NULL;
}

static int tok_is(const char *src, const alloy_token *t, const char *word) {
    return (size_t)t->len == strlen(word) && memcmp(src + t->start, word, (size_t)t->len) == 0;
}

/* Index of the first significant (non-comment) token at or after i, or n. */
static int sig(const alloy_token *t, int n, int i) {
    while (i < n && t[i].kind == ALLOY_TOK_COMMENT) i++;
    return i;
}

/* Line of a whole kernel/vertex/fragment function definition, or 0. */
static int find_kernel_definition(const char *src, const alloy_token *t, int n) {
    for (int i = sig(t, n, 0); i < n; i = sig(t, n, i + 1)) {
        int a = sig(t, n, i + 1), b = a < n ? sig(t, n, a + 1) : n,
            c = b < n ? sig(t, n, b + 1) : n;
        if (t[i].kind == ALLOY_TOK_IDENT && tok_is(src, &t[i], "kernel") && a < n &&
            t[a].kind == ALLOY_TOK_IDENT && tok_is(src, &t[a], "void"))
            return t[i].line;
        if (t[i].kind == ALLOY_TOK_IDENT &&
            (tok_is(src, &t[i], "vertex") || tok_is(src, &t[i], "fragment")) && c < n &&
            t[a].kind == ALLOY_TOK_IDENT && t[b].kind == ALLOY_TOK_IDENT &&
            tok_is(src, &t[c], "("))
            return t[i].line;
        if (t[i].kind == ALLOY_TOK_PUNCT && tok_is(src, &t[i], "[[") && b < n &&
            t[a].kind == ALLOY_TOK_IDENT &&
            (tok_is(src, &t[a], "kernel") || tok_is(src, &t[a], "vertex") ||
             tok_is(src, &t[a], "fragment")) &&
            tok_is(src, &t[b], "]]"))
            return t[i].line;
    }
    return 0;
}

static alloy_status check_part(const char *kernel_name, const char *src, int is_header) {
    char what[320];
    snprintf(what, sizeof what, "the %s of kernel '%.256s'", is_header ? "header" : "body",
             kernel_name);
    alloy_token *t;
    int n;
    alloy_status st = alloy_scan(src, what, &t, &n);
    if (st != ALLOY_OK) return st;

    int line = find_kernel_definition(src, t, n);
    if (line && !is_header) {
        free(t);
        return alloy_error(
            ALLOY_ERROR_INVALID_ARGUMENT,
            "kernel '%s': the source is the body of a kernel, not a whole kernel definition "
            "(line %d of the source starts a `kernel void f(...)` function). alloy generates the "
            "signature from input_names and output_names, and declares the thread attributes "
            "(thread_position_in_grid, ...) that the body uses; pass as source only what is "
            "between the braces of the kernel, and put helper functions in header",
            kernel_name, line);
    }
    if (line) {
        free(t);
        return alloy_error(
            ALLOY_ERROR_INVALID_ARGUMENT,
            "kernel '%s': line %d of the header defines a kernel function; alloy generates the "
            "kernel itself from the body (source), input_names and output_names, so the header "
            "may hold only helpers (functions, types, constants, #define and #include)",
            kernel_name, line);
    }
    for (int i = 0; i < n; i++) {
        if (t[i].kind != ALLOY_TOK_IDENT) continue;
        const char *w = unsupported_what(src + t[i].start, t[i].len);
        if (!w) continue;
        int p = i - 1;
        while (p >= 0 && t[p].kind == ALLOY_TOK_COMMENT) p--;
        if (p >= 0 && (tok_is(src, &t[p], ".") || tok_is(src, &t[p], "->"))) continue; /* member */
        st = alloy_error(ALLOY_ERROR_COMPILE,
                         "kernel '%s': line %d of the %s uses '%.*s': %s are not supported by "
                         "alloy's MSL dialect; pass the data as a buffer input instead",
                         kernel_name, t[i].line, is_header ? "header" : "body", t[i].len,
                         src + t[i].start, w);
        free(t);
        return st;
    }
    free(t);
    return ALLOY_OK;
}

alloy_status alloy_analyze_source(const char *kernel_name, const char *body, const char *header,
                                  int *uses_sync) {
    if (uses_sync) *uses_sync = 0;
    if (!kernel_name) kernel_name = "";
    if (!body)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': the source (body) is NULL; pass the statements of the "
                           "kernel body",
                           kernel_name);
    alloy_status st = check_part(kernel_name, body, 0);
    if (st == ALLOY_OK && header) st = check_part(kernel_name, header, 1);
    if (st != ALLOY_OK) return st;
    if (uses_sync) *uses_sync = alloy_source_uses_sync(body) || alloy_source_uses_sync(header);
    return ALLOY_OK;
}
