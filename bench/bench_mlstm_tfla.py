"""bench_mlstm_tfla.py — the peer of `alloy bench mlstm` on CUDA: NX-AI's
mlstm_kernels (TFLA's Triton kernels) on the same shapes, timed the same way
(CUDA events around one call after warm-up, median of the reps), and, with
--alloy FILE (the output of `alloy bench mlstm --device cuda`), the ratio of
each row's TFLA time to alloy's.

  python bench/bench_mlstm_tfla.py [--alloy FILE] [--quick]

Rows: chunkwise `chunkwise--triton_xl_chunk` (chunk 128, TFLA's default) at
the 7B shape (B 8, NH 8, S 8192, DHQK 256, DHHV 512) in float32 and bfloat16
inputs, and the recurrent step `mlstm_recurrent_step__triton` (bf16 inputs,
float32 state) at B = 1, 16 and 1024. A row the peer cannot run (an error
from its compiler, an unsupported shape) says why and goes on. The row names
are alloy's, so the ratio column pairs them. mlstm_kernels' fp32 path runs its
products in TF32 (Triton's default); alloy's fp32 path is exact fp32."""
import argparse
import re
import sys


def median_ms(fn, warmup=3, reps=10):
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def alloy_times(path):
    """{(row name, first word of the size): ms} from `alloy bench mlstm`'s
    table (columns separated by two or more spaces)."""
    out = {}
    if not path:
        return out
    for line in open(path):
        cols = re.split(r"\s{2,}", line.strip())
        if len(cols) < 3:
            continue
        m = re.match(r"([0-9.]+) ms", cols[2])
        if m:
            out[(cols[0], cols[1].split()[0])] = float(m.group(1))
    return out


def run_isolated(argv):
    """Runs this script on one row in a child process: a peer compiler that
    aborts the process (Triton's LLVM on some bf16 kernels) costs that row
    only."""
    import subprocess

    r = subprocess.run([sys.executable, __file__] + argv, capture_output=True, text=True)
    lines = [x for x in r.stdout.splitlines() if x.startswith(("chunkwise", "step"))]
    if lines:
        print("\n".join(lines))
    else:
        err = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"{' '.join(argv)}: the peer's process ended with status {r.returncode}: {err}"[:240])
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--alloy", help="alloy bench mlstm's output, for the ratio column")
    ap.add_argument("--quick", action="store_true", help="B 1 instead of 8 for the chunkwise rows")
    ap.add_argument("--row", help="one row only: f32, bf16 or step (each row runs in its own process)")
    args = ap.parse_args()
    if args.row is None:
        try:
            import torch
        except Exception as e:  # noqa: BLE001
            print(f"peer unavailable: {e}")
            return 0
        print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
        print(f"{'TFLA (mlstm_kernels)':26} {'size':36} {'time':>12} | {'alloy':>10} {'ratio':>7}")
        extra = (["--alloy", args.alloy] if args.alloy else []) + (["--quick"] if args.quick else [])
        for r in ("f32", "step", "bf16"):
            run_isolated(["--row", r] + extra)
        return 0
    try:
        import torch
        from mlstm_kernels.torch import get_mlstm_kernel
        from mlstm_kernels.torch.recurrent import registry_step
    except Exception as e:  # noqa: BLE001 - say why the peer is missing and stop
        print(f"peer unavailable: {e}")
        return 0
    ours = alloy_times(args.alloy)
    dev = torch.device("cuda")

    def row(name, size, fn):
        try:
            ms = median_ms(fn)
        except Exception as e:  # noqa: BLE001 - a peer failure is a row, not the end
            msg = str(e).strip().splitlines()
            print(f"{name:26} {size:36} unavailable: {type(e).__name__}: {msg[-1] if msg else ''}"[:200])
            torch.cuda.empty_cache()
            return
        a = ours.get((name, size.split()[0]))
        tail = f"{a:8.3f} ms {ms / a:7.3f}" if a else ""
        print(f"{name:26} {size:36} {ms:9.3f} ms | {tail}")
        sys.stdout.flush()

    torch.manual_seed(0)
    chunk = get_mlstm_kernel("chunkwise--triton_xl_chunk")
    B, NH, S, DQ, DV = (1 if args.quick else 8), 8, 8192, 256, 512
    for dt, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        if args.row != tag:
            continue
        q = torch.randn(B, NH, S, DQ, device=dev, dtype=dt)
        k = torch.randn(B, NH, S, DQ, device=dev, dtype=dt)
        v = torch.randn(B, NH, S, DV, device=dev, dtype=dt)
        i = torch.randn(B, NH, S, device=dev, dtype=dt)
        f = 3.0 + torch.randn(B, NH, S, device=dev, dtype=dt)
        row(f"chunkwise {tag} 7B", f"{B}x{NH}x{S} {DQ}/{DV} c128",
            lambda: chunk(q, k, v, i, f, chunk_size=128))
        del q, k, v, i, f
        torch.cuda.empty_cache()

    step = registry_step.get("triton")
    for b in (1, 16, 1024) if args.row == "step" else ():
        q = torch.randn(b, NH, DQ, device=dev, dtype=torch.bfloat16)
        k = torch.randn(b, NH, DQ, device=dev, dtype=torch.bfloat16)
        v = torch.randn(b, NH, DV, device=dev, dtype=torch.bfloat16)
        i = torch.randn(b, NH, 1, device=dev, dtype=torch.bfloat16)
        f = torch.randn(b, NH, 1, device=dev, dtype=torch.bfloat16)
        c = torch.zeros(b, NH, DQ, DV, device=dev, dtype=torch.float32)
        n = torch.zeros(b, NH, DQ, device=dev, dtype=torch.float32)
        m = torch.zeros(b, NH, 1, device=dev, dtype=torch.float32)
        if step is None:
            print(f"step bf16 7B B={b}: unavailable (no Triton step kernel)")
            continue
        row("step bf16 7B", f"B={b} {NH}x{DQ}/{DV}",
            lambda: step(q, k, v, i, f, c, n, m, dtype_state=torch.float32))
    return 0


if __name__ == "__main__":
    sys.exit(main())
