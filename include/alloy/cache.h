/* alloy/cache.h — the on-disk kernel cache.
 *
 * Location: ALLOY_CACHE_DIR, else $XDG_CACHE_HOME/alloy, else ~/.cache/alloy.
 * ALLOY_CACHE=0 disables it (compiled kernels then live in memory only).
 * Entries (compiled kernels, and the records of sources that passed the
 * NVRTC compile check, ALLOY_COMPILE_CHECK=cuda) are written atomically and
 * checksummed; a corrupt entry is detected on load and rebuilt. */
#ifndef ALLOY_CACHE_H
#define ALLOY_CACHE_H

#include <stdint.h>
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cache directory (static storage) or NULL when disabled. */
const char *alloy_cache_dir(void);
int alloy_cache_enabled(void);

/* Number of entries and their total size in bytes. */
alloy_status alloy_cache_stats(int64_t *entries, int64_t *bytes);

/* Deletes every entry of the disk cache (not the in-memory caches). */
alloy_status alloy_cache_clear(void);

#ifdef __cplusplus
}
#endif
#endif
