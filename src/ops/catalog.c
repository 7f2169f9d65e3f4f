/* catalog.c — see catalog.h. A small table of built kernels, filled under a
 * lock on first use; the kernel files themselves are the embedded texts.
 * Kernels of one family share helpers through their headers: a header line
 * `#include "src/ops/<family>/kernels/<name>.h"` naming an embedded file is
 * replaced by that file's text (whose own such lines are replaced in turn),
 * between `#line`
 * directives so that diagnostics name the shared file's lines and then the
 * header's own again. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "core/embedded.h"
#include "core/error.h"
#include "core/strbuf.h"

enum { CATALOG_MAX = 64 };

typedef struct entry {
    const char *path; /* the embedded table's own string */
    alloy_kernel_file *file;
    alloy_kernel *kernel;
} entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry entries[CATALOG_MAX];
static int n_entries;

/* Appends `text` (a kernel's header, `label` its name for diagnostics, or at
 * depth > 0 the embedded file `label` that it includes) to sb with its `#include "<embedded path>"` lines
 * replaced by the files, theirs in turn (at most MAX_INCLUDE_DEPTH deep: a
 * cycle is an error, not a hang). An include of a path that is not embedded
 * is an error naming it. */
enum { MAX_INCLUDE_DEPTH = 8 };
static alloy_status expand_into(alloy_strbuf *sb, const char *path, const char *label, const char *text, int depth) {
    static const char KEY[] = "#include \"";
    int line = 1;
    for (const char *p = text; *p; line++) {
        const char *end = strchr(p, '\n');
        const size_t n = end ? (size_t)(end - p) + 1 : strlen(p);
        const char *q = p + sizeof KEY - 1, *close = NULL;
        if (n > sizeof KEY && !strncmp(p, KEY, sizeof KEY - 1)) close = memchr(q, '"', n - (sizeof KEY - 1));
        if (close) {
            char inc[256];
            const size_t len = (size_t)(close - q);
            if (len >= sizeof inc)
                return alloy_error(ALLOY_ERROR_INTERNAL, "%s: %s line %d: the include path is too long", path, label,
                                   line);
            memcpy(inc, q, len);
            inc[len] = '\0';
            const char *sub = alloy_embedded(inc);
            if (!sub)
                return alloy_error(ALLOY_ERROR_INTERNAL,
                                   "%s: %s line %d includes \"%s\", which is not embedded in this build; please "
                                   "report this",
                                   path, label, line, inc);
            if (depth + 1 > MAX_INCLUDE_DEPTH)
                return alloy_error(ALLOY_ERROR_INTERNAL,
                                   "%s: %s line %d: includes nested more than %d deep (a cycle?); please report this",
                                   path, label, line, MAX_INCLUDE_DEPTH);
            alloy_sb_printf(sb, "#line 1 \"%s\"\n", inc);
            const alloy_status st = expand_into(sb, path, inc, sub, depth + 1);
            if (st != ALLOY_OK) return st;
            if (sub[0] && sub[strlen(sub) - 1] != '\n') alloy_sb_append(sb, "\n");
            alloy_sb_printf(sb, "#line %d \"%s\"\n", line + 1, label);
        } else {
            alloy_sb_append_n(sb, p, n);
        }
        p += n;
    }
    return ALLOY_OK;
}

/* The header with its includes expanded (expand_into) into *out (malloc'd),
 * for the kernel `name`. */
static alloy_status expand_header(const char *path, const char *name, const char *header, char **out) {
    alloy_strbuf sb;
    alloy_sb_init(&sb);
    char label[300];
    snprintf(label, sizeof label, "%s.header", name);
    const alloy_status st = expand_into(&sb, path, label, header, 0);
    if (st != ALLOY_OK) {
        alloy_sb_free(&sb);
        return st;
    }
    if (sb.failed || !(*out = alloy_sb_take(&sb))) {
        alloy_sb_free(&sb);
        return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "%s: out of memory expanding the header", path);
    }
    return ALLOY_OK;
}

/* The kernel of a parsed catalog file, its header's includes expanded. */
static alloy_status new_kernel(const char *path, const alloy_kernel_file *f, alloy_kernel **out) {
    const char *header = alloy_kernel_file_header(f);
    if (!header || !strstr(header, "#include \"")) return alloy_kernel_file_new_kernel(f, out);
    char *expanded = NULL;
    alloy_status st = expand_header(path, alloy_kernel_file_name(f), header, &expanded);
    if (st == ALLOY_OK)
        st = alloy_kernel_new(alloy_kernel_file_name(f), alloy_kernel_file_n_inputs(f), alloy_kernel_file_inputs(f),
                              alloy_kernel_file_n_outputs(f), alloy_kernel_file_outputs(f),
                              alloy_kernel_file_body(f), expanded, alloy_kernel_file_ensure_row_contiguous(f),
                              alloy_kernel_file_atomic_outputs(f), out);
    free(expanded);
    return st;
}

/* The entry of `path`, built if needed (called with the lock held). */
static alloy_status find(const char *path, entry **out) {
    for (int i = 0; i < n_entries; i++)
        if (!strcmp(entries[i].path, path)) {
            *out = &entries[i];
            return ALLOY_OK;
        }
    const alloy_embedded_file *f = alloy_embedded_files;
    while (f->path && strcmp(f->path, path)) f++;
    if (!f->path)
        return alloy_error(ALLOY_ERROR_INTERNAL,
                           "the catalog kernel %s is not embedded in this build of alloy; please report this",
                           path);
    if (n_entries == CATALOG_MAX)
        return alloy_error(ALLOY_ERROR_INTERNAL, "more than %d catalog kernels; please report this", CATALOG_MAX);
    entry e = {f->path, NULL, NULL};
    alloy_status st = alloy_kernel_file_parse(f->text, strlen(f->text), f->path, &e.file);
    if (st == ALLOY_OK) st = new_kernel(f->path, e.file, &e.kernel);
    if (st != ALLOY_OK) {
        alloy_kernel_file_free(e.file);
        return alloy_error(st, "the catalog kernel %s does not build (please report this): %s", path,
                           alloy_last_error());
    }
    entries[n_entries] = e;
    *out = &entries[n_entries++];
    return ALLOY_OK;
}

alloy_status alloy_catalog_kernel(const char *path, alloy_kernel **out) {
    if (!path || !out) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_catalog_kernel: NULL argument");
    pthread_mutex_lock(&lock);
    entry *e = NULL;
    alloy_status st = find(path, &e);
    pthread_mutex_unlock(&lock);
    *out = st == ALLOY_OK ? e->kernel : NULL;
    return st;
}

alloy_status alloy_catalog_add_templates(const char *path, alloy_launch *launch) {
    pthread_mutex_lock(&lock);
    entry *e = NULL;
    alloy_status st = find(path, &e);
    pthread_mutex_unlock(&lock);
    return st == ALLOY_OK ? alloy_kernel_file_add_templates(e->file, launch) : st;
}
