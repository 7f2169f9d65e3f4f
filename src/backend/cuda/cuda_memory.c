/* cuda_memory.c — device memory of the CUDA backend: a caching allocator
 * (cuMemAlloc is slow and cuMemFree synchronises the device), and copies and
 * fills queued on a stream.
 *
 * Sizes are rounded to classes (512 B minimum, then four classes per power of
 * two; over 64 MiB, multiples of 2 MiB with best fit), freed blocks are kept
 * and reused. On out-of-memory every cached block is released and the
 * allocation retried once.
 *
 * When is a freed block safe to hand out again? alloc/free carry no stream,
 * so the allocator reasons about all of the device's streams:
 *   - with one stream (the default one only: the common case), work is in
 *     order, so a block is reusable at once, like PyTorch's same-stream reuse;
 *   - with several, a free records a fence event on every stream that has had
 *     work since its last fence, and the block waits in `pending` until all
 *     fences have completed (checked without blocking when a class runs dry;
 *     waited for when pending memory grows large or memory runs out).
 * A new stream first waits (on the device) for everything queued on the
 * existing streams, so blocks recycled while there was a single stream are
 * safe on it too (cuda_stream.c). A destroyed stream's last fence stays
 * ("retired") until it completes, so destroying a stream never blocks. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda_internal.h"

#define MIN_BLOCK ((size_t)512)
#define LARGE_BLOCK ((size_t)64 << 20)
#define LARGE_ROUND ((size_t)2 << 20)
#define MAX_REQUEST ((size_t)1 << 56)
/* Pending frees above this many bytes make the next free wait for the fences. */
#define PENDING_LIMIT ((size_t)1 << 30)

struct cuda_block {
    CUdeviceptr ptr;
    size_t size;
    cuda_block *next;
};

alloy_status alloy_cuda_fail(alloy_status status, CUresult r, const char *call, const char *what) {
    char e[256];
    if (r == ALLOY_CUDA_ERROR_OUT_OF_MEMORY) status = ALLOY_ERROR_OUT_OF_MEMORY;
    return alloy_error(status, "%s: %s failed: %s", what, call, alloy_cuda_error_text(r, e, sizeof e));
}

/* ---- size classes ------------------------------------------------------------- */

/* Rounded size of a request; *index is the small class (-1: large). */
static size_t class_of(size_t bytes, int *index) {
    if (bytes <= MIN_BLOCK) {
        *index = 0;
        return MIN_BLOCK;
    }
    if (bytes > LARGE_BLOCK) {
        *index = -1;
        return (bytes + LARGE_ROUND - 1) / LARGE_ROUND * LARGE_ROUND;
    }
    /* 2^k < bytes <= 2^(k+1): four classes 2^k * (1 + j/4), j = 1..4. */
    int k = 63 - __builtin_clzll((unsigned long long)(bytes - 1));
    size_t step = (size_t)1 << (k - 2);
    size_t size = (bytes + step - 1) / step * step;
    int j = (int)(size / step) - 4; /* 1..4 */
    *index = 1 + (k - 9) * 4 + (j - 1);
    return size;
}

/* ---- bookkeeping nodes ---------------------------------------------------------- */

static cuda_block *node_new(cuda_allocator *a) {
    cuda_block *b = a->spare_nodes;
    if (b) {
        a->spare_nodes = b->next;
        return b;
    }
    return malloc(sizeof *b);
}

static void node_free(cuda_allocator *a, cuda_block *b) {
    b->next = a->spare_nodes;
    a->spare_nodes = b;
}

static size_t live_hash(const cuda_allocator *a, CUdeviceptr p) {
    return (size_t)(((p >> 9) * 0x9E3779B97F4A7C15ull) >> 20) & (a->live_buckets - 1);
}

static int live_grow(cuda_allocator *a) {
    size_t n = a->live_buckets ? a->live_buckets * 2 : 1024;
    cuda_block **t = calloc(n, sizeof *t);
    if (!t) return -1;
    cuda_block **old = a->live;
    size_t old_n = a->live_buckets;
    a->live = t;
    a->live_buckets = n;
    for (size_t i = 0; i < old_n; i++)
        for (cuda_block *b = old[i], *next; b; b = next) {
            next = b->next;
            size_t h = live_hash(a, b->ptr);
            b->next = t[h];
            t[h] = b;
        }
    free(old);
    return 0;
}

static void live_insert(cuda_allocator *a, cuda_block *b) {
    size_t h = live_hash(a, b->ptr);
    b->next = a->live[h];
    a->live[h] = b;
    a->live_count++;
    a->in_use_bytes += b->size;
}

static cuda_block *live_remove(cuda_allocator *a, CUdeviceptr p) {
    if (!a->live_buckets) return NULL;
    for (cuda_block **pp = &a->live[live_hash(a, p)]; *pp; pp = &(*pp)->next)
        if ((*pp)->ptr == p) {
            cuda_block *b = *pp;
            *pp = b->next;
            a->live_count--;
            a->in_use_bytes -= b->size;
            return b;
        }
    return NULL;
}

alloy_status alloy_cuda_allocator_init(cuda_allocator *a) {
    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->lock, NULL);
    if (live_grow(a) != 0) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
    return ALLOY_OK;
}

/* ---- free lists ------------------------------------------------------------------ */

static void put_free(cuda_allocator *a, cuda_block *b) {
    int idx;
    class_of(b->size, &idx);
    if (idx < 0) {
        b->next = a->free_large;
        a->free_large = b;
    } else {
        b->next = a->free_small[idx];
        a->free_small[idx] = b;
    }
    a->cached_bytes += b->size;
}

static cuda_block *take_free(cuda_allocator *a, size_t size, int idx) {
    cuda_block *b = NULL;
    if (idx >= 0) {
        b = a->free_small[idx];
        if (b) a->free_small[idx] = b->next;
    } else {
        /* Best fit among blocks at most 1/8 larger than needed. */
        cuda_block **best = NULL;
        for (cuda_block **pp = &a->free_large; *pp; pp = &(*pp)->next)
            if ((*pp)->size >= size && (*pp)->size - size <= size / 8 &&
                (!best || (*pp)->size < (*best)->size))
                best = pp;
        if (best) {
            b = *best;
            *best = b->next;
        }
    }
    if (b) a->cached_bytes -= b->size;
    return b;
}

static void flush_pending(cuda_allocator *a) {
    cuda_block *b = a->pending;
    a->pending = NULL;
    a->pending_bytes = 0;
    while (b) {
        cuda_block *next = b->next;
        put_free(a, b);
        b = next;
    }
}

/* Streams lock held: drops the retired fences that have completed; 1 when
 * none is left. */
static int retired_done(cuda_device *d) {
    int keep = 0;
    for (int i = 0; i < d->n_retired; i++) {
        if (alloy_cu.cuEventQuery(d->retired[i]) == ALLOY_CUDA_SUCCESS)
            alloy_cu.cuEventDestroy_v2(d->retired[i]);
        else
            d->retired[keep++] = d->retired[i];
    }
    d->n_retired = keep;
    return keep == 0;
}

/* Streams lock held. 1 when every fence has completed (non-blocking). */
static int fences_done(cuda_device *d) {
    for (cuda_stream *s = d->streams; s; s = s->next)
        if (alloy_cu.cuEventQuery(s->fence) != ALLOY_CUDA_SUCCESS) return 0;
    return retired_done(d);
}

/* Streams lock held: waits for every fence. Errors (a poisoned context) are
 * left for the next synchronisation to report. */
static void fences_wait(cuda_device *d) {
    for (cuda_stream *s = d->streams; s; s = s->next) alloy_cu.cuEventSynchronize(s->fence);
    for (int i = 0; i < d->n_retired; i++) {
        alloy_cu.cuEventSynchronize(d->retired[i]);
        alloy_cu.cuEventDestroy_v2(d->retired[i]);
    }
    d->n_retired = 0;
}

/* Streams lock held: records a fence on every stream with new work. */
static void fences_record(cuda_device *d) {
    for (cuda_stream *s = d->streams; s; s = s->next)
        if (atomic_exchange_explicit(&s->dirty, 0, memory_order_relaxed))
            alloy_cu.cuEventRecord(s->fence, s->s);
}

void alloy_cuda_allocator_stream_gone(cuda_device *d, CUevent fence) {
    if (alloy_cu.cuEventQuery(fence) == ALLOY_CUDA_SUCCESS) {
        alloy_cu.cuEventDestroy_v2(fence);
    } else {
        if (d->n_retired == d->cap_retired) {
            int cap = d->cap_retired ? 2 * d->cap_retired : 8;
            CUevent *r = realloc(d->retired, (size_t)cap * sizeof *r);
            if (!r) { /* keep it simple: wait for it now */
                alloy_cu.cuEventSynchronize(fence);
                alloy_cu.cuEventDestroy_v2(fence);
                fence = NULL;
            } else {
                d->retired = r;
                d->cap_retired = cap;
            }
        }
        if (fence) d->retired[d->n_retired++] = fence;
    }
    /* Back to one in-order stream: pending blocks are safe on it (and new
     * streams wait for it) once the other streams' work is done. */
    if (d->n_streams <= 1 && retired_done(d)) {
        pthread_mutex_lock(&d->alloc.lock);
        flush_pending(&d->alloc);
        pthread_mutex_unlock(&d->alloc.lock);
    }
}

/* Allocator lock held: hands every cached block back to the driver. */
static void release_cached(cuda_allocator *a) {
    cuda_block *lists[64 * 4 + 1];
    int n = 0;
    for (int i = 0; i < 64 * 4; i++) {
        if (a->free_small[i]) lists[n++] = a->free_small[i];
        a->free_small[i] = NULL;
    }
    if (a->free_large) lists[n++] = a->free_large;
    a->free_large = NULL;
    for (int i = 0; i < n; i++)
        for (cuda_block *b = lists[i], *next; b; b = next) {
            next = b->next;
            alloy_cu.cuMemFree_v2(b->ptr);
            node_free(a, b);
        }
    a->cached_bytes = 0;
}

/* ---- alloc / free ------------------------------------------------------------------ */

static alloy_status oom_error(alloy_device *dev, size_t bytes, size_t rounded) {
    cuda_device *d = cuda_dev(dev);
    size_t free_b = 0, total_b = 0;
    alloy_cu.cuMemGetInfo_v2(&free_b, &total_b);
    const double gib = 1024.0 * 1024.0 * 1024.0;
    return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY,
                       "out of memory on %s: cannot allocate %zu bytes (%.3f GiB, rounded to %zu); "
                       "the device has %.2f GiB free of %.2f GiB and alloy's arrays use %.2f GiB "
                       "(cached blocks were released before retrying)",
                       dev->name, bytes, (double)bytes / gib, rounded, (double)free_b / gib,
                       (double)total_b / gib, (double)d->alloc.in_use_bytes / gib);
}

alloy_status alloy_cuda_mem_alloc(alloy_device *dev, size_t bytes, void **ptr) {
    cuda_device *d = cuda_dev(dev);
    cuda_allocator *a = &d->alloc;
    if (bytes > MAX_REQUEST) {
        const double gib = 1024.0 * 1024.0 * 1024.0;
        return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY,
                           "out of memory on %s: cannot allocate %zu bytes (%.1f GiB; the device "
                           "has %.2f GiB)",
                           dev->name, bytes, (double)bytes / gib, (double)d->total_mem / gib);
    }
    int idx;
    size_t size = class_of(bytes, &idx);
    cuda_ctx_guard g;
    CUresult r = cuda_ctx_enter(d, &g);
    if (r != ALLOY_CUDA_SUCCESS)
        return alloy_cuda_fail(ALLOY_ERROR_LAUNCH, r, "cuCtxSetCurrent", "allocating device memory");

    pthread_mutex_lock(&d->streams_lock);
    pthread_mutex_lock(&a->lock);
    cuda_block *b = take_free(a, size, idx);
    if (!b && a->pending && fences_done(d)) {
        flush_pending(a);
        b = take_free(a, size, idx);
    }
    if (b) {
        live_insert(a, b);
        pthread_mutex_unlock(&a->lock);
        pthread_mutex_unlock(&d->streams_lock);
        cuda_ctx_leave(&g);
        *ptr = (void *)(uintptr_t)b->ptr;
        return ALLOY_OK;
    }
    if (a->live_count >= 2 * a->live_buckets) live_grow(a); /* failure: longer chains only */
    b = node_new(a);
    pthread_mutex_unlock(&a->lock);
    pthread_mutex_unlock(&d->streams_lock);
    if (!b) {
        cuda_ctx_leave(&g);
        return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of host memory");
    }

    CUdeviceptr p = 0;
    r = alloy_cu.cuMemAlloc_v2(&p, size);
    if (r == ALLOY_CUDA_ERROR_OUT_OF_MEMORY) {
        /* Give everything cached back (after the fences) and try once more. */
        pthread_mutex_lock(&d->streams_lock);
        pthread_mutex_lock(&a->lock);
        if (a->pending) {
            fences_wait(d);
            flush_pending(a);
        }
        release_cached(a);
        pthread_mutex_unlock(&a->lock);
        pthread_mutex_unlock(&d->streams_lock);
        r = alloy_cu.cuMemAlloc_v2(&p, size);
    }
    if (r != ALLOY_CUDA_SUCCESS) {
        alloy_status st = r == ALLOY_CUDA_ERROR_OUT_OF_MEMORY
                              ? oom_error(dev, bytes, size)
                              : alloy_cuda_fail(ALLOY_ERROR_LAUNCH, r, "cuMemAlloc", dev->name);
        pthread_mutex_lock(&a->lock);
        node_free(a, b);
        pthread_mutex_unlock(&a->lock);
        cuda_ctx_leave(&g);
        return st;
    }
    cuda_ctx_leave(&g);
    b->ptr = p;
    b->size = size;
    pthread_mutex_lock(&a->lock);
    live_insert(a, b);
    pthread_mutex_unlock(&a->lock);
    *ptr = (void *)(uintptr_t)p;
    return ALLOY_OK;
}

void alloy_cuda_mem_free(alloy_device *dev, void *ptr) {
    if (!ptr) return;
    cuda_device *d = cuda_dev(dev);
    cuda_allocator *a = &d->alloc;
    cuda_ctx_guard g;
    CUresult r = cuda_ctx_enter(d, &g);
    if (r != ALLOY_CUDA_SUCCESS) {
        char e[256];
        alloy_warn("freeing device memory on %s: cannot make the context current: %s", dev->name,
                   alloy_cuda_error_text(r, e, sizeof e));
        return;
    }
    pthread_mutex_lock(&d->streams_lock);
    pthread_mutex_lock(&a->lock);
    cuda_block *b = live_remove(a, (CUdeviceptr)(uintptr_t)ptr);
    if (!b) {
        pthread_mutex_unlock(&a->lock);
        pthread_mutex_unlock(&d->streams_lock);
        cuda_ctx_leave(&g);
        alloy_warn("alloy: freeing %p on %s, which alloy did not allocate (ignored)", ptr, dev->name);
        return;
    }
    if (d->n_streams <= 1 && retired_done(d)) {
        put_free(a, b);
    } else {
        fences_record(d);
        b->next = a->pending;
        a->pending = b;
        a->pending_bytes += b->size;
        if (a->pending_bytes > PENDING_LIMIT) {
            fences_wait(d);
            flush_pending(a);
        }
    }
    pthread_mutex_unlock(&a->lock);
    pthread_mutex_unlock(&d->streams_lock);
    cuda_ctx_leave(&g);
}

/* ---- copies and fills ---------------------------------------------------------------- */

alloy_status alloy_cuda_mem_copy(alloy_device *dev, void *dst, const void *src, size_t bytes,
                                 alloy_copy_kind kind, alloy_stream *stream) {
    if (!bytes) return ALLOY_OK;
    cuda_device *d = cuda_dev(dev);
    cuda_stream *s = cuda_stream_of(dev, stream);
    cuda_ctx_guard g;
    CUresult r = cuda_ctx_enter(d, &g);
    if (r != ALLOY_CUDA_SUCCESS)
        return alloy_cuda_fail(ALLOY_ERROR_LAUNCH, r, "cuCtxSetCurrent", "copying memory");
    const char *call;
    switch (kind) {
    case ALLOY_COPY_HOST_TO_DEVICE:
        call = "cuMemcpyHtoDAsync";
        r = alloy_cu.cuMemcpyHtoDAsync_v2((CUdeviceptr)(uintptr_t)dst, src, bytes, s->s);
        break;
    case ALLOY_COPY_DEVICE_TO_HOST:
        call = "cuMemcpyDtoHAsync";
        r = alloy_cu.cuMemcpyDtoHAsync_v2(dst, (CUdeviceptr)(uintptr_t)src, bytes, s->s);
        break;
    default:
        call = "cuMemcpyDtoDAsync";
        r = alloy_cu.cuMemcpyDtoDAsync_v2((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src,
                                          bytes, s->s);
        break;
    }
    alloy_status st = ALLOY_OK;
    if (r != ALLOY_CUDA_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "copying %zu bytes on %s", bytes, dev->name);
        st = alloy_cuda_enqueue_error(s, r, call, what);
    } else {
        cuda_stream_mark(s);
        /* The host side must be complete when the call returns (and a pinned
         * source may be reused by the caller right away). */
        if (kind != ALLOY_COPY_DEVICE_TO_DEVICE) st = alloy_cuda_sync_one(s);
    }
    cuda_ctx_leave(&g);
    return st;
}

alloy_status alloy_cuda_mem_fill(alloy_device *dev, void *dst, size_t count, const void *pattern,
                                 size_t elem_size, alloy_stream *stream) {
    if (!count) return ALLOY_OK;
    cuda_device *d = cuda_dev(dev);
    cuda_stream *s = cuda_stream_of(dev, stream);
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)dst;
    const unsigned char *pat = pattern;
    cuda_ctx_guard g;
    CUresult r = cuda_ctx_enter(d, &g);
    if (r != ALLOY_CUDA_SUCCESS)
        return alloy_cuda_fail(ALLOY_ERROR_LAUNCH, r, "cuCtxSetCurrent", "filling memory");
    const char *call = "cuMemsetD8Async";
    switch (elem_size) {
    case 1:
        r = alloy_cu.cuMemsetD8Async(p, pat[0], count, s->s);
        break;
    case 2: {
        unsigned short v;
        memcpy(&v, pat, 2);
        call = "cuMemsetD16Async";
        r = alloy_cu.cuMemsetD16Async(p, v, count, s->s);
        break;
    }
    case 4: {
        unsigned int v;
        memcpy(&v, pat, 4);
        call = "cuMemsetD32Async";
        r = alloy_cu.cuMemsetD32Async(p, v, count, s->s);
        break;
    }
    case 8: {
        unsigned int lo, hi;
        memcpy(&lo, pat, 4);
        memcpy(&hi, pat + 4, 4);
        if (lo == hi) {
            call = "cuMemsetD32Async";
            r = alloy_cu.cuMemsetD32Async(p, lo, count * 2, s->s);
        } else {
            /* Two strided 32-bit fills: column 0 (low words), column 1 (high
             * words) of a count x 1 matrix with an 8-byte pitch. */
            call = "cuMemsetD2D32Async";
            r = alloy_cu.cuMemsetD2D32Async(p, 8, lo, 1, count, s->s);
            if (r == ALLOY_CUDA_SUCCESS) r = alloy_cu.cuMemsetD2D32Async(p + 4, 8, hi, 1, count, s->s);
        }
        break;
    }
    default:
        cuda_ctx_leave(&g);
        return alloy_error(ALLOY_ERROR_INTERNAL, "fill with an element of %zu bytes", elem_size);
    }
    alloy_status st = ALLOY_OK;
    if (r != ALLOY_CUDA_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "filling %zu elements on %s", count, dev->name);
        st = alloy_cuda_enqueue_error(s, r, call, what);
    } else {
        cuda_stream_mark(s);
    }
    cuda_ctx_leave(&g);
    return st;
}
