"""alloy.linalg — the catalog's dense linear algebra.

``matmul(a, b)`` is NumPy's ``a @ b`` (leading dimensions broadcast; a 1-D
``a`` is a row, a 1-D ``b`` a column) on the operands' device, with
transposes, scaling and an output array of your own::

    c = alloy.linalg.matmul(a, b)                         # a new alloy.Array
    alloy.linalg.matmul(a, b, out=c, alpha=2.0, beta=1.0) # c = 2 a b + c, in place
    alloy.linalg.matmul(w, x, transpose_a=True, dtype=alloy.float32)

The factorizations and solves of batches of square matrices carry NumPy's
and SciPy's names and conventions (float32 and float64, any leading
dimensions)::

    l = alloy.linalg.cholesky(a)                  # a = l l^T, numpy.linalg.cholesky
    x = alloy.linalg.cholesky_solve(l, b)         # a x = b from the factor
    x = alloy.linalg.solve_triangular(l, b, lower=True)
    lu, piv = alloy.linalg.lu_factor(a)           # scipy.linalg.lu_factor (0-based piv)
    x = alloy.linalg.lu_solve((lu, piv), b)
    x = alloy.linalg.solve(a, b)                  # numpy.linalg.solve
    ai = alloy.linalg.inv(a)
    d = alloy.linalg.det(a)
    sign, logabsdet = alloy.linalg.slogdet(a)

QR and what is built on it take tall, square and wide matrices::

    q, r = alloy.linalg.qr(a)                     # numpy.linalg.qr (modes: reduced, complete, r, raw)
    x = alloy.linalg.lstsq(a, b)                  # numpy.linalg.lstsq's x (QR; min-norm when wide)
    w = alloy.linalg.orthogonal((64, 256), gain=1.0, seed=3)   # torch.nn.init.orthogonal_
    q = alloy.linalg.orthonormalize(a)            # orthonormal columns of a (rows when wide)

The symmetric eigendecomposition and the SVD are Jacobi methods (eigh on a
GPU for 32 < n <= 256: Householder tridiagonalisation and QL)::

    w, v = alloy.linalg.eigh(a)                   # numpy.linalg.eigh: w ascending, a v = v diag(w)
    w = alloy.linalg.eigvalsh(a)
    u, s, vh = alloy.linalg.svd(a)                # numpy.linalg.svd (full_matrices, compute_uv)
    s = alloy.linalg.svdvals(a)                   # descending

Where LAPACK reports a failed matrix in ``info`` (Cholesky of a matrix that
is not positive definite, LU of a singular one; lstsq of a rank-deficient
one; eigh and svd of a matrix with NaN or Inf, or one that did not converge),
``check=True`` (the default) reads ``info`` — which waits for the
device — and raises :class:`LinAlgError` naming the failing batch indices;
``check=False`` does not wait and returns ``info`` (an int32 alloy.Array of
the batch shape) as the last element of a tuple.

Operands are any arrays alloy takes (NumPy, PyTorch, CuPy, JAX through
DLPack, or alloy.Array); results are alloy.Array on the operands' device,
written on ``stream=`` (an alloy.Stream, a torch or CuPy stream). See
docs/linalg.md for the kernels, the precisions and their errors.
"""
from collections import namedtuple

from ._alloy import (
    Error,
    InvalidArgumentError,
    _cholesky,
    _cholesky_solve,
    _det,
    _eigh,
    _info_failures,
    _inv,
    _lu_factor,
    _lu_solve,
    _lstsq,
    _matmul,
    _orthogonal,
    _orthonormalize,
    _qr,
    _slogdet,
    _solve,
    _solve_triangular,
    _svd,
)

__all__ = ["LinAlgError", "SlogdetResult", "matmul", "cholesky", "cholesky_solve", "cho_solve",
           "solve_triangular", "lu_factor", "lu_solve", "solve", "inv", "det", "slogdet", "QRResult", "qr",
           "lstsq", "orthogonal", "orthonormalize", "EighResult", "eigh", "eigvalsh", "SVDResult", "svd",
           "svdvals"]

try:  # NumPy's class too, so `except numpy.linalg.LinAlgError` catches ours
    from numpy.linalg import LinAlgError as _NumPyLinAlgError
except ImportError:  # NumPy's LinAlgError is a ValueError; so is ours without it
    _NumPyLinAlgError = ValueError


class LinAlgError(Error, _NumPyLinAlgError):
    """A factorization failed for some matrices of a batch (LAPACK's info > 0).

    A subclass of :class:`alloy.Error` and of ``numpy.linalg.LinAlgError``
    (of ``ValueError`` when NumPy is not installed). ``indices``: the batch
    indices of the failing matrices (tuples; ``()`` for a single matrix),
    ``codes``: their ``info`` values, ``info``: the whole info array. The
    results were written all the same (``out=`` holds them).
    """

    status = None

    def __init__(self, message, indices=(), codes=(), info=None):
        super().__init__(message)
        self.indices = list(indices)
        self.codes = list(codes)
        self.info = info


SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
SlogdetResult.__doc__ = "numpy.linalg.slogdet's result: det = sign * exp(logabsdet)."


def _unravel(flat, shape):
    index = []
    for d in reversed(shape):
        index.append(flat % d)
        flat //= d
    return tuple(reversed(index))


_MAX_LISTED = 8


def _check_info(op, info, failure, describe):
    """Raises LinAlgError when info has non-zero codes (waits for the device).

    failure: what a failed matrix is ("not positive definite"); describe(code):
    the detail of one failure ("the leading minor of order 3")."""
    failed = _info_failures(info)
    if not failed:
        return
    shape = tuple(info.shape)
    indices = [_unravel(i, shape) for i, _ in failed]
    codes = [c for _, c in failed]
    if not shape:
        msg = f"{op}: the matrix is {failure} ({describe(codes[0])})"
    else:
        total = 1
        for d in shape:
            total *= d
        listed = "; ".join(f"batch index {idx}: {describe(c)}"
                           for idx, c in zip(indices[:_MAX_LISTED], codes[:_MAX_LISTED]))
        more = f"; and {len(failed) - _MAX_LISTED} more" if len(failed) > _MAX_LISTED else ""
        what = "matrices is" if len(failed) == 1 else "matrices are"
        msg = f"{op}: {len(failed)} of {total} {what} {failure}: {listed}{more}"
    raise LinAlgError(msg, indices, codes, info)


def _not_spd(op, info):
    _check_info(op, info, "not positive definite",
                lambda c: f"the leading minor of order {c} is not positive definite or holds a NaN")


def _singular(op, info):
    _check_info(op, info, "singular", lambda c: f"U[{c - 1}, {c - 1}] is exactly zero")


def _trans(trans):
    """SciPy's trans: 0/'N' -> no transpose, 1/'T' and 2/'C' (real data) -> transpose."""
    codes = {0: 0, 1: 1, 2: 1, "N": 0, "T": 1, "C": 1}
    if isinstance(trans, str):
        trans = trans.upper()
    if isinstance(trans, bool) or trans not in codes:
        raise InvalidArgumentError(f"trans is {trans!r}; it must be 0, 1, 2, 'N', 'T' or 'C'")
    return codes[trans]


# ---- products -------------------------------------------------------------------

def matmul(a, b, out=None, transpose_a=False, transpose_b=False, alpha=1.0, beta=0.0,
           precision="highest", dtype=None, stream=None):
    """``alpha * op(a) @ op(b) + beta * out``, op the transpose where asked.

    out: an array of the result's shape and dtype on the operands' device
    (row-contiguous) to write into and return; beta needs it. precision:
    "highest" (float32 products, exact or to 2^-32, and float32 sums), "high"
    (error no worse than a float32 GEMM's) or "default" (TF32 products where
    the device has them); docs/linalg.md says what each does on each device. dtype: the result's dtype (default: the operands', or out's).
    stream: the stream to run on (an alloy.Stream, a torch or CuPy stream).
    """
    return _matmul(a, b, out, bool(transpose_a), bool(transpose_b), float(alpha), float(beta),
                   precision, dtype, stream)


# ---- Cholesky and triangular solves --------------------------------------------

def cholesky(a, /, *, upper=False, check=True, out=None, stream=None):
    """numpy.linalg.cholesky: the factor L of a = L L^T (upper=True: U of a = U^T U).

    a: (..., n, n), float32 or float64; only the triangle named by upper is
    read. The other triangle of the result is zero. check=True: raises
    LinAlgError naming the matrices that are not positive definite (waits
    for the device); check=False: returns (factor, info), info int32 of the
    batch shape, 0 or LAPACK potrf's order of the failing leading minor.
    out: a row-contiguous array of a's shape and dtype to write the factor
    into (returned as given).
    """
    factor, info = _cholesky(a, bool(upper), out, stream)
    if not check:
        return factor, info
    _not_spd("cholesky", info)
    return factor


def cholesky_solve(c, b, /, *, upper=False, out=None, stream=None):
    """Solves a x = b from the Cholesky factor c of a (LAPACK potrs).

    c: (..., n, n) as cholesky returns it (lower, or upper with upper=True;
    only that triangle is read). b: (..., n, k), or 1-D (n,) for one vector
    (the result is then (..., n)); leading dimensions broadcast.
    """
    return _cholesky_solve(c, b, bool(upper), out, stream)


def cho_solve(c_and_lower, b, /, *, out=None, stream=None):
    """scipy.linalg.cho_solve: ``cho_solve((c, lower), b)`` is
    ``cholesky_solve(c, b, upper=not lower)``."""
    c, lower = c_and_lower
    return _cholesky_solve(c, b, not lower, out, stream)


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, *, left=True, out=None,
                     stream=None):
    """scipy.linalg.solve_triangular: op(a) x = b (left=False: x op(a) = b).

    a: (..., n, n) triangular (lower=False, SciPy's default: upper); only
    that triangle is read, and not the diagonal with unit_diagonal=True.
    trans: 0/'N' a, 1/'T' or 2/'C' a^T. b: (..., n, k) ((..., k, n) with
    left=False) or 1-D (n,); leading dimensions broadcast. A zero on the
    diagonal is not checked: that matrix's x holds inf/NaN.
    """
    return _solve_triangular(a, b, bool(lower), _trans(trans), bool(unit_diagonal), not left, out,
                             stream)


# ---- LU and what is built on it ---------------------------------------------------

def lu_factor(a, /, *, check=True, stream=None):
    """scipy.linalg.lu_factor for a batch: (lu, piv) with P a = L U.

    lu: (..., n, n), L below the diagonal (unit diagonal not stored) and U
    on and above it, as LAPACK getrf leaves them. piv: int32 (..., n),
    SciPy's 0-based pivots (row i was interchanged with row piv[i]); the C
    API's LAPACK 1-based ipiv is piv + 1. check=True: raises LinAlgError
    naming the singular matrices (an exactly zero U[k, k]; waits for the
    device); check=False returns (lu, piv, info), info int32 of the batch
    shape: 0 or k + 1 for the first zero pivot U[k, k].
    """
    lu, piv, info = _lu_factor(a, True, stream)
    if not check:
        return lu, piv, info
    _singular("lu_factor", info)
    return lu, piv


def lu_solve(lu_and_piv, b, trans=0, *, out=None, stream=None):
    """scipy.linalg.lu_solve: a x = b (trans=1 or 2: a^T x = b) from lu_factor's (lu, piv).

    piv: 0-based (SciPy's), any integer dtype; an entry outside [0, n) acts
    as no interchange. b: (..., n, k) or 1-D (n,); leading dimensions
    broadcast. A singular factor gives inf/NaN in that matrix's x (nothing
    is checked here: lu_factor's check does it).
    """
    lu, piv = lu_and_piv
    return _lu_solve(lu, piv, b, _trans(trans), True, out, stream)


def solve(a, b, /, *, check=True, out=None, stream=None):
    """numpy.linalg.solve: a x = b for each matrix (LU with partial pivoting).

    a: (..., n, n); b: (..., n, k), or 1-D (n,) for one vector shared by
    every matrix (NumPy 2's rule); leading dimensions broadcast. check=True
    raises LinAlgError naming the singular matrices (waits for the device);
    check=False returns (x, info), info as lu_factor's; a singular matrix's
    x holds inf/NaN.
    """
    x, info = _solve(a, b, out, stream)
    if not check:
        return x, info
    _singular("solve", info)
    return x


def inv(a, /, *, check=True, out=None, stream=None):
    """numpy.linalg.inv: the inverse of each matrix (LU, then the solve with I).

    check as solve's; check=False returns (inverse, info)."""
    x, info = _inv(a, out, stream)
    if not check:
        return x, info
    _singular("inv", info)
    return x


def det(a, /, *, stream=None):
    """numpy.linalg.det: (...) of a's dtype (0-d for one matrix); 0 for a
    singular matrix, 1 for n = 0. Never raises for singular matrices."""
    return _det(a, stream)


def slogdet(a, /, *, stream=None):
    """numpy.linalg.slogdet: SlogdetResult(sign, logabsdet), det = sign *
    exp(logabsdet) without overflow; sign 0 and logabsdet -inf for a
    singular matrix, NaN in both for a matrix whose factor has NaN."""
    sign, logabsdet = _slogdet(a, stream)
    return SlogdetResult(sign, logabsdet)


# ---- QR, least squares, orthogonal matrices ----------------------------------------

QRResult = namedtuple("QRResult", ["Q", "R"])
QRResult.__doc__ = "numpy.linalg.qr's result for modes 'reduced' and 'complete': a = Q @ R."

_QR_MODES = {"reduced": 0, "complete": 1, "r": 2, "raw": 3}


def qr(a, mode="reduced", *, stream=None):
    """numpy.linalg.qr for a batch: Householder QR (LAPACK geqrf, Q as orgqr forms it).

    a: (..., m, n), float32 or float64, tall, square or wide; k = min(m, n).
    mode "reduced": QRResult(Q (..., m, k), R (..., k, n)); "complete":
    QRResult(Q (..., m, m), R (..., m, n)); "r": R (..., k, n) only; "raw":
    (h (..., n, m), tau (..., k)), geqrf's output in NumPy's layout (h is the
    transpose of the factored matrix: R on and above the diagonal of h^T,
    the Householder vectors below it; the C API's h is h^T, row-major). R is
    upper triangular with exact zeros below the diagonal and LAPACK's (and
    NumPy's) signs on its diagonal. A NaN in a matrix gives NaN in that
    matrix's results only. Never raises for rank-deficient matrices.
    """
    if not isinstance(mode, str) or mode not in _QR_MODES:
        raise InvalidArgumentError(f"qr: mode is {mode!r}; it must be 'reduced', 'complete', 'r' or 'raw'")
    q, r = _qr(a, _QR_MODES[mode], stream)
    if mode == "r":
        return r
    if mode == "raw":
        return q, r
    return QRResult(q, r)


def lstsq(a, b, rcond=None, *, check=True, out=None, stream=None):
    """Least squares through QR: numpy.linalg.lstsq's x, for a batch.

    a: (..., m, n); b: (..., m, k), or 1-D (m,) for one vector shared by
    every matrix (the result is then (..., n)); leading dimensions
    broadcast as in solve. m >= n: x minimises ||a x - b||_2; m < n: x is the
    minimum-norm solution of a x = b. Returns x only (NumPy returns (x,
    residuals, rank, s): there is no SVD here).

    Rank: QR without pivoting does not reveal the rank, so a matrix with
    |R[i, i]| <= rcond * max_j |R[j, j]| (R of a, or of a^T when wide), or
    NaN on R's diagonal, is flagged rather than solved: its x is NaN.
    rcond None or negative: max(m, n) * eps of the dtype (NumPy's default);
    0: only exact zeros. (NumPy's rcond cuts singular values and returns the
    SVD's minimum-norm solution of a rank-deficient system instead.)
    check=True raises LinAlgError naming the rank-deficient matrices (waits
    for the device); check=False returns (x, info), info int32 of the batch
    shape: 0, or i + 1 for the first R[i, i] that fails the test.
    """
    x, info = _lstsq(a, b, -1.0 if rcond is None else float(rcond), out, stream)
    if not check:
        return x, info
    _check_info("lstsq", info, "rank-deficient",
                lambda c: f"|R[{c - 1}, {c - 1}]| <= rcond * max |R[j, j]|, or NaN")
    return x


def orthogonal(shape, gain=1.0, *, seed=0, dtype=None, device=None, out=None, stream=None):
    """torch.nn.init.orthogonal_ for a batch: gain * a random orthogonal matrix per (rows, cols).

    shape: (..., rows, cols), two dimensions or more; each matrix is gain *
    Q of the QR of a standard normal matrix, Q's columns times the signs of
    R's diagonal (Haar-distributed): orthonormal columns (rows >= cols) or
    rows (rows < cols), times gain. Every matrix of the leading dimensions is
    independent (torch flattens the dimensions after the first into cols
    instead: ask for (rows, prod(rest)) and reshape for that). The samples
    are alloy's own counter-based generator of (seed, element index): the
    same seed gives the same matrices on every run and device (up to
    rounding), not torch's numbers. dtype: float32 (default) or float64
    (default out's when out is given). device: default out's, else the
    stream's, else alloy's default device. out: an array of this shape and
    dtype to fill in place (a torch parameter, say) and return as given.
    """
    return _orthogonal(tuple(shape), float(gain), seed, dtype, device, out, stream)


def orthonormalize(a, /, *, out=None, stream=None):
    """Orthonormal columns (rows when wide) spanning each matrix of a (..., m, n).

    Q of a's QR (of a^T when m < n) with the sign fix of orthogonal (column j
    times the sign of R[j, j], zero counting as +): for a full-rank tall a,
    Q^T a is upper triangular with a positive diagonal, the basis
    Gram-Schmidt would give, computed stably. A rank-deficient a still gets
    an orthonormal Q. out: an array of a's shape and dtype (a itself is
    fine) to write into and return.
    """
    return _orthonormalize(a, out, stream)



# ---- symmetric eigendecomposition and SVD -------------------------------------------

EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
EighResult.__doc__ = ("numpy.linalg.eigh's result: a @ eigenvectors = eigenvectors * eigenvalues[..., None, :], "
                      "eigenvalues ascending.")
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])
SVDResult.__doc__ = "numpy.linalg.svd's result: a = (U[..., :, :k] * S[..., None, :]) @ Vh[..., :k, :], S descending."

_DEFAULT_SWEEPS = {"eigh": 30, "eigvalsh": 30, "svd": 60, "svdvals": 60}  # the C options' defaults (max_sweeps 0)


def _sweeps(op, max_sweeps):
    """max_sweeps for the C op (0: its default) and the number the messages name."""
    if max_sweeps is None:
        return 0, _DEFAULT_SWEEPS[op]
    if isinstance(max_sweeps, bool) or not isinstance(max_sweeps, int) or not 1 <= max_sweeps <= 2 ** 31 - 1:
        raise InvalidArgumentError(f"{op}: max_sweeps is {max_sweeps!r}; it must be an integer >= 1 "
                                   f"(None: the default, {_DEFAULT_SWEEPS[op]})")
    return max_sweeps, max_sweeps


def _jacobi_failed(op, info, sweeps):
    def describe(code):
        if code == 1:
            return "it has a NaN or Inf"
        if code == 2:
            return f"no convergence within max_sweeps={sweeps}"
        return f"info {code}"
    _check_info(op, info, "not decomposed", describe)


def _uplo(op, uplo):
    u = uplo.upper() if isinstance(uplo, str) else uplo
    if u not in ("L", "U"):
        raise InvalidArgumentError(f"{op}: UPLO is {uplo!r}; it must be 'L' or 'U'")
    return u == "U"


def eigh(a, UPLO="L", *, check=True, max_sweeps=None, stream=None):
    """numpy.linalg.eigh for a batch of symmetric matrices (two-sided Jacobi;
    on a GPU for 32 < n <= 256 Householder tridiagonalisation and QL).

    a: (..., n, n), float32 or float64; only the lower triangle (UPLO='L',
    NumPy's default) or the upper one (UPLO='U') is read. Returns
    EighResult(eigenvalues (..., n) ascending, eigenvectors (..., n, n)),
    column k the unit eigenvector of eigenvalue k (its sign is not fixed, as
    in LAPACK). max_sweeps: the Jacobi sweeps allowed (None: 30); on the
    tridiagonal path the QL iterations allowed per eigenvalue.

    check=True raises LinAlgError naming the matrices whose info is non-zero
    (a NaN or Inf read: that matrix's results are NaN; or no convergence
    within max_sweeps) — which waits for the device. check=False does not
    wait and returns (eigenvalues, eigenvectors, info), info int32 of the
    batch shape: 0, 1 (NaN or Inf) or 2 (not converged: the last sweep's
    decomposition).
    """
    c_sweeps, sweeps = _sweeps("eigh", max_sweeps)
    w, v, info = _eigh(a, _uplo("eigh", UPLO), True, c_sweeps, stream)
    if not check:
        return w, v, info
    _jacobi_failed("eigh", info, sweeps)
    return EighResult(w, v)


def eigvalsh(a, UPLO="L", *, check=True, max_sweeps=None, stream=None):
    """numpy.linalg.eigvalsh: the eigenvalues (..., n) of eigh, ascending (the same
    numbers, bit for bit). check=False returns (eigenvalues, info)."""
    c_sweeps, sweeps = _sweeps("eigvalsh", max_sweeps)
    w, _, info = _eigh(a, _uplo("eigvalsh", UPLO), False, c_sweeps, stream)
    if not check:
        return w, info
    _jacobi_failed("eigvalsh", info, sweeps)
    return w


def svd(a, full_matrices=True, compute_uv=True, *, check=True, max_sweeps=None, stream=None):
    """numpy.linalg.svd for a batch (one-sided Jacobi): a = U diag(S) Vh.

    a: (..., m, n), float32 or float64, tall, square or wide; k = min(m, n).
    Returns SVDResult(U, S, Vh): S (..., k) descending and >= 0; U (..., m, m)
    and Vh (..., n, n) with full_matrices (NumPy's default), else (..., m, k)
    and (..., k, n); compute_uv=False: S alone. The sign of each singular
    vector pair is not fixed. max_sweeps: the Jacobi sweeps allowed (None: 60).

    check=True raises LinAlgError naming the matrices whose info is non-zero
    (a NaN or Inf read: that matrix's results are NaN; or no convergence) —
    which waits for the device. check=False does not wait and returns (U, S,
    Vh, info), or (S, info) with compute_uv=False; info int32 of the batch
    shape: 0, 1 (NaN or Inf) or 2 (not converged).
    """
    c_sweeps, sweeps = _sweeps("svd", max_sweeps)
    u, s, vh, info = _svd(a, bool(full_matrices), bool(compute_uv), c_sweeps, stream)
    if not check:
        return (u, s, vh, info) if compute_uv else (s, info)
    _jacobi_failed("svd", info, sweeps)
    return SVDResult(u, s, vh) if compute_uv else s


def svdvals(a, /, *, check=True, max_sweeps=None, stream=None):
    """numpy.linalg.svdvals (NumPy 2): the singular values (..., min(m, n)),
    descending; svd(a, compute_uv=False). check=False returns (S, info)."""
    c_sweeps, sweeps = _sweeps("svdvals", max_sweeps)
    _, s, _, info = _svd(a, False, False, c_sweeps, stream)
    if not check:
        return s, info
    _jacobi_failed("svdvals", info, sweeps)
    return s
