/* alloy_main.c — entry point of the `alloy` command-line tool: dispatches to
 * the subcommands (one file each: cmd_*.c) and prints the overall help.
 * New subcommands (bench, lint) are added as one row of `commands`. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"info", cmd_info, "version, backends and devices, compiler, cache, threads"},
    {"run", cmd_run, "run a body-only kernel file on .npy inputs, write .npy outputs"},
    {"compile", cmd_compile, "show the generated source, compile log and resource report"},
    {"cache", cmd_cache, "the on-disk kernel cache: dir | stats | clear"},
    {"lint", cmd_lint, "check kernel files and Python launches for common mistakes"},
    {"bench", cmd_bench, "the catalog's benchmarks: time, rate, error, the peer side by side"},
};
#define N_COMMANDS ((int)(sizeof commands / sizeof commands[0]))

static void print_help(FILE *f) {
    fprintf(f,
            "alloy %s - body-only Metal (MSL) kernels on NVIDIA GPUs and any CPU\n"
            "\n"
            "usage: alloy <command> [options]\n"
            "       alloy <command> --help\n"
            "       alloy --version\n"
            "\n"
            "commands:\n",
            alloy_version());
    for (int i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\n"
            "example:\n"
            "  alloy run examples/soft_cap.metal --input x=x.npy --input cap=15 \\\n"
            "            --output out:float32:1000=out.npy --grid 1000 --threadgroup 256\n"
            "\n"
            "environment: ALLOY_DEVICE (what \"auto\" means), ALLOY_CXX (host C++ compiler),\n"
            "ALLOY_NUM_THREADS, ALLOY_CACHE_DIR, ALLOY_CACHE=0 (no disk cache), ALLOY_CPU_DEBUG=1,\n"
            "ALLOY_CPU_NATIVE=0 (CPU kernels for the baseline ISA, not -march=native).\n"
            "Exit status: 0 success, 1 error, 2 usage error. See docs/cli.md.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_help(stderr);
        return CLI_USAGE;
    }
    const char *cmd = argv[1];
    if (cli_is_help(cmd) || !strcmp(cmd, "help")) {
        if (!strcmp(cmd, "help") && argc > 2) {
            /* `alloy help run` == `alloy run --help` */
            for (int i = 0; i < N_COMMANDS; i++)
                if (!strcmp(argv[2], commands[i].name)) {
                    char help[] = "--help";
                    char *args[3] = {argv[2], help, NULL};
                    cli_set_command(commands[i].name);
                    return commands[i].fn(2, args);
                }
        }
        print_help(stdout);
        return CLI_OK;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("alloy %s\n", alloy_version());
        return CLI_OK;
    }
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(cmd, commands[i].name)) {
            static char hint[64];
            snprintf(hint, sizeof hint, "%s ", commands[i].name);
            cli_set_command(hint);
            return commands[i].fn(argc - 1, argv + 1);
        }
    cli_set_command(NULL);
    return cli_usage("unknown command \"%s\" (commands: info, run, compile, cache)", cmd);
}
