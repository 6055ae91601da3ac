/* gpufaas — a growable byte buffer. */
#include "core/buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"

void gf_buf_init(gf_buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->limit = 0;
}

void gf_buf_deinit(gf_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void gf_buf_reset(gf_buf *b)
{
    b->len = 0;
    if (b->data != NULL)
        b->data[0] = '\0';
}

gf_status gf_buf_reserve(gf_buf *b, size_t more)
{
    if (more > SIZE_MAX - 1 - b->len)
        return GF_ERR_OVERFLOW;
    size_t need = b->len + more + 1; /* + NUL */
    if (b->limit != 0 && b->len + more > b->limit)
        return GF_ERR_TOO_LARGE;
    if (need <= b->cap)
        return GF_OK;
    size_t cap = b->cap < 64 ? 64 : b->cap;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (p == NULL)
        return GF_ERR_NOMEM;
    b->data = p;
    b->cap = cap;
    return GF_OK;
}

gf_status gf_buf_append(gf_buf *b, const void *p, size_t n)
{
    gf_status st = gf_buf_reserve(b, n);
    if (st != GF_OK)
        return st;
    if (n > 0)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return GF_OK;
}

gf_status gf_buf_append_str(gf_buf *b, const char *s)
{
    return gf_buf_append(b, s, strlen(s));
}

gf_status gf_buf_vprintf(gf_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return GF_ERR_INVALID;
    gf_status st = gf_buf_reserve(b, (size_t)n);
    if (st != GF_OK)
        return st;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return GF_OK;
}

gf_status gf_buf_printf(gf_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gf_status st = gf_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return st;
}

gf_status gf_buf_append_json_str(gf_buf *b, const char *s, size_t len)
{
    size_t start_len = b->len;
    gf_status st = gf_buf_append(b, "\"", 1);
    size_t i = 0;
    while (st == GF_OK && i < len) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            st = gf_buf_append(b, esc, 2);
            i++;
        } else if (c < 0x20) {
            char esc[8];
            const char *named = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t"
                              : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
            if (named == NULL) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                named = esc;
            }
            st = gf_buf_append_str(b, named);
            i++;
        } else if (c < 0x80) {
            st = gf_buf_append(b, &s[i], 1);
            i++;
        } else {
            size_t n = gf_utf8_seq_len(s + i, len - i);
            if (n == 0) {
                st = gf_buf_append(b, "\xef\xbf\xbd", 3);
                i++;
            } else {
                st = gf_buf_append(b, s + i, n);
                i += n;
            }
        }
    }
    if (st == GF_OK)
        st = gf_buf_append(b, "\"", 1);
    if (st != GF_OK) {
        b->len = start_len;
        if (b->data != NULL)
            b->data[b->len] = '\0';
    }
    return st;
}

char *gf_buf_steal(gf_buf *b, size_t *len)
{
    char *p = b->data;
    if (len != NULL)
        *len = b->len;
    if (p == NULL)
        p = calloc(1, 1);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    return p;
}

size_t gf_str_copy(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (cap > 0) {
        size_t k = n < cap - 1 ? n : cap - 1;
        memcpy(dst, src, k);
        dst[k] = '\0';
    }
    return n;
}
