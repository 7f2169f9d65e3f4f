/* cmd_lint.c — `alloy lint FILE...`: static checks of kernel files (.metal,
 * the format of examples/README.md, read with the library's parser) and of
 * Python files (their metal_kernel(...) calls and launches, found without
 * running them). The rules live in src/lint/; docs/cli.md lists them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lint/lint.h"

static const char lint_usage[] =
    "usage: alloy lint [--format text|json] FILE...\n"
    "\n"
    "Checks body-only kernels without running them: kernel files (*.metal) and\n"
    "Python files (*.py: the metal_kernel(...) calls and the launches of the\n"
    "kernels they return). Each finding: FILE:LINE: level: [rule] message (fix: ...).\n"
    "Levels: error, warning, perf, info. Exit status: 1 when an error-level rule\n"
    "fires, 2 for usage or unreadable files, else 0. Rules: see docs/cli.md.\n";

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            char *b = realloc(buf, 2 * cap + 1);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[n] = 0;
    *len = n;
    return buf;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int lint_kernel_file(const char *path, alloy_lint_report *r) {
    alloy_kernel_file *f;
    if (alloy_kernel_file_load(path, &f) != ALLOY_OK) return cli_error("%s", alloy_last_error());
    alloy_lint_kernel k = {
        .name = alloy_kernel_file_name(f),
        .body = alloy_kernel_file_body(f),
        .body_line = alloy_kernel_file_body_line(f),
        .header = alloy_kernel_file_header(f),
        .header_line = alloy_kernel_file_header_line(f),
        .outputs = alloy_kernel_file_outputs(f),
        .n_outputs = alloy_kernel_file_n_outputs(f),
        .atomic_outputs = alloy_kernel_file_atomic_outputs(f),
        .in_kernel_file = 1,
    };
    alloy_lint_kernel_check(&k, r);
    alloy_kernel_file_free(f);
    return CLI_OK;
}

static void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') printf("\\n");
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

int cmd_lint(int argc, char **argv) {
    int json = 0, n_files = 0;
    const char *files[4096];
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(lint_usage, stdout);
            return CLI_OK;
        }
        if (!strcmp(argv[i], "--format")) {
            if (i + 1 >= argc) return cli_usage("--format needs a value (text or json)");
            i++;
            if (!strcmp(argv[i], "json")) json = 1;
            else if (strcmp(argv[i], "text")) return cli_usage("--format %s: expected text or json", argv[i]);
        } else if (!strncmp(argv[i], "--format=", 9)) {
            json = !strcmp(argv[i] + 9, "json");
            if (!json && strcmp(argv[i] + 9, "text")) return cli_usage("%s: expected text or json", argv[i]);
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage("unknown option %s", argv[i]);
        } else if (n_files < 4096) {
            files[n_files++] = argv[i];
        }
    }
    if (!n_files) return cli_usage("no FILE to lint (kernel files *.metal or Python files *.py)");
    int rc = CLI_OK, errors = 0, first = 1;
    if (json) printf("[");
    for (int f = 0; f < n_files; f++) {
        alloy_lint_report r = {0};
        if (ends_with(files[f], ".py")) {
            size_t len;
            char *text = read_all(files[f], &len);
            if (!text) {
                rc = CLI_USAGE;
                cli_error("%s: cannot read: %s", files[f], strerror(errno));
                continue;
            }
            if (alloy_lint_python(text, len, &r) != ALLOY_OK) rc = cli_error("%s: %s", files[f], alloy_last_error());
            free(text);
        } else if (lint_kernel_file(files[f], &r) != CLI_OK) {
            rc = CLI_USAGE;
            continue;
        }
        for (int i = 0; i < r.n; i++) {
            const alloy_lint_finding *x = &r.v[i];
            if (x->level == ALLOY_LINT_ERROR) errors++;
            if (json) {
                printf("%s\n  {\"file\": ", first ? "" : ",");
                json_string(files[f]);
                printf(", \"line\": %d, \"level\": \"%s\", \"rule\": \"%s\", \"message\": ", x->line,
                       alloy_lint_level_name(x->level), x->rule);
                json_string(x->message);
                printf(", \"fix\": ");
                json_string(x->fix);
                printf("}");
                first = 0;
            } else {
                printf("%s:%d: %s: [%s] %s", files[f], x->line, alloy_lint_level_name(x->level), x->rule,
                       x->message);
                if (x->fix[0]) printf(" (fix: %s)", x->fix);
                printf("\n");
            }
        }
        alloy_lint_report_free(&r);
    }
    if (json) printf("%s]\n", first ? "" : "\n");
    if (rc != CLI_OK) return rc;
    return errors ? CLI_ERROR : CLI_OK;
}
