/* kernel.c — body-only kernels: construction checks, specialisation per
 * argument signature, and apply (validate, prepare inputs and outputs,
 * compile through the caches, launch).
 *
 * A kernel keeps a short list of specialisations, one per (device, input
 * dtypes and 0-d flags, output dtypes, template arguments). Finding one is a
 * string compare, so launching a cached kernel never regenerates or hashes
 * its source (the host-overhead budget is a few microseconds). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_internal.h"
#include "error.h"
#include "launch_internal.h"
#include "program_cache.h"
#include "sha256.h"
#include "strbuf.h"
#include "tensor_map.h"

typedef struct specialization {
    unsigned char *key;
    size_t key_len;
    alloy_device *device;
    void *program;
    unsigned *input_slots;
    int n_slots;
    char *source;
    struct specialization *next;
} specialization;

struct alloy_kernel {
    char *name;
    int n_inputs, n_outputs;
    char **input_names, **output_names;
    char *source, *header;
    int ensure_row_contiguous, atomic_outputs, uses_sync;
    pthread_mutex_t lock;
    specialization *specs;
};

static char **copy_names(int n, const char *const *names) {
    char **out = calloc((size_t)(n ? n : 1), sizeof *out);
    if (!out) return NULL;
    for (int i = 0; i < n; i++)
        if (!(out[i] = strdup(names[i]))) return NULL; /* leak on OOM is acceptable here */
    return out;
}

static void free_names(int n, char **names) {
    if (!names) return;
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

static alloy_status check_kernel_name(const char *name) {
    if (!name || !*name)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "kernel name is empty: give the kernel a name");
    size_t n = strlen(name);
    if (n > 200) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "kernel name is longer than 200 characters");
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (i && c >= '0' && c <= '9');
        if (!ok)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "kernel name '%s' is not a C identifier (letters, digits, '_'; not "
                               "starting with a digit)",
                               name);
    }
    return ALLOY_OK;
}

/* Names must be unique, and no input's generated companions (x_shape,
 * x_strides, x_ndim) may collide with another name. */
static alloy_status check_names(int n_in, const char *const *in, int n_out, const char *const *out) {
    int n = n_in + n_out;
    for (int i = 0; i < n; i++) {
        const char *a = i < n_in ? in[i] : out[i - n_in];
        const char *role = i < n_in ? "input" : "output";
        if (!a) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "%s name %d is NULL", role, i);
        alloy_status st = alloy_check_identifier(a, role);
        if (st != ALLOY_OK) return st;
        for (int j = 0; j < i; j++) {
            const char *b = j < n_in ? in[j] : out[j - n_in];
            if (strcmp(a, b) == 0)
                return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                                   "name '%s' is used twice among the inputs and outputs: names must "
                                   "be unique", a);
        }
    }
    static const char *const SUFFIX[] = {"_shape", "_strides", "_ndim"};
    for (int i = 0; i < n_in; i++)
        for (int s = 0; s < 3; s++)
            for (int j = 0; j < n; j++) {
                const char *b = j < n_in ? in[j] : out[j - n_in];
                size_t la = strlen(in[i]);
                if (strncmp(b, in[i], la) == 0 && strcmp(b + la, SUFFIX[s]) == 0)
                    return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                                       "name '%s' clashes with the generated '%s%s' of input '%s': "
                                       "rename one of them", b, in[i], SUFFIX[s], in[i]);
            }
    return ALLOY_OK;
}

alloy_status alloy_kernel_new(const char *name, int n_inputs, const char *const *input_names,
                              int n_outputs, const char *const *output_names, const char *source,
                              const char *header, int ensure_row_contiguous, int atomic_outputs,
                              alloy_kernel **out) {
    if (!out) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    alloy_status st = check_kernel_name(name);
    if (st != ALLOY_OK) return st;
    if (n_inputs < 0 || (n_inputs && !input_names))
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "kernel '%s': bad input name list", name);
    if (n_outputs < 1 || !output_names)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s' has no outputs: a kernel needs at least one output", name);
    if (!source)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "kernel '%s': source (the body) is NULL", name);
    if ((st = check_names(n_inputs, input_names, n_outputs, output_names)) != ALLOY_OK) return st;
    int uses_sync = 0;
    if ((st = alloy_analyze_source(name, source, header, &uses_sync)) != ALLOY_OK) return st;

    alloy_kernel *k = calloc(1, sizeof *k);
    if (!k) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
    k->name = strdup(name);
    k->n_inputs = n_inputs;
    k->n_outputs = n_outputs;
    k->input_names = copy_names(n_inputs, input_names);
    k->output_names = copy_names(n_outputs, output_names);
    k->source = strdup(source);
    k->header = strdup(header ? header : "");
    k->ensure_row_contiguous = ensure_row_contiguous != 0;
    k->atomic_outputs = atomic_outputs != 0;
    k->uses_sync = uses_sync;
    pthread_mutex_init(&k->lock, NULL);
    if (!k->name || !k->input_names || !k->output_names || !k->source || !k->header) {
        alloy_kernel_free(k);
        return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    *out = k;
    return ALLOY_OK;
}

void alloy_kernel_free(alloy_kernel *k) {
    if (!k) return;
    for (specialization *s = k->specs, *next; s; s = next) {
        next = s->next;
        free(s->key);
        free(s->input_slots);
        free(s->source);
        free(s); /* the program itself belongs to the device cache */
    }
    free_names(k->n_inputs, k->input_names);
    free_names(k->n_outputs, k->output_names);
    free(k->name);
    free(k->source);
    free(k->header);
    pthread_mutex_destroy(&k->lock);
    free(k);
}

const char *alloy_kernel_name(const alloy_kernel *k) { return k ? k->name : ""; }
int alloy_kernel_num_inputs(const alloy_kernel *k) { return k ? k->n_inputs : 0; }
int alloy_kernel_num_outputs(const alloy_kernel *k) { return k ? k->n_outputs : 0; }

/* ---- validation ------------------------------------------------------- */

static alloy_status check_inputs(const alloy_kernel *k, int n_inputs, alloy_array *const *inputs,
                                 alloy_device *dev) {
    if (n_inputs != k->n_inputs)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s' takes %d inputs (input_names) but %d were given", k->name,
                           k->n_inputs, n_inputs);
    for (int i = 0; i < n_inputs; i++) {
        if (!inputs || !inputs[i])
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "kernel '%s': input '%s' is NULL", k->name,
                               k->input_names[i]);
        if (dev && inputs[i]->device != dev)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "kernel '%s': input '%s' lives on %s but the launch runs on %s: move it "
                               "first",
                               k->name, k->input_names[i], inputs[i]->device->name, dev->name);
    }
    return ALLOY_OK;
}

static alloy_status check_launch(const alloy_kernel *k, const alloy_launch *l) {
    if (!l) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "kernel '%s': launch configuration is NULL", k->name);
    if (l->n_outputs != k->n_outputs)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s' has %d outputs (output_names) but the launch describes %d "
                           "(output shapes/dtypes)",
                           k->name, k->n_outputs, l->n_outputs);
    if (!l->has_grid)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': no grid set (alloy_launch_set_grid; the grid counts threads)",
                           k->name);
    if (!l->has_threadgroup)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': no threadgroup set (alloy_launch_set_threadgroup)", k->name);
    const uint32_t *t = l->threadgroup;
    uint64_t total = (uint64_t)t[0] * t[1] * t[2];
    if (total > ALLOY_MAX_THREADGROUP)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': threadgroup (%u, %u, %u) has %llu threads, more than the "
                           "maximum of %d threads per threadgroup",
                           k->name, t[0], t[1], t[2], (unsigned long long)total, ALLOY_MAX_THREADGROUP);
    const int n_named = l->n_templates + l->n_constants + l->n_tensor_maps;
    for (int i = 0; i < n_named; i++) {
        const char *what, *role;
        if (i < l->n_templates) {
            what = l->templates[i].name;
            role = "template argument";
        } else if (i < l->n_templates + l->n_constants) {
            what = l->constants[i - l->n_templates].name;
            role = "launch constant";
        } else {
            what = l->tensor_maps[i - l->n_templates - l->n_constants].name;
            role = "tensor map";
        }
        for (int j = 0; j < k->n_inputs + k->n_outputs; j++) {
            const char *n = j < k->n_inputs ? k->input_names[j] : k->output_names[j - k->n_inputs];
            if (strcmp(n, what) == 0)
                return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                                   "kernel '%s': %s '%s' has the name of an %s: rename one of them",
                                   k->name, role, n, j < k->n_inputs ? "input" : "output");
        }
    }
    return ALLOY_OK;
}

/* The clamp and the grid limits every backend shares (CUDA's, so code that
 * runs on the CPU also runs on a GPU). */
static alloy_status clamp_threadgroup(const alloy_kernel *k, const alloy_launch *l, uint32_t tg[3]) {
    static int warned;
    if (l->grid[0] && l->grid[0] < l->threadgroup[0] &&
        !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        alloy_warn("kernel '%s': grid.x (%u) is smaller than threadgroup.x (%u). The grid counts "
                   "THREADS, not threadgroups (as in MLX's metal_kernel): for G groups of T threads "
                   "pass grid = G*T. (This warning is shown once.)",
                   k->name, l->grid[0], l->threadgroup[0]);
    for (int d = 0; d < 3; d++) tg[d] = l->grid[d] && l->grid[d] < l->threadgroup[d] ? l->grid[d] : l->threadgroup[d];
    if (tg[2] > 64)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': threadgroup.z = %u is over the limit of 64", k->name, tg[2]);
    for (int d = 1; d < 3; d++) {
        uint64_t groups = ((uint64_t)l->grid[d] + tg[d] - 1) / tg[d];
        if (groups > 65535)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "kernel '%s': grid.%c = %u makes %llu threadgroups along %c, over the "
                               "limit of 65535: use a larger threadgroup or move work to x",
                               k->name, "xyz"[d], l->grid[d], (unsigned long long)groups, "xyz"[d]);
    }
    return ALLOY_OK;
}

/* The launch's geometry class (dialect.h): per dimension, whether its last
 * threadgroup is partial and whether its rounded-up grid passes 2^32
 * threads. Part of the specialisation: a target drops the out-of-grid check
 * and the partial-group arithmetic where they cannot matter. */
static unsigned launch_geometry(const alloy_launch *l, const uint32_t tg[3]) {
    unsigned g = 0;
    for (int d = 0; d < 3; d++) {
        uint64_t t = tg[d] ? tg[d] : 1;
        if (l->grid[d] % t) g |= ALLOY_GEOMETRY_PARTIAL(d);
        if ((l->grid[d] + t - 1) / t * t > UINT32_MAX) g |= ALLOY_GEOMETRY_WIDE(d);
    }
    return g;
}

/* ---- specialisation ----------------------------------------------------- */

/* What of the launch's shape a specialisation is built for: the geometry
 * class, and for a synchronising kernel on the CPU the threadgroup size
 * (its barrier regions become loops with constant trip counts, like a
 * work-group function compiled for one local size); zeros where unknown. */
typedef struct launch_class {
    unsigned geometry;
    uint32_t tg[3];
} launch_class;

static launch_class make_class(unsigned geometry, const uint32_t *tg) {
    launch_class c = {geometry, {0, 0, 0}};
    if (tg) memcpy(c.tg, tg, sizeof c.tg);
    return c;
}

/* The threadgroup size the code of kernel k for target t is specialised on. */
static const uint32_t *class_tg(const alloy_kernel *k, alloy_codegen_target t, const launch_class *c) {
    return t == ALLOY_TARGET_CPU && k->uses_sync && c->tg[0] ? c->tg : NULL;
}

/* The specialisation key: raw bytes (device, input dtypes and ranks,
 * output dtypes, template arguments, the launch's geometry class), built without formatting or
 * allocation when it fits the caller's buffer — this runs on every launch. */
typedef struct spec_keybuf {
    unsigned char local[512];
    unsigned char *data;
    size_t len, cap;
} spec_keybuf;

static int key_put(spec_keybuf *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = 2 * (b->len + n);
        unsigned char *d = malloc(cap);
        if (!d) return 0;
        memcpy(d, b->data, b->len);
        if (b->data != b->local) free(b->data);
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 1;
}

/* Whether the launch overlaps the previous kernel: it asks to and the device
 * does (alloy_device_overlaps_launches). One that cannot is compiled and
 * launched as an ordinary launch, so that it does not carry the overlap's
 * instructions (their cost is per threadgroup, docs/dialect.md). */
static int launch_overlaps(const alloy_device *dev, const alloy_launch *l) {
    return l->overlap && dev->overlapping_launches;
}

/* 1 when the device's backend generates debug builds now (ALLOY_CPU_DEBUG). */
static int debug_build(const alloy_device *dev) {
    return dev->backend->debug_build && dev->backend->debug_build();
}

static int spec_key(const alloy_kernel *k, alloy_device *dev, alloy_array *const *inputs,
                    const alloy_launch *l, const launch_class *lc, spec_keybuf *b) {
    b->data = b->local;
    b->len = 0;
    b->cap = sizeof b->local;
    int ok = key_put(b, &dev, sizeof dev);
    unsigned char g[3] = {(unsigned char)lc->geometry, (unsigned char)debug_build(dev),
                         (unsigned char)launch_overlaps(dev, l)};
    ok &= key_put(b, g, 3);
    const uint32_t *tg = class_tg(k, dev->backend->target, lc);
    if (tg) ok &= key_put(b, tg, 3 * sizeof *tg);
    for (int i = 0; i < k->n_inputs; i++) {
        unsigned char c[2] = {(unsigned char)inputs[i]->dtype, (unsigned char)inputs[i]->ndim};
        ok &= key_put(b, c, 2);
    }
    for (int i = 0; i < l->n_outputs; i++) {
        unsigned char c = (unsigned char)l->outputs[i].dtype;
        ok &= key_put(b, &c, 1);
    }
    for (int i = 0; i < l->n_templates; i++) {
        const alloy_template_arg *t = &l->templates[i];
        ok &= key_put(b, t->name, strlen(t->name) + 1);
        ok &= key_put(b, &t->kind, sizeof t->kind);
        ok &= key_put(b, &t->ivalue, sizeof t->ivalue);
        ok &= key_put(b, &t->dvalue, sizeof t->dvalue);
    }
    for (int i = 0; i < l->n_constants; i++) { /* names and dtypes, not values */
        const alloy_constant_arg *c = &l->constants[i];
        unsigned char tag = 0xC0;
        ok &= key_put(b, &tag, 1);
        ok &= key_put(b, c->name, strlen(c->name) + 1);
        ok &= key_put(b, &c->dtype, sizeof c->dtype);
    }
    for (int i = 0; i < l->n_tensor_maps; i++) { /* names, not specs */
        unsigned char tag = 0xD0;
        ok &= key_put(b, &tag, 1);
        ok &= key_put(b, l->tensor_maps[i].name, strlen(l->tensor_maps[i].name) + 1);
    }
    return ok;
}

static void key_release(spec_keybuf *b) {
    if (b->data != b->local) free(b->data);
}

static int key_equal(const specialization *s, const spec_keybuf *b) {
    return s->key_len == b->len && memcmp(s->key, b->data, b->len) == 0;
}

static alloy_status generate(const alloy_kernel *k, alloy_codegen_target target,
                             alloy_array *const *inputs, const alloy_launch *l, const launch_class *lc,
                             int debug, int overlap, alloy_codegen_result *res) {
    const uint32_t *tg = class_tg(k, target, lc);
    alloy_codegen_input in[k->n_inputs ? k->n_inputs : 1];
    alloy_codegen_output out[k->n_outputs];
    for (int i = 0; i < k->n_inputs; i++) {
        in[i].name = k->input_names[i];
        in[i].dtype = inputs[i]->dtype;
        in[i].is_scalar = inputs[i]->ndim == 0;
        in[i].ndim = inputs[i]->ndim;
    }
    for (int i = 0; i < k->n_outputs; i++) {
        out[i].name = k->output_names[i];
        out[i].dtype = l->outputs[i].dtype;
    }
    alloy_codegen_request req = {
        .target = target,
        .kernel_name = k->name,
        .body = k->source,
        .header = k->header,
        .n_inputs = k->n_inputs,
        .inputs = in,
        .n_outputs = k->n_outputs,
        .outputs = out,
        .atomic_outputs = k->atomic_outputs,
        .n_templates = l->n_templates,
        .templates = l->templates,
        .n_constants = l->n_constants,
        .constants = l->constants,
        .n_tensor_maps = l->n_tensor_maps,
        .tensor_maps = l->tensor_maps,
        .geometry = lc->geometry,
        .threadgroup = {tg ? tg[0] : 0, tg ? tg[1] : 0, tg ? tg[2] : 0},
        .cpu_debug = debug && target == ALLOY_TARGET_CPU,
        .overlap = overlap,
    };
    memset(res, 0, sizeof *res);
    return alloy_codegen(&req, res);
}

static void make_job(const alloy_kernel *k, alloy_device *dev, const char *source, int uses_sync,
                     char key[65], alloy_compile_job *job) {
    alloy_sha256 s;
    uint8_t d[32];
    const char *identity = dev->backend->compiler_identity(dev);
    alloy_sha256_init(&s);
    alloy_sha256_update(&s, "alloy " ALLOY_VERSION_STRING, strlen("alloy " ALLOY_VERSION_STRING) + 1);
    alloy_sha256_update(&s, dev->backend->name, strlen(dev->backend->name) + 1);
    alloy_sha256_update(&s, identity, strlen(identity) + 1);
    alloy_sha256_update(&s, source, strlen(source));
    alloy_sha256_final(&s, d);
    alloy_digest_to_hex(d, key);
    job->kernel_name = k->name;
    job->source = source;
    job->key = key;
    job->uses_sync = uses_sync;
    alloy_cuda_entry_name(k->name, job->entry, sizeof job->entry);
}

/* ALLOY_COMPILE_CHECK=<backend> (e.g. cuda): every new specialisation is
 * also compiled for that backend's target, without a device, and a failure
 * fails the launch. CI uses it to compile every test kernel with NVRTC on a
 * machine without a GPU. On a device of that backend the launch's own compile
 * is the check, so none is added. */
static alloy_status compile_check(const alloy_kernel *k, const alloy_device *dev,
                                  alloy_array *const *inputs, const alloy_launch *l,
                                  const launch_class *lc) {
    const char *name = getenv("ALLOY_COMPILE_CHECK");
    if (!name || !*name) return ALLOY_OK;
    const alloy_backend *b = alloy_backend_named(name);
    if (b && b == dev->backend) return ALLOY_OK;
    if (!b || !b->compile_check)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "ALLOY_COMPILE_CHECK=%s: no backend of that name can compile without a "
                           "device", name);
    alloy_codegen_result res;
    /* the form a device of that backend that overlaps launches compiles */
    alloy_status st = generate(k, b->target, inputs, l, lc, 0, l->overlap, &res);
    if (st != ALLOY_OK) return st;
    char hash[65];
    alloy_sha256_hex(res.source, strlen(res.source), hash);
    alloy_compile_job job = {k->name, res.source, hash, res.uses_sync, {0}};
    alloy_cuda_entry_name(k->name, job.entry, sizeof job.entry);
    char *log = NULL;
    st = b->compile_check(&job, &log);
    if (st == ALLOY_ERROR_COMPILE)
        alloy_error_with_text(st, log ? log : "", "kernel '%s' failed the %s compile check "
                              "(ALLOY_COMPILE_CHECK=%s); the compiler said:\n", k->name, b->name, name);
    free(log);
    alloy_codegen_result_clear(&res);
    return st;
}

/* Finds or builds the specialisation for these inputs and launch.
 * *origin: 1 memory, 2 disk, 0 compiled now (for alloy_kernel_compile). */
static alloy_status get_spec(alloy_kernel *k, alloy_device *dev, alloy_array *const *inputs,
                             const alloy_launch *l, const launch_class *lc, specialization **out,
                             int *origin, char **log) {
    spec_keybuf key;
    if (!spec_key(k, dev, inputs, l, lc, &key)) {
        key_release(&key);
        return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    pthread_mutex_lock(&k->lock);
    for (specialization *s = k->specs; s; s = s->next)
        if (key_equal(s, &key)) {
            pthread_mutex_unlock(&k->lock);
            key_release(&key);
            *out = s;
            if (origin) *origin = 1;
            if (log) *log = NULL;
            return ALLOY_OK;
        }
    pthread_mutex_unlock(&k->lock);

    alloy_codegen_result res;
    alloy_status st =
        generate(k, dev->backend->target, inputs, l, lc, debug_build(dev), launch_overlaps(dev, l), &res);
    if (st != ALLOY_OK) {
        key_release(&key);
        return st;
    }
    char hash[65];
    alloy_compile_job job;
    make_job(k, dev, res.source, res.uses_sync, hash, &job);
    void *program = NULL;
    st = alloy_program_cache_get(dev, &job, &program, origin, log);
    if (st == ALLOY_OK) st = compile_check(k, dev, inputs, l, lc);
    if (st != ALLOY_OK) {
        key_release(&key);
        alloy_codegen_result_clear(&res);
        return st;
    }
    specialization *s = calloc(1, sizeof *s);
    unsigned char *stored = malloc(key.len);
    if (!s || !stored) {
        free(s);
        free(stored);
        key_release(&key);
        alloy_codegen_result_clear(&res);
        return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    memcpy(stored, key.data, key.len);
    s->key = stored;
    s->key_len = key.len;
    key_release(&key);
    s->device = dev;
    s->program = program;
    s->input_slots = res.input_slots;
    s->n_slots = res.n_slots;
    s->source = res.source;
    res.input_slots = NULL;
    res.source = NULL;
    alloy_codegen_result_clear(&res);
    pthread_mutex_lock(&k->lock);
    for (specialization *o = k->specs; o; o = o->next)
        if (o->key_len == s->key_len && memcmp(o->key, s->key, s->key_len) == 0) { /* another thread won the race: use its entry */
            pthread_mutex_unlock(&k->lock);
            free(s->key);
            free(s->input_slots);
            free(s->source);
            free(s);
            *out = o;
            return ALLOY_OK;
        }
    s->next = k->specs;
    k->specs = s;
    pthread_mutex_unlock(&k->lock);
    *out = s;
    return ALLOY_OK;
}

/* ---- apply ---------------------------------------------------------------- */

static alloy_status resolve_device(const alloy_kernel *k, int n_inputs, alloy_array *const *inputs,
                                   alloy_stream *stream, alloy_device **dev) {
    if (stream) *dev = stream->device;
    else if (n_inputs > 0 && inputs && inputs[0]) *dev = inputs[0]->device;
    else {
        alloy_status st = alloy_device_get(NULL, dev);
        if (st != ALLOY_OK) return st;
    }
    (void)k;
    return ALLOY_OK;
}

/* What verbose prints: the source after the prelude (which the generated
 * source embeds after a comment line and a #line directive). */
static const char *body_of(const char *source, alloy_codegen_target target) {
    const char *prelude = alloy_prelude(target);
    const char *at = prelude && *prelude ? strstr(source, prelude) : NULL;
    return at ? at + strlen(prelude) : source;
}

static alloy_status fill_shape_arg(const alloy_kernel *k, int i, const alloy_array *a, alloy_arg *arg) {
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] > INT32_MAX)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "kernel '%s': input '%s' has dimension %d of size %lld, too large for "
                               "the int `_shape` the body sees",
                               k->name, k->input_names[i], d, (long long)a->shape[d]);
        arg->shape[d] = (int32_t)a->shape[d];
        arg->strides[d] = a->strides[d];
    }
    return ALLOY_OK;
}

/* The bytes an array's elements span, from *lo bytes off its data pointer
 * (a strided view may reach below its first element or skip memory). */
static void span_of(const alloy_array *a, long long *lo, unsigned long long *bytes) {
    long long item = (long long)alloy_dtype_size(a->dtype), lo_e = 0, hi_e = 0;
    if (alloy_array_size(a) == 0) {
        *lo = 0;
        *bytes = 0;
        return;
    }
    for (int d = 0; d < a->ndim; d++) {
        long long reach = (a->shape[d] - 1) * a->strides[d];
        if (reach < 0) lo_e += reach;
        else hi_e += reach;
    }
    *lo = lo_e * item;
    *bytes = (unsigned long long)((hi_e - lo_e + 1) * item);
}

/* Checks the launch's tensor maps against the arrays they describe, as the
 * body will see them. Before the arrays are prepared (outputs NULL), an input
 * that will be copied row-contiguous, or an output alloy will allocate,
 * spans its elements at an address not known yet; after (copies[i] the copy
 * of input i or NULL, outputs the launch's outputs), only the maps over
 * those arrays are checked again, now with their address. */
static alloy_status check_tensor_maps(const alloy_kernel *k, const alloy_launch *l,
                                      alloy_array *const *inputs, alloy_array *const *copies,
                                      alloy_array *const *outputs) {
    for (int m = 0; m < l->n_tensor_maps; m++) {
        const alloy_tensor_map_arg *map = &l->tensor_maps[m];
        const int j = map->spec.operand, n_in = k->n_inputs;
        if (j < 0 || j >= n_in + k->n_outputs)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "kernel '%s': tensor map '%s': operand = %d is out of range: "
                               "the kernel has %d input%s and %d output%s (0 to %d, inputs first)",
                               k->name, map->name, j, n_in, n_in == 1 ? "" : "s", k->n_outputs,
                               k->n_outputs == 1 ? "" : "s", n_in + k->n_outputs - 1);
        const alloy_output_spec *o = j >= n_in ? &l->outputs[j - n_in] : NULL;
        const alloy_array *a;
        int pending = 0;
        if (outputs) { /* after: only the arrays whose address was not known */
            if (o ? o->array != NULL : !copies[j]) continue;
            a = o ? outputs[j - n_in] : copies[j];
        } else {
            a = o ? o->array : inputs[j];
            pending = o ? !a : k->ensure_row_contiguous && !alloy_array_is_row_contiguous(a);
        }
        alloy_tensor_map_target t = {o ? "output" : "input",
                                     o ? k->output_names[j - n_in] : k->input_names[j],
                                     o ? j - n_in : j, a ? a->dtype : o->dtype, a ? a->ndim : o->ndim,
                                     NULL, 0, 0};
        if (pending) { /* row-contiguous, of its shape */
            unsigned long long n = 1;
            for (int d = 0; d < t.ndim; d++) n *= (unsigned long long)(o ? o->shape[d] : a->shape[d]);
            t.span_bytes = n * alloy_dtype_size(t.dtype);
        } else {
            t.data = alloy_array_data(a);
            span_of(a, &t.span_lo, &t.span_bytes);
        }
        alloy_status st = alloy_tensor_map_check(k->name, map, &t);
        if (st != ALLOY_OK) return st;
    }
    return ALLOY_OK;
}

alloy_status alloy_kernel_apply(alloy_kernel *k, int n_inputs, alloy_array *const *inputs,
                                const alloy_launch *l, alloy_stream *stream, alloy_array **outputs) {
    if (!k) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "kernel is NULL");
    if (!outputs) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "kernel '%s': outputs is NULL", k->name);
    alloy_device *dev;
    alloy_status st = resolve_device(k, n_inputs, inputs, stream, &dev);
    if (st != ALLOY_OK) return st;
    if ((st = check_inputs(k, n_inputs, inputs, dev)) != ALLOY_OK) return st;
    if ((st = check_launch(k, l)) != ALLOY_OK) return st;
    uint32_t tg[3];
    if ((st = clamp_threadgroup(k, l, tg)) != ALLOY_OK) return st;
    if ((st = check_tensor_maps(k, l, inputs, NULL, NULL)) != ALLOY_OK) return st;
    if (!stream) stream = dev->default_stream;
    for (int i = 0; i < k->n_outputs; i++) {
        alloy_array *a = l->outputs[i].array;
        if (a && a->device != dev)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "kernel '%s': output '%s' lives on %s but the launch runs on %s",
                               k->name, k->output_names[i], a->device->name, dev->name);
    }

    specialization *spec = NULL;
    const launch_class lc = make_class(launch_geometry(l, tg), tg);
    if ((st = get_spec(k, dev, inputs, l, &lc, &spec, NULL, NULL)) != ALLOY_OK)
        return st;
    if (l->verbose) {
        printf("Generated source code for `%s`:\n```\n%s\n```\n", k->name,
               body_of(spec->source, dev->backend->target));
        fflush(stdout);
    }

    /* Inputs: contiguous copies where the kernel asks for them. */
    alloy_array *tmp_in[k->n_inputs ? k->n_inputs : 1];
    alloy_array *use_in[k->n_inputs ? k->n_inputs : 1];
    memset(tmp_in, 0, sizeof tmp_in);
    for (int i = 0; i < k->n_inputs && st == ALLOY_OK; i++) {
        use_in[i] = inputs[i];
        if (k->ensure_row_contiguous && !alloy_array_is_row_contiguous(inputs[i])) {
            st = alloy_array_contiguous(inputs[i], &tmp_in[i]);
            use_in[i] = tmp_in[i];
        }
    }
    /* Outputs: the caller's arrays or new ones. */
    for (int i = 0; i < k->n_outputs; i++) outputs[i] = NULL;
    for (int i = 0; i < k->n_outputs && st == ALLOY_OK; i++) {
        const alloy_output_spec *o = &l->outputs[i];
        if (o->array) outputs[i] = alloy_array_retain(o->array);
        else st = alloy_array_new(dev, o->dtype, o->ndim, o->shape, &outputs[i]);
        if (st == ALLOY_OK && l->has_init) st = alloy_array_fill(outputs[i], l->init_value);
    }
    if (st == ALLOY_OK && l->n_tensor_maps) st = check_tensor_maps(k, l, inputs, tmp_in, outputs);
    /* Arguments in signature order. */
    alloy_arg stack_args[32];
    alloy_arg *args = spec->n_slots <= 32 ? stack_args : calloc((size_t)spec->n_slots, sizeof *args);
    if (!args && st == ALLOY_OK) st = alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
    int n = 0;
    for (int i = 0; i < k->n_inputs && st == ALLOY_OK; i++) {
        alloy_array *a = use_in[i];
        args[n].kind = ALLOY_ARG_BUFFER;
        span_of(a, &args[n].span_lo, &args[n].nbytes);
        args[n].dtype = a->dtype;
        args[n].name = k->input_names[i];
        args[n].check_written = 0;
        args[n++].ptr = alloy_array_data(a);
        static const alloy_arg_kind KINDS[2] = {ALLOY_ARG_SHAPE, ALLOY_ARG_STRIDES};
        for (int b = 0; b < 2 && st == ALLOY_OK; b++)
            if (spec->input_slots[i] & (1u << b)) {
                args[n].kind = KINDS[b];
                args[n].ptr = NULL;
                st = fill_shape_arg(k, i, a, &args[n]);
                n++;
            }
    }
    for (int i = 0; i < k->n_outputs && st == ALLOY_OK; i++) {
        args[n].kind = ALLOY_ARG_BUFFER;
        span_of(outputs[i], &args[n].span_lo, &args[n].nbytes);
        args[n].dtype = outputs[i]->dtype;
        args[n].name = k->output_names[i];
        args[n].check_written = !l->outputs[i].array && !l->has_init;
        args[n++].ptr = alloy_array_data(outputs[i]);
    }
    for (int i = 0; i < l->n_constants && st == ALLOY_OK; i++) {
        args[n].kind = ALLOY_ARG_VALUE;
        args[n].ptr = NULL;
        args[n].nbytes = 0;
        args[n].span_lo = 0;
        args[n].dtype = l->constants[i].dtype;
        args[n].name = l->constants[i].name;
        args[n].check_written = 0;
        memcpy(args[n++].value, l->constants[i].value.bytes, sizeof args[0].value);
    }
    for (int m = 0; m < l->n_tensor_maps && st == ALLOY_OK; m++) {
        const alloy_tensor_map_arg *map = &l->tensor_maps[m];
        const int j = map->spec.operand;
        const alloy_array *a = j < k->n_inputs ? use_in[j] : outputs[j - k->n_inputs];
        args[n].kind = ALLOY_ARG_TENSOR_MAP;
        args[n].ptr = (char *)alloy_array_data(a) + map->spec.offset * (int64_t)alloy_dtype_size(a->dtype);
        args[n].nbytes = 0;
        args[n].span_lo = 0;
        args[n].dtype = a->dtype;
        args[n].name = map->name;
        args[n].check_written = 0;
        args[n++].tensor_map = &map->spec;
    }
    if (st == ALLOY_OK && n != spec->n_slots)
        st = alloy_error(ALLOY_ERROR_INTERNAL, "kernel '%s': built %d arguments for %d slots", k->name,
                         n, spec->n_slots);
    if (st == ALLOY_OK && l->grid[0] && l->grid[1] && l->grid[2]) {
        alloy_launch_args la = {.kernel_name = k->name, .n_args = n, .args = args,
                                .threadgroup_memory = l->threadgroup_memory,
                                .overlap = launch_overlaps(dev, l)};
        memcpy(la.grid, l->grid, sizeof la.grid);
        memcpy(la.threadgroup, tg, sizeof la.threadgroup);
        st = dev->backend->launch(dev, spec->program, &la, stream);
    }
    if (args != stack_args) free(args);
    for (int i = 0; i < k->n_inputs; i++) alloy_array_free(tmp_in[i]);
    if (st != ALLOY_OK)
        for (int i = 0; i < k->n_outputs; i++) {
            alloy_array_free(outputs[i]);
            outputs[i] = NULL;
        }
    return st;
}

/* ---- inspection ------------------------------------------------------------ */

/* Checks what inspection needs and gives the launch's geometry class (the
 * general one, every check, when the launch has no grid yet). */
static alloy_status prepare_inspect(alloy_kernel *k, int n_inputs, alloy_array *const *inputs,
                                    const alloy_launch *l, alloy_device **dev, launch_class *lc) {
    alloy_status st;
    if (!k) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "kernel is NULL");
    if (!*dev && (st = resolve_device(k, n_inputs, inputs, NULL, dev)) != ALLOY_OK) return st;
    if ((st = check_inputs(k, n_inputs, inputs, NULL)) != ALLOY_OK) return st;
    if (!l) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "launch configuration is NULL");
    if (l->n_outputs != k->n_outputs)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "kernel '%s' has %d outputs but the launch describes %d", k->name,
                           k->n_outputs, l->n_outputs);
    if ((st = check_tensor_maps(k, l, inputs, NULL, NULL)) != ALLOY_OK) return st;
    *lc = make_class(ALLOY_GEOMETRY_ALL, NULL);
    if (l->grid[0] && l->grid[1] && l->grid[2]) {
        uint32_t tg[3];
        if ((st = clamp_threadgroup(k, l, tg)) != ALLOY_OK) return st;
        *lc = make_class(launch_geometry(l, tg), tg);
    }
    return ALLOY_OK;
}

alloy_status alloy_kernel_generated_source(alloy_kernel *k, int n_inputs, alloy_array *const *inputs,
                                           const alloy_launch *l, alloy_device *dev, char **source) {
    if (!source) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "source is NULL");
    launch_class lc;
    alloy_status st = prepare_inspect(k, n_inputs, inputs, l, &dev, &lc);
    if (st != ALLOY_OK) return st;
    alloy_codegen_result res;
    if ((st = generate(k, dev->backend->target, inputs, l, &lc, debug_build(dev), launch_overlaps(dev, l),
                       &res)) != ALLOY_OK)
        return st;
    *source = res.source;
    res.source = NULL;
    alloy_codegen_result_clear(&res);
    return ALLOY_OK;
}

alloy_status alloy_kernel_compile(alloy_kernel *k, int n_inputs, alloy_array *const *inputs,
                                  const alloy_launch *l, alloy_device *dev, alloy_compile_result *r) {
    if (!r) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "result is NULL");
    memset(r, 0, sizeof *r);
    launch_class lc;
    alloy_status st = prepare_inspect(k, n_inputs, inputs, l, &dev, &lc);
    if (st != ALLOY_OK) return st;
    alloy_codegen_result res;
    if ((st = generate(k, dev->backend->target, inputs, l, &lc, debug_build(dev), launch_overlaps(dev, l),
                       &res)) != ALLOY_OK)
        return st;
    char hash[65];
    alloy_compile_job job;
    make_job(k, dev, res.source, res.uses_sync, hash, &job);
    void *program = NULL;
    int origin = 0;
    st = alloy_program_cache_get(dev, &job, &program, &origin, &r->log);
    r->source = res.source;
    res.source = NULL;
    alloy_codegen_result_clear(&res);
    r->from_cache = origin;
    if (st == ALLOY_OK && dev->backend->program_report)
        r->report = dev->backend->program_report(dev, program);
    return st;
}

void alloy_compile_result_clear(alloy_compile_result *r) {
    if (!r) return;
    free(r->source);
    free(r->log);
    free(r->report);
    memset(r, 0, sizeof *r);
}
