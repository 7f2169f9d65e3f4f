/* matmul.c — alloy_matmul (alloy/linalg.h): NumPy's matmul semantics on
 * top of the catalog's GEMM kernels.
 *
 * The host side reduces every call to one shape the kernels take: a batch of
 * M x K times K x N products where each operand is a pointer and three
 * element strides (batch, row, column), so transposes, broadcasting and
 * strided views cost nothing. Leading dimensions that cannot be expressed as
 * one batch stride are handled by launching once per outer index (the
 * launch constants a_off, b_off, c_off move the operands' origins). The kernel
 * is chosen per device and dtype (each kernel file says what it does; the
 * Hopper bfloat16/float16 one is persistent: a grid of one threadgroup per
 * SM that loops over the tiles of the whole batch); sizes,
 * strides, alpha and beta travel as launch constants, so a new shape never
 * recompiles and nothing is copied to the device. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloy/alloy.h"
#include "alloy/linalg.h"
#include "core/error.h"
#include "ops/catalog.h"
#include "ops/env_override.h"
#include "batch_layout.h"
#include "matmul_tf32.h"

static const char SIMT_FILE[] = "src/ops/linalg/kernels/matmul_simt.metal";
static const char WGMMA_FILE[] = "src/ops/linalg/kernels/matmul_wgmma.metal";
static const char WGMMA_TMA_FILE[] = "src/ops/linalg/kernels/matmul_wgmma_tma.metal";
static const char WGMMA_PINGPONG_FILE[] = "src/ops/linalg/kernels/matmul_wgmma_pingpong.metal";
static const char SMALL_FILE[] = "src/ops/linalg/kernels/matmul_small.metal";
static const char TINY_FILE[] = "src/ops/linalg/kernels/matmul_tiny.metal";
static const char CPU_FILE[] = "src/ops/linalg/kernels/matmul_cpu.metal";
/* matmul_tiny's threadgroups (two SIMD groups, 34 KB of threadgroup memory)
 * that fit one SM of a Hopper GPU at once */
enum { TINY_GROUPS_PER_SM = 6 };
/* threadgroups a launch may have along y or z */
enum { MAX_GRID_Z = 65535 };

void alloy_matmul_options_init(alloy_matmul_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->alpha = 1.0;
    o->precision = ALLOY_PRECISION_HIGHEST;
    o->out_dtype = ALLOY_FLOAT32;
}

static int gemm_dtype(alloy_dtype dt) {
    return dt == ALLOY_FLOAT32 || dt == ALLOY_FLOAT16 || dt == ALLOY_BFLOAT16 || dt == ALLOY_FLOAT64;
}

/* One operand as the kernels see it: rows x cols with element strides, and
 * its leading (batch) dimensions. */
typedef struct operand {
    int nb;                      /* batch dimensions */
    int64_t bshape[ALLOY_MAX_NDIM], bstride[ALLOY_MAX_NDIM];
    int64_t rows, cols, rs, cs;  /* after the transpose */
} operand;

static alloy_status describe(const alloy_array *x, const char *name, int transpose, int is_b,
                             operand *o) {
    const int nd = alloy_array_ndim(x);
    const int64_t *sh = alloy_array_shape(x), *st = alloy_array_strides(x);
    if (nd < 1)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "alloy_matmul: %s is 0-d; matmul needs at least one dimension (use a "
                           "product by a scalar instead)",
                           name);
    memset(o, 0, sizeof *o);
    if (nd == 1) {
        if (transpose)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "alloy_matmul: transpose_%s needs a matrix, but %s is 1-D", is_b ? "b" : "a",
                               name);
        if (is_b) { /* a column: K x 1 */
            o->rows = sh[0];
            o->cols = 1;
            o->rs = st[0];
            o->cs = 0;
        } else { /* a row: 1 x K */
            o->rows = 1;
            o->cols = sh[0];
            o->rs = 0;
            o->cs = st[0];
        }
        return ALLOY_OK;
    }
    o->nb = nd - 2;
    for (int d = 0; d < o->nb; d++) {
        o->bshape[d] = sh[d];
        o->bstride[d] = st[d];
    }
    o->rows = sh[nd - 2];
    o->cols = sh[nd - 1];
    o->rs = st[nd - 2];
    o->cs = st[nd - 1];
    if (transpose) {
        int64_t t = o->rows;
        o->rows = o->cols;
        o->cols = t;
        t = o->rs;
        o->rs = o->cs;
        o->cs = t;
    }
    return ALLOY_OK;
}

/* The operand's stride along each of the nb result batch dimensions (0 where
 * it broadcasts). */
static void batch_strides(const operand *o, int nb, const int64_t *rshape, int64_t *out) {
    for (int d = 0; d < nb; d++) {
        int od = d - (nb - o->nb);
        out[d] = (od >= 0 && o->bshape[od] == rshape[d] && rshape[d] != 1) ? o->bstride[od] : 0;
    }
}

typedef struct plan {
    alloy_kernel *kernel;
    const char *file;
    uint32_t tile_m, tile_n, threads;
    size_t threadgroup_memory;
    int persistent; /* a grid of at most this many threadgroups that loop over the tiles (0: one per tile) */
    int per_group;  /* matrices per threadgroup, M and N in one tile (0: tiles of each matrix) */
    int64_t resident; /* per_group kernels: threadgroups resident at once (0: one per per_group matrices) */
    int tensor_maps;  /* the kernel reads A and B and writes C through tensor maps ta, tb, tc */
    uint32_t c_box_cols, c_box_rows; /* ... tc's boxes */
} plan;

/* What the kernel choice depends on besides dtypes: the operands' layout. */
typedef struct layout {
    const void *a, *b;     /* first elements */
    int64_t sa_b, sa_m, sa_k, sb_b, sb_k, sb_n;
    int64_t outer_a, outer_b; /* the outer batch strides OR-ed (alignment of every origin) */
    int64_t m, n, k;
    const void *c;         /* the result's first element (row-major, rows of n) */
    double beta;
} layout;

/* Rows of 16-byte-aligned, unit-stride elements of `size` bytes (what
 * cp.async reads 16 bytes at a time). */
static int rows16(const void *p, size_t size, int64_t unit, int64_t row, int64_t batch, int64_t outer) {
    const int64_t per = (int64_t)(16 / size);
    return unit == 1 && row % per == 0 && batch % per == 0 && outer % per == 0 && ((uintptr_t)p % 16) == 0;
}

static int is_hopper(alloy_device *dev) {
    return alloy_device_backend(dev) == ALLOY_BACKEND_CUDA && alloy_device_compute_capability(dev) == 90;
}

static int is16(alloy_dtype dt) { return dt == ALLOY_FLOAT16 || dt == ALLOY_BFLOAT16; }

/* matmul_wgmma_tma's cases (A's and B's rows are checked with the wgmma
 * kernel's): 1 for a device whose launches take tensor maps, K >= 1 and C's
 * rows and first element 16-byte aligned, with a 16-bit C and beta == 0 (C
 * through the copy engine); 2 for any other C dtype or beta (DIRECT: C
 * stored from the accumulators; H200, bfloat16 to float32 at 8192^3: 0.99x
 * cuBLAS against matmul_wgmma's 0.95x); else 0. ALLOY_MATMUL_TMA=0 gives 0
 * and ALLOY_MATMUL_TMA_DIRECT=0 gives 0 for case 2 (for timing against
 * matmul_wgmma). */
static int tma_fits(alloy_device *dev, alloy_dtype in, alloy_dtype outdt, const layout *lay) {
    const int64_t es = (int64_t)alloy_dtype_size(outdt);
    if (!alloy_device_has_tensor_maps(dev) || !is16(in) || lay->k < 1 || (lay->n * es) % 16 != 0 ||
        ((uintptr_t)lay->c % 16) != 0 || !alloy_ops_env_int("ALLOY_MATMUL_TMA", 0, 1, 1))
        return 0;
    if (is16(outdt) && lay->beta == 0.0) return 1;
    return alloy_ops_env_int("ALLOY_MATMUL_TMA_DIRECT", 0, 1, 1) ? 2 : 0;
}

static alloy_status choose_kernel(alloy_device *dev, alloy_dtype in, alloy_dtype outdt, const layout *lay,
                                  plan *p, alloy_launch *l) {
    const int hopper = is_hopper(dev);
    alloy_status st;
    if (hopper && is16(in) && rows16(lay->a, 2, lay->sa_k, lay->sa_m, lay->sa_b, lay->outer_a) &&
        rows16(lay->b, 2, lay->sb_n, lay->sb_k, lay->sb_b, lay->outer_b)) {
        const int mode = tma_fits(dev, in, outdt, lay);
        p->tensor_maps = mode != 0;
        /* matmul_wgmma_pingpong only on request (ALLOY_MATMUL_PINGPONG=1):
         * timed on the H200 it loses 7% at 8192^3 and 3% on 100 x 1024^3 (its
         * 128 x 128 tiles read 1.33x the bytes from L2 per product) */
        const int pingpong = mode == 1 && alloy_ops_env_int("ALLOY_MATMUL_PINGPONG", 0, 1, 0);
        p->file = pingpong ? WGMMA_PINGPONG_FILE : p->tensor_maps ? WGMMA_TMA_FILE : WGMMA_FILE;
        p->tile_m = 128;
        p->tile_n = pingpong ? 128 : 256;
        p->threads = p->tensor_maps ? 384 : 256;
        p->c_box_rows = pingpong ? 128 : 64;
        p->c_box_cols = (uint32_t)(128 / alloy_dtype_size(outdt)); /* 128 bytes: the swizzle's span */
        /* copy engine: 4 stages of 48 KB and 32 KB of staged outputs (the
         * staging in two passes; H200, same call, three rounds: 100 x 1024^3
         * bfloat16 0.309-0.312 -> 0.305-0.306 ms, 2048^3 0.94-0.95x -> 0.96x
         * cuBLAS, 8192^3 within the noise; cuBLAS's kernel there has four
         * stages too; ALLOY_MATMUL_TMA_STAGES=3, for timing: 3 and 64 KB);
         * ping-pong: 5 of 32 KB and 64 KB; cp.async: 4 stages; 1 KB for the
         * alignment to 1024 bytes, the mbarriers after */
        const int tma_stages = (int)alloy_ops_env_int("ALLOY_MATMUL_TMA_STAGES", 3, 4, 4);
        const size_t tma_smem = (size_t)tma_stages * 48 * 1024 + (tma_stages == 3 ? 64 : 32) * 1024 + 2048;
        p->threadgroup_memory = pingpong         ? 5 * 32 * 1024 + 64 * 1024 + 2048
                                : p->tensor_maps ? tma_smem
                                                 : 4 * 48 * 1024 + 1024;
        /* one threadgroup per SM (its shared memory allows no second) */
        p->persistent = alloy_device_multiprocessor_count(dev);
        if (p->persistent < 1) p->persistent = 1;
        st = alloy_catalog_kernel(p->file, &p->kernel);
        if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "TIN", in);
        if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "TOUT", outdt);
        if (p->tensor_maps && !pingpong) { /* matmul_wgmma_tma's templates */
            if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "DIRECT", mode == 2);
            /* ALLOY_MATMUL_TMA_LAG=1|2 (timing only): the second consumer warpgroup that many K steps
             * behind the first, so that their epilogues do not coincide (matmul_wgmma_tma.metal); on the
             * H200 with OVW, 100 x 1024^3: 0.307-0.308 ms against 0.306-0.308 without (no gain) */
            if (st == ALLOY_OK)
                st = alloy_launch_add_template_int(l, "LAG", alloy_ops_env_int("ALLOY_MATMUL_TMA_LAG", 0, 2, 0));
            /* OVW: the epilogue without the accumulators' zeroing (each tile's first product overwrites
             * them) and, for alpha == 1, without alpha's multiplies (H200, same call: 100 x 1024^3 bfloat16
             * 0.311 -> 0.306-0.308 ms, 0.981x -> 0.991-0.992x torch.bmm; 8192^3 1.381 -> 1.375 ms);
             * ALLOY_MATMUL_TMA_OVW=0 restores the zeroing (timing) */
            if (st == ALLOY_OK)
                st = alloy_launch_add_template_int(l, "OVW", alloy_ops_env_int("ALLOY_MATMUL_TMA_OVW", 0, 1, 1));
            /* HALF: a last round of tiles at most half full computed as 128 x 128 halves over twice as many
             * threadgroups (matmul_wgmma_tma.metal); H200, same call, 100 x 1024^3 bfloat16: 0.313-0.316 ->
             * 0.312 ms (3 rounds each); ALLOY_MATMUL_TMA_HALF=0 for timing. SK, the same round's K loops
             * split over scratch slots, lost (0.318 ms against 0.308; NOTES.md) */
            if (st == ALLOY_OK)
                st = alloy_launch_add_template_int(l, "HALF", alloy_ops_env_int("ALLOY_MATMUL_TMA_HALF", 0, 1, 1));
            if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "STAGES", tma_stages);
        }
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup_memory(l, p->threadgroup_memory);
        return st;
    }
    if (alloy_device_backend(dev) == ALLOY_BACKEND_CPU) {
        /* one thread per 64 x 128 tile (smaller for small matrices: every worker busy) */
        p->file = CPU_FILE;
        p->tile_m = lay->m >= 64 ? 64 : (uint32_t)lay->m;
        p->tile_n = lay->n >= 128 ? 128 : (uint32_t)lay->n;
        p->threads = 1;
        return alloy_catalog_kernel(p->file, &p->kernel);
    }
    /* batches of matrices up to 32 x 32: one SIMD group each, two a
     * threadgroup, about as many threadgroups as are resident at once (each
     * SIMD group streams its share of the batch); other small matrices: 32 x
     * 32 tiles keep every thread busy */
    const int tiny = lay->m <= 32 && lay->n <= 32;
    const int small = lay->m <= 64 || lay->n <= 64;
    p->per_group = tiny ? 2 : 0;
    if (tiny) p->resident = alloy_device_multiprocessor_count(dev) * TINY_GROUPS_PER_SM;
    p->file = tiny ? TINY_FILE : small ? SMALL_FILE : SIMT_FILE;
    p->tile_m = small ? 32 : 128;
    p->tile_n = small ? 32 : 128;
    p->threads = tiny ? (uint32_t)(32 * p->per_group) : small ? 128 : 256;
    st = alloy_catalog_kernel(p->file, &p->kernel);
    if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "TIN", in);
    if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "TOUT", outdt);
    if (st == ALLOY_OK)
        st = alloy_launch_add_template_dtype(l, "ACC", in == ALLOY_FLOAT64 ? ALLOY_FLOAT64 : ALLOY_FLOAT32);
    return st;
}

/* One tensor map of the copy-engine kernels (matmul_wgmma_tma,
 * matmul_wgmma_pingpong): a (cols, rows, batch) view of operand
 * `operand` (inputs A, B, then the output C) from element `off`, unit column
 * stride, boxes of bx x by x 1, 128-byte swizzle. A batch the operand does not
 * step through (stride 0, or one matrix) has an extent of 1; an extent of 1
 * takes any valid stride (the map's strides must be positive multiples of 16
 * bytes even where nothing steps). */
static alloy_status set_map(alloy_launch *l, const char *name, int operand, int64_t off, int64_t cols,
                            int64_t rows, int64_t rs, int64_t batch, int64_t bs, uint32_t bx, uint32_t by) {
    alloy_tensor_map_spec m;
    memset(&m, 0, sizeof m);
    m.operand = operand;
    m.rank = 3;
    m.offset = off;
    m.dims[0] = cols;
    m.dims[1] = rows;
    m.dims[2] = bs != 0 ? batch : 1;
    m.strides[0] = 1;
    m.strides[1] = rows > 1 ? rs : 8;
    m.strides[2] = m.dims[2] > 1 ? bs : 8;
    m.box[0] = bx;
    m.box[1] = by;
    m.box[2] = 1;
    m.swizzle = 128;
    return alloy_launch_set_tensor_map(l, name, &m);
}

static alloy_status set_tensor_maps(alloy_launch *l, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t oa,
                                    int64_t sa_m, int64_t sa_b, int64_t ob, int64_t sb_k, int64_t sb_b, int64_t oc,
                                    int64_t sc_b, uint32_t c_box_cols, uint32_t c_box_rows) {
    alloy_status st = set_map(l, "ta", 0, oa, K, M, sa_m, batch, sa_b, 64, 128);
    if (st == ALLOY_OK) st = set_map(l, "tb", 1, ob, N, K, sb_k, batch, sb_b, 64, 64);
    if (st == ALLOY_OK) st = set_map(l, "tc", 2, oc, N, M, N, batch, sc_b, c_box_cols, c_box_rows);
    return st;
}

alloy_status alloy_matmul(alloy_array *a, alloy_array *b, const alloy_matmul_options *options,
                          alloy_stream *stream, alloy_array **out) {
    if (!a) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_matmul: a is NULL");
    if (!b) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_matmul: b is NULL");
    if (!out) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_matmul: out is NULL (pass the address of an alloy_array *)");
    alloy_matmul_options o;
    if (options) o = *options;
    else alloy_matmul_options_init(&o);
    if (o.precision != ALLOY_PRECISION_HIGHEST && o.precision != ALLOY_PRECISION_HIGH &&
        o.precision != ALLOY_PRECISION_DEFAULT)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_matmul: precision %d is not one of "
                           "ALLOY_PRECISION_HIGHEST, _HIGH, _DEFAULT", (int)o.precision);
    if (!isfinite(o.alpha) || !isfinite(o.beta))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_matmul: alpha (%g) and beta (%g) must be finite",
                           o.alpha, o.beta);
    alloy_device *dev = alloy_array_device(a);
    if (alloy_array_device(b) != dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_matmul: a lives on %s but b on %s",
                           alloy_device_name(dev), alloy_device_name(alloy_array_device(b)));
    if (stream && alloy_stream_device(stream) != dev)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_matmul: the stream belongs to %s but a and b live on %s",
                           alloy_device_name(alloy_stream_device(stream)), alloy_device_name(dev));
    const alloy_dtype dt = alloy_array_dtype(a);
    if (!gemm_dtype(dt))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "alloy_matmul: a is %s; matmul takes float32, float16, bfloat16 or float64",
                           alloy_dtype_name(dt));
    if (alloy_array_dtype(b) != dt)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "alloy_matmul: a is %s but b is %s: give both the same dtype", alloy_dtype_name(dt),
                           alloy_dtype_name(alloy_array_dtype(b)));
    alloy_dtype odt = o.out_dtype_set ? o.out_dtype : dt;
    if (*out) odt = o.out_dtype_set ? o.out_dtype : alloy_array_dtype(*out);
    if (!gemm_dtype(odt))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "alloy_matmul: the result dtype %s is not float32, float16, bfloat16 or float64",
                           alloy_dtype_name(odt));
    if (!*out && o.beta != 0.0)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "alloy_matmul: beta is %g but no out array was given (beta scales out's old values)",
                           o.beta);

    operand A, B;
    alloy_status st = describe(a, "a", o.transpose_a, 0, &A);
    if (st == ALLOY_OK) st = describe(b, "b", o.transpose_b, 1, &B);
    if (st != ALLOY_OK) return st;
    if (A.cols != B.rows)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "alloy_matmul: a has %lld columns%s but b has %lld rows%s (they must agree)",
                           (long long)A.cols, o.transpose_a ? " (transposed)" : "", (long long)B.rows,
                           o.transpose_b ? " (transposed)" : "");
    const int64_t M = A.rows, N = B.cols, K = A.cols;

    /* the result's shape: broadcast batch, then M and N (minus 1-D operands' dims) */
    const int nb = A.nb > B.nb ? A.nb : B.nb;
    int64_t rshape[ALLOY_MAX_NDIM];
    for (int d = 0; d < nb; d++) {
        int da = d - (nb - A.nb), db = d - (nb - B.nb);
        int64_t ea = da >= 0 ? A.bshape[da] : 1, eb = db >= 0 ? B.bshape[db] : 1;
        if (ea != eb && ea != 1 && eb != 1)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "alloy_matmul: the leading dimensions do not broadcast: a has %lld where b "
                               "has %lld (result dimension %d)",
                               (long long)ea, (long long)eb, d);
        rshape[d] = ea > eb ? ea : eb;
    }
    int rnd = nb;
    int64_t full[ALLOY_MAX_NDIM];
    memcpy(full, rshape, sizeof(int64_t) * (size_t)nb);
    if (alloy_array_ndim(a) > 1) full[rnd++] = M;
    if (alloy_array_ndim(b) > 1) full[rnd++] = N;
    if (rnd > ALLOY_MAX_NDIM)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_matmul: the result would have %d dimensions (at most %d)",
                           rnd, ALLOY_MAX_NDIM);

    /* the result array */
    alloy_array *c = *out;
    if (c) {
        if (alloy_array_device(c) != dev)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_matmul: out lives on %s but a and b on %s",
                               alloy_device_name(alloy_array_device(c)), alloy_device_name(dev));
        int same = alloy_array_ndim(c) == rnd;
        for (int d = 0; same && d < rnd; d++) same = alloy_array_shape(c)[d] == full[d];
        if (!same)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "alloy_matmul: out has the wrong shape (the result is %d-D, %lld x %lld per "
                               "matrix)", rnd, (long long)M, (long long)N);
        if (alloy_array_dtype(c) != odt)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_matmul: out is %s but the result dtype is %s",
                               alloy_dtype_name(alloy_array_dtype(c)), alloy_dtype_name(odt));
        if (!alloy_array_is_row_contiguous(c))
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "alloy_matmul: out must be row-contiguous (results are written row-major)");
    } else {
        st = alloy_array_new(dev, odt, rnd, full, &c);
        if (st != ALLOY_OK) return st;
    }
    int64_t total = 1;
    for (int d = 0; d < nb; d++) total *= rshape[d];
    if (M == 0 || N == 0 || total == 0) {
        if (!*out) *out = c;
        return ALLOY_OK;
    }

    /* batch strides of the three operands over the result's batch, collapsed
     * into one strided batch per launch where they allow it */
    int64_t s[3][ALLOY_MAX_NDIM];
    batch_strides(&A, nb, rshape, s[0]);
    batch_strides(&B, nb, rshape, s[1]);
    alloy_batch_contiguous_strides(nb, rshape, M * N, s[2]);
    alloy_batch_layout bl;
    alloy_batch_layout_init(&bl, nb, rshape, 3, (const int64_t(*)[ALLOY_MAX_NDIM])s);
    const int first = bl.first;
    const int64_t inner = bl.inner, outer = bl.outer;
    const int64_t sab = bl.inner_stride[0], sbb = bl.inner_stride[1], scb = bl.inner_stride[2];
    /* float32 on Hopper: TF32 parts on the tensor cores (matmul_tf32.c), for
     * matrices that fill its tiles (smaller ones idle it: the SIMT kernels are
     * as fast there); where its workspace cannot be allocated, the SIMT
     * kernels too */
    if (is_hopper(dev) && dt == ALLOY_FLOAT32 && M > 64 && N > 64 && inner <= MAX_GRID_Z) { /* its pre-pass: a batch in z */
        const int passes = o.precision == ALLOY_PRECISION_HIGHEST ? 6 : o.precision == ALLOY_PRECISION_HIGH ? 3 : 1;
        const alloy_matmul_tf32_job job = {a, b, c, M, N, K, inner, sab, A.rs, A.cs, sbb, B.rs, B.cs, scb, N, &bl,
                                           o.alpha, o.beta, passes};
        st = alloy_matmul_tf32(&job, stream);
        if (st != ALLOY_ERROR_OUT_OF_MEMORY && st != ALLOY_ERROR_UNSUPPORTED) { /* (those: nothing queued) */
            if (st != ALLOY_OK) {
                if (!*out) alloy_array_free(c);
                return st;
            }
            if (!*out) *out = c;
            return ALLOY_OK;
        }
        alloy_clear_error(); /* the SIMT kernels take it: no error stays behind */
    }

    alloy_launch *l = NULL;
    plan p = {0};
    st = alloy_launch_new(&l);
    /* the outer batch strides (moves of the origin between launches) */
    int64_t outer_a = 0, outer_b = 0;
    for (int d = 0; d < first; d++) {
        outer_a |= s[0][d];
        outer_b |= s[1][d];
    }
    const layout lay = {alloy_array_data(a), alloy_array_data(b), sab, A.rs, A.cs, sbb, B.rs, B.cs,
                        outer_a, outer_b, M, N, K, alloy_array_data(c), o.beta};
    if (st == ALLOY_OK) st = choose_kernel(dev, dt, odt, &lay, &p, l);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, c);
    const int64_t tm = p.tile_m ? p.tile_m : 1, tn = p.tile_n ? p.tile_n : 1;
    const int64_t gx = (N + tn - 1) / tn, gy = (M + tm - 1) / tm;
    if (st == ALLOY_OK && gx * p.threads > UINT32_MAX)
        st = alloy_error(ALLOY_ERROR_UNSUPPORTED, "alloy_matmul: %lld x %lld is too large for one launch",
                         (long long)M, (long long)N);
    if (p.persistent) {
        /* the kernel numbers the tiles (batch x rows x columns) in 32 bits */
        const int64_t tiles = gx * gy * inner, groups = tiles < p.persistent ? tiles : p.persistent;
        if (st == ALLOY_OK && tiles > INT32_MAX)
            st = alloy_error(ALLOY_ERROR_UNSUPPORTED, "alloy_matmul: %lld tiles of %u x %u are too many for one launch",
                             (long long)tiles, p.tile_m, p.tile_n);
        if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)(groups * p.threads), 1, 1);
    } else if (p.per_group && st == ALLOY_OK) {
        /* as many rounds of resident threadgroups as the batch needs, the
         * groups evened out over them */
        const int64_t units = (inner + p.per_group - 1) / p.per_group;
        int64_t groups = units;
        if (p.resident > 0 && units > p.resident) {
            const int64_t rounds = (units + p.resident - 1) / p.resident;
            groups = (units + rounds - 1) / rounds;
        }
        st = alloy_launch_set_grid(l, (uint32_t)(groups * p.threads), 1, 1);
    }
    /* kernels with a matrix per threadgroup along z and a tile row per
     * threadgroup along y take the batch and the rows in launches of at most
     * MAX_GRID_Z matrices and tile rows (the others loop over both) */
    const int looped = p.persistent || p.per_group;
    const int64_t piece = looped ? inner : MAX_GRID_Z, rows = looped ? M : MAX_GRID_Z * tm;
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, p.threads, 1, 1);
    const struct {
        const char *name;
        int64_t v;
    } ints[] = {{"M", M},        {"N", N},        {"K", K},       {"batch", inner}, {"sa_b", sab},
                {"sa_m", A.rs},  {"sa_k", A.cs},  {"sb_b", sbb},  {"sb_k", B.rs},   {"sb_n", B.cs},
                {"sc_b", scb},   {"sc_m", N},     {"tile_m", tm}, {"tile_n", tn}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0] && st == ALLOY_OK; i++)
        st = alloy_launch_set_constant_int(l, ints[i].name, ALLOY_INT64, ints[i].v);
    if (st == ALLOY_OK) st = alloy_launch_set_constant(l, "alpha", ALLOY_FLOAT64, o.alpha);
    if (st == ALLOY_OK) st = alloy_launch_set_constant(l, "beta", ALLOY_FLOAT64, o.beta);

    /* One launch per outer batch index (usually one in all) and piece of the
     * inner batch and of the rows; the operands stay the caller's arrays,
     * the indices move their origins. */
    alloy_array *ins[2] = {a, b};
    for (int64_t ob = 0; ob < outer && st == ALLOY_OK; ob++) {
        int64_t offs[3];
        alloy_batch_layout_offsets(&bl, ob, offs);
        for (int64_t i0 = 0; i0 < inner && st == ALLOY_OK; i0 += piece) {
            const int64_t n = inner - i0 < piece ? inner - i0 : piece;
            for (int64_t m0 = 0; m0 < M && st == ALLOY_OK; m0 += rows) {
                const int64_t mr = M - m0 < rows ? M - m0 : rows;
                if (!looped) {
                    st = alloy_launch_set_grid(l, (uint32_t)(gx * p.threads), (uint32_t)((mr + tm - 1) / tm),
                                               (uint32_t)n);
                    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "batch", ALLOY_INT64, n);
                    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "M", ALLOY_INT64, mr);
                }
                if (st == ALLOY_OK)
                    st = alloy_launch_set_constant_int(l, "a_off", ALLOY_INT64, offs[0] + i0 * sab + m0 * A.rs);
                if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "b_off", ALLOY_INT64, offs[1] + i0 * sbb);
                if (st == ALLOY_OK)
                    st = alloy_launch_set_constant_int(l, "c_off", ALLOY_INT64, offs[2] + i0 * scb + m0 * N);
                if (st == ALLOY_OK && p.tensor_maps) /* the maps' origins move with the offsets */
                    st = set_tensor_maps(l, M, N, K, n, offs[0] + i0 * sab, A.rs, sab, offs[1] + i0 * sbb, B.rs, sbb,
                                         offs[2] + i0 * scb, scb, p.c_box_cols, p.c_box_rows);
                alloy_array *res = NULL;
                if (st == ALLOY_OK) st = alloy_kernel_apply(p.kernel, 2, ins, l, stream, &res);
                alloy_array_free(res);
            }
        }
    }
    alloy_launch_free(l);
    if (st != ALLOY_OK) {
        if (!*out) alloy_array_free(c);
        return st;
    }
    if (!*out) *out = c;
    return ALLOY_OK;
}
