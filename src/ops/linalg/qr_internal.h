/* qr_internal.h — what qr.c shares with lstsq.c, orthogonal.c and the
 * tests: one launch of the Householder QR kernels on a batch of contiguous
 * matrices, with the kernel chosen per device or forced (the tests run each
 * GPU kernel configuration on the CPU this way). */
#ifndef ALLOY_OPS_LINALG_QR_INTERNAL_H
#define ALLOY_OPS_LINALG_QR_INTERNAL_H

#include "alloy/alloy.h"
#include "alloy/linalg.h"

/* Which kernel runs. */
typedef enum alloy_qr_path {
    ALLOY_QR_PATH_AUTO = 0,      /* chosen per device, m and n (qr.c) */
    ALLOY_QR_PATH_SERIAL = 1,    /* qr_serial: one thread per matrix (the CPU's) */
    ALLOY_QR_PATH_SIMD = 2,      /* qr_householder, one matrix per 8/16/32 lanes of a SIMD group */
    ALLOY_QR_PATH_TG_SMEM = 3,   /* qr_householder, one threadgroup per matrix, matrix in threadgroup memory */
    ALLOY_QR_PATH_TG_DEVICE = 4  /* qr_householder, one threadgroup per matrix, matrix in device scratch */
} alloy_qr_path;

/* What the kernels compute (their MODE template). */
enum {
    ALLOY_QRK_REDUCED = 0, /* Q (m, k), R (k, n) */
    ALLOY_QRK_COMPLETE = 1,/* Q (m, m), R (m, n) */
    ALLOY_QRK_R = 2,       /* R (k, n) */
    ALLOY_QRK_RAW = 3,     /* h (m, n), tau (k) */
    ALLOY_QRK_Q = 4        /* Q (m, k) only (with the sign fix for orthogonal matrices) */
};

/* One batch of matrices M (m x n each); the input holds M, or M^T when
 * trans (then Q is written transposed too). */
typedef struct alloy_qr_job {
    alloy_device *dev;
    alloy_dtype dt;
    int64_t batch, m, n;
    int mode;    /* ALLOY_QRK_* */
    int signfix; /* ALLOY_QRK_Q: Q(:, c) *= gain * sign(R(c, c)), sign(0) = +1 */
    int trans;
    double gain;
} alloy_qr_job;

/* Launches the job: a (row-contiguous after the runtime's copy) -> q, r
 * (either may be NULL where the mode has no such output; q may be a). `fn`
 * names the public function in errors. */
alloy_status alloy_qr_launch(const char *fn, const alloy_qr_job *job, alloy_array *a, alloy_array *q,
                             alloy_array *r, alloy_stream *stream);

/* Forces the kernel of every later QR launch in the process (tests only;
 * not thread-safe). ALLOY_QR_PATH_AUTO restores the choice per device. */
void alloy_qr_force_path(alloy_qr_path path);

/* The same for the least-squares solve kernel: 0 automatic, 1 the serial
 * kernel, 2 the SIMD-group kernel. */
void alloy_lstsq_force_solve_path(int path);

#endif
