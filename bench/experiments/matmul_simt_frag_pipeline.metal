// EXPERIMENT (not in the build; NOTES.md, "Exact float32 GEMM on CUDA cores"): matmul_simt with the
// shared-memory fragments of K step kk+1 read into a second register set while step kk multiplies,
// the next tile stored and the barrier passed inside the last K step, and per-thread pointers that
// advance instead of 64-bit index products. SIMT_MINB: threadgroups per SM for ptxas (1 or 2).
// matmul_simt: C = alpha * A B + beta * C on CUDA cores (no tensor cores):
// exact fp32 products and sums (fused multiply-add, float accumulation) or
// double for float64. The GEMM of precision "highest" for float32, of float64,
// and of every layout the tensor-core kernels do not take.
// A: M x K (A(b, m, k) = A[b*sa_b + m*sa_m + k*sa_k]), B: K x N
// (B[b*sb_b + k*sb_k + n*sb_n]), C: M x N (C[b*sc_b + m*sc_m + n]); strides
// in elements, any sign (a transposed operand is a view with swapped
// strides); a_off, b_off, c_off (elements) move the origins. beta == 0: C is not read. Inputs float32, float16, bfloat16 or
// float64 (both the same); C any of these. Templates: TIN (A's and B's
// dtype), TOUT (C's), ACC (float, or double for float64).
// Tiles: 128 x 128 per threadgroup of 256 threads, K steps of 8, each thread
// 8 x 8 outputs (rows ty*4 + {0..3} and 64 + ty*4 + {0..3}, likewise the
// columns, so the shared-memory reads are 16-byte and conflict-free); the
// next K step is loaded into registers while the current one is multiplied
// (two shared buffers, one barrier per step); threadgroups are rasterised in
// groups of 8 tile rows for L2 reuse. Contiguous float32 rows (or
// columns) are read 16 bytes at a time where aligned; everything else
// element by element with bounds checks (zeros outside the matrices).
// Launch: grid = (ceil(N/128)*256, ceil(M/128), batch), threadgroup = (256, 1, 1).
//! name: alloy_matmul_simt
//! inputs: A B
//! outputs: C
//! ensure_row_contiguous: false
//! template: TIN=float32
//! template: TOUT=float32
//! template: ACC=float32
//! header:
#ifndef SIMT_MINB
#define SIMT_MINB 2
#endif
#undef ALLOY_CUDA_LAUNCH_BOUNDS
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(256, SIMT_MINB)
//! body:
constexpr int BM = 128, BN = 128, BK = 8;
threadgroup ACC As[2][BK][BM + 4];
threadgroup ACC Bs[2][BK][BN];

const uint tid = thread_index_in_threadgroup;
const long bz = long(threadgroup_position_in_grid.z);
const int gn = int(threadgroups_per_grid.x), gm = int(threadgroups_per_grid.y);
const int lin = int(threadgroup_position_in_grid.x) + int(threadgroup_position_in_grid.y) * gn;
const int per = 8 * gn, grp = lin / per, first = grp * 8;
const int rows = gm - first < 8 ? gm - first : 8;
const long m0 = long(first + (lin % per) % rows) * BM;
const long n0 = long((lin % per) / rows) * BN;
auto Ab = A + (a_off + bz * sa_b);
auto Bb = B + (b_off + bz * sb_b);
auto Cb = C + (c_off + bz * sc_b);

// What each thread loads: 4 elements of A (row ar, k = ak..ak+3) and 4 of B
// (k = bk, columns bn..bn+3) per K step.
const int ar = int(tid >> 1), ak = int(tid & 1u) * 4;
const int bk = int(tid >> 5), bn = int(tid & 31u) * 4;
const long a_row = m0 + ar;
const long b_col = n0 + bn;
// 16-byte loads: float32, unit stride along the 4 elements, aligned.
constexpr bool is_f32 = metal::is_same_v<TIN, float>;
const bool a_vec = is_f32 && K > 0 && sa_k == 1 && (sa_m % 4) == 0 && a_row < M &&
                   ((ulong)(&Ab[0]) % 16) == 0;
const bool b_vec = is_f32 && K > 0 && sb_n == 1 && (sb_k % 4) == 0 && b_col + 3 < N &&
                   ((ulong)(&Bb[0]) % 16) == 0;

ACC ra[4], rb[4];
auto load = [&](long k0) {
    const long ka = k0 + ak;
    if (a_vec && ka + 3 < K) {
        const float4 v = *(const device float4 *)(&Ab[a_row * sa_m + ka]);
        ra[0] = ACC(v.x); ra[1] = ACC(v.y); ra[2] = ACC(v.z); ra[3] = ACC(v.w);
    } else {
        for (int j = 0; j < 4; j++)
            ra[j] = (a_row < M && ka + j < K) ? ACC(Ab[a_row * sa_m + (ka + j) * sa_k]) : ACC(0);
    }
    const long kb = k0 + bk;
    if (b_vec && kb < K) {
        const float4 v = *(const device float4 *)(&Bb[kb * sb_k + b_col]);
        rb[0] = ACC(v.x); rb[1] = ACC(v.y); rb[2] = ACC(v.z); rb[3] = ACC(v.w);
    } else {
        for (int j = 0; j < 4; j++)
            rb[j] = (kb < K && b_col + j < N) ? ACC(Bb[kb * sb_k + (b_col + j) * sb_n]) : ACC(0);
    }
};
auto store = [&](int buf) {
    for (int j = 0; j < 4; j++) As[buf][ak + j][ar] = ra[j];
    for (int j = 0; j < 4; j++) Bs[buf][bk][bn + j] = rb[j];
};

const int ty = int(tid >> 4), tx = int(tid & 15u);
ACC acc[8][8];
#pragma unroll
for (int i = 0; i < 8; i++)
#pragma unroll
    for (int j = 0; j < 8; j++) acc[i][j] = ACC(0);

// Two register sets of fragments: set s holds K step kk's 8 A and 8 B values.
ACC fa[2][8], fb[2][8];
auto frag = [&](int b, int kk, int s) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        fa[s][i] = As[b][kk][ty * 4 + i];
        fa[s][i + 4] = As[b][kk][64 + ty * 4 + i];
        fb[s][i] = Bs[b][kk][tx * 4 + i];
        fb[s][i + 4] = Bs[b][kk][64 + tx * 4 + i];
    }
};

if (K > 0) {
    load(0);
    store(0);
}
threadgroup_barrier(mem_flags::mem_threadgroup);
frag(0, 0, 0);
int buf = 0;
for (long k0 = 0; k0 < K; k0 += BK) {
    const bool more = k0 + BK < K;
    if (more) load(k0 + BK);
#pragma unroll
    for (int kk = 0; kk < BK; kk++) {
        if (kk == BK - 1) {
            // The other buffer was last read before the previous step's barrier.
            if (more) {
                store(buf ^ 1);
                threadgroup_barrier(mem_flags::mem_threadgroup);
                frag(buf ^ 1, 0, (kk + 1) & 1);
            }
        } else {
            frag(buf, kk + 1, (kk + 1) & 1);
        }
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[i][j] = fma(fa[kk & 1][i], fb[kk & 1][j], acc[i][j]);
    }
    buf ^= 1;
}

// Epilogue: C = alpha * acc (+ beta * C), rounded once into C's dtype.
const ACC al = ACC(alpha), be = ACC(beta);
for (int i = 0; i < 8; i++) {
    const long m = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
    if (m >= M) continue;
    for (int j = 0; j < 8; j++) {
        const long n = n0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
        if (n >= N) continue;
        ACC v = al * acc[i][j];
        if (beta != 0.0) v = fma(be, ACC(Cb[m * sc_m + n]), v);
        Cb[m * sc_m + n] = TOUT(v);
    }
}
