/* regions.h — barrier regions as loops (regions.c): the CPU form of a body
 * whose barriers sit in group-uniform control flow. Private to src/dialect/. */
#ifndef ALLOY_DIALECT_REGIONS_H
#define ALLOY_DIALECT_REGIONS_H

#include "core/strbuf.h"

typedef struct alloy_regions_ctx {
    /* names the body sees whose values are the same for every thread of a
     * group (scalar inputs, shapes, strides, ranks, launch constants,
     * template arguments, group-wide attributes) */
    const char *const *uniform_names;
    int n_uniform;
    /* attributes that differ per thread (declared by thread_prologue) */
    const char *const *thread_names;
    int n_thread;
    /* declarations at the start of every region's thread loop body: the
     * per-thread attributes from alloy_lx/ly/lz */
    const char *thread_prologue;
    const char *header;         /* may be NULL: its identifiers may write arguments */
    const char *body_file;      /* `#line` file name of the body */
    const char *generated_file; /* `#line` file name of generated lines */
    int first_line;             /* the generated file's line the output starts on */
} alloy_regions_ctx;

/* `body` is the rewritten (C++) body of a kernel. When
 * every barrier sits in group-uniform control flow and the body holds no
 * other synchronising operation, appends the statements of the group
 * function (they expect alloy_s0/s1/s2, alloy_n, ALLOY_THREAD_LOOP and the
 * group-wide names in scope) and returns 1 (a body without barriers is one
 * region). Returns 0 (nothing appended)
 * when the body keeps the fiber path, -1 when out of memory. */
int alloy_regions_emit(const char *body, const alloy_regions_ctx *ctx, alloy_strbuf *out);

#endif
