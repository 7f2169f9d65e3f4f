"""Trains a small xLSTM-style language model from one seed with alloy's
PyTorch operators (alloy.mlstm.torch, alloy.nn.torch) and with a
plain-PyTorch reference of the same layer, and checks that the loss curves
agree. The layer: pre-RMSNorm, an up-projection into a cell
branch and an output gate, a causal depthwise convolution (+ SiLU) feeding
q and k, v from the cell branch, input and forget gates soft-capped to
15 tanh(x / 15), the mLSTM cell (chunkwise form), a multi-head LayerNorm,
the gate, a down-projection and the residual. The task: next-token
prediction on sequences of a random order-2 Markov chain (the loss falls from
log(vocab) towards the chain's entropy).

    python python/examples/xlstm_train.py                      # CPU, float32, 300 steps
    python python/examples/xlstm_train.py --device cuda --dtype bfloat16
    python python/examples/xlstm_train.py --steps 20 --compile # torch.compile(fullgraph=True)
    python python/examples/xlstm_train.py --device cuda --precision default  # float32 at TF32's precision

Three runs from one initialisation and one data stream: alloy in --dtype
(float32 parameters cast for each product, as under autocast), the
PyTorch reference in the same dtype (sums in float32 at least, as alloy's),
and the reference in float64. Training is chaotic: rounding differences
grow step by step, so even PyTorch's own float32 run drifts from float64
after some tens of steps; that drift, measured, is the dtype's noise. Exit
status 1 when alloy's curve, averaged over --window steps, is further from
float64 than three times that noise (at least the dtype's floor)."""
import argparse
import math
import sys

import torch
import torch.nn.functional as F

import alloy.mlstm.torch as mt
import alloy.nn.torch as nt

# the smallest tolerance, for runs too short to show the dtype's noise
FLOOR = {"float64": 1e-6, "float32": 1e-3, "bfloat16": 3e-2, "float16": 1e-2}


class AlloyOps:
    """The layer's fused operations as alloy's operators; `precision` is the
    mLSTM cell's for float32 (--precision)."""
    precision = "high"
    softcap = staticmethod(nt.softcap)
    rms_norm = staticmethod(nt.rms_norm)
    layer_norm = staticmethod(nt.layer_norm)
    causal_conv1d = staticmethod(nt.causal_conv1d)

    @staticmethod
    def mlstm(q, k, v, i, f):
        return mt.chunkwise(q, k, v, i, f, precision=AlloyOps.precision)


def _wide(*xs):
    """float16/bfloat16 operands as float32: the reference sums in float32
    at least, as alloy's kernels do (results are rounded back)."""
    return [x.float() if x.dtype in (torch.float16, torch.bfloat16) else x for x in xs]


class TorchOps:
    """The same operations in plain PyTorch (autograd differentiates them)."""

    @staticmethod
    def softcap(x, cap):
        (w,) = _wide(x)
        return (cap * torch.tanh(w / cap)).to(x.dtype)

    @staticmethod
    def rms_norm(x, weight, head_dim=0, eps=1e-5):
        w, wt = _wide(x, weight)
        return (w * torch.rsqrt(w.square().mean(-1, keepdim=True) + eps) * wt).to(x.dtype)

    @staticmethod
    def layer_norm(x, weight, bias, head_dim, eps=1e-5):
        g, wt, b = _wide(x.unflatten(-1, (-1, head_dim)), weight, bias)
        return (F.layer_norm(g, (head_dim,), eps=eps).flatten(-2) * wt + b).to(x.dtype)

    @staticmethod
    def causal_conv1d(x, w, bias):
        K = w.shape[1]
        xt = F.pad(x.transpose(1, 2), (K - 1, 0))  # zeros before the first step
        return F.conv1d(xt, w.unsqueeze(1), bias, groups=w.shape[0]).transpose(1, 2)

    @staticmethod
    def mlstm(q, k, v, i, f, eps=1e-6):
        """The quadratic (parallel) form of docs/mlstm.md from zero states:
        log D(t, j) = sum_{s=j+1..t} logsigmoid(f_s) + i_j, the stabiliser
        m_t = max(sum_{s<=t} logsigmoid(f_s), max_j log D(t, j))."""
        dtype = q.dtype
        q, k, v, i, f = _wide(q, k, v, i, f)
        S, DK = q.shape[-2], q.shape[-1]
        cum = torch.cumsum(F.logsigmoid(f), dim=-1)                       # (B, NH, S)
        logd = cum[..., :, None] - cum[..., None, :] + i[..., None, :]    # (B, NH, t, j)
        causal = torch.ones(S, S, dtype=torch.bool, device=q.device).tril()
        logd = logd.masked_fill(~causal, -math.inf)
        m = torch.maximum(cum, logd.amax(-1))
        w = torch.exp(logd - m[..., None]) * (q @ k.transpose(-1, -2)) * DK ** -0.5
        den = torch.maximum(w.sum(-1).abs(), torch.exp(-m)) + eps
        return ((w @ v) / den[..., None]).to(dtype)


class XLSTMLayer(torch.nn.Module):
    def __init__(self, d, heads, conv_k=4):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        p = torch.nn.Parameter
        self.norm_w = p(torch.ones(d))
        self.up = p(torch.randn(2 * d, d) / math.sqrt(d))
        self.conv_w = p(torch.randn(d, conv_k) / math.sqrt(conv_k))
        self.conv_b = p(torch.zeros(d))
        self.wq, self.wk, self.wv = (p(torch.randn(d, d) / math.sqrt(d)) for _ in range(3))
        self.gates = p(torch.randn(2 * heads, d) / math.sqrt(d) * 0.1)
        # forget gates start open (xLSTM's initialisation: biases 3..6)
        self.gate_b = p(torch.cat([torch.zeros(heads), torch.linspace(3.0, 6.0, heads)]))
        self.mh_w, self.mh_b = p(torch.ones(d)), p(torch.zeros(d))
        self.down = p(torch.randn(d, d) / math.sqrt(d))

    def forward(self, x, ops):
        B, S, d = x.shape
        cd = x.dtype
        lin = lambda t, w, b=None: F.linear(t, w.to(cd), None if b is None else b.to(cd))  # noqa: E731
        heads = lambda t: t.view(B, S, self.heads, -1).transpose(1, 2)                       # noqa: E731
        xm, z = lin(ops.rms_norm(x, self.norm_w.to(cd)), self.up).chunk(2, dim=-1)
        xc = F.silu(ops.causal_conv1d(xm, self.conv_w.to(cd), self.conv_b.to(cd)))
        q, k, v = heads(lin(xc, self.wq)), heads(lin(xc, self.wk)), heads(lin(xm, self.wv))
        g = ops.softcap(lin(xm, self.gates, self.gate_b), 15.0).transpose(1, 2)             # (B, 2 NH, S)
        i, f = g[:, :self.heads].contiguous(), g[:, self.heads:].contiguous()
        h = ops.mlstm(q, k, v, i, f).transpose(1, 2).reshape(B, S, d)
        h = ops.layer_norm(h, self.mh_w.to(cd), self.mh_b.to(cd), self.dh) * F.silu(z)
        return x + lin(h, self.down)


class Model(torch.nn.Module):
    def __init__(self, vocab, d, heads):
        super().__init__()
        self.emb = torch.nn.Parameter(torch.randn(vocab, d) / math.sqrt(d))
        self.layer = XLSTMLayer(d, heads)
        self.out_w = torch.nn.Parameter(torch.ones(d))

    def forward(self, tokens, ops, dtype):
        x = self.layer(self.emb[tokens].to(dtype), ops)
        return F.linear(ops.rms_norm(x, self.out_w.to(dtype)), self.emb.to(dtype))  # tied output embedding


def markov_data(seed, vocab, n, length, device):
    """n sequences of an order-2 Markov chain with random, peaked transitions."""
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(2.5 * torch.randn(vocab, vocab, vocab, generator=g, dtype=torch.float64), dim=-1)
    seq = torch.randint(vocab, (n, 2), generator=g)
    for _ in range(length - 2):
        nxt = torch.multinomial(probs[seq[:, -2], seq[:, -1]], 1, generator=g)
        seq = torch.cat([seq, nxt], dim=1)
    return seq.to(device)


def train(model, ops, dtype, data, args, compile_=False):
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    step_fn = model
    if compile_:
        step_fn = torch.compile(model, fullgraph=True)
    losses = []
    for s in range(args.steps):
        batch = data[s * args.batch:(s + 1) * args.batch]
        logits = step_fn(batch[:, :-1], ops, dtype)
        loss = F.cross_entropy(logits.double().flatten(0, 1), batch[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def smooth(xs, w):
    return [sum(xs[max(0, j - w + 1):j + 1]) / (j + 1 - max(0, j - w + 1)) for j in range(len(xs))]


def gap(a, b, window):
    """The largest difference of two loss curves averaged over window steps."""
    return max((abs(x - y) for x, y in zip(smooth(a, window), smooth(b, window))), default=0.0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtype", default="float32", choices=sorted(FLOOR))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=48)
    ap.add_argument("--vocab", type=int, default=16)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--window", type=int, default=20, help="steps averaged before curves are compared")
    ap.add_argument("--compile", action="store_true", help="alloy's model under torch.compile(fullgraph=True)")
    ap.add_argument("--every", type=int, default=25, help="print every N steps")
    ap.add_argument("--precision", default="high", choices=["high", "default"],
                    help="the mLSTM cell's float32 products: high (float32's accuracy) or default (TF32's 11 "
                         "significant bits on float16 tiles, forward and backward: the fast float32 path; its "
                         "floor is float16's)")
    args = ap.parse_args(argv)
    dtype = getattr(torch, args.dtype)
    AlloyOps.precision = args.precision
    # an 11-bit cell in float32 training: float16's floor
    floor = FLOOR["float16"] if args.precision == "default" and args.dtype == "float32" else FLOOR[args.dtype]

    torch.manual_seed(args.seed)
    init = Model(args.vocab, args.d, args.heads)
    data = markov_data(args.seed + 1, args.vocab, args.steps * args.batch, args.seq + 1, args.device)

    def run(ops, param_dtype, dtype, compile_=False):
        model = Model(args.vocab, args.d, args.heads).to(args.device, param_dtype)
        model.load_state_dict({n: p.to(param_dtype) for n, p in init.state_dict().items()})
        return train(model, ops, dtype, data, args, compile_)

    exact = run(TorchOps, torch.float64, torch.float64)
    native = run(TorchOps, torch.float32, dtype) if dtype != torch.float64 else exact
    mine = run(AlloyOps, torch.float32 if dtype != torch.float64 else torch.float64, dtype, args.compile)

    cell = " (the cell at precision default)" if args.precision == "default" and args.dtype == "float32" else ""
    print(f"# {args.steps} steps on {args.device}: alloy in {args.dtype}{cell}{' (compiled)' if args.compile else ''}, "
          f"PyTorch in {args.dtype} and in float64; vocab {args.vocab} (log = {math.log(args.vocab):.3f})")
    print(f"{'step':>6} {'float64':>10} {'torch':>10} {'alloy':>10} {'alloy-f64':>10}")
    for s in range(args.steps):
        if s % args.every == 0 or s == args.steps - 1:
            print(f"{s:>6} {exact[s]:>10.5f} {native[s]:>10.5f} {mine[s]:>10.5f} {mine[s] - exact[s]:>10.2e}")
    noise = gap(native, exact, args.window)
    got = gap(mine, exact, args.window)
    tol = max(3 * noise, floor)
    ok = got <= tol and all(math.isfinite(x) for x in mine)
    print(f"over {args.window}-step means: alloy - float64 {got:.3e}, PyTorch {args.dtype} - float64 {noise:.3e} "
          f"(the dtype's noise); tolerance max(3 x noise, {floor:.0e}) = {tol:.3e}: "
          f"{'agree' if ok else 'DISAGREE'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
