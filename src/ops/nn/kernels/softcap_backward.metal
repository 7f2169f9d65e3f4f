// softcap_backward: dx = dy * (1 - tanh(x / cap)^2), the derivative of
// cap * tanh(x / cap), in A (float32, or float64 for float64 data); it is 0
// where tanh saturates and NaN where x or dy is NaN. Vectorised as softcap:
// with vec (x, dy and dx 16-byte aligned) one 16-byte chunk of each per
// thread, both loads issued before the math; the rest scalar.
// Launch constants: long n (elements), long nv (16-byte chunks done by
// vectors: n / V with vec, else 0), long stride (threads in the grid), A cap.
// Template: T (data), A (accumulation), U (16-byte chunks a thread per round,
// loaded together: softcap.c).
// Launch: grid = (stride, 1, 1), threadgroup = (256, 1, 1).
//! name: alloy_nn_softcap_backward
//! inputs: x dy
//! outputs: dx
//! template: T=float32
//! template: A=float32
//! template: U=1
//! header:
// 16 bytes at p (16-byte aligned) as 16 / sizeof(T) values of A, and back:
// one vector load or store whatever T is (bit operations, no per-element loads).
template <class T, class A> inline void nn_ld16(const T *p, A *o) {
    const uint4 u = *(const uint4 *)p;
    if constexpr (sizeof(T) == 8) {
        o[0] = A(as_type<double>(ulong(u.x) | (ulong(u.y) << 32)));
        o[1] = A(as_type<double>(ulong(u.z) | (ulong(u.w) << 32)));
    } else if constexpr (sizeof(T) == 4) {
        for (int e = 0; e < 4; e++) o[e] = A(as_type<float>(u[e]));
    } else {
        for (int e = 0; e < 8; e++) o[e] = A(as_type<T>(ushort(u[e >> 1] >> ((e & 1) * 16))));
    }
}
template <class T, class A> inline void nn_st16(T *p, const A *v) {
    uint4 u;
    if constexpr (sizeof(T) == 8) {
        const ulong a = as_type<ulong>(double(v[0])), b = as_type<ulong>(double(v[1]));
        u = uint4(uint(a), uint(a >> 32), uint(b), uint(b >> 32));
    } else if constexpr (sizeof(T) == 4) {
        for (int e = 0; e < 4; e++) u[e] = as_type<uint>(float(v[e]));
    } else {
        for (int e = 0; e < 4; e++)
            u[e] = uint(as_type<ushort>(T(v[2 * e]))) | (uint(as_type<ushort>(T(v[2 * e + 1]))) << 16);
    }
    *(uint4 *)p = u;
}
//! body:
constexpr int V = 16 / int(sizeof(T));
// U chunks a thread per round (c, c + stride, ...), all loaded before the first one's math
for (long c0 = long(thread_position_in_grid.x); c0 < nv; c0 += stride * U) {
    A v[U][V], d[U][V];
    for (int u = 0; u < U; u++)
        if (c0 + u * stride < nv) {
            nn_ld16(&x[(c0 + u * stride) * V], v[u]);
            nn_ld16(&dy[(c0 + u * stride) * V], d[u]);
        }
    for (int u = 0; u < U; u++) {
        if (c0 + u * stride >= nv) break;
        for (int e = 0; e < V; e++) {
            const A t = tanh(v[u][e] / cap);
            v[u][e] = d[u][e] * (A(1) - t * t);
        }
        nn_st16(&dx[(c0 + u * stride) * V], v[u]);
    }
}
for (long e = nv * V + long(thread_position_in_grid.x); e < n; e += stride) {
    const A t = tanh(A(x[e]) / cap);
    dx[e] = T(A(dy[e]) * (A(1) - t * t));
}
