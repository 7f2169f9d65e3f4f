/* cuda_internal.h — what the CUDA backend's files share: the device, stream
 * and program objects, the context guard, and each file's entry points. */
#ifndef ALLOY_CUDA_INTERNAL_H
#define ALLOY_CUDA_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "core/backend.h"
#include "cuda_api.h"

typedef struct cuda_block cuda_block;

/* The caching allocator of one device (cuda_memory.c). */
typedef struct cuda_allocator {
    pthread_mutex_t lock;
    cuda_block **live;      /* hash table: device pointer -> block */
    size_t live_buckets;
    size_t live_count;
    cuda_block *free_small[64 * 4]; /* reusable blocks by size class */
    cuda_block *free_large;         /* reusable blocks over 64 MiB */
    cuda_block *pending;            /* freed, waiting for the streams' fences */
    size_t pending_bytes;
    cuda_block *spare_nodes;        /* recycled bookkeeping nodes */
    size_t cached_bytes;            /* in the free lists */
    size_t in_use_bytes;
} cuda_allocator;

typedef struct cuda_stream cuda_stream;

typedef struct cuda_device {
    CUdevice dev;
    CUcontext ctx;
    int ordinal;
    int cc_major, cc_minor;
    int sm_count;
    int max_smem_block;     /* bytes without opt-in (48 KiB) */
    int max_smem_optin;     /* bytes with the function attribute */
    int max_block[3];
    int max_grid[3];
    size_t total_mem;
    int driver_version;     /* e.g. 12040 */
    /* Code generation target chosen for this device and the NVRTC found:
     * arch_num 90 and sass 1 -> "sm_90"; sass 0 -> PTX for "compute_XY". */
    int arch_num;
    int sass;
    char arch_error[256];   /* non-empty: NVRTC cannot target this device */
    char identity[256];
    cuda_allocator alloc;
    pthread_mutex_t streams_lock;
    cuda_stream *streams;   /* every live stream (created and wrapped) */
    int n_streams;
    /* Fences of destroyed streams that had not completed yet (memory freed
     * before may still wait on them); destroyed once complete. */
    CUevent *retired;
    int n_retired, cap_retired;
    _Atomic(const char *) last_kernel; /* the last kernel launched on any stream */
} cuda_device;

struct cuda_stream {
    cuda_device *dev;
    CUstream s;
    int owned;                        /* created by alloy (destroyed with it) */
    CUevent fence;                    /* recorded when memory is freed (cuda_memory.c) */
    CUevent signal;                   /* recorded for stream_wait */
    atomic_int dirty;                 /* work was queued since the last fence */
    _Atomic(const char *) last_kernel; /* for fault messages at sync */
    cuda_stream *next, *prev;
};

typedef struct cuda_program {
    CUmodule module;
    CUfunction fn;
    char *name;          /* the kernel's name (for messages), lives forever */
    char arch[24];       /* "sm_90", "sm_90a", "compute_90" */
    int is_ptx;
    size_t image_bytes;  /* cubin or PTX size */
    int num_regs, static_smem, local_bytes, const_bytes, max_threads;
    atomic_int smem_set; /* largest dynamic shared memory size set so far */
    char *log;           /* NVRTC output (warnings), may be NULL */
    char *path;          /* disk cache entry, may be NULL */
} cuda_program;

/* ---- context guard ------------------------------------------------------------
 * Every entry point that calls the driver makes the device's primary context
 * current first (user threads start with none). If the thread had another
 * context current (another device, or a library's own), it is restored on
 * leave; a thread that had none keeps ours, like the CUDA runtime does. */
typedef struct cuda_ctx_guard {
    CUcontext prev;
    int restore;
} cuda_ctx_guard;

static inline CUresult cuda_ctx_enter(const cuda_device *d, cuda_ctx_guard *g) {
    CUcontext cur = NULL;
    g->restore = 0;
    g->prev = NULL;
    CUresult r = alloy_cu.cuCtxGetCurrent(&cur);
    if (r != ALLOY_CUDA_SUCCESS) return r;
    if (cur == d->ctx) return ALLOY_CUDA_SUCCESS;
    r = alloy_cu.cuCtxSetCurrent(d->ctx);
    if (r != ALLOY_CUDA_SUCCESS) return r;
    g->prev = cur;
    g->restore = cur != NULL;
    return ALLOY_CUDA_SUCCESS;
}

static inline void cuda_ctx_leave(cuda_ctx_guard *g) {
    if (g->restore) alloy_cu.cuCtxSetCurrent(g->prev);
}

/* alloy_error for a failed driver call: "<what>: <call> failed: CUDA_ERROR_X
 * (...)". OUT_OF_MEMORY results map to ALLOY_ERROR_OUT_OF_MEMORY. */
alloy_status alloy_cuda_fail(alloy_status status, CUresult r, const char *call, const char *what);

static inline cuda_device *cuda_dev(alloy_device *dev) { return (cuda_device *)dev->impl; }
static inline cuda_stream *cuda_stream_of(alloy_device *dev, alloy_stream *s) {
    return (cuda_stream *)(s ? s->impl : dev->default_stream->impl);
}

/* cuda_memory.c */
alloy_status alloy_cuda_allocator_init(cuda_allocator *a);
alloy_status alloy_cuda_mem_alloc(alloy_device *dev, size_t bytes, void **ptr);
void alloy_cuda_mem_free(alloy_device *dev, void *ptr);
alloy_status alloy_cuda_mem_copy(alloy_device *dev, void *dst, const void *src, size_t bytes,
                                 alloy_copy_kind kind, alloy_stream *stream);
alloy_status alloy_cuda_mem_fill(alloy_device *dev, void *dst, size_t count, const void *pattern,
                                 size_t elem_size, alloy_stream *stream);
/* Streams lock held: a stream left the device; its fence (recorded after
 * its last work) is handed over. */
void alloy_cuda_allocator_stream_gone(cuda_device *d, CUevent fence);

/* cuda_stream.c */
alloy_status alloy_cuda_stream_create(alloy_device *dev, void **impl);
alloy_status alloy_cuda_stream_wrap(alloy_device *dev, void *native, void **impl);
void alloy_cuda_stream_destroy(alloy_device *dev, void *impl);
alloy_status alloy_cuda_stream_sync(alloy_device *dev, void *impl);
void *alloy_cuda_stream_native(alloy_device *dev, void *impl);
alloy_status alloy_cuda_stream_wait(alloy_device *dev, void *waiter, void *signaller);
/* Synchronises one stream; a failure names the last kernel launched on it. */
alloy_status alloy_cuda_sync_one(cuda_stream *s);
/* The error for a failed enqueue on s (copy, fill): a sticky fault from an
 * earlier kernel names that kernel. */
alloy_status alloy_cuda_enqueue_error(cuda_stream *s, CUresult r, const char *call, const char *what);
/* Work was queued on s (after the enqueue call returned). */
static inline void cuda_stream_mark(cuda_stream *s) {
    atomic_store_explicit(&s->dirty, 1, memory_order_relaxed);
}

/* cuda_compile.c */
alloy_status alloy_cuda_compile(alloy_device *dev, const alloy_compile_job *job, void **program,
                                char **log, int *from_disk);
char *alloy_cuda_program_report(alloy_device *dev, void *program);
alloy_status alloy_cuda_compile_check(const alloy_compile_job *job, char **log);
/* Where a passed compile check of `source` for `arch` is recorded (malloc'd;
 * NULL when the cache is off): an empty cache entry keyed by the source and
 * what it passed with (NVRTC's version, the options, the CUDA headers). A
 * recorded source is not compiled again; failures are never recorded (their
 * log is the point), nor checks under ALLOY_COMPILE_CHECK_DUMP (which want
 * the image). NVRTC must be loaded. */
char *alloy_cuda_check_marker_path(const char *source, const char *arch);
/* Picks the NVRTC target for a device of compute capability major.minor:
 * fills d->arch_num, d->sass (or d->arch_error). */
void alloy_cuda_choose_arch(cuda_device *d);

/* cuda_launch.c */
/* 1 when a launch that asks to overlap the previous kernel does on d (the
 * device's overlapping_launches). */
int alloy_cuda_overlaps_launches(const cuda_device *d);

/* cuda_tensor_map.c */
/* 1 when d can use tensor maps: sm_90 or newer and a driver with
 * cuTensorMapEncodeTiled. */
int alloy_cuda_has_tensor_maps(const cuda_device *d);
/* ALLOY_ERROR_UNSUPPORTED, saying which is missing, unless it can. */
alloy_status alloy_cuda_tensor_map_supported(const cuda_device *d, const char *kname);
/* A context current whose device supports tensor maps. Encodes the
 * TENSOR_MAP argument a into `out` (ALLOY_CU_TENSOR_MAP_BYTES, 64-byte
 * aligned). */
alloy_status alloy_cuda_encode_tensor_map(const alloy_arg *a, const char *kname, void *out);

/* cuda_launch.c */
alloy_status alloy_cuda_launch(alloy_device *dev, void *program, const alloy_launch_args *args,
                               alloy_stream *stream);

#endif
