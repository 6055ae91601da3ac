/* gpufaas — result codes and error messages (runtime/core).
 *
 * One convention for the whole project: a function that can fail returns a
 * gf_status (GF_OK == 0) and, when the caller passes a gf_err, fills in a human
 * message naming what went wrong. A NULL gf_err is allowed everywhere: the code
 * alone is then returned. Messages are fixed-size, so reporting an error never
 * allocates and never fails.
 */
#ifndef GF_CORE_ERROR_H
#define GF_CORE_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#include <gpufaas/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The result codes (GF_OK, GF_ERR_*) are public: <gpufaas/status.h>. */

/* Size of the message buffer carried by gf_err, including the NUL. */
#define GF_ERR_MSG_MAX 512

/* A result code plus a message. Caller-owned (usually on the stack). */
typedef struct gf_err {
    gf_status code;              /* GF_OK when nothing failed */
    char msg[GF_ERR_MSG_MAX];    /* NUL-terminated, "" when code == GF_OK */
} gf_err;

/* Short constant description of a code ("out of memory"). Never NULL. */
const char *gf_strerror(gf_status code);

/* Stable identifier of a code ("GF_ERR_NOMEM"), for logs and JSON. Never NULL. */
const char *gf_status_name(gf_status code);

/* Reset *err to GF_OK with an empty message. err may be NULL. */
void gf_err_clear(gf_err *err);

/* Record code and a printf-style message in *err (err may be NULL; then only
 * the code is returned). Returns code, so callers can write
 * `return gf_err_set(err, GF_ERR_INVALID, "shape %d", n);`. */
gf_status gf_err_set(gf_err *err, gf_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
gf_status gf_err_setv(gf_err *err, gf_status code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* Prefix the existing message with "prefix: " (printf-style), keeping the
 * code. Used when an error crosses a layer that can name more context.
 * Returns err->code (or GF_OK when err is NULL). */
gf_status gf_err_prefix(gf_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The message, or gf_strerror(code) when no message was set. err non-NULL. */
const char *gf_err_msg(const gf_err *err);

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_ERROR_H */
