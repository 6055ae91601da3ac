/* gpufaas — UTF-8 validation (runtime/core). */
#ifndef GF_CORE_UTF8_H
#define GF_CORE_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Length (1..4) of the well-formed UTF-8 sequence at s (at most len bytes
 * available), or 0 when it is not well formed: truncated, overlong, a
 * surrogate, or above U+10FFFF. */
size_t gf_utf8_seq_len(const char *s, size_t len);

/* True when all len bytes are well-formed UTF-8. On failure, *bad_at (if not
 * NULL) receives the offset of the first bad byte. */
bool gf_utf8_valid(const char *s, size_t len, size_t *bad_at);

/* Encode code point cp (<= 0x10FFFF, not a surrogate) into out[4]; returns
 * the byte count, 0 for an invalid code point. */
size_t gf_utf8_encode(uint32_t cp, char out[4]);

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_UTF8_H */
