// mlstm_step: one recurrent step of the xLSTM mLSTM cell (generation), fp32,
// with the exact math of the NX-AI native step (mlstm_recurrent_step__native_fw):
//   f_log = logsigmoid(f)                       (stable two-branch form)
//   m_new = max(f_log + m, i)
//   f_act = exp(f_log + m - m_new),  i_act = exp(i - m_new)
//   q_s   = q * DHQK^-0.5                       (only q is scaled)
//   C_new = f_act * C + i_act * k v^T           (DHQK x DHHV)
//   n_new = f_act * n + i_act * k
//   h     = (q_s . C_new) / (max(|q_s . n_new|, exp(-m_new)) + eps),  eps = 1e-6
// Inputs:  q, k (B,NH,DHQK); v (B,NH,DHHV); i, f (B,NH) gate pre-activations;
//          C (B,NH,DHQK,DHHV), n (B,NH,DHQK), m (B,NH): the state.
// Outputs: h (B,NH,DHHV); C_out, n_out, m_out: the new state (same shapes).
// Sizes come from the shapes of q and v.
// One threadgroup per (batch, head): its threads share the DHQK loop of
// n_new and q_s . n_new (reduced with simd_sum and threadgroup memory), then
// take columns dv of C and elements of h. No thread writes any state before
// the barrier that follows the last read of another thread's data (m is read
// by all threads, written once after the barrier; each n and C element is
// read and written by one thread), so the step is race-free and even correct
// in place (C_out/n_out/m_out being the arrays C/n/m).
// Launch: grid = (NH*TG, B, 1) THREADS, threadgroup = (TG, 1, 1), TG a
// multiple of 32 up to 1024 (e.g. 64; TG >= DHHV avoids a second dv pass).
//! name: mlstm_step
//! inputs: q k v i f C n m
//! outputs: h C_out n_out m_out
//! body:
constexpr float EPS = 1e-6f;
threadgroup float partials[32];   // one per SIMD group (<= 1024/32)

uint B = uint(q_shape[0]);
uint NH = uint(q_shape[1]);
uint DHQK = uint(q_shape[2]);
uint DHHV = uint(v_shape[2]);
uint head = threadgroup_position_in_grid.x;
uint batch = threadgroup_position_in_grid.y;
uint tid = thread_position_in_threadgroup.x;
uint nthreads = threads_per_threadgroup.x;
if (head >= NH || batch >= B) return;   // the whole group leaves together
uint bh = batch * NH + head;

// Gates: every thread computes the same scalars from the inputs.
float f_pre = f[bh];
float i_pre = i[bh];
float m_old = m[bh];
float f_log = f_pre >= 0.0f ? -metal::log(1.0f + metal::exp(-f_pre))
                            : f_pre - metal::log(1.0f + metal::exp(f_pre));
float m_new = metal::max(f_log + m_old, i_pre);
float f_act = metal::exp(f_log + m_old - m_new);
float i_act = metal::exp(i_pre - m_new);
float scale = 1.0f / metal::sqrt(float(DHQK));

size_t qk_base = size_t(bh) * DHQK;
size_t v_base = size_t(bh) * DHHV;
size_t c_base = size_t(bh) * DHQK * DHHV;

// 1. q_s . n_new, cooperatively over DHQK (reads only).
float part = 0.0f;
for (uint j = tid; j < DHQK; j += nthreads) {
    float n_new = metal::fma(f_act, n[qk_base + j], i_act * k[qk_base + j]);
    part = metal::fma(q[qk_base + j] * scale, n_new, part);
}
float simd_part = simd_sum(part);
if (thread_index_in_simdgroup == 0) partials[simdgroup_index_in_threadgroup] = simd_part;
threadgroup_barrier(mem_flags::mem_threadgroup);
float qn = 0.0f;
for (uint s = 0; s < simdgroups_per_threadgroup; ++s) qn += partials[s];
float denom = metal::max(metal::fabs(qn), metal::exp(-m_new)) + EPS;

// 2. State writes, all after the barrier: m once, n by the thread that read it.
if (tid == 0) m_out[bh] = m_new;
for (uint j = tid; j < DHQK; j += nthreads)
    n_out[qk_base + j] = metal::fma(f_act, n[qk_base + j], i_act * k[qk_base + j]);

// 3. Column dv of C_new and h[dv].
for (uint dv = tid; dv < DHHV; dv += nthreads) {
    float iv = i_act * v[v_base + dv];
    float h_num = 0.0f;
    for (uint j = 0; j < DHQK; ++j) {
        size_t idx = c_base + size_t(j) * DHHV + dv;
        float c_new = metal::fma(f_act, C[idx], k[qk_base + j] * iv);
        C_out[idx] = c_new;
        h_num = metal::fma(q[qk_base + j] * scale, c_new, h_num);
    }
    h[v_base + dv] = h_num / denom;
}
