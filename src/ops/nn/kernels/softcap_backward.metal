// softcap_backward: dx = dy * (1 - tanh(x / cap)^2), the derivative of
// cap * tanh(x / cap), in A (float32, or float64 for float64 data); it is 0
// where tanh saturates and NaN where x or dy is NaN.
// Launch constants: long n (elements), long stride (threads in the grid),
// A cap. Template: T (data), A (accumulation).
// Launch: grid = (stride, 1, 1), threadgroup = (256, 1, 1); grid-stride loop.
//! name: alloy_nn_softcap_backward
//! inputs: x dy
//! outputs: dx
//! template: T=float32
//! template: A=float32
//! body:
for (long e = long(thread_position_in_grid.x); e < n; e += stride) {
    const A t = tanh(A(x[e]) / cap);
    dx[e] = T(A(dy[e]) * (A(1) - t * t));
}
