/* kernel_util.h — shared helpers for the kernel tests (test_msl_*.c,
 * test_kernel_*.c): building arrays from host data, running a body-only kernel
 * through the PUBLIC API in one call, reading outputs back, and the reference
 * conversions (correctly rounded half / bfloat) the tests compare against.
 *
 * Everything is static inline so each test executable gets its own copy; it only
 * uses the public headers (include/alloy) and tests/harness.h. */
#ifndef ALLOY_TEST_KERNEL_UTIL_H
#define ALLOY_TEST_KERNEL_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define KU_MAX 8

/* The device the tests run on (ALLOY_DEVICE or cpu), opened once. */
static inline alloy_device *ku_device(void) {
    static alloy_device *dev;
    if (!dev) dev = harness_device();
    return dev;
}

static inline void ku_release_array(void *a) { alloy_array_free((alloy_array *)a); }

/* A view (shape, strides, offset in elements) of a device copy of `n_elems`
 * elements of host memory: how tests build strided inputs on any device
 * (wrapping host memory directly only works on the CPU). The view keeps the
 * copy alive. */
static inline alloy_status ku_view_of_host(const void *buf, int64_t n_elems, alloy_dtype dt,
                                           int ndim, const int64_t *shape,
                                           const int64_t *strides, int64_t offset,
                                           alloy_array **out) {
    alloy_array *base = NULL;
    alloy_status st = alloy_array_from_host(ku_device(), dt, 1, &n_elems, buf, &base);
    if (st != ALLOY_OK) return st;
    st = alloy_array_wrap(ku_device(), alloy_array_data(base), dt, ndim, shape, strides, offset,
                          ku_release_array, base, out);
    if (st != ALLOY_OK) alloy_array_free(base);
    return st;
}

/* A 1-D array holding a copy of n elements of host data (NULL on failure,
 * after a recorded check failure). */
static inline alloy_array *ku_array(alloy_dtype dtype, int64_t n, const void *data) {
    alloy_array *a = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), dtype, 1, &n, data, &a));
    return a;
}

/* An n-d array holding a copy of row-major host data. */
static inline alloy_array *ku_array_nd(alloy_dtype dtype, int ndim, const int64_t *shape,
                                const void *data) {
    alloy_array *a = NULL;
    CHECK_OK(alloy_array_from_host(ku_device(), dtype, ndim, shape, data, &a));
    return a;
}

/* An n-d array of zeros (argument checks that need arrays of some shape). */
static inline alloy_array *ku_zeros(alloy_dtype dtype, int ndim, const int64_t *shape) {
    alloy_array *a = NULL;
    CHECK_OK(alloy_array_new(ku_device(), dtype, ndim, shape, &a));
    if (a) CHECK_OK(alloy_array_fill(a, 0));
    return a;
}

/* A template argument of a launch. */
typedef struct ku_tmpl {
    const char *name;
    int kind; /* 0 int, 1 bool, 2 dtype */
    int64_t ivalue;
    alloy_dtype dvalue;
} ku_tmpl;

/* One launch of one kernel, described as data. Zero-initialise, fill in what
 * matters: outputs are 1-D of out_n[j] elements unless out_ndim[j] > 0. */
typedef struct ku_spec {
    const char *name;
    const char *body;
    const char *header;
    int n_in;
    const char *in_names[KU_MAX];
    alloy_array *in[KU_MAX];
    int n_out;
    const char *out_names[KU_MAX];
    alloy_dtype out_dtype[KU_MAX];
    int64_t out_n[KU_MAX];
    int out_ndim[KU_MAX];
    int64_t out_shape[KU_MAX][ALLOY_MAX_NDIM];
    uint32_t grid[3];
    uint32_t tg[3];
    int has_init;
    double init;
    int atomic_outputs;
    int not_row_contiguous; /* 1: ensure_row_contiguous = false */
    int n_tmpl;
    ku_tmpl tmpl[KU_MAX];
    /* Host buffers the outputs are copied into (row-major), may be NULL. */
    void *out_host[KU_MAX];
} ku_spec;

static inline int64_t ku_out_elems(const ku_spec *s, int j) {
    if (s->out_ndim[j] <= 0) return s->out_n[j];
    int64_t n = 1;
    for (int d = 0; d < s->out_ndim[j]; d++) n *= s->out_shape[j][d];
    return n;
}

/* Creates the kernel, launches it, copies the outputs into out_host[] and
 * frees everything. Returns the first failing status (the message stays in
 * alloy_last_error()). Grid/threadgroup default to (1,1,1) where 0 in y/z. */
static inline alloy_status ku_run(const ku_spec *s) {
    alloy_kernel *k = NULL;
    alloy_launch *l = NULL;
    alloy_array *outs[KU_MAX] = {0};
    alloy_status st = alloy_kernel_new(s->name, s->n_in, s->in_names, s->n_out, s->out_names,
                                       s->body, s->header, !s->not_row_contiguous,
                                       s->atomic_outputs, &k);
    if (st != ALLOY_OK) return st;
    st = alloy_launch_new(&l);
    if (st != ALLOY_OK) goto done;
    for (int j = 0; j < s->n_out && st == ALLOY_OK; j++) {
        if (s->out_ndim[j] > 0)
            st = alloy_launch_add_output(l, s->out_ndim[j], s->out_shape[j], s->out_dtype[j]);
        else
            st = alloy_launch_add_output(l, 1, &s->out_n[j], s->out_dtype[j]);
    }
    if (st != ALLOY_OK) goto done;
    st = alloy_launch_set_grid(l, s->grid[0], s->grid[1] ? s->grid[1] : 1,
                               s->grid[2] ? s->grid[2] : 1);
    if (st != ALLOY_OK) goto done;
    st = alloy_launch_set_threadgroup(l, s->tg[0] ? s->tg[0] : 1, s->tg[1] ? s->tg[1] : 1,
                                      s->tg[2] ? s->tg[2] : 1);
    if (st != ALLOY_OK) goto done;
    if (s->has_init && (st = alloy_launch_set_init_value(l, s->init)) != ALLOY_OK) goto done;
    for (int t = 0; t < s->n_tmpl && st == ALLOY_OK; t++) {
        const ku_tmpl *a = &s->tmpl[t];
        if (a->kind == 0) st = alloy_launch_add_template_int(l, a->name, a->ivalue);
        else if (a->kind == 1) st = alloy_launch_add_template_bool(l, a->name, (int)a->ivalue);
        else st = alloy_launch_add_template_dtype(l, a->name, a->dvalue);
    }
    if (st != ALLOY_OK) goto done;
    st = alloy_kernel_apply(k, s->n_in, s->in, l, NULL, outs);
    if (st != ALLOY_OK) goto done;
    for (int j = 0; j < s->n_out && st == ALLOY_OK; j++) {
        if (s->out_host[j])
            st = alloy_array_copy_to_host(outs[j], s->out_host[j],
                                          (size_t)ku_out_elems(s, j) *
                                              alloy_dtype_size(s->out_dtype[j]));
    }
done:
    for (int j = 0; j < KU_MAX; j++) alloy_array_free(outs[j]);
    alloy_launch_free(l);
    alloy_kernel_free(k);
    return st;
}

/* Frees the inputs of a spec (after ku_run). */
static inline void ku_free_inputs(ku_spec *s) {
    for (int i = 0; i < s->n_in; i++) {
        alloy_array_free(s->in[i]);
        s->in[i] = NULL;
    }
}

/* The common case: one float input `in` of n elements, one output `out` of
 * out_n elements of out_dtype, 1-D grid of `grid` threads in groups of `tg`;
 * the output (pre-filled with `init` so unwritten elements show) is copied to
 * out_host. */
static inline alloy_status ku_run_1in1out(const char *name, const char *body, const char *header,
                                   alloy_dtype in_dtype, int64_t n, const void *in_host,
                                   alloy_dtype out_dtype, int64_t out_n, void *out_host,
                                   uint32_t grid, uint32_t tg, double init) {
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = name;
    s.body = body;
    s.header = header;
    s.n_in = 1;
    s.in_names[0] = "in";
    s.in[0] = ku_array(in_dtype, n, in_host);
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = out_dtype;
    s.out_n[0] = out_n;
    s.out_host[0] = out_host;
    s.grid[0] = grid;
    s.tg[0] = tg;
    s.has_init = 1;
    s.init = init;
    alloy_status st = s.in[0] ? ku_run(&s) : ALLOY_ERROR_INVALID_ARGUMENT;
    ku_free_inputs(&s);
    return st;
}

/* ---- reference conversions (independent of the library) ----------------- */

/* Rounds x to a binary floating-point format with `mant` fraction bits and
 * minimum normal exponent `emin`, round-to-nearest-even, gradual underflow,
 * overflow to infinity above `maxv`. Exact: all steps are power-of-two
 * scalings and one rint() in the default rounding mode. */
static inline double ku_round_fmt(double x, int mant, int emin, double maxv) {
    if (isnan(x) || isinf(x) || x == 0) return x;
    double a = fabs(x);
    int e;
    frexp(a, &e);
    int E = e - 1;
    if (E < emin) E = emin;
    double q = ldexp(1.0, E - mant);
    double r = rint(a / q) * q;
    if (r > maxv) r = INFINITY;
    return x < 0 ? -r : r;
}

#define KU_HALF_MAX 65504.0
#define KU_BF16_MAX 3.3895313892515355e38 /* (2 - 2^-7) * 2^127 */

static inline double ku_round_half(double x) { return ku_round_fmt(x, 10, -14, KU_HALF_MAX); }
static inline double ku_round_bf16(double x) { return ku_round_fmt(x, 7, -126, KU_BF16_MAX); }

/* Bits of a value already representable in the format. */
static inline uint16_t ku_encode_fmt(double v, int mant, int ebits, int emin) {
    uint16_t sign = signbit(v) ? (uint16_t)(1u << (mant + ebits)) : 0;
    unsigned emax_field = (1u << ebits) - 1;
    if (isnan(v)) return (uint16_t)((emax_field << mant) | (1u << (mant - 1)));
    double a = fabs(v);
    if (isinf(a)) return (uint16_t)(sign | (emax_field << mant));
    if (a == 0) return sign;
    if (a < ldexp(1.0, emin)) /* subnormal */
        return (uint16_t)(sign | (unsigned)(a / ldexp(1.0, emin - mant)));
    int e;
    frexp(a, &e);
    int E = e - 1;
    unsigned m = (unsigned)((a / ldexp(1.0, E) - 1.0) * (double)(1u << mant));
    return (uint16_t)(sign | ((unsigned)(E - emin + 1) << mant) | m);
}

static inline double ku_decode_fmt(uint16_t b, int mant, int ebits, int emin) {
    int s = (b >> (mant + ebits)) & 1;
    unsigned ef = (b >> mant) & ((1u << ebits) - 1);
    unsigned m = b & ((1u << mant) - 1);
    double v;
    if (ef == (1u << ebits) - 1) v = m ? NAN : INFINITY;
    else if (ef == 0) v = ldexp((double)m, emin - mant);
    else v = ldexp(1.0 + (double)m / (double)(1u << mant), (int)ef + emin - 1);
    return s ? -v : v;
}

/* half: 10 fraction bits, 5 exponent bits; bfloat16: 7 and 8. */
static inline uint16_t ku_f16_bits(double x) { return ku_encode_fmt(ku_round_half(x), 10, 5, -14); }
static inline double ku_f16_value(uint16_t b) { return ku_decode_fmt(b, 10, 5, -14); }
static inline uint16_t ku_bf16_bits(double x) { return ku_encode_fmt(ku_round_bf16(x), 7, 8, -126); }
static inline double ku_bf16_value(uint16_t b) { return ku_decode_fmt(b, 7, 8, -126); }

/* Float bit patterns. */
static inline uint32_t ku_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float ku_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Compares n floats with a reference: |got - ref| <= atol + rtol*|ref|, NaN
 * only where the reference is NaN, infinities exactly. Prints the first few
 * mismatches with `what`; returns the number of mismatches. */
static inline int ku_cmp_f32(const char *what, const float *got, const double *ref, int64_t n,
                      double atol, double rtol) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = got[i], r = ref[i];
        int ok;
        if (isnan(r)) ok = isnan(g);
        else if (isinf(r)) ok = g == r;
        else ok = !isnan(g) && fabs(g - r) <= atol + rtol * fabs(r);
        if (!ok) {
            if (bad < 5)
                fprintf(stderr, "  %s[%lld]: got %.9g, want %.9g\n", what, (long long)i, g, r);
            bad++;
        }
    }
    return bad;
}

/* Exact comparison of int64-convertible values. */
static inline int ku_cmp_i64(const char *what, const int64_t *got, const int64_t *ref, int64_t n) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (got[i] != ref[i]) {
            if (bad < 5)
                fprintf(stderr, "  %s[%lld]: got %lld, want %lld\n", what, (long long)i,
                        (long long)got[i], (long long)ref[i]);
            bad++;
        }
    }
    return bad;
}

static inline int ku_cmp_i32(const char *what, const int32_t *got, const int32_t *ref, int64_t n) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (got[i] != ref[i]) {
            if (bad < 5)
                fprintf(stderr, "  %s[%lld]: got %d, want %d\n", what, (long long)i, got[i],
                        ref[i]);
            bad++;
        }
    }
    return bad;
}

static inline int ku_cmp_u32(const char *what, const uint32_t *got, const uint32_t *ref, int64_t n) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (got[i] != ref[i]) {
            if (bad < 5)
                fprintf(stderr, "  %s[%lld]: got %u (0x%x), want %u (0x%x)\n", what,
                        (long long)i, got[i], got[i], ref[i], ref[i]);
            bad++;
        }
    }
    return bad;
}

/* matmul_wgmma_tma's threadgroup memory for 3 or 4 stages of 48 KB (the
 * tests' own copy of matmul.c's rule): 64 KB of staged C with 3, 32 KB with
 * 4, and 2 KB for the alignment and the mbarriers. */
static inline size_t ku_gemm_tma_smem(int stages) {
    return (size_t)stages * 48 * 1024 + (stages == 3 ? 64 : 32) * 1024 + 2048;
}

/* One (cols, rows, batch) tensor map of matmul_wgmma_tma, made here from
 * the layout (the tests' own copy of the rules in matmul.c), 128-byte
 * swizzle: an extent of 1
 * takes a stride of 8 elements (the maps' strides must be positive multiples
 * of 16 bytes even where nothing steps). */
static inline void ku_gemm_tma_map(alloy_launch *l, const char *name, int operand, int64_t off, int64_t cols,
                                   int64_t rows, int64_t rs, int64_t batch, int64_t bs, uint32_t bx, uint32_t by) {
    alloy_tensor_map_spec m;
    memset(&m, 0, sizeof m);
    m.operand = operand;
    m.rank = 3;
    m.offset = off;
    m.dims[0] = cols, m.dims[1] = rows, m.dims[2] = bs ? batch : 1;
    m.strides[0] = 1, m.strides[1] = rows > 1 ? rs : 8, m.strides[2] = m.dims[2] > 1 ? bs : 8;
    m.box[0] = bx, m.box[1] = by, m.box[2] = 1;
    m.swizzle = 128;
    CHECK_OK(alloy_launch_set_tensor_map(l, name, &m));
}

#endif
