/* launch_internal.h — the launch configuration struct (see kernel.h). */
#ifndef ALLOY_CORE_LAUNCH_INTERNAL_H
#define ALLOY_CORE_LAUNCH_INTERNAL_H

#include "backend.h"

typedef struct alloy_output_spec {
    int ndim;
    int64_t shape[ALLOY_MAX_NDIM];
    alloy_dtype dtype;
    alloy_array *array; /* caller-provided (a reference held), or NULL */
} alloy_output_spec;

struct alloy_launch {
    alloy_output_spec *outputs;
    int n_outputs, cap_outputs;
    uint32_t grid[3], threadgroup[3];
    int has_grid, has_threadgroup;
    int has_init;
    double init_value;
    int verbose;
    size_t threadgroup_memory;
    int overlap; /* alloy_launch_set_overlap */
    alloy_template_arg *templates;
    int n_templates, cap_templates;
    alloy_constant_arg *constants;
    int n_constants, cap_constants;
    alloy_tensor_map_arg tensor_maps[ALLOY_MAX_TENSOR_MAPS]; /* in the order first set */
    int n_tensor_maps;
};

#endif
