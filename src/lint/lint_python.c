/* lint_python.c — finds body-only kernels in Python source without running
 * it: a small tokenizer (names, numbers, operators, every kind of string
 * literal, comments), the `metal_kernel(...)` calls (`mx.fast.metal_kernel`,
 * `alloy.metal_kernel`, ...) with their keyword arguments, the variable each
 * kernel is assigned to, and the calls of that variable (its launches:
 * grid, threadgroup, init_value). A `source=` that is a name is followed to
 * the last string literal assigned to it before the call. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "lint/lint.h"

typedef enum { P_NAME, P_NUMBER, P_STRING, P_OP, P_NEWLINE, P_END } ptok_kind;

typedef struct ptok {
    ptok_kind kind;
    int start, len, line;
    /* strings: the decoded value (malloc'd), whether an f-string, the line
     * the value starts on */
    char *value;
    int fstring;
} ptok;

typedef struct pysrc {
    const char *s;
    int n;
    ptok *t;
    int nt, cap;
} pysrc;

static int push(pysrc *p, ptok t) {
    if (p->nt == p->cap) {
        int cap = p->cap ? 2 * p->cap : 256;
        ptok *v = realloc(p->t, (size_t)cap * sizeof *v);
        if (!v) return -1;
        p->t = v;
        p->cap = cap;
    }
    p->t[p->nt++] = t;
    return 0;
}

static int is_name_char(char c) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (unsigned char)c >= 0x80;
}

/* A string literal starting at i (after any prefix `pre` of length pl).
 * Returns the index after it. */
static int string_literal(pysrc *p, int i, int pl, int *line) {
    const char *s = p->s;
    int raw = 0, f = 0;
    for (int k = i - pl; k < i; k++) {
        raw |= s[k] == 'r' || s[k] == 'R';
        f |= s[k] == 'f' || s[k] == 'F';
    }
    char q = s[i];
    int triple = i + 2 < p->n && s[i + 1] == q && s[i + 2] == q;
    int j = i + (triple ? 3 : 1), start_line = *line;
    char *v = malloc((size_t)(p->n - j) + 1);
    int vn = 0;
    while (j < p->n) {
        char c = s[j];
        if (triple ? (c == q && j + 2 < p->n && s[j + 1] == q && s[j + 2] == q) : c == q) {
            j += triple ? 3 : 1;
            break;
        }
        if (!triple && c == '\n') break; /* unterminated: stop at the line's end */
        if (c == '\n') (*line)++;
        if (c == '\\' && j + 1 < p->n) {
            char e = s[j + 1];
            if (raw) {
                if (v) v[vn++] = c, v[vn++] = e;
            } else if (e == '\n') {
                (*line)++;
            } else if (v) {
                v[vn++] = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == '0' ? '\0' : e;
            }
            if (e == '\n' && raw) (*line)++;
            j += 2;
            continue;
        }
        if (v) v[vn++] = c;
        j++;
    }
    if (v) v[vn] = 0;
    if (v && f) { /* an f-string: `{{` `}}` are braces, `{expr}` an opaque identifier */
        int w = 0;
        for (int k = 0; k < vn; k++) {
            if ((v[k] == '{' || v[k] == '}') && k + 1 < vn && v[k + 1] == v[k]) {
                v[w++] = v[k++];
            } else if (v[k] == '{') {
                int depth = 1;
                while (k + 1 < vn && depth) {
                    k++;
                    depth += v[k] == '{' ? 1 : v[k] == '}' ? -1 : 0;
                    if (v[k] == '\n') v[w++] = '\n'; /* keep the lines */
                }
                static const char PLACEHOLDER[] = "alloy_fstring_value";
                if (w + (int)sizeof PLACEHOLDER - 1 <= k) {
                    memcpy(v + w, PLACEHOLDER, sizeof PLACEHOLDER - 1);
                    w += (int)sizeof PLACEHOLDER - 1;
                } else {
                    v[w++] = 'F'; /* a short `{x}`: a one-letter identifier */
                }
            } else {
                v[w++] = v[k];
            }
        }
        v[w] = 0;
    }
    ptok t = {P_STRING, i - pl, j - (i - pl), start_line, v, f};
    if (push(p, t) != 0) free(v);
    return j;
}

static int tokenize(pysrc *p) {
    const char *s = p->s;
    int i = 0, line = 1, depth = 0;
    while (i < p->n) {
        char c = s[i];
        if (c == '\n') {
            if (depth == 0 && push(p, (ptok){P_NEWLINE, i, 1, line, NULL, 0})) return -1;
            line++;
            i++;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
            i++;
        } else if (c == '\\' && i + 1 < p->n && s[i + 1] == '\n') {
            i += 2;
            line++;
        } else if (c == '#') {
            while (i < p->n && s[i] != '\n') i++;
        } else if (c == '"' || c == '\'') {
            i = string_literal(p, i, 0, &line);
        } else if (is_name_char(c) && !(c >= '0' && c <= '9')) {
            int j = i;
            while (j < p->n && is_name_char(s[j])) j++;
            int pl = j - i;
            if (pl <= 2 && j < p->n && (s[j] == '"' || s[j] == '\'')) {
                int prefix = 1;
                for (int k = i; k < j; k++) prefix &= strchr("rRbBuUfF", s[k]) != NULL;
                if (prefix) {
                    i = string_literal(p, j, pl, &line);
                    continue;
                }
            }
            if (push(p, (ptok){P_NAME, i, j - i, line, NULL, 0})) return -1;
            i = j;
        } else if (c >= '0' && c <= '9') {
            int j = i;
            while (j < p->n && (is_name_char(s[j]) || s[j] == '.')) j++;
            if (push(p, (ptok){P_NUMBER, i, j - i, line, NULL, 0})) return -1;
            i = j;
        } else {
            static const char *const TWO[] = {"//", "**", "==", "!=", "<=", ">=", "->", ":=", "+=", "-=",
                                              "*=", "/=", "%=", "<<", ">>", NULL};
            int len = 1;
            for (int k = 0; TWO[k]; k++)
                if (i + 1 < p->n && s[i] == TWO[k][0] && s[i + 1] == TWO[k][1]) len = 2;
            if (c == '(' || c == '[' || c == '{') depth++;
            if ((c == ')' || c == ']' || c == '}') && depth > 0) depth--;
            if (push(p, (ptok){P_OP, i, len, line, NULL, 0})) return -1;
            i += len;
        }
    }
    return push(p, (ptok){P_END, p->n, 0, line, NULL, 0});
}

static int is(const pysrc *p, int i, const char *w) {
    return i >= 0 && i < p->nt && p->t[i].kind != P_STRING && (size_t)p->t[i].len == strlen(w) &&
           memcmp(p->s + p->t[i].start, w, (size_t)p->t[i].len) == 0;
}
static int same(const pysrc *p, int i, int j) {
    return p->t[i].len == p->t[j].len && memcmp(p->s + p->t[i].start, p->s + p->t[j].start, (size_t)p->t[i].len) == 0;
}

static int close_of(const pysrc *p, int i) {
    int depth = 0;
    for (int j = i; j < p->nt; j++) {
        if (is(p, j, "(") || is(p, j, "[") || is(p, j, "{")) depth++;
        else if ((is(p, j, ")") || is(p, j, "]") || is(p, j, "}")) && --depth == 0) return j;
    }
    return p->nt - 1;
}

/* End of the argument starting at i in a call (the `,` or `)` after it). */
static int arg_end(const pysrc *p, int i) {
    int depth = 0;
    for (int j = i; j < p->nt; j++) {
        if (is(p, j, "(") || is(p, j, "[") || is(p, j, "{")) depth++;
        else if (is(p, j, ")") || is(p, j, "]") || is(p, j, "}")) {
            if (depth-- == 0) return j;
        } else if (depth == 0 && is(p, j, ",")) return j;
    }
    return p->nt - 1;
}

/* The keyword argument `kw` of the call whose `(` is at open: the index of
 * its value's first token, or -1. *has_star: the call has `**kwargs`. */
static int keyword(const pysrc *p, int open, const char *kw, int *has_star) {
    int close = close_of(p, open);
    if (has_star) *has_star = 0;
    for (int j = open + 1; j < close; j = arg_end(p, j) + 1) {
        if (is(p, j, "**") && has_star) *has_star = 1;
        if (is(p, j, kw) && is(p, j + 1, "=")) return j + 2;
        if (is(p, j, ")")) break;
    }
    return -1;
}

static int flat_lines; /* set by string_value: the last value's lines all map to its first */

/* The string value of an expression: adjacent literals joined, or a name
 * assigned a literal before token `before`. *line gets the value's first
 * line; NULL when it cannot be known statically. */
static char *string_value(const pysrc *p, int i, int before, int *line, int *fstring) {
    *fstring = 0;
    flat_lines = 0;
    if (i >= 0 && p->t[i].kind == P_NAME) { /* the last `NAME = "..."` before the use */
        for (int j = before - 1; j >= 0; j--)
            if (p->t[j].kind == P_NAME && same(p, i, j) && is(p, j + 1, "=") &&
                (j == 0 || p->t[j - 1].kind == P_NEWLINE || is(p, j - 1, ";"))) {
                int v = j + 2 + is(p, j + 2, "("); /* NAME = "..." or NAME = ("..." "...") */
                return p->t[v].kind == P_STRING ? string_value(p, v, j, line, fstring) : NULL;
            }
        return NULL;
    }
    if (i < 0 || p->t[i].kind != P_STRING) return NULL;
    size_t total = 0;
    for (int j = i; j < p->nt && p->t[j].kind == P_STRING; j++) {
        if (p->t[j].fstring) *fstring = 1;
        total += p->t[j].value ? strlen(p->t[j].value) : 0;
    }
    char *v = malloc(total + 1);
    if (!v) return NULL;
    v[0] = 0;
    for (int j = i; j < p->nt && p->t[j].kind == P_STRING; j++)
        if (p->t[j].value) strcat(v, p->t[j].value);
    *line = p->t[i].line;
    /* one-line literals with `\n` escapes: every body line is on that line */
    int real = 0;
    for (int j = i; j < p->nt && p->t[j].kind == P_STRING; j++)
        real |= memchr(p->s + p->t[j].start, '\n', (size_t)p->t[j].len) != NULL || p->t[j].line != p->t[i].line;
    flat_lines = !real;
    return v;
}

/* ["a", "b"] as names (at most 64). */
static int names(const pysrc *p, int i, char **out, int cap) {
    if (i < 0 || !(is(p, i, "[") || is(p, i, "("))) return -1;
    int close = close_of(p, i), n = 0;
    for (int j = i + 1; j < close && n < cap; j++)
        if (p->t[j].kind == P_STRING && p->t[j].value) out[n++] = p->t[j].value;
        else if (p->t[j].kind == P_NAME) return -1; /* not literal */
    return n;
}

/* A grid/threadgroup tuple: literal entries, and how the grid was written. */
static void dims(const pysrc *p, int i, long long v[3], int *divides, int *rounds) {
    v[0] = v[1] = v[2] = -1;
    if (divides) *divides = 0;
    if (rounds) *rounds = 0;
    if (i < 0 || !(is(p, i, "(") || is(p, i, "["))) return;
    int close = close_of(p, i), d = 0;
    for (int j = i + 1; j < close && d < 3; d++) {
        int e = arg_end(p, j);
        if (e == j + 1 && p->t[j].kind == P_NUMBER) v[d] = strtoll(p->s + p->t[j].start, NULL, 0);
        int div = 0;
        for (int k = j; k < e; k++) {
            if (is(p, k, "//") || is(p, k, "ceil") || is(p, k, "ceildiv") || is(p, k, "cdiv")) div = 1;
            if (div && is(p, k, "*") && divides) { /* ceil(n / t) * t: rounded up to a multiple */
                if (rounds) *rounds = 1;
                div = 2;
            }
        }
        if (div == 1 && divides) *divides = 1;
        j = e + 1;
    }
}

alloy_status alloy_lint_python(const char *text, size_t len, alloy_lint_report *r) {
    pysrc p = {text, (int)len, NULL, 0, 0};
    alloy_status st = ALLOY_OK;
    if (len > 0x7fffffff || tokenize(&p) != 0) {
        st = alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory reading the Python source");
        goto done;
    }
    for (int i = 0; i + 1 < p.nt; i++) {
        if (!is(&p, i, "metal_kernel") || !is(&p, i + 1, "(")) continue;
        if (i >= 1 && is(&p, i - 1, "def")) continue;
        int open = i + 1, line = p.t[i].line, fstring = 0;
        /* the variable it is assigned to: NAME = a.b.metal_kernel( */
        int q = i;
        while (q >= 2 && is(&p, q - 1, ".") && p.t[q - 2].kind == P_NAME) q -= 2;
        int var = q >= 2 && is(&p, q - 1, "=") && p.t[q - 2].kind == P_NAME ? q - 2 : -1;
        int src_at = keyword(&p, open, "source", NULL), body_line = 0;
        char *body = string_value(&p, src_at, i, &body_line, &fstring);
        int body_flat = flat_lines;
        int name_at = keyword(&p, open, "name", NULL), nl, nf;
        char *kname = string_value(&p, name_at, i, &nl, &nf);
        if (!body) {
            alloy_lint_add(r, "unresolved-source", ALLOY_LINT_INFO, line,
                           "pass source= as a string literal, an f-string, or a name assigned one, to have "
                           "it checked",
                           "metal_kernel%s%s%s: its source is not a string alloy lint can see; not checked",
                           kname ? " '" : "", kname ? kname : "", kname ? "'" : "");
            free(body);
            free(kname);
            continue;
        }
        char *outs[64];
        int n_out = names(&p, keyword(&p, open, "output_names", NULL), outs, 64);
        int hl = 0, hf = 0;
        char *header = string_value(&p, keyword(&p, open, "header", NULL), i, &hl, &hf);
        int atomic_at = keyword(&p, open, "atomic_outputs", NULL);
        alloy_lint_launch launches[32];
        int n_l = 0;
        if (var >= 0)
            for (int j = i; j + 1 < p.nt && n_l < 32; j++) {
                if (p.t[j].kind != P_NAME || !same(&p, j, var) || !is(&p, j + 1, "(")) continue;
                if (j >= 1 && is(&p, j - 1, ".")) continue;
                alloy_lint_launch *L = &launches[n_l++];
                int star;
                L->line = p.t[j].line;
                dims(&p, keyword(&p, j + 1, "grid", NULL), L->grid, &L->grid_divides, &L->grid_rounds_up);
                dims(&p, keyword(&p, j + 1, "threadgroup", NULL), L->threadgroup, NULL, NULL);
                int init = keyword(&p, j + 1, "init_value", &star);
                L->has_init_value = init >= 0 ? !is(&p, init, "None") : star ? -1 : 0;
            }
        alloy_lint_kernel k = {
            .name = kname,
            .body = body,
            .body_line = body_line,
            .flat_lines = body_flat,
            .header = header,
            .header_line = hl,
            .outputs = (const char *const *)outs,
            .n_outputs = n_out > 0 ? n_out : 0,
            .atomic_outputs = atomic_at >= 0 && is(&p, atomic_at, "True"),
            .in_kernel_file = 0,
            .launches = launches,
            .n_launches = n_l,
        };
        alloy_lint_kernel_check(&k, r);
        free(body);
        free(kname);
        free(header);
    }
done:
    for (int i = 0; i < p.nt; i++) free(p.t[i].value);
    free(p.t);
    if (st == ALLOY_OK && r->failed) st = alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory linting");
    return st;
}
