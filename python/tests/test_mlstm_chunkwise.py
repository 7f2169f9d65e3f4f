"""alloy.mlstm.chunkwise against a NumPy float64 run of the recurrence
(test_mlstm.reference): S = 1, odd S, S not a multiple of the chunk, every
chunk size from 16 to 1024, given initial states and the final states,
float32 within 2e-4 of max|h| (gates in [-3, 3]), float16/bfloat16 inputs
within 2e-2, packed sequences (cu_seqlens) equal to each sequence alone,
h into a given array, and errors naming the argument. On the test device
(ALLOY_TEST_DEVICE, default alloy's default device; conftest.py)."""
import numpy as np
import pytest

import alloy
from test_mlstm import TOL, dev, host, inputs, reference, rel

M = alloy.mlstm


def initial_state(rng, B, NH, DK, DV):
    return (rng.uniform(-2, 2, (B, NH, DK, DV)).astype(np.float32),
            rng.uniform(-2, 2, (B, NH, DK)).astype(np.float32),
            rng.uniform(-1, 2, (B, NH, 1)).astype(np.float32))


@pytest.mark.parametrize("B,NH,S,DK,DV", [(1, 1, 1, 1, 1), (2, 2, 37, 16, 24), (1, 2, 70, 40, 72),
                                          (1, 1, 130, 8, 8)])
@pytest.mark.parametrize("chunk", [None, 16, 32, 128, 1024])
def test_against_recurrence(rng, device, B, NH, S, DK, DV, chunk):
    q, k, v, i, f = (x.astype(np.float32) for x in inputs(rng, B, NH, S, DK, DV))
    st = initial_state(rng, B, NH, DK, DV)
    ref, (cr, nr, mr) = reference(q, k, v, i, f, st)
    h, (c, n, m) = M.chunkwise(*[dev(x, device) for x in (q, k, v, i, f)], *[dev(x, device) for x in st],
                               return_last_states=True, chunk_size=chunk)
    assert isinstance(h, alloy.Array) and h.shape == (B, NH, S, DV) and h.dtype == alloy.float32
    assert c.shape == (B, NH, DK, DV) and n.shape == (B, NH, DK) and m.shape == (B, NH, 1)
    assert rel(h, ref) <= TOL["float32"]
    assert rel(c, cr) <= TOL["float32"] and rel(n, nr) <= TOL["float32"] and rel(m, mr) <= 1e-5


def test_zero_states_and_parallel(rng, device):
    B, NH, S, DK, DV = 2, 2, 45, 16, 16
    q, k, v, i, f = (dev(x.astype(np.float32), device) for x in inputs(rng, B, NH, S, DK, DV))
    h = M.chunkwise(q, k, v, i, f)
    assert rel(h, M.parallel(q, k, v, i, f)) <= TOL["float32"]
    ref, _ = reference(*[host(x) for x in (q, k, v, i, f)])
    assert rel(h, ref) <= TOL["float32"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_inputs(rng, device, dtype):
    B, NH, S, DK, DV = 1, 2, 50, 32, 32
    half = [alloy.array(x.astype(np.float32), dtype=dtype, device=device) for x in inputs(rng, B, NH, S, DK, DV)]
    ref, (cr, _, _) = reference(*[np.asarray(x, dtype=np.float32) for x in half])
    h, (c, _, _) = M.chunkwise(*half, return_last_states=True, chunk_size=16)
    assert h.dtype == getattr(alloy, dtype) and c.dtype == alloy.float32
    assert rel(np.asarray(h, dtype=np.float32), ref) <= TOL[dtype]
    assert rel(c, cr) <= TOL[dtype]


def test_precision(rng, device):
    """precision="default" (TF32's 11 significant bits, TFLA's precision: float16 tiles with power-of-two
    exponents on a GPU) within 1e-2 of the float64 recurrence; on the CPU (exact products whatever is
    asked) the same values as "high"."""
    B, NH, S, DK, DV = 1, 2, 77, 64, 40
    q, k, v, i, f = (x.astype(np.float32) for x in inputs(rng, B, NH, S, DK, DV))
    st = initial_state(rng, B, NH, DK, DV)
    ref, (cr, _, _) = reference(q, k, v, i, f, st)
    args = [dev(x, device) for x in (q, k, v, i, f, *st)]
    h, (c, _, _) = M.chunkwise(*args, return_last_states=True, chunk_size=32, precision="default")
    assert rel(h, ref) <= 1e-2 and rel(c, cr) <= 1e-2
    if h.device.type == "cpu":
        assert np.array_equal(host(h), host(M.chunkwise(*args, chunk_size=32, precision="high")))
    with pytest.raises(alloy.UnsupportedError, match="precision"):
        M.chunkwise(*args, precision="highest")
    with pytest.raises(alloy.InvalidArgumentError, match="precision"):
        M.chunkwise(*args, precision="tf32")
    with pytest.raises(TypeError, match="precision"):
        M.chunkwise(*args, precision=1)


def test_varlen_equals_each_alone(rng, device):
    NH, DK, DV = 2, 16, 8
    lens = [7, 0, 40, 1, 19]
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    T, N = int(cu[-1]), len(lens)
    q, k, v, i, f = (x.astype(np.float32) for x in inputs(rng, 1, NH, T, DK, DV))
    st = initial_state(rng, N, NH, DK, DV)
    h, (c, n, m) = M.chunkwise(*[dev(x, device) for x in (q, k, v, i, f)], *[dev(x, device) for x in st],
                               return_last_states=True, chunk_size=16, cu_seqlens=dev(cu, device))
    assert h.shape == (1, NH, T, DV) and c.shape == (N, NH, DK, DV) and m.shape == (N, NH, 1)
    h, c, n, m = host(h), host(c), host(n), host(m)
    for s in range(N):
        a, b = cu[s], cu[s + 1]
        part = [x[:, :, a:b] for x in (q, k, v, i, f)]
        ref, (cr, nr, mr) = reference(*part, tuple(x[s:s + 1] for x in st))
        assert rel(h[:, :, a:b], ref) <= TOL["float32"]
        assert rel(c[s:s + 1], cr) <= TOL["float32"] and rel(n[s:s + 1], nr) <= TOL["float32"]
        assert rel(m[s:s + 1], mr) <= 1e-5


def test_out_is_written(rng, device):
    B, NH, S, DK, DV = 1, 1, 20, 8, 8
    ops = [dev(x.astype(np.float32), device) for x in inputs(rng, B, NH, S, DK, DV)]
    out = alloy.zeros((B, NH, S, DV), "float32", device=alloy.asarray(ops[0]).device)
    h = M.chunkwise(*ops, out=out)
    assert h is out
    assert rel(out, M.parallel(*ops)) <= TOL["float32"]


def test_errors_name_the_argument(device):
    B, NH, S, DK, DV = 1, 2, 5, 4, 8
    z = lambda *s: dev(np.zeros(s, np.float32), device)  # noqa: E731
    good = dict(q=z(B, NH, S, DK), k=z(B, NH, S, DK), v=z(B, NH, S, DV), i=z(B, NH, S), f=z(B, NH, S))
    M.chunkwise(**good)
    for name, bad in [("k", z(B, NH, S + 1, DK)), ("v", z(B, NH, S)), ("i", z(B, NH, S, 1)), ("f", z(B, NH, 2))]:
        with pytest.raises(alloy.InvalidArgumentError, match=rf"\b{name}\b"):
            M.chunkwise(**{**good, name: bad})
    with pytest.raises(alloy.InvalidArgumentError, match="chunk_size"):
        M.chunkwise(**good, chunk_size=24)
    with pytest.raises(alloy.InvalidArgumentError, match="c_initial, n_initial and m_initial"):
        M.chunkwise(**good, c_initial=z(B, NH, DK, DV))
    with pytest.raises(alloy.InvalidArgumentError, match="m_initial"):
        M.chunkwise(**good, c_initial=z(B, NH, DK, DV), n_initial=z(B, NH, DK), m_initial=z(B, NH))
    with pytest.raises(alloy.InvalidArgumentError, match="cu_seqlens"):
        M.chunkwise(**good, cu_seqlens=dev(np.array([0, 5], np.float32), device))
    with pytest.raises(alloy.InvalidArgumentError, match="eps"):
        M.chunkwise(**good, eps=float("nan"))
