/* cpu_pool.c — a queue of jobs shared by a fixed set of worker threads.
 *
 * A job is a range of items claimed with an atomic counter. The caller
 * queues its job, wakes as many workers as can help, works on the job itself
 * and then waits until the workers that joined are done with it. The pool
 * mutex only guards the queue and the per-job count of helping workers; it is
 * never held while items run. Workers start on first use and live until the
 * process exits (they sleep on a condition variable when there is nothing to
 * do, with all signals blocked). A forked child has no workers: its callers
 * then run every item themselves (the caller always drains its own job). */
#include "cpu_pool.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef struct pool_job {
    alloy_cpu_task_fn fn;
    void *ctx;
    size_t n, chunk;
    atomic_size_t next;
    atomic_int stop;
    atomic_int helpers; /* workers inside the job (changed under the pool mutex) */
    int queued;  /* linked in the queue (pool mutex) */
    struct pool_job *prev, *next_job;
} pool_job;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* workers wait here for jobs */
    pthread_cond_t done_cv; /* callers wait here for their helpers */
    pool_job *head, *tail;
    atomic_int queued; /* jobs in the queue, read by spinning workers */
    int sleeping;      /* workers blocked on work_cv */
    int workers;       /* background threads */
    int threads;       /* workers + caller */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
          NULL, NULL, 0, 0, 0, 1};

/* Idle workers and waiting callers poll for this long before they block:
 * launches often come back to back, and a futex wake-up costs several
 * microseconds. */
#define SPIN_NS 50000L

static inline void cpu_relax(void) {
#if defined(__x86_64__)
    __asm__ volatile("pause");
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static long elapsed_ns(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}

/* Polls `*flag` until it equals `want` (returns 1) or the spin time ran out. */
static int spin_until(atomic_int *flag, int want) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned k = 1;; k++) {
        if ((atomic_load_explicit(flag, memory_order_acquire) != 0) == (want != 0)) return 1;
        cpu_relax();
        if (k % 64 == 0 && elapsed_ns(&t0) > SPIN_NS) return 0;
    }
}

static pthread_once_t config_once = PTHREAD_ONCE_INIT, start_once = PTHREAD_ONCE_INIT;
static int configured = 1;
static atomic_size_t jobs_run; /* alloy_cpu_pool_jobs */

static void unlink_job(pool_job *j) {
    if (!j->queued) return;
    if (j->prev) j->prev->next_job = j->next_job;
    else pool.head = j->next_job;
    if (j->next_job) j->next_job->prev = j->prev;
    else pool.tail = j->prev;
    j->prev = j->next_job = NULL;
    j->queued = 0;
    atomic_fetch_sub_explicit(&pool.queued, 1, memory_order_relaxed);
}

static void run_items(pool_job *j) {
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&j->next, j->chunk, memory_order_relaxed);
        if (i >= j->n) return;
        size_t end = i + j->chunk < j->n ? i + j->chunk : j->n;
        for (; i < end; i++) {
            if (atomic_load_explicit(&j->stop, memory_order_relaxed)) break;
            if (j->fn(j->ctx, i)) atomic_store_explicit(&j->stop, 1, memory_order_relaxed);
        }
    }
}

static void *worker_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&pool.mu);
    for (;;) {
        pool_job *j = pool.head;
        if (!j) {
            pthread_mutex_unlock(&pool.mu);
            int found = spin_until(&pool.queued, 1);
            pthread_mutex_lock(&pool.mu);
            if (!found && !pool.head) {
                pool.sleeping++;
                pthread_cond_wait(&pool.work_cv, &pool.mu);
                pool.sleeping--;
            }
            continue;
        }
        atomic_fetch_add_explicit(&j->helpers, 1, memory_order_relaxed);
        /* Everything claimed after this point is ours: unlink the job once
         * it is exhausted so that later workers go on to the next one. */
        pthread_mutex_unlock(&pool.mu);
        run_items(j);
        pthread_mutex_lock(&pool.mu);
        unlink_job(j);
        /* The last access to the job: its owner may return right after. */
        if (atomic_fetch_sub_explicit(&j->helpers, 1, memory_order_release) == 1)
            pthread_cond_broadcast(&pool.done_cv);
    }
    return NULL;
}

static int count_cpus(void) {
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c > 0) return c;
    }
#endif
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (int)c : 1;
}

static void pool_config(void) {
    int n = count_cpus();
    const char *env = getenv("ALLOY_NUM_THREADS");
    if (env && *env) {
        char *end = NULL;
        long v = strtol(env, &end, 10);
        if (end != env && v >= 1) n = v > 1024 ? 1024 : (int)v;
    }
    configured = n;
}

static void pool_start(void) {
    pthread_once(&config_once, pool_config);
    int n = configured;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int started = 0;
    for (int i = 0; i < n - 1; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, worker_main, NULL) != 0) break;
        started++;
    }
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_mutex_lock(&pool.mu);
    pool.workers = started;
    pool.threads = started + 1;
    pthread_mutex_unlock(&pool.mu);
}

int alloy_cpu_pool_threads(void) {
    pthread_once(&config_once, pool_config);
    return configured;
}

void alloy_cpu_pool_run(size_t n, size_t chunk, alloy_cpu_task_fn fn, void *ctx) {
    if (n == 0) return;
    int threads = alloy_cpu_pool_threads();
    if (n > 1 && threads > 1) {
        pthread_once(&start_once, pool_start);
        threads = pool.threads; /* fewer if threads could not be started */
    }
    if (n == 1 || threads <= 1) {
        for (size_t i = 0; i < n; i++)
            if (fn(ctx, i)) break;
        return;
    }
    atomic_fetch_add_explicit(&jobs_run, 1, memory_order_relaxed);
    pool_job j;
    j.fn = fn;
    j.ctx = ctx;
    j.n = n;
    if (!chunk) {
        chunk = n / ((size_t)threads * 8);
        if (chunk < 1) chunk = 1;
    }
    j.chunk = chunk;
    atomic_init(&j.next, 0);
    atomic_init(&j.stop, 0);
    atomic_init(&j.helpers, 0);
    j.queued = 1;
    j.next_job = NULL;

    size_t wake = (n + chunk - 1) / chunk - 1;
    pthread_mutex_lock(&pool.mu);
    j.prev = pool.tail;
    if (pool.tail) pool.tail->next_job = &j;
    else pool.head = &j;
    pool.tail = &j;
    atomic_fetch_add_explicit(&pool.queued, 1, memory_order_release);
    if (wake > (size_t)pool.sleeping) wake = (size_t)pool.sleeping;
    if (wake && wake == (size_t)pool.sleeping) pthread_cond_broadcast(&pool.work_cv);
    else
        for (size_t i = 0; i < wake; i++) pthread_cond_signal(&pool.work_cv);
    pthread_mutex_unlock(&pool.mu);

    run_items(&j);

    pthread_mutex_lock(&pool.mu);
    unlink_job(&j); /* no new helpers from here on */
    pthread_mutex_unlock(&pool.mu);
    if (atomic_load_explicit(&j.helpers, memory_order_acquire) && !spin_until(&j.helpers, 0)) {
        pthread_mutex_lock(&pool.mu);
        while (atomic_load_explicit(&j.helpers, memory_order_acquire))
            pthread_cond_wait(&pool.done_cv, &pool.mu);
        pthread_mutex_unlock(&pool.mu);
    }
}

size_t alloy_cpu_pool_jobs(void) { return atomic_load_explicit(&jobs_run, memory_order_relaxed); }
