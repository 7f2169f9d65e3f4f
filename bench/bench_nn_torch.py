"""bench_nn_torch.py — the PyTorch peers of `alloy bench nn`: the same fused
ops (soft-cap, RMSNorm, LayerNorm, their per-head forms, the causal depthwise
convolution with K = 4), forward and backward, at the same sizes and dtypes,
in eager mode and through torch.compile, timed the same way (wall clock
around back-to-back calls and one synchronisation, batches of about 50 ms,
the median of 9 after a warm-up).

    python bench/bench_nn_torch.py [--alloy FILE] [--quick] [--only TEXT] [--device cuda|cpu] [--json]

--alloy FILE reads the output of `alloy bench nn` (its table or --json lines)
and puts alloy's time and share of the copy bandwidth beside each row, with
the ratios peer time / alloy time (above 1: alloy is faster).

The PyTorch forms (what a PyTorch model of the xLSTM block writes):
  softcap       cap * tanh(x / cap), cap = 15
  rmsnorm       F.rms_norm(x, (D,), w, eps)
  layernorm     F.layer_norm(x, (D,), w, b, eps)
  *-mh          the norm without affine over (..., NH, DH), then * w (D,)
                (xLSTM's multi-head norm: a weight, no bias)
  conv1d k4     F.conv1d on (B, C, S) with groups = C, padding K - 1, the first
                S outputs, transposed back to (B, S, C); torch.compile also gets
                the sum of K shifted products (pointwise, one fused kernel) and
                the row keeps the faster compiled form ("compile*" marks it)
The backward is torch.autograd.grad of y with a given dy for x and every
parameter (w, and b where there is one), the graph kept between calls
(retain_graph); for torch.compile that runs AOTAutograd's compiled backward.
PyTorch's norms save their statistics for the backward: the norms' "bwd stats"
rows put the same PyTorch timings beside alloy's backward from saved
statistics (`alloy bench nn`'s rows of that name; 8 bytes more a group).
eps = 1e-5. GB/s uses alloy's byte counts (docs/cli.md); "copy" is
torch's own device-to-device copy (dst.copy_(src)) of as many bytes.
A peer that fails prints its error in its cell and the script goes on.

--device cpu with --quick checks the script without a GPU (alloy's --quick
sizes)."""
import argparse
import json
import re
import sys
import time

import peer_util

CAP, EPS = 15.0, 1e-5

# name, kind, shape, head_dim, bias, K, quick (alloy's NN_SIZES in tools/cmd_bench_nn.c)
SIZES = [
    ("softcap", "softcap", (8, 8192, 1024), 0, False, 0, False),
    ("rmsnorm", "rms", (8, 8192, 1024), 0, False, 0, False),
    ("layernorm", "ln", (8, 8192, 1024), 0, True, 0, False),
    ("rmsnorm-mh", "rms", (2, 8192, 4096), 512, False, 0, False),
    ("layernorm-mh", "ln", (2, 8192, 4096), 512, False, 0, False),
    ("conv1d k4", "conv", (8, 8192, 1024), 0, True, 4, False),
    ("softcap", "softcap", (2, 256, 256), 0, False, 0, True),
    ("rmsnorm", "rms", (2, 256, 256), 0, False, 0, True),
    ("layernorm", "ln", (2, 256, 256), 0, True, 0, True),
    ("rmsnorm-mh", "rms", (2, 64, 1024), 128, False, 0, True),
    ("layernorm-mh", "ln", (2, 64, 1024), 128, False, 0, True),
    ("conv1d k4", "conv", (2, 256, 256), 0, True, 4, True),
]


def op_bytes(kind, shape, bias, K, bwd, es):
    """The bytes the op must move (tools/cmd_bench_nn.c's count)."""
    N = shape[0] * shape[1] * shape[2]
    D = shape[2]
    if kind == "softcap":
        return (3 if bwd else 2) * N * es
    if kind == "rms":
        return (3 * N + 2 * D if bwd else 2 * N + D) * es
    if kind == "ln":
        return (3 * N + (3 if bias else 2) * D if bwd else 2 * N + (2 if bias else 1) * D) * es
    ck = D * K
    return (3 * N + 2 * ck + (D if bias else 0) if bwd else 2 * N + ck + (D if bias else 0)) * es


def torch_forms(kind, head_dim, K):
    """(the eager form, the extra compiled form or None): f(x, w, b) -> y."""
    import torch
    import torch.nn.functional as F

    if kind == "softcap":
        return (lambda x, w, b: CAP * torch.tanh(x / CAP)), None
    if kind in ("rms", "ln"):
        norm = F.rms_norm if kind == "rms" else F.layer_norm
        if head_dim:
            def mh(x, w, b):
                s = x.shape
                return norm(x.view(*s[:-1], s[-1] // head_dim, head_dim), (head_dim,), eps=EPS).view(s) * w
            return mh, None
        if kind == "rms":
            return (lambda x, w, b: F.rms_norm(x, (x.shape[-1],), w, EPS)), None
        return (lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, EPS)), None

    def conv(x, w, b):
        S = x.shape[1]
        return F.conv1d(x.transpose(1, 2), w.unsqueeze(1), b, padding=K - 1, groups=x.shape[2])[..., :S].transpose(1, 2)

    def shifted(x, w, b):
        S = x.shape[1]
        xp = F.pad(x, (0, 0, K - 1, 0))
        y = b
        for j in range(K):
            y = y + w[:, j] * xp[:, j:j + S, :]
        return y

    return conv, shifted


def timed(fn, sync, target=0.05, reps=9):
    """Seconds per call: the median of `reps` batches after a warm-up."""
    fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    t1 = time.perf_counter() - t0
    per = max(1, min(1000, int(target / max(t1, 1e-6))))
    return peer_util.median_per_call(fn, sync, per, reps)


def read_alloy(path):
    """{label: (seconds, share of the copy or None)} from `alloy bench nn`'s output."""
    out = {}
    try:
        lines = list(peer_util.lines(path))
    except OSError as e:
        print(f"bench_nn_torch: no alloy rows ({e}); the peers alone", file=sys.stderr)
        return out
    for r, line in lines:
        if r is not None:
            if r.get("op") == "nn":
                out[r["case"]] = (r["time_s"], r.get("copy_share"))
            continue
        cols = re.split(r"\s{2,}", line)
        if len(cols) >= 3:
            m = re.match(r"([0-9.]+) ms$", cols[2])
            if m:
                share = next((float(c[:-1]) / 100 for c in cols[3:] if re.match(r"^[0-9.]+%$", c)), None)
                out[cols[0]] = (float(m.group(1)) * 1e-3, share)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alloy", help="alloy bench nn's output, for the ratios")
    ap.add_argument("--quick", action="store_true", help="alloy's --quick sizes (128 K elements)")
    ap.add_argument("--only", help="the rows whose label ('rmsnorm bf16 bwd') contains TEXT, "
                    "or one of its |-separated alternatives ('layernorm-mh|conv1d')")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--no-compile", action="store_true", help="eager only")
    ap.add_argument("--json", action="store_true", help="one JSON object per line")
    args = ap.parse_args()
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        print(f"bench_nn_torch: PyTorch unavailable: {e}", file=sys.stderr)
        return 1
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print("bench_nn_torch: no CUDA device for PyTorch (--device cpu --quick checks the script)", file=sys.stderr)
        return 1
    try:  # one compiled form per shape, dtype and grad mode: more than the default limit
        import torch._dynamo

        for name in ("cache_size_limit", "recompile_limit"):
            if hasattr(torch._dynamo.config, name):
                setattr(torch._dynamo.config, name, 256)
    except Exception as e:  # noqa: BLE001 - the compiled peers then say what failed
        print(f"bench_nn_torch: torch._dynamo unavailable: {e}", file=sys.stderr)
    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    ours = read_alloy(args.alloy) if args.alloy else {}
    quick = args.quick or not cuda
    if not args.json:
        where = torch.cuda.get_device_name(dev) if cuda else "cpu"
        print(f"device: {where}, torch {torch.__version__}")
        print(f"{'nn (PyTorch)':26} {'size':18} {'bytes':>9} {'copy':>11} | {'alloy':>10} {'% copy':>7} | "
              f"{'eager':>10} {'GB/s':>7} {'ratio':>6} | {'compile':>10} {'GB/s':>7} {'ratio':>6}")
    g = torch.Generator(device=dev)
    g.manual_seed(11)
    copies = {}
    for name, kind, shape, head_dim, bias, K, q in SIZES:
        if q != quick:
            continue
        for dname, dt in (("f32", torch.float32), ("bf16", torch.bfloat16), ("f16", torch.float16)):
            for bwd in (False, True):
                label = f"{name} {dname} {'bwd' if bwd else 'fwd'}"
                if args.only and not any(t in label for t in args.only.split("|")):
                    continue
                es = torch.empty((), dtype=dt).element_size()
                nbytes = op_bytes(kind, shape, bias, K, bwd, es)
                size = f"{'x'.join(map(str, shape))}" + (f" h{head_dim}" if head_dim else "")

                def rnd(*s):
                    return (torch.rand(*s, device=dev, dtype=torch.float32, generator=g) * 2 - 1).to(dt)

                D = shape[2]
                x = rnd(*shape)
                w = rnd(D, K) if kind == "conv" else (rnd(D) if kind != "softcap" else None)
                b = rnd(D) if bias else None
                dy = rnd(*shape) if bwd else None
                # torch's copy of as many bytes (read + write), once per byte count
                half = nbytes // 2 // 16 * 16
                if half not in copies:
                    src = torch.empty(half, dtype=torch.uint8, device=dev)
                    dst = torch.empty_like(src)
                    try:
                        copies[half] = 2 * half / timed(lambda: dst.copy_(src), sync)
                    except Exception:  # noqa: BLE001
                        copies[half] = None
                    del src, dst
                eager, shifted = torch_forms(kind, head_dim, K)
                peers = [("eager", eager, False)]
                if not args.no_compile:
                    peers.append(("compile", eager, True))
                    if shifted is not None:
                        peers.append(("compile*", shifted, True))
                results = {}
                for pname, form, compiled in peers:
                    try:
                        fn = torch.compile(form) if compiled else form
                        if bwd:
                            # gradients for x and every parameter, as a training step asks
                            xs = x.detach().requires_grad_()
                            ws = w.detach().requires_grad_() if w is not None else None
                            bs = b.detach().requires_grad_() if b is not None else None
                            wrt = [t for t in (xs, ws, bs) if t is not None]
                            y = fn(xs, ws, bs)
                            results[pname] = timed(lambda: torch.autograd.grad(y, wrt, dy, retain_graph=True), sync)
                        else:
                            with torch.no_grad():
                                results[pname] = timed(lambda: fn(x, w, b), sync)
                    except Exception as e:  # noqa: BLE001 - a peer failure is a cell, not the end
                        msg = str(e).strip().splitlines()
                        results[pname] = f"{type(e).__name__}: {msg[0] if msg else ''}"[:60]
                    finally:
                        y = None
                # the compiled cell: the faster of the compiled forms
                comp_name = None
                for pname in ("compile", "compile*"):
                    r = results.get(pname)
                    if isinstance(r, float) and (comp_name is None or r < results[comp_name]):
                        comp_name = pname
                if comp_name is None and "compile" in results:
                    comp_name = "compile"
                del x, w, b, dy
                if cuda:
                    torch.cuda.empty_cache()
                # the norms' backward also beside alloy's backward from saved statistics
                rows = [(label, nbytes)]
                if bwd and kind in ("rms", "ln"):
                    rows.append((label + " stats", nbytes + 8 * (shape[0] * shape[1] * shape[2]) // (head_dim or D)))
                for label, nbytes in rows:
                    at, share = ours.get(label, (None, None))
                    if args.json:
                        row = {"op": "nn", "case": label, "size": size, "bytes": nbytes, "peer_copy_bytes_per_s": copies[half]}
                        for pname, r in results.items():
                            key = pname.replace("*", "_shifted")
                            if isinstance(r, float):
                                row[f"{key}_time_s"] = r
                                if at:
                                    row[f"{key}_ratio"] = r / at
                            else:
                                row[f"{key}_error"] = r
                        if at:
                            row.update(alloy_time_s=at, alloy_copy_share=share)
                        print(json.dumps(row), flush=True)
                        continue

                    def cell(pname):
                        r = results.get(pname)
                        if r is None:
                            return f"{'-':>10} {'':>7} {'':>6}"
                        if not isinstance(r, float):
                            return f"{r}"
                        ratio = f"{r / at:6.2f}" if at else f"{'':>6}"
                        return f"{r * 1e3:7.3f} ms {nbytes / r / 1e9:7.1f} {ratio}"

                    cp = f"{copies[half] / 1e9:6.1f} GB/s" if copies[half] else f"{'-':>11}"
                    al = f"{at * 1e3:7.3f} ms" if at else f"{'-':>10}"
                    sh = f"{100 * share:6.1f}%" if share is not None else f"{'-':>7}"
                    comp = cell(comp_name) if comp_name else cell("none")
                    mark = "*" if comp_name == "compile*" else " "
                    print(f"{label:26} {size:18} {nbytes / 1e6:7.1f}MB {cp} | {al} {sh} | {cell('eager')} |{mark}{comp}",
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
