/* npy.c — NumPy .npy reader and writer for the `alloy` CLI (see npy.h for
 * what is supported and why). The header is a Python dict literal; it is
 * parsed with a small hand-written scanner that accepts what NumPy writes
 * (any key order, ' or " quotes, trailing commas, Python 2 `3L` integers). */
#include "npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

static int npy_err(char *err, size_t errlen, const char *name, const char *fmt, ...) {
    if (err && errlen) {
        size_t n = (size_t)snprintf(err, errlen, "%s: ", name ? name : "<npy>");
        if (n < errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(err + n, errlen - n, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

static const struct {
    alloy_dtype dtype;
    char kind; /* NumPy kind letter */
    int size;
} npy_types[] = {
    {ALLOY_BOOL, 'b', 1},    {ALLOY_INT8, 'i', 1},    {ALLOY_UINT8, 'u', 1},
    {ALLOY_INT16, 'i', 2},   {ALLOY_UINT16, 'u', 2},  {ALLOY_INT32, 'i', 4},
    {ALLOY_UINT32, 'u', 4},  {ALLOY_INT64, 'i', 8},   {ALLOY_UINT64, 'u', 8},
    {ALLOY_FLOAT16, 'f', 2}, {ALLOY_FLOAT32, 'f', 4}, {ALLOY_FLOAT64, 'f', 8},
};

const char *npy_descr(alloy_dtype dtype) {
    switch (dtype) {
    case ALLOY_BOOL: return "|b1";
    case ALLOY_INT8: return "|i1";
    case ALLOY_UINT8: return "|u1";
    case ALLOY_INT16: return "<i2";
    case ALLOY_UINT16: return "<u2";
    case ALLOY_INT32: return "<i4";
    case ALLOY_UINT32: return "<u4";
    case ALLOY_INT64: return "<i8";
    case ALLOY_UINT64: return "<u8";
    case ALLOY_FLOAT16: return "<f2";
    case ALLOY_FLOAT32: return "<f4";
    case ALLOY_FLOAT64: return "<f8";
    default: return NULL;
    }
}

void npy_free(npy_array *a) {
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

static int host_is_little_endian(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* ---- header scanner ----------------------------------------------------- */

typedef struct scan {
    const char *p, *end;
} scan;

static void skip_ws(scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

/* A quoted string into buf; 0 or -1. */
static int scan_string(scan *s, char *buf, size_t buflen) {
    skip_ws(s);
    if (s->p >= s->end || (*s->p != '\'' && *s->p != '"')) return -1;
    char q = *s->p++;
    size_t n = 0;
    while (s->p < s->end && *s->p != q) {
        if (n + 1 >= buflen) return -1;
        buf[n++] = *s->p++;
    }
    if (s->p >= s->end) return -1;
    s->p++;
    buf[n] = '\0';
    return 0;
}

static int scan_char(scan *s, char c) {
    skip_ws(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return 0;
    }
    return -1;
}

static int scan_word(scan *s, const char *w) {
    skip_ws(s);
    size_t n = strlen(w);
    if ((size_t)(s->end - s->p) >= n && !memcmp(s->p, w, n)) {
        s->p += n;
        return 0;
    }
    return -1;
}

/* Parses the descr string into a dtype. */
static int parse_descr(const char *d, alloy_dtype *out, const char *name, char *err,
                       size_t errlen) {
    char order = '|';
    const char *t = d;
    if (*t == '<' || *t == '>' || *t == '|' || *t == '=') order = *t++;
    char kind = *t ? *t++ : '\0';
    if (kind == '?') kind = 'b';
    char *endp = NULL;
    long size = *t ? strtol(t, &endp, 10) : 0;
    if (!*t || !endp || *endp || size <= 0) {
        if (kind == 'b' && !*t) size = 1; /* bare '?' */
        else
            return npy_err(err, errlen, name,
                           "unsupported dtype '%s' (alloy reads bool, int8..int64, uint8..uint64, "
                           "float16, float32 and float64)",
                           d);
    }
    if (order == '>' && size > 1)
        return npy_err(err, errlen, name,
                       "big-endian data (dtype '%s') is not supported; convert it first, e.g. "
                       "np.save(path, a.astype(a.dtype.newbyteorder('<')))",
                       d);
    if (order == '=' && size > 1 && !host_is_little_endian())
        return npy_err(err, errlen, name, "native byte order on a big-endian host is not supported");
    if (kind == 'V' && size == 2)
        return npy_err(err, errlen, name,
                       "dtype '%s' is a 2-byte opaque type (ml_dtypes' bfloat16 is saved like "
                       "this); .npy has no bfloat16: save it as float32 and pass "
                       "--input NAME:bfloat16=FILE.npy to convert",
                       d);
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (npy_types[i].kind == kind && npy_types[i].size == size) {
            *out = npy_types[i].dtype;
            return 0;
        }
    return npy_err(err, errlen, name,
                   "unsupported dtype '%s' (alloy reads bool, int8..int64, uint8..uint64, "
                   "float16, float32 and float64)",
                   d);
}

static int parse_header(const char *h, size_t hlen, const char *name, alloy_dtype *dtype,
                        int *fortran, int *ndim, int64_t *shape, char *err, size_t errlen) {
    scan s = {h, h + hlen};
    int have_descr = 0, have_fortran = 0, have_shape = 0;
    char key[64], descr[64];
    if (scan_char(&s, '{'))
        return npy_err(err, errlen, name, "malformed header: expected a dict literal");
    for (;;) {
        if (!scan_char(&s, '}')) break;
        if (scan_string(&s, key, sizeof key) || scan_char(&s, ':'))
            return npy_err(err, errlen, name, "malformed header: expected 'key': value");
        if (!strcmp(key, "descr")) {
            skip_ws(&s);
            if (s.p < s.end && *s.p == '[')
                return npy_err(err, errlen, name,
                               "structured dtypes (record arrays) are not supported");
            if (scan_string(&s, descr, sizeof descr))
                return npy_err(err, errlen, name, "malformed header: 'descr' is not a string");
            if (parse_descr(descr, dtype, name, err, errlen)) return -1;
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order")) {
            if (!scan_word(&s, "True")) *fortran = 1;
            else if (!scan_word(&s, "False")) *fortran = 0;
            else return npy_err(err, errlen, name, "malformed header: bad 'fortran_order'");
            have_fortran = 1;
        } else if (!strcmp(key, "shape")) {
            if (scan_char(&s, '('))
                return npy_err(err, errlen, name, "malformed header: 'shape' is not a tuple");
            *ndim = 0;
            for (;;) {
                if (!scan_char(&s, ')')) break;
                skip_ws(&s);
                if (s.p >= s.end || *s.p < '0' || *s.p > '9')
                    return npy_err(err, errlen, name, "malformed header: bad 'shape'");
                int64_t v = 0;
                while (s.p < s.end && *s.p >= '0' && *s.p <= '9') {
                    if (v > (INT64_MAX - 9) / 10)
                        return npy_err(err, errlen, name, "shape dimension too large");
                    v = v * 10 + (*s.p++ - '0');
                }
                if (s.p < s.end && *s.p == 'L') s.p++;
                if (*ndim >= ALLOY_MAX_NDIM)
                    return npy_err(err, errlen, name, "more than %d dimensions", ALLOY_MAX_NDIM);
                shape[(*ndim)++] = v;
                if (!scan_char(&s, ',')) continue;
                if (scan_char(&s, ')'))
                    return npy_err(err, errlen, name, "malformed header: bad 'shape'");
                break;
            }
            have_shape = 1;
        } else {
            return npy_err(err, errlen, name, "malformed header: unexpected key '%s'", key);
        }
        if (!scan_char(&s, ',')) continue;
        if (scan_char(&s, '}')) return npy_err(err, errlen, name, "malformed header: expected , or }");
        break;
    }
    if (!have_descr || !have_fortran || !have_shape)
        return npy_err(err, errlen, name, "malformed header: needs 'descr', 'fortran_order' and 'shape'");
    return 0;
}

/* Copies a Fortran-order image into C order. */
static void fortran_to_c(const unsigned char *src, unsigned char *dst, int ndim,
                         const int64_t *shape, size_t esize, int64_t size) {
    int64_t idx[ALLOY_MAX_NDIM] = {0}, fstride[ALLOY_MAX_NDIM];
    int64_t st = 1;
    for (int d = 0; d < ndim; d++) {
        fstride[d] = st;
        st *= shape[d];
    }
    int64_t foff = 0;
    for (int64_t i = 0; i < size; i++) {
        memcpy(dst + (size_t)i * esize, src + (size_t)foff * esize, esize);
        for (int d = ndim - 1; d >= 0; d--) { /* C order: last index fastest */
            if (++idx[d] < shape[d]) {
                foff += fstride[d];
                break;
            }
            foff -= fstride[d] * (shape[d] - 1);
            idx[d] = 0;
        }
    }
}

int npy_parse(const void *bytes, size_t len, const char *name, npy_array *out, char *err,
              size_t errlen) {
    const unsigned char *b = (const unsigned char *)bytes;
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(b, npy_magic, 6))
        return npy_err(err, errlen, name, "not a .npy file (no \\x93NUMPY magic)");
    unsigned major = b[6];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = (size_t)b[8] | ((size_t)b[9] << 8);
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) return npy_err(err, errlen, name, "truncated header");
        hlen = (size_t)b[8] | ((size_t)b[9] << 8) | ((size_t)b[10] << 16) | ((size_t)b[11] << 24);
        hstart = 12;
    } else {
        return npy_err(err, errlen, name, "unsupported .npy format version %u.%u", major, b[7]);
    }
    if (hlen > len - hstart) return npy_err(err, errlen, name, "truncated header");

    alloy_dtype dtype = ALLOY_FLOAT32;
    int fortran = 0, ndim = 0;
    int64_t shape[ALLOY_MAX_NDIM];
    if (parse_header((const char *)b + hstart, hlen, name, &dtype, &fortran, &ndim, shape, err,
                     errlen))
        return -1;
    size_t esize = alloy_dtype_size(dtype);
    int64_t size = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] != 0 && size > INT64_MAX / shape[d] / (int64_t)esize)
            return npy_err(err, errlen, name, "shape too large");
        size *= shape[d];
    }
    size_t nbytes = (size_t)size * esize, dstart = hstart + hlen;
    if (len - dstart < nbytes)
        return npy_err(err, errlen, name, "truncated data: the header promises %zu bytes, the file has %zu",
                       nbytes, len - dstart);
    out->data = malloc(nbytes ? nbytes : 1);
    if (!out->data) return npy_err(err, errlen, name, "out of memory (%zu bytes)", nbytes);
    if (fortran && ndim > 1) fortran_to_c(b + dstart, (unsigned char *)out->data, ndim, shape, esize, size);
    else memcpy(out->data, b + dstart, nbytes);
    out->dtype = dtype;
    out->ndim = ndim;
    memcpy(out->shape, shape, sizeof(int64_t) * (size_t)ndim);
    out->size = size;
    out->nbytes = nbytes;
    return 0;
}

int npy_read(const char *path, npy_array *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return npy_err(err, errlen, path, "cannot open: %s", strerror(errno));
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < 65536) {
            size_t ncap = cap ? cap * 2 : 1 << 20;
            unsigned char *t = (unsigned char *)realloc(buf, ncap);
            if (!t) {
                free(buf);
                fclose(f);
                return npy_err(err, errlen, path, "out of memory");
            }
            buf = t;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return npy_err(err, errlen, path, "read error (is it a directory?)");
    }
    int rc = npy_parse(buf, len, path, out, err, errlen);
    free(buf);
    return rc;
}

int npy_write(const char *path, alloy_dtype dtype, int ndim, const int64_t *shape,
              const void *data, char *err, size_t errlen) {
    const char *descr = npy_descr(dtype);
    if (!descr)
        return npy_err(err, errlen, path, "dtype %s cannot be stored in .npy", alloy_dtype_name(dtype));
    if (ndim < 0 || ndim > ALLOY_MAX_NDIM) return npy_err(err, errlen, path, "bad ndim %d", ndim);
    char dict[512];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    int64_t size = 1;
    for (int d = 0; d < ndim; d++) {
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%lld%s", (long long)shape[d],
                      (ndim == 1 || d + 1 < ndim) ? ", " : "");
        size *= shape[d];
    }
    if (ndim == 1) n -= 1; /* "(3,)" not "(3, )" */
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    /* magic(6) + version(2) + length(2 or 4) + dict + padding + '\n' = multiple of 64 */
    int v2 = 0;
    size_t pre = 10;
    size_t total = pre + (size_t)n + 1;
    size_t padded = (total + 63) / 64 * 64;
    if (padded - pre > 65535) {
        v2 = 1;
        pre = 12;
        total = pre + (size_t)n + 1;
        padded = (total + 63) / 64 * 64;
    }
    size_t hlen = padded - pre;
    unsigned char head[12 + 512 + 64];
    memcpy(head, npy_magic, 6);
    head[6] = v2 ? 2 : 1;
    head[7] = 0;
    head[8] = (unsigned char)(hlen & 0xff);
    head[9] = (unsigned char)((hlen >> 8) & 0xff);
    if (v2) {
        head[10] = (unsigned char)((hlen >> 16) & 0xff);
        head[11] = (unsigned char)((hlen >> 24) & 0xff);
    }
    memcpy(head + pre, dict, (size_t)n);
    memset(head + pre + (size_t)n, ' ', hlen - (size_t)n - 1);
    head[padded - 1] = '\n';

    size_t nbytes = (size_t)size * alloy_dtype_size(dtype);
    FILE *f = fopen(path, "wb");
    if (!f) return npy_err(err, errlen, path, "cannot create: %s", strerror(errno));
    int ok = fwrite(head, 1, padded, f) == padded;
    if (ok && nbytes) ok = fwrite(data, 1, nbytes, f) == nbytes;
    if (fclose(f) != 0) ok = 0;
    if (!ok) return npy_err(err, errlen, path, "write error: %s", strerror(errno));
    return 0;
}
