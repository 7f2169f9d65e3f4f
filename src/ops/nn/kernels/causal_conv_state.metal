// causal_conv_state: the decoding state after a causal convolution call: the
// last K-1 inputs of (state, x) along time,
//   state_out[b, i, c] = ext[b, S+i, c], ext = state (times -(K-1)..-1, or
//   zeros without has_state) followed by x (times 0..S-1).
// One thread per (b, c) walks i upwards; it reads ext index S+i >= i, never a
// slot it already wrote, so state_out may be state itself (in place).
// Launch constants: long n (B*C), long stride, long S, int C, int K, int has_state.
// Template: T (data), A (unused). Launch: grid = (stride, 1, 1), threadgroup = (256, 1, 1).
//! name: alloy_nn_causal_conv_state
//! inputs: x state
//! outputs: state_out
//! template: T=float32
//! template: A=float32
//! body:
// overlapping launches (alloy_launch_set_overlap, ALLOY_OPS_OVERLAP): the kernel before ends first, the next may start
alloy_wait_previous_kernel();
alloy_start_next_kernel();
for (long e = long(thread_position_in_grid.x); e < n; e += stride) {
    const int c = int(e % long(C));
    const long b = e / long(C);
    for (int i = 0; i < K - 1; i++) {
        const long src = S + long(i), tau = src - long(K - 1);
        T v = T(0);
        if (tau >= 0) v = x[(b * S + tau) * long(C) + c];
        else if (has_state != 0) v = state[(b * long(K - 1) + src) * long(C) + c];
        state_out[(b * long(K - 1) + long(i)) * long(C) + c] = v;
    }
}
