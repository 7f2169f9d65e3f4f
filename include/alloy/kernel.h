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
