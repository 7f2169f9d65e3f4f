/* cmd_bench_mlstm_bwd.c — the training rows of `alloy bench mlstm`: the
 * chunkwise forward followed by its backward (alloy_mlstm_chunkwise, then
 * alloy_mlstm_chunkwise_backward with a given dh, no initial states, no
 * final-state cotangents), as a training step calls them.
 *
 * Shapes: xLSTM 7B's heads (NH = 8, DHQK = 256, DHHV = 512) at B = 8,
 * S = 8192 (bf16 and f32 inputs) and B = 1, S = 65536 (bf16), the default
 * chunk (64); --quick and the CPU: (1, 2, 512, 64/64) in f32 and bf16.
 *
 * Two rows per shape (three in bfloat16): "bwd ..." times the backward alone
 * (the forward's inputs and dh given, every gradient array given),
 * "fwd+bwd ..." the forward and the backward back to back (h and the
 * gradients given); bfloat16 and the "default" shapes also "fwd+bwd kept
 * ...": the forward keeping its chunk record and the backward from it
 * (alloy_mlstm_chunkwise_keep, alloy_mlstm_chunkwise_backward_kept). The
 * "f32 ... default" shapes run both at precision DEFAULT (the forward on
 * float16 tiles, the backward with ALLOY_MLSTM_BACKWARD_CHUNKED_DEFAULT; on
 * the CPU the forward's products are exact float32 ones, so the kept row's
 * record is a float32 one and its backward CHUNKED); the other float32 rows are the
 * forward at HIGH and the backward's AUTO choice. Timing: one
 * warm-up call (compiles), one timed call; a call over a second (a quarter of
 * a second on the CPU) is reported from that call alone, else the median of
 * bench_time_calls' batches (3 when a call takes over 0.2 s, else 9). After
 * such a slow backward the fwd+bwd row skips its warm-up call (both kernels
 * are compiled by then).
 *
 * FLOP count (model FLOPs, the convention of training benchmarks): the
 * forward's count is mlstm_kernels' (per token and head
 * 4 DHQK DHHV + L (DHQK + DHHV), the chunkwise rows' count), the backward's
 * twice that (every product of the forward has two in its gradient), so
 * fwd+bwd is three times the forward's; what an implementation recomputes is
 * not counted. TFLA's rows (bench/bench_mlstm_tfla.py) use the same counts,
 * so the rate ratios are the time ratios.
 *
 * Error, each row from its own run's gradients: the gradients of the first
 * (sequence, head) over its first CHECK_TOKENS tokens against alloy's
 * float64 backward on the CPU device
 * (tests/test_mlstm_backward.c checks that one against finite differences).
 * The dh of that (sequence, head) is zero after those tokens, so its
 * gradients there are exactly those of the sequence cut after CHECK_TOKENS
 * tokens; the measure is the largest over dq, dk, dv, di, df of
 * max |g - g64| / max |g64|. Without a CPU backend (no C++ compiler) the
 * column is "-" and stderr says why. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

enum { BWD_CHECK_TOKENS = 256 };

typedef struct bw_size {
    const char *label; /* the rows are "bwd <label>" and "fwd+bwd <label>" */
    alloy_dtype dt;
    int64_t B, NH, S, DK, DV;
    int chunk;
    int quick;
    int def; /* float32 at precision DEFAULT: the forward's and the backward's (CHUNKED_DEFAULT) float16 tiles */
} bw_size;

static const bw_size BW_SIZES[] = {
    {"bf16 7B", ALLOY_BFLOAT16, 8, 8, 8192, 256, 512, 0, 0, 0},
    {"f32 7B", ALLOY_FLOAT32, 8, 8, 8192, 256, 512, 0, 0, 0},
    {"f32 7B default", ALLOY_FLOAT32, 8, 8, 8192, 256, 512, 0, 0, 1},
    {"bf16 7B B=1", ALLOY_BFLOAT16, 1, 8, 65536, 256, 512, 0, 0, 0},
    {"f32 small", ALLOY_FLOAT32, 1, 2, 512, 64, 64, 0, 1, 0},
    {"f32 small default", ALLOY_FLOAT32, 1, 2, 512, 64, 64, 0, 1, 1},
    {"bf16 small", ALLOY_BFLOAT16, 1, 2, 512, 64, 64, 0, 1, 0},
};

typedef struct bw_ctx {
    alloy_array *q, *k, *v, *i, *f, *h, *dh;
    alloy_array *dq, *dk, *dv, *di, *df;
    int chunk, def;
    alloy_stream *s;
} bw_ctx;

static int run_backward(void *p) {
    bw_ctx *x = p;
    alloy_array *dq = x->dq, *dk = x->dk, *dv = x->dv, *di = x->di, *df = x->df;
    return alloy_mlstm_chunkwise_backward_with_method(
               x->q, x->k, x->v, x->i, x->f, NULL, NULL, NULL, NULL, x->dh, NULL, NULL, NULL, x->chunk, 1e-6,
               x->def ? ALLOY_MLSTM_BACKWARD_CHUNKED_DEFAULT : ALLOY_MLSTM_BACKWARD_AUTO, x->s, &dq, &dk, &dv, &di,
               &df, NULL, NULL, NULL) != ALLOY_OK;
}

static int run_forward_backward(void *p) {
    bw_ctx *x = p;
    alloy_array *h = x->h;
    if (alloy_mlstm_chunkwise_with_precision(x->q, x->k, x->v, x->i, x->f, NULL, NULL, NULL, NULL, x->chunk, 1e-6,
                                             x->def ? ALLOY_PRECISION_DEFAULT : ALLOY_PRECISION_HIGH, x->s, &h, NULL,
                                             NULL, NULL) != ALLOY_OK)
        return 1;
    return run_backward(p);
}

/* The forward keeping its chunk record, then the backward from it
 * (alloy_mlstm_chunkwise_keep, alloy_mlstm_chunkwise_backward_kept): the
 * record and the final states are freed once queued. */
static int run_forward_backward_kept(void *p) {
    bw_ctx *x = p;
    alloy_array *h = x->h, *c = NULL, *n = NULL, *m = NULL, *kept[ALLOY_MLSTM_KEPT] = {NULL};
    alloy_array *dq = x->dq, *dk = x->dk, *dv = x->dv, *di = x->di, *df = x->df;
    int bad = alloy_mlstm_chunkwise_keep(x->q, x->k, x->v, x->i, x->f, NULL, NULL, NULL, NULL, x->chunk, 1e-6,
                                         x->def ? ALLOY_PRECISION_DEFAULT : ALLOY_PRECISION_HIGH, x->s, &h, &c, &n, &m,
                                         kept) != ALLOY_OK;
    if (!bad)
        bad = alloy_mlstm_chunkwise_backward_kept(x->q, x->k, x->v, x->i, x->f, NULL, NULL, NULL, NULL, h, c, n, kept,
                                                  x->dh, NULL, NULL, NULL, x->chunk, 1e-6, x->s, &dq, &dk, &dv, &di,
                                                  &df, NULL, NULL, NULL) != ALLOY_OK;
    alloy_array *made[] = {c, n, m};
    for (size_t e = 0; e < sizeof made / sizeof made[0]; e++) alloy_array_free(made[e]);
    for (int e = 0; e < ALLOY_MLSTM_KEPT; e++) alloy_array_free(kept[e]);
    return bad;
}

/* Seconds per call, sized for slow calls (the file's comment); -1 on failure.
 * warm_up 0: the kernels are compiled already (a slow call is not repeated). */
static double time_call(bench_fn fn, void *ctx, alloy_stream *s, int is_cuda, int warm_up) {
    if (warm_up && (fn(ctx) || alloy_stream_synchronize(s) != ALLOY_OK)) return -1; /* compiles */
    const double t0 = bench_now_s();
    if (fn(ctx) || alloy_stream_synchronize(s) != ALLOY_OK) return -1;
    const double t1 = bench_now_s() - t0;
    if (t1 > (is_cuda ? 1.0 : 0.25)) return t1;
    int per = (int)(0.05 / (t1 > 1e-6 ? t1 : 1e-6));
    if (!is_cuda || per < 1) per = 1;
    if (per > 100) per = 100;
    return bench_time_calls(fn, ctx, s, per, !is_cuda ? 3 : t1 > 0.2 ? 3 : 9);
}

/* The first n elements of raw (dtype dt) as a new float64 array of `shape` on cpu. */
static alloy_status f64_array(alloy_device *cpu, alloy_dtype dt, const void *raw, int64_t n, int ndim,
                              const int64_t *shape, alloy_array **out) {
    double *d = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!d) return ALLOY_ERROR_OUT_OF_MEMORY;
    cli_convert(dt, raw, ALLOY_FLOAT64, d, n);
    alloy_status st = alloy_array_from_host(cpu, ALLOY_FLOAT64, ndim, shape, d, out);
    free(d);
    return st;
}

/* The float64 reference of the file's comment: the gradients of the first
 * (sequence, head) over its first n tokens, from host inputs (dtype dt, full
 * arrays; the slice is their first elements), into ref[0..4] (malloc'd, q k v
 * i f's). Nonzero when it could not run (why on stderr). */
static int reference_grads(const bw_size *z, int64_t n, int chunk, void *const in[6], double *ref[5]) {
    for (int e = 0; e < 5; e++) ref[e] = NULL;
    alloy_device *cpu = NULL;
    if (alloy_device_get("cpu", &cpu) != ALLOY_OK) {
        fprintf(stderr, "alloy: bench mlstm: no float64 reference (the CPU device: %s)\n", alloy_last_error());
        return 1;
    }
    const int64_t sqk[4] = {1, 1, n, z->DK}, sv[4] = {1, 1, n, z->DV}, sg[3] = {1, 1, n};
    const int64_t count[6] = {n * z->DK, n * z->DK, n * z->DV, n, n, n * z->DV}; /* q k v i f dh */
    const int nds[6] = {4, 4, 4, 3, 3, 4};
    const int64_t *shapes[6] = {sqk, sqk, sv, sg, sg, sv};
    alloy_array *a[6] = {NULL}, *g[5] = {NULL};
    alloy_status st = ALLOY_OK;
    for (int e = 0; e < 6 && st == ALLOY_OK; e++) st = f64_array(cpu, z->dt, in[e], count[e], nds[e], shapes[e], &a[e]);
    if (st == ALLOY_OK)
        st = alloy_mlstm_chunkwise_backward(a[0], a[1], a[2], a[3], a[4], NULL, NULL, NULL, NULL, a[5], NULL, NULL, NULL,
                                            chunk, 1e-6, NULL, &g[0], &g[1], &g[2], &g[3], &g[4], NULL, NULL, NULL);
    for (int e = 0; e < 5 && st == ALLOY_OK; e++) {
        ref[e] = malloc(sizeof(double) * (size_t)(count[e] > 0 ? count[e] : 1));
        st = ref[e] ? alloy_array_copy_to_host(g[e], ref[e], sizeof(double) * (size_t)count[e])
                    : ALLOY_ERROR_OUT_OF_MEMORY;
    }
    if (st != ALLOY_OK) {
        fprintf(stderr, "alloy: bench mlstm: no float64 reference for %s: %s\n", z->label, alloy_last_error());
        for (int e = 0; e < 5; e++) free(ref[e]), ref[e] = NULL;
    }
    for (int e = 0; e < 6; e++) alloy_array_free(a[e]);
    for (int e = 0; e < 5; e++) alloy_array_free(g[e]);
    return st != ALLOY_OK;
}

/* The error measure of the file's comment for one row's gradients: the
 * device arrays ga[0..4] copied to the host buffers grads[0..4] (their full
 * size cnt[e] elements of dtype dt), their first slice against ref. -1 when
 * there is no reference or a copy failed. */
static double row_error(const bw_size *z, int64_t n, double *const ref[5], alloy_array *const ga[5],
                        void *const grads[5], const int64_t cnt[5]) {
    if (!ref[0]) return -1;
    const int64_t count[5] = {n * z->DK, n * z->DK, n * z->DV, n, n};
    const size_t es = alloy_dtype_size(z->dt);
    double worst = 0;
    for (int e = 0; e < 5 && worst >= 0; e++) {
        const int64_t m = count[e];
        double *got = malloc(sizeof(double) * (size_t)(m > 0 ? m : 1));
        if (!got || alloy_array_copy_to_host(ga[e], grads[e], (size_t)cnt[e] * es) != ALLOY_OK) {
            worst = -1;
        } else {
            cli_convert(z->dt, grads[e], ALLOY_FLOAT64, got, m);
            double emax = 0, rmax = 0;
            for (int64_t j = 0; j < m; j++) {
                const double d = fabs(got[j] - ref[e][j]);
                if (!(d <= emax)) emax = d; /* NaN wins */
                rmax = fmax(rmax, fabs(ref[e][j]));
            }
            const double r = rmax > 0 ? emax / rmax : emax;
            if (!(r <= worst)) worst = r;
        }
        free(got);
    }
    return worst;
}

static void print_row(const char *label, const char *size, alloy_device *dev, double t, double flops, double tokens,
                      double err, int json) {
    if (json) {
        printf("{\"op\": \"mlstm\", \"case\": \"%s\", \"size\": \"%s\", \"device\": \"%s\", \"time_s\": %.6g, "
               "\"flops_per_s\": %.6g, \"tokens_per_s\": %.6g, \"error\": ",
               label, size, alloy_device_name(dev), t, flops / t, tokens / t);
        if (err >= 0) printf("%.3g", err);
        else printf("null");
        printf(", \"peer\": null}\n");
    } else {
        const double r = flops / t;
        char e[16];
        if (err >= 0) snprintf(e, sizeof e, "%.2e", err);
        else snprintf(e, sizeof e, "-");
        printf("%-30s %-30s %9.3f ms %8.1f %s %9.1f ns %10s\n", label, size, t * 1e3, r > 1e12 ? r / 1e12 : r / 1e9,
               r > 1e12 ? "TF/s" : "GF/s", t / tokens * 1e9, e);
    }
    fflush(stdout);
}

int bench_mlstm_backward(alloy_device *dev, alloy_stream *s, int quick, const char *only, int json) {
    const int is_cuda = alloy_device_backend(dev) == ALLOY_BACKEND_CUDA;
    int failures = 0;
    uint64_t rng = 0xb4c3a2du;
    for (size_t zi = 0; zi < sizeof BW_SIZES / sizeof *BW_SIZES; zi++) {
        const bw_size *z = &BW_SIZES[zi];
        if ((quick || !is_cuda) != z->quick) continue; /* --quick and the CPU: the small rows */
        char lb[48], lfb[48], lfk[48];
        snprintf(lb, sizeof lb, "bwd %s", z->label);
        snprintf(lfb, sizeof lfb, "fwd+bwd %s", z->label);
        snprintf(lfk, sizeof lfk, "fwd+bwd kept %s", z->label);
        const int want_b = bench_label_wanted(lb, only), want_fb = bench_label_wanted(lfb, only);
        /* the kept record's row where the backward is the chunk-parallel one (bfloat16, float32 at DEFAULT) */
        const int want_fk = (z->dt == ALLOY_BFLOAT16 || z->def) && bench_label_wanted(lfk, only);
        if (!want_b && !want_fb && !want_fk) continue;
        const int chunk = z->chunk ? z->chunk : ALLOY_MLSTM_DEFAULT_CHUNK;
        const int64_t nq = z->B * z->NH * z->S * z->DK, nv = z->B * z->NH * z->S * z->DV, ng = z->B * z->NH * z->S;
        const size_t es = alloy_dtype_size(z->dt);
        const int64_t ncheck = z->S < BWD_CHECK_TOKENS ? z->S : BWD_CHECK_TOKENS;
        /* host: q k v i f dh, then the gradients dq dk dv di df */
        const int64_t cnt[11] = {nq, nq, nv, ng, ng, nv, nq, nq, nv, ng, ng};
        void *hbuf[11] = {NULL};
        int ok = 1;
        for (int e = 0; e < 11; e++) ok &= (hbuf[e] = malloc((size_t)cnt[e] * es)) != NULL;
        if (!ok) {
            for (int e = 0; e < 11; e++) free(hbuf[e]);
            return cli_error("out of host memory for %s", lfb);
        }
        for (int e = 0; e < 5; e++) bench_fill_random(z->dt, cnt[e], hbuf[e], &rng);
        memcpy(hbuf[5], hbuf[2], (size_t)nv * es); /* dh: v's values */
        /* dh of (sequence 0, head 0) is zero after the checked tokens (the error's slice) */
        memset((char *)hbuf[5] + (size_t)(ncheck * z->DV) * es, 0, (size_t)((z->S - ncheck) * z->DV) * es);
        const int64_t sqk[4] = {z->B, z->NH, z->S, z->DK}, sv[4] = {z->B, z->NH, z->S, z->DV};
        const int64_t sg[3] = {z->B, z->NH, z->S};
        bw_ctx x;
        memset(&x, 0, sizeof x);
        x.chunk = chunk;
        x.def = z->def;
        x.s = s;
        alloy_status st = alloy_array_from_host(dev, z->dt, 4, sqk, hbuf[0], &x.q);
        if (st == ALLOY_OK) st = alloy_array_from_host(dev, z->dt, 4, sqk, hbuf[1], &x.k);
        if (st == ALLOY_OK) st = alloy_array_from_host(dev, z->dt, 4, sv, hbuf[2], &x.v);
        if (st == ALLOY_OK) st = alloy_array_from_host(dev, z->dt, 3, sg, hbuf[3], &x.i);
        if (st == ALLOY_OK) st = alloy_array_from_host(dev, z->dt, 3, sg, hbuf[4], &x.f);
        if (st == ALLOY_OK) st = alloy_array_from_host(dev, z->dt, 4, sv, hbuf[5], &x.dh);
        if (st == ALLOY_OK) st = alloy_array_new(dev, z->dt, 4, sv, &x.h);
        if (st == ALLOY_OK) st = alloy_array_new(dev, z->dt, 4, sqk, &x.dq);
        if (st == ALLOY_OK) st = alloy_array_new(dev, z->dt, 4, sqk, &x.dk);
        if (st == ALLOY_OK) st = alloy_array_new(dev, z->dt, 4, sv, &x.dv);
        if (st == ALLOY_OK) st = alloy_array_new(dev, z->dt, 3, sg, &x.di);
        if (st == ALLOY_OK) st = alloy_array_new(dev, z->dt, 3, sg, &x.df);
        const double tokens = (double)(z->B * z->S);
        const double fwd_flops = tokens * (double)z->NH *
                                 (4.0 * (double)z->DK * (double)z->DV + (double)chunk * (double)(z->DK + z->DV));
        double tb = -1, tfb = -1, tfk = -1, eb = -1, efb = -1, efk = -1;
        /* each row's error from its own run's gradients (the rows may take different paths) */
        alloy_array *ga[5] = {x.dq, x.dk, x.dv, x.di, x.df};
        double *ref[5] = {NULL};
        if (st == ALLOY_OK) reference_grads(z, ncheck, chunk, hbuf, ref);
        /* one forward first: compiles it, so no timed fwd+bwd call below includes a compile */
        if (st == ALLOY_OK && (want_fb || want_fk)) {
            alloy_array *h = x.h;
            st = alloy_mlstm_chunkwise(x.q, x.k, x.v, x.i, x.f, NULL, NULL, NULL, NULL, chunk, 1e-6, s, &h, NULL,
                                       NULL, NULL);
            if (st == ALLOY_OK) st = alloy_stream_synchronize(s);
        }
        if (st == ALLOY_OK && want_b && (tb = time_call(run_backward, &x, s, is_cuda, 1)) >= 0)
            eb = row_error(z, ncheck, ref, ga, hbuf + 6, cnt + 6);
        /* after a slow backward both kernels are compiled: no second warm-up call */
        if (st == ALLOY_OK && want_fb && (!want_b || tb >= 0) &&
            (tfb = time_call(run_forward_backward, &x, s, is_cuda, !(tb > (is_cuda ? 1.0 : 0.25)))) >= 0)
            efb = row_error(z, ncheck, ref, ga, hbuf + 6, cnt + 6);
        if (st == ALLOY_OK && want_fk && (!want_b || tb >= 0) && (!want_fb || tfb >= 0) &&
            (tfk = time_call(run_forward_backward_kept, &x, s, is_cuda, 1)) >= 0)
            efk = row_error(z, ncheck, ref, ga, hbuf + 6, cnt + 6);
        for (int e = 0; e < 5; e++) free(ref[e]);
        if ((want_b && tb < 0) || (want_fb && tfb < 0) || (want_fk && tfk < 0)) {
            fprintf(stderr, "alloy: bench mlstm %s: %s\n", want_b && tb < 0 ? lb : want_fb && tfb < 0 ? lfb : lfk,
                    alloy_last_error());
            failures++;
        } else {
            char size[96];
            snprintf(size, sizeof size, "%lldx%lldx%lld %lld/%lld c%d", (long long)z->B, (long long)z->NH,
                     (long long)z->S, (long long)z->DK, (long long)z->DV, chunk);
            if (want_b) print_row(lb, size, dev, tb, 2.0 * fwd_flops, tokens, eb, json);
            if (want_fb) print_row(lfb, size, dev, tfb, 3.0 * fwd_flops, tokens, efb, json);
            if (want_fk) print_row(lfk, size, dev, tfk, 3.0 * fwd_flops, tokens, efk, json);
        }
        alloy_array *all[] = {x.q, x.k, x.v, x.i, x.f, x.h, x.dh, x.dq, x.dk, x.dv, x.di, x.df};
        for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
        for (int e = 0; e < 11; e++) free(hbuf[e]);
    }
    return failures;
}
