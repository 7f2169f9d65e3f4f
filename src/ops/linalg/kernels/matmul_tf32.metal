// matmul_tf32: C = alpha * A B + beta * C for float32 operands on Hopper's
// tensor cores (sm_90a wgmma, TF32 products, float accumulation), reading
// the operands as matmul_tf32_split.metal wrote them: A2 (batch x Mp rows)
// and B2 (B transposed: batch x Np rows), each row KB blocks of 32 TF32
// values of k in one to three parts, x = big (+ mid) (+ small):
//   PASSES = 1 (precision "default"): big; the product a_big b_big;
//   PASSES = 3 ("high"): big, small — x to about 22 of its 24 significand
//     bits; a_big b_big + a_big b_small + a_small b_big;
//   PASSES = 6 ("highest"): big, mid, small — x exactly; the six products
//     whose parts' orders add up to at most 2 (every term of the exact
//     product down to 2^-22 of it: what is left out is below 2^-32).
// Rows are padded to the tiles and k to the blocks with zeros, so every load
// is a plain 16-byte cp.async; only C's stores check the edges.
// C(b, m, n) = C[c_off + b*sc_b + m*sc_m + n], any float dtype; beta == 0:
// C is not read.
// Design: the persistent pipeline of matmul_wgmma.metal (about one
// threadgroup per SM looping over batch x tiles, the loads of a tile's first
// steps issued during the previous tile's last ones; tile rows rasterised in
// groups of 8 per matrix) with 128 x 256 output tiles (128 x 128 for
// PASSES = 6: three parts of both operands fill a stage), two warpgroups of
// 64 rows, K steps of one block (32) in the 128-byte-swizzled K-major layout
// that TF32 wgmma reads for both operands.
// PASSES = 1: m64n256k8 products accumulate in the tensor cores over all of
// K (cuBLAS's TF32 error), 4 stages of 48 KB.
// PASSES = 3, 6: the tensor cores' float accumulation is not rounded to
// nearest, and over a long K its error grows past an fp32 GEMM's (24x
// SGEMM's at 8192^3, measured), so each K step's products go into a fresh
// 64 x 128 accumulator per 128 columns of the warpgroup's tile, which is then
// added to the float accumulators with round-to-nearest adds (while one
// warpgroup adds, the other's products keep the tensor cores busy); 2
// stages of 96 KB; the next step's loads are queued right after the first
// products of a step.
// On the CPU the body loops over the same tiles element by element with the
// same products (tests run it there; the op never picks this kernel off a
// Hopper GPU).
// Launch: any grid of threadgroups of (256, 1, 1) (the op's: P = min(tiles,
// SMs) threadgroups), threadgroup memory 192 KB + 1 KB.
//! name: alloy_matmul_tf32
//! inputs: A2 B2
//! outputs: C
//! ensure_row_contiguous: false
//! template: TOUT=float32
//! template: PASSES=3
//! header:
#undef ALLOY_CUDA_LAUNCH_BOUNDS /* one threadgroup of 256 threads per SM */
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(256, 1)
#if defined(ALLOY_BACKEND_CUDA)
METAL_FUNC uint mm_smem_u32(const threadgroup void *p) {
    uint r;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
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
/* d (64 x 256, this thread's 128 floats) [+]= A B, both TF32 through descriptors
 * (K-major, 128-byte swizzle); accumulate 0 overwrites d */
METAL_FUNC void mm_wgmma_tf32_n256(thread float *d, ulong da, ulong db, uint accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(accumulate));
}
/* d (64 x 128, this thread's 64 floats) [+]= A B, both TF32 through descriptors
 * (K-major, 128-byte swizzle); accumulate 0 overwrites d */
METAL_FUNC void mm_wgmma_tf32_n128(thread float *d, ulong da, ulong db, uint accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(accumulate));
}
/* two adjacent float outputs (the first at an address aligned to twice its
 * size): one store; bfloat16 and half pairs rounded by one cvt */
template <class T> METAL_FUNC void mm_store2(device T *p, float lo, float hi) {
    if constexpr (metal::is_same_v<T, bfloat>) {
        uint u;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo));
        *(device uint *)p = u;
    } else if constexpr (metal::is_same_v<T, half>) {
        uint u;
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo));
        *(device uint *)p = u;
    } else if constexpr (metal::is_same_v<T, float>) {
        *(device float2 *)p = float2(lo, hi);
    } else {
        p[0] = T(lo);
        p[1] = T(hi);
    }
}
#endif
//! body:
constexpr int NPART = PASSES == 6 ? 3 : PASSES == 3 ? 2 : 1, PW = 32 * NPART;
constexpr int BM = 128, BN = PASSES == 6 ? 128 : 256, NH = BN / 128; /* NH: halves of 128 columns */
constexpr int A_PART = BM * 128, B_PART = BN * 128; /* bytes of one part of a stage */
constexpr int STAGE = NPART * (A_PART + B_PART), STAGES = PASSES == 1 ? 4 : 2;
const uint tid = thread_index_in_threadgroup;
const long K2 = KB * PW; /* floats per row of A2 and B2 */
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
const int KT = int(KB);
const uint sbase = mm_smem_u32(smem);
// Each thread's chunks: rows r + 32i of the A tile (i < 4) and of the B tile
// (i < 8), 16-byte chunk ch of each part's 128 bytes; the swizzle depends on
// the row mod 8 only, the same for all of a thread's rows.
const int r = int(tid) >> 3, ch = int(tid) & 7;
const uint dst = uint(r * 128 + ((ch ^ (r & 7)) << 4));

// The producer: the next K step to load is step lk of tile lt (lt >= tiles:
// none left); a_src and b_src point at its tile's rows r of A2 and B2.
int lt = KT > 0 ? g0 : tiles, lk = 0;
const device float *a_src = &A2[0], *b_src = &B2[0];
auto next_load_tile = [&]() {
    long bz, bm, bn;
    tile_at(lt, bz, bm, bn);
    a_src = &A2[0] + (bz * sa_b + (bm + r) * K2 + ch * 4);
    b_src = &B2[0] + (bz * sb_b + (bn + r) * K2 + ch * 4);
};
if (lt < tiles) next_load_tile();
// Loads the next K step (if any) into stage buf and commits one cp.async
// group either way: every call is one group, so the consumer's wait_group
// counts hold across tiles. Stage layout: A's parts, then B's parts.
auto load_next = [&](int buf) {
    if (lt < tiles) {
        const long k0 = long(lk) * PW;
        const uint sa = sbase + uint(buf * STAGE), sb = sa + uint(NPART * A_PART);
        #pragma unroll
        for (int p = 0; p < NPART; p++) {
            #pragma unroll
            for (int i = 0; i < 4; i++)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(sa + uint(p * A_PART + i * 32 * 128) + dst),
                             "l"(a_src + (32 * i * K2 + k0 + 32 * p)));
            #pragma unroll
            for (int i = 0; i < BN / 32; i++)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(sb + uint(p * B_PART + i * 32 * 128) + dst),
                             "l"(b_src + (32 * i * K2 + k0 + 32 * p)));
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
const int warp = int(tid % 128) / 32, lane = int(tid % 32);
for (int s = 0; s < STAGES - 1; s++) load_next(s);
int g = 0; /* the consumer's K step, counted over all of this threadgroup's tiles */
float d[BN / 2];
for (int tile = g0; tile < tiles; tile += P) {
    #pragma unroll
    for (int i = 0; i < BN / 2; i++) d[i] = 0.0f;
    for (int t = 0; t < KT; t++, g++) {
        const int buf = g % STAGES;
        const uint sa = sbase + uint(buf * STAGE + wg * (64 * 128)), sb = sbase + uint(buf * STAGE + NPART * A_PART);
        // step g's group is done when at most STAGES - 2 newer ones are pending
        asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2) : "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if constexpr (PASSES == 1) {
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
            #pragma unroll
            for (int kk = 0; kk < 4; kk++)
                mm_wgmma_tf32_n256(d, mm_desc(sa + uint(kk * 32), 16, 1024), mm_desc(sb + uint(kk * 32), 16, 1024), 1);
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            // step g - 1's products are done (in both warpgroups after the
            // barrier): its stage takes step g + STAGES - 1, maybe of the next tile
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
            threadgroup_barrier(mem_flags::mem_threadgroup);
            load_next((g + STAGES - 1) % STAGES);
        } else {
            #pragma unroll
            for (int h = 0; h < NH; h++) {
                float acc[64];
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
                #pragma unroll
                for (int kk = 0; kk < 4; kk++) {
                    ulong da[NPART], db[NPART]; /* parts: big, small (PASSES 3); big, mid, small (6) */
                    #pragma unroll
                    for (int q = 0; q < NPART; q++) {
                        da[q] = mm_desc(sa + uint(q * A_PART + kk * 32), 16, 1024);
                        db[q] = mm_desc(sb + uint(q * B_PART + h * 128 * 128 + kk * 32), 16, 1024);
                    }
                    /* the smallest terms first */
                    if constexpr (PASSES == 6) {
                        mm_wgmma_tf32_n128(acc, da[2], db[0], kk > 0);
                        mm_wgmma_tf32_n128(acc, da[1], db[1], 1);
                        mm_wgmma_tf32_n128(acc, da[0], db[2], 1);
                        mm_wgmma_tf32_n128(acc, da[1], db[0], 1);
                        mm_wgmma_tf32_n128(acc, da[0], db[1], 1);
                    } else {
                        mm_wgmma_tf32_n128(acc, da[1], db[0], kk > 0);
                        mm_wgmma_tf32_n128(acc, da[0], db[1], 1);
                    }
                    mm_wgmma_tf32_n128(acc, da[0], db[0], 1);
                }
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                // both warpgroups finished step g - 1's products before the
                // barrier (each waited for its own): its stage takes step
                // g + 1, queued once the tensor cores have work
                if (h == 0) load_next((g + STAGES - 1) % STAGES);
                asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
                #pragma unroll
                for (int i = 0; i < 64; i++) d[64 * h + i] += acc[i];
            }
        }
    }
    if constexpr (PASSES == 1) asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    // Epilogue: thread (warp w, lane l) of warpgroup wg holds rows
    // bm + 64wg + 16w + l/4 (+8) and columns bn + 8j + 2(l%4) (+1), j < BN/8,
    // in d[4j], d[4j + 1] (+8 rows: d[4j + 2], d[4j + 3]).
    long bz, bm, bn;
    tile_at(tile, bz, bm, bn);
    device TOUT *Cb = C + (c_off + bz * sc_b);
    const long row0 = bm + wg * 64 + warp * 16 + lane / 4, col0 = bn + 2 * (lane % 4);
    const bool whole = bm + BM <= M && bn + BN <= N;
    if (pairs && whole) {
        device TOUT *c0 = Cb + (row0 * sc_m + col0), *c1 = c0 + 8 * sc_m;
        if (beta == 0.0) {
            #pragma unroll
            for (int j = 0; j < BN / 8; j++) {
                mm_store2(c0 + 8 * j, al * d[4 * j], al * d[4 * j + 1]);
                mm_store2(c1 + 8 * j, al * d[4 * j + 2], al * d[4 * j + 3]);
            }
        } else {
            #pragma unroll
            for (int j = 0; j < BN / 8; j++) {
                mm_store2(c0 + 8 * j, fma(be, float(c0[8 * j]), al * d[4 * j]), fma(be, float(c0[8 * j + 1]), al * d[4 * j + 1]));
                mm_store2(c1 + 8 * j, fma(be, float(c1[8 * j]), al * d[4 * j + 2]), fma(be, float(c1[8 * j + 1]), al * d[4 * j + 3]));
            }
        }
    } else { /* an edge tile, or unaligned pairs: element by element */
        #pragma unroll
        for (int j = 0; j < BN / 8; j++) {
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
// Other targets: the same tiles in the same order, element by element, the
// same products of the same parts (float accumulation).
for (int tile = g0; tile < tiles; tile += P) {
    long bz, bm, bn;
    tile_at(tile, bz, bm, bn);
    auto Cb = C + (c_off + bz * sc_b);
    for (int e = int(tid); e < BM * BN; e += int(threads_per_threadgroup.x)) {
        const long m = bm + e / BN, n = bn + e % BN;
        if (m >= M || n >= N) continue;
        auto a = A2 + (bz * sa_b + m * K2);
        auto b = B2 + (bz * sb_b + n * K2);
        float acc = 0.0f;
        for (long kb = 0; kb < KB; kb++) {
            float part = 0.0f;
            for (int k = 0; k < 32; k++) {
                const long o = kb * PW + k;
                if (PASSES == 6)
                    part = fma(float(a[o + 64]), float(b[o]), fma(float(a[o + 32]), float(b[o + 32]),
                               fma(float(a[o]), float(b[o + 64]), part)));
                if (PASSES >= 3) part = fma(float(a[o + 32]), float(b[o]), fma(float(a[o]), float(b[o + 32]), part));
                part = fma(float(a[o]), float(b[o]), part);
            }
            acc += part;
        }
        float v = al * acc;
        if (beta != 0.0) v = fma(be, float(Cb[m * sc_m + n]), v);
        Cb[m * sc_m + n] = TOUT(v);
    }
}
#endif
