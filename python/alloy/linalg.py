"""alloy.linalg — the catalog's dense linear algebra.

``matmul(a, b)`` is NumPy's ``a @ b`` (leading dimensions broadcast; a 1-D
``a`` is a row, a 1-D ``b`` a column) on the operands' device, with
transposes, scaling and an output array of your own::

    c = alloy.linalg.matmul(a, b)                         # a new alloy.Array
    alloy.linalg.matmul(a, b, out=c, alpha=2.0, beta=1.0) # c = 2 a b + c, in place
    alloy.linalg.matmul(w, x, transpose_a=True, dtype=alloy.float32)

Operands are any arrays alloy takes (NumPy, PyTorch, CuPy, JAX through
DLPack, or alloy.Array), read in place, strided and transposed views
included; both must have the same dtype (float32, float16, bfloat16 or
float64). See docs/linalg.md for the kernels, the precisions and their errors.
"""
from ._alloy import _matmul

__all__ = ["matmul"]


def matmul(a, b, out=None, transpose_a=False, transpose_b=False, alpha=1.0, beta=0.0,
           precision="highest", dtype=None, stream=None):
    """``alpha * op(a) @ op(b) + beta * out``, op the transpose where asked.

    out: an array of the result's shape and dtype on the operands' device
    (row-contiguous) to write into and return; beta needs it. precision:
    "highest" (exact float32 products and sums), "high" or "default" (may
    use faster float32 schemes; docs/linalg.md says what each does on each
    device). dtype: the result's dtype (default: the operands', or out's).
    stream: the stream to run on (an alloy.Stream, a torch or CuPy stream).
    """
    return _matmul(a, b, out, bool(transpose_a), bool(transpose_b), float(alpha), float(beta),
                   precision, dtype, stream)
