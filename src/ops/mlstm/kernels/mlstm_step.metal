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
// Launch constants: int DHQK, int DHHV, int tiles (ceil(DHHV / (32 W))),
// float scale (DHQK^-1/2), float eps. Template: T (the input dtype), W (1 or
// 4; 4 needs DHHV % 4 == 0 and C, C_out 16-byte aligned), RY (rows of
// threads, 4 to 16), NM (write n' and m'), RB (rows loaded before the first
// store, 4 to 16; `bench/RESULTS.md`), PIPE (a batch's rows in
// two halves of RB / 2, each half's slots reloaded with the next batch's rows
// right after its math: RB even), KT (the rows' k and q^ from threadgroup
// memory, written there by the gates' loads: 2 RB fewer loads a thread and
// one more barrier; DHQK <= 512), MINB (0, or threadgroups an SM: a launch
// bound on CUDA).
// Launch: grid = (BH * tiles * 32, RY, 1), threadgroup = (32, RY, 1).
//! name: alloy_mlstm_step
//! inputs: q k v i f C n m
//! outputs: h C_out n_out m_out
//! template: T=float32
//! template: W=1
//! template: RY=8
//! template: NM=false
//! template: RB=16
//! template: PIPE=false
//! template: KT=false
//! template: MINB=0
//! header:
// MINB > 0: a launch bound that keeps that many threadgroups resident an SM (registers capped to fit)
#if ALLOY_TEMPLATE_MINB > 0
#undef ALLOY_CUDA_LAUNCH_BOUNDS
#define ALLOY_CUDA_LAUNCH_BOUNDS __launch_bounds__(32 * ALLOY_TEMPLATE_RY, ALLOY_TEMPLATE_MINB)
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
// One batch of a thread's rows j0, j0 + RY, ... (RB of them): C's W columns,
// k and q^ of each row, all loads issued together; zeros past
// DHQK or with !live (columns past DHHV). Without LKQ, C's columns only.
template <class TT, int WW, int RBB, int RYY, bool LKQ = true>
METAL_FUNC void st_load_rows(const device float *C, long co, int DHHV, int DHQK, int j0, bool live,
                             const device TT *k, const device TT *q, long qo, float scale, thread float (*cv)[WW],
                             thread float *kv, thread float *qv) {
    #pragma unroll
    for (int u = 0; u < RBB; u++) {
        const int j = j0 + RYY * u;
        if (live && j < DHQK) {
            st_load<WW>(C + co + long(j) * DHHV, cv[u]);
            if constexpr (LKQ) kv[u] = float(k[qo + j]), qv[u] = float(q[qo + j]) * scale;
        } else {
            for (int e = 0; e < WW; e++) cv[u][e] = 0.0f;
            if constexpr (LKQ) kv[u] = qv[u] = 0.0f;
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
threadgroup float part[RY][32 * W + 1];
threadgroup float qn_part[NT / 32];
threadgroup float kq_rows[2][KT ? 512 : 1];   // KT: the head's k and q^ (DHQK <= 512), from the gates' loads
const long bh = grp / tiles;             // the (sequence, head)
const int tile = int(grp % tiles);       // and the tile of columns this threadgroup serves
const bool writes_nm = NM && tile == 0;
const long qo = bh * long(DHQK);
const int col = tile * 32 * W + W * tx;  // this thread's first column
const bool live = col < DHHV;
const int wl = live ? min(W, DHHV - col) : 0;   // W = 1 or DHHV % 4 == 0: wl == W when live
const long co = bh * long(DHQK) * long(DHHV) + col;   // that column's offset in head bh's C
// the first batch of rows and v, every load at once (at B = 1 the step is a few memory round trips: the first
// one carries all of them, with the gates' and n's)
float cv[RB][W], kv[RB], qv[RB], vv[W];
st_load_rows<T, W, RB, RY, !KT>(C, co, DHHV, DHQK, ty, live, k, q, qo, scale, cv, kv, qv);
for (int e = 0; e < W; e++) vv[e] = e < wl ? float(v[bh * long(DHHV) + col + e]) : 0.0f;
// the head's gates, and its q^ . n' over the whole group into qn_part (n' itself with writes_nm); the loads of
// the first n, k and q^ go out before the gates' math
const float n0 = tid < DHQK ? n[qo + tid] : 0.0f, k0 = tid < DHQK ? float(k[qo + tid]) : 0.0f;
const float q0 = tid < DHQK ? float(q[qo + tid]) : 0.0f;
const float fp = float(f[bh]), ip = float(i[bh]), m_old = m[bh];
const float lf = fp >= 0.0f ? -log1p(exp(-fp)) : fp - log1p(exp(fp));
const float m_new = max(lf + m_old, ip);
const float fa = exp(lf + m_old - m_new), ia = exp(ip - m_new);
{
    float qn = 0.0f;
    if (tid < DHQK) {
        const float nn = fa * n0 + ia * k0;
        qn = q0 * scale * nn;
        if (writes_nm) n_out[qo + tid] = nn;
        if constexpr (KT) kq_rows[0][tid] = k0, kq_rows[1][tid] = q0 * scale;
    }
    for (int j = tid + NT; j < DHQK; j += NT) {
        const float nn = fa * n[qo + j] + ia * float(k[qo + j]);
        qn += float(q[qo + j]) * scale * nn;
        if (writes_nm) n_out[qo + j] = nn;
        // (read again, not shared with the line above: the default's code stays as it was)
        if constexpr (KT) kq_rows[0][j] = float(k[qo + j]), kq_rows[1][j] = float(q[qo + j]) * scale;
    }
    qn = simd_sum(qn);
    if (tx == 0) qn_part[ty] = qn;
}
if (writes_nm && tid == 0) m_out[bh] = m_new;
if constexpr (KT) threadgroup_barrier(mem_flags::mem_threadgroup);   // kq_rows written
// this thread's W columns of C' and its part of q^ . C', batch by batch (C_out may be C: each element is read
// before its own thread writes it)
float acc[W], ia_v[W];
for (int e = 0; e < W; e++) acc[e] = 0.0f, ia_v[e] = ia * vv[e];
{
    // rows u0 .. u1-1 of the batch at j0: C' stored, q^ . C' summed
    auto rows_math = [&](int j0, int u0, int u1) {
        #pragma unroll
        for (int u = u0; u < u1; u++) {
            const int j = j0 + RY * u;
            if (j < DHQK) {
                float cn[W];
                for (int e = 0; e < W; e++) {
                    cn[e] = fa * cv[u][e] + ia_v[e] * (KT ? kq_rows[0][j] : kv[u]);
                    acc[e] += (KT ? kq_rows[1][j] : qv[u]) * cn[e];
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
            if (jn < DHQK) st_load_rows<T, W, H, RY, !KT>(C, co, DHHV, DHQK, jn, live, k, q, qo, scale, cv, kv, qv);
            rows_math(j0, H, RB);
            if (jn + RY * H < DHQK)
                st_load_rows<T, W, H, RY, !KT>(C, co, DHHV, DHQK, jn + RY * H, live, k, q, qo, scale, cv + H,
                                               kv + H, qv + H);
        }
    } else {
        for (int j0 = ty; live && j0 < DHQK; j0 += RB * RY) {
            if (j0 != ty) st_load_rows<T, W, RB, RY, !KT>(C, co, DHHV, DHQK, j0, live, k, q, qo, scale, cv, kv, qv);
            rows_math(j0, 0, RB);
        }
    }
}
// the RY partial sums of q^ . C' of this thread's wl live columns meet in threadgroup memory, and h's columns
// of the tile are written
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
