/* cmd_bench_nn.c — `alloy bench nn`: the fused ops of alloy/nn.h (soft-cap,
 * RMSNorm, LayerNorm, their per-head forms, the causal depthwise convolution
 * with K = 4), forward and backward, against the device-to-device copy
 * bandwidth measured in the same run.
 *
 * Sizes: 64 M elements — (8, 8192, 1024) for soft-cap, the row norms (D =
 * 1024) and the convolution (C = 1024 channels), (2, 8192, 4096) with heads of
 * 512 for the per-head norms (xLSTM 7B's 8 heads of DHHV 512); float32,
 * bfloat16 and float16. --quick and the CPU: 128 K elements. Labels "<op>
 * <f32|bf16|f16> <fwd|bwd>" (--only "rmsnorm bf16", --only bwd).
 *
 * Calls: forward y = op(x); backward from x and dy, every gradient a training
 * step needs — soft-cap dx; the norms dx and dweight (and dbias for LayerNorm
 * with a bias); the convolution dx, dw and db. The norms' "bwd stats" rows:
 * the backward from the statistics the _stats forward saved (computed once,
 * untimed), as a framework's training step runs it. Every output array is given,
 * so nothing is allocated per call (the norms' and the convolution's
 * backward allocate their small float32 reduction scratch).
 *
 * Bytes (what the op must move, each operand read once and each result
 * written once; the reduction scratch is not counted), N elements of x of
 * E bytes, D the last dimension, C and K the convolution's channels and taps:
 *   soft-cap   fwd 2 N E                 bwd 3 N E
 *   RMSNorm    fwd (2 N + D) E           bwd (3 N + 2 D) E        (w; dw)
 *   LayerNorm  fwd (2 N + 2 D) E         bwd (3 N + 3 D) E        (w, b; dw, db)
 *              without bias one D less in each; bwd stats: 8 bytes more a
 *              group (its float32 mean and rstd)
 *   conv1d     fwd (2 N + C K + C) E     bwd (3 N + 2 C K + C) E  (w, b; dw, db)
 *
 * Copy: for each byte count, a copy of half as many bytes (read and written:
 * the same total), as the faster of cuMemcpyDtoDAsync (the driver, loaded at
 * run time) and a kernel moving 16 bytes per thread, on CUDA; of memcpy and
 * that kernel on the CPU (bench_copy.c). "% copy" is the op's GB/s over the
 * copy's; on a GPU the median over 5 rounds, each the op's batches then the
 * copy's right after (bench_copy_share_interleaved: the GPU's clocks drift
 * over a run, by up to 2 points of "% copy" between two runs of one kernel),
 * and the time and copy columns are that median's.
 *
 * Error: max |out - ref| / max |ref| of y (dx for the backward) over 16
 * rows spread over x (whole rows, every group of a per-head norm; for the
 * convolution 16 (batch, time) rows) against float64 on the host from the
 * same inputs. Timing: bench_time_calls after one timed call sizes the
 * batches (about 50 ms each). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

enum { NN_SOFTCAP, NN_RMS, NN_LN, NN_CONV };
enum { SAMPLE_ROWS = 16 };

static const double CAP = 15.0, EPS = 1e-5;

typedef struct nn_size {
    const char *name;
    int kind;
    int64_t d0, d1, d2; /* x: (d0, d1, d2) = (B, S, D) or (B, S, C) */
    int64_t head_dim;   /* norms: 0 = the whole row */
    int bias;           /* LayerNorm, conv1d */
    int K;              /* conv1d */
    int quick;
} nn_size;

static const nn_size NN_SIZES[] = {
    {"softcap", NN_SOFTCAP, 8, 8192, 1024, 0, 0, 0, 0},
    {"rmsnorm", NN_RMS, 8, 8192, 1024, 0, 0, 0, 0},
    {"layernorm", NN_LN, 8, 8192, 1024, 0, 1, 0, 0},
    {"rmsnorm-mh", NN_RMS, 2, 8192, 4096, 512, 0, 0, 0},
    {"layernorm-mh", NN_LN, 2, 8192, 4096, 512, 0, 0, 0},
    {"conv1d k4", NN_CONV, 8, 8192, 1024, 0, 1, 4, 0},
    {"softcap", NN_SOFTCAP, 2, 256, 256, 0, 0, 0, 1},
    {"rmsnorm", NN_RMS, 2, 256, 256, 0, 0, 0, 1},
    {"layernorm", NN_LN, 2, 256, 256, 0, 1, 0, 1},
    {"rmsnorm-mh", NN_RMS, 2, 64, 1024, 128, 0, 0, 1},
    {"layernorm-mh", NN_LN, 2, 64, 1024, 128, 0, 0, 1},
    {"conv1d k4", NN_CONV, 2, 256, 256, 0, 1, 4, 1},
};

/* ---- the ops ------------------------------------------------------------------------------ */

typedef struct nn_ctx {
    const nn_size *z;
    int bwd;
    alloy_array *x, *dy, *w, *b, *out, *dw, *db, *stats; /* stats: the norms' bwd stats rows */
    alloy_stream *s;
} nn_ctx;

static int run_op(void *p) {
    nn_ctx *c = p;
    const nn_size *z = c->z;
    alloy_array *out = c->out, *dw = c->dw, *db = c->db;
    alloy_status st;
    switch (z->kind) {
    case NN_SOFTCAP:
        st = c->bwd ? alloy_nn_softcap_backward(c->x, c->dy, CAP, c->s, &out) : alloy_nn_softcap(c->x, CAP, c->s, &out);
        break;
    case NN_RMS:
        st = c->stats ? alloy_nn_rms_norm_backward_stats(c->x, c->w, c->dy, c->stats, z->head_dim, c->s, &out, &dw)
             : c->bwd ? alloy_nn_rms_norm_backward(c->x, c->w, c->dy, z->head_dim, EPS, c->s, &out, &dw)
                      : alloy_nn_rms_norm(c->x, c->w, z->head_dim, EPS, c->s, &out);
        break;
    case NN_LN:
        st = c->stats ? alloy_nn_layer_norm_backward_stats(c->x, c->w, c->dy, c->stats, z->head_dim, c->s, &out, &dw,
                                                           z->bias ? &db : NULL)
             : c->bwd ? alloy_nn_layer_norm_backward(c->x, c->w, c->dy, z->head_dim, EPS, c->s, &out, &dw,
                                                     z->bias ? &db : NULL)
                      : alloy_nn_layer_norm(c->x, c->w, c->b, z->head_dim, EPS, c->s, &out);
        break;
    default:
        st = c->bwd ? alloy_nn_causal_conv1d_backward(c->x, c->w, NULL, c->dy, c->s, &out, &dw, z->bias ? &db : NULL,
                                                      NULL)
                    : alloy_nn_causal_conv1d(c->x, c->w, c->b, NULL, c->s, &out, NULL);
        break;
    }
    return st != ALLOY_OK;
}

/* Bytes the op must move (the file's comment); bwd 2: from saved statistics. */
static double op_bytes(const nn_size *z, int bwd, size_t es) {
    const double N = (double)(z->d0 * z->d1 * z->d2), D = (double)z->d2, E = (double)es;
    if (bwd == 2) return op_bytes(z, 1, es) + 8.0 * N / (double)(z->head_dim ? z->head_dim : z->d2);
    switch (z->kind) {
    case NN_SOFTCAP: return (bwd ? 3 : 2) * N * E;
    case NN_RMS: return (bwd ? 3 * N + 2 * D : 2 * N + D) * E;
    case NN_LN: return (bwd ? 3 * N + (z->bias ? 3 : 2) * D : 2 * N + (z->bias ? 2 : 1) * D) * E;
    default: {
        const double ck = D * z->K;
        return (bwd ? 3 * N + 2 * ck + (z->bias ? D : 0) : 2 * N + ck + (z->bias ? D : 0)) * E;
    }
    }
}

/* The float64 reference of one row r (d2 elements) of the output into ref. */
static void reference_row(const nn_size *z, int bwd, alloy_dtype dt, const void *x, const void *dy, const void *w,
                          const void *b, int64_t r, double *ref) {
    const size_t es = alloy_dtype_size(dt);
    const int64_t D = z->d2;
#define AT(p, e) cli_to_double(dt, (const char *)(p) + (size_t)(e)*es)
    if (z->kind == NN_SOFTCAP) {
        for (int64_t e = 0; e < D; e++) {
            const double t = tanh(AT(x, r * D + e) / CAP);
            ref[e] = bwd ? AT(dy, r * D + e) * (1 - t * t) : CAP * t;
        }
    } else if (z->kind == NN_RMS || z->kind == NN_LN) {
        const int64_t g = z->head_dim ? z->head_dim : D;
        for (int64_t g0 = 0; g0 < D; g0 += g) {
            const int64_t o = r * D + g0;
            double mean = 0, var = 0;
            if (z->kind == NN_LN) {
                for (int64_t e = 0; e < g; e++) mean += AT(x, o + e);
                mean /= (double)g;
            }
            for (int64_t e = 0; e < g; e++) var += (AT(x, o + e) - mean) * (AT(x, o + e) - mean);
            const double rstd = 1 / sqrt(var / (double)g + EPS);
            double mg = 0, mgx = 0;
            for (int64_t e = 0; e < g; e++) {
                const double xh = (AT(x, o + e) - mean) * rstd;
                if (!bwd) {
                    ref[g0 + e] = xh * AT(w, g0 + e) + (b ? AT(b, g0 + e) : 0);
                } else {
                    const double gg = AT(dy, o + e) * AT(w, g0 + e);
                    mg += gg;
                    mgx += gg * xh;
                }
            }
            if (!bwd) continue;
            mg /= (double)g;
            mgx /= (double)g;
            for (int64_t e = 0; e < g; e++) {
                const double xh = (AT(x, o + e) - mean) * rstd, gg = AT(dy, o + e) * AT(w, g0 + e);
                ref[g0 + e] = rstd * (gg - (z->kind == NN_LN ? mg : 0) - xh * mgx);
            }
        }
    } else { /* conv1d: row r = (batch, time) */
        const int64_t S = z->d1, K = z->K, bt = r / S, t = r % S;
        for (int64_t c = 0; c < D; c++) {
            double acc = !bwd && b ? AT(b, c) : 0;
            for (int64_t j = 0; j < K; j++) {
                const int64_t tt = bwd ? t + K - 1 - j : t - K + 1 + j;
                if (tt < 0 || tt >= S) continue;
                acc += AT(w, c * K + j) * AT(bwd ? dy : x, (bt * S + tt) * D + c);
            }
            ref[c] = acc;
        }
    }
#undef AT
}

static double sample_error(const nn_size *z, int bwd, alloy_dtype dt, const void *x, const void *dy, const void *w,
                           const void *b, const void *out) {
    const int64_t rows = z->d0 * z->d1, D = z->d2;
    double *ref = malloc(sizeof(double) * (size_t)D);
    double emax = 0, rmax = 0;
    for (int s = 0; s < SAMPLE_ROWS; s++) {
        const int64_t r = (rows - 1) * s / (SAMPLE_ROWS - 1);
        reference_row(z, bwd, dt, x, dy, w, b, r, ref);
        for (int64_t e = 0; e < D; e++) {
            const double d = fabs(cli_to_double(dt, (const char *)out + (size_t)(r * D + e) * alloy_dtype_size(dt)) - ref[e]);
            if (!(d <= emax)) emax = d; /* NaN wins */
            rmax = fmax(rmax, fabs(ref[e]));
        }
    }
    free(ref);
    return rmax > 0 ? emax / rmax : emax;
}

static int bench_one(alloy_device *dev, alloy_stream *s, const nn_size *z, alloy_dtype dt, int bwd, const char *label,
                     bench_copy *copy, int json, uint64_t *rng) {
    const int is_cuda = alloy_device_backend(dev) == ALLOY_BACKEND_CUDA;
    const int64_t N = z->d0 * z->d1 * z->d2, D = z->d2;
    const size_t es = alloy_dtype_size(dt);
    const int64_t sx[3] = {z->d0, z->d1, z->d2}, sd[1] = {D}, sw[2] = {D, z->K};
    const int64_t nw = z->kind == NN_CONV ? D * z->K : D;
    void *hx = malloc((size_t)N * es), *hdy = malloc((size_t)N * es), *hout = malloc((size_t)N * es);
    void *hw = malloc((size_t)nw * es), *hb = malloc((size_t)D * es);
    if (!hx || !hdy || !hout || !hw || !hb) {
        free(hx), free(hdy), free(hout), free(hw), free(hb);
        return cli_error("out of host memory for %s", label);
    }
    bench_fill_random(dt, N, hx, rng);
    if (bwd) bench_fill_random(dt, N, hdy, rng);
    bench_fill_random(dt, nw, hw, rng);
    bench_fill_random(dt, D, hb, rng);
    nn_ctx c;
    memset(&c, 0, sizeof c);
    c.z = z;
    c.bwd = bwd;
    c.s = s;
    const int has_w = z->kind != NN_SOFTCAP, has_b = z->bias;
    alloy_status st = alloy_array_from_host(dev, dt, 3, sx, hx, &c.x);
    if (st == ALLOY_OK && bwd) st = alloy_array_from_host(dev, dt, 3, sx, hdy, &c.dy);
    if (st == ALLOY_OK && has_w) st = alloy_array_from_host(dev, dt, z->kind == NN_CONV ? 2 : 1, z->kind == NN_CONV ? sw : sd, hw, &c.w);
    if (st == ALLOY_OK && has_b) st = alloy_array_from_host(dev, dt, 1, sd, hb, &c.b);
    if (st == ALLOY_OK) st = alloy_array_new(dev, dt, 3, sx, &c.out);
    if (st == ALLOY_OK && bwd && has_w) st = alloy_array_new(dev, dt, z->kind == NN_CONV ? 2 : 1, z->kind == NN_CONV ? sw : sd, &c.dw);
    if (st == ALLOY_OK && bwd && has_b) st = alloy_array_new(dev, dt, 1, sd, &c.db);
    /* bwd stats: the statistics the forward saves, computed once here (into out, overwritten by dx) */
    if (st == ALLOY_OK && bwd == 2)
        st = z->kind == NN_RMS ? alloy_nn_rms_norm_stats(c.x, c.w, z->head_dim, EPS, s, &c.out, &c.stats)
                               : alloy_nn_layer_norm_stats(c.x, c.w, c.b, z->head_dim, EPS, s, &c.out, &c.stats);
    const double bytes = op_bytes(z, bwd, es);
    double t = -1, err = -1, share = -1;
    if (st == ALLOY_OK) {
        double t1 = -1;
        if (run_op(&c) == 0 && alloy_stream_synchronize(s) == ALLOY_OK) { /* compiles */
            const double t0 = bench_now_s();
            if (run_op(&c) == 0 && alloy_stream_synchronize(s) == ALLOY_OK) t1 = bench_now_s() - t0;
        }
        if (t1 >= 0) {
            int per = (int)(0.05 / (t1 > 1e-6 ? t1 : 1e-6));
            if (per < 1) per = 1;
            if (per > 1000) per = 1000;
            /* on a GPU the op's share of the copy in rounds alternating with the copy (bench.h) */
            if (is_cuda && !bench_once)
                share = bench_copy_share_interleaved(copy, dev, s, (size_t)bytes, run_op, &c, per, 5, &t);
            else
                t = bench_time_calls(run_op, &c, s, per, is_cuda ? 9 : 3);
        }
    }
    int failed = 0;
    if (t < 0) {
        fprintf(stderr, "alloy: bench nn %s: %s\n", label, alloy_last_error());
        failed = 1;
    } else {
        if (alloy_array_copy_to_host(c.out, hout, (size_t)N * es) == ALLOY_OK)
            err = sample_error(z, bwd, dt, hx, hdy, has_w ? hw : NULL, has_b ? hb : NULL, hout);
        double rk = -1, ro = -1;
        double cr = bench_copy_rate(copy, dev, s, (size_t)bytes, &rk, &ro);
        if (share > 0) cr = bytes / t / share; /* the copy rate of the op's own rounds */
        char size[64];
        if (z->head_dim)
            snprintf(size, sizeof size, "%lldx%lldx%lld h%lld", (long long)z->d0, (long long)z->d1, (long long)z->d2,
                     (long long)z->head_dim);
        else
            snprintf(size, sizeof size, "%lldx%lldx%lld", (long long)z->d0, (long long)z->d1, (long long)z->d2);
        const double rate = bytes / t;
        if (json) {
            printf("{\"op\": \"nn\", \"case\": \"%s\", \"size\": \"%s\", \"device\": \"%s\", \"time_s\": %.6g, "
                   "\"bytes\": %.0f, \"bytes_per_s\": %.6g, ",
                   label, size, alloy_device_name(dev), t, bytes, rate);
            bench_copy_json(dev, rate, cr, rk, ro);
            printf("\"error\": %.3g, \"peer\": null}\n", err);
        } else {
            char share[16];
            printf("%-28s %-22s %9.3f ms %9.1f GB/s %9.1f GB/s %8s %10.2e\n", label, size, t * 1e3, rate / 1e9,
                   cr / 1e9, bench_copy_share(rate, cr, share, sizeof share), err);
        }
        fflush(stdout);
    }
    alloy_array *all[] = {c.x, c.dy, c.w, c.b, c.out, c.dw, c.db, c.stats};
    for (size_t e = 0; e < sizeof all / sizeof all[0]; e++) alloy_array_free(all[e]);
    free(hx), free(hdy), free(hout), free(hw), free(hb);
    return failed;
}

int bench_nn(alloy_device *dev, int quick, const char *only, int json) {
    const int is_cuda = alloy_device_backend(dev) == ALLOY_BACKEND_CUDA;
    alloy_stream *s = NULL;
    if (alloy_stream_default(dev, &s) != ALLOY_OK) return cli_alloy_error(ALLOY_ERROR_INTERNAL);
    bench_copy copy;
    if (!bench_copy_init(&copy, dev) && is_cuda && !json)
        printf("copy: the driver's cuMemcpyDtoDAsync is unavailable; the copy kernel only\n");
    if (!json)
        printf("%-28s %-22s %12s %14s %14s %8s %10s\n", "nn", "size", "time", "rate", "copy", "% copy", "error f64");
    static const alloy_dtype DTS[3] = {ALLOY_FLOAT32, ALLOY_BFLOAT16, ALLOY_FLOAT16};
    static const char *const DTN[3] = {"f32", "bf16", "f16"};
    int failures = 0;
    uint64_t rng = 0x6e6e5u;
    for (size_t zi = 0; zi < sizeof NN_SIZES / sizeof *NN_SIZES; zi++) {
        const nn_size *z = &NN_SIZES[zi];
        if ((quick || !is_cuda) != z->quick) continue; /* --quick and the CPU: the small rows */
        const int norm = z->kind == NN_RMS || z->kind == NN_LN;
        for (int d = 0; d < 3; d++)
            for (int bwd = 0; bwd < (norm ? 3 : 2); bwd++) {
                char label[64];
                snprintf(label, sizeof label, "%s %s %s", z->name, DTN[d], bwd == 2 ? "bwd stats" : bwd ? "bwd" : "fwd");
                if (!bench_label_wanted(label, only)) continue;
                failures += bench_one(dev, s, z, DTS[d], bwd, label, &copy, json, &rng);
            }
    }
    bench_copy_free(&copy);
    return failures ? CLI_ERROR : CLI_OK;
}
