/* alloy_py.h — what the files of the CPython extension `alloy._alloy` share:
 * the object layouts (Dtype, Device, Stream, Array, Kernel) and the helpers
 * each file exports to the others. The extension is a thin layer over the
 * public C API (include/alloy/alloy.h); everything on the call path of a
 * kernel is C, the cold paths (NumPy conversion, repr) call into Python. */
#ifndef ALLOY_PY_H
#define ALLOY_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <alloy/alloy.h>

/* ---- errors.c: alloy.Error and one subclass per status ------------------- */
int alloypy_errors_init(PyObject *module);
/* Raises the exception of `status` with the thread's last alloy message
 * (prefixed by `context` when not NULL). Always returns NULL. */
PyObject *alloypy_raise(alloy_status status, const char *context);
/* Raises the exception of `status` with a message of our own. */
PyObject *alloypy_raise_fmt(alloy_status status, const char *fmt, ...);
PyObject *alloypy_error_type(alloy_status status);

/* ---- dtype.c: alloy.Dtype and conversion from Python dtype spellings ----- */
typedef struct {
    PyObject_HEAD
    alloy_dtype dtype;
} AlloyPy_Dtype;
extern PyTypeObject AlloyPy_DtypeType;
int alloypy_dtype_init(PyObject *module);
PyObject *alloypy_dtype_object(alloy_dtype dtype); /* borrowed */
/* NumPy dtypes and scalar types, PyTorch dtypes, strings ('bfloat16'),
 * alloy.Dtype. Returns -1 with TypeError when `obj` is no dtype. */
int alloypy_dtype_from_object(PyObject *obj, alloy_dtype *out);
/* Like alloypy_dtype_from_object but returns 0 without raising when `obj`
 * is not a dtype. */
int alloypy_dtype_try(PyObject *obj, alloy_dtype *out);

/* ---- precision.c: the `precision` keyword -------------------------------- */
/* "highest" | "high" | "default" (None: dflt) to *out; -1 with an exception
 * naming op otherwise. */
int alloypy_precision_from_object(const char *op, PyObject *obj, alloy_precision dflt, alloy_precision *out);

/* ---- device.c: alloy.Device, alloy.Stream, wrapped foreign streams ------- */
typedef struct {
    PyObject_HEAD
    alloy_device *device;
} AlloyPy_Device;
extern PyTypeObject AlloyPy_DeviceType;

typedef struct {
    PyObject_HEAD
    alloy_stream *stream;
    alloy_device *device;
    int owned;         /* alloy_stream_free on dealloc (created or wrapped) */
    PyObject *foreign; /* the Python object whose stream was wrapped, or NULL */
} AlloyPy_Stream;
extern PyTypeObject AlloyPy_StreamType;

int alloypy_device_init(PyObject *module);
PyObject *alloypy_device_object(alloy_device *device); /* new reference */
/* None -> NULL (caller decides), alloy.Device, or a name ("cpu", "cuda:1"). */
int alloypy_device_from_object(PyObject *obj, alloy_device **out);
alloy_device *alloypy_default_device(void); /* "auto", looked up once; NULL+exception on failure */
alloy_device *alloypy_cpu_device(void);
int alloypy_device_ordinal(alloy_device *device);
int alloypy_is_cpu(alloy_device *device);

/* The stream a launch or export uses. `obj` may be an alloy.Stream, an
 * alloy.Device or device name (its default stream), an int (a native
 * CUstream handle), or an object with `cuda_stream` (torch.cuda.Stream) or
 * `ptr` (cupy.cuda.Stream). Returns the stream's device in *device (NULL
 * when the object does not say: raw handles). */
typedef struct {
    int kind;          /* STREAM_NONE, STREAM_OBJECT, STREAM_DEVICE, STREAM_NATIVE */
    AlloyPy_Stream *object;
    alloy_device *device;
    void *native;
} alloypy_stream_spec;
enum { STREAM_NONE = 0, STREAM_OBJECT, STREAM_DEVICE, STREAM_NATIVE };
int alloypy_stream_parse(PyObject *obj, alloypy_stream_spec *spec);
/* Resolves a parsed spec on `device`: *out is a new reference to a Stream
 * object, or NULL for the device's default stream. -1 with an exception when
 * the spec names another device or the handle cannot be wrapped. */
int alloypy_stream_resolve(const alloypy_stream_spec *spec, alloy_device *device,
                           AlloyPy_Stream **out);
/* A cached wrapper of a native stream handle of `device` (borrowed). */
AlloyPy_Stream *alloypy_stream_wrapped(alloy_device *device, void *native);
/* The alloy_stream of a Stream object or the device's default stream. */
alloy_stream *alloypy_stream_of(PyObject *stream_or_null, alloy_device *device);

/* ---- array.c: alloy.Array ------------------------------------------------ */
typedef struct {
    PyObject_HEAD
    alloy_array *array;
    PyObject *stream; /* AlloyPy_Stream the array was last written on, or NULL (default) */
} AlloyPy_Array;
extern PyTypeObject AlloyPy_ArrayType;
int alloypy_array_init(PyObject *module);
/* Wraps `array` (steals the reference; releases it on failure). */
PyObject *alloypy_array_wrap(alloy_array *array, PyObject *stream);
#define AlloyPy_Array_Check(o) (Py_TYPE(o) == &AlloyPy_ArrayType)

/* ---- convert.c: Python objects -> alloy arrays -------------------------- */
enum { ARG_ARRAY = 1, ARG_SCALAR, ARG_DLPACK, ARG_BUFFER };
typedef struct {
    PyObject *obj;        /* borrowed */
    int kind;
    alloy_device *device; /* where the object lives; NULL for Python scalars */
    int dl_type;          /* DLPack device type (ARG_DLPACK) */
    int dl_id;            /* DLPack device id (ARG_DLPACK) */
    const struct alloypy_xapi *xapi; /* the type's DLPack C exchange API, or NULL */
} alloypy_probe;
int alloypy_convert_init(void);
/* Finds what `obj` is and where it lives, without converting it. */
int alloypy_probe_object(PyObject *obj, alloypy_probe *p, const char *what);
/* Converts a probed object to an alloy array on `device`: no copy when it
 * already lives there; CPU memory is copied to a GPU device. `stream` is the
 * stream the array will be used on (its handle goes to CUDA producers).
 * `writable`: the array will be written (outputs): no copy is allowed and
 * read-only memory is refused. */
int alloypy_convert(const alloypy_probe *p, alloy_device *device, alloy_stream *stream,
                    int writable, const char *what, alloy_array **out);
/* asarray/from_dlpack on the object's own device (or `device`). */
PyObject *alloypy_asarray(PyObject *obj, PyObject *device, PyObject *stream);

/* ---- cexchange.c: the DLPack C exchange API (__dlpack_c_exchange_api__) ---- */
struct alloypy_xapi;
int alloypy_cx_init(PyObject *module);
/* The type's validated table, or NULL (none, unusable, or switched off). */
const struct alloypy_xapi *alloypy_cx_lookup(PyTypeObject *type);
/* The object's DLPack device through the table: 1 found, 0 not (no exception). */
int alloypy_cx_probe(const struct alloypy_xapi *api, PyObject *obj, int *dl_type, int *dl_id);
/* Imports a probed object through p->xapi, ordering the producer's current
 * stream before `stream`: 1 done, 0 not taken (use __dlpack__; no exception),
 * -1 error. */
int alloypy_cx_import(const alloypy_probe *p, alloy_device *device, alloy_stream *stream, const char *what,
                      alloy_array **out);

/* ---- kernel.c: alloy.metal_kernel and the kernel callable ----------------- */
extern PyTypeObject AlloyPy_KernelType;
int alloypy_kernel_init(PyObject *module);
PyObject *alloypy_metal_kernel(PyObject *self, PyObject *args, PyObject *kwargs);

/* ---- construction (construct.c) ---- */
PyObject *alloypy_empty(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_fill(PyObject *self, PyObject *args);

/* ---- the catalog (linalg.c) ---- */
PyObject *alloypy_matmul(PyObject *self, PyObject *args, PyObject *kwargs);
/* factorizations and solves (linalg_factor.c) */
PyObject *alloypy_cholesky(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_cholesky_solve(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_solve_triangular(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_lu_factor(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_lu_solve(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_solve(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_inv(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_det(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_slogdet(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_info_failures(PyObject *self, PyObject *info);
/* QR, least squares, orthogonal matrices (linalg_qr.c) */
PyObject *alloypy_qr(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_lstsq(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_orthogonal(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_orthonormalize(PyObject *self, PyObject *args, PyObject *kwargs);
/* symmetric eigendecomposition and SVD (linalg_eig.c) */
PyObject *alloypy_eigh(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_svd(PyObject *self, PyObject *args, PyObject *kwargs);
/* the mLSTM cell (mlstm.c) */
PyObject *alloypy_mlstm_step(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_mlstm_parallel(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_mlstm_chunkwise(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_mlstm_chunkwise_backward(PyObject *self, PyObject *args, PyObject *kwargs);
/* the fused nn ops (nn.c) */
PyObject *alloypy_nn_softcap(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_nn_norm(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_nn_norm_backward(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_nn_causal_conv1d(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *alloypy_nn_causal_conv1d_backward(PyObject *self, PyObject *args, PyObject *kwargs);

/* ---- kernel files (kernel_file.c) ---- */
PyObject *alloypy_parse_kernel_file(PyObject *self, PyObject *args, PyObject *kwargs);

/* ---- module.c ------------------------------------------------------------ */
/* The Python helper `alloy._convert.<name>` (imported on first use). */
PyObject *alloypy_helper(const char *name);

#endif
