/* test_core_cache.c — the disk-cache API through the public interface:
 * where alloy_cache_dir points (ALLOY_CACHE_DIR, then XDG_CACHE_HOME/alloy,
 * then HOME/.cache/alloy; ALLOY_CACHE=0 disables it), read from the
 * environment on every call, so this test changes it with setenv/unsetenv;
 * alloy_cache_stats counting the entries of two freshly compiled kernels in
 * a new temporary directory (checked against a directory walk written here)
 * and the records of passed NVRTC compile checks (cuda-check/);
 * alloy_cache_clear emptying the cache without touching unrelated files. */
#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

/* ---- saving and restoring the environment ----------------------------------- */

static const char *const VARS[] = {"ALLOY_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "ALLOY_CACHE"};
#define N_VARS 4
static char *saved[N_VARS];

static void save_env(void) {
    for (int i = 0; i < N_VARS; i++) {
        const char *v = getenv(VARS[i]);
        saved[i] = v ? strdup(v) : NULL;
    }
}

static void restore_env(void) {
    for (int i = 0; i < N_VARS; i++) {
        if (saved[i]) setenv(VARS[i], saved[i], 1);
        else unsetenv(VARS[i]);
    }
}

static void clear_env(void) {
    for (int i = 0; i < N_VARS; i++) unsetenv(VARS[i]);
}

static int dir_is(const char *want) {
    const char *d = alloy_cache_dir();
    if (!want) return d == NULL;
    return d && strcmp(d, want) == 0;
}

static void test_cache_dir_environment(void) {
    clear_env();
    setenv("HOME", "/home/someone", 1);
    CHECK(alloy_cache_enabled());
    CHECK(dir_is("/home/someone/.cache/alloy"));
    setenv("XDG_CACHE_HOME", "/xdg/cache", 1);
    CHECK(dir_is("/xdg/cache/alloy"));
    setenv("ALLOY_CACHE_DIR", "/explicit/dir", 1);
    CHECK(dir_is("/explicit/dir"));
    /* empty values count as unset */
    setenv("ALLOY_CACHE_DIR", "", 1);
    CHECK(dir_is("/xdg/cache/alloy"));
    setenv("XDG_CACHE_HOME", "", 1);
    CHECK(dir_is("/home/someone/.cache/alloy"));
    /* each call reads the environment afresh */
    setenv("HOME", "/other/home", 1);
    CHECK(dir_is("/other/home/.cache/alloy"));
    setenv("ALLOY_CACHE_DIR", "/x", 1);
    CHECK(dir_is("/x"));
    /* ALLOY_CACHE=0 (or off/false) disables the cache whatever the location */
    static const char *const off[] = {"0", "off", "false"};
    for (int i = 0; i < 3; i++) {
        setenv("ALLOY_CACHE", off[i], 1);
        CHECK_MSG(!alloy_cache_enabled(), "ALLOY_CACHE=%s", off[i]);
        CHECK_MSG(dir_is(NULL), "ALLOY_CACHE=%s still gives %s", off[i], alloy_cache_dir());
    }
    setenv("ALLOY_CACHE", "1", 1);
    CHECK(alloy_cache_enabled());
    CHECK(dir_is("/x"));
    /* no location at all: the implementation has no directory to offer */
    clear_env();
    CHECK(dir_is(NULL));
    restore_env();
}

/* ---- a directory walk of our own ------------------------------------------------ */

static int hex_entry_name(const char *n) {
    for (int i = 0; i < 64; i++)
        if (!n[i] || !strchr("0123456789abcdef", n[i])) return 0;
    return n[64] == '.' || n[64] == '\0';
}

/* Entries (regular files with a 64-hex-digit name) under root/cpu and
 * root/cuda, and their total size. */
static void walk_entries(const char *root, int64_t *entries, int64_t *bytes) {
    *entries = 0;
    *bytes = 0;
    static const char *const sub[] = {"cpu", "cuda", "cuda-check"};
    for (int s = 0; s < 3; s++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", root, sub[s]);
        DIR *d = opendir(dir);
        if (!d) continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            struct stat st;
            if (!hex_entry_name(e->d_name) || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
            (*entries)++;
            *bytes += st.st_size;
        }
        closedir(d);
    }
}

static int write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* ---- stats and clear ------------------------------------------------------------ */

/* Compiles a new kernel (its body holds a per-run constant, so no earlier run
 * shares its key); returns from_cache, or -1 on failure. */
static int compile_kernel(const char *name, double constant) {
    char body[256];
    snprintf(body, sizeof body,
             "uint i = thread_position_in_grid.x;\nout[i] = a[i] * %.17gf + 1.0f;\n", constant);
    const char *in_names[] = {"a"}, *out_names[] = {"out"};
    alloy_kernel *k = NULL;
    alloy_launch *l = NULL;
    alloy_array *a = NULL;
    int64_t n = 33;
    float host[33] = {0};
    int from = -1;
    CHECK_OK(alloy_kernel_new(name, 1, in_names, 1, out_names, body, NULL, 1, 0, &k));
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_array_from_host(harness_device(), ALLOY_FLOAT32, 1, &n, host, &a));
    if (k && l && a) {
        CHECK_OK(alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32));
        CHECK_OK(alloy_launch_set_grid(l, 33, 1, 1));
        CHECK_OK(alloy_launch_set_threadgroup(l, 32, 1, 1));
        alloy_compile_result cr;
        memset(&cr, 0, sizeof cr);
        alloy_status st = alloy_kernel_compile(k, 1, &a, l, harness_device(), &cr);
        CHECK_MSG(st == ALLOY_OK, "%s: %s", alloy_status_name(st), alloy_last_error());
        if (st == ALLOY_OK) from = cr.from_cache;
        alloy_compile_result_clear(&cr);
    }
    alloy_array_free(a);
    alloy_launch_free(l);
    alloy_kernel_free(k);
    return from;
}

static void test_stats_and_clear(void) {
    const char *tmp = getenv("TMPDIR");
    char root[4096], cache[4200], path[4400];
    snprintf(root, sizeof root, "%s/alloy-core-cache-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) {
        SKIP("cannot create a temporary directory");
        return;
    }
    snprintf(cache, sizeof cache, "%s/cache", root); /* does not exist yet */
    setenv("ALLOY_CACHE_DIR", cache, 1);
    unsetenv("ALLOY_CACHE");
    CHECK(dir_is(cache));
    int cpu = alloy_device_backend(harness_device()) == ALLOY_BACKEND_CPU;

    int64_t entries = -1, bytes = -1, ref_entries, ref_bytes;
    CHECK_OK(alloy_cache_stats(&entries, &bytes));
    CHECK(entries == 0 && bytes == 0);

    double c1 = harness_uniform(1, 2), c2 = harness_uniform(3, 4);
    int f1 = compile_kernel("cache_probe_one", c1);
    int f2 = compile_kernel("cache_probe_two", c2);
    CHECK(f1 == 0 && f2 == 0); /* compiled now */
    CHECK_OK(alloy_cache_stats(&entries, &bytes));
    walk_entries(cache, &ref_entries, &ref_bytes);
    CHECK_MSG(entries == ref_entries && bytes == ref_bytes,
              "stats %lld entries / %lld bytes, the directory holds %lld / %lld",
              (long long)entries, (long long)bytes, (long long)ref_entries, (long long)ref_bytes);
    if (cpu) CHECK_MSG(entries == 2, "%lld entries after two kernels", (long long)entries);
    else CHECK(entries >= 2);
    CHECK(bytes > 0);
    int64_t after_two = entries;
    CHECK_OK(alloy_cache_stats(NULL, &bytes)); /* either output may be NULL */
    CHECK_OK(alloy_cache_stats(&entries, NULL));
    CHECK(entries == after_two);

    /* the same kernel again: from memory, no new entry */
    CHECK(compile_kernel("cache_probe_one", c1) == 1);
    CHECK_OK(alloy_cache_stats(&entries, &bytes));
    CHECK(entries == after_two);

    /* unrelated files in and around the cache directory */
    snprintf(path, sizeof path, "%s/notes.txt", cache);
    CHECK(write_text(path, "mine") == 0);
    snprintf(path, sizeof path, "%s/%s/README", cache, cpu ? "cpu" : "cuda");
    CHECK(write_text(path, "mine too") == 0);
    snprintf(path, sizeof path, "%s/%s/%s", cache, cpu ? "cpu" : "cuda",
             "0123456789abcdef0123456789abcdef0123456789abcdef0123456789ABCDEF.so");
    CHECK(write_text(path, "upper-case hex: not an entry name") == 0);
    snprintf(path, sizeof path, "%s/other", cache);
    CHECK(mkdir(path, 0755) == 0);
    snprintf(path, sizeof path, "%s/other/%s", cache,
             "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.so");
    CHECK(write_text(path, "not in a backend directory") == 0);
    snprintf(path, sizeof path, "%s/sibling.txt", root);
    CHECK(write_text(path, "next to the cache") == 0);
    CHECK_OK(alloy_cache_stats(&entries, &bytes));
    CHECK(entries == after_two); /* none of them counts */

    /* disabled: stats are empty and clear removes nothing */
    setenv("ALLOY_CACHE", "0", 1);
    CHECK_OK(alloy_cache_stats(&entries, &bytes));
    CHECK(entries == 0 && bytes == 0);
    CHECK_OK(alloy_cache_clear());
    unsetenv("ALLOY_CACHE");
    CHECK_OK(alloy_cache_stats(&entries, &bytes));
    CHECK(entries == after_two);

    /* a record of a passed NVRTC compile check is an entry too */
    snprintf(path, sizeof path, "%s/cuda-check", cache);
    CHECK(mkdir(path, 0755) == 0);
    char record[4400];
    snprintf(record, sizeof record, "%s/cuda-check/%s", cache,
             "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.ok");
    CHECK(write_text(record, "sealed elsewhere") == 0);
    CHECK_OK(alloy_cache_stats(&entries, &bytes));
    CHECK_MSG(entries == after_two + 1, "%lld entries with a compile-check record", (long long)entries);

    /* clear: every entry goes, nothing else does */
    CHECK_OK(alloy_cache_clear());
    CHECK(!exists(record));
    CHECK_OK(alloy_cache_stats(&entries, &bytes));
    CHECK(entries == 0 && bytes == 0);
    walk_entries(cache, &ref_entries, &ref_bytes);
    CHECK(ref_entries == 0);
    snprintf(path, sizeof path, "%s/notes.txt", cache);
    CHECK(exists(path));
    snprintf(path, sizeof path, "%s/%s/README", cache, cpu ? "cpu" : "cuda");
    CHECK(exists(path));
    snprintf(path, sizeof path, "%s/%s/%s", cache, cpu ? "cpu" : "cuda",
             "0123456789abcdef0123456789abcdef0123456789abcdef0123456789ABCDEF.so");
    CHECK(exists(path));
    snprintf(path, sizeof path, "%s/other/%s", cache,
             "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.so");
    CHECK(exists(path));
    snprintf(path, sizeof path, "%s/sibling.txt", root);
    CHECK(exists(path));
    CHECK(exists(cache));
    CHECK_OK(alloy_cache_clear()); /* clearing an empty cache is fine */

    /* the in-memory cache is not cleared; a new kernel makes one new entry */
    CHECK(compile_kernel("cache_probe_one", c1) == 1);
    CHECK(compile_kernel("cache_probe_three", harness_uniform(5, 6)) == 0);
    CHECK_OK(alloy_cache_stats(&entries, &bytes));
    if (cpu) CHECK(entries == 1);
    else CHECK(entries >= 1);

    /* stats of a cache directory that does not exist */
    snprintf(path, sizeof path, "%s/never-created", root);
    setenv("ALLOY_CACHE_DIR", path, 1);
    CHECK_OK(alloy_cache_stats(&entries, &bytes));
    CHECK(entries == 0 && bytes == 0);
    CHECK_OK(alloy_cache_clear());

    restore_env();
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void) {
    harness_seed();
    save_env();
    RUN(test_cache_dir_environment);
    RUN(test_stats_and_clear);
    restore_env();
    return harness_finish();
}
