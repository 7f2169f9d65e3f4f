// mlstm_walk.h — the chunk walk of the mLSTM split path, shared by the
// forward (its chunk-start states) and the backward (the state gradients,
// the same walk from the last chunk), included by the kernels' headers.
// Needs mlstm_tiles.h and mlstm_chunks.h first.
//
// mc_walk_states: one threadgroup of 128 threads per (sequence, head, DS rows
// of the state from row k0, TV columns from v0) walks the sequence's chunks
// of the window [W0, W0 + WN) in order (REV: from the last), its tile of X =
// [C | n] (n: the first column tile only) in float32 registers. Before each
// chunk it stores X into the chunk's slot (C as T into x_chunk, n as float
// into xn_chunk), then X' = decay X + Ak^T [s * Av | nc] with Ak the chunk's
// rows of kx (L x DHQK), Av its rows of vx (L x DHHV), and per row j the
// scale s_j, the n column's value nc_j and the chunk's decay from its slot's
// record in rec (GWN floats: s at 0, nc at NOFF, the decay at DOFF). X starts
// from (a_c, a_n) when start is 1, (b_c, b_n) when 2 (each (sequence x NH) x
// DHQK x DHHV and x DHQK, read as float), else zero, and ends in end_c /
// end_n (float32) when has_end.
// Forward: kx = k, vx = v, rec = the gate records (w_j; nc = w_j; e_last);
// with 16-bit T the n column is two operand columns, nc's 16-bit value and
// its remainder, whose two float sums make n (a 16-bit n moved q^.n by up to
// 0.4%, enough to take the other branch of max(|q^.n|, exp(-m)) near a tie).
// Backward: kx = q, vx = dh, rec = scale e_r / den_r, scale e_r ds_r, e_last;
// X is then dX, stored before each chunk's own rows are added; its n column
// is summed in float32 (see the REV branch).
// SC (the float32 forward on scaled float16 tiles, T = half; chunkwise.c):
// k and v are rows of float16 with a power-of-two exponent per token, and
// the record holds s_j = w_j 2^(ek_j + ev_j) at 0, nc_j = w_j 2^ek_j at
// NOFF, the decay's log at DOFF and at DOFF + 2, DOFF + 3 the exponents ts,
// tn that bring max |s| and max |nc| into [0.5, 1) (the gate walk computed
// them). Per chunk the rows of v are scaled by s_j 2^-ts (a 16-bit value of
// at most 2^15) and the n column by nc_j 2^-tn, the float32 state by the
// decay times 2^-ts (its n column 2^-tn) before the product and by 2^ts
// after it — exact, and the scales never push the state past float's range:
// ts is raised to at least the decayed state's exponent less 90 (terms that
// far below the state do not move it). The state goes
// into its slot as float16 with one exponent ec for the tile (its largest
// element in [2^14, 2^15); ec at least -126) and 2^ec, the factor that
// restores it, in each of the tile's columns of ce_chunk[(slot * KT + row
// tile) * DHHV + column] (CE float32; any array where SC is false). One
// exponent per tile as one per row of q, k and v: an element far below its
// tile's largest keeps float16's absolute precision at that scale.
// grp is the threadgroup's index; threadgroup memory at smem: T: two
// buffers of L x (DS + 8) and L x (TV + 16), and (16-bit T) 4 x 16 x (TV + 8)
// staging, 16-byte rounded; then float: two records of GWN, and (SC) the
// SIMD groups' maxima of C and of n (8).
template <class T, int L, int DS, int TV, bool VEC, bool VL, bool REV, int GWN, int NOFF, int DOFF, bool SC = false,
          class CU, class AC, class AN, class BC, class BN, class EC, class EN, class CE>
METAL_FUNC void mc_walk_states(threadgroup uchar *smem, int tid, long grp, const device T *kx, const device T *vx,
                               const device float *rec, device T *x_chunk, device float *xn_chunk, int start,
                               const device AC *a_c, const device AN *a_n, const device BC *b_c,
                               const device BN *b_n, bool has_end, device EC *end_c,
                               device EN *end_n, const device CU *cu, int S, int NH, int DHQK, int DHHV, int NSEQ,
                               int W0, int WN, int VT, int KT, device CE *ce_chunk) {
    const int warp = tid / 32;
    const uint lane = uint(tid % 32);
    const int g = int(lane >> 2), qd = int(lane & 3u);
    constexpr int NW1 = 4, NT1 = NW1 * 32;
    constexpr int VTC = TV / 8;                    // column tiles of C
    constexpr int RT = DS / 16;                    // row tiles (<= NW1)
    constexpr int CPW = VTC + 1;                   // this group's tiles
    constexpr int LDK = DS + 8, LDV = TV + 16;     // odd multiples of 8
    constexpr int LDST = TV + 8;                   // the state's staging rows (16-bit T)
    constexpr int ST_ELEMS = sizeof(T) == 2 ? NW1 * 16 * LDST : 0;
    // threadgroup memory: T: KS[2] (L x LDK), VS[2] (L x LDV), STG (NW1 x 16
    // x LDST, 16-bit T only); float: GW[2] (GWN: this chunk's and the next's)
    constexpr int T_BYTES = ((2 * L * LDK + 2 * L * LDV + ST_ELEMS) * int(sizeof(T)) + 15) / 16 * 16;
    threadgroup T *KS = (threadgroup T *)smem;
    threadgroup T *VS = KS + 2 * L * LDK;
    threadgroup T *STG = VS + 2 * L * LDV + warp * 16 * LDST;   // this SIMD group's 16 rows
    threadgroup float *GW = (threadgroup float *)(smem + T_BYTES);
    threadgroup float *CMW = GW + 2 * GWN;   // SC: the SIMD groups' maxima of C, then of n
    const int vt = int(grp % VT);
    grp /= VT;
    const int kt = int(grp % KT);
    grp /= KT;
    const int head = int(grp % NH);
    const long seq = grp / NH;
    const long sidx = seq * NH + head;
    const int k0 = kt * DS, v0 = vt * TV;
    long tokbase, wsx0, WSTEP;   // chunk c's slot index: wsx0 + (c - ca) * WSTEP
    int len, ca, cb;
    mc_window_chunks<L, VL>(cu, seq, head, S, NH, NSEQ, W0, WN, tokbase, len, ca, cb, wsx0, WSTEP);
    const int clive = warp < RT ? (vt == 0 ? VTC + 1 : VTC) : 0;   // tiles this group computes
    const int rbase = k0 + 16 * warp + g;   // this lane's rows: rbase, rbase + 8

    // the starting state
    float cst[CPW][4];
    #pragma unroll
    for (int u = 0; u < CPW; u++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) {
            const int row = rbase + 8 * (e >> 1), col = u * 8 + 2 * qd + (e & 1);
            float x = 0.0f;
            if (u < clive && row < DHQK) {
                if (col < TV) {
                    if (v0 + col < DHHV) {
                        const long at = (sidx * DHQK + row) * DHHV + v0 + col;
                        x = start == 1 ? float(a_c[at]) : start == 2 ? float(b_c[at]) : 0.0f;
                    }
                } else if (col == TV) {
                    x = start == 1 ? float(a_n[sidx * DHQK + row]) : start == 2 ? float(b_n[sidx * DHQK + row]) : 0.0f;
                }
            }
            cst[u][e] = x;
        }
    }
    for (int e = tid; e < 2 * L * LDV; e += NT1) VS[e] = T(0);   // the n column's padding
    threadgroup_barrier(mem_flags::mem_threadgroup);

    // Chunk c's slot holds its gate record (written by PHASE 3) and gets its
    // state; buffer buf of KS, VS and GW is this chunk's, buf ^ 1 the next
    // one's, each copied in while the previous chunk runs.
    const int nch = max(cb - ca, 0);
    if (nch > 0) {
        const int c0 = REV ? cb - 1 : ca;
        const long tb = tokbase + long(c0) * L;
        const int Lc = min(L, len - c0 * L);
        mc_load_async<float, 1, GWN, NT1, true, false>(GW, GWN, rec + (wsx0 + (c0 - ca) * WSTEP) * GWN, GWN, 1, GWN,
                                                       tid);
        mc_load_async<T, L, DS, NT1, VEC, false>(KS, LDK, kx + tb * DHQK + k0, DHQK, Lc, DHQK - k0, tid);
        mc_load_async<T, L, TV, NT1, VEC>(VS, LDV, vx + tb * DHHV + v0, DHHV, Lc, DHHV - v0, tid);
    }
    for (int it = 0; it < nch; it++) {
        const int c = REV ? cb - 1 - it : ca + it, cn = REV ? c - 1 : c + 1;   // this chunk, the next one
        const int buf = it & 1;
        const long tb = tokbase + long(c) * L, tn = tokbase + long(cn) * L;
        threadgroup T *KB = KS + buf * L * LDK;
        threadgroup T *VB = VS + buf * L * LDV;
        threadgroup float *wj = GW + buf * GWN;   // the row scales, the n column at NOFF, the decay at DOFF
        mc_wait_copies();
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (it + 1 < nch) {   // the next chunk's record, k and v come in while this one runs
            const int ln = min(L, len - cn * L);
            mc_load_async<float, 1, GWN, NT1, true, false>(GW + (buf ^ 1) * GWN, GWN,
                                                           rec + (wsx0 + (cn - ca) * WSTEP) * GWN, GWN, 1, GWN, tid);
            mc_load_async<T, L, DS, NT1, VEC, false>(KS + (buf ^ 1) * L * LDK, LDK, kx + tn * DHQK + k0, DHQK, ln,
                                                     DHQK - k0, tid);
            mc_load_async<T, L, TV, NT1, VEC>(VS + (buf ^ 1) * L * LDV, LDV, vx + tn * DHHV + v0, DHHV, ln,
                                              DHHV - v0, tid);
        }
        // the state before chunk c, into its slot for phase 2 (16-bit T and
        // VEC: each lane's two neighbouring columns as one 32-bit store)
        const long wsx = wsx0 + (c - ca) * WSTEP;
        // SC: the exponent ec of the tile's largest element (the tile goes
        // into the slot times 2^-ec, its largest then in [2^14, 2^15); ec at
        // least -126) through the SIMD groups' maxima in threadgroup memory,
        // 2^ec into each of the tile's columns of ce_chunk, and the exponents
        // of the largest C and n (the clamps of ts and tn below)
        float cs = 1.0f;
        int ec_c = -127, ec_n = -127;
        if constexpr (SC) {
            float x = 0.0f, xn = max(fabs(cst[VTC][0] + cst[VTC][1]), fabs(cst[VTC][2] + cst[VTC][3]));
            #pragma unroll
            for (int u = 0; u < VTC; u++)
                #pragma unroll
                for (int e = 0; e < 4; e++) x = max(x, fabs(cst[u][e]));
            for (uint d = 1; d < 32; d *= 2) {
                x = max(x, mc_lane(x, lane ^ d));
                xn = max(xn, mc_lane(xn, lane ^ d));
            }
            if (lane == 0) CMW[warp] = x, CMW[NW1 + warp] = xn;
            threadgroup_barrier(mem_flags::mem_threadgroup);
            const float tmax = max(max(CMW[0], CMW[1]), max(CMW[2], CMW[3]));
            const float nmax = max(max(CMW[4], CMW[5]), max(CMW[6], CMW[7]));
            const int ec = tmax > 0.0f && isfinite(tmax) ? max(mc_expo(tmax) - 14, -126) : 0;
            cs = mc_pow2(-ec);
            for (int col = tid; col < TV; col += NT1)
                if (v0 + col < DHHV) ce_chunk[(wsx * KT + kt) * DHHV + v0 + col] = CE(mc_pow2(ec));
            ec_c = mc_expo(tmax);   // (-127 for a zero tile)
            ec_n = mc_expo(nmax);
        }
        bool staged = false;
        if constexpr (sizeof(T) == 2 && VEC && TV == 64) {
            // whole 128-byte rows: the SIMD group's 16 x 64 tile through
            // threadgroup memory, then 16 bytes per lane, four rows per store
            // (each lane's pairs alone would half-fill every 32-byte sector)
            staged = v0 + TV <= DHHV;
            if (staged && warp < RT) {
                #pragma unroll
                for (int u = 0; u < VTC; u++)
                    #pragma unroll
                    for (int hf = 0; hf < 2; hf++)
                        *(threadgroup uint *)(STG + (g + 8 * hf) * LDST + u * 8 + 2 * qd) =
                            SC ? mc_pack2<T>(cst[u][2 * hf] * cs, cst[u][2 * hf + 1] * cs)
                               : mc_pack2<T>(cst[u][2 * hf], cst[u][2 * hf + 1]);
                simdgroup_barrier(mem_flags::mem_threadgroup);
                #pragma unroll
                for (int it = 0; it < 4; it++) {
                    const int r = 4 * it + int(lane >> 3), ch = int(lane & 7u) * 8, row = k0 + 16 * warp + r;
                    if (row < DHQK)
                        *(device uint4 *)(x_chunk + (wsx * DHQK + row) * DHHV + v0 + ch) =
                            *(const threadgroup uint4 *)(STG + r * LDST + ch);
                }
            }
        }
        #pragma unroll
        for (int u = 0; u < VTC && !staged; u++) {
            #pragma unroll
            for (int hf = 0; hf < 2; hf++) {
                const int row = rbase + 8 * hf, col = v0 + u * 8 + 2 * qd;
                if (u < clive && row < DHQK) {
                    device T *dst = x_chunk + (wsx * DHQK + row) * DHHV + col;
                    const float x0 = SC ? cst[u][2 * hf] * cs : cst[u][2 * hf];
                    const float x1 = SC ? cst[u][2 * hf + 1] * cs : cst[u][2 * hf + 1];
                    if constexpr (sizeof(T) == 2 && VEC) {
                        if (col < DHHV) *(device uint *)dst = mc_pack2<T>(x0, x1);
                    } else {
                        if (col < DHHV) dst[0] = T(x0);
                        if (col + 1 < DHHV) dst[1] = T(x1);
                    }
                }
            }
        }
        if (vt == 0 && qd == 0 && warp < RT)
            for (int hf = 0; hf < 2; hf++)
                if (rbase + 8 * hf < DHQK) xn_chunk[wsx * DHQK + rbase + 8 * hf] = cst[VTC][2 * hf] + cst[VTC][2 * hf + 1];
        // SC: the scales of this chunk's product, raised to the state's
        // exponent less 90 where the chunk's terms are that far below it
        // (and within [-126, 127], so that 2^ts and 2^-ts are floats: terms
        // under 2^-126 are float32's subnormals whatever the path). The
        // state's exponent is taken after the decay (the record's log decay):
        // a state the decay takes under float's range must not hold the
        // scales up (hostile gates once flushed a chunk's own terms so)
        int sts = 0, stn = 0;
        if constexpr (SC) {
            const int de = mc_exp_expo(wj[DOFF]);   // log2 of the decay, rounded down
            sts = clamp(max(int(wj[DOFF + 2]), ec_c > -127 ? ec_c + de - 90 : -1000), -126, 127);
            stn = clamp(max(int(wj[DOFF + 3]), ec_n > -127 ? ec_n + de - 90 : -1000), -126, 127);
        }
        // [w v | w] in place, 8 columns per step (w_j as the n column, first
        // column tile only); each of the first RS * VTC threads the same 8
        // columns of every RS-th row
        {
            constexpr int RS = NT1 / VTC;
            const int c8 = (tid % VTC) * 8;
            #pragma unroll
            for (int it = 0; it < (L + RS - 1) / RS; it++) {
                const int jj = tid / VTC + it * RS;
                if (tid < RS * VTC && jj < L) {
                    const float w = SC ? mc_ldexp(wj[jj], -sts) : wj[jj];
                    threadgroup T *row = VB + jj * LDV + c8;
                    if constexpr (sizeof(T) == 2) {
                        mc_scale8(row, w);
                    } else {
                        #pragma unroll
                        for (int x = 0; x < 8; x++) row[x] = T(float(row[x]) * w);
                    }
                }
            }
        }
        if (vt == 0)
            for (int jj = tid; jj < L; jj += NT1) {
                // the n column: the forward's as two operand columns, w's 16-bit
                // value and its remainder (n = their two sums, to about 2^-17
                // relative, at no cost in the product: the tile is computed
                // anyway); the backward's in float32 FMAs below
                const float w = SC ? mc_ldexp(wj[NOFF + jj], -stn) : wj[NOFF + jj];
                const T hi = REV ? T(0) : T(w);
                VB[jj * LDV + TV] = hi;
                if (sizeof(T) == 2) VB[jj * LDV + TV + 1] = REV ? T(0) : T(w - float(hi));
            }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        // SC: the decay and 2^-ts as one factor from the log decay
        {
            const float decay = SC ? mc_exp_ldexp(wj[DOFF], -sts) : wj[DOFF];
            #pragma unroll
            for (int u = 0; u < VTC; u++)
                #pragma unroll
                for (int e = 0; e < 4; e++) cst[u][e] *= decay;
            const float decay_n = SC ? mc_exp_ldexp(wj[DOFF], -stn) : decay;
            #pragma unroll
            for (int e = 0; e < 4; e++) cst[VTC][e] *= decay_n;
        }
        // (SIMD groups past the tile's rows skip it: their A fragment would be
        // columns past DS — the other buffer, which the next chunk's copies
        // are filling; mc_row_tiles reads nothing with no tile live)
        if (clive > 0) mc_row_tiles<T, CPW>(cst, KB + 16 * warp, 1, LDK, VB, LDV, 1, L, clive, lane);
        if constexpr (SC)
            #pragma unroll
            for (int u = 0; u < CPW; u++)
                #pragma unroll
                for (int e = 0; e < 4; e++) cst[u][e] *= mc_pow2(u < VTC ? sts : stn);
        // REV (the backward): the n column's values in float32 FMAs rather than
        // as rounded operand columns — dn and dC's columns nearly cancel in dk
        // where a state is nearly rank one, and a 16-bit n column swamped the
        // difference. Four partial sums keep the chain short.
        if (REV && vt == 0 && qd == 0 && warp < RT)
            for (int hf = 0; hf < 2; hf++) {
                const int kc = 16 * warp + g + 8 * hf;
                float x0 = 0.0f, x1 = 0.0f, x2 = 0.0f, x3 = 0.0f;
                #pragma unroll 4
                for (int jj = 0; jj + 3 < L; jj += 4) {
                    x0 = fma(float(KB[jj * LDK + kc]), wj[NOFF + jj], x0);
                    x1 = fma(float(KB[(jj + 1) * LDK + kc]), wj[NOFF + jj + 1], x1);
                    x2 = fma(float(KB[(jj + 2) * LDK + kc]), wj[NOFF + jj + 2], x2);
                    x3 = fma(float(KB[(jj + 3) * LDK + kc]), wj[NOFF + jj + 3], x3);
                }
                for (int jj = L & ~3; jj < L; jj++) x0 = fma(float(KB[jj * LDK + kc]), wj[NOFF + jj], x0);
                cst[VTC][2 * hf] += (x0 + x1) + (x2 + x3);
            }
    }
    // the state after the window
    #pragma unroll
    for (int u = 0; u < CPW; u++) {
        if (u < clive)
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                const int row = rbase + 8 * (e >> 1), col = u * 8 + 2 * qd + (e & 1);
                if (has_end && row < DHQK) {
                    if (col < TV) {
                        if (v0 + col < DHHV) end_c[(sidx * DHQK + row) * DHHV + v0 + col] = cst[u][e];
                    } else if (col == TV) end_n[sidx * DHQK + row] = cst[u][e] + cst[u][e | 1];
                }
            }
    }

}
