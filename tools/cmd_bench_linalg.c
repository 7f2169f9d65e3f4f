/* cmd_bench_linalg.c — `alloy bench linalg`: the batched factorizations of
 * include/alloy/linalg.h on batches of n x n matrices.
 *
 * Per operation, dtype and size: the median time of timed batches of
 * back-to-back calls around one synchronisation (bench_time_calls, the method
 * of the matmul table), outputs given so nothing is allocated per call;
 * matrices per second; and the worst backward error over a sample of the
 * batch's matrices, computed on the host in double (long double for the
 * determinant's reference). On the CPU the peer is LAPACK loaded at run time
 * (OpenBLAS, the system's liblapack, or NumPy's bundled OpenBLAS with its
 * `scipy_`-prefixed ILP64 names; ALLOY_LAPACK=path chooses), called matrix by
 * matrix from one thread per core, with the same error measure and the ratio
 * peer time / alloy time. On CUDA the peer is torch.linalg, which C cannot
 * call: bench/bench_linalg_torch.py prints its rows.
 *
 * The eigh and svd rows run on fewer matrices for n >= 64 than the
 * other rows (slow_batch), the size column saying how many: on CUDA torch
 * loops over the batch there (about a millisecond per 64 x 64 matrix), and
 * bench_linalg_torch.py uses the same counts; on the CPU alloy's Jacobi
 * kernels take one thread per matrix and O(sweeps n^3) work each.
 *
 * Adding an operation: an entry in OPS with its call, the peer's call and
 * the error of one sample matrix. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"

/* ---- the LAPACK peer ------------------------------------------------------------ */

/* Fortran calling convention: every argument by address; each character
 * argument adds a hidden length (size_t) at the end. Integers are int32
 * (LP64) or int64 (ILP64: NumPy's bundled OpenBLAS), hence void * here. */
typedef void (*potrf_fn)(const char *uplo, const void *n, void *a, const void *lda, void *info, size_t);
typedef void (*getrf_fn)(const void *m, const void *n, void *a, const void *lda, void *ipiv, void *info);
typedef void (*gesv_fn)(const void *n, const void *nrhs, void *a, const void *lda, void *ipiv, void *b,
                        const void *ldb, void *info);
typedef void (*getri_fn)(const void *n, void *a, const void *lda, const void *ipiv, void *work, const void *lwork,
                         void *info);
typedef void (*geqrf_fn)(const void *m, const void *n, void *a, const void *lda, void *tau, void *work,
                         const void *lwork, void *info);
typedef void (*orgqr_fn)(const void *m, const void *n, const void *k, void *a, const void *lda, const void *tau,
                         void *work, const void *lwork, void *info);
typedef void (*syevd_fn)(const char *jobz, const char *uplo, const void *n, void *a, const void *lda, void *w,
                         void *work, const void *lwork, void *iwork, const void *liwork, void *info, size_t, size_t);
typedef void (*gesdd_fn)(const char *jobz, const void *m, const void *n, void *a, const void *lda, void *s, void *u,
                         const void *ldu, void *vt, const void *ldvt, void *work, const void *lwork, void *iwork,
                         void *info, size_t);

typedef struct lapack_api {
    void *lib;
    const char *name;
    int ilp64;
    void *potrf[2], *getrf[2], *gesv[2], *getri[2]; /* [0] float32, [1] float64 */
    void *geqrf[2], *orgqr[2];                      /* optional: the QR rows say when missing */
    void *syevd[2], *gesdd[2];                      /* optional: the eigh and svd rows, likewise */
    char why[200];
} lapack_api;

static void *lapack_sym(lapack_api *l, const char *base) {
    char name[64];
    if (l->ilp64) snprintf(name, sizeof name, "scipy_%s_64_", base);
    else snprintf(name, sizeof name, "%s_", base);
    return dlsym(l->lib, name);
}

static void lapack_load(lapack_api *l) {
    memset(l, 0, sizeof *l);
    static const char *const names[] = {"libopenblas.so", "libopenblas.so.0", "liblapack.so.3", NULL};
    const char *env = getenv("ALLOY_LAPACK");
    if (env && *env) {
        l->lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        l->name = env;
    }
    for (int i = 0; !l->lib && names[i]; i++) {
        l->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        l->name = names[i];
    }
    if (!l->lib) {
        snprintf(l->why, sizeof l->why, "no LAPACK found (ALLOY_LAPACK=path to name one)");
        return;
    }
    if (!dlsym(l->lib, "sgetrf_") && dlsym(l->lib, "scipy_sgetrf_64_")) l->ilp64 = 1;
    static const char *const prefix[2] = {"s", "d"};
    for (int d = 0; d < 2; d++) {
        char b[16];
        snprintf(b, sizeof b, "%spotrf", prefix[d]);
        l->potrf[d] = lapack_sym(l, b);
        snprintf(b, sizeof b, "%sgetrf", prefix[d]);
        l->getrf[d] = lapack_sym(l, b);
        snprintf(b, sizeof b, "%sgesv", prefix[d]);
        l->gesv[d] = lapack_sym(l, b);
        snprintf(b, sizeof b, "%sgetri", prefix[d]);
        l->getri[d] = lapack_sym(l, b);
        snprintf(b, sizeof b, "%sgeqrf", prefix[d]);
        l->geqrf[d] = lapack_sym(l, b);
        snprintf(b, sizeof b, "%sorgqr", prefix[d]);
        l->orgqr[d] = lapack_sym(l, b);
        snprintf(b, sizeof b, "%ssyevd", prefix[d]);
        l->syevd[d] = lapack_sym(l, b);
        snprintf(b, sizeof b, "%sgesdd", prefix[d]);
        l->gesdd[d] = lapack_sym(l, b);
    }
    if (!l->potrf[0] || !l->getrf[0] || !l->gesv[0] || !l->getri[0]) {
        snprintf(l->why, sizeof l->why, "%s has no LAPACK (sgetrf_ or scipy_sgetrf_64_)", l->name);
        l->lib = NULL;
        return;
    }
    /* the peer calls LAPACK from one thread per core: keep OpenBLAS from
     * adding threads of its own */
    void (*threads)(int) = (void (*)(int))dlsym(l->lib, "openblas_set_num_threads");
    if (!threads) threads = (void (*)(int))dlsym(l->lib, "scipy_openblas_set_num_threads64_");
    if (threads) threads(1);
}

/* ---- rows ------------------------------------------------------------------------- */

enum { OP_CHOLESKY, OP_LU_FACTOR, OP_SOLVE, OP_INV, OP_DET, OP_QR, OP_EIGH, OP_SVD, N_OPS };
static const char *const OP_NAMES[N_OPS] = {"cholesky", "lu_factor", "solve", "inv", "det", "qr", "eigh", "svd"};
/* what the error column measures, per op (docs/cli.md) */
static const char *const OP_ERRORS[N_OPS] = {"|A-LL^T|/|A|",
                                             "|PA-LU|/|A|",
                                             "|b-Ax|/(|A||x|+|b|)",
                                             "|I-AX|/(|A||X|)",
                                             "|d-d64|/|d64|",
                                             "max(|A-QR|/|A|, |Q^TQ-I|)",
                                             "max(|AV-VW|/|A|, |V^TV-I|)",
                                             "max(|A-USV^T|/|A|, |U^TU-I|, |V^TV-I|)"};

typedef struct la_size {
    int64_t n, batch_cuda, batch_cpu;
    int quick;
} la_size;

/* 10 000 matrices up to n = 128 and 1 000 of 256 on a GPU (issue 9's rows); on
 * the CPU fewer of the large ones, so a row takes seconds, not minutes. */
static const la_size SIZES[] = {
    {8, 10000, 10000, 1}, {16, 10000, 10000, 0}, {32, 10000, 10000, 1},
    {64, 10000, 2000, 0}, {128, 10000, 300, 0},  {256, 1000, 40, 0},
};

/* The eigh and svd rows' matrices: the size's count, capped for the large n
 * (bench_linalg_torch.py's SLOW_BATCH caps the CUDA rows alike). */
static int64_t slow_batch(int is_cuda, int64_t n, int64_t batch) {
    const int64_t cap = is_cuda ? (n >= 256 ? 100 : n >= 128 ? 200 : n >= 64 ? 1000 : batch)
                                : (n >= 256 ? 8 : n >= 128 ? 32 : n >= 64 ? 200 : batch);
    return batch < cap ? batch : cap;
}

typedef struct la_ctx {
    alloy_dtype dt;
    int64_t batch, n;
    alloy_stream *s;
    /* alloy: inputs and outputs on the device */
    alloy_array *spd, *gen, *b, *out, *piv, *info, *x, *det, *r, *w;
    int op;
    /* host: row-major inputs, the column-major copy of gen for LAPACK, the
     * peer's outputs (column-major; p_r: the QR rows' R, svd's V^T; p_w:
     * the eigenvalues, singular values). eigh reads the lower triangle of
     * gen (the symmetric matrix spd is, without its diagonal). */
    void *h_spd, *h_gen, *h_gen_t, *h_b, *p_out, *p_x, *p_det, *p_r, *p_w;
    lapack_api *lp;
    int threads;
} la_ctx;

static int run_alloy(void *p) {
    la_ctx *c = p;
    alloy_status st;
    switch (c->op) {
    case OP_CHOLESKY: st = alloy_cholesky(c->spd, NULL, c->s, &c->out, &c->info); break;
    case OP_LU_FACTOR: st = alloy_lu_factor(c->gen, c->s, &c->out, &c->piv, &c->info); break;
    case OP_SOLVE: st = alloy_solve(c->gen, c->b, c->s, &c->x, &c->info); break;
    case OP_INV: st = alloy_inv(c->gen, c->s, &c->out, &c->info); break;
    case OP_QR: st = alloy_qr(c->gen, ALLOY_QR_REDUCED, c->s, &c->out, &c->r); break;
    case OP_EIGH: {
        alloy_eigh_options o;
        alloy_eigh_options_init(&o);
        st = alloy_eigh(c->gen, &o, c->s, &c->w, &c->out, &c->info);
        break;
    }
    case OP_SVD: {
        alloy_svd_options o;
        alloy_svd_options_init(&o);
        o.full_matrices = 0;
        st = alloy_svd(c->gen, &o, c->s, &c->out, &c->w, &c->r, &c->info);
        break;
    }
    default: st = alloy_det(c->gen, c->s, &c->det); break;
    }
    return st != ALLOY_OK;
}

/* ---- the peer: a slice of the batch per thread ----------------------------------- */

typedef struct peer_job {
    la_ctx *c;
    int64_t b0, b1;
    int failed;
} peer_job;

static void *peer_slice(void *p) {
    peer_job *j = p;
    la_ctx *c = j->c;
    const lapack_api *l = c->lp;
    const int d = c->dt == ALLOY_FLOAT64;
    const size_t es = alloy_dtype_size(c->dt), nn = (size_t)(c->n * c->n);
    int32_t n32 = (int32_t)c->n, one32 = 1, info32 = 0, lwork32 = (int32_t)(c->n * 64);
    int64_t n64 = c->n, one64 = 1, info64 = 0, lwork64 = c->n * 64;
    const void *N = l->ilp64 ? (const void *)&n64 : (const void *)&n32;
    const void *ONE = l->ilp64 ? (const void *)&one64 : (const void *)&one32;
    const void *LWORK = l->ilp64 ? (const void *)&lwork64 : (const void *)&lwork32;
    void *INFO = l->ilp64 ? (void *)&info64 : (void *)&info32;
    int64_t *ipiv = malloc(sizeof(int64_t) * (size_t)(c->n + 1));
    char *work = malloc(es * (nn + (size_t)c->n * 64 + 1));
    /* eigh, svd: the workspace LAPACK asks for (a query with lwork = -1) */
    char *jwork = NULL, *acopy = NULL;
    void *iwork = NULL;
    int32_t jl32 = 0, il32 = 0;
    int64_t jl64 = 0, il64 = 0;
    const void *JLWORK = l->ilp64 ? (const void *)&jl64 : (const void *)&jl32;
    const void *ILWORK = l->ilp64 ? (const void *)&il64 : (const void *)&il32;
    if (ipiv && work && (c->op == OP_EIGH || c->op == OP_SVD)) {
        double wq = 0;
        int64_t iq = 8 * c->n + 8;
        char wbuf[8] = {0}, ibuf[8] = {0};
        jl32 = -1, il32 = -1, jl64 = -1, il64 = -1;
        if (c->op == OP_EIGH) {
            ((syevd_fn)l->syevd[d])("V", "U", N, work, N, work + nn * es, wbuf, JLWORK, ibuf, ILWORK, INFO, 1, 1);
            iq = l->ilp64 ? *(const int64_t *)ibuf : *(const int32_t *)ibuf;
        } else {
            ((gesdd_fn)l->gesdd[d])("S", N, N, work, N, work + nn * es, work, N, work, N, wbuf, JLWORK, ibuf, INFO,
                                    1);
        }
        wq = d ? *(const double *)wbuf : (double)*(const float *)wbuf;
        const int64_t lw = (int64_t)wq + 1, li = iq > 8 * c->n + 8 ? iq : 8 * c->n + 8;
        jl32 = (int32_t)lw, jl64 = lw, il32 = (int32_t)li, il64 = li;
        jwork = malloc(es * (size_t)lw);
        iwork = malloc(sizeof(int64_t) * (size_t)li);
        acopy = malloc(es * (nn + 1));
        if (!jwork || !iwork || !acopy) j->failed = 1;
    }
    if (!ipiv || !work || j->failed) {
        j->failed = 1;
        free(ipiv);
        free(work);
        free(jwork);
        free(iwork);
        free(acopy);
        return NULL;
    }
    for (int64_t i = j->b0; i < j->b1; i++) {
        char *out = (char *)c->p_out + (size_t)i * nn * es;
        const char *gen = (const char *)c->h_gen_t + (size_t)i * nn * es;
        switch (c->op) {
        case OP_CHOLESKY: /* symmetric: row-major lower = column-major upper */
            memcpy(out, (const char *)c->h_spd + (size_t)i * nn * es, nn * es);
            ((potrf_fn)l->potrf[d])("U", N, out, N, INFO, 1);
            break;
        case OP_LU_FACTOR:
            memcpy(out, gen, nn * es);
            ((getrf_fn)l->getrf[d])(N, N, out, N, ipiv, INFO);
            break;
        case OP_SOLVE: {
            char *x = (char *)c->p_x + (size_t)(i * c->n) * es;
            memcpy(work, gen, nn * es);
            memcpy(x, (const char *)c->h_b + (size_t)(i * c->n) * es, (size_t)c->n * es);
            ((gesv_fn)l->gesv[d])(N, ONE, work, N, ipiv, x, N, INFO);
            break;
        }
        case OP_INV:
            memcpy(out, gen, nn * es);
            ((getrf_fn)l->getrf[d])(N, N, out, N, ipiv, INFO);
            ((getri_fn)l->getri[d])(N, out, N, ipiv, work, LWORK, INFO);
            break;
        case OP_QR: { /* geqrf, R copied out (column-major, zeros below), orgqr forms Q in place */
            char *tau = work + (size_t)c->n * 64 * es, *r = (char *)c->p_r + (size_t)i * nn * es;
            memcpy(out, gen, nn * es);
            ((geqrf_fn)l->geqrf[d])(N, N, out, N, tau, work, LWORK, INFO);
            for (int64_t col = 0; col < c->n; col++) {
                const size_t top = (size_t)(col + 1) * es, at = (size_t)(col * c->n) * es;
                memcpy(r + at, out + at, top);
                memset(r + at + top, 0, (size_t)(c->n - col - 1) * es);
            }
            ((orgqr_fn)l->orgqr[d])(N, N, N, out, N, tau, work, LWORK, INFO);
            break;
        }
        case OP_EIGH: /* gen's lower triangle, row-major, is the upper one column-major */
            memcpy(out, (const char *)c->h_gen + (size_t)i * nn * es, nn * es);
            ((syevd_fn)l->syevd[d])("V", "U", N, out, N, (char *)c->p_w + (size_t)(i * c->n) * es, jwork, JLWORK,
                                    iwork, ILWORK, INFO, 1, 1);
            break;
        case OP_SVD: /* reduced: U into out, V^T into p_r (column-major) */
            memcpy(acopy, gen, nn * es);
            ((gesdd_fn)l->gesdd[d])("S", N, N, acopy, N, (char *)c->p_w + (size_t)(i * c->n) * es, out, N,
                                    (char *)c->p_r + (size_t)i * nn * es, N, jwork, JLWORK, iwork, INFO, 1);
            break;
        default: {
            memcpy(work, gen, nn * es);
            ((getrf_fn)l->getrf[d])(N, N, work, N, ipiv, INFO);
            double det = 1;
            for (int64_t k = 0; k < c->n; k++) {
                const int64_t pk = l->ilp64 ? ipiv[k] : ((const int32_t *)ipiv)[k];
                const double u = d ? ((const double *)work)[k * c->n + k] : ((const float *)work)[k * c->n + k];
                det *= pk != k + 1 ? -u : u;
            }
            if (d) ((double *)c->p_det)[i] = det;
            else ((float *)c->p_det)[i] = (float)det;
            break;
        }
        }
    }
    free(ipiv);
    free(work);
    free(jwork);
    free(iwork);
    free(acopy);
    return NULL;
}

static int run_peer(void *p) {
    la_ctx *c = p;
    enum { MAX_THREADS = 256 };
    pthread_t th[MAX_THREADS];
    peer_job jobs[MAX_THREADS];
    int t = c->threads < MAX_THREADS ? c->threads : MAX_THREADS;
    if (t > c->batch) t = (int)c->batch;
    if (t < 1) t = 1;
    for (int i = 0; i < t; i++) {
        jobs[i].c = c;
        jobs[i].b0 = c->batch * i / t;
        jobs[i].b1 = c->batch * (i + 1) / t;
        jobs[i].failed = 0;
    }
    int created[MAX_THREADS] = {0};
    for (int i = 1; i < t; i++) created[i] = pthread_create(&th[i], NULL, peer_slice, &jobs[i]) == 0;
    peer_slice(&jobs[0]);
    int failed = jobs[0].failed;
    for (int i = 1; i < t; i++) {
        if (created[i]) pthread_join(th[i], NULL);
        else peer_slice(&jobs[i]); /* no thread: this one does it */
        failed |= jobs[i].failed;
    }
    return failed;
}

/* ---- errors of one sample matrix (host, double) ----------------------------------- */

static double at(alloy_dtype dt, const void *p, int64_t i) {
    return dt == ALLOY_FLOAT64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

/* ||A - L L^T||_F / ||A||_F, L the lower triangle of f (row-major). */
static double err_cholesky(alloy_dtype dt, int64_t n, const void *a, const void *f) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t k = 0; k <= (i < j ? i : j); k++) s += at(dt, f, i * n + k) * at(dt, f, j * n + k);
            const double x = at(dt, a, i * n + j), e = x - s;
            num += e * e;
            den += x * x;
        }
    return sqrt(num) / (den > 0 ? sqrt(den) : 1);
}

/* ||P A - L U||_F / ||A||_F; lu row-major, ipiv LAPACK's 1-based. */
static double err_lu(alloy_dtype dt, int64_t n, const void *a, const void *lu, const int32_t *ipiv) {
    double *pa = malloc(sizeof(double) * (size_t)(n * n));
    if (!pa) return NAN;
    for (int64_t i = 0; i < n * n; i++) pa[i] = at(dt, a, i);
    for (int64_t k = 0; k < n; k++) {
        const int64_t p = ipiv[k] - 1;
        if (p != k && p >= 0 && p < n)
            for (int64_t j = 0; j < n; j++) {
                double t = pa[k * n + j];
                pa[k * n + j] = pa[p * n + j];
                pa[p * n + j] = t;
            }
    }
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = i <= j ? at(dt, lu, i * n + j) : 0; /* L's unit diagonal times U */
            for (int64_t k = 0; k < (i < j + 1 ? i : j + 1); k++) s += at(dt, lu, i * n + k) * at(dt, lu, k * n + j);
            const double e = pa[i * n + j] - s;
            num += e * e;
            den += at(dt, a, i * n + j) * at(dt, a, i * n + j);
        }
    free(pa);
    return sqrt(num) / (den > 0 ? sqrt(den) : 1);
}

/* ||b - A x||_inf / (||A||_inf ||x||_inf + ||b||_inf) */
static double err_solve(alloy_dtype dt, int64_t n, const void *a, const void *x, const void *b) {
    double r = 0, an = 0, xn = 0, bn = 0;
    for (int64_t i = 0; i < n; i++) {
        double s = 0, row = 0;
        for (int64_t k = 0; k < n; k++) {
            s += at(dt, a, i * n + k) * at(dt, x, k);
            row += fabs(at(dt, a, i * n + k));
        }
        const double e = fabs(at(dt, b, i) - s);
        if (!(e <= r)) r = e;
        if (row > an) an = row;
        if (!(fabs(at(dt, x, i)) <= xn)) xn = fabs(at(dt, x, i));
        if (fabs(at(dt, b, i)) > bn) bn = fabs(at(dt, b, i));
    }
    return r / (an * xn + bn);
}

/* ||I - A X||_1 / (||A||_1 ||X||_1) */
static double err_inv(alloy_dtype dt, int64_t n, const void *a, const void *x) {
    double rn = 0, an = 0, xn = 0;
    for (int64_t j = 0; j < n; j++) {
        double rc = 0, ac = 0, xc = 0;
        for (int64_t i = 0; i < n; i++) {
            double s = 0;
            for (int64_t k = 0; k < n; k++) s += at(dt, a, i * n + k) * at(dt, x, k * n + j);
            rc += fabs((i == j ? 1.0 : 0.0) - s);
            ac += fabs(at(dt, a, i * n + j));
            xc += fabs(at(dt, x, i * n + j));
        }
        if (!(rc <= rn)) rn = rc;
        if (ac > an) an = ac;
        if (!(xc <= xn)) xn = xc;
    }
    return rn / (an * xn);
}

/* max(||A - Q R||_F / ||A||_F, ||Q^T Q - I||_F); q, r row-major n x n. */
static double err_qr(alloy_dtype dt, int64_t n, const void *a, const void *q, const void *r) {
    double num = 0, den = 0, orth = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0, g = 0;
            for (int64_t k = 0; k <= j; k++) s += at(dt, q, i * n + k) * at(dt, r, k * n + j);
            for (int64_t k = 0; k < n; k++) g += at(dt, q, k * n + i) * at(dt, q, k * n + j);
            const double x = at(dt, a, i * n + j), e = x - s, o = g - (i == j ? 1.0 : 0.0);
            num += e * e;
            den += x * x;
            orth += o * o;
        }
    const double back = sqrt(num) / (den > 0 ? sqrt(den) : 1), o = sqrt(orth);
    return !(back <= o) ? back : o; /* NaN wins */
}

/* ||Q^T Q - I||_F for the columns of q (row-major n x n; rows: Q Q^T). */
static double orth_err(alloy_dtype dt, int64_t n, const void *q, int rows) {
    double orth = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            double g = 0;
            for (int64_t k = 0; k < n; k++)
                g += rows ? at(dt, q, i * n + k) * at(dt, q, j * n + k) : at(dt, q, k * n + i) * at(dt, q, k * n + j);
            const double o = g - (i == j ? 1.0 : 0.0);
            orth += o * o;
        }
    return sqrt(orth);
}

static double worse(double a, double b) { return !(a <= b) ? a : b; } /* NaN wins */

/* max(||S V - V diag(w)||_F / ||S||_F, ||V^T V - I||_F), S the symmetric
 * matrix of a's lower triangle (row-major), v row-major (columns the vectors). */
static double err_eigh(alloy_dtype dt, int64_t n, const void *a, const void *v, const void *w) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            double sv = 0;
            for (int64_t k = 0; k < n; k++) sv += at(dt, a, i >= k ? i * n + k : k * n + i) * at(dt, v, k * n + j);
            const double e = sv - at(dt, v, i * n + j) * at(dt, w, j), x = at(dt, a, i >= j ? i * n + j : j * n + i);
            num += e * e;
            den += x * x;
        }
    return worse(sqrt(num) / (den > 0 ? sqrt(den) : 1), orth_err(dt, n, v, 0));
}

/* max(||A - U diag(s) V^T||_F / ||A||_F, ||U^T U - I||_F, ||V^T V - I||_F);
 * u, vt row-major n x n. */
static double err_svd(alloy_dtype dt, int64_t n, const void *a, const void *u, const void *sv, const void *vt) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            double r = 0;
            for (int64_t k = 0; k < n; k++) r += at(dt, u, i * n + k) * at(dt, sv, k) * at(dt, vt, k * n + j);
            const double x = at(dt, a, i * n + j), e = x - r;
            num += e * e;
            den += x * x;
        }
    return worse(worse(sqrt(num) / (den > 0 ? sqrt(den) : 1), orth_err(dt, n, u, 0)), orth_err(dt, n, vt, 1));
}

/* |d - det(A)| / |det(A)|, det(A) by LU with partial pivoting in long double. */
static double err_det(alloy_dtype dt, int64_t n, const void *a, double d) {
    long double *m = malloc(sizeof(long double) * (size_t)(n * n));
    if (!m) return NAN;
    for (int64_t i = 0; i < n * n; i++) m[i] = at(dt, a, i);
    long double det = 1;
    for (int64_t k = 0; k < n; k++) {
        int64_t p = k;
        for (int64_t i = k + 1; i < n; i++)
            if (fabsl(m[i * n + k]) > fabsl(m[p * n + k])) p = i;
        if (p != k) {
            det = -det;
            for (int64_t j = 0; j < n; j++) {
                long double t = m[k * n + j];
                m[k * n + j] = m[p * n + j];
                m[p * n + j] = t;
            }
        }
        det *= m[k * n + k];
        if (m[k * n + k] == 0) break;
        for (int64_t i = k + 1; i < n; i++) {
            const long double f = m[i * n + k] / m[k * n + k];
            for (int64_t j = k + 1; j < n; j++) m[i * n + j] -= f * m[k * n + j];
        }
    }
    free(m);
    /* a determinant past the dtype's range: +-inf is its correct rounding */
    const double rounded = dt == ALLOY_FLOAT32 ? (double)(float)det : (double)det;
    if (isinf(rounded) && rounded == d) return 0;
    return det == 0 ? (d == 0 ? 0 : INFINITY) : (double)fabsl(((long double)d - det) / det);
}

/* ---- sampling ------------------------------------------------------------------------ */

enum { N_SAMPLES = 8 };

/* Element range [first, first + count) of a device array, to host. */
static alloy_status fetch(alloy_array *arr, int64_t first, int64_t count, void *dst) {
    const size_t es = alloy_dtype_size(alloy_array_dtype(arr));
    alloy_array *v = NULL;
    alloy_status st = alloy_array_wrap(alloy_array_device(arr), (char *)alloy_array_data(arr) + (size_t)first * es,
                                       alloy_array_dtype(arr), 1, &count, NULL, 0, NULL, NULL, &v);
    if (st == ALLOY_OK) st = alloy_array_copy_to_host(v, dst, (size_t)count * es);
    alloy_array_free(v);
    return st;
}

static void transpose_to(alloy_dtype dt, int64_t n, const void *src, void *dst) {
    const size_t es = alloy_dtype_size(dt);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            memcpy((char *)dst + (size_t)(j * n + i) * es, (const char *)src + (size_t)(i * n + j) * es, es);
}

/* The worst error over the sample; peer: the outputs are the LAPACK peer's
 * (host, column-major) rather than alloy's (device, row-major). */
static double sample_error(la_ctx *c, int peer) {
    const alloy_dtype dt = c->dt;
    const int64_t n = c->n, nn = n * n;
    const size_t es = alloy_dtype_size(dt);
    char *m = malloc(es * (size_t)nn), *r = malloc(es * (size_t)nn), *w = malloc(es * (size_t)(n + 1));
    int32_t *piv = malloc(sizeof(int32_t) * (size_t)(n + 1));
    double worst = 0;
    for (int s = 0; s < N_SAMPLES && m && r && w && piv; s++) {
        const int64_t i = c->batch > 1 ? c->batch - 1 - (c->batch - 1) * s / (N_SAMPLES - 1) : 0;
        const char *gen = (const char *)c->h_gen + (size_t)(i * nn) * es;
        double e = NAN;
        alloy_status st = ALLOY_OK;
        switch (c->op) {
        case OP_CHOLESKY: /* LAPACK's column-major U read row-major is L (lower triangle) */
            if (peer) memcpy(m, (const char *)c->p_out + (size_t)(i * nn) * es, es * (size_t)nn);
            else st = fetch(c->out, i * nn, nn, m);
            break;
        case OP_LU_FACTOR:
        case OP_INV:
            if (peer) transpose_to(dt, n, (const char *)c->p_out + (size_t)(i * nn) * es, m);
            else st = fetch(c->out, i * nn, nn, m);
            break;
        case OP_SOLVE:
            if (peer) memcpy(m, (const char *)c->p_x + (size_t)(i * n) * es, (size_t)n * es);
            else st = fetch(c->x, i * n, n, m);
            break;
        case OP_QR:
            if (peer) {
                transpose_to(dt, n, (const char *)c->p_out + (size_t)(i * nn) * es, m);
                transpose_to(dt, n, (const char *)c->p_r + (size_t)(i * nn) * es, r);
            } else {
                st = fetch(c->out, i * nn, nn, m);
                if (st == ALLOY_OK) st = fetch(c->r, i * nn, nn, r);
            }
            break;
        case OP_EIGH:
        case OP_SVD: /* v or u into m, (svd) vt into r, the values into w */
            if (peer) {
                transpose_to(dt, n, (const char *)c->p_out + (size_t)(i * nn) * es, m);
                if (c->op == OP_SVD) transpose_to(dt, n, (const char *)c->p_r + (size_t)(i * nn) * es, r);
                memcpy(w, (const char *)c->p_w + (size_t)(i * n) * es, (size_t)n * es);
            } else {
                st = fetch(c->out, i * nn, nn, m);
                if (st == ALLOY_OK && c->op == OP_SVD) st = fetch(c->r, i * nn, nn, r);
                if (st == ALLOY_OK) st = fetch(c->w, i * n, n, w);
            }
            break;
        default:
            if (peer) memcpy(m, (const char *)c->p_det + (size_t)i * es, es);
            else st = fetch(c->det, i, 1, m);
            break;
        }
        if (st != ALLOY_OK) {
            worst = NAN;
            break;
        }
        switch (c->op) {
        case OP_CHOLESKY:
            e = err_cholesky(dt, n, (const char *)c->h_spd + (size_t)(i * nn) * es, m);
            break;
        case OP_LU_FACTOR: /* (the peer's: peer_lu_error) */
            if (fetch(c->piv, i * n, n, piv) != ALLOY_OK) break;
            e = err_lu(dt, n, gen, m, piv);
            break;
        case OP_SOLVE: e = err_solve(dt, n, gen, m, (const char *)c->h_b + (size_t)(i * n) * es); break;
        case OP_INV: e = err_inv(dt, n, gen, m); break;
        case OP_QR: e = err_qr(dt, n, gen, m, r); break;
        case OP_EIGH: e = err_eigh(dt, n, gen, m, w); break;
        case OP_SVD: e = err_svd(dt, n, gen, m, w, r); break;
        default: e = err_det(dt, n, gen, at(dt, m, 0)); break;
        }
        if (!(e <= worst)) worst = e; /* NaN wins */
    }
    free(m);
    free(r);
    free(w);
    free(piv);
    return worst;
}

/* The peer's LU error: factor the sample again with the peer, keeping pivots. */
static double peer_lu_error(la_ctx *c) {
    const alloy_dtype dt = c->dt;
    const int64_t n = c->n, nn = n * n;
    const size_t es = alloy_dtype_size(dt);
    const int d = dt == ALLOY_FLOAT64;
    char *m = malloc(es * (size_t)nn), *rm = malloc(es * (size_t)nn);
    int64_t *ipiv = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int32_t *p32 = malloc(sizeof(int32_t) * (size_t)(n + 1));
    double worst = 0;
    int32_t n32 = (int32_t)n, info32;
    int64_t n64 = n, info64;
    const void *N = c->lp->ilp64 ? (const void *)&n64 : (const void *)&n32;
    void *INFO = c->lp->ilp64 ? (void *)&info64 : (void *)&info32;
    for (int s = 0; s < N_SAMPLES && m && rm && ipiv && p32; s++) {
        const int64_t i = c->batch > 1 ? c->batch - 1 - (c->batch - 1) * s / (N_SAMPLES - 1) : 0;
        memcpy(m, (const char *)c->h_gen_t + (size_t)(i * nn) * es, es * (size_t)nn);
        ((getrf_fn)c->lp->getrf[d])(N, N, m, N, ipiv, INFO);
        for (int64_t k = 0; k < n; k++) p32[k] = (int32_t)(c->lp->ilp64 ? ipiv[k] : ((const int32_t *)ipiv)[k]);
        transpose_to(dt, n, m, rm);
        const double e = err_lu(dt, n, (const char *)c->h_gen + (size_t)(i * nn) * es, rm, p32);
        if (!(e <= worst)) worst = e;
    }
    free(m);
    free(rm);
    free(ipiv);
    free(p32);
    return worst;
}

/* ---- the table ---------------------------------------------------------------------------- */

static void free_ctx(la_ctx *c) {
    alloy_array *arrs[] = {c->spd, c->gen, c->b, c->out, c->piv, c->info, c->x, c->det, c->r, c->w};
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) alloy_array_free(arrs[i]);
    void *host[] = {c->h_spd, c->h_gen, c->h_gen_t, c->h_b, c->p_out, c->p_x, c->p_det, c->p_r, c->p_w};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
}

/* A view of the first k matrices of a (shape (batch, ...)), or NULL for NULL. */
static alloy_status prefix_view(alloy_array *a, int64_t k, alloy_array **v) {
    *v = NULL;
    if (!a) return ALLOY_OK;
    int64_t shape[ALLOY_MAX_NDIM];
    const int nd = alloy_array_ndim(a);
    memcpy(shape, alloy_array_shape(a), sizeof(int64_t) * (size_t)nd);
    shape[0] = k;
    return alloy_array_wrap(alloy_array_device(a), alloy_array_data(a), alloy_array_dtype(a), nd, shape, NULL, 0, NULL,
                            NULL, v);
}

/* *sub: c on its first k matrices (the host buffers shared, the arrays
 * views); free_prefix releases the views only. */
static alloy_status prefix_ctx(const la_ctx *c, int64_t k, la_ctx *sub) {
    *sub = *c;
    sub->batch = k;
    alloy_array **arrs[] = {&sub->spd, &sub->gen, &sub->b, &sub->out, &sub->piv,
                            &sub->info, &sub->x, &sub->det, &sub->r, &sub->w};
    alloy_status st = ALLOY_OK;
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) {
        alloy_array *base = *arrs[i];
        if (st == ALLOY_OK) st = prefix_view(base, k, arrs[i]);
        else *arrs[i] = NULL;
    }
    return st;
}

static void free_prefix(la_ctx *sub) {
    alloy_array *arrs[] = {sub->spd, sub->gen, sub->b, sub->out, sub->piv, sub->info, sub->x, sub->det, sub->r, sub->w};
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) alloy_array_free(arrs[i]);
}

/* Inputs and outputs of one (dtype, n, batch): general matrices uniform in
 * [-1, 1), symmetric ones with n + 1 on the diagonal (diagonally dominant,
 * so positive definite), right-hand sides uniform. */
static alloy_status setup(la_ctx *c, alloy_device *dev, int peer, uint64_t *rng) {
    const int64_t B = c->batch, n = c->n, nn = n * n;
    const size_t es = alloy_dtype_size(c->dt);
    c->h_gen = malloc(es * (size_t)(B * nn));
    c->h_spd = malloc(es * (size_t)(B * nn));
    c->h_b = malloc(es * (size_t)(B * n));
    if (!c->h_gen || !c->h_spd || !c->h_b) return ALLOY_ERROR_OUT_OF_MEMORY;
    bench_fill_random(c->dt, B * nn, c->h_gen, rng);
    bench_fill_random(c->dt, B * n, c->h_b, rng);
    for (int64_t m = 0; m < B; m++)
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) {
                const char *src = (const char *)c->h_gen + (size_t)(m * nn + (i < j ? i * n + j : j * n + i)) * es;
                char *dst = (char *)c->h_spd + (size_t)(m * nn + i * n + j) * es;
                if (i == j) {
                    const double v = (double)n + 1;
                    cli_convert(ALLOY_FLOAT64, &v, c->dt, dst, 1);
                } else {
                    memcpy(dst, src, es);
                }
            }
    if (peer) {
        c->h_gen_t = malloc(es * (size_t)(B * nn));
        c->p_out = malloc(es * (size_t)(B * nn));
        c->p_x = malloc(es * (size_t)(B * n));
        c->p_det = malloc(es * (size_t)B);
        c->p_r = malloc(es * (size_t)(B * nn));
        c->p_w = malloc(es * (size_t)(B * n));
        if (!c->h_gen_t || !c->p_out || !c->p_x || !c->p_det || !c->p_r || !c->p_w) return ALLOY_ERROR_OUT_OF_MEMORY;
        for (int64_t m = 0; m < B; m++)
            transpose_to(c->dt, n, (const char *)c->h_gen + (size_t)(m * nn) * es,
                         (char *)c->h_gen_t + (size_t)(m * nn) * es);
    }
    const int64_t sm[3] = {B, n, n}, sb[3] = {B, n, 1}, sp[2] = {B, n};
    alloy_status st = alloy_array_from_host(dev, c->dt, 3, sm, c->h_gen, &c->gen);
    if (st == ALLOY_OK) st = alloy_array_from_host(dev, c->dt, 3, sm, c->h_spd, &c->spd);
    if (st == ALLOY_OK) st = alloy_array_from_host(dev, c->dt, 3, sb, c->h_b, &c->b);
    if (st == ALLOY_OK) st = alloy_array_new(dev, c->dt, 3, sm, &c->out);
    if (st == ALLOY_OK) st = alloy_array_new(dev, c->dt, 3, sm, &c->r);
    if (st == ALLOY_OK) st = alloy_array_new(dev, c->dt, 3, sb, &c->x);
    if (st == ALLOY_OK) st = alloy_array_new(dev, c->dt, 2, sp, &c->w);
    if (st == ALLOY_OK) st = alloy_array_new(dev, c->dt, 1, &B, &c->det);
    if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_INT32, 2, sp, &c->piv);
    if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_INT32, 1, &B, &c->info);
    return st;
}

/* Calls per timed batch for about `target` seconds, from one call's time. */
static int calls_for(double t1, double target) {
    double per = target / (t1 > 1e-6 ? t1 : 1e-6);
    return per < 1 ? 1 : per > 200 ? 200 : (int)per;
}

int bench_linalg(alloy_device *dev, int quick, const char *only, int json) {
    const int is_cuda = alloy_device_backend(dev) == ALLOY_BACKEND_CUDA;
    lapack_api lp;
    memset(&lp, 0, sizeof lp);
    if (!is_cuda) lapack_load(&lp);
    alloy_stream *s = NULL;
    if (alloy_stream_default(dev, &s) != ALLOY_OK) return cli_alloy_error(ALLOY_ERROR_INTERNAL);
    const char *peer_why = is_cuda ? "on CUDA the peer is torch.linalg: python bench/bench_linalg_torch.py" : lp.why;
    const alloy_dtype dtypes[2] = {ALLOY_FLOAT32, ALLOY_FLOAT64};
    const char *const dnames[2] = {"f32", "f64"};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int header = 0, failures = 0;
    uint64_t rng = 0x2545f4914f6cdd1dull;
    for (int di = 0; di < 2; di++)
        for (size_t zi = 0; zi < sizeof SIZES / sizeof SIZES[0]; zi++) {
            const la_size *z = &SIZES[zi];
            if (quick && (!z->quick || di)) continue;
            char labels[N_OPS][48];
            int any = 0;
            for (int op = 0; op < N_OPS; op++) {
                snprintf(labels[op], sizeof labels[op], "%s %s", OP_NAMES[op], dnames[di]);
                any |= bench_label_wanted(labels[op], only);
            }
            if (!any) continue;
            if (!header && !json) {
                if (!is_cuda && lp.lib)
                    printf("linalg peer: LAPACK from %s%s, one thread per core (%ld)\n", lp.name,
                           lp.ilp64 ? " (ILP64)" : "", ncpu);
                printf("%-14s %-16s %10s %12s %10s | %-7s %10s %10s %7s\n", "linalg", "size", "time",
                       "matrices/s", "error", "peer", "time", "error", "ratio");
                header = 1;
            }
            la_ctx c;
            memset(&c, 0, sizeof c);
            c.dt = dtypes[di];
            c.n = z->n;
            c.batch = is_cuda ? z->batch_cuda : z->batch_cpu;
            c.s = s;
            c.lp = &lp;
            c.threads = ncpu > 0 ? (int)ncpu : 1;
            const int peer = !is_cuda && lp.lib;
            alloy_status st = setup(&c, dev, peer, &rng);
            if (st != ALLOY_OK) {
                fprintf(stderr, "alloy: bench linalg %s n=%lld: %s\n", dnames[di], (long long)z->n,
                        st == ALLOY_ERROR_OUT_OF_MEMORY ? "out of host memory" : alloy_last_error());
                failures++;
                free_ctx(&c);
                continue;
            }
            for (int op = 0; op < N_OPS; op++) {
                if (!bench_label_wanted(labels[op], only)) continue;
                c.op = op;
                /* eigh, svd: the first slow_batch matrices (views of the same arrays) */
                la_ctx sub, *rc = &c;
                const int64_t nb = op == OP_EIGH || op == OP_SVD ? slow_batch(is_cuda, c.n, c.batch) : c.batch;
                if (nb < c.batch) {
                    if (prefix_ctx(&c, nb, &sub) != ALLOY_OK) {
                        fprintf(stderr, "alloy: bench linalg %s: %s\n", labels[op], alloy_last_error());
                        failures++;
                        free_prefix(&sub);
                        continue;
                    }
                    rc = &sub;
                }
                char size[48];
                snprintf(size, sizeof size, "%lldx %lldx%lld", (long long)rc->batch, (long long)c.n, (long long)c.n);
                double t0 = bench_now_s(), t1 = -1;
                if (run_alloy(rc) == 0 && alloy_stream_synchronize(s) == ALLOY_OK) t1 = bench_now_s() - t0;
                if (t1 < 0) {
                    fprintf(stderr, "alloy: bench linalg %s %s: %s\n", labels[op], size, alloy_last_error());
                    failures++;
                    if (rc == &sub) free_prefix(&sub);
                    continue;
                }
                const double target = is_cuda ? 0.05 : 0.2;
                const int reps = is_cuda ? 9 : t1 > 0.5 ? 3 : 5;
                const double t = bench_time_calls(run_alloy, rc, s, calls_for(t1, target), reps);
                const double err = sample_error(rc, 0);
                double pt = -1, perr = 0;
                const char *why = peer_why;
                const int op_peer = peer && (op == OP_QR    ? lp.geqrf[di] && lp.orgqr[di]
                                             : op == OP_EIGH ? lp.syevd[di] != NULL
                                             : op == OP_SVD  ? lp.gesdd[di] != NULL
                                                             : 1);
                if (peer && !op_peer) {
                    static const char *const missing[2][3] = {
                        {"this LAPACK has no sgeqrf/sorgqr", "this LAPACK has no ssyevd", "this LAPACK has no sgesdd"},
                        {"this LAPACK has no dgeqrf/dorgqr", "this LAPACK has no dsyevd", "this LAPACK has no dgesdd"}};
                    why = missing[di][op == OP_QR ? 0 : op == OP_EIGH ? 1 : 2];
                }
                if (op_peer) {
                    t0 = bench_now_s();
                    run_peer(rc);
                    const double p1 = bench_now_s() - t0;
                    pt = bench_time_calls(run_peer, rc, s, calls_for(p1, target), p1 > 0.5 ? 3 : 5);
                    perr = op == OP_LU_FACTOR ? peer_lu_error(rc) : sample_error(rc, 1);
                }
                if (json) {
                    printf("{\"op\": \"%s\", \"case\": \"%s\", \"size\": \"%s\", \"batch\": %lld, \"n\": %lld, "
                           "\"device\": \"%s\", \"time_s\": %.6g, \"matrices_per_s\": %.6g, \"error\": %.3g, "
                           "\"error_measure\": \"%s\"",
                           OP_NAMES[op], dnames[di], size, (long long)rc->batch, (long long)c.n, alloy_device_name(dev),
                           t, (double)rc->batch / t, err, OP_ERRORS[op]);
                    if (pt > 0)
                        printf(", \"peer\": \"LAPACK\", \"peer_time_s\": %.6g, \"peer_error\": %.3g, \"ratio\": %.4f",
                               pt, perr, pt / t);
                    else printf(", \"peer\": null, \"peer_missing\": \"%s\"", why);
                    printf("}\n");
                } else {
                    char rate[32];
                    const double r = (double)rc->batch / t;
                    snprintf(rate, sizeof rate, "%.3g %s", r >= 1e6 ? r / 1e6 : r / 1e3, r >= 1e6 ? "M/s" : "k/s");
                    if (pt > 0)
                        printf("%-14s %-16s %7.3f ms %12s %10.2e | %-7s %7.3f ms %10.2e %7.3f\n", labels[op], size,
                               t * 1e3, rate, err, "LAPACK", pt * 1e3, perr, pt / t);
                    else
                        printf("%-14s %-16s %7.3f ms %12s %10.2e | peer unavailable: %s\n", labels[op], size, t * 1e3,
                               rate, err, why);
                }
                fflush(stdout);
                if (rc == &sub) free_prefix(&sub);
            }
            free_ctx(&c);
        }
    if (header && !json)
        printf("errors: cholesky |A-LL^T|_F/|A|_F, lu_factor |PA-LU|_F/|A|_F, solve |b-Ax|/(|A||x|+|b|) (inf-norms),\n"
               "inv |I-AX|_1/(|A|_1|X|_1), det |d-det|/|det| (long double; 0 for an overflow to +-inf that the\n"
               "dtype's rounding of det gives too), qr (reduced) max(|A-QR|_F/|A|_F, |Q^TQ-I|_F), eigh max(|AV-VW|_F/|A|_F, |V^TV-I|_F), svd (reduced) max(|A-USV^T|_F/|A|_F,\n"
               "|U^TU-I|_F, |V^TV-I|_F); the worst of %d sample matrices; eigh and svd on the first %s matrices\n",
               N_SAMPLES, is_cuda ? "1000 (n = 64), 200 (128), 100 (256)" : "200 (n = 64), 32 (128), 8 (256)");
    return failures ? CLI_ERROR : CLI_OK;
}
