/* cmd_info.c — `alloy info`: what this installation can do here and why not
 * (backends and the reason one is unavailable, the device "auto" picks, the
 * host compiler, the cache, the thread count), for bug reports and setup. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char info_usage[] =
    "usage: alloy info\n"
    "\n"
    "Prints alloy's version, every backend of this build (available or the reason\n"
    "it is not), the device \"auto\" resolves to (ALLOY_DEVICE overrides it), the\n"
    "host C++ compiler (ALLOY_CXX, else c++) and its version, the disk cache\n"
    "(location, entries, size) and the CPU thread count (ALLOY_NUM_THREADS).\n";

/* First line of `<compiler> --version`, or NULL. The value of ALLOY_CXX is
 * handed to the shell as the CPU backend would run it (it may be e.g.
 * "ccache g++"). */
static int compiler_version(const char *cxx, char *buf, size_t len) {
    char cmd[1024];
    if (snprintf(cmd, sizeof cmd, "%s --version 2>/dev/null", cxx) >= (int)sizeof cmd) return -1;
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    int ok = fgets(buf, (int)len, p) != NULL;
    char sink[256];
    while (fgets(sink, sizeof sink, p)) {
    }
    int rc = pclose(p);
    if (!ok || rc != 0) return -1;
    buf[strcspn(buf, "\r\n")] = '\0';
    return 0;
}

static void human_bytes(char *buf, size_t len, int64_t b) {
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0) snprintf(buf, len, "%" PRId64 " B", b);
    else snprintf(buf, len, "%.1f %s", v, units[u]);
}

int cmd_info(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(info_usage, stdout);
            return CLI_OK;
        }
        return cli_usage("unexpected argument \"%s\"", argv[i]);
    }

    printf("alloy %s\n", alloy_version());

    printf("\nbackends:\n");
    int n = alloy_backend_count();
    for (int i = 0; i < n; i++) {
        const char *name = NULL, *detail = NULL;
        int available = 0;
        if (alloy_backend_info(i, &name, &available, &detail) != ALLOY_OK) {
            printf("  #%d: %s\n", i, alloy_last_error());
            continue;
        }
        printf("  %-6s %s%s%s\n", name ? name : "?", available ? "available" : "unavailable",
               detail && *detail ? ": " : "", detail ? detail : "");
    }

    const char *env_dev = getenv("ALLOY_DEVICE");
    alloy_device *dev = NULL;
    printf("\ndevice \"auto\"%s%s%s: ", env_dev ? " (ALLOY_DEVICE=" : "", env_dev ? env_dev : "",
           env_dev ? ")" : "");
    if (alloy_device_get("auto", &dev) == ALLOY_OK) {
        printf("%s (%s)\n", alloy_device_name(dev), alloy_device_description(dev));
        printf("  tensor maps: %s; overlapping launches: %s\n", alloy_device_has_tensor_maps(dev) ? "yes" : "no",
               alloy_device_overlaps_launches(dev) ? "yes" : "no (such launches run as ordinary ones)");
    } else
        printf("none: %s\n", alloy_last_error());

    const char *cxx_env = getenv("ALLOY_CXX");
    const char *cxx = cxx_env && *cxx_env ? cxx_env : "c++";
    char version[512];
    printf("\nhost C++ compiler: %s%s\n", cxx, cxx_env && *cxx_env ? " (ALLOY_CXX)" : " (default; set ALLOY_CXX to change)");
    if (compiler_version(cxx, version, sizeof version) == 0) printf("  version: %s\n", version);
    else printf("  version: unknown (`%s --version` failed: is it installed and on PATH?)\n", cxx);

    printf("\ncache:\n");
    const char *dir = alloy_cache_dir();
    if (!alloy_cache_enabled() || !dir) {
        printf("  disabled (ALLOY_CACHE=0): compiled kernels live in memory only\n");
    } else {
        int64_t entries = 0, bytes = 0;
        printf("  dir: %s\n", dir);
        if (alloy_cache_stats(&entries, &bytes) == ALLOY_OK) {
            char hb[64];
            human_bytes(hb, sizeof hb, bytes);
            printf("  entries: %" PRId64 "\n  size: %s\n", entries, hb);
        } else {
            printf("  stats: %s\n", alloy_last_error());
        }
    }

    const char *threads = getenv("ALLOY_NUM_THREADS");
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("\nCPU threads: ");
    if (threads && *threads) printf("ALLOY_NUM_THREADS=%s\n", threads);
    else printf("ALLOY_NUM_THREADS unset (%ld online processors)\n", ncpu);
    const char *dbg = getenv("ALLOY_CPU_DEBUG");
    if (dbg && *dbg) printf("ALLOY_CPU_DEBUG=%s\n", dbg);
    return CLI_OK;
}
