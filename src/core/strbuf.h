/* strbuf.h — a growable string, the one way the library builds text. */
#ifndef ALLOY_CORE_STRBUF_H
#define ALLOY_CORE_STRBUF_H

#include <stddef.h>
#include "error.h"

typedef struct alloy_strbuf {
    char *data; /* always NUL-terminated once anything was appended */
    size_t len;
    size_t cap;
    int failed; /* an allocation failed; data is then incomplete */
} alloy_strbuf;

void alloy_sb_init(alloy_strbuf *sb);
void alloy_sb_free(alloy_strbuf *sb);
void alloy_sb_append(alloy_strbuf *sb, const char *s);
void alloy_sb_append_n(alloy_strbuf *sb, const char *s, size_t n);
void alloy_sb_printf(alloy_strbuf *sb, const char *fmt, ...) ALLOY_PRINTF(2, 3);
/* Hands the buffer to the caller (malloc'd, never NULL unless out of memory)
 * and resets sb. */
char *alloy_sb_take(alloy_strbuf *sb);

#endif
