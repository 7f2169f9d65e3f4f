/* test_core_devices.c — devices and streams through the public API: device
 * names ("cpu", "cpu:0", "auto", NULL, "cuda" where there is no CUDA, and
 * malformed names), handles that stay the same across gets, the ALLOY_DEVICE
 * override of "auto" (checked in forked children, since resolution may be
 * cached per process), the backend list, default and new streams,
 * synchronisation, and freeing (a no-op on the default stream). */
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static int env_is_cuda(void) {
    const char *e = getenv("ALLOY_DEVICE");
    return e && strncmp(e, "cuda", 4) == 0;
}

static void test_cpu_device(void) {
    alloy_device *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(alloy_device_get("cpu", &a));
    CHECK_OK(alloy_device_get("cpu", &b));
    if (!a) return;
    CHECK(a == b); /* owned by the library, one handle per device */
    CHECK(strcmp(alloy_device_name(a), "cpu") == 0);
    CHECK(alloy_device_backend(a) == ALLOY_BACKEND_CPU);
    CHECK(alloy_device_compute_capability(a) == 0 && alloy_device_multiprocessor_count(a) == 0);
    CHECK(alloy_device_has_tensor_maps(a) == 1 && alloy_device_has_tensor_maps(NULL) == 0);
    CHECK(alloy_device_description(a) != NULL && alloy_device_description(a)[0] != '\0');
    /* the implementation parses "<backend>:<ordinal>" for every backend, so
     * "cpu:0" names the one CPU device; "cpu:1" does not exist */
    CHECK_OK(alloy_device_get("cpu:0", &c));
    CHECK(c == a);
    alloy_device *d = NULL;
    CHECK_FAILS(alloy_device_get("cpu:1", &d), ALLOY_ERROR_UNAVAILABLE, "cpu:1");
    CHECK(d == NULL);
    CHECK_OK(alloy_device_synchronize(a));
}

static void test_auto_device(void) {
    alloy_device *a = NULL, *n = NULL, *c = NULL;
    CHECK_OK(alloy_device_get("auto", &a));
    CHECK_OK(alloy_device_get(NULL, &n));
    CHECK(a != NULL && a == n);
    if (!a) return;
    /* "auto" is the best available: with no ALLOY_DEVICE and no GPU, the CPU */
    const char *env = getenv("ALLOY_DEVICE");
    alloy_device *cuda = NULL;
    int have_cuda = alloy_device_get("cuda", &cuda) == ALLOY_OK;
    if (!(env && *env) && !have_cuda) {
        CHECK_OK(alloy_device_get("cpu", &c));
        CHECK(a == c);
    }
    if (!(env && *env) && have_cuda) CHECK(a == cuda);
    if (have_cuda) CHECK(alloy_device_multiprocessor_count(cuda) > 0); /* what a persistent grid launches */
    /* tensor maps on Hopper and newer (with a driver that encodes them: CUDA 12 and newer) */
    if (have_cuda) CHECK(alloy_device_has_tensor_maps(cuda) == (alloy_device_compute_capability(cuda) >= 90));
}

static void test_cuda_unavailable(void) {
    alloy_device *d = NULL;
    if (env_is_cuda()) {
        SKIP("ALLOY_DEVICE=cuda: CUDA is expected to be available");
        return;
    }
    alloy_status st = alloy_device_get("cuda", &d);
    if (st == ALLOY_OK) {
        SKIP("CUDA is available on this machine");
        return;
    }
    CHECK_MSG(st == ALLOY_ERROR_UNAVAILABLE, "%s: %s", alloy_status_name(st), alloy_last_error());
    CHECK(d == NULL);
    /* the reason is given, naming the device */
    CHECK(strstr(alloy_last_error(), "cuda") != NULL);
    CHECK(strlen(alloy_last_error()) > 20);
    CHECK_FAILS(alloy_device_get("cuda:0", &d), ALLOY_ERROR_UNAVAILABLE, "cuda");
    CHECK_FAILS(alloy_device_get("cuda:3", &d), ALLOY_ERROR_UNAVAILABLE, "cuda");
    CHECK(d == NULL);
}

static void test_bad_names(void) {
    static const char *const BAD[] = {"gpu", "CPU", "metal", "cpu0", "cpu:", "cpu:x", "cpu:-1",
                                      "cpu:0x", " cpu", "cpu ", "auto:0", ":0", "cuda:x", "cuda:",
                                      "cuda:-1", ""};
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        alloy_device *d = NULL;
        alloy_clear_error();
        alloy_status st = alloy_device_get(BAD[i], &d);
        int is_cuda = strncmp(BAD[i], "cuda", 4) == 0;
        /* a malformed name is an invalid argument; a cuda name on a build or
         * machine without CUDA may instead be reported as unavailable */
        int ok = st == ALLOY_ERROR_INVALID_ARGUMENT ||
                 (is_cuda && st == ALLOY_ERROR_UNAVAILABLE && !env_is_cuda());
        CHECK_MSG(ok, "'%s' -> %s: %s", BAD[i], alloy_status_name(st), alloy_last_error());
        CHECK_MSG(d == NULL, "'%s' gave a device", BAD[i]);
        /* the message quotes the name and says what would be valid */
        char quoted[32];
        snprintf(quoted, sizeof quoted, "'%s'", BAD[i]);
        CHECK_MSG(strstr(alloy_last_error(), quoted) != NULL, "'%s': message does not quote it: %s",
                  BAD[i], alloy_last_error());
        if (st == ALLOY_ERROR_INVALID_ARGUMENT)
            CHECK_MSG(strstr(alloy_last_error(), "cpu") && strstr(alloy_last_error(), ":N"),
                      "'%s': message does not list valid names: %s", BAD[i], alloy_last_error());
    }
    CHECK_FAILS(alloy_device_get("cpu", NULL), ALLOY_ERROR_INVALID_ARGUMENT, "NULL");
}

/* ALLOY_DEVICE decides what "auto" means. Each case runs in a child process
 * with a fresh library state; the child reports through its exit status. */
static int child_auto_with_env(const char *value) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (value) setenv("ALLOY_DEVICE", value, 1);
        else unsetenv("ALLOY_DEVICE");
        alloy_device *d = NULL;
        alloy_status st = alloy_device_get("auto", &d);
        if (st != ALLOY_OK) _exit(10 + (int)st);
        if (strcmp(alloy_device_name(d), "cpu") == 0) _exit(1);
        if (strncmp(alloy_device_name(d), "cuda", 4) == 0) _exit(2);
        _exit(3);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

static void test_alloy_device_env_override(void) {
    alloy_device *cuda = NULL;
    int have_cuda = alloy_device_get("cuda", &cuda) == ALLOY_OK;
    CHECK(child_auto_with_env("cpu") == 1);
    CHECK(child_auto_with_env("cpu:0") == 1);
    CHECK(child_auto_with_env("auto") == (have_cuda ? 2 : 1));
    CHECK(child_auto_with_env("") == (have_cuda ? 2 : 1));
    CHECK(child_auto_with_env(NULL) == (have_cuda ? 2 : 1));
    /* an override naming an unusable device is reported, not ignored */
    CHECK(child_auto_with_env("gpu") == 10 + ALLOY_ERROR_INVALID_ARGUMENT);
    if (!have_cuda) CHECK(child_auto_with_env("cuda") == 10 + ALLOY_ERROR_UNAVAILABLE);
    else CHECK(child_auto_with_env("cuda") == 2);
    /* explicit names are never overridden */
    pid_t pid = fork();
    if (pid == 0) {
        setenv("ALLOY_DEVICE", "gpu", 1);
        alloy_device *d = NULL;
        _exit(alloy_device_get("cpu", &d) == ALLOY_OK && strcmp(alloy_device_name(d), "cpu") == 0 ? 0
                                                                                                  : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_backends(void) {
    int n = alloy_backend_count();
    CHECK(n >= 1);
    int saw_cpu = 0;
    for (int i = 0; i < n; i++) {
        const char *name = NULL, *detail = NULL;
        int available = -1;
        CHECK_OK(alloy_backend_info(i, &name, &available, &detail));
        CHECK(name != NULL && detail != NULL);
        CHECK(available == 0 || available == 1);
        if (!name || !detail) continue;
        CHECK_MSG(detail[0] != '\0', "backend %s has no detail", name);
        if (strcmp(name, "cpu") == 0) {
            saw_cpu = 1;
            CHECK(available == 1);
            alloy_device *d = NULL;
            CHECK_OK(alloy_device_get("cpu", &d));
            if (d) CHECK(strcmp(detail, alloy_device_description(d)) == 0);
        } else {
            CHECK(strcmp(name, "cuda") == 0);
            alloy_device *d = NULL;
            alloy_status st = alloy_device_get(name, &d);
            CHECK_MSG((st == ALLOY_OK) == (available == 1), "%s: available %d but get says %s",
                      name, available, alloy_status_name(st));
        }
        /* NULL outputs are allowed */
        CHECK_OK(alloy_backend_info(i, NULL, NULL, NULL));
    }
    CHECK(saw_cpu);
    const char *name = NULL;
    CHECK_FAILS(alloy_backend_info(n, &name, NULL, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "range");
    CHECK_FAILS(alloy_backend_info(-1, &name, NULL, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "range");
}

static void test_streams(void) {
    alloy_device *dev = harness_device();
    alloy_stream *def = NULL, *def2 = NULL, *s1 = NULL, *s2 = NULL;
    CHECK_OK(alloy_stream_default(dev, &def));
    CHECK_OK(alloy_stream_default(dev, &def2));
    CHECK(def != NULL && def == def2);
    if (!def) return;
    CHECK(alloy_stream_device(def) == dev);
    CHECK_OK(alloy_stream_synchronize(def));
    CHECK_OK(alloy_stream_new(dev, &s1));
    CHECK_OK(alloy_stream_new(dev, &s2));
    CHECK(s1 && s2 && s1 != s2 && s1 != def);
    if (s1) {
        CHECK(alloy_stream_device(s1) == dev);
        CHECK_OK(alloy_stream_synchronize(s1));
    }
    CHECK_OK(alloy_device_synchronize(dev));
    alloy_stream_free(s1);
    alloy_stream_free(s2);
    /* freeing the default stream does nothing: it still works */
    alloy_stream_free(def);
    alloy_stream_free(NULL);
    CHECK_OK(alloy_stream_default(dev, &def2));
    CHECK(def2 == def);
    CHECK_OK(alloy_stream_synchronize(def));
    CHECK(alloy_stream_device(def) == dev);
    /* many streams come and go */
    for (int i = 0; i < 100; i++) {
        alloy_stream *s = NULL;
        CHECK_OK(alloy_stream_new(dev, &s));
        CHECK_OK(alloy_stream_synchronize(s));
        alloy_stream_free(s);
    }
    CHECK_FAILS(alloy_stream_default(NULL, &def), ALLOY_ERROR_INVALID_ARGUMENT, "NULL");
    CHECK_FAILS(alloy_stream_default(dev, NULL), ALLOY_ERROR_INVALID_ARGUMENT, "NULL");
    CHECK_FAILS(alloy_stream_new(NULL, &s1), ALLOY_ERROR_INVALID_ARGUMENT, "NULL");
    CHECK_FAILS(alloy_stream_synchronize(NULL), ALLOY_ERROR_INVALID_ARGUMENT, "NULL");
    CHECK_FAILS(alloy_device_synchronize(NULL), ALLOY_ERROR_INVALID_ARGUMENT, "NULL");
    CHECK(alloy_stream_device(NULL) == NULL);
}

/* Work queued on a new stream is visible after synchronising it: an array
 * filled, then read back, with a stream in between (the CPU runs in order). */
static void test_synchronize_after_work(void) {
    alloy_device *dev = harness_device();
    int64_t n = 1000;
    alloy_array *a = NULL;
    CHECK_OK(alloy_array_new(dev, ALLOY_FLOAT32, 1, &n, &a));
    if (!a) return;
    CHECK_OK(alloy_array_fill(a, 1.5));
    CHECK_OK(alloy_device_synchronize(dev));
    float *h = malloc((size_t)n * sizeof *h);
    CHECK_OK(alloy_array_copy_to_host(a, h, (size_t)n * sizeof *h));
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += h[i] != 1.5f;
    CHECK(bad == 0);
    free(h);
    alloy_array_free(a);
}

static void test_version(void) {
    CHECK(strcmp(alloy_version(), ALLOY_VERSION_STRING) == 0);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", ALLOY_VERSION_MAJOR, ALLOY_VERSION_MINOR,
             ALLOY_VERSION_PATCH);
    CHECK(strcmp(alloy_version(), want) == 0);
}

int main(void) {
    RUN(test_cpu_device);
    RUN(test_auto_device);
    RUN(test_cuda_unavailable);
    RUN(test_bad_names);
    RUN(test_alloy_device_env_override);
    RUN(test_backends);
    RUN(test_streams);
    RUN(test_synchronize_after_work);
    RUN(test_version);
    return harness_finish();
}
