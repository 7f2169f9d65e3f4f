/* regions.c — barrier regions as loops: the CPU form of a body whose
 * barriers all sit in control flow that is uniform across the threadgroup.
 *
 * Such a body runs as one function per threadgroup instead of one fiber per
 * thread. The statements between two barriers (a "region") run as a loop over
 * the group's threads; the control flow that holds barriers (blocks, `for`,
 * `while`, `do`, `if` whose conditions only read values that are the same for
 * every thread of the group) runs once, around those loops. A variable that a
 * later region reads is either recomputed there (its initialiser only reads
 * the thread's position and values fixed for the launch, and it is never
 * written) or kept per thread in an array indexed by the thread (group-local
 * storage of the worker). A thread that returns is marked dead and skipped by
 * later regions, so barriers count only live threads, as on the fiber path.
 *
 * The decision is made on tokens of the rewritten (C++) body and is
 * conservative: anything this file does not understand — a barrier inside
 * control flow whose condition may depend on the thread, SIMD-group
 * operations, `goto`, labels, a `break`/`continue`/`return` it cannot place,
 * a declaration it cannot parse, preprocessor lines other than `#pragma` —
 * makes the body keep the fiber path. Nothing is emitted then. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dialect/regions.h"
#include "dialect/rewrite.h"

/* Bodies beyond these keep the fiber path (or, without barriers, the plain
 * per-thread loop): the analysis is quadratic in places. */
enum { MAX_DEPTH = 256, MAX_TOKENS = 40000, MAX_VARS = 512 };

/* ---- tokens --------------------------------------------------------------- */

typedef struct rg {
    const char *src;
    alloy_token *t; /* comments removed */
    int n;
    const alloy_regions_ctx *ctx;
    /* statements */
    struct stmt *s;
    int ns, cap_s;
    /* variables declared at split level (the statement lists around barriers) */
    struct var *v;
    int nv, cap_v;
    int *regof;     /* per token: region id, -1 outside regions */
    int n_regions;
    int has_return;
    int live;       /* threads that return are marked dead for later regions */
    int any_sync;   /* the body has barriers or SIMD-group functions */
    int depth;      /* statement nesting while parsing */
    int bad;        /* the body does not qualify */
    int oom;
    /* header identifiers (functions that may write their arguments) */
    alloy_token *ht;
    int nht;
    const char *hsrc;
    /* output */
    alloy_strbuf *out;
    int out_line;   /* line of the generated file the next appended line gets */
    int label;      /* unique labels and storage names */
} rg;

enum { S_SIMPLE, S_BLOCK, S_FOR, S_WHILE, S_DO, S_IF, S_OPAQUE, S_EMPTY, S_PRAGMA };
/* classes of split-level simple statements */
enum { C_THREAD, C_HOIST, C_DECL, C_BARRIER, C_UASSIGN, C_LANES };

typedef struct stmt {
    int kind;
    int t0, t1;     /* tokens [t0, t1) */
    int h0, h1;     /* inside the parentheses of for/while/do/if/switch */
    int semi1, semi2; /* for: the two ';' of the header */
    int body, els;  /* children, -1 if none */
    int first, next; /* block: first child; sibling chain */
    int barrier;    /* holds a barrier */
    int split;      /* a statement of a split-level list */
    int cls;        /* split-level simple statements: C_* */
    int decl_v0, decl_nv; /* variables declared by it */
    int op0, op1;   /* C_LANES: the SIMD-group call's tokens */
    int buf;        /* C_LANES: which of the two exchange buffers */
} stmt;

enum { V_UNIFORM, V_REMAT, V_LIFT, V_LOCAL, V_GROUP };

typedef struct var {
    int name;       /* token of the declarator's name */
    int stmt;       /* declaring statement */
    int type0, type1;  /* base type tokens */
    int ptr0, ptr1;    /* declarator tokens between the type and the name */
    int dims0, dims1;  /* `[..]` after the name */
    int init0, init1;  /* initialiser tokens (after `=`, or inside `(..)`/`{..}`) */
    int initk;         /* 0, '=', '(' or '{' */
    int for_header;    /* declared in a group-level for header */
    int hoist;         /* constexpr/static/threadgroup: a group-level object */
    int constant;      /* constexpr or static const: a value fixed for the launch */
    int cls;
    int written;       /* written somewhere besides its declaration */
    int addr;          /* its address is taken */
    int region;        /* region of its declaration */
    int id;
} var;

static int tis(const rg *r, int i, const char *w) {
    if (i < 0 || i >= r->n) return 0;
    size_t l = strlen(w);
    return (size_t)r->t[i].len == l && memcmp(r->src + r->t[i].start, w, l) == 0;
}
static int tkind(const rg *r, int i) { return i >= 0 && i < r->n ? (int)r->t[i].kind : -1; }
static int is_ident(const rg *r, int i) { return tkind(r, i) == ALLOY_TOK_IDENT; }
static int same_tok(const rg *r, int a, int b) {
    return r->t[a].len == r->t[b].len &&
           memcmp(r->src + r->t[a].start, r->src + r->t[b].start, (size_t)r->t[a].len) == 0;
}
static int tok_eq(const rg *r, int i, const char *p, int len) {
    return i >= 0 && i < r->n && r->t[i].len == len && memcmp(r->src + r->t[i].start, p, (size_t)len) == 0;
}

/* The token after the bracket that closes the one at i, or -1. */
static int skip_group(const rg *r, int i) {
    int depth = 0;
    for (int k = i; k < r->n; k++) {
        if (tkind(r, k) != ALLOY_TOK_PUNCT) continue;
        if (tis(r, k, "(") || tis(r, k, "[") || tis(r, k, "{") || tis(r, k, "[[")) depth += tis(r, k, "[[") ? 2 : 1;
        else if (tis(r, k, ")") || tis(r, k, "]") || tis(r, k, "}") || tis(r, k, "]]")) {
            depth -= tis(r, k, "]]") ? 2 : 1;
            if (depth == 0) return k + 1;
            if (depth < 0) return -1;
        }
    }
    return -1;
}

static const char *const assign_ops[] = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", NULL};
static int is_assign(const rg *r, int i) {
    for (int k = 0; assign_ops[k]; k++)
        if (tis(r, i, assign_ops[k])) return 1;
    return 0;
}

/* ---- statements ------------------------------------------------------------ */

static int new_stmt(rg *r, int kind, int t0) {
    if (r->ns == r->cap_s) {
        int cap = r->cap_s ? r->cap_s * 2 : 64;
        stmt *p = realloc(r->s, (size_t)cap * sizeof *p);
        if (!p) {
            r->oom = r->bad = 1;
            return -1;
        }
        r->s = p;
        r->cap_s = cap;
    }
    stmt *s = &r->s[r->ns];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->t0 = t0;
    s->body = s->els = s->first = s->next = -1;
    s->decl_v0 = -1;
    return r->ns++;
}

static int parse_stmt(rg *r, int i, int *end);
static int parse_stmt_at(rg *r, int i, int *end);

/* `( ... )` at i: sets the inside and returns the token after it. */
static int parens(rg *r, int i, int *h0, int *h1) {
    if (!tis(r, i, "(")) {
        r->bad = 1;
        return -1;
    }
    int e = skip_group(r, i);
    if (e < 0) {
        r->bad = 1;
        return -1;
    }
    *h0 = i + 1;
    *h1 = e - 1;
    return e;
}

static int parse_list(rg *r, int i, int stop_at_brace, int *end) {
    int first = -1, last = -1;
    while (i < r->n && !r->bad) {
        if (stop_at_brace && tis(r, i, "}")) break;
        int e;
        int k = parse_stmt(r, i, &e);
        if (k < 0) break;
        if (last >= 0) r->s[last].next = k;
        else first = k;
        last = k;
        i = e;
    }
    *end = i;
    return first;
}

static int parse_stmt(rg *r, int i, int *end) {
    if (i >= r->n || ++r->depth > MAX_DEPTH) {
        r->bad = 1;
        return -1;
    }
    int k = parse_stmt_at(r, i, end);
    r->depth--;
    return k;
}

static int parse_stmt_at(rg *r, int i, int *end) {
    int k;
    if (tkind(r, i) == ALLOY_TOK_PREPROC) {
        /* `#pragma` stays with the statement after it; other directives could
         * depend on the order of the text: keep the fiber path */
        const char *p = r->src + r->t[i].start + 1;
        while (*p == ' ' || *p == '\t') p++;
        if (strncmp(p, "pragma", 6) != 0) r->bad = 1;
        k = new_stmt(r, S_PRAGMA, i);
        if (k < 0) return -1;
        r->s[k].t1 = *end = i + 1;
        return k;
    }
    if (tis(r, i, "{")) {
        k = new_stmt(r, S_BLOCK, i);
        if (k < 0) return -1;
        int e;
        int first = parse_list(r, i + 1, 1, &e);
        if (r->bad) return -1;
        if (!tis(r, e, "}")) {
            r->bad = 1;
            return -1;
        }
        r->s[k].first = first;
        r->s[k].t1 = *end = e + 1;
        return k;
    }
    if (tis(r, i, ";")) {
        k = new_stmt(r, S_EMPTY, i);
        if (k < 0) return -1;
        r->s[k].t1 = *end = i + 1;
        return k;
    }
    if (tis(r, i, "for") || tis(r, i, "while") || tis(r, i, "if") || tis(r, i, "switch")) {
        int kind = tis(r, i, "for") ? S_FOR : tis(r, i, "while") ? S_WHILE : tis(r, i, "if") ? S_IF : S_OPAQUE;
        k = new_stmt(r, kind, i);
        if (k < 0) return -1;
        int j = i + 1;
        if (kind == S_IF && tis(r, j, "constexpr")) j++;
        int h0, h1;
        j = parens(r, j, &h0, &h1);
        if (j < 0) return -1;
        r->s[k].h0 = h0;
        r->s[k].h1 = h1;
        if (kind == S_FOR) { /* classic three-part header only */
            int semis = 0, depth = 0;
            for (int q = h0; q < h1; q++) {
                if (tis(r, q, "(") || tis(r, q, "[") || tis(r, q, "{")) depth++;
                else if (tis(r, q, ")") || tis(r, q, "]") || tis(r, q, "}")) depth--;
                else if (depth == 0 && tis(r, q, ";")) {
                    if (semis == 0) r->s[k].semi1 = q;
                    else r->s[k].semi2 = q;
                    semis++;
                }
            }
            if (semis != 2) r->s[k].kind = S_OPAQUE; /* range-for */
        }
        int e;
        int b = parse_stmt(r, j, &e);
        if (b < 0) return -1;
        r->s[k].body = b;
        if (kind == S_IF && tis(r, e, "else")) {
            int b2 = parse_stmt(r, e + 1, &e);
            if (b2 < 0) return -1;
            r->s[k].els = b2;
        }
        r->s[k].t1 = *end = e;
        return k;
    }
    if (tis(r, i, "do")) {
        k = new_stmt(r, S_DO, i);
        if (k < 0) return -1;
        int e;
        int b = parse_stmt(r, i + 1, &e);
        if (b < 0) return -1;
        r->s[k].body = b;
        if (!tis(r, e, "while")) {
            r->bad = 1;
            return -1;
        }
        int h0, h1;
        e = parens(r, e + 1, &h0, &h1);
        if (e < 0 || !tis(r, e, ";")) {
            r->bad = 1;
            return -1;
        }
        r->s[k].h0 = h0;
        r->s[k].h1 = h1;
        r->s[k].t1 = *end = e + 1;
        return k;
    }
    if (tis(r, i, "goto") || tis(r, i, "try") || tis(r, i, "case") || tis(r, i, "default") ||
        tis(r, i, "else") || tis(r, i, "}") || (is_ident(r, i) && tis(r, i + 1, ":"))) {
        r->bad = 1; /* labels, stray else, ...: keep the fiber path */
        return -1;
    }
    /* a simple statement: up to the `;` outside brackets */
    k = new_stmt(r, S_SIMPLE, i);
    if (k < 0) return -1;
    int q = i;
    while (q < r->n && !tis(r, q, ";")) {
        if (tkind(r, q) == ALLOY_TOK_PREPROC) {
            r->bad = 1;
            return -1;
        }
        if (tis(r, q, "(") || tis(r, q, "[") || tis(r, q, "{") || tis(r, q, "[[")) {
            q = skip_group(r, q);
            if (q < 0) {
                r->bad = 1;
                return -1;
            }
            continue;
        }
        if (tis(r, q, ")") || tis(r, q, "]") || tis(r, q, "}")) {
            r->bad = 1;
            return -1;
        }
        q++;
    }
    if (q >= r->n) {
        r->bad = 1;
        return -1;
    }
    r->s[k].t1 = *end = q + 1;
    return k;
}

/* ---- synchronisation -------------------------------------------------------- */

static int is_barrier_name(const rg *r, int i) {
    return tis(r, i, "threadgroup_barrier") || tis(r, i, "simdgroup_barrier");
}

/* A call of a SIMD-group or quad-group function at token i (`simd_sum(`,
 * `quad_shuffle(`, ...; not simdgroup matrices). */
static int lane_op(const rg *r, int i) {
    const char *p = r->src + r->t[i].start;
    int len = r->t[i].len;
    if (!tis(r, i + 1, "(") || tis(r, i, "simd_vote")) return 0;
    if (len > 10 && !memcmp(p, "simdgroup_", 10)) return 0;
    return (len > 5 && !memcmp(p, "simd_", 5)) || (len > 5 && !memcmp(p, "quad_", 5));
}

/* Marks statements that hold barriers or SIMD-group functions; simdgroup
 * matrices disqualify the body. */
static int mark_barriers(rg *r, int k) {
    if (k < 0) return 0;
    stmt *s = &r->s[k];
    int b = 0;
    for (int i = s->t0; i < s->t1; i++) {
        if (!is_ident(r, i)) continue;
        int nl = i + 1 < r->n ? r->t[i + 1].len : 0;
        const char *np = i + 1 < r->n ? r->src + r->t[i + 1].start : NULL;
        if (tis(r, i - 1, ".") || tis(r, i - 1, "->")) continue;
        int kind = alloy_sync_kind(r->src + r->t[i].start, r->t[i].len, np, nl);
        if (kind == 1 || (kind == 2 && lane_op(r, i))) b = 1;
        else if (kind == 2 && !tis(r, i, "simd_vote")) r->bad = 1; /* simdgroup matrices */
    }
    s->barrier = b;
    if (!b) return 0;
    for (int c = s->first; c >= 0; c = r->s[c].next) mark_barriers(r, c);
    mark_barriers(r, s->body);
    mark_barriers(r, s->els);
    return 1;
}

/* ---- declarations ----------------------------------------------------------- */

static const char *const stmt_words[] = {"return", "break", "continue", "goto", "case", "default", "else",
                                         "do", "sizeof", "new", "delete", "throw", "co_return",
                                         "co_yield", "co_await", "operator", "this", NULL};
static int is_stmt_word(const rg *r, int i) {
    for (int k = 0; stmt_words[k]; k++)
        if (tis(r, i, stmt_words[k])) return 1;
    return 0;
}

static int new_var(rg *r) {
    if (r->nv == r->cap_v) {
        int cap = r->cap_v ? r->cap_v * 2 : 32;
        var *p = realloc(r->v, (size_t)cap * sizeof *p);
        if (!p) {
            r->oom = r->bad = 1;
            return -1;
        }
        r->v = p;
        r->cap_v = cap;
    }
    memset(&r->v[r->nv], 0, sizeof r->v[r->nv]);
    r->v[r->nv].init0 = r->v[r->nv].init1 = -1;
    r->v[r->nv].region = -1;
    return r->nv++;
}

/* The end of an expression starting at i: the first `,` or `;` outside
 * brackets, or e. *saw_lt: it holds a `<` (then a `,` may be inside
 * template arguments, `f<a, b>(x)`, and cannot be trusted). */
static int expr_end(const rg *r, int i, int e, int *saw_lt) {
    *saw_lt = 0;
    while (i < e && !tis(r, i, ",") && !tis(r, i, ";")) {
        if (tis(r, i, "(") || tis(r, i, "[") || tis(r, i, "{") || tis(r, i, "[[")) {
            i = skip_group(r, i);
            if (i < 0) return -1;
            continue;
        }
        if (tis(r, i, "<")) *saw_lt = 1;
        i++;
    }
    return i;
}

/* Parses tokens [t0, e) as a declaration. Returns 1 (variables appended,
 * statement k), 0 (clearly not a declaration), -1 (unsure). */
static int parse_decl(rg *r, int k, int t0, int e, int for_header) {
    int i = t0;
    int hoist = 0, constant = 0, is_static = 0, is_const = 0;
    while (i < e && (tis(r, i, "constexpr") || tis(r, i, "static") || tis(r, i, "ALLOY_THREADGROUP") ||
                     tis(r, i, "ALLOY_CONSTANT") || tis(r, i, "thread_local") || tis(r, i, "inline") ||
                     tis(r, i, "const"))) {
        constant |= tis(r, i, "constexpr") || tis(r, i, "ALLOY_CONSTANT");
        is_static |= tis(r, i, "static");
        is_const |= tis(r, i, "const");
        hoist |= !tis(r, i, "const");
        i++;
    }
    constant |= is_static && is_const;
    if (!hoist && is_const) i = t0; /* `const T x`: an ordinary declaration */
    if (i >= e || is_stmt_word(r, i)) return 0;
    int type0 = i;
    if (!is_ident(r, i) && !tis(r, i, "::")) return 0;
    /* type tokens: identifiers, `::`, `<...>`, then `*`/`&` */
    int name = -1;
    int prev_ok = 0;
    while (i < e) {
        if (tis(r, i, "<") && prev_ok) {
            int depth = 0;
            for (; i < e; i++) {
                if (tis(r, i, "<")) depth++;
                else if (tis(r, i, ">")) depth--;
                else if (tis(r, i, ">>")) depth -= 2;
                else if (tis(r, i, ";") || tis(r, i, "{") || tis(r, i, "}")) return 0;
                if (depth <= 0) break;
            }
            if (depth != 0) return 0;
            i++;
            continue;
        }
        if (is_ident(r, i)) {
            if (i > type0 && prev_ok && !tis(r, i - 1, "::") &&
                (tis(r, i + 1, "=") || tis(r, i + 1, ";") || tis(r, i + 1, ",") || tis(r, i + 1, "[") ||
                 tis(r, i + 1, "(") || tis(r, i + 1, "{") || i + 1 == e) &&
                !(tis(r, i, "const") || tis(r, i, "volatile"))) {
                name = i;
                break;
            }
            prev_ok = 1;
            i++;
            continue;
        }
        if (tis(r, i, "::")) {
            i++;
            continue;
        }
        if (tis(r, i, "*") || tis(r, i, "&") || tis(r, i, "&&")) {
            if (!prev_ok) return 0;
            i++;
            continue;
        }
        break;
    }
    if (name < 0) {
        /* `a b` with no declarator we understand: unsure */
        for (int q = t0; q + 1 < e; q++)
            if (is_ident(r, q) && is_ident(r, q + 1) && !is_stmt_word(r, q)) return -1;
        return 0;
    }
    /* declarator tokens before the name (`*`, `&`, `const` after them) */
    int p = name;
    while (p - 1 > type0 && (tis(r, p - 1, "*") || tis(r, p - 1, "&") || tis(r, p - 1, "&&") ||
                             ((tis(r, p - 1, "const") || tis(r, p - 1, "__restrict")) &&
                              (tis(r, p - 2, "*") || tis(r, p - 2, "&")))))
        p--;
    int type1 = p;
    int first_v = r->nv;
    for (;;) {
        int v = new_var(r);
        if (v < 0) return -1;
        var *x = &r->v[v];
        x->name = name;
        x->stmt = k;
        x->type0 = type0;
        x->type1 = type1;
        x->ptr0 = p;
        x->ptr1 = name;
        x->hoist = hoist;
        x->constant = constant;
        x->for_header = for_header;
        int q = name + 1;
        x->dims0 = q;
        while (tis(r, q, "[")) {
            q = skip_group(r, q);
            if (q < 0 || q > e) return -1;
        }
        x->dims1 = q;
        if (tis(r, q, "=")) {
            x->initk = '=';
            x->init0 = q + 1;
            int lt;
            int ee = expr_end(r, q + 1, e, &lt);
            if (ee < 0 || (lt && ee < e && tis(r, ee, ","))) return -1;
            x->init1 = ee;
            q = ee;
        } else if (tis(r, q, "(") || tis(r, q, "{")) {
            x->initk = tis(r, q, "(") ? '(' : '{';
            int ee = skip_group(r, q);
            if (ee < 0 || ee > e) return -1;
            x->init0 = q + 1;
            x->init1 = ee - 1;
            q = ee;
        }
        if (q == e || tis(r, q, ";")) break;
        if (!tis(r, q, ",")) return -1;
        /* next declarator: its own `*`/`&`, then the name */
        q++;
        p = q;
        while (q < e && (tis(r, q, "*") || tis(r, q, "&") || tis(r, q, "const"))) q++;
        if (!is_ident(r, q)) return -1;
        name = q;
    }
    if (k >= 0) {
        r->s[k].decl_v0 = first_v;
        r->s[k].decl_nv = r->nv - first_v;
    }
    return 1;
}

/* ---- split-level statements --------------------------------------------------- */

static int hoisted_stmt(const rg *r, int i) {
    return tis(r, i, "static_assert") || tis(r, i, "using") || tis(r, i, "typedef") ||
           tis(r, i, "struct") || tis(r, i, "enum") || tis(r, i, "union") || tis(r, i, "class") ||
           tis(r, i, "template");
}

static int is_barrier_stmt(const rg *r, const stmt *s) {
    int i = s->t0;
    if (tis(r, i, "metal") && tis(r, i + 1, "::")) i += 2;
    if (!is_barrier_name(r, i) || !tis(r, i + 1, "(")) return 0;
    int e = skip_group(r, i + 1);
    return e == s->t1 - 1 && tis(r, e, ";");
}

/* Names a lane operation's arguments may call: they are evaluated twice
 * (once to deposit the value, once for the result), so they must have no
 * side effects. */
static const char *const pure_calls[] = {"fma", "min", "max", "abs", "fabs", "sqrt", "rsqrt", "exp",
                                         "exp2", "log", "log2", "select", "clamp", "float", "half",
                                         "int", "uint", "bool", "as_type", "static_cast", NULL};

static int word_in(const rg *r, int i, const char *const *list);
extern const char *const alloy_regions_type_words[];
#define type_words alloy_regions_type_words

/* A split-level statement with exactly one SIMD-group call whose
 * arguments have no side effects and which the statement evaluates
 * unconditionally: `float t = simd_sum(p);`, `x = simd_shuffle(v, l);`. */
static int lane_stmt(rg *r, int k) {
    stmt *s = &r->s[k];
    int op = -1;
    for (int i = s->t0; i < s->t1; i++) {
        if (is_ident(r, i) && lane_op(r, i) && !tis(r, i - 1, ".") && !tis(r, i - 1, "->")) {
            if (op >= 0) return 0;
            op = i;
        }
    }
    if (op < 0) return 0;
    int e = skip_group(r, op + 1);
    if (e < 0 || e > s->t1) return 0;
    /* evaluated unconditionally: nothing before it may skip it */
    for (int i = s->t0; i < s->t1; i++) {
        if (tis(r, i, "return")) return 0;
        if (i < op && (tis(r, i, "?") || tis(r, i, "&&") || tis(r, i, "||"))) return 0;
    }
    for (int i = op + 2; i < e - 1; i++) {
        if (is_assign(r, i) || tis(r, i, "++") || tis(r, i, "--") || tkind(r, i) == ALLOY_TOK_STRING) return 0;
        if (is_ident(r, i) && tis(r, i + 1, "(") && !tis(r, i - 1, ".") && !word_in(r, i, pure_calls) &&
            !word_in(r, i, type_words))
            return 0;
    }
    s->op0 = op >= 2 && tis(r, op - 1, "::") && tis(r, op - 2, "metal") ? op - 2 : op;
    s->op1 = e;
    return 1;
}

/* Classifies the statements of a split-level list (and recurses into the
 * bodies of barrier-holding control flow). */
static void collect_list(rg *r, int first);

static void collect_stmt(rg *r, int k) {
    stmt *s = &r->s[k];
    s->split = 1;
    switch (s->kind) {
    case S_SIMPLE:
        if (hoisted_stmt(r, s->t0)) {
            s->cls = C_HOIST;
            if (s->barrier) r->bad = 1;
            break;
        }
        if (s->barrier) {
            if (is_barrier_stmt(r, s)) s->cls = C_BARRIER;
            else if (lane_stmt(r, k)) {
                s = &r->s[k];
                s->cls = C_LANES;
                int d = parse_decl(r, k, s->t0, s->t1 - 1, 0); /* `T x = simd_sum(v);` */
                if (d < 0 || (d > 0 && r->v[r->s[k].decl_v0].hoist)) r->bad = 1;
            } else {
                r->bad = 1;
            }
            break;
        }
        {
            int d = parse_decl(r, k, s->t0, s->t1 - 1, 0);
            if (d < 0) r->bad = 1;
            else if (d > 0) {
                s = &r->s[k];
                s->cls = r->v[s->decl_v0].hoist ? C_HOIST : C_DECL;
            } else {
                s->cls = C_THREAD;
            }
        }
        break;
    case S_BLOCK:
        if (s->barrier) collect_list(r, s->first);
        break;
    case S_FOR:
        if (s->barrier) {
            /* the header's declaration belongs to the group */
            if (s->h0 < s->semi1 && parse_decl(r, k, s->h0, s->semi1, 1) < 0) r->bad = 1;
            collect_stmt(r, r->s[k].body);
        }
        break;
    case S_WHILE:
    case S_DO:
    case S_IF:
        if (r->s[k].barrier) {
            collect_stmt(r, r->s[k].body);
            if (r->s[k].els >= 0) collect_stmt(r, r->s[k].els);
        }
        break;
    case S_OPAQUE:
        if (s->barrier) r->bad = 1;
        break;
    default:
        break;
    }
}

static void collect_list(rg *r, int first) {
    for (int k = first; k >= 0 && !r->bad; k = r->s[k].next) collect_stmt(r, k);
}

/* ---- uniformity ---------------------------------------------------------------- */

const char *const alloy_regions_type_words[] = {
    "bool", "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "half", "float",
    "double", "bfloat", "size_t", "ptrdiff_t", "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t",
    "uint32_t", "int64_t", "uint64_t", "unsigned", "signed", "uint2", "uint3", "uint4", "int2",
    "int3", "int4", "float2", "float3", "float4", "ushort2", "ushort3", "ushort4", "short2",
    "short3", "short4", "half2", "half3", "half4", "const", "sizeof", "true", "false",
    "static_cast", "metal", "min", "max", "clamp", "abs", "as_type", NULL};

static int word_in(const rg *r, int i, const char *const *list) {
    for (int k = 0; list[k]; k++)
        if (tis(r, i, list[k])) return 1;
    return 0;
}

static int in_name_list(const rg *r, int i, const char *const *names, int n) {
    for (int k = 0; k < n; k++)
        if (tok_eq(r, i, names[k], (int)strlen(names[k]))) return 1;
    return 0;
}

/* The variable a use of token i refers to (by name), or -1. */
static int var_named(const rg *r, int i) {
    for (int v = 0; v < r->nv; v++)
        if (same_tok(r, r->v[v].name, i)) return v;
    return -1;
}

enum { E_UNIFORM = 1, E_PURE = 2 };

/* Whether tokens [a, b) are an expression that reads only values the same
 * for every thread of the group (E_UNIFORM), or also the thread's own
 * position and recomputable variables (E_PURE); `fixed`: uniform variables
 * must never be written after their declaration. No side effects, no memory
 * but shapes and strides. */
static int expr_ok(const rg *r, int a, int b, int mode, int fixed) {
    for (int i = a; i < b; i++) {
        int kd = tkind(r, i);
        if (kd == ALLOY_TOK_NUMBER || kd == ALLOY_TOK_CHAR) continue;
        if (kd == ALLOY_TOK_STRING || kd == ALLOY_TOK_PREPROC) return 0;
        if (kd == ALLOY_TOK_PUNCT) {
            if (is_assign(r, i) || tis(r, i, "++") || tis(r, i, "--") || tis(r, i, "->") ||
                tis(r, i, "{") || tis(r, i, "}") || tis(r, i, ";"))
                return 0;
            continue;
        }
        /* identifiers */
        if (tis(r, i - 1, ".")) {
            if (tis(r, i, "template")) i++; /* `.template alloy_swz<..>()` */
            if (tis(r, i, "alloy_swz_ref")) return 0;
            continue;
        }
        if (word_in(r, i, type_words)) continue;
        if (in_name_list(r, i, r->ctx->uniform_names, r->ctx->n_uniform)) continue;
        if (mode == E_PURE && in_name_list(r, i, r->ctx->thread_names, r->ctx->n_thread)) continue;
        int v = var_named(r, i);
        if (v >= 0) {
            const var *x = &r->v[v];
            if (x->cls == V_UNIFORM && (!fixed || !x->written)) continue;
            if (mode == E_PURE && x->cls == V_REMAT) continue;
        }
        return 0;
    }
    return 1;
}

/* The end of the postfix chain after token i (`.m`, `[..]`, `(..)`,
 * `.template f<..>`), and whether it calls a member or a reference swizzle. */
static int postfix_end(const rg *r, int i, int *calls) {
    int q = i + 1;
    *calls = 0;
    for (;;) {
        if (tis(r, q, ".")) {
            q++;
            if (tis(r, q, "template")) q++;
            if (tis(r, q, "alloy_swz_ref")) *calls = 1;
            if (!is_ident(r, q)) return q;
            q++;
            if (tis(r, q, "<")) {
                while (q < r->n && !tis(r, q, ">")) q++;
                q++;
            }
            if (tis(r, q, "(") && !tis(r, q - 1, ">")) *calls = 1;
            continue;
        }
        if (tis(r, q, "[") || tis(r, q, "(")) {
            int e = skip_group(r, q);
            if (e < 0) return r->n;
            q = e;
            continue;
        }
        return q;
    }
}

static int header_function(const rg *r, int i) {
    for (int k = 0; k < r->nht; k++)
        if (r->ht[k].kind == ALLOY_TOK_IDENT && r->ht[k].len == r->t[i].len &&
            memcmp(r->hsrc + r->ht[k].start, r->src + r->t[i].start, (size_t)r->t[i].len) == 0)
            return 1;
    return tis(r, i, "sincos") || tis(r, i, "modf") || tis(r, i, "frexp") || tis(r, i, "remquo") ||
           tis(r, i, "swap");
}

/* Whether the use of a variable at token i may write it. */
static int write_site(const rg *r, int i) {
    if (tis(r, i - 1, "++") || tis(r, i - 1, "--")) return 1;
    if (tis(r, i - 1, "&") && !(is_ident(r, i - 2) || tkind(r, i - 2) == ALLOY_TOK_NUMBER ||
                                tis(r, i - 2, ")") || tis(r, i - 2, "]")))
        return 1; /* its address is taken */
    int calls;
    int e = postfix_end(r, i, &calls);
    if (calls || is_assign(r, e) || tis(r, e, "++") || tis(r, e, "--")) return 1;
    /* a plain argument of a function that may take it by reference */
    if ((tis(r, i - 1, "(") || tis(r, i - 1, ",")) && (tis(r, i + 1, ")") || tis(r, i + 1, ","))) {
        int depth = 0;
        for (int q = i - 1; q >= 0; q--) {
            if (tis(r, q, ")") || tis(r, q, "]")) depth++;
            else if (tis(r, q, "(") || tis(r, q, "[")) {
                if (depth == 0) return tis(r, q, "(") && is_ident(r, q - 1) && header_function(r, q - 1);
                depth--;
            } else if (tis(r, q, ";") || tis(r, q, "{") || tis(r, q, "}")) {
                return 0;
            }
        }
    }
    return 0;
}

/* A split-level statement (or for-header part) [a, b) made only of
 * assignments of uniform variables with uniform values, separated by
 * commas. */
static int uniform_assignments(const rg *r, int a, int b) {
    if (a >= b) return 0;
    int i = a;
    while (i < b) {
        int lt;
        int e = expr_end(r, i, b, &lt);
        if (e < 0 || (lt && e < b)) return 0;
        int v;
        if ((tis(r, i, "++") || tis(r, i, "--")) && e == i + 2) v = var_named(r, i + 1);
        else if (is_ident(r, i) && (tis(r, i + 1, "++") || tis(r, i + 1, "--")) && e == i + 2) v = var_named(r, i);
        else if (is_ident(r, i) && is_assign(r, i + 1) && expr_ok(r, i + 2, e, E_UNIFORM, 0)) v = var_named(r, i);
        else return 0;
        if (v < 0 || r->v[v].cls != V_UNIFORM || r->v[v].hoist) return 0;
        i = e < b ? e + 1 : e;
    }
    return 1;
}

/* The uniform variables: a fixed point that starts from every variable of
 * the split levels with an initialiser and drops those whose initialiser or
 * writes are not uniform. */
static void find_uniform(rg *r) {
    for (int v = 0; v < r->nv; v++) {
        var *x = &r->v[v];
        int arrays = x->dims1 > x->dims0;
        int refs = 0;
        for (int q = x->ptr0; q < x->ptr1; q++) refs |= tis(r, q, "&") || tis(r, q, "&&");
        if (x->hoist) x->cls = x->constant && !arrays && !refs ? V_UNIFORM : V_GROUP;
        else x->cls = (!arrays && !refs && x->initk) ? V_UNIFORM : V_LOCAL;
    }
    /* writes, once: any non-declaring use that may write */
    for (int i = 0; i < r->n; i++) {
        if (!is_ident(r, i) || tis(r, i - 1, ".") || tis(r, i - 1, "->") || tis(r, i - 1, "::")) continue;
        int v = var_named(r, i);
        if (v < 0 || r->v[v].name == i) continue;
        if (write_site(r, i)) r->v[v].written = 1;
        if (tis(r, i - 1, "&") && !(is_ident(r, i - 2) || tkind(r, i - 2) == ALLOY_TOK_NUMBER ||
                                    tis(r, i - 2, ")") || tis(r, i - 2, "]")))
            r->v[v].addr = 1;
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (int v = 0; v < r->nv; v++) {
            var *x = &r->v[v];
            if (x->cls != V_UNIFORM || x->hoist) continue;
            int ok = x->init0 < 0 || expr_ok(r, x->init0, x->init1, E_UNIFORM, 0);
            /* every write must be in group-level code: a uniform assignment
             * statement of a split level or a group-level for header */
            for (int i = 0; ok && i < r->n; i++) {
                if (!same_tok(r, i, x->name) || i == x->name || tis(r, i - 1, ".") || tis(r, i - 1, "->") ||
                    tis(r, i - 1, "::") || !write_site(r, i))
                    continue;
                int placed = 0;
                for (int k = 0; k < r->ns && !placed; k++) {
                    const stmt *s = &r->s[k];
                    if (!s->split) continue;
                    if (s->kind == S_SIMPLE && i >= s->t0 && i < s->t1)
                        placed = s->cls == C_THREAD && uniform_assignments(r, s->t0, s->t1 - 1);
                    else if (s->kind == S_FOR && s->barrier && i >= s->h0 && i < s->h1)
                        placed = (i > s->semi2 && uniform_assignments(r, s->semi2 + 1, s->h1)) ||
                                 (i < s->semi1 && uniform_assignments(r, s->h0, s->semi1));
                }
                ok = placed;
            }
            if (!ok) {
                x->cls = V_LOCAL;
                changed = 1;
            }
        }
    }
    for (int k = 0; k < r->ns; k++) {
        stmt *s = &r->s[k];
        if (s->split && s->kind == S_SIMPLE && s->cls == C_THREAD && uniform_assignments(r, s->t0, s->t1 - 1))
            s->cls = C_UASSIGN;
        if (s->split && s->kind == S_SIMPLE && s->cls == C_DECL) {
            int all = 1, any = 0;
            for (int v = s->decl_v0; v < s->decl_v0 + s->decl_nv; v++) {
                all &= r->v[v].cls == V_UNIFORM;
                any |= r->v[v].cls == V_UNIFORM;
            }
            if (all) s->cls = C_HOIST;
            else if (any) /* mixed: the uniform ones become per-thread */
                for (int v = s->decl_v0; v < s->decl_v0 + s->decl_nv; v++) r->v[v].cls = V_LOCAL;
        }
    }
}

/* Conditions and headers of the group-level control flow. */
static void check_control(rg *r, int k) {
    if (k < 0 || r->bad) return;
    stmt *s = &r->s[k];
    if (!s->barrier) return;
    switch (s->kind) {
    case S_BLOCK:
        for (int c = s->first; c >= 0; c = r->s[c].next) check_control(r, c);
        return;
    case S_FOR: {
        int init_ok = s->h0 == s->semi1 || uniform_assignments(r, s->h0, s->semi1);
        if (!init_ok) { /* a declaration: every variable uniform */
            init_ok = 1;
            int any = 0;
            for (int v = 0; v < r->nv; v++)
                if (r->v[v].for_header && r->v[v].stmt == k) {
                    any = 1;
                    init_ok &= r->v[v].cls == V_UNIFORM;
                }
            init_ok &= any;
        }
        if (!init_ok || !expr_ok(r, s->semi1 + 1, s->semi2, E_UNIFORM, 0) ||
            !(s->semi2 + 1 == s->h1 || uniform_assignments(r, s->semi2 + 1, s->h1)))
            r->bad = 1;
        check_control(r, s->body);
        return;
    }
    case S_WHILE:
    case S_DO:
    case S_IF:
        if (!expr_ok(r, s->h0, s->h1, E_UNIFORM, 0)) r->bad = 1;
        check_control(r, s->body);
        check_control(r, s->els);
        return;
    default:
        return;
    }
}

/* ---- regions ------------------------------------------------------------------- */

/* Whether split-level statement k runs once for the group (a `#pragma`
 * goes with the statement after it). */
static int group_level(const rg *r, int k) {
    const stmt *s = &r->s[k];
    if (!r->any_sync) return 0; /* without barriers the whole body is one region */
    if (s->kind == S_SIMPLE) return s->cls == C_HOIST || s->cls == C_BARRIER || s->cls == C_UASSIGN;
    if (s->kind == S_PRAGMA) return s->next >= 0 && group_level(r, s->next);
    if (s->kind == S_EMPTY) return 0;
    return s->barrier;
}

static void mark_region(rg *r, int k, int id) {
    for (int i = r->s[k].t0; i < r->s[k].t1; i++) r->regof[i] = id;
}

static void plan_stmt(rg *r, int k);

/* A SIMD-group statement ends the open region (whose threads deposit the
 * operation's value as their last step) and starts the next one (whose
 * threads compute the result from every lane's value). */
static void plan_list(rg *r, int first) {
    int open = -1, lanes = 0;
    for (int k = first; k >= 0; k = r->s[k].next) {
        if (group_level(r, k)) {
            open = -1;
            plan_stmt(r, k);
            continue;
        }
        if (r->s[k].kind == S_SIMPLE && r->s[k].cls == C_LANES) {
            if (open < 0) open = r->n_regions++;
            r->s[k].buf = lanes++ & 1;
            open = -1;
        }
        if (open < 0) open = r->n_regions++;
        mark_region(r, k, open);
    }
}

static void plan_stmt(rg *r, int k) {
    const stmt *s = &r->s[k];
    if (s->kind == S_BLOCK) plan_list(r, s->first);
    else if (s->kind == S_FOR || s->kind == S_WHILE || s->kind == S_DO || s->kind == S_IF) {
        int b = s->body, e = s->els;
        if (r->s[b].kind == S_BLOCK) plan_list(r, r->s[b].first);
        else plan_list(r, b);
        if (e >= 0) {
            if (r->s[e].kind == S_BLOCK) plan_list(r, r->s[e].first);
            else plan_list(r, e);
        }
    }
}

/* break/continue that would leave a region, returns in expressions. */
static void check_jumps(rg *r, int k, int loops, int switches) {
    if (k < 0 || r->bad) return;
    const stmt *s = &r->s[k];
    switch (s->kind) {
    case S_SIMPLE:
        if ((tis(r, s->t0, "break") && !loops && !switches) || (tis(r, s->t0, "continue") && !loops)) r->bad = 1;
        for (int i = s->t0 + 1; i < s->t1; i++)
            if (tis(r, i, "return") || tis(r, i, "goto")) r->bad = 1;
        if (tis(r, s->t0, "return")) {
            if (!tis(r, s->t0 + 1, ";")) r->bad = 1;
            r->has_return = 1;
        }
        return;
    case S_BLOCK:
        for (int c = s->first; c >= 0; c = r->s[c].next) check_jumps(r, c, loops, switches);
        return;
    case S_FOR:
    case S_WHILE:
    case S_DO:
        check_jumps(r, s->body, loops + 1, switches);
        return;
    case S_IF:
        check_jumps(r, s->body, loops, switches);
        check_jumps(r, s->els, loops, switches);
        return;
    case S_OPAQUE:
        for (int i = s->t0; i < s->t1; i++)
            if (tis(r, i, "return") || tis(r, i, "goto") || (!loops && tis(r, i, "continue"))) r->bad = 1;
        return;
    default:
        return;
    }
}

/* Per-thread variables of the split levels: recomputed (V_REMAT), kept per
 * thread (V_LIFT) or local to their region (V_LOCAL). */
static void classify_thread_vars(rg *r) {
    for (int v = 0; v < r->nv; v++) {
        var *x = &r->v[v];
        if (x->cls != V_LOCAL) continue;
        x->region = r->regof[x->name];
        if (x->region < 0) { /* a per-thread variable outside the regions */
            r->bad = 1;
            return;
        }
        int crosses = 0;
        for (int i = 0; i < r->n && !crosses; i++)
            if (same_tok(r, i, x->name) && !tis(r, i - 1, ".") && !tis(r, i - 1, "->") && !tis(r, i - 1, "::") &&
                r->regof[i] != x->region)
                crosses = 1;
        if (!crosses) continue;
        if (x->region < 0) { /* used outside regions: not expected */
            r->bad = 1;
            return;
        }
        x->cls = V_LIFT;
    }
    /* recomputable: a pure initialiser, never written, not an array or reference */
    for (int changed = 1; changed;) {
        changed = 0;
        for (int v = 0; v < r->nv; v++) {
            var *x = &r->v[v];
            /* a region-local one too: a later region may recompute a
             * variable whose initialiser reads it */
            if ((x->cls != V_LIFT && x->cls != V_LOCAL) || x->region < 0 || x->written || x->initk != '=' ||
                x->dims1 > x->dims0 || x->ptr1 > x->ptr0)
                continue;
            if (expr_ok(r, x->init0, x->init1, E_PURE, 1)) {
                x->cls = V_REMAT;
                changed = 1;
            }
        }
    }
    for (int v = 0; v < r->nv; v++) {
        var *x = &r->v[v];
        if (x->cls != V_LIFT) continue;
        int autos = 0, refs = 0;
        for (int q = x->type0; q < x->type1; q++) autos |= tis(r, q, "auto") || tis(r, q, "decltype");
        for (int q = x->ptr0; q < x->ptr1; q++) refs |= tis(r, q, "&") || tis(r, q, "&&");
        if (autos || refs || (x->dims1 > x->dims0 && x->initk)) r->bad = 1;
    }
}

/* ---- output ---------------------------------------------------------------------- */

static void put(rg *r, const char *s) {
    for (const char *p = s; *p; p++) r->out_line += *p == '\n';
    alloy_sb_append(r->out, s);
}
static void putn(rg *r, const char *s, int n) {
    for (int i = 0; i < n; i++) r->out_line += s[i] == '\n';
    alloy_sb_append_n(r->out, s, (size_t)n);
}
static void putf(rg *r, const char *fmt, ...) ALLOY_PRINTF(2, 3);
static void putf(rg *r, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    put(r, buf);
}
/* Back to the generated file's own line numbers. */
static void gen_lines(rg *r) { putf(r, "\n#line %d \"%s\"\n", r->out_line + 2, r->ctx->generated_file); }
static void body_line(rg *r, int tok) { putf(r, "\n#line %d \"%s\"\n", r->t[tok].line, r->ctx->body_file); }

/* Source text of tokens [a, b) (with what lies between them). */
static void text(rg *r, int a, int b) {
    if (a >= b) return;
    putn(r, r->src + r->t[a].start, r->t[b - 1].start + r->t[b - 1].len - r->t[a].start);
}
static void text_sp(rg *r, int a, int b) {
    for (int i = a; i < b; i++) {
        putn(r, r->src + r->t[i].start, r->t[i].len);
        put(r, " ");
    }
}

/* Region text of statement k, `return;` marking the thread dead. */
static void region_text(rg *r, int a, int b, int done_label) {
    int c = a;
    for (int i = a; i < b; i++) {
        if (tis(r, i, "return") && tis(r, i + 1, ";")) {
            text(r, c, i);
            if (r->live) putf(r, " { alloy_live[alloy_t] = 0; goto alloy_done_%d; } ", done_label);
            else putf(r, " goto alloy_done_%d; ", done_label);
            c = i + 2;
            i++;
        }
    }
    text(r, c, b);
}

/* A kept variable the regions reach through a reference to its slot (an
 * array, or one whose address is taken); the others are copied into a local
 * at a region's start and back at its end, so the compiler keeps them in
 * registers inside the region's loops. */
static int by_ref(const var *x) { return x->dims1 > x->dims0 || x->addr; }

/* `if (c) return;` or `if (c) { return; }` at a region's level. */
static int early_return(const rg *r, const stmt *s) {
    if (s->kind != S_IF || s->els >= 0 || tis(r, s->t0 + 1, "constexpr")) return 0;
    const stmt *b = &r->s[s->body];
    if (b->kind == S_BLOCK) {
        if (b->first < 0 || r->s[b->first].next >= 0) return 0;
        b = &r->s[b->first];
    }
    return b->kind == S_SIMPLE && tis(r, b->t0, "return") && tis(r, b->t0 + 1, ";");
}

/* A lifted declaration inside its region: the storage slot, then the
 * initialiser as an assignment. */
static void lifted_decl(rg *r, const stmt *s, int done_label) {
    body_line(r, s->t0);
    for (int v = s->decl_v0; v < s->decl_v0 + s->decl_nv; v++) {
        const var *x = &r->v[v];
        if (x->cls == V_LIFT) {
            putf(r, "auto &");
            text(r, x->name, x->name + 1);
            putf(r, " = alloy_p%d[alloy_t]; ", x->id);
            if (x->initk) {
                text(r, x->name, x->name + 1);
                put(r, " = ");
                if (x->initk == '(' || x->initk == '{') {
                    text_sp(r, x->type0, x->type1);
                    text_sp(r, x->ptr0, x->ptr1);
                    put(r, x->initk == '(' ? "(" : "{");
                }
                region_text(r, x->init0, x->init1, done_label);
                if (x->initk == '(' || x->initk == '{') put(r, x->initk == '(' ? ")" : "}");
                put(r, "; ");
            }
        } else {
            text_sp(r, x->type0, x->type1);
            text_sp(r, x->ptr0, x->ptr1);
            int end = x->init1 >= 0 ? x->init1 + (x->initk == '=' ? 0 : 1) : x->dims1;
            region_text(r, x->name, end, done_label);
            put(r, "; ");
        }
    }
}

/* The type of a per-thread slot: the declared type without its top-level
 * `const` (the slot is assigned the initialiser). */
static void storage_type(rg *r, const var *x) {
    int last_star = -1;
    for (int q = x->ptr0; q < x->ptr1; q++)
        if (tis(r, q, "*")) last_star = q;
    for (int q = x->type0; q < x->type1; q++)
        if (last_star >= 0 || !tis(r, q, "const")) text_sp(r, q, q + 1);
    for (int q = x->ptr0; q < x->ptr1; q++)
        if (q < last_star || !tis(r, q, "const")) text_sp(r, q, q + 1);
}

/* Whether tokens [a, b) may write variable v. */
static int writes_in(const rg *r, int v, int a, int b) {
    for (int i = a; i < b; i++)
        if (same_tok(r, i, r->v[v].name) && !tis(r, i - 1, ".") && !tis(r, i - 1, "->") && !tis(r, i - 1, "::") &&
            write_site(r, i))
            return 1;
    return 0;
}

static int uses_in(const rg *r, int v, int a, int b) {
    for (int i = a; i < b; i++)
        if (same_tok(r, i, r->v[v].name) && !tis(r, i - 1, ".") && !tis(r, i - 1, "->") && !tis(r, i - 1, "::")) return 1;
    return 0;
}

static void emit_list(rg *r, int first);

/* One region: the statements from `first` up to `last_excl` (none when
 * first < 0) as a loop over the group's threads, then, when `deposit` names
 * a SIMD-group statement, every thread's deposit of its value. */
static void emit_region(rg *r, int first, int last_excl, int deposit) {
    int id = first >= 0 ? r->regof[r->s[first].t0] : -2;
    int a = first >= 0 ? r->s[first].t0 : 0, b = a;
    for (int k = first; k >= 0 && k != last_excl; k = r->s[k].next) b = r->s[k].t1;
    if (deposit >= 0) putf(r, "  alloy_lanes_reset(%d);\n", r->s[deposit].buf);
    /* storage of the variables this region declares and later ones use */
    for (int v = 0; v < r->nv; v++) {
        var *x = &r->v[v];
        if (x->cls != V_LIFT || x->region != id) continue;
        x->id = r->label++;
        put(r, "  static thread_local ");
        storage_type(r, x);
        putf(r, "alloy_st%d[ALLOY_CPU_MAX_GROUP_THREADS]", x->id);
        text_sp(r, x->dims0, x->dims1);
        putf(r, ";\n  auto *const alloy_p%d = alloy_st%d;\n", x->id, x->id);
    }
    int done = r->label++;
    int lanes = deposit >= 0;
    for (int k = first; k >= 0 && k != last_excl; k = r->s[k].next)
        lanes |= r->s[k].kind == S_SIMPLE && r->s[k].cls == C_LANES;
    put(r, lanes ? "  ALLOY_THREAD_LOOP_SCALAR {\n" : "  ALLOY_THREAD_LOOP {\n");
    put(r, ""
           "    const unsigned alloy_lx = alloy_gx - alloy_bx;\n"
           "    const int alloy_t = (int)alloy_lx + (int)alloy_s0 * (alloy_ly + (int)alloy_s1 * alloy_lz);\n");
    if (r->live) put(r, "    if (!alloy_live[alloy_t]) continue;\n");
    put(r, r->ctx->thread_prologue);
    /* recomputed variables (with what they read), then per-thread slots */
    char *need = calloc((size_t)r->nv + 1, 1);
    if (!need) {
        r->oom = r->bad = 1;
        return;
    }
    /* (only variables declared before the region — or before its deposit, when it has no statements: the
     * name's tokens in it are then theirs or a shadow's; a variable declared after it is another one of the
     * same name, whose slots do not exist yet) */
    const int from = first >= 0 ? a : deposit >= 0 ? r->s[deposit].op0 : 0;
    for (int v = 0; v < r->nv; v++)
        if ((r->v[v].cls == V_REMAT || r->v[v].cls == V_LIFT) && r->v[v].region != id && r->v[v].name < from &&
            (uses_in(r, v, a, b) || (deposit >= 0 && uses_in(r, v, r->s[deposit].op0, r->s[deposit].op1))))
            need[v] = 1;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int v = r->nv - 1; v >= 0; v--) {
            if (!need[v] || r->v[v].cls != V_REMAT) continue;
            for (int w = 0; w < r->nv; w++)
                if (!need[w] && r->v[w].cls == V_REMAT && uses_in(r, w, r->v[v].init0, r->v[v].init1)) need[w] = changed = 1;
        }
    }
    for (int v = 0; v < r->nv; v++) {
        if (!need[v]) continue;
        const var *x = &r->v[v];
        if (x->cls == V_REMAT) {
            body_line(r, x->name);
            put(r, "[[maybe_unused]] ");
            text_sp(r, x->type0, x->type1);
            text(r, x->name, x->init1);
            put(r, ";");
        } else {
            putf(r, "\n    [[maybe_unused]] auto %s", by_ref(x) ? "&" : "");
            text(r, x->name, x->name + 1);
            putf(r, " = alloy_p%d[alloy_t];", x->id);
        }
    }
    put(r, "\n    {");
    int plain = -1; /* first of a run of statements copied as they are, in one piece */
    int guards = 0; /* `if (c) return;` became `if (!(c)) {` around the rest */
    for (int k = first; k >= 0 && k != last_excl; k = r->s[k].next) {
        const stmt *s = &r->s[k];
        int lanes = s->kind == S_SIMPLE && s->cls == C_LANES;
        int lifted = 0, exit = early_return(r, s);
        if (s->kind == S_SIMPLE && (s->cls == C_DECL || lanes) && s->decl_v0 >= 0)
            for (int v = s->decl_v0; v < s->decl_v0 + s->decl_nv; v++)
                lifted |= r->v[v].cls == V_LIFT && by_ref(&r->v[v]);
        lifted |= exit; /* not copied as it is */
        if (!lanes && !lifted) {
            if (plain < 0) plain = k;
            int nx = s->next;
            if (nx >= 0 && nx != last_excl) continue;
        }
        if (plain >= 0) {
            const stmt *p0 = &r->s[plain];
            int end = s->t1; /* k ends the run, or the run ends before k */
            if (lanes || lifted)
                for (int q = plain; q != k; q = r->s[q].next) end = r->s[q].t1;
            body_line(r, p0->t0);
            region_text(r, p0->t0, end, done);
            plain = -1;
            if (!lanes && !lifted) continue;
        }
        if (exit) { /* the rest of the region in a block: loops with an early exit vectorise */
            body_line(r, s->t0);
            put(r, r->live ? "if (" : "if (!(");
            text(r, s->h0, s->h1);
            put(r, r->live ? ") alloy_live[alloy_t] = 0; else {" : ")) {");
            guards++;
            continue;
        }
        if (lanes) putf(r, "\n    alloy_lanes_enter(2, alloy_L, %d);", s->buf); /* the result */
        if (lifted) {
            lifted_decl(r, s, done);
        } else {
            body_line(r, s->t0);
            region_text(r, s->t0, s->t1, done);
        }
        if (lanes) put(r, "\n    alloy_lanes_leave();");
    }
    if (deposit >= 0) {
        const stmt *d = &r->s[deposit];
        putf(r, "\n    alloy_lanes_enter(1, alloy_L, %d);", d->buf);
        body_line(r, d->op0);
        put(r, "(void)(");
        text(r, d->op0, d->op1);
        put(r, ");");
        gen_lines(r);
        put(r, "    alloy_lanes_leave();");
    }
    /* kept variables back to their slots (a thread that returned skips this:
     * no later region runs it) */
    for (int v = 0; v < r->nv; v++) {
        const var *x = &r->v[v];
        if (x->cls != V_LIFT || by_ref(x) || !(need[v] || x->region == id)) continue;
        if (x->region != id && !writes_in(r, v, a, b)) continue; /* unchanged here */
        putf(r, "\n    alloy_p%d[alloy_t] = ", x->id);
        text(r, x->name, x->name + 1);
        put(r, ";");
    }
    free(need);
    gen_lines(r);
    while (guards-- > 0) put(r, "    }\n");
    putf(r, "    }\n    alloy_done_%d:;\n  }\n", done);
}

static void emit_group_stmt(rg *r, int k) {
    const stmt *s = &r->s[k];
    switch (s->kind) {
    case S_PRAGMA:
    case S_SIMPLE:
        if (s->cls == C_BARRIER && s->kind == S_SIMPLE) return; /* the regions around it are the barrier */
        body_line(r, s->t0);
        text(r, s->t0, s->t1);
        gen_lines(r);
        return;
    case S_BLOCK:
        put(r, "  {\n");
        emit_list(r, s->first);
        put(r, "  }\n");
        return;
    case S_FOR:
    case S_WHILE:
    case S_IF: {
        body_line(r, s->t0);
        text(r, s->t0, s->h1 + 1); /* `for (...)` / `while (...)` / `if (...)` */
        gen_lines(r);
        put(r, "  {\n");
        const stmt *b = &r->s[s->body];
        emit_list(r, b->kind == S_BLOCK ? b->first : s->body);
        put(r, "  }\n");
        if (s->els >= 0) {
            put(r, "  else {\n");
            const stmt *e = &r->s[s->els];
            emit_list(r, e->kind == S_BLOCK ? e->first : s->els);
            put(r, "  }\n");
        }
        return;
    }
    case S_DO: {
        put(r, "  do {\n");
        const stmt *b = &r->s[s->body];
        emit_list(r, b->kind == S_BLOCK ? b->first : s->body);
        put(r, "  }");
        body_line(r, s->h0 - 2);
        text(r, s->h0 - 2, s->t1);
        gen_lines(r);
        return;
    }
    default:
        return;
    }
}

static void emit_list(rg *r, int first) {
    int run = -1;
    for (int k = first; k >= 0; k = r->s[k].next) {
        if (group_level(r, k)) {
            if (run >= 0) emit_region(r, run, k, -1);
            run = -1;
            emit_group_stmt(r, k);
            continue;
        }
        if (r->s[k].kind == S_SIMPLE && r->s[k].cls == C_LANES) { /* plan_list's boundary */
            emit_region(r, run, k, k);
            run = k;
            continue;
        }
        if (run < 0) run = k;
    }
    if (run >= 0) emit_region(r, run, -1, -1);
}

/* ---- entry ---------------------------------------------------------------------- */

int alloy_regions_emit(const char *src, const alloy_regions_ctx *ctx, alloy_strbuf *out) {
    rg r;
    memset(&r, 0, sizeof r);
    r.src = src;
    r.ctx = ctx;
    alloy_token *all = NULL;
    int n_all = 0;
    size_t len = strlen(src);
    if (len > 0x3fffffff || alloy_scan_ex(src, (int)len, "the body", ALLOY_SCAN_LENIENT, &all, &n_all) != ALLOY_OK)
        return 0;
    r.t = all;
    for (int i = 0; i < n_all; i++)
        if (all[i].kind != ALLOY_TOK_COMMENT) all[r.n++] = all[i];
    if (ctx->header && *ctx->header) {
        size_t hl = strlen(ctx->header);
        if (hl > 0x3fffffff || alloy_scan_ex(ctx->header, (int)hl, "the header", ALLOY_SCAN_LENIENT, &r.ht, &r.nht) != ALLOY_OK) {
            free(all);
            return 0;
        }
        r.hsrc = ctx->header;
    }
    int result = 0;
    int end = 0;
    if (r.n > MAX_TOKENS) goto done;
    int first = parse_list(&r, 0, 0, &end);
    if (r.bad || end != r.n) goto done;
    int any = 0;
    for (int k = first; k >= 0; k = r.s[k].next) any |= mark_barriers(&r, k);
    if (r.bad) goto done;
    r.any_sync = any;
    collect_list(&r, first);
    if (r.bad) goto done;
    if (r.nv > MAX_VARS) goto done;
    /* split-level names must be unique (they become group-level names,
     * storage slots and recomputed declarations) */
    for (int a = 0; a < r.nv; a++)
        for (int b = a + 1; b < r.nv; b++)
            if (same_tok(&r, r.v[a].name, r.v[b].name)) r.bad = 1;
    if (r.bad) goto done;
    find_uniform(&r);
    for (int k = first; k >= 0; k = r.s[k].next) check_control(&r, k);
    if (r.bad) goto done;
    r.regof = malloc((size_t)(r.n + 1) * sizeof *r.regof);
    if (!r.regof) {
        r.oom = 1;
        goto done;
    }
    for (int i = 0; i < r.n; i++) r.regof[i] = -1;
    plan_list(&r, first);
    for (int k = 0; k < r.ns; k++)
        if (r.s[k].split && !group_level(&r, k)) check_jumps(&r, k, 0, 0);
    if (r.bad) goto done;
    classify_thread_vars(&r);
    if (r.bad) goto done;
    alloy_strbuf sb;
    alloy_sb_init(&sb);
    r.out = &sb;
    r.out_line = ctx->first_line;
    /* with barriers, a region may run again (in a loop) or be followed by
     * others: returned threads are marked; without, the one region runs once */
    r.live = r.has_return && r.any_sync;
    if (r.live)
        put(&r, "  static thread_local unsigned char alloy_live_s[ALLOY_CPU_MAX_GROUP_THREADS];\n"
                "  unsigned char *const alloy_live = alloy_live_s;\n"
                "  for (unsigned alloy_i = 0; alloy_i < alloy_n; ++alloy_i) alloy_live[alloy_i] = 1;\n");
    emit_list(&r, first);
    if (r.bad || sb.failed) {
        r.oom |= sb.failed;
        alloy_sb_free(&sb);
        goto done;
    }
    if (sb.len) alloy_sb_append_n(out, sb.data, sb.len);
    alloy_sb_free(&sb);
    result = 1;
done:
    if (r.oom) result = -1;
    free(all);
    free(r.ht);
    free(r.s);
    free(r.v);
    free(r.regof);
    return result;
}
