/* test_core_dlpack.c — DLPack interchange through the public API.
 *
 * Export (versioned and legacy): every field of the tensor against values
 * written here (version, device, dtype code/bits/lanes, shape, strides, data
 * at element [0..0], byte_offset 0, flags), and the tensor keeping the array
 * alive after the caller frees it. Import of tensors built by hand: byte
 * offsets, NULL and custom strides, the read-only flag (refused as a kernel
 * output), the tensor's deleter running exactly once, and every refusal
 * (device, lanes, dtype, rank, misaligned byte_offset, major version) leaving
 * the tensor with the caller, its deleter not called. Round trips share
 * memory. Run under ASan to catch use-after-free in the ownership rules. */
#include "harness.h"

static alloy_device *cpu(void) {
    static alloy_device *d;
    if (!d && alloy_device_get("cpu", &d) != ALLOY_OK) {
        fprintf(stderr, "no cpu device: %s\n", alloy_last_error());
        exit(2);
    }
    return d;
}

/* The DLPack encoding of each alloy dtype, per the DLPack spec. */
static const struct { alloy_dtype dtype; uint8_t code, bits; size_t size; } DL[] = {
    {ALLOY_BOOL, 6 /* kDLBool */, 8, 1},   {ALLOY_INT8, 0, 8, 1},     {ALLOY_UINT8, 1, 8, 1},
    {ALLOY_INT16, 0, 16, 2},               {ALLOY_UINT16, 1, 16, 2},  {ALLOY_INT32, 0, 32, 4},
    {ALLOY_UINT32, 1, 32, 4},              {ALLOY_INT64, 0, 64, 8},   {ALLOY_UINT64, 1, 64, 8},
    {ALLOY_FLOAT16, 2, 16, 2},             {ALLOY_BFLOAT16, 4, 16, 2}, {ALLOY_FLOAT32, 2, 32, 4},
    {ALLOY_FLOAT64, 2, 64, 8},
};

static int array_deleter_calls;
static void array_deleter(void *user) {
    (void)user;
    array_deleter_calls++;
}

/* ---- export ------------------------------------------------------------------ */

static void check_tensor_fields(const DLTensor *t, alloy_array *a, int k) {
    CHECK(t->device.device_type == kDLCPU);
    CHECK(t->device.device_id == 0);
    CHECK(t->dtype.code == DL[k].code);
    CHECK(t->dtype.bits == DL[k].bits);
    CHECK(t->dtype.lanes == 1);
    CHECK(t->ndim == alloy_array_ndim(a));
    CHECK(t->byte_offset == 0);
    CHECK_MSG(t->data == alloy_array_data(a), "data %p, element [0..0] at %p", t->data,
              alloy_array_data(a));
    for (int i = 0; i < t->ndim; i++) {
        CHECK(t->shape && t->shape[i] == alloy_array_shape(a)[i]);
        CHECK(t->strides && t->strides[i] == alloy_array_strides(a)[i]);
    }
}

static void test_export_fields_every_dtype(void) {
    int64_t shape[3] = {2, 3, 5};
    for (int k = 0; k < (int)(sizeof DL / sizeof DL[0]); k++) {
        alloy_array *a = NULL;
        CHECK_OK(alloy_array_new(cpu(), DL[k].dtype, 3, shape, &a));
        if (!a) continue;
        DLManagedTensorVersioned *v = NULL;
        DLManagedTensor *l = NULL;
        CHECK_OK(alloy_array_to_dlpack(a, &v));
        CHECK_OK(alloy_array_to_dlpack_legacy(a, &l));
        if (v) {
            CHECK(v->version.major == 1);
            CHECK(v->version.major == DLPACK_MAJOR_VERSION);
            CHECK(v->version.minor == DLPACK_MINOR_VERSION);
            CHECK(v->flags == 0);
            CHECK(v->deleter != NULL);
            check_tensor_fields(&v->dl_tensor, a, k);
            CHECK(v->dl_tensor.strides[0] == 15 && v->dl_tensor.strides[1] == 5 &&
                  v->dl_tensor.strides[2] == 1);
        }
        if (l) {
            CHECK(l->deleter != NULL);
            check_tensor_fields(&l->dl_tensor, a, k);
        }
        alloy_array_free(a); /* the tensors still hold it */
        if (v) {
            memset(v->dl_tensor.data, 0x5a, 30 * DL[k].size); /* still valid memory */
            v->deleter(v);
        }
        if (l) {
            unsigned char *p = l->dl_tensor.data;
            CHECK(p[0] == 0x5a && p[30 * DL[k].size - 1] == 0x5a);
            l->deleter(l);
        }
    }
}

/* A strided view with an offset exports data = element [0..0] and its
 * element strides; the borrowed memory outlives the caller's reference. */
static void test_export_strided_view_lifetime(void) {
    double *buf = malloc(60 * sizeof *buf);
    for (int i = 0; i < 60; i++) buf[i] = i;
    int64_t shape[2] = {4, 5}, strides[2] = {-10, 2};
    alloy_array *a = NULL;
    array_deleter_calls = 0;
    CHECK_OK(alloy_array_wrap(cpu(), buf, ALLOY_FLOAT64, 2, shape, strides, 35, array_deleter, NULL, &a));
    if (!a) return;
    DLManagedTensorVersioned *v = NULL;
    DLManagedTensor *l = NULL;
    CHECK_OK(alloy_array_to_dlpack(a, &v));
    CHECK_OK(alloy_array_to_dlpack_legacy(a, &l));
    alloy_array_free(a);
    CHECK(array_deleter_calls == 0);
    if (v) {
        CHECK(v->dl_tensor.data == buf + 35);
        CHECK(v->dl_tensor.byte_offset == 0);
        CHECK(v->dl_tensor.ndim == 2);
        CHECK(v->dl_tensor.shape[0] == 4 && v->dl_tensor.shape[1] == 5);
        CHECK(v->dl_tensor.strides[0] == -10 && v->dl_tensor.strides[1] == 2);
        /* element [3][4] through the tensor's description */
        const double *d = v->dl_tensor.data;
        CHECK(d[3 * v->dl_tensor.strides[0] + 4 * v->dl_tensor.strides[1]] == 35 - 30 + 8);
        v->deleter(v);
    }
    CHECK(array_deleter_calls == 0); /* the legacy tensor still holds the array */
    if (l) {
        CHECK(l->dl_tensor.data == buf + 35);
        CHECK(l->dl_tensor.strides[0] == -10 && l->dl_tensor.strides[1] == 2);
        l->deleter(l);
    }
    CHECK(array_deleter_calls == 1);
    free(buf);
}

static void test_export_scalar_and_empty(void) {
    alloy_array *s = NULL;
    CHECK_OK(alloy_array_scalar(cpu(), ALLOY_INT32, -17, &s));
    DLManagedTensorVersioned *v = NULL;
    if (s) CHECK_OK(alloy_array_to_dlpack(s, &v));
    alloy_array_free(s);
    if (v) {
        CHECK(v->dl_tensor.ndim == 0);
        CHECK(v->dl_tensor.data && *(int32_t *)v->dl_tensor.data == -17);
        v->deleter(v);
    }
    int64_t shape[2] = {3, 0};
    alloy_array *e = NULL;
    CHECK_OK(alloy_array_new(cpu(), ALLOY_FLOAT32, 2, shape, &e));
    DLManagedTensor *l = NULL;
    if (e) CHECK_OK(alloy_array_to_dlpack_legacy(e, &l));
    alloy_array_free(e);
    if (l) {
        CHECK(l->dl_tensor.ndim == 2);
        CHECK(l->dl_tensor.shape[0] == 3 && l->dl_tensor.shape[1] == 0);
        l->deleter(l);
    }
    DLManagedTensorVersioned *vv = NULL;
    CHECK_FAILS(alloy_array_to_dlpack(NULL, &vv), ALLOY_ERROR_INVALID_ARGUMENT, "NULL");
    CHECK_FAILS(alloy_array_to_dlpack_legacy(NULL, &l), ALLOY_ERROR_INVALID_ARGUMENT, "NULL");
}

/* ---- import of hand-built tensors ------------------------------------------- */

typedef struct {
    DLManagedTensorVersioned v;
    DLManagedTensor l;
    int64_t shape[10], strides[10];
    void *data;
    int deleted;
} hand_tensor;

static void hand_delete_versioned(DLManagedTensorVersioned *t) {
    hand_tensor *h = t->manager_ctx;
    h->deleted++;
    free(h->data);
    h->data = NULL;
}

static void hand_delete_legacy(DLManagedTensor *t) {
    hand_tensor *h = t->manager_ctx;
    h->deleted++;
    free(h->data);
    h->data = NULL;
}

/* Data of `elems` float32 values i * 0.5, shape/strides as given (strides may
 * be NULL), byte_offset in bytes. */
static void hand_init(hand_tensor *h, int ndim, const int64_t *shape, const int64_t *strides,
                      uint64_t byte_offset, size_t elems) {
    memset(h, 0, sizeof *h);
    h->data = malloc(elems * sizeof(float));
    for (size_t i = 0; i < elems; i++) ((float *)h->data)[i] = (float)i * 0.5f;
    for (int i = 0; i < ndim && i < 10; i++) {
        h->shape[i] = shape[i];
        if (strides) h->strides[i] = strides[i];
    }
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = h->data;
    t.device.device_type = kDLCPU;
    t.device.device_id = 0;
    t.ndim = ndim;
    t.dtype.code = kDLFloat;
    t.dtype.bits = 32;
    t.dtype.lanes = 1;
    t.shape = h->shape;
    t.strides = strides ? h->strides : NULL;
    t.byte_offset = byte_offset;
    h->v.version.major = 1;
    h->v.version.minor = 0;
    h->v.manager_ctx = h;
    h->v.deleter = hand_delete_versioned;
    h->v.flags = 0;
    h->v.dl_tensor = t;
    h->l.dl_tensor = t;
    h->l.manager_ctx = h;
    h->l.deleter = hand_delete_legacy;
}

static void check_import_contents(alloy_array *a, const float *base, uint64_t byte_offset, int ndim,
                                  const int64_t *shape, const int64_t *strides) {
    int64_t rs[ALLOY_MAX_NDIM], n = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        rs[i] = n;
        n *= shape[i];
    }
    const int64_t *st = strides ? strides : rs;
    CHECK(alloy_array_dtype(a) == ALLOY_FLOAT32);
    CHECK(alloy_array_ndim(a) == ndim);
    CHECK(alloy_array_device(a) == cpu());
    CHECK(alloy_array_data(a) == (const char *)base + byte_offset);
    for (int i = 0; i < ndim; i++) {
        CHECK(alloy_array_shape(a)[i] == shape[i]);
        CHECK(alloy_array_strides(a)[i] == st[i]);
    }
    float *got = malloc((size_t)n * sizeof *got + 1);
    CHECK_OK(alloy_array_copy_to_host(a, got, (size_t)n * sizeof *got));
    const float *e0 = (const float *)((const char *)base + byte_offset);
    int bad = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t off = 0, r = k;
        for (int i = ndim - 1; i >= 0; i--) {
            off += (r % shape[i]) * st[i];
            r /= shape[i];
        }
        if (got[k] != e0[off]) bad++;
    }
    CHECK_MSG(bad == 0, "%d elements differ", bad);
    free(got);
}

static void test_import_versioned_layouts(void) {
    static const struct {
        int ndim;
        int64_t shape[3], strides[3];
        int has_strides;
        uint64_t byte_offset;
        size_t elems;
    } C[] = {
        {1, {33}, {0}, 0, 0, 33},
        {2, {3, 4}, {0}, 0, 12, 15},            /* byte_offset 12 = 3 floats */
        {2, {4, 3}, {1, 4}, 1, 0, 12},          /* transposed */
        {2, {3, 4}, {-8, 2}, 1, 64, 40},        /* reversed rows, every other column */
        {3, {2, 1, 3}, {3, 77, 1}, 1, 4, 7},    /* length-1 axis with a stray stride */
        {0, {0}, {0}, 0, 8, 3},                 /* 0-d at byte 8 */
        {2, {1000, 1}, {1, 5}, 1, 0, 1000},
    };
    for (size_t c = 0; c < sizeof C / sizeof C[0]; c++) {
        hand_tensor *h = malloc(sizeof *h);
        hand_init(h, C[c].ndim, C[c].shape, C[c].has_strides ? C[c].strides : NULL, C[c].byte_offset,
                  C[c].elems);
        float *base = h->data;
        alloy_array *a = NULL;
        CHECK_OK(alloy_array_from_dlpack(&h->v, &a));
        if (a) {
            check_import_contents(a, base, C[c].byte_offset, C[c].ndim, C[c].shape,
                                  C[c].has_strides ? C[c].strides : NULL);
            /* the deleter runs exactly once, when the last reference goes */
            alloy_array_retain(a);
            alloy_array_free(a);
            CHECK(h->deleted == 0);
            alloy_array_free(a);
            CHECK_MSG(h->deleted == 1, "case %zu: deleter ran %d times", c, h->deleted);
        } else {
            h->v.deleter(&h->v);
        }
        free(h);
    }
}

static void test_import_legacy(void) {
    int64_t shape[2] = {5, 7}, strides[2] = {1, 5};
    hand_tensor *h = malloc(sizeof *h);
    hand_init(h, 2, shape, strides, 0, 35);
    float *base = h->data;
    alloy_array *a = NULL;
    CHECK_OK(alloy_array_from_dlpack_legacy(&h->l, &a));
    if (a) {
        check_import_contents(a, base, 0, 2, shape, strides);
        CHECK(h->deleted == 0);
        alloy_array_free(a);
        CHECK(h->deleted == 1);
    }
    free(h);

    /* writable: a legacy tensor has no read-only flag, so a compact one is a
     * valid caller-provided output */
    h = malloc(sizeof *h);
    hand_init(h, 2, shape, NULL, 0, 35);
    a = NULL;
    CHECK_OK(alloy_array_from_dlpack_legacy(&h->l, &a));
    if (a) {
        alloy_launch *launch = NULL;
        CHECK_OK(alloy_launch_new(&launch));
        if (launch) CHECK_OK(alloy_launch_add_output_array(launch, a));
        alloy_launch_free(launch);
        alloy_array_free(a);
        CHECK(h->deleted == 1);
    }
    free(h);
}

static void test_import_read_only(void) {
    int64_t shape[2] = {4, 6};
    hand_tensor *h = malloc(sizeof *h);
    hand_init(h, 2, shape, NULL, 0, 24);
    h->v.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    alloy_array *a = NULL;
    CHECK_OK(alloy_array_from_dlpack(&h->v, &a));
    if (a) {
        CHECK(alloy_array_is_row_contiguous(a));
        alloy_launch *launch = NULL;
        CHECK_OK(alloy_launch_new(&launch));
        if (launch) {
            CHECK_FAILS(alloy_launch_add_output_array(launch, a), ALLOY_ERROR_INVALID_ARGUMENT,
                        "read-only");
            alloy_launch_free(launch);
        }
        /* re-exported, it stays read-only */
        DLManagedTensorVersioned *v = NULL;
        CHECK_OK(alloy_array_to_dlpack(a, &v));
        if (v) {
            CHECK(v->flags & DLPACK_FLAG_BITMASK_READ_ONLY);
            CHECK(v->dl_tensor.data == h->data);
        }
        alloy_array_free(a);
        CHECK(h->deleted == 0); /* the export holds it */
        if (v) v->deleter(v);
        CHECK(h->deleted == 1);
    }
    free(h);

    /* without the flag, the same tensor is accepted as an output */
    h = malloc(sizeof *h);
    hand_init(h, 2, shape, NULL, 0, 24);
    a = NULL;
    CHECK_OK(alloy_array_from_dlpack(&h->v, &a));
    if (a) {
        alloy_launch *launch = NULL;
        CHECK_OK(alloy_launch_new(&launch));
        if (launch) CHECK_OK(alloy_launch_add_output_array(launch, a));
        alloy_array_free(a); /* the launch still holds a reference */
        CHECK(h->deleted == 0);
        alloy_launch_free(launch);
        CHECK(h->deleted == 1);
    }
    free(h);
}

/* Each malformed tensor is refused with a message naming the problem; the
 * caller still owns it (deleter not called, out untouched). */
static void test_import_errors(void) {
    int64_t shape9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 2};
    int64_t shape2[2] = {3, 4};
    enum { METAL, VULKAN, LANES, COMPLEX, FLOAT8, INT128, OPAQUE, NDIM9, NDIM_NEG, OFFSET, OFFSET_ODD,
           MAJOR2, MAJOR0, NEG_SHAPE, NULL_DATA, N_CASES };
    static const char *const needles[N_CASES] = {
        "device type 8", "device type 7", "lanes", "code 5", "8 bits", "128 bits", "code 3",
        "9 dimensions", "-1 dimensions", "byte_offset 6", "byte_offset 1", "major version 2",
        "major version 0", "negative", "NULL"};
    for (int legacy = 0; legacy < 2; legacy++)
        for (int c = 0; c < N_CASES; c++) {
            if (legacy && (c == MAJOR2 || c == MAJOR0)) continue;
            hand_tensor *h = malloc(sizeof *h);
            hand_init(h, c == NDIM9 ? 9 : 2, c == NDIM9 ? shape9 : shape2, NULL, 0, 24);
            DLTensor *t = legacy ? &h->l.dl_tensor : &h->v.dl_tensor;
            alloy_status want = ALLOY_ERROR_UNSUPPORTED;
            switch (c) {
            case METAL: t->device.device_type = kDLMetal; break;
            case VULKAN: t->device.device_type = kDLVulkan; break;
            case LANES: t->dtype.lanes = 4; break;
            case COMPLEX: t->dtype.code = kDLComplex; t->dtype.bits = 64; break;
            case FLOAT8: t->dtype.code = kDLFloat; t->dtype.bits = 8; break;
            case INT128: t->dtype.code = kDLInt; t->dtype.bits = 128; break;
            case OPAQUE: t->dtype.code = kDLOpaqueHandle; t->dtype.bits = 64; break;
            case NDIM9: break;
            case NDIM_NEG: t->ndim = -1; break;
            case OFFSET: t->byte_offset = 6; break;
            case OFFSET_ODD: t->byte_offset = 1; break;
            case MAJOR2: h->v.version.major = 2; break;
            case MAJOR0: h->v.version.major = 0; break;
            case NEG_SHAPE: h->shape[1] = -4; want = ALLOY_ERROR_INVALID_ARGUMENT; break;
            case NULL_DATA: t->data = NULL; want = ALLOY_ERROR_INVALID_ARGUMENT; break;
            }
            alloy_array *a = NULL;
            alloy_clear_error();
            alloy_status st = legacy ? alloy_array_from_dlpack_legacy(&h->l, &a)
                                     : alloy_array_from_dlpack(&h->v, &a);
            CHECK_MSG(st == want, "%s case %d: %s: %s", legacy ? "legacy" : "versioned", c,
                      alloy_status_name(st), alloy_last_error());
            CHECK_MSG(strstr(alloy_last_error(), needles[c]) != NULL,
                      "%s case %d: message lacks '%s': %s", legacy ? "legacy" : "versioned", c,
                      needles[c], alloy_last_error());
            CHECK(a == NULL);
            CHECK_MSG(h->deleted == 0, "case %d: deleter ran on failure", c);
            if (a) alloy_array_free(a);
            else if (legacy) h->l.deleter(&h->l); /* still ours */
            else h->v.deleter(&h->v);
            CHECK(h->deleted == 1);
            free(h);
        }
    alloy_array *a = NULL;
    CHECK_FAILS(alloy_array_from_dlpack(NULL, &a), ALLOY_ERROR_INVALID_ARGUMENT, "NULL");
    CHECK_FAILS(alloy_array_from_dlpack_legacy(NULL, &a), ALLOY_ERROR_INVALID_ARGUMENT, "NULL");
    hand_tensor *h = malloc(sizeof *h);
    hand_init(h, 2, shape2, NULL, 0, 12);
    CHECK_FAILS(alloy_array_from_dlpack(&h->v, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "NULL");
    CHECK(h->deleted == 0);
    h->v.deleter(&h->v);
    free(h);
}

/* CUDA memory on a build or machine without CUDA: refused, deleter not run. */
static void test_import_cuda_without_cuda(void) {
    alloy_device *d = NULL;
    if (alloy_device_get("cuda", &d) == ALLOY_OK) {
        SKIP("CUDA is available here");
        return;
    }
    int64_t shape[1] = {4};
    hand_tensor *h = malloc(sizeof *h);
    hand_init(h, 1, shape, NULL, 0, 4);
    h->v.dl_tensor.device.device_type = kDLCUDA;
    alloy_array *a = NULL;
    CHECK_FAILS(alloy_array_from_dlpack(&h->v, &a), ALLOY_ERROR_UNAVAILABLE, "cuda");
    CHECK(h->deleted == 0);
    h->v.deleter(&h->v);
    free(h);
}

/* Other DLPack encodings alloy accepts: CUDA host memory is CPU-readable, and
 * every alloy dtype's own code/bits. */
static void test_import_dtypes_and_cuda_host(void) {
    for (int k = 0; k < (int)(sizeof DL / sizeof DL[0]); k++) {
        int64_t shape[1] = {3};
        hand_tensor *h = malloc(sizeof *h);
        hand_init(h, 1, shape, NULL, 0, 6);
        h->v.dl_tensor.dtype.code = DL[k].code;
        h->v.dl_tensor.dtype.bits = DL[k].bits;
        if (k % 2) h->v.dl_tensor.device.device_type = kDLCUDAHost;
        alloy_array *a = NULL;
        CHECK_OK(alloy_array_from_dlpack(&h->v, &a));
        if (a) {
            CHECK_MSG(alloy_array_dtype(a) == DL[k].dtype, "code %u bits %u -> %s", DL[k].code,
                      DL[k].bits, alloy_dtype_name(alloy_array_dtype(a)));
            CHECK(alloy_array_device(a) == cpu());
            CHECK(alloy_array_data(a) == h->data);
            alloy_array_free(a);
        }
        CHECK(h->deleted == 1);
        free(h);
    }
}

/* ---- round trips ---------------------------------------------------------------- */

static void test_round_trip_shares_memory(void) {
    for (int legacy = 0; legacy < 2; legacy++) {
        int64_t shape[2] = {33, 3};
        float *host = malloc(99 * sizeof *host);
        for (int i = 0; i < 99; i++) host[i] = (float)i - 50;
        alloy_array *a = NULL;
        CHECK_OK(alloy_array_from_host(cpu(), ALLOY_FLOAT32, 2, shape, host, &a));
        if (!a) {
            free(host);
            continue;
        }
        alloy_array *b = NULL;
        if (legacy) {
            DLManagedTensor *t = NULL;
            CHECK_OK(alloy_array_to_dlpack_legacy(a, &t));
            if (t && alloy_array_from_dlpack_legacy(t, &b) != ALLOY_OK) t->deleter(t);
        } else {
            DLManagedTensorVersioned *t = NULL;
            CHECK_OK(alloy_array_to_dlpack(a, &t));
            if (t && alloy_array_from_dlpack(t, &b) != ALLOY_OK) t->deleter(t);
        }
        CHECK(b != NULL);
        if (b) {
            CHECK(alloy_array_data(b) == alloy_array_data(a)); /* no copy */
            CHECK(alloy_array_dtype(b) == ALLOY_FLOAT32);
            CHECK(alloy_array_ndim(b) == 2 && alloy_array_shape(b)[0] == 33 &&
                  alloy_array_shape(b)[1] == 3);
            CHECK(alloy_array_is_row_contiguous(b));
            /* a write through one is seen through the other */
            CHECK_OK(alloy_array_fill(b, 4.25));
            float got[99];
            CHECK_OK(alloy_array_copy_to_host(a, got, sizeof got));
            CHECK(got[0] == 4.25f && got[98] == 4.25f);
            /* the original reference can go first: b keeps the memory alive */
            alloy_array_free(a);
            a = NULL;
            host[7] = 123;
            CHECK_OK(alloy_array_copy_from_host(b, host, 99 * sizeof *host));
            CHECK_OK(alloy_array_copy_to_host(b, got, sizeof got));
            CHECK(got[7] == 123 && got[98] == 48);
            alloy_array_free(b);
        }
        alloy_array_free(a);
        free(host);
    }

    /* import -> export -> import of a borrowed buffer: every layer shares it,
     * and the innermost deleter runs once, when the last layer dies */
    int64_t shape[1] = {10};
    hand_tensor *h = malloc(sizeof *h);
    hand_init(h, 1, shape, NULL, 8, 12);
    alloy_array *x = NULL, *y = NULL;
    CHECK_OK(alloy_array_from_dlpack(&h->v, &x));
    DLManagedTensorVersioned *t = NULL;
    if (x) CHECK_OK(alloy_array_to_dlpack(x, &t));
    if (t) {
        CHECK(t->dl_tensor.data == (char *)h->data + 8);
        CHECK(t->dl_tensor.byte_offset == 0);
        CHECK_OK(alloy_array_from_dlpack(t, &y));
    }
    alloy_array_free(x);
    CHECK(h->deleted == 0);
    if (y) {
        float v[10];
        CHECK_OK(alloy_array_copy_to_host(y, v, sizeof v));
        CHECK(v[0] == 1.0f && v[9] == 5.5f);
        alloy_array_free(y);
    }
    CHECK(h->deleted == 1);
    free(h);
}

int main(void) {
    RUN(test_export_fields_every_dtype);
    RUN(test_export_strided_view_lifetime);
    RUN(test_export_scalar_and_empty);
    RUN(test_import_versioned_layouts);
    RUN(test_import_legacy);
    RUN(test_import_read_only);
    RUN(test_import_errors);
    RUN(test_import_cuda_without_cuda);
    RUN(test_import_dtypes_and_cuda_host);
    RUN(test_round_trip_shares_memory);
    return harness_finish();
}
