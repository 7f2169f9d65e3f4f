/* cmd_compile.c — `alloy compile KERNEL.metal ...`: shows what alloy
 * generates for a body-only kernel with given input/output dtypes, compiles
 * it (through the caches) and prints the compiler log and the resource
 * report, without running anything. For debugging kernels and for CI checks
 * that every kernel file compiles. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char compile_usage[] =
    "usage: alloy compile KERNEL.metal [options]\n"
    "\n"
    "  --input NAME:DTYPE[:SHAPE]    an input's dtype and shape (default shape 1, a 1-D\n"
    "                                array; write :scalar for a 0-d input, which the body\n"
    "                                sees as a value); one per input of the kernel\n"
    "  --output NAME[:DTYPE[:SHAPE]] an output's dtype (default float32); one per output\n"
    "  --template NAME=VALUE         template argument: an integer, true/false or a dtype\n"
    "  --grid X[,Y[,Z]] --threadgroup X[,Y[,Z]]\n"
    "                                optional launch shape (some reports depend on it)\n"
    "  --device cpu|cuda|cuda:N|auto target device (default auto)\n"
    "  --name N --inputs a,b --outputs c --no-contiguous --atomic-outputs\n"
    "                                as for `alloy run`\n"
    "  --no-source                   do not print the generated source\n"
    "\n"
    "Prints the generated source, then compiles and prints the compile log and the\n"
    "resource report to stdout. On a compile error the log (with line numbers of\n"
    "the body and header) goes to stderr and the exit status is 1.\n"
    "SHAPE is written 1000, 33x29, 4x8x16 or scalar.\n";

typedef struct arg_spec {
    char name[64];
    alloy_dtype dtype;
    int ndim;
    int64_t shape[ALLOY_MAX_NDIM];
} arg_spec;

/* NAME[:DTYPE[:SHAPE]] */
static int parse_arg_spec(const char *opt, const char *spec, int need_dtype, arg_spec *a) {
    memset(a, 0, sizeof *a);
    a->dtype = ALLOY_FLOAT32;
    a->ndim = 1;
    a->shape[0] = 1;
    char buf[256];
    if (strlen(spec) >= sizeof buf) return cli_usage("%s \"%s\": too long", opt, spec);
    strcpy(buf, spec);
    char *c1 = strchr(buf, ':'), *c2 = NULL;
    if (c1) {
        *c1 = '\0';
        c2 = strchr(c1 + 1, ':');
        if (c2) *c2 = '\0';
    }
    if (!alloy_is_identifier(buf, strlen(buf)) || strlen(buf) >= sizeof a->name)
        return cli_usage("%s \"%s\": the name is not a C identifier", opt, spec);
    strcpy(a->name, buf);
    if (!c1) {
        if (need_dtype) return cli_usage("%s \"%s\": expected NAME:DTYPE[:SHAPE]", opt, spec);
        return CLI_OK;
    }
    if (alloy_dtype_parse(c1 + 1, &a->dtype) != ALLOY_OK)
        return cli_usage("%s \"%s\": unknown dtype \"%s\"", opt, spec, c1 + 1);
    if (c2 && cli_parse_shape(c2 + 1, &a->ndim, a->shape))
        return cli_usage("%s \"%s\": bad shape \"%s\" (write 1000, 33x29 or scalar)", opt, spec, c2 + 1);
    return CLI_OK;
}

static void print_section(const char *title, const char *text) {
    printf("// ---- %s ----\n", title);
    if (!text || !*text) {
        printf("(empty)\n");
        return;
    }
    fputs(text, stdout);
    if (text[strlen(text) - 1] != '\n') putchar('\n');
}

int cmd_compile(int argc, char **argv) {
    cli_kernel_opts ko;
    memset(&ko, 0, sizeof ko);
    arg_spec ins[ALLOY_KERNEL_FILE_MAX_NAMES], outs[ALLOY_KERNEL_FILE_MAX_NAMES];
    int n_in = 0, n_out = 0, have_grid = 0, have_tg = 0, show_source = 1;
    uint32_t grid[3], tg[3];

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int r;
        if (cli_is_help(a)) {
            fputs(compile_usage, stdout);
            return CLI_OK;
        }
        if ((r = cli_kernel_opt(&ko, argc, argv, &i))) {
            if (r < 0) return CLI_USAGE;
            continue;
        }
        if ((r = cli_opt_value(argc, argv, &i, "--input", &v))) {
            if (r < 0) return CLI_USAGE;
            if (n_in >= ALLOY_KERNEL_FILE_MAX_NAMES) return cli_usage("too many --input options");
            if (parse_arg_spec("--input", v, 1, &ins[n_in])) return CLI_USAGE;
            for (int k = 0; k < n_in; k++)
                if (!strcmp(ins[k].name, ins[n_in].name)) return cli_usage("input %s is given twice", ins[k].name);
            n_in++;
        } else if ((r = cli_opt_value(argc, argv, &i, "--output", &v))) {
            if (r < 0) return CLI_USAGE;
            if (n_out >= ALLOY_KERNEL_FILE_MAX_NAMES) return cli_usage("too many --output options");
            if (parse_arg_spec("--output", v, 0, &outs[n_out])) return CLI_USAGE;
            for (int k = 0; k < n_out; k++)
                if (!strcmp(outs[k].name, outs[n_out].name)) return cli_usage("output %s is given twice", outs[k].name);
            n_out++;
        } else if ((r = cli_opt_value(argc, argv, &i, "--grid", &v))) {
            if (r < 0) return CLI_USAGE;
            if (cli_parse_dims(v, grid)) return cli_usage("--grid \"%s\": expected X[,Y[,Z]]", v);
            have_grid = 1;
        } else if ((r = cli_opt_value(argc, argv, &i, "--threadgroup", &v))) {
            if (r < 0) return CLI_USAGE;
            if (cli_parse_dims(v, tg)) return cli_usage("--threadgroup \"%s\": expected X[,Y[,Z]]", v);
            have_tg = 1;
        } else if (!strcmp(a, "--no-source")) {
            show_source = 0;
        } else if (a[0] == '-' && a[1] != '\0') {
            return cli_usage("unknown option \"%s\"", a);
        } else if (!ko.path) {
            ko.path = a;
        } else {
            return cli_usage("unexpected argument \"%s\" (the kernel file is %s)", a, ko.path);
        }
    }
    if (!ko.path) return cli_usage("missing KERNEL.metal");

    int rc = CLI_OK;
    alloy_kernel_file *kf = NULL;
    alloy_launch *launch = NULL;
    alloy_kernel *kernel = NULL;
    alloy_device *device = NULL;
    alloy_array *inputs[ALLOY_KERNEL_FILE_MAX_NAMES] = {0};
    alloy_compile_result result;
    memset(&result, 0, sizeof result);
    char *source = NULL;
    alloy_status st;

    if ((st = alloy_launch_new(&launch)) != ALLOY_OK) return cli_alloy_error(st);
    if ((rc = cli_kernel_setup(&ko, &kf, &device, &kernel, launch))) goto done;

    for (int k = 0; k < n_in; k++)
        if ((rc = cli_require_name(kf, 0, ins[k].name))) goto done;
    for (int k = 0; k < n_out; k++)
        if ((rc = cli_require_name(kf, 1, outs[k].name))) goto done;
    for (int j = 0; j < alloy_kernel_file_n_inputs(kf); j++) {
        const arg_spec *in = NULL;
        for (int k = 0; k < n_in; k++)
            if (!strcmp(ins[k].name, alloy_kernel_file_inputs(kf)[j])) in = &ins[k];
        if (!in) {
            rc = cli_usage("missing --input %s:DTYPE[:SHAPE] (kernel %s needs every input's dtype)",
                           alloy_kernel_file_inputs(kf)[j], alloy_kernel_file_name(kf));
            goto done;
        }
        if ((st = alloy_array_new(device, in->dtype, in->ndim, in->shape, &inputs[j])) != ALLOY_OK) {
            rc = cli_alloy_error(st);
            goto done;
        }
    }
    for (int j = 0; j < alloy_kernel_file_n_outputs(kf); j++) {
        arg_spec def;
        const arg_spec *o = NULL;
        for (int k = 0; k < n_out; k++)
            if (!strcmp(outs[k].name, alloy_kernel_file_outputs(kf)[j])) o = &outs[k];
        if (!o) { /* float32, shape 1 */
            memset(&def, 0, sizeof def);
            def.dtype = ALLOY_FLOAT32;
            def.ndim = 1;
            def.shape[0] = 1;
            o = &def;
        }
        if ((st = alloy_launch_add_output(launch, o->ndim, o->shape, o->dtype)) != ALLOY_OK) {
            rc = cli_alloy_error(st);
            goto done;
        }
    }
    if ((have_grid && (st = alloy_launch_set_grid(launch, grid[0], grid[1], grid[2])) != ALLOY_OK) ||
        (have_tg && (st = alloy_launch_set_threadgroup(launch, tg[0], tg[1], tg[2])) != ALLOY_OK)) {
        rc = cli_alloy_error(st);
        goto done;
    }

    printf("// alloy compile: kernel %s for %s (%s)\n", alloy_kernel_file_name(kf), alloy_device_name(device),
           alloy_device_description(device));
    if (show_source) {
        if ((st = alloy_kernel_generated_source(kernel, alloy_kernel_file_n_inputs(kf), inputs, launch, device,
                                                &source)) != ALLOY_OK) {
            fflush(stdout);
            rc = cli_alloy_error(st);
            goto done;
        }
        print_section("generated source", source);
    }
    fflush(stdout);
    st = alloy_kernel_compile(kernel, alloy_kernel_file_n_inputs(kf), inputs, launch, device, &result);
    if (st != ALLOY_OK) {
        const char *msg = alloy_last_error();
        if ((!msg || !*msg) && result.log && *result.log) {
            fprintf(stderr, "alloy: %s: compile failed:\n%s", alloy_kernel_file_name(kf), result.log);
            size_t n = strlen(result.log);
            if (result.log[n - 1] != '\n') fputc('\n', stderr);
            rc = CLI_ERROR;
        } else {
            rc = cli_alloy_error(st);
        }
        goto done;
    }
    print_section("compile log", result.log);
    print_section("resource report", result.report);
    printf("// %s\n", result.from_cache == 1   ? "from the memory cache"
                      : result.from_cache == 2 ? "from the disk cache"
                                               : "compiled now");

done:
    fflush(stdout);
    free(source);
    alloy_compile_result_clear(&result);
    for (int j = 0; j < ALLOY_KERNEL_FILE_MAX_NAMES; j++) alloy_array_free(inputs[j]);
    alloy_kernel_free(kernel);
    alloy_launch_free(launch);
    alloy_kernel_file_free(kf);
    return rc;
}
