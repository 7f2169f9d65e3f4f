/* env_override.h — the catalog kernels' timing overrides: an integer read
 * from the environment (ALLOY_NN_NORM_BWD_PD, ALLOY_MLSTM_GRAD_CT, ...),
 * range-checked so that a bad value leaves the default rather than reaching
 * a kernel. Private to the library. */
#ifndef ALLOY_OPS_ENV_OVERRIDE_H
#define ALLOY_OPS_ENV_OVERRIDE_H

#include <stdint.h>

/* The integer in environment variable `name` when it is one (decimal, nothing
 * else) within [lo, hi], else def. */
int64_t alloy_ops_env_int(const char *name, int64_t lo, int64_t hi, int64_t def);

/* Whether catalog ops launch their kernels to overlap the kernel before them
 * (alloy_launch_set_overlap): every nn kernel and the step's (each waits for
 * the one before first thing; the step's n and m in place once they have
 * computed). On unless ALLOY_OPS_OVERLAP=0. */
int alloy_ops_overlap(void);

#endif
