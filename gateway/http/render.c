/* gpufaas — inference response rendering (gateway/http/codec.h): a result as
 * a KServe v2 or a /v1 invoke answer, JSON or with the binary tensor data
 * extension; the requests are parsed in codec.c. */
#include "gateway/http/codec.h"

#include "gateway/http/classify.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/copies.h"
#include "core/dtype.h"
#include "core/floatfmt.h"
#include "core/tensor.h"

/* Shortest of %.7g / %.9g that reads back as the same float. */
static gf_status put_float(gf_buf *b, float f)
{
    if (isnan(f))
        return gf_buf_append_str(b, "NaN");
    if (isinf(f))
        return gf_buf_append_str(b, f > 0 ? "Infinity" : "-Infinity");
    if (f == 0 && signbit(f))
        return gf_buf_append_str(b, "-0.0"); /* "-0" reads back as the integer 0 */
    char tmp[32];
    int n = gf_fmt_float_g(tmp, f, 7); /* what "%.7g" writes, without printf */
    float back;
    if (!gf_decimal_to_float_fast(tmp, (size_t)n, &back)) /* strtof's answer, cheaply */
        back = strtof(tmp, NULL);
    if (back != f)
        n = gf_fmt_float_g(tmp, f, 9);
    return gf_buf_append(b, tmp, (size_t)n);
}

static gf_status put_double(gf_buf *b, double d)
{
    if (isnan(d))
        return gf_buf_append_str(b, "NaN");
    if (isinf(d))
        return gf_buf_append_str(b, d > 0 ? "Infinity" : "-Infinity");
    if (d == 0 && signbit(d))
        return gf_buf_append_str(b, "-0.0");
    char tmp[40];
    snprintf(tmp, sizeof tmp, "%.15g", d);
    if (strtod(tmp, NULL) != d)
        snprintf(tmp, sizeof tmp, "%.17g", d);
    return gf_buf_append_str(b, tmp);
}

/* Element k of an integer tensor, widened; false for other dtypes. */
static bool elem_int(const gf_tensor *t, uint64_t k, int64_t *i, uint64_t *u, bool *is_signed)
{
    const void *d = t->data;
    *is_signed = true;
    switch (t->dtype) {
    case GF_DT_I8:
        *i = ((const int8_t *)d)[k];
        return true;
    case GF_DT_I16:
        *i = ((const int16_t *)d)[k];
        return true;
    case GF_DT_I32:
        *i = ((const int32_t *)d)[k];
        return true;
    case GF_DT_I64:
        *i = ((const int64_t *)d)[k];
        return true;
    default:
        break;
    }
    *is_signed = false;
    switch (t->dtype) {
    case GF_DT_U8:
        *u = ((const uint8_t *)d)[k];
        return true;
    case GF_DT_U16:
        *u = ((const uint16_t *)d)[k];
        return true;
    case GF_DT_U32:
        *u = ((const uint32_t *)d)[k];
        return true;
    case GF_DT_U64:
        *u = ((const uint64_t *)d)[k];
        return true;
    default:
        return false;
    }
}

/* A checked BYTES serialization (len bytes) as a JSON array of strings
 * (bytes that are not UTF-8 become U+FFFD, as JSON has no others). */
static gf_status put_bytes_json(gf_buf *b, const char *bytes, size_t len)
{
    gf_status st = gf_buf_append(b, "[", 1);
    size_t pos = 0;
    const char *e;
    uint32_t n;
    for (bool first = true; st == GF_OK && gf_bytes_next(bytes, len, &pos, &e, &n);
         first = false) {
        if (!first)
            st = gf_buf_append(b, ",", 1);
        if (st == GF_OK)
            st = gf_buf_append_json_str(b, e, n);
    }
    return st == GF_OK ? gf_buf_append(b, "]", 1) : st;
}

/* An integer, without printf (core/floatfmt.h). */
static gf_status put_i64(gf_buf *b, int64_t v)
{
    char tmp[GF_FMT_INT_MAX];
    return gf_buf_append(b, tmp, (size_t)gf_fmt_i64(tmp, v));
}

static gf_status put_u64(gf_buf *b, uint64_t v)
{
    char tmp[GF_FMT_INT_MAX];
    return gf_buf_append(b, tmp, (size_t)gf_fmt_u64(tmp, v));
}

/* [d0,d1,...] */
static gf_status put_dims(gf_buf *b, int32_t rank, const int64_t *shape)
{
    gf_status st = gf_buf_append(b, "[", 1);
    for (int32_t d = 0; d < rank && st == GF_OK; d++)
        if (d == 0 || (st = gf_buf_append(b, ",", 1)) == GF_OK)
            st = put_i64(b, shape[d]);
    return st == GF_OK ? gf_buf_append(b, "]", 1) : st;
}

/* "data": [...] flattened, every element of t. */
static gf_status put_data(gf_buf *b, const gf_tensor *t)
{
    if (t->dtype == GF_DT_BYTES)
        return put_bytes_json(b, t->data, t->nbytes);
    uint64_t n = gf_tensor_numel(t);
    gf_status st = gf_buf_append(b, "[", 1);
    const void *d = t->data;
    for (uint64_t k = 0; k < n && st == GF_OK; k++) {
        if (k > 0 && (st = gf_buf_append(b, ",", 1)) != GF_OK)
            break;
        int64_t i;
        uint64_t u;
        bool is_signed;
        if (elem_int(t, k, &i, &u, &is_signed)) {
            st = is_signed ? put_i64(b, i) : put_u64(b, u);
            continue;
        }
        switch (t->dtype) {
        case GF_DT_BOOL:
            st = gf_buf_append_str(b, ((const uint8_t *)d)[k] ? "true" : "false");
            break;
        case GF_DT_F16:
            st = put_float(b, gf_f16_to_f32(((const uint16_t *)d)[k]));
            break;
        case GF_DT_BF16:
            st = put_float(b, gf_bf16_to_f32(((const uint16_t *)d)[k]));
            break;
        case GF_DT_F32:
            st = put_float(b, ((const float *)d)[k]);
            break;
        case GF_DT_F64:
            st = put_double(b, ((const double *)d)[k]);
            break;
        default:
            st = GF_ERR_INTERNAL;
            break;
        }
    }
    if (st == GF_OK)
        st = gf_buf_append(b, "]", 1);
    return st;
}

/* ,"datatype":"FP32","shape":[...] */
static gf_status put_type_shape(gf_buf *b, const gf_tensor *t)
{
    gf_status st = gf_buf_append_str(b, ",\"datatype\":\"");
    if (st == GF_OK)
        st = gf_buf_append_str(b, gf_dtype_kserve_name(t->dtype));
    if (st == GF_OK)
        st = gf_buf_append_str(b, "\",\"shape\":");
    return st == GF_OK ? put_dims(b, t->rank, t->shape) : st;
}

/* ,"parameters":{"binary_data_size":N}} */
static gf_status put_binary_size(gf_buf *b, uint64_t n)
{
    gf_status st = gf_buf_append_str(b, ",\"parameters\":{\"binary_data_size\":");
    if (st == GF_OK)
        st = put_u64(b, n);
    return st == GF_OK ? gf_buf_append(b, "}}", 2) : st;
}

/* One output object; binary: announce binary_data_size instead of data. */
static gf_status put_output(gf_buf *b, const gf_gw_tensor *o, bool binary)
{
    gf_status st = gf_buf_append_str(b, "{\"name\":");
    if (st == GF_OK)
        st = gf_buf_append_json_str(b, o->name, strlen(o->name));
    if (st == GF_OK)
        st = put_type_shape(b, &o->t);
    if (st == GF_OK && binary)
        st = put_binary_size(b, o->t.nbytes);
    else if (st == GF_OK) {
        st = gf_buf_append_str(b, ",\"data\":");
        if (st == GF_OK)
            st = put_data(b, &o->t);
        if (st == GF_OK)
            gf_copies_add(GF_COPY_OUT, o->t.nbytes); /* rendered as JSON */
        if (st == GF_OK)
            st = gf_buf_append(b, "}", 1);
    }
    return st;
}

/* A classified output (classify.h): its BYTES answer. */
typedef struct gf_cls {
    bool on;
    gf_buf bytes;
    int32_t rank;
    int64_t shape[GF_MAX_RANK];
} gf_cls;

/* A classified output: BYTES, as JSON strings or announced as binary. */
static gf_status put_output_bytes(gf_buf *b, const char *name, const gf_cls *c, bool binary)
{
    gf_status st = gf_buf_append_str(b, "{\"name\":");
    if (st == GF_OK)
        st = gf_buf_append_json_str(b, name, strlen(name));
    if (st == GF_OK)
        st = gf_buf_append_str(b, ",\"datatype\":\"BYTES\",\"shape\":");
    if (st == GF_OK)
        st = put_dims(b, c->rank, c->shape);
    if (st == GF_OK && binary)
        st = put_binary_size(b, c->bytes.len);
    else if (st == GF_OK) {
        st = gf_buf_append_str(b, ",\"data\":");
        if (st == GF_OK)
            st = put_bytes_json(b, c->bytes.data, c->bytes.len);
        if (st == GF_OK)
            st = gf_buf_append(b, "}", 1);
    }
    return st;
}

/* An output the request put in a shared memory region: written there, and
 * announced without data. */
static gf_status put_output_shm(gf_buf *b, const gf_gw_tensor *o, const gf_codec_output_sel *sel,
                                gf_err *err)
{
    char what[96];
    snprintf(what, sizeof what, "output '%s'", o->name);
    if (o->t.nbytes > sel->shm_size)
        return gf_err_set(err, GF_ERR_INVALID, "%s has %zu bytes, more than its "
                          "shared_memory_byte_size %" PRIu64, what, o->t.nbytes, sel->shm_size);
    if (!o->placed) { /* it came over the socket (a request the core resubmitted) */
        void *dst = gf_shm_span(sel->shm, sel->shm_offset, o->t.nbytes, what, err);
        if (dst == NULL)
            return GF_ERR_INVALID;
        if (o->t.nbytes > 0)
            memcpy(dst, o->t.data, o->t.nbytes);
        gf_copies_add(GF_COPY_OUT, o->t.nbytes);
    }
    gf_status st = gf_buf_append_str(b, "{\"name\":");
    if (st == GF_OK)
        st = gf_buf_append_json_str(b, o->name, strlen(o->name));
    if (st == GF_OK)
        st = put_type_shape(b, &o->t);
    /* no data and no parameters, as Triton answers: clients (perf_analyzer) read
     * binary_data_size from any parameters an output has */
    return st == GF_OK ? gf_buf_append(b, "}", 1) : st;
}

/* The outputs a request selects: indices into res->outputs, and whether
 * each goes as binary. */
typedef struct gf_sel {
    size_t *idx;
    bool *bin;
    gf_cls *cls;
    size_t n;
} gf_sel;

static void sel_free(gf_sel *s)
{
    for (size_t k = 0; s->cls != NULL && k < s->n; k++)
        gf_buf_deinit(&s->cls[k].bytes);
    free(s->cls); /* idx and bin lie in the same block */
}

static gf_status sel_make(const gf_gw_result *res, const gf_codec_request *req, bool binary_allowed,
                          gf_sel *s, gf_err *err)
{
    size_t cap = res->n_outputs + (req != NULL ? req->n_outputs : 0) + 1;
    /* one block: cls[cap], then idx[cap], then bin[cap] (cap is at most a
     * few hundred: the manifest's and the request's outputs) */
    s->cls = calloc(cap, sizeof *s->cls + sizeof *s->idx + sizeof *s->bin);
    s->idx = s->cls != NULL ? (size_t *)(void *)(s->cls + cap) : NULL;
    s->bin = s->cls != NULL ? (bool *)(void *)(s->idx + cap) : NULL;
    s->n = 0;
    if (s->cls == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory rendering the response");
    bool dflt = binary_allowed && req != NULL && req->binary_output;
    if (req == NULL || req->n_outputs == 0) {
        for (size_t i = 0; i < res->n_outputs; i++) {
            s->idx[i] = i;
            s->bin[i] = dflt;
        }
        s->n = res->n_outputs;
    } else {
        for (size_t k = 0; k < req->n_outputs; k++) {
            size_t i = 0;
            while (i < res->n_outputs && strcmp(res->outputs[i].name, req->outputs[k].name) != 0)
                i++;
            if (i == res->n_outputs) {
                char names[256] = "";
                size_t used = 0;
                for (size_t m = 0; m < res->n_outputs && used < sizeof names; m++)
                    used += (size_t)snprintf(names + used, sizeof names - used, "%s'%s'",
                                             m > 0 ? ", " : "", res->outputs[m].name);
                return gf_err_set(err, GF_ERR_INVALID,
                                  "unknown output '%s' requested (function '%s' has %s)",
                                  req->outputs[k].name, res->function, names);
            }
            s->idx[k] = i;
            s->bin[k] =
                binary_allowed && (req->outputs[k].binary < 0 ? dflt : req->outputs[k].binary == 1);
        }
        s->n = req->n_outputs;
    }
    for (size_t k = 0; k < s->n && binary_allowed; k++) {
        gf_dtype dt = res->outputs[s->idx[k]].t.dtype;
        if (dt == GF_DT_F16 || dt == GF_DT_BF16)
            s->bin[k] = true; /* JSON has no such numbers */
    }
    for (size_t k = 0; req != NULL && k < req->n_outputs && k < s->n; k++) {
        const gf_codec_output_sel *o = &req->outputs[k];
        if (o->classify > 0) {
            gf_cls *c = &s->cls[k];
            const gf_gw_tensor *t = &res->outputs[s->idx[k]];
            gf_buf_init(&c->bytes);
            c->on = true;
            gf_status st = gf_classify(t->name, &t->t, o->classify,
                                       (const char *const *)o->labels, o->n_labels, &c->bytes,
                                       &c->rank, c->shape, err);
            if (st != GF_OK)
                return st;
            s->bin[k] = binary_allowed && (o->binary < 0 ? dflt : o->binary == 1);
        }
        if (o->shm != NULL)
            s->bin[k] = false; /* it goes to its region */
    }
    return GF_OK;
}

/* ,"id":...,"outputs":[...] */
static gf_status put_id_outputs(gf_buf *out, const gf_gw_result *res, const gf_codec_request *req,
                                const gf_sel *s, gf_err *err)
{
    gf_status st = GF_OK;
    if (req != NULL && req->id != NULL) {
        st = gf_buf_append_str(out, ",\"id\":");
        if (st == GF_OK)
            st = gf_buf_append_json_str(out, req->id, strlen(req->id));
    }
    if (st == GF_OK)
        st = gf_buf_append_str(out, ",\"outputs\":[");
    for (size_t k = 0; k < s->n && st == GF_OK; k++) {
        if (k > 0)
            st = gf_buf_append(out, ",", 1);
        const gf_codec_output_sel *o = req != NULL && req->n_outputs > 0 ? &req->outputs[k] : NULL;
        if (st == GF_OK && s->cls[k].on)
            st = put_output_bytes(out, res->outputs[s->idx[k]].name, &s->cls[k], s->bin[k]);
        else if (st == GF_OK && o != NULL && o->shm != NULL)
            st = put_output_shm(out, &res->outputs[s->idx[k]], o, err);
        else if (st == GF_OK)
            st = put_output(out, &res->outputs[s->idx[k]], s->bin[k]);
    }
    return st == GF_OK ? gf_buf_append(out, "]", 1) : st;
}

/* Undo a partial rendering. */
static gf_status render_fail(gf_buf *out, size_t start, gf_status st, gf_err *err)
{
    out->len = start;
    if (out->data != NULL)
        out->data[start] = '\0';
    if (st == GF_ERR_INVALID) /* the request's: a shared memory span too small */
        return st;
    /* a result that cannot be rendered is the server's failure, not the client's */
    if (st == GF_ERR_NOMEM || st == GF_ERR_OVERFLOW || st == GF_ERR_TOO_LARGE)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory rendering the response");
    return gf_err_set(err, GF_ERR_INTERNAL, "cannot render the outputs: %s", gf_strerror(st));
}

/* The one rendering of a result, for both protocols: the head (v2:
 * "model_name" and the version as a string; v1: "function" and the version
 * as a number), the id and outputs, the tail (v1: worker, cold, batch size
 * and timings), then (v2) the binary outputs' bytes. *header_len as
 * gf_codec_render_v2's. */
/* iov: out's bytes from *mark to now as a segment (when there are any). */
static void seg_out(gf_codec_iov *iov, const gf_buf *out, size_t *mark)
{
    if (out->len > *mark) {
        iov->seg[iov->n++] = (gf_codec_seg){NULL, *mark, out->len - *mark};
        *mark = out->len;
    }
}

static gf_status render(const gf_gw_result *res, const char *name, const gf_codec_request *req,
                        bool v2, gf_buf *out, size_t *header_len, gf_codec_iov *iov,
                        gf_err *err)
{
    *header_len = 0;
    size_t start = out->len, mark = start;
    if (iov != NULL)
        iov->n = 0;
    gf_sel s;
    gf_status st = sel_make(res, req, v2, &s, err);
    if (st != GF_OK) {
        sel_free(&s);
        return st;
    }
    st = gf_buf_append_str(out, v2 ? "{\"model_name\":" : "{\"function\":");
    if (st == GF_OK)
        st = gf_buf_append_json_str(out, name, strlen(name));
    if (st == GF_OK)
        st = gf_buf_append_str(out, v2 ? ",\"model_version\":\"" : ",\"version\":");
    if (st == GF_OK)
        st = put_i64(out, res->version);
    if (st == GF_OK && v2)
        st = gf_buf_append(out, "\"", 1);
    if (st == GF_OK)
        st = put_id_outputs(out, res, req, &s, err);
    if (st == GF_OK && v2)
        st = gf_buf_append(out, "}", 1);
    else if (st == GF_OK)
        st = gf_buf_printf(out,
                           ",\"worker\":%d,\"cold\":%s,\"batch_size\":%" PRIu32
                           ",\"timing_us\":{\"queue\":%" PRIu64 ",\"load\":%" PRIu64
                           ",\"exec\":%" PRIu64 ",\"total\":%" PRIu64 "}}",
                           res->worker, res->cold ? "true" : "false", res->batch_size,
                           res->queue_us, res->load_us, res->exec_us, res->total_us);
    size_t json_len = out->len - start;
    bool any_bin = false; /* only v2 selects binary outputs (sel_make) */
    for (size_t k = 0; k < s.n && st == GF_OK; k++) {
        const gf_tensor *t = &res->outputs[s.idx[k]].t;
        any_bin |= s.bin[k];
        if (s.bin[k] && s.cls[k].on && s.cls[k].bytes.len > 0)
            st = gf_buf_append(out, s.cls[k].bytes.data, s.cls[k].bytes.len);
        else if (s.bin[k] && !s.cls[k].on && t->nbytes > 0 && iov != NULL) {
            seg_out(iov, out, &mark); /* sent from where it lies: no copy */
            iov->seg[iov->n++] = (gf_codec_seg){t->data, 0, t->nbytes};
        } else if (s.bin[k] && !s.cls[k].on && t->nbytes > 0) {
            st = gf_buf_append(out, t->data, t->nbytes);
            gf_copies_add(GF_COPY_OUT, t->nbytes);
        }
    }
    sel_free(&s);
    if (st != GF_OK) {
        if (iov != NULL)
            iov->n = 0;
        return render_fail(out, start, st, err);
    }
    if (iov != NULL)
        seg_out(iov, out, &mark);
    *header_len = any_bin ? json_len : 0;
    return GF_OK;
}

gf_status gf_codec_render_v2(const gf_gw_result *res, const char *model_name,
                             const gf_codec_request *req, gf_buf *out, size_t *header_len,
                             gf_err *err)
{
    return render(res, model_name, req, true, out, header_len, NULL, err);
}

gf_status gf_codec_render_v2_iov(const gf_gw_result *res, const char *model_name,
                                 const gf_codec_request *req, gf_buf *out, size_t *header_len,
                                 gf_codec_iov *iov, gf_err *err)
{
    return render(res, model_name, req, true, out, header_len, iov, err);
}

gf_status gf_codec_render_v1(const gf_gw_result *res, const gf_codec_request *req, gf_buf *out,
                             gf_err *err)
{
    size_t header_len;
    return render(res, res->function, req, false, out, &header_len, NULL, err);
}
