/* cpu.h — the CPU-specific part of the MSL prelude: threadgroup storage,
 * barriers, SIMD-group functions, atomics and simdgroup matrices on top of
 * the runtime services of cpu_abi.h.
 *
 * Pasted after cpu_abi.h and common.h into every generated CPU kernel. The
 * kernel's entry point stores its group with ALLOY_SET_GROUP(g); the fibers
 * of one group all run on one worker OS thread, so a thread_local pointer
 * reaches the group (and its scheduler) from any helper. SIMD functions
 * deposit the caller's value with svc->simd_exchange and compute their result
 * locally over the active lanes only. When the group has no scheduler (loop
 * mode), the caller is treated as a lone lane 0 and barriers do nothing: the
 * runtime must run every kernel that synchronises on fibers.
 * Helpers read the internal `alloy_cur_group` of their own kernel object, so
 * kernels should be built with -fvisibility=hidden (the entry points are
 * exported explicitly): otherwise an inline helper of one loaded kernel can
 * interpose another's. */
#ifndef ALLOY_PRELUDE_CPU_H
#define ALLOY_PRELUDE_CPU_H

#define ALLOY_BACKEND_CPU 1
#define ALLOY_THREADGROUP static thread_local
#define ALLOY_CONSTANT static const
#define ALLOY_SET_GROUP(g) (alloy_cur_group = (g))

/* Barrier regions as loops (src/dialect/regions.c): every region runs as
 * this loop over the group's threads; values kept per thread live in arrays
 * of this many slots (the largest threadgroup). The threads of a region do
 * not synchronise, so the innermost loop is marked `omp simd` (kernels are
 * built with -fopenmp-simd): the compiler may run threads in vector lanes,
 * as a GPU does. That loop counts the x position in the grid (from alloy_bx
 * to alloy_ex, which cannot wrap), so the compiler sees `x[i]` with `uint i
 * = thread_position_in_grid.x` as a contiguous access; the outer counters
 * are signed for the same reason. */
#define ALLOY_CPU_MAX_GROUP_THREADS 1024u
#define ALLOY_THREAD_LOOP                                                        \
    for (int alloy_lz = 0; alloy_lz < (int)alloy_s2; ++alloy_lz)                 \
        for (int alloy_ly = 0; alloy_ly < (int)alloy_s1; ++alloy_ly)             \
            _Pragma("omp simd") for (unsigned alloy_gx = alloy_bx; alloy_gx < alloy_ex; ++alloy_gx)
/* the same without `omp simd`, for regions that exchange SIMD-group values
 * (calls into the exchange: no vector lanes, and the mark only costs) */
#define ALLOY_THREAD_LOOP_SCALAR                                                       \
    for (int alloy_lz = 0; alloy_lz < (int)alloy_s2; ++alloy_lz)                 \
        for (int alloy_ly = 0; alloy_ly < (int)alloy_s1; ++alloy_ly)             \
            for (unsigned alloy_gx = alloy_bx; alloy_gx < alloy_ex; ++alloy_gx)

static thread_local const alloy_cpu_group *alloy_cur_group;
static thread_local unsigned char alloy_simd_alone[ALLOY_CPU_SIMD_SLOT]; /* lone-lane slot */
/* The running thread's linear index in its threadgroup (the tensor
 * operations find their place in the execution scope from it). The entry
 * points set it; the fibers of a group share one OS thread, so every call
 * into the scheduler saves it and restores it afterwards. */
static thread_local unsigned alloy_cur_lid;
#define ALLOY_SET_LID(g, lx, ly, lz) \
    (alloy_cur_lid = (lx) + (ly) * (g)->launch->tg[0] + (lz) * (g)->launch->tg[0] * (g)->launch->tg[1])
ALLOY_FN unsigned alloy_linear_tid() { return alloy_cur_lid; }

/* ALLOY_CPU_DEBUG (cpu_debug.h): the thread a checked access runs on. The
 * fibers of a group share one OS thread, so the pointer is saved before a
 * call into the scheduler and restored after it; barriers pass their source
 * line as their site, so threads that meet different barriers are found. */
#ifdef ALLOY_CPU_DEBUG
struct alloy_dbg_thread {
    const alloy_cpu_group *g;
    unsigned l[3];
};
static thread_local const alloy_dbg_thread *alloy_dbg_cur;
/* body line N -> N, header line N -> N | 1 << 31 */
ALLOY_FN unsigned alloy_dbg_site(unsigned line, const char *file) {
    const char *e = file;
    while (*e) e++;
    bool header = e - file >= 7 && e[-7] == '.' && e[-6] == 'h' && e[-1] == 'r';
    return (line & 0x7fffffffu) | (header ? 0x80000000u : 0u);
}
#define ALLOY_FIBER_SAVE const alloy_dbg_thread *alloy_dbg_saved_ = alloy_dbg_cur; const unsigned alloy_lid_saved_ = alloy_cur_lid;
#define ALLOY_FIBER_RESTORE alloy_dbg_cur = alloy_dbg_saved_; alloy_cur_lid = alloy_lid_saved_;
#define ALLOY_DBG_SITE_PARAMS , unsigned alloy_line_ = __builtin_LINE(), const char *alloy_file_ = __builtin_FILE()
#define ALLOY_DBG_SITE alloy_dbg_site(alloy_line_, alloy_file_)
#else
#define ALLOY_FIBER_SAVE const unsigned alloy_lid_saved_ = alloy_cur_lid;
#define ALLOY_FIBER_RESTORE alloy_cur_lid = alloy_lid_saved_;
#define ALLOY_DBG_SITE_PARAMS
#define ALLOY_DBG_SITE 0u
#endif

/* `1.5h` half literals */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wunknown-warning-option"
#pragma GCC diagnostic ignored "-Wliteral-suffix"
#pragma GCC diagnostic ignored "-Wuser-defined-literals"
ALLOY_FN half operator""h(long double v) { return half((double)v); }
ALLOY_FN half operator""h(unsigned long long v) { return half((double)v); }
#pragma GCC diagnostic pop

namespace metal {

/* ==== barriers ============================================================ */

ALLOY_FN void threadgroup_barrier(mem_flags = mem_flags::mem_none ALLOY_DBG_SITE_PARAMS) {
    const alloy_cpu_group *g = alloy_cur_group;
    ALLOY_FIBER_SAVE
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (g && g->sched) g->launch->svc->barrier(g->sched, ALLOY_DBG_SITE);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    ALLOY_FIBER_RESTORE
}
ALLOY_FN void simdgroup_barrier(mem_flags = mem_flags::mem_none) {
    const alloy_cpu_group *g = alloy_cur_group;
    ALLOY_FIBER_SAVE
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (g && g->sched) g->launch->svc->simd_barrier(g->sched);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    ALLOY_FIBER_RESTORE
}
ALLOY_FN void atomic_thread_fence(mem_flags, memory_order, thread_scope = thread_scope_device) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
/* Overlapping launches (alloy_launch_set_overlap): the CPU's launches run in
 * order, so there is nothing to wait for or to start. */
ALLOY_FN void alloy_wait_previous_kernel() {}
ALLOY_FN void alloy_start_next_kernel() {}

/* ==== SIMD-group functions ================================================ */

/* The result of one exchange: every lane's slot, the active mask, the
 * caller's lane. */
struct alloy_simd_view {
    const unsigned char *slots;
    uint active;
    uint lane;
};

/* Loop mode's exchange (src/dialect/regions.c): a statement with a SIMD-group
 * function runs in two loops over the threads. In the first (phase 1) every
 * live thread calls the function to deposit its value in its lane's slot
 * (the result is discarded); in the second (phase 2) every thread calls it
 * again and gets the result from the slots and the mask of the lanes that
 * deposited. Two buffers, so a statement's results can be read while the
 * next SIMD-group statement deposits. */
struct alloy_lane_exchange {
    int phase;    /* 0: none (a lone lane); 1: deposit; 2: result */
    unsigned lid; /* the calling thread's linear index in the group */
    unsigned buf;
    uint mask[2][ALLOY_CPU_MAX_GROUP_THREADS / 32u];
    unsigned char slots[2][ALLOY_CPU_MAX_GROUP_THREADS * ALLOY_CPU_SIMD_SLOT];
    /* a simdgroup reduction's result, computed by the first lane that asks
     * (every lane gets the same value) */
    uint reduced[2];
    unsigned char result[2][ALLOY_CPU_MAX_GROUP_THREADS / 32u][ALLOY_CPU_SIMD_SLOT];
};
static thread_local alloy_lane_exchange alloy_lanes;
ALLOY_FN void alloy_lanes_reset(unsigned buf) {
    for (uint i = 0; i < ALLOY_CPU_MAX_GROUP_THREADS / 32u; i++) alloy_lanes.mask[buf][i] = 0;
    alloy_lanes.reduced[buf] = 0;
}
ALLOY_FN void alloy_lanes_enter(int phase, unsigned lid, unsigned buf) {
    alloy_lanes.phase = phase;
    alloy_lanes.lid = lid;
    alloy_lanes.buf = buf;
}
ALLOY_FN void alloy_lanes_leave() { alloy_lanes.phase = 0; }

template <class T> ALLOY_FN alloy_simd_view alloy_simd_xchg(const T &v) {
    static_assert(sizeof(T) <= ALLOY_CPU_SIMD_SLOT, "SIMD operand larger than a lane slot");
    alloy_simd_view s;
    const alloy_cpu_group *g = alloy_cur_group;
    if ((!g || !g->sched) && alloy_lanes.phase) { /* loop mode */
        const uint sg = alloy_lanes.lid / 32u, lane = alloy_lanes.lid % 32u, b = alloy_lanes.buf;
        unsigned char *base = alloy_lanes.slots[b] + (size_t)sg * 32u * ALLOY_CPU_SIMD_SLOT;
        if (alloy_lanes.phase == 1) {
            ALLOY_MEMCPY(base + lane * ALLOY_CPU_SIMD_SLOT, &v, sizeof(T));
            alloy_lanes.mask[b][sg] |= 1u << lane;
        }
        s.slots = base;
        s.active = alloy_lanes.mask[b][sg];
        s.lane = lane;
        return s;
    }
    if (!g || !g->sched) { /* lone lane 0 */
        ALLOY_MEMCPY(alloy_simd_alone, &v, sizeof(T));
        s.slots = alloy_simd_alone;
        s.active = 1u;
        s.lane = 0u;
        return s;
    }
    ALLOY_FIBER_SAVE
    s.slots = g->launch->svc->simd_exchange(g->sched, &v, (unsigned)sizeof(T), &s.active, &s.lane);
    ALLOY_FIBER_RESTORE
    return s;
}
template <class T> ALLOY_FN T alloy_simd_get(const alloy_simd_view &s, uint lane) {
    T r;
    ALLOY_MEMCPY(&r, s.slots + lane * ALLOY_CPU_SIMD_SLOT, sizeof(T));
    return r;
}
/* Active lanes of the caller's group of W lanes (W = 32: simdgroup,
 * W = 4: quad), and the index of the group's first lane. */
template <uint W> ALLOY_FN uint alloy_grp_mask(const alloy_simd_view &s) {
    uint base = s.lane & ~(W - 1u);
    uint span = W >= 32u ? 0xffffffffu : (((1u << (W & 31u)) - 1u) << base);
    return s.active & span;
}

template <uint W, class T, class Op> ALLOY_FN T alloy_grp_reduce(const T &x, Op op) {
    alloy_simd_view s = alloy_simd_xchg(x);
    /* loop mode's results: once per simdgroup (the same sums in the same order) */
    const bool once = W == 32u && alloy_lanes.phase == 2 && !(alloy_cur_group && alloy_cur_group->sched);
    const uint sg = alloy_lanes.lid / 32u, b = alloy_lanes.buf;
    if (once && ((alloy_lanes.reduced[b] >> sg) & 1u)) {
        T r;
        ALLOY_MEMCPY(&r, alloy_lanes.result[b][sg], sizeof(T));
        return r;
    }
    uint m = alloy_grp_mask<W>(s);
    uint i0 = (uint)ALLOY_CTZ32(m);
    T acc = alloy_simd_get<T>(s, i0);
    for (uint i = i0 + 1; i < 32u; i++)
        if ((m >> i) & 1u) acc = op(acc, alloy_simd_get<T>(s, i));
    if (once) {
        ALLOY_MEMCPY(alloy_lanes.result[b][sg], &acc, sizeof(T));
        alloy_lanes.reduced[b] |= 1u << sg;
    }
    return acc;
}
/* Prefix over the active lanes before the caller (and the caller itself if
 * inclusive); `id` for an empty exclusive prefix. */
template <uint W, class T, class Op> ALLOY_FN T alloy_grp_scan(const T &x, Op op, const T &id, bool inclusive) {
    alloy_simd_view s = alloy_simd_xchg(x);
    uint m = alloy_grp_mask<W>(s);
    uint end = inclusive ? s.lane + 1u : s.lane;
    bool have = false;
    T acc = id;
    for (uint i = s.lane & ~(W - 1u); i < end; i++)
        if ((m >> i) & 1u) {
            T v = alloy_simd_get<T>(s, i);
            acc = have ? op(acc, v) : v;
            have = true;
        }
    return acc;
}
/* Value of group-relative lane `src` (a source outside the group or not
 * active yields the caller's own value). */
template <uint W, class T> ALLOY_FN T alloy_grp_pick(const alloy_simd_view &s, const T &x, long src) {
    uint m = alloy_grp_mask<W>(s);
    if (src < 0 || src >= (long)W) return x;
    uint l = (s.lane & ~(W - 1u)) + (uint)src;
    return ((m >> l) & 1u) ? alloy_simd_get<T>(s, l) : x;
}

#define ALLOY_GROUP_FUNCS(P, W)                                                                \
    ALLOY_GROUP_REDUCTIONS(P, W)                                                               \
    template <class T> ALLOY_FN T P##_shuffle(T x, uint src) {                                 \
        alloy_simd_view s = alloy_simd_xchg(x);                                                \
        return alloy_grp_pick<W>(s, x, (long)src);                                             \
    }                                                                                          \
    template <class T> ALLOY_FN T P##_broadcast(T x, uint src) { return P##_shuffle(x, src); } \
    template <class T> ALLOY_FN T P##_shuffle_up(T x, uint delta) {                            \
        alloy_simd_view s = alloy_simd_xchg(x);                                                \
        return alloy_grp_pick<W>(s, x, (long)(s.lane & (W - 1u)) - (long)delta);               \
    }                                                                                          \
    template <class T> ALLOY_FN T P##_shuffle_down(T x, uint delta) {                          \
        alloy_simd_view s = alloy_simd_xchg(x);                                                \
        return alloy_grp_pick<W>(s, x, (long)(s.lane & (W - 1u)) + (long)delta);               \
    }                                                                                          \
    template <class T> ALLOY_FN T P##_shuffle_xor(T x, uint mask) {                            \
        alloy_simd_view s = alloy_simd_xchg(x);                                                \
        return alloy_grp_pick<W>(s, x, (long)((s.lane & (W - 1u)) ^ mask));                    \
    }                                                                                          \
    template <class T> ALLOY_FN T P##_shuffle_rotate_up(T x, uint delta) {                     \
        alloy_simd_view s = alloy_simd_xchg(x);                                                \
        return alloy_grp_pick<W>(s, x, (long)(((s.lane & (W - 1u)) + W - delta % W) % W));     \
    }                                                                                          \
    template <class T> ALLOY_FN T P##_shuffle_rotate_down(T x, uint delta) {                   \
        alloy_simd_view s = alloy_simd_xchg(x);                                                \
        return alloy_grp_pick<W>(s, x, (long)(((s.lane & (W - 1u)) + delta) % W));             \
    }                                                                                          \
    template <class T> ALLOY_FN T P##_broadcast_first(T x) {                                   \
        alloy_simd_view s = alloy_simd_xchg(x);                                                \
        return alloy_simd_get<T>(s, (uint)ALLOY_CTZ32(alloy_grp_mask<W>(s)));                  \
    }                                                                                          \
    ALLOY_FN bool P##_any(bool b) {                                                            \
        alloy_simd_view s = alloy_simd_xchg(b);                                                \
        uint m = alloy_grp_mask<W>(s);                                                         \
        for (uint i = 0; i < 32u; i++)                                                         \
            if (((m >> i) & 1u) && alloy_simd_get<bool>(s, i)) return true;                    \
        return false;                                                                          \
    }                                                                                          \
    ALLOY_FN bool P##_all(bool b) {                                                            \
        alloy_simd_view s = alloy_simd_xchg(b);                                                \
        uint m = alloy_grp_mask<W>(s);                                                         \
        for (uint i = 0; i < 32u; i++)                                                         \
            if (((m >> i) & 1u) && !alloy_simd_get<bool>(s, i)) return false;                  \
        return true;                                                                           \
    }                                                                                          \
    ALLOY_FN bool P##_is_first() {                                                             \
        alloy_simd_view s = alloy_simd_xchg((unsigned char)0);                                 \
        return s.lane == (uint)ALLOY_CTZ32(alloy_grp_mask<W>(s));                              \
    }

ALLOY_GROUP_FUNCS(simd, 32u)
ALLOY_GROUP_FUNCS(quad, 4u)
#undef ALLOY_GROUP_FUNCS

/* Bit i: lane i is active and voted true. */
ALLOY_FN simd_vote simd_ballot(bool b) {
    alloy_simd_view s = alloy_simd_xchg(b);
    ulong v = 0;
    for (uint i = 0; i < 32u; i++)
        if (((s.active >> i) & 1u) && alloy_simd_get<bool>(s, i)) v |= 1ul << i;
    return simd_vote(v, s.active);
}
ALLOY_FN simd_vote simd_active_threads_mask() {
    alloy_simd_view s = alloy_simd_xchg((unsigned char)0);
    return simd_vote(s.active, s.active);
}
/* ==== atomics ============================================================= */
/* Real atomics (device memory is shared by worker threads). Orders other
 * than relaxed act as seq_cst. Float read-modify-write ops loop on
 * compare-exchange. */

ALLOY_FN int alloy_mo(memory_order o) { return o == memory_order_relaxed ? __ATOMIC_RELAXED : __ATOMIC_SEQ_CST; }

template <class T> ALLOY_FN T atomic_load_explicit(const volatile atomic<T> *a, memory_order o) {
    T r;
    __atomic_load(&a->alloy_v, &r, alloy_mo(o));
    return r;
}
template <class T> ALLOY_FN void atomic_store_explicit(volatile atomic<T> *a, alloy_id_t<T> v, memory_order o) {
    __atomic_store(&a->alloy_v, &v, alloy_mo(o));
}
template <class T> ALLOY_FN T atomic_exchange_explicit(volatile atomic<T> *a, alloy_id_t<T> v, memory_order o) {
    T r;
    __atomic_exchange(&a->alloy_v, &v, &r, alloy_mo(o));
    return r;
}
template <class T>
ALLOY_FN bool atomic_compare_exchange_weak_explicit(volatile atomic<T> *a, T *expected, alloy_id_t<T> desired,
                                                    memory_order succ, memory_order fail) {
    int f = (succ == memory_order_relaxed || fail == memory_order_relaxed) ? __ATOMIC_RELAXED : __ATOMIC_SEQ_CST;
    return __atomic_compare_exchange(&a->alloy_v, expected, &desired, true, alloy_mo(succ), f);
}
template <class T>
ALLOY_FN bool atomic_compare_exchange_strong_explicit(volatile atomic<T> *a, T *expected, alloy_id_t<T> desired,
                                                      memory_order succ, memory_order fail) {
    int f = (succ == memory_order_relaxed || fail == memory_order_relaxed) ? __ATOMIC_RELAXED : __ATOMIC_SEQ_CST;
    return __atomic_compare_exchange(&a->alloy_v, expected, &desired, false, alloy_mo(succ), f);
}
/* read-modify-write by compare-exchange: returns the old value */
template <class T, class Op> ALLOY_FN T alloy_atomic_rmw(volatile atomic<T> *a, T v, memory_order o, Op op) {
    T old, next;
    __atomic_load(&a->alloy_v, &old, __ATOMIC_RELAXED);
    do {
        next = op(old, v);
    } while (!__atomic_compare_exchange(&a->alloy_v, &old, &next, true, alloy_mo(o), __ATOMIC_RELAXED));
    return old;
}
struct alloy_op_sub {
    template <class T> ALLOY_FN T operator()(const T &a, const T &b) const { return T(a - b); }
};
template <class T> ALLOY_FN T atomic_fetch_add_explicit(volatile atomic<T> *a, alloy_id_t<T> v, memory_order o) {
    if constexpr (alloy_is_int<T>::value) return __atomic_fetch_add(&a->alloy_v, v, alloy_mo(o));
    else return alloy_atomic_rmw(a, v, o, alloy_op_add());
}
template <class T> ALLOY_FN T atomic_fetch_sub_explicit(volatile atomic<T> *a, alloy_id_t<T> v, memory_order o) {
    if constexpr (alloy_is_int<T>::value) return __atomic_fetch_sub(&a->alloy_v, v, alloy_mo(o));
    else return alloy_atomic_rmw(a, v, o, alloy_op_sub());
}
template <class T> ALLOY_FN T atomic_fetch_and_explicit(volatile atomic<T> *a, alloy_id_t<T> v, memory_order o) {
    return __atomic_fetch_and(&a->alloy_v, v, alloy_mo(o));
}
template <class T> ALLOY_FN T atomic_fetch_or_explicit(volatile atomic<T> *a, alloy_id_t<T> v, memory_order o) {
    return __atomic_fetch_or(&a->alloy_v, v, alloy_mo(o));
}
template <class T> ALLOY_FN T atomic_fetch_xor_explicit(volatile atomic<T> *a, alloy_id_t<T> v, memory_order o) {
    return __atomic_fetch_xor(&a->alloy_v, v, alloy_mo(o));
}
template <class T> ALLOY_FN T atomic_fetch_max_explicit(volatile atomic<T> *a, alloy_id_t<T> v, memory_order o) {
    return alloy_atomic_rmw(a, v, o, alloy_op_max());
}
template <class T> ALLOY_FN T atomic_fetch_min_explicit(volatile atomic<T> *a, alloy_id_t<T> v, memory_order o) {
    return alloy_atomic_rmw(a, v, o, alloy_op_min());
}

/* ==== simdgroup matrices ================================================== */
/* Elements are gathered from all lanes with one exchange; inactive lanes
 * (partial simdgroups, which Metal does not allow here) count as zeros. */

ALLOY_FN uint alloy_sgm_lane() {
    return alloy_simd_xchg((unsigned char)0).lane;
}
ALLOY_FN uint alloy_simd_lane_id() { return alloy_sgm_lane(); }

/* Gathers a and b from every lane, then computes the caller's two elements
 * of a*b (+ c) with float accumulation. */
template <class T, class TA, class TB>
ALLOY_FN void alloy_sgm_mma(simdgroup_matrix<T, 8, 8> &d, const simdgroup_matrix<TA, 8, 8> &a,
                            const simdgroup_matrix<TB, 8, 8> &b, const alloy_vec<T, 2> *c) {
    struct pair {
        alloy_vec<TA, 2> a;
        alloy_vec<TB, 2> b;
    } mine;
    mine.a = a.alloy_el;
    mine.b = b.alloy_el;
    alloy_simd_view s = alloy_simd_xchg(mine);
    typedef typename alloy_cond<alloy_same<T, double>::value, double, float>::type F;
    F A[8][8], B[8][8];
    for (uint l = 0; l < 32u; l++) {
        int r, cc;
        alloy_sgm_coord(l, r, cc);
        bool on = (s.active >> l) & 1u;
        pair p = on ? alloy_simd_get<pair>(s, l) : mine;
        for (int k = 0; k < 2; k++) {
            A[r][cc + k] = on ? F(p.a.alloy_e[k]) : F(0);
            B[r][cc + k] = on ? F(p.b.alloy_e[k]) : F(0);
        }
    }
    int row, col;
    alloy_sgm_coord(s.lane, row, col);
    alloy_vec<T, 2> out;
    for (int k = 0; k < 2; k++) {
        F acc = c ? F(c->alloy_e[k]) : F(0);
        for (int j = 0; j < 8; j++) acc += A[row][j] * B[j][col + k];
        out.alloy_e[k] = T(acc);
    }
    d.alloy_el = out;
}

} /* namespace metal */

#endif
