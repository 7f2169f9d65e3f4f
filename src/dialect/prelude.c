/* prelude.c — the text pasted before every generated kernel of a target.
 *
 * The CPU prelude is the CPU ABI header (both sides of the dlopen boundary
 * must agree on it), the CPU's vectorisable exp and tanh, the MSL
 * definitions shared by all targets, the CPU
 * specific part and its debug mode's checked memory, in that order. The CUDA prelude is the CUDA values of the
 * shared part's hooks, the shared part, and the CUDA specific part. The files
 * are embedded into the library at build time; each concatenation is built
 * once, thread-safely. */
#include <pthread.h>
#include <string.h>

#include "core/embedded.h"
#include "core/strbuf.h"
#include "dialect/dialect.h"

static const char *const cpu_files[] = {
    "src/backend/cpu/cpu_abi.h",
    "src/dialect/prelude/cpu_math.h",
    "src/dialect/prelude/common.h",
    "src/dialect/prelude/cpu.h",
    "src/dialect/prelude/cpu_debug.h",
    NULL,
};
static const char *const cuda_files[] = {
    "src/dialect/prelude/cuda_hooks.h",
    "src/dialect/prelude/common.h",
    "src/dialect/prelude/cuda.h",
    NULL,
};

static pthread_once_t cpu_once = PTHREAD_ONCE_INIT, cuda_once = PTHREAD_ONCE_INIT;
static char *cpu_prelude, *cuda_prelude; /* live until the process ends */

/* The files concatenated, or NULL (a build without them, or no memory). */
static char *concatenate(const char *const *files) {
    alloy_strbuf sb;
    alloy_sb_init(&sb);
    for (size_t i = 0; files[i]; i++) {
        const char *text = alloy_embedded(files[i]);
        if (!text) {
            alloy_sb_free(&sb);
            return NULL; /* a build without the prelude: alloy_prelude reports NULL */
        }
        alloy_sb_append(&sb, text);
        size_t n = strlen(text);
        if (n && text[n - 1] != '\n') alloy_sb_append(&sb, "\n");
    }
    if (sb.failed) {
        alloy_sb_free(&sb);
        return NULL;
    }
    return alloy_sb_take(&sb);
}

static void build_cpu_prelude(void) { cpu_prelude = concatenate(cpu_files); }
static void build_cuda_prelude(void) { cuda_prelude = concatenate(cuda_files); }

const char *alloy_prelude_tensor(void) { return alloy_embedded("src/dialect/prelude/tensor.h"); }

const char *alloy_prelude(alloy_codegen_target target) {
    switch (target) {
    case ALLOY_TARGET_CPU:
        pthread_once(&cpu_once, build_cpu_prelude);
        return cpu_prelude;
    case ALLOY_TARGET_CUDA:
        pthread_once(&cuda_once, build_cuda_prelude);
        return cuda_prelude;
    default:
        return NULL;
    }
}
