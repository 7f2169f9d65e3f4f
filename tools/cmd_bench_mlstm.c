/* cmd_bench_mlstm.c — `alloy bench mlstm`: the mLSTM cell of
 * include/alloy/mlstm.h at the shapes of mlstm_kernels' benchmarks.
 *
 * Rows: the chunkwise forward (alloy_mlstm_chunkwise) at xLSTM 7B's head
 * shape (NH = 8, DHQK = 256, DHHV = 512) for B = 8, S = 8192 (bf16, f16 and
 * f32 inputs), S = 8000 (not a chunk multiple) and B = 1, S = 65536, at the TFLA
 * paper's shape (NH = 16, DHQK = 128, DHHV = 256), and a packed batch of 64
 * sequences of random lengths 1..2048 (cu_seqlens) next to one dense batch of
 * the same token count; the recurrent step (alloy_mlstm_step, bf16 inputs,
 * float32 state updated in place) at B = 1, 16, 256 and 1024, and with the
 * new states into other arrays ("new states": one launch) and with C in place
 * and n, m into other arrays ("C in place": one launch) at B = 1 and 1024,
 * and beside them the roof of the in-place traffic ("step roof: in-place
 * update": bench_inplace over the state's bytes, each word read and written
 * back — what any kernel updating C in place can reach against the copy);
 * the backward
 * and forward+backward rows are cmd_bench_mlstm_bwd.c's. --quick: small
 * shapes only (the CPU's rows).
 *
 * Columns: time (bench_time_calls: median of timed batches of back-to-back
 * calls around one synchronisation, outputs given so nothing is allocated
 * per call), rate — TFLOP/s by mlstm_kernels' count for the chunkwise form
 * (per token and head 4 DHQK DHHV + L (DHQK + DHHV), mlstm_anchors §3.5), and
 * GB/s of the step's state traffic (C and n read and written, float32:
 * 8 B NH (DHQK DHHV + DHQK) bytes) with its share of the device-to-device
 * copy of as many bytes measured in the same run ("% copy": bench_copy.c,
 * the reference of `alloy bench nn`) — the time per token (the batch's
 * tokens, all heads: the packed, B = 1 and dense rows compare on it) and
 * the error against a float64 run of the recurrence: max |h - h64| /
 * max |h64| over the first (sequence, head) and its first CHECK_TOKENS
 * tokens (the reference is serial on the host; the kernel's arithmetic is
 * the same for every sequence). There is no peer in C: mlstm_kernels (TFLA)
 * is Triton, timed from Python. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

enum { CHECK_TOKENS = 256 };

typedef struct cw_size {
    const char *label;
    alloy_dtype dt;
    int64_t B, NH, S, DK, DV;
    int chunk;
    int varlen; /* B sequences of random lengths 1..S packed in (1, NH, T, D) */
    int quick;
    int tf32; /* float32 products as one TF32 pass (ALLOY_PRECISION_DEFAULT, TFLA's precision) */
} cw_size;

static const cw_size CW_SIZES[] = {
    {"chunkwise bf16 7B", ALLOY_BFLOAT16, 8, 8, 8192, 256, 512, 64, 0, 0, 0},
    {"chunkwise bf16 7B S=8000", ALLOY_BFLOAT16, 8, 8, 8000, 256, 512, 64, 0, 0, 0},
    {"chunkwise bf16 7B c128", ALLOY_BFLOAT16, 8, 8, 8192, 256, 512, 128, 0, 0, 0},
    /* float16, and float32 at precision DEFAULT ("tf32"): float16 tiles with power-of-two exponents behind a
     * pre-pass (docs/mlstm.md, "The float32 forward on float16 tiles") */
    {"chunkwise f16 7B", ALLOY_FLOAT16, 8, 8, 8192, 256, 512, 64, 0, 0, 0},
    {"chunkwise f32 7B", ALLOY_FLOAT32, 8, 8, 8192, 256, 512, 64, 0, 0, 0},
    {"chunkwise f32 7B tf32", ALLOY_FLOAT32, 8, 8, 8192, 256, 512, 64, 0, 0, 1},
    {"chunkwise bf16 7B B=1", ALLOY_BFLOAT16, 1, 8, 65536, 256, 512, 64, 0, 0, 0},
    {"chunkwise bf16 paper", ALLOY_BFLOAT16, 8, 16, 8192, 128, 256, 64, 0, 0, 0},
    {"chunkwise bf16 dense 64k", ALLOY_BFLOAT16, 32, 8, 2048, 256, 512, 64, 0, 0, 0},
    {"varlen bf16 64 seqs", ALLOY_BFLOAT16, 64, 8, 2048, 256, 512, 64, 1, 0, 0},
    {"chunkwise f32 small", ALLOY_FLOAT32, 1, 2, 512, 64, 64, 64, 0, 1, 0},
    {"chunkwise f32 small tf32", ALLOY_FLOAT32, 1, 2, 512, 64, 64, 64, 0, 1, 1},
    {"chunkwise bf16 small", ALLOY_BFLOAT16, 1, 2, 512, 64, 64, 64, 0, 1, 0},
    {"chunkwise f16 small", ALLOY_FLOAT16, 1, 2, 512, 64, 64, 64, 0, 1, 0},
    {"varlen f32 small", ALLOY_FLOAT32, 4, 2, 256, 64, 64, 64, 1, 1, 0},
    {"varlen f16 small", ALLOY_FLOAT16, 4, 2, 256, 64, 64, 64, 1, 1, 0},
};

typedef struct st_size {
    const char *label;
    int64_t B, NH, DK, DV;
    int quick;
    int fresh; /* 1: the new states into other arrays (one launch) instead of in place (two); 2: C in place,
                * n and m into other arrays (one launch: a decoding loop that alternates two n, m pairs);
                * 3: not the step but the roof of its in-place traffic, bench_inplace over the same bytes */
} st_size;

static const st_size ST_SIZES[] = {
    {"step bf16 7B", 1, 8, 256, 512, 1, 0},
    {"step bf16 7B", 16, 8, 256, 512, 0, 0},
    {"step bf16 7B", 256, 8, 256, 512, 0, 0},
    {"step bf16 7B", 1024, 8, 256, 512, 0, 0},
    {"step bf16 7B new states", 1, 8, 256, 512, 1, 1},
    {"step bf16 7B new states", 1024, 8, 256, 512, 0, 1},
    {"step bf16 7B C in place", 1, 8, 256, 512, 1, 2},
    {"step bf16 7B C in place", 1024, 8, 256, 512, 0, 2},
    {"step roof: in-place update", 1, 8, 256, 512, 1, 3},
    {"step roof: in-place update", 1024, 8, 256, 512, 0, 3},
};

/* ---- the float64 reference ------------------------------------------------------ */

static double logsig(double x) { return x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x)); }

/* h (S, DV) of one (sequence, head) from zero states; inputs as double. */
static void recurrence(int64_t S, int64_t DK, int64_t DV, const double *q, const double *k, const double *v,
                       const double *ig, const double *fg, double *h) {
    double *C = calloc((size_t)(DK * DV), sizeof(double)), *N = calloc((size_t)DK, sizeof(double)), M = 0;
    const double scale = 1.0 / sqrt((double)DK);
    for (int64_t t = 0; t < S; t++) {
        const double lf = logsig(fg[t]), mn = fmax(lf + M, ig[t]), fa = exp(lf + M - mn), ia = exp(ig[t] - mn);
        double qn = 0;
        for (int64_t a = 0; a < DK; a++) {
            N[a] = fa * N[a] + ia * k[t * DK + a];
            qn += q[t * DK + a] * scale * N[a];
        }
        const double den = fmax(fabs(qn), exp(-mn)) + 1e-6;
        for (int64_t b = 0; b < DV; b++) h[t * DV + b] = 0;
        for (int64_t a = 0; a < DK; a++) {
            const double qa = q[t * DK + a] * scale, ka = ia * k[t * DK + a];
            for (int64_t b = 0; b < DV; b++) {
                double *x = &C[a * DV + b];
                *x = fa * *x + ka * v[t * DV + b];
                h[t * DV + b] += qa * *x;
            }
        }
        for (int64_t b = 0; b < DV; b++) h[t * DV + b] /= den;
        M = mn;
    }
    free(C), free(N);
}

/* element e of raw (dtype dt) as double */
static double value_at(alloy_dtype dt, const void *raw, int64_t e) {
    double x = 0;
    cli_convert(dt, (const char *)raw + (size_t)e * alloy_dtype_size(dt), ALLOY_FLOAT64, &x, 1);
    return x;
}

/* ---- chunkwise rows -------------------------------------------------------------- */

typedef struct cw_ctx {
    alloy_array *q, *k, *v, *i, *f, *cu, *h;
    int chunk;
    alloy_precision precision;
    alloy_stream *s;
} cw_ctx;

static int run_chunkwise(void *p) {
    cw_ctx *x = p;
    alloy_array *h = x->h;
    return alloy_mlstm_chunkwise_with_precision(x->q, x->k, x->v, x->i, x->f, NULL, NULL, NULL, x->cu, x->chunk, 1e-6,
                                                x->precision, x->s, &h, NULL, NULL, NULL) != ALLOY_OK;
}

static int bench_chunkwise(alloy_device *dev, alloy_stream *s, int quick, const char *only, int json) {
    const int is_cuda = alloy_device_backend(dev) == ALLOY_BACKEND_CUDA;
    int failures = 0;
    uint64_t rng = 0x51ab1e5u;
    for (size_t zi = 0; zi < sizeof CW_SIZES / sizeof *CW_SIZES; zi++) {
        const cw_size *z = &CW_SIZES[zi];
        if ((quick || !is_cuda) != z->quick) continue; /* --quick and the CPU: the small rows */
        if (!bench_label_wanted(z->label, only)) continue;
        /* dense: (B, NH, S, D); packed: B sequences in (1, NH, T, D), T the sum of their lengths */
        int64_t rows = z->B, T = z->S;
        int32_t *cu = NULL;
        if (z->varlen) {
            cu = malloc(sizeof(int32_t) * (size_t)(z->B + 1));
            cu[0] = 0;
            for (int64_t b = 0; b < z->B; b++) {
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                cu[b + 1] = cu[b] + 1 + (int32_t)(rng % (uint64_t)z->S);
            }
            rows = 1;
            T = cu[z->B];
        }
        const int64_t nq = rows * z->NH * T * z->DK, nv = rows * z->NH * T * z->DV, ng = rows * z->NH * T;
        const size_t es = alloy_dtype_size(z->dt);
        void *hq = malloc((size_t)nq * es), *hk = malloc((size_t)nq * es), *hv = malloc((size_t)nv * es);
        void *hi = malloc((size_t)ng * es), *hf = malloc((size_t)ng * es), *hh = malloc((size_t)nv * es);
        if (!hq || !hk || !hv || !hi || !hf || !hh) return cli_error("out of host memory for %s", z->label);
        bench_fill_random(z->dt, nq, hq, &rng);
        bench_fill_random(z->dt, nq, hk, &rng);
        bench_fill_random(z->dt, nv, hv, &rng);
        bench_fill_random(z->dt, ng, hi, &rng);
        bench_fill_random(z->dt, ng, hf, &rng);
        const int64_t sqk[4] = {rows, z->NH, T, z->DK}, sv[4] = {rows, z->NH, T, z->DV}, sg[3] = {rows, z->NH, T};
        const int64_t scu[1] = {z->B + 1};
        cw_ctx x;
        memset(&x, 0, sizeof x);
        x.chunk = z->chunk;
        x.precision = z->tf32 ? ALLOY_PRECISION_DEFAULT : ALLOY_PRECISION_HIGH;
        x.s = s;
        alloy_status st = alloy_array_from_host(dev, z->dt, 4, sqk, hq, &x.q);
        if (st == ALLOY_OK) st = alloy_array_from_host(dev, z->dt, 4, sqk, hk, &x.k);
        if (st == ALLOY_OK) st = alloy_array_from_host(dev, z->dt, 4, sv, hv, &x.v);
        if (st == ALLOY_OK) st = alloy_array_from_host(dev, z->dt, 3, sg, hi, &x.i);
        if (st == ALLOY_OK) st = alloy_array_from_host(dev, z->dt, 3, sg, hf, &x.f);
        if (st == ALLOY_OK) st = alloy_array_new(dev, z->dt, 4, sv, &x.h);
        if (st == ALLOY_OK && cu) st = alloy_array_from_host(dev, ALLOY_INT32, 1, scu, cu, &x.cu);
        double t = -1, err = -1;
        const double tokens = (double)(rows * T) * (double)z->NH;
        const double flops = tokens * (4.0 * (double)z->DK * (double)z->DV + (double)z->chunk * (double)(z->DK + z->DV));
        if (st == ALLOY_OK) {
            int per = (int)(0.05 / (flops / 1e14 > 1e-6 ? flops / 1e14 : 1e-6));
            if (!is_cuda) per = 1;
            if (per < 1) per = 1;
            if (per > 100) per = 100;
            t = bench_time_calls(run_chunkwise, &x, s, per, is_cuda ? 9 : 3);
        }
        if (t < 0) {
            fprintf(stderr, "alloy: bench mlstm %s: %s\n", z->label, alloy_last_error());
            failures++;
        } else if (alloy_array_copy_to_host(x.h, hh, (size_t)nv * es) == ALLOY_OK) {
            /* the first (sequence, head): row 0 of head 0, its first CHECK_TOKENS tokens */
            const int64_t S0 = z->varlen ? cu[1] : T, n = S0 < CHECK_TOKENS ? S0 : CHECK_TOKENS;
            double *dq = malloc(sizeof(double) * (size_t)(n * z->DK)), *dk = malloc(sizeof(double) * (size_t)(n * z->DK));
            double *dv = malloc(sizeof(double) * (size_t)(n * z->DV)), *di = malloc(sizeof(double) * (size_t)n);
            double *df = malloc(sizeof(double) * (size_t)n), *dh = malloc(sizeof(double) * (size_t)(n * z->DV));
            for (int64_t e = 0; e < n * z->DK; e++) dq[e] = value_at(z->dt, hq, e), dk[e] = value_at(z->dt, hk, e);
            for (int64_t e = 0; e < n * z->DV; e++) dv[e] = value_at(z->dt, hv, e);
            for (int64_t e = 0; e < n; e++) di[e] = value_at(z->dt, hi, e), df[e] = value_at(z->dt, hf, e);
            recurrence(n, z->DK, z->DV, dq, dk, dv, di, df, dh);
            double emax = 0, rmax = 0;
            for (int64_t e = 0; e < n * z->DV; e++) {
                emax = fmax(emax, fabs(value_at(z->dt, hh, e) - dh[e]));
                rmax = fmax(rmax, fabs(dh[e]));
            }
            err = rmax > 0 ? emax / rmax : emax;
            free(dq), free(dk), free(dv), free(di), free(df), free(dh);
        }
        char size[96];
        snprintf(size, sizeof size, "%s%lldx%lldx%lld %lld/%lld c%d", z->varlen ? "T=" : "", (long long)(z->varlen ? 1 : z->B),
                 (long long)z->NH, (long long)T, (long long)z->DK, (long long)z->DV, z->chunk);
        if (t >= 0) {
            if (json)
                printf("{\"op\": \"mlstm\", \"case\": \"%s\", \"size\": \"%s\", \"device\": \"%s\", \"time_s\": %.6g, "
                       "\"flops_per_s\": %.6g, \"tokens_per_s\": %.6g, \"error\": %.3g, \"peer\": null}\n",
                       z->label, size, alloy_device_name(dev), t, flops / t, (double)(rows * T) / t, err);
            else
            {
                const double r = flops / t;
                printf("%-30s %-30s %9.3f ms %8.1f %s %9.1f ns %10.2e\n", z->label, size, t * 1e3,
                       r > 1e12 ? r / 1e12 : r / 1e9, r > 1e12 ? "TF/s" : "GF/s", t / (double)(rows * T) * 1e9, err);
            }
            fflush(stdout);
        }
        alloy_array *all[] = {x.q, x.k, x.v, x.i, x.f, x.h, x.cu};
        for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
        free(hq), free(hk), free(hv), free(hi), free(hf), free(hh), free(cu);
    }
    return failures;
}

/* ---- step rows --------------------------------------------------------------------- */

typedef struct st_ctx {
    alloy_array *q, *k, *v, *i, *f, *c, *n, *m, *h;
    alloy_array *co, *no, *mo; /* the new states: c, n, m themselves or other arrays */
    alloy_stream *s;
} st_ctx;

static int run_step(void *p) {
    st_ctx *x = p;
    alloy_array *h = x->h, *c = x->co, *n = x->no, *m = x->mo;
    return alloy_mlstm_step(x->q, x->k, x->v, x->i, x->f, x->c, x->n, x->m, 1e-6, x->s, &h, &c, &n, &m) != ALLOY_OK;
}

/* Times op (moving `bytes` a call) and prints its row: on a GPU its share of the copy in rounds alternating
 * with it, as `alloy bench nn`. 1 on failure. */
static int step_row(alloy_device *dev, alloy_stream *s, bench_copy *copy, const st_size *z, double bytes, bench_fn op,
                    void *ctx, int json) {
    const int is_cuda = alloy_device_backend(dev) == ALLOY_BACKEND_CUDA;
    int per = is_cuda ? (int)(0.02 / (bytes / 2.5e12 > 2e-6 ? bytes / 2.5e12 : 2e-6)) : 3;
    if (per < 1) per = 1;
    if (per > 2000) per = 2000;
    double t = -1, share = -1;
    if (is_cuda && !bench_once) share = bench_copy_share_interleaved(copy, dev, s, (size_t)bytes, op, ctx, per, 5, &t);
    else t = bench_time_calls(op, ctx, s, per, is_cuda ? 9 : 3);
    char size[64];
    snprintf(size, sizeof size, "B=%lld %lldx%lld/%lld", (long long)z->B, (long long)z->NH, (long long)z->DK,
             (long long)z->DV);
    if (t < 0) {
        fprintf(stderr, "alloy: bench mlstm %s %s: %s\n", z->label, size, alloy_last_error());
        return 1;
    }
    double rk = -1, ro = -1;
    double cr = bench_copy_rate(copy, dev, s, (size_t)bytes, &rk, &ro);
    if (share > 0) cr = bytes / t / share; /* the copy rate of the op's own rounds */
    if (json) {
        printf("{\"op\": \"mlstm\", \"case\": \"%s\", \"size\": \"%s\", \"device\": \"%s\", "
               "\"time_s\": %.6g, \"bytes\": %.0f, \"bytes_per_s\": %.6g, ",
               z->label, size, alloy_device_name(dev), t, bytes, bytes / t);
        bench_copy_json(dev, bytes / t, cr, rk, ro);
        printf("\"peer\": null}\n");
    } else {
        char sh[16];
        printf("%-30s %-30s %9.4f ms %8.1f GB/s  %6s copy\n", z->label, size, t * 1e3, bytes / t / 1e9,
               bench_copy_share(bytes / t, cr, sh, sizeof sh));
    }
    fflush(stdout);
    return 0;
}

static int bench_step(alloy_device *dev, alloy_stream *s, int quick, const char *only, int json) {
    const int is_cuda = alloy_device_backend(dev) == ALLOY_BACKEND_CUDA;
    bench_copy copy;
    bench_copy_init(&copy, dev);
    int failures = 0;
    uint64_t rng = 0x5739u;
    for (size_t zi = 0; zi < sizeof ST_SIZES / sizeof *ST_SIZES; zi++) {
        const st_size *z = &ST_SIZES[zi];
        if ((quick || !is_cuda) && !z->quick) continue;
        if (!bench_label_wanted(z->label, only)) continue;
        const int64_t B = z->B, NH = z->NH, DK = z->DK, DV = z->DV;
        /* the state traffic: C and n read and written, float32 */
        const double bytes = 8.0 * (double)(B * NH) * (double)(DK * DV + DK);
        if (z->fresh == 3) {
            bench_inplace ip;
            if (bench_inplace_init(&ip, dev, s, (size_t)bytes) == ALLOY_OK)
                failures += step_row(dev, s, &copy, z, bytes, bench_inplace_run, &ip, json);
            else
                failures++, fprintf(stderr, "alloy: bench mlstm %s: %s\n", z->label, alloy_last_error());
            bench_inplace_free(&ip);
            continue;
        }
        const int64_t sqk[3] = {B, NH, DK}, sv[3] = {B, NH, DV}, sg[3] = {B, NH, 1}, sc[4] = {B, NH, DK, DV};
        const alloy_dtype dt = ALLOY_BFLOAT16;
        void *hq = malloc((size_t)(B * NH * DK) * 2), *hk = malloc((size_t)(B * NH * DK) * 2);
        void *hv = malloc((size_t)(B * NH * DV) * 2), *hg = malloc((size_t)(B * NH) * 2);
        bench_fill_random(dt, B * NH * DK, hq, &rng);
        bench_fill_random(dt, B * NH * DK, hk, &rng);
        bench_fill_random(dt, B * NH * DV, hv, &rng);
        bench_fill_random(dt, B * NH, hg, &rng);
        st_ctx x;
        memset(&x, 0, sizeof x);
        x.s = s;
        alloy_status st = alloy_array_from_host(dev, dt, 3, sqk, hq, &x.q);
        if (st == ALLOY_OK) st = alloy_array_from_host(dev, dt, 3, sqk, hk, &x.k);
        if (st == ALLOY_OK) st = alloy_array_from_host(dev, dt, 3, sv, hv, &x.v);
        if (st == ALLOY_OK) st = alloy_array_from_host(dev, dt, 3, sg, hg, &x.i);
        if (st == ALLOY_OK) st = alloy_array_from_host(dev, dt, 3, sg, hg, &x.f);
        if (st == ALLOY_OK) st = alloy_array_new(dev, dt, 3, sv, &x.h);
        if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 4, sc, &x.c);
        if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 3, sqk, &x.n);
        if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 3, sg, &x.m);
        if (st == ALLOY_OK) st = alloy_array_fill(x.c, 0);
        if (st == ALLOY_OK) st = alloy_array_fill(x.n, 0);
        if (st == ALLOY_OK) st = alloy_array_fill(x.m, 0);
        x.co = x.c, x.no = x.n, x.mo = x.m;
        if (z->fresh) {
            x.co = z->fresh == 2 ? x.c : NULL;
            x.no = x.mo = NULL;
            if (st == ALLOY_OK && z->fresh == 1) st = alloy_array_new(dev, ALLOY_FLOAT32, 4, sc, &x.co);
            if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 3, sqk, &x.no);
            if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 3, sg, &x.mo);
        }
        if (st == ALLOY_OK) failures += step_row(dev, s, &copy, z, bytes, run_step, &x, json);
        else failures++, fprintf(stderr, "alloy: bench mlstm %s: %s\n", z->label, alloy_last_error());
        if (z->fresh) {
            if (z->fresh == 1) alloy_array_free(x.co);
            alloy_array_free(x.no), alloy_array_free(x.mo);
        }
        alloy_array *all[] = {x.q, x.k, x.v, x.i, x.f, x.h, x.c, x.n, x.m};
        for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
        free(hq), free(hk), free(hv), free(hg);
    }
    bench_copy_free(&copy);
    return failures;
}

int bench_mlstm(alloy_device *dev, int quick, const char *only, int json) {
    alloy_stream *s = NULL;
    if (alloy_stream_default(dev, &s) != ALLOY_OK) return cli_alloy_error(ALLOY_ERROR_INTERNAL);
    if (!json)
        printf("%-30s %-30s %12s %13s %12s %10s\n", "mlstm", "size (B x NH x S, DHQK/DHHV)", "time", "rate",
               "per token", "error f64");
    int failures = bench_chunkwise(dev, s, quick, only, json);
    failures += bench_mlstm_backward(dev, s, quick, only, json);
    failures += bench_step(dev, s, quick, only, json);
    return failures ? CLI_ERROR : CLI_OK;
}
