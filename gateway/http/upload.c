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
#include "core/tensor.h"
#include "functions/manifest.h"
#include "gateway/http/upload_pipe.h"
#include "store/sha256.h"

/* A file part staged on disk. */
typedef struct {
    char *path;     /* NULL until its first bytes arrive */
    int fd;         /* open staged file, -1 when closed */
    bool owns_file; /* free() removes path */
    bool started;   /* the part started */
    uint64_t bytes; /* received */
} staged;

struct gf_upload {
    char *dir;            /* staging directory (owned copy) */
    uint64_t max_weights; /* 0 = unlimited; the file parts together */
    gf_buf manifest;      /* the manifest part */
    bool have_manifest;   /* a manifest part started */
    gf_buf name;          /* the name part (model uploads) */
    bool have_name;
    const char *file_part; /* "weights" or "model": the one that came, NULL before */
    staged file;           /* it, staged */
    staged data;           /* "model_data", staged */
    gf_sha256 sha;         /* running digest of the file part (the pipe's while it runs) */
    gf_upipe *pipe;        /* hashes and writes the file part; NULL before it and after */
    char hex[GF_SHA256_HEX_LEN];
    bool finished;   /* gf_upload_finish succeeded */
    bool failed;     /* a failure is recorded below */
    gf_err fail;     /* its code and message */
};

/* The longest name part accepted (a function name is far shorter). */
#define NAME_PART_MAX 256

gf_status gf_upload_new(const char *dir, uint64_t max_weights, gf_upload **out, gf_err *err)
{
    gf_upload *u = calloc(1, sizeof *u);
    if (u == NULL || (u->dir = strdup(dir)) == NULL) {
        free(u);
        return gf_err_set(err, GF_ERR_NOMEM, "%s: out of memory", __func__);
    }
    u->max_weights = max_weights;
    u->file.fd = u->data.fd = -1;
    gf_buf_init(&u->manifest);
    u->manifest.limit = GF_MANIFEST_MAX_BYTES;
    gf_buf_init(&u->name);
    u->name.limit = NAME_PART_MAX;
    gf_status st = gf_sha256_init(&u->sha, err);
    if (st != GF_OK) {
        gf_upload_free(u);
        return st;
    }
    *out = u;
    return GF_OK;
}

static void staged_free(staged *f)
{
    if (f->fd >= 0)
        close(f->fd);
    if (f->path != NULL && f->owns_file && unlink(f->path) != 0 && errno != ENOENT)
        GF_LOG_W("unlink(%s) failed: %s", f->path, strerror(errno));
    free(f->path);
}

void gf_upload_free(gf_upload *u)
{
    if (u == NULL)
        return;
    gf_upipe_free(u->pipe); /* before the file it writes is closed */
    staged_free(&u->file);
    staged_free(&u->data);
    free(u->dir);
    gf_buf_deinit(&u->manifest);
    gf_buf_deinit(&u->name);
    gf_sha256_deinit(&u->sha);
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

static gf_status upload_open(gf_upload *u, staged *f)
{
    size_t n = strlen(u->dir) + sizeof "/upload-XXXXXX.part";
    f->path = malloc(n);
    if (f->path == NULL)
        return upload_failf(u, GF_ERR_NOMEM, "out of memory");
    snprintf(f->path, n, "%s/upload-XXXXXX.part", u->dir);
    f->fd = mkostemps(f->path, 5, O_CLOEXEC);
    if (f->fd < 0) {
        int e = errno;
        GF_LOG_E("mkostemps(%s) failed: %s", f->path, strerror(e));
        free(f->path);
        f->path = NULL;
        return upload_failf(u, e == ENOSPC ? GF_ERR_NO_SPACE : GF_ERR_IO,
                            "cannot stage the upload: %s", strerror(e));
    }
    f->owns_file = true;
    return GF_OK;
}

static gf_status upload_write(gf_upload *u, staged *f, const char *data, size_t size)
{
    while (size > 0) {
        ssize_t w = write(f->fd, data, size);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            GF_LOG_E("write(%s) failed: %s", f->path, strerror(e));
            return upload_failf(u, e == ENOSPC || e == EDQUOT ? GF_ERR_NO_SPACE : GF_ERR_IO,
                                "cannot stage the upload: %s", strerror(e));
        }
        data += w;
        size -= (size_t)w;
    }
    return GF_OK;
}

/* Start the pipe that hashes and writes the file part (once it is staged). */
static gf_status pipe_start(gf_upload *u)
{
    gf_err e;
    if (gf_upipe_start(u->file.fd, u->file.path, &u->sha, &u->pipe, &e) != GF_OK)
        return upload_failf(u, e.code, "%s", e.msg);
    return GF_OK;
}

/* The file part's last bytes hashed and written, and the pipe's end. */
static void pipe_finish(gf_upload *u)
{
    if (u->pipe == NULL)
        return;
    gf_err e;
    if (!u->failed && gf_upipe_finish(u->pipe, &e) != GF_OK)
        upload_failf(u, e.code, "%s", e.msg);
    gf_upipe_free(u->pipe);
    u->pipe = NULL;
}

/* A text part into b (at most b->limit bytes). */
static gf_status feed_text(gf_upload *u, const char *key, gf_buf *b, bool *have, const char *data,
                           uint64_t off, size_t size)
{
    if (off == 0 && b->len > 0)
        return upload_failf(u, GF_ERR_INVALID, "form field '%s' given twice", key);
    if (off != b->len)
        return upload_failf(u, GF_ERR_FORMAT, "form field '%s' arrived out of order", key);
    *have = true;
    gf_status st = gf_buf_append(b, data, size);
    if (st == GF_ERR_TOO_LARGE)
        return upload_failf(u, GF_ERR_TOO_LARGE, "form field '%s' is larger than %zu bytes",
                            key, b->limit);
    if (st != GF_OK)
        return upload_failf(u, st, "out of memory");
    return GF_OK;
}

/* A file part into f, staged on disk; the main one (hashed) through the
 * writer thread, the others directly. */
static gf_status feed_file(gf_upload *u, const char *key, staged *f, bool hashed,
                           const char *data, uint64_t off, size_t size)
{
    if (off == 0 && f->bytes > 0)
        return upload_failf(u, GF_ERR_INVALID, "form field '%s' given twice", key);
    if (off != f->bytes)
        return upload_failf(u, GF_ERR_FORMAT, "form field '%s' arrived out of order", key);
    f->started = true;
    uint64_t total, all;
    if (!gf_u64_add(f->bytes, size, &total) ||
        !gf_u64_add(u->file.bytes + u->data.bytes, size, &all) ||
        (u->max_weights != 0 && all > u->max_weights))
        return upload_failf(u, GF_ERR_TOO_LARGE,
                            "form field '%s' takes the upload past its limit of %" PRIu64
                            " bytes", key, u->max_weights);
    if (f->fd < 0 && f->path == NULL &&
        (upload_open(u, f) != GF_OK || (hashed && pipe_start(u) != GF_OK)))
        return u->fail.code;
    if (size == 0)
        return GF_OK;
    gf_err e;
    if (hashed && gf_upipe_put(u->pipe, data, size, &e) != GF_OK)
        return upload_failf(u, e.code, "%s", e.msg);
    if (!hashed && upload_write(u, f, data, size) != GF_OK)
        return u->fail.code;
    f->bytes = total;
    return GF_OK;
}

gf_status gf_upload_feed(gf_upload *u, const char *key, const char *data, uint64_t off, size_t size)
{
    if (u->failed)
        return u->fail.code;
    if (u->finished)
        return upload_failf(u, GF_ERR_FORMAT, "data after the end of the upload");
    if (key != NULL && strcmp(key, "manifest") == 0)
        return feed_text(u, key, &u->manifest, &u->have_manifest, data, off, size);
    if (key != NULL && strcmp(key, "name") == 0)
        return feed_text(u, key, &u->name, &u->have_name, data, off, size);
    if (key != NULL && (strcmp(key, "weights") == 0 || strcmp(key, "model") == 0)) {
        const char *part = key[0] == 'w' ? "weights" : "model";
        if (u->file_part != NULL && u->file_part != part)
            return upload_failf(u, GF_ERR_INVALID, "give either the part 'weights' (a "
                                "safetensors file, with a manifest) or the part 'model' (an "
                                "ONNX model), not both");
        u->file_part = part;
        return feed_file(u, part, &u->file, true, data, off, size);
    }
    if (key != NULL && strcmp(key, "model_data") == 0)
        return feed_file(u, "model_data", &u->data, false, data, off, size);
    return upload_failf(u, GF_ERR_INVALID,
                        "unexpected form field '%.64s' (expected 'manifest' and 'weights', or "
                        "'model' with 'name' or 'manifest' and maybe 'model_data')",
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

/* Flush a staged file to disk and close it. */
static void staged_close(gf_upload *u, staged *f)
{
    if (u->failed || f->fd < 0)
        return;
    if (fsync(f->fd) != 0) {
        GF_LOG_E("fsync(%s) failed: %s", f->path, strerror(errno));
        upload_failf(u, GF_ERR_IO, "cannot stage the upload: %s", strerror(errno));
        return;
    }
    int fd = f->fd;
    f->fd = -1;
    if (close(fd) != 0) {
        GF_LOG_E("close(%s) failed: %s", f->path, strerror(errno));
        upload_failf(u, GF_ERR_IO, "cannot stage the upload: %s", strerror(errno));
    }
}

gf_status gf_upload_finish(gf_upload *u, gf_err *err)
{
    bool model = u->file_part != NULL && u->file_part[0] == 'm';
    if (!u->failed && u->file_part == NULL)
        upload_failf(u, GF_ERR_INVALID,
                     "missing form field 'weights' (send -F manifest=@m.json -F "
                     "weights=@model.safetensors) or 'model' (an ONNX model: -F "
                     "model=@model.onnx -F name=NAME)");
    if (!u->failed && !model && !u->have_manifest)
        upload_failf(u, GF_ERR_INVALID,
                     "missing form field 'manifest' (send -F manifest=@m.json)");
    if (!u->failed && !model && u->have_name)
        upload_failf(u, GF_ERR_INVALID, "form field 'name' goes with 'model'; a weights "
                     "deploy names the function in its manifest");
    if (!u->failed && !model && u->data.started)
        upload_failf(u, GF_ERR_INVALID, "form field 'model_data' (a model's external "
                     "data) goes with the part 'model'");
    if (!u->failed && u->have_name && memchr(u->name.data, '\0', u->name.len) != NULL)
        upload_failf(u, GF_ERR_INVALID, "form field 'name' holds a NUL byte");
    /* a part that arrived empty has no staged file yet: make one */
    if (!u->failed && u->file.path == NULL)
        upload_open(u, &u->file);
    if (!u->failed && u->data.started && u->data.path == NULL)
        upload_open(u, &u->data);
    pipe_finish(u);
    staged_close(u, &u->file);
    staged_close(u, &u->data);
    if (u->failed)
        return gf_err_set(err, u->fail.code, "%s", u->fail.msg);
    gf_status st = gf_sha256_final(&u->sha, u->hex, err);
    if (st != GF_OK)
        return st;
    u->finished = true;
    return GF_OK;
}

const char *gf_upload_manifest(const gf_upload *u, size_t *len)
{
    *len = u->manifest.len;
    if (!u->have_manifest)
        return NULL;
    return u->manifest.data != NULL ? u->manifest.data : "";
}

const char *gf_upload_name(const gf_upload *u)
{
    return u->have_name ? (u->name.data != NULL ? u->name.data : "") : NULL;
}

bool gf_upload_is_model(const gf_upload *u)
{
    return u->file_part != NULL && u->file_part[0] == 'm';
}

const char *gf_upload_path(const gf_upload *u)
{
    return u->file.path;
}

const char *gf_upload_data_path(const gf_upload *u)
{
    return u->data.path;
}

const char *gf_upload_sha256(const gf_upload *u)
{
    return u->hex;
}

uint64_t gf_upload_bytes(const gf_upload *u)
{
    return u->file.bytes;
}

void gf_upload_release(gf_upload *u)
{
    u->file.owns_file = false;
    u->data.owns_file = false;
}
