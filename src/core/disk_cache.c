/* disk_cache.c — where compiled kernels live on disk, and how entries are
 * written (temporary file + checksum trailer + atomic rename) and verified.
 *
 * The location is read from the environment on every call, so a program (or
 * test) may point ALLOY_CACHE_DIR elsewhere at run time. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloy/cache.h"
#include "disk_cache.h"
#include "error.h"
#include "sha256.h"

static const char MAGIC[8] = {'A', 'L', 'L', 'O', 'Y', 'S', 'U', 'M'};
/* the directories of entries: compiled kernels per backend, and the CUDA
 * sources that passed the NVRTC compile check (ALLOY_COMPILE_CHECK=cuda) */
static const char *const BACKEND_DIRS[] = {"cpu", "cuda", "cuda-check", NULL};

int alloy_cache_enabled(void) {
    const char *e = getenv("ALLOY_CACHE");
    return !(e && (strcmp(e, "0") == 0 || strcmp(e, "off") == 0 || strcmp(e, "false") == 0));
}

const char *alloy_cache_dir(void) {
    static _Thread_local char dir[PATH_MAX];
    if (!alloy_cache_enabled()) return NULL;
    const char *e = getenv("ALLOY_CACHE_DIR");
    if (e && *e) snprintf(dir, sizeof dir, "%s", e);
    else if ((e = getenv("XDG_CACHE_HOME")) && *e) snprintf(dir, sizeof dir, "%s/alloy", e);
    else if ((e = getenv("HOME")) && *e) snprintf(dir, sizeof dir, "%s/.cache/alloy", e);
    else return NULL;
    return dir;
}

/* mkdir -p */
static int make_dirs(const char *path) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
    return 0;
}

const char *alloy_disk_cache_backend_dir(const char *backend) {
    static _Thread_local char dir[PATH_MAX];
    static int warned;
    const char *root = alloy_cache_dir();
    if (!root) return NULL;
    snprintf(dir, sizeof dir, "%s/%s", root, backend);
    if (make_dirs(dir) != 0) {
        if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
            alloy_warn("cannot create the kernel cache directory %s (%s); compiled kernels are kept "
                       "in memory only. Set ALLOY_CACHE_DIR to a writable directory.",
                       dir, strerror(errno));
        return NULL;
    }
    return dir;
}

char *alloy_disk_cache_path(const char *backend, const char *key, const char *ext) {
    const char *dir = alloy_disk_cache_backend_dir(backend);
    if (!dir) return NULL;
    size_t n = strlen(dir) + strlen(key) + strlen(ext) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s%s", dir, key, ext);
    return p;
}

char *alloy_disk_cache_temp_path(const char *final_path) {
    static unsigned long counter;
    unsigned long c = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    size_t n = strlen(final_path) + 64;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s.%ld.%lu.tmp", final_path, (long)getpid(), c);
    return p;
}

static int hash_fd(int fd, size_t len, uint8_t digest[32]) {
    alloy_sha256 s;
    alloy_sha256_init(&s);
    char buf[65536];
    size_t left = len;
    if (lseek(fd, 0, SEEK_SET) != 0) return -1;
    while (left) {
        ssize_t r = read(fd, buf, left < sizeof buf ? left : sizeof buf);
        if (r <= 0) {
            if (r < 0 && errno == EINTR) continue;
            return -1;
        }
        alloy_sha256_update(&s, buf, (size_t)r);
        left -= (size_t)r;
    }
    alloy_sha256_final(&s, digest);
    return 0;
}

alloy_status alloy_disk_cache_seal(const char *tmp_path, const char *final_path) {
    int fd = open(tmp_path, O_RDWR);
    if (fd < 0)
        return alloy_error(ALLOY_ERROR_IO, "cannot open %s to seal it: %s", tmp_path, strerror(errno));
    struct stat st;
    uint8_t trailer[ALLOY_CACHE_TRAILER_SIZE];
    if (fstat(fd, &st) != 0 || hash_fd(fd, (size_t)st.st_size, trailer + 8) != 0) {
        close(fd);
        return alloy_error(ALLOY_ERROR_IO, "cannot read %s: %s", tmp_path, strerror(errno));
    }
    memcpy(trailer, MAGIC, 8);
    uint64_t len = (uint64_t)st.st_size;
    for (int i = 0; i < 8; i++) trailer[40 + i] = (uint8_t)(len >> (8 * i));
    if (lseek(fd, 0, SEEK_END) < 0 || write(fd, trailer, sizeof trailer) != (ssize_t)sizeof trailer ||
        fsync(fd) != 0) {
        close(fd);
        return alloy_error(ALLOY_ERROR_IO, "cannot write %s: %s", tmp_path, strerror(errno));
    }
    close(fd);
    if (rename(tmp_path, final_path) != 0)
        return alloy_error(ALLOY_ERROR_IO, "cannot rename %s to %s: %s", tmp_path, final_path,
                           strerror(errno));
    return ALLOY_OK;
}

alloy_status alloy_disk_cache_verify(const char *path, size_t *payload_len, int *corrupt) {
    *corrupt = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return alloy_error(ALLOY_ERROR_IO, "no cache entry %s", path);
    struct stat st;
    uint8_t trailer[ALLOY_CACHE_TRAILER_SIZE], digest[32];
    alloy_status status = ALLOY_OK;
    if (fstat(fd, &st) != 0 || st.st_size < ALLOY_CACHE_TRAILER_SIZE ||
        pread(fd, trailer, sizeof trailer, st.st_size - ALLOY_CACHE_TRAILER_SIZE) !=
            (ssize_t)sizeof trailer) {
        *corrupt = 1;
    } else {
        uint64_t len = 0;
        for (int i = 0; i < 8; i++) len |= (uint64_t)trailer[40 + i] << (8 * i);
        if (memcmp(trailer, MAGIC, 8) != 0 || len != (uint64_t)st.st_size - ALLOY_CACHE_TRAILER_SIZE ||
            hash_fd(fd, (size_t)len, digest) != 0 || memcmp(digest, trailer + 8, 32) != 0)
            *corrupt = 1;
        else if (payload_len)
            *payload_len = (size_t)len;
    }
    close(fd);
    if (*corrupt) status = alloy_error(ALLOY_ERROR_IO, "cache entry %s is corrupt", path);
    return status;
}

alloy_status alloy_disk_cache_read(const char *path, void **data, size_t *len, int *corrupt) {
    size_t n = 0;
    alloy_status st = alloy_disk_cache_verify(path, &n, corrupt);
    if (st != ALLOY_OK) return st;
    FILE *f = fopen(path, "rb");
    if (!f) return alloy_error(ALLOY_ERROR_IO, "cannot open %s: %s", path, strerror(errno));
    void *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory reading %s", path);
    }
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    if (got != n) {
        free(buf);
        return alloy_error(ALLOY_ERROR_IO, "short read of %s", path);
    }
    *data = buf;
    *len = n;
    return ALLOY_OK;
}

/* An entry name: 64 hex digits, then an extension or a temporary suffix. */
static int is_entry_name(const char *name) {
    for (int i = 0; i < 64; i++) {
        char c = name[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return 0;
    }
    return name[64] == '.' || name[64] == '\0';
}

static alloy_status walk(int remove_entries, int64_t *entries, int64_t *bytes) {
    const char *root = alloy_cache_dir();
    if (entries) *entries = 0;
    if (bytes) *bytes = 0;
    if (!root) return ALLOY_OK;
    char rootbuf[PATH_MAX];
    snprintf(rootbuf, sizeof rootbuf, "%s", root);
    for (int b = 0; BACKEND_DIRS[b]; b++) {
        char dir[PATH_MAX + 16];
        snprintf(dir, sizeof dir, "%s/%s", rootbuf, BACKEND_DIRS[b]);
        DIR *d = opendir(dir);
        if (!d) continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!is_entry_name(e->d_name)) continue;
            char path[PATH_MAX + 400];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            struct stat st;
            if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
            if (remove_entries) {
                if (unlink(path) != 0 && errno != ENOENT) {
                    closedir(d);
                    return alloy_error(ALLOY_ERROR_IO, "cannot remove %s: %s", path, strerror(errno));
                }
            }
            if (entries) (*entries)++;
            if (bytes) *bytes += st.st_size;
        }
        closedir(d);
    }
    return ALLOY_OK;
}

alloy_status alloy_cache_stats(int64_t *entries, int64_t *bytes) { return walk(0, entries, bytes); }

alloy_status alloy_cache_clear(void) { return walk(1, NULL, NULL); }
