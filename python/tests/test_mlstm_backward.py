"""alloy.mlstm.chunkwise_backward against central finite differences of the
NumPy float64 recurrence (test_mlstm.reference): the loss is <dh, h> plus the
final states against their cotangents; float64 inputs (the CPU backend has
double), float32 against the float64 gradient."""
import numpy as np
import pytest

import alloy
import alloy.mlstm as M
from test_mlstm import dev, host, inputs, reference


def loss(args, st, cot):
    q, k, v, i, f = args
    h, (c, n, m) = reference(q, k, v, i, f, st)
    dh, dc, dn, dm = cot
    return float(np.sum(dh * h) + np.sum(dc * c) + np.sum(dn * n) + np.sum(dm * m))


def numeric_grads(args, st, cot, step=1e-5):
    """d loss / d (q, k, v, i, f, c0, n0, m0) by central differences."""
    xs = [np.array(a, dtype=np.float64) for a in list(args) + list(st)]
    out = []
    for x in xs:
        g = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            old = x[idx]
            x[idx] = old + step
            up = loss(xs[:5], xs[5:], cot)
            x[idx] = old - step
            down = loss(xs[:5], xs[5:], cot)
            x[idx] = old
            g[idx] = (up - down) / (2 * step)
        out.append(g)
    return out


def problem(rng, B=1, NH=2, S=7, DK=3, DV=2):
    args = inputs(rng, B, NH, S, DK, DV)
    st = (rng.uniform(-1, 1, (B, NH, DK, DV)), rng.uniform(-1, 1, (B, NH, DK)), rng.uniform(-1, 1, (B, NH, 1)))
    cot = (rng.standard_normal((B, NH, S, DV)), rng.standard_normal((B, NH, DK, DV)),
           rng.standard_normal((B, NH, DK)), rng.standard_normal((B, NH, 1)))
    return args, st, cot


def worst(got, want):
    scale = max(max(float(np.max(np.abs(w))) for w in want), 1e-30)
    return max(float(np.max(np.abs(host(g) - w))) / scale for g, w in zip(got, want))


@pytest.mark.parametrize("chunk", [None, 16])
def test_float64_against_finite_differences(rng, device, chunk):
    if device:
        pytest.skip("float64 gradients are checked on the CPU backend")
    args, st, cot = problem(rng)
    want = numeric_grads(args, st, cot)
    dq, dk, dv, di, df, states = M.chunkwise_backward(*args, cot[0], *st, *cot[1:], chunk_size=chunk)
    assert isinstance(dq, alloy.Array) and dq.dtype == alloy.float64 and dq.shape == args[0].shape
    assert states is not None and len(states) == 3
    assert worst([dq, dk, dv, di, df, *states], want) <= 1e-6


def test_float32_and_no_states(rng, device):
    args, st, cot = problem(rng, S=33, DK=8, DV=4)
    zero = (np.zeros_like(st[0]), np.zeros_like(st[1]), np.zeros_like(st[2]))
    want = M.chunkwise_backward(*args, cot[0], *zero, *cot[1:])  # float64, the CPU
    got = M.chunkwise_backward(*[dev(a.astype(np.float32), device) for a in args],
                               dev(cot[0].astype(np.float32), device), None, None, None,
                               *[dev(c.astype(np.float32), device) for c in cot[1:]])
    assert got[5] is None and got[0].dtype == alloy.float32
    assert worst(got[:5], [host(w) for w in want[:5]]) <= 5e-4


def test_errors_name_the_argument(rng, device):
    args, st, cot = problem(rng)
    a32 = [dev(a.astype(np.float32), device) for a in args]
    with pytest.raises(alloy.InvalidArgumentError, match="dh"):
        M.chunkwise_backward(*a32, dev(np.zeros((1, 2, 6, 2), np.float32), device))
    with pytest.raises(alloy.InvalidArgumentError, match="chunk_size"):
        M.chunkwise_backward(*a32, dev(cot[0].astype(np.float32), device), chunk_size=24)
