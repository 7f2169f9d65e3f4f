// causal_conv_forward: causal depthwise convolution over time,
//   y[b,t,c] = bias[c] + sum_{j<K} w[c,j] * x[b, t-K+1+j, c]
// where time tau < 0 reads state[b, K-1+tau, c] (has_state) or 0. One thread
// per output element (grid-stride), consecutive threads on consecutive
// channels (coalesced); sums in A.
// Launch constants: long n (B*S*C), long stride, long S, int C, int K,
// int has_bias, int has_state. Template: T (data), A (accumulation).
// Launch: grid = (stride, 1, 1), threadgroup = (256, 1, 1).
//! name: alloy_nn_causal_conv_forward
//! inputs: x w bias state
//! outputs: y
//! template: T=float32
//! template: A=float32
//! body:
for (long e = long(thread_position_in_grid.x); e < n; e += stride) {
    const int c = int(e % long(C));
    const long bt = e / long(C);
    const long t = bt % S, b = bt / S;
    A acc = has_bias != 0 ? A(bias[c]) : A(0);
    for (int j = 0; j < K; j++) {
        const long tau = t - long(K - 1) + long(j);
        A v = A(0);
        if (tau >= 0) v = A(x[(b * S + tau) * long(C) + c]);
        else if (has_state != 0) v = A(state[(b * long(K - 1) + long(K - 1) + tau) * long(C) + c]);
        acc += A(w[c * K + j]) * v;
    }
    y[e] = T(acc);
}
