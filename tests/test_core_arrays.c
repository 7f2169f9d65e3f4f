/* test_core_arrays.c — arrays through the public API: creation for every dtype
 * and rank (0-d .. 8-d, 9 refused, zero-size dims), scalars, borrowed memory
 * (alloy_array_wrap) with its deleter running exactly once, strides (negative,
 * zero/broadcast) and offsets, the row-contiguity rules, gathering and
 * scattering host copies, fills with conversion to every dtype (half and
 * bfloat16 rounding checked bit for bit), contiguous copies, and bad arguments.
 *
 * Every expectation comes from a reference written here: plain C index loops
 * for strided views, and a correctly rounded double -> half/bfloat16
 * conversion built on frexp/ldexp/rint (independent of the library's
 * bit-twiddling one). Tests that need host memory views use the "cpu" device;
 * the rest use the harness device (ALLOY_DEVICE or cpu). */
#include <pthread.h>

#include "harness.h"

static alloy_device *cpu(void) {
    static alloy_device *d;
    if (!d && alloy_device_get("cpu", &d) != ALLOY_OK) {
        fprintf(stderr, "no cpu device: %s\n", alloy_last_error());
        exit(2);
    }
    return d;
}

static alloy_device *dev(void) {
    static alloy_device *d;
    if (!d) d = harness_device();
    return d;
}

static size_t size_of(alloy_dtype d) {
    static const size_t S[] = {1, 1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8};
    return S[d];
}

/* ---- reference conversions ------------------------------------------------ */

/* A double rounded to nearest-even into a binary format with `p` significand
 * bits (implicit one included), exponents [emin, emax] and `ebits` exponent
 * bits; returns the 16-bit pattern. */
static uint16_t ref_round16(double v, int p, int emin, int emax, int ebits) {
    int mbits = p - 1;
    uint16_t sign = signbit(v) ? 0x8000u : 0;
    uint16_t inf = (uint16_t)(((1u << ebits) - 1) << mbits);
    if (isnan(v)) return (uint16_t)(sign | inf | (1u << (mbits - 1)));
    double a = fabs(v);
    if (isinf(a)) return (uint16_t)(sign | inf);
    if (a == 0) return sign;
    int ex;
    frexp(a, &ex);
    int e = ex - 1; /* a in [2^e, 2^(e+1)) */
    int qe = (e > emin ? e : emin) - mbits; /* exponent of one unit in the last place */
    double r = rint(ldexp(a, -qe));         /* exact scaling; rint ties to even */
    double val = ldexp(r, qe);
    if (val >= ldexp(1.0, emax + 1)) return (uint16_t)(sign | inf);
    if (val < ldexp(1.0, emin)) return (uint16_t)(sign | (uint16_t)r); /* subnormal or 0 */
    frexp(val, &ex);
    e = ex - 1;
    uint16_t field = (uint16_t)(e + (1 << (ebits - 1)) - 1);
    uint16_t mant = (uint16_t)(ldexp(val, mbits - e) - ldexp(1.0, mbits));
    return (uint16_t)(sign | (uint16_t)(field << mbits) | mant);
}
static uint16_t ref_half(double v) { return ref_round16(v, 11, -14, 15, 5); }
static uint16_t ref_bf16(double v) { return ref_round16(v, 8, -126, 127, 8); }

/* One element of dtype d holding v (v in range for integer types: C's
 * truncation toward zero, as NumPy's astype). */
static void ref_convert(alloy_dtype d, double v, unsigned char out[8]) {
    memset(out, 0, 8);
    switch (d) {
    case ALLOY_BOOL: out[0] = (v != 0 || isnan(v)) ? 1 : 0; break;
    case ALLOY_INT8: { int8_t x = (int8_t)(int64_t)trunc(v); memcpy(out, &x, 1); break; }
    case ALLOY_UINT8: { uint8_t x = (uint8_t)(int64_t)trunc(v); memcpy(out, &x, 1); break; }
    case ALLOY_INT16: { int16_t x = (int16_t)(int64_t)trunc(v); memcpy(out, &x, 2); break; }
    case ALLOY_UINT16: { uint16_t x = (uint16_t)(int64_t)trunc(v); memcpy(out, &x, 2); break; }
    case ALLOY_INT32: { int32_t x = (int32_t)(int64_t)trunc(v); memcpy(out, &x, 4); break; }
    case ALLOY_UINT32: { uint32_t x = (uint32_t)(int64_t)trunc(v); memcpy(out, &x, 4); break; }
    case ALLOY_INT64: { int64_t x = (int64_t)trunc(v); memcpy(out, &x, 8); break; }
    case ALLOY_UINT64: {
        double t = trunc(v);
        uint64_t x = t >= 9223372036854775808.0
                         ? (uint64_t)(int64_t)(t - 9223372036854775808.0) + (1ull << 63)
                         : (uint64_t)(int64_t)t;
        memcpy(out, &x, 8);
        break;
    }
    case ALLOY_FLOAT16: { uint16_t x = ref_half(v); memcpy(out, &x, 2); break; }
    case ALLOY_BFLOAT16: { uint16_t x = ref_bf16(v); memcpy(out, &x, 2); break; }
    case ALLOY_FLOAT32: { float x = (float)v; memcpy(out, &x, 4); break; }
    case ALLOY_FLOAT64: memcpy(out, &v, 8); break;
    default: break;
    }
}

/* Equal elements; any NaN equals any NaN of the same type. */
static int same_element(alloy_dtype d, const unsigned char *a, const unsigned char *b) {
    uint16_t h1, h2;
    float f1, f2;
    double g1, g2;
    switch (d) {
    case ALLOY_FLOAT16:
        memcpy(&h1, a, 2), memcpy(&h2, b, 2);
        if ((h1 & 0x7c00) == 0x7c00 && (h1 & 0x3ff) && (h2 & 0x7c00) == 0x7c00 && (h2 & 0x3ff))
            return 1;
        return h1 == h2;
    case ALLOY_BFLOAT16:
        memcpy(&h1, a, 2), memcpy(&h2, b, 2);
        if ((h1 & 0x7f80) == 0x7f80 && (h1 & 0x7f) && (h2 & 0x7f80) == 0x7f80 && (h2 & 0x7f))
            return 1;
        return h1 == h2;
    case ALLOY_FLOAT32:
        memcpy(&f1, a, 4), memcpy(&f2, b, 4);
        if (isnan(f1) && isnan(f2)) return 1;
        break;
    case ALLOY_FLOAT64:
        memcpy(&g1, a, 8), memcpy(&g2, b, 8);
        if (isnan(g1) && isnan(g2)) return 1;
        break;
    default: break;
    }
    return memcmp(a, b, size_of(d)) == 0;
}

/* Values each dtype can hold (or round/overflow to a defined result). */
static int values_for(alloy_dtype d, double *v) {
    int n = 0;
    switch (d) {
    case ALLOY_BOOL:
        v[n++] = 0; v[n++] = 1; v[n++] = -2.5; v[n++] = 0.25; v[n++] = NAN; v[n++] = -0.0;
        v[n++] = INFINITY; break;
    case ALLOY_INT8:
        v[n++] = 0; v[n++] = 1; v[n++] = -1; v[n++] = 127; v[n++] = -128; v[n++] = 3.9;
        v[n++] = -3.9; v[n++] = 100.5; break;
    case ALLOY_UINT8: v[n++] = 0; v[n++] = 255; v[n++] = 254.99; v[n++] = 7.5; break;
    case ALLOY_INT16: v[n++] = -32768; v[n++] = 32767; v[n++] = -1234.7; v[n++] = 0.5; break;
    case ALLOY_UINT16: v[n++] = 65535; v[n++] = 40000.2; v[n++] = 0; break;
    case ALLOY_INT32:
        v[n++] = -2147483648.0; v[n++] = 2147483647.0; v[n++] = 123456.9; v[n++] = -7.5; break;
    case ALLOY_UINT32: v[n++] = 4294967295.0; v[n++] = 3e9; v[n++] = 1; break;
    case ALLOY_INT64:
        v[n++] = -9.2e18; v[n++] = 9.2e18; v[n++] = 9007199254740994.0; v[n++] = -1;
        v[n++] = -9223372036854775808.0; break;
    case ALLOY_UINT64:
        v[n++] = 1.8e19; v[n++] = 9223372036854775808.0; v[n++] = 12345.75; v[n++] = 0; break;
    case ALLOY_FLOAT16:
        v[n++] = 0; v[n++] = -0.0; v[n++] = 1; v[n++] = 1.0 / 3; v[n++] = 65504;
        v[n++] = 65519.99; v[n++] = 65520; v[n++] = 1e6; v[n++] = -1e6;
        v[n++] = ldexp(1, -24); v[n++] = ldexp(1, -25); v[n++] = ldexp(1, -25) + ldexp(1, -40);
        v[n++] = 3 * ldexp(1, -26); v[n++] = ldexp(1, -14); v[n++] = ldexp(1, -14) - ldexp(1, -25);
        v[n++] = 1 + ldexp(1, -11); v[n++] = 1 + 3 * ldexp(1, -11);
        v[n++] = 1 + ldexp(1, -11) + ldexp(1, -40); /* a float would round this to a tie */
        v[n++] = -(1 + ldexp(1, -11) + ldexp(1, -40));
        v[n++] = 2048 + 1 + ldexp(1, -30);
        v[n++] = 3.14159265358979323846; v[n++] = -3.14159265358979323846; v[n++] = 1e-8; v[n++] = 0.1;
        v[n++] = INFINITY; v[n++] = -INFINITY; v[n++] = NAN; break;
    case ALLOY_BFLOAT16:
        v[n++] = 0; v[n++] = -0.0; v[n++] = 1; v[n++] = 1 + ldexp(1, -8); v[n++] = 1 + 3 * ldexp(1, -8);
        v[n++] = 1 + ldexp(1, -8) + ldexp(1, -30); /* a float would round this to a tie */
        v[n++] = -(3 + ldexp(1, -7) + ldexp(1, -35));
        v[n++] = 3.38e38; v[n++] = 3.4e38; v[n++] = 1e39; v[n++] = -1e39; v[n++] = 1e-40;
        v[n++] = 1e-45; v[n++] = ldexp(1, -133); v[n++] = ldexp(1, -134); v[n++] = 1e-300;
        v[n++] = 3.14159265358979323846; v[n++] = 0.1; v[n++] = INFINITY; v[n++] = NAN; break;
    case ALLOY_FLOAT32:
        v[n++] = 0.1; v[n++] = 1e-40; v[n++] = 3.4028234663852886e38; v[n++] = 1e39; v[n++] = -0.0;
        v[n++] = NAN; v[n++] = -INFINITY; v[n++] = 16777217.0; break;
    case ALLOY_FLOAT64: v[n++] = 0.1; v[n++] = -1e300; v[n++] = NAN; v[n++] = 5e-324; break;
    default: break;
    }
    return n;
}

/* ---- helpers ---------------------------------------------------------------- */

static void ref_row_major(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] ? shape[i] : 1;
    }
}

static int64_t prod(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

/* Element offset (relative to element [0..0]) of the k-th element in
 * row-major order of `shape`. */
static int64_t view_offset(int ndim, const int64_t *shape, const int64_t *strides, int64_t k) {
    int64_t off = 0;
    for (int i = ndim - 1; i >= 0; i--) {
        int64_t idx = k % shape[i];
        k /= shape[i];
        off += idx * strides[i];
    }
    return off;
}

static void random_bytes(unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(harness_rand_u64() >> 56);
}

static int deleter_calls;
static void *deleter_last_user;
static void counting_deleter(void *user) {
    deleter_calls++;
    deleter_last_user = user;
}

/* ---- creation ---------------------------------------------------------------- */

static void test_new_every_dtype_and_rank(void) {
    static const int64_t shapes[][ALLOY_MAX_NDIM] = {
        {0}, {1}, {33}, {1000}, {33, 31}, {2, 3, 4}, {1, 5, 1, 7}, {2, 1, 3, 1, 2},
        {3, 2, 1, 2, 3, 1}, {1, 2, 2, 1, 2, 1, 3}, {2, 1, 2, 1, 2, 1, 2, 3}};
    static const int ndims[] = {0, 1, 1, 1, 2, 3, 4, 5, 6, 7, 8};
    for (int d = 0; d < ALLOY_DTYPE_COUNT; d++)
        for (size_t s = 0; s < sizeof ndims / sizeof ndims[0]; s++) {
            int nd = ndims[s];
            const int64_t *shape = shapes[s];
            int64_t n = prod(nd, shape);
            size_t item = size_of((alloy_dtype)d);
            alloy_array *a = NULL;
            CHECK_OK(alloy_array_new(dev(), (alloy_dtype)d, nd, nd ? shape : NULL, &a));
            if (!a) continue;
            int64_t rs[ALLOY_MAX_NDIM];
            ref_row_major(nd, shape, rs);
            CHECK(alloy_array_device(a) == dev());
            CHECK(alloy_array_dtype(a) == (alloy_dtype)d);
            CHECK(alloy_array_ndim(a) == nd);
            CHECK(alloy_array_offset(a) == 0);
            CHECK(alloy_array_size(a) == n);
            CHECK(alloy_array_nbytes(a) == (size_t)n * item);
            CHECK(alloy_array_is_row_contiguous(a));
            CHECK(alloy_array_data(a) != NULL);
            for (int i = 0; i < nd; i++) {
                CHECK(alloy_array_shape(a)[i] == shape[i]);
                CHECK_MSG(alloy_array_strides(a)[i] == rs[i], "%s nd %d axis %d stride %lld",
                          alloy_dtype_name((alloy_dtype)d), nd, i,
                          (long long)alloy_array_strides(a)[i]);
            }
            /* from_host copies the bytes exactly; copy_to_host gives them back */
            unsigned char *src = malloc((size_t)n * item), *back = malloc((size_t)n * item + 1);
            random_bytes(src, (size_t)n * item);
            alloy_array *b = NULL;
            CHECK_OK(alloy_array_from_host(dev(), (alloy_dtype)d, nd, shape, src, &b));
            if (b) {
                CHECK(alloy_array_size(b) == n);
                CHECK_OK(alloy_array_copy_to_host(b, back, (size_t)n * item + 1));
                CHECK(memcmp(src, back, (size_t)n * item) == 0);
                /* and copy_from_host + copy_to_host through the first array */
                CHECK_OK(alloy_array_copy_from_host(a, src, (size_t)n * item));
                memset(back, 0, (size_t)n * item);
                CHECK_OK(alloy_array_copy_to_host(a, back, (size_t)n * item));
                CHECK(memcmp(src, back, (size_t)n * item) == 0);
            }
            free(src);
            free(back);
            alloy_array_free(a);
            alloy_array_free(b);
        }
}

static void test_zero_size(void) {
    static const int64_t shapes[][3] = {{0, 0, 0}, {4, 0, 0}, {0, 3, 2}, {5, 2, 0}};
    static const int nds[] = {1, 2, 3, 3};
    for (int s = 0; s < 4; s++)
        for (int d = 0; d < ALLOY_DTYPE_COUNT; d += 3) {
            alloy_array *a = NULL, *c = NULL, *b = NULL;
            CHECK_OK(alloy_array_new(dev(), (alloy_dtype)d, nds[s], shapes[s], &a));
            if (!a) continue;
            CHECK(alloy_array_size(a) == 0);
            CHECK(alloy_array_nbytes(a) == 0);
            CHECK(alloy_array_is_row_contiguous(a));
            for (int i = 0; i < nds[s]; i++) CHECK(alloy_array_shape(a)[i] == shapes[s][i]);
            CHECK_OK(alloy_array_copy_to_host(a, NULL, 0));
            CHECK_OK(alloy_array_copy_from_host(a, NULL, 0));
            CHECK_OK(alloy_array_fill(a, 3.0));
            CHECK_OK(alloy_array_contiguous(a, &c));
            if (c) CHECK(alloy_array_size(c) == 0);
            CHECK_OK(alloy_array_from_host(dev(), (alloy_dtype)d, nds[s], shapes[s], NULL, &b));
            if (b) CHECK(alloy_array_size(b) == 0);
            alloy_array_free(a);
            alloy_array_free(b);
            alloy_array_free(c);
        }
    /* a zero-size wrap may have NULL data */
    alloy_array *w = NULL;
    int64_t shape[2] = {3, 0};
    CHECK_OK(alloy_array_wrap(cpu(), NULL, ALLOY_FLOAT32, 2, shape, NULL, 0, NULL, NULL, &w));
    if (w) CHECK(alloy_array_size(w) == 0);
    alloy_array_free(w);
}

static void test_scalar_every_dtype(void) {
    double v[64];
    for (int d = 0; d < ALLOY_DTYPE_COUNT; d++) {
        int n = values_for((alloy_dtype)d, v);
        for (int i = 0; i < n; i++) {
            alloy_array *a = NULL;
            CHECK_OK(alloy_array_scalar(dev(), (alloy_dtype)d, v[i], &a));
            if (!a) continue;
            CHECK(alloy_array_ndim(a) == 0);
            CHECK(alloy_array_size(a) == 1);
            CHECK(alloy_array_nbytes(a) == size_of((alloy_dtype)d));
            CHECK(alloy_array_is_row_contiguous(a));
            unsigned char got[8] = {0}, want[8];
            CHECK_OK(alloy_array_copy_to_host(a, got, sizeof got));
            ref_convert((alloy_dtype)d, v[i], want);
            CHECK_MSG(same_element((alloy_dtype)d, got, want),
                      "scalar %s of %.17g: got %02x%02x.. want %02x%02x..",
                      alloy_dtype_name((alloy_dtype)d), v[i], got[1], got[0], want[1], want[0]);
            alloy_array_free(a);
        }
    }
    alloy_array *a = NULL;
    CHECK_FAILS(alloy_array_scalar(dev(), ALLOY_DTYPE_COUNT, 1, &a), ALLOY_ERROR_INVALID_ARGUMENT,
                "dtype");
    CHECK_FAILS(alloy_array_scalar(NULL, ALLOY_FLOAT32, 1, &a), ALLOY_ERROR_INVALID_ARGUMENT,
                "device");
    CHECK_FAILS(alloy_array_scalar(dev(), ALLOY_FLOAT32, 1, NULL), ALLOY_ERROR_INVALID_ARGUMENT,
                "out");
}

static void test_rank_limits_and_bad_shapes(void) {
    int64_t shape9[9] = {1, 2, 1, 2, 1, 2, 1, 2, 1};
    int64_t neg[3] = {2, -1, 3};
    float buf[64] = {0};
    alloy_array *a = NULL;
    CHECK_FAILS(alloy_array_new(dev(), ALLOY_FLOAT32, 9, shape9, &a), ALLOY_ERROR_INVALID_ARGUMENT,
                "ndim 9");
    CHECK(a == NULL);
    CHECK_FAILS(alloy_array_new(dev(), ALLOY_FLOAT32, -1, shape9, &a), ALLOY_ERROR_INVALID_ARGUMENT,
                "ndim");
    CHECK_FAILS(alloy_array_from_host(dev(), ALLOY_FLOAT32, 9, shape9, buf, &a),
                ALLOY_ERROR_INVALID_ARGUMENT, "ndim");
    CHECK_FAILS(alloy_array_wrap(cpu(), buf, ALLOY_FLOAT32, 9, shape9, NULL, 0, NULL, NULL, &a),
                ALLOY_ERROR_INVALID_ARGUMENT, "ndim");
    CHECK_FAILS(alloy_array_new(dev(), ALLOY_FLOAT32, 3, neg, &a), ALLOY_ERROR_INVALID_ARGUMENT,
                "negative");
    CHECK_FAILS(alloy_array_from_host(dev(), ALLOY_FLOAT32, 3, neg, buf, &a),
                ALLOY_ERROR_INVALID_ARGUMENT, "negative");
    CHECK_FAILS(alloy_array_wrap(cpu(), buf, ALLOY_FLOAT32, 3, neg, NULL, 0, NULL, NULL, &a),
                ALLOY_ERROR_INVALID_ARGUMENT, "negative");
    CHECK_FAILS(alloy_array_new(dev(), ALLOY_FLOAT32, 2, NULL, &a), ALLOY_ERROR_INVALID_ARGUMENT,
                "shape is NULL");
    CHECK_FAILS(alloy_array_new(NULL, ALLOY_FLOAT32, 1, shape9, &a), ALLOY_ERROR_INVALID_ARGUMENT,
                "device");
    CHECK_FAILS(alloy_array_new(dev(), ALLOY_FLOAT32, 1, shape9, NULL), ALLOY_ERROR_INVALID_ARGUMENT,
                "out");
    CHECK_FAILS(alloy_array_new(dev(), (alloy_dtype)77, 1, shape9, &a), ALLOY_ERROR_INVALID_ARGUMENT,
                "dtype");
    CHECK_FAILS(alloy_array_new(dev(), (alloy_dtype)-3, 1, shape9, &a), ALLOY_ERROR_INVALID_ARGUMENT,
                "dtype");
    int64_t four = 4;
    CHECK_FAILS(alloy_array_from_host(dev(), ALLOY_FLOAT32, 1, &four, NULL, &a),
                ALLOY_ERROR_INVALID_ARGUMENT, "NULL");
    CHECK_FAILS(alloy_array_wrap(cpu(), NULL, ALLOY_FLOAT32, 1, &four, NULL, 0, NULL, NULL, &a),
                ALLOY_ERROR_INVALID_ARGUMENT, "NULL");
    int64_t huge[2] = {INT64_MAX / 2, 1000};
    CHECK_FAILS(alloy_array_new(dev(), ALLOY_FLOAT32, 2, huge, &a), ALLOY_ERROR_INVALID_ARGUMENT,
                "too large");
    CHECK(a == NULL);
    alloy_array_free(NULL); /* fine */
    CHECK(alloy_array_retain(NULL) == NULL);
}

/* ---- borrowed memory ------------------------------------------------------- */

static void test_wrap_deleter_runs_once(void) {
    float *buf = malloc(12 * sizeof *buf);
    for (int i = 0; i < 12; i++) buf[i] = (float)i * 0.5f;
    int64_t shape[2] = {3, 4};
    alloy_array *a = NULL;
    deleter_calls = 0;
    deleter_last_user = NULL;
    int token;
    CHECK_OK(alloy_array_wrap(cpu(), buf, ALLOY_FLOAT32, 2, shape, NULL, 0, counting_deleter, &token,
                              &a));
    if (!a) return;
    CHECK(alloy_array_data(a) == buf); /* borrowed: no copy */
    CHECK(alloy_array_is_row_contiguous(a));
    CHECK(alloy_array_strides(a)[0] == 4 && alloy_array_strides(a)[1] == 1);
    CHECK(alloy_array_retain(a) == a);
    CHECK(alloy_array_retain(a) == a);
    alloy_array_free(a);
    alloy_array_free(a);
    CHECK(deleter_calls == 0);
    /* writes through the array land in the caller's memory */
    CHECK_OK(alloy_array_fill(a, 7.0));
    CHECK(buf[0] == 7.0f && buf[11] == 7.0f);
    alloy_array_free(a);
    CHECK(deleter_calls == 1);
    CHECK(deleter_last_user == &token);
    free(buf);

    /* NULL deleter: nothing runs, the memory stays the caller's */
    double d[3] = {1, 2, 3};
    int64_t three = 3;
    CHECK_OK(alloy_array_wrap(cpu(), d, ALLOY_FLOAT64, 1, &three, NULL, 0, NULL, NULL, &a));
    alloy_array_free(a);
    CHECK(d[2] == 3);

    /* a failing wrap never calls the deleter: the caller still owns the memory */
    deleter_calls = 0;
    int64_t neg = -2;
    a = NULL;
    CHECK_FAILS(alloy_array_wrap(cpu(), d, ALLOY_FLOAT64, 1, &neg, NULL, 0, counting_deleter, NULL, &a),
                ALLOY_ERROR_INVALID_ARGUMENT, NULL);
    CHECK_FAILS(alloy_array_wrap(NULL, d, ALLOY_FLOAT64, 1, &three, NULL, 0, counting_deleter, NULL, &a),
                ALLOY_ERROR_INVALID_ARGUMENT, NULL);
    CHECK(a == NULL);
    CHECK(deleter_calls == 0);
}

/* Retain/free from several threads at once: the count never drops to zero
 * early, and the deleter runs once, after the last free. */
static void *retain_free_many(void *arg) {
    alloy_array *a = arg;
    for (int i = 0; i < 20000; i++) {
        alloy_array_retain(a);
        if (i % 7 == 0) alloy_array_retain(a), alloy_array_free(a);
        alloy_array_free(a);
    }
    return NULL;
}

static void test_refcount_across_threads(void) {
    int64_t n = 33;
    float *buf = malloc((size_t)n * sizeof *buf);
    alloy_array *a = NULL;
    deleter_calls = 0;
    CHECK_OK(alloy_array_wrap(cpu(), buf, ALLOY_FLOAT32, 1, &n, NULL, 0, counting_deleter, buf, &a));
    if (!a) {
        free(buf);
        return;
    }
    pthread_t t[4];
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, retain_free_many, a) == 0);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    CHECK(deleter_calls == 0);
    CHECK_OK(alloy_array_fill(a, 2.0)); /* still alive */
    alloy_array_free(a);
    CHECK(deleter_calls == 1);
    CHECK(deleter_last_user == buf);
    free(buf);
}

/* A wrapped strided view (every dtype): its metadata, copy_to_host gathering
 * vs a C loop, contiguous(), fill touching only the view's elements, and
 * copy_from_host scattering into it. */
typedef struct {
    const char *what;
    int ndim;
    int64_t shape[ALLOY_MAX_NDIM];
    int64_t strides[ALLOY_MAX_NDIM];
    int64_t offset;
    int64_t buffer; /* elements in the underlying buffer */
    int contiguous; /* expected is_row_contiguous */
    int overlapping; /* zero strides: elements alias, skip scatter checks */
} view_case;

static const view_case VIEWS[] = {
    {"row-major 3x4", 2, {3, 4}, {4, 1}, 0, 12, 1, 0},
    {"row-major 3x4 at offset 5", 2, {3, 4}, {4, 1}, 5, 20, 1, 0},
    {"every other column", 2, {3, 4}, {10, 2}, 5, 40, 0, 0},
    {"transposed 4x3", 2, {4, 3}, {1, 4}, 0, 12, 0, 0},
    {"reversed rows and columns", 2, {4, 5}, {-5, -1}, 19, 20, 0, 0},
    {"reversed 1-d of 33", 1, {33}, {-1}, 32, 33, 0, 0},
    {"reversed 1-d step 3", 1, {33}, {-3}, 98, 100, 0, 0},
    {"broadcast rows", 2, {3, 4}, {0, 1}, 2, 8, 0, 1},
    {"broadcast columns", 2, {3, 4}, {1, 0}, 0, 3, 0, 1},
    {"3-d mixed", 3, {2, 3, 5}, {-40, 0, 3}, 40, 60, 0, 1},
    {"length-1 axes with odd strides", 4, {1, 3, 1, 4}, {999, 4, -7, 1}, 0, 12, 1, 0},
    {"length-1 inner axis, wrong outer stride", 3, {2, 3, 1}, {4, 1, 5}, 0, 8, 0, 0},
    {"8-d strided", 8, {2, 1, 2, 1, 2, 1, 2, 3}, {96, 1, 48, 7, 24, 1, 12, 2}, 1, 200, 0, 0},
    {"1000 with stride 2", 1, {1000}, {2}, 1, 2001, 0, 0},
    {"0-d at offset 3", 0, {0}, {0}, 3, 4, 1, 0},
    {"33x31 column slice", 2, {33, 7}, {31, -1}, 20, 33 * 31, 0, 0},
};

static void check_view(const view_case *vc, alloy_dtype d) {
    size_t item = size_of(d);
    int64_t n = prod(vc->ndim, vc->shape);
    unsigned char *buf = malloc((size_t)vc->buffer * item);
    unsigned char *orig = malloc((size_t)vc->buffer * item);
    unsigned char *got = malloc((size_t)n * item + 8), *want = malloc((size_t)n * item + 8);
    random_bytes(buf, (size_t)vc->buffer * item);
    memcpy(orig, buf, (size_t)vc->buffer * item);
    alloy_array *a = NULL;
    deleter_calls = 0;
    CHECK_OK(alloy_array_wrap(cpu(), buf, d, vc->ndim, vc->shape, vc->strides, vc->offset,
                              counting_deleter, NULL, &a));
    if (!a) goto out;
    CHECK(alloy_array_offset(a) == vc->offset);
    CHECK(alloy_array_size(a) == n);
    CHECK(alloy_array_data(a) == buf + vc->offset * (int64_t)item);
    for (int i = 0; i < vc->ndim; i++) CHECK(alloy_array_strides(a)[i] == vc->strides[i]);
    CHECK_MSG(alloy_array_is_row_contiguous(a) == vc->contiguous, "%s: is_row_contiguous %d",
              vc->what, alloy_array_is_row_contiguous(a));

    /* gather */
    for (int64_t k = 0; k < n; k++)
        memcpy(want + k * item,
               buf + (vc->offset + view_offset(vc->ndim, vc->shape, vc->strides, k)) * (int64_t)item,
               item);
    memset(got, 0, (size_t)n * item);
    CHECK_OK(alloy_array_copy_to_host(a, got, (size_t)n * item));
    CHECK_MSG(memcmp(got, want, (size_t)n * item) == 0, "%s (%s): gather differs", vc->what,
              alloy_dtype_name(d));

    /* contiguous copy: same contents, row-major, its own memory */
    alloy_array *c = NULL;
    CHECK_OK(alloy_array_contiguous(a, &c));
    if (c) {
        int64_t rs[ALLOY_MAX_NDIM];
        ref_row_major(vc->ndim, vc->shape, rs);
        CHECK(alloy_array_is_row_contiguous(c));
        CHECK(alloy_array_offset(c) == 0);
        CHECK(alloy_array_ndim(c) == vc->ndim);
        CHECK(alloy_array_dtype(c) == d);
        for (int i = 0; i < vc->ndim; i++) {
            CHECK(alloy_array_shape(c)[i] == vc->shape[i]);
            CHECK(alloy_array_strides(c)[i] == rs[i]);
        }
        CHECK(alloy_array_data(c) != alloy_array_data(a));
        memset(got, 0, (size_t)n * item);
        CHECK_OK(alloy_array_copy_to_host(c, got, (size_t)n * item));
        CHECK_MSG(memcmp(got, want, (size_t)n * item) == 0, "%s: contiguous() differs", vc->what);
        /* it is a copy: changing the view does not change it */
        CHECK_OK(alloy_array_fill(a, 1.0));
        CHECK_OK(alloy_array_copy_to_host(c, got, (size_t)n * item));
        CHECK(memcmp(got, want, (size_t)n * item) == 0);
        alloy_array_free(c);
    }

    /* fill: every view element converted, everything else untouched */
    double values[64];
    int nv = values_for(d, values);
    for (int vi = 0; vi < nv; vi += 2) {
        memcpy(buf, orig, (size_t)vc->buffer * item);
        CHECK_OK(alloy_array_fill(a, values[vi]));
        unsigned char one[8];
        ref_convert(d, values[vi], one);
        unsigned char *expect = malloc((size_t)vc->buffer * item);
        memcpy(expect, orig, (size_t)vc->buffer * item);
        for (int64_t k = 0; k < n; k++)
            memcpy(expect + (vc->offset + view_offset(vc->ndim, vc->shape, vc->strides, k)) *
                                (int64_t)item,
                   one, item);
        int bad = 0;
        for (int64_t e = 0; e < vc->buffer && !bad; e++)
            if (!same_element(d, buf + e * (int64_t)item, expect + e * (int64_t)item)) bad = 1;
        CHECK_MSG(!bad, "%s (%s): fill(%.17g) wrong or touched a gap", vc->what,
                  alloy_dtype_name(d), values[vi]);
        free(expect);
    }

    /* scatter: row-major source lands on the view's elements only */
    if (!vc->overlapping) {
        memcpy(buf, orig, (size_t)vc->buffer * item);
        unsigned char *src = malloc((size_t)n * item + 1);
        random_bytes(src, (size_t)n * item);
        CHECK_OK(alloy_array_copy_from_host(a, src, (size_t)n * item));
        unsigned char *expect = malloc((size_t)vc->buffer * item);
        memcpy(expect, orig, (size_t)vc->buffer * item);
        for (int64_t k = 0; k < n; k++)
            memcpy(expect + (vc->offset + view_offset(vc->ndim, vc->shape, vc->strides, k)) *
                                (int64_t)item,
                   src + k * (int64_t)item, item);
        CHECK_MSG(memcmp(buf, expect, (size_t)vc->buffer * item) == 0, "%s (%s): scatter differs",
                  vc->what, alloy_dtype_name(d));
        free(src);
        free(expect);
    }
    alloy_array_free(a);
    CHECK(deleter_calls == 1);
out:
    free(buf);
    free(orig);
    free(got);
    free(want);
}

static void test_strided_views(void) {
    for (size_t v = 0; v < sizeof VIEWS / sizeof VIEWS[0]; v++)
        for (int d = 0; d < ALLOY_DTYPE_COUNT; d++) check_view(&VIEWS[v], (alloy_dtype)d);
}

/* is_row_contiguous against an independent rule: the strides of the axes
 * longer than 1 must be those of a compact row-major layout; any array with a
 * zero-length axis is contiguous. Random shapes and strides. */
static int ref_row_contiguous(int ndim, const int64_t *shape, const int64_t *strides) {
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) return 1;
    int64_t expect = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        if (shape[i] == 1) continue;
        if (strides[i] != expect) return 0;
        expect *= shape[i];
    }
    return 1;
}

static void test_row_contiguity_rules(void) {
    float dummy[4];
    for (int trial = 0; trial < 3000; trial++) {
        int nd = (int)(harness_rand_u64() % (ALLOY_MAX_NDIM + 1));
        int64_t shape[ALLOY_MAX_NDIM], strides[ALLOY_MAX_NDIM], rs[ALLOY_MAX_NDIM];
        for (int i = 0; i < nd; i++) {
            uint64_t r = harness_rand_u64() % 10;
            shape[i] = r < 4 ? 1 : r < 5 ? 0 : (int64_t)(harness_rand_u64() % 4) + 2;
        }
        ref_row_major(nd, shape, rs);
        for (int i = 0; i < nd; i++) {
            uint64_t r = harness_rand_u64() % 8;
            strides[i] = r < 5 ? rs[i] : r < 6 ? 0 : r < 7 ? -rs[i] : rs[i] + 1;
        }
        alloy_array *a = NULL;
        /* the view is never dereferenced: only metadata is inspected */
        CHECK_OK(alloy_array_wrap(cpu(), dummy, ALLOY_FLOAT32, nd, shape, strides, 0, NULL, NULL, &a));
        if (!a) continue;
        CHECK_MSG(alloy_array_is_row_contiguous(a) == ref_row_contiguous(nd, shape, strides),
                  "trial %d: ndim %d, got %d", trial, nd, alloy_array_is_row_contiguous(a));
        alloy_array_free(a);
    }
    /* explicit cases */
    static const struct { int nd; int64_t shape[3], strides[3]; int want; } C[] = {
        {1, {5}, {1}, 1},          {1, {5}, {2}, 0},           {1, {1}, {42}, 1},
        {1, {5}, {0}, 0},          {1, {5}, {-1}, 0},          {2, {3, 1}, {1, 0}, 1},
        {2, {1, 3}, {0, 1}, 1},    {2, {3, 4}, {4, 1}, 1},     {2, {3, 4}, {5, 1}, 0},
        {2, {0, 3}, {1, 7}, 1},    {2, {3, 0}, {7, 1}, 1},     {3, {2, 1, 3}, {3, -9, 1}, 1},
        {0, {0}, {0}, 1},          {2, {1, 1}, {-4, 9}, 1},
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        alloy_array *a = NULL;
        CHECK_OK(alloy_array_wrap(cpu(), dummy, ALLOY_INT8, C[i].nd, C[i].shape, C[i].strides, 0, NULL,
                                  NULL, &a));
        if (!a) continue;
        CHECK_MSG(alloy_array_is_row_contiguous(a) == C[i].want, "case %zu", i);
        alloy_array_free(a);
    }
}

/* ---- fills on owned arrays ------------------------------------------------- */

static void test_fill_every_dtype(void) {
    int64_t shapes[3][2] = {{1, 1}, {33, 1}, {7, 143}};
    double values[64];
    for (int d = 0; d < ALLOY_DTYPE_COUNT; d++) {
        size_t item = size_of((alloy_dtype)d);
        int nv = values_for((alloy_dtype)d, values);
        for (int s = 0; s < 3; s++) {
            alloy_array *a = NULL;
            CHECK_OK(alloy_array_new(dev(), (alloy_dtype)d, 2, shapes[s], &a));
            if (!a) continue;
            int64_t n = alloy_array_size(a);
            unsigned char *got = malloc((size_t)n * item);
            for (int vi = 0; vi < nv; vi++) {
                CHECK_OK(alloy_array_fill(a, values[vi]));
                CHECK_OK(alloy_array_copy_to_host(a, got, (size_t)n * item));
                unsigned char want[8];
                ref_convert((alloy_dtype)d, values[vi], want);
                int bad = -1;
                for (int64_t k = 0; k < n && bad < 0; k++)
                    if (!same_element((alloy_dtype)d, got + k * (int64_t)item, want)) bad = (int)k;
                CHECK_MSG(bad < 0, "fill %s with %.17g: element %d wrong",
                          alloy_dtype_name((alloy_dtype)d), values[vi], bad);
            }
            free(got);
            alloy_array_free(a);
        }
    }
}

/* Random doubles over the whole range of each format, rounded by fill and by
 * the reference: same bits. */
static void test_fill_half_bfloat_rounding_random(void) {
    for (int which = 0; which < 2; which++) {
        alloy_dtype d = which ? ALLOY_BFLOAT16 : ALLOY_FLOAT16;
        double lo = which ? -140 : -27, hi = which ? 129 : 17;
        alloy_array *a = NULL;
        CHECK_OK(alloy_array_new(dev(), d, 0, NULL, &a));
        if (!a) return;
        int bad = 0;
        for (int i = 0; i < 4000 && bad < 5; i++) {
            double v = ldexp(1 + harness_uniform(0, 1), (int)floor(harness_uniform(lo, hi)));
            if (i % 3 == 0) v = -v;
            if (i % 5 == 0) { /* exact ties and near-ties of the target format */
                int e = (int)floor(harness_uniform(lo + 20, hi - 2));
                int mb = which ? 7 : 10;
                double ulp = ldexp(1, e - mb);
                v = ldexp(1, e) + ulp * (double)(harness_rand_u64() % 64) + ulp / 2;
                if (i % 10 == 0) v += ulp * ldexp(1, -30) * (i % 20 == 0 ? 1 : -1);
            }
            uint16_t got = 0;
            CHECK_OK(alloy_array_fill(a, v));
            CHECK_OK(alloy_array_copy_to_host(a, &got, 2));
            uint16_t want = which ? ref_bf16(v) : ref_half(v);
            if (got != want) {
                bad++;
                CHECK_MSG(got == want, "%s(%.17g): got 0x%04x want 0x%04x", alloy_dtype_name(d), v,
                          got, want);
            }
        }
        alloy_array_free(a);
    }
}

/* ---- bad arguments to copies and fills ------------------------------------- */

static void test_copy_bad_arguments(void) {
    int64_t shape[2] = {5, 7};
    alloy_array *a = NULL;
    CHECK_OK(alloy_array_new(dev(), ALLOY_FLOAT32, 2, shape, &a));
    if (!a) return;
    float host[35];
    CHECK_FAILS(alloy_array_copy_to_host(a, host, sizeof host - 1), ALLOY_ERROR_INVALID_ARGUMENT,
                "139");
    CHECK_FAILS(alloy_array_copy_to_host(a, host, 0), ALLOY_ERROR_INVALID_ARGUMENT, "140");
    CHECK_FAILS(alloy_array_copy_to_host(a, NULL, sizeof host), ALLOY_ERROR_INVALID_ARGUMENT, "NULL");
    CHECK_FAILS(alloy_array_copy_to_host(NULL, host, sizeof host), ALLOY_ERROR_INVALID_ARGUMENT,
                "NULL");
    CHECK_FAILS(alloy_array_copy_from_host(a, host, 4), ALLOY_ERROR_INVALID_ARGUMENT, "140");
    CHECK_FAILS(alloy_array_copy_from_host(a, NULL, sizeof host), ALLOY_ERROR_INVALID_ARGUMENT,
                "NULL");
    CHECK_FAILS(alloy_array_copy_from_host(NULL, host, sizeof host), ALLOY_ERROR_INVALID_ARGUMENT,
                "NULL");
    CHECK_FAILS(alloy_array_fill(NULL, 1.0), ALLOY_ERROR_INVALID_ARGUMENT, "NULL");
    alloy_array *c = NULL;
    CHECK_FAILS(alloy_array_contiguous(a, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "NULL");
    CHECK_FAILS(alloy_array_contiguous(NULL, &c), ALLOY_ERROR_INVALID_ARGUMENT, "NULL");
    CHECK(c == NULL);
    /* a larger buffer than needed is fine; the tail is untouched */
    float big[40];
    for (int i = 0; i < 40; i++) big[i] = -1;
    CHECK_OK(alloy_array_fill(a, 2.5));
    CHECK_OK(alloy_array_copy_to_host(a, big, sizeof big));
    CHECK(big[34] == 2.5f && big[35] == -1 && big[39] == -1);
    alloy_array_free(a);
}

int main(void) {
    harness_seed();
    RUN(test_new_every_dtype_and_rank);
    RUN(test_zero_size);
    RUN(test_scalar_every_dtype);
    RUN(test_rank_limits_and_bad_shapes);
    RUN(test_wrap_deleter_runs_once);
    RUN(test_refcount_across_threads);
    RUN(test_strided_views);
    RUN(test_row_contiguity_rules);
    RUN(test_fill_every_dtype);
    RUN(test_fill_half_bfloat_rounding_random);
    RUN(test_copy_bad_arguments);
    return harness_finish();
}
