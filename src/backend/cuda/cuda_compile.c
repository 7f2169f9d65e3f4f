/* cuda_compile.c — NVRTC compilation, the cubin/PTX disk cache, module
 * loading and the per-kernel resource report of the CUDA backend, plus the
 * device-free compile check (ALLOY_COMPILE_CHECK=cuda).
 *
 * Target: SASS (a cubin) for the device's sm_XY when the NVRTC found
 * supports it, else PTX for the highest compute_XY it supports below the
 * device (the driver JIT-compiles it). Kernels that use Hopper-only
 * instructions (wgmma, setmaxnreg) or define ALLOY_REQUIRE_SM90A get sm_90a.
 * SASS first also avoids PTX that is newer than the installed driver.
 *
 * Disk entries: <cache>/cuda/<key>.cubin or .ptx, where <key> hashes the
 * core's key (source + compiler identity) again with the driver version, the
 * NVRTC version, the target and the header directory. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/disk_cache.h"
#include "core/error.h"
#include "core/sha256.h"
#include "core/strbuf.h"
#include "cuda_internal.h"

/* ---- target --------------------------------------------------------------------- */

void alloy_cuda_choose_arch(cuda_device *d) {
    int cc = d->cc_major * 10 + d->cc_minor;
    int nv = alloy_cuda_nvrtc_version();
    d->arch_error[0] = 0;
    d->arch_num = cc;
    d->sass = alloy_nvrtc_api.nvrtcGetCUBIN != NULL;
    int n = 0;
    if (!alloy_nvrtc_api.nvrtcGetNumSupportedArchs || !alloy_nvrtc_api.nvrtcGetSupportedArchs ||
        alloy_nvrtc_api.nvrtcGetNumSupportedArchs(&n) != ALLOY_NVRTC_SUCCESS || n <= 0 || n > 256)
        return; /* an old NVRTC: ask for the device's own arch and see */
    int archs[256];
    if (alloy_nvrtc_api.nvrtcGetSupportedArchs(archs) != ALLOY_NVRTC_SUCCESS) return;
    int best = -1, lo = archs[0], hi = archs[0];
    for (int i = 0; i < n; i++) {
        if (archs[i] < lo) lo = archs[i];
        if (archs[i] > hi) hi = archs[i];
        if (archs[i] <= cc && archs[i] > best) best = archs[i];
    }
    if (best == cc) return;
    if (best < 0) {
        snprintf(d->arch_error, sizeof d->arch_error,
                 "NVRTC %d.%d compiles for sm_%d to sm_%d but this GPU is sm_%d: set CUDA_HOME to "
                 "an older CUDA toolkit whose NVRTC still supports it",
                 nv / 1000, nv % 1000 / 10, lo, hi, cc);
        return;
    }
    d->arch_num = best; /* PTX for an older virtual arch; the driver JITs it */
    d->sass = 0;
}

/* The part of a source after the embedded prelude (the prelude may mention
 * Hopper instructions inside #if blocks). */
static const char *user_part(const char *src) {
    const char *prelude = alloy_prelude(ALLOY_TARGET_CUDA);
    size_t n = prelude ? strlen(prelude) : 0;
    return n && strncmp(src, prelude, n) == 0 ? src + n : src;
}

static int needs_sm90a(const char *src) {
    const char *u = user_part(src);
    return strstr(u, "wgmma") || strstr(u, "setmaxnreg") || strstr(u, "ALLOY_REQUIRE_SM90A");
}

static int requires_sm90a_explicitly(const char *src) {
    return strstr(user_part(src), "ALLOY_REQUIRE_SM90A") != NULL;
}

/* A kernel parameter of codegen's (a tensor map) needs sm_90+: say so rather
 * than let NVRTC reject the body's copy-engine instructions. */
static int takes_tensor_map(const char *src) {
    return strstr(user_part(src), "__grid_constant__ alloy_tensor_map alloy_a") != NULL;
}

/* ---- NVRTC ------------------------------------------------------------------------ */

static char *trimmed_copy(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\r' || s[n - 1] == '\0')) n--;
    if (!n) return NULL;
    char *c = malloc(n + 1);
    if (c) {
        memcpy(c, s, n);
        c[n] = 0;
    }
    return c;
}

/* NVRTC writes `file(LINE): error: ...`; the host compilers write
 * `file:LINE:COL: error: ...`. Rewrite NVRTC's form in place to `file:LINE:`
 * so every backend's messages point at the body the same way. */
static void normalize_locations(char *log) {
    for (char *line = log; line && *line;) {
        char *end = strchr(line, '\n');
        char *open = line;
        while (*open && open != end && *open != '(' && *open != ' ') open++;
        if (*open == '(' && open > line) {
            char *d = open + 1;
            while (*d >= '0' && *d <= '9') d++;
            if (d > open + 1 && d[0] == ')' && d[1] == ':') {
                /* "name(123): " -> "name:123: " (same length: one space pad) */
                *open = ':';
                d[0] = ':';
                d[1] = ' ';
            }
        }
        line = end ? end + 1 : NULL;
    }
}

/* NVRTC's options besides the architecture and the CUDA headers' -I (also
 * part of the key of a recorded compile check) */
#define NVRTC_N_FIXED 3
static const char *const NVRTC_FIXED_OPTIONS[NVRTC_N_FIXED] = {"-default-device", "--std=c++20", "-lineinfo"};

/* Compiles src for `arch` ("sm_90", "sm_90a", "compute_90"). On success
 * *image (malloc'd) holds a cubin (sm_*) or NUL-terminated PTX. *log gets
 * the NVRTC output (errors or warnings; NULL if none). */
static alloy_status run_nvrtc(const char *src, const char *kernel_name, const char *arch,
                              void **image, size_t *size, char **log) {
    const alloy_nvrtc *nv = &alloy_nvrtc_api;
    *image = NULL;
    *size = 0;
    *log = NULL;
    char name[128], arch_opt[64], inc_opt[4200];
    snprintf(name, sizeof name, "%s.cu", kernel_name ? kernel_name : "kernel");
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
    const char *opts[2 + NVRTC_N_FIXED] = {arch_opt};
    int n_opts = 1;
    for (int i = 0; i < NVRTC_N_FIXED; i++) opts[n_opts++] = NVRTC_FIXED_OPTIONS[i];
    const char *inc = alloy_cuda_include_dir();
    if (inc) {
        snprintf(inc_opt, sizeof inc_opt, "-I%s", inc);
        opts[n_opts++] = inc_opt;
    }
    nvrtcProgram prog = NULL;
    nvrtcResult r = nv->nvrtcCreateProgram(&prog, src, name, 0, NULL, NULL);
    if (r != ALLOY_NVRTC_SUCCESS)
        return alloy_error(r == 1 ? ALLOY_ERROR_OUT_OF_MEMORY : ALLOY_ERROR_INTERNAL,
                           "kernel '%s': nvrtcCreateProgram failed: %s", kernel_name,
                           nv->nvrtcGetErrorString(r));
    nvrtcResult cr = nv->nvrtcCompileProgram(prog, n_opts, opts);
    size_t log_size = 0;
    if (nv->nvrtcGetProgramLogSize(prog, &log_size) == ALLOY_NVRTC_SUCCESS && log_size > 1) {
        char *raw = malloc(log_size + 1);
        if (raw && nv->nvrtcGetProgramLog(prog, raw) == ALLOY_NVRTC_SUCCESS) {
            raw[log_size] = 0;
            *log = trimmed_copy(raw);
            if (*log) normalize_locations(*log);
        }
        free(raw);
    }
    alloy_status st = ALLOY_OK;
    if (cr == ALLOY_NVRTC_ERROR_COMPILATION) {
        if (!*log) *log = trimmed_copy("(NVRTC reported a compilation error but printed nothing)");
        st = ALLOY_ERROR_COMPILE;
    } else if (cr != ALLOY_NVRTC_SUCCESS) {
        st = alloy_error(cr == 1 ? ALLOY_ERROR_OUT_OF_MEMORY : ALLOY_ERROR_INTERNAL,
                         "kernel '%s': nvrtcCompileProgram (%s) failed: %s%s%s", kernel_name, arch_opt,
                         nv->nvrtcGetErrorString(cr), *log ? "\n" : "", *log ? *log : "");
    } else {
        int cubin = strncmp(arch, "sm_", 3) == 0;
        size_t n = 0;
        r = cubin ? nv->nvrtcGetCUBINSize(prog, &n) : nv->nvrtcGetPTXSize(prog, &n);
        char *buf = r == ALLOY_NVRTC_SUCCESS && n ? malloc(n + 1) : NULL;
        if (buf) r = cubin ? nv->nvrtcGetCUBIN(prog, buf) : nv->nvrtcGetPTX(prog, buf);
        if (!buf || r != ALLOY_NVRTC_SUCCESS) {
            free(buf);
            st = alloy_error(ALLOY_ERROR_INTERNAL, "kernel '%s': cannot get the %s from NVRTC: %s",
                             kernel_name, cubin ? "cubin" : "PTX",
                             r != ALLOY_NVRTC_SUCCESS ? nv->nvrtcGetErrorString(r) : "empty or out of memory");
        } else {
            buf[n] = 0;
            *image = buf;
            *size = n;
        }
    }
    nv->nvrtcDestroyProgram(&prog);
    return st;
}

static alloy_status run_nvrtc(const char *src, const char *kernel_name, const char *arch, void **image,
                              size_t *size, char **log);
static alloy_status write_entry(const char *path, const void *image, size_t size);

/* ALLOY_COMPILE_CHECK_DUMP=DIR: each checked kernel's source, cubin and PTX
 * go to DIR/<kernel>-<hash>.cu, .cubin and .ptx, so that a machine without a
 * GPU can read a kernel's registers and spills (`ptxas -v -arch=sm_90a` on
 * the .ptx) or its SASS. A file that cannot be written is skipped: the dump
 * is a developer's aid. */
static void dump_checked(const alloy_compile_job *job, const char *arch, const void *image, size_t size) {
    const char *dir = getenv("ALLOY_COMPILE_CHECK_DUMP");
    if (!dir || !*dir) return;
    char path[4096], varch[16], *log = NULL;
    void *ptx = NULL;
    size_t nptx = 0;
    snprintf(varch, sizeof varch, "compute_%s", arch + 3);
    if (run_nvrtc(job->source, job->kernel_name, varch, &ptx, &nptx, &log) != ALLOY_OK) nptx = 0;
    while (nptx && ((const char *)ptx)[nptx - 1] == 0) nptx--; /* NVRTC counts the terminator */
    free(log);
    const struct {
        const char *ext;
        const void *data;
        size_t n;
    } files[3] = {{"cu", job->source, strlen(job->source)}, {"cubin", image, size}, {"ptx", ptx, nptx}};
    for (int e = 0; e < 3; e++) {
        if (!files[e].n) continue;
        snprintf(path, sizeof path, "%s/%s-%.12s.%s", dir, job->kernel_name, job->key, files[e].ext);
        FILE *f = fopen(path, "wb");
        if (!f) continue;
        fwrite(files[e].data, 1, files[e].n, f);
        fclose(f);
    }
    free(ptx);
}

char *alloy_cuda_check_marker_path(const char *source, const char *arch) {
    char extra[512], hex[65];
    const char *inc = alloy_cuda_include_dir();
    snprintf(extra, sizeof extra, "alloy-cuda-check-1|nvrtc %d|%s|%s", alloy_cuda_nvrtc_version(), arch,
             inc ? inc : "-");
    alloy_sha256 s;
    uint8_t digest[32];
    alloy_sha256_init(&s);
    alloy_sha256_update(&s, extra, strlen(extra) + 1);
    for (int i = 0; i < NVRTC_N_FIXED; i++)
        alloy_sha256_update(&s, NVRTC_FIXED_OPTIONS[i], strlen(NVRTC_FIXED_OPTIONS[i]) + 1);
    alloy_sha256_update(&s, source, strlen(source));
    alloy_sha256_final(&s, digest);
    alloy_digest_to_hex(digest, hex);
    return alloy_disk_cache_path("cuda-check", hex, ".ok");
}

alloy_status alloy_cuda_compile_check(const alloy_compile_job *job, char **log) {
    *log = NULL;
    char why[2048];
    if (alloy_cuda_load_nvrtc(why, sizeof why) != 0)
        return alloy_error(ALLOY_ERROR_UNAVAILABLE, "cannot check kernel '%s' for CUDA: %s",
                           job->kernel_name, why);
    void *image = NULL;
    size_t size = 0;
    const char *arch = needs_sm90a(job->source) ? "sm_90a" : "sm_90";
    /* a source recorded as passed is not compiled again (alloy_cuda_check_marker_path) */
    const char *dump = getenv("ALLOY_COMPILE_CHECK_DUMP");
    char *passed = dump && *dump ? NULL : alloy_cuda_check_marker_path(job->source, arch);
    size_t recorded = 0; /* the record's payload: none */
    int corrupt = 0;
    if (passed && access(passed, F_OK) == 0 && alloy_disk_cache_verify(passed, &recorded, &corrupt) == ALLOY_OK) {
        free(passed);
        return ALLOY_OK;
    }
    alloy_status st = run_nvrtc(job->source, job->kernel_name, arch, &image, &size, log);
    if (st == ALLOY_OK) dump_checked(job, arch, image, size);
    if (st == ALLOY_OK && passed && write_entry(passed, "", 0) != ALLOY_OK)
        alloy_warn("kernel '%s': cannot record its passed compile check in the cache: %s", job->kernel_name,
                   alloy_last_error());
    free(passed);
    free(image);
    if (st == ALLOY_OK) { /* warnings are not failures */
        free(*log);
        *log = NULL;
    }
    return st;
}

/* ---- loading ---------------------------------------------------------------------- */

/* Context current. Loads the image into *p (module, its function `entry`, attributes). */
static alloy_status load_image(cuda_device *d, const char *kernel_name, const char *entry, const void *image,
                               cuda_program *p) {
    char jit_log[4096];
    jit_log[0] = 0;
    CUjit_option opt[2] = {ALLOY_CU_JIT_ERROR_LOG_BUFFER, ALLOY_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *val[2] = {jit_log, (void *)(uintptr_t)sizeof jit_log};
    CUresult r = alloy_cu.cuModuleLoadDataEx(&p->module, image, 2, opt, val);
    if (r != ALLOY_CUDA_SUCCESS) {
        char e[256];
        alloy_cuda_error_text(r, e, sizeof e);
        int nv = alloy_cuda_nvrtc_version();
        int newer = nv > d->driver_version;
        if (r == ALLOY_CUDA_ERROR_UNSUPPORTED_PTX_VERSION ||
            (newer && (r == ALLOY_CUDA_ERROR_INVALID_IMAGE || r == ALLOY_CUDA_ERROR_NO_BINARY_FOR_GPU ||
                       r == ALLOY_CUDA_ERROR_INVALID_PTX)))
            return alloy_error(ALLOY_ERROR_UNAVAILABLE,
                               "kernel '%s': the driver cannot load the %s built by NVRTC %d.%d (%s): "
                               "NVRTC is newer than the driver, which supports CUDA %d.%d. Update the "
                               "NVIDIA driver, or set CUDA_HOME to a CUDA toolkit no newer than %d.%d%s%s",
                               kernel_name, p->is_ptx ? "PTX" : "cubin", nv / 1000, nv % 1000 / 10,
                               e, d->driver_version / 1000, d->driver_version % 1000 / 10,
                               d->driver_version / 1000, d->driver_version % 1000 / 10,
                               jit_log[0] ? "; the driver said: " : "", jit_log);
        return alloy_error(ALLOY_ERROR_LAUNCH, "kernel '%s': cuModuleLoadData (%s) failed: %s%s%s",
                           kernel_name, p->arch, e, jit_log[0] ? "; the driver said: " : "", jit_log);
    }
    r = alloy_cu.cuModuleGetFunction(&p->fn, p->module, entry);
    if (r != ALLOY_CUDA_SUCCESS) {
        char e[256];
        return alloy_error(ALLOY_ERROR_INTERNAL, "kernel '%s': the compiled module has no function '%s': %s",
                           kernel_name, entry, alloy_cuda_error_text(r, e, sizeof e));
    }
    struct { int attr; int *out; } attrs[] = {
        {ALLOY_CU_FUNC_NUM_REGS, &p->num_regs},
        {ALLOY_CU_FUNC_SHARED_SIZE_BYTES, &p->static_smem},
        {ALLOY_CU_FUNC_LOCAL_SIZE_BYTES, &p->local_bytes},
        {ALLOY_CU_FUNC_CONST_SIZE_BYTES, &p->const_bytes},
        {ALLOY_CU_FUNC_MAX_THREADS_PER_BLOCK, &p->max_threads},
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        r = alloy_cu.cuFuncGetAttribute(attrs[i].out, attrs[i].attr, p->fn);
        if (r != ALLOY_CUDA_SUCCESS)
            return alloy_cuda_fail(ALLOY_ERROR_INTERNAL, r, "cuFuncGetAttribute", kernel_name);
    }
    atomic_init(&p->smem_set, d->max_smem_block - p->static_smem);
    return ALLOY_OK;
}

static alloy_status write_entry(const char *path, const void *image, size_t size) {
    char *tmp = alloy_disk_cache_temp_path(path);
    if (!tmp) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
    FILE *f = fopen(tmp, "wb");
    alloy_status st = ALLOY_OK;
    if (!f) {
        st = alloy_error(ALLOY_ERROR_IO, "cannot write %s: %s", tmp, strerror(errno));
    } else {
        int ok = fwrite(image, 1, size, f) == size;
        ok &= fclose(f) == 0;
        st = ok ? alloy_disk_cache_seal(tmp, path)
                : alloy_error(ALLOY_ERROR_IO, "cannot write %s: %s", tmp, strerror(errno));
    }
    if (st != ALLOY_OK) unlink(tmp);
    free(tmp);
    return st;
}

static void cache_key(const cuda_device *d, const alloy_compile_job *job, const char *arch,
                      char hex[65]) {
    char extra[512];
    const char *inc = alloy_cuda_include_dir();
    snprintf(extra, sizeof extra, "alloy-cuda-entry-1|driver %d|nvrtc %d|%s|%s", d->driver_version,
             alloy_cuda_nvrtc_version(), arch, inc ? inc : "-");
    alloy_sha256 s;
    uint8_t digest[32];
    alloy_sha256_init(&s);
    alloy_sha256_update(&s, job->key, strlen(job->key) + 1);
    alloy_sha256_update(&s, extra, strlen(extra));
    alloy_sha256_final(&s, digest);
    alloy_digest_to_hex(digest, hex);
}

static void program_free(cuda_program *p) {
    free(p->name);
    free(p->log);
    free(p->path);
    free(p);
}

alloy_status alloy_cuda_compile(alloy_device *dev, const alloy_compile_job *job, void **program,
                                char **log, int *from_disk) {
    cuda_device *d = cuda_dev(dev);
    *log = NULL;
    *from_disk = 0;
    if (d->arch_error[0])
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "kernel '%s' cannot be compiled for %s: %s",
                           job->kernel_name, dev->name, d->arch_error);
    cuda_program *p = calloc(1, sizeof *p);
    if (!p || !(p->name = strdup(job->kernel_name ? job->kernel_name : "?"))) {
        free(p);
        return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    int cc = d->cc_major * 10 + d->cc_minor;
    alloy_status ts = takes_tensor_map(job->source)
                          ? alloy_cuda_tensor_map_supported(d, job->kernel_name ? job->kernel_name : "?")
                          : ALLOY_OK;
    if (ts != ALLOY_OK) {
        program_free(p);
        return ts;
    }
    if (requires_sm90a_explicitly(job->source) && cc != 90) {
        program_free(p);
        return alloy_error(ALLOY_ERROR_UNSUPPORTED,
                           "kernel '%s' requires a Hopper GPU (sm_90a, ALLOY_REQUIRE_SM90A) but %s "
                           "is sm_%d",
                           job->kernel_name, dev->name, cc);
    }
    if (d->sass && d->arch_num == 90 && needs_sm90a(job->source))
        snprintf(p->arch, sizeof p->arch, "sm_90a");
    else
        snprintf(p->arch, sizeof p->arch, "%s_%d", d->sass ? "sm" : "compute", d->arch_num);
    p->is_ptx = !d->sass;

    cuda_ctx_guard g;
    CUresult r = cuda_ctx_enter(d, &g);
    if (r != ALLOY_CUDA_SUCCESS) {
        program_free(p);
        return alloy_cuda_fail(ALLOY_ERROR_LAUNCH, r, "cuCtxSetCurrent", "compiling");
    }

    const char *entry = job->entry[0] ? job->entry : "alloy_kernel";
    char key[65];
    cache_key(d, job, p->arch, key);
    char *path = alloy_disk_cache_path("cuda", key, p->is_ptx ? ".ptx" : ".cubin");
    alloy_status st;
    if (path && access(path, F_OK) == 0) {
        void *image = NULL;
        size_t size = 0;
        int corrupt = 0;
        st = alloy_disk_cache_read(path, &image, &size, &corrupt);
        if (st == ALLOY_OK) {
            if (p->is_ptx) { /* must be NUL-terminated */
                char *c = realloc(image, size + 1);
                if (c) c[size] = 0;
                image = c;
            }
            st = image ? load_image(d, job->kernel_name, entry, image, p)
                       : alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
            free(image);
            if (st == ALLOY_OK) {
                p->image_bytes = size;
                p->path = path;
                *from_disk = 1;
                cuda_ctx_leave(&g);
                *program = p;
                return ALLOY_OK;
            }
            alloy_warn("kernel '%s': cannot load the cached %s (%s); rebuilding it",
                       job->kernel_name, path, alloy_last_error());
            p->module = NULL;
        } else if (corrupt) {
            alloy_warn("kernel '%s': the cached %s is corrupt; rebuilding it", job->kernel_name, path);
        }
    }

    void *image = NULL;
    size_t size = 0;
    st = run_nvrtc(job->source, job->kernel_name, p->arch, &image, &size, log);
    if (st == ALLOY_OK) st = load_image(d, job->kernel_name, entry, image, p);
    if (st == ALLOY_OK && path) {
        /* Only images the driver accepted are cached. PTX is stored with its
         * NUL so it loads as is. */
        alloy_status ws = write_entry(path, image, p->is_ptx ? size + 1 : size);
        if (ws != ALLOY_OK)
            alloy_warn("kernel '%s': cannot store the compiled kernel in the cache: %s",
                       job->kernel_name, alloy_last_error());
        else
            p->path = path, path = NULL;
    }
    free(image);
    free(path);
    cuda_ctx_leave(&g);
    if (st != ALLOY_OK) {
        program_free(p);
        return st;
    }
    p->image_bytes = size;
    if (*log) p->log = strdup(*log);
    *program = p;
    return ALLOY_OK;
}

char *alloy_cuda_program_report(alloy_device *dev, void *program) {
    (void)dev;
    const cuda_program *p = program;
    alloy_strbuf sb;
    alloy_sb_init(&sb);
    alloy_sb_printf(&sb,
                    "cuda: %s %s, %zu bytes; %d registers per thread, %d bytes static shared memory, "
                    "%d bytes local memory per thread%s, %d bytes constant memory, at most %d threads "
                    "per threadgroup",
                    p->arch, p->is_ptx ? "PTX" : "SASS", p->image_bytes, p->num_regs, p->static_smem,
                    p->local_bytes, p->local_bytes ? " (register spills or local arrays)" : "",
                    p->const_bytes, p->max_threads);
    alloy_sb_printf(&sb, "\ncache entry: %s", p->path ? p->path : "(none: cache off)");
    if (p->log) alloy_sb_printf(&sb, "\nNVRTC said:\n%s", p->log);
    return alloy_sb_take(&sb);
}
