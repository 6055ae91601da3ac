/* gpufaas — what the request parser's two files share (gateway/http):
 * codec.c walks the request, codec_input.c reads each input's tensor. */
#ifndef GF_GATEWAY_HTTP_CODEC_IMPL_H
#define GF_GATEWAY_HTTP_CODEC_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/json.h"
#include "gateway/http/codec.h"
#include "gateway/http/shm.h"

typedef struct gf_parse_ctx {
    gf_json_lexer j;
    bool half_as_json;
    gf_buf key;      /* member names */
    gf_buf str;      /* string values */
    const char *bin; /* binary part of the body (after the JSON header) */
    size_t bin_len;
    size_t bin_used; /* claimed by inputs so far */
    gf_hold *bin_hold; /* the body's owner (gf_codec_opts.body_hold), or NULL */
    gf_codec_request *r;
    size_t cap_inputs, cap_outputs; /* of r->inputs / r->outputs, grown to GF_MANIFEST_MAX_IO */
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

/* Fail the parse for want of memory. */
static inline gf_status gf_codec_nomem(gf_json_lexer *j)
{
    return gf_err_set(j->err, GF_ERR_NOMEM, "out of memory while parsing the request");
}

/* Count the scalars of a "data" value at the lexer (a scalar or nested
 * arrays of them) into *leaves, rejecting anything that cannot be a tensor
 * element; in's data position is where the value starts. */
gf_status gf_codec_scan_data(gf_parse_ctx *c, gf_input_acc *in, uint64_t *leaves);

/* The input's "shape" value at the lexer, into in. */
gf_status gf_codec_parse_shape(gf_parse_ctx *c, gf_input_acc *in);

/* in is complete: check its members against each other and make *out from
 * its JSON data, its part of the binary body or its shared memory region
 * (in's name moves to out). */
gf_status gf_codec_input_finish(gf_parse_ctx *c, gf_input_acc *in, gf_gw_tensor *out);

#endif /* GF_GATEWAY_HTTP_CODEC_IMPL_H */
