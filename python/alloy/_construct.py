"""alloy._construct — arrays from Python data with a dtype, MLX's way:
``alloy.array``, ``alloy.asarray``, ``zeros``, ``ones``, ``full``, ``empty``
and ``eval``.

``array`` always copies; ``asarray`` returns a view when it can (an
alloy.Array, or anything with ``__dlpack__`` or the buffer protocol, already
of that dtype on that device). Nested lists and scalars go through NumPy
(imported only here). bfloat16 needs no DLPack: NumPy arrays of
``ml_dtypes.bfloat16`` are read as their 16-bit patterns (NumPy's DLPack
refuses that dtype), and values are rounded to bfloat16 here, to nearest
even from the exact value (float64 data is first rounded to float32 with
round-to-odd, which makes the second rounding exact), NaN kept as a quiet
NaN of the same sign.
"""
from ._alloy import Array, _empty, _fill, asarray as _asarray_c, dtype as _dtype, synchronize

_BF16 = _dtype("bfloat16")


def _numpy():
    try:
        import numpy
    except ImportError as e:  # pragma: no cover - numpy is a test dependency
        raise ImportError("building an alloy.Array from Python data needs numpy") from e
    return numpy


def _c_order(np, a):
    """a in C order (np.ascontiguousarray would make a 0-d array 1-d)."""
    return a if a.flags.c_contiguous else a.copy(order="C")


def _resolve(dtype):
    """An alloy.Dtype from alloy/NumPy/ml_dtypes dtypes, types and names."""
    if dtype is None:
        return None
    try:
        return _dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype: {dtype!r} is not a dtype alloy knows (alloy.float32, 'bfloat16', "
                        "np.float16, ml_dtypes.bfloat16, ...)") from None


def _is_bf16_numpy(np, a):
    return isinstance(a, np.ndarray) and a.dtype.name == "bfloat16" and a.dtype.itemsize == 2


def _float32_round_to_odd(np, x):
    """float64 -> float32 with round-to-odd: a later rounding to a narrower
    format (bfloat16) then equals one rounding of the float64 value."""
    with np.errstate(over="ignore"):
        f = x.astype(np.float32)
    inexact = np.isfinite(x) & (f.astype(np.float64) != x)
    bits = f.view(np.uint32)
    even = (bits & 1) == 0
    fix = inexact & even & np.isfinite(f)
    if np.any(fix):
        toward = np.where(x > f.astype(np.float64), np.float32(np.inf), np.float32(-np.inf))
        f = np.where(fix, np.nextafter(f, toward), f)
    return f


def _to_bf16_bits(np, a):
    """uint16 bfloat16 patterns of a real NumPy array, rounded to nearest even."""
    a = np.asarray(a)
    if a.dtype.kind == "c":
        raise TypeError("dtype: complex values cannot become bfloat16")
    if a.dtype == np.float64 or a.dtype.kind in "iu" and a.dtype.itemsize > 2:
        f = _float32_round_to_odd(np, a.astype(np.float64))
    else:
        with np.errstate(over="ignore"):
            f = a.astype(np.float32)
    u = _c_order(np, f).view(np.uint32)
    rounded = ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    if np.any(nan):  # quiet NaN, sign kept
        rounded = np.where(nan, ((u >> 16) | np.uint32(0x0040)).astype(np.uint16), rounded)
    return rounded


def _bf16_to_float32(np, bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _host_numpy(np, obj, dt):
    """A NumPy array holding obj's values as dtype dt (None: obj's own dtype,
    MLX's defaults for Python data), and the alloy dtype it stands for (the
    array holds bit patterns for bfloat16)."""
    if _is_bf16_numpy(np, obj):
        bits = _c_order(np, obj).view(np.uint16)
        if dt is None or dt == _BF16:
            return bits, _BF16
        return _bf16_to_float32(np, bits).astype(np.dtype(dt.name)), dt
    python_data = not isinstance(obj, np.ndarray)
    if python_data and dt is not None and dt != _BF16:
        try:  # NumPy's own rules (and errors) for Python data of a given dtype
            return np.array(obj, dtype=np.dtype(dt.name)), dt
        except ValueError as e:
            raise ValueError(f"array: {e}") from None
    try:
        a = np.asarray(obj)
    except ValueError as e:  # ragged nested lists
        raise ValueError(f"array: {e}") from None
    if a.dtype == object or a.dtype.kind in "USV":
        raise ValueError(f"array: cannot make an array of {a.dtype} data (ragged lists or non-numbers)")
    if dt is None:
        if python_data:  # MLX's defaults for Python data: bool, int32, float32
            if a.dtype.kind == "f":
                a = a.astype(np.float32)
            elif a.dtype.kind in "iu" and a.size and np.all(a == a.astype(np.int32)):
                a = a.astype(np.int32)
            elif a.dtype.kind in "iu" and not a.size:
                a = a.astype(np.int32)
        return a, None
    if dt == _BF16:
        return _to_bf16_bits(np, a), _BF16
    return a.astype(np.dtype(dt.name)), dt


def _from_host(np, a, dt, device):
    host = _asarray_c(_c_order(np, a), device=None)
    if dt == _BF16 and host.dtype != _BF16:
        host = host._view("bfloat16")
    if device is None or _same_device(host, device):
        return host
    return _asarray_c(host, device=device)


def _same_device(a, device):
    from ._alloy import Device
    d = device if isinstance(device, Device) else Device(device)
    return a.device == d


def array(obj, dtype=None, device=None):
    """A new alloy.Array holding a copy of obj's values as `dtype`, on
    `device` (default: obj's own device for arrays, else alloy's default
    device). obj: nested lists, Python scalars, NumPy arrays (ml_dtypes
    bfloat16 too), alloy.Array, or anything with __dlpack__."""
    dt = _resolve(dtype)
    if isinstance(obj, Array) or (hasattr(obj, "__dlpack__") and not _is_numpy(obj)):
        a = obj if isinstance(obj, Array) else _asarray_c(obj, device=None)
        if dt is None or dt == a.dtype:
            if device is not None and not _same_device(a, device):
                return _asarray_c(a._host() if a.device.name != "cpu" else a, device=device).copy()
            return a.copy()
        np = _numpy()
        return _from_host(np, *_host_numpy(np, _to_numpy(np, a), dt), device or a.device)
    np = _numpy()
    host, hd = _host_numpy(np, obj, dt)
    return _from_host(np, np.array(host, copy=True), hd, device)


def asarray(obj, dtype=None, device=None, stream=None):
    """obj as an alloy.Array, without a copy when it already is one (or
    exposes its memory through __dlpack__ or the buffer protocol) of `dtype`
    on `device`; else as ``array`` makes it. Python scalars become 0-d
    arrays (MLX's rules). `stream`: as for kernel inputs (CUDA producers
    order their pending work before it)."""
    dt = _resolve(dtype)
    if isinstance(obj, (list, tuple)):
        return array(obj, dtype=dt, device=device)
    if _is_numpy(obj):
        np = _numpy()
        if _is_bf16_numpy(np, obj):  # NumPy's DLPack refuses bfloat16: read the bits
            obj = _c_order(np, obj)
            view = _asarray_c(obj.view(np.uint16), device=device)._view("bfloat16")
            return view if dt is None or dt == _BF16 else array(view, dtype=dt, device=device)
    a = _asarray_c(obj, device=device, stream=stream)
    if dt is None or a.dtype == dt:
        return a
    return array(a, dtype=dt, device=device)


def _is_numpy(obj):
    t = type(obj)
    return t.__module__ == "numpy" and t.__name__ in ("ndarray",)


def _to_numpy(np, a):
    if a.dtype == _BF16:
        return np.from_dlpack(a._host()._view("uint16")).view(_bf16_numpy_dtype(np))
    return np.asarray(a)


def _bf16_numpy_dtype(np):
    try:
        import ml_dtypes
        return ml_dtypes.bfloat16
    except ImportError:
        raise TypeError("converting bfloat16 to another dtype on the host needs ml_dtypes") from None


def empty(shape, dtype="float32", device=None):
    """An uninitialised array (MLX has none; NumPy's name)."""
    if isinstance(shape, int):
        shape = (shape,)
    return _empty(tuple(shape), _resolve(dtype), device)


def full(shape, fill_value, dtype=None, device=None):
    """An array of `shape` with every element `fill_value` (dtype default:
    float32 for floats, int32 for ints, bool for bools, as MLX)."""
    if dtype is None:
        dtype = "bool" if isinstance(fill_value, bool) else "int32" if isinstance(fill_value, int) \
            else "float32"
    a = empty(shape, dtype, device)
    _fill(a, float(fill_value))
    return a


def zeros(shape, dtype="float32", device=None):
    return full(shape, 0, dtype=dtype, device=device)


def ones(shape, dtype="float32", device=None):
    return full(shape, 1, dtype=dtype, device=device)


def eval(*arrays):
    """MLX's eval: waits until the work that produced each array is done
    (the stream it was written on, or its device's queue)."""
    seen = set()
    for a in arrays:
        if isinstance(a, (list, tuple)):
            eval(*a)
            continue
        if not isinstance(a, Array):
            raise TypeError(f"eval: expected alloy.Array, got {type(a).__name__}")
        target = a.stream if a.stream is not None else a.device
        key = id(target)
        if key not in seen:
            seen.add(key)
            synchronize(target)
