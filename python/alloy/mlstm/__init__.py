"""alloy.mlstm — the catalog's mLSTM cell (xLSTM's mLSTMexp), with the
layouts and shapes of NX-AI's ``mlstm_kernels`` (heads before time)::

    h, (c, n, m) = alloy.mlstm.step(q, k, v, i, f, c, n, m)      # one token per sequence
    h = alloy.mlstm.parallel(q, k, v, i, f)                      # whole sequences, zero states
    h, (c, n, m) = alloy.mlstm.chunkwise(q, k, v, i, f, return_last_states=True)  # prefill

Exponential input gate, log-sigmoid forget gate, max stabiliser (m_0 = 0),
normaliser max(|q^ . n|, exp(-m)) + eps with q^ = q / sqrt(DHQK);
docs/mlstm.md has the equations, the kernels and their accuracy.

q, k, v, i, f share one dtype: float32, float16 or bfloat16; the states
(c, n, m) are float32 and every sum is float32; h has the inputs' dtype.
Operands are any arrays alloy takes (NumPy, PyTorch, CuPy, JAX through
DLPack, or alloy.Array); results are alloy.Array on the operands' device,
written on ``stream=`` (an alloy.Stream, a torch or CuPy stream). Nothing
waits for the device. Wrong shapes, dtypes or devices raise
:class:`alloy.InvalidArgumentError` naming the argument.

alloy.mlstm.torch has chunkwise (differentiable) and step as PyTorch
operators (torch.library custom ops, torch.compile-able).
"""
from .._alloy import _mlstm_chunkwise, _mlstm_chunkwise_backward, _mlstm_parallel, _mlstm_step

__all__ = ["step", "parallel", "chunkwise", "chunkwise_backward", "ChunkRecord"]


def step(q, k, v, i, f, c, n, m, eps=1e-6, *, out=None, stream=None):
    """One recurrent step (generation): one token for each of B sequences.

    q, k: (B, NH, DHQK); v: (B, NH, DHHV); i, f: (B, NH, 1) gate
    pre-activations; c: (B, NH, DHQK, DHHV), n: (B, NH, DHQK), m: (B, NH, 1)
    the states, float32. Returns ``(h, (c, n, m))``: h (B, NH, DHHV) of q's
    dtype and the new states (float32, the shapes of c, n, m).

    out: None, or a tuple ``(h, c, n, m)`` of arrays to write (any entry
    None: that result is a new array). A given array must have the result's
    shape and dtype, live on the operands' device and be row-contiguous; it
    is written and returned as given. In place: pass a state as its own
    output (``out=(None, c, n, m)``) and the step updates it there (the C op
    reads every state before it overwrites one: two kernel launches where
    one does with the new n and m in other arrays, as when a decoding loop
    alternates two state buffers). No other overlap of inputs and outputs is
    allowed. eps >= 0 (1e-6 is mlstm_kernels' default).
    """
    if out is None:
        out = (None, None, None, None)
    elif not isinstance(out, (tuple, list)) or len(out) != 4:
        raise TypeError("mlstm.step: out must be None or a tuple (h, c, n, m) of arrays or None")
    h, c1, n1, m1 = _mlstm_step(q, k, v, i, f, c, n, m, float(eps), out[0], out[1], out[2], out[3], stream)
    return h, (c1, n1, m1)


def parallel(q, k, v, i, f, eps=1e-6, *, out=None, stream=None):
    """The quadratic (parallel) form over whole sequences from zero states.

    q, k: (B, NH, S, DHQK); v: (B, NH, S, DHHV); i, f: (B, NH, S) gate
    pre-activations. Returns h (B, NH, S, DHHV) of q's dtype, equal to S
    recurrent steps from (c, n, m) = 0 (the stabiliser includes the zero
    state's m_0 = 0, as the step's does). Any S >= 0. out: an array of h's
    shape and dtype to write (returned as given). eps >= 0.
    """
    return _mlstm_parallel(q, k, v, i, f, float(eps), out, stream)


class ChunkRecord:
    """What ``chunkwise(..., keep=True)`` keeps for ``chunkwise_backward(...,
    kept=record)``: the forward's h and final states and its chunk record
    (every chunk's starting state and gate record, in the library's layout:
    nine slots of alloy arrays, ``arrays``, the last five None except in the
    float16-tile record of float32 at precision "default"), so that the
    chunk-parallel backward does not compute them again
    (alloy_mlstm_chunkwise_keep). ``method``: the backward it is for,
    ``"chunked"`` or ``"chunked_default"``."""

    __slots__ = ("h", "c", "n", "arrays")

    def __init__(self, h, c, n, arrays):
        self.h, self.c, self.n, self.arrays = h, c, n, tuple(arrays)

    @property
    def method(self):
        return "chunked" if self.arrays[4] is None else "chunked_default"


def chunkwise(q, k, v, i, f, c_initial=None, n_initial=None, m_initial=None, return_last_states=False, eps=1e-6,
              chunk_size=None, cu_seqlens=None, *, out=None, stream=None, precision="high", keep=False):
    """The chunkwise form (prefill, training forward): whole sequences from
    given or zero initial states; mlstm_kernels' ``mlstm_chunkwise__xl_chunk``
    signature.

    q, k: (B, NH, S, DHQK); v: (B, NH, S, DHHV); i, f: (B, NH, S) gate
    pre-activations; any S >= 0 (no padding). c_initial (B, NH, DHQK, DHHV),
    n_initial (B, NH, DHQK), m_initial (B, NH, 1), float32: all three or none
    (zeros). Returns h (B, NH, S, DHHV) of q's dtype, or with
    ``return_last_states=True`` ``(h, (c, n, m))``, the final states (float32).

    cu_seqlens: int32 offsets (N + 1,) of N sequences packed in q, k, v, i, f
    of shape (1, NH, T, ...) (FlashAttention's varlen convention); each
    sequence runs alone from its own initial state (states (N, NH, ...)).
    chunk_size: a power of two from 16 to 1024 (None: 64); the result does
    not depend on it beyond rounding. out: an array of h's shape and dtype to
    write (returned as given). eps >= 0. Chunks run as at most 64 tokens and
    keep every chunk's starting state (in the inputs' dtype) in device
    scratch, at most 2 GiB at a time — except float32 inputs with DHQK over
    256, which run chunk_size and need none (docs/mlstm.md).

    precision: how float32 inputs' products are rounded on a GPU — ``"high"``
    (three TF32 tensor-core products each: float32 accuracy, about 1e-6 of
    max|h| at the 7B-model heads) or ``"default"`` (the factors rounded to 11
    significant bits as mlstm_kernels' float32 kernels do, on float16 tiles
    with power-of-two exponents — an error of about 5e-4 of max|h| — and
    faster); ``"highest"`` (exact products) has no kernel here and is an
    error. 16-bit inputs and the CPU give the same results for each
    (docs/mlstm.md, "Precision").

    keep=True (training): returns ``(h, (c, n, m), record)``, record a
    ChunkRecord for ``chunkwise_backward(..., kept=record)``, which then skips
    recomputing the chunk states (the same gradients; memory: per chunk of
    min(chunk_size, 64) tokens and head a DHQK x DHHV state in q's dtype).
    bfloat16, and float32 with DHQK up to 256 (the chunk-parallel backward's
    inputs). float32 at ``precision="default"`` on a GPU keeps the forward's
    float16-tile record (its states as float16 tiles, and q, k, v as float16
    rows: half their bytes more), and the backward from it is
    ``"chunked_default"``'s.
    """
    r = _mlstm_chunkwise(q, k, v, i, f, c_initial, n_initial, m_initial, cu_seqlens,
                         0 if chunk_size is None else int(chunk_size), float(eps), bool(return_last_states), out, stream,
                         precision, bool(keep))
    if keep:
        return r[0], (r[1], r[2], r[3]), ChunkRecord(r[0], r[1], r[2], r[4:])
    return (r[0], tuple(r[1:])) if return_last_states else r


def chunkwise_backward(q, k, v, i, f, dh, c_initial=None, n_initial=None, m_initial=None, dc_final=None,
                       dn_final=None, dm_final=None, eps=1e-6, chunk_size=None, cu_seqlens=None, *, method="auto",
                       stream=None, kept=None):
    """The gradient of ``chunkwise`` (the function's exact derivative, through
    the normaliser's floor and the stabiliser): given the forward's inputs
    (the same ``cu_seqlens`` for a packed batch) and dh (v's shape, q's
    dtype), and optionally the gradients of the final states (dc_final,
    dn_final, dm_final: all three or none, float32), returns
    ``(dq, dk, dv, di, df, (dc_initial, dn_initial, dm_initial))`` — the last
    tuple None when no initial states are given. The gradients of q, k, v, i,
    f have q's dtype (float32, float16 or bfloat16; every sum is float32), the
    states' float32. Nothing is saved by the forward: the states are
    recomputed (docs/mlstm.md, "Backward"). float64 inputs give float64
    gradients (on the CPU), for gradient checks.

    method: ``"exact"`` — serial along each sequence, float32 compensated
    sums, accurate also with hostile gates, slow on long sequences (seconds
    at S = 8192 with 7B-model heads); ``"chunked"`` — parallel over chunks on
    the tensor cores (bfloat16 and float32 inputs), milliseconds, but with
    the input dtype's rounding left in nearly cancelling gradients (hostile
    gates: up to a fifth of the largest gradient in bfloat16, 1e-2 in
    float32); ``"chunked_default"`` — float32 inputs only: chunked on the
    float16 tiles of ``chunkwise(..., precision="default")`` (TF32's 11
    significant bits, as mlstm_kernels' float32 kernels; errors of a few 1e-3
    of each gradient's largest element on ordinary inputs, no significant
    digit left with hostile gates), the fastest float32 backward;
    ``"auto"`` — chunked for bfloat16, exact otherwise.

    kept: the ChunkRecord of ``chunkwise(..., keep=True)`` on the same inputs
    and chunk_size — the chunk-parallel backward from it, without computing
    the chunk states again; the record says which one (``"chunked_default"``
    for float32 kept at ``precision="default"`` on a GPU, else
    ``"chunked"``), and method must be "auto" or that one."""
    if kept is not None and not isinstance(kept, ChunkRecord):
        raise TypeError("mlstm.chunkwise_backward: kept must be the ChunkRecord of chunkwise(..., keep=True)")
    if kept is not None and method not in ("auto", kept.method):
        raise ValueError(f"mlstm.chunkwise_backward: method is {method!r}, and kept is a record for "
                         f"{kept.method!r} (pass 'auto' or {kept.method!r})")
    rec = {} if kept is None else dict(h=kept.h, c_last=kept.c, n_last=kept.n, kept=kept.arrays)
    r = _mlstm_chunkwise_backward(q, k, v, i, f, c_initial, n_initial, m_initial, cu_seqlens, dh, dc_final, dn_final,
                                  dm_final, 0 if chunk_size is None else int(chunk_size), float(eps), stream,
                                  str(method), **rec)
    states = None if r[5] is None else tuple(r[5:])
    return r[0], r[1], r[2], r[3], r[4], states


def __getattr__(name):
    # alloy.mlstm.torch (the PyTorch operators) is imported on first use, so
    # that `import alloy` never imports torch.
    if name == "torch":
        import importlib
        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
