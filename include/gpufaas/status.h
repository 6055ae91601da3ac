/* gpufaas — result codes, shared by the runtime and function authors.
 *
 * This header is part of the function ABI (see gpufaas/function.h): every
 * entry point of a function kind returns one of these codes (GF_OK on
 * success), and so does every runtime call it makes. It depends on nothing;
 * the values are stable (they cross the worker protocol and the ABI) and new
 * codes are only ever added before GF_STATUS_COUNT_. The runtime's
 * descriptions of the codes are one table in runtime/core/error.c
 * (gf_strerror, gf_status_name).
 */
#ifndef GPUFAAS_STATUS_H
#define GPUFAAS_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

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
    GF_ERR_NO_SPACE = 19,   /* a file system is full */
    GF_ERR_CONFLICT = 20,   /* would change an object in a way the request did not ask for
                               (the message says how to proceed), or conflicts with a limit
                               in force (the pin limit) */
    GF_ERR_OVERLOADED = 21, /* the server cannot take it now (admission: it would finish too
                               late to meet its SLO; memory for request bodies): retry later */
    GF_ERR_DEADLINE = 22,   /* the request's own deadline passed */
    GF_STATUS_COUNT_        /* number of codes; not a code */
} gf_status;

#ifdef __cplusplus
}
#endif

#endif /* GPUFAAS_STATUS_H */
