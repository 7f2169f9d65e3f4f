/* cuda_launch.c — launching a compiled kernel on a CUDA stream.
 *
 * blockDim = the (already clamped) threadgroup, gridDim = ceil(grid /
 * threadgroup) per dimension, dynamic shared memory = the launch's
 * threadgroup memory. Kernel parameters follow the dialect's slot order (see
 * src/dialect/dialect.h and the CUDA entry point in codegen.c): a buffer
 * passes its 64-bit device pointer, a shape its int32[8] and strides its int64[8] by value,
 * a tensor map the CUtensorMap encoded now into a buffer on the stack, and the
 * last parameter is the grid in threads (uint32[3]).
 *
 * This is the hot path: no allocation (up to 63 arguments), no hashing, no
 * formatting unless something fails. The function attribute for more than
 * 48 KiB of dynamic shared memory is set once per function and size (the
 * largest size set so far is remembered). A launch that may overlap the
 * stream's previous kernel (alloy_launch_set_overlap) goes through
 * cuLaunchKernelEx with programmatic stream serialization where the device
 * overlaps launches (alloy_cuda_overlaps_launches; the core passes the
 * request on only there). */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda_internal.h"

#define STACK_PARAMS 64

_Static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute is cuda.h's 72 bytes");

/* Compute capability 9.0 (griddepcontrol) and a 12.3 driver: graphs' edges carry programmatic dependencies
 * from 12.3 on (a stream captured into a graph keeps them); with an older driver every launch is an ordinary
 * one, so that a capture never meets one it cannot record. ALLOY_CUDA_OVERLAP=0 turns overlapping launches
 * into ordinary ones. */
int alloy_cuda_overlaps_launches(const cuda_device *d) {
    const char *e = getenv("ALLOY_CUDA_OVERLAP");
    return d->cc_major >= 9 && d->driver_version >= 12030 && alloy_cu.cuLaunchKernelEx != NULL &&
           !(e && e[0] == '0' && e[1] == 0);
}

static pthread_mutex_t smem_lock = PTHREAD_MUTEX_INITIALIZER;

/* Context current. Allows `bytes` of dynamic shared memory for p. */
static alloy_status allow_smem(cuda_device *d, cuda_program *p, const char *kname, size_t bytes) {
    size_t limit = (size_t)d->max_smem_optin;
    size_t stat = (size_t)p->static_smem;
    if (bytes + stat > limit)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': %zu bytes of threadgroup memory%s exceed what sm_%d%d allows "
                           "per threadgroup (%zu bytes%s)",
                           kname, bytes, stat ? " plus the body's static threadgroup arrays" : "",
                           d->cc_major, d->cc_minor, limit,
                           stat ? ", of which the static arrays use some" : "");
    pthread_mutex_lock(&smem_lock);
    alloy_status st = ALLOY_OK;
    if ((long long)bytes > (long long)atomic_load(&p->smem_set)) {
        CUresult r = alloy_cu.cuFuncSetAttribute(p->fn, ALLOY_CU_FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                 (int)bytes);
        if (r == ALLOY_CUDA_SUCCESS) atomic_store(&p->smem_set, (int)bytes);
        else st = alloy_cuda_fail(ALLOY_ERROR_LAUNCH, r, "cuFuncSetAttribute", kname);
    }
    pthread_mutex_unlock(&smem_lock);
    return st;
}

static alloy_status launch_error(cuda_device *d, cuda_program *p, cuda_stream *s, const char *kname,
                                 CUresult r, const unsigned grid[3], const unsigned block[3],
                                 size_t smem) {
    char e[256];
    alloy_cuda_error_text(r, e, sizeof e);
    alloy_status st = r == ALLOY_CUDA_ERROR_OUT_OF_MEMORY ? ALLOY_ERROR_OUT_OF_MEMORY : ALLOY_ERROR_LAUNCH;
    if (r == ALLOY_CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
        return alloy_error(st,
                           "kernel '%s': cuLaunchKernel failed: %s: a threadgroup of %u threads "
                           "needs %d registers each (%d in all) plus %zu bytes of shared memory; "
                           "use a smaller threadgroup",
                           kname, e, block[0] * block[1] * block[2], p->num_regs,
                           p->num_regs * (int)(block[0] * block[1] * block[2]), smem);
    const char *prev = atomic_load_explicit(&s->last_kernel, memory_order_relaxed);
    if (!prev) prev = atomic_load_explicit(&d->last_kernel, memory_order_relaxed);
    int sticky = r == 700 || r == 702 || r == 710 || (r >= 714 && r <= 719);
    if (sticky)
        return alloy_error(st,
                           "kernel '%s': cuLaunchKernel failed: %s: an earlier kernel (the last one "
                           "launched was '%s') faulted and the CUDA context is now unusable: restart "
                           "the process",
                           kname, e, prev ? prev : "?");
    return alloy_error(st,
                       "kernel '%s': cuLaunchKernel failed: %s (gridDim %u x %u x %u, blockDim %u x "
                       "%u x %u, %zu bytes of dynamic shared memory)",
                       kname, e, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem);
}

alloy_status alloy_cuda_launch(alloy_device *dev, void *program, const alloy_launch_args *args,
                               alloy_stream *stream) {
    cuda_device *d = cuda_dev(dev);
    cuda_program *p = program;
    cuda_stream *s = cuda_stream_of(dev, stream);
    const char *kname = args->kernel_name ? args->kernel_name : p->name;

    unsigned block[3], grid[3];
    unsigned long long threads = 1;
    for (int i = 0; i < 3; i++) {
        block[i] = args->threadgroup[i] ? args->threadgroup[i] : 1;
        threads *= block[i];
        unsigned long long g = ((unsigned long long)args->grid[i] + block[i] - 1) / block[i];
        if (g > (unsigned long long)d->max_grid[i] || block[i] > (unsigned)d->max_block[i]) {
            static const char AXIS[3] = {'x', 'y', 'z'};
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "kernel '%s': grid %u in %c with threadgroup %u needs %llu "
                               "threadgroups; %s allows at most %d threadgroups and %d threads per "
                               "threadgroup in %c",
                               kname, args->grid[i], AXIS[i], block[i], g, dev->name, d->max_grid[i],
                               d->max_block[i], AXIS[i]);
        }
        grid[i] = (unsigned)g;
        if (!g) return ALLOY_OK; /* an empty grid launches nothing */
    }
    if (threads > (unsigned long long)p->max_threads)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': threadgroup %u x %u x %u = %llu threads, but the compiled "
                           "kernel allows at most %d threads per threadgroup on %s (it uses %d "
                           "registers per thread); use a smaller threadgroup",
                           kname, block[0], block[1], block[2], threads, p->max_threads, dev->name,
                           p->num_regs);
    size_t smem = args->threadgroup_memory;
    if (smem > (size_t)INT_MAX)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': %zu bytes of threadgroup memory are far beyond the device's "
                           "limit (%d bytes)", kname, smem, d->max_smem_optin);

    void *stack_params[STACK_PARAMS];
    void **params = stack_params;
    /* the encoded tensor maps: cuLaunchKernel copies them */
    _Alignas(64) unsigned char maps[ALLOY_MAX_TENSOR_MAPS][ALLOY_CU_TENSOR_MAP_BYTES];
    int n_maps = 0;
    for (int i = 0; i < args->n_args; i++) n_maps += args->args[i].kind == ALLOY_ARG_TENSOR_MAP;
    if (n_maps > ALLOY_MAX_TENSOR_MAPS)
        return alloy_error(ALLOY_ERROR_INTERNAL, "kernel '%s': %d tensor maps, more than %d", kname,
                           n_maps, ALLOY_MAX_TENSOR_MAPS);
    if (n_maps) {
        alloy_status ts = alloy_cuda_tensor_map_supported(d, kname);
        if (ts != ALLOY_OK) return ts;
    }
    if (args->n_args + 1 > STACK_PARAMS) {
        params = malloc(((size_t)args->n_args + 1) * sizeof *params);
        if (!params) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    n_maps = 0;
    for (int i = 0; i < args->n_args; i++) {
        alloy_arg *a = &args->args[i];
        switch (a->kind) {
        case ALLOY_ARG_SHAPE: params[i] = a->shape; break;
        case ALLOY_ARG_STRIDES: params[i] = a->strides; break;
        case ALLOY_ARG_VALUE: params[i] = a->value; break; /* the value itself */
        case ALLOY_ARG_TENSOR_MAP: params[i] = maps[n_maps++]; break; /* encoded below */
        default: params[i] = &a->ptr; break; /* the device pointer itself, 8 bytes */
        }
    }
    params[args->n_args] = (void *)args->grid;

    alloy_status st = ALLOY_OK;
    cuda_ctx_guard g;
    CUresult r = cuda_ctx_enter(d, &g);
    if (r != ALLOY_CUDA_SUCCESS) {
        st = alloy_cuda_fail(ALLOY_ERROR_LAUNCH, r, "cuCtxSetCurrent", kname);
    } else {
        for (int i = 0; i < args->n_args && st == ALLOY_OK; i++)
            if (args->args[i].kind == ALLOY_ARG_TENSOR_MAP)
                st = alloy_cuda_encode_tensor_map(&args->args[i], kname, params[i]);
        if (st == ALLOY_OK &&
            (long long)smem > (long long)atomic_load_explicit(&p->smem_set, memory_order_acquire))
            st = allow_smem(d, p, kname, smem);
        if (st == ALLOY_OK) {
            if (args->overlap) { /* only where the device overlaps launches (the core) */
                CUlaunchAttribute attr;
                memset(&attr, 0, sizeof attr);
                attr.id = ALLOY_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
                attr.value.programmaticStreamSerializationAllowed = 1;
                const CUlaunchConfig cfg = {grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                            (unsigned)smem, s->s, &attr, 1};
                r = alloy_cu.cuLaunchKernelEx(&cfg, p->fn, params, NULL);
            } else {
                r = alloy_cu.cuLaunchKernel(p->fn, grid[0], grid[1], grid[2], block[0], block[1],
                                            block[2], (unsigned)smem, s->s, params, NULL);
            }
            if (r == ALLOY_CUDA_SUCCESS) {
                atomic_store_explicit(&s->last_kernel, p->name, memory_order_relaxed);
                atomic_store_explicit(&d->last_kernel, p->name, memory_order_relaxed);
                cuda_stream_mark(s);
            } else {
                st = launch_error(d, p, s, kname, r, grid, block, smem);
            }
        }
        cuda_ctx_leave(&g);
    }
    if (params != stack_params) free(params);
    return st;
}
