/* errors.c — alloy's statuses as Python exceptions.
 *
 * alloy.Error is the base; each status has a subclass carrying the C
 * library's message (for a compile error: the compiler log with lines mapped
 * to the body). Where a builtin exception means the same thing the subclass
 * derives from it too, so `except ValueError` keeps working for bad
 * arguments and `except MemoryError` for allocation failures. */
#include "alloy_py.h"

#include <stdarg.h>

typedef struct {
    alloy_status status;
    const char *name; /* attribute of the module */
    const char *doc;
} error_info;

static const error_info ERRORS[] = {
    {ALLOY_ERROR_INVALID_ARGUMENT, "InvalidArgumentError",
     "A bad name, shape, dtype, count, size or flag (also a ValueError)."},
    {ALLOY_ERROR_COMPILE, "CompileError",
     "The kernel did not compile; the message holds the compiler log with line numbers of the "
     "body and header."},
    {ALLOY_ERROR_COMPILER_MISSING, "CompilerMissingError",
     "No host C++ compiler (CPU backend) or no NVRTC (CUDA backend)."},
    {ALLOY_ERROR_UNAVAILABLE, "UnavailableError", "The device or backend is not available here."},
    {ALLOY_ERROR_OUT_OF_MEMORY, "OutOfMemoryError", "An allocation failed (also a MemoryError)."},
    {ALLOY_ERROR_LAUNCH, "LaunchError", "The launch failed (fault, barrier divergence, driver)."},
    {ALLOY_ERROR_IO, "FileSystemError", "A file system error: cache, sources (also an OSError)."},
    {ALLOY_ERROR_UNSUPPORTED, "UnsupportedError", "A valid request this backend cannot do."},
    {ALLOY_ERROR_INTERNAL, "InternalError", "A bug in alloy: please report it."},
};
#define N_ERRORS ((int)(sizeof ERRORS / sizeof ERRORS[0]))

static PyObject *error_base;
static PyObject *error_types[N_ERRORS];

PyObject *alloypy_error_type(alloy_status status) {
    for (int i = 0; i < N_ERRORS; i++)
        if (ERRORS[i].status == status) return error_types[i];
    return error_base;
}

int alloypy_errors_init(PyObject *m) {
    error_base = PyErr_NewExceptionWithDoc("alloy.Error",
                                           "Base class of the errors alloy raises; `status` names the "
                                           "C library's status (e.g. 'ALLOY_ERROR_COMPILE').",
                                           NULL, NULL);
    if (!error_base) return -1;
    if (PyObject_SetAttrString(error_base, "status", Py_None) < 0) return -1;
    Py_INCREF(error_base);
    if (PyModule_AddObject(m, "Error", error_base) < 0) return -1;
    for (int i = 0; i < N_ERRORS; i++) {
        PyObject *bases;
        char full[64];
        snprintf(full, sizeof full, "alloy.%s", ERRORS[i].name);
        switch (ERRORS[i].status) {
        case ALLOY_ERROR_INVALID_ARGUMENT: bases = PyTuple_Pack(2, error_base, PyExc_ValueError); break;
        case ALLOY_ERROR_OUT_OF_MEMORY: bases = PyTuple_Pack(2, error_base, PyExc_MemoryError); break;
        case ALLOY_ERROR_IO: bases = PyTuple_Pack(2, error_base, PyExc_OSError); break;
        default: bases = PyTuple_Pack(1, error_base); break;
        }
        if (!bases) return -1;
        PyObject *t = PyErr_NewExceptionWithDoc(full, ERRORS[i].doc, bases, NULL);
        Py_DECREF(bases);
        if (!t) return -1;
        PyObject *sname = PyUnicode_FromString(alloy_status_name(ERRORS[i].status));
        int bad = !sname || PyObject_SetAttrString(t, "status", sname) < 0;
        Py_XDECREF(sname);
        if (bad) return -1;
        error_types[i] = t;
        Py_INCREF(t);
        if (PyModule_AddObject(m, ERRORS[i].name, t) < 0) return -1;
    }
    return 0;
}

PyObject *alloypy_raise(alloy_status status, const char *context) {
    const char *msg = alloy_last_error();
    if (!msg || !*msg) msg = alloy_status_name(status);
    PyObject *type = alloypy_error_type(status);
    if (context) PyErr_Format(type, "%s: %s", context, msg);
    else PyErr_SetString(type, msg);
    return NULL;
}

PyObject *alloypy_raise_fmt(alloy_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (msg) {
        PyErr_SetObject(alloypy_error_type(status), msg);
        Py_DECREF(msg);
    }
    return NULL;
}
