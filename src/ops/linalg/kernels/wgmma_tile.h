// wgmma_tile.h — the CUDA pieces the Hopper GEMM kernels share
// (matmul_wgmma, matmul_wgmma_tma, matmul_wgmma_pingpong): shared-memory
// addresses and matrix descriptors (128-byte swizzle), the m64n256k16 and
// m64n128k16 wgmma for bfloat16 and float16 with float accumulators, 16-bit
// packing, stmatrix, 16-byte shared/global moves, warpgroup barriers and the epilogue that stores
// straight from the accumulators; on every target the order of the tiles
// and the element-by-element product of one tile (the other targets' path).
// Included from a kernel's header section.

/* Tile -> (matrix, first row, first column), for BM x BN tiles of gm x gn
 * per matrix. L2 rasterisation inside a matrix: groups of 8 tile rows, rows
 * fastest inside a group. */
template <int BM, int BN>
METAL_FUNC void mm_tile_origin(int tile, int gm, int gn, thread long &bz, thread long &bm, thread long &bn) {
    const int per_mat = gm * gn, z = tile / per_mat, lin = tile - z * per_mat;
    const int per = 8 * gn, first = lin / per * 8;
    const int rows = gm - first < 8 ? gm - first : 8;
    bz = z;
    bm = long(first + (lin % per) % rows) * BM;
    bn = long((lin % per) / rows) * BN;
}

/* One tile of C = alpha A B + beta C element by element in float (beta ==
 * 0: C not read), thread t of n taking elements t, t + n, ...: the path off
 * CUDA (A, B, C at the matrix's origin). */
template <int BM, int BN, class TOUT, class PA, class PB, class PC>
METAL_FUNC void mm_tile_reference(PA Ab, PB Bb, PC Cb, long bm, long bn, long M, long N, long K, long sa_m,
                                  long sa_k, long sb_k, long sb_n, long sc_m, float al, float be, bool has_beta,
                                  int t, int n) {
    for (int e = t; e < BM * BN; e += n) {
        const long m = bm + e / BN, c = bn + e % BN;
        if (m >= M || c >= N) continue;
        float acc = 0.0f;
        for (long k = 0; k < K; k++) acc = fma(float(Ab[m * sa_m + k * sa_k]), float(Bb[k * sb_k + c * sb_n]), acc);
        float v = al * acc;
        if (has_beta) v = fma(be, float(Cb[m * sc_m + c]), v);
        Cb[m * sc_m + c] = TOUT(v);
    }
}

#if defined(ALLOY_BACKEND_CUDA)
METAL_FUNC uint mm_smem_u32(const threadgroup void *p) {
    uint r;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}
/* 16 bytes global -> shared; bytes past `valid` are zero-filled */
METAL_FUNC void mm_cp16(uint dst, const device void *src, uint valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(valid));
}
/* a shared-memory matrix descriptor, 128-byte swizzle */
METAL_FUNC ulong mm_desc(uint addr, uint lbo, uint sbo) {
    ulong d = 0;
    d |= (ulong)((addr & 0x3FFFF) >> 4);
    d |= (ulong)((lbo >> 4) & 0x3FFF) << 16;
    d |= (ulong)((sbo >> 4) & 0x3FFF) << 32;
    d |= 1ul << 62;
    return d;
}
/* One m64nNk16 wgmma of TIN (bfloat16 or half) operands into float
 * accumulators d (N / 2 a thread), A and B from shared-memory descriptors,
 * B read transposed; acc != 0 adds to d (scale-d 1), acc == 0 overwrites it
 * (a tile's first step, so that nothing zeroes the accumulators between
 * tiles). */
#define MM_ACC64 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define MM_ACC128 MM_ACC64, \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
#define MM_WGMMA(SHAPE, TYPE, REGS, A, B, P, ...) \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " P ", 0;\n" \
                 "wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE " " REGS ", " A ", " B ", p, 1, 1, 0, 1;\n}\n" \
                 : __VA_ARGS__ : "l"(da), "l"(db), "r"(acc))
#define MM_REGS64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define MM_REGS128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
template <class TIN> METAL_FUNC void mm_wgmma_n256(thread float *d, ulong da, ulong db, int acc = 1) {
    if constexpr (metal::is_same_v<TIN, half>) MM_WGMMA("m64n256k16", "f16", MM_REGS128, "%128", "%129", "%130", MM_ACC128);
    else MM_WGMMA("m64n256k16", "bf16", MM_REGS128, "%128", "%129", "%130", MM_ACC128);
}
template <class TIN> METAL_FUNC void mm_wgmma_n128(thread float *d, ulong da, ulong db, int acc = 1) {
    if constexpr (metal::is_same_v<TIN, half>) MM_WGMMA("m64n128k16", "f16", MM_REGS64, "%64", "%65", "%66", MM_ACC64);
    else MM_WGMMA("m64n128k16", "bf16", MM_REGS64, "%64", "%65", "%66", MM_ACC64);
}
#undef MM_WGMMA
#undef MM_ACC128
#undef MM_ACC64
#undef MM_REGS128
#undef MM_REGS64
/* two floats as a 16-bit pair (the lower column in the low half) */
template <class T> METAL_FUNC uint mm_pack2(float lo, float hi) {
    uint u;
    if constexpr (metal::is_same_v<T, bfloat>) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo));
    else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo));
    return u;
}
/* four 8 x 8 matrices of 16-bit values, each lane holding row l/4, columns
 * 2(l%4) and 2(l%4)+1 of each (the accumulators' layout); lane 8q + r gives
 * the address of row r of matrix q */
METAL_FUNC void mm_stmatrix4(uint addr, uint r0, uint r1, uint r2, uint r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
                 :: "r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}
/* 16 bytes from shared memory, 16 bytes to global memory */
METAL_FUNC void mm_lds16(uint src, thread uint *v) {
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(src) : "memory");
}
METAL_FUNC void mm_stg16(device void *dst, const thread uint *v) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};\n" :: "l"(dst), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]) : "memory");
}
/* a barrier of one warpgroup (ids 1 and 2, immediate so ptxas counts 3 in
 * all; threadgroup_barrier is 0) */
METAL_FUNC void mm_bar_warpgroup(int wg) {
    if (wg == 0) asm volatile("bar.sync 1, 128;\n" ::: "memory");
    else asm volatile("bar.sync 2, 128;\n" ::: "memory");
}
/* two adjacent outputs (the first at an address aligned to twice its size):
 * one store; bfloat16 and half pairs rounded by one cvt */
template <class T> METAL_FUNC void mm_store2(device T *p, float lo, float hi) {
    if constexpr (metal::is_same_v<T, bfloat> || metal::is_same_v<T, half>) {
        *(device uint *)p = mm_pack2<T>(lo, hi);
    } else if constexpr (metal::is_same_v<T, float>) {
        *(device float2 *)p = float2(lo, hi);
    } else {
        p[0] = T(lo);
        p[1] = T(hi);
    }
}
template <class T> METAL_FUNC void mm_load2(const device T *p, thread float &lo, thread float &hi) {
    if constexpr (metal::is_same_v<T, bfloat> || metal::is_same_v<T, half>) {
        const uint u = *(const device uint *)p;
        lo = float(T::alloy_from_bits(ushort(u & 0xffffu)));
        hi = float(T::alloy_from_bits(ushort(u >> 16)));
    } else if constexpr (metal::is_same_v<T, float>) {
        const float2 v = *(const device float2 *)p;
        lo = v.x;
        hi = v.y;
    } else {
        lo = float(p[0]);
        hi = float(p[1]);
    }
}
/* The epilogue from the accumulators of one warpgroup's 64 x 8NJ part (NJ
 * 32: 256 columns; thread: rows row0 and row0 + 8, columns col0 + 8j and +
 * 1, j < NJ):
 * `pairs` (whole tile, pairs aligned) one store a column pair, with beta's
 * test outside the loop; else element by element with bounds checks. */
template <class TOUT, int NJ = 32, class PC>
METAL_FUNC void mm_epilogue_direct(PC Cb, const thread float *d, long row0, long col0, long M, long N, long sc_m,
                                   bool pairs, float al, float be, bool has_beta) {
    if (pairs) {
        device TOUT *c0 = Cb + (row0 * sc_m + col0), *c1 = c0 + 8 * sc_m;
        if (!has_beta) {
            #pragma unroll
            for (int j = 0; j < NJ; j++) {
                mm_store2(c0 + 8 * j, al * d[4 * j], al * d[4 * j + 1]);
                mm_store2(c1 + 8 * j, al * d[4 * j + 2], al * d[4 * j + 3]);
            }
        } else {
            #pragma unroll
            for (int j = 0; j < NJ; j++) {
                float o0, o1, o2, o3;
                mm_load2(c0 + 8 * j, o0, o1);
                mm_load2(c1 + 8 * j, o2, o3);
                mm_store2(c0 + 8 * j, fma(be, o0, al * d[4 * j]), fma(be, o1, al * d[4 * j + 1]));
                mm_store2(c1 + 8 * j, fma(be, o2, al * d[4 * j + 2]), fma(be, o3, al * d[4 * j + 3]));
            }
        }
    } else { /* an edge tile, or unaligned pairs: element by element */
        #pragma unroll
        for (int j = 0; j < NJ; j++) {
            #pragma unroll
            for (int h = 0; h < 4; h++) {
                const long m = row0 + (h >> 1) * 8, n = col0 + j * 8 + (h & 1);
                if (m >= M || n >= N) continue;
                float v = al * d[4 * j + h];
                if (has_beta) v = fma(be, float(Cb[m * sc_m + n]), v);
                Cb[m * sc_m + n] = TOUT(v);
            }
        }
    }
}
#endif
