"""linalg_batched_torch.py — torch.linalg on the shapes of linalg_batched.c
(float32, CUDA events, median of 9 batches after a warm-up): the peer of
issue 9's first measurement. Run on the GPU machine:
    python bench/experiments/linalg_batched_torch.py"""
import torch

def timed(fn, reps=9):
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); fn(); e.record(); torch.cuda.synchronize()
    per = max(1, min(200, int(50 / max(s.elapsed_time(e), 1e-3))))
    ts = []
    for _ in range(reps):
        s.record()
        for _ in range(per):
            fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / per)
    return sorted(ts)[reps // 2]

torch.manual_seed(7)
for B, n in [(10000, 8), (10000, 16), (10000, 32), (10000, 64), (10000, 128), (1000, 256)]:
    g = torch.rand(B, n, n, device="cuda") - 0.5
    spd = torch.triu(g) + torch.triu(g, 1).transpose(-1, -2)
    spd.diagonal(dim1=-2, dim2=-1).fill_(n + 1.0)
    b = torch.rand(B, n, 1, device="cuda") - 0.5
    for name, fn in [("cholesky", lambda: torch.linalg.cholesky_ex(spd)),
                     ("lu_factor", lambda: torch.linalg.lu_factor_ex(g)),
                     ("solve (k=1)", lambda: torch.linalg.solve_ex(g, b))]:
        print(f"torch {name:12s} {B:6d} x {n:3d}x{n:<3d} {timed(fn):10.4f} ms", flush=True)
