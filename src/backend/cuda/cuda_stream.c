/* cuda_stream.c — CUDA streams: created (blocking streams, so they order
 * with the legacy default stream that PyTorch and CuPy use by default) or
 * wrapped (a CUstream the caller owns, never destroyed here), waits between
 * streams through events, and synchronisation that names the kernel behind
 * an asynchronous fault.
 *
 * Each stream carries two events: `fence`, recorded by the allocator when
 * memory is freed (cuda_memory.c; handed to the allocator when the stream
 * goes), and `signal`, recorded for stream_wait.
 * Re-recording an event is fine for both uses: a wait or query refers to the
 * latest record, which only ever covers more work. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda_internal.h"

/* Faults after which the context is unusable (sticky errors). */
static int is_sticky(CUresult r) {
    return r == 700 || r == 702 || r == 710 || (r >= 714 && r <= 719);
}

static alloy_status fault_error(CUresult r, const char *call, const char *kernel, const char *where) {
    char e[256];
    alloy_cuda_error_text(r, e, sizeof e);
    const char *tail = is_sticky(r)
                           ? "; after a fault like this the CUDA context is unusable: restart the "
                             "process (run the kernel with ALLOY_DEVICE=cpu ALLOY_CPU_DEBUG=1 to "
                             "find out-of-bounds accesses)"
                           : "";
    alloy_status st = r == ALLOY_CUDA_ERROR_OUT_OF_MEMORY ? ALLOY_ERROR_OUT_OF_MEMORY
                                                          : ALLOY_ERROR_LAUNCH;
    if (kernel)
        return alloy_error(st, "%s failed: %s while or after running kernel '%s'%s%s", call, e,
                           kernel, where, tail);
    return alloy_error(st, "%s failed: %s (no alloy kernel was launched%s)%s", call, e, where, tail);
}

alloy_status alloy_cuda_enqueue_error(cuda_stream *s, CUresult r, const char *call, const char *what) {
    if (!is_sticky(r)) return alloy_cuda_fail(ALLOY_ERROR_LAUNCH, r, call, what);
    const char *k = atomic_load_explicit(&s->last_kernel, memory_order_relaxed);
    if (!k) k = atomic_load_explicit(&s->dev->last_kernel, memory_order_relaxed);
    char where[160];
    snprintf(where, sizeof where, " (reported by %.100s)", what);
    return fault_error(r, call, k, where);
}

alloy_status alloy_cuda_sync_one(cuda_stream *s) {
    CUresult r = alloy_cu.cuStreamSynchronize(s->s);
    if (r == ALLOY_CUDA_SUCCESS) return ALLOY_OK;
    return fault_error(r, "cuStreamSynchronize",
                       atomic_load_explicit(&s->last_kernel, memory_order_relaxed),
                       " on this stream");
}

static void free_events(cuda_stream *s) {
    if (s->fence) alloy_cu.cuEventDestroy_v2(s->fence);
    if (s->signal) alloy_cu.cuEventDestroy_v2(s->signal);
}

/* Context current. Creates the events and adds s to the device; a stream
 * joining others first waits for everything queued on them (see
 * cuda_memory.c). */
static alloy_status register_stream(cuda_device *d, cuda_stream *s) {
    CUresult r = alloy_cu.cuEventCreate(&s->fence, ALLOY_CU_EVENT_DISABLE_TIMING);
    if (r == ALLOY_CUDA_SUCCESS)
        r = alloy_cu.cuEventCreate(&s->signal, ALLOY_CU_EVENT_DISABLE_TIMING);
    if (r != ALLOY_CUDA_SUCCESS) {
        free_events(s);
        return alloy_cuda_fail(ALLOY_ERROR_LAUNCH, r, "cuEventCreate", "creating a stream");
    }
    s->dev = d;
    atomic_init(&s->dirty, 0);
    atomic_init(&s->last_kernel, NULL);
    pthread_mutex_lock(&d->streams_lock);
    for (cuda_stream *x = d->streams; x && r == ALLOY_CUDA_SUCCESS; x = x->next) {
        atomic_store_explicit(&x->dirty, 0, memory_order_relaxed);
        r = alloy_cu.cuEventRecord(x->fence, x->s);
        if (r == ALLOY_CUDA_SUCCESS) r = alloy_cu.cuStreamWaitEvent(s->s, x->fence, 0);
    }
    if (r != ALLOY_CUDA_SUCCESS) {
        pthread_mutex_unlock(&d->streams_lock);
        free_events(s);
        return alloy_cuda_fail(ALLOY_ERROR_LAUNCH, r, "cuStreamWaitEvent", "creating a stream");
    }
    s->prev = NULL;
    s->next = d->streams;
    if (d->streams) d->streams->prev = s;
    d->streams = s;
    d->n_streams++;
    pthread_mutex_unlock(&d->streams_lock);
    return ALLOY_OK;
}

alloy_status alloy_cuda_stream_create(alloy_device *dev, void **impl) {
    cuda_device *d = cuda_dev(dev);
    cuda_stream *s = calloc(1, sizeof *s);
    if (!s) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory creating a stream");
    cuda_ctx_guard g;
    CUresult r = cuda_ctx_enter(d, &g);
    if (r != ALLOY_CUDA_SUCCESS) {
        free(s);
        return alloy_cuda_fail(ALLOY_ERROR_LAUNCH, r, "cuCtxSetCurrent", "creating a stream");
    }
    r = alloy_cu.cuStreamCreate(&s->s, 0);
    if (r != ALLOY_CUDA_SUCCESS) {
        cuda_ctx_leave(&g);
        free(s);
        return alloy_cuda_fail(ALLOY_ERROR_LAUNCH, r, "cuStreamCreate", "creating a stream");
    }
    s->owned = 1;
    alloy_status st = register_stream(d, s);
    if (st != ALLOY_OK) {
        alloy_cu.cuStreamDestroy_v2(s->s);
        free(s);
    }
    cuda_ctx_leave(&g);
    if (st == ALLOY_OK) *impl = s;
    return st;
}

alloy_status alloy_cuda_stream_wrap(alloy_device *dev, void *native, void **impl) {
    cuda_device *d = cuda_dev(dev);
    cuda_ctx_guard g;
    CUresult r = cuda_ctx_enter(d, &g);
    if (r != ALLOY_CUDA_SUCCESS)
        return alloy_cuda_fail(ALLOY_ERROR_LAUNCH, r, "cuCtxSetCurrent", "wrapping a stream");
    CUstream cs = (CUstream)native;
    /* NULL and the special handles (legacy 0x1, per-thread 0x2) belong to
     * whatever context is current; check the others. */
    if ((uintptr_t)native > 2 && alloy_cu.cuStreamGetCtx) {
        CUcontext owner = NULL;
        r = alloy_cu.cuStreamGetCtx(cs, &owner);
        if (r != ALLOY_CUDA_SUCCESS) {
            cuda_ctx_leave(&g);
            char e[256];
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "cannot wrap stream %p on %s: it is not a valid CUstream "
                               "(cuStreamGetCtx: %s)",
                               native, dev->name, alloy_cuda_error_text(r, e, sizeof e));
        }
        if (owner != d->ctx) {
            cuda_ctx_leave(&g);
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "cannot wrap stream %p on %s: it belongs to another CUDA context "
                               "(another device, or a context that is not the device's primary "
                               "context)",
                               native, dev->name);
        }
    }
    cuda_stream *s = calloc(1, sizeof *s);
    if (!s) {
        cuda_ctx_leave(&g);
        return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory wrapping a stream");
    }
    s->s = cs;
    s->owned = 0;
    alloy_status st = register_stream(d, s);
    cuda_ctx_leave(&g);
    if (st != ALLOY_OK) {
        free(s);
        return st;
    }
    *impl = s;
    return ALLOY_OK;
}

void alloy_cuda_stream_destroy(alloy_device *dev, void *impl) {
    cuda_device *d = cuda_dev(dev);
    cuda_stream *s = impl;
    if (!s) return;
    cuda_ctx_guard g;
    if (cuda_ctx_enter(d, &g) != ALLOY_CUDA_SUCCESS) return; /* leak rather than crash */
    /* Memory freed while this stream existed may wait on its fence: the
     * fence, recorded after our last work on it, goes to the allocator, so
     * destroying a stream (or a wrapper) never blocks the host. */
    if (atomic_exchange_explicit(&s->dirty, 0, memory_order_relaxed))
        alloy_cu.cuEventRecord(s->fence, s->s);
    pthread_mutex_lock(&d->streams_lock);
    if (s->prev) s->prev->next = s->next;
    else d->streams = s->next;
    if (s->next) s->next->prev = s->prev;
    d->n_streams--;
    alloy_cuda_allocator_stream_gone(d, s->fence);
    pthread_mutex_unlock(&d->streams_lock);
    alloy_cu.cuEventDestroy_v2(s->signal);
    if (s->owned) alloy_cu.cuStreamDestroy_v2(s->s);
    cuda_ctx_leave(&g);
    free(s);
}

alloy_status alloy_cuda_stream_sync(alloy_device *dev, void *impl) {
    cuda_device *d = cuda_dev(dev);
    cuda_ctx_guard g;
    CUresult r = cuda_ctx_enter(d, &g);
    if (r != ALLOY_CUDA_SUCCESS)
        return alloy_cuda_fail(ALLOY_ERROR_LAUNCH, r, "cuCtxSetCurrent", "synchronising");
    alloy_status st;
    if (impl) {
        st = alloy_cuda_sync_one(impl);
    } else {
        r = alloy_cu.cuCtxSynchronize();
        st = r == ALLOY_CUDA_SUCCESS
                 ? ALLOY_OK
                 : fault_error(r, "cuCtxSynchronize",
                               atomic_load_explicit(&d->last_kernel, memory_order_relaxed),
                               " on this device");
    }
    cuda_ctx_leave(&g);
    return st;
}

void *alloy_cuda_stream_native(alloy_device *dev, void *impl) {
    (void)dev;
    return impl ? (void *)((cuda_stream *)impl)->s : NULL;
}

alloy_status alloy_cuda_stream_wait(alloy_device *dev, void *waiter, void *signaller) {
    cuda_device *d = cuda_dev(dev);
    cuda_stream *w = waiter, *s = signaller;
    if (w->s == s->s) return ALLOY_OK; /* one queue: already in order */
    cuda_ctx_guard g;
    CUresult r = cuda_ctx_enter(d, &g);
    if (r != ALLOY_CUDA_SUCCESS)
        return alloy_cuda_fail(ALLOY_ERROR_LAUNCH, r, "cuCtxSetCurrent", "making a stream wait");
    const char *call = "cuEventRecord";
    r = alloy_cu.cuEventRecord(s->signal, s->s);
    if (r == ALLOY_CUDA_SUCCESS) {
        call = "cuStreamWaitEvent";
        r = alloy_cu.cuStreamWaitEvent(w->s, s->signal, 0);
    }
    cuda_ctx_leave(&g);
    if (r != ALLOY_CUDA_SUCCESS)
        return alloy_cuda_fail(ALLOY_ERROR_LAUNCH, r, call, "making a stream wait for another");
    return ALLOY_OK;
}
