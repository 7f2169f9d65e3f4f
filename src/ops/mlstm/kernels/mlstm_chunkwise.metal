// mlstm_chunkwise: the chunkwise form of the mLSTM cell (mLSTMexp), in two
// ways that share the math below and this file's tile helpers:
//  - FUSED (PHASE 0): each threadgroup walks the chunks of one sequence in
//    order, keeps its slice of the state in registers (float32) and writes h
//    chunk by chunk, so no chunk state ever goes to device memory;
//  - SPLIT (chunks of at most 64 rows): PHASE 3 walks the gates once per
//    (sequence, head) and stores each chunk's gate record; PHASE 1 walks the
//    chunks with the state in registers and stores each chunk's starting
//    state (C in T, n in float32; m from PHASE 3) in device memory; PHASE 2
//    then computes h of every chunk at
//    once, one threadgroup per (chunk, head). Far more threadgroups run side by
//    side than in the fused walk, at the price of the states' memory traffic.
//    Inputs may run in windows of chunks (chunkwise.c), the state carried from
//    one to the next in C_out, n_out, m_out (float32).
//   Per chunk (rows r = 0..Lc-1, Lc <= L; a tail chunk is a shorter chunk),
//   with the stabiliser run exactly as the recurrence runs it:
//     m_r = max(lf_r + m_{r-1}, i_r)      (m_{-1}: the state's m)
//     U_r = (lf_r + m_{r-1}) - m_r <= 0   (log of the step's forget factor)
//     IA_j = i_j - m_j <= 0               (log of the step's input factor)
//   log w_rj = IA_j + sum_{s=j+1..r} U_s  (key j's weight in row r, j <= r)
//   log e_r  = sum_{s=0..r} U_s           (the chunk-start state's weight)
//   h_r = (e_r q^_r C + sum_j w_rj (q^_r . k_j) v_j)
//         / (max(|e_r q^_r . n + sum_j w_rj (q^_r . k_j)|, exp(-m_r)) + eps)
//   C' = e_last C + sum_j w_last,j k_j v_j^T,  n' likewise with k_j,  m' = m_last.
//   Every log weight is a sum of terms of one sign (U <= 0, IA <= 0), built as
//   direct sums (per-block prefix and suffix sums, block totals, and a serial
//   scan per row inside the diagonal block), never as a difference of long
//   prefix sums: a weight that matters (log w > -20) has all its terms small,
//   so it keeps float32's relative accuracy for any gates.
// Grid: one threadgroup of 256 threads (8 simdgroups) per (sequence, head,
// tile of TV columns of h and C). The normaliser rides along as one more
// column: v gets a column of ones (so P [v | 1] gives the numerator and
// sum_j w_rj q^.k_j at once), C gets n as that column (so q^ [C | n] gives the
// inter-chunk numerator and q^.n), and the state update K^T [w v | w] updates
// C and n together. Each chunk is cut into blocks of BLK = min(L, 64) rows;
// for each query block: S = Q K^T per key block (DHQK in slices of DS staged
// in threadgroup memory), P = S scale w (T, threadgroup memory), H += P [V|1],
// then H += (q^ e) [C|n]; then h = H / den. After the chunk's query blocks the
// state is updated in registers and copied (as T) to threadgroup memory for the
// next chunk's inter-chunk product.
// Matrix products (mlstm_tiles.h): mc_tile computes one 16 x 8 output tile in the tensor
// cores' m16n8 fragment layout (lane (g, q) = (lane / 4, lane % 4) holds rows
// g and g + 8, columns 2q and 2q + 1). On CUDA, bfloat16 and float16 operands
// use mma.sync.m16n8k16 (float accumulation), float32 operands 3xTF32
// mma.sync.m16n8k8 (float32 accuracy); every dtype on the CPU computes the
// same four elements with float FMAs in k order. Every loop that contains a barrier has a trip
// count uniform over the threadgroup; every thread reaches every barrier.
// RES (L <= 64, when its threadgroup memory fits): the chunk's q and k
// (all of DHQK) and v stay resident in threadgroup memory, so each is
// copied in once per chunk, the copies overlapping the previous chunk's
// work (see the RES branch); the general path streams DHQK in slices.
// SPLIT's stabiliser and weights come from mc_gates_simd (one SIMD group,
// a max-plus scan): the same values as the serial scan up to rounding.
// Template: T (input dtype), L (chunk, a power of two >= 16), DKP (DHQK
// padded: to 16 up to 64 or with RES, else to 64), DS (DHQK slice, min(DKP,
// 64)), TV (columns per threadgroup, a multiple of 8), HAS_INIT (C0, n0, m0
// given), VARLEN (cu gives the sequences), STATES_OUT (write C_out, n_out,
// m_out), VEC (q, k, v rows 16-byte aligned: cp.async on CUDA), RES, TF32
// (float32 products as one TF32 pass on CUDA: alloy_precision DEFAULT where
// the fused path runs it), SCALED (split path, T = half: q, k, v are float32
// inputs as float16 rows with a power-of-two exponent each, mlstm_f16_rows;
// xe holds the exponents, q's rows then k's then v's; h is float32; the gate
// records hold the exponents folded in (2 L + 4 floats: s_j = w_j 2^(ek +
// ev), log e_last, the last m, the exponents ts and tn of max |s| and max |nc|,
// then nc_j = w_j 2^ek), c_chunk the states as float16 tiles and ce_chunk
// (float32, slots x NH x KT x DHHV) each tile's factor 2^ec in each of its
// columns — mlstm_walk.h and PHASE 2 say how each is applied), RB
// (mc_row_tiles' MODE, mlstm_tiles.h: 1; 0 or 2 for timing), PHASE (0
// fused, 1, 2 and 3 split: DS and TV then give phase 1's tile of C, or phase
// 2's DHQK slice and columns of h). Split outputs: c_chunk (T),
// n_chunk, m_chunk (float32), the window's slots x NH chunk-start states, and
// g_chunk (float32, slots x NH x (L + 4)) their gate records; the fused
// launch binds them to h and never touches them; ce_chunk and xe (SCALED
// only) are bound to any array otherwise.
// Launch constants: int S (tokens per (batch, head) row: S, or the packed
// total), int NH, int DHQK, int DHHV, int VT (column tiles), int KT (phase
// 1's row tiles), int NSEQ (sequences), int W0, WN (the window's first slot
// and its slots), int CARRY (phases 1 and 3 start from C_out, n_out, m_out), float scale
// (DHQK^-1/2), float eps. Inputs absent (no initial state, no cu, no state
// outputs) are bound to any array and never touched.
// Launch: FUSED grid = (NSEQ * NH * VT * 256, 1, 1), threadgroup = (256, 1, 1);
// PHASE 1 NSEQ * NH * KT * VT and PHASE 2 WN * NH threadgroups of (128, 1, 1),
// PHASE 3 NSEQ * NH of (1024, 1, 1);
// threadgroup memory = the bytes chunkwise.c computes for each branch, laid
// out as in the branches below.
//! name: alloy_mlstm_chunkwise
//! inputs: q k v i f C0 n0 m0 cu xe
//! outputs: h C_out n_out m_out c_chunk n_chunk m_chunk g_chunk ce_chunk
//! template: T=float32
//! template: L=64
//! template: DKP=64
//! template: DS=64
//! template: TV=64
//! template: HAS_INIT=false
//! template: VARLEN=false
//! template: STATES_OUT=true
//! template: VEC=false
//! template: RES=false
//! template: TF32=false
//! template: SCALED=false
//! template: PHASE=0
//! template: RB=1
//! header:
#define MC_ROW_TILES_MODE ALLOY_TEMPLATE_RB /* mlstm_tiles.h's B-fragment batching (chunkwise.c: 1, or for timing) */
#if defined(ALLOY_BACKEND_CUDA) && ALLOY_TEMPLATE_PHASE == 1
/* phase 1 at most 128 registers: four threadgroups per SM (ptxas takes 137
 * without the bound, and spills nothing with it) */
#undef ALLOY_CUDA_LAUNCH_BOUNDS
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(128, 4)
#endif
#if ALLOY_TEMPLATE_TF32
#define MC_TF32_ONE_PASS /* float32 products as one TF32 pass (mlstm_tiles.h) */
#endif
#include "src/ops/mlstm/kernels/mlstm_tiles.h"
#include "src/ops/mlstm/kernels/mlstm_chunks.h"
#include "src/ops/mlstm/kernels/mlstm_walk.h"
//! body:
constexpr int NW = 8;                      // simdgroups per threadgroup
constexpr int NT = NW * 32;                // threads
const int tid = int(thread_index_in_threadgroup);
const int warp = tid / 32;
const uint lane = uint(tid % 32);
const int g = int(lane >> 2), qd = int(lane & 3u);
const long ROWS = long(VARLEN ? 1 : NSEQ) * NH * S;   // rows of q, k and v (SCALED: xe's thirds)
(void)ROWS;
if constexpr (PHASE == 1) {
    // ---- SPLIT, phase 1: the chunk-start states (mlstm_walk.h) ------------
    // One threadgroup of 128 threads per (sequence, head, DS rows of C, TV
    // columns) walks the window's chunks in order; before each chunk it
    // stores the state into the chunk's slot (C as T, n as float) for phase
    // 2, and at the end into the carry (C_out, n_out: float32), which the
    // next window starts from (the first starts from C0, n0 or zeros). Per
    // chunk C' = e_last C + K^T [w v | w] with PHASE 3's gate records.
    mc_walk_states<T, L, DS, TV, VEC, VARLEN, false, SCALED ? 2 * L + 4 : L + 4, SCALED ? L + 4 : 0, L, SCALED>(
        alloy_threadgroup_memory, tid, long(threadgroup_position_in_grid.x), k, v, g_chunk, c_chunk, n_chunk,
        CARRY ? 1 : (HAS_INIT ? 2 : 0), C_out, n_out, C0, n0, true, C_out, n_out, cu, S, NH, DHQK, DHHV, NSEQ, W0, WN,
        VT, KT, ce_chunk);
} else if constexpr (PHASE == 2) {
    // ---- SPLIT, phase 2: h of one chunk ------------------------------------
    // One threadgroup of 128 threads per (slot of the window, head): one
    // chunk of one sequence, from the state phase 1 stored before it. SIMD
    // group w owns query rows 16w..16w+15 (L <= 64). S = Q K^T once (q and k
    // of the chunk resident), P = S scale w in threadgroup memory with the
    // row sums of P; then per TV columns of h: H = (q^ e_r) C (DHQK streamed
    // in slices of DS rows of C, double-buffered copies) + P V, and
    // h = H / (max(|e_r q^.n + sum_j P_rj|, exp(-m_r)) + eps).
    // Log weights: log w_rj = IA_j + sum_{s=j+1..r} U_s as sums of terms of
    // one sign: within 8-row blocks directly, across blocks as the key's
    // block suffix + the whole blocks between (BB) + the row's block prefix.
    constexpr int NW2 = 4, NT2 = NW2 * 32;
    constexpr int NSL = DKP / DS;                 // slices of DHQK
    constexpr int XT = TV / 8;                    // h tiles of a SIMD group per column tile
    constexpr int KTL = L / 8;                    // key tiles
    constexpr int LDK = DKP + 8, LDP = L + 8, LDC = TV + 8;   // odd multiples of 8
    // v's buffers: two, or three with one DHQK slice (NSL 1), where the copies two stages ahead are the
    // next-but-one column tile's v, which two buffers would put over the tile being multiplied
    constexpr int VBN = NSL == 1 ? 3 : 2;
    constexpr int KV_ELEMS = L * LDK > VBN * L * LDC ? L * LDK : VBN * L * LDC;
    // threadgroup memory: T: QS (L x LDK), KS (KV_ELEMS: k, later VB[VBN] (L x LDC)),
    // PS (L x LDP), CB[3] (DS x LDC); float: U, IA, MR, PRE, SUF, BPRE, BSUF (64 each), BB (64),
    // NS (DKP: the chunk's starting n); SCALED: int EQ, EK, EV (64 each: the rows' exponents), float
    // CEB[3] (TV: ce_chunk's row for CB's tile, its factor 2^ec in every column)
    constexpr int T_BYTES = ((L * LDK + KV_ELEMS + L * LDP + 3 * DS * LDC) * int(sizeof(T)) + 15) / 16 * 16;
    threadgroup T *QS = (threadgroup T *)alloy_threadgroup_memory;
    threadgroup T *KS = QS + L * LDK;
    threadgroup T *PS = KS + KV_ELEMS;
    threadgroup T *CB = PS + L * LDP;
    threadgroup float *U = (threadgroup float *)(alloy_threadgroup_memory + T_BYTES);
    threadgroup float *IA = U + 64;
    threadgroup float *MR = IA + 64;
    threadgroup float *PRE = MR + 64;
    threadgroup float *SUF = PRE + 64;
    threadgroup float *BPRE = SUF + 64;
    threadgroup float *BSUF = BPRE + 64;
    threadgroup float *BB = BSUF + 64;
    threadgroup float *NS = BB + 64;
    threadgroup int *EQ = (threadgroup int *)(NS + DKP);
    threadgroup int *EK = EQ + 64;
    threadgroup int *EV = EK + 64;
    threadgroup float *CEB = (threadgroup float *)(EV + 64);
    const long grp = long(threadgroup_position_in_grid.x);
    const int head = int(grp % NH);
    const long slotw = grp / NH;
    const long gslot = long(W0) + slotw;
    long seq, tokbase;
    int len, c;
    mc_slot_chunk<L, VARLEN>(cu, gslot, head, S, NH, NSEQ, seq, tokbase, len, c);
    if (c < 0 || c >= (len + L - 1) / L) return;   // the whole group: an empty slot (c < 0: offsets
                                                    // the GPU does not check, cu[0] != 0)
    const int Lc = min(L, len - c * L);
    const long tb = tokbase + long(c) * L;
    const long wsx = slotw * NH + head;
    const int r0 = 16 * warp;              // this SIMD group's first row
    const bool rows_live = r0 < Lc;

    // copies, a commit group each: q and k of the chunk; the first two slices of C
    // (stage st: column tile st / NSL, DHQK slice st % NSL, into CB[st % 3])
    const int nst = VT * NSL;
    mc_load_async<T, L, DKP, NT2, VEC, false>(QS, LDK, q + tb * DHQK, DHQK, Lc, DHQK, tid);
    mc_load_async<T, L, DKP, NT2, VEC>(KS, LDK, k + tb * DHQK, DHQK, Lc, DHQK, tid);
    for (int st = 0; st < 2; st++) {
        const int vn = st / NSL, sn = st % NSL;
        if (st < nst) {
            mc_load_async<T, DS, TV, NT2, VEC, false>(CB + st * DS * LDC, LDC,
                                                      c_chunk + (wsx * DHQK + sn * DS) * DHHV + vn * TV, DHHV,
                                                      DHQK - sn * DS, DHHV - vn * TV, tid);
            if constexpr (SCALED)
                mc_load_row<TV, NT2, VEC>(CEB + st * TV, ce_chunk + (wsx * NSL + sn) * DHHV + vn * TV, DHHV - vn * TV,
                                           tid);
        }
        mc_copies_commit();
    }
    // n into threadgroup memory (its loads overlap the gates'), then the
    // gates (SIMD group 0), from the m stored before the chunk
    for (int d = tid; d < DKP; d += NT2) NS[d] = d < DHQK ? n_chunk[wsx * DHQK + d] : 0.0f;
    if constexpr (SCALED)
        for (int r = tid; r < 64; r += NT2) {
            EQ[r] = r < Lc ? int(xe[tb + r]) : 0;
            EK[r] = r < Lc ? int(xe[ROWS + tb + r]) : 0;
            EV[r] = r < Lc ? int(xe[2 * ROWS + tb + r]) : 0;
        }
    if (warp == 0) {
        float fp0, fp1, ip0, ip1, total;
        mc_gates_raw(f, i, tb, Lc, lane, fp0, fp1, ip0, ip1);
        mc_gates_simd(fp0, fp1, ip0, ip1, Lc, float(m_chunk[wsx]), lane, U, IA, MR, PRE, SUF, total);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid < 64) {   // sums of U inside 8-row blocks: through row r, after row r
        const int b0 = tid & ~7;
        float p = 0.0f, s = 0.0f;
        for (int x = b0; x <= tid; x++) p += U[x];
        for (int x = tid + 1; x < b0 + 8; x++) s += U[x];
        BPRE[tid] = p;
        BSUF[tid] = s;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid < 64) {   // BB[a][b]: U over the whole blocks strictly between blocks a < b
        const int a = tid / 8, b = tid % 8;
        float s = 0.0f;
        for (int x = a + 1; x < b; x++) s += BPRE[8 * x + 7];
        BB[tid] = s;
    }
    // q^ . n per row (float32 n), this lane's rows r0 + g and r0 + g + 8
    mc_wait_copies_but<2>();
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float qn[2] = {0.0f, 0.0f};
    for (int d = qd; r0 < L && d < DHQK; d += 4) {
        const float nd = NS[d];
        qn[0] = fma(float(QS[(r0 + g) * LDK + d]), nd, qn[0]);
        qn[1] = fma(float(QS[(r0 + g + 8) * LDK + d]), nd, qn[1]);
    }
    for (int e = 0; e < 2; e++) {
        qn[e] += mc_lane(qn[e], lane ^ 1u);
        qn[e] += mc_lane(qn[e], lane ^ 2u);
        if constexpr (SCALED) qn[e] = mc_ldexp(qn[e], EQ[min(r0 + g + 8 * e, 63)]);
    }
    // S = Q K^T for the key tiles up to this SIMD group's diagonal
    float sacc[KTL][4];
    #pragma unroll
    for (int u = 0; u < KTL; u++)
        #pragma unroll
        for (int e = 0; e < 4; e++) sacc[u][e] = 0.0f;
    const int slive = rows_live ? min(KTL, 2 * warp + 2) : 0;
    mc_row_tiles<T, KTL>(sacc, QS + r0 * LDK, LDK, 1, KS, 1, LDK, DKP, slive, lane);
    // P = S scale w (T); its row sums in float32, before rounding: when q^ . n
    // cancels the row sum nearly away, sums of rounded P would leave a
    // denominator of rounding error alone. SCALED: p in true units (q's and k's
    // exponents folded in), and the P that multiplies V holds p 2^ev_j
    // (v's exponent) scaled per row by 2^-sp (its largest in [2^14, 2^15):
    // sp comes off H after the product). sacc keeps p without the token
    // exponents and the row's largest exponent is taken in integers, so that
    // a row of tiny scale never passes through float32 subnormals on its way
    // to the tile (one ldexp from p0 to the stored P; sacc holds p0 2^88, see below)
    float rs[2] = {0.0f, 0.0f}, pmax[2] = {-1e9f, -1e9f};
    #pragma unroll
    for (int u = 0; u < KTL; u++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) {
            const int r = r0 + g + 8 * (e >> 1), j = u * 8 + 2 * qd + (e & 1);
            float p = 0.0f;
            if (u < slive && j <= r && r < Lc) {
                const int br = r / 8, bj = j / 8;
                float lw = IA[j];
                if (br == bj) {
                    for (int x = j + 1; x <= r; x++) lw += U[x];
                } else {
                    lw += BSUF[j] + BB[bj * 8 + br] + BPRE[r];
                }
                if constexpr (SCALED) {
                    // sacc keeps p 2^88: exp(lw) alone leaves float's normal range below lw = -87, where p
                    // itself need not (a hostile decay's lw of -102 on a large q^ . k: 14% off through a
                    // subnormal weight), so under lw = -80 the weight is exp(lw + 88 ln 2), normal down to
                    // lw = -148; above, p times 2^88 exactly. With q's and k's rows in [2^14, 2^15), |p| 2^88
                    // stays under 2^127
                    const bool low = lw < -80.0f;
                    p = sacc[u][e] * scale * exp(low ? lw + 60.99695189f : lw);
                    p = low ? p : mc_ldexp(p, 88);
                    sacc[u][e] = p;
                    if (p != 0.0f && isfinite(p))
                        pmax[e >> 1] = max(pmax[e >> 1], float(mc_expo(p) - 88 + EQ[r] + EK[j] + EV[j]));
                    p = mc_ldexp(p, EQ[r] + EK[j] - 88);
                } else {
                    p = sacc[u][e] * scale * exp(lw);
                }
            } else if constexpr (SCALED) {
                sacc[u][e] = 0.0f;
            }
            rs[e >> 1] += p;
            if constexpr (!SCALED)
                if (r0 < L) PS[r * LDP + j] = T(p);
        }
    }
    for (int e = 0; e < 2; e++) {
        rs[e] += mc_lane(rs[e], lane ^ 1u);
        rs[e] += mc_lane(rs[e], lane ^ 2u);
    }
    // SCALED: per row, 2^sp (spf: the factor P V's product is restored by;
    // sp in [-126, 127], so that it is a float) and the factor of the
    // inter-chunk product, fq 2^eq
    float spf[2] = {1.0f, 1.0f}, fqs[2] = {0.0f, 0.0f};
    int sp[2] = {0, 0};
    if constexpr (SCALED) {
        for (int e = 0; e < 2; e++) {
            pmax[e] = max(pmax[e], mc_lane(pmax[e], lane ^ 1u));
            pmax[e] = max(pmax[e], mc_lane(pmax[e], lane ^ 2u));
            sp[e] = pmax[e] > -1e8f ? clamp(int(pmax[e]) - 14, -126, 127) : 0;
            spf[e] = mc_pow2(sp[e]);
        }
        #pragma unroll
        for (int u = 0; u < KTL; u++)
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = r0 + g + 8 * (e >> 1), j = u * 8 + 2 * qd + (e & 1);
                if (r0 < L) PS[r * LDP + j] = T(mc_ldexp(sacc[u][e], EQ[min(r, 63)] + EK[j] + EV[j] - sp[e >> 1] - 88));
            }
    }
    float fq[2], den[2];
    for (int e = 0; e < 2; e++) {
        const int r = r0 + g + 8 * e;
        fq[e] = r < Lc ? scale * exp(PRE[r]) : 0.0f;
        den[e] = max(fabs(fq[e] * qn[e] + rs[e]), exp(-MR[r])) + eps;
        if constexpr (SCALED) fqs[e] = mc_ldexp(fq[e], EQ[min(r, 63)]);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);   // k is read: v comes into its place
    // v of column tile vt goes to VB[vt % VBN] with the first slice of C of its
    // tile, or here for the tiles whose first slice came in above
    threadgroup T *VB = KS;
    for (int vn = 0; vn * NSL < 2 && vn < VT; vn++)
        mc_load_async<T, L, TV, NT2, VEC, false>(VB + vn * L * LDC, LDC, v + tb * DHHV + vn * TV, DHHV, Lc,
                                                 DHHV - vn * TV, tid);
    mc_copies_commit();
    // H per column tile: (q^ e) C in slices of DHQK, then + P V; h = H / den
    float hacc[XT][4];
    for (int st = 0; st < nst; st++) {
        const int vt = st / NSL, sl = st % NSL, v0 = vt * TV;
        if (st == 0) mc_wait_copies();
        else mc_wait_copies_but<1>();   // stage st + 1's copies may still fly
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (st + 2 < nst) {   // stage st + 2 (and at a new column tile, its v)
            const int vn = (st + 2) / NSL, sn = (st + 2) % NSL;
            mc_load_async<T, DS, TV, NT2, VEC, false>(CB + ((st + 2) % 3) * DS * LDC, LDC,
                                                      c_chunk + (wsx * DHQK + sn * DS) * DHHV + vn * TV, DHHV,
                                                      DHQK - sn * DS, DHHV - vn * TV, tid);
            if constexpr (SCALED)
                mc_load_row<TV, NT2, VEC>(CEB + ((st + 2) % 3) * TV, ce_chunk + (wsx * NSL + sn) * DHHV + vn * TV,
                                           DHHV - vn * TV, tid);
            if (sn == 0)
                mc_load_async<T, L, TV, NT2, VEC, false>(VB + (vn % VBN) * L * LDC, LDC, v + tb * DHHV + vn * TV, DHHV,
                                                         Lc, DHHV - vn * TV, tid);
        }
        mc_copies_commit();
        if (sl == 0)
            #pragma unroll
            for (int u = 0; u < XT; u++)
                #pragma unroll
                for (int e = 0; e < 4; e++) hacc[u][e] = 0.0f;
        const int hlive = rows_live ? XT : 0;
        if constexpr (SCALED) {   // this slice's product on its own, then into H times its tile's factor
            const float x = CEB[(st % 3) * TV];   // (every column of the tile holds it)
            mc_row_tiles_scaled<T, XT>(hacc, x, x, QS + r0 * LDK + sl * DS, LDK, 1, CB + (st % 3) * DS * LDC, LDC, 1,
                                       DS, hlive, lane);
        } else {
            mc_row_tiles<T, XT>(hacc, QS + r0 * LDK + sl * DS, LDK, 1, CB + (st % 3) * DS * LDC, LDC, 1, DS, hlive,
                                lane);
        }
        if (sl == NSL - 1) {
            #pragma unroll
            for (int u = 0; u < XT; u++)
                #pragma unroll
                for (int e = 0; e < 4; e++)
                    hacc[u][e] *= SCALED ? fqs[e >> 1] : fq[e >> 1];
            if constexpr (SCALED) {   // P V (P scaled per row by 2^-sp) on its own, then into H
                mc_row_tiles_scaled<T, XT>(hacc, spf[0], spf[1], PS + r0 * LDP, LDP, 1, VB + (vt % VBN) * L * LDC, LDC,
                                           1, L, hlive, lane);
            } else {
                mc_row_tiles<T, XT>(hacc, PS + r0 * LDP, LDP, 1, VB + (vt % VBN) * L * LDC, LDC, 1, L, hlive, lane);
            }
            const float inv[2] = {1.0f / den[0], 1.0f / den[1]};
            #pragma unroll
            for (int u = 0; u < XT; u++)
                #pragma unroll
                for (int hf = 0; hf < 2; hf++) {
                    const int r = r0 + g + 8 * hf, col = v0 + u * 8 + 2 * qd;
                    if (r < Lc && col < DHHV)
                        mc_put2<VEC>(h + (tb + r) * DHHV + col, hacc[u][2 * hf] * inv[hf],
                                     hacc[u][2 * hf + 1] * inv[hf], col + 1 < DHHV);
                }
        }
    }
} else if constexpr (PHASE == 3) {
    // ---- SPLIT, gates: the stabiliser's walk, once per (sequence, head) ----
    // One threadgroup of 32 SIMD groups per (sequence, head) writes each
    // chunk of the window its gate record in its slot of g_chunk — w_j for j
    // < L (0 past the chunk), e_last at L, the chunk's last m at L + 1 — and
    // m at the chunk's start into m_chunk; the m after the window goes to
    // m_out, which the next window starts from. m is a chain through the
    // chunks, so per block of up to 256 chunks: each SIMD group scans its
    // chunks' gates without m (mc_gates_local; lane 31 keeps what the last m
    // needs), one thread walks the chain (mc_gates_last_m: the same float
    // operations as the full scan), then each SIMD group scans its chunks
    // again from their m. Phase 1's tiles of a head all read the same record
    // instead of each scanning the gates between its barriers.
    constexpr int NW3 = 32, NT3 = NW3 * 32, CB3 = 256, GWN = SCALED ? 2 * L + 4 : L + 4;
    // threadgroup memory: per SIMD group U, IA, MR, PRE, SUF, WJ (64 each) and
    // SC (4); SM (CB3 x 6: lane 31's ea, eb, lf, ig, lf, ig), MS (CB3 + 1: m
    // before each chunk of the block)
    threadgroup float *U = (threadgroup float *)alloy_threadgroup_memory + warp * (6 * 64 + 4);
    threadgroup float *IA = U + 64;
    threadgroup float *MR = IA + 64;
    threadgroup float *PRE = MR + 64;
    threadgroup float *SUF = PRE + 64;
    threadgroup float *WJ = SUF + 64;
    threadgroup float *SC = WJ + 64;
    threadgroup float *SM = (threadgroup float *)alloy_threadgroup_memory + NW3 * (6 * 64 + 4);
    threadgroup float *MS = SM + CB3 * 6;
    const long grp = long(threadgroup_position_in_grid.x);
    const int head = int(grp % NH);
    const long seq = grp / NH;
    const long sidx = seq * NH + head;
    long tokbase, wsx0, WSTEP;   // chunk c's slot index: wsx0 + (c - ca) * WSTEP
    int len, ca, cb;
    mc_window_chunks<L, VARLEN>(cu, seq, head, S, NH, NSEQ, W0, WN, tokbase, len, ca, cb, wsx0, WSTEP);
    float mcarry = CARRY ? float(m_out[sidx]) : (HAS_INIT ? float(m0[sidx]) : 0.0f);
    for (int c0 = ca; c0 < cb; c0 += CB3) {   // uniform over the threadgroup
        const int nb = min(CB3, cb - c0);
        for (int j = warp; j < nb; j += NW3) {
            const int c = c0 + j, Lc = min(L, len - c * L);
            float fp0, fp1, ip0, ip1, lf[2], ig[2], ea, eb;
            mc_gates_raw(f, i, tokbase + long(c) * L, Lc, lane, fp0, fp1, ip0, ip1);
            mc_gates_local(fp0, fp1, ip0, ip1, Lc, lane, lf, ig, ea, eb);
            if (lane == 31u) {
                threadgroup float *sm = SM + j * 6;
                sm[0] = ea, sm[1] = eb, sm[2] = lf[0], sm[3] = ig[0], sm[4] = lf[1], sm[5] = ig[1];
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tid == 0) {
            float m = mcarry;
            for (int j = 0; j < nb; j++) {
                MS[j] = m;
                m = mc_gates_last_m(SM + j * 6, min(L, len - (c0 + j) * L), m);
            }
            MS[nb] = m;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        mcarry = MS[nb];
        for (int j = warp; j < nb; j += NW3) {
            const int c = c0 + j, Lc = min(L, len - c * L);
            const long wsx = wsx0 + long(c - ca) * WSTEP;
            float fp0, fp1, ip0, ip1;
            mc_gates_raw(f, i, tokbase + long(c) * L, Lc, lane, fp0, fp1, ip0, ip1);
            mc_update_weights(fp0, fp1, ip0, ip1, Lc, MS[j], lane, U, IA, MR, PRE, SUF, WJ, SC);
            device float *rec = g_chunk + wsx * GWN;
            float smax = 0.0f, nmax = 0.0f;   // SCALED: max |s_j| and |nc_j|
            for (int e = 0; e < 2; e++) {   // each lane its own rows of WJ (mc_update_weights wrote them)
                const int r = 2 * int(lane) + e;
                if (r < L) {
                    float w = WJ[r];
                    if constexpr (SCALED) {   // the token exponents folded in: s_j at r, nc_j at L + 4 + r
                        // (from the log weight: w_j itself may be under float's range where
                        // w_j 2^(ek + ev) is not)
                        float nc = 0.0f;
                        if (r < Lc) {
                            const long tk = tokbase + long(c) * L + r;
                            const int ek = int(xe[ROWS + tk]), ev = int(xe[2 * ROWS + tk]);
                            const float lw = IA[r] + SUF[r];
                            nc = mc_exp_ldexp(lw, ek);
                            w = mc_exp_ldexp(lw, ek + ev);
                        }
                        rec[L + 4 + r] = nc;
                        smax = max(smax, fabs(w));
                        nmax = max(nmax, fabs(nc));
                    }
                    rec[r] = w;
                }
            }
            if constexpr (SCALED) {   // ts, tn: max |s| 2^-ts and max |nc| 2^-tn in [0.5, 1)
                for (uint d = 1; d < 32; d *= 2) {
                    smax = max(smax, mc_lane(smax, lane ^ d));
                    nmax = max(nmax, mc_lane(nmax, lane ^ d));
                }
                if (lane == 0) {
                    rec[L + 2] = smax > 0.0f ? float(mc_expo(smax) + 1) : 0.0f;
                    rec[L + 3] = nmax > 0.0f ? float(mc_expo(nmax) + 1) : 0.0f;
                }
            }
            if (lane == 0) {
                // SCALED: the decay as its log (the walk applies it with the state's
                // scale in one factor: the decay alone may be under float's range)
                rec[L] = SCALED ? SC[2] : SC[0];
                rec[L + 1] = SC[1];
                m_chunk[wsx] = MS[j];
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);   // SM and MS are the next block's
    }
    if (tid == 0) m_out[sidx] = mcarry;
} else {
    // ---- FUSED: one threadgroup walks a whole sequence --------------------
long grp = long(threadgroup_position_in_grid.x);
const int vt = int(grp % VT);
grp /= VT;
const int head = int(grp % NH);
const long seq = grp / NH;
const long sidx = seq * NH + head;   // which state
const int v0 = vt * TV;
long tokbase;   // the sequence's first row in the (B*NH*S) or (NH*S) rows of q
int len;
if (VARLEN) {
    const int s0 = clamp(int(cu[seq]), 0, S), s1 = clamp(int(cu[seq + 1]), 0, S);
    tokbase = long(head) * S + s0;
    len = max(s1 - s0, 0);
} else {
    tokbase = sidx * S;
    len = S;
}
const float NEG_INF = -INFINITY;
if constexpr (RES) {
    // ---- RES: the whole chunk resident (L <= 64, one block) -----------------
    // q, k and v of the chunk are copied in once (cp.async on CUDA), the next
    // chunk's q as soon as this chunk's products have read q, its k and v as
    // soon as the state update has read them, so the copies overlap the gates,
    // h and the state update. h = (q^ e_r) [C|n] + P [V|1] with q read raw:
    // the inter-chunk product is scaled by FQ[r] = scale e_r in registers.
    constexpr int TVX = TV + 8, XT = TVX / 8;
    constexpr int LDK = DKP + 8, LDP = L + 8, LDV = ((TVX + 8) / 8 | 1) * 8;   // odd multiples of 8
    constexpr int HT = (L / 16) * XT, HPW = (HT + NW - 1) / NW;       // h tiles
    constexpr int ST = (L / 16) * (L / 8), SPW = (ST + NW - 1) / NW;  // score tiles
    constexpr int CT = (DKP / 16) * XT, CPW = (CT + NW - 1) / NW;     // state tiles
    constexpr int MPW = HPW > SPW ? (HPW > CPW ? HPW : CPW) : (SPW > CPW ? SPW : CPW);   // the most of the three
    // threadgroup memory: T: QB, KB (L x LDK), VS, WS (L x LDV), PS (L x LDP),
    // CS (DKP x LDV); float: U, IA, MR, PRE, SUF, FQ (L each), DG (L x L), DEN (L), MST (4)
    constexpr int T_ELEMS = 2 * L * LDK + 2 * L * LDV + L * LDP + DKP * LDV;
    constexpr int T_BYTES = (T_ELEMS * int(sizeof(T)) + 15) / 16 * 16;
    threadgroup T *QB = (threadgroup T *)alloy_threadgroup_memory;
    threadgroup T *KB = QB + L * LDK;
    threadgroup T *VS = KB + L * LDK;
    threadgroup T *WS = VS + L * LDV;
    threadgroup T *PS = WS + L * LDV;
    threadgroup T *CS = PS + L * LDP;
    threadgroup float *U = (threadgroup float *)(alloy_threadgroup_memory + T_BYTES);
    threadgroup float *IA = U + L;
    threadgroup float *MR = IA + L;
    threadgroup float *PRE = MR + L;
    threadgroup float *SUF = PRE + L;
    threadgroup float *FQ = SUF + L;
    threadgroup float *DG = FQ + L;
    threadgroup float *DEN = DG + L * L;
    threadgroup float *MST = DEN + L;

    // the state: tile warp + NW*u of [C | n] (DKP x TVX); column TV is n
    float cst[CPW][4];
    #pragma unroll
    for (int u = 0; u < CPW; u++) {
        const int t = warp + NW * u, rt = t / XT, ct = t % XT;
        #pragma unroll
        for (int e = 0; e < 4; e++) {
            const int row = rt * 16 + g + 8 * (e >> 1), col = ct * 8 + 2 * qd + (e & 1);
            float x = 0.0f;
            if (HAS_INIT && t < CT && row < DHQK) {
                if (col < TV) {
                    if (v0 + col < DHHV) x = float(C0[(sidx * DHQK + row) * DHHV + v0 + col]);
                } else if (col == TV) x = float(n0[sidx * DHQK + row]);
            }
            cst[u][e] = x;
        }
    }
    if (tid == 0) MST[0] = HAS_INIT ? float(m0[sidx]) : 0.0f;
    #pragma unroll
    for (int u = 0; u < CPW; u++) {
        const int t = warp + NW * u, rt = t / XT, ct = t % XT;
        if (t < CT)
            #pragma unroll
            for (int e = 0; e < 4; e++)
                CS[(rt * 16 + g + 8 * (e >> 1)) * LDV + ct * 8 + 2 * qd + (e & 1)] = T(cst[u][e]);
    }
    const int nchunks = (len + L - 1) / L;
    if (nchunks > 0) {
        const int l0 = min(L, len);
        mc_load_async<T, L, DKP, NT, VEC>(QB, LDK, q + tokbase * DHQK, DHQK, l0, DHQK, tid);
        mc_load_async<T, L, DKP, NT, VEC>(KB, LDK, k + tokbase * DHQK, DHQK, l0, DHQK, tid);
        mc_load_async<T, L, TV, NT, VEC>(VS, LDV, v + (tokbase * DHHV + v0), DHHV, l0, DHHV - v0, tid);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    for (int c = 0; c < nchunks; c++) {
        const int Lc = min(L, len - c * L);
        const long tb = tokbase + long(c) * L;
        // ---- gates: the recurrence's stabiliser, U and IA (as the general path) ----
        mc_gates_load<L, NT>(f + tb, i + tb, Lc, U, IA, tid);
        for (int e = tid; e < L * 8; e += NT) { /* the normaliser's column of ones */
            const int jj = e / 8, cc = e % 8;
            VS[jj * LDV + TV + cc] = (cc == 0 && jj < Lc) ? T(1) : T(0);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tid == 0) mc_gates_scan<L>(U, IA, MR, MST[0], Lc);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        // inclusive prefix and exclusive suffix sums of U (two threads of other
        // SIMD groups), the diagonal weights' scans (one per row)
        if (tid == 128) {
            float sum = 0.0f;
            for (int r = 0; r < L; r++) {
                sum += U[r];
                PRE[r] = sum;
            }
        } else if (tid == 160) {
            float sum = 0.0f;
            for (int r = L - 1; r >= 0; r--) {
                SUF[r] = sum;
                sum += U[r];
            }
        } else if (tid < L) {
            float sum = 0.0f;
            DG[tid * L + tid] = 0.0f;
            for (int j = tid - 1; j >= 0; j--) {
                sum += U[j + 1];
                DG[tid * L + j] = sum;
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (int r = tid; r < L; r += NT) FQ[r] = r < Lc ? scale * exp(PRE[r]) : 0.0f;
        mc_wait_copies();
        threadgroup_barrier(mem_flags::mem_threadgroup);
        // ---- P = (q k^T) scale w ----
        float sacc[SPW][4];
        const threadgroup T *pa[MPW], *pb[MPW];   // the tiles' operands
        #pragma unroll
        for (int u = 0; u < SPW; u++) {
            const int t = warp + NW * u, rt = t / (L / 8), ct = t % (L / 8);
            #pragma unroll
            for (int e = 0; e < 4; e++) sacc[u][e] = 0.0f;
            pa[u] = QB + rt * 16 * LDK;
            pb[u] = KB + ct * 8 * LDK;
        }
        mc_tiles<T, SPW>(sacc, pa, LDK, 1, pb, 1, LDK, DKP, (ST - warp + NW - 1) / NW, lane);
        #pragma unroll
        for (int u = 0; u < SPW; u++) {
            const int t = warp + NW * u, rt = t / (L / 8), ct = t % (L / 8);
            if (t < ST) {
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int rl = rt * 16 + g + 8 * (e >> 1), jl = ct * 8 + 2 * qd + (e & 1);
                    const float lw = jl <= rl ? IA[jl] + DG[rl * L + jl] : NEG_INF;
                    const float w = lw == NEG_INF ? 0.0f : exp(lw);
                    PS[rl * LDP + jl] = T(sacc[u][e] * scale * w);
                }
            }
        }
        // ---- H = FQ q [C|n] + P [V|1] ----
        float hacc[HPW][4];
        const int hlive = (HT - warp + NW - 1) / NW;
        #pragma unroll
        for (int u = 0; u < HPW; u++) {
            const int t = warp + NW * u, rt = t / XT, ct = t % XT;
            #pragma unroll
            for (int e = 0; e < 4; e++) hacc[u][e] = 0.0f;
            pa[u] = QB + rt * 16 * LDK;
            pb[u] = CS + ct * 8;
        }
        mc_tiles<T, HPW>(hacc, pa, LDK, 1, pb, LDV, 1, DKP, hlive, lane);
        #pragma unroll
        for (int u = 0; u < HPW; u++) {
            const int t = warp + NW * u, rt = t / XT, ct = t % XT;
            #pragma unroll
            for (int e = 0; e < 4; e++) hacc[u][e] *= FQ[rt * 16 + g + 8 * (e >> 1)];
            pa[u] = PS + rt * 16 * LDP;
            pb[u] = VS + ct * 8;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        mc_tiles<T, HPW>(hacc, pa, LDP, 1, pb, LDV, 1, L, hlive, lane);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (c + 1 < nchunks) /* q is read: the next chunk's comes in */
            mc_load_async<T, L, DKP, NT, VEC>(QB, LDK, q + (tb + L) * DHQK, DHQK, min(L, len - (c + 1) * L), DHQK, tid);
        // ---- h = numerator / (max(|den|, exp(-m)) + eps) ----
        #pragma unroll
        for (int u = 0; u < HPW; u++) {
            const int t = warp + NW * u, rt = t / XT, ct = t % XT;
            if (t < HT && ct == XT - 1 && qd == 0) {
                DEN[rt * 16 + g] = hacc[u][0];
                DEN[rt * 16 + g + 8] = hacc[u][2];
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        #pragma unroll
        for (int u = 0; u < HPW; u++) {
            const int t = warp + NW * u, rt = t / XT, ct = t % XT;
            if (t < HT && ct < XT - 1)
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int r = rt * 16 + g + 8 * (e >> 1), col = v0 + ct * 8 + 2 * qd + (e & 1);
                    if (r < Lc && col < DHHV) {
                        const float den = max(fabs(DEN[r]), exp(-MR[r])) + eps;
                        h[(tb + r) * DHHV + col] = T(hacc[u][e] / den);
                    }
                }
        }
        // ---- the state at the chunk's end: C' = e_last C + K^T [w v | w] ----
        for (int e = tid; e < L * TVX; e += NT) {
            const int jj = e / TVX, cc = e % TVX;
            const float w = jj < Lc ? exp(IA[jj] + SUF[jj]) : 0.0f;
            WS[jj * LDV + cc] = cc < TV ? T(float(VS[jj * LDV + cc]) * w) : T(cc == TV ? w : 0.0f);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const float decay = exp(PRE[L - 1]);
        #pragma unroll
        for (int u = 0; u < CPW; u++) {
            const int t = warp + NW * u, rt = t / XT, ct = t % XT;
            #pragma unroll
            for (int e = 0; e < 4; e++) cst[u][e] *= decay;
            pa[u] = KB + rt * 16;
            pb[u] = WS + ct * 8;
        }
        mc_tiles<T, CPW>(cst, pa, 1, LDK, pb, LDV, 1, L, (CT - warp + NW - 1) / NW, lane);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (c + 1 < nchunks) { /* k and v are read: the next chunk's come in */
            const int ln = min(L, len - (c + 1) * L);
            mc_load_async<T, L, DKP, NT, VEC>(KB, LDK, k + (tb + L) * DHQK, DHQK, ln, DHQK, tid);
            mc_load_async<T, L, TV, NT, VEC>(VS, LDV, v + ((tb + L) * DHHV + v0), DHHV, ln, DHHV - v0, tid);
        }
        #pragma unroll
        for (int u = 0; u < CPW; u++) {
            const int t = warp + NW * u, rt = t / XT, ct = t % XT;
            if (t < CT)
                #pragma unroll
                for (int e = 0; e < 4; e++)
                    CS[(rt * 16 + g + 8 * (e >> 1)) * LDV + ct * 8 + 2 * qd + (e & 1)] = T(cst[u][e]);
        }
        if (tid == 0) MST[0] = MR[Lc - 1];
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }

    if (STATES_OUT) {
        #pragma unroll
        for (int u = 0; u < CPW; u++) {
            const int t = warp + NW * u, rt = t / XT, ct = t % XT;
            if (t < CT)
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int row = rt * 16 + g + 8 * (e >> 1), col = ct * 8 + 2 * qd + (e & 1);
                    if (row < DHQK) {
                        if (col < TV) {
                            if (v0 + col < DHHV) C_out[(sidx * DHQK + row) * DHHV + v0 + col] = cst[u][e];
                        } else if (col == TV && vt == 0) n_out[sidx * DHQK + row] = cst[u][e];
                    }
                }
        }
        if (vt == 0 && tid == 0) m_out[sidx] = MST[0];
    }
} else {
    constexpr int BLK = L < 64 ? L : 64;       // rows of a query or key block
    constexpr int NB = L / BLK;                // blocks per chunk
    constexpr int TVX = TV + 8;                // columns + the normaliser's tile
    constexpr int XT = TVX / 8;                // column tiles
    constexpr int NSL = DKP / DS;              // slices of DHQK
    constexpr int LDQ = DS + 8, LDP = BLK + 8;   // row pitches (T elements): odd multiples of 8
    constexpr int LDV = ((TVX + 8) / 8 | 1) * 8;
    constexpr int HT = (BLK / 16) * XT, HPW = (HT + NW - 1) / NW;        // h tiles of a query block
    constexpr int ST = (BLK / 16) * (BLK / 8), SPW = (ST + NW - 1) / NW; // score tiles of a block pair
    constexpr int CT = (DS / 16) * XT, CPW = (CT + NW - 1) / NW;         // state tiles of a slice
    // threadgroup memory: T: QS, KS (BLK x LDQ), PS (BLK x LDP), VS (BLK x LDV),
    // CS (DKP x LDV); then float: U, IA, MR, PRE, SUF (L each), TOT (NB), DG (BLK x BLK),
    // DEN (BLK), MST (4)
    constexpr int T_ELEMS = 2 * BLK * LDQ + BLK * LDP + BLK * LDV + DKP * LDV;
    constexpr int T_BYTES = (T_ELEMS * int(sizeof(T)) + 15) / 16 * 16;
    threadgroup T *QS = (threadgroup T *)alloy_threadgroup_memory;
    threadgroup T *KS = QS + BLK * LDQ;
    threadgroup T *PS = KS + BLK * LDQ;
    threadgroup T *VS = PS + BLK * LDP;
    threadgroup T *CS = VS + BLK * LDV;
    threadgroup float *U = (threadgroup float *)(alloy_threadgroup_memory + T_BYTES);
    threadgroup float *IA = U + L;
    threadgroup float *MR = IA + L;
    threadgroup float *PRE = MR + L;
    threadgroup float *SUF = PRE + L;
    threadgroup float *TOT = SUF + L;
    threadgroup float *DG = TOT + NB;
    threadgroup float *DEN = DG + BLK * BLK;
    threadgroup float *MST = DEN + BLK;


    // the state slice: slice sl, tile warp + NW*u of it; column TV is n
    float cst[NSL][CPW][4];
    for (int sl = 0; sl < NSL; sl++)
        for (int u = 0; u < CPW; u++) {
            const int t = warp + NW * u, rt = t / XT, ct = t % XT;
            for (int e = 0; e < 4; e++) {
                const int row = sl * DS + rt * 16 + g + 8 * (e >> 1), col = ct * 8 + 2 * qd + (e & 1);
                float x = 0.0f;
                if (HAS_INIT && t < CT && row < DHQK) {
                    if (col < TV) {
                        if (v0 + col < DHHV) x = float(C0[(sidx * DHQK + row) * DHHV + v0 + col]);
                    } else if (col == TV) x = float(n0[sidx * DHQK + row]);
                }
                cst[sl][u][e] = x;
            }
        }
    if (tid == 0) MST[0] = HAS_INIT ? float(m0[sidx]) : 0.0f;
    // the state as T for the inter-chunk product (rows past DHQK stay 0)
    for (int sl = 0; sl < NSL; sl++)
        for (int u = 0; u < CPW; u++) {
            const int t = warp + NW * u, rt = t / XT, ct = t % XT;
            if (t < CT)
                for (int e = 0; e < 4; e++)
                    CS[(sl * DS + rt * 16 + g + 8 * (e >> 1)) * LDV + ct * 8 + 2 * qd + (e & 1)] = T(cst[sl][u][e]);
        }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    const int nchunks = (len + L - 1) / L;
    for (int c = 0; c < nchunks; c++) {
        const int Lc = min(L, len - c * L);
        const long tb = tokbase + long(c) * L;   // row of the chunk's first token
        // ---- gates: the recurrence's stabiliser, U and IA ----
        mc_gates_load<L, NT>(f + tb, i + tb, Lc, U, IA, tid);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tid == 0) mc_gates_scan<L>(U, IA, MR, MST[0], Lc);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        // per block: inclusive prefix sums, exclusive suffix sums, totals of U
        if (tid < NB) {
            const int b0 = tid * BLK;
            float s = 0.0f;
            for (int r = 0; r < BLK; r++) {
                s += U[b0 + r];
                PRE[b0 + r] = s;
            }
            TOT[tid] = s;
            s = 0.0f;
            for (int r = BLK - 1; r >= 0; r--) {
                SUF[b0 + r] = s;
                s += U[b0 + r];
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);

        const int nqb = (Lc + BLK - 1) / BLK;
        for (int qb = 0; qb < nqb; qb++) {
            const int r0 = qb * BLK;
            // diagonal block: DG[r][j] = sum_{s=j+1..r} U[r0 + s] for j <= r (a scan per row)
            if (tid < BLK) {
                float s = 0.0f;
                DG[tid * BLK + tid] = 0.0f;
                for (int j = tid - 1; j >= 0; j--) {
                    s += U[r0 + j + 1];
                    DG[tid * BLK + j] = s;
                }
            }
            float pre_r0 = 0.0f;   // sum of U over the chunk's blocks before this one
            for (int b = 0; b < qb; b++) pre_r0 += TOT[b];
            float hacc[HPW][4];
            for (int u = 0; u < HPW; u++)
                for (int e = 0; e < 4; e++) hacc[u][e] = 0.0f;
            // ---- intra-chunk: key blocks up to the diagonal ----
            for (int kb = 0; kb <= qb; kb++) {
                const int k0 = kb * BLK;
                float sacc[SPW][4];
                for (int u = 0; u < SPW; u++)
                    for (int e = 0; e < 4; e++) sacc[u][e] = 0.0f;
                for (int sl = 0; sl < NSL; sl++) {
                    mc_load<T, BLK, DS, NT, VEC>(QS, LDQ, q + ((tb + r0) * DHQK + sl * DS), DHQK, Lc - r0, DHQK - sl * DS, tid);
                    mc_load<T, BLK, DS, NT, VEC>(KS, LDQ, k + ((tb + k0) * DHQK + sl * DS), DHQK, Lc - k0, DHQK - sl * DS, tid);
                    threadgroup_barrier(mem_flags::mem_threadgroup);
                    for (int u = 0; u < SPW; u++) {
                        const int t = warp + NW * u, rt = t / (BLK / 8), ct = t % (BLK / 8);
                        if (t < ST) mc_tile(sacc[u], QS + rt * 16 * LDQ, LDQ, 1, KS + ct * 8 * LDQ, 1, LDQ, DS, lane);
                    }
                    threadgroup_barrier(mem_flags::mem_threadgroup);
                }
                float between = 0.0f;   // U summed over the whole blocks strictly between kb and qb
                for (int b = kb + 1; b < qb; b++) between += TOT[b];
                for (int u = 0; u < SPW; u++) {
                    const int t = warp + NW * u, rt = t / (BLK / 8), ct = t % (BLK / 8);
                    if (t < ST)
                        for (int e = 0; e < 4; e++) {
                            const int rl = rt * 16 + g + 8 * (e >> 1), jl = ct * 8 + 2 * qd + (e & 1);
                            float lw;
                            if (kb < qb) lw = IA[k0 + jl] + SUF[k0 + jl] + between + PRE[r0 + rl];
                            else lw = jl <= rl ? IA[k0 + jl] + DG[rl * BLK + jl] : NEG_INF;
                            const float w = lw == NEG_INF ? 0.0f : exp(lw);
                            PS[rl * LDP + jl] = T(sacc[u][e] * scale * w);
                        }
                }
                mc_load<T, BLK, TV, NT, VEC>(VS, LDV, v + ((tb + k0) * DHHV + v0), DHHV, Lc - k0, DHHV - v0, tid);
                for (int e = tid; e < BLK * 8; e += NT) { /* the normaliser's column of ones */
                    const int jj = e / 8, cc = e % 8;
                    VS[jj * LDV + TV + cc] = (cc == 0 && k0 + jj < Lc) ? T(1) : T(0);
                }
                threadgroup_barrier(mem_flags::mem_threadgroup);
                for (int u = 0; u < HPW; u++) {
                    const int t = warp + NW * u, rt = t / XT, ct = t % XT;
                    if (t < HT) mc_tile(hacc[u], PS + rt * 16 * LDP, LDP, 1, VS + ct * 8, LDV, 1, BLK, lane);
                }
                threadgroup_barrier(mem_flags::mem_threadgroup);
            }
            // ---- inter-chunk: (q^ e_r) [C | n] ----
            for (int sl = 0; sl < NSL; sl++) {
                mc_load<T, BLK, DS, NT, VEC>(QS, LDQ, q + ((tb + r0) * DHQK + sl * DS), DHQK, Lc - r0, DHQK - sl * DS, tid);
                threadgroup_barrier(mem_flags::mem_threadgroup);
                for (int e = tid; e < BLK * DS; e += NT) { /* q^ e_r (rows past the chunk are 0 already) */
                    const int rr = e / DS, d = e % DS;
                    QS[rr * LDQ + d] = T(float(QS[rr * LDQ + d]) * scale * exp(pre_r0 + PRE[r0 + rr]));
                }
                threadgroup_barrier(mem_flags::mem_threadgroup);
                for (int u = 0; u < HPW; u++) {
                    const int t = warp + NW * u, rt = t / XT, ct = t % XT;
                    if (t < HT) mc_tile(hacc[u], QS + rt * 16 * LDQ, LDQ, 1, CS + sl * DS * LDV + ct * 8, LDV, 1, DS, lane);
                }
                threadgroup_barrier(mem_flags::mem_threadgroup);
            }
            // ---- h = numerator / (max(|den|, exp(-m)) + eps) ----
            for (int u = 0; u < HPW; u++) {
                const int t = warp + NW * u, rt = t / XT, ct = t % XT;
                if (t < HT && ct == XT - 1 && qd == 0) {
                    DEN[rt * 16 + g] = hacc[u][0];
                    DEN[rt * 16 + g + 8] = hacc[u][2];
                }
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            for (int u = 0; u < HPW; u++) {
                const int t = warp + NW * u, rt = t / XT, ct = t % XT;
                if (t < HT && ct < XT - 1)
                    for (int e = 0; e < 4; e++) {
                        const int rl = rt * 16 + g + 8 * (e >> 1), col = v0 + ct * 8 + 2 * qd + (e & 1);
                        const int r = r0 + rl;
                        if (r < Lc && col < DHHV) {
                            const float den = max(fabs(DEN[rl]), exp(-MR[r])) + eps;
                            h[(tb + r) * DHHV + col] = T(hacc[u][e] / den);
                        }
                    }
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }

        // ---- the state at the chunk's end: C' = e_last C + K^T [w v | w] ----
        float gl = 0.0f;   // sum of U over the chunk
        for (int b = 0; b < NB; b++) gl += TOT[b];
        const float decay = exp(gl);
        for (int sl = 0; sl < NSL; sl++)
            for (int u = 0; u < CPW; u++)
                for (int e = 0; e < 4; e++) cst[sl][u][e] *= decay;
        for (int kb = 0; kb < nqb; kb++) {
            const int k0 = kb * BLK;
            float after = 0.0f;   // U summed over the blocks after kb
            for (int b = kb + 1; b < NB; b++) after += TOT[b];
            mc_load<T, BLK, TV, NT, VEC>(VS, LDV, v + ((tb + k0) * DHHV + v0), DHHV, Lc - k0, DHHV - v0, tid);
            threadgroup_barrier(mem_flags::mem_threadgroup);
            for (int e = tid; e < BLK * TVX; e += NT) { /* [w v | w]: key j's weight in the chunk-end state */
                const int jj = e / TVX, cc = e % TVX, j = k0 + jj;
                const float w = j < Lc ? exp(IA[j] + SUF[j] + after) : 0.0f;
                if (cc < TV) VS[jj * LDV + cc] = T(float(VS[jj * LDV + cc]) * w);
                else VS[jj * LDV + cc] = T(cc == TV ? w : 0.0f);
            }
            for (int sl = 0; sl < NSL; sl++) {
                mc_load<T, BLK, DS, NT, VEC>(KS, LDQ, k + ((tb + k0) * DHQK + sl * DS), DHQK, Lc - k0, DHQK - sl * DS, tid);
                threadgroup_barrier(mem_flags::mem_threadgroup);
                for (int u = 0; u < CPW; u++) {
                    const int t = warp + NW * u, rt = t / XT, ct = t % XT;
                    if (t < CT) mc_tile(cst[sl][u], KS + rt * 16, 1, LDQ, VS + ct * 8, LDV, 1, BLK, lane);
                }
                threadgroup_barrier(mem_flags::mem_threadgroup);
            }
        }
        for (int sl = 0; sl < NSL; sl++)
            for (int u = 0; u < CPW; u++) {
                const int t = warp + NW * u, rt = t / XT, ct = t % XT;
                if (t < CT)
                    for (int e = 0; e < 4; e++)
                        CS[(sl * DS + rt * 16 + g + 8 * (e >> 1)) * LDV + ct * 8 + 2 * qd + (e & 1)] = T(cst[sl][u][e]);
            }
        if (tid == 0) MST[0] = MR[Lc - 1];
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }

    if (STATES_OUT) {
        for (int sl = 0; sl < NSL; sl++)
            for (int u = 0; u < CPW; u++) {
                const int t = warp + NW * u, rt = t / XT, ct = t % XT;
                if (t < CT)
                    for (int e = 0; e < 4; e++) {
                        const int row = sl * DS + rt * 16 + g + 8 * (e >> 1), col = ct * 8 + 2 * qd + (e & 1);
                        if (row < DHQK) {
                            if (col < TV) {
                                if (v0 + col < DHHV) C_out[(sidx * DHQK + row) * DHHV + v0 + col] = cst[sl][u][e];
                            } else if (col == TV && vt == 0) n_out[sidx * DHQK + row] = cst[sl][u][e];
                        }
                    }
            }
        if (vt == 0 && tid == 0) m_out[sidx] = MST[0];
    }
}
}   // FUSED
