/* alloy/linalg.h — the catalog's dense linear algebra: matrix products.
 *
 * Catalog operations are kernels of the library's own (src/ops/linalg/
 * kernels/, one .metal file each) launched through the public runtime. Each validates its
 * arguments (an error names the argument), runs on the given stream (NULL:
 * the inputs' device's default stream), never waits for the device, and
 * allocates nothing on the device when the caller gives the output. */
#ifndef ALLOY_LINALG_H
#define ALLOY_LINALG_H

#include "status.h"
#include "dtype.h"
#include "device.h"
#include "array.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct alloy_matmul_options {
    int transpose_a;           /* use the transpose of a's last two dimensions */
    int transpose_b;
    double alpha, beta;        /* out = alpha * a b + beta * out (beta needs a given out) */
    alloy_precision precision;
    int out_dtype_set;         /* 1: out_dtype below; 0: the inputs' dtype */
    alloy_dtype out_dtype;
} alloy_matmul_options;

/* transpose 0, alpha 1, beta 0, precision highest, the inputs' dtype. */
void alloy_matmul_options_init(alloy_matmul_options *options);

/* NumPy's matmul: a (..., M, K) times b (..., K, N) -> (..., M, N), leading
 * dimensions broadcast; a 1-D a is a row (its M dimension is dropped from the
 * result), a 1-D b a column (N dropped). a and b: the same dtype, float32,
 * float16, bfloat16 or float64, on the same device; any strides (transposed
 * and strided views are read in place). The result dtype is any of those
 * four.
 * `*out` NULL: a new array is returned there (caller frees; beta must be 0).
 * `*out` an array: it receives the result (it must have the result's shape
 * and dtype, live on the same device and be row-contiguous; beta may be
 * non-zero) and stays the caller's. `options` NULL: the defaults. */
alloy_status alloy_matmul(alloy_array *a, alloy_array *b, const alloy_matmul_options *options,
                          alloy_stream *stream, alloy_array **out);

/* ---- Cholesky and triangular solves ---- */

/* Which triangle a Cholesky factorization reads and returns. */
typedef struct alloy_cholesky_options {
    int upper; /* 0 (default): A = L L^T, a's lower triangle is read and L returned (NumPy);
                  1: A = U^T U, a's upper triangle is read and U returned */
} alloy_cholesky_options;

/* upper 0. */
void alloy_cholesky_options_init(alloy_cholesky_options *options);

/* LAPACK's potrf for a batch: a is (..., n, n), float32 or float64, any
 * strides; only the triangle named by options->upper is read. The factor
 * goes to `*out` ((..., n, n), a's dtype, row-major) with zeros in the other
 * triangle. `*info` receives an int32 array of the batch shape (...): 0 where
 * the factorization succeeded, else the 1-based order of the first leading
 * minor that is not positive definite (a pivot <= 0 or NaN); that matrix's
 * factor then holds the factor's first info-1 columns and, in rows and
 * columns >= info-1, the Schur complement left at that point (its first
 * diagonal element is the failed pivot); see docs/linalg.md. No other matrix
 * of the batch is affected.
 * `*out` / `*info` NULL: new arrays are returned there (caller frees); given:
 * they must have those shapes and dtypes, live on a's device and be
 * row-contiguous. `info` itself may be NULL (the codes are then discarded).
 * `options` NULL: the defaults. */
alloy_status alloy_cholesky(alloy_array *a, const alloy_cholesky_options *options, alloy_stream *stream,
                            alloy_array **out, alloy_array **info);

/* LAPACK's potrs for a batch: solves A X = B given the Cholesky factor of
 * A (as alloy_cholesky returns it: lower L with options->upper 0, upper U
 * with 1; only that triangle is read). factor is (..., n, n); b is
 * (..., n, k) or a 1-D (n,) (one right-hand side; the result is then
 * (..., n)); the leading dimensions broadcast (NumPy). Both float32 or
 * both float64, on one device. `*out` as in alloy_matmul: NULL for a new
 * array, or a row-contiguous array of the result's shape and dtype. */
alloy_status alloy_cholesky_solve(alloy_array *factor, alloy_array *b, const alloy_cholesky_options *options,
                                  alloy_stream *stream, alloy_array **out);

/* What a triangular solve solves (scipy.linalg.solve_triangular, LAPACK
 * trsm). */
typedef struct alloy_triangular_options {
    int lower;         /* 1: a is lower triangular; 0 (default, as SciPy): upper */
    int transpose;     /* 1: solve with a^T */
    int unit_diagonal; /* 1: a's diagonal is taken as ones and not read */
    int right;         /* 1: solve X op(a) = b; 0 (default): op(a) X = b */
} alloy_triangular_options;

/* lower 0, transpose 0, unit_diagonal 0, right 0. */
void alloy_triangular_options_init(alloy_triangular_options *options);

/* Solves op(a) X = b (or X op(a) = b with options->right) for a batch of
 * triangular a (..., n, n); only a's triangle (without the diagonal when
 * unit_diagonal) is read. b is (..., n, k) ((..., k, n) for the right side)
 * or a 1-D (n,) (one right-hand side; the result is then (..., n)); the
 * leading dimensions broadcast. float32 or float64, the same for both, on
 * one device. A zero on the diagonal is not checked: it gives Inf/NaN in
 * that matrix's solution, as trsm does. `*out` as in alloy_matmul. */
alloy_status alloy_solve_triangular(alloy_array *a, alloy_array *b, const alloy_triangular_options *options,
                                    alloy_stream *stream, alloy_array **out);

/* ---- LU factorization, solves, inverse, determinants ---- */
/* LU with partial pivoting and what is built on it (docs/linalg.md, "LU").
 * Every operand is a square matrix or a batch of them, (..., n, n) with any
 * leading dimensions (n >= 0, an empty batch is fine), float32 or float64,
 * all on one device; strided operands are read through a contiguous copy.
 * Outputs follow one rule: `*out` NULL receives a new row-contiguous array
 * (the caller frees it); `*out` an array is written in place (it must have
 * the documented shape and dtype, live on the operands' device and be
 * row-contiguous) and stays the caller's. Per-matrix results that LAPACK
 * reports in `info` are written to an int32 array on the device: nothing
 * waits for the device, so read it when you need it. */

/* LAPACK's getrf for each matrix: P A = L U with partial pivoting (the row
 * of largest |value| in the column, the first on ties; NaN counts as
 * larger than every number).
 * a (..., n, n) -> *lu (..., n, n): L below the diagonal (its unit diagonal
 * not stored) and U on and above it, exactly as LAPACK leaves them; `*lu ==
 * a` factors a in place (a must be row-contiguous).
 * *pivots (..., n) int32: LAPACK's ipiv, 1-based: at step k row k was
 * interchanged with row pivots[k] - 1 (>= k + 1).
 * info (may be NULL: not wanted) -> *info (...) int32: 0, or k + 1 for the
 * first step k whose pivot is exactly zero (U(k,k) = 0: the matrix is
 * singular); the factorization is completed all the same, as LAPACK's. */
alloy_status alloy_lu_factor(alloy_array *a, alloy_stream *stream, alloy_array **lu, alloy_array **pivots,
                             alloy_array **info);

/* LAPACK's getrs: solves A X = B (transpose 0) or A^T X = B (transpose
 * non-zero) for each matrix, from lu and pivots as alloy_lu_factor gives
 * them (pivots int32 (..., n); an entry outside [1, n] acts as no
 * interchange). b is (..., n, k) (k >= 0 right-hand sides) or (..., n) (one
 * per matrix), with lu's leading dimensions (they do not broadcast) and
 * dtype. *x has b's shape; `*x == b` solves in place (b row-contiguous). A
 * singular factor (info > 0) gives inf/NaN in that matrix's x, as LAPACK. */
alloy_status alloy_lu_solve(alloy_array *lu, alloy_array *pivots, alloy_array *b, int transpose,
                            alloy_stream *stream, alloy_array **x);

/* NumPy's linalg.solve: A X = B for each matrix, factor and solve in one
 * call (the factor lives in scratch memory of the call). a (..., n, n), b
 * (..., n, k) or (..., n) as in alloy_lu_solve; *x has b's shape (`*x == b`
 * is fine). info (may be NULL) -> *info (...) int32 as alloy_lu_factor's:
 * where it is non-zero that matrix is singular and its x holds inf/NaN. */
alloy_status alloy_solve(alloy_array *a, alloy_array *b, alloy_stream *stream, alloy_array **x,
                         alloy_array **info);

/* NumPy's linalg.inv: a (..., n, n) -> *inverse (..., n, n) (`*inverse ==
 * a` is fine), from the LU factorization (getrf, then getrs on the
 * identity). info as alloy_solve's. */
alloy_status alloy_inv(alloy_array *a, alloy_stream *stream, alloy_array **inverse, alloy_array **info);

/* NumPy's linalg.det: a (..., n, n) -> *det (...) of a's dtype (0-d for one
 * matrix): (-1)^(interchanges) times the product of U's diagonal, in order;
 * 0 for a singular matrix, 1 for n = 0. */
alloy_status alloy_det(alloy_array *a, alloy_stream *stream, alloy_array **det);

/* NumPy's linalg.slogdet: a (..., n, n) -> *sign and *logabsdet (...) of
 * a's dtype, det = sign * exp(logabsdet) without overflow: sign +-1 and
 * logabsdet = sum log|U(k,k)|; a singular matrix (a zero on U's diagonal)
 * gives sign 0 and logabsdet -inf; otherwise NaN in the factor gives NaN in
 * both; n = 0 gives 1 and 0. */
alloy_status alloy_slogdet(alloy_array *a, alloy_stream *stream, alloy_array **sign, alloy_array **logabsdet);

/* ---- QR, least squares, orthogonal matrices ---- */
/* Householder QR and what is built on it (docs/linalg.md, "QR"). Operands
 * are a matrix or a batch of them, (..., m, n) with any leading dimensions
 * and any m, n >= 0 (tall, square or wide; empty batches are fine), float32
 * or float64, all on one device; strided operands are read through a
 * contiguous copy. Outputs follow the LU block's rule: `*out` NULL receives
 * a new row-contiguous array (the caller frees it); `*out` an array is
 * written in place (documented shape and dtype, the operands' device,
 * row-contiguous) and stays the caller's. Nothing waits for the device. */

/* NumPy's linalg.qr modes (k = min(m, n)). */
typedef enum alloy_qr_mode {
    ALLOY_QR_REDUCED = 0,  /* Q (..., m, k), R (..., k, n) */
    ALLOY_QR_COMPLETE = 1, /* Q (..., m, m), R (..., m, n) */
    ALLOY_QR_R = 2,        /* R (..., k, n) only (q is not used and may be NULL) */
    ALLOY_QR_RAW = 3       /* LAPACK geqrf's output: *q receives h (..., m, n), R on and above
                              the diagonal and the Householder vectors below it (row-major, not
                              NumPy's transposed h), *r receives tau (..., k) */
} alloy_qr_mode;

/* A = Q R by Householder reflections (LAPACK geqrf; Q formed as orgqr
 * forms it): Q has orthonormal columns, R is upper triangular with exact
 * zeros below the diagonal. R's diagonal has LAPACK's signs (not
 * normalised: R(j,j) = -sign(a) * norm of the column being reduced, where a
 * is its diagonal element; a column that is already zero below the
 * diagonal keeps its element and H_j = I). NaN in a matrix gives NaN in
 * that matrix's results only. */
alloy_status alloy_qr(alloy_array *a, alloy_qr_mode mode, alloy_stream *stream, alloy_array **q, alloy_array **r);

/* Options of alloy_lstsq. */
typedef struct alloy_lstsq_options {
    double rcond; /* rank test: info flags R(i,i) with |R(i,i)| <= rcond * max_j |R(j,j)|;
                     < 0 (default): max(m, n) * the dtype's machine epsilon (NumPy's default
                     rcond); 0: only exact zeros and NaN */
} alloy_lstsq_options;

/* rcond -1 (the default threshold). */
void alloy_lstsq_options_init(alloy_lstsq_options *options);

/* Least squares through QR for each matrix: a (..., m, n), b (..., m, k)
 * or (..., m) (one right-hand side per matrix) with a's leading dimensions
 * exactly (they do not broadcast) and dtype. m >= n: x minimises
 * ||a x - b||_2 (a = QR, x = R^-1 Q^T b); m < n: x is the minimum-norm
 * solution of a x = b (through the QR of a^T). *x is (..., n, k) or
 * (..., n). info (may be NULL: not wanted) -> *info (...) int32: 0, or
 * 1 + the first i where R(i,i) fails the rank test of options->rcond (a
 * rank-deficient, nearly so, or NaN matrix); that matrix's x is then NaN
 * everywhere (no basic or truncated solution is attempted; use an SVD for
 * those). `options` NULL: the defaults. */
alloy_status alloy_lstsq(alloy_array *a, alloy_array *b, const alloy_lstsq_options *options, alloy_stream *stream,
                         alloy_array **x, alloy_array **info);

/* Options of alloy_orthogonal. */
typedef struct alloy_orthogonal_options {
    double gain;   /* the result's scale (torch's gain); default 1 */
    uint64_t seed; /* the generator's seed: the same seed gives the same matrices; default 0 */
} alloy_orthogonal_options;

/* gain 1, seed 0. */
void alloy_orthogonal_options_init(alloy_orthogonal_options *options);

/* torch.nn.init.orthogonal_ for a batch: each (rows, cols) matrix of shape
 * (..., rows, cols) (ndim >= 2) is gain * Q of the QR of a standard normal
 * matrix, Q's columns multiplied by the signs of R's diagonal; rows < cols
 * use the QR of the transpose and return Q^T. So the result has
 * orthonormal columns (rows >= cols) or rows (rows < cols), times gain.
 * Each matrix is independent (torch flattens the trailing dimensions of a
 * tensor of more than 2 dimensions into cols instead). The Gaussian
 * samples are a function of (seed, element index). dtype float32 or
 * float64; device NULL: out's device if out is given, else the stream's.
 * `*out` NULL: a new array; given: it must have this shape and dtype. */
alloy_status alloy_orthogonal(alloy_device *device, alloy_dtype dtype, int ndim, const int64_t *shape,
                              const alloy_orthogonal_options *options, alloy_stream *stream, alloy_array **out);

/* Orthonormal columns (m >= n) or rows (m < n: through the QR of a^T) of
 * each matrix of a (..., m, n) -> *out of a's shape and dtype: Q with the
 * sign fix of alloy_orthogonal (column j is multiplied by the sign of
 * R(j,j), a zero counting as +), so for a full-rank a it is the factor
 * Gram-Schmidt would give. `*out == a` is fine. */
alloy_status alloy_orthonormalize(alloy_array *a, alloy_stream *stream, alloy_array **out);

/* ---- Symmetric eigendecomposition and SVD ---- */
/* Batches of small matrices (docs/linalg.md, "Symmetric eigendecomposition
 * and SVD"; Jacobi methods, except eigh on a GPU for 32 < n <= 256:
 * Householder tridiagonalisation and implicit QL): a (..., n, n) or (..., m, n) with any
 * leading dimensions (an empty batch and n = 0 are fine), float32 or
 * float64, any strides (read in place). Outputs follow the LU rule: `*out`
 * NULL receives a new row-contiguous array (the caller frees it); an array
 * is written in place (documented shape and dtype, a's device,
 * row-contiguous) and stays the caller's. `info` (may be NULL: not wanted)
 * -> *info, int32 of the batch shape (...): 0 converged; 1 a NaN or Inf in
 * the matrix read (every output of that matrix is NaN); 2 not converged
 * within the sweep limit (the outputs hold the last sweep's decomposition:
 * orthonormal eigenvectors and V, U's columns normalised but not yet
 * orthogonal, values accurate to the part not yet diagonalised). No other
 * matrix of the batch is affected. Nothing waits for the device. */

typedef struct alloy_eigh_options {
    int upper;           /* 0 (default, NumPy's UPLO='L'): a's lower triangle is read; 1: the upper */
    int compute_vectors; /* 1 (default): eigenvectors too; 0: eigenvalues only (v is not used) */
    int max_sweeps;      /* Jacobi sweeps before giving up (info 2); on a GPU for 32 < n <= 256 the QL
                            iterations allowed per eigenvalue; 0: the default, 30 */
} alloy_eigh_options;

/* upper 0, compute_vectors 1, max_sweeps 0 (30). */
void alloy_eigh_options_init(alloy_eigh_options *options);

/* NumPy's linalg.eigh (LAPACK syev) for a batch of symmetric matrices:
 * a (..., n, n), only the triangle named by options->upper read.
 * *w (..., n): the eigenvalues in ascending order; *v (..., n, n): the
 * orthonormal eigenvectors as columns (v[..., :, k] belongs to w[..., k];
 * the sign of each is not fixed, as in LAPACK), only with compute_vectors
 * (v may then not be NULL; without it v is ignored and may be NULL). */
alloy_status alloy_eigh(alloy_array *a, const alloy_eigh_options *options, alloy_stream *stream,
                        alloy_array **w, alloy_array **v, alloy_array **info);

typedef struct alloy_svd_options {
    int compute_uv;    /* 1 (default): U and V^T too; 0: the singular values only (u, vh not used) */
    int full_matrices; /* 1 (default, NumPy): U (..., m, m) and V^T (..., n, n); 0: (..., m, k), (..., k, n) */
    int max_sweeps;    /* Jacobi sweeps before giving up (info 2); 0: the default, 60 */
} alloy_svd_options;

/* compute_uv 1, full_matrices 1, max_sweeps 0 (30). */
void alloy_svd_options_init(alloy_svd_options *options);

/* NumPy's linalg.svd for a batch of matrices, a = U diag(s) V^T: a (..., m,
 * n), k = min(m, n). *s (..., k): the singular values, descending, >= 0.
 * With compute_uv: *u (..., m, m) (full_matrices) or (..., m, k) with
 * orthonormal columns, *vh (..., n, n) or (..., k, n) with orthonormal rows
 * (u and vh may then not be NULL; without compute_uv they are ignored and
 * may be NULL). One-sided Jacobi on the columns of a (of a^T when m < n). */
alloy_status alloy_svd(alloy_array *a, const alloy_svd_options *options, alloy_stream *stream,
                       alloy_array **u, alloy_array **s, alloy_array **vh, alloy_array **info);

#ifdef __cplusplus
}
#endif
#endif
