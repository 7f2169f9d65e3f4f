// causal_conv_param_partials: the first stage of the deterministic dw/db
// reduction of the causal convolution's backward. Thread (c, p) sums, over
// the rows r = b*S + t from p*RB to min(R, (p+1)*RB)-1 in order,
//   dw[c,j] += dy[b,t,c] * ext(b, t-K+1+j, c),  db[c] += dy[b,t,c]
// (ext: x, the state at negative times, or 0) into
//   part[p*M + c*K + j] (dw) and part[p*M + C*K + c] (db), M = C*(K+1).
// Launch constants: long R (B*S), long RB, long P, long S, int C, int K,
// int has_state. Template: T (data), A (accumulation; part is A).
// Launch: grid = (ceil(C/128)*128, P, 1), threadgroup = (128, 1, 1).
//! name: alloy_nn_causal_conv_param_partials
//! inputs: x state dy
//! outputs: part
//! template: T=float32
//! template: A=float32
//! body:
const long c = long(thread_position_in_grid.x), p = long(thread_position_in_grid.y);
if (c < long(C) && p < P) {
    A dw[8];
    for (int j = 0; j < 8; j++) dw[j] = A(0);
    A db = A(0);
    const long r1 = min(R, (p + 1) * RB);
    for (long r = p * RB; r < r1; r++) {
        const long b = r / S, t = r % S;
        const A d = A(dy[r * long(C) + c]);
        db += d;
        for (int j = 0; j < K; j++) {
            const long tau = t - long(K - 1) + long(j);
            A v = A(0);
            if (tau >= 0) v = A(x[(b * S + tau) * long(C) + c]);
            else if (has_state != 0) v = A(state[(b * long(K - 1) + long(K - 1) + tau) * long(C) + c]);
            dw[j] += d * v;
        }
    }
    const long M = long(C) * long(K + 1);
    for (int j = 0; j < K; j++) part[p * M + c * long(K) + long(j)] = dw[j];
    part[p * M + long(C) * long(K) + c] = db;
}
