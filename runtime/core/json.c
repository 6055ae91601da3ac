/* gpufaas — the JSON tree: built with the lexer (json_lex.c), read, written. */
#include "core/json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"

/* ---- arena ------------------------------------------------------------ */

typedef struct gf_arena_block {
    struct gf_arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
} gf_arena_block;

struct gf_json_doc {
    gf_arena_block *blocks;
    gf_json *root;
};

static void *gf_arena_alloc(gf_json_doc *doc, size_t n)
{
    n = (n + 15u) & ~(size_t)15u;
    gf_arena_block *b = doc->blocks;
    if (b == NULL || b->cap - b->used < n) {
        size_t cap = n > 16384 ? n : 16384;
        b = malloc(sizeof *b + cap);
        if (b == NULL)
            return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = doc->blocks;
        doc->blocks = b;
    }
    void *p = b->mem + b->used;
    b->used += n;
    return p;
}

void gf_json_doc_free(gf_json_doc *doc)
{
    if (doc == NULL)
        return;
    gf_arena_block *b = doc->blocks;
    while (b != NULL) {
        gf_arena_block *next = b->next;
        free(b);
        b = next;
    }
    free(doc);
}

const gf_json *gf_json_doc_root(const gf_json_doc *doc)
{
    return doc->root;
}

/* ---- the tree, read with the lexer ------------------------------------ */

typedef struct {
    gf_json_lexer l;
    gf_json_doc *doc;
    gf_buf str;      /* a string as the lexer decodes it, before the arena */
} gf_jp;

static gf_status jp_nomem(gf_jp *p)
{
    return gf_err_set(p->l.err, GF_ERR_NOMEM, "out of memory while parsing JSON");
}

static gf_json *jp_node(gf_jp *p, gf_json_type t, size_t offset)
{
    gf_json *v = gf_arena_alloc(p->doc, sizeof *v);
    if (v == NULL)
        return NULL;
    memset(v, 0, sizeof *v);
    v->type = t;
    v->offset = offset;
    return v;
}

/* The string just read (in p->str), copied into the arena. */
static gf_status jp_keep(gf_jp *p, const char **out, size_t *len)
{
    char *dst = gf_arena_alloc(p->doc, p->str.len + 1);
    if (dst == NULL)
        return jp_nomem(p);
    if (p->str.len > 0)
        memcpy(dst, p->str.data, p->str.len);
    dst[p->str.len] = '\0';
    *out = dst;
    *len = p->str.len;
    return GF_OK;
}

/* Grow a scratch list of n items of size sz to hold one more. */
static gf_status jp_grow(gf_jp *p, void **list, size_t n, size_t *cap, size_t sz)
{
    if (n < *cap)
        return GF_OK;
    size_t c = *cap ? *cap * 2 : 8;
    void *t = realloc(*list, c * sz);
    if (t == NULL)
        return jp_nomem(p);
    *list = t;
    *cap = c;
    return GF_OK;
}

static gf_status jp_value(gf_jp *p, gf_json **out);

static gf_status jp_array(gf_jp *p, gf_json *v)
{
    size_t n = 0, cap = 0;
    gf_json **tmp = NULL;
    bool first = true, done = false;
    gf_status st;
    while ((st = gf_json_lex_element(&p->l, &first, &done)) == GF_OK && !done) {
        gf_json *item;
        if ((st = jp_value(p, &item)) != GF_OK ||
            (st = jp_grow(p, (void **)&tmp, n, &cap, sizeof *tmp)) != GF_OK)
            break;
        tmp[n++] = item;
    }
    if (st == GF_OK && n > 0) {
        v->u.arr.items = gf_arena_alloc(p->doc, n * sizeof *tmp);
        if (v->u.arr.items == NULL)
            st = jp_nomem(p);
        else
            memcpy(v->u.arr.items, tmp, n * sizeof *tmp);
        v->u.arr.n = st == GF_OK ? n : 0;
    }
    free(tmp);
    return st;
}

static gf_status jp_object(gf_jp *p, gf_json *v)
{
    size_t n = 0, cap = 0;
    gf_json_member *tmp = NULL;
    bool first = true, done = false;
    gf_status st;
    while ((st = gf_json_lex_member(&p->l, &first, &p->str, &done)) == GF_OK && !done) {
        gf_json_member m;
        if ((st = jp_keep(p, &m.key, &m.key_len)) != GF_OK ||
            (st = jp_value(p, &m.value)) != GF_OK ||
            (st = jp_grow(p, (void **)&tmp, n, &cap, sizeof *tmp)) != GF_OK)
            break;
        tmp[n++] = m;
    }
    if (st == GF_OK && n > 0) {
        v->u.obj.m = gf_arena_alloc(p->doc, n * sizeof *tmp);
        if (v->u.obj.m == NULL)
            st = jp_nomem(p);
        else
            memcpy(v->u.obj.m, tmp, n * sizeof *tmp);
        v->u.obj.n = st == GF_OK ? n : 0;
    }
    free(tmp);
    return st;
}

static gf_status jp_value(gf_jp *p, gf_json **out)
{
    gf_status st;
    gf_json_type t = gf_json_lex_value_type(&p->l, &st);
    if (st != GF_OK)
        return st;
    gf_json *v = jp_node(p, t, p->l.pos);
    if (v == NULL)
        return jp_nomem(p);
    switch (t) {
    case GF_JSON_OBJECT:
        st = jp_object(p, v);
        break;
    case GF_JSON_ARRAY:
        st = jp_array(p, v);
        break;
    case GF_JSON_STRING:
        if ((st = gf_json_lex_string(&p->l, &p->str)) == GF_OK)
            st = jp_keep(p, &v->u.str.s, &v->u.str.len);
        break;
    case GF_JSON_BOOL:
        v->u.b = p->l.s[p->l.pos] == 't';
        st = gf_json_lex_literal(&p->l, v->u.b ? "true" : "false");
        break;
    case GF_JSON_NULL:
        st = gf_json_lex_literal(&p->l, "null");
        break;
    case GF_JSON_NUMBER: {
        gf_json_num n;
        if ((st = gf_json_lex_number(&p->l, &n)) == GF_OK) {
            v->u.num.d = n.d;
            v->u.num.i = n.i;
            v->u.num.u = n.u;
            v->u.num.is_int = n.is_int;
            v->u.num.is_uint = n.is_uint;
        }
        break;
    }
    }
    if (st == GF_OK)
        *out = v;
    return st;
}

gf_status gf_json_parse(const char *text, size_t len, size_t max_depth, gf_json_doc **out,
                        gf_err *err)
{
    *out = NULL;
    gf_json_doc *doc = calloc(1, sizeof *doc);
    if (doc == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory while parsing JSON");
    gf_jp p = {.doc = doc};
    gf_json_lexer_init(&p.l, text, len, max_depth, err);
    gf_buf_init(&p.str);
    gf_json *root;
    gf_status st = jp_value(&p, &root);
    if (st == GF_OK)
        st = gf_json_lex_end(&p.l);
    gf_buf_deinit(&p.str);
    if (st != GF_OK) {
        gf_json_doc_free(doc);
        return st;
    }
    doc->root = root;
    *out = doc;
    return GF_OK;
}

const gf_json *gf_json_get(const gf_json *obj, const char *key)
{
    if (obj == NULL || obj->type != GF_JSON_OBJECT)
        return NULL;
    size_t klen = strlen(key);
    for (size_t i = 0; i < obj->u.obj.n; i++) {
        const gf_json_member *m = &obj->u.obj.m[i];
        if (m->key_len == klen && memcmp(m->key, key, klen) == 0)
            return m->value;
    }
    return NULL;
}

/* One reference token of a JSON Pointer, unescaped into tok (cap bytes).
 * Returns the token's length, or -1 when it is malformed or too long. */
static long gf_json_ptr_token(const char *p, size_t n, char *tok, size_t cap)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '~') {
            if (i + 1 >= n || (p[i + 1] != '0' && p[i + 1] != '1'))
                return -1;
            c = p[++i] == '0' ? '~' : '/';
        }
        if (len + 1 >= cap)
            return -1;
        tok[len++] = c;
    }
    tok[len] = '\0';
    return (long)len;
}

gf_status gf_json_pointer(const gf_json *root, const char *pointer, const gf_json **out,
                          gf_err *err)
{
    *out = NULL;
    if (pointer == NULL || pointer[0] == '\0') {
        *out = root;
        return GF_OK;
    }
    if (pointer[0] != '/')
        return gf_err_set(err, GF_ERR_INVALID, "JSON pointer '%.80s' must be empty or start "
                          "with '/'", pointer);
    const gf_json *v = root;
    const char *p = pointer;
    char tok[256];
    while (*p == '/') {
        p++;
        size_t n = strcspn(p, "/");
        long len = gf_json_ptr_token(p, n, tok, sizeof tok);
        if (len < 0)
            return gf_err_set(err, GF_ERR_INVALID, "JSON pointer '%.80s': malformed or too "
                              "long token (a '~' must be followed by 0 or 1)", pointer);
        p += n;
        if (v == NULL)
            continue; /* keep checking the syntax */
        if (v->type == GF_JSON_OBJECT) {
            const gf_json *next = NULL;
            for (size_t i = 0; i < v->u.obj.n && next == NULL; i++) {
                const gf_json_member *m = &v->u.obj.m[i];
                if (m->key_len == (size_t)len && memcmp(m->key, tok, (size_t)len) == 0)
                    next = m->value;
            }
            v = next;
        } else if (v->type == GF_JSON_ARRAY) {
            bool digits = len > 0 && len <= 18 && strspn(tok, "0123456789") == (size_t)len &&
                          (tok[0] != '0' || len == 1);
            unsigned long long k = digits ? strtoull(tok, NULL, 10) : 0;
            v = digits && k < v->u.arr.n ? v->u.arr.items[k] : NULL;
        } else {
            v = NULL;
        }
    }
    *out = v;
    return GF_OK;
}

typedef struct {
    const gf_json_member *m;
    size_t idx;
} gf_json_keyref;

static int gf_json_keyref_cmp(const void *a, const void *b)
{
    const gf_json_keyref *x = a, *y = b;
    size_t n = x->m->key_len < y->m->key_len ? x->m->key_len : y->m->key_len;
    int c = memcmp(x->m->key, y->m->key, n);
    if (c != 0)
        return c;
    if (x->m->key_len != y->m->key_len)
        return x->m->key_len < y->m->key_len ? -1 : 1;
    return x->idx < y->idx ? -1 : (x->idx > y->idx ? 1 : 0);
}

long gf_json_obj_find_dup(const gf_json *obj)
{
    if (obj == NULL || obj->type != GF_JSON_OBJECT || obj->u.obj.n < 2)
        return -1;
    size_t n = obj->u.obj.n;
    gf_json_keyref *refs = malloc(n * sizeof *refs);
    if (refs == NULL)
        return -2;
    for (size_t i = 0; i < n; i++) {
        refs[i].m = &obj->u.obj.m[i];
        refs[i].idx = i;
    }
    qsort(refs, n, sizeof *refs, gf_json_keyref_cmp);
    long dup = -1;
    for (size_t i = 1; i < n; i++) {
        const gf_json_member *a = refs[i - 1].m, *b = refs[i].m;
        if (a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0) {
            /* refs are sorted by (key, idx): b is a later occurrence */
            if (dup < 0 || (long)refs[i].idx < dup)
                dup = (long)refs[i].idx;
        }
    }
    free(refs);
    return dup;
}

const char *gf_json_type_name(gf_json_type t)
{
    switch (t) {
    case GF_JSON_NULL: return "null";
    case GF_JSON_BOOL: return "boolean";
    case GF_JSON_NUMBER: return "number";
    case GF_JSON_STRING: return "string";
    case GF_JSON_ARRAY: return "array";
    case GF_JSON_OBJECT: return "object";
    }
    return "unknown";
}

gf_status gf_json_write(const gf_json *v, gf_buf *out)
{
    gf_status st = GF_OK;
    switch (v->type) {
    case GF_JSON_NULL:
        return gf_buf_append_str(out, "null");
    case GF_JSON_BOOL:
        return gf_buf_append_str(out, v->u.b ? "true" : "false");
    case GF_JSON_NUMBER:
        if (v->u.num.is_int)
            return gf_buf_printf(out, "%lld", (long long)v->u.num.i);
        if (v->u.num.is_uint)
            return gf_buf_printf(out, "%llu", (unsigned long long)v->u.num.u);
        /* a number too large for a double (1e400) was read as +-Inf: write one
         * that reads back the same, not C's "inf"; and -0 keeps its sign */
        if (isinf(v->u.num.d))
            return gf_buf_append_str(out, v->u.num.d > 0 ? "1e999" : "-1e999");
        if (v->u.num.d == 0 && signbit(v->u.num.d))
            return gf_buf_append_str(out, "-0.0");
        return gf_buf_printf(out, "%.17g", v->u.num.d);
    case GF_JSON_STRING:
        return gf_buf_append_json_str(out, v->u.str.s, v->u.str.len);
    case GF_JSON_ARRAY:
        st = gf_buf_append_str(out, "[");
        for (size_t i = 0; st == GF_OK && i < v->u.arr.n; i++) {
            if (i > 0)
                st = gf_buf_append_str(out, ",");
            if (st == GF_OK)
                st = gf_json_write(v->u.arr.items[i], out);
        }
        return st != GF_OK ? st : gf_buf_append_str(out, "]");
    case GF_JSON_OBJECT:
        st = gf_buf_append_str(out, "{");
        for (size_t i = 0; st == GF_OK && i < v->u.obj.n; i++) {
            if (i > 0)
                st = gf_buf_append_str(out, ",");
            if (st == GF_OK)
                st = gf_buf_append_json_str(out, v->u.obj.m[i].key, v->u.obj.m[i].key_len);
            if (st == GF_OK)
                st = gf_buf_append_str(out, ":");
            if (st == GF_OK)
                st = gf_json_write(v->u.obj.m[i].value, out);
        }
        return st != GF_OK ? st : gf_buf_append_str(out, "}");
    }
    return GF_ERR_INTERNAL;
}
