/* dialect.h — the MSL dialect: token scanning, name rules, the MSL-to-C++
 * rewrite and the generation of whole translation units.
 *
 * Written once for every backend: only the prelude and the entry-point
 * signature differ per target. Generated source layout:
 *
 *   <prelude of the target>
 *   #line 1 "<kernel>.header"   <rewritten header>
 *   <argument/attribute plumbing and template arguments>
 *   #line 1 "<kernel>.body"     <rewritten body>
 *   <entry points>
 *
 * The rewrite preserves line structure, so compiler diagnostics point at the
 * user's own body and header lines.
 *
 * Argument slots, in order (both sides of every backend rely on this):
 *   for each input i:  data; then `<in>_shape` if referenced, `<in>_strides`
 *                      if referenced (not for 0-d)
 *   for each output j: data
 *   for each launch constant: its value (by value, in the dtype's C type)
 *   for each tensor map: the map (CUDA: the encoded 128-byte CUtensorMap,
 *                      by value; CPU: a pointer to an alloy_tensor_map)
 * (`<in>_ndim` is no slot: it is a compile-time constant of the
 * specialisation.) */
#ifndef ALLOY_DIALECT_H
#define ALLOY_DIALECT_H

#include <stddef.h>
#include <stdint.h>
#include "alloy/dtype.h"
#include "alloy/kernel.h"
#include "alloy/status.h"

typedef enum alloy_codegen_target {
    ALLOY_TARGET_CPU = 0,
    ALLOY_TARGET_CUDA = 1
} alloy_codegen_target;

/* ---- token scanner ---------------------------------------------------- */

typedef enum alloy_token_kind {
    ALLOY_TOK_IDENT,
    ALLOY_TOK_NUMBER,
    ALLOY_TOK_STRING,  /* "..." */
    ALLOY_TOK_CHAR,    /* '...' */
    ALLOY_TOK_PUNCT,   /* operators and punctuation, longest match (`::`, `<<=`, `[[`) */
    ALLOY_TOK_PREPROC, /* a whole preprocessor line (with continuations) */
    ALLOY_TOK_COMMENT
} alloy_token_kind;

typedef struct alloy_token {
    alloy_token_kind kind;
    int start;  /* byte offset in the source */
    int len;
    int line;   /* 1-based */
    int col;    /* 1-based */
} alloy_token;

/* Tokenises `src`. *tokens is malloc'd (free with free()). An unterminated
 * comment/string is ALLOY_ERROR_INVALID_ARGUMENT naming `what` and the line. */
alloy_status alloy_scan(const char *src, const char *what, alloy_token **tokens, int *count);

/* 1 if `ident` occurs as an identifier token (not in comments or strings). */
int alloy_source_mentions(const char *src, const char *ident);

/* ---- names --------------------------------------------------------------- */

/* OK if `name` may name a kernel input/output/template argument: a valid C
 * identifier, not a C++/MSL keyword or type, not a thread attribute, not
 * reserved (`alloy_` prefix, leading `__`). `role` ("input", ...) goes into
 * the message. */
alloy_status alloy_check_identifier(const char *name, const char *role);

/* Thread attributes (MSL names) the body can reference. */
int alloy_attribute_count(void);
const char *alloy_attribute_name(int index);

/* ---- kernel source analysis (at construction) ---------------------------- */

/* Checks the body and header: a source that is a whole `kernel void f(...)`
 * definition is rejected ("the source is the body of a kernel ..."), as are
 * unsupported constructs (textures, samplers, ...), naming the construct and
 * line. *uses_sync = 1 when header or body uses a barrier, a SIMD operation or
 * simdgroup matrices (the CPU runs such kernels on fibers). */
alloy_status alloy_analyze_source(const char *kernel_name, const char *body,
                                  const char *header, int *uses_sync);

/* ---- code generation ----------------------------------------------------- */

typedef struct alloy_codegen_input {
    const char *name;
    alloy_dtype dtype;
    int is_scalar; /* 0-d: the body sees a value, no _shape/_strides/_ndim */
    int ndim;      /* rank (1..8) of a non-scalar input: `<name>_ndim` is this
                      compile-time constant, so loops over the shape unroll */
} alloy_codegen_input;

typedef struct alloy_codegen_output {
    const char *name;
    alloy_dtype dtype;
} alloy_codegen_output;

typedef enum alloy_template_kind {
    ALLOY_TEMPLATE_INT,
    ALLOY_TEMPLATE_BOOL,
    ALLOY_TEMPLATE_DTYPE
} alloy_template_kind;

typedef struct alloy_template_arg {
    char name[64];
    alloy_template_kind kind;
    int64_t ivalue;     /* INT and BOOL */
    alloy_dtype dvalue; /* DTYPE */
} alloy_template_arg;

/* A launch constant: a by-value scalar the body sees as `const T name`
 * (its value is not part of the generated code). */
typedef struct alloy_constant_arg {
    char name[64];
    alloy_dtype dtype; /* bool, int32, uint32, int64, uint64, float32, float64 */
    union {
        int64_t i;
        uint64_t u;
        double f;
        unsigned char bytes[8];
    } value; /* the launch's value, in the dtype's C type */
} alloy_constant_arg;

/* A tensor map of a launch: the body sees `const alloy_tensor_map &name`
 * (only the name is part of the generated code; the spec is the launch's). */
typedef struct alloy_tensor_map_arg {
    char name[64];
    alloy_tensor_map_spec spec;
} alloy_tensor_map_arg;

typedef struct alloy_codegen_request {
    alloy_codegen_target target;
    const char *kernel_name;
    const char *body;
    const char *header; /* may be NULL */
    int n_inputs;
    const alloy_codegen_input *inputs;
    int n_outputs;
    const alloy_codegen_output *outputs;
    int atomic_outputs;
    int n_templates;
    const alloy_template_arg *templates;
    int n_constants; /* launch constants: one argument slot each, after the outputs */
    const alloy_constant_arg *constants;
    int n_tensor_maps; /* tensor maps: one argument slot each, after the constants */
    const alloy_tensor_map_arg *tensor_maps;
    /* The launch's geometry class (alloy_launch_geometry): which dimensions
     * have a partial last threadgroup, and in which the rounded-up grid
     * passes 2^32 threads. A target may use it to drop the out-of-grid check
     * and the partial-size arithmetic where they cannot matter. */
    unsigned geometry;
    /* The dispatch threadgroup size when the code may be specialised on it
     * (the CPU's barrier regions: constant trip counts), else zeros. */
    unsigned threadgroup[3];
    /* CPU only: build for ALLOY_CPU_DEBUG (checked buffers, threadgroup
     * arrays and barrier sites; src/dialect/prelude/cpu_debug.h). */
    int cpu_debug;
    /* The launch may overlap the previous kernel (alloy_launch_set_overlap):
     * only then do alloy_wait_previous_kernel and alloy_start_next_kernel
     * become instructions (ALLOY_OVERLAP_LAUNCH); an ordinary launch's code
     * has none (on an H200 the pair cost a kernel of short threadgroups 17
     * points of copy bandwidth even when the launch did not overlap). */
    int overlap;
} alloy_codegen_request;

/* Bits of alloy_codegen_request.geometry, per dimension d (0 = x). */
#define ALLOY_GEOMETRY_PARTIAL(d) (1u << (d))    /* grid[d] % threadgroup[d] != 0 */
#define ALLOY_GEOMETRY_WIDE(d) (1u << ((d) + 3)) /* groups * threadgroup > UINT32_MAX */
#define ALLOY_GEOMETRY_ALL 0x3fu                 /* every check (the safe default) */

typedef struct alloy_codegen_result {
    char *source;   /* malloc'd full translation unit */
    int uses_sync;
    /* CPU: the body synchronises, but its barriers run as regions between
     * loops over the group's threads (no fibers; the kernel reports no
     * synchronisation to the runtime) */
    int region_loops;
    /* Which optional slots each input gets (the core builds arguments from
     * these): bit 0 shape, bit 1 strides. n_inputs entries, malloc'd. */
    unsigned *input_slots;
    int n_slots;    /* total argument slots */
} alloy_codegen_result;

#define ALLOY_SLOT_SHAPE 1u
#define ALLOY_SLOT_STRIDES 2u

alloy_status alloy_codegen(const alloy_codegen_request *req, alloy_codegen_result *out);

/* The CUDA entry point's name for a kernel, into out (n bytes, n >= 16):
 * "alloy_kernel_" and the kernel's name without a leading "alloy_", each
 * byte not a letter, digit or '_' as '_', cut to fit; "alloy_kernel" for an
 * empty or NULL name. Profilers (ncu -k, nsys) tell kernels apart by it. */
void alloy_cuda_entry_name(const char *kernel_name, char *out, size_t n);
#define ALLOY_CUDA_ENTRY_MAX 96
void alloy_codegen_result_clear(alloy_codegen_result *r);

/* The embedded prelude of a target (static storage). */
const char *alloy_prelude(alloy_codegen_target target);

/* The Metal 4 tensor operations (prelude/tensor.h), pasted after the target's
 * prelude when the source uses them (alloy_source_uses_tensor_ops). */
const char *alloy_prelude_tensor(void);

/* 1 when `src` names a Metal 4 tensor type or tensor operation. */
int alloy_source_uses_tensor_ops(const char *src);

#endif
