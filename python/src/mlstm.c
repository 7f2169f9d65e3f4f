/* mlstm.c — the C side of alloy.mlstm (python/alloy/mlstm.py): step,
 * parallel, chunkwise and chunkwise's backward, each a thin call of the C op of include/alloy/mlstm.h with the
 * conventions of alloy.linalg's ops (linalg_ops.h): operands read on one
 * device, given outputs written in place and returned as given, new
 * results alloy.Array on the stream the op ran on. The shapes, dtypes and
 * the in-place rules are the C API's; its errors name the argument.
 *
 * A state updated in place is the same Python object as input and output:
 * it is converted twice (read, and written), both views of one memory, which
 * is what the C op's in-place rule asks (its two launches never read a state
 * after writing it). An output that would need a copy (a NumPy array for a
 * CUDA call) is refused by the conversion, so nothing is written to a copy. */
#include "alloy_py.h"
#include "linalg_ops.h"

#include <stdio.h>
#include <string.h>

/* _mlstm_step(q, k, v, i, f, c, n, m, eps, h_out, c_out, n_out, m_out, stream)
 * -> (h, c, n, m); an *_out None: a new array. */
PyObject *alloypy_mlstm_step(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"q",     "k",     "v",     "i",     "f",      "c", "n", "m", "eps",
                         "h_out", "c_out", "n_out", "m_out", "stream", NULL};
    PyObject *objs[8], *outs[4] = {Py_None, Py_None, Py_None, Py_None}, *stream_obj = Py_None;
    double eps = 1e-6;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOO|dOOOOO:_mlstm_step", kw, &objs[0], &objs[1], &objs[2],
                                     &objs[3], &objs[4], &objs[5], &objs[6], &objs[7], &eps, &outs[0], &outs[1],
                                     &outs[2], &outs[3], &stream_obj))
        return NULL;
    static const char *const names[] = {"q", "k", "v", "i", "f", "c", "n", "m"};
    static const char *const out_names[] = {"out h", "out c", "out n", "out m"};
    alloypy_op_ctx c;
    PyObject *result = NULL;
    alloy_array *states[3] = {NULL, NULL, NULL}; /* the converted state outputs given */
    if (alloypy_ctx_open(&c, "mlstm.step", 8, objs, names, outs[0], stream_obj) < 0) goto done;
    for (int j = 0; j < 3; j++) {
        if (outs[j + 1] == Py_None) continue;
        char what[64];
        snprintf(what, sizeof what, "mlstm.step: %s", out_names[j + 1]);
        alloypy_probe p;
        if (alloypy_probe_object(outs[j + 1], &p, what) < 0) goto done;
        if (alloypy_convert(&p, c.dev, c.stream, 1, what, &states[j]) < 0) goto done;
    }
    alloy_array *h = c.out, *co = states[0], *no = states[1], *mo = states[2];
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_mlstm_step(c.in[0], c.in[1], c.in[2], c.in[3], c.in[4], c.in[5], c.in[6], c.in[7], eps, c.stream, &h,
                          &co, &no, &mo);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) {
        alloypy_ctx_fail(&c, st);
        goto done;
    }
    PyObject *r[4] = {NULL, NULL, NULL, NULL};
    alloy_array *made[3] = {co, no, mo};
    r[0] = alloypy_ctx_result(&c, &h);
    for (int j = 0; j < 3; j++) {
        if (states[j]) {
            made[j] = NULL; /* it is states[j], freed below */
            Py_INCREF(outs[j + 1]);
            r[j + 1] = outs[j + 1];
        } else if (r[j]) {
            r[j + 1] = alloypy_ctx_wrap(&c, &made[j]);
        }
    }
    if (r[0] && r[1] && r[2] && r[3]) result = PyTuple_Pack(4, r[0], r[1], r[2], r[3]);
    for (int j = 0; j < 4; j++) Py_XDECREF(r[j]);
    alloy_array_free(h);
    for (int j = 0; j < 3; j++) alloy_array_free(made[j]);
done:
    for (int j = 0; j < 3; j++) alloy_array_free(states[j]);
    alloypy_ctx_close(&c);
    return result;
}

/* _mlstm_parallel(q, k, v, i, f, eps, out, stream) -> h */
PyObject *alloypy_mlstm_parallel(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"q", "k", "v", "i", "f", "eps", "out", "stream", NULL};
    PyObject *objs[5], *out_obj = Py_None, *stream_obj = Py_None;
    double eps = 1e-6;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOO|dOO:_mlstm_parallel", kw, &objs[0], &objs[1], &objs[2],
                                     &objs[3], &objs[4], &eps, &out_obj, &stream_obj))
        return NULL;
    static const char *const names[] = {"q", "k", "v", "i", "f"};
    alloypy_op_ctx c;
    PyObject *result = NULL;
    if (alloypy_ctx_open(&c, "mlstm.parallel", 5, objs, names, out_obj, stream_obj) < 0) goto done;
    alloy_array *h = c.out;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_mlstm_parallel(c.in[0], c.in[1], c.in[2], c.in[3], c.in[4], eps, c.stream, &h);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) alloypy_ctx_fail(&c, st);
    else result = alloypy_ctx_result(&c, &h);
done:
    alloypy_ctx_close(&c);
    return result;
}

/* _mlstm_chunkwise(q, k, v, i, f, c_initial, n_initial, m_initial, cu_seqlens,
 * chunk_size, eps, return_last_states, out, stream, precision, keep) -> h,
 * or (h, c, n, m) when return_last_states, or with keep (h, c, n, m, kept0,
 * ..., kept8): alloy_mlstm_chunkwise_keep's chunk record (None where a slot
 * stayed NULL); the optional operands None: absent. */
PyObject *alloypy_mlstm_chunkwise(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"q",          "k",   "v",     "i",     "f",      "c_initial", "n_initial", "m_initial",
                         "cu_seqlens", "chunk_size", "eps", "return_last_states", "out", "stream", "precision",
                         "keep",       NULL};
    PyObject *given[9] = {NULL}, *out_obj = Py_None, *stream_obj = Py_None, *prec_obj = Py_None;
    int chunk_size = 0, last_states = 0, keep = 0;
    double eps = 1e-6;
    given[5] = given[6] = given[7] = given[8] = Py_None;
    alloy_precision precision = ALLOY_PRECISION_HIGH;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOO|OOOOidpOOOp:_mlstm_chunkwise", kw, &given[0], &given[1],
                                     &given[2], &given[3], &given[4], &given[5], &given[6], &given[7], &given[8],
                                     &chunk_size, &eps, &last_states, &out_obj, &stream_obj, &prec_obj, &keep) ||
        alloypy_precision_from_object("mlstm.chunkwise", prec_obj, ALLOY_PRECISION_HIGH, &precision) < 0)
        return NULL;
    static const char *const all_names[] = {"q", "k", "v", "i", "f", "c_initial", "n_initial", "m_initial",
                                            "cu_seqlens"};
    /* the operands given, converted together; slot[j]: operand j's place in them (-1: absent) */
    PyObject *objs[9];
    const char *names[9];
    int slot[9], n = 0;
    for (int j = 0; j < 9; j++) {
        slot[j] = -1;
        if (j >= 5 && given[j] == Py_None) continue;
        slot[j] = n;
        objs[n] = given[j];
        names[n++] = all_names[j];
    }
    alloypy_op_ctx c;
    PyObject *result = NULL;
    if (alloypy_ctx_open(&c, "mlstm.chunkwise", n, objs, names, out_obj, stream_obj) < 0) goto done;
    alloy_array *ops[9];
    for (int j = 0; j < 9; j++) ops[j] = slot[j] >= 0 ? c.in[slot[j]] : NULL;
    alloy_array *h = c.out, *co = NULL, *no = NULL, *mo = NULL, *kept[ALLOY_MLSTM_KEPT] = {NULL};
    alloy_status st;
    if (keep) last_states = 1; /* the backward from the record reads the final states */
    Py_BEGIN_ALLOW_THREADS
    if (keep)
        st = alloy_mlstm_chunkwise_keep(ops[0], ops[1], ops[2], ops[3], ops[4], ops[5], ops[6], ops[7], ops[8],
                                        chunk_size, eps, precision, c.stream, &h, &co, &no, &mo, kept);
    else
        st = alloy_mlstm_chunkwise_with_precision(ops[0], ops[1], ops[2], ops[3], ops[4], ops[5], ops[6], ops[7],
                                                  ops[8], chunk_size, eps, precision, c.stream, &h,
                                                  last_states ? &co : NULL, last_states ? &no : NULL,
                                                  last_states ? &mo : NULL);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) {
        alloypy_ctx_fail(&c, st);
        goto done;
    }
    if (keep) { /* (h, c, n, m, kept0, ..., kept8) */
        enum { NMADE = 3 + ALLOY_MLSTM_KEPT };
        alloy_array *made[NMADE] = {co, no, mo};
        for (int j = 0; j < ALLOY_MLSTM_KEPT; j++) made[3 + j] = kept[j];
        PyObject *r[NMADE + 1] = {NULL};
        r[0] = alloypy_ctx_result(&c, &h);
        int ok = r[0] != NULL;
        for (int j = 0; j < NMADE && ok; j++) {
            if (!made[j]) {
                Py_INCREF(Py_None);
                r[j + 1] = Py_None;
            } else if (!(r[j + 1] = alloypy_ctx_wrap(&c, &made[j]))) {
                ok = 0;
            }
        }
        if (ok && (result = PyTuple_New(NMADE + 1)) != NULL)
            for (int j = 0; j <= NMADE; j++) PyTuple_SET_ITEM(result, j, r[j]), r[j] = NULL;
        for (int j = 0; j <= NMADE; j++) Py_XDECREF(r[j]);
        for (int j = 0; j < NMADE; j++) alloy_array_free(made[j]);
        alloy_array_free(h);
        goto done;
    }
    PyObject *r[4] = {NULL, NULL, NULL, NULL};
    r[0] = alloypy_ctx_result(&c, &h);
    if (!last_states) {
        result = r[0];
    } else {
        alloy_array *made[3] = {co, no, mo};
        for (int j = 0; j < 3; j++)
            if (r[j]) r[j + 1] = alloypy_ctx_wrap(&c, &made[j]);
        if (r[0] && r[1] && r[2] && r[3]) result = PyTuple_Pack(4, r[0], r[1], r[2], r[3]);
        for (int j = 0; j < 4; j++) Py_XDECREF(r[j]);
        for (int j = 0; j < 3; j++) alloy_array_free(made[j]);
    }
    alloy_array_free(h);
done:
    alloypy_ctx_close(&c);
    return result;
}

/* _mlstm_chunkwise_backward(q, k, v, i, f, c_initial, n_initial, m_initial,
 * cu_seqlens, dh, dc_final, dn_final, dm_final, chunk_size, eps, stream,
 * method, h, c_last, n_last, kept) -> (dq, dk, dv, di, df, dc_initial,
 * dn_initial, dm_initial); the last three None without initial states.
 * method: "auto", "exact", "chunked" or "chunked_default"
 * (alloy_mlstm_backward_method); kept (the record tuple of
 * _mlstm_chunkwise(keep=True), None in its empty slots) with h, c_last,
 * n_last: the backward from that record (alloy_mlstm_chunkwise_backward_kept). */
PyObject *alloypy_mlstm_chunkwise_backward(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"q",         "k",          "v",  "i",        "f",        "c_initial",
                         "n_initial", "m_initial",  "cu_seqlens", "dh", "dc_final", "dn_final",
                         "dm_final",  "chunk_size", "eps",        "stream", "method", "h", "c_last", "n_last",
                         "kept",      NULL};
    /* operands: the 13 above, then h, c_last, n_last and the kept arrays (the forward's record) */
    enum { NOPS = 16 + ALLOY_MLSTM_KEPT };
    PyObject *given[NOPS] = {NULL}, *stream_obj = Py_None, *kept_obj = Py_None;
    int chunk_size = 0;
    double eps = 1e-6;
    const char *method_name = "auto";
    for (int j = 5; j < NOPS; j++) given[j] = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOOOO|OOOidOsOOOO:_mlstm_chunkwise_backward", kw,
                                     &given[0], &given[1], &given[2], &given[3], &given[4], &given[5], &given[6],
                                     &given[7], &given[8], &given[9], &given[10], &given[11], &given[12], &chunk_size,
                                     &eps, &stream_obj, &method_name, &given[13], &given[14], &given[15], &kept_obj))
        return NULL;
    const int from_kept = kept_obj != Py_None;
    if (from_kept) {
        if (!PyTuple_Check(kept_obj) || PyTuple_GET_SIZE(kept_obj) != ALLOY_MLSTM_KEPT)
            return PyErr_Format(PyExc_TypeError,
                                "mlstm.chunkwise_backward: kept must be the tuple of %d arrays chunkwise_keep returned",
                                ALLOY_MLSTM_KEPT);
        for (int j = 0; j < ALLOY_MLSTM_KEPT; j++) given[16 + j] = PyTuple_GET_ITEM(kept_obj, j);
        if (given[14] == Py_None || given[15] == Py_None)
            return PyErr_Format(PyExc_ValueError,
                                "mlstm.chunkwise_backward: with kept, c_last and n_last (the forward's final states) "
                                "must be given");
        if (strcmp(method_name, "auto") && strcmp(method_name, "chunked") && strcmp(method_name, "chunked_default"))
            return PyErr_Format(PyExc_ValueError,
                                "mlstm.chunkwise_backward: kept is the chunk-parallel backward's record; method is "
                                "'%s' (with kept it must be 'auto', or 'chunked' / 'chunked_default' as the record "
                                "was kept)",
                                method_name);
    }
    alloy_mlstm_backward_method method;
    if (!strcmp(method_name, "auto")) method = ALLOY_MLSTM_BACKWARD_AUTO;
    else if (!strcmp(method_name, "exact")) method = ALLOY_MLSTM_BACKWARD_EXACT;
    else if (!strcmp(method_name, "chunked")) method = ALLOY_MLSTM_BACKWARD_CHUNKED;
    else if (!strcmp(method_name, "chunked_default")) method = ALLOY_MLSTM_BACKWARD_CHUNKED_DEFAULT;
    else
        return PyErr_Format(PyExc_ValueError,
                            "mlstm.chunkwise_backward: method is '%s'; it must be 'auto', 'exact', 'chunked' or "
                            "'chunked_default'",
                            method_name);
    if (given[9] == Py_None) return PyErr_Format(PyExc_ValueError, "mlstm.chunkwise_backward: dh is None");
    static const char *const all_names[] = {"q",         "k",         "v",          "i",       "f",
                                            "c_initial", "n_initial", "m_initial",  "cu_seqlens", "dh",
                                            "dc_final",  "dn_final",  "dm_final",   "h",       "c_last",
                                            "n_last",    "kept[0]",   "kept[1]",    "kept[2]", "kept[3]",
                                            "kept[4]",   "kept[5]",   "kept[6]",    "kept[7]", "kept[8]"};
    PyObject *objs[NOPS];
    const char *names[NOPS];
    int slot[NOPS], n = 0;
    for (int j = 0; j < NOPS; j++) {
        slot[j] = -1;
        if (given[j] == Py_None) continue;
        slot[j] = n;
        objs[n] = given[j];
        names[n++] = all_names[j];
    }
    alloypy_op_ctx c;
    PyObject *result = NULL;
    if (alloypy_ctx_open(&c, "mlstm.chunkwise_backward", n, objs, names, Py_None, stream_obj) < 0) goto done;
    alloy_array *ops[NOPS];
    for (int j = 0; j < NOPS; j++) ops[j] = slot[j] >= 0 ? c.in[slot[j]] : NULL;
    const int states = ops[5] || ops[6] || ops[7];
    alloy_array *g[8] = {NULL};
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    if (from_kept)
        st = alloy_mlstm_chunkwise_backward_kept(ops[0], ops[1], ops[2], ops[3], ops[4], ops[5], ops[6], ops[7], ops[8],
                                                 ops[13], ops[14], ops[15], ops + 16, ops[9], ops[10], ops[11],
                                                 ops[12], chunk_size, eps, c.stream, &g[0], &g[1], &g[2], &g[3],
                                                 &g[4], states ? &g[5] : NULL, states ? &g[6] : NULL,
                                                 states ? &g[7] : NULL);
    else
        st = alloy_mlstm_chunkwise_backward_with_method(ops[0], ops[1], ops[2], ops[3], ops[4], ops[5], ops[6],
                                                        ops[7], ops[8], ops[9], ops[10], ops[11], ops[12], chunk_size,
                                                        eps, method, c.stream, &g[0], &g[1], &g[2], &g[3], &g[4],
                                                        states ? &g[5] : NULL, states ? &g[6] : NULL,
                                                        states ? &g[7] : NULL);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) {
        alloypy_ctx_fail(&c, st);
        for (int j = 0; j < 8; j++) alloy_array_free(g[j]);
        goto done;
    }
    PyObject *r[8] = {NULL};
    int ok = 1;
    for (int j = 0; j < 8; j++) {
        if (!g[j]) {
            Py_INCREF(Py_None);
            r[j] = Py_None;
            continue;
        }
        r[j] = alloypy_ctx_wrap(&c, &g[j]);
        if (!r[j]) ok = 0;
    }
    if (ok) result = PyTuple_Pack(8, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
    for (int j = 0; j < 8; j++) {
        Py_XDECREF(r[j]);
        alloy_array_free(g[j]);
    }
done:
    alloypy_ctx_close(&c);
    return result;
}
