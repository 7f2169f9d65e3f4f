/* scanner.c — the C++ token scanner the MSL dialect is built on.
 *
 * Everything in the dialect (name detection, analysis, the rewrite) works on
 * tokens rather than substrings, so an identifier inside a comment or string,
 * or `x` inside `max_shape`, is never mistaken for a use. The scanner knows
 * comments, string/char literals (with prefixes and raw strings), pp-numbers
 * (suffixes such as `1.0h`, `0x1Fu`, `1e-3`, digit separators), whole
 * preprocessor lines with continuations, and longest-match punctuation. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dialect/rewrite.h"

typedef struct scanner {
    const char *s;
    int n;
    int pos, line, col;
    int line_start; /* nothing but blanks since the last newline */
    unsigned flags;
    /* first error */
    const char *err_kind;
    int err_line;
} scanner;

static int is_ident_start(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}
static int is_ident_char(unsigned char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static int peek(const scanner *sc, int k) {
    return sc->pos + k < sc->n ? (unsigned char)sc->s[sc->pos + k] : -1;
}

static void adv(scanner *sc) {
    if (sc->pos >= sc->n) return;
    if (sc->s[sc->pos] == '\n') {
        sc->line++;
        sc->col = 1;
    } else {
        sc->col++;
    }
    sc->pos++;
}

/* Backslash-newline (optionally with \r): a line splice. */
static int at_splice(const scanner *sc) {
    if (peek(sc, 0) != '\\') return 0;
    if (peek(sc, 1) == '\n') return 2;
    if (peek(sc, 1) == '\r' && peek(sc, 2) == '\n') return 3;
    return 0;
}

static void fail(scanner *sc, const char *kind, int line) {
    if (!sc->err_kind) {
        sc->err_kind = kind;
        sc->err_line = line;
    }
}

/* After the opening quote; stops after the closing quote, or before the
 * newline when unterminated. */
static void scan_quoted(scanner *sc, char q, int line, const char *kind) {
    for (;;) {
        int c = peek(sc, 0);
        if (c < 0 || c == '\n') {
            fail(sc, kind, line);
            return;
        }
        if (c == '\\') {
            adv(sc);
            if (peek(sc, 0) >= 0) adv(sc);
            continue;
        }
        adv(sc);
        if (c == q) return;
    }
}

/* After R" : delimiter, '(' ... ')' delimiter '"'. */
static void scan_raw(scanner *sc, int line) {
    int dstart = sc->pos;
    while (peek(sc, 0) >= 0 && peek(sc, 0) != '(' && peek(sc, 0) != '\n' && sc->pos - dstart < 16)
        adv(sc);
    if (peek(sc, 0) != '(') {
        fail(sc, "raw string literal", line);
        return;
    }
    int dlen = sc->pos - dstart;
    adv(sc);
    for (;;) {
        int c = peek(sc, 0);
        if (c < 0) {
            fail(sc, "raw string literal", line);
            return;
        }
        if (c == ')' && sc->pos + 1 + dlen < sc->n &&
            memcmp(sc->s + sc->pos + 1, sc->s + dstart, (size_t)dlen) == 0 &&
            sc->s[sc->pos + 1 + dlen] == '"') {
            for (int k = 0; k < dlen + 2; k++) adv(sc);
            return;
        }
        adv(sc);
    }
}

/* After the opening slash-star. */
static void scan_block_comment(scanner *sc, int line) {
    for (;;) {
        int c = peek(sc, 0);
        if (c < 0) {
            fail(sc, "comment", line);
            return;
        }
        if (c == '*' && peek(sc, 1) == '/') {
            adv(sc);
            adv(sc);
            return;
        }
        adv(sc);
    }
}

/* To the end of the logical line (continuations included), newline excluded. */
static void scan_line_comment(scanner *sc) {
    for (;;) {
        int sp = at_splice(sc);
        if (sp) {
            for (int k = 0; k < sp; k++) adv(sc);
            continue;
        }
        int c = peek(sc, 0);
        if (c < 0 || c == '\n') return;
        adv(sc);
    }
}

/* A whole directive from '#', newline excluded. Comments and literals inside
 * are skipped so that a slash-star comment may span lines and a "//" inside a
 * string does not end it. Unterminated literals inside are tolerated (the
 * preprocessor will report them). */
static void scan_directive(scanner *sc) {
    adv(sc); /* '#' */
    for (;;) {
        int sp = at_splice(sc);
        if (sp) {
            for (int k = 0; k < sp; k++) adv(sc);
            continue;
        }
        int c = peek(sc, 0);
        if (c < 0 || c == '\n') return;
        if (c == '/' && peek(sc, 1) == '*') {
            int line = sc->line;
            adv(sc);
            adv(sc);
            scan_block_comment(sc, line);
            continue;
        }
        if (c == '/' && peek(sc, 1) == '/') {
            scan_line_comment(sc);
            return;
        }
        if (c == '"' || c == '\'') {
            adv(sc);
            for (;;) {
                int d = peek(sc, 0);
                if (d < 0 || d == '\n') break;
                if (d == '\\') {
                    adv(sc);
                    if (peek(sc, 0) >= 0 && peek(sc, 0) != '\n') adv(sc);
                    continue;
                }
                adv(sc);
                if (d == c) break;
            }
            continue;
        }
        adv(sc);
    }
}

static void scan_number(scanner *sc) {
    for (;;) {
        int c = peek(sc, 0);
        if (c < 0) return;
        if ((c == 'e' || c == 'E' || c == 'p' || c == 'P') && (peek(sc, 1) == '+' || peek(sc, 1) == '-')) {
            adv(sc);
            adv(sc);
        } else if (c == '\'' && peek(sc, 1) >= 0 && is_ident_char((unsigned char)peek(sc, 1))) {
            adv(sc); /* digit separator */
            adv(sc);
        } else if (is_ident_char((unsigned char)c) || c == '.') {
            adv(sc);
        } else {
            return;
        }
    }
}

static const char *const punct3[] = {"<<=", ">>=", "...", "->*", "<=>"};
static const char *const punct2[] = {"[[", "]]", "::", "->", "++", "--", "<<", ">>", "<=", ">=",
                                     "==", "!=", "&&", "||", "+=", "-=", "*=", "/=", "%=", "&=",
                                     "|=", "^=", ".*", "##"};

static int punct_len(const scanner *sc) {
    const char *p = sc->s + sc->pos;
    int left = sc->n - sc->pos;
    if (left >= 3)
        for (size_t i = 0; i < sizeof punct3 / sizeof *punct3; i++)
            if (memcmp(p, punct3[i], 3) == 0) return 3;
    if (left >= 2)
        for (size_t i = 0; i < sizeof punct2 / sizeof *punct2; i++)
            if (memcmp(p, punct2[i], 2) == 0) return 2;
    return 1;
}

/* String/char prefixes: L u U u8, each optionally followed by R (raw). */
static int string_prefix(const char *p, int len, int *raw) {
    *raw = 0;
    if (len > 0 && p[len - 1] == 'R') {
        *raw = 1;
        len--;
    }
    if (len == 0) return *raw; /* plain R */
    if (len == 1 && (p[0] == 'L' || p[0] == 'u' || p[0] == 'U')) return 1;
    if (len == 2 && p[0] == 'u' && p[1] == '8') return 1;
    return 0;
}

/* Scans one token; 0 at the end of the text. */
static int next_token(scanner *sc, alloy_token *t) {
    for (;;) {
        int sp = at_splice(sc);
        if (sp) {
            for (int k = 0; k < sp; k++) adv(sc);
            continue;
        }
        int c = peek(sc, 0);
        if (c < 0) return 0;
        if (c == '\n') {
            adv(sc);
            sc->line_start = 1;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
            adv(sc);
            continue;
        }
        break;
    }
    t->start = sc->pos;
    t->line = sc->line;
    t->col = sc->col;
    int line_start = sc->line_start;
    sc->line_start = 0;
    int c = peek(sc, 0), c1 = peek(sc, 1);

    if (c == '#' && line_start && !(sc->flags & ALLOY_SCAN_NO_PREPROC)) {
        t->kind = ALLOY_TOK_PREPROC;
        scan_directive(sc);
    } else if (c == '/' && c1 == '/') {
        t->kind = ALLOY_TOK_COMMENT;
        scan_line_comment(sc);
    } else if (c == '/' && c1 == '*') {
        t->kind = ALLOY_TOK_COMMENT;
        adv(sc);
        adv(sc);
        scan_block_comment(sc, t->line);
    } else if (is_ident_start((unsigned char)c)) {
        t->kind = ALLOY_TOK_IDENT;
        while (peek(sc, 0) >= 0 && is_ident_char((unsigned char)peek(sc, 0))) adv(sc);
        int raw, q = peek(sc, 0);
        if ((q == '"' || q == '\'') &&
            string_prefix(sc->s + t->start, sc->pos - t->start, &raw) && !(raw && q == '\'')) {
            adv(sc);
            if (q == '"' && raw) {
                t->kind = ALLOY_TOK_STRING;
                scan_raw(sc, t->line);
            } else {
                t->kind = q == '"' ? ALLOY_TOK_STRING : ALLOY_TOK_CHAR;
                scan_quoted(sc, (char)q, t->line,
                            q == '"' ? "string literal" : "character literal");
            }
        }
    } else if (is_digit((unsigned char)c) || (c == '.' && c1 >= 0 && is_digit((unsigned char)c1))) {
        t->kind = ALLOY_TOK_NUMBER;
        scan_number(sc);
    } else if (c == '"' || c == '\'') {
        t->kind = c == '"' ? ALLOY_TOK_STRING : ALLOY_TOK_CHAR;
        adv(sc);
        scan_quoted(sc, (char)c, t->line, c == '"' ? "string literal" : "character literal");
    } else {
        t->kind = ALLOY_TOK_PUNCT;
        int n = punct_len(sc);
        for (int k = 0; k < n; k++) adv(sc);
    }
    t->len = sc->pos - t->start;
    return 1;
}

alloy_status alloy_scan_ex(const char *src, int len, const char *what, unsigned flags,
                           alloy_token **tokens, int *count) {
    *tokens = NULL;
    *count = 0;
    if (!src) src = "";
    scanner sc = {src, len, 0, 1, 1, 1, flags, NULL, 0};
    int cap = 64, n = 0;
    alloy_token *v = malloc(sizeof *v * (size_t)cap);
    if (!v) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory scanning %s", what);
    alloy_token t;
    while (next_token(&sc, &t)) {
        if (n == cap) {
            alloy_token *nv = realloc(v, sizeof *v * (size_t)cap * 2);
            if (!nv) {
                free(v);
                return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory scanning %s", what);
            }
            v = nv;
            cap *= 2;
        }
        v[n++] = t;
    }
    if (sc.err_kind && !(flags & ALLOY_SCAN_LENIENT)) {
        free(v);
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "unterminated %s in %s, starting on line %d; close it", sc.err_kind,
                           what ? what : "the source", sc.err_line);
    }
    *tokens = v;
    *count = n;
    return ALLOY_OK;
}

alloy_status alloy_scan(const char *src, const char *what, alloy_token **tokens, int *count) {
    if (!tokens || !count)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_scan: tokens or count is NULL");
    size_t len = src ? strlen(src) : 0;
    if (len > (size_t)0x7fffffff) {
        *tokens = NULL;
        *count = 0;
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s is too long (2 GiB or more)",
                           what ? what : "the source");
    }
    return alloy_scan_ex(src, (int)len, what, 0, tokens, count);
}

/* ---- identifier walks ---------------------------------------------------- */

static alloy_status walk_idents(const char *src, int len, unsigned flags, alloy_ident_fn fn,
                                void *user) {
    alloy_token *t;
    int n;
    alloy_status st = alloy_scan_ex(src, len, "the source", flags | ALLOY_SCAN_LENIENT, &t, &n);
    if (st != ALLOY_OK) return st;
    for (int i = 0; i < n && st == ALLOY_OK; i++) {
        if (t[i].kind == ALLOY_TOK_IDENT) {
            int j = i + 1;
            while (j < n && t[j].kind == ALLOY_TOK_COMMENT) j++;
            if (j < n && t[j].kind != ALLOY_TOK_PREPROC)
                fn(src + t[i].start, t[i].len, src + t[j].start, t[j].len, user);
            else
                fn(src + t[i].start, t[i].len, NULL, 0, user);
        } else if (t[i].kind == ALLOY_TOK_PREPROC) {
            /* the inside of the directive, without its '#' */
            st = walk_idents(src + t[i].start + 1, t[i].len - 1, ALLOY_SCAN_NO_PREPROC, fn, user);
        }
    }
    free(t);
    return st;
}

alloy_status alloy_for_each_ident(const char *src, int len, alloy_ident_fn fn, void *user) {
    if (!src) return ALLOY_OK;
    return walk_idents(src, len, 0, fn, user);
}

typedef struct mention_query {
    const char *ident;
    size_t len;
    int found;
} mention_query;

static void mention_cb(const char *id, int len, const char *next, int next_len, void *user) {
    (void)next;
    (void)next_len;
    mention_query *q = user;
    if (!q->found && (size_t)len == q->len && memcmp(id, q->ident, q->len) == 0) q->found = 1;
}

int alloy_source_mentions(const char *src, const char *ident) {
    if (!src || !ident || !*ident) return 0;
    size_t len = strlen(src);
    if (len > (size_t)0x7fffffff) return 0;
    mention_query q = {ident, strlen(ident), 0};
    if (alloy_for_each_ident(src, (int)len, mention_cb, &q) != ALLOY_OK) return 0;
    return q.found;
}
