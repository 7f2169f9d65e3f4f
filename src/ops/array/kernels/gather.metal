// gather: dst[i] = src[location of row-major element i in the src view] —
// how the core makes a row-contiguous copy of a strided view on a device the
// host cannot read (array.c, alloy_array_contiguous). A grid-stride loop with
// 64-bit indices, so any size fits one launch.
// src: any dtype, shape, strides and offset (not made contiguous first);
// count: the number of elements (int64, 0-d); dst: row-contiguous, same dtype.
// Launch: grid = (min(count, 4M), 1, 1), threadgroup = (256, 1, 1).
//! name: alloy_gather
//! inputs: src count
//! outputs: dst
//! ensure_row_contiguous: false
//! body:
const ulong n = ulong(count);
const ulong step = ulong(threads_per_grid.x);
for (ulong i = thread_position_in_grid.x; i < n; i += step) {
  long loc = 0;
  ulong rest = i;
  for (int d = src_ndim - 1; d >= 0; --d) {
    ulong extent = ulong(src_shape[d]);
    loc += long(rest % extent) * src_strides[d];
    rest /= extent;
  }
  dst[i] = src[loc];
}
