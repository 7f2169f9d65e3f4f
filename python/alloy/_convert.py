"""alloy._convert — the cold paths of alloy.Array, in Python: conversion to
NumPy (a view of CPU memory, a copy of GPU memory; bfloat16 through
ml_dtypes when installed), repr and tolist. The C extension calls these;
NumPy is imported only when they run, so ``import alloy`` does not need it."""


def _numpy():
    try:
        import numpy
    except ImportError as e:  # pragma: no cover - numpy is a test dependency
        raise ImportError("converting an alloy.Array to NumPy needs numpy") from e
    return numpy


def to_numpy(a, dtype=None, copy=None):
    """``np.asarray(a)``: NumPy's ``__array__(dtype, copy)`` contract."""
    np = _numpy()
    host = a._host()  # `a` itself on the CPU, else a host copy
    copied = host is not a
    if copy is False and copied:
        raise ValueError(f"an array on {a.device.name} cannot become a NumPy array without a copy "
                         "(copy=False)")
    if a.dtype.name == "bfloat16":
        bits = np.from_dlpack(host._view("uint16"))
        try:
            import ml_dtypes
            arr = bits.view(ml_dtypes.bfloat16)
        except ImportError:
            if dtype is None:
                raise TypeError("NumPy has no bfloat16: install ml_dtypes, or convert with a dtype, "
                                "e.g. np.asarray(a, dtype=np.float32)") from None
            arr = (bits.astype(np.uint32) << 16).view(np.float32)
            copied = True
    else:
        arr = np.from_dlpack(host)
    if dtype is not None and arr.dtype != np.dtype(dtype):
        if copy is False:
            raise ValueError(f"converting {a.dtype.name} to {np.dtype(dtype)} needs a copy (copy=False)")
        return arr.astype(dtype)
    if copy and not copied:
        return arr.copy()
    return arr


def _for_display(a):
    np = _numpy()
    try:
        return to_numpy(a)
    except TypeError:  # bfloat16 without ml_dtypes
        return to_numpy(a, dtype=np.float32)


def array_repr(a):
    head = f"dtype={a.dtype.name}, device={a.device.name}"
    try:
        np = _numpy()
        body = np.array2string(_for_display(a), separator=", ", prefix="array(")
    except Exception:  # no NumPy, or the device cannot be read: describe only
        return f"alloy.Array(shape={a.shape}, {head})"
    return f"array({body}, {head})"


def to_list(a):
    return _for_display(a).tolist()
