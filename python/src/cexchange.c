/* cexchange.c — the consumer side of the DLPack C exchange API (DLPack 1.2+:
 * a producer type carries `__dlpack_c_exchange_api__`, a PyCapsule named
 * "dlpack_exchange_api" holding a table of C functions). PyTorch's
 * Tensor.__dlpack__ and __dlpack_device__ are Python code that costs
 * microseconds per tensor; through the table a tensor is probed and imported
 * by two C calls.
 *
 * The table's conversions do no stream ordering ("no_sync"): the consumer
 * does what __dlpack__(stream=s) would have done, here: ask the producer for
 * its current work stream on the tensor's device and, when it differs from
 * the stream alloy launches on, make alloy's stream wait for it (an event).
 *
 * Everything is guarded: the capsule's name, a version of major 1 and minor
 * >= 2 (found along the header's prev_api chain), the function pointers the
 * path needs; any mismatch or failure of the producer's function falls back
 * to __dlpack__, which then reports the error itself. The tables we declare
 * here are our own declarations of the published layout.
 *
 * Modes (alloy._alloy._c_exchange_mode(m)): 0 off (ALLOY_PY_NO_C_EXCHANGE=1
 * at import), 1 the default: probing through the table, importing through
 * it for GPU memory only (CPU producers keep their __dlpack__, which is C in
 * NumPy), 2 also CPU memory (for the tests, which have no GPU). A fake
 * producer for the tests lives at the end of the file. */
#include "alloy_py.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the published layout (our declarations) ----------------------------- */

typedef struct cx_header {
    DLPackVersion version;
    struct cx_header *prev_api;
} cx_header;

typedef void (*cx_set_error)(void *ctx, const char *kind, const char *message);
typedef struct alloypy_xapi {
    cx_header header;
    int (*managed_tensor_allocator)(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                                    cx_set_error set_error);
    int (*managed_tensor_from_py_object_no_sync)(void *py_object, DLManagedTensorVersioned **out);
    int (*managed_tensor_to_py_object_no_sync)(DLManagedTensorVersioned *tensor, void **out_py_object);
    int (*dltensor_from_py_object_no_sync)(void *py_object, DLTensor *out);
    int (*current_work_stream)(DLDeviceType device_type, int32_t device_id, void **out_stream);
} alloypy_xapi;

static const char CAPSULE_NAME[] = "dlpack_exchange_api";
static PyObject *str_attr;
static int mode = 1;

/* ---- per-type lookup -------------------------------------------------------- */

#define TYPE_SLOTS 64
static struct {
    PyTypeObject *type;  /* strong reference */
    PyObject *capsule;   /* strong reference: keeps the table alive; NULL when none */
    const alloypy_xapi *api;
} types[TYPE_SLOTS];
static int n_types;
static int next_victim; /* round-robin replacement once the table is full */

static const alloypy_xapi *validate(PyObject *cap) {
    if (!cap || !PyCapsule_CheckExact(cap) || !PyCapsule_IsValid(cap, CAPSULE_NAME)) return NULL;
    const cx_header *h = PyCapsule_GetPointer(cap, CAPSULE_NAME);
    for (int depth = 0; h && depth < 8; depth++, h = h->prev_api) {
        if (h->version.major != 1) continue;
        if (h->version.minor < 2) return NULL;
        const alloypy_xapi *api = (const alloypy_xapi *)h;
        if (!api->managed_tensor_from_py_object_no_sync || !api->current_work_stream) return NULL;
        return api;
    }
    return NULL;
}

const alloypy_xapi *alloypy_cx_lookup(PyTypeObject *t) {
    if (!mode) return NULL;
    for (int i = 0; i < n_types; i++)
        if (types[i].type == t) return types[i].api;
    PyObject *cap = PyObject_GetAttr((PyObject *)t, str_attr);
    if (!cap) PyErr_Clear();
    const alloypy_xapi *api = validate(cap);
    if (!api) Py_CLEAR(cap);
    int slot = n_types;
    if (n_types == TYPE_SLOTS) {
        /* Full (many short-lived producer types): replace one entry. The API
         * tables themselves are the producers' static data, so dropping our
         * reference to an old capsule cannot invalidate a call in flight. */
        slot = next_victim;
        next_victim = (next_victim + 1) % TYPE_SLOTS;
        Py_CLEAR(types[slot].capsule);
        Py_CLEAR(types[slot].type);
    } else {
        n_types++;
    }
    Py_INCREF(t);
    types[slot].type = t;
    types[slot].capsule = cap;
    types[slot].api = api;
    return api;
}

int alloypy_cx_probe(const alloypy_xapi *api, PyObject *obj, int *dl_type, int *dl_id) {
    if (!api->dltensor_from_py_object_no_sync) return 0;
    DLTensor t;
    memset(&t, 0, sizeof t);
    if (api->dltensor_from_py_object_no_sync(obj, &t) != 0) {
        PyErr_Clear();
        return 0;
    }
    *dl_type = (int)t.device.device_type;
    *dl_id = (int)t.device.device_id;
    return 1;
}

static int is_gpu_type(int t) { return t == kDLCUDA || t == kDLCUDAManaged; }

/* The legacy default stream has two spellings (NULL and CU_STREAM_LEGACY). */
static void *canonical(void *h) { return (uintptr_t)h == 1 ? NULL : h; }

int alloypy_cx_import(const alloypy_probe *p, alloy_device *device, alloy_stream *stream, const char *what,
                      alloy_array **out) {
    const alloypy_xapi *api = p->xapi;
    int gpu = is_gpu_type(p->dl_type);
    if (!api || !mode || (!gpu && mode < 2)) return 0;
    if (gpu) {
        if (!stream) return 0; /* not on the launch device: the slow path decides */
        void *cur = NULL;
        if (api->current_work_stream((DLDeviceType)p->dl_type, p->dl_id, &cur) != 0) {
            PyErr_Clear();
            return 0;
        }
        if (canonical(cur) != canonical(alloy_stream_native(stream))) {
            /* What the producer queued on its stream comes before our launch. */
            AlloyPy_Stream *w = alloypy_stream_wrapped(device, cur);
            if (!w) { /* e.g. a stream of another context: let __dlpack__ handle it */
                PyErr_Clear();
                return 0;
            }
            alloy_status st = alloy_stream_wait(stream, w->stream);
            if (st != ALLOY_OK) {
                alloypy_raise(st, what);
                return -1;
            }
        }
    }
    DLManagedTensorVersioned *t = NULL;
    if (api->managed_tensor_from_py_object_no_sync(p->obj, &t) != 0 || !t) {
        PyErr_Clear();
        return 0;
    }
    alloy_status st = alloy_array_from_dlpack(t, out);
    if (st != ALLOY_OK) {
        if (t->deleter) t->deleter(t); /* still ours on failure */
        alloypy_raise(st, what);
        return -1;
    }
    return 1;
}

/* ---- module functions --------------------------------------------------------- */

static PyObject *cx_mode(PyObject *self, PyObject *args) {
    (void)self;
    int m = -1;
    if (!PyArg_ParseTuple(args, "|i:_c_exchange_mode", &m)) return NULL;
    int old = mode;
    if (m >= 0) {
        if (m > 2) {
            PyErr_SetString(PyExc_ValueError, "mode is 0 (off), 1 (GPU memory) or 2 (all memory)");
            return NULL;
        }
        mode = m;
    }
    return PyLong_FromLong(old);
}

static PyObject *cx_supported(PyObject *self, PyObject *type) {
    (void)self;
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "_c_exchange_supported takes a type");
        return NULL;
    }
    int old = mode;
    mode = mode ? mode : 1;
    const alloypy_xapi *api = alloypy_cx_lookup((PyTypeObject *)type);
    mode = old;
    return PyBool_FromLong(api != NULL);
}

/* A fake producer for the tests: its objects have `_alloy_fake_inner`, a NumPy
 * array (or anything with __dlpack__), whose capsule the functions take. */
static long fake_calls[3]; /* managed, dltensor, current_work_stream */
static PyObject *str_inner;

static DLManagedTensorVersioned *fake_take(void *obj) {
    PyObject *inner = PyObject_GetAttr((PyObject *)obj, str_inner);
    if (!inner) return NULL;
    PyObject *meth = PyObject_GetAttrString(inner, "__dlpack__");
    Py_DECREF(inner);
    if (!meth) return NULL;
    PyObject *kw = Py_BuildValue("{s(ii)}", "max_version", 1, 0);
    PyObject *noargs = PyTuple_New(0);
    PyObject *cap = kw && noargs ? PyObject_Call(meth, noargs, kw) : NULL;
    Py_XDECREF(kw);
    Py_XDECREF(noargs);
    Py_DECREF(meth);
    if (!cap) return NULL;
    DLManagedTensorVersioned *t = NULL;
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        t = PyCapsule_GetPointer(cap, "dltensor_versioned");
        PyCapsule_SetName(cap, "used_dltensor_versioned");
    } else {
        PyErr_SetString(PyExc_BufferError, "fake producer: no versioned capsule");
    }
    Py_DECREF(cap);
    return t;
}

static int fake_managed(void *obj, DLManagedTensorVersioned **out) {
    fake_calls[0]++;
    return (*out = fake_take(obj)) ? 0 : -1;
}

static int fake_dltensor(void *obj, DLTensor *out) {
    fake_calls[1]++;
    DLManagedTensorVersioned *t = fake_take(obj);
    if (!t) return -1;
    out->device = t->dl_tensor.device; /* enough for a probe; the views die with t */
    out->ndim = t->dl_tensor.ndim;
    out->dtype = t->dl_tensor.dtype;
    if (t->deleter) t->deleter(t);
    return 0;
}

static int fake_stream(DLDeviceType type, int32_t id, void **out) {
    (void)type;
    (void)id;
    fake_calls[2]++;
    *out = NULL;
    return 0;
}

static alloypy_xapi fake_api = {
    {{1, 3}, NULL}, NULL, fake_managed, NULL, fake_dltensor, fake_stream};
static alloypy_xapi fake_api_old = {{{1, 1}, NULL}, NULL, fake_managed, NULL, fake_dltensor, fake_stream};
static alloypy_xapi fake_api_newer = {{{2, 0}, &fake_api.header}, NULL, NULL, NULL, NULL, NULL};

static PyObject *cx_fake(PyObject *self, PyObject *args) {
    (void)self;
    const char *kind = "ok";
    if (!PyArg_ParseTuple(args, "|s:_test_exchange_api", &kind)) return NULL;
    if (!strcmp(kind, "ok")) return PyCapsule_New(&fake_api, CAPSULE_NAME, NULL);
    if (!strcmp(kind, "chained")) return PyCapsule_New(&fake_api_newer, CAPSULE_NAME, NULL);
    if (!strcmp(kind, "old")) return PyCapsule_New(&fake_api_old, CAPSULE_NAME, NULL);
    if (!strcmp(kind, "badname")) return PyCapsule_New(&fake_api, "not_dlpack_exchange_api", NULL);
    PyErr_SetString(PyExc_ValueError, "kind: ok, chained, old, badname");
    return NULL;
}

static PyObject *cx_fake_calls(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return Py_BuildValue("(lll)", fake_calls[0], fake_calls[1], fake_calls[2]);
}

static PyMethodDef cx_methods[] = {
    {"_c_exchange_mode", cx_mode, METH_VARARGS,
     "_c_exchange_mode([m]) -> the previous mode. 0: never use the DLPack C exchange API; 1 (default): "
     "probe through it, import GPU memory through it; 2: import CPU memory through it too."},
    {"_c_exchange_supported", cx_supported, METH_O,
     "_c_exchange_supported(type): whether alloy found a usable __dlpack_c_exchange_api__ on the type."},
    {"_test_exchange_api", cx_fake, METH_VARARGS, "a fake producer's capsule (tests)"},
    {"_test_exchange_calls", cx_fake_calls, METH_NOARGS, "calls of the fake producer's functions (tests)"},
    {NULL, NULL, 0, NULL}};

int alloypy_cx_init(PyObject *m) {
    const char *off = getenv("ALLOY_PY_NO_C_EXCHANGE");
    if (off && *off && strcmp(off, "0") != 0) mode = 0;
    str_attr = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
    str_inner = PyUnicode_InternFromString("_alloy_fake_inner");
    if (!str_attr || !str_inner) return -1;
    return PyModule_AddFunctions(m, cx_methods);
}
