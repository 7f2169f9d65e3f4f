/* test_tensor_map.c — tensor maps as launch arguments (alloy_launch_set_tensor_map).
 *
 * CPU: bodies that copy the region a 1-, 2- and 3-D map describes through the
 * struct the CPU passes (base, dims, strides), against plain C loops over
 * fresh random data, and one that stores through a map over an output; a
 * map set again replaces the old one without a new compile; slot order next
 * to launch constants; the generated source on both targets. Errors: every rule of the apply-time check, each naming the map
 * and the field, with nothing compiled or launched. The copy engine: a body
 * that loads one box per threadgroup with cp.async.bulk.tensor and an
 * mbarrier on CUDA (an emulation of the same box on the CPU, whose results
 * check the references and whose CUDA side the _nvrtc twin compiles for
 * sm_90), boxes inside and partly outside the map (zero fill), no swizzle
 * and the 128-byte swizzle; on a GPU of compute capability 9.0 or newer it
 * runs for real, elsewhere it is skipped saying why. */
#include "core/program_cache.h"
#include "dialect/dialect.h"
#include "kernel_util.h"

static alloy_device *cpu(void) {
    static alloy_device *dev;
    if (!dev && alloy_device_get("cpu", &dev) != ALLOY_OK) {
        fprintf(stderr, "cannot open the cpu device: %s\n", alloy_last_error());
        exit(2);
    }
    return dev;
}

/* Random 16-bit values, never 0 (a box's fill) nor 0xA5A5 (what
 * ALLOY_CPU_DEBUG poisons unwritten integer outputs with). */
static uint16_t rand_u16(void) {
    uint16_t u;
    do u = (uint16_t)harness_rand_u64();
    while (u == 0 || u == 0xA5A5);
    return u;
}

static alloy_array *host_array(alloy_device *dev, alloy_dtype dt, int ndim, const int64_t *shape,
                               const void *data) {
    alloy_array *a = NULL;
    CHECK_OK(alloy_array_from_host(dev, dt, ndim, shape, data, &a));
    return a;
}

static alloy_tensor_map_spec spec_of(int input, int rank, int64_t offset, const int64_t *dims,
                                     const int64_t *strides, const uint32_t *box, uint32_t swizzle) {
    alloy_tensor_map_spec s;
    memset(&s, 0, sizeof s);
    s.operand = input;
    s.rank = rank;
    s.offset = offset;
    for (int d = 0; d < rank; d++) {
        s.dims[d] = dims[d];
        s.strides[d] = strides[d];
        s.box[d] = box[d];
    }
    s.swizzle = swizzle;
    return s;
}

/* ---- CPU: the struct's view ------------------------------------------------ */

/* out (row-major over the map's dims, innermost fastest) = the region the map
 * `m` describes; info = rank, element size, swizzle, box[0..4] (-1 past rank). */
static const char *REGION_BODY =
    "uint i = thread_position_in_grid.x;\n"
    "#if defined(ALLOY_BACKEND_CUDA)\n"
    "out[i] = T(0);\n"
    "if (i == 0) for (int k = 0; k < 8; k++) info[k] = 0;\n"
    "#else\n"
    "const T *b = (const T *)m.base;\n"
    "int64_t e = i, off = 0;\n"
    "for (int d = 0; d < m.rank; d++) {\n"
    "    off += (e % m.dims[d]) * m.strides[d];\n"
    "    e /= m.dims[d];\n"
    "}\n"
    "out[i] = b[off];\n"
    "if (i == 0) {\n"
    "    info[0] = m.rank; info[1] = m.elem_size; info[2] = m.swizzle;\n"
    "    for (int d = 0; d < 5; d++) info[3 + d] = d < m.rank ? long(m.box[d]) : -1L;\n"
    "}\n"
    "#endif\n";

static alloy_kernel *region_kernel(void) {
    const char *in[] = {"x"}, *out[] = {"out", "info"};
    alloy_kernel *k = NULL;
    CHECK_OK(alloy_kernel_new("tmap_region", 1, in, 2, out, REGION_BODY, NULL, 1, 0, &k));
    return k;
}

/* Runs the region kernel over `x` with map `m` = s; checks out against the
 * C loop over `xh` (element size es) and info against s. */
static void run_region(alloy_kernel *k, alloy_array *x, const void *xh, alloy_dtype dt,
                       const alloy_tensor_map_spec *s, alloy_launch *l, const char *label) {
    const size_t es = alloy_dtype_size(dt);
    int64_t n = 1;
    for (int d = 0; d < s->rank; d++) n *= s->dims[d];
    const int64_t eight = 8;
    CHECK_OK(alloy_launch_reset(l));
    CHECK_OK(alloy_launch_add_output(l, 1, &n, dt));
    CHECK_OK(alloy_launch_add_output(l, 1, &eight, ALLOY_INT64));
    CHECK_OK(alloy_launch_set_grid(l, (uint32_t)n, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 64, 1, 1));
    CHECK_OK(alloy_launch_add_template_dtype(l, "T", dt));
    CHECK_OK(alloy_launch_set_tensor_map(l, "m", s));
    alloy_array *res[2] = {NULL, NULL};
    CHECK_OK(alloy_kernel_apply(k, 1, &x, l, NULL, res));
    if (!res[0] || !res[1]) return;
    unsigned char *got = malloc((size_t)n * es), *want = malloc((size_t)n * es);
    int64_t info[8];
    CHECK_OK(alloy_array_copy_to_host(res[0], got, (size_t)n * es));
    CHECK_OK(alloy_array_copy_to_host(res[1], info, sizeof info));
    for (int64_t i = 0; i < n; i++) { /* the reference: the same walk, in C */
        int64_t e = i, off = s->offset;
        for (int d = 0; d < s->rank; d++) {
            off += e % s->dims[d] * s->strides[d];
            e /= s->dims[d];
        }
        memcpy(want + i * es, (const unsigned char *)xh + off * es, es);
    }
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += memcmp(got + i * es, want + i * es, es) != 0;
    CHECK_MSG(bad == 0, "%s: %lld of %lld elements differ from the C loop", label, (long long)bad,
              (long long)n);
    CHECK_MSG(info[0] == s->rank && info[1] == (int64_t)es && info[2] == s->swizzle,
              "%s: rank %lld elem_size %lld swizzle %lld", label, (long long)info[0],
              (long long)info[1], (long long)info[2]);
    for (int d = 0; d < 5; d++)
        CHECK_MSG(info[3 + d] == (d < s->rank ? (int64_t)s->box[d] : -1), "%s: box[%d] = %lld",
                  label, d, (long long)info[3 + d]);
    free(got);
    free(want);
    alloy_array_free(res[0]);
    alloy_array_free(res[1]);
}

static void test_cpu_region_2d(void) {
    alloy_kernel *k = region_kernel();
    float xh[24 * 40];
    harness_fill_f32(xh, 24 * 40, -10, 10);
    const int64_t shape[2] = {24, 40};
    alloy_array *x = host_array(cpu(), ALLOY_FLOAT32, 2, shape, xh);
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    if (!k || !x || !l) return;
    /* rows 2..10, columns 4..16 */
    alloy_tensor_map_spec s = spec_of(0, 2, 2 * 40 + 4, (int64_t[]){13, 9}, (int64_t[]){1, 40},
                                      (uint32_t[]){8, 4}, 0);
    run_region(k, x, xh, ALLOY_FLOAT32, &s, l, "2-D");
    /* set again: replaced, and the compiled kernel is reused (only the name is
     * part of the specialisation; both grids have a partial last group) */
    long builds = alloy_program_cache_builds(cpu());
    s = spec_of(0, 2, 0, (int64_t[]){36, 24}, (int64_t[]){1, 40}, (uint32_t[]){4, 2}, 32);
    run_region(k, x, xh, ALLOY_FLOAT32, &s, l, "2-D replaced");
    CHECK_MSG(alloy_program_cache_builds(cpu()) == builds,
              "a new tensor map spec compiled the kernel again (%ld builds)",
              alloy_program_cache_builds(cpu()) - builds);
    /* the parameter is in the generated source */
    char *src = NULL;
    CHECK_OK(alloy_kernel_generated_source(k, 1, &x, l, cpu(), &src));
    CHECK_MSG(src && strstr(src, "const alloy_tensor_map &m = *(const alloy_tensor_map*)alloy_a[3];"),
              "generated source lacks the tensor map parameter");
    free(src);
    alloy_launch_free(l);
    alloy_array_free(x);
    alloy_kernel_free(k);
}

static void test_cpu_region_3d(void) {
    alloy_kernel *k = region_kernel();
    enum { N = 6 * 10 * 32 };
    uint16_t xh[N];
    for (int i = 0; i < N; i++) xh[i] = rand_u16();
    const int64_t shape[3] = {6, 10, 32};
    alloy_array *x = host_array(cpu(), ALLOY_UINT16, 3, shape, xh);
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    if (!k || !x || !l) return;
    /* 2-byte elements: byte strides 64 and 656, a 16-byte box row */
    alloy_tensor_map_spec s = spec_of(0, 3, 8, (int64_t[]){16, 5, 4}, (int64_t[]){1, 32, 328},
                                      (uint32_t[]){8, 2, 3}, 0);
    run_region(k, x, xh, ALLOY_UINT16, &s, l, "3-D uint16");
    s = spec_of(0, 3, 64, (int64_t[]){24, 3, 2}, (int64_t[]){1, 40, 640}, (uint32_t[]){16, 3, 1}, 64);
    run_region(k, x, xh, ALLOY_UINT16, &s, l, "3-D uint16, another view");
    alloy_launch_free(l);
    alloy_array_free(x);
    alloy_kernel_free(k);
}

/* Two maps and a launch constant: the slots after the outputs are the
 * constants, then the maps, in the order they were first set. */
static void test_cpu_two_maps_and_constant(void) {
    const char *in[] = {"p", "q"}, *out[] = {"out"};
    alloy_kernel *k = NULL;
    CHECK_OK(alloy_kernel_new("tmap_two", 2, in, 1, out,
                              "uint i = thread_position_in_grid.x;\n"
                              "#if defined(ALLOY_BACKEND_CUDA)\n"
                              "out[i] = 0.0f;\n"
                              "#else\n"
                              "uint r = i / uint(b.dims[0]), c = i % uint(b.dims[0]);\n"
                              "out[i] = s * ((const float *)a.base)[i] +\n"
                              "         ((const float *)b.base)[r * b.strides[1] + c];\n"
                              "#endif\n",
                              NULL, 1, 0, &k));
    enum { NP = 100, NQ = 64 };
    float ph[NP], qh[NQ];
    harness_fill_f32(ph, NP, -1, 1);
    harness_fill_f32(qh, NQ, -1, 1);
    alloy_array *ins[2] = {host_array(cpu(), ALLOY_FLOAT32, 1, (int64_t[]){NP}, ph),
                           host_array(cpu(), ALLOY_FLOAT32, 1, (int64_t[]){NQ}, qh)};
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    if (!k || !ins[0] || !ins[1] || !l) return;
    const int64_t n = 12;
    const float scale = (float)(1 << harness_rand_u64() % 4); /* exact products: no fma question */
    CHECK_OK(alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_grid(l, 12, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 4, 1, 1));
    /* a: p from element 8, 1-D; b: q as 3 rows of 4 with a row stride of 8 */
    alloy_tensor_map_spec sa = spec_of(0, 1, 8, (int64_t[]){12}, (int64_t[]){1}, (uint32_t[]){4}, 0);
    alloy_tensor_map_spec sb = spec_of(1, 2, 4, (int64_t[]){4, 3}, (int64_t[]){1, 8},
                                       (uint32_t[]){4, 3}, 0);
    CHECK_OK(alloy_launch_set_tensor_map(l, "a", &sa));
    CHECK_OK(alloy_launch_set_constant(l, "s", ALLOY_FLOAT32, scale));
    CHECK_OK(alloy_launch_set_tensor_map(l, "b", &sb));
    alloy_array *res = NULL;
    CHECK_OK(alloy_kernel_apply(k, 2, ins, l, NULL, &res));
    float got[12];
    if (res) CHECK_OK(alloy_array_copy_to_host(res, got, sizeof got));
    int bad = 0;
    for (int i = 0; i < 12 && res; i++) {
        float want = scale * ph[8 + i] + qh[4 + (i / 4) * 8 + i % 4];
        bad += got[i] != want;
    }
    CHECK_MSG(res && bad == 0, "two maps and a constant: %d of 12 elements wrong", bad);
    alloy_array_free(res);
    char *src = NULL;
    CHECK_OK(alloy_kernel_generated_source(k, 2, ins, l, cpu(), &src));
    CHECK(src && strstr(src, "const float s = *(const float*)alloy_a[3];"));
    CHECK(src && strstr(src, "const alloy_tensor_map &a = *(const alloy_tensor_map*)alloy_a[4];"));
    CHECK(src && strstr(src, "const alloy_tensor_map &b = *(const alloy_tensor_map*)alloy_a[5];"));
    free(src);
    alloy_launch_free(l);
    alloy_array_free(ins[0]);
    alloy_array_free(ins[1]);
    alloy_kernel_free(k);
}

/* A strided input copied row-contiguous (ensure_row_contiguous): the map
 * describes the copy the body sees. */
static void test_cpu_map_over_copied_input(void) {
    alloy_kernel *k = region_kernel();
    float buf[16 * 8];
    harness_fill_f32(buf, 16 * 8, -5, 5);
    alloy_array *x = NULL; /* the transpose of a 16 x 8 matrix: 8 x 16 */
    CHECK_OK(alloy_array_wrap(cpu(), buf, ALLOY_FLOAT32, 2, (int64_t[]){8, 16}, (int64_t[]){1, 8}, 0,
                              NULL, NULL, &x));
    float copy[8 * 16];
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 16; c++) copy[r * 16 + c] = buf[c * 8 + r];
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    if (!k || !x || !l) return;
    alloy_tensor_map_spec s = spec_of(0, 2, 16 + 4, (int64_t[]){12, 6}, (int64_t[]){1, 16},
                                      (uint32_t[]){4, 6}, 0);
    run_region(k, x, copy, ALLOY_FLOAT32, &s, l, "over the row-contiguous copy");
    alloy_launch_free(l);
    alloy_array_free(x);
    alloy_kernel_free(k);
}

/* A map over an output (operand n_inputs + j): the body writes the region
 * through it; the rest keeps the init value. An output alloy allocates is
 * checked again once its address is known. */
static void test_cpu_map_over_output(void) {
    const char *in[] = {"x"}, *out[] = {"out"};
    alloy_kernel *k = NULL;
    CHECK_OK(alloy_kernel_new("tmap_out", 1, in, 1, out,
                              "uint i = thread_position_in_grid.x;\n"
                              "#if defined(ALLOY_BACKEND_CUDA)\n"
                              "out[i] = x[i];\n"
                              "#else\n"
                              "uint r = i / uint(o.dims[0]), c = i % uint(o.dims[0]);\n"
                              "((device float *)o.base)[r * o.strides[1] + c] = x[i];\n"
                              "#endif\n",
                              NULL, 1, 0, &k));
    float xh[32];
    harness_fill_f32(xh, 32, -4, 4);
    alloy_array *x = host_array(cpu(), ALLOY_FLOAT32, 1, (int64_t[]){32}, xh), *res = NULL;
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    if (!k || !x || !l) return;
    CHECK_OK(alloy_launch_add_output(l, 2, (int64_t[]){6, 16}, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_set_init_value(l, 0));
    CHECK_OK(alloy_launch_set_grid(l, 32, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 32, 1, 1));
    /* rows 1..4, columns 4..11 of the 6 x 16 output */
    alloy_tensor_map_spec s = spec_of(1, 2, 20, (int64_t[]){8, 4}, (int64_t[]){1, 16}, (uint32_t[]){8, 4}, 0);
    CHECK_OK(alloy_launch_set_tensor_map(l, "o", &s));
    CHECK_OK(alloy_kernel_apply(k, 1, &x, l, NULL, &res));
    float got[96];
    if (res) CHECK_OK(alloy_array_copy_to_host(res, got, sizeof got));
    int bad = 0;
    for (int e = 0; e < 96 && res; e++) {
        const int r = e / 16 - 1, c = e % 16 - 4;
        const float want = r >= 0 && r < 4 && c >= 0 && c < 8 ? xh[r * 8 + c] : 0.0f;
        bad += got[e] != want;
    }
    CHECK_MSG(res && bad == 0, "map over an output: %d of 96 elements wrong", bad);
    alloy_array_free(res);
    res = NULL;
    /* the allocated output's base + 1 element: found once it is allocated */
    s.offset = 21;
    CHECK_OK(alloy_launch_set_tensor_map(l, "o", &s));
    CHECK_FAILS(alloy_kernel_apply(k, 1, &x, l, NULL, &res), ALLOY_ERROR_INVALID_ARGUMENT,
                "tensor map 'o': the base address (output 'out' + offset 21 elements) is not 16-byte "
                "aligned");
    CHECK(res == NULL);
    alloy_launch_free(l);
    alloy_array_free(x);
    alloy_kernel_free(k);
}

/* The CUDA side without a device: the parameter after the constants, by
 * value as a __grid_constant__ CUtensorMap, the body's name a reference. */
static void test_cuda_codegen(void) {
    alloy_codegen_input in[1] = {{"x", ALLOY_FLOAT32, 0, 2}};
    alloy_codegen_output out[1] = {{"out", ALLOY_FLOAT32}};
    alloy_constant_arg c;
    memset(&c, 0, sizeof c);
    strcpy(c.name, "s");
    c.dtype = ALLOY_FLOAT32;
    alloy_tensor_map_arg maps[2];
    memset(maps, 0, sizeof maps);
    strcpy(maps[0].name, "ma");
    strcpy(maps[1].name, "mb");
    alloy_codegen_request req;
    memset(&req, 0, sizeof req);
    req.target = ALLOY_TARGET_CUDA;
    req.kernel_name = "tmap_cg";
    req.body = "out[0] = s;\n";
    req.n_inputs = 1;
    req.inputs = in;
    req.n_outputs = 1;
    req.outputs = out;
    req.n_constants = 1;
    req.constants = &c;
    req.n_tensor_maps = 2;
    req.tensor_maps = maps;
    req.geometry = ALLOY_GEOMETRY_ALL;
    alloy_codegen_result res;
    CHECK_OK(alloy_codegen(&req, &res));
    if (!res.source) return;
    CHECK(strstr(res.source, "    const float alloy_a2,\n"
                             "    const __grid_constant__ alloy_tensor_map alloy_a3,\n"
                             "    const __grid_constant__ alloy_tensor_map alloy_a4,\n"
                             "    const alloy_launch_info alloy_info) {\n") != NULL);
    CHECK(strstr(res.source, "const alloy_tensor_map &ma = alloy_a3;") != NULL);
    CHECK(strstr(res.source, "const alloy_tensor_map &mb = alloy_a4;") != NULL);
    CHECK(strstr(res.source, "struct alignas(64) alloy_tensor_map {") != NULL);
    CHECK(res.n_slots == 5);
    alloy_codegen_result_clear(&res);
    /* a malformed name never reaches the source */
    strcpy(maps[1].name, "2x");
    CHECK_FAILS(alloy_codegen(&req, &res), ALLOY_ERROR_INVALID_ARGUMENT, "tensor map");
}

/* ---- errors ------------------------------------------------------------------- */

typedef struct bad_case {
    const char *label;
    alloy_tensor_map_spec spec;
    const char *needle; /* in the message, with the map's name */
} bad_case;

static void test_errors(void) {
    const char *in[] = {"x", "sc"}, *out[] = {"out"};
    alloy_kernel *k = NULL;
    /* ensure_row_contiguous off: the strided view's own span is the limit */
    CHECK_OK(alloy_kernel_new("tmap_errors", 2, in, 1, out, "out[thread_position_in_grid.x] = 1.0f;\n",
                              NULL, 0, 0, &k));
    /* a tensor map's base must be 16-byte aligned: say so (AArch64's stack
     * left a plain float array 8 bytes past a boundary) */
    _Alignas(16) float buf[64 * 20];
    float scal = 2;
    harness_fill_f32(buf, 64 * 20, 0, 1);
    /* 16 rows of 32 from a 64-wide buffer: the span is 15 * 64 + 32 = 992 elements */
    alloy_array *x = NULL, *sc = host_array(cpu(), ALLOY_FLOAT32, 0, NULL, &scal);
    CHECK_OK(alloy_array_wrap(cpu(), buf, ALLOY_FLOAT32, 2, (int64_t[]){16, 32}, (int64_t[]){64, 1},
                              0, NULL, NULL, &x));
    float sentinel[8];
    for (int i = 0; i < 8; i++) sentinel[i] = -123.0f;
    alloy_array *o = host_array(cpu(), ALLOY_FLOAT32, 1, (int64_t[]){8}, sentinel);
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    if (!k || !x || !sc || !o || !l) return;
    alloy_array *ins[2] = {x, sc};
    const alloy_tensor_map_spec good = spec_of(0, 2, 0, (int64_t[]){32, 8}, (int64_t[]){1, 64},
                                               (uint32_t[]){32, 8}, 128);
    bad_case cases[40];
    int nc = 0;
#define BAD2(lbl, field, val, field2, val2, needle_)                                          \
    do {                                                                                      \
        cases[nc].label = (lbl);                                                              \
        cases[nc].spec = good;                                                                \
        cases[nc].spec.field = (val);                                                         \
        cases[nc].spec.field2 = (val2);                                                       \
        cases[nc].needle = (needle_);                                                         \
        nc++;                                                                                 \
    } while (0)
#define BAD(lbl, field, val, needle_) BAD2(lbl, field, val, field, val, needle_)
    BAD("operand past the end", operand, 3, "operand = 3 is out of range: the kernel has 2 "
                                            "inputs and 1 output");
    BAD("negative operand", operand, -1, "operand = -1 is out of range");
    BAD("0-d input", operand, 1, "input 1 ('sc') is 0-d");
    BAD2("past the output", operand, 2, dims[1], 1, "reaches element 31 of output 'out', which holds "
                                                    "elements up to 7");
    BAD("rank 0", rank, 0, "rank = 0");
    BAD("rank 6", rank, 6, "rank = 6");
    BAD("negative offset", offset, -4, "offset = -4");
    BAD("zero dim", dims[1], 0, "dims[1] = 0");
    BAD("dim over 2^32", dims[0], (1LL << 32) + 1, "dims[0] = 4294967297");
    BAD("inner stride", strides[0], 2, "strides[0] = 2");
    BAD("zero stride", strides[1], 0, "strides[1] = 0 must be positive");
    BAD("negative stride", strides[1], -64, "strides[1] = -64 must be positive");
    BAD("stride not 16 bytes", strides[1], 6, "strides[1] = 6 elements = 24 bytes");
    BAD("stride 2^40 bytes", strides[1], 1LL << 38, "strides[1] = 274877906944 elements");
    BAD("zero box", box[1], 0, "box[1] = 0");
    BAD("box over 256", box[1], 257, "box[1] = 257");
    BAD("box row not 16 bytes", box[0], 6, "box[0] = 6 elements = 24 bytes");
    BAD("swizzle 16", swizzle, 16, "swizzle = 16");
    BAD("box wider than the swizzle", swizzle, 64, "wider than the swizzle span of 64");
    BAD("misaligned base", offset, 1, "not 16-byte aligned");
    BAD("past the view", dims[1], 17, "reaches element 1055 of input 'x', which holds elements up "
                                      "to 991");
    BAD("past the view by the offset", offset, 516, "the map must lie inside the input");
    BAD2("past the view's last row", dims[0], 40, dims[1], 16, "reaches element 999 of input 'x'");
    BAD("far past the view", dims[1], 1LL << 32, "the map must lie inside the input");
    BAD2("overflowing reach", dims[1], 1LL << 32, strides[1], 1LL << 36, "reaches element beyond");
#undef BAD
#undef BAD2
    const long builds = alloy_program_cache_builds(cpu());
    for (int i = 0; i < nc; i++) {
        CHECK_OK(alloy_launch_reset(l));
        CHECK_OK(alloy_launch_add_output_array(l, o));
        CHECK_OK(alloy_launch_set_grid(l, 8, 1, 1));
        CHECK_OK(alloy_launch_set_threadgroup(l, 8, 1, 1));
        CHECK_OK(alloy_launch_set_tensor_map(l, "tm", &cases[i].spec));
        alloy_array *res = NULL;
        alloy_status st = alloy_kernel_apply(k, 2, ins, l, NULL, &res);
        CHECK_MSG(st == ALLOY_ERROR_INVALID_ARGUMENT && strstr(alloy_last_error(), "tensor map 'tm'") &&
                      strstr(alloy_last_error(), cases[i].needle),
                  "%s: got %s: %s (wanted INVALID_ARGUMENT with \"%s\")", cases[i].label,
                  alloy_status_name(st), alloy_last_error(), cases[i].needle);
        CHECK(res == NULL);
        /* generated_source checks the same */
        char *src = NULL;
        CHECK_FAILS(alloy_kernel_generated_source(k, 2, ins, l, cpu(), &src),
                    ALLOY_ERROR_INVALID_ARGUMENT, cases[i].needle);
        free(src);
    }
    /* nothing compiled, nothing launched */
    CHECK_MSG(alloy_program_cache_builds(cpu()) == builds, "a rejected map compiled %ld kernels",
              alloy_program_cache_builds(cpu()) - builds);
    float got[8];
    CHECK_OK(alloy_array_copy_to_host(o, got, sizeof got));
    for (int i = 0; i < 8; i++) CHECK(got[i] == -123.0f);
    /* the good spec and the edge of the view pass: the check is not too strict */
    const alloy_tensor_map_spec oks[3] = {
        good, spec_of(0, 2, 0, (int64_t[]){32, 16}, (int64_t[]){1, 64}, (uint32_t[]){4, 1}, 0),
        spec_of(0, 1, 17 * 64, (int64_t[]){32}, (int64_t[]){1}, (uint32_t[]){256}, 0)};
    for (int i = 0; i < 2; i++) {
        CHECK_OK(alloy_launch_reset(l));
        CHECK_OK(alloy_launch_add_output_array(l, o));
        CHECK_OK(alloy_launch_set_grid(l, 8, 1, 1));
        CHECK_OK(alloy_launch_set_threadgroup(l, 8, 1, 1));
        CHECK_OK(alloy_launch_set_tensor_map(l, "tm", &oks[i]));
        alloy_array *res = NULL;
        CHECK_OK(alloy_kernel_apply(k, 2, ins, l, NULL, &res));
        alloy_array_free(res);
    }
    CHECK_OK(alloy_array_copy_to_host(o, got, sizeof got));
    for (int i = 0; i < 8; i++) CHECK(got[i] == 1.0f);
    /* a 1-D map that starts past the view's span (its base buffer is larger) */
    CHECK_OK(alloy_launch_set_tensor_map(l, "tm", &oks[2]));
    alloy_array *res = NULL;
    CHECK_FAILS(alloy_kernel_apply(k, 2, ins, l, NULL, &res), ALLOY_ERROR_INVALID_ARGUMENT,
                "the map must lie inside the input");

    /* names: the identifier rules, clashes, the limit of four, reset */
    CHECK_OK(alloy_launch_reset(l));
    CHECK_FAILS(alloy_launch_set_tensor_map(l, "thread_position_in_grid", &good),
                ALLOY_ERROR_INVALID_ARGUMENT, "thread_position_in_grid");
    CHECK_FAILS(alloy_launch_set_tensor_map(l, "alloy_map", &good), ALLOY_ERROR_INVALID_ARGUMENT,
                "tensor map");
    CHECK_FAILS(alloy_launch_set_tensor_map(l, "2d", &good), ALLOY_ERROR_INVALID_ARGUMENT, "tensor map");
    CHECK_FAILS(alloy_launch_set_tensor_map(l, "ok", NULL), ALLOY_ERROR_INVALID_ARGUMENT,
                "tensor map 'ok': spec is NULL");
    CHECK_FAILS(alloy_launch_set_tensor_map(NULL, "ok", &good), ALLOY_ERROR_INVALID_ARGUMENT, "launch");
    CHECK_OK(alloy_launch_set_constant(l, "c", ALLOY_FLOAT32, 1.0));
    CHECK_OK(alloy_launch_add_template_int(l, "N", 1));
    CHECK_FAILS(alloy_launch_set_tensor_map(l, "c", &good), ALLOY_ERROR_INVALID_ARGUMENT,
                "tensor map 'c' has the name of a launch constant");
    CHECK_FAILS(alloy_launch_set_tensor_map(l, "N", &good), ALLOY_ERROR_INVALID_ARGUMENT,
                "tensor map 'N' has the name of a template argument");
    CHECK_OK(alloy_launch_set_tensor_map(l, "m0", &good));
    CHECK_FAILS(alloy_launch_set_constant(l, "m0", ALLOY_FLOAT32, 1.0), ALLOY_ERROR_INVALID_ARGUMENT,
                "launch constant 'm0' has the name of a tensor map");
    CHECK_FAILS(alloy_launch_add_template_int(l, "m0", 1), ALLOY_ERROR_INVALID_ARGUMENT,
                "template argument 'm0' has the name of a tensor map");
    CHECK_OK(alloy_launch_set_tensor_map(l, "m1", &good));
    CHECK_OK(alloy_launch_set_tensor_map(l, "m2", &good));
    CHECK_OK(alloy_launch_set_tensor_map(l, "m3", &good));
    CHECK_OK(alloy_launch_set_tensor_map(l, "m1", &good)); /* a replacement is no fifth */
    CHECK_FAILS(alloy_launch_set_tensor_map(l, "m4", &good), ALLOY_ERROR_INVALID_ARGUMENT,
                "at most 4 tensor maps");
    CHECK_OK(alloy_launch_reset(l)); /* clears them: four new names fit */
    for (int i = 0; i < ALLOY_MAX_TENSOR_MAPS; i++) {
        char name[8];
        snprintf(name, sizeof name, "n%d", i);
        CHECK_OK(alloy_launch_set_tensor_map(l, name, &good));
    }
    CHECK_OK(alloy_launch_reset(l));
    CHECK_OK(alloy_launch_add_output_array(l, o));
    CHECK_OK(alloy_launch_set_grid(l, 8, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 8, 1, 1));
    CHECK_OK(alloy_launch_set_tensor_map(l, "x", &good));
    CHECK_FAILS(alloy_kernel_apply(k, 2, ins, l, NULL, &res), ALLOY_ERROR_INVALID_ARGUMENT,
                "tensor map 'x' has the name of an input");
    CHECK_OK(alloy_launch_reset(l));
    CHECK_OK(alloy_launch_add_output_array(l, o));
    CHECK_OK(alloy_launch_set_grid(l, 8, 1, 1));
    CHECK_OK(alloy_launch_set_threadgroup(l, 8, 1, 1));
    char *src = NULL;
    CHECK_OK(alloy_kernel_generated_source(k, 2, ins, l, cpu(), &src));
    CHECK_MSG(src && !strstr(src, "alloy_tensor_map &"), "reset left a tensor map parameter");
    free(src);
    alloy_launch_free(l);
    alloy_array_free(o);
    alloy_array_free(x);
    alloy_array_free(sc);
    alloy_kernel_free(k);
}

/* ---- the copy engine: one box per threadgroup ---------------------------------- */

static const char *BOX_HEADER =
    "#if defined(ALLOY_BACKEND_CUDA)\n"
    "inline uint tm_shared(const void *p) {\n"
    "    uint r;\n"
    "    asm(\"{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }\" : \"=r\"(r) : \"l\"(p));\n"
    "    return r;\n"
    "}\n"
    "#endif\n";

/* Box g at (coords[2g], coords[2g+1]) of map m lands in threadgroup memory
 * aligned to 1024 bytes (where the 128-byte swizzle pattern starts), as the
 * copy engine writes it, and goes to out[g] as is. CUDA: thread 0 arms an
 * mbarrier with the box's bytes and issues the copy; every thread waits on
 * the barrier's phase 0. CPU: thread 0 builds the same bytes from the
 * struct's view (zeros outside the map, 16-byte chunks moved as the swizzle
 * moves them). */
static const char *BOX_BODY =
    "uint tid = thread_index_in_threadgroup;\n"
    "uint g = threadgroup_position_in_grid.x;\n"
    "int x0 = coords[2 * g], y0 = coords[2 * g + 1];\n"
    "#if defined(ALLOY_BACKEND_CUDA)\n"
    "constexpr uint BYTES = uint(BX * BY) * uint(sizeof(T));\n"
    "uint base = tm_shared(alloy_threadgroup_memory);\n"
    "uint pad = (1024u - base % 1024u) % 1024u;\n"
    "uchar *tile = alloy_threadgroup_memory + pad;\n"
    "threadgroup ulong tm_bar[1];\n"
    "uint bar = tm_shared(tm_bar), dst = base + pad;\n"
    "if (tid == 0) {\n"
    "    asm volatile(\"mbarrier.init.shared::cta.b64 [%0], 1;\" :: \"r\"(bar) : \"memory\");\n"
    "    asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n"
    "}\n"
    "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "if (tid == 0) {\n"
    "    asm volatile(\"mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\"\n"
    "                 :: \"r\"(bar), \"r\"(BYTES) : \"memory\");\n"
    "    asm volatile(\"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes\"\n"
    "                 \" [%0], [%1, {%2, %3}], [%4];\"\n"
    "                 :: \"r\"(dst), \"l\"((unsigned long long)&m), \"r\"(x0), \"r\"(y0), \"r\"(bar)\n"
    "                 : \"memory\");\n"
    "}\n"
    "uint done = 0;\n"
    "while (!done)\n"
    "    asm volatile(\"{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; \"\n"
    "                 \"selp.u32 %0, 1, 0, p; }\" : \"=r\"(done) : \"r\"(bar), \"r\"(0u) : \"memory\");\n"
    "#else\n"
    "uint pad = uint((1024u - (size_t)alloy_threadgroup_memory % 1024u) % 1024u);\n"
    "uchar *tile = alloy_threadgroup_memory + pad;\n"
    "if (tid == 0) {\n"
    "    const T *src = (const T *)m.base;\n"
    "    uint row = m.box[0] * uint(sizeof(T)), mask = m.swizzle ? m.swizzle / 16u - 1u : 0u;\n"
    "    for (uint r = 0; r < m.box[1]; r++)\n"
    "        for (uint c = 0; c < m.box[0]; c++) {\n"
    "            int64_t gx = int64_t(x0) + c, gy = int64_t(y0) + r;\n"
    "            T v = T(0);\n"
    "            if (gx >= 0 && gx < m.dims[0] && gy >= 0 && gy < m.dims[1])\n"
    "                v = src[gy * m.strides[1] + gx];\n"
    "            uint a = r * row + c * uint(sizeof(T));\n"
    "            a ^= ((a >> 7) & mask) << 4;\n"
    "            *(T *)(tile + a) = v;\n"
    "        }\n"
    "}\n"
    "threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "#endif\n"
    "for (uint e = tid; e < uint(BX * BY); e += threads_per_threadgroup.x)\n"
    "    out[g * uint(BX * BY) + e] = ((const T *)tile)[e];\n";

/* One run of the box kernel on dev: a W x H matrix of dtype dt (4 or 2
 * bytes), boxes of bx x 8 at the given coordinates, swizzle sw; out against
 * the reference built here from the matrix. */
static void run_boxes(alloy_device *dev, alloy_dtype dt, uint32_t bx, uint32_t sw, const char *label) {
    enum { W = 72, H = 40, BY = 8, NB = 6 };
    const size_t es = alloy_dtype_size(dt);
    unsigned char *mh = malloc((size_t)W * H * es);
    for (size_t i = 0; i < (size_t)W * H; i++) {
        if (es == 4) {
            float f = (float)harness_uniform(-100, 100);
            memcpy(mh + i * 4, &f, 4);
        } else {
            uint16_t u = rand_u16();
            memcpy(mh + i * 2, &u, 2);
        }
    }
    if (es == 4)
        for (size_t i = 0; i < (size_t)W * H; i++) { /* no zeros: zeros mean fill */
            float f;
            memcpy(&f, mh + i * 4, 4);
            if (f == 0) f = 1;
            memcpy(mh + i * 4, &f, 4);
        }
    /* at the origin, interior (two random), past the right and bottom edges,
     * before the left and top edges. A copy's innermost coordinate must be a
     * multiple of 16 bytes (the GPU stops with an illegal instruction
     * otherwise), so x moves in steps of q elements. */
    const int q = 16 / (int)es;
    int32_t coords[2 * NB] = {0, 0, 16, 8, 0, 0, 0, 0, W - (int)bx / 2, H - 3, -2 * q, -3};
    coords[4] = (int32_t)(harness_rand_u64() % ((W - bx) / q + 1)) * q;
    coords[5] = (int32_t)(harness_rand_u64() % (H - BY + 1));
    coords[6] = (int32_t)(harness_rand_u64() % ((W - bx) / q + 1)) * q;
    coords[7] = (int32_t)(harness_rand_u64() % (H - BY + 1));
    const char *in[] = {"mat", "coords"}, *out[] = {"out"};
    alloy_kernel *k = NULL;
    CHECK_OK(alloy_kernel_new("tmap_box", 2, in, 1, out, BOX_BODY, BOX_HEADER, 1, 0, &k));
    alloy_array *ins[2] = {host_array(dev, dt, 2, (int64_t[]){H, W}, mh),
                           host_array(dev, ALLOY_INT32, 1, (int64_t[]){2 * NB}, coords)};
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    const int64_t n = (int64_t)NB * bx * BY;
    alloy_array *res = NULL;
    if (k && ins[0] && ins[1] && l) {
        CHECK_OK(alloy_launch_add_output(l, 1, &n, dt));
        CHECK_OK(alloy_launch_set_grid(l, NB * 64, 1, 1));
        CHECK_OK(alloy_launch_set_threadgroup(l, 64, 1, 1));
        CHECK_OK(alloy_launch_set_threadgroup_memory(l, 1024 + bx * BY * es));
        CHECK_OK(alloy_launch_add_template_dtype(l, "T", dt));
        CHECK_OK(alloy_launch_add_template_int(l, "BX", bx));
        CHECK_OK(alloy_launch_add_template_int(l, "BY", BY));
        alloy_tensor_map_spec s = spec_of(0, 2, 0, (int64_t[]){W, H}, (int64_t[]){1, W},
                                          (uint32_t[]){bx, BY}, sw);
        CHECK_OK(alloy_launch_set_tensor_map(l, "m", &s));
        alloy_status st = alloy_kernel_apply(k, 2, ins, l, NULL, &res);
        if (alloy_device_backend(dev) == ALLOY_BACKEND_CUDA && alloy_device_compute_capability(dev) < 90)
            CHECK_FAILS(st, ALLOY_ERROR_UNSUPPORTED, "tensor maps need Hopper (sm_90) or newer");
        else
            CHECK_MSG(st == ALLOY_OK, "%s: %s", label, alloy_last_error());
    }
    if (res) {
        const size_t row = bx * es, box = row * BY;
        unsigned char *got = malloc(n * es), *want = calloc(n, es);
        CHECK_OK(alloy_array_copy_to_host(res, got, n * es));
        for (int b = 0; b < NB; b++)
            for (int r = 0; r < BY; r++)
                for (uint32_t c = 0; c < bx; c++) {
                    const long gx = coords[2 * b] + (long)c, gy = coords[2 * b + 1] + r;
                    /* the 16-byte chunk j of row r lands at chunk j ^ (r % 8) of its
                     * 128-byte row under the 128-byte swizzle */
                    size_t chunk = c * es / 16, within = c * es % 16;
                    if (sw == 128) chunk ^= (size_t)(r % 8);
                    unsigned char *dst = want + b * box + r * row + chunk * 16 + within;
                    if (gx >= 0 && gx < W && gy >= 0 && gy < H) memcpy(dst, mh + (gy * W + gx) * es, es);
                }
        int bad = 0, first = -1;
        for (int64_t i = 0; i < n; i++)
            if (memcmp(got + i * es, want + i * es, es)) {
                if (first < 0) first = (int)i;
                bad++;
            }
        CHECK_MSG(bad == 0, "%s on %s: %d of %lld elements differ (first at box %d, byte %d)", label,
                  alloy_device_name(dev), bad, (long long)n, first < 0 ? 0 : first / (int)(bx * BY),
                  first < 0 ? 0 : (int)(first % (int)(bx * BY) * es));
        free(got);
        free(want);
    }
    alloy_array_free(res);
    alloy_launch_free(l);
    alloy_array_free(ins[0]);
    alloy_array_free(ins[1]);
    alloy_kernel_free(k);
    free(mh);
}

static void test_box_cpu(void) {
    run_boxes(cpu(), ALLOY_FLOAT32, 32, 0, "float32 boxes, no swizzle");
    run_boxes(cpu(), ALLOY_FLOAT32, 32, 128, "float32 boxes, 128-byte swizzle");
    run_boxes(cpu(), ALLOY_UINT16, 64, 128, "uint16 boxes, 128-byte swizzle");
    run_boxes(cpu(), ALLOY_UINT16, 16, 0, "uint16 boxes of 32 bytes, no swizzle");
}

static void test_box_cuda(void) {
    alloy_device *dev = NULL;
    if (alloy_device_get("cuda", &dev) != ALLOY_OK) {
        char why[600];
        snprintf(why, sizeof why, "no CUDA device: %s", alloy_last_error());
        SKIP(why);
        return;
    }
    if (alloy_device_compute_capability(dev) < 90) {
        run_boxes(dev, ALLOY_FLOAT32, 32, 0, "a GPU before Hopper refuses"); /* UNSUPPORTED */
        SKIP("tensor maps need compute capability 9.0 or newer");
        return;
    }
    run_boxes(dev, ALLOY_FLOAT32, 32, 0, "float32 boxes, no swizzle");
    run_boxes(dev, ALLOY_FLOAT32, 32, 128, "float32 boxes, 128-byte swizzle");
    run_boxes(dev, ALLOY_UINT16, 64, 128, "uint16 boxes, 128-byte swizzle");
    run_boxes(dev, ALLOY_UINT16, 16, 0, "uint16 boxes of 32 bytes, no swizzle");
    /* the CUDA source takes the map by value as a __grid_constant__ parameter */
    const char *in[] = {"mat", "coords"}, *out[] = {"out"};
    alloy_kernel *k = NULL;
    CHECK_OK(alloy_kernel_new("tmap_box", 2, in, 1, out, BOX_BODY, BOX_HEADER, 1, 0, &k));
    float mh[72 * 40] = {0};
    int32_t coords[2] = {0, 0};
    alloy_array *ins[2] = {host_array(dev, ALLOY_FLOAT32, 2, (int64_t[]){40, 72}, mh),
                           host_array(dev, ALLOY_INT32, 1, (int64_t[]){2}, coords)};
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    const int64_t n = 256;
    CHECK_OK(alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_add_template_dtype(l, "T", ALLOY_FLOAT32));
    CHECK_OK(alloy_launch_add_template_int(l, "BX", 32));
    CHECK_OK(alloy_launch_add_template_int(l, "BY", 8));
    alloy_tensor_map_spec s = spec_of(0, 2, 0, (int64_t[]){72, 40}, (int64_t[]){1, 72},
                                      (uint32_t[]){32, 8}, 0);
    CHECK_OK(alloy_launch_set_tensor_map(l, "m", &s));
    char *src = NULL;
    if (k && ins[0] && ins[1]) CHECK_OK(alloy_kernel_generated_source(k, 2, ins, l, dev, &src));
    CHECK(src && strstr(src, "const __grid_constant__ alloy_tensor_map alloy_a"));
    CHECK(src && strstr(src, "const alloy_tensor_map &m = alloy_a"));
    free(src);
    alloy_launch_free(l);
    alloy_array_free(ins[0]);
    alloy_array_free(ins[1]);
    alloy_kernel_free(k);
}

int main(void) {
    harness_seed();
    RUN(test_cpu_region_2d);
    RUN(test_cpu_region_3d);
    RUN(test_cpu_two_maps_and_constant);
    RUN(test_cpu_map_over_copied_input);
    RUN(test_cpu_map_over_output);
    RUN(test_cuda_codegen);
    RUN(test_errors);
    RUN(test_box_cpu);
    RUN(test_box_cuda);
    return harness_finish();
}
