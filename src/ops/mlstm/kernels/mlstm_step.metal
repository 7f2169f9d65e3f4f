// mlstm_step: one recurrent step of the mLSTM cell (mLSTMexp) for every
// (batch, head): the matrix state C and the output h. n and m are only read
// here (mlstm_step_nm writes their new values in a second launch, so a state
// updated in place is never read after it was overwritten).
//   lf = logsigmoid(f), m' = max(lf + m, i), fa = exp(lf + m - m'), ia = exp(i - m')
//   C' = fa C + ia k v^T,  n' = fa n + ia k,  q^ = q DHQK^-1/2
//   h  = (q^ C') / (max(|q^ . n'|, exp(-m')) + eps)
//   q, k (BH, DHQK), v (BH, DHHV), i, f (BH) of T; C (BH, DHQK, DHHV), n (BH, DHQK),
//   m (BH) float32 -> h (BH, DHHV) of T, C_out (BH, DHQK, DHHV) float32 (may be C itself).
// One threadgroup of 32 x 8 threads per (b*NH + head, tile of 32 columns of C):
// thread (x, y) owns column tile*32 + x and the rows y, y + 8, ... of it, so a
// row of 32 columns is one coalesced 128-byte access; the 8 partial sums of
// q^ . C' meet in threadgroup memory. q^ . n' is reduced by the whole group.
// Every thread reaches every barrier (no early return). fp32 state and sums.
// Launch constants: int DHQK, int DHHV, int tiles (ceil(DHHV/32)),
// float scale (DHQK^-1/2), float eps. Template: T (the input dtype).
// Launch: grid = (BH * tiles * 32, 8, 1), threadgroup = (32, 8, 1).
//! name: alloy_mlstm_step
//! inputs: q k v i f C n m
//! outputs: h C_out
//! template: T=float32
//! body:
const int tx = int(thread_position_in_threadgroup.x), ty = int(thread_position_in_threadgroup.y);
const int tid = ty * 32 + tx;
const long grp = long(threadgroup_position_in_grid.x);
const long bh = grp / tiles;
const int col = int(grp % tiles) * 32 + tx;
threadgroup float part[8][33];
threadgroup float qn_part[256];
const float fp = float(f[bh]), ip = float(i[bh]), m_old = m[bh];
const float lf = fp >= 0.0f ? -log1p(exp(-fp)) : fp - log1p(exp(fp));
const float m_new = max(lf + m_old, ip);
const float fa = exp(lf + m_old - m_new), ia = exp(ip - m_new);
const long qo = bh * long(DHQK);
// q^ . n' over the whole group
float qn = 0.0f;
for (int j = tid; j < DHQK; j += 256) qn += float(q[qo + j]) * scale * (fa * n[qo + j] + ia * float(k[qo + j]));
qn_part[tid] = qn;
// this thread's column of C' and its part of q^ . C'
float acc = 0.0f;
if (col < DHHV) {
    const float ia_v = ia * float(v[bh * long(DHHV) + col]);
    const long co = bh * long(DHQK) * long(DHHV) + col;
    // eight rows' loads issued before any store: at B = 1 each SM holds one
    // threadgroup, and C_out may be C (in place), so a store could not be
    // passed by the next row's load and the step would wait on memory
    // latency DHQK / 8 times; each element is still read before this thread
    // writes it
    for (int j0 = ty; j0 < DHQK; j0 += 64) {
        float cv[8], kv[8], qv[8];
        #pragma unroll
        for (int u = 0; u < 8; u++) {
            const int j = j0 + 8 * u;
            cv[u] = j < DHQK ? C[co + long(j) * DHHV] : 0.0f;
            kv[u] = j < DHQK ? float(k[qo + j]) : 0.0f;
            qv[u] = j < DHQK ? float(q[qo + j]) : 0.0f;
        }
        #pragma unroll
        for (int u = 0; u < 8; u++) {
            const int j = j0 + 8 * u;
            if (j < DHQK) {
                const float c_new = fa * cv[u] + ia_v * kv[u];
                C_out[co + long(j) * DHHV] = c_new;
                acc += qv[u] * scale * c_new;
            }
        }
    }
}
part[ty][tx] = acc;
threadgroup_barrier(mem_flags::mem_threadgroup);
for (int s = 128; s > 0; s >>= 1) {
    if (tid < s) qn_part[tid] += qn_part[tid + s];
    threadgroup_barrier(mem_flags::mem_threadgroup);
}
if (ty == 0 && col < DHHV) {
    float num = 0.0f;
    for (int r = 0; r < 8; r++) num += part[r][tx];
    const float den = max(fabs(qn_part[0]), exp(-m_new)) + eps;
    h[bh * long(DHHV) + col] = T(num / den);
}
