/* cmd_cache.c — `alloy cache dir|stats|clear`: find, measure and empty the
 * on-disk kernel cache (compiled shared objects / cubins) from a shell. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char cache_usage[] =
    "usage: alloy cache dir      print the cache directory\n"
    "       alloy cache stats    number of entries and total size in bytes\n"
    "       alloy cache clear    delete every entry of the disk cache\n"
    "\n"
    "Location: ALLOY_CACHE_DIR, else $XDG_CACHE_HOME/alloy, else ~/.cache/alloy.\n"
    "ALLOY_CACHE=0 disables the disk cache; then every subcommand fails (exit 1).\n";

int cmd_cache(int argc, char **argv) {
    if (argc < 2) return cli_usage("missing subcommand: dir, stats or clear");
    if (cli_is_help(argv[1])) {
        fputs(cache_usage, stdout);
        return CLI_OK;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "dir") && strcmp(sub, "stats") && strcmp(sub, "clear"))
        return cli_usage("unknown cache subcommand \"%s\" (dir, stats or clear)", sub);
    for (int i = 2; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(cache_usage, stdout);
            return CLI_OK;
        }
        return cli_usage("unexpected argument \"%s\"", argv[i]);
    }
    const char *dir = alloy_cache_dir();
    if (!alloy_cache_enabled() || !dir)
        return cli_error("the disk cache is disabled (ALLOY_CACHE=0)");

    if (!strcmp(sub, "dir")) {
        printf("%s\n", dir);
        return CLI_OK;
    }
    int64_t entries = 0, bytes = 0;
    alloy_status st = alloy_cache_stats(&entries, &bytes);
    if (!strcmp(sub, "stats")) {
        if (st != ALLOY_OK) return cli_alloy_error(st);
        printf("dir: %s\nentries: %" PRId64 "\nbytes: %" PRId64 "\n", dir, entries, bytes);
        return CLI_OK;
    }
    if ((st = alloy_cache_clear()) != ALLOY_OK) return cli_alloy_error(st);
    printf("cleared %s: %" PRId64 " entries, %" PRId64 " bytes\n", dir, entries, bytes);
    return CLI_OK;
}
