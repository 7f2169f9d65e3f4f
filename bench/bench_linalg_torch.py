"""bench_linalg_torch.py — the CUDA peer of `alloy bench linalg`: torch.linalg
on the same rows (cholesky, lu_factor, solve with one right-hand side, inv,
det, qr in its reduced mode, eigh, svd with full_matrices=False; 10 000 x n x n for
n = 8 ... 128 and 1 000 x 256 x 256; float32 and float64), inputs drawn the same way,
timed the same way (wall clock around back-to-back calls and one
torch.cuda.synchronize(), outputs given, the median of 9 batches after a
warm-up, of 3 when one call takes over half a second), with the same error
measures on 8 sample matrices in float64 on the host.

eigh and svd run on the first SLOW_BATCH[n] matrices for n >= 64 (as `alloy
bench linalg` does on CUDA; the size column says how many): torch loops over
the batch there, about a millisecond per 64 x 64 matrix, so 10 000 would take
seconds per call.

    python bench/bench_linalg_torch.py [--quick] [--only TEXT] [--json] [--alloy FILE]

--alloy FILE reads the output of `alloy bench linalg` (its table or --json
lines) and adds alloy's time and the ratio torch time / alloy time (above 1:
alloy is faster) to each row. scripts/gpu-check.sh runs both.
"""
import argparse
import json
import re
import sys
import time

import numpy as np
import torch

import peer_util

OPS = ["cholesky", "lu_factor", "solve", "inv", "det", "qr", "eigh", "svd"]
SIZES = [(8, 10000, True), (16, 10000, False), (32, 10000, True), (64, 10000, False), (128, 10000, False),
         (256, 1000, False)]
DTYPES = [("f32", torch.float32), ("f64", torch.float64)]
SAMPLES = 8
# eigh and svd: how many matrices for the large n (cmd_bench_linalg.c's slow_batch on CUDA)
SLOW_OPS = ("eigh", "svd")
SLOW_BATCH = {64: 1000, 128: 200, 256: 100}


def timed(fn, target=0.05, reps=9):
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    t1 = time.perf_counter() - t0
    per = max(1, min(200, int(target / max(t1, 1e-6))))
    if t1 > 0.5:
        reps = 3
    return peer_util.median_per_call(fn, torch.cuda.synchronize, per, reps)


def det_longdouble(a):
    m = np.array(a, dtype=np.longdouble)
    n = m.shape[0]
    det = np.longdouble(1)
    for k in range(n):
        p = k + int(np.argmax(np.abs(m[k:, k])))
        if p != k:
            m[[k, p]] = m[[p, k]]
            det = -det
        det *= m[k, k]
        if m[k, k] == 0:
            break
        m[k + 1:, k + 1:] -= np.outer(m[k + 1:, k] / m[k, k], m[k, k + 1:])
    return det


def sample_error(op, a, out):
    """The worst error over the sample (float64/long double on the host)."""
    worst = 0.0
    for a, o in zip(a, out):
        if op == "cholesky":
            e = np.linalg.norm(a - o @ o.T) / np.linalg.norm(a)
        elif op == "lu_factor":
            lu, piv = o
            pa = a.copy()
            for k, p in enumerate(piv):
                pa[[k, p - 1]] = pa[[p - 1, k]]
            e = np.linalg.norm(pa - (np.tril(lu, -1) + np.eye(len(a))) @ np.triu(lu)) / np.linalg.norm(a)
        elif op == "solve":
            x, b = o
            e = np.max(np.abs(b - a @ x)) / (np.max(np.sum(np.abs(a), 1)) * np.max(np.abs(x)) + np.max(np.abs(b)))
        elif op == "qr":
            q, r = o
            e = max(np.linalg.norm(a - q @ r) / np.linalg.norm(a), np.linalg.norm(q.T @ q - np.eye(len(a))))
        elif op == "eigh":  # a: the symmetric matrix of the lower triangle
            w, v = o
            e = max(np.linalg.norm(a @ v - v * w) / np.linalg.norm(a), np.linalg.norm(v.T @ v - np.eye(len(a))))
        elif op == "svd":
            u, s, vh = o
            eye = np.eye(len(a))
            e = max(np.linalg.norm(a - (u * s) @ vh) / np.linalg.norm(a), np.linalg.norm(u.T @ u - eye),
                    np.linalg.norm(vh @ vh.T - eye))
        elif op == "inv":
            e = np.max(np.sum(np.abs(np.eye(len(a)) - a @ o), 0)) / (
                np.max(np.sum(np.abs(a), 0)) * np.max(np.sum(np.abs(o), 0)))
        else:
            ref = det_longdouble(a)
            e = float(abs((np.longdouble(o) - ref) / ref)) if ref != 0 else (0.0 if o == 0 else np.inf)
        worst = e if not (e <= worst) else worst
    return float(worst)


def read_alloy(path):
    """{(op, dtype, batch, n): seconds} from `alloy bench linalg` output."""
    times = {}
    row = re.compile(r"^(\w+) (f32|f64)\s+(\d+)x (\d+)x\d+\s+([0-9.]+) ms")
    for r, line in peer_util.lines(path):
        if r is not None:
            if r.get("op") in OPS and "batch" in r:
                times[(r["op"], r["case"], r["batch"], r["n"])] = r["time_s"]
            continue
        m = row.match(line)
        if m and m.group(1) in OPS:
            times[(m.group(1), m.group(2), int(m.group(3)), int(m.group(4)))] = float(m.group(5)) * 1e-3
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="n = 8 and 32, float32 only")
    ap.add_argument("--only", default=None, help="the rows whose label ('cholesky f32') contains TEXT")
    ap.add_argument("--json", action="store_true", help="one JSON object per line")
    ap.add_argument("--alloy", default=None, help="alloy bench linalg's output, for the ratio")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_linalg_torch: no CUDA device for PyTorch", file=sys.stderr)
        return 1
    alloy_times = read_alloy(args.alloy) if args.alloy else {}
    dev = torch.device("cuda")
    if not args.json:
        print(f"device: {torch.cuda.get_device_name(dev)}, torch {torch.__version__}")
        print(f"{'torch.linalg':14s} {'size':16s} {'time':>10s} {'matrices/s':>12s} {'error':>10s}"
              + (f" | {'alloy':>10s} {'ratio':>7s}" if alloy_times else ""))
    g = torch.Generator(device=dev)
    g.manual_seed(7)
    for dname, dt in DTYPES:
        for n, batch, quick in SIZES:
            if args.quick and (not quick or dname != "f32"):
                continue
            labels = [f"{op} {dname}" for op in OPS]
            if args.only and not any(args.only in lab for lab in labels):
                continue
            gen = torch.rand(batch, n, n, device=dev, dtype=dt, generator=g) * 2 - 1
            spd = torch.tril(gen) + torch.tril(gen, -1).transpose(-1, -2)
            spd.diagonal(dim1=-2, dim2=-1).fill_(n + 1.0)
            b = torch.rand(batch, n, 1, device=dev, dtype=dt, generator=g) * 2 - 1
            sq = torch.empty_like(gen)
            info = torch.empty(batch, device=dev, dtype=torch.int32)
            piv = torch.empty(batch, n, device=dev, dtype=torch.int32)
            x = torch.empty_like(b)
            d = torch.empty(batch, device=dev, dtype=dt)
            r = torch.empty_like(gen)
            # eigh and svd: the first nb matrices; eigh reads gen's lower triangle (UPLO='L', as alloy)
            nb = min(batch, SLOW_BATCH.get(n, batch))
            gs = gen[:nb]
            w = torch.empty(nb, n, device=dev, dtype=dt)
            vs, us, vhs = sq[:nb], sq[:nb], r[:nb]
            calls = {
                "cholesky": lambda: torch.linalg.cholesky_ex(spd, out=(sq, info)),
                "lu_factor": lambda: torch.linalg.lu_factor_ex(gen, out=(sq, piv, info)),
                "solve": lambda: torch.linalg.solve_ex(gen, b, out=(x, info)),
                "inv": lambda: torch.linalg.inv_ex(gen, out=(sq, info)),
                "det": lambda: torch.linalg.det(gen, out=d),
                "qr": lambda: torch.linalg.qr(gen, out=(sq, r)),
                "eigh": lambda: torch.linalg.eigh(gs, out=(w, vs)),
                "svd": lambda: torch.linalg.svd(gs, full_matrices=False, out=(us, w, vhs)),
            }
            for op, label in zip(OPS, labels):
                if args.only and args.only not in label:
                    continue
                rows = nb if op in SLOW_OPS else batch
                idx = [rows - 1 - (rows - 1) * s // (SAMPLES - 1) for s in range(SAMPLES)]
                size = f"{rows}x {n}x{n}"
                t = timed(calls[op])
                a_host = (spd if op == "cholesky" else gen)[idx].double().cpu().numpy()
                if op == "eigh":
                    a_host = np.tril(a_host) + np.swapaxes(np.tril(a_host, -1), -1, -2)
                if op == "lu_factor":
                    out = list(zip(sq[idx].double().cpu().numpy(), piv[idx].cpu().numpy()))
                elif op == "solve":
                    out = list(zip(x[idx].double().cpu().numpy(), b[idx].double().cpu().numpy()))
                elif op == "det":
                    out = list(d[idx].double().cpu().numpy())
                elif op == "qr":
                    out = list(zip(sq[idx].double().cpu().numpy(), r[idx].double().cpu().numpy()))
                elif op == "eigh":
                    out = list(zip(w[idx].double().cpu().numpy(), vs[idx].double().cpu().numpy()))
                elif op == "svd":
                    out = list(zip(us[idx].double().cpu().numpy(), w[idx].double().cpu().numpy(),
                                   vhs[idx].double().cpu().numpy()))
                else:
                    out = list(sq[idx].double().cpu().numpy())
                err = sample_error(op, a_host, out)
                at = alloy_times.get((op, dname, rows, n))
                if args.json:
                    row = {"op": op, "case": dname, "size": size, "batch": rows, "n": n, "peer": "torch.linalg",
                           "time_s": t, "matrices_per_s": rows / t, "error": err}
                    if at:
                        row.update(alloy_time_s=at, ratio=t / at)
                    print(json.dumps(row), flush=True)
                else:
                    rate = rows / t
                    rs = f"{rate / 1e6:.3g} M/s" if rate >= 1e6 else f"{rate / 1e3:.3g} k/s"
                    extra = f" | {at * 1e3:7.3f} ms {t / at:7.3f}" if at else ""
                    print(f"{label:14s} {size:16s} {t * 1e3:7.3f} ms {rs:>12s} {err:10.2e}{extra}", flush=True)
            del gen, spd, b, sq, info, piv, x, d, r, gs, w, vs, us, vhs
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
