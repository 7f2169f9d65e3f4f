"""alloy.nn.torch — the fused ops of the xLSTM block as PyTorch operators
(``torch.library`` custom ops in the ``alloy`` namespace) whose backward is
alloy.nn's backward kernel, with fake (meta) implementations for
``torch.compile(fullgraph=True)``::

    import alloy.nn.torch as nt
    y = nt.softcap(x, 15.0)
    y = nt.rms_norm(x, weight, head_dim=64)           # per head over the last dimension
    y = nt.layer_norm(x, weight, bias, head_dim=64)
    y = nt.causal_conv1d(x, w, bias)                  # x (B, S, C), w (C, K)

The arguments and dtypes are alloy.nn's (docs/nn.md): every tensor of one
call has one dtype (float32, float16, bfloat16; float64 on the CPU); results
are torch tensors on the inputs' device. Saved for backward: the inputs (x;
x and weight for the norms; x, w and the state for the convolution) and, for
the norms, each group's statistics (mean and rstd, float32: 8 bytes a group),
which their backward reads instead of recomputing (as PyTorch's own norms).

Operators: ``torch.ops.alloy.softcap``, ``rms_norm``, ``layer_norm``,
``causal_conv1d`` and a ``*_backward`` operator for each; the norm operators
return ``(y, stats)``, stats (R, G, 2) not differentiable.
"""
import math
from typing import List, Optional, Tuple

import torch
from torch import Tensor

import alloy.nn as _nn
from .. import _torch as _bridge

__all__ = ["softcap", "rms_norm", "layer_norm", "causal_conv1d"]


def _new_like(x):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


# soft-cap

@torch.library.custom_op("alloy::softcap", mutates_args=())
def _softcap_op(x: Tensor, cap: float) -> Tensor:
    (xc,) = _bridge.operands("nn.softcap", x=x)
    return _bridge.tensor(_nn.softcap(xc, cap, stream=_bridge.stream(x)))


@torch.library.custom_op("alloy::softcap_backward", mutates_args=())
def _softcap_backward_op(x: Tensor, dy: Tensor, cap: float) -> Tensor:
    xc, dyc = _bridge.operands("nn.softcap_backward", x=x, dy=dy)
    return _bridge.tensor(_nn.softcap_backward(xc, dyc, cap, stream=_bridge.stream(x)))


_softcap_op.register_fake(lambda x, cap: _new_like(x))
_softcap_backward_op.register_fake(lambda x, dy, cap: _new_like(x))


def _softcap_setup(ctx, inputs, output):
    x, cap = inputs
    ctx.save_for_backward(x)
    ctx.cap = cap


def _softcap_grad(ctx, dy):
    (x,) = ctx.saved_tensors
    return _softcap_backward_op(x, dy, ctx.cap), None


_softcap_op.register_autograd(_softcap_grad, setup_context=_softcap_setup)


# RMSNorm and LayerNorm (per head: groups of head_dim elements of the last dimension)

@torch.library.custom_op("alloy::rms_norm", mutates_args=())
def _rms_norm_op(x: Tensor, weight: Tensor, head_dim: int, eps: float) -> Tuple[Tensor, Tensor]:
    """(y, stats): stats (R, G, 2) each group's (0, rstd), for the backward."""
    xc, wc = _bridge.operands("nn.rms_norm", x=x, weight=weight)
    y, st = _nn.rms_norm(xc, wc, head_dim, eps, stream=_bridge.stream(x), return_stats=True)
    return _bridge.tensor(y), _bridge.tensor(st)


@torch.library.custom_op("alloy::layer_norm", mutates_args=())
def _layer_norm_op(x: Tensor, weight: Tensor, bias: Optional[Tensor], head_dim: int,
                   eps: float) -> Tuple[Tensor, Tensor]:
    """(y, stats): stats (R, G, 2) each group's (mean, rstd), for the backward."""
    xc, wc, bc = _bridge.operands("nn.layer_norm", x=x, weight=weight, bias=bias)
    y, st = _nn.layer_norm(xc, wc, bc, head_dim, eps, stream=_bridge.stream(x), return_stats=True)
    return _bridge.tensor(y), _bridge.tensor(st)


@torch.library.custom_op("alloy::rms_norm_backward", mutates_args=())
def _rms_norm_backward_op(x: Tensor, weight: Tensor, dy: Tensor, stats: Tensor,
                          head_dim: int) -> Tuple[Tensor, Tensor]:
    xc, wc, dyc, sc = _bridge.operands("nn.rms_norm_backward", x=x, weight=weight, dy=dy, stats=stats)
    dx, dw = _nn.rms_norm_backward(xc, wc, dyc, head_dim, stats=sc, stream=_bridge.stream(x))
    return _bridge.tensor(dx), _bridge.tensor(dw)


@torch.library.custom_op("alloy::layer_norm_backward", mutates_args=())
def _layer_norm_backward_op(x: Tensor, weight: Tensor, dy: Tensor, stats: Tensor,
                            head_dim: int) -> Tuple[Tensor, Tensor, Tensor]:
    xc, wc, dyc, sc = _bridge.operands("nn.layer_norm_backward", x=x, weight=weight, dy=dy, stats=stats)
    dx, dw, db = _nn.layer_norm_backward(xc, wc, dyc, head_dim, stats=sc, stream=_bridge.stream(x))
    return _bridge.tensor(dx), _bridge.tensor(dw), _bridge.tensor(db)


def _stats_like(x, head_dim):
    """The statistics' (R, G, 2) float32 (float64 for float64 x) tensor."""
    D = x.shape[-1]
    G = (D // head_dim if head_dim else 1) if D > 0 else 0
    dt = torch.float64 if x.dtype == torch.float64 else torch.float32
    return x.new_empty((math.prod(x.shape[:-1]), G, 2), dtype=dt)


_rms_norm_op.register_fake(lambda x, weight, head_dim, eps: (_new_like(x), _stats_like(x, head_dim)))
_layer_norm_op.register_fake(lambda x, weight, bias, head_dim, eps: (_new_like(x), _stats_like(x, head_dim)))
_rms_norm_backward_op.register_fake(lambda x, weight, dy, stats, head_dim: (_new_like(x), _new_like(weight)))
_layer_norm_backward_op.register_fake(
    lambda x, weight, dy, stats, head_dim: (_new_like(x), _new_like(weight), _new_like(weight)))


def _norm_setup(ctx, inputs, output):
    x, weight, *rest = inputs
    ctx.save_for_backward(x, weight, output[1])
    ctx.mark_non_differentiable(output[1])
    ctx.head_dim = rest[-2]
    ctx.has_bias = len(rest) == 3 and rest[0] is not None


def _rms_norm_grad(ctx, dy, dstats):
    x, weight, stats = ctx.saved_tensors
    dx, dw = _rms_norm_backward_op(x, weight, dy, stats, ctx.head_dim)
    return dx, dw, None, None


def _layer_norm_grad(ctx, dy, dstats):
    x, weight, stats = ctx.saved_tensors
    dx, dw, db = _layer_norm_backward_op(x, weight, dy, stats, ctx.head_dim)
    return dx, dw, db if ctx.has_bias else None, None, None


_rms_norm_op.register_autograd(_rms_norm_grad, setup_context=_norm_setup)
_layer_norm_op.register_autograd(_layer_norm_grad, setup_context=_norm_setup)


# causal depthwise convolution over time

@torch.library.custom_op("alloy::causal_conv1d", mutates_args=())
def _conv_op(x: Tensor, w: Tensor, bias: Optional[Tensor], state: Optional[Tensor],
             return_state: bool) -> Tuple[Tensor, Tensor]:
    """(y, the next state (B, K-1, C)); without return_state the second
    result is an empty tensor (alloy then skips the state's launch)."""
    xc, wc, bc, sc = _bridge.operands("nn.causal_conv1d", x=x, w=w, bias=bias, state=state)
    if not return_state:
        return _bridge.tensor(_nn.causal_conv1d(xc, wc, bc, sc, stream=_bridge.stream(x))), x.new_empty(0)
    y, st = _nn.causal_conv1d(xc, wc, bc, sc, return_state=True, stream=_bridge.stream(x))
    return _bridge.tensor(y), _bridge.tensor(st)


@_conv_op.register_fake
def _(x, w, bias, state, return_state):
    B, _, C = x.shape
    return _new_like(x), x.new_empty(B, w.shape[1] - 1, C) if return_state else x.new_empty(0)


@torch.library.custom_op("alloy::causal_conv1d_backward", mutates_args=())
def _conv_backward_op(x: Tensor, w: Tensor, dy: Tensor, state: Optional[Tensor]) -> List[Tensor]:
    """[dx, dw, db] and, with a state, dstate."""
    xc, wc, dyc, sc = _bridge.operands("nn.causal_conv1d_backward", x=x, w=w, dy=dy, state=state)
    dx, dw, db, dstate = _nn.causal_conv1d_backward(xc, wc, dyc, sc, stream=_bridge.stream(x))
    return [_bridge.tensor(g) for g in (dx, dw, db) + (() if dstate is None else (dstate,))]


@_conv_backward_op.register_fake
def _(x, w, dy, state):
    grads = [_new_like(x), _new_like(w), w.new_empty(w.shape[0])]
    return grads + ([] if state is None else [_new_like(state)])


def _conv_setup(ctx, inputs, output):
    x, w, bias, state, return_state = inputs
    ctx.save_for_backward(x, w, state)
    ctx.has_bias, ctx.return_state = bias is not None, return_state


def _conv_grad(ctx, dy, dstate_out):
    x, w, state = ctx.saved_tensors
    g = _conv_backward_op(x, w, dy, state)
    dx, dw, db = g[0], g[1], g[2]
    dstate = g[3] if state is not None else None
    P = w.shape[1] - 1
    if ctx.return_state and P > 0 and dstate_out is not None:
        # the next state is the last K-1 steps of (state, x) along time: its
        # cotangent lands on those steps
        S = x.shape[1]
        tail = torch.cat([dstate_out.new_zeros(x.shape[0], S, x.shape[2]), dstate_out], dim=1)  # (B, S + P, C)
        dx = dx + tail[:, P:]
        if dstate is not None:
            dstate = dstate + tail[:, :P]
    return dx, dw, db if ctx.has_bias else None, dstate, None


_conv_op.register_autograd(_conv_grad, setup_context=_conv_setup)


# the public functions (alloy.nn's signatures, without out= and stream=)

def softcap(x, cap):
    """cap * tanh(x / cap), differentiable in x."""
    return _softcap_op(x, float(cap))


def rms_norm(x, weight, head_dim=0, eps=1e-5):
    """RMSNorm over groups of head_dim elements of the last dimension D (0:
    all of it), weight (D,); differentiable in x and weight."""
    return _rms_norm_op(x, weight, int(head_dim), float(eps))[0]


def layer_norm(x, weight, bias=None, head_dim=0, eps=1e-5):
    """LayerNorm over groups of head_dim elements of the last dimension D (0:
    all of it), weight and optional bias (D,); differentiable in x, weight and
    bias."""
    return _layer_norm_op(x, weight, bias, int(head_dim), float(eps))[0]


def causal_conv1d(x, w, bias=None, state=None, return_state=False):
    """Causal depthwise convolution over time, x (B, S, C), w (C, K), K <= 8;
    differentiable in x, w, bias and state. With return_state: (y, the
    next state (B, K-1, C)), which is differentiable too."""
    y, st = _conv_op(x, w, bias, state, bool(return_state))
    return (y, st) if return_state else y
