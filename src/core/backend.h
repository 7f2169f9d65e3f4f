/* backend.h — the interface every backend implements.
 *
 * A backend is one constant struct of function pointers (like ggml's backend
 * interface); the core never asks which backend it talks to. Devices, streams
 * and the program caches are core objects that carry a backend pointer and an
 * opaque `impl` the backend owns. */
#ifndef ALLOY_CORE_BACKEND_H
#define ALLOY_CORE_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "alloy/alloy.h"
#include "../dialect/dialect.h"

typedef enum alloy_copy_kind {
    ALLOY_COPY_HOST_TO_DEVICE,
    ALLOY_COPY_DEVICE_TO_HOST,
    ALLOY_COPY_DEVICE_TO_DEVICE
} alloy_copy_kind;

/* One argument slot of a launch, in signature order (see dialect.h). */
typedef enum alloy_arg_kind {
    ALLOY_ARG_BUFFER,  /* device pointer (offset applied) */
    ALLOY_ARG_SHAPE,   /* int32 shape[ALLOY_MAX_NDIM] */
    ALLOY_ARG_STRIDES, /* int64 strides[ALLOY_MAX_NDIM], elements */
    ALLOY_ARG_VALUE,   /* a launch constant: `value`, by value */
    ALLOY_ARG_TENSOR_MAP /* a tensor map: `tensor_map` over the data at `ptr` (its base, offset
                            applied; checked by the core), elements of `dtype` (an input's or
                            an output's) */
} alloy_arg_kind;

typedef struct alloy_arg {
    alloy_arg_kind kind;
    void *ptr;
    int32_t shape[ALLOY_MAX_NDIM];
    int64_t strides[ALLOY_MAX_NDIM];
    /* BUFFER only, for debug builds (backend.debug_build): */
    unsigned long long nbytes; /* the bytes the array's elements span */
    long long span_lo;         /* where that span starts, in bytes from ptr (<= 0: negative
                                  strides reach below the first element) */
    alloy_dtype dtype;
    const char *name;          /* the body's name for it */
    int check_written;         /* an output alloy allocated without init_value: every
                                  element must be written */
    unsigned char value[8];    /* VALUE only: the constant, in its dtype's C type */
    const alloy_tensor_map_spec *tensor_map; /* TENSOR_MAP only */
} alloy_arg;

typedef struct alloy_launch_args {
    const char *kernel_name; /* the user's name, for messages */
    int n_args;
    alloy_arg *args;
    uint32_t grid[3];
    uint32_t threadgroup[3]; /* already clamped, product <= max */
    size_t threadgroup_memory; /* dynamic threadgroup memory bytes (0: none) */
    int overlap;               /* may start before the stream's previous kernel ends (alloy_launch_set_overlap) */
} alloy_launch_args;

/* What the core asks a backend to compile. */
typedef struct alloy_compile_job {
    const char *kernel_name; /* the user's name, for messages */
    const char *source;      /* full translation unit from the dialect */
    const char *key;         /* hex SHA-256 cache key (includes compiler identity) */
    int uses_sync;           /* body synchronises (barrier / SIMD) */
    /* CUDA: the entry point the source defines (alloy_cuda_entry_name of the
     * kernel's name); "" for a source written with `alloy_kernel` */
    char entry[ALLOY_CUDA_ENTRY_MAX];
} alloy_compile_job;

typedef struct alloy_backend alloy_backend;

struct alloy_device {
    const alloy_backend *backend;
    int ordinal;
    char name[32];
    char description[256];
    void *impl;                         /* backend-owned */
    int compute_capability;             /* CUDA: major * 10 + minor (90 = Hopper); 0 elsewhere */
    int multiprocessor_count;           /* CUDA: SMs; 0 elsewhere */
    int tensor_maps;                    /* launches may carry tensor maps (set by device_init) */
    int overlapping_launches;           /* a launch that asks to overlap does (set by device_init); the core
                                           compiles and launches one that cannot as an ordinary launch */
    struct alloy_program_cache *cache;  /* in-memory programs of this device */
    alloy_stream *default_stream;
};

struct alloy_stream {
    alloy_device *device;
    void *impl;     /* backend-owned */
    int is_default;
};

struct alloy_backend {
    const char *name;        /* "cpu", "cuda" */
    alloy_backend_kind kind;
    alloy_codegen_target target;
    int host_accessible;     /* device memory is host memory (CPU) */

    /* Called once. Non-OK means unavailable; `why` says why. */
    alloy_status (*probe)(int *device_count, char *why, size_t why_len);
    alloy_status (*device_init)(alloy_device *dev); /* fills impl, description */

    /* Identity of the compiler/architecture, part of every cache key. */
    const char *(*compiler_identity)(alloy_device *dev);
    /* 1 when kernels are to be generated for the backend's debug mode
     * (CPU: ALLOY_CPU_DEBUG=1); part of the specialisation. May be NULL. */
    int (*debug_build)(void);

    alloy_status (*mem_alloc)(alloy_device *dev, size_t bytes, void **ptr);
    void (*mem_free)(alloy_device *dev, void *ptr);
    alloy_status (*mem_copy)(alloy_device *dev, void *dst, const void *src, size_t bytes,
                             alloy_copy_kind kind, alloy_stream *stream);

    /* Fills `count` elements of `elem_size` bytes (1, 2, 4 or 8) at dst with
     * the pattern. */
    alloy_status (*mem_fill)(alloy_device *dev, void *dst, size_t count, const void *pattern,
                             size_t elem_size, alloy_stream *stream);

    alloy_status (*stream_create)(alloy_device *dev, void **impl);
    /* Wraps a native stream the caller owns (never destroyed by alloy). */
    alloy_status (*stream_wrap)(alloy_device *dev, void *native, void **impl);
    void (*stream_destroy)(alloy_device *dev, void *impl); /* wrapped: frees the wrapper only */
    /* impl NULL: every stream of the device. */
    alloy_status (*stream_sync)(alloy_device *dev, void *impl);
    void *(*stream_native)(alloy_device *dev, void *impl);
    /* waiter waits for the work queued on signaller so far (an event). */
    alloy_status (*stream_wait)(alloy_device *dev, void *waiter, void *signaller);

    /* Compile (or load from the disk cache) into a loaded program. On a
     * compile error: ALLOY_ERROR_COMPILE, *log holds the raw compiler output
     * (malloc'd; the core maps line numbers). *from_disk = 1 when loaded from
     * the disk cache. Programs live until the process ends. */
    alloy_status (*compile)(alloy_device *dev, const alloy_compile_job *job, void **program,
                            char **log, int *from_disk);
    /* A short resource report of a program (malloc'd), may be NULL. */
    char *(*program_report)(alloy_device *dev, void *program);
    alloy_status (*launch)(alloy_device *dev, void *program, const alloy_launch_args *args,
                           alloy_stream *stream);

    /* Optional, may be NULL: compiles a source for this backend's target
     * without any device (e.g. NVRTC without a GPU), for compile-only checks
     * (ALLOY_COMPILE_CHECK=<backend>). ALLOY_ERROR_COMPILE with *log on
     * failure; ALLOY_ERROR_UNAVAILABLE when the compiler is missing. */
    alloy_status (*compile_check)(const alloy_compile_job *job, char **log);
};

/* The backend of that name compiled into this build, or NULL. */
const alloy_backend *alloy_backend_named(const char *name);

extern const alloy_backend alloy_cpu_backend;
extern const alloy_backend alloy_cuda_backend;

#endif
