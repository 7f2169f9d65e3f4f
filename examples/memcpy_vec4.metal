// memcpy_vec4: out = inp like memcpy.metal, for any dtype, written for memory
// bandwidth: each thread copies 16 bytes (one uint4 load and store) when both
// buffers are 16-byte aligned there, else byte by byte; the last partial
// chunk is copied byte by byte.
// inp: any dtype and shape (row-contiguous); out: the same size in bytes.
// Launch: grid = (ceil(inp.nbytes / 16), 1, 1) threads, threadgroup = (256, 1, 1).
//! name: memcpy_vec4
//! inputs: inp
//! outputs: out
//! body:
size_t size = 1;
for (int d = 0; d < inp_ndim; ++d) size *= size_t(inp_shape[d]);
const size_t nbytes = size * sizeof(inp[0]);
const size_t b = size_t(thread_position_in_grid.x) * 16;
if (b >= nbytes) return;
const device uchar* src = (const device uchar*)inp;
device uchar* dst = (device uchar*)out;
if (b + 16 <= nbytes && (ulong)(src + b) % 16 == 0 && (ulong)(dst + b) % 16 == 0) {
  *(device uint4*)(dst + b) = *(const device uint4*)(src + b);
} else {
  for (size_t j = b; j < nbytes && j < b + 16; ++j) dst[j] = src[j];
}
