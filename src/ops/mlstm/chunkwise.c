/* chunkwise.c — alloy_mlstm_chunkwise (alloy/mlstm.h): the chunkwise form of
 * the mLSTM cell over whole sequences, dense or packed (cu_seqlens), from
 * given or zero initial states, with the final states if asked for.
 *
 * One launch of mlstm_chunkwise on the caller's stream: one threadgroup of
 * 256 threads per (sequence, head, tile of TV columns of h), walking its
 * sequence's chunks in order with its slice of the state in registers (the
 * kernel file explains the design). This file picks the kernel's
 * specialisation: DHQK padded (DKP) and sliced (DS), the column tile TV (64,
 * 32 for DHQK > 256 to bound the registers that hold the state, smaller when
 * the threadgroup memory would pass what a Hopper GPU gives one group), and
 * computes that memory. Nothing waits for the device; nothing is allocated
 * when h (and the final states, if asked for) are given and the inputs are
 * row-contiguous. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "core/error.h"
#include "ops/catalog.h"
#include "ops/mlstm/mlstm_internal.h"

static const char CHUNK_FILE[] = "src/ops/mlstm/kernels/mlstm_chunkwise.metal";

static const char FN[] = "alloy_mlstm_chunkwise";

/* What one threadgroup may use: Hopper's 227 KiB, on every backend, so a
 * specialisation that runs on the CPU also runs on the GPU. */
static const size_t SMEM_BUDGET = 227 * 1024;

/* The kernel's threadgroup memory for these template arguments (the layout
 * of mlstm_chunkwise.metal). */
static size_t chunkwise_smem(size_t tsize, int64_t L, int64_t DKP, int64_t DS, int64_t TV) {
    const int64_t BLK = L < 64 ? L : 64, NB = L / BLK, TVX = TV + 8;
    const int64_t LDQ = DS + 8, LDP = BLK + 8, LDV = ((TVX + 8) / 8 | 1) * 8;
    const int64_t t_elems = 2 * BLK * LDQ + BLK * LDP + BLK * LDV + DKP * LDV;
    const size_t t_bytes = ((size_t)t_elems * tsize + 15) / 16 * 16;
    return t_bytes + 4 * (size_t)(5 * L + NB + BLK * BLK + BLK + 4);
}


/* Whether the kernel may copy q, k and v in 16-byte pieces (cp.async on
 * CUDA): rows a whole number of pieces and first elements 16-byte aligned
 * (a non-contiguous operand reaches the kernel as a fresh, aligned copy). */
static int vec_rows(alloy_array *q, alloy_array *k, alloy_array *v, int64_t DHQK, int64_t DHHV, size_t tsize) {
    const int64_t per = (int64_t)(16 / tsize);
    if (DHQK % per != 0 || DHHV % per != 0) return 0;
    alloy_array *ops[3] = {q, k, v};
    for (int e = 0; e < 3; e++)
        if (alloy_array_is_row_contiguous(ops[e]) && (uintptr_t)alloy_array_data(ops[e]) % 16 != 0) return 0;
    return 1;
}

/* The RES branch's threadgroup memory (the whole chunk resident, L <= 64). */
static size_t resident_smem(size_t tsize, int64_t L, int64_t DKP, int64_t TV) {
    const int64_t TVX = TV + 8;
    const int64_t LDK = DKP + 8, LDP = L + 8, LDV = ((TVX + 8) / 8 | 1) * 8;
    const int64_t t_elems = 2 * L * LDK + 2 * L * LDV + L * LDP + DKP * LDV;
    const size_t t_bytes = ((size_t)t_elems * tsize + 15) / 16 * 16;
    return t_bytes + 4 * (size_t)(6 * L + L * L + L + 4);
}

/* Checks one optional state operand: all of c, n, m given or none. */
static alloy_status check_states(const char *what, alloy_array *c, alloy_array *n, alloy_array *m, alloy_device *dev,
                                 const int64_t *s_c, const int64_t *s_n, const int64_t *s_m, int *given) {
    const int count = (c != NULL) + (n != NULL) + (m != NULL);
    *given = count == 3;
    if (count == 0) return ALLOY_OK;
    if (count != 3)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: c_%s, n_%s and m_%s must be given together (or none)",
                           FN, what, what, what);
    char name[32];
    alloy_status st;
    snprintf(name, sizeof name, "c_%s", what);
    if ((st = alloy_mlstm_check(FN, name, c, dev, ALLOY_FLOAT32, 4, s_c)) != ALLOY_OK) return st;
    snprintf(name, sizeof name, "n_%s", what);
    if ((st = alloy_mlstm_check(FN, name, n, dev, ALLOY_FLOAT32, 3, s_n)) != ALLOY_OK) return st;
    snprintf(name, sizeof name, "m_%s", what);
    return alloy_mlstm_check(FN, name, m, dev, ALLOY_FLOAT32, 3, s_m);
}

alloy_status alloy_mlstm_chunkwise(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i, alloy_array *f,
                                   alloy_array *c_initial, alloy_array *n_initial, alloy_array *m_initial,
                                   alloy_array *cu_seqlens, int chunk_size, double eps, alloy_stream *stream,
                                   alloy_array **h, alloy_array **c_out, alloy_array **n_out, alloy_array **m_out) {
    alloy_status st = alloy_mlstm_check_q(FN, q, 4, stream);
    if (st != ALLOY_OK) return st;
    if ((st = alloy_mlstm_check_eps(FN, eps)) != ALLOY_OK) return st;
    int64_t L;
    if ((st = alloy_mlstm_chunk_length(FN, chunk_size, &L)) != ALLOY_OK) return st;
    alloy_device *dev = alloy_array_device(q);
    const alloy_dtype dt = alloy_array_dtype(q);
    const int64_t *qs = alloy_array_shape(q);
    const int64_t B = qs[0], NH = qs[1], S = qs[2], DHQK = qs[3];
    if (DHQK > 512)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: DHQK is %lld; the chunkwise kernel takes at most 512", FN,
                           (long long)DHQK);
    alloy_mlstm_dims dims;
    if ((st = alloy_mlstm_check_sequences(FN, q, k, v, i, f, &dims)) != ALLOY_OK) return st;
    const int64_t DHHV = dims.DHHV;
    const int64_t *s_v = dims.v;

    /* the sequences: B dense rows, or the packed ones of cu_seqlens */
    int64_t nseq = B;
    if ((st = alloy_mlstm_check_cu_seqlens(FN, cu_seqlens, dev, B, S, &nseq)) != ALLOY_OK) return st;
    const int64_t s_c[4] = {nseq, NH, DHQK, DHHV}, s_n[3] = {nseq, NH, DHQK}, s_m[3] = {nseq, NH, 1};
    int has_init = 0;
    if ((st = check_states("initial", c_initial, n_initial, m_initial, dev, s_c, s_n, s_m, &has_init)) != ALLOY_OK)
        return st;
    const int nslots = (c_out != NULL) + (n_out != NULL) + (m_out != NULL);
    if (nslots != 0 && nslots != 3)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: c_out, n_out and m_out must be asked for together (all three slots or none)", FN);
    const int states_out = nslots == 3;

    /* the specialisation: the resident branch when the chunk is one block
     * and its threadgroup memory fits with at least 32 columns per group,
     * else the general one */
    const size_t tsize = alloy_dtype_size(dt);
    const int64_t dv8 = (DHHV + 7) / 8 * 8;
    int res = 0;
    int64_t DKP = (DHQK + 15) / 16 * 16, DS = DKP < 64 ? DKP : 64, TV = 0;
    size_t smem = 0;
    if (L <= 64) {
        TV = dv8 < 64 ? dv8 : 64;
        while (resident_smem(tsize, L, DKP, TV) > SMEM_BUDGET && TV > 8) TV = TV / 2 < 8 ? 8 : (TV / 2 + 7) / 8 * 8;
        smem = resident_smem(tsize, L, DKP, TV);
        res = smem <= SMEM_BUDGET && (TV >= 32 || TV == dv8);
    }
    if (!res) {
        DKP = DHQK <= 64 ? (DHQK + 15) / 16 * 16 : (DHQK + 63) / 64 * 64;
        DS = DKP < 64 ? DKP : 64;
        TV = DKP <= 256 ? 64 : 32;
        if (TV > dv8) TV = dv8;
        while (chunkwise_smem(tsize, L, DKP, DS, TV) > SMEM_BUDGET && TV > 8)
            TV = TV / 2 < 8 ? 8 : (TV / 2 + 7) / 8 * 8;
        smem = chunkwise_smem(tsize, L, DKP, DS, TV);
    }
    if (smem > SMEM_BUDGET)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED,
                           "%s: chunk_size %lld with DHQK %lld and %s inputs needs %zu bytes of threadgroup memory "
                           "(at most %zu); use a smaller chunk_size",
                           FN, (long long)L, (long long)DHQK, alloy_dtype_name(dt), smem, SMEM_BUDGET);
    const int64_t VT = (DHHV + TV - 1) / TV;
    const int64_t groups = nseq * NH * VT;
    if (groups > (int64_t)(UINT32_MAX / 256))
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: sequences * NH * DHHV is too large for one launch", FN);

    alloy_array *oh = NULL, *oc = NULL, *on = NULL, *om = NULL;
    int ch = 0, cc = 0, cn = 0, cm = 0;
    st = alloy_mlstm_prepare_out(FN, "h", h, dev, dt, 4, s_v, &oh, &ch);
    if (st == ALLOY_OK && states_out) {
        st = alloy_mlstm_prepare_out(FN, "c_out", c_out, dev, ALLOY_FLOAT32, 4, s_c, &oc, &cc);
        if (st == ALLOY_OK) st = alloy_mlstm_prepare_out(FN, "n_out", n_out, dev, ALLOY_FLOAT32, 3, s_n, &on, &cn);
        if (st == ALLOY_OK) st = alloy_mlstm_prepare_out(FN, "m_out", m_out, dev, ALLOY_FLOAT32, 3, s_m, &om, &cm);
    }
    alloy_kernel *kc = NULL;
    if (st == ALLOY_OK) st = alloy_catalog_kernel(CHUNK_FILE, &kc);
    if (st == ALLOY_OK && groups > 0) {
        alloy_launch *l = NULL;
        st = alloy_launch_new(&l);
        if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "T", dt);
        const struct {
            const char *name;
            int64_t v;
        } tints[] = {{"L", L}, {"DKP", DKP}, {"DS", DS}, {"TV", TV}};
        for (size_t e = 0; e < sizeof tints / sizeof tints[0] && st == ALLOY_OK; e++)
            st = alloy_launch_add_template_int(l, tints[e].name, tints[e].v);
        if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "HAS_INIT", has_init);
        if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "VARLEN", cu_seqlens != NULL);
        if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "STATES_OUT", states_out);
        if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "VEC", vec_rows(q, k, v, DHQK, DHHV, tsize));
        if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "RES", res);
        /* absent state outputs are bound to h (the kernel never writes them) */
        alloy_array *outs[4] = {oh, states_out ? oc : oh, states_out ? on : oh, states_out ? om : oh};
        for (int e = 0; e < 4 && st == ALLOY_OK; e++) st = alloy_launch_add_output_array(l, outs[e]);
        if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)(groups * 256), 1, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, 256, 1, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup_memory(l, smem);
        const struct {
            const char *name;
            int64_t v;
        } ints[] = {{"S", S}, {"NH", NH}, {"DHQK", DHQK}, {"DHHV", DHHV}, {"VT", VT}};
        for (size_t e = 0; e < sizeof ints / sizeof ints[0] && st == ALLOY_OK; e++)
            st = alloy_launch_set_constant_int(l, ints[e].name, ALLOY_INT32, ints[e].v);
        if (st == ALLOY_OK) st = alloy_launch_set_constant(l, "scale", ALLOY_FLOAT32, 1.0 / sqrt((double)DHQK));
        if (st == ALLOY_OK) st = alloy_launch_set_constant(l, "eps", ALLOY_FLOAT32, eps);
        /* absent inputs are bound to q (never read) */
        alloy_array *ins[9] = {q, k, v, i, f, has_init ? c_initial : q, has_init ? n_initial : q,
                               has_init ? m_initial : q, cu_seqlens ? cu_seqlens : q};
        alloy_array *res[4] = {NULL, NULL, NULL, NULL};
        if (st == ALLOY_OK) st = alloy_kernel_apply(kc, 9, ins, l, stream, res);
        for (int e = 0; e < 4; e++) alloy_array_free(res[e]);
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
