/* gpufaas — the worker protocol: the message table and the encoder (the
 * decoder is in ipc_decode.c, frame I/O in ipc_io.c). See ipc.h. */
#include "core/clock.h"
#include "ipc.h"
#include "ipc_wire.h"

#include "core/residency.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/dtype.h"
#include "core/bytes.h"
#include "core/copies.h"
#include "core/tensor.h"
#include "core/utf8.h"

/* ---- the table ------------------------------------------------------------- */

static const gf_ipc_msg_info gf_ipc_table[GF_IPC_TYPE_END_] = {
#define GF_IPC_ROW_(name, value, dir, empty, doc) [value] = {#name, dir, empty, doc},
    GF_IPC_MESSAGES(GF_IPC_ROW_)
#undef GF_IPC_ROW_
};

const gf_ipc_msg_info *gf_ipc_msg_info_of(uint32_t type)
{
    if (type >= GF_IPC_TYPE_END_ || gf_ipc_table[type].name == NULL)
        return NULL;
    return &gf_ipc_table[type];
}

const char *gf_ipc_type_name(uint32_t type)
{
    const gf_ipc_msg_info *mi = gf_ipc_msg_info_of(type);
    return mi != NULL ? mi->name : "?";
}

/* ---- little-endian ----------------------------------------------------------- */

static void le_put(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}


/* ---- encoding ---------------------------------------------------------------- */

/* An encoder appends to b; the first failure sticks, and finish() rolls the
 * buffer back to where the frame began. */
typedef struct {
    gf_buf *b;
    size_t start; /* b->len when the frame began */
    gf_status st;
    const char *what; /* the field that failed */
    gf_ipc_gather *g; /* gather form: tensor data referenced, not copied */
    uint64_t ext;     /* bytes of the referenced data so far */
    size_t seg_from;  /* start in b of the bytes not yet in a segment */
} enc;

static void put_bytes(enc *e, const void *p, size_t n, const char *what);

/* Bytes of the frame so far, as they go on the wire. */
static uint64_t wire_pos(const enc *e)
{
    return (uint64_t)(e->b->len - e->start) + e->ext;
}

/* Gather form: close the segment of b's bytes written since the last one. */
static void seg_flush(enc *e)
{
    if (e->b->len > e->seg_from) {
        e->g->seg[e->g->n++] = (gf_ipc_seg){NULL, e->seg_from, e->b->len - e->seg_from};
        e->seg_from = e->b->len;
    }
}

/* A tensor's data: copied into b, or (gather form) referenced where it is. */
static void put_data(enc *e, const void *p, size_t n)
{
    if (e->st != GF_OK || n == 0)
        return;
    if (e->g == NULL) {
        put_bytes(e, p, n, "tensor data");
        return;
    }
    seg_flush(e);
    e->g->seg[e->g->n++] = (gf_ipc_seg){p, 0, n};
    e->ext += n;
}

static void put_bytes(enc *e, const void *p, size_t n, const char *what)
{
    if (e->st != GF_OK)
        return;
    e->st = gf_buf_append(e->b, p, n);
    if (e->st != GF_OK)
        e->what = what;
}

static void put_int(enc *e, uint64_t v, int n, const char *what)
{
    unsigned char x[8];
    le_put(x, v, n);
    put_bytes(e, x, (size_t)n, what);
}

#define put_u32(e, v, w) put_int((e), (uint32_t)(v), 4, (w))
#define put_u64(e, v, w) put_int((e), (uint64_t)(v), 8, (w))

static void put_str_n(enc *e, const char *s, size_t len, size_t limit, const char *what)
{
    if (e->st != GF_OK)
        return;
    if (len > limit) {
        e->st = GF_ERR_TOO_LARGE;
        e->what = what;
        return;
    }
    put_u32(e, len, what);
    put_bytes(e, s, len, what);
    put_bytes(e, "", 1, what);
}

static void put_str(enc *e, const char *s, size_t limit, const char *what)
{
    put_str_n(e, s != NULL ? s : "", s != NULL ? strlen(s) : 0, limit, what);
}

static void enc_begin(enc *e, gf_buf *b, gf_ipc_type type, uint64_t id)
{
    e->b = b;
    e->start = b->len;
    e->st = GF_OK;
    e->what = "header";
    e->g = NULL;
    e->ext = 0;
    e->seg_from = b->len;
    unsigned char h[GF_IPC_HEADER_SIZE];
    le_put(h, GF_IPC_MAGIC, 4);
    le_put(h + 4, GF_IPC_VERSION, 2);
    le_put(h + 6, (uint64_t)type, 2);
    le_put(h + 8, id, 8);
    le_put(h + 16, 0, 8); /* patched by enc_finish */
    put_bytes(e, h, sizeof h, "header");
}

static gf_status enc_finish(enc *e, gf_ipc_type type, gf_err *err)
{
    if (e->st == GF_OK) {
        uint64_t payload = wire_pos(e) - GF_IPC_HEADER_SIZE;
        le_put((unsigned char *)e->b->data + e->start + 16, payload, 8);
        if (e->g != NULL) {
            seg_flush(e);
            e->g->len = wire_pos(e);
        }
        return GF_OK;
    }
    if (e->g != NULL)
        e->g->n = 0;
    e->b->len = e->start;
    if (e->b->data != NULL)
        e->b->data[e->start] = '\0';
    if (e->st == GF_ERR_TOO_LARGE)
        return gf_err_set(err, e->st, "%s frame: field '%s' is over its size limit",
                          gf_ipc_type_name(type), e->what);
    return gf_err_set(err, e->st, "%s frame: appending field '%s' failed: %s",
                      gf_ipc_type_name(type), e->what, gf_strerror(e->st));
}

/* Bytes of a tensor record starting at frame offset pos, or false on overflow. */
static bool tensor_wire_size(const gf_ipc_tensor *t, uint64_t pos, uint64_t *out)
{
    uint64_t n = 4 + strlen(t->name) + 1 + 4 + 4 + 8 * (uint64_t)t->t.rank + 8;
    if (t->shm_key != NULL) { /* key and offset instead of padding and data */
        *out = n + 4 + strlen(t->shm_key) + 1 + 8;
        return true;
    }
    uint64_t at;
    if (!gf_u64_add(pos, n, &at))
        return false;
    uint64_t pad = (8 - at % 8) % 8;
    return gf_u64_add(n, pad, &n) && gf_u64_add(n, t->t.nbytes, out);
}

static void put_tensor(enc *e, const gf_ipc_tensor *t)
{
    const gf_tensor *d = &t->t;
    put_str(e, t->name, GF_IPC_MAX_NAME, "tensor name");
    put_u32(e, (uint32_t)d->dtype | (t->shm_key != NULL ? GF_IPC_TENSOR_SHM : 0), "dtype");
    put_u32(e, d->rank, "rank");
    for (int32_t i = 0; i < d->rank; i++)
        put_u64(e, (uint64_t)d->shape[i], "shape");
    put_u64(e, d->nbytes, "nbytes");
    if (t->shm_key != NULL) {
        put_str(e, t->shm_key, GF_IPC_MAX_SHM_KEY, "shm_key");
        put_u64(e, t->shm_offset, "shm_offset");
        return;
    }
    static const unsigned char zeros[8] = {0};
    if (e->st == GF_OK)
        put_bytes(e, zeros, (8 - wire_pos(e) % 8) % 8, "padding");
    put_data(e, d->data, d->nbytes);
}



/* Check tensors before encoding them: what an encoder must not put on the
 * wire because the decoder would reject it. */
static gf_status check_tensors(const gf_ipc_tensor *t, uint32_t n, const char *what, gf_err *err)
{
    if (n > GF_IPC_MAX_TENSORS)
        return gf_err_set(err, GF_ERR_TOO_LARGE, "%s: %u tensors, at most %u", what, n,
                          GF_IPC_MAX_TENSORS);
    for (uint32_t i = 0; i < n; i++) {
        gf_status st = GF_OK;
        if (t[i].shm_key == NULL)
            st = gf_tensor_check_data(&t[i].t, err);
        else if (t[i].shm_key[0] == '\0')
            st = gf_err_set(err, GF_ERR_INVALID, "an empty shared memory key");
        else if (t[i].t.dtype != GF_DT_BYTES) /* the size only: its bytes are not read */
            st = gf_tensor_check_data(&t[i].t, err);
        if (st != GF_OK) {
            gf_err_prefix(err, "%s: tensor '%s'", what, t[i].name);
            return st;
        }
    }
    return GF_OK;
}

/* Reserve room for a frame with tensors, so a big frame is one allocation. */
static gf_status reserve_tensors(gf_buf *b, size_t fixed, const gf_ipc_tensor *t, uint32_t n,
                                 bool gather, gf_err *err)
{
    uint64_t total = fixed, data = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t one;
        if (!tensor_wire_size(&t[i], total, &one) || !gf_u64_add(total, one, &total))
            return gf_err_set(err, GF_ERR_OVERFLOW, "frame size overflows");
        if (t[i].shm_key == NULL) /* a shm tensor's bytes are not in the frame */
            data += t[i].t.nbytes;
    }
    if (b->limit != 0 && (b->len > b->limit || total > b->limit - b->len))
        return gf_err_set(err, GF_ERR_TOO_LARGE,
                          "a frame of %llu bytes is over the limit of %zu bytes",
                          (unsigned long long)total, b->limit);
    if (total > SIZE_MAX)
        return gf_err_set(err, GF_ERR_OVERFLOW, "frame size overflows");
    if (gather) /* only the fields go into b (the limit is the whole frame's) */
        total -= data;
    gf_status st = gf_buf_reserve(b, (size_t)total);
    if (st != GF_OK)
        return gf_err_set(err, st, "cannot reserve a frame of %llu bytes: %s",
                          (unsigned long long)total, gf_strerror(st));
    return GF_OK;
}

gf_status gf_ipc_encode_empty(gf_buf *b, gf_ipc_type type, uint64_t id, gf_err *err)
{
    const gf_ipc_msg_info *mi = gf_ipc_msg_info_of((uint32_t)type);
    if (mi == NULL || !mi->empty)
        return gf_err_set(err, GF_ERR_INVALID, "message type %d does not have an empty payload",
                          (int)type);
    enc e;
    enc_begin(&e, b, type, id);
    return enc_finish(&e, type, err);
}

gf_status gf_ipc_encode_ready(gf_buf *b, uint64_t id, const gf_ipc_ready *m, gf_err *err)
{
    enc e;
    enc_begin(&e, b, GF_IPC_READY, id);
    put_u32(&e, m->protocol_version, "protocol_version");
    put_u32(&e, (uint32_t)m->worker_id, "worker_id");
    put_u32(&e, (uint32_t)m->pid, "pid");
    put_u32(&e, m->flags, "flags");
    put_u32(&e, (uint32_t)m->device_kind, "device_kind");
    put_u32(&e, (uint32_t)m->device_index, "device_index");
    put_u32(&e, (uint32_t)m->cc_major, "cc_major");
    put_u32(&e, (uint32_t)m->cc_minor, "cc_minor");
    put_u32(&e, (uint32_t)m->pcie_gen, "pcie_gen");
    put_u32(&e, (uint32_t)m->pcie_width, "pcie_width");
    put_u32(&e, (uint32_t)m->policy, "policy");
    put_u64(&e, m->total_memory, "total_memory");
    put_u64(&e, m->free_memory, "free_memory");
    put_u64(&e, m->device_budget, "device_budget");
    put_u64(&e, m->host_budget, "host_budget");
    put_u64(&e, m->page_size, "page_size");
    put_u64(&e, m->max_frame, "max_frame");
    put_u64(&e, m->link_peak_mbps, "link_peak_mbps");
    put_str(&e, m->device_name, GF_IPC_MAX_MESSAGE, "device_name");
    return enc_finish(&e, GF_IPC_READY, err);
}

gf_status gf_ipc_encode_load(gf_buf *b, uint64_t id, const gf_ipc_load *m, gf_err *err)
{
    enc e;
    enc_begin(&e, b, GF_IPC_LOAD, id);
    put_str(&e, m->key, GF_IPC_MAX_KEY, "key");
    put_str_n(&e, m->manifest, m->manifest_len, GF_IPC_MAX_TEXT, "manifest");
    put_str(&e, m->weights_path, GF_IPC_MAX_PATH, "weights_path");
    put_str(&e, m->plugin_path, GF_IPC_MAX_PATH, "plugin_path");
    put_u32(&e, (uint32_t)m->tier, "tier");
    return enc_finish(&e, GF_IPC_LOAD, err);
}

gf_status gf_ipc_encode_loaded(gf_buf *b, uint64_t id, const gf_ipc_loaded *m, gf_err *err)
{
    enc e;
    enc_begin(&e, b, GF_IPC_LOADED, id);
    put_u32(&e, (uint32_t)m->tier, "tier");
    put_u32(&e, m->n_params, "n_params");
    put_u64(&e, m->device_bytes, "device_bytes");
    put_u64(&e, m->host_bytes, "host_bytes");
    put_u64(&e, m->prepare_us, "prepare_us");
    return enc_finish(&e, GF_IPC_LOADED, err);
}

gf_status gf_ipc_encode_unload(gf_buf *b, uint64_t id, const gf_ipc_unload *m, gf_err *err)
{
    enc e;
    enc_begin(&e, b, GF_IPC_UNLOAD, id);
    put_str(&e, m->key, GF_IPC_MAX_KEY, "key");
    return enc_finish(&e, GF_IPC_UNLOAD, err);
}

gf_status gf_ipc_encode_shm_forget(gf_buf *b, uint64_t id, const char *key, gf_err *err)
{
    if (key == NULL || key[0] == '\0')
        return gf_err_set(err, GF_ERR_INVALID, "SHM_FORGET: an empty shared memory key");
    enc e;
    enc_begin(&e, b, GF_IPC_SHM_FORGET, id);
    put_str(&e, key, GF_IPC_MAX_SHM_KEY, "shm_key");
    return enc_finish(&e, GF_IPC_SHM_FORGET, err);
}

gf_status gf_ipc_encode_residency(gf_buf *b, uint64_t id, const gf_ipc_residency *m, gf_err *err)
{
    enc e;
    enc_begin(&e, b, GF_IPC_SET_RESIDENCY, id);
    put_str(&e, m->key, GF_IPC_MAX_KEY, "key");
    put_u32(&e, m->pin, "pin");
    put_u32(&e, m->priority, "priority");
    put_u64(&e, m->keep_warm_us, "keep_warm_us");
    return enc_finish(&e, GF_IPC_SET_RESIDENCY, err);
}

static gf_status encode_infer(gf_buf *b, gf_ipc_gather *g, uint64_t id, const gf_ipc_infer *m,
                              gf_err *err)
{
    if (g != NULL)
        g->n = 0;
    gf_status st = check_tensors(m->t, m->n, "INFER", err);
    if (st != GF_OK)
        return st;
    if (m->n_dests > 0 && m->outputs == 0)
        return gf_err_set(err, GF_ERR_INVALID, "INFER: shared memory destinations need an "
                          "outputs mask");
    if (m->n_dests > GF_IPC_MAX_TENSORS)
        return gf_err_set(err, GF_ERR_TOO_LARGE, "INFER: %u shared memory destinations, at "
                          "most %u", m->n_dests, GF_IPC_MAX_TENSORS);
    for (uint32_t i = 0; i < m->n_dests; i++)
        if (m->dests[i].output >= 64 || (m->outputs >> m->dests[i].output & 1) == 0 ||
            m->dests[i].key == NULL || m->dests[i].key[0] == '\0')
            return gf_err_set(err, GF_ERR_INVALID, "INFER: shared memory destination %u names "
                              "output %u, not one asked for, or has no key", i,
                              m->dests[i].output);
    size_t keylen = m->key != NULL ? strlen(m->key) : 0;
    if ((st = reserve_tensors(b, GF_IPC_HEADER_SIZE + 4 + keylen + 1 + 4 + 8, m->t, m->n,
                              g != NULL, err)) != GF_OK)
        return st;
    enc e;
    enc_begin(&e, b, GF_IPC_INFER, id);
    if (g != NULL) {
        g->n = 0;
        e.g = g;
    }
    put_str(&e, m->key, GF_IPC_MAX_KEY, "key");
    put_u32(&e, m->n, "n_tensors");
    for (uint32_t i = 0; i < m->n; i++)
        put_tensor(&e, &m->t[i]);
    if (m->outputs != 0)
        put_u64(&e, m->outputs, "outputs");
    if (m->n_dests > 0) {
        put_u32(&e, m->n_dests, "n_dests");
        for (uint32_t i = 0; i < m->n_dests; i++) {
            const gf_ipc_shm_dest *d = &m->dests[i];
            put_u32(&e, d->output, "dest output");
            put_str(&e, d->key, GF_IPC_MAX_SHM_KEY, "dest shm_key");
            put_u64(&e, d->offset, "dest shm_offset");
            put_u64(&e, d->size, "dest shm_size");
        }
    }
    if (e.st == GF_OK && g == NULL)
        gf_copies_add(GF_COPY_IN, gf_ipc_tensor_bytes(m->t, m->n));
    return enc_finish(&e, GF_IPC_INFER, err);
}

gf_status gf_ipc_encode_infer(gf_buf *b, uint64_t id, const gf_ipc_infer *m, gf_err *err)
{
    return encode_infer(b, NULL, id, m, err);
}

gf_status gf_ipc_encode_infer_gather(gf_buf *b, gf_ipc_gather *g, uint64_t id,
                                     const gf_ipc_infer *m, gf_err *err)
{
    return encode_infer(b, g, id, m, err);
}

static gf_status encode_result(gf_buf *b, gf_ipc_gather *g, uint64_t id,
                               const gf_ipc_result *m, gf_err *err)
{
    if (g != NULL)
        g->n = 0;
    gf_status st = check_tensors(m->t, m->n, "RESULT", err);
    if (st != GF_OK)
        return st;
    if ((st = reserve_tensors(b, GF_IPC_HEADER_SIZE + 8 + 24 + 4, m->t, m->n, g != NULL,
                              err)) != GF_OK)
        return st;
    enc e;
    enc_begin(&e, b, GF_IPC_RESULT, id);
    if (g != NULL) {
        g->n = 0;
        e.g = g;
    }
    put_u32(&e, m->flags, "flags");
    put_u32(&e, (uint32_t)m->source_tier, "source_tier");
    put_u64(&e, m->queue_us, "queue_us");
    put_u64(&e, m->load_us, "load_us");
    put_u64(&e, m->exec_us, "exec_us");
    put_u32(&e, m->n, "n_tensors");
    for (uint32_t i = 0; i < m->n; i++)
        put_tensor(&e, &m->t[i]);
    if (e.st == GF_OK && g == NULL)
        gf_copies_add(GF_COPY_OUT, gf_ipc_tensor_bytes(m->t, m->n));
    return enc_finish(&e, GF_IPC_RESULT, err);
}

gf_status gf_ipc_encode_result(gf_buf *b, uint64_t id, const gf_ipc_result *m, gf_err *err)
{
    return encode_result(b, NULL, id, m, err);
}

gf_status gf_ipc_encode_result_gather(gf_buf *b, gf_ipc_gather *g, uint64_t id,
                                      const gf_ipc_result *m, gf_err *err)
{
    return encode_result(b, g, id, m, err);
}

int gf_ipc_gather_iov(const gf_ipc_gather *g, const gf_buf *b, struct iovec *iov)
{
    for (uint32_t i = 0; i < g->n; i++) {
        const gf_ipc_seg *s = &g->seg[i];
        iov[i].iov_base = s->ext != NULL ? (void *)s->ext : (void *)(b->data + s->off);
        iov[i].iov_len = s->len;
    }
    return (int)g->n;
}

/* Length of s cut to at most max bytes without splitting a UTF-8 sequence. */
static size_t utf8_cut(const char *s, size_t len, size_t max)
{
    if (len <= max)
        return len;
    size_t n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

gf_status gf_ipc_encode_error(gf_buf *b, uint64_t id, gf_status code, const char *message,
                              gf_err *err)
{
    const char *msg = message != NULL ? message : "";
    size_t len = utf8_cut(msg, strlen(msg), GF_IPC_MAX_MESSAGE);
    enc e;
    enc_begin(&e, b, GF_IPC_ERROR, id);
    put_u32(&e, (uint32_t)code, "code");
    put_str_n(&e, msg, len, GF_IPC_MAX_MESSAGE, "message");
    return enc_finish(&e, GF_IPC_ERROR, err);
}

gf_status gf_ipc_encode_event(gf_buf *b, const gf_ipc_event *m, gf_err *err)
{
    const char *msg = m->message != NULL ? m->message : "";
    enc e;
    enc_begin(&e, b, GF_IPC_EVENT, 0);
    put_u64(&e, m->seq, "seq");
    put_u64(&e, m->time_us, "time_us");
    put_u32(&e, m->kind, "kind");
    put_u32(&e, (uint32_t)m->from, "from");
    put_u32(&e, (uint32_t)m->to, "to");
    put_u64(&e, m->bytes, "bytes");
    put_u64(&e, m->micros, "micros");
    put_str(&e, m->key, GF_IPC_MAX_KEY, "key");
    put_str_n(&e, msg, utf8_cut(msg, strlen(msg), GF_IPC_MAX_MESSAGE), GF_IPC_MAX_MESSAGE,
              "message");
    return enc_finish(&e, GF_IPC_EVENT, err);
}

#define GF_IPC_STATS_COUNT_(field, doc) +1
#define GF_IPC_STATS_N (0 GF_IPC_STATS_FIELDS(GF_IPC_STATS_COUNT_))

gf_status gf_ipc_encode_stats(gf_buf *b, uint64_t id, const gf_ipc_stats *m, gf_err *err)
{
    enc e;
    enc_begin(&e, b, GF_IPC_STATS, id);
    put_u32(&e, GF_IPC_STATS_N, "count");
#define GF_IPC_STATS_PUT_(field, doc) put_u64(&e, m->field, #field);
    GF_IPC_STATS_FIELDS(GF_IPC_STATS_PUT_)
#undef GF_IPC_STATS_PUT_
    return enc_finish(&e, GF_IPC_STATS, err);
}
