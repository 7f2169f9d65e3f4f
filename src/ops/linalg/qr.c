/* qr.c — Householder QR of batches of matrices (alloy/linalg.h): alloy_qr
 * with NumPy's modes (reduced, complete, r, raw), and the launcher of the QR
 * kernels that lstsq.c and orthogonal.c share (qr_internal.h).
 *
 * The factorization is LAPACK's geqrf (Householder reflectors with dlarfg's
 * sign choice) and Q is formed as orgqr forms it, in the same launch. The
 * kernel is chosen per device: on the CPU one thread per matrix
 * (qr_serial); on a GPU one matrix per 8, 16 or 32 lanes of a SIMD group
 * for m <= 32 and at most 32 columns of work (qr_householder, several
 * matrices per threadgroup), else one threadgroup per matrix
 * (qr_householder with 4 or 8 SIMD groups), the matrix in threadgroup
 * memory while it fits and in device scratch otherwise. Sizes are launch
 * constants, so a new shape never recompiles a kernel; nothing waits for
 * the device. */
#include <stdint.h>
#include <string.h>

#include "alloy/alloy.h"
#include "alloy/linalg.h"
#include "core/error.h"
#include "ops/catalog.h"
#include "ops/linalg/lu_internal.h"
#include "ops/linalg/matrix_operand.h"
#include "ops/linalg/qr_internal.h"

static const char SERIAL_FILE[] = "src/ops/linalg/kernels/qr_serial.metal";
static const char HH_FILE[] = "src/ops/linalg/kernels/qr_householder.metal";

static alloy_qr_path forced_path = ALLOY_QR_PATH_AUTO;

void alloy_qr_force_path(alloy_qr_path path) { forced_path = path; }

/* Bytes of dynamic threadgroup memory a kernel may take on dev (the opt-in
 * limit of the GPU's generation less room for static arrays; the CPU gives
 * each worker its own block, so there it only bounds the allocation). */
static size_t smem_budget(alloy_device *dev) {
    if (alloy_device_backend(dev) != ALLOY_BACKEND_CUDA) return (size_t)64 << 20;
    const int cc = alloy_device_compute_capability(dev);
    if (cc >= 90) return (size_t)220 << 10;
    if (cc == 80 || cc == 87) return (size_t)160 << 10;
    if (cc >= 75) return (size_t)60 << 10;
    return (size_t)44 << 10;
}

typedef struct qr_plan {
    alloy_qr_path path;
    int64_t ld;        /* row stride of the working copy */
    int s, wg;         /* qr_householder: lanes per unit, units per matrix */
    uint32_t threads;  /* per threadgroup */
    int64_t per_group; /* matrices per threadgroup */
    size_t smem;       /* dynamic threadgroup memory per threadgroup */
} qr_plan;

static alloy_status plan_for(const char *fn, const alloy_qr_job *j, alloy_qr_path path, qr_plan *p) {
    const int64_t m = j->m, n = j->n, k = m < n ? m : n;
    const int64_t kq = j->mode == ALLOY_QRK_COMPLETE ? m
                       : (j->mode == ALLOY_QRK_REDUCED || j->mode == ALLOY_QRK_Q) ? k
                                                                                  : 0;
    const int64_t nw = n > kq ? n : kq;
    const size_t es = alloy_dtype_size(j->dt);
    const size_t budget = smem_budget(j->dev);
    const int cpu = alloy_device_backend(j->dev) == ALLOY_BACKEND_CPU;
    const int64_t side = 2 * m + 2 * k + 2;
    if (path == ALLOY_QR_PATH_AUTO) {
        if (cpu) path = ALLOY_QR_PATH_SERIAL;
        else if (m <= 32 && nw <= 32) path = ALLOY_QR_PATH_SIMD;
        else if ((size_t)(m * (nw | 1) + side) * es <= budget) path = ALLOY_QR_PATH_TG_SMEM;
        else path = ALLOY_QR_PATH_TG_DEVICE;
    }
    memset(p, 0, sizeof *p);
    p->path = path;
    switch (path) {
    case ALLOY_QR_PATH_SERIAL:
        p->ld = nw > 0 ? nw : 1;
        p->threads = 1;
        p->per_group = 1;
        p->smem = (size_t)(m * p->ld + p->ld + side) * es;
        break;
    case ALLOY_QR_PATH_SIMD:
        p->s = m <= 8 ? 8 : m <= 16 ? 16 : 32;
        p->wg = 1;
        p->threads = 64;
        p->per_group = 64 / p->s;
        p->ld = nw | 1;
        p->smem = (size_t)(p->per_group * (m * p->ld + side)) * es;
        break;
    case ALLOY_QR_PATH_TG_SMEM:
    case ALLOY_QR_PATH_TG_DEVICE:
        p->s = 32;
        p->wg = m * nw <= 64 * 64 ? 4 : 8;
        p->threads = (uint32_t)(32 * p->wg);
        p->per_group = 1;
        p->ld = path == ALLOY_QR_PATH_TG_SMEM ? (nw | 1) : (nw > 0 ? nw : 1);
        p->smem = (size_t)((path == ALLOY_QR_PATH_TG_SMEM ? m * p->ld : 0) + side) * es;
        break;
    default:
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: unknown QR kernel path %d", fn, (int)path);
    }
    if (p->smem > budget)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED,
                           "%s: %lld x %lld matrices need %zu bytes of threadgroup memory on this path, more than "
                           "%s offers (%zu)",
                           fn, (long long)m, (long long)n, p->smem, alloy_device_name(j->dev), budget);
    return ALLOY_OK;
}

alloy_status alloy_qr_launch(const char *fn, const alloy_qr_job *j, alloy_array *a, alloy_array *q,
                             alloy_array *r, alloy_stream *stream) {
    if (j->batch == 0) return ALLOY_OK;
    if (j->m > INT32_MAX / 4 || j->n > INT32_MAX / 4)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: %lld x %lld matrices are too large", fn, (long long)j->m,
                           (long long)j->n);
    qr_plan p;
    alloy_status st = plan_for(fn, j, forced_path, &p);
    if (st != ALLOY_OK) return st;
    const int64_t groups = (j->batch + p.per_group - 1) / p.per_group;
    if (groups > (int64_t)(UINT32_MAX / 2) / p.threads)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: %lld matrices are too many for one launch (split the batch)",
                           fn, (long long)j->batch);
    /* outputs the mode does not have get a one-element stand-in the kernel
     * never touches; the device path's scratch is allocated here */
    alloy_array *dummy = NULL, *ws = NULL;
    const int64_t one = 1;
    st = alloy_array_new(j->dev, j->dt, 1, &one, &dummy);
    if (st == ALLOY_OK && p.path == ALLOY_QR_PATH_TG_DEVICE) {
        const int64_t wshape[3] = {j->batch, j->m > 0 ? j->m : 1, p.ld};
        st = alloy_array_new(j->dev, j->dt, 3, wshape, &ws);
    }
    alloy_kernel *k = NULL;
    alloy_launch *l = NULL;
    const char *file = p.path == ALLOY_QR_PATH_SERIAL ? SERIAL_FILE : HH_FILE;
    if (st == ALLOY_OK) st = alloy_catalog_kernel(file, &k);
    if (st == ALLOY_OK) st = alloy_launch_new(&l);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, q ? q : dummy);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, r ? r : dummy);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, ws ? ws : dummy);
    if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "T", j->dt);
    if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "MODE", j->mode);
    if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "SIGNFIX", j->signfix != 0);
    if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "TRANS", j->trans != 0);
    if (st == ALLOY_OK && file == HH_FILE) {
        st = alloy_launch_add_template_int(l, "S", p.s);
        if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "WG", p.wg);
        if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "SMEM", p.path != ALLOY_QR_PATH_TG_DEVICE);
    }
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "m", ALLOY_INT32, j->m);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "n", ALLOY_INT32, j->n);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "ld", ALLOY_INT32, p.ld);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "batch", ALLOY_INT64, j->batch);
    if (st == ALLOY_OK) st = alloy_launch_set_constant(l, "gain", ALLOY_FLOAT64, j->gain);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup_memory(l, p.smem > 16 ? p.smem : 16);
    if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)(groups * p.threads), 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, p.threads, 1, 1);
    alloy_array *ins[1] = {a}, *res[3] = {NULL, NULL, NULL};
    if (st == ALLOY_OK) st = alloy_kernel_apply(k, 1, ins, l, stream, res);
    for (int i = 0; i < 3; i++) alloy_array_free(res[i]);
    alloy_launch_free(l);
    alloy_array_free(ws);
    alloy_array_free(dummy);
    return st;
}

/* ---- alloy_qr ----------------------------------------------------------------- */

alloy_status alloy_qr(alloy_array *a, alloy_qr_mode mode, alloy_stream *stream, alloy_array **q, alloy_array **r) {
    static const char fn[] = "alloy_qr";
    if (!a) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: a is NULL", fn);
    if (mode != ALLOY_QR_REDUCED && mode != ALLOY_QR_COMPLETE && mode != ALLOY_QR_R && mode != ALLOY_QR_RAW)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: mode is %d; it must be ALLOY_QR_REDUCED, ALLOY_QR_COMPLETE, ALLOY_QR_R or ALLOY_QR_RAW",
                           fn, (int)mode);
    const char *qname = mode == ALLOY_QR_RAW ? "h (q)" : "q";
    const char *rname = mode == ALLOY_QR_RAW ? "tau (r)" : "r";
    if (mode != ALLOY_QR_R && !q)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: q is NULL (pass the address of an alloy_array *: NULL for a new array)", fn);
    if (!r)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: r is NULL (pass the address of an alloy_array *: NULL for a new array)", fn);
    alloy_status chk = alloy_linalg_check_matrix(fn, a, stream);
    if (chk != ALLOY_OK) return chk;
    const int nd = alloy_array_ndim(a);
    const alloy_dtype dt = alloy_array_dtype(a);
    alloy_device *dev = alloy_array_device(a);
    const int64_t *sh = alloy_array_shape(a);
    const int64_t m = sh[nd - 2], n = sh[nd - 1], k = m < n ? m : n;
    alloy_qr_job j = {dev, dt, 1, m, n, 0, 0, 0, 1.0};
    for (int d = 0; d < nd - 2; d++) j.batch *= sh[d];
    int64_t qs[ALLOY_MAX_NDIM], rs[ALLOY_MAX_NDIM];
    memcpy(qs, sh, sizeof(int64_t) * (size_t)nd);
    memcpy(rs, sh, sizeof(int64_t) * (size_t)nd);
    int rnd = nd;
    switch (mode) {
    case ALLOY_QR_REDUCED: j.mode = ALLOY_QRK_REDUCED; qs[nd - 1] = k; rs[nd - 2] = k; break;
    case ALLOY_QR_COMPLETE: j.mode = ALLOY_QRK_COMPLETE; qs[nd - 1] = m; break;
    case ALLOY_QR_R: j.mode = ALLOY_QRK_R; rs[nd - 2] = k; break;
    default: j.mode = ALLOY_QRK_RAW; rnd = nd - 1; rs[nd - 2] = k; break;
    }
    alloy_array *Q = NULL, *R = NULL;
    int newQ = 0, newR = 0;
    alloy_status st = ALLOY_OK;
    if (mode != ALLOY_QR_R) st = alloy_lu_prepare_out(fn, qname, q, dev, dt, nd, qs, &Q, &newQ);
    if (st == ALLOY_OK) st = alloy_lu_prepare_out(fn, rname, r, dev, dt, rnd, rs, &R, &newR);
    if (st == ALLOY_OK && Q && R && Q == R)
        st = alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s and %s are the same array", fn, qname, rname);
    if (st == ALLOY_OK) st = alloy_qr_launch(fn, &j, a, Q, R, stream);
    if (st != ALLOY_OK) {
        if (newQ) alloy_array_free(Q);
        if (newR) alloy_array_free(R);
        return st;
    }
    if (newQ) *q = Q;
    if (newR) *r = R;
    return ALLOY_OK;
}
