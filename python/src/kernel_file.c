/* kernel_file.c — alloy._alloy.parse_kernel_file: the library's kernel file
 * parser (include/alloy/kernel_file.h) for the Python package, so Python
 * reads kernel files with exactly the rules and messages of the C side. */
#include "alloy_py.h"

/* {'name', 'inputs', 'outputs', 'template': [(name, value)], flags,
 * 'header' (or None), 'header_line', 'body', 'body_line'} */
static PyObject *file_dict(const alloy_kernel_file *f) {
    PyObject *inputs = PyList_New(0), *outputs = PyList_New(0), *templates = PyList_New(0);
    PyObject *d = NULL;
    if (!inputs || !outputs || !templates) goto done;
    for (int i = 0; i < alloy_kernel_file_n_inputs(f); i++) {
        PyObject *s = PyUnicode_FromString(alloy_kernel_file_inputs(f)[i]);
        if (!s || PyList_Append(inputs, s)) { Py_XDECREF(s); goto done; }
        Py_DECREF(s);
    }
    for (int i = 0; i < alloy_kernel_file_n_outputs(f); i++) {
        PyObject *s = PyUnicode_FromString(alloy_kernel_file_outputs(f)[i]);
        if (!s || PyList_Append(outputs, s)) { Py_XDECREF(s); goto done; }
        Py_DECREF(s);
    }
    for (int i = 0; i < alloy_kernel_file_n_templates(f); i++) {
        alloy_kernel_file_template t;
        if (alloy_kernel_file_template_at(f, i, &t) != ALLOY_OK) {
            alloypy_raise(ALLOY_ERROR_INTERNAL, NULL);
            goto done;
        }
        PyObject *v;
        if (t.kind == ALLOY_KERNEL_FILE_TEMPLATE_BOOL) v = PyBool_FromLong((long)t.ivalue);
        else if (t.kind == ALLOY_KERNEL_FILE_TEMPLATE_INT) v = PyLong_FromLongLong((long long)t.ivalue);
        else {
            v = alloypy_dtype_object(t.dtype);
            Py_XINCREF(v);
        }
        PyObject *pair = v ? Py_BuildValue("(sN)", t.name, v) : NULL;
        if (!pair || PyList_Append(templates, pair)) { Py_XDECREF(pair); goto done; }
        Py_DECREF(pair);
    }
    const char *header = alloy_kernel_file_header(f);
    d = Py_BuildValue("{s:s,s:s,s:O,s:O,s:O,s:O,s:O,s:z,s:i,s:s,s:i}", "path", alloy_kernel_file_path(f),
                      "name", alloy_kernel_file_name(f), "inputs", inputs, "outputs", outputs,
                      "template", templates, "ensure_row_contiguous",
                      alloy_kernel_file_ensure_row_contiguous(f) ? Py_True : Py_False, "atomic_outputs",
                      alloy_kernel_file_atomic_outputs(f) ? Py_True : Py_False, "header", header,
                      "header_line", alloy_kernel_file_header_line(f), "body", alloy_kernel_file_body(f),
                      "body_line", alloy_kernel_file_body_line(f));
done:
    Py_XDECREF(inputs);
    Py_XDECREF(outputs);
    Py_XDECREF(templates);
    return d;
}

PyObject *alloypy_parse_kernel_file(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"text", "path", NULL};
    const char *text, *path = NULL;
    Py_ssize_t len;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s#|z:parse_kernel_file", kw, &text, &len, &path))
        return NULL;
    alloy_kernel_file *f = NULL;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_kernel_file_parse(text, (size_t)len, path, &f);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) return alloypy_raise(st, NULL);
    PyObject *d = file_dict(f);
    alloy_kernel_file_free(f);
    return d;
}
