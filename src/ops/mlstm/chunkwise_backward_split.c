/* chunkwise_backward_split.c — the chunk-parallel backward of the mLSTM
 * chunkwise forward (alloy_mlstm_backward_split, mlstm_internal.h): the
 * split forward again with its scratch kept (chunkwise.c: h, the final
 * states, every chunk's starting state, m and gate record), then the four
 * phases of mlstm_chunkwise_grad.metal — per chunk the rows' normalisers and
 * the two L x L matrices, the state gradients walked from the last chunk,
 * dv, dq and dk per chunk in 64-column tiles, the gates per (sequence,
 * head). Everything it allocates is scratch, freed once the launches are
 * queued (the runtime keeps a launch's arrays alive until it has run). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "ops/catalog.h"
#include "ops/env_override.h"
#include "ops/vector_access.h"
#include "ops/mlstm/mlstm_internal.h"

static const char GRAD_FILE[] = "src/ops/mlstm/kernels/mlstm_chunkwise_grad.metal";
static const char FN[] = "alloy_mlstm_chunkwise_backward";
static const size_t SMEM_BUDGET = 227 * 1024;
enum { RR = 8 }; /* floats per row record */

typedef struct grad_run {
    alloy_kernel *kern;
    alloy_stream *stream;
    alloy_dtype dt, out_dt; /* the operands' dtype (scaled: float16), the gradients' */
    int scaled;
    int64_t L, DKP, DS, TV, S, NH, DHQK, DHHV, nseq, WN, VT, KT, VT2, KT2;
    int has_init, has_dfinal, varlen, vec;
    int ct;      /* PHASE 3's 64-column tiles per threadgroup */
    int persist; /* PHASE 3's threadgroups take the jobs in turn (ALLOY_MLSTM_GRAD_PERSIST) */
    double eps;
} grad_run;

static alloy_status launch(const grad_run *r, int phase, int64_t groups, uint32_t threads, size_t smem,
                           alloy_array **ins, alloy_array **outs) {
    /* CT only shapes PHASE 3 (the other phases one specialisation whatever it is) */
    const alloy_mlstm_named tints[] = {{"L", r->L},   {"DKP", r->DKP},   {"DS", r->DS},
                                       {"TV", r->TV}, {"PHASE", phase}, {"CT", phase == 3 ? r->ct : 1},
                                       {"RB", alloy_mlstm_row_tiles_mode("GRAD", phase)}};
    const alloy_mlstm_named tbools[] = {{"HAS_INIT", r->has_init},
                                        {"HAS_DFINAL", r->has_dfinal},
                                        {"VARLEN", r->varlen},
                                        {"VEC", r->vec},
                                        {"SCALED", r->scaled},
                                        {"PERSIST", phase == 3 && r->persist}};
    const alloy_mlstm_named consts[] = {{"S", r->S},   {"NH", r->NH}, {"DHQK", r->DHQK}, {"DHHV", r->DHHV},
                                        {"NSEQ", r->nseq}, {"WN", r->WN}, {"VT", r->VT},     {"KT", r->KT},
                                        {"VT2", r->VT2}, {"KT2", r->KT2}};
    const alloy_mlstm_launch_spec spec = {
        .fn = FN, .kernel = r->kern, .stream = r->stream, .dt = r->dt, .out_dt = r->out_dt, .to_named = 1,
        .tints = tints, .n_tints = 7, .tbools = tbools, .n_tbools = 6, .consts = consts, .n_consts = 10,
        .scale = 1.0 / sqrt((double)r->DHQK), .eps = r->eps, .ins = ins, .n_ins = 22, .outs = outs, .n_outs = 16,
        .groups = groups, .threads = threads, .smem = smem};
    return alloy_mlstm_launch(&spec);
}

static int64_t up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

alloy_status alloy_mlstm_backward_split(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i,
                                        alloy_array *f, alloy_array *c_initial, alloy_array *n_initial,
                                        alloy_array *m_initial, alloy_array *cu_seqlens, alloy_array *dh,
                                        alloy_array *dc_final, alloy_array *dn_final, alloy_array *dm_final,
                                        int64_t L, double eps, int scaled, const alloy_mlstm_kept_in *kin,
                                        alloy_stream *stream, alloy_array *const *g) {
    const alloy_dtype dt = alloy_array_dtype(q);
    /* scaled (float32 inputs; kin: a float16-tile record, the caller's checks): on float16 tiles with exponents */
    const size_t ts = scaled ? 2 : alloy_dtype_size(dt);
    const int64_t *qs = alloy_array_shape(q);
    grad_run r = {.stream = stream, .dt = scaled ? ALLOY_FLOAT16 : dt, .out_dt = dt, .scaled = scaled,
                  .S = qs[2], .NH = qs[1], .DHQK = qs[3],
                  .DHHV = alloy_array_shape(v)[3], .has_init = c_initial != NULL, .has_dfinal = dc_final != NULL,
                  .varlen = cu_seqlens != NULL, .eps = eps};
    r.nseq = cu_seqlens ? alloy_array_shape(cu_seqlens)[0] - 1 : qs[0];
    const int64_t Ls = L < 64 ? L : 64;
    /* the phases' threadgroup memory (the layouts of the kernel file) */
    r.DKP = r.DHQK <= 64 ? up(r.DHQK, 16) : up(r.DHQK, 64);
    r.DS = up(r.DHQK, 16) < 64 ? up(r.DHQK, 16) : 64;
    r.TV = up(r.DHHV, 8) < 64 ? up(r.DHHV, 8) : 64;
    /* 16-bit: a ring of three DS x 72 tiles of C in k's room once S is done and
     * two (dh, v) slice pairs (three with one DHQK slice); float32: dh, v and h slices */
    const int64_t k_elems = ts == 2 && 3 * r.DS * 72 > Ls * (r.DKP + 8) ? 3 * r.DS * 72 : Ls * (r.DKP + 8);
    const int64_t pairs = r.DKP / r.DS == 1 ? 3 : 2;
    /* scaled: the rows' exponents (phase 1: four of 64 ints), the walk's SIMD group maxima (phase 2: 8) */
    const size_t smem1 =
        (size_t)up((Ls * (r.DKP + 8) + k_elems + (ts == 2 ? 2 * pairs : 3) * Ls * 72) * (int64_t)ts, 16) +
        4 * (12 * 64 + r.DKP) + (scaled ? 4 * 4 * 64 : 0);
    const int64_t wrn = 2 * Ls + 4;
    const size_t smem2 = (size_t)up((2 * Ls * (r.DS + 8) + 2 * Ls * (r.TV + 16) + (ts == 2 ? 4 * 16 * (r.TV + 8) : 0)) *
                                        (int64_t)ts, 16) + 4 * 2 * (size_t)wrn + (scaled ? 4 * 8 : 0);
    /* PHASE 3: two 64-column tiles per threadgroup for 16-bit inputs (each streamed slice of K, dh or v
     * serves both: L2 carried 33.6 GB for the 7B shape's bfloat16 backward at one, its bound), one for
     * float32 (the threadgroup memory); ALLOY_MLSTM_GRAD_CT=1|2|4 for timing (halved while its threadgroup
     * memory would not fit) */
    const int64_t ct_env = alloy_ops_env_int("ALLOY_MLSTM_GRAD_CT", 1, 4, ts == 2 ? 2 : 1);
    r.ct = ct_env == 3 ? 2 : (int)ct_env;
    size_t smem3 = 0;
    for (;; r.ct /= 2) {
        const int64_t W3 = 64 * r.ct;
        smem3 = (size_t)up((Ls * (Ls + 8) + Ls * (W3 + 8) + 3 * Ls * 72 + 3 * W3 * 72) * (int64_t)ts, 16);
        if (scaled) smem3 += 4 * (3 * 64 + 128 * r.ct / Ls * 64); /* FE, PE, XE and the lines' maxima */
        if (smem3 <= SMEM_BUDGET || r.ct == 1) break;
    }
    const size_t smem4 = 4 * 3 * 256;
    if (dt == ALLOY_FLOAT64 || r.DHQK > 512 || smem1 > SMEM_BUDGET || smem2 > SMEM_BUDGET || smem3 > SMEM_BUDGET)
        return ALLOY_ERROR_UNSUPPORTED;

    alloy_mlstm_saved sv;
    alloy_status st = ALLOY_OK;
    if (kin) { /* the forward's record, as alloy_mlstm_split_forward would make it (references of the caller's) */
        memset(&sv, 0, sizeof sv);
        sv.h = ts == 4 ? alloy_array_retain(kin->h) : NULL;
        sv.c_out = alloy_array_retain(kin->c_final);
        sv.n_out = alloy_array_retain(kin->n_final);
        sv.c_chunk = alloy_array_retain(kin->kept[0]);
        sv.n_chunk = alloy_array_retain(kin->kept[1]);
        sv.m_chunk = alloy_array_retain(kin->kept[2]);
        sv.g_chunk = alloy_array_retain(kin->kept[3]);
        if (scaled) { /* the tile factors, the float16 rows and their exponents */
            sv.ce = alloy_array_retain(kin->kept[4]);
            for (int e = 0; e < 3; e++) sv.rows[e] = alloy_array_retain(kin->kept[5 + e]);
            sv.xe = alloy_array_retain(kin->kept[8]);
        }
        sv.L = Ls;
        sv.nslots = alloy_mlstm_split_slots(r.S, Ls, r.nseq, cu_seqlens != NULL);
        sv.vec = (scaled ? alloy_mlstm_vec_rows(sv.rows[0], sv.rows[1], sv.rows[2], r.DHQK, r.DHHV, ts)
                         : alloy_mlstm_vec_rows(q, k, v, r.DHQK, r.DHHV, ts)) &&
                 (!sv.h || alloy_ops_aligned16(1, &sv.h));
    } else {
        st = alloy_mlstm_split_forward(q, k, v, i, f, c_initial, n_initial, m_initial, cu_seqlens, L, eps, scaled,
                                       stream, &sv);
    }
    if (st != ALLOY_OK) return st;
    r.L = sv.L;
    r.WN = sv.nslots;
    r.VT = (r.DHHV + 63) / 64;
    r.KT = (r.DHQK + 63) / 64;
    r.VT2 = (r.DHHV + r.TV - 1) / r.TV;
    r.KT2 = (r.DHQK + r.DS - 1) / r.DS;
    alloy_device *dev = alloy_array_device(q);
    /* scaled: dh as float16 rows with exponents too (dr[0], dr[3]) */
    alloy_array *dr[4] = {NULL, NULL, NULL, NULL};
    if (st == ALLOY_OK && scaled) st = alloy_mlstm_f16_rows(dh, NULL, NULL, stream, dr);
    alloy_array *dhx = scaled ? dr[0] : dh;
    r.vec = st == ALLOY_OK && sv.vec && alloy_ops_aligned16(1, &dhx);
    const int64_t tokens = qs[0] * r.NH * r.S, slots = (r.WN > 0 ? r.WN : 1) * r.NH;
    const int64_t s_rec[1] = {tokens * RR > 0 ? tokens * RR : 1}, s_wrec[1] = {slots * wrn},
                  s_pm[1] = {slots * r.L * r.L}, s_dc[1] = {slots * r.DHQK * r.DHHV}, s_dn[1] = {slots * r.DHQK},
                  s_part[1] = {tokens * 2 * r.KT > 0 ? tokens * 2 * r.KT : 1}, s_dce[1] = {slots * r.KT2 * r.DHHV};
    alloy_array *rec = NULL, *wrec = NULL, *pm = NULL, *am = NULL, *dc = NULL, *dn = NULL, *part = NULL, *dce = NULL;
    /* scaled: the L x L matrices in float32 (true units; phase 3 folds and rounds them), dC as float16 tiles
     * with a factor each (dce) */
    const alloy_dtype pdt = scaled ? ALLOY_FLOAT32 : dt;
    if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 1, s_rec, &rec);
    if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 1, s_wrec, &wrec);
    if (st == ALLOY_OK) st = alloy_array_new(dev, pdt, 1, s_pm, &pm);
    if (st == ALLOY_OK) st = alloy_array_new(dev, pdt, 1, s_pm, &am);
    if (st == ALLOY_OK) st = alloy_array_new(dev, r.dt, 1, s_dc, &dc);
    if (st == ALLOY_OK && scaled) st = alloy_array_new(dev, ALLOY_FLOAT32, 1, s_dce, &dce);
    if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 1, s_dn, &dn);
    if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 1, s_part, &part);
    if (st == ALLOY_OK) st = alloy_catalog_kernel(GRAD_FILE, &r.kern);
    /* absent inputs are bound to q, absent initial-state gradients to dq (never touched); scaled: the operands
     * are the float16 rows, their exponents and the state tiles' factors (else bound to q, dc) */
    alloy_array *ins[22] = {scaled ? sv.rows[0] : q, scaled ? sv.rows[1] : k, scaled ? sv.rows[2] : v, i, f, dhx,
                            sv.h ? sv.h : sv.c_chunk,
                            r.has_init ? c_initial : q, r.has_init ? n_initial : q,
                            r.has_dfinal ? dc_final : q, r.has_dfinal ? dn_final : q, r.has_dfinal ? dm_final : q,
                            sv.c_chunk, sv.n_chunk, sv.m_chunk, sv.g_chunk, sv.c_out, sv.n_out,
                            cu_seqlens ? cu_seqlens : q, scaled ? sv.xe : q, scaled ? dr[3] : q,
                            scaled ? sv.ce : q};
    alloy_array *outs[16] = {g[0], g[1], g[2], g[3], g[4], r.has_init ? g[5] : g[0], r.has_init ? g[6] : g[0],
                             r.has_init ? g[7] : g[0], rec, wrec, pm, am, dc, dn, part, scaled ? dce : dc};
    const int64_t nsh = r.nseq * r.NH;
    if (st == ALLOY_OK) st = launch(&r, 1, r.WN * r.NH, 256, smem1, ins, outs);
    if (st == ALLOY_OK) st = launch(&r, 2, nsh * r.KT2 * r.VT2, 128, smem2, ins, outs);
    /* PHASE 3: a threadgroup per job, or with ALLOY_MLSTM_GRAD_PERSIST=1 (for timing: slower, H200, 7B
     * shape, same call: backward f32 DEFAULT 13.50 ms against 12.06, bf16 9.06 against 8.31) as many as are
     * resident (two an SM; three on the CPU, so that each takes several) taking the jobs in turn, each job's
     * copies for the next issued during its epilogue */
    const int64_t jobs3 = r.WN * r.NH * ((r.VT + r.ct - 1) / r.ct + 2 * ((r.KT + r.ct - 1) / r.ct));
    r.persist = (int)alloy_ops_env_int("ALLOY_MLSTM_GRAD_PERSIST", 0, 1, 0);
    const int nsm = alloy_device_multiprocessor_count(dev);
    const int64_t resident = nsm > 0 ? 2 * (int64_t)nsm : 3;
    const int64_t groups3 = r.persist && resident < jobs3 ? resident : jobs3;
    if (st == ALLOY_OK) st = launch(&r, 3, groups3, (uint32_t)(128 * r.ct), smem3, ins, outs);
    if (st == ALLOY_OK) st = launch(&r, 4, nsh, 256, smem4, ins, outs);
    alloy_array *scratch[10] = {rec, wrec, pm, am, dc, dn, part, dce, dr[0], dr[3]};
    for (int e = 0; e < 10; e++) alloy_array_free(scratch[e]);
    alloy_mlstm_saved_free(&sv);
    return st;
}
