"""alloy.linalg's QR family against NumPy in float64: qr (every mode),
lstsq, orthogonal and orthonormalize. Tall, square and wide matrices,
batches, empty shapes, float32 and float64, ill-conditioned, rank-deficient
and NaN matrices, and the errors. On the test device (ALLOY_TEST_DEVICE,
default alloy's default device; conftest.py)."""
import numpy as np
import pytest

import alloy

L = alloy.linalg
DTYPES = [np.float32, np.float64]
UNIT = {np.float32: 2.0 ** -24, np.float64: 2.0 ** -53}
EPS = {np.float32: 2.0 ** -23, np.float64: 2.0 ** -52}
MODES = ["reduced", "complete", "r", "raw"]


def dev(x, device):
    return alloy.asarray(x, device=device) if device else x


def host(x):
    return np.asarray(x, dtype=np.float64)


def T(x):
    return np.swapaxes(x, -1, -2)


def tol(dtype, m, n, factor=10):
    return factor * max(m, n, 1) * UNIT[dtype]


def fro(x):
    return np.linalg.norm(x, axis=(-2, -1)) if x.size else np.zeros(x.shape[:-2])


def backward(a, rebuilt):
    """max over the batch of ||a - rebuilt||_F / ||a||_F."""
    a, rebuilt = host(a), host(rebuilt)
    if a.size == 0:
        return 0.0
    den = fro(a)
    return float(np.max(fro(a - rebuilt) / np.where(den > 0, den, 1)))


def orth_error(q, rows=False, gain=1.0):
    """max over the batch of ||Q^T Q - gain^2 I||_F (Q Q^T for rows)."""
    q = host(q)
    g = q @ T(q) if rows else T(q) @ q
    if g.size == 0:
        return 0.0
    return float(np.max(fro(g - gain * gain * np.eye(g.shape[-1]))))


def conditioned(rng, batch, m, n, cond):
    """float64 matrices (batch..., m, n) with singular values from 1 down to 1/cond."""
    k = min(m, n)
    if k == 0:
        return np.zeros(batch + (m, n))
    u = np.linalg.qr(rng.standard_normal(batch + (m, k)))[0]
    v = np.linalg.qr(rng.standard_normal(batch + (n, k)))[0]
    return (u * np.logspace(0, -np.log10(cond), k)) @ T(v)


SHAPES = [((), 1, 1), ((), 5, 3), ((), 3, 5), ((), 8, 8), ((4,), 9, 4), ((2, 3), 6, 11), ((3,), 33, 33),
          ((2,), 64, 17), ((2,), 17, 40), ((0,), 4, 3), ((2,), 0, 0), ((2,), 0, 3), ((3,), 4, 0)]


# ---- qr -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch,m,n", SHAPES)
def test_qr_modes_against_numpy(rng, device, dtype, batch, m, n):
    a = rng.standard_normal(batch + (m, n)).astype(dtype)
    k = min(m, n)
    ref = {mode: np.linalg.qr(host(a), mode=mode) for mode in MODES}
    for mode in ("reduced", "complete"):
        res = L.qr(dev(a, device), mode=mode)
        assert isinstance(res, L.QRResult) and res._fields == ("Q", "R")
        q, r = res
        assert res.Q is q and res.R is r
        assert q.shape == ref[mode].Q.shape and r.shape == ref[mode].R.shape
        assert q.dtype == alloy.dtype(dtype) and r.dtype == alloy.dtype(dtype)
        qh, rh = host(q), host(r)
        assert np.all(np.tril(rh, -1) == 0)  # exact zeros below the diagonal
        assert backward(a, qh @ rh) <= tol(dtype, m, n)
        assert orth_error(qh) <= tol(dtype, m, n)
        # LAPACK's (and NumPy's) R: the same diagonal signs, so the same factors
        rr = ref[mode].R
        scale = np.max(np.abs(rr), initial=0)
        assert np.max(np.abs(rh - rr), initial=0) <= 1e3 * tol(dtype, m, n) * max(scale, 1)
        assert np.max(np.abs(qh[..., :k] - ref[mode].Q[..., :k]), initial=0) <= 1e3 * tol(dtype, m, n)
    r_only = L.qr(dev(a, device), mode="r")
    assert isinstance(r_only, alloy.Array) and r_only.shape == ref["r"].shape
    assert np.array_equal(host(r_only), host(L.qr(dev(a, device)).R))  # the same R, bit for bit
    h, tau = L.qr(dev(a, device), mode="raw")
    assert h.shape == ref["raw"][0].shape == batch + (n, m)  # NumPy's (transposed) layout
    assert tau.shape == ref["raw"][1].shape == batch + (k,)
    assert np.allclose(host(h), ref["raw"][0], rtol=0, atol=1e3 * tol(dtype, m, n) * max(1, np.max(np.abs(a),
                                                                                                 initial=0)))
    assert np.allclose(host(tau), ref["raw"][1], rtol=0, atol=1e3 * tol(dtype, m, n))
    # raw's R is R
    assert np.array_equal(np.triu(T(host(h)))[..., :k, :], host(r_only))


def q_from_raw(h, tau):
    """Q (m, k) of one matrix from NumPy-layout raw output: H_0 ... H_{k-1} applied to I's columns."""
    hf = h.T
    m, n = hf.shape
    k = len(tau)
    q = np.eye(m)[:, :k]
    for j in reversed(range(k)):
        v = np.zeros(m)
        v[j] = 1.0
        v[j + 1:] = hf[j + 1:, j]
        q = q - tau[j] * np.outer(v, v @ q)
    return q


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n", [(7, 4), (4, 7), (16, 16)])
def test_qr_raw_reflectors(rng, device, dtype, m, n):
    a = rng.standard_normal((3, m, n)).astype(dtype)
    h, tau = L.qr(dev(a, device), mode="raw")
    q, _ = L.qr(dev(a, device))
    hh, th, qh = host(h), host(tau), host(q)
    for i in range(3):
        assert np.max(np.abs(q_from_raw(hh[i], th[i]) - qh[i])) <= 100 * tol(dtype, m, n)
        assert np.all((th[i] == 0) | ((th[i] >= 1) & (th[i] <= 2)))  # dlarfg's tau


@pytest.mark.parametrize("dtype,cond", [(np.float32, 1e3), (np.float32, 1e6), (np.float64, 1e6),
                                        (np.float64, 1e12)])
def test_qr_ill_conditioned(rng, device, dtype, cond):
    for m, n in [(30, 30), (40, 12), (12, 40)]:
        a = conditioned(rng, (3,), m, n, cond).astype(dtype)
        q, r = L.qr(dev(a, device))
        assert backward(a, host(q) @ host(r)) <= tol(dtype, m, n)
        assert orth_error(q) <= tol(dtype, m, n)


def test_qr_hostile(device):
    n = 6
    a = np.stack([np.zeros((n, n)), np.eye(n), np.full((n, n), np.nan), np.ones((n, n)),
                  np.diag(np.logspace(-30, 30, n))])
    a[2] = np.eye(n)
    a[2, 3, 1] = np.nan
    for dtype in DTYPES:
        q, r = L.qr(dev(a.astype(dtype), device))
        qh, rh = host(q), host(r)
        assert np.all(np.isnan(qh[2]).any()) and np.isnan(rh[2]).any()
        others = [0, 1, 3] + ([4] if dtype == np.float64 else [])
        for i in others:
            assert np.all(np.isfinite(qh[i])) and np.all(np.isfinite(rh[i]))
            assert backward(a[i], qh[i] @ rh[i]) <= tol(dtype, n, n)
            assert orth_error(qh[i]) <= tol(dtype, n, n)
        assert np.array_equal(rh[0], np.zeros((n, n)))  # H = I for zero columns
        assert np.array_equal(np.abs(rh[1]), np.eye(n))


def test_qr_stream_and_alloy_arrays(rng, device):
    s = alloy.Stream(device) if device else alloy.Stream()
    a = alloy.asarray(rng.standard_normal((4, 6, 3)), device=device) if device else \
        alloy.asarray(rng.standard_normal((4, 6, 3)))
    q, r = L.qr(a, stream=s)
    h, tau = L.qr(a, "raw", stream=s)
    assert q.stream is s and r.stream is s and h.stream is s and tau.stream is s
    s.synchronize()
    assert backward(a, host(q) @ host(r)) <= tol(np.float64, 6, 3)
    assert np.allclose(np.triu(T(host(h)))[..., :3, :], host(r))


# ---- lstsq ----------------------------------------------------------------------------

def normal_residual(a, x, b):
    """max over matrices and columns of ||A^T (A x - b)|| / (||A|| (||A|| ||x|| + ||A x - b||))."""
    a, x, b = host(a), host(x), host(b)
    r = a @ x - b
    an = fro(a)[..., None]
    num = np.linalg.norm(T(a) @ r, axis=-2)
    den = an * (an * np.linalg.norm(x, axis=-2) + np.linalg.norm(r, axis=-2))
    return float(np.max(num / np.where(den > 0, den, 1), initial=0))


def consistent_residual(a, x, b):
    """max of ||A x - b|| / (||A|| ||x|| + ||b||) (wide systems)."""
    a, x, b = host(a), host(x), host(b)
    num = np.linalg.norm(a @ x - b, axis=-2)
    den = fro(a)[..., None] * np.linalg.norm(x, axis=-2) + np.linalg.norm(b, axis=-2)
    return float(np.max(num / np.where(den > 0, den, 1), initial=0))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch,m,n,k", [((), 1, 1, 1), ((), 9, 4, 1), ((), 4, 9, 2), ((3,), 7, 3, 2),
                                         ((3,), 3, 7, 1), ((2, 2), 33, 33, 3), ((2,), 64, 17, 4),
                                         ((2,), 17, 64, 2), ((2,), 100, 60, 1)])
def test_lstsq_against_numpy(rng, device, dtype, batch, m, n, k):
    a = rng.standard_normal(batch + (m, n)).astype(dtype)
    b = rng.standard_normal(batch + (m, k)).astype(dtype)
    x = L.lstsq(dev(a, device), dev(b, device))
    assert x.shape == batch + (n, k) and x.dtype == alloy.dtype(dtype)
    xh = host(x)
    ref = np.empty(batch + (n, k))
    for idx in np.ndindex(*batch):
        ref[idx] = np.linalg.lstsq(host(a[idx]), host(b[idx]), rcond=None)[0]
    if m >= n:
        assert normal_residual(a, xh, b) <= tol(dtype, m, n)
        # optimality: no worse than NumPy's residual (up to rounding)
        ours = np.linalg.norm(host(a) @ xh - host(b), axis=-2)
        theirs = np.linalg.norm(host(a) @ ref - host(b), axis=-2)
        assert np.all(ours <= theirs * (1 + 1e3 * tol(dtype, m, n)) + 1e3 * tol(dtype, m, n))
    else:
        assert consistent_residual(a, xh, b) <= tol(dtype, m, n)
        # the minimum-norm solution: NumPy's (SVD) one, no component outside a's row space
        assert np.max(np.abs(xh - ref)) <= 1e3 * tol(dtype, m, n) * max(1, np.max(np.abs(ref)))
        ah = host(a)
        outside = xh - np.linalg.pinv(ah) @ (ah @ xh)
        assert np.max(np.linalg.norm(outside, axis=-2) / np.linalg.norm(xh, axis=-2)) <= 100 * tol(dtype, m, n)
    if not batch:  # one vector: x (n,), the numbers of the column
        xv = L.lstsq(dev(a, device), dev(b[:, 0].copy(), device))
        assert xv.shape == (n,)
        assert np.allclose(host(xv), xh[:, 0], rtol=0, atol=100 * tol(dtype, m, n) * max(1, np.max(np.abs(xh))))


@pytest.mark.parametrize("dtype", DTYPES)
def test_lstsq_broadcast(rng, device, dtype):
    a = rng.standard_normal((3, 8, 5)).astype(dtype)
    v = rng.standard_normal(8).astype(dtype)  # one vector for every matrix
    x = L.lstsq(dev(a, device), dev(v, device))
    assert x.shape == (3, 5)
    bv = np.broadcast_to(v[:, None], (3, 8, 1))
    assert normal_residual(a, host(x)[..., None], bv) <= tol(dtype, 8, 5)
    bb = rng.standard_normal((2, 1, 8, 2)).astype(dtype)  # leading dimensions broadcast
    x = L.lstsq(dev(a, device), dev(bb, device))
    assert x.shape == (2, 3, 5, 2)
    assert normal_residual(np.broadcast_to(a, (2, 3, 8, 5)), x, np.broadcast_to(bb, (2, 3, 8, 2))) <= tol(dtype, 8, 5)


@pytest.mark.parametrize("dtype,cond", [(np.float32, 1e3), (np.float64, 1e6), (np.float64, 1e12)])
def test_lstsq_ill_conditioned(rng, device, dtype, cond):
    m, n = 40, 20
    a = conditioned(rng, (3,), m, n, cond).astype(dtype)
    b = rng.standard_normal((3, m, 2)).astype(dtype)
    x = L.lstsq(dev(a, device), dev(b, device), rcond=0)
    assert normal_residual(a, x, b) <= tol(dtype, m, n)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lstsq_rank_deficient(rng, device, dtype):
    m, n = 9, 5
    a = rng.standard_normal((2, 3, m, n))
    a[0, 1, :, 3] = a[0, 1, :, 1]         # two equal columns: rank 4
    a[1, 0] = 0.0                          # the zero matrix
    a[1, 2, 4, 2] = np.nan
    a = a.astype(dtype)
    b = rng.standard_normal((2, 3, m, 1)).astype(dtype)
    with pytest.raises(L.LinAlgError) as e:
        L.lstsq(dev(a, device), dev(b, device))
    assert isinstance(e.value, alloy.Error) and isinstance(e.value, np.linalg.LinAlgError)
    assert e.value.indices == [(0, 1), (1, 0), (1, 2)]
    assert e.value.codes[1] == 1 and 1 <= e.value.codes[0] <= n
    assert "lstsq: 3 of 6 matrices are rank-deficient: batch index (0, 1)" in str(e.value)
    x, info = L.lstsq(dev(a, device), dev(b, device), check=False)
    info = np.asarray(info)
    assert info.shape == (2, 3) and info.dtype == np.int32
    assert list(info[[0, 1, 1], [1, 0, 2]]) == e.value.codes and np.count_nonzero(info) == 3
    xh = host(x)
    for idx in [(0, 1), (1, 0), (1, 2)]:
        assert np.all(np.isnan(xh[idx]))
    for idx in [(0, 0), (0, 2), (1, 1)]:
        assert normal_residual(a[idx], xh[idx], b[idx]) <= tol(dtype, m, n)
    # wide: the rank test runs on the R of a^T
    w = rng.standard_normal((m - 4, n + 4))
    w[2] = 2 * w[0]
    with pytest.raises(L.LinAlgError, match=r"lstsq: the matrix is rank-deficient \(\|R\[\d, \d\]\|"):
        L.lstsq(dev(w.astype(dtype), device), dev(np.ones(m - 4, dtype), device))


def test_lstsq_rcond(rng, device):
    # condition 1e6 in float32: flagged at the default threshold (max(m, n) eps), solved with rcond=0
    m, n = 100, 100
    a = conditioned(rng, (), m, n, 1e7).astype(np.float32)
    b = rng.standard_normal((m, 1)).astype(np.float32)
    _, info = L.lstsq(dev(a, device), dev(b, device), check=False)
    assert int(np.asarray(info)) > 0
    x = L.lstsq(dev(a, device), dev(b, device), rcond=0)
    assert normal_residual(a, x, b) <= tol(np.float32, m, n)
    # a large rcond flags a well-conditioned matrix; None and negative are the default
    a = conditioned(rng, (), 6, 4, 10)
    with pytest.raises(L.LinAlgError):
        L.lstsq(dev(a, device), dev(np.ones(6), device), rcond=0.5)
    for rc in (None, -1):
        assert L.lstsq(dev(a, device), dev(np.ones(6), device), rcond=rc).shape == (4,)


@pytest.mark.parametrize("sa,sb,sx", [((0, 4, 3), (0, 4, 2), (0, 3, 2)), ((2, 0, 3), (2, 0, 1), (2, 3, 1)),
                                      ((2, 3, 0), (2, 3, 2), (2, 0, 2)), ((2, 4, 3), (2, 4, 0), (2, 3, 0)),
                                      ((0, 0), (0,), (0,))])
def test_lstsq_empty(rng, device, sa, sb, sx):
    x = L.lstsq(dev(rng.standard_normal(sa), device), dev(rng.standard_normal(sb), device))
    assert x.shape == sx
    if 0 in sa[-2:] and x.size:
        assert np.array_equal(host(x), np.zeros(sx))  # NumPy's: a 0 x n or m x 0 system has x = 0


# ---- orthogonal, orthonormalize ------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (3, 5), (16, 16), (4, 64, 8), (2, 3, 8, 40), (0, 4, 4),
                                   (3, 0, 5)])
@pytest.mark.parametrize("gain", [1.0, 2.5])
def test_orthogonal(device, dtype, shape, gain):
    w = L.orthogonal(shape, gain, seed=11, dtype=dtype, device=device)
    assert w.shape == shape and w.dtype == alloy.dtype(dtype)
    rows, cols = shape[-2:]
    wh = host(w)
    assert orth_error(wh, rows=rows < cols, gain=gain) <= tol(dtype, rows, cols) * gain * gain
    again = L.orthogonal(shape, gain, seed=11, dtype=dtype, device=device)
    assert np.array_equal(host(again), wh)  # same seed, same matrices
    if wh.size:
        other = host(L.orthogonal(shape, gain, seed=12, dtype=dtype, device=device))
        assert not np.allclose(other, wh)
        if len(shape) > 2 and shape[0] > 1 and rows * cols > 1:
            assert not np.allclose(wh[0], wh[1])  # the matrices of a batch are independent


def test_orthogonal_defaults_and_out(device):
    w = L.orthogonal((6, 4))
    assert w.dtype == alloy.float32 and w.shape == (6, 4)
    assert np.array_equal(host(w), host(L.orthogonal([6, 4], seed=0)))
    assert orth_error(w) <= tol(np.float32, 6, 4)
    w64 = L.orthogonal((6, 4), dtype=alloy.float64, seed=2 ** 64 - 1)
    assert w64.dtype == alloy.float64 and orth_error(w64) <= tol(np.float64, 6, 4)
    if not device:
        out = np.full((2, 5, 7), np.nan)
        r = L.orthogonal(out.shape, 0.5, seed=3, out=out)
        assert r is out and orth_error(out, rows=True, gain=0.5) <= tol(np.float64, 5, 7)
        assert np.array_equal(out, host(L.orthogonal(out.shape, 0.5, seed=3, dtype=np.float64)))
        with pytest.raises(alloy.InvalidArgumentError):
            L.orthogonal((2, 5, 7), seed=3, out=np.empty((2, 5, 7), np.float32), dtype=np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch,m,n", [((), 6, 3), ((3,), 9, 9), ((2,), 4, 10), ((2, 2), 40, 17), ((0,), 3, 3)])
def test_orthonormalize(rng, device, dtype, batch, m, n):
    a = rng.standard_normal(batch + (m, n)).astype(dtype)
    q = L.orthonormalize(dev(a, device))
    assert q.shape == a.shape and q.dtype == alloy.dtype(dtype)
    qh = host(q)
    if m >= n:
        assert orth_error(qh) <= tol(dtype, m, n)
        r = T(qh) @ host(a)  # Gram-Schmidt's basis: Q^T a upper triangular, positive diagonal
        assert np.all(np.abs(np.tril(r, -1)) <= 100 * tol(dtype, m, n) * max(1, np.max(np.abs(a), initial=0)))
        assert np.all(np.diagonal(r, axis1=-2, axis2=-1) > 0)
        qn, rn = np.linalg.qr(host(a))
        ref = qn * np.sign(np.diagonal(rn, axis1=-2, axis2=-1))[..., None, :]
        assert np.max(np.abs(qh - ref), initial=0) <= 1e3 * tol(dtype, m, n)
    else:
        assert orth_error(qh, rows=True) <= tol(dtype, m, n)
        l = host(a) @ T(qh)  # a = L Q: lower triangular, positive diagonal
        assert np.all(np.abs(np.triu(l, 1)) <= 100 * tol(dtype, m, n) * max(1, np.max(np.abs(a), initial=0)))
        assert np.all(np.diagonal(l, axis1=-2, axis2=-1) > 0)


def test_orthonormalize_in_place_and_rank_deficient(rng, device):
    a = rng.standard_normal((3, 7, 4))
    a[1, :, 2] = a[1, :, 0]  # rank-deficient: Q is orthonormal all the same
    if device:
        q = L.orthonormalize(dev(a, device))
    else:
        b = a.copy()
        q = L.orthonormalize(b, out=b)
        assert q is b
    assert orth_error(q) <= tol(np.float64, 7, 4)


# ---- errors --------------------------------------------------------------------------------

def test_errors(device):
    a = dev(np.ones((3, 2)), device)
    with pytest.raises(alloy.InvalidArgumentError, match="mode"):
        L.qr(a, mode="full")
    with pytest.raises(alloy.InvalidArgumentError, match="mode"):
        L.qr(a, mode=1)
    with pytest.raises(alloy.InvalidArgumentError, match="int32"):
        L.qr(dev(np.ones((3, 2), np.int32), device))
    with pytest.raises(alloy.InvalidArgumentError, match="1-D"):
        L.qr(dev(np.ones(3), device))
    with pytest.raises(alloy.InvalidArgumentError):
        L.lstsq(a, dev(np.ones((4, 1)), device))  # m differs
    with pytest.raises(alloy.InvalidArgumentError, match="float32"):
        L.lstsq(a, dev(np.ones((3, 1), np.float32), device))
    with pytest.raises(alloy.InvalidArgumentError, match="do not broadcast"):
        L.lstsq(dev(np.ones((2, 3, 2)), device), dev(np.ones((4, 3, 1)), device))
    with pytest.raises(alloy.InvalidArgumentError, match="rcond"):
        L.lstsq(a, dev(np.ones(3), device), rcond=float("nan"))
    with pytest.raises(TypeError):
        L.lstsq(np.ones((3, 2)), np.ones(3), None, True)  # check is keyword-only
    with pytest.raises(alloy.InvalidArgumentError, match="ndim"):
        L.orthogonal((4,), device=device)
    with pytest.raises(alloy.InvalidArgumentError, match="int32"):
        L.orthogonal((4, 4), dtype=alloy.int32, device=device)
    with pytest.raises(alloy.InvalidArgumentError, match="gain"):
        L.orthogonal((4, 4), float("inf"), device=device)
    with pytest.raises(alloy.InvalidArgumentError, match="seed"):
        L.orthogonal((4, 4), seed=-1, device=device)
    with pytest.raises(TypeError, match="seed"):
        L.orthogonal((4, 4), seed=1.5, device=device)
    with pytest.raises(alloy.InvalidArgumentError, match="int32"):
        L.orthonormalize(dev(np.ones((3, 2), np.int32), device))


def test_torch_on_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for PyTorch")
    from conftest import alloy_cuda_reason
    if alloy_cuda_reason():
        pytest.skip(alloy_cuda_reason())
    s = torch.cuda.current_stream()
    a = torch.randn(64, 24, 16, device="cuda", dtype=torch.float64)
    q, r = L.qr(a, stream=s)
    q, r = torch.from_dlpack(q), torch.from_dlpack(r)
    rq, rr = torch.linalg.qr(a)
    assert torch.allclose(q, rq) and torch.allclose(r, rr)
    b = torch.randn(64, 24, 2, device="cuda", dtype=torch.float64)
    x = torch.from_dlpack(L.lstsq(a, b, stream=s))
    assert torch.allclose(x, torch.linalg.lstsq(a, b).solution)
    w = torch.empty(32, 128, device="cuda", dtype=torch.float32)
    assert L.orthogonal(w.shape, 2.0, seed=1, out=w, stream=s) is w
    torch.cuda.synchronize()
    assert torch.allclose(w @ w.T, 4 * torch.eye(32, device="cuda"), atol=1e-4)
