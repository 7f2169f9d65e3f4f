/* alloy/status.h — status codes and the thread-local error message.
 *
 * Every alloy function that can fail returns an alloy_status. On failure the
 * calling thread's last-error message says what was wrong, where, and what to
 * do; it stays until the next failing call on that thread (successful calls do
 * not clear it, like errno). User errors never abort the process. */
#ifndef ALLOY_STATUS_H
#define ALLOY_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum alloy_status {
    ALLOY_OK = 0,
    ALLOY_ERROR_INVALID_ARGUMENT = 1, /* bad name, shape, dtype, count, size, flag */
    ALLOY_ERROR_COMPILE = 2,          /* the kernel did not compile: message holds the mapped log */
    ALLOY_ERROR_COMPILER_MISSING = 3, /* no host C++ compiler / no NVRTC */
    ALLOY_ERROR_UNAVAILABLE = 4,      /* the device or backend is not available here */
    ALLOY_ERROR_OUT_OF_MEMORY = 5,
    ALLOY_ERROR_LAUNCH = 6,           /* the launch failed (fault, barrier divergence, driver) */
    ALLOY_ERROR_IO = 7,               /* file system: cache, .npy, sources */
    ALLOY_ERROR_UNSUPPORTED = 8,      /* a valid request this backend cannot do */
    ALLOY_ERROR_INTERNAL = 9          /* a bug in alloy: please report it */
} alloy_status;

/* "ALLOY_ERROR_COMPILE" etc. Never NULL. */
const char *alloy_status_name(alloy_status status);

/* The calling thread's last error message ("" if none). Valid until the next
 * alloy call on this thread. */
const char *alloy_last_error(void);

/* Forget the calling thread's last error. */
void alloy_clear_error(void);

/* Warnings (e.g. the one-time "grid counts threads" notice) go to stderr unless
 * a handler is installed. Pass NULL to restore stderr. Process-wide. */
typedef void (*alloy_warning_handler)(const char *message, void *user);
void alloy_set_warning_handler(alloy_warning_handler handler, void *user);

#ifdef __cplusplus
}
#endif
#endif
