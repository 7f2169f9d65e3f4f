/* cpu_debug.h — checked memory for ALLOY_CPU_DEBUG=1 kernels (CPU only).
 *
 * In a debug build of a kernel the generated code declares every input and
 * output as an alloy_dbg::ptr (the buffer's base and size in bytes, and its
 * name), the rewrite turns `device T*` in declarations, parameters and
 * C-style casts into alloy_dbg::dev<T>, and `threadgroup T a[N][M];` into
 * alloy_dbg::tg_array<T, N, M>. Every subscript, dereference and
 * member access through them checks the bytes it touches against the
 * buffer; pointer arithmetic carries the buffer along, so pointers a body
 * derives stay checked. A violation is reported to the runtime (kernel,
 * buffer, index, size, thread, source line where the subscript gives it)
 * and the access goes to a scratch slot instead, so nothing outside the
 * buffer is read or written; the launch then fails with the first report.
 * Pointers made from raw addresses (`&x[i]`, threadgroup pointers) are not
 * checked. Without ALLOY_CPU_DEBUG this file defines nothing. */
#ifndef ALLOY_PRELUDE_CPU_DEBUG_H
#define ALLOY_PRELUDE_CPU_DEBUG_H
#ifdef ALLOY_CPU_DEBUG

namespace alloy_dbg {

/* An index with the source line of the subscript it came from: the
 * implicit conversion happens at the call site, where __builtin_LINE() and
 * __builtin_FILE() name the user's line (the generated code maps lines with
 * #line). */
struct idx {
    long long v;
    unsigned line;
    const char *file;
    template <class I, alloy_if<alloy_is_int<I>::value> = 0>
    ALLOY_FN idx(I i, unsigned ln = __builtin_LINE(), const char *f = __builtin_FILE())
        : v((long long)i), line(ln), file(f) {}
};

/* From* converts to To* implicitly (adding const, to void*, to a base) — or
 * only drops a const: `const device float* p` is rewritten as
 * `const dev<float> p` (the const already written before the keyword), so
 * a checked pointer gives up const-correctness of the pointee (the normal
 * build keeps checking it). */
template <class T> struct unconst { typedef T type; };
template <class T> struct unconst<const T> { typedef T type; };
template <class From, class To> struct converts {
    static char test(To);
    static long test(...);
    static constexpr bool value = sizeof(test((From) nullptr)) == 1;
};
template <class U, class T> struct converts<U *, T *> {
    static char test(T *);
    static long test(...);
    static constexpr bool value = sizeof(test((U *)nullptr)) == 1 ||
                                  alloy_same<typename unconst<U>::type, T>::value;
};

/* Scratch for an access that was refused: big and aligned enough for any
 * element a body can name, and for a whole row of a threadgroup array (a
 * refused `buf[i]` of `threadgroup float buf[2][8][132]` stands for a row;
 * 64 KB is more than a group's static threadgroup memory on any target). */
alignas(64) static thread_local unsigned char scratch[65536];

ALLOY_FN void report(const char *what, const char *name, long long index, long long count,
                     unsigned esize, unsigned line, const char *file) {
    const alloy_dbg_thread *t = alloy_dbg_cur;
    const alloy_cpu_group *g = t ? t->g : alloy_cur_group;
    if (!g || !g->launch->debug) return;
    char msg[512];
    int n = name[0] == '('
                ? __builtin_snprintf(msg, sizeof msg, "out-of-bounds access to a %s: index %lld, but it has %lld element%s of %u byte%s",
                                     what, index, count, count == 1 ? "" : "s", esize, esize == 1 ? "" : "s")
                : __builtin_snprintf(msg, sizeof msg, "out-of-bounds access to %s '%s': index %lld, but it has %lld element%s of %u byte%s",
                                     what, name, index, count, count == 1 ? "" : "s", esize, esize == 1 ? "" : "s");
    if (t && n > 0 && n < (int)sizeof msg) {
        unsigned gx = g->group_id[0] * g->launch->tg[0] + t->l[0];
        unsigned gy = g->group_id[1] * g->launch->tg[1] + t->l[1];
        unsigned gz = g->group_id[2] * g->launch->tg[2] + t->l[2];
        n += __builtin_snprintf(msg + n, sizeof msg - (unsigned)n,
                                "; thread position in grid (%u,%u,%u), in threadgroup (%u,%u,%u)", gx, gy,
                                gz, t->l[0], t->l[1], t->l[2]);
    }
    if (line && file && n > 0 && n < (int)sizeof msg) {
        const char *e = file, *dot = nullptr;
        while (*e) {
            if (*e == '.') dot = e;
            e++;
        }
        __builtin_snprintf(msg + n, sizeof msg - (unsigned)n, "; %s line %u",
                           dot && dot[1] == 'h' ? "header" : "body", line);
    }
    g->launch->debug->report(g->launch->debug->ctx, msg);
}

template <class T> struct elem_size { static constexpr unsigned value = sizeof(T); };
template <> struct elem_size<void> { static constexpr unsigned value = 1; };
template <> struct elem_size<const void> { static constexpr unsigned value = 1; };

/* A checked pointer into one buffer: `p` points into [base, base + bytes). */
template <class T> struct ptr {
    T *p;
    const unsigned char *base;
    unsigned long long bytes;
    const char *name;
    const char *what; /* "input", "output", "device pointer" */

    ALLOY_FN ptr() : p(nullptr), base(nullptr), bytes(0), name(nullptr), what(nullptr) {}
    ALLOY_FN ptr(decltype(nullptr)) : ptr() {}
    /* from a raw address: not checked (its buffer is unknown) */
    ALLOY_FN ptr(T *raw) : p(raw), base(nullptr), bytes(0), name(nullptr), what(nullptr) {}
    /* a raw address of another type, by a cast (`(device float4 *)&x[i]`): not checked */
    template <class U, alloy_if<!converts<U *, T *>::value> = 0>
    ALLOY_FN explicit ptr(U *raw) : p((T *)raw), base(nullptr), bytes(0), name(nullptr), what(nullptr) {}
    /* a buffer: `nbytes` from `lo` bytes off `raw` (a strided view may reach below it) */
    ALLOY_FN ptr(T *raw, long long lo, unsigned long long nbytes, const char *nm, const char *w)
        : p(raw), base((const unsigned char *)raw + lo), bytes(nbytes), name(nm), what(w) {}
    /* the same buffer seen as another type (casts between device pointers) */
    template <class U, alloy_if<!converts<U *, T *>::value> = 0>
    ALLOY_FN explicit ptr(const ptr<U> &o)
        : p((T *)o.p), base(o.base), bytes(o.bytes), name(o.name), what(o.what) {}
    /* adding const, as a plain pointer converts */
    template <class U, alloy_if<converts<U *, T *>::value> = 0>
    ALLOY_FN ptr(const ptr<U> &o) : p((T *)o.p), base(o.base), bytes(o.bytes), name(o.name), what(o.what) {}

    ALLOY_FN bool checked() const { return base != nullptr; }
    /* the element at p + i, or the scratch slot (reported) when outside */
    ALLOY_FN T *at(long long i, unsigned line, const char *file) const {
        if (!checked()) return p + i;
        const unsigned es = elem_size<T>::value;
        long long off = (long long)((const unsigned char *)p - base) + i * (long long)es;
        if (off < 0 || (unsigned long long)off + es > bytes) {
            /* the element index from the start of the buffer (rounded down) */
            long long index = off >= 0 ? off / (long long)es : -((-off + (long long)es - 1) / (long long)es);
            report(what ? what : "buffer", name ? name : "?", index, (long long)(bytes / es), es, line, file);
            return (T *)(void *)scratch;
        }
        return p + i;
    }
    ALLOY_FN T &operator[](idx i) const { return *at(i.v, i.line, i.file); }
    ALLOY_FN T &operator*() const { return *at(0, 0, nullptr); }
    ALLOY_FN T *operator->() const { return at(0, 0, nullptr); }
    ALLOY_FN ptr operator+(idx i) const { ptr r = *this; r.p = p + i.v; return r; }
    ALLOY_FN ptr operator-(idx i) const { ptr r = *this; r.p = p - i.v; return r; }
    template <class U> ALLOY_FN long long operator-(const ptr<U> &o) const { return p - o.p; }
    ALLOY_FN long long operator-(const T *o) const { return p - o; }
    ALLOY_FN ptr &operator+=(idx i) { p += i.v; return *this; }
    ALLOY_FN ptr &operator-=(idx i) { p -= i.v; return *this; }
    ALLOY_FN ptr &operator++() { ++p; return *this; }
    ALLOY_FN ptr &operator--() { --p; return *this; }
    ALLOY_FN ptr operator++(int) { ptr r = *this; ++p; return r; }
    ALLOY_FN ptr operator--(int) { ptr r = *this; --p; return r; }
    ALLOY_FN explicit operator bool() const { return p != nullptr; }
    ALLOY_FN bool operator!() const { return p == nullptr; }
    /* to a plain pointer (unchecked from there on) or an address */
    ALLOY_FN explicit operator T *() const { return p; }
    template <class I, alloy_if<alloy_is_int<I>::value && !alloy_same<I, bool>::value> = 0>
    ALLOY_FN explicit operator I() const { return (I)(unsigned long long)p; }
};
template <class T> ALLOY_FN ptr<T> operator+(idx i, const ptr<T> &q) { return q + i; }
#define ALLOY_DBG_CMP(op)                                                                          \
    template <class T, class U> ALLOY_FN bool operator op(const ptr<T> &a, const ptr<U> &b) {     \
        return a.p op b.p;                                                                         \
    }                                                                                              \
    template <class T, class U> ALLOY_FN bool operator op(const ptr<T> &a, U *b) { return a.p op b; } \
    template <class T, class U> ALLOY_FN bool operator op(U *a, const ptr<T> &b) { return a op b.p; }
ALLOY_DBG_CMP(==)
ALLOY_DBG_CMP(!=)
ALLOY_DBG_CMP(<)
ALLOY_DBG_CMP(<=)
ALLOY_DBG_CMP(>)
ALLOY_DBG_CMP(>=)
#undef ALLOY_DBG_CMP
template <class T> ALLOY_FN bool operator==(const ptr<T> &a, decltype(nullptr)) { return !a.p; }
template <class T> ALLOY_FN bool operator!=(const ptr<T> &a, decltype(nullptr)) { return a.p != nullptr; }

/* what the rewrite writes for `device T*` */
template <class T> using dev = ptr<T>;

/* `threadgroup T a[N][M]...;`: the same storage (sizeof unchanged), checked
 * subscripts. It converts to a plain pointer to its first element, as an
 * array decays; so that a subscript picks the checked operator over the
 * built-in one, the operator takes the index type exactly, and therefore
 * cannot know the subscript's line (reports give the thread). */
template <class T, int N, int... M> struct tg_array {
    using inner = tg_array<T, M...>;
    inner a[N];
    template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN inner &operator[](I i) {
        if ((long long)i < 0 || (long long)i >= N) {
            static_assert(sizeof(inner) <= sizeof(scratch), "threadgroup array row larger than the debug scratch");
            report("threadgroup array", "(a threadgroup array)", (long long)i, N, (unsigned)sizeof(inner), 0,
                   nullptr);
            return *(inner *)(void *)scratch;
        }
        return a[i];
    }
    template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN const inner &operator[](I i) const {
        return const_cast<tg_array *>(this)->operator[](i);
    }
    ALLOY_FN operator inner *() { return a; }
};
template <class T, int N> struct tg_array<T, N> {
    T a[N];
    template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN T &operator[](I i) {
        if ((long long)i < 0 || (long long)i >= N) {
            report("threadgroup array", "(a threadgroup array)", (long long)i, N, (unsigned)sizeof(T), 0, nullptr);
            return *(T *)(void *)scratch;
        }
        return a[i];
    }
    template <class I, alloy_if<alloy_is_int<I>::value> = 0> ALLOY_FN const T &operator[](I i) const {
        return const_cast<tg_array *>(this)->operator[](i);
    }
    ALLOY_FN operator T *() { return a; }
    ALLOY_FN operator const T *() const { return a; }
};

/* The thread a kernel body runs as (set on entry, kept across barriers). */
struct thread_scope {
    alloy_dbg_thread t;
    ALLOY_FN thread_scope(const alloy_cpu_group *g, unsigned lx, unsigned ly, unsigned lz) {
        t.g = g;
        t.l[0] = lx;
        t.l[1] = ly;
        t.l[2] = lz;
        alloy_dbg_cur = &t;
    }
    ALLOY_FN ~thread_scope() { alloy_dbg_cur = nullptr; }
};

} // namespace alloy_dbg

namespace metal {
/* Checked pointers where the prelude takes plain ones: the touched range is
 * checked once, then the plain function runs. */
template <class T, class U>
ALLOY_FN void simdgroup_load(simdgroup_matrix<T, 8, 8> &d, const alloy_dbg::ptr<U> &src,
                             ulong elements_per_row = 8, ulong2 matrix_origin = ulong2(0, 0),
                             bool transpose_matrix = false, alloy_dbg::idx site = 0) {
    long long first = (long long)(matrix_origin.y * elements_per_row + matrix_origin.x);
    long long last = (long long)((matrix_origin.y + 7) * elements_per_row + matrix_origin.x + 7);
    if (src.at(first, site.line, site.file) == src.p + first && src.at(last, site.line, site.file) == src.p + last)
        simdgroup_load(d, (const U *)src.p, elements_per_row, matrix_origin, transpose_matrix);
}
template <class T, class U>
ALLOY_FN void simdgroup_store(const simdgroup_matrix<T, 8, 8> &a, const alloy_dbg::ptr<U> &dst,
                              ulong elements_per_row = 8, ulong2 matrix_origin = ulong2(0, 0),
                              bool transpose_matrix = false, alloy_dbg::idx site = 0) {
    long long first = (long long)(matrix_origin.y * elements_per_row + matrix_origin.x);
    long long last = (long long)((matrix_origin.y + 7) * elements_per_row + matrix_origin.x + 7);
    if (dst.at(first, site.line, site.file) == dst.p + first && dst.at(last, site.line, site.file) == dst.p + last)
        simdgroup_store(a, dst.p, elements_per_row, matrix_origin, transpose_matrix);
}
template <class T, class E, int N, int... M>
ALLOY_FN void simdgroup_load(simdgroup_matrix<T, 8, 8> &d, alloy_dbg::tg_array<E, N, M...> &src,
                             ulong elements_per_row = 8, ulong2 matrix_origin = ulong2(0, 0),
                             bool transpose_matrix = false) {
    simdgroup_load(d, alloy_dbg::ptr<E>((E *)(void *)&src, 0, sizeof src, "threadgroup array",
                                        "threadgroup array"),
                   elements_per_row, matrix_origin, transpose_matrix);
}
template <class T, class E, int N, int... M>
ALLOY_FN void simdgroup_store(const simdgroup_matrix<T, 8, 8> &a, alloy_dbg::tg_array<E, N, M...> &dst,
                              ulong elements_per_row = 8, ulong2 matrix_origin = ulong2(0, 0),
                              bool transpose_matrix = false) {
    simdgroup_store(a, alloy_dbg::ptr<E>((E *)(void *)&dst, 0, sizeof dst, "threadgroup array",
                                         "threadgroup array"),
                    elements_per_row, matrix_origin, transpose_matrix);
}
/* atomics through a checked pointer: the element is checked, then the plain function runs */
#define ALLOY_DBG_ATOMIC(fn)                                                                       \
    template <class T, class... A> ALLOY_FN auto fn(const alloy_dbg::ptr<T> &p, A... a) {           \
        return fn(&*p, a...);                                                                      \
    }
ALLOY_DBG_ATOMIC(atomic_load_explicit)
ALLOY_DBG_ATOMIC(atomic_store_explicit)
ALLOY_DBG_ATOMIC(atomic_exchange_explicit)
ALLOY_DBG_ATOMIC(atomic_compare_exchange_weak_explicit)
ALLOY_DBG_ATOMIC(atomic_compare_exchange_strong_explicit)
ALLOY_DBG_ATOMIC(atomic_fetch_add_explicit)
ALLOY_DBG_ATOMIC(atomic_fetch_sub_explicit)
ALLOY_DBG_ATOMIC(atomic_fetch_and_explicit)
ALLOY_DBG_ATOMIC(atomic_fetch_or_explicit)
ALLOY_DBG_ATOMIC(atomic_fetch_xor_explicit)
ALLOY_DBG_ATOMIC(atomic_fetch_max_explicit)
ALLOY_DBG_ATOMIC(atomic_fetch_min_explicit)
#undef ALLOY_DBG_ATOMIC
} // namespace metal

#endif
#endif
