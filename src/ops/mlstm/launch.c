/* launch.c — alloy_mlstm_launch (mlstm_internal.h): one launch of an mLSTM
 * kernel file from a description — its template arguments, int32 launch
 * constants, scale and eps, grid, threadgroup memory and arrays — so each op
 * states what differs and the runtime calls are written once. */
#include <stdint.h>

#include "core/error.h"
#include "ops/mlstm/mlstm_internal.h"

alloy_status alloy_mlstm_launch(const alloy_mlstm_launch_spec *s) {
    if (s->groups <= 0) return ALLOY_OK;
    if (s->groups > (int64_t)(UINT32_MAX / s->threads))
        return alloy_error(ALLOY_ERROR_UNSUPPORTED,
                           "%s: %lld threadgroups (sequences or chunks, times NH and tiles) are too many for one launch",
                           s->fn, (long long)s->groups);
    alloy_launch *l = NULL;
    alloy_status st = alloy_launch_new(&l);
    if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "T", s->dt);
    if (st == ALLOY_OK && s->to_named) st = alloy_launch_add_template_dtype(l, "TO", s->out_dt);
    for (int e = 0; e < s->n_tints && st == ALLOY_OK; e++)
        st = alloy_launch_add_template_int(l, s->tints[e].name, s->tints[e].value);
    for (int e = 0; e < s->n_tbools && st == ALLOY_OK; e++)
        st = alloy_launch_add_template_bool(l, s->tbools[e].name, (int)s->tbools[e].value);
    for (int e = 0; e < s->n_outs && st == ALLOY_OK; e++) st = alloy_launch_add_output_array(l, s->outs[e]);
    if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)(s->groups * s->threads), 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, s->threads, 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup_memory(l, s->smem > 0 ? s->smem : 16);
    for (int e = 0; e < s->n_consts && st == ALLOY_OK; e++)
        st = alloy_launch_set_constant_int(l, s->consts[e].name, ALLOY_INT32, s->consts[e].value);
    if (st == ALLOY_OK) st = alloy_launch_set_constant(l, "scale", ALLOY_FLOAT32, s->scale);
    if (st == ALLOY_OK) st = alloy_launch_set_constant(l, "eps", ALLOY_FLOAT32, s->eps);
    alloy_array *res[ALLOY_MLSTM_MAX_OUTPUTS] = {NULL};
    if (st == ALLOY_OK && s->n_outs > ALLOY_MLSTM_MAX_OUTPUTS)
        st = alloy_error(ALLOY_ERROR_INTERNAL, "%s: %d outputs (at most %d); please report this", s->fn, s->n_outs,
                         ALLOY_MLSTM_MAX_OUTPUTS);
    if (st == ALLOY_OK) st = alloy_kernel_apply(s->kernel, s->n_ins, s->ins, l, s->stream, res);
    for (int e = 0; e < ALLOY_MLSTM_MAX_OUTPUTS; e++) alloy_array_free(res[e]);
    alloy_launch_free(l);
    return st;
}
