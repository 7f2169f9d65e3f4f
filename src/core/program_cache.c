/* program_cache.c — see program_cache.h. A fixed table of buckets of entries
 * guarded by one mutex; the compile itself runs with the mutex released. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "program_cache.h"

enum { COMPILING, READY, FAILED };

typedef struct entry {
    char key[65];
    int state;
    void *program;
    alloy_status status; /* FAILED: why */
    char *message;       /* FAILED: the error message */
    char *log;           /* compiler output of the last attempt */
    struct entry *next;
} entry;

struct alloy_program_cache {
    pthread_mutex_t lock;
    pthread_cond_t done;
    entry *buckets[256];
    long builds;
};

alloy_program_cache *alloy_program_cache_new(void) {
    alloy_program_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->done, NULL);
    return c;
}

static unsigned bucket_of(const char *key) {
    unsigned h = 2166136261u;
    for (const char *p = key; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
    return h & 255u;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

alloy_status alloy_program_cache_get(alloy_device *dev, const alloy_compile_job *job, void **program,
                                     int *origin, char **log) {
    alloy_program_cache *c = dev->cache;
    unsigned b = bucket_of(job->key);
    if (log) *log = NULL;
    pthread_mutex_lock(&c->lock);
    entry *e = c->buckets[b];
    while (e && strcmp(e->key, job->key) != 0) e = e->next;
    if (e && e->state == COMPILING) {
        while (e->state == COMPILING) pthread_cond_wait(&c->done, &c->lock);
        if (e->state == FAILED) { /* share the compiling thread's verdict */
            alloy_status st = e->status;
            alloy_error_with_text(st, e->message ? e->message : "compilation failed", "%s", "");
            if (log) *log = dup_or_null(e->log);
            pthread_mutex_unlock(&c->lock);
            return st;
        }
    }
    if (e && e->state == READY) {
        *program = e->program;
        if (origin) *origin = 1;
        if (log) *log = dup_or_null(e->log);
        pthread_mutex_unlock(&c->lock);
        return ALLOY_OK;
    }
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) {
            pthread_mutex_unlock(&c->lock);
            return alloy_error(ALLOY_ERROR_OUT_OF_MEMORY, "out of memory in the program cache");
        }
        memcpy(e->key, job->key, 64);
        e->next = c->buckets[b];
        c->buckets[b] = e;
    }
    /* A new entry, or one that failed before: this thread compiles it. */
    e->state = COMPILING;
    c->builds++;
    pthread_mutex_unlock(&c->lock);

    void *prog = NULL;
    char *raw_log = NULL;
    int from_disk = 0;
    alloy_status st = dev->backend->compile(dev, job, &prog, &raw_log, &from_disk);
    if (st == ALLOY_ERROR_COMPILE)
        alloy_error_with_text(st, raw_log ? raw_log : "(the compiler printed nothing)",
                              "kernel '%s' failed to compile on %s; the compiler said:\n",
                              job->kernel_name, dev->name);

    pthread_mutex_lock(&c->lock);
    free(e->log);
    e->log = raw_log;
    free(e->message);
    e->message = NULL;
    if (st == ALLOY_OK) {
        e->state = READY;
        e->program = prog;
        *program = prog;
        if (origin) *origin = from_disk ? 2 : 0;
    } else {
        e->state = FAILED;
        e->status = st;
        e->message = strdup(alloy_last_error());
    }
    if (log) *log = dup_or_null(e->log);
    pthread_cond_broadcast(&c->done);
    pthread_mutex_unlock(&c->lock);
    return st;
}

long alloy_program_cache_builds(alloy_device *dev) {
    pthread_mutex_lock(&dev->cache->lock);
    long n = dev->cache->builds;
    pthread_mutex_unlock(&dev->cache->lock);
    return n;
}
