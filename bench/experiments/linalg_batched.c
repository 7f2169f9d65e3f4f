/* linalg_batched.c — times the batched factorizations (alloy_cholesky,
 * alloy_lu_factor, alloy_solve with one right-hand side) on batches of
 * float32 matrices, the way alloy bench times (wall clock around
 * back-to-back calls and one synchronisation, median of 9 batches after a
 * warm-up), with outputs given so nothing is allocated per call. A first
 * measurement of issue 9's kernels; bench/experiments/linalg_batched_torch.py
 * times torch.linalg on the same shapes. With arguments OP N BATCH (OP one of
 * cholesky, lu_factor, solve, eigh, svd) it runs that one case a few times
 * (a driver for ncu); `cholesky N BATCH PATH` instead times that case on one
 * kernel path (alloy_cholesky_with_path: auto, small, warp, reg, tiled,
 * blocked_smem, blocked_device), so paths compare in one call. Not part of
 * the build; on the GPU machine:
 *   cc -O2 -Iinclude -Isrc bench/experiments/linalg_batched.c build-gpu/liballoy.a -lpthread -ldl -lm -o /tmp/lb
 *   ALLOY_DEVICE=cuda /tmp/lb [OP N BATCH [PATH]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloy/alloy.h"
#include "alloy/linalg.h"
#include "ops/linalg/cholesky_internal.h"

#define OK(x) do { alloy_status s_ = (x); if (s_) { fprintf(stderr, "%s: %s\n", #x, alloy_last_error()); exit(1); } } while (0)

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct ctx {
    int op;
    alloy_cholesky_path path;
    alloy_array *spd, *gen, *b, *out, *lu, *piv, *info, *x, *w, *v, *u, *sv, *vh;
    alloy_stream *s;
} ctx;

static void call(ctx *c) {
    if (c->op == 0) OK(alloy_cholesky_with_path(c->spd, NULL, c->path, c->s, &c->out, &c->info));
    else if (c->op == 1) OK(alloy_lu_factor(c->gen, c->s, &c->lu, &c->piv, &c->info));
    else if (c->op == 2) OK(alloy_solve(c->gen, c->b, c->s, &c->x, &c->info));
    else if (c->op == 3) OK(alloy_eigh(c->spd, NULL, c->s, &c->w, &c->v, &c->info));
    else OK(alloy_svd(c->gen, NULL, c->s, &c->u, &c->sv, &c->vh, &c->info));
}

int main(int argc, char **argv) {
    alloy_device *dev;
    OK(alloy_device_get("auto", &dev));
    printf("device: %s\n", alloy_device_description(dev));
    int64_t sizes[][2] = {{10000, 8}, {10000, 16}, {10000, 32}, {10000, 64}, {10000, 128}, {1000, 256}};
    const char *names[5] = {"cholesky", "lu_factor", "solve (k=1)", "eigh", "svd"};
    int op0 = 0, op1 = 3, nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    alloy_cholesky_path path = ALLOY_CHOLESKY_AUTO;
    int timed = argc < 4;
    if (argc >= 5) { /* a Cholesky kernel path, timed */
        static const struct {
            const char *name;
            alloy_cholesky_path path;
        } paths[] = {{"auto", ALLOY_CHOLESKY_AUTO},   {"small", ALLOY_CHOLESKY_SMALL},
                     {"warp", ALLOY_CHOLESKY_WARP},   {"reg", ALLOY_CHOLESKY_REG},
                     {"tiled", ALLOY_CHOLESKY_TILED}, {"blocked_smem", ALLOY_CHOLESKY_BLOCKED_SMEM},
                     {"blocked_device", ALLOY_CHOLESKY_BLOCKED_DEVICE}};
        size_t i = 0;
        while (i < sizeof paths / sizeof paths[0] && strcmp(argv[4], paths[i].name) != 0) i++;
        if (i == sizeof paths / sizeof paths[0]) { fprintf(stderr, "unknown cholesky path %s\n", argv[4]); return 2; }
        path = paths[i].path;
        timed = 1;
    }
    if (argc >= 4) { /* one case, run a few times (or timed on a path) */
        const char *ops[5] = {"cholesky", "lu_factor", "solve", "eigh", "svd"};
        for (op0 = 0; op0 < 5 && strcmp(argv[1], ops[op0]) != 0; op0++) {}
        if (op0 == 5) { fprintf(stderr, "unknown op %s\n", argv[1]); return 2; }
        op1 = op0 + 1;
        sizes[0][1] = atoll(argv[2]);
        sizes[0][0] = atoll(argv[3]);
        nsizes = 1;
    }
    srand(7);
    for (int si = 0; si < nsizes; si++) {
        const int64_t B = sizes[si][0], n = sizes[si][1];
        float *h = malloc((size_t)(B * n * n) * sizeof *h), *g = malloc((size_t)(B * n * n) * sizeof *g);
        float *hb = malloc((size_t)(B * n) * sizeof *hb);
        for (int64_t i = 0; i < B * n * n; i++) g[i] = (float)rand() / RAND_MAX - 0.5f;
        for (int64_t i = 0; i < B * n; i++) hb[i] = (float)rand() / RAND_MAX - 0.5f;
        /* SPD: diagonally dominant symmetric */
        for (int64_t m = 0; m < B; m++)
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < n; j++) {
                    float v = g[m * n * n + (i < j ? i * n + j : j * n + i)];
                    h[m * n * n + i * n + j] = i == j ? (float)n + 1.0f : v;
                }
        int64_t sh[3] = {B, n, n}, sb[3] = {B, n, 1}, sv[1] = {B};
        ctx c;
        memset(&c, 0, sizeof c);
        c.path = path;
        OK(alloy_array_from_host(dev, ALLOY_FLOAT32, 3, sh, h, &c.spd));
        OK(alloy_array_from_host(dev, ALLOY_FLOAT32, 3, sh, g, &c.gen));
        OK(alloy_array_from_host(dev, ALLOY_FLOAT32, 3, sb, hb, &c.b));
        OK(alloy_array_new(dev, ALLOY_FLOAT32, 3, sh, &c.out));
        OK(alloy_array_new(dev, ALLOY_FLOAT32, 3, sh, &c.lu));
        OK(alloy_array_new(dev, ALLOY_FLOAT32, 3, sb, &c.x));
        OK(alloy_array_new(dev, ALLOY_INT32, 1, sv, &c.info));
        int64_t sp[2] = {B, n};
        OK(alloy_array_new(dev, ALLOY_INT32, 2, sp, &c.piv));
        OK(alloy_array_new(dev, ALLOY_FLOAT32, 2, sp, &c.w));
        OK(alloy_array_new(dev, ALLOY_FLOAT32, 2, sp, &c.sv));
        OK(alloy_array_new(dev, ALLOY_FLOAT32, 3, sh, &c.v));
        OK(alloy_array_new(dev, ALLOY_FLOAT32, 3, sh, &c.u));
        OK(alloy_array_new(dev, ALLOY_FLOAT32, 3, sh, &c.vh));
        OK(alloy_stream_default(dev, &c.s));
        for (int op = op0; op < op1; op++) {
            c.op = op;
            call(&c);
            OK(alloy_stream_synchronize(c.s));
            if (!timed) {
                for (int r = 0; r < 3; r++) call(&c);
                OK(alloy_stream_synchronize(c.s));
                continue;
            }
            double t0 = now_s();
            call(&c);
            OK(alloy_stream_synchronize(c.s));
            double t1 = now_s() - t0;
            int per = (int)(0.05 / (t1 > 1e-6 ? t1 : 1e-6)) + 1;
            if (per > 200) per = 200;
            double ts[9];
            for (int r = 0; r < 9; r++) {
                t0 = now_s();
                for (int i = 0; i < per; i++) call(&c);
                OK(alloy_stream_synchronize(c.s));
                ts[r] = (now_s() - t0) / per;
            }
            qsort(ts, 9, sizeof ts[0], cmp);
            printf("%-12s %6lld x %3lldx%-3lld %10.4f ms%s%s\n", names[op], (long long)B, (long long)n, (long long)n,
                   ts[4] * 1e3, argc >= 5 ? "  path " : "", argc >= 5 ? argv[4] : "");
            fflush(stdout);
        }
        alloy_array *arrs[] = {c.spd, c.gen, c.b, c.out, c.lu, c.x, c.info, c.piv, c.w, c.sv, c.v, c.u, c.vh};
        for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) alloy_array_free(arrs[i]);
        free(h);
        free(g);
        free(hb);
    }
    return 0;
}
