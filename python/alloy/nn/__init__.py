"""alloy.nn — the fused operations of the xLSTM block, forward and backward::

    y = alloy.nn.softcap(x, 15.0)                       # 15 tanh(x / 15)
    dx = alloy.nn.softcap_backward(x, dy, 15.0)
    y = alloy.nn.layer_norm(x, weight, bias, head_dim=64)   # per head; rms_norm likewise
    dx, dweight, dbias = alloy.nn.layer_norm_backward(x, weight, dy, head_dim=64)
    y, stats = alloy.nn.layer_norm(x, weight, bias, return_stats=True)   # each group's mean, rstd
    dx, dweight, dbias = alloy.nn.layer_norm_backward(x, weight, dy, stats=stats)
    y, state = alloy.nn.causal_conv1d(x, w, bias, state, return_state=True)
    dx, dw, db, dstate = alloy.nn.causal_conv1d_backward(x, w, dy, state)

Every operand of one call shares one dtype (float32, float16, bfloat16, or
float64 on the CPU); results have it, sums and statistics are float32
(float64 for float64). dweight/dbias/dw/db are reduced over rows in a fixed
order (deterministic). Operands are any arrays alloy takes; results are
alloy.Array on the operands' device, written on ``stream=``. Wrong shapes,
dtypes or devices raise :class:`alloy.InvalidArgumentError` naming the
argument. docs/nn.md has the math. alloy.nn.torch has the four ops as
differentiable PyTorch operators (torch.library custom ops).
"""
from .._alloy import _nn_causal_conv1d, _nn_causal_conv1d_backward, _nn_norm, _nn_norm_backward, _nn_softcap

__all__ = ["softcap", "softcap_backward", "rms_norm", "rms_norm_backward", "layer_norm", "layer_norm_backward",
           "causal_conv1d", "causal_conv1d_backward"]


def softcap(x, cap, *, out=None, stream=None):
    """y = cap * tanh(x / cap) elementwise; cap > 0."""
    return _nn_softcap(x, float(cap), None, out, stream)


def softcap_backward(x, dy, cap, *, out=None, stream=None):
    """dx = dy * (1 - tanh(x / cap)**2)."""
    return _nn_softcap(x, float(cap), dy, out, stream)


def rms_norm(x, weight, head_dim=0, eps=1e-5, *, out=None, stream=None, return_stats=False):
    """x / sqrt(mean(x**2) + eps) * weight over groups of head_dim elements of
    the last dimension D (0: all of it); weight has shape (D,). With
    return_stats: (y, stats), stats (R, G, 2) float32 (float64 for float64
    x) holding each group's (0, rstd) — R the rows, G = D / head_dim — for
    rms_norm_backward(..., stats=stats); y is the same either way."""
    return _nn_norm(x, weight, None, int(head_dim), float(eps), True, out, stream, bool(return_stats))


def layer_norm(x, weight, bias=None, head_dim=0, eps=1e-5, *, out=None, stream=None, return_stats=False):
    """(x - mean) / sqrt(var + eps) * weight + bias over groups of head_dim
    elements of the last dimension D (0: all of it); weight, bias (D,), bias
    optional. With return_stats: (y, stats), stats (R, G, 2) holding each
    group's (mean, rstd), rstd = 1 / sqrt(var + eps)."""
    return _nn_norm(x, weight, bias, int(head_dim), float(eps), False, out, stream, bool(return_stats))


def rms_norm_backward(x, weight, dy, head_dim=0, eps=1e-5, *, stats=None, stream=None):
    """(dx, dweight) of rms_norm for the upstream gradient dy: statistics
    recomputed from x, or read from stats (rms_norm(..., return_stats=True)'s,
    for this x and head_dim; eps is then not used)."""
    dx, dw, _ = _nn_norm_backward(x, weight, dy, int(head_dim), float(eps), True, stream, stats)
    return dx, dw


def layer_norm_backward(x, weight, dy, head_dim=0, eps=1e-5, *, stats=None, stream=None):
    """(dx, dweight, dbias) of layer_norm for the upstream gradient dy
    (statistics from x, or from stats as rms_norm_backward's)."""
    return _nn_norm_backward(x, weight, dy, int(head_dim), float(eps), False, stream, stats)


def causal_conv1d(x, w, bias=None, state=None, return_state=False, *, stream=None):
    """Causal depthwise convolution over time: x (B, S, C), w (C, K), K <= 8,
    y[b,t,c] = bias[c] + sum_j w[c,j] x[b, t-K+1+j, c]; negative times read
    state (B, K-1, C) or zeros. With return_state: (y, new state)."""
    y, st = _nn_causal_conv1d(x, w, bias, state, bool(return_state), stream)
    return (y, st) if return_state else y


def causal_conv1d_backward(x, w, dy, state=None, *, stream=None):
    """(dx, dw, db, dstate) of causal_conv1d (dstate None without state)."""
    return _nn_causal_conv1d_backward(x, w, state, dy, stream)


def __getattr__(name):
    # alloy.nn.torch (the PyTorch operators) is imported on first use, so
    # that `import alloy` never imports torch.
    if name == "torch":
        import importlib
        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
