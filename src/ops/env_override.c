/* env_override.c — alloy_ops_env_int (env_override.h). */
#include <stdlib.h>

#include "ops/env_override.h"

int64_t alloy_ops_env_int(const char *name, int64_t lo, int64_t hi, int64_t def) {
    const char *e = getenv(name);
    if (!e || !*e) return def;
    char *end = NULL;
    const long long v = strtoll(e, &end, 10);
    return *end == '\0' && v >= lo && v <= hi ? (int64_t)v : def;
}

/* On by default: measured on an H200 (bench/RESULTS.md, twenty-ninth session) the norms' forwards went from
 * 97-98% to 99-102% of copy and their backwards up 1-2 points, the step at B = 16 from 85% to 93%;
 * ALLOY_OPS_OVERLAP=0 launches them as ordinary kernels. */
int alloy_ops_overlap(void) { return (int)alloy_ops_env_int("ALLOY_OPS_OVERLAP", 0, 1, 1); }
