"""CUDA tests of the Python package: PyTorch CUDA tensors in and out on
PyTorch's current stream without copies (data pointers equal), the DLPack
stream hand-off in both directions (versioned and legacy capsules), NumPy
inputs copied to the GPU, and CuPy / JAX arrays when those are installed.
Every test skips (with the reason) when torch, a CUDA device or alloy's CUDA
backend is missing, so the file is harmless on a CPU-only machine."""
import os

import numpy as np
import pytest

import alloy

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX must not take the GPU's memory


from conftest import alloy_cuda_reason  # noqa: E402

ALLOY_CUDA = alloy_cuda_reason()

try:
    import torch
    TORCH = None if torch.cuda.is_available() else "torch has no CUDA device"
except ImportError:
    torch = None
    TORCH = "torch is not installed"

needs_cuda = pytest.mark.skipif(ALLOY_CUDA is not None, reason=ALLOY_CUDA or "")
needs_torch = pytest.mark.skipif(ALLOY_CUDA is not None or TORCH is not None, reason=ALLOY_CUDA or TORCH or "")

SCALE = """
uint i = thread_position_in_grid.x;
if (i < uint(x_shape[0])) out[i] = x[i] * a + 1.0f;
"""


def scale_kernel():
    return alloy.metal_kernel(name="gpu_scale", input_names=["x", "a"], output_names=["out"], source=SCALE)


def launch(x, a=2.0, **kw):
    n = x.shape[0]
    if "outputs" not in kw:
        kw.setdefault("output_shapes", [tuple(x.shape)])
        kw.setdefault("output_dtypes", [x.dtype])
    return scale_kernel()(inputs=[x, a], grid=(n, 1, 1), threadgroup=(256, 1, 1), **kw)


# ---- PyTorch ------------------------------------------------------------------------------------------

@needs_torch
def test_torch_in_and_out_on_current_stream_without_copies():
    n = 1_000_003
    x = torch.randn(n, device="cuda")
    stream = torch.cuda.current_stream()
    (out,) = launch(x, stream=stream)
    assert out.device.name == "cuda:0" and out.shape == (n,) and out.dtype == torch.float32
    assert alloy.asarray(x).data_ptr == x.data_ptr()  # input: no copy
    y = torch.from_dlpack(out)  # output: no copy, ordered on torch's current stream
    assert y.data_ptr() == out.data_ptr and y.device == x.device
    torch.testing.assert_close(y, x * 2 + 1)


@needs_torch
def test_torch_output_written_in_place():
    n = 4099
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    y = torch.zeros(n, device="cuda")
    (out,) = launch(x, 3.0, outputs=[y], stream=torch.cuda.current_stream())
    assert out.data_ptr == y.data_ptr()
    torch.testing.assert_close(y, x * 3 + 1)


@needs_torch
def test_torch_side_stream():
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.ones(1 << 20, device="cuda")
        (out,) = launch(x, 5.0, stream=torch.cuda.current_stream())
        z = torch.from_dlpack(out) * 2
    assert out.stream is not None and out.stream.handle == s.cuda_stream
    s.synchronize()
    torch.testing.assert_close(z, torch.full_like(z, 12.0))


@needs_torch
def test_stream_handoff_between_torch_and_alloy_streams():
    """torch fills x on its stream after a long sleep; alloy runs on its own
    default stream: torch's __dlpack__ must make alloy's stream wait, and
    alloy's __dlpack__ must make torch's stream wait for the kernel."""
    n = 1 << 22
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(100_000_000)  # keep the stream busy for tens of milliseconds
        x = torch.full((n,), 3.0, device="cuda")
        (out,) = launch(x, 1.0)  # no stream=: alloy's default stream of cuda:0
        z = torch.from_dlpack(out).clone()
    torch.cuda.synchronize()
    assert out.stream is None
    assert bool((z == 4.0).all())


@needs_torch
def test_torch_dtypes_and_capsules():
    x = torch.arange(10, device="cuda", dtype=torch.float16)
    k = alloy.metal_kernel(name="gpu_copy", input_names=["x"], output_names=["out"],
                           source="uint i = thread_position_in_grid.x; if (i < 10) out[i] = float(x[i]);")
    # (half and bfloat convert to each other only explicitly, as in MSL: go through float)
    for dt in (torch.float16, torch.bfloat16, torch.float32):
        (out,) = k(inputs=[x], output_shapes=[x.shape], output_dtypes=[dt], grid=(10, 1, 1),
                   threadgroup=(32, 1, 1), stream=torch.cuda.current_stream())
        assert out.dtype == dt
        t = torch.from_dlpack(out)
        assert t.dtype == dt
        torch.testing.assert_close(t.float(), x.float())
    legacy = out.__dlpack__(stream=torch.cuda.current_stream().cuda_stream or 1)
    t = torch.utils.dlpack.from_dlpack(legacy)
    assert t.data_ptr() == out.data_ptr
    versioned = out.__dlpack__(stream=-1, max_version=(1, 0))
    assert out.__dlpack_device__() == (2, 0)
    del versioned  # unconsumed: freed by the capsule's destructor


@needs_torch
def test_numpy_inputs_go_to_the_gpu_and_back():
    x = np.linspace(-1, 1, 1001, dtype=np.float32)
    (out,) = launch(x, 4.0, device="cuda")
    assert out.device.type == "cuda"
    np.testing.assert_allclose(np.asarray(out), x * 4 + 1, rtol=1e-6)
    if np.lib.NumpyVersion(np.__version__) >= "2.0.0":  # NumPy 2 passes copy= to __array__
        with pytest.raises(ValueError, match="copy"):
            np.asarray(out, copy=False)
    # a GPU input with a host output: refused, never copied silently
    with pytest.raises(alloy.InvalidArgumentError, match="lives on"):
        launch(torch.ones(4, device="cuda"), outputs=[np.zeros(4, np.float32)])


@needs_torch
def test_cuda_device_capabilities_match_torch():
    d = alloy.Device("cuda")
    props = torch.cuda.get_device_properties(d.index)
    assert d.compute_capability == (props.major, props.minor)
    assert d.multiprocessor_count == props.multi_processor_count
    if props.major < 9:  # tensor maps and overlapping launches need Hopper
        assert not d.has_tensor_maps and not d.overlaps_launches


@needs_torch
def test_host_copy_through_dlpack_device():
    x = torch.arange(6, device="cuda", dtype=torch.float32)
    (out,) = launch(x, 1.0, stream=torch.cuda.current_stream())
    h = np.from_dlpack(out, device="cpu")  # asks __dlpack__ for dl_device=(kDLCPU, 0): a host copy
    np.testing.assert_array_equal(h, np.arange(6) + 1)
    with pytest.raises(BufferError):
        out.__dlpack__(dl_device=(1, 0), copy=False)


@needs_torch
def test_many_gpu_calls_do_not_leak_device_memory():
    x = torch.randn(1 << 16, device="cuda")
    s = torch.cuda.current_stream()
    for _ in range(200):
        torch.from_dlpack(launch(x, stream=s)[0])
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    for _ in range(2000):
        torch.from_dlpack(launch(x, stream=s)[0])
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before


# ---- CuPy and JAX ------------------------------------------------------------------------------------

@needs_cuda
def test_cupy_in_and_out():
    cp = pytest.importorskip("cupy")
    x = cp.arange(1000, dtype=cp.float32)
    (out,) = launch(x, 2.0, stream=cp.cuda.get_current_stream())
    y = cp.from_dlpack(out)
    assert y.data.ptr == out.data_ptr
    assert alloy.asarray(x).data_ptr == x.data.ptr
    cp.testing.assert_allclose(y, x * 2 + 1)


@needs_cuda
def test_jax_in_and_out():
    jax = pytest.importorskip("jax")
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX has no GPU backend here")
    import jax.numpy as jnp
    x = jax.device_put(jnp.arange(1000, dtype=jnp.float32), gpu)
    (out,) = launch(x, 2.0)
    assert alloy.asarray(x).data_ptr == x.unsafe_buffer_pointer()
    y = jax.dlpack.from_dlpack(out)
    np.testing.assert_allclose(np.asarray(y), np.arange(1000) * 2 + 1)
