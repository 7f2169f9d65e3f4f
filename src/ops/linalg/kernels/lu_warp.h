// lu_warp.h — what the SIMD-group LU kernels share (lu_factor_warp.metal,
// lu_solve_warp.metal): the pivot search's ordering key, whole-simdgroup
// exchanges, and the staging copies that move a simdgroup's block of
// matrices between device memory (consecutive lanes on consecutive
// elements) and a per-simdgroup area of threadgroup memory (one matrix row
// per staging row).

// |x| as an unsigned integer that orders like |x| (NaN above infinity).
inline uint alloy_lu_key(float x) { return as_type<uint>(fabs(x)); }
inline ulong alloy_lu_key(double x) { return as_type<ulong>(fabs(x)); }

// Whole-simdgroup exchanges. The launches pad the grid to whole
// threadgroups and the control flow around every call is uniform, so all
// 32 lanes take part: on CUDA the warp intrinsics with a full mask (the
// portable simd_* functions first compute the active lanes, which costs
// more than the shuffle itself); elsewhere the MSL functions.
template <class X> inline X alloy_lu_shfl(X v, uint src) {
#if defined(ALLOY_BACKEND_CUDA)
  return __shfl_sync(0xffffffffu, v, int(src));
#else
  return simd_shuffle(v, src);
#endif
}
template <class X> inline X alloy_lu_shfl_xor(X v, uint mask) {
#if defined(ALLOY_BACKEND_CUDA)
  return __shfl_xor_sync(0xffffffffu, v, int(mask));
#else
  return simd_shuffle_xor(v, mask);
#endif
}
inline uint alloy_lu_ballot(bool b) {
#if defined(ALLOY_BACKEND_CUDA)
  return __ballot_sync(0xffffffffu, b);
#else
  return uint(ulong(simd_ballot(b)));
#endif
}

// The staging copies. The block: `total` elements from g[base] on, matrices
// of rows x cols elements, row-major, one after the other. Element e of the
// block (matrix mm, row p, column q) lives at st[(mm * W + p) * lds + q];
// lane `lane` walks e = lane, lane + 32, ... with the increments of e += 32
// (no divisions in the loop). IN: device to staging, else back. G, S:
// pointers (or what ALLOY_CPU_DEBUG makes of them).
template <int W, bool IN, class S, class G>
inline void alloy_lu_stage(S st, int lds, G g, long base, long total, int rows, int cols, uint lane) {
  if (rows <= 0 || cols <= 0) return;
  const int per = rows * cols;
  const int dm = 32 / per, dp = (32 % per) / cols, dq = 32 % cols;
  int mm = int(lane) / per;
  int p = (int(lane) - mm * per) / cols;
  int q = int(lane) - mm * per - p * cols;
  for (long e = lane; e < total; e += 32) {
    if constexpr (IN) st[(mm * W + p) * lds + q] = g[base + e];
    else g[base + e] = st[(mm * W + p) * lds + q];
    q += dq;
    if (q >= cols) { q -= cols; p++; }
    p += dp;
    if (p >= rows) { p -= rows; mm++; }
    mm += dm;
  }
}
