/* cpu_abi.h — the binary interface between liballoy's CPU runtime and the
 * kernels it compiles into shared objects.
 *
 * This header is plain C, included by the runtime and embedded verbatim in the
 * CPU prelude of every generated kernel, so both sides agree on it. Bump
 * ALLOY_CPU_ABI_VERSION on any change: a cached object with another version is
 * rejected and rebuilt.
 *
 * A compiled kernel exports:
 *   extern "C" const unsigned alloy_cpu_abi;                 == ALLOY_CPU_ABI_VERSION
 *   extern "C" const int alloy_cpu_uses_sync;                 1: barriers/SIMD ops
 *   extern "C" void alloy_cpu_group_loop(const alloy_cpu_group *g);
 *       runs every thread of the group as a plain loop (bodies without barriers
 *       or SIMD operations); threads outside the grid are not run.
 *   extern "C" void alloy_cpu_thread(const alloy_cpu_group *g,
 *                                    unsigned lx, unsigned ly, unsigned lz);
 *       runs one thread; the runtime calls it on a fiber per thread when the
 *       body synchronises (barrier, SIMD ops, simdgroup matrices).
 *   extern "C" const int alloy_cpu_checked;                   1: built for ALLOY_CPU_DEBUG
 *       (checked accesses report through alloy_cpu_launch.debug, which the
 *       runtime then sets).
 * Threadgroup memory is `static thread_local` in the kernel: one copy per
 * worker OS thread, shared by the fibers of the group that worker runs. */
#ifndef ALLOY_CPU_ABI_H
#define ALLOY_CPU_ABI_H

#define ALLOY_CPU_ABI_VERSION 4u
#define ALLOY_CPU_SIMD_WIDTH 32u
#define ALLOY_CPU_SIMD_SLOT 64u /* bytes per lane in a SIMD exchange */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct alloy_cpu_sched alloy_cpu_sched;

/* A tensor map argument (alloy_launch_set_tensor_map) as a CPU body sees it:
 * the view the map describes, so the body's CPU path can reach the region a
 * copy would move. Checked by the runtime: every element it names lies in
 * the input or output it describes. Fields past `rank` are unspecified. (This header precedes the
 * prelude's int64_t: the compiler's own type is int64_t on both sides.) */
#if defined(__INT64_TYPE__)
#define ALLOY_ABI_INT64 __INT64_TYPE__
#else
#define ALLOY_ABI_INT64 long long
#endif
typedef struct alloy_tensor_map {
    const void *base;          /* the array's data + offset elements (16-byte aligned) */
    int rank;                  /* 1..5 */
    int elem_size;             /* bytes: 1, 2, 4 or 8 */
    ALLOY_ABI_INT64 dims[5];    /* extents in elements, innermost first */
    ALLOY_ABI_INT64 strides[5]; /* element strides, innermost first (strides[0] == 1) */
    unsigned int box[5];       /* elements one copy moves per dimension */
    unsigned int swizzle;      /* 0, 32, 64 or 128 bytes */
} alloy_tensor_map;

/* Runtime services a synchronising kernel calls (fiber mode only). */
typedef struct alloy_cpu_services {
    /* threadgroup_barrier: returns when every live thread of the group
     * arrived (threads that returned from the body do not count). `site`
     * names the barrier's place in the source (0: unknown); when every live
     * thread has arrived at known but different sites, the group stops with
     * a barrier-divergence error naming the threads and the sites. */
    void (*barrier)(alloy_cpu_sched *s, unsigned site);
    /* SIMD rendezvous. Copies `size` (<= ALLOY_CPU_SIMD_SLOT) bytes from
     * `value` into the calling lane's slot, waits until every live lane of the
     * caller's simdgroup has made its matching call, and returns the slot
     * array: lane i's bytes start at slots + i * ALLOY_CPU_SIMD_SLOT. The
     * array stays valid until the caller's next simd_exchange. `*active` gets
     * the mask of live lanes, `*lane` the caller's lane. */
    const unsigned char *(*simd_exchange)(alloy_cpu_sched *s, const void *value,
                                          unsigned size, unsigned *active,
                                          unsigned *lane);
    /* simdgroup_barrier: rendezvous of the caller's simdgroup, no data. */
    void (*simd_barrier)(alloy_cpu_sched *s);
} alloy_cpu_services;

/* What a kernel built for ALLOY_CPU_DEBUG needs from the runtime. */
typedef struct alloy_cpu_debug {
    const unsigned long long *nbytes; /* per argument slot: the bytes a buffer's elements span */
    const long long *lo;              /* ... starting this many bytes from its pointer (<= 0) */
    /* Records a fault found by a checked access (the first one is kept; the
     * launch then fails with it). Thread-safe. */
    void (*report)(void *ctx, const char *message);
    void *ctx;
} alloy_cpu_debug;

/* One launch (read-only while it runs). */
typedef struct alloy_cpu_launch {
    void *const *args;      /* one pointer per argument slot, in signature order */
    unsigned grid[3];       /* threads per grid */
    unsigned tg[3];         /* dispatch threads per threadgroup (after the clamp) */
    unsigned groups[3];     /* threadgroups per grid = ceil(grid / tg) */
    const alloy_cpu_services *svc;
    const alloy_cpu_debug *debug; /* NULL unless the kernel was built for ALLOY_CPU_DEBUG */
} alloy_cpu_launch;

/* One threadgroup. */
typedef struct alloy_cpu_group {
    const alloy_cpu_launch *launch;
    unsigned group_id[3];   /* threadgroup_position_in_grid */
    unsigned size[3];       /* threads_per_threadgroup: actual size (edges partial) */
    alloy_cpu_sched *sched; /* fiber scheduler; NULL in loop mode */
    void *tg_memory;        /* the launch's dynamic threadgroup memory (per worker) */
} alloy_cpu_group;

#ifdef __cplusplus
}
#endif
#endif
