// mlstm_step: one recurrent step of the mLSTM cell (mLSTMexp) for every
// (batch, head): the matrix state C and the output h, and, with NM, n and m.
//   lf = logsigmoid(f), m' = max(lf + m, i), fa = exp(lf + m - m'), ia = exp(i - m')
//   C' = fa C + ia k v^T,  n' = fa n + ia k,  q^ = q DHQK^-1/2
//   h  = (q^ C') / (max(|q^ . n'|, exp(-m')) + eps)
//   q, k (BH, DHQK), v (BH, DHHV), i, f (BH) of T; C (BH, DHQK, DHHV), n (BH, DHQK),
//   m (BH) float32 -> h (BH, DHHV) of T, C_out (BH, DHQK, DHHV) float32 (may be
//   C itself), n_out (BH, DHQK), m_out (BH) float32.
// Every threadgroup of a head reads n and m, so they are written here (NM: by
// the head's first column tile) only when n_out and m_out are other arrays;
// updated in place, mlstm_step_nm writes them in a second launch, after every
// reader.
// One threadgroup of 32 x RY threads per (b*NH + head, tile of 32 W columns):
// lane x owns columns tile*32W + Wx .. + W-1 (W = 4: one 16-byte access, so a
// row of the tile is one 512-byte access; W = 1 spreads a small batch over
// more threadgroups) and the rows y, y + RY, ...; each thread issues the
// loads of RB rows (16) before it stores any (C_out may be C:
// each element is read before its own thread writes it), so W = 1 with
// RY = 16 keeps 32 KiB in flight per threadgroup — what one sequence's state
// needs to fill the GPU — and the first batch's loads go out with the gates'
// and n's. The RY
// partial sums of q^ . C' meet in threadgroup memory. fp32 state and sums.
// Every thread reaches every barrier (no early return).
// With TL one threadgroup per (b*NH + head) walks all its tiles in turn, so
// n' and m' may go to n and m themselves in this one launch (each element of
// n is read and written by the same thread; m is written after the last
// barrier) — for batches large enough to fill the GPU that way.
// With PS > 0 the grid is PS threadgroups an SM, each walking items grp,
// grp + ntg, ... of the BH * tiles (head, tile) pairs, the next item's first
// batch loaded before the current one's barrier and h, so that loads stay in
// flight where a threadgroup of one tile ends and the next one starts (for
// timing: ALLOY_MLSTM_STEP_PS).
// Launch constants: int DHQK, int DHHV, int tiles (ceil(DHHV / (32 W))),
// long items (BH * tiles), float scale (DHQK^-1/2), float eps. Template: T (the input dtype), W (1 or
// 4; 4 needs DHHV % 4 == 0 and C, C_out 16-byte aligned), RY (rows of
// threads: 8 or 16), NM (write n' and m'), RB (rows loaded before the first
// store, 4 to 16; 16 measured best at B = 1 and B = 1024, `bench/RESULTS.md`),
// TL (a threadgroup per head, all its tiles), PS (0, or threadgroups an SM
// walking the items: the grid and the launch bound), PIPE (a batch's rows in
// two halves of RB / 2, each half's slots reloaded with the next batch's rows
// right after its math: RB even).
// With BULK = NS > 0 (W = 4, RY = 8, not TL or PS; for timing:
// ALLOY_MLSTM_STEP_BULK) the tile's rows go through NS stages of SR = 2 RY
// rows in the dynamic threadgroup memory (NS * SR * 32 W floats): on CUDA the
// copy engine loads each row of a stage (one 1-D bulk copy of the tile's
// columns, completing on the stage's mbarrier), every thread updates its two
// rows of the stage there, and thread 0 stores the stage's rows back in bulk
// and refills the stage before with the rows NS stages on (after that stage's
// store has read them) — rows in flight without registers or many threads;
// elsewhere each thread copies its own elements in and out.
// Launch: grid = (BH * tiles * 32, RY, 1) (TL: BH * 32; PS: any number of
// threadgroups), threadgroup = (32, RY, 1).
//! name: alloy_mlstm_step
//! inputs: q k v i f C n m
//! outputs: h C_out n_out m_out
//! template: T=float32
//! template: W=1
//! template: RY=8
//! template: NM=false
//! template: RB=16
//! template: TL=false
//! template: PS=0
//! template: PIPE=false
//! template: BULK=0
//! header:
// With PS (threadgroups an SM), a launch bound that lets that many be resident
#if ALLOY_TEMPLATE_PS > 0
#undef ALLOY_CUDA_LAUNCH_BOUNDS
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(32 * ALLOY_TEMPLATE_RY, ALLOY_TEMPLATE_PS)
#endif
// BULK's copy engine, in functions so that the body keeps no preprocessor lines (which the CPU's
// barrier-region analysis does not take, docs/dialect.md "CPU"): on CUDA the stages' rows move by 1-D bulk copies (thread 0 issues them, every thread
// waits on the stage's mbarrier); elsewhere these do nothing and each thread copies its own elements
// (STEP_ENGINE 0).
#if ALLOY_TEMPLATE_BULK > 0
static_assert(ALLOY_TEMPLATE_W == 4 && ALLOY_TEMPLATE_RY == 8 && !ALLOY_TEMPLATE_TL && ALLOY_TEMPLATE_PS == 0,
              "BULK: 16-byte columns, 8 rows of threads, one tile a threadgroup");
#endif
#if defined(ALLOY_BACKEND_CUDA)
#include "src/ops/mlstm/kernels/async_copy.h"
#include "src/ops/linalg/kernels/tma_copy.h"
enum { STEP_ENGINE = 1 }; // an enum: no storage in the PTX
METAL_FUNC void step_bars_init(threadgroup ulong *bars, int n) {
    for (int e = 0; e < n; e++) tma_bar_init(mc_smem(bars + e), 1);
    tma_fence_bar_init();
}
/* nr rows of `bytes` each, `stride` floats apart from src, into rows of ROW floats at dst, completing on bar */
template <int ROW>
METAL_FUNC void step_stage_load(threadgroup float *dst, const device float *src, long stride, int nr, int bytes,
                                threadgroup ulong *bar) {
    tma_bar_expect(mc_smem(bar), uint(nr * bytes));
    for (int r = 0; r < nr; r++) tma_bulk_load(mc_smem(dst + r * ROW), src + long(r) * stride, uint(bytes), mc_smem(bar));
}
METAL_FUNC void step_stage_wait(threadgroup ulong *bar, int parity) { tma_bar_wait(mc_smem(bar), uint(parity)); }
/* this thread's writes to the stage visible to the copy engine (before the barrier and the store) */
METAL_FUNC void step_stage_fence() { tma_fence_shared(); }
/* the stage's nr rows back to dst, in one bulk group */
template <int ROW>
METAL_FUNC void step_stage_store(device float *dst, long stride, const threadgroup float *src, int nr, int bytes) {
    for (int r = 0; r < nr; r++) tma_bulk_store(dst + long(r) * stride, mc_smem(src + r * ROW), uint(bytes));
    tma_bulk_commit();
}
/* every store group but the last has read its stage */
METAL_FUNC void step_stores_read_but_last() { tma_bulk_wait_read<1>(); }
METAL_FUNC void step_stores_done() { tma_bulk_wait_all(); }
#else
enum { STEP_ENGINE = 0 };
METAL_FUNC void step_bars_init(threadgroup ulong *, int) {}
template <int ROW>
METAL_FUNC void step_stage_load(threadgroup float *, const device float *, long, int, int, threadgroup ulong *) {}
METAL_FUNC void step_stage_wait(threadgroup ulong *, int) {}
METAL_FUNC void step_stage_fence() {}
template <int ROW> METAL_FUNC void step_stage_store(device float *, long, const threadgroup float *, int, int) {}
METAL_FUNC void step_stores_read_but_last() {}
METAL_FUNC void step_stores_done() {}
#endif
// W consecutive floats at p (16-byte aligned when W = 4), and back
template <int WW> METAL_FUNC void st_load(const device float *p, thread float *o) {
    if constexpr (WW == 4) {
        const float4 x = *(const device float4 *)p;
        o[0] = x.x, o[1] = x.y, o[2] = x.z, o[3] = x.w;
    } else {
        for (int e = 0; e < WW; e++) o[e] = p[e];
    }
}
template <int WW> METAL_FUNC void st_store(device float *p, const thread float *o) {
    if constexpr (WW == 4) {
        *(device float4 *)p = float4(o[0], o[1], o[2], o[3]);
    } else {
        for (int e = 0; e < WW; e++) p[e] = o[e];
    }
}
// One batch of a thread's rows j0, j0 + RY, ... (RB of them): C's W columns
// (LC), k and q^ of each row (LKQ), all loads issued together; zeros past
// DHQK or with !live (columns past DHHV).
template <class TT, int WW, int RBB, int RYY, bool LC = true, bool LKQ = true>
METAL_FUNC void st_load_rows(const device float *C, long co, int DHHV, int DHQK, int j0, bool live,
                             const device TT *k, const device TT *q, long qo, float scale, thread float (*cv)[WW],
                             thread float *kv, thread float *qv) {
    #pragma unroll
    for (int u = 0; u < RBB; u++) {
        const int j = j0 + RYY * u;
        if (live && j < DHQK) {
            if (LC) st_load<WW>(C + co + long(j) * DHHV, cv[u]);
            if (LKQ) kv[u] = float(k[qo + j]), qv[u] = float(q[qo + j]) * scale;
        } else {
            if (LC)
                for (int e = 0; e < WW; e++) cv[u][e] = 0.0f;
            if (LKQ) kv[u] = qv[u] = 0.0f;
        }
    }
}
//! body:
// overlapping launches (alloy_launch_set_overlap, ALLOY_OPS_OVERLAP): the kernel before ends first, the next
// (mlstm_step_nm in place, or whatever follows) may start
alloy_wait_previous_kernel();
alloy_start_next_kernel();
constexpr int NT = 32 * RY;   // threads
const int tx = int(thread_position_in_threadgroup.x), ty = int(thread_position_in_threadgroup.y);
const int tid = ty * 32 + tx;
const long grp = long(threadgroup_position_in_grid.x);
// this thread's first column in a tile, and that column's offset in head bh's C
auto col_of = [&](int tile) { return tile * 32 * W + W * tx; };
auto co_of = [&](long bh, int col) { return bh * long(DHQK) * long(DHHV) + col; };
threadgroup float part[RY][32 * W + 1];
threadgroup float qn_part[NT / 32];
float cv[RB][W], kv[RB], qv[RB], vv[W];
// the first batch of rows of head bh's tile and its v, every load at once (at B = 1 the step is a few memory
// round trips: the first one carries all of them, with the gates' and n's)
// (with PS the rows' k and q^ come in run_tile: fewer registers live through the previous item's h)
auto load_first = [&](long bh, int tile) {
    const int col = col_of(tile);
    const int wl = col < DHHV ? min(W, DHHV - col) : 0;   // W = 1 or DHHV % 4 == 0: wl == W when live
    st_load_rows<T, W, RB, RY, true, PS == 0>(C, co_of(bh, col), DHHV, DHQK, ty, col < DHHV, k, q, bh * long(DHQK),
                                              scale, cv, kv, qv);
    for (int e = 0; e < W; e++) vv[e] = e < wl ? float(v[bh * long(DHHV) + col + e]) : 0.0f;
};
// head bh's gates, and its q^ . n' over the whole group into qn_part (n' itself with writes_nm; with TL each
// element of n is read and written by the same thread, so n_out may be n)
float fa = 0.0f, ia = 0.0f, m_new = 0.0f;
auto gates_of = [&](long bh, bool writes_nm) {
    const long qo = bh * long(DHQK);
    const float n0 = tid < DHQK ? n[qo + tid] : 0.0f, k0 = tid < DHQK ? float(k[qo + tid]) : 0.0f;
    const float q0 = tid < DHQK ? float(q[qo + tid]) : 0.0f;
    const float fp = float(f[bh]), ip = float(i[bh]), m_old = m[bh];
    const float lf = fp >= 0.0f ? -log1p(exp(-fp)) : fp - log1p(exp(fp));
    m_new = max(lf + m_old, ip);
    fa = exp(lf + m_old - m_new), ia = exp(ip - m_new);
    float qn = 0.0f;
    if (tid < DHQK) {
        const float nn = fa * n0 + ia * k0;
        qn = q0 * scale * nn;
        if (writes_nm) n_out[qo + tid] = nn;
    }
    for (int j = tid + NT; j < DHQK; j += NT) {
        const float nn = fa * n[qo + j] + ia * float(k[qo + j]);
        qn += float(q[qo + j]) * scale * nn;
        if (writes_nm) n_out[qo + j] = nn;
    }
    qn = simd_sum(qn);
    if (tx == 0) qn_part[ty] = qn;
};
// The end of a tile: the RY partial sums of q^ . C' of this thread's wl live columns (acc) meet in threadgroup
// memory, and h's columns of the tile are written
auto tile_h = [&](long bh, int col, int wl, thread const float *acc) {
    for (int e = 0; e < W; e++) part[ty][W * tx + e] = acc[e];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (ty == 0 && wl > 0) {
        float qs = 0.0f;
        for (int r = 0; r < NT / 32; r++) qs += qn_part[r];
        const float den = max(fabs(qs), exp(-m_new)) + eps;
        for (int e = 0; e < wl; e++) {
            float num = 0.0f;
            for (int r = 0; r < RY; r++) num += part[r][W * tx + e];
            h[bh * long(DHHV) + col + e] = T(num / den);
        }
    }
};
// One tile of head bh: this thread's W columns of C' and its part of q^ . C', batch by batch (C_out may be C:
// each element is read before its own thread writes it), then h's columns of the tile. loaded: the first batch
// and v are in cv, kv, qv, vv already (with PS its C rows and v only). With PS, the first batch of item `next`
// (if any) is loaded after the last batch's math, before the barrier and h: its loads stay in flight through
// them. (A lambda, so that one tile a threadgroup stays straight code.)
auto run_tile = [&](long bh, int tile, bool loaded, long next) {
    const long qo = bh * long(DHQK);
    const int col = col_of(tile);
    const bool live = col < DHHV;
    const int wl = live ? min(W, DHHV - col) : 0;
    const long co = co_of(bh, col);
    if (!loaded) {
        st_load_rows<T, W, RB, RY>(C, co, DHHV, DHQK, ty, live, k, q, qo, scale, cv, kv, qv);
        for (int e = 0; e < W; e++) vv[e] = e < wl ? float(v[bh * long(DHHV) + col + e]) : 0.0f;
    } else if (PS > 0) {
        st_load_rows<T, W, RB, RY, false, true>(C, co, DHHV, DHQK, ty, live, k, q, qo, scale, cv, kv, qv);
    }
    float acc[W], ia_v[W];
    for (int e = 0; e < W; e++) acc[e] = 0.0f, ia_v[e] = ia * vv[e];
    // rows u0 .. u1-1 of the batch at j0: C' stored, q^ . C' summed
    auto rows_math = [&](int j0, int u0, int u1) {
        #pragma unroll
        for (int u = u0; u < u1; u++) {
            const int j = j0 + RY * u;
            if (j < DHQK) {
                float cn[W];
                for (int e = 0; e < W; e++) {
                    cn[e] = fa * cv[u][e] + ia_v[e] * kv[u];
                    acc[e] += qv[u] * cn[e];
                }
                st_store<W>(C_out + co + long(j) * DHHV, cn);
            }
        }
    };
    if constexpr (PIPE) {
        // the batch in halves of H rows: each half's slots reloaded with the next batch's rows as soon as
        // its math is done, so the next batch's first half is in flight through this batch's second half
        constexpr int H = RB / 2;
        for (int j0 = ty; live && j0 < DHQK; j0 += RB * RY) {
            const int jn = j0 + RB * RY;
            rows_math(j0, 0, H);
            if (jn < DHQK) st_load_rows<T, W, H, RY>(C, co, DHHV, DHQK, jn, live, k, q, qo, scale, cv, kv, qv);
            rows_math(j0, H, RB);
            if (jn + RY * H < DHQK)
                st_load_rows<T, W, H, RY>(C, co, DHHV, DHQK, jn + RY * H, live, k, q, qo, scale, cv + H, kv + H,
                                          qv + H);
        }
    } else {
        for (int j0 = ty; live && j0 < DHQK; j0 += RB * RY) {
            if (j0 != ty) st_load_rows<T, W, RB, RY>(C, co, DHHV, DHQK, j0, live, k, q, qo, scale, cv, kv, qv);
            rows_math(j0, 0, RB);
        }
    }
    if (PS > 0 && next < items) load_first(next / tiles, int(next % tiles));
    tile_h(bh, col, wl, acc);
};
if constexpr (PS > 0) {
    // items grp, grp + ntg, ... of the items = BH * tiles (head, tile) pairs, each loaded during the previous
    // one's barrier and h
    const long ntg = long(threadgroups_per_grid.x);
    if (grp < items) load_first(grp / tiles, int(grp % tiles));
    for (long item = grp; item < items; item += ntg) {
        const long bh = item / tiles;
        const int tile = int(item % tiles);
        const bool writes_nm = NM && tile == 0;
        gates_of(bh, writes_nm);
        if (writes_nm && tid == 0) m_out[bh] = m_new;
        run_tile(bh, tile, true, item + ntg);
        threadgroup_barrier(mem_flags::mem_threadgroup);   // part and qn_part are read before the next item writes them
    }
} else if constexpr (TL) {
    const long bh = grp;
    load_first(bh, 0);
    gates_of(bh, NM);
    for (int tile = 0; tile < tiles; tile++) {
        run_tile(bh, tile, tile == 0, items);
        threadgroup_barrier(mem_flags::mem_threadgroup);   // part is read before the next tile writes it
    }
    // every thread read m before the barriers above (m_out may be m)
    if (NM && tid == 0) m_out[bh] = m_new;
} else if constexpr (BULK > 0) {
    // (the copy engine's calls do nothing off CUDA, where each thread copies its own elements through the stage)
    constexpr int SR = 2 * RY, ROW = 32 * W;          // rows a stage, floats a row of the stage
    const long bh = grp / tiles;
    const int tile0 = int(grp % tiles);
    const bool writes_nm = NM && tile0 == 0;
    const long qo = bh * long(DHQK);
    const int col = col_of(tile0);
    const bool live = col < DHHV;
    const int wl = live ? min(W, DHHV - col) : 0;
    const int tb = 4 * min(ROW, DHHV - tile0 * ROW);  // the tile's bytes a row (a multiple of 16)
    const long cb = co_of(bh, tile0 * ROW);           // its first element in C and C_out
    const int nst = (DHQK + SR - 1) / SR;             // stages
    threadgroup float *sbuf = (threadgroup float *)alloy_threadgroup_memory;
    threadgroup ulong bars[BULK > 0 ? BULK : 1];      // stage s % BULK's loads have landed
    // stage s's rows into its slot (thread 0)
    auto issue_load = [&](int s) {
        step_stage_load<ROW>(sbuf + (s % BULK) * SR * ROW, C + cb + long(s * SR) * DHHV, DHHV, min(SR, DHQK - s * SR),
                             tb, bars + s % BULK);
    };
    if (tid == 0) step_bars_init(bars, BULK);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0)
        for (int e = 0; e < BULK && e < nst; e++) issue_load(e);
    for (int e = 0; e < W; e++) vv[e] = e < wl ? float(v[bh * long(DHHV) + col + e]) : 0.0f;
    gates_of(bh, writes_nm);
    if (writes_nm && tid == 0) m_out[bh] = m_new;
    float acc[W], ia_v[W];
    for (int e = 0; e < W; e++) acc[e] = 0.0f, ia_v[e] = ia * vv[e];
    for (int s = 0; s < nst; s++) {
        const int slot = s % BULK;
        step_stage_wait(bars + slot, (s / BULK) & 1);
        for (int u = 0; u < 2; u++) {
            const int r = ty + RY * u, j = s * SR + r;   // the row in the stage, in C
            if (live && j < DHQK) {
                threadgroup float *p = sbuf + (slot * SR + r) * ROW + W * tx;
                if constexpr (!STEP_ENGINE) st_load<W>(C + co_of(bh, col) + long(j) * DHHV, p);
                const float kj = float(k[qo + j]), qj = float(q[qo + j]) * scale;
                for (int e = 0; e < W; e++) {
                    const float cn = fa * p[e] + ia_v[e] * kj;
                    acc[e] += qj * cn;
                    p[e] = cn;
                }
                if constexpr (!STEP_ENGINE) st_store<W>(C_out + co_of(bh, col) + long(j) * DHHV, p);
            }
        }
        step_stage_fence();
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tid == 0) {
            step_stage_store<ROW>(C_out + cb + long(s * SR) * DHHV, DHHV, sbuf + slot * SR * ROW, min(SR, DHQK - s * SR),
                                  tb);
            // the stage before's slot, once its store has read it, takes the rows BULK stages after it
            if (s >= 1 && s - 1 + BULK < nst) {
                step_stores_read_but_last();
                issue_load(s - 1 + BULK);
            }
        }
    }
    if (tid == 0) step_stores_done();
    tile_h(bh, col, wl, acc);
} else {
    const long bh = grp / tiles;
    const int tile0 = int(grp % tiles);   // the tile of columns this threadgroup serves
    const bool writes_nm = NM && tile0 == 0;
    load_first(bh, tile0);
    gates_of(bh, writes_nm);
    if (writes_nm && tid == 0) m_out[bh] = m_new;
    run_tile(bh, tile0, true, items);
}
