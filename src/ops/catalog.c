/* catalog.c — see catalog.h. A small table of built kernels, filled under a
 * lock on first use; the kernel files themselves are the embedded texts. */
#include <pthread.h>
#include <string.h>

#include "catalog.h"
#include "core/embedded.h"
#include "core/error.h"

enum { CATALOG_MAX = 64 };

typedef struct entry {
    const char *path; /* the embedded table's own string */
    alloy_kernel_file *file;
    alloy_kernel *kernel;
} entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry entries[CATALOG_MAX];
static int n_entries;

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
    if (st == ALLOY_OK) st = alloy_kernel_file_new_kernel(e.file, &e.kernel);
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
