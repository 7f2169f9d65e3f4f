"""An MLX custom kernel (the style of the MLX docs' exp_elementwise) running
through alloy: the only line that differs from the MLX version is the import.
The arrays come from NumPy; ALLOY_DEVICE=cpu or ALLOY_DEVICE=cuda picks where
the kernel runs (default: the GPU when there is one)."""
import numpy as np

import alloy as mx  # with MLX: import mlx.core as mx


def exp_elementwise(a):
    # The body of a Metal kernel: alloy writes the signature from the names.
    source = """
        uint elem = thread_position_in_grid.x;
        T tmp = inp[elem];
        out[elem] = metal::exp(tmp);
    """
    kernel = mx.fast.metal_kernel(
        name="myexp",
        input_names=["inp"],
        output_names=["out"],
        source=source,
    )
    outputs = kernel(
        inputs=[a],
        template=[("T", mx.float32)],
        grid=(a.size, 1, 1),  # threads, not threadgroups
        threadgroup=(256, 1, 1),
        output_shapes=[a.shape],
        output_dtypes=[a.dtype],
    )
    return outputs[0]


if __name__ == "__main__":
    a = np.random.default_rng(0).normal(size=(64, 128)).astype(np.float16)
    b = exp_elementwise(a)
    assert np.allclose(np.asarray(b), np.exp(a), rtol=2e-3)
    print(f"ok: exp of a {a.shape} {a.dtype} array on {b.device}")
