// memcpy: out = inp, elementwise; the smallest kernel that proves the
// input/output pointers are mapped correctly. Any dtype, any shape.
// Launch: grid = (inp.size, 1, 1) threads, threadgroup = (256, 1, 1).
//! name: memcpy
//! inputs: inp
//! outputs: out
//! body:
uint i = thread_position_in_grid.x;
size_t size = 1;
for (int d = 0; d < inp_ndim; ++d) size *= size_t(inp_shape[d]);
if (i < size) out[i] = inp[i];
