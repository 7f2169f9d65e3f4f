"""ncu_torch_fused.py — one launch of torch.compile's kernel for a fused op of
`alloy bench nn` (the same shape, 8 x 8192 x 1024, and the same PyTorch form
as bench/bench_nn_torch.py), for Nsight Compute to profile beside alloy's
kernel: compiled and warmed up first, then called once between
cudaProfilerStart and cudaProfilerStop.

    ncu --clock-control none --profile-from-start off --section SpeedOfLight \\
        python bench/ncu_torch_fused.py softcap|rmsnorm|layernorm [bfloat16|float16|float32] [--backward]

and alloy's, for instance:

    ncu --clock-control none --kernel-name regex:norm_rows --launch-skip 5 --launch-count 1 \\
        --section SpeedOfLight build/alloy bench nn --device cuda --only 'layernorm bf16 fwd'

--backward profiles the compiled backward (AOTAutograd's kernels) instead.
"""
import argparse

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("op", choices=["softcap", "rmsnorm", "layernorm"])
    ap.add_argument("dtype", nargs="?", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    ap.add_argument("--backward", action="store_true")
    a = ap.parse_args()
    dt = getattr(torch, a.dtype)
    x = torch.randn(8, 8192, 1024, device="cuda", dtype=dt, requires_grad=a.backward)
    w = torch.randn(1024, device="cuda", dtype=dt)
    b = torch.randn(1024, device="cuda", dtype=dt)
    forms = {"softcap": lambda x: 15 * torch.tanh(x / 15),
             "rmsnorm": lambda x: torch.nn.functional.rms_norm(x, (1024,), w, 1e-5),
             "layernorm": lambda x: torch.nn.functional.layer_norm(x, (1024,), w, b, 1e-5)}
    f = torch.compile(forms[a.op])
    dy = torch.randn_like(x)

    def once():
        y = f(x)
        if a.backward:
            torch.autograd.grad(y, x, dy)

    for _ in range(3):
        once()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    once()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
