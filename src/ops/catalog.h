/* catalog.h — the catalog's kernels: kernel files under src/ops/<family>/
 * kernels/ (the format of examples/README.md), embedded into the library at
 * build time, parsed by the library's kernel file parser and built into
 * alloy kernels once per process. Ops launch them through the public API
 * like any user kernel. */
#ifndef ALLOY_OPS_CATALOG_H
#define ALLOY_OPS_CATALOG_H

#include "alloy/alloy.h"

/* The kernel of the embedded file `path` (e.g.
 * "src/ops/array/kernels/gather.metal"), built on first use and kept for the
 * life of the process (do not free it). Thread-safe. */
alloy_status alloy_catalog_kernel(const char *path, alloy_kernel **out);

/* Its template defaults (`//! template:`), for a launch. */
alloy_status alloy_catalog_add_templates(const char *path, alloy_launch *launch);

#endif
