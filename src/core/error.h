/* error.h — setting the thread-local error message, and warnings. */
#ifndef ALLOY_CORE_ERROR_H
#define ALLOY_CORE_ERROR_H

#include "alloy/status.h"

#if defined(__GNUC__)
#define ALLOY_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define ALLOY_PRINTF(a, b)
#endif

/* Records a formatted message for the calling thread and returns `status`,
 * so callers write `return alloy_error(ALLOY_ERROR_..., "...", ...);`. */
alloy_status alloy_error(alloy_status status, const char *fmt, ...) ALLOY_PRINTF(2, 3);

/* Like alloy_error but appends a (possibly long) text verbatim after the
 * formatted part (compiler logs). */
alloy_status alloy_error_with_text(alloy_status status, const char *text, const char *fmt, ...)
    ALLOY_PRINTF(3, 4);

/* Sends a warning to the installed handler (stderr by default). */
void alloy_warn(const char *fmt, ...) ALLOY_PRINTF(1, 2);

#endif
