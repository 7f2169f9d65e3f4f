/* test_cpu_sched.c — the CPU backend's fiber scheduler, driven directly with
 * hand-written C "kernel threads" (no kernel compiler needed): barrier
 * ordering for 1, 33, 1000 and 1024 threads, SIMD exchanges with partial
 * simdgroups and lanes that return early, 2-D groups with partial edges,
 * divergence reported as an error instead of a hang, and groups run
 * concurrently on the thread pool from several host threads. Prints (but
 * does not check) the cost of an uncontended barrier. */
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "harness.h"
#include "backend/cpu/cpu_pool.h"
#include "backend/cpu/cpu_sched.h"

#define BARRIER(g) (g)->launch->svc->barrier((g)->sched, 0)
#define SIMD_BARRIER(g) (g)->launch->svc->simd_barrier((g)->sched)

static unsigned group_threads(const alloy_cpu_group *g) {
    return g->size[0] * g->size[1] * g->size[2];
}

static unsigned linear(const alloy_cpu_group *g, unsigned lx, unsigned ly, unsigned lz) {
    const unsigned *tg = g->launch->tg;
    return lx + ly * tg[0] + lz * tg[0] * tg[1];
}

/* A 1-D launch description with one group of n threads. */
static void one_group(alloy_cpu_launch *l, alloy_cpu_group *g, unsigned n, void *const *args) {
    memset(l, 0, sizeof *l);
    l->args = args;
    l->grid[0] = n;
    l->grid[1] = l->grid[2] = 1;
    l->tg[0] = n;
    l->tg[1] = l->tg[2] = 1;
    l->groups[0] = l->groups[1] = l->groups[2] = 1;
    l->svc = &alloy_cpu_sched_services;
    memset(g, 0, sizeof *g);
    g->launch = l;
    g->size[0] = n;
    g->size[1] = g->size[2] = 1;
}

static alloy_status run_group(alloy_cpu_group *g, alloy_cpu_thread_fn fn, char *msg, size_t len) {
    alloy_cpu_sched *s = alloy_cpu_sched_for_thread();
    if (!s) return ALLOY_ERROR_OUT_OF_MEMORY;
    return alloy_cpu_sched_run(s, g, fn, "test_kernel", msg, len);
}

/* ---- barrier ordering --------------------------------------------------- */

/* "Threadgroup memory": one copy per OS thread, like the kernels'. */
static _Thread_local double tg_mem[1024];
enum { ROUNDS = 5 };

/* args[0]: double out[n * ROUNDS]. Each round: write own slot, barrier,
 * read both neighbours, barrier. Plus a tree reduction with barriers in a
 * loop; the sum goes to out[n * ROUNDS + 0] from thread 0. */
static void k_neighbours(const alloy_cpu_group *g, unsigned lx, unsigned ly, unsigned lz) {
    double *out = g->launch->args[0];
    unsigned n = group_threads(g), i = linear(g, lx, ly, lz);
    double v = i * 3.0 + 1.0;
    for (int r = 0; r < ROUNDS; r++) {
        tg_mem[i] = v;
        BARRIER(g);
        double left = tg_mem[(i + n - 1) % n], right = tg_mem[(i + 1) % n];
        BARRIER(g);
        v = v + 0.5 * left - 0.25 * right;
        out[(size_t)r * n + i] = v;
    }
    /* tree reduction of the last values */
    tg_mem[i] = v;
    BARRIER(g);
    for (unsigned width = 1; width < n; width *= 2) {
        double add = (i % (2 * width) == 0 && i + width < n) ? tg_mem[i + width] : 0.0;
        BARRIER(g);
        tg_mem[i] += add;
        BARRIER(g);
    }
    if (i == 0) out[(size_t)ROUNDS * n] = tg_mem[0];
}

static void neighbours_reference(unsigned n, double *ref) {
    double *v = malloc(n * sizeof *v), *nv = malloc(n * sizeof *nv);
    for (unsigned i = 0; i < n; i++) v[i] = i * 3.0 + 1.0;
    for (int r = 0; r < ROUNDS; r++) {
        for (unsigned i = 0; i < n; i++)
            nv[i] = v[i] + 0.5 * v[(i + n - 1) % n] - 0.25 * v[(i + 1) % n];
        memcpy(v, nv, n * sizeof *v);
        memcpy(ref + (size_t)r * n, v, n * sizeof *v);
    }
    double sum = 0;
    for (unsigned i = 0; i < n; i++) sum += v[i];
    ref[(size_t)ROUNDS * n] = sum;
    free(v);
    free(nv);
}

static void test_barrier_ordering(void) {
    const unsigned sizes[] = {1, 33, 1000, 1024};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        unsigned n = sizes[k];
        size_t len = (size_t)n * ROUNDS + 1;
        double *out = calloc(len, sizeof *out), *ref = calloc(len, sizeof *ref);
        void *args[1] = {out};
        alloy_cpu_launch l;
        alloy_cpu_group g;
        one_group(&l, &g, n, args);
        char msg[512];
        CHECK_MSG(run_group(&g, k_neighbours, msg, sizeof msg) == ALLOY_OK, "n=%u: %s", n, msg);
        neighbours_reference(n, ref);
        size_t bad = 0;
        for (size_t i = 0; i < len; i++)
            if (fabs(out[i] - ref[i]) > 1e-9 * (1 + fabs(ref[i]))) bad++;
        CHECK_MSG(bad == 0, "n=%u: %zu of %zu values differ", n, bad, len);
        free(out);
        free(ref);
    }
}

/* ---- SIMD exchanges ----------------------------------------------------- */

typedef struct simd_record {
    unsigned lane, active[4];
    int64_t sum[4];
    int rounds;
} simd_record;

/* Sum over the active lanes of an int64 per lane. */
static int64_t simd_sum_i64(const alloy_cpu_group *g, int64_t v, unsigned *active,
                            unsigned *lane) {
    const unsigned char *slots =
        g->launch->svc->simd_exchange(g->sched, &v, sizeof v, active, lane);
    int64_t s = 0;
    for (unsigned i = 0; i < 32; i++)
        if (*active >> i & 1u) {
            int64_t x;
            memcpy(&x, slots + i * ALLOY_CPU_SIMD_SLOT, sizeof x);
            s += x;
        }
    return s;
}

/* args[0]: simd_record[n]. Four exchanges; lanes with lane % 32 >= 20 of
 * simdgroup 0 return after the first, and lane 3 of every simdgroup after
 * the second. Between exchange 3 and reading its result there is a
 * threadgroup barrier, so faster lanes already deposit exchange 4. */
static void k_simd(const alloy_cpu_group *g, unsigned lx, unsigned ly, unsigned lz) {
    simd_record *rec = g->launch->args[0];
    unsigned i = linear(g, lx, ly, lz);
    simd_record *r = &rec[i];
    unsigned lane = 99;
    for (int round = 0; round < 4; round++) {
        int64_t v = (int64_t)(i + 1) * (round + 1);
        if (round == 2) {
            const unsigned char *slots =
                g->launch->svc->simd_exchange(g->sched, &v, sizeof v, &r->active[round], &lane);
            BARRIER(g);
            int64_t s = 0;
            for (unsigned k = 0; k < 32; k++)
                if (r->active[round] >> k & 1u) {
                    int64_t x;
                    memcpy(&x, slots + k * ALLOY_CPU_SIMD_SLOT, sizeof x);
                    s += x;
                }
            r->sum[round] = s;
        } else {
            r->sum[round] = simd_sum_i64(g, v, &r->active[round], &lane);
        }
        r->lane = lane;
        r->rounds = round + 1;
        if (round == 0 && i < 32 && i % 32 >= 20) return;
        if (round == 1 && i % 32 == 3) return;
    }
}

static void test_simd_exchange(void) {
    const unsigned sizes[] = {1, 40, 64, 100, 1024};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        unsigned n = sizes[k];
        simd_record *rec = calloc(n, sizeof *rec);
        void *args[1] = {rec};
        alloy_cpu_launch l;
        alloy_cpu_group g;
        one_group(&l, &g, n, args);
        char msg[512];
        CHECK_MSG(run_group(&g, k_simd, msg, sizeof msg) == ALLOY_OK, "n=%u: %s", n, msg);
        int bad = 0;
        for (unsigned i = 0; i < n; i++) {
            unsigned sg = i / 32, first = sg * 32, last = first + 32 < n ? first + 32 : n;
            int rounds = (i < 32 && i % 32 >= 20) ? 1 : (i % 32 == 3) ? 2 : 4;
            if (rec[i].rounds != rounds || rec[i].lane != i % 32) bad++;
            for (int round = 0; round < rounds; round++) {
                unsigned mask = 0;
                int64_t sum = 0;
                for (unsigned j = first; j < last; j++) {
                    int jr = (j < 32 && j % 32 >= 20) ? 1 : (j % 32 == 3) ? 2 : 4;
                    if (jr > round) {
                        mask |= 1u << (j % 32);
                        sum += (int64_t)(j + 1) * (round + 1);
                    }
                }
                if (rec[i].active[round] != mask || rec[i].sum[round] != sum) bad++;
            }
        }
        CHECK_MSG(bad == 0, "n=%u: %d threads with wrong SIMD results", n, bad);
        free(rec);
    }
}

/* simd_barrier: lanes of a simdgroup pass it together; a partial last
 * simdgroup (n = 40: 8 lanes) does not wait for missing lanes. */
static void k_simd_barrier(const alloy_cpu_group *g, unsigned lx, unsigned ly, unsigned lz) {
    int *out = g->launch->args[0];
    unsigned i = linear(g, lx, ly, lz), base = i / 32 * 32;
    unsigned n = group_threads(g), end = base + 32 < n ? base + 32 : n;
    static _Thread_local int stage[1024];
    stage[i] = 1;
    SIMD_BARRIER(g);
    int seen = 0;
    for (unsigned j = base; j < end; j++) seen += stage[j];
    out[i] = seen;
}

static void test_simd_barrier(void) {
    unsigned n = 40;
    int out[40];
    void *args[1] = {out};
    alloy_cpu_launch l;
    alloy_cpu_group g;
    one_group(&l, &g, n, args);
    char msg[512];
    CHECK_MSG(run_group(&g, k_simd_barrier, msg, sizeof msg) == ALLOY_OK, "%s", msg);
    for (unsigned i = 0; i < n; i++) CHECK(out[i] == (i < 32 ? 32 : 8));
}

/* ---- 2-D groups with partial edges -------------------------------------- */

typedef struct grid2d {
    unsigned w, h;
    float *in, *out;
    unsigned *mask; /* active mask seen by each thread */
    unsigned *lane;
} grid2d;

/* 3x3 box sum over the tile held in threadgroup memory (neighbours outside
 * the group count as 0), plus a SIMD exchange to record lane and mask. */
static void k_tile(const alloy_cpu_group *g, unsigned lx, unsigned ly, unsigned lz) {
    (void)lz;
    const alloy_cpu_launch *l = g->launch;
    grid2d *d = l->args[0];
    static _Thread_local float tile[32][32];
    unsigned gx = g->group_id[0] * l->tg[0] + lx, gy = g->group_id[1] * l->tg[1] + ly;
    tile[ly][lx] = d->in[gy * d->w + gx];
    BARRIER(g);
    float s = 0;
    for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++) {
            int x = (int)lx + dx, y = (int)ly + dy;
            if (x >= 0 && y >= 0 && x < (int)g->size[0] && y < (int)g->size[1]) s += tile[y][x];
        }
    unsigned active, lane;
    int one = 1;
    (void)l->svc->simd_exchange(g->sched, &one, sizeof one, &active, &lane);
    d->out[gy * d->w + gx] = s;
    d->mask[gy * d->w + gx] = active;
    d->lane[gy * d->w + gx] = lane;
}

static void test_2d_partial(void) {
    grid2d d = {13, 6, NULL, NULL, NULL, NULL};
    size_t n = (size_t)d.w * d.h;
    d.in = malloc(n * sizeof *d.in);
    d.out = calloc(n, sizeof *d.out);
    d.mask = calloc(n, sizeof *d.mask);
    d.lane = calloc(n, sizeof *d.lane);
    for (size_t i = 0; i < n; i++) d.in[i] = (float)(i % 17) - 3.0f;
    void *args[1] = {&d};
    alloy_cpu_launch l;
    memset(&l, 0, sizeof l);
    l.args = args;
    l.grid[0] = d.w;
    l.grid[1] = d.h;
    l.grid[2] = 1;
    l.tg[0] = 8;
    l.tg[1] = 4;
    l.tg[2] = 1;
    for (int k = 0; k < 3; k++) l.groups[k] = (l.grid[k] + l.tg[k] - 1) / l.tg[k];
    l.svc = &alloy_cpu_sched_services;
    for (unsigned by = 0; by < l.groups[1]; by++)
        for (unsigned bx = 0; bx < l.groups[0]; bx++) {
            alloy_cpu_group g;
            memset(&g, 0, sizeof g);
            g.launch = &l;
            g.group_id[0] = bx;
            g.group_id[1] = by;
            g.size[0] = l.grid[0] - bx * l.tg[0] < l.tg[0] ? l.grid[0] - bx * l.tg[0] : l.tg[0];
            g.size[1] = l.grid[1] - by * l.tg[1] < l.tg[1] ? l.grid[1] - by * l.tg[1] : l.tg[1];
            g.size[2] = 1;
            char msg[512];
            CHECK_MSG(run_group(&g, k_tile, msg, sizeof msg) == ALLOY_OK, "%s", msg);
        }
    int bad = 0;
    for (unsigned y = 0; y < d.h; y++)
        for (unsigned x = 0; x < d.w; x++) {
            unsigned bx = x / 8, by = y / 4, x0 = bx * 8, y0 = by * 4;
            unsigned sx = d.w - x0 < 8 ? d.w - x0 : 8, sy = d.h - y0 < 4 ? d.h - y0 : 4;
            double s = 0;
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++) {
                    int xx = (int)x + dx, yy = (int)y + dy;
                    if (xx >= (int)x0 && yy >= (int)y0 && xx < (int)(x0 + sx) &&
                        yy < (int)(y0 + sy))
                        s += d.in[yy * d.w + xx];
                }
            /* lanes: L = lx + ly * 8; simdgroup = L / 32 = 0 for tg 8x4 */
            unsigned mask = 0;
            for (unsigned ly = 0; ly < sy; ly++)
                for (unsigned lx = 0; lx < sx; lx++) mask |= 1u << (lx + ly * 8);
            unsigned lane = (x - x0) + (y - y0) * 8;
            if (fabs(d.out[y * d.w + x] - s) > 1e-5 || d.mask[y * d.w + x] != mask ||
                d.lane[y * d.w + x] != lane)
                bad++;
        }
    CHECK_MSG(bad == 0, "%d wrong elements", bad);
    free(d.in);
    free(d.out);
    free(d.mask);
    free(d.lane);
}

/* ---- divergence ----------------------------------------------------------- */

/* Lanes 0-15 of each simdgroup wait at a SIMD barrier, lanes 16-31 at a
 * threadgroup barrier: neither can complete. */
static void k_diverge(const alloy_cpu_group *g, unsigned lx, unsigned ly, unsigned lz) {
    unsigned i = linear(g, lx, ly, lz);
    if (i % 32 < 16) SIMD_BARRIER(g);
    else BARRIER(g);
}

/* Threads that return early leave the barrier: not a deadlock. */
static void k_leave(const alloy_cpu_group *g, unsigned lx, unsigned ly, unsigned lz) {
    int *out = g->launch->args[0];
    unsigned i = linear(g, lx, ly, lz);
    if (i >= 32) return;
    BARRIER(g);
    BARRIER(g);
    out[i] = 1;
}

/* Threads 0..9 run one more SIMD exchange than the rest of simdgroup 0,
 * which then wait at a barrier. */
static void k_simd_mismatch(const alloy_cpu_group *g, unsigned lx, unsigned ly, unsigned lz) {
    unsigned i = linear(g, lx, ly, lz);
    SIMD_BARRIER(g);
    if (i < 10) SIMD_BARRIER(g);
    BARRIER(g);
}

static void test_divergence(void) {
    char msg[1024];
    alloy_cpu_launch l;
    alloy_cpu_group g;
    one_group(&l, &g, 64, NULL);
    g.group_id[0] = 1;
    alloy_status st = run_group(&g, k_diverge, msg, sizeof msg);
    CHECK(st == ALLOY_ERROR_LAUNCH);
    CHECK_MSG(strstr(msg, "divergence in kernel 'test_kernel'") != NULL, "%s", msg);
    CHECK_MSG(strstr(msg, "threadgroup (1,0,0)") != NULL, "%s", msg);
    CHECK_MSG(strstr(msg, "threads 0-15 wait at a SIMD operation (simdgroup 0)") != NULL, "%s",
              msg);
    CHECK_MSG(strstr(msg, "threads 16-31 wait at a threadgroup barrier") != NULL, "%s", msg);
    CHECK_MSG(strstr(msg, "threads 48-63 wait at a threadgroup barrier") != NULL, "%s", msg);

    one_group(&l, &g, 40, NULL);
    st = run_group(&g, k_simd_mismatch, msg, sizeof msg);
    CHECK(st == ALLOY_ERROR_LAUNCH);
    CHECK_MSG(strstr(msg, "threads 0-9 wait at a SIMD operation (simdgroup 0)") != NULL, "%s",
              msg);
    CHECK_MSG(strstr(msg, "threads 10-39 wait at a threadgroup barrier") != NULL, "%s", msg);

    /* The scheduler is usable again after an abandoned group. */
    int out[100] = {0};
    void *args[1] = {out};
    one_group(&l, &g, 100, args);
    st = run_group(&g, k_leave, msg, sizeof msg);
    CHECK_MSG(st == ALLOY_OK, "%s", msg);
    for (int i = 0; i < 100; i++) CHECK(out[i] == (i < 32));
}

/* ---- groups on the pool, from several host threads ----------------------- */

typedef struct pool_launch {
    alloy_cpu_launch l;
    double *out; /* per group: n * ROUNDS + 1 values */
    unsigned n;
    int failures;
    pthread_mutex_t mu;
} pool_launch;

static void k_pool(const alloy_cpu_group *g, unsigned lx, unsigned ly, unsigned lz) {
    const pool_launch *p = g->launch->args[0];
    size_t per = (size_t)p->n * ROUNDS + 1;
    /* Reuse the neighbour kernel with an output offset per group. */
    alloy_cpu_launch l2 = *g->launch;
    void *args2[1] = {p->out + per * g->group_id[0]};
    l2.args = args2;
    alloy_cpu_group g2 = *g;
    g2.launch = &l2;
    k_neighbours(&g2, lx, ly, lz);
}

static int pool_task(void *ctx, size_t index) {
    pool_launch *p = ctx;
    alloy_cpu_group g;
    memset(&g, 0, sizeof g);
    g.launch = &p->l;
    g.group_id[0] = (unsigned)index;
    g.size[0] = p->n;
    g.size[1] = g.size[2] = 1;
    char msg[256];
    alloy_status st = run_group(&g, k_pool, msg, sizeof msg);
    if (st != ALLOY_OK) {
        pthread_mutex_lock(&p->mu);
        p->failures++;
        pthread_mutex_unlock(&p->mu);
        return 1;
    }
    return 0;
}

static void *host_thread(void *arg) {
    int *ok = arg;
    const unsigned n = 77, groups = 24;
    size_t per = (size_t)n * ROUNDS + 1;
    pool_launch p;
    memset(&p, 0, sizeof p);
    pthread_mutex_init(&p.mu, NULL);
    p.n = n;
    p.out = calloc(per * groups, sizeof *p.out);
    void *args[1] = {&p};
    p.l.args = args;
    p.l.grid[0] = n * groups;
    p.l.grid[1] = p.l.grid[2] = 1;
    p.l.tg[0] = n;
    p.l.tg[1] = p.l.tg[2] = 1;
    p.l.groups[0] = groups;
    p.l.groups[1] = p.l.groups[2] = 1;
    p.l.svc = &alloy_cpu_sched_services;
    double *ref = calloc(per, sizeof *ref);
    neighbours_reference(n, ref);
    *ok = 1;
    for (int rep = 0; rep < 5; rep++) {
        memset(p.out, 0, per * groups * sizeof *p.out);
        alloy_cpu_pool_run(groups, 1, pool_task, &p);
        if (p.failures) *ok = 0;
        for (unsigned gi = 0; gi < groups; gi++)
            for (size_t i = 0; i < per; i++)
                if (fabs(p.out[gi * per + i] - ref[i]) > 1e-9 * (1 + fabs(ref[i]))) *ok = 0;
    }
    free(ref);
    free(p.out);
    pthread_mutex_destroy(&p.mu);
    return NULL;
}

static void test_pool_concurrent(void) {
    enum { HOSTS = 8 };
    pthread_t t[HOSTS];
    int ok[HOSTS];
    for (int i = 0; i < HOSTS; i++) CHECK(pthread_create(&t[i], NULL, host_thread, &ok[i]) == 0);
    for (int i = 0; i < HOSTS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < HOSTS; i++) CHECK_MSG(ok[i], "host thread %d", i);
    fprintf(stderr, "  pool: %d threads\n", alloy_cpu_pool_threads());
}

/* A job that stops early skips the items not started yet. */
static int stop_task(void *ctx, size_t index) {
    int *count = ctx;
    __atomic_fetch_add(count, 1, __ATOMIC_RELAXED);
    return index == 0;
}

static void test_pool_stop(void) {
    int count = 0;
    alloy_cpu_pool_run(100000, 1, stop_task, &count);
    CHECK(count >= 1 && count < 100000);
}

/* ---- barrier cost (printed, never checked) -------------------------------- */

enum { BENCH_BARRIERS = 2000 };
static void k_bench_barrier(const alloy_cpu_group *g, unsigned lx, unsigned ly, unsigned lz) {
    (void)lx, (void)ly, (void)lz;
    for (int k = 0; k < BENCH_BARRIERS; k++) BARRIER(g);
}
static void k_bench_simd(const alloy_cpu_group *g, unsigned lx, unsigned ly, unsigned lz) {
    (void)ly, (void)lz;
    float v = (float)lx;
    for (int k = 0; k < BENCH_BARRIERS; k++) {
        unsigned active, lane;
        const unsigned char *s =
            g->launch->svc->simd_exchange(g->sched, &v, sizeof v, &active, &lane);
        float x;
        memcpy(&x, s + ((lane + 1) % 32) * ALLOY_CPU_SIMD_SLOT, sizeof x);
        v = x;
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_barrier_cost(void) {
    const unsigned sizes[] = {32, 256, 1024};
    for (size_t k = 0; k < 3; k++) {
        alloy_cpu_launch l;
        alloy_cpu_group g;
        one_group(&l, &g, sizes[k], NULL);
        char msg[256];
        run_group(&g, k_bench_barrier, msg, sizeof msg); /* warm up the stacks */
        double t0 = now_s();
        CHECK(run_group(&g, k_bench_barrier, msg, sizeof msg) == ALLOY_OK);
        double t1 = now_s();
        CHECK(run_group(&g, k_bench_simd, msg, sizeof msg) == ALLOY_OK);
        double t2 = now_s();
        double per = (double)sizes[k] * BENCH_BARRIERS;
        fprintf(stderr, "  %4u threads: barrier %.1f ns, simd_exchange %.1f ns per thread\n",
                sizes[k], (t1 - t0) * 1e9 / per, (t2 - t1) * 1e9 / per);
    }
}

int main(void) {
    RUN(test_barrier_ordering);
    RUN(test_simd_exchange);
    RUN(test_simd_barrier);
    RUN(test_2d_partial);
    RUN(test_divergence);
    RUN(test_pool_concurrent);
    RUN(test_pool_stop);
    RUN(test_barrier_cost);
    return harness_finish();
}
