/* test_concurrency.c — alloy used from 8 host threads at once (pthreads),
 * every result checked against a plain C reference; also run under
 * ThreadSanitizer (scripts/test.sh, stage tsan):
 *   (a) first launches: every thread makes its own kernel from the SAME new
 *       source (unique to this run, so neither cache can serve it) and they
 *       launch together behind a barrier; the device must compile it exactly
 *       once (alloy_program_cache_builds grows by 1);
 *   (b) one shared kernel object, launched concurrently many times with
 *       different sizes, dtypes and template arguments (specialisations
 *       created and found concurrently);
 *   (c) every thread creates and launches different kernels — plain loop
 *       mode, threadgroup barriers, SIMD reductions (fiber mode) — many
 *       iterations;
 *   (d) launches big enough to go through the worker pool (many groups of
 *       1024 threads, large loop-mode grids) from all threads at once.
 * Worker threads never touch the harness counters (plain ints): each records
 * its own failures, which the main thread checks after joining. */
#include <pthread.h>
#include <stdarg.h>
#include <time.h>
#include <unistd.h>

#include "core/program_cache.h"
#include "kernel_util.h"

#define NTHREADS 8

/* LeakSanitizer in GCC 12's runtime misreads the dynamic TLS of dlopen'd
 * modules on current glibc (google/sanitizers#1322: a malloc'd DTLS block
 * that happens to start 16 bytes past a page boundary is taken for the old
 * glibc 2.19 layout), and then crashes scanning a garbage range at exit
 * ("Tracer caught signal 11"). Every kernel here keeps threadgroup memory in
 * such TLS, on many threads. Not tracking __tls_get_addr loses nothing: the
 * blocks are heap chunks reachable from the thread's DTV. */
#if defined(__SANITIZE_ADDRESS__)
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "intercept_tls_get_addr=0"; }
#endif

static alloy_device *dev;
static pthread_barrier_t start_line;

/* ---- per-thread bookkeeping ------------------------------------------------ */

typedef struct worker {
    int id;
    uint64_t rng;
    int failures;
    char first[512]; /* the first failure, for the report */
    int launches;
    void *arg; /* test-specific */
} worker;

static void wfail(worker *w, const char *fmt, ...) {
    if (!w->failures++) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->first, sizeof w->first, fmt, ap);
        va_end(ap);
    }
}

static uint64_t wrand(worker *w) {
    w->rng ^= w->rng >> 12;
    w->rng ^= w->rng << 25;
    w->rng ^= w->rng >> 27;
    return w->rng * 2685821657736338717ull;
}

/* Starts NTHREADS workers on fn (each waits at start_line before its first
 * launch, so they all start together), joins them and turns their failures
 * into harness failures. */
static void run_workers(void *(*fn)(void *), void *arg, worker *ws) {
    pthread_t th[NTHREADS];
    uint64_t seed = harness_rand_u64();
    for (int t = 0; t < NTHREADS; t++) {
        memset(&ws[t], 0, sizeof ws[t]);
        ws[t].id = t;
        ws[t].rng = (seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(t + 1))) | 1;
        ws[t].arg = arg;
    }
    int started = 0;
    for (int t = 0; t < NTHREADS; t++) {
        int rc = pthread_create(&th[t], NULL, fn, &ws[t]);
        CHECK_MSG(rc == 0, "pthread_create: %d", rc);
        if (rc) break;
        started++;
    }
    if (started < NTHREADS) {
        /* Cannot happen in practice; the barrier would never open. */
        fprintf(stderr, "cannot start %d threads\n", NTHREADS);
        exit(1);
    }
    for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < NTHREADS; t++)
        CHECK_MSG(ws[t].failures == 0, "thread %d: %d failures; first: %s", t, ws[t].failures,
                  ws[t].first);
}

/* One 1-D launch of k on n_in inputs (at most 2): an output of n elements of
 * odt (pre-filled with 77, so unwritten elements show), copied to host_out;
 * an optional bool template argument (tbool NULL: none). Returns 0, or -1
 * after wfail. */
typedef struct one_launch {
    alloy_kernel *k;
    int n_in;
    alloy_array *in[2];
    alloy_dtype odt;
    int64_t n;
    uint32_t grid, tg;
    const char *tbool;
    int bval;
    void *host_out;
} one_launch;

static int launch_one(worker *w, const one_launch *o, const char *what) {
    alloy_launch *l = NULL;
    alloy_array *out = NULL;
    alloy_status st = alloy_launch_new(&l);
    if (st == ALLOY_OK) st = alloy_launch_add_output(l, 1, &o->n, o->odt);
    if (st == ALLOY_OK) st = alloy_launch_set_grid(l, o->grid, 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, o->tg, 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_init_value(l, 77); /* shows unwritten elements */
    if (st == ALLOY_OK && o->tbool) st = alloy_launch_add_template_bool(l, o->tbool, o->bval);
    if (st == ALLOY_OK) st = alloy_kernel_apply(o->k, o->n_in, o->in, l, NULL, &out);
    if (st == ALLOY_OK)
        st = alloy_array_copy_to_host(out, o->host_out,
                                      (size_t)o->n * alloy_dtype_size(o->odt));
    alloy_array_free(out);
    alloy_launch_free(l);
    w->launches++;
    if (st != ALLOY_OK) {
        wfail(w, "%s (n=%lld grid=%u tg=%u): %s: %s", what, (long long)o->n, o->grid, o->tg,
              alloy_status_name(st), alloy_last_error());
        return -1;
    }
    return 0;
}

static alloy_array *host_array(worker *w, alloy_dtype dt, int64_t n, const void *data) {
    alloy_array *a = NULL;
    alloy_status st = alloy_array_from_host(dev, dt, 1, &n, data, &a);
    if (st != ALLOY_OK) wfail(w, "array_from_host: %s", alloy_last_error());
    return a;
}

/* ---- (a) concurrent first launches compile once ------------------------------ */

static char first_body[256];

static void *first_launch_worker(void *p) {
    worker *w = p;
    const char *in[] = {"x"}, *out[] = {"y"};
    alloy_kernel *k = NULL;
    alloy_status st = alloy_kernel_new("first_launch", 1, in, 1, out, first_body, NULL, 1, 0, &k);
    if (st != ALLOY_OK) wfail(w, "kernel_new: %s", alloy_last_error());
    /* Different sizes per thread: the generated source depends on dtypes,
     * not shapes, so they all need the same program. */
    int64_t n = 100 + 37 * w->id;
    float x[400], y[400];
    for (int64_t i = 0; i < n; i++) x[i] = (float)((int)(wrand(w) % 2001) - 1000);
    alloy_array *xa = host_array(w, ALLOY_FLOAT32, n, x);
    pthread_barrier_wait(&start_line);
    if (k && xa) {
        one_launch o = {k, 1, {xa, NULL}, ALLOY_FLOAT32, n, (uint32_t)n, 64, NULL, 0, y};
        if (launch_one(w, &o, "first launch") == 0)
            for (int64_t i = 0; i < n; i++)
                if (y[i] != 2 * x[i] + 1) {
                    wfail(w, "y[%lld] = %g, want %g", (long long)i, y[i], 2 * x[i] + 1);
                    break;
                }
    }
    alloy_array_free(xa);
    alloy_kernel_free(k);
    return NULL;
}

static void test_first_launch_compiles_once(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(first_body, sizeof first_body,
             "// unique to this run: pid %ld, time %lld.%09ld\n"
             "uint i = thread_position_in_grid.x;\n"
             "y[i] = 2.0f * x[i] + 1.0f;\n",
             (long)getpid(), (long long)ts.tv_sec, ts.tv_nsec);
    /* Nothing else compiles in this window: the other tests run later, and
     * the main thread only waits. */
    long before = alloy_program_cache_builds(dev);
    worker ws[NTHREADS];
    run_workers(first_launch_worker, NULL, ws);
    long after = alloy_program_cache_builds(dev);
    CHECK_MSG(after - before == 1, "%d threads' first launches of one new source made %ld builds "
              "(want exactly 1)", NTHREADS, after - before);
}

/* ---- (b) one kernel shared by every thread, many specialisations ------------- */

/* out = 2x, or 3x with TRIPLE; for every dtype the body is instantiated
 * with (x's element type). uint8 wraps modulo 256 like C++. */
static const char *SHARED_BODY =
    "uint i = thread_position_in_grid.x;\n"
    "if (i >= uint(x_shape[0])) return;\n"
    "out[i] = x[i] + x[i];\n"
    "if (TRIPLE) out[i] = out[i] + x[i];\n";

static const alloy_dtype SHARED_DTYPES[] = {ALLOY_FLOAT32, ALLOY_INT32, ALLOY_FLOAT16, ALLOY_UINT8};
#define N_SHARED_DTYPES (int)(sizeof SHARED_DTYPES / sizeof *SHARED_DTYPES)
static const int64_t SIZES[] = {1, 33, 1000, 3001, 9000}; /* 3001, 9000: over the inline limit */
#define N_SIZES (int)(sizeof SIZES / sizeof *SIZES)

/* The value of element i of the input in [-100, 100] (an exact value in every dtype used). */
static int shared_value(int64_t i, int salt, alloy_dtype dt) {
    int v = (int)((i * 7919 + salt * 104729) % 201) - 100;
    return dt == ALLOY_UINT8 ? (v + 100) : v;
}

static void *shared_worker(void *p) {
    worker *w = p;
    alloy_kernel *k = w->arg;
    enum { ITERS = 24 };
    const int64_t nmax = 9000;
    unsigned char *in = malloc(8 * (size_t)nmax), *got = malloc(8 * (size_t)nmax);
    pthread_barrier_wait(&start_line);
    for (int it = 0; it < ITERS && !w->failures; it++) {
        alloy_dtype dt = SHARED_DTYPES[(w->id + it) % N_SHARED_DTYPES];
        int triple = (int)(wrand(w) & 1);
        int64_t n = SIZES[wrand(w) % N_SIZES];
        int salt = (int)(wrand(w) % 1000);
        for (int64_t i = 0; i < n; i++) {
            int v = shared_value(i, salt, dt);
            switch (dt) {
            case ALLOY_FLOAT32: ((float *)in)[i] = (float)v; break;
            case ALLOY_INT32: ((int32_t *)in)[i] = v; break;
            case ALLOY_FLOAT16: ((uint16_t *)in)[i] = ku_f16_bits(v); break;
            default: ((uint8_t *)in)[i] = (uint8_t)v; break;
            }
        }
        alloy_array *xa = host_array(w, dt, n, in);
        if (!xa) break;
        uint32_t tg = (uint32_t)(32u << (wrand(w) % 4)); /* 32..256 */
        one_launch o = {k, 1, {xa, NULL}, dt, n, (uint32_t)n, tg, "TRIPLE", triple, got};
        if (launch_one(w, &o, alloy_dtype_name(dt)) == 0)
            for (int64_t i = 0; i < n; i++) {
                int v = shared_value(i, salt, dt), want = (triple ? 3 : 2) * v;
                double g;
                switch (dt) {
                case ALLOY_FLOAT32: g = ((float *)got)[i]; break;
                case ALLOY_INT32: g = ((int32_t *)got)[i]; break;
                case ALLOY_FLOAT16: g = ku_f16_value(((uint16_t *)got)[i]); break;
                default: g = ((uint8_t *)got)[i]; want &= 0xFF; break;
                }
                if (g != want) {
                    wfail(w, "%s n=%lld triple=%d: out[%lld] = %g, want %d", alloy_dtype_name(dt),
                          (long long)n, triple, (long long)i, g, want);
                    break;
                }
            }
        alloy_array_free(xa);
    }
    free(in);
    free(got);
    return NULL;
}

static void test_shared_kernel_specialisations(void) {
    const char *in[] = {"x"}, *out[] = {"out"};
    alloy_kernel *k = NULL;
    CHECK_OK(alloy_kernel_new("shared", 1, in, 1, out, SHARED_BODY, NULL, 1, 0, &k));
    if (!k) return;
    worker ws[NTHREADS];
    run_workers(shared_worker, k, ws);
    alloy_kernel_free(k);
}

/* ---- (c) different kernels, plain and fiber mode ------------------------------ */

enum { K_AXPY, K_REVERSE, K_SIMDSUM, K_SCAN, N_KINDS };

static const struct kind {
    const char *name, *body;
    int uses_sync;
} KINDS[N_KINDS] = {
    /* plain loop mode: y = 3x + b (integer-valued floats: exact) */
    {"c_axpy",
     "uint i = thread_position_in_grid.x;\n"
     "if (i >= uint(x_shape[0])) return;\n"
     "out[i] = 3.0f * x[i] + float(b);\n",
     0},
    /* barrier: reverse within each threadgroup (partial edge groups too) */
    {"c_reverse",
     "threadgroup int buf[1024];\n"
     "uint lid = thread_position_in_threadgroup.x;\n"
     "uint n = threads_per_threadgroup.x;\n"
     "uint i = thread_position_in_grid.x;\n"
     "buf[lid] = x[i];\n"
     "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
     "out[i] = buf[n - 1 - lid] + b;\n",
     1},
    /* SIMD: each lane gets the sum over its simdgroup */
    {"c_simdsum",
     "uint i = thread_position_in_grid.x;\n"
     "out[i] = simd_sum(x[i]) + b;\n",
     1},
    /* several barriers: inclusive prefix sum within each threadgroup */
    {"c_scan",
     "threadgroup int buf[1024];\n"
     "uint lid = thread_position_in_threadgroup.x;\n"
     "uint n = threads_per_threadgroup.x;\n"
     "uint i = thread_position_in_grid.x;\n"
     "buf[lid] = x[i];\n"
     "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
     "for (uint off = 1; off < n; off <<= 1) {\n"
     "    int v = lid >= off ? buf[lid - off] : 0;\n"
     "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
     "    buf[lid] += v;\n"
     "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
     "}\n"
     "out[i] = buf[lid] + b;\n",
     1},
};

/* The C reference of kind `kind` on n int values, 1-D groups of tg. The
 * simdgroups are the 32-lane slices of each group (partial at the edge). */
static void kind_reference(int kind, const int32_t *x, int64_t n, uint32_t tg, int b,
                           int64_t *ref) {
    for (int64_t g0 = 0; g0 < n; g0 += tg) {
        int64_t size = n - g0 < (int64_t)tg ? n - g0 : (int64_t)tg;
        for (int64_t l = 0; l < size; l++) {
            int64_t i = g0 + l;
            switch (kind) {
            case K_AXPY: ref[i] = 3 * (int64_t)x[i] + b; break;
            case K_REVERSE: ref[i] = (int64_t)x[g0 + size - 1 - l] + b; break;
            case K_SIMDSUM: {
                int64_t s0 = l / 32 * 32, s1 = s0 + 32 < size ? s0 + 32 : size, s = 0;
                for (int64_t j = s0; j < s1; j++) s += x[g0 + j];
                ref[i] = s + b;
                break;
            }
            default: {
                int64_t s = 0;
                for (int64_t j = 0; j <= l; j++) s += x[g0 + j];
                ref[i] = s + b;
                break;
            }
            }
        }
    }
}

/* Creates a kernel of `kind` (its own object), launches it on n values in
 * groups of tg, checks every element. */
static void run_kind(worker *w, int kind, int64_t n, uint32_t tg, int32_t *x, void *got,
                     int64_t *ref) {
    const struct kind *kd = &KINDS[kind];
    const char *in[] = {"x", "b"}, *out[] = {"out"};
    alloy_kernel *k = NULL;
    alloy_status st = alloy_kernel_new(kd->name, 2, in, 1, out, kd->body, NULL, 1, 0, &k);
    if (st != ALLOY_OK) {
        wfail(w, "kernel_new(%s): %s", kd->name, alloy_last_error());
        return;
    }
    int is_float = kind == K_AXPY;
    int b = (int)(wrand(w) % 50);
    float *xf = (float *)got; /* reuse: inputs for the float kernel */
    for (int64_t i = 0; i < n; i++) {
        x[i] = (int32_t)(wrand(w) % 2001) - 1000;
        if (is_float) xf[i] = (float)x[i];
    }
    alloy_array *xa = host_array(w, is_float ? ALLOY_FLOAT32 : ALLOY_INT32, n,
                                 is_float ? (void *)xf : (void *)x);
    alloy_array *ba = NULL;
    if (alloy_array_scalar(dev, is_float ? ALLOY_FLOAT32 : ALLOY_INT32, b, &ba) != ALLOY_OK)
        wfail(w, "array_scalar: %s", alloy_last_error());
    kind_reference(kind, x, n, tg, b, ref);
    if (xa && ba) {
        one_launch o = {k, 2, {xa, ba}, is_float ? ALLOY_FLOAT32 : ALLOY_INT32, n, (uint32_t)n,
                        tg, NULL, 0, got};
        if (launch_one(w, &o, kd->name) == 0)
            for (int64_t i = 0; i < n; i++) {
                double g = is_float ? (double)((float *)got)[i] : (double)((int32_t *)got)[i];
                if (g != (double)ref[i]) {
                    wfail(w, "%s n=%lld tg=%u: out[%lld] = %g, want %lld", kd->name, (long long)n,
                          tg, (long long)i, g, (long long)ref[i]);
                    break;
                }
            }
    }
    alloy_array_free(xa);
    alloy_array_free(ba);
    alloy_kernel_free(k);
}

typedef struct sizes_cfg {
    int iters;
    const int64_t *n;
    int n_n;
    const uint32_t *tg;
    int n_tg;
} sizes_cfg;

static void *kinds_worker(void *p) {
    worker *w = p;
    const sizes_cfg *c = w->arg;
    int64_t nmax = 0;
    for (int i = 0; i < c->n_n; i++) nmax = c->n[i] > nmax ? c->n[i] : nmax;
    int32_t *x = malloc(sizeof(int32_t) * (size_t)nmax);
    int64_t *ref = malloc(sizeof(int64_t) * (size_t)nmax);
    void *got = malloc(sizeof(int32_t) * (size_t)nmax);
    pthread_barrier_wait(&start_line);
    for (int it = 0; it < c->iters && !w->failures; it++) {
        int kind = (w->id + it) % N_KINDS; /* the threads run different kernels at once */
        int64_t n = c->n[wrand(w) % (uint64_t)c->n_n];
        uint32_t tg = c->tg[wrand(w) % (uint64_t)c->n_tg];
        run_kind(w, kind, n, tg, x, got, ref);
    }
    free(x);
    free(ref);
    free(got);
    return NULL;
}

static void test_different_kernels(void) {
    static const int64_t n[] = {1, 31, 33, 100, 1000, 2500};
    static const uint32_t tg[] = {32, 64, 96, 256};
    sizes_cfg c = {24, n, 6, tg, 4};
    worker ws[NTHREADS];
    run_workers(kinds_worker, &c, ws);
    int launches = 0;
    for (int t = 0; t < NTHREADS; t++) launches += ws[t].launches;
    fprintf(stderr, "  %d launches\n", launches);
}

/* ---- (d) the worker pool from every thread at once ----------------------------- */

/* ThreadSanitizer counts every fiber as a thread and supports 8192 of them
 * at once (fewer in practice: each also costs memory mappings); with 1024
 * fibers on each of 8 host threads and the pool's workers that is exceeded,
 * so under TSan the groups are smaller (still many per launch, on the pool). */
#if defined(__SANITIZE_THREAD__)
#define ALLOY_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ALLOY_TEST_TSAN 1
#endif
#endif
#ifdef ALLOY_TEST_TSAN /* (and every fiber switch costs far more there) */
#define BIG_GROUP 256u
#define BIG_GRID 5000
#else
#define BIG_GROUP 1024u
#define BIG_GRID 50000
#endif

static void test_pool_from_many_threads(void) {
    /* Groups of BIG_GROUP threads (fiber mode: one group per pool item) and
     * big loop-mode grids (over the inline limit): every launch uses the pool. */
    static const int64_t n[] = {BIG_GROUP * 9, BIG_GROUP * 9 + 333, BIG_GRID};
    static const uint32_t tg[] = {BIG_GROUP, BIG_GROUP / 2};
    sizes_cfg c = {6, n, 3, tg, 2};
    worker ws[NTHREADS];
    run_workers(kinds_worker, &c, ws);
}

int main(void) {
    harness_seed();
    /* More pool workers than this machine may have CPUs: more contention. */
    setenv("ALLOY_NUM_THREADS", "4", 0);
    dev = harness_device();
    if (pthread_barrier_init(&start_line, NULL, NTHREADS) != 0) {
        fprintf(stderr, "pthread_barrier_init failed\n");
        return 1;
    }
    RUN(test_first_launch_compiles_once);
    RUN(test_shared_kernel_specialisations);
    RUN(test_different_kernels);
    RUN(test_pool_from_many_threads);
    pthread_barrier_destroy(&start_line);
    return harness_finish();
}
