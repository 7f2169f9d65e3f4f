/* cli.h — helpers shared by the `alloy` subcommands: error reporting with the
 * CLI's exit-code convention, option matching, parsing of dims/shapes/scalars,
 * element conversion between dtypes (for .npy I/O), array printing, and the
 * kernel-file options common to `alloy run` and `alloy compile`.
 *
 * Exit codes: 0 success, 1 error (message from alloy_last_error() or the CLI),
 * 2 usage error. Every message is one "alloy: ..." block on stderr. */
#ifndef ALLOY_TOOLS_CLI_H
#define ALLOY_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "alloy/alloy.h"
#include "alloy/kernel_file.h"

#define CLI_OK 0
#define CLI_ERROR 1
#define CLI_USAGE 2

/* Subcommand entry points (argv[0] is the subcommand name). */
int cmd_info(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_cache(int argc, char **argv);
int cmd_lint(int argc, char **argv);
int cmd_bench(int argc, char **argv);

/* "alloy: <message>" on stderr; return CLI_ERROR / CLI_USAGE. cli_usage adds
 * a hint to run `alloy <cmd> --help`, naming the current command. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_set_command(const char *name); /* for the usage hint */
/* The library's last error (or the status name if it has no message). */
int cli_alloy_error(alloy_status status);

/* Matches option `name` at argv[*i], as "--name VALUE" or "--name=VALUE".
 * Returns 1 with *value set (and *i advanced past a separate value), 0 if
 * argv[*i] is another option, -1 if the value is missing (usage error already
 * printed). */
int cli_opt_value(int argc, char **argv, int *i, const char *name, const char **value);
int cli_is_help(const char *arg); /* "-h" or "--help" */

/* "X[,Y[,Z]]": positive... (zero allowed) 32-bit counts; missing ones are 1. */
int cli_parse_dims(const char *s, uint32_t out[3]);
/* Shape syntax: "1000", "33x29", "4x8x16" (dims joined by 'x'); "scalar" is 0-d. */
int cli_parse_shape(const char *s, int *ndim, int64_t *shape);
/* Formats a shape in that syntax. */
void cli_format_shape(char *buf, size_t len, int ndim, const int64_t *shape);

/* A scalar literal: a number (decimal, hex, inf, nan) or true/false, stored
 * as `dtype` into value (alloy_dtype_size bytes). Returns 0 or -1 (not a
 * number, out of range for an integer dtype). */
int cli_parse_scalar(const char *s, alloy_dtype dtype, void *value);
/* 1 if s is a complete number literal or true/false. */
int cli_looks_numeric(const char *s);

/* Element conversion (as NumPy's astype: floats round to nearest even,
 * float -> int truncates toward zero and saturates, NaN -> 0, int -> int wraps). */
void cli_convert(alloy_dtype from, const void *src, alloy_dtype to, void *dst, int64_t n);
double cli_to_double(alloy_dtype dtype, const void *element);

/* "name dtype shape: v0 v1 ... (N elements)" with at most `max` values. */
void cli_print_array(FILE *f, const char *name, alloy_dtype dtype, int ndim,
                     const int64_t *shape, const void *data, int64_t max);

/* ---- kernel-file options shared by run and compile --------------------- */

#define CLI_MAX_TEMPLATES 64

typedef struct cli_kernel_opts {
    const char *path;    /* KERNEL.metal */
    const char *name;    /* --name */
    const char *inputs;  /* --inputs a,b */
    const char *outputs; /* --outputs c */
    const char *templates[CLI_MAX_TEMPLATES];
    int n_templates;
    int no_contiguous;  /* --no-contiguous */
    int atomic_outputs; /* --atomic-outputs */
    const char *device; /* --device */
    int verbose;        /* --verbose */
} cli_kernel_opts;

/* Consumes one kernel option at argv[*i]: 1 consumed, 0 not a kernel option,
 * -1 usage error (printed). */
int cli_kernel_opt(cli_kernel_opts *o, int argc, char **argv, int *i);

/* Loads the file (*file: free it with alloy_kernel_file_free, also after a
 * failure), applies the overrides and template arguments, opens the device,
 * creates the kernel and adds the templates to `launch`. Returns CLI_OK or an
 * exit code (message printed). */
int cli_kernel_setup(const cli_kernel_opts *o, alloy_kernel_file **file, alloy_device **device,
                     alloy_kernel **kernel, alloy_launch *launch);

/* Index of `name` in names[0..n), or -1. */
int cli_find_name(const char *const *names, int n, const char *name);
/* "a, b, c" (or "(none)") into buf. */
void cli_join_names(char *buf, size_t len, const char *const *names, int n);
/* CLI_OK if the kernel has an input (is_output 0) or output (1) called
 * `given`; else a usage error listing the names it has. */
int cli_require_name(const alloy_kernel_file *file, int is_output, const char *given);

#endif
