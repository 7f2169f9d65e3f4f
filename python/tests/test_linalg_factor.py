"""alloy.linalg's factorizations and solves against NumPy in float64:
cholesky, cholesky_solve / cho_solve, solve_triangular, lu_factor / lu_solve,
solve, inv, det, slogdet. Random and ill-conditioned matrices, batches
(broadcast ones included), float32 and float64, hostile inputs (not positive
definite, singular, NaN in one matrix of a batch) and the errors. The
triangular solves and LU pivots are checked against float64 code of this
file (SciPy is not required). On the test device (ALLOY_TEST_DEVICE,
default alloy's default device; conftest.py)."""
import numpy as np
import pytest

import alloy

L = alloy.linalg
DTYPES = [np.float32, np.float64]
UNIT = {np.float32: 2.0 ** -24, np.float64: 2.0 ** -53}


def dev(x, device):
    return alloy.asarray(x, device=device) if device else x


def host(x):
    return np.asarray(x, dtype=np.float64)


def T(x):
    return np.swapaxes(x, -1, -2)


def conditioned(rng, batch, n, cond, symmetric):
    """float64 matrices (batch..., n, n) with singular values from 1 down to 1/cond."""
    if n == 0:
        return np.zeros(batch + (0, 0))
    q1, _ = np.linalg.qr(rng.standard_normal(batch + (n, n)))
    q2 = q1 if symmetric else np.linalg.qr(rng.standard_normal(batch + (n, n)))[0]
    s = np.logspace(0, -np.log10(cond), n)
    a = (q1 * s) @ T(q2)
    return (a + T(a)) / 2 if symmetric else a


def backward_factor(a, rebuilt):
    """max over the batch of ||a - rebuilt||_F / ||a||_F."""
    a, rebuilt = host(a), host(rebuilt)
    if a.size == 0:
        return 0.0
    num = np.linalg.norm(a - rebuilt, axis=(-2, -1))
    den = np.linalg.norm(a, axis=(-2, -1))
    return float(np.max(num / np.where(den > 0, den, 1)))


def residual(a, x, b, left=True):
    """max normwise backward error ||b - a x||_inf / (||a||_inf ||x||_inf + ||b||_inf)
    of every column (x a, rows, with left=False); b has x's shape."""
    a, x, b = host(a), host(x), host(b)
    if x.size == 0:
        return 0.0
    if left:
        r = b - a @ x
        ax = np.max(np.sum(np.abs(a), axis=-1), axis=-1)[..., None]
        return float(np.max(np.max(np.abs(r), axis=-2) /
                            (ax * np.max(np.abs(x), axis=-2) + np.max(np.abs(b), axis=-2))))
    r = b - x @ a
    ax = np.max(np.sum(np.abs(a), axis=-2), axis=-1)[..., None]
    return float(np.max(np.max(np.abs(r), axis=-1) /
                        (ax * np.max(np.abs(x), axis=-1) + np.max(np.abs(b), axis=-1))))


def tol(dtype, n, factor=10):
    return factor * max(n, 1) * UNIT[dtype]


# ---- Cholesky -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch,n", [((), 1), ((), 4), ((3,), 5), ((2, 3), 17), ((2,), 40),
                                     ((0,), 3), ((2,), 0)])
def test_cholesky_random(rng, device, dtype, batch, n):
    a = conditioned(rng, batch, n, 1e3, True).astype(dtype)
    l = L.cholesky(dev(a, device))
    assert l.shape == a.shape and l.dtype == alloy.dtype(dtype)
    lh = host(l)
    assert np.all(np.triu(lh, 1) == 0)
    assert backward_factor(a, lh @ T(lh)) <= tol(dtype, n)
    if n:
        ref = np.linalg.cholesky(host(a))
        assert np.max(np.abs(lh - ref), initial=0) <= 1e3 * tol(dtype, n)  # forward: cond * backward
    u = L.cholesky(dev(a, device), upper=True)
    assert np.array_equal(host(u), T(lh))


@pytest.mark.parametrize("dtype,cond", [(np.float32, 1e6), (np.float64, 1e12)])
def test_cholesky_ill_conditioned(rng, device, dtype, cond):
    a = conditioned(rng, (4,), 24, cond, True).astype(dtype)
    l, info = L.cholesky(dev(a, device), check=False)
    if np.all(host(info) == 0):
        lh = host(l)
        assert backward_factor(a, lh @ T(lh)) <= tol(dtype, 24)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_hostile_batch(rng, device, dtype):
    n = 6
    a = conditioned(rng, (2, 3), n, 10, True)
    a[0, 1, 2, 2] = -50.0        # the leading minor of order 3 fails
    a[1, 2, 4, 1] = np.nan       # lower triangle: info in 1..5
    a[1, 2, 1, 4] = np.nan
    a[1, 0, 0, 5] = np.nan       # upper triangle: never read by the lower factorization
    a = a.astype(dtype)
    with pytest.raises(L.LinAlgError) as e:
        L.cholesky(dev(a, device))
    assert isinstance(e.value, alloy.Error) and isinstance(e.value, np.linalg.LinAlgError)
    assert e.value.indices == [(0, 1), (1, 2)]
    assert e.value.codes[0] == 3 and 1 <= e.value.codes[1] <= 5
    assert "batch index (0, 1)" in str(e.value) and "order 3" in str(e.value)
    assert "2 of 6 matrices are not positive definite" in str(e.value)
    l, info = L.cholesky(dev(a, device), check=False)
    info = np.asarray(info)
    assert info.shape == (2, 3) and info.dtype == np.int32
    assert info[0, 1] == 3 and list(info[1, 2:]) == [e.value.codes[1]]
    assert np.count_nonzero(info) == 2
    lh = host(l)
    lower = np.tril(a) + T(np.tril(a, -1))  # what the lower factorization reads
    for idx in [(0, 0), (0, 2), (1, 0), (1, 1)]:
        assert backward_factor(lower[idx], lh[idx] @ lh[idx].T) <= tol(dtype, n)
    # LAPACK's potf2 leaves the first info-1 columns of the factor
    ref = np.linalg.cholesky(host(a[0, 1, :2, :2]))
    assert np.allclose(lh[0, 1, :2, :2], ref, rtol=1e-4)
    # the upper factorization reads the NaN of (1, 0) and (1, 2)
    _, info_u = L.cholesky(dev(a, device), upper=True, check=False)
    info_u = np.asarray(info_u)
    assert info_u[1, 0] > 0 and info_u[1, 2] > 0 and info_u[0, 1] == 3


def test_cholesky_single_matrix_message(device):
    with pytest.raises(L.LinAlgError, match=r"cholesky: the matrix is not positive definite "
                                            r"\(the leading minor of order 1"):
        L.cholesky(dev(-np.eye(3), device))


@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_solve(rng, device, dtype):
    n = 9
    a = conditioned(rng, (2, 3), n, 100, True).astype(dtype)
    l = L.cholesky(dev(a, device))
    b = rng.standard_normal((2, 3, n, 4)).astype(dtype)
    x = L.cholesky_solve(l, dev(b, device))
    assert x.shape == b.shape
    assert residual(a, x, b) <= tol(dtype, n, 20)
    u = L.cholesky(dev(a, device), upper=True)
    x2 = L.cho_solve((u, False), dev(b, device))
    assert residual(a, x2, b) <= tol(dtype, n, 20)
    x3 = L.cho_solve((l, True), dev(b, device))
    assert np.array_equal(host(x3), host(x))
    # one vector for every matrix; a b whose leading dimensions broadcast
    v = rng.standard_normal(n).astype(dtype)
    xv = L.cholesky_solve(l, dev(v, device))
    assert xv.shape == (2, 3, n)
    assert residual(a, host(xv)[..., None], np.broadcast_to(v[:, None], (2, 3, n, 1))) <= tol(dtype, n, 20)
    bb = rng.standard_normal((3, n, 2)).astype(dtype)
    xb = L.cholesky_solve(l, dev(bb, device), upper=False)
    assert xb.shape == (2, 3, n, 2)
    assert residual(a, xb, np.broadcast_to(bb, (2, 3, n, 2))) <= tol(dtype, n, 20)


# ---- triangular solves ------------------------------------------------------------

def triangle(a, lower, unit):
    t = np.tril(a) if lower else np.triu(a)
    if unit:
        idx = np.arange(a.shape[-1])
        t[..., idx, idx] = 1.0
    return t


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("trans", [0, 1, "T", "C", 2, "N"])
@pytest.mark.parametrize("unit", [False, True])
@pytest.mark.parametrize("left", [True, False])
def test_solve_triangular(rng, device, dtype, lower, trans, unit, left):
    n, k = 7, 3
    a = rng.standard_normal((2, n, n)) * 0.3
    idx = np.arange(n)
    a[..., idx, idx] = 2.0 + rng.random((2, n))
    a = a.astype(dtype)
    other = np.triu(np.ones((n, n)), 1) if lower else np.tril(np.ones((n, n)), -1)
    poisoned = np.where(other > 0, np.nan, a).astype(dtype)  # the other triangle is never read
    if unit:
        poisoned[..., idx, idx] = np.nan
    b = rng.standard_normal((2, n, k) if left else (2, k, n)).astype(dtype)
    x = L.solve_triangular(dev(poisoned, device), dev(b, device), trans, lower=lower,
                           unit_diagonal=unit, left=left)
    assert x.shape == b.shape
    m = triangle(host(a), lower, unit)
    if trans not in (0, "N"):
        m = T(m)
    ref = np.linalg.solve(m, host(b)) if left else T(np.linalg.solve(T(m), T(host(b))))
    xh = host(x)
    assert np.all(np.isfinite(xh))
    assert residual(m, xh, b, left=left) <= tol(dtype, n, 20)
    assert np.max(np.abs(xh - ref)) <= 1e3 * UNIT[dtype] * np.max(np.abs(ref))


def test_solve_triangular_vector_and_broadcast(rng, device):
    n = 5
    a = np.triu(rng.standard_normal((3, n, n))) + 3 * np.eye(n)
    v = rng.standard_normal(n)
    x = L.solve_triangular(dev(a, device), dev(v, device))
    assert x.shape == (3, n)
    assert np.allclose(host(x), np.linalg.solve(a, np.broadcast_to(v, (3, n))[..., None])[..., 0])
    b = rng.standard_normal((2, 1, n, 2))
    x = L.solve_triangular(dev(a, device), dev(b, device))
    assert x.shape == (2, 3, n, 2)
    assert np.allclose(host(x), np.linalg.solve(a, b))


def test_solve_triangular_zero_diagonal_gives_inf_nan(device):
    a = np.stack([np.eye(3), np.diag([1.0, 0.0, 1.0])])
    x = host(L.solve_triangular(dev(a, device), dev(np.ones((2, 3, 1)), device)))
    assert np.array_equal(x[0], np.ones((3, 1)))
    assert not np.all(np.isfinite(x[1]))


# ---- LU ----------------------------------------------------------------------------

def lu_reference(a):
    """float64 getrf (first maximum on ties): lu, 0-based pivots, and the
    relative gap between the two largest candidates at each step."""
    lu = np.array(a, dtype=np.float64)
    n = lu.shape[-1]
    piv = np.zeros(n, dtype=np.int64)
    gaps = np.full(n, np.inf)
    for k in range(n):
        col = np.abs(lu[k:, k])
        p = k + int(np.argmax(col))
        if col.size > 1:
            top = np.sort(col)[::-1]
            gaps[k] = (top[0] - top[1]) / max(top[0], 1e-300)
        piv[k] = p
        lu[[k, p]] = lu[[p, k]]
        if lu[k, k] != 0:
            lu[k + 1:, k] /= lu[k, k]
            lu[k + 1:, k + 1:] -= np.outer(lu[k + 1:, k], lu[k, k + 1:])
    return lu, piv, gaps


def permuted(a, piv):
    """P a for SciPy's 0-based pivots (row i swapped with piv[i], in order)."""
    pa = np.array(a, dtype=np.float64)
    for i, p in enumerate(piv):
        pa[[i, p]] = pa[[p, i]]
    return pa


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch,n", [((), 1), ((), 6), ((4,), 8), ((2, 3), 16), ((2,), 33),
                                     ((0,), 4), ((3,), 0)])
def test_lu_factor(rng, device, dtype, batch, n):
    a = rng.standard_normal(batch + (n, n)).astype(dtype)
    lu, piv = L.lu_factor(dev(a, device))
    assert lu.shape == a.shape and piv.shape == batch + (n,) and piv.dtype == alloy.int32
    luh, pivh = host(lu), np.asarray(piv)
    for idx in np.ndindex(*batch):
        m = luh[idx]
        lo = np.tril(m, -1) + np.eye(n)
        assert backward_factor(permuted(a[idx], pivh[idx]), lo @ np.triu(m)) <= tol(dtype, n)
        assert np.all((pivh[idx] >= np.arange(n)) & (pivh[idx] < n))
        _, ref_piv, gaps = lu_reference(a[idx])
        # the pivots agree up to the first near-tie (rounding may decide it)
        near = np.flatnonzero(gaps < (1e-3 if dtype == np.float32 else 1e-9))
        upto = near[0] if near.size else n
        assert np.array_equal(pivh[idx][:upto], ref_piv[:upto])


def test_lu_factor_ties_and_permutations(device):
    # a permutation matrix: LU is the identity, the pivots undo the permutation
    p = np.eye(5)[[3, 0, 4, 1, 2]]
    lu, piv = L.lu_factor(dev(p, device))
    assert np.array_equal(host(lu), np.eye(5))
    assert np.array_equal(permuted(p, np.asarray(piv)), np.eye(5))
    # equal magnitudes: the first row wins (LAPACK's i?amax)
    lu, piv = L.lu_factor(dev(np.array([[1.0, 2.0], [-1.0, 3.0]]), device))
    assert list(np.asarray(piv)) == [0, 1]


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_factor_singular_and_nan(rng, device, dtype):
    n = 6
    a = rng.standard_normal((3, 2, n, n))
    a[1, 0, :, 2] = 0.0            # column 2 is zero: U[2, 2] == 0, info 3
    a[2, 1] = 0.0                  # the zero matrix: info 1
    a[0, 1, 3, 4] = np.nan         # NaN: not an exact zero pivot, info 0
    a = a.astype(dtype)
    with pytest.raises(L.LinAlgError) as e:
        L.lu_factor(dev(a, device))
    assert e.value.indices == [(1, 0), (2, 1)] and e.value.codes == [3, 1]
    assert "U[2, 2] is exactly zero" in str(e.value) and "2 of 6 matrices are singular" in str(e.value)
    lu, piv, info = L.lu_factor(dev(a, device), check=False)
    info = np.asarray(info)
    assert info.shape == (3, 2) and info[1, 0] == 3 and info[2, 1] == 1 and np.count_nonzero(info) == 2
    luh = host(lu)
    assert np.all(np.isnan(luh[0, 1]).any())
    assert np.all(np.isfinite(luh[0, 0])) and np.all(np.isfinite(luh[1, 1]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans", [0, 1, 2, "T"])
def test_lu_solve(rng, device, dtype, trans):
    n = 10
    a = conditioned(rng, (3,), n, 100, False).astype(dtype)
    lu, piv = L.lu_factor(dev(a, device))
    m = a if trans in (0, "N") else T(a)
    b = rng.standard_normal((3, n, 2)).astype(dtype)
    x = L.lu_solve((lu, piv), dev(b, device), trans=trans)
    assert x.shape == b.shape
    assert residual(m, x, b) <= tol(dtype, n, 20)
    # one vector for every matrix; b's leading dimensions broadcast
    v = rng.standard_normal(n).astype(dtype)
    xv = L.lu_solve((lu, piv), dev(v, device), trans)
    assert xv.shape == (3, n)
    assert residual(m, host(xv)[..., None], np.broadcast_to(v[:, None], (3, n, 1))) <= tol(dtype, n, 20)
    bb = rng.standard_normal((2, 1, n, 1)).astype(dtype)
    xb = L.lu_solve((lu, piv), dev(bb, device), trans)
    assert xb.shape == (2, 3, n, 1)
    assert residual(m, xb, np.broadcast_to(bb, (2, 3, n, 1))) <= tol(dtype, n, 20)


def test_lu_solve_with_numpy_pivots(rng, device):
    """SciPy-style 0-based int64 pivots from elsewhere (here the float64 reference)."""
    n = 7
    a = rng.standard_normal((n, n))
    lu, piv, _ = lu_reference(a)
    b = rng.standard_normal(n)
    x = L.lu_solve((dev(lu, device), dev(piv, device)), dev(b, device))
    assert np.allclose(host(x), np.linalg.solve(a, b), rtol=1e-10, atol=1e-12)


# ---- solve, inv, det, slogdet ----------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb", [((5, 5), (5,)), ((5, 5), (5, 3)), ((4, 8, 8), (4, 8, 1)),
                                   ((4, 8, 8), (8,)), ((2, 1, 6, 6), (3, 6, 2)), ((3, 4, 4), (0, 4, 4)),
                                   ((3, 33, 33), (3, 33, 5)), ((0, 3, 3), (0, 3, 1)), ((2, 0, 0), (2, 0, 4))])
def test_solve(rng, device, dtype, sa, sb):
    a = rng.standard_normal(sa).astype(dtype)
    b = rng.standard_normal(sb).astype(dtype)
    if sa[:-2] != sb[:-2] and len(sb) > 1 and sb[0] == 0:
        with pytest.raises(alloy.InvalidArgumentError, match="do not broadcast"):
            L.solve(dev(a, device), dev(b, device))
        return
    x = L.solve(dev(a, device), dev(b, device))
    ref = np.linalg.solve(host(a), host(b))
    assert x.shape == ref.shape and x.dtype == alloy.dtype(dtype)
    n = sa[-1]
    bm = host(b)[..., None] if len(sb) == 1 else host(b)
    xm = host(x)[..., None] if len(sb) == 1 else host(x)
    assert residual(a, xm, np.broadcast_to(bm, xm.shape)) <= tol(dtype, n, 20)


@pytest.mark.parametrize("dtype,cond", [(np.float32, 1e3), (np.float32, 1e6), (np.float64, 1e6),
                                        (np.float64, 1e12)])
def test_solve_inv_ill_conditioned(rng, device, dtype, cond):
    n = 20
    a = conditioned(rng, (3,), n, cond, False).astype(dtype)
    b = rng.standard_normal((3, n, 2)).astype(dtype)
    assert residual(a, L.solve(dev(a, device), dev(b, device)), b) <= tol(dtype, n, 20)
    ai = host(L.inv(dev(a, device)))
    r = np.eye(n) - host(a) @ ai
    norm1 = lambda m: np.max(np.sum(np.abs(m), axis=-2), axis=-1)  # noqa: E731
    assert np.max(norm1(r) / (norm1(host(a)) * norm1(ai))) <= tol(dtype, n, 20)


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_inv_singular_and_nan_batch(rng, device, dtype):
    n = 5
    a = rng.standard_normal((4, n, n)) + 3 * np.eye(n)
    a[1, 3] = a[1, 0]      # two equal rows: singular, but rounding need not give an exact zero
    a[1, :, 4] = 0.0       # a zero column: the exact zero pivot U[4, 4], info 5
    a[2, 2, 2] = np.nan
    a = a.astype(dtype)
    b = rng.standard_normal((4, n)).astype(dtype)[..., None]
    with pytest.raises(L.LinAlgError, match=r"solve: 1 of 4 matrices is singular: batch index \(1,\)"):
        L.solve(dev(a, device), dev(b, device))
    x, info = L.solve(dev(a, device), dev(b, device), check=False)
    assert list(np.asarray(info)) == [0, 5, 0, 0]
    xh = host(x)
    assert np.all(np.isnan(xh[2])) and not np.all(np.isfinite(xh[1]))
    for i in (0, 3):
        assert residual(a[i], xh[i], b[i]) <= tol(dtype, n, 20)
    with pytest.raises(L.LinAlgError) as e:
        L.inv(dev(a, device))
    assert e.value.indices == [(1,)] and e.value.codes == [5]
    ai, info = L.inv(dev(a, device), check=False)
    assert list(np.asarray(info)) == [0, 5, 0, 0]
    aih = host(ai)
    assert np.allclose(aih[[0, 3]], np.linalg.inv(host(a[[0, 3]])), rtol=1e-3 if dtype == np.float32 else 1e-10)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch,n", [((), 3), ((5,), 1), ((2, 3), 12), ((4,), 40), ((0,), 2), ((3,), 0)])
def test_det_slogdet(rng, device, dtype, batch, n):
    a = rng.standard_normal(batch + (n, n)).astype(dtype)
    d = L.det(dev(a, device))
    assert d.shape == batch and d.dtype == alloy.dtype(dtype)
    ref_sign, ref_log = np.linalg.slogdet(host(a))
    rtol = 200 * max(n, 1) * UNIT[dtype]
    assert np.allclose(host(d), ref_sign * np.exp(ref_log), rtol=rtol, atol=0)
    r = L.slogdet(dev(a, device))
    assert isinstance(r, L.SlogdetResult)
    sign, logabsdet = r
    assert r.sign is sign and r.logabsdet is logabsdet
    assert np.array_equal(host(sign), ref_sign)
    assert np.allclose(host(logabsdet), ref_log, rtol=0, atol=rtol * max(1.0, np.max(np.abs(ref_log), initial=0)))


def test_det_slogdet_hostile(device):
    a = np.stack([np.zeros((3, 3)), np.diag([1e-30, 1e-30, 1e-30]), np.diag([1e30, 1e30, -1e30]),
                  np.full((3, 3), np.nan), np.eye(3)[[1, 0, 2]]]).astype(np.float32)
    d = host(L.det(dev(a, device)))
    assert d[0] == 0 and d[1] == 0 and d[2] == -np.inf and np.isnan(d[3]) and d[4] == -1
    sign, logabsdet = L.slogdet(dev(a, device))
    sign, logabsdet = host(sign), host(logabsdet)
    assert sign[0] == 0 and logabsdet[0] == -np.inf
    assert sign[1] == 1 and np.isclose(logabsdet[1], 3 * np.log(1e-30), rtol=1e-5)
    assert sign[2] == -1 and np.isclose(logabsdet[2], 3 * np.log(1e30), rtol=1e-5)
    assert np.isnan(sign[3]) and np.isnan(logabsdet[3])
    assert sign[4] == -1 and logabsdet[4] == 0


# ---- outputs, streams, errors ------------------------------------------------------------

def test_out_written_in_place(rng, device):
    if device:
        pytest.skip("NumPy outputs are CPU memory; the GPU case is test_torch_on_gpu")
    a = conditioned(rng, (3,), 4, 10, True)
    out = np.full_like(a, np.nan)
    r = L.cholesky(a, out=out)
    assert r is out and np.allclose(out, np.linalg.cholesky(a))
    out2 = np.empty((3, 4, 2))
    b = rng.standard_normal((3, 4, 2))
    assert L.solve(a, b, out=out2) is out2 and np.allclose(out2, np.linalg.solve(a, b))
    out3 = np.empty_like(a)
    assert L.inv(a, out=out3) is out3 and np.allclose(out3, np.linalg.inv(a))
    with pytest.raises(alloy.InvalidArgumentError, match="out"):
        L.cholesky(a, out=np.empty((3, 4, 5)))


def test_stream_and_alloy_arrays(rng, device):
    s = alloy.Stream(device) if device else alloy.Stream()
    a = alloy.asarray(conditioned(rng, (2,), 5, 10, True), device=device) if device else \
        alloy.asarray(conditioned(rng, (2,), 5, 10, True))
    l = L.cholesky(a, stream=s)
    assert l.stream is s
    x = L.solve(a, np.ones(5), stream=s)
    s.synchronize()
    assert np.allclose(host(a) @ host(x)[..., None], 1.0)


def test_errors(device):
    sq = dev(np.zeros((2, 3)), device)
    for fn in (L.cholesky, L.lu_factor, L.inv, L.det, L.slogdet):
        with pytest.raises(alloy.InvalidArgumentError, match="not square"):
            fn(sq)
    with pytest.raises(alloy.InvalidArgumentError, match="int32"):
        L.cholesky(dev(np.eye(3, dtype=np.int32), device))
    with pytest.raises(alloy.InvalidArgumentError):
        L.solve(dev(np.eye(3), device), dev(np.ones(4), device))
    with pytest.raises(alloy.InvalidArgumentError):
        L.solve(dev(np.eye(3), device), dev(np.ones(3, np.float32), device))
    with pytest.raises(alloy.InvalidArgumentError, match="do not broadcast"):
        L.solve(dev(np.ones((2, 3, 3)), device), dev(np.ones((4, 3, 1)), device))
    with pytest.raises(alloy.InvalidArgumentError, match="trans"):
        L.solve_triangular(dev(np.eye(3), device), dev(np.ones(3), device), trans="X")
    with pytest.raises(alloy.InvalidArgumentError, match="integer"):
        L.lu_solve((dev(np.eye(3), device), dev(np.zeros(3), device)), dev(np.ones(3), device))
    with pytest.raises(TypeError):
        L.solve(np.eye(3), np.ones(3), True)  # check is keyword-only
    assert issubclass(L.LinAlgError, alloy.Error) and issubclass(L.LinAlgError, np.linalg.LinAlgError)


def test_torch_on_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for PyTorch")
    from conftest import alloy_cuda_reason
    if alloy_cuda_reason():
        pytest.skip(alloy_cuda_reason())
    g = torch.randn(64, 16, 16, device="cuda", dtype=torch.float64)
    a = g @ g.transpose(-1, -2) + 16 * torch.eye(16, device="cuda", dtype=torch.float64)
    out = torch.empty_like(a)
    s = torch.cuda.current_stream()
    r = L.cholesky(a, out=out, stream=s)
    assert r is out
    torch.cuda.synchronize()
    assert torch.allclose(out, torch.linalg.cholesky(a))
    x = torch.from_dlpack(L.solve(a, torch.ones(64, 16, 1, device="cuda", dtype=torch.float64), stream=s))
    assert torch.allclose(a @ x, torch.ones_like(x))
    lu, piv = L.lu_factor(a, stream=s)
    ref_lu, ref_piv = torch.linalg.lu_factor(a)
    assert torch.equal(torch.from_dlpack(piv) + 1, ref_piv)
    sign, logabsdet = L.slogdet(a, stream=s)
    assert torch.allclose(torch.from_dlpack(logabsdet), torch.linalg.slogdet(a).logabsdet)
