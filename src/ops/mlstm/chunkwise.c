/* chunkwise.c — alloy_mlstm_chunkwise, _with_precision and _keep
 * (alloy/mlstm.h): the chunkwise form of the mLSTM cell over whole
 * sequences, dense or packed (cu_seqlens), from given or zero initial states,
 * with the final states if asked for (and, _keep, the split path's chunk
 * record for the backward). float32 at precision DEFAULT runs the split path
 * on float16 tiles with power-of-two exponents (mlstm_f16_rows.metal first;
 * docs/mlstm.md, "The float32 forward on float16 tiles").
 *
 * Two paths through mlstm_chunkwise.metal (the kernel file explains both), on
 * the caller's stream:
 *  - split (chunks of at most 64 rows; every 16-bit input, float32 up to
 *    DHQK 256): per window of chunks, one launch that walks the gates, one
 *    that stores every chunk's starting state in device scratch and one that
 *    computes h of all the window's chunks at once;
 *  - fused (float32 inputs with DHQK over 256): one launch, one threadgroup of
 *    256 threads per (sequence, head, tile of TV columns of h) walking its
 *    sequence's chunks with its slice of the state in registers.
 * This file picks the path and each kernel's specialisation (DHQK padded and
 * sliced, the column tiles, the threadgroup memory, which stays within what a
 * Hopper GPU gives one group). Nothing waits for the device; the fused path
 * allocates nothing when h (and the final states, if asked for) are given and
 * the inputs are row-contiguous, the split path only its scratch. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/array_internal.h"
#include "core/error.h"
#include "ops/catalog.h"
#include "ops/vector_access.h"
#include "ops/mlstm/mlstm_internal.h"

static const char CHUNK_FILE[] = "src/ops/mlstm/kernels/mlstm_chunkwise.metal";
static const char ROWS_FILE[] = "src/ops/mlstm/kernels/mlstm_f16_rows.metal";

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
 * (a non-contiguous operand reaches the kernel as a fresh, aligned copy).
 * The caller also asks h to be 16-byte aligned: the split path then writes
 * h (and its scratch) two 16-bit elements per store. */
int alloy_mlstm_vec_rows(alloy_array *q, alloy_array *k, alloy_array *v, int64_t DHQK, int64_t DHHV, size_t tsize) {
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

/* The split path's threadgroup memory: phase 1 (chunk-start states, DS rows
 * by TV columns of C per group) and phase 2 (h of one chunk; DHQK padded to
 * DKP, streamed in slices of DS rows, TV columns of h at a time); the layouts
 * of mlstm_chunkwise.metal. */
static size_t split_states_smem(size_t tsize, int64_t L, int64_t DS, int64_t TV, int sc) {
    const int64_t staging = tsize == 2 ? 4 * 16 * (TV + 8) : 0; /* 16-bit states go out through it */
    const size_t t_bytes = ((size_t)(2 * L * (DS + 8) + 2 * L * (TV + 16) + staging) * tsize + 15) / 16 * 16;
    /* two chunks' gate records; sc: records of 2 L + 4 and the SIMD groups' maxima */
    return t_bytes + (sc ? 4 * 2 * (size_t)(2 * L + 4) + 4 * 8 : 4 * 2 * (size_t)(L + 4));
}
/* The gate walk's (PHASE 3): per SIMD group (32) U, IA, MR, PRE, SUF, w (64
 * each) and e_last, m; a block's 256 chunk summaries (6 each) and 257 m. */
static const size_t SPLIT_GATES_SMEM = 4 * (32 * (6 * 64 + 4) + 256 * 6 + 257);
static size_t split_outputs_smem(size_t tsize, int64_t L, int64_t DKP, int64_t DS, int64_t TV, int sc) {
    const int64_t LDK = DKP + 8, LDP = L + 8, LDC = TV + 8;
    const int64_t vbn = DKP / DS == 1 ? 3 : 2; /* v's buffers (three with one DHQK slice) */
    const int64_t kv = L * LDK > vbn * L * LDC ? L * LDK : vbn * L * LDC;
    const size_t t_bytes = ((size_t)(L * LDK + kv + L * LDP + 3 * DS * LDC) * tsize + 15) / 16 * 16;
    return t_bytes + 4 * (8 * 64 + DKP) + (sc ? 4 * (3 * 64 + 3 * (size_t)TV) : 0); /* sc: the exponents */
}

/* What every launch of the kernel file shares. */
typedef struct chunk_run {
    alloy_kernel *kc;
    alloy_stream *stream;
    alloy_dtype dt;
    int64_t L;
    int has_init, varlen, vec;
    int tf32; /* float32 products as one TF32 pass (ALLOY_PRECISION_DEFAULT, the fused path) */
    int sc;   /* float16 tiles with exponents (float16 inputs, float32 at ALLOY_PRECISION_DEFAULT; the
               * split path): dt is then float16, the inputs mlstm_f16_rows' and ins[9] their exponents */
    int64_t S, NH, DHQK, DHHV, nseq;
    double eps;
} chunk_run;

/* One launch: the kernel's branch (phase 0 fused, 1 states, 2 outputs, 3 gates), its
 * specialisation and grid, and the window of slots (split path). */
typedef struct chunk_launch {
    int phase;
    int64_t DKP, DS, TV;
    int res, states_out;
    int64_t VT, KT, W0, WN;
    int carry;
    int64_t groups;
    uint32_t threads;
    size_t smem;
} chunk_launch;

static alloy_status launch_chunkwise(const chunk_run *r, const chunk_launch *c, alloy_array **ins, alloy_array **outs) {
    const alloy_mlstm_named tints[] = {{"L", r->L},         {"DKP", c->DKP},  {"DS", c->DS},
                                       {"TV", c->TV},       {"PHASE", c->phase},
                                       {"RB", alloy_mlstm_row_tiles_mode("FWD", c->phase)}};
    const alloy_mlstm_named tbools[] = {{"HAS_INIT", r->has_init},
                                        {"VARLEN", r->varlen},
                                        {"STATES_OUT", c->states_out},
                                        {"VEC", r->vec},
                                        {"RES", c->res},
                                        {"TF32", r->tf32},
                                        {"SCALED", r->sc}};
    const alloy_mlstm_named consts[] = {{"S", r->S},   {"NH", r->NH},   {"DHQK", r->DHQK}, {"DHHV", r->DHHV}, {"VT", c->VT},
                                        {"KT", c->KT}, {"NSEQ", r->nseq}, {"W0", c->W0},   {"WN", c->WN},     {"CARRY", c->carry}};
    const alloy_mlstm_launch_spec spec = {
        .fn = FN, .kernel = r->kc, .stream = r->stream, .dt = r->dt,
        .tints = tints, .n_tints = 6, .tbools = tbools, .n_tbools = 7, .consts = consts, .n_consts = 10,
        .scale = 1.0 / sqrt((double)r->DHQK), .eps = r->eps, .ins = ins, .n_ins = 10, .outs = outs, .n_outs = 9,
        .groups = c->groups, .threads = c->threads, .smem = c->smem};
    return alloy_mlstm_launch(&spec);
}

/* The split path's specialisation (its chunk length Ls: the caller's, at
 * most 64 — a longer chunk is the same function blocked differently, so it
 * runs as 64-token chunks; phase 1: DS1 x TV1 tiles of C; phase 2: DHQK
 * padded to DKP2 in slices of DS2, TV2 columns of h), or 0 where phase 2's
 * threadgroup memory passes the budget (16-bit inputs: never at DHQK <= 512;
 * float32: DHQK over 256, which then runs the fused kernel).
 * ALLOY_MLSTM_PATH=fused keeps float32 on the fused kernel (the tests run
 * both paths); 16-bit inputs take the split path whatever it says: the fused
 * kernel rounds n and P to 16 bits, which loses the normaliser where q^ . n
 * cancels the row sum nearly away. */
typedef struct split_spec {
    int64_t Ls, DS1, TV1, KT, VT1, DKP2, DS2, TV2, VT2;
    size_t smem1, smem2;
} split_spec;

/* Whether ALLOY_MLSTM_PATH names `name` (the tests' choice of path: "fused"
 * keeps float32 on the fused kernel, "scaled" runs the float16 tiles on the
 * CPU too). */
static int path_is(const char *name) {
    const char *path = getenv("ALLOY_MLSTM_PATH");
    return path && !strcmp(path, name);
}

static int split_choose(size_t tsize, int sc, int64_t L, int64_t DHQK, int64_t DHHV, split_spec *p) {
    if (tsize > 2 && path_is("fused")) return 0;
    L = L < 64 ? L : 64;
    p->Ls = L;
    const int64_t dk16 = (DHQK + 15) / 16 * 16, dv8 = (DHHV + 7) / 8 * 8;
    p->DS1 = dk16 < 64 ? dk16 : 64;
    p->TV1 = dv8 < 64 ? dv8 : 64;
    p->KT = (DHQK + p->DS1 - 1) / p->DS1;
    p->VT1 = (DHHV + p->TV1 - 1) / p->TV1;
    p->DKP2 = DHQK <= 64 ? dk16 : (DHQK + 63) / 64 * 64;
    p->DS2 = p->DKP2 < 64 ? p->DKP2 : 64;
    p->TV2 = dv8 < 64 ? dv8 : 64;
    p->VT2 = (DHHV + p->TV2 - 1) / p->TV2;
    p->smem1 = split_states_smem(tsize, L, p->DS1, p->TV1, sc);
    p->smem2 = split_outputs_smem(tsize, L, p->DKP2, p->DS2, p->TV2, sc);
    return p->smem1 <= SMEM_BUDGET && p->smem2 <= SMEM_BUDGET;
}

/* Device memory the split path may hold for the chunk-start states of one
 * window; longer inputs run in several windows (each one launch of each
 * phase), the state carried between them in float32. */
static const int64_t SPLIT_WINDOW_BYTES = (int64_t)2 << 30;

/* The split path: per window, phase 3 walks the gates once per (sequence,
 * head) and stores each chunk's gate record (and carries m on), phase 1
 * stores the chunk-start states of the window's slots (and carries C and n
 * on), phase 2 computes h of every chunk of the window at once. Slots: dense, chunk c of sequence s is c * NSEQ
 * + s (a window is whole chunk indices of every sequence, which advance
 * together); packed, sequence s's chunks start at cu[s] / L + s (a one-to-one
 * map that the kernel inverts by binary search). The carry is the final state
 * when asked for, else device scratch. keep (the backward's run): one window,
 * whose scratch (c_chunk, n_chunk, m_chunk, g_chunk) goes to keep[0..3]; oh
 * NULL skips phase 2. With sc, keep[4] gets the state tiles' factors (ce_chunk). */
static alloy_status run_split(const chunk_run *r, const split_spec *p, alloy_array **ins, alloy_array *oh,
                              alloy_array *oc, alloy_array *on, alloy_array *om, alloy_array **keep) {
    const size_t tsize = alloy_dtype_size(r->dt);
    const int64_t GWN = r->sc ? 2 * r->L + 4 : r->L + 4; /* a gate record */
    const int64_t slot_bytes = r->NH * (r->DHQK * r->DHHV * (int64_t)tsize + r->DHQK * 4 + 4 + GWN * 4 +
                                        (r->sc ? p->KT * r->DHHV * 4 : 0));
    /* slots in all; a window holds whole units (packed: base(s) = cu[s] / L + s, strictly increasing) */
    const int64_t nslots = alloy_mlstm_split_slots(r->S, r->L, r->nseq, r->varlen), unit = r->varlen ? 1 : r->nseq;
    const char *env = getenv("ALLOY_MLSTM_WINDOW_BYTES"); /* smaller windows: tests */
    const int64_t budget = env && atoll(env) > 0 ? atoll(env) : SPLIT_WINDOW_BYTES;
    /* windows of at most `per` units, as even as whole units allow; at least
     * one window (phase 1 also writes the final states when S = 0) */
    const int64_t units = (nslots + unit - 1) / unit, fit = budget / (slot_bytes * unit);
    const int64_t per = fit > 0 ? fit : 1;
    /* keep (the backward): every slot in one window, whose scratch the caller keeps */
    const int64_t nwin = !keep && units > per ? (units + per - 1) / per : 1;
    const int64_t WN = units > 0 ? (units + nwin - 1) / nwin * unit : 1;

    /* oh NULL: no phase 2 (the backward's 16-bit run, a record alone) */
    alloy_device *dev = alloy_array_device(ins[0]);
    alloy_array *cw = NULL, *nw = NULL, *mw = NULL, *gw = NULL, *ew = NULL, *carry[3] = {oc, on, om},
                *own[3] = {NULL, NULL, NULL};
    const int64_t s_cw[1] = {WN * r->NH * r->DHQK * r->DHHV}, s_nw[1] = {WN * r->NH * r->DHQK},
                  s_mw[1] = {WN * r->NH}, s_gw[1] = {WN * r->NH * GWN}, s_ew[1] = {WN * r->NH * p->KT * r->DHHV};
    alloy_status st = alloy_array_new(dev, r->dt, 1, s_cw, &cw);
    /* sc: each state tile's factor, in each of its columns */
    if (st == ALLOY_OK && r->sc) st = alloy_array_new(dev, ALLOY_FLOAT32, 1, s_ew, &ew);
    if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 1, s_nw, &nw);
    if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 1, s_mw, &mw);
    if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 1, s_gw, &gw);
    /* a kept record is an output: defined everywhere, also where no chunk writes (the gate records' tails;
     * packed, the slots no sequence reaches) */
    if (st == ALLOY_OK && keep) st = alloy_array_fill_on(gw, 0, r->stream);
    if (st == ALLOY_OK && keep && r->varlen) st = alloy_array_fill_on(cw, 0, r->stream);
    if (st == ALLOY_OK && keep && r->varlen) st = alloy_array_fill_on(nw, 0, r->stream);
    if (st == ALLOY_OK && keep && r->varlen) st = alloy_array_fill_on(mw, 0, r->stream);
    if (!oc) {
        const int64_t s_c[4] = {r->nseq, r->NH, r->DHQK, r->DHHV}, s_n[3] = {r->nseq, r->NH, r->DHQK},
                      s_m[3] = {r->nseq, r->NH, 1};
        if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 4, s_c, &own[0]);
        if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 3, s_n, &own[1]);
        if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 3, s_m, &own[2]);
        for (int e = 0; e < 3; e++) carry[e] = own[e];
    }
    alloy_array *outs[9] = {oh ? oh : cw, carry[0], carry[1], carry[2], cw, nw, mw, gw, ew ? ew : cw};
    for (int64_t w = 0; w < nwin && st == ALLOY_OK; w++) {
        const chunk_launch gates = {.phase = 3, .DKP = p->DS1, .DS = p->DS1, .TV = p->TV1, .VT = 1, .KT = 1,
                                    .W0 = w * WN, .WN = WN, .carry = w > 0, .groups = r->nseq * r->NH, .threads = 1024,
                                    .smem = SPLIT_GATES_SMEM};
        const chunk_launch states = {.phase = 1, .DKP = p->DS1, .DS = p->DS1, .TV = p->TV1, .VT = p->VT1,
                                     .KT = p->KT, .W0 = w * WN, .WN = WN, .carry = w > 0,
                                     .groups = r->nseq * r->NH * p->KT * p->VT1, .threads = 128, .smem = p->smem1};
        const chunk_launch outputs = {.phase = 2, .DKP = p->DKP2, .DS = p->DS2, .TV = p->TV2, .VT = p->VT2,
                                      .KT = 1, .W0 = w * WN, .WN = WN, .groups = WN * r->NH, .threads = 128,
                                      .smem = p->smem2};
        st = launch_chunkwise(r, &gates, ins, outs);
        if (st == ALLOY_OK) st = launch_chunkwise(r, &states, ins, outs);
        if (st == ALLOY_OK && oh) st = launch_chunkwise(r, &outputs, ins, outs);
    }
    if (keep && st == ALLOY_OK) {
        keep[0] = cw, keep[1] = nw, keep[2] = mw, keep[3] = gw;
        cw = nw = mw = gw = NULL;
        if (r->sc) keep[4] = ew, ew = NULL; /* sc: the state tiles' factors too */
    }
    alloy_array_free(cw);
    alloy_array_free(nw);
    alloy_array_free(mw);
    alloy_array_free(gw);
    alloy_array_free(ew);
    for (int e = 0; e < 3; e++) alloy_array_free(own[e]);
    return st;
}

/* The float32 or float16 q, k, v as float16 rows with a power-of-two exponent each
 * (mlstm_f16_rows.metal): out[0..2] the rows (q's, k's and v's shapes),
 * out[3] the exponents (int32, 3 x the rows of q); k and v NULL: q's rows
 * alone (out[0], out[3] of q's rows; out[1], out[2] NULL). */
alloy_status alloy_mlstm_f16_rows(alloy_array *q, alloy_array *k, alloy_array *v, alloy_stream *stream,
                                  alloy_array **out) {
    alloy_device *dev = alloy_array_device(q);
    const int np = k ? 3 : 1;
    const int64_t *s_qk = alloy_array_shape(q), *s_v = alloy_array_shape(v ? v : q);
    const int64_t rows = s_qk[0] * s_qk[1] * s_qk[2], s_xe[1] = {np * rows > 0 ? np * rows : 1};
    out[1] = out[2] = NULL;
    alloy_status st = alloy_array_new(dev, ALLOY_FLOAT16, 4, s_qk, &out[0]);
    if (st == ALLOY_OK && k) st = alloy_array_new(dev, ALLOY_FLOAT16, 4, s_qk, &out[1]);
    if (st == ALLOY_OK && k) st = alloy_array_new(dev, ALLOY_FLOAT16, 4, s_v, &out[2]);
    if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_INT32, 1, s_xe, &out[3]);
    if (st != ALLOY_OK || rows == 0) return st;
    alloy_kernel *kr = NULL;
    alloy_launch *l = NULL;
    if (st == ALLOY_OK) st = alloy_catalog_kernel(ROWS_FILE, &kr);
    if (st == ALLOY_OK) st = alloy_launch_new(&l);
    alloy_array *bound[4] = {out[0], k ? out[1] : out[0], k ? out[2] : out[0], out[3]};
    for (int e = 0; e < 4 && st == ALLOY_OK; e++) st = alloy_launch_add_output_array(l, bound[e]);
    if (st == ALLOY_OK) st = alloy_launch_add_template_dtype(l, "TIN", alloy_array_dtype(q));
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "DK", ALLOY_INT32, s_qk[3]);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "DV", ALLOY_INT32, s_v[3]);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "T", ALLOY_INT64, rows);
    if (st == ALLOY_OK) st = alloy_launch_set_constant_int(l, "NP", ALLOY_INT32, np);
    /* one SIMD group a row, at most 2^17 of them (rows in a grid-stride loop) */
    const int64_t groups = np * rows < ((int64_t)1 << 17) ? np * rows : ((int64_t)1 << 17);
    if (st == ALLOY_OK) st = alloy_launch_set_grid(l, (uint32_t)(groups * 32), 1, 1);
    if (st == ALLOY_OK) st = alloy_launch_set_threadgroup(l, groups * 32 < 256 ? (uint32_t)(groups * 32) : 256, 1, 1);
    alloy_array *ins[3] = {q, k ? k : q, v ? v : q}, *res[4] = {NULL, NULL, NULL, NULL};
    if (st == ALLOY_OK) st = alloy_kernel_apply(kr, 3, ins, l, stream, res);
    for (int e = 0; e < 4; e++) alloy_array_free(res[e]);
    alloy_launch_free(l);
    return st;
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

/* Both public forms; kept non-NULL: the split path in one window, its chunk
 * record handed over in kept[0..3] (sc: kept[4..8] too; alloy_mlstm_chunkwise_keep). */
static alloy_status chunkwise(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i, alloy_array *f,
                              alloy_array *c_initial, alloy_array *n_initial, alloy_array *m_initial,
                              alloy_array *cu_seqlens, int chunk_size, double eps, alloy_precision precision,
                              alloy_stream *stream, alloy_array **h, alloy_array **c_out, alloy_array **n_out,
                              alloy_array **m_out, alloy_array **kept) {
    alloy_status st = alloy_mlstm_check_q(FN, q, 4, stream);
    if (st != ALLOY_OK) return st;
    if ((st = alloy_mlstm_check_eps(FN, eps)) != ALLOY_OK) return st;
    if (precision == ALLOY_PRECISION_HIGHEST)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED,
                           "%s: precision HIGHEST (exact float32 products) has no kernel here; HIGH gives float32 "
                           "accuracy (three TF32 products), DEFAULT one TF32 product",
                           FN);
    if (precision != ALLOY_PRECISION_HIGH && precision != ALLOY_PRECISION_DEFAULT)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s: precision is %d; it must be HIGH or DEFAULT", FN,
                           (int)precision);
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
    /* float32 at precision DEFAULT (TFLA's: one TF32 product) runs on float16
     * tiles with a power-of-two exponent per row of q, k and v (the pre-pass
     * mlstm_f16_rows; float16 has TF32's 11 significant bits, the exponents
     * keep float32's range) — the 16-bit split path's traffic and products;
     * the fused kernel's one TF32 pass where the fused path is asked for.
     * float16 inputs always: the kernels round each chunk-start state and the
     * weights P to their tiles' dtype, and float16's own range (65 504) is
     * too short for them — a state sums k v over every token it remembers,
     * so inputs of about 100 with forget gates near 1 passed it within a few
     * tokens (h was inf) — while the exponents keep float32's range.
     * kept: the float16-tile run keeps its record (the state tiles, their
     * factors, the float16 rows and their exponents) for the backward on the
     * same tiles (CHUNKED_DEFAULT). The CPU has no faster product than float32's own, so
     * float32 there computes exact products at any precision (the float16
     * tiles would be twice as slow); ALLOY_MLSTM_PATH=scaled runs them there
     * too (the tests). */
    const int on_cpu = alloy_device_backend(dev) == ALLOY_BACKEND_CPU;
    const int sc = dt == ALLOY_FLOAT16 || (dt == ALLOY_FLOAT32 && precision == ALLOY_PRECISION_DEFAULT &&
                                           !path_is("fused") && (!on_cpu || path_is("scaled")));
    split_spec sp = {0};
    const int split = split_choose(sc ? 2 : tsize, sc, L, DHQK, DHHV, &sp);
    if (kept && (!split || DHQK > (dt == ALLOY_FLOAT32 ? 256 : 512) ||
                 (dt != ALLOY_BFLOAT16 && dt != ALLOY_FLOAT32)))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "%s: kept: the chunk-parallel backward does not take %s inputs with DHQK %lld (bfloat16, "
                           "and float32 with DHQK up to 256)",
                           FN, alloy_dtype_name(dt), (long long)DHQK);
    if (!split && smem > SMEM_BUDGET)
        return alloy_error(ALLOY_ERROR_UNSUPPORTED,
                           "%s: chunk_size %lld with DHQK %lld and %s inputs needs %zu bytes of threadgroup memory "
                           "(at most %zu); use a smaller chunk_size",
                           FN, (long long)L, (long long)DHQK, alloy_dtype_name(dt), smem, SMEM_BUDGET);
    const int64_t VT = (DHHV + TV - 1) / TV;
    const int64_t groups = nseq * NH * VT;

    alloy_array *oh = NULL, *oc = NULL, *on = NULL, *om = NULL;
    int ch = 0, cc = 0, cn = 0, cm = 0;
    st = alloy_mlstm_prepare_out(FN, "h", h, dev, dt, 4, s_v, &oh, &ch);
    if (st == ALLOY_OK && states_out) {
        st = alloy_mlstm_prepare_out(FN, "c_out", c_out, dev, ALLOY_FLOAT32, 4, s_c, &oc, &cc);
        if (st == ALLOY_OK) st = alloy_mlstm_prepare_out(FN, "n_out", n_out, dev, ALLOY_FLOAT32, 3, s_n, &on, &cn);
        if (st == ALLOY_OK) st = alloy_mlstm_prepare_out(FN, "m_out", m_out, dev, ALLOY_FLOAT32, 3, s_m, &om, &cm);
    }
    /* sc: q, k and v as float16 rows with their exponents (cv[0..2], cv[3]) */
    alloy_array *cv[4] = {NULL, NULL, NULL, NULL};
    alloy_array *src[3] = {q, k, v};
    if (st == ALLOY_OK && sc) {
        st = alloy_mlstm_f16_rows(q, k, v, stream, cv);
        for (int e = 0; e < 3 && st == ALLOY_OK; e++) src[e] = cv[e];
    }
    const alloy_dtype kdt = sc ? ALLOY_FLOAT16 : dt; /* the kernels' dtype (h stays the input's) */
    alloy_kernel *kc = NULL;
    if (st == ALLOY_OK) st = alloy_catalog_kernel(CHUNK_FILE, &kc);
    chunk_run run = {.kc = kc, .stream = stream, .dt = kdt, .L = L, .has_init = has_init, .varlen = cu_seqlens != NULL,
                     .vec = st == ALLOY_OK &&
                            alloy_mlstm_vec_rows(src[0], src[1], src[2], DHQK, DHHV, alloy_dtype_size(kdt)) && oh &&
                            alloy_ops_aligned16(1, &oh),
                     .tf32 = dt == ALLOY_FLOAT32 && precision == ALLOY_PRECISION_DEFAULT && !sc, .sc = sc,
                     .S = S, .NH = NH, .DHQK = DHQK,
                     .DHHV = DHHV, .nseq = nseq, .eps = eps};
    alloy_array *ins[10] = {src[0], src[1], src[2], i, f, has_init ? c_initial : q, has_init ? n_initial : q,
                            has_init ? m_initial : q, cu_seqlens ? cu_seqlens : q, sc ? cv[3] : q};
    if (split) run.L = sp.Ls;
    /* kept: the split run's scratch (c, n, m, gate records; sc: the tile factors), then sc's rows */
    alloy_array *record[ALLOY_MLSTM_KEPT] = {NULL};
    if (st == ALLOY_OK && split && (nseq * NH > 0 || kept))
        st = run_split(&run, &sp, ins, oh, states_out ? oc : NULL, states_out ? on : NULL, states_out ? om : NULL,
                       kept ? record : NULL);
    else if (st == ALLOY_OK && groups > 0) {
        const chunk_launch fused = {.phase = 0, .DKP = DKP, .DS = DS, .TV = TV, .res = res, .states_out = states_out,
                                    .VT = VT, .groups = groups, .threads = 256, .smem = smem};
        /* absent state outputs and the split path's slots are bound to h (never written) */
        alloy_array *outs[9] = {oh, states_out ? oc : oh, states_out ? on : oh, states_out ? om : oh,
                                oh, oh,                   oh,                   oh,                   oh};
        st = launch_chunkwise(&run, &fused, ins, outs);
    }
    if (st == ALLOY_OK && kept && sc)
        for (int e = 0; e < 4; e++) record[5 + e] = cv[e], cv[e] = NULL;
    for (int e = 0; e < 4; e++) alloy_array_free(cv[e]); /* (the runtime keeps what queued launches use) */
    if (st != ALLOY_OK) {
        if (ch) alloy_array_free(oh);
        if (cc) alloy_array_free(oc);
        if (cn) alloy_array_free(on);
        if (cm) alloy_array_free(om);
        for (int e = 0; e < ALLOY_MLSTM_KEPT; e++) alloy_array_free(record[e]);
        return st;
    }
    if (kept)
        for (int e = 0; e < ALLOY_MLSTM_KEPT; e++) kept[e] = record[e];
    if (ch) *h = oh;
    if (cc) *c_out = oc;
    if (cn) *n_out = on;
    if (cm) *m_out = om;
    return ALLOY_OK;
}

alloy_status alloy_mlstm_chunkwise(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i, alloy_array *f,
                                   alloy_array *c_initial, alloy_array *n_initial, alloy_array *m_initial,
                                   alloy_array *cu_seqlens, int chunk_size, double eps, alloy_stream *stream,
                                   alloy_array **h, alloy_array **c_out, alloy_array **n_out, alloy_array **m_out) {
    return alloy_mlstm_chunkwise_with_precision(q, k, v, i, f, c_initial, n_initial, m_initial, cu_seqlens, chunk_size,
                                                eps, ALLOY_PRECISION_HIGH, stream, h, c_out, n_out, m_out);
}

alloy_status alloy_mlstm_chunkwise_with_precision(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i,
                                                  alloy_array *f, alloy_array *c_initial, alloy_array *n_initial,
                                                  alloy_array *m_initial, alloy_array *cu_seqlens, int chunk_size,
                                                  double eps, alloy_precision precision, alloy_stream *stream,
                                                  alloy_array **h, alloy_array **c_out, alloy_array **n_out,
                                                  alloy_array **m_out) {
    return chunkwise(q, k, v, i, f, c_initial, n_initial, m_initial, cu_seqlens, chunk_size, eps, precision, stream, h,
                     c_out, n_out, m_out, NULL);
}

alloy_status alloy_mlstm_chunkwise_keep(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i, alloy_array *f,
                                        alloy_array *c_initial, alloy_array *n_initial, alloy_array *m_initial,
                                        alloy_array *cu_seqlens, int chunk_size, double eps,
                                        alloy_precision precision, alloy_stream *stream, alloy_array **h,
                                        alloy_array **c_out, alloy_array **n_out, alloy_array **m_out,
                                        alloy_array **kept) {
    if (!kept) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_mlstm_chunkwise_keep: kept is NULL");
    for (int e = 0; e < ALLOY_MLSTM_KEPT; e++)
        if (kept[e])
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "alloy_mlstm_chunkwise_keep: kept[%d] is not NULL (the record is always new arrays)", e);
    if (!c_out || !n_out || !m_out)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "alloy_mlstm_chunkwise_keep: c_out, n_out and m_out must be slots (the backward reads the "
                           "final states with kept)");
    return chunkwise(q, k, v, i, f, c_initial, n_initial, m_initial, cu_seqlens, chunk_size, eps, precision, stream, h,
                     c_out, n_out, m_out, kept);
}

alloy_status alloy_mlstm_split_forward(alloy_array *q, alloy_array *k, alloy_array *v, alloy_array *i, alloy_array *f,
                                       alloy_array *c_initial, alloy_array *n_initial, alloy_array *m_initial,
                                       alloy_array *cu_seqlens, int64_t L, double eps, int scaled, alloy_stream *stream,
                                       alloy_mlstm_saved *sv) {
    memset(sv, 0, sizeof *sv);
    alloy_device *dev = alloy_array_device(q);
    const alloy_dtype dt = alloy_array_dtype(q);
    const int64_t *qs = alloy_array_shape(q);
    const int64_t NH = qs[1], S = qs[2], DHQK = qs[3], DHHV = alloy_array_shape(v)[3];
    const int64_t nseq = cu_seqlens ? alloy_array_shape(cu_seqlens)[0] - 1 : qs[0];
    /* scaled: the kernels' operands are float16 rows with exponents (the forward of DEFAULT's tiles) */
    const size_t tsize = scaled ? 2 : alloy_dtype_size(dt);
    split_spec sp = {0};
    if (DHQK > 512 || !split_choose(tsize, scaled, L, DHQK, DHHV, &sp))
        return alloy_error(ALLOY_ERROR_UNSUPPORTED, "%s: no split path for DHQK %lld with %s inputs", FN,
                           (long long)DHQK, alloy_dtype_name(dt));
    const int64_t s_c[4] = {nseq, NH, DHQK, DHHV}, s_n[3] = {nseq, NH, DHQK}, s_m[3] = {nseq, NH, 1};
    /* 16-bit operands: no h (the backward takes dh . h from the states) */
    alloy_status st = tsize == 2 ? ALLOY_OK : alloy_array_new(dev, dt, 4, alloy_array_shape(v), &sv->h);
    if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 4, s_c, &sv->c_out);
    if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 3, s_n, &sv->n_out);
    if (st == ALLOY_OK) st = alloy_array_new(dev, ALLOY_FLOAT32, 3, s_m, &sv->m_out);
    alloy_array *src[3] = {q, k, v};
    if (st == ALLOY_OK && scaled) {
        alloy_array *cv[4] = {NULL, NULL, NULL, NULL};
        st = alloy_mlstm_f16_rows(q, k, v, stream, cv);
        for (int e = 0; e < 3; e++) sv->rows[e] = cv[e];
        sv->xe = cv[3];
        for (int e = 0; e < 3 && st == ALLOY_OK; e++) src[e] = cv[e];
    }
    alloy_kernel *kc = NULL;
    if (st == ALLOY_OK) st = alloy_catalog_kernel(CHUNK_FILE, &kc);
    const int has_init = c_initial != NULL;
    chunk_run run = {.kc = kc, .stream = stream, .dt = scaled ? ALLOY_FLOAT16 : dt, .L = sp.Ls, .has_init = has_init,
                     .varlen = cu_seqlens != NULL,
                     .vec = st == ALLOY_OK && alloy_mlstm_vec_rows(src[0], src[1], src[2], DHQK, DHHV, tsize) &&
                            (!sv->h || alloy_ops_aligned16(1, &sv->h)),
                     .sc = scaled, .S = S, .NH = NH, .DHQK = DHQK, .DHHV = DHHV, .nseq = nseq, .eps = eps};
    alloy_array *ins[10] = {src[0], src[1], src[2], i, f, has_init ? c_initial : q, has_init ? n_initial : q,
                            has_init ? m_initial : q, cu_seqlens ? cu_seqlens : q, scaled ? sv->xe : q};
    alloy_array *keep[5] = {NULL};
    if (st == ALLOY_OK) st = run_split(&run, &sp, ins, sv->h, sv->c_out, sv->n_out, sv->m_out, keep);
    sv->c_chunk = keep[0], sv->n_chunk = keep[1], sv->m_chunk = keep[2], sv->g_chunk = keep[3], sv->ce = keep[4];
    sv->L = sp.Ls;
    sv->nslots = alloy_mlstm_split_slots(S, sp.Ls, nseq, cu_seqlens != NULL);
    sv->vec = run.vec;
    if (st != ALLOY_OK) alloy_mlstm_saved_free(sv);
    return st;
}

void alloy_mlstm_saved_free(alloy_mlstm_saved *sv) {
    alloy_array *a[13] = {sv->h,       sv->c_out,   sv->n_out,   sv->m_out, sv->c_chunk, sv->n_chunk, sv->m_chunk,
                          sv->g_chunk, sv->rows[0], sv->rows[1], sv->rows[2], sv->xe,     sv->ce};
    for (int e = 0; e < 13; e++) alloy_array_free(a[e]);
    memset(sv, 0, sizeof *sv);
}
