"""alloy.linalg.matmul against NumPy in float64: NumPy's shapes (1-D
operands, broadcast batches), transposes, alpha/beta into out, every dtype,
strided views read in place, and errors that name the argument. On the test
device (ALLOY_TEST_DEVICE, default alloy's default device)."""
import numpy as np
import pytest

import alloy


def dev_array(x, device):
    return alloy.asarray(x, device=device) if device else x


def check(got, a, b, ta=False, tb=False, alpha=1.0, c0=None, beta=0.0, tol=None):
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    if ta:
        a64 = np.swapaxes(a64, -1, -2)
    if tb:
        b64 = np.swapaxes(b64, -1, -2)
    ref = alpha * (a64 @ b64)
    if c0 is not None and beta != 0:
        ref = ref + beta * np.asarray(c0, dtype=np.float64)
    mag = np.abs(alpha) * (np.abs(a64) @ np.abs(b64)) + 1e-30
    k = a64.shape[-1]
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == ref.shape
    err = np.max(np.abs(got - ref) / mag) if got.size else 0.0
    assert err <= (tol if tol is not None else 4e-7 * (k + 2) ** 0.5 + 2e-7), err


@pytest.mark.parametrize("sa,sb", [((33, 29), (29, 47)), ((1, 1), (1, 1)), ((130, 70), (70, 257)),
                                   ((13,), (13, 9)), ((9, 13), (13,)), ((31,), (31,)),
                                   ((2, 1, 5, 7), (3, 7, 4)), ((3, 17, 11), (11, 5)), ((5, 0), (0, 6))])
def test_shapes(rng, device, sa, sb):
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    got = alloy.linalg.matmul(dev_array(a, device), dev_array(b, device))
    check(got, a, b)


def test_transposes_alpha_beta_out(rng, device):
    a = rng.standard_normal((2, 40, 19)).astype(np.float32)  # used transposed: (2, 19, 40)
    b = rng.standard_normal((23, 40)).astype(np.float32)     # used transposed: (40, 23)
    c0 = rng.standard_normal((2, 19, 23)).astype(np.float32)
    out = dev_array(c0.copy(), device) if device else alloy.asarray(c0.copy())
    r = alloy.linalg.matmul(dev_array(a, device), dev_array(b, device), out=out, transpose_a=True,
                            transpose_b=True, alpha=-0.5, beta=2.0)
    assert r is out
    check(r, a, b, ta=True, tb=True, alpha=-0.5, c0=c0, beta=2.0)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_dtypes(rng, device, dtype):
    if dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        npdt = ml_dtypes.bfloat16
    else:
        npdt = np.dtype(dtype)
    a = rng.standard_normal((21, 40)).astype(npdt)
    b = rng.standard_normal((40, 24)).astype(npdt)
    # alloy.array takes ml_dtypes' bfloat16, which DLPack cannot carry
    aa = alloy.array(a, dtype=alloy.dtype(dtype), device=device)
    bb = alloy.array(b, dtype=alloy.dtype(dtype), device=device)
    got = alloy.linalg.matmul(aa, bb, dtype=alloy.float32)
    assert got.dtype == alloy.float32
    check(got, a.astype(np.float64), b.astype(np.float64))
    same = alloy.linalg.matmul(aa, bb)
    assert same.dtype == alloy.dtype(dtype)
    if dtype == "float64":
        check(same, a, b, tol=1e-14)


def test_strided_views_in_place(rng, device):
    wide = rng.standard_normal((19, 46)).astype(np.float32)
    b = rng.standard_normal((23, 14)).astype(np.float32)
    a = wide[:, ::2]          # every other column
    bb = b[::-1]              # rows reversed
    if device:
        pytest.skip("NumPy views are copied to a GPU device whole; the in-place case is the CPU's")
    got = alloy.linalg.matmul(a, bb)
    check(got, a, bb)


def test_errors(device):
    a = dev_array(np.zeros((2, 3), np.float32), device)
    with pytest.raises(alloy.InvalidArgumentError, match="a has 3 columns but b has 4 rows"):
        alloy.linalg.matmul(a, dev_array(np.zeros((4, 3), np.float32), device))
    with pytest.raises(alloy.InvalidArgumentError, match="b is int32"):
        alloy.linalg.matmul(a, dev_array(np.zeros((3, 4), np.int32), device))
    with pytest.raises(alloy.InvalidArgumentError, match="no out array"):
        alloy.linalg.matmul(a, dev_array(np.zeros((3, 4), np.float32), device), beta=1.0)
    with pytest.raises(alloy.InvalidArgumentError, match="precision"):
        alloy.linalg.matmul(a, dev_array(np.zeros((3, 4), np.float32), device), precision="fast")
    with pytest.raises(alloy.InvalidArgumentError, match="do not broadcast"):
        alloy.linalg.matmul(dev_array(np.zeros((2, 2, 3), np.float32), device),
                            dev_array(np.zeros((3, 3, 4), np.float32), device))


def test_torch_on_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for PyTorch")
    from conftest import alloy_cuda_reason
    if alloy_cuda_reason():
        pytest.skip(alloy_cuda_reason())
    a = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(512, 384, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(256, 384, device="cuda", dtype=torch.float32)
    r = alloy.linalg.matmul(a, b, out=out, stream=torch.cuda.current_stream())
    assert r is out
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert torch.max(torch.abs(out.double() - ref)).item() <= 1e-3 * torch.max(torch.abs(ref)).item()
