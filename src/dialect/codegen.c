/* codegen.c — turns a kernel body, its header and one launch's argument
 * types into a whole C++ translation unit for a target.
 *
 * Layout (see dialect.h): prelude and `using namespace metal;` (MSL bodies
 * call metal functions unqualified); the rewritten header under
 * `#line 1 "<kernel>.header"`; a function holding the argument and attribute
 * plumbing, the template arguments and the rewritten body under
 * `#line 1 "<kernel>.body"`; the target's entry points. Everything between the
 * user's sections is marked as lines of "alloy-generated.cpp", so every
 * diagnostic names either the user's body/header line or a real line of the
 * generated file.
 *
 * Only what the body or header mentions (by identifier token) is declared:
 * `<in>_shape/_strides/_ndim` and the thread attributes. The argument slots
 * follow the order in dialect.h. The common part is target independent; a
 * target supplies an emitter (how arguments and attributes are reached, and
 * the entry points): the CPU's body function reads a slot array and is
 * called by exported group/thread loops; the CUDA body is the
 * `extern "C" __global__ void alloy_kernel_<name>(...)` itself (the name:
 * alloy_cuda_entry_name), with one typed
 * parameter per slot plus the launch info, and out-of-grid threads return
 * before the body. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dialect/regions.h"
#include "dialect/rewrite.h"

#define GENERATED_FILE "alloy-generated.cpp"

typedef struct emitter {
    const char *target_name;
    /* opens the function that holds the body (slots: see compute_slots) */
    void (*open_function)(alloy_strbuf *sb, const alloy_codegen_request *req,
                          const unsigned *slots);
    /* declares the inputs and outputs under the names the body uses */
    void (*arguments)(alloy_strbuf *sb, const alloy_codegen_request *req, const unsigned *slots);
    /* the primitives the attribute formulas use (when any attribute is used):
     * alloy_lx/ly/lz (position in the group) and the 3-element alloy_tg
     * (dispatch group size), alloy_sz (actual size of this group), alloy_gid,
     * alloy_grid, alloy_groups */
    void (*attribute_locals)(alloy_strbuf *sb, const alloy_codegen_request *req);
    void (*entry_points)(alloy_strbuf *sb, const alloy_codegen_request *req, int uses_sync);
    /* the launch's dynamic threadgroup memory (`alloy_threadgroup_memory`) */
    const char *threadgroup_memory_expr;
} emitter;

static const char *type_name(alloy_dtype dt);

/* ---- CPU ----------------------------------------------------------------- */

static void cpu_open_function(alloy_strbuf *sb, const alloy_codegen_request *req,
                              const unsigned *slots) {
    (void)slots;
    alloy_sb_append(sb,
                    "static inline __attribute__((always_inline)) void alloy_kernel_body("
                    "const alloy_cpu_group *alloy_g,\n"
                    "    unsigned alloy_lx, unsigned alloy_ly, unsigned alloy_lz) {\n"
                    "  [[maybe_unused]] void *const *alloy_a = alloy_g->launch->args;\n");
    if (req->cpu_debug)
        alloy_sb_append(sb, "  alloy_dbg::thread_scope alloy_dbg_scope(alloy_g, alloy_lx, alloy_ly, alloy_lz);\n"
                            "  [[maybe_unused]] const unsigned long long *const alloy_nb = "
                            "alloy_g->launch->debug->nbytes;\n"
                            "  [[maybe_unused]] const long long *const alloy_lo = alloy_g->launch->debug->lo;\n");
}

/* `alloy_a[k]` is the address of slot k's value (a buffer's data, a shape
 * array, ...). */
static void cpu_arguments_as(alloy_strbuf *sb, const alloy_codegen_request *req,
                             const unsigned *slots, int scalars_by_value) {
    int k = 0;
    for (int i = 0; i < req->n_inputs; i++) {
        const alloy_codegen_input *in = &req->inputs[i];
        const char *t = type_name(in->dtype);
        if (in->is_scalar) {
            alloy_sb_printf(sb, "  [[maybe_unused]] const %s%s %s = *(const %s*)alloy_a[%d];\n", t,
                            scalars_by_value ? "" : "&", in->name, t, k++);
            continue;
        }
        if (req->cpu_debug) /* a checked pointer (cpu_debug.h) */
            alloy_sb_printf(sb,
                            "  [[maybe_unused]] alloy_dbg::ptr<const %s> %s((const %s*)alloy_a[%d], "
                            "alloy_lo[%d], alloy_nb[%d], \"%s\", \"input\");\n",
                            t, in->name, t, k, k, k, in->name);
        else
            alloy_sb_printf(sb, "  [[maybe_unused]] const %s* %s = (const %s*)alloy_a[%d];\n", t,
                            in->name, t, k);
        k++;
        if (slots[i] & ALLOY_SLOT_SHAPE)
            alloy_sb_printf(sb, "  [[maybe_unused]] const int* %s_shape = (const int*)alloy_a[%d];\n", in->name,
                            k++);
        if (slots[i] & ALLOY_SLOT_STRIDES)
            alloy_sb_printf(sb, "  [[maybe_unused]] const int64_t* %s_strides = (const int64_t*)alloy_a[%d];\n",
                            in->name, k++);
    }
    for (int j = 0; j < req->n_outputs; j++) {
        const alloy_codegen_output *o = &req->outputs[j];
        const char *t = type_name(o->dtype);
        char elem[64];
        snprintf(elem, sizeof elem, req->atomic_outputs ? "atomic<%s>" : "%s", t);
        if (req->cpu_debug)
            alloy_sb_printf(sb,
                            "  [[maybe_unused]] alloy_dbg::ptr<%s> %s((%s*)alloy_a[%d], alloy_lo[%d], "
                            "alloy_nb[%d], \"%s\", \"output\");\n",
                            elem, o->name, elem, k, k, k, o->name);
        else
            alloy_sb_printf(sb, "  [[maybe_unused]] %s* %s = (%s*)alloy_a[%d];\n", elem, o->name,
                            elem, k);
        k++;
    }
    for (int c = 0; c < req->n_constants; c++, k++) {
        const char *t = type_name(req->constants[c].dtype);
        alloy_sb_printf(sb, "  [[maybe_unused]] const %s %s = *(const %s*)alloy_a[%d];\n", t,
                        req->constants[c].name, t, k);
    }
    /* the runtime's struct (cpu_abi.h), by reference as on CUDA */
    for (int m = 0; m < req->n_tensor_maps; m++, k++)
        alloy_sb_printf(sb,
                        "  [[maybe_unused]] const alloy_tensor_map &%s = *(const alloy_tensor_map*)"
                        "alloy_a[%d];\n",
                        req->tensor_maps[m].name, k);
}

static void cpu_arguments(alloy_strbuf *sb, const alloy_codegen_request *req,
                          const unsigned *slots) {
    cpu_arguments_as(sb, req, slots, 0);
}

static void cpu_attribute_locals(alloy_strbuf *sb, const alloy_codegen_request *req) {
    (void)req;
    alloy_sb_append(
        sb,
        "  [[maybe_unused]] const unsigned *const alloy_tg = alloy_g->launch->tg;\n"
        "  [[maybe_unused]] const unsigned *const alloy_sz = alloy_g->size;\n"
        "  [[maybe_unused]] const unsigned *const alloy_gid = alloy_g->group_id;\n"
        "  [[maybe_unused]] const unsigned *const alloy_grid = alloy_g->launch->grid;\n"
        "  [[maybe_unused]] const unsigned *const alloy_groups = alloy_g->launch->groups;\n");
}

static void cpu_entry_points(alloy_strbuf *sb, const alloy_codegen_request *req, int uses_sync) {
    const int tensor_ops =
        alloy_source_uses_tensor_ops(req->body) || alloy_source_uses_tensor_ops(req->header);
    if (uses_sync < 0) { /* barrier regions as loops: the group function is the entry */
        alloy_sb_printf(sb,
                        "#define ALLOY_EXPORT_ extern \"C\" __attribute__((visibility(\"default\")))\n"
                        "ALLOY_EXPORT_ const unsigned alloy_cpu_abi = ALLOY_CPU_ABI_VERSION;\n"
                        "ALLOY_EXPORT_ const int alloy_cpu_uses_sync = 0;\n"
                        "ALLOY_EXPORT_ const int alloy_cpu_checked = %d;\n"
                        "ALLOY_EXPORT_ void alloy_cpu_group_loop(const alloy_cpu_group *g) {\n"
                        "  ALLOY_SET_GROUP(g);\n"
                        "  alloy_kernel_group(g);\n"
                        "}\n"
                        "#undef ALLOY_EXPORT_\n",
                        req->cpu_debug ? 1 : 0);
        return;
    }
    alloy_sb_printf(
        sb,
        "#define ALLOY_EXPORT_ extern \"C\" __attribute__((visibility(\"default\")))\n"
        "ALLOY_EXPORT_ const unsigned alloy_cpu_abi = ALLOY_CPU_ABI_VERSION;\n"
        "ALLOY_EXPORT_ const int alloy_cpu_uses_sync = %d;\n"
        "ALLOY_EXPORT_ const int alloy_cpu_checked = %d;\n"
        "ALLOY_EXPORT_ void alloy_cpu_group_loop(const alloy_cpu_group *g) {\n"
        "  ALLOY_SET_GROUP(g);\n"
        "  const int sx = (int)g->size[0], sy = (int)g->size[1], sz = (int)g->size[2];\n"
        "  for (int lz = 0; lz < sz; ++lz)\n"
        "    for (int ly = 0; ly < sy; ++ly)\n"
        "      _Pragma(\"omp simd\") for (int lx = 0; lx < sx; ++lx) {\n"
        "%s"
        "        alloy_kernel_body(g, (unsigned)lx, (unsigned)ly, (unsigned)lz);\n"
        "      }\n"
        "}\n"
        "ALLOY_EXPORT_ void alloy_cpu_thread(const alloy_cpu_group *g, unsigned lx, unsigned ly,\n"
        "                                    unsigned lz) {\n"
        "  ALLOY_SET_GROUP(g);\n"
        "  ALLOY_SET_LID(g, lx, ly, lz);\n"
        "  alloy_kernel_body(g, lx, ly, lz);\n"
        "}\n"
        "#undef ALLOY_EXPORT_\n",
        uses_sync ? 1 : 0, req->cpu_debug ? 1 : 0,
        /* only the tensor operations read the thread's index from the
         * worker (a store per thread would keep the loop scalar) */
        tensor_ops ? "        ALLOY_SET_LID(g, lx, ly, lz);\n" : "");
}

static const emitter cpu_emitter = {"CPU", cpu_open_function, cpu_arguments,
                                    cpu_attribute_locals, cpu_entry_points,
                                    "(unsigned char*)alloy_g->tg_memory"};

/* ---- CUDA ---------------------------------------------------------------- */

void alloy_cuda_entry_name(const char *kernel_name, char *out, size_t n) {
    static const char prefix[] = "alloy_kernel";
    snprintf(out, n, "%s", prefix);
    const char *s = kernel_name ? kernel_name : "";
    if (strncmp(s, "alloy_", 6) == 0 && s[6]) s += 6;
    if (!*s) return;
    size_t len = strlen(out);
    if (len + 2 < n) out[len++] = '_';
    for (; *s && len + 1 < n; s++) {
        const char c = *s;
        const int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        out[len++] = ok ? c : '_';
    }
    out[len] = 0;
}

/* The body is the kernel itself: one parameter per slot (dialect.h order),
 * then the launch info. Buffers (0-d inputs too) are typed device pointers;
 * shapes and strides come by value as __grid_constant__ structs (the body
 * indexes them through a pointer without a local copy); ndim is an int. */
static void cuda_open_function(alloy_strbuf *sb, const alloy_codegen_request *req,
                               const unsigned *slots) {
    int k = 0;
    char entry[ALLOY_CUDA_ENTRY_MAX];
    alloy_cuda_entry_name(req->kernel_name, entry, sizeof entry);
    alloy_sb_printf(sb, "extern \"C\" __global__ void ALLOY_CUDA_LAUNCH_BOUNDS %s(\n", entry);
    for (int i = 0; i < req->n_inputs; i++) {
        alloy_sb_printf(sb, "    const %s* alloy_a%d,\n", type_name(req->inputs[i].dtype), k++);
        if (slots[i] & ALLOY_SLOT_SHAPE)
            alloy_sb_printf(sb, "    const __grid_constant__ alloy_i32x8 alloy_a%d,\n", k++);
        if (slots[i] & ALLOY_SLOT_STRIDES)
            alloy_sb_printf(sb, "    const __grid_constant__ alloy_i64x8 alloy_a%d,\n", k++);
    }
    for (int j = 0; j < req->n_outputs; j++)
        alloy_sb_printf(sb, "    %s* alloy_a%d,\n", type_name(req->outputs[j].dtype), k++);
    for (int c = 0; c < req->n_constants; c++)
        alloy_sb_printf(sb, "    const %s alloy_a%d,\n", type_name(req->constants[c].dtype), k++);
    /* a CUtensorMap by value: __grid_constant__ keeps it in parameter space,
     * so its generic address is what the copy-engine instructions take */
    for (int m = 0; m < req->n_tensor_maps; m++)
        alloy_sb_printf(sb, "    const __grid_constant__ alloy_tensor_map alloy_a%d,\n", k++);
    alloy_sb_append(sb, "    const alloy_launch_info alloy_info) {\n");
    /* Threads outside the grid never run the body (the SIMD functions see
     * them as exited lanes; barriers count exited threads as arrived). Only
     * a dimension whose last threadgroup is partial has such threads, and
     * only one whose rounded-up grid passes 2^32 threads needs 64-bit
     * arithmetic to find them: the launch's geometry class says which, so a
     * whole-group grid pays for no check at all. */
    int first = 1;
    for (int d = 0; d < 3; d++) {
        if (!(req->geometry & ALLOY_GEOMETRY_PARTIAL(d))) continue;
        const char c = "xyz"[d];
        alloy_sb_append(sb, first ? "  if (" : "      ");
        if (req->geometry & ALLOY_GEOMETRY_WIDE(d))
            alloy_sb_printf(sb, "(unsigned long long)blockIdx.%c * blockDim.%c + threadIdx.%c", c, c, c);
        else
            alloy_sb_printf(sb, "blockIdx.%c * blockDim.%c + threadIdx.%c", c, c, c);
        alloy_sb_printf(sb, " >= alloy_info.grid[%d]", d);
        first = 0;
        int more = 0;
        for (int e = d + 1; e < 3; e++) more |= (req->geometry & ALLOY_GEOMETRY_PARTIAL(e)) != 0;
        alloy_sb_append(sb, more ? " ||\n" : ")\n    return;\n");
    }
}

static void cuda_arguments(alloy_strbuf *sb, const alloy_codegen_request *req,
                           const unsigned *slots) {
    int k = 0;
    for (int i = 0; i < req->n_inputs; i++) {
        const alloy_codegen_input *in = &req->inputs[i];
        const char *t = type_name(in->dtype);
        if (in->is_scalar) {
            alloy_sb_printf(sb, "  [[maybe_unused]] const %s& %s = *alloy_a%d;\n", t, in->name, k++);
            continue;
        }
        alloy_sb_printf(sb, "  [[maybe_unused]] const %s* %s = alloy_a%d;\n", t, in->name, k++);
        if (slots[i] & ALLOY_SLOT_SHAPE)
            alloy_sb_printf(sb, "  [[maybe_unused]] const int* %s_shape = alloy_a%d.v;\n", in->name,
                            k++);
        if (slots[i] & ALLOY_SLOT_STRIDES)
            alloy_sb_printf(sb,
                            "  [[maybe_unused]] const int64_t* %s_strides = (const int64_t*)alloy_a%d.v;\n",
                            in->name, k++);
    }
    for (int j = 0; j < req->n_outputs; j++) {
        const alloy_codegen_output *o = &req->outputs[j];
        const char *t = type_name(o->dtype);
        if (req->atomic_outputs)
            alloy_sb_printf(sb, "  [[maybe_unused]] atomic<%s>* %s = (atomic<%s>*)alloy_a%d;\n", t,
                            o->name, t, k++);
        else
            alloy_sb_printf(sb, "  [[maybe_unused]] %s* %s = alloy_a%d;\n", t, o->name, k++);
    }
    for (int c = 0; c < req->n_constants; c++)
        alloy_sb_printf(sb, "  [[maybe_unused]] const %s %s = alloy_a%d;\n",
                        type_name(req->constants[c].dtype), req->constants[c].name, k++);
    for (int m = 0; m < req->n_tensor_maps; m++)
        alloy_sb_printf(sb, "  [[maybe_unused]] const alloy_tensor_map &%s = alloy_a%d;\n",
                        req->tensor_maps[m].name, k++);
}

/* The primitives the attribute formulas use, as the CPU's locals: the
 * position in the group, the dispatch size, the group, the grid, the number
 * of groups, and alloy_sz, the actual size of this thread's group (partial at
 * the grid's edges). */
static void cuda_attribute_locals(alloy_strbuf *sb, const alloy_codegen_request *req) {
    alloy_sb_append(
        sb,
        "  [[maybe_unused]] const unsigned alloy_lx = threadIdx.x, alloy_ly = threadIdx.y, "
        "alloy_lz = threadIdx.z;\n"
        "  [[maybe_unused]] const unsigned alloy_tg[3] = {blockDim.x, blockDim.y, blockDim.z};\n"
        "  [[maybe_unused]] const unsigned alloy_gid[3] = {blockIdx.x, blockIdx.y, blockIdx.z};\n"
        "  [[maybe_unused]] const unsigned alloy_grid[3] = {alloy_info.grid[0], alloy_info.grid[1], "
        "alloy_info.grid[2]};\n"
        "  [[maybe_unused]] const unsigned alloy_groups[3] = {gridDim.x, gridDim.y, gridDim.z};\n"
        "  [[maybe_unused]] const unsigned alloy_sz[3] = {\n");
    /* A dimension without a partial group has every group full. */
    for (int d = 0; d < 3; d++) {
        if (req->geometry & ALLOY_GEOMETRY_PARTIAL(d))
            alloy_sb_printf(sb,
                            "      alloy_grid[%d] - alloy_gid[%d] * alloy_tg[%d] < alloy_tg[%d] ? "
                            "alloy_grid[%d] - alloy_gid[%d] * alloy_tg[%d] : alloy_tg[%d]",
                            d, d, d, d, d, d, d, d);
        else
            alloy_sb_printf(sb, "      alloy_tg[%d]", d);
        alloy_sb_append(sb, d < 2 ? ",\n" : "};\n");
    }
}

/* The kernel is the body's function: nothing follows it. (Nothing may: a
 * thread that returned from the body must exit, see cuda.h.) */
static void cuda_entry_points(alloy_strbuf *sb, const alloy_codegen_request *req, int uses_sync) {
    (void)sb;
    (void)req;
    (void)uses_sync;
}

static const emitter cuda_emitter = {"CUDA", cuda_open_function, cuda_arguments,
                                     cuda_attribute_locals, cuda_entry_points,
                                     "alloy_dyn_smem"};

/* ---- common -------------------------------------------------------------- */

/* The identifiers of the header and body, sorted, to answer "is X
 * mentioned" without rescanning for every attribute and input. */
typedef struct ident_ref {
    const char *p;
    int len;
} ident_ref;

typedef struct mentions {
    ident_ref *v;
    int n, cap, failed;
} mentions;

static void collect_cb(const char *id, int len, const char *next, int next_len, void *user) {
    (void)next;
    (void)next_len;
    mentions *m = user;
    if (m->failed) return;
    if (m->n == m->cap) {
        int cap = m->cap ? m->cap * 2 : 256;
        ident_ref *v = realloc(m->v, sizeof *v * (size_t)cap);
        if (!v) {
            m->failed = 1;
            return;
        }
        m->v = v;
        m->cap = cap;
    }
    m->v[m->n].p = id;
    m->v[m->n].len = len;
    m->n++;
}

static int ident_cmp(const void *a, const void *b) {
    const ident_ref *x = a, *y = b;
    int n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, (size_t)n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

static alloy_status collect_mentions(mentions *m, const char *src) {
    if (!src) return ALLOY_OK;
    size_t len = strlen(src);
    if (len > (size_t)0x7fffffff)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "kernel source is too long");
    alloy_status st = alloy_for_each_ident(src, (int)len, collect_cb, m);
    if (st == ALLOY_OK && m->failed)
        st = alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory generating code");
    return st;
}

static int mentioned(const mentions *m, const char *ident) {
    ident_ref key = {ident, (int)strlen(ident)};
    return m->n && bsearch(&key, m->v, (size_t)m->n, sizeof *m->v, ident_cmp) != NULL;
}

static int mentioned_suffix(const mentions *m, const char *name, const char *suffix) {
    char buf[512];
    int n = snprintf(buf, sizeof buf, "%s%s", name, suffix);
    return n > 0 && n < (int)sizeof buf && mentioned(m, buf);
}

/* 1-based number of the line that the next appended text starts on. */
static int next_line(const alloy_strbuf *sb) {
    int n = 1;
    for (size_t i = 0; i < sb->len; i++) n += sb->data[i] == '\n';
    return n;
}

static void ensure_newline(alloy_strbuf *sb) {
    if (sb->len && sb->data[sb->len - 1] != '\n') alloy_sb_append(sb, "\n");
}

/* `#line` back to the real lines of the generated file. */
static void line_back(alloy_strbuf *sb) {
    ensure_newline(sb);
    alloy_sb_printf(sb, "#line %d \"" GENERATED_FILE "\"\n", next_line(sb) + 1);
}

/* The kernel's name as it may appear inside a `#line` file name. */
static void append_file_name(alloy_strbuf *sb, const char *name) {
    for (const char *p = name; *p; p++) {
        unsigned char c = (unsigned char)*p;
        char ch = (c < 0x20 || c == 0x7f || c == '"' || c == '\\') ? '_' : (char)c;
        alloy_sb_append_n(sb, &ch, 1);
    }
}

/* Requests are checked (check_request) before any type is printed, so an
 * invalid dtype never reaches the output; "void" keeps printf safe anyway. */
static const char *type_name(alloy_dtype dt) {
    return (unsigned)dt < (unsigned)ALLOY_DTYPE_COUNT ? alloy_dtype_msl_name(dt) : "void";
}

static alloy_status check_request(const alloy_codegen_request *req, const char *kname) {
    if (!req->body)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "kernel '%s': the body is NULL",
                           kname);
    if (req->n_inputs < 0 || req->n_outputs < 0 || req->n_templates < 0 || req->n_constants < 0 ||
        req->n_tensor_maps < 0 || (req->n_inputs && !req->inputs) || (req->n_outputs && !req->outputs) ||
        (req->n_templates && !req->templates) || (req->n_constants && !req->constants) ||
        (req->n_tensor_maps && !req->tensor_maps))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': inconsistent argument counts for code generation",
                           kname);
    for (int i = 0; i < req->n_inputs; i++) {
        if (req->inputs[i].name && alloy_check_identifier(req->inputs[i].name, "input") != ALLOY_OK)
            return ALLOY_ERROR_INVALID_ARGUMENT;
        if (!req->inputs[i].name || (unsigned)req->inputs[i].dtype >= (unsigned)ALLOY_DTYPE_COUNT)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "kernel '%s': input %d has no name or an invalid dtype (%d)",
                               kname, i, (int)req->inputs[i].dtype);
        if (!req->inputs[i].is_scalar && (req->inputs[i].ndim < 1 || req->inputs[i].ndim > 8))
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "kernel '%s': input %d has rank %d (1 to 8, or 0-d)", kname, i,
                               req->inputs[i].ndim);
    }
    for (int i = 0; i < req->n_outputs; i++) {
        if (req->outputs[i].name &&
            alloy_check_identifier(req->outputs[i].name, "output") != ALLOY_OK)
            return ALLOY_ERROR_INVALID_ARGUMENT;
        if (!req->outputs[i].name || (unsigned)req->outputs[i].dtype >= (unsigned)ALLOY_DTYPE_COUNT)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "kernel '%s': output %d has no name or an invalid dtype (%d)",
                               kname, i, (int)req->outputs[i].dtype);
    }
    for (int i = 0; i < req->n_constants; i++) {
        const alloy_constant_arg *c = &req->constants[i];
        if (!memchr(c->name, 0, sizeof c->name) ||
            alloy_check_identifier(c->name, "launch constant") != ALLOY_OK)
            return ALLOY_ERROR_INVALID_ARGUMENT;
    }
    for (int i = 0; i < req->n_tensor_maps; i++) {
        const alloy_tensor_map_arg *m = &req->tensor_maps[i];
        if (!memchr(m->name, 0, sizeof m->name) ||
            alloy_check_identifier(m->name, "tensor map") != ALLOY_OK)
            return ALLOY_ERROR_INVALID_ARGUMENT;
    }
    for (int i = 0; i < req->n_templates; i++) {
        const alloy_template_arg *t = &req->templates[i];
        if (!memchr(t->name, 0, sizeof t->name) || !t->name[0] ||
            (t->kind == ALLOY_TEMPLATE_DTYPE && (unsigned)t->dvalue >= (unsigned)ALLOY_DTYPE_COUNT) ||
            (t->kind != ALLOY_TEMPLATE_DTYPE && t->kind != ALLOY_TEMPLATE_INT &&
             t->kind != ALLOY_TEMPLATE_BOOL))
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "kernel '%s': template argument %d is malformed", kname,
                               i);
        if (alloy_check_identifier(t->name, "template argument") != ALLOY_OK)
            return ALLOY_ERROR_INVALID_ARGUMENT;
    }
    return ALLOY_OK;
}

/* Which optional slots each input gets (by the identifiers mentioned), and
 * the total number of slots. */
static void compute_slots(const alloy_codegen_request *req, const mentions *m, unsigned *slots,
                          int *n_slots) {
    int k = 0;
    for (int i = 0; i < req->n_inputs; i++) {
        const alloy_codegen_input *in = &req->inputs[i];
        unsigned s = 0;
        if (!in->is_scalar) { /* a 0-d input never gets shape slots */
            if (mentioned_suffix(m, in->name, "_shape")) s |= ALLOY_SLOT_SHAPE;
            if (mentioned_suffix(m, in->name, "_strides")) s |= ALLOY_SLOT_STRIDES;
        }
        slots[i] = s;
        k += 1 + (s & 1u) + ((s >> 1) & 1u); /* data, then each slot */
    }
    *n_slots = k + req->n_outputs + req->n_constants + req->n_tensor_maps;
}

/* Every backend computes the thread attributes with these formulas over its
 * primitives (emitter.attribute_locals), so they agree exactly: alloy_L is the
 * linear index in the group (with the dispatch size), alloy_Llast the linear
 * index of the group's last thread + 1, alloy_T the dispatch size. */
static const char ATTRIBUTE_DERIVED[] =
    "  [[maybe_unused]] const unsigned alloy_L = alloy_lx + alloy_ly * alloy_tg[0] + "
    "alloy_lz * alloy_tg[0] * alloy_tg[1];\n"
    "  [[maybe_unused]] const unsigned alloy_Llast = (alloy_sz[2] - 1u) * alloy_tg[0] * "
    "alloy_tg[1] + (alloy_sz[1] - 1u) * alloy_tg[0] + alloy_sz[0];\n"
    "  [[maybe_unused]] const unsigned alloy_T = alloy_tg[0] * alloy_tg[1] * alloy_tg[2];\n";

static const struct {
    const char *name, *expr;
} attribute_formulas[] = {
    {"thread_position_in_grid",
     "uint3(alloy_gid[0] * alloy_tg[0] + alloy_lx, alloy_gid[1] * alloy_tg[1] + alloy_ly, "
     "alloy_gid[2] * alloy_tg[2] + alloy_lz)"},
    {"thread_position_in_threadgroup", "uint3(alloy_lx, alloy_ly, alloy_lz)"},
    {"threadgroup_position_in_grid", "uint3(alloy_gid[0], alloy_gid[1], alloy_gid[2])"},
    {"threads_per_threadgroup", "uint3(alloy_sz[0], alloy_sz[1], alloy_sz[2])"},
    {"dispatch_threads_per_threadgroup", "uint3(alloy_tg[0], alloy_tg[1], alloy_tg[2])"},
    {"threads_per_grid", "uint3(alloy_grid[0], alloy_grid[1], alloy_grid[2])"},
    {"grid_size", "uint3(alloy_grid[0], alloy_grid[1], alloy_grid[2])"},
    {"grid_origin", "uint3(0u, 0u, 0u)"},
    {"threadgroups_per_grid", "uint3(alloy_groups[0], alloy_groups[1], alloy_groups[2])"},
    {"thread_index_in_threadgroup", "alloy_L"},
    {"thread_index_in_simdgroup", "alloy_L % 32u"},
    {"simdgroup_index_in_threadgroup", "alloy_L / 32u"},
    {"simdgroups_per_threadgroup", "(alloy_Llast + 31u) / 32u"},
    {"dispatch_simdgroups_per_threadgroup",
     "(alloy_T + 31u) / 32u"},
    {"threads_per_simdgroup", "32u"},
    {"thread_execution_width", "32u"},
    {"thread_index_in_quadgroup", "alloy_L % 4u"},
    {"quadgroup_index_in_threadgroup", "alloy_L / 4u"},
    {"quadgroups_per_threadgroup", "(alloy_Llast + 3u) / 4u"},
    {"dispatch_quadgroups_per_threadgroup", "(alloy_T + 3u) / 4u"},
};

static const char *attribute_expr(const char *name) {
    for (size_t i = 0; i < sizeof attribute_formulas / sizeof *attribute_formulas; i++)
        if (strcmp(attribute_formulas[i].name, name) == 0) return attribute_formulas[i].expr;
    return NULL;
}

static void emit_attributes(alloy_strbuf *sb, const emitter *em, const alloy_codegen_request *req,
                            const mentions *m) {
    int any = 0;
    for (int a = 0; a < alloy_attribute_count(); a++) {
        const char *name = alloy_attribute_name(a);
        if (!mentioned(m, name)) continue;
        if (!any) {
            em->attribute_locals(sb, req);
            alloy_sb_append(sb, ATTRIBUTE_DERIVED);
        }
        any = 1;
        alloy_sb_printf(sb, "  [[maybe_unused]] %s %s = %s;\n",
                        alloy_attribute_is_vector(a) ? "uint3" : "uint", name, attribute_expr(name));
    }
    if (mentioned(m, "alloy_threadgroup_memory"))
        alloy_sb_printf(sb, "  [[maybe_unused]] unsigned char* alloy_threadgroup_memory = %s;\n",
                        em->threadgroup_memory_expr);
}

/* `<in>_ndim` is the specialisation's constant: a loop over the shape
 * unrolls, and an elementwise body that multiplies out its size costs one
 * load per dimension instead of a loop. */
static void emit_ranks(alloy_strbuf *sb, const alloy_codegen_request *req, const mentions *m) {
    for (int i = 0; i < req->n_inputs; i++) {
        const alloy_codegen_input *in = &req->inputs[i];
        if (!in->is_scalar && mentioned_suffix(m, in->name, "_ndim"))
            alloy_sb_printf(sb, "  [[maybe_unused]] constexpr int %s_ndim = %d;\n", in->name,
                            in->ndim);
    }
}

static void emit_templates(alloy_strbuf *sb, const alloy_codegen_request *req) {
    for (int i = 0; i < req->n_templates; i++) {
        const alloy_template_arg *t = &req->templates[i];
        switch (t->kind) {
        case ALLOY_TEMPLATE_DTYPE:
            alloy_sb_printf(sb, "  using %s [[maybe_unused]] = %s;\n", t->name,
                            type_name(t->dvalue));
            break;
        case ALLOY_TEMPLATE_BOOL:
            alloy_sb_printf(sb, "  [[maybe_unused]] constexpr bool %s = %s;\n", t->name,
                            t->ivalue ? "true" : "false");
            break;
        case ALLOY_TEMPLATE_INT:
            if (t->ivalue >= INT32_MIN && t->ivalue <= INT32_MAX)
                alloy_sb_printf(sb, "  [[maybe_unused]] constexpr int %s = %lld;\n", t->name,
                                (long long)t->ivalue);
            else if (t->ivalue == INT64_MIN)
                alloy_sb_printf(sb, "  [[maybe_unused]] constexpr long %s = (-%lldL - 1L);\n",
                                t->name, (long long)INT64_MAX);
            else
                alloy_sb_printf(sb, "  [[maybe_unused]] constexpr long %s = %lldL;\n", t->name,
                                (long long)t->ivalue);
            break;
        }
    }
}

/* ---- CPU: barrier regions as loops ---------------------------------------- */

/* Attributes that differ between the threads of a group; the others are
 * the same for the whole group. */
static int attribute_per_thread(const char *name) {
    static const char *const names[] = {
        "thread_position_in_grid", "thread_position_in_threadgroup", "thread_index_in_threadgroup",
        "thread_index_in_simdgroup", "simdgroup_index_in_threadgroup", "thread_index_in_quadgroup",
        "quadgroup_index_in_threadgroup", NULL};
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], name)) return 1;
    return 0;
}

/* A name list that owns its strings. */
typedef struct name_list {
    char **v;
    int n, cap, failed;
} name_list;

static void names_add(name_list *l, const char *a, const char *b) {
    if (l->failed) return;
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 32;
        char **v = realloc(l->v, sizeof *v * (size_t)cap);
        if (!v) {
            l->failed = 1;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    size_t la = strlen(a), lb = b ? strlen(b) : 0;
    char *p = malloc(la + lb + 1);
    if (!p) {
        l->failed = 1;
        return;
    }
    memcpy(p, a, la);
    if (lb) memcpy(p + la, b, lb);
    p[la + lb] = 0;
    l->v[l->n++] = p;
}

static void names_free(name_list *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
}

/* The group function of a body whose barriers sit in group-uniform control
 * flow (regions.c): arguments and group-wide attributes once, then the
 * regions as loops over the threads. *done = 0 (and sb unchanged) when the
 * body keeps the fiber path. */
static alloy_status emit_cpu_regions(alloy_strbuf *sb, const alloy_codegen_request *req,
                                     const mentions *m, const unsigned *slots, const char *kname,
                                     unsigned rewrite_flags, int *done) {
    *done = 0;
    char what[320];
    snprintf(what, sizeof what, "the body of kernel '%.256s'", kname);
    alloy_strbuf body;
    alloy_sb_init(&body);
    alloy_status st = alloy_rewrite_msl(req->body, what, rewrite_flags, &body);
    if (st != ALLOY_OK) { /* the normal path reports it */
        alloy_sb_free(&body);
        return ALLOY_OK;
    }
    name_list uni = {0}, thr = {0};
    for (int i = 0; i < req->n_inputs; i++) {
        const alloy_codegen_input *in = &req->inputs[i];
        if (in->is_scalar) {
            names_add(&uni, in->name, NULL);
            continue;
        }
        names_add(&uni, in->name, "_shape");
        names_add(&uni, in->name, "_strides");
        names_add(&uni, in->name, "_ndim");
    }
    for (int c = 0; c < req->n_constants; c++) names_add(&uni, req->constants[c].name, NULL);
    for (int m = 0; m < req->n_tensor_maps; m++) names_add(&uni, req->tensor_maps[m].name, NULL);
    for (int t = 0; t < req->n_templates; t++) names_add(&uni, req->templates[t].name, NULL);
    alloy_strbuf pro;
    alloy_sb_init(&pro);
    alloy_sb_append(&pro, "    [[maybe_unused]] const unsigned alloy_L = alloy_lx + alloy_ly * alloy_tg[0] + "
                          "alloy_lz * alloy_tg[0] * alloy_tg[1];\n");
    for (int a = 0; a < alloy_attribute_count(); a++) {
        const char *name = alloy_attribute_name(a);
        if (!attribute_per_thread(name)) {
            names_add(&uni, name, NULL);
            continue;
        }
        names_add(&thr, name, NULL);
        if (mentioned(m, name))
            alloy_sb_printf(&pro, "    [[maybe_unused]] const %s %s = %s;\n",
                            alloy_attribute_is_vector(a) ? "uint3" : "uint", name, attribute_expr(name));
    }
    const size_t mark = sb->len;
    alloy_sb_append(sb, "static inline __attribute__((always_inline)) void alloy_kernel_group("
                        "const alloy_cpu_group *alloy_g) {\n"
                        "  [[maybe_unused]] void *const *alloy_a = alloy_g->launch->args;\n");
    /* a 0-d input by value: read once per group, and no store to an output
     * can change it (the threads' loops vectorise) */
    cpu_arguments_as(sb, req, slots, 1);
    emit_ranks(sb, req, m);
    /* the group's geometry in locals (stores to the outputs cannot change them) */
    if (req->threadgroup[0] && req->threadgroup[1] && req->threadgroup[2]) {
        /* specialised on the threadgroup size: a dimension without a
         * partial group has every group full */
        alloy_sb_printf(sb, "  [[maybe_unused]] constexpr unsigned alloy_tg[3] = {%uu, %uu, %uu};\n",
                        req->threadgroup[0], req->threadgroup[1], req->threadgroup[2]);
        alloy_sb_append(sb, "  [[maybe_unused]] const unsigned alloy_sz[3] = {");
        for (int d = 0; d < 3; d++) {
            if (req->geometry & ALLOY_GEOMETRY_PARTIAL(d)) alloy_sb_printf(sb, "alloy_g->size[%d]", d);
            else alloy_sb_printf(sb, "%uu", req->threadgroup[d]);
            alloy_sb_append(sb, d < 2 ? ", " : "};\n");
        }
    } else {
        alloy_sb_append(sb,
                        "  [[maybe_unused]] const unsigned alloy_tg[3] = {alloy_g->launch->tg[0], "
                        "alloy_g->launch->tg[1], alloy_g->launch->tg[2]};\n"
                        "  [[maybe_unused]] const unsigned alloy_sz[3] = {alloy_g->size[0], alloy_g->size[1], "
                        "alloy_g->size[2]};\n");
    }
    alloy_sb_append(
        sb,
        "  [[maybe_unused]] const unsigned alloy_gid[3] = {alloy_g->group_id[0], alloy_g->group_id[1], "
        "alloy_g->group_id[2]};\n"
        "  [[maybe_unused]] const unsigned alloy_grid[3] = {alloy_g->launch->grid[0], alloy_g->launch->grid[1], "
        "alloy_g->launch->grid[2]};\n"
        "  [[maybe_unused]] const unsigned alloy_groups[3] = {alloy_g->launch->groups[0], "
        "alloy_g->launch->groups[1], alloy_g->launch->groups[2]};\n"
        "  const unsigned alloy_s0 = alloy_sz[0], alloy_s1 = alloy_sz[1], alloy_s2 = alloy_sz[2];\n"
        "  const unsigned alloy_bx = alloy_gid[0] * alloy_tg[0], alloy_ex = alloy_bx + alloy_s0;\n"
        "  [[maybe_unused]] const unsigned alloy_n = alloy_s0 * alloy_s1 * alloy_s2;\n"
        "  [[maybe_unused]] const unsigned alloy_Llast = (alloy_sz[2] - 1u) * alloy_tg[0] * alloy_tg[1] + "
        "(alloy_sz[1] - 1u) * alloy_tg[0] + alloy_sz[0];\n"
        "  [[maybe_unused]] const unsigned alloy_T = alloy_tg[0] * alloy_tg[1] * alloy_tg[2];\n");
    for (int a = 0; a < alloy_attribute_count(); a++) {
        const char *name = alloy_attribute_name(a);
        if (!attribute_per_thread(name) && mentioned(m, name))
            alloy_sb_printf(sb, "  [[maybe_unused]] const %s %s = %s;\n",
                            alloy_attribute_is_vector(a) ? "uint3" : "uint", name, attribute_expr(name));
    }
    if (mentioned(m, "alloy_threadgroup_memory"))
        alloy_sb_append(sb, "  [[maybe_unused]] unsigned char* alloy_threadgroup_memory = "
                            "(unsigned char*)alloy_g->tg_memory;\n");
    emit_templates(sb, req);
    char body_file[300], gen_file[] = GENERATED_FILE;
    {
        alloy_strbuf f;
        alloy_sb_init(&f);
        append_file_name(&f, kname);
        alloy_sb_append(&f, ".body");
        snprintf(body_file, sizeof body_file, "%s", f.data ? f.data : "kernel.body");
        alloy_sb_free(&f);
    }
    alloy_regions_ctx ctx = {(const char *const *)uni.v, uni.n, (const char *const *)thr.v, thr.n,
                             pro.data ? pro.data : "", req->header, body_file, gen_file,
                             next_line(sb)};
    int r = (uni.failed || thr.failed || pro.failed || sb->failed) ? -1
                                                                   : alloy_regions_emit(body.data ? body.data : "", &ctx, sb);
    names_free(&uni);
    names_free(&thr);
    alloy_sb_free(&pro);
    alloy_sb_free(&body);
    if (r < 0) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory generating code");
    if (r == 0) {
        sb->len = mark;
        if (sb->data) sb->data[mark] = 0;
        return ALLOY_OK;
    }
    ensure_newline(sb);
    alloy_sb_append(sb, "}\n");
    *done = 1;
    return ALLOY_OK;
}

alloy_status alloy_codegen(const alloy_codegen_request *req, alloy_codegen_result *out) {
    if (!out) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_codegen: out is NULL");
    memset(out, 0, sizeof *out);
    if (!req) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_codegen: request is NULL");
    const char *kname = req->kernel_name ? req->kernel_name : "kernel";

    const emitter *em;
    switch (req->target) {
    case ALLOY_TARGET_CPU:
        em = &cpu_emitter;
        break;
    case ALLOY_TARGET_CUDA:
        em = &cuda_emitter;
        break;
    default:
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "kernel '%s': unknown codegen target %d",
                           kname, (int)req->target);
    }
    alloy_status st = check_request(req, kname);
    if (st != ALLOY_OK) return st;
    const char *prelude = alloy_prelude(req->target);
    if (!prelude)
        return alloy_error(ALLOY_ERROR_INTERNAL,
                           "the %s prelude is not embedded in this build of alloy; please "
                           "report this",
                           em->target_name);

    unsigned *slots = calloc((size_t)req->n_inputs + 1, sizeof *slots);
    if (!slots) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory generating code");
    mentions m = {NULL, 0, 0, 0};
    st = collect_mentions(&m, req->header);
    if (st == ALLOY_OK) st = collect_mentions(&m, req->body);
    if (st != ALLOY_OK) {
        free(m.v);
        free(slots);
        return st;
    }
    if (m.n) qsort(m.v, (size_t)m.n, sizeof *m.v, ident_cmp);
    char what[320];
    alloy_strbuf sb;
    alloy_sb_init(&sb);

    /* prelude */
    alloy_sb_append(&sb, "// kernel '");
    append_file_name(&sb, kname);
    const int debug = req->cpu_debug && req->target == ALLOY_TARGET_CPU;
    const int tensor_ops = alloy_source_uses_tensor_ops(req->body) || alloy_source_uses_tensor_ops(req->header);
    const unsigned rewrite_flags =
        (debug ? ALLOY_REWRITE_CPU_DEBUG : 0u) | (tensor_ops ? ALLOY_REWRITE_TENSOR : 0u);
    alloy_sb_printf(&sb, "', generated by alloy for the %s%s\n", em->target_name,
                    debug ? " (ALLOY_CPU_DEBUG: checked memory)" : "");
    if (debug) alloy_sb_append(&sb, "#define ALLOY_CPU_DEBUG 1\n");
    /* the launch may overlap the previous kernel: the prelude's griddepcontrol pair becomes instructions */
    if (req->overlap) alloy_sb_append(&sb, "#define ALLOY_OVERLAP_LAUNCH 1\n");
    line_back(&sb);
    alloy_sb_append(&sb, prelude);
    ensure_newline(&sb);
    if (tensor_ops) {
        const char *tp = alloy_prelude_tensor();
        if (!tp) {
            st = alloy_error(ALLOY_ERROR_INTERNAL,
                             "the tensor prelude is not embedded in this build of alloy; please "
                             "report this");
            goto fail;
        }
        alloy_sb_append(&sb, tp);
        ensure_newline(&sb);
    }
    alloy_sb_append(&sb, tensor_ops ? "using namespace metal;\nusing namespace mpp::tensor_ops;\n"
                                    : "using namespace metal;\n");

    /* header: int and bool template arguments are also macros there, so a
     * header can choose per specialisation what only the preprocessor
     * reaches (a CUDA kernel's launch bounds) */
    if (req->header && req->header[0]) {
        for (int i = 0; i < req->n_templates; i++) {
            const alloy_template_arg *t = &req->templates[i];
            if (t->kind == ALLOY_TEMPLATE_DTYPE) continue;
            if (t->ivalue == INT64_MIN)
                alloy_sb_printf(&sb, "#define ALLOY_TEMPLATE_%s (-%lldLL - 1)\n", t->name, (long long)INT64_MAX);
            else
                alloy_sb_printf(&sb, "#define ALLOY_TEMPLATE_%s (%lldLL)\n", t->name, (long long)t->ivalue);
        }
        alloy_sb_append(&sb, "#line 1 \"");
        append_file_name(&sb, kname);
        alloy_sb_append(&sb, ".header\"\n");
        snprintf(what, sizeof what, "the header of kernel '%.256s'", kname);
        st = alloy_rewrite_msl(req->header, what, rewrite_flags, &sb);
        if (st != ALLOY_OK) goto fail;
        line_back(&sb);
    }

    /* plumbing */
    int n_slots = 0;
    compute_slots(req, &m, slots, &n_slots);
    int uses_sync = alloy_source_uses_sync(req->body) || alloy_source_uses_sync(req->header);
    int region_loops = 0;
    if (req->target == ALLOY_TARGET_CPU && !debug && !tensor_ops &&
        !alloy_source_uses_sync(req->header)) {
        st = emit_cpu_regions(&sb, req, &m, slots, kname, rewrite_flags, &region_loops);
        if (st != ALLOY_OK) goto fail;
    }
    if (region_loops) goto entries;
    em->open_function(&sb, req, slots);
    em->arguments(&sb, req, slots);
    emit_ranks(&sb, req, &m);
    emit_attributes(&sb, em, req, &m);
    emit_templates(&sb, req);

    /* body */
    alloy_sb_append(&sb, "#line 1 \"");
    append_file_name(&sb, kname);
    alloy_sb_append(&sb, ".body\"\n");
    snprintf(what, sizeof what, "the body of kernel '%.256s'", kname);
    st = alloy_rewrite_msl(req->body, what, rewrite_flags, &sb);
    if (st != ALLOY_OK) goto fail;
    line_back(&sb);
    alloy_sb_append(&sb, "}\n");

entries:
    em->entry_points(&sb, req, region_loops ? -1 : uses_sync);

    if (sb.failed) {
        st = alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory generating code");
        goto fail;
    }
    out->source = alloy_sb_take(&sb);
    if (!out->source) {
        st = alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory generating code");
        goto fail;
    }
    out->uses_sync = uses_sync;
    out->region_loops = region_loops;
    out->input_slots = slots;
    out->n_slots = n_slots;
    free(m.v);
    return ALLOY_OK;

fail:
    alloy_sb_free(&sb);
    free(m.v);
    free(slots);
    return st;
}

void alloy_codegen_result_clear(alloy_codegen_result *r) {
    if (!r) return;
    free(r->source);
    free(r->input_slots);
    memset(r, 0, sizeof *r);
}
