/* disk_cache.h — the on-disk cache of compiled kernels.
 *
 * Backends store one file per entry: <dir>/<backend>/<key><ext>. A file is
 * written under a temporary name, sealed with a checksum trailer (SHA-256 of
 * the content; ELF loaders and the CUDA driver ignore trailing bytes only if
 * the backend strips it — see alloy_disk_cache_read), then renamed into place,
 * so readers never see a partial entry and a corrupt one is detected. */
#ifndef ALLOY_CORE_DISK_CACHE_H
#define ALLOY_CORE_DISK_CACHE_H

#include <stddef.h>
#include "alloy/status.h"

#define ALLOY_CACHE_TRAILER_SIZE 48 /* "ALLOYSUM" + 32-byte digest + 8-byte length */

/* Directory for a backend's entries, created on demand; NULL when the cache
 * is disabled or cannot be created (a warning is printed once). Static
 * storage per backend name. */
const char *alloy_disk_cache_backend_dir(const char *backend);

/* Full path of an entry (malloc'd), or NULL when the cache is disabled. */
char *alloy_disk_cache_path(const char *backend, const char *key, const char *ext);

/* Appends the checksum trailer to the file at tmp_path and renames it to
 * final_path (atomic replace). */
alloy_status alloy_disk_cache_seal(const char *tmp_path, const char *final_path);

/* Verifies the entry at `path`. Returns ALLOY_OK when intact, with the length
 * of the payload (without trailer) in *payload_len; ALLOY_ERROR_IO if missing;
 * ALLOY_ERROR_INTERNAL-free: a corrupt entry returns ALLOY_ERROR_IO with
 * *corrupt = 1 (and the caller rebuilds it). */
alloy_status alloy_disk_cache_verify(const char *path, size_t *payload_len, int *corrupt);

/* Reads a verified entry's payload into a malloc'd buffer. */
alloy_status alloy_disk_cache_read(const char *path, void **data, size_t *len, int *corrupt);

/* A unique temporary path next to final_path (malloc'd). */
char *alloy_disk_cache_temp_path(const char *final_path);

#endif
