/* gpufaas — result codes and error messages. */
#include "core/error.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    const char *text;
} gf_status_table[GF_STATUS_COUNT_] = {
    [GF_OK] = {"GF_OK", "success"},
    [GF_ERR_NOMEM] = {"GF_ERR_NOMEM", "out of memory"},
    [GF_ERR_INVALID] = {"GF_ERR_INVALID", "invalid argument"},
    [GF_ERR_IO] = {"GF_ERR_IO", "input/output error"},
    [GF_ERR_FORMAT] = {"GF_ERR_FORMAT", "malformed data"},
    [GF_ERR_NOT_FOUND] = {"GF_ERR_NOT_FOUND", "not found"},
    [GF_ERR_BUSY] = {"GF_ERR_BUSY", "busy, try again"},
    [GF_ERR_TOO_LARGE] = {"GF_ERR_TOO_LARGE", "too large"},
    [GF_ERR_OVERFLOW] = {"GF_ERR_OVERFLOW", "size overflow"},
    [GF_ERR_DEVICE] = {"GF_ERR_DEVICE", "device error"},
    [GF_ERR_UNSUPPORTED] = {"GF_ERR_UNSUPPORTED", "not supported"},
    [GF_ERR_TIMEOUT] = {"GF_ERR_TIMEOUT", "timed out"},
    [GF_ERR_PROTOCOL] = {"GF_ERR_PROTOCOL", "protocol error"},
    [GF_ERR_EXISTS] = {"GF_ERR_EXISTS", "already exists"},
    [GF_ERR_STATE] = {"GF_ERR_STATE", "not allowed in the current state"},
    [GF_ERR_PERMISSION] = {"GF_ERR_PERMISSION", "permission denied"},
    [GF_ERR_NO_DEVICE_MEM] = {"GF_ERR_NO_DEVICE_MEM", "device memory exhausted"},
    [GF_ERR_INTERNAL] = {"GF_ERR_INTERNAL", "internal error"},
    [GF_ERR_CLOSED] = {"GF_ERR_CLOSED", "closed"},
    [GF_ERR_NO_SPACE] = {"GF_ERR_NO_SPACE", "no space left on the file system"},
    [GF_ERR_CONFLICT] = {"GF_ERR_CONFLICT", "conflicts with the current state"},
    [GF_ERR_OVERLOADED] = {"GF_ERR_OVERLOADED", "overloaded: retry later"},
    [GF_ERR_DEADLINE] = {"GF_ERR_DEADLINE", "the request's deadline passed"},
};

const char *gf_strerror(gf_status code)
{
    if ((unsigned)code >= GF_STATUS_COUNT_)
        return "unknown error";
    return gf_status_table[code].text;
}

const char *gf_status_name(gf_status code)
{
    if ((unsigned)code >= GF_STATUS_COUNT_)
        return "GF_ERR_UNKNOWN";
    return gf_status_table[code].name;
}

void gf_err_clear(gf_err *err)
{
    if (err == NULL)
        return;
    err->code = GF_OK;
    err->msg[0] = '\0';
}

gf_status gf_err_setv(gf_err *err, gf_status code, const char *fmt, va_list ap)
{
    if (err == NULL)
        return code;
    err->code = code;
    if (fmt == NULL) {
        err->msg[0] = '\0';
        return code;
    }
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    return code;
}

gf_status gf_err_set(gf_err *err, gf_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gf_err_setv(err, code, fmt, ap);
    va_end(ap);
    return code;
}

gf_status gf_err_prefix(gf_err *err, const char *fmt, ...)
{
    if (err == NULL)
        return GF_OK;
    char old[GF_ERR_MSG_MAX];
    const char *prev = gf_err_msg(err);
    size_t old_len = strlen(prev);
    if (old_len >= sizeof old)
        old_len = sizeof old - 1;
    memcpy(old, prev, old_len);
    old[old_len] = '\0';
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    size_t used = n < 0 ? 0 : (size_t)n;
    if (used > sizeof err->msg - 1)
        used = sizeof err->msg - 1;
    const char *parts[2] = {": ", old};
    for (int i = 0; i < 2; i++) {
        size_t len = strlen(parts[i]);
        size_t room = sizeof err->msg - 1 - used;
        if (len > room)
            len = room;
        memcpy(err->msg + used, parts[i], len);
        used += len;
    }
    err->msg[used] = '\0';
    return err->code;
}

const char *gf_err_msg(const gf_err *err)
{
    if (err->msg[0] != '\0')
        return err->msg;
    return gf_strerror(err->code);
}
