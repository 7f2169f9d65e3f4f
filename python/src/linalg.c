/* linalg.c — the C side of alloy.linalg (python/alloy/linalg.py): matmul on
 * alloy_matmul. Operands are any arrays alloy takes (DLPack, NumPy, alloy
 * arrays), read in place on their device; `out` is written in place and
 * returned as given. */
#include "alloy_py.h"

/* _matmul(a, b, out=None, transpose_a=False, transpose_b=False, alpha=1.0,
 *         beta=0.0, precision="highest", dtype=None, stream=None) */
PyObject *alloypy_matmul(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"a", "b", "out", "transpose_a", "transpose_b", "alpha", "beta", "precision", "dtype",
                         "stream", NULL};
    PyObject *ao, *bo, *out_obj = Py_None, *prec_obj = Py_None, *dtype_obj = Py_None, *stream_obj = Py_None;
    int ta = 0, tb = 0;
    double alpha = 1.0, beta = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OppddOOO:matmul", kw, &ao, &bo, &out_obj, &ta, &tb,
                                     &alpha, &beta, &prec_obj, &dtype_obj, &stream_obj))
        return NULL;
    alloy_matmul_options o;
    alloy_matmul_options_init(&o);
    o.transpose_a = ta;
    o.transpose_b = tb;
    o.alpha = alpha;
    o.beta = beta;
    if (alloypy_precision_from_object("matmul", prec_obj, ALLOY_PRECISION_HIGHEST, &o.precision) < 0) return NULL;
    if (dtype_obj != Py_None) {
        if (alloypy_dtype_from_object(dtype_obj, &o.out_dtype) < 0) return NULL;
        o.out_dtype_set = 1;
    }
    alloypy_probe pa, pb, po;
    if (alloypy_probe_object(ao, &pa, "matmul: a") < 0 || alloypy_probe_object(bo, &pb, "matmul: b") < 0)
        return NULL;
    if (out_obj != Py_None && alloypy_probe_object(out_obj, &po, "matmul: out") < 0) return NULL;
    /* the device: the stream's, out's, then the first operand not on the CPU */
    alloypy_stream_spec spec;
    if (alloypy_stream_parse(stream_obj, &spec) < 0) return NULL;
    alloy_device *dev = spec.device;
    if (!dev && out_obj != Py_None) dev = po.device;
    if (!dev && pa.device && !alloypy_is_cpu(pa.device)) dev = pa.device;
    if (!dev && pb.device && !alloypy_is_cpu(pb.device)) dev = pb.device;
    if (!dev) dev = pa.device ? pa.device : pb.device;
    if (!dev && !(dev = alloypy_default_device())) return NULL;
    AlloyPy_Stream *sobj = NULL;
    if (alloypy_stream_resolve(&spec, dev, &sobj) < 0) return NULL;
    alloy_stream *stream = alloypy_stream_of((PyObject *)sobj, dev);
    alloy_array *a = NULL, *b = NULL, *c = NULL;
    PyObject *result = NULL;
    if (alloypy_convert(&pa, dev, stream, 0, "matmul: a", &a) < 0) goto done;
    if (alloypy_convert(&pb, dev, stream, 0, "matmul: b", &b) < 0) goto done;
    if (out_obj != Py_None && alloypy_convert(&po, dev, stream, 1, "matmul: out", &c) < 0) goto done;
    alloy_array *given = c;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_matmul(a, b, &o, stream, &c);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) {
        alloypy_raise(st, NULL);
        goto done;
    }
    if (given) {
        result = out_obj; /* written in place: returned as given */
        Py_INCREF(result);
    } else {
        result = alloypy_array_wrap(c, (PyObject *)sobj);
        c = NULL;
    }
done:
    alloy_array_free(a);
    alloy_array_free(b);
    alloy_array_free(c);
    Py_XDECREF(sobj);
    return result;
}
