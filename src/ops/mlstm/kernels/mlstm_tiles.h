// mlstm_tiles.h — what the mLSTM chunkwise kernels (forward and backward)
// share for matrix products and copies, included by their headers (the
// catalog expands `#include "<this path>"`; see src/ops/catalog.c):
//  - mc_tile, mc_tiles, mc_row_tiles: 16 x 8 output tiles in the tensor
//    cores' m16n8 fragment layout (lane (g, q) = (lane / 4, lane % 4) holds
//    rows g and g + 8, columns 2q and 2q + 1), operands in threadgroup memory.
//    On CUDA, bfloat16 and float16 run mma.sync.m16n8k16 (float
//    accumulation, ldmatrix fragments), float32 runs 3xTF32 m16n8k8 (float32
//    accuracy; one TF32 pass under MC_TF32_ONE_PASS); every other case
//    computes the same elements with float FMAs in k order; mc_row_tiles_scaled
//    adds a product times a factor per row (sums of parts with their own scales);
//  - mc_pack2, mc_scale8: 16-bit pairs and rows of eight; mc_pow2, mc_ldexp,
//    mc_expo: powers of two (the float32 forward's scaled float16 tiles);
//  - lane shuffles of a whole SIMD group and an exclusive prefix sum;
//  - mc_load_async / mc_load: tiles of row-major device matrices into
//    threadgroup memory (16-byte cp.async on CUDA when rows are aligned),
//    zero past the matrix.
#include "src/ops/mlstm/kernels/async_copy.h"
#if defined(ALLOY_BACKEND_CUDA)
METAL_FUNC void mc_ldsm_x4(uint addr, thread uint &r0, thread uint &r1, thread uint &r2, thread uint &r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
METAL_FUNC void mc_ldsm_x4_trans(uint addr, thread uint &r0, thread uint &r1, thread uint &r2, thread uint &r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
METAL_FUNC void mc_ldsm_x2(uint addr, thread uint &r0, thread uint &r1) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(addr));
}
METAL_FUNC void mc_ldsm_x2_trans(uint addr, thread uint &r0, thread uint &r1) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(addr));
}
/* d (16 x 8, float) += a (16 x 16) b (16 x 8), the m16n8k16 fragments */
template <class TT>
METAL_FUNC void mc_mma(thread float *d, uint a0, uint a1, uint a2, uint a3, uint b0, uint b1) {
    if constexpr (metal::is_same_v<TT, bfloat>)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                     "{%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                     "{%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
/* float32 on the tensor cores to float32 accuracy (3xTF32): x = hi + lo with
 * hi = x rounded to TF32 and lo = the rest (exact), then d += lo_a hi_b +
 * hi_a lo_b + hi_a hi_b (small terms first; lo_a lo_b, about 2^-22 of the
 * product, is left out), float accumulation, m16n8k8. A kernel that defines
 * MC_TF32_ONE_PASS before including this file (alloy_precision DEFAULT) runs
 * hi_a hi_b alone: the factors rounded to TF32, a third of the MMAs. */
METAL_FUNC void mc_split_tf32(float x, thread uint &hi, thread uint &lo) {
    uint h, l = 0u;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(h) : "f"(x));
#if !defined(MC_TF32_ONE_PASS)
    const float r = x - __uint_as_float(h);
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(l) : "f"(r));
#endif
    hi = h, lo = l;
}
METAL_FUNC void mc_mma_tf32(thread float *d, uint a0, uint a1, uint a2, uint a3, uint b0, uint b1) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
/* The m16n8k8 fragments of float32 matrices in threadgroup memory at k0,
 * split: A (g, q) holds (g, k0+q), (g+8, k0+q), (g, k0+q+4), (g+8, k0+q+4);
 * B (g, q) holds (k0+q, g), (k0+q+4, g). */
METAL_FUNC void mc_frag_a_f32(const threadgroup float *a, int am, int ak, int k0, uint lane, thread uint *hi,
                              thread uint *lo) {
    const int g = int(lane >> 2), q = int(lane & 3u);
    mc_split_tf32(a[g * am + (k0 + q) * ak], hi[0], lo[0]);
    mc_split_tf32(a[(g + 8) * am + (k0 + q) * ak], hi[1], lo[1]);
    mc_split_tf32(a[g * am + (k0 + q + 4) * ak], hi[2], lo[2]);
    mc_split_tf32(a[(g + 8) * am + (k0 + q + 4) * ak], hi[3], lo[3]);
}
METAL_FUNC void mc_frag_b_f32(const threadgroup float *b, int bk, int bn, int k0, uint lane, thread uint *hi,
                              thread uint *lo) {
    const int g = int(lane >> 2), q = int(lane & 3u);
    mc_split_tf32(b[(k0 + q) * bk + g * bn], hi[0], lo[0]);
    mc_split_tf32(b[(k0 + q + 4) * bk + g * bn], hi[1], lo[1]);
}
METAL_FUNC void mc_mma_3xtf32(thread float *d, const thread uint *ah, const thread uint *al, const thread uint *bh,
                              const thread uint *bl) {
#if !defined(MC_TF32_ONE_PASS)
    mc_mma_tf32(d, al[0], al[1], al[2], al[3], bh[0], bh[1]);
    mc_mma_tf32(d, ah[0], ah[1], ah[2], ah[3], bl[0], bl[1]);
#endif
    mc_mma_tf32(d, ah[0], ah[1], ah[2], ah[3], bh[0], bh[1]);
}
#endif
#if defined(ALLOY_BACKEND_CUDA)
/* The m16n8k16 fragments at k0 by ldmatrix: A as four 8 x 8 matrices, B as
 * two; .trans where the operand is stored with its other index contiguous.
 * Every row the lanes name is 16-byte aligned (pitches and offsets are
 * multiples of 8 elements). The operands are shared-memory byte addresses
 * (mc_smem of the matrix, once): offsets added to them stay 32-bit integer
 * arithmetic the compiler folds into the instruction, where offsets to a
 * threadgroup pointer would be 64-bit and converted at every load. */
template <class TT>
METAL_FUNC void mc_frag_a(uint sa, int am, int ak, int k0, uint lane, thread uint &a0, thread uint &a1,
                          thread uint &a2, thread uint &a3) {
    constexpr uint ES = uint(sizeof(TT));
    if (ak == 1) {
        const int r = int(lane & 15u), c = k0 + int(lane >> 4) * 8;
        mc_ldsm_x4(sa + uint(r * am + c) * ES, a0, a1, a2, a3);
    } else { /* am == 1: rows of k, m contiguous */
        const int kr = k0 + int(lane & 7u) + int(lane >> 4) * 8, m = int((lane >> 3) & 1u) * 8;
        mc_ldsm_x4_trans(sa + uint(kr * ak + m) * ES, a0, a1, a2, a3);
    }
}
template <class TT>
METAL_FUNC void mc_frag_b(uint sb, int bk, int bn, int k0, uint lane, thread uint &b0, thread uint &b1) {
    constexpr uint ES = uint(sizeof(TT));
    if (bk == 1) { /* rows of n, k contiguous */
        const int n = int(lane & 7u), c = k0 + int((lane >> 3) & 1u) * 8;
        mc_ldsm_x2(sb + uint(n * bn + c) * ES, b0, b1);
    } else { /* bn == 1: rows of k, n contiguous */
        mc_ldsm_x2_trans(sb + uint((k0 + int(lane & 15u)) * bk) * ES, b0, b1);
    }
}
#endif
/* acc (one 16 x 8 tile; lane (g, q) holds (g, 2q), (g, 2q+1), (g+8, 2q),
 * (g+8, 2q+1)) += sum_{k < kk} A(m, k) B(k, n) with A(m, k) = a[m*am + k*ak],
 * B(k, n) = b[k*bk + n*bn] in threadgroup memory; kk a multiple of 16. On
 * CUDA, bfloat16 and float16 run mma.sync.m16n8k16 with float accumulation,
 * float32 runs 3xTF32 m16n8k8 (float32 accuracy, not bit for bit); every
 * other case FMAs in k order (exact float32). */
template <class TT>
METAL_FUNC void mc_tile(thread float *acc, const threadgroup TT *a, int am, int ak, const threadgroup TT *b, int bk,
                        int bn, int kk, uint lane) {
    const int g = int(lane >> 2), q = int(lane & 3u);
#if defined(ALLOY_BACKEND_CUDA)
    if constexpr (metal::is_same_v<TT, bfloat> || metal::is_same_v<TT, half>) {
        const uint sa = mc_smem(a), sb = mc_smem(b);
        for (int k0 = 0; k0 < kk; k0 += 16) {
            uint a0, a1, a2, a3, b0, b1;
            mc_frag_a<TT>(sa, am, ak, k0, lane, a0, a1, a2, a3);
            mc_frag_b<TT>(sb, bk, bn, k0, lane, b0, b1);
            mc_mma<TT>(acc, a0, a1, a2, a3, b0, b1);
        }
        return;
    } else if constexpr (metal::is_same_v<TT, float>) {
        for (int k0 = 0; k0 < kk; k0 += 8) {
            uint ah[4], al[4], bh[2], bl[2];
            mc_frag_a_f32(a, am, ak, k0, lane, ah, al);
            mc_frag_b_f32(b, bk, bn, k0, lane, bh, bl);
            mc_mma_3xtf32(acc, ah, al, bh, bl);
        }
        return;
    }
#endif
    for (int e = 0; e < 4; e++) {
        const int m = g + 8 * (e >> 1), n = 2 * q + (e & 1);
        float s = acc[e];
        for (int k = 0; k < kk; k++) s = fma(float(a[m * am + k * ak]), float(b[k * bk + n * bn]), s);
        acc[e] = s;
    }
}
/* The first `live` of a warp's N tiles, acc[u] += A_u B_u as mc_tile, with
 * the k loop outside: the N products' mma chains interleave (one chain of
 * dependent mma per tile leaves the tensor cores waiting on its latency). */
template <class TT, int N>
METAL_FUNC void mc_tiles(thread float (*acc)[4], const threadgroup TT *const *a, int am, int ak,
                         const threadgroup TT *const *b, int bk, int bn, int kk, int live, uint lane) {
#if defined(ALLOY_BACKEND_CUDA)
    if constexpr (metal::is_same_v<TT, bfloat> || metal::is_same_v<TT, half>) {
        uint sa[N], sb[N];
#pragma unroll
        for (int u = 0; u < N; u++) sa[u] = u < live ? mc_smem(a[u]) : 0u, sb[u] = u < live ? mc_smem(b[u]) : 0u;
#pragma unroll 1
        for (int k0 = 0; k0 < kk; k0 += 16) {
#pragma unroll
            for (int u = 0; u < N; u++)
                if (u < live) {
                    uint a0, a1, a2, a3, b0, b1;
                    mc_frag_a<TT>(sa[u], am, ak, k0, lane, a0, a1, a2, a3);
                    mc_frag_b<TT>(sb[u], bk, bn, k0, lane, b0, b1);
                    mc_mma<TT>(acc[u], a0, a1, a2, a3, b0, b1);
                }
        }
        return;
    } else if constexpr (metal::is_same_v<TT, float>) {
#pragma unroll 1
        for (int k0 = 0; k0 < kk; k0 += 8) {
#pragma unroll
            for (int u = 0; u < N; u++)
                if (u < live) {
                    uint ah[4], al[4], bh[2], bl[2];
                    mc_frag_a_f32(a[u], am, ak, k0, lane, ah, al);
                    mc_frag_b_f32(b[u], bk, bn, k0, lane, bh, bl);
                    mc_mma_3xtf32(acc[u], ah, al, bh, bl);
                }
        }
        return;
    }
#endif
    for (int u = 0; u < N; u++)
        if (u < live) mc_tile(acc[u], a[u], am, ak, b[u], bk, bn, kk, lane);
}
/* acc[u] += A B_u for the first `live` of N tiles that share one SIMD
 * group's 16 rows of A: A(m, k) = a[m*am + k*ak], B_u(k, n) = b[k*bk + (8u +
 * n)*bn] (tile u is columns 8u..8u+7). As mc_tile, but on CUDA (16-bit) A's
 * fragment is read once per k step for all N products, and with MODE 1 (the
 * default) every B fragment of a k step is read before its mma when all N
 * tiles are live, MODE 2 also when all but the last are (the chunk walk's
 * column tiles past the first: 8 of 9), MODE 0 never. A kernel sets its
 * default by defining MC_ROW_TILES_MODE before including this header (the
 * mLSTM kernels: their template RB, for timing the modes against each other). */
#ifndef MC_ROW_TILES_MODE
#define MC_ROW_TILES_MODE 1
#endif
template <class TT, int N, int MODE = MC_ROW_TILES_MODE>
METAL_FUNC void mc_row_tiles(thread float (*acc)[4], const threadgroup TT *a, int am, int ak, const threadgroup TT *b,
                             int bk, int bn, int kk, int live, uint lane) {
    // none live: A not read either (a SIMD group whose rows are past a short
    // chunk would read past its rows, past the threadgroup memory at the end)
    if (live <= 0) return;
#if defined(ALLOY_BACKEND_CUDA)
    if constexpr (metal::is_same_v<TT, bfloat> || metal::is_same_v<TT, half>) {
        const uint sa = mc_smem(a), sb = mc_smem(b);
        if ((MODE >= 1 && live == N) || (MODE >= 2 && N > 1 && live == N - 1)) {
            // all B fragments read before the mma, so one wait on threadgroup
            // memory serves them (per-tile tests kept each mma waiting on its own read)
            const bool last = live == N;
#pragma unroll 1
            for (int k0 = 0; k0 < kk; k0 += 16) {
                uint a0, a1, a2, a3, bf[N][2];
                mc_frag_a<TT>(sa, am, ak, k0, lane, a0, a1, a2, a3);
#pragma unroll
                for (int u = 0; u < N; u++)
                    if (u < N - 1 || last)
                        mc_frag_b<TT>(sb + uint(8 * u * bn) * uint(sizeof(TT)), bk, bn, k0, lane, bf[u][0], bf[u][1]);
#pragma unroll
                for (int u = 0; u < N; u++)
                    if (u < N - 1 || last) mc_mma<TT>(acc[u], a0, a1, a2, a3, bf[u][0], bf[u][1]);
            }
            return;
        }
#pragma unroll 1
        for (int k0 = 0; k0 < kk; k0 += 16) {
            uint a0, a1, a2, a3;
            mc_frag_a<TT>(sa, am, ak, k0, lane, a0, a1, a2, a3);
#pragma unroll
            for (int u = 0; u < N; u++)
                if (u < live) {
                    uint b0, b1;
                    mc_frag_b<TT>(sb + uint(8 * u * bn) * uint(sizeof(TT)), bk, bn, k0, lane, b0, b1);
                    mc_mma<TT>(acc[u], a0, a1, a2, a3, b0, b1);
                }
        }
        return;
    } else if constexpr (metal::is_same_v<TT, float>) {
#pragma unroll 1
        for (int k0 = 0; k0 < kk; k0 += 8) {
            uint ah[4], al[4];
            mc_frag_a_f32(a, am, ak, k0, lane, ah, al);
#pragma unroll
            for (int u = 0; u < N; u++)
                if (u < live) {
                    uint bh[2], bl[2];
                    mc_frag_b_f32(b + 8 * u * bn, bk, bn, k0, lane, bh, bl);
                    mc_mma_3xtf32(acc[u], ah, al, bh, bl);
                }
        }
        return;
    }
#endif
    for (int u = 0; u < N; u++)
        if (u < live) mc_tile(acc[u], a, am, ak, b + 8 * u * bn, bk, bn, kk, lane);
}
/* acc += (A B) times a factor per row (f0 for the lane's rows g, f1 for g +
 * 8), for mc_row_tiles' arguments: the product in an accumulator of its own,
 * then into acc — a sum whose parts carry different scales (the float32 path
 * on float16 tiles: one part per state tile, each with its tile's factor). */
template <class TT, int N>
METAL_FUNC void mc_row_tiles_scaled(thread float (*acc)[4], float f0, float f1, const threadgroup TT *a, int am,
                                    int ak, const threadgroup TT *b, int bk, int bn, int kk, int live, uint lane) {
    float t[N][4];
    #pragma unroll
    for (int u = 0; u < N; u++)
        #pragma unroll
        for (int e = 0; e < 4; e++) t[u][e] = 0.0f;
    mc_row_tiles<TT, N>(t, a, am, ak, b, bk, bn, kk, live, lane);
    #pragma unroll
    for (int u = 0; u < N; u++)
        #pragma unroll
        for (int e = 0; e < 4; e++) acc[u][e] = fma(t[u][e], e < 2 ? f0 : f1, acc[u][e]);
}
/* Two values of a 16-bit TT as one 32-bit word, the first at the lower
 * address (one store instead of two). */
template <class TT>
METAL_FUNC uint mc_pack2(float first, float second) {
#if defined(ALLOY_BACKEND_CUDA)
    uint r;
    if constexpr (metal::is_same_v<TT, bfloat>) {
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(second), "f"(first));
        return r;
    } else if constexpr (metal::is_same_v<TT, half>) {
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(second), "f"(first));
        return r;
    }
#endif
    return uint(as_type<ushort>(TT(first))) | (uint(as_type<ushort>(TT(second))) << 16);
}
/* p[x] = TT(p[x] * w) for 8 consecutive elements of a 16-bit TT in
 * threadgroup memory, p 16-byte aligned: one 16-byte load and store. */
template <class TT>
METAL_FUNC void mc_scale8(threadgroup TT *p, float w) {
    threadgroup uint4 *v = (threadgroup uint4 *)p;
    uint4 x = *v;
    uint y[4] = {x.x, x.y, x.z, x.w};
    for (int e = 0; e < 4; e++)
        y[e] = mc_pack2<TT>(float(as_type<TT>(ushort(y[e] & 0xffffu))) * w, float(as_type<TT>(ushort(y[e] >> 16))) * w);
    *v = uint4(y[0], y[1], y[2], y[3]);
}
/* dst[0] = a and, where two, dst[1] = b in dst's own dtype (h: the input's,
 * or float32 for the scaled float16 path); VEC (rows 16-byte aligned, col
 * even): one 32-bit store for 16-bit pairs, one 64-bit store for float32. */
template <bool VEC, class H>
METAL_FUNC void mc_put2(device H *dst, float a, float b, bool two) {
    if constexpr (sizeof(H) == 2 && VEC) {
        *(device uint *)dst = mc_pack2<H>(a, b);
    } else if constexpr (sizeof(H) == 4 && VEC) {
        *(device float2 *)dst = float2(a, b);
    } else {
        dst[0] = H(a);
        if (two) dst[1] = H(b);
    }
}
/* Powers of two for the float32 forward on scaled float16 tiles (its SC
 * path: exponents carried beside 16-bit operands, applied to float32 values,
 * which is exact while the result is a normal float):
 *  - mc_pow2(e): 2^e as a float, e clamped to [-126, 127];
 *  - mc_ldexp(x, e): x 2^e in two factors (e clamped to [-252, 254]: a
 *    product of two exponents of 16-bit rows stays inside), so a result in
 *    float's range is exact whatever the intermediate;
 *  - mc_expo(x): floor(log2 |x|) of a normal nonzero x from its bits, -127 for
 *    zero and subnormals, 128 for inf and NaN;
 *  - mc_exp_expo(x), mc_exp_ldexp(x, e): floor(log2 exp(x)) and exp(x) 2^e
 *    (below). */
METAL_FUNC float mc_pow2(int e) { return as_type<float>(uint(clamp(e, -126, 127) + 127) << 23); }
METAL_FUNC float mc_ldexp(float x, int e) {
    e = clamp(e, -252, 254);
    const int a = e / 2;
    return x * mc_pow2(a) * mc_pow2(e - a);
}
METAL_FUNC int mc_expo(float x) { return int((as_type<uint>(x) >> 23) & 0xffu) - 127; }
/* floor(log2 exp(x)), x limited to +-1000 (NaN as -1000, so the conversion
 * to int is always defined) */
METAL_FUNC int mc_exp_expo(float x) {
    return int(floor((x > -1000.0f ? min(x, 1000.0f) : -1000.0f) * 1.44269504f));
}
/* exp(x) 2^e without passing through float32's under- or overflow on the
 * way: x's whole powers of two moved into e (no branch: x = -inf gives
 * exp(-inf) = 0, a NaN x exp(NaN)). */
METAL_FUNC float mc_exp_ldexp(float x, int e) {
    const int n = mc_exp_expo(x);
    return mc_ldexp(exp(fma(float(n), -0.693147181f, x)), n + e);
}
/* y exp(x) 2^e, the same way: y meets exp(x)'s significand first, so that a
 * factor exp(x) 2^e under float32's normal range does not lose bits as a
 * subnormal where the product need not be (a weight of e^-100 on a score of
 * 2^30). */
METAL_FUNC float mc_mul_exp_ldexp(float y, float x, int e) {
    const int n = mc_exp_expo(x);
    return mc_ldexp(y * exp(fma(float(n), -0.693147181f, x)), n + e);
}
/* Lane shuffles of one whole SIMD group (every lane active): the raw
 * instructions on CUDA, the dialect's functions elsewhere. */
METAL_FUNC float mc_lane_up(float x, uint d) {
#if defined(ALLOY_BACKEND_CUDA)
    return __shfl_up_sync(0xffffffffu, x, d);
#else
    return simd_shuffle_up(x, d);
#endif
}
METAL_FUNC float mc_lane(float x, uint src) {
#if defined(ALLOY_BACKEND_CUDA)
    return __shfl_sync(0xffffffffu, x, src);
#else
    return simd_shuffle(x, src);
#endif
}
/* sum of x over the lanes before this one (Hillis-Steele, the same order everywhere) */
METAL_FUNC float mc_lane_prefix_excl(float x, uint lane) {
    for (uint d = 1; d < 32; d <<= 1) {
        const float y = mc_lane_up(x, d);
        if (lane >= d) x += y;
    }
    const float before = mc_lane_up(x, 1u);
    return lane == 0 ? 0.0f : before;
}
/* dst[r * ld + c] = src[r * sld + c] for r < ROWS, c < COLS (a tile of a
 * row-major matrix in device memory), zero where r >= nr or c >= nc. VEC
 * (CUDA only; rows 16-byte aligned, nc a multiple of 16 bytes' elements):
 * 16-byte cp.async for the whole tile, all in flight at once, committed as
 * one group that mc_wait_copies waits for (the caller's barrier follows) —
 * or, COMMIT false, left for the caller's next commit to join; otherwise
 * element by element, done on return. */
template <class TT, int ROWS, int COLS, int NTH, bool V, bool COMMIT = true>
METAL_FUNC void mc_load_async(threadgroup TT *dst, int ld, const device TT *src, long sld, int nr, int nc, int tid) {
#if defined(ALLOY_BACKEND_CUDA)
    if constexpr (V) {
        constexpr int E = 16 / int(sizeof(TT)), CPR = COLS / E;
        const uint sd = mc_smem(dst);
        if constexpr (NTH % CPR == 0) {
            // each thread one column of 16 bytes, every RS-th row: the
            // addresses advance by constants (no per-copy division)
            constexpr int RS = NTH / CPR;
            const int c = (tid % CPR) * E, r0 = tid / CPR;
            const device TT *sp = src + long(r0) * sld + c;
            uint dp = sd + uint((r0 * ld + c) * int(sizeof(TT)));
#pragma unroll
            for (int it = 0; it < (ROWS + RS - 1) / RS; it++) {
                const int r = r0 + it * RS;
                const bool live = r < nr && c < nc;
                if (r < ROWS) mc_cp16(dp, live ? (const device void *)sp : (const device void *)src, live ? 16u : 0u);
                sp += long(RS) * sld;
                dp += uint(RS * ld * int(sizeof(TT)));
            }
        } else {
            for (int e = tid; e < ROWS * CPR; e += NTH) {
                const int r = e / CPR, c = (e % CPR) * E;
                const bool live = r < nr && c < nc;
                mc_cp16(sd + uint((r * ld + c) * int(sizeof(TT))),
                        live ? (const device void *)(src + r * sld + c) : (const device void *)src, live ? 16u : 0u);
            }
        }
        if constexpr (COMMIT) mc_cp_commit();
        return;
    }
#endif
    for (int e = tid; e < ROWS * COLS; e += NTH) {
        const int r = e / COLS, c = e % COLS;
        dst[r * ld + c] = (r < nr && c < nc) ? src[r * sld + c] : TT(0);
    }
}
/* dst[c] = src[c] for c < COLS (zero from nc on): one row of float32 as
 * mc_load_async copies it; src of another type (an array bound where the
 * caller's branch never runs) converted element by element. */
template <int COLS, int NTH, bool V, class CE>
METAL_FUNC void mc_load_row(threadgroup float *dst, const device CE *src, int nc, int tid) {
    if constexpr (metal::is_same_v<CE, float>) {
        mc_load_async<float, 1, COLS, NTH, V, false>(dst, COLS, src, COLS, 1, nc, tid);
    } else {
        for (int c = tid; c < COLS; c += NTH) dst[c] = c < nc ? float(src[c]) : 0.0f;
    }
}
template <class TT, int ROWS, int COLS, int NTH, bool V>
METAL_FUNC void mc_load(threadgroup TT *dst, int ld, const device TT *src, long sld, int nr, int nc, int tid) {
    mc_load_async<TT, ROWS, COLS, NTH, V>(dst, ld, src, sld, nr, nc, tid);
    mc_wait_copies();
}
