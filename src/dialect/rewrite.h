/* rewrite.h — private interfaces between the files of the dialect module
 * (scanner options, the MSL-to-C++ rewrite, the synchronisation rule, the
 * attribute table's types). Not for use outside src/dialect/. */
#ifndef ALLOY_DIALECT_REWRITE_H
#define ALLOY_DIALECT_REWRITE_H

#include "core/strbuf.h"
#include "dialect/dialect.h"

/* Scanner options. */
#define ALLOY_SCAN_NO_PREPROC 1u /* '#' is punctuation (the inside of a directive) */
#define ALLOY_SCAN_LENIENT 2u    /* unterminated comments/strings end at the end of
                                    the text/line instead of failing */

/* alloy_scan on the first `len` bytes of `src` with options. */
alloy_status alloy_scan_ex(const char *src, int len, const char *what, unsigned flags,
                           alloy_token **tokens, int *count);

/* Calls `fn` for every identifier of `src` (len bytes), including those inside
 * preprocessor directives, with the token after it on the same logical level
 * (`next`, NULL at the end). Lenient: never fails except out of memory. */
typedef void (*alloy_ident_fn)(const char *ident, int len, const char *next, int next_len,
                               void *user);
alloy_status alloy_for_each_ident(const char *src, int len, alloy_ident_fn fn, void *user);

#define ALLOY_REWRITE_CPU_DEBUG 4u /* checked device pointers and threadgroup arrays
                                      (cpu_debug.h); the scanner ignores it */
#define ALLOY_REWRITE_TENSOR 8u    /* `t[i, j]` (MSL 4 tensor element access) becomes
                                      `t[alloy_md(i, j)]`; the scanner ignores it */

/* Appends the C++ form of the MSL text `src` to `out`, keeping every newline
 * where it was. `what` names the text in messages ("the body of kernel 'k'").
 * flags: 0 or a mix of ALLOY_REWRITE_CPU_DEBUG and ALLOY_REWRITE_TENSOR. */
alloy_status alloy_rewrite_msl(const char *src, const char *what, unsigned flags, alloy_strbuf *out);

/* 1 when `src` uses a barrier, a SIMD or quad operation or simdgroup
 * matrices (the rule of alloy_analyze_source). NULL is 0. */
int alloy_source_uses_sync(const char *src);

/* For one identifier (and the token after it): 1 for a barrier
 * (threadgroup_barrier, simdgroup_barrier), 2 for another synchronising
 * operation of the rule above, 0 otherwise. */
int alloy_sync_kind(const char *ident, int len, const char *next, int next_len);

/* 1 when attribute `index` is a uint3, 0 when a uint. */
int alloy_attribute_is_vector(int index);

#endif
