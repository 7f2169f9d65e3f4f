/* linalg_qr.c — the C side of alloy.linalg's QR family
 * (python/alloy/linalg.py): qr, lstsq, orthogonal and orthonormalize, each a
 * thin call of the C op of include/alloy/linalg.h ("QR, least squares,
 * orthogonal matrices") with linalg_factor.c's conventions (linalg_ops.h):
 * operands read on one device, `out` written in place and returned as
 * given, results alloy.Array on the stream the op ran on, `info` returned
 * and never read here.
 *
 * Two things differ from the C API, to match NumPy: mode "raw" returns h
 * transposed, (..., n, m) as numpy.linalg.qr's Fortran-ordered h (one small
 * kernel on the op's stream writes the row-contiguous transpose); and
 * lstsq's b broadcasts as numpy.linalg.solve's does (1-D: one vector for
 * every matrix). */
#include "alloy_py.h"
#include "linalg_ops.h"

#include <stdint.h>
#include <string.h>

/* ---- mode "raw": h (..., m, n) -> (..., n, m) -------------------------------- */

static alloy_kernel *transpose_kernel;

/* A new row-contiguous array holding the transpose of the last two dimensions
 * of the row-contiguous h, written on `stream`. */
static alloy_status transpose_last2(alloy_array *h, alloy_stream *stream, alloy_array **out) {
    if (!transpose_kernel) return ALLOY_ERROR_INTERNAL;
    const int nd = alloy_array_ndim(h);
    const int64_t *hs = alloy_array_shape(h);
    const int64_t count = alloy_array_size(h);
    if (count > (int64_t)UINT32_MAX) return ALLOY_ERROR_UNSUPPORTED;
    int64_t shape[ALLOY_MAX_NDIM];
    memcpy(shape, hs, sizeof(int64_t) * (size_t)nd);
    shape[nd - 2] = hs[nd - 1];
    shape[nd - 1] = hs[nd - 2];
    alloy_launch *l = NULL;
    alloy_status st = alloy_launch_new(&l);
    if (st == ALLOY_OK) st = alloy_launch_add_output(l, nd, shape, alloy_array_dtype(h));
    if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)count, 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, count < 256 ? (count > 0 ? (uint32_t)count : 1) : 256, 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "count", ALLOY_UINT32, count);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "rows", ALLOY_UINT32, hs[nd - 2]);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "cols", ALLOY_UINT32, hs[nd - 1]);
    if (st == ALLOY_OK) st = alloy_kernel_apply(transpose_kernel, 1, &h, l, stream, out);
    alloy_launch_free(l);
    return st;
}

/* Makes the transposing kernel (under the GIL, once). */
static int make_transpose_kernel(void) {
    if (transpose_kernel) return 0;
    static const char *const ins[] = {"h"}, *const outs[] = {"t"};
    /* t[b, j, i] = h[b, i, j]; i over rows, j over cols of h */
    alloy_status st = alloy_kernel_new("alloy_linalg_transpose", 1, ins, 1, outs,
                                       "uint e = thread_position_in_grid.x;\n"
                                       "if (e < count) {\n"
                                       "    uint per = rows * cols, b = e / per, k = e - b * per;\n"
                                       "    uint j = k / rows, i = k - j * rows;\n"
                                       "    t[e] = h[b * per + i * cols + j];\n"
                                       "}\n",
                                       NULL, 1, 0, &transpose_kernel);
    if (st != ALLOY_OK) {
        alloypy_raise(st, "the transpose kernel");
        return -1;
    }
    return 0;
}

/* ---- the operations ------------------------------------------------------------ */

/* _qr(a, mode, stream) -> (q or None, r); mode an alloy_qr_mode. Raw: (h
 * transposed to (..., n, m), tau). */
PyObject *alloypy_qr(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"a", "mode", "stream", NULL};
    PyObject *ao, *stream_obj = Py_None;
    int mode = ALLOY_QR_REDUCED;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|iO:_qr", kw, &ao, &mode, &stream_obj)) return NULL;
    if (mode == ALLOY_QR_RAW && make_transpose_kernel() < 0) return NULL;
    static const char *const names[] = {"a"};
    alloypy_op_ctx c;
    PyObject *result = NULL;
    if (alloypy_ctx_open(&c, "qr", 1, &ao, names, Py_None, stream_obj) < 0) goto done;
    alloy_array *q = NULL, *r = NULL, *ht = NULL;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_qr(c.in[0], (alloy_qr_mode)mode, c.stream, mode == ALLOY_QR_R ? NULL : &q, &r);
    if (st == ALLOY_OK && mode == ALLOY_QR_RAW) st = transpose_last2(q, c.stream, &ht);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) {
        alloypy_ctx_fail(&c, st);
    } else {
        if (ht) {
            alloy_array_free(q);
            q = ht;
        }
        PyObject *rq = q ? alloypy_ctx_wrap(&c, &q) : (Py_INCREF(Py_None), Py_None);
        PyObject *rr = rq ? alloypy_ctx_wrap(&c, &r) : NULL;
        if (rq && rr) result = PyTuple_Pack(2, rq, rr);
        Py_XDECREF(rq);
        Py_XDECREF(rr);
    }
    alloy_array_free(q);
    alloy_array_free(r);
done:
    alloypy_ctx_close(&c);
    return result;
}

/* _lstsq(a, b, rcond, out, stream) -> (x, info); rcond < 0: the default. */
PyObject *alloypy_lstsq(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"a", "b", "rcond", "out", "stream", NULL};
    PyObject *objs[2], *out_obj = Py_None, *stream_obj = Py_None;
    double rcond = -1.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|dOO:_lstsq", kw, &objs[0], &objs[1], &rcond, &out_obj,
                                     &stream_obj))
        return NULL;
    static const char *const names[] = {"a", "b"};
    alloypy_op_ctx c;
    PyObject *result = NULL;
    if (alloypy_ctx_open(&c, "lstsq", 2, objs, names, out_obj, stream_obj) < 0) goto done;
    if (alloypy_broadcast_solve_operands(&c, 0, -1, 1) < 0) goto done;
    alloy_lstsq_options o;
    alloy_lstsq_options_init(&o);
    o.rcond = rcond;
    alloy_array *x = c.out, *info = NULL;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_lstsq(c.in[0], c.in[1], &o, c.stream, &x, &info);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) {
        alloypy_ctx_fail(&c, st);
        goto done;
    }
    result = alloypy_ctx_result_info(&c, &x, &info);
done:
    alloypy_ctx_close(&c);
    return result;
}

/* _orthonormalize(a, out, stream) -> q */
PyObject *alloypy_orthonormalize(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"a", "out", "stream", NULL};
    PyObject *ao, *out_obj = Py_None, *stream_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:_orthonormalize", kw, &ao, &out_obj, &stream_obj))
        return NULL;
    static const char *const names[] = {"a"};
    alloypy_op_ctx c;
    PyObject *result = NULL;
    if (alloypy_ctx_open(&c, "orthonormalize", 1, &ao, names, out_obj, stream_obj) < 0) goto done;
    alloy_array *q = c.out;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_orthonormalize(c.in[0], c.stream, &q);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) alloypy_ctx_fail(&c, st);
    else result = alloypy_ctx_result(&c, &q);
done:
    alloypy_ctx_close(&c);
    return result;
}

/* _orthogonal(shape, gain, seed, dtype, device, out, stream) -> w; dtype None:
 * out's, else float32; device None: out's, else the stream's, else the
 * default device. */
PyObject *alloypy_orthogonal(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"shape", "gain", "seed", "dtype", "device", "out", "stream", NULL};
    PyObject *shape_obj, *seed_obj = NULL, *dtype_obj = Py_None, *device_obj = Py_None, *out_obj = Py_None,
                         *stream_obj = Py_None;
    double gain = 1.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|dOOOOO:_orthogonal", kw, &shape_obj, &gain, &seed_obj,
                                     &dtype_obj, &device_obj, &out_obj, &stream_obj))
        return NULL;
    alloy_orthogonal_options o;
    alloy_orthogonal_options_init(&o);
    o.gain = gain;
    if (seed_obj && seed_obj != Py_None) {
        if (!PyLong_Check(seed_obj)) {
            PyErr_Format(PyExc_TypeError, "orthogonal: seed must be an int, not %s", Py_TYPE(seed_obj)->tp_name);
            return NULL;
        }
        unsigned long long v = PyLong_AsUnsignedLongLong(seed_obj);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT,
                                     "orthogonal: seed must be an integer in [0, 2**64)");
        }
        o.seed = (uint64_t)v;
    }
    PyObject *seq = PySequence_Fast(shape_obj, "orthogonal: shape must be a sequence of integers");
    if (!seq) return NULL;
    const Py_ssize_t nd = PySequence_Fast_GET_SIZE(seq);
    if (nd > ALLOY_MAX_NDIM) {
        Py_DECREF(seq);
        return alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT, "orthogonal: shape has %zd dimensions; at most %d", nd,
                                 ALLOY_MAX_NDIM);
    }
    int64_t shape[ALLOY_MAX_NDIM];
    for (Py_ssize_t i = 0; i < nd; i++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
        shape[i] = v; /* a negative one: the C op explains */
    }
    Py_DECREF(seq);
    alloy_device *dev = NULL;
    if (alloypy_device_from_object(device_obj, &dev) < 0) return NULL;
    alloypy_probe out_probe;
    if (out_obj != Py_None && alloypy_probe_object(out_obj, &out_probe, "orthogonal: out") < 0) return NULL;
    alloypy_stream_spec spec;
    if (alloypy_stream_parse(stream_obj, &spec) < 0) return NULL;
    if (!dev && out_obj != Py_None) dev = out_probe.device;
    if (!dev) dev = spec.device;
    if (!dev && !(dev = alloypy_default_device())) return NULL;
    AlloyPy_Stream *sobj = NULL;
    if (alloypy_stream_resolve(&spec, dev, &sobj) < 0) return NULL;
    alloy_stream *stream = alloypy_stream_of((PyObject *)sobj, dev);
    alloy_array *out = NULL;
    PyObject *result = NULL;
    if (out_obj != Py_None && alloypy_convert(&out_probe, dev, stream, 1, "orthogonal: out", &out) < 0) goto done;
    alloy_dtype dt = ALLOY_FLOAT32;
    if (dtype_obj != Py_None) {
        if (alloypy_dtype_from_object(dtype_obj, &dt) < 0) goto done;
    } else if (out) {
        dt = alloy_array_dtype(out);
    }
    alloy_array *w = out;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_orthogonal(dev, dt, (int)nd, shape, &o, stream, &w);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) {
        alloypy_raise(st, NULL);
    } else if (out) {
        Py_INCREF(out_obj);
        result = out_obj;
    } else {
        result = alloypy_array_wrap(w, (PyObject *)sobj);
    }
done:
    alloy_array_free(out);
    Py_XDECREF(sobj);
    return result;
}
