"""bench_mlstm_tfla.py — the peer of `alloy bench mlstm` on CUDA: NX-AI's
mlstm_kernels (TFLA's Triton kernels) on the same shapes, timed the same way
(CUDA events around one call after warm-up, median of the reps), and, with
--alloy FILE (the output of `alloy bench mlstm --device cuda`), the ratio of
each row's TFLA time to alloy's (above 1: alloy is faster).

  python bench/bench_mlstm_tfla.py [--alloy FILE] [--quick] [--device cpu]

Rows: chunkwise `chunkwise--triton_xl_chunk` (chunk 128, TFLA's default) at
the 7B shape (B 8, NH 8, S 8192, DHQK 256, DHHV 512) in float32 and bfloat16
inputs — the forward ("chunkwise ..."), the backward alone ("bwd ...":
torch.autograd.grad of h with a random dh, the graph kept between calls) and
forward+backward ("fwd+bwd ...": the forward and autograd.grad per call);
the same three at B 1, S 65536 in bfloat16 ("... 7B B=1"); and the recurrent
step `mlstm_recurrent_step__triton` (bf16 inputs, float32 state) at B = 1,
16 and 1024. The TFLOP/s column uses alloy's counts (docs/cli.md: per token
and head 4 DHQK DHHV + L (DHQK + DHHV) with TFLA's L = 128 for the forward,
twice that for the backward, three times for fwd+bwd). A row the peer cannot
run (an error from its compiler, an unsupported shape, a process that aborts)
says why and the script goes on: each group of rows (f32, bf16, b1, step)
runs in its own process. The row names are alloy's, so the ratio column pairs
them (the rows of the same name and the same first word of the size).
mlstm_kernels' fp32 path runs its products in TF32 (Triton's default);
alloy's fp32 rows run three TF32 products each (float32 accuracy), and its
"... tf32" rows one (ALLOY_PRECISION_DEFAULT, TFLA's own precision): each is
paired with the same TFLA row.

--device cpu checks the script without a GPU: mlstm_kernels' PyTorch
chunkwise kernel (`chunkwise--native_autograd`, chunk 64) at the shapes of
`alloy bench mlstm --quick` (B 1, NH 2, S 512, 64/64), wall clock."""
import argparse
import re
import sys
import time

GROUPS = ("f32", "step", "bf16", "b1")
ROW_PREFIXES = ("chunkwise", "bwd", "fwd+bwd", "step")


def median_ms(fn, cuda, warmup=3, reps=10):
    import torch

    for _ in range(warmup):
        fn()
    if cuda:
        torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        if cuda:
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2]


def alloy_times(path):
    """{(row name, first word of the size): ms} from `alloy bench mlstm`'s
    table (columns separated by two or more spaces)."""
    out = {}
    if not path:
        return out
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        print(f"no alloy rows ({e}); the peer alone", file=sys.stderr)
        return out
    for line in lines:
        cols = re.split(r"\s{2,}", line.strip())
        if len(cols) < 3:
            continue
        m = re.match(r"([0-9.]+) ms", cols[2])
        if m:
            out[(cols[0], cols[1].split()[0])] = float(m.group(1))
    return out


def run_isolated(argv):
    """Runs this script on one group of rows in a child process: a peer
    compiler that aborts the process (Triton's LLVM on some bf16 kernels)
    costs that group only."""
    import subprocess

    r = subprocess.run([sys.executable, __file__] + argv, capture_output=True, text=True)
    lines = [x for x in r.stdout.splitlines() if x.startswith(ROW_PREFIXES)]
    if lines:
        print("\n".join(lines))
    if r.returncode != 0 or not lines:
        err = (r.stderr.strip().splitlines() or r.stdout.strip().splitlines() or ["(no output)"])[-1]
        print(f"{' '.join(argv)}: the peer's process ended with status {r.returncode}: {err}"[:240])
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--alloy", help="alloy bench mlstm's output, for the ratio column")
    ap.add_argument("--quick", action="store_true", help="B 1 instead of 8 for the 7B rows")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                    help="cpu: the PyTorch kernel at alloy's --quick shapes (a check of the script)")
    ap.add_argument("--row", help="one group only: " + ", ".join(GROUPS) + " (each runs in its own process)")
    args = ap.parse_args()
    if args.row is None:
        try:
            import torch
        except Exception as e:  # noqa: BLE001
            print(f"peer unavailable: {e}")
            return 0
        if args.device == "cuda":
            if not torch.cuda.is_available():
                print("peer unavailable: no CUDA device for PyTorch (--device cpu checks the script)")
                return 0
            print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
        else:
            print(f"device: cpu, torch {torch.__version__}")
        print(f"{'TFLA (mlstm_kernels)':26} {'size':30} {'time':>12} {'rate':>10} | {'alloy':>10} {'ratio':>7}")
        extra = (["--alloy", args.alloy] if args.alloy else []) + (["--quick"] if args.quick else [])
        extra += ["--device", args.device]
        for g in GROUPS if args.device == "cuda" else ("f32", "bf16"):
            run_isolated(["--row", g] + extra)
        return 0
    try:
        import torch
        from mlstm_kernels.torch import get_mlstm_kernel
    except Exception as e:  # noqa: BLE001 - say why the peer is missing and stop
        print(f"peer unavailable: {e}")
        return 0
    ours = alloy_times(args.alloy)
    cuda = args.device == "cuda"
    dev = torch.device(args.device)

    def row(name, size, fn, flops):
        try:
            ms = median_ms(fn, cuda)
        except Exception as e:  # noqa: BLE001 - a peer failure is a row, not the end
            msg = str(e).strip().splitlines()
            print(f"{name:26} {size:30} unavailable: {type(e).__name__}: {msg[-1] if msg else ''}"[:200])
            if cuda:
                torch.cuda.empty_cache()
            return
        r = flops / ms * 1e3  # FLOP/s
        rate = (f"{r / 1e12:6.1f} TF/s" if r >= 1e12 else f"{r / 1e9:6.1f} GF/s") if flops else ""
        # alloy's float32 rows also run at TFLA's own precision (one TF32 pass: "<row> tf32")
        for label in (name, name + " tf32"):
            a = ours.get((label, size.split()[0]))
            if label == name or a:
                tail = f"{a:7.3f} ms {ms / a:7.3f}" if a else ""
                print(f"{label:26} {size:30} {ms:9.3f} ms {rate:>10} | {tail}")
        sys.stdout.flush()

    torch.manual_seed(0)
    if cuda:
        kernel, chunk_size = "chunkwise--triton_xl_chunk", 128
        shapes = {"f32": (torch.float32, "7B", 1 if args.quick else 8, 8, 8192, 256, 512),
                  "bf16": (torch.bfloat16, "7B", 1 if args.quick else 8, 8, 8192, 256, 512),
                  "b1": (torch.bfloat16, "7B B=1", 1, 8, 65536, 256, 512)}
    else:
        kernel, chunk_size = "chunkwise--native_autograd", 64
        shapes = {"f32": (torch.float32, "small", 1, 2, 512, 64, 64),
                  "bf16": (torch.bfloat16, "small", 1, 2, 512, 64, 64)}
    if args.row in shapes:
        chunk = get_mlstm_kernel(kernel)
        dt, tag, B, NH, S, DQ, DV = shapes[args.row]
        tag = f"{'f32' if dt == torch.float32 else 'bf16'} {tag}"
        size = f"{B}x{NH}x{S} {DQ}/{DV} c{chunk_size}"
        fwd_flops = B * S * NH * (4.0 * DQ * DV + chunk_size * (DQ + DV))

        def rand(*shape, shift=0.0):
            return (shift + torch.randn(*shape, device=dev, dtype=dt)).requires_grad_()

        q, k = rand(B, NH, S, DQ), rand(B, NH, S, DQ)
        v = rand(B, NH, S, DV)
        i, f = rand(B, NH, S), rand(B, NH, S, shift=3.0)
        ins = (q, k, v, i, f)
        with torch.no_grad():
            row(f"chunkwise {tag}", size, lambda: chunk(*ins, chunk_size=chunk_size), fwd_flops)
        dh = torch.randn(B, NH, S, DV, device=dev, dtype=dt)
        try:
            h = chunk(*ins, chunk_size=chunk_size)
        except Exception as e:  # noqa: BLE001
            h = None
            print(f"bwd {tag:22} {size:30} unavailable: the forward failed: {type(e).__name__}: {e}"[:200])
        if h is not None:
            row(f"bwd {tag}", size, lambda: torch.autograd.grad(h, ins, dh, retain_graph=True), 2 * fwd_flops)
            del h
        row(f"fwd+bwd {tag}", size, lambda: torch.autograd.grad(chunk(*ins, chunk_size=chunk_size), ins, dh),
            3 * fwd_flops)
        return 0

    if args.row == "step" and cuda:
        from mlstm_kernels.torch.recurrent import registry_step

        step = registry_step.get("triton")
        NH, DQ, DV = 8, 256, 512
        for b in (1, 16, 1024):
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
                lambda: step(q, k, v, i, f, c, n, m, dtype_state=torch.float32), 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
