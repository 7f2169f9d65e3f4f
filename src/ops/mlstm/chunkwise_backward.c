/* chunkwise_backward.c — alloy_mlstm_chunkwise_backward,
 * alloy_mlstm_chunkwise_backward_with_method and
 * alloy_mlstm_chunkwise_backward_kept (alloy/mlstm.h): the gradient of the
 * chunkwise forward, dense or packed (cu_seqlens), by the method asked for or
 * AUTO's choice — the chunk-parallel path (chunkwise_backward_split.c; from
 * the forward's kept chunk record, or recomputing it) or the exact kernel
 * here.
 *
 * The exact kernel, mlstm_chunkwise_backward: one launch, one threadgroup
 * (1024 threads on a GPU, 256 on the CPU) per (sequence, head) that
 * recomputes the chunk-start states in a forward sweep, then walks the chunks
 * backwards, recomputing each chunk's per-token states (the kernel file and
 * docs/mlstm.md give the math). This file checks the arguments, allocates the
 * device workspace the kernel keeps its states in (chunk-start states, one
 * chunk's token states, the carried gradient, each as hi + lo for float32's
 * accuracy, and the chunk starts' m) and frees it after the launch is queued
 * (the runtime keeps a launch's arrays alive until it has run). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/catalog.h"
#include "ops/mlstm/mlstm_internal.h"

static const char BWD_FILE[] = "src/ops/mlstm/kernels/mlstm_chunkwise_backward.metal";

static const char FN[] = "alloy_mlstm_chunkwise_backward";


/* All three of a state triple or none; each checked (dtype sdt). */
static alloy_status check_triple(const char *c_name, const char *n_name, const char *m_name, alloy_array *c,
                                 alloy_array *n, alloy_array *m, alloy_device *dev, alloy_dtype sdt,
                                 const int64_t *s_c, const int64_t *s_n, const int64_t *s_m, int *given) {
    const int count = (c != NULL) + (n != NULL) + (m != NULL);
    *given = count == 3;
    if (count == 0) return ALLOY_OK;
    if (count != 3)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: %s, %s and %s must be given together (or none)", FN,
                           c_name, n_name, m_name);
    alloy_status st = alloy_mlstm_check(FN, c_name, c, dev, sdt, 4, s_c);
    if (st == ALLOY_OK) st = alloy_mlstm_check(FN, n_name, n, dev, sdt, 3, s_n);
    if (st == ALLOY_OK) st = alloy_mlstm_check(FN, m_name, m, dev, sdt, 3, s_m);
    return st;
}

/* AUTO's choice: the chunk-parallel path for bfloat16 (for float32 its
 * hostile-gate error misses the exact kernel's bound, and float16's 16-bit
 * operands dh / den and P / den pass 65504 where den nears eps), unless
 * ALLOY_MLSTM_BWD_PATH=exact|split says otherwise (split: bfloat16 and
 * float32). */
static alloy_mlstm_backward_method auto_method(alloy_dtype dt) {
    const char *path = getenv("ALLOY_MLSTM_BWD_PATH");
    const int chunked_dtype = dt == ALLOY_BFLOAT16 || dt == ALLOY_FLOAT32;
    if (path && !strcmp(path, "exact")) return ALLOY_MLSTM_BACKWARD_EXACT;
    if (path && !strcmp(path, "split") && chunked_dtype) return ALLOY_MLSTM_BACKWARD_CHUNKED;
    return dt == ALLOY_BFLOAT16 ? ALLOY_MLSTM_BACKWARD_CHUNKED : ALLOY_MLSTM_BACKWARD_EXACT;
}

/* The chunk record kin against what the forward of these inputs keeps:
 * h (float32 inputs, float32 record) and the final states as the forward
 * returns them, the record arrays of their sizes (chunkwise.c's run_split:
 * one window of max(slots, 1) slots). A float16-tile record (float32 inputs
 * at DEFAULT: kept[4] given) also holds each state tile's factor (KT tiles
 * of at most 64 rows per column), q, k and v as float16 rows and the rows'
 * exponents; *scaled says which record it is. */
static alloy_status check_kept(const alloy_mlstm_kept_in *kin, alloy_device *dev, alloy_dtype dt, int64_t nseq,
                               int64_t NH, int64_t S, int64_t DHQK, int64_t DHHV, int64_t L, int packed,
                               const int64_t *s_qk, const int64_t *s_v, int *scaled) {
    const int sc = *scaled = dt == ALLOY_FLOAT32 && kin->kept[4] != NULL;
    const int64_t s_c[4] = {nseq, NH, DHQK, DHHV}, s_n[3] = {nseq, NH, DHQK};
    alloy_status st = dt == ALLOY_FLOAT32 && !sc ? alloy_mlstm_check(FN, "h", kin->h, dev, dt, 4, s_v) : ALLOY_OK;
    if (st == ALLOY_OK) st = alloy_mlstm_check(FN, "c_final", kin->c_final, dev, ALLOY_FLOAT32, 4, s_c);
    if (st == ALLOY_OK) st = alloy_mlstm_check(FN, "n_final", kin->n_final, dev, ALLOY_FLOAT32, 3, s_n);
    if (st != ALLOY_OK) return st;
    const int64_t Ls = L < 64 ? L : 64, slots = alloy_mlstm_split_slots(S, Ls, nseq, packed);
    const int64_t WN = slots > 0 ? slots : 1, KT = (DHQK + 63) / 64, rows = s_qk[0] * s_qk[1] * s_qk[2];
    const int64_t size[ALLOY_MLSTM_KEPT][4] = {{WN * NH * DHQK * DHHV},
                                               {WN * NH * DHQK},
                                               {WN * NH},
                                               {WN * NH * (sc ? 2 * Ls + 4 : Ls + 4)},
                                               {WN * NH * KT * DHHV},
                                               {s_qk[0], s_qk[1], s_qk[2], s_qk[3]},
                                               {s_qk[0], s_qk[1], s_qk[2], s_qk[3]},
                                               {s_v[0], s_v[1], s_v[2], s_v[3]},
                                               {3 * rows > 0 ? 3 * rows : 1}};
    const int nd[ALLOY_MLSTM_KEPT] = {1, 1, 1, 1, 1, 4, 4, 4, 1};
    const alloy_dtype type[ALLOY_MLSTM_KEPT] = {sc ? ALLOY_FLOAT16 : dt, ALLOY_FLOAT32, ALLOY_FLOAT32,
                                                ALLOY_FLOAT32, ALLOY_FLOAT32, ALLOY_FLOAT16,
                                                ALLOY_FLOAT16, ALLOY_FLOAT16, ALLOY_INT32};
    for (int e = 0; e < ALLOY_MLSTM_KEPT; e++) {
        const alloy_array *a = kin->kept[e];
        if (e >= 4 && !sc) {
            if (a)
                return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                                   "%s: kept[%d] is given, and kept[4] is %s for %s inputs (the float16-tile record "
                                   "of float32 inputs at DEFAULT fills kept[4..8], other records leave them NULL)",
                                   FN, e, kin->kept[4] ? "given" : "NULL", alloy_dtype_name(dt));
            continue;
        }
        int ok = a && alloy_array_device(a) == dev && alloy_array_dtype(a) == type[e] &&
                 alloy_array_ndim(a) == nd[e] && alloy_array_is_row_contiguous(a);
        for (int d = 0; ok && d < nd[e]; d++) ok = alloy_array_shape(a)[d] == size[e][d];
        if (!ok)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "%s: kept[%d] is not the record alloy_mlstm_chunkwise_keep keeps for these inputs and "
                               "chunk_size (a %d-D %s array of %lld elements on q's device)",
                               FN, e, nd[e], alloy_dtype_name(type[e]),
                               (long long)(nd[e] == 1 ? size[e][0] : size[e][0] * size[e][1] * size[e][2] * size[e][3]));
    }
    return ALLOY_OK;
}

/* Every public form of the backward: the arguments checked, the gradients
 * prepared, then the chunk-parallel path (from kin's record when given) or
 * the exact kernel. */
static alloy_status backward(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i, alloy_array *f,
                             alloy_array *c_initial, alloy_array *n_initial, alloy_array *m_initial,
                             alloy_array *cu_seqlens, alloy_array *dh, alloy_array *dc_final, alloy_array *dn_final,
                             alloy_array *dm_final, int chunk_size, double eps, alloy_mlstm_backward_method method,
                             alloy_mlstm_kept_in *kin, alloy_stream *stream, alloy_array **dq, alloy_array **dk,
                             alloy_array **dv, alloy_array **di, alloy_array **df, alloy_array **dc_initial,
                             alloy_array **dn_initial, alloy_array **dm_initial) {
    if (method != ALLOY_MLSTM_BACKWARD_AUTO && method != ALLOY_MLSTM_BACKWARD_EXACT &&
        method != ALLOY_MLSTM_BACKWARD_CHUNKED && method != ALLOY_MLSTM_BACKWARD_CHUNKED_DEFAULT)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: method is %d; it must be ALLOY_MLSTM_BACKWARD_AUTO (0), _EXACT (1), _CHUNKED (2) or "
                           "_CHUNKED_DEFAULT (3)",
                           FN, (int)method);
    if (!q) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: q is NULL", FN);
    const alloy_dtype dt = alloy_array_dtype(q);
    alloy_status st;
    if (method == ALLOY_MLSTM_BACKWARD_CHUNKED && dt != ALLOY_BFLOAT16 && dt != ALLOY_FLOAT32)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: method CHUNKED takes bfloat16 or float32 inputs, and q is %s (use EXACT or AUTO)", FN,
                           alloy_dtype_name(dt));
    if (method == ALLOY_MLSTM_BACKWARD_CHUNKED_DEFAULT && dt != ALLOY_FLOAT32)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: method CHUNKED_DEFAULT takes float32 inputs, and q is %s (use CHUNKED, EXACT or AUTO)",
                           FN, alloy_dtype_name(dt));
    if (dt == ALLOY_FLOAT64) {
        /* the shared check knows the forward's dtypes; float64 is the backward's addition */
        if (alloy_array_ndim(q) != 4 || alloy_array_shape(q)[3] < 1 || alloy_array_shape(q)[3] > INT32_MAX / 2)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: q must be (B, NH, S, DHQK) with DHQK >= 1", FN);
        if (stream && alloy_stream_device(stream) != alloy_array_device(q))
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: the stream belongs to %s but q lives on %s", FN,
                               alloy_device_name(alloy_stream_device(stream)),
                               alloy_device_name(alloy_array_device(q)));
    } else if ((st = alloy_mlstm_check_q(FN, q, 4, stream)) != ALLOY_OK) {
        return st;
    }
    const alloy_dtype sdt = dt == ALLOY_FLOAT64 ? ALLOY_FLOAT64 : ALLOY_FLOAT32;
    if ((st = alloy_mlstm_check_eps(FN, eps)) != ALLOY_OK) return st;
    int64_t L;
    if ((st = alloy_mlstm_chunk_length(FN, chunk_size, &L)) != ALLOY_OK) return st;
    alloy_device *dev = alloy_array_device(q);
    const int64_t *qs = alloy_array_shape(q);
    const int64_t B = qs[0], NH = qs[1], S = qs[2], DHQK = qs[3];
    alloy_mlstm_dims dims;
    if ((st = alloy_mlstm_check_sequences(FN, q, k, v, i, f, &dims)) != ALLOY_OK) return st;
    const int64_t DHHV = dims.DHHV;
    const int64_t *s_qk = dims.qk, *s_v = dims.v, *s_g = dims.g;
    if ((st = alloy_mlstm_check(FN, "dh", dh, dev, dt, 4, s_v)) != ALLOY_OK) return st;
    int64_t nseq;   /* B dense rows, or the packed sequences of cu_seqlens */
    if ((st = alloy_mlstm_check_cu_seqlens(FN, cu_seqlens, dev, B, S, &nseq)) != ALLOY_OK) return st;
    const int64_t s_c[4] = {nseq, NH, DHQK, DHHV}, s_n[3] = {nseq, NH, DHQK}, s_m[3] = {nseq, NH, 1};
    int has_init = 0, has_dfinal = 0;
    if ((st = check_triple("c_initial", "n_initial", "m_initial", c_initial, n_initial, m_initial, dev, sdt, s_c, s_n,
                           s_m, &has_init)) != ALLOY_OK)
        return st;
    if ((st = check_triple("dc_final", "dn_final", "dm_final", dc_final, dn_final, dm_final, dev, sdt, s_c, s_n, s_m,
                           &has_dfinal)) != ALLOY_OK)
        return st;
    int kept_scaled = 0; /* a float16-tile record: CHUNKED_DEFAULT from it */
    if (kin && (st = check_kept(kin, dev, dt, nseq, NH, S, DHQK, DHHV, L, cu_seqlens != NULL, s_qk, s_v,
                                &kept_scaled)) != ALLOY_OK)
        return st;
    if (kept_scaled) method = ALLOY_MLSTM_BACKWARD_CHUNKED_DEFAULT;
    if (has_init && (!dc_initial || !dn_initial || !dm_initial))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: the initial states are given, so dc_initial, dn_initial and dm_initial must be slots "
                           "(non-NULL)",
                           FN);

    /* chunk-start slots: per dense sequence ceil(S / L); packed, per head S / L + N,
     * enough for every sequence's chunks however the offsets cut (the kernel's header) */
    const int64_t nsh = nseq * NH, E = DHQK * (DHHV + 1);
    const int64_t NCH = cu_seqlens ? S / L + nseq : (S + L - 1) / L, nslot = cu_seqlens ? NH : nsh;
    if (NCH > INT32_MAX)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: too many sequences for one launch", FN);
    /* threads per (sequence, head): the kernel is serial along the sequence
     * and bound by its per-token passes over the state in device scratch, so
     * on a GPU more threads keep more loads in flight (H100, float32, 7B
     * heads: 1024 threads 2.8x faster than 256, bench/RESULTS.md); the CPU
     * backend runs a threadgroup's threads in turn and takes 256.
     * ALLOY_MLSTM_EXACT_NT (32 to 1024, a multiple of 32) overrides, for
     * measuring. */
    int nt = alloy_device_backend(alloy_array_device(q)) == ALLOY_BACKEND_CUDA ? 1024 : 256;
    const char *nt_env = getenv("ALLOY_MLSTM_EXACT_NT");
    if (nt_env && atoi(nt_env) >= 32 && atoi(nt_env) <= 1024 && atoi(nt_env) % 32 == 0) nt = atoi(nt_env);
    if (nsh > (int64_t)(UINT32_MAX / (uint32_t)nt))
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: sequences * NH is too large for one launch", FN);
    const size_t tmem = alloy_dtype_size(sdt) * (size_t)(5 * L + 4 * DHQK + 5 * (DHHV + 1) + 4);
    if (tmem > 227 * 1024)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: DHQK %lld and DHHV %lld need too much threadgroup memory",
                           FN, (long long)DHQK, (long long)DHHV);

    alloy_array *o[8] = {NULL};
    int made[8] = {0};
    alloy_array *ws[7] = {NULL};   /* CK, CT, DX, MK, CKL, CTL, DXL: CK, CT and DX's low parts */
    st = alloy_mlstm_prepare_out(FN, "dq", dq, dev, dt, 4, s_qk, &o[0], &made[0]);
    if (st == ALLOY_OK) st = alloy_mlstm_prepare_out(FN, "dk", dk, dev, dt, 4, s_qk, &o[1], &made[1]);
    if (st == ALLOY_OK) st = alloy_mlstm_prepare_out(FN, "dv", dv, dev, dt, 4, s_v, &o[2], &made[2]);
    if (st == ALLOY_OK) st = alloy_mlstm_prepare_out(FN, "di", di, dev, dt, 3, s_g, &o[3], &made[3]);
    if (st == ALLOY_OK) st = alloy_mlstm_prepare_out(FN, "df", df, dev, dt, 3, s_g, &o[4], &made[4]);
    if (st == ALLOY_OK && has_init) {
        st = alloy_mlstm_prepare_out(FN, "dc_initial", dc_initial, dev, sdt, 4, s_c, &o[5], &made[5]);
        if (st == ALLOY_OK)
            st = alloy_mlstm_prepare_out(FN, "dn_initial", dn_initial, dev, sdt, 3, s_n, &o[6], &made[6]);
        if (st == ALLOY_OK)
            st = alloy_mlstm_prepare_out(FN, "dm_initial", dm_initial, dev, sdt, 3, s_m, &o[7], &made[7]);
    }
    /* The chunk-parallel path (chunkwise_backward_split.c) or the kernel
     * below (alloy/mlstm.h says when each is taken, docs/mlstm.md why). */
    const alloy_mlstm_backward_method use = method == ALLOY_MLSTM_BACKWARD_AUTO ? auto_method(dt) : method;
    const int scaled = use == ALLOY_MLSTM_BACKWARD_CHUNKED_DEFAULT;
    int split = use == ALLOY_MLSTM_BACKWARD_CHUNKED || scaled;
    if (st == ALLOY_OK && split) {
        st = alloy_mlstm_backward_split(q, k, v, i, f, has_init ? c_initial : NULL, has_init ? n_initial : NULL,
                                        has_init ? m_initial : NULL, cu_seqlens, dh, has_dfinal ? dc_final : NULL,
                                        has_dfinal ? dn_final : NULL, has_dfinal ? dm_final : NULL, L, eps, scaled,
                                        kin, stream, o);
        if (st == ALLOY_ERROR_UNSUPPORTED) {
            if (method == ALLOY_MLSTM_BACKWARD_CHUNKED || scaled)
                st = alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                                 "%s: method %s does not take DHQK = %lld, DHHV = %lld (DHQK up to 512 and the "
                                 "chunk's tiles in threadgroup memory; use EXACT or AUTO)",
                                 FN, scaled ? "CHUNKED_DEFAULT" : "CHUNKED", (long long)alloy_array_shape(q)[3],
                                 (long long)alloy_array_shape(v)[3]);
            else
                split = 0, st = ALLOY_OK; /* AUTO: sizes it does not take run the kernel below */
        }
    }
    const int64_t nck = (NCH > 0 ? NCH : 1) * E;
    const int64_t ws_shape[7][2] = {{nslot, nck}, {nsh, (L + 1) * E}, {nsh, E}, {nslot, NCH > 0 ? NCH : 1},
                                    {nslot, nck}, {nsh, (L + 1) * E}, {nsh, E}};
    for (int w = 0; w < 7 && st == ALLOY_OK && nsh > 0 && !split; w++)
        st = alloy_array_new(dev, sdt, 2, ws_shape[w], &ws[w]);
    alloy_kernel *kern = NULL;
    if (st == ALLOY_OK && !split) st = alloy_catalog_kernel(BWD_FILE, &kern);
    if (st == ALLOY_OK && nsh > 0 && !split) {
        alloy_launch *l = NULL;
        st = alloy_launch_new(&l);
        if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "T", dt);
        if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "A", sdt);
        if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "HAS_INIT", has_init);
        if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "HAS_DFINAL", has_dfinal);
        if (st == ALLOY_OK) st = alloy_launch_add_template_bool(l, "VARLEN", cu_seqlens != NULL);
        if (st == ALLOY_OK) st = alloy_launch_add_template_int(l, "NT", nt);
        /* absent state gradients are bound to dq (never written) */
        alloy_array *outs[15] = {o[0], o[1], o[2], o[3], o[4], has_init ? o[5] : o[0], has_init ? o[6] : o[0],
                                 has_init ? o[7] : o[0], ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], ws[6]};
        for (int e = 0; e < 15 && st == ALLOY_OK; e++) st = alloy_launch_add_output_array(l, outs[e]);
        if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)(nsh * nt), 1, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, (uint32_t)nt, 1, 1);
        if (st == ALLOY_OK) st = alloy_launch_set_threadgroup_memory(l, tmem);
        const struct {
            const char *name;
            int64_t v;
        } ints[] = {{"S", S}, {"NH", NH}, {"DHQK", DHQK}, {"DHHV", DHHV}, {"L", L}, {"NCH", NCH}};
        for (size_t e = 0; e < sizeof ints / sizeof ints[0] && st == ALLOY_OK; e++)
            st = alloy_launch_set_constant_int(l, ints[e].name, ALLOY_INT32, ints[e].v);
        if (st == ALLOY_OK) st = alloy_launch_set_constant(l, "scale", sdt, 1.0 / sqrt((double)DHQK));
        if (st == ALLOY_OK) st = alloy_launch_set_constant(l, "eps", sdt, eps);
        /* absent inputs are bound to q (never read) */
        alloy_array *ins[13] = {q, k, v, i, f, has_init ? c_initial : q, has_init ? n_initial : q,
                                has_init ? m_initial : q, dh, has_dfinal ? dc_final : q, has_dfinal ? dn_final : q,
                                has_dfinal ? dm_final : q, cu_seqlens ? cu_seqlens : q};
        alloy_array *res[15] = {NULL};
        if (st == ALLOY_OK) st = alloy_kernel_apply(kern, 13, ins, l, stream, res);
        for (int e = 0; e < 15; e++) alloy_array_free(res[e]);
        alloy_launch_free(l);
    }
    for (int w = 0; w < 7; w++) alloy_array_free(ws[w]);
    if (st != ALLOY_OK) {
        for (int e = 0; e < 8; e++)
            if (made[e]) alloy_array_free(o[e]);
        return st;
    }
    alloy_array **slots[8] = {dq, dk, dv, di, df, dc_initial, dn_initial, dm_initial};
    for (int e = 0; e < 8; e++)
        if (made[e]) *slots[e] = o[e];
    return ALLOY_OK;
}

alloy_status alloy_mlstm_chunkwise_backward(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i,
                                            alloy_array *f, alloy_array *c_initial, alloy_array *n_initial,
                                            alloy_array *m_initial, alloy_array *cu_seqlens, alloy_array *dh,
                                            alloy_array *dc_final, alloy_array *dn_final, alloy_array *dm_final,
                                            int chunk_size, double eps, alloy_stream *stream, alloy_array **dq,
                                            alloy_array **dk, alloy_array **dv, alloy_array **di, alloy_array **df,
                                            alloy_array **dc_initial, alloy_array **dn_initial,
                                            alloy_array **dm_initial) {
    return alloy_mlstm_chunkwise_backward_with_method(q, k, v, i, f, c_initial, n_initial, m_initial, cu_seqlens, dh,
                                                      dc_final, dn_final, dm_final, chunk_size, eps,
                                                      ALLOY_MLSTM_BACKWARD_AUTO, stream, dq, dk, dv, di, df,
                                                      dc_initial, dn_initial, dm_initial);
}

alloy_status alloy_mlstm_chunkwise_backward_with_method(
    alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i, alloy_array *f, alloy_array *c_initial,
    alloy_array *n_initial, alloy_array *m_initial, alloy_array *cu_seqlens, alloy_array *dh, alloy_array *dc_final,
    alloy_array *dn_final, alloy_array *dm_final, int chunk_size, double eps, alloy_mlstm_backward_method method,
    alloy_stream *stream, alloy_array **dq, alloy_array **dk, alloy_array **dv, alloy_array **di, alloy_array **df,
    alloy_array **dc_initial, alloy_array **dn_initial, alloy_array **dm_initial) {
    return backward(q, k, v, i, f, c_initial, n_initial, m_initial, cu_seqlens, dh, dc_final, dn_final, dm_final,
                    chunk_size, eps, method, NULL, stream, dq, dk, dv, di, df, dc_initial, dn_initial, dm_initial);
}

alloy_status alloy_mlstm_chunkwise_backward_kept(
    alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i, alloy_array *f, alloy_array *c_initial,
    alloy_array *n_initial, alloy_array *m_initial, alloy_array *cu_seqlens, alloy_array *h, alloy_array *c_final,
    alloy_array *n_final, alloy_array *const *kept, alloy_array *dh, alloy_array *dc_final, alloy_array *dn_final,
    alloy_array *dm_final, int chunk_size, double eps, alloy_stream *stream, alloy_array **dq, alloy_array **dk,
    alloy_array **dv, alloy_array **di, alloy_array **df, alloy_array **dc_initial, alloy_array **dn_initial,
    alloy_array **dm_initial) {
    if (!kept) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: kept is NULL", FN);
    alloy_mlstm_kept_in kin = {.h = h, .c_final = c_final, .n_final = n_final};
    for (int e = 0; e < ALLOY_MLSTM_KEPT; e++) kin.kept[e] = kept[e];
    return backward(q, k, v, i, f, c_initial, n_initial, m_initial, cu_seqlens, dh, dc_final, dn_final, dm_final,
                    chunk_size, eps, ALLOY_MLSTM_BACKWARD_CHUNKED, &kin, stream, dq, dk, dv, di, df, dc_initial,
                    dn_initial, dm_initial);
}
