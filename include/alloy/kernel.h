/* alloy/kernel.h — body-only kernels with the semantics of MLX's
 * mx.fast.metal_kernel.
 *
 *   alloy_kernel_new    name, input/output names, body (MSL), header, flags.
 *                       Validates names and the body's shape; does not compile.
 *   alloy_launch_*      a launch configuration: outputs, grid (in THREADS),
 *                       threadgroup, template arguments, init_value, verbose.
 *   alloy_kernel_apply  generates the full source for the inputs' dtypes,
 *                       compiles it once (memory and disk caches), launches.
 *
 * Launch semantics on every backend: grid counts threads per dimension; the
 * threadgroup is clamped to min(threadgroup, grid) per dimension; edge groups
 * may be partial and threads outside the grid never run the body;
 * `threads_per_threadgroup` is the actual size of the thread's group. A
 * threadgroup over 1024 threads is an error on every backend. A grid with a
 * zero dimension launches nothing and succeeds. Outputs are uninitialised
 * unless an init value is set. */
#ifndef ALLOY_KERNEL_H
#define ALLOY_KERNEL_H

#include <stdint.h>
#include "status.h"
#include "dtype.h"
#include "device.h"
#include "array.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ALLOY_MAX_THREADGROUP 1024

typedef struct alloy_kernel alloy_kernel;
typedef struct alloy_launch alloy_launch;

/* names must be valid C identifiers, unique, not MSL/C++ keywords and not
 * names alloy generates (thread attributes, `<input>_shape`, ...); at least
 * one output. `header` may be NULL. `source` is the BODY of the kernel: a whole
 * `kernel void f(...) {...}` definition is rejected with an explanation. */
alloy_status alloy_kernel_new(const char *name,
                              int n_inputs, const char *const *input_names,
                              int n_outputs, const char *const *output_names,
                              const char *source, const char *header,
                              int ensure_row_contiguous, int atomic_outputs,
                              alloy_kernel **out);
void alloy_kernel_free(alloy_kernel *kernel);
const char *alloy_kernel_name(const alloy_kernel *kernel);
int alloy_kernel_num_inputs(const alloy_kernel *kernel);
int alloy_kernel_num_outputs(const alloy_kernel *kernel);

/* Launch configuration (not thread-safe itself; make one per thread). */
alloy_status alloy_launch_new(alloy_launch **out);
void alloy_launch_free(alloy_launch *launch);
alloy_status alloy_launch_reset(alloy_launch *launch); /* back to the defaults */

/* Outputs, in order: either a shape and dtype (alloy allocates) or a
 * caller-provided row-contiguous array that the kernel writes into. */
alloy_status alloy_launch_add_output(alloy_launch *launch, int ndim, const int64_t *shape,
                                     alloy_dtype dtype);
alloy_status alloy_launch_add_output_array(alloy_launch *launch, alloy_array *array);
/* MLX-style parallel lists; lengths must agree (else INVALID_ARGUMENT).
 * shapes[i] has ndims[i] entries. Replaces any outputs added before. */
alloy_status alloy_launch_set_outputs(alloy_launch *launch,
                                      int n_shapes, const int *ndims,
                                      const int64_t *const *shapes,
                                      int n_dtypes, const alloy_dtype *dtypes);

alloy_status alloy_launch_set_grid(alloy_launch *launch, uint32_t x, uint32_t y, uint32_t z);
alloy_status alloy_launch_set_threadgroup(alloy_launch *launch, uint32_t x, uint32_t y, uint32_t z);
alloy_status alloy_launch_set_init_value(alloy_launch *launch, double value);
alloy_status alloy_launch_set_verbose(alloy_launch *launch, int verbose);

/* Dynamic threadgroup memory (an alloy extension, like the `shared_memory`
 * of MLX's cuda_kernel): `bytes` per threadgroup, seen by the body as
 * `threadgroup uchar* alloy_threadgroup_memory` (16-byte aligned). This is how a
 * kernel gets more than 48 KB on CUDA (up to the device's limit, 227 KB on
 * Hopper); declared `threadgroup` arrays stay static and small. */
alloy_status alloy_launch_set_threadgroup_memory(alloy_launch *launch, size_t bytes);

/* Overlap with the previous kernel (an alloy extension; CUDA's programmatic
 * dependent launch, compute capability 9.0 and newer): the kernel's
 * threadgroups may start while the kernel queued before it on the stream is
 * still running, so that its launch and start are hidden behind that
 * kernel's last threadgroups. The body must then call
 * alloy_wait_previous_kernel() before it touches memory the previous kernel
 * reads or writes (every thread that does; the call returns once that kernel
 * has finished and its writes are visible), and may do anything else before
 * it. The previous kernel may call alloy_start_next_kernel() to let this one
 * start before its own threadgroups end. Elsewhere (the CPU, older GPUs, a
 * driver older than CUDA 12.3, or ALLOY_CUDA_OVERLAP=0) the launch is an
 * ordinary one (alloy_device_overlaps_launches says which) and is compiled
 * as one: like a launch that does not ask to overlap, both calls compile to
 * nothing (they cost each threadgroup time even where nothing overlaps).
 * Off by default for a user's
 * launch (the catalog's nn kernels and mLSTM step use it: ALLOY_OPS_OVERLAP=0
 * turns that off). */
alloy_status alloy_launch_set_overlap(alloy_launch *launch, int on);

/* Template arguments become `constexpr int N = ...;`, `constexpr bool B =
 * ...;` or `using T = float;` at the top of the body. */
alloy_status alloy_launch_add_template_int(alloy_launch *launch, const char *name, int64_t value);
alloy_status alloy_launch_add_template_bool(alloy_launch *launch, const char *name, int value);
alloy_status alloy_launch_add_template_dtype(alloy_launch *launch, const char *name, alloy_dtype value);

/* Launch constants (an alloy extension): by-value scalars the body sees as
 * `const T name` (T the dtype's type: bool, int, uint, long, ulong, float,
 * double). Unlike template arguments, only a constant's name and dtype are
 * part of the compiled specialisation: a new value reuses the compiled kernel,
 * and unlike a 0-d input nothing is allocated or copied to the device (the
 * value travels with the launch). Setting a name again replaces its value
 * (the dtype must stay). dtype: ALLOY_BOOL, ALLOY_INT32, ALLOY_UINT32,
 * ALLOY_INT64, ALLOY_UINT64, ALLOY_FLOAT32, ALLOY_FLOAT64; `value` must be
 * representable (a whole number in range for the integer dtypes). */
alloy_status alloy_launch_set_constant(alloy_launch *launch, const char *name, alloy_dtype dtype,
                                       double value);
alloy_status alloy_launch_set_constant_int(alloy_launch *launch, const char *name, alloy_dtype dtype,
                                           int64_t value);

/* Tensor maps (an alloy extension): a strided box-tiled view of one kernel
 * input or output, for Hopper's tensor copy engine (TMA). The body sees
 * `const alloy_tensor_map &name`: on CUDA the encoded CUtensorMap (a
 * __grid_constant__ kernel parameter, so `&name` is what PTX
 * `cp.async.bulk.tensor` and `prefetch.tensormap` take), on the CPU a plain
 * struct with the view's base pointer, dims, strides, box and swizzle (see
 * docs/dialect.md). As with launch constants only the names, in order, are
 * part of the compiled specialisation; the spec travels with the launch (on
 * CUDA it is encoded at every launch, on the stack). Setting a name again
 * replaces its spec. The spec is checked when the kernel is applied, on
 * every backend: the map must lie inside the array's elements, its base
 * (the array's data + offset elements) be 16-byte aligned, and its fields
 * meet the copy engine's rules (each error names the map and the field).
 * A map describes the array the body sees: an input's row-contiguous copy
 * under ensure_row_contiguous, the output alloy allocates or the caller's.
 * On CUDA a tensor map needs compute capability 9.0 or newer. */
#define ALLOY_TENSOR_MAP_MAX_RANK 5
#define ALLOY_MAX_TENSOR_MAPS 4 /* per launch */
typedef struct alloy_tensor_map_spec {
    int operand;                                /* the array the map describes: kernel input i
                                                   (0..n_inputs-1) or n_inputs + j for output j */
    int rank;                                   /* 1..5 */
    int64_t offset;                             /* elements from the array's first element */
    int64_t dims[ALLOY_TENSOR_MAP_MAX_RANK];    /* extents in elements, innermost first, 1..2^32 */
    int64_t strides[ALLOY_TENSOR_MAP_MAX_RANK]; /* element strides, innermost first; strides[0]
                                                   must be 1, the others * the element size a
                                                   multiple of 16 bytes below 2^40 */
    uint32_t box[ALLOY_TENSOR_MAP_MAX_RANK];    /* elements one copy moves per dimension, 1..256;
                                                   box[0] * the element size a multiple of 16 */
    uint32_t swizzle;                           /* bytes: 0 (none), 32, 64 or 128 (then box[0] *
                                                   the element size must not exceed it) */
} alloy_tensor_map_spec;
alloy_status alloy_launch_set_tensor_map(alloy_launch *launch, const char *name,
                                         const alloy_tensor_map_spec *spec);

/* Runs the kernel. `stream` NULL = the default stream of the inputs' device
 * (or of "auto" when there are no inputs). `outputs` receives one new
 * reference per output (caller frees); for caller-provided output arrays it is
 * a new reference to that array. Inputs must live on the stream's device. */
alloy_status alloy_kernel_apply(alloy_kernel *kernel,
                                int n_inputs, alloy_array *const *inputs,
                                const alloy_launch *launch, alloy_stream *stream,
                                alloy_array **outputs);

/* What alloy would compile for these inputs on `device` (NULL = auto),
 * without compiling or running: the full generated source. `*source` is
 * malloc'd; free it with free(). */
alloy_status alloy_kernel_generated_source(alloy_kernel *kernel,
                                           int n_inputs, alloy_array *const *inputs,
                                           const alloy_launch *launch, alloy_device *device,
                                           char **source);

/* Compiles (through the caches) without launching, and reports. Every string
 * is malloc'd (free with free()); `log` holds the compiler output with line
 * numbers mapped to the body and header, `report` a resource summary. On a
 * compile error the status is ALLOY_ERROR_COMPILE and log is still filled. */
typedef struct alloy_compile_result {
    char *source;
    char *log;
    char *report;
    int from_cache; /* 1 memory, 2 disk, 0 compiled now */
} alloy_compile_result;
alloy_status alloy_kernel_compile(alloy_kernel *kernel,
                                  int n_inputs, alloy_array *const *inputs,
                                  const alloy_launch *launch, alloy_device *device,
                                  alloy_compile_result *result);
void alloy_compile_result_clear(alloy_compile_result *result);

#ifdef __cplusplus
}
#endif
#endif
