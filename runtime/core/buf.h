/* gpufaas — a growable byte buffer (runtime/core).
 *
 * Used to build messages, JSON text and frames. Appends either succeed or
 * leave the buffer as it was and return GF_ERR_NOMEM (or GF_ERR_TOO_LARGE when
 * a configured limit would be exceeded). The content is always followed by a
 * NUL byte that is not counted in len, so text can be used as a C string.
 */
#ifndef GF_CORE_BUF_H
#define GF_CORE_BUF_H

#include <stdarg.h>
#include <stddef.h>

#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_buf {
    char *data;   /* owned; NULL until the first append */
    size_t len;   /* bytes used, excluding the trailing NUL */
    size_t cap;   /* bytes allocated */
    size_t limit; /* 0 = unlimited; else appends beyond limit bytes fail */
} gf_buf;

/* Initialise an empty buffer (no allocation). */
void gf_buf_init(gf_buf *b);
/* Free the storage; the buffer is empty and reusable afterwards. */
void gf_buf_deinit(gf_buf *b);
/* Drop the content, keep the storage. */
void gf_buf_reset(gf_buf *b);
/* Make room for `more` bytes beyond len. */
gf_status gf_buf_reserve(gf_buf *b, size_t more);
gf_status gf_buf_append(gf_buf *b, const void *p, size_t n);
gf_status gf_buf_append_str(gf_buf *b, const char *s);
gf_status gf_buf_printf(gf_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
gf_status gf_buf_vprintf(gf_buf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Append s (len bytes) as a JSON string literal, quotes included. Bytes that
 * are not valid UTF-8 are written as U+FFFD. */
gf_status gf_buf_append_json_str(gf_buf *b, const char *s, size_t len);
/* Take ownership of the content (caller frees with free()); the buffer is
 * left empty. Returns an allocated "" when the buffer was never written, or
 * NULL when that allocation fails. */
char *gf_buf_steal(gf_buf *b, size_t *len);

/* Copy the string src into dst[cap] as snprintf(dst, cap, "%s", src) does
 * (cut to cap - 1 bytes, NUL terminated; nothing written when cap is 0) and
 * return strlen(src), without printf's ~500 instructions (the request path
 * copies a few names per request). */
size_t gf_str_copy(char *dst, size_t cap, const char *src);

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_BUF_H */
