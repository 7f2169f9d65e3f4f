/* linalg_eig.c — the C side of alloy.linalg's symmetric eigendecomposition
 * and SVD (python/alloy/linalg.py): eigh and svd, each a thin call of the C
 * op of include/alloy/linalg.h ("Symmetric eigendecomposition and SVD") with
 * linalg_factor.c's conventions (linalg_ops.h): the operand read on one
 * device, results alloy.Array on the stream the op ran on, `info` returned
 * and never read here (the Python layer's check=True reads it through
 * _info_failures). No `out=`: NumPy's eigh and svd have none. */
#include "alloy_py.h"
#include "linalg_ops.h"

/* _eigh(a, upper, compute_vectors, max_sweeps, stream) -> (w, v or None,
 * info); max_sweeps 0: the C default. */
PyObject *alloypy_eigh(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"a", "upper", "compute_vectors", "max_sweeps", "stream", NULL};
    PyObject *ao, *stream_obj = Py_None;
    int upper = 0, vectors = 1, sweeps = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|ppiO:_eigh", kw, &ao, &upper, &vectors, &sweeps, &stream_obj))
        return NULL;
    static const char *const names[] = {"a"};
    alloypy_op_ctx c;
    PyObject *result = NULL;
    if (alloypy_ctx_open(&c, "eigh", 1, &ao, names, Py_None, stream_obj) < 0) goto done;
    alloy_eigh_options o;
    alloy_eigh_options_init(&o);
    o.upper = upper;
    o.compute_vectors = vectors;
    o.max_sweeps = sweeps;
    alloy_array *w = NULL, *v = NULL, *info = NULL;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_eigh(c.in[0], &o, c.stream, &w, vectors ? &v : NULL, &info);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) {
        alloypy_ctx_fail(&c, st);
    } else {
        PyObject *rw = alloypy_ctx_wrap(&c, &w);
        PyObject *rv = !rw ? NULL : v ? alloypy_ctx_wrap(&c, &v) : (Py_INCREF(Py_None), Py_None);
        PyObject *ri = rv ? alloypy_ctx_wrap(&c, &info) : NULL;
        if (rw && rv && ri) result = PyTuple_Pack(3, rw, rv, ri);
        Py_XDECREF(rw);
        Py_XDECREF(rv);
        Py_XDECREF(ri);
    }
    alloy_array_free(w);
    alloy_array_free(v);
    alloy_array_free(info);
done:
    alloypy_ctx_close(&c);
    return result;
}

/* _svd(a, full_matrices, compute_uv, max_sweeps, stream) -> (u or None, s,
 * vh or None, info); max_sweeps 0: the C default. */
PyObject *alloypy_svd(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"a", "full_matrices", "compute_uv", "max_sweeps", "stream", NULL};
    PyObject *ao, *stream_obj = Py_None;
    int full = 1, uv = 1, sweeps = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|ppiO:_svd", kw, &ao, &full, &uv, &sweeps, &stream_obj))
        return NULL;
    static const char *const names[] = {"a"};
    alloypy_op_ctx c;
    PyObject *result = NULL;
    if (alloypy_ctx_open(&c, "svd", 1, &ao, names, Py_None, stream_obj) < 0) goto done;
    alloy_svd_options o;
    alloy_svd_options_init(&o);
    o.full_matrices = full;
    o.compute_uv = uv;
    o.max_sweeps = sweeps;
    alloy_array *u = NULL, *s = NULL, *vh = NULL, *info = NULL;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_svd(c.in[0], &o, c.stream, uv ? &u : NULL, &s, uv ? &vh : NULL, &info);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) {
        alloypy_ctx_fail(&c, st);
    } else {
        PyObject *ru = u ? alloypy_ctx_wrap(&c, &u) : (Py_INCREF(Py_None), Py_None);
        PyObject *rs = ru ? alloypy_ctx_wrap(&c, &s) : NULL;
        PyObject *rv = !rs ? NULL : vh ? alloypy_ctx_wrap(&c, &vh) : (Py_INCREF(Py_None), Py_None);
        PyObject *ri = rv ? alloypy_ctx_wrap(&c, &info) : NULL;
        if (ru && rs && rv && ri) result = PyTuple_Pack(4, ru, rs, rv, ri);
        Py_XDECREF(ru);
        Py_XDECREF(rs);
        Py_XDECREF(rv);
        Py_XDECREF(ri);
    }
    alloy_array_free(u);
    alloy_array_free(s);
    alloy_array_free(vh);
    alloy_array_free(info);
done:
    alloypy_ctx_close(&c);
    return result;
}
