/* prelude.c — the text pasted before every generated kernel of a target.
 *
 * The CPU prelude is the CPU ABI header (both sides of the dlopen boundary
 * must agree on it), the MSL definitions shared by all targets, and the CPU
 * specific part, in that order. The files are embedded into the library at
 * build time; the concatenation is built once, thread-safely. */
#include <pthread.h>
#include <string.h>

#include "core/embedded.h"
#include "core/strbuf.h"
#include "dialect/dialect.h"

static const char *const cpu_files[] = {
    "src/backend/cpu/cpu_abi.h",
    "src/dialect/prelude/common.h",
    "src/dialect/prelude/cpu.h",
};

static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static char *cpu_prelude; /* lives until the process ends */

static void build_cpu_prelude(void) {
    alloy_strbuf sb;
    alloy_sb_init(&sb);
    for (size_t i = 0; i < sizeof cpu_files / sizeof *cpu_files; i++) {
        const char *text = alloy_embedded(cpu_files[i]);
        if (!text) {
            alloy_sb_free(&sb);
            return; /* a build without the prelude: alloy_prelude reports NULL */
        }
        alloy_sb_append(&sb, text);
        size_t n = strlen(text);
        if (n && text[n - 1] != '\n') alloy_sb_append(&sb, "\n");
    }
    if (sb.failed) {
        alloy_sb_free(&sb);
        return;
    }
    cpu_prelude = alloy_sb_take(&sb);
}

const char *alloy_prelude(alloy_codegen_target target) {
    switch (target) {
    case ALLOY_TARGET_CPU:
        pthread_once(&cpu_once, build_cpu_prelude);
        return cpu_prelude;
    case ALLOY_TARGET_CUDA:
    default:
        return NULL; /* not written yet */
    }
}
