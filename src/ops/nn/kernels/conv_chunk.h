// conv_chunk.h — the causal convolution's chunks of channels (shared by
// causal_conv_forward.metal and causal_conv_backward.metal): V consecutive
// channels of one timestep, 4 float32, 2 float64 (16 bytes) or 4 float16 /
// bfloat16 (8 bytes: a 16-bit chunk then unpacks to as many float registers
// as a float32 one, where 8 of them took about 180 registers a thread in the
// backward). Raw bits travel in a uint4 (a 16-bit chunk uses .x and .y).
// With vec a chunk is one access of its bytes at p (aligned to them), else
// the first m elements one by one (the rest read as 0). Vector stores, and
// vector loads with STRM 1, carry stream.h's hint where the kernel asks for it.
#include "src/ops/nn/kernels/stream.h"
template <int STRM = 0, class T> inline uint4 nn_ldbits(const T *p, int m, bool vec) {
    if constexpr (sizeof(T) == 2) {
        if (vec) {
            const uint2 h = STRM != 0 ? nn_ld8(p) : *(const uint2 *)p;
            return uint4(h.x, h.y, 0u, 0u);
        }
    } else if (vec) {
        return STRM != 0 ? nn_ld16(p) : *(const uint4 *)p;
    }
    uint4 u = uint4(0u, 0u, 0u, 0u);
    if constexpr (sizeof(T) == 8) {
        for (int e = 0; e < 2; e++)
            if (e < m) {
                const ulong bits = as_type<ulong>(p[e]);
                u[2 * e] = uint(bits);
                u[2 * e + 1] = uint(bits >> 32);
            }
    } else if constexpr (sizeof(T) == 4) {
        for (int e = 0; e < 4; e++)
            if (e < m) u[e] = as_type<uint>(p[e]);
    } else {
        for (int e = 0; e < 4; e++)
            if (e < m) u[e >> 1] |= uint(as_type<ushort>(p[e])) << ((e & 1) * 16);
    }
    return u;
}
template <class T> inline void nn_stbits(T *p, uint4 u, int m, bool vec) {
    if constexpr (sizeof(T) == 2) {
        if (vec) {
            nn_st8(p, uint2(u.x, u.y));
            return;
        }
    } else if (vec) {
        nn_st16(p, u);
        return;
    }
    if constexpr (sizeof(T) == 8) {
        for (int e = 0; e < 2; e++)
            if (e < m) p[e] = as_type<T>(ulong(u[2 * e]) | (ulong(u[2 * e + 1]) << 32));
    } else if constexpr (sizeof(T) == 4) {
        for (int e = 0; e < 4; e++)
            if (e < m) p[e] = as_type<T>(u[e]);
    } else {
        for (int e = 0; e < 4; e++)
            if (e < m) p[e] = as_type<T>(ushort(u[e >> 1] >> ((e & 1) * 16)));
    }
}
// A chunk's V elements as A, and V values of A rounded to T as a chunk.
template <class T, class A> inline void nn_unpack(uint4 u, A *o) {
    if constexpr (sizeof(T) == 8) {
        o[0] = A(as_type<double>(ulong(u.x) | (ulong(u.y) << 32)));
        o[1] = A(as_type<double>(ulong(u.z) | (ulong(u.w) << 32)));
    } else if constexpr (sizeof(T) == 4) {
        for (int e = 0; e < 4; e++) o[e] = A(as_type<float>(u[e]));
    } else {
        for (int e = 0; e < 4; e++) o[e] = A(as_type<T>(ushort(u[e >> 1] >> ((e & 1) * 16))));
    }
}
template <class T, class A> inline uint4 nn_pack(const A *v) {
    uint4 u = uint4(0u, 0u, 0u, 0u);
    if constexpr (sizeof(T) == 8) {
        const ulong a = as_type<ulong>(double(v[0])), b = as_type<ulong>(double(v[1]));
        u = uint4(uint(a), uint(a >> 32), uint(b), uint(b >> 32));
    } else if constexpr (sizeof(T) == 4) {
        for (int e = 0; e < 4; e++) u[e] = as_type<uint>(float(v[e]));
    } else {
        for (int e = 0; e < 2; e++)
            u[e] = uint(as_type<ushort>(T(v[2 * e]))) | (uint(as_type<ushort>(T(v[2 * e + 1]))) << 16);
    }
    return u;
}
// A block's timesteps 0 .. n-1 (offsets from its first) in halves of H
// timesteps (the kernels' PIPE), two buffers of B in turn: each half's loads
// (load(buffer, sb)) issued before the previous half's math (use(buffer, sb),
// which stops at n itself).
template <int H, class B, class Load, class Use> inline void nn_conv_halves(int n, Load load, Use use) {
    B a, b;
    load(a, 0);
    for (int sb = 0; sb < n; sb += 2 * H) {
        if (sb + H < n) load(b, sb + H);
        use(a, sb);
        if (sb + H >= n) break;
        if (sb + 2 * H < n) load(a, sb + 2 * H);
        use(b, sb + H);
    }
}
// A worker's next block, NW blocks on (NW = NWB * NTB + NWR): sequence b,
// its q-th block — a 64-bit division a block took about as many
// instructions as a timestep's math.
inline void nn_conv_next(thread long &b, thread long &q, long NWB, long NWR, long NTB) {
    q += NWR;
    b += NWB;
    if (q >= NTB) {
        q -= NTB;
        b += 1;
    }
}
