/* step.c — alloy_mlstm_step (alloy/mlstm.h): one recurrent mLSTM step for
 * B sequences, the decoding loop's kernel.
 *
 * One launch on the caller's stream when the new n and m go to other arrays
 * than the old ones, two when they are updated in place; nothing waits for
 * the device. mlstm_step computes C' and h (one threadgroup per (sequence,
 * head, 32 or 128 columns of C), coalesced over DHHV) and, into other arrays,
 * n' and m'; in place, mlstm_step_nm writes n' and m' (one threadgroup per
 * (sequence, head)) after every threadgroup of the first launch has read the
 * old ones (one launch doing both lost: docs/mlstm.md). The same kernels
 * run on every backend; sizes, scale and eps are launch constants, so a new
 * shape or eps never recompiles. */
#include <math.h>
#include <stdint.h>

#include "core/error.h"
#include "ops/catalog.h"
#include "ops/env_override.h"
#include "ops/vector_access.h"
#include "ops/mlstm/mlstm_internal.h"

static const char STEP_FILE[] = "src/ops/mlstm/kernels/mlstm_step.metal";
static const char NM_FILE[] = "src/ops/mlstm/kernels/mlstm_step_nm.metal";

static const char FN[] = "alloy_mlstm_step";

/* Whether a's and b's bytes share any address (an output over its input). */
static int overlaps(alloy_array *a, alloy_array *b) {
    const uintptr_t pa = (uintptr_t)alloy_array_data(a), pb = (uintptr_t)alloy_array_data(b);
    const uintptr_t na = (uintptr_t)alloy_array_nbytes(a), nb = (uintptr_t)alloy_array_nbytes(b);
    return pa < pb + nb && pb < pa + na;
}

alloy_status alloy_mlstm_step(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i, alloy_array *f,
                              alloy_array *c, alloy_array *n, alloy_array *m, double eps, alloy_stream *stream,
                              alloy_array **h, alloy_array **c_out, alloy_array **n_out, alloy_array **m_out) {
    alloy_status st = alloy_mlstm_check_q(FN, q, 3, stream);
    if (st != ALLOY_OK) return st;
    if ((st = alloy_mlstm_check_eps(FN, eps)) != ALLOY_OK) return st;
    alloy_device *dev = alloy_array_device(q);
    const alloy_dtype dt = alloy_array_dtype(q);
    const int64_t *qs = alloy_array_shape(q);
    const int64_t B = qs[0], NH = qs[1], DHQK = qs[2];
    if (!v) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: v is NULL", FN);
    if (alloy_array_ndim(v) != 3 || alloy_array_shape(v)[2] < 1 || alloy_array_shape(v)[2] > INT32_MAX / 2)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: v must be (B, NH, DHHV) with 1 <= DHHV", FN);
    const int64_t DHHV = alloy_array_shape(v)[2];
    const int64_t s_qk[3] = {B, NH, DHQK}, s_v[3] = {B, NH, DHHV}, s_g[3] = {B, NH, 1};
    const int64_t s_c[4] = {B, NH, DHQK, DHHV};
    if ((st = alloy_mlstm_check(FN, "k", k, dev, dt, 3, s_qk)) != ALLOY_OK) return st;
    if ((st = alloy_mlstm_check(FN, "v", v, dev, dt, 3, s_v)) != ALLOY_OK) return st;
    if ((st = alloy_mlstm_check(FN, "i", i, dev, dt, 3, s_g)) != ALLOY_OK) return st;
    if ((st = alloy_mlstm_check(FN, "f", f, dev, dt, 3, s_g)) != ALLOY_OK) return st;
    if ((st = alloy_mlstm_check(FN, "c", c, dev, ALLOY_FLOAT32, 4, s_c)) != ALLOY_OK) return st;
    if ((st = alloy_mlstm_check(FN, "n", n, dev, ALLOY_FLOAT32, 3, s_qk)) != ALLOY_OK) return st;
    if ((st = alloy_mlstm_check(FN, "m", m, dev, ALLOY_FLOAT32, 3, s_g)) != ALLOY_OK) return st;
    const int64_t BH = B * NH;
    if (BH > 0 && BH * ((DHHV + 31) / 32) > (int64_t)(UINT32_MAX / 32))
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: B * NH = %lld is too large for one launch", FN,
                           (long long)BH);

    alloy_array *oh = NULL, *oc = NULL, *on = NULL, *om = NULL;
    int ch = 0, cc = 0, cn = 0, cm = 0;
    st = alloy_mlstm_prepare_out(FN, "h", h, dev, dt, 3, s_v, &oh, &ch);
    if (st == ALLOY_OK) st = alloy_mlstm_prepare_out(FN, "c_out", c_out, dev, ALLOY_FLOAT32, 4, s_c, &oc, &cc);
    if (st == ALLOY_OK) st = alloy_mlstm_prepare_out(FN, "n_out", n_out, dev, ALLOY_FLOAT32, 3, s_qk, &on, &cn);
    if (st == ALLOY_OK) st = alloy_mlstm_prepare_out(FN, "m_out", m_out, dev, ALLOY_FLOAT32, 3, s_g, &om, &cm);

    alloy_kernel *ks = NULL, *kn = NULL;
    if (st == ALLOY_OK) st = alloy_catalog_kernel(STEP_FILE, &ks);
    if (st == ALLOY_OK) st = alloy_catalog_kernel(NM_FILE, &kn);
    if (st == ALLOY_OK && BH > 0) {
        /* n' and m' in this launch unless they overwrite n and m; 16-byte
         * columns (W = 4) when aligned and the batch gives enough threadgroups,
         * else one column per lane and 16 rows of threads (one sequence's
         * state spread over the GPU) */
        const int in_place = overlaps(on, n) || overlaps(om, m);
        const int nm = !in_place;
        alloy_array *cs[2] = {c, oc};
        const int w4 = DHHV % 4 == 0 && alloy_ops_aligned16(2, cs) && BH * ((DHHV + 127) / 128) >= 512;
        const int64_t W = w4 ? 4 : 1, tiles = (DHHV + 32 * W - 1) / (32 * W), groups = BH * tiles;
        /* rows of threads and rows loaded before the first store: with 16-byte columns 8 and 16, and 16 and 8
         * (the same 128 rows a batch: one threadgroup of 16 warps an SM at 85-89 registers instead of two of 8 at
         * 128) once the batch gives 4096 threadgroups (H200, bf16, 7B heads, B = 1024 in place: 95.2-95.7% of copy
         * against 94.7-95.1%; B = 256 95.1-95.4 against 94.7-95.2; B = 16, 512 threadgroups: 90.2-90.7 against
         * 92.8-93.1); one column a lane: 16 and 16. ALLOY_MLSTM_STEP_RY and ALLOY_MLSTM_STEP_RB (4 to 16) say
         * otherwise (timing) */
        const int many = w4 && groups >= 4096;
        const int64_t RY = alloy_ops_env_int("ALLOY_MLSTM_STEP_RY", 4, 16, w4 && !many ? 8 : 16);
        const int64_t RB = alloy_ops_env_int("ALLOY_MLSTM_STEP_RB", 4, 16, many ? 8 : 16);
        /* with 16-byte columns each batch's rows in two halves, each half's registers reloaded with the next
         * batch's rows right after its math (mlstm_step.metal's PIPE; RB even), so that the next batch's loads
         * start halfway through this one's math and stores (H200, bf16, 7B heads, B = 1024 in place: 94.9-95.0%
         * of copy against 94.0-94.4%); ALLOY_MLSTM_STEP_PIPE=0|1 says otherwise (timing) */
        const int pipe = RB % 2 == 0 && (int)alloy_ops_env_int("ALLOY_MLSTM_STEP_PIPE", 0, 1, w4);
        /* ALLOY_MLSTM_STEP_KT=1 (timing; DHQK <= 512): the rows' k and q^ from threadgroup memory, where the
         * gates' loads put them, instead of each thread's own loads (mlstm_step.metal's KT) */
        const int kt = DHQK <= 512 && (int)alloy_ops_env_int("ALLOY_MLSTM_STEP_KT", 0, 1, 0);
        /* ALLOY_MLSTM_STEP_MINB=k (timing): a launch bound of k threadgroups an SM (registers capped to fit) */
        const int minb = (int)alloy_ops_env_int("ALLOY_MLSTM_STEP_MINB", 0, 4, 0);
        alloy_launch *l = NULL;
        st = alloy_launch_new(&l);
        /* C' and h (and n', m') */
        if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "T", dt);
        if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "W", W);
        if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "RY", RY);
        if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "NM", nm);
        if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "RB", RB);
        if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "PIPE", pipe);
        if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "KT", kt);
        if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "MINB", minb);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, oh);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, oc);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, on);
        if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, om);
        if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)(groups * 32), (uint32_t)RY, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, 32, (uint32_t)RY, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "DHQK", ALLOY_INT32, DHQK);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "DHHV", ALLOY_INT32, DHHV);
        if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "tiles", ALLOY_INT32, tiles);
        if (st == ALLOY_OK) st = alloy_launch_set_constant(l, "scale", ALLOY_FLOAT32, 1.0 / sqrt((double)DHQK));
        if (st == ALLOY_OK) st = alloy_launch_set_constant(l, "eps", ALLOY_FLOAT32, eps);
        if (st == ALLOY_OK) st = alloy_launch_set_overlap(l, alloy_ops_overlap());
        alloy_array *ins[8] = {q, k, v, i, f, c, n, m}, *res[4] = {NULL, NULL, NULL, NULL};
        if (st == ALLOY_OK) st = alloy_kernel_apply(ks, 8, ins, l, stream, res);
        for (int e = 0; e < 4; e++) alloy_array_free(res[e]);
        if (st == ALLOY_OK && !nm) { /* in place: n' and m' after every reader of n and m above */
            st = alloy_launch_reset(l);
            if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "T", dt);
            if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, on);
            if (st == ALLOY_OK) st = alloy_launch_add_output_array(l, om);
            if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)(BH * 128), 1, 1);
            if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, 128, 1, 1);
            if (st == ALLOY_OK) st = alloy_launch_set_overlap(l, alloy_ops_overlap());
            if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "DHQK", ALLOY_INT32, DHQK);
            alloy_array *ins2[5] = {k, i, f, n, m};
            res[0] = res[1] = NULL;
            if (st == ALLOY_OK) st = alloy_kernel_apply(kn, 5, ins2, l, stream, res);
            alloy_array_free(res[0]);
            alloy_array_free(res[1]);
        }
        alloy_launch_free(l);
    }
    if (st != ALLOY_OK) {
        if (ch) alloy_array_free(oh);
        if (cc) alloy_array_free(oc);
        if (cn) alloy_array_free(on);
        if (cm) alloy_array_free(om);
        return st;
    }
    if (ch) *h = oh;
    if (cc) *c_out = oc;
    if (cn) *n_out = on;
    if (cm) *m_out = om;
    return ALLOY_OK;
}
