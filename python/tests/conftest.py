"""Shared fixtures of the Python tests: where the example kernels are, a
seeded random generator, and the device the example tests run on
(ALLOY_TEST_DEVICE, default None = alloy's default device, so the same tests
run on CUDA on a GPU machine with NumPy inputs copied there)."""
import os
import pathlib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def device():
    return os.environ.get("ALLOY_TEST_DEVICE") or None


def example_path(name):
    return EXAMPLES / f"{name}.metal"


def alloy_cuda_reason():
    """None when alloy has a CUDA device, else why not (for skipif)."""
    import alloy
    try:
        alloy.Device("cuda")
        return None
    except alloy.Error as e:
        return f"alloy has no CUDA device: {e}"
