/* nn.c — the C side of alloy.nn (python/alloy/nn.py): soft-cap, the norms
 * and the causal depthwise convolution, forward and backward, each a thin
 * call of the C op of include/alloy/nn.h with the conventions of
 * alloy.mlstm (linalg_ops.h's context): operands read on one device, new
 * results alloy.Array on the stream the op ran on, errors naming the
 * argument. Optional operands (bias, state) are None when absent. */
#include "alloy_py.h"
#include "linalg_ops.h"

/* Opens the context over the operands given (None skipped after the first
 * `required`); ops[j] receives operand j's array or NULL. */
static int open_ops(alloypy_op_ctx *c, const char *name, int n, PyObject **given, const char *const *all_names,
                    int required, PyObject *out_obj, PyObject *stream_obj, alloy_array **ops) {
    PyObject *objs[MAX_OPERANDS];
    const char *names[MAX_OPERANDS];
    int slot[MAX_OPERANDS], k = 0;
    for (int j = 0; j < n; j++) {
        slot[j] = -1;
        if (j >= required && given[j] == Py_None) continue;
        slot[j] = k;
        objs[k] = given[j];
        names[k++] = all_names[j];
    }
    if (alloypy_ctx_open(c, name, k, objs, names, out_obj, stream_obj) < 0) return -1;
    for (int j = 0; j < n; j++) ops[j] = slot[j] >= 0 ? c->in[slot[j]] : NULL;
    return 0;
}

/* A tuple of the results (NULL entries: None); frees the arrays. */
static PyObject *result_tuple(alloypy_op_ctx *c, int n, alloy_array **res) {
    PyObject *t = PyTuple_New(n);
    for (int j = 0; j < n; j++) {
        PyObject *r = NULL;
        if (res[j]) r = alloypy_ctx_wrap(c, &res[j]);
        else {
            Py_INCREF(Py_None);
            r = Py_None;
        }
        if (!r || !t) {
            Py_XDECREF(t);
            t = NULL;
            for (int i = j; i < n; i++) alloy_array_free(res[i]);
            return NULL;
        }
        PyTuple_SET_ITEM(t, j, r);
        alloy_array_free(res[j]);
    }
    return t;
}

/* _nn_softcap(x, cap, dy, out, stream) -> y (dy None) or dx (dy given). */
PyObject *alloypy_nn_softcap(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"x", "cap", "dy", "out", "stream", NULL};
    PyObject *given[2] = {NULL, Py_None}, *out_obj = Py_None, *stream_obj = Py_None;
    double cap = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Od|OOO:_nn_softcap", kw, &given[0], &cap, &given[1], &out_obj,
                                     &stream_obj))
        return NULL;
    static const char *const names[] = {"x", "dy"};
    alloypy_op_ctx c;
    alloy_array *ops[2];
    PyObject *result = NULL;
    if (open_ops(&c, "nn.softcap", 2, given, names, 1, out_obj, stream_obj, ops) == 0) {
        alloy_array *o = c.out;
        alloy_status st;
        Py_BEGIN_ALLOW_THREADS
        st = ops[1] ? alloy_nn_softcap_backward(ops[0], ops[1], cap, c.stream, &o)
                    : alloy_nn_softcap(ops[0], cap, c.stream, &o);
        Py_END_ALLOW_THREADS
        if (st != ALLOY_OK) alloypy_ctx_fail(&c, st);
        else result = alloypy_ctx_result(&c, &o);
    }
    alloypy_ctx_close(&c);
    return result;
}

/* _nn_norm(x, weight, bias, head_dim, eps, rms, out, stream, return_stats) -> y, or (y, stats) with
 * return_stats (the _stats forward: each group's float32 mean and rstd, (R, G, 2)) */
PyObject *alloypy_nn_norm(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"x", "weight", "bias", "head_dim", "eps", "rms", "out", "stream", "return_stats", NULL};
    PyObject *given[3] = {NULL, NULL, Py_None}, *out_obj = Py_None, *stream_obj = Py_None;
    long long head_dim = 0;
    double eps = 1e-5;
    int rms = 0, want_stats = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOLdp|OOp:_nn_norm", kw, &given[0], &given[1], &given[2],
                                     &head_dim, &eps, &rms, &out_obj, &stream_obj, &want_stats))
        return NULL;
    static const char *const names[] = {"x", "weight", "bias"};
    alloypy_op_ctx c;
    alloy_array *ops[3];
    PyObject *result = NULL;
    if (open_ops(&c, rms ? "nn.rms_norm" : "nn.layer_norm", 3, given, names, 2, out_obj, stream_obj, ops) == 0) {
        alloy_array *o = c.out, *stats = NULL;
        alloy_status st;
        Py_BEGIN_ALLOW_THREADS
        if (want_stats)
            st = rms ? alloy_nn_rms_norm_stats(ops[0], ops[1], head_dim, eps, c.stream, &o, &stats)
                     : alloy_nn_layer_norm_stats(ops[0], ops[1], ops[2], head_dim, eps, c.stream, &o, &stats);
        else
            st = rms ? alloy_nn_rms_norm(ops[0], ops[1], head_dim, eps, c.stream, &o) /* bias: None from nn.py */
                     : alloy_nn_layer_norm(ops[0], ops[1], ops[2], head_dim, eps, c.stream, &o);
        Py_END_ALLOW_THREADS
        if (st != ALLOY_OK) alloypy_ctx_fail(&c, st);
        else if (!want_stats) result = alloypy_ctx_result(&c, &o);
        else {
            PyObject *y = alloypy_ctx_result(&c, &o), *s = y ? alloypy_ctx_wrap(&c, &stats) : NULL;
            if (y && s) result = PyTuple_Pack(2, y, s);
            Py_XDECREF(y);
            Py_XDECREF(s);
        }
        alloy_array_free(stats);
    }
    alloypy_ctx_close(&c);
    return result;
}

/* _nn_norm_backward(x, weight, dy, head_dim, eps, rms, stream, stats) -> (dx, dweight, dbias or None); stats
 * given (not None): the _stats backward from those statistics (eps unused) */
PyObject *alloypy_nn_norm_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"x", "weight", "dy", "head_dim", "eps", "rms", "stream", "stats", NULL};
    PyObject *given[4] = {NULL, NULL, NULL, Py_None}, *stream_obj = Py_None;
    long long head_dim = 0;
    double eps = 1e-5;
    int rms = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOLdp|OO:_nn_norm_backward", kw, &given[0], &given[1], &given[2],
                                     &head_dim, &eps, &rms, &stream_obj, &given[3]))
        return NULL;
    static const char *const names[] = {"x", "weight", "dy", "stats"};
    alloypy_op_ctx c;
    alloy_array *ops[4];
    PyObject *result = NULL;
    if (open_ops(&c, rms ? "nn.rms_norm_backward" : "nn.layer_norm_backward", 4, given, names, 3, Py_None,
                 stream_obj, ops) == 0) {
        alloy_array *res[3] = {NULL, NULL, NULL};
        alloy_status st;
        Py_BEGIN_ALLOW_THREADS
        if (ops[3])
            st = rms ? alloy_nn_rms_norm_backward_stats(ops[0], ops[1], ops[2], ops[3], head_dim, c.stream, &res[0],
                                                        &res[1])
                     : alloy_nn_layer_norm_backward_stats(ops[0], ops[1], ops[2], ops[3], head_dim, c.stream, &res[0],
                                                          &res[1], &res[2]);
        else
            st = rms ? alloy_nn_rms_norm_backward(ops[0], ops[1], ops[2], head_dim, eps, c.stream, &res[0], &res[1])
                     : alloy_nn_layer_norm_backward(ops[0], ops[1], ops[2], head_dim, eps, c.stream, &res[0], &res[1],
                                                    &res[2]);
        Py_END_ALLOW_THREADS
        if (st != ALLOY_OK) alloypy_ctx_fail(&c, st);
        else result = result_tuple(&c, 3, res);
    }
    alloypy_ctx_close(&c);
    return result;
}

/* _nn_causal_conv1d(x, w, bias, state, return_state, stream) -> (y, state_out or None) */
PyObject *alloypy_nn_causal_conv1d(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"x", "w", "bias", "state", "return_state", "stream", NULL};
    PyObject *given[4] = {NULL, NULL, Py_None, Py_None}, *stream_obj = Py_None;
    int return_state = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOp|O:_nn_causal_conv1d", kw, &given[0], &given[1], &given[2],
                                     &given[3], &return_state, &stream_obj))
        return NULL;
    static const char *const names[] = {"x", "w", "bias", "state"};
    alloypy_op_ctx c;
    alloy_array *ops[4];
    PyObject *result = NULL;
    if (open_ops(&c, "nn.causal_conv1d", 4, given, names, 2, Py_None, stream_obj, ops) == 0) {
        alloy_array *res[2] = {NULL, NULL};
        alloy_status st;
        Py_BEGIN_ALLOW_THREADS
        st = alloy_nn_causal_conv1d(ops[0], ops[1], ops[2], ops[3], c.stream, &res[0], return_state ? &res[1] : NULL);
        Py_END_ALLOW_THREADS
        if (st != ALLOY_OK) alloypy_ctx_fail(&c, st);
        else result = result_tuple(&c, 2, res);
    }
    alloypy_ctx_close(&c);
    return result;
}

/* _nn_causal_conv1d_backward(x, w, state, dy, stream) -> (dx, dw, db, dstate or None) */
PyObject *alloypy_nn_causal_conv1d_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"x", "w", "state", "dy", "stream", NULL};
    PyObject *given[4] = {NULL, NULL, Py_None, NULL}, *stream_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOO|O:_nn_causal_conv1d_backward", kw, &given[0], &given[1],
                                     &given[2], &given[3], &stream_obj))
        return NULL;
    /* dy is required: move it before the optional state */
    PyObject *ordered[4] = {given[0], given[1], given[3], given[2]};
    static const char *const names[] = {"x", "w", "dy", "state"};
    alloypy_op_ctx c;
    alloy_array *ops[4];
    PyObject *result = NULL;
    if (open_ops(&c, "nn.causal_conv1d_backward", 4, ordered, names, 3, Py_None, stream_obj, ops) == 0) {
        alloy_array *res[4] = {NULL, NULL, NULL, NULL};
        alloy_status st;
        Py_BEGIN_ALLOW_THREADS
        st = alloy_nn_causal_conv1d_backward(ops[0], ops[1], ops[3], ops[2], c.stream, &res[0], &res[1], &res[2],
                                             &res[3]);
        Py_END_ALLOW_THREADS
        if (st != ALLOY_OK) alloypy_ctx_fail(&c, st);
        else result = result_tuple(&c, 4, res);
    }
    alloypy_ctx_close(&c);
    return result;
}
