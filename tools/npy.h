/* npy.h — reading and writing NumPy .npy files for the `alloy` CLI.
 *
 * Why: `alloy run` takes its inputs from .npy files and writes its outputs as
 * .npy, so that kernels can be fed from and checked against NumPy directly.
 *
 * Supported: format versions 1.0, 2.0 and 3.0; little-endian (or
 * byte-order-free) dtypes |b1 |i1 |u1 <i2 <u2 <i4 <u4 <i8 <u8 <f2 <f4 <f8
 * ('=' native order is accepted too: alloy only runs on little-endian hosts);
 * 0 to ALLOY_MAX_NDIM dimensions; fortran_order True (the data is copied into
 * C order on reading). Rejected with a clear message: big-endian data,
 * structured/void/object/string dtypes (NumPy has no bfloat16: ml_dtypes'
 * bfloat16 appears as a 2-byte void type and is rejected, see docs/cli.md),
 * truncated files. npy_write never writes bfloat16 (callers widen it to
 * float32 first). */
#ifndef ALLOY_TOOLS_NPY_H
#define ALLOY_TOOLS_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "alloy/alloy.h"

typedef struct npy_array {
    alloy_dtype dtype;
    int ndim;
    int64_t shape[ALLOY_MAX_NDIM];
    int64_t size;  /* number of elements */
    size_t nbytes; /* size * dtype size */
    void *data;    /* malloc'd, row-major (C order); may be non-NULL when nbytes is 0 */
} npy_array;

/* Reads `path`. Returns 0, or -1 with "path: why" in err. */
int npy_read(const char *path, npy_array *out, char *err, size_t errlen);

/* Parses a whole .npy image held in memory (`name` only labels messages). */
int npy_parse(const void *bytes, size_t len, const char *name, npy_array *out, char *err,
              size_t errlen);

/* Writes row-major data as a version 1.0 .npy file (2.0 if the header would
 * not fit). bfloat16 is refused (-1 with a message). Returns 0 or -1. */
int npy_write(const char *path, alloy_dtype dtype, int ndim, const int64_t *shape,
              const void *data, char *err, size_t errlen);

/* The descr string NumPy writes for a dtype ("<f4"), or NULL for bfloat16. */
const char *npy_descr(alloy_dtype dtype);

void npy_free(npy_array *a); /* safe on a zeroed or freed struct */

#endif
