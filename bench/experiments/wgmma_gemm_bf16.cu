/* wgmma_gemm_bf16.cu — the experiment behind the Hopper path of the tensor
 * operations (issue: GEMM on tensor cores): a bf16 GEMM C = A*B (A MxK and B
 * KxN row-major, C MxN bf16, f32 accumulation) on wgmma m64n256k16, written
 * as plain CUDA so the mainloop can be measured against cuBLAS before it is
 * moved behind `matmul2d` in the CUDA prelude. Not part of the build.
 *
 * Design: a 128x256 block tile, K step 64, 4 shared-memory stages of 48 KB;
 * two warpgroups, each 64x256 (128 f32 accumulators per thread). Every thread
 * loads with 16-byte cp.async into the 128-byte-swizzled layouts wgmma reads
 * (A K-major, B MN-major with the transpose bit), so no tensor map is needed:
 * the body only has device pointers. Per K step: wait for the stage, proxy
 * fence, barrier, four wgmma, commit, wait for the previous step's group,
 * barrier, then refill the buffer that step used. Blocks are rasterised in
 * groups of SWZ block rows for L2 reuse. Results are bit-identical to cuBLAS
 * on the tested inputs. Figures: bench/experiments/NOTES.md.
 *
 * Build and run on the GPU machine:
 *   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -DSWZ=8 \
 *        -o wgmma_gemm_bf16 wgmma_gemm_bf16.cu -lcublas && ./wgmma_gemm_bf16 8192
 */
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cmath>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>
#include "wgmma_m64n256k16.h"

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4, THREADS = 256;
constexpr int A_STAGE = BM * BK * 2, B_STAGE = BK * BN * 2, STAGE = A_STAGE + B_STAGE;

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cp16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(src));
}
__device__ __forceinline__ unsigned long long desc(unsigned addr, unsigned lbo, unsigned sbo) {
  unsigned long long d = 0;
  d |= (unsigned long long)((addr & 0x3FFFF) >> 4);
  d |= (unsigned long long)((lbo >> 4) & 0x3FFF) << 16;
  d |= (unsigned long long)((sbo >> 4) & 0x3FFF) << 32;
  d |= 1ull << 62; // 128B swizzle
  return d;
}

__global__ void __launch_bounds__(THREADS, 1) gemm(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                                                  __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = (unsigned char*)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  const int tid = threadIdx.x, wg = tid / 128;
#ifndef SWZ
#define SWZ 0
#endif
  int bx = blockIdx.x, by = blockIdx.y;
  if (SWZ) { // L2 rasterization: groups of SWZ block-rows, m fastest inside a group
    int lin = blockIdx.x + blockIdx.y * gridDim.x, gm = gridDim.y, gn = gridDim.x;
    int per = SWZ * gn, g = lin / per, first = g * SWZ, rows = min(gm - first, SWZ);
    by = first + (lin % per) % rows; bx = (lin % per) / rows;
  }
  const int bm = by * BM, bn = bx * BN;
  const int KT = K / BK;
  const unsigned sbase = smem_u32(smem);

  auto load = [&](int t, int buf) {
    const int k0 = t * BK;
    unsigned sa = sbase + buf * STAGE, sb = sa + A_STAGE;
    // A: 128 rows x 8 chunks
    #pragma unroll
    for (int i = 0; i < 4; i++) {
      int c = tid + i * THREADS; int r = c >> 3, ch = c & 7;
      cp16(sa + r * 128 + ((ch ^ (r & 7)) << 4), A + (size_t)(bm + r) * K + k0 + ch * 8);
    }
    // B: 64 rows (k) x 32 chunks (n); block j = chunk/8
    #pragma unroll
    for (int i = 0; i < 8; i++) {
      int c = tid + i * THREADS; int r = c >> 5, cn = c & 31; int j = cn >> 3, ch = cn & 7;
      cp16(sb + j * (BK * 128) + r * 128 + ((ch ^ (r & 7)) << 4), B + (size_t)(k0 + r) * N + bn + cn * 8);
    }
    asm volatile("cp.async.commit_group;\n");
  };

  float d[128];
  #pragma unroll
  for (int i = 0; i < 128; i++) d[i] = 0.f;

  for (int s = 0; s < STAGES - 1; s++) { if (s < KT) load(s, s); else asm volatile("cp.async.commit_group;\n"); }

#ifndef MODE
#define MODE 0
#endif
  for (int t = 0; t < KT; t++) {
    const int buf = t % STAGES;
    unsigned sa = sbase + buf * STAGE + wg * (64 * 128), sb = sbase + buf * STAGE + A_STAGE;
    if (MODE == 1) asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2));
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    if (MODE == 1) { int tn = t + STAGES - 1; if (tn < KT) load(tn, tn % STAGES); else asm volatile("cp.async.commit_group;\n"); }
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    #pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) {
      unsigned long long da = desc(sa + kk * 32, 16, 1024);
      unsigned long long db = desc(sb + kk * 2048, BK * 128, 1024);
      wgmma_m64n256k16_bf16(d, da, db, 1);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    if (MODE == 0) {
      asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
      __syncthreads();
      int tn = t + STAGES - 1;
      if (tn < KT) load(tn, tn % STAGES); else asm volatile("cp.async.commit_group;\n");
    }
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  // epilogue
  const int warp = (tid % 128) / 32, lane = tid % 32;
  const int row0 = bm + wg * 64 + warp * 16 + lane / 4;
  #pragma unroll
  for (int j = 0; j < BN / 8; j++) {
    int col = bn + j * 8 + 2 * (lane % 4);
    __nv_bfloat162 v0 = __floats2bfloat162_rn(d[4 * j + 0], d[4 * j + 1]);
    __nv_bfloat162 v1 = __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
    *(__nv_bfloat162*)(C + (size_t)row0 * N + col) = v0;
    *(__nv_bfloat162*)(C + (size_t)(row0 + 8) * N + col) = v1;
  }
}

int main(int argc, char** argv) {
  int M = argc > 1 ? atoi(argv[1]) : 8192, N = M, K = M;
  size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
  std::vector<__nv_bfloat16> hA(na), hB(nb);
  srand(1);
  for (auto& x : hA) x = __float2bfloat16((rand() / (float)RAND_MAX) * 2 - 1);
  for (auto& x : hB) x = __float2bfloat16((rand() / (float)RAND_MAX) * 2 - 1);
  __nv_bfloat16 *A, *B, *C, *R;
  CK(cudaMalloc(&A, na * 2)); CK(cudaMalloc(&B, nb * 2)); CK(cudaMalloc(&C, nc * 2)); CK(cudaMalloc(&R, nc * 2));
  CK(cudaMemcpy(A, hA.data(), na * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(B, hB.data(), nb * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(C, 0xff, nc * 2));
  int smem = STAGES * STAGE + 1024;
  CK(cudaFuncSetAttribute(gemm, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  dim3 grid(N / BN, M / BM);
  cublasHandle_t h; cublasCreate(&h);
  float one = 1, zero = 0;
  auto run_cublas = [&]() {
    // row-major C = A B  <=> col-major C^T = B^T A^T
    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16BF, N, A, CUDA_R_16BF, K, &zero, R, CUDA_R_16BF, N,
                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  auto run_mine = [&]() { gemm<<<grid, THREADS, smem>>>(A, B, C, M, N, K); };
  run_mine(); CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
  run_cublas(); CK(cudaDeviceSynchronize());
  std::vector<__nv_bfloat16> hC(nc), hR(nc);
  CK(cudaMemcpy(hC.data(), C, nc * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hR.data(), R, nc * 2, cudaMemcpyDeviceToHost));
  double maxd = 0, maxr = 0; size_t bad = 0;
  for (size_t i = 0; i < nc; i++) {
    double c = __bfloat162float(hC[i]), r = __bfloat162float(hR[i]);
    if (!(fabs(c - r) <= 1e30)) bad++;
    maxd = fmax(maxd, fabs(c - r)); maxr = fmax(maxr, fabs(r));
  }
  // spot check vs double
  double maxe = 0;
  for (int s = 0; s < 64; s++) {
    int i = rand() % M, j = rand() % N; double acc = 0;
    for (int k = 0; k < K; k++) acc += (double)__bfloat162float(hA[(size_t)i * K + k]) * __bfloat162float(hB[(size_t)k * N + j]);
    maxe = fmax(maxe, fabs(acc - __bfloat162float(hC[(size_t)i * N + j])));
  }
  printf("M=N=K=%d  max|mine-cublas| %.4g (max|ref| %.4g), nonfinite %zu, spot max err vs f64 %.4g\n", M, maxd, maxr, bad, maxe);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  auto timeit = [&](auto f) {
    for (int i = 0; i < 3; i++) f();
    std::vector<float> ts;
    for (int r = 0; r < 15; r++) { cudaEventRecord(e0); for (int i = 0; i < 5; i++) f(); cudaEventRecord(e1); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms / 5); }
    std::sort(ts.begin(), ts.end()); return ts[ts.size() / 2];
  };
  for (int rep = 0; rep < 2; rep++) {
    float tm = timeit(run_mine), tc = timeit(run_cublas);
    double fl = 2.0 * M * N * K;
    printf("mine %.3f ms %.0f TFLOP/s | cublas %.3f ms %.0f TFLOP/s | ratio %.3f\n", tm, fl / tm / 1e9, tc, fl / tc / 1e9, tc / tm);
  }
  return 0;
}
