// chunk.h — 16-byte chunks of V = 16 / sizeof(T) elements kept as their raw
// bits (a uint4: 4 registers whatever T is, so a 16-bit row costs half the
// registers of its float values) and read element by element as A when used.
// Shared by the norm kernels (norm_rows.metal, norm_rows_backward.metal).

// The chunk of n = min(V, m) elements at a[i]: with VEC one 16-byte load (a[i]
// 16-byte aligned, m >= V), else the first m elements one by one; elements
// past m read as 0 bits (+0). m <= 0 reads nothing (a[i] is never formed).
// P: a device pointer to T (or what ALLOY_CPU_DEBUG makes of one).
template <class T, int VEC, class P> inline uint4 nn_chunk_load(P a, long i, int m) {
    uint4 u = uint4(0u, 0u, 0u, 0u);
    if (m <= 0) return u;
    if (VEC != 0) return *(const uint4 *)&a[i];
    if constexpr (sizeof(T) == 8) {
        for (int e = 0; e < 2; e++)
            if (e < m) {
                const ulong bits = as_type<ulong>(a[i + e]);
                u[2 * e] = uint(bits);
                u[2 * e + 1] = uint(bits >> 32);
            }
    } else if constexpr (sizeof(T) == 4) {
        for (int e = 0; e < 4; e++)
            if (e < m) u[e] = as_type<uint>(a[i + e]);
    } else {
        for (int e = 0; e < 8; e++)
            if (e < m) u[e >> 1] |= uint(as_type<ushort>(a[i + e])) << ((e & 1) * 16);
    }
    return u;
}

// Element e of a chunk as A (bfloat16 widens by a shift; the other types by
// their conversion). A kernel that defines ALLOY_NN_OPAQUE_BF16 (or
// ALLOY_NN_OPAQUE_F16) before including this file gets bfloat16's (float16's)
// widening as inline PTX on CUDA.
template <class T, class A> inline A nn_chunk_elem(uint4 u, int e) {
    if constexpr (sizeof(T) == 8) {
        return A(as_type<double>(ulong(u[2 * e]) | (ulong(u[2 * e + 1]) << 32)));
    } else if constexpr (sizeof(T) == 4) {
        return A(as_type<float>(u[e]));
    } else if constexpr (is_same<T, bfloat>::value) {
        const uint w = u[e >> 1];
#if defined(ALLOY_BACKEND_CUDA) && defined(ALLOY_NN_OPAQUE_BF16)
        // the widening as an opaque instruction at each use: ptxas then keeps
        // the packed word live instead of both widened halves (a kernel near
        // its register cap stops spilling)
        uint r;
        if ((e & 1) != 0) asm volatile("and.b32 %0, %1, 0xffff0000;" : "=r"(r) : "r"(w));
        else asm volatile("shl.b32 %0, %1, 16;" : "=r"(r) : "r"(w));
        return A(as_type<float>(r));
#else
        return A(as_type<float>((e & 1) != 0 ? (w & 0xffff0000u) : (w << 16)));
#endif
    } else {
#if defined(ALLOY_BACKEND_CUDA) && defined(ALLOY_NN_OPAQUE_F16)
        if constexpr (is_same<T, half>::value) { /* as bfloat16's above */
            float r;
            if ((e & 1) != 0)
                asm volatile("{.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %1;\ncvt.f32.f16 %0, hi;\n}" : "=f"(r) : "r"(u[e >> 1]));
            else
                asm volatile("{.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %1;\ncvt.f32.f16 %0, lo;\n}" : "=f"(r) : "r"(u[e >> 1]));
            return A(r);
        }
#endif
        return A(as_type<T>(ushort(u[e >> 1] >> ((e & 1) * 16))));
    }
}

// V values of A rounded to T and stored at a[i]: with VEC one 16-byte store
// (a[i] 16-byte aligned, m >= V), else the first m elements one by one.
template <class T, class A, int VEC, class P> inline void nn_chunk_store(P a, long i, int m, const A *v) {
    if (VEC != 0) {
        uint4 u;
        if constexpr (sizeof(T) == 8) {
            const ulong p = as_type<ulong>(double(v[0])), q = as_type<ulong>(double(v[1]));
            u = uint4(uint(p), uint(p >> 32), uint(q), uint(q >> 32));
        } else if constexpr (sizeof(T) == 4) {
            for (int e = 0; e < 4; e++) u[e] = as_type<uint>(float(v[e]));
        } else {
            for (int e = 0; e < 4; e++)
                u[e] = uint(as_type<ushort>(T(v[2 * e]))) | (uint(as_type<ushort>(T(v[2 * e + 1]))) << 16);
        }
        *(uint4 *)&a[i] = u;
        return;
    }
    constexpr int V = 16 / int(sizeof(T));
    for (int e = 0; e < V; e++)
        if (e < m) a[i + e] = T(v[e]);
}
