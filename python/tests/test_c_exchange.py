"""The DLPack C exchange API consumer (python/src/cexchange.c), with a fake
producer built into the extension for the tests: a type whose
``__dlpack_c_exchange_api__`` capsule points at C functions that take the
capsule of a NumPy array held by the object. On a machine without a GPU the
import path is exercised in mode 2 (CPU memory through the table too); the
default mode 1 imports only GPU memory through it. The last test runs on a
GPU machine with PyTorch only."""
import gc
import sys

import numpy as np
import pytest

import alloy
from alloy import _alloy

BODY = "uint i = thread_position_in_grid.x;\nif (i < uint(x_shape[0])) out[i] = x[i] * 2.0f + 1.0f;\n"


def make_fake(kind="ok"):
    class Fake:
        __dlpack_c_exchange_api__ = _alloy._test_exchange_api(kind)

        def __init__(self, arr):
            self._alloy_fake_inner = arr
            self.slow_calls = 0

        def __dlpack__(self, *args, **kwargs):
            self.slow_calls += 1
            return self._alloy_fake_inner.__dlpack__(*args, **kwargs)

        def __dlpack_device__(self):
            self.slow_calls += 1
            return self._alloy_fake_inner.__dlpack_device__()

    Fake.__name__ = f"Fake_{kind}"
    return Fake


@pytest.fixture
def mode2():
    old = _alloy._c_exchange_mode(2)
    yield
    _alloy._c_exchange_mode(old)


def kernel():
    return alloy.metal_kernel(name="cx_affine", input_names=["x"], output_names=["out"], source=BODY)


def test_supported_checks_name_and_version():
    assert _alloy._c_exchange_supported(make_fake("ok"))
    assert _alloy._c_exchange_supported(make_fake("chained"))  # major 2 first, 1.3 behind prev_api
    assert not _alloy._c_exchange_supported(make_fake("old"))  # 1.1 has no such table
    assert not _alloy._c_exchange_supported(make_fake("badname"))
    assert not _alloy._c_exchange_supported(np.ndarray) or hasattr(np.ndarray, "__dlpack_c_exchange_api__")
    with pytest.raises(ValueError):
        _alloy._test_exchange_api("nonsense")


@pytest.mark.parametrize("kind", ["ok", "chained"])
def test_import_through_the_table(mode2, kind):
    Fake = make_fake(kind)
    k = kernel()
    for n in (1, 33, 1000):
        x = np.arange(n, dtype=np.float32)
        f = Fake(x)
        before = _alloy._test_exchange_calls()
        out = k(inputs=[f], output_shapes=[(n,)], output_dtypes=[np.float32], grid=(n, 1, 1),
                threadgroup=(32, 1, 1), device="cpu")[0]
        after = _alloy._test_exchange_calls()
        np.testing.assert_array_equal(np.asarray(out), x.astype(np.float64) * 2 + 1)
        assert f.slow_calls == 0  # neither __dlpack__ nor __dlpack_device__
        assert after[0] - before[0] == 1  # managed_tensor_from_py_object_no_sync
        assert after[1] - before[1] == 1  # dltensor_from_py_object_no_sync (the probe)
        assert after[2] == before[2]  # CPU memory: no stream to order


def test_outputs_through_the_table(mode2):
    Fake = make_fake()
    k = kernel()
    x = np.arange(33, dtype=np.float32)
    y = np.zeros(33, np.float32)
    fx, fy = Fake(x), Fake(y)
    k(inputs=[fx], outputs=[fy], grid=(33, 1, 1), threadgroup=(8, 1, 1), device="cpu")
    np.testing.assert_array_equal(y, x * 2 + 1)
    assert fx.slow_calls == 0 and fy.slow_calls == 0


def test_default_mode_keeps_cpu_memory_on_dlpack():
    assert _alloy._c_exchange_mode() in (0, 1)
    Fake = make_fake()
    k = kernel()
    x = np.arange(5, dtype=np.float32)
    f = Fake(x)
    before = _alloy._test_exchange_calls()
    out = k(inputs=[f], output_shapes=[(5,)], output_dtypes=[np.float32], grid=(5, 1, 1),
            threadgroup=(1, 1, 1), device="cpu")[0]
    after = _alloy._test_exchange_calls()
    np.testing.assert_array_equal(np.asarray(out), x * 2 + 1)
    assert after[0] == before[0]  # not imported through the table
    assert f.slow_calls >= 1  # __dlpack__


def test_mode_zero_is_the_fallback():
    old = _alloy._c_exchange_mode(0)
    try:
        Fake = make_fake()
        f = Fake(np.arange(4, dtype=np.float32))
        before = _alloy._test_exchange_calls()
        out = kernel()(inputs=[f], output_shapes=[(4,)], output_dtypes=[np.float32], grid=(4, 1, 1),
                       threadgroup=(1, 1, 1), device="cpu")[0]
        assert _alloy._test_exchange_calls() == before
        assert f.slow_calls == 2  # __dlpack_device__ and __dlpack__
        np.testing.assert_array_equal(np.asarray(out), np.arange(4) * 2 + 1)
    finally:
        _alloy._c_exchange_mode(old)
    with pytest.raises(ValueError):
        _alloy._c_exchange_mode(3)


def test_rejected_tables_use_dlpack(mode2):
    for kind in ("old", "badname"):
        f = make_fake(kind)(np.arange(3, dtype=np.float32))
        out = kernel()(inputs=[f], output_shapes=[(3,)], output_dtypes=[np.float32], grid=(3, 1, 1),
                       threadgroup=(1, 1, 1), device="cpu")[0]
        np.testing.assert_array_equal(np.asarray(out), np.arange(3) * 2 + 1)
        assert f.slow_calls == 2


def test_producer_failure_falls_back(mode2):
    Fake = make_fake()

    class Broken(Fake):
        pass

    b = Broken(np.arange(3, dtype=np.float32))
    del b._alloy_fake_inner  # the table's functions fail (AttributeError), __dlpack__ too
    with pytest.raises(AttributeError):
        kernel()(inputs=[b], output_shapes=[(3,)], output_dtypes=[np.float32], grid=(3, 1, 1),
                 threadgroup=(1, 1, 1), device="cpu")


def test_imported_memory_is_released(mode2):
    Fake = make_fake()
    k = kernel()
    x = np.arange(16, dtype=np.float32)
    base = sys.getrefcount(x)
    for _ in range(200):
        k(inputs=[Fake(x)], output_shapes=[(16,)], output_dtypes=[np.float32], grid=(16, 1, 1),
          threadgroup=(4, 1, 1), device="cpu")
    gc.collect()
    assert sys.getrefcount(x) == base


def test_torch_cuda_uses_the_table_when_available():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs PyTorch with CUDA")
    try:
        alloy.Device("cuda")
    except alloy.Error:
        pytest.skip("alloy has no CUDA device here")
    if not _alloy._c_exchange_supported(torch.Tensor):
        pytest.skip("this PyTorch has no usable __dlpack_c_exchange_api__")
    k = kernel()
    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    side = torch.cuda.Stream()
    # Work queued on torch's current stream, then alloy on another stream:
    # alloy's stream must wait for torch's (the no-sync import orders it).
    with torch.cuda.stream(side):
        x2 = x * 1.0  # written on `side`
        k(inputs=[x2], outputs=[y], grid=(1000, 1, 1), threadgroup=(128, 1, 1),
          stream=torch.cuda.current_stream())
    side.synchronize()
    torch.testing.assert_close(y, x * 2 + 1)
    out = k(inputs=[x], output_shapes=[(1000,)], output_dtypes=[torch.float32], grid=(1000, 1, 1),
            threadgroup=(128, 1, 1), stream=torch.cuda.current_stream())[0]
    torch.testing.assert_close(torch.from_dlpack(out), x * 2 + 1)
    # ordering across streams: alloy launches on a new alloy stream after torch's current stream
    s = alloy.Stream("cuda")
    big = torch.full((1 << 20,), 3.0, device="cuda")
    z = torch.empty_like(big)
    big.mul_(1.0)
    k(inputs=[big], outputs=[z], grid=(1 << 20, 1, 1), threadgroup=(256, 1, 1), stream=s)
    s.synchronize()
    assert torch.all(z == 7.0)


def test_many_producer_types_do_not_disable_the_table():
    # Types are remembered in a bounded table; once it is full, old entries
    # are replaced, so a type seen later still gets the fast path.
    for _ in range(200):
        assert _alloy._c_exchange_supported(make_fake())
    assert _alloy._c_exchange_supported(make_fake())
