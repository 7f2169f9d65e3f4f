// softcap: y = cap * tanh(x / cap) elementwise (the xLSTM block's gate and
// logit cap), computed in A (float32, or float64 for float64 data): tanh
// saturates to +-1, so a huge |x| gives +-cap and NaN stays NaN.
// Launch constants: long n (elements), long stride (threads in the grid),
// A cap. Template: T (data), A (accumulation).
// Launch: grid = (stride, 1, 1), threadgroup = (256, 1, 1); grid-stride loop.
//! name: alloy_nn_softcap
//! inputs: x
//! outputs: y
//! template: T=float32
//! template: A=float32
//! body:
for (long e = long(thread_position_in_grid.x); e < n; e += stride) {
    const A v = A(x[e]);
    y[e] = T(cap * tanh(v / cap));
}
