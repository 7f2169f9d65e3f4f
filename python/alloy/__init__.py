"""alloy — body-only Metal Shading Language kernels (the style of MLX's
``mx.fast.metal_kernel``) on NVIDIA GPUs and on any CPU.

An MLX kernel ports by changing one import::

    import alloy as mx            # was: import mlx.core as mx
    kernel = mx.fast.metal_kernel(name="myexp", input_names=["inp"],
                                  output_names=["out"], source=body)
    out = kernel(inputs=[a], template=[("T", mx.float32)], grid=(a.size, 1, 1),
                 threadgroup=(256, 1, 1), output_shapes=[a.shape],
                 output_dtypes=[a.dtype])[0]

Inputs are any arrays with ``__dlpack__`` (NumPy, PyTorch, CuPy, JAX) or
Python scalars; results are :class:`alloy.Array`, which export
``__dlpack__`` and convert with ``np.asarray``. Arrays of a given dtype come
from Python data with MLX's names: ``alloy.array(data, dtype=alloy.bfloat16)``,
``alloy.asarray``, ``zeros``, ``ones``, ``full``, ``empty``; ``alloy.eval``
waits for the work that produced arrays. See docs/python.md.
"""
from ._alloy import (  # noqa: F401  (the public API)
    AlloyWarning,
    Array,
    CompileError,
    CompilerMissingError,
    Device,
    Dtype,
    Error,
    FileSystemError,
    InternalError,
    InvalidArgumentError,
    Kernel,
    LaunchError,
    OutOfMemoryError,
    Stream,
    UnavailableError,
    UnsupportedError,
    __version__,
    backends,
    bfloat16,
    bool_,
    cache_clear,
    cache_dir,
    cache_stats,
    default_device,
    dtype,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    metal_kernel,
    synchronize,
    uint8,
    uint16,
    uint32,
    uint64,
)
from . import fast  # noqa: F401  (alloy.fast.metal_kernel, as mx.fast.metal_kernel)
from . import linalg  # noqa: F401  (the catalog: alloy.linalg.matmul)
from . import mlstm  # noqa: F401  (the catalog's mLSTM cell: alloy.mlstm.step, parallel)
from . import nn  # noqa: F401  (the fused ops of the xLSTM block: alloy.nn.softcap, rms_norm, ...)
from ._example import KernelFile, load as load_kernel_file  # noqa: F401
from ._construct import array, asarray, empty, eval, full, ones, zeros  # noqa: F401


def from_dlpack(x, /, *, device=None, copy=None):
    """The array API's ``from_dlpack``: an :class:`Array` viewing ``x``
    (no copy on its own device). ``copy=True`` returns a copy."""
    a = asarray(x, device=device)
    return a.copy() if copy else a


def device(name=None):
    """``alloy.Device(name)``: 'cpu', 'cuda', 'cuda:N', or None for the default."""
    return Device(name)


__all__ = [n for n in dir() if not n.startswith("_")]
