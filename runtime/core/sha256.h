/* gpufaas — SHA-256 (FIPS 180-4) (runtime/core).
 *
 * Our own implementation, libc only, so the store can check weight files at
 * start-up and the gateway can checksum uploads while streaming them to disk.
 * Streaming use:
 *
 *   gf_sha256 h;
 *   gf_sha256_init(&h);
 *   gf_sha256_update(&h, chunk, n);   // any number of times, any chunk sizes
 *   unsigned char d[GF_SHA256_LEN];
 *   gf_sha256_final(&h, d);
 *   char hex[GF_SHA256_HEX_LEN];
 *   gf_sha256_hex(d, hex);            // 64 lowercase hex digits + NUL
 *
 * A context is plain data owned by the caller; it is not thread-safe, but
 * distinct contexts may be used by distinct threads.
 */
#ifndef GF_CORE_SHA256_H
#define GF_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GF_SHA256_LEN 32     /* digest bytes */
#define GF_SHA256_HEX_LEN 65 /* 64 hex digits + NUL */

typedef struct gf_sha256 {
    uint32_t h[8];           /* chaining state */
    uint64_t total;          /* message bytes consumed so far */
    unsigned char block[64]; /* a partial block waiting for more input */
    size_t fill;             /* bytes used in block, < 64 */
} gf_sha256;

/* Start a new hash in the caller-owned context c. */
void gf_sha256_init(gf_sha256 *c);

/* Feed n bytes at data (borrowed; may be NULL when n == 0). */
void gf_sha256_update(gf_sha256 *c, const void *data, size_t n);

/* Finish: write the 32-byte digest to out. c must be re-initialised before
 * it is used again. */
void gf_sha256_final(gf_sha256 *c, unsigned char out[GF_SHA256_LEN]);

/* Digest of n bytes at data in one call. */
void gf_sha256_buf(const void *data, size_t n, unsigned char out[GF_SHA256_LEN]);

/* Write digest as 64 lowercase hex digits plus a NUL into hex. */
void gf_sha256_hex(const unsigned char digest[GF_SHA256_LEN], char hex[GF_SHA256_HEX_LEN]);

/* True when s is exactly 64 lowercase hex digits (the form gf_sha256_hex
 * writes and the store keeps). s may be NULL (false). */
int gf_sha256_hex_valid(const char *s);

/* Hash the whole file at path (borrowed) into hex; *size_out, when non-NULL,
 * gets the number of bytes read. GF_ERR_NOT_FOUND when the file does not
 * exist, GF_ERR_IO on any other open/read failure. */
gf_status gf_sha256_file(const char *path, char hex[GF_SHA256_HEX_LEN], uint64_t *size_out,
                         gf_err *err);

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_SHA256_H */
