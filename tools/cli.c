/* cli.c — shared helpers of the `alloy` command-line tool (see cli.h): one
 * place for the error/exit-code convention, the option and value syntaxes,
 * dtype conversions for .npy I/O and the kernel-file setup that `run` and
 * `compile` share, so the subcommands stay short and consistent. */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *cli_command = NULL;

void cli_set_command(const char *name) { cli_command = name; }

static void cli_vmsg(const char *fmt, va_list ap) {
    fputs("alloy: ", stderr);
    vfprintf(stderr, fmt, ap);
    size_t n = strlen(fmt);
    if (!n || fmt[n - 1] != '\n') fputc('\n', stderr);
}

int cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cli_vmsg(fmt, ap);
    va_end(ap);
    return CLI_ERROR;
}

int cli_usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cli_vmsg(fmt, ap);
    va_end(ap);
    fprintf(stderr, "(see `alloy %s--help`)\n", cli_command ? cli_command : "");
    return CLI_USAGE;
}

int cli_alloy_error(alloy_status status) {
    const char *msg = alloy_last_error();
    if (!msg || !*msg) msg = alloy_status_name(status);
    fprintf(stderr, "alloy: %s", msg);
    size_t n = strlen(msg);
    if (!n || msg[n - 1] != '\n') fputc('\n', stderr);
    return CLI_ERROR;
}

int cli_is_help(const char *arg) { return !strcmp(arg, "-h") || !strcmp(arg, "--help"); }

int cli_opt_value(int argc, char **argv, int *i, const char *name, const char **value) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n)) return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != '\0') return 0;
    if (*i + 1 >= argc) {
        cli_usage("option %s needs a value", name);
        return -1;
    }
    *value = argv[++*i];
    return 1;
}

/* ---- dims, shapes ------------------------------------------------------- */

static int parse_u64(const char **p, uint64_t *out) {
    const char *s = *p;
    if (*s < '0' || *s > '9') return -1;
    uint64_t v = 0;
    while (*s >= '0' && *s <= '9') {
        if (v > (UINT64_MAX - 9) / 10) return -1;
        v = v * 10 + (uint64_t)(*s++ - '0');
    }
    *p = s;
    *out = v;
    return 0;
}

int cli_parse_dims(const char *s, uint32_t out[3]) {
    out[0] = out[1] = out[2] = 1;
    for (int k = 0; k < 3; k++) {
        uint64_t v;
        if (parse_u64(&s, &v) || v > UINT32_MAX) return -1;
        out[k] = (uint32_t)v;
        if (*s == '\0') return 0;
        if (*s != ',') return -1;
        s++;
    }
    return -1;
}

int cli_parse_shape(const char *s, int *ndim, int64_t *shape) {
    *ndim = 0;
    if (!strcmp(s, "scalar")) return 0;
    for (;;) {
        uint64_t v;
        if (*ndim >= ALLOY_MAX_NDIM || parse_u64(&s, &v) || v > (uint64_t)INT64_MAX) return -1;
        shape[(*ndim)++] = (int64_t)v;
        if (*s == '\0') return 0;
        if (*s != 'x' && *s != 'X') return -1;
        s++;
    }
}

void cli_format_shape(char *buf, size_t len, int ndim, const int64_t *shape) {
    if (ndim == 0) {
        snprintf(buf, len, "scalar");
        return;
    }
    size_t n = 0;
    buf[0] = '\0';
    for (int d = 0; d < ndim && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, "%s%" PRId64, d ? "x" : "", shape[d]);
}

/* ---- small floats (float16, bfloat16) ----------------------------------- */

/* Rounds x to nearest-even into an IEEE-style 16-bit format with `mbits`
 * mantissa bits and exponent bias `bias` (half: 10/15, bfloat16: 7/127). */
static uint16_t encode_small(double x, int mbits, int bias) {
    int ebits = 15 - mbits;
    uint16_t sign = signbit(x) ? 0x8000u : 0u;
    uint16_t inf = (uint16_t)(((1u << ebits) - 1u) << mbits);
    if (isnan(x)) return (uint16_t)(sign | inf | (1u << (mbits - 1)));
    double a = fabs(x);
    /* Midpoint between the largest finite value and 2^(bias+1): ties go to
     * the even neighbour, which is infinity. */
    if (a >= ldexp(2.0 - ldexp(1.0, -mbits - 1), bias)) return (uint16_t)(sign | inf);
    int emin = 1 - bias;
    if (a < ldexp(1.0, emin)) /* subnormal (a carry into the min normal is exact) */
        return (uint16_t)(sign | (uint16_t)rint(ldexp(a, mbits - emin)));
    int e;
    frexp(a, &e);
    int E = e - 1;
    double q = rint((ldexp(a, -E) - 1.0) * ldexp(1.0, mbits));
    if (q >= ldexp(1.0, mbits)) {
        q = 0;
        E++;
    }
    return (uint16_t)(sign | ((unsigned)(E + bias) << mbits) | (unsigned)q);
}

static double decode_small(uint16_t h, int mbits, int bias) {
    int ebits = 15 - mbits;
    unsigned emask = (1u << ebits) - 1u, mmask = (1u << mbits) - 1u;
    unsigned e = (h >> mbits) & emask, f = h & mmask;
    double v;
    if (e == 0) v = ldexp((double)f, 1 - bias - mbits);
    else if (e == emask) v = f ? NAN : INFINITY;
    else v = ldexp((double)(f | (1u << mbits)), (int)e - bias - mbits);
    return (h & 0x8000u) ? -v : v;
}

/* ---- element conversion -------------------------------------------------- */

static int is_integer(alloy_dtype d) { return d != ALLOY_BOOL && !alloy_dtype_is_float(d); }

double cli_to_double(alloy_dtype dtype, const void *p) {
    switch (dtype) {
    case ALLOY_BOOL: return *(const unsigned char *)p ? 1.0 : 0.0;
    case ALLOY_INT8: return *(const int8_t *)p;
    case ALLOY_UINT8: return *(const uint8_t *)p;
    case ALLOY_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
    case ALLOY_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case ALLOY_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case ALLOY_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case ALLOY_INT64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case ALLOY_UINT64: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
    case ALLOY_FLOAT16: { uint16_t v; memcpy(&v, p, 2); return decode_small(v, 10, 15); }
    case ALLOY_BFLOAT16: { uint16_t v; memcpy(&v, p, 2); return decode_small(v, 7, 127); }
    case ALLOY_FLOAT32: { float v; memcpy(&v, p, 4); return v; }
    case ALLOY_FLOAT64: { double v; memcpy(&v, p, 8); return v; }
    default: return 0.0;
    }
}

/* Integer element as a 64-bit pattern (sign-extended for signed types). */
static uint64_t int_bits(alloy_dtype d, const void *p) {
    switch (d) {
    case ALLOY_INT8: return (uint64_t)(int64_t)*(const int8_t *)p;
    case ALLOY_UINT8: return *(const uint8_t *)p;
    case ALLOY_INT16: { int16_t v; memcpy(&v, p, 2); return (uint64_t)(int64_t)v; }
    case ALLOY_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case ALLOY_INT32: { int32_t v; memcpy(&v, p, 4); return (uint64_t)(int64_t)v; }
    case ALLOY_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
    }
}

/* Stores the low bits of v (two's complement wrap). */
static void store_int_bits(alloy_dtype d, void *p, uint64_t v) {
    size_t n = alloy_dtype_size(d);
    uint8_t b8 = (uint8_t)v;
    uint16_t b16 = (uint16_t)v;
    uint32_t b32 = (uint32_t)v;
    if (n == 1) memcpy(p, &b8, 1);
    else if (n == 2) memcpy(p, &b16, 2);
    else if (n == 4) memcpy(p, &b32, 4);
    else memcpy(p, &v, 8);
}

static void store_double(alloy_dtype d, void *p, double x) {
    switch (d) {
    case ALLOY_BOOL: *(unsigned char *)p = x != 0.0; return;
    case ALLOY_FLOAT16: { uint16_t v = encode_small(x, 10, 15); memcpy(p, &v, 2); return; }
    case ALLOY_BFLOAT16: { uint16_t v = encode_small(x, 7, 127); memcpy(p, &v, 2); return; }
    case ALLOY_FLOAT32: { float v = (float)x; memcpy(p, &v, 4); return; }
    case ALLOY_FLOAT64: memcpy(p, &x, 8); return;
    default: break;
    }
    /* float -> integer: truncate toward zero, saturate, NaN -> 0 */
    int bits = (int)alloy_dtype_size(d) * 8;
    int is_signed = d == ALLOY_INT8 || d == ALLOY_INT16 || d == ALLOY_INT32 || d == ALLOY_INT64;
    double t = isnan(x) ? 0.0 : trunc(x);
    uint64_t v;
    if (is_signed) {
        double lo = -ldexp(1.0, bits - 1), hi = ldexp(1.0, bits - 1);
        int64_t iv = t < lo ? (int64_t)lo : t >= hi ? (bits == 64 ? INT64_MAX : (int64_t)hi - 1)
                                                    : (int64_t)t;
        v = (uint64_t)iv;
    } else {
        double hi = ldexp(1.0, bits);
        v = t <= 0 ? 0 : t >= hi ? (bits == 64 ? UINT64_MAX : (uint64_t)hi - 1) : (uint64_t)t;
    }
    store_int_bits(d, p, v);
}

void cli_convert(alloy_dtype from, const void *src, alloy_dtype to, void *dst, int64_t n) {
    size_t fs = alloy_dtype_size(from), ts = alloy_dtype_size(to);
    const unsigned char *s = (const unsigned char *)src;
    unsigned char *d = (unsigned char *)dst;
    if (from == to) {
        memcpy(dst, src, (size_t)n * fs);
        return;
    }
    for (int64_t i = 0; i < n; i++, s += fs, d += ts) {
        if (is_integer(from) && is_integer(to)) store_int_bits(to, d, int_bits(from, s));
        else if (from == ALLOY_BOOL && is_integer(to)) store_int_bits(to, d, *s ? 1u : 0u);
        else if (is_integer(from) && to == ALLOY_BOOL) *d = int_bits(from, s) != 0;
        else store_double(to, d, cli_to_double(from, s));
    }
}

/* ---- scalars -------------------------------------------------------------- */

int cli_looks_numeric(const char *s) {
    if (!strcmp(s, "true") || !strcmp(s, "false")) return 1;
    if (!*s) return 0;
    char *end = NULL;
    errno = 0;
    (void)strtod(s, &end);
    return end && end != s && *end == '\0';
}

int cli_parse_scalar(const char *s, alloy_dtype dtype, void *value) {
    if (!strcmp(s, "true") || !strcmp(s, "false")) {
        double v = s[0] == 't' ? 1.0 : 0.0;
        store_double(dtype, value, v);
        return 0;
    }
    if (is_integer(dtype)) {
        int bits = (int)alloy_dtype_size(dtype) * 8;
        int is_signed = dtype == ALLOY_INT8 || dtype == ALLOY_INT16 || dtype == ALLOY_INT32 ||
                        dtype == ALLOY_INT64;
        char *end = NULL;
        errno = 0;
        if (is_signed) {
            long long v = strtoll(s, &end, 0);
            if (end && end != s && *end == '\0') {
                if (errno) return -1;
                if (bits < 64 && (v < -(1LL << (bits - 1)) || v >= (1LL << (bits - 1)))) return -1;
                store_int_bits(dtype, value, (uint64_t)v);
                return 0;
            }
        } else if (s[0] != '-') {
            unsigned long long v = strtoull(s, &end, 0);
            if (end && end != s && *end == '\0') {
                if (errno) return -1;
                if (bits < 64 && v >= (1ULL << bits)) return -1;
                store_int_bits(dtype, value, (uint64_t)v);
                return 0;
            }
        }
        /* "3.0" for an integer dtype: accepted when integral and in range. */
        end = NULL;
        double d = strtod(s, &end);
        if (!end || end == s || *end || d != trunc(d)) return -1;
        double lo = is_signed ? -ldexp(1.0, bits - 1) : 0.0;
        double hi = is_signed ? ldexp(1.0, bits - 1) : ldexp(1.0, bits);
        if (d < lo || d >= hi) return -1;
        store_double(dtype, value, d);
        return 0;
    }
    char *end = NULL;
    double d = strtod(s, &end);
    if (!end || end == s || *end) return -1;
    store_double(dtype, value, d);
    return 0;
}

/* ---- printing ------------------------------------------------------------- */

static void print_element(FILE *f, alloy_dtype d, const void *p) {
    switch (d) {
    case ALLOY_BOOL: fputs(*(const unsigned char *)p ? "true" : "false", f); return;
    case ALLOY_INT8: case ALLOY_INT16: case ALLOY_INT32: case ALLOY_INT64:
        fprintf(f, "%" PRId64, (int64_t)int_bits(d, p));
        return;
    case ALLOY_UINT8: case ALLOY_UINT16: case ALLOY_UINT32: case ALLOY_UINT64:
        fprintf(f, "%" PRIu64, int_bits(d, p));
        return;
    case ALLOY_FLOAT16: case ALLOY_BFLOAT16: fprintf(f, "%.5g", cli_to_double(d, p)); return;
    case ALLOY_FLOAT32: fprintf(f, "%.9g", cli_to_double(d, p)); return;
    default: fprintf(f, "%.17g", cli_to_double(d, p)); return;
    }
}

void cli_print_array(FILE *f, const char *name, alloy_dtype dtype, int ndim,
                     const int64_t *shape, const void *data, int64_t max) {
    char sh[256];
    cli_format_shape(sh, sizeof sh, ndim, shape);
    int64_t size = 1;
    for (int d = 0; d < ndim; d++) size *= shape[d];
    fprintf(f, "%s %s %s:", name, alloy_dtype_name(dtype), sh);
    size_t es = alloy_dtype_size(dtype);
    for (int64_t i = 0; i < size && i < max; i++) {
        fputc(' ', f);
        print_element(f, dtype, (const unsigned char *)data + (size_t)i * es);
    }
    if (size > max) fprintf(f, " ... (%" PRId64 " elements)", size);
    fputc('\n', f);
}

/* ---- kernel options ------------------------------------------------------- */

int cli_kernel_opt(cli_kernel_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *v = NULL;
    int r;
    if ((r = cli_opt_value(argc, argv, i, "--name", &o->name))) return r;
    if ((r = cli_opt_value(argc, argv, i, "--inputs", &o->inputs))) return r;
    if ((r = cli_opt_value(argc, argv, i, "--outputs", &o->outputs))) return r;
    if ((r = cli_opt_value(argc, argv, i, "--device", &o->device))) return r;
    if ((r = cli_opt_value(argc, argv, i, "--template", &v))) {
        if (r < 0) return r;
        if (o->n_templates >= CLI_MAX_TEMPLATES) {
            cli_usage("more than %d --template arguments", CLI_MAX_TEMPLATES);
            return -1;
        }
        o->templates[o->n_templates++] = v;
        return 1;
    }
    if (!strcmp(a, "--no-contiguous")) { o->no_contiguous = 1; return 1; }
    if (!strcmp(a, "--atomic-outputs")) { o->atomic_outputs = 1; return 1; }
    if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) { o->verbose = 1; return 1; }
    return 0;
}

/* The message of the last alloy error without the "path: " the kernel file
 * parser puts in front (an override has no position in the file). */
static const char *override_why(const alloy_kernel_file *f) {
    const char *err = alloy_last_error(), *path = alloy_kernel_file_path(f);
    size_t pl = strlen(path);
    return !strncmp(err, path, pl) && !strncmp(err + pl, ": ", 2) ? err + pl + 2 : err;
}

int cli_kernel_setup(const cli_kernel_opts *o, alloy_kernel_file **file, alloy_device **device,
                     alloy_kernel **kernel, alloy_launch *launch) {
    alloy_status st;
    *kernel = NULL;
    if (alloy_kernel_file_load(o->path, file) != ALLOY_OK) return cli_error("%s", alloy_last_error());
    alloy_kernel_file *f = *file;
    if (o->name && alloy_kernel_file_set_name(f, o->name) != ALLOY_OK)
        return cli_usage("--name \"%s\" is not a C identifier", o->name);
    if (o->inputs && alloy_kernel_file_set_inputs(f, o->inputs) != ALLOY_OK)
        return cli_usage("--inputs \"%s\": %s", o->inputs, alloy_last_error());
    if (o->outputs && alloy_kernel_file_set_outputs(f, o->outputs) != ALLOY_OK)
        return cli_usage("--outputs \"%s\": %s", o->outputs, alloy_last_error());
    for (int k = 0; k < o->n_templates; k++)
        if (alloy_kernel_file_set_template(f, o->templates[k]) != ALLOY_OK)
            return cli_usage("--template: %s", override_why(f));
    if (o->no_contiguous) alloy_kernel_file_set_ensure_row_contiguous(f, 0);
    if (o->atomic_outputs) alloy_kernel_file_set_atomic_outputs(f, 1);

    if ((st = alloy_device_get(o->device ? o->device : "auto", device)) != ALLOY_OK)
        return cli_alloy_error(st);
    if ((st = alloy_kernel_file_new_kernel(f, kernel)) != ALLOY_OK) return cli_alloy_error(st);
    if ((st = alloy_kernel_file_add_templates(f, launch)) != ALLOY_OK) return cli_alloy_error(st);
    if (o->verbose && (st = alloy_launch_set_verbose(launch, 1)) != ALLOY_OK)
        return cli_alloy_error(st);
    return CLI_OK;
}

int cli_find_name(const char *const *names, int n, const char *name) {
    for (int k = 0; k < n; k++)
        if (!strcmp(names[k], name)) return k;
    return -1;
}

void cli_join_names(char *buf, size_t len, const char *const *names, int n) {
    size_t used = 0;
    buf[0] = '\0';
    if (n == 0) {
        snprintf(buf, len, "(none)");
        return;
    }
    for (int k = 0; k < n && used < len; k++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", k ? ", " : "", names[k]);
}

int cli_require_name(const alloy_kernel_file *f, int is_output, const char *given) {
    const char *const *names = is_output ? alloy_kernel_file_outputs(f) : alloy_kernel_file_inputs(f);
    int n = is_output ? alloy_kernel_file_n_outputs(f) : alloy_kernel_file_n_inputs(f);
    if (cli_find_name(names, n, given) >= 0) return CLI_OK;
    char list[1024];
    cli_join_names(list, sizeof list, names, n);
    return cli_usage("kernel %s has no %s \"%s\" (its %ss: %s)", alloy_kernel_file_name(f),
                     is_output ? "output" : "input", given, is_output ? "output" : "input", list);
}
