/* device.c — alloy.Device and alloy.Stream, and the streams of other
 * libraries.
 *
 * A Device is a handle on one of the library's devices ("cpu", "cuda:0");
 * one Python object per device. A Stream owns an alloy_stream: a new one
 * (alloy.Stream(device)), or a wrapper of a stream created elsewhere
 * (PyTorch's current stream, a CuPy stream, a raw CUstream handle). Wrappers
 * of raw handles are cached per (device, handle): wrapping a CUDA stream
 * registers it with alloy's allocator, which is too slow for every call.
 * Arrays keep the Stream they were written on alive, so a wrapper outlives
 * its cache entry as long as it is needed. */
#include "alloy_py.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static PyObject *device_objects; /* dict: int(pointer) -> Device */
/* Wrappers of native stream handles, by (device, handle); see alloypy_stream_wrapped. */
#define WRAP_SLOTS 64
static struct wrap_entry {
    alloy_device *device;
    void *native;
    AlloyPy_Stream *stream;
} wrap_table[WRAP_SLOTS];
static int wrap_next, wrap_count;

/* Which attribute holds the handle, per stream type: 0 `cuda_stream`, 1 `ptr`. */
#define ATTR_SLOTS 8
static struct {
    PyTypeObject *type; /* a strong reference */
    int which;
} attr_table[ATTR_SLOTS];

static int attr_kind_of(PyTypeObject *t) {
    for (int i = 0; i < ATTR_SLOTS && attr_table[i].type; i++)
        if (attr_table[i].type == t) return attr_table[i].which;
    return -1;
}

static void remember_attr_kind(PyTypeObject *t, int which) {
    for (int i = 0; i < ATTR_SLOTS; i++)
        if (!attr_table[i].type) {
            Py_INCREF(t);
            attr_table[i].type = t;
            attr_table[i].which = which;
            return;
        }
}
static alloy_device *default_device, *cpu_device;
static PyObject *str_cuda_stream, *str_ptr;

/* ---- Device ---------------------------------------------------------------- */

static PyObject *Device_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    (void)type;
    static char *kwlist[] = {"name", NULL};
    PyObject *name = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:Device", kwlist, &name)) return NULL;
    alloy_device *d;
    if (name == Py_None) {
        d = alloypy_default_device();
        if (!d) return NULL;
    } else if (alloypy_device_from_object(name, &d) < 0) {
        return NULL;
    }
    return alloypy_device_object(d);
}

static PyObject *Device_repr(AlloyPy_Device *self) {
    return PyUnicode_FromFormat("Device(%s)", alloy_device_name(self->device));
}
static PyObject *Device_str(AlloyPy_Device *self) {
    return PyUnicode_FromString(alloy_device_name(self->device));
}
static Py_hash_t Device_hash(AlloyPy_Device *self) {
    Py_hash_t h = (Py_hash_t)((uintptr_t)self->device >> 4);
    return h == -1 ? -2 : h;
}

static PyObject *Device_richcompare(PyObject *a, PyObject *b, int op) {
    if (op != Py_EQ && op != Py_NE) Py_RETURN_NOTIMPLEMENTED;
    alloy_device *x, *y;
    if (Py_TYPE(a) != &AlloyPy_DeviceType) Py_RETURN_NOTIMPLEMENTED;
    x = ((AlloyPy_Device *)a)->device;
    if (Py_TYPE(b) == &AlloyPy_DeviceType) y = ((AlloyPy_Device *)b)->device;
    else if (PyUnicode_Check(b)) {
        if (alloypy_device_from_object(b, &y) < 0) {
            PyErr_Clear();
            return PyBool_FromLong(op == Py_NE);
        }
    } else Py_RETURN_NOTIMPLEMENTED;
    return PyBool_FromLong((x == y) == (op == Py_EQ));
}

static PyObject *Device_get_name(AlloyPy_Device *self, void *c) {
    (void)c;
    return PyUnicode_FromString(alloy_device_name(self->device));
}
static PyObject *Device_get_description(AlloyPy_Device *self, void *c) {
    (void)c;
    return PyUnicode_FromString(alloy_device_description(self->device));
}
static PyObject *Device_get_type(AlloyPy_Device *self, void *c) {
    (void)c;
    return PyUnicode_FromString(alloypy_is_cpu(self->device) ? "cpu" : "cuda");
}
static PyObject *Device_get_index(AlloyPy_Device *self, void *c) {
    (void)c;
    return PyLong_FromLong(alloypy_device_ordinal(self->device));
}

/* what the device can do, as the C API's alloy_device_* calls say it */
static PyObject *Device_get_compute_capability(AlloyPy_Device *self, void *c) {
    (void)c;
    int cc = alloy_device_compute_capability(self->device);
    if (cc <= 0) Py_RETURN_NONE;
    return Py_BuildValue("(ii)", cc / 10, cc % 10);
}
static PyObject *Device_get_multiprocessor_count(AlloyPy_Device *self, void *c) {
    (void)c;
    return PyLong_FromLong(alloy_device_multiprocessor_count(self->device));
}
static PyObject *Device_get_has_tensor_maps(AlloyPy_Device *self, void *c) {
    (void)c;
    return PyBool_FromLong(alloy_device_has_tensor_maps(self->device));
}
static PyObject *Device_get_overlaps_launches(AlloyPy_Device *self, void *c) {
    (void)c;
    return PyBool_FromLong(alloy_device_overlaps_launches(self->device));
}

static PyObject *Device_synchronize(AlloyPy_Device *self, PyObject *unused) {
    (void)unused;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_device_synchronize(self->device);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) return alloypy_raise(st, NULL);
    Py_RETURN_NONE;
}

static PyGetSetDef Device_getset[] = {
    {"name", (getter)Device_get_name, NULL, "'cpu', 'cuda:0', ...", NULL},
    {"description", (getter)Device_get_description, NULL, "human-readable description", NULL},
    {"type", (getter)Device_get_type, NULL, "'cpu' or 'cuda'", NULL},
    {"index", (getter)Device_get_index, NULL, "the ordinal (0 for the CPU)", NULL},
    {"compute_capability", (getter)Device_get_compute_capability, NULL,
     "a CUDA device's compute capability as (major, minor); None for the CPU", NULL},
    {"multiprocessor_count", (getter)Device_get_multiprocessor_count, NULL,
     "a CUDA device's number of streaming multiprocessors; 0 for the CPU", NULL},
    {"has_tensor_maps", (getter)Device_get_has_tensor_maps, NULL,
     "whether kernels launched on the device may carry tensor maps", NULL},
    {"overlaps_launches", (getter)Device_get_overlaps_launches, NULL,
     "whether a launch asking to overlap the previous kernel does overlap here", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef Device_methods[] = {
    {"synchronize", (PyCFunction)Device_synchronize, METH_NOARGS,
     "Waits until all work queued on the device has finished."},
    {NULL, NULL, 0, NULL}};

PyTypeObject AlloyPy_DeviceType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "alloy.Device",
    .tp_basicsize = sizeof(AlloyPy_Device),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Device(name=None): 'cpu', 'cuda', 'cuda:N' or None for the default ('auto': the "
              "best available, ALLOY_DEVICE overrides).",
    .tp_new = Device_new,
    .tp_repr = (reprfunc)Device_repr,
    .tp_str = (reprfunc)Device_str,
    .tp_hash = (hashfunc)Device_hash,
    .tp_richcompare = Device_richcompare,
    .tp_getset = Device_getset,
    .tp_methods = Device_methods,
};

PyObject *alloypy_device_object(alloy_device *d) {
    PyObject *key = PyLong_FromVoidPtr(d);
    if (!key) return NULL;
    PyObject *o = PyDict_GetItemWithError(device_objects, key);
    if (o) {
        Py_DECREF(key);
        Py_INCREF(o);
        return o;
    }
    if (PyErr_Occurred()) {
        Py_DECREF(key);
        return NULL;
    }
    AlloyPy_Device *dev = PyObject_New(AlloyPy_Device, &AlloyPy_DeviceType);
    if (!dev) {
        Py_DECREF(key);
        return NULL;
    }
    dev->device = d;
    if (PyDict_SetItem(device_objects, key, (PyObject *)dev) < 0) {
        Py_DECREF(key);
        Py_DECREF(dev);
        return NULL;
    }
    Py_DECREF(key);
    return (PyObject *)dev;
}

int alloypy_device_from_object(PyObject *obj, alloy_device **out) {
    if (obj == Py_None || !obj) {
        *out = NULL;
        return 0;
    }
    if (Py_TYPE(obj) == &AlloyPy_DeviceType) {
        *out = ((AlloyPy_Device *)obj)->device;
        return 0;
    }
    PyObject *s = NULL;
    if (PyUnicode_Check(obj)) {
        s = obj;
        Py_INCREF(s);
    } else if (PyObject_HasAttrString(obj, "type") && PyObject_HasAttrString(obj, "index")) {
        /* torch.device('cuda', 1) */
        PyObject *t = PyObject_GetAttrString(obj, "type"), *i = PyObject_GetAttrString(obj, "index");
        if (t && i && PyUnicode_Check(t))
            s = i == Py_None ? PyUnicode_FromFormat("%U", t) : PyUnicode_FromFormat("%U:%S", t, i);
        Py_XDECREF(t);
        Py_XDECREF(i);
        if (!s) return -1;
    } else {
        PyErr_Format(PyExc_TypeError, "device must be an alloy.Device or a name such as 'cpu' or "
                                      "'cuda:0', not %.100s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    const char *name = PyUnicode_AsUTF8(s);
    if (!name) {
        Py_DECREF(s);
        return -1;
    }
    alloy_device *d;
    alloy_status st = alloy_device_get(name, &d);
    Py_DECREF(s);
    if (st != ALLOY_OK) {
        alloypy_raise(st, NULL);
        return -1;
    }
    *out = d;
    return 0;
}

alloy_device *alloypy_default_device(void) {
    if (!default_device) {
        alloy_device *d;
        alloy_status st = alloy_device_get("auto", &d);
        if (st != ALLOY_OK) {
            alloypy_raise(st, NULL);
            return NULL;
        }
        default_device = d;
    }
    return default_device;
}

alloy_device *alloypy_cpu_device(void) {
    if (!cpu_device) {
        alloy_device *d;
        alloy_status st = alloy_device_get("cpu", &d);
        if (st != ALLOY_OK) {
            alloypy_raise(st, NULL);
            return NULL;
        }
        cpu_device = d;
    }
    return cpu_device;
}

int alloypy_is_cpu(alloy_device *d) { return alloy_device_backend(d) == ALLOY_BACKEND_CPU; }

int alloypy_device_ordinal(alloy_device *d) {
    const char *colon = strchr(alloy_device_name(d), ':');
    return colon ? atoi(colon + 1) : 0;
}

/* ---- Stream ---------------------------------------------------------------- */

static PyObject *stream_object(alloy_stream *s, alloy_device *d, int owned, PyObject *foreign) {
    AlloyPy_Stream *o = PyObject_New(AlloyPy_Stream, &AlloyPy_StreamType);
    if (!o) {
        if (owned) alloy_stream_free(s);
        return NULL;
    }
    o->stream = s;
    o->device = d;
    o->owned = owned;
    o->foreign = foreign;
    Py_XINCREF(foreign);
    return (PyObject *)o;
}

static PyObject *Stream_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    (void)type;
    static char *kwlist[] = {"device", "native", NULL};
    PyObject *device = Py_None, *native = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:Stream", kwlist, &device, &native)) return NULL;
    alloy_device *d;
    if (alloypy_device_from_object(device, &d) < 0) return NULL;
    if (!d && !(d = alloypy_default_device())) return NULL;
    alloy_stream *s;
    alloy_status st;
    PyObject *foreign = NULL;
    if (native == Py_None) {
        st = alloy_stream_new(d, &s);
    } else {
        alloypy_stream_spec spec;
        if (alloypy_stream_parse(native, &spec) < 0) return NULL;
        if (spec.kind != STREAM_NATIVE) {
            PyErr_SetString(PyExc_TypeError, "native must be a stream handle (int) or an object with "
                                             "`cuda_stream` or `ptr`");
            return NULL;
        }
        st = alloy_stream_wrap(d, spec.native, &s);
        if (!PyLong_Check(native)) foreign = native;
    }
    if (st != ALLOY_OK) return alloypy_raise(st, NULL);
    return stream_object(s, d, 1, foreign);
}

static void Stream_dealloc(AlloyPy_Stream *self) {
    if (self->owned && self->stream) {
        alloy_stream *s = self->stream;
        Py_BEGIN_ALLOW_THREADS
        alloy_stream_free(s);
        Py_END_ALLOW_THREADS
    }
    Py_XDECREF(self->foreign);
    PyObject_Free(self);
}

static PyObject *Stream_repr(AlloyPy_Stream *self) {
    void *h = alloy_stream_native(self->stream);
    return PyUnicode_FromFormat("Stream(%s, handle=%p)", alloy_device_name(self->device), h);
}

static PyObject *Stream_synchronize(AlloyPy_Stream *self, PyObject *unused) {
    (void)unused;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_stream_synchronize(self->stream);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) return alloypy_raise(st, NULL);
    Py_RETURN_NONE;
}

static PyObject *Stream_wait(AlloyPy_Stream *self, PyObject *other) {
    alloypy_stream_spec spec;
    AlloyPy_Stream *o = NULL;
    if (alloypy_stream_parse(other, &spec) < 0) return NULL;
    if (alloypy_stream_resolve(&spec, self->device, &o) < 0) return NULL;
    alloy_stream *sig = o ? o->stream : alloypy_stream_of(NULL, self->device);
    alloy_status st = alloy_stream_wait(self->stream, sig);
    Py_XDECREF(o);
    if (st != ALLOY_OK) return alloypy_raise(st, NULL);
    Py_RETURN_NONE;
}

static PyObject *Stream_get_device(AlloyPy_Stream *self, void *c) {
    (void)c;
    return alloypy_device_object(self->device);
}
static PyObject *Stream_get_handle(AlloyPy_Stream *self, void *c) {
    (void)c;
    return PyLong_FromVoidPtr(alloy_stream_native(self->stream));
}

static PyGetSetDef Stream_getset[] = {
    {"device", (getter)Stream_get_device, NULL, "the stream's device", NULL},
    {"handle", (getter)Stream_get_handle, NULL, "the native handle (CUstream as int; 0 on the CPU)",
     NULL},
    {"cuda_stream", (getter)Stream_get_handle, NULL, "the CUstream as int (PyTorch's name)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef Stream_methods[] = {
    {"synchronize", (PyCFunction)Stream_synchronize, METH_NOARGS,
     "Waits until the work queued on this stream has finished."},
    {"wait", (PyCFunction)Stream_wait, METH_O,
     "wait(other): work queued here from now on waits (on the device) for the work queued on "
     "`other` so far."},
    {NULL, NULL, 0, NULL}};

PyTypeObject AlloyPy_StreamType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "alloy.Stream",
    .tp_basicsize = sizeof(AlloyPy_Stream),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Stream(device=None, native=None): a new in-order queue on the device, or (native=) a "
              "wrapper of a stream created elsewhere (a CUstream handle, torch.cuda.Stream, "
              "cupy.cuda.Stream), which alloy never destroys.",
    .tp_new = Stream_new,
    .tp_dealloc = (destructor)Stream_dealloc,
    .tp_repr = (reprfunc)Stream_repr,
    .tp_getset = Stream_getset,
    .tp_methods = Stream_methods,
};

/* ---- stream arguments ------------------------------------------------------ */

static int handle_of(PyObject *v, void **out) {
    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "a stream handle must be an int, not %.100s", Py_TYPE(v)->tp_name);
        return -1;
    }
    unsigned long long h = PyLong_AsUnsignedLongLong(v);
    if (h == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "a stream handle must be a non-negative int");
        return -1;
    }
    *out = (void *)(uintptr_t)h;
    return 0;
}

int alloypy_stream_parse(PyObject *obj, alloypy_stream_spec *spec) {
    memset(spec, 0, sizeof *spec);
    if (!obj || obj == Py_None) return 0;
    PyTypeObject *t = Py_TYPE(obj);
    if (t == &AlloyPy_StreamType) {
        spec->kind = STREAM_OBJECT;
        spec->object = (AlloyPy_Stream *)obj;
        spec->device = spec->object->device;
        return 0;
    }
    if (t == &AlloyPy_DeviceType || PyUnicode_Check(obj)) {
        spec->kind = STREAM_DEVICE;
        return alloypy_device_from_object(obj, &spec->device);
    }
    if (PyLong_Check(obj)) {
        spec->kind = STREAM_NATIVE;
        return handle_of(obj, &spec->native);
    }
    /* torch.cuda.Stream has `cuda_stream`, cupy.cuda.Stream `ptr`: remember per
     * type which one worked, so that the hot path asks once, without raising
     * (and clearing) an AttributeError for the other. */
    PyObject *h = NULL;
    int which = attr_kind_of(t);
    if (which >= 0) {
        h = PyObject_GetAttr(obj, which == 0 ? str_cuda_stream : str_ptr);
        if (!h) PyErr_Clear(); /* the instance differs from its type's usual: ask both */
    }
    if (!h) {
        which = 0;
        h = PyObject_GetAttr(obj, str_cuda_stream);
        if (!h) {
            PyErr_Clear();
            which = 1;
            h = PyObject_GetAttr(obj, str_ptr);
        }
        if (h) remember_attr_kind(t, which);
    }
    if (!h) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "stream must be an alloy.Stream, a device, a CUstream handle (int) or a stream "
                     "object with `cuda_stream` or `ptr`, not %.100s",
                     t->tp_name);
        return -1;
    }
    spec->kind = STREAM_NATIVE;
    int r = handle_of(h, &spec->native);
    Py_DECREF(h);
    return r;
}

AlloyPy_Stream *alloypy_stream_wrapped(alloy_device *d, void *native) {
    /* A small table searched linearly (the most recent entry first): the hot
     * path wraps the same one or two handles again and again. A wrapper does
     * not own its stream; arrays hold their Stream, so evicting an entry only
     * forgets the wrapper. */
    int n = wrap_count < WRAP_SLOTS ? wrap_count : WRAP_SLOTS;
    for (int k = 0; k < n; k++) {
        int i = (wrap_next - 1 - k + WRAP_SLOTS) % WRAP_SLOTS;
        if (wrap_table[i].device == d && wrap_table[i].native == native) return wrap_table[i].stream;
    }
    alloy_stream *s;
    alloy_status st = alloy_stream_wrap(d, native, &s);
    if (st != ALLOY_OK) {
        alloypy_raise(st, NULL);
        return NULL;
    }
    AlloyPy_Stream *o = (AlloyPy_Stream *)stream_object(s, d, 1, NULL);
    if (!o) return NULL;
    struct wrap_entry *e = &wrap_table[wrap_next];
    PyObject *old = (PyObject *)e->stream;
    e->device = d;
    e->native = native;
    e->stream = o; /* the table holds the reference */
    wrap_next = (wrap_next + 1) % WRAP_SLOTS;
    if (wrap_count < WRAP_SLOTS) wrap_count++;
    Py_XDECREF(old);
    return o;
}

int alloypy_stream_resolve(const alloypy_stream_spec *spec, alloy_device *d, AlloyPy_Stream **out) {
    *out = NULL;
    switch (spec->kind) {
    case STREAM_OBJECT:
        if (spec->object->device != d) {
            alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT, "the stream is on %s but the work runs on %s",
                              alloy_device_name(spec->object->device), alloy_device_name(d));
            return -1;
        }
        Py_INCREF(spec->object);
        *out = spec->object;
        return 0;
    case STREAM_DEVICE:
        if (spec->device != d) {
            alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT, "stream names %s but the work runs on %s",
                              alloy_device_name(spec->device), alloy_device_name(d));
            return -1;
        }
        return 0;
    case STREAM_NATIVE: {
        if (alloypy_is_cpu(d)) return 0; /* every CPU stream is the same in-order executor */
        AlloyPy_Stream *s = alloypy_stream_wrapped(d, spec->native);
        if (!s) return -1;
        Py_INCREF(s);
        *out = s;
        return 0;
    }
    default:
        return 0;
    }
}

alloy_stream *alloypy_stream_of(PyObject *stream, alloy_device *d) {
    if (stream) return ((AlloyPy_Stream *)stream)->stream;
    alloy_stream *s = NULL;
    alloy_stream_default(d, &s);
    return s;
}

int alloypy_device_init(PyObject *m) {
    if (PyType_Ready(&AlloyPy_DeviceType) < 0 || PyType_Ready(&AlloyPy_StreamType) < 0) return -1;
    device_objects = PyDict_New();
    str_cuda_stream = PyUnicode_InternFromString("cuda_stream");
    str_ptr = PyUnicode_InternFromString("ptr");
    if (!device_objects || !str_cuda_stream || !str_ptr) return -1;
    Py_INCREF((PyObject *)&AlloyPy_DeviceType);
    if (PyModule_AddObject(m, "Device", (PyObject *)&AlloyPy_DeviceType) < 0) return -1;
    Py_INCREF((PyObject *)&AlloyPy_StreamType);
    return PyModule_AddObject(m, "Stream", (PyObject *)&AlloyPy_StreamType);
}
