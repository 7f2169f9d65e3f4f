/* convert.c — Python objects to alloy arrays, without copies where the
 * memory already lives on the launch device.
 *
 * Accepted: alloy.Array; anything with __dlpack__ / __dlpack_device__
 * (NumPy >= 1.22, PyTorch, CuPy, JAX), asked for a versioned capsule
 * (max_version=(1, 0)) with a fallback to a legacy one for producers that do
 * not know the keyword; objects with the buffer protocol (NumPy scalars,
 * memoryview, array.array); Python scalars, which become 0-d arrays with
 * MLX's rules (bool -> bool, int -> int32, float -> float32).
 *
 * Conversion happens in two steps so that the launch device can be chosen
 * from where the arrays live before any capsule is taken: probe (what and
 * where), then convert (on the chosen device, with the stream the work runs
 * on passed to CUDA producers, which order their pending work before it as
 * the DLPack protocol asks). CPU memory going to a GPU launch is copied;
 * GPU memory on another device is an error, never a silent copy. */
#include "alloy_py.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static PyObject *str_dlpack, *str_dlpack_device, *kw_max_version, *kw_stream_max_version, *kw_stream,
    *version_1_0;
static PyTypeObject *numpy_ndarray; /* found on first sight (exact type only) */

int alloypy_convert_init(void) {
    str_dlpack = PyUnicode_InternFromString("__dlpack__");
    str_dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
    kw_max_version = Py_BuildValue("(s)", "max_version");
    kw_stream_max_version = Py_BuildValue("(ss)", "stream", "max_version");
    kw_stream = Py_BuildValue("(s)", "stream");
    version_1_0 = Py_BuildValue("(ii)", 1, 0);
    return str_dlpack && str_dlpack_device && kw_max_version && kw_stream_max_version && kw_stream &&
                   version_1_0
               ? 0
               : -1;
}

/* ---- probing --------------------------------------------------------------- */

static int device_of_dl(int type, int id, alloy_device **out, const char *what) {
    static alloy_device *cuda_cache[16];
    switch (type) {
    case kDLCPU:
    case kDLCUDAHost:
        return (*out = alloypy_cpu_device()) ? 0 : -1;
    case kDLCUDA:
    case kDLCUDAManaged: {
        if (id >= 0 && id < 16 && cuda_cache[id]) {
            *out = cuda_cache[id];
            return 0;
        }
        char name[32];
        snprintf(name, sizeof name, "cuda:%d", id);
        alloy_device *d;
        alloy_status st = alloy_device_get(name, &d);
        if (st != ALLOY_OK) {
            alloypy_raise(st, what);
            return -1;
        }
        if (id >= 0 && id < 16) cuda_cache[id] = d;
        *out = d;
        return 0;
    }
    default:
        alloypy_raise_fmt(ALLOY_ERROR_UNSUPPORTED,
                          "%s: DLPack device type %d is not supported (alloy takes CPU and CUDA memory)",
                          what, type);
        return -1;
    }
}

int alloypy_probe_object(PyObject *obj, alloypy_probe *p, const char *what) {
    p->obj = obj;
    p->device = NULL;
    p->dl_type = 0;
    p->dl_id = 0;
    p->xapi = NULL;
    PyTypeObject *t = Py_TYPE(obj);
    if (t == &AlloyPy_ArrayType) {
        p->kind = ARG_ARRAY;
        p->device = alloy_array_device(((AlloyPy_Array *)obj)->array);
        return 0;
    }
    if (t == &PyBool_Type || t == &PyLong_Type || t == &PyFloat_Type) {
        p->kind = ARG_SCALAR;
        return 0;
    }
    if (t == numpy_ndarray) {
        p->kind = ARG_DLPACK;
        p->dl_type = kDLCPU;
        return (p->device = alloypy_cpu_device()) ? 0 : -1;
    }
    if ((p->xapi = alloypy_cx_lookup(t)) != NULL) {
        int type, id;
        if (alloypy_cx_probe(p->xapi, obj, &type, &id)) {
            p->kind = ARG_DLPACK;
            p->dl_type = type;
            p->dl_id = id;
            return device_of_dl(type, id, &p->device, what);
        }
    }
    PyObject *meth = PyObject_GetAttr(obj, str_dlpack_device);
    if (meth) {
        PyObject *r = PyObject_CallNoArgs(meth);
        Py_DECREF(meth);
        if (!r) return -1;
        int type = 0, id = 0;
        int ok = PyTuple_Check(r) && PyArg_ParseTuple(r, "ii", &type, &id);
        Py_DECREF(r);
        if (!ok) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "%s: __dlpack_device__() did not return (type, id)", what);
            return -1;
        }
        if (!numpy_ndarray && strcmp(t->tp_name, "numpy.ndarray") == 0) {
            numpy_ndarray = t;
            Py_INCREF(t);
        }
        p->kind = ARG_DLPACK;
        p->dl_type = type;
        p->dl_id = id;
        return device_of_dl(type, id, &p->device, what);
    }
    PyErr_Clear();
    if (PyObject_CheckBuffer(obj)) {
        p->kind = ARG_BUFFER;
        return (p->device = alloypy_cpu_device()) ? 0 : -1;
    }
    if (PyBool_Check(obj) || PyLong_Check(obj) || PyFloat_Check(obj)) { /* subclasses */
        p->kind = ARG_SCALAR;
        return 0;
    }
    PyErr_Format(PyExc_TypeError,
                 "%s: a %.100s is not an array (alloy takes objects with __dlpack__ or the buffer "
                 "protocol, alloy.Array, and Python scalars)",
                 what, t->tp_name);
    return -1;
}

/* ---- host -> device --------------------------------------------------------- */

/* A copy of the CPU array `a` on `device` (consumes the reference to a). */
static int to_device(alloy_array *a, alloy_device *device, const char *what, alloy_array **out) {
    alloy_array *c = NULL, *g = NULL;
    alloy_status st = ALLOY_OK;
    Py_BEGIN_ALLOW_THREADS
    if (!alloy_array_is_row_contiguous(a)) st = alloy_array_contiguous(a, &c);
    else c = alloy_array_retain(a);
    if (st == ALLOY_OK)
        st = alloy_array_new(device, alloy_array_dtype(c), alloy_array_ndim(c), alloy_array_shape(c), &g);
    if (st == ALLOY_OK) st = alloy_array_copy_from_host(g, alloy_array_data(c), alloy_array_nbytes(c));
    Py_END_ALLOW_THREADS
    alloy_array_free(c);
    alloy_array_free(a);
    if (st != ALLOY_OK) {
        alloy_array_free(g);
        alloypy_raise(st, what);
        return -1;
    }
    *out = g;
    return 0;
}

/* ---- scalars ---------------------------------------------------------------- */

static int scalar(PyObject *obj, alloy_device *device, const char *what, alloy_array **out) {
    alloy_dtype dt;
    double v;
    if (PyBool_Check(obj)) {
        dt = ALLOY_BOOL;
        v = obj == Py_True;
    } else if (PyLong_Check(obj)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (x == -1 && PyErr_Occurred()) return -1;
        if (overflow || x < INT32_MIN || x > INT32_MAX) {
            PyErr_Format(PyExc_OverflowError,
                         "%s: the Python int %S does not fit the int32 a scalar input becomes; pass a "
                         "0-d array (e.g. np.int64(...)) instead",
                         what, obj);
            return -1;
        }
        dt = ALLOY_INT32;
        v = (double)x;
    } else {
        dt = ALLOY_FLOAT32;
        v = PyFloat_AsDouble(obj);
        if (v == -1.0 && PyErr_Occurred()) return -1;
    }
    alloy_status st = alloy_array_scalar(device, dt, v, out);
    if (st != ALLOY_OK) {
        alloypy_raise(st, what);
        return -1;
    }
    return 0;
}

/* ---- DLPack ----------------------------------------------------------------- */

static int consume_capsule(PyObject *cap, alloy_array **out, const char *what) {
    alloy_status st;
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        DLManagedTensorVersioned *t = PyCapsule_GetPointer(cap, "dltensor_versioned");
        st = alloy_array_from_dlpack(t, out);
        if (st == ALLOY_OK && PyCapsule_SetName(cap, "used_dltensor_versioned") < 0) {
            /* cannot happen for a valid capsule; never delete twice */
            return -1;
        }
    } else if (PyCapsule_IsValid(cap, "dltensor")) {
        DLManagedTensor *t = PyCapsule_GetPointer(cap, "dltensor");
        st = alloy_array_from_dlpack_legacy(t, out);
        if (st == ALLOY_OK && PyCapsule_SetName(cap, "used_dltensor") < 0) return -1;
    } else {
        PyErr_Format(PyExc_TypeError, "%s: __dlpack__ returned a %.100s, not an unused DLPack capsule",
                     what, Py_TYPE(cap)->tp_name);
        return -1;
    }
    /* On failure the capsule keeps the tensor: its destructor deletes it. */
    if (st != ALLOY_OK) {
        alloypy_raise(st, what);
        return -1;
    }
    return 0;
}

/* The protocol's value for our stream: 1 for the legacy default stream. */
static PyObject *stream_value(alloy_stream *s) {
    void *h = s ? alloy_stream_native(s) : NULL;
    if (!h) return PyLong_FromLong(1);
    return PyLong_FromVoidPtr(h);
}

static int from_dlpack(const alloypy_probe *p, alloy_stream *stream, const char *what, alloy_array **out) {
    PyObject *args[3] = {p->obj, NULL, NULL};
    PyObject *sv = NULL, *cap;
    int gpu = !alloypy_is_cpu(p->device);
    if (gpu) {
        if (!(sv = stream_value(stream))) return -1;
        args[1] = sv;
        args[2] = version_1_0;
        cap = PyObject_VectorcallMethod(str_dlpack, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                        kw_stream_max_version);
    } else {
        args[1] = version_1_0;
        cap = PyObject_VectorcallMethod(str_dlpack, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                        kw_max_version);
    }
    if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) {
        /* A producer from before DLPack 1.0: no max_version keyword. */
        PyErr_Clear();
        if (gpu) cap = PyObject_VectorcallMethod(str_dlpack, args, 1, kw_stream);
        else cap = PyObject_VectorcallMethod(str_dlpack, args, 1, NULL);
    }
    Py_XDECREF(sv);
    if (!cap) return -1;
    int r = consume_capsule(cap, out, what);
    Py_DECREF(cap);
    return r;
}

/* ---- buffer protocol --------------------------------------------------------- */

static int is_finalizing(void) {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

static void release_buffer(void *user) {
    Py_buffer *view = user;
    if (!Py_IsInitialized() || is_finalizing()) return; /* the interpreter is going: leak */
    PyGILState_STATE g = PyGILState_Ensure();
    PyBuffer_Release(view);
    PyMem_RawFree(view);
    PyGILState_Release(g);
}

static int format_dtype(const Py_buffer *v, alloy_dtype *out) {
    const char *f = v->format ? v->format : "B";
    if (*f == '@' || *f == '=' || *f == '<') f++;
    if (!f[0] || f[1]) return 0;
    int item = (int)v->itemsize;
    switch (f[0]) {
    case '?': *out = ALLOY_BOOL; return item == 1;
    case 'e': *out = ALLOY_FLOAT16; return item == 2;
    case 'f': *out = ALLOY_FLOAT32; return item == 4;
    case 'd': *out = ALLOY_FLOAT64; return item == 8;
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n':
        switch (item) {
        case 1: *out = ALLOY_INT8; return 1;
        case 2: *out = ALLOY_INT16; return 1;
        case 4: *out = ALLOY_INT32; return 1;
        case 8: *out = ALLOY_INT64; return 1;
        default: return 0;
        }
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N':
        switch (item) {
        case 1: *out = ALLOY_UINT8; return 1;
        case 2: *out = ALLOY_UINT16; return 1;
        case 4: *out = ALLOY_UINT32; return 1;
        case 8: *out = ALLOY_UINT64; return 1;
        default: return 0;
        }
    default:
        return 0;
    }
}

static int from_buffer(PyObject *obj, int writable, const char *what, alloy_array **out) {
    Py_buffer *view = PyMem_RawMalloc(sizeof *view);
    if (!view) {
        PyErr_NoMemory();
        return -1;
    }
    if (PyObject_GetBuffer(obj, view, writable ? PyBUF_RECORDS : PyBUF_RECORDS_RO) < 0) {
        PyMem_RawFree(view);
        return -1;
    }
    alloy_dtype dt;
    int64_t shape[ALLOY_MAX_NDIM], strides[ALLOY_MAX_NDIM];
    const char *bad = NULL;
    if (!format_dtype(view, &dt)) bad = "its element format has no alloy dtype";
    else if (view->ndim > ALLOY_MAX_NDIM) bad = "it has too many dimensions";
    for (int i = 0; !bad && i < view->ndim; i++) {
        shape[i] = view->shape[i];
        if (view->strides[i] % view->itemsize) bad = "its strides are not multiples of the element size";
        strides[i] = view->strides[i] / view->itemsize;
    }
    if (bad) {
        PyErr_Format(PyExc_TypeError, "%s: cannot use the buffer of a %.100s: %s (format '%s')", what,
                     Py_TYPE(obj)->tp_name, bad, view->format ? view->format : "B");
        PyBuffer_Release(view);
        PyMem_RawFree(view);
        return -1;
    }
    alloy_device *cpu = alloypy_cpu_device();
    alloy_status st = cpu ? alloy_array_wrap(cpu, view->buf, dt, view->ndim, shape, strides, 0,
                                             release_buffer, view, out)
                          : ALLOY_ERROR_UNAVAILABLE;
    if (st != ALLOY_OK) {
        PyBuffer_Release(view);
        PyMem_RawFree(view);
        if (cpu) alloypy_raise(st, what);
        return -1;
    }
    return 0;
}

/* ---- convert ------------------------------------------------------------------ */

int alloypy_convert(const alloypy_probe *p, alloy_device *device, alloy_stream *stream, int writable,
                    const char *what, alloy_array **out) {
    alloy_array *a = NULL;
    if (p->kind == ARG_SCALAR) {
        if (writable) {
            PyErr_Format(PyExc_TypeError, "%s: an output must be an array, not a %.100s", what,
                         Py_TYPE(p->obj)->tp_name);
            return -1;
        }
        return scalar(p->obj, device, what, out);
    }
    if (p->device != device) {
        if (!alloypy_is_cpu(p->device)) {
            alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT,
                              "%s lives on %s but the launch runs on %s (alloy never copies between GPUs "
                              "silently: move it first, or pass device=)",
                              what, alloy_device_name(p->device), alloy_device_name(device));
            return -1;
        }
        if (writable) {
            alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT,
                              "%s lives on %s but the launch runs on %s; an output is written in place, "
                              "so it must live on the launch device (pass device='%s' to run there)",
                              what, alloy_device_name(p->device), alloy_device_name(device),
                              alloy_device_name(p->device));
            return -1;
        }
    }
    int r;
    switch (p->kind) {
    case ARG_ARRAY:
        a = alloy_array_retain(((AlloyPy_Array *)p->obj)->array);
        r = 0;
        break;
    case ARG_DLPACK:
        r = p->xapi ? alloypy_cx_import(p, device, p->device == device ? stream : NULL, what, &a) : 0;
        if (r == 0) r = from_dlpack(p, p->device == device ? stream : NULL, what, &a);
        else if (r > 0) r = 0;
        break;
    default:
        r = from_buffer(p->obj, writable, what, &a);
        break;
    }
    if (r < 0) return -1;
    if (p->device != device) return to_device(a, device, what, out);
    *out = a;
    return 0;
}

PyObject *alloypy_asarray(PyObject *obj, PyObject *device_obj, PyObject *stream_obj) {
    alloypy_probe p;
    alloypy_stream_spec spec;
    alloy_device *device;
    if (alloypy_probe_object(obj, &p, "asarray") < 0) return NULL;
    if (alloypy_device_from_object(device_obj, &device) < 0) return NULL;
    if (alloypy_stream_parse(stream_obj, &spec) < 0) return NULL;
    if (!device && spec.device) device = spec.device;
    if (!device) device = p.device ? p.device : alloypy_default_device();
    if (!device) return NULL;
    if (p.kind == ARG_ARRAY && p.device == device) {
        Py_INCREF(obj);
        return obj;
    }
    AlloyPy_Stream *s = NULL;
    if (alloypy_stream_resolve(&spec, device, &s) < 0) return NULL;
    alloy_array *a;
    if (alloypy_convert(&p, device, alloypy_stream_of((PyObject *)s, device), 0, "asarray", &a) < 0) {
        Py_XDECREF(s);
        return NULL;
    }
    PyObject *r = alloypy_array_wrap(a, (PyObject *)s);
    Py_XDECREF(s);
    return r;
}
