/* embedded_lookup.c — finding a file compiled into the library by path. */
#include <string.h>

#include "embedded.h"

const char *alloy_embedded(const char *path) {
    for (const alloy_embedded_file *f = alloy_embedded_files; f->path; f++)
        if (strcmp(f->path, path) == 0) return f->text;
    return NULL;
}
