"""No leaks: 100 000 calls of a cached kernel (NumPy inputs through DLPack,
a scalar, allocated outputs converted to NumPy, caller-provided outputs,
DLPack exports, errors) leave the resident set size where it was after a
warm-up. A leak of one array header per call would add megabytes."""
import os

import numpy as np
import pytest

import alloy

CALLS = 100_000


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux)")


def test_many_calls_keep_memory_stable():
    k = alloy.metal_kernel(name="leak_axpb", input_names=["x", "a"], output_names=["out"],
                           source="uint i = thread_position_in_grid.x;\n"
                                  "if (i < uint(x_shape[0])) out[i] = a * x[i] + 1.0f;\n")
    x = np.arange(64, dtype=np.float32)
    y = np.empty_like(x)
    bad = np.arange(3, dtype=np.float32)

    def step(i):
        if i % 4 == 0:
            (o,) = k(inputs=[x, 2.0], outputs=[y], grid=(64, 1, 1), threadgroup=(64, 1, 1), device="cpu")
        else:
            (o,) = k(inputs=[x, 2.0], output_shapes=[(64,)], output_dtypes=[np.float32], grid=(64, 1, 1),
                     threadgroup=(64, 1, 1), device="cpu")
        if i % 8 == 1:
            np.asarray(o)
        if i % 8 == 3:
            np.from_dlpack(o)
        if i % 8 == 5:
            o.__dlpack__()  # unconsumed: freed by the capsule's destructor
        if i % 64 == 7:
            try:
                k(inputs=[bad], output_shapes=[(3,)], output_dtypes=[np.float32], grid=(3, 1, 1),
                  threadgroup=(1, 1, 1), device="cpu")
            except alloy.InvalidArgumentError:
                pass

    for i in range(CALLS // 10):  # warm-up: caches, allocator pools
        step(i)
    before = rss_bytes()
    for i in range(CALLS):
        step(i)
    grown = rss_bytes() - before
    np.testing.assert_array_equal(y, 2 * x + 1)
    assert grown < 4 << 20, f"resident set grew by {grown / 2**20:.1f} MiB over {CALLS} calls"
