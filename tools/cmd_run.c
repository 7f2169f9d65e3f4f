/* cmd_run.c — `alloy run KERNEL.metal ...`: runs a body-only kernel file on
 * .npy inputs (or scalars given on the command line) and writes its outputs
 * as .npy, so a kernel can be tried and checked from a shell or a NumPy
 * script without writing any C. Everything goes through the public API. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "npy.h"

static const char run_usage[] =
    "usage: alloy run KERNEL.metal [options]\n"
    "\n"
    "  --input NAME=FILE.npy         an input from a .npy file (its dtype and shape)\n"
    "  --input NAME:DTYPE=FILE.npy   ... converted to DTYPE (e.g. float32 data -> bfloat16)\n"
    "  --input NAME=NUMBER[:DTYPE]   a scalar (0-d array), float32 unless DTYPE is given;\n"
    "                                true/false are bool scalars\n"
    "  --output NAME:DTYPE:SHAPE=FILE.npy\n"
    "                                an output: dtype and shape are required (NAME:SHAPE\n"
    "                                means float32); SHAPE is 1000, 33x29, 4x8x16 or scalar;\n"
    "                                =FILE may be left out with --print. bfloat16 outputs\n"
    "                                are written as float32 .npy (exact; .npy has no bfloat16)\n"
    "  --grid X[,Y[,Z]]              threads per dimension (required; Metal dispatchThreads)\n"
    "  --threadgroup X[,Y[,Z]]       threadgroup size (default min(256, X),1,1)\n"
    "  --template NAME=VALUE         template argument: an integer, true/false or a dtype\n"
    "                                (repeatable; overrides the file's //! template:)\n"
    "  --init-value V                fill the outputs with V before the launch\n"
    "  --device cpu|cuda|cuda:N|auto device to run on (default auto; ALLOY_DEVICE)\n"
    "  --name N --inputs a,b --outputs c\n"
    "                                override the file's //! name/inputs/outputs\n"
    "  --no-contiguous               bind strided inputs as they are (body uses _strides)\n"
    "  --atomic-outputs              outputs are atomic<T>\n"
    "  --verbose, -v                 print the generated source and the launch\n"
    "  --print[=N]                   print the first N (default 10, 0 = all) elements of\n"
    "                                every output to stdout\n"
    "\n"
    "Every input and output the kernel names must be given exactly once.\n"
    "example:\n"
    "  alloy run examples/soft_cap.metal --input x=x.npy --input cap=15 \\\n"
    "      --output out:float32:1000=out.npy --grid 1000 --threadgroup 256\n";

#define RUN_MAX_ARGS 64

typedef struct input_spec {
    char name[64];
    int has_dtype;
    alloy_dtype dtype;
    int is_scalar;
    char scalar[128]; /* the number, without a :DTYPE suffix */
    const char *file;
} input_spec;

typedef struct output_spec {
    char name[64];
    alloy_dtype dtype;
    int ndim;
    int64_t shape[ALLOY_MAX_NDIM];
    const char *file; /* NULL: print only */
} output_spec;

/* Copies the NAME part of "NAME[:...]" (up to `end`) into buf; -1 if not an identifier. */
static int take_name(const char *s, const char *end, char *buf, size_t len) {
    size_t n = (size_t)(end - s);
    if (n == 0 || n >= len || !alloy_is_identifier(s, n)) return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return 0;
}

static int parse_input_spec(const char *spec, input_spec *in) {
    memset(in, 0, sizeof *in);
    const char *eq = strchr(spec, '=');
    if (!eq || !eq[1])
        return cli_usage("--input \"%s\": expected NAME=FILE.npy or NAME=NUMBER[:DTYPE]", spec);
    const char *colon = memchr(spec, ':', (size_t)(eq - spec));
    if (take_name(spec, colon ? colon : eq, in->name, sizeof in->name))
        return cli_usage("--input \"%s\": the name before '=' is not a C identifier", spec);
    if (colon) {
        char dt[32];
        size_t n = (size_t)(eq - colon - 1);
        if (n == 0 || n >= sizeof dt) return cli_usage("--input \"%s\": bad dtype", spec);
        memcpy(dt, colon + 1, n);
        dt[n] = '\0';
        if (alloy_dtype_parse(dt, &in->dtype) != ALLOY_OK)
            return cli_usage("--input \"%s\": unknown dtype \"%s\"", spec, dt);
        in->has_dtype = 1;
    }
    const char *value = eq + 1;
    /* NUMBER or NUMBER:DTYPE is a scalar; anything else is a file name. */
    const char *last = strrchr(value, ':');
    if (cli_looks_numeric(value)) {
        if (strlen(value) >= sizeof in->scalar) return cli_usage("--input \"%s\": number too long", spec);
        strcpy(in->scalar, value);
        in->is_scalar = 1;
    } else if (last && (size_t)(last - value) < sizeof in->scalar) {
        char num[128];
        memcpy(num, value, (size_t)(last - value));
        num[last - value] = '\0';
        alloy_dtype dt;
        if (cli_looks_numeric(num) && alloy_dtype_parse(last + 1, &dt) == ALLOY_OK) {
            if (in->has_dtype && dt != in->dtype)
                return cli_usage("--input \"%s\": two different dtypes", spec);
            strcpy(in->scalar, num);
            in->dtype = dt;
            in->has_dtype = 1;
            in->is_scalar = 1;
        }
    }
    if (!in->is_scalar) {
        /* "abc:int32" that is no file: a mistyped number, not a missing file. */
        alloy_dtype dt;
        if (last && access(value, F_OK) != 0 && alloy_dtype_parse(last + 1, &dt) == ALLOY_OK)
            return cli_usage("--input \"%s\": \"%.*s\" is not a number (nor is \"%s\" a file)", spec,
                             (int)(last - value), value, value);
        in->file = value;
    }
    if (in->is_scalar && !in->has_dtype)
        in->dtype = (!strcmp(in->scalar, "true") || !strcmp(in->scalar, "false")) ? ALLOY_BOOL
                                                                                   : ALLOY_FLOAT32;
    return CLI_OK;
}

static int parse_output_spec(const char *spec, output_spec *out) {
    memset(out, 0, sizeof *out);
    out->dtype = ALLOY_FLOAT32;
    const char *eq = strchr(spec, '=');
    const char *head_end = eq ? eq : spec + strlen(spec);
    if (eq) {
        if (!eq[1]) return cli_usage("--output \"%s\": empty file name after '='", spec);
        out->file = eq + 1;
    }
    char head[256];
    size_t hn = (size_t)(head_end - spec);
    if (hn >= sizeof head) return cli_usage("--output \"%s\": too long", spec);
    memcpy(head, spec, hn);
    head[hn] = '\0';
    char *c1 = strchr(head, ':');
    if (take_name(head, c1 ? c1 : head + hn, out->name, sizeof out->name))
        return cli_usage("--output \"%s\": the name is not a C identifier", spec);
    const char *shape_text = NULL;
    if (c1) {
        char *c2 = strchr(c1 + 1, ':');
        if (c2) {
            *c2 = '\0';
            shape_text = c2 + 1;
            if (alloy_dtype_parse(c1 + 1, &out->dtype) != ALLOY_OK)
                return cli_usage("--output \"%s\": unknown dtype \"%s\"", spec, c1 + 1);
        } else if (alloy_dtype_parse(c1 + 1, &out->dtype) != ALLOY_OK) {
            shape_text = c1 + 1; /* NAME:SHAPE (float32) */
        }
    }
    if (!shape_text)
        return cli_usage("--output \"%s\" has no shape: write --output %s:%s:SHAPE%s%s "
                         "(SHAPE like 1000, 33x29 or scalar)",
                         spec, out->name, alloy_dtype_name(out->dtype), out->file ? "=" : "",
                         out->file ? out->file : "");
    if (cli_parse_shape(shape_text, &out->ndim, out->shape))
        return cli_usage("--output \"%s\": bad shape \"%s\" (write 1000, 33x29, 4x8x16 or scalar; "
                         "at most %d dimensions)",
                         spec, shape_text, ALLOY_MAX_NDIM);
    return CLI_OK;
}

/* Builds the array for one input on `device`. */
static int make_input(const input_spec *in, alloy_device *device, alloy_array **out) {
    alloy_status st;
    char err[1024];
    if (in->is_scalar) {
        unsigned char value[8] = {0};
        if (cli_parse_scalar(in->scalar, in->dtype, value))
            return cli_usage("--input %s=%s: not a valid %s value", in->name, in->scalar,
                             alloy_dtype_name(in->dtype));
        st = alloy_array_from_host(device, in->dtype, 0, NULL, value, out);
        return st == ALLOY_OK ? CLI_OK : cli_alloy_error(st);
    }
    npy_array a;
    if (npy_read(in->file, &a, err, sizeof err)) return cli_error("input %s: %s", in->name, err);
    void *data = a.data;
    alloy_dtype dtype = a.dtype;
    if (in->has_dtype && in->dtype != a.dtype) {
        data = malloc(a.size ? (size_t)a.size * alloy_dtype_size(in->dtype) : 1);
        if (!data) {
            npy_free(&a);
            return cli_error("out of memory converting input %s", in->name);
        }
        cli_convert(a.dtype, a.data, in->dtype, data, a.size);
        dtype = in->dtype;
    }
    st = alloy_array_from_host(device, dtype, a.ndim, a.shape, data, out);
    if (data != a.data) free(data);
    npy_free(&a);
    return st == ALLOY_OK ? CLI_OK : cli_alloy_error(st);
}

/* Copies one output back and writes and/or prints it. */
static int emit_output(const output_spec *spec, alloy_array *arr, int64_t print_max, int do_print) {
    alloy_dtype dtype = alloy_array_dtype(arr);
    int ndim = alloy_array_ndim(arr);
    const int64_t *shape = alloy_array_shape(arr);
    int64_t size = alloy_array_size(arr);
    size_t nbytes = alloy_array_nbytes(arr);
    void *host = malloc(nbytes ? nbytes : 1);
    if (!host) return cli_error("out of memory reading output %s", spec->name);
    alloy_status st = alloy_array_copy_to_host(arr, host, nbytes);
    if (st != ALLOY_OK) {
        free(host);
        return cli_alloy_error(st);
    }
    int rc = CLI_OK;
    if (do_print) cli_print_array(stdout, spec->name, dtype, ndim, shape, host, print_max);
    if (spec->file) {
        char err[1024];
        const void *data = host;
        void *wide = NULL;
        alloy_dtype file_dtype = dtype;
        if (dtype == ALLOY_BFLOAT16) {
            wide = malloc(size ? (size_t)size * 4 : 1);
            if (!wide) {
                free(host);
                return cli_error("out of memory writing output %s", spec->name);
            }
            cli_convert(ALLOY_BFLOAT16, host, ALLOY_FLOAT32, wide, size);
            data = wide;
            file_dtype = ALLOY_FLOAT32;
            fprintf(stderr,
                    "alloy: note: output %s is bfloat16; %s holds it as float32 (exact: .npy has "
                    "no bfloat16)\n",
                    spec->name, spec->file);
        }
        if (npy_write(spec->file, file_dtype, ndim, shape, data, err, sizeof err))
            rc = cli_error("output %s: %s", spec->name, err);
        free(wide);
    }
    free(host);
    return rc;
}

int cmd_run(int argc, char **argv) {
    cli_kernel_opts ko;
    memset(&ko, 0, sizeof ko);
    input_spec ins[RUN_MAX_ARGS];
    output_spec outs[RUN_MAX_ARGS];
    int n_in = 0, n_out = 0, have_grid = 0, have_tg = 0, have_init = 0, do_print = 0;
    int64_t print_max = 10;
    uint32_t grid[3], tg[3];
    double init_value = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int r;
        if (cli_is_help(a)) {
            fputs(run_usage, stdout);
            return CLI_OK;
        }
        if ((r = cli_kernel_opt(&ko, argc, argv, &i))) {
            if (r < 0) return CLI_USAGE;
            continue;
        }
        if ((r = cli_opt_value(argc, argv, &i, "--input", &v))) {
            if (r < 0) return CLI_USAGE;
            if (n_in >= RUN_MAX_ARGS) return cli_usage("too many --input options");
            if (parse_input_spec(v, &ins[n_in])) return CLI_USAGE;
            for (int k = 0; k < n_in; k++)
                if (!strcmp(ins[k].name, ins[n_in].name))
                    return cli_usage("input %s is given twice", ins[k].name);
            n_in++;
        } else if ((r = cli_opt_value(argc, argv, &i, "--output", &v))) {
            if (r < 0) return CLI_USAGE;
            if (n_out >= RUN_MAX_ARGS) return cli_usage("too many --output options");
            if (parse_output_spec(v, &outs[n_out])) return CLI_USAGE;
            for (int k = 0; k < n_out; k++)
                if (!strcmp(outs[k].name, outs[n_out].name))
                    return cli_usage("output %s is given twice", outs[k].name);
            n_out++;
        } else if ((r = cli_opt_value(argc, argv, &i, "--grid", &v))) {
            if (r < 0) return CLI_USAGE;
            if (cli_parse_dims(v, grid)) return cli_usage("--grid \"%s\": expected X[,Y[,Z]]", v);
            have_grid = 1;
        } else if ((r = cli_opt_value(argc, argv, &i, "--threadgroup", &v))) {
            if (r < 0) return CLI_USAGE;
            if (cli_parse_dims(v, tg)) return cli_usage("--threadgroup \"%s\": expected X[,Y[,Z]]", v);
            have_tg = 1;
        } else if ((r = cli_opt_value(argc, argv, &i, "--init-value", &v))) {
            if (r < 0) return CLI_USAGE;
            char *end = NULL;
            init_value = strtod(v, &end);
            if (!*v || !end || *end) return cli_usage("--init-value \"%s\" is not a number", v);
            have_init = 1;
        } else if (!strcmp(a, "--print")) {
            do_print = 1;
        } else if (!strncmp(a, "--print=", 8)) {
            char *end = NULL;
            long long n = strtoll(a + 8, &end, 10);
            if (!a[8] || *end || n < 0) return cli_usage("%s: expected --print=N with N >= 0", a);
            do_print = 1;
            print_max = n ? n : INT64_MAX;
        } else if (a[0] == '-' && a[1] != '\0') {
            return cli_usage("unknown option \"%s\"", a);
        } else if (!ko.path) {
            ko.path = a;
        } else {
            return cli_usage("unexpected argument \"%s\" (the kernel file is %s)", a, ko.path);
        }
    }
    if (!ko.path) return cli_usage("missing KERNEL.metal");
    if (!have_grid) return cli_usage("missing --grid X[,Y[,Z]] (the number of threads)");
    if (n_out == 0) return cli_usage("missing --output NAME:DTYPE:SHAPE=FILE.npy");
    if (!have_tg) {
        tg[0] = grid[0] < 256 ? (grid[0] ? grid[0] : 1) : 256;
        tg[1] = tg[2] = 1;
    }
    for (int k = 0; k < n_out; k++)
        if (!outs[k].file && !do_print)
            return cli_usage("output %s goes nowhere: add =FILE.npy or --print", outs[k].name);

    int rc = CLI_OK;
    alloy_kernel_file *kf = NULL;
    alloy_launch *launch = NULL;
    alloy_kernel *kernel = NULL;
    alloy_device *device = NULL;
    alloy_stream *stream = NULL;
    alloy_array *inputs[ALLOY_KERNEL_FILE_MAX_NAMES] = {0}, *outputs[ALLOY_KERNEL_FILE_MAX_NAMES] = {0};
    const output_spec *out_order[ALLOY_KERNEL_FILE_MAX_NAMES] = {0};
    alloy_status st;

    if ((st = alloy_launch_new(&launch)) != ALLOY_OK) return cli_alloy_error(st);
    if ((rc = cli_kernel_setup(&ko, &kf, &device, &kernel, launch))) goto done;

    /* Match the given inputs and outputs to the kernel's names. */
    for (int k = 0; k < n_in; k++)
        if ((rc = cli_require_name(kf, 0, ins[k].name))) goto done;
    for (int k = 0; k < n_out; k++)
        if ((rc = cli_require_name(kf, 1, outs[k].name))) goto done;
    for (int j = 0; j < alloy_kernel_file_n_inputs(kf); j++) {
        const input_spec *in = NULL;
        for (int k = 0; k < n_in; k++)
            if (!strcmp(ins[k].name, alloy_kernel_file_inputs(kf)[j])) in = &ins[k];
        if (!in) {
            rc = cli_usage("missing --input %s=... (kernel %s needs every input)", alloy_kernel_file_inputs(kf)[j], alloy_kernel_file_name(kf));
            goto done;
        }
        if ((rc = make_input(in, device, &inputs[j]))) goto done;
    }
    for (int j = 0; j < alloy_kernel_file_n_outputs(kf); j++) {
        for (int k = 0; k < n_out; k++)
            if (!strcmp(outs[k].name, alloy_kernel_file_outputs(kf)[j])) out_order[j] = &outs[k];
        if (!out_order[j]) {
            rc = cli_usage("missing --output %s:DTYPE:SHAPE=FILE.npy (kernel %s needs every output)",
                           alloy_kernel_file_outputs(kf)[j], alloy_kernel_file_name(kf));
            goto done;
        }
        if ((st = alloy_launch_add_output(launch, out_order[j]->ndim, out_order[j]->shape,
                                          out_order[j]->dtype)) != ALLOY_OK) {
            rc = cli_alloy_error(st);
            goto done;
        }
    }
    if ((st = alloy_launch_set_grid(launch, grid[0], grid[1], grid[2])) != ALLOY_OK ||
        (st = alloy_launch_set_threadgroup(launch, tg[0], tg[1], tg[2])) != ALLOY_OK ||
        (have_init && (st = alloy_launch_set_init_value(launch, init_value)) != ALLOY_OK) ||
        (st = alloy_stream_default(device, &stream)) != ALLOY_OK) {
        rc = cli_alloy_error(st);
        goto done;
    }
    if (ko.verbose)
        fprintf(stderr, "alloy: running %s on %s: grid %u,%u,%u threadgroup %u,%u,%u\n", alloy_kernel_file_name(kf),
                alloy_device_name(device), grid[0], grid[1], grid[2], tg[0], tg[1], tg[2]);
    if ((st = alloy_kernel_apply(kernel, alloy_kernel_file_n_inputs(kf), inputs, launch, stream, outputs)) != ALLOY_OK) {
        rc = cli_alloy_error(st);
        goto done;
    }
    for (int j = 0; j < alloy_kernel_file_n_outputs(kf) && rc == CLI_OK; j++)
        rc = emit_output(out_order[j], outputs[j], print_max, do_print);

done:
    for (int j = 0; j < ALLOY_KERNEL_FILE_MAX_NAMES; j++) {
        alloy_array_free(inputs[j]);
        alloy_array_free(outputs[j]);
    }
    alloy_kernel_free(kernel);
    alloy_launch_free(launch);
    alloy_kernel_file_free(kf);
    return rc;
}
