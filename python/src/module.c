/* module.c — the extension module `alloy._alloy`: its functions (metal_kernel,
 * asarray, devices, synchronisation, the disk cache) and its initialisation.
 * alloy's warnings (e.g. "grid counts threads") become Python warnings of
 * class alloy.AlloyWarning, so they can be filtered and tested. */
#include "alloy_py.h"

static PyObject *warning_type;
static PyObject *helpers_module;

PyObject *alloypy_helper(const char *name) {
    if (!helpers_module && !(helpers_module = PyImport_ImportModule("alloy._convert"))) return NULL;
    PyObject *f = PyObject_GetAttrString(helpers_module, name);
    if (f) Py_DECREF(f); /* the module keeps it alive */
    return f;
}

static int is_finalizing(void) {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

/* May be called from a thread that released the GIL (inside a launch). */
static void warning_handler(const char *message, void *user) {
    (void)user;
    if (!Py_IsInitialized() || is_finalizing() || !warning_type) {
        fprintf(stderr, "alloy: %s\n", message);
        return;
    }
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (PyErr_WarnEx(warning_type, message, 1) < 0) PyErr_WriteUnraisable(warning_type);
    PyErr_Restore(type, value, tb);
    PyGILState_Release(g);
}

/* ---- functions ---------------------------------------------------------------- */

static PyObject *py_asarray(PyObject *m, PyObject *args, PyObject *kwargs) {
    (void)m;
    static char *kwlist[] = {"obj", "device", "stream", NULL};
    PyObject *obj, *device = Py_None, *stream = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OO:asarray", kwlist, &obj, &device, &stream))
        return NULL;
    return alloypy_asarray(obj, device, stream);
}

static PyObject *py_dtype(PyObject *m, PyObject *obj) {
    (void)m;
    alloy_dtype d;
    if (alloypy_dtype_from_object(obj, &d) < 0) return NULL;
    PyObject *r = alloypy_dtype_object(d);
    Py_INCREF(r);
    return r;
}

static PyObject *py_default_device(PyObject *m, PyObject *unused) {
    (void)m, (void)unused;
    alloy_device *d = alloypy_default_device();
    return d ? alloypy_device_object(d) : NULL;
}

static PyObject *py_synchronize(PyObject *m, PyObject *args, PyObject *kwargs) {
    (void)m;
    static char *kwlist[] = {"device", NULL};
    PyObject *obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:synchronize", kwlist, &obj)) return NULL;
    alloy_status st;
    if (Py_TYPE(obj) == &AlloyPy_StreamType) {
        alloy_stream *s = ((AlloyPy_Stream *)obj)->stream;
        Py_BEGIN_ALLOW_THREADS
        st = alloy_stream_synchronize(s);
        Py_END_ALLOW_THREADS
    } else {
        alloy_device *d;
        if (alloypy_device_from_object(obj, &d) < 0) return NULL;
        if (!d && !(d = alloypy_default_device())) return NULL;
        Py_BEGIN_ALLOW_THREADS
        st = alloy_device_synchronize(d);
        Py_END_ALLOW_THREADS
    }
    if (st != ALLOY_OK) return alloypy_raise(st, NULL);
    Py_RETURN_NONE;
}

static PyObject *py_backends(PyObject *m, PyObject *unused) {
    (void)m, (void)unused;
    int n = alloy_backend_count();
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < n; i++) {
        const char *name = NULL, *detail = NULL;
        int available = 0;
        if (alloy_backend_info(i, &name, &available, &detail) != ALLOY_OK) continue;
        PyObject *t = Py_BuildValue("(sOs)", name ? name : "", available ? Py_True : Py_False,
                                    detail ? detail : "");
        if (!t || PyList_Append(list, t) < 0) Py_CLEAR(list);
        Py_XDECREF(t);
    }
    return list;
}

static PyObject *py_cache_dir(PyObject *m, PyObject *unused) {
    (void)m, (void)unused;
    const char *d = alloy_cache_dir();
    if (!d) Py_RETURN_NONE;
    return PyUnicode_DecodeFSDefault(d);
}

static PyObject *py_cache_stats(PyObject *m, PyObject *unused) {
    (void)m, (void)unused;
    int64_t entries = 0, bytes = 0;
    alloy_status st = alloy_cache_stats(&entries, &bytes);
    if (st != ALLOY_OK) return alloypy_raise(st, NULL);
    return Py_BuildValue("{sLsL}", "entries", (long long)entries, "bytes", (long long)bytes);
}

static PyObject *py_cache_clear(PyObject *m, PyObject *unused) {
    (void)m, (void)unused;
    alloy_status st = alloy_cache_clear();
    if (st != ALLOY_OK) return alloypy_raise(st, NULL);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"metal_kernel", (PyCFunction)(void (*)(void))alloypy_metal_kernel, METH_VARARGS | METH_KEYWORDS,
     "metal_kernel(name, input_names, output_names, source, header='', ensure_row_contiguous=True, "
     "atomic_outputs=False)\n\nA body-only kernel with the semantics of MLX's mx.fast.metal_kernel. "
     "Nothing is compiled until the first call."},
    {"_empty", (PyCFunction)(void (*)(void))alloypy_empty, METH_VARARGS | METH_KEYWORDS,
     "_empty(shape, dtype, device=None): an uninitialised array (alloy.empty)."},
    {"_fill", alloypy_fill, METH_VARARGS, "_fill(array, value): sets every element (alloy.full)."},
    {"_matmul", (PyCFunction)(void (*)(void))alloypy_matmul, METH_VARARGS | METH_KEYWORDS,
     "_matmul(a, b, out=None, ...): alloy.linalg.matmul."},
#define LINALG_FN(name, doc) {"_" #name, (PyCFunction)(void (*)(void))alloypy_##name, METH_VARARGS | METH_KEYWORDS, doc}
    LINALG_FN(cholesky, "_cholesky(a, upper, out, stream) -> (factor, info): alloy.linalg.cholesky."),
    LINALG_FN(cholesky_solve, "_cholesky_solve(factor, b, upper, out, stream): alloy.linalg.cholesky_solve."),
    LINALG_FN(solve_triangular, "_solve_triangular(a, b, lower, transpose, unit_diagonal, right, out, stream)."),
    LINALG_FN(lu_factor, "_lu_factor(a, zero_based, stream) -> (lu, pivots, info): alloy.linalg.lu_factor."),
    LINALG_FN(lu_solve, "_lu_solve(lu, pivots, b, transpose, zero_based, out, stream): alloy.linalg.lu_solve."),
    LINALG_FN(solve, "_solve(a, b, out, stream) -> (x, info): alloy.linalg.solve."),
    LINALG_FN(inv, "_inv(a, out, stream) -> (inverse, info): alloy.linalg.inv."),
    LINALG_FN(det, "_det(a, stream): alloy.linalg.det."),
    LINALG_FN(slogdet, "_slogdet(a, stream) -> (sign, logabsdet): alloy.linalg.slogdet."),
    LINALG_FN(qr, "_qr(a, mode, stream) -> (q or None, r), raw: (h (..., n, m), tau): alloy.linalg.qr."),
    LINALG_FN(lstsq, "_lstsq(a, b, rcond, out, stream) -> (x, info): alloy.linalg.lstsq."),
    LINALG_FN(orthogonal, "_orthogonal(shape, gain, seed, dtype, device, out, stream): alloy.linalg.orthogonal."),
    LINALG_FN(orthonormalize, "_orthonormalize(a, out, stream): alloy.linalg.orthonormalize."),
    LINALG_FN(eigh, "_eigh(a, upper, compute_vectors, max_sweeps, stream) -> (w, v or None, info): alloy.linalg.eigh."),
    LINALG_FN(svd, "_svd(a, full_matrices, compute_uv, max_sweeps, stream) -> (u or None, s, vh or None, info): "
                   "alloy.linalg.svd."),
    LINALG_FN(mlstm_step, "_mlstm_step(q, k, v, i, f, c, n, m, eps, h_out, c_out, n_out, m_out, stream) -> "
                          "(h, c, n, m): alloy.mlstm.step."),
    LINALG_FN(mlstm_parallel, "_mlstm_parallel(q, k, v, i, f, eps, out, stream) -> h: alloy.mlstm.parallel."),
    LINALG_FN(mlstm_chunkwise, "_mlstm_chunkwise(q, k, v, i, f, c_initial, n_initial, m_initial, cu_seqlens, "
                               "chunk_size, eps, return_last_states, out, stream) -> h or (h, c, n, m): "
                               "alloy.mlstm.chunkwise."),
    LINALG_FN(mlstm_chunkwise_backward, "_mlstm_chunkwise_backward(q, k, v, i, f, c_initial, n_initial, m_initial, "
                                        "cu_seqlens, dh, dc_final, dn_final, dm_final, chunk_size, eps, stream, method) -> (dq, dk, dv, "
                                        "di, df, dc_initial, dn_initial, dm_initial): "
                                        "alloy.mlstm.chunkwise_backward."),
    LINALG_FN(nn_softcap, "_nn_softcap(x, cap, dy, out, stream) -> y, or dx when dy is given: alloy.nn.softcap."),
    LINALG_FN(nn_norm, "_nn_norm(x, weight, bias, head_dim, eps, rms, out, stream, return_stats) -> y, or (y, stats): "
                       "alloy.nn.rms_norm, layer_norm."),
    LINALG_FN(nn_norm_backward, "_nn_norm_backward(x, weight, dy, head_dim, eps, rms, stream, stats) -> (dx, dweight, "
                                "dbias or None): alloy.nn.*_norm_backward."),
    LINALG_FN(nn_causal_conv1d, "_nn_causal_conv1d(x, w, bias, state, return_state, stream) -> (y, state or None): "
                                "alloy.nn.causal_conv1d."),
    LINALG_FN(nn_causal_conv1d_backward, "_nn_causal_conv1d_backward(x, w, state, dy, stream) -> (dx, dw, db, dstate "
                                         "or None): alloy.nn.causal_conv1d_backward."),
#undef LINALG_FN
    {"_info_failures", alloypy_info_failures, METH_O,
     "_info_failures(info) -> [(flat index, code)] of the non-zero codes (waits for the stream)."},
    {"parse_kernel_file", (PyCFunction)(void (*)(void))alloypy_parse_kernel_file,
     METH_VARARGS | METH_KEYWORDS,
     "parse_kernel_file(text, path=None)\n\nThe pieces of a kernel file as a dict (the library's "
     "parser; errors are InvalidArgumentError with 'path:line: why')."},
    {"asarray", (PyCFunction)(void (*)(void))py_asarray, METH_VARARGS | METH_KEYWORDS,
     "asarray(obj, *, device=None, stream=None)\n\nAn alloy.Array viewing obj's memory (no copy on "
     "its own device; CPU memory is copied when device names a GPU). obj: anything with __dlpack__ "
     "or the buffer protocol, or a Python scalar."},
    {"dtype", py_dtype, METH_O,
     "dtype(obj): the alloy.Dtype of a NumPy/PyTorch dtype, a name ('bfloat16', 'f32', 'half') or an "
     "alloy.Dtype."},
    {"default_device", py_default_device, METH_NOARGS,
     "The device launches use when nothing else decides ('auto': ALLOY_DEVICE, else a GPU, else "
     "the CPU)."},
    {"synchronize", (PyCFunction)(void (*)(void))py_synchronize, METH_VARARGS | METH_KEYWORDS,
     "synchronize(device=None): waits for all work queued on the device (or on a Stream)."},
    {"backends", py_backends, METH_NOARGS,
     "[(name, available, detail)] for each backend of this build."},
    {"cache_dir", py_cache_dir, METH_NOARGS, "The disk cache directory, or None when disabled."},
    {"cache_stats", py_cache_stats, METH_NOARGS, "{'entries': n, 'bytes': n} of the disk cache."},
    {"cache_clear", py_cache_clear, METH_NOARGS, "Deletes every entry of the disk cache."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "alloy._alloy",
    "The C extension behind the `alloy` package (see alloy's docs/python.md).", -1, module_methods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__alloy(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (alloypy_errors_init(m) < 0 || alloypy_dtype_init(m) < 0 || alloypy_device_init(m) < 0 ||
        alloypy_array_init(m) < 0 || alloypy_kernel_init(m) < 0 || alloypy_convert_init() < 0 ||
        alloypy_cx_init(m) < 0)
        goto fail;
    warning_type = PyErr_NewExceptionWithDoc("alloy.AlloyWarning",
                                             "Warnings from alloy (e.g. that the grid counts threads).",
                                             PyExc_UserWarning, NULL);
    if (!warning_type) goto fail;
    Py_INCREF(warning_type);
    if (PyModule_AddObject(m, "AlloyWarning", warning_type) < 0) goto fail;
    if (PyModule_AddStringConstant(m, "__version__", alloy_version()) < 0) goto fail;
    if (PyModule_AddIntConstant(m, "kDLCPU", kDLCPU) < 0 || PyModule_AddIntConstant(m, "kDLCUDA", kDLCUDA) < 0)
        goto fail;
    alloy_set_warning_handler(warning_handler, NULL);
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
