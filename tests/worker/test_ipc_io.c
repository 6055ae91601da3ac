/* gpufaas tests — the worker protocol's frame I/O (runtime/ipc_io.c) on real
 * socket pairs: frames arriving in fragments, truncated streams, the size
 * limit, and the writer's partial writes. Part of worker_ipc (test_ipc.c). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/tensor.h"
#include "ipc.h"
#include "ipc_testlib.h"
#include "testutil.h"

static void pair(int sv[2], bool nonblock_reader)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    if (nonblock_reader)
        ck_assert_int_eq(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
}

START_TEST(test_reader_fragments)
{
    int sv[2];
    pair(sv, true);
    gf_buf b;
    gf_buf_init(&b);
    ti_encode_sample_infer(&b, 1);
    ck_assert_int_eq(gf_ipc_encode_empty(&b, GF_IPC_PING, 2, NULL), GF_OK);
    /* a payload bigger than the read-ahead buffer takes the direct path */
    size_t big_n = 300000;
    char *big = malloc(big_n + 1);
    memset(big, 'a', big_n);
    big[big_n] = '\0';
    ck_assert_int_eq(gf_ipc_encode_error(&b, 3, GF_ERR_INVALID, "x", NULL), GF_OK);
    gf_ipc_tensor t = {.name = "blob"};
    gf_tensor_init(&t.t, GF_DT_U8, 1, (int64_t[]){(int64_t)big_n}, big, GF_MEM_HOST, -1, NULL);
    gf_ipc_result r = {0, 2, 0, 0, 0, 1, &t};
    ck_assert_int_eq(gf_ipc_encode_result(&b, 4, &r, NULL), GF_OK);
    gf_ipc_reader rd;
    ck_assert_int_eq(gf_ipc_reader_init(&rd, sv[0], 0, NULL), GF_OK);
    gf_ipc_frame f;
    gf_err e;
    /* one byte at a time for the first frames, then the rest in one go */
    size_t first = 200;
    int got = 0;
    for (size_t i = 0; i < first; i++) {
        ck_assert_int_eq(write(sv[1], b.data + i, 1), 1);
        gf_status st;
        while ((st = gf_ipc_reader_next(&rd, &f, &e)) == GF_OK) {
            got++;
            ck_assert_uint_eq(f.h.request_id, (uint64_t)got);
            gf_ipc_frame_deinit(&f);
        }
        ck_assert_int_eq(st, GF_ERR_BUSY);
    }
    ck_assert_int_ge(got, 2);
    /* the rest does not fit the socket buffer: write and read in turns */
    ck_assert_int_eq(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
    size_t done = first;
    for (long spins = 0; got < 4; spins++) {
        ck_assert_int_lt(spins, 10000000);
        gf_status ws = gf_ipc_write_some(sv[1], b.data, b.len, &done, &e);
        ck_assert(ws == GF_OK || ws == GF_ERR_BUSY);
        gf_status st = gf_ipc_reader_next(&rd, &f, &e);
        if (st == GF_ERR_BUSY)
            continue;
        ck_assert_int_eq(st, GF_OK);
        got++;
        ck_assert_uint_eq(f.h.request_id, (uint64_t)got);
        if (got == 4) {
            gf_ipc_result r2;
            ck_assert_int_eq(gf_ipc_decode_result(&f, &r2, &e), GF_OK);
            ck_assert_uint_eq(r2.t[0].t.nbytes, big_n);
            ck_assert_int_eq(memcmp(r2.t[0].t.data, big, big_n), 0);
            gf_ipc_result_deinit(&r2);
        }
        gf_ipc_frame_deinit(&f);
    }
    ck_assert_uint_eq(done, b.len);
    /* nothing more: a timeout; then end of stream at a boundary */
    ck_assert_int_eq(gf_ipc_read_frame(&rd, &f, 20, &e), GF_ERR_TIMEOUT);
    close(sv[1]);
    ck_assert_int_eq(gf_ipc_read_frame(&rd, &f, 5000, &e), GF_ERR_CLOSED);
    gf_ipc_reader_deinit(&rd);
    close(sv[0]);
    free(big);
    gf_buf_deinit(&b);
}
END_TEST

/* End of stream inside a header or a payload: a protocol error. */
START_TEST(test_reader_truncated)
{
    gf_buf b;
    gf_buf_init(&b);
    ti_encode_sample_infer(&b, 1);
    for (size_t cut = 1; cut < b.len; cut += 3) {
        int sv[2];
        pair(sv, false);
        ck_assert_int_eq(write(sv[1], b.data, cut), (ssize_t)cut);
        close(sv[1]);
        gf_ipc_reader rd;
        ck_assert_int_eq(gf_ipc_reader_init(&rd, sv[0], 0, NULL), GF_OK);
        gf_ipc_frame f;
        gf_err e;
        ck_assert_int_eq(gf_ipc_read_frame(&rd, &f, 5000, &e), GF_ERR_PROTOCOL);
        ck_assert_ptr_nonnull(strstr(e.msg, "end of stream"));
        if (cut >= GF_IPC_HEADER_SIZE)
            ck_assert_uint_eq(f.h.type, GF_IPC_INFER);
        /* the stream stays failed */
        ck_assert_int_eq(gf_ipc_reader_next(&rd, &f, &e), GF_ERR_PROTOCOL);
        gf_ipc_reader_deinit(&rd);
        close(sv[0]);
    }
    gf_buf_deinit(&b);
}
END_TEST

/* A huge length is refused before anything is allocated. */
START_TEST(test_reader_limit)
{
    int sv[2];
    pair(sv, false);
    unsigned char h[GF_IPC_HEADER_SIZE];
    gf_buf b;
    gf_buf_init(&b);
    ck_assert_int_eq(gf_ipc_encode_unload(&b, 9, &(gf_ipc_unload){"k"}, NULL), GF_OK);
    memcpy(h, b.data, sizeof h);
    h[21] = 0x01; /* 2^40 payload bytes */
    ck_assert_int_eq(write(sv[1], h, sizeof h), (ssize_t)sizeof h);
    gf_ipc_reader rd;
    ck_assert_int_eq(gf_ipc_reader_init(&rd, sv[0], 1 << 20, NULL), GF_OK);
    gf_ipc_frame f;
    gf_err e;
    ck_assert_int_eq(gf_ipc_read_frame(&rd, &f, 5000, &e), GF_ERR_TOO_LARGE);
    ck_assert_uint_eq(f.h.request_id, 9);
    ck_assert_ptr_null(f.payload);
    gf_ipc_reader_deinit(&rd);
    close(sv[0]);
    close(sv[1]);
    gf_buf_deinit(&b);
}
END_TEST

START_TEST(test_writer)
{
    int sv[2];
    pair(sv, false);
    ck_assert_int_eq(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
    static char chunk[1 << 16];
    size_t written = 0;
    gf_err e;
    gf_status st = GF_OK;
    /* fill the socket: the non-blocking write reports BUSY */
    for (int i = 0; i < 1000 && st == GF_OK; i++) {
        written = 0;
        st = gf_ipc_write_some(sv[1], chunk, sizeof chunk, &written, &e);
    }
    ck_assert_int_eq(st, GF_ERR_BUSY);
    ck_assert_int_eq(gf_ipc_write_all(sv[1], chunk, sizeof chunk, 20, &e), GF_ERR_TIMEOUT);
    /* the peer goes away: CLOSED, and no SIGPIPE kills us */
    close(sv[0]);
    written = 0;
    ck_assert_int_eq(gf_ipc_write_some(sv[1], chunk, 10, &written, &e), GF_ERR_CLOSED);
    close(sv[1]);
}
END_TEST

/* A payload allocator that counts what it gives and gets back. */
static int pa_live;
static void *pa_alloc(void *ctx, uint32_t type, size_t size)
{
    (void)ctx;
    (void)type;
    void *p = NULL;
    if (posix_memalign(&p, 64, size) != 0)
        return NULL;
    pa_live++;
    return p;
}
static void pa_free(void *ctx, void *p)
{
    (void)ctx;
    pa_live--;
    free(p);
}

/* The gather forms put the same bytes on the wire as the copying encoders,
 * with the tensors' data referenced where it lies (segments that point at
 * it); written with writev and read with a reader whose owner gives the
 * payload buffers, a frame that arrives by itself is read straight into
 * its payload (copied == 0). */
START_TEST(test_gather_writev)
{
    int sv[2];
    pair(sv, false);
    static float x[1000];
    static int32_t m[7];
    for (int i = 0; i < 1000; i++)
        x[i] = (float)i * 0.5f;
    for (int i = 0; i < 7; i++)
        m[i] = -i;
    gf_ipc_tensor t[3] = {{.name = "x"}, {.name = "mask"}, {.name = "empty"}};
    gf_tensor_init(&t[0].t, GF_DT_F32, 2, (int64_t[]){10, 100}, x, GF_MEM_HOST, -1, NULL);
    gf_tensor_init(&t[1].t, GF_DT_I32, 1, (int64_t[]){7}, m, GF_MEM_HOST, -1, NULL);
    gf_tensor_init(&t[2].t, GF_DT_F32, 1, (int64_t[]){0}, x, GF_MEM_HOST, -1, NULL);
    gf_ipc_infer inf = {"fn@1", 3, t, 0x5, 0, NULL};
    gf_ipc_result res = {GF_IPC_RESULT_COLD, 2, 1, 2, 3, 3, t};
    gf_buf copy, head;
    gf_buf_init(&copy);
    gf_buf_init(&head);
    gf_ipc_gather g;
    gf_err e;
    gf_ipc_reader rd;
    ck_assert_int_eq(gf_ipc_reader_init(&rd, sv[0], 0, NULL), GF_OK);
    rd.pa = (gf_ipc_payload_alloc){pa_alloc, pa_free, NULL};
    for (int kind = 0; kind < 2; kind++) {
        gf_buf_reset(&copy);
        gf_buf_reset(&head);
        if (kind == 0) {
            ck_assert_int_eq(gf_ipc_encode_infer(&copy, 9, &inf, &e), GF_OK);
            ck_assert_int_eq(gf_ipc_encode_infer_gather(&head, &g, 9, &inf, &e), GF_OK);
        } else {
            ck_assert_int_eq(gf_ipc_encode_result(&copy, 9, &res, &e), GF_OK);
            ck_assert_int_eq(gf_ipc_encode_result_gather(&head, &g, 9, &res, &e), GF_OK);
        }
        ck_assert_uint_eq(g.len, copy.len);
        ck_assert_uint_eq(head.len, copy.len - sizeof x - sizeof m); /* no data in b */
        int data_segs = 0;
        for (uint32_t i = 0; i < g.n; i++)
            data_segs += g.seg[i].ext == x || g.seg[i].ext == m;
        ck_assert_int_eq(data_segs, 2); /* referenced, not copied; the empty one has none */
        struct iovec iov[GF_IPC_GATHER_MAX];
        int n = gf_ipc_gather_iov(&g, &head, iov);
        ck_assert_int_eq(gf_ipc_writev_all(sv[1], iov, n, 5000, &e), GF_OK);
        gf_ipc_frame f;
        ck_assert_int_eq(gf_ipc_read_frame(&rd, &f, 5000, &e), GF_OK);
        ck_assert_uint_eq(f.h.payload_len + GF_IPC_HEADER_SIZE, copy.len);
        ck_assert_int_eq(memcmp(f.payload, copy.data + GF_IPC_HEADER_SIZE, f.h.payload_len), 0);
        ck_assert_uint_eq(f.copied, 0); /* read straight into the payload */
        ck_assert_int_eq(pa_live, 1);
        gf_ipc_frame_deinit(&f);
        ck_assert_int_eq(pa_live, 0);
    }
    /* a frame over the buffer's limit is refused whole, nothing in b */
    gf_buf_reset(&head);
    head.limit = 1024;
    ck_assert_int_eq(gf_ipc_encode_infer_gather(&head, &g, 9, &inf, &e), GF_ERR_TOO_LARGE);
    ck_assert_uint_eq(head.len, 0);
    ck_assert_uint_eq(g.n, 0);
    gf_ipc_reader_deinit(&rd);
    close(sv[0]);
    close(sv[1]);
    gf_buf_deinit(&copy);
    gf_buf_deinit(&head);
}
END_TEST

/* Frames that arrive back to back, all in one write (a worker's STATS frame
 * just ahead of a RESULT, as under load): each payload is still read
 * straight into its own buffer, none is copied out of the read-ahead. */
START_TEST(test_back_to_back_frames_not_copied)
{
    int sv[2];
    pair(sv, false);
    static float x[1000];
    for (int i = 0; i < 1000; i++)
        x[i] = (float)i;
    gf_ipc_tensor t = {.name = "y"};
    gf_tensor_init(&t.t, GF_DT_F32, 1, (int64_t[]){1000}, x, GF_MEM_HOST, -1, NULL);
    gf_ipc_result res = {0, 2, 1, 2, 3, 1, &t};
    gf_ipc_stats stats;
    memset(&stats, 0, sizeof stats);
    gf_buf b;
    gf_buf_init(&b);
    gf_err e;
    ck_assert_int_eq(gf_ipc_encode_stats(&b, 1, &stats, &e), GF_OK);
    ck_assert_int_eq(gf_ipc_encode_result(&b, 2, &res, &e), GF_OK);
    ck_assert_int_eq(gf_ipc_encode_empty(&b, GF_IPC_PING, 3, &e), GF_OK);
    ck_assert_int_eq(gf_ipc_encode_result(&b, 4, &res, &e), GF_OK);
    ck_assert_int_eq(gf_ipc_encode_stats(&b, 5, &stats, &e), GF_OK);
    ck_assert_int_eq(write(sv[1], b.data, b.len), (ssize_t)b.len);
    gf_ipc_reader rd;
    ck_assert_int_eq(gf_ipc_reader_init(&rd, sv[0], 0, NULL), GF_OK);
    rd.pa = (gf_ipc_payload_alloc){pa_alloc, pa_free, NULL};
    for (uint64_t id = 1; id <= 5; id++) {
        gf_ipc_frame f;
        ck_assert_int_eq(gf_ipc_read_frame(&rd, &f, 5000, &e), GF_OK);
        ck_assert_uint_eq(f.h.request_id, id);
        ck_assert_msg(f.copied == 0, "frame %llu: %llu of its %llu payload bytes copied",
                      (unsigned long long)id, (unsigned long long)f.copied,
                      (unsigned long long)f.h.payload_len);
        if (f.h.type == GF_IPC_RESULT) {
            gf_ipc_result r;
            ck_assert_int_eq(gf_ipc_decode_result(&f, &r, &e), GF_OK);
            ck_assert_int_eq(memcmp(r.t[0].t.data, x, sizeof x), 0);
            gf_ipc_result_deinit(&r);
        }
        gf_ipc_frame_deinit(&f);
    }
    ck_assert_int_eq(pa_live, 0);
    gf_ipc_reader_deinit(&rd);
    close(sv[0]);
    close(sv[1]);
    gf_buf_deinit(&b);
}
END_TEST

TCase *ti_io_tcase(void)
{
    TCase *io = tcase_create("io");
    tcase_add_test(io, test_reader_fragments);
    tcase_add_test(io, test_reader_truncated);
    tcase_add_test(io, test_reader_limit);
    tcase_add_test(io, test_writer);
    tcase_add_test(io, test_gather_writev);
    tcase_add_test(io, test_back_to_back_frames_not_copied);
    return io;
}
