/* cuda.h — the CUDA-specific part of the MSL prelude: kernel parameter
 * types, threadgroup storage, barriers, SIMD-group functions on warp
 * shuffles, atomics and simdgroup matrices (tensor cores for half/bfloat).
 *
 * Pasted after cuda_hooks.h and common.h into every generated CUDA kernel,
 * which NVRTC compiles with -default-device and no CUDA headers at all.
 *
 * Active lanes. A simdgroup is a warp (warps are formed from the linear
 * thread index, as Metal forms simdgroups). Threads outside the grid return
 * at the kernel's entry, and a body's `return` ends its thread, so the lanes
 * that take part in a SIMD operation are the non-exited threads of the warp:
 * every operation first takes `__ballot_sync(exist, 1)` over the lanes that
 * exist in the threadgroup — vote.sync waits for every non-exited lane named
 * in its mask, so the result is exactly the lanes still running, whether or
 * not the warp had reconverged — and then works on that mask. As on the CPU,
 * lanes that take different branches meet at whichever SIMD operation each
 * reaches next: SIMD operations inside branches that split a simdgroup are
 * not supported. Reductions over a whole warp use a butterfly; over a partial
 * warp (grid edges, lanes that returned) a tree over the ranks of the active
 * lanes, so no inactive lane's value is ever read. Float reductions and
 * prefix sums therefore round in a different order than the CPU's lane
 * order. A shuffle from an inactive or out-of-range lane returns the caller's
 * own value. */
#ifndef ALLOY_PRELUDE_CUDA_H
#define ALLOY_PRELUDE_CUDA_H

#define ALLOY_BACKEND_CUDA 1
#define ALLOY_THREADGROUP __shared__
/* Program-scope constants: with -default-device a namespace-scope `static
 * const` is a device variable, and inside a function a static local: one
 * copy in global memory, read through the cache, however it is indexed (a
 * plain `const` local array would be copied into every thread's local
 * memory). CUDA has no dynamic initialisation of such variables, so the
 * initialiser must be a constant expression: scalars and arrays of scalars,
 * not half/bfloat/vector constructors (see docs/dialect.md). */
#define ALLOY_CONSTANT static const
#define ALLOY_SET_GROUP(g) ((void)0)
/* The runtime may recompile a kernel with, e.g.,
 * -DALLOY_CUDA_LAUNCH_BOUNDS=__launch_bounds__(1024) when a launch needs
 * more threads per group than the function allows. */
#ifndef ALLOY_CUDA_LAUNCH_BOUNDS
#define ALLOY_CUDA_LAUNCH_BOUNDS
#endif

/* Kernel parameters besides the buffers (see the entry-point contract). */
struct alloy_i32x8 {
    int v[8];
};
struct alloy_i64x8 {
    long long v[8];
};
struct alloy_launch_info {
    unsigned grid[3];
};
/* A tensor map (alloy_launch_set_tensor_map): the 128-byte CUtensorMap the
 * runtime encodes at each launch, passed by value as a __grid_constant__
 * parameter; `&map` is its generic address, the operand of
 * cp.async.bulk.tensor and prefetch.tensormap. */
struct alignas(64) alloy_tensor_map {
    unsigned long long opaque[16];
};

/* The launch's dynamic threadgroup memory (`alloy_threadgroup_memory`). */
extern __shared__ __align__(16) unsigned char alloy_dyn_smem[];

namespace metal {

/* ==== lanes =============================================================== */

ALLOY_FN uint alloy_lane() {
    uint l;
    asm("mov.u32 %0, %%laneid;" : "=r"(l));
    return l;
}
ALLOY_FN uint alloy_simd_lane_id() { return alloy_lane(); }
/* The caller's linear index in its threadgroup (the tensor operations find
 * their place in the execution scope from it). */
ALLOY_FN unsigned alloy_linear_tid() {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
/* Lanes of the caller's warp that exist in the threadgroup (the last warp
 * of a group whose size is not a multiple of 32 is short). */
ALLOY_FN uint alloy_exist_mask() {
    uint T = blockDim.x * blockDim.y * blockDim.z;
    uint L = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    uint n = T - (L & ~31u);
    return n >= 32u ? 0xffffffffu : (1u << n) - 1u;
}
/* The active lanes: those of the warp that have not exited. */
ALLOY_FN uint alloy_active_mask() { return __ballot_sync(alloy_exist_mask(), 1); }

/* Position of the k-th (from 0) set bit of m; k < popcount(m). */
ALLOY_FN uint alloy_nth_lane(uint m, uint k) {
    uint p = 0u;
    for (uint w = 16u; w; w >>= 1) {
        uint c = (uint)__popc(m & ((1u << w) - 1u));
        if (k >= c) {
            k -= c;
            m >>= w;
            p += w;
        }
    }
    return p;
}

/* `v` moved between lanes as 32-bit words, each through shuffle(word). */
template <class T, class F> ALLOY_FN T alloy_shfl_words(const T &v, F shuffle) {
    constexpr int NW = (int)((sizeof(T) + 3u) / 4u);
    uint w[NW];
    for (int i = 0; i < NW; i++) w[i] = 0u;
    ALLOY_MEMCPY(w, &v, sizeof(T));
    for (int i = 0; i < NW; i++) w[i] = shuffle(w[i]);
    T r;
    ALLOY_MEMCPY(&r, w, sizeof(T));
    return r;
}
/* Value of `v` in lane `src` (which must be in m; every lane of m calls). */
template <class T> ALLOY_FN T alloy_shfl(uint m, const T &v, uint src) {
    return alloy_shfl_words(v, [&](uint w) { return __shfl_sync(m, w, src); });
}
/* Value of `v` in lane (caller's lane ^ k), every lane of the warp active:
 * the mask a constant, so the shuffle is one SHFL.BFLY a word with no
 * convergence handling around it. */
template <class T> ALLOY_FN T alloy_shfl_xor_full(const T &v, uint k) {
    return alloy_shfl_words(v, [&](uint w) { return __shfl_xor_sync(0xffffffffu, w, k); });
}

/* The caller's view of one SIMD operation: the active lanes, its lane, and
 * its group of W lanes (W = 32: simdgroup, W = 4: quad) — the group's first
 * lane and its active lanes. */
struct alloy_grp {
    uint m, lane, base, gm;
    bool full; /* every lane of the group is active */
};
template <uint W> ALLOY_FN alloy_grp alloy_group() {
    alloy_grp g;
    g.m = alloy_active_mask();
    g.lane = alloy_lane();
    g.base = g.lane & ~(W - 1u);
    uint span = W >= 32u ? 0xffffffffu : (((1u << (W & 31u)) - 1u) << g.base);
    g.gm = g.m & span;
    g.full = g.gm == span;
    return g;
}
/* Lane of the group's active lane of rank k (k < popcount(gm)). */
ALLOY_FN uint alloy_rank_lane(const alloy_grp &g, uint k) {
    return g.full ? g.base + k : alloy_nth_lane(g.gm, k);
}
ALLOY_FN uint alloy_rank(const alloy_grp &g) { return (uint)__popc(g.gm & ((1u << g.lane) - 1u)); }

/* 32-bit integer reductions over a whole simdgroup use redux.sync (sm_80+),
 * which takes any mask of active lanes. */
template <class T, class Op> struct alloy_redux_ok { static constexpr bool value = false; };
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define ALLOY_REDUX(T, OP)                                                                     \
    template <> struct alloy_redux_ok<T, OP> { static constexpr bool value = true; };
ALLOY_REDUX(int, alloy_op_add)
ALLOY_REDUX(int, alloy_op_max)
ALLOY_REDUX(int, alloy_op_min)
ALLOY_REDUX(int, alloy_op_and)
ALLOY_REDUX(int, alloy_op_or)
ALLOY_REDUX(int, alloy_op_xor)
ALLOY_REDUX(uint, alloy_op_add)
ALLOY_REDUX(uint, alloy_op_max)
ALLOY_REDUX(uint, alloy_op_min)
ALLOY_REDUX(uint, alloy_op_and)
ALLOY_REDUX(uint, alloy_op_or)
ALLOY_REDUX(uint, alloy_op_xor)
#undef ALLOY_REDUX
ALLOY_FN int alloy_redux(alloy_op_add, uint m, int v) { return __reduce_add_sync(m, v); }
ALLOY_FN int alloy_redux(alloy_op_max, uint m, int v) { return __reduce_max_sync(m, v); }
ALLOY_FN int alloy_redux(alloy_op_min, uint m, int v) { return __reduce_min_sync(m, v); }
ALLOY_FN int alloy_redux(alloy_op_and, uint m, int v) { return (int)__reduce_and_sync(m, (uint)v); }
ALLOY_FN int alloy_redux(alloy_op_or, uint m, int v) { return (int)__reduce_or_sync(m, (uint)v); }
ALLOY_FN int alloy_redux(alloy_op_xor, uint m, int v) { return (int)__reduce_xor_sync(m, (uint)v); }
ALLOY_FN uint alloy_redux(alloy_op_add, uint m, uint v) { return __reduce_add_sync(m, v); }
ALLOY_FN uint alloy_redux(alloy_op_max, uint m, uint v) { return __reduce_max_sync(m, v); }
ALLOY_FN uint alloy_redux(alloy_op_min, uint m, uint v) { return __reduce_min_sync(m, v); }
ALLOY_FN uint alloy_redux(alloy_op_and, uint m, uint v) { return __reduce_and_sync(m, v); }
ALLOY_FN uint alloy_redux(alloy_op_or, uint m, uint v) { return __reduce_or_sync(m, v); }
ALLOY_FN uint alloy_redux(alloy_op_xor, uint m, uint v) { return __reduce_xor_sync(m, v); }
#else
template <class Op, class T> ALLOY_FN T alloy_redux(Op, uint, T v) { return v; } /* never used */
#endif

/* op over the active lanes of the caller's group; every lane gets it. */
template <uint W, class T, class Op> ALLOY_FN T alloy_grp_reduce(const T &x, Op op) {
    alloy_grp g = alloy_group<W>();
    if constexpr (W == 32u && alloy_redux_ok<T, Op>::value) {
        return alloy_redux(op, g.m, x);
    } else {
        T v = x;
        if (g.m == 0xffffffffu) { /* the whole warp (uniform branch): butterfly */
            for (uint k = W / 2u; k > 0u; k >>= 1) v = op(v, alloy_shfl_xor_full(v, k));
            return v;
        }
        /* a tree over the ranks of the active lanes, the result at rank 0 */
        uint n = (uint)__popc(g.gm), r = alloy_rank(g);
        for (uint d = 1u; d < W; d <<= 1) {
            bool take = (r & (2u * d - 1u)) == 0u && r + d < n;
            T o = alloy_shfl(g.m, v, take ? alloy_nth_lane(g.gm, r + d) : g.lane);
            if (take) v = op(v, o);
        }
        return alloy_shfl(g.m, v, (uint)(__ffs(g.gm) - 1));
    }
}
/* Prefix over the active lanes before the caller (and the caller itself if
 * inclusive), in lane order; `id` for an empty exclusive prefix. */
template <uint W, class T, class Op>
ALLOY_FN T alloy_grp_scan(const T &x, Op op, const T &id, bool inclusive) {
    alloy_grp g = alloy_group<W>();
    uint r = alloy_rank(g);
    T v = x;
    for (uint d = 1u; d < W; d <<= 1) { /* Hillis-Steele over the ranks */
        bool take = r >= d;
        T o = alloy_shfl(g.m, v, take ? alloy_rank_lane(g, r - d) : g.lane);
        if (take) v = op(o, v);
    }
    if (inclusive) return v;
    T o = alloy_shfl(g.m, v, r > 0u ? alloy_rank_lane(g, r - 1u) : g.lane);
    return r > 0u ? o : id;
}
/* Value of group-relative lane `src` (a source outside the group or not
 * active yields the caller's own value). */
template <uint W, class T> ALLOY_FN T alloy_grp_pick(const alloy_grp &g, const T &x, long src) {
    bool ok = src >= 0 && src < (long)W && ((g.gm >> (g.base + (uint)src)) & 1u);
    T r = alloy_shfl(g.m, x, ok ? g.base + (uint)src : g.lane);
    return ok ? r : x;
}

#define ALLOY_GROUP_FUNCS(P, W)                                                                \
    ALLOY_GROUP_REDUCTIONS(P, W)                                                               \
    template <class T> ALLOY_FN T P##_shuffle(T x, uint src) {                                 \
        alloy_grp g = alloy_group<W>();                                                        \
        return alloy_grp_pick<W>(g, x, (long)src);                                             \
    }                                                                                          \
    template <class T> ALLOY_FN T P##_broadcast(T x, uint src) { return P##_shuffle(x, src); } \
    template <class T> ALLOY_FN T P##_shuffle_up(T x, uint delta) {                            \
        alloy_grp g = alloy_group<W>();                                                        \
        return alloy_grp_pick<W>(g, x, (long)(g.lane & (W - 1u)) - (long)delta);               \
    }                                                                                          \
    template <class T> ALLOY_FN T P##_shuffle_down(T x, uint delta) {                          \
        alloy_grp g = alloy_group<W>();                                                        \
        return alloy_grp_pick<W>(g, x, (long)(g.lane & (W - 1u)) + (long)delta);               \
    }                                                                                          \
    template <class T> ALLOY_FN T P##_shuffle_xor(T x, uint mask) {                            \
        alloy_grp g = alloy_group<W>();                                                        \
        return alloy_grp_pick<W>(g, x, (long)((g.lane & (W - 1u)) ^ mask));                    \
    }                                                                                          \
    template <class T> ALLOY_FN T P##_shuffle_rotate_up(T x, uint delta) {                     \
        alloy_grp g = alloy_group<W>();                                                        \
        return alloy_grp_pick<W>(g, x, (long)(((g.lane & (W - 1u)) + W - delta % W) % W));     \
    }                                                                                          \
    template <class T> ALLOY_FN T P##_shuffle_rotate_down(T x, uint delta) {                   \
        alloy_grp g = alloy_group<W>();                                                        \
        return alloy_grp_pick<W>(g, x, (long)(((g.lane & (W - 1u)) + delta) % W));             \
    }                                                                                          \
    template <class T> ALLOY_FN T P##_broadcast_first(T x) {                                   \
        alloy_grp g = alloy_group<W>();                                                        \
        return alloy_shfl(g.m, x, (uint)(__ffs(g.gm) - 1));                                    \
    }                                                                                          \
    ALLOY_FN bool P##_any(bool b) {                                                            \
        alloy_grp g = alloy_group<W>();                                                        \
        return (__ballot_sync(g.m, b) & g.gm) != 0u;                                           \
    }                                                                                          \
    ALLOY_FN bool P##_all(bool b) {                                                            \
        alloy_grp g = alloy_group<W>();                                                        \
        return (__ballot_sync(g.m, b) & g.gm) == g.gm;                                         \
    }                                                                                          \
    ALLOY_FN bool P##_is_first() {                                                             \
        alloy_grp g = alloy_group<W>();                                                        \
        return g.lane == (uint)(__ffs(g.gm) - 1);                                              \
    }

ALLOY_GROUP_FUNCS(simd, 32u)
ALLOY_GROUP_FUNCS(quad, 4u)
#undef ALLOY_GROUP_FUNCS

/* Bit i: lane i is active and voted true. */
ALLOY_FN simd_vote simd_ballot(bool b) {
    uint m = alloy_active_mask();
    return simd_vote((ulong)__ballot_sync(m, b), (ulong)m);
}
ALLOY_FN simd_vote simd_active_threads_mask() {
    uint m = alloy_active_mask();
    return simd_vote((ulong)m, (ulong)m);
}

/* ==== barriers ============================================================ */
/* __syncthreads orders shared and global memory for the whole block and
 * counts exited threads as arrived (sm_70+), so out-of-grid threads that
 * left at the entry do not block it. */

ALLOY_FN void threadgroup_barrier(mem_flags = mem_flags::mem_none) { __syncthreads(); }
ALLOY_FN void simdgroup_barrier(mem_flags = mem_flags::mem_none) { __syncwarp(alloy_active_mask()); }
ALLOY_FN void atomic_thread_fence(mem_flags, memory_order, thread_scope s = thread_scope_device) {
    if (s == thread_scope_device) __threadfence();
    else __threadfence_block();
}

/* ==== overlapping launches (alloy_launch_set_overlap) ===================== */
/* griddepcontrol (sm_90+): wait until the stream's previous kernel has ended
 * and its writes are visible; let the next kernel start. Only in the code of
 * a launch that asked to overlap (ALLOY_OVERLAP_LAUNCH, from codegen): in an
 * ordinary launch's the pair is nothing, since even where the launch does not
 * overlap they cost each threadgroup time (H200: a kernel of 2 KiB
 * threadgroups at 83% of copy with them, 100% without); before sm_90 they are
 * nothing. */

ALLOY_FN void alloy_wait_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(ALLOY_OVERLAP_LAUNCH)
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
ALLOY_FN void alloy_start_next_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(ALLOY_OVERLAP_LAUNCH)
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* ==== atomics ============================================================= */
/* The hardware atomics where CUDA has them (int, uint, 64-bit integers,
 * float add), compare-and-swap loops otherwise (float min/max, 8/16-bit
 * types). They work on device and threadgroup memory alike (generic
 * addresses). Orders other than relaxed act as sequentially consistent:
 * a device-scope fence before and after. */

ALLOY_FN void alloy_fence(memory_order o) {
    if (o != memory_order_relaxed) __threadfence();
}
template <class T> ALLOY_FN T *alloy_aptr(const volatile atomic<T> *a) { return (T *)&a->alloy_v; }

template <class T> ALLOY_FN bool alloy_same_bits(const T &a, const T &b) {
    constexpr int NW = (int)((sizeof(T) + 3u) / 4u);
    uint x[NW], y[NW];
    for (int i = 0; i < NW; i++) x[i] = y[i] = 0u;
    ALLOY_MEMCPY(x, &a, sizeof(T));
    ALLOY_MEMCPY(y, &b, sizeof(T));
    for (int i = 0; i < NW; i++)
        if (x[i] != y[i]) return false;
    return true;
}
template <class U, class T> ALLOY_FN U alloy_to_bits(const T &v) {
    U u = 0;
    ALLOY_MEMCPY(&u, &v, sizeof(T));
    return u;
}
template <class T, class U> ALLOY_FN T alloy_from_bits(U u) {
    T v;
    ALLOY_MEMCPY(&v, &u, sizeof(T));
    return v;
}

/* Compare-and-swap; returns the old value. */
template <class T> ALLOY_FN T alloy_atomic_cas(T *p, const T &expected, const T &desired) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                  "atomics need a 1, 2, 4 or 8-byte type");
    if constexpr (sizeof(T) == 4) {
        return alloy_from_bits<T>(atomicCAS((unsigned *)p, alloy_to_bits<unsigned>(expected),
                                            alloy_to_bits<unsigned>(desired)));
    } else if constexpr (sizeof(T) == 8) {
        return alloy_from_bits<T>(atomicCAS((unsigned long long *)p,
                                            alloy_to_bits<unsigned long long>(expected),
                                            alloy_to_bits<unsigned long long>(desired)));
    } else { /* on the aligned 32-bit word holding it */
        size_t addr = (size_t)p;
        unsigned *w = (unsigned *)(addr & ~(size_t)3);
        unsigned sh = (unsigned)(addr & 3u) * 8u;
        unsigned mask = (sizeof(T) == 1 ? 0xffu : 0xffffu) << sh;
        unsigned e = alloy_to_bits<unsigned>(expected) << sh, d = alloy_to_bits<unsigned>(desired) << sh;
        unsigned old = *(volatile unsigned *)w;
        for (;;) {
            if ((old & mask) != e) return alloy_from_bits<T>((old & mask) >> sh);
            unsigned prev = atomicCAS(w, old, (old & ~mask) | d);
            if (prev == old) return expected;
            old = prev;
        }
    }
}
/* Read-modify-write by compare-and-swap; returns the old value. */
template <class T, class Op> ALLOY_FN T alloy_atomic_rmw(T *p, const T &v, Op op) {
    T old = *(volatile T *)p;
    for (;;) {
        T next = op(old, v);
        T prev = alloy_atomic_cas(p, old, next);
        if (alloy_same_bits(prev, old)) return old;
        old = prev;
    }
}
struct alloy_op_sub {
    template <class T> ALLOY_FN T operator()(const T &a, const T &b) const { return T(a - b); }
};
struct alloy_op_second {
    template <class T> ALLOY_FN T operator()(const T &, const T &b) const { return b; }
};

/* Which hardware atomics a type has: 1 int, 2 uint, 3 signed 64-bit,
 * 4 unsigned 64-bit, 5 float, 6 double, 0 none. */
template <class T> struct alloy_atom_kind { static constexpr int value = 0; };
template <> struct alloy_atom_kind<int> { static constexpr int value = 1; };
template <> struct alloy_atom_kind<unsigned int> { static constexpr int value = 2; };
template <> struct alloy_atom_kind<long> { static constexpr int value = 3; };
template <> struct alloy_atom_kind<long long> { static constexpr int value = 3; };
template <> struct alloy_atom_kind<unsigned long> { static constexpr int value = 4; };
template <> struct alloy_atom_kind<unsigned long long> { static constexpr int value = 4; };
template <> struct alloy_atom_kind<float> { static constexpr int value = 5; };
template <> struct alloy_atom_kind<double> { static constexpr int value = 6; };

template <class T> ALLOY_FN T atomic_load_explicit(const volatile atomic<T> *a, memory_order o) {
    alloy_fence(o);
    T r = *(const volatile T *)&a->alloy_v;
    alloy_fence(o);
    return r;
}
template <class T> ALLOY_FN void atomic_store_explicit(volatile atomic<T> *a, alloy_id_t<T> v, memory_order o) {
    alloy_fence(o);
    *(volatile T *)&a->alloy_v = v;
    alloy_fence(o);
}
template <class T> ALLOY_FN T atomic_exchange_explicit(volatile atomic<T> *a, alloy_id_t<T> v, memory_order o) {
    T *p = alloy_aptr(a);
    constexpr int k = alloy_atom_kind<T>::value;
    T r;
    alloy_fence(o);
    if constexpr (k == 1 || k == 2 || k == 5) r = atomicExch(p, v);
    else if constexpr (k == 3 || k == 4)
        r = (T)atomicExch((unsigned long long *)p, (unsigned long long)v);
    else r = alloy_atomic_rmw(p, T(v), alloy_op_second());
    alloy_fence(o);
    return r;
}
template <class T>
ALLOY_FN bool atomic_compare_exchange_weak_explicit(volatile atomic<T> *a, T *expected, alloy_id_t<T> desired,
                                                    memory_order succ, memory_order fail) {
    memory_order o = (succ == memory_order_relaxed || fail == memory_order_relaxed) ? memory_order_relaxed
                                                                                     : memory_order_seq_cst;
    alloy_fence(o);
    T old = alloy_atomic_cas(alloy_aptr(a), *expected, T(desired));
    alloy_fence(o);
    if (alloy_same_bits(old, *expected)) return true;
    *expected = old;
    return false;
}
template <class T>
ALLOY_FN bool atomic_compare_exchange_strong_explicit(volatile atomic<T> *a, T *expected, alloy_id_t<T> desired,
                                                      memory_order succ, memory_order fail) {
    return atomic_compare_exchange_weak_explicit(a, expected, desired, succ, fail);
}

template <class T> ALLOY_FN T atomic_fetch_add_explicit(volatile atomic<T> *a, alloy_id_t<T> v, memory_order o) {
    T *p = alloy_aptr(a);
    constexpr int k = alloy_atom_kind<T>::value;
    T r;
    alloy_fence(o);
    if constexpr (k == 1 || k == 2 || k == 5 || k == 6) r = atomicAdd(p, v);
    else if constexpr (k == 3 || k == 4)
        r = (T)atomicAdd((unsigned long long *)p, (unsigned long long)v);
    else r = alloy_atomic_rmw(p, T(v), alloy_op_add());
    alloy_fence(o);
    return r;
}
template <class T> ALLOY_FN T atomic_fetch_sub_explicit(volatile atomic<T> *a, alloy_id_t<T> v, memory_order o) {
    T *p = alloy_aptr(a);
    constexpr int k = alloy_atom_kind<T>::value;
    T r;
    alloy_fence(o);
    if constexpr (k == 1 || k == 2) r = atomicSub(p, v);
    else if constexpr (k == 3 || k == 4)
        r = (T)atomicAdd((unsigned long long *)p, (unsigned long long)0 - (unsigned long long)v);
    else if constexpr (k == 5 || k == 6) r = atomicAdd(p, -v); /* a - b is a + (-b) exactly */
    else r = alloy_atomic_rmw(p, T(v), alloy_op_sub());
    alloy_fence(o);
    return r;
}
#define ALLOY_ATOMIC_BITOP(name, cuda, Op)                                                     \
    template <class T> ALLOY_FN T atomic_fetch_##name##_explicit(volatile atomic<T> *a, alloy_id_t<T> v, \
                                                                  memory_order o) {            \
        T *p = alloy_aptr(a);                                                                  \
        constexpr int k = alloy_atom_kind<T>::value;                                           \
        T r;                                                                                   \
        alloy_fence(o);                                                                        \
        if constexpr (k == 1 || k == 2) r = cuda(p, v);                                        \
        else if constexpr (k == 3 || k == 4)                                                   \
            r = (T)cuda((unsigned long long *)p, (unsigned long long)v);                       \
        else r = alloy_atomic_rmw(p, T(v), Op());                                              \
        alloy_fence(o);                                                                        \
        return r;                                                                              \
    }
ALLOY_ATOMIC_BITOP(and, atomicAnd, alloy_op_and)
ALLOY_ATOMIC_BITOP(or, atomicOr, alloy_op_or)
ALLOY_ATOMIC_BITOP(xor, atomicXor, alloy_op_xor)
#undef ALLOY_ATOMIC_BITOP
#define ALLOY_ATOMIC_MINMAX(name, cuda, Op)                                                    \
    template <class T> ALLOY_FN T atomic_fetch_##name##_explicit(volatile atomic<T> *a, alloy_id_t<T> v, \
                                                                  memory_order o) {            \
        T *p = alloy_aptr(a);                                                                  \
        constexpr int k = alloy_atom_kind<T>::value;                                           \
        T r;                                                                                   \
        alloy_fence(o);                                                                        \
        if constexpr (k == 1 || k == 2) r = cuda(p, v);                                        \
        else if constexpr (k == 3) r = (T)cuda((long long *)p, (long long)v);                  \
        else if constexpr (k == 4) r = (T)cuda((unsigned long long *)p, (unsigned long long)v); \
        else r = alloy_atomic_rmw(p, T(v), Op()); /* float: compare-and-swap */                \
        alloy_fence(o);                                                                        \
        return r;                                                                              \
    }
ALLOY_ATOMIC_MINMAX(max, atomicMax, alloy_op_max)
ALLOY_ATOMIC_MINMAX(min, atomicMin, alloy_op_min)
#undef ALLOY_ATOMIC_MINMAX

/* ==== simdgroup matrices ================================================== */
/* Metal's distribution is kept (alloy_sgm_coord: lane l holds (row, col) and
 * (row, col + 1)), so thread_elements() means what it means on Metal.
 * Products move the elements between lanes with shuffles:
 *   - half x half and bfloat x bfloat on a full warp: one tensor-core
 *     mma.sync.m16n8k8 (f32 accumulation) with the 8x8 matrices in the top
 *     rows of the 16x8 A and D fragments;
 *   - anything else (float, mixed types, partial warps): every lane computes
 *     its two elements with float FMAs, acc = c; acc = fma(a[row][j],
 *     b[j][col], acc) for j = 0..7 — the CPU's order, so float products
 *     match the CPU's when its compiler contracts the multiply-adds.
 * Inactive lanes (Metal does not allow partial simdgroups here) count as
 * zeros. */

/* The lane that holds (row, col) (col even): the inverse of alloy_sgm_coord. */
ALLOY_FN uint alloy_sgm_owner(uint row, uint col) {
    return ((row & 4u) << 2) | ((col & 4u) << 1) | ((row & 2u) << 1) | ((row & 1u) << 1) | ((col >> 1) & 1u);
}

/* d = a*b (+ c) with float FMAs on every lane (see above). */
template <class T, class TA, class TB>
ALLOY_FN void alloy_sgm_fma_path(simdgroup_matrix<T, 8, 8> &d, const simdgroup_matrix<TA, 8, 8> &a,
                                 const simdgroup_matrix<TB, 8, 8> &b, const alloy_vec<T, 2> *c, uint m,
                                 uint lane) {
    typedef typename alloy_cond<alloy_same<T, double>::value, double, float>::type F;
    int row, col;
    alloy_sgm_coord(lane, row, col);
    F acc0 = c ? F(c->alloy_e[0]) : F(0), acc1 = c ? F(c->alloy_e[1]) : F(0);
    for (uint p = 0u; p < 4u; p++) {
        uint sa = alloy_sgm_owner((uint)row, 2u * p); /* a[row][2p], a[row][2p+1] */
        alloy_vec<TA, 2> av = alloy_shfl(m, a.alloy_el, ((m >> sa) & 1u) ? sa : lane);
        bool aon = (m >> sa) & 1u;
        for (uint h = 0u; h < 2u; h++) {
            uint j = 2u * p + h;
            uint sb = alloy_sgm_owner(j, (uint)col); /* b[j][col], b[j][col+1] */
            alloy_vec<TB, 2> bv = alloy_shfl(m, b.alloy_el, ((m >> sb) & 1u) ? sb : lane);
            bool bon = (m >> sb) & 1u;
            F x = aon ? F(av.alloy_e[h]) : F(0);
            F y0 = bon ? F(bv.alloy_e[0]) : F(0), y1 = bon ? F(bv.alloy_e[1]) : F(0);
            acc0 = fma(x, y0, acc0);
            acc1 = fma(x, y1, acc1);
        }
    }
    d.alloy_el.alloy_e[0] = T(acc0);
    d.alloy_el.alloy_e[1] = T(acc1);
}

template <class T> ALLOY_FN uint alloy_pack2(const alloy_vec<T, 2> &v) { return alloy_to_bits<uint>(v); }

/* d = a*b (+ c). */
template <class T, class TA, class TB>
ALLOY_FN void alloy_sgm_mma(simdgroup_matrix<T, 8, 8> &d, const simdgroup_matrix<TA, 8, 8> &a,
                            const simdgroup_matrix<TB, 8, 8> &b, const alloy_vec<T, 2> *c) {
    uint m = alloy_active_mask(), lane = alloy_lane();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr bool f16 = alloy_same<TA, half>::value && alloy_same<TB, half>::value;
    constexpr bool bf16 = alloy_same<TA, bfloat>::value && alloy_same<TB, bfloat>::value;
    if constexpr (f16 || bf16) {
        if (m == 0xffffffffu) { /* warp-uniform */
            /* mma thread t: g = t/4, q = t%4 holds A[g][2q..2q+1] (a0), B[2q..2q+1][g]
             * (b0) and C/D[g][2q..2q+1] (c0, c1); rows 8..15 of A and C are zero. */
            uint g = lane >> 2, q = lane & 3u;
            uint la = alloy_sgm_owner(g, 2u * q);
            uint a0 = __shfl_sync(m, alloy_pack2(a.alloy_el), la);
            uint bp = alloy_pack2(b.alloy_el), sh = (g & 1u) * 16u;
            uint w0 = __shfl_sync(m, bp, alloy_sgm_owner(2u * q, g & 6u));
            uint w1 = __shfl_sync(m, bp, alloy_sgm_owner(2u * q + 1u, g & 6u));
            uint b0 = ((w0 >> sh) & 0xffffu) | (((w1 >> sh) & 0xffffu) << 16);
            float c0 = 0.0f, c1 = 0.0f;
            if (c) {
                c0 = __shfl_sync(m, float(c->alloy_e[0]), la);
                c1 = __shfl_sync(m, float(c->alloy_e[1]), la);
            }
            float d0, d1, d2, d3;
            const uint zero = 0u;
            const float fz = 0.0f;
            if constexpr (f16)
                asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
                             "{%7,%8,%9,%10};"
                             : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
                             : "r"(a0), "r"(zero), "r"(b0), "f"(c0), "f"(c1), "f"(fz), "f"(fz));
            else
                asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
                             "{%7,%8,%9,%10};"
                             : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
                             : "r"(a0), "r"(zero), "r"(b0), "f"(c0), "f"(c1), "f"(fz), "f"(fz));
            (void)d2;
            (void)d3;
            /* back to Metal's layout: lane l's (row, col) pair is on mma thread 4*row + col/2 */
            int row, col;
            alloy_sgm_coord(lane, row, col);
            uint t = 4u * (uint)row + (uint)col / 2u;
            float r0 = __shfl_sync(m, d0, t), r1 = __shfl_sync(m, d1, t);
            d.alloy_el.alloy_e[0] = T(r0);
            d.alloy_el.alloy_e[1] = T(r1);
            return;
        }
    }
#endif
    alloy_sgm_fma_path(d, a, b, c, m, lane);
}

} /* namespace metal */

#endif
