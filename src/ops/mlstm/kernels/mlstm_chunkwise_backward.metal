// mlstm_chunkwise_backward: the exact gradient of the chunkwise forward
// (mlstm_chunkwise.metal, which equals the recurrence for every chunk size):
// reverse mode of the stabilised recurrence, the max/abs branches and the m
// path included (docs/mlstm.md, "Backward", derives every line).
//   The state is X = [C | n] (DHQK x DVX, DVX = DHHV + 1: n is one more
//   column, so v gets a trailing 1 and every C formula covers n too).
//   Forward sweep: X at every chunk start into CK, m at every chunk start
//   into MK (each thread advances its own elements of X; no barrier).
//   Backward, chunk by chunk from the last: the chunk's per-token states are
//   recomputed from CK into CT (slot r + 1 holds X after token r, slot 0 the
//   chunk start), then the tokens are walked in reverse carrying dX (in DX,
//   device memory) and dm (a register, the same in every thread):
//     den  = max(|s|, exp(-m_r)) + eps,  s = q^ . n_r,  h = q^ C_r / den
//     dX  += q^ [dh / den | ds]          ds = -(dh . h / den) sign(s) where |s| wins
//     dm_r += -(dh . h / den) (-exp(-m_r))                          where the floor wins
//     dq   = scale (X_r [dh / den | ds]),  dk = Ib (dX v~),  dv = Ib (k^T dX)
//     dlogIb = Ib (k^T dX v~),  dlogFb = Fb <dX, X_{r-1}>
//     m_r = max(a_r, i_r), a_r = lf_r + m_{r-1}: dm_r (carried + floor - dlogFb
//     - dlogIb) goes to a_r or i_r, whichever the max took;
//     da_r = dlogFb + (that share) = dlf_r = dm_{r-1}; df = dlf sigmoid(-f)
//     dX *= Fb
//   after the first chunk dX and dm are the initial states' gradients.
// Float32 numerics (docs/mlstm.md): at a state dominated by one token's
// k v~^T, where q^ . k nearly cancels, dq and dk are the eps-sized
// difference of terms of size |dh| / den (dv: q^ . k times such terms), so
// any rounding that treats the elements of a row or column apart shows up
// multiplied by sum |q^_d k_d| / |q^ . k| (1e-2 of the largest gradient with
// plain float sums). Hence error-free transformations (fma, TwoSum): the
// states as hi + lo (CK + CKL, CT + CTL), dX as hi + lo (DX + DXL), q X_r by
// Dot2 with q unscaled (scale applied after), dh / den as hi + lo, and the
// sums behind dq, dk, dv and dh . num compensated.
// Packed sequences (VARLEN): sequence s is the tokens cu[s] .. cu[s+1]-1 of
// each head's T = S rows, clamped to [0, S] like the forward; its chunk-start
// slots in CK and MK begin at cu[s] / L + s in the head's NCH = S / L + NSEQ
// slots (sequence s has at most ceil(len / L) chunks, which end at or before
// the next sequence's first slot, so the slots never overlap, and stay in
// bounds even for offsets the device did not check).
// One threadgroup of NT threads per (sequence, head); thread t owns the
// elements t, t + NT, ... of X and dX (row-major DHQK x DVX); row sums (dq,
// dk) and column sums (q^ X, dv) are one thread per row or column reading the
// device scratch after a barrier (several threads per row of dq, dk and per
// column of dv where NT allows, their compensated partial sums merged).
// Correctness first: O(S DHQK DHHV) work per pass like the recurrence, no
// matrix units.
// Template: T (input dtype), A (accumulation: float, double for double
// inputs), HAS_INIT (C0, n0, m0 given: their gradients are written),
// HAS_DFINAL (dCf, dnf, dmf: gradients of the final states), VARLEN (cu
// gives the sequences), NT (threads per threadgroup, a multiple of 32).
// Launch constants: int S (tokens per (batch, head) row: S, or the packed
// total T), int NH, int DHQK, int DHHV, int L (chunk), int NCH (chunk-start
// slots per dense sequence, ceil(S / L); packed: per head, S / L + NSEQ),
// A scale (DHQK^-1/2), A eps.
// Scratch outputs (A): CK (NSEQ*NH or NH, NCH, DHQK*DVX), CT (NSEQ*NH, L + 1,
// DHQK*DVX), DX (NSEQ*NH, DHQK*DVX), MK (NSEQ*NH or NH, NCH), CKL, CTL and
// DXL (the low parts of CK, CT and DX, their shapes).
// Launch: grid = (NSEQ * NH * NT, 1, 1), threadgroup = (NT, 1, 1),
// threadgroup memory = sizeof(A) * (5 L + 4 DHQK + 5 DVX + 4).
//! name: alloy_mlstm_chunkwise_backward
//! inputs: q k v i f C0 n0 m0 dh dCf dnf dmf cu
//! outputs: dq dk dv di df dC0 dn0 dm0 CK CT DX MK CKL CTL DXL
//! template: T=float32
//! template: A=float32
//! template: NT=256
//! template: HAS_INIT=false
//! template: HAS_DFINAL=false
//! template: VARLEN=false
//! header:
// NT threads per threadgroup: registers capped to fit them (float64's
// compensated sums need more than 128 at 512 threads otherwise)
#undef ALLOY_CUDA_LAUNCH_BOUNDS
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(ALLOY_TEMPLATE_NT)
// log(sigmoid(x)) without overflow (the forward's formula)
template <typename A> inline A mb_logsigmoid(A x) {
    return x >= A(0) ? -log1p(exp(-x)) : x - log1p(exp(x));
}
// The error-free transformations below need every product and sum rounded
// on its own: no backend reassociates, but NVRTC contracts a * b + c into an
// fma by default, so on CUDA they use the never-contracted intrinsics.
#if defined(ALLOY_BACKEND_CUDA)
METAL_FUNC float mb_mul(float a, float b) { return __fmul_rn(a, b); }
METAL_FUNC double mb_mul(double a, double b) { return __dmul_rn(a, b); }
METAL_FUNC float mb_add(float a, float b) { return __fadd_rn(a, b); }
METAL_FUNC double mb_add(double a, double b) { return __dadd_rn(a, b); }
METAL_FUNC float mb_sub(float a, float b) { return __fsub_rn(a, b); }
METAL_FUNC double mb_sub(double a, double b) { return __dsub_rn(a, b); }
#else
template <typename A> inline A mb_mul(A a, A b) { return a * b; }
template <typename A> inline A mb_add(A a, A b) { return a + b; }
template <typename A> inline A mb_sub(A a, A b) { return a - b; }
#endif
// s + e = a + b exactly (TwoSum)
template <typename A> inline A mb_two_sum(A a, A b, thread A &e) {
    const A s = mb_add(a, b), bb = mb_sub(s, a);
    e = mb_add(mb_sub(a, mb_sub(s, bb)), mb_sub(b, bb));
    return s;
}
// s + comp accumulates a b exactly up to comp's own rounding (Dot2: the
// product's error by fma, the sum's by TwoSum); `low` (the operands' low
// parts' terms) goes to comp too
template <typename A> inline void mb_dot2(thread A &s, thread A &comp, A a, A b, A low) {
    const A p = mb_mul(a, b), ep = fma(a, b, -p);
    A es;
    s = mb_two_sum(s, p, es);
    comp += es + ep + low;
}
// hi + lo <- hi + lo + a (b + bl), to about twice A's precision
template <typename A> inline void mb_add_prod(thread A &hi, thread A &lo, A a, A b, A bl) {
    A s = hi, comp = lo;
    mb_dot2(s, comp, a, b, a * bl);
    hi = mb_add(s, comp);
    lo = mb_sub(comp, mb_sub(hi, s));
}
// s + comp += the partial sum s2 + c2 of another thread (TwoSum of the
// leading parts, the rest into comp): the same result in both threads of a
// pair, since TwoSum's error is exact whatever the order
template <typename A> inline void mb_merge(thread A &s, thread A &comp, A s2, A c2) {
    A e;
    s = mb_two_sum(s, s2, e);
    comp = comp + c2 + e;
}
// hi + lo <- fb (hi + lo) + ibk vx, to about twice A's precision: the
// rounding errors of both products (exact by fma) and of their sum (TwoSum)
// are added into lo. ibk = Ib k_d is one rounded value per row, shared by
// the row's C columns and its n column.
template <typename A> inline void mb_step(thread A &hi, thread A &lo, A fb, A ibk, A vx) {
    const A p1 = mb_mul(fb, hi), e1 = fma(fb, hi, -p1);
    const A p2 = mb_mul(ibk, vx), e2 = fma(ibk, vx, -p2);
    A e3;
    const A sm = mb_two_sum(p1, p2, e3);
    const A l = e1 + e2 + e3 + fb * lo;
    hi = mb_add(sm, l);
    lo = mb_sub(l, mb_sub(hi, sm));
}
//! body:
const int tid = int(thread_index_in_threadgroup);
const long sh = long(threadgroup_position_in_grid.x);   // sequence * NH + head: the state's index
const int DVX = DHHV + 1;
const long E = long(DHQK) * DVX;
// threads per row of the row sums and per column of dv: the most (a power of
// two, at most a SIMD group) that keep one pass over the rows (columns)
int TPR = 1, TPC = 1;
while (TPR < 32 && DHQK * (2 * TPR) <= NT) TPR *= 2;
while (TPC < 32 && DHHV * (2 * TPC) <= NT) TPC *= 2;
long tok0;    // the sequence's first row of q (of the B*NH*S or NH*T rows)
int len;      // its tokens
long slot0;   // its first chunk-start slot in CK and MK
if (VARLEN) {
    const long seq = sh / NH;
    const int head = int(sh % NH);
    const int s0 = clamp(int(cu[seq]), 0, S), s1 = clamp(int(cu[seq + 1]), 0, S);
    tok0 = long(head) * S + s0;
    len = max(s1 - s0, 0);
    slot0 = long(head) * NCH + s0 / L + seq;
} else {
    tok0 = sh * S;
    len = S;
    slot0 = sh * NCH;
}
const int nch = (len + L - 1) / L;
threadgroup A *tg = (threadgroup A *)alloy_threadgroup_memory;
threadgroup A *MR = tg;            // m_r of the chunk's tokens
threadgroup A *FB = MR + L;        // exp(a_r - m_r)
threadgroup A *IB = FB + L;        // exp(i_r - m_r)
threadgroup A *AW = IB + L;        // 1 where the max took a_r, else 0
threadgroup A *SG = AW + L;        // sigmoid(-f_r) = d lf / d f
threadgroup A *QR = SG + L;        // q of the token, unscaled (DHQK)
threadgroup A *KV = QR + DHQK;     // k (DHQK)
threadgroup A *RP = KV + DHQK;     // per-row partial sums (DHQK)
threadgroup A *RF = RP + DHQK;     // per-row partial sums (DHQK)
threadgroup A *VV = RF + DHQK;     // [v | 1] (DVX)
threadgroup A *DN = VV + DVX;      // [dh / den | ds] (DVX)
threadgroup A *NUM = DN + DVX;     // q^ X_r = [numerator | s] (DVX)
threadgroup A *NUML = NUM + DVX;   // its low parts (DVX)
threadgroup A *DNL = NUML + DVX;   // DN's low parts (DVX)
threadgroup A *SC = DNL + DVX;     // scalars of the token
device A *ck = CK + slot0 * E;
device A *ct = CT + sh * (L + 1) * E;
device A *ckl = CKL + slot0 * E;
device A *ctl = CTL + sh * (L + 1) * E;
device A *dx = DX + sh * E;
device A *dxl = DXL + sh * E;      // dX's low parts

// ---- forward sweep: X and m at every chunk start ----
const A m_init = HAS_INIT ? A(m0[sh]) : A(0);
for (long e = tid; e < E; e += NT) {
    const int d = int(e / DVX), c = int(e % DVX);
    A x = A(0), xl = A(0);
    if (HAS_INIT) x = c < DHHV ? A(C0[(sh * DHQK + d) * DHHV + c]) : A(n0[sh * DHQK + d]);
    A mp = m_init;
    for (int ch = 0; ch < nch; ch++) {
        ck[ch * E + e] = x;
        ckl[ch * E + e] = xl;
        if (e == 0) MK[slot0 + ch] = mp;
        const int Lc = min(L, len - ch * L);
        for (int r = 0; r < Lc; r++) {
            const long t = tok0 + long(ch) * L + r;
            const A a = mb_logsigmoid(A(f[t])) + mp, ig = A(i[t]), mr = max(a, ig);
            const A vx = c < DHHV ? A(v[t * DHHV + c]) : A(1);
            mb_step(x, xl, exp(a - mr), exp(ig - mr) * A(k[t * DHQK + d]), vx);
            mp = mr;
        }
    }
}
// ---- backward ----
for (long e = tid; e < E; e += NT) {
    const int d = int(e / DVX), c = int(e % DVX);
    A g = A(0);
    if (HAS_DFINAL) g = c < DHHV ? A(dCf[(sh * DHQK + d) * DHHV + c]) : A(dnf[sh * DHQK + d]);
    dx[e] = g;
    dxl[e] = A(0);
}
A dm = HAS_DFINAL ? A(dmf[sh]) : A(0);   // d loss / d m of the state after the current token
threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
for (int ch = nch - 1; ch >= 0; ch--) {
    const int Lc = min(L, len - ch * L);
    const long tb = tok0 + long(ch) * L;
    if (tid == 0) {
        A mp = MK[slot0 + ch];
        for (int r = 0; r < Lc; r++) {
            const A fp = A(f[tb + r]), a = mb_logsigmoid(fp) + mp, ig = A(i[tb + r]), mr = max(a, ig);
            MR[r] = mr;
            FB[r] = exp(a - mr);
            IB[r] = exp(ig - mr);
            AW[r] = a >= ig ? A(1) : A(0);
            SG[r] = A(1) / (A(1) + exp(fp));
            mp = mr;
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
    // the chunk's per-token states, recomputed from its start
    for (long e = tid; e < E; e += NT) {
        const int d = int(e / DVX), c = int(e % DVX);
        A x = ck[ch * E + e], xl = ckl[ch * E + e];
        ct[e] = x;
        ctl[e] = xl;
        for (int r = 0; r < Lc; r++) {
            const A vx = c < DHHV ? A(v[(tb + r) * DHHV + c]) : A(1);
            mb_step(x, xl, FB[r], IB[r] * A(k[(tb + r) * DHQK + d]), vx);
            ct[(r + 1) * E + e] = x;
            ctl[(r + 1) * E + e] = xl;
        }
    }
    for (int r = Lc - 1; r >= 0; r--) {
        const long t = tb + r;
        device const A *xr = ct + (r + 1) * E;   // X after token r
        device const A *xrl = ctl + (r + 1) * E;  // its low part
        device const A *xp = ct + r * E;         // X before it
        for (int d = tid; d < DHQK; d += NT) {
            QR[d] = A(q[t * DHQK + d]);
            KV[d] = A(k[t * DHQK + d]);
        }
        for (int c = tid; c < DVX; c += NT) VV[c] = c < DHHV ? A(v[t * DHHV + c]) : A(1);
        threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
        // q^ X_r as scale (q X_r), compensated (Dot2: the products' and the
        // sums' errors, and the low parts, summed apart): accurate where
        // q^ . n nearly cancels. q is scaled after the sum (and in dX's update,
        // DN is scaled instead): q^_d rounded one by one would move q^ . n by
        // (sum |q^_d n_d|) float eps, and den with it.
        for (int c = tid; c < DVX; c += NT) {
            A s = A(0), comp = A(0);
            for (int d = 0; d < DHQK; d++) {
                const long e = long(d) * DVX + c;
                mb_dot2(s, comp, QR[d], xr[e], QR[d] * xrl[e]);
            }
            const A hi = mb_add(s, comp), lo = mb_sub(comp, mb_sub(hi, s));
            const A sh_ = mb_mul(scale, hi), sl = fma(scale, hi, -sh_) + scale * lo;
            NUM[c] = mb_add(sh_, sl);
            NUML[c] = mb_sub(sl, mb_sub(NUM[c], sh_));
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tid == 0) {
            const A s = NUM[DHHV] + NUML[DHHV], fl = exp(-MR[r]);
            const A den = max(fabs(s), fl) + eps;
            A dhh = A(0), comp = A(0);   // dh . numerator
            for (int c = 0; c < DHHV; c++) {
                const A g = A(dh[t * DHHV + c]);
                mb_dot2(dhh, comp, g, NUM[c], g * NUML[c]);
            }
            const A dden = -(dhh + comp) / (den * den);
            const bool abs_wins = fabs(s) >= fl;
            SC[0] = A(1) / den;
            SC[1] = abs_wins ? (s >= A(0) ? dden : -dden) : A(0);   // ds
            SC[2] = abs_wins ? A(0) : -dden * fl;                    // d m_r through the floor
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        // DN exactly as hi + lo (dh_c / den and ds keep their relation
        // through the cancellation in v~ . DN)
        for (int c = tid; c < DVX; c += NT) {
            if (c < DHHV) {
                const A g = A(dh[t * DHHV + c]);
                DN[c] = mb_mul(g, SC[0]);
                DNL[c] = fma(g, SC[0], -DN[c]);
            } else {
                DN[c] = SC[1];
                DNL[c] = A(0);
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        // dX += q^ DN^T as q (scale DN): scale DN exact as hi + lo, q exact
        for (long e = tid; e < E; e += NT) {
            const int c = int(e % DVX);
            const A sd = mb_mul(scale, DN[c]), sdl = fma(scale, DN[c], -sd) + scale * DNL[c];
            A hi = dx[e], lo = dxl[e];
            mb_add_prod(hi, lo, QR[e / DVX], sd, sdl);
            dx[e] = hi;
            dxl[e] = lo;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
        // rows: dq, dk and the input gate's partials; columns: dv
        // (compensated: at a state dominated by one token these sums cancel
        // to eps's share of den). TPR threads per row (neighbouring lanes,
        // each every TPR-th column) and TPC per column of dv, their partial
        // sums merged by shuffles: every thread has loads in flight (the
        // loops are uniform across the SIMD group, for the shuffles).
        for (int base = 0; base < DHQK; base += NT / TPR) {
            const int d = base + tid / TPR, part = tid % TPR;
            A sq = A(0), cq = A(0), sk = A(0), ckk = A(0), sf = A(0);
            if (d < DHQK)
                for (int c = part; c < DVX; c += TPR) {
                    const long e = long(d) * DVX + c;
                    mb_dot2(sq, cq, xr[e], DN[c], xr[e] * DNL[c] + xrl[e] * DN[c]);
                    mb_dot2(sk, ckk, dx[e], VV[c], dxl[e] * VV[c]);
                    sf += dx[e] * xp[e];
                }
            for (uint o = 1; o < uint(TPR); o <<= 1) {
                mb_merge(sq, cq, simd_shuffle_xor(sq, o), simd_shuffle_xor(cq, o));
                mb_merge(sk, ckk, simd_shuffle_xor(sk, o), simd_shuffle_xor(ckk, o));
                sf += simd_shuffle_xor(sf, o);
            }
            if (d < DHQK && part == 0) {
                sq += cq;
                sk += ckk;
                dq[t * DHQK + d] = T(sq * scale);
                dk[t * DHQK + d] = T(IB[r] * sk);
                RP[d] = KV[d] * sk;   // row d of k^T dX v~
                RF[d] = sf;           // row d of <dX, X_{r-1}>
            }
        }
        for (int base = 0; base < DHHV; base += NT / TPC) {
            const int c = base + tid / TPC, part = tid % TPC;
            A s = A(0), comp = A(0);
            if (c < DHHV)
                for (int d = part; d < DHQK; d += TPC) {
                    const long e = long(d) * DVX + c;
                    mb_dot2(s, comp, dx[e], KV[d], dxl[e] * KV[d]);
                }
            for (uint o = 1; o < uint(TPC); o <<= 1)
                mb_merge(s, comp, simd_shuffle_xor(s, o), simd_shuffle_xor(comp, o));
            if (c < DHHV && part == 0) dv[t * DHHV + c] = T(IB[r] * (s + comp));
        }
        threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
        // the gates (every thread, so dm stays uniform)
        A dIb = A(0), dFb = A(0);
        for (int d = 0; d < DHQK; d++) {
            dIb += RP[d];
            dFb += RF[d];
        }
        const A dlogF = dFb * FB[r], dlogI = dIb * IB[r];
        const A dmr = dm + SC[2] - dlogF - dlogI;   // d loss / d m_r, all paths
        const A da = dlogF + AW[r] * dmr;
        const A dig = dlogI + (A(1) - AW[r]) * dmr;
        if (tid == 0) {
            di[t] = T(dig);
            df[t] = T(da * SG[r]);
        }
        dm = da;   // a_r = lf_r + m_{r-1}
        for (long e = tid; e < E; e += NT) {
            const A p = mb_mul(FB[r], dx[e]), l = fma(FB[r], dx[e], -p) + FB[r] * dxl[e];
            dx[e] = mb_add(p, l);
            dxl[e] = mb_sub(l, mb_sub(dx[e], p));
        }
        threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
    }
}
if (HAS_INIT) {
    for (long e = tid; e < E; e += NT) {
        const int d = int(e / DVX), c = int(e % DVX);
        if (c < DHHV) dC0[(sh * DHQK + d) * DHHV + c] = dx[e] + dxl[e];
        else dn0[sh * DHQK + d] = dx[e] + dxl[e];
    }
    if (tid == 0) dm0[sh] = dm;
}
