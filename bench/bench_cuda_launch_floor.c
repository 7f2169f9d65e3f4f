/* bench_cuda_launch_floor.c — the floor under alloy's launch overhead: the
 * host time of a bare cuLaunchKernel of an empty kernel through the driver
 * API (no alloy in the loop), measured exactly like bench_cuda_runtime's
 * overhead row (200 launches per batch, median of 15 batches) on the legacy
 * default stream and on a created stream. The driver is dlopen'd, as alloy
 * does, so this builds without a CUDA toolkit. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream;

#define LOAD(name)                                                                            \
    name##_t name = (name##_t)dlsym(lib, #name);                                              \
    if (!name) { fprintf(stderr, "libcuda.so.1 lacks %s\n", #name); return 2; }

typedef CUresult (*cuInit_t)(unsigned);
typedef CUresult (*cuDeviceGet_t)(CUdevice *, int);
typedef CUresult (*cuDevicePrimaryCtxRetain_t)(CUcontext *, CUdevice);
typedef CUresult (*cuCtxSetCurrent_t)(CUcontext);
typedef CUresult (*cuCtxSynchronize_t)(void);
typedef CUresult (*cuModuleLoadData_t)(CUmodule *, const void *);
typedef CUresult (*cuModuleGetFunction_t)(CUfunction *, CUmodule, const char *);
typedef CUresult (*cuStreamCreate_t)(CUstream *, unsigned);
typedef CUresult (*cuLaunchKernel_t)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                     unsigned, unsigned, CUstream, void **, void **);

static const char PTX[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".visible .entry empty(.param .u64 p) { ret; }\n";

int main(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "no CUDA driver: %s\n", dlerror()); return 2; }
    LOAD(cuInit) LOAD(cuDeviceGet) LOAD(cuDevicePrimaryCtxRetain) LOAD(cuCtxSetCurrent)
    LOAD(cuCtxSynchronize) LOAD(cuModuleLoadData) LOAD(cuModuleGetFunction) LOAD(cuStreamCreate)
    LOAD(cuLaunchKernel)
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CUstream created;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || cuModuleLoadData(&mod, PTX) ||
        cuModuleGetFunction(&fn, mod, "empty") || cuStreamCreate(&created, 0)) {
        fprintf(stderr, "driver set-up failed (this PTX targets sm_90)\n");
        return 1;
    }
    void *p = NULL, *args[1] = {&p};
    CUstream streams[2] = {NULL, created};
    const char *names[2] = {"legacy default stream", "created stream"};
    printf("| cuLaunchKernel of an empty kernel (no alloy) | median host time |\n|---|---|\n");
    for (int s = 0; s < 2; s++) {
        double t[15];
        for (int r = 0; r < 15; r++) {
            cuCtxSynchronize();
            double t0 = bench_now();
            for (int i = 0; i < 200; i++)
                if (cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, streams[s], args, NULL)) return 1;
            t[r] = (bench_now() - t0) / 200;
            cuCtxSynchronize();
        }
        printf("| %s | %.2f us |\n", names[s], bench_median(t, 15) * 1e6);
    }
    return 0;
}
