/* tensor.h — Metal 4 tensors and tensor operations on every target: MSL's
 * `<metal_tensor>` (extents, tensor, cooperative_tensor, execution scopes)
 * and MetalPerformancePrimitives' `mpp::tensor_ops` (matmul2d_descriptor,
 * matmul2d, reduce_rows, reduce_columns, is_iterator_compatible).
 *
 * Pasted after the target's prelude into kernels whose source uses tensor
 * operations (codegen decides). This is the portable implementation: plain
 * loops that both backends compile; a target may add faster paths for
 * particular descriptors. The choices Apple leaves to the implementation are
 * written down in docs/dialect.md ("Tensor operations"):
 *   - coordinates are (column, row): extent(0) is the fastest-moving
 *     dimension, as in Metal; a slice keeps the strides and has the
 *     remaining extent (extent - offset), so edges are checked against the
 *     original tensor;
 *   - a cooperative tensor of an M x N destination gives thread t of a scope
 *     of T threads the whole rows t, t + T, t + 2T, ... (row reductions are
 *     thread-local; column reductions meet in threadgroup memory);
 *   - products accumulate in float (int32 for 8-bit integers, double for
 *     double, an alloy extension); relaxed_precision is accepted and changes
 *     nothing here. */
#ifndef ALLOY_PRELUDE_TENSOR_H
#define ALLOY_PRELUDE_TENSOR_H

namespace metal {

constexpr size_t dynamic_extent = ~(size_t)0;

template <class T> struct alloy_unconst { typedef T type; };
template <class T> struct alloy_unconst<const T> { typedef T type; };

/* metal::array (the part tensors use: indices and strides) */
template <class T, size_t N> struct array {
    T alloy_v[N];
    ALLOY_FN constexpr T &operator[](size_t i) { return alloy_v[i]; }
    ALLOY_FN constexpr const T &operator[](size_t i) const { return alloy_v[i]; }
    ALLOY_FN static constexpr size_t size() { return N; }
};

/* `t[i, j]` is rewritten to `t[alloy_md(i, j)]` (C++ before 23 has no
 * multi-argument subscript). */
template <size_t N> struct alloy_md_index {
    long v[N];
};
template <class... I> ALLOY_FN alloy_md_index<sizeof...(I)> alloy_md(I... i) {
    return alloy_md_index<sizeof...(I)>{{(long)i...}};
}

template <size_t... S> ALLOY_FN constexpr size_t alloy_pack_at(size_t r) {
    if constexpr (sizeof...(S) == 0) {
        (void)r;
        return dynamic_extent;
    } else {
        const size_t v[] = {S...};
        return v[r];
    }
}

/* ---- extents ------------------------------------------------------------ */

template <class I, size_t... E> struct extents {
    static_assert(sizeof...(E) >= 1 && sizeof...(E) <= 8, "extents: rank 1 to 8");
    typedef I index_type;
    typedef size_t rank_type;
    I alloy_e[sizeof...(E)];

    ALLOY_FN static constexpr size_t rank() { return sizeof...(E); }
    ALLOY_FN static constexpr size_t rank_dynamic() { return ((E == dynamic_extent ? 1 : 0) + ...); }
    ALLOY_FN static constexpr size_t static_extent(size_t r) { return alloy_pack_at<E...>(r); }
    ALLOY_FN constexpr extents() : alloy_e{(E == dynamic_extent ? I(0) : I(E))...} {}
    /* every extent, or only the dynamic ones (as std::extents) */
    template <class... J, alloy_if<(sizeof...(J) >= 1 && (sizeof...(J) == sizeof...(E) ||
                                                         sizeof...(J) == rank_dynamic()))> = 0>
    ALLOY_FN constexpr extents(J... j) : alloy_e{} {
        const I in[] = {I(j)...};
        size_t d = 0;
        for (size_t r = 0; r < rank(); r++) {
            const bool dyn = static_extent(r) == dynamic_extent;
            if (sizeof...(J) == rank()) alloy_e[r] = dyn ? in[r] : I(static_extent(r));
            else alloy_e[r] = dyn ? in[d++] : I(static_extent(r));
        }
    }
    ALLOY_FN constexpr I extent(size_t r) const { return alloy_e[r]; }
};

template <class I, size_t R, size_t... E> struct alloy_dext {
    typedef typename alloy_dext<I, R - 1, dynamic_extent, E...>::type type;
};
template <class I, size_t... E> struct alloy_dext<I, 0, E...> {
    typedef extents<I, E...> type;
};
template <class I, size_t R> using dextents = typename alloy_dext<I, R>::type;

/* ---- tensors ------------------------------------------------------------ */

/* What a tensor refers to. tensor_handle is a bound MTLTensor on Metal;
 * alloy binds buffers, so every tensor here is built in the body from a
 * pointer (tensor_inline) or sliced from one (tensor_offset). */
struct tensor_handle {};
struct tensor_offset {};
struct tensor_inline {};

template <class E, class X, class D = tensor_handle> struct tensor {
    typedef E element_type;
    typedef typename alloy_unconst<E>::type value_type;
    typedef X extents_type;
    typedef typename X::index_type index_type;
    typedef D descriptor_type;
    static constexpr size_t alloy_rank = X::rank();

    E *alloy_p;
    X alloy_x;
    index_type alloy_s[alloy_rank];

    ALLOY_FN tensor() : alloy_p(nullptr), alloy_x(), alloy_s{} {}
    /* packed: stride(0) = 1, stride(r) = stride(r-1) * extent(r-1) */
    ALLOY_FN tensor(const value_type *p, const X &x) : alloy_p(const_cast<E *>(p)), alloy_x(x) {
        index_type s = 1;
        for (size_t r = 0; r < alloy_rank; r++) {
            alloy_s[r] = s;
            s *= x.extent(r);
        }
    }
    ALLOY_FN tensor(const value_type *p, const X &x, const array<index_type, alloy_rank> &strides)
        : alloy_p(const_cast<E *>(p)), alloy_x(x) {
        for (size_t r = 0; r < alloy_rank; r++) alloy_s[r] = strides[r];
    }
#ifdef ALLOY_CPU_DEBUG
    /* A checked pointer gives its address (accesses through a tensor are not
     * checked). */
    template <class P, class = decltype(((const P *)nullptr)->p)>
    ALLOY_FN tensor(const P &q, const X &x) : tensor((const value_type *)q.p, x) {}
    template <class P, class = decltype(((const P *)nullptr)->p)>
    ALLOY_FN tensor(const P &q, const X &x, const array<index_type, alloy_rank> &strides)
        : tensor((const value_type *)q.p, x, strides) {}
#endif

    ALLOY_FN static constexpr size_t get_rank() { return alloy_rank; }
    ALLOY_FN index_type get_extent(size_t r) const { return alloy_x.extent(r); }
    ALLOY_FN index_type get_stride(size_t r) const { return alloy_s[r]; }
    ALLOY_FN const X &extents() const { return alloy_x; }
    ALLOY_FN array<index_type, alloy_rank> strides() const {
        array<index_type, alloy_rank> a;
        for (size_t r = 0; r < alloy_rank; r++) a[r] = alloy_s[r];
        return a;
    }
    ALLOY_FN E *data() const { return alloy_p; }

    ALLOY_FN long alloy_offset(const long *i) const {
        long o = 0;
        for (size_t r = 0; r < alloy_rank; r++) o += i[r] * (long)alloy_s[r];
        return o;
    }
    ALLOY_FN E &operator[](const alloy_md_index<alloy_rank> &i) const { return alloy_p[alloy_offset(i.v)]; }
    template <class J> ALLOY_FN E &operator[](const array<J, alloy_rank> &i) const {
        long v[alloy_rank];
        for (size_t r = 0; r < alloy_rank; r++) v[r] = (long)i[r];
        return alloy_p[alloy_offset(v)];
    }
    template <class J, alloy_if<alloy_is_int<J>::value && alloy_rank == 1> = 0>
    ALLOY_FN E &operator[](J i) const {
        return alloy_p[(long)i * (long)alloy_s[0]];
    }
    template <class... J, alloy_if<sizeof...(J) == alloy_rank> = 0> ALLOY_FN E &operator()(J... j) const {
        const long v[] = {(long)j...};
        return alloy_p[alloy_offset(v)];
    }

    /* slice(o0, o1, ...): the origin moves to the offsets; the extents are
     * what remains (never negative). slice<E0, E1, ...>(...) also caps each
     * extent at the given static one (dynamic_extent: no cap). */
    template <size_t... S, class... O> ALLOY_FN tensor<E, dextents<index_type, alloy_rank>, tensor_offset>
    slice(O... o) const {
        static_assert(sizeof...(O) == alloy_rank, "tensor::slice: one offset per dimension");
        static_assert(sizeof...(S) == 0 || sizeof...(S) == alloy_rank,
                      "tensor::slice<...>: one extent per dimension");
        const long off[] = {(long)o...};
        tensor<E, dextents<index_type, alloy_rank>, tensor_offset> t;
        t.alloy_p = alloy_p + alloy_offset(off);
        for (size_t r = 0; r < alloy_rank; r++) {
            long rem = (long)alloy_x.extent(r) - off[r];
            if (rem < 0) rem = 0;
            const size_t cap = alloy_pack_at<S...>(r);
            if (cap != dynamic_extent && (long)cap < rem) rem = (long)cap;
            t.alloy_x.alloy_e[r] = (index_type)rem;
            t.alloy_s[r] = alloy_s[r];
        }
        return t;
    }
    /* static_slice<E0, E1, ...>(o0, o1, ...): static extents, taken as given
     * (the caller knows the tile is inside); dynamic_extent ones get what
     * remains. */
    template <size_t... S, class... O> ALLOY_FN tensor<E, metal::extents<index_type, S...>, tensor_offset>
    static_slice(O... o) const {
        static_assert(sizeof...(O) == alloy_rank && sizeof...(S) == alloy_rank,
                      "tensor::static_slice<...>(...): one extent and one offset per dimension");
        const long off[] = {(long)o...};
        tensor<E, metal::extents<index_type, S...>, tensor_offset> t;
        t.alloy_p = alloy_p + alloy_offset(off);
        for (size_t r = 0; r < alloy_rank; r++) {
            long rem = (long)alloy_x.extent(r) - off[r];
            if (rem < 0) rem = 0;
            const size_t s = alloy_pack_at<S...>(r);
            t.alloy_x.alloy_e[r] = s == dynamic_extent ? (index_type)rem : (index_type)s;
            t.alloy_s[r] = alloy_s[r];
        }
        return t;
    }
};

template <class T> struct alloy_is_tensor { static constexpr bool value = false; };
template <class E, class X, class D> struct alloy_is_tensor<tensor<E, X, D>> {
    static constexpr bool value = true;
};

/* ---- execution scopes ---------------------------------------------------- */

template <size_t N> struct execution_simdgroups {
    static_assert(N != 0, "execution_simdgroups<0> is not a scope");
    static constexpr size_t static_size = N;
    ALLOY_FN constexpr uint size() const { return (uint)N; }
};
template <size_t N> struct execution_threads {
    static_assert(N == 1, "only execution_threads<1> (execution_thread) is a scope");
    static constexpr size_t static_size = N;
    ALLOY_FN constexpr uint size() const { return 1u; }
};
using execution_simdgroup = execution_simdgroups<1>;
using execution_thread = execution_threads<1>;

template <class S> struct alloy_scope {
    static constexpr bool ok = false;
    static constexpr uint threads = 1u;
};
template <size_t N> struct alloy_scope<execution_simdgroups<N>> {
    static constexpr bool ok = true;
    static constexpr uint threads = 32u * (uint)N;
};
template <> struct alloy_scope<execution_threads<1>> {
    static constexpr bool ok = true;
    static constexpr uint threads = 1u;
};

/* The caller's index in its scope of T threads: the scope is the T
 * consecutive threads of the threadgroup that include the caller. */
ALLOY_FN uint alloy_tg_index() { return alloy_linear_tid(); }
template <uint T> ALLOY_FN uint alloy_scope_index() {
    return T == 1u ? 0u : alloy_tg_index() % T;
}
/* Synchronises a scope of T threads (only the reductions across threads
 * need it). A scope of several simdgroups must be the whole threadgroup. */
template <uint T> ALLOY_FN void alloy_scope_barrier() {
    if constexpr (T == 32u) simdgroup_barrier(mem_flags::mem_threadgroup);
    else if constexpr (T > 32u) threadgroup_barrier(mem_flags::mem_threadgroup);
}

/* ---- cooperative tensors ------------------------------------------------- */

/* Kind 0: an M x N destination; thread t holds rows t, t+T, ... whole
 *         (element i: row (i / N) * T + t, column i % N).
 * Kind 1: a row reduction (M values): element i is row i * T + t.
 * Kind 2: a column reduction (N values): element i is column i * T + t. */
template <int Kind, int M, int N, int T> struct alloy_ct_layout {
    static constexpr int kind = Kind, rows = M, cols = N, threads = T;
    static constexpr int rows_per_thread = (M + T - 1) / T;
    static constexpr int cols_per_thread = (N + T - 1) / T;
    static constexpr int capacity = Kind == 0 ? rows_per_thread * N : Kind == 1 ? rows_per_thread : cols_per_thread;
    ALLOY_FN static void coord(int i, int t, int &col, int &row) {
        if (Kind == 0) {
            row = (i / N) * T + t;
            col = i % N;
        } else if (Kind == 1) {
            row = i * T + t;
            col = 0;
        } else {
            col = i * T + t;
            row = 0;
        }
    }
    ALLOY_FN static bool valid(int i, int t) {
        int c, r;
        coord(i, t, c, r);
        return i >= 0 && i < capacity && r < M && c < N;
    }
    /* the valid elements of thread t are a prefix: how long it is */
    ALLOY_FN static int count(int t) {
        if (Kind == 0) return (t < M ? (M - 1 - t) / T + 1 : 0) * N;
        if (Kind == 1) return t < M ? (M - 1 - t) / T + 1 : 0;
        return t < N ? (N - 1 - t) / T + 1 : 0;
    }
};

/* An iterator over the valid elements of the thread's part of a cooperative
 * tensor (they are a prefix of its elements). */
template <class CT> struct alloy_ct_iter {
    CT *alloy_c;
    int alloy_i;
    ALLOY_FN auto &operator*() const { return alloy_c->alloy_v[alloy_i]; }
    ALLOY_FN alloy_ct_iter &operator++() {
        ++alloy_i;
        return *this;
    }
    ALLOY_FN alloy_ct_iter operator++(int) {
        alloy_ct_iter o = *this;
        ++alloy_i;
        return o;
    }
    ALLOY_FN bool operator==(const alloy_ct_iter &o) const { return alloy_i == o.alloy_i; }
    ALLOY_FN bool operator!=(const alloy_ct_iter &o) const { return alloy_i != o.alloy_i; }
};

template <class E, class X, class L> struct cooperative_tensor {
    typedef E element_type;
    typedef E value_type;
    typedef X extents_type;
    typedef L alloy_layout;
    static constexpr int alloy_cap = L::capacity > 0 ? L::capacity : 1;

    E alloy_v[alloy_cap];
    ushort alloy_t; /* the owning thread's index in its scope */

    ALLOY_FN static constexpr uint16_t get_capacity() { return (uint16_t)L::capacity; }
    ALLOY_FN bool get_mask(uint16_t i) const { return L::valid((int)i, (int)alloy_t); }
    ALLOY_FN bool is_valid_element(uint16_t i) const { return get_mask(i); }
    ALLOY_FN E &operator[](uint16_t i) { return alloy_v[i]; }
    ALLOY_FN const E &operator[](uint16_t i) const { return alloy_v[i]; }
    ALLOY_FN array<int, X::rank()> get_multidimensional_index(uint16_t i) const {
        int c, r;
        L::coord((int)i, (int)alloy_t, c, r);
        array<int, X::rank()> a;
        if constexpr (X::rank() == 2) {
            a[0] = c;
            a[1] = r;
        } else {
            a[0] = L::kind == 1 ? r : c;
        }
        return a;
    }

    typedef alloy_ct_iter<cooperative_tensor> iterator;
    typedef alloy_ct_iter<const cooperative_tensor> const_iterator;
    /* iterators visit the valid elements only */
    ALLOY_FN iterator begin() { return iterator{this, 0}; }
    ALLOY_FN iterator end() { return iterator{this, L::count(alloy_t)}; }
    ALLOY_FN const_iterator begin() const { return const_iterator{this, 0}; }
    ALLOY_FN const_iterator end() const { return const_iterator{this, L::count(alloy_t)}; }
    template <class CT> ALLOY_FN array<int, X::rank()> get_multidimensional_index(const alloy_ct_iter<CT> &it) const {
        return get_multidimensional_index((uint16_t)it.alloy_i);
    }
    /* The element of this tensor that corresponds to `it`'s element of
     * another cooperative tensor (see is_iterator_compatible). */
    template <class CT> ALLOY_FN iterator map_iterator(const alloy_ct_iter<CT> &it) {
        typedef typename alloy_unconst<CT>::type::alloy_layout SL;
        static_assert(SL::threads == L::threads && SL::rows == L::rows &&
                          (SL::kind == L::kind || (SL::kind == 0 && L::kind == 1)),
                      "map_iterator: the two cooperative tensors do not share a layout (see "
                      "is_iterator_compatible)");
        return iterator{this, SL::kind == L::kind ? it.alloy_i : it.alloy_i / SL::cols};
    }

    /* load/store: the elements inside the tensor's extents (load sets the
     * others to zero). A destination takes a rank-2 tensor, a reduction a
     * rank-1 one. */
    template <class TE, class TX, class TD> ALLOY_FN void load(const tensor<TE, TX, TD> &src) {
        static_assert(TX::rank() == X::rank(), "cooperative_tensor::load: the tensor's rank differs");
        for (int i = 0; i < L::capacity; i++) {
            int c, r;
            L::coord(i, (int)alloy_t, c, r);
            bool in = L::valid(i, (int)alloy_t);
            if constexpr (X::rank() == 2) {
                in = in && c < (int)src.get_extent(0) && r < (int)src.get_extent(1);
                alloy_v[i] = in ? E(src(c, r)) : E(0);
            } else {
                const int x = L::kind == 1 ? r : c;
                in = in && x < (int)src.get_extent(0);
                alloy_v[i] = in ? E(src(x)) : E(0);
            }
        }
    }
    template <class TE, class TX, class TD> ALLOY_FN void store(const tensor<TE, TX, TD> &dst) const {
        static_assert(TX::rank() == X::rank(), "cooperative_tensor::store: the tensor's rank differs");
        typedef typename alloy_unconst<TE>::type V;
        for (int i = 0; i < L::capacity; i++) {
            if (!L::valid(i, (int)alloy_t)) continue;
            int c, r;
            L::coord(i, (int)alloy_t, c, r);
            if constexpr (X::rank() == 2) {
                if (c < (int)dst.get_extent(0) && r < (int)dst.get_extent(1)) dst(c, r) = V(alloy_v[i]);
            } else {
                const int x = L::kind == 1 ? r : c;
                if (x < (int)dst.get_extent(0)) dst(x) = V(alloy_v[i]);
            }
        }
    }
};

template <class T> struct alloy_is_coop { static constexpr bool value = false; };
template <class E, class X, class L> struct alloy_is_coop<cooperative_tensor<E, X, L>> {
    static constexpr bool value = true;
};

} /* namespace metal */

namespace mpp {
namespace tensor_ops {

using metal::alloy_ct_layout;
using metal::cooperative_tensor;

enum class reduction_operation { sum, max, min };

template <class E> ALLOY_FN constexpr E alloy_zero() {
    if constexpr (::alloy_frank<E>::value == 2) return E::alloy_from_bits(0);
    else return E(0);
}
template <class E> struct reduction_operation_identity {
    static constexpr E sum_identity = alloy_zero<E>();
    static constexpr E max_identity = metal::numeric_limits<E>::lowest();
    static constexpr E min_identity = metal::numeric_limits<E>::max();
};

template <class E> ALLOY_FN E alloy_reduce(reduction_operation op, E a, E b) {
    switch (op) {
    case reduction_operation::max: return b > a ? b : a;
    case reduction_operation::min: return b < a ? b : a;
    default: return E(a + b);
    }
}

struct matmul2d_descriptor {
    enum class mode { multiply, multiply_accumulate };
    int m, n, k;
    bool transpose_left, transpose_right;
    bool relaxed_precision;
    mode matmul_mode;
    constexpr matmul2d_descriptor(int m_, int n_, int k_ = (int)metal::dynamic_extent, bool transpose_left_ = false,
                                  bool transpose_right_ = false, bool relaxed_precision_ = false,
                                  mode matmul_mode_ = mode::multiply)
        : m(m_), n(n_), k(k_), transpose_left(transpose_left_), transpose_right(transpose_right_),
          relaxed_precision(relaxed_precision_), matmul_mode(matmul_mode_) {}
};

/* Operand element types: half, bfloat, float, int8_t, uint8_t (double as an
 * alloy extension, with double everywhere). */
template <class T> struct alloy_mm_elem {
    static constexpr bool fp = alloy_same<T, float>::value || alloy_same<T, half>::value ||
                               alloy_same<T, bfloat>::value;
    static constexpr bool i8 = alloy_same<T, int8_t>::value || alloy_same<T, uint8_t>::value ||
                               alloy_same<T, char>::value;
    static constexpr bool f64 = alloy_same<T, double>::value;
};
template <class A, class B, class C> struct alloy_mm_types {
    typedef alloy_mm_elem<A> a;
    typedef alloy_mm_elem<B> b;
    typedef alloy_mm_elem<C> c;
    static constexpr bool ints = a::i8 && b::i8;
    static constexpr bool f64 = a::f64 && b::f64 && c::f64;
    static constexpr bool ok = f64 || ((a::fp || a::i8) && (b::fp || b::i8) &&
                                       (c::fp || (ints && alloy_same<C, int32_t>::value)));
    typedef typename alloy_cond<f64, double, typename alloy_cond<ints, int32_t, float>::type>::type acc;
};

/* Logical A (M x K) and B (K x N) of an operand as given: coordinates are
 * (column, row); a transposed operand is stored the other way round. */
template <bool Trans, class T> ALLOY_FN int alloy_rows_of(const T &t) { return (int)t.get_extent(Trans ? 0 : 1); }
template <bool Trans, class T> ALLOY_FN int alloy_cols_of(const T &t) { return (int)t.get_extent(Trans ? 1 : 0); }

template <matmul2d_descriptor D, class Scope, class... Args> class matmul2d {
    static_assert(metal::alloy_scope<Scope>::ok,
                  "matmul2d: the scope must be execution_thread, execution_simdgroup or "
                  "execution_simdgroups<N>");
    static_assert(D.m > 0 && D.n > 0, "matmul2d_descriptor: m and n must be positive");
    static_assert(D.k > 0 || D.k == (int)metal::dynamic_extent,
                  "matmul2d_descriptor: k must be positive or dynamic_extent");

public:
    static constexpr matmul2d_descriptor descriptor = D;
    typedef Scope scope;
    static constexpr int alloy_T = (int)metal::alloy_scope<Scope>::threads;
    typedef alloy_ct_layout<0, D.m, D.n, alloy_T> alloy_dst_layout;
    template <class T> using alloy_unconst_t = typename metal::alloy_unconst<T>::type;

    matmul2d() = default;

    template <class LO, class RO, class E, class CoordType = int>
    using cooperative_tensor_destination_t =
        cooperative_tensor<E, metal::extents<CoordType, (size_t)D.n, (size_t)D.m>, alloy_dst_layout>;
    template <class LO, class RO, class E, class CoordType = int>
    using cooperative_tensor_row_reduction_destination_t =
        cooperative_tensor<E, metal::extents<CoordType, (size_t)D.m>, alloy_ct_layout<1, D.m, D.n, alloy_T>>;
    template <class LO, class RO, class E, class CoordType = int>
    using cooperative_tensor_column_reduction_destination_t =
        cooperative_tensor<E, metal::extents<CoordType, (size_t)D.n>, alloy_ct_layout<2, D.m, D.n, alloy_T>>;

    template <class CT> ALLOY_FN static CT alloy_new_coop() {
        CT c;
        for (int i = 0; i < CT::alloy_cap; i++) c.alloy_v[i] = alloy_zero<typename CT::value_type>();
        c.alloy_t = (ushort)metal::alloy_scope_index<(uint)alloy_T>();
        return c;
    }
    template <class LO, class RO, class E, class CoordType = int>
    ALLOY_FN cooperative_tensor_destination_t<LO, RO, E, CoordType> get_destination_cooperative_tensor() const {
        return alloy_new_coop<cooperative_tensor_destination_t<LO, RO, E, CoordType>>();
    }
    template <class LO, class RO, class E, class CoordType = int>
    ALLOY_FN cooperative_tensor_row_reduction_destination_t<LO, RO, E, CoordType>
    get_row_reduction_destination_cooperative_tensor() const {
        return alloy_new_coop<cooperative_tensor_row_reduction_destination_t<LO, RO, E, CoordType>>();
    }
    template <class LO, class RO, class E, class CoordType = int>
    ALLOY_FN cooperative_tensor_column_reduction_destination_t<LO, RO, E, CoordType>
    get_column_reduction_destination_cooperative_tensor() const {
        return alloy_new_coop<cooperative_tensor_column_reduction_destination_t<LO, RO, E, CoordType>>();
    }

    /* destination = left * right (+ destination with multiply_accumulate).
     * Every thread of the scope must call it. Rows and columns outside the
     * operands' extents are not written to a destination tensor; in a
     * cooperative destination they get the product of nothing (zero). */
    template <class LO, class RO, class DO> ALLOY_FN void run(LO &left, RO &right, DO &dst) const {
        static_assert(metal::alloy_is_tensor<LO>::value && metal::alloy_is_tensor<RO>::value,
                      "matmul2d::run: alloy takes the left and right operands as tensors "
                      "(cooperative-tensor operands are not supported)");
        static_assert(metal::alloy_is_tensor<DO>::value || metal::alloy_is_coop<DO>::value,
                      "matmul2d::run: the destination must be a tensor or a cooperative tensor");
        static_assert(LO::extents_type::rank() == 2 && RO::extents_type::rank() == 2,
                      "matmul2d::run: the operands must be rank-2 tensors");
        typedef typename LO::value_type EA;
        typedef typename RO::value_type EB;
        typedef typename alloy_unconst_t<DO>::value_type EC;
        typedef alloy_mm_types<EA, EB, EC> types;
        static_assert(types::ok,
                      "matmul2d::run: unsupported element types (left and right: half, bfloat, "
                      "float, int8_t or uint8_t; destination: half, bfloat or float, or int32_t "
                      "for two 8-bit integer operands; or double for all three)");
        typedef typename types::acc Acc;
        constexpr bool TL = D.transpose_left, TR = D.transpose_right;
        constexpr bool acc_mode = D.matmul_mode == matmul2d_descriptor::mode::multiply_accumulate;
        constexpr int T = alloy_T, N = D.n;

        int M_eff = alloy_rows_of<TL>(left);
        int N_eff = alloy_cols_of<TR>(right);
        int K = alloy_cols_of<TL>(left);
        const int KB = alloy_rows_of<TR>(right);
        if (KB < K) K = KB;
        if (D.k != (int)metal::dynamic_extent && D.k < K) K = D.k;
        if (M_eff > D.m) M_eff = D.m;
        if (N_eff > N) N_eff = N;
        if constexpr (metal::alloy_is_tensor<DO>::value) {
            static_assert(DO::extents_type::rank() == 2, "matmul2d::run: the destination must be rank 2");
            if ((int)dst.get_extent(1) < M_eff) M_eff = (int)dst.get_extent(1);
            if ((int)dst.get_extent(0) < N_eff) N_eff = (int)dst.get_extent(0);
        }
        if (M_eff < 0) M_eff = 0;
        if (N_eff < 0) N_eff = 0;
        if (K < 0) K = 0;
        const int t = (int)metal::alloy_scope_index<(uint)T>();
        const long as0 = (long)left.alloy_s[0], as1 = (long)left.alloy_s[1];
        const long bs0 = (long)right.alloy_s[0], bs1 = (long)right.alloy_s[1];
        const long a_row = TL ? as0 : as1, a_k = TL ? as1 : as0; /* logical A(r, k) */
        const long b_k = TR ? bs0 : bs1, b_col = TR ? bs1 : bs0; /* logical B(k, c) */
        const EA *pa = left.alloy_p;
        const EB *pb = right.alloy_p;

        for (int r = t; r < D.m; r += T) {
            const int q = (r - t) / T;
            Acc acc[N];
            for (int c = 0; c < N; c++) {
                Acc init = Acc(0);
                if constexpr (acc_mode) {
                    if constexpr (metal::alloy_is_coop<DO>::value) init = Acc(dst.alloy_v[q * N + c]);
                    else if (r < M_eff && c < N_eff) init = Acc(dst(c, r));
                }
                acc[c] = init;
            }
            if (r < M_eff) {
                const EA *arow = pa + (long)r * a_row;
                for (int k = 0; k < K; k++) {
                    const Acc a = Acc(arow[(long)k * a_k]);
                    const EB *brow = pb + (long)k * b_k;
                    if (b_col == 1)
                        for (int c = 0; c < N_eff; c++) acc[c] += a * Acc(brow[c]);
                    else
                        for (int c = 0; c < N_eff; c++) acc[c] += a * Acc(brow[(long)c * b_col]);
                }
            }
            if constexpr (metal::alloy_is_coop<DO>::value) {
                for (int c = 0; c < N; c++) dst.alloy_v[q * N + c] = EC(acc[c]);
            } else if (r < M_eff) {
                for (int c = 0; c < N_eff; c++) dst(c, r) = EC(acc[c]);
            }
        }
    }

};

/* destination[row] = op over the row's elements (identity for an empty row) */
template <class E, class SX, class DX, class SL, class DL>
ALLOY_FN void reduce_rows(cooperative_tensor<E, SX, SL> &source, cooperative_tensor<E, DX, DL> &destination,
                          reduction_operation op = reduction_operation::sum,
                          E identity = reduction_operation_identity<E>::sum_identity) {
    static_assert(SL::kind == 0 && DL::kind == 1 && SL::rows == DL::rows && SL::threads == DL::threads,
                  "reduce_rows: the source must be a matmul2d destination and the destination its "
                  "row-reduction cooperative tensor");
    for (int q = 0; q < DL::capacity; q++) {
        E v = identity;
        if (q * SL::threads + (int)source.alloy_t < SL::rows)
            for (int c = 0; c < SL::cols; c++) v = alloy_reduce(op, v, source.alloy_v[q * SL::cols + c]);
        destination.alloy_v[q] = v;
    }
}

/* destination[column] = op over the column's elements. The rows of a column
 * belong to different threads: partial results meet in threadgroup memory,
 * two columns at a time, so every thread of the scope must call it. */
template <class E, class SX, class DX, class SL, class DL>
ALLOY_FN void reduce_columns(cooperative_tensor<E, SX, SL> &source, cooperative_tensor<E, DX, DL> &destination,
                             reduction_operation op = reduction_operation::sum,
                             E identity = reduction_operation_identity<E>::sum_identity) {
    static_assert(SL::kind == 0 && DL::kind == 2 && SL::cols == DL::cols && SL::threads == DL::threads,
                  "reduce_columns: the source must be a matmul2d destination and the destination its "
                  "column-reduction cooperative tensor");
    constexpr int T = SL::threads, N = SL::cols, CH = 2, MAXT = 1024;
    static_assert(T <= MAXT, "reduce_columns: at most 1024 threads in the scope");
    const int t = (int)source.alloy_t;
    if constexpr (T == 1) {
        for (int c = 0; c < N; c++) {
            E v = identity;
            for (int q = 0; q < SL::rows_per_thread; q++)
                if (q < SL::rows) v = alloy_reduce(op, v, source.alloy_v[q * N + c]);
            destination.alloy_v[c] = v;
        }
    } else {
        ALLOY_THREADGROUP E alloy_cols_scratch[CH * MAXT];
        const int L = (int)metal::alloy_tg_index(), base = L - t;
        for (int c0 = 0; c0 < N; c0 += CH) {
            for (int j = 0; j < CH && c0 + j < N; j++) {
                E v = identity;
                for (int q = 0; q < SL::rows_per_thread && q * T + t < SL::rows; q++)
                    v = alloy_reduce(op, v, source.alloy_v[q * N + c0 + j]);
                alloy_cols_scratch[j * MAXT + L] = v;
            }
            metal::alloy_scope_barrier<(uint)T>();
            for (int j = 0; j < CH && c0 + j < N; j++) {
                const int c = c0 + j;
                if (c % T != t) continue;
                E v = identity;
                for (int u = 0; u < T; u++) v = alloy_reduce(op, v, alloy_cols_scratch[j * MAXT + base + u]);
                destination.alloy_v[c / T] = v;
            }
            metal::alloy_scope_barrier<(uint)T>();
        }
    }
}

/* Whether map_iterator may take `source`'s iterators into `destination`:
 * the same layout, or a destination and its row reduction. */
template <class SE, class DE, class SX, class DX, class SL, class DL>
ALLOY_FN bool is_iterator_compatible(const cooperative_tensor<SE, SX, SL> &,
                                     const cooperative_tensor<DE, DX, DL> &) {
    return SL::threads == DL::threads && SL::rows == DL::rows &&
           ((SL::kind == DL::kind && SL::cols == DL::cols) || (SL::kind == 0 && DL::kind == 1));
}

} /* namespace tensor_ops */
} /* namespace mpp */

#endif
