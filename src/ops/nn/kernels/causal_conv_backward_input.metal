// causal_conv_backward_input: the gradient of the causal convolution for its
// time-extended input ext = (state, x) (times -(K-1) .. S-1 at ext indices
// 0 .. S+K-2):  dext[b, u, c] = sum_{j<K, 0 <= u-j < S} w[c,j] * dy[b, u-j, c].
// Indices u >= K-1 are dx[b, u-K+1, c]; u < K-1 are dstate[b, u, c], computed
// only with want_state (else u starts at K-1). One thread per element,
// coalesced over channels; sums in A.
// Launch constants: long n (B*E*C), long stride, long S, long E (S or S+K-1),
// int C, int K, int want_state. Template: T (data), A (accumulation).
// Launch: grid = (stride, 1, 1), threadgroup = (256, 1, 1).
//! name: alloy_nn_causal_conv_backward_input
//! inputs: w dy
//! outputs: dx dstate
//! template: T=float32
//! template: A=float32
//! body:
for (long e = long(thread_position_in_grid.x); e < n; e += stride) {
    const int c = int(e % long(C));
    const long be = e / long(C);
    const long b = be / E;
    const long u = be % E + (want_state != 0 ? 0 : long(K - 1));
    A acc = A(0);
    for (int j = 0; j < K; j++) {
        const long t = u - long(j);
        if (t >= 0 && t < S) acc += A(w[c * K + j]) * A(dy[(b * S + t) * long(C) + c]);
    }
    if (u >= long(K - 1)) dx[(b * S + u - long(K - 1)) * long(C) + c] = T(acc);
    else dstate[(b * long(K - 1) + u) * long(C) + c] = T(acc);
}
