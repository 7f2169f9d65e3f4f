/* construct.c — the C side of alloy.array / zeros / ones / full / empty
 * (python/alloy/_construct.py): a new array of a shape and dtype on a
 * device, and filling one with a value (alloy_array_fill, which rounds to
 * half and bfloat16 to nearest even on every backend). */
#include "alloy_py.h"

/* _empty(shape, dtype, device=None) -> alloy.Array (uninitialised). */
PyObject *alloypy_empty(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"shape", "dtype", "device", NULL};
    PyObject *shape_obj, *dtype_obj, *device_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O:_empty", kw, &shape_obj, &dtype_obj, &device_obj))
        return NULL;
    alloy_dtype dt;
    if (alloypy_dtype_from_object(dtype_obj, &dt) < 0) return NULL;
    alloy_device *dev;
    if (alloypy_device_from_object(device_obj, &dev) < 0) return NULL;
    if (!dev && !(dev = alloypy_default_device())) return NULL;
    PyObject *seq = PySequence_Fast(shape_obj, "shape must be a sequence of integers");
    if (!seq) return NULL;
    Py_ssize_t nd = PySequence_Fast_GET_SIZE(seq);
    if (nd > ALLOY_MAX_NDIM) {
        Py_DECREF(seq);
        return alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT, "shape has %zd dimensions; at most %d",
                                 nd, ALLOY_MAX_NDIM);
    }
    int64_t shape[ALLOY_MAX_NDIM];
    for (Py_ssize_t i = 0; i < nd; i++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
        if (v < 0) {
            Py_DECREF(seq);
            return alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT, "shape[%zd] = %lld is negative", i, v);
        }
        shape[i] = v;
    }
    Py_DECREF(seq);
    alloy_array *a;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_array_new(dev, dt, (int)nd, shape, &a);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) return alloypy_raise(st, NULL);
    return alloypy_array_wrap(a, NULL);
}

/* _fill(array, value): every element set to value (a Python number). */
PyObject *alloypy_fill(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *arr;
    double v;
    if (!PyArg_ParseTuple(args, "O!d:_fill", &AlloyPy_ArrayType, &arr, &v)) return NULL;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_array_fill(((AlloyPy_Array *)arr)->array, v);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) return alloypy_raise(st, NULL);
    Py_RETURN_NONE;
}
