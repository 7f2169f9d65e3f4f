"""The chunk-parallel form of the mLSTM backward (docs/mlstm.md, "Not there
yet": the plan for a tensor-core backward), written in NumPy float64, equals
alloy.mlstm.chunkwise_backward's float64 gradient (CPU backend): the states
at chunk starts from a forward walk; per row G_r = [dh_r / den_r | ds_r] and
the eps term dL/dm_r; the state gradient walked back over chunks, dX_c =
e_last dX_{c+1} + sum_r scale e_r q_r^T G_r; then per chunk, with m held
constant, dq, dk, dv and the log-weight gradients from L x L products and
the chunk's two states; last, the eps terms along m's argmax chains. The
kernels to come compute exactly these sums, so this pins down their math
(including initial states, final-state cotangents and hostile gates)."""
import numpy as np
import pytest

import alloy.mlstm as M
from test_mlstm import host

EPS = 1e-6


def logsig(x):
    return -np.logaddexp(0.0, -x)


def chunked_backward(q, k, v, i, f, dh, st, cot, L, eps=EPS):
    """One (sequence, head): q, k (S, DK), v, dh (S, DV), i, f (S); st = (C0,
    n0, m0) or None; cot = (dC, dn, dm) final-state cotangents or None.
    Returns dq, dk, dv, di, df and (dC0, dn0, dm0) (None without st)."""
    S, DK = q.shape
    DV = v.shape[1]
    W = DV + 1
    scale = 1.0 / np.sqrt(DK)
    lf = logsig(f)
    m0 = float(st[2]) if st is not None else 0.0
    X = np.zeros((DK, W))
    if st is not None:
        X[:, :DV], X[:, DV] = st[0], st[1]
    vt = np.concatenate([v, np.ones((S, 1))], axis=1)   # [v | 1]
    # forward walk: m, h, den, the branch of the floor, the argmax chains, X at chunk starts
    m, ms, src, chain = m0, np.zeros(S), np.zeros(S, dtype=int), -1
    U, IA = np.zeros(S), np.zeros(S)
    Xs, hs, den, sns = [], np.zeros((S, DV)), np.zeros(S), np.zeros(S)
    for t in range(S):
        if t % L == 0:
            Xs.append(X.copy())
        a = lf[t] + m
        mn = a if a >= i[t] else i[t]
        if a < i[t]:
            chain = t
        U[t], IA[t] = a - mn, i[t] - mn
        X = np.exp(a - mn) * X + np.exp(i[t] - mn) * np.outer(k[t], vt[t])
        m = mn
        ms[t], src[t] = m, chain
        num = scale * q[t] @ X
        sns[t] = sn = num[DV]
        den[t] = max(abs(sn), np.exp(-m)) + eps
        hs[t] = num[:DV] / den[t]
    XS = X
    # the row cotangents and the eps term
    dhh = np.sum(dh * hs, axis=1)
    # ds: through |q^.n| where it beat the floor (ties to |q^.n|, as the forward's max)
    floor_won = np.abs(sns) < np.exp(-ms)
    G = np.concatenate([dh / den[:, None], np.zeros((S, 1))], axis=1)
    G[:, DV] = np.where(floor_won, 0.0, -dhh / den * np.where(sns >= 0, 1.0, -1.0))
    dM = -eps * dhh / den
    # the state gradient walked back over chunks
    nch = (S + L - 1) // L
    dX = np.zeros((DK, W))
    if cot is not None:
        dX[:, :DV], dX[:, DV] = cot[0], cot[1]
        if S > 0:
            dM[S - 1] += float(cot[2]) - float(np.sum(dX * XS))
    dXn = [None] * nch
    for c in reversed(range(nch)):
        dXn[c] = dX.copy()
        r0, r1 = c * L, min(S, (c + 1) * L)
        pre = np.cumsum(U[r0:r1])
        e = np.exp(pre)
        dX = np.exp(pre[-1]) * dX + (scale * e[:, None] * q[r0:r1]).T @ G[r0:r1]
    dX0 = dX
    # per chunk, m held constant
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    di, dlf = np.zeros(S), np.zeros(S)
    for c in range(nch):
        r0, r1 = c * L, min(S, (c + 1) * L)
        n = r1 - r0
        Q, K, V, Gc = q[r0:r1], k[r0:r1], vt[r0:r1], G[r0:r1]
        u, ia = U[r0:r1], IA[r0:r1]
        pre = np.cumsum(u)                        # log e_r
        suf = pre[-1] - pre                       # sum_{s>j} U_s
        logw = np.full((n, n), -np.inf)
        for r in range(n):
            for j in range(r + 1):
                logw[r, j] = ia[j] + (pre[r] - pre[j])
        Wm = np.exp(logw)
        e, wl, elast = np.exp(pre), np.exp(ia + suf), np.exp(pre[-1])
        Xc, dXc = Xs[c], dXn[c]
        P = scale * (Q @ K.T) * Wm
        A = Gc @ V.T
        inter_q = scale * e[:, None] * (Gc @ Xc.T)          # the inter-chunk part of dq
        dq[r0:r1] = scale * (A * Wm) @ K + inter_q
        dk[r0:r1] = scale * (A * Wm).T @ Q + wl[:, None] * (V @ dXc.T)
        kdx = K @ dXc                                        # rows k_j^T dX_{c+1}
        dv[r0:r1] = (P.T @ Gc)[:, :DV] + wl[:, None] * kdx[:, :DV]
        D = P * A                                            # d log w_rj
        dloge = np.sum(Q * inter_q, axis=1)                  # e_r q^_r X_c G_r^T
        dlogwl = wl * np.sum(kdx * V, axis=1)
        dloge_last = elast * np.sum(dXc * Xc)
        di[r0:r1] += D.sum(axis=0) + dlogwl
        for s in range(n):
            dlf[r0 + s] += D[s:, :s].sum() + dloge[s:].sum() + dlogwl[:s].sum() + dloge_last
    # the eps terms along m's argmax chains
    dm0 = float(np.sum(dX0 * Xs[0])) if S > 0 and st is not None else 0.0
    for r in range(S):
        if src[r] >= 0:
            di[src[r]] += dM[r]
        else:
            dm0 += dM[r]
        dlf[src[r] + 1:r + 1] += dM[r]
    df = dlf / (1 + np.exp(f))
    states = None
    if st is not None:
        if S == 0:
            dX0 = np.zeros((DK, W)) if cot is None else np.concatenate([cot[0], cot[1][:, None]], axis=1)
            dm0 = 0.0 if cot is None else float(cot[2])
        states = (dX0[:, :DV], dX0[:, DV], dm0)
    return dq, dk, dv, di, df, states


def case(rng, S, DK, DV, init, final, hostile):
    q = rng.standard_normal((1, 1, S, DK))
    k = rng.standard_normal((1, 1, S, DK))
    v = rng.standard_normal((1, 1, S, DV))
    i = rng.uniform(-3, 3, (1, 1, S))
    f = rng.uniform(-3, 3, (1, 1, S))
    if hostile:   # input gates far above the floor, forget gates that reset, tiny queries
        sel = rng.random(S)
        i[..., sel < 0.2] = 60.0 + rng.uniform(-1, 1, int(np.sum(sel < 0.2)))
        f[..., (sel >= 0.2) & (sel < 0.35)] = -40.0
        q[..., sel > 0.9, :] *= 1e-4
    dh = rng.standard_normal((1, 1, S, DV))
    st = (rng.uniform(-1, 1, (1, 1, DK, DV)), rng.uniform(-1, 1, (1, 1, DK)), rng.uniform(-1, 1, (1, 1, 1))) \
        if init else None
    cot = (rng.standard_normal((1, 1, DK, DV)), rng.standard_normal((1, 1, DK)), rng.standard_normal((1, 1, 1))) \
        if final else None
    return (q, k, v, i, f), dh, st, cot


@pytest.mark.parametrize("S,L,init,final,hostile", [
    (1, 4, False, False, False), (13, 4, True, True, False), (37, 8, True, False, True),
    (40, 16, False, True, True), (33, 16, True, True, True)])
def test_chunked_plan_equals_backward(rng, device, S, L, init, final, hostile):
    if device:
        pytest.skip("float64 gradients are checked on the CPU backend")
    (q, k, v, i, f), dh, st, cot = case(rng, S, 5, 3, init, final, hostile)
    kw = {}
    if st is not None:
        kw.update(c_initial=st[0], n_initial=st[1], m_initial=st[2])
    if cot is not None:
        kw.update(dc_final=cot[0], dn_final=cot[1], dm_final=cot[2])
    got = M.chunkwise_backward(q, k, v, i, f, dh, eps=EPS, chunk_size=16, **kw)
    want = chunked_backward(q[0, 0], k[0, 0], v[0, 0], i[0, 0], f[0, 0], dh[0, 0],
                            None if st is None else (st[0][0, 0], st[1][0, 0], st[2][0, 0, 0]),
                            None if cot is None else (cot[0][0, 0], cot[1][0, 0], cot[2][0, 0, 0]), L)
    pairs = list(zip(got[:5], want[:5]))
    if st is not None:
        pairs += [(got[5][0], want[5][0]), (got[5][1], want[5][1]), (got[5][2], np.array(want[5][2]))]
    for name, (g, w) in zip(("dq", "dk", "dv", "di", "df", "dc0", "dn0", "dm0"), pairs):
        g = np.asarray(host(g), dtype=np.float64).reshape(np.shape(w))
        w = np.asarray(w, dtype=np.float64)
        scale = max(float(np.max(np.abs(w))) if w.size else 0.0, 1e-2 * max(float(np.max(np.abs(x)))
                                                                          for x in (want[0], want[1], want[2])))
        err = float(np.max(np.abs(g - w))) / scale if w.size else 0.0
        assert err <= 1e-9, f"{name}: {err:.3g} (S={S}, L={L}, init={init}, final={final}, hostile={hostile})"
