/* cpu_backend.c — the CPU backend: host memory, in-order streams that run on
 * the caller, kernels built by the host C++ compiler into shared objects
 * (kept in the disk cache), and launches spread over the thread pool.
 *
 * Streams: a launch or copy on a CPU stream runs synchronously on the calling
 * thread (helped by the pool) and is finished when the call returns, so every
 * CPU stream executes in order and stream_sync has nothing to wait for.
 *
 * Programs are never unloaded (dlclose): the core caches them for the life of
 * the process, and kernel code may be running on other threads. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/backend.h"
#include "core/disk_cache.h"
#include "core/error.h"
#include "core/strbuf.h"
#include "cpu_abi.h"
#include "cpu_compiler.h"
#include "cpu_debug.h"
#include "cpu_pool.h"
#include "cpu_sched.h"

/* Launches of loop-mode kernels with at most this many threads in total run
 * on the caller alone — waking the pool would cost more than the work —
 * unless the program's last such launch says they would take longer than
 * CPU_INLINE_NS: threads may be heavy (the catalog's CPU GEMM is one thread
 * per 64 x 128 tile, its 1024^3 128 threads of 170 us each). */
#define CPU_INLINE_THREADS 2048u
#define CPU_INLINE_NS 50000.0

typedef void (*group_loop_fn)(const alloy_cpu_group *g);

typedef struct cpu_program {
    void *handle;
    group_loop_fn group_loop;
    alloy_cpu_thread_fn thread;
    int uses_sync;
    int debug; /* built for ALLOY_CPU_DEBUG */
    /* nanoseconds a thread took in the last launch run inline (0: none yet), for the next launch's choice */
    _Atomic double thread_ns;
    char *path; /* NULL when the cache is off (the file is gone) */
    size_t bytes;
} cpu_program;

/* ---- device, memory, streams ------------------------------------------- */

static alloy_status cpu_probe(int *device_count, char *why, size_t why_len) {
    *device_count = 1;
    if (why && why_len) why[0] = 0;
    return ALLOY_OK;
}

static alloy_status cpu_device_init(alloy_device *dev) {
    dev->tensor_maps = 1; /* a plain struct (cpu_abi.h) */
    const char *version = alloy_cpu_compiler_version();
    int threads = alloy_cpu_pool_threads();
    if (version)
        snprintf(dev->description, sizeof dev->description, "%s CPU, %d thread%s, %s",
                 alloy_cpu_arch(), threads, threads == 1 ? "" : "s", version);
    else
        snprintf(dev->description, sizeof dev->description,
                 "%s CPU, %d thread%s, no C++ compiler ('%s' not found: install g++ or clang++ "
                 "or set ALLOY_CXX)",
                 alloy_cpu_arch(), threads, threads == 1 ? "" : "s",
                 alloy_cpu_compiler_command());
    dev->impl = NULL;
    return ALLOY_OK;
}

static const char *cpu_compiler_identity(alloy_device *dev) {
    (void)dev;
    return alloy_cpu_compiler_identity();
}

static alloy_status cpu_mem_alloc(alloy_device *dev, size_t bytes, void **ptr) {
    (void)dev;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0 || !p)
        return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY,
                           "cannot allocate %zu bytes of CPU memory", bytes);
    *ptr = p;
    return ALLOY_OK;
}

static void cpu_mem_free(alloy_device *dev, void *ptr) {
    (void)dev;
    free(ptr);
}

static alloy_status cpu_mem_copy(alloy_device *dev, void *dst, const void *src, size_t bytes,
                                 alloy_copy_kind kind, alloy_stream *stream) {
    (void)dev, (void)kind, (void)stream;
    if (bytes) memmove(dst, src, bytes);
    return ALLOY_OK;
}

static char cpu_stream_token; /* every CPU stream is the same in-order executor */

static alloy_status cpu_stream_create(alloy_device *dev, void **impl) {
    (void)dev;
    *impl = &cpu_stream_token;
    return ALLOY_OK;
}

static void cpu_stream_destroy(alloy_device *dev, void *impl) { (void)dev, (void)impl; }

static alloy_status cpu_stream_sync(alloy_device *dev, void *impl) {
    (void)dev, (void)impl;
    return ALLOY_OK; /* launches and copies finished before they returned */
}

static alloy_status cpu_stream_wrap(alloy_device *dev, void *native, void **impl) {
    (void)native;
    return cpu_stream_create(dev, impl);
}

static void *cpu_stream_native(alloy_device *dev, void *impl) {
    (void)dev, (void)impl;
    return NULL;
}

static alloy_status cpu_stream_wait(alloy_device *dev, void *waiter, void *signaller) {
    (void)dev, (void)waiter, (void)signaller;
    return ALLOY_OK; /* work is finished when its call returns */
}

static alloy_status cpu_mem_fill(alloy_device *dev, void *dst, size_t count, const void *pattern,
                                 size_t elem_size, alloy_stream *stream) {
    (void)dev, (void)stream;
    unsigned char *d = dst;
    if (elem_size == 1) {
        memset(d, *(const unsigned char *)pattern, count);
        return ALLOY_OK;
    }
    for (size_t i = 0; i < count; i++) memcpy(d + i * elem_size, pattern, elem_size);
    return ALLOY_OK;
}

/* ---- compile and load --------------------------------------------------- */

static alloy_status write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return alloy_error(ALLOY_ERROR_IO, "cannot write %s: %s", path, strerror(errno));
    size_t n = strlen(text);
    int ok = fwrite(text, 1, n, f) == n;
    ok &= fclose(f) == 0;
    if (!ok) {
        unlink(path);
        return alloy_error(ALLOY_ERROR_IO, "cannot write %s: %s", path, strerror(errno));
    }
    return ALLOY_OK;
}

static size_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

/* Loads a built object into *p and returns 0; otherwise -1 with the reason
 * in why (nothing stays loaded). */
static int load_object(const char *path, cpu_program *p, char *why, size_t why_len) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, why_len, "%s", e ? e : "dlopen failed");
        return -1;
    }
    const unsigned *abi = (const unsigned *)dlsym(h, "alloy_cpu_abi");
    const int *uses = (const int *)dlsym(h, "alloy_cpu_uses_sync");
    const int *debug = (const int *)dlsym(h, "alloy_cpu_checked");
    void *loop = dlsym(h, "alloy_cpu_group_loop");
    void *thread = dlsym(h, "alloy_cpu_thread");
    if (!abi || *abi != ALLOY_CPU_ABI_VERSION) {
        snprintf(why, why_len, "%s has CPU ABI %u, this library needs %u", path, abi ? *abi : 0u,
                 ALLOY_CPU_ABI_VERSION);
        dlclose(h); /* never ran: safe to unload, and needed to reload the path */
        return -1;
    }
    if (!uses || !debug || (*uses ? !thread : !loop)) {
        snprintf(why, why_len, "%s lacks the kernel entry points", path);
        dlclose(h);
        return -1;
    }
    p->handle = h;
    p->uses_sync = *uses != 0;
    p->debug = *debug != 0;
    p->group_loop = (group_loop_fn)loop;
    p->thread = (alloy_cpu_thread_fn)thread;
    return 0;
}

static alloy_status finish_program(cpu_program *p, void **program) {
    cpu_program *q = malloc(sizeof *q);
    if (!q) {
        free(p->path);
        return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    *q = *p;
    atomic_init(&q->thread_ns, 0.0);
    *program = q;
    return ALLOY_OK;
}

/* The disk cache is off: build in a private directory, load, remove. */
static alloy_status compile_uncached(const alloy_compile_job *job, void **program, char **log) {
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/alloy-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return alloy_error(ALLOY_ERROR_IO, "cannot create a temporary directory %s: %s", dir,
                           strerror(errno));
    char src[4200], obj[4200];
    snprintf(src, sizeof src, "%s/kernel.cpp", dir);
    snprintf(obj, sizeof obj, "%s/kernel.so", dir);
    alloy_status st = write_file(src, job->source);
    if (st == ALLOY_OK) st = alloy_cpu_compile_file(src, obj, log);
    cpu_program p;
    memset(&p, 0, sizeof p);
    if (st == ALLOY_OK) {
        char why[512];
        p.bytes = file_size(obj);
        if (load_object(obj, &p, why, sizeof why) != 0)
            st = alloy_error(ALLOY_ERROR_INTERNAL, "kernel '%s': cannot load %s: %s",
                             job->kernel_name, obj, why);
    }
    unlink(src);
    unlink(obj);
    rmdir(dir);
    return st == ALLOY_OK ? finish_program(&p, program) : st;
}

static alloy_status cpu_compile(alloy_device *dev, const alloy_compile_job *job, void **program,
                                char **log, int *from_disk) {
    (void)dev;
    *log = NULL;
    *from_disk = 0;
    char *path = alloy_disk_cache_path("cpu", job->key, ".so");
    if (!path) return compile_uncached(job, program, log);

    cpu_program p;
    memset(&p, 0, sizeof p);
    char why[512];
    size_t payload = 0;
    int corrupt = 0;
    if (access(path, F_OK) == 0) {
        if (alloy_disk_cache_verify(path, &payload, &corrupt) == ALLOY_OK) {
            if (load_object(path, &p, why, sizeof why) == 0) {
                p.path = path;
                p.bytes = payload;
                *from_disk = 1;
                return finish_program(&p, program);
            }
            alloy_warn("kernel '%s': cannot use the cached object %s (%s); rebuilding it",
                       job->kernel_name, path, why);
        } else if (corrupt) {
            alloy_warn("kernel '%s': the cached object %s is corrupt; rebuilding it",
                       job->kernel_name, path);
        }
    }

    /* Build under temporary names next to the entry, then seal + rename. */
    char *tmp_obj = alloy_disk_cache_temp_path(path);
    alloy_strbuf src;
    alloy_sb_init(&src);
    if (tmp_obj) alloy_sb_printf(&src, "%s.cpp", tmp_obj);
    if (!tmp_obj || src.failed) {
        free(tmp_obj);
        alloy_sb_free(&src);
        free(path);
        return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    alloy_status st = write_file(src.data, job->source);
    if (st == ALLOY_OK) st = alloy_cpu_compile_file(src.data, tmp_obj, log);
    unlink(src.data);
    alloy_sb_free(&src);
    if (st == ALLOY_OK) {
        p.bytes = file_size(tmp_obj);
        st = alloy_disk_cache_seal(tmp_obj, path);
    }
    if (st != ALLOY_OK) {
        unlink(tmp_obj);
        free(tmp_obj);
        free(path);
        return st;
    }
    free(tmp_obj);
    if (load_object(path, &p, why, sizeof why) != 0) {
        st = alloy_error(ALLOY_ERROR_INTERNAL, "kernel '%s': cannot load the object just built, %s: %s",
                         job->kernel_name, path, why);
        free(path);
        return st;
    }
    p.path = path;
    return finish_program(&p, program);
}

static char *cpu_program_report(alloy_device *dev, void *program) {
    (void)dev;
    const cpu_program *p = program;
    alloy_strbuf sb;
    alloy_sb_init(&sb);
    alloy_sb_printf(&sb, "cpu: %s mode, object %s, %zu bytes",
                    p->uses_sync ? "fiber" : "loop",
                    p->path ? p->path : "(not cached: ALLOY_CACHE=0)", p->bytes);
    return alloy_sb_take(&sb);
}

/* ---- launch --------------------------------------------------------------- */

typedef struct cpu_launch_ctx {
    alloy_cpu_launch l;
    size_t tg_memory; /* dynamic threadgroup memory bytes per group */
    const cpu_program *prog;
    const char *kernel_name;
    atomic_int failed;
    alloy_status status; /* written by the first failing group only */
    char msg[768];
} cpu_launch_ctx;

static void group_at(const alloy_cpu_launch *l, size_t index, alloy_cpu_group *g) {
    size_t rest = index;
    g->launch = l;
    g->sched = NULL;
    g->group_id[0] = (unsigned)(rest % l->groups[0]);
    rest /= l->groups[0];
    g->group_id[1] = (unsigned)(rest % l->groups[1]);
    g->group_id[2] = (unsigned)(rest / l->groups[1]);
    for (int d = 0; d < 3; d++) {
        unsigned left = l->grid[d] - g->group_id[d] * l->tg[d];
        g->size[d] = left < l->tg[d] ? left : l->tg[d];
    }
}

/* Each worker's dynamic threadgroup memory, grown on demand, kept for the
 * thread's life (freed by the key's destructor when the thread exits). */
static pthread_key_t tg_memory_key;
static pthread_once_t tg_memory_once = PTHREAD_ONCE_INIT;
typedef struct { void *p; size_t n; } tg_block;
static void tg_memory_free(void *b) {
    free(((tg_block *)b)->p);
    free(b);
}
static void tg_memory_init(void) { pthread_key_create(&tg_memory_key, tg_memory_free); }

static void *worker_tg_memory(size_t bytes) {
    pthread_once(&tg_memory_once, tg_memory_init);
    tg_block *b = pthread_getspecific(tg_memory_key);
    if (!b) {
        if (!(b = calloc(1, sizeof *b))) return NULL;
        pthread_setspecific(tg_memory_key, b);
    }
    if (b->n < bytes) {
        void *p = NULL;
        if (posix_memalign(&p, 64, bytes) != 0) return NULL;
        free(b->p);
        b->p = p;
        b->n = bytes;
    }
    return b->p;
}

static int run_group_task(void *arg, size_t index) {
    cpu_launch_ctx *c = arg;
    alloy_cpu_group g;
    group_at(&c->l, index, &g);
    g.tg_memory = NULL;
    if (c->tg_memory && !(g.tg_memory = worker_tg_memory(c->tg_memory))) {
        if (!atomic_exchange(&c->failed, 1)) {
            c->status = ALLOY_ERROR_OUT_OF_MEMORY;
            snprintf(c->msg, sizeof c->msg,
                     "kernel '%s': out of memory for %zu bytes of threadgroup memory",
                     c->kernel_name, c->tg_memory);
        }
        return 1;
    }
    if (!c->prog->uses_sync) {
        c->prog->group_loop(&g);
        return 0;
    }
    char msg[sizeof c->msg];
    alloy_status st;
    alloy_cpu_sched *s = alloy_cpu_sched_for_thread();
    if (!s) {
        snprintf(msg, sizeof msg, "kernel '%s': out of memory for the fiber scheduler",
                 c->kernel_name);
        st = ALLOY_ERROR_OUT_OF_MEMORY;
    } else {
        st = alloy_cpu_sched_run(s, &g, c->prog->thread, c->kernel_name, msg, sizeof msg);
    }
    if (st == ALLOY_OK) return 0;
    if (!atomic_exchange(&c->failed, 1)) {
        c->status = st;
        memcpy(c->msg, msg, sizeof msg);
    }
    return 1;
}

/* The body's view of a tensor map (cpu_abi.h), from the core's checked spec. */
static void fill_tensor_map(alloy_tensor_map *t, const alloy_arg *a) {
    const alloy_tensor_map_spec *s = a->tensor_map;
    memset(t, 0, sizeof *t);
    t->base = a->ptr;
    t->rank = s->rank;
    t->elem_size = (int)alloy_dtype_size(a->dtype);
    for (int d = 0; d < s->rank && d < ALLOY_TENSOR_MAP_MAX_RANK; d++) {
        t->dims[d] = s->dims[d];
        t->strides[d] = s->strides[d];
        t->box[d] = s->box[d];
    }
    t->swizzle = s->swizzle;
}

static alloy_status cpu_launch(alloy_device *dev, void *program, const alloy_launch_args *args,
                               alloy_stream *stream) {
    (void)dev, (void)stream;
    const cpu_program *prog = program;
    cpu_launch_ctx c;
    void *stack_ptrs[64];
    void **ptrs = stack_ptrs;
    alloy_tensor_map maps[ALLOY_MAX_TENSOR_MAPS]; /* live for the (synchronous) launch */
    int n_maps = 0;
    if (args->n_args > 64) {
        ptrs = malloc((size_t)args->n_args * sizeof *ptrs);
        if (!ptrs) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    for (int i = 0; i < args->n_args; i++) {
        alloy_arg *a = &args->args[i];
        switch (a->kind) {
        case ALLOY_ARG_SHAPE: ptrs[i] = a->shape; break;
        case ALLOY_ARG_STRIDES: ptrs[i] = a->strides; break;
        case ALLOY_ARG_VALUE: ptrs[i] = a->value; break;
        case ALLOY_ARG_TENSOR_MAP:
            if (n_maps == ALLOY_MAX_TENSOR_MAPS) {
                if (ptrs != stack_ptrs) free(ptrs);
                return alloy_error(ALLOY_ERROR_INTERNAL, "kernel '%s': more than %d tensor maps",
                                   args->kernel_name ? args->kernel_name : "?", ALLOY_MAX_TENSOR_MAPS);
            }
            fill_tensor_map(&maps[n_maps], a);
            ptrs[i] = &maps[n_maps++];
            break;
        default: ptrs[i] = a->ptr; break;
        }
    }
    c.l.args = ptrs;
    c.l.svc = &alloy_cpu_sched_services;
    c.l.debug = NULL;
    alloy_cpu_debug_state dbg;
    if (prog->debug) {
        alloy_status st = alloy_cpu_debug_begin(&dbg, args);
        if (st != ALLOY_OK) {
            if (ptrs != stack_ptrs) free(ptrs);
            return st;
        }
        c.l.debug = &dbg.iface;
    }
    size_t n_groups = 1;
    unsigned long long n_threads = 1;
    for (int d = 0; d < 3; d++) {
        unsigned tg = args->threadgroup[d] ? args->threadgroup[d] : 1;
        c.l.grid[d] = args->grid[d];
        c.l.tg[d] = tg;
        c.l.groups[d] = args->grid[d] / tg + (args->grid[d] % tg != 0);
        n_groups *= c.l.groups[d];
        n_threads *= args->grid[d];
    }
    c.prog = prog;
    c.tg_memory = args->threadgroup_memory;
    c.kernel_name = args->kernel_name ? args->kernel_name : "?";
    atomic_init(&c.failed, 0);
    c.status = ALLOY_OK;
    c.msg[0] = 0;

    const double thread_ns = atomic_load_explicit(&prog->thread_ns, memory_order_relaxed);
    if (n_groups == 1) {
        run_group_task(&c, 0);
    } else if (!prog->uses_sync && n_threads <= CPU_INLINE_THREADS &&
               (double)n_threads * thread_ns <= CPU_INLINE_NS) {
        /* Timed from the second group on: the first runs cold (the code faulting in, and under emulation
         * being translated: 100 us for 8 stores under qemu-user, which would send every later launch of a
         * light kernel to the pool). */
        int failed = run_group_task(&c, 0);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (size_t i = 1; i < n_groups && !failed; i++) failed = run_group_task(&c, i);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
        const double group_ns = ns / (double)(n_groups - 1);
        /* the one field a launch writes (the program is otherwise read-only) */
        atomic_store_explicit(&((cpu_program *)program)->thread_ns, group_ns * (double)n_groups / (double)n_threads,
                              memory_order_relaxed);
    } else {
        alloy_cpu_pool_run(n_groups, 0, run_group_task, &c);
    }
    if (ptrs != stack_ptrs) free(ptrs);
    alloy_status st = ALLOY_OK;
    if (atomic_load(&c.failed)) st = alloy_error(c.status, "%s", c.msg);
    if (prog->debug) st = alloy_cpu_debug_end(&dbg, args, st);
    return st;
}

const alloy_backend alloy_cpu_backend = {
    .name = "cpu",
    .kind = ALLOY_BACKEND_CPU,
    .target = ALLOY_TARGET_CPU,
    .host_accessible = 1,
    .probe = cpu_probe,
    .device_init = cpu_device_init,
    .compiler_identity = cpu_compiler_identity,
    .debug_build = alloy_cpu_debug_build,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .mem_copy = cpu_mem_copy,
    .mem_fill = cpu_mem_fill,
    .stream_create = cpu_stream_create,
    .stream_wrap = cpu_stream_wrap,
    .stream_destroy = cpu_stream_destroy,
    .stream_sync = cpu_stream_sync,
    .stream_native = cpu_stream_native,
    .stream_wait = cpu_stream_wait,
    .compile = cpu_compile,
    .program_report = cpu_program_report,
    .launch = cpu_launch,
};
