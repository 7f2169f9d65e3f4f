"""alloy.linalg's symmetric eigendecomposition and SVD against NumPy in
float64: eigh, eigvalsh, svd (full and reduced, with and without vectors)
and svdvals. Square, tall and wide matrices, batches, empty shapes, float32
and float64; random, ill-conditioned, graded, repeated eigenvalues,
rank-deficient, zero, identity and NaN/Inf matrices; the info codes,
LinAlgError and the errors. On the test device (ALLOY_TEST_DEVICE, default
alloy's default device; conftest.py).

The bounds are those docs/linalg.md states for the C ops ("Symmetric
eigendecomposition and SVD"): backward errors and orthogonality <= 10 n u
(orthogonality in the spectral norm), values within Weyl's bound 10 n u
||A||_F of NumPy's float64 values of the same (rounded) matrix."""
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


def tol(dtype, m, n=0, factor=10):
    return factor * max(m, n, 1) * UNIT[dtype]


def fro(x):
    return np.linalg.norm(x, axis=(-2, -1)) if x.size else np.zeros(x.shape[:-2])


def rel(num, den):
    """max over the batch of num / den (den 0 counts as 1)."""
    num, den = np.asarray(num), np.asarray(den)
    if num.size == 0:
        return 0.0
    return float(np.max(num / np.where(den > 0, den, 1)))


def orth_error(q, rows=False):
    """max over the batch of ||Q^T Q - I||_2 (Q Q^T for rows), the spectral norm."""
    q = host(q)
    g = q @ T(q) if rows else T(q) @ q
    if g.size == 0:
        return 0.0
    e = g - np.eye(g.shape[-1])
    return float(np.max(np.linalg.norm(e.reshape((-1,) + e.shape[-2:]), ord=2, axis=(-2, -1))))


def sym(rng, batch, n):
    a = rng.standard_normal(batch + (n, n))
    return (a + T(a)) / 2


def with_spectrum(rng, batch, values):
    """float64 symmetric matrices (batch..., n, n) with the given eigenvalues."""
    n = len(values)
    q = np.linalg.qr(rng.standard_normal(batch + (n, n)))[0]
    a = (q * np.asarray(values, dtype=np.float64)) @ T(q)
    return (a + T(a)) / 2


def with_singular_values(rng, batch, m, n, values):
    k = min(m, n)
    u = np.linalg.qr(rng.standard_normal(batch + (m, k)))[0]
    v = np.linalg.qr(rng.standard_normal(batch + (n, k)))[0]
    return (u * np.asarray(values, dtype=np.float64)) @ T(v)


def check_eigh(a, w, v, dtype):
    """The residual, orthogonality, order and Weyl's bound against NumPy."""
    ah, wh, vh = host(a), host(w), host(v)
    n = ah.shape[-1]
    na = fro(ah)
    assert rel(fro(ah @ vh - vh * wh[..., None, :]), na) <= tol(dtype, n)
    assert orth_error(vh) <= tol(dtype, n)
    assert np.all(np.diff(wh, axis=-1) >= 0)  # ascending
    if ah.size:
        ref = np.linalg.eigvalsh(ah)
        assert np.all(np.abs(wh - ref) <= tol(dtype, n) * na[..., None] + np.finfo(float).tiny)


def check_svd(a, u, s, vh, dtype, full):
    ah, uh, sh, vhh = host(a), host(u), host(s), host(vh)
    m, n = ah.shape[-2:]
    k = min(m, n)
    assert np.all(sh >= 0) and np.all(np.diff(sh, axis=-1) <= 0)  # descending, non-negative
    rebuilt = (uh[..., :, :k] * sh[..., None, :]) @ vhh[..., :k, :]
    na = fro(ah)
    assert rel(fro(ah - rebuilt), na) <= tol(dtype, m, n)
    assert orth_error(uh) <= tol(dtype, m, n)
    assert orth_error(vhh, rows=True) <= tol(dtype, m, n)
    if full:
        assert uh.shape[-2:] == (m, m) and vhh.shape[-2:] == (n, n)
    if ah.size:
        ref = np.linalg.svd(ah, compute_uv=False)
        assert np.all(np.abs(sh - ref) <= tol(dtype, m, n) * na[..., None] + np.finfo(float).tiny)


# ---- eigh, eigvalsh ----------------------------------------------------------------------

EIGH_SHAPES = [((), 1), ((), 2), ((), 5), ((4,), 8), ((2, 3), 16), ((3,), 33), ((2,), 64), ((0,), 4), ((3,), 0),
               ((), 0)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch,n", EIGH_SHAPES)
def test_eigh_against_numpy(rng, device, dtype, batch, n):
    a = sym(rng, batch, n).astype(dtype)
    res = L.eigh(dev(a, device))
    assert isinstance(res, L.EighResult) and res._fields == ("eigenvalues", "eigenvectors")
    w, v = res
    assert res.eigenvalues is w and res.eigenvectors is v
    ref = np.linalg.eigh(host(a))
    assert w.shape == ref.eigenvalues.shape == batch + (n,)
    assert v.shape == ref.eigenvectors.shape == batch + (n, n)
    assert w.dtype == alloy.dtype(dtype) and v.dtype == alloy.dtype(dtype)
    check_eigh(a, w, v, dtype)
    # eigenvalues only: the same numbers, bit for bit
    wo = L.eigvalsh(dev(a, device))
    assert isinstance(wo, alloy.Array) and wo.shape == batch + (n,)
    assert np.array_equal(host(wo), host(w))


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_vectors_against_numpy(rng, device, dtype):
    # well-separated eigenvalues 1..n: each vector is NumPy's up to its sign
    n = 20
    a = with_spectrum(rng, (3,), np.arange(1, n + 1) * (-1) ** np.arange(n)).astype(dtype)
    w, v = L.eigh(dev(a, device))
    ref = np.linalg.eigh(host(a))
    dots = np.abs(np.sum(host(v) * ref.eigenvectors, axis=-2))
    # sin of the angle <= backward error / gap (gap >= 1, ||A|| ~ n)
    assert np.all(1 - dots <= 1e2 * tol(dtype, n) * n)
    assert np.max(np.abs(host(w) - ref.eigenvalues)) <= tol(dtype, n) * n * n


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_uplo(rng, device, dtype):
    n = 9
    a = sym(rng, (2,), n)
    lower = np.tril(a) + np.triu(rng.standard_normal((2, n, n)), 1)  # garbage above
    upper = np.triu(a) + np.tril(np.full((2, n, n), np.nan), -1)     # NaN below: not read
    wl, vl = L.eigh(dev(lower.astype(dtype), device))
    wu, vu = L.eigh(dev(upper.astype(dtype), device), UPLO="U")
    for w, v in ((wl, vl), (wu, vu)):
        check_eigh(a.astype(dtype), w, v, dtype)
    assert np.array_equal(host(L.eigvalsh(dev(upper.astype(dtype), device), "u")), host(wu))
    # NumPy reads the same triangles
    assert np.allclose(host(wl), np.linalg.eigvalsh(host(lower.astype(dtype)), UPLO="L"),
                       atol=tol(dtype, n) * np.max(fro(a)))


@pytest.mark.parametrize("dtype,cond", [(np.float32, 1e3), (np.float32, 1e6), (np.float64, 1e6),
                                        (np.float64, 1e12)])
def test_eigh_ill_conditioned(rng, device, dtype, cond):
    for n in (7, 30):
        values = np.logspace(0, -np.log10(cond), n) * np.where(np.arange(n) % 3 == 0, -1, 1)
        a = with_spectrum(rng, (3,), values).astype(dtype)
        w, v = L.eigh(dev(a, device))
        check_eigh(a, w, v, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_repeated_and_clustered(rng, device, dtype):
    n = 24
    repeated = np.repeat([-2.0, 0.5, 0.5 + 1e-9, 3.0], n // 4)  # clusters of 6 (and two nearly equal)
    a = np.stack([with_spectrum(rng, (), repeated), with_spectrum(rng, (), np.ones(n) * 5),
                  with_spectrum(rng, (), np.r_[np.zeros(n - 3), 1.0, 2.0, 3.0])]).astype(dtype)
    w, v = L.eigh(dev(a, device))
    check_eigh(a, w, v, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_zero_and_identity(device, dtype):
    n = 6
    a = np.stack([np.zeros((n, n)), np.eye(n), 3 * np.eye(n)]).astype(dtype)
    w, v = L.eigh(dev(a, device))
    wh, vh = host(w), host(v)
    assert np.array_equal(wh, np.array([[0.0] * n, [1.0] * n, [3.0] * n]))
    assert orth_error(vh) <= tol(dtype, n)
    assert np.array_equal(vh[1], np.eye(n))  # already diagonal: no rotation


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_nan_info_and_linalgerror(rng, device, dtype):
    n = 5
    a = sym(rng, (2, 3), n)
    a[0, 1, 3, 1] = np.nan   # in the lower triangle: read
    a[1, 2, 4, 4] = np.inf
    a[1, 0, 0, 3] = np.nan   # above the diagonal: not read with UPLO='L'
    a = a.astype(dtype)
    for fn in (L.eigh, L.eigvalsh):
        with pytest.raises(L.LinAlgError) as e:
            fn(dev(a, device))
        assert isinstance(e.value, alloy.Error) and isinstance(e.value, np.linalg.LinAlgError)
        assert e.value.indices == [(0, 1), (1, 2)] and e.value.codes == [1, 1]
        name = fn.__name__
        assert str(e.value).startswith(f"{name}: 2 of 6 matrices are not decomposed: batch index (0, 1): "
                                       "it has a NaN or Inf; batch index (1, 2): it has a NaN or Inf")
    w, v, info = L.eigh(dev(a, device), check=False)
    info = np.asarray(info)
    assert info.shape == (2, 3) and info.dtype == np.int32
    assert np.array_equal(info, [[0, 1, 0], [0, 0, 1]])
    wh, vh = host(w), host(v)
    for idx in [(0, 1), (1, 2)]:
        assert np.all(np.isnan(wh[idx])) and np.all(np.isnan(vh[idx]))
    good = [(0, 0), (0, 2), (1, 0), (1, 1)]
    lower = np.tril(a) + T(np.tril(a, -1))
    for idx in good:
        check_eigh(lower[idx], wh[idx], vh[idx], dtype)
    wo, info2 = L.eigvalsh(dev(a, device), check=False)
    assert np.array_equal(np.asarray(info2), info)
    assert np.array_equal(host(wo)[tuple(np.array(good).T)], wh[tuple(np.array(good).T)])
    # one matrix: "the matrix is ..."
    with pytest.raises(L.LinAlgError, match=r"^eigh: the matrix is not decomposed \(it has a NaN or Inf\)$"):
        L.eigh(dev(a[0, 1], device))


def test_eigh_max_sweeps(rng, device):
    n = 16
    a = sym(rng, (3,), n)
    with pytest.raises(L.LinAlgError, match=r"eigh: 3 of 3 matrices are not decomposed: batch index \(0,\): "
                                             r"no convergence within max_sweeps=1;"):
        L.eigh(dev(a, device), max_sweeps=1)
    w, v, info = L.eigh(dev(a, device), max_sweeps=1, check=False)
    assert np.array_equal(np.asarray(info), [2, 2, 2])
    assert orth_error(v) <= tol(np.float64, n)  # the last sweep's vectors: still orthonormal
    w, v = L.eigh(dev(a, device), max_sweeps=100)
    check_eigh(a, w, v, np.float64)
    assert np.array_equal(host(L.eigh(dev(a, device), max_sweeps=None).eigenvalues), host(w))


# ---- svd, svdvals --------------------------------------------------------------------------

SVD_SHAPES = [((), 1, 1), ((), 5, 3), ((), 3, 5), ((), 8, 8), ((4,), 9, 4), ((2, 3), 6, 11), ((3,), 33, 33),
              ((2,), 64, 17), ((2,), 17, 64), ((2,), 64, 64), ((0,), 4, 3), ((2,), 0, 0), ((2,), 0, 3),
              ((3,), 4, 0)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch,m,n", SVD_SHAPES)
def test_svd_against_numpy(rng, device, dtype, batch, m, n):
    a = rng.standard_normal(batch + (m, n)).astype(dtype)
    for full in (True, False):
        res = L.svd(dev(a, device), full_matrices=full)
        assert isinstance(res, L.SVDResult) and res._fields == ("U", "S", "Vh")
        u, s, vh = res
        assert res.U is u and res.S is s and res.Vh is vh
        ref = np.linalg.svd(host(a), full_matrices=full)
        assert (u.shape, s.shape, vh.shape) == (ref.U.shape, ref.S.shape, ref.Vh.shape)
        assert u.dtype == s.dtype == vh.dtype == alloy.dtype(dtype)
        check_svd(a, u, s, vh, dtype, full)
    # values only: the same numbers, bit for bit
    so = L.svd(dev(a, device), compute_uv=False)
    assert isinstance(so, alloy.Array) and so.shape == batch + (min(m, n),)
    assert np.array_equal(host(so), host(s))
    assert np.array_equal(host(L.svdvals(dev(a, device))), host(s))


@pytest.mark.parametrize("dtype", DTYPES)
def test_svd_positional_arguments(rng, device, dtype):
    a = rng.standard_normal((7, 4)).astype(dtype)
    u, s, vh = L.svd(dev(a, device), False)  # NumPy's order: full_matrices, compute_uv
    assert u.shape == (7, 4) and vh.shape == (4, 4)
    s2 = L.svd(dev(a, device), True, False)
    assert np.array_equal(host(s2), host(s))


@pytest.mark.parametrize("dtype,cond", [(np.float32, 1e3), (np.float32, 1e6), (np.float64, 1e6),
                                        (np.float64, 1e12)])
def test_svd_ill_conditioned(rng, device, dtype, cond):
    for m, n in [(30, 30), (40, 12), (12, 40)]:
        k = min(m, n)
        a = with_singular_values(rng, (3,), m, n, np.logspace(0, -np.log10(cond), k)).astype(dtype)
        u, s, vh = L.svd(dev(a, device))
        check_svd(a, u, s, vh, dtype, True)


def test_svd_graded_relative_accuracy(rng, device):
    # A = B D, B well conditioned, D spanning 1e6: Jacobi gets each singular value to a relative
    # error of about u kappa(B); a normwise method only to u sigma_max / sigma_min (~6e-2 here)
    m, n = 20, 12
    b = rng.standard_normal((4, m, n))
    a = (b * np.logspace(0, -6, n)).astype(np.float32)
    s = host(L.svdvals(dev(a, device)))
    ref = np.linalg.svd(host(a), compute_uv=False)  # float64: accurate to ~1e-10 relative here
    kappa = np.linalg.cond(b)
    assert np.all(np.abs(s - ref) / ref <= tol(np.float32, m, n) * kappa[:, None])


@pytest.mark.parametrize("dtype", DTYPES)
def test_svd_rank_deficient_zero_identity(rng, device, dtype):
    m, n = 9, 6
    a = np.stack([rng.standard_normal((m, 2)) @ rng.standard_normal((2, n)),  # rank 2
                  np.zeros((m, n)), np.eye(m, n), rng.standard_normal((m, n))])
    a[3, :, 4] = a[3, :, 1]  # two equal columns: rank 5
    a = a.astype(dtype)
    for full in (True, False):
        u, s, vh = L.svd(dev(a, device), full_matrices=full)
        check_svd(a, u, s, vh, dtype, full)
        sh = host(s)
        assert np.all(sh[0, 2:] <= tol(dtype, m, n) * fro(host(a[0])))
        assert np.array_equal(sh[1], np.zeros(n)) and np.array_equal(sh[2], np.ones(n))
        assert sh[3, 5] <= tol(dtype, m, n) * fro(host(a[3]))
    # wide and tall zero matrices still get orthogonal U and Vh
    for shape in [(3, 7), (7, 3)]:
        u, s, vh = L.svd(dev(np.zeros(shape, dtype), device))
        assert orth_error(u) <= tol(dtype, *shape) and orth_error(vh, rows=True) <= tol(dtype, *shape)


@pytest.mark.parametrize("dtype", DTYPES)
def test_svd_nan_info_and_linalgerror(rng, device, dtype):
    m, n = 6, 4
    a = rng.standard_normal((2, 3, m, n))
    a[0, 2, 5, 3] = np.nan
    a[1, 1, 0, 0] = -np.inf
    a = a.astype(dtype)
    for call in (lambda x: L.svd(x), lambda x: L.svd(x, compute_uv=False), L.svdvals):
        with pytest.raises(L.LinAlgError) as e:
            call(dev(a, device))
        assert e.value.indices == [(0, 2), (1, 1)] and e.value.codes == [1, 1]
        assert "2 of 6 matrices are not decomposed: batch index (0, 2): it has a NaN or Inf" in str(e.value)
    u, s, vh, info = L.svd(dev(a, device), check=False)
    info = np.asarray(info)
    assert info.shape == (2, 3) and info.dtype == np.int32
    assert np.array_equal(info, [[0, 0, 1], [0, 1, 0]])
    uh, sh, vhh = host(u), host(s), host(vh)
    for idx in [(0, 2), (1, 1)]:
        assert np.all(np.isnan(uh[idx])) and np.all(np.isnan(sh[idx])) and np.all(np.isnan(vhh[idx]))
    for idx in [(0, 0), (0, 1), (1, 0), (1, 2)]:
        check_svd(a[idx], uh[idx], sh[idx], vhh[idx], dtype, True)
    s2, info2 = L.svd(dev(a, device), compute_uv=False, check=False)
    assert np.array_equal(np.asarray(info2), info)
    s3, info3 = L.svdvals(dev(a, device), check=False)
    assert np.array_equal(np.asarray(info3), info)
    assert np.array_equal(host(s3), host(s2), equal_nan=True)
    with pytest.raises(L.LinAlgError, match=r"^svd: the matrix is not decomposed \(it has a NaN or Inf\)$"):
        L.svd(dev(a[1, 1], device))


def test_svd_max_sweeps(rng, device):
    a = rng.standard_normal((2, 20, 12))
    _, s, _, info = L.svd(dev(a, device), max_sweeps=1, check=False)
    assert np.array_equal(np.asarray(info), [2, 2])
    with pytest.raises(L.LinAlgError, match=r"svdvals: 2 of 2 .* no convergence within max_sweeps=1"):
        L.svdvals(dev(a, device), max_sweeps=1)
    u, s, vh = L.svd(dev(a, device), max_sweeps=60)
    check_svd(a, u, s, vh, np.float64, True)


# ---- streams, errors ----------------------------------------------------------------------

def test_stream_and_alloy_arrays(rng, device):
    s = alloy.Stream(device) if device else alloy.Stream()
    a = sym(rng, (4,), 6)
    aa = alloy.asarray(a, device=device) if device else alloy.asarray(a)
    w, v, info = L.eigh(aa, stream=s, check=False)
    u, sv, vh, info2 = L.svd(aa, stream=s, check=False)
    for r in (w, v, info, u, sv, vh, info2):
        assert r.stream is s
    s.synchronize()
    check_eigh(a, w, v, np.float64)
    check_svd(a, u, sv, vh, np.float64, True)
    # the singular values of a symmetric matrix are |eigenvalues|
    assert np.allclose(np.sort(np.abs(host(w)), axis=-1)[..., ::-1], host(sv), rtol=0, atol=1e-13)


def test_errors(device):
    sq = dev(np.eye(3), device)
    with pytest.raises(alloy.InvalidArgumentError, match="square"):
        L.eigh(dev(np.ones((3, 2)), device))
    with pytest.raises(alloy.InvalidArgumentError):
        L.eigvalsh(dev(np.ones(3), device))  # 1-D
    for fn in (L.eigh, L.svd):
        with pytest.raises(alloy.InvalidArgumentError, match="int32"):
            fn(dev(np.ones((3, 3), np.int32), device))
    with pytest.raises(alloy.InvalidArgumentError):
        L.svd(dev(np.ones(3), device))
    for bad in ("X", "lower", 0, None):
        with pytest.raises(alloy.InvalidArgumentError, match="UPLO"):
            L.eigh(sq, UPLO=bad)
    for fn in (L.eigh, L.eigvalsh, L.svd, L.svdvals):
        for bad in (0, -1, True, 2.0, 2 ** 31):
            with pytest.raises(alloy.InvalidArgumentError, match="max_sweeps"):
                fn(sq, max_sweeps=bad)
    with pytest.raises(TypeError):
        L.eigh(np.eye(3), "L", True)  # check is keyword-only
    with pytest.raises(TypeError):
        L.svd(np.eye(3), True, True, True)
    with pytest.raises(TypeError):
        L.svdvals(np.eye(3), True)
