"""bench_matmul_torch.py — torch.bmm, the peer the GEMM issue names for batched
products, on the batched rows of `alloy bench matmul`: 10 000 x 32 x 32 x 32
float32 (TF32 off: true float32, as alloy's `highest`) and 100 x 1024^3
bfloat16 (float32 accumulation, bfloat16 out). Timed as `alloy bench` times:
wall clock around back-to-back calls (outputs given) and one
torch.cuda.synchronize(), the median of 9 batches after a warm-up.

    python bench/bench_matmul_torch.py [--alloy FILE]

--alloy FILE reads `alloy bench matmul --device cuda --only batched [--json]`
output and adds alloy's time and the ratio torch time / alloy time (above 1:
alloy is faster). The --json form carries the times unrounded; the table's
are rounded to a microsecond.
"""
import argparse
import re

import torch

import peer_util

ROWS = [("f32 batched", torch.float32, 10000, 32), ("bf16 batched", torch.bfloat16, 100, 1024)]


def timed(fn, per, reps=9):
    fn()
    torch.cuda.synchronize()
    return peer_util.median_per_call(fn, torch.cuda.synchronize, per, reps)


def read_alloy(path):
    """{(label, batch, n): seconds} from `alloy bench matmul` output."""
    times = {}
    row = re.compile(r"^(f32 batched|bf16 batched)\s+(\d+)x (\d+)x\d+x\d+\s+([0-9.]+) ms")
    for r, line in peer_util.lines(path):
        if r is not None:
            m = re.match(r"(\d+)x (\d+)x", r.get("size", ""))
            if r.get("op") == "matmul" and m:
                times[(r["case"], int(m.group(1)), int(m.group(2)))] = r["time_s"]
            continue
        m = row.match(line)
        if m:
            times.setdefault((m.group(1), int(m.group(2)), int(m.group(3))), float(m.group(4)) * 1e-3)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alloy", default=None, help="alloy bench matmul's output, for the ratio")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    alloy = read_alloy(args.alloy) if args.alloy else {}
    print(f"device: {torch.cuda.get_device_name()} (torch {torch.__version__})")
    print(f"{'row':<14} {'size':<20} {'torch.bmm':>12} {'alloy':>12} {'ratio':>7}")
    for label, dt, batch, n in ROWS:
        g = torch.Generator(device="cuda").manual_seed(1)
        a = (torch.rand(batch, n, n, device="cuda", generator=g) * 2 - 1).to(dt)
        b = (torch.rand(batch, n, n, device="cuda", generator=g) * 2 - 1).to(dt)
        c = torch.empty(batch, n, n, device="cuda", dtype=dt)
        flops = 2.0 * batch * n ** 3
        per = max(1, min(200, int(0.05 / (flops / 5e13))))
        t = timed(lambda: torch.bmm(a, b, out=c), per)
        at = alloy.get((label, batch, n))
        size = f"{batch}x {n}x{n}x{n}"
        tail = f"{at * 1e3:9.4f} ms {t / at:7.3f}" if at else f"{'-':>12} {'-':>7}"
        print(f"{label:<14} {size:<20} {t * 1e3:9.4f} ms {tail}")


if __name__ == "__main__":
    main()
