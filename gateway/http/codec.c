/* gpufaas — inference request parsing (gateway/http/codec.h): the request's
 * members, its parameters and output selection; each input's shape and data
 * are read by codec_input.c; render.c writes the answers. */
#include "gateway/http/codec.h"
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

/* The request is read with runtime/core's JSON lexer (core/json.h), the one
 * grammar of the tree: values are walked in place, "data" straight into
 * typed buffers, and nothing builds a tree. */

/* ---- the request ----------------------------------------------------------------- */

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
    return *out == NULL ? gf_codec_nomem(&c->j) : GF_OK;
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


/* Make room for element n of *arr (capacity *cap, elements of size elem,
 * zeroed when new); n < GF_MANIFEST_MAX_IO is checked by the caller. */
static gf_status grow(gf_parse_ctx *c, void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return GF_OK;
    size_t ncap = *cap * 2 < GF_MANIFEST_MAX_IO ? *cap * 2 : GF_MANIFEST_MAX_IO;
    char *a = realloc(*arr, ncap * elem);
    if (a == NULL)
        return gf_codec_nomem(&c->j);
    memset(a + *cap * elem, 0, (ncap - *cap) * elem);
    *arr = a;
    *cap = ncap;
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
                gf_str_copy(in.dtname, sizeof in.dtname, c->str.data);
            }
        } else if (bit == 1u << 2) {
            if (gf_json_lex_peek(j) != '[') {
                st = gf_err_set(j->err, GF_ERR_INVALID,
                                "input '%s': shape must be an array of integers",
                                in.name != NULL ? in.name : "?");
                goto out;
            }
            if ((st = gf_codec_parse_shape(c, &in)) != GF_OK)
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
            if ((st = gf_codec_scan_data(c, &in, &in.leaves)) != GF_OK)
                goto out;
        } else if ((st = gf_json_lex_skip(j)) != GF_OK) {
            goto out;
        }
    }
    if (c->r->n_inputs >= GF_MANIFEST_MAX_IO) {
        st = gf_err_set(j->err, GF_ERR_INVALID, "more than %d inputs", GF_MANIFEST_MAX_IO);
        goto out;
    }
    if ((st = grow(c, (void **)&c->r->inputs, &c->cap_inputs, c->r->n_inputs,
                   sizeof *c->r->inputs)) != GF_OK)
        goto out;
    st = gf_codec_input_finish(c, &in, &c->r->inputs[c->r->n_inputs]);
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
    if ((st = grow(c, (void **)&c->r->outputs, &c->cap_outputs, c->r->n_outputs,
                   sizeof *c->r->outputs)) != GF_OK)
        goto fail;
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
                return gf_codec_nomem(j);
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
    c.bin_hold = opts != NULL ? opts->body_hold : NULL;
    c.r = out;
    gf_buf_init(&c.key);
    gf_buf_init(&c.str);
    gf_status st;
    /* room for a few; grown as inputs and outputs come (zeroing 64 of each was
     * ~15 KB of memset per request) */
    c.cap_inputs = c.cap_outputs = 4;
    out->inputs = calloc(c.cap_inputs, sizeof *out->inputs);
    out->outputs = calloc(c.cap_outputs, sizeof *out->outputs);
    if (out->inputs == NULL || out->outputs == NULL)
        st = gf_codec_nomem(&c.j);
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
