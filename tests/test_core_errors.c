/* test_core_errors.c — status codes and the last-error message through the
 * public API: the name of every status, the message being per thread (two
 * threads fail concurrently and each sees its own error), successful calls
 * leaving it alone, alloy_clear_error, and a very long message (a compile
 * error whose log names 200 undeclared identifiers) coming back whole. */
#include <pthread.h>

#include "harness.h"

static void test_status_names(void) {
    static const struct { alloy_status st; const char *name; } T[] = {
        {ALLOY_OK, "ALLOY_OK"},
        {ALLOY_ERROR_INVALID_ARGUMENT, "ALLOY_ERROR_INVALID_ARGUMENT"},
        {ALLOY_ERROR_COMPILE, "ALLOY_ERROR_COMPILE"},
        {ALLOY_ERROR_COMPILER_MISSING, "ALLOY_ERROR_COMPILER_MISSING"},
        {ALLOY_ERROR_UNAVAILABLE, "ALLOY_ERROR_UNAVAILABLE"},
        {ALLOY_ERROR_OUT_OF_MEMORY, "ALLOY_ERROR_OUT_OF_MEMORY"},
        {ALLOY_ERROR_LAUNCH, "ALLOY_ERROR_LAUNCH"},
        {ALLOY_ERROR_IO, "ALLOY_ERROR_IO"},
        {ALLOY_ERROR_UNSUPPORTED, "ALLOY_ERROR_UNSUPPORTED"},
        {ALLOY_ERROR_INTERNAL, "ALLOY_ERROR_INTERNAL"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        CHECK((int)T[i].st == (int)i); /* the codes are stable ABI */
        const char *n = alloy_status_name(T[i].st);
        CHECK_MSG(n && strcmp(n, T[i].name) == 0, "%d -> %s", (int)T[i].st, n ? n : "(null)");
    }
    /* out-of-range values still give a string, distinct from the real ones */
    int odd[] = {10, 42, -1, 1 << 20};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        const char *n = alloy_status_name((alloy_status)odd[i]);
        CHECK(n != NULL);
        if (!n) continue;
        for (size_t k = 0; k < sizeof T / sizeof T[0]; k++) CHECK(strcmp(n, T[k].name) != 0);
    }
}

static void *read_fresh_thread(void *arg) {
    *(int *)arg = strcmp(alloy_last_error(), "") == 0;
    return NULL;
}

static void test_clear_and_sticky(void) {
    alloy_dtype d;
    CHECK_FAILS(alloy_dtype_parse("sticky_name", &d), ALLOY_ERROR_INVALID_ARGUMENT, "sticky_name");
    /* successful calls leave the message (like errno) */
    CHECK_OK(alloy_dtype_parse("float32", &d));
    alloy_device *dev = NULL;
    CHECK_OK(alloy_device_get("cpu", &dev));
    CHECK(strstr(alloy_last_error(), "sticky_name") != NULL);
    alloy_clear_error();
    CHECK(strcmp(alloy_last_error(), "") == 0);
    alloy_clear_error(); /* twice is fine */
    CHECK(strcmp(alloy_last_error(), "") == 0);
    /* the next failure sets a new message, not appended to the old one */
    CHECK_FAILS(alloy_dtype_parse("first_bad", &d), ALLOY_ERROR_INVALID_ARGUMENT, "first_bad");
    CHECK_FAILS(alloy_dtype_parse("second_bad", &d), ALLOY_ERROR_INVALID_ARGUMENT, "second_bad");
    CHECK(strstr(alloy_last_error(), "first_bad") == NULL);
    /* a thread that never failed sees "" even though this one has an error */
    int fresh = 0;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, read_fresh_thread, &fresh) == 0);
    pthread_join(t, NULL);
    CHECK(fresh);
    CHECK(strstr(alloy_last_error(), "second_bad") != NULL);
}

/* Two threads fail in lock step, with different errors, and each checks that
 * its message is its own after both have failed. */
#define ROUNDS 300
static pthread_barrier_t barrier;

typedef struct {
    int which;
    int mismatches;
} worker;

static void *fail_in_lock_step(void *arg) {
    worker *w = arg;
    char token[64], name[80];
    for (int r = 0; r < ROUNDS; r++) {
        snprintf(token, sizeof token, "tok%c%d", w->which ? 'B' : 'A', r);
        alloy_status st;
        if (w->which == 0) {
            alloy_dtype d;
            st = alloy_dtype_parse(token, &d);
        } else {
            alloy_device *dev = NULL;
            snprintf(name, sizeof name, "%s", token);
            st = alloy_device_get(name, &dev);
        }
        pthread_barrier_wait(&barrier); /* both have failed now */
        const char *m = alloy_last_error();
        if (st != ALLOY_ERROR_INVALID_ARGUMENT || !strstr(m, token) ||
            strstr(m, w->which ? "tokA" : "tokB"))
            w->mismatches++;
        if (r % 3 == 0) {
            alloy_clear_error(); /* clearing one thread's message leaves the other's */
            if (alloy_last_error()[0]) w->mismatches++;
        }
        pthread_barrier_wait(&barrier);
        if (r % 3 == 0 && alloy_last_error()[0]) w->mismatches++;
    }
    return NULL;
}

static void test_thread_local_messages(void) {
    pthread_barrier_init(&barrier, NULL, 2);
    worker w[2] = {{0, 0}, {1, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, fail_in_lock_step, &w[i]) == 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&barrier);
    CHECK_MSG(w[0].mismatches == 0, "thread A saw %d wrong messages", w[0].mismatches);
    CHECK_MSG(w[1].mismatches == 0, "thread B saw %d wrong messages", w[1].mismatches);
}

/* A compile error with a long log: 200 undeclared identifiers; the message
 * must hold the whole log, up to the last one. */
static void test_long_compile_message(void) {
    enum { N = 200 };
    size_t cap = N * 64 + 64;
    char *body = malloc(cap);
    size_t len = 0;
    len += (size_t)snprintf(body + len, cap - len, "uint i = thread_position_in_grid.x;\n");
    for (int k = 0; k < N; k++)
        len += (size_t)snprintf(body + len, cap - len, "out[i] += zz_undeclared_%03d;\n", k);
    const char *in_names[] = {"a"}, *out_names[] = {"out"};
    alloy_kernel *kern = NULL;
    CHECK_OK(alloy_kernel_new("long_log", 1, in_names, 1, out_names, body, NULL, 1, 0, &kern));
    free(body);
    if (!kern) return;
    alloy_device *dev = harness_device();
    int64_t n = 4;
    float host[4] = {1, 2, 3, 4};
    alloy_array *a = NULL, *out = NULL;
    CHECK_OK(alloy_array_from_host(dev, ALLOY_FLOAT32, 1, &n, host, &a));
    alloy_launch *l = NULL;
    CHECK_OK(alloy_launch_new(&l));
    if (a && l) {
        CHECK_OK(alloy_launch_add_output(l, 1, &n, ALLOY_FLOAT32));
        CHECK_OK(alloy_launch_set_grid(l, 4, 1, 1));
        CHECK_OK(alloy_launch_set_threadgroup(l, 4, 1, 1));
        alloy_clear_error();
        alloy_status st = alloy_kernel_apply(kern, 1, &a, l, NULL, &out);
        if (st == ALLOY_ERROR_COMPILER_MISSING) {
            SKIP("no compiler for kernels here");
        } else {
            CHECK_MSG(st == ALLOY_ERROR_COMPILE, "%s", alloy_status_name(st));
            const char *m = alloy_last_error();
            CHECK_MSG(strlen(m) > 4096, "message is only %zu bytes", strlen(m));
            CHECK(strstr(m, "long_log") != NULL); /* says which kernel */
            /* NVRTC stops after 100 errors; the host compilers report all 200 */
            const char *last = alloy_device_backend(dev) == ALLOY_BACKEND_CUDA
                                   ? "zz_undeclared_099" : "zz_undeclared_199";
            CHECK(strstr(m, "zz_undeclared_000") != NULL);
            CHECK_MSG(strstr(m, last) != NULL,
                      "the last identifier is missing; message ends: ...%s",
                      strlen(m) > 300 ? m + strlen(m) - 300 : m);
            /* the same through alloy_kernel_compile: the log is whole too */
            alloy_compile_result cr;
            memset(&cr, 0, sizeof cr);
            CHECK_FAILS(alloy_kernel_compile(kern, 1, &a, l, dev, &cr), ALLOY_ERROR_COMPILE, last);
            CHECK(cr.log && strstr(cr.log, last) != NULL);
            alloy_compile_result_clear(&cr);
        }
    }
    alloy_launch_free(l);
    alloy_array_free(a);
    alloy_array_free(out);
    alloy_kernel_free(kern);
}

/* A user error never aborts, whatever the arguments. */
static void test_null_arguments_everywhere(void) {
    CHECK_FAILS(alloy_device_get("cpu", NULL), ALLOY_ERROR_INVALID_ARGUMENT, NULL);
    CHECK_FAILS(alloy_array_new(NULL, ALLOY_FLOAT32, 0, NULL, NULL), ALLOY_ERROR_INVALID_ARGUMENT, NULL);
    CHECK_FAILS(alloy_array_fill(NULL, 0), ALLOY_ERROR_INVALID_ARGUMENT, NULL);
    CHECK_FAILS(alloy_stream_synchronize(NULL), ALLOY_ERROR_INVALID_ARGUMENT, NULL);
    CHECK_OK(alloy_cache_stats(NULL, NULL)); /* both outputs are optional */
    CHECK(strlen(alloy_last_error()) > 0);
}

int main(void) {
    RUN(test_status_names);
    RUN(test_clear_and_sticky);
    RUN(test_thread_local_messages);
    RUN(test_long_compile_message);
    RUN(test_null_arguments_everywhere);
    return harness_finish();
}
