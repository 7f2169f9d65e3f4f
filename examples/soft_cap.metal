// soft_cap: out = cap * tanh(x / cap), elementwise, fp32.
// The soft-cap of xLSTM-7B's gate pre-activations (cap 15) and logits (cap 30).
// x: any shape (row-contiguous); cap: a 0-d scalar (the body sees a value).
// Launch: grid = (x.size, 1, 1) threads, threadgroup = (256, 1, 1); threads
// past the end leave, so the grid may be rounded up.
//! name: soft_cap
//! inputs: x cap
//! outputs: out
//! body:
uint i = thread_position_in_grid.x;
// Number of elements: the product of x's shape (works for any rank).
size_t size = 1;
for (int d = 0; d < x_ndim; ++d) size *= size_t(x_shape[d]);
if (i >= size) return;
float c = float(cap);
out[i] = c * metal::tanh(float(x[i]) / c);
