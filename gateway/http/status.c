/* gpufaas — the one table that turns result codes into HTTP status codes.
 * Every answer that reports a gf_status (from the core, the request codec,
 * the upload) goes through it; the core never chooses an HTTP code. */
#include "gateway/http/http.h"

static const unsigned short gf_http_codes[GF_STATUS_COUNT_] = {
    [GF_OK] = 200,
    [GF_ERR_NOMEM] = 500,
    [GF_ERR_INVALID] = 400,        /* the request, the manifest or the weights are wrong */
    [GF_ERR_IO] = 500,
    [GF_ERR_FORMAT] = 400,         /* malformed JSON, multipart, safetensors */
    [GF_ERR_NOT_FOUND] = 404,      /* no such function, version, worker */
    [GF_ERR_BUSY] = 429,           /* a full queue: try again (with Retry-After) */
    [GF_ERR_TOO_LARGE] = 413,
    [GF_ERR_OVERFLOW] = 400,       /* sizes from the request overflow */
    [GF_ERR_DEVICE] = 500,
    [GF_ERR_UNSUPPORTED] = 400,    /* valid, but not something this server runs */
    [GF_ERR_TIMEOUT] = 503,
    [GF_ERR_PROTOCOL] = 500,       /* a worker broke the worker protocol */
    [GF_ERR_EXISTS] = 409,         /* that version exists already */
    [GF_ERR_STATE] = 503,          /* the version cannot serve now (broken, not ready) */
    [GF_ERR_PERMISSION] = 403,
    [GF_ERR_NO_DEVICE_MEM] = 503,  /* the device is full right now */
    [GF_ERR_INTERNAL] = 500,
    [GF_ERR_CLOSED] = 503,         /* shutting down, no worker up */
    [GF_ERR_NO_SPACE] = 507,       /* the disk is full (staging an upload) */
    [GF_ERR_CONFLICT] = 409,       /* a version change the request did not allow; the pin limit */
    [GF_ERR_OVERLOADED] = 503,     /* admission (it would miss its SLO), or no memory
                                      for more request bodies now (Retry-After) */
    [GF_ERR_DEADLINE] = 504,       /* the request's deadline passed */
};

unsigned gf_http_retry_after_s(gf_status st)
{
    return st == GF_ERR_BUSY || st == GF_ERR_OVERLOADED ? 1 : 0;
}

int gf_http_status_of(gf_status st)
{
    if ((unsigned)st >= GF_STATUS_COUNT_ || gf_http_codes[st] == 0)
        return 500;
    return gf_http_codes[st];
}
