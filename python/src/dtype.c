/* dtype.c — alloy.Dtype (alloy.float32, alloy.bfloat16, ...) and the
 * conversion of the dtype spellings Python users have at hand: alloy.Dtype,
 * NumPy dtypes and scalar types (np.float32, np.dtype('f4')), PyTorch dtypes
 * (torch.float16), JAX dtypes, ml_dtypes' bfloat16, and strings ('float32',
 * 'bfloat16', 'f32', 'half', '<f4'). Conversions are cached per object, so
 * the launch path pays one dictionary lookup. */
#include "alloy_py.h"

#include <string.h>

static PyObject *dtype_objects[ALLOY_DTYPE_COUNT]; /* alive for the process */
static PyObject *dtype_cache; /* dict: spelling object -> int */

static PyObject *Dtype_repr(AlloyPy_Dtype *self) {
    return PyUnicode_FromFormat("alloy.%s", alloy_dtype_name(self->dtype));
}

static PyObject *Dtype_str(AlloyPy_Dtype *self) {
    return PyUnicode_FromString(alloy_dtype_name(self->dtype));
}

static Py_hash_t Dtype_hash(AlloyPy_Dtype *self) { return (Py_hash_t)self->dtype + 0x5a110; }

static PyObject *Dtype_richcompare(PyObject *a, PyObject *b, int op) {
    if (op != Py_EQ && op != Py_NE) Py_RETURN_NOTIMPLEMENTED;
    alloy_dtype x, y;
    if (!alloypy_dtype_try(a, &x) || !alloypy_dtype_try(b, &y)) {
        if (PyErr_Occurred()) PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    return PyBool_FromLong((x == y) == (op == Py_EQ));
}

static PyObject *Dtype_get_name(AlloyPy_Dtype *self, void *c) {
    (void)c;
    return PyUnicode_FromString(alloy_dtype_name(self->dtype));
}
static PyObject *Dtype_get_size(AlloyPy_Dtype *self, void *c) {
    (void)c;
    return PyLong_FromSize_t(alloy_dtype_size(self->dtype));
}
static PyObject *Dtype_get_msl(AlloyPy_Dtype *self, void *c) {
    (void)c;
    return PyUnicode_FromString(alloy_dtype_msl_name(self->dtype));
}

static PyObject *Dtype_reduce(AlloyPy_Dtype *self, PyObject *unused) {
    (void)unused;
    return PyUnicode_FromString(alloy_dtype_name(self->dtype)); /* a module global */
}

static PyGetSetDef Dtype_getset[] = {
    {"name", (getter)Dtype_get_name, NULL, "NumPy spelling: 'float32', 'bfloat16', ...", NULL},
    {"size", (getter)Dtype_get_size, NULL, "bytes per element", NULL},
    {"itemsize", (getter)Dtype_get_size, NULL, "bytes per element (NumPy's name)", NULL},
    {"msl", (getter)Dtype_get_msl, NULL, "the type a kernel body sees: 'float', 'bfloat16_t', ...", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef Dtype_methods[] = {
    {"__reduce__", (PyCFunction)Dtype_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

PyTypeObject AlloyPy_DtypeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "alloy.Dtype",
    .tp_basicsize = sizeof(AlloyPy_Dtype),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An element type: alloy.bool_, int8 ... uint64, float16, bfloat16, float32, float64. "
              "Compares equal to the NumPy/PyTorch dtype and the string of the same type.",
    .tp_repr = (reprfunc)Dtype_repr,
    .tp_str = (reprfunc)Dtype_str,
    .tp_hash = (hashfunc)Dtype_hash,
    .tp_richcompare = Dtype_richcompare,
    .tp_getset = Dtype_getset,
    .tp_methods = Dtype_methods,
};

PyObject *alloypy_dtype_object(alloy_dtype d) {
    return (unsigned)d < ALLOY_DTYPE_COUNT ? dtype_objects[d] : Py_None;
}

int alloypy_dtype_init(PyObject *m) {
    if (PyType_Ready(&AlloyPy_DtypeType) < 0) return -1;
    dtype_cache = PyDict_New();
    if (!dtype_cache) return -1;
    for (int d = 0; d < ALLOY_DTYPE_COUNT; d++) {
        AlloyPy_Dtype *o = PyObject_New(AlloyPy_Dtype, &AlloyPy_DtypeType);
        if (!o) return -1;
        o->dtype = (alloy_dtype)d;
        dtype_objects[d] = (PyObject *)o;
        const char *name = alloy_dtype_name((alloy_dtype)d);
        Py_INCREF(o);
        if (PyModule_AddObject(m, d == ALLOY_BOOL ? "bool_" : name, (PyObject *)o) < 0) return -1;
    }
    Py_INCREF((PyObject *)&AlloyPy_DtypeType);
    return PyModule_AddObject(m, "Dtype", (PyObject *)&AlloyPy_DtypeType);
}

/* Parses a name after dropping a module prefix ("torch.float16") and a
 * trailing underscore ("bool_"). */
static int parse_name(const char *s, alloy_dtype *out) {
    const char *dot = strrchr(s, '.');
    if (dot) s = dot + 1;
    char buf[64];
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof buf) return 0;
    memcpy(buf, s, n + 1);
    if (n > 1 && buf[n - 1] == '_') buf[n - 1] = 0;
    alloy_dtype d;
    if (alloy_dtype_parse(buf, &d) != ALLOY_OK) {
        alloy_clear_error();
        return 0;
    }
    *out = d;
    return 1;
}

static int parse_unicode(PyObject *s, alloy_dtype *out) {
    const char *u = PyUnicode_AsUTF8(s);
    if (!u) {
        PyErr_Clear();
        return 0;
    }
    return parse_name(u, out);
}

/* Uncached resolution. 1 found, 0 not a dtype (no exception). */
static int resolve(PyObject *obj, alloy_dtype *out) {
    if (PyUnicode_Check(obj)) {
        if (parse_unicode(obj, out)) return 1;
    } else if (PyType_Check(obj)) {
        /* np.float32, ml_dtypes.bfloat16, bool, int, float */
        if (parse_name(((PyTypeObject *)obj)->tp_name, out)) return 1;
    } else {
        PyObject *name = PyObject_GetAttrString(obj, "name"); /* np.dtype, jax dtypes */
        if (name && PyUnicode_Check(name) && parse_unicode(name, out)) {
            Py_DECREF(name);
            return 1;
        }
        Py_XDECREF(name);
        PyErr_Clear();
        PyObject *s = PyObject_Str(obj); /* torch.float16 -> "torch.float16" */
        if (s) {
            int ok = parse_unicode(s, out);
            Py_DECREF(s);
            if (ok) return 1;
        }
        PyErr_Clear();
    }
    /* Whatever NumPy understands as a dtype ('<f4', 'f', np.dtype subclasses). */
    PyObject *np = PyImport_ImportModule("numpy");
    if (!np) {
        PyErr_Clear();
        return 0;
    }
    PyObject *dt = PyObject_CallMethod(np, "dtype", "O", obj);
    Py_DECREF(np);
    int ok = 0;
    if (dt) {
        PyObject *name = PyObject_GetAttrString(dt, "name");
        if (name && PyUnicode_Check(name)) ok = parse_unicode(name, out);
        Py_XDECREF(name);
        Py_DECREF(dt);
    }
    PyErr_Clear();
    return ok;
}

int alloypy_dtype_try(PyObject *obj, alloy_dtype *out) {
    if (Py_TYPE(obj) == &AlloyPy_DtypeType) {
        *out = ((AlloyPy_Dtype *)obj)->dtype;
        return 1;
    }
    if (obj == Py_None) return 0;
    PyObject *hit = PyDict_GetItemWithError(dtype_cache, obj);
    if (hit) {
        *out = (alloy_dtype)PyLong_AsLong(hit);
        return 1;
    }
    int hashable = !PyErr_Occurred();
    PyErr_Clear();
    if (!resolve(obj, out)) return 0;
    if (hashable && PyDict_GET_SIZE(dtype_cache) < 1024) {
        PyObject *v = PyLong_FromLong((long)*out);
        if (!v || PyDict_SetItem(dtype_cache, obj, v) < 0) PyErr_Clear();
        Py_XDECREF(v);
    }
    return 1;
}

int alloypy_dtype_from_object(PyObject *obj, alloy_dtype *out) {
    if (alloypy_dtype_try(obj, out)) return 0;
    if (!PyErr_Occurred())
        PyErr_Format(PyExc_TypeError,
                     "%R is not a dtype alloy knows (use alloy.float32, a NumPy or PyTorch dtype, or a "
                     "name such as 'float16' or 'bfloat16')",
                     obj);
    return -1;
}
