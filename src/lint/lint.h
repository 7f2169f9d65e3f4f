/* lint.h — `alloy lint`: static checks of body-only kernels and of the
 * Python code that launches them (private to the library and the CLI).
 *
 * The rules (docs/cli.md has each with an example and the fix):
 *   kernel-definition            error    a whole `kernel void f(...)` as the body
 *   grid-is-threadgroup-count    error    a launch whose grid counts threadgroups
 *   barrier-in-divergent-branch  error    a barrier under a thread-dependent condition
 *   threadgroup-race             warning  threadgroup memory read from another thread
 *                                         without a barrier after the write
 *   output-read-before-write     warning  an output read before any write, no init_value
 *                                         (error when the launch is known to lack it)
 *   unguarded-output-write       warning  a grid rounded up past the data, and a body
 *                                         that writes outputs with no bound check
 *   threadgroup-array-too-small  error    a threadgroup array indexed by the thread's
 *                                         position, smaller than the threadgroup
 *   division-in-loop             perf     integer `/` or `%` by a variable in a loop
 *   atomic-outputs-without-init  error    atomic_outputs without init_value
 *
 * A kernel is checked with what is known of its launches (Python files give
 * grid, threadgroup and init_value; kernel files give none). */
#ifndef ALLOY_LINT_H
#define ALLOY_LINT_H

#include <stddef.h>

#include "alloy/status.h"

typedef enum alloy_lint_level {
    ALLOY_LINT_ERROR,
    ALLOY_LINT_WARNING,
    ALLOY_LINT_PERF,
    ALLOY_LINT_INFO
} alloy_lint_level;

typedef struct alloy_lint_finding {
    const char *rule;
    alloy_lint_level level;
    int line; /* in the file (0: the file as a whole) */
    char message[320];
    char fix[320];
} alloy_lint_finding;

typedef struct alloy_lint_report {
    alloy_lint_finding *v;
    int n, cap;
    int failed; /* out of memory */
} alloy_lint_report;

/* What is known of one launch (Python): each grid/threadgroup entry's value
 * when it is a literal (-1 otherwise), and how the grid was written. */
typedef struct alloy_lint_launch {
    int line;
    long long grid[3], threadgroup[3];
    int grid_divides;  /* an entry computed as ceil(n / t): (n + t - 1) // t, math.ceil(n / t), -(-n // t) */
    int grid_rounds_up; /* an entry rounded up to a multiple: ceil(n / t) * t */
    int has_init_value; /* 1 yes, 0 no, -1 unknown (e.g. **kwargs) */
} alloy_lint_launch;

typedef struct alloy_lint_kernel {
    const char *name;
    const char *body;
    int body_line;           /* file line of body line 1 */
    int flat_lines;          /* the body is a one-line literal with `\n` escapes: every body
                                line is reported at body_line */
    const char *header;      /* may be NULL */
    int header_line;
    const char *const *outputs;
    int n_outputs;
    int atomic_outputs;
    int in_kernel_file;      /* a .metal kernel file: no launch is visible */
    const alloy_lint_launch *launches;
    int n_launches;
} alloy_lint_kernel;

/* Runs every rule on one kernel, appending findings. */
void alloy_lint_kernel_check(const alloy_lint_kernel *k, alloy_lint_report *r);

/* Finds the metal_kernel(...) calls of a Python source and their launches
 * (a small tokenizer, nothing is run) and checks each kernel. Sources it
 * cannot resolve statically (f-strings, names assigned elsewhere) give an
 * info-level note. */
alloy_status alloy_lint_python(const char *text, size_t len, alloy_lint_report *r);

void alloy_lint_add(alloy_lint_report *r, const char *rule, alloy_lint_level level, int line,
                    const char *fix, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void alloy_lint_report_free(alloy_lint_report *r);
const char *alloy_lint_level_name(alloy_lint_level level);

#endif
