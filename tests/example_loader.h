/* example_loader.h — reads a body-only kernel file (examples/NAME.metal) into
 * the pieces alloy_kernel_new wants: name, input and output names, header,
 * body, default template arguments and flags. Header-only (static inline
 * functions) so that the tests and the `alloy` CLI share one parser; it uses
 * only the public API. The format is documented in examples/README.md:
 *
 *   // free comment lines and blank lines are ignored before `//! body:`
 *   //! name: soft_cap
 *   //! inputs: x cap                  (may be empty: `//! inputs:`)
 *   //! outputs: out
 *   //! template: T=float32 K=8        (optional, repeatable: defaults)
 *   //! ensure_row_contiguous: true    (optional, default true)
 *   //! atomic_outputs: false          (optional, default false)
 *   //! header:                        (optional: the following lines, verbatim,
 *   #include <metal_stdlib>             up to `//! body:` are the header)
 *   //! body:
 *   uint i = thread_position_in_grid.x; (the rest of the file, verbatim)
 *
 * Errors come back as "path:line: message" in a caller-provided buffer. */
#ifndef ALLOY_EXAMPLE_LOADER_H
#define ALLOY_EXAMPLE_LOADER_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloy/alloy.h"

#define EXAMPLE_MAX_NAMES 64
#define EXAMPLE_MAX_TEMPLATES 16
#define EXAMPLE_MAX_FILE_BYTES (16L << 20)

typedef enum example_template_kind {
    EXAMPLE_TEMPLATE_INT,
    EXAMPLE_TEMPLATE_BOOL,
    EXAMPLE_TEMPLATE_DTYPE
} example_template_kind;

typedef struct example_template {
    char name[64];
    example_template_kind kind;
    int64_t ivalue;    /* INT; BOOL as 0/1 */
    alloy_dtype dtype; /* DTYPE */
} example_template;

typedef struct example_kernel {
    char *path;   /* as given (for messages) */
    char *name;
    int n_inputs;
    char *inputs[EXAMPLE_MAX_NAMES];
    int n_outputs;
    char *outputs[EXAMPLE_MAX_NAMES];
    int n_templates;
    example_template templates[EXAMPLE_MAX_TEMPLATES];
    int ensure_row_contiguous; /* default 1 */
    int atomic_outputs;        /* default 0 */
    char *header;              /* NULL when the file has no `//! header:` */
    int header_line;           /* file line of the header's first line (1-based) */
    char *body;
    int body_line;             /* file line of the body's first line (1-based):
                                  body line N is file line body_line + N - 1 */
} example_kernel;

/* ---- small helpers (the CLI uses example__parse_names, example__is_ident
 * and example__strndup too: keep their signatures) ------------------------- */

static inline int example__err(char *err, size_t errlen, const char *path, int line,
                               const char *fmt, ...) {
    if (err && errlen) {
        size_t n;
        if (line > 0) n = (size_t)snprintf(err, errlen, "%s:%d: ", path ? path : "<example>", line);
        else n = (size_t)snprintf(err, errlen, "%s: ", path ? path : "<example>");
        if (n < errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(err + n, errlen - n, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

static inline char *example__strndup(const char *s, size_t n) {
    char *p = (char *)malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static inline int example__is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}
static inline int example__is_ident_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static inline int example__is_ident_char(char c) {
    return example__is_ident_start(c) || (c >= '0' && c <= '9');
}

/* 1 if [s, s+n) is a C identifier. */
static inline int example__is_ident(const char *s, size_t n) {
    if (n == 0 || !example__is_ident_start(s[0])) return 0;
    for (size_t i = 1; i < n; i++)
        if (!example__is_ident_char(s[i])) return 0;
    return 1;
}

/* Parses "NAME=VALUE" (VALUE: integer, true/false, or a dtype name) into t. */
static inline int example__parse_template(const char *s, size_t n, example_template *t,
                                          char *why, size_t whylen) {
    const char *eq = (const char *)memchr(s, '=', n);
    if (!eq) {
        snprintf(why, whylen, "template argument \"%.*s\" is not NAME=VALUE", (int)n, s);
        return -1;
    }
    size_t nl = (size_t)(eq - s), vl = n - nl - 1;
    if (!example__is_ident(s, nl) || nl >= sizeof t->name) {
        snprintf(why, whylen, "template name \"%.*s\" is not a C identifier", (int)nl, s);
        return -1;
    }
    char value[64];
    if (vl == 0 || vl >= sizeof value) {
        snprintf(why, whylen, "template argument %.*s has an empty or too long value", (int)nl, s);
        return -1;
    }
    memcpy(value, eq + 1, vl);
    value[vl] = '\0';
    memset(t, 0, sizeof *t);
    memcpy(t->name, s, nl);
    t->name[nl] = '\0';
    if (!strcmp(value, "true") || !strcmp(value, "false")) {
        t->kind = EXAMPLE_TEMPLATE_BOOL;
        t->ivalue = value[0] == 't';
        return 0;
    }
    if ((value[0] >= '0' && value[0] <= '9') || value[0] == '-' || value[0] == '+') {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(value, &end, 0);
        if (errno || !end || *end) {
            snprintf(why, whylen, "template argument %s: \"%s\" is not an integer", t->name, value);
            return -1;
        }
        t->kind = EXAMPLE_TEMPLATE_INT;
        t->ivalue = (int64_t)v;
        return 0;
    }
    if (alloy_dtype_parse(value, &t->dtype) != ALLOY_OK) {
        snprintf(why, whylen,
                 "template argument %s: \"%s\" is neither an integer, true/false nor a dtype",
                 t->name, value);
        return -1;
    }
    t->kind = EXAMPLE_TEMPLATE_DTYPE;
    return 0;
}

/* Sets (replaces or appends) one template default. */
static inline int example__put_template(example_kernel *ex, const example_template *t, char *why,
                                        size_t whylen) {
    for (int i = 0; i < ex->n_templates; i++)
        if (!strcmp(ex->templates[i].name, t->name)) {
            ex->templates[i] = *t;
            return 0;
        }
    if (ex->n_templates >= EXAMPLE_MAX_TEMPLATES) {
        snprintf(why, whylen, "more than %d template arguments", EXAMPLE_MAX_TEMPLATES);
        return -1;
    }
    ex->templates[ex->n_templates++] = *t;
    return 0;
}

/* Splits a whitespace-separated list of identifiers into names[]. */
static inline int example__parse_names(const char *s, size_t n, char **names, int *count,
                                       char *why, size_t whylen) {
    size_t i = 0;
    *count = 0;
    while (i < n) {
        while (i < n && (example__is_space(s[i]) || s[i] == ',')) i++;
        if (i >= n) break;
        size_t b = i;
        while (i < n && !example__is_space(s[i]) && s[i] != ',') i++;
        if (!example__is_ident(s + b, i - b)) {
            snprintf(why, whylen, "\"%.*s\" is not a valid name (a C identifier)", (int)(i - b),
                     s + b);
            return -1;
        }
        for (int k = 0; k < *count; k++)
            if (strlen(names[k]) == i - b && !memcmp(names[k], s + b, i - b)) {
                snprintf(why, whylen, "name \"%.*s\" appears twice", (int)(i - b), s + b);
                return -1;
            }
        if (*count >= EXAMPLE_MAX_NAMES) {
            snprintf(why, whylen, "more than %d names", EXAMPLE_MAX_NAMES);
            return -1;
        }
        names[*count] = example__strndup(s + b, i - b);
        if (!names[*count]) {
            snprintf(why, whylen, "out of memory");
            return -1;
        }
        (*count)++;
    }
    return 0;
}

static inline int example__parse_flag(const char *v, size_t n, int *out) {
    if ((n == 4 && !memcmp(v, "true", 4)) || (n == 1 && v[0] == '1')) { *out = 1; return 0; }
    if ((n == 5 && !memcmp(v, "false", 5)) || (n == 1 && v[0] == '0')) { *out = 0; return 0; }
    return -1;
}

/* ---- public ------------------------------------------------------------ */

/* Frees everything example_parse/example_load allocated; safe on a zeroed or
 * already-freed struct. */
static inline void example_free(example_kernel *ex) {
    if (!ex) return;
    free(ex->path);
    free(ex->name);
    for (int i = 0; i < ex->n_inputs; i++) free(ex->inputs[i]);
    for (int i = 0; i < ex->n_outputs; i++) free(ex->outputs[i]);
    free(ex->header);
    free(ex->body);
    memset(ex, 0, sizeof *ex);
}

/* Parses the text of an example file. `path` only names the file in
 * messages. Returns 0, or -1 with "path:line: why" in err. */
static inline int example_parse(const char *text, const char *path, example_kernel *ex,
                                char *err, size_t errlen) {
    enum { PREAMBLE, HEADER } state = PREAMBLE;
    char why[256];
    int line = 0, have_inputs = 0, have_outputs = 0, have_header = 0;
    const char *p = text, *header_start = NULL;

    memset(ex, 0, sizeof *ex);
    ex->ensure_row_contiguous = 1;
    ex->path = example__strndup(path ? path : "<example>", strlen(path ? path : "<example>"));
    if (!ex->path) return example__err(err, errlen, path, 0, "out of memory");

    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *next = eol ? eol + 1 : p + len;
        line++;

        /* Trim the line for directive recognition. */
        const char *s = p, *e = p + len;
        while (s < e && example__is_space(*s)) s++;
        while (e > s && example__is_space(e[-1])) e--;
        int is_directive = (e - s) >= 3 && s[0] == '/' && s[1] == '/' && s[2] == '!';

        if (!is_directive) {
            if (state == PREAMBLE && s < e && !(e - s >= 2 && s[0] == '/' && s[1] == '/')) {
                example__err(err, errlen, path, line,
                             "expected a `//! key: value` directive, a `//` comment or a blank "
                             "line before `//! body:` (did you forget `//! header:` or "
                             "`//! body:`?)");
                goto fail;
            }
            p = next;
            continue;
        }

        /* `//! key: value` */
        const char *k = s + 3;
        while (k < e && example__is_space(*k)) k++;
        const char *ke = k;
        while (ke < e && example__is_ident_char(*ke)) ke++;
        const char *c = ke;
        while (c < e && example__is_space(*c)) c++;
        if (ke == k || c >= e || *c != ':') {
            example__err(err, errlen, path, line, "malformed directive \"%.*s\": expected `//! key: value`",
                         (int)(e - s), s);
            goto fail;
        }
        const char *v = c + 1;
        while (v < e && example__is_space(*v)) v++;
        size_t klen = (size_t)(ke - k), vlen = (size_t)(e - v);
#define EXAMPLE_KEY(lit) (klen == sizeof(lit) - 1 && !memcmp(k, lit, klen))

        if (state == HEADER && !EXAMPLE_KEY("body")) {
            example__err(err, errlen, path, line,
                         "only `//! body:` may follow `//! header:` (found `//! %.*s:`)", (int)klen, k);
            goto fail;
        }
        if (EXAMPLE_KEY("body")) {
            if (vlen) {
                example__err(err, errlen, path, line,
                             "`//! body:` takes no value; the body starts on the next line");
                goto fail;
            }
            if (state == HEADER) {
                ex->header = example__strndup(header_start, (size_t)(p - header_start));
                if (!ex->header) { example__err(err, errlen, path, line, "out of memory"); goto fail; }
            }
            ex->body_line = line + 1;
            ex->body = example__strndup(next, strlen(next));
            if (!ex->body) { example__err(err, errlen, path, line, "out of memory"); goto fail; }
            break;
        } else if (EXAMPLE_KEY("header")) {
            if (vlen || have_header) {
                example__err(err, errlen, path, line,
                             have_header ? "`//! header:` appears twice"
                                         : "`//! header:` takes no value; the header starts on the next line");
                goto fail;
            }
            have_header = 1;
            state = HEADER;
            header_start = next;
            ex->header_line = line + 1;
        } else if (EXAMPLE_KEY("name")) {
            if (ex->name) { example__err(err, errlen, path, line, "`//! name:` appears twice"); goto fail; }
            if (!example__is_ident(v, vlen)) {
                example__err(err, errlen, path, line, "kernel name \"%.*s\" is not a C identifier",
                             (int)vlen, v);
                goto fail;
            }
            ex->name = example__strndup(v, vlen);
            if (!ex->name) { example__err(err, errlen, path, line, "out of memory"); goto fail; }
        } else if (EXAMPLE_KEY("inputs") || EXAMPLE_KEY("outputs")) {
            int is_in = k[0] == 'i';
            if (is_in ? have_inputs : have_outputs) {
                example__err(err, errlen, path, line, "`//! %s:` appears twice", is_in ? "inputs" : "outputs");
                goto fail;
            }
            if (example__parse_names(v, vlen, is_in ? ex->inputs : ex->outputs,
                                     is_in ? &ex->n_inputs : &ex->n_outputs, why, sizeof why)) {
                example__err(err, errlen, path, line, "%s", why);
                goto fail;
            }
            if (is_in) have_inputs = 1;
            else have_outputs = 1;
        } else if (EXAMPLE_KEY("template")) {
            size_t i = 0;
            while (i < vlen) {
                while (i < vlen && example__is_space(v[i])) i++;
                if (i >= vlen) break;
                size_t b = i;
                while (i < vlen && !example__is_space(v[i])) i++;
                example_template t;
                if (example__parse_template(v + b, i - b, &t, why, sizeof why) ||
                    example__put_template(ex, &t, why, sizeof why)) {
                    example__err(err, errlen, path, line, "%s", why);
                    goto fail;
                }
            }
        } else if (EXAMPLE_KEY("ensure_row_contiguous") || EXAMPLE_KEY("atomic_outputs")) {
            int *flag = k[0] == 'e' ? &ex->ensure_row_contiguous : &ex->atomic_outputs;
            if (example__parse_flag(v, vlen, flag)) {
                example__err(err, errlen, path, line, "`//! %.*s:` wants true or false, not \"%.*s\"",
                             (int)klen, k, (int)vlen, v);
                goto fail;
            }
        } else {
            example__err(err, errlen, path, line,
                         "unknown directive `//! %.*s:` (known: name, inputs, outputs, template, "
                         "ensure_row_contiguous, atomic_outputs, header, body)",
                         (int)klen, k);
            goto fail;
        }
#undef EXAMPLE_KEY
        p = next;
    }

    if (!ex->body) {
        example__err(err, errlen, path, 0, "no `//! body:` line (the body follows it)");
        goto fail;
    }
    if (!ex->name) { example__err(err, errlen, path, 0, "no `//! name:` directive"); goto fail; }
    if (!have_inputs) {
        example__err(err, errlen, path, 0, "no `//! inputs:` directive (write `//! inputs:` for none)");
        goto fail;
    }
    if (!have_outputs || ex->n_outputs == 0) {
        example__err(err, errlen, path, 0, "no outputs: a kernel needs `//! outputs: NAME ...`");
        goto fail;
    }
    for (int i = 0; i < ex->n_inputs; i++)
        for (int j = 0; j < ex->n_outputs; j++)
            if (!strcmp(ex->inputs[i], ex->outputs[j])) {
                example__err(err, errlen, path, 0, "\"%s\" is both an input and an output", ex->inputs[i]);
                goto fail;
            }
    {
        const char *b = ex->body;
        while (*b && (example__is_space(*b) || *b == '\n')) b++;
        if (!*b) { example__err(err, errlen, path, ex->body_line, "the body is empty"); goto fail; }
    }
    return 0;
fail:
    example_free(ex);
    return -1;
}

/* Reads and parses an example file. Returns 0, or -1 with the reason in err. */
static inline int example_load(const char *path, example_kernel *ex, char *err, size_t errlen) {
    memset(ex, 0, sizeof *ex);
    FILE *f = fopen(path, "rb");
    if (!f) return example__err(err, errlen, path, 0, "cannot open: %s", strerror(errno));
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *t = (char *)realloc(text, cap);
            if (!t) { free(text); fclose(f); return example__err(err, errlen, path, 0, "out of memory"); }
            text = t;
        }
        size_t got = fread(text + len, 1, cap - len - 1, f);
        len += got;
        if (len > (size_t)EXAMPLE_MAX_FILE_BYTES) {
            free(text);
            fclose(f);
            return example__err(err, errlen, path, 0, "file is larger than %ld bytes",
                                (long)EXAMPLE_MAX_FILE_BYTES);
        }
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(text); return example__err(err, errlen, path, 0, "read error"); }
    text[len] = '\0';
    if (strlen(text) != len) {
        free(text);
        return example__err(err, errlen, path, 0, "file contains a NUL byte (not a text file)");
    }
    int rc = example_parse(text, path, ex, err, errlen);
    free(text);
    return rc;
}

/* Sets or overrides one template default from "NAME=VALUE" (how the CLI's
 * --template flag applies). Returns 0, or -1 with the reason in err. */
static inline int example_set_template(example_kernel *ex, const char *assignment, char *err,
                                       size_t errlen) {
    char why[256];
    example_template t;
    if (example__parse_template(assignment, strlen(assignment), &t, why, sizeof why) ||
        example__put_template(ex, &t, why, sizeof why))
        return example__err(err, errlen, ex->path, 0, "%s", why);
    return 0;
}

/* The template default named `name`, or NULL. */
static inline const example_template *example_find_template(const example_kernel *ex,
                                                            const char *name) {
    for (int i = 0; i < ex->n_templates; i++)
        if (!strcmp(ex->templates[i].name, name)) return &ex->templates[i];
    return NULL;
}

/* alloy_kernel_new with the file's names, body, header and flags. */
static inline alloy_status example_kernel_new(const example_kernel *ex, alloy_kernel **out) {
    return alloy_kernel_new(ex->name, ex->n_inputs, (const char *const *)ex->inputs, ex->n_outputs,
                            (const char *const *)ex->outputs, ex->body, ex->header,
                            ex->ensure_row_contiguous, ex->atomic_outputs, out);
}

/* Adds the file's template defaults (after any example_set_template
 * overrides) to a launch configuration. */
static inline alloy_status example_add_templates(const example_kernel *ex, alloy_launch *launch) {
    for (int i = 0; i < ex->n_templates; i++) {
        const example_template *t = &ex->templates[i];
        alloy_status st;
        switch (t->kind) {
        case EXAMPLE_TEMPLATE_INT: st = alloy_launch_add_template_int(launch, t->name, t->ivalue); break;
        case EXAMPLE_TEMPLATE_BOOL: st = alloy_launch_add_template_bool(launch, t->name, (int)t->ivalue); break;
        default: st = alloy_launch_add_template_dtype(launch, t->name, t->dtype); break;
        }
        if (st != ALLOY_OK) return st;
    }
    return ALLOY_OK;
}

#endif
