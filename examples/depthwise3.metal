// depthwise3: causal depthwise 1-D convolution with 3 taps and a bias, fp32,
// as M2-BERT's Conv1d(C, C, kernel_size=3, groups=C, padding=2)[..., :L]:
//   y[b,c,t] = bias[c] + w[c,0]*x[b,c,t-2] + w[c,1]*x[b,c,t-1] + w[c,2]*x[b,c,t]
// with x[b,c,t<0] = 0 (no look-ahead: y[t] depends on x[<= t] only).
// x (B,C,L), w (C,3), bias (C,) -> y (B,C,L). One thread per output element.
// Launch: grid = (B*C*L, 1, 1) threads, threadgroup = (256, 1, 1).
//! name: depthwise3
//! inputs: x w bias
//! outputs: y
//! body:
uint gid = thread_position_in_grid.x;
uint B = uint(x_shape[0]);
uint C = uint(x_shape[1]);
uint L = uint(x_shape[2]);
if (gid >= B * C * L) return;
uint t = gid % L;
uint c = (gid / L) % C;
// x and y share the flat index: gid = (b*C + c)*L + t.
float x2 = x[gid];
float x1 = t >= 1 ? x[gid - 1] : 0.0f;
float x0 = t >= 2 ? x[gid - 2] : 0.0f;
// Fixed order of the multiply-adds (tap 0 first) for reproducible rounding.
float acc = bias[c];
acc = metal::fma(w[3 * c + 0], x0, acc);
acc = metal::fma(w[3 * c + 1], x1, acc);
acc = metal::fma(w[3 * c + 2], x2, acc);
y[gid] = acc;
