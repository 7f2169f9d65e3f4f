"""alloy.fast — the ``mx.fast`` spelling: ``alloy.fast.metal_kernel`` is
``alloy.metal_kernel``, so ``import alloy as mx`` keeps ``mx.fast.metal_kernel``
working unchanged."""
from ._alloy import metal_kernel  # noqa: F401

__all__ = ["metal_kernel"]
