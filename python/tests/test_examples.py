"""Every example kernel (examples/*.metal) through the Python API, loaded
with alloy's kernel-file parser, against NumPy references computed in
float64. Sizes are awkward on purpose (1, 33, 1000, 1001: not multiples of
the threadgroup). Tolerances follow the C seed tests (tests/test_seed_*.c)."""
import math

import numpy as np
import pytest

import alloy
from conftest import EXAMPLES, example_path


def load(name):
    return alloy.load_kernel_file(example_path(name))


def run(name, inputs, shapes, dtypes, grid, threadgroup, device, **template):
    kf = load(name)
    k = kf.kernel()
    outs = k(inputs=inputs, output_shapes=shapes, output_dtypes=dtypes, grid=grid,
             threadgroup=threadgroup, template=kf.template_args(**template), device=device)
    assert len(outs) == len(kf.output_names)
    for o, s, d in zip(outs, shapes, dtypes):
        assert isinstance(o, alloy.Array)
        assert o.shape == tuple(s)
        assert o.dtype == d
    return [np.asarray(o) for o in outs]


def close(got, ref, rtol, atol):
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == ref.shape
    err = np.abs(got - ref)
    bad = err > atol + rtol * np.abs(ref)
    assert not bad.any(), f"{bad.sum()} of {bad.size} elements off; worst {err.max():.3g}"


def test_every_example_is_covered():
    names = {p.stem for p in EXAMPLES.glob("*.metal")}
    tested = {"soft_cap", "soft_cap_vec4", "memcpy", "memcpy_vec4", "exp", "depthwise3", "qr_col_dot",
              "qr_col_dot_simd", "qr_update_vec", "gemm_av", "gemm_at_b", "ivf_topk_l2", "mlstm_step"}
    assert names <= tested, f"examples without a Python test: {sorted(names - tested)}"


@pytest.mark.parametrize("shape", [(1,), (1000,), (33, 29)])
def test_soft_cap(rng, device, shape):
    x = (rng.standard_normal(shape) * 10).astype(np.float32)
    cap = 2.5
    n = x.size
    (out,) = run("soft_cap", [x, cap], [x.shape], [np.float32], (n, 1, 1), (256, 1, 1), device)
    close(out, cap * np.tanh(x.astype(np.float64) / cap), 1e-5, 1e-6 * cap)


@pytest.mark.parametrize("n", [1, 4, 1001])
def test_soft_cap_vec4(rng, device, n):
    x = (rng.standard_normal(n) * 30).astype(np.float32)
    cap = np.float32(15.0)  # a NumPy scalar: a 0-d float32 input
    (out,) = run("soft_cap_vec4", [x, cap], [x.shape], [alloy.float32], ((n + 3) // 4, 1, 1),
                 (256, 1, 1), device)
    close(out, 15.0 * np.tanh(x.astype(np.float64) / 15.0), 1e-5, 1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16, np.uint8, np.int64, np.bool_])
def test_memcpy(rng, device, dtype):
    x = (rng.standard_normal((33, 7)) * 100).astype(dtype)
    (out,) = run("memcpy", [x], [x.shape], [x.dtype], (x.size, 1, 1), (256, 1, 1), device)
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("dtype,n", [(np.uint8, 1001), (np.float32, 1000), (np.float32, 1)])
def test_memcpy_vec4(rng, device, dtype, n):
    x = (rng.standard_normal(n) * 100).astype(dtype)
    (out,) = run("memcpy_vec4", [x], [x.shape], [x.dtype], ((x.nbytes + 15) // 16, 1, 1), (256, 1, 1),
                 device)
    np.testing.assert_array_equal(out, x)


def test_exp_float32(rng, device):
    x = rng.uniform(-10, 10, (4, 250)).astype(np.float32)
    (out,) = run("exp", [x], [x.shape], ["float32"], (x.size, 1, 1), (256, 1, 1), device)
    close(out, np.exp(x.astype(np.float64)), 1e-5, 0)


def test_exp_float16_template(rng, device):
    x = rng.uniform(-4, 4, 1001).astype(np.float16)
    (out,) = run("exp", [x], [x.shape], [np.float16], (x.size, 1, 1), (256, 1, 1), device,
                 T=alloy.float16)
    assert out.dtype == np.float16
    close(out, np.exp(x.astype(np.float64)), 1.0 / 512, 0)


def test_depthwise3(rng, device):
    B, C, L = 2, 3, 33
    x = rng.standard_normal((B, C, L)).astype(np.float32)
    w = rng.standard_normal((C, 3)).astype(np.float32)
    bias = rng.standard_normal(C).astype(np.float32)
    (y,) = run("depthwise3", [x, w, bias], [(B, C, L)], [np.float32], (B * C * L, 1, 1), (64, 1, 1),
               device)
    xd = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (2, 0)))
    wd = w.astype(np.float64)
    ref = (bias[None, :, None] + wd[None, :, 0:1] * xd[:, :, 0:L] + wd[None, :, 1:2] * xd[:, :, 1:L + 1]
           + wd[None, :, 2:3] * xd[:, :, 2:L + 2])
    close(y, ref, 1e-5, 1e-5)


@pytest.mark.parametrize("name,grid,tg", [("qr_col_dot", 33, 64), ("qr_col_dot_simd", 33 * 32, 64)])
def test_qr_col_dot(rng, device, name, grid, tg):
    m, k = 1000, 33
    Q = rng.standard_normal((m, k)).astype(np.float32)
    v = rng.standard_normal(m).astype(np.float32)
    (out,) = run(name, [Q, v], [(k,)], [np.float32], (grid, 1, 1), (tg, 1, 1), device)
    ref = Q.astype(np.float64).T @ v.astype(np.float64)
    close(out, ref, 1e-4, 1e-4 * math.sqrt(m))


def test_qr_update_vec(rng, device):
    m, k = 1000, 33
    Q = rng.standard_normal((m, k)).astype(np.float32)
    v = rng.standard_normal(m).astype(np.float32)
    c = rng.standard_normal(k).astype(np.float32)
    (out,) = run("qr_update_vec", [Q, v, c], [(m,)], [np.float32], (m, 1, 1), (128, 1, 1), device)
    ref = v.astype(np.float64) - Q.astype(np.float64) @ c.astype(np.float64)
    close(out, ref, 1e-4, 1e-4 * math.sqrt(k))


def round16(n):
    return (n + 15) // 16 * 16


def test_gemm_av(rng, device):
    m, n, k = 33, 29, 31
    A = rng.standard_normal((m, n)).astype(np.float32)
    V = rng.standard_normal((n, k)).astype(np.float32)
    (C,) = run("gemm_av", [A, V], [(m, k)], [np.float32], (round16(k), round16(m), 1), (16, 16, 1), device)
    close(C, A.astype(np.float64) @ V.astype(np.float64), 1e-4, 1e-4 * math.sqrt(n))


def test_gemm_at_b(rng, device):
    m, n, k = 33, 29, 31
    A = rng.standard_normal((m, n)).astype(np.float32)
    Bm = rng.standard_normal((m, k)).astype(np.float32)
    (Z,) = run("gemm_at_b", [A, Bm], [(n, k)], [np.float32], (round16(k), round16(n), 1), (16, 16, 1),
               device)
    close(Z, A.astype(np.float64).T @ Bm.astype(np.float64), 1e-4, 1e-4 * math.sqrt(m))


@pytest.mark.parametrize("K", [1, 8])
def test_ivf_topk_l2(rng, device, K):
    b, m, d, tpb = 4, 1000, 33, 64
    Q = rng.standard_normal((b, d)).astype(np.float32)
    X = rng.standard_normal((m, d)).astype(np.float32)
    ids = (np.arange(m, dtype=np.int32) * 7 + 3).astype(np.int32)
    vals, got_ids = run("ivf_topk_l2", [Q, X, ids], [(b, K), (b, K)], [np.float32, np.int32],
                        (b * tpb, 1, 1), (tpb, 1, 1), device, K=K)
    dist = ((Q.astype(np.float64)[:, None, :] - X.astype(np.float64)[None, :, :]) ** 2).sum(-1)
    ref = np.sort(dist, axis=1)[:, :K]
    close(vals, ref, 1e-5, 1e-5)
    row_of = {int(i): r for r, i in enumerate(ids)}
    for q in range(b):
        rows = [row_of[int(i)] for i in got_ids[q]]
        assert len(set(rows)) == K  # K distinct rows...
        close(dist[q, rows], ref[q], 1e-5, 1e-5)  # ...at the K smallest distances, in order


def logsigmoid(x):
    return np.where(x >= 0, -np.log1p(np.exp(-np.abs(x))), x - np.log1p(np.exp(-np.abs(x))))


def test_mlstm_step(rng, device):
    B, NH, DK, DV, TG = 2, 3, 33, 40, 64
    f32 = np.float32
    q, k = (rng.standard_normal((B, NH, DK)).astype(f32) for _ in range(2))
    v = rng.standard_normal((B, NH, DV)).astype(f32)
    i, f = (rng.standard_normal((B, NH)).astype(f32) for _ in range(2))
    C = (rng.standard_normal((B, NH, DK, DV)) * 0.1).astype(f32)
    n = (rng.standard_normal((B, NH, DK)) * 0.1).astype(f32)
    m = rng.uniform(-3, 3, (B, NH)).astype(f32)
    h, C1, n1, m1 = run("mlstm_step", [q, k, v, i, f, C, n, m], [(B, NH, DV), C.shape, n.shape, m.shape],
                        [f32] * 4, (NH * TG, B, 1), (TG, 1, 1), device)
    d = {name: a.astype(np.float64) for name, a in dict(q=q, k=k, v=v, i=i, f=f, C=C, n=n, m=m).items()}
    f_log = logsigmoid(d["f"])
    m_new = np.maximum(f_log + d["m"], d["i"])
    f_act = np.exp(f_log + d["m"] - m_new)[..., None]
    i_act = np.exp(d["i"] - m_new)[..., None]
    qs = d["q"] / math.sqrt(DK)
    C_new = f_act[..., None] * d["C"] + i_act[..., None] * d["k"][..., :, None] * d["v"][..., None, :]
    n_new = f_act * d["n"] + i_act * d["k"]
    num = np.einsum("bhk,bhkv->bhv", qs, C_new)
    den = np.maximum(np.abs((qs * n_new).sum(-1)), np.exp(-m_new)) + 1e-6
    close(m1, m_new, 5 * 2.0 ** -23, 1e-6)
    close(n1, n_new, 2e-5, 1e-6)
    close(C1, C_new, 2e-5, 1e-6)
    close(h, num / den[..., None], 1e-4, 1e-5)
