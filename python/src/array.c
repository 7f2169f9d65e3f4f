/* array.c — alloy.Array: a Python handle on an alloy_array (a kernel's
 * result, or another library's memory viewed without a copy), and its
 * export through DLPack.
 *
 * __dlpack__ follows the Python DLPack protocol: a versioned capsule
 * ("dltensor_versioned") when the consumer asks for max_version >= (1, 0),
 * else a legacy one ("dltensor"). For a CUDA array the consumer's stream is
 * made to wait, on the device, for the stream the array was written on
 * (an event, through alloy_stream_wait); stream=-1 asks for no ordering.
 * dl_device=(kDLCPU, 0) on a CUDA array exports a host copy. The capsule
 * destructor deletes the tensor only if no consumer took it; the tensor's
 * own deleter is plain C (it drops an alloy reference) and so may be called
 * from any thread without the GIL. */
#include "alloy_py.h"

#include <stdint.h>
#include <string.h>

static const char CAPSULE_V[] = "dltensor_versioned";
static const char CAPSULE_V_USED[] = "used_dltensor_versioned";
static const char CAPSULE_L[] = "dltensor";
static const char CAPSULE_L_USED[] = "used_dltensor";

PyObject *alloypy_array_wrap(alloy_array *a, PyObject *stream) {
    AlloyPy_Array *o = PyObject_New(AlloyPy_Array, &AlloyPy_ArrayType);
    if (!o) {
        alloy_array_free(a);
        return NULL;
    }
    o->array = a;
    o->stream = stream;
    Py_XINCREF(stream);
    return (PyObject *)o;
}

static void Array_dealloc(AlloyPy_Array *self) {
    alloy_array_free(self->array); /* may run another library's deleter, which takes the GIL itself */
    Py_XDECREF(self->stream);
    PyObject_Free(self);
}

static PyObject *Array_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    (void)type;
    static char *kwlist[] = {"obj", "device", "stream", NULL};
    PyObject *obj, *device = Py_None, *stream = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OO:Array", kwlist, &obj, &device, &stream))
        return NULL;
    return alloypy_asarray(obj, device, stream);
}

/* ---- properties ------------------------------------------------------------ */

static PyObject *shape_tuple(const alloy_array *a) {
    int nd = alloy_array_ndim(a);
    const int64_t *sh = alloy_array_shape(a);
    PyObject *t = PyTuple_New(nd);
    if (!t) return NULL;
    for (int i = 0; i < nd; i++) {
        PyObject *v = PyLong_FromLongLong(sh[i]);
        if (!v) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

static PyObject *Array_get_shape(AlloyPy_Array *self, void *c) {
    (void)c;
    return shape_tuple(self->array);
}
static PyObject *Array_get_dtype(AlloyPy_Array *self, void *c) {
    (void)c;
    PyObject *d = alloypy_dtype_object(alloy_array_dtype(self->array));
    Py_INCREF(d);
    return d;
}
static PyObject *Array_get_device(AlloyPy_Array *self, void *c) {
    (void)c;
    return alloypy_device_object(alloy_array_device(self->array));
}
static PyObject *Array_get_ndim(AlloyPy_Array *self, void *c) {
    (void)c;
    return PyLong_FromLong(alloy_array_ndim(self->array));
}
static PyObject *Array_get_size(AlloyPy_Array *self, void *c) {
    (void)c;
    return PyLong_FromLongLong(alloy_array_size(self->array));
}
static PyObject *Array_get_nbytes(AlloyPy_Array *self, void *c) {
    (void)c;
    return PyLong_FromSize_t(alloy_array_nbytes(self->array));
}
static PyObject *Array_get_itemsize(AlloyPy_Array *self, void *c) {
    (void)c;
    return PyLong_FromSize_t(alloy_dtype_size(alloy_array_dtype(self->array)));
}
static PyObject *Array_get_strides(AlloyPy_Array *self, void *c) {
    (void)c;
    int nd = alloy_array_ndim(self->array);
    const int64_t *st = alloy_array_strides(self->array);
    PyObject *t = PyTuple_New(nd);
    for (int i = 0; t && i < nd; i++) PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(st[i]));
    return t;
}
static PyObject *Array_get_data_ptr(AlloyPy_Array *self, void *c) {
    (void)c;
    return PyLong_FromVoidPtr(alloy_array_data(self->array));
}
static PyObject *Array_get_stream(AlloyPy_Array *self, void *c) {
    (void)c;
    if (self->stream) {
        Py_INCREF(self->stream);
        return self->stream;
    }
    Py_RETURN_NONE;
}

static Py_ssize_t Array_len(AlloyPy_Array *self) {
    if (alloy_array_ndim(self->array) == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of a 0-d array");
        return -1;
    }
    return (Py_ssize_t)alloy_array_shape(self->array)[0];
}

/* ---- DLPack export ---------------------------------------------------------- */

static void capsule_versioned_destructor(PyObject *cap) {
    if (PyCapsule_IsValid(cap, CAPSULE_V_USED)) return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    DLManagedTensorVersioned *t = PyCapsule_GetPointer(cap, CAPSULE_V);
    if (t && t->deleter) t->deleter(t);
    else if (!t) PyErr_WriteUnraisable(cap);
    PyErr_Restore(type, value, tb);
}

static void capsule_legacy_destructor(PyObject *cap) {
    if (PyCapsule_IsValid(cap, CAPSULE_L_USED)) return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    DLManagedTensor *t = PyCapsule_GetPointer(cap, CAPSULE_L);
    if (t && t->deleter) t->deleter(t);
    else if (!t) PyErr_WriteUnraisable(cap);
    PyErr_Restore(type, value, tb);
}

/* Makes the consumer's stream (protocol value `stream`) wait for ours. */
static int order_for_consumer(AlloyPy_Array *self, PyObject *stream) {
    alloy_device *d = alloy_array_device(self->array);
    if (alloypy_is_cpu(d)) {
        if (stream != Py_None && !(PyLong_Check(stream) && PyLong_AsLong(stream) == -1)) {
            if (PyErr_Occurred()) PyErr_Clear();
            PyErr_SetString(PyExc_BufferError, "a CPU array takes only stream=None in __dlpack__");
            return -1;
        }
        return 0;
    }
    void *native = NULL; /* None, 0 and 1: the legacy default stream */
    if (stream != Py_None) {
        if (!PyLong_Check(stream)) {
            PyErr_Format(PyExc_TypeError, "__dlpack__ stream must be an int or None, not %.100s",
                         Py_TYPE(stream)->tp_name);
            return -1;
        }
        long long v = PyLong_AsLongLong(stream);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            unsigned long long u = PyLong_AsUnsignedLongLong(stream);
            if (PyErr_Occurred()) return -1;
            native = (void *)(uintptr_t)u;
        } else if (v == -1) {
            return 0; /* the consumer asks for no synchronisation */
        } else if (v < -1) {
            PyErr_Format(PyExc_ValueError, "invalid __dlpack__ stream %lld", v);
            return -1;
        } else if (v == 2) {
            native = (void *)(uintptr_t)2; /* CU_STREAM_PER_THREAD */
        } else if (v > 2) {
            native = (void *)(uintptr_t)v;
        }
    }
    AlloyPy_Stream *consumer = alloypy_stream_wrapped(d, native);
    if (!consumer) return -1;
    alloy_stream *ours = alloypy_stream_of(self->stream, d);
    alloy_status st = alloy_stream_wait(consumer->stream, ours);
    if (st != ALLOY_OK) {
        alloypy_raise(st, "__dlpack__ (making the consumer's stream wait)");
        return -1;
    }
    return 0;
}

/* A host copy of a CUDA array (waits for the device). */
static int host_copy(alloy_array *a, alloy_array **out) {
    alloy_device *cpu = alloypy_cpu_device();
    if (!cpu) return -1;
    alloy_array *h;
    alloy_status st = alloy_array_new(cpu, alloy_array_dtype(a), alloy_array_ndim(a),
                                      alloy_array_shape(a), &h);
    if (st == ALLOY_OK) {
        Py_BEGIN_ALLOW_THREADS
        st = alloy_array_copy_to_host(a, alloy_array_data(h), alloy_array_nbytes(h));
        Py_END_ALLOW_THREADS
        if (st != ALLOY_OK) alloy_array_free(h);
    }
    if (st != ALLOY_OK) {
        alloypy_raise(st, "copying to the host");
        return -1;
    }
    *out = h;
    return 0;
}

static int parse_version(PyObject *mv, int *versioned) {
    *versioned = 0;
    if (mv == Py_None) return 0;
    if (!PyTuple_Check(mv) || PyTuple_GET_SIZE(mv) < 1) {
        PyErr_SetString(PyExc_TypeError, "max_version must be a tuple (major, minor)");
        return -1;
    }
    long major = PyLong_AsLong(PyTuple_GET_ITEM(mv, 0));
    if (major == -1 && PyErr_Occurred()) return -1;
    *versioned = major >= 1;
    return 0;
}

static PyObject *Array_dlpack(AlloyPy_Array *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO:__dlpack__", kwlist, &stream, &max_version,
                                     &dl_device, &copy))
        return NULL;
    int versioned, want_copy = copy == Py_True, forbid_copy = copy == Py_False, to_host = 0;
    if (parse_version(max_version, &versioned) < 0) return NULL;
    alloy_array *a = self->array;
    alloy_device *d = alloy_array_device(a);
    if (dl_device != Py_None) {
        int type, id;
        if (!PyArg_ParseTuple(dl_device, "ii:dl_device", &type, &id)) return NULL;
        int own_type = alloypy_is_cpu(d) ? kDLCPU : kDLCUDA, own_id = alloypy_device_ordinal(d);
        if (type == kDLCPU && own_type != kDLCPU) {
            if (forbid_copy) {
                PyErr_SetString(PyExc_BufferError, "exporting a CUDA array to the CPU needs a copy, "
                                                   "but copy=False");
                return NULL;
            }
            to_host = 1;
        } else if (type != own_type || (own_type != kDLCPU && id != own_id)) {
            PyErr_Format(PyExc_BufferError, "cannot export an array on %s to DLPack device (%d, %d)",
                         alloy_device_name(d), type, id);
            return NULL;
        }
    }
    alloy_array *exp = NULL; /* what is exported: a (new) reference */
    alloy_status st = ALLOY_OK;
    if (to_host) {
        if (host_copy(a, &exp) < 0) return NULL;
    } else {
        if (order_for_consumer(self, stream) < 0) return NULL;
        if (want_copy) {
            Py_BEGIN_ALLOW_THREADS
            st = alloy_array_contiguous(a, &exp);
            Py_END_ALLOW_THREADS
            if (st != ALLOY_OK) return alloypy_raise(st, "__dlpack__(copy=True)");
        } else {
            exp = alloy_array_retain(a);
        }
    }
    int copied = to_host || want_copy;
    PyObject *cap = NULL;
    if (versioned) {
        DLManagedTensorVersioned *t;
        st = alloy_array_to_dlpack(exp, &t);
        if (st == ALLOY_OK) {
            /* DLPack 1.x: say 1.0 unless the consumer asked for more (minor versions only add enums). */
            t->version.major = 1;
            t->version.minor = 0;
            if (copied) t->flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
            cap = PyCapsule_New(t, CAPSULE_V, capsule_versioned_destructor);
            if (!cap) t->deleter(t);
        }
    } else {
        DLManagedTensor *t;
        /* imported read-only and not copied: the legacy struct cannot say so */
        DLManagedTensorVersioned *probe;
        int read_only = 0;
        if (!copied && alloy_array_to_dlpack(exp, &probe) == ALLOY_OK) {
            read_only = (probe->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
            probe->deleter(probe);
        }
        if (read_only) {
            alloy_array_free(exp);
            PyErr_SetString(PyExc_BufferError,
                            "cannot export a read-only array as a legacy DLPack capsule (which cannot "
                            "mark it read-only); ask for max_version=(1, 0)");
            return NULL;
        }
        st = alloy_array_to_dlpack_legacy(exp, &t);
        if (st == ALLOY_OK) {
            cap = PyCapsule_New(t, CAPSULE_L, capsule_legacy_destructor);
            if (!cap) t->deleter(t);
        }
    }
    alloy_array_free(exp); /* the tensor holds its own reference */
    if (st != ALLOY_OK) return alloypy_raise(st, "__dlpack__");
    return cap;
}

static PyObject *Array_dlpack_device(AlloyPy_Array *self, PyObject *unused) {
    (void)unused;
    alloy_device *d = alloy_array_device(self->array);
    if (alloypy_is_cpu(d)) return Py_BuildValue("(ii)", (int)kDLCPU, 0);
    return Py_BuildValue("(ii)", (int)kDLCUDA, alloypy_device_ordinal(d));
}

/* ---- conversion helpers (used by alloy._convert) ---------------------------- */

/* _host(): this array when it is on the CPU, else a host copy. */
static PyObject *Array_host(AlloyPy_Array *self, PyObject *unused) {
    (void)unused;
    if (alloypy_is_cpu(alloy_array_device(self->array))) {
        Py_INCREF(self);
        return (PyObject *)self;
    }
    alloy_array *h;
    if (host_copy(self->array, &h) < 0) return NULL;
    return alloypy_array_wrap(h, NULL);
}

static void release_view(void *user) { alloy_array_free(user); }

/* _view(dtype): the same memory seen as another dtype of the same size. */
static PyObject *Array_view(AlloyPy_Array *self, PyObject *dtype_obj) {
    alloy_dtype dt;
    if (alloypy_dtype_from_object(dtype_obj, &dt) < 0) return NULL;
    alloy_array *a = self->array;
    if (alloy_dtype_size(dt) != alloy_dtype_size(alloy_array_dtype(a)))
        return alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT, "_view: %s and %s differ in size",
                                 alloy_dtype_name(dt), alloy_dtype_name(alloy_array_dtype(a)));
    alloy_array *v;
    alloy_array_retain(a);
    alloy_status st = alloy_array_wrap(alloy_array_device(a), alloy_array_data(a), dt, alloy_array_ndim(a),
                                       alloy_array_shape(a), alloy_array_strides(a), 0, release_view, a,
                                       &v);
    if (st != ALLOY_OK) {
        alloy_array_free(a);
        return alloypy_raise(st, NULL);
    }
    return alloypy_array_wrap(v, self->stream);
}

/* copy(): a new row-contiguous array with the same elements, on the same device. */
static PyObject *Array_copy(AlloyPy_Array *self, PyObject *unused) {
    (void)unused;
    alloy_array *c;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_array_contiguous(self->array, &c);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) return alloypy_raise(st, "copy");
    return alloypy_array_wrap(c, self->stream);
}

static PyObject *call_helper(const char *name, PyObject *args) {
    PyObject *f = alloypy_helper(name);
    if (!f) return NULL;
    return PyObject_Call(f, args, NULL);
}

static PyObject *Array_array(AlloyPy_Array *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"dtype", "copy", NULL};
    PyObject *dtype = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:__array__", kwlist, &dtype, &copy)) return NULL;
    PyObject *t = PyTuple_Pack(3, (PyObject *)self, dtype, copy);
    if (!t) return NULL;
    PyObject *r = call_helper("to_numpy", t);
    Py_DECREF(t);
    return r;
}

static PyObject *Array_repr(AlloyPy_Array *self) {
    PyObject *t = PyTuple_Pack(1, (PyObject *)self);
    if (!t) return NULL;
    PyObject *r = call_helper("array_repr", t);
    Py_DECREF(t);
    return r;
}

static PyObject *Array_tolist(AlloyPy_Array *self, PyObject *unused) {
    (void)unused;
    PyObject *t = PyTuple_Pack(1, (PyObject *)self);
    if (!t) return NULL;
    PyObject *r = call_helper("to_list", t);
    Py_DECREF(t);
    return r;
}

static PyGetSetDef Array_getset[] = {
    {"shape", (getter)Array_get_shape, NULL, "tuple of dimensions", NULL},
    {"dtype", (getter)Array_get_dtype, NULL, "element type (alloy.Dtype)", NULL},
    {"device", (getter)Array_get_device, NULL, "the device holding the memory (alloy.Device)", NULL},
    {"ndim", (getter)Array_get_ndim, NULL, "number of dimensions", NULL},
    {"size", (getter)Array_get_size, NULL, "number of elements", NULL},
    {"nbytes", (getter)Array_get_nbytes, NULL, "size * itemsize", NULL},
    {"itemsize", (getter)Array_get_itemsize, NULL, "bytes per element", NULL},
    {"strides", (getter)Array_get_strides, NULL, "strides in ELEMENTS (not bytes)", NULL},
    {"data_ptr", (getter)Array_get_data_ptr, NULL, "address of element [0, ..., 0]", NULL},
    {"stream", (getter)Array_get_stream, NULL,
     "the alloy.Stream the array was written on (None: the device's default stream)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef Array_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))Array_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None): a DLPack capsule."},
    {"__dlpack_device__", (PyCFunction)Array_dlpack_device, METH_NOARGS,
     "(device_type, device_id) as DLPack numbers them (1 = CPU, 2 = CUDA)."},
    {"__array__", (PyCFunction)(void (*)(void))Array_array, METH_VARARGS | METH_KEYWORDS,
     "__array__(dtype=None, copy=None): a NumPy array (a view of CPU memory, a copy of GPU memory)."},
    {"copy", (PyCFunction)Array_copy, METH_NOARGS, "A row-contiguous copy on the same device."},
    {"tolist", (PyCFunction)Array_tolist, METH_NOARGS, "The elements as nested Python lists."},
    {"_host", (PyCFunction)Array_host, METH_NOARGS, NULL},
    {"_view", (PyCFunction)Array_view, METH_O, NULL},
    {NULL, NULL, 0, NULL}};

static PySequenceMethods Array_as_sequence = {.sq_length = (lenfunc)Array_len};

PyTypeObject AlloyPy_ArrayType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "alloy.Array",
    .tp_basicsize = sizeof(AlloyPy_Array),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Array(obj, *, device=None, stream=None): an n-dimensional array on a device; from any "
              "object with __dlpack__ (no copy on its own device) or the buffer protocol. Exports "
              "__dlpack__ / __dlpack_device__ and converts to NumPy (np.asarray).",
    .tp_new = Array_new,
    .tp_dealloc = (destructor)Array_dealloc,
    .tp_repr = (reprfunc)Array_repr,
    .tp_as_sequence = &Array_as_sequence,
    .tp_getset = Array_getset,
    .tp_methods = Array_methods,
};

int alloypy_array_init(PyObject *m) {
    if (PyType_Ready(&AlloyPy_ArrayType) < 0) return -1;
    Py_INCREF((PyObject *)&AlloyPy_ArrayType);
    return PyModule_AddObject(m, "Array", (PyObject *)&AlloyPy_ArrayType);
}
