// soft_cap_vec4: out = cap * tanh(x / cap) like soft_cap.metal, written for
// memory bandwidth: each thread handles 4 consecutive elements with one
// 16-byte load and store (when x and out are 16-byte aligned there; else,
// and for the last partial group of 4, element by element). A GPU needs
// several bytes in flight per thread to saturate its memory: one float per
// thread stops near 65% of the copy bandwidth on an H100.
// x: float32, any shape (row-contiguous); cap: a 0-d float32.
// Launch: grid = (ceil(x.size / 4), 1, 1) threads, threadgroup = (256, 1, 1).
//! name: soft_cap_vec4
//! inputs: x cap
//! outputs: out
//! body:
size_t size = 1;
for (int d = 0; d < x_ndim; ++d) size *= size_t(x_shape[d]);
const size_t i = size_t(thread_position_in_grid.x) * 4;
if (i >= size) return;
const float c = cap;
const bool aligned = ((ulong)(x + i) % 16 == 0) && ((ulong)(out + i) % 16 == 0);
if (i + 4 <= size && aligned) {
  const float4 v = *(const device float4*)(x + i);
  *(device float4*)(out + i) = c * metal::tanh(v / c);
} else {
  for (size_t j = i; j < size && j < i + 4; ++j) out[j] = c * metal::tanh(x[j] / c);
}
