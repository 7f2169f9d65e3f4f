"""Typed construction from Python data: alloy.array / asarray (NumPy's copy
rules, MLX's dtype defaults), bfloat16 from ml_dtypes arrays and from Python
values (rounded to nearest even, checked against ml_dtypes' own conversion
and against an independent rounding of the float64 value), zeros / ones /
full / empty, eval, and bfloat16 kernel inputs built that way giving the
right bits on the CPU and, where there is one, on CUDA."""
import numpy as np
import pytest

import alloy
from conftest import alloy_cuda_reason

CUDA = alloy_cuda_reason()
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(CUDA is not None, reason=CUDA or ""))]


def bf16_reference_bits(x):
    """bfloat16 patterns of float64 values, rounded to nearest even from the
    exact value: pick the nearer of the two neighbouring bfloat16 values
    (computed in float64 from their bit patterns), ties to the even one."""
    out = np.empty(x.shape, np.uint16)
    for idx, v in np.ndenumerate(x):
        if np.isnan(v):
            out[idx] = 0x7FC0 | (0x8000 if np.signbit(v) else 0)
            continue
        if np.isinf(v):
            out[idx] = 0x7F80 | (0x8000 if v < 0 else 0)
            continue
        with np.errstate(over="ignore"):
            f = np.float32(v)  # a float32 near v; the answer is a neighbour of its top 16 bits
        hi = int(np.array(f).view(np.uint32)) >> 16
        cands = {(hi + d) & 0xFFFF for d in (-1, 0, 1)}
        best = None
        for c in sorted(cands):
            cv = float(np.array(c << 16, dtype=np.uint32).view(np.float32))
            if np.isnan(cv):
                continue
            err = abs(cv - v) if np.isfinite(cv) else np.inf
            key = (err, c & 1)
            if best is None or key < best[0]:
                best = (key, c)
        b = best[1]
        # beyond the largest finite bfloat16 by half an ulp or more: infinity
        if abs(v) >= 3.3961775292304003e38 and np.isfinite(v):
            b = 0x7F80 | (0x8000 if v < 0 else 0)
        out[idx] = b
    return out


def hostile_values(rng, n=2000):
    halfway = (np.arange(1, 200) * 2 + 1).astype(np.float64) * 2.0 ** -8 + 1.0  # ties at 1 + k/128 + 1/256
    parts = [rng.normal(size=n) * 10.0 ** rng.integers(-30, 30, size=n), halfway, -halfway,
             np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, 1e-40, -1e-39, 3.0e38,
                       3.3961775292304e38, 3.4e38, 1e300, 65504.0, 1.0 + 2 ** -8 + 2 ** -30])]
    return np.concatenate(parts)


def test_bf16_from_python_values_rounds_to_nearest_even(rng):
    x = hostile_values(rng)
    a = alloy.array(x.tolist(), dtype=alloy.bfloat16)
    assert a.dtype == alloy.bfloat16 and a.shape == x.shape
    got = np.asarray(a._view("uint16"))
    assert np.array_equal(got, bf16_reference_bits(x))


def test_bf16_matches_ml_dtypes(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = hostile_values(rng).astype(np.float32)  # ml_dtypes rounds float32 exactly
    got = np.asarray(alloy.array(x, dtype="bfloat16")._view("uint16"))
    assert np.array_equal(got, x.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_ml_dtypes_bfloat16_arrays(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = rng.normal(size=(33, 7)).astype(ml_dtypes.bfloat16)
    a = alloy.array(x)  # a copy, read without DLPack
    assert a.dtype == alloy.bfloat16 and a.shape == (33, 7)
    assert np.array_equal(np.asarray(a._view("uint16")), x.view(np.uint16))
    x_before = x.copy()
    x[0, 0] = 99
    assert np.array_equal(np.asarray(a._view("uint16"))[0, 0], x_before.view(np.uint16)[0, 0])
    v = alloy.asarray(x)  # a view: same memory
    assert v.data_ptr == x.ctypes.data
    # back to NumPy as ml_dtypes.bfloat16
    back = np.asarray(a)
    assert back.dtype == ml_dtypes.bfloat16 and np.array_equal(back.view(np.uint16), x_before.view(np.uint16))
    # strided input: still right
    s = x_before[:, ::2]
    assert np.array_equal(np.asarray(alloy.asarray(s)._view("uint16")), s.view(np.uint16))
    # conversion from bfloat16 to another dtype
    f = alloy.array(x_before, dtype=alloy.float32)
    assert np.array_equal(np.asarray(f), x_before.astype(np.float32))
    # dtype given as ml_dtypes' type, NumPy dtype, string
    for d in (ml_dtypes.bfloat16, np.dtype(ml_dtypes.bfloat16), "bfloat16", alloy.bfloat16):
        assert alloy.array([1.5], dtype=d).dtype == alloy.bfloat16


def test_the_issue_example_bits():
    a = alloy.array([[1, 2], [3, 4]], dtype=alloy.bfloat16)
    assert a.shape == (2, 2)
    assert np.asarray(a._view("uint16")).tolist() == [[0x3F80, 0x4000], [0x4040, 0x4080]]


def test_float16_and_other_dtypes(rng):
    x = hostile_values(rng)
    h = alloy.array(x, dtype=alloy.float16)
    with np.errstate(over="ignore"):
        assert np.array_equal(np.asarray(h).view(np.uint16), x.astype(np.float16).view(np.uint16))
    for dt in ("int8", "uint16", "int32", "int64", "float64", "bool"):
        src = np.arange(-3, 5)
        a = alloy.array(src, dtype=dt)
        assert a.dtype == alloy.dtype(dt) and np.array_equal(np.asarray(a), src.astype(dt))
    with pytest.raises(OverflowError):
        alloy.array([300], dtype="uint8")  # NumPy's rule for Python data


def test_mlx_defaults_for_python_data():
    assert alloy.array(3.5).dtype == alloy.float32 and alloy.array(3.5).shape == ()
    assert alloy.array([1, 2, 3]).dtype == alloy.int32
    assert alloy.array([True, False]).dtype == alloy.bool_
    assert alloy.array([[1.0, 2.0]]).dtype == alloy.float32
    assert alloy.array([2 ** 40]).dtype == alloy.int64  # does not fit int32
    e = alloy.array([])
    assert e.shape == (0,) and e.size == 0


def test_array_copies_asarray_does_not(rng):
    x = rng.normal(size=1000).astype(np.float32)
    a, v = alloy.array(x), alloy.asarray(x)
    assert v.data_ptr == x.ctypes.data and a.data_ptr != x.ctypes.data
    x[0] = 123.0
    assert np.asarray(v)[0] == 123.0 and np.asarray(a)[0] != 123.0
    assert alloy.asarray(v) is v or alloy.asarray(v).data_ptr == v.data_ptr
    c = alloy.array(v)  # an alloy.Array is copied too
    assert c.data_ptr != v.data_ptr and np.array_equal(np.asarray(c), np.asarray(v))
    # asarray with another dtype converts (a copy)
    h = alloy.asarray(x, dtype="float16")
    assert h.dtype == alloy.float16 and np.array_equal(np.asarray(h), x.astype(np.float16))
    assert alloy.asarray(x, dtype=np.float32).data_ptr == x.ctypes.data


def test_bad_input_errors():
    with pytest.raises(ValueError, match="array:"):
        alloy.array([[1, 2], [3]])
    with pytest.raises(TypeError, match="dtype: 'nope'"):
        alloy.array([1], dtype="nope")
    with pytest.raises(ValueError):
        alloy.array(["a", "b"])
    with pytest.raises(TypeError, match="complex"):
        alloy.array([1 + 2j], dtype="bfloat16")
    with pytest.raises(alloy.InvalidArgumentError, match="negative"):
        alloy.zeros((2, -1))
    with pytest.raises(TypeError, match="eval"):
        alloy.eval(np.zeros(3))


def test_zeros_ones_full_empty():
    z = alloy.zeros((3, 4))
    assert z.dtype == alloy.float32 and z.shape == (3, 4) and not np.asarray(z).any()
    o = alloy.ones(5, dtype="float16")
    assert o.dtype == alloy.float16 and np.all(np.asarray(o) == 1)
    f = alloy.full((2, 2), 1.00390625, dtype=alloy.bfloat16)  # a tie: rounds to even (1.0)
    assert np.all(np.asarray(f._view("uint16")) == 0x3F80)
    assert alloy.full((1,), 7).dtype == alloy.int32 and alloy.full((1,), True).dtype == alloy.bool_
    e = alloy.empty((0, 3))
    assert e.shape == (0, 3) and e.size == 0
    s = alloy.zeros(())
    assert s.shape == () and s.size == 1
    alloy.eval(z, [o, f], e)


BF16_BITS = """
uint i = thread_position_in_grid.x;
if (i >= uint(x_shape[0])) return;
bits[i] = as_type<ushort>(x[i]);
twice[i] = float(x[i]) * 2.0f;
"""


@pytest.mark.parametrize("dev", DEVICES)
def test_bf16_kernel_input_bits(dev, rng):
    """A bfloat16 input built with alloy.array reaches the kernel as the
    right bit patterns, on each device."""
    k = alloy.metal_kernel(name="bf16_bits", input_names=["x"], output_names=["bits", "twice"],
                           source=BF16_BITS)
    vals = hostile_values(rng, 300)
    vals = vals[np.isfinite(vals)]
    x = alloy.array(vals.tolist(), dtype=alloy.bfloat16, device=dev)
    assert x.device == alloy.Device(dev)
    bits, twice = k(inputs=[x], grid=(x.size, 1, 1), threadgroup=(64, 1, 1),
                    output_shapes=[x.shape, x.shape], output_dtypes=[alloy.uint16, alloy.float32])
    alloy.eval(bits, twice)
    want = bf16_reference_bits(vals)
    assert np.array_equal(np.asarray(bits), want)
    as_f32 = (want.astype(np.uint32) << 16).view(np.float32)
    with np.errstate(over="ignore"):
        assert np.array_equal(np.asarray(twice), as_f32 * np.float32(2))
