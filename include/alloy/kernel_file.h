/* alloy/kernel_file.h — kernel files: a body-only kernel and its metadata in
 * one text file (the format of the examples/ folder, documented in
 * examples/README.md):
 *
 *   // free comment lines and blank lines are ignored before `//! body:`
 *   //! name: soft_cap
 *   //! inputs: x cap                  (may be empty: `//! inputs:`)
 *   //! outputs: out
 *   //! template: T=float32 K=8        (optional, repeatable: defaults)
 *   //! ensure_row_contiguous: true    (optional, default true)
 *   //! atomic_outputs: false          (optional, default false)
 *   //! header:                        (optional: the following lines, verbatim,
 *   #include <metal_stdlib>             up to `//! body:` are the header)
 *   //! body:
 *   uint i = thread_position_in_grid.x; (the rest of the file, verbatim)
 *
 * The one parser of the format: the CLI, the tests, the benchmarks, the
 * linter and the Python package all read kernel files through it. Errors
 * are ALLOY_ERROR_INVALID_ARGUMENT (ALLOY_ERROR_IO when the file cannot be
 * read) with "path:line: why" as the message. */
#ifndef ALLOY_KERNEL_FILE_H
#define ALLOY_KERNEL_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "kernel.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ALLOY_KERNEL_FILE_MAX_NAMES 64     /* inputs, and outputs */
#define ALLOY_KERNEL_FILE_MAX_TEMPLATES 16
#define ALLOY_KERNEL_FILE_MAX_BYTES (16L << 20)

typedef struct alloy_kernel_file alloy_kernel_file;

typedef enum alloy_kernel_file_template_kind {
    ALLOY_KERNEL_FILE_TEMPLATE_INT,
    ALLOY_KERNEL_FILE_TEMPLATE_BOOL,
    ALLOY_KERNEL_FILE_TEMPLATE_DTYPE
} alloy_kernel_file_template_kind;

typedef struct alloy_kernel_file_template {
    const char *name;
    alloy_kernel_file_template_kind kind;
    int64_t ivalue;    /* INT; BOOL as 0/1 */
    alloy_dtype dtype; /* DTYPE */
} alloy_kernel_file_template;

/* Reads and parses a kernel file. */
alloy_status alloy_kernel_file_load(const char *path, alloy_kernel_file **out);
/* Parses kernel-file text (`len` bytes; a NUL byte in them is an error).
 * `path` only names the text in messages (NULL: "<kernel file>"). */
alloy_status alloy_kernel_file_parse(const char *text, size_t len, const char *path,
                                     alloy_kernel_file **out);
void alloy_kernel_file_free(alloy_kernel_file *file); /* NULL is fine */

const char *alloy_kernel_file_path(const alloy_kernel_file *file);
const char *alloy_kernel_file_name(const alloy_kernel_file *file);
int alloy_kernel_file_n_inputs(const alloy_kernel_file *file);
const char *const *alloy_kernel_file_inputs(const alloy_kernel_file *file);
int alloy_kernel_file_n_outputs(const alloy_kernel_file *file);
const char *const *alloy_kernel_file_outputs(const alloy_kernel_file *file);
int alloy_kernel_file_ensure_row_contiguous(const alloy_kernel_file *file);
int alloy_kernel_file_atomic_outputs(const alloy_kernel_file *file);
/* The header, or NULL without `//! header:`; its first line's line number
 * in the file (1-based; 0 without a header). */
const char *alloy_kernel_file_header(const alloy_kernel_file *file);
int alloy_kernel_file_header_line(const alloy_kernel_file *file);
/* The body; body line N is file line body_line + N - 1. */
const char *alloy_kernel_file_body(const alloy_kernel_file *file);
int alloy_kernel_file_body_line(const alloy_kernel_file *file);
/* Template defaults, in file order (a later `NAME=` replaces an earlier one
 * in place). The name stays valid until the file is freed or changed. */
int alloy_kernel_file_n_templates(const alloy_kernel_file *file);
alloy_status alloy_kernel_file_template_at(const alloy_kernel_file *file, int index,
                                           alloy_kernel_file_template *out);
/* The template default named `name`: 1 and *out, or 0 when there is none. */
int alloy_kernel_file_find_template(const alloy_kernel_file *file, const char *name,
                                    alloy_kernel_file_template *out);

/* Overrides, as the CLI's flags apply them (the same rules as the file's
 * directives; errors name the value, with no file position):
 *   set_name: a C identifier; set_inputs/set_outputs: a list of names
 *   separated by blanks or commas (outputs: at least one); set_template:
 *   "NAME=VALUE" with VALUE an integer, true/false or a dtype name. */
alloy_status alloy_kernel_file_set_name(alloy_kernel_file *file, const char *name);
alloy_status alloy_kernel_file_set_inputs(alloy_kernel_file *file, const char *names);
alloy_status alloy_kernel_file_set_outputs(alloy_kernel_file *file, const char *names);
alloy_status alloy_kernel_file_set_template(alloy_kernel_file *file, const char *assignment);
void alloy_kernel_file_set_ensure_row_contiguous(alloy_kernel_file *file, int on);
void alloy_kernel_file_set_atomic_outputs(alloy_kernel_file *file, int on);

/* alloy_kernel_new with the file's name, names, body, header and flags. */
alloy_status alloy_kernel_file_new_kernel(const alloy_kernel_file *file, alloy_kernel **out);
/* Adds the file's template defaults (with any overrides) to a launch. */
alloy_status alloy_kernel_file_add_templates(const alloy_kernel_file *file, alloy_launch *launch);

/* 1 if [s, s+n) is a C identifier (the rule every name in a kernel file
 * follows). */
int alloy_is_identifier(const char *s, size_t n);

#ifdef __cplusplus
}
#endif
#endif
