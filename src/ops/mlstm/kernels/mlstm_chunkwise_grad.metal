// mlstm_chunkwise_grad: the chunk-parallel backward of the split forward
// (mlstm_chunkwise.metal), run on the forward's slots (chunkwise_backward.c
// recomputes the forward first: h, every chunk's starting state X_c = [C_c |
// n_c] and m, and the gate records). With m held constant the gradient is
// the bilinear form's, plus eps-sized terms along m's argmax chain
// (docs/mlstm.md, "Backward"). Per chunk (rows r, keys j <= r, weights
// w_rj, e_r, the keys' weights to the chunk's end wl_j, e_last):
//   den_r = max(|s_r|, exp(-m_r)) + eps,  s_r = e_r q^_r . n_c + sum_j P_rj
//   G_r   = [dh_r / den_r | ds_r],  ds_r = -(dh_r . h_r) / den_r sign(s_r) where |s_r| won
//   dX_c  = e_last dX_{c+1} + sum_r e_r q^_r^T G_r                      (PHASE 2)
//   A_rj  = G_r . [v_j | 1],  AW = A o W,  P = (Q^ K^T) o W
//   dq^   = AW K + diag(e) G X_c^T
//   dk    = AW^T Q^ + diag(wl) [v | 1] dX_{c+1}^T
//   dv    = (P diag(1/den))^T dh + diag(wl) K dC_{c+1}                   (PHASE 3)
//   dF_t  = q_t . dq_t - k_t . dk_t (+ <dX_S, X_S> at the last token), dlf_s = sum_{t >= s} dF_t,
//   di_j  = k_j . dk_j, then the chain terms dL/dm_r = -eps (dh_r . h_r) / den_r (PHASE 4).
// G is never stored: dh / den is a row scaling applied after a product, ds
// a rank-one term.
// PHASE 1, per (slot, head), 256 threads: the gates again (from the slot's
//   m), S = Q K^T, den and the sign of s, A' = dh V^T and dh . h; writes P
//   diag(1/den) as pm and AW as am (L x L, T, row-major [r][j]), the row
//   record rec per token (float x 8: 1/den, ds, e_r, dL/dm_r, whether m_r
//   took the forget path, m_r) and the walk record wrec per slot (2L + 4:
//   scale e_r / den_r, scale e_r ds_r, e_last).
// PHASE 2, per (sequence, head, DS rows of X, TV columns): mc_walk_states
//   from the last chunk with q for k, dh for v and wrec: dX_{c+1} into the
//   slot (dc_chunk as T, dn_chunk float), dX_0 into dC0, dn0 (HAS_INIT).
// PHASE 3, per (slot, head, job), 128 CT threads: jobs of 64 CT columns
//   (CT groups of four SIMD groups, 64 columns each) — first ceil(VT / CT)
//   of dv, then ceil(KT / CT) of dq, then of dk; each a product streamed in
//   64-wide slices (one slice of the A operand shared by the CT column
//   tiles: CT = 2 halves what L2 carries of it), a row scaling, then + (an
//   L x L matrix) x (a tile). dq and dk also write their rows' q . dq and
//   k . dk over each 64 columns into part (per token, 2 KT floats). With
//   PERSIST the grid is the resident threadgroups, each taking jobs g, g + G,
//   ... and issuing its next job's first two slices during its epilogue.
// PHASE 4, per (sequence, head), 256 threads: <dX_S, X_S> and <dX_0, X_0>,
//   then the reverse scans over the tokens (a block of tokens per thread, the
//   later blocks' sums and the chain's affine carries through threadgroup
//   memory): di, df, dm0.
// SCALED (float32 inputs at precision DEFAULT; T = half, TO = float): q, k,
// v, dh are float16 rows with a power-of-two exponent each (xe: q's, k's,
// v's rows; xd: dh's), c_chunk the forward's float16 state tiles with their
// factors in ce, g_chunk the forward's scaled gate records (2 L + 4 floats);
// phase 1 folds the exponents into S, A' and dh . (q^ C) (one tile's product
// at a time times its factor), writes pm and am in float32 true units, log
// wl_r in rec[6] and the walk record scaled as mlstm_walk.h's SC wants it;
// phase 2 walks with SC (dc_chunk float16 tiles, their factors in dce);
// phase 3 folds and rounds the L x L matrix per output line (PE) and
// multiplies the streamed tiles one slice at a time times their factor.
// Otherwise xe, xd, ce, dce are bound to any array and never touched.
// Template: T (operand dtype), TO (the gradients' dtype: T, or float with
// SCALED), L (chunk, <= 64), DKP (DHQK padded to 16, or
// to 64 above 64), DS, TV (PHASE 2's tile), HAS_INIT, HAS_DFINAL, VARLEN,
// VEC (rows 16-byte aligned: cp.async), PHASE, CT (PHASE 3's column tiles
// per threadgroup: 1, 2 or 4), RB (mc_row_tiles' MODE: 1; 0 or 2 for timing),
// PERSIST (PHASE 3's jobs taken in turn; timing, chunkwise_backward_split.c).
// Launch constants: int S, NH, DHQK, DHHV, NSEQ, WN (slots), VT (64-column
// tiles of DHHV), KT (of DHQK), VT2, KT2 (PHASE 2's tiles), float scale, eps.
//! name: alloy_mlstm_chunkwise_grad
//! inputs: q k v i f dh h C0 n0 dCf dnf dmf c_chunk n_chunk m_chunk g_chunk C_fin n_fin cu xe xd ce
//! outputs: dq dk dv di df dC0 dn0 dm0 rec wrec pm am dc_chunk dn_chunk part dce
//! template: T=float32
//! template: TO=float32
//! template: SCALED=false
//! template: L=64
//! template: DKP=64
//! template: DS=64
//! template: TV=64
//! template: HAS_INIT=false
//! template: HAS_DFINAL=false
//! template: VARLEN=false
//! template: VEC=false
//! template: PHASE=1
//! template: CT=1
//! template: RB=1
//! template: PERSIST=false
//! header:
#define MC_ROW_TILES_MODE ALLOY_TEMPLATE_RB /* mlstm_tiles.h's B-fragment batching (chunkwise_backward_split.c) */
#if defined(ALLOY_BACKEND_CUDA) && ALLOY_TEMPLATE_PHASE == 2
#undef ALLOY_CUDA_LAUNCH_BOUNDS
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(128, 4)
#elif defined(ALLOY_BACKEND_CUDA) && ALLOY_TEMPLATE_PHASE == 1
#undef ALLOY_CUDA_LAUNCH_BOUNDS /* two threadgroups of 256 an SM: what its threadgroup memory allows */
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(256, 2)
#elif defined(ALLOY_BACKEND_CUDA) && ALLOY_TEMPLATE_PHASE == 3 && ALLOY_TEMPLATE_PERSIST
#undef ALLOY_CUDA_LAUNCH_BOUNDS /* the two resident threadgroups the host sizes the grid for (SCALED took 167 without) */
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(128 * ALLOY_TEMPLATE_CT, 2)
#endif
#include "src/ops/mlstm/kernels/mlstm_tiles.h"
#include "src/ops/mlstm/kernels/mlstm_chunks.h"
#include "src/ops/mlstm/kernels/mlstm_walk.h"
// x into *p in p's own dtype (the L x L matrices: T, or float32 with SCALED)
template <class P> METAL_FUNC void mc_put(device P *p, float x) { *p = P(x); }
//! body:
const int tid = int(thread_index_in_threadgroup);
const long ROWS = long(VARLEN ? 1 : NSEQ) * NH * S;   // rows of q, k and v (SCALED: xe's thirds)
const int warp = tid / 32;
const uint lane = uint(tid % 32);
const int g = int(lane >> 2), qd = int(lane & 3u);
constexpr int NT = 128;        // threads of phases 2 and 3 (phase 3: per column tile)
constexpr int RR = 8;          // floats per row record
constexpr int WRN = 2 * L + 4; // floats per walk record
constexpr int GWN = SCALED ? 2 * L + 4 : L + 4;   // floats per forward gate record
if constexpr (PHASE == 1) {
    // 256 threads: SIMD group w takes rows 16 (w % 4) .. + 15 and half w / 4 of
    // every product's columns (keys, or 32 of a slice's 64 columns), so a
    // group holds half the accumulators and two threadgroups an SM run eight
    // SIMD groups each; row sums of the halves meet in threadgroup memory (XR).
    constexpr int NT1 = 256;
    constexpr int KTL = L / 8;                    // key tiles
    constexpr int KH = KTL / 2;                   // key tiles of a half
    static_assert(KTL % 2 == 0, "chunks of at least 16 tokens");
    constexpr int LDK = DKP + 8, LDS = 64 + 8;    // odd multiples of 8
    // dh . h: 16-bit T from the numerator in float32 (e q^ C with the C the
    // other products use, plus sum_j P_rj (dh . v_j)), not from h rounded to
    // 16 bits — where the state is nearly rank one, ds and dh / den nearly
    // cancel in every gradient, and only the same C on both sides keeps the
    // difference (h's rounding swamped it); float32 reads h.
    constexpr bool HX = sizeof(T) == 2;
    // HX: the (dh, v) slice pairs: two, or three with one DHQK slice, where the copies two stages ahead
    // are the next-but-one column slice's pair, which two would put over the pair in use
    constexpr int NPR = DKP / DS == 1 ? 3 : 2;
    // threadgroup memory: T: QS (L x LDK), KS (L x LDK; HX: once S is done, a
    // ring of three tiles of C, DS x LDS, in its place), then HX: NPR (dh, v)
    // slice pairs (L x LDS each), else DHS, VS, HS (L x LDS); float: U, IA,
    // MR, PRE, SUF, BPRE, BSUF, BB (64 each), NS (DKP), XR (4 x 64: the
    // halves' row sums). Sharing k's room keeps two threadgroups per SM.
    constexpr int K_ELEMS = HX && 3 * DS * LDS > L * LDK ? 3 * DS * LDS : L * LDK;
    constexpr int T_BYTES = ((L * LDK + K_ELEMS + (HX ? 2 * NPR : 3) * L * LDS) * int(sizeof(T)) + 15) / 16 * 16;
    threadgroup T *QS = (threadgroup T *)alloy_threadgroup_memory;
    threadgroup T *KS = QS + L * LDK;
    threadgroup T *DHS = KS + K_ELEMS;   // HX: pair p at DHS + 2 p L LDS (dh, then v)
    threadgroup T *VS = DHS + L * LDS;
    threadgroup T *HS = VS + L * LDS;    // without HX: h's slice
    threadgroup float *U = (threadgroup float *)(alloy_threadgroup_memory + T_BYTES);
    threadgroup float *IA = U + 64;
    threadgroup float *MR = IA + 64;
    threadgroup float *PRE = MR + 64;
    threadgroup float *SUF = PRE + 64;
    threadgroup float *BPRE = SUF + 64;
    threadgroup float *BSUF = BPRE + 64;
    threadgroup float *BB = BSUF + 64;
    threadgroup float *NS = BB + 64;
    threadgroup float *XR = NS + DKP;   // [half][row] partial row sums, then again after the slices
    threadgroup int *EQ = (threadgroup int *)(XR + 4 * 64);   // SCALED: the rows' exponents (64 each)
    threadgroup int *EK = EQ + 64;
    threadgroup int *EV = EK + 64;
    threadgroup int *ED = EV + 64;
    const int rw = warp & 3, half = warp >> 2;
    const long grp = long(threadgroup_position_in_grid.x);
    const int head = int(grp % NH);
    const long slot = grp / NH;
    long seq, tokbase;
    int len, c;
    mc_slot_chunk<L, VARLEN>(cu, slot, head, S, NH, NSEQ, seq, tokbase, len, c);
    if (c < 0 || c >= (len + L - 1) / L) return;   // the whole group: an empty slot
    const int Lc = min(L, len - c * L);
    const long tb = tokbase + long(c) * L;
    const long wsx = slot * NH + head;
    const int r0 = 16 * rw;
    const bool rows_live = r0 < Lc;

    mc_load_async<T, L, DKP, NT1, VEC, false>(QS, LDK, q + tb * DHQK, DHQK, Lc, DHQK, tid);
    mc_load_async<T, L, DKP, NT1, VEC>(KS, LDK, k + tb * DHQK, DHQK, Lc, DHQK, tid);
    for (int d = tid; d < DKP; d += NT1) NS[d] = d < DHQK ? n_chunk[wsx * DHQK + d] : 0.0f;
    if constexpr (SCALED)
        for (int r = tid; r < 64; r += NT1) {
            EQ[r] = r < Lc ? int(xe[tb + r]) : 0;
            EK[r] = r < Lc ? int(xe[ROWS + tb + r]) : 0;
            EV[r] = r < Lc ? int(xe[2 * ROWS + tb + r]) : 0;
            ED[r] = r < Lc ? int(xd[tb + r]) : 0;
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
    mc_wait_copies();
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // q^ . n per row, this lane's rows r0 + g and r0 + g + 8
    float qn[2] = {0.0f, 0.0f};
    for (int d = qd; r0 < L && d < DHQK; d += 4) {
        const float nd = NS[d];
        qn[0] = fma(float(QS[(r0 + g) * LDK + d]), nd, qn[0]);
        qn[1] = fma(float(QS[(r0 + g + 8) * LDK + d]), nd, qn[1]);
    }
    for (int e = 0; e < 2; e++) {
        qn[e] += mc_lane(qn[e], lane ^ 1u);
        qn[e] += mc_lane(qn[e], lane ^ 2u);
        if constexpr (SCALED) qn[e] = mc_ldexp(qn[e], EQ[r0 + g + 8 * e]);
    }
    // the weight w_rj as its log (-inf outside j <= r < Lc)
    auto logw = [&](int r, int j) {
        if (j > r || r >= Lc) return -INFINITY;
        const int br = r / 8, bj = j / 8;
        float lw = IA[j];
        if (br == bj) {
            for (int x = j + 1; x <= r; x++) lw += U[x];
        } else {
            lw += BSUF[j] + BB[bj * 8 + br] + BPRE[r];
        }
        return lw;
    };
    auto weight = [&](int r, int j) { return exp(logw(r, j)); };
    // S = Q K^T (this half's keys), then P = S scale W with its row sums (float32)
    float sacc[KH][4];
    #pragma unroll
    for (int u = 0; u < KH; u++)
        #pragma unroll
        for (int e = 0; e < 4; e++) sacc[u][e] = 0.0f;
    const int kt0 = half * KH;   // this half's first key tile
    const int slive = rows_live ? max(0, min(KH, min(KTL, 2 * rw + 2) - kt0)) : 0;
    // (every product skips SIMD groups past the chunk: their rows are not in threadgroup memory)
    if (slive > 0) mc_row_tiles<T, KH>(sacc, QS + r0 * LDK, LDK, 1, KS + kt0 * 8 * LDK, 1, LDK, DKP, slive, lane);
    float rs[2] = {0.0f, 0.0f};
    #pragma unroll
    for (int u = 0; u < KH; u++) {
        #pragma unroll
        for (int e = 0; e < 4; e++) {
            const int r = r0 + g + 8 * (e >> 1), j = (kt0 + u) * 8 + 2 * qd + (e & 1);
            // (SCALED: q's and k's exponents folded in with the weight, from its log: p in true units; the
            // score meets the weight's significand before the exponents, so that a weight times 2^(EQ + EK)
            // under float's normal range does not pass through a subnormal)
            if constexpr (SCALED)
                sacc[u][e] = u < slive ? mc_mul_exp_ldexp(sacc[u][e] * scale, logw(r, j), EQ[r] + EK[j]) : 0.0f;
            else
                sacc[u][e] *= u < slive ? scale * weight(r, j) : 0.0f;
            rs[e >> 1] += sacc[u][e];
        }
    }
    for (int e = 0; e < 2; e++) {
        rs[e] += mc_lane(rs[e], lane ^ 1u);
        rs[e] += mc_lane(rs[e], lane ^ 2u);
    }
    // the two halves' row sums, added in order
    if (qd == 0 && r0 < L)
        for (int e = 0; e < 2; e++) XR[half * 64 + r0 + g + 8 * e] = rs[e];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (r0 < L)
        for (int e = 0; e < 2; e++) rs[e] = XR[r0 + g + 8 * e] + XR[64 + r0 + g + 8 * e];
    float er[2], den[2], sgn[2];
    for (int e = 0; e < 2; e++) {
        const int r = r0 + g + 8 * e;
        er[e] = r < Lc ? exp(PRE[r]) : 0.0f;
        const float sv = scale * er[e] * qn[e] + rs[e], fl = exp(-MR[r]);
        den[e] = max(fabs(sv), fl) + eps;
        sgn[e] = fabs(sv) >= fl ? (sv > 0.0f ? 1.0f : (sv < 0.0f ? -1.0f : 0.0f)) : 0.0f;
    }
    // A' = dh V^T over DHHV in slices of 64 columns, and dh . h (HX: dh . (q^ C))
    float aacc[KH][4];
    #pragma unroll
    for (int u = 0; u < KH; u++)
        #pragma unroll
        for (int e = 0; e < 4; e++) aacc[u][e] = 0.0f;
    float dhh[2] = {0.0f, 0.0f};
    if constexpr (HX) {
        // stages (column slice vt of 64, DHQK slice sl of DS rows of C), pipelined
        // as the forward's phase 2: C's tiles in a ring of three, (dh, v) slices
        // in a ring of two, two stages' copies in flight
        constexpr int NSL = DKP / DS;
        const int VTS = (DHHV + 63) / 64, nst = VTS * NSL;
        auto issue = [&](int st) {
            if (st < nst) {
                const int vt = st / NSL, sl = st % NSL, v0 = vt * 64;
                if (sl == 0) {
                    threadgroup T *pr = DHS + (vt % NPR) * 2 * L * LDS;
                    mc_load_async<T, L, 64, NT1, VEC, false>(pr, LDS, dh + tb * DHHV + v0, DHHV, Lc, DHHV - v0, tid);
                    mc_load_async<T, L, 64, NT1, VEC, false>(pr + L * LDS, LDS, v + tb * DHHV + v0, DHHV, Lc,
                                                             DHHV - v0, tid);
                }
                mc_load_async<T, DS, 64, NT1, VEC, false>(KS + (st % 3) * DS * LDS, LDS,
                                                         c_chunk + (wsx * DHQK + sl * DS) * DHHV + v0, DHHV,
                                                         DHQK - sl * DS, DHHV - v0, tid);
            }
            mc_copies_commit();   // one group per stage, empty past the last
        };
        threadgroup_barrier(mem_flags::mem_threadgroup);   // S is done: k's room takes C
        issue(0);
        issue(1);
        float hq[4][4];   // q^ C over this half's 32 columns of the slice
        const int hlive = rows_live ? 4 : 0;
        for (int st = 0; st < nst; st++) {
            const int vt = st / NSL, sl = st % NSL;
            mc_wait_copies_but<1>();   // this stage's copies have landed, the next may fly
            threadgroup_barrier(mem_flags::mem_threadgroup);
            issue(st + 2);   // into the ring slot stage st - 1 read
            const threadgroup T *pdh = DHS + (vt % NPR) * 2 * L * LDS;
            if (sl == 0) {
                if (slive > 0)
                    mc_row_tiles<T, KH>(aacc, pdh + r0 * LDS, LDS, 1, pdh + (L + kt0 * 8) * LDS, 1, LDS, 64, slive,
                                        lane);
                #pragma unroll
                for (int u = 0; u < 4; u++)
                    #pragma unroll
                    for (int e = 0; e < 4; e++) hq[u][e] = 0.0f;
            }
            if (hlive > 0) {
                if constexpr (SCALED) {   // this slice's product on its own, then into hq times its tile's factor
                    const int cc = min(vt * 64 + half * 32, DHHV - 1);   // (every column of the tile holds it)
                    const float x = float(ce[(wsx * KT2 + sl) * DHHV + cc]);
                    mc_row_tiles_scaled<T, 4>(hq, x, x, QS + r0 * LDK + sl * DS, LDK, 1,
                                              KS + (st % 3) * DS * LDS + half * 32, LDS, 1, DS, hlive, lane);
                } else {
                    mc_row_tiles<T, 4>(hq, QS + r0 * LDK + sl * DS, LDK, 1, KS + (st % 3) * DS * LDS + half * 32, LDS,
                                       1, DS, hlive, lane);
                }
            }
            if (sl == NSL - 1 && r0 < L) {
                #pragma unroll
                for (int u = 0; u < 4; u++)
                    #pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int r = r0 + g + 8 * (e >> 1), x = half * 32 + u * 8 + 2 * qd + (e & 1);
                        dhh[e >> 1] = fma(float(pdh[r * LDS + x]), hq[u][e], dhh[e >> 1]);
                    }
            }
        }
        mc_wait_copies();
    } else {
        for (int v0 = 0; v0 < DHHV; v0 += 64) {
            threadgroup_barrier(mem_flags::mem_threadgroup);   // the last slice is read
            mc_load_async<T, L, 64, NT1, VEC, false>(DHS, LDS, dh + tb * DHHV + v0, DHHV, Lc, DHHV - v0, tid);
            mc_load_async<T, L, 64, NT1, VEC, false>(HS, LDS, h + tb * DHHV + v0, DHHV, Lc, DHHV - v0, tid);
            mc_load_async<T, L, 64, NT1, VEC>(VS, LDS, v + tb * DHHV + v0, DHHV, Lc, DHHV - v0, tid);
            mc_wait_copies();
            threadgroup_barrier(mem_flags::mem_threadgroup);
            if (slive > 0) mc_row_tiles<T, KH>(aacc, DHS + r0 * LDS, LDS, 1, VS + kt0 * 8 * LDS, 1, LDS, 64, slive, lane);
            for (int x = half * 32 + qd; r0 < L && x < half * 32 + 32; x += 4) {
                dhh[0] = fma(float(DHS[(r0 + g) * LDS + x]), float(HS[(r0 + g) * LDS + x]), dhh[0]);
                dhh[1] = fma(float(DHS[(r0 + g + 8) * LDS + x]), float(HS[(r0 + g + 8) * LDS + x]), dhh[1]);
            }
        }
    }
    if constexpr (SCALED) {   // A' and dh . (q C) in true units: the rows' exponents
        #pragma unroll
        for (int u = 0; u < KH; u++)
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = r0 + g + 8 * (e >> 1), j = (kt0 + u) * 8 + 2 * qd + (e & 1);
                aacc[u][e] = mc_ldexp(aacc[u][e], ED[r] + EV[j]);
            }
        for (int e = 0; e < 2; e++) dhh[e] = mc_ldexp(dhh[e], ED[r0 + g + 8 * e] + EQ[r0 + g + 8 * e]);
    }
    if (HX) {   // dh . h = (scale e_r dh . (q C) + sum_j P_rj (dh . v_j)) / den
        float pa[2] = {0.0f, 0.0f};
        #pragma unroll
        for (int u = 0; u < KH; u++)
            #pragma unroll
            for (int e = 0; e < 4; e++) pa[e >> 1] = fma(sacc[u][e], aacc[u][e], pa[e >> 1]);
        for (int e = 0; e < 2; e++) dhh[e] = fma(scale * er[e], dhh[e], pa[e]);
    }
    for (int e = 0; e < 2; e++) {
        dhh[e] += mc_lane(dhh[e], lane ^ 1u);
        dhh[e] += mc_lane(dhh[e], lane ^ 2u);
    }
    // the two halves' parts, added in order
    if (qd == 0 && r0 < L)
        for (int e = 0; e < 2; e++) XR[128 + half * 64 + r0 + g + 8 * e] = dhh[e];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (r0 < L)
        for (int e = 0; e < 2; e++) {
            dhh[e] = XR[128 + r0 + g + 8 * e] + XR[192 + r0 + g + 8 * e];
            if (HX) dhh[e] /= den[e];
        }
    float rden[2], ds[2];
    for (int e = 0; e < 2; e++) {
        rden[e] = 1.0f / den[e];
        ds[e] = -(dhh[e] * rden[e]) * sgn[e];
    }
    // P diag(1/den) and AW = (A' / den + ds) o W, row-major [r][j], T
    if (r0 < L) {
        #pragma unroll
        for (int u = 0; u < KH; u++)
            #pragma unroll
            for (int hf = 0; hf < 2; hf++) {
                const int r = r0 + g + 8 * hf, j = (kt0 + u) * 8 + 2 * qd;
                float pv[2], av[2];
                for (int x = 0; x < 2; x++) {
                    const int e = 2 * hf + x;
                    const float w = u < slive ? weight(r, j + x) : 0.0f;
                    pv[x] = sacc[u][e] * rden[hf];
                    av[x] = w != 0.0f ? (aacc[u][e] * rden[hf] + ds[hf]) * w : 0.0f;
                }
                const long at = (wsx * L + r) * L + j;   // (SCALED: float32, true units)
                mc_put(pm + at, pv[0]);
                mc_put(pm + at + 1, pv[1]);
                mc_put(am + at, av[0]);
                mc_put(am + at + 1, av[1]);
            }
    }
    // the row records and the walk record (rows past the chunk: zeros), from the first half
    if (half == 0 && qd == 0 && r0 < L)
        for (int e = 0; e < 2; e++) {
            const int r = r0 + g + 8 * e;
            const bool live = r < Lc;
            if (live) {
                device float *rr = rec + (tb + r) * RR;
                rr[0] = rden[e];
                rr[1] = ds[e];
                rr[2] = er[e];
                rr[3] = -eps * dhh[e] * rden[e];
                rr[4] = U[r] == 0.0f ? 1.0f : 0.0f;
                rr[5] = MR[r];
                rr[6] = SCALED ? IA[r] + SUF[r] : 0.0f;   // SCALED: log wl_r, the row's weight to the chunk's end
                rr[7] = 0.0f;
            }
            float ws = live ? scale * er[e] * rden[e] : 0.0f, wn = live ? scale * er[e] * ds[e] : 0.0f;
            if constexpr (SCALED) {   // q's and dh's exponents folded in, from the logs (mlstm_walk.h's SC)
                ws = live ? scale * mc_exp_ldexp(PRE[r] - log(den[e]), EQ[r] + ED[r]) : 0.0f;
                wn = live ? scale * (ds[e] < 0.0f ? -1.0f : 1.0f) * mc_exp_ldexp(PRE[r] + log(fabs(ds[e])), EQ[r]) : 0.0f;
                XR[r] = fabs(ws);
                XR[64 + r] = fabs(wn);
            }
            wrec[wsx * WRN + r] = ws;
            wrec[wsx * WRN + L + r] = wn;
        }
    // the record's tail: e_last (SCALED: its log, the forward record's) and, SCALED, the exponents ts and tn
    // of max |s| and max |nc| (in [0.5, 1) after 2^-ts, 2^-tn) through XR
    if (tid < (SCALED ? 2 : 4)) wrec[wsx * WRN + 2 * L + tid] = tid == 0 ? g_chunk[wsx * GWN + L] : 0.0f;
    if constexpr (SCALED) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (warp == 0) {
            const int a = int(lane), b = int(lane) + 32;
            float smax = max(a < L ? XR[a] : 0.0f, b < L ? XR[b] : 0.0f);
            float nmax = max(a < L ? XR[64 + a] : 0.0f, b < L ? XR[64 + b] : 0.0f);
            for (uint d = 1; d < 32; d *= 2) {
                smax = max(smax, mc_lane(smax, lane ^ d));
                nmax = max(nmax, mc_lane(nmax, lane ^ d));
            }
            if (lane == 0) {
                wrec[wsx * WRN + 2 * L + 2] = smax > 0.0f && isfinite(smax) ? float(mc_expo(smax) + 1) : 0.0f;
                wrec[wsx * WRN + 2 * L + 3] = nmax > 0.0f && isfinite(nmax) ? float(mc_expo(nmax) + 1) : 0.0f;
            }
        }
    }
} else if constexpr (PHASE == 2) {
    // ---- the state gradients: the forward's walk from the last chunk -------
    mc_walk_states<T, L, DS, TV, VEC, VARLEN, true, WRN, L, 2 * L, SCALED>(
        alloy_threadgroup_memory, tid, long(threadgroup_position_in_grid.x), q, dh, wrec, dc_chunk, dn_chunk,
        HAS_DFINAL ? 1 : 0, dCf, dnf, dCf, dnf, HAS_INIT, dC0, dn0, cu, S, NH, DHQK, DHHV, NSEQ, 0, WN, VT2, KT2,
        dce);
} else if constexpr (PHASE == 3) {
    // ---- dv, dq, dk of one chunk: 64 CT columns per threadgroup ------------
    constexpr int XT = 8;                          // 16 x 8 tiles per SIMD group: 64 columns
    constexpr int NT3 = NT * CT, W3 = 64 * CT;     // threads, columns per threadgroup
    constexpr int LDP = L + 8, LDA = 64 + 8, LDY = W3 + 8;
    // threadgroup memory (T): PI (L x LDP), Y (L x LDY), AS[3] (L x LDA), BS[3] (W3 x LDA; dv's
    // 64 x LDY slices fit in it)
    threadgroup T *PI = (threadgroup T *)alloy_threadgroup_memory;
    threadgroup T *Y = PI + L * LDP;
    threadgroup T *AS = Y + L * LDY;
    threadgroup T *BS = AS + 3 * L * LDA;
    // SCALED, after those (int): FE (64: the exponents folded into the L x L matrix), PE (64: the output
    // rows' scales of the L x L product), XE (64: the dot rows'), XM (NT3 / L x 64: the lines' partial maxima)
    constexpr int T3_BYTES = ((L * LDP + L * LDY + 3 * L * LDA + 3 * W3 * LDA) * int(sizeof(T)) + 15) / 16 * 16;
    threadgroup int *FE = (threadgroup int *)(alloy_threadgroup_memory + T3_BYTES);
    threadgroup int *PE = FE + 64;
    threadgroup int *XE = PE + 64;
    threadgroup int *XM = XE + 64;
    const int VTJ = (VT + CT - 1) / CT, KTJ = (KT + CT - 1) / CT;   // jobs of each kind
    const int r0 = 16 * (warp % 4), ch = warp / 4;   // this SIMD group's rows and column tile
    // One job: a (slot, head)'s chunk and one of its column tiles of dv, dq or dk. Job j: kind = its place
    // among the chunk's jobs, then head, then slot (so a chunk's jobs are consecutive).
    struct p3_job {
        int kind, tj, ncols, ald, nsl, Lc;
        long tb, wsx;
        bool has_chunk;   // the slot holds a chunk (packed batches leave some empty)
    };
    auto job_of = [&](long jj) {
        p3_job J;
        const int job = int(jj % (VTJ + 2 * KTJ));
        jj /= VTJ + 2 * KTJ;
        const int head = int(jj % NH);
        const long slot = jj / NH;
        long seq, tokbase;
        int len, c;
        mc_slot_chunk<L, VARLEN>(cu, slot, head, S, NH, NSEQ, seq, tokbase, len, c);
        J.has_chunk = c >= 0 && c < (len + L - 1) / L;
        J.Lc = J.has_chunk ? min(L, len - c * L) : 0;
        J.tb = tokbase + long(c) * L;
        J.wsx = slot * NH + head;
        J.kind = job < VTJ ? 0 : (job < VTJ + KTJ ? 1 : 2);   // dv, dq, dk
        J.tj = (J.kind == 0 ? job : (J.kind == 1 ? job - VTJ : job - VTJ - KTJ)) * W3;   // the group's first column
        J.ncols = J.kind == 0 ? DHHV : DHQK;
        J.ald = J.kind == 0 ? DHQK : DHHV;
        J.nsl = J.kind == 0 ? KT : VT;
        return J;
    };
    // Slice s of job J's stream into the ring's buffer (s + off) % 3, committed as one group (empty past the
    // last). The stream: kind 0: A = K (slices of DHQK), B = dC_{c+1}[slice rows][tj..] (k = rows);
    // kind 1: A = dh (slices of DHHV), B = C_c[tj.. rows][slice] (k = columns); kind 2: A = v,
    // B = dC_{c+1}[tj.. rows][slice].
    auto issue_of = [&](const thread p3_job &J, int s, int off) {
        if (s < J.nsl) {
            const int x0 = s * 64, buf = (s + off) % 3;
            const device T *as = J.kind == 0 ? k : (J.kind == 1 ? dh : v);
            mc_load_async<T, L, 64, NT3, VEC, false>(AS + buf * L * LDA, LDA, as + J.tb * J.ald + x0, J.ald, J.Lc,
                                                     J.ald - x0, tid);
            if (J.kind == 0)
                mc_load_async<T, 64, W3, NT3, VEC, false>(BS + buf * W3 * LDA, LDY,
                                                          dc_chunk + (J.wsx * DHQK + x0) * DHHV + J.tj, DHHV,
                                                          DHQK - x0, DHHV - J.tj, tid);
            else if (J.kind == 1)
                mc_load_async<T, W3, 64, NT3, VEC, false>(BS + buf * W3 * LDA, LDA,
                                                          c_chunk + (J.wsx * DHQK + J.tj) * DHHV + x0, DHHV,
                                                          DHQK - J.tj, DHHV - x0, tid);
            else
                mc_load_async<T, W3, 64, NT3, VEC, false>(BS + buf * W3 * LDA, LDA,
                                                          dc_chunk + (J.wsx * DHQK + J.tj) * DHHV + x0, DHHV,
                                                          DHQK - J.tj, DHHV - x0, tid);
        }
        mc_copies_commit();
    };
    // PERSIST: threadgroups_per_grid groups take the jobs in turn (job g, g + G, ...), each issuing its next
    // job's first two slices into the two ring buffers its epilogue leaves free, so that the copies run
    // while it finishes; otherwise one job per threadgroup.
    const long njobs = long(WN) * NH * (VTJ + 2 * KTJ);
    const long jstep = PERSIST ? long(threadgroups_per_grid.x) : njobs;
    int off = 0;           // the ring offset of this job's slices
    bool ahead = false;    // whether this job's slices 0 and 1 were issued by the job before
    // Job jj (a lambda, so that one job a threadgroup runs as straight code: as the body of a loop that runs
    // once, ptxas for sm_90a gave SCALED 159-165 registers against 120 — one threadgroup an SM, not two)
    auto run_job = [&](long jj) {
        const p3_job J = job_of(jj);
        if (!J.has_chunk) {
            ahead = false;
            return;
        }
        const int kind = J.kind, tj = J.tj, ncols = J.ncols, nsl = J.nsl, Lc = J.Lc;
        const long tb = J.tb, wsx = J.wsx;
        const int t0 = tj + 64 * ch;   // this SIMD group's first column
        // the L x L matrix and the tile Y (dv: P', dh[:, t0..]; dq: AW, K[:, t0..]; dk: AW, Q[:, t0..]) as one
        // copy group with slice 0 (ahead: after slices 0 and 1, issued by the job before), then the stream's
        // slices in a ring of three, two slices' copies in flight, one group each
        // (the cast: a branch the body compiles for every dtype; SCALED's matrices are float32 and read below)
        if constexpr (!SCALED)
            mc_load_async<T, L, L, NT3, VEC, false>(PI, LDP, (const device T *)(kind == 0 ? pm : am) + wsx * L * L,
                                                    L, L, L, tid);
        const device T *ysrc = kind == 0 ? dh : (kind == 1 ? k : q);
        const int yld = kind == 0 ? DHHV : DHQK;
        if (ahead) {
            mc_load_async<T, L, W3, NT3, VEC>(Y, LDY, ysrc + tb * yld + tj, yld, Lc, yld - tj, tid);
        } else {
            off = 0;
            mc_load_async<T, L, W3, NT3, VEC, false>(Y, LDY, ysrc + tb * yld + tj, yld, Lc, yld - tj, tid);
            issue_of(J, 0, off);
            issue_of(J, 1, off);
        }
        auto issue = [&](int s) { issue_of(J, s, off); };
        if constexpr (SCALED) {
            // The exponents of the chunk's rows: FE, what the L x L matrix folds in (dv: dh's, over r; dq: k's,
            // over j; dk: q's, over r), and XE, the dot's (dq: q, dk: k)
            for (int r = tid; r < 64; r += NT3) {
                const bool in = r < Lc;
                const int eq = in ? int(xe[tb + r]) : 0, ek = in ? int(xe[ROWS + tb + r]) : 0;
                const int ed = in ? int(xd[tb + r]) : 0;
                FE[r] = kind == 0 ? ed : (kind == 1 ? ek : eq);
                XE[r] = kind == 1 ? eq : ek;
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            // The L x L matrix (float32, true units) into PI as 16-bit values: each element times 2^FE of the
            // index the product sums over, each output line (dv, dk: a column j; dq: a row r) scaled so that its
            // largest lands in [2^14, 2^15), the line's exponent in PE (applied to the product's result). Two
            // passes over the matrix (L2): the lines' largest exponents, then the values.
            const device float *src = (const device float *)((kind == 0 ? pm : am) + wsx * L * L);
            constexpr int NPART = NT3 / L;
            const int ln = tid % L, part = tid / L;
            const bool by_row = kind == 1;
            int mx = -100000;
            for (int a = part; a < L; a += NPART) {
                const int r = by_row ? ln : a, j = by_row ? a : ln;
                const float x = src[r * L + j];
                if (x != 0.0f && isfinite(x)) mx = max(mx, mc_expo(x) + FE[by_row ? j : r]);
            }
            XM[part * 64 + ln] = mx;
            threadgroup_barrier(mem_flags::mem_threadgroup);
            mx = XM[ln];
            for (int p = 1; p < NPART; p++) mx = max(mx, XM[p * 64 + ln]);
            const int pe = mx > -100000 ? mx - 14 : 0;
            if (part == 0) PE[ln] = pe;
            for (int a = part; a < L; a += NPART) {
                const int r = by_row ? ln : a, j = by_row ? a : ln;
                PI[r * LDP + j] = T(mc_ldexp(src[r * L + j], FE[by_row ? j : r] - pe));
            }
        }
        // (SIMD groups past the chunk's rows or the matrix's columns: nothing to compute)
        const int live = r0 < Lc && t0 < ncols ? XT : 0;
        // What the epilogue reads from device memory, loaded now so that its latency hides behind the
        // stream. The row scaling and the rank-one term: dv: wl_j; dq: e_r / den_r, + e_r ds_r n_c; dk:
        // wl_j / scale, + wl_j dn_{c+1} / scale (the whole is scaled after AW^T Q).
        float rsc[2], ron[2];
        for (int hf = 0; hf < 2; hf++) {
            const int r = r0 + g + 8 * hf;
            float a = 0.0f, b = 0.0f;
            if (r < Lc) {
                if (kind == 1) {
                    const device float *rr = rec + (tb + r) * RR;
                    a = rr[2] * rr[0];
                    b = rr[2] * rr[1];
                    if constexpr (SCALED) a = mc_ldexp(a, int(xd[tb + r]));   // dh's rows: their exponents
                } else if constexpr (SCALED) {   // wl_j from its log, with k's (dv) or v's (dk) exponent
                    const float lwl = rec[(tb + r) * RR + 6];
                    const int ex = int(xe[(kind == 0 ? ROWS : 2 * ROWS) + tb + r]);
                    a = kind == 0 ? mc_exp_ldexp(lwl, ex) : mc_exp_ldexp(lwl, ex) / scale;
                    b = kind == 0 ? 0.0f : exp(lwl) / scale;
                } else {
                    const float wl = g_chunk[wsx * GWN + r];
                    a = kind == 0 ? wl : wl / scale;
                    b = kind == 0 ? 0.0f : wl / scale;
                }
            }
            rsc[hf] = a;
            ron[hf] = b;
        }
        // q (dq) or k (dk) at the group's outputs (for q . dq and k . dk) and n_c (dq) or dn_{c+1} (dk) at its
        // columns go into the ring's free slot during the last slice (XS: L x LDY of T; NV: W3 floats)
        const device T *dotx = kind == 1 ? q : k;
        const threadgroup T *XS = nullptr;
        const threadgroup float *NV = nullptr;
        float acc[XT][4];
        #pragma unroll
        for (int u = 0; u < XT; u++)
            #pragma unroll
            for (int e = 0; e < 4; e++) acc[u][e] = 0.0f;
        for (int s = 0; s < nsl; s++) {
            const int buf = (s + off) % 3;
            // slice s (and the first group) landed; s + 1 may fly (ahead, at s = 0: slice 1 and the group of the
            // L x L matrix and Y, committed after it)
            if (ahead && s == 0) mc_wait_copies_but<2>();
            else mc_wait_copies_but<1>();
            threadgroup_barrier(mem_flags::mem_threadgroup);
            issue(s + 2);   // into the slot slice s - 1 used
            if (kind != 0 && s == nsl - 1) {   // the free slot: what the epilogue reads
                const int fb = (s + 2 + off) % 3;
                threadgroup T *xs = BS + fb * W3 * LDA;
                threadgroup float *nv = (threadgroup float *)(AS + fb * L * LDA);
                mc_load_async<T, L, W3, NT3, VEC>(xs, LDY, dotx + tb * DHQK + tj, DHQK, Lc, DHQK - tj, tid);
                const long nb = wsx * DHQK + tj;
                for (int x = tid; x < W3; x += NT3)
                    nv[x] = tj + x < DHQK ? (kind == 1 ? n_chunk[nb + x] : dn_chunk[nb + x]) : 0.0f;
                XS = xs;
                NV = nv;
            }
            const threadgroup T *A = AS + buf * L * LDA + r0 * LDA;
            const threadgroup T *Bt = BS + buf * W3 * LDA;
            if (live > 0) {
                if constexpr (SCALED) {   // this slice's product on its own, then into acc times its tile's factor
                    // dv: dC's tile (DHQK slice s, columns t0); dq: C's (DHQK rows t0, DHHV slice s); dk: dC's likewise
                    const long ti = kind == 0 ? (wsx * KT2 + s) * DHHV + t0 : (wsx * KT2 + t0 / 64) * DHHV + s * 64;
                    const float x = float(kind == 1 ? ce[ti] : dce[ti]);
                    if (kind == 0)
                        mc_row_tiles_scaled<T, XT>(acc, x, x, A, LDA, 1, Bt + 64 * ch, LDY, 1, 64, live, lane);
                    else mc_row_tiles_scaled<T, XT>(acc, x, x, A, LDA, 1, Bt + 64 * ch * LDA, 1, LDA, 64, live, lane);
                } else {
                    if (kind == 0) mc_row_tiles<T, XT>(acc, A, LDA, 1, Bt + 64 * ch, LDY, 1, 64, live, lane);
                    else mc_row_tiles<T, XT>(acc, A, LDA, 1, Bt + 64 * ch * LDA, 1, LDA, 64, live, lane);
                }
            }
        }
        mc_wait_copies();
        // PERSIST: the next job's slices 0 and 1 go into the two buffers other than the one holding XS and NV
        // (slot (nsl + 1 + off) % 3), once every SIMD group is done with the last slices (the barrier)
        bool next_ahead = false;
        if (PERSIST || kind != 0) threadgroup_barrier(mem_flags::mem_threadgroup);   // XS and NV are in
        if constexpr (PERSIST) {
            if (jj + jstep < njobs) {
                const p3_job N = job_of(jj + jstep);
                if (N.has_chunk) {
                    const int noff = (nsl + 2 + off) % 3;   // after the free slot
                    issue_of(N, 0, noff);
                    issue_of(N, 1, noff);
                    off = noff;
                    next_ahead = true;
                }
            }
        }
        if (kind != 0) {
            #pragma unroll
            for (int u = 0; u < XT; u++)
                #pragma unroll
                for (int e = 0; e < 4; e++)
                    acc[u][e] = fma(acc[u][e], rsc[e >> 1], ron[e >> 1] * NV[64 * ch + u * 8 + 2 * qd + (e & 1)]);
        } else {
            #pragma unroll
            for (int u = 0; u < XT; u++)
                #pragma unroll
                for (int e = 0; e < 4; e++) acc[u][e] *= rsc[e >> 1];
        }
        // + the L x L product: dv: P'^T dh (A(j, r) = PI[r][j]); dq: AW K; dk: AW^T Q (SCALED: on its own, then
        // into acc times its rows' scales)
        if constexpr (SCALED) {
            float tacc[XT][4];
            #pragma unroll
            for (int u = 0; u < XT; u++)
                #pragma unroll
                for (int e = 0; e < 4; e++) tacc[u][e] = 0.0f;
            if (live > 0) {
                if (kind == 1) mc_row_tiles<T, XT>(tacc, PI + r0 * LDP, LDP, 1, Y + 64 * ch, LDY, 1, L, live, lane);
                else mc_row_tiles<T, XT>(tacc, PI + r0, 1, LDP, Y + 64 * ch, LDY, 1, L, live, lane);
            }
            const int pr[2] = {PE[r0 + g], PE[r0 + g + 8]};
            #pragma unroll
            for (int u = 0; u < XT; u++)
                #pragma unroll
                for (int e = 0; e < 4; e++) acc[u][e] += mc_ldexp(tacc[u][e], pr[e >> 1]);
        } else if (live > 0) {
            if (kind == 1) mc_row_tiles<T, XT>(acc, PI + r0 * LDP, LDP, 1, Y + 64 * ch, LDY, 1, L, live, lane);
            else mc_row_tiles<T, XT>(acc, PI + r0, 1, LDP, Y + 64 * ch, LDY, 1, L, live, lane);
        }
        const float fin = kind == 0 ? 1.0f : scale;
        device TO *out = kind == 0 ? dv : (kind == 1 ? dq : dk);
        float dot[2] = {0.0f, 0.0f};   // q . dq, k . dk
        #pragma unroll
        for (int u = 0; u < XT; u++)
            #pragma unroll
            for (int hf = 0; hf < 2; hf++) {
                const int r = r0 + g + 8 * hf, col = t0 + u * 8 + 2 * qd;
                const float x0 = acc[u][2 * hf] * fin, x1 = acc[u][2 * hf + 1] * fin;
                if (r < Lc && col < ncols) {
                    device TO *dst = out + (tb + r) * ncols + col;
                    if constexpr (sizeof(TO) == 2 && VEC) {   // rows 16-byte aligned: col + 1 < ncols too
                        *(device uint *)dst = mc_pack2<TO>(x0, x1);
                    } else {
                        dst[0] = TO(x0);
                        if (col + 1 < ncols) dst[1] = TO(x1);
                    }
                    if (kind != 0) {
                        const threadgroup T *y = XS + r * LDY + 64 * ch + u * 8 + 2 * qd;
                        dot[hf] = fma(float(y[0]), x0, dot[hf]);
                        if (col + 1 < ncols) dot[hf] = fma(float(y[1]), x1, dot[hf]);
                    }
                }
            }
        if (kind != 0 && t0 < ncols) {
            for (int hf = 0; hf < 2; hf++) {
                dot[hf] += mc_lane(dot[hf], lane ^ 1u);
                dot[hf] += mc_lane(dot[hf], lane ^ 2u);
            }
            if (qd == 0)
                for (int hf = 0; hf < 2; hf++) {
                    const int r = r0 + g + 8 * hf;
                    // (SCALED: the dot's rows, q or k, are 16-bit rows with an exponent)
                    if (r < Lc)
                        part[(tb + r) * (2 * KT) + (kind == 1 ? 0 : KT) + t0 / 64] =
                            SCALED ? mc_ldexp(dot[hf], XE[r]) : dot[hf];
                }
        }
        ahead = next_ahead;
        // (PERSIST: the next job rewrites PI, Y and the exponents only after every SIMD group's epilogue)
        if constexpr (PERSIST) threadgroup_barrier(mem_flags::mem_threadgroup);
    };
    if constexpr (PERSIST) {
        for (long jj = long(threadgroup_position_in_grid.x); jj < njobs; jj += jstep) run_job(jj);
    } else {
        run_job(long(threadgroup_position_in_grid.x));
    }
} else if constexpr (PHASE == 4) {
    // ---- the gates: reverse scans per (sequence, head) ---------------------
    constexpr int NT4 = 256;
    // threadgroup memory (float): red0, red1, lchain (NT4 each)
    threadgroup float *red0 = (threadgroup float *)alloy_threadgroup_memory;
    threadgroup float *red1 = red0 + NT4;
    threadgroup float *lchain = red1 + NT4;
    const long grp = long(threadgroup_position_in_grid.x);
    const int head = int(grp % NH);
    const long seq = grp / NH;
    const long sidx = seq * NH + head;
    long tokbase;
    int len;
    if (VARLEN) {
        const int s0 = clamp(int(cu[seq]), 0, S), s1 = clamp(int(cu[seq + 1]), 0, S);
        tokbase = long(head) * S + s0;
        len = max(s1 - s0, 0);
    } else {
        tokbase = sidx * long(S);
        len = S;
    }
    // <dX_S, X_S> (the final state's cotangent against the final state) and <dX_0, X_0>
    float xf = 0.0f, x0 = 0.0f;
    const long E = long(DHQK) * DHHV;
    for (long e = tid; e < E + DHQK; e += NT4) {
        if (HAS_DFINAL)
            xf += e < E ? float(dCf[sidx * E + e]) * C_fin[sidx * E + e]
                        : float(dnf[sidx * DHQK + (e - E)]) * n_fin[sidx * DHQK + (e - E)];
        if (HAS_INIT)
            x0 += e < E ? dC0[sidx * E + e] * float(C0[sidx * E + e])
                        : dn0[sidx * DHQK + (e - E)] * float(n0[sidx * DHQK + (e - E)]);
    }
    red0[tid] = xf;
    red1[tid] = x0;
    for (int w = NT4 / 2; w > 0; w /= 2) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tid < w) {
            red0[tid] += red0[tid + w];
            red1[tid] += red1[tid + w];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    xf = red0[0];
    x0 = red1[0];
    // thread x walks block NT4 - 1 - x of the tokens, so the threads before
    // it hold the later tokens: its block's dF sum and m chain's affine map
    // (carry out = pass * carry in + chain), then the later blocks' in order
    const int per = (len + NT4 - 1) / NT4, bi = NT4 - 1 - tid;
    const int ta = min(bi * per, len), tz = min(ta + per, len);
    auto dF = [&](int t) {
        const device float *pp = part + (tokbase + t) * (2 * KT);
        float a = 0.0f, b = 0.0f;
        for (int x = 0; x < KT; x++) a += pp[x], b += pp[KT + x];
        return (a - b) + (t == len - 1 ? xf : 0.0f);
    };
    float sumF = 0.0f, chain = 0.0f, pass = 1.0f;
    for (int t = tz - 1; t >= ta; t--) {
        const device float *rr = rec + (tokbase + t) * RR;
        sumF += dF(t);
        const float tot = chain + rr[3];
        if (rr[4] != 0.0f) chain = tot;
        else chain = 0.0f, pass = 0.0f;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);   // red0, red1 are read: the summaries take their place
    red0[tid] = sumF;
    red1[tid] = pass;
    lchain[tid] = chain;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float suf = 0.0f, carry = HAS_DFINAL ? float(dmf[sidx]) - xf : 0.0f;
    for (int x = 0; x < tid; x++) {
        suf += red0[x];
        carry = red1[x] * carry + lchain[x];
    }
    for (int t = tz - 1; t >= ta; t--) {
        const device float *rr = rec + (tokbase + t) * RR;
        const device float *pp = part + (tokbase + t) * (2 * KT);
        float kdk = 0.0f;
        for (int x = 0; x < KT; x++) kdk += pp[KT + x];
        suf += dF(t);
        const float tot = carry + rr[3];
        float dlf = suf, dig = kdk;
        if (rr[4] != 0.0f) {
            dlf += tot;
            carry = tot;
        } else {
            dig += tot;
            carry = 0.0f;
        }
        const float fp = float(f[tokbase + t]);
        di[tokbase + t] = TO(dig);
        df[tokbase + t] = TO(dlf / (1.0f + exp(fp)));   // d logsigmoid(f) = sigmoid(-f)
    }
    // the first block's carry reaches m_0
    if (HAS_INIT && tid == NT4 - 1) dm0[sidx] = x0 + carry;
}
