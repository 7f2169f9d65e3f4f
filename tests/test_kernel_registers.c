/* test_kernel_registers.c — the mLSTM training kernels keep their occupancy on CUDA: every specialisation
 * the chunk-parallel backward (and the forward it recomputes) compiles at xLSTM 7B's head sizes (DHQK 256,
 * DHHV 512) uses at most 128 registers a thread, so that two threadgroups of 256 threads fit an SM.
 *
 * Why a test: a restructuring that leaves every result alone can still cost a third of the time. Turning
 * the backward's phase 3 into the body of a loop that ran once took its float16-tile specialisation from
 * 122 registers to 159 — one threadgroup an SM, the float32 DEFAULT backward 12.1 -> 16.5 ms on an H200 —
 * and nothing failed (bench/experiments/NOTES.md). Runs on the CPU with ALLOY_COMPILE_CHECK=cuda and
 * ALLOY_COMPILE_CHECK_DUMP (NVRTC, no GPU), then reads each cubin's register count (the EIATTR_REGCOUNT
 * attribute of its .nv.info section). Skips where NVRTC is not installed. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloy/alloy.h"
#include "harness.h"

enum { REG_BUDGET = 128 };

static char g_dump[256];

/* The whole of a file, or NULL. */
static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *b = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        const long len = ftell(f);
        if (len > 0 && fseek(f, 0, SEEK_SET) == 0 && (b = malloc((size_t)len + 1)) != NULL) {
            if (fread(b, 1, (size_t)len, f) != (size_t)len) {
                free(b);
                b = NULL;
            } else {
                b[len] = 0;
                *n = (size_t)len;
            }
        }
    }
    fclose(f);
    return b;
}

static uint64_t rd(const unsigned char *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* The register count of a cubin's kernel: the value of the EIATTR_REGCOUNT (0x2f) attribute in its
 * .nv.info section (entries: format byte, attribute byte, then by format nothing, a byte, a 16-bit value,
 * or a 16-bit size and that many bytes — the count's is (symbol index, count)). -1 when absent. */
static int cubin_registers(const unsigned char *b, size_t n) {
    if (n < 64 || memcmp(b, "\x7f" "ELF", 4) != 0 || b[4] != 2) return -1; /* 64-bit ELF */
    const uint64_t shoff = rd(b + 0x28, 8);
    const unsigned shentsize = (unsigned)rd(b + 0x3a, 2), shnum = (unsigned)rd(b + 0x3c, 2);
    const unsigned shstrndx = (unsigned)rd(b + 0x3e, 2);
    if (shoff + (uint64_t)shnum * shentsize > n || shstrndx >= shnum) return -1;
    const unsigned char *strh = b + shoff + (uint64_t)shstrndx * shentsize;
    const uint64_t stroff = rd(strh + 0x18, 8);
    for (unsigned s = 0; s < shnum; s++) {
        const unsigned char *h = b + shoff + (uint64_t)s * shentsize;
        const uint64_t nm = stroff + rd(h, 4), off = rd(h + 0x18, 8), size = rd(h + 0x20, 8);
        if (nm >= n || off + size > n || strncmp((const char *)b + nm, ".nv.info", 8) != 0) continue;
        for (uint64_t p = off; p + 4 <= off + size;) {
            const unsigned fmt = b[p], attr = b[p + 1];
            const uint64_t len = fmt == 4 ? 4 + rd(b + p + 2, 2) : fmt == 3 ? 4 : fmt == 2 ? 3 : 2;
            if (fmt == 4 && attr == 0x2f && len >= 12 && p + 12 <= off + size) return (int)rd(b + p + 8, 4);
            p += len;
        }
    }
    return -1;
}

/* One backward at the 7B head sizes on the CPU (every specialisation it compiles is dumped). Returns
 * 0, or 1 when NVRTC is not available (skip). */
static int run_backward(alloy_dtype dt, alloy_mlstm_backward_method method) {
    alloy_device *dev = NULL;
    alloy_stream *s = NULL;
    CHECK_OK(alloy_device_get("cpu", &dev));
    CHECK_OK(alloy_stream_default(dev, &s));
    const int64_t B = 1, NH = 2, S = 70, DK = 256, DV = 512;
    const int64_t sq[4] = {B, NH, S, DK}, sv[4] = {B, NH, S, DV}, sg[3] = {B, NH, S};
    const size_t nv = (size_t)(B * NH * S * DV);
    /* values in [-1, 1): float32, or bfloat16 as float32's upper halves */
    float *h = malloc(sizeof(float) * nv);
    uint16_t *h16 = malloc(sizeof(uint16_t) * nv);
    for (size_t e = 0; e < nv; e++) {
        h[e] = (float)harness_uniform(-1, 1);
        uint32_t u;
        memcpy(&u, &h[e], 4);
        h16[e] = (uint16_t)(u >> 16);
    }
    const void *hd = dt == ALLOY_BFLOAT16 ? (const void *)h16 : (const void *)h;
    alloy_array *q = NULL, *k = NULL, *v = NULL, *i = NULL, *f = NULL, *dh = NULL;
    CHECK_OK(alloy_array_from_host(dev, dt, 4, sq, hd, &q));
    CHECK_OK(alloy_array_from_host(dev, dt, 4, sq, hd, &k));
    CHECK_OK(alloy_array_from_host(dev, dt, 4, sv, hd, &v));
    CHECK_OK(alloy_array_from_host(dev, dt, 3, sg, hd, &i));
    CHECK_OK(alloy_array_from_host(dev, dt, 3, sg, hd, &f));
    CHECK_OK(alloy_array_from_host(dev, dt, 4, sv, hd, &dh));
    alloy_array *dq = NULL, *dk = NULL, *dv = NULL, *di = NULL, *df = NULL;
    const alloy_status st = alloy_mlstm_chunkwise_backward_with_method(
        q, k, v, i, f, NULL, NULL, NULL, NULL, dh, NULL, NULL, NULL, 64, 1e-6, method, s, &dq, &dk, &dv, &di,
        &df, NULL, NULL, NULL);
    int skip = 0;
    /* no NVRTC here ("cannot check kernel ... for CUDA"), or no CUDA backend in this build */
    if (st != ALLOY_OK && (strstr(alloy_last_error(), "cannot check kernel") ||
                           strstr(alloy_last_error(), "ALLOY_COMPILE_CHECK=cuda: no backend")))
        skip = 1;
    else CHECK_MSG(st == ALLOY_OK, "backward %s: %s", alloy_dtype_name(dt), alloy_last_error());
    alloy_array *all[] = {q, k, v, i, f, dh, dq, dk, dv, di, df};
    for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
    free(h), free(h16);
    return skip;
}

static void test_mlstm_training_registers(void) {
    /* bfloat16 on the chunk-parallel path; float32 at DEFAULT on float16 tiles (the CPU takes them with
     * ALLOY_MLSTM_PATH=scaled) */
    if (run_backward(ALLOY_BFLOAT16, ALLOY_MLSTM_BACKWARD_CHUNKED)) {
        SKIP("NVRTC is not available (ALLOY_COMPILE_CHECK=cuda)");
        return;
    }
    setenv("ALLOY_MLSTM_PATH", "scaled", 1);
    run_backward(ALLOY_FLOAT32, ALLOY_MLSTM_BACKWARD_CHUNKED_DEFAULT);
    unsetenv("ALLOY_MLSTM_PATH");
    DIR *d = opendir(g_dump);
    CHECK(d != NULL);
    if (!d) return;
    int seen = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".cubin") != 0) continue;
        if (strncmp(e->d_name, "alloy_mlstm_chunkwise", 21) != 0) continue; /* the forward and the backward */
        char path[600];
        snprintf(path, sizeof path, "%s/%s", g_dump, e->d_name);
        size_t n = 0;
        unsigned char *b = read_all(path, &n);
        const int regs = b ? cubin_registers(b, n) : -1;
        free(b);
        /* which specialisation: its template values as the generated source declares them */
        char phase[64] = "?";
        snprintf(path, sizeof path, "%s/%.*s.cu", g_dump, (int)(len - 6), e->d_name);
        unsigned char *src = read_all(path, &n);
        const char *at = src ? strstr((const char *)src, "#define ALLOY_TEMPLATE_PHASE ") : NULL;
        if (at) snprintf(phase, sizeof phase, "%.*s", (int)strcspn(at + 29, "\n"), at + 29);
        free(src);
        CHECK_MSG(regs > 0 && regs <= REG_BUDGET, "%s (PHASE %s): %d registers a thread, budget %d", e->d_name,
                  phase, regs, REG_BUDGET);
        seen++;
    }
    closedir(d);
    CHECK_MSG(seen >= 6, "only %d mLSTM kernels were compiled and dumped", seen);
}

int main(void) {
    harness_seed();
    /* a fresh cache (so that every specialisation compiles, and so is checked and dumped) and the dump */
    char cache[300];
    snprintf(g_dump, sizeof g_dump, "%s/alloy-regs-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_dump)) return 1;
    snprintf(cache, sizeof cache, "%s/cache", g_dump);
    setenv("ALLOY_CACHE_DIR", cache, 1);
    setenv("ALLOY_COMPILE_CHECK", "cuda", 1);
    setenv("ALLOY_COMPILE_CHECK_DUMP", g_dump, 1);
    RUN(test_mlstm_training_registers);
    /* the dump and the cache are scratch */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dump);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dump);
    return harness_finish();
}
