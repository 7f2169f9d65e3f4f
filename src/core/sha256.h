/* sha256.h — SHA-256 (FIPS 180-4), for cache keys and entry checksums. */
#ifndef ALLOY_CORE_SHA256_H
#define ALLOY_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct alloy_sha256 {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t block[64];
    size_t fill;
} alloy_sha256;

void alloy_sha256_init(alloy_sha256 *s);
void alloy_sha256_update(alloy_sha256 *s, const void *data, size_t n);
void alloy_sha256_final(alloy_sha256 *s, uint8_t digest[32]);
/* Digest as 64 lowercase hex characters + NUL. */
void alloy_sha256_hex(const void *data, size_t n, char hex[65]);
void alloy_digest_to_hex(const uint8_t digest[32], char hex[65]);

#endif
