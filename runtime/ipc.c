/* gpufaas — the worker protocol: the codec (frame I/O is in ipc_io.c). See ipc.h. */
#include "core/clock.h"
#include "ipc.h"

#include "core/residency.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

static uint64_t le_get(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* ---- encoding ---------------------------------------------------------------- */

/* An encoder appends to b; the first failure sticks, and finish() rolls the
 * buffer back to where the frame began. */
typedef struct {
    gf_buf *b;
    size_t start; /* b->len when the frame began */
    gf_status st;
    const char *what; /* the field that failed */
} enc;

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
        size_t payload = e->b->len - e->start - GF_IPC_HEADER_SIZE;
        le_put((unsigned char *)e->b->data + e->start + 16, payload, 8);
        return GF_OK;
    }
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
    put_u32(e, d->dtype, "dtype");
    put_u32(e, d->rank, "rank");
    for (int32_t i = 0; i < d->rank; i++)
        put_u64(e, (uint64_t)d->shape[i], "shape");
    put_u64(e, d->nbytes, "nbytes");
    static const unsigned char zeros[8] = {0};
    if (e->st == GF_OK)
        put_bytes(e, zeros, (8 - (e->b->len - e->start) % 8) % 8, "padding");
    put_bytes(e, d->data, d->nbytes, "tensor data");
}

static uint64_t tensor_bytes(const gf_ipc_tensor *t, uint32_t n)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n; i++)
        sum += t[i].t.nbytes;
    return sum;
}

/* A decoded INFER or RESULT: count the share of its tensor bytes that the
 * reader copied out of its read-ahead buffer (f->copied of the payload). */
static void count_read_copies(gf_copy_dir dir, const gf_ipc_frame *f, const gf_ipc_tensor *t,
                              uint32_t n)
{
    if (f->copied == 0 || f->h.payload_len == 0)
        return;
    double share = (double)f->copied / (double)f->h.payload_len;
    gf_copies_add(dir, (uint64_t)((double)tensor_bytes(t, n) * share + 0.5));
}

/* Check tensors before encoding them: what an encoder must not put on the
 * wire because the decoder would reject it. */
static gf_status check_tensors(const gf_ipc_tensor *t, uint32_t n, const char *what, gf_err *err)
{
    if (n > GF_IPC_MAX_TENSORS)
        return gf_err_set(err, GF_ERR_TOO_LARGE, "%s: %u tensors, at most %u", what, n,
                          GF_IPC_MAX_TENSORS);
    for (uint32_t i = 0; i < n; i++) {
        gf_status st = gf_tensor_check_data(&t[i].t, err);
        if (st != GF_OK) {
            gf_err_prefix(err, "%s: tensor '%s'", what, t[i].name);
            return st;
        }
    }
    return GF_OK;
}

/* Reserve room for a frame with tensors, so a big frame is one allocation. */
static gf_status reserve_tensors(gf_buf *b, size_t fixed, const gf_ipc_tensor *t, uint32_t n,
                                 gf_err *err)
{
    uint64_t total = fixed;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t one;
        if (!tensor_wire_size(&t[i], total, &one) || !gf_u64_add(total, one, &total))
            return gf_err_set(err, GF_ERR_OVERFLOW, "frame size overflows");
    }
    if (b->limit != 0 && (b->len > b->limit || total > b->limit - b->len))
        return gf_err_set(err, GF_ERR_TOO_LARGE,
                          "a frame of %llu bytes is over the limit of %zu bytes",
                          (unsigned long long)total, b->limit);
    if (total > SIZE_MAX)
        return gf_err_set(err, GF_ERR_OVERFLOW, "frame size overflows");
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

gf_status gf_ipc_encode_infer(gf_buf *b, uint64_t id, const gf_ipc_infer *m, gf_err *err)
{
    gf_status st = check_tensors(m->t, m->n, "INFER", err);
    if (st != GF_OK)
        return st;
    size_t keylen = m->key != NULL ? strlen(m->key) : 0;
    if ((st = reserve_tensors(b, GF_IPC_HEADER_SIZE + 4 + keylen + 1 + 4 + 8, m->t, m->n,
                              err)) != GF_OK)
        return st;
    enc e;
    enc_begin(&e, b, GF_IPC_INFER, id);
    put_str(&e, m->key, GF_IPC_MAX_KEY, "key");
    put_u32(&e, m->n, "n_tensors");
    for (uint32_t i = 0; i < m->n; i++)
        put_tensor(&e, &m->t[i]);
    if (m->outputs != 0)
        put_u64(&e, m->outputs, "outputs");
    if (e.st == GF_OK)
        gf_copies_add(GF_COPY_IN, tensor_bytes(m->t, m->n));
    return enc_finish(&e, GF_IPC_INFER, err);
}

gf_status gf_ipc_encode_result(gf_buf *b, uint64_t id, const gf_ipc_result *m, gf_err *err)
{
    gf_status st = check_tensors(m->t, m->n, "RESULT", err);
    if (st != GF_OK)
        return st;
    if ((st = reserve_tensors(b, GF_IPC_HEADER_SIZE + 8 + 24 + 4, m->t, m->n, err)) != GF_OK)
        return st;
    enc e;
    enc_begin(&e, b, GF_IPC_RESULT, id);
    put_u32(&e, m->flags, "flags");
    put_u32(&e, (uint32_t)m->source_tier, "source_tier");
    put_u64(&e, m->queue_us, "queue_us");
    put_u64(&e, m->load_us, "load_us");
    put_u64(&e, m->exec_us, "exec_us");
    put_u32(&e, m->n, "n_tensors");
    for (uint32_t i = 0; i < m->n; i++)
        put_tensor(&e, &m->t[i]);
    if (e.st == GF_OK)
        gf_copies_add(GF_COPY_OUT, tensor_bytes(m->t, m->n));
    return enc_finish(&e, GF_IPC_RESULT, err);
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

/* ---- header ------------------------------------------------------------------- */

gf_status gf_ipc_header_parse(const unsigned char raw[GF_IPC_HEADER_SIZE], uint64_t max_frame,
                              gf_ipc_header *out, gf_err *err)
{
    uint32_t magic = (uint32_t)le_get(raw, 4);
    uint32_t version = (uint32_t)le_get(raw + 4, 2);
    out->type = (uint32_t)le_get(raw + 6, 2);
    out->request_id = le_get(raw + 8, 8);
    out->payload_len = le_get(raw + 16, 8);
    if (magic != GF_IPC_MAGIC)
        return gf_err_set(err, GF_ERR_PROTOCOL, "bad frame magic 0x%08x (expected 0x%08x)", magic,
                          GF_IPC_MAGIC);
    if (version != GF_IPC_VERSION)
        return gf_err_set(err, GF_ERR_PROTOCOL,
                          "frame of protocol version %u; this side speaks version %u", version,
                          GF_IPC_VERSION);
    const gf_ipc_msg_info *mi = gf_ipc_msg_info_of(out->type);
    if (mi == NULL)
        return gf_err_set(err, GF_ERR_PROTOCOL, "unknown message type %u", out->type);
    if (max_frame == 0)
        max_frame = GF_IPC_DEFAULT_MAX_FRAME;
    if (out->payload_len > max_frame)
        return gf_err_set(err, GF_ERR_TOO_LARGE,
                          "%s frame of %llu payload bytes is over the limit of %llu", mi->name,
                          (unsigned long long)out->payload_len, (unsigned long long)max_frame);
    if (mi->empty && out->payload_len != 0)
        return gf_err_set(err, GF_ERR_PROTOCOL, "%s frame must be empty but has %llu bytes",
                          mi->name, (unsigned long long)out->payload_len);
    return GF_OK;
}

void gf_ipc_frame_deinit(gf_ipc_frame *f)
{
    if (f == NULL)
        return;
    free(f->payload);
    memset(f, 0, sizeof *f);
}

/* ---- decoding ------------------------------------------------------------------ */

typedef struct {
    const unsigned char *p;
    uint64_t len, pos;
    const char *msg; /* message name for errors */
    gf_status st;
    gf_err *err;
} dec;

static bool dec_fail(dec *d, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool dec_fail(dec *d, const char *field, const char *fmt, ...)
{
    if (d->st != GF_OK)
        return false;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    d->st = gf_err_set(d->err, GF_ERR_PROTOCOL, "%s frame: field '%s' at payload offset %llu: %s",
                       d->msg, field, (unsigned long long)d->pos, what);
    return false;
}

static bool dec_begin(dec *d, const gf_ipc_frame *f, gf_ipc_type type, gf_err *err)
{
    d->p = f->payload;
    d->len = f->payload != NULL ? f->h.payload_len : 0;
    d->pos = 0;
    d->msg = gf_ipc_type_name(type);
    d->st = GF_OK;
    d->err = err;
    if (f->h.type != (uint32_t)type) {
        d->st = gf_err_set(err, GF_ERR_PROTOCOL, "expected a %s frame, got %s (%u)", d->msg,
                           gf_ipc_type_name(f->h.type), f->h.type);
        return false;
    }
    return true;
}

static bool need(dec *d, uint64_t n, const char *field)
{
    if (d->st != GF_OK)
        return false;
    if (n > d->len - d->pos)
        return dec_fail(d, field, "needs %llu bytes but only %llu are left", (unsigned long long)n,
                        (unsigned long long)(d->len - d->pos));
    return true;
}

static uint64_t get_int(dec *d, int n, const char *field)
{
    if (!need(d, (uint64_t)n, field))
        return 0;
    uint64_t v = le_get(d->p + d->pos, n);
    d->pos += (uint64_t)n;
    return v;
}

#define get_u32(d, f) ((uint32_t)get_int((d), 4, (f)))
#define get_i32(d, f) ((int32_t)get_u32((d), (f)))
#define get_u64(d, f) get_int((d), 8, (f))

static const char *get_str(dec *d, uint64_t limit, bool utf8, uint32_t *len_out, const char *field)
{
    uint32_t n = get_u32(d, field);
    if (d->st != GF_OK)
        return NULL;
    if (n > limit) {
        dec_fail(d, field, "string of %u bytes is over the limit of %llu", n,
                 (unsigned long long)limit);
        return NULL;
    }
    if (!need(d, (uint64_t)n + 1, field))
        return NULL;
    const char *s = (const char *)d->p + d->pos;
    if (s[n] != '\0') {
        dec_fail(d, field, "string is not followed by a NUL byte");
        return NULL;
    }
    if (memchr(s, '\0', n) != NULL) {
        dec_fail(d, field, "string contains a NUL byte");
        return NULL;
    }
    size_t bad;
    if (utf8 && !gf_utf8_valid(s, n, &bad)) {
        dec_fail(d, field, "string is not valid UTF-8 (byte %zu)", bad);
        return NULL;
    }
    d->pos += (uint64_t)n + 1;
    if (len_out != NULL)
        *len_out = n;
    return s;
}

/* The smallest tensor record: empty name, rank 0, no data. */
#define GF_IPC_MIN_TENSOR (4 + 1 + 4 + 4 + 8)

static bool get_tensor(dec *d, gf_ipc_tensor *out)
{
    memset(out, 0, sizeof *out);
    out->name = get_str(d, GF_IPC_MAX_NAME, true, NULL, "tensor name");
    uint32_t dtype = get_u32(d, "dtype");
    uint32_t rank = get_u32(d, "rank");
    if (d->st != GF_OK)
        return false;
    if (dtype >= GF_DT_COUNT_ || !gf_dtype_known((gf_dtype)dtype))
        return dec_fail(d, "dtype", "tensor '%s': %u is not a dtype", out->name, dtype);
    if (rank > GF_MAX_RANK)
        return dec_fail(d, "rank", "tensor '%s': rank %u is over %d", out->name, rank, GF_MAX_RANK);
    gf_tensor *t = &out->t;
    t->dtype = (gf_dtype)dtype;
    t->rank = (int32_t)rank;
    t->mem = GF_MEM_HOST;
    t->device_id = -1;
    uint64_t numel = 1;
    for (uint32_t i = 0; i < rank; i++) {
        uint64_t dim = get_u64(d, "shape");
        if (d->st != GF_OK)
            return false;
        if (dim > (uint64_t)INT64_MAX)
            return dec_fail(d, "shape", "tensor '%s': dimension %u is negative", out->name, i);
        t->shape[i] = (int64_t)dim;
        if (!gf_u64_mul(numel, dim, &numel))
            return dec_fail(d, "shape", "tensor '%s': element count overflows", out->name);
    }
    uint64_t nbytes = get_u64(d, "nbytes");
    if (d->st != GF_OK)
        return false;
    uint64_t want = 0;
    if (t->dtype != GF_DT_BYTES && !gf_u64_mul(numel, gf_dtype_size(t->dtype), &want))
        return dec_fail(d, "nbytes", "tensor '%s': its byte size overflows", out->name);
    if (t->dtype != GF_DT_BYTES && want != nbytes)
        return dec_fail(d, "nbytes", "tensor '%s': %llu bytes but its shape and dtype need %llu",
                        out->name, (unsigned long long)nbytes, (unsigned long long)want);
    /* data starts at the next multiple of 8 counted from the frame start */
    uint64_t pad = (8 - (d->pos + GF_IPC_HEADER_SIZE) % 8) % 8;
    if (!need(d, pad, "padding"))
        return false;
    for (uint64_t i = 0; i < pad; i++)
        if (d->p[d->pos + i] != 0)
            return dec_fail(d, "padding", "tensor '%s': padding byte is not zero", out->name);
    d->pos += pad;
    if (!need(d, nbytes, "tensor data"))
        return false;
    t->nbytes = (size_t)nbytes;
    t->data = (void *)(d->p + d->pos);
    if (t->dtype == GF_DT_BYTES) {
        gf_err e;
        if (gf_bytes_check(t->data, t->nbytes, numel, &e) != GF_OK)
            return dec_fail(d, "tensor data", "tensor '%s': %s", out->name, e.msg);
    }
    d->pos += nbytes;
    return true;
}

static bool get_tensors(dec *d, uint32_t *n_out, gf_ipc_tensor **t_out)
{
    uint32_t n = get_u32(d, "n_tensors");
    if (d->st != GF_OK)
        return false;
    if (n > GF_IPC_MAX_TENSORS)
        return dec_fail(d, "n_tensors", "%u tensors, at most %u", n, GF_IPC_MAX_TENSORS);
    if ((uint64_t)n * GF_IPC_MIN_TENSOR > d->len - d->pos)
        return dec_fail(d, "n_tensors", "%u tensors cannot fit in the %llu bytes left", n,
                        (unsigned long long)(d->len - d->pos));
    if (n == 0)
        return true;
    gf_ipc_tensor *t = calloc(n, sizeof *t);
    if (t == NULL) {
        d->st =
            gf_err_set(d->err, GF_ERR_NOMEM, "%s frame: out of memory for %u tensors", d->msg, n);
        return false;
    }
    *t_out = t;
    for (uint32_t i = 0; i < n; i++)
        if (!get_tensor(d, &t[i]))
            return false;
    *n_out = n;
    return true;
}

static gf_status dec_end(dec *d)
{
    if (d->st == GF_OK && d->pos != d->len)
        dec_fail(d, "end", "%llu bytes left over after the last field",
                 (unsigned long long)(d->len - d->pos));
    return d->st;
}

gf_status gf_ipc_decode_ready(const gf_ipc_frame *f, gf_ipc_ready *out, gf_err *err)
{
    dec d;
    memset(out, 0, sizeof *out);
    if (!dec_begin(&d, f, GF_IPC_READY, err))
        return d.st;
    out->protocol_version = get_u32(&d, "protocol_version");
    out->worker_id = get_i32(&d, "worker_id");
    out->pid = get_i32(&d, "pid");
    out->flags = get_u32(&d, "flags");
    out->device_kind = get_i32(&d, "device_kind");
    out->device_index = get_i32(&d, "device_index");
    out->cc_major = get_i32(&d, "cc_major");
    out->cc_minor = get_i32(&d, "cc_minor");
    out->pcie_gen = get_i32(&d, "pcie_gen");
    out->pcie_width = get_i32(&d, "pcie_width");
    out->policy = get_i32(&d, "policy");
    out->total_memory = get_u64(&d, "total_memory");
    out->free_memory = get_u64(&d, "free_memory");
    out->device_budget = get_u64(&d, "device_budget");
    out->host_budget = get_u64(&d, "host_budget");
    out->page_size = get_u64(&d, "page_size");
    out->max_frame = get_u64(&d, "max_frame");
    out->link_peak_mbps = get_u64(&d, "link_peak_mbps");
    out->device_name = get_str(&d, GF_IPC_MAX_MESSAGE, true, NULL, "device_name");
    return dec_end(&d);
}

gf_status gf_ipc_decode_load(const gf_ipc_frame *f, gf_ipc_load *out, gf_err *err)
{
    dec d;
    memset(out, 0, sizeof *out);
    if (!dec_begin(&d, f, GF_IPC_LOAD, err))
        return d.st;
    out->key = get_str(&d, GF_IPC_MAX_KEY, true, NULL, "key");
    out->manifest = get_str(&d, GF_IPC_MAX_TEXT, true, &out->manifest_len, "manifest");
    out->weights_path = get_str(&d, GF_IPC_MAX_PATH, false, NULL, "weights_path");
    out->plugin_path = get_str(&d, GF_IPC_MAX_PATH, false, NULL, "plugin_path");
    out->tier = get_i32(&d, "tier");
    return dec_end(&d);
}

gf_status gf_ipc_decode_loaded(const gf_ipc_frame *f, gf_ipc_loaded *out, gf_err *err)
{
    dec d;
    memset(out, 0, sizeof *out);
    if (!dec_begin(&d, f, GF_IPC_LOADED, err))
        return d.st;
    out->tier = get_i32(&d, "tier");
    out->n_params = get_u32(&d, "n_params");
    out->device_bytes = get_u64(&d, "device_bytes");
    out->host_bytes = get_u64(&d, "host_bytes");
    out->prepare_us = get_u64(&d, "prepare_us");
    return dec_end(&d);
}

gf_status gf_ipc_decode_unload(const gf_ipc_frame *f, gf_ipc_unload *out, gf_err *err)
{
    dec d;
    memset(out, 0, sizeof *out);
    if (!dec_begin(&d, f, GF_IPC_UNLOAD, err))
        return d.st;
    out->key = get_str(&d, GF_IPC_MAX_KEY, true, NULL, "key");
    return dec_end(&d);
}

gf_status gf_ipc_decode_residency(const gf_ipc_frame *f, gf_ipc_residency *out, gf_err *err)
{
    dec d;
    memset(out, 0, sizeof *out);
    if (!dec_begin(&d, f, GF_IPC_SET_RESIDENCY, err))
        return d.st;
    out->key = get_str(&d, GF_IPC_MAX_KEY, true, NULL, "key");
    out->pin = get_u32(&d, "pin");
    out->priority = get_u32(&d, "priority");
    out->keep_warm_us = get_u64(&d, "keep_warm_us");
    if (d.st == GF_OK && out->pin > 1)
        dec_fail(&d, "pin", "%u is not 0 or 1", out->pin);
    if (d.st == GF_OK && out->priority >= GF_PRIORITY_COUNT)
        dec_fail(&d, "priority", "%u is not a priority class (0 low, 1 normal, 2 high)",
                 out->priority);
    if (d.st == GF_OK && out->keep_warm_us > GF_KEEP_WARM_MAX_US)
        dec_fail(&d, "keep_warm_us", "%llu is over a day", (unsigned long long)out->keep_warm_us);
    return dec_end(&d);
}

gf_status gf_ipc_decode_infer(const gf_ipc_frame *f, gf_ipc_infer *out, gf_err *err)
{
    dec d;
    memset(out, 0, sizeof *out);
    if (!dec_begin(&d, f, GF_IPC_INFER, err))
        return d.st;
    out->key = get_str(&d, GF_IPC_MAX_KEY, true, NULL, "key");
    get_tensors(&d, &out->n, &out->t);
    if (d.st == GF_OK && d.pos < d.len) {
        out->outputs = get_u64(&d, "outputs");
        if (d.st == GF_OK && out->outputs == 0)
            dec_fail(&d, "outputs", "an outputs mask of 0 (all outputs is the mask left out)");
    }
    gf_status st = dec_end(&d);
    if (st == GF_OK)
        count_read_copies(GF_COPY_IN, f, out->t, out->n);
    return st;
}

gf_status gf_ipc_decode_result(const gf_ipc_frame *f, gf_ipc_result *out, gf_err *err)
{
    dec d;
    memset(out, 0, sizeof *out);
    if (!dec_begin(&d, f, GF_IPC_RESULT, err))
        return d.st;
    out->flags = get_u32(&d, "flags");
    out->source_tier = get_i32(&d, "source_tier");
    out->queue_us = get_u64(&d, "queue_us");
    out->load_us = get_u64(&d, "load_us");
    out->exec_us = get_u64(&d, "exec_us");
    get_tensors(&d, &out->n, &out->t);
    gf_status st = dec_end(&d);
    if (st == GF_OK)
        count_read_copies(GF_COPY_OUT, f, out->t, out->n);
    return st;
}

gf_status gf_ipc_decode_error(const gf_ipc_frame *f, gf_ipc_error *out, gf_err *err)
{
    dec d;
    memset(out, 0, sizeof *out);
    if (!dec_begin(&d, f, GF_IPC_ERROR, err))
        return d.st;
    out->code = get_u32(&d, "code");
    out->message = get_str(&d, GF_IPC_MAX_MESSAGE, true, NULL, "message");
    return dec_end(&d);
}

gf_status gf_ipc_decode_event(const gf_ipc_frame *f, gf_ipc_event *out, gf_err *err)
{
    dec d;
    memset(out, 0, sizeof *out);
    if (!dec_begin(&d, f, GF_IPC_EVENT, err))
        return d.st;
    out->seq = get_u64(&d, "seq");
    out->time_us = get_u64(&d, "time_us");
    out->kind = get_u32(&d, "kind");
    out->from = get_i32(&d, "from");
    out->to = get_i32(&d, "to");
    out->bytes = get_u64(&d, "bytes");
    out->micros = get_u64(&d, "micros");
    out->key = get_str(&d, GF_IPC_MAX_KEY, true, NULL, "key");
    out->message = get_str(&d, GF_IPC_MAX_MESSAGE, true, NULL, "message");
    return dec_end(&d);
}

gf_status gf_ipc_decode_stats(const gf_ipc_frame *f, gf_ipc_stats *out, gf_err *err)
{
    dec d;
    memset(out, 0, sizeof *out);
    if (!dec_begin(&d, f, GF_IPC_STATS, err))
        return d.st;
    uint32_t n = get_u32(&d, "count");
    if (d.st == GF_OK && (uint64_t)n * 8 != d.len - d.pos)
        dec_fail(&d, "count", "%u fields need %llu bytes, %llu are left", n,
                 (unsigned long long)n * 8, (unsigned long long)(d.len - d.pos));
    uint32_t i = 0;
#define GF_IPC_STATS_GET_(field, doc)                                                              \
    if (i++ < n)                                                                                   \
        out->field = get_u64(&d, #field);
    GF_IPC_STATS_FIELDS(GF_IPC_STATS_GET_)
#undef GF_IPC_STATS_GET_
    if (d.st == GF_OK)
        d.pos = d.len; /* fields appended by a newer side are ignored */
    return dec_end(&d);
}

void gf_ipc_infer_deinit(gf_ipc_infer *m)
{
    if (m == NULL)
        return;
    free(m->t);
    m->t = NULL;
    m->n = 0;
}

void gf_ipc_result_deinit(gf_ipc_result *m)
{
    if (m == NULL)
        return;
    free(m->t);
    m->t = NULL;
    m->n = 0;
}
