#!/usr/bin/env python3
"""bench_python_overhead.py — host time of one Python call of a cached tiny
kernel through alloy's Python API (target: <= 10 us), and, on a CUDA machine
with CuPy, CuPy's RawKernel launch of the same one-thread kernel in the same
run, for comparison.

    python bench/bench_python_overhead.py            # every variant available here
    ALLOY_DEVICE=cpu python bench/bench_python_overhead.py --only cpu

Method: the kernel is compiled and cached first; then batches of calls are
timed with time.perf_counter and the median over batches of the per-call
mean is reported. On a GPU a batch is 200 launches, timed without
synchronising inside the batch (the driver queue holds them, so the host
never waits for the GPU), with a synchronisation between batches: the
figure is host time per call, the same method as bench/bench_cuda_runtime.c.
Lines starting with PY_OVERHEAD_US are for scripts: variant and median us.
"""
import argparse
import platform
import statistics
import sys
import time

import numpy as np

import alloy

TINY = "uint i = thread_position_in_grid.x;\nif (i < 1) out[i] = x[i] + 1.0f;\n"
CUPY_TINY = r'''
extern "C" __global__ void tiny(const float* x, float* out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < 1) out[i] = x[i] + 1.0f;
}
'''


def measure(fn, batch, batches, sync=None):
    for _ in range(max(1, batch // 4)):  # warm-up
        fn()
    if sync:
        sync()
    per_call = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        per_call.append((time.perf_counter() - t0) / batch * 1e6)
        if sync:
            sync()
    return statistics.median(per_call)


results = []


def report(variant, us, note=""):
    results.append((variant, us, note))
    print(f"PY_OVERHEAD_US {variant} {us:.2f}", flush=True)


def bench_cpu(args):
    k = alloy.metal_kernel(name="py_tiny", input_names=["x"], output_names=["out"], source=TINY)
    x = np.ones(1, np.float32)
    y = np.empty(1, np.float32)

    def alloc():
        return k(inputs=[x], output_shapes=[(1,)], output_dtypes=[np.float32], grid=(1, 1, 1),
                 threadgroup=(1, 1, 1), device="cpu")

    def into():
        return k(inputs=[x], outputs=[y], grid=(1, 1, 1), threadgroup=(1, 1, 1), device="cpu")

    alloc()
    into()
    assert float(y[0]) == 2.0
    report("cpu_numpy_alloc_output", measure(alloc, args.cpu_batch, args.batches),
           "NumPy input, output allocated (output_shapes)")
    report("cpu_numpy_into_output", measure(into, args.cpu_batch, args.batches),
           "NumPy input, caller-provided NumPy output (outputs=)")


def bench_cuda(args):
    try:
        alloy.Device("cuda")
    except alloy.Error as e:
        print(f"# CUDA: skipped ({e})")
        return
    k = alloy.metal_kernel(name="py_tiny", input_names=["x"], output_names=["out"], source=TINY)
    try:
        import torch
        have_torch = torch.cuda.is_available()
    except ImportError:
        have_torch = False
    if have_torch:
        x = torch.ones(1, device="cuda")
        y = torch.empty(1, device="cuda")
        s = torch.cuda.current_stream()

        def alloc():
            return k(inputs=[x], output_shapes=[(1,)], output_dtypes=[torch.float32], grid=(1, 1, 1),
                     threadgroup=(1, 1, 1), stream=s)

        def into():
            return k(inputs=[x], outputs=[y], grid=(1, 1, 1), threadgroup=(1, 1, 1), stream=s)

        into()
        torch.cuda.synchronize()
        assert float(y[0]) == 2.0
        report("cuda_torch_alloc_output", measure(alloc, args.gpu_batch, args.batches, torch.cuda.synchronize),
               "PyTorch input on its current stream, output allocated")
        report("cuda_torch_into_output", measure(into, args.gpu_batch, args.batches, torch.cuda.synchronize),
               "PyTorch input and caller-provided output on its current stream")
    else:
        print("# PyTorch with CUDA: not available, its variants skipped")
    try:
        import cupy as cp
    except ImportError:
        print("# CuPy: not installed, the RawKernel comparison skipped")
        return
    cx = cp.ones(1, dtype=cp.float32)
    cy = cp.empty(1, dtype=cp.float32)
    raw = cp.RawKernel(CUPY_TINY, "tiny")
    stream = cp.cuda.get_current_stream()

    def sync():
        stream.synchronize()

    def cupy_launch():
        raw((1,), (1,), (cx, cy))

    def alloy_cupy_into():
        return k(inputs=[cx], outputs=[cy], grid=(1, 1, 1), threadgroup=(1, 1, 1), stream=stream)

    def alloy_cupy_alloc():
        return k(inputs=[cx], output_shapes=[(1,)], output_dtypes=[cp.float32], grid=(1, 1, 1),
                 threadgroup=(1, 1, 1), stream=stream)

    cupy_launch()
    alloy_cupy_into()
    sync()
    assert float(cy[0]) == 2.0
    report("cuda_cupy_rawkernel", measure(cupy_launch, args.gpu_batch, args.batches, sync),
           "CuPy RawKernel launch, preallocated output (the peer)")
    report("cuda_cupy_into_output", measure(alloy_cupy_into, args.gpu_batch, args.batches, sync),
           "alloy with CuPy input and caller-provided output (same work as the peer)")
    report("cuda_cupy_alloc_output", measure(alloy_cupy_alloc, args.gpu_batch, args.batches, sync),
           "alloy with CuPy input, output allocated")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=["cpu", "cuda"], help="run one device's variants")
    ap.add_argument("--batches", type=int, default=15)
    ap.add_argument("--cpu-batch", type=int, default=5000)
    ap.add_argument("--gpu-batch", type=int, default=200)
    args = ap.parse_args()
    print(f"# alloy {alloy.__version__}, Python {platform.python_version()}, NumPy {np.__version__}, "
          f"{platform.machine()}, default device {alloy.default_device().description}")
    if args.only in (None, "cpu"):
        bench_cpu(args)
    if args.only in (None, "cuda"):
        bench_cuda(args)
    print()
    print("| variant | host time per call (median) | |")
    print("|---|---:|---|")
    for variant, us, note in results:
        print(f"| {variant} | {us:.2f} us | {note} |")
    peer = dict((v, us) for v, us, _ in results)
    if "cuda_cupy_rawkernel" in peer and "cuda_cupy_into_output" in peer:
        print(f"\nalloy / CuPy RawKernel (same work): "
              f"{peer['cuda_cupy_into_output'] / peer['cuda_cupy_rawkernel']:.2f}x")
    worst = max((us for _, us, _ in results), default=0.0)
    print(f"\ntarget <= 10 us per call: {'met' if worst <= 10 else 'NOT met'} (worst variant {worst:.2f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
