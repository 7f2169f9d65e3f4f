"""alloy._torch — how the PyTorch operators (alloy.mlstm.torch, alloy.nn.torch)
hand tensors to alloy and take results back: no copies through DLPack, the
tensor's device picks alloy's device (CPU tensors run on alloy's CPU backend,
CUDA tensors on alloy's CUDA device of the same index), and CUDA work goes on
PyTorch's current stream so it stays in PyTorch's order. Imports torch."""
import torch

import alloy

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def operands(op, float64=True, **tensors):
    """The tensors (None entries kept) ready for alloy: detached (DLPack
    refuses tensors that require grad; autograd is the operator's business)
    and row-contiguous (alloy reads rows; a strided tensor is copied once
    here). Checks that they share a device alloy runs on and have a dtype
    alloy's kernels take: float32, float16, bfloat16, and float64 on the CPU
    when ``float64``. Errors are :class:`alloy.InvalidArgumentError`
    naming the argument."""
    device = None
    out = []
    for name, t in tensors.items():
        if t is None:
            out.append(None)
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{op}: {name} must be a torch.Tensor, not {type(t).__name__}")
        if t.device.type not in ("cpu", "cuda"):
            raise alloy.InvalidArgumentError(f"{op}: {name} is on {t.device}; alloy runs on 'cpu' and 'cuda' tensors")
        if device is None:
            device, first = t.device, name
        elif t.device != device:
            raise alloy.InvalidArgumentError(f"{op}: {name} is on {t.device} but {first} on {device}")
        ok = t.dtype in FLOAT_DTYPES or (float64 and t.dtype == torch.float64 and t.device.type == "cpu")
        if not ok:
            allowed = "float32, float16, bfloat16" + (" (float64 on the CPU)" if float64 else "")
            raise alloy.InvalidArgumentError(f"{op}: {name} is {t.dtype} on {t.device}; alloy takes {allowed}")
        out.append(t.detach().contiguous())
    return out


def offsets(op, like, cu):
    """cu_seqlens ready for alloy (None stays None): an int32 1-D tensor on
    the device of ``like``, contiguous. alloy checks its values."""
    if cu is None:
        return None
    if not isinstance(cu, torch.Tensor):
        raise TypeError(f"{op}: cu_seqlens must be a torch.Tensor, not {type(cu).__name__}")
    if cu.device != like.device:
        raise alloy.InvalidArgumentError(f"{op}: cu_seqlens is on {cu.device} but q on {like.device}")
    if cu.dtype != torch.int32 or cu.dim() != 1:
        raise alloy.InvalidArgumentError(f"{op}: cu_seqlens must be a 1-D int32 tensor, not {cu.dtype} "
                                         f"with {cu.dim()} dimensions")
    return cu.detach().contiguous()


def stream(t):
    """The stream alloy runs on for tensors like t: PyTorch's current CUDA
    stream on t's device, None (alloy's synchronous CPU queue) on the CPU."""
    return torch.cuda.current_stream(t.device) if t.device.type == "cuda" else None


def tensor(a):
    """An alloy.Array as a torch tensor viewing the same memory."""
    return torch.from_dlpack(a)
