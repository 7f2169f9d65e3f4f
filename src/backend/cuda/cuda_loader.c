/* cuda_loader.c — finds and loads the CUDA driver (libcuda.so.1) and NVRTC
 * at run time, so alloy builds and runs without a CUDA toolkit and the CUDA
 * backend simply reports itself unavailable — with the reason — where either
 * is missing.
 *
 * NVRTC is looked up as libnvrtc.so, libnvrtc.so.13 and libnvrtc.so.12 under
 * $CUDA_HOME/lib64, $CUDA_PATH/lib64 and /usr/local/cuda/lib64, then by plain
 * name through the dynamic loader's search path. Each failure is recorded so
 * `alloy info` can say where it looked. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/strbuf.h"
#include "cuda_api.h"

alloy_cuda_driver alloy_cu;
alloy_nvrtc alloy_nvrtc_api;

static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static int driver_ok;
static char driver_why[512];

static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;
static int nvrtc_ok;
static char nvrtc_why[2048];
static char nvrtc_path[PATH_MAX];
static char include_dir[PATH_MAX];
static int nvrtc_version;

/* ---- error text ------------------------------------------------------------ */

const char *alloy_cuda_error_text(CUresult r, char *buf, size_t len) {
    const char *name = NULL, *desc = NULL;
    if (alloy_cu.cuGetErrorName && alloy_cu.cuGetErrorName(r, &name) != ALLOY_CUDA_SUCCESS)
        name = NULL;
    if (alloy_cu.cuGetErrorString && alloy_cu.cuGetErrorString(r, &desc) != ALLOY_CUDA_SUCCESS)
        desc = NULL;
    if (name && desc) snprintf(buf, len, "%s (%s)", name, desc);
    else if (name) snprintf(buf, len, "%s", name);
    else snprintf(buf, len, "CUDA error %d", (int)r);
    return buf;
}

/* ---- driver ---------------------------------------------------------------- */

#define SYM(table, lib, name, required)                                                   \
    do {                                                                                  \
        void *sym_ = dlsym((lib), #name);                                                 \
        memcpy(&(table).name, &sym_, sizeof sym_);                                        \
        if (!sym_ && (required)) {                                                        \
            missing = #name;                                                              \
            goto fail;                                                                    \
        }                                                                                 \
    } while (0)

static void load_driver(void) {
    const char *missing = NULL;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(driver_why, sizeof driver_why, "libcuda.so.1 not found: no NVIDIA driver");
        return;
    }
    SYM(alloy_cu, lib, cuInit, 1);
    SYM(alloy_cu, lib, cuDriverGetVersion, 1);
    SYM(alloy_cu, lib, cuGetErrorName, 1);
    SYM(alloy_cu, lib, cuGetErrorString, 1);
    SYM(alloy_cu, lib, cuDeviceGetCount, 1);
    SYM(alloy_cu, lib, cuDeviceGet, 1);
    SYM(alloy_cu, lib, cuDeviceGetName, 1);
    SYM(alloy_cu, lib, cuDeviceGetAttribute, 1);
    SYM(alloy_cu, lib, cuDeviceTotalMem_v2, 1);
    SYM(alloy_cu, lib, cuDevicePrimaryCtxRetain, 1);
    SYM(alloy_cu, lib, cuDevicePrimaryCtxRelease_v2, 1);
    SYM(alloy_cu, lib, cuCtxSetCurrent, 1);
    SYM(alloy_cu, lib, cuCtxGetCurrent, 1);
    SYM(alloy_cu, lib, cuCtxSynchronize, 1);
    SYM(alloy_cu, lib, cuMemAlloc_v2, 1);
    SYM(alloy_cu, lib, cuMemFree_v2, 1);
    SYM(alloy_cu, lib, cuMemGetInfo_v2, 1);
    SYM(alloy_cu, lib, cuMemcpyHtoDAsync_v2, 1);
    SYM(alloy_cu, lib, cuMemcpyDtoHAsync_v2, 1);
    SYM(alloy_cu, lib, cuMemcpyDtoDAsync_v2, 1);
    SYM(alloy_cu, lib, cuMemsetD8Async, 1);
    SYM(alloy_cu, lib, cuMemsetD16Async, 1);
    SYM(alloy_cu, lib, cuMemsetD32Async, 1);
    SYM(alloy_cu, lib, cuMemsetD2D32Async, 1);
    SYM(alloy_cu, lib, cuStreamCreate, 1);
    SYM(alloy_cu, lib, cuStreamDestroy_v2, 1);
    SYM(alloy_cu, lib, cuStreamSynchronize, 1);
    SYM(alloy_cu, lib, cuStreamWaitEvent, 1);
    SYM(alloy_cu, lib, cuStreamGetCtx, 0);
    SYM(alloy_cu, lib, cuEventCreate, 1);
    SYM(alloy_cu, lib, cuEventRecord, 1);
    SYM(alloy_cu, lib, cuEventQuery, 1);
    SYM(alloy_cu, lib, cuEventSynchronize, 1);
    SYM(alloy_cu, lib, cuEventDestroy_v2, 1);
    SYM(alloy_cu, lib, cuModuleLoadDataEx, 1);
    SYM(alloy_cu, lib, cuModuleGetFunction, 1);
    SYM(alloy_cu, lib, cuFuncGetAttribute, 1);
    SYM(alloy_cu, lib, cuFuncSetAttribute, 1);
    SYM(alloy_cu, lib, cuLaunchKernel, 1);
    SYM(alloy_cu, lib, cuTensorMapEncodeTiled, 0); /* tensor maps fail without it, nothing else */
    SYM(alloy_cu, lib, cuLaunchKernelEx, 0);       /* overlapping launches are ordinary ones without it */

    CUresult r = alloy_cu.cuInit(0);
    if (r != ALLOY_CUDA_SUCCESS) {
        char e[256];
        snprintf(driver_why, sizeof driver_why, "cuInit failed: %s",
                 alloy_cuda_error_text(r, e, sizeof e));
        return; /* keep the library: the table is complete, only unusable */
    }
    __atomic_store_n(&driver_ok, 1, __ATOMIC_RELEASE);
    return;
fail:
    snprintf(driver_why, sizeof driver_why,
             "libcuda.so.1 lacks %s: the NVIDIA driver is too old (install a newer driver)",
             missing);
    memset(&alloy_cu, 0, sizeof alloy_cu);
    dlclose(lib);
}

int alloy_cuda_load_driver(char *why, size_t why_len) {
    pthread_once(&driver_once, load_driver);
    if (!driver_ok && why && why_len) snprintf(why, why_len, "%s", driver_why);
    return driver_ok ? 0 : -1;
}

/* ---- NVRTC ------------------------------------------------------------------ */

static int file_exists(const char *path) { return access(path, R_OK) == 0; }

/* Sets include_dir from a directory holding the NVRTC library
 * (<root>/lib64 or <root>/lib → <root>/include). */
static void include_dir_from_lib_dir(const char *lib_dir) {
    if (strlen(lib_dir) > PATH_MAX) return;
    char cand[PATH_MAX + 64];
    snprintf(cand, sizeof cand, "%.*s/../include/cuda_fp16.h", PATH_MAX, lib_dir);
    if (!include_dir[0] && file_exists(cand)) {
        char resolved[PATH_MAX];
        snprintf(cand, sizeof cand, "%.*s/../include", PATH_MAX, lib_dir);
        if (realpath(cand, resolved)) snprintf(include_dir, sizeof include_dir, "%s", resolved);
    }
}

static int bind_nvrtc(void *lib, const char **missing_out) {
    const char *missing = NULL;
    SYM(alloy_nvrtc_api, lib, nvrtcGetErrorString, 1);
    SYM(alloy_nvrtc_api, lib, nvrtcVersion, 1);
    SYM(alloy_nvrtc_api, lib, nvrtcGetNumSupportedArchs, 0);
    SYM(alloy_nvrtc_api, lib, nvrtcGetSupportedArchs, 0);
    SYM(alloy_nvrtc_api, lib, nvrtcCreateProgram, 1);
    SYM(alloy_nvrtc_api, lib, nvrtcDestroyProgram, 1);
    SYM(alloy_nvrtc_api, lib, nvrtcCompileProgram, 1);
    SYM(alloy_nvrtc_api, lib, nvrtcGetPTXSize, 1);
    SYM(alloy_nvrtc_api, lib, nvrtcGetPTX, 1);
    SYM(alloy_nvrtc_api, lib, nvrtcGetCUBINSize, 0);
    SYM(alloy_nvrtc_api, lib, nvrtcGetCUBIN, 0);
    SYM(alloy_nvrtc_api, lib, nvrtcGetProgramLogSize, 1);
    SYM(alloy_nvrtc_api, lib, nvrtcGetProgramLog, 1);
    return 0;
fail:
    *missing_out = missing;
    memset(&alloy_nvrtc_api, 0, sizeof alloy_nvrtc_api);
    return -1;
}

static void load_nvrtc(void) {
    /* Newest first, except under a CUDA 12 driver, which cannot load what
     * NVRTC 13 produces: then NVRTC 12 first. */
    static const char *const NEWEST[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};
    static const char *const FOR12[] = {"libnvrtc.so.12", "libnvrtc.so", "libnvrtc.so.13"};
    int drv = 0;
    if (__atomic_load_n(&driver_ok, __ATOMIC_ACQUIRE) &&
        alloy_cu.cuDriverGetVersion(&drv) != ALLOY_CUDA_SUCCESS)
        drv = 0;
    const char *const *NAMES = drv && drv < 13000 ? FOR12 : NEWEST;
    const char *env_dirs[2] = {getenv("CUDA_HOME"), getenv("CUDA_PATH")};
    char dirs[3][PATH_MAX];
    int n_dirs = 0;
    for (int i = 0; i < 2; i++)
        if (env_dirs[i] && *env_dirs[i]) snprintf(dirs[n_dirs++], PATH_MAX, "%s/lib64", env_dirs[i]);
    snprintf(dirs[n_dirs++], PATH_MAX, "/usr/local/cuda/lib64");

    alloy_strbuf tried;
    alloy_sb_init(&tried);
    void *lib = NULL;
    char path[PATH_MAX + 32];
    const char *lib_dir = NULL;
    for (int d = 0; d <= n_dirs && !lib; d++)
        for (int k = 0; k < 3 && !lib; k++) {
            if (d < n_dirs) snprintf(path, sizeof path, "%.4000s/%s", dirs[d], NAMES[k]);
            else snprintf(path, sizeof path, "%s", NAMES[k]);
            if (d < n_dirs && !file_exists(path)) {
                alloy_sb_printf(&tried, "\n  %s: no such file", path);
                continue;
            }
            lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (!lib) {
                const char *e = dlerror();
                alloy_sb_printf(&tried, "\n  %s: %s", path, e ? e : "dlopen failed");
                continue;
            }
            const char *missing = NULL;
            if (bind_nvrtc(lib, &missing) != 0) {
                alloy_sb_printf(&tried, "\n  %s: lacks %s", path, missing);
                dlclose(lib);
                lib = NULL;
                continue;
            }
            lib_dir = d < n_dirs ? dirs[d] : NULL;
        }
    if (!lib) {
        snprintf(nvrtc_why, sizeof nvrtc_why,
                 "NVRTC (libnvrtc.so) not found: set CUDA_HOME to a CUDA toolkit (12 or 13) or "
                 "add its lib64 directory to LD_LIBRARY_PATH; tried:%s",
                 tried.data ? tried.data : "");
        alloy_sb_free(&tried);
        return;
    }
    alloy_sb_free(&tried);

    /* Where it really came from, for messages and the include directory. */
    Dl_info info;
    void *fn_addr;
    memcpy(&fn_addr, &alloy_nvrtc_api.nvrtcVersion, sizeof fn_addr);
    if (dladdr(fn_addr, &info) && info.dli_fname)
        snprintf(nvrtc_path, sizeof nvrtc_path, "%s", info.dli_fname);
    else
        snprintf(nvrtc_path, sizeof nvrtc_path, "%.4000s", path);
    if (lib_dir) include_dir_from_lib_dir(lib_dir);
    if (!include_dir[0]) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", nvrtc_path);
        char *slash = strrchr(dir, '/');
        if (slash) {
            *slash = 0;
            include_dir_from_lib_dir(dir);
        }
    }
    for (int i = 0; i < 2 && !include_dir[0]; i++)
        if (env_dirs[i] && *env_dirs[i]) {
            char cand[PATH_MAX + 32];
            snprintf(cand, sizeof cand, "%s/include/cuda_fp16.h", env_dirs[i]);
            if (file_exists(cand)) snprintf(include_dir, sizeof include_dir, "%s/include", env_dirs[i]);
        }

    int major = 0, minor = 0;
    if (alloy_nvrtc_api.nvrtcVersion(&major, &minor) != ALLOY_NVRTC_SUCCESS) {
        snprintf(nvrtc_why, sizeof nvrtc_why, "%.1900s: nvrtcVersion failed", nvrtc_path);
        memset(&alloy_nvrtc_api, 0, sizeof alloy_nvrtc_api);
        return;
    }
    nvrtc_version = major * 1000 + minor * 10;
    nvrtc_ok = 1;
}

int alloy_cuda_load_nvrtc(char *why, size_t why_len) {
    pthread_once(&nvrtc_once, load_nvrtc);
    if (!nvrtc_ok && why && why_len) snprintf(why, why_len, "%s", nvrtc_why);
    return nvrtc_ok ? 0 : -1;
}

int alloy_cuda_nvrtc_version(void) {
    pthread_once(&nvrtc_once, load_nvrtc);
    return nvrtc_ok ? nvrtc_version : 0;
}

const char *alloy_cuda_include_dir(void) {
    pthread_once(&nvrtc_once, load_nvrtc);
    return nvrtc_ok && include_dir[0] ? include_dir : NULL;
}

const char *alloy_cuda_nvrtc_path(void) {
    pthread_once(&nvrtc_once, load_nvrtc);
    return nvrtc_path;
}
