"""alloy.mlstm (step and parallel) against a NumPy float64 run of the
recurrence of docs/mlstm.md: S = 1 and odd S, head sizes 1 and 16/32,
step chains equal to the parallel form, states updated in place and into
given outputs, float32 within the C test's bound (2e-4 of max|h|, with
well-conditioned gates: pre-activations in [-3, 3]), float16/bfloat16
inputs within 2e-2, and errors naming the argument. On the test device
(ALLOY_TEST_DEVICE, default alloy's default device; conftest.py)."""
import numpy as np
import pytest

import alloy

M = alloy.mlstm
TOL = {"float32": 2e-4, "float16": 2e-2, "bfloat16": 2e-2}


def dev(x, device):
    return alloy.asarray(x, device=device) if device else x


def host(x):
    return np.asarray(x, dtype=np.float64)


def inputs(rng, B, NH, S, DK, DV):
    q = rng.standard_normal((B, NH, S, DK))
    k = rng.standard_normal((B, NH, S, DK))
    v = rng.standard_normal((B, NH, S, DV))
    i = rng.uniform(-3, 3, (B, NH, S))
    f = rng.uniform(-3, 3, (B, NH, S))
    return q, k, v, i, f


def reference(q, k, v, i, f, state=None, eps=1e-6):
    """float64 recurrence over S: h (B, NH, S, DV) and the final (c, n, m)."""
    q, k, v, i, f = (np.asarray(x, dtype=np.float64) for x in (q, k, v, i, f))
    B, NH, S, DK = q.shape
    DV = v.shape[-1]
    if state is None:
        c, n, m = np.zeros((B, NH, DK, DV)), np.zeros((B, NH, DK)), np.zeros((B, NH))
    else:
        c, n, m = (np.array(x, dtype=np.float64) for x in state)
        m = m[..., 0]
    h = np.zeros((B, NH, S, DV))
    for t in range(S):
        lf = -np.logaddexp(0.0, -f[:, :, t])
        m_new = np.maximum(lf + m, i[:, :, t])
        a, b = np.exp(lf + m - m_new), np.exp(i[:, :, t] - m_new)
        kt, vt = k[:, :, t], v[:, :, t]
        c = a[..., None, None] * c + b[..., None, None] * kt[..., :, None] * vt[..., None, :]
        n = a[..., None] * n + b[..., None] * kt
        m = m_new
        qh = q[:, :, t] / np.sqrt(DK)
        den = np.maximum(np.abs(np.sum(qh * n, axis=-1)), np.exp(-m)) + eps
        h[:, :, t] = np.einsum("bhd,bhde->bhe", qh, c) / den[..., None]
    return h, (c, n, m[..., None])


def rel(got, ref):
    got, ref = host(got), host(ref)
    if ref.size == 0:
        return 0.0
    return float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30))


SHAPES = [(1, 1, 1, 1, 1), (2, 3, 1, 16, 32), (1, 2, 7, 16, 16), (2, 1, 5, 1, 32), (1, 2, 33, 32, 16)]


@pytest.mark.parametrize("B,NH,S,DK,DV", SHAPES)
def test_parallel_against_recurrence(rng, device, B, NH, S, DK, DV):
    q, k, v, i, f = inputs(rng, B, NH, S, DK, DV)
    ref, _ = reference(q, k, v, i, f)
    args = [dev(x.astype(np.float32), device) for x in (q, k, v, i, f)]
    h = M.parallel(*args)
    assert isinstance(h, alloy.Array) and h.shape == (B, NH, S, DV) and h.dtype == alloy.float32
    assert rel(h, ref) <= TOL["float32"]


@pytest.mark.parametrize("B,NH,S,DK,DV", SHAPES)
def test_step_chain_equals_parallel(rng, device, B, NH, S, DK, DV):
    q, k, v, i, f = (x.astype(np.float32) for x in inputs(rng, B, NH, S, DK, DV))
    ref, (cr, nr, mr) = reference(q, k, v, i, f)
    hp = host(M.parallel(*[dev(x, device) for x in (q, k, v, i, f)]))
    c = dev(np.zeros((B, NH, DK, DV), np.float32), device)
    n = dev(np.zeros((B, NH, DK), np.float32), device)
    m = dev(np.zeros((B, NH, 1), np.float32), device)
    hs = []
    for t in range(S):
        h, (c, n, m) = M.step(*[dev(np.ascontiguousarray(x[:, :, t]), device) for x in (q, k, v)],
                              dev(np.ascontiguousarray(i[:, :, t:t + 1]), device),
                              dev(np.ascontiguousarray(f[:, :, t:t + 1]), device), c, n, m)
        assert h.shape == (B, NH, DV) and c.shape == (B, NH, DK, DV) and n.shape == (B, NH, DK)
        assert m.shape == (B, NH, 1) and c.dtype == alloy.float32
        hs.append(host(h))
    hs = np.stack(hs, axis=2)
    assert rel(hs, ref) <= TOL["float32"]
    assert rel(hs, hp) <= TOL["float32"]
    assert rel(c, cr) <= TOL["float32"] and rel(n, nr) <= TOL["float32"] and rel(m, mr) <= TOL["float32"]


def test_step_in_place_and_into_outputs(rng, device):
    B, NH, S, DK, DV = 2, 2, 4, 16, 32
    q, k, v, i, f = (x.astype(np.float32) for x in inputs(rng, B, NH, S, DK, DV))
    # a non-zero initial state: the first two tokens run in the reference
    _, st0 = reference(q[:, :, :2], k[:, :, :2], v[:, :, :2], i[:, :, :2], f[:, :, :2])
    ref, (cr, nr, mr) = reference(q[:, :, 2:], k[:, :, 2:], v[:, :, 2:], i[:, :, 2:], f[:, :, 2:], st0)
    c = alloy.array(st0[0].astype(np.float32), device=device)
    n = alloy.array(st0[1].astype(np.float32), device=device)
    m = alloy.array(st0[2].astype(np.float32), device=device)
    cid, nid, mid = id(c), id(n), id(m)
    hout = alloy.zeros((B, NH, DV), "float32", device=c.device)
    hs = []
    for t in range(2, S):
        tok = [dev(np.ascontiguousarray(x), device) for x in
               (q[:, :, t], k[:, :, t], v[:, :, t], i[:, :, t:t + 1], f[:, :, t:t + 1])]
        h, (c2, n2, m2) = M.step(*tok, c, n, m, out=(hout, c, n, m))
        assert h is hout and c2 is c and n2 is n and m2 is m
        hs.append(host(h))
    assert (id(c), id(n), id(m)) == (cid, nid, mid)
    assert rel(np.stack(hs, axis=2), ref) <= TOL["float32"]
    assert rel(c, cr) <= TOL["float32"] and rel(n, nr) <= TOL["float32"] and rel(m, mr) <= TOL["float32"]
    # separate outputs leave the inputs as they were; None entries are new arrays
    c0 = np.asarray(c).copy()
    cout = alloy.zeros(c.shape, "float32", device=c.device)
    tok = [dev(np.ascontiguousarray(x), device) for x in
           (q[:, :, 0], k[:, :, 0], v[:, :, 0], i[:, :, 0:1], f[:, :, 0:1])]
    h, (c3, n3, m3) = M.step(*tok, c, n, m, out=(None, cout, None, None))
    assert c3 is cout and n3 is not n and m3 is not m
    np.testing.assert_array_equal(np.asarray(c), c0)
    ref1, (cr1, nr1, mr1) = reference(*[x[:, :, :1] for x in (q, k, v, i, f)], (cr, nr, mr))
    assert rel(h, ref1[:, :, 0]) <= TOL["float32"] and rel(c3, cr1) <= TOL["float32"]
    assert rel(n3, nr1) <= TOL["float32"] and rel(m3, mr1) <= TOL["float32"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_inputs(rng, device, dtype):
    B, NH, S, DK, DV = 1, 2, 5, 16, 32
    q, k, v, i, f = inputs(rng, B, NH, S, DK, DV)
    half = [alloy.array(x.astype(np.float32), dtype=dtype, device=device) for x in (q, k, v, i, f)]
    # the reference sees the rounded inputs
    rounded = [np.asarray(x, dtype=np.float32) for x in half]
    ref, (cr, nr, mr) = reference(*rounded)
    h = M.parallel(*half)
    assert h.dtype == getattr(alloy, dtype)
    assert rel(np.asarray(h, dtype=np.float32), ref) <= TOL[dtype]
    tok = [alloy.array(x[:, :, 0] if x.ndim == 4 else x[:, :, :1], dtype=dtype, device=device)
           for x in (q, k, v, i, f)]
    zeros = [alloy.zeros(s, "float32", device=h.device) for s in ((B, NH, DK, DV), (B, NH, DK), (B, NH, 1))]
    h1, (c1, n1, m1) = M.step(*tok, *zeros)
    ref1, (cr1, nr1, mr1) = reference(*[x[:, :, :1] for x in rounded])
    assert h1.dtype == getattr(alloy, dtype) and c1.dtype == alloy.float32
    assert rel(np.asarray(h1, dtype=np.float32), ref1[:, :, 0]) <= TOL[dtype]
    assert rel(c1, cr1) <= TOL[dtype]


def test_empty_sequence(device):
    z = lambda *s: dev(np.zeros(s, np.float32), device)  # noqa: E731
    h = M.parallel(z(2, 1, 0, 4), z(2, 1, 0, 4), z(2, 1, 0, 8), z(2, 1, 0), z(2, 1, 0))
    assert h.shape == (2, 1, 0, 8)


def test_errors_name_the_argument(rng, device):
    B, NH, DK, DV = 1, 2, 4, 8
    z = lambda *s: dev(np.zeros(s, np.float32), device)  # noqa: E731
    good = dict(q=z(B, NH, DK), k=z(B, NH, DK), v=z(B, NH, DV), i=z(B, NH, 1), f=z(B, NH, 1),
                c=z(B, NH, DK, DV), n=z(B, NH, DK), m=z(B, NH, 1))
    M.step(**good)
    for name, bad in [("k", z(B, NH, DK + 1)), ("v", z(B, NH)), ("i", z(B, NH)), ("f", z(B, NH, 2)),
                      ("c", z(B, NH, DV, DK)), ("n", z(B, NH, DV)), ("m", z(B, NH))]:
        with pytest.raises(alloy.InvalidArgumentError, match=rf"\b{name}\b"):
            M.step(**{**good, name: bad})
    with pytest.raises(alloy.InvalidArgumentError, match=r"\bc\b"):
        M.step(**{**good, "c": dev(np.zeros((B, NH, DK, DV), np.float16), device)})
    with pytest.raises(alloy.InvalidArgumentError, match="eps"):
        M.step(**good, eps=-1.0)
    with pytest.raises(alloy.InvalidArgumentError, match="h"):
        M.step(**good, out=(z(B, NH, DV + 1), None, None, None))
    with pytest.raises(alloy.InvalidArgumentError, match="c_out"):
        M.step(**good, out=(None, z(B, NH, DK, DV + 1), None, None))
    with pytest.raises(TypeError, match="out"):
        M.step(**good, out=(None, None))
    S = 3
    pg = dict(q=z(B, NH, S, DK), k=z(B, NH, S, DK), v=z(B, NH, S, DV), i=z(B, NH, S), f=z(B, NH, S))
    M.parallel(**pg)
    for name, bad in [("k", z(B, NH, S + 1, DK)), ("v", z(B, NH, S)), ("i", z(B, NH, S, 1)), ("f", z(B, NH, 2))]:
        with pytest.raises(alloy.InvalidArgumentError, match=rf"\b{name}\b"):
            M.parallel(**{**pg, name: bad})
    with pytest.raises(alloy.InvalidArgumentError, match=r"\bk\b"):
        M.parallel(**{**pg, "k": dev(np.zeros((B, NH, S, DK), np.float16), device)})
    with pytest.raises(alloy.InvalidArgumentError, match="out|h"):
        M.parallel(**pg, out=z(B, NH, S, DV + 1))
