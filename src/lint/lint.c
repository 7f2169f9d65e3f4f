/* lint.c — the rules of `alloy lint` on one kernel (lint.h): a token pass
 * over the body with the dialect's scanner, a flow-insensitive taint of the
 * values that depend on the thread's position, the statement ranges that
 * only some threads run, and the accesses to outputs and threadgroup arrays
 * in source order. Every rule errs on the side of silence: a finding should
 * be a bug or a real cost, never noise. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dialect/rewrite.h"
#include "lint/lint.h"

/* ---- the report ------------------------------------------------------------------ */

const char *alloy_lint_level_name(alloy_lint_level level) {
    switch (level) {
    case ALLOY_LINT_ERROR: return "error";
    case ALLOY_LINT_WARNING: return "warning";
    case ALLOY_LINT_PERF: return "perf";
    default: return "info";
    }
}

void alloy_lint_add(alloy_lint_report *r, const char *rule, alloy_lint_level level, int line,
                    const char *fix, const char *fmt, ...) {
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        alloy_lint_finding *v = realloc(r->v, (size_t)cap * sizeof *v);
        if (!v) {
            r->failed = 1;
            return;
        }
        r->v = v;
        r->cap = cap;
    }
    alloy_lint_finding *f = &r->v[r->n++];
    f->rule = rule;
    f->level = level;
    f->line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof f->message, fmt, ap);
    va_end(ap);
    snprintf(f->fix, sizeof f->fix, "%s", fix ? fix : "");
}

void alloy_lint_report_free(alloy_lint_report *r) {
    free(r->v);
    memset(r, 0, sizeof *r);
}

/* ---- tokens ---------------------------------------------------------------------- */

typedef struct body {
    const char *src;
    alloy_token *t; /* significant tokens only (no comments or directives) */
    int n;
    int line0;      /* file line of source line 1 */
    int flat;       /* every line is line0 (lint.h: flat_lines) */
    unsigned char *tainted; /* per identifier token: its name depends on the thread */
} body;

static int is(const body *b, int i, const char *w) {
    return i >= 0 && i < b->n && (size_t)b->t[i].len == strlen(w) &&
           memcmp(b->src + b->t[i].start, w, (size_t)b->t[i].len) == 0;
}
static int is_ident(const body *b, int i) { return i >= 0 && i < b->n && b->t[i].kind == ALLOY_TOK_IDENT; }
static int same_text(const body *b, int i, int j) {
    return b->t[i].len == b->t[j].len && memcmp(b->src + b->t[i].start, b->src + b->t[j].start, (size_t)b->t[i].len) == 0;
}
static int file_line(const body *b, int i) {
    if (b->flat || b->n == 0) return b->line0;
    return b->line0 + (i < b->n ? b->t[i].line : b->t[b->n - 1].line) - 1;
}

/* Index of the bracket closing the one at i ( `(` `[` `{` ), or b->n. */
static int matching(const body *b, int i) {
    const char *open = is(b, i, "(") ? "(" : is(b, i, "[") ? "[" : "{";
    const char *close = open[0] == '(' ? ")" : open[0] == '[' ? "]" : "}";
    int depth = 0;
    for (int j = i; j < b->n; j++) {
        if (is(b, j, open)) depth++;
        else if (is(b, j, close) && --depth == 0) return j;
    }
    return b->n;
}

/* End (index of the `;` or `}`) of the statement starting at i. */
static int statement_end(const body *b, int i) {
    if (is(b, i, "{")) return matching(b, i);
    if (is(b, i, "if") || is(b, i, "while") || is(b, i, "for") || is(b, i, "switch")) {
        int c = matching(b, i + 1);
        int e = statement_end(b, c + 1);
        if (is(b, i, "if") && is(b, e + 1, "else")) e = statement_end(b, e + 2);
        return e;
    }
    if (is(b, i, "do")) {
        int e = statement_end(b, i + 1);
        while (e < b->n && !is(b, e, ";")) e++;
        return e;
    }
    int depth = 0;
    for (int j = i; j < b->n; j++) {
        if (is(b, j, "(") || is(b, j, "[") || is(b, j, "{")) depth++;
        else if (is(b, j, ")") || is(b, j, "]") || is(b, j, "}")) depth--;
        else if (depth == 0 && is(b, j, ";")) return j;
        if (depth < 0) return j;
    }
    return b->n - 1;
}

static int load(body *b, const char *src, int line0) {
    memset(b, 0, sizeof *b);
    if (!src) return 0;
    alloy_token *all;
    int n;
    if (alloy_scan_ex(src, (int)strlen(src), "the body", ALLOY_SCAN_LENIENT, &all, &n) != ALLOY_OK) return -1;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (all[i].kind != ALLOY_TOK_COMMENT && all[i].kind != ALLOY_TOK_PREPROC) all[k++] = all[i];
    b->src = src;
    b->t = all;
    b->n = k;
    b->line0 = line0 > 0 ? line0 : 1;
    b->tainted = calloc((size_t)(k ? k : 1), 1);
    return b->tainted ? 0 : -1;
}

static void unload(body *b) {
    free(b->t);
    free(b->tainted);
}

/* ---- values that depend on the thread ---------------------------------------------- */

static const char *const THREAD_ATTRIBUTES[] = {
    "thread_position_in_grid", "thread_position_in_threadgroup", "thread_index_in_threadgroup",
    "thread_index_in_simdgroup", "simdgroup_index_in_threadgroup", "thread_index_in_quadgroup",
    "quadgroup_index_in_threadgroup", NULL};

static int is_thread_attribute(const body *b, int i) {
    for (int k = 0; THREAD_ATTRIBUTES[k]; k++)
        if (is(b, i, THREAD_ATTRIBUTES[k])) return 1;
    return 0;
}

/* Marks every identifier token whose name is tainted: the attributes, and
 * (to a fixed point) names assigned from an expression that mentions one. */
static void taint(body *b) {
    for (int i = 0; i < b->n; i++) b->tainted[i] = is_ident(b, i) && is_thread_attribute(b, i);
    for (int round = 0, changed = 1; changed && round < 16; round++) {
        changed = 0;
        for (int i = 0; i < b->n; i++) {
            if (!is_ident(b, i) || b->tainted[i]) continue;
            int op = i + 1;
            if (!(is(b, op, "=") || is(b, op, "+=") || is(b, op, "-=") || is(b, op, "*=") || is(b, op, "/=") ||
                  is(b, op, "%=") || is(b, op, "|=") || is(b, op, "&=") || is(b, op, "^=") || is(b, op, "<<=") ||
                  is(b, op, ">>=")))
                continue;
            int depth = 0, hit = 0;
            for (int j = op + 1; j < b->n; j++) {
                if (is(b, j, "(") || is(b, j, "[") || is(b, j, "{")) depth++;
                else if (is(b, j, ")") || is(b, j, "]") || is(b, j, "}")) {
                    if (--depth < 0) break;
                } else if (depth == 0 && (is(b, j, ";") || is(b, j, ","))) break;
                if (b->tainted[j]) hit = 1;
            }
            if (!hit) continue;
            for (int j = 0; j < b->n; j++) /* every use of that name */
                if (is_ident(b, j) && !b->tainted[j] && same_text(b, i, j)) {
                    b->tainted[j] = 1;
                    changed = 1;
                }
        }
    }
}

static int range_tainted(const body *b, int from, int to) {
    for (int j = from; j <= to && j < b->n; j++)
        if (b->tainted[j]) return 1;
    return 0;
}

/* ---- rules ------------------------------------------------------------------------ */

static void rule_kernel_definition(const body *b, alloy_lint_report *r) {
    for (int i = 0; i + 1 < b->n; i++)
        if ((is(b, i, "kernel") || is(b, i, "[[")) && (is(b, i + 1, "void") || is(b, i + 1, "kernel"))) {
            alloy_lint_add(r, "kernel-definition", ALLOY_LINT_ERROR, file_line(b, i),
                           "pass only what goes between the braces: alloy (like MLX) writes the "
                           "signature from input_names and output_names",
                           "the body is a whole `kernel void` definition");
            return;
        }
}

/* Statement ranges [from, to] that only threads meeting a thread-dependent
 * condition run (if/else branches, loop bodies). */
typedef struct range {
    int from, to;
} range;

/* Does a `for` header (its `(` at open, `)` at close) depend on the
 * thread? A variable the header declares (`for (int k = 0; ...)`) takes its
 * taint from its own initialiser, not from other variables of that name. */
static int for_header_tainted(const body *b, int open, int close) {
    int semi = open + 1;
    while (semi < close && !is(b, semi, ";")) semi++;
    int local = -1, local_tainted = 0;
    for (int j = open + 1; j + 1 < semi; j++)
        if (is_ident(b, j) && is(b, j + 1, "=") && j > open + 1 && is_ident(b, j - 1)) {
            local = j;
            int e = j + 2;
            while (e < semi && !is(b, e, ",")) e++;
            local_tainted = range_tainted(b, j + 2, e - 1);
            break;
        }
    for (int j = open + 1; j < close; j++) {
        if (!b->tainted[j]) continue;
        if (local >= 0 && same_text(b, j, local)) {
            if (local_tainted) return 1;
            continue;
        }
        return 1;
    }
    return 0;
}

static int divergent_ranges(const body *b, range **out) {
    int n = 0, cap = 0;
    range *v = NULL;
    for (int i = 0; i < b->n; i++) {
        if (!(is(b, i, "if") || is(b, i, "while") || is(b, i, "for")) || !is(b, i + 1, "(")) continue;
        int c = matching(b, i + 1);
        if (c >= b->n) continue;
        if (is(b, i, "for") ? !for_header_tainted(b, i + 1, c) : !range_tainted(b, i + 1, c)) continue;
        int e = statement_end(b, c + 1);
        if (is(b, i, "if") && is(b, e + 1, "else")) e = statement_end(b, e + 2);
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            range *w = realloc(v, (size_t)cap * sizeof *w);
            if (!w) break;
            v = w;
        }
        v[n++] = (range){c + 1, e};
    }
    *out = v;
    return n;
}

static void rule_divergent_barrier(const body *b, const range *div, int n_div, alloy_lint_report *r) {
    for (int i = 0; i < b->n; i++) {
        if (!is(b, i, "threadgroup_barrier")) continue;
        for (int k = 0; k < n_div; k++)
            if (i >= div[k].from && i <= div[k].to) {
                alloy_lint_add(r, "barrier-in-divergent-branch", ALLOY_LINT_ERROR, file_line(b, i),
                               "move the barrier out of the branch (every thread of the group must "
                               "reach it), keeping only the work inside the condition",
                               "threadgroup_barrier under a condition that depends on the thread's "
                               "position: threads that skip it deadlock or race");
                break;
            }
    }
}

/* `name [ ... ] ( [ ... ] )*` at i: index of the last `]`, or -1. */
static int subscript_end(const body *b, int i) {
    if (!is(b, i + 1, "[")) return -1;
    int e = matching(b, i + 1);
    while (e + 1 < b->n && is(b, e + 1, "[")) e = matching(b, e + 1);
    return e < b->n ? e : -1;
}

static int is_assign(const body *b, int i) { return is(b, i, "="); }
static int is_compound(const body *b, int i) {
    static const char *const OPS[] = {"+=", "-=", "*=", "/=", "%=", "|=", "&=", "^=", "<<=", ">>=", NULL};
    for (int k = 0; OPS[k]; k++)
        if (is(b, i, OPS[k])) return 1;
    return 0;
}

/* The threadgroup arrays: `threadgroup T name[N]...;` (index of the name;
 * *n its first dimension when a literal, else 0). */
typedef struct tg_array {
    int name;
    long long n;
} tg_array;

static int threadgroup_arrays(const body *b, tg_array *v, int cap) {
    int n = 0;
    for (int i = 0; i < b->n && n < cap; i++) {
        if (!is(b, i, "threadgroup")) continue;
        for (int j = i + 1; j < b->n && !is(b, j, ";") && !is(b, j, "*") && !is(b, j, "&") && !is(b, j, "(");
             j++)
            if (is_ident(b, j) && is(b, j + 1, "[")) {
                long long dim = 0;
                if (b->t[j + 2].kind == ALLOY_TOK_NUMBER && is(b, j + 3, "]"))
                    dim = strtoll(b->src + b->t[j + 2].start, NULL, 0);
                v[n++] = (tg_array){j, dim};
                break;
            }
    }
    return n;
}

/* Reads and writes of threadgroup arrays in source order; a write records
 * its index text at the end of its statement (so `t[i] += t[i + s]` reads
 * before it writes). A read of an index no write since the last barrier
 * used is a read of another thread's element without a barrier. */
static void rule_threadgroup_race(const body *b, const tg_array *arr, int n_arr, alloy_lint_report *r) {
    for (int a = 0; a < n_arr; a++) {
        int writes[64], n_w = 0, pending[16], n_p = 0, stmt_end = -1, reported = 0;
        for (int i = arr[a].name + 1; i < b->n && !reported; i++) {
            if (i > stmt_end && n_p) {
                for (int k = 0; k < n_p && n_w < 64; k++) writes[n_w++] = pending[k];
                n_p = 0;
            }
            if (is(b, i, "threadgroup_barrier") || is(b, i, "simdgroup_barrier")) {
                n_w = n_p = 0;
                continue;
            }
            if (!is_ident(b, i) || !same_text(b, i, arr[a].name)) continue;
            int e = subscript_end(b, i);
            if (e < 0) continue;
            int write = is_assign(b, e + 1) || is_compound(b, e + 1);
            if (write) {
                if (n_p < 16) pending[n_p++] = i + 1;
                stmt_end = statement_end(b, i);
                continue;
            }
            if (!n_w) continue; /* nothing written since the last barrier */
            int own = 0;
            for (int k = 0; k < n_w && !own; k++) {
                int w = writes[k], we = matching(b, w), re = matching(b, i + 1);
                if (we - w != re - (i + 1)) continue;
                own = 1;
                for (int q = 0; q <= we - w && own; q++) own = same_text(b, w + q, i + 1 + q);
            }
            if (own) continue;
            alloy_lint_add(r, "threadgroup-race", ALLOY_LINT_WARNING, file_line(b, i),
                           "put threadgroup_barrier(mem_flags::mem_threadgroup) between the write and "
                           "the read",
                           "threadgroup array '%.*s' is read at an element another thread may have "
                           "written since the last barrier",
                           b->t[i].len, b->src + b->t[i].start);
            reported = 1;
        }
    }
}

static int launches_all_init(const alloy_lint_kernel *k, int *unknown, int *first_without) {
    int all = 1;
    *unknown = 0;
    *first_without = 0;
    for (int i = 0; i < k->n_launches; i++) {
        if (k->launches[i].has_init_value < 0) *unknown = 1;
        else if (!k->launches[i].has_init_value) {
            all = 0;
            if (!*first_without) *first_without = k->launches[i].line;
        }
    }
    return all;
}

static void rule_output_read_first(const body *b, const alloy_lint_kernel *k, alloy_lint_report *r) {
    if (k->atomic_outputs) return;
    int unknown, without;
    int all_init = launches_all_init(k, &unknown, &without);
    if (k->n_launches && all_init && !unknown) return;
    for (int o = 0; o < k->n_outputs; o++) {
        for (int i = 0; i < b->n; i++) {
            if (!is(b, i, k->outputs[o])) continue;
            int e = subscript_end(b, i);
            if (e < 0) continue;
            if (is_assign(b, e + 1)) break; /* written first */
            int level = k->n_launches && !all_init ? ALLOY_LINT_ERROR : ALLOY_LINT_WARNING;
            alloy_lint_add(r, "output-read-before-write", (alloy_lint_level)level, file_line(b, i),
                           "pass init_value= to the launch (the output's starting value), or write the "
                           "element before reading it",
                           "output '%s' is read before any write, and without init_value its contents "
                           "are undefined",
                           k->outputs[o]);
            break;
        }
    }
}

static void rule_unguarded_write(const body *b, const alloy_lint_kernel *k, alloy_lint_report *r) {
    int rounds = 0;
    for (int i = 0; i < k->n_launches; i++) rounds |= k->launches[i].grid_rounds_up;
    if (!rounds) return;
    for (int i = 0; i < b->n; i++) /* any comparison of a thread-dependent value is a guard */
        if ((is(b, i, "<") || is(b, i, ">") || is(b, i, "<=") || is(b, i, ">=")) &&
            ((i > 0 && b->tainted[i - 1]) || (i + 1 < b->n && b->tainted[i + 1]) ||
             range_tainted(b, i - 3 > 0 ? i - 3 : 0, i + 3)))
            return;
    for (int o = 0; o < k->n_outputs; o++)
        for (int i = 0; i < b->n; i++) {
            if (!is(b, i, k->outputs[o])) continue;
            int e = subscript_end(b, i);
            if (e < 0 || !(is_assign(b, e + 1) || is_compound(b, e + 1)) || !range_tainted(b, i + 1, e)) continue;
            alloy_lint_add(r, "unguarded-output-write", ALLOY_LINT_WARNING, file_line(b, i),
                           "return early when the position is past the data (`if (i >= n) return;`), or "
                           "launch exactly as many threads as elements (the grid counts threads)",
                           "output '%s' is written at a thread's position with no bound check, but the "
                           "launch rounds the grid up past the data",
                           k->outputs[o]);
            return;
        }
}

/* How many threads the index [from, close) reaches when it is the thread's
 * linear index or x position in its group (directly, or a name declared as
 * `T name = <one of them>;`), else 0. */
static long long position_reach(const body *b, int from, int close, long long total, long long tg_x) {
    if (from >= b->n) return 0;
    if (is(b, from, "thread_index_in_threadgroup") && close == from + 1) return total;
    if (is(b, from, "thread_position_in_threadgroup") && is(b, from + 1, ".") && is(b, from + 2, "x") &&
        is(b, from + 3, "]"))
        return tg_x;
    if (close != from + 1 || !is_ident(b, from)) return 0;
    for (int j = 0; j + 3 < b->n; j++) /* `name = attribute` (+ `.x`) followed by `;` */
        if (is_ident(b, j) && same_text(b, j, from) && is(b, j + 1, "=") && j >= 1 && is_ident(b, j - 1)) {
            if (is(b, j + 2, "thread_index_in_threadgroup") && is(b, j + 3, ";")) return total;
            if (is(b, j + 2, "thread_position_in_threadgroup") && is(b, j + 3, ".") && is(b, j + 4, "x") &&
                is(b, j + 5, ";"))
                return tg_x;
            return 0;
        }
    return 0;
}

static void rule_small_threadgroup_array(const body *b, const tg_array *arr, int n_arr,
                                         const alloy_lint_kernel *k, alloy_lint_report *r) {
    for (int l = 0; l < k->n_launches; l++) {
        const long long *tg = k->launches[l].threadgroup;
        if (tg[0] <= 0) continue;
        long long total = tg[0] * (tg[1] > 0 ? tg[1] : 1) * (tg[2] > 0 ? tg[2] : 1);
        for (int a = 0; a < n_arr; a++) {
            if (arr[a].n <= 0) continue;
            for (int i = arr[a].name + 1; i < b->n; i++) {
                if (!is_ident(b, i) || !same_text(b, i, arr[a].name) || !is(b, i + 1, "[")) continue;
                /* a[thread_index_in_threadgroup], a[thread_position_in_threadgroup.x], or a
                 * name declared as one of them */
                long long need = position_reach(b, i + 2, i + 2 < b->n && is(b, i + 3, "]") ? i + 3 : -1,
                                                total, tg[0]);
                if (need > arr[a].n) {
                    alloy_lint_add(r, "threadgroup-array-too-small", ALLOY_LINT_ERROR, file_line(b, i),
                                   "size the array for the threadgroup (or launch a smaller threadgroup)",
                                   "threadgroup array '%.*s' has %lld elements but is indexed by the "
                                   "thread's position in a threadgroup of %lld threads (launch at line %d)",
                                   b->t[i].len, b->src + b->t[i].start, arr[a].n, need, k->launches[l].line);
                    break;
                }
            }
        }
    }
}

static const char *const INT_TYPES[] = {"int", "uint", "short", "ushort", "long", "ulong", "size_t",
                                        "int32_t", "uint32_t", "int64_t", "uint64_t", "unsigned", NULL};

/* Is the identifier at i a variable of integer type (declared so in the
 * body and not a compile-time constant)? */
static int integer_variable(const body *b, int i) {
    for (int j = 0; j < b->n; j++) {
        if (j == i || !is_ident(b, j) || !same_text(b, i, j)) continue;
        int p = j - 1;
        while (p >= 0 && is(b, p, ",")) return 0; /* second declarator: unknown */
        if (p < 0) continue;
        for (int t = 0; INT_TYPES[t]; t++)
            if (is(b, p, INT_TYPES[t])) {
                for (int q = p - 1; q >= 0 && q >= p - 3; q--)
                    if (is(b, q, "constexpr") || is(b, q, "constant")) return 0;
                if (p >= 1 && is(b, p - 1, "const") && b->t[j + 2].kind == ALLOY_TOK_NUMBER) return 0;
                return 1;
            }
    }
    return 0;
}

static void rule_division_in_loop(const body *b, alloy_lint_report *r) {
    int last_line = -1;
    unsigned char *seen = calloc((size_t)(b->n ? b->n : 1), 1); /* a division in nested loops: once */
    if (!seen) return;
    for (int i = 0; i < b->n; i++) {
        if (!(is(b, i, "for") || is(b, i, "while")) || !is(b, i + 1, "(")) continue;
        int c = matching(b, i + 1), e = statement_end(b, c + 1);
        for (int j = is(b, i, "for") ? i + 2 : c + 1; j <= e && j < b->n; j++) {
            if (!(is(b, j, "/") || is(b, j, "%") || is(b, j, "/=") || is(b, j, "%="))) continue;
            int d = j + 1;
            int shape = is_ident(b, d) && b->t[d].len > 6 &&
                        memcmp(b->src + b->t[d].start + b->t[d].len - 6, "_shape", 6) == 0 && is(b, d + 1, "[");
            if (!(is_ident(b, d) && (shape || integer_variable(b, d)))) continue;
            if (seen[j] || file_line(b, j) == last_line) continue;
            seen[j] = 1;
            last_line = file_line(b, j);
            alloy_lint_add(r, "division-in-loop", ALLOY_LINT_PERF, last_line,
                           "hoist the division out of the loop, make the divisor a template constant, or "
                           "step an index instead (GPUs have no integer divide instruction)",
                           "integer %s by the variable '%.*s' inside a loop", is(b, j, "/") || is(b, j, "/=") ? "division" : "remainder",
                           b->t[d].len, b->src + b->t[d].start);
        }
    }
    free(seen);
}

static void rule_launches(const alloy_lint_kernel *k, alloy_lint_report *r) {
    for (int l = 0; l < k->n_launches; l++) {
        const alloy_lint_launch *L = &k->launches[l];
        if (L->grid_divides && !L->grid_rounds_up) {
            alloy_lint_add(r, "grid-is-threadgroup-count", ALLOY_LINT_ERROR, L->line,
                           "pass the number of THREADS as grid (MLX's metal_kernel counts threads, not "
                           "threadgroups): e.g. grid=(n, 1, 1), threadgroup=(256, 1, 1)",
                           "kernel '%s': the grid is computed as ceil(n / threadgroup), a count of "
                           "threadgroups",
                           k->name ? k->name : "?");
        } else {
            for (int d = 0; d < 3; d++)
                if (L->grid[d] > 1 && L->threadgroup[d] > 0 && L->grid[d] < L->threadgroup[d]) {
                    alloy_lint_add(r, "grid-is-threadgroup-count", ALLOY_LINT_ERROR, L->line,
                                   "pass the number of THREADS as grid (MLX's metal_kernel counts "
                                   "threads, not threadgroups)",
                                   "kernel '%s': grid.%c = %lld is smaller than threadgroup.%c = %lld: "
                                   "it looks like a count of threadgroups",
                                   k->name ? k->name : "?", "xyz"[d], L->grid[d], "xyz"[d], L->threadgroup[d]);
                    break;
                }
        }
        if (k->atomic_outputs && L->has_init_value == 0)
            alloy_lint_add(r, "atomic-outputs-without-init", ALLOY_LINT_ERROR, L->line,
                           "pass init_value= (e.g. 0 for sums): atomic outputs are read before they are "
                           "written",
                           "kernel '%s' has atomic_outputs=True but this launch sets no init_value",
                           k->name ? k->name : "?");
    }
}

void alloy_lint_kernel_check(const alloy_lint_kernel *k, alloy_lint_report *r) {
    body b;
    if (!k->body || load(&b, k->body, k->body_line) != 0) {
        if (k->body) r->failed = 1;
        return;
    }
    b.flat = k->flat_lines;
    taint(&b);
    range *div = NULL;
    int n_div = divergent_ranges(&b, &div);
    tg_array arr[32];
    int n_arr = threadgroup_arrays(&b, arr, 32);
    rule_kernel_definition(&b, r);
    rule_launches(k, r);
    rule_divergent_barrier(&b, div, n_div, r);
    rule_threadgroup_race(&b, arr, n_arr, r);
    rule_output_read_first(&b, k, r);
    rule_unguarded_write(&b, k, r);
    rule_small_threadgroup_array(&b, arr, n_arr, k, r);
    rule_division_in_loop(&b, r);
    free(div);
    unload(&b);
}
