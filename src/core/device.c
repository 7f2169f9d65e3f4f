/* device.c — the registry of backends and devices, device names, streams.
 *
 * Backends are probed once; devices are created on first use and live until
 * the process ends, so handles stay valid everywhere (like MLX's devices). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "error.h"
#include "program_cache.h"

#define MAX_DEVICES_PER_BACKEND 16

typedef struct backend_slot {
    const alloy_backend *backend;
    alloy_status probe_status;
    int device_count;
    char why[512];
    alloy_device *devices[MAX_DEVICES_PER_BACKEND];
} backend_slot;

static backend_slot SLOTS[] = {
    {&alloy_cuda_backend, ALLOY_OK, 0, "", {0}},
    {&alloy_cpu_backend, ALLOY_OK, 0, "", {0}},
};
#define N_SLOTS ((int)(sizeof SLOTS / sizeof SLOTS[0]))

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;

static void probe_all(void) {
    for (int i = 0; i < N_SLOTS; i++) {
        backend_slot *s = &SLOTS[i];
        s->probe_status = s->backend->probe(&s->device_count, s->why, sizeof s->why);
        if (s->probe_status == ALLOY_OK && s->device_count <= 0) {
            s->probe_status = ALLOY_ERROR_UNAVAILABLE;
            snprintf(s->why, sizeof s->why, "no %s device found", s->backend->name);
        }
    }
}

int alloy_backend_count(void) { return N_SLOTS; }

alloy_status alloy_backend_info(int index, const char **name, int *available, const char **detail) {
    pthread_once(&probe_once, probe_all);
    if (index < 0 || index >= N_SLOTS)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "backend index %d out of range [0, %d)",
                           index, N_SLOTS);
    backend_slot *s = &SLOTS[index];
    if (name) *name = s->backend->name;
    if (available) *available = s->probe_status == ALLOY_OK;
    if (detail) {
        if (s->probe_status == ALLOY_OK) {
            alloy_device *d = NULL;
            char dn[32];
            snprintf(dn, sizeof dn, "%s:0", s->backend->name);
            *detail = alloy_device_get(dn, &d) == ALLOY_OK ? d->description : s->why;
        } else {
            *detail = s->why;
        }
    }
    return ALLOY_OK;
}

static alloy_status open_device(backend_slot *s, int ordinal, alloy_device **out) {
    if (s->probe_status != ALLOY_OK)
        return alloy_error(ALLOY_ERROR_UNAVAILABLE, "the %s backend is unavailable: %s",
                           s->backend->name, s->why);
    if (ordinal < 0 || ordinal >= s->device_count || ordinal >= MAX_DEVICES_PER_BACKEND)
        return alloy_error(ALLOY_ERROR_UNAVAILABLE, "device %s:%d does not exist (%d found)",
                           s->backend->name, ordinal, s->device_count);
    pthread_mutex_lock(&devices_lock);
    alloy_device *d = s->devices[ordinal];
    alloy_status st = ALLOY_OK;
    if (!d) {
        d = calloc(1, sizeof *d);
        alloy_stream *def = calloc(1, sizeof *def);
        if (!d || !def) {
            free(d);
            free(def);
            st = alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory creating a device");
        } else {
            d->backend = s->backend;
            d->ordinal = ordinal;
            if (s->backend->kind == ALLOY_BACKEND_CPU) snprintf(d->name, sizeof d->name, "cpu");
            else snprintf(d->name, sizeof d->name, "%s:%d", s->backend->name, ordinal);
            d->cache = alloy_program_cache_new();
            st = d->cache ? s->backend->device_init(d)
                          : alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory");
            if (st == ALLOY_OK) {
                def->device = d;
                def->is_default = 1;
                st = s->backend->stream_create(d, &def->impl);
            }
            if (st != ALLOY_OK) {
                free(def);
                free(d->cache); /* never used */
                free(d);
                d = NULL;
            } else {
                d->default_stream = def;
                s->devices[ordinal] = d;
            }
        }
    }
    pthread_mutex_unlock(&devices_lock);
    if (st == ALLOY_OK) *out = d;
    return st;
}

static backend_slot *slot_named(const char *name, size_t len) {
    for (int i = 0; i < N_SLOTS; i++)
        if (strlen(SLOTS[i].backend->name) == len && strncmp(SLOTS[i].backend->name, name, len) == 0)
            return &SLOTS[i];
    return NULL;
}

alloy_status alloy_device_get(const char *name, alloy_device **out) {
    if (!out) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "alloy_device_get: out is NULL");
    pthread_once(&probe_once, probe_all);
    if (!name || strcmp(name, "auto") == 0) {
        const char *env = getenv("ALLOY_DEVICE");
        if (env && *env && strcmp(env, "auto") != 0) return alloy_device_get(env, out);
        /* The best available: the first backend in order of preference that
         * works (GPU backends come before the CPU in SLOTS once they exist). */
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < N_SLOTS; i++) {
                int is_cpu = SLOTS[i].backend->kind == ALLOY_BACKEND_CPU;
                if (pass == 0 ? is_cpu : !is_cpu) continue;
                if (SLOTS[i].probe_status == ALLOY_OK) return open_device(&SLOTS[i], 0, out);
            }
        return alloy_error(ALLOY_ERROR_UNAVAILABLE, "no device is available");
    }
    const char *colon = strchr(name, ':');
    size_t blen = colon ? (size_t)(colon - name) : strlen(name);
    backend_slot *s = slot_named(name, blen);
    if (!s) {
        if (blen == 4 && strncmp(name, "cuda", 4) == 0)
            return alloy_error(ALLOY_ERROR_UNAVAILABLE,
                               "device '%s': this build of alloy has no CUDA backend", name);
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "unknown device '%s': use cpu, cuda, cuda:N or auto", name);
    }
    int ordinal = 0;
    if (colon) {
        char *end = NULL;
        long v = strtol(colon + 1, &end, 10);
        if (!colon[1] || *end || v < 0 || v > 1000)
            return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                               "bad device ordinal in '%s': use %.*s:N with N >= 0 (valid names: "
                               "cpu, cuda, cuda:N, auto)",
                               name, (int)blen, name);
        ordinal = (int)v;
    }
    return open_device(s, ordinal, out);
}

const alloy_backend *alloy_backend_named(const char *name) {
    backend_slot *s = slot_named(name, strlen(name));
    return s ? s->backend : NULL;
}

const char *alloy_device_name(const alloy_device *d) { return d ? d->name : "(null)"; }
const char *alloy_device_description(const alloy_device *d) { return d ? d->description : ""; }
alloy_backend_kind alloy_device_backend(const alloy_device *d) { return d->backend->kind; }
int alloy_device_compute_capability(const alloy_device *d) { return d ? d->compute_capability : 0; }
int alloy_device_multiprocessor_count(const alloy_device *d) { return d ? d->multiprocessor_count : 0; }
int alloy_device_has_tensor_maps(const alloy_device *d) { return d ? d->tensor_maps : 0; }
int alloy_device_overlaps_launches(const alloy_device *d) { return d ? d->overlapping_launches : 0; }

alloy_status alloy_device_synchronize(alloy_device *d) {
    if (!d) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "device is NULL");
    return d->backend->stream_sync(d, NULL);
}

alloy_status alloy_stream_default(alloy_device *d, alloy_stream **out) {
    if (!d || !out) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "device or out is NULL");
    *out = d->default_stream;
    return ALLOY_OK;
}

alloy_status alloy_stream_new(alloy_device *d, alloy_stream **out) {
    if (!d || !out) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "device or out is NULL");
    alloy_stream *s = calloc(1, sizeof *s);
    if (!s) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory creating a stream");
    s->device = d;
    alloy_status st = d->backend->stream_create(d, &s->impl);
    if (st != ALLOY_OK) {
        free(s);
        return st;
    }
    *out = s;
    return ALLOY_OK;
}

alloy_status alloy_stream_synchronize(alloy_stream *s) {
    if (!s) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "stream is NULL");
    return s->device->backend->stream_sync(s->device, s->impl);
}

alloy_device *alloy_stream_device(const alloy_stream *s) { return s ? s->device : NULL; }

alloy_status alloy_stream_wrap(alloy_device *d, void *native, alloy_stream **out) {
    if (!d || !out) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "device or out is NULL");
    alloy_stream *s = calloc(1, sizeof *s);
    if (!s) return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory wrapping a stream");
    s->device = d;
    alloy_status st = d->backend->stream_wrap(d, native, &s->impl);
    if (st != ALLOY_OK) {
        free(s);
        return st;
    }
    *out = s;
    return ALLOY_OK;
}

void *alloy_stream_native(const alloy_stream *s) {
    return s ? s->device->backend->stream_native(s->device, s->impl) : NULL;
}

alloy_status alloy_stream_wait(alloy_stream *waiter, alloy_stream *signaller) {
    if (!waiter || !signaller) return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT, "stream is NULL");
    if (waiter->device != signaller->device)
        return alloy_error(ALLOY_ERROR_INVALID_ARGUMENT,
                           "streams on different devices (%s, %s) cannot wait on each other",
                           waiter->device->name, signaller->device->name);
    if (waiter == signaller || waiter->impl == signaller->impl) return ALLOY_OK;
    return waiter->device->backend->stream_wait(waiter->device, waiter->impl, signaller->impl);
}

void alloy_stream_free(alloy_stream *s) {
    if (!s || s->is_default) return;
    s->device->backend->stream_destroy(s->device, s->impl);
    free(s);
}

const char *alloy_version(void) { return ALLOY_VERSION_STRING; }
