/* gpufaas — the deploy upload, streamed to disk (gateway/http). */
#include "gateway/http/upload.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/log.h"
#include "core/tensor.h"
#include "functions/manifest.h"
#include "store/sha256.h"

/* The main file part is copied into buffers of this size; a full one is
 * written and hashed by the upload's writer thread while the request's
 * thread fills the other, so receiving overlaps writing and hashing. */
#define GF_UPLOAD_CHUNK ((size_t)4 << 20)
/* Written bytes are handed to the kernel's writeback this often
 * (sync_file_range), so the fsync at the end has little left to wait for. */
#define GF_UPLOAD_KICK ((uint64_t)32 << 20)

/* The writer of the main file part: buf[fill] is the request thread's,
 * buf[1 - fill] the writer's while pending. */
typedef struct {
    char *buf[2];
    size_t len[2];
    int fill;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool pending;     /* buf[1 - fill] waits for (or is in) the writer (mu) */
    bool stop;        /* exit once nothing is pending (mu) */
    bool failed;      /* the writer failed: its message in fail (mu) */
    gf_err fail;
    uint64_t written; /* bytes written (writer only) */
    uint64_t kicked;  /* of them, handed to writeback (writer only) */
} writer;

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
    gf_sha256 sha;         /* running digest of the file part (the writer's) */
    writer w;              /* writes and hashes the file part */
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
    pthread_mutex_init(&u->w.mu, NULL);
    pthread_cond_init(&u->w.cv, NULL);
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

static void writer_stop(gf_upload *u);

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
    writer_stop(u);
    free(u->w.buf[0]);
    free(u->w.buf[1]);
    pthread_mutex_destroy(&u->w.mu);
    pthread_cond_destroy(&u->w.cv);
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

/* Write size bytes to fd. 0, or the errno. */
static int write_all(int fd, const char *data, size_t size)
{
    while (size > 0) {
        ssize_t w = write(fd, data, size);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        data += w;
        size -= (size_t)w;
    }
    return 0;
}

/* The writer thread (arg is the upload): write and hash each buffer handed
 * over to the file part, until stopped. The first failure is kept and ends
 * the writing. */
static void *writer_main(void *arg)
{
    gf_upload *u = arg;
    writer *w = &u->w;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->pending && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->pending)
            break; /* stopped, nothing left */
        int k = 1 - w->fill;
        bool skip = w->failed;
        pthread_mutex_unlock(&w->mu);
        int e = skip ? 0 : write_all(u->file.fd, w->buf[k], w->len[k]);
        if (!skip && e == 0) {
            gf_sha256_update(&u->sha, w->buf[k], w->len[k]);
            w->written += w->len[k];
            if (w->written - w->kicked >= GF_UPLOAD_KICK) {
                /* start the writeback of what is written (no waiting) */
                (void)sync_file_range(u->file.fd, (off_t)w->kicked,
                                      (off_t)(w->written - w->kicked), SYNC_FILE_RANGE_WRITE);
                w->kicked = w->written;
            }
        }
        pthread_mutex_lock(&w->mu);
        if (e != 0 && !w->failed) {
            w->failed = true;
            GF_LOG_E("write(%s) failed: %s", u->file.path, strerror(e));
            gf_err_set(&w->fail, e == ENOSPC || e == EDQUOT ? GF_ERR_NO_SPACE : GF_ERR_IO,
                       "cannot stage the upload: %s", strerror(e));
        }
        w->len[k] = 0;
        w->pending = false;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Hand the buffer being filled to the writer (waiting while it still writes
 * the other) and take the other one. Fails with the writer's failure. */
static gf_status writer_handoff(gf_upload *u)
{
    writer *w = &u->w;
    pthread_mutex_lock(&w->mu);
    while (w->pending)
        pthread_cond_wait(&w->cv, &w->mu);
    if (w->failed) {
        pthread_mutex_unlock(&w->mu);
        return upload_failf(u, w->fail.code, "%s", w->fail.msg);
    }
    if (w->len[w->fill] > 0) {
        w->fill = 1 - w->fill;
        w->pending = true;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return GF_OK;
}

/* Start the writer with its two buffers (once the file part is staged). */
static gf_status writer_start(gf_upload *u)
{
    writer *w = &u->w;
    w->buf[0] = malloc(GF_UPLOAD_CHUNK);
    w->buf[1] = malloc(GF_UPLOAD_CHUNK);
    if (w->buf[0] == NULL || w->buf[1] == NULL)
        return upload_failf(u, GF_ERR_NOMEM, "out of memory for the upload's buffers");
    int rc = pthread_create(&w->thread, NULL, writer_main, u);
    if (rc != 0)
        return upload_failf(u, GF_ERR_NOMEM, "cannot start the upload's writer: %s",
                            strerror(rc));
    w->started = true;
    return GF_OK;
}

/* Let the writer finish what is pending and join it. No-op when not started. */
static void writer_stop(gf_upload *u)
{
    writer *w = &u->w;
    if (!w->started)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    w->started = false;
}

/* Copy size bytes of the file part into the writer's buffers, handing full
 * ones over. */
static gf_status writer_put(gf_upload *u, const char *data, size_t size)
{
    writer *w = &u->w;
    while (size > 0) {
        size_t room = GF_UPLOAD_CHUNK - w->len[w->fill];
        size_t n = size < room ? size : room;
        memcpy(w->buf[w->fill] + w->len[w->fill], data, n);
        w->len[w->fill] += n;
        data += n;
        size -= n;
        if (w->len[w->fill] == GF_UPLOAD_CHUNK && writer_handoff(u) != GF_OK)
            return u->fail.code;
    }
    return GF_OK;
}

/* The file part's last bytes to disk, and the writer's end. */
static void writer_finish(gf_upload *u)
{
    if (!u->w.started)
        return;
    if (!u->failed && writer_handoff(u) == GF_OK) {
        writer_stop(u);
        if (u->w.failed)
            upload_failf(u, u->w.fail.code, "%s", u->w.fail.msg);
    }
    writer_stop(u);
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
        (upload_open(u, f) != GF_OK || (hashed && writer_start(u) != GF_OK)))
        return u->fail.code;
    if (size == 0)
        return GF_OK;
    if ((hashed ? writer_put(u, data, size) : upload_write(u, f, data, size)) != GF_OK)
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
    writer_finish(u);
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
