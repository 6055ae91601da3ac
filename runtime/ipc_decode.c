/* gpufaas — the worker protocol: frame headers and the decoder (the
 * encoder is in ipc.c, frame I/O in ipc_io.c). See ipc.h. */
#include "ipc.h"
#include "ipc_wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/copies.h"
#include "core/dtype.h"
#include "core/residency.h"
#include "core/tensor.h"
#include "core/utf8.h"

/* A decoded INFER or RESULT: count the share of its tensor bytes that the
 * reader copied out of its read-ahead buffer (f->copied of the payload). */
static void count_read_copies(gf_copy_dir dir, const gf_ipc_frame *f, const gf_ipc_tensor *t,
                              uint32_t n)
{
    if (f->copied == 0 || f->h.payload_len == 0)
        return;
    double share = (double)f->copied / (double)f->h.payload_len;
    gf_copies_add(dir, (uint64_t)((double)gf_ipc_tensor_bytes(t, n) * share + 0.5));
}

/* ---- header ------------------------------------------------------------------- */

gf_status gf_ipc_header_parse(const unsigned char raw[GF_IPC_HEADER_SIZE], uint64_t max_frame,
                              gf_ipc_header *out, gf_err *err)
{
    uint32_t magic = (uint32_t)gf_ipc_le_get(raw, 4);
    uint32_t version = (uint32_t)gf_ipc_le_get(raw + 4, 2);
    out->type = (uint32_t)gf_ipc_le_get(raw + 6, 2);
    out->request_id = gf_ipc_le_get(raw + 8, 8);
    out->payload_len = gf_ipc_le_get(raw + 16, 8);
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
    if (f->payload != NULL && f->free_fn != NULL)
        f->free_fn(f->free_ctx, f->payload);
    else
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
    uint64_t v = gf_ipc_le_get(d->p + d->pos, n);
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
    bool in_shm = (dtype & GF_IPC_TENSOR_SHM) != 0;
    dtype &= ~GF_IPC_TENSOR_SHM;
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
    if (in_shm) { /* the bytes are in the object: checked by whoever maps it */
        out->shm_key = get_str(d, GF_IPC_MAX_SHM_KEY, false, NULL, "shm_key");
        out->shm_offset = get_u64(d, "shm_offset");
        if (d->st != GF_OK)
            return false;
        if (out->shm_key[0] == '\0')
            return dec_fail(d, "shm_key", "tensor '%s': an empty shared memory key", out->name);
        if (nbytes > SIZE_MAX || out->shm_offset > UINT64_MAX - nbytes)
            return dec_fail(d, "shm_offset", "tensor '%s': offset + size overflows", out->name);
        t->nbytes = (size_t)nbytes;
        t->data = NULL;
        return true;
    }
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

gf_status gf_ipc_decode_shm_forget(const gf_ipc_frame *f, const char **key, gf_err *err)
{
    dec d;
    *key = NULL;
    if (!dec_begin(&d, f, GF_IPC_SHM_FORGET, err))
        return d.st;
    *key = get_str(&d, GF_IPC_MAX_SHM_KEY, false, NULL, "shm_key");
    if (d.st == GF_OK && (*key)[0] == '\0')
        dec_fail(&d, "shm_key", "an empty shared memory key");
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

/* INFER's shared memory destinations (after its outputs mask). */
static bool get_dests(dec *d, gf_ipc_infer *out)
{
    uint32_t n = get_u32(d, "n_dests");
    if (d->st != GF_OK)
        return false;
    if (n == 0 || n > GF_IPC_MAX_TENSORS)
        return dec_fail(d, "n_dests", "%u destinations: 1 to %u (none is the count left out)",
                        n, GF_IPC_MAX_TENSORS);
    /* u32 output, str key (>= 2 bytes), u64 offset, u64 size */
    if ((uint64_t)n * (4 + 4 + 2 + 16) > d->len - d->pos)
        return dec_fail(d, "n_dests", "%u destinations cannot fit in the %llu bytes left", n,
                        (unsigned long long)(d->len - d->pos));
    gf_ipc_shm_dest *ds = calloc(n, sizeof *ds);
    if (ds == NULL) {
        d->st = gf_err_set(d->err, GF_ERR_NOMEM, "%s frame: out of memory for %u destinations",
                           d->msg, n);
        return false;
    }
    out->dests = ds;
    uint64_t seen = 0;
    for (uint32_t i = 0; i < n; i++) {
        ds[i].output = get_u32(d, "dest output");
        ds[i].key = get_str(d, GF_IPC_MAX_SHM_KEY, false, NULL, "dest shm_key");
        ds[i].offset = get_u64(d, "dest shm_offset");
        ds[i].size = get_u64(d, "dest shm_size");
        if (d->st != GF_OK)
            return false;
        uint32_t o = ds[i].output;
        if (o >= 64 || (out->outputs >> o & 1) == 0)
            return dec_fail(d, "dest output", "output %u is not among those asked for", o);
        if (seen >> o & 1)
            return dec_fail(d, "dest output", "output %u has two destinations", o);
        seen |= (uint64_t)1 << o;
        if (ds[i].key[0] == '\0')
            return dec_fail(d, "dest shm_key", "an empty shared memory key");
        if (ds[i].offset > UINT64_MAX - ds[i].size)
            return dec_fail(d, "dest shm_offset", "offset + size overflows");
    }
    out->n_dests = n;
    return true;
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
    if (d.st == GF_OK && d.pos < d.len)
        get_dests(&d, out);
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
    free(m->dests);
    m->dests = NULL;
    m->n_dests = 0;
}

void gf_ipc_result_deinit(gf_ipc_result *m)
{
    if (m == NULL)
        return;
    free(m->t);
    m->t = NULL;
    m->n = 0;
}
