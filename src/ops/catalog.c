/* catalog.c — see catalog.h. A small table of built kernels, filled under a
 * lock on first use; the kernel files themselves are the embedded texts.
 * Kernels of one family share helpers through their headers: a header line
 * `#include "src/ops/<family>/kernels/<name>.h"` naming an embedded file is
 * replaced by that file's text (one level, no nesting), between `#line`
 * directives so that diagnostics name the shared file's lines and then the
 * header's own again. */
#include <pthread.h>
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

/* The header with its `#include "<embedded path>"` lines replaced (see the
 * top of this file) into *out (malloc'd), for the kernel `name`. An include
 * of a path that is not embedded is an error naming it. */
static alloy_status expand_header(const char *path, const char *name, const char *header, char **out) {
    static const char KEY[] = "#include \"";
    alloy_strbuf sb;
    alloy_sb_init(&sb);
    int line = 1;
    for (const char *p = header; *p; line++) {
        const char *end = strchr(p, '\n');
        const size_t n = end ? (size_t)(end - p) + 1 : strlen(p);
        const char *q = p + sizeof KEY - 1, *close = NULL;
        if (n > sizeof KEY && !strncmp(p, KEY, sizeof KEY - 1)) close = memchr(q, '"', n - (sizeof KEY - 1));
        if (close) {
            char inc[256];
            const size_t len = (size_t)(close - q);
            if (len >= sizeof inc) {
                alloy_sb_free(&sb);
                return alloy_error(ALLOY_ERROR_INTERNAL, "%s: header line %d: the include path is too long", path,
                                   line);
            }
            memcpy(inc, q, len);
            inc[len] = '\0';
            const char *text = alloy_embedded(inc);
            if (!text) {
                alloy_sb_free(&sb);
                return alloy_error(ALLOY_ERROR_INTERNAL,
                                   "%s: header line %d includes \"%s\", which is not embedded in this build; please "
                                   "report this",
                                   path, line, inc);
            }
            alloy_sb_printf(&sb, "#line 1 \"%s\"\n", inc);
            alloy_sb_append(&sb, text);
            if (text[0] && text[strlen(text) - 1] != '\n') alloy_sb_append(&sb, "\n");
            alloy_sb_printf(&sb, "#line %d \"%s.header\"\n", line + 1, name);
        } else {
            alloy_sb_append_n(&sb, p, n);
        }
        p += n;
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
