/* test_kernel_registers.c — kernels whose speed hangs on what ptxas makes of them keep it on CUDA, checked
 * without a GPU:
 * - the mLSTM training kernels keep their occupancy: every specialisation the chunk-parallel backward (and
 *   the forward it recomputes) compiles at xLSTM 7B's head sizes (DHQK 256, DHHV 512) uses at most 128
 *   registers a thread, so that two threadgroups of 256 threads fit an SM;
 * - the Hopper GEMM (matmul_wgmma_tma, as the op launches it, for 16-bit, float32 and float64 results) keeps
 *   its wgmma pipelined and spills nothing: ptxas for sm_90a reports no C75xx message (a serialised wgmma,
 *   C7514 / C7520: each made to wait for the one before, about 20% of the GEMM's speed; or a warpgroup wait
 *   or arrive it had to inject, C7517 / C7519) and no spill bytes.
 *
 * Why a test: a restructuring that leaves every result alone can still cost a third of the time. Turning
 * the backward's phase 3 into the body of a loop that ran once took its float16-tile specialisation from
 * 122 registers to 159 — one threadgroup an SM, the float32 DEFAULT backward 12.1 -> 16.5 ms on an H200 —
 * and nothing failed; a vector type built from the GEMM's accumulators made the compiler carry them in
 * integer registers through the products and ptxas serialised every wgmma (bench/experiments/NOTES.md).
 * Runs on the CPU with ALLOY_COMPILE_CHECK=cuda and ALLOY_COMPILE_CHECK_DUMP (NVRTC, no GPU), then reads
 * each mLSTM cubin's register count (the EIATTR_REGCOUNT attribute of its .nv.info section) and runs the
 * toolkit's ptxas over the GEMM's PTX. Skips where NVRTC (or, for the GEMM, ptxas) is not installed. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloy/alloy.h"
#include "harness.h"
#include "kernel_util.h"
#include "ops/catalog.h"

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

/* Calls check(name, stem length) for each file of the dump whose name starts with prefix and ends with
 * suffix; returns how many there were. */
static int for_each_dump(const char *prefix, const char *suffix, void (*check)(const char *name, size_t stem)) {
    DIR *d = opendir(g_dump);
    CHECK(d != NULL);
    if (!d) return 0;
    int seen = 0;
    const size_t np = strlen(prefix), ns = strlen(suffix);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const size_t len = strlen(e->d_name);
        if (len <= ns || strcmp(e->d_name + len - ns, suffix) != 0 || strncmp(e->d_name, prefix, np) != 0) continue;
        check(e->d_name, len - ns);
        seen++;
    }
    closedir(d);
    return seen;
}

/* One mLSTM cubin: its register count within the budget. */
static void check_mlstm_cubin(const char *name, size_t stem) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", g_dump, name);
    size_t n = 0;
    unsigned char *b = read_all(path, &n);
    const int regs = b ? cubin_registers(b, n) : -1;
    free(b);
    /* which specialisation: its template values as the generated source declares them */
    char phase[64] = "?";
    snprintf(path, sizeof path, "%s/%.*s.cu", g_dump, (int)stem, name);
    unsigned char *src = read_all(path, &n);
    const char *at = src ? strstr((const char *)src, "#define ALLOY_TEMPLATE_PHASE ") : NULL;
    if (at) snprintf(phase, sizeof phase, "%.*s", (int)strcspn(at + 29, "\n"), at + 29);
    free(src);
    CHECK_MSG(regs > 0 && regs <= REG_BUDGET, "%s (PHASE %s): %d registers a thread, budget %d", name, phase, regs,
              REG_BUDGET);
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
    /* the forward and the backward */
    const int seen = for_each_dump("alloy_mlstm_chunkwise", ".cubin", check_mlstm_cubin);
    CHECK_MSG(seen >= 6, "only %d mLSTM kernels were compiled and dumped", seen);
}

/* ptxas from the CUDA toolkit: on PATH, under CUDA_HOME, or the usual place; "" when there is none */
static const char *find_ptxas(void) {
    static char path[512];
    if (system("command -v ptxas > /dev/null 2>&1") == 0) return "ptxas";
    const char *home = getenv("CUDA_HOME");
    snprintf(path, sizeof path, "%s/bin/ptxas", home && *home ? home : "/usr/local/cuda");
    return access(path, X_OK) == 0 ? path : "";
}

/* One launch of matmul_wgmma_tma on the CPU (its portable path runs; the compile check compiles and dumps
 * the CUDA source) with the op's templates and tensor maps: 128 x 256 tiles, boxes of 64 columns. */
static int launch_tma(alloy_dtype in, alloy_dtype out, int direct, int half) {
    alloy_kernel *k = NULL;
    CHECK_OK(alloy_catalog_kernel("src/ops/linalg/kernels/matmul_wgmma_tma.metal", &k));
    if (!k) return 0;
    alloy_device *dev = NULL;
    CHECK_OK(alloy_device_get("cpu", &dev));
    const int64_t M = 130, N = 264, K = 72, sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
    void *zeros = calloc((size_t)(M * N + K * N + M * K), 8);
    alloy_array *a = NULL, *b = NULL, *c = NULL, *res = NULL;
    CHECK_OK(alloy_array_from_host(dev, in, 2, sa, zeros, &a));
    CHECK_OK(alloy_array_from_host(dev, in, 2, sb, zeros, &b));
    CHECK_OK(alloy_array_from_host(dev, out, 2, sc, zeros, &c));
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    CHECK_OK(alloy_launch_add_output_array(l, c));
    CHECK_OK(alloy_launch_add_template_dtype(l, "TIN", in));
    CHECK_OK(alloy_launch_add_template_dtype(l, "TOUT", out));
    const struct { const char *n; int64_t v; } t[] = {
        {"DIRECT", direct}, {"LAG", 0}, {"OVW", 1}, {"HALF", half}, {"STAGES", 4}};
    for (size_t e = 0; e < sizeof t / sizeof t[0]; e++) CHECK_OK(alloy_launch_add_template_int(l, t[e].n, t[e].v));
    CHECK_OK(alloy_launch_set_threadgroup_memory(l, ku_gemm_tma_smem(4)));
    const struct { const char *n; int64_t v; } c64[] = {
        {"M", M}, {"N", N}, {"K", K}, {"batch", 1}, {"sa_b", M * K}, {"sa_m", K}, {"sa_k", 1}, {"sb_b", K * N},
        {"sb_k", N}, {"sb_n", 1}, {"sc_b", M * N}, {"sc_m", N}, {"tile_m", 128}, {"tile_n", 256}, {"a_off", 0},
        {"b_off", 0}, {"c_off", 0}};
    for (size_t e = 0; e < sizeof c64 / sizeof c64[0]; e++)
        CHECK_OK(alloy_launch_set_constant_int(l, c64[e].n, ALLOY_INT64, c64[e].v));
    CHECK_OK(alloy_launch_set_constant(l, "alpha", ALLOY_FLOAT64, 1.0));
    CHECK_OK(alloy_launch_set_constant(l, "beta", ALLOY_FLOAT64, 0.0));
    ku_gemm_tma_map(l, "ta", 0, 0, K, M, K, 1, M * K, 64, 128);
    ku_gemm_tma_map(l, "tb", 1, 0, N, K, N, 1, K * N, 64, 64);
    ku_gemm_tma_map(l, "tc", 2, 0, N, M, N, 1, M * N, (uint32_t)(128 / alloy_dtype_size(out)), 64);
    CHECK_OK(alloy_launch_set_grid(l, 2 * 384, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 384, 1, 1));
    alloy_array *ins[2] = {a, b};
    const alloy_status st = alloy_kernel_apply(k, 2, ins, l, NULL, &res);
    const int skip = st != ALLOY_OK && strstr(alloy_last_error(), "cannot check kernel") != NULL;
    if (!skip) CHECK_MSG(st == ALLOY_OK, "matmul_wgmma_tma %s -> %s: %s", alloy_dtype_name(in),
                         alloy_dtype_name(out), alloy_last_error());
    alloy_array_free(res);
    alloy_array_free(a), alloy_array_free(b), alloy_array_free(c);
    alloy_launch_free(l);
    free(zeros);
    return skip;
}

static const char *g_ptxas;
static int g_ptxas_older; /* ptxas refused NVRTC's PTX version: a toolkit older than the NVRTC in use */

/* One GEMM PTX through ptxas: no C75xx message (wgmma serialised, or a wait / arrive the compiler had to
 * inject around the products) and no spilled byte. */
static void check_gemm_ptx(const char *name, size_t stem) {
    (void)stem;
    char cmd[1200], line[1024], bad[1024] = "";
    snprintf(cmd, sizeof cmd, "'%s' -arch=sm_90a -v '%s/%s' -o /dev/null 2>&1", g_ptxas, g_dump, name);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    if (!p) return;
    int info = 0, older = 0;
    while (fgets(line, sizeof line, p)) {
        if (strstr(line, "Used ")) info = 1;
        if (strstr(line, "Unsupported .version")) older = 1;
        /* "N bytes spill stores, M bytes spill loads": N (the number before the words) must be 0 */
        const char *sp = strstr(line, " bytes spill stores");
        const char *q = sp;
        while (q && q > line && q[-1] >= '0' && q[-1] <= '9') q--;
        const int spills = sp && atoi(q) > 0;
        if ((strstr(line, "(C75") || spills) && !*bad) snprintf(bad, sizeof bad, "%s", line);
    }
    const int rc = pclose(p);
    if (older) {
        g_ptxas_older = 1;
        return;
    }
    CHECK_MSG(rc == 0 && info, "ptxas over %s: exit %d", name, rc);
    CHECK_MSG(!*bad, "%s: %s", name, bad);
}

static void test_gemm_wgmma_pipelined(void) {
    g_ptxas = find_ptxas();
    if (!*g_ptxas) {
        SKIP("no ptxas (the CUDA toolkit) on this machine");
        return;
    }
    /* the op's choices: 16-bit results through the staged stores, float32 / float64 ones DIRECT */
    if (launch_tma(ALLOY_BFLOAT16, ALLOY_BFLOAT16, 0, 0)) {
        SKIP("NVRTC is not available (ALLOY_COMPILE_CHECK=cuda)");
        return;
    }
    launch_tma(ALLOY_FLOAT16, ALLOY_FLOAT16, 0, 0);
    launch_tma(ALLOY_BFLOAT16, ALLOY_FLOAT32, 1, 0);
    launch_tma(ALLOY_FLOAT16, ALLOY_FLOAT64, 1, 0);
    /* and the timing switch HALF's specialisation, whose half tiles follow the main loop */
    launch_tma(ALLOY_BFLOAT16, ALLOY_BFLOAT16, 0, 1);
    const int seen = for_each_dump("alloy_matmul_wgmma_tma", ".ptx", check_gemm_ptx);
    if (g_ptxas_older) {
        SKIP("the CUDA toolkit's ptxas is older than NVRTC (it refused the PTX version)");
        return;
    }
    CHECK_MSG(seen == 5, "%d matmul_wgmma_tma specialisations compiled and dumped, want 5", seen);
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
    RUN(test_gemm_wgmma_pipelined);
    /* the dump and the cache are scratch */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dump);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dump);
    return harness_finish();
}
