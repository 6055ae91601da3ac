/* gpufaas — ONNX protobuf to the in-memory graph (functions/onnx).
 *
 * protobuf-c decodes the file; this file bounds what it decodes (a size
 * limit, a nesting pre-check that walks the wire format with the generated
 * descriptors, so a hostile file cannot exhaust the stack) and turns the
 * messages into a gf_onnx_graph, checking every count, dim, dtype and byte
 * span on the way.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/dtype.h"
#include "core/tensor.h"
#include "core/utf8.h"
#include "functions/onnx/import_pb.h"
#include "functions/onnx/optable.h"

/* ---- gf_onnx_mapped files -------------------------------------------------------------- */

gf_status gf_onnx_pb_map(const char *path, size_t limit, const char *what, gf_onnx_mapped *m,
                          gf_err *err)
{
    m->p = NULL;
    m->len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return gf_err_set(err, GF_ERR_IO, "cannot open the %s: %s", what, path);
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return gf_err_set(err, GF_ERR_IO, "the %s is not a regular file", what);
    }
    if ((uint64_t)sb.st_size > limit) {
        close(fd);
        return gf_err_set(err, GF_ERR_TOO_LARGE, "the %s has %lld bytes, more than the limit "
                          "of %zu", what, (long long)sb.st_size, limit);
    }
    m->len = (size_t)sb.st_size;
    if (m->len > 0) {
        m->p = mmap(NULL, m->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m->p == MAP_FAILED) {
            m->p = NULL;
            close(fd);
            return gf_err_set(err, GF_ERR_IO, "cannot map the %s", what);
        }
    }
    close(fd);
    return GF_OK;
}

void gf_onnx_pb_unmap(gf_onnx_mapped *m)
{
    if (m->p != NULL)
        munmap(m->p, m->len);
    m->p = NULL;
}

/* ---- nesting pre-check ------------------------------------------------------------ */

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return false;
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

/* Walk a message's fields; recurse into message-typed ones. */
static bool wire_ok(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end,
                    int depth)
{
    if (depth > GF_ONNX_MAX_NESTING)
        return false;
    while (p < end) {
        uint64_t key, v;
        if (!varint(&p, end, &key))
            return false;
        unsigned wt = key & 7;
        uint64_t num = key >> 3;
        switch (wt) {
        case 0:
            if (!varint(&p, end, &v))
                return false;
            break;
        case 1:
            if (end - p < 8)
                return false;
            p += 8;
            break;
        case 5:
            if (end - p < 4)
                return false;
            p += 4;
            break;
        case 2: {
            if (!varint(&p, end, &v) || v > (uint64_t)(end - p))
                return false;
            const ProtobufCFieldDescriptor *f =
                d != NULL && num <= UINT32_MAX
                    ? protobuf_c_message_descriptor_get_field(d, (unsigned)num)
                    : NULL;
            if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE &&
                !wire_ok(f->descriptor, p, p + v, depth + 1))
                return false;
            p += v;
            break;
        }
        default:
            return false; /* groups are not used by onnx.proto */
        }
    }
    return true;
}

/* ---- the parsed model -------------------------------------------------------------- */


gf_onnx_graph *gf_onnx_parsed_graph(gf_onnx_parsed *p) { return p->g; }

gf_onnx_graph *gf_onnx_parsed_take_graph(gf_onnx_parsed *p)
{
    gf_onnx_graph *g = p->g;
    p->g = NULL;
    return g;
}

const void *gf_onnx_parsed_init(const gf_onnx_parsed *p, int32_t v, size_t *nbytes)
{
    if (v < 0 || (size_t)v >= p->n_init_alloc) {
        *nbytes = 0;
        return NULL;
    }
    *nbytes = p->init_len[v];
    return p->init[v];
}

void gf_onnx_parsed_free(gf_onnx_parsed *p)
{
    if (p == NULL)
        return;
    gf_onnx_graph_free(p->g);
    if (p->model != NULL)
        onnx__model_proto__free_unpacked(p->model, NULL);
    gf_onnx_pb_unmap(&p->file);
    gf_onnx_pb_unmap(&p->data);
    free(p->init);
    free(p->init_len);
    free(p->vstr);
    for (size_t i = 0; i < p->n_owned; i++)
        free(p->owned[i]);
    free(p->owned);
    free(p);
}

gf_status gf_onnx_pb_check_name(const char *s, const char *what, gf_err *err)
{
    size_t n = s != NULL ? strlen(s) : 0;
    if (n > GF_ONNX_MAX_NAME || !gf_utf8_valid(s != NULL ? s : "", n, NULL))
        return gf_err_set(err, GF_ERR_INVALID, "%s is longer than %d bytes or not UTF-8", what,
                          GF_ONNX_MAX_NAME);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20)
            return gf_err_set(err, GF_ERR_INVALID, "%s '%.64s' contains a control character",
                              what, s);
    return GF_OK;
}

/* Shape and dtype of a TensorProto. */
gf_status gf_onnx_pb_tensor_desc(const Onnx__TensorProto *t, const char *name, gf_dtype *dt,
                             int32_t *rank, int64_t *shape, size_t *nbytes, gf_err *err)
{
    if (t->n_dims > GF_MAX_RANK)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "tensor '%.200s' has rank %zu (at most %d is "
                          "supported)", name, t->n_dims, GF_MAX_RANK);
    *dt = gf_onnx_dtype(t->data_type);
    if (*dt == GF_DT_INVALID)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "tensor '%.200s' has ONNX data type %d, which "
                          "is not supported (strings, complex, float8 and 4-bit types are not)",
                          name, (int)t->data_type);
    *rank = (int32_t)t->n_dims;
    for (size_t k = 0; k < t->n_dims; k++) {
        if (t->dims[k] < 0 || t->dims[k] > (INT64_C(1) << 40))
            return gf_err_set(err, GF_ERR_INVALID, "tensor '%.200s' has an absurd dim %" PRId64,
                              name, t->dims[k]);
        shape[k] = t->dims[k];
    }
    gf_tensor d;
    if (gf_tensor_init(&d, *dt, *rank, shape, NULL, GF_MEM_HOST, -1, err) != GF_OK) {
        gf_err_prefix(err, "tensor '%.200s'", name);
        return GF_ERR_INVALID;
    }
    *nbytes = d.nbytes;
    return GF_OK;
}

/* The bytes of a TensorProto (raw_data, typed fields or external data).
 * Converted data is malloc'd into *owned. */
gf_status gf_onnx_pb_tensor_bytes(const Onnx__TensorProto *t, const char *name, gf_dtype dt,
                              size_t nbytes, const gf_onnx_mapped *data, const char *data_name,
                              const void **out, void **owned, gf_err *err)
{
    *out = NULL;
    *owned = NULL;
    size_t numel = gf_dtype_size(dt) ? nbytes / gf_dtype_size(dt) : 0;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        const char *loc = NULL;
        uint64_t off = 0, len = nbytes;
        bool has_len = false;
        for (size_t i = 0; i < t->n_external_data; i++) {
            const Onnx__StringStringEntryProto *e = t->external_data[i];
            if (e->key == NULL || e->value == NULL)
                continue;
            char *endp;
            if (strcmp(e->key, "location") == 0) {
                loc = e->value;
            } else if (strcmp(e->key, "offset") == 0 || strcmp(e->key, "length") == 0) {
                unsigned long long v = strtoull(e->value, &endp, 10);
                if (e->value[0] == '\0' || *endp != '\0' || e->value[0] == '-')
                    return gf_err_set(err, GF_ERR_INVALID, "tensor '%.200s': external data %s "
                                      "'%.32s' is not a number", name, e->key, e->value);
                if (e->key[0] == 'o') {
                    off = v;
                } else {
                    len = v;
                    has_len = true;
                }
            }
        }
        if (loc == NULL)
            return gf_err_set(err, GF_ERR_INVALID, "tensor '%.200s': external data without a "
                              "location", name);
        if (data == NULL || (data->len == 0 && data->p == NULL)) {
            return gf_err_set(err, GF_ERR_INVALID, "tensor '%.200s' keeps its data in the "
                              "external file '%.200s', which was not given (upload it as the "
                              "part 'model_data')", name, loc);
        }
        if (data_name != NULL && strcmp(data_name, loc) != 0)
            return gf_err_set(err, GF_ERR_UNSUPPORTED, "tensor '%.200s' keeps its data in "
                              "'%.200s' and another tensor in '%.200s': one external data file "
                              "is supported", name, loc, data_name);
        if (has_len && len != nbytes)
            return gf_err_set(err, GF_ERR_INVALID, "tensor '%.200s': external data length %llu, "
                              "its shape needs %zu bytes", name, (unsigned long long)len, nbytes);
        if (off > data->len || nbytes > data->len - off)
            return gf_err_set(err, GF_ERR_INVALID, "the external data file '%.200s' is shorter "
                              "than the tensors claim: tensor '%.200s' needs bytes [%llu, %llu) "
                              "and the file has %zu", loc, name, (unsigned long long)off,
                              (unsigned long long)(off + nbytes), data->len);
        *out = (const char *)data->p + off;
        return GF_OK;
    }
    if (t->has_raw_data) {
        if (t->raw_data.len != nbytes)
            return gf_err_set(err, GF_ERR_INVALID, "tensor '%.200s': raw_data has %zu bytes, its "
                              "shape needs %zu", name, t->raw_data.len, nbytes);
        *out = t->raw_data.data;
        return GF_OK;
    }
    size_t have;
    switch (dt) {
    case GF_DT_F32: have = t->n_float_data; break;
    case GF_DT_F64: have = t->n_double_data; break;
    case GF_DT_I64: have = t->n_int64_data; break;
    case GF_DT_U32: case GF_DT_U64: have = t->n_uint64_data; break;
    default: have = t->n_int32_data; break;
    }
    if (have != numel)
        return gf_err_set(err, GF_ERR_INVALID, "tensor '%.200s' holds %zu values, its shape "
                          "needs %zu", name, have, numel);
    void *buf = malloc(nbytes ? nbytes : 1);
    if (buf == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory for tensor '%.200s'", name);
    gf_onnx_const c = {.dtype = dt, .nbytes = nbytes, .data = buf};
    for (size_t i = 0; i < numel; i++) {
        switch (dt) {
        case GF_DT_F32: gf_onnx_const_set_f64(&c, (int64_t)i, t->float_data[i]); break;
        case GF_DT_F64: gf_onnx_const_set_f64(&c, (int64_t)i, t->double_data[i]); break;
        case GF_DT_I64: gf_onnx_const_set_i64(&c, (int64_t)i, t->int64_data[i]); break;
        case GF_DT_U32: case GF_DT_U64:
            gf_onnx_const_set_i64(&c, (int64_t)i, (int64_t)t->uint64_data[i]);
            break;
        case GF_DT_F16: case GF_DT_BF16: { /* the 16 bits, in an int32 */
            uint16_t bits = (uint16_t)t->int32_data[i];
            memcpy((char *)buf + 2 * i, &bits, 2);
            break;
        }
        default: gf_onnx_const_set_i64(&c, (int64_t)i, t->int32_data[i]); break;
        }
    }
    *out = buf;
    *owned = buf;
    return GF_OK;
}

gf_status gf_onnx_parse_file(const char *model_path, const char *data_path,
                             gf_onnx_parsed **out, gf_err *err)
{
    *out = NULL;
    gf_onnx_parsed *p = calloc(1, sizeof *p);
    if (p == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    gf_status st = gf_onnx_pb_map(model_path, GF_ONNX_MAX_MODEL_BYTES, "model file", &p->file, err);
    if (st == GF_OK && data_path != NULL)
        st = gf_onnx_pb_map(data_path, SIZE_MAX / 2, "external data file", &p->data, err);
    if (st != GF_OK)
        goto fail;
    if (p->file.len == 0) {
        st = gf_err_set(err, GF_ERR_FORMAT, "the model file is empty");
        goto fail;
    }
    if (!wire_ok(&onnx__model_proto__descriptor, p->file.p, (const uint8_t *)p->file.p +
                 p->file.len, 0)) {
        st = gf_err_set(err, GF_ERR_FORMAT, "the model is not a valid ONNX protobuf (truncated, "
                        "a bad field, or nested deeper than %d)", GF_ONNX_MAX_NESTING);
        goto fail;
    }
    p->model = onnx__model_proto__unpack(NULL, p->file.len, p->file.p);
    if (p->model == NULL) {
        st = gf_err_set(err, GF_ERR_FORMAT, "the model is not a valid ONNX protobuf (a field "
                        "has the wrong type or a length runs past the end)");
        goto fail;
    }
    if ((st = gf_onnx_graph_new(&p->g, err)) != GF_OK || (st = gf_onnx_pb_build(p, err)) != GF_OK)
        goto fail;
    *out = p;
    return GF_OK;
fail:
    gf_onnx_parsed_free(p);
    return st;
}

/* A string TensorProto as a BYTES constant (Triton's serialization: each
 * element a u32 little-endian length, then its bytes). */
static gf_status strings_read(const Onnx__TensorProto *t, const char *path, gf_onnx_const **out,
                              gf_err *err)
{
    size_t numel = 1, bytes = 0;
    if (t->n_dims > GF_MAX_RANK)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "%s: rank %zu", path, t->n_dims);
    for (size_t k = 0; k < t->n_dims; k++) {
        if (t->dims[k] < 0 || t->dims[k] > (INT64_C(1) << 24))
            return gf_err_set(err, GF_ERR_INVALID, "%s: an absurd dim", path);
        numel *= (size_t)t->dims[k];
        if (numel > ((size_t)1 << 24))
            return gf_err_set(err, GF_ERR_TOO_LARGE, "%s: too many strings", path);
    }
    if (numel != t->n_string_data)
        return gf_err_set(err, GF_ERR_INVALID, "%s: %zu strings for its shape's %zu", path,
                          t->n_string_data, numel);
    for (size_t k = 0; k < numel; k++) {
        if (t->string_data[k].len > UINT32_MAX || t->string_data[k].len > ((size_t)1 << 30))
            return gf_err_set(err, GF_ERR_TOO_LARGE, "%s: a string too long", path);
        bytes += 4 + t->string_data[k].len;
    }
    gf_onnx_const *c = calloc(1, sizeof *c);
    unsigned char *d = malloc(bytes ? bytes : 1);
    if (c == NULL || d == NULL) {
        free(c);
        free(d);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    c->dtype = GF_DT_BYTES;
    c->rank = (int32_t)t->n_dims;
    for (size_t k = 0; k < t->n_dims; k++)
        c->shape[k] = t->dims[k];
    c->nbytes = bytes;
    c->data = d;
    for (size_t k = 0; k < numel; k++) {
        uint32_t len = (uint32_t)t->string_data[k].len;
        for (int b = 0; b < 4; b++)
            *d++ = (unsigned char)(len >> (8 * b));
        if (len > 0)
            memcpy(d, t->string_data[k].data, len);
        d += len;
    }
    *out = c;
    return GF_OK;
}

gf_status gf_onnx_tensor_read(const char *path, gf_onnx_const **out, gf_err *err)
{
    *out = NULL;
    gf_onnx_mapped f;
    gf_status st = gf_onnx_pb_map(path, GF_ONNX_MAX_MODEL_BYTES, "tensor file", &f, err);
    if (st != GF_OK)
        return st;
    Onnx__TensorProto *t = NULL;
    if (!wire_ok(&onnx__tensor_proto__descriptor, f.p, (const uint8_t *)f.p + f.len, 0) ||
        (t = onnx__tensor_proto__unpack(NULL, f.len, f.p)) == NULL) {
        gf_onnx_pb_unmap(&f);
        return gf_err_set(err, GF_ERR_FORMAT, "%s is not a TensorProto", path);
    }
    gf_dtype dt;
    int32_t rank;
    int64_t shape[GF_MAX_RANK];
    size_t nbytes;
    const void *src;
    void *owned = NULL;
    if (t->has_data_type && t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__STRING) {
        st = strings_read(t, path, out, err);
        onnx__tensor_proto__free_unpacked(t, NULL);
        gf_onnx_pb_unmap(&f);
        return st;
    }
    st = gf_onnx_pb_tensor_desc(t, t->name ? t->name : path, &dt, &rank, shape, &nbytes, err);
    if (st == GF_OK)
        st = gf_onnx_pb_tensor_bytes(t, path, dt, nbytes, NULL, NULL, &src, &owned, err);
    if (st == GF_OK && (st = gf_onnx_const_new(dt, rank, shape, out, err)) == GF_OK && nbytes)
        memcpy((*out)->data, src, nbytes);
    free(owned);
    onnx__tensor_proto__free_unpacked(t, NULL);
    gf_onnx_pb_unmap(&f);
    return st;
}
