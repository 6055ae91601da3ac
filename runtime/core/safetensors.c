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
    char *strings;             /* names and metadata strings, back to back (owned) */
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
    free(f->strings);
    free(f->tensors);
    free(f->by_name);
    free(f->meta_key);
    free(f->meta_val);
    free(f);
}

/* ---- validation -------------------------------------------------------
 *
 * The header is read with the JSON lexer (core/json.h), never as a tree: a
 * tree costs ~33 times the text, so a valid 100 MB header would cost GBs for
 * as long as the model is loaded. What is kept is O(tensors): one entry per
 * tensor and the names and metadata strings, copied once into one arena. A
 * tensor entry has exactly the keys the format defines; any other key is
 * refused (an entry carrying millions of ignored numbers is not a file any
 * writer makes). */

/* What is being read: the lexer, the arena of strings (offsets into it
 * until the end, when they become pointers) and scratch buffers. */
typedef struct st_reader {
    gf_json_lexer l;
    gf_buf key;     /* the member name just read */
    gf_buf str;     /* a string value just read */
    gf_buf arena;   /* names and metadata, NUL-terminated, back to back */
    size_t *meta_off; /* pairs of arena offsets (key, value) */
    size_t n_meta, cap_meta;
    size_t *name_off; /* arena offset of each tensor's name (file order later) */
    size_t cap_tensors;
    gf_st_file *f;
    gf_err *err;
} st_reader;

/* Copy the last decoded string in b into the arena; its offset. */
static gf_status st_keep(st_reader *r, const gf_buf *b, size_t *off)
{
    *off = r->arena.len;
    if (gf_buf_append(&r->arena, b->data != NULL ? b->data : "", b->len) != GF_OK ||
        gf_buf_append(&r->arena, "", 1) != GF_OK)
        return gf_err_set(r->err, GF_ERR_NOMEM, "out of memory reading the header");
    return GF_OK;
}

/* GF_OK when a value starts next, its type in *type (for messages: "a
 * number"); the lexer's "malformed JSON" failure when none does. */
static gf_status st_next_type(st_reader *r, const char **type)
{
    gf_status st;
    *type = gf_json_type_name(gf_json_lex_value_type(&r->l, &st));
    return st;
}

/* A JSON array of non-negative integers of at most max each (field names it
 * in messages): the first cap elements into out[], the count of all of them
 * in *count, so the caller can say how many there were. */
static gf_status st_read_uints(st_reader *r, const char *name, const char *field, size_t cap,
                               uint64_t max, uint64_t *out, size_t *count)
{
    gf_json_lexer *l = &r->l;
    bool first = true, done;
    gf_status st;
    size_t k = 0;
    for (;;) {
        if ((st = gf_json_lex_element(l, &first, &done)) != GF_OK)
            return st;
        if (done)
            break;
        if (k >= cap) { /* count the rest, keeping nothing */
            if ((st = gf_json_lex_skip(l)) != GF_OK)
                return st;
            k++;
            continue;
        }
        int c = gf_json_lex_peek(l);
        const char *ty;
        if (c != '-' && (c < '0' || c > '9') && (st = st_next_type(r, &ty)) != GF_OK)
            return st;
        gf_json_num n;
        if (c != '-' && (c < '0' || c > '9'))
            n.integral = false;
        else if ((st = gf_json_lex_number(l, &n)) != GF_OK)
            return st;
        if (!n.integral)
            return gf_err_set(r->err, GF_ERR_FORMAT, "tensor '%s': %s[%zu] is not an integer",
                              name, field, k);
        if (n.d < 0)
            return gf_err_set(r->err, GF_ERR_FORMAT, "tensor '%s': %s[%zu] is negative (%lld)",
                              name, field, k, n.is_int ? (long long)n.i : (long long)INT64_MIN);
        if (!n.is_uint || n.u > max)
            return gf_err_set(r->err, GF_ERR_OVERFLOW, "tensor '%s': %s[%zu] exceeds %llu", name,
                              field, k, (unsigned long long)max);
        out[k++] = n.u;
    }
    *count = k;
    return GF_OK;
}

static gf_status st_read_shape(st_reader *r, const char *name, gf_st_tensor *t)
{
    uint64_t dims[GF_MAX_RANK];
    size_t rank;
    gf_status st = st_read_uints(r, name, "shape", GF_MAX_RANK, INT64_MAX, dims, &rank);
    if (st != GF_OK)
        return st;
    if (rank > GF_MAX_RANK)
        return gf_err_set(r->err, GF_ERR_UNSUPPORTED, "tensor '%s': rank %zu exceeds %d", name,
                          rank, GF_MAX_RANK);
    for (size_t i = 0; i < rank; i++)
        t->shape[i] = (int64_t)dims[i];
    t->rank = (int32_t)rank;
    return GF_OK;
}

static gf_status st_read_offsets(st_reader *r, const char *name, gf_st_tensor *t)
{
    uint64_t v[2];
    size_t k;
    gf_status st = st_read_uints(r, name, "data_offsets", 2, UINT64_MAX, v, &k);
    if (st != GF_OK)
        return st;
    if (k != 2)
        return gf_err_set(r->err, GF_ERR_FORMAT,
                          "tensor '%s': data_offsets has %zu entries, expected 2", name, k);
    t->begin = v[0];
    t->end = v[1];
    return GF_OK;
}

/* One tensor entry, the value after its name (in r->key). */
static gf_status st_read_tensor(st_reader *r, gf_st_tensor *t)
{
    gf_json_lexer *l = &r->l;
    const char *name = r->key.data;
    if (strlen(name) != r->key.len)
        return gf_err_set(r->err, GF_ERR_FORMAT, "tensor name contains a NUL byte");
    const char *ty;
    gf_status st;
    if (gf_json_lex_peek(l) != '{')
        return (st = st_next_type(r, &ty)) != GF_OK
                   ? st
                   : gf_err_set(r->err, GF_ERR_FORMAT,
                                "tensor '%s': entry is a %s, not an object", name, ty);
    bool first = true, done;
    bool have_dt = false, have_shape = false, have_offs = false;
    gf_buf member;
    gf_buf_init(&member);
    for (;;) {
        if ((st = gf_json_lex_member(l, &first, &member, &done)) != GF_OK)
            goto out;
        if (done)
            break;
        const char *m = member.data;
        bool *seen = strcmp(m, "dtype") == 0          ? &have_dt
                   : strcmp(m, "shape") == 0          ? &have_shape
                   : strcmp(m, "data_offsets") == 0   ? &have_offs
                                                      : NULL;
        if (seen == NULL || strlen(m) != member.len) {
            st = gf_err_set(r->err, GF_ERR_FORMAT,
                            "tensor '%s': unknown key '%.64s' (an entry has \"dtype\", \"shape\" "
                            "and \"data_offsets\")", name, m);
            goto out;
        }
        if (*seen) {
            st = gf_err_set(r->err, GF_ERR_FORMAT, "tensor '%s': \"%s\" given twice", name, m);
            goto out;
        }
        *seen = true;
        int c = gf_json_lex_peek(l);
        if (c != '"' && c != '[' && (st = st_next_type(r, &ty)) != GF_OK)
            goto out; /* truncated or not JSON at all */
        if (seen == &have_dt) {
            if (c != '"') {
                st = gf_err_set(r->err, GF_ERR_FORMAT, "tensor '%s': missing or non-string "
                                "\"dtype\"", name);
                goto out;
            }
            if ((st = gf_json_lex_string(l, &r->str)) != GF_OK)
                goto out;
            t->dtype = gf_dtype_from_st_name(r->str.data, r->str.len);
            if (t->dtype == GF_DT_INVALID) {
                bool f8 = r->str.len >= 2 && memcmp(r->str.data, "F8", 2) == 0;
                st = gf_err_set(r->err, f8 ? GF_ERR_UNSUPPORTED : GF_ERR_FORMAT,
                                "tensor '%s': %s dtype '%.32s'", name,
                                f8 ? "unsupported" : "unknown", r->str.data);
                goto out;
            }
        } else if (c != '[') {
            st = gf_err_set(r->err, GF_ERR_FORMAT, "tensor '%s': missing or non-array \"%s\"",
                            name, m);
            goto out;
        } else if (seen == &have_shape) {
            if ((st = st_read_shape(r, name, t)) != GF_OK)
                goto out;
        } else if ((st = st_read_offsets(r, name, t)) != GF_OK) {
            goto out;
        }
    }
    st = !have_dt      ? gf_err_set(r->err, GF_ERR_FORMAT,
                                    "tensor '%s': missing or non-string \"dtype\"", name)
       : !have_shape   ? gf_err_set(r->err, GF_ERR_FORMAT,
                                    "tensor '%s': missing or non-array \"shape\"", name)
       : !have_offs    ? gf_err_set(r->err, GF_ERR_FORMAT,
                                    "tensor '%s': missing or non-array \"data_offsets\"", name)
                       : GF_OK;
    if (st != GF_OK)
        goto out;
    if (t->end < t->begin) {
        st = gf_err_set(r->err, GF_ERR_FORMAT,
                        "tensor '%s': data_offsets end %llu is before begin %llu", name,
                        (unsigned long long)t->end, (unsigned long long)t->begin);
        goto out;
    }
    uint64_t numel = 1, bytes;
    for (int32_t i = 0; i < t->rank; i++)
        if (!gf_u64_mul(numel, (uint64_t)t->shape[i], &numel)) {
            st = gf_err_set(r->err, GF_ERR_OVERFLOW,
                            "tensor '%s': element count of its shape overflows", name);
            goto out;
        }
    if (!gf_u64_mul(numel, gf_dtype_size(t->dtype), &bytes) || bytes > SIZE_MAX) {
        st = gf_err_set(r->err, GF_ERR_OVERFLOW, "tensor '%s': byte size overflows", name);
        goto out;
    }
    if (t->end - t->begin != bytes) {
        char sh[128];
        st = gf_err_set(r->err, GF_ERR_FORMAT,
                        "tensor '%s': data span is %llu bytes but shape %s of %s needs %llu",
                        name, (unsigned long long)(t->end - t->begin),
                        gf_shape_str(sh, sizeof sh, t->rank, t->shape),
                        gf_dtype_kserve_name(t->dtype), (unsigned long long)bytes);
        goto out;
    }
    t->nbytes = (size_t)bytes;
out:
    gf_buf_deinit(&member);
    return st;
}

/* The "__metadata__" object: string values only. */
static gf_status st_read_meta(st_reader *r)
{
    gf_json_lexer *l = &r->l;
    const char *ty;
    gf_status st;
    if (gf_json_lex_peek(l) != '{')
        return (st = st_next_type(r, &ty)) != GF_OK
                   ? st
                   : gf_err_set(r->err, GF_ERR_FORMAT, "__metadata__ is a %s, not an object",
                                ty);
    bool first = true, done;
    for (;;) {
        if ((st = gf_json_lex_member(l, &first, &r->key, &done)) != GF_OK)
            return st;
        if (done)
            return GF_OK;
        if (gf_json_lex_peek(l) != '"')
            return (st = st_next_type(r, &ty)) != GF_OK
                       ? st
                       : gf_err_set(r->err, GF_ERR_FORMAT,
                                    "__metadata__ value of '%s' is a %s, not a string",
                                    r->key.data, ty);
        if ((st = gf_json_lex_string(l, &r->str)) != GF_OK)
            return st;
        if (r->n_meta == r->cap_meta) {
            size_t cap = r->cap_meta ? r->cap_meta * 2 : 8;
            size_t *m = realloc(r->meta_off, cap * 2 * sizeof *m);
            if (m == NULL)
                return gf_err_set(r->err, GF_ERR_NOMEM, "out of memory reading the header");
            r->meta_off = m;
            r->cap_meta = cap;
        }
        if ((st = st_keep(r, &r->key, &r->meta_off[2 * r->n_meta])) != GF_OK ||
            (st = st_keep(r, &r->str, &r->meta_off[2 * r->n_meta + 1])) != GF_OK)
            return st;
        r->n_meta++;
    }
}

/* The header object: tensors and the metadata. */
static gf_status st_read_header(st_reader *r)
{
    gf_json_lexer *l = &r->l;
    gf_st_file *f = r->f;
    bool first = true, done, have_meta = false;
    gf_status st;
    for (;;) {
        if ((st = gf_json_lex_member(l, &first, &r->key, &done)) != GF_OK)
            return st;
        if (done)
            break;
        if (r->key.len == 12 && memcmp(r->key.data, "__metadata__", 12) == 0) {
            if (have_meta)
                return gf_err_set(r->err, GF_ERR_FORMAT, "duplicate tensor name '__metadata__'");
            have_meta = true;
            if ((st = st_read_meta(r)) != GF_OK)
                return st;
            continue;
        }
        if (f->n == r->cap_tensors) {
            size_t cap = r->cap_tensors ? r->cap_tensors * 2 : 16;
            gf_st_tensor *t = realloc(f->tensors, cap * sizeof *t);
            if (t == NULL)
                return gf_err_set(r->err, GF_ERR_NOMEM, "out of memory reading the header");
            f->tensors = t;
            size_t *no = realloc(r->name_off, cap * sizeof *no);
            if (no == NULL)
                return gf_err_set(r->err, GF_ERR_NOMEM, "out of memory reading the header");
            r->name_off = no;
            r->cap_tensors = cap;
        }
        gf_st_tensor *t = &f->tensors[f->n];
        memset(t, 0, sizeof *t);
        if ((st = st_read_tensor(r, t)) != GF_OK ||
            (st = st_keep(r, &r->key, &r->name_off[f->n])) != GF_OK)
            return st;
        f->n++;
    }
    if (gf_json_lex_peek(l) >= 0)
        return gf_json_lex_fail(l, "trailing characters after the value");
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

static int st_cmp_strs(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void st_reader_deinit(st_reader *r)
{
    gf_buf_deinit(&r->key);
    gf_buf_deinit(&r->str);
    gf_buf_deinit(&r->arena);
    free(r->meta_off);
    free(r->name_off);
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
    st_reader r;
    memset(&r, 0, sizeof r);
    gf_buf_init(&r.key);
    gf_buf_init(&r.str);
    gf_buf_init(&r.arena);
    r.f = f;
    r.err = err;
    gf_json_lexer_init(&r.l, hdr, (size_t)n, 0, err);
    gf_status st = st_read_header(&r);
    if (st == GF_ERR_FORMAT && err != NULL && strncmp(err->msg, "malformed JSON", 14) == 0)
        gf_err_prefix(err, "header is not valid JSON");
    if (st != GF_OK)
        goto fail;
    /* the strings, now that the arena has stopped moving */
    size_t alen;
    f->strings = gf_buf_steal(&r.arena, &alen);
    f->meta_key = calloc(r.n_meta + 1, sizeof *f->meta_key);
    f->meta_val = calloc(r.n_meta + 1, sizeof *f->meta_val);
    if (f->strings == NULL || f->meta_key == NULL || f->meta_val == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < r.n_meta; i++) {
        f->meta_key[i] = f->strings + r.meta_off[2 * i];
        f->meta_val[i] = f->strings + r.meta_off[2 * i + 1];
    }
    f->n_meta = r.n_meta;
    for (size_t i = 0; i < f->n; i++) /* still in file order */
        f->tensors[i].name = f->strings + r.name_off[i];
    /* names: unique, found in O(log n) */
    f->by_name = malloc((f->n ? f->n : 1) * sizeof *f->by_name);
    st_name_ref *refs = malloc((f->n ? f->n : 1) * sizeof *refs);
    if (f->by_name == NULL || refs == NULL) {
        free(refs);
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (f->n > 1) /* (qsort of a NULL array, even empty, is undefined) */
        qsort(f->tensors, f->n, sizeof *f->tensors, st_cmp_offsets);
    for (size_t i = 0; i < f->n; i++)
        refs[i] = (st_name_ref){f->tensors[i].name, i};
    if (f->n > 1)
        qsort(refs, f->n, sizeof *refs, st_cmp_names);
    for (size_t i = 0; i < f->n; i++) {
        f->by_name[i] = refs[i].idx;
        if (i > 0 && strcmp(refs[i - 1].name, refs[i].name) == 0) {
            st = gf_err_set(err, GF_ERR_FORMAT, "duplicate tensor name '%s'", refs[i].name);
            free(refs);
            goto fail;
        }
    }
    free(refs);
    if (f->n_meta > 1) { /* duplicate keys, in O(n log n) on a sorted copy */
        const char **keys = malloc(f->n_meta * sizeof *keys);
        if (keys == NULL) {
            st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            goto fail;
        }
        memcpy(keys, f->meta_key, f->n_meta * sizeof *keys);
        qsort(keys, f->n_meta, sizeof *keys, st_cmp_strs);
        for (size_t i = 1; i < f->n_meta; i++)
            if (strcmp(keys[i - 1], keys[i]) == 0) {
                st = gf_err_set(err, GF_ERR_FORMAT, "duplicate __metadata__ key '%s'", keys[i]);
                free(keys);
                goto fail;
            }
        free(keys);
    }
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
    st_reader_deinit(&r);
    *out = f;
    return GF_OK;
fail:
    st_reader_deinit(&r);
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
    /* a stale one (a crash) is removed, never followed or reused: a link
     * planted there cannot redirect the write */
    if (unlink(tmp) != 0 && errno != ENOENT) {
        st = gf_err_set(err, GF_ERR_IO, "unlink(%s): %s", tmp, strerror(errno));
        free(tmp);
        tmp = NULL;
        goto out;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
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
