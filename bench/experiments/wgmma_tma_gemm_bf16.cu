/* wgmma_tma_gemm_bf16.cu — the second experiment behind the Hopper path of
 * the tensor operations: the bf16 GEMM of wgmma_gemm_bf16.cu with its loads
 * moved to the copy engine. Tensor maps (cuTensorMapEncodeTiled, 128-byte
 * swizzle, boxes of 64 x 128 for A and 64 x 64 for B) made on the host and
 * passed as __grid_constant__ parameters; one producer thread issues
 * cp.async.bulk.tensor for each stage and arms the stage's mbarrier with the
 * byte count; two consumer warpgroups (64 x 256 each, registers raised with
 * setmaxnreg) wait on it, run four wgmma per stage and release the stage
 * through a second mbarrier once the next stage's wgmma are issued.
 * Figures: bench/experiments/NOTES.md. Not part of the build.
 *
 *   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -DSWZ=8 \
 *        -o wgmma_tma_gemm_bf16 wgmma_tma_gemm_bf16.cu -lcublas -lcuda && ./wgmma_tma_gemm_bf16 8192
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
#include <cuda.h>
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

#ifndef SWZ
#define SWZ 8
#endif
constexpr int WS_THREADS = 384;
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) { asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" :: "r"(bar), "r"(count)); }
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  asm volatile("{\n.reg .pred P1;\nLAB_WAIT:\n"
               "mbarrier.try_wait.parity.shared.b64 P1, [%0], %1;\n"
               "@P1 bra DONE;\nbra LAB_WAIT;\nDONE:\n}\n" :: "r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) { asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared.b64 st, [%0];\n}\n" :: "r"(bar) : "memory"); }
__device__ __forceinline__ void cp_arrive(unsigned bar) { asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" :: "r"(bar) : "memory"); }

__device__ __forceinline__ void mbar_expect(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void tma2d(unsigned dst, const CUtensorMap* map, int x, int y, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
               :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar) : "memory");
}

__global__ void __launch_bounds__(WS_THREADS, 1) gemm(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                                                  __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = (unsigned char*)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
  const int tid = threadIdx.x, wg = tid / 128, ltid = tid % 128;
  int bx = blockIdx.x, by = blockIdx.y;
  if (SWZ) {
    int lin = blockIdx.x + blockIdx.y * gridDim.x, gm = gridDim.y, gn = gridDim.x;
    int per = SWZ * gn, g = lin / per, first = g * SWZ, rows = min(gm - first, SWZ);
    by = first + (lin % per) % rows; bx = (lin % per) / rows;
  }
  const int bm = by * BM, bn = bx * BN;
  const int KT = K / BK;
  const unsigned sbase = smem_u32(smem);
  if (tid == 0) {
    for (int s = 0; s < STAGES; s++) { mbar_init(smem_u32(&full[s]), 1); mbar_init(smem_u32(&empty[s]), 2); }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (ltid == 0) {
      for (int t = 0; t < KT; t++) {
        int s = t % STAGES, round = t / STAGES;
        if (t >= STAGES) mbar_wait(smem_u32(&empty[s]), (round - 1) & 1);
        unsigned sa = sbase + s * STAGE, sb = sa + A_STAGE, fb = smem_u32(&full[s]);
        mbar_expect(fb, STAGE);
        tma2d(sa, &tmA, t * BK, bm, fb);
        for (int j = 0; j < BN / 64; j++) tma2d(sb + j * (BK * 128), &tmB, bn + j * 64, t * BK, fb);
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int cw = wg - 1;
    float d[128];
    #pragma unroll
    for (int i = 0; i < 128; i++) d[i] = 0.f;
    for (int t = 0; t < KT; t++) {
      int s = t % STAGES, round = t / STAGES;
      mbar_wait(smem_u32(&full[s]), round & 1);
      unsigned sa = sbase + s * STAGE + cw * (64 * 128), sb = sbase + s * STAGE + A_STAGE;
      asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
      #pragma unroll
      for (int kk = 0; kk < BK / 16; kk++) {
        unsigned long long da = desc(sa + kk * 32, 16, 1024);
        unsigned long long db = desc(sb + kk * 2048, BK * 128, 1024);
        wgmma_m64n256k16_bf16(d, da, db, 1);
      }
      asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
      if (t > 0 && ltid == 0) mbar_arrive(smem_u32(&empty[(t - 1) % STAGES]));
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    const int warp = ltid / 32, lane = ltid % 32;
    const int row0 = bm + cw * 64 + warp * 16 + lane / 4;
    #pragma unroll
    for (int j = 0; j < BN / 8; j++) {
      int col = bn + j * 8 + 2 * (lane % 4);
      __nv_bfloat162 v0 = __floats2bfloat162_rn(d[4 * j + 0], d[4 * j + 1]);
      __nv_bfloat162 v1 = __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
      *(__nv_bfloat162*)(C + (size_t)row0 * N + col) = v0;
      *(__nv_bfloat162*)(C + (size_t)(row0 + 8) * N + col) = v1;
    }
  }
}

static CUtensorMap make_map(const void* base, uint64_t inner, uint64_t outer, uint32_t box_inner, uint32_t box_outer) {
  CUtensorMap m;
  cuuint64_t dims[2] = {inner, outer};
  cuuint64_t strides[1] = {inner * 2};
  cuuint32_t box[2] = {box_inner, box_outer};
  cuuint32_t estr[2] = {1, 1};
  CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void*)base, dims, strides, box, estr,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r) { printf("cuTensorMapEncodeTiled failed %d\n", (int)r); exit(1); }
  return m;
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
  CUtensorMap tmA = make_map(A, K, M, 64, 128), tmB = make_map(B, N, K, 64, 64);
  auto run_mine = [&]() { gemm<<<grid, WS_THREADS, smem>>>(tmA, tmB, C, M, N, K); };
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
