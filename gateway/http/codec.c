/* gpufaas — inference request parsing (gateway/http/codec.h); render.c writes the answers. */
#include "gateway/http/codec.h"


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

/* The request is read with runtime/core's JSON lexer (core/json.h), the one
 * grammar of the tree: values are walked in place, "data" straight into
 * typed buffers, and nothing builds a tree. */

static gf_status js_nomem(gf_json_lexer *j)
{
    return gf_err_set(j->err, GF_ERR_NOMEM, "out of memory while parsing the request");
}

/* ---- the request ----------------------------------------------------------------- */

typedef struct gf_parse_ctx {
    gf_json_lexer j;
    bool half_as_json;
    gf_buf key;      /* member names */
    gf_buf str;      /* string values */
    const char *bin; /* binary part of the body (after the JSON header) */
    size_t bin_len;
    size_t bin_used; /* claimed by inputs so far */
    gf_codec_request *r;
    gf_shm_table *shm; /* NULL: shared memory refused */
} gf_parse_ctx;

/* A tensor's shared_memory_* parameters. */
typedef struct gf_shm_ref {
    bool has, has_size;
    char region[GF_SHM_NAME_MAX + 1];
    uint64_t size, offset;
} gf_shm_ref;

/* An input as it is being read: members may come in any order. */
typedef struct gf_input_acc {
    char *name;
    char dtname[24]; /* as given (truncated), for messages */
    gf_dtype dtype;
    bool has_dtype;
    int32_t rank;
    int64_t shape[GF_MAX_RANK];
    bool has_shape;
    bool has_bin;
    uint64_t bin_size;
    bool has_data;
    size_t data_pos;   /* where "data"'s value starts */
    size_t data_depth; /* scanner depth there */
    uint64_t leaves;   /* scalars in "data" */
    gf_shm_ref shm;
} gf_input_acc;

static bool key_is(const gf_buf *k, const char *s)
{
    size_t n = strlen(s);
    return k->len == n && memcmp(k->data, s, n) == 0;
}

/* A copy of the last decoded string as a C string; fails on embedded NUL or
 * an empty string (names are neither). */
static gf_status take_name(gf_parse_ctx *c, const char *what, char **out)
{
    if (c->str.len == 0 || strlen(c->str.data) != c->str.len)
        return gf_err_set(c->j.err, GF_ERR_INVALID, "%s must be a non-empty string without NUL",
                          what);
    *out = strdup(c->str.data);
    return *out == NULL ? js_nomem(&c->j) : GF_OK;
}

/* Count the scalars of a "data" value (a scalar or nested arrays of them),
 * rejecting anything that cannot be a tensor element. */
static gf_status scan_data(gf_parse_ctx *c, gf_input_acc *in, uint64_t *leaves)
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
            if ((st = scan_data(c, in, leaves)) != GF_OK)
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

static gf_status parse_shape(gf_parse_ctx *c, gf_input_acc *in)
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

/* An input's or output's "parameters" object. For an input, binary_data_size
 * is read; for an output, binary_data. */
/* A non-negative integer parameter. */
static gf_status param_u64(gf_parse_ctx *c, const char *what, const char *name, uint64_t *out)
{
    gf_json_lexer *j = &c->j;
    gf_json_num n;
    int ch = gf_json_lex_peek(j);
    if ((ch != '-' && (ch < '0' || ch > '9')) || gf_json_lex_number(j, &n) != GF_OK ||
        !n.integral || !n.is_uint)
        return gf_err_set(j->err, GF_ERR_INVALID, "%s '%s': %s must be a non-negative integer",
                          what, name, c->key.data);
    *out = n.u;
    return GF_OK;
}

/* shared_memory_region / _byte_size / _offset into ref. */
static gf_status parse_shm_param(gf_parse_ctx *c, const char *what, const char *name,
                                 gf_shm_ref *ref)
{
    gf_json_lexer *j = &c->j;
    if (c->shm == NULL)
        return gf_err_set(j->err, GF_ERR_UNSUPPORTED,
                          "%s '%s': the shared-memory extension is not supported here", what,
                          name);
    if (key_is(&c->key, "shared_memory_byte_size")) {
        ref->has_size = true;
        return param_u64(c, what, name, &ref->size);
    }
    if (key_is(&c->key, "shared_memory_offset"))
        return param_u64(c, what, name, &ref->offset);
    gf_status st;
    if (gf_json_lex_peek(j) != '"' || (st = gf_json_lex_string(j, &c->str)) != GF_OK ||
        c->str.len == 0 || c->str.len > GF_SHM_NAME_MAX || strlen(c->str.data) != c->str.len)
        return gf_err_set(j->err, GF_ERR_INVALID, "%s '%s': shared_memory_region must name a "
                          "region", what, name);
    ref->has = true;
    memcpy(ref->region, c->str.data, c->str.len + 1);
    return GF_OK;
}

static gf_status parse_tensor_params(gf_parse_ctx *c, const char *what, const char *name,
                                     gf_input_acc *in, int *binary, gf_shm_ref *shm,
                                     int64_t *classify)
{
    gf_json_lexer *j = &c->j;
    bool first = true, done;
    gf_status st;
    for (;;) {
        if ((st = gf_json_lex_member(j, &first, &c->key, &done)) != GF_OK)
            return st;
        if (done)
            return GF_OK;
        if (in != NULL && key_is(&c->key, "binary_data_size")) {
            gf_json_num n;
            int ch = gf_json_lex_peek(j);
            if ((ch != '-' && (ch < '0' || ch > '9')) || (st = gf_json_lex_number(j, &n)) != GF_OK ||
                !n.integral || !n.is_uint)
                return gf_err_set(j->err, GF_ERR_INVALID,
                                  "%s '%s': binary_data_size must be a non-negative integer", what,
                                  name);
            in->has_bin = true;
            in->bin_size = n.u;
        } else if (binary != NULL && key_is(&c->key, "binary_data")) {
            if (gf_json_lex_peek(j) == 't' && gf_json_lex_literal(j, "true") == GF_OK)
                *binary = 1;
            else if (gf_json_lex_peek(j) == 'f' && gf_json_lex_literal(j, "false") == GF_OK)
                *binary = 0;
            else
                return gf_err_set(j->err, GF_ERR_INVALID,
                                  "%s '%s': binary_data must be true or false", what, name);
        } else if (key_is(&c->key, "shared_memory_region") ||
                   key_is(&c->key, "shared_memory_byte_size") ||
                   key_is(&c->key, "shared_memory_offset")) {
            if ((st = parse_shm_param(c, what, name, shm)) != GF_OK)
                return st;
        } else if (key_is(&c->key, "classification")) {
            uint64_t k;
            if (classify == NULL)
                return gf_err_set(j->err, GF_ERR_INVALID, "%s '%s': classification is a "
                                  "parameter of an output", what, name);
            if ((st = param_u64(c, what, name, &k)) != GF_OK)
                return st;
            if (k < 1 || k > (1u << 20))
                return gf_err_set(j->err, GF_ERR_INVALID, "%s '%s': classification must be a "
                                  "class count >= 1", what, name);
            *classify = (int64_t)k;
        } else if ((st = gf_json_lex_skip(j)) != GF_OK) {
            return st;
        }
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

/* An input whose bytes are in a shared memory region: copied from it. */
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
    const void *src = gf_shm_span(r, in->shm.offset, nbytes, what, err);
    void *data = src != NULL ? malloc(nbytes > 0 ? (size_t)nbytes : 1) : NULL;
    gf_status st = src == NULL ? GF_ERR_INVALID : data == NULL ? js_nomem(&c->j) : GF_OK;
    if (st == GF_OK) {
        memcpy(data, src, (size_t)nbytes);
        memset(out, 0, sizeof *out);
        st = tensor_make(&out->t, in, data, (size_t)nbytes, err);
    }
    gf_shm_put(r);
    if (st != GF_OK) {
        free(data);
        return st;
    }
    gf_copies_add(GF_COPY_IN, nbytes); /* the memcpy out of the region */
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
        return js_nomem(j);
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

static gf_status input_finish(gf_parse_ctx *c, gf_input_acc *in, gf_gw_tensor *out)
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
    void *data = malloc(nbytes > 0 ? (size_t)nbytes : 1);
    if (data == NULL)
        return js_nomem(j);
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

static gf_status parse_input(gf_parse_ctx *c)
{
    gf_json_lexer *j = &c->j;
    gf_input_acc in;
    memset(&in, 0, sizeof in);
    bool first = true, done;
    unsigned seen = 0;
    gf_status st;
    if (gf_json_lex_peek(j) != '{') {
        st = gf_err_set(j->err, GF_ERR_INVALID, "each entry of \"inputs\" must be an object");
        goto out;
    }
    for (;;) {
        if ((st = gf_json_lex_member(j, &first, &c->key, &done)) != GF_OK)
            goto out;
        if (done)
            break;
        static const char *const keys[] = {"name", "datatype", "shape", "parameters", "data"};
        unsigned bit = 0;
        for (unsigned k = 0; k < 5; k++)
            if (key_is(&c->key, keys[k]))
                bit = 1u << k;
        if (bit & seen) {
            st = gf_err_set(j->err, GF_ERR_INVALID, "input '%s': \"%s\" given twice",
                            in.name != NULL ? in.name : "?", c->key.data);
            goto out;
        }
        seen |= bit;
        if (bit == 1u << 0 || bit == 1u << 1) {
            if (gf_json_lex_peek(j) != '"') {
                st = gf_err_set(j->err, GF_ERR_INVALID, "input \"%s\" must be a string",
                                c->key.data);
                goto out;
            }
            if ((st = gf_json_lex_string(j, &c->str)) != GF_OK)
                goto out;
            if (bit == 1u << 0) {
                if ((st = take_name(c, "an input's name", &in.name)) != GF_OK)
                    goto out;
            } else {
                in.has_dtype = true;
                in.dtype = gf_dtype_from_kserve_name(c->str.data, c->str.len);
                snprintf(in.dtname, sizeof in.dtname, "%s", c->str.data);
            }
        } else if (bit == 1u << 2) {
            if (gf_json_lex_peek(j) != '[') {
                st = gf_err_set(j->err, GF_ERR_INVALID,
                                "input '%s': shape must be an array of integers",
                                in.name != NULL ? in.name : "?");
                goto out;
            }
            if ((st = parse_shape(c, &in)) != GF_OK)
                goto out;
            in.has_shape = true;
        } else if (bit == 1u << 3) {
            if (gf_json_lex_peek(j) != '{') {
                st = gf_err_set(j->err, GF_ERR_INVALID, "input '%s': parameters must be an object",
                                in.name != NULL ? in.name : "?");
                goto out;
            }
            if ((st = parse_tensor_params(c, "input", in.name != NULL ? in.name : "?", &in,
                                          NULL, &in.shm, NULL)) != GF_OK)
                goto out;
        } else if (bit == 1u << 4) {
            gf_json_lex_peek(j);
            in.has_data = true;
            in.data_pos = j->pos;
            in.data_depth = j->depth;
            if ((st = scan_data(c, &in, &in.leaves)) != GF_OK)
                goto out;
        } else if ((st = gf_json_lex_skip(j)) != GF_OK) {
            goto out;
        }
    }
    if (c->r->n_inputs >= GF_MANIFEST_MAX_IO) {
        st = gf_err_set(j->err, GF_ERR_INVALID, "more than %d inputs", GF_MANIFEST_MAX_IO);
        goto out;
    }
    st = input_finish(c, &in, &c->r->inputs[c->r->n_inputs]);
    if (st == GF_OK)
        c->r->n_inputs++;
out:
    free(in.name);
    return st;
}

static gf_status parse_output_sel(gf_parse_ctx *c)
{
    gf_json_lexer *j = &c->j;
    gf_codec_output_sel sel = {NULL, -1, NULL, 0, 0, 0, NULL, 0};
    gf_shm_ref shm = {0};
    bool first = true, done;
    gf_status st;
    if (gf_json_lex_peek(j) != '{')
        return gf_err_set(j->err, GF_ERR_INVALID, "each entry of \"outputs\" must be an object");
    for (;;) {
        if ((st = gf_json_lex_member(j, &first, &c->key, &done)) != GF_OK)
            goto fail;
        if (done)
            break;
        if (key_is(&c->key, "name")) {
            if (sel.name != NULL || gf_json_lex_peek(j) != '"') {
                st = gf_err_set(j->err, GF_ERR_INVALID, "an output's \"name\" must be one string");
                goto fail;
            }
            if ((st = gf_json_lex_string(j, &c->str)) != GF_OK ||
                (st = take_name(c, "an output's name", &sel.name)) != GF_OK)
                goto fail;
        } else if (key_is(&c->key, "parameters")) {
            if (gf_json_lex_peek(j) != '{') {
                st = gf_err_set(j->err, GF_ERR_INVALID, "an output's parameters must be an object");
                goto fail;
            }
            if ((st = parse_tensor_params(c, "output", sel.name != NULL ? sel.name : "?", NULL,
                                          &sel.binary, &shm, &sel.classify)) != GF_OK)
                goto fail;
        } else if ((st = gf_json_lex_skip(j)) != GF_OK) {
            goto fail;
        }
    }
    if (sel.name == NULL) {
        st = gf_err_set(j->err, GF_ERR_INVALID, "an entry of \"outputs\" has no \"name\"");
        goto fail;
    }
    if (shm.has || shm.has_size) {
        char what[96];
        snprintf(what, sizeof what, "output '%s'", sel.name);
        if (!shm.has || !shm.has_size) {
            st = gf_err_set(j->err, GF_ERR_INVALID, "%s: shared_memory_region and "
                            "shared_memory_byte_size go together", what);
            goto fail;
        }
        if ((sel.shm = gf_shm_get(c->shm, shm.region)) == NULL) {
            st = gf_err_set(j->err, GF_ERR_INVALID, "%s: no shared memory region '%s' is "
                            "registered", what, shm.region);
            goto fail;
        }
        sel.shm_offset = shm.offset;
        sel.shm_size = shm.size;
        if (gf_shm_span(sel.shm, shm.offset, shm.size, what, j->err) == NULL) {
            st = GF_ERR_INVALID;
            goto fail;
        }
    }
    for (size_t i = 0; i < c->r->n_outputs; i++)
        if (strcmp(c->r->outputs[i].name, sel.name) == 0) {
            st = gf_err_set(j->err, GF_ERR_INVALID, "output '%s' is requested twice", sel.name);
            goto fail;
        }
    if (c->r->n_outputs >= GF_MANIFEST_MAX_IO) {
        st = gf_err_set(j->err, GF_ERR_INVALID, "more than %d outputs requested",
                        GF_MANIFEST_MAX_IO);
        goto fail;
    }
    c->r->outputs[c->r->n_outputs++] = sel;
    return GF_OK;
fail:
    free(sel.name);
    gf_shm_put(sel.shm);
    return st;
}

static gf_status parse_request_params(gf_parse_ctx *c)
{
    gf_json_lexer *j = &c->j;
    bool first = true, done;
    gf_status st;
    if (gf_json_lex_peek(j) != '{')
        return gf_err_set(j->err, GF_ERR_INVALID, "\"parameters\" must be an object");
    for (;;) {
        if ((st = gf_json_lex_member(j, &first, &c->key, &done)) != GF_OK)
            return st;
        if (done)
            return GF_OK;
        if (key_is(&c->key, "binary_data_output")) {
            if (gf_json_lex_peek(j) == 't' && gf_json_lex_literal(j, "true") == GF_OK)
                c->r->binary_output = true;
            else if (gf_json_lex_peek(j) == 'f' && gf_json_lex_literal(j, "false") == GF_OK)
                c->r->binary_output = false;
            else
                return gf_err_set(j->err, GF_ERR_INVALID,
                                  "parameter binary_data_output must be true or false");
        } else if (key_is(&c->key, "timeout")) {
            gf_json_num n;
            int ch = gf_json_lex_peek(j);
            if ((ch != '-' && (ch < '0' || ch > '9')) || gf_json_lex_number(j, &n) != GF_OK ||
                !n.is_uint || n.u == 0)
                return gf_err_set(j->err, GF_ERR_INVALID,
                                  "parameter timeout must be a positive integer (microseconds)");
            c->r->timeout_us = n.u;
        } else if ((st = gf_json_lex_skip(j)) != GF_OK) {
            return st;
        }
    }
}

static gf_status parse_request(gf_parse_ctx *c)
{
    gf_json_lexer *j = &c->j;
    bool first = true, done;
    unsigned seen = 0;
    gf_status st;
    int c0 = gf_json_lex_peek(j);
    if (c0 < 0)
        return gf_json_lex_fail(j, "empty body; expected a JSON object");
    if (c0 != '{') {
        /* malformed, or well-formed but not an object: say which */
        gf_status st0 = gf_json_lex_skip(j);
        if (st0 == GF_OK && gf_json_lex_peek(j) >= 0)
            st0 = gf_json_lex_fail(j, "unexpected data after the JSON value");
        return st0 != GF_OK
                   ? st0
                   : gf_err_set(j->err, GF_ERR_INVALID, "the request must be a JSON object");
    }
    for (;;) {
        if ((st = gf_json_lex_member(j, &first, &c->key, &done)) != GF_OK)
            return st;
        if (done)
            break;
        static const char *const keys[] = {"id", "parameters", "inputs", "outputs"};
        unsigned bit = 0;
        for (unsigned k = 0; k < 4; k++)
            if (key_is(&c->key, keys[k]))
                bit = 1u << k;
        if (bit & seen)
            return gf_err_set(j->err, GF_ERR_INVALID, "\"%s\" given twice", c->key.data);
        seen |= bit;
        if (bit == 1u << 0) {
            if (gf_json_lex_peek(j) != '"')
                return gf_err_set(j->err, GF_ERR_INVALID, "\"id\" must be a string");
            if ((st = gf_json_lex_string(j, &c->str)) != GF_OK)
                return st;
            if (strlen(c->str.data) != c->str.len)
                return gf_err_set(j->err, GF_ERR_INVALID, "\"id\" must not contain NUL");
            if ((c->r->id = strdup(c->str.data)) == NULL)
                return js_nomem(j);
        } else if (bit == 1u << 1) {
            if ((st = parse_request_params(c)) != GF_OK)
                return st;
        } else if (bit == 1u << 2 || bit == 1u << 3) {
            bool is_in = bit == 1u << 2;
            bool afirst = true, adone;
            if (gf_json_lex_peek(j) != '[')
                return gf_err_set(j->err, GF_ERR_INVALID, "\"%s\" must be an array",
                                  is_in ? "inputs" : "outputs");
            for (;;) {
                if ((st = gf_json_lex_element(j, &afirst, &adone)) != GF_OK)
                    return st;
                if (adone)
                    break;
                if ((st = is_in ? parse_input(c) : parse_output_sel(c)) != GF_OK)
                    return st;
            }
        } else if ((st = gf_json_lex_skip(j)) != GF_OK) {
            return st;
        }
    }
    if (gf_json_lex_peek(j) >= 0)
        return gf_json_lex_fail(j, "unexpected data after the JSON object");
    if (c->r->n_inputs == 0)
        return gf_err_set(j->err, GF_ERR_INVALID, "the request has no inputs");
    if (c->bin != NULL && c->bin_used != c->bin_len)
        return gf_err_set(j->err, GF_ERR_INVALID,
                          "%zu bytes of binary data after the JSON header belong to no input "
                          "(binary_data_size parameters add up to %zu)",
                          c->bin_len - c->bin_used, c->bin_used);
    return GF_OK;
}

void gf_codec_set_labels(gf_codec_request *r, size_t k, char **labels, size_t n)
{
    gf_codec_output_sel *o = &r->outputs[k];
    for (size_t i = 0; i < o->n_labels; i++)
        free(o->labels[i]);
    free(o->labels);
    o->labels = labels;
    o->n_labels = n;
}

void gf_codec_request_deinit(gf_codec_request *r)
{
    if (r == NULL)
        return;
    gf_gw_tensors_free(r->inputs, r->n_inputs);
    for (size_t i = 0; i < r->n_outputs; i++) {
        free(r->outputs[i].name);
        gf_shm_put(r->outputs[i].shm);
        for (size_t k = 0; k < r->outputs[i].n_labels; k++)
            free(r->outputs[i].labels[k]);
        free(r->outputs[i].labels);
    }
    free(r->outputs);
    free(r->id);
    memset(r, 0, sizeof *r);
}

gf_status gf_codec_request_parse(const char *body, size_t len, const char *header_len,
                                 const gf_codec_opts *opts, gf_codec_request *out, gf_err *err)
{
    memset(out, 0, sizeof *out);
    size_t json_len = len;
    const char *bin = NULL;
    size_t bin_len = 0;
    if (header_len != NULL) {
        uint64_t v = 0;
        const char *p = header_len;
        bool digits = *p != '\0';
        for (; *p != '\0' && digits; p++)
            digits = *p >= '0' && *p <= '9' && gf_u64_mul(v, 10, &v) &&
                     gf_u64_add(v, (uint64_t)(*p - '0'), &v);
        if (!digits)
            return gf_err_set(err, GF_ERR_INVALID,
                              "Inference-Header-Content-Length '%.40s' is not a number",
                              header_len);
        if (v == 0 || v > len)
            return gf_err_set(err, GF_ERR_INVALID,
                              "Inference-Header-Content-Length %s is out of range: the body has "
                              "%zu bytes",
                              header_len, len);
        json_len = (size_t)v;
        bin = body + json_len;
        bin_len = len - json_len;
    }
    gf_parse_ctx c;
    memset(&c, 0, sizeof c);
    gf_json_lexer_init(&c.j, body, json_len,
                       opts != NULL && opts->max_depth != 0 ? opts->max_depth : GF_CODEC_MAX_DEPTH,
                       err);
    c.half_as_json = opts != NULL && opts->half_as_json;
    c.shm = opts != NULL ? opts->shm : NULL;
    c.bin = bin;
    c.bin_len = bin_len;
    c.r = out;
    gf_buf_init(&c.key);
    gf_buf_init(&c.str);
    gf_status st;
    out->inputs = calloc(GF_MANIFEST_MAX_IO, sizeof *out->inputs);
    out->outputs = calloc(GF_MANIFEST_MAX_IO, sizeof *out->outputs);
    if (out->inputs == NULL || out->outputs == NULL)
        st = js_nomem(&c.j);
    else
        st = parse_request(&c);
    gf_buf_deinit(&c.key);
    gf_buf_deinit(&c.str);
    if (st != GF_OK) {
        gf_codec_request_deinit(out);
        return st;
    }
    if (out->n_outputs == 0) {
        free(out->outputs);
        out->outputs = NULL;
    }
    return GF_OK;
}
