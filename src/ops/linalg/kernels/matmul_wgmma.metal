// matmul_wgmma: C = alpha * A B + beta * C for bfloat16 or float16 operands
// on Hopper's tensor cores (sm_90a wgmma), float accumulation. A is M x K
// with unit column stride (rows 16-byte aligned), B is K x N with unit column
// stride (rows 16-byte aligned); other layouts go to matmul_simt. C any
// float dtype, C(b, m, n) = C[c_off + b*sc_b + m*sc_m + n]; a_off, b_off,
// c_off, the strides and sizes are launch constants as for matmul_simt.
// beta == 0: C is not read.
// Design (the experiment of bench/experiments/wgmma_gemm_bf16.cu): 128 x 256
// output tiles, each computed by a threadgroup of two warpgroups (256
// threads), each warpgroup 64 x 256 with 128 float accumulators per thread;
// K steps of 64 through 4 stages of 48 KB of dynamic threadgroup memory,
// filled with 16-byte cp.async into the 128-byte-swizzled layouts wgmma reads
// (A K-major; B MN-major, read transposed); bytes outside the matrices are
// zero-filled by cp.async, so any M, N, K works (rows must still be 16-byte
// aligned: K and N multiples of 8 for contiguous matrices). Tiles wholly
// inside the matrices use the plain 16-byte cp.async (the zero-filling form
// costs a fifth of the rate at 8192^3); every loop over the accumulators is
// unrolled so they stay in registers; `__launch_bounds__(256, 1)` (the
// header redefines ALLOY_CUDA_LAUNCH_BOUNDS, which the generated kernel
// carries) lets ptxas give them all the registers.
// Persistent grid: about one threadgroup per SM (the host passes the SM
// count); threadgroup g of P takes tiles g, g + P, g + 2P, ... of the
// batch x tile rows x tile columns, tile rows rasterised in groups of 8 per
// matrix for L2 reuse. The pipeline runs over a threadgroup's K steps of all
// its tiles as one sequence: the loads of a tile's first three steps are
// issued during the last steps of the previous tile, so its epilogue (the
// stores, which leave the tensor cores idle) overlaps them, and a short K
// (batches of 1024^3: 16 steps a tile) no longer pays a pipeline fill per
// tile. Epilogue, whole tiles: 16-bit outputs with beta == 0 and C's rows
// 16-byte aligned go through the stage of the tile's last K step (free then:
// the next tile's loads fill the other three) with stmatrix and leave in
// coalesced 16-byte stores; otherwise column pairs are stored straight from
// the accumulators (one 4-byte store for 16-bit outputs, 8 bytes for float)
// where C's pairs are aligned, with the beta == 0 test outside the loop.
// Only edge tiles check every element.
// On the CPU the body loops over the same tiles in the same order, element
// by element (tests run it there; the op never picks this kernel off a
// Hopper GPU).
// Launch: any grid of threadgroups of (256, 1, 1) (the op's: (P*256, 1, 1)
// with P = min(tiles, SMs)), threadgroup memory 4 * 48 KB + 1 KB.
//! name: alloy_matmul_wgmma
//! inputs: A B
//! outputs: C
//! ensure_row_contiguous: false
//! template: TIN=bfloat16
//! template: TOUT=bfloat16
//! header:
#undef ALLOY_CUDA_LAUNCH_BOUNDS /* one threadgroup of 256 threads per SM */
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(256, 1)
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
METAL_FUNC void mm_wgmma_bf16(thread float *d, ulong da, ulong db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 1;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(1));
}
METAL_FUNC void mm_wgmma_f16(thread float *d, ulong da, ulong db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 1;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(1));
}
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
#endif
//! body:
constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4;
constexpr int A_STAGE = BM * BK * 2, B_STAGE = BK * BN * 2, STAGE = A_STAGE + B_STAGE;
const uint tid = thread_index_in_threadgroup;
// The tiles (the host keeps their count below 2^31) and this threadgroup's
// share: tiles g0, g0 + P, g0 + 2P, ...
const int gm = int((M + BM - 1) / BM), gn = int((N + BN - 1) / BN);
const int per_mat = gm * gn, tiles = int(batch) * per_mat;
const int P = int(threadgroups_per_grid.x * threadgroups_per_grid.y * threadgroups_per_grid.z);
const int g0 = int(threadgroup_position_in_grid.x +
                   threadgroups_per_grid.x * (threadgroup_position_in_grid.y +
                                              threadgroups_per_grid.y * threadgroup_position_in_grid.z));
// Tile -> (matrix, first row, first column). L2 rasterisation inside a
// matrix: groups of 8 tile rows, rows fastest inside a group.
auto tile_at = [&](int tile, thread long &bz, thread long &bm, thread long &bn) {
    const int z = tile / per_mat, lin = tile - z * per_mat;
    const int per = 8 * gn, first = lin / per * 8;
    const int rows = gm - first < 8 ? gm - first : 8;
    bz = z;
    bm = long(first + (lin % per) % rows) * BM;
    bn = long((lin % per) / rows) * BN;
};
const float al = float(alpha), be = float(beta);

#if defined(ALLOY_BACKEND_CUDA)
threadgroup uchar *smem = (threadgroup uchar *)(((ulong)alloy_threadgroup_memory + 1023) & ~1023ul);
const int wg = int(tid / 128);
const int KT = int((K + BK - 1) / BK);
const uint sbase = mm_smem_u32(smem);
// Each thread's chunks: A rows a_r + 32i (i < 4), chunk a_ch; B rows (k) b_r + 8i
// (i < 8), chunk b_cn. The swizzle depends on the row mod 8 only, which is the
// same for all of a thread's rows, so destinations and sources are computed once
// per tile.
const int a_r = int(tid) >> 3, a_ch = int(tid) & 7, b_r = int(tid) >> 5, b_cn = int(tid) & 31;
const uint a_dst = uint(a_r * 128 + ((a_ch ^ (a_r & 7)) << 4));
const uint b_dst = uint((b_cn >> 3) * (BK * 128) + b_r * 128 + (((b_cn & 7) ^ (b_r & 7)) << 4));

// The producer: the next K step to load is step lk of tile lt (lt >= tiles:
// none left). Its per-tile state is set by next_load_tile.
int lt = KT > 0 ? g0 : tiles, lk = 0;
const device TIN *a_src = A, *b_src = B;
uint a_rows = 0;   /* bit i: row a_r + 32i is inside M */
uint b_bytes = 0;  /* bytes of the thread's B chunk inside N */
bool interior = false; /* the whole 128 x 256 tile inside M and N: no row checks */
auto next_load_tile = [&]() {
    long bz, bm, bn;
    tile_at(lt, bz, bm, bn);
    a_src = A + (a_off + bz * sa_b + (bm + a_r) * sa_m + a_ch * 8);
    b_src = B + (b_off + bz * sb_b + b_r * sb_k + bn + b_cn * 8);
    a_rows = 0;
    for (int i = 0; i < 4; i++) a_rows |= (bm + a_r + 32 * i < M) ? (1u << i) : 0u;
    const long b_left = N - (bn + b_cn * 8);
    b_bytes = b_left <= 0 ? 0u : uint(b_left >= 8 ? 16 : b_left * 2);
    interior = bm + BM <= M && bn + BN <= N;
};
if (lt < tiles) next_load_tile();
// Loads the next K step (if any) into stage buf and commits one cp.async
// group either way: every call is one group, so the consumer's wait_group
// counts hold across tiles.
auto load_next = [&](int buf) {
    if (lt < tiles) {
        const long k0 = long(lk) * BK;
        const uint sa = sbase + uint(buf * STAGE), sb = sa + A_STAGE;
        if (interior && k0 + BK <= K) {
            #pragma unroll
            for (int i = 0; i < 4; i++)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(sa + a_dst + uint(i * 32 * 128)),
                             "l"(a_src + (32 * i * sa_m + k0)));
            #pragma unroll
            for (int i = 0; i < 8; i++)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(sb + b_dst + uint(i * 8 * 128)),
                             "l"(b_src + (k0 + 8 * i) * sb_k));
        } else {
            const long a_left = K - (k0 + a_ch * 8);
            const uint a_bytes = a_left <= 0 ? 0u : uint(a_left >= 8 ? 16 : a_left * 2);
            #pragma unroll
            for (int i = 0; i < 4; i++) {
                const uint v = (a_rows >> i) & 1u ? a_bytes : 0u;
                mm_cp16(sa + a_dst + uint(i * 32 * 128), v ? (const device void *)(a_src + (32 * i * sa_m + k0)) : (const device void *)A, v);
            }
            #pragma unroll
            for (int i = 0; i < 8; i++) {
                const uint v = (k0 + b_r + 8 * i < K) ? b_bytes : 0u;
                mm_cp16(sb + b_dst + uint(i * 8 * 128), v ? (const device void *)(b_src + (k0 + 8 * i) * sb_k) : (const device void *)B, v);
            }
        }
        if (++lk == KT) { /* on to this threadgroup's next tile */
            lk = 0;
            lt += P;
            if (lt < tiles) next_load_tile();
        }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
};

// C's column pairs are aligned for one store (columns 2(lane % 4) + 8j from a
// tile's first column, a multiple of 256, are even)
const bool pairs = ((c_off | sc_b | sc_m) & 1) == 0 && ((ulong)C % (2 * sizeof(TOUT))) == 0;
// 16-bit outputs with beta == 0 and rows of C 16-byte aligned: whole tiles go
// through shared memory (stmatrix) and leave in 16-byte stores, two rows of
// 256 bytes per warp instruction, instead of 64 stores of 4 bytes per thread
// that each touch 8 rows (false: the paired stores, for comparison)
constexpr bool STAGE_STORES = sizeof(TOUT) == 2;
const bool staged = STAGE_STORES && beta == 0.0 && ((c_off | sc_b | sc_m) & 7) == 0 && ((ulong)C & 15) == 0;
const int warp = int(tid % 128) / 32, lane = int(tid % 32);
for (int s = 0; s < STAGES - 1; s++) load_next(s);
int g = 0; /* the consumer's K step, counted over all of this threadgroup's tiles */
float d[128];
for (int tile = g0; tile < tiles; tile += P) {
    #pragma unroll
    for (int i = 0; i < 128; i++) d[i] = 0.0f;
    for (int t = 0; t < KT; t++, g++) {
        const int buf = g % STAGES;
        const uint sa = sbase + uint(buf * STAGE + wg * (64 * 128)), sb = sbase + uint(buf * STAGE + A_STAGE);
        // step g's group is done when at most STAGES - 2 newer ones are pending
        asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2) : "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        threadgroup_barrier(mem_flags::mem_threadgroup);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        #pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            const ulong da = mm_desc(sa + uint(kk * 32), 16, 1024);
            const ulong db = mm_desc(sb + uint(kk * 2048), BK * 128, 1024);
            if constexpr (metal::is_same_v<TIN, half>) mm_wgmma_f16(d, da, db);
            else mm_wgmma_bf16(d, da, db);
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        // step g - 1's products are done (in both warpgroups after the
        // barrier): its stage takes step g + STAGES - 1, maybe of the next tile
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        threadgroup_barrier(mem_flags::mem_threadgroup);
        load_next((g + STAGES - 1) % STAGES);
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    // Epilogue: thread (warp w, lane l) of warpgroup wg holds rows
    // bm + 64wg + 16w + l/4 (+8) and columns bn + 8j + 2(l%4) (+1), j < 32.
    long bz, bm, bn;
    tile_at(tile, bz, bm, bn);
    device TOUT *Cb = C + (c_off + bz * sc_b);
    const long row0 = bm + wg * 64 + warp * 16 + lane / 4, col0 = bn + 2 * (lane % 4);
    const bool whole = bm + BM <= M && bn + BN <= N;
    if constexpr (STAGE_STORES) if (staged && whole) {
        // The stage of the tile's last K step is free (the next tile's loads
        // go to the other three) once both warpgroups' products have read it;
        // it is refilled only after the next step's second barrier. Each
        // warpgroup stages its 64 x 256 half in two passes of 64 x 128 (16 KB,
        // rows of 256 bytes, the 16-byte chunks of a row XOR-swizzled by the
        // row mod 8: stmatrix's eight rows and a quarter warp's reads are
        // conflict-free).
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const uint region = sbase + uint(((g + STAGES - 1) % STAGES) * STAGE + wg * 16384);
        const int srow = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, sblk = lane >> 4;
        device TOUT *crow = Cb + ((bm + wg * 64) * sc_m + bn);
        #pragma unroll
        for (int pass = 0; pass < 2; pass++) {
            #pragma unroll
            for (int jj = 0; jj < 16; jj += 2) { /* column blocks jj, jj + 1 of the pass: 4 matrices */
                const int j = pass * 16 + jj, blk = jj + sblk;
                mm_stmatrix4(region + uint(srow * 256 + (((blk & 8) | ((blk ^ srow) & 7)) << 4)),
                             mm_pack2<TOUT>(al * d[4 * j], al * d[4 * j + 1]),
                             mm_pack2<TOUT>(al * d[4 * j + 2], al * d[4 * j + 3]),
                             mm_pack2<TOUT>(al * d[4 * j + 4], al * d[4 * j + 5]),
                             mm_pack2<TOUT>(al * d[4 * j + 6], al * d[4 * j + 7]));
            }
            mm_bar_warpgroup(wg);
            // thread t of the warpgroup: chunk t % 16 of rows t / 16 + 8i (all
            // eight reads first, then the stores)
            const int c = int(tid % 16), r0 = int(tid % 128) / 16;
            uint v[8][4];
            #pragma unroll
            for (int i = 0; i < 8; i++)
                mm_lds16(region + uint((r0 + 8 * i) * 256 + (((c & 8) | ((c ^ r0) & 7)) << 4)), v[i]);
            #pragma unroll
            for (int i = 0; i < 8; i++) mm_stg16(crow + ((r0 + 8 * i) * sc_m + pass * 128 + c * 8), v[i]);
            if (pass == 0) mm_bar_warpgroup(wg); /* read before the second pass overwrites */
        }
        continue;
    }
    if (pairs && whole) {
        device TOUT *c0 = Cb + (row0 * sc_m + col0), *c1 = c0 + 8 * sc_m;
        if (beta == 0.0) {
            #pragma unroll
            for (int j = 0; j < 32; j++) {
                mm_store2(c0 + 8 * j, al * d[4 * j], al * d[4 * j + 1]);
                mm_store2(c1 + 8 * j, al * d[4 * j + 2], al * d[4 * j + 3]);
            }
        } else {
            #pragma unroll
            for (int j = 0; j < 32; j++) {
                float o0, o1, o2, o3;
                mm_load2(c0 + 8 * j, o0, o1);
                mm_load2(c1 + 8 * j, o2, o3);
                mm_store2(c0 + 8 * j, fma(be, o0, al * d[4 * j]), fma(be, o1, al * d[4 * j + 1]));
                mm_store2(c1 + 8 * j, fma(be, o2, al * d[4 * j + 2]), fma(be, o3, al * d[4 * j + 3]));
            }
        }
    } else { /* an edge tile, or unaligned pairs: element by element */
        #pragma unroll
        for (int j = 0; j < 32; j++) {
            #pragma unroll
            for (int h = 0; h < 4; h++) {
                const long m = row0 + (h >> 1) * 8, n = col0 + j * 8 + (h & 1);
                if (m >= M || n >= N) continue;
                float v = al * d[4 * j + h];
                if (beta != 0.0) v = fma(be, float(Cb[m * sc_m + n]), v);
                Cb[m * sc_m + n] = TOUT(v);
            }
        }
    }
}
asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#else
// Other targets: the same tiles in the same order, element by element (float
// accumulation).
for (int tile = g0; tile < tiles; tile += P) {
    long bz, bm, bn;
    tile_at(tile, bz, bm, bn);
    auto Ab = A + (a_off + bz * sa_b);
    auto Bb = B + (b_off + bz * sb_b);
    auto Cb = C + (c_off + bz * sc_b);
    for (int e = int(tid); e < BM * BN; e += int(threads_per_threadgroup.x)) {
        const long m = bm + e / BN, n = bn + e % BN;
        if (m >= M || n >= N) continue;
        float acc = 0.0f;
        for (long k = 0; k < K; k++) acc = fma(float(Ab[m * sa_m + k * sa_k]), float(Bb[k * sb_k + n * sb_n]), acc);
        float v = al * acc;
        if (beta != 0.0) v = fma(be, float(Cb[m * sc_m + n]), v);
        Cb[m * sc_m + n] = TOUT(v);
    }
}
#endif
