// mlstm_step_nm: the normaliser and stabiliser states of one mLSTM step
// updated in place (after mlstm_step, which read their old values):
//   lf = logsigmoid(f), m' = max(lf + m, i), n' = exp(lf + m - m') n + exp(i - m') k
//   k (BH, DHQK), i, f (BH) of T; n (BH, DHQK), m (BH) float32
//   -> n_out (BH, DHQK), m_out (BH) float32 (either may be the input itself:
//   every thread reads m before the barrier and thread 0 writes it after).
// One threadgroup per (b*NH + head); thread t handles n's elements t, t + 128,
// ...: four of them loaded before the gates are computed, so the step's
// second launch waits on memory once. Launched to overlap mlstm_step
// (ALLOY_OPS_OVERLAP), it loads and computes first and writes n' and m' only
// after alloy_wait_previous_kernel — every reader of n and m has ended then
// (a no-op otherwise).
// Launch constants: int DHQK. Template: T (the input dtype).
// Launch: grid = (BH * 128, 1, 1), threadgroup = (128, 1, 1).
//! name: alloy_mlstm_step_nm
//! inputs: k i f n m
//! outputs: n_out m_out
//! template: T=float32
//! body:
const int tid = int(thread_position_in_threadgroup.x);
const long bh = long(threadgroup_position_in_grid.x);
const long qo = bh * long(DHQK);
float nv[4], kv[4];
for (int u = 0; u < 4; u++) {
    const int j = tid + 128 * u;
    nv[u] = j < DHQK ? n[qo + j] : 0.0f;
    kv[u] = j < DHQK ? float(k[qo + j]) : 0.0f;
}
const float fp = float(f[bh]), ip = float(i[bh]), m_old = m[bh];
const float lf = fp >= 0.0f ? -log1p(exp(-fp)) : fp - log1p(exp(fp));
const float m_new = max(lf + m_old, ip);
const float fa = exp(lf + m_old - m_new), ia = exp(ip - m_new);
alloy_wait_previous_kernel();
for (int u = 0; u < 4; u++) {
    const int j = tid + 128 * u;
    if (j < DHQK) n_out[qo + j] = fa * nv[u] + ia * kv[u];
}
for (int j = tid + 512; j < DHQK; j += 128) n_out[qo + j] = fa * n[qo + j] + ia * float(k[qo + j]);
threadgroup_barrier(mem_flags::mem_threadgroup);
if (tid == 0) m_out[bh] = m_new;
