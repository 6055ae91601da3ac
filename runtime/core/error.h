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

#ifdef __cplusplus
extern "C" {
#endif

/* Result codes. Values are stable: they cross the worker protocol. */
typedef enum gf_status {
    GF_OK = 0,              /* success */
    GF_ERR_NOMEM = 1,       /* an allocation failed (host memory) */
    GF_ERR_INVALID = 2,     /* bad argument or bad input from a user */
    GF_ERR_IO = 3,          /* a system call on a file or socket failed */
    GF_ERR_FORMAT = 4,      /* malformed data: file, JSON, frame */
    GF_ERR_NOT_FOUND = 5,   /* no such object (function, tensor, worker) */
    GF_ERR_BUSY = 6,        /* temporarily impossible; retry later (not a failure) */
    GF_ERR_TOO_LARGE = 7,   /* larger than a budget or limit allows */
    GF_ERR_OVERFLOW = 8,    /* a size computation overflowed */
    GF_ERR_DEVICE = 9,      /* the accelerator or its driver failed */
    GF_ERR_UNSUPPORTED = 10,/* valid but not supported (dtype, op, backend) */
    GF_ERR_TIMEOUT = 11,    /* a deadline passed */
    GF_ERR_PROTOCOL = 12,   /* a peer broke the wire protocol */
    GF_ERR_EXISTS = 13,     /* already exists */
    GF_ERR_STATE = 14,      /* not allowed in the object's current state */
    GF_ERR_PERMISSION = 15, /* not allowed for this caller */
    GF_ERR_NO_DEVICE_MEM = 16, /* device memory budget exhausted */
    GF_ERR_INTERNAL = 17,   /* a bug: an invariant did not hold */
    GF_ERR_CLOSED = 18,     /* the peer or the object was shut down */
    GF_STATUS_COUNT_        /* number of codes; not a code */
} gf_status;

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
