// stream.h — the fused ops' vector accesses of data each byte of which the
// kernel touches once (x, dy, y, dx), with CUDA's streaming cache hint where
// the kernel's template STREAM is not 0 (ld.global.cs / st.global.cs: the lines
// are evicted first, so the L2 keeps what is read again — weights, a block's
// halo — and writes drain early); plain accesses otherwise and on every other
// backend. A kernel that includes this defines ALLOY_NN_STREAM to its
// STREAM template first. p is aligned to the access (16 or 8 bytes).
#ifndef ALLOY_NN_STREAM_H
#define ALLOY_NN_STREAM_H
#ifndef ALLOY_NN_STREAM
#define ALLOY_NN_STREAM 0
#endif
#if defined(ALLOY_BACKEND_CUDA)
#define ALLOY_NN_STREAM_CUDA ALLOY_NN_STREAM
#else
#define ALLOY_NN_STREAM_CUDA 0
#endif
template <class P> inline uint4 nn_ld16(P p) {
#if ALLOY_NN_STREAM_CUDA
    uint4 u;
    asm volatile("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
                 : "l"((const void *)p));
    return u;
#else
    return *(const uint4 *)p;
#endif
}
template <class P> inline uint2 nn_ld8(P p) {
#if ALLOY_NN_STREAM_CUDA
    uint2 u;
    asm volatile("ld.global.cs.v2.u32 {%0, %1}, [%2];" : "=r"(u.x), "=r"(u.y) : "l"((const void *)p));
    return u;
#else
    return *(const uint2 *)p;
#endif
}
template <class P> inline void nn_st16(P p, uint4 u) {
#if ALLOY_NN_STREAM_CUDA
    asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"((void *)p), "r"(u.x), "r"(u.y), "r"(u.z),
                 "r"(u.w)
                 : "memory");
#else
    *(uint4 *)p = u;
#endif
}
template <class P> inline void nn_st8(P p, uint2 u) {
#if ALLOY_NN_STREAM_CUDA
    asm volatile("st.global.cs.v2.u32 [%0], {%1, %2};" ::"l"((void *)p), "r"(u.x), "r"(u.y) : "memory");
#else
    *(uint2 *)p = u;
#endif
}
#endif
