/* embedded.h — files compiled into the library as strings (preludes and the
 * catalog's kernels), generated at build time by cmake/embed.cmake. */
#ifndef ALLOY_CORE_EMBEDDED_H
#define ALLOY_CORE_EMBEDDED_H

typedef struct { const char *path; const char *text; } alloy_embedded_file;
extern const alloy_embedded_file alloy_embedded_files[]; /* ends with {NULL, NULL} */

/* The text of an embedded file by its source-tree path, or NULL. */
const char *alloy_embedded(const char *path);

#endif
