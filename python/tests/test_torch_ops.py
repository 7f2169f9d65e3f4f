"""The PyTorch operators alloy.mlstm.torch and alloy.nn.torch: their forward
equals the plain alloy function (the same kernel, so bit for bit), non-
contiguous tensors work, torch.autograd.gradcheck passes in float64 on the
CPU (chunkwise with and without initial states, odd S, two chunk sizes, the
final states' gradients; each fused op), torch.library.opcheck passes
(schemas, fake implementations, autograd registration, AOT dispatch), and
torch.compile(fullgraph=True) of a small function using every op gives the
eager result and gradients. Skipped without torch (CI installs none)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch operators need torch")

import alloy  # noqa: E402
import alloy.mlstm.torch as mt  # noqa: E402
import alloy.nn.torch as nt  # noqa: E402


def gen(seed):
    return torch.Generator().manual_seed(seed)


def mlstm_inputs(seed, B=1, NH=2, S=7, DK=3, DV=2, dtype=torch.float64, states=False):
    g = gen(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    args = [r(B, NH, S, DK), r(B, NH, S, DK), r(B, NH, S, DV), 2 * r(B, NH, S), 2 * r(B, NH, S)]
    if states:
        sd = torch.float64 if dtype == torch.float64 else torch.float32
        args += [r(B, NH, DK, DV).to(sd), r(B, NH, DK).to(sd), r(B, NH, 1).to(sd)]
    return args


def as_torch(a):
    return torch.from_dlpack(a)


# forward: the plain alloy function

@pytest.mark.parametrize("states", [False, True])
def test_chunkwise_forward_is_alloys(states):
    args = mlstm_inputs(1, B=2, S=37, DK=8, DV=4, dtype=torch.float32, states=states)
    h, (c, n, m) = mt.chunkwise(*args, return_last_states=True, chunk_size=16)
    want_h, want_states = alloy.mlstm.chunkwise(*args, return_last_states=True, chunk_size=16)
    assert isinstance(h, torch.Tensor) and h.dtype == torch.float32 and h.shape == (2, 2, 37, 4)
    assert torch.equal(h, as_torch(want_h))
    for got, want in zip((c, n, m), want_states):
        assert torch.equal(got, as_torch(want))
    assert torch.equal(mt.chunkwise(*args, chunk_size=16), h)
    # precision="default" (TF32's precision) is alloy's with that precision, and differentiable
    hd = mt.chunkwise(*args, chunk_size=16, precision="default")
    assert torch.equal(hd, as_torch(alloy.mlstm.chunkwise(*args, chunk_size=16, precision="default")))


def test_chunkwise_bfloat16_and_noncontiguous():
    args = mlstm_inputs(2, S=20, DK=16, DV=8, dtype=torch.float32)
    # q as the transpose of a (B, NH, DK, S) tensor: not row-contiguous
    qt = args[0].transpose(2, 3).contiguous().transpose(2, 3)
    assert not qt.is_contiguous()
    assert torch.equal(mt.chunkwise(qt, *args[1:]), mt.chunkwise(*args))
    bf = [a.to(torch.bfloat16) for a in args]
    h = mt.chunkwise(*bf)
    assert h.dtype == torch.bfloat16
    assert torch.equal(h, as_torch(alloy.mlstm.chunkwise(*bf)))


def test_step_forward_is_alloys():
    q, k, v, i, f, c, n, m = mlstm_inputs(3, B=2, S=1, DK=8, DV=4, dtype=torch.float32, states=True)
    one = [x[:, :, 0] for x in (q, k, v)] + [i, f]
    h, (c1, n1, m1) = mt.step(*one, c, n, m)
    want_h, want_states = alloy.mlstm.step(*one, c, n, m)
    assert torch.equal(h, as_torch(want_h))
    for got, want in zip((c1, n1, m1), want_states):
        assert torch.equal(got, as_torch(want))
    # one step equals the chunkwise form over one token from the same states
    hc, (cc, _, _) = mt.chunkwise(q, k, v, i, f, c, n, m, return_last_states=True)
    assert torch.allclose(hc[:, :, 0], h, rtol=1e-5, atol=1e-6) and torch.allclose(cc, c1, rtol=1e-5, atol=1e-6)
    # generation only: a backward through the step says so
    h, _ = mt.step(one[0].clone().requires_grad_(), *one[1:], c, n, m)
    with pytest.raises(RuntimeError, match="no autograd formula"):
        h.sum().backward()


def test_fused_forward_is_alloys():
    g = gen(4)
    x = torch.randn(3, 5, 8, generator=g)
    w, b = torch.rand(8, generator=g) + 0.5, torch.randn(8, generator=g)
    cw, st = torch.randn(8, 4, generator=g), torch.randn(3, 3, 8, generator=g)
    assert torch.equal(nt.softcap(x * 20, 15), as_torch(alloy.nn.softcap(x * 20, 15)))
    assert torch.equal(nt.rms_norm(x, w, head_dim=4), as_torch(alloy.nn.rms_norm(x, w, head_dim=4)))
    assert torch.equal(nt.layer_norm(x, w, b, 2), as_torch(alloy.nn.layer_norm(x, w, b, 2)))
    y, s = nt.causal_conv1d(x, cw, b, st, return_state=True)
    want_y, want_s = alloy.nn.causal_conv1d(x, cw, b, st, return_state=True)
    assert torch.equal(y, as_torch(want_y)) and torch.equal(s, as_torch(want_s))


# gradients: float64 on the CPU

def grad_inputs(args):
    return [a.clone().requires_grad_() for a in args]


# the longer sequences (several chunks) in gradcheck's fast mode (random
# projections of the Jacobian) to keep the loop of the float64 forward short
@pytest.mark.parametrize("S,chunk,fast", [(1, None, False), (7, None, False), (19, 16, True), (33, 32, True)])
@pytest.mark.parametrize("states", [False, True])
def test_chunkwise_gradcheck(S, chunk, fast, states):
    args = grad_inputs(mlstm_inputs(10 + S, S=S, states=states))

    def fn(*a):
        h, (c, n, m) = mt.chunkwise(*a, return_last_states=True, chunk_size=chunk)
        return h, c, n, m

    assert torch.autograd.gradcheck(fn, args, fast_mode=fast)


def test_chunkwise_float32_gradients_match_float64():
    a64 = mlstm_inputs(5, B=2, S=21, DK=8, DV=4, states=True)
    g = gen(6)
    dh = torch.randn(2, 2, 21, 4, generator=g, dtype=torch.float64)
    dc = torch.randn(2, 2, 8, 4, generator=g, dtype=torch.float64)

    def grads(args):
        xs = grad_inputs(args)
        h, (c, _, _) = mt.chunkwise(*xs, return_last_states=True, chunk_size=16)
        ((h * dh.to(h.dtype)).sum() + (c * dc.to(c.dtype)).sum()).backward()
        return [x.grad for x in xs]

    want = grads(a64)
    got = grads([a.float() for a in a64])
    for g32, g64 in zip(got, want):
        assert g32.dtype == torch.float32
        assert (g32.double() - g64).abs().max() <= 5e-4 * g64.abs().max()


def packed_inputs(seed, lens, NH=2, DK=3, DV=2, dtype=torch.float64):
    """A packed batch of len(lens) sequences, their offsets and initial states."""
    T = sum(lens)
    args = mlstm_inputs(seed, B=1, NH=NH, S=T, DK=DK, DV=DV, dtype=dtype)
    sd = torch.float64 if dtype == torch.float64 else torch.float32
    g = gen(seed + 1)
    N = len(lens)
    states = [torch.randn(N, NH, DK, DV, generator=g, dtype=sd), torch.randn(N, NH, DK, generator=g, dtype=sd),
              torch.randn(N, NH, 1, generator=g, dtype=sd)]
    cu = torch.tensor([0] + list(np.cumsum(lens)), dtype=torch.int32)
    return args + states, cu


def test_chunkwise_packed_is_alloys_and_each_sequence_alone():
    lens = [5, 0, 1, 19]
    args, cu = packed_inputs(20, lens, DK=8, DV=4, dtype=torch.float32)
    h, (c, n, m) = mt.chunkwise(*args, return_last_states=True, chunk_size=16, cu_seqlens=cu)
    want_h, want_states = alloy.mlstm.chunkwise(*args, return_last_states=True, chunk_size=16, cu_seqlens=cu)
    assert torch.equal(h, as_torch(want_h))
    for got, want in zip((c, n, m), want_states):
        assert torch.equal(got, as_torch(want))
    # gradients of the packed batch = gradients of each sequence run alone
    xs = grad_inputs(args)
    h, (c, _, _) = mt.chunkwise(*xs, return_last_states=True, chunk_size=16, cu_seqlens=cu)
    (h.square().sum() + c.sum()).backward()
    off = cu.tolist()
    for s in range(len(lens)):
        a, b = off[s], off[s + 1]
        one = [x.detach()[:, :, a:b] for x in args[:5]] + [x.detach()[s:s + 1] for x in args[5:]]
        ys = grad_inputs(one)
        h1, (c1, _, _) = mt.chunkwise(*ys, return_last_states=True, chunk_size=16)
        (h1.square().sum() + c1.sum()).backward()
        for x, y in zip(xs[:5], ys[:5]):
            assert torch.allclose(x.grad[:, :, a:b], y.grad, rtol=1e-5, atol=1e-6)
        for x, y in zip(xs[5:], ys[5:]):
            assert torch.allclose(x.grad[s:s + 1], y.grad, rtol=1e-5, atol=1e-6)


def test_chunkwise_packed_gradcheck():
    args, cu = packed_inputs(30, [3, 0, 6, 1])
    xs = grad_inputs(args)

    def fn(*a):
        h, (c, n, m) = mt.chunkwise(*a, return_last_states=True, chunk_size=16, cu_seqlens=cu)
        return h, c, n, m

    assert torch.autograd.gradcheck(fn, xs)


def test_chunkwise_packed_errors():
    args, cu = packed_inputs(40, [2, 3], dtype=torch.float32)
    with pytest.raises(alloy.InvalidArgumentError, match="cu_seqlens"):
        mt.chunkwise(*args, cu_seqlens=cu.to(torch.int64))
    with pytest.raises(alloy.InvalidArgumentError, match="cu_seqlens"):
        mt.chunkwise(*args, cu_seqlens=torch.tensor([0, 2, 4], dtype=torch.int32))  # ends short of the total


def test_fused_gradcheck():
    g = gen(7)
    d = torch.float64
    x = torch.randn(3, 5, 8, generator=g, dtype=d, requires_grad=True)
    w = (torch.rand(8, generator=g, dtype=d) + 0.5).requires_grad_()
    b = torch.randn(8, generator=g, dtype=d, requires_grad=True)
    cw = torch.randn(8, 4, generator=g, dtype=d, requires_grad=True)
    st = torch.randn(3, 3, 8, generator=g, dtype=d, requires_grad=True)
    short = torch.randn(3, 2, 8, generator=g, dtype=d, requires_grad=True)  # fewer steps than the state
    gc = torch.autograd.gradcheck
    assert gc(lambda x: nt.softcap(10 * x, 15.0), (x,))
    assert gc(lambda x, w: nt.rms_norm(x, w), (x, w))
    assert gc(lambda x, w: nt.rms_norm(x, w, head_dim=4), (x, w))
    assert gc(lambda x, w, b: nt.layer_norm(x, w, b, head_dim=2), (x, w, b))
    assert gc(lambda x, w: nt.layer_norm(x, w), (x, w))
    assert gc(lambda x, cw, b: nt.causal_conv1d(x, cw, b), (x, cw, b))
    assert gc(lambda x, cw, b, st: nt.causal_conv1d(x, cw, b, st, return_state=True), (x, cw, b, st))
    assert gc(lambda x, cw, st: nt.causal_conv1d(x, cw, None, st, return_state=True), (short, cw, st))
    assert gc(lambda x, cw: nt.causal_conv1d(x, cw, return_state=True), (x, cw))


# torch.library.opcheck: schemas, fake implementations, autograd registration

def opcheck_cases():
    q, k, v, i, f, c, n, m = mlstm_inputs(8, S=9, DK=4, DV=3, dtype=torch.float32, states=True)
    g = gen(9)
    x = torch.randn(2, 5, 8, generator=g, requires_grad=True)
    w = (torch.rand(8, generator=g) + 0.5).requires_grad_()
    b = torch.randn(8, generator=g, requires_grad=True)
    cw = torch.randn(8, 4, generator=g, requires_grad=True)
    st = torch.randn(2, 3, 8, generator=g, requires_grad=True)
    qs = [t.requires_grad_() for t in (q, k, v, i, f, c, n, m)]
    # two sequences of 4 and 5 tokens packed in q's 9, each with its own states
    packed_states = [t.detach().repeat(2, *([1] * (t.dim() - 1))).requires_grad_() for t in (c, n, m)]
    cu = torch.tensor([0, 4, 9], dtype=torch.int32)
    return [
        ("chunkwise", mt._chunkwise_op, (*qs[:5], None, None, None, 1e-6, 0, None, "auto", "high")),
        ("chunkwise_states", mt._chunkwise_op, (*qs, 1e-6, 16, None, "exact", "high")),
        ("chunkwise_packed", mt._chunkwise_op, (*qs[:5], *packed_states, 1e-6, 16, cu, "auto", "default")),
        ("chunkwise_keep", mt._chunkwise_keep_op, (*qs, 1e-6, 16, None, "high")),
        ("chunkwise_keep_packed", mt._chunkwise_keep_op, (*qs[:5], *packed_states, 1e-6, 16, cu, "high")),
        ("chunkwise_keep_default", mt._chunkwise_keep_op, (*qs, 1e-6, 16, None, "default")),
        ("step", mt._step_op, (*[t.detach()[:, :, 0] for t in (q, k, v)], i.detach()[:, :, :1],
                                f.detach()[:, :, :1], c.detach(), n.detach(), m.detach(), 1e-6)),
        ("softcap", nt._softcap_op, (x, 15.0)),
        ("rms_norm", nt._rms_norm_op, (x, w, 4, 1e-5)),
        ("layer_norm", nt._layer_norm_op, (x, w, b, 4, 1e-5)),
        ("layer_norm_nobias", nt._layer_norm_op, (x, w, None, 0, 1e-5)),
        ("causal_conv1d", nt._conv_op, (x, cw, b, None, False)),
        ("causal_conv1d_state", nt._conv_op, (x, cw, None, st, True)),
    ]


@pytest.mark.skipif(not hasattr(torch.library, "opcheck"), reason="torch.library.opcheck needs torch >= 2.4")
@pytest.mark.parametrize("case", opcheck_cases(), ids=lambda c: c[0])
def test_opcheck(case):
    _, op, args = case
    torch.library.opcheck(op, args)


# torch.compile(fullgraph=True)

def test_compile_fullgraph_matches_eager():
    g = gen(11)
    q, k, v, i, f, c, n, m = mlstm_inputs(12, S=9, DK=4, DV=6, dtype=torch.float32, states=True)
    x = torch.randn(1, 9, 6, generator=g)
    w, b = torch.rand(6, generator=g) + 0.5, torch.randn(6, generator=g)
    cw = torch.randn(6, 4, generator=g)

    def layer(q, k, v, i, f, c, n, m, x, w, b, cw):
        h, (c1, _, _) = mt.chunkwise(q, k, v, nt.softcap(i, 15.0), nt.softcap(f, 15.0), c, n, m,
                                     return_last_states=True)
        y = nt.layer_norm(h.transpose(1, 2).reshape(1, 9, 12), w.repeat(2), b.repeat(2), head_dim=6)
        z = nt.rms_norm(nt.causal_conv1d(x, cw, b), w)
        return (y.sum(-1) * z.sum(-1)).sum() + c1.square().sum()

    # aot_eager: Dynamo and AOTAutograd trace through the fake implementations
    # and the autograd formulas as inductor does, without its C++ compile
    # (test_example_layer_compiles_to_the_eager_result runs inductor)
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    args = [q, k, v, i, f, c, n, m, x, w, b, cw]
    eager_in, comp_in = grad_inputs(args), grad_inputs(args)
    r_eager, r_comp = layer(*eager_in), compiled(*comp_in)
    r_eager.backward()
    r_comp.backward()
    assert torch.allclose(r_comp, r_eager, rtol=1e-6, atol=1e-6)
    for a, b_ in zip(eager_in, comp_in):
        assert torch.allclose(a.grad, b_.grad, rtol=1e-5, atol=1e-6)
    # the step compiles too (inference)
    one = [t[:, :, 0] for t in (q, k, v)] + [i[:, :, :1], f[:, :, :1], c, n, m]
    step = torch.compile(lambda *a: mt.step(*a)[0], fullgraph=True, backend="aot_eager")
    assert torch.equal(step(*one), mt.step(*one)[0])


# errors

def test_errors():
    args = mlstm_inputs(13, dtype=torch.float32, states=True)
    with pytest.raises(alloy.InvalidArgumentError, match="q is torch.int32"):
        mt.chunkwise(args[0].to(torch.int32), *args[1:5])
    with pytest.raises(alloy.InvalidArgumentError, match="float64 on the CPU"):
        nt.softcap(torch.zeros(3, dtype=torch.int64), 1.0)
    with pytest.raises(alloy.InvalidArgumentError, match="alloy takes float32, float16, bfloat16$"):
        mt.step(*[a.double()[:, :, 0] for a in args[:3]], *[a.double()[:, :, :1] for a in args[3:5]],
                *[a.double() for a in args[5:]])
    a64 = [a.double() for a in args]
    with pytest.raises(alloy.InvalidArgumentError, match="c_initial is torch.float32 but q is float64"):
        mt.chunkwise(*a64[:5], args[5], *a64[6:])
    with pytest.raises(ValueError, match="all or none"):
        mt.chunkwise(*args[:6])
    with pytest.raises(alloy.InvalidArgumentError, match="m_initial"):  # alloy's own check, names the argument
        mt.chunkwise(*args[:7], args[7].double())
    with pytest.raises(ValueError, match="backward is 'fast'"):
        mt.chunkwise(*args[:5], backward="fast")
    with pytest.raises(ValueError, match="precision is 'highest'"):
        mt.chunkwise(*args[:5], precision="highest")
    with pytest.raises(alloy.InvalidArgumentError, match="method CHUNKED takes bfloat16 or float32"):
        mt.chunkwise(*[a.half().requires_grad_() for a in args[:5]], backward="chunked").float().sum().backward()


def test_chunkwise_keep():
    """keep=True (the forward keeps its chunk record, alloy::mlstm_chunkwise_keep):
    h, the final states and every gradient equal the recomputing chunked
    backward's bit for bit — bfloat16 and float32, dense with initial states
    and packed — and it compiles with fullgraph=True to the eager result."""
    cu = torch.tensor([0, 7, 7, 30], dtype=torch.int32)
    for dtype, packed in ((torch.bfloat16, False), (torch.float32, False), (torch.bfloat16, True)):
        args = mlstm_inputs(15, B=1 if packed else 2, S=30, DK=8, DV=6, dtype=torch.float32, states=True)
        if packed:
            args = [*args[:5], *(t.repeat(3, *([1] * (t.dim() - 1))) for t in args[5:])]
        extra = dict(chunk_size=16, cu_seqlens=cu if packed else None, return_last_states=True)
        out = {}
        for keep in (False, True):
            xs = [a.to(dtype).clone().requires_grad_() if e < 5 else a.clone().requires_grad_()
                  for e, a in enumerate(args)]
            h, (c, n, m) = mt.chunkwise(*xs, backward="chunked", keep=keep, **extra)
            (h.float().square().sum() + c.sum() + n.sum() + m.sum()).backward()
            out[keep] = [h, c, n, m] + [x.grad for x in xs]
        assert all(torch.equal(a, b) for a, b in zip(out[False], out[True])), (dtype, packed)
    xs = [a.clone() for a in mlstm_inputs(16, S=20, DK=4, DV=6, dtype=torch.float32, states=True)]
    layer = lambda *t: mt.chunkwise(*t, chunk_size=16, keep=True)  # noqa: E731
    assert torch.equal(torch.compile(layer, fullgraph=True)(*xs), layer(*xs))
    with pytest.raises(alloy.InvalidArgumentError, match="kept"):
        mt.chunkwise(*[a.half() for a in xs[:5]], keep=True)


def test_chunkwise_keep_default(monkeypatch):
    """float32 at precision "default" keeps the float16-tile record (its nine
    slots filled; ALLOY_MLSTM_PATH=scaled puts the CPU's forward on those
    tiles, as a GPU's always is): h, the final states and every gradient
    equal the recomputing "chunked_default" backward's bit for bit, dense
    with initial states and packed; "auto" is "chunked_default" there and
    keeps by default; opcheck passes and torch.compile(fullgraph=True) gives
    the eager result."""
    monkeypatch.setenv("ALLOY_MLSTM_PATH", "scaled")
    cu = torch.tensor([0, 7, 7, 30], dtype=torch.int32)
    for packed in (False, True):
        args = mlstm_inputs(18, B=1 if packed else 2, S=30, DK=8, DV=6, dtype=torch.float32, states=True)
        if packed:
            args = [*args[:5], *(t.repeat(3, *([1] * (t.dim() - 1))) for t in args[5:])]
        extra = dict(chunk_size=16, cu_seqlens=cu if packed else None, return_last_states=True, precision="default")
        out = {}
        for keep, backward in ((False, "chunked_default"), (True, "chunked_default"), (None, "auto")):
            xs = [a.clone().requires_grad_() for a in args]
            h, (c, n, m) = mt.chunkwise(*xs, backward=backward, keep=keep, **extra)
            (h.square().sum() + c.sum() + n.sum() + m.sum()).backward()
            out[keep] = [h, c, n, m] + [x.grad for x in xs]
        for keep in (True, None):
            assert all(torch.equal(a, b) for a, b in zip(out[False], out[keep])), (packed, keep)
    xs = [a.clone().requires_grad_() for a in mlstm_inputs(19, S=20, DK=4, DV=6, dtype=torch.float32, states=True)]
    record = mt._chunkwise_keep_op(*xs, 1e-6, 16, None, "default")[4:]
    assert len(record) == 9 and all(r.numel() > 0 for r in record)
    assert record[0].dtype == torch.float16 and record[8].dtype == torch.int32
    if hasattr(torch.library, "opcheck"):
        torch.library.opcheck(mt._chunkwise_keep_op, (*xs, 1e-6, 16, None, "default"))
    layer = lambda *t: mt.chunkwise(*t, chunk_size=16, precision="default")  # noqa: E731
    ys = [x.detach() for x in xs]
    assert torch.equal(torch.compile(layer, fullgraph=True)(*ys), layer(*ys))
    with pytest.raises(alloy.InvalidArgumentError, match="CHUNKED_DEFAULT takes float32"):
        mt.chunkwise(*[a.bfloat16().requires_grad_() for a in ys[:5]],
                     backward="chunked_default").float().sum().backward()


def test_chunkwise_keeps_by_default(monkeypatch):
    """keep=None keeps the chunk record exactly where a gradient will be taken
    and the backward is chunk-parallel anyway (bfloat16 under "auto", float32
    under "chunked"); not without grad, not for float32's exact default."""
    calls = []
    kept_op = mt._chunkwise_keep_op
    monkeypatch.setattr(mt, "_chunkwise_keep_op", lambda *a: calls.append(a[0].dtype) or kept_op(*a))
    args = mlstm_inputs(17, S=20, DK=4, DV=6, dtype=torch.float32)
    cases = ((torch.bfloat16, "auto", True, True), (torch.bfloat16, "exact", True, False),
             (torch.bfloat16, "auto", False, False), (torch.float32, "auto", True, False),
             (torch.float32, "chunked", True, True), (torch.float32, "chunked", False, False),
             # precision "default" on the CPU: a float32 record (exact products), which "chunked" reads
             (torch.float32, "chunked:default", True, True), (torch.float32, "auto:default", True, False))
    for dtype, backward, grad, kept in cases:
        calls.clear()
        xs = [a.to(dtype).clone().requires_grad_(grad) for a in args]
        backward, precision = (backward + ":high").split(":")[:2]
        h = mt.chunkwise(*xs, chunk_size=16, backward=backward, precision=precision)
        assert calls == ([dtype] if kept else []), (dtype, backward, grad)
        if grad:
            h.float().sum().backward()
            assert all(x.grad is not None for x in xs)
    with torch.no_grad():
        calls.clear()
        mt.chunkwise(*[a.bfloat16().requires_grad_() for a in args], chunk_size=16)
        assert calls == []


def test_backward_methods():
    """backward="exact" and "chunked" reach alloy's two backward paths: on
    bfloat16, "auto" is "chunked" bit for bit and "exact" agrees to bfloat16's
    rounding; on float32 "chunked" agrees with the exact default."""
    for dtype, tol, floor in ((torch.bfloat16, 5e-2, 1e-1), (torch.float32, 5e-4, 1e-2)):
        args = mlstm_inputs(14, S=40, DK=8, DV=6, dtype=torch.float32)
        grads = {}
        for method in ("auto", "exact", "chunked"):
            xs = [a.to(dtype).clone().requires_grad_() for a in args]  # fresh leaves (float32: .to is a no-op)
            mt.chunkwise(*xs, chunk_size=16, backward=method).float().square().sum().backward()
            grads[method] = [x.grad.double() for x in xs]
        same = "chunked" if dtype == torch.bfloat16 else "exact"
        assert all(torch.equal(a, b) for a, b in zip(grads["auto"], grads[same]))
        top = max(float(g.abs().max()) for g in grads["exact"])
        for a, b in zip(grads["exact"], grads["chunked"]):
            assert float((a - b).abs().max()) <= tol * max(float(a.abs().max()), floor * top), dtype


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device for torch")
def test_cuda_forward_and_backward():
    from conftest import alloy_cuda_reason
    reason = alloy_cuda_reason()
    if reason:
        pytest.skip(reason)
    cpu = mlstm_inputs(14, B=2, S=37, DK=16, DV=8, dtype=torch.float32, states=True)
    gpu = grad_inputs([a.cuda() for a in cpu])
    h, (c, _, _) = mt.chunkwise(*gpu, return_last_states=True)
    assert h.device == gpu[0].device
    want = alloy.mlstm.chunkwise(*[a.detach() for a in gpu])
    assert torch.equal(h, torch.from_dlpack(want))
    (h.square().sum() + c.sum()).backward()
    cpu_in = grad_inputs(cpu)
    hc, (cc, _, _) = mt.chunkwise(*cpu_in, return_last_states=True)
    (hc.square().sum() + cc.sum()).backward()
    for a, b in zip(gpu, cpu_in):
        assert torch.allclose(a.grad.cpu(), b.grad, rtol=1e-3, atol=1e-3 * float(b.grad.abs().max()))
    x = torch.randn(4, 7, 64, device="cuda", requires_grad=True)
    w = torch.ones(64, device="cuda", requires_grad=True)
    nt.rms_norm(nt.softcap(x, 15.0), w, head_dim=16).sum().backward()
    assert x.grad.device == x.device and np.isfinite(x.grad.cpu().numpy()).all()


# the training example (python/examples/xlstm_train.py)

def example():
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "xlstm_train.py"
    spec = importlib.util.spec_from_file_location("xlstm_train", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_example_layer_compiles_to_the_eager_result():
    X = example()
    torch.manual_seed(0)
    layer = X.XLSTMLayer(16, 2)
    x = torch.randn(2, 13, 16, generator=gen(15))
    compiled = torch.compile(layer, fullgraph=True)
    y_eager = layer(x, X.AlloyOps)
    y_eager.square().sum().backward()
    eager_grads = [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    y_comp = compiled(x, X.AlloyOps)
    y_comp.square().sum().backward()
    assert torch.allclose(y_comp, y_eager, rtol=1e-5, atol=1e-5)
    for p, g in zip(layer.parameters(), eager_grads):
        assert torch.allclose(p.grad, g, rtol=1e-4, atol=1e-5)
    # and the layer with alloy's ops is the layer with the PyTorch reference's
    y_ref = layer(x, X.TorchOps)
    assert torch.allclose(y_eager, y_ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("precision", ["high", "default"])
def test_example_trains_a_few_steps(capsys, monkeypatch, precision):
    # (precision default: ALLOY_MLSTM_PATH=scaled puts the CPU's cell on the float16 tiles a GPU's runs on)
    monkeypatch.setenv("ALLOY_MLSTM_PATH", "scaled")
    X = example()
    rc = X.main(["--steps", "6", "--batch", "2", "--seq", "17", "--d", "16", "--heads", "2", "--every", "5",
                 "--precision", precision])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "agree" in out
    assert ("precision default" in out) == (precision == "default")
