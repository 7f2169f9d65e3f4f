/* cpu_sched.c — round-robin fiber scheduler for one threadgroup at a time.
 *
 * Every thread of the group is a fiber. A fiber that must wait (barrier, SIMD
 * rendezvous) switches directly to the next fiber in index order that can
 * run; the last one to arrive releases the others (a generation counter) and
 * carries on, so an uncontended barrier costs one switch per thread. Blocked
 * fibers are not marked runnable one by one: a fiber waiting for generation
 * g is runnable once the counter moved past g.
 *
 * SIMD exchanges use per-simdgroup generations and two slot arrays chosen by
 * the generation's parity: a fast lane can deposit its value for the next
 * exchange while slow lanes still read the previous result, and it cannot
 * get two exchanges ahead (the one in between needs every live lane).
 *
 * Fibers live as long as their OS thread and run one kernel thread after
 * another: a finished thread parks its fiber, which the next group resumes
 * (so a kernel thread starts with the floating-point control state the
 * previous one on that fiber left, normally the default).
 *
 * If a fiber must wait and no fiber at all can run, the group is deadlocked:
 * the scheduler returns to the OS thread's own context and abandons the
 * blocked fibers (their stacks get fresh contexts for the next group). */
#include "cpu_sched.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fiber.h"

/* ThreadSanitizer must be told about every stack switch (it keeps a shadow
 * call stack per context); the annotations vanish in normal builds. */
#if defined(__SANITIZE_THREAD__)
#define ALLOY_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ALLOY_TSAN 1
#endif
#endif
#ifdef ALLOY_TSAN
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
#define TSAN_SWITCH(ctx) __tsan_switch_to_fiber((ctx), 0)
#else
#define TSAN_SWITCH(ctx) ((void)0)
#endif

enum { F_RUN = 0, F_BARRIER = 1, F_SIMD = 2, F_DONE = 3 };

typedef struct sched_fiber {
    void *sp; /* saved context while not running */
    alloy_cpu_sched *s;
    unsigned lx, ly, lz;
    unsigned index; /* linear index in the dispatch threadgroup */
    unsigned sg, lane;
    unsigned state;
    unsigned wait_gen;
    unsigned site; /* where it waits at a barrier (cpu_abi.h; 0: unknown) */
    int parked; /* suspended in thread_exit: can be resumed for a new thread */
#ifdef ALLOY_TSAN
    void *tsan;
#endif
} sched_fiber;

typedef struct simd_state {
    unsigned gen;     /* completed rendezvous so far */
    unsigned arrived; /* lanes waiting in the current one */
    unsigned live;    /* lanes that have not returned */
    uint32_t live_mask;
    uint32_t mask[2]; /* active mask of the rendezvous, by parity */
    unsigned char slots[2][ALLOY_CPU_SIMD_WIDTH * ALLOY_CPU_SIMD_SLOT];
} simd_state;

struct alloy_cpu_sched {
    sched_fiber *fibers; /* capacity ALLOY_CPU_MAX_FIBERS */
    alloy_fiber_stack *stacks;
    unsigned n_stacks; /* mapped so far */
    simd_state *sg;
    unsigned sg_cap;

    /* the group being run */
    void *main_sp;
#ifdef ALLOY_TSAN
    void *tsan_main;
#endif
    const alloy_cpu_group *group;
    alloy_cpu_thread_fn fn;
    unsigned n, cur, live;
    unsigned bar_arrived, bar_gen;
    int deadlock; /* 1: nobody can run; 2: a barrier completed with threads at different sites */
    const sched_fiber *stopped_by; /* the fiber that found case 2 (never resumed) */
};

/* ---- per-OS-thread instance ------------------------------------------- */

static pthread_key_t sched_key;
static pthread_once_t sched_key_once = PTHREAD_ONCE_INIT;
static _Thread_local alloy_cpu_sched *tls_sched;

static void sched_destroy(void *p) {
    alloy_cpu_sched *s = p;
    if (!s) return;
#ifdef ALLOY_TSAN
    for (unsigned i = 0; s->fibers && i < ALLOY_CPU_MAX_FIBERS; i++)
        if (s->fibers[i].tsan) __tsan_destroy_fiber(s->fibers[i].tsan);
#endif
    for (unsigned i = 0; i < s->n_stacks; i++) alloy_fiber_stack_free(&s->stacks[i]);
    free(s->stacks);
    free(s->fibers);
    free(s->sg);
    free(s);
}

static void sched_key_init(void) { (void)pthread_key_create(&sched_key, sched_destroy); }

alloy_cpu_sched *alloy_cpu_sched_for_thread(void) {
    if (tls_sched) return tls_sched;
    pthread_once(&sched_key_once, sched_key_init);
    alloy_cpu_sched *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->fibers = calloc(ALLOY_CPU_MAX_FIBERS, sizeof *s->fibers);
    s->stacks = calloc(ALLOY_CPU_MAX_FIBERS, sizeof *s->stacks);
    if (!s->fibers || !s->stacks) {
        sched_destroy(s);
        return NULL;
    }
    (void)pthread_setspecific(sched_key, s);
    tls_sched = s;
    return s;
}

/* ---- switching ---------------------------------------------------------- */

static inline int runnable(const alloy_cpu_sched *s, const sched_fiber *f) {
    switch (f->state) {
    case F_RUN: return 1;
    case F_BARRIER: return s->bar_gen != f->wait_gen;
    case F_SIMD: return s->sg[f->sg].gen != f->wait_gen;
    default: return 0;
    }
}

/* The current fiber cannot go on: resume the next one that can, in index
 * order, or report a deadlock to the OS thread's context. Returns when this
 * fiber was released and resumed. */
static void yield_blocked(alloy_cpu_sched *s, sched_fiber *self) {
    unsigned n = s->n, i = s->cur;
    for (unsigned k = 0; k < n; k++) {
        i = i + 1 == n ? 0 : i + 1;
        sched_fiber *f = &s->fibers[i];
        if (runnable(s, f)) {
            f->state = F_RUN;
            if (f == self) return;
            s->cur = i;
            TSAN_SWITCH(f->tsan);
            alloy_fiber_switch(&self->sp, f->sp);
            return;
        }
    }
    s->deadlock = 1;
    TSAN_SWITCH(s->tsan_main);
    /* A blocked fiber is abandoned here; a finished one (from thread_exit)
     * stays parked and may be resumed by a later group. */
    alloy_fiber_switch(&self->sp, s->main_sp);
}

static void simd_complete(simd_state *g) {
    g->mask[g->gen & 1] = g->live_mask;
    g->arrived = 0;
    g->gen++;
}

/* The barrier is complete: do the waiting threads (and `self`, arriving)
 * wait at one site? Unknown sites (0) match any. */
static int barrier_sites_agree(const alloy_cpu_sched *s, const sched_fiber *self) {
    unsigned site = self && self->state != F_DONE ? self->site : 0;
    for (unsigned i = 0; i < s->n; i++) {
        const sched_fiber *f = &s->fibers[i];
        if (f == self || f->state != F_BARRIER || !f->site) continue;
        if (!site) site = f->site;
        else if (f->site != site) return 0;
    }
    return 1;
}

/* Stops the group: a barrier completed at different sites. */
static void stop_divergent(alloy_cpu_sched *s, sched_fiber *self) {
    s->deadlock = 2;
    s->stopped_by = self;
    TSAN_SWITCH(s->tsan_main);
    alloy_fiber_switch(&self->sp, s->main_sp); /* never resumed: the fibers are abandoned */
}

/* A thread returned from the body: it leaves every rendezvous. */
static void thread_exit(alloy_cpu_sched *s, sched_fiber *f) {
    f->state = F_DONE;
    s->live--;
    simd_state *g = &s->sg[f->sg];
    g->live--;
    g->live_mask &= ~(1u << f->lane);
    if (g->arrived && g->arrived == g->live) simd_complete(g);
    if (s->bar_arrived && s->bar_arrived == s->live) {
        if (!barrier_sites_agree(s, f)) stop_divergent(s, f);
        s->bar_arrived = 0;
        s->bar_gen++;
    }
    if (s->live == 0) {
        TSAN_SWITCH(s->tsan_main);
        alloy_fiber_switch(&f->sp, s->main_sp); /* resumed by a later group */
        return;
    }
    yield_blocked(s, f); /* returns when a later group resumes this fiber */
}

/* A fiber runs one kernel thread after another: when a thread returns the
 * fiber parks in thread_exit, and the next group that needs this slot simply
 * resumes it there (its fields already describe the new thread). */
static void fiber_entry(void *arg) {
    sched_fiber *f = arg;
    for (;;) {
        alloy_cpu_sched *s = f->s;
        s->fn(s->group, f->lx, f->ly, f->lz);
        thread_exit(s, f);
    }
}

/* ---- services ----------------------------------------------------------- */

static void svc_barrier(alloy_cpu_sched *s, unsigned site) {
    sched_fiber *f = &s->fibers[s->cur];
    f->site = site;
    if (++s->bar_arrived == s->live) {
        if (!barrier_sites_agree(s, f)) {
            f->state = F_BARRIER;
            stop_divergent(s, f);
        }
        s->bar_arrived = 0;
        s->bar_gen++;
        return;
    }
    f->state = F_BARRIER;
    f->wait_gen = s->bar_gen;
    yield_blocked(s, f);
}

static const unsigned char *simd_rendezvous(alloy_cpu_sched *s, const void *value, unsigned size,
                                            unsigned *active, unsigned *lane) {
    sched_fiber *f = &s->fibers[s->cur];
    simd_state *g = &s->sg[f->sg];
    unsigned gen = g->gen;
    unsigned char *buf = g->slots[gen & 1];
    if (size) {
        if (size > ALLOY_CPU_SIMD_SLOT) size = ALLOY_CPU_SIMD_SLOT;
        memcpy(buf + (size_t)f->lane * ALLOY_CPU_SIMD_SLOT, value, size);
    }
    if (++g->arrived == g->live) {
        simd_complete(g);
    } else {
        f->state = F_SIMD;
        f->wait_gen = gen;
        yield_blocked(s, f);
    }
    if (active) *active = g->mask[gen & 1];
    if (lane) *lane = f->lane;
    return buf;
}

static const unsigned char *svc_simd_exchange(alloy_cpu_sched *s, const void *value,
                                              unsigned size, unsigned *active, unsigned *lane) {
    return simd_rendezvous(s, value, size, active, lane);
}

static void svc_simd_barrier(alloy_cpu_sched *s) { (void)simd_rendezvous(s, NULL, 0, NULL, NULL); }

const alloy_cpu_services alloy_cpu_sched_services = {svc_barrier, svc_simd_exchange,
                                                     svc_simd_barrier};

/* ---- running a group ---------------------------------------------------- */

static const char *state_words(const sched_fiber *f, int one) {
    switch (f->state) {
    case F_BARRIER: return one ? "waits at a threadgroup barrier" : "wait at a threadgroup barrier";
    case F_SIMD: return one ? "waits at a SIMD operation" : "wait at a SIMD operation";
    case F_DONE: return "finished";
    default: return "running";
    }
}

/* "body line 12" / "header line 3" for a barrier site (cpu_abi.h). */
static void site_text(unsigned site, char *buf, size_t len) {
    if (!site) snprintf(buf, len, "an unknown place");
    else snprintf(buf, len, "%s line %u", (site >> 31) ? "header" : "body", site & 0x7fffffffu);
}

static void deadlock_message(const alloy_cpu_sched *s, const char *kernel_name, char *msg,
                             size_t msg_len) {
    const alloy_cpu_group *g = s->group;
    int any_barrier = 0;
    for (unsigned i = 0; i < s->n; i++) any_barrier |= s->fibers[i].state == F_BARRIER;
    size_t used = 0;
#define APPEND(...)                                                                       \
    do {                                                                                  \
        if (used < msg_len) {                                                             \
            int w_ = snprintf(msg + used, msg_len - used, __VA_ARGS__);                   \
            if (w_ > 0) used += (size_t)w_;                                               \
        }                                                                                 \
    } while (0)
    APPEND("%s divergence in kernel '%s': threadgroup (%u,%u,%u): ",
           any_barrier ? "barrier" : "SIMD", kernel_name ? kernel_name : "?", g->group_id[0],
           g->group_id[1], g->group_id[2]);
    if (s->deadlock == 2) APPEND("the threads met different barriers: ");
    unsigned runs = 0;
    for (unsigned i = 0; i < s->n;) {
        unsigned j = i;
        while (j + 1 < s->n && s->fibers[j + 1].state == s->fibers[i].state &&
               (s->fibers[i].state != F_SIMD || s->fibers[j + 1].sg == s->fibers[i].sg) &&
               (s->fibers[i].state != F_BARRIER || s->fibers[j + 1].site == s->fibers[i].site))
            j++;
        if (runs == 12) {
            APPEND(", ...");
            break;
        }
        const sched_fiber *a = &s->fibers[i], *b = &s->fibers[j];
        if (runs) APPEND(", ");
        if (a == b) APPEND("thread %u ", a->index);
        else APPEND("threads %u-%u ", a->index, b->index);
        APPEND("%s", state_words(a, a == b));
        if (a->state == F_SIMD) APPEND(" (simdgroup %u)", a->sg);
        if (a->state == F_BARRIER && a->site) {
            char where[64];
            site_text(a->site, where, sizeof where);
            APPEND(" at %s", where);
        }
        runs++;
        i = j + 1;
    }
    APPEND("; every live thread of a threadgroup must reach the same barriers and every live "
           "lane of a simdgroup the same SIMD operations");
#undef APPEND
}

alloy_status alloy_cpu_sched_run(alloy_cpu_sched *s, alloy_cpu_group *g, alloy_cpu_thread_fn fn,
                                 const char *kernel_name, char *msg, size_t msg_len) {
    const unsigned *tg = g->launch->tg;
    unsigned sx = g->size[0], sy = g->size[1], sz = g->size[2];
    unsigned long long n = (unsigned long long)sx * sy * sz;
    if (msg && msg_len) msg[0] = 0;
    if (n == 0) return ALLOY_OK;
    if (n > ALLOY_CPU_MAX_FIBERS) {
        snprintf(msg, msg_len,
                 "kernel '%s': threadgroup of %llu threads exceeds the CPU backend's limit of %u "
                 "for kernels that synchronise",
                 kernel_name ? kernel_name : "?", n, ALLOY_CPU_MAX_FIBERS);
        return ALLOY_ERROR_INVALID_ARGUMENT;
    }
    /* Fiber stacks, mapped once per OS thread and reused. */
    size_t stack = alloy_fiber_stack_size();
    while (s->n_stacks < n) {
        if (alloy_fiber_stack_alloc(&s->stacks[s->n_stacks], stack) != 0) {
            snprintf(msg, msg_len,
                     "kernel '%s': cannot map %llu fiber stacks of %zu bytes with guard pages "
                     "(out of memory, or over the limit of memory mappings vm.max_map_count): "
                     "lower ALLOY_CPU_STACK_SIZE, the threadgroup size or ALLOY_NUM_THREADS",
                     kernel_name ? kernel_name : "?", n, stack);
            return ALLOY_ERROR_OUT_OF_MEMORY;
        }
        s->n_stacks++;
    }
    unsigned long long last_l = (sx - 1) + (unsigned long long)(sy - 1) * tg[0] +
                                (unsigned long long)(sz - 1) * tg[0] * tg[1];
    unsigned n_sg = (unsigned)(last_l / ALLOY_CPU_SIMD_WIDTH) + 1;
    if (n_sg > s->sg_cap) {
        simd_state *p = realloc(s->sg, (size_t)n_sg * sizeof *p);
        if (!p) {
            snprintf(msg, msg_len, "kernel '%s': out of memory for the SIMD state",
                     kernel_name ? kernel_name : "?");
            return ALLOY_ERROR_OUT_OF_MEMORY;
        }
        s->sg = p;
        s->sg_cap = n_sg;
    }
    for (unsigned k = 0; k < n_sg; k++) {
        simd_state *q = &s->sg[k];
        q->gen = q->arrived = q->live = 0;
        q->live_mask = q->mask[0] = q->mask[1] = 0;
    }
    g->sched = s;
    s->group = g;
    s->fn = fn;
    unsigned i = 0;
    for (unsigned z = 0; z < sz; z++)
        for (unsigned y = 0; y < sy; y++)
            for (unsigned x = 0; x < sx; x++, i++) {
                sched_fiber *f = &s->fibers[i];
                unsigned l = x + y * tg[0] + z * tg[0] * tg[1];
                f->s = s;
                f->lx = x;
                f->ly = y;
                f->lz = z;
                f->index = l;
                f->sg = l / ALLOY_CPU_SIMD_WIDTH;
                f->lane = l % ALLOY_CPU_SIMD_WIDTH;
                f->state = F_RUN;
                f->wait_gen = 0;
                f->site = 0;
                if (!f->parked) { /* never used, or abandoned by a deadlock */
                    f->sp = alloy_fiber_make(&s->stacks[i], fiber_entry, f);
#ifdef ALLOY_TSAN
                    if (f->tsan) __tsan_destroy_fiber(f->tsan); /* drop the stale shadow stack */
                    f->tsan = __tsan_create_fiber(0);
#endif
                }
                s->sg[f->sg].live++;
                s->sg[f->sg].live_mask |= 1u << f->lane;
            }
    s->n = (unsigned)n;
    s->live = (unsigned)n;
    s->cur = 0;
    s->bar_arrived = 0;
    s->bar_gen = 0;
    s->deadlock = 0;
    s->stopped_by = NULL;
#ifdef ALLOY_TSAN
    s->tsan_main = __tsan_get_current_fiber();
#endif
    TSAN_SWITCH(s->fibers[0].tsan);
    alloy_fiber_switch(&s->main_sp, s->fibers[0].sp);
    for (unsigned k = 0; k < s->n; k++)
        s->fibers[k].parked = s->fibers[k].state == F_DONE && &s->fibers[k] != s->stopped_by;
    alloy_status st = ALLOY_OK;
    if (s->deadlock) {
        deadlock_message(s, kernel_name, msg, msg_len);
        st = ALLOY_ERROR_LAUNCH;
    }
    s->group = NULL;
    g->sched = NULL;
    return st;
}
