// mlstm_chunks.h — the split path's gates and chunk slots, shared by the
// mLSTM chunkwise kernels (forward and backward) through their headers (the
// catalog expands `#include "<this path>"`; see src/ops/catalog.c):
//  - mc_gates_*: a chunk's stabiliser and log weights from its raw gates
//    (a serial scan, a SIMD-group max-plus scan, the walk's pieces);
//  - mc_window_chunks: which chunks of a sequence a window of slots holds
//    and where their states and gate records sit; mc_slot_chunk: the chunk
//    a slot holds.
// Needs mlstm_tiles.h (lane shuffles) first.
/* The chunk's gates (rows r < Lc of f and i; the rest padding): U[r] the
 * log-sigmoid of f, IA[r] the input pre-activation (-inf for padding). */
template <int LL, int NTH, class TT>
METAL_FUNC void mc_gates_load(const device TT *f, const device TT *i, int Lc, threadgroup float *U,
                              threadgroup float *IA, int tid) {
    for (int r = tid; r < LL; r += NTH) {
        float lf = 0.0f, ig = -INFINITY;
        if (r < Lc) {
            const float fp = float(f[r]);
            lf = fp >= 0.0f ? -log1p(exp(-fp)) : fp - log1p(exp(fp));
            ig = float(i[r]);
        }
        U[r] = lf;
        IA[r] = ig;
    }
}
/* One thread runs the recurrence's stabiliser over the chunk from mp (the
 * state's m): m_r = max(lf_r + m_{r-1}, i_r), then U[r] = (lf_r + m_{r-1}) -
 * m_r <= 0 and IA[r] = i_r - m_r <= 0 in place, MR[r] = m_r; padding rows
 * get U 0, IA -inf and the last m. */
template <int LL>
METAL_FUNC void mc_gates_scan(threadgroup float *U, threadgroup float *IA, threadgroup float *MR, float mp, int Lc) {
    for (int r = 0; r < Lc; r++) {
        const float a = U[r] + mp, mr = max(a, IA[r]);
        U[r] = a - mr;
        IA[r] = IA[r] - mr;
        MR[r] = mr;
        mp = mr;
    }
    for (int r = Lc; r < LL; r++) {
        U[r] = 0.0f;
        IA[r] = -INFINITY;
        MR[r] = mp;
    }
}
/* The split path's gates of one chunk, one SIMD group: lane l holds rows
 * 2l and 2l + 1 (rows r < Lc; L <= 64), their forget and input
 * pre-activations fp and ip given by the caller (mc_gates_raw). The
 * stabiliser from mp as a max-plus scan over the lanes (a step x -> max(x +
 * lf, i) composes associatively: (a1, b1) then (a2, b2) is (a1 + a2, max(b1 +
 * a2, b2))), then per row U[r] = (lf_r + m_{r-1}) - m_r <= 0, IA[r] = i_r -
 * m_r <= 0, MR[r] = m_r, PRE[r] = sum_{s<=r} U_s and SUF[r] = sum_{s>r} U_s
 * (sums of terms of one sign, so accurate for any gates). Padding rows: U 0,
 * IA -inf, MR the last m. The arrays hold 64 rows; each lane writes and
 * reads only its own rows. Returns the chunk's last m, and in every lane
 * `total` = sum_r U_r (the log of the chunk's decay of the state). */
/* The part of mc_gates_simd that does not depend on the starting m: each
 * lane's log-forget and input gates (lf 0 and ig -inf past Lc) and the
 * composed step of the rows before its own (ea, eb: m before row 2 lane is
 * max(mp + ea, eb), lane > 0). */
METAL_FUNC void mc_gates_local(float fp0, float fp1, float ip0, float ip1, int Lc, uint lane, thread float *lf,
                               thread float *ig, thread float &ea, thread float &eb) {
    const int r0 = 2 * int(lane);
    const float fpv[2] = {fp0, fp1}, ipv[2] = {ip0, ip1};
    for (int e = 0; e < 2; e++) {
        lf[e] = 0.0f;
        ig[e] = -INFINITY;
        if (r0 + e < Lc) {
            const float x = fpv[e];
            lf[e] = x >= 0.0f ? -log1p(exp(-x)) : x - log1p(exp(x));
            ig[e] = ipv[e];
        }
    }
    float a = lf[0] + lf[1], b = max(ig[0] + lf[1], ig[1]);
    for (uint d = 1; d < 32; d <<= 1) {
        const float pa = mc_lane_up(a, d), pb = mc_lane_up(b, d);
        if (lane >= d) {
            b = max(pb + a, b);
            a = pa + a;
        }
    }
    ea = mc_lane_up(a, 1u);
    eb = mc_lane_up(b, 1u);
}
/* A chunk's last m from its first mp, as mc_gates_simd computes it (the same
 * operations in the same order, so the same float): from lane 31's ea, eb,
 * lf and ig (s[0..5]), its two rows applied in turn (L <= 64). */
METAL_FUNC float mc_gates_last_m(const threadgroup float *s, int Lc, float mp) {
    float m = max(mp + s[0], s[1]);
    for (int e = 0; e < 2; e++)
        if (62 + e < Lc) m = max(s[2 + 2 * e] + m, s[3 + 2 * e]);
    return m;
}
METAL_FUNC float mc_gates_simd(float fp0, float fp1, float ip0, float ip1, int Lc, float mp, uint lane,
                               threadgroup float *U, threadgroup float *IA, threadgroup float *MR,
                               threadgroup float *PRE, threadgroup float *SUF, thread float &total) {
    const int r0 = 2 * int(lane);
    float lf[2], ig[2], ea, eb;
    mc_gates_local(fp0, fp1, ip0, ip1, Lc, lane, lf, ig, ea, eb);
    float m = lane == 0 ? mp : max(mp + ea, eb);   // m at row r0 - 1
    float u[2];
    for (int e = 0; e < 2; e++) {
        const int r = r0 + e;
        if (r < Lc) {
            const float x = lf[e] + m, mr = max(x, ig[e]);
            u[e] = x - mr;
            IA[r] = ig[e] - mr;
            m = mr;
        } else {
            u[e] = 0.0f;
            IA[r] = -INFINITY;
        }
        U[r] = u[e];
        MR[r] = m;
    }
    const float pair = u[0] + u[1];
    const float before = mc_lane_prefix_excl(pair, lane);   // rows < r0
    PRE[r0] = before + u[0];
    PRE[r0 + 1] = (before + u[0]) + u[1];
    total = mc_lane((before + u[0]) + u[1], 31u);   // PRE of the last row (padding adds zeros)
    const float rev = mc_lane(pair, 31u - lane);   // lane l holds lane 31 - l's pair
    const float suf = mc_lane(mc_lane_prefix_excl(rev, lane), 31u - lane);   // rows > r0 + 1
    SUF[r0 + 1] = suf;
    SUF[r0] = suf + u[1];
    return mc_lane(m, 31u);
}
/* The raw gates mc_gates_simd takes: lane l's rows 2l and 2l + 1 of the
 * chunk at token tb with n rows (0 past them). */
template <class TT>
METAL_FUNC void mc_gates_raw(const device TT *f, const device TT *i, long tb, int n, uint lane, thread float &fp0,
                             thread float &fp1, thread float &ip0, thread float &ip1) {
    const int r = 2 * int(lane);
    fp0 = r < n ? float(f[tb + r]) : 0.0f;
    ip0 = r < n ? float(i[tb + r]) : 0.0f;
    fp1 = r + 1 < n ? float(f[tb + r + 1]) : 0.0f;
    ip1 = r + 1 < n ? float(i[tb + r + 1]) : 0.0f;
}
/* The split path's gate walk (PHASE 3), one SIMD group: the state update's
 * weights of a chunk of Lc rows from mp — wj[j] = w_j (0 past Lc), sc[0] =
 * e_last, sc[1] = the chunk's last m, which it returns, sc[2] = log e_last. */
METAL_FUNC float mc_update_weights(float fp0, float fp1, float ip0, float ip1, int Lc, float mp, uint lane,
                                   threadgroup float *U, threadgroup float *IA, threadgroup float *MR,
                                   threadgroup float *PRE, threadgroup float *SUF, threadgroup float *wj,
                                   threadgroup float *sc) {
    float total;
    const float m = mc_gates_simd(fp0, fp1, ip0, ip1, Lc, mp, lane, U, IA, MR, PRE, SUF, total);
    for (int e = 0; e < 2; e++) {
        const int r = 2 * int(lane) + e;
        wj[r] = r < Lc ? exp(IA[r] + SUF[r]) : 0.0f;
    }
    if (lane == 0) {
        sc[0] = exp(total);
        sc[1] = m;
        sc[2] = total;
    }
    return m;
}
/* The chunks [ca, cb) of sequence seq's row for head `head` that the window
 * of slots [W0, W0 + WN) holds, the row's first token and length, and where
 * chunk c's state and gate record sit: index (slot * NH + head) wsx0 + (c -
 * ca) * wstep — dense, chunk c of sequence s is slot c * NSEQ + s; packed,
 * cu[s] / L + s + c. */
template <int LL, bool VL, class CU>   // CU: int32 with VL, else whatever array was bound
METAL_FUNC void mc_window_chunks(const device CU *cu, long seq, int head, int S, int NH, int NSEQ, int W0, int WN,
                                 thread long &tokbase, thread int &len, thread int &ca, thread int &cb,
                                 thread long &wsx0, thread long &wstep) {
    if (VL) {
        const int s0 = clamp(int(cu[seq]), 0, S), s1 = clamp(int(cu[seq + 1]), 0, S);
        tokbase = long(head) * S + s0;
        len = max(s1 - s0, 0);
        const int base = s0 / LL + int(seq);   // the sequence's first slot
        ca = max(W0 - base, 0);
        cb = min(W0 + WN - base, (len + LL - 1) / LL);
        wsx0 = long(base + ca - W0) * NH + head;
        wstep = NH;
    } else {
        tokbase = (seq * NH + head) * long(S);
        len = S;
        ca = W0 / NSEQ;
        cb = min((W0 + WN) / NSEQ, (len + LL - 1) / LL);
        wsx0 = seq * NH + head;
        wstep = long(NSEQ) * NH;
    }
}
/* The chunk that slot gslot holds for head `head` (the inverse of the slot
 * map above): its sequence, the row's first token and length, and the
 * chunk's index c (outside [0, ceil(len / LL)) for an empty slot; c < 0 only
 * for offsets the GPU does not check, cu[0] != 0). */
template <int LL, bool VL, class CU>
METAL_FUNC void mc_slot_chunk(const device CU *cu, long gslot, int head, int S, int NH, int NSEQ, thread long &seq,
                              thread long &tokbase, thread int &len, thread int &c) {
    if (VL) {   // the sequence whose slots hold gslot: the last with base <= gslot
        int lo = 0, hi = NSEQ - 1;
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (long(clamp(int(cu[mid]), 0, S) / LL + mid) <= gslot) lo = mid;
            else hi = mid - 1;
        }
        seq = lo;
        const int s0 = clamp(int(cu[seq]), 0, S), s1 = clamp(int(cu[seq + 1]), 0, S);
        tokbase = long(head) * S + s0;
        len = max(s1 - s0, 0);
        c = int(gslot - long(s0 / LL + int(seq)));
    } else {
        seq = gslot % NSEQ;
        c = int(gslot / NSEQ);
        tokbase = (seq * NH + head) * long(S);
        len = S;
    }
}
