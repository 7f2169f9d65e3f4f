/* launch.c — the launch configuration object: outputs, grid, threadgroup,
 * template arguments, launch constants, tensor maps, init value, verbosity.
 * Checks what it can on its own; the kernel checks the rest against its
 * names and inputs when it is applied. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "array_internal.h"
#include "error.h"
#include "launch_internal.h"

alloy_status alloy_launch_new(alloy_launch **out) {
    if (!out) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "out is NULL");
    *out = calloc(1, sizeof **out);
    return *out ? ALLOY_OK : alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
}

static void clear_outputs(alloy_launch *l) {
    for (int i = 0; i < l->n_outputs; i++) alloy_array_free(l->outputs[i].array);
    l->n_outputs = 0;
}

void alloy_launch_free(alloy_launch *l) {
    if (!l) return;
    clear_outputs(l);
    free(l->outputs);
    free(l->templates);
    free(l->constants);
    free(l);
}

alloy_status alloy_launch_reset(alloy_launch *l) {
    if (!l) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "launch is NULL");
    clear_outputs(l);
    alloy_output_spec *o = l->outputs;
    alloy_template_arg *t = l->templates;
    alloy_constant_arg *c = l->constants;
    int co = l->cap_outputs, ct = l->cap_templates, cc = l->cap_constants;
    memset(l, 0, sizeof *l);
    l->outputs = o;
    l->cap_outputs = co;
    l->templates = t;
    l->cap_templates = ct;
    l->constants = c;
    l->cap_constants = cc;
    return ALLOY_OK;
}

static alloy_output_spec *push_output(alloy_launch *l) {
    if (l->n_outputs == l->cap_outputs) {
        int cap = l->cap_outputs ? 2 * l->cap_outputs : 4;
        alloy_output_spec *p = realloc(l->outputs, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        l->outputs = p;
        l->cap_outputs = cap;
    }
    alloy_output_spec *o = &l->outputs[l->n_outputs++];
    memset(o, 0, sizeof *o);
    return o;
}

static alloy_status check_output_shape(int index, int ndim, const int64_t *shape, alloy_dtype dtype) {
    if (ndim < 0 || ndim > ALLOY_MAX_NDIM)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "output %d: ndim %d is out of range [0, %d]",
                           index, ndim, ALLOY_MAX_NDIM);
    if (ndim && !shape) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "output %d: shape is NULL", index);
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "output %d: shape[%d] = %lld is negative",
                               index, d, (long long)shape[d]);
    if ((unsigned)dtype >= ALLOY_DTYPE_COUNT)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "output %d: invalid dtype %d", index, (int)dtype);
    return ALLOY_OK;
}

alloy_status alloy_launch_add_output(alloy_launch *l, int ndim, const int64_t *shape, alloy_dtype dtype) {
    if (!l) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "launch is NULL");
    alloy_status st = check_output_shape(l->n_outputs, ndim, shape, dtype);
    if (st != ALLOY_OK) return st;
    alloy_output_spec *o = push_output(l);
    if (!o) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
    o->ndim = ndim;
    if (ndim) memcpy(o->shape, shape, (size_t)ndim * sizeof *shape);
    o->dtype = dtype;
    return ALLOY_OK;
}

alloy_status alloy_launch_add_output_array(alloy_launch *l, alloy_array *a) {
    if (!l || !a) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "launch or array is NULL");
    if (!alloy_array_is_row_contiguous(a))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "output %d: a caller-provided output must be row-contiguous (outputs are "
                           "always row-major)", l->n_outputs);
    if (a->read_only)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "output %d: the array is read-only (imported with the DLPack read-only flag)",
                           l->n_outputs);
    alloy_output_spec *o = push_output(l);
    if (!o) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
    o->ndim = a->ndim;
    memcpy(o->shape, a->shape, sizeof o->shape);
    o->dtype = a->dtype;
    o->array = alloy_array_retain(a);
    return ALLOY_OK;
}

alloy_status alloy_launch_set_outputs(alloy_launch *l, int n_shapes, const int *ndims,
                                      const int64_t *const *shapes, int n_dtypes,
                                      const alloy_dtype *dtypes) {
    if (!l) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "launch is NULL");
    if (n_shapes != n_dtypes)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "output_shapes has %d entries but output_dtypes has %d: give one shape and "
                           "one dtype per output",
                           n_shapes, n_dtypes);
    if (n_shapes < 0 || (n_shapes && (!ndims || !shapes || !dtypes)))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "output lists are NULL");
    for (int i = 0; i < n_shapes; i++) {
        alloy_status st = check_output_shape(i, ndims[i], shapes[i], dtypes[i]);
        if (st != ALLOY_OK) return st;
    }
    clear_outputs(l);
    for (int i = 0; i < n_shapes; i++) {
        alloy_status st = alloy_launch_add_output(l, ndims[i], shapes[i], dtypes[i]);
        if (st != ALLOY_OK) return st;
    }
    return ALLOY_OK;
}

alloy_status alloy_launch_set_grid(alloy_launch *l, uint32_t x, uint32_t y, uint32_t z) {
    if (!l) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "launch is NULL");
    l->grid[0] = x; l->grid[1] = y; l->grid[2] = z;
    l->has_grid = 1;
    return ALLOY_OK;
}

alloy_status alloy_launch_set_threadgroup(alloy_launch *l, uint32_t x, uint32_t y, uint32_t z) {
    if (!l) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "launch is NULL");
    if (!x || !y || !z)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "threadgroup (%u, %u, %u) has a zero dimension: every dimension must be >= 1",
                           x, y, z);
    l->threadgroup[0] = x; l->threadgroup[1] = y; l->threadgroup[2] = z;
    l->has_threadgroup = 1;
    return ALLOY_OK;
}

alloy_status alloy_launch_set_init_value(alloy_launch *l, double v) {
    if (!l) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "launch is NULL");
    l->has_init = 1;
    l->init_value = v;
    return ALLOY_OK;
}

alloy_status alloy_launch_set_verbose(alloy_launch *l, int verbose) {
    if (!l) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "launch is NULL");
    l->verbose = verbose != 0;
    return ALLOY_OK;
}

alloy_status alloy_launch_set_overlap(alloy_launch *l, int on) {
    if (!l) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "launch is NULL");
    l->overlap = on != 0;
    return ALLOY_OK;
}

alloy_status alloy_launch_set_threadgroup_memory(alloy_launch *l, size_t bytes) {
    if (!l) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "launch is NULL");
    if (bytes > ((size_t)1 << 30))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "threadgroup memory of %zu bytes is not plausible (at most 1 GiB)", bytes);
    l->threadgroup_memory = bytes;
    return ALLOY_OK;
}

/* The kinds of launch names, which share one namespace (the body sees each
 * as a plain name). */
enum { NAME_TEMPLATE, NAME_CONSTANT, NAME_TENSOR_MAP };
static const char *const NAME_ROLE[] = {"template argument", "launch constant", "tensor map"};

/* INVALID_ARGUMENT when `name`, given as a `kind`, is already a name of
 * another kind. */
static alloy_status name_taken(const alloy_launch *l, const char *name, int kind) {
    for (int other = NAME_TEMPLATE; other <= NAME_TENSOR_MAP; other++) {
        if (other == kind) continue;
        const int n = other == NAME_TEMPLATE ? l->n_templates
                      : other == NAME_CONSTANT ? l->n_constants
                                               : l->n_tensor_maps;
        for (int i = 0; i < n; i++) {
            const char *have = other == NAME_TEMPLATE ? l->templates[i].name
                               : other == NAME_CONSTANT ? l->constants[i].name
                                                        : l->tensor_maps[i].name;
            if (strcmp(have, name) == 0)
                return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s '%s' has the name of a %s: each name once",
                                   NAME_ROLE[kind], name, NAME_ROLE[other]);
        }
    }
    return ALLOY_OK;
}

static alloy_status add_template(alloy_launch *l, const char *name, alloy_template_kind kind,
                                 int64_t iv, alloy_dtype dv) {
    if (!l) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "launch is NULL");
    alloy_status st = alloy_check_identifier(name, "template argument");
    if (st != ALLOY_OK) return st;
    if (strlen(name) >= sizeof l->templates[0].name)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "template argument name '%s' is too long", name);
    for (int i = 0; i < l->n_templates; i++)
        if (strcmp(l->templates[i].name, name) == 0)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "template argument '%s' is given twice: each name once", name);
    if ((st = name_taken(l, name, NAME_TEMPLATE)) != ALLOY_OK) return st;
    if (kind == ALLOY_TEMPLATE_DTYPE && (unsigned)dv >= ALLOY_DTYPE_COUNT)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "template argument '%s': invalid dtype %d",
                           name, (int)dv);
    if (l->n_templates == l->cap_templates) {
        int cap = l->cap_templates ? 2 * l->cap_templates : 4;
        alloy_template_arg *p = realloc(l->templates, (size_t)cap * sizeof *p);
        if (!p) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
        l->templates = p;
        l->cap_templates = cap;
    }
    alloy_template_arg *t = &l->templates[l->n_templates++];
    memset(t, 0, sizeof *t);
    strcpy(t->name, name);
    t->kind = kind;
    t->ivalue = iv;
    t->dvalue = dv;
    return ALLOY_OK;
}

alloy_status alloy_launch_add_template_int(alloy_launch *l, const char *name, int64_t value) {
    return add_template(l, name, ALLOY_TEMPLATE_INT, value, ALLOY_FLOAT32);
}
alloy_status alloy_launch_add_template_bool(alloy_launch *l, const char *name, int value) {
    return add_template(l, name, ALLOY_TEMPLATE_BOOL, value != 0, ALLOY_FLOAT32);
}
alloy_status alloy_launch_add_template_dtype(alloy_launch *l, const char *name, alloy_dtype value) {
    return add_template(l, name, ALLOY_TEMPLATE_DTYPE, 0, value);
}

/* ---- launch constants --------------------------------------------------- */

static int constant_dtype_ok(alloy_dtype dt) {
    switch (dt) {
    case ALLOY_BOOL: case ALLOY_INT32: case ALLOY_UINT32: case ALLOY_INT64: case ALLOY_UINT64:
    case ALLOY_FLOAT32: case ALLOY_FLOAT64: return 1;
    default: return 0;
    }
}

/* Finds or appends the constant `name` (a later value replaces an earlier
 * one: a launch is reused with new values). */
static alloy_status constant_slot(alloy_launch *l, const char *name, alloy_dtype dtype,
                                  alloy_constant_arg **out) {
    if (!l) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "launch is NULL");
    alloy_status st = alloy_check_identifier(name, "launch constant");
    if (st != ALLOY_OK) return st;
    if (strlen(name) >= sizeof l->constants[0].name)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "launch constant name '%s' is too long", name);
    if (!constant_dtype_ok(dtype))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "launch constant '%s': dtype %s is not one a constant can have (bool, "
                           "int32, uint32, int64, uint64, float32, float64)",
                           name, alloy_dtype_name(dtype));
    if ((st = name_taken(l, name, NAME_CONSTANT)) != ALLOY_OK) return st;
    for (int i = 0; i < l->n_constants; i++)
        if (strcmp(l->constants[i].name, name) == 0) {
            if (l->constants[i].dtype != dtype)
                return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                                   "launch constant '%s' was added as %s, now as %s: a constant keeps "
                                   "its dtype (alloy_launch_reset to start over)",
                                   name, alloy_dtype_name(l->constants[i].dtype), alloy_dtype_name(dtype));
            *out = &l->constants[i];
            return ALLOY_OK;
        }
    if (l->n_constants == l->cap_constants) {
        int cap = l->cap_constants ? 2 * l->cap_constants : 4;
        alloy_constant_arg *p = realloc(l->constants, (size_t)cap * sizeof *p);
        if (!p) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
        l->constants = p;
        l->cap_constants = cap;
    }
    alloy_constant_arg *c = &l->constants[l->n_constants++];
    memset(c, 0, sizeof *c);
    strcpy(c->name, name);
    c->dtype = dtype;
    *out = c;
    return ALLOY_OK;
}

alloy_status alloy_launch_set_constant(alloy_launch *l, const char *name, alloy_dtype dtype,
                                       double value) {
    alloy_constant_arg *c = NULL; /* set unless constant_slot fails */
    alloy_status st = constant_slot(l, name, dtype, &c);
    if (st != ALLOY_OK) return st;
    memset(&c->value, 0, sizeof c->value);
    switch (dtype) {
    case ALLOY_FLOAT64: c->value.f = value; break;
    case ALLOY_FLOAT32: {
        float f = (float)value;
        memcpy(c->value.bytes, &f, sizeof f);
        break;
    }
    default: {
        /* an integer (or bool) dtype: the value must be a whole number in range */
        const int whole = value == value && value >= -9223372036854775808.0 &&
                          value < 18446744073709551616.0 && (value < 0 ? (double)(int64_t)value == value
                                                                        : (double)(uint64_t)value == value);
        if (!whole)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "launch constant '%s': %g is not a %s value",
                               name, value, alloy_dtype_name(dtype));
        if (dtype == ALLOY_UINT64) {
            c->value.u = (uint64_t)value;
            return ALLOY_OK;
        }
        if (value >= 9223372036854775808.0)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "launch constant '%s': %g is out of range for %s", name, value,
                               alloy_dtype_name(dtype));
        return alloy_launch_set_constant_int(l, name, dtype, (int64_t)value);
    }
    }
    return ALLOY_OK;
}

alloy_status alloy_launch_set_constant_int(alloy_launch *l, const char *name, alloy_dtype dtype,
                                           int64_t value) {
    alloy_constant_arg *c = NULL; /* set unless constant_slot fails */
    alloy_status st = constant_slot(l, name, dtype, &c);
    if (st != ALLOY_OK) return st;
    memset(&c->value, 0, sizeof c->value);
    switch (dtype) {
    case ALLOY_BOOL: c->value.bytes[0] = value != 0; break;
    case ALLOY_INT32:
    case ALLOY_UINT32:
        if ((dtype == ALLOY_INT32 && (value < INT32_MIN || value > INT32_MAX)) ||
            (dtype == ALLOY_UINT32 && (value < 0 || value > (int64_t)UINT32_MAX)))
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "launch constant '%s': %lld is out of range for %s", name,
                               (long long)value, alloy_dtype_name(dtype));
        {
            int32_t v = (int32_t)value;
            memcpy(c->value.bytes, &v, sizeof v);
        }
        break;
    case ALLOY_FLOAT32: {
        float f = (float)value;
        memcpy(c->value.bytes, &f, sizeof f);
        break;
    }
    case ALLOY_FLOAT64: c->value.f = (double)value; break;
    default: c->value.i = value; break; /* int64, uint64 (bits) */
    }
    return ALLOY_OK;
}

/* ---- tensor maps ----------------------------------------------------------- */

/* The spec is stored as given: it is checked against the input it describes
 * when the kernel is applied (the input is known only then). */
alloy_status alloy_launch_set_tensor_map(alloy_launch *l, const char *name,
                                         const alloy_tensor_map_spec *spec) {
    if (!l) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "launch is NULL");
    alloy_status st = alloy_check_identifier(name, "tensor map");
    if (st != ALLOY_OK) return st;
    if (strlen(name) >= sizeof l->tensor_maps[0].name)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "tensor map name '%s' is too long", name);
    if (!spec) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "tensor map '%s': spec is NULL", name);
    if ((st = name_taken(l, name, NAME_TENSOR_MAP)) != ALLOY_OK) return st;
    alloy_tensor_map_arg *m = NULL;
    for (int i = 0; i < l->n_tensor_maps && !m; i++)
        if (strcmp(l->tensor_maps[i].name, name) == 0) m = &l->tensor_maps[i];
    if (!m) {
        if (l->n_tensor_maps == ALLOY_MAX_TENSOR_MAPS)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "tensor map '%s': a launch takes at most %d tensor maps "
                               "(ALLOY_MAX_TENSOR_MAPS)", name, ALLOY_MAX_TENSOR_MAPS);
        m = &l->tensor_maps[l->n_tensor_maps++];
        memset(m, 0, sizeof *m);
        strcpy(m->name, name);
    }
    m->spec = *spec;
    return ALLOY_OK;
}
