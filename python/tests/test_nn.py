"""alloy.nn (soft-cap, RMSNorm/LayerNorm per head, causal depthwise
convolution; forward and backward) against NumPy float64 references: float64
and float32 operands, awkward sizes, the backward against the analytic
float64 gradients, the decoding state, and errors naming the argument. On the
test device (ALLOY_TEST_DEVICE; float64 only where the device has it: the
CPU)."""
import numpy as np
import pytest

import alloy

N = alloy.nn


def dev(x, device):
    return alloy.asarray(x, device=device) if device else x


def host(x):
    return np.asarray(x, dtype=np.float64)


def dtypes(device):
    return ["float64", "float32"] if device in (None, "cpu") else ["float32"]


TOL = {"float64": 1e-12, "float32": 3e-5}


def close(got, ref, dt):
    ref = np.asarray(ref)
    assert host(got).shape == ref.shape
    if ref.size == 0:
        return
    assert np.max(np.abs(host(got) - ref)) <= TOL[dt] * max(1.0, np.max(np.abs(ref)))


@pytest.mark.parametrize("n", [1, 33, 1000])
def test_softcap(device, n):
    rng = np.random.default_rng(n)
    for dt in dtypes(device):
        x = rng.uniform(-60, 60, n).astype(dt)
        dy = rng.uniform(-1, 1, n).astype(dt)
        t = np.tanh(x.astype(np.float64) / 15)
        close(N.softcap(dev(x, device), 15), 15 * t, dt)
        close(N.softcap_backward(dev(x, device), dev(dy, device), 15), dy * (1 - t * t), dt)


def norm_ref(x, w, b, dh, eps, rms):
    R, D = x.shape
    g = x.reshape(R, D // dh, dh)
    mu = 0 if rms else g.mean(-1, keepdims=True)
    xh = (g - mu) / np.sqrt(((g - mu) ** 2).mean(-1, keepdims=True) + eps)
    return xh.reshape(R, D) * w + (0 if b is None else b), xh.reshape(R, D)


def norm_grad_ref(x, w, dy, dh, eps, rms):
    R, D = x.shape
    _, xh = norm_ref(x, w, None, dh, eps, rms)
    g = (dy * w).reshape(R, D // dh, dh)
    xg = xh.reshape(R, D // dh, dh)
    mu = 0 if rms else x.reshape(R, D // dh, dh).mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((x.reshape(R, D // dh, dh) - mu) ** 2).mean(-1, keepdims=True) + eps)
    mg = 0 if rms else g.mean(-1, keepdims=True)
    dx = rstd * (g - mg - xg * (g * xg).mean(-1, keepdims=True))
    return dx.reshape(R, D), (dy * xh).sum(0), dy.sum(0)


@pytest.mark.parametrize("R,D,dh", [(1, 1, 0), (3, 33, 0), (5, 1000, 0), (7, 96, 32), (40, 40, 8)])
@pytest.mark.parametrize("rms", [False, True])
def test_norms(device, R, D, dh, rms):
    rng = np.random.default_rng(R * D)
    for dt in dtypes(device):
        x = rng.uniform(-3, 3, (R, D)).astype(dt)
        w = rng.uniform(0.5, 1.5, D).astype(dt)
        b = None if rms else rng.uniform(-1, 1, D).astype(dt)
        dy = rng.uniform(-1, 1, (R, D)).astype(dt)
        x64, w64, dy64 = (a.astype(np.float64) for a in (x, w, dy))
        dhh = dh or D
        ref, _ = norm_ref(x64, w64, None if b is None else b.astype(np.float64), dhh, 1e-5, rms)
        if rms:
            y = N.rms_norm(dev(x, device), dev(w, device), dh)
            dx, dw = N.rms_norm_backward(dev(x, device), dev(w, device), dev(dy, device), dh)
        else:
            y = N.layer_norm(dev(x, device), dev(w, device), dev(b, device), dh)
            dx, dw, db = N.layer_norm_backward(dev(x, device), dev(w, device), dev(dy, device), dh)
        close(y, ref, dt)
        rdx, rdw, rdb = norm_grad_ref(x64, w64, dy64, dhh, 1e-5, rms)
        close(dx, rdx, dt)
        close(dw, rdw, dt)
        if not rms:
            close(db, rdb, dt)
        # the statistics the forward can return, and the backward from them
        if rms:
            y2, stats = N.rms_norm(dev(x, device), dev(w, device), dh, return_stats=True)
            dx2, dw2 = N.rms_norm_backward(dev(x, device), dev(w, device), dev(dy, device), dh, stats=stats)
        else:
            y2, stats = N.layer_norm(dev(x, device), dev(w, device), dev(b, device), dh, return_stats=True)
            dx2, dw2, db2 = N.layer_norm_backward(dev(x, device), dev(w, device), dev(dy, device), dh, stats=stats)
            close(db2, rdb, dt)
        assert np.array_equal(host(y2), host(y))
        g = x64.reshape(R, D // dhh, dhh)
        mu = np.zeros((R, D // dhh)) if rms else g.mean(-1)
        rstd = 1 / np.sqrt(((g - mu[..., None]) ** 2).mean(-1) + 1e-5)
        st = host(stats)
        assert st.shape == (R, D // dhh, 2) and np.asarray(stats).dtype == np.dtype(dt)
        close(st[..., 0], mu, dt)
        assert np.max(np.abs(st[..., 1] - rstd) / rstd) <= 30 * TOL[dt]
        close(dx2, rdx, dt)
        close(dw2, rdw, dt)


def test_norm_given_stats(device):
    """The backward reads the statistics it is given: statistics that are not
    x's give the gradient at those statistics."""
    rng = np.random.default_rng(7)
    R, D, dh = 6, 96, 32
    for dt in dtypes(device):
        x = rng.uniform(-3, 3, (R, D)).astype(dt)
        w = rng.uniform(0.5, 1.5, D).astype(dt)
        dy = rng.uniform(-1, 1, (R, D)).astype(dt)
        st = np.stack([rng.uniform(-0.5, 0.5, (R, D // dh)), rng.uniform(0.3, 2, (R, D // dh))], -1).astype(dt)
        dx, dw, db = N.layer_norm_backward(dev(x, device), dev(w, device), dev(dy, device), dh,
                                           stats=dev(st, device))
        x64, w64, dy64, st64 = (a.astype(np.float64) for a in (x, w, dy, st))
        xh = (x64.reshape(R, -1, dh) - st64[..., :1]) * st64[..., 1:]
        gg = (dy64 * w64).reshape(R, -1, dh)
        rdx = st64[..., 1:] * (gg - gg.mean(-1, keepdims=True) - xh * (gg * xh).mean(-1, keepdims=True))
        close(dx, rdx.reshape(R, D), dt)
        close(dw, (dy64 * xh.reshape(R, D)).sum(0), dt)
        close(db, dy64.sum(0), dt)
        with pytest.raises(alloy.InvalidArgumentError, match="stats has shape"):
            N.layer_norm_backward(dev(x, device), dev(w, device), dev(dy, device), stats=dev(st, device))


def conv_ref(x, w, bias, state):
    B, S, C = x.shape
    K = w.shape[1]
    ext = np.concatenate([np.zeros((B, K - 1, C)) if state is None else state, x], axis=1)
    y = np.zeros_like(x) + (0 if bias is None else bias)
    for j in range(K):
        y += w[:, j] * ext[:, j:j + S, :]
    return y, ext


@pytest.mark.parametrize("B,S,C,K", [(1, 1, 1, 1), (2, 33, 5, 3), (3, 17, 130, 8)])
@pytest.mark.parametrize("with_state", [False, True])
def test_causal_conv1d(device, B, S, C, K, with_state):
    rng = np.random.default_rng(B * S * C * K)
    for dt in dtypes(device):
        x = rng.uniform(-2, 2, (B, S, C)).astype(dt)
        w = rng.uniform(-1, 1, (C, K)).astype(dt)
        bias = rng.uniform(-1, 1, C).astype(dt)
        state = rng.uniform(-2, 2, (B, K - 1, C)).astype(dt) if with_state else None
        dy = rng.uniform(-1, 1, (B, S, C)).astype(dt)
        st64 = None if state is None else state.astype(np.float64)
        ref, ext = conv_ref(x.astype(np.float64), w.astype(np.float64), bias.astype(np.float64), st64)
        d = (lambda a: None if a is None else dev(a, device))
        y, new_state = N.causal_conv1d(d(x), d(w), d(bias), d(state), return_state=True)
        close(y, ref, dt)
        close(new_state, ext[:, S:, :], dt)
        dx, dw, db, dstate = N.causal_conv1d_backward(d(x), d(w), d(dy), d(state))
        dy64 = dy.astype(np.float64)
        dext = np.zeros_like(ext)
        for j in range(K):
            dext[:, j:j + S, :] += w[:, j].astype(np.float64) * dy64
        close(dx, dext[:, K - 1:, :], dt)
        close(dw, np.stack([(dy64 * ext[:, j:j + S, :]).sum((0, 1)) for j in range(K)], 1), dt)
        close(db, dy64.sum((0, 1)), dt)
        if with_state:
            close(dstate, dext[:, :K - 1, :], dt)
        else:
            assert dstate is None


def test_errors(device):
    x = dev(np.zeros((3, 8), np.float32), device)
    with pytest.raises(alloy.InvalidArgumentError, match="weight has shape"):
        N.rms_norm(x, dev(np.ones(7, np.float32), device))
    with pytest.raises(alloy.InvalidArgumentError, match="head_dim is 3"):
        N.layer_norm(x, dev(np.ones(8, np.float32), device), head_dim=3)
    with pytest.raises(alloy.InvalidArgumentError, match="cap is"):
        N.softcap(x, -1.0)
    x3 = dev(np.zeros((2, 5, 8), np.float32), device)
    with pytest.raises(alloy.InvalidArgumentError, match="w must be"):
        N.causal_conv1d(x3, dev(np.zeros((8, 9), np.float32), device))
