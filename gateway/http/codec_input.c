/* gpufaas — one input of an inference request (gateway/http): its shape,
 * and its data read straight into a typed buffer from JSON (range-checked
 * per type), taken from the binary part of the body, or from a registered
 * shared memory region. The request around it is walked by codec.c. */
#include "gateway/http/codec_impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/bytes.h"
#include "core/copies.h"
#include "core/dtype.h"
#include "core/json.h"
#include "core/tensor.h"
#include "core/utf8.h"
#include "functions/manifest.h"

/* Count the scalars of a "data" value (a scalar or nested arrays of them),
 * rejecting anything that cannot be a tensor element. */
gf_status gf_codec_scan_data(gf_parse_ctx *c, gf_input_acc *in, uint64_t *leaves)
{
    gf_json_lexer *j = &c->j;
    int ch = gf_json_lex_peek(j);
    if (ch == '[') {
        bool first = true, done;
        gf_status st;
        for (;;) {
            if ((st = gf_json_lex_element(j, &first, &done)) != GF_OK)
                return st;
            if (done)
                return GF_OK;
            if ((st = gf_codec_scan_data(c, in, leaves)) != GF_OK)
                return st;
        }
    }
    if (ch == '{' || ch == 'n') {
        const char *what = ch == '{' ? "an object" : "null";
        return gf_err_set(j->err, GF_ERR_INVALID,
                          "input '%s': data holds %s at byte %zu; tensor data is numbers, "
                          "booleans or (BYTES) strings",
                          in->name != NULL ? in->name : "?", what, j->pos);
    }
    gf_status st = gf_json_lex_skip(j);
    if (st == GF_OK)
        (*leaves)++;
    return st;
}

/* Write the scalars of an already scanned "data" value into dst (numel
 * elements of in->dtype), in row-major order. */
static gf_status fill_data(gf_parse_ctx *c, const gf_input_acc *in, void *dst, uint64_t *idx)
{
    gf_json_lexer *j = &c->j;
    int ch = gf_json_lex_peek(j);
    gf_status st;
    if (ch == '[') {
        bool first = true, done;
        for (;;) {
            if ((st = gf_json_lex_element(j, &first, &done)) != GF_OK)
                return st;
            if (done)
                return GF_OK;
            if ((st = fill_data(c, in, dst, idx)) != GF_OK)
                return st;
        }
    }
    uint64_t k = (*idx)++;
    const char *dt = gf_dtype_kserve_name(in->dtype);
    if (in->dtype == GF_DT_BYTES) { /* dst is the gf_buf of the serialization */
        if (ch != '"')
            return gf_err_set(j->err, GF_ERR_INVALID,
                              "input '%s': element %" PRIu64 " of data is not a string (BYTES)",
                              in->name, k);
        if ((st = gf_json_lex_string(j, &c->str)) != GF_OK)
            return st;
        return gf_bytes_append(dst, c->str.data, c->str.len, j->err);
    }
    if (ch == '"')
        return gf_err_set(j->err, GF_ERR_INVALID,
                          "input '%s': element %" PRIu64 " of data is a string, expected %s",
                          in->name, k, dt);
    if (in->dtype == GF_DT_BOOL) {
        if (ch == 't' && gf_json_lex_literal(j, "true") == GF_OK) {
            ((uint8_t *)dst)[k] = 1;
            return GF_OK;
        }
        if (ch == 'f' && gf_json_lex_literal(j, "false") == GF_OK) {
            ((uint8_t *)dst)[k] = 0;
            return GF_OK;
        }
        return gf_err_set(j->err, GF_ERR_INVALID,
                          "input '%s': element %" PRIu64 " of data is not true or false (BOOL)",
                          in->name, k);
    }
    if (ch == 't' || ch == 'f')
        return gf_err_set(j->err, GF_ERR_INVALID,
                          "input '%s': element %" PRIu64 " of data is a boolean, expected %s",
                          in->name, k, dt);
    gf_json_num n;
    if ((st = gf_json_lex_number(j, &n)) != GF_OK)
        return st;
    bool ok = true;
    bool fp_range = true; /* a floating-point value that rounds to a finite one */
    switch (in->dtype) {
    case GF_DT_F32:
        ((float *)dst)[k] = (float)n.d;
        fp_range = isfinite(((float *)dst)[k]);
        break;
    case GF_DT_F64:
        ((double *)dst)[k] = n.d;
        fp_range = isfinite(n.d);
        break;
    case GF_DT_F16:
        ((uint16_t *)dst)[k] = gf_f32_to_f16((float)n.d);
        fp_range = (((uint16_t *)dst)[k] & 0x7C00u) != 0x7C00u; /* not Inf */
        break;
    case GF_DT_BF16:
        ((uint16_t *)dst)[k] = gf_f32_to_bf16((float)n.d);
        fp_range = (((uint16_t *)dst)[k] & 0x7F80u) != 0x7F80u;
        break;
    case GF_DT_I8:
        ok = n.is_int && n.i >= INT8_MIN && n.i <= INT8_MAX;
        if (ok)
            ((int8_t *)dst)[k] = (int8_t)n.i;
        break;
    case GF_DT_I16:
        ok = n.is_int && n.i >= INT16_MIN && n.i <= INT16_MAX;
        if (ok)
            ((int16_t *)dst)[k] = (int16_t)n.i;
        break;
    case GF_DT_I32:
        ok = n.is_int && n.i >= INT32_MIN && n.i <= INT32_MAX;
        if (ok)
            ((int32_t *)dst)[k] = (int32_t)n.i;
        break;
    case GF_DT_I64:
        ok = n.is_int;
        if (ok)
            ((int64_t *)dst)[k] = n.i;
        break;
    case GF_DT_U8:
        ok = n.is_uint && n.u <= UINT8_MAX;
        if (ok)
            ((uint8_t *)dst)[k] = (uint8_t)n.u;
        break;
    case GF_DT_U16:
        ok = n.is_uint && n.u <= UINT16_MAX;
        if (ok)
            ((uint16_t *)dst)[k] = (uint16_t)n.u;
        break;
    case GF_DT_U32:
        ok = n.is_uint && n.u <= UINT32_MAX;
        if (ok)
            ((uint32_t *)dst)[k] = (uint32_t)n.u;
        break;
    case GF_DT_U64:
        ok = n.is_uint;
        if (ok)
            ((uint64_t *)dst)[k] = n.u;
        break;
    default:
        ok = false;
        break;
    }
    if (!fp_range) /* JSON has no Infinity: a number this large was not meant as one */
        return isinf(n.d) ? gf_err_set(j->err, GF_ERR_INVALID,
                                       "input '%s': element %" PRIu64 " of data is a number "
                                       "beyond the range of FP64, so not representable in %s",
                                       in->name, k, dt)
                          : gf_err_set(j->err, GF_ERR_INVALID,
                                       "input '%s': element %" PRIu64 " of data (%.9g) is beyond "
                                       "the range of %s, not representable in it",
                                       in->name, k, n.d, dt);
    if (!ok)
        return isinf(n.d) ? gf_err_set(j->err, GF_ERR_INVALID,
                                       "input '%s': element %" PRIu64 " of data is an integer "
                                       "beyond the range of %s", in->name, k, dt)
                          : gf_err_set(j->err, GF_ERR_INVALID,
                                       "input '%s': element %" PRIu64 " of data (%.17g) is not "
                                       "%s %s", in->name, k, n.d,
                                       n.integral ? "in the range of" : "an integer, as", dt);
    return GF_OK;
}

gf_status gf_codec_parse_shape(gf_parse_ctx *c, gf_input_acc *in)
{
    gf_json_lexer *j = &c->j;
    bool first = true, done;
    gf_status st;
    in->rank = 0;
    for (;;) {
        if ((st = gf_json_lex_element(j, &first, &done)) != GF_OK)
            return st;
        if (done)
            return GF_OK;
        gf_json_num n;
        int ch = gf_json_lex_peek(j);
        if (ch != '-' && (ch < '0' || ch > '9'))
            return gf_err_set(j->err, GF_ERR_INVALID,
                              "input '%s': shape must be an array of integers",
                              in->name != NULL ? in->name : "?");
        if ((st = gf_json_lex_number(j, &n)) != GF_OK)
            return st;
        if (!n.integral || !n.is_int || n.i < 0)
            return gf_err_set(j->err, GF_ERR_INVALID,
                              "input '%s': shape dimension %d (%.17g) is not a non-negative "
                              "integer",
                              in->name != NULL ? in->name : "?", in->rank, n.d);
        if (in->rank >= GF_MAX_RANK)
            return gf_err_set(j->err, GF_ERR_INVALID,
                              "input '%s': shape has more than %d dimensions",
                              in->name != NULL ? in->name : "?", GF_MAX_RANK);
        in->shape[in->rank++] = n.i;
    }
}

/* The descriptor of input in with data (nbytes, host), checked: a BYTES
 * input's serialization must hold exactly the elements of its shape. */
static gf_status tensor_make(gf_tensor *t, const gf_input_acc *in, void *data, size_t nbytes,
                             gf_err *err)
{
    if (in->dtype != GF_DT_BYTES)
        return gf_tensor_init(t, in->dtype, in->rank, in->shape, data, GF_MEM_HOST, -1, err);
    gf_status st = gf_tensor_init_bytes(t, in->rank, in->shape, data, nbytes, err);
    if (st != GF_OK)
        gf_err_prefix(err, "input '%s'", in->name);
    return st;
}

/* An input whose bytes are in a shared memory region: a reference to them
 * (the worker reads them there), which keeps the region until the request
 * is done. */
static gf_status input_from_shm(gf_parse_ctx *c, gf_input_acc *in, uint64_t nbytes,
                                gf_gw_tensor *out)
{
    gf_err *err = c->j.err;
    char what[96];
    snprintf(what, sizeof what, "input '%s'", in->name);
    if (in->has_bin || in->has_data)
        return gf_err_set(err, GF_ERR_INVALID, "%s has data and a shared memory region", what);
    if (!in->shm.has || !in->shm.has_size)
        return gf_err_set(err, GF_ERR_INVALID, "%s: shared_memory_region and "
                          "shared_memory_byte_size go together", what);
    if (in->dtype == GF_DT_BYTES)
        nbytes = in->shm.size; /* the serialization's length, checked below */
    if (in->shm.size != nbytes || nbytes > SIZE_MAX)
        return gf_err_set(err, GF_ERR_INVALID, "%s: shared_memory_byte_size is %" PRIu64 " but "
                          "its shape needs %" PRIu64 " bytes", what, in->shm.size, nbytes);
    gf_shm_region *r = gf_shm_get(c->shm, in->shm.region);
    if (r == NULL)
        return gf_err_set(err, GF_ERR_INVALID, "%s: no shared memory region '%s' is registered",
                          what, in->shm.region);
    void *src = gf_shm_span(r, in->shm.offset, nbytes, what, err);
    gf_status st = src == NULL ? GF_ERR_INVALID : GF_OK;
    if (st == GF_OK) {
        memset(out, 0, sizeof *out);
        st = tensor_make(&out->t, in, src, (size_t)nbytes, err); /* BYTES: checked here too */
    }
    if (st != GF_OK) {
        gf_shm_put(r);
        return st;
    }
    out->shm = gf_shm_tensor_ref(r, in->shm.offset, nbytes, true); /* r's reference passes to it */
    out->name = in->name;
    in->name = NULL;
    return GF_OK;
}

/* A BYTES input given as JSON strings: serialised as it is read. */
static gf_status input_json_bytes(gf_parse_ctx *c, gf_input_acc *in, gf_gw_tensor *out)
{
    gf_json_lexer *j = &c->j;
    gf_buf b;
    gf_buf_init(&b);
    size_t save_pos = j->pos, save_depth = j->depth;
    j->pos = in->data_pos;
    j->depth = in->data_depth;
    uint64_t idx = 0;
    gf_status st = fill_data(c, in, &b, &idx);
    j->pos = save_pos;
    j->depth = save_depth;
    size_t len = 0;
    char *data = st == GF_OK ? gf_buf_steal(&b, &len) : NULL;
    gf_buf_deinit(&b);
    if (st != GF_OK)
        return st;
    if (data == NULL)
        return gf_codec_nomem(j);
    memset(out, 0, sizeof *out);
    if ((st = tensor_make(&out->t, in, data, len, j->err)) != GF_OK) {
        free(data);
        return st;
    }
    gf_copies_add(GF_COPY_IN, 2 * (uint64_t)len); /* the body's accumulation, this parse */
    out->name = in->name;
    in->name = NULL;
    return GF_OK;
}

gf_status gf_codec_input_finish(gf_parse_ctx *c, gf_input_acc *in, gf_gw_tensor *out)
{
    gf_json_lexer *j = &c->j;
    gf_err *err = j->err;
    if (in->name == NULL)
        return gf_err_set(err, GF_ERR_INVALID, "an input has no \"name\"");
    for (size_t i = 0; i < c->r->n_inputs; i++)
        if (strcmp(c->r->inputs[i].name, in->name) == 0)
            return gf_err_set(err, GF_ERR_INVALID, "input '%s' appears twice", in->name);
    if (!in->has_dtype)
        return gf_err_set(err, GF_ERR_INVALID, "input '%s' has no \"datatype\"", in->name);
    if (in->dtype == GF_DT_INVALID)
        return gf_err_set(err, GF_ERR_INVALID,
                          "input '%s': unknown datatype '%s' (expected BOOL, UINT8, UINT16, "
                          "UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, BF16, FP32, FP64 or "
                          "BYTES)",
                          in->name, in->dtname);
    if (!in->has_shape)
        return gf_err_set(err, GF_ERR_INVALID, "input '%s' has no \"shape\"", in->name);
    uint64_t numel, nbytes;
    char sh[96];
    gf_shape_str(sh, sizeof sh, in->rank, in->shape);
    if (gf_shape_numel(in->rank, in->shape, &numel, NULL) != GF_OK ||
        !gf_u64_mul(numel, gf_dtype_size(in->dtype), &nbytes) || nbytes > SIZE_MAX)
        return gf_err_set(err, GF_ERR_INVALID, "input '%s': shape %s is too large", in->name, sh);
    if (in->dtype == GF_DT_BYTES && in->has_bin)
        nbytes = in->bin_size; /* the serialization's length, checked in tensor_make */
    if (in->has_bin && in->has_data)
        return gf_err_set(err, GF_ERR_INVALID,
                          "input '%s' has both \"data\" and the binary_data_size parameter",
                          in->name);
    if (in->shm.has || in->shm.has_size)
        return input_from_shm(c, in, nbytes, out);
    if (!in->has_bin && !in->has_data)
        return gf_err_set(err, GF_ERR_INVALID,
                          "input '%s' has no \"data\" (nor a binary_data_size parameter)",
                          in->name);
    if (in->has_bin) {
        if (in->bin_size != nbytes)
            return gf_err_set(err, GF_ERR_INVALID,
                              "input '%s': binary_data_size is %" PRIu64 " but shape %s of %s "
                              "needs %" PRIu64 " bytes",
                              in->name, in->bin_size, sh, gf_dtype_kserve_name(in->dtype), nbytes);
        if (c->bin == NULL)
            return gf_err_set(err, GF_ERR_INVALID,
                              "input '%s' has binary_data_size but the request has no "
                              "Inference-Header-Content-Length header",
                              in->name);
        if (nbytes > c->bin_len - c->bin_used)
            return gf_err_set(err, GF_ERR_INVALID,
                              "input '%s': binary_data_size %" PRIu64 " exceeds the %zu bytes of "
                              "binary data left in the body",
                              in->name, nbytes, c->bin_len - c->bin_used);
    } else {
        if ((in->dtype == GF_DT_F16 || in->dtype == GF_DT_BF16) && !c->half_as_json)
            return gf_err_set(err, GF_ERR_INVALID,
                              "input '%s': %s data must be sent as binary (binary tensor data "
                              "extension); JSON has no %s numbers",
                              in->name, gf_dtype_kserve_name(in->dtype),
                              gf_dtype_kserve_name(in->dtype));
        if (in->leaves != numel)
            return gf_err_set(err, GF_ERR_INVALID,
                              "input '%s': data has %" PRIu64
                              " elements but shape %s needs %" PRIu64,
                              in->name, in->leaves, sh, numel);
    }
    if (in->dtype == GF_DT_BYTES && !in->has_bin)
        return input_json_bytes(c, in, out);
    if (in->has_bin && c->bin_hold != NULL) {
        /* a slice of the body, which the hold keeps alive: no copy (the
         * body's accumulation from MHD's buffer is the one, server.c) */
        void *slice = (void *)(c->bin + c->bin_used);
        memset(out, 0, sizeof *out);
        gf_status st = tensor_make(&out->t, in, slice, (size_t)nbytes, err);
        if (st != GF_OK)
            return st;
        c->bin_used += (size_t)nbytes;
        out->hold = gf_hold_ref(c->bin_hold);
        gf_copies_add(GF_COPY_IN, nbytes);
        out->name = in->name;
        in->name = NULL;
        return GF_OK;
    }
    void *data = malloc(nbytes > 0 ? (size_t)nbytes : 1);
    if (data == NULL)
        return gf_codec_nomem(j);
    if (in->has_bin) {
        if (nbytes > 0)
            memcpy(data, c->bin + c->bin_used, (size_t)nbytes);
        c->bin_used += (size_t)nbytes;
    } else {
        size_t save_pos = j->pos, save_depth = j->depth;
        j->pos = in->data_pos;
        j->depth = in->data_depth;
        uint64_t idx = 0;
        gf_status st = fill_data(c, in, data, &idx);
        j->pos = save_pos;
        j->depth = save_depth;
        if (st != GF_OK) {
            free(data);
            return st;
        }
    }
    memset(out, 0, sizeof *out);
    gf_status st = tensor_make(&out->t, in, data, (size_t)nbytes, err);
    if (st != GF_OK) {
        free(data);
        return st;
    }
    /* copies (core/copies.h): the body's accumulation from MHD's buffer
     * (server.c req_body, or its inflation) and this memcpy or parse */
    gf_copies_add(GF_COPY_IN, 2 * nbytes);
    out->name = in->name;
    in->name = NULL;
    return GF_OK;
}
