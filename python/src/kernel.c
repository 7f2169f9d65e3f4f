/* kernel.c — alloy.metal_kernel(...) and the callable it returns, with the
 * keywords of MLX's mx.fast.metal_kernel:
 *
 *   k = alloy.metal_kernel(name, input_names, output_names, source, header="",
 *                          ensure_row_contiguous=True, atomic_outputs=False)
 *   outs = k(inputs=[...], output_shapes=[...], output_dtypes=[...],
 *            grid=(x, y, z), threadgroup=(x, y, z), template=[("T", alloy.float32)],
 *            init_value=None, verbose=False, stream=None,
 *            device=None, outputs=None)      # the last two: alloy's additions
 *
 * The call is the hot path and is all C: vectorcall with keyword names
 * matched by pointer (interned), inputs probed then converted without
 * copies, one reusable launch configuration per kernel, the GIL released
 * around alloy_kernel_apply (which compiles on first use, then finds the
 * compiled program in its cache). The launch device is, in order: device=;
 * the stream's device; the device of the arrays passed as outputs=; the
 * device of the first input on a GPU; the default device ('auto'). */
#include "alloy_py.h"

#include <structmember.h>
#include <stdlib.h>
#include <string.h>

enum {
    KW_INPUTS, KW_OUTPUT_SHAPES, KW_OUTPUT_DTYPES, KW_GRID, KW_THREADGROUP, KW_TEMPLATE,
    KW_INIT_VALUE, KW_VERBOSE, KW_STREAM, KW_DEVICE, KW_OUTPUTS, KW_COUNT
};
static const char *const KW_NAMES[KW_COUNT] = {
    "inputs", "output_shapes", "output_dtypes", "grid", "threadgroup", "template",
    "init_value", "verbose", "stream", "device", "outputs"};
static PyObject *kw_interned[KW_COUNT];

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    alloy_kernel *kernel;
    alloy_launch *spare; /* a launch configuration to reuse; NULL while a call uses it */
    int n_in, n_out;
    char **in_what, **out_what; /* "kernel 'k' input 'x'" for messages */
    PyObject *name, *input_names, *output_names, *source, *header;
    char ensure_row_contiguous, atomic_outputs; /* T_BOOL members are chars */
} AlloyPy_Kernel;

/* ---- argument parsing ---------------------------------------------------------- */

static int kw_index(PyObject *name) {
    for (int i = 0; i < KW_COUNT; i++)
        if (name == kw_interned[i]) return i;
    for (int i = 0; i < KW_COUNT; i++)
        if (PyUnicode_Compare(name, kw_interned[i]) == 0) return i;
    return -1;
}

static int as_int64(PyObject *o, long long *out, const char *what) {
    if (PyLong_Check(o)) *out = PyLong_AsLongLong(o);
    else {
        PyObject *i = PyNumber_Index(o);
        if (!i) {
            PyErr_Format(PyExc_TypeError, "%s must be ints, not %.100s", what, Py_TYPE(o)->tp_name);
            return -1;
        }
        *out = PyLong_AsLongLong(i);
        Py_DECREF(i);
    }
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* grid / threadgroup: a sequence of 1 to 3 non-negative ints (missing ones are 1). */
static int parse_dims(PyObject *o, uint32_t out[3], const char *what, const char *kname) {
    out[0] = out[1] = out[2] = 1;
    PyObject *seq = PySequence_Fast(o, "");
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "kernel '%s': %s must be a tuple of 3 ints", kname, what);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > 3) {
        Py_DECREF(seq);
        alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT, "kernel '%s': %s must have 3 entries (x, y, z), "
                                                        "got %zd",
                          kname, what, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v;
        if (as_int64(PySequence_Fast_GET_ITEM(seq, i), &v, what) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        if (v < 0 || v > UINT32_MAX) {
            Py_DECREF(seq);
            alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT, "kernel '%s': %s[%zd] = %lld is out of range",
                              kname, what, i, v);
            return -1;
        }
        out[i] = (uint32_t)v;
    }
    Py_DECREF(seq);
    return 0;
}

static int parse_shape(PyObject *o, int *ndim, int64_t shape[ALLOY_MAX_NDIM], const char *kname, int index) {
    PyObject *seq = PySequence_Fast(o, "");
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "kernel '%s': output_shapes[%d] must be a sequence of ints", kname,
                     index);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > ALLOY_MAX_NDIM) {
        Py_DECREF(seq);
        alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT, "kernel '%s': output_shapes[%d] has %zd dimensions "
                                                        "(at most %d)",
                          kname, index, n, ALLOY_MAX_NDIM);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v;
        if (as_int64(PySequence_Fast_GET_ITEM(seq, i), &v, "output shapes") < 0) {
            Py_DECREF(seq);
            return -1;
        }
        shape[i] = v;
    }
    *ndim = (int)n;
    Py_DECREF(seq);
    return 0;
}

static int add_templates(alloy_launch *l, PyObject *tmpl, const char *kname) {
    PyObject *items = PyDict_Check(tmpl) ? PyDict_Items(tmpl) : (Py_INCREF(tmpl), tmpl);
    if (!items) return -1;
    PyObject *seq = PySequence_Fast(items, "");
    Py_DECREF(items);
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "kernel '%s': template must be a list of (name, value) pairs", kname);
        return -1;
    }
    int r = 0;
    for (Py_ssize_t i = 0; r == 0 && i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(pair) && !PyList_Check(pair)) {
            PyErr_Format(PyExc_TypeError, "kernel '%s': template entries must be (name, value) pairs",
                         kname);
            r = -1;
            break;
        }
        PyObject *name = PySequence_Fast_GET_ITEM(pair, 0);
        if (PySequence_Fast_GET_SIZE(pair) != 2 || !PyUnicode_Check(name)) {
            PyErr_Format(PyExc_TypeError, "kernel '%s': template entries must be (name: str, value) pairs",
                         kname);
            r = -1;
            break;
        }
        PyObject *value = PySequence_Fast_GET_ITEM(pair, 1);
        const char *n = PyUnicode_AsUTF8(name);
        if (!n) {
            r = -1;
            break;
        }
        alloy_status st;
        alloy_dtype dt;
        if (PyBool_Check(value)) { /* before int: bool is an int in Python */
            st = alloy_launch_add_template_bool(l, n, value == Py_True);
        } else if (PyLong_Check(value)) {
            long long v = PyLong_AsLongLong(value);
            if (v == -1 && PyErr_Occurred()) {
                r = -1;
                break;
            }
            st = alloy_launch_add_template_int(l, n, v);
        } else if (alloypy_dtype_try(value, &dt)) {
            st = alloy_launch_add_template_dtype(l, n, dt);
        } else {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError,
                             "Invalid template argument. Must be bool, int, or Dtype (kernel '%s', "
                             "template '%s' is a %.100s)",
                             kname, n, Py_TYPE(value)->tp_name);
            r = -1;
            break;
        }
        if (st != ALLOY_OK) {
            alloypy_raise(st, NULL);
            r = -1;
        }
    }
    Py_DECREF(seq);
    return r;
}

static int flush_stdout(void) {
    PyObject *out = PySys_GetObject("stdout"); /* borrowed */
    if (!out || out == Py_None) return 0;
    PyObject *r = PyObject_CallMethod(out, "flush", NULL);
    if (!r) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(r);
    return 0;
}

/* ---- the call --------------------------------------------------------------------- */

#define SMALL 16

static PyObject *Kernel_vectorcall(PyObject *self_, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    AlloyPy_Kernel *self = (AlloyPy_Kernel *)self_;
    const char *kname = alloy_kernel_name(self->kernel);
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs) {
        PyErr_Format(PyExc_TypeError, "kernel '%s' takes keyword arguments only (inputs=, output_shapes=, "
                                      "output_dtypes=, grid=, threadgroup=, ...)",
                     kname);
        return NULL;
    }
    PyObject *kw[KW_COUNT] = {0};
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        int k = kw_index(key);
        if (k < 0) {
            PyErr_Format(PyExc_TypeError, "kernel '%s' got an unexpected keyword argument '%U'", kname, key);
            return NULL;
        }
        kw[k] = args[i] == Py_None ? NULL : args[i];
    }
    if (!kw[KW_INPUTS] && self->n_in) {
        PyErr_Format(PyExc_TypeError, "kernel '%s': missing inputs=", kname);
        return NULL;
    }
    if (!kw[KW_GRID] || !kw[KW_THREADGROUP]) {
        PyErr_Format(PyExc_TypeError, "kernel '%s': missing %s=", kname, kw[KW_GRID] ? "threadgroup" : "grid");
        return NULL;
    }
    if (!kw[KW_OUTPUTS] && (!kw[KW_OUTPUT_SHAPES] || !kw[KW_OUTPUT_DTYPES])) {
        PyErr_Format(PyExc_TypeError, "kernel '%s': missing %s= (or pass the arrays to write as outputs=)",
                     kname, kw[KW_OUTPUT_SHAPES] ? "output_dtypes" : "output_shapes");
        return NULL;
    }

    PyObject *result = NULL, *in_seq = NULL, *out_seq = NULL, *shapes = NULL, *dtypes = NULL;
    AlloyPy_Stream *sobj = NULL;
    alloy_launch *l = NULL;
    int n_in = self->n_in, n_out = self->n_out, converted = 0;
    alloypy_probe probe_small[SMALL], oprobe_small[SMALL];
    alloy_array *in_small[SMALL], *res_small[SMALL];
    alloypy_probe *probe = n_in <= SMALL ? probe_small : PyMem_Malloc(sizeof *probe * (size_t)n_in);
    alloypy_probe *oprobe = n_out <= SMALL ? oprobe_small : PyMem_Malloc(sizeof *oprobe * (size_t)n_out);
    alloy_array **in = n_in <= SMALL ? in_small : PyMem_Malloc(sizeof *in * (size_t)n_in);
    alloy_array **res = n_out <= SMALL ? res_small : PyMem_Malloc(sizeof *res * (size_t)n_out);
    if (res)
        for (int i = 0; i < n_out; i++) res[i] = NULL;
    if (!probe || !oprobe || !in || !res) {
        PyErr_NoMemory();
        goto done;
    }

    /* 1. What the inputs (and caller-provided outputs) are and where they live. */
    if (kw[KW_INPUTS]) {
        in_seq = PySequence_Fast(kw[KW_INPUTS], "");
        if (!in_seq) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "kernel '%s': inputs must be a list", kname);
            goto done;
        }
    }
    Py_ssize_t got = in_seq ? PySequence_Fast_GET_SIZE(in_seq) : 0;
    if (got != n_in) {
        alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT,
                          "kernel '%s' takes %d inputs (input_names) but %zd were given", kname, n_in, got);
        goto done;
    }
    for (int i = 0; i < n_in; i++)
        if (alloypy_probe_object(PySequence_Fast_GET_ITEM(in_seq, i), &probe[i], self->in_what[i]) < 0)
            goto done;
    if (kw[KW_OUTPUTS]) {
        out_seq = PySequence_Fast(kw[KW_OUTPUTS], "");
        if (!out_seq) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "kernel '%s': outputs must be a list of arrays", kname);
            goto done;
        }
        if (PySequence_Fast_GET_SIZE(out_seq) != n_out) {
            alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT,
                              "kernel '%s' has %d outputs (output_names) but outputs= has %zd arrays", kname,
                              n_out, PySequence_Fast_GET_SIZE(out_seq));
            goto done;
        }
        for (int i = 0; i < n_out; i++)
            if (alloypy_probe_object(PySequence_Fast_GET_ITEM(out_seq, i), &oprobe[i], self->out_what[i]) < 0)
                goto done;
    }

    /* 2. The launch device and stream. */
    alloy_device *dev = NULL;
    alloypy_stream_spec spec;
    if (kw[KW_DEVICE] && alloypy_device_from_object(kw[KW_DEVICE], &dev) < 0) goto done;
    if (alloypy_stream_parse(kw[KW_STREAM], &spec) < 0) goto done;
    if (!dev && spec.device) dev = spec.device;
    for (int i = 0; !dev && out_seq && i < n_out; i++) dev = oprobe[i].device;
    for (int i = 0; !dev && i < n_in; i++)
        if (probe[i].device && !alloypy_is_cpu(probe[i].device)) dev = probe[i].device;
    if (!dev && !(dev = alloypy_default_device())) goto done;
    if (alloypy_stream_resolve(&spec, dev, &sobj) < 0) goto done;
    alloy_stream *stream = alloypy_stream_of((PyObject *)sobj, dev);

    /* 3. The launch configuration. */
    l = self->spare;
    self->spare = NULL;
    if (!l) {
        alloy_status st = alloy_launch_new(&l);
        if (st != ALLOY_OK) {
            alloypy_raise(st, NULL);
            goto done;
        }
    }
    if (out_seq) {
        for (int i = 0; i < n_out; i++) {
            alloy_array *a;
            if (alloypy_convert(&oprobe[i], dev, stream, 1, self->out_what[i], &a) < 0) goto done;
            alloy_status st = alloy_launch_add_output_array(l, a);
            alloy_array_free(a); /* the launch holds its own reference */
            if (st != ALLOY_OK) {
                alloypy_raise(st, NULL);
                goto done;
            }
        }
    } else {
        shapes = PySequence_Fast(kw[KW_OUTPUT_SHAPES], "");
        dtypes = shapes ? PySequence_Fast(kw[KW_OUTPUT_DTYPES], "") : NULL;
        if (!shapes || !dtypes) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "kernel '%s': output_shapes and output_dtypes must be lists", kname);
            goto done;
        }
        Py_ssize_t ns = PySequence_Fast_GET_SIZE(shapes), nd = PySequence_Fast_GET_SIZE(dtypes);
        if (ns != n_out || nd != n_out) {
            alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT,
                              "kernel '%s' has %d outputs (output_names) but %zd output_shapes and %zd "
                              "output_dtypes were given",
                              kname, n_out, ns, nd);
            goto done;
        }
        for (int i = 0; i < n_out; i++) {
            int ndim;
            int64_t shape[ALLOY_MAX_NDIM];
            alloy_dtype dt;
            if (parse_shape(PySequence_Fast_GET_ITEM(shapes, i), &ndim, shape, kname, i) < 0) goto done;
            if (alloypy_dtype_from_object(PySequence_Fast_GET_ITEM(dtypes, i), &dt) < 0) goto done;
            alloy_status st = alloy_launch_add_output(l, ndim, shape, dt);
            if (st != ALLOY_OK) {
                alloypy_raise(st, NULL);
                goto done;
            }
        }
    }
    uint32_t grid[3], tg[3];
    if (parse_dims(kw[KW_GRID], grid, "grid", kname) < 0) goto done;
    if (parse_dims(kw[KW_THREADGROUP], tg, "threadgroup", kname) < 0) goto done;
    alloy_launch_set_grid(l, grid[0], grid[1], grid[2]);
    alloy_launch_set_threadgroup(l, tg[0], tg[1], tg[2]);
    if (kw[KW_TEMPLATE] && add_templates(l, kw[KW_TEMPLATE], kname) < 0) goto done;
    if (kw[KW_INIT_VALUE]) {
        double v = PyFloat_AsDouble(kw[KW_INIT_VALUE]);
        if (v == -1.0 && PyErr_Occurred()) goto done;
        alloy_launch_set_init_value(l, v);
    }
    int verbose = 0;
    if (kw[KW_VERBOSE]) {
        verbose = PyObject_IsTrue(kw[KW_VERBOSE]);
        if (verbose < 0) goto done;
        alloy_launch_set_verbose(l, verbose);
    }

    /* 4. Inputs, converted on the launch device. */
    for (; converted < n_in; converted++)
        if (alloypy_convert(&probe[converted], dev, stream, 0, self->in_what[converted], &in[converted]) < 0)
            goto done;

    /* 5. Launch. */
    if (verbose) flush_stdout(); /* the generated source is printed by the C library */
    alloy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = alloy_kernel_apply(self->kernel, n_in, in, l, stream, res);
    Py_END_ALLOW_THREADS
    if (st != ALLOY_OK) {
        alloypy_raise(st, NULL);
        goto done;
    }
    result = PyList_New(n_out);
    if (!result) goto done;
    for (int i = 0; i < n_out; i++) {
        PyObject *a = alloypy_array_wrap(res[i], (PyObject *)sobj);
        res[i] = NULL;
        if (!a) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, a);
    }

done:
    for (int i = 0; i < converted; i++) alloy_array_free(in[i]);
    if (res)
        for (int i = 0; i < n_out; i++) alloy_array_free(res[i]);
    if (l) {
        alloy_launch_reset(l); /* drops the references to caller-provided outputs */
        if (!self->spare) self->spare = l;
        else alloy_launch_free(l);
    }
    Py_XDECREF(sobj);
    Py_XDECREF(in_seq);
    Py_XDECREF(out_seq);
    Py_XDECREF(shapes);
    Py_XDECREF(dtypes);
    if (probe != probe_small) PyMem_Free(probe);
    if (oprobe != oprobe_small) PyMem_Free(oprobe);
    if (in != in_small) PyMem_Free(in);
    if (res != res_small) PyMem_Free(res);
    return result;
}

/* ---- construction ---------------------------------------------------------------- */

static void free_what(char **w, int n) {
    if (!w) return;
    for (int i = 0; i < n; i++) PyMem_Free(w[i]);
    PyMem_Free(w);
}

static void Kernel_dealloc(AlloyPy_Kernel *self) {
    alloy_kernel_free(self->kernel);
    alloy_launch_free(self->spare);
    free_what(self->in_what, self->n_in);
    free_what(self->out_what, self->n_out);
    Py_XDECREF(self->name);
    Py_XDECREF(self->input_names);
    Py_XDECREF(self->output_names);
    Py_XDECREF(self->source);
    Py_XDECREF(self->header);
    PyObject_Free(self);
}

/* names: a sequence of str -> a tuple, and the C strings (valid while the tuple lives). */
static PyObject *names_tuple(PyObject *o, const char *what, const char ***cstr, Py_ssize_t *n) {
    if (PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of names, not a str", what);
        return NULL;
    }
    PyObject *t = PySequence_Tuple(o);
    if (!t) return NULL;
    *n = PyTuple_GET_SIZE(t);
    *cstr = PyMem_Malloc(sizeof(char *) * (size_t)(*n ? *n : 1));
    if (!*cstr) {
        Py_DECREF(t);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *s = PyTuple_GET_ITEM(t, i);
        if (!PyUnicode_Check(s) || !((*cstr)[i] = PyUnicode_AsUTF8(s))) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s must be strings", what);
            PyMem_Free(*cstr);
            Py_DECREF(t);
            return NULL;
        }
    }
    return t;
}

static char **make_what(const char *kname, const char *role, const char **names, Py_ssize_t n) {
    char **w = PyMem_Calloc((size_t)(n ? n : 1), sizeof *w);
    if (!w) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        size_t len = strlen(kname) + strlen(names[i]) + strlen(role) + 32;
        if (!(w[i] = PyMem_Malloc(len))) {
            free_what(w, (int)n);
            return NULL;
        }
        snprintf(w[i], len, "kernel '%s' %s '%s'", kname, role, names[i]);
    }
    return w;
}

PyObject *alloypy_metal_kernel(PyObject *module, PyObject *args, PyObject *kwargs) {
    (void)module;
    static char *kwlist[] = {"name", "input_names", "output_names", "source", "header",
                             "ensure_row_contiguous", "atomic_outputs", "compile_options", NULL};
    PyObject *name, *inames, *onames, *source, *header = NULL, *options = Py_None;
    int ensure = 1, atomic = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UOOU|UppO:metal_kernel", kwlist, &name, &inames,
                                     &onames, &source, &header, &ensure, &atomic, &options))
        return NULL;
    if (options != Py_None) {
        /* MLX's compile_options={"math_mode": ...} is Metal-only; alloy keeps its own math. */
        if (!PyDict_Check(options)) {
            PyErr_SetString(PyExc_TypeError, "compile_options must be a dict or None");
            return NULL;
        }
        PyObject *k;
        Py_ssize_t pos = 0;
        while (PyDict_Next(options, &pos, &k, NULL))
            if (!PyUnicode_Check(k) || PyUnicode_CompareWithASCIIString(k, "math_mode") != 0) {
                alloypy_raise_fmt(ALLOY_ERROR_INVALID_ARGUMENT, "compile_options: unknown option %R (alloy "
                                                                "accepts and ignores only 'math_mode')",
                                  k);
                return NULL;
            }
    }
    const char **in_c = NULL, **out_c = NULL;
    Py_ssize_t n_in = 0, n_out = 0;
    PyObject *in_t = names_tuple(inames, "input_names", &in_c, &n_in);
    if (!in_t) return NULL;
    PyObject *out_t = names_tuple(onames, "output_names", &out_c, &n_out);
    if (!out_t) {
        Py_DECREF(in_t);
        PyMem_Free(in_c);
        return NULL;
    }
    AlloyPy_Kernel *k = NULL;
    const char *cname = PyUnicode_AsUTF8(name), *csrc = PyUnicode_AsUTF8(source);
    const char *chdr = header ? PyUnicode_AsUTF8(header) : "";
    if (!cname || !csrc || !chdr) goto fail;
    alloy_kernel *kern;
    alloy_status st = alloy_kernel_new(cname, (int)n_in, in_c, (int)n_out, out_c, csrc, chdr, ensure, atomic,
                                       &kern);
    if (st != ALLOY_OK) {
        alloypy_raise(st, NULL);
        goto fail;
    }
    k = PyObject_New(AlloyPy_Kernel, &AlloyPy_KernelType);
    if (!k) {
        alloy_kernel_free(kern);
        goto fail;
    }
    k->vectorcall = Kernel_vectorcall;
    k->kernel = kern;
    k->spare = NULL;
    k->n_in = (int)n_in;
    k->n_out = (int)n_out;
    k->in_what = make_what(cname, "input", in_c, n_in);
    k->out_what = make_what(cname, "output", out_c, n_out);
    k->name = name;
    Py_INCREF(name);
    k->input_names = in_t;
    k->output_names = out_t;
    k->source = source;
    Py_INCREF(source);
    k->header = header ? header : PyUnicode_FromString("");
    if (header) Py_INCREF(header);
    k->ensure_row_contiguous = (char)(ensure != 0);
    k->atomic_outputs = (char)(atomic != 0);
    PyMem_Free(in_c);
    PyMem_Free(out_c);
    if (!k->in_what || !k->out_what || !k->header) {
        Py_DECREF(k);
        return PyErr_NoMemory();
    }
    return (PyObject *)k;
fail:
    Py_DECREF(in_t);
    Py_DECREF(out_t);
    PyMem_Free(in_c);
    PyMem_Free(out_c);
    return NULL;
}

static PyObject *Kernel_repr(AlloyPy_Kernel *self) {
    return PyUnicode_FromFormat("alloy.metal_kernel(name=%R, input_names=%R, output_names=%R)", self->name,
                                self->input_names, self->output_names);
}

static PyMemberDef Kernel_members[] = {
    {"name", T_OBJECT, offsetof(AlloyPy_Kernel, name), READONLY, "the kernel's name"},
    {"input_names", T_OBJECT, offsetof(AlloyPy_Kernel, input_names), READONLY, "tuple of input names"},
    {"output_names", T_OBJECT, offsetof(AlloyPy_Kernel, output_names), READONLY, "tuple of output names"},
    {"source", T_OBJECT, offsetof(AlloyPy_Kernel, source), READONLY, "the body (MSL)"},
    {"header", T_OBJECT, offsetof(AlloyPy_Kernel, header), READONLY, "the header (MSL)"},
    {"ensure_row_contiguous", T_BOOL, offsetof(AlloyPy_Kernel, ensure_row_contiguous), READONLY, NULL},
    {"atomic_outputs", T_BOOL, offsetof(AlloyPy_Kernel, atomic_outputs), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

PyTypeObject AlloyPy_KernelType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "alloy.Kernel",
    .tp_basicsize = sizeof(AlloyPy_Kernel),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A body-only kernel (made by alloy.metal_kernel). Call it with keywords: inputs, "
              "output_shapes, output_dtypes, grid (THREADS), threadgroup, template, init_value, verbose, "
              "stream, device, outputs. Returns a list of alloy.Array.",
    .tp_vectorcall_offset = offsetof(AlloyPy_Kernel, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = (destructor)Kernel_dealloc,
    .tp_repr = (reprfunc)Kernel_repr,
    .tp_members = Kernel_members,
};

int alloypy_kernel_init(PyObject *m) {
    for (int i = 0; i < KW_COUNT; i++)
        if (!(kw_interned[i] = PyUnicode_InternFromString(KW_NAMES[i]))) return -1;
    if (PyType_Ready(&AlloyPy_KernelType) < 0) return -1;
    Py_INCREF((PyObject *)&AlloyPy_KernelType);
    return PyModule_AddObject(m, "Kernel", (PyObject *)&AlloyPy_KernelType);
}
