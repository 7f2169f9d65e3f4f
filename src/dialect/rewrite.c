/* rewrite.c — the MSL-to-C++ token rewrite.
 *
 * Kernel bodies and headers are compiled as C++ against a prelude that
 * provides MSL's types and functions; only the syntax C++ cannot express is
 * rewritten here, token by token:
 *   - `threadgroup T x[N];` / `constant T x = ...;` declarations become
 *     `ALLOY_THREADGROUP` / `ALLOY_CONSTANT` declarations (prelude macros);
 *   - other address-space qualifiers (`device constant thread threadgroup`)
 *     are erased;
 *   - `[[...]]` attributes are erased, standard C++ ones kept;
 *   - swizzles `.xy`, `.bgra` become `.template alloy_swz<...>()` (or
 *     `alloy_swz_ref` when assigned to);
 *   - half literals `1.0h` become `half(1.0f)`;
 *   - with tensor operations, a subscript with several indices `t[i, j]`
 *     becomes `t[alloy_md(i, j)]` (C++ before 23 reads the comma as an
 *     operator);
 *   - `#include <metal_...>`, `#include <MetalPerformancePrimitives/...>` and
 *     `#pragma METAL` lines are dropped (the prelude provides them).
 * Every newline stays exactly where it was (erased text becomes spaces), so
 * `#line` directives map compiler diagnostics to the user's own lines.
 *
 * Linear time on any text: the look-aheads that could rescan the rest of the
 * text for every token (the end of a `[[` attribute, whether a declaration
 * declares a pointer) are answered from tables built in one pass, or stop
 * after a bounded number of tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dialect/rewrite.h"

typedef struct rw {
    const char *src;
    const alloy_token *t;
    int n;
    alloy_strbuf *out;
    int *next_stop;     /* per token: the first punctuator or directive at or after it */
    int *attribute_scan; /* per `[[` token: see attribute_scan_table (NULL until needed) */
    int failed;          /* out of memory building a table */
    int debug;           /* ALLOY_REWRITE_CPU_DEBUG */
    unsigned char *multi_index; /* per token: MD_OPEN / MD_CLOSE (NULL: none) */
} rw;

#define MD_OPEN 1  /* a `[` whose subscript has several indices */
#define MD_CLOSE 2 /* its `]` */

static int is(const rw *r, int i, const char *word) {
    return i >= 0 && i < r->n && (size_t)r->t[i].len == strlen(word) &&
           memcmp(r->src + r->t[i].start, word, (size_t)r->t[i].len) == 0;
}

static int is_punct(const rw *r, int i, const char *p) {
    return i >= 0 && i < r->n && r->t[i].kind == ALLOY_TOK_PUNCT && is(r, i, p);
}

static int is_ident(const rw *r, int i) {
    return i >= 0 && i < r->n && r->t[i].kind == ALLOY_TOK_IDENT;
}

static int prev_sig(const rw *r, int i) {
    for (i--; i >= 0 && r->t[i].kind == ALLOY_TOK_COMMENT; i--) {
    }
    return i;
}

static int next_sig(const rw *r, int i) {
    for (i++; i < r->n && r->t[i].kind == ALLOY_TOK_COMMENT; i++) {
    }
    return i;
}

/* Appends src[a, b) with everything but line breaks turned into spaces. */
static void blank(alloy_strbuf *out, const char *src, int a, int b) {
    char buf[256];
    int k = 0;
    for (int i = a; i < b; i++) {
        char c = src[i];
        buf[k++] = (c == '\n' || c == '\r') ? c : ' ';
        if (k == (int)sizeof buf) {
            alloy_sb_append_n(out, buf, (size_t)k);
            k = 0;
        }
    }
    if (k) alloy_sb_append_n(out, buf, (size_t)k);
}

static void emit_tok(const rw *r, int i) {
    alloy_sb_append_n(r->out, r->src + r->t[i].start, (size_t)r->t[i].len);
}

/* ---- address spaces ------------------------------------------------------ */

static int is_decl_word(const rw *r, int i) {
    return is_ident(r, i) && (is(r, i, "static") || is(r, i, "const") || is(r, i, "constexpr") ||
                              is(r, i, "inline") || is(r, i, "volatile"));
}

static int statement_start_before(const rw *r, int i) {
    int p = prev_sig(r, i);
    if (p < 0) return 1;
    if (r->t[p].kind == ALLOY_TOK_PREPROC) return 1;
    return is_punct(r, p, ";") || is_punct(r, p, "{") || is_punct(r, p, "}") ||
           is_punct(r, p, ":");
}

/* Does the declaration whose specifiers continue at token i declare a
 * pointer or a reference (a `*` or `&` before the declarator ends)? 1 yes,
 * 0 no, -1 when the text ends first (a macro such as `#define TG threadgroup`). */
enum { DECLARATOR_LOOKAHEAD = 256 }; /* punctuators; no declarator is longer */

static int declares_pointer(const rw *r, int i) {
    int angle = 0, budget = DECLARATOR_LOOKAHEAD;
    for (int j = i < r->n ? r->next_stop[i] : r->n; j < r->n; j = r->next_stop[j + 1]) {
        if (--budget < 0) return -1;
        const alloy_token *t = &r->t[j];
        if (t->kind == ALLOY_TOK_COMMENT) continue;
        if (t->kind == ALLOY_TOK_PREPROC) return 0;
        if (t->kind != ALLOY_TOK_PUNCT) continue;
        if (is(r, j, "<")) {
            angle++;
        } else if (is(r, j, ">")) {
            if (angle > 0) angle--;
        } else if (is(r, j, ">>")) {
            angle = angle > 2 ? angle - 2 : 0;
        } else if (angle == 0) {
            if (is(r, j, "*") || is(r, j, "&") || is(r, j, "&&")) return 1;
            if (is(r, j, ";") || is(r, j, "=") || is(r, j, "[") || is(r, j, "{") ||
                is(r, j, ",") || is(r, j, "(") || is(r, j, ")") || is(r, j, "[["))
                return 0;
        }
    }
    return -1;
}

/* ---- ALLOY_CPU_DEBUG ---------------------------------------------------------- */

/* Appends src[a, b) with its newlines only (the text a replacement stands
 * for), so lines stay where they were. */
static void keep_newlines(alloy_strbuf *out, const char *src, int a, int b) {
    for (int k = a; k < b; k++)
        if (src[k] == '\n') alloy_sb_append(out, "\n");
}

/* `device` at token i in a debug rewrite: `device T *` (a declaration,
 * parameter or C-style cast) becomes `alloy_dbg::dev<T>`, so the pointer
 * stays checked (cpu_debug.h). Returns the index of the `*` consumed, or -1
 * when the form is not one this handles (the keyword is then erased). */
static int rewrite_device_pointer(const rw *r, int i) {
    int p = prev_sig(r, i);
    if (is_punct(r, p, "<")) return -1; /* reinterpret_cast<device T*>: left plain */
    int angle = 0, budget = DECLARATOR_LOOKAHEAD, star = -1;
    for (int j = next_sig(r, i); j < r->n && budget-- > 0; j = next_sig(r, j)) {
        const alloy_token *t = &r->t[j];
        if (t->kind == ALLOY_TOK_PREPROC) return -1;
        if (t->kind != ALLOY_TOK_PUNCT) continue;
        if (is(r, j, "<")) angle++;
        else if (is(r, j, ">")) angle--;
        else if (angle == 0 && is(r, j, "*")) {
            star = j;
            break;
        } else if (angle == 0 && !is(r, j, "::")) {
            return -1; /* a reference, an array, a declarator: not `device T*` */
        }
        if (angle < 0) return -1;
    }
    if (star < 0 || is_punct(r, next_sig(r, star), "*")) return -1; /* `T**`: left plain */
    const alloy_token *a = &r->t[next_sig(r, i)], *st = &r->t[star];
    alloy_sb_append(r->out, "alloy_dbg::dev<");
    /* the type between `device` and `*`, its newlines moved after the `>` */
    for (int k = a->start; k < st->start; k++)
        if (r->src[k] != '\n') alloy_sb_append_n(r->out, r->src + k, 1);
    alloy_sb_append(r->out, "> ");
    keep_newlines(r->out, r->src, r->t[i].start, st->start + st->len);
    return star;
}

/* `threadgroup T name[N]...;` at token i (the keyword; `after` the first
 * token of the type) in a debug rewrite becomes
 * `ALLOY_THREADGROUP alloy_dbg::tg_array<T, N, ...> name;`. Returns the
 * index of the `;`, or -1 when the declaration is not of that form (one
 * declarator, no initialiser). */
static int rewrite_threadgroup_array(const rw *r, int i, int after) {
    int name = -1, first_dim = -1, end = -1, budget = DECLARATOR_LOOKAHEAD;
    for (int j = after, depth = 0; j < r->n && budget-- > 0; j = next_sig(r, j)) {
        if (r->t[j].kind == ALLOY_TOK_PREPROC) return -1;
        if (is_punct(r, j, "[") && depth == 0 && first_dim < 0) {
            name = prev_sig(r, j);
            first_dim = j;
        }
        if (is_punct(r, j, "(") || is_punct(r, j, "[") || is_punct(r, j, "<")) depth++;
        else if (is_punct(r, j, ")") || is_punct(r, j, "]") || is_punct(r, j, ">")) depth--;
        else if (depth == 0 && (is_punct(r, j, ",") || is_punct(r, j, "=") || is_punct(r, j, "{")))
            return -1;
        else if (depth == 0 && is_punct(r, j, ";")) {
            end = j;
            break;
        }
    }
    if (end < 0 || first_dim < 0 || !is_ident(r, name) || name <= after) return -1;
    /* the dimensions [e1][e2]... up to the `;`: find them all before writing */
    int opens[8], closes[8], n_dims = 0;
    for (int j = first_dim; j < end;) {
        if (!is_punct(r, j, "[") || n_dims == 8) return -1;
        int depth = 0, close = -1;
        for (int k = j; k < end && close < 0; k++) {
            if (is_punct(r, k, "[")) depth++;
            else if (is_punct(r, k, "]") && --depth == 0) close = k;
        }
        if (close < 0) return -1;
        opens[n_dims] = j;
        closes[n_dims++] = close;
        j = next_sig(r, close);
    }
    for (int k = r->t[after].start; k < r->t[name].start; k++)
        if (r->src[k] == '*' || r->src[k] == '&') return -1;
    alloy_sb_append(r->out, "ALLOY_THREADGROUP alloy_dbg::tg_array<");
    for (int k = r->t[after].start; k < r->t[name].start; k++)
        if (r->src[k] != '\n') alloy_sb_append_n(r->out, r->src + k, 1);
    for (int d = 0; d < n_dims; d++) {
        alloy_sb_append(r->out, ", (");
        for (int k = r->t[opens[d]].start + 1; k < r->t[closes[d]].start; k++)
            if (r->src[k] != '\n') alloy_sb_append_n(r->out, r->src + k, 1);
        alloy_sb_append(r->out, ")");
    }
    alloy_sb_append(r->out, "> ");
    emit_tok(r, name);
    alloy_sb_append(r->out, ";");
    keep_newlines(r->out, r->src, r->t[i].start, r->t[end].start + r->t[end].len);
    return end;
}

/* Token i is `device`, `constant`, `thread` or `threadgroup`. Returns the
 * index of the last token consumed (i, or later for a debug rewrite). */
static int rewrite_address_space(const rw *r, int i) {
    int p = prev_sig(r, i);
    if (is_punct(r, p, ".") || is_punct(r, p, "->") || is_punct(r, p, "::")) {
        emit_tok(r, i); /* a member or qualified name, not the keyword */
        return i;
    }
    int is_tg = is(r, i, "threadgroup"), is_const = is(r, i, "constant");
    if (is_tg || is_const) {
        int b = i, has_static = 0, has_const = 0;
        for (int q = prev_sig(r, i); is_decl_word(r, q); q = prev_sig(r, q)) b = q;
        int after = next_sig(r, i);
        while (is_decl_word(r, after)) after = next_sig(r, after);
        int ptr = declares_pointer(r, after);
        /* a qualifier alone at the end of a macro: keep threadgroup storage
         * (its arrays must stay shared); drop `constant` (harmless) */
        if (ptr < 0) ptr = is_const;
        if (statement_start_before(r, b) && !ptr) {
            for (int q = b; q < after; q++) {
                if (is(r, q, "static")) has_static = 1;
                if (is(r, q, "const") || is(r, q, "constexpr")) has_const = 1;
            }
            if (is_tg) {
                int e = r->debug ? rewrite_threadgroup_array(r, i, after) : -1;
                if (e >= 0) return e;
                alloy_sb_append(r->out, "ALLOY_THREADGROUP");
            } else if (!has_static && !has_const) {
                alloy_sb_append(r->out, "ALLOY_CONSTANT");
            } else if (!has_static) {
                alloy_sb_append(r->out, "static  "); /* `const constant T x` */
            } else if (!has_const) {
                alloy_sb_append(r->out, "const   "); /* `static constant T x` */
            } else {
                blank(r->out, r->src, r->t[i].start, r->t[i].start + r->t[i].len);
            }
            return i;
        }
    }
    /* `constant` on a pointer, reference or parameter means read-only data:
     * keep that as `const` (unless a `const` already stands next to it). */
    if (is_const && !is(r, prev_sig(r, i), "const") && !is(r, next_sig(r, i), "const")) {
        alloy_sb_append(r->out, "const   ");
        return i;
    }
    if (r->debug && is(r, i, "device")) {
        int e = rewrite_device_pointer(r, i);
        if (e >= 0) return e;
    }
    blank(r->out, r->src, r->t[i].start, r->t[i].start + r->t[i].len);
    return i;
}

/* ---- swizzles ------------------------------------------------------------ */

static int swizzle_index(char c, const char *set) {
    const char *p = strchr(set, c);
    return c && p ? (int)(p - set) : -1;
}

/* Writes `template alloy_swz<...>()` for a swizzle at token i, or returns 0. */
static int rewrite_swizzle(const rw *r, int i) {
    const alloy_token *t = &r->t[i];
    if (t->len < 2 || t->len > 4) return 0;
    int p = prev_sig(r, i);
    if (!is_punct(r, p, ".") && !is_punct(r, p, "->")) return 0;
    const char *s = r->src + t->start;
    const char *set = swizzle_index(s[0], "xyzw") >= 0 ? "xyzw" : "rgba";
    int idx[4];
    for (int k = 0; k < t->len; k++)
        if ((idx[k] = swizzle_index(s[k], set)) < 0) return 0;
    int nx = next_sig(r, i);
    static const char *const assign[] = {"=", "+=", "-=", "*=", "/=", "%=",
                                         "&=", "|=", "^=", "<<=", ">>="};
    int ref = 0;
    for (size_t k = 0; k < sizeof assign / sizeof *assign; k++)
        if (is_punct(r, nx, assign[k])) ref = 1;
    alloy_sb_append(r->out, ref ? "template alloy_swz_ref<" : "template alloy_swz<");
    for (int k = 0; k < t->len; k++) alloy_sb_printf(r->out, k ? ",%d" : "%d", idx[k]);
    alloy_sb_append(r->out, ">()");
    return 1;
}

/* ---- literals ------------------------------------------------------------ */

/* `1.0h` -> `half(1.0f)`, `2h` -> `half(2.0f)`; 0 when not a half literal. */
static int rewrite_half_literal(const rw *r, int i) {
    const char *s = r->src + r->t[i].start;
    int len = r->t[i].len;
    if (len < 2 || (s[len - 1] != 'h' && s[len - 1] != 'H')) return 0;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X' || s[1] == 'b' || s[1] == 'B')) return 0;
    int has_point = 0, has_exp = 0;
    for (int k = 0; k < len - 1; k++) {
        char c = s[k];
        if (c >= '0' && c <= '9') continue;
        if (c == '\'') continue;
        if (c == '.' && !has_point && !has_exp) {
            has_point = 1;
            continue;
        }
        if ((c == 'e' || c == 'E') && !has_exp && k > 0) {
            has_exp = 1;
            if (k + 1 < len - 1 && (s[k + 1] == '+' || s[k + 1] == '-')) k++;
            continue;
        }
        return 0;
    }
    alloy_sb_append(r->out, "half(");
    alloy_sb_append_n(r->out, s, (size_t)len - 1);
    alloy_sb_append(r->out, has_point || has_exp ? "f)" : ".0f)");
    return 1;
}

/* ---- attributes ---------------------------------------------------------- */

static const char *const standard_attributes[] = {
    "likely", "unlikely", "maybe_unused", "fallthrough", "nodiscard", "noreturn", "deprecated",
    "carries_dependency", "no_unique_address", "assume", NULL};

/* The end of an attribute that opens at each `[[` token i: scanning from the
 * token after it with depth 0 (`(` `[` `{` +1, `[[` +2, `)` `]` `}` -1),
 * the first `]]` met at depth 0 or 1, or -1 if a closer takes the depth
 * below 0 first or the text ends. With P(j) the depth before token j
 * counted from the start of the text (`]]` as -2), the depth of that scan
 * at j is P(j) - P(a) >= 0 until it stops, so it stops at the first `]]`
 * with P(j) in {P(a), P(a) + 1} or the first single closer with P(j) ==
 * P(a), whichever comes first: one sweep from the end, remembering the
 * nearest such token for every value of P, answers every `[[` at once. */
static int attribute_scan_table(rw *r) {
    const int n = r->n;
    int *pre = malloc(((size_t)n + 1) * sizeof *pre);
    r->attribute_scan = malloc((size_t)(n ? n : 1) * sizeof *r->attribute_scan);
    if (!pre || !r->attribute_scan) goto oom;
    int lo = 0, hi = 0;
    pre[0] = 0;
    for (int j = 0; j < n; j++) {
        int step = 0;
        if (r->t[j].kind == ALLOY_TOK_PUNCT) {
            if (is(r, j, "[") || is(r, j, "(") || is(r, j, "{")) step = 1;
            else if (is(r, j, "[[")) step = 2;
            else if (is(r, j, "]") || is(r, j, ")") || is(r, j, "}")) step = -1;
            else if (is(r, j, "]]")) step = -2;
        }
        pre[j + 1] = pre[j] + step;
        if (pre[j + 1] < lo) lo = pre[j + 1];
        if (pre[j + 1] > hi) hi = pre[j + 1];
    }
    size_t span = (size_t)(hi - lo) + 2;
    int *near_dd = malloc(span * sizeof *near_dd), *near_cl = malloc(span * sizeof *near_cl);
    if (!near_dd || !near_cl) {
        free(near_dd);
        free(near_cl);
        goto oom;
    }
    for (size_t v = 0; v < span; v++) near_dd[v] = near_cl[v] = -1;
    for (int j = n - 1; j >= 0; j--) {
        r->attribute_scan[j] = -1;
        const size_t v = (size_t)(pre[j] - lo);
        if (r->t[j].kind == ALLOY_TOK_PUNCT) {
            if (is(r, j, "]]")) near_dd[v] = j;
            else if (is(r, j, "]") || is(r, j, ")") || is(r, j, "}")) near_cl[v] = j;
            else if (is(r, j, "[[") && j + 1 < n) {
                const size_t b = (size_t)(pre[j + 1] - lo); /* P(a): nothing between counts */
                int e = near_dd[b];
                if (b + 1 < span && near_dd[b + 1] >= 0 && (e < 0 || near_dd[b + 1] < e))
                    e = near_dd[b + 1];
                int f = near_cl[b];
                r->attribute_scan[j] = f >= 0 && (e < 0 || f < e) ? -1 : e;
            }
        }
    }
    free(near_dd);
    free(near_cl);
    free(pre);
    return 0;
oom:
    free(pre);
    free(r->attribute_scan);
    r->attribute_scan = NULL;
    r->failed = 1;
    return -1;
}

/* Token i is `[[`: index of the matching `]]` when this is an attribute,
 * else -1. `a[[b]]`-like text that does not look like an attribute list is
 * left alone. */
static int attribute_end(const rw *r, int i) {
    int a = next_sig(r, i);
    if (!is_ident(r, a)) return -1;
    int b = next_sig(r, a);
    while (is_punct(r, b, "::") && is_ident(r, next_sig(r, b))) b = next_sig(r, next_sig(r, b));
    if (!(is_punct(r, b, "]]") || is_punct(r, b, "(") || is_punct(r, b, ","))) return -1;
    int p = prev_sig(r, i);
    if (is_punct(r, b, "]]") && b == next_sig(r, a) &&
        (is_ident(r, p) || is_punct(r, p, "]") || is_punct(r, p, ")"))) {
        /* `x [[name]]`: an attribute only if `name` is one; else a subscript */
        int known = is(r, a, "stage_in") || is(r, a, "kernel") || is(r, a, "vertex") ||
                    is(r, a, "fragment") || is(r, a, "visible") || is(r, a, "flat") ||
                    is(r, a, "position");
        for (int k = 0; standard_attributes[k]; k++) known |= is(r, a, standard_attributes[k]);
        for (int k = 0; k < alloy_attribute_count(); k++)
            known |= is(r, a, alloy_attribute_name(k));
        if (!known) return -1;
    }
    return r->attribute_scan ? r->attribute_scan[i] : -1;
}

static int is_standard_attribute(const rw *r, int i) {
    int a = next_sig(r, i);
    for (int k = 0; standard_attributes[k]; k++)
        if (is(r, a, standard_attributes[k]) && !is_punct(r, next_sig(r, a), "::")) return 1;
    return 0;
}

/* ---- directives ---------------------------------------------------------- */

static alloy_status rewrite_text(const char *src, int len, unsigned flags, const char *what,
                                 alloy_strbuf *out);

static int skip_blanks(const char *s, int k, int end) {
    while (k < end && (s[k] == ' ' || s[k] == '\t')) k++;
    return k;
}

static int word_at(const char *s, int k, int end, const char *w) {
    int wl = (int)strlen(w);
    if (end - k < wl || memcmp(s + k, w, (size_t)wl) != 0) return 0;
    if (k + wl < end) {
        char c = s[k + wl];
        if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
            return 0;
    }
    return 1;
}

static alloy_status rewrite_directive(const rw *r, int i, const char *what) {
    const char *s = r->src;
    int a = r->t[i].start, end = a + r->t[i].len;
    int k = skip_blanks(s, a + 1, end);
    if (word_at(s, k, end, "include")) {
        int q = skip_blanks(s, k + 7, end);
        static const char mpp[] = "MetalPerformancePrimitives/";
        const size_t mpp_len = sizeof mpp - 1;
        if (end - q > 7 && (s[q] == '<' || s[q] == '"') &&
            (memcmp(s + q + 1, "metal_", 6) == 0 ||
             ((size_t)(end - q) > mpp_len + 1 && memcmp(s + q + 1, mpp, mpp_len) == 0))) {
            blank(r->out, s, a, end);
            return ALLOY_OK;
        }
    } else if (word_at(s, k, end, "pragma")) {
        int q = skip_blanks(s, k + 6, end);
        if (word_at(s, q, end, "METAL")) {
            blank(r->out, s, a, end);
            return ALLOY_OK;
        }
    } else if (word_at(s, k, end, "define")) {
        /* keep `#define NAME` or `#define NAME(params)`; rewrite the
         * replacement list as text of its own */
        int q = skip_blanks(s, k + 6, end);
        while (q < end && (s[q] == '_' || (s[q] >= 'a' && s[q] <= 'z') ||
                           (s[q] >= 'A' && s[q] <= 'Z') || (s[q] >= '0' && s[q] <= '9')))
            q++;
        if (q < end && s[q] == '(') {
            while (q < end && s[q] != ')') q++;
            if (q < end) q++;
        }
        alloy_sb_append_n(r->out, s + a, (size_t)(q - a));
        return rewrite_text(s + q, end - q,
                            ALLOY_SCAN_NO_PREPROC | ALLOY_SCAN_LENIENT |
                                (r->debug ? ALLOY_REWRITE_CPU_DEBUG : 0u),
                            what, r->out);
    }
    emit_tok(r, i);
    return ALLOY_OK;
}

/* ---- multi-index subscripts ----------------------------------------------- */

static const char *const not_subscripted[] = {"auto", "return", "case", "new", "delete",
                                               "throw", "else", "do", "co_return", NULL};

/* A `[` at i opens a subscript when it follows an expression: a name (not a
 * keyword that can precede a lambda or a structured binding), `)` or `]`. */
static int opens_subscript(const rw *r, int i) {
    int p = prev_sig(r, i);
    if (p < 0) return 0;
    if (is_ident(r, p)) {
        for (int k = 0; not_subscripted[k]; k++)
            if (is(r, p, not_subscripted[k])) return 0;
        return 1;
    }
    return is_punct(r, p, ")") || is_punct(r, p, "]");
}

/* Marks every subscript with a comma at its own level, in one pass with a
 * stack of open brackets (unbalanced text is left alone). A `[[` token pushes
 * two entries, so the stack holds two per token. */
static void multi_index_table(rw *r) {
    int *stack = malloc((2 * (size_t)r->n + 1) * 2 * sizeof(int));
    unsigned char *m = calloc((size_t)r->n + 1, 1);
    if (!stack || !m) {
        free(stack);
        free(m);
        r->failed = 1;
        return;
    }
    int depth = 0; /* entries: token index, comma seen (2 ints) */
    for (int j = 0; j < r->n; j++) {
        if (r->t[j].kind != ALLOY_TOK_PUNCT) continue;
        if (is(r, j, "(") || is(r, j, "{") || is(r, j, "[") || is(r, j, "[[")) {
            int pushes = is(r, j, "[[") ? 2 : 1;
            for (int k = 0; k < pushes; k++) {
                stack[2 * depth] = is(r, j, "[") && opens_subscript(r, j) ? j : -1;
                stack[2 * depth + 1] = 0;
                depth++;
            }
        } else if (is(r, j, ",")) {
            if (depth > 0) stack[2 * depth - 1] = 1;
        } else if (is(r, j, ")") || is(r, j, "}") || is(r, j, "]")) {
            if (depth == 0) continue;
            depth--;
            int open = stack[2 * depth];
            if (open >= 0 && stack[2 * depth + 1] && is(r, j, "]")) {
                m[open] = MD_OPEN;
                m[j] = MD_CLOSE;
            }
        }
    }
    free(stack);
    r->multi_index = m;
}

/* ---- driver -------------------------------------------------------------- */

static alloy_status rewrite_text(const char *src, int len, unsigned flags, const char *what,
                                 alloy_strbuf *out) {
    alloy_token *t;
    int n;
    alloy_status st = alloy_scan_ex(src, len, what, flags, &t, &n);
    if (st != ALLOY_OK) return st;
    rw r = {src, t, n, out, malloc(((size_t)n + 1) * sizeof(int)), NULL, 0,
            (flags & ALLOY_REWRITE_CPU_DEBUG) != 0, NULL};
    if (!r.next_stop) {
        free(t);
        return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory rewriting %s", what);
    }
    r.next_stop[n] = n;
    for (int j = n - 1; j >= 0; j--)
        r.next_stop[j] = t[j].kind == ALLOY_TOK_PUNCT || t[j].kind == ALLOY_TOK_PREPROC ? j
                                                                                      : r.next_stop[j + 1];
    for (int j = 0; j < n; j++)
        if (t[j].kind == ALLOY_TOK_PUNCT && is(&r, j, "[[")) {
            attribute_scan_table(&r);
            break;
        }
    if (flags & ALLOY_REWRITE_TENSOR) multi_index_table(&r);
    int cursor = 0;
    for (int i = 0; i < n && st == ALLOY_OK; i++) {
        alloy_sb_append_n(out, src + cursor, (size_t)(t[i].start - cursor));
        cursor = t[i].start + t[i].len;
        switch (t[i].kind) {
        case ALLOY_TOK_PREPROC:
            st = rewrite_directive(&r, i, what);
            break;
        case ALLOY_TOK_NUMBER:
            if (!rewrite_half_literal(&r, i)) emit_tok(&r, i);
            break;
        case ALLOY_TOK_IDENT:
            if (is(&r, i, "device") || is(&r, i, "constant") || is(&r, i, "thread") ||
                is(&r, i, "threadgroup")) {
                int e = rewrite_address_space(&r, i);
                if (e != i) {
                    cursor = t[e].start + t[e].len;
                    i = e;
                }
            }
            else if (!rewrite_swizzle(&r, i))
                emit_tok(&r, i);
            break;
        case ALLOY_TOK_PUNCT:
            if (is(&r, i, "[[")) {
                int j = attribute_end(&r, i);
                if (j >= 0) {
                    int e = t[j].start + t[j].len;
                    if (is_standard_attribute(&r, i))
                        alloy_sb_append_n(out, src + t[i].start, (size_t)(e - t[i].start));
                    else
                        blank(out, src, t[i].start, e);
                    cursor = e;
                    i = j;
                    break;
                }
            }
            if (r.multi_index && r.multi_index[i] == MD_CLOSE) alloy_sb_append(out, ")");
            emit_tok(&r, i);
            if (r.multi_index && r.multi_index[i] == MD_OPEN) alloy_sb_append(out, "alloy_md(");
            break;
        default:
            emit_tok(&r, i);
            break;
        }
    }
    if (st == ALLOY_OK) alloy_sb_append_n(out, src + cursor, (size_t)(len - cursor));
    if (st == ALLOY_OK && r.failed)
        st = alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory rewriting %s", what);
    free(r.next_stop);
    free(r.attribute_scan);
    free(r.multi_index);
    free(t);
    return st;
}

alloy_status alloy_rewrite_msl(const char *src, const char *what, unsigned flags, alloy_strbuf *out) {
    if (!src) return ALLOY_OK;
    size_t len = strlen(src);
    if (len > (size_t)0x7fffffff)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s is too long (2 GiB or more)", what);
    alloy_status st = rewrite_text(src, (int)len, flags & (ALLOY_REWRITE_CPU_DEBUG | ALLOY_REWRITE_TENSOR),
                                   what, out);
    if (st == ALLOY_OK && out->failed)
        return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory rewriting %s", what);
    return st;
}
