/* gpufaas — a strict JSON parser. */
#include "core/json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/utf8.h"

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

/* ---- parser ----------------------------------------------------------- */

typedef struct {
    const char *s;
    size_t len, pos, max_depth;
    gf_json_doc *doc;
    gf_err *err;
} gf_jp;

static gf_status jp_fail(gf_jp *p, gf_status code, const char *what)
{
    if (code == GF_ERR_NOMEM)
        return gf_err_set(p->err, code, "out of memory while parsing JSON");
    return gf_err_set(p->err, code, "JSON: %s at byte %zu", what, p->pos);
}

static void jp_ws(gf_jp *p)
{
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
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

static int jp_hex4(const char *s, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

/* Parse a string starting at the opening quote; decoded into the arena. */
static gf_status jp_string(gf_jp *p, const char **out, size_t *out_len)
{
    size_t start = ++p->pos; /* past the quote */
    /* first pass: find the end and validate, computing an upper bound */
    size_t i = start;
    while (1) {
        if (i >= p->len) {
            p->pos = i;
            return jp_fail(p, GF_ERR_FORMAT, "unterminated string");
        }
        unsigned char c = (unsigned char)p->s[i];
        if (c == '"')
            break;
        if (c < 0x20) {
            p->pos = i;
            return jp_fail(p, GF_ERR_FORMAT, "control character in string");
        }
        if (c == '\\') {
            i += 2;
            continue;
        }
        if (c >= 0x80) {
            size_t n = gf_utf8_seq_len(p->s + i, p->len - i);
            if (n == 0) {
                p->pos = i;
                return jp_fail(p, GF_ERR_FORMAT, "invalid UTF-8 in string");
            }
            i += n;
            continue;
        }
        i++;
    }
    size_t end = i;
    char *dst = gf_arena_alloc(p->doc, end - start + 1);
    if (dst == NULL)
        return jp_fail(p, GF_ERR_NOMEM, NULL);
    size_t o = 0;
    for (i = start; i < end;) {
        char c = p->s[i];
        if (c != '\\') {
            dst[o++] = c;
            i++;
            continue;
        }
        if (i + 1 >= end) {
            p->pos = i;
            return jp_fail(p, GF_ERR_FORMAT, "bad escape");
        }
        char e = p->s[i + 1];
        i += 2;
        switch (e) {
        case '"': dst[o++] = '"'; break;
        case '\\': dst[o++] = '\\'; break;
        case '/': dst[o++] = '/'; break;
        case 'b': dst[o++] = '\b'; break;
        case 'f': dst[o++] = '\f'; break;
        case 'n': dst[o++] = '\n'; break;
        case 'r': dst[o++] = '\r'; break;
        case 't': dst[o++] = '\t'; break;
        case 'u': {
            uint32_t cp;
            if (end - i < 4 || jp_hex4(p->s + i, &cp) != 0) {
                p->pos = i;
                return jp_fail(p, GF_ERR_FORMAT, "bad \\u escape");
            }
            i += 4;
            if (cp >= 0xdc00 && cp <= 0xdfff) {
                p->pos = i;
                return jp_fail(p, GF_ERR_FORMAT, "lone low surrogate in \\u escape");
            }
            if (cp >= 0xd800 && cp <= 0xdbff) {
                uint32_t lo;
                if (end - i < 6 || p->s[i] != '\\' || p->s[i + 1] != 'u' ||
                    jp_hex4(p->s + i + 2, &lo) != 0 || lo < 0xdc00 || lo > 0xdfff) {
                    p->pos = i;
                    return jp_fail(p, GF_ERR_FORMAT, "lone high surrogate in \\u escape");
                }
                i += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            /* the encoding never exceeds the 6 escaped bytes it replaces */
            o += gf_utf8_encode(cp, dst + o);
            break;
        }
        default:
            p->pos = i - 1;
            return jp_fail(p, GF_ERR_FORMAT, "unknown escape");
        }
    }
    dst[o] = '\0';
    p->pos = end + 1;
    *out = dst;
    *out_len = o;
    return GF_OK;
}

static gf_status jp_number(gf_jp *p, gf_json *v)
{
    size_t start = p->pos;
    size_t i = start;
    bool neg = false, integral = true;
    if (i < p->len && p->s[i] == '-') {
        neg = true;
        i++;
    }
    if (i >= p->len || p->s[i] < '0' || p->s[i] > '9') {
        p->pos = i;
        return jp_fail(p, GF_ERR_FORMAT, "expected a digit");
    }
    size_t int_start = i;
    if (p->s[i] == '0') {
        i++;
        if (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') {
            p->pos = i;
            return jp_fail(p, GF_ERR_FORMAT, "leading zero in number");
        }
    } else {
        while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9')
            i++;
    }
    size_t int_end = i;
    if (i < p->len && p->s[i] == '.') {
        integral = false;
        i++;
        if (i >= p->len || p->s[i] < '0' || p->s[i] > '9') {
            p->pos = i;
            return jp_fail(p, GF_ERR_FORMAT, "expected a digit after '.'");
        }
        while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9')
            i++;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        integral = false;
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-'))
            i++;
        if (i >= p->len || p->s[i] < '0' || p->s[i] > '9') {
            p->pos = i;
            return jp_fail(p, GF_ERR_FORMAT, "expected a digit in exponent");
        }
        while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9')
            i++;
    }
    size_t n = i - start;
    char small[128];
    char *tmp = n < sizeof small ? small : gf_arena_alloc(p->doc, n + 1);
    if (tmp == NULL)
        return jp_fail(p, GF_ERR_NOMEM, NULL);
    memcpy(tmp, p->s + start, n);
    tmp[n] = '\0';
    v->u.num.d = strtod(tmp, NULL); /* overflow gives +-HUGE_VAL, acceptable */
    if (integral) {
        uint64_t u = 0;
        bool fits = true;
        for (size_t k = int_start; k < int_end; k++) {
            uint64_t d = (uint64_t)(p->s[k] - '0');
            if (u > (UINT64_MAX - d) / 10) {
                fits = false;
                break;
            }
            u = u * 10 + d;
        }
        if (fits) {
            if (!neg) {
                v->u.num.is_uint = true;
                v->u.num.u = u;
                if (u <= (uint64_t)INT64_MAX) {
                    v->u.num.is_int = true;
                    v->u.num.i = (int64_t)u;
                }
            } else if (u <= (uint64_t)INT64_MAX + 1u) {
                v->u.num.is_int = true;
                v->u.num.i = u == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)u;
                if (u == 0) { /* "-0" is the integer 0 */
                    v->u.num.is_uint = true;
                    v->u.num.u = 0;
                }
            }
        }
    }
    p->pos = i;
    return GF_OK;
}

static gf_status jp_value(gf_jp *p, size_t depth, gf_json **out);

static gf_status jp_array(gf_jp *p, size_t depth, gf_json *v)
{
    p->pos++; /* '[' */
    size_t n = 0, cap = 0;
    gf_json **tmp = NULL;
    gf_status st = GF_OK;
    jp_ws(p);
    if (p->pos < p->len && p->s[p->pos] == ']') {
        p->pos++;
        return GF_OK;
    }
    while (1) {
        gf_json *item;
        st = jp_value(p, depth + 1, &item);
        if (st != GF_OK)
            goto out;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            gf_json **t = realloc(tmp, cap * sizeof *t);
            if (t == NULL) {
                st = jp_fail(p, GF_ERR_NOMEM, NULL);
                goto out;
            }
            tmp = t;
        }
        tmp[n++] = item;
        jp_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == ']') {
            p->pos++;
            break;
        }
        st = jp_fail(p, GF_ERR_FORMAT, "expected ',' or ']' in array");
        goto out;
    }
    v->u.arr.items = gf_arena_alloc(p->doc, n * sizeof *tmp);
    if (v->u.arr.items == NULL) {
        st = jp_fail(p, GF_ERR_NOMEM, NULL);
        goto out;
    }
    memcpy(v->u.arr.items, tmp, n * sizeof *tmp);
    v->u.arr.n = n;
out:
    free(tmp);
    return st;
}

static gf_status jp_object(gf_jp *p, size_t depth, gf_json *v)
{
    p->pos++; /* '{' */
    size_t n = 0, cap = 0;
    gf_json_member *tmp = NULL;
    gf_status st = GF_OK;
    jp_ws(p);
    if (p->pos < p->len && p->s[p->pos] == '}') {
        p->pos++;
        return GF_OK;
    }
    while (1) {
        jp_ws(p);
        if (p->pos >= p->len || p->s[p->pos] != '"') {
            st = jp_fail(p, GF_ERR_FORMAT, "expected a string key in object");
            goto out;
        }
        gf_json_member m;
        st = jp_string(p, &m.key, &m.key_len);
        if (st != GF_OK)
            goto out;
        jp_ws(p);
        if (p->pos >= p->len || p->s[p->pos] != ':') {
            st = jp_fail(p, GF_ERR_FORMAT, "expected ':' after object key");
            goto out;
        }
        p->pos++;
        st = jp_value(p, depth + 1, &m.value);
        if (st != GF_OK)
            goto out;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            gf_json_member *t = realloc(tmp, cap * sizeof *t);
            if (t == NULL) {
                st = jp_fail(p, GF_ERR_NOMEM, NULL);
                goto out;
            }
            tmp = t;
        }
        tmp[n++] = m;
        jp_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == '}') {
            p->pos++;
            break;
        }
        st = jp_fail(p, GF_ERR_FORMAT, "expected ',' or '}' in object");
        goto out;
    }
    v->u.obj.m = gf_arena_alloc(p->doc, n * sizeof *tmp);
    if (v->u.obj.m == NULL) {
        st = jp_fail(p, GF_ERR_NOMEM, NULL);
        goto out;
    }
    memcpy(v->u.obj.m, tmp, n * sizeof *tmp);
    v->u.obj.n = n;
out:
    free(tmp);
    return st;
}

static gf_status jp_literal(gf_jp *p, const char *word)
{
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return jp_fail(p, GF_ERR_FORMAT, "invalid literal");
    p->pos += n;
    return GF_OK;
}

static gf_status jp_value(gf_jp *p, size_t depth, gf_json **out)
{
    jp_ws(p);
    if (p->pos >= p->len)
        return jp_fail(p, GF_ERR_FORMAT, "unexpected end of input");
    char c = p->s[p->pos];
    gf_json *v;
    gf_status st;
    if ((c == '{' || c == '[') && depth > p->max_depth)
        return jp_fail(p, GF_ERR_FORMAT, "nesting too deep");
    switch (c) {
    case '{':
        if ((v = jp_node(p, GF_JSON_OBJECT, p->pos)) == NULL)
            return jp_fail(p, GF_ERR_NOMEM, NULL);
        st = jp_object(p, depth, v);
        break;
    case '[':
        if ((v = jp_node(p, GF_JSON_ARRAY, p->pos)) == NULL)
            return jp_fail(p, GF_ERR_NOMEM, NULL);
        st = jp_array(p, depth, v);
        break;
    case '"':
        if ((v = jp_node(p, GF_JSON_STRING, p->pos)) == NULL)
            return jp_fail(p, GF_ERR_NOMEM, NULL);
        st = jp_string(p, &v->u.str.s, &v->u.str.len);
        break;
    case 't':
    case 'f':
        if ((v = jp_node(p, GF_JSON_BOOL, p->pos)) == NULL)
            return jp_fail(p, GF_ERR_NOMEM, NULL);
        v->u.b = c == 't';
        st = jp_literal(p, c == 't' ? "true" : "false");
        break;
    case 'n':
        if ((v = jp_node(p, GF_JSON_NULL, p->pos)) == NULL)
            return jp_fail(p, GF_ERR_NOMEM, NULL);
        st = jp_literal(p, "null");
        break;
    default:
        if (c != '-' && (c < '0' || c > '9'))
            return jp_fail(p, GF_ERR_FORMAT, "unexpected character");
        if ((v = jp_node(p, GF_JSON_NUMBER, p->pos)) == NULL)
            return jp_fail(p, GF_ERR_NOMEM, NULL);
        st = jp_number(p, v);
        break;
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
    gf_jp p = {.s = text, .len = len, .pos = 0,
               .max_depth = max_depth ? max_depth : GF_JSON_DEFAULT_DEPTH,
               .doc = doc, .err = err};
    gf_json *root;
    gf_status st = jp_value(&p, 1, &root);
    if (st == GF_OK) {
        jp_ws(&p);
        if (p.pos != p.len)
            st = jp_fail(&p, GF_ERR_FORMAT, "trailing characters after the value");
    }
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
