// matmul_cpu: C = alpha * A·B + beta * C for each batch b, the CPU backend's
// GEMM (the CUDA backend runs it too, as a plain loop, but has its own).
// A, B: float32, float16, bfloat16 or float64, the same dtype; C: any of the
// four. Strides are launch constants in ELEMENTS and may be zero or negative:
//   A(b, m, k) = A[b*sa_b + m*sa_m + k*sa_k]
//   B(b, k, n) = B[b*sb_b + k*sb_k + n*sb_n]
//   C(b, m, n) = C[b*sc_b + m*sc_m + n]          (C's columns are contiguous)
// (each plus a_off, b_off, c_off: the origins the op moves between launches)
// Sums accumulate in float (double for float64 inputs) and round once into
// C's dtype; alpha and beta apply in double. With beta == 0, C is never read
// (it may hold NaN); with K == 0, C = beta * C (0 when beta == 0).
// Launch constants: int64 M N K batch sa_b sa_m sa_k sb_b sb_k sb_n sc_b sc_m
// tile_m tile_n a_off b_off c_off; float64 alpha beta.
// Launch: grid = (ceil(N / tile_n), ceil(M / tile_m), batch) threads,
// threadgroup = (1, 1, 1): thread (x, y, z) computes the tile_m x tile_n
// block of C at rows y*tile_m, columns x*tile_n of batch z. Any tile sizes
// >= 1 are correct; 64 x 128 is the one the CPU path is shaped for.
//
// CPU path (BLIS-style; no barriers, so the backend runs each group as a
// plain loop): the thread's tile is cut into 64 x 128 sub-blocks and K into
// slices of KC (256 floats, 128 doubles). Per slice, the sub-block's panel of
// B is packed (converted to the accumulation type) into k-major micro-panels
// of NR columns; A is read in place when it is float32/float64 with
// contiguous rows, else packed (converted) into MR-row micro-panels. The
// micro-kernel keeps an MR x NR block of C in vector registers (GCC vector
// extensions; with AVX-512 MR = 6 rows x NR = 4 zmm vectors: 24
// accumulators, one broadcast of A and four FMAs per row and k; 6 x 2
// vectors otherwise). Sums of earlier K slices live in a per-thread buffer;
// the last slice writes float32/float64 C directly when alpha = 1, beta = 0,
// and otherwise the epilogue applies alpha, beta and C's dtype once.
// Scratch is static thread_local (one copy per worker thread: 226 KB for
// float sums, 258 KB for double). Under ALLOY_CPU_DEBUG (checked pointers)
// and on CUDA the tile is a plain loop of dot products instead (same
// accumulation types, sums in k order, no FMA contraction).
//! name: alloy_matmul_cpu
//! inputs: A B
//! outputs: C
//! ensure_row_contiguous: false
//! header:
// The element type behind an input/output (a raw pointer's or a checked one's).
template <class R> struct alloy_mm_elem;
template <class T> struct alloy_mm_elem<T &> { typedef T type; };
template <class T> struct alloy_mm_elem<const T &> { typedef T type; };

// Accumulation type: double for float64 inputs, float otherwise.
template <class T> struct alloy_mm_acc { typedef float type; };
template <> struct alloy_mm_acc<double> { typedef double type; };

// A stored element as a double (beta * C).
template <class T> inline double alloy_mm_to_double(T x) {
  if constexpr (sizeof(T) == 8) return double(x);
  else return double(float(x));
}

// Writes alpha * s + beta * C (C read only when beta != 0), rounded once.
template <class TC, class Acc> inline void alloy_mm_store(TC &c, Acc s, double alpha, double beta) {
  if (alpha == 1.0 && beta == 0.0) {
    c = TC(s);
    return;
  }
  double v = alpha * double(s);
  if (beta != 0.0) v += beta * alloy_mm_to_double(c);
  c = TC(v);
}

// The reference path: CUDA and ALLOY_CPU_DEBUG (where A, B, C are checked
// pointers). One dot product per element of the tile.
template <class PA, class PB, class PC>
inline void alloy_mm_plain(PA A, PB B, PC C, long mt, long nt, long K, long sa_m, long sa_k,
                           long sb_k, long sb_n, long sc_m, double alpha, double beta) {
  typedef typename alloy_mm_elem<decltype(A[0])>::type TA;
  typedef typename alloy_mm_elem<decltype(C[0])>::type TC;
  typedef typename alloy_mm_acc<TA>::type Acc;
  for (long i = 0; i < mt; i++)
    for (long j = 0; j < nt; j++) {
      Acc s = 0;
      for (long k = 0; k < K; k++) s += Acc(A[i * sa_m + k * sa_k]) * Acc(B[k * sb_k + j * sb_n]);
      if (K == 0) {
        if (beta == 0.0) C[i * sc_m + j] = TC(0.0f);
        else C[i * sc_m + j] = TC(beta * alloy_mm_to_double(C[i * sc_m + j]));
      } else {
        alloy_mm_store(C[i * sc_m + j], s, alpha, beta);
      }
    }
}

#if defined(ALLOY_BACKEND_CPU) && !defined(ALLOY_CPU_DEBUG)
#define ALLOY_MM_FAST 1

// Vector width (bytes), micro-kernel rows MR and vectors per row NV: MR*NV
// accumulators, NV vectors of B and a broadcast must fit the register file
// (32 zmm with AVX-512: 6 x 4 = 24; 16 ymm/xmm otherwise: 6 x 2 = 12).
#if defined(__AVX512F__)
#define ALLOY_MM_VB 64
#define ALLOY_MM_NV 4
#elif defined(__AVX__)
#define ALLOY_MM_VB 32
#define ALLOY_MM_NV 2
#else
#define ALLOY_MM_VB 16
#define ALLOY_MM_NV 2
#endif
#define ALLOY_MM_MR 6

typedef float alloy_mm_vf __attribute__((vector_size(ALLOY_MM_VB)));
typedef double alloy_mm_vd __attribute__((vector_size(ALLOY_MM_VB)));
template <class Acc> struct alloy_mm_vec;
template <> struct alloy_mm_vec<float> { typedef alloy_mm_vf type; };
template <> struct alloy_mm_vec<double> { typedef alloy_mm_vd type; };

// Element -> accumulation type while packing. half: the exponent is rebased
// by a multiplication by 2^112 (exact for normal and subnormal halves) and
// Inf/NaN are selected apart, so the loop vectorises; bfloat is a shift.
inline float alloy_mm_cvt(float x) { return x; }
inline double alloy_mm_cvt(double x) { return x; }
inline float alloy_mm_cvt(half x) {
  unsigned h = x.alloy_bits, em = (h & 0x7fffu) << 13;
  float f = alloy_bitsf(em) * 0x1p112f;
  if (em >= (0x7c00u << 13)) f = alloy_bitsf(em | 0x7f800000u);
  return alloy_bitsf(alloy_fbits(f) | ((h & 0x8000u) << 16));
}
inline float alloy_mm_cvt(bfloat x) { return alloy_bitsf(unsigned(x.alloy_bits) << 16); }

// n contiguous elements -> the accumulation type: a copy, or half/bfloat
// widened a vector at a time (the same bit operations as alloy_mm_cvt on
// whole vectors; GCC does not vectorise the scalar loop at -O2).
typedef unsigned short alloy_mm_vu16 __attribute__((vector_size(ALLOY_MM_VB / 2)));
typedef unsigned alloy_mm_vu32 __attribute__((vector_size(ALLOY_MM_VB)));
template <class Acc, class T>
inline void alloy_mm_cvt_run(Acc *__restrict d, const T *__restrict s, long n) {
  if constexpr (sizeof(T) == sizeof(Acc)) {
    __builtin_memcpy(d, s, size_t(n) * sizeof(Acc));
  } else {
    constexpr long L = ALLOY_MM_VB / 4;
    long j = 0;
    for (; j + L <= n; j += L) {
      alloy_mm_vu16 h;
      __builtin_memcpy(&h, s + j, sizeof h);
      alloy_mm_vu32 w = __builtin_convertvector(h, alloy_mm_vu32), r;
      if constexpr (alloy_same<T, bfloat>::value) {
        r = w << 16;
      } else {
        const alloy_mm_vu32 em = (w & 0x7fffu) << 13, big = em >= (0x7c00u << 13);
        const alloy_mm_vf f = (alloy_mm_vf)em * 0x1p112f;
        r = (((alloy_mm_vu32)f & ~big) | ((em | 0x7f800000u) & big)) | ((w & 0x8000u) << 16);
      }
      __builtin_memcpy(d + j, &r, sizeof r);
    }
    for (; j < n; j++) d[j] = alloy_mm_cvt(s[j]);
  }
}

// The micro-kernel: out[mr x NR] = (prev +) Ap · Bp over kc steps. Bp is
// k-major, NR = NV vectors per step; A element (i, k) is ap[i*ars + k*AKS]
// (ars = ARS when ARS != 0: packed rows, ARS = KC, AKS = 1, or packed
// columns, ARS = 1, AKS = MR; ARS = 0: rows of A in place, ars apart). Rows
// past mr repeat row mr-1 and are not stored. prev (rows ldp apart, NULL: none)
// holds the sums of earlier K slices; out rows are ldo apart, any alignment.
// fp-contract=fast (this function only; kernels compile in ISO C++ mode,
// where contraction is off) makes c += a*b one vector FMA: one rounding per
// step, as BLAS does.
template <class Acc, long ARS, long AKS>
__attribute__((noinline, optimize("fp-contract=fast"))) void
alloy_mm_micro(long kc, const Acc *__restrict ap, const Acc *__restrict bp, int mr,
               const Acc *prev, long ldp, Acc *out, long ldo, long ars) {
#ifdef __clang__
#pragma clang fp contract(fast)
#endif
  typedef typename alloy_mm_vec<Acc>::type V;
  constexpr int L = ALLOY_MM_VB / int(sizeof(Acc)), MR = ALLOY_MM_MR, NV = ALLOY_MM_NV;
  V c[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 16
    for (int j = 0; j < NV; j++) c[i][j] = V{};
#pragma GCC unroll 4
  for (long k = 0; k < kc; k++) {
    V b[NV];
#pragma GCC unroll 16
    for (int j = 0; j < NV; j++) b[j] = *(const V *)(bp + (k * NV + j) * L);
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      const Acc av = ap[(ARS ? ARS : ars) * (i < mr ? i : mr - 1) + k * AKS];
#pragma GCC unroll 16
      for (int j = 0; j < NV; j++) c[i][j] += av * b[j];
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    if (i >= mr) break;
#pragma GCC unroll 16
    for (int j = 0; j < NV; j++) {
      V v = c[i][j];
      if (prev) v += *(const V *)(prev + i * ldp + j * L);
      __builtin_memcpy(out + i * ldo + j * L, &v, sizeof v);
    }
  }
}

// The thread's tile: mt x nt of C at C, from A (mt x K) and B (K x nt).
// Sub-blocks of MC x NC; K in slices of KC. Per slice B is packed into
// k-major micro-panels of NR columns, and A into MR-row micro-panels: rows
// of KC (a copy of each row when A's rows are contiguous) or k-major
// columns of MR (when its columns are, i.e. a transposed A).
template <class TA, class TB, class TC>
void alloy_mm_tile(const TA *A, const TB *B, TC *C, long mt, long nt, long K, long sa_m,
                   long sa_k, long sb_k, long sb_n, long sc_m, double alpha, double beta) {
  typedef typename alloy_mm_acc<TA>::type Acc;
  constexpr int L = ALLOY_MM_VB / int(sizeof(Acc)), MR = ALLOY_MM_MR;
  constexpr long NR = ALLOY_MM_NV * L;
  constexpr long MC = 64, NC = 128, KC = 1024 / long(sizeof(Acc));
  constexpr long MCP = (MC + MR - 1) / MR * MR, NCP = (NC + NR - 1) / NR * NR;
  alignas(64) static thread_local Acc bpack[KC * NCP];
  alignas(64) static thread_local Acc apack[MCP * KC];
  alignas(64) static thread_local Acc accb[MC * NCP];
  if (K == 0) {
    for (long i = 0; i < mt; i++)
      for (long j = 0; j < nt; j++) {
        TC &c = C[i * sc_m + j];
        c = beta == 0.0 ? TC(0.0f) : TC(beta * alloy_mm_to_double(c));
      }
    return;
  }
  const bool a_rows = sa_k == 1 || (sa_m != 1 && (sa_k < 0 ? -sa_k : sa_k) <= (sa_m < 0 ? -sa_m : sa_m));
  for (long nb = 0; nb < nt; nb += NC) {
    const long nc = nt - nb < NC ? nt - nb : NC;
    const long npanels = (nc + NR - 1) / NR;
    // Whole panels, nothing to apply, C of the accumulation type: the
    // micro-kernel stores the final sums into C itself.
    const bool direct_c = sizeof(TC) == sizeof(Acc) && alpha == 1.0 && beta == 0.0 && nc % NR == 0;
    for (long mb = 0; mb < mt; mb += MC) {
      const long mc = mt - mb < MC ? mt - mb : MC;
      const long nblocks = (mc + MR - 1) / MR;
      for (long kb = 0; kb < K; kb += KC) {
        const long kc = K - kb < KC ? K - kb : KC;
        // B slice -> k-major micro-panels of NR columns, zero-padded.
        const TB *bsrc = B + kb * sb_k + nb * sb_n;
        for (long p = 0; p < npanels; p++) {
          Acc *dst = bpack + p * kc * NR;
          const TB *src = bsrc + p * NR * sb_n;
          const long w = nc - p * NR < NR ? nc - p * NR : NR;
          if (sb_n == 1 && w == NR) {
            // Rows of B are often pages apart, where the hardware does not
            // prefetch: fetch a few rows ahead.
            for (long k = 0; k < kc; k++) {
              if (k + 8 < kc)
                for (long j = 0; j < NR; j += 64 / long(sizeof(TB)))
                  __builtin_prefetch(src + (k + 8) * sb_k + j);
              alloy_mm_cvt_run(dst + k * NR, src + k * sb_k, NR);
            }
          } else {
            for (long j = 0; j < NR; j++) {
              if (j < w)
                for (long k = 0; k < kc; k++) dst[k * NR + j] = alloy_mm_cvt(src[k * sb_k + j * sb_n]);
              else
                for (long k = 0; k < kc; k++) dst[k * NR + j] = Acc(0);
            }
          }
        }
        // A slice -> MR-row micro-panels, zero-padded (float32/float64 A
        // with contiguous rows is read in place).
        const bool a_direct = sizeof(TA) == sizeof(Acc) && sa_k == 1;
        for (long q = 0; q < nblocks && !a_direct; q++) {
          Acc *dst = apack + q * MR * KC;
          const TA *src = A + (mb + q * MR) * sa_m + kb * sa_k;
          const long h = mc - q * MR < MR ? mc - q * MR : MR;
          if (a_rows) {
            for (long i = 0; i < MR; i++) {
              if (i >= h)
                for (long k = 0; k < kc; k++) dst[i * KC + k] = Acc(0);
              else if (sa_k == 1)
                alloy_mm_cvt_run(dst + i * KC, src + i * sa_m, kc);
              else
                for (long k = 0; k < kc; k++) dst[i * KC + k] = alloy_mm_cvt(src[i * sa_m + k * sa_k]);
            }
          } else {
            for (long k = 0; k < kc; k++) {
              if (sa_m == 1 && h == MR)
                alloy_mm_cvt_run(dst + k * MR, src + k * sa_k, MR);
              else
                for (long i = 0; i < MR; i++)
                  dst[k * MR + i] = i < h ? alloy_mm_cvt(src[i * sa_m + k * sa_k]) : Acc(0);
            }
          }
        }
        // The last slice writes float32/float64 C directly when nothing is
        // left to do to the sums; otherwise the sums go to accb.
        const bool last = kb + kc >= K;
        for (long p = 0; p < npanels; p++)
          for (long q = 0; q < nblocks; q++) {
            const int mr = int(mc - q * MR < MR ? mc - q * MR : MR);
            const Acc *prev = kb > 0 ? accb + q * MR * NCP + p * NR : nullptr;
            Acc *out = accb + q * MR * NCP + p * NR;
            long ldo = NCP;
            if constexpr (sizeof(TC) == sizeof(Acc))
              if (last && direct_c) {
                out = (Acc *)(C + (mb + q * MR) * sc_m + nb + p * NR);
                ldo = sc_m;
              }
            const Acc *bp = bpack + p * kc * NR;
            if (a_direct)
              alloy_mm_micro<Acc, 0, 1>(kc, (const Acc *)(A + (mb + q * MR) * sa_m + kb), bp, mr, prev,
                                        NCP, out, ldo, sa_m);
            else if (a_rows)
              alloy_mm_micro<Acc, KC, 1>(kc, apack + q * MR * KC, bp, mr, prev, NCP, out, ldo, 0);
            else
              alloy_mm_micro<Acc, 1, MR>(kc, apack + q * MR * KC, bp, mr, prev, NCP, out, ldo, 0);
          }
      }
      // Epilogue: the sub-block's sums -> C, rounded once.
      for (long i = 0; i < mc && !direct_c; i++) {
        TC *c = C + (mb + i) * sc_m + nb;
        const Acc *s = accb + i * NCP;
        if (alpha == 1.0 && beta == 0.0) {
          if constexpr (sizeof(TC) == sizeof(Acc)) __builtin_memcpy(c, s, size_t(nc) * sizeof(Acc));
          else
            for (long j = 0; j < nc; j++) c[j] = TC(s[j]);
        } else {
          for (long j = 0; j < nc; j++) alloy_mm_store(c[j], s[j], alpha, beta);
        }
      }
    }
  }
}
#endif
//! body:
const long tx = long(thread_position_in_grid.x), ty = long(thread_position_in_grid.y);
const long bz = long(thread_position_in_grid.z);
const long m0 = ty * tile_m, n0 = tx * tile_n;
if (m0 < M && n0 < N && bz < batch) {
  const long mt = M - m0 < tile_m ? M - m0 : tile_m;
  const long nt = N - n0 < tile_n ? N - n0 : tile_n;
#ifdef ALLOY_MM_FAST
  alloy_mm_tile(A + (a_off + bz * sa_b + m0 * sa_m), B + (b_off + bz * sb_b + n0 * sb_n),
                C + (c_off + bz * sc_b + m0 * sc_m + n0), mt, nt, K, sa_m, sa_k, sb_k, sb_n, sc_m, alpha, beta);
#else
  alloy_mm_plain(A + (a_off + bz * sa_b + m0 * sa_m), B + (b_off + bz * sb_b + n0 * sb_n),
                 C + (c_off + bz * sc_b + m0 * sc_m + n0), mt, nt, K, sa_m, sa_k, sb_k, sb_n, sc_m, alpha, beta);
#endif
}
