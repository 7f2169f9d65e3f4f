"""peer_cublas.py — cuBLAS SGEMM (true fp32, TF32 off) through PyTorch, the
peer of the example tiled GEMM. Prints `CUBLAS_MS <median ms>` for 4096^3."""
import torch

torch.backends.cuda.matmul.allow_tf32 = False
n = 4096
a = torch.rand(n, n, device="cuda", dtype=torch.float32)
b = torch.rand(n, n, device="cuda", dtype=torch.float32)
for _ in range(3):
    a @ b
torch.cuda.synchronize()
times = []
for _ in range(10):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    a @ b
    e.record()
    e.synchronize()
    times.append(s.elapsed_time(e))
times.sort()
ms = times[len(times) // 2]
print(f"cuBLAS SGEMM 4096^3 (torch {torch.__version__}): {ms:.3f} ms, {2 * n**3 / ms / 1e9:.2f} TFLOP/s")
print(f"CUBLAS_MS {ms:.6f}")
