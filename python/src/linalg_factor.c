/* linalg_factor.c — the C side of alloy.linalg's factorizations and solves
 * (python/alloy/linalg.py): Cholesky, triangular solves, LU and what is built
 * on it, each a thin call of the C op of include/alloy/linalg.h. Operands are
 * any arrays alloy takes, read on their device (matmul's rule picks it:
 * the stream's device, out's, the first operand not on the CPU, the first
 * operand's); `out` is written in place and returned as given. Results come
 * back as alloy.Array on the stream the op ran on. The `info` codes are
 * returned as arrays and never read here except by _info_failures, which
 * waits for the stream that wrote them (the Python layer's check=True).
 *
 * NumPy's broadcasting of the leading dimensions for the LU solves (the C
 * API wants them equal) is done with views whose broadcast dimensions have
 * stride 0; the C op reads such views through its contiguous copy. NumPy's
 * (SciPy's) 0-based pivots are converted to LAPACK's 1-based ones and back
 * by a one-line kernel on the op's stream. */
#include "alloy_py.h"
#include "linalg_ops.h"

#include <stdint.h>
#include <string.h>

/* Probes and converts the operands and out on one device, resolves the stream. */
int alloypy_ctx_open(alloypy_op_ctx *c, const char *name, int n, PyObject *const *objs, const char *const *names, PyObject *out_obj,
             PyObject *stream_obj) {
    memset(c, 0, sizeof *c);
    c->name = name;
    if (n > MAX_OPERANDS) {
        PyErr_Format(PyExc_SystemError, "%s: %d operands, more than MAX_OPERANDS (%d)", name, n, MAX_OPERANDS);
        return -1;
    }
    c->n = n;
    c->out_obj = out_obj;
    char what[MAX_OPERANDS + 1][64];
    for (int i = 0; i < n; i++) {
        snprintf(what[i], sizeof what[i], "%s: %s", name, names[i]);
        if (alloypy_probe_object(objs[i], &c->probe[i], what[i]) < 0) return -1;
    }
    snprintf(what[n], sizeof what[n], "%s: out", name);
    if (out_obj != Py_None && alloypy_probe_object(out_obj, &c->out_probe, what[n]) < 0) return -1;
    alloypy_stream_spec spec;
    if (alloypy_stream_parse(stream_obj, &spec) < 0) return -1;
    alloy_device *dev = spec.device;
    if (!dev && out_obj != Py_None) dev = c->out_probe.device;
    for (int i = 0; !dev && i < n; i++)
        if (c->probe[i].device && !alloypy_is_cpu(c->probe[i].device)) dev = c->probe[i].device;
    for (int i = 0; !dev && i < n; i++) dev = c->probe[i].device;
    if (!dev && !(dev = alloypy_default_device())) return -1;
    c->dev = dev;
    if (alloypy_stream_resolve(&spec, dev, &c->sobj) < 0) return -1;
    c->stream = alloypy_stream_of((PyObject *)c->sobj, dev);
    for (int i = 0; i < n; i++)
        if (alloypy_convert(&c->probe[i], dev, c->stream, 0, what[i], &c->in[i]) < 0) return -1;
    if (out_obj != Py_None && alloypy_convert(&c->out_probe, dev, c->stream, 1, what[n], &c->out) < 0) return -1;
    return 0;
}

void alloypy_ctx_close(alloypy_op_ctx *c) {
    for (int i = 0; i < MAX_OPERANDS; i++) alloy_array_free(c->in[i]);
    alloy_array_free(c->out);
    Py_XDECREF(c->sobj);
}

/* A new alloy.Array for a result the op allocated (takes the reference). */
PyObject *alloypy_ctx_wrap(alloypy_op_ctx *c, alloy_array **a) {
    PyObject *r = alloypy_array_wrap(*a, (PyObject *)c->sobj);
    *a = NULL;
    return r;
}

/* The main result: out as given when there was one, else a new array. */
PyObject *alloypy_ctx_result(alloypy_op_ctx *c, alloy_array **a) {
    if (c->out) {
        *a = NULL; /* it is c->out, freed by alloypy_ctx_close */
        Py_INCREF(c->out_obj);
        return c->out_obj;
    }
    return alloypy_ctx_wrap(c, a);
}

PyObject *alloypy_ctx_result_info(alloypy_op_ctx *c, alloy_array **a, alloy_array **info) {
    PyObject *ra = alloypy_ctx_result(c, a), *ri = ra ? alloypy_ctx_wrap(c, info) : NULL, *t = NULL;
    if (ra && ri) t = PyTuple_Pack(2, ra, ri);
    Py_XDECREF(ra);
    Py_XDECREF(ri);
    alloy_array_free(*a);
    alloy_array_free(*info);
    *a = *info = NULL;
    return t;
}

PyObject *alloypy_ctx_fail(alloypy_op_ctx *c, alloy_status st) {
    (void)c;
    return alloypy_raise(st, NULL);
}

/* ---- broadcasting the leading dimensions ---------------------------------- */

static void release_view(void *user) { alloy_array_free((alloy_array *)user); }

/* `a` seen with `ndim` dimensions of `shape`: its own dimensions right-aligned,
 * missing or size-1 ones repeated with stride 0. *out is `a` itself (a new
 * reference) when nothing changes. */
static alloy_status broadcast_to(alloy_array *a, int ndim, const int64_t *shape, alloy_array **out) {
    const int an = alloy_array_ndim(a);
    const int64_t *as = alloy_array_shape(a), *ast = alloy_array_strides(a);
    int same = an == ndim;
    for (int i = 0; same && i < ndim; i++) same = as[i] == shape[i];
    if (same) {
        *out = alloy_array_retain(a);
        return ALLOY_OK;
    }
    int64_t st[ALLOY_MAX_NDIM];
    for (int i = 0; i < ndim; i++) {
        const int j = i - (ndim - an);
        st[i] = j < 0 || (as[j] == 1 && shape[i] != 1) ? 0 : ast[j];
    }
    alloy_array *keep = alloy_array_retain(a);
    alloy_status s = alloy_array_wrap(alloy_array_device(a), alloy_array_data(a), alloy_array_dtype(a), ndim,
                                      shape, st, 0, release_view, keep, out);
    if (s != ALLOY_OK) alloy_array_free(keep);
    return s;
}

static void format_dims(char *buf, size_t len, int nd, const int64_t *s) {
    size_t k = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < nd && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? ", " : "", (long long)s[i]);
    if (k < len) snprintf(buf + k, len - k, nd == 1 ? ",)" : ")");
}

/* NumPy's broadcast of two batch shapes into bs (*bn dimensions). */
static int broadcast_batch(const char *name, int an, const int64_t *as, int bn, const int64_t *bs, int *outn,
                           int64_t *out) {
    const int n = an > bn ? an : bn;
    for (int i = 0; i < n; i++) {
        const int ia = i - (n - an), ib = i - (n - bn);
        const int64_t x = ia < 0 ? 1 : as[ia], y = ib < 0 ? 1 : bs[ib];
        if (x != y && x != 1 && y != 1) {
            char sa[160], sb[160];
            format_dims(sa, sizeof sa, an, as);
            format_dims(sb, sizeof sb, bn, bs);
            alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT,
                              "%s: the leading dimensions %s of the matrices and %s of b do not broadcast", name,
                              sa, sb);
            return -1;
        }
        out[i] = x == 1 ? y : x;
    }
    *outn = n;
    return 0;
}

/* For the LU solves (and lstsq, linalg_qr.c): the matrices m (..., n, n) (and pivots (..., n) when
 * given) and b ((..., n, k), or 1-D (n,): one vector) broadcast to common
 * leading dimensions, as numpy.linalg.solve does; b stays a vector (C API:
 * (..., n)) when it is 1-D. Replaces c->in[im], c->in[ip], c->in[ib]. */
int alloypy_broadcast_solve_operands(alloypy_op_ctx *c, int im, int ip, int ib) {
    alloy_array *m = c->in[im], *b = c->in[ib];
    const int mn = alloy_array_ndim(m), bn = alloy_array_ndim(b);
    if (mn < 2 || bn < 1) return 0; /* the C op explains */
    const int vec = bn == 1;
    const int64_t *ms = alloy_array_shape(m), *bs = alloy_array_shape(b);
    int64_t batch[ALLOY_MAX_NDIM];
    int nb = 0;
    if (vec) {
        nb = mn - 2;
        memcpy(batch, ms, sizeof(int64_t) * (size_t)nb);
    } else if (broadcast_batch(c->name, mn - 2, ms, bn - 2, bs, &nb, batch) < 0) {
        return -1;
    }
    if (nb + 2 > ALLOY_MAX_NDIM) return 0; /* the C op explains */
    int64_t shape[ALLOY_MAX_NDIM];
    memcpy(shape, batch, sizeof(int64_t) * (size_t)nb);
    alloy_array *nm = NULL, *nbv = NULL, *np = NULL;
    shape[nb] = ms[mn - 2];
    shape[nb + 1] = ms[mn - 1];
    alloy_status st = broadcast_to(m, nb + 2, shape, &nm);
    if (st == ALLOY_OK && ip >= 0) {
        alloy_array *p = c->in[ip];
        const int pn = alloy_array_ndim(p);
        if (pn >= 1) {
            shape[nb] = alloy_array_shape(p)[pn - 1];
            st = broadcast_to(p, nb + 1, shape, &np);
        }
    }
    if (st == ALLOY_OK) {
        if (vec) {
            shape[nb] = bs[0];
            st = broadcast_to(b, nb + 1, shape, &nbv);
        } else {
            shape[nb] = bs[bn - 2];
            shape[nb + 1] = bs[bn - 1];
            st = broadcast_to(b, nb + 2, shape, &nbv);
        }
    }
    if (st != ALLOY_OK) {
        alloy_array_free(nm);
        alloy_array_free(np);
        alloy_array_free(nbv);
        alloypy_raise(st, c->name);
        return -1;
    }
    alloy_array_free(c->in[im]);
    c->in[im] = nm;
    alloy_array_free(c->in[ib]);
    c->in[ib] = nbv;
    if (np) {
        alloy_array_free(c->in[ip]);
        c->in[ip] = np;
    }
    return 0;
}

/* ---- pivots: SciPy's 0-based <-> LAPACK's 1-based --------------------------- */

static alloy_kernel *pivot_kernel;

/* A new int32 array of p's shape holding p + delta (any integer dtype in). */
static alloy_status shift_pivots(alloy_array *p, int delta, alloy_stream *stream, alloy_array **out) {
    const alloy_dtype dt = alloy_array_dtype(p);
    if (!(dt == ALLOY_INT32 || dt == ALLOY_INT64 || dt == ALLOY_INT16 || dt == ALLOY_INT8 || dt == ALLOY_UINT8 ||
          dt == ALLOY_UINT16 || dt == ALLOY_UINT32 || dt == ALLOY_UINT64))
        return ALLOY_ERROR_INVALID_ARGUMENT; /* caller words the message */
    if (!pivot_kernel) return ALLOY_ERROR_INTERNAL;
    alloy_status st;
    const int64_t count = alloy_array_size(p);
    if (count > (int64_t)UINT32_MAX) return ALLOY_ERROR_UNSUPPORTED;
    alloy_launch *l = NULL;
    st = alloy_launch_new(&l);
    if (st == ALLOY_OK) st = alloy_launch_add_output(l, alloy_array_ndim(p), alloy_array_shape(p), ALLOY_INT32);
    if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)count, 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, count < 256 ? (count > 0 ? (uint32_t)count : 1) : 256, 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "count", ALLOY_UINT32, count);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "delta", ALLOY_INT32, delta);
    if (st == ALLOY_OK) st = alloy_kernel_apply(pivot_kernel, 1, &p, l, stream, out);
    alloy_launch_free(l);
    return st;
}

/* Whether pivots are 0-based; makes the shifting kernel (under the GIL,
 * once) when they are. */
static int parse_pivot_base(PyObject *obj, int *zero_based) {
    *zero_based = PyObject_IsTrue(obj);
    if (*zero_based < 0) return -1;
    if (*zero_based && !pivot_kernel) {
        static const char *const ins[] = {"p"}, *const outs[] = {"q"};
        alloy_status st = alloy_kernel_new("alloy_linalg_pivots", 1, ins, 1, outs,
                                           "uint i = thread_position_in_grid.x;\n"
                                           "if (i < count) q[i] = int(p[i]) + delta;\n",
                                           NULL, 1, 0, &pivot_kernel);
        if (st != ALLOY_OK) {
            alloypy_raise(st, "the pivot kernel");
            return -1;
        }
    }
    return 0;
}

/* ---- the operations ------------------------------------------------------------ */

/* _cholesky(a, upper, out, stream) -> (factor, info) */
PyObject *alloypy_cholesky(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"a", "upper", "out", "stream", NULL};
    PyObject *ao, *out_obj = Py_None, *stream_obj = Py_None;
    int upper = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|pOO:_cholesky", kw, &ao, &upper, &out_obj, &stream_obj))
        return NULL;
    static const char *const names[] = {"a"};
    alloypy_op_ctx c;
    PyObject *result = NULL;
    if (alloypy_ctx_open(&c, "cholesky", 1, &ao, names, out_obj, stream_obj) < 0) goto done;
    alloy_cholesky_options o;
    alloy_cholesky_options_init(&o);
    o.upper = upper;
    alloy_array *f = c.out, *info = NULL;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_cholesky(c.in[0], &o, c.stream, &f, &info);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) {
        alloypy_ctx_fail(&c, st);
        goto done;
    }
    result = alloypy_ctx_result_info(&c, &f, &info);
done:
    alloypy_ctx_close(&c);
    return result;
}

/* _cholesky_solve(factor, b, upper, out, stream) -> x */
PyObject *alloypy_cholesky_solve(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"factor", "b", "upper", "out", "stream", NULL};
    PyObject *objs[2], *out_obj = Py_None, *stream_obj = Py_None;
    int upper = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|pOO:_cholesky_solve", kw, &objs[0], &objs[1], &upper,
                                     &out_obj, &stream_obj))
        return NULL;
    static const char *const names[] = {"factor", "b"};
    alloypy_op_ctx c;
    PyObject *result = NULL;
    if (alloypy_ctx_open(&c, "cholesky_solve", 2, objs, names, out_obj, stream_obj) < 0) goto done;
    alloy_cholesky_options o;
    alloy_cholesky_options_init(&o);
    o.upper = upper;
    alloy_array *x = c.out;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_cholesky_solve(c.in[0], c.in[1], &o, c.stream, &x);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) alloypy_ctx_fail(&c, st);
    else result = alloypy_ctx_result(&c, &x);
done:
    alloypy_ctx_close(&c);
    return result;
}

/* _solve_triangular(a, b, lower, transpose, unit_diagonal, right, out, stream) -> x */
PyObject *alloypy_solve_triangular(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"a", "b", "lower", "transpose", "unit_diagonal", "right", "out", "stream", NULL};
    PyObject *objs[2], *out_obj = Py_None, *stream_obj = Py_None;
    int lower = 0, trans = 0, unit = 0, right = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|ppppOO:_solve_triangular", kw, &objs[0], &objs[1], &lower,
                                     &trans, &unit, &right, &out_obj, &stream_obj))
        return NULL;
    static const char *const names[] = {"a", "b"};
    alloypy_op_ctx c;
    PyObject *result = NULL;
    if (alloypy_ctx_open(&c, "solve_triangular", 2, objs, names, out_obj, stream_obj) < 0) goto done;
    alloy_triangular_options o;
    alloy_triangular_options_init(&o);
    o.lower = lower;
    o.transpose = trans;
    o.unit_diagonal = unit;
    o.right = right;
    alloy_array *x = c.out;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_solve_triangular(c.in[0], c.in[1], &o, c.stream, &x);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) alloypy_ctx_fail(&c, st);
    else result = alloypy_ctx_result(&c, &x);
done:
    alloypy_ctx_close(&c);
    return result;
}

/* _lu_factor(a, zero_based, stream) -> (lu, pivots, info) */
PyObject *alloypy_lu_factor(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"a", "zero_based", "stream", NULL};
    PyObject *ao, *zb_obj = Py_True, *stream_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:_lu_factor", kw, &ao, &zb_obj, &stream_obj)) return NULL;
    int zero_based;
    if (parse_pivot_base(zb_obj, &zero_based) < 0) return NULL;
    static const char *const names[] = {"a"};
    alloypy_op_ctx c;
    PyObject *result = NULL;
    if (alloypy_ctx_open(&c, "lu_factor", 1, &ao, names, Py_None, stream_obj) < 0) goto done;
    alloy_array *lu = NULL, *piv = NULL, *info = NULL, *piv0 = NULL;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_lu_factor(c.in[0], c.stream, &lu, &piv, &info);
    if (st == ALLOY_OK && zero_based) st = shift_pivots(piv, -1, c.stream, &piv0);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) {
        alloypy_ctx_fail(&c, st);
    } else {
        if (piv0) {
            alloy_array_free(piv);
            piv = piv0;
        }
        PyObject *r0 = alloypy_ctx_wrap(&c, &lu), *r1 = r0 ? alloypy_ctx_wrap(&c, &piv) : NULL, *r2 = r1 ? alloypy_ctx_wrap(&c, &info) : NULL;
        if (r2) result = PyTuple_Pack(3, r0, r1, r2);
        Py_XDECREF(r0);
        Py_XDECREF(r1);
        Py_XDECREF(r2);
    }
    alloy_array_free(lu);
    alloy_array_free(piv);
    alloy_array_free(info);
done:
    alloypy_ctx_close(&c);
    return result;
}

/* _lu_solve(lu, pivots, b, transpose, zero_based, out, stream) -> x */
PyObject *alloypy_lu_solve(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"lu", "pivots", "b", "transpose", "zero_based", "out", "stream", NULL};
    PyObject *objs[3], *zb_obj = Py_True, *out_obj = Py_None, *stream_obj = Py_None;
    int trans = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|pOOO:_lu_solve", kw, &objs[0], &objs[1], &objs[2], &trans,
                                     &zb_obj, &out_obj, &stream_obj))
        return NULL;
    int zero_based;
    if (parse_pivot_base(zb_obj, &zero_based) < 0) return NULL;
    static const char *const names[] = {"lu", "pivots", "b"};
    alloypy_op_ctx c;
    PyObject *result = NULL;
    if (alloypy_ctx_open(&c, "lu_solve", 3, objs, names, out_obj, stream_obj) < 0) goto done;
    if (zero_based) {
        alloy_array *p1 = NULL;
        alloy_status st;
        Py_BEGIN_ALLOW_THREADS
        st = shift_pivots(c.in[1], 1, c.stream, &p1);
        Py_END_ALLOW_THREADS
        if (st == ALLOY_ERROR_INVALID_ARGUMENT) {
            alloypy_raise_fmt(st, "lu_solve: pivots is %s; it must have an integer dtype",
                              alloy_dtype_name(alloy_array_dtype(c.in[1])));
            goto done;
        }
        if (st != ALLOY_OK) {
            alloypy_ctx_fail(&c, st);
            goto done;
        }
        alloy_array_free(c.in[1]);
        c.in[1] = p1;
    }
    if (alloypy_broadcast_solve_operands(&c, 0, 1, 2) < 0) goto done;
    alloy_array *x = c.out;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_lu_solve(c.in[0], c.in[1], c.in[2], trans, c.stream, &x);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) alloypy_ctx_fail(&c, st);
    else result = alloypy_ctx_result(&c, &x);
done:
    alloypy_ctx_close(&c);
    return result;
}

/* _solve(a, b, out, stream) -> (x, info) */
PyObject *alloypy_solve(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"a", "b", "out", "stream", NULL};
    PyObject *objs[2], *out_obj = Py_None, *stream_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OO:_solve", kw, &objs[0], &objs[1], &out_obj, &stream_obj))
        return NULL;
    static const char *const names[] = {"a", "b"};
    alloypy_op_ctx c;
    PyObject *result = NULL;
    if (alloypy_ctx_open(&c, "solve", 2, objs, names, out_obj, stream_obj) < 0) goto done;
    if (alloypy_broadcast_solve_operands(&c, 0, -1, 1) < 0) goto done;
    alloy_array *x = c.out, *info = NULL;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_solve(c.in[0], c.in[1], c.stream, &x, &info);
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

/* _inv(a, out, stream) -> (inverse, info) */
PyObject *alloypy_inv(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"a", "out", "stream", NULL};
    PyObject *ao, *out_obj = Py_None, *stream_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:_inv", kw, &ao, &out_obj, &stream_obj)) return NULL;
    static const char *const names[] = {"a"};
    alloypy_op_ctx c;
    PyObject *result = NULL;
    if (alloypy_ctx_open(&c, "inv", 1, &ao, names, out_obj, stream_obj) < 0) goto done;
    alloy_array *x = c.out, *info = NULL;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_inv(c.in[0], c.stream, &x, &info);
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

/* _det(a, stream) -> det */
PyObject *alloypy_det(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"a", "stream", NULL};
    PyObject *ao, *stream_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:_det", kw, &ao, &stream_obj)) return NULL;
    static const char *const names[] = {"a"};
    alloypy_op_ctx c;
    PyObject *result = NULL;
    if (alloypy_ctx_open(&c, "det", 1, &ao, names, Py_None, stream_obj) < 0) goto done;
    alloy_array *d = NULL;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_det(c.in[0], c.stream, &d);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) alloypy_ctx_fail(&c, st);
    else result = alloypy_ctx_wrap(&c, &d);
done:
    alloypy_ctx_close(&c);
    return result;
}

/* _slogdet(a, stream) -> (sign, logabsdet) */
PyObject *alloypy_slogdet(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kw[] = {"a", "stream", NULL};
    PyObject *ao, *stream_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:_slogdet", kw, &ao, &stream_obj)) return NULL;
    static const char *const names[] = {"a"};
    alloypy_op_ctx c;
    PyObject *result = NULL;
    if (alloypy_ctx_open(&c, "slogdet", 1, &ao, names, Py_None, stream_obj) < 0) goto done;
    alloy_array *s = NULL, *l = NULL;
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_slogdet(c.in[0], c.stream, &s, &l);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) {
        alloypy_ctx_fail(&c, st);
        goto done;
    }
    PyObject *rs = alloypy_ctx_wrap(&c, &s), *rl = rs ? alloypy_ctx_wrap(&c, &l) : NULL;
    if (rs && rl) result = PyTuple_Pack(2, rs, rl);
    Py_XDECREF(rs);
    Py_XDECREF(rl);
    alloy_array_free(s);
    alloy_array_free(l);
done:
    alloypy_ctx_close(&c);
    return result;
}

/* _info_failures(info) -> [(flat index, code), ...] for the non-zero codes of
 * an int32 alloy.Array, after waiting for the stream that wrote it. */
PyObject *alloypy_info_failures(PyObject *self, PyObject *obj) {
    (void)self;
    if (!AlloyPy_Array_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "_info_failures: an alloy.Array is needed");
        return NULL;
    }
    AlloyPy_Array *arr = (AlloyPy_Array *)obj;
    if (alloy_array_dtype(arr->array) != ALLOY_INT32)
        return alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT, "_info_failures: info must be int32");
    const int64_t n = alloy_array_size(arr->array);
    int32_t *h = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
    if (!h) return PyErr_NoMemory();
    alloy_stream *s = alloypy_stream_of(arr->stream, alloy_array_device(arr->array));
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_stream_synchronize(s);
    if (st == ALLOY_OK) st = alloy_array_copy_to_host(arr->array, h, (size_t)n * sizeof *h);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) {
        PyMem_Free(h);
        return alloypy_raise(st, "reading info");
    }
    PyObject *list = PyList_New(0);
    for (int64_t i = 0; list && i < n; i++) {
        if (!h[i]) continue;
        PyObject *t = Py_BuildValue("(Li)", (long long)i, (int)h[i]);
        if (!t || PyList_Append(list, t) < 0) Py_CLEAR(list);
        Py_XDECREF(t);
    }
    PyMem_Free(h);
    return list;
}
