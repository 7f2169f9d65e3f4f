// mlstm_parallel: the quadratic (parallel) form of the mLSTM cell (mLSTMexp)
// from zero initial states, equal to S recurrent steps:
//   logD(t, j) = sum_{s=j+1..t} logsigmoid(f_s) + i_j   (j <= t)
//   m_t = max(sum_{s=0..t} logsigmoid(f_s), max_j logD(t, j))   (the first term is
//         the zero initial state's m_0 = 0 carried forward: the recurrent stabiliser)
//   w_tj = exp(logD(t, j) - m_t) (q^_t . k_j),  q^ = q DHQK^-1/2
//   h_t = (sum_j w_tj v_j) / (max(|sum_j w_tj|, exp(-m_t)) + eps)
//   q, k (BH, S, DHQK), v (BH, S, DHHV), i, f (BH, S) of T -> h (BH, S, DHHV) of T.
// One threadgroup of 256 threads per (b*NH + head, query tile of 32, tile of 32
// columns of h). It walks the key tiles of 32 from the diagonal back to the
// start (FlashAttention's loop with a running max): scores by 32 x 32 blocks of
// q and k staged in threadgroup memory (DHQK in steps of 32), the row maxima,
// denominators and rescaled numerators kept per row in fp32. The log-forget
// sums are built backwards as sums of terms of one sign (a suffix sum inside
// the key tile plus, per query row, the total of the tiles passed; on the
// diagonal tile the sum from key to query directly), never as differences of
// prefix sums, so they keep their relative accuracy for any S and no term
// after a query (a NaN or -inf forget gate) reaches it. Thread (r, g) =
// (tid / 8, tid % 8) owns row r and columns g, g + 8, g + 16, g + 24 of the
// score and output tiles. Every thread reaches every barrier.
// Launch constants: int S, int DHQK, int DHHV, int qtiles, int vtiles,
// float scale (DHQK^-1/2), float eps. Template: T (the input dtype).
// Launch: grid = (BH * qtiles * vtiles * 256, 1, 1), threadgroup = (256, 1, 1).
//! name: alloy_mlstm_parallel
//! inputs: q k v i f
//! outputs: h
//! template: T=float32
//! body:
constexpr int TB = 32;
threadgroup float Qs[TB][TB + 1];
threadgroup float Ks[TB][TB + 1];
threadgroup float Ps[TB][TB + 1];   // scores, then the weights w
threadgroup float Vs[TB][TB + 1];
threadgroup float LF[TB], IG[TB], SUF[TB];
threadgroup float A[TB], M[TB], DEN[TB], SC[TB];
threadgroup float TOT;
const int tid = int(thread_index_in_threadgroup);
const int r = tid >> 3, g = tid & 7;
long grp = long(threadgroup_position_in_grid.x);
const int vt = int(grp % vtiles);
grp /= vtiles;
const int qt = int(grp % qtiles);
const long bh = grp / qtiles;
const int q0 = qt * TB, v0 = vt * TB;
const long gq = bh * long(S) * DHQK, gv = bh * long(S) * DHHV, gs = bh * long(S);
const float NEG_INF = -INFINITY;
float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
if (tid < TB) {
    M[tid] = NEG_INF;
    DEN[tid] = 0.0f;
}
for (int k0 = q0; k0 >= 0; k0 -= TB) {
    const int k1 = min(k0 + TB, S) - 1;   // last key of the tile
    // gates of the tile's keys; suffix sums SUF[c] = sum_{s=k0+c+1..k1} lf_s
    if (tid < TB) {
        const int j = k0 + tid;
        float lf = 0.0f, ig = 0.0f;
        if (j <= k1) {
            const float fp = float(f[gs + j]);
            lf = fp >= 0.0f ? -log1p(exp(-fp)) : fp - log1p(exp(fp));
            ig = float(i[gs + j]);
        }
        LF[tid] = lf;
        IG[tid] = ig;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0) {
        float s = 0.0f;
        for (int c = TB - 1; c >= 0; c--) {
            SUF[c] = s;
            s += LF[c];
        }
        TOT = s;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // scores q_t . k_j for the 32 x 32 block
    float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int d0 = 0; d0 < DHQK; d0 += TB) {
        for (int e = tid; e < TB * TB; e += 256) {
            const int rr = e >> 5, cc = e & 31;
            const int t = q0 + rr, j = k0 + rr, d = d0 + cc;
            Qs[rr][cc] = (t < S && d < DHQK) ? float(q[gq + long(t) * DHQK + d]) : 0.0f;
            Ks[rr][cc] = (j < S && d < DHQK) ? float(k[gq + long(j) * DHQK + d]) : 0.0f;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (int d = 0; d < TB; d++) {
            const float qv = Qs[r][d];
            for (int u = 0; u < 4; u++) sc[u] += qv * Ks[g + 8 * u][d];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    // log weights (masked: -inf) and scaled scores. On the diagonal tile each
    // sum runs over s = j+1..t directly (never a difference with terms past t:
    // a NaN or -inf forget gate after t must not reach row t); on the others
    // A[r] (the tiles passed, through t) plus the key's suffix in its tile
    for (int u = 0; u < 4; u++) {
        const int c = g + 8 * u, t = q0 + r, j = k0 + c;
        const bool live = t < S && j <= t && j < S;
        float ld = NEG_INF;
        if (live) {
            if (k0 == q0) {
                float s = 0.0f;
                for (int x = c + 1; x <= r; x++) s += LF[x];
                ld = s + IG[c];
            } else {
                ld = A[r] + SUF[c] + IG[c];
            }
        }
        Ks[r][c] = ld;   // Ks reused for log D
        Ps[r][c] = sc[u] * scale;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // per row: the new running max, the rescale of what came before, the weights
    if (tid < TB) {
        float mt = M[tid];
        for (int c = 0; c < TB; c++) mt = max(mt, Ks[tid][c]);
        const float rescale = mt == NEG_INF ? 1.0f : exp(M[tid] - mt);
        float den = DEN[tid] * rescale;
        for (int c = 0; c < TB; c++) {
            const float w = mt == NEG_INF ? 0.0f : exp(Ks[tid][c] - mt) * Ps[tid][c];
            Ps[tid][c] = w;
            den += w;
        }
        DEN[tid] = den;
        M[tid] = mt;
        SC[tid] = rescale;
        // now A = sum_{s=k0..t} lf_s, ready for the previous tile (on the
        // diagonal the prefix through t, summed directly)
        if (k0 == q0) {
            float s = 0.0f;
            for (int x = 0; x <= tid; x++) s += LF[x];
            A[tid] = s;
        } else {
            A[tid] += TOT;
        }
    }
    // the value block of the tile
    for (int e = tid; e < TB * TB; e += 256) {
        const int rr = e >> 5, cc = e & 31;
        const int j = k0 + rr, c = v0 + cc;
        Vs[rr][cc] = (j < S && c < DHHV) ? float(v[gv + long(j) * DHHV + c]) : 0.0f;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    {
        const float rs = SC[r];
        for (int u = 0; u < 4; u++) acc[u] *= rs;
        for (int j = 0; j < TB; j++) {
            const float w = Ps[r][j];
            for (int u = 0; u < 4; u++) acc[u] += w * Vs[j][g + 8 * u];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
}
// the zero initial state: its stabiliser sum_{s=0..t} lf_s (= A now) joins the max
if (tid < TB) {
    const float mf = max(M[tid], A[tid]);
    const float rescale = M[tid] == NEG_INF ? 0.0f : exp(M[tid] - mf);
    SC[tid] = rescale;
    DEN[tid] = max(fabs(DEN[tid] * rescale), exp(-mf)) + eps;
}
threadgroup_barrier(mem_flags::mem_threadgroup);
const int t = q0 + r;
if (t < S) {
    const float rs = SC[r], den = DEN[r];
    for (int u = 0; u < 4; u++) {
        const int c = v0 + g + 8 * u;
        if (c < DHHV) h[gv + long(t) * DHHV + c] = T(acc[u] * rs / den);
    }
}
