/* gpufaas tests — the worker protocol codec (runtime/ipc.h), in process:
 * round trips of every message, every malformation the decoders must refuse,
 * a mutation fuzz whose accepted frames must re-encode to the same bytes. The
 * reader/writer on real sockets (runtime/ipc_io.c) are in test_ipc_io.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "core/residency.h"
#include "ipc.h"
#include "ipc_testlib.h"
#include "testutil.h"

/* Turn the frame at b[0, len) into a gf_ipc_frame (payload copied). */
static void to_frame(const char *b, size_t len, gf_ipc_frame *f)
{
    ck_assert_uint_ge(len, GF_IPC_HEADER_SIZE);
    memset(f, 0, sizeof *f);
    gf_err e;
    gf_err_clear(&e);
    ck_assert_msg(gf_ipc_header_parse((const unsigned char *)b, 0, &f->h, &e) == GF_OK, "%s",
                  e.msg);
    ck_assert_uint_eq(f->h.payload_len, len - GF_IPC_HEADER_SIZE);
    f->payload = NULL;
    f->copied = 0;
    if (f->h.payload_len > 0) {
        f->payload = aligned_alloc(64, (f->h.payload_len + 63) / 64 * 64);
        ck_assert_ptr_nonnull(f->payload);
        memcpy(f->payload, b + GF_IPC_HEADER_SIZE, f->h.payload_len);
    }
}

static const float xdata[6] = {1, 2, 3, 4, 5, 6};
static const int32_t idata[3] = {7, 8, 9};

/* An INFER with two tensors of different alignment needs. */
void ti_encode_sample_infer(gf_buf *b, uint64_t id)
{
    gf_ipc_tensor t[2] = {{.name = "x"}, {.name = "mask_0"}};
    gf_err e;
    gf_err_clear(&e);
    ck_assert_int_eq(gf_tensor_init(&t[0].t, GF_DT_F32, 2, (int64_t[]){2, 3}, (void *)xdata,
                                    GF_MEM_HOST, -1, &e),
                     GF_OK);
    ck_assert_int_eq(
        gf_tensor_init(&t[1].t, GF_DT_I32, 1, (int64_t[]){3}, (void *)idata, GF_MEM_HOST, -1, &e),
        GF_OK);
    gf_ipc_infer m = {"digits@3", 2, t, 0, 0, NULL};
    ck_assert_int_eq(gf_ipc_encode_infer(b, id, &m, &e), GF_OK);
}

START_TEST(test_table)
{
    ck_assert_ptr_null(gf_ipc_msg_info_of(0));
    ck_assert_ptr_null(gf_ipc_msg_info_of(GF_IPC_TYPE_END_));
    ck_assert_ptr_null(gf_ipc_msg_info_of(0xFFFF));
    ck_assert_str_eq(gf_ipc_type_name(999), "?");
    for (uint32_t t = 1; t < GF_IPC_TYPE_END_; t++) {
        const gf_ipc_msg_info *mi = gf_ipc_msg_info_of(t);
        ck_assert_ptr_nonnull(mi);
        ck_assert(mi->direction == 'W' || mi->direction == 'G');
        for (uint32_t u = 1; u < t; u++)
            ck_assert_str_ne(mi->name, gf_ipc_type_name(u));
    }
    ck_assert_str_eq(gf_ipc_type_name(GF_IPC_INFER), "INFER");
    ck_assert_int_eq(gf_ipc_msg_info_of(GF_IPC_PING)->empty, true);
    ck_assert_int_eq(gf_ipc_msg_info_of(GF_IPC_RESULT)->direction, 'G');
}
END_TEST

START_TEST(test_round_trips)
{
    gf_buf b;
    gf_buf_init(&b);
    gf_err e;
    gf_err_clear(&e);
    gf_ipc_frame f;

    /* INFER: tensors, alignment, the header fields */
    ti_encode_sample_infer(&b, 0x1122334455667788ull);
    to_frame(b.data, b.len, &f);
    ck_assert_uint_eq(f.h.type, GF_IPC_INFER);
    ck_assert_uint_eq(f.h.request_id, 0x1122334455667788ull);
    gf_ipc_infer in;
    ck_assert_msg(gf_ipc_decode_infer(&f, &in, &e) == GF_OK, "%s", e.msg);
    ck_assert_str_eq(in.key, "digits@3");
    ck_assert_uint_eq(in.n, 2);
    ck_assert_str_eq(in.t[0].name, "x");
    ck_assert_int_eq(in.t[0].t.dtype, GF_DT_F32);
    ck_assert_int_eq(in.t[0].t.rank, 2);
    ck_assert_int_eq(in.t[0].t.shape[1], 3);
    ck_assert_uint_eq(in.t[0].t.nbytes, sizeof xdata);
    ck_assert_int_eq(memcmp(in.t[0].t.data, xdata, sizeof xdata), 0);
    ck_assert_uint_eq((uintptr_t)in.t[0].t.data % 8, 0);
    ck_assert_uint_eq((uintptr_t)in.t[1].t.data % 8, 0);
    ck_assert_int_eq(memcmp(in.t[1].t.data, idata, sizeof idata), 0);
    ck_assert_int_eq(in.t[1].t.mem, GF_MEM_HOST);
    /* re-encoding gives the same bytes */
    gf_buf b2;
    gf_buf_init(&b2);
    ck_assert_int_eq(gf_ipc_encode_infer(&b2, f.h.request_id, &in, &e), GF_OK);
    ck_assert_uint_eq(b2.len, b.len);
    ck_assert_int_eq(memcmp(b2.data, b.data, b.len), 0);
    ck_assert_uint_eq(in.outputs, 0); /* left out: every output */
    /* the outputs asked for: a trailing u64, 8 more bytes; decoded back */
    in.outputs = 0x5;
    gf_buf_reset(&b2);
    ck_assert_int_eq(gf_ipc_encode_infer(&b2, 9, &in, &e), GF_OK);
    ck_assert_uint_eq(b2.len, b.len + 8);
    gf_ipc_infer_deinit(&in);
    gf_ipc_frame_deinit(&f);
    to_frame(b2.data, b2.len, &f);
    ck_assert_msg(gf_ipc_decode_infer(&f, &in, &e) == GF_OK, "%s", e.msg);
    ck_assert_uint_eq(in.outputs, 0x5);
    ck_assert_uint_eq(in.n, 2);
    gf_ipc_infer_deinit(&in);
    gf_ipc_frame_deinit(&f);
    /* a mask of 0 on the wire is a protocol error (all is the mask left out) */
    memset(b2.data + b2.len - 8, 0, 8);
    to_frame(b2.data, b2.len, &f);
    ck_assert_int_eq(gf_ipc_decode_infer(&f, &in, &e), GF_ERR_PROTOCOL);
    gf_ipc_infer_deinit(&in);
    gf_ipc_frame_deinit(&f);
    gf_buf_deinit(&b2);
    gf_buf_reset(&b);

    /* RESULT */
    gf_ipc_tensor rt = {.name = "probs"};
    gf_tensor_init(&rt.t, GF_DT_F32, 2, (int64_t[]){1, 6}, (void *)xdata, GF_MEM_HOST, -1, &e);
    gf_ipc_result r = {GF_IPC_RESULT_COLD, GF_TIER_HOST, 11, 22, 33, 1, &rt};
    ck_assert_int_eq(gf_ipc_encode_result(&b, 5, &r, &e), GF_OK);
    to_frame(b.data, b.len, &f);
    gf_ipc_result r2;
    ck_assert_int_eq(gf_ipc_decode_result(&f, &r2, &e), GF_OK);
    ck_assert_uint_eq(r2.flags, GF_IPC_RESULT_COLD);
    ck_assert_int_eq(r2.source_tier, GF_TIER_HOST);
    ck_assert_uint_eq(r2.queue_us, 11);
    ck_assert_uint_eq(r2.load_us, 22);
    ck_assert_uint_eq(r2.exec_us, 33);
    ck_assert_str_eq(r2.t[0].name, "probs");
    ck_assert_int_eq(memcmp(r2.t[0].t.data, xdata, sizeof xdata), 0);
    gf_ipc_result_deinit(&r2);
    gf_ipc_frame_deinit(&f);
    gf_buf_reset(&b);

    /* LOAD */
    const char *mf = "{\"name\":\"a\"}";
    gf_ipc_load l = {"a@1", mf, (uint32_t)strlen(mf), "/s/w.safetensors", "", GF_TIER_HOST};
    ck_assert_int_eq(gf_ipc_encode_load(&b, 6, &l, &e), GF_OK);
    to_frame(b.data, b.len, &f);
    gf_ipc_load l2;
    ck_assert_int_eq(gf_ipc_decode_load(&f, &l2, &e), GF_OK);
    ck_assert_str_eq(l2.key, "a@1");
    ck_assert_str_eq(l2.manifest, mf);
    ck_assert_uint_eq(l2.manifest_len, strlen(mf));
    ck_assert_str_eq(l2.weights_path, "/s/w.safetensors");
    ck_assert_str_eq(l2.plugin_path, "");
    ck_assert_int_eq(l2.tier, GF_TIER_HOST);
    gf_ipc_frame_deinit(&f);
    gf_buf_reset(&b);

    /* LOADED, UNLOAD, ERROR, EVENT, READY, STATS, empty ones */
    gf_ipc_loaded ld = {GF_TIER_DEVICE, 6, 4u << 20, 3u << 20, 1234};
    ck_assert_int_eq(gf_ipc_encode_loaded(&b, 7, &ld, &e), GF_OK);
    to_frame(b.data, b.len, &f);
    gf_ipc_loaded ld2;
    ck_assert_int_eq(gf_ipc_decode_loaded(&f, &ld2, &e), GF_OK);
    ck_assert_int_eq(memcmp(&ld, &ld2, sizeof ld), 0);
    gf_ipc_frame_deinit(&f);
    gf_buf_reset(&b);

    gf_ipc_unload u = {"a@1"};
    ck_assert_int_eq(gf_ipc_encode_unload(&b, 8, &u, &e), GF_OK);
    to_frame(b.data, b.len, &f);
    gf_ipc_unload u2;
    ck_assert_int_eq(gf_ipc_decode_unload(&f, &u2, &e), GF_OK);
    ck_assert_str_eq(u2.key, "a@1");
    gf_ipc_frame_deinit(&f);
    gf_buf_reset(&b);

    gf_ipc_residency rs = {"a@1", 1, 2, 30000000};
    ck_assert_int_eq(gf_ipc_encode_residency(&b, 8, &rs, &e), GF_OK);
    to_frame(b.data, b.len, &f);
    gf_ipc_residency rs2;
    ck_assert_int_eq(gf_ipc_decode_residency(&f, &rs2, &e), GF_OK);
    ck_assert_str_eq(rs2.key, "a@1");
    ck_assert_uint_eq(rs2.pin, 1);
    ck_assert_uint_eq(rs2.priority, 2);
    ck_assert_uint_eq(rs2.keep_warm_us, 30000000);
    gf_ipc_frame_deinit(&f);
    gf_buf_reset(&b);
    /* out-of-range fields are protocol errors naming the field */
    static const struct {
        gf_ipc_residency r;
        const char *field;
    } bad[] = {{{"a@1", 2, 1, 0}, "pin"},
               {{"a@1", 0, 3, 0}, "priority"},
               {{"a@1", 0, 1, GF_KEEP_WARM_MAX_US + 1}, "keep_warm_us"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(gf_ipc_encode_residency(&b, 8, &bad[i].r, &e), GF_OK);
        to_frame(b.data, b.len, &f);
        ck_assert_int_eq(gf_ipc_decode_residency(&f, &rs2, &e), GF_ERR_PROTOCOL);
        ck_assert_msg(strstr(e.msg, bad[i].field) != NULL, "%s", e.msg);
        gf_ipc_frame_deinit(&f);
        gf_buf_reset(&b);
    }

    ck_assert_int_eq(gf_ipc_encode_error(&b, 9, GF_ERR_NO_DEVICE_MEM, "needs 5 bytes", &e), GF_OK);
    to_frame(b.data, b.len, &f);
    gf_ipc_error er;
    ck_assert_int_eq(gf_ipc_decode_error(&f, &er, &e), GF_OK);
    ck_assert_uint_eq(er.code, GF_ERR_NO_DEVICE_MEM);
    ck_assert_str_eq(er.message, "needs 5 bytes");
    gf_ipc_frame_deinit(&f);
    gf_buf_reset(&b);

    /* a long message is cut at a UTF-8 boundary, never split in a sequence */
    char *longmsg = malloc(GF_IPC_MAX_MESSAGE + 10);
    memset(longmsg, 'a', GF_IPC_MAX_MESSAGE + 9);
    memcpy(longmsg + GF_IPC_MAX_MESSAGE - 1, "\xc3\xa9", 2); /* é across the limit */
    longmsg[GF_IPC_MAX_MESSAGE + 9] = '\0';
    ck_assert_int_eq(gf_ipc_encode_error(&b, 9, GF_ERR_INVALID, longmsg, &e), GF_OK);
    to_frame(b.data, b.len, &f);
    ck_assert_int_eq(gf_ipc_decode_error(&f, &er, &e), GF_OK);
    ck_assert_uint_eq(strlen(er.message), GF_IPC_MAX_MESSAGE - 1);
    free(longmsg);
    gf_ipc_frame_deinit(&f);
    gf_buf_reset(&b);

    gf_ipc_event ev = {3,
                       1700000000000000ull,
                       GF_IPC_EV_EVICTED,
                       GF_TIER_DEVICE,
                       GF_TIER_HOST,
                       4096,
                       0,
                       "k@2",
                       NULL};
    ck_assert_int_eq(gf_ipc_encode_event(&b, &ev, &e), GF_OK);
    to_frame(b.data, b.len, &f);
    ck_assert_uint_eq(f.h.request_id, 0);
    gf_ipc_event ev2;
    ck_assert_int_eq(gf_ipc_decode_event(&f, &ev2, &e), GF_OK);
    ck_assert_uint_eq(ev2.seq, 3);
    ck_assert_uint_eq(ev2.kind, GF_IPC_EV_EVICTED);
    ck_assert_int_eq(ev2.from, GF_TIER_DEVICE);
    ck_assert_int_eq(ev2.to, GF_TIER_HOST);
    ck_assert_uint_eq(ev2.bytes, 4096);
    ck_assert_str_eq(ev2.key, "k@2");
    ck_assert_str_eq(ev2.message, "");
    gf_ipc_frame_deinit(&f);
    gf_buf_reset(&b);

    gf_ipc_ready rd = {.protocol_version = GF_IPC_VERSION,
                       .worker_id = 3,
                       .pid = 99,
                       .device_kind = 1,
                       .device_index = 2,
                       .cc_major = 9,
                       .pcie_gen = 5,
                       .total_memory = 1ull << 40,
                       .device_budget = 1ull << 33,
                       .max_frame = 1 << 30,
                       .device_name = "NVIDIA H200"};
    ck_assert_int_eq(gf_ipc_encode_ready(&b, 0, &rd, &e), GF_OK);
    to_frame(b.data, b.len, &f);
    gf_ipc_ready rd2;
    ck_assert_int_eq(gf_ipc_decode_ready(&f, &rd2, &e), GF_OK);
    ck_assert_int_eq(rd2.device_index, 2);
    ck_assert_int_eq(rd2.cc_major, 9);
    ck_assert_uint_eq(rd2.total_memory, 1ull << 40);
    ck_assert_str_eq(rd2.device_name, "NVIDIA H200");
    gf_ipc_frame_deinit(&f);
    gf_buf_reset(&b);

    gf_ipc_stats st;
    memset(&st, 0, sizeof st);
    st.hits = 5;
    st.uptime_us = 77;
    ck_assert_int_eq(gf_ipc_encode_stats(&b, 10, &st, &e), GF_OK);
    to_frame(b.data, b.len, &f);
    gf_ipc_stats st2;
    ck_assert_int_eq(gf_ipc_decode_stats(&f, &st2, &e), GF_OK);
    ck_assert_int_eq(memcmp(&st, &st2, sizeof st), 0);
    gf_ipc_frame_deinit(&f);
    gf_buf_reset(&b);

    for (uint32_t t = 1; t < GF_IPC_TYPE_END_; t++) {
        gf_status want = gf_ipc_msg_info_of(t)->empty ? GF_OK : GF_ERR_INVALID;
        ck_assert_int_eq(gf_ipc_encode_empty(&b, (gf_ipc_type)t, t, NULL), want);
    }
    ck_assert_uint_eq(b.len, 7 * GF_IPC_HEADER_SIZE); /* HELLO ... SHUTDOWN, RESIDENCY_SET */
    gf_buf_deinit(&b);
    gf_buf_deinit(&b2);
}
END_TEST

/* STATS from a newer peer (more fields) and an older one (fewer). */
START_TEST(test_stats_compat)
{
    unsigned char frame[GF_IPC_HEADER_SIZE + 4 + 8 * 64];
    gf_ipc_frame f = {.h = {GF_IPC_STATS, 1, 0}};
    for (uint32_t count = 0; count < 64; count += 7) {
        size_t plen = 4 + 8 * (size_t)count;
        memset(frame, 0, sizeof frame);
        frame[0] = (unsigned char)count;
        for (uint32_t i = 0; i < count; i++)
            frame[4 + 8 * i] = (unsigned char)(i + 1);
        f.h.payload_len = plen;
        f.payload = frame;
        gf_ipc_stats s;
        ck_assert_int_eq(gf_ipc_decode_stats(&f, &s, NULL), GF_OK);
        ck_assert_uint_eq(s.hits, count >= 1 ? 1 : 0);
        ck_assert_uint_eq(s.misses, count >= 2 ? 2 : 0);
        /* a count that does not match the bytes is malformed */
        f.h.payload_len = plen + 8;
        ck_assert_int_eq(gf_ipc_decode_stats(&f, &s, NULL), GF_ERR_PROTOCOL);
    }
}
END_TEST

START_TEST(test_header_errors)
{
    unsigned char h[GF_IPC_HEADER_SIZE];
    gf_buf b;
    gf_buf_init(&b);
    ck_assert_int_eq(gf_ipc_encode_empty(&b, GF_IPC_PING, 1, NULL), GF_OK);
    gf_ipc_header hd;
    gf_err e;
    memcpy(h, b.data, sizeof h);
    ck_assert_int_eq(gf_ipc_header_parse(h, 0, &hd, &e), GF_OK);
    h[0] ^= 1;
    ck_assert_int_eq(gf_ipc_header_parse(h, 0, &hd, &e), GF_ERR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(e.msg, "magic"));
    memcpy(h, b.data, sizeof h);
    h[4] = 2;
    ck_assert_int_eq(gf_ipc_header_parse(h, 0, &hd, &e), GF_ERR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(e.msg, "version 2"));
    memcpy(h, b.data, sizeof h);
    h[6] = 0;
    ck_assert_int_eq(gf_ipc_header_parse(h, 0, &hd, &e), GF_ERR_PROTOCOL);
    h[6] = 200;
    ck_assert_int_eq(gf_ipc_header_parse(h, 0, &hd, &e), GF_ERR_PROTOCOL);
    memcpy(h, b.data, sizeof h);
    h[16] = 1; /* PING with a payload */
    ck_assert_int_eq(gf_ipc_header_parse(h, 0, &hd, &e), GF_ERR_PROTOCOL);
    h[6] = GF_IPC_INFER;
    h[16] = 0;
    h[23] = 0x80; /* 2^63 bytes */
    ck_assert_int_eq(gf_ipc_header_parse(h, 0, &hd, &e), GF_ERR_TOO_LARGE);
    h[23] = 0;
    h[18] = 0x10; /* 1 MiB against a 4 KiB limit */
    ck_assert_int_eq(gf_ipc_header_parse(h, 4096, &hd, &e), GF_ERR_TOO_LARGE);
    ck_assert_int_eq(gf_ipc_header_parse(h, 2 << 20, &hd, &e), GF_OK);
    gf_buf_deinit(&b);
}
END_TEST

/* Build payloads by hand to hit each rule. */
typedef struct {
    unsigned char p[512];
    size_t n;
} pbuf;

static void p_u32(pbuf *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b->p[b->n++] = (unsigned char)(v >> (8 * i));
}

static void p_u64(pbuf *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b->p[b->n++] = (unsigned char)(v >> (8 * i));
}

static void p_raw(pbuf *b, const void *s, size_t n)
{
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void p_str(pbuf *b, const char *s)
{
    p_u32(b, (uint32_t)strlen(s));
    p_raw(b, s, strlen(s) + 1);
}

static gf_status decode_infer_payload(pbuf *b, char *msg)
{
    gf_ipc_frame f = {.h = {GF_IPC_INFER, 1, b->n}};
    unsigned char *copy = aligned_alloc(64, 512);
    memcpy(copy, b->p, b->n);
    f.payload = copy;
    gf_ipc_infer m;
    gf_err e;
    gf_err_clear(&e);
    gf_status st = gf_ipc_decode_infer(&f, &m, &e);
    gf_ipc_infer_deinit(&m);
    free(copy);
    if (msg != NULL)
        snprintf(msg, GF_ERR_MSG_MAX, "%s", e.msg);
    return st;
}

/* key, n=1, tensor "x" header up to (excluding) nbytes, with given fields */
static void p_tensor_head(pbuf *b, const char *key, const char *name, uint32_t dtype, uint32_t rank,
                          const uint64_t *dims)
{
    b->n = 0;
    p_str(b, key);
    p_u32(b, 1);
    p_str(b, name);
    p_u32(b, dtype);
    p_u32(b, rank);
    for (uint32_t i = 0; i < rank; i++)
        p_u64(b, dims[i]);
}

static void p_pad(pbuf *b)
{
    while ((b->n + GF_IPC_HEADER_SIZE) % 8 != 0)
        b->p[b->n++] = 0;
}

START_TEST(test_decoder_rules)
{
    pbuf b;
    char msg[GF_ERR_MSG_MAX];
    uint64_t d2[2] = {1, 2};
    /* a valid one first */
    p_tensor_head(&b, "k", "x", GF_DT_F32, 2, d2);
    p_u64(&b, 8);
    p_pad(&b);
    p_raw(&b, "\1\2\3\4\5\6\7\10", 8);
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_OK);
    /* a trailing byte: too short for the optional outputs mask */
    b.p[b.n++] = 0;
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(msg, "outputs"));
    /* the mask, then one byte more: too short for the destinations' count */
    b.n--;
    p_u64(&b, 1);
    b.p[b.n++] = 0;
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(msg, "n_dests"));
    /* a count of 0 destinations is the count left out */
    b.p[b.n++] = 0;
    b.p[b.n++] = 0;
    b.p[b.n++] = 0;
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(msg, "n_dests"));
    b.n -= 12;
    /* every truncation */
    size_t full = b.n;
    for (size_t n = 0; n < full; n++) {
        b.n = n;
        ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    }
    /* nbytes that does not match the shape */
    p_tensor_head(&b, "k", "x", GF_DT_F32, 2, d2);
    p_u64(&b, 12);
    p_pad(&b);
    p_raw(&b, "123456789012", 12);
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(msg, "need 8"));
    /* dtype 0, 99; rank 9; a negative dim; an overflowing element count */
    p_tensor_head(&b, "k", "x", 0, 0, NULL);
    p_u64(&b, 0);
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    p_tensor_head(&b, "k", "x", 99, 0, NULL);
    p_u64(&b, 0);
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    uint64_t d9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    p_tensor_head(&b, "k", "x", GF_DT_U8, 9, d9);
    p_u64(&b, 1);
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(msg, "rank 9"));
    uint64_t dneg[1] = {(uint64_t)-1};
    p_tensor_head(&b, "k", "x", GF_DT_U8, 1, dneg);
    p_u64(&b, 0);
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    uint64_t dbig[2] = {1ull << 40, 1ull << 40};
    p_tensor_head(&b, "k", "x", GF_DT_U8, 2, dbig);
    p_u64(&b, 0);
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(msg, "overflow"));
    uint64_t dhuge[1] = {1ull << 62};
    p_tensor_head(&b, "k", "x", GF_DT_F64, 1, dhuge); /* 2^65 bytes */
    p_u64(&b, 0);
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    /* data longer than the payload */
    uint64_t d1[1] = {1000};
    p_tensor_head(&b, "k", "x", GF_DT_U8, 1, d1);
    p_u64(&b, 1000);
    p_pad(&b);
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    /* non-zero padding */
    uint64_t d1b[1] = {1};
    p_tensor_head(&b, "k", "xy", GF_DT_U8, 1, d1b);
    p_u64(&b, 1);
    size_t before = b.n;
    p_pad(&b);
    ck_assert_uint_gt(b.n, before);
    b.p[before] = 1;
    b.p[b.n++] = 42;
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(msg, "padding"));
    /* strings: no NUL after, a NUL inside, bad UTF-8, over the limit */
    b.n = 0;
    p_u32(&b, 1);
    p_raw(&b, "kX", 2);
    p_u32(&b, 0);
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(msg, "NUL"));
    b.n = 0;
    p_u32(&b, 3);
    p_raw(&b, "k\0k\0", 4);
    p_u32(&b, 0);
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    b.n = 0;
    p_str(&b, "k\xff");
    p_u32(&b, 0);
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(msg, "UTF-8"));
    b.n = 0;
    p_u32(&b, GF_IPC_MAX_KEY + 1);
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    b.n = 0;
    p_u32(&b, 0xFFFFFFFFu);
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    /* tensor counts: over the maximum, more than the bytes could hold */
    b.n = 0;
    p_str(&b, "k");
    p_u32(&b, GF_IPC_MAX_TENSORS + 1);
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    b.n = 0;
    p_str(&b, "k");
    p_u32(&b, 100);
    ck_assert_int_eq(decode_infer_payload(&b, msg), GF_ERR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(msg, "cannot fit"));
    /* a frame of another type */
    gf_ipc_frame f = {.h = {GF_IPC_PING, 1, 0}};
    gf_ipc_infer m;
    ck_assert_int_eq(gf_ipc_decode_infer(&f, &m, NULL), GF_ERR_PROTOCOL);
    gf_ipc_infer_deinit(&m);
}
END_TEST

START_TEST(test_encoder_limits)
{
    gf_buf b;
    gf_buf_init(&b);
    gf_err e;
    ck_assert_int_eq(gf_ipc_encode_empty(&b, GF_IPC_PING, 1, NULL), GF_OK);
    size_t keep = b.len;
    b.limit = keep + 200;
    static float big[64];
    gf_ipc_tensor t = {.name = "x"};
    gf_tensor_init(&t.t, GF_DT_F32, 1, (int64_t[]){64}, big, GF_MEM_HOST, -1, &e);
    gf_ipc_result r = {0, 0, 0, 0, 0, 1, &t};
    ck_assert_int_eq(gf_ipc_encode_result(&b, 2, &r, &e), GF_ERR_TOO_LARGE);
    ck_assert_uint_eq(b.len, keep); /* unchanged */
    b.limit = 0;
    /* a descriptor whose bytes do not match its shape is refused */
    t.t.nbytes = 4;
    ck_assert_int_eq(gf_ipc_encode_result(&b, 2, &r, &e), GF_ERR_INVALID);
    ck_assert_uint_eq(b.len, keep);
    /* strings over their limits */
    char *key = malloc(GF_IPC_MAX_KEY + 2);
    memset(key, 'k', GF_IPC_MAX_KEY + 1);
    key[GF_IPC_MAX_KEY + 1] = '\0';
    gf_ipc_unload u = {key};
    ck_assert_int_eq(gf_ipc_encode_unload(&b, 3, &u, &e), GF_ERR_TOO_LARGE);
    ck_assert_uint_eq(b.len, keep);
    key[GF_IPC_MAX_KEY] = '\0';
    ck_assert_int_eq(gf_ipc_encode_unload(&b, 3, &u, &e), GF_OK);
    free(key);
    gf_buf_deinit(&b);
}
END_TEST

/* Mutate valid frames at random: every decoder either refuses a payload with
 * GF_ERR_PROTOCOL or accepts it — and then re-encoding what it decoded gives
 * exactly the same bytes (no field is misread). */
START_TEST(test_decoder_fuzz)
{
    gf_test_rng rng;
    gf_test_rng_seed(&rng, 20261129);
    gf_buf seeds[4], re;
    for (int i = 0; i < 4; i++)
        gf_buf_init(&seeds[i]);
    gf_buf_init(&re);
    ti_encode_sample_infer(&seeds[0], 1);
    gf_ipc_tensor rt = {.name = "y"};
    gf_tensor_init(&rt.t, GF_DT_F32, 2, (int64_t[]){2, 3}, (void *)xdata, GF_MEM_HOST, -1, NULL);
    gf_ipc_result r = {1, 2, 3, 4, 5, 1, &rt};
    gf_ipc_encode_result(&seeds[1], 2, &r, NULL);
    const char *mf = "{\"name\":\"a\",\"kind\":\"mlp\"}";
    gf_ipc_load l = {"a@1", mf, (uint32_t)strlen(mf), "/w", "", 2};
    gf_ipc_encode_load(&seeds[2], 3, &l, NULL);
    gf_ipc_event ev = {1, 2, GF_IPC_EV_LOADED, 1, 2, 3, 4, "k", "m"};
    gf_ipc_encode_event(&seeds[3], &ev, NULL);
    unsigned char *p = aligned_alloc(64, 1024);
    long accepted = 0;
    for (long it = 0; it < 200000; it++) {
        const gf_buf *s = &seeds[it % 4];
        size_t plen = s->len - GF_IPC_HEADER_SIZE;
        memcpy(p, s->data + GF_IPC_HEADER_SIZE, plen);
        int muts = 1 + (int)gf_test_rng_below(&rng, 4);
        for (int k = 0; k < muts; k++) {
            size_t at = gf_test_rng_below(&rng, plen);
            switch (gf_test_rng_below(&rng, 4)) {
            case 0:
                p[at] = (unsigned char)gf_test_rng_u64(&rng);
                break;
            case 1:
                p[at] ^= (unsigned char)(1u << gf_test_rng_below(&rng, 8));
                break;
            case 2:
                p[at] = (unsigned char)(p[at] + 1);
                break;
            default:
                plen = at;
                break; /* truncate */
            }
        }
        gf_ipc_frame f = {.h = {0, 7, plen}, .payload = p};
        gf_status st;
        re.len = 0;
        switch (it % 4) {
        case 0: {
            f.h.type = GF_IPC_INFER;
            gf_ipc_infer m;
            if ((st = gf_ipc_decode_infer(&f, &m, NULL)) == GF_OK)
                ck_assert_int_eq(gf_ipc_encode_infer(&re, 7, &m, NULL), GF_OK);
            gf_ipc_infer_deinit(&m);
            break;
        }
        case 1: {
            f.h.type = GF_IPC_RESULT;
            gf_ipc_result m;
            if ((st = gf_ipc_decode_result(&f, &m, NULL)) == GF_OK)
                ck_assert_int_eq(gf_ipc_encode_result(&re, 7, &m, NULL), GF_OK);
            gf_ipc_result_deinit(&m);
            break;
        }
        case 2: {
            f.h.type = GF_IPC_LOAD;
            gf_ipc_load m;
            if ((st = gf_ipc_decode_load(&f, &m, NULL)) == GF_OK)
                ck_assert_int_eq(gf_ipc_encode_load(&re, 7, &m, NULL), GF_OK);
            break;
        }
        default: {
            f.h.type = GF_IPC_EVENT;
            gf_ipc_event m;
            if ((st = gf_ipc_decode_event(&f, &m, NULL)) == GF_OK)
                ck_assert_int_eq(gf_ipc_encode_event(&re, &m, NULL), GF_OK);
            break;
        }
        }
        ck_assert_msg(st == GF_OK || st == GF_ERR_PROTOCOL, "status %d", st);
        if (st == GF_OK) {
            accepted++;
            ck_assert_uint_eq(re.len, GF_IPC_HEADER_SIZE + plen);
            ck_assert_int_eq(memcmp(re.data + GF_IPC_HEADER_SIZE, p, plen), 0);
        }
    }
    ck_assert_int_gt(accepted, 1000); /* data-byte mutations stay valid */
    free(p);
    for (int i = 0; i < 4; i++)
        gf_buf_deinit(&seeds[i]);
    gf_buf_deinit(&re);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ipc");
    TCase *tc = tcase_create("codec");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_table);
    tcase_add_test(tc, test_round_trips);
    tcase_add_test(tc, test_stats_compat);
    tcase_add_test(tc, test_header_errors);
    tcase_add_test(tc, test_decoder_rules);
    tcase_add_test(tc, test_encoder_limits);
    tcase_add_test(tc, test_decoder_fuzz);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, ti_io_tcase());
    return gf_test_run_suite(s);
}
