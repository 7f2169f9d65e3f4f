"""alloy.mlstm.torch — the mLSTM cell as PyTorch operators (``torch.library``
custom ops in the ``alloy`` namespace) with autograd and fake (meta)
implementations, so they run in eager mode, under ``torch.autograd.gradcheck``
and inside ``torch.compile(fullgraph=True)`` without graph breaks::

    import alloy.mlstm.torch as mt
    h = mt.chunkwise(q, k, v, i, f)                                  # differentiable
    h, (c, n, m) = mt.chunkwise(q, k, v, i, f, c0, n0, m0, return_last_states=True)
    h, (c, n, m) = mt.step(q, k, v, i, f, c, n, m)                   # generation, no backward

The arguments, shapes and dtypes are alloy.mlstm's (docs/mlstm.md); results
are torch tensors on the inputs' device. The backward of chunkwise is alloy's
chunkwise_backward (``chunkwise(..., backward="auto"|"exact"|"chunked"|
"chunked_default")`` picks its method): the forward saves only its inputs
(the states are recomputed) unless it keeps its chunk record (``keep``), and
gradients reach the initial states when they are given.
float64 (CPU tensors only) is for gradient checks: alloy has no float64
forward kernel, so that forward is a float64 loop of the recurrence
(_float64.py), and the backward is alloy's float64 kernel.

Operators: ``torch.ops.alloy.mlstm_chunkwise``,
``torch.ops.alloy.mlstm_chunkwise_backward``, ``torch.ops.alloy.mlstm_step``.
"""
import os
from typing import List, Optional, Tuple

import torch
from torch import Tensor

import alloy.mlstm as _mlstm
from .. import _torch as _bridge
from .._alloy import InvalidArgumentError
from . import _float64

__all__ = ["chunkwise", "step"]


def _state_dtype(q):
    return torch.float64 if q.dtype == torch.float64 else torch.float32


def _sequences(q, cu_seqlens):
    """How many state rows: B, or the packed sequences of cu_seqlens."""
    return q.shape[0] if cu_seqlens is None else cu_seqlens.shape[0] - 1


def _float64_packed(ins, cu, eps):
    """The float64 loop over each packed sequence alone, states stacked."""
    q, k, v, i, f, c0, n0, m0 = ins
    offs = cu.tolist()
    parts = []
    for s in range(len(offs) - 1):
        a, b = offs[s], offs[s + 1]
        st = (c0[s:s + 1], n0[s:s + 1], m0[s:s + 1]) if c0 is not None else (None, None, None)
        parts.append(_float64.chunkwise(q[:, :, a:b], k[:, :, a:b], v[:, :, a:b], i[:, :, a:b], f[:, :, a:b], *st,
                                        eps))
    if not parts:
        NH, DK, DV = q.shape[1], q.shape[3], v.shape[3]
        return q.new_zeros(1, NH, 0, DV), q.new_zeros(0, NH, DK, DV), q.new_zeros(0, NH, DK), q.new_zeros(0, NH, 1)
    h = torch.cat([p[0] for p in parts], dim=2)
    return (h, *(torch.cat([p[e] for p in parts], dim=0) for e in (1, 2, 3)))


@torch.library.custom_op("alloy::mlstm_chunkwise", mutates_args=())
def _chunkwise_op(q: Tensor, k: Tensor, v: Tensor, i: Tensor, f: Tensor, c_initial: Optional[Tensor],
                  n_initial: Optional[Tensor], m_initial: Optional[Tensor], eps: float, chunk_size: int,
                  cu_seqlens: Optional[Tensor], backward: str,
                  precision: str) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    # backward: the method of the backward (_chunkwise_grad), not used here
    ins = _bridge.operands("mlstm.chunkwise", q=q, k=k, v=v, i=i, f=f, c_initial=c_initial, n_initial=n_initial,
                           m_initial=m_initial)
    cu = _bridge.offsets("mlstm.chunkwise", q, cu_seqlens)
    if q.dtype == torch.float64:
        names = ("k", "v", "i", "f", "c_initial", "n_initial", "m_initial")
        for name, x in zip(names, ins[1:]):
            if x is not None and x.dtype != torch.float64:  # alloy's backward checks the same
                raise InvalidArgumentError(f"mlstm.chunkwise: {name} is {x.dtype} but q is float64; "
                                           "float64 inputs take float64 operands and states")
        return _float64.chunkwise(*ins, eps) if cu is None else _float64_packed(ins, cu, eps)
    h, states = _mlstm.chunkwise(*ins, return_last_states=True, eps=eps, chunk_size=chunk_size or None,
                                 cu_seqlens=cu, stream=_bridge.stream(q), precision=precision)
    return tuple(_bridge.tensor(x) for x in (h, *states))


@_chunkwise_op.register_fake
def _(q, k, v, i, f, c_initial, n_initial, m_initial, eps, chunk_size, cu_seqlens, backward, precision):
    B, NH, S, DK = q.shape
    DV = v.shape[-1]
    N = _sequences(q, cu_seqlens)
    sd = _state_dtype(q)
    return (q.new_empty(B, NH, S, DV), q.new_empty(N, NH, DK, DV, dtype=sd), q.new_empty(N, NH, DK, dtype=sd),
            q.new_empty(N, NH, 1, dtype=sd))


@torch.library.custom_op("alloy::mlstm_chunkwise_backward", mutates_args=())
def _chunkwise_backward_op(q: Tensor, k: Tensor, v: Tensor, i: Tensor, f: Tensor, c_initial: Optional[Tensor],
                           n_initial: Optional[Tensor], m_initial: Optional[Tensor], dh: Tensor,
                           dc_final: Optional[Tensor], dn_final: Optional[Tensor], dm_final: Optional[Tensor],
                           eps: float, chunk_size: int, cu_seqlens: Optional[Tensor], method: str) -> List[Tensor]:
    """[dq, dk, dv, di, df] and, with initial states, [dc, dn, dm] of them."""
    ins = _bridge.operands("mlstm.chunkwise_backward", q=q, k=k, v=v, i=i, f=f, c_initial=c_initial,
                           n_initial=n_initial, m_initial=m_initial, dh=dh, dc_final=dc_final, dn_final=dn_final,
                           dm_final=dm_final)
    names = ("q", "k", "v", "i", "f", "c_initial", "n_initial", "m_initial", "dh", "dc_final", "dn_final",
             "dm_final")
    cu = _bridge.offsets("mlstm.chunkwise_backward", q, cu_seqlens)
    dq, dk, dv, di, df, states = _mlstm.chunkwise_backward(**dict(zip(names, ins)), eps=eps,
                                                           chunk_size=chunk_size or None, cu_seqlens=cu,
                                                           method=method, stream=_bridge.stream(q))
    return [_bridge.tensor(x) for x in (dq, dk, dv, di, df, *(states or ()))]


def _fake_grads(q, k, v, i, f, c_initial, n_initial, m_initial):
    """The backward operators' fake results: the inputs' gradients (and the initial states' when given)."""
    grads = [torch.empty_like(x, memory_format=torch.contiguous_format) for x in (q, k, v, i, f)]
    if c_initial is not None:
        grads += [torch.empty_like(x, memory_format=torch.contiguous_format)
                  for x in (c_initial, n_initial, m_initial)]
    return grads


@_chunkwise_backward_op.register_fake
def _(q, k, v, i, f, c_initial, n_initial, m_initial, dh, dc_final, dn_final, dm_final, eps, chunk_size,
      cu_seqlens, method):
    return _fake_grads(q, k, v, i, f, c_initial, n_initial, m_initial)


def _chunkwise_setup(ctx, inputs, output):
    q, k, v, i, f, c0, n0, m0, eps, chunk_size, cu, backward, _precision = inputs
    ctx.save_for_backward(q, k, v, i, f, c0, n0, m0, cu)  # nothing of the output: the backward recomputes
    ctx.eps, ctx.chunk_size, ctx.method = eps, chunk_size, backward


def _final_cotangents(q, v, cu, dc, dn, dm):
    """The final states' cotangents as alloy takes them: all three or None."""
    finals = (dc, dn, dm)  # PyTorch materialises unused ones as zeros; None is handled all the same
    if all(g is None for g in finals):
        return None, None, None
    N, NH = _sequences(q, cu), q.shape[1]  # alloy takes the three together
    shapes = ((N, NH, q.shape[3], v.shape[3]), (N, NH, q.shape[3]), (N, NH, 1))
    return tuple(q.new_zeros(s, dtype=_state_dtype(q)) if g is None else g for g, s in zip(finals, shapes))


def _chunkwise_grad(ctx, dh, dc, dn, dm):
    q, k, v, i, f, c0, n0, m0, cu = ctx.saved_tensors
    finals = _final_cotangents(q, v, cu, dc, dn, dm)
    if dh is None:
        dh = torch.zeros_like(v)
    g = _chunkwise_backward_op(q, k, v, i, f, c0, n0, m0, dh, *finals, ctx.eps, ctx.chunk_size, cu, ctx.method)
    states = (g[5], g[6], g[7]) if c0 is not None else (None, None, None)
    return g[0], g[1], g[2], g[3], g[4], *states, None, None, None, None, None


_chunkwise_op.register_autograd(_chunkwise_grad, setup_context=_chunkwise_setup)


# ---- training without the backward's recomputation: the forward keeps its chunk record ----


def _float16_record(q, precision):
    """Whether alloy_mlstm_chunkwise_keep keeps the float16-tile record (kept[4..8] filled): float32 at
    precision DEFAULT on a GPU (on the CPU only under ALLOY_MLSTM_PATH=scaled, the tests' switch)."""
    if q.dtype != torch.float32 or precision != "default":
        return False
    path = os.environ.get("ALLOY_MLSTM_PATH")
    return path == "scaled" if q.device.type == "cpu" else path != "fused"


def _record_fakes(q, k, v, chunk_size, cu_seqlens, precision):
    """The chunk record's nine arrays as empty tensors (alloy_mlstm_chunkwise_keep's layout: one slot per
    chunk of min(chunk, 64) tokens, dense ceil(S / L) N, packed S / L + N, at least one; slots 4..8 empty
    unless the float16-tile record fills them)."""
    B, NH, S, DK = q.shape
    DV, N, L = v.shape[3], _sequences(q, cu_seqlens), min(chunk_size or 64, 64)
    W = max(S // L + N if cu_seqlens is not None else -(-S // L) * N, 1)
    f32, f16 = torch.float32, torch.float16
    if not _float16_record(q, precision):
        return [q.new_empty(W * NH * DK * DV), q.new_empty(W * NH * DK, dtype=f32), q.new_empty(W * NH, dtype=f32),
                q.new_empty(W * NH * (L + 4), dtype=f32)] + [q.new_empty(0, dtype=f32) for _ in range(5)]
    return [q.new_empty(W * NH * DK * DV, dtype=f16), q.new_empty(W * NH * DK, dtype=f32),
            q.new_empty(W * NH, dtype=f32), q.new_empty(W * NH * (2 * L + 4), dtype=f32),
            q.new_empty(W * NH * (-(-DK // 64)) * DV, dtype=f32), q.new_empty(q.shape, dtype=f16),
            q.new_empty(k.shape, dtype=f16), q.new_empty(v.shape, dtype=f16),
            q.new_empty(max(3 * B * NH * S, 1), dtype=torch.int32)]


@torch.library.custom_op("alloy::mlstm_chunkwise_keep", mutates_args=())
def _chunkwise_keep_op(q: Tensor, k: Tensor, v: Tensor, i: Tensor, f: Tensor, c_initial: Optional[Tensor],
                       n_initial: Optional[Tensor], m_initial: Optional[Tensor], eps: float, chunk_size: int,
                       cu_seqlens: Optional[Tensor], precision: str) -> Tuple[(Tensor,) * 13]:
    """h, c, n, m and the chunk record's nine arrays (its empty slots as empty tensors)."""
    ins = _bridge.operands("mlstm.chunkwise", float64=False, q=q, k=k, v=v, i=i, f=f, c_initial=c_initial,
                           n_initial=n_initial, m_initial=m_initial)
    cu = _bridge.offsets("mlstm.chunkwise", q, cu_seqlens)
    h, states, record = _mlstm.chunkwise(*ins, eps=eps, chunk_size=chunk_size or None, cu_seqlens=cu,
                                         stream=_bridge.stream(q), precision=precision, keep=True)
    kept = [q.new_empty(0, dtype=torch.float32) if x is None else _bridge.tensor(x) for x in record.arrays]
    return tuple([_bridge.tensor(x) for x in (h, *states)] + kept)


@_chunkwise_keep_op.register_fake
def _(q, k, v, i, f, c_initial, n_initial, m_initial, eps, chunk_size, cu_seqlens, precision):
    B, NH, S, DK = q.shape
    DV, N = v.shape[-1], _sequences(q, cu_seqlens)
    f32 = torch.float32
    return tuple([q.new_empty(B, NH, S, DV), q.new_empty(N, NH, DK, DV, dtype=f32), q.new_empty(N, NH, DK, dtype=f32),
                  q.new_empty(N, NH, 1, dtype=f32)] + _record_fakes(q, k, v, chunk_size, cu_seqlens, precision))


@torch.library.custom_op("alloy::mlstm_chunkwise_backward_kept", mutates_args=())
def _chunkwise_backward_kept_op(q: Tensor, k: Tensor, v: Tensor, i: Tensor, f: Tensor, c_initial: Optional[Tensor],
                                n_initial: Optional[Tensor], m_initial: Optional[Tensor], h: Tensor, c_last: Tensor,
                                n_last: Tensor, record: List[Tensor], dh: Tensor, dc_final: Optional[Tensor],
                                dn_final: Optional[Tensor], dm_final: Optional[Tensor], eps: float, chunk_size: int,
                                cu_seqlens: Optional[Tensor]) -> List[Tensor]:
    """As mlstm_chunkwise_backward (method chunked, or chunked_default for a float16-tile record), from the
    forward's chunk record."""
    ins = _bridge.operands("mlstm.chunkwise_backward", float64=False, q=q, k=k, v=v, i=i, f=f, c_initial=c_initial,
                           n_initial=n_initial, m_initial=m_initial, dh=dh, dc_final=dc_final, dn_final=dn_final,
                           dm_final=dm_final, h=h, c_last=c_last, n_last=n_last)
    names = ("q", "k", "v", "i", "f", "c_initial", "n_initial", "m_initial", "dh", "dc_final", "dn_final",
             "dm_final")
    cu = _bridge.offsets("mlstm.chunkwise_backward", q, cu_seqlens)
    # the record as the forward made it (alloy checks each array); empty slots 4..8 are absent ones
    full = len(record) == 9 and record[4].numel() > 0  # the float16-tile record's tile factors are never empty
    arrays = [x.detach() if e < 4 or full else None for e, x in enumerate(record)]
    rec = _mlstm.ChunkRecord(ins[12], ins[13], ins[14], arrays)
    dq, dk, dv, di, df, states = _mlstm.chunkwise_backward(**dict(zip(names, ins[:12])), eps=eps,
                                                           chunk_size=chunk_size or None, cu_seqlens=cu,
                                                           stream=_bridge.stream(q), kept=rec)
    return [_bridge.tensor(x) for x in (dq, dk, dv, di, df, *(states or ()))]


@_chunkwise_backward_kept_op.register_fake
def _(q, k, v, i, f, c_initial, n_initial, m_initial, h, c_last, n_last, record, dh, dc_final, dn_final,
      dm_final, eps, chunk_size, cu_seqlens):
    return _fake_grads(q, k, v, i, f, c_initial, n_initial, m_initial)


def _chunkwise_keep_setup(ctx, inputs, output):
    q, k, v, i, f, c0, n0, m0, eps, chunk_size, cu, _precision = inputs
    h, c, n, _m, *record = output
    ctx.save_for_backward(q, k, v, i, f, c0, n0, m0, cu, h, c, n, *record)
    ctx.eps, ctx.chunk_size = eps, chunk_size


def _chunkwise_keep_grad(ctx, dh, dc, dn, dm, *_record_grads):
    q, k, v, i, f, c0, n0, m0, cu, h, c, n, *record = ctx.saved_tensors
    finals = _final_cotangents(q, v, cu, dc, dn, dm)
    if dh is None:
        dh = torch.zeros_like(v)
    g = _chunkwise_backward_kept_op(q, k, v, i, f, c0, n0, m0, h, c, n, record, dh, *finals, ctx.eps,
                                    ctx.chunk_size, cu)
    states = (g[5], g[6], g[7]) if c0 is not None else (None, None, None)
    return g[0], g[1], g[2], g[3], g[4], *states, None, None, None, None


_chunkwise_keep_op.register_autograd(_chunkwise_keep_grad, setup_context=_chunkwise_keep_setup)


@torch.library.custom_op("alloy::mlstm_step", mutates_args=())
def _step_op(q: Tensor, k: Tensor, v: Tensor, i: Tensor, f: Tensor, c: Tensor, n: Tensor, m: Tensor,
             eps: float) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    ins = _bridge.operands("mlstm.step", float64=False, q=q, k=k, v=v, i=i, f=f, c=c, n=n, m=m)
    h, states = _mlstm.step(*ins, eps=eps, stream=_bridge.stream(q))
    return tuple(_bridge.tensor(x) for x in (h, *states))


@_step_op.register_fake
def _(q, k, v, i, f, c, n, m, eps):
    return (q.new_empty(*q.shape[:2], v.shape[-1]), torch.empty_like(c, memory_format=torch.contiguous_format),
            torch.empty_like(n, memory_format=torch.contiguous_format),
            torch.empty_like(m, memory_format=torch.contiguous_format))


def _method(q, backward, precision):
    """backward="auto" resolved: chunked for bfloat16, chunked_default for float32 at precision "default"
    (the forward's own 11-bit tiles), exact otherwise (alloy's AUTO)."""
    if backward != "auto":
        return backward
    if q.dtype == torch.bfloat16:
        return "chunked"
    return "chunked_default" if q.dtype == torch.float32 and precision == "default" else "auto"


def _keep_by_default(q, inputs, method, precision):
    """keep=None: whether a gradient will be taken and the backward is the one a kept record gives anyway
    (chunked from a bfloat16 or float32 record, chunked_default from the float16-tile record)."""
    if not torch.is_grad_enabled() or not any(t is not None and t.requires_grad for t in inputs):
        return False
    if q.dtype == torch.bfloat16:
        return method == "chunked"
    if q.dtype != torch.float32 or q.shape[-1] > 256:
        return False
    return method == ("chunked_default" if _float16_record(q, precision) else "chunked")


def chunkwise(q, k, v, i, f, c_initial=None, n_initial=None, m_initial=None, return_last_states=False, eps=1e-6,
              chunk_size=None, cu_seqlens=None, backward="auto", precision="high", keep=None):
    """alloy.mlstm.chunkwise on torch tensors, differentiable in q, k, v, i, f
    and the initial states: h, or ``(h, (c, n, m))`` with
    ``return_last_states=True`` (the final states are differentiable too).
    c_initial, n_initial, m_initial: all three or none (zeros); float32
    (float64 with float64 inputs). chunk_size: a power of two from 16 to
    1024 (None: 64). cu_seqlens (int32 offsets on q's device): a packed
    batch, q ``(1, NH, total, DHQK)``, states ``(N, NH, ...)`` per sequence,
    as alloy.mlstm.chunkwise. precision: the forward's float32 products, as
    alloy.mlstm.chunkwise (``"high"``, or ``"default"``: TF32's precision on
    float16 tiles). backward: how the gradient is computed,
    alloy.mlstm.chunkwise_backward's ``method`` — ``"exact"``, ``"chunked"``,
    ``"chunked_default"`` (float32: on the float16 tiles of precision
    "default"), or ``"auto"``: chunked for bfloat16, chunked_default for
    float32 at precision "default", exact otherwise.
    keep=True: the forward keeps its chunk record (every chunk's starting
    state: memory per chunk of min(chunk_size, 64) tokens and head, DHQK x
    DHHV of q's dtype, or float16 for float32 at precision "default" on a
    GPU, which also keeps q, k and v as float16 rows) and the backward —
    chunk-parallel, whatever ``backward`` says: chunked_default from the
    float16-tile record, chunked from others — reads it instead of computing
    the states again (the operator ``alloy::mlstm_chunkwise_keep``);
    bfloat16, and float32 with DHQK up to 256. keep=None (the default): kept
    where a gradient will be taken (grad mode on, an input requiring it) and
    the backward asked for is the record's anyway (bfloat16 with "auto" or
    "chunked"; float32 up to DHQK 256 with "chunked" at precision "high", or
    with "auto" or "chunked_default" at "default" on a GPU) — the gradients
    are the same bit for bit, the backward skips the states' recomputation
    (about 1.6 ms of 11.7 in bfloat16 at xLSTM 7B's heads, B 8, S 8192 on an
    H100) for the record's memory (2.1 GB there in bfloat16, 3.3 GB in float32
    at "default"); keep=False recomputes."""
    given = [x is not None for x in (c_initial, n_initial, m_initial)]
    if any(given) and not all(given):
        raise ValueError("mlstm.torch.chunkwise: c_initial, n_initial and m_initial go together (all or none)")
    if backward not in ("auto", "exact", "chunked", "chunked_default"):
        raise ValueError(f"mlstm.torch.chunkwise: backward is {backward!r}; it must be 'auto', 'exact', 'chunked' "
                         "or 'chunked_default'")
    if precision not in ("high", "default"):
        raise ValueError(f"mlstm.torch.chunkwise: precision is {precision!r}; it must be 'high' or 'default'")
    backward = _method(q, backward, precision)
    if keep is None:
        keep = _keep_by_default(q, (q, k, v, i, f, c_initial, n_initial, m_initial), backward, precision)
    if keep:
        h, c, n, m, *_record = _chunkwise_keep_op(q, k, v, i, f, c_initial, n_initial, m_initial, float(eps),
                                                  0 if chunk_size is None else int(chunk_size), cu_seqlens, precision)
        return (h, (c, n, m)) if return_last_states else h
    h, c, n, m = _chunkwise_op(q, k, v, i, f, c_initial, n_initial, m_initial, float(eps),
                               0 if chunk_size is None else int(chunk_size), cu_seqlens, backward, precision)
    return (h, (c, n, m)) if return_last_states else h


def step(q, k, v, i, f, c, n, m, eps=1e-6):
    """alloy.mlstm.step on torch tensors: ``(h, (c, n, m))``, new tensors
    (the given states are not changed). No backward (generation)."""
    h, c1, n1, m1 = _step_op(q, k, v, i, f, c, n, m, float(eps))
    return h, (c1, n1, m1)
