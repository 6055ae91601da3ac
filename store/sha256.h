/* gpufaas — SHA-256 of uploads and stored weights files (store/), through
 * OpenSSL's libcrypto (EVP).
 *
 * The function store is content-checked: every version's weights file has
 * its SHA-256 recorded at deploy (computed while the upload streams in),
 * checked in the background after a start and by `gpufaas fsck`. libcrypto's
 * SHA-256 runs at the speed of the CPU's SHA extensions (about 1.4 GB/s on a
 * core here), so hashing costs what reading the bytes costs.
 *
 *   gf_sha256 h;
 *   gf_sha256_init(&h, err);
 *   gf_sha256_update(&h, chunk, n);   // any number of times, any chunk sizes
 *   char hex[GF_SHA256_HEX_LEN];
 *   gf_sha256_final(&h, hex, err);    // 64 lowercase hex digits + NUL
 *   gf_sha256_deinit(&h);             // always, whatever happened
 *
 * A context belongs to its caller; it is not thread-safe, but distinct
 * contexts may be used by distinct threads. Only the gateway side (store/,
 * gateway/) uses this: the runtime (runtime/, functions/) stays libc-only.
 */
#ifndef GF_STORE_SHA256_H
#define GF_STORE_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GF_SHA256_LEN 32     /* digest bytes */
#define GF_SHA256_HEX_LEN 65 /* 64 hex digits + NUL */

typedef struct gf_sha256 {
    void *md;    /* EVP_MD_CTX, owned; NULL before init and after deinit */
    bool failed; /* an update failed: final reports it */
} gf_sha256;

/* Start a new hash in the caller-owned context c (which must be zeroed or
 * deinitialised). GF_ERR_NOMEM or GF_ERR_INTERNAL when libcrypto cannot. */
gf_status gf_sha256_init(gf_sha256 *c, gf_err *err);

/* Feed n bytes at data (borrowed; may be NULL when n == 0). A failure is
 * remembered and reported by gf_sha256_final. */
void gf_sha256_update(gf_sha256 *c, const void *data, size_t n);

/* Finish: write the digest as 64 lowercase hex digits plus a NUL into hex.
 * The context must be initialised again before it is reused. */
gf_status gf_sha256_final(gf_sha256 *c, char hex[GF_SHA256_HEX_LEN], gf_err *err);

/* Free what the context holds. A zeroed context and a second call are
 * no-ops. */
void gf_sha256_deinit(gf_sha256 *c);

/* The digest of n bytes at data (borrowed) in one call, as hex. */
gf_status gf_sha256_buf(const void *data, size_t n, char hex[GF_SHA256_HEX_LEN], gf_err *err);

/* True when s is exactly 64 lowercase hex digits (the form the store keeps).
 * s may be NULL (false). */
bool gf_sha256_hex_valid(const char *s);

/* Hash the whole file at path (borrowed) into hex; *size_out, when non-NULL,
 * gets the number of bytes read. GF_ERR_NOT_FOUND when the file does not
 * exist, GF_ERR_IO on any other open or read failure (the message names the
 * path and the call). */
gf_status gf_sha256_file(const char *path, char hex[GF_SHA256_HEX_LEN], uint64_t *size_out,
                         gf_err *err);

/* The same, giving up with GF_ERR_CLOSED as soon as *stop (borrowed; may be
 * NULL) becomes true: for a background check that a shutdown must not wait
 * for. */
gf_status gf_sha256_file_until(const char *path, const _Atomic bool *stop,
                               char hex[GF_SHA256_HEX_LEN], uint64_t *size_out, gf_err *err);

#ifdef __cplusplus
}
#endif

#endif /* GF_STORE_SHA256_H */
