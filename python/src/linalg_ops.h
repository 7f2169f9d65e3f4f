/* linalg_ops.h — what the files of alloy.linalg's factorizations share
 * (linalg_factor.c, linalg_qr.c, linalg_eig.c; mlstm.c uses the context
 * too): the context of one op call
 * (operands and out probed and converted on one device, the stream
 * resolved) and the broadcasting of a solve's operands. Private to the
 * extension. */
#ifndef ALLOY_PY_LINALG_OPS_H
#define ALLOY_PY_LINALG_OPS_H

#include "alloy_py.h"

/* mlstm chunkwise_backward from a kept record: q, k, v, i, f, c, n, m, cu_seqlens, dh, dc, dn, dm, h,
 * c_last, n_last and the record's 9 arrays */
#define MAX_OPERANDS 25

typedef struct alloypy_op_ctx {
    const char *name;
    int n;
    alloypy_probe probe[MAX_OPERANDS];
    alloy_array *in[MAX_OPERANDS];
    PyObject *out_obj; /* Py_None: no out */
    alloypy_probe out_probe;
    alloy_array *out; /* the converted out, or NULL */
    alloy_device *dev;
    AlloyPy_Stream *sobj;
    alloy_stream *stream;
} alloypy_op_ctx;

/* Probes and converts the n operands objs (named `names` in messages) and
 * out (Py_None: none) on one device — the stream's, out's, the first
 * operand not on the CPU, the first operand's — and resolves the stream.
 * -1 with an exception; alloypy_ctx_close is needed either way. */
int alloypy_ctx_open(alloypy_op_ctx *c, const char *name, int n, PyObject *const *objs, const char *const *names, PyObject *out_obj,
             PyObject *stream_obj);
void alloypy_ctx_close(alloypy_op_ctx *c);
/* A new alloy.Array for a result the op allocated (takes the reference). */
PyObject *alloypy_ctx_wrap(alloypy_op_ctx *c, alloy_array **a);
/* The main result: out as given when there was one, else a new array. */
PyObject *alloypy_ctx_result(alloypy_op_ctx *c, alloy_array **a);
/* (result, info): the main result as alloypy_ctx_result, info a new array;
 * both arrays are the tuple's or freed here. NULL with an exception. */
PyObject *alloypy_ctx_result_info(alloypy_op_ctx *c, alloy_array **a, alloy_array **info);
/* Raises the op's failure; returns NULL. */
PyObject *alloypy_ctx_fail(alloypy_op_ctx *c, alloy_status st);
/* NumPy 2's solve broadcasting: the matrices c->in[im] (..., m, n), pivots
 * c->in[ip] (..., n) when ip >= 0, and b c->in[ib] ((..., m, k), or 1-D:
 * one vector for every matrix, passed as the C API's (..., m)) replaced by
 * views with common leading dimensions (stride 0 where broadcast). */
int alloypy_broadcast_solve_operands(alloypy_op_ctx *c, int im, int ip, int ib);

#endif
