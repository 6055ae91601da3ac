/* gpufaas — the deploy upload, streamed to disk (gateway/http). */
#include "gateway/http/upload.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/log.h"
#include "core/sha256.h"
#include "core/tensor.h"
#include "functions/manifest.h"

struct gf_upload {
    char *dir;            /* staging directory (owned copy) */
    uint64_t max_weights; /* 0 = unlimited */
    gf_buf manifest;      /* the manifest part */
    bool have_manifest;   /* a manifest part started */
    char *path;           /* staged weights file; NULL until weights arrive */
    int fd;               /* open staged file, -1 when closed */
    bool owns_file;       /* free() removes path */
    bool have_weights;    /* a weights part started */
    uint64_t bytes;       /* weights bytes received */
    gf_sha256 sha;        /* running digest of the weights */
    char hex[GF_SHA256_HEX_LEN];
    bool finished;   /* gf_upload_finish succeeded */
    bool failed;     /* a failure is recorded below */
    gf_err fail;     /* its message */
};

gf_status gf_upload_new(const char *dir, uint64_t max_weights, gf_upload **out, gf_err *err)
{
    gf_upload *u = calloc(1, sizeof *u);
    if (u == NULL || (u->dir = strdup(dir)) == NULL) {
        free(u);
        return gf_err_set(err, GF_ERR_NOMEM, "%s: out of memory", __func__);
    }
    u->max_weights = max_weights;
    u->fd = -1;
    gf_buf_init(&u->manifest);
    u->manifest.limit = GF_MANIFEST_MAX_BYTES;
    gf_sha256_init(&u->sha);
    *out = u;
    return GF_OK;
}

void gf_upload_free(gf_upload *u)
{
    if (u == NULL)
        return;
    if (u->fd >= 0)
        close(u->fd);
    if (u->path != NULL && u->owns_file && unlink(u->path) != 0 && errno != ENOENT)
        GF_LOG_W("unlink(%s) failed: %s", u->path, strerror(errno));
    free(u->path);
    free(u->dir);
    gf_buf_deinit(&u->manifest);
    free(u);
}

gf_status gf_upload_fail(gf_upload *u, gf_status code, const char *msg)
{
    if (!u->failed) {
        u->failed = true;
        gf_err_set(&u->fail, code, "%s", msg);
    }
    return u->fail.code;
}

static gf_status upload_failf(gf_upload *u, gf_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static gf_status upload_failf(gf_upload *u, gf_status code, const char *fmt, ...)
{
    if (!u->failed) {
        va_list ap;
        va_start(ap, fmt);
        gf_err_setv(&u->fail, code, fmt, ap);
        va_end(ap);
        u->failed = true;
    }
    return u->fail.code;
}

static gf_status upload_open(gf_upload *u)
{
    size_t n = strlen(u->dir) + sizeof "/upload-XXXXXX.part";
    u->path = malloc(n);
    if (u->path == NULL)
        return upload_failf(u, GF_ERR_NOMEM, "out of memory");
    snprintf(u->path, n, "%s/upload-XXXXXX.part", u->dir);
    u->fd = mkostemps(u->path, 5, O_CLOEXEC);
    if (u->fd < 0) {
        int e = errno;
        GF_LOG_E("mkostemps(%s) failed: %s", u->path, strerror(e));
        free(u->path);
        u->path = NULL;
        return upload_failf(u, e == ENOSPC ? GF_ERR_NO_SPACE : GF_ERR_IO,
                            "cannot stage the upload: %s", strerror(e));
    }
    u->owns_file = true;
    return GF_OK;
}

static gf_status upload_write(gf_upload *u, const char *data, size_t size)
{
    while (size > 0) {
        ssize_t w = write(u->fd, data, size);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            GF_LOG_E("write(%s) failed: %s", u->path, strerror(e));
            return upload_failf(u, e == ENOSPC || e == EDQUOT ? GF_ERR_NO_SPACE : GF_ERR_IO,
                                "cannot stage the upload: %s", strerror(e));
        }
        data += w;
        size -= (size_t)w;
    }
    return GF_OK;
}

gf_status gf_upload_feed(gf_upload *u, const char *key, const char *data, uint64_t off, size_t size)
{
    if (u->failed)
        return u->fail.code;
    if (u->finished)
        return upload_failf(u, GF_ERR_FORMAT, "data after the end of the upload");
    if (key != NULL && strcmp(key, "manifest") == 0) {
        if (off == 0 && u->manifest.len > 0)
            return upload_failf(u, GF_ERR_INVALID, "form field 'manifest' given twice");
        if (off != u->manifest.len)
            return upload_failf(u, GF_ERR_FORMAT,
                                "form field 'manifest' arrived out of order");
        u->have_manifest = true;
        gf_status st = gf_buf_append(&u->manifest, data, size);
        if (st == GF_ERR_TOO_LARGE)
            return upload_failf(u, GF_ERR_TOO_LARGE,
                                "form field 'manifest' is larger than %u bytes",
                                (unsigned)GF_MANIFEST_MAX_BYTES);
        if (st != GF_OK)
            return upload_failf(u, st, "out of memory");
        return GF_OK;
    }
    if (key != NULL && strcmp(key, "weights") == 0) {
        if (off == 0 && u->bytes > 0)
            return upload_failf(u, GF_ERR_INVALID, "form field 'weights' given twice");
        if (off != u->bytes)
            return upload_failf(u, GF_ERR_FORMAT, "form field 'weights' arrived out of order");
        u->have_weights = true;
        uint64_t total;
        if (!gf_u64_add(u->bytes, size, &total) || (u->max_weights != 0 && total > u->max_weights))
            return upload_failf(u, GF_ERR_TOO_LARGE,
                                "form field 'weights' is larger than the upload limit of %" PRIu64
                                " bytes",
                                u->max_weights);
        if (u->fd < 0 && upload_open(u) != GF_OK)
            return u->fail.code;
        if (size == 0)
            return GF_OK;
        if (upload_write(u, data, size) != GF_OK)
            return u->fail.code;
        gf_sha256_update(&u->sha, data, size);
        u->bytes = total;
        return GF_OK;
    }
    return upload_failf(u, GF_ERR_INVALID,
                        "unexpected form field '%.64s' (expected 'manifest' and 'weights')",
                        key != NULL ? key : "");
}

enum MHD_Result gf_upload_iter(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *filename, const char *content_type,
                               const char *transfer_encoding, const char *data, uint64_t off,
                               size_t size)
{
    (void)kind;
    (void)filename;
    (void)content_type;
    (void)transfer_encoding;
    return gf_upload_feed(cls, key, data, off, size) == GF_OK ? MHD_YES : MHD_NO;
}

gf_status gf_upload_finish(gf_upload *u, gf_err *err)
{
    if (!u->failed && !u->have_manifest)
        upload_failf(u, GF_ERR_INVALID,
                     "missing form field 'manifest' (send -F manifest=@m.json)");
    if (!u->failed && !u->have_weights)
        upload_failf(u, GF_ERR_INVALID,
                     "missing form field 'weights' (send -F weights=@model.safetensors)");
    if (!u->failed && fsync(u->fd) != 0) {
        GF_LOG_E("fsync(%s) failed: %s", u->path, strerror(errno));
        upload_failf(u, GF_ERR_IO, "cannot stage the upload: %s", strerror(errno));
    }
    if (!u->failed) {
        int fd = u->fd;
        u->fd = -1;
        if (close(fd) != 0) {
            GF_LOG_E("close(%s) failed: %s", u->path, strerror(errno));
            upload_failf(u, GF_ERR_IO, "cannot stage the upload: %s", strerror(errno));
        }
    }
    if (u->failed)
        return gf_err_set(err, u->fail.code, "%s", u->fail.msg);
    unsigned char d[GF_SHA256_LEN];
    gf_sha256_final(&u->sha, d);
    gf_sha256_hex(d, u->hex);
    u->finished = true;
    return GF_OK;
}

const char *gf_upload_manifest(const gf_upload *u, size_t *len)
{
    *len = u->manifest.len;
    return u->manifest.data != NULL ? u->manifest.data : "";
}

const char *gf_upload_path(const gf_upload *u)
{
    return u->path;
}

const char *gf_upload_sha256(const gf_upload *u)
{
    return u->hex;
}

uint64_t gf_upload_bytes(const gf_upload *u)
{
    return u->bytes;
}

void gf_upload_release(gf_upload *u)
{
    u->owns_file = false;
}
