// softcap: y = cap * tanh(x / cap) elementwise (the xLSTM block's gate and
// logit cap), computed in A (float32, or float64 for float64 data): tanh
// saturates to +-1, so a huge |x| gives +-cap and NaN stays NaN. float16 and
// bfloat16 data take x * rc (rc = 1 / cap in float32: two roundings of 2^-24
// where the result's is 2^-11 or 2^-8) instead of the IEEE division: that was
// about a third of an element's instructions (CUDA's tanhf is some 17, with
// an approximate reciprocal), whose count came close to the issue rate that
// the 16-bit bytes allow.
// Memory-bound: with vec (x and y 16-byte aligned) each thread moves one
// 16-byte chunk (4 floats, 8 halves/bfloats, 2 doubles) with one vector load
// and store, like a device-to-device copy; the last n % V elements (and every
// element without vec) go through the scalar grid-stride loop.
// Launch constants: long n (elements), long nv (16-byte chunks done by
// vectors: n / V with vec, else 0), long stride (threads in the grid), A cap,
// A rc (1 / cap).
// Template: T (data), A (accumulation), U (16-byte chunks a thread per round,
// loaded together: softcap.c), FT (16-bit data: tanh from one exponential and
// one approximate division, softcap_math.h).
// Launch: grid = (stride, 1, 1), threadgroup = (256, 1, 1) (any size up to 256 that
// divides the grid: the body does not depend on it).
//! name: alloy_nn_softcap
//! inputs: x
//! outputs: y
//! template: T=float32
//! template: A=float32
//! template: U=1
//! template: FT=0
//! header:
#include "src/ops/nn/kernels/chunk.h"
#include "src/ops/nn/kernels/softcap_math.h"
//! body:
// overlapping launches (alloy_launch_set_overlap, ALLOY_OPS_OVERLAP): the kernel before ends first. The next one
// starts as this one's threadgroups end, not earlier: with alloy_start_next_kernel the 16-bit forward's 65 536
// threadgroups of 2 KiB ran at 83% of copy, without it at 101.7-103.2% (H200, 64 M elements, two rounds)
alloy_wait_previous_kernel();
constexpr int V = 16 / int(sizeof(T));
constexpr bool FAST = FT != 0 && sizeof(T) == 2;
const nn_softcap_fast_consts fc = nn_softcap_fast_setup(float(cap), float(rc));
// U chunks a thread per round (c, c + stride, ...), all loaded before the first one's math
for (long c0 = long(thread_position_in_grid.x); c0 < nv; c0 += stride * U) {
    A v[U][V];
    for (int u = 0; u < U; u++)
        if (c0 + u * stride < nv) nn_ld16(&x[(c0 + u * stride) * V], v[u]);
    for (int u = 0; u < U; u++) {
        if (c0 + u * stride >= nv) break;
        for (int e = 0; e < V; e++) {
            if constexpr (FAST) v[u][e] = nn_softcap_fast(float(v[u][e]), fc);
            else if constexpr (sizeof(T) == 2) v[u][e] = cap * tanh(v[u][e] * rc);
            else v[u][e] = cap * tanh(v[u][e] / cap);
        }
        nn_st16(&y[(c0 + u * stride) * V], v[u]);
    }
}
for (long e = nv * V + long(thread_position_in_grid.x); e < n; e += stride) {
    if constexpr (FAST) y[e] = T(nn_softcap_fast(float(x[e]), fc));
    else if constexpr (sizeof(T) == 2) y[e] = T(cap * tanh(A(x[e]) * rc));
    else y[e] = T(cap * tanh(A(x[e]) / cap));
}
