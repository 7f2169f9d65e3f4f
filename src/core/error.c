/* error.c — status names, the thread-local last-error message, warnings.
 *
 * The message lives in a thread-local buffer (grown on the heap for long
 * compiler logs) so that concurrent callers never see each other's errors. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

static _Thread_local char *tl_message;
static _Thread_local size_t tl_cap;

/* A thread's message buffer is freed when the thread exits (a pthread key's
 * destructor), so threads that come and go do not leak it. */
static pthread_key_t message_key;
static pthread_once_t message_key_once = PTHREAD_ONCE_INIT;

static void free_message(void *p) {
    free(p);
    tl_message = NULL;
    tl_cap = 0;
}

static void make_message_key(void) { pthread_key_create(&message_key, free_message); }

const char *alloy_status_name(alloy_status status) {
    switch (status) {
    case ALLOY_OK: return "ALLOY_OK";
    case ALLOY_ERROR_INVALID_ARGUMENT: return "ALLOY_ERROR_INVALID_ARGUMENT";
    case ALLOY_ERROR_COMPILE: return "ALLOY_ERROR_COMPILE";
    case ALLOY_ERROR_COMPILER_MISSING: return "ALLOY_ERROR_COMPILER_MISSING";
    case ALLOY_ERROR_UNAVAILABLE: return "ALLOY_ERROR_UNAVAILABLE";
    case ALLOY_ERROR_OUT_OF_MEMORY: return "ALLOY_ERROR_OUT_OF_MEMORY";
    case ALLOY_ERROR_LAUNCH: return "ALLOY_ERROR_LAUNCH";
    case ALLOY_ERROR_IO: return "ALLOY_ERROR_IO";
    case ALLOY_ERROR_UNSUPPORTED: return "ALLOY_ERROR_UNSUPPORTED";
    case ALLOY_ERROR_INTERNAL: return "ALLOY_ERROR_INTERNAL";
    }
    return "ALLOY_ERROR_UNKNOWN";
}

const char *alloy_last_error(void) { return tl_message ? tl_message : ""; }

void alloy_clear_error(void) {
    if (tl_message) tl_message[0] = '\0';
}

static void set_message(const char *prefix, size_t prefix_len, const char *text) {
    size_t tlen = text ? strlen(text) : 0;
    size_t need = prefix_len + tlen + 1;
    if (need > tl_cap) {
        char *p = realloc(tl_message, need);
        if (!p) return; /* keep the old message rather than crash */
        tl_message = p;
        tl_cap = need;
        pthread_once(&message_key_once, make_message_key);
        pthread_setspecific(message_key, p);
    }
    memcpy(tl_message, prefix, prefix_len);
    if (tlen) memcpy(tl_message + prefix_len, text, tlen);
    tl_message[prefix_len + tlen] = '\0';
}

static alloy_status vset(alloy_status status, const char *text, const char *fmt, va_list ap) {
    char buf[2048];
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof buf) n = (int)sizeof buf - 1;
    set_message(buf, (size_t)n, text);
    return status;
}

alloy_status alloy_error(alloy_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vset(status, NULL, fmt, ap);
    va_end(ap);
    return status;
}

alloy_status alloy_error_with_text(alloy_status status, const char *text, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vset(status, text, fmt, ap);
    va_end(ap);
    return status;
}

static pthread_mutex_t warn_lock = PTHREAD_MUTEX_INITIALIZER;
static alloy_warning_handler warn_handler;
static void *warn_user;

void alloy_set_warning_handler(alloy_warning_handler handler, void *user) {
    pthread_mutex_lock(&warn_lock);
    warn_handler = handler;
    warn_user = user;
    pthread_mutex_unlock(&warn_lock);
}

void alloy_warn(const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&warn_lock);
    if (warn_handler) warn_handler(buf, warn_user);
    else fprintf(stderr, "alloy: warning: %s\n", buf);
    pthread_mutex_unlock(&warn_lock);
}
