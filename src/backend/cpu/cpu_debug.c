/* cpu_debug.c — the runtime side of ALLOY_CPU_DEBUG=1 (docs/cli.md): kernels
 * are built with checked memory (src/dialect/prelude/cpu_debug.h), which
 * reports faults here; outputs that every element of must be written are
 * filled with a poison pattern before the launch and scanned after it.
 *
 * The poison of a float type is a signalling NaN with a fixed payload (no
 * arithmetic produces one, so only a copied bit pattern can look written);
 * integer outputs get 0xA5 bytes, which a kernel could store on purpose: the
 * report says which value it looked for. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_debug.h"

static int env_debug = -1;

int alloy_cpu_debug_build(void) {
    int v = __atomic_load_n(&env_debug, __ATOMIC_ACQUIRE);
    if (v < 0) { /* read once: a process is debugged or not */
        const char *e = getenv("ALLOY_CPU_DEBUG");
        v = e && *e && strcmp(e, "0") != 0 && strcmp(e, "off") != 0 && strcmp(e, "false") != 0;
        __atomic_store_n(&env_debug, v, __ATOMIC_RELEASE);
    }
    return v;
}

static void report(void *ctx, const char *message) {
    alloy_cpu_debug_state *d = ctx;
    if (atomic_fetch_add(&d->faults, 1) == 0) snprintf(d->first, sizeof d->first, "%s", message);
}

/* The poison bytes of one element of `dt` (esize bytes). */
static void poison_of(alloy_dtype dt, unsigned char *p, size_t esize) {
    memset(p, 0xA5, esize);
    uint64_t v = 0;
    switch (dt) {
    case ALLOY_FLOAT16: v = 0x7DA5u; break;
    case ALLOY_BFLOAT16: v = 0x7FA5u; break;
    case ALLOY_FLOAT32: v = 0x7FA5A5A5u; break;
    case ALLOY_FLOAT64: v = 0x7FF4A5A5A5A5A5A5ull; break;
    default: return;
    }
    memcpy(p, &v, esize); /* little-endian hosts only, as alloy */
}

alloy_status alloy_cpu_debug_begin(alloy_cpu_debug_state *d, const alloy_launch_args *args) {
    d->first[0] = 0;
    atomic_init(&d->faults, 0);
    d->nbytes = d->local;
    d->lo = d->local_lo;
    if (args->n_args > (int)(sizeof d->local / sizeof *d->local)) {
        d->nbytes = calloc((size_t)args->n_args, sizeof *d->nbytes);
        d->lo = calloc((size_t)args->n_args, sizeof *d->lo);
        if (!d->nbytes || !d->lo) {
            free(d->nbytes);
            free(d->lo);
            return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
        }
    }
    for (int i = 0; i < args->n_args; i++) {
        const alloy_arg *a = &args->args[i];
        d->nbytes[i] = a->kind == ALLOY_ARG_BUFFER ? a->nbytes : 0;
        d->lo[i] = a->kind == ALLOY_ARG_BUFFER ? a->span_lo : 0;
        if (a->kind == ALLOY_ARG_BUFFER && a->check_written && a->nbytes) {
            size_t es = alloy_dtype_size(a->dtype);
            unsigned char pat[16];
            poison_of(a->dtype, pat, es);
            unsigned char *p = a->ptr;
            for (unsigned long long off = 0; off + es <= a->nbytes; off += es) memcpy(p + off, pat, es);
        }
    }
    d->iface.nbytes = d->nbytes;
    d->iface.lo = d->lo;
    d->iface.report = report;
    d->iface.ctx = d;
    return ALLOY_OK;
}

/* Lists the elements of an output still holding the poison. */
static alloy_status unwritten(const char *kname, const alloy_arg *a) {
    size_t es = alloy_dtype_size(a->dtype);
    unsigned char pat[16];
    poison_of(a->dtype, pat, es);
    const unsigned char *p = a->ptr;
    unsigned long long n = a->nbytes / es, count = 0, first[8];
    for (unsigned long long i = 0; i < n; i++)
        if (memcmp(p + i * es, pat, es) == 0) {
            if (count < 8) first[count] = i;
            count++;
        }
    if (!count) return ALLOY_OK;
    char list[200];
    size_t used = 0;
    list[0] = 0;
    for (unsigned long long k = 0; k < count && k < 8 && used < sizeof list; k++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%llu", k ? ", " : "", first[k]);
    return alloy_error(ALLOY_ERROR_LAUNCH,
                       "kernel '%s' (ALLOY_CPU_DEBUG): %llu of %llu elements of output '%s' were not "
                       "written by any thread (element%s %s%s; an unwritten element keeps the poison "
                       "pattern 0x%02X...): write every element, or set init_value",
                       kname, count, n, a->name ? a->name : "?", count == 1 ? "" : "s", list,
                       count > 8 ? ", ..." : "", pat[es - 1]);
}

alloy_status alloy_cpu_debug_end(alloy_cpu_debug_state *d, const alloy_launch_args *args,
                                 alloy_status launch_status) {
    const char *kname = args->kernel_name ? args->kernel_name : "?";
    alloy_status st = launch_status;
    int faults = atomic_load(&d->faults);
    if (st == ALLOY_OK && faults)
        st = alloy_error(ALLOY_ERROR_LAUNCH, "kernel '%s' (ALLOY_CPU_DEBUG): %s%s", kname, d->first,
                         faults > 1 ? " (and more faults after it)" : "");
    for (int i = 0; i < args->n_args && st == ALLOY_OK; i++) {
        const alloy_arg *a = &args->args[i];
        if (a->kind == ALLOY_ARG_BUFFER && a->check_written && a->nbytes) st = unwritten(kname, a);
    }
    if (d->nbytes != d->local) {
        free(d->nbytes);
        free(d->lo);
    }
    d->nbytes = NULL;
    d->lo = NULL;
    return st;
}
