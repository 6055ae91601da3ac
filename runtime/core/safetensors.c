/* gpufaas — safetensors reader and writer. */
#include "core/safetensors.h"
#include "core/filetype.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/dtype.h"
#include "core/json.h"
#include "core/tensor.h"
#include "core/utf8.h"

struct gf_st_file {
    void *map;                 /* owned mapping, or NULL for gf_st_parse */
    size_t map_len;
    const unsigned char *buf;  /* whole file */
    size_t len;
    uint64_t header_len;       /* N */
    gf_json_doc *doc;          /* owns names and metadata strings */
    gf_st_tensor *tensors;     /* file order */
    size_t n;
    size_t *by_name;           /* indices into tensors, sorted by name */
    const char **meta_key, **meta_val;
    size_t n_meta;
};

size_t gf_st_count(const gf_st_file *f) { return f->n; }
const gf_st_tensor *gf_st_at(const gf_st_file *f, size_t i) { return &f->tensors[i]; }
size_t gf_st_meta_count(const gf_st_file *f) { return f->n_meta; }
uint64_t gf_st_header_len(const gf_st_file *f) { return f->header_len; }
uint64_t gf_st_data_len(const gf_st_file *f) { return f->len - 8 - f->header_len; }
uint64_t gf_st_file_len(const gf_st_file *f) { return f->len; }

void gf_st_meta_at(const gf_st_file *f, size_t i, const char **key, const char **value)
{
    *key = f->meta_key[i];
    *value = f->meta_val[i];
}

const char *gf_st_meta_get(const gf_st_file *f, const char *key)
{
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_key[i], key) == 0)
            return f->meta_val[i];
    return NULL;
}

long gf_st_index(const gf_st_file *f, const char *name)
{
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->tensors[f->by_name[mid]].name, name);
        if (c == 0)
            return (long)f->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

const gf_st_tensor *gf_st_find(const gf_st_file *f, const char *name)
{
    long i = gf_st_index(f, name);
    return i < 0 ? NULL : &f->tensors[i];
}

void gf_st_close(gf_st_file *f)
{
    if (f == NULL)
        return;
    if (f->map != NULL)
        munmap(f->map, f->map_len);
    gf_json_doc_free(f->doc);
    free(f->tensors);
    free(f->by_name);
    free(f->meta_key);
    free(f->meta_val);
    free(f);
}

/* ---- validation ------------------------------------------------------- */

static gf_status st_parse_tensor(const gf_json_member *m, gf_st_tensor *t, gf_err *err)
{
    const char *name = m->key;
    if (strlen(name) != m->key_len)
        return gf_err_set(err, GF_ERR_FORMAT, "tensor name contains a NUL byte");
    const gf_json *v = m->value;
    if (v->type != GF_JSON_OBJECT)
        return gf_err_set(err, GF_ERR_FORMAT, "tensor '%s': entry is a %s, not an object", name,
                          gf_json_type_name(v->type));
    const gf_json *dt = gf_json_get(v, "dtype");
    const gf_json *shape = gf_json_get(v, "shape");
    const gf_json *offs = gf_json_get(v, "data_offsets");
    if (dt == NULL || dt->type != GF_JSON_STRING)
        return gf_err_set(err, GF_ERR_FORMAT, "tensor '%s': missing or non-string \"dtype\"",
                          name);
    if (shape == NULL || shape->type != GF_JSON_ARRAY)
        return gf_err_set(err, GF_ERR_FORMAT, "tensor '%s': missing or non-array \"shape\"",
                          name);
    if (offs == NULL || offs->type != GF_JSON_ARRAY)
        return gf_err_set(err, GF_ERR_FORMAT,
                          "tensor '%s': missing or non-array \"data_offsets\"", name);
    t->name = name;
    t->dtype = gf_dtype_from_st_name(dt->u.str.s, dt->u.str.len);
    if (t->dtype == GF_DT_INVALID) {
        bool f8 = dt->u.str.len >= 2 && memcmp(dt->u.str.s, "F8", 2) == 0;
        return gf_err_set(err, f8 ? GF_ERR_UNSUPPORTED : GF_ERR_FORMAT,
                          "tensor '%s': %s dtype '%.32s'", name,
                          f8 ? "unsupported" : "unknown", dt->u.str.s);
    }
    if (shape->u.arr.n > GF_MAX_RANK)
        return gf_err_set(err, GF_ERR_UNSUPPORTED, "tensor '%s': rank %zu exceeds %d", name,
                          shape->u.arr.n, GF_MAX_RANK);
    t->rank = (int32_t)shape->u.arr.n;
    for (size_t i = 0; i < shape->u.arr.n; i++) {
        const gf_json *d = shape->u.arr.items[i];
        if (d->type != GF_JSON_NUMBER || !d->u.num.is_int)
            return gf_err_set(err, GF_ERR_FORMAT,
                              "tensor '%s': shape[%zu] is not an integer", name, i);
        if (d->u.num.i < 0)
            return gf_err_set(err, GF_ERR_FORMAT, "tensor '%s': shape[%zu] is negative (%lld)",
                              name, i, (long long)d->u.num.i);
        t->shape[i] = d->u.num.i;
    }
    if (offs->u.arr.n != 2)
        return gf_err_set(err, GF_ERR_FORMAT,
                          "tensor '%s': data_offsets has %zu entries, expected 2", name,
                          offs->u.arr.n);
    for (int i = 0; i < 2; i++) {
        const gf_json *o = offs->u.arr.items[i];
        if (o->type != GF_JSON_NUMBER || !o->u.num.is_uint)
            return gf_err_set(err, GF_ERR_FORMAT,
                              "tensor '%s': data_offsets[%d] is not a non-negative integer",
                              name, i);
    }
    t->begin = offs->u.arr.items[0]->u.num.u;
    t->end = offs->u.arr.items[1]->u.num.u;
    if (t->end < t->begin)
        return gf_err_set(err, GF_ERR_FORMAT,
                          "tensor '%s': data_offsets end %llu is before begin %llu", name,
                          (unsigned long long)t->end, (unsigned long long)t->begin);
    uint64_t numel = 1, bytes;
    for (int32_t i = 0; i < t->rank; i++)
        if (!gf_u64_mul(numel, (uint64_t)t->shape[i], &numel))
            return gf_err_set(err, GF_ERR_OVERFLOW,
                              "tensor '%s': element count of its shape overflows", name);
    if (!gf_u64_mul(numel, gf_dtype_size(t->dtype), &bytes) || bytes > SIZE_MAX)
        return gf_err_set(err, GF_ERR_OVERFLOW, "tensor '%s': byte size overflows", name);
    if (t->end - t->begin != bytes) {
        char sh[128];
        return gf_err_set(err, GF_ERR_FORMAT,
                          "tensor '%s': data span is %llu bytes but shape %s of %s needs %llu",
                          name, (unsigned long long)(t->end - t->begin),
                          gf_shape_str(sh, sizeof sh, t->rank, t->shape),
                          gf_dtype_kserve_name(t->dtype), (unsigned long long)bytes);
    }
    t->nbytes = (size_t)bytes;
    return GF_OK;
}

static int st_cmp_offsets(const void *a, const void *b)
{
    const gf_st_tensor *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

typedef struct {
    const char *name;
    size_t idx;
} st_name_ref;

static int st_cmp_names(const void *a, const void *b)
{
    return strcmp(((const st_name_ref *)a)->name, ((const st_name_ref *)b)->name);
}

gf_status gf_st_parse(const void *buf_, size_t len, gf_st_file **out, gf_err *err)
{
    const unsigned char *buf = buf_;
    *out = NULL;
    /* A file of another known format is named, with how to convert it; an
     * unknown one whose first bytes make no sense as a header length too. */
    char what[GF_ERR_MSG_MAX];
    size_t head = len < 4096 ? len : 4096;
    gf_filetype ft = gf_filetype_sniff(buf, head);
    if (ft != GF_FILE_SAFETENSORS && ft != GF_FILE_UNKNOWN)
        return gf_err_set(err, GF_ERR_FORMAT, "%s",
                          gf_filetype_not_safetensors(buf, head, what, sizeof what));
    if (len < 8)
        return gf_err_set(err, GF_ERR_FORMAT,
                          "file is %zu bytes, too short for the 8-byte header length", len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | buf[i];
    if (ft == GF_FILE_UNKNOWN && (n > GF_ST_MAX_HEADER || n > len - 8))
        return gf_err_set(err, GF_ERR_FORMAT, "%s",
                          gf_filetype_not_safetensors(buf, head, what, sizeof what));
    if (n > GF_ST_MAX_HEADER)
        return gf_err_set(err, GF_ERR_FORMAT, "header length %llu exceeds the limit of %u",
                          (unsigned long long)n, GF_ST_MAX_HEADER);
    if (n > len - 8)
        return gf_err_set(err, GF_ERR_FORMAT,
                          "header length %llu runs past the end of the file (%zu bytes): the "
                          "file is truncated",
                          (unsigned long long)n, len);
    const char *hdr = (const char *)buf + 8;
    size_t bad;
    if (!gf_utf8_valid(hdr, (size_t)n, &bad))
        return gf_err_set(err, GF_ERR_FORMAT, "header is not valid UTF-8 (header byte %zu)",
                          bad);
    if (n == 0 || hdr[0] != '{')
        return gf_err_set(err, GF_ERR_FORMAT, "header does not start with '{'");

    gf_st_file *f = calloc(1, sizeof *f);
    if (f == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    f->buf = buf;
    f->len = len;
    f->header_len = n;
    gf_status st = gf_json_parse(hdr, (size_t)n, 0, &f->doc, err);
    if (st != GF_OK) {
        gf_err_prefix(err, "header is not valid JSON");
        st = GF_ERR_FORMAT;
        if (err != NULL)
            err->code = st;
        goto fail;
    }
    const gf_json *root = gf_json_doc_root(f->doc);
    if (root->type != GF_JSON_OBJECT) {
        st = gf_err_set(err, GF_ERR_FORMAT, "header is a JSON %s, not an object",
                        gf_json_type_name(root->type));
        goto fail;
    }
    long dup = gf_json_obj_find_dup(root);
    if (dup == -2) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (dup >= 0) {
        st = gf_err_set(err, GF_ERR_FORMAT, "duplicate tensor name '%s'",
                        root->u.obj.m[dup].key);
        goto fail;
    }
    size_t count = root->u.obj.n;
    f->tensors = calloc(count ? count : 1, sizeof *f->tensors);
    if (f->tensors == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < count; i++) {
        const gf_json_member *m = &root->u.obj.m[i];
        if (strcmp(m->key, "__metadata__") == 0 && m->key_len == 12) {
            const gf_json *md = m->value;
            if (md->type != GF_JSON_OBJECT) {
                st = gf_err_set(err, GF_ERR_FORMAT, "__metadata__ is a %s, not an object",
                                gf_json_type_name(md->type));
                goto fail;
            }
            dup = gf_json_obj_find_dup(md);
            if (dup >= 0) {
                st = gf_err_set(err, GF_ERR_FORMAT, "duplicate __metadata__ key '%s'",
                                md->u.obj.m[dup].key);
                goto fail;
            }
            f->meta_key = calloc(md->u.obj.n + 1, sizeof *f->meta_key);
            f->meta_val = calloc(md->u.obj.n + 1, sizeof *f->meta_val);
            if (f->meta_key == NULL || f->meta_val == NULL || dup == -2) {
                st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
                goto fail;
            }
            for (size_t k = 0; k < md->u.obj.n; k++) {
                const gf_json_member *e = &md->u.obj.m[k];
                if (e->value->type != GF_JSON_STRING) {
                    st = gf_err_set(err, GF_ERR_FORMAT,
                                    "__metadata__ value of '%s' is a %s, not a string", e->key,
                                    gf_json_type_name(e->value->type));
                    goto fail;
                }
                f->meta_key[k] = e->key;
                f->meta_val[k] = e->value->u.str.s;
            }
            f->n_meta = md->u.obj.n;
            continue;
        }
        st = st_parse_tensor(m, &f->tensors[f->n], err);
        if (st != GF_OK)
            goto fail;
        f->n++;
    }
    qsort(f->tensors, f->n, sizeof *f->tensors, st_cmp_offsets);
    uint64_t data_len = len - 8 - n;
    uint64_t pos = 0;
    for (size_t i = 0; i < f->n; i++) {
        gf_st_tensor *t = &f->tensors[i];
        if (t->begin != pos) {
            if (i == 0)
                st = gf_err_set(err, GF_ERR_FORMAT,
                                "tensor '%s': data starts at offset %llu, expected 0", t->name,
                                (unsigned long long)t->begin);
            else if (t->begin < pos)
                st = gf_err_set(err, GF_ERR_FORMAT, "tensor '%s' overlaps tensor '%s'",
                                t->name, f->tensors[i - 1].name);
            else
                st = gf_err_set(err, GF_ERR_FORMAT,
                                "tensor '%s': hole of %llu bytes before it", t->name,
                                (unsigned long long)(t->begin - pos));
            goto fail;
        }
        if (t->end > data_len) {
            st = gf_err_set(err, GF_ERR_FORMAT,
                            "tensor '%s': ends at offset %llu, past the end of the data "
                            "(%llu bytes)",
                            t->name, (unsigned long long)t->end, (unsigned long long)data_len);
            goto fail;
        }
        t->data = buf + 8 + n + t->begin;
        pos = t->end;
    }
    if (pos != data_len) {
        st = gf_err_set(err, GF_ERR_FORMAT, "%llu trailing bytes after the last tensor",
                        (unsigned long long)(data_len - pos));
        goto fail;
    }
    f->by_name = malloc((f->n ? f->n : 1) * sizeof *f->by_name);
    st_name_ref *refs = malloc((f->n ? f->n : 1) * sizeof *refs);
    if (f->by_name == NULL || refs == NULL) {
        free(refs);
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < f->n; i++)
        refs[i] = (st_name_ref){f->tensors[i].name, i};
    qsort(refs, f->n, sizeof *refs, st_cmp_names);
    for (size_t i = 0; i < f->n; i++)
        f->by_name[i] = refs[i].idx;
    free(refs);
    *out = f;
    return GF_OK;
fail:
    gf_st_close(f);
    return st;
}

gf_status gf_st_open(const char *path, gf_st_file **out, gf_err *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return gf_err_set(err, errno == ENOENT ? GF_ERR_NOT_FOUND : GF_ERR_IO,
                          "open(%s): %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return gf_err_set(err, GF_ERR_IO, "fstat(%s): %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return gf_err_set(err, GF_ERR_INVALID, "%s is not a regular file", path);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return gf_err_set(err, GF_ERR_TOO_LARGE, "%s is too large to map", path);
    }
    size_t len = (size_t)sb.st_size;
    if (len < 9) { /* too short to map (or empty): what gf_st_parse would say */
        unsigned char head[9];
        ssize_t got = pread(fd, head, len, 0);
        close(fd);
        gf_st_file *none;
        return gf_st_parse(head, got > 0 ? (size_t)got : 0, &none, err);
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED)
        return gf_err_set(err, GF_ERR_IO, "mmap(%s, %zu): %s", path, len, strerror(e));
    gf_st_file *f;
    gf_status st = gf_st_parse(map, len, &f, err);
    if (st != GF_OK) {
        munmap(map, len);
        return st;
    }
    f->map = map;
    f->map_len = len;
    *out = f;
    return GF_OK;
}

/* ---- writer ----------------------------------------------------------- */

static gf_status st_write_all(int fd, const void *p, size_t n, const char *path, gf_err *err)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return gf_err_set(err, GF_ERR_IO, "write(%s): %s", path, strerror(errno));
        }
        c += w;
        n -= (size_t)w;
    }
    return GF_OK;
}

gf_status gf_st_write(const char *path, const gf_st_wtensor *tensors, size_t n,
                      const char *const *meta, size_t n_meta, gf_err *err)
{
    gf_buf h;
    gf_buf_init(&h);
    gf_status st = GF_OK;
    char *tmp = NULL;
    int fd = -1;
    size_t *sizes = calloc(n ? n : 1, sizeof *sizes);
    if (sizes == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
#define ST_TRY(x)                                                                              \
    do {                                                                                       \
        if ((st = (x)) != GF_OK) {                                                             \
            gf_err_set(err, st, "building the header: %s", gf_strerror(st));                  \
            goto out;                                                                          \
        }                                                                                      \
    } while (0)
    ST_TRY(gf_buf_append_str(&h, "{"));
    bool first = true;
    if (n_meta > 0) {
        ST_TRY(gf_buf_append_str(&h, "\"__metadata__\":{"));
        for (size_t i = 0; i < n_meta; i++) {
            if (i > 0)
                ST_TRY(gf_buf_append_str(&h, ","));
            ST_TRY(gf_buf_append_json_str(&h, meta[2 * i], strlen(meta[2 * i])));
            ST_TRY(gf_buf_append_str(&h, ":"));
            ST_TRY(gf_buf_append_json_str(&h, meta[2 * i + 1], strlen(meta[2 * i + 1])));
        }
        ST_TRY(gf_buf_append_str(&h, "}"));
        first = false;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const gf_st_wtensor *t = &tensors[i];
        gf_tensor d;
        st = gf_tensor_init(&d, t->dtype, t->rank, t->shape, NULL, GF_MEM_HOST, -1, err);
        if (st != GF_OK) {
            gf_err_prefix(err, "tensor '%s'", t->name);
            goto out;
        }
        sizes[i] = d.nbytes;
        if (!first)
            ST_TRY(gf_buf_append_str(&h, ","));
        first = false;
        ST_TRY(gf_buf_append_json_str(&h, t->name, strlen(t->name)));
        ST_TRY(gf_buf_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", gf_dtype_st_name(t->dtype)));
        for (int32_t k = 0; k < t->rank; k++)
            ST_TRY(gf_buf_printf(&h, k ? ",%lld" : "%lld", (long long)t->shape[k]));
        ST_TRY(gf_buf_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                             (unsigned long long)(off + d.nbytes)));
        off += d.nbytes;
    }
    ST_TRY(gf_buf_append_str(&h, "}"));
    while (h.len % 8 != 0)
        ST_TRY(gf_buf_append_str(&h, " "));
#undef ST_TRY
    size_t plen = strlen(path) + 32;
    tmp = malloc(plen);
    if (tmp == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto out;
    }
    snprintf(tmp, plen, "%s.tmp.%d", path, (int)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        st = gf_err_set(err, GF_ERR_IO, "open(%s): %s", tmp, strerror(errno));
        goto out;
    }
    unsigned char lenbuf[8];
    uint64_t hl = h.len;
    for (int i = 0; i < 8; i++)
        lenbuf[i] = (unsigned char)(hl >> (8 * i));
    if ((st = st_write_all(fd, lenbuf, 8, tmp, err)) != GF_OK ||
        (st = st_write_all(fd, h.data, h.len, tmp, err)) != GF_OK)
        goto out;
    for (size_t i = 0; i < n; i++)
        if (sizes[i] > 0 && (st = st_write_all(fd, tensors[i].data, sizes[i], tmp, err)) != GF_OK)
            goto out;
    if (fsync(fd) != 0) {
        st = gf_err_set(err, GF_ERR_IO, "fsync(%s): %s", tmp, strerror(errno));
        goto out;
    }
    if (close(fd) != 0) {
        fd = -1;
        st = gf_err_set(err, GF_ERR_IO, "close(%s): %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        st = gf_err_set(err, GF_ERR_IO, "rename(%s, %s): %s", tmp, path, strerror(errno));
        goto out;
    }
out:
    if (fd >= 0)
        close(fd);
    if (st != GF_OK && tmp != NULL)
        unlink(tmp);
    free(tmp);
    free(sizes);
    gf_buf_deinit(&h);
    return st;
}
