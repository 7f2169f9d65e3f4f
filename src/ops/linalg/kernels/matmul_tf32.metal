// matmul_tf32: C = alpha * A B + beta * C for float32 operands on Hopper's
// tensor cores (sm_90a wgmma, TF32 inputs, float accumulation). PASSES = 3
// (precision "high"): each factor x is split into big = tf32(x) and
// small = tf32(x - big), rounded to nearest, and the product is
// a_big b_big + a_big b_small + a_small b_big — every factor keeps about 22
// of its 24 significand bits. PASSES = 1 (precision "default"): a_big b_big.
// A is M x K and B is K x N, both with unit column stride and rows 16-byte
// aligned (K and N multiples of 4 for contiguous matrices); other layouts go
// to matmul_simt. C any float dtype, as matmul_simt.
// Design: TF32 wgmma reads shared-memory operands only K-major, and B is
// stored N-major, so the kernel computes C^T = B^T A^T: A^T is the
// shared-memory operand (A's rows are K-major as they are) and B^T the
// register operand, gathered from B's tile by each thread (registers have no
// major-ness). A 256 (M) x 128 (N) tile per threadgroup of two warpgroups
// (256 threads); each warpgroup computes 64 columns of N times all 256 rows
// as four quarters of m64n64k8 (128 float accumulators per thread, and 2 x 32
// for the tensor cores' partial sums). K steps of 32 through
// 3 stages of cp.async (A: 128-byte-swizzled K-major; B: rows padded by 8
// floats so the fragment gathers hit 32 banks); each thread rounds the A
// chunks it loaded itself (in place: big; into one of two buffers: small) while
// the tensor cores work on the previous step. Bytes outside the matrices are
// zero-filled by cp.async, so any M, N, K works. On the CPU the body is a plain
// loop over the same tile (tests run it there; the op never picks this kernel
// off a Hopper GPU).
// Launch: grid = (ceil(N/128)*256, ceil(M/256), batch), threadgroup = (256, 1, 1),
// threadgroup memory 216064 + 1024 bytes.
//! name: alloy_matmul_tf32
//! inputs: A B
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
/* x rounded to the nearest TF32 (low 13 bits zero) */
METAL_FUNC uint mm_tf32(float x) {
    uint r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}
/* d (64 x N, this thread's N/2 floats) = [d +] A B: A (64 x 8 TF32) from
 * registers, B (8 x N) through the descriptor; accumulate 0 overwrites d */
METAL_FUNC void mm_wgmma_tf32_n64(thread float *d, uint a0, uint a1, uint a2, uint a3, ulong db, uint accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(db), "r"(accumulate));
}
#endif
//! body:
constexpr int BM = 256, BN = 128, BK = 32, STAGES = 3;
constexpr int A_BYTES = BM * BK * 4;            // one stage of A (and one small-part buffer)
constexpr int B_ROW = BN + 8;                   // floats per B row in threadgroup memory
constexpr int B_BYTES = BK * B_ROW * 4;
constexpr int SMALL_OFF = STAGES * A_BYTES, B_OFF = SMALL_OFF + 2 * A_BYTES;
const uint tid = thread_index_in_threadgroup;
const long bz = long(threadgroup_position_in_grid.z);
auto Ab = A + (a_off + bz * sa_b);
auto Bb = B + (b_off + bz * sb_b);
auto Cb = C + (c_off + bz * sc_b);
// L2 rasterisation: groups of 8 tile rows, rows fastest inside a group
const int gn = int(threadgroups_per_grid.x), gm = int(threadgroups_per_grid.y);
const int lin = int(threadgroup_position_in_grid.x) + int(threadgroup_position_in_grid.y) * gn;
const int per = 8 * gn, grp = lin / per, first = grp * 8;
const int rows = gm - first < 8 ? gm - first : 8;
const int by = first + (lin % per) % rows, bx = (lin % per) / rows;
const long bm = long(by) * BM, bn = long(bx) * BN;
const float al = float(alpha), be = float(beta);

#if defined(ALLOY_BACKEND_CUDA)
threadgroup uchar *smem = (threadgroup uchar *)(((ulong)alloy_threadgroup_memory + 1023) & ~1023ul);
const int wg = int(tid / 128), warp = int(tid % 128) / 32, lane = int(tid % 32);
const int KT = int((K + BK - 1) / BK);
const uint sbase = mm_smem_u32(smem);
// Each thread's chunks: A rows a_r + 32i (i < 8), 16-byte chunk a_ch; B rows (k)
// b_r + 8i (i < 4), chunk b_cn. The swizzle depends on the row mod 8 only, the
// same for all of a thread's A rows.
const int a_r = int(tid) >> 3, a_ch = int(tid) & 7, b_r = int(tid) >> 5, b_cn = int(tid) & 31;
const uint a_dst = uint(a_r * 128 + ((a_ch ^ (a_r & 7)) << 4));
const uint b_dst = uint(b_r * B_ROW * 4 + b_cn * 16);
const device float *a_src = &Ab[0] + ((bm + a_r) * sa_m + a_ch * 4);
const device float *b_src = &Bb[0] + (b_r * sb_k + bn + b_cn * 4);
uint a_rows = 0; /* bit i: row a_r + 32i is inside M */
for (int i = 0; i < 8; i++) a_rows |= (bm + a_r + 32 * i < M) ? (1u << i) : 0u;
const long b_left = N - (bn + b_cn * 4);
const uint b_bytes = b_left <= 0 ? 0u : uint(b_left >= 4 ? 16 : b_left * 4);
const bool interior = bm + BM <= M && bn + BN <= N;
auto load = [&](int t) {
    const long k0 = long(t) * BK;
    const int buf = t % STAGES;
    const uint sa = sbase + uint(buf * A_BYTES), sb = sbase + uint(B_OFF + buf * B_BYTES);
    if (interior && k0 + BK <= K) {
        #pragma unroll
        for (int i = 0; i < 8; i++)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(sa + a_dst + uint(i * 32 * 128)),
                         "l"(a_src + (32 * i * sa_m + k0)));
        #pragma unroll
        for (int i = 0; i < 4; i++)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(sb + b_dst + uint(i * 8 * B_ROW * 4)),
                         "l"(b_src + (k0 + 8 * i) * sb_k));
    } else {
        const long a_left = K - (k0 + a_ch * 4);
        const uint a_bytes = a_left <= 0 ? 0u : uint(a_left >= 4 ? 16 : a_left * 4);
        #pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint v = (a_rows >> i) & 1u ? a_bytes : 0u;
            mm_cp16(sa + a_dst + uint(i * 32 * 128), v ? (const device void *)(a_src + (32 * i * sa_m + k0)) : (const device void *)a_src, v);
        }
        #pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint v = (k0 + b_r + 8 * i < K) ? b_bytes : 0u;
            mm_cp16(sb + b_dst + uint(i * 8 * B_ROW * 4), v ? (const device void *)(b_src + (k0 + 8 * i) * sb_k) : (const device void *)b_src, v);
        }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
};
// Round the A chunks this thread loaded for step t: big in place, small into
// buffer t % 2 (the same swizzled offsets).
auto split = [&](int t) {
    threadgroup uchar *sa = smem + (t % STAGES) * A_BYTES;
    threadgroup uchar *ss = smem + SMALL_OFF + (t % 2) * A_BYTES;
    #pragma unroll
    for (int i = 0; i < 8; i++) {
        const uint off = a_dst + uint(i * 32 * 128);
        float4 x = *(threadgroup float4 *)(sa + off);
        uint4 big = uint4(mm_tf32(x.x), mm_tf32(x.y), mm_tf32(x.z), mm_tf32(x.w));
        *(threadgroup uint4 *)(sa + off) = big;
        if (PASSES == 3)
            *(threadgroup uint4 *)(ss + off) = uint4(mm_tf32(x.x - as_type<float>(big.x)), mm_tf32(x.y - as_type<float>(big.y)),
                                                     mm_tf32(x.z - as_type<float>(big.z)), mm_tf32(x.w - as_type<float>(big.w)));
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
};

// The tensor cores' float accumulation is not rounded to nearest: over a long
// K its error grows well past an fp32 GEMM's (measured at 8192^3: 24x SGEMM's).
// So each step of 32 accumulates in the tensor cores, a quarter of the tile's
// 256 rows at a time (acc0 and acc1 in turn: one quarter is added to the float
// accumulators d with round-to-nearest adds while the next is in flight).
constexpr int PARTS = 4, NP = 256 / PARTS; /* rows of A (columns of C^T) per part */
float d[128], acc0[32], acc1[32];
#pragma unroll
for (int i = 0; i < 128; i++) d[i] = 0.0f;
load(0);
if (KT > 1) load(1);
else asm volatile("cp.async.commit_group;\n" ::: "memory");
asm volatile("cp.async.wait_group 1;\n" ::: "memory");
split(0);
threadgroup_barrier(mem_flags::mem_threadgroup);
// this thread's B^T fragment: rows (n) 64 wg + 16 warp + lane/4 (+8), columns (k) lane%4 (+4)
const int fn = wg * 64 + warp * 16 + lane / 4, fk = lane % 4;
for (int t = 0; t < KT; t++) {
    const threadgroup float *bs = (const threadgroup float *)(smem + B_OFF + (t % STAGES) * B_BYTES);
    uint fb[16], fs[16]; /* big and small parts, 4 per k step of 8 */
    #pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        const int k = kk * 8 + fk;
        const float x[4] = {bs[k * B_ROW + fn], bs[k * B_ROW + fn + 8], bs[(k + 4) * B_ROW + fn], bs[(k + 4) * B_ROW + fn + 8]};
        #pragma unroll
        for (int e = 0; e < 4; e++) {
            fb[kk * 4 + e] = mm_tf32(x[e]);
            fs[kk * 4 + e] = mm_tf32(x[e] - as_type<float>(fb[kk * 4 + e]));
        }
    }
    const uint sa = sbase + uint((t % STAGES) * A_BYTES), ss = sbase + uint(SMALL_OFF + (t % 2) * A_BYTES);
    auto issue = [&](int part, thread float *ac) {
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        #pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            const uint off = uint(part * NP * 128 + kk * 32);
            const ulong da = mm_desc(sa + off, 16, 1024), ds = mm_desc(ss + off, 16, 1024);
            const uint *b = fb + kk * 4, *s = fs + kk * 4;
            if (PASSES == 3) {
                mm_wgmma_tf32_n64(ac, b[0], b[1], b[2], b[3], ds, kk > 0);
                mm_wgmma_tf32_n64(ac, s[0], s[1], s[2], s[3], da, 1);
            }
            mm_wgmma_tf32_n64(ac, b[0], b[1], b[2], b[3], da, PASSES == 3 || kk > 0);
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    };
    issue(0, acc0);
    if (t + 2 < KT) load(t + 2);
    else asm volatile("cp.async.commit_group;\n" ::: "memory");
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    if (t + 1 < KT) split(t + 1);
    #pragma unroll
    for (int part = 1; part <= PARTS; part++) {
        if (part < PARTS) {
            issue(part, part % 2 ? acc1 : acc0);
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        } else {
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        }
        thread float *done = (part - 1) % 2 ? acc1 : acc0;
        #pragma unroll
        for (int i = 0; i < 32; i++) asm volatile("" : "+f"(done[i]) :: "memory");
        #pragma unroll
        for (int i = 0; i < 32; i++) d[(part - 1) * 32 + i] += done[i];
    }
    #pragma unroll
    for (int i = 0; i < 16; i++) asm volatile("" : "+r"(fb[i]), "+r"(fs[i]) :: "memory");
    threadgroup_barrier(mem_flags::mem_threadgroup);
}
asm volatile("cp.async.wait_group 0;\n" ::: "memory");
// Epilogue: d[4j + h] of thread (warpgroup g, warp w, lane l) is C^T row
// 64g + 16w + l/4 + 8(h/2), column 8j + 2(l%4) + h%2 (whichever part):
// C's row m, column n.
#pragma unroll
for (int j = 0; j < 32; j++) {
    #pragma unroll
    for (int h = 0; h < 4; h++) {
        const long n = bn + fn + (h >> 1) * 8, m = bm + j * 8 + 2 * (lane % 4) + (h & 1);
        if (m >= M || n >= N) continue;
        float v = al * d[4 * j + h];
        if (beta != 0.0) v = fma(be, float(Cb[m * sc_m + n]), v);
        Cb[m * sc_m + n] = TOUT(v);
    }
}
#else
// Other targets: the same tile, element by element (exact float products).
for (int e = int(tid); e < BM * BN; e += int(threads_per_threadgroup.x)) {
    const long m = bm + e / BN, n = bn + e % BN;
    if (m >= M || n >= N) continue;
    float acc = 0.0f;
    for (long k = 0; k < K; k++) acc = fma(float(Ab[m * sa_m + k * sa_k]), float(Bb[k * sb_k + n * sb_n]), acc);
    float v = al * acc;
    if (beta != 0.0) v = fma(be, float(Cb[m * sc_m + n]), v);
    Cb[m * sc_m + n] = TOUT(v);
}
#endif
