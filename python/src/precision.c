/* precision.c — the `precision` keyword of the ops that take one (matmul,
 * mlstm.chunkwise): "highest", "high" or "default" to alloy_precision. */
#include "alloy_py.h"

int alloypy_precision_from_object(const char *op, PyObject *obj, alloy_precision dflt, alloy_precision *out) {
    if (obj == Py_None) {
        *out = dflt;
        return 0;
    }
    const char *s = PyUnicode_Check(obj) ? PyUnicode_AsUTF8(obj) : NULL;
    if (!s) {
        PyErr_Format(PyExc_TypeError, "%s: precision must be \"highest\", \"high\" or \"default\"", op);
        return -1;
    }
    if (!strcmp(s, "highest")) *out = ALLOY_PRECISION_HIGHEST;
    else if (!strcmp(s, "high")) *out = ALLOY_PRECISION_HIGH;
    else if (!strcmp(s, "default")) *out = ALLOY_PRECISION_DEFAULT;
    else {
        alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT,
                          "%s: precision is '%s'; it must be \"highest\", \"high\" or \"default\"", op, s);
        return -1;
    }
    return 0;
}
