/* test_msl_vectors.c — spec §3 vectors: constructors (splat, components,
 * mixed), arithmetic/comparison/bitwise operators, .xyzw / .rgba access,
 * swizzle reads and writes, subscripts, conversions between vector types,
 * vector loads/stores through cast device pointers, packed_float3, and the
 * Metal sizes and alignments (float3 = 16 bytes, packed_float3 = 12, ...).
 * Inputs are multiples of 0.5 in [-8, 8], so every float result is exact and
 * compared bit for bit whether or not the compiler fuses operations. */
#include "kernel_util.h"

#define NT 37 /* threads: an awkward size, partial last group */
#define KF 54
#define KI 16

static const char *vec_body =
    "uint i = thread_position_in_grid.x;\n"
    "const device float4* x4 = (const device float4*)x;\n"
    "float4 a = x4[i];\n"
    "float4 s = float4(2.0f);                   /* splat */\n"
    "float4 m = float4(a.xy, 5.0f, a.w);        /* mixed */\n"
    "float4 m2 = float4(1.0f, a.yzw);\n"
    "float3 t = float3(a.zw, 7.0f);\n"
    "float2 p = a.xy * a.zw + 1.0f;\n"
    "float4 r = (a + s) * m - m2 / s;\n"
    "device float* o = out + 54 * i;\n"
    "o[0] = r.x; o[1] = r.y; o[2] = r.z; o[3] = r.w;\n"
    "o[4] = t.x; o[5] = t.y; o[6] = t.z; o[7] = p.x; o[8] = p.y;\n"
    "float3 z = a.zyx; o[9] = z.x; o[10] = z.y; o[11] = z.z;\n"
    "float4 d = a.xxyy; o[12] = d.x; o[13] = d.y; o[14] = d.z; o[15] = d.w;\n"
    "float4 e = a.bgra; o[16] = e.r; o[17] = e.g; o[18] = e.b; o[19] = e.a;\n"
    "float4 v = a;\n"
    "v.xy = float2(10.0f, 20.0f);\n"
    "v.zw += float2(1.0f, 2.0f);\n"
    "o[20] = v.x; o[21] = v.y; o[22] = v.z; o[23] = v.w;\n"
    "float4 w = a;\n"
    "w.yx = w.xy;                               /* swap */\n"
    "w.b *= 3.0f;\n"
    "w.wz = w.zw + float2(1.0f, 0.5f);\n"
    "o[24] = w.x; o[25] = w.y; o[26] = w.z; o[27] = w.w;\n"
    "bool4 c = a < m2;\n"
    "o[28] = c.x ? 1.0f : 0.0f; o[29] = c.y ? 1.0f : 0.0f;\n"
    "o[30] = c.z ? 1.0f : 0.0f; o[31] = c.w ? 1.0f : 0.0f;\n"
    "o[32] = all(c) ? 1.0f : 0.0f; o[33] = any(c) ? 1.0f : 0.0f;\n"
    "half4 hv = half4(a) * half(2.0f);\n"
    "o[34] = float(hv.x); o[35] = float(hv.y); o[36] = float(hv.z); o[37] = float(hv.w);\n"
    "bfloat4 bv = bfloat4(a) + bfloat4(1.0f);\n"
    "o[38] = float(bv.x); o[39] = float(bv.y); o[40] = float(bv.z); o[41] = float(bv.w);\n"
    "o[42] = a[2];\n"
    "float4 q = a; q[1] = a.x + q[3]; o[43] = q.y;\n"
    "const device packed_float3* pp = (const device packed_float3*)x;\n"
    "packed_float3 pk = pp[i];\n"
    "float3 fk = float3(pk);\n"
    "o[44] = fk.x; o[45] = fk.y; o[46] = fk.z;\n"
    "const device float3* f3 = (const device float3*)x;\n"
    "float3 f3v = f3[i];\n"
    "o[47] = f3v.x; o[48] = f3v.y; o[49] = f3v.z;\n"
    "long2 lv = long2(long(i), 7l) * long2(3l);\n"
    "o[50] = float(lv.x); o[51] = float(lv.y);\n"
    "float4 neg = -a; float4 sc = 2.0f * a;\n"
    "o[52] = neg.x; o[53] = sc.w;\n"
    "device int* oi = outi + 16 * i;\n"
    "int4 iv = int4(int(i)) * int4(1, 2, 3, 4) + int4(a);\n"
    "iv.zw = iv.xy - 1;\n"
    "oi[0] = iv.x; oi[1] = iv.y; oi[2] = iv.z; oi[3] = iv.w;\n"
    "uint4 ub = uint4(iv);\n"
    "uint4 bits = (ub & uint4(0xFu)) | ((ub << 4) ^ uint4(3u));\n"
    "oi[4] = int(bits.x); oi[5] = int(bits.y); oi[6] = int(bits.z); oi[7] = int(bits.w);\n"
    "uint3 uv = uint3(i, i + 1, i + 2) * 3u; uv.z >>= 1;\n"
    "oi[8] = int(uv.x); oi[9] = int(uv.y); oi[10] = int(uv.z);\n"
    "char4 cv = char4(int4(a) * 20);\n"
    "oi[11] = int(cv.x) + int(cv.w);\n"
    "short2 sv = short2(-3, 4) * short2(short(i));\n"
    "oi[12] = sv.x; oi[13] = sv.y;\n"
    "int2 md = iv.xy % int2(3, 5);\n"
    "oi[14] = md.x; oi[15] = md.y;\n"
    "((device float4*)v4)[i] = a * 2.0f;\n"
    "device packed_float3* po = (device packed_float3*)p3;\n"
    "po[i] = packed_float3(a.x, a.y, a.z);\n";

static void test_vectors(void) {
    float *x = malloc(4 * NT * sizeof(float));
    for (int i = 0; i < 4 * NT; i++) x[i] = (float)((int)(harness_rand_u64() % 33) - 16) * 0.5f;
    float *of = malloc(KF * NT * sizeof(float)), *v4 = malloc(4 * NT * sizeof(float)),
          *p3 = malloc(3 * NT * sizeof(float));
    int32_t *oi = malloc(KI * NT * sizeof(int32_t));
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "vectors";
    s.body = vec_body;
    s.n_in = 1;
    s.in_names[0] = "x";
    s.in[0] = ku_array(ALLOY_FLOAT32, 4 * NT, x);
    s.n_out = 4;
    s.out_names[0] = "out";
    s.out_names[1] = "outi";
    s.out_names[2] = "v4";
    s.out_names[3] = "p3";
    s.out_dtype[0] = ALLOY_FLOAT32;
    s.out_dtype[1] = ALLOY_INT32;
    s.out_dtype[2] = ALLOY_FLOAT32;
    s.out_dtype[3] = ALLOY_FLOAT32;
    s.out_n[0] = KF * NT;
    s.out_n[1] = KI * NT;
    s.out_n[2] = 4 * NT;
    s.out_n[3] = 3 * NT;
    s.out_host[0] = of;
    s.out_host[1] = oi;
    s.out_host[2] = v4;
    s.out_host[3] = p3;
    s.grid[0] = NT;
    s.tg[0] = 16;
    s.has_init = 1;
    s.init = -12345;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);

    double *rf = malloc(KF * NT * sizeof(double)), *rv4 = malloc(4 * NT * sizeof(double)),
           *rp3 = malloc(3 * NT * sizeof(double));
    int32_t *ri = malloc(KI * NT * sizeof(int32_t));
    for (int i = 0; i < NT; i++) {
        const float *a = x + 4 * i;
        double *o = rf + KF * i;
        double m[4] = {a[0], a[1], 5, a[3]}, m2[4] = {1, a[1], a[2], a[3]};
        for (int k = 0; k < 4; k++) o[k] = (a[k] + 2.0) * m[k] - m2[k] / 2.0;
        o[4] = a[2]; o[5] = a[3]; o[6] = 7;
        o[7] = a[0] * a[2] + 1; o[8] = a[1] * a[3] + 1;
        o[9] = a[2]; o[10] = a[1]; o[11] = a[0];
        o[12] = a[0]; o[13] = a[0]; o[14] = a[1]; o[15] = a[1];
        o[16] = a[2]; o[17] = a[1]; o[18] = a[0]; o[19] = a[3];
        o[20] = 10; o[21] = 20; o[22] = a[2] + 1; o[23] = a[3] + 2;
        double w[4] = {a[1], a[0], a[2] * 3, a[3]};
        double wz = w[3] + 0.5, ww = w[2] + 1;
        w[2] = wz; w[3] = ww;
        for (int k = 0; k < 4; k++) o[24 + k] = w[k];
        int all = 1, any = 0;
        for (int k = 0; k < 4; k++) {
            int c = a[k] < m2[k];
            o[28 + k] = c;
            all &= c;
            any |= c;
        }
        o[32] = all; o[33] = any;
        for (int k = 0; k < 4; k++) o[34 + k] = a[k] * 2.0;
        for (int k = 0; k < 4; k++) o[38 + k] = a[k] + 1.0;
        o[42] = a[2];
        o[43] = a[0] + a[3];
        for (int k = 0; k < 3; k++) o[44 + k] = x[3 * i + k];
        for (int k = 0; k < 3; k++) o[47 + k] = x[4 * i + k];
        o[50] = 3.0 * i; o[51] = 21;
        o[52] = -a[0]; o[53] = 2.0 * a[3];
        int32_t *q = ri + KI * i;
        int iv[4];
        for (int k = 0; k < 4; k++) iv[k] = i * (k + 1) + (int)a[k];
        iv[2] = iv[0] - 1;
        iv[3] = iv[1] - 1;
        for (int k = 0; k < 4; k++) q[k] = iv[k];
        for (int k = 0; k < 4; k++) {
            uint32_t ub = (uint32_t)iv[k];
            q[4 + k] = (int32_t)((ub & 0xFu) | ((ub << 4) ^ 3u));
        }
        q[8] = 3 * i; q[9] = 3 * (i + 1); q[10] = (3 * (i + 2)) >> 1;
        q[11] = (int8_t)((int)a[0] * 20) + (int8_t)((int)a[3] * 20);
        q[12] = (int16_t)(-3 * i); q[13] = (int16_t)(4 * i);
        q[14] = iv[0] % 3; q[15] = iv[1] % 5;
        for (int k = 0; k < 4; k++) rv4[4 * i + k] = 2.0 * a[k];
        for (int k = 0; k < 3; k++) rp3[3 * i + k] = a[k];
    }
    CHECK(ku_cmp_f32("vec float", of, rf, KF * NT, 0, 0) == 0);
    CHECK(ku_cmp_i32("vec int", oi, ri, KI * NT) == 0);
    CHECK(ku_cmp_f32("float4 store", v4, rv4, 4 * NT, 0, 0) == 0);
    CHECK(ku_cmp_f32("packed_float3 store", p3, rp3, 3 * NT, 0, 0) == 0);
    free(x); free(of); free(v4); free(p3); free(oi); free(rf); free(rv4); free(rp3); free(ri);
}

/* Sizes and alignments as in Metal: 3-component vectors pad to 4. */
static void test_vector_sizes(void) {
    static const struct { const char *expr; int want; } cases[] = {
        {"sizeof(float2)", 8},        {"sizeof(float3)", 16},        {"sizeof(float4)", 16},
        {"sizeof(half2)", 4},         {"sizeof(half3)", 8},          {"sizeof(half4)", 8},
        {"sizeof(int3)", 16},         {"sizeof(uint4)", 16},         {"sizeof(char2)", 2},
        {"sizeof(char3)", 4},         {"sizeof(char4)", 4},          {"sizeof(uchar3)", 4},
        {"sizeof(short3)", 8},        {"sizeof(ushort2)", 4},        {"sizeof(long2)", 16},
        {"sizeof(long3)", 32},        {"sizeof(ulong4)", 32},        {"sizeof(bool2)", 2},
        {"sizeof(bool3)", 4},         {"sizeof(bool4)", 4},          {"sizeof(bfloat3)", 8},
        {"sizeof(bfloat4)", 8},       {"sizeof(packed_float3)", 12}, {"sizeof(packed_float4)", 16},
        {"sizeof(packed_half3)", 6},  {"sizeof(packed_int3)", 12},   {"alignof(float3)", 16},
        {"alignof(packed_float3)", 4}, {"alignof(half4)", 8},        {"alignof(float2)", 8},
        {"alignof(int3)", 16},        {"alignof(char3)", 4},
    };
    const int n = (int)(sizeof cases / sizeof cases[0]);
    char body[4096];
    size_t len = (size_t)snprintf(body, sizeof body,
                                  "uint i = thread_position_in_grid.x;\nif (i != 0) return;\n");
    for (int k = 0; k < n; k++)
        len += (size_t)snprintf(body + len, sizeof body - len, "out[%d] = int(%s);\n", k,
                                cases[k].expr);
    len += (size_t)snprintf(body + len, sizeof body - len,
                            "float3 arr[2];\n"
                            "out[%d] = int((thread char*)&arr[1] - (thread char*)&arr[0]);\n",
                            n);
    int32_t got[64], ref[64];
    for (int k = 0; k < n; k++) ref[k] = cases[k].want;
    ref[n] = 16;
    float dummy = 0;
    CHECK_OK(ku_run_1in1out("vector_sizes", body, NULL, ALLOY_FLOAT32, 1, &dummy, ALLOY_INT32,
                            n + 1, got, 1, 1, -1));
    for (int k = 0; k < n; k++)
        CHECK_MSG(got[k] == ref[k], "%s: got %d, want %d", cases[k].expr, got[k], ref[k]);
    CHECK_MSG(got[n] == 16, "float3 array stride: got %d, want 16", got[n]);
}

/* Vector math helpers on vectors: min/max/abs/clamp/select elementwise. */
static void test_vector_elementwise(void) {
    const int n = 50;
    float *x = malloc(4 * n * sizeof(float));
    for (int i = 0; i < 4 * n; i++) x[i] = (float)((int)(harness_rand_u64() % 33) - 16) * 0.5f;
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "float4 a = float4(x[4*i], x[4*i+1], x[4*i+2], x[4*i+3]);\n"
        "float4 b = a.wzyx;\n"
        "float4 r0 = max(a, b); float4 r1 = min(a, b); float4 r2 = abs(a);\n"
        "float4 r3 = clamp(a, float4(-2.0f), float4(3.0f));\n"
        "float4 r4 = select(a, b, a > b);\n"
        "float4 rs[5] = {r0, r1, r2, r3, r4};\n"
        "for (int k = 0; k < 5; k++) for (int c = 0; c < 4; c++) out[20*i + 4*k + c] = rs[k][c];\n";
    float *got = malloc(20 * n * sizeof(float));
    double *ref = malloc(20 * n * sizeof(double));
    for (int i = 0; i < n; i++) {
        const float *a = x + 4 * i;
        for (int c = 0; c < 4; c++) {
            double av = a[c], bv = a[3 - c];
            ref[20 * i + c] = av > bv ? av : bv;
            ref[20 * i + 4 + c] = av < bv ? av : bv;
            ref[20 * i + 8 + c] = fabs(av);
            ref[20 * i + 12 + c] = av < -2 ? -2 : av > 3 ? 3 : av;
            ref[20 * i + 16 + c] = av > bv ? bv : av;
        }
    }
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "vector_elementwise";
    s.body = body;
    s.n_in = 1;
    s.in_names[0] = "x";
    s.in[0] = ku_array(ALLOY_FLOAT32, 4 * n, x);
    s.n_out = 1;
    s.out_names[0] = "out";
    s.out_dtype[0] = ALLOY_FLOAT32;
    s.out_n[0] = 20 * n;
    s.out_host[0] = got;
    s.grid[0] = (uint32_t)n;
    s.tg[0] = 32;
    s.has_init = 1;
    s.init = NAN;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    CHECK(ku_cmp_f32("vector_elementwise", got, ref, 20 * n, 0, 0) == 0);
    free(x); free(got); free(ref);
}

/* Swizzles on vectors in device and threadgroup memory (lvalues through
 * pointers and array elements), and half literals. */
static void test_swizzle_through_memory(void) {
    const int n = 40;
    float *x = malloc(4 * n * sizeof(float));
    for (int i = 0; i < 4 * n; i++) x[i] = (float)((int)(harness_rand_u64() % 33) - 16) * 0.5f;
    const char *body =
        "uint i = thread_position_in_grid.x;\n"
        "uint l = thread_position_in_threadgroup.x;\n"
        "device float4* o4 = (device float4*)out;\n"
        "o4[i] = ((const device float4*)x)[i];\n"
        "o4[i].zw = o4[i].xy * 2.0f;\n"
        "o4[i].x += 1.0h;\n"
        "threadgroup float4 t[8];\n"
        "t[l] = float4(0.0f);\n"
        "t[l].yx = float2(o4[i].w, 0.5h);\n"
        "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "float4 r = t[l];\n"
        "half hl = 2.5h;\n"
        "out2[i] = r.x + r.y * 10.0f + float(hl);\n";
    float *got = malloc(4 * n * sizeof(float)), *got2 = malloc(n * sizeof(float));
    double *ref = malloc(4 * n * sizeof(double)), *ref2 = malloc(n * sizeof(double));
    for (int i = 0; i < n; i++) {
        const float *a = x + 4 * i;
        ref[4 * i + 0] = a[0] + 1.0;
        ref[4 * i + 1] = a[1];
        ref[4 * i + 2] = 2.0 * a[0];
        ref[4 * i + 3] = 2.0 * a[1];
        ref2[i] = 0.5 + 2.0 * a[1] * 10.0 + 2.5;
    }
    ku_spec s;
    memset(&s, 0, sizeof s);
    s.name = "swizzle_memory";
    s.body = body;
    s.n_in = 1;
    s.in_names[0] = "x";
    s.in[0] = ku_array(ALLOY_FLOAT32, 4 * n, x);
    s.n_out = 2;
    s.out_names[0] = "out";
    s.out_names[1] = "out2";
    s.out_dtype[0] = s.out_dtype[1] = ALLOY_FLOAT32;
    s.out_n[0] = 4 * n;
    s.out_n[1] = n;
    s.out_host[0] = got;
    s.out_host[1] = got2;
    s.grid[0] = (uint32_t)n;
    s.tg[0] = 8;
    s.has_init = 1;
    s.init = NAN;
    CHECK_OK(ku_run(&s));
    ku_free_inputs(&s);
    CHECK(ku_cmp_f32("swizzle through device memory", got, ref, 4 * n, 0, 0) == 0);
    CHECK(ku_cmp_f32("swizzle through threadgroup memory", got2, ref2, n, 0, 0) == 0);
    free(x); free(got); free(got2); free(ref); free(ref2);
}

int main(void) {
    RUN(test_vectors);
    RUN(test_vector_sizes);
    RUN(test_vector_elementwise);
    RUN(test_swizzle_through_memory);
    return harness_finish();
}
