/* kernel_file.c — the parser of kernel files (include/alloy/kernel_file.h):
 * `//! key: value` directives before `//! body:`, `//` comments and blank
 * lines ignored there, an optional verbatim header, and the rest of the file
 * as the body. Line numbers are kept so messages and compiler diagnostics
 * point into the file. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloy/kernel_file.h"
#include "error.h"

typedef struct template_value {
    char name[64];
    alloy_kernel_file_template_kind kind;
    int64_t ivalue;
    alloy_dtype dtype;
} template_value;

struct alloy_kernel_file {
    char *path, *name, *header, *body;
    int n_inputs, n_outputs, n_templates;
    char *inputs[ALLOY_KERNEL_FILE_MAX_NAMES + 1], *outputs[ALLOY_KERNEL_FILE_MAX_NAMES + 1];
    template_value templates[ALLOY_KERNEL_FILE_MAX_TEMPLATES];
    int ensure_row_contiguous, atomic_outputs;
    int header_line, body_line;
};

/* ---- small helpers ---------------------------------------------------------- */

static char *dup_n(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }
static int is_ident_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

int alloy_is_identifier(const char *s, size_t n) {
    if (!s || n == 0 || !is_ident_start(s[0])) return 0;
    for (size_t i = 1; i < n; i++)
        if (!is_ident_char(s[i])) return 0;
    return 1;
}

/* "path:line: why" (no line when line is 0) as the thread's error. */
static alloy_status fail_at(alloy_status st, const char *path, int line, const char *fmt, ...)
    ALLOY_PRINTF(4, 5);
static alloy_status fail_at(alloy_status st, const char *path, int line, const char *fmt, ...) {
    char why[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (line > 0) return alloy_error(st, "%s:%d: %s", path, line, why);
    return alloy_error(st, "%s: %s", path, why);
}

/* Parses "NAME=VALUE" (VALUE: an integer in C syntax, true/false, or a
 * dtype name). 0, or -1 with the reason in why. */
static int parse_template(const char *s, size_t n, template_value *t, char *why, size_t whylen) {
    const char *eq = memchr(s, '=', n);
    if (!eq) {
        snprintf(why, whylen, "template argument \"%.*s\" is not NAME=VALUE", (int)n, s);
        return -1;
    }
    size_t nl = (size_t)(eq - s), vl = n - nl - 1;
    if (!alloy_is_identifier(s, nl) || nl >= sizeof t->name) {
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
    if (!strcmp(value, "true") || !strcmp(value, "false")) {
        t->kind = ALLOY_KERNEL_FILE_TEMPLATE_BOOL;
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
        t->kind = ALLOY_KERNEL_FILE_TEMPLATE_INT;
        t->ivalue = (int64_t)v;
        return 0;
    }
    if (alloy_dtype_parse(value, &t->dtype) != ALLOY_OK) {
        snprintf(why, whylen,
                 "template argument %s: \"%s\" is neither an integer, true/false nor a dtype",
                 t->name, value);
        return -1;
    }
    t->kind = ALLOY_KERNEL_FILE_TEMPLATE_DTYPE;
    return 0;
}

/* Sets (replaces in place, or appends) one template default. */
static int put_template(alloy_kernel_file *f, const template_value *t, char *why, size_t whylen) {
    for (int i = 0; i < f->n_templates; i++)
        if (!strcmp(f->templates[i].name, t->name)) {
            f->templates[i] = *t;
            return 0;
        }
    if (f->n_templates >= ALLOY_KERNEL_FILE_MAX_TEMPLATES) {
        snprintf(why, whylen, "more than %d template arguments", ALLOY_KERNEL_FILE_MAX_TEMPLATES);
        return -1;
    }
    f->templates[f->n_templates++] = *t;
    return 0;
}

static void free_names(char **names, int *count) {
    for (int k = 0; k < *count; k++) {
        free(names[k]);
        names[k] = NULL;
    }
    *count = 0;
}

/* Splits a list of identifiers separated by blanks or commas into names[]
 * (NULL-terminated). 0, or -1 with the reason in why (names[] then empty). */
static int parse_names(const char *s, size_t n, char **names, int *count, char *why,
                       size_t whylen) {
    size_t i = 0;
    *count = 0;
    while (i < n) {
        while (i < n && (is_blank(s[i]) || s[i] == ',')) i++;
        if (i >= n) break;
        size_t b = i;
        while (i < n && !is_blank(s[i]) && s[i] != ',') i++;
        const char *bad = NULL;
        if (!alloy_is_identifier(s + b, i - b)) bad = "is not a valid name (a C identifier)";
        for (int k = 0; k < *count && !bad; k++)
            if (strlen(names[k]) == i - b && !memcmp(names[k], s + b, i - b)) bad = "appears twice";
        if (bad) {
            snprintf(why, whylen, "%s\"%.*s\" %s", bad[0] == 'a' ? "name " : "", (int)(i - b), s + b,
                     bad);
            free_names(names, count);
            return -1;
        }
        if (*count >= ALLOY_KERNEL_FILE_MAX_NAMES) {
            snprintf(why, whylen, "more than %d names", ALLOY_KERNEL_FILE_MAX_NAMES);
            free_names(names, count);
            return -1;
        }
        names[*count] = dup_n(s + b, i - b);
        if (!names[*count]) {
            snprintf(why, whylen, "out of memory");
            free_names(names, count);
            return -1;
        }
        (*count)++;
    }
    names[*count] = NULL;
    return 0;
}

static int parse_flag(const char *v, size_t n, int *out) {
    if ((n == 4 && !memcmp(v, "true", 4)) || (n == 1 && v[0] == '1')) {
        *out = 1;
        return 0;
    }
    if ((n == 5 && !memcmp(v, "false", 5)) || (n == 1 && v[0] == '0')) {
        *out = 0;
        return 0;
    }
    return -1;
}

/* ---- parsing ------------------------------------------------------------------ */

void alloy_kernel_file_free(alloy_kernel_file *f) {
    if (!f) return;
    free(f->path);
    free(f->name);
    free_names(f->inputs, &f->n_inputs);
    free_names(f->outputs, &f->n_outputs);
    free(f->header);
    free(f->body);
    free(f);
}

/* One `//! key: value` line (s..e trimmed) at `line`; `next` is where the
 * following line starts. Updates *state (0 preamble, 1 inside the header,
 * 2 done: the body was found). */
static alloy_status directive(alloy_kernel_file *f, const char *s, const char *e, int line,
                              const char *p, const char *next, int *state, const char **header_start,
                              int *seen) {
    enum { SEEN_INPUTS = 1, SEEN_OUTPUTS = 2, SEEN_HEADER = 4 };
    const char *path = f->path;
    char why[256];
    const char *k = s + 3;
    while (k < e && is_blank(*k)) k++;
    const char *ke = k;
    while (ke < e && is_ident_char(*ke)) ke++;
    const char *c = ke;
    while (c < e && is_blank(*c)) c++;
    if (ke == k || c >= e || *c != ':')
        return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, line,
                       "malformed directive \"%.*s\": expected `//! key: value`", (int)(e - s), s);
    const char *v = c + 1;
    while (v < e && is_blank(*v)) v++;
    size_t klen = (size_t)(ke - k), vlen = (size_t)(e - v);
#define KEY(lit) (klen == sizeof(lit) - 1 && !memcmp(k, lit, klen))
    if (*state == 1 && !KEY("body"))
        return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, line,
                       "only `//! body:` may follow `//! header:` (found `//! %.*s:`)", (int)klen, k);
    if (KEY("body")) {
        if (vlen)
            return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, line,
                           "`//! body:` takes no value; the body starts on the next line");
        if (*state == 1 && !(f->header = dup_n(*header_start, (size_t)(p - *header_start))))
            return fail_at(ALLOY_ERROR_OUT_OF_MEMORY, path, line, "out of memory");
        f->body_line = line + 1;
        if (!(f->body = dup_n(next, strlen(next))))
            return fail_at(ALLOY_ERROR_OUT_OF_MEMORY, path, line, "out of memory");
        *state = 2;
    } else if (KEY("header")) {
        if (vlen || (*seen & SEEN_HEADER))
            return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, line, "%s",
                           (*seen & SEEN_HEADER)
                               ? "`//! header:` appears twice"
                               : "`//! header:` takes no value; the header starts on the next line");
        *seen |= SEEN_HEADER;
        *state = 1;
        *header_start = next;
        f->header_line = line + 1;
    } else if (KEY("name")) {
        if (f->name)
            return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, line, "`//! name:` appears twice");
        if (!alloy_is_identifier(v, vlen))
            return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, line,
                           "kernel name \"%.*s\" is not a C identifier", (int)vlen, v);
        if (!(f->name = dup_n(v, vlen)))
            return fail_at(ALLOY_ERROR_OUT_OF_MEMORY, path, line, "out of memory");
    } else if (KEY("inputs") || KEY("outputs")) {
        int is_in = k[0] == 'i';
        if (*seen & (is_in ? SEEN_INPUTS : SEEN_OUTPUTS))
            return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, line, "`//! %s:` appears twice",
                           is_in ? "inputs" : "outputs");
        if (parse_names(v, vlen, is_in ? f->inputs : f->outputs, is_in ? &f->n_inputs : &f->n_outputs,
                        why, sizeof why))
            return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, line, "%s", why);
        *seen |= is_in ? SEEN_INPUTS : SEEN_OUTPUTS;
    } else if (KEY("template")) {
        size_t i = 0;
        while (i < vlen) {
            while (i < vlen && is_blank(v[i])) i++;
            if (i >= vlen) break;
            size_t b = i;
            while (i < vlen && !is_blank(v[i])) i++;
            template_value t;
            if (parse_template(v + b, i - b, &t, why, sizeof why) || put_template(f, &t, why, sizeof why))
                return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, line, "%s", why);
        }
    } else if (KEY("ensure_row_contiguous") || KEY("atomic_outputs")) {
        int *flag = k[0] == 'e' ? &f->ensure_row_contiguous : &f->atomic_outputs;
        if (parse_flag(v, vlen, flag))
            return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, line,
                           "`//! %.*s:` wants true or false, not \"%.*s\"", (int)klen, k, (int)vlen, v);
    } else {
        return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, line,
                       "unknown directive `//! %.*s:` (known: name, inputs, outputs, template, "
                       "ensure_row_contiguous, atomic_outputs, header, body)",
                       (int)klen, k);
    }
#undef KEY
    return ALLOY_OK;
}

static alloy_status parse_text(alloy_kernel_file *f, const char *text) {
    const char *path = f->path, *p = text, *header_start = NULL;
    int line = 0, state = 0, seen = 0;
    while (*p && state != 2) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *next = eol ? eol + 1 : p + len;
        line++;
        const char *s = p, *e = p + len; /* trimmed, to recognise directives */
        while (s < e && is_blank(*s)) s++;
        while (e > s && is_blank(e[-1])) e--;
        if (e - s >= 3 && s[0] == '/' && s[1] == '/' && s[2] == '!') {
            alloy_status st = directive(f, s, e, line, p, next, &state, &header_start, &seen);
            if (st != ALLOY_OK) return st;
        } else if (state == 0 && s < e && !(e - s >= 2 && s[0] == '/' && s[1] == '/')) {
            return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, line,
                           "expected a `//! key: value` directive, a `//` comment or a blank line "
                           "before `//! body:` (did you forget `//! header:` or `//! body:`?)");
        }
        p = next;
    }
    if (!f->body)
        return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, 0, "no `//! body:` line (the body follows it)");
    if (!f->name) return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, 0, "no `//! name:` directive");
    if (!(seen & 1))
        return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, 0,
                       "no `//! inputs:` directive (write `//! inputs:` for none)");
    if (!(seen & 2) || f->n_outputs == 0)
        return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, 0,
                       "no outputs: a kernel needs `//! outputs: NAME ...`");
    for (int i = 0; i < f->n_inputs; i++)
        for (int j = 0; j < f->n_outputs; j++)
            if (!strcmp(f->inputs[i], f->outputs[j]))
                return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, 0, "\"%s\" is both an input and an output",
                               f->inputs[i]);
    const char *b = f->body;
    while (*b && (is_blank(*b) || *b == '\n')) b++;
    if (!*b) return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, f->body_line, "the body is empty");
    return ALLOY_OK;
}

alloy_status alloy_kernel_file_parse(const char *text, size_t len, const char *path,
                                     alloy_kernel_file **out) {
    if (!out) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_kernel_file_parse: out is NULL");
    *out = NULL;
    if (!path) path = "<kernel file>";
    if (!text && len) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: the text is NULL", path);
    if (len && memchr(text, 0, len))
        return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, 0, "file contains a NUL byte (not a text file)");
    alloy_kernel_file *f = calloc(1, sizeof *f);
    char *copy = dup_n(text ? text : "", len);
    if (f) f->path = dup_n(path, strlen(path));
    if (!f || !copy || !f->path) {
        free(copy);
        alloy_kernel_file_free(f);
        return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    f->ensure_row_contiguous = 1;
    alloy_status st = parse_text(f, copy);
    free(copy);
    if (st != ALLOY_OK) {
        alloy_kernel_file_free(f);
        return st;
    }
    *out = f;
    return ALLOY_OK;
}

alloy_status alloy_kernel_file_load(const char *path, alloy_kernel_file **out) {
    if (!out) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_kernel_file_load: out is NULL");
    *out = NULL;
    if (!path) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_kernel_file_load: path is NULL");
    FILE *fp = fopen(path, "rb");
    if (!fp) return fail_at(ALLOY_ERROR_IO, path, 0, "cannot open: %s", strerror(errno));
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *t = realloc(text, cap);
            if (!t) {
                free(text);
                fclose(fp);
                return fail_at(ALLOY_ERROR_OUT_OF_MEMORY, path, 0, "out of memory");
            }
            text = t;
        }
        size_t got = fread(text + len, 1, cap - len - 1, fp);
        len += got;
        if (len > (size_t)ALLOY_KERNEL_FILE_MAX_BYTES) {
            free(text);
            fclose(fp);
            return fail_at(ALLOY_ERROR_INVALID_ARGUMENT, path, 0, "file is larger than %ld bytes",
                           (long)ALLOY_KERNEL_FILE_MAX_BYTES);
        }
        if (got == 0) break;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad) {
        free(text);
        return fail_at(ALLOY_ERROR_IO, path, 0, "read error");
    }
    alloy_status st = alloy_kernel_file_parse(text, len, path, out);
    free(text);
    return st;
}

/* ---- accessors ---------------------------------------------------------------- */

const char *alloy_kernel_file_path(const alloy_kernel_file *f) { return f ? f->path : NULL; }
const char *alloy_kernel_file_name(const alloy_kernel_file *f) { return f ? f->name : NULL; }
int alloy_kernel_file_n_inputs(const alloy_kernel_file *f) { return f ? f->n_inputs : 0; }
const char *const *alloy_kernel_file_inputs(const alloy_kernel_file *f) {
    return f ? (const char *const *)f->inputs : NULL;
}
int alloy_kernel_file_n_outputs(const alloy_kernel_file *f) { return f ? f->n_outputs : 0; }
const char *const *alloy_kernel_file_outputs(const alloy_kernel_file *f) {
    return f ? (const char *const *)f->outputs : NULL;
}
int alloy_kernel_file_ensure_row_contiguous(const alloy_kernel_file *f) {
    return f ? f->ensure_row_contiguous : 1;
}
int alloy_kernel_file_atomic_outputs(const alloy_kernel_file *f) { return f ? f->atomic_outputs : 0; }
const char *alloy_kernel_file_header(const alloy_kernel_file *f) { return f ? f->header : NULL; }
int alloy_kernel_file_header_line(const alloy_kernel_file *f) { return f && f->header ? f->header_line : 0; }
const char *alloy_kernel_file_body(const alloy_kernel_file *f) { return f ? f->body : NULL; }
int alloy_kernel_file_body_line(const alloy_kernel_file *f) { return f ? f->body_line : 0; }
int alloy_kernel_file_n_templates(const alloy_kernel_file *f) { return f ? f->n_templates : 0; }

static void to_public(const template_value *t, alloy_kernel_file_template *out) {
    out->name = t->name;
    out->kind = t->kind;
    out->ivalue = t->ivalue;
    out->dtype = t->dtype;
}

alloy_status alloy_kernel_file_template_at(const alloy_kernel_file *f, int index,
                                           alloy_kernel_file_template *out) {
    if (!f || !out || index < 0 || index >= f->n_templates)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "alloy_kernel_file_template_at: no template argument %d (the file has %d)",
                           index, f ? f->n_templates : 0);
    to_public(&f->templates[index], out);
    return ALLOY_OK;
}

int alloy_kernel_file_find_template(const alloy_kernel_file *f, const char *name,
                                    alloy_kernel_file_template *out) {
    if (!f || !name) return 0;
    for (int i = 0; i < f->n_templates; i++)
        if (!strcmp(f->templates[i].name, name)) {
            if (out) to_public(&f->templates[i], out);
            return 1;
        }
    return 0;
}

/* ---- overrides ---------------------------------------------------------------- */

alloy_status alloy_kernel_file_set_name(alloy_kernel_file *f, const char *name) {
    if (!f) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "kernel file is NULL");
    if (!name || !alloy_is_identifier(name, strlen(name)))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "kernel name \"%s\" is not a C identifier",
                           name ? name : "(null)");
    char *n = dup_n(name, strlen(name));
    if (!n) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
    free(f->name);
    f->name = n;
    return ALLOY_OK;
}

static alloy_status set_names(alloy_kernel_file *f, const char *list, int is_output) {
    if (!f) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "kernel file is NULL");
    char *fresh[ALLOY_KERNEL_FILE_MAX_NAMES + 1];
    int n = 0;
    char why[256];
    if (!list) list = "";
    if (parse_names(list, strlen(list), fresh, &n, why, sizeof why))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s", why);
    if (is_output && n == 0)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "a kernel needs at least one output");
    char **names = is_output ? f->outputs : f->inputs;
    int *count = is_output ? &f->n_outputs : &f->n_inputs;
    free_names(names, count);
    for (int k = 0; k <= n; k++) names[k] = fresh[k];
    *count = n;
    return ALLOY_OK;
}

alloy_status alloy_kernel_file_set_inputs(alloy_kernel_file *f, const char *names) {
    return set_names(f, names, 0);
}
alloy_status alloy_kernel_file_set_outputs(alloy_kernel_file *f, const char *names) {
    return set_names(f, names, 1);
}

alloy_status alloy_kernel_file_set_template(alloy_kernel_file *f, const char *assignment) {
    if (!f) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "kernel file is NULL");
    char why[256];
    template_value t;
    if (!assignment) assignment = "";
    if (parse_template(assignment, strlen(assignment), &t, why, sizeof why) ||
        put_template(f, &t, why, sizeof why))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s", why);
    return ALLOY_OK;
}

void alloy_kernel_file_set_ensure_row_contiguous(alloy_kernel_file *f, int on) {
    if (f) f->ensure_row_contiguous = on != 0;
}
void alloy_kernel_file_set_atomic_outputs(alloy_kernel_file *f, int on) {
    if (f) f->atomic_outputs = on != 0;
}

/* ---- use ---------------------------------------------------------------------- */

alloy_status alloy_kernel_file_new_kernel(const alloy_kernel_file *f, alloy_kernel **out) {
    if (!f) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "kernel file is NULL");
    return alloy_kernel_new(f->name, f->n_inputs, (const char *const *)f->inputs, f->n_outputs,
                            (const char *const *)f->outputs, f->body, f->header,
                            f->ensure_row_contiguous, f->atomic_outputs, out);
}

alloy_status alloy_kernel_file_add_templates(const alloy_kernel_file *f, alloy_launch *launch) {
    if (!f) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "kernel file is NULL");
    for (int i = 0; i < f->n_templates; i++) {
        const template_value *t = &f->templates[i];
        alloy_status st;
        switch (t->kind) {
        case ALLOY_KERNEL_FILE_TEMPLATE_INT:
            st = alloy_launch_add_template_int(launch, t->name, t->ivalue);
            break;
        case ALLOY_KERNEL_FILE_TEMPLATE_BOOL:
            st = alloy_launch_add_template_bool(launch, t->name, (int)t->ivalue);
            break;
        default:
            st = alloy_launch_add_template_dtype(launch, t->name, t->dtype);
            break;
        }
        if (st != ALLOY_OK) return st;
    }
    return ALLOY_OK;
}
