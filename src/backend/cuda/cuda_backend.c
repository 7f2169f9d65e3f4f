/* cuda_backend.c — the CUDA backend's entry: probing (driver + NVRTC loaded
 * at run time), device set-up on the device's primary context (shared with
 * the CUDA runtime, so PyTorch, CuPy and JAX see the same memory and
 * streams), the compiler identity, and the `alloy_cuda_backend` table whose
 * operations live in cuda_memory.c, cuda_stream.c, cuda_compile.c and
 * cuda_launch.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda_internal.h"

static alloy_status cuda_probe(int *device_count, char *why, size_t why_len) {
    *device_count = 0;
    if (alloy_cuda_load_driver(why, why_len) != 0) return ALLOY_ERROR_UNAVAILABLE;
    int n = 0;
    CUresult r = alloy_cu.cuDeviceGetCount(&n);
    if (r != ALLOY_CUDA_SUCCESS) {
        char e[256];
        snprintf(why, why_len, "cuDeviceGetCount failed: %s", alloy_cuda_error_text(r, e, sizeof e));
        return ALLOY_ERROR_UNAVAILABLE;
    }
    if (n <= 0) {
        snprintf(why, why_len, "no CUDA device found (the NVIDIA driver reports 0 GPUs)");
        return ALLOY_ERROR_UNAVAILABLE;
    }
    char nvrtc_why[2048];
    if (alloy_cuda_load_nvrtc(nvrtc_why, sizeof nvrtc_why) != 0) {
        snprintf(why, why_len, "%d NVIDIA GPU%s found, but %s", n, n == 1 ? "" : "s", nvrtc_why);
        return ALLOY_ERROR_UNAVAILABLE;
    }
    *device_count = n;
    if (why && why_len) why[0] = 0;
    return ALLOY_OK;
}

static alloy_status cuda_device_init(alloy_device *dev) {
    cuda_device *d = calloc(1, sizeof *d);
    if (!d) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory creating %s", dev->name);
    d->ordinal = dev->ordinal;
    CUresult r = alloy_cu.cuDeviceGet(&d->dev, dev->ordinal);
    if (r != ALLOY_CUDA_SUCCESS) {
        free(d);
        return alloy_cuda_fail(ALLOY_ERROR_UNAVAILABLE, r, "cuDeviceGet", dev->name);
    }
    r = alloy_cu.cuDevicePrimaryCtxRetain(&d->ctx, d->dev);
    if (r != ALLOY_CUDA_SUCCESS) {
        free(d);
        return alloy_cuda_fail(ALLOY_ERROR_UNAVAILABLE, r, "cuDevicePrimaryCtxRetain", dev->name);
    }
    struct { int attr; int *out; } attrs[] = {
        {ALLOY_CU_DEV_COMPUTE_CAPABILITY_MAJOR, &d->cc_major},
        {ALLOY_CU_DEV_COMPUTE_CAPABILITY_MINOR, &d->cc_minor},
        {ALLOY_CU_DEV_MULTIPROCESSOR_COUNT, &d->sm_count},
        {ALLOY_CU_DEV_MAX_SHARED_MEMORY_PER_BLOCK, &d->max_smem_block},
        {ALLOY_CU_DEV_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &d->max_smem_optin},
        {ALLOY_CU_DEV_MAX_BLOCK_DIM_X, &d->max_block[0]},
        {ALLOY_CU_DEV_MAX_BLOCK_DIM_Y, &d->max_block[1]},
        {ALLOY_CU_DEV_MAX_BLOCK_DIM_Z, &d->max_block[2]},
        {ALLOY_CU_DEV_MAX_GRID_DIM_X, &d->max_grid[0]},
        {ALLOY_CU_DEV_MAX_GRID_DIM_Y, &d->max_grid[1]},
        {ALLOY_CU_DEV_MAX_GRID_DIM_Z, &d->max_grid[2]},
    };
    const char *call = NULL;
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0] && !call; i++)
        if ((r = alloy_cu.cuDeviceGetAttribute(attrs[i].out, attrs[i].attr, d->dev)) != ALLOY_CUDA_SUCCESS)
            call = "cuDeviceGetAttribute";
    if (!call && (r = alloy_cu.cuDeviceTotalMem_v2(&d->total_mem, d->dev)) != ALLOY_CUDA_SUCCESS)
        call = "cuDeviceTotalMem";
    if (!call && (r = alloy_cu.cuDriverGetVersion(&d->driver_version)) != ALLOY_CUDA_SUCCESS)
        call = "cuDriverGetVersion";
    char name[128] = "NVIDIA GPU";
    if (!call && (r = alloy_cu.cuDeviceGetName(name, (int)sizeof name, d->dev)) != ALLOY_CUDA_SUCCESS)
        call = "cuDeviceGetName";
    alloy_status st = ALLOY_OK;
    if (call) st = alloy_cuda_fail(ALLOY_ERROR_UNAVAILABLE, r, call, dev->name);
    if (st == ALLOY_OK) st = alloy_cuda_allocator_init(&d->alloc);
    if (st != ALLOY_OK) {
        alloy_cu.cuDevicePrimaryCtxRelease_v2(d->dev);
        free(d);
        return st;
    }
    if (d->max_smem_optin < d->max_smem_block) d->max_smem_optin = d->max_smem_block;
    pthread_mutex_init(&d->streams_lock, NULL);
    atomic_init(&d->last_kernel, NULL);
    alloy_cuda_choose_arch(d);

    int nv = alloy_cuda_nvrtc_version();
    const char *inc = alloy_cuda_include_dir();
    snprintf(d->identity, sizeof d->identity, "nvrtc %d.%d --std=c++20; driver %d; %s_%d; include %s",
             nv / 1000, nv % 1000 / 10, d->driver_version, d->sass ? "sm" : "compute", d->arch_num,
             inc ? inc : "-");
    int n = snprintf(dev->description, sizeof dev->description,
                     "%s, sm_%d%d, %d SMs, %.1f GiB, driver %d.%d, NVRTC %d.%d", name, d->cc_major,
                     d->cc_minor, d->sm_count,
                     (double)d->total_mem / (1024.0 * 1024.0 * 1024.0), d->driver_version / 1000,
                     d->driver_version % 1000 / 10, nv / 1000, nv % 1000 / 10);
    if (n > 0 && (size_t)n < sizeof dev->description) {
        if (d->arch_error[0])
            snprintf(dev->description + n, sizeof dev->description - (size_t)n,
                     " (cannot compile: %.180s)", d->arch_error);
        else if (!d->sass)
            snprintf(dev->description + n, sizeof dev->description - (size_t)n,
                     " (PTX for compute_%d)", d->arch_num);
    }
    dev->impl = d;
    dev->compute_capability = d->cc_major * 10 + d->cc_minor;
    dev->multiprocessor_count = d->sm_count;
    dev->tensor_maps = alloy_cuda_has_tensor_maps(d);
    dev->overlapping_launches = alloy_cuda_overlaps_launches(d);
    return ALLOY_OK;
}

static const char *cuda_compiler_identity(alloy_device *dev) {
    return cuda_dev(dev)->identity;
}

const alloy_backend alloy_cuda_backend = {
    .name = "cuda",
    .kind = ALLOY_BACKEND_CUDA,
    .target = ALLOY_TARGET_CUDA,
    .host_accessible = 0,
    .probe = cuda_probe,
    .device_init = cuda_device_init,
    .compiler_identity = cuda_compiler_identity,
    .mem_alloc = alloy_cuda_mem_alloc,
    .mem_free = alloy_cuda_mem_free,
    .mem_copy = alloy_cuda_mem_copy,
    .mem_fill = alloy_cuda_mem_fill,
    .stream_create = alloy_cuda_stream_create,
    .stream_wrap = alloy_cuda_stream_wrap,
    .stream_destroy = alloy_cuda_stream_destroy,
    .stream_sync = alloy_cuda_stream_sync,
    .stream_native = alloy_cuda_stream_native,
    .stream_wait = alloy_cuda_stream_wait,
    .compile = alloy_cuda_compile,
    .program_report = alloy_cuda_program_report,
    .launch = alloy_cuda_launch,
    .compile_check = alloy_cuda_compile_check,
};
