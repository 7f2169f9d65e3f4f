/* matmul_tf32.c — alloy_matmul's float32 path on Hopper GPUs: each element
 * split into TF32 parts, the products on the tensor cores — six per product
 * of elements at precision "highest" (exact products to 2^-32, float32
 * sums), three at "high" (each factor to about 22 bits), one at "default"
 * (TF32's 11 bits).
 *
 * Two steps per launch of the batch: matmul_tf32_split.metal rewrites A and
 * B (B transposed) as K-major blocks of TF32 parts in a workspace, padded to
 * whole tiles with zeros; matmul_tf32.metal multiplies those. The pre-pass
 * is what makes the product fast: TF32 tensor-core products read both
 * operands K-major from shared memory, so B (N-major) cannot be read as it is,
 * and rounding every element once here keeps conversions out of the inner
 * loop. Any strides work (the pre-pass reads them), so transposed and
 * strided operands take this path as they are. The workspace, (M + N) x K
 * floats times the parts (3, 2, 1) plus padding, is scratch of
 * the device's caching allocator, released once the launches are queued (the
 * runtime keeps a launch's arrays until it has run). */
#include <stdint.h>

#include "alloy/alloy.h"
#include "core/error.h"
#include "ops/catalog.h"
#include "matmul_tf32.h"

static const char SPLIT_FILE[] = "src/ops/linalg/kernels/matmul_tf32_split.metal";
static const char GEMM_FILE[] = "src/ops/linalg/kernels/matmul_tf32.metal";
enum { TILE_M = 128, BLOCK_K = 32, THREADS = 256 };
static const size_t GEMM_SMEM = 192 * 1024 + 1024;

typedef struct int_const {
    const char *name;
    int64_t v;
} int_const;

static alloy_status set_ints(alloy_launch *l, const int_const *c, size_t n) {
    alloy_status st = ALLOY_OK;
    for (size_t i = 0; i < n && st == ALLOY_OK; i++) st = alloy_launch_set_constant_int(l, c[i].name, ALLOY_INT64, c[i].v);
    return st;
}

/* Queues the pre-pass of one operand: x's rows r < R (stride s_r) and k < K
 * (stride s_k), nb matrices (stride s_b) from element x_off, into l's output
 * (nb x Rp rows of KB blocks). */
static alloy_status split(alloy_kernel *kern, alloy_launch *l, alloy_array *x, int64_t R, int64_t K,
                          int64_t s_r, int64_t s_k, int64_t s_b, int64_t x_off, int64_t nb, int64_t Rp,
                          int64_t KB, alloy_stream *stream) {
    const int_const c[] = {{"R", R},   {"K", K},   {"s_r", s_r}, {"s_k", s_k},
                           {"s_b", s_b}, {"x_off", x_off}, {"Rp", Rp}, {"KB", KB}};
    alloy_status st = set_ints(l, c, sizeof c / sizeof c[0]);
    if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)(KB * THREADS), (uint32_t)(Rp / 32), (uint32_t)nb);
    alloy_array *res = NULL;
    if (st == ALLOY_OK) st = alloy_kernel_apply(kern, 1, &x, l, stream, &res);
    alloy_array_free(res);
    return st;
}

alloy_status alloy_matmul_tf32(const alloy_matmul_tf32_job *j, alloy_stream *stream) {
    static const char FN[] = "alloy_matmul";
    alloy_device *dev = alloy_array_device(j->c);
    const int64_t parts = j->passes == 6 ? 3 : j->passes == 3 ? 2 : 1, KB = (j->K + BLOCK_K - 1) / BLOCK_K;
    const int64_t tile_n = j->passes == 6 ? 128 : 256; /* three parts fill a stage at 128 columns */
    const int64_t gm = (j->M + TILE_M - 1) / TILE_M, gn = (j->N + tile_n - 1) / tile_n;
    const int64_t Mp = gm * TILE_M, Np = gn * tile_n, K2 = KB * BLOCK_K * parts;
    const int64_t na = j->sa_b ? j->batch : 1, nbb = j->sb_b ? j->batch : 1;
    const int64_t tiles = gm * gn * j->batch;
    if (tiles > INT32_MAX || Mp / 32 > 65535 || Np / 32 > 65535 || KB * THREADS > UINT32_MAX)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: %lld x %lld x %lld is too large for the TF32 kernels",
                           FN, (long long)j->M, (long long)j->N, (long long)j->K);
    if ((double)(na * Mp + nbb * Np) * (double)K2 * 4.0 > 0x1p62)
        return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "%s: the TF32 workspace would be too large", FN);
    alloy_kernel *ks = NULL, *kg = NULL;
    alloy_array *a2 = NULL, *b2 = NULL;
    alloy_launch *ls[2] = {NULL, NULL}, *lg = NULL; /* the pre-pass of A, of B; the GEMM */
    const int64_t sa2[1] = {na * Mp * K2}, sb2[1] = {nbb * Np * K2};
    alloy_status st = alloy_array_new(dev, ALLOY_FLOAT32, 1, sa2, &a2);
    if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 1, sb2, &b2);
    if (st != ALLOY_OK) {
        alloy_array_free(a2);
        return st; /* nothing queued: the caller may take another kernel */
    }
    st = alloy_catalog_kernel(SPLIT_FILE, &ks);
    if (st == ALLOY_OK) st = alloy_catalog_kernel(GEMM_FILE, &kg);
    for (int e = 0; e < 2; e++) {
        if (st == ALLOY_OK) st = alloy_launch_new(&ls[e]);
        if (st == ALLOY_OK) st = alloy_launch_add_template_int(ls[e], "PASSES", j->passes);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(ls[e], THREADS, 1, 1);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(ls[e], e ? b2 : a2);
    }
    if (st == ALLOY_OK) st = alloy_launch_new(&lg);
    if (st == ALLOY_OK) st = alloy_launch_add_template_int(lg, "PASSES", j->passes);
    if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(lg, "TOUT", alloy_array_dtype(j->c));
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup_memory(lg, GEMM_SMEM);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(lg, THREADS, 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_add_output_array(lg, j->c);
    /* one threadgroup per SM (its shared memory allows no second) */
    int64_t sms = alloy_device_multiprocessor_count(dev);
    if (sms < 1) sms = 1;
    const int64_t groups = tiles < sms ? tiles : sms;
    if (st == ALLOY_OK) st = alloy_launch_set_grid(lg, (uint32_t)(groups * THREADS), 1, 1);
    const int_const gc[] = {{"M", j->M},          {"N", j->N},          {"KB", KB},
                            {"batch", j->batch},  {"sa_b", j->sa_b ? Mp * K2 : 0},
                            {"sb_b", j->sb_b ? Np * K2 : 0}, {"sc_b", j->sc_b}, {"sc_m", j->sc_m}};
    if (st == ALLOY_OK) st = set_ints(lg, gc, sizeof gc / sizeof gc[0]);
    if (st == ALLOY_OK) st = alloy_launch_set_constant(lg, "alpha", ALLOY_FLOAT64, j->alpha);
    if (st == ALLOY_OK) st = alloy_launch_set_constant(lg, "beta", ALLOY_FLOAT64, j->beta);
    alloy_array *ins[2] = {a2, b2};
    for (int64_t ob = 0; ob < j->bl->outer && st == ALLOY_OK; ob++) {
        int64_t offs[3];
        alloy_batch_layout_offsets(j->bl, ob, offs);
        /* A as it is (rows m, columns k); B transposed (rows n, columns k) */
        st = split(ks, ls[0], j->a, j->M, j->K, j->sa_m, j->sa_k, j->sa_b, offs[0], na, Mp, KB, stream);
        if (st == ALLOY_OK)
            st = split(ks, ls[1], j->b, j->N, j->K, j->sb_n, j->sb_k, j->sb_b, offs[1], nbb, Np, KB, stream);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(lg, "c_off", ALLOY_INT64, offs[2]);
        alloy_array *res = NULL;
        if (st == ALLOY_OK) st = alloy_kernel_apply(kg, 2, ins, lg, stream, &res);
        alloy_array_free(res);
    }
    alloy_launch_free(ls[0]);
    alloy_launch_free(ls[1]);
    alloy_launch_free(lg);
    alloy_array_free(a2);
    alloy_array_free(b2);
    return st;
}
