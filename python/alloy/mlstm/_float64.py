"""The float64 forward of alloy.mlstm.torch.chunkwise: alloy's chunkwise
kernel takes float32, float16 and bfloat16 only, while its backward also
takes float64 (on the CPU) for gradient checks. This loop of the recurrence
of docs/mlstm.md, in PyTorch float64, is the forward those checks difference,
so gradcheck compares alloy's float64 backward with the function it is the
exact gradient of (same stabiliser, same branches)."""
import torch
import torch.nn.functional as F


def chunkwise(q, k, v, i, f, c0, n0, m0, eps):
    """h (B, NH, S, DHHV) and the final (c, n, m), all float64, from the
    given initial states or zeros (m_0 = 0)."""
    B, NH, S, DK = q.shape
    DV = v.shape[-1]
    if c0 is None:
        c, n, m = q.new_zeros(B, NH, DK, DV), q.new_zeros(B, NH, DK), q.new_zeros(B, NH, 1)
    else:
        c, n, m = c0.clone(), n0.clone(), m0.clone()
    qs = q * DK ** -0.5
    lf = F.logsigmoid(f)
    hs = []
    for t in range(S):
        m_new = torch.maximum(lf[..., t, None] + m, i[..., t, None])
        a, b = torch.exp(lf[..., t, None] + m - m_new), torch.exp(i[..., t, None] - m_new)
        kt, vt = k[:, :, t], v[:, :, t]
        c = a[..., None] * c + b[..., None] * kt[..., :, None] * vt[..., None, :]
        n = a * n + b * kt
        m = m_new
        den = torch.maximum((qs[:, :, t] * n).sum(-1, keepdim=True).abs(), torch.exp(-m)) + eps
        hs.append(torch.einsum("bhd,bhde->bhe", qs[:, :, t], c) / den)
    h = torch.stack(hs, dim=2) if hs else q.new_zeros(B, NH, 0, DV)
    return h, c, n, m
