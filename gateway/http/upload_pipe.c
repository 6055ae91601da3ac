/* gpufaas — the pipeline that hashes and writes an upload's main file part
 * (gateway/http). */
#include "gateway/http/upload_pipe.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"

/* Without O_DIRECT, written bytes are handed to the kernel's writeback this
 * often (sync_file_range), so the fsync at the end has little left to wait for. */
#define KICK ((uint64_t)32 << 20)

/* Where a buffer is: the request thread's (filling or free), or the
 * writer's (waiting for it or being written). Both take the buffers in ring
 * order. */
enum { SLOT_FREE, SLOT_FULL };

struct gf_upipe {
    int fd;
    const char *path;
    gf_sha256 *sha;
    char *buf[GF_UPIPE_BUFS];
    size_t len[GF_UPIPE_BUFS];
    int state[GF_UPIPE_BUFS]; /* SLOT_* (mu) */
    int fill;                 /* the buffer being filled (request thread only) */
    pthread_t writer;
    bool writer_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;        /* the writer ends once nothing is left for it (mu) */
    bool failed;      /* the writer failed: its message in fail (mu) */
    gf_err fail;
    bool direct;      /* fd is in O_DIRECT mode (writer only once started) */
    uint64_t written; /* bytes written (writer only) */
    uint64_t kicked;  /* of them, handed to writeback (writer only) */
    uint64_t wait_ns;  /* the request thread waited for a free buffer (request thread) */
    uint64_t write_ns; /* the writer spent in write() (writer; read after the join) */
};

/* Wait under p->mu until buffer i is in state want or the pipe stops.
 * Whether it is. */
static bool wait_for(gf_upipe *p, int i, int want)
{
    while (p->state[i] != want && !p->stop)
        pthread_cond_wait(&p->cv, &p->mu);
    return p->state[i] == want;
}

/* Write through the page cache from now on: for the last, partial buffer,
 * or when the file system refuses an O_DIRECT write. 0, or the errno. */
static int go_buffered(gf_upipe *p)
{
    int fl = fcntl(p->fd, F_GETFL);
    if (fl < 0 || fcntl(p->fd, F_SETFL, fl & ~O_DIRECT) != 0)
        return errno;
    p->direct = false;
    p->kicked = p->written; /* what went directly is on the disk already */
    return 0;
}

/* Write size bytes at the end of the file, directly while the size and the
 * offset allow it. 0, or the errno. */
static int write_out(gf_upipe *p, const char *data, size_t size)
{
    while (size > 0) {
        int e;
        if (p->direct && (size % GF_UPIPE_ALIGN != 0 || p->written % GF_UPIPE_ALIGN != 0) &&
            (e = go_buffered(p)) != 0)
            return e;
        ssize_t n = write(p->fd, data, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EINVAL && p->direct) {
            if ((e = go_buffered(p)) != 0)
                return e;
            continue;
        }
        if (n <= 0)
            return n < 0 ? errno : EIO;
        data += n;
        size -= (size_t)n;
        p->written += (uint64_t)n;
    }
    if (!p->direct && p->written - p->kicked >= KICK) {
        /* start the writeback of what is written (no waiting) */
        (void)sync_file_range(p->fd, (off_t)p->kicked, (off_t)(p->written - p->kicked),
                              SYNC_FILE_RANGE_WRITE);
        p->kicked = p->written;
    }
    return 0;
}

/* The writer thread (arg is the pipe): write each full buffer in ring order
 * until stopped. The first failure is kept; the buffers after it are passed over (freed,
 * not written), so the request thread never waits for ever. */
static void *writer_main(void *arg)
{
    gf_upipe *p = arg;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; wait_for(p, i, SLOT_FULL); i = (i + 1) % GF_UPIPE_BUFS) {
        bool skip = p->failed;
        pthread_mutex_unlock(&p->mu);
        uint64_t t0 = gf_mono_ns();
        int e = skip ? 0 : write_out(p, p->buf[i], p->len[i]);
        p->write_ns += gf_mono_ns() - t0;
        pthread_mutex_lock(&p->mu);
        if (e != 0 && !p->failed) {
            p->failed = true;
            GF_LOG_E("write(%s) failed: %s", p->path, strerror(e));
            gf_err_set(&p->fail, e == ENOSPC || e == EDQUOT ? GF_ERR_NO_SPACE : GF_ERR_IO,
                       "cannot stage the upload: %s", strerror(e));
        }
        p->len[i] = 0;
        p->state[i] = SLOT_FREE;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

gf_status gf_upipe_start(int fd, const char *path, gf_sha256 *sha, gf_upipe **out, gf_err *err)
{
    gf_upipe *p = calloc(1, sizeof *p);
    if (p == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory for the upload's buffers");
    p->fd = fd;
    p->path = path;
    p->sha = sha;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    for (int i = 0; i < GF_UPIPE_BUFS; i++) {
        void *b;
        if (posix_memalign(&b, GF_UPIPE_ALIGN, GF_UPIPE_CHUNK) != 0) {
            gf_upipe_free(p);
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory for the upload's buffers");
        }
        p->buf[i] = b;
    }
    int fl = fcntl(fd, F_GETFL);
    p->direct = fl >= 0 && fcntl(fd, F_SETFL, fl | O_DIRECT) == 0;
    if (!p->direct)
        GF_LOG_D("%s: no O_DIRECT here (%s): writing through the page cache", path,
                 strerror(errno));
    int rc = pthread_create(&p->writer, NULL, writer_main, p);
    if (rc != 0) {
        gf_upipe_free(p);
        return gf_err_set(err, GF_ERR_NOMEM, "cannot start the upload's writer: %s",
                          strerror(rc));
    }
    p->writer_started = true;
    *out = p;
    return GF_OK;
}

/* Hand the buffer being filled over (when it holds anything) and wait until
 * the next one is free. The writer's failure, if any. */
static gf_status hand_over(gf_upipe *p, gf_err *err)
{
    pthread_mutex_lock(&p->mu);
    if (p->len[p->fill] > 0) {
        p->state[p->fill] = SLOT_FULL;
        pthread_cond_broadcast(&p->cv);
        p->fill = (p->fill + 1) % GF_UPIPE_BUFS;
    }
    uint64_t t0 = gf_mono_ns();
    while (p->state[p->fill] != SLOT_FREE && !p->failed)
        pthread_cond_wait(&p->cv, &p->mu);
    p->wait_ns += gf_mono_ns() - t0;
    gf_status st = GF_OK;
    if (p->failed)
        st = gf_err_set(err, p->fail.code, "%s", p->fail.msg);
    pthread_mutex_unlock(&p->mu);
    return st;
}

gf_status gf_upipe_put(gf_upipe *p, const char *data, size_t size, gf_err *err)
{
    gf_sha256_update(p->sha, data, size);
    while (size > 0) {
        int f = p->fill;
        size_t room = GF_UPIPE_CHUNK - p->len[f];
        size_t n = size < room ? size : room;
        memcpy(p->buf[f] + p->len[f], data, n);
        p->len[f] += n;
        data += n;
        size -= n;
        if (p->len[f] == GF_UPIPE_CHUNK) {
            gf_status st = hand_over(p, err);
            if (st != GF_OK)
                return st;
        }
    }
    return GF_OK;
}

/* Stop and join the writer. */
static void stop_writer(gf_upipe *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (p->writer_started)
        pthread_join(p->writer, NULL);
    p->writer_started = false;
}

gf_status gf_upipe_finish(gf_upipe *p, gf_err *err)
{
    gf_status st = hand_over(p, err);
    /* every buffer comes back free, failed or not (the writer passes them over) */
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < GF_UPIPE_BUFS; i++)
        while (p->state[i] != SLOT_FREE)
            pthread_cond_wait(&p->cv, &p->mu);
    if (st == GF_OK && p->failed)
        st = gf_err_set(err, p->fail.code, "%s", p->fail.msg);
    pthread_mutex_unlock(&p->mu);
    stop_writer(p);
    /* which side bounded the upload: the disk (the request thread waited for
     * the writer) or the receiving and hashing */
    GF_LOG_D("%s: %llu bytes written: the writer spent %.3f s in write(), the request thread "
             "%.3f s waiting for it", p->path, (unsigned long long)p->written,
             (double)p->write_ns / 1e9, (double)p->wait_ns / 1e9);
    return st;
}

void gf_upipe_free(gf_upipe *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->failed = true; /* what is pending is not written */
    pthread_mutex_unlock(&p->mu);
    stop_writer(p);
    for (int i = 0; i < GF_UPIPE_BUFS; i++)
        free(p->buf[i]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
