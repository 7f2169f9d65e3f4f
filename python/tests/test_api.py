"""The Python API on the CPU: construction and call keywords (MLX's), dtype
spellings, scalars, templates, init_value, atomics, contiguity, verbose,
errors, alloy.Array, DLPack both ways (versioned and legacy capsules), and
zero-copy (data pointers equal, writes landing in the caller's buffer)."""
import ctypes
import subprocess
import sys
import threading

import numpy as np
import pytest

import alloy

CPU = "cpu"
ADD1 = """
uint i = thread_position_in_grid.x;
if (i < uint(x_shape[0])) out[i] = x[i] + 1;
"""


def add1():
    return alloy.metal_kernel(name="add1", input_names=["x"], output_names=["out"], source=ADD1)


def call_add1(x, **kw):
    kw.setdefault("device", CPU)
    if "outputs" not in kw:
        kw.setdefault("output_shapes", [x.shape])
        kw.setdefault("output_dtypes", [x.dtype])
    return add1()(inputs=[x], grid=(x.shape[0], 1, 1), threadgroup=(32, 1, 1), **kw)


# ---- construction and call keywords ----------------------------------------------------------

def test_constructor_keywords_and_positional():
    k = alloy.metal_kernel("k1", ["x"], ["out"], ADD1)
    assert k.name == "k1" and k.input_names == ("x",) and k.output_names == ("out",)
    assert k.source == ADD1 and k.header == "" and k.ensure_row_contiguous and not k.atomic_outputs
    k = alloy.fast.metal_kernel(name="k2", input_names=["x"], output_names=["out"], source=ADD1,
                                header="#define ONE 1\n", ensure_row_contiguous=False, atomic_outputs=False,
                                compile_options={"math_mode": "fast"})
    assert k.header == "#define ONE 1\n" and not k.ensure_row_contiguous
    assert "k2" in repr(k)


def test_call_is_keyword_only():
    x = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match="keyword"):
        add1()([x])
    with pytest.raises(TypeError, match="unexpected keyword"):
        call_add1(x, gird=(1, 1, 1))
    with pytest.raises(TypeError, match="missing grid"):
        add1()(inputs=[x], output_shapes=[(4,)], output_dtypes=[np.float32], threadgroup=(1, 1, 1))
    with pytest.raises(TypeError, match="output_dtypes"):
        add1()(inputs=[x], output_shapes=[(4,)], grid=(4, 1, 1), threadgroup=(1, 1, 1))


def test_counts_are_checked():
    x = np.zeros(4, np.float32)
    with pytest.raises(alloy.InvalidArgumentError, match="takes 1 inputs"):
        add1()(inputs=[x, x], output_shapes=[(4,)], output_dtypes=[np.float32], grid=(4, 1, 1),
               threadgroup=(4, 1, 1), device=CPU)
    with pytest.raises(ValueError, match="output_shapes"):  # InvalidArgumentError is a ValueError
        add1()(inputs=[x], output_shapes=[(4,), (4,)], output_dtypes=[np.float32], grid=(4, 1, 1),
               threadgroup=(4, 1, 1), device=CPU)


def test_grid_counts_threads_with_partial_groups():
    x = np.arange(1000, dtype=np.float32)
    (out,) = call_add1(x)
    np.testing.assert_array_equal(np.asarray(out), x + 1)


def test_grid_and_threadgroup_shorter_tuples():
    x = np.arange(33, dtype=np.int32)
    (out,) = add1()(inputs=[x], output_shapes=[x.shape], output_dtypes=[x.dtype], grid=[33], threadgroup=(8,),
                    device=CPU)
    np.testing.assert_array_equal(np.asarray(out), x + 1)


# ---- dtypes -------------------------------------------------------------------------------------

class FakeTorchDtype:
    """What str() of a torch dtype looks like, without torch."""

    def __init__(self, name):
        self.name_ = name

    def __str__(self):
        return f"torch.{self.name_}"

    def __hash__(self):
        return hash(self.name_)

    def __eq__(self, other):
        return isinstance(other, FakeTorchDtype) and other.name_ == self.name_


@pytest.mark.parametrize("spelling,expected", [
    (np.float32, alloy.float32), (np.dtype("float32"), alloy.float32), ("float32", alloy.float32),
    ("f32", alloy.float32), ("<f4", alloy.float32), (alloy.float16, alloy.float16), ("half", alloy.float16),
    (np.float16, alloy.float16), ("bfloat16", alloy.bfloat16), (np.int64, alloy.int64), (np.bool_, alloy.bool_),
    ("bool", alloy.bool_), (np.uint16, alloy.uint16), (FakeTorchDtype("float16"), alloy.float16),
    (FakeTorchDtype("bfloat16"), alloy.bfloat16), (FakeTorchDtype("int32"), alloy.int32), ("torch.int8", alloy.int8),
])
def test_dtype_spellings(spelling, expected):
    assert alloy.dtype(spelling) is expected
    k = alloy.metal_kernel(name="nothing", input_names=[], output_names=["out"], source="")
    (out,) = k(inputs=[], output_shapes=[(3,)], output_dtypes=[spelling], grid=(1, 1, 1), threadgroup=(1, 1, 1),
               device=CPU)
    assert out.dtype == expected


def test_dtype_objects():
    assert alloy.float32 == np.float32 and alloy.float32 == "float32" and alloy.float32 != alloy.int32
    assert alloy.float32.size == 4 and alloy.bfloat16.itemsize == 2 and alloy.bfloat16.msl == "bfloat16_t"
    assert repr(alloy.float16) == "alloy.float16" and str(alloy.float16) == "float16"
    assert len({alloy.float32, alloy.float32, alloy.int32}) == 2
    with pytest.raises(TypeError, match="not a dtype"):
        alloy.dtype("float31")
    with pytest.raises(TypeError):
        call_add1(np.zeros(4, np.float32), output_dtypes=[object()])


def test_bfloat16_output():
    x = np.array([1.0, 1.00390625, 3.14159, -2.5e-3, 65504.0], dtype=np.float32)
    k = alloy.metal_kernel(name="to_bf16", input_names=["x"], output_names=["out"],
                           source="uint i = thread_position_in_grid.x; out[i] = bfloat16_t(x[i]);")
    (out,) = k(inputs=[x], output_shapes=[x.shape], output_dtypes=["bfloat16"], grid=(5, 1, 1),
               threadgroup=(8, 1, 1), device=CPU)
    assert out.dtype == alloy.bfloat16 and out.nbytes == 10
    bits = np.asarray(out._view("uint16"))
    ref = ((x.view(np.uint32) + 0x7FFF + ((x.view(np.uint32) >> 16) & 1)) >> 16).astype(np.uint16)
    np.testing.assert_array_equal(bits, ref)
    as_f32 = np.asarray(out, dtype=np.float32)
    np.testing.assert_array_equal(as_f32, (ref.astype(np.uint32) << 16).view(np.float32))
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        with pytest.raises(TypeError, match="ml_dtypes"):
            np.asarray(out)


# ---- scalars ------------------------------------------------------------------------------------

SCALAR_PROBE = """
auto t = a;
out[0] = float(t);
out[1] = float(sizeof(t));
out[2] = float(decltype(t)(0.5) != decltype(t)(0));
"""


@pytest.mark.parametrize("value,size,fractional", [
    (True, 1, 1), (7, 4, 0), (-3, 4, 0), (2.5, 4, 1), (np.float64(1.5), 8, 1), (np.int16(9), 2, 0),
    (np.float32(0.25), 4, 1),
])
def test_scalars_follow_mlx_rules(value, size, fractional):
    """Python bool -> bool, int -> int32, float -> float32; NumPy scalars keep their dtype."""
    k = alloy.metal_kernel(name="scalar_probe", input_names=["a"], output_names=["out"], source=SCALAR_PROBE)
    (out,) = k(inputs=[value], output_shapes=[(3,)], output_dtypes=[np.float32], grid=(1, 1, 1),
               threadgroup=(1, 1, 1), device=CPU)
    np.testing.assert_array_equal(np.asarray(out), np.array([float(value), size, fractional], np.float32))


def test_scalar_int_overflow():
    k = alloy.metal_kernel(name="scalar_probe", input_names=["a"], output_names=["out"], source=SCALAR_PROBE)
    with pytest.raises(OverflowError, match="int32"):
        k(inputs=[2 ** 40], output_shapes=[(3,)], output_dtypes=[np.float32], grid=(1, 1, 1),
          threadgroup=(1, 1, 1), device=CPU)


def test_zero_d_inputs_are_values():
    k = alloy.metal_kernel(name="axpy", input_names=["a", "x", "y"], output_names=["out"],
                           source="uint i = thread_position_in_grid.x; out[i] = a * x[i] + y[i];")
    x = np.arange(10, dtype=np.float32)
    y = np.ones(10, np.float32)
    (out,) = k(inputs=[np.array(3.0, np.float32), x, y], output_shapes=[(10,)], output_dtypes=[np.float32],
               grid=(10, 1, 1), threadgroup=(4, 1, 1), device=CPU)
    np.testing.assert_array_equal(np.asarray(out), 3 * x + y)


# ---- templates ----------------------------------------------------------------------------------

TEMPLATED = """
uint i = thread_position_in_grid.x;
if (i >= uint(x_shape[0])) return;
T v = T(x[i]) * T(N);
out[i] = NEGATE ? -v : v;
"""


def test_templates_int_bool_dtype():
    k = alloy.metal_kernel(name="templated", input_names=["x"], output_names=["out"], source=TEMPLATED)
    x = np.arange(5, dtype=np.float32)
    for T, N, neg in [(alloy.float32, 3, False), (np.int32, -2, True), ("float16", 1, True)]:
        (out,) = k(inputs=[x], output_shapes=[x.shape], output_dtypes=[T],
                   template=[("T", T), ("N", N), ("NEGATE", neg)], grid=(5, 1, 1), threadgroup=(5, 1, 1),
                   device=CPU)
        ref = x * N * (-1 if neg else 1)
        np.testing.assert_array_equal(np.asarray(out).astype(np.float32), ref)
    # a dict works too
    (out,) = k(inputs=[x], output_shapes=[x.shape], output_dtypes=[np.float32],
               template={"T": np.float32, "N": 2, "NEGATE": False}, grid=(5, 1, 1), threadgroup=(5, 1, 1),
               device=CPU)
    np.testing.assert_array_equal(np.asarray(out), 2 * x)


def test_template_bool_is_not_int():
    """bool is checked before int: True becomes `constexpr bool`, so `B + B` is 2 and sizeof(B) 1."""
    k = alloy.metal_kernel(name="bool_tmpl", input_names=[], output_names=["out"],
                           source="out[0] = float(sizeof(B)); out[1] = float(sizeof(N));")
    (out,) = k(inputs=[], output_shapes=[(2,)], output_dtypes=[np.float32], template=[("B", True), ("N", 1)],
               grid=(1, 1, 1), threadgroup=(1, 1, 1), device=CPU)
    np.testing.assert_array_equal(np.asarray(out), [1, 4])


def test_invalid_template_argument():
    k = alloy.metal_kernel(name="templated", input_names=["x"], output_names=["out"], source=TEMPLATED)
    x = np.arange(5, dtype=np.float32)
    with pytest.raises(TypeError, match="Invalid template argument"):
        k(inputs=[x], output_shapes=[x.shape], output_dtypes=[np.float32], template=[("T", 1.5)],
          grid=(5, 1, 1), threadgroup=(5, 1, 1), device=CPU)


# ---- init_value, atomics, contiguity, verbose ----------------------------------------------------

def test_init_value_and_atomic_outputs():
    k = alloy.metal_kernel(
        name="histogram", input_names=["x"], output_names=["counts"], atomic_outputs=True,
        source="""
        uint i = thread_position_in_grid.x;
        if (i < uint(x_shape[0])) atomic_fetch_add_explicit(&counts[x[i]], 1, memory_order_relaxed);
        """)
    x = np.random.default_rng(0).integers(0, 10, 1000).astype(np.int32)
    (c,) = k(inputs=[x], output_shapes=[(10,)], output_dtypes=[np.int32], grid=(1000, 1, 1),
             threadgroup=(128, 1, 1), init_value=0, device=CPU)
    np.testing.assert_array_equal(np.asarray(c), np.bincount(x, minlength=10))
    k2 = alloy.metal_kernel(name="first_only", input_names=[], output_names=["out"], source="out[0] = 1.0f;")
    (o,) = k2(inputs=[], output_shapes=[(4,)], output_dtypes=[np.float32], grid=(1, 1, 1),
              threadgroup=(1, 1, 1), init_value=-2.5, device=CPU)
    np.testing.assert_array_equal(np.asarray(o), [1, -2.5, -2.5, -2.5])


def test_ensure_row_contiguous_copies_views():
    base = np.arange(40, dtype=np.float32).reshape(8, 5)
    view = base[::2, 1:4]  # not contiguous
    (out,) = add1()(inputs=[view], output_shapes=[(view.size,)], output_dtypes=[np.float32],
                    grid=(view.size, 1, 1), threadgroup=(4, 1, 1), device=CPU)
    # x_shape[0] is 4 rows: the kernel touches the first 4 elements of the contiguous copy
    np.testing.assert_array_equal(np.asarray(out)[:4], view.ravel()[:4] + 1)


def test_strided_input_without_copy():
    k = alloy.metal_kernel(name="strided", input_names=["x"], output_names=["out"], ensure_row_contiguous=False,
                           source="""
        uint i = thread_position_in_grid.x;
        uint j = thread_position_in_grid.y;
        out[i * x_shape[1] + j] = x[i * x_strides[0] + j * x_strides[1]];
        """)
    base = np.arange(60, dtype=np.float32).reshape(6, 10)
    view = base[1::2, ::-3]  # negative and non-unit strides
    (out,) = k(inputs=[view], output_shapes=[view.shape], output_dtypes=[np.float32],
               grid=(view.shape[0], view.shape[1], 1), threadgroup=(2, 2, 1), device=CPU)
    np.testing.assert_array_equal(np.asarray(out), view)


def test_verbose_prints_generated_source(capfd):
    x = np.zeros(3, np.float32)
    call_add1(x, verbose=True)
    out = capfd.readouterr().out
    assert "Generated source code for `add1`" in out
    assert "x[i] + 1" in out
    assert len(out) < 20000  # the body and signature, not the whole prelude


def test_grid_warning_becomes_python_warning():
    code = ("import warnings, numpy as np, alloy\n"
            "k = alloy.metal_kernel(name='w', input_names=[], output_names=['o'], source='')\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    k(inputs=[], output_shapes=[(1,)], output_dtypes=['float32'], grid=(4, 1, 1),\n"
            "      threadgroup=(256, 1, 1), device='cpu')\n"
            "print([(x.category.__name__, 'THREADS' in str(x.message)) for x in w])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "('AlloyWarning', True)" in r.stdout


# ---- errors ---------------------------------------------------------------------------------------

def test_compile_error_carries_mapped_log():
    k = alloy.metal_kernel(name="broken", input_names=["x"], output_names=["out"],
                           source="uint i = thread_position_in_grid.x;\nout[i] = x[i] + undefined_name;\n")
    with pytest.raises(alloy.CompileError) as e:
        call_add1_like(k)
    msg = str(e.value)
    assert "undefined_name" in msg
    assert "broken.body:2" in msg or "line 2" in msg
    assert isinstance(e.value, alloy.Error) and e.value.status == "ALLOY_ERROR_COMPILE"


def call_add1_like(k):
    x = np.zeros(4, np.float32)
    return k(inputs=[x], output_shapes=[x.shape], output_dtypes=[x.dtype], grid=(4, 1, 1), threadgroup=(4, 1, 1),
             device=CPU)


@pytest.mark.parametrize("names,outs,source,match", [
    (["x", "x"], ["out"], "", "x"),
    (["x"], [], "", "output"),
    (["float"], ["out"], "", "float"),
    (["x"], ["out"], "kernel void f(device float* out [[buffer(0)]]) { out[0] = 1; }", "body"),
])
def test_invalid_kernels(names, outs, source, match):
    with pytest.raises(alloy.InvalidArgumentError, match=match) as e:
        alloy.metal_kernel(name="bad", input_names=names, output_names=outs, source=source)
    assert isinstance(e.value, ValueError) and e.value.status == "ALLOY_ERROR_INVALID_ARGUMENT"


def test_names_must_be_lists():
    with pytest.raises(TypeError):
        alloy.metal_kernel(name="bad", input_names="x", output_names=["out"], source="")


def test_threadgroup_too_large_is_an_error():
    x = np.zeros(2048, np.float32)
    with pytest.raises(alloy.InvalidArgumentError, match="1024"):
        add1()(inputs=[x], output_shapes=[x.shape], output_dtypes=[x.dtype], grid=(2048, 1, 1),
               threadgroup=(2048, 1, 1), device=CPU)


def test_unknown_device():
    with pytest.raises(alloy.Error):
        call_add1(np.zeros(4, np.float32), device="tpu")
    with pytest.raises(TypeError):
        call_add1(np.zeros(4, np.float32), device=3.5)


def test_not_an_array():
    with pytest.raises(TypeError, match="not an array"):
        add1()(inputs=[object()], output_shapes=[(1,)], output_dtypes=[np.float32], grid=(1, 1, 1),
               threadgroup=(1, 1, 1))


# ---- alloy.Array -----------------------------------------------------------------------------------

def test_array_properties_and_repr():
    (out,) = call_add1(np.arange(6, dtype=np.float32))
    assert out.shape == (6,) and out.ndim == 1 and out.size == 6 and out.nbytes == 24 and out.itemsize == 4
    assert out.dtype == alloy.float32 and out.device == alloy.Device("cpu") and out.device.name == "cpu"
    assert out.strides == (1,) and len(out) == 6 and out.stream is None
    assert out.tolist() == [1, 2, 3, 4, 5, 6]
    assert repr(out).startswith("array([1., 2., 3., 4., 5., 6.]") and "float32" in repr(out)
    z = alloy.asarray(np.float32(2.0))
    assert z.shape == () and z.ndim == 0 and z.size == 1
    with pytest.raises(TypeError):
        len(z)


def test_copy_and_from_dlpack():
    x = np.arange(5, dtype=np.int16)
    a = alloy.from_dlpack(x)
    assert a.data_ptr == x.ctypes.data
    c = alloy.from_dlpack(x, copy=True)
    assert c.data_ptr != x.ctypes.data
    np.testing.assert_array_equal(np.asarray(c), x)


def test_devices_streams_and_cache_info():
    assert alloy.default_device() == alloy.Device()
    cpu = alloy.Device("cpu")
    assert cpu.type == "cpu" and cpu.index == 0 and "cpu" in repr(cpu) and cpu.description
    # the CPU: no compute capability or SMs, tensor maps emulated, launches never overlap
    assert cpu.compute_capability is None and cpu.multiprocessor_count == 0
    assert cpu.has_tensor_maps is True and cpu.overlaps_launches is False
    names = [b[0] for b in alloy.backends()]
    assert "cpu" in names
    s = alloy.Stream(cpu)
    assert s.device == cpu
    x = np.arange(4, dtype=np.float32)
    (out,) = call_add1(x, stream=s)
    assert out.stream is s
    s.synchronize()
    alloy.synchronize("cpu")
    cpu.synchronize()
    (out,) = call_add1(x, stream=0)  # a raw handle: any value is the in-order CPU stream
    np.testing.assert_array_equal(np.asarray(out), x + 1)
    assert isinstance(alloy.cache_stats()["entries"], int)


# ---- zero-copy ----------------------------------------------------------------------------------------

def test_input_is_not_copied():
    x = np.arange(100, dtype=np.float32)
    a = alloy.asarray(x)
    assert a.data_ptr == x.ctypes.data
    assert a.device == "cpu"
    x[3] = 42  # a view: later changes show through
    assert np.asarray(a)[3] == 42


def test_kernel_writes_into_caller_numpy_buffer():
    x = np.arange(1000, dtype=np.float32)
    y = np.zeros_like(x)
    (out,) = call_add1(x, outputs=[y])
    assert out.data_ptr == y.ctypes.data
    np.testing.assert_array_equal(y, x + 1)  # the writes landed in y
    # in place: the same array as input and output
    call_add1(y, outputs=[y])
    np.testing.assert_array_equal(y, x + 2)


def test_result_converts_to_numpy_without_copy():
    (out,) = call_add1(np.arange(8, dtype=np.float32))
    view = np.asarray(out)
    assert view.ctypes.data == out.data_ptr
    copy = np.array(out, copy=True)
    assert copy.ctypes.data != out.data_ptr


def test_read_only_input_ok_output_refused():
    x = np.arange(10, dtype=np.float32)
    x.flags.writeable = False
    (out,) = call_add1(x)
    np.testing.assert_array_equal(np.asarray(out), x + 1)
    with pytest.raises(alloy.Error, match="read-only"):
        call_add1(np.arange(10, dtype=np.float32), outputs=[x])


def test_output_must_be_contiguous_and_array():
    x = np.arange(10, dtype=np.float32)
    with pytest.raises(alloy.Error):
        call_add1(x[:5], outputs=[np.zeros(10, np.float32)[::2]])
    with pytest.raises(TypeError):
        call_add1(x, outputs=[3.0])


# ---- DLPack ------------------------------------------------------------------------------------------

PyCapsule_GetName = ctypes.pythonapi.PyCapsule_GetName
PyCapsule_GetName.restype = ctypes.c_char_p
PyCapsule_GetName.argtypes = [ctypes.py_object]


class Producer:
    """Wraps a NumPy array, records how __dlpack__ was called, keeps the capsules."""

    def __init__(self, x, legacy_only=False):
        self.x, self.legacy_only, self.calls, self.capsules = x, legacy_only, [], []
        self.shape, self.dtype = x.shape, x.dtype

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()

    def __dlpack__(self, stream=None, **kw):
        self.calls.append(dict(kw, stream=stream))
        if self.legacy_only and kw:
            raise TypeError("unexpected keyword argument 'max_version'")
        cap = self.x.__dlpack__(**kw)
        self.capsules.append(cap)
        return cap


def test_import_asks_for_versioned_and_renames_the_capsule():
    x = np.arange(6, dtype=np.float64)
    p = Producer(x)
    a = alloy.asarray(p)
    assert p.calls == [{"max_version": (1, 0), "stream": None}]
    assert PyCapsule_GetName(p.capsules[0]) == b"used_dltensor_versioned"
    assert a.data_ptr == x.ctypes.data


def test_import_falls_back_to_legacy():
    x = np.arange(6, dtype=np.int32)
    p = Producer(x, legacy_only=True)
    (out,) = call_add1(p)
    assert len(p.calls) == 2 and p.calls[1] == {"stream": None}
    assert PyCapsule_GetName(p.capsules[0]) == b"used_dltensor"
    np.testing.assert_array_equal(np.asarray(out), x + 1)


def test_export_capsules():
    (out,) = call_add1(np.arange(4, dtype=np.float32))
    assert out.__dlpack_device__() == (1, 0)
    assert PyCapsule_GetName(out.__dlpack__()) == b"dltensor"
    assert PyCapsule_GetName(out.__dlpack__(max_version=(1, 0))) == b"dltensor_versioned"
    assert PyCapsule_GetName(out.__dlpack__(max_version=(1, 2))) == b"dltensor_versioned"
    assert PyCapsule_GetName(out.__dlpack__(max_version=(0, 8))) == b"dltensor"
    out.__dlpack__(dl_device=(1, 0), stream=None)
    out.__dlpack__(stream=-1)
    with pytest.raises(BufferError):
        out.__dlpack__(stream=5)  # CPU arrays take only None
    with pytest.raises(BufferError):
        out.__dlpack__(dl_device=(2, 0))
    # unconsumed capsules are freed by their destructor (no leak, no crash)
    for _ in range(1000):
        out.__dlpack__(max_version=(1, 0))
        out.__dlpack__()


def test_export_round_trips():
    (out,) = call_add1(np.arange(7, dtype=np.float32))
    y = np.from_dlpack(out)
    assert y.ctypes.data == out.data_ptr and y.flags.writeable
    np.testing.assert_array_equal(y, np.arange(1, 8))
    c = np.from_dlpack(out, copy=True)
    assert c.ctypes.data != out.data_ptr
    b = alloy.asarray(out)
    assert b is out
    # read-only survives a versioned round trip and refuses a legacy export
    x = np.arange(3, dtype=np.float32)
    x.flags.writeable = False
    r = alloy.asarray(x)
    assert not np.from_dlpack(r).flags.writeable
    with pytest.raises(BufferError, match="read-only"):
        r.__dlpack__()


def test_buffer_protocol_objects():
    import array
    arr = array.array("i", [1, 2, 3])
    (out,) = add1()(inputs=[arr], output_shapes=[(3,)], output_dtypes=["int32"], grid=(3, 1, 1),
                    threadgroup=(4, 1, 1), device=CPU)
    np.testing.assert_array_equal(np.asarray(out), [2, 3, 4])
    mv = memoryview(bytearray(8)).cast("f")
    a = alloy.asarray(mv)
    assert a.dtype == alloy.float32 and a.shape == (2,)


# ---- threads ---------------------------------------------------------------------------------------------

def test_one_kernel_from_many_threads():
    k = add1()
    errors = []

    def work(seed):
        try:
            x = np.arange(seed, seed + 500, dtype=np.float32)
            for _ in range(200):
                (o,) = k(inputs=[x], output_shapes=[x.shape], output_dtypes=[x.dtype], grid=(500, 1, 1),
                         threadgroup=(64, 1, 1), device=CPU)
                if not np.array_equal(np.asarray(o), x + 1):
                    errors.append(seed)
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# ---- kernel files ----------------------------------------------------------------------------------------

def test_kernel_file_parser_errors():
    from alloy._example import parse
    with pytest.raises(alloy.InvalidArgumentError, match="no `//! body:`"):
        parse("//! name: k\n//! inputs:\n//! outputs: o\n")
    with pytest.raises(alloy.InvalidArgumentError, match=":2: unknown directive"):
        parse("//! name: k\n//! input: x\n//! outputs: o\n//! body:\n")
    with pytest.raises(alloy.InvalidArgumentError, match="did you forget"):
        parse("//! name: k\nfloat x;\n//! body:\n")
    kf = parse("// c\n//! name: k\n//! inputs: a, b\n//! outputs: o\n//! template: N=0x10 B=true T=float16 M=-3\n"
               "//! header:\n#define X 1\n//! body:\no[0] = X;\n//! not a directive\n")
    assert kf.input_names == ["a", "b"] and kf.header == "#define X 1\n" and kf.body_line == 9
    assert kf.header_line == 7
    assert kf.template == [("N", 16), ("B", True), ("T", alloy.float16), ("M", -3)]
    assert kf.body == "o[0] = X;\n//! not a directive\n"
    # the C parser's messages, with the path
    with pytest.raises(alloy.InvalidArgumentError, match=r"k\.metal:2: name \"x\" appears twice"):
        parse("//! name: k\n//! inputs: x x\n", "k.metal")
    with pytest.raises(alloy.InvalidArgumentError, match="NUL byte"):
        parse("//! name: k\n\0", "k.metal")
    from alloy._example import parse_template_value
    assert parse_template_value("010") == 8 and parse_template_value("false") is False
    assert parse_template_value("bfloat16") == alloy.bfloat16
    with pytest.raises(alloy.InvalidArgumentError, match="neither an integer"):
        parse_template_value("nope")


# ---- the README's script ------------------------------------------------------------------------

def test_readme_script_runs_on_the_cpu():
    import os
    import pathlib
    script = pathlib.Path(__file__).resolve().parents[1] / "examples" / "exp_elementwise.py"
    env = dict(os.environ, ALLOY_DEVICE="cpu")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "ok: exp of a (64, 128) float16 array on cpu" in r.stdout
