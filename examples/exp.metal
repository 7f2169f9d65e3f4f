// exp: out = exp(inp), elementwise, in the style of MLX's `myexp` example,
// with the element type as the template argument T (default float32; the
// output dtype should match). Launch: grid = (inp.size, 1, 1) threads,
// threadgroup = (256, 1, 1).
//! name: myexp
//! inputs: inp
//! outputs: out
//! template: T=float32
//! body:
uint elem = thread_position_in_grid.x;
size_t size = 1;
for (int d = 0; d < inp_ndim; ++d) size *= size_t(inp_shape[d]);
if (elem >= size) return;
T tmp = inp[elem];
out[elem] = metal::exp(tmp);
