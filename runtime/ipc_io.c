/* gpufaas — the worker protocol: reading and writing frames on a stream
 * socket (ipc.h); the codec is in ipc.c. */
#include "ipc.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/clock.h"

#define GF_IPC_RBUF (64u << 10) /* read-ahead */

/* ---- reading frames ---------------------------------------------------------------- */

gf_status gf_ipc_reader_init(gf_ipc_reader *r, int fd, uint64_t max_frame, gf_err *err)
{
    memset(r, 0, sizeof *r);
    r->fd = fd;
    r->max_frame = max_frame != 0 ? max_frame : GF_IPC_DEFAULT_MAX_FRAME;
    r->rcap = GF_IPC_RBUF;
    r->rbuf = malloc(r->rcap);
    if (r->rbuf == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory for a frame reader");
    return GF_OK;
}

void gf_ipc_reader_deinit(gf_ipc_reader *r)
{
    if (r == NULL)
        return;
    free(r->rbuf);
    gf_ipc_frame_deinit(&r->cur);
    memset(r, 0, sizeof *r);
    r->fd = -1;
}

/* readv(2) of n iovecs; GF_OK with *got > 0, or BUSY / CLOSED (end of stream) / IO. */
static gf_status readv_some(int fd, const struct iovec *iov, int n, size_t *got, gf_err *err)
{
    for (;;) {
        ssize_t k = readv(fd, iov, n);
        if (k > 0) {
            *got = (size_t)k;
            return GF_OK;
        }
        if (k == 0)
            return GF_ERR_CLOSED;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return GF_ERR_BUSY;
        if (errno == ECONNRESET)
            return GF_ERR_CLOSED;
        return gf_err_set(err, GF_ERR_IO, "read(fd %d): %s", fd, strerror(errno));
    }
}

/* read(2) into dst, as readv_some. */
static gf_status read_some(int fd, void *dst, size_t cap, size_t *got, gf_err *err)
{
    struct iovec one = {dst, cap};
    return readv_some(fd, &one, 1, got, err);
}

/* A payload buffer of size bytes for a frame of type (r->pa, else
 * posix_memalign); NULL when there is no memory. */
static void *payload_alloc(gf_ipc_reader *r, uint32_t type, uint64_t size)
{
    if (size > SIZE_MAX)
        return NULL;
    if (r->pa.alloc != NULL)
        return r->pa.alloc(r->pa.ctx, type, (size_t)size);
    void *p = NULL;
    return posix_memalign(&p, 64, (size_t)size) == 0 ? p : NULL;
}

/* Refill the (empty) read-ahead buffer. */
static gf_status fill(gf_ipc_reader *r, gf_err *err)
{
    r->rpos = r->rlen = 0;
    size_t got = 0;
    gf_status st = read_some(r->fd, r->rbuf, r->rcap, &got, err);
    if (st == GF_OK)
        r->rlen = got;
    return st;
}

static gf_status reader_fatal(gf_ipc_reader *r, gf_status st)
{
    r->broken = st;
    return st;
}

gf_status gf_ipc_reader_next(gf_ipc_reader *r, gf_ipc_frame *f, gf_err *err)
{
    memset(f, 0, sizeof *f);
    if (r->broken != GF_OK)
        return gf_err_set(err, r->broken, "the stream already failed: %s", gf_strerror(r->broken));
    for (;;) {
        size_t avail = r->rlen - r->rpos;
        if (r->discard > 0) { /* skipping a payload we could not allocate */
            size_t take = avail < r->discard ? avail : (size_t)r->discard;
            r->rpos += take;
            r->discard -= take;
            if (r->discard == 0)
                continue;
            gf_status st = fill(r, err);
            if (st == GF_ERR_CLOSED)
                return reader_fatal(
                    r, gf_err_set(err, GF_ERR_PROTOCOL, "end of stream inside a frame's payload"));
            if (st != GF_OK)
                return st == GF_ERR_BUSY ? st : reader_fatal(r, st);
            continue;
        }
        if (!r->in_payload) {
            size_t take = GF_IPC_HEADER_SIZE - r->hdr_fill;
            if (take > avail)
                take = avail;
            memcpy(r->hdr + r->hdr_fill, r->rbuf + r->rpos, take);
            r->hdr_fill += take;
            r->rpos += take;
            if (r->hdr_fill < GF_IPC_HEADER_SIZE) {
                /* nothing buffered: the header alone, so that its payload
                 * can be read straight into place */
                size_t got = 0;
                gf_status st = read_some(r->fd, r->hdr + r->hdr_fill,
                                         GF_IPC_HEADER_SIZE - r->hdr_fill, &got, err);
                if (st == GF_OK)
                    r->hdr_fill += got;
                if (st == GF_ERR_CLOSED) {
                    if (r->hdr_fill == 0)
                        return reader_fatal(r, gf_err_set(err, GF_ERR_CLOSED, "end of stream"));
                    return reader_fatal(
                        r, gf_err_set(err, GF_ERR_PROTOCOL,
                                      "end of stream after %zu of the %d bytes of a header",
                                      r->hdr_fill, GF_IPC_HEADER_SIZE));
                }
                if (st != GF_OK)
                    return st == GF_ERR_BUSY ? st : reader_fatal(r, st);
                continue;
            }
            gf_ipc_header h;
            gf_status st = gf_ipc_header_parse(r->hdr, r->max_frame, &h, err);
            r->hdr_fill = 0;
            if (st != GF_OK) {
                f->h = h;
                if (st == GF_ERR_PROTOCOL && gf_ipc_msg_info_of(h.type) == NULL)
                    f->h.type = 0; /* not even the type is known */
                return reader_fatal(r, st);
            }
            r->cur.h = h;
            r->fill = 0;
            if (h.payload_len > 0) {
                void *p = payload_alloc(r, h.type, h.payload_len);
                if (p == NULL) {
                    f->h = h;
                    r->discard = h.payload_len;
                    return gf_err_set(err, GF_ERR_NOMEM,
                                      "%s frame: out of memory for %llu payload bytes",
                                      gf_ipc_type_name(h.type), (unsigned long long)h.payload_len);
                }
                r->cur.payload = p;
                r->cur.free_fn = r->pa.alloc != NULL ? r->pa.free : NULL;
                r->cur.free_ctx = r->pa.ctx;
            }
            r->in_payload = true;
        }
        avail = r->rlen - r->rpos; /* the header may have used some */
        uint64_t left = r->cur.h.payload_len - r->fill;
        size_t take = avail < left ? avail : (size_t)left;
        if (take > 0) {
            memcpy(r->cur.payload + r->fill, r->rbuf + r->rpos, take);
            r->cur.copied += take;
            r->rpos += take;
            r->fill += take;
            left -= take;
        }
        if (left == 0) {
            *f = r->cur;
            memset(&r->cur, 0, sizeof r->cur);
            r->in_payload = false;
            return GF_OK;
        }
        /* the read-ahead is empty: read straight into the payload, and the
         * next frame's header (no more) into the read-ahead, so that its
         * payload too is read straight into place however frames queue up
         * (a STATS frame just before a RESULT once cost the RESULT a copy):
         * one readv per frame, no payload byte copied */
        size_t got = 0;
        size_t want = left > ((size_t)1 << 30) ? ((size_t)1 << 30) : (size_t)left;
        struct iovec iov[2] = {{r->cur.payload + r->fill, want},
                               {r->rbuf, GF_IPC_HEADER_SIZE}};
        r->rpos = r->rlen = 0;
        gf_status st = readv_some(r->fd, iov, want == left ? 2 : 1, &got, err);
        if (st == GF_OK) {
            size_t into = got < want ? got : want;
            r->fill += into;
            r->rlen = got - into;
        }
        if (st == GF_ERR_CLOSED) {
            f->h = r->cur.h;
            return reader_fatal(
                r, gf_err_set(err, GF_ERR_PROTOCOL,
                              "end of stream after %llu of the %llu payload bytes of a %s frame",
                              (unsigned long long)r->fill, (unsigned long long)r->cur.h.payload_len,
                              gf_ipc_type_name(r->cur.h.type)));
        }
        if (st != GF_OK)
            return st == GF_ERR_BUSY ? st : reader_fatal(r, st);
    }
}

/* Wait for events on fd until deadline (ms; < 0 forever). */
static gf_status wait_fd(int fd, short events, int64_t deadline, gf_err *err)
{
    for (;;) {
        int timeout = -1;
        if (deadline >= 0) {
            int64_t left = deadline - (int64_t)(gf_mono_ns() / 1000000u);
            if (left <= 0)
                return gf_err_set(err, GF_ERR_TIMEOUT, "timed out waiting on fd %d", fd);
            timeout = left > 1000000 ? 1000000 : (int)left;
        }
        struct pollfd p = {fd, events, 0};
        int n = poll(&p, 1, timeout);
        if (n > 0)
            return GF_OK;
        if (n < 0 && errno != EINTR)
            return gf_err_set(err, GF_ERR_IO, "poll(fd %d): %s", fd, strerror(errno));
    }
}

gf_status gf_ipc_read_frame(gf_ipc_reader *r, gf_ipc_frame *f, int timeout_ms, gf_err *err)
{
    int64_t deadline = timeout_ms < 0 ? -1 : (int64_t)(gf_mono_ns() / 1000000u) + timeout_ms;
    for (;;) {
        gf_status st = gf_ipc_reader_next(r, f, err);
        if (st != GF_ERR_BUSY)
            return st;
        if ((st = wait_fd(r->fd, POLLIN, deadline, err)) != GF_OK)
            return st;
    }
}

/* ---- writing ------------------------------------------------------------------------- */

/* The iovecs of iov[0, n) from byte `skip` on, at most cap of them, in out. */
static int iov_window(const struct iovec *iov, int n, size_t skip, struct iovec *out, int cap)
{
    int k = 0;
    for (int i = 0; i < n && k < cap; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        out[k].iov_base = (char *)iov[i].iov_base + skip;
        out[k].iov_len = iov[i].iov_len - skip;
        skip = 0;
        k++;
    }
    return k;
}

#define GF_IPC_IOV_BATCH 64 /* iovecs per sendmsg */

static gf_status writev_flags(int fd, const struct iovec *iov, int n, size_t *written, int flags,
                              gf_err *err)
{
    struct iovec win[GF_IPC_IOV_BATCH];
    for (;;) {
        int k = iov_window(iov, n, *written, win, GF_IPC_IOV_BATCH);
        if (k == 0)
            return GF_OK;
        struct msghdr mh = {.msg_iov = win, .msg_iovlen = (size_t)k};
        ssize_t got = sendmsg(fd, &mh, MSG_NOSIGNAL | flags);
        if (got < 0 && errno == ENOTSOCK)
            got = writev(fd, win, k);
        if (got >= 0) {
            *written += (size_t)got;
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return GF_ERR_BUSY;
        if (errno == EPIPE || errno == ECONNRESET)
            return gf_err_set(err, GF_ERR_CLOSED, "write(fd %d): the peer is gone (%s)", fd,
                              strerror(errno));
        return gf_err_set(err, GF_ERR_IO, "write(fd %d): %s", fd, strerror(errno));
    }
}

gf_status gf_ipc_writev_some(int fd, const struct iovec *iov, int n, size_t *written, gf_err *err)
{
    return writev_flags(fd, iov, n, written, 0, err);
}

gf_status gf_ipc_writev_now(int fd, const struct iovec *iov, int n, size_t *written, gf_err *err)
{
    return writev_flags(fd, iov, n, written, MSG_DONTWAIT, err);
}

gf_status gf_ipc_writev_all(int fd, const struct iovec *iov, int n, int timeout_ms, gf_err *err)
{
    int64_t deadline = timeout_ms < 0 ? -1 : (int64_t)(gf_mono_ns() / 1000000u) + timeout_ms;
    size_t written = 0;
    for (;;) {
        gf_status st = gf_ipc_writev_some(fd, iov, n, &written, err);
        if (st != GF_ERR_BUSY)
            return st;
        if ((st = wait_fd(fd, POLLOUT, deadline, err)) != GF_OK)
            return st;
    }
}

/* The whole-buffer forms are the gathered ones with a single iovec. */
gf_status gf_ipc_write_some(int fd, const void *data, size_t len, size_t *written, gf_err *err)
{
    struct iovec one = {(void *)data, len};
    return gf_ipc_writev_some(fd, &one, 1, written, err);
}

gf_status gf_ipc_write_all(int fd, const void *data, size_t len, int timeout_ms, gf_err *err)
{
    struct iovec one = {(void *)data, len};
    return gf_ipc_writev_all(fd, &one, 1, timeout_ms, err);
}
