/* cpu_compiler.c — runs the host C++ compiler (posix_spawnp, output read
 * from a pipe until EOF, then waitpid) and derives its identity.
 *
 * Flags: C++20 (Metal 4's matmul2d takes its descriptor as a class-type
 * template argument), -O3 (the threads' loops are vectorised and small inner
 * loops unrolled), -fopenmp-simd (only the `omp simd` marks on those loops,
 * no OpenMP runtime), -fno-trapping-math (kernels never trap on or read
 * floating-point exception flags — Metal has none — and a conditional
 * float operation may then run in a masked vector lane; values, NaN and
 * infinity handling are unchanged: this is not fast-math and leaves
 * __FAST_MATH__ undefined), position-independent shared object, no exceptions or
 * RTTI (kernels use neither), -fno-math-errno (lets sqrt etc. inline; errno is
 * meaningless in a kernel), -g0, and -march=native where the compiler takes
 * it (kernels are built for the machine that runs them, like a JIT: the
 * catalog's GEMM needs the vector units; ALLOY_CPU_NATIVE=0 turns it off, and
 * the identity then names the CPU so a shared cache never mixes machines).
 * Floating-point contraction stays off (ISO C++ mode: -std=c++20, not
 * gnu++20), so native code rounds as the baseline does. Warnings stay on but
 * never fail the build. On Linux
 * `-z defs` makes an undefined function a link error with a message, instead
 * of a dlopen failure later. */
#include "cpu_compiler.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "core/sha256.h"
#include "core/strbuf.h"

extern char **environ;

#define MAX_CXX_ARGS 64

static struct {
    pthread_once_t once;
    char command[512];
    char *argv_store; /* the command, split in place */
    char *cxx_argv[MAX_CXX_ARGS];
    int cxx_argc;
    char version[256];
    int have_version;
    char identity[1024];
    int native; /* -march=native is passed */
} cc = {PTHREAD_ONCE_INIT, "", NULL, {NULL}, 0, "", 0, "", 0};

/* What native code depends on: the CPU's model and feature lines (Linux),
 * as a short hash; "unknown" elsewhere. */
static void cpu_signature(char out[17]) {
    snprintf(out, 17, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    alloy_sha256 h;
    alloy_sha256_init(&h);
    char line[8192];
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10) || !strncmp(line, "flags", 5) ||
            !strncmp(line, "Features", 8) || !strncmp(line, "CPU part", 8) ||
            !strncmp(line, "CPU implementer", 15)) {
            alloy_sha256_update(&h, line, strlen(line));
            seen++;
        }
        if (line[0] == '\n' && seen) break; /* the first processor is enough */
    }
    fclose(f);
    uint8_t d[32];
    alloy_sha256_final(&h, d);
    char hex[65];
    alloy_digest_to_hex(d, hex);
    memcpy(out, hex, 16);
    out[16] = 0;
}

const char *alloy_cpu_arch(void) {
#if defined(__x86_64__)
    return "x86_64";
#elif defined(__aarch64__)
    return "aarch64";
#else
    return "unknown";
#endif
}

/* Runs argv, collecting stdout+stderr into *out (malloc'd, may be NULL).
 * Returns 0 and the wait status in *status, or an errno value when the
 * program could not be started. */
static int run_capture(char *const argv[], char **out, int *status) {
    int fds[2];
    if (out) *out = NULL;
    if (pipe2(fds, O_CLOEXEC) != 0) return errno;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    pid_t pid;
    int err = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (err != 0) {
        close(fds[0]);
        return err;
    }
    alloy_strbuf sb;
    alloy_sb_init(&sb);
    char buf[4096];
    for (;;) {
        ssize_t r = read(fds[0], buf, sizeof buf);
        if (r > 0) alloy_sb_append_n(&sb, buf, (size_t)r);
        else if (r == 0 || errno != EINTR) break;
    }
    close(fds[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    *status = st;
    if (out) *out = alloy_sb_take(&sb);
    else alloy_sb_free(&sb);
    return 0;
}

/* The flags every kernel is built with. Hidden visibility keeps one kernel's
 * inline helpers from binding to another loaded kernel's copies (only the
 * entry points are exported); MSL's char is signed on every target. The list
 * is part of the compiler identity, so changing it never reuses old objects. */
static const char *const flags[] = {
    "-std=c++20", "-O3", "-fopenmp-simd", "-fno-trapping-math", "-fPIC", "-shared", "-fno-exceptions", "-fno-rtti",
    "-fno-math-errno", "-fvisibility=hidden", "-fsigned-char", "-g0",
#if defined(__linux__)
    "-Wl,-z,defs",
#endif
    "-x", "c++"};

static void compiler_init(void) {
    const char *env = getenv("ALLOY_CXX");
    snprintf(cc.command, sizeof cc.command, "%s", env && *env ? env : "c++");
    cc.argv_store = strdup(cc.command);
    if (cc.argv_store) {
        char *save = NULL;
        for (char *t = strtok_r(cc.argv_store, " \t", &save); t && cc.cxx_argc < MAX_CXX_ARGS - 24;
             t = strtok_r(NULL, " \t", &save))
            cc.cxx_argv[cc.cxx_argc++] = t;
    }
    if (cc.cxx_argc == 0) { /* ALLOY_CXX was only blanks */
        snprintf(cc.command, sizeof cc.command, "c++");
        cc.cxx_argv[cc.cxx_argc++] = (char *)"c++";
    }
    char *argv[MAX_CXX_ARGS + 2];
    int n = 0;
    for (int i = 0; i < cc.cxx_argc; i++) argv[n++] = cc.cxx_argv[i];
    argv[n++] = (char *)"--version";
    argv[n] = NULL;
    char *out = NULL;
    int status = 0;
    if (run_capture(argv, &out, &status) == 0 && WIFEXITED(status) &&
        WEXITSTATUS(status) == 0 && out) {
        size_t len = strcspn(out, "\r\n");
        if (len >= sizeof cc.version) len = sizeof cc.version - 1;
        memcpy(cc.version, out, len);
        cc.version[len] = 0;
        cc.have_version = len > 0;
    }
    free(out);
    /* -march=native: where the compiler takes it (not a cross compiler). */
    const char *ne = getenv("ALLOY_CPU_NATIVE");
    if (!(ne && !strcmp(ne, "0"))) {
        n = 0;
        for (int i = 0; i < cc.cxx_argc; i++) argv[n++] = cc.cxx_argv[i];
        argv[n++] = (char *)"-march=native";
        argv[n++] = (char *)"-fsyntax-only";
        argv[n++] = (char *)"-x";
        argv[n++] = (char *)"c++";
        argv[n++] = (char *)"/dev/null";
        argv[n] = NULL;
        out = NULL;
        cc.native = run_capture(argv, &out, &status) == 0 && WIFEXITED(status) &&
                    WEXITSTATUS(status) == 0;
        free(out);
    }
    char cpu[17] = "";
    if (cc.native) cpu_signature(cpu);
    char flag_text[512] = "";
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        strncat(flag_text, flags[i], sizeof flag_text - strlen(flag_text) - 2);
        strcat(flag_text, " ");
    }
    /* Built with the string buffer: the parts may exceed any fixed size. */
    alloy_strbuf sb;
    alloy_sb_init(&sb);
    alloy_sb_printf(&sb, "%s | %s | %s | %s%s%s", cc.command,
                    cc.have_version ? cc.version : "(not found)", alloy_cpu_arch(), flag_text,
                    cc.native ? "-march=native cpu " : "", cpu);
    snprintf(cc.identity, sizeof cc.identity, "%s", sb.data ? sb.data : "");
    alloy_sb_free(&sb);
}

const char *alloy_cpu_compiler_command(void) {
    pthread_once(&cc.once, compiler_init);
    return cc.command;
}

const char *alloy_cpu_compiler_version(void) {
    pthread_once(&cc.once, compiler_init);
    return cc.have_version ? cc.version : NULL;
}

const char *alloy_cpu_compiler_identity(void) {
    pthread_once(&cc.once, compiler_init);
    return cc.identity;
}

alloy_status alloy_cpu_compile_file(const char *src_path, const char *out_path, char **log) {
    pthread_once(&cc.once, compiler_init);
    *log = NULL;
    char *argv[MAX_CXX_ARGS + 2];
    int n = 0;
    for (int i = 0; i < cc.cxx_argc; i++) argv[n++] = cc.cxx_argv[i];
    for (size_t i = 0; i < sizeof flags / sizeof flags[0] - 2; i++) argv[n++] = (char *)flags[i];
    if (cc.native) argv[n++] = (char *)"-march=native";
    argv[n++] = (char *)"-x"; /* the last two flags: the language of the file that follows */
    argv[n++] = (char *)"c++";
    argv[n++] = (char *)src_path;
    argv[n++] = (char *)"-o";
    argv[n++] = (char *)out_path;
    argv[n] = NULL;
    char *out = NULL;
    int status = 0;
    int err = run_capture(argv, &out, &status);
    /* Exit status 127 with no output is how a failed exec shows where the
     * spawn cannot report it directly (e.g. under qemu-user). */
    if (!err && WIFEXITED(status) && WEXITSTATUS(status) == 127 && (!out || !*out)) err = ENOENT;
    if (err != 0) {
        free(out);
        return alloy_error(ALLOY_ERROR_COMPILER_MISSING,
                           "cannot run the C++ compiler '%s' (%s): the CPU backend compiles "
                           "kernels with it. Install g++ or clang++, or set ALLOY_CXX to a C++20 "
                           "compiler command",
                           cc.command, strerror(err));
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        free(out);
        return ALLOY_OK;
    }
    alloy_strbuf sb;
    alloy_sb_init(&sb);
    alloy_sb_append(&sb, out ? out : "");
    free(out);
    if (WIFSIGNALED(status))
        alloy_sb_printf(&sb, "\n(the compiler '%s' was killed by signal %d)\n", cc.command,
                        WTERMSIG(status));
    *log = alloy_sb_take(&sb);
    return ALLOY_ERROR_COMPILE;
}
