/* strbuf.c — growable strings (see strbuf.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

void alloy_sb_init(alloy_strbuf *sb) { memset(sb, 0, sizeof *sb); }

void alloy_sb_free(alloy_strbuf *sb) {
    free(sb->data);
    memset(sb, 0, sizeof *sb);
}

static int reserve(alloy_strbuf *sb, size_t extra) {
    if (sb->failed) return 0;
    size_t need = sb->len + extra + 1;
    if (need <= sb->cap) return 1;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < need) cap *= 2;
    char *p = realloc(sb->data, cap);
    if (!p) {
        sb->failed = 1;
        return 0;
    }
    sb->data = p;
    sb->cap = cap;
    return 1;
}

void alloy_sb_append_n(alloy_strbuf *sb, const char *s, size_t n) {
    if (!reserve(sb, n)) return;
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void alloy_sb_append(alloy_strbuf *sb, const char *s) { alloy_sb_append_n(sb, s, strlen(s)); }

void alloy_sb_printf(alloy_strbuf *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(sb, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

char *alloy_sb_take(alloy_strbuf *sb) {
    if (sb->failed) {
        alloy_sb_free(sb);
        return NULL;
    }
    char *p = sb->data;
    if (!p) p = calloc(1, 1);
    memset(sb, 0, sizeof *sb);
    return p;
}
