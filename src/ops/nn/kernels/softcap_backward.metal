// softcap_backward: dx = dy * (1 - tanh(x / cap)^2), the derivative of
// cap * tanh(x / cap), in A (float32, or float64 for float64 data); it is 0
// where tanh saturates and NaN where x or dy is NaN. Vectorised as softcap:
// with vec (x, dy and dx 16-byte aligned) one 16-byte chunk of each per
// thread, both loads issued before the math; the rest scalar.
// Launch constants: long n (elements), long nv (16-byte chunks done by
// vectors: n / V with vec, else 0), long stride (threads in the grid), A cap,
// A rc (1 / cap).
// Template: T (data), A (accumulation), U (16-byte chunks a thread per round,
// loaded together: softcap.c), FT (16-bit data: 1 - tanh^2 from one
// exponential and one approximate division, softcap_math.h).
// Launch: grid = (stride, 1, 1), threadgroup = (256, 1, 1) (any size up to 256 that
// divides the grid: the body does not depend on it).
//! name: alloy_nn_softcap_backward
//! inputs: x dy
//! outputs: dx
//! template: T=float32
//! template: A=float32
//! template: U=1
//! template: FT=0
//! header:
#include "src/ops/nn/kernels/chunk.h"
#include "src/ops/nn/kernels/softcap_math.h"
//! body:
// overlapping launches (alloy_launch_set_overlap, ALLOY_OPS_OVERLAP): the kernel before ends first, the next may start
alloy_wait_previous_kernel();
alloy_start_next_kernel();
constexpr int V = 16 / int(sizeof(T));
constexpr bool FAST = FT != 0 && sizeof(T) == 2;
const nn_softcap_fast_consts fc = nn_softcap_fast_setup(float(cap), float(rc));
// U chunks a thread per round (c, c + stride, ...), all loaded before the first one's math
for (long c0 = long(thread_position_in_grid.x); c0 < nv; c0 += stride * U) {
    A v[U][V], d[U][V];
    for (int u = 0; u < U; u++)
        if (c0 + u * stride < nv) {
            nn_ld16(&x[(c0 + u * stride) * V], v[u]);
            nn_ld16(&dy[(c0 + u * stride) * V], d[u]);
        }
    for (int u = 0; u < U; u++) {
        if (c0 + u * stride >= nv) break;
        for (int e = 0; e < V; e++) {
            if constexpr (FAST) {
                v[u][e] = d[u][e] * nn_softcap_grad_fast(float(v[u][e]), fc);
            } else {
                const A t = tanh(v[u][e] / cap);
                v[u][e] = d[u][e] * (A(1) - t * t);
            }
        }
        nn_st16(&dx[(c0 + u * stride) * V], v[u]);
    }
}
for (long e = nv * V + long(thread_position_in_grid.x); e < n; e += stride) {
    if constexpr (FAST) {
        dx[e] = T(A(dy[e]) * nn_softcap_grad_fast(float(x[e]), fc));
    } else {
        const A t = tanh(A(x[e]) / cap);
        dx[e] = T(A(dy[e]) * (A(1) - t * t));
    }
}
