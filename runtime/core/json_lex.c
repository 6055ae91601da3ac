/* gpufaas — the JSON lexer: RFC 8259, strictly, once for the whole tree.
 * Strings are decoded (escapes, surrogate pairs) with their UTF-8
 * validated, numbers follow the grammar to the letter and are kept exactly
 * when they are integers, nesting is bounded. The tree parser (json.c) and
 * the HTTP front's inference request reader (gateway/http/codec.c) are built
 * on it, so they accept exactly the same texts with the same messages. */
#include "core/json.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/floatfmt.h"
#include "core/utf8.h"

void gf_json_lexer_init(gf_json_lexer *l, const char *s, size_t len, size_t max_depth,
                        gf_err *err)
{
    l->s = s;
    l->len = len;
    l->pos = 0;
    l->depth = 0;
    l->max_depth = max_depth ? max_depth : GF_JSON_DEFAULT_DEPTH;
    l->err = err;
}

gf_status gf_json_lex_fail(gf_json_lexer *l, const char *what)
{
    return gf_err_set(l->err, GF_ERR_FORMAT, "malformed JSON at byte %zu: %s", l->pos, what);
}

static gf_status lex_nomem(gf_json_lexer *l)
{
    return gf_err_set(l->err, GF_ERR_NOMEM, "out of memory while parsing JSON");
}

int gf_json_lex_peek(gf_json_lexer *l)
{
    while (l->pos < l->len) {
        char c = l->s[l->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            return (unsigned char)c;
        l->pos++;
    }
    return -1;
}

bool gf_json_lex_eat(gf_json_lexer *l, char c)
{
    if (gf_json_lex_peek(l) == (unsigned char)c) {
        l->pos++;
        return true;
    }
    return false;
}

/* Step into the '[' or '{' at pos, within the nesting bound. */
static gf_status lex_enter(gf_json_lexer *l)
{
    if (l->depth >= l->max_depth)
        return gf_err_set(l->err, GF_ERR_FORMAT, "JSON nesting deeper than %zu levels at byte %zu",
                          l->max_depth, l->pos);
    l->depth++;
    l->pos++;
    return GF_OK;
}

static int hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Four hex digits at pos (after "\u"). */
static bool hex4(gf_json_lexer *l, uint32_t *out)
{
    if (l->len - l->pos < 4)
        return false;
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hex(l->s[l->pos + (size_t)k]);
        if (h < 0)
            return false;
        v = v << 4 | (uint32_t)h;
    }
    l->pos += 4;
    *out = v;
    return true;
}

gf_status gf_json_lex_string(gf_json_lexer *l, gf_buf *out)
{
    if (gf_json_lex_peek(l) != '"')
        return gf_json_lex_fail(l, "expected a string");
    l->pos++;
    if (out != NULL)
        gf_buf_reset(out);
    size_t run = l->pos; /* start of the bytes copied as they are */
    while (l->pos < l->len) {
        unsigned char c = (unsigned char)l->s[l->pos];
        if (c == '"' || c == '\\') {
            if (out != NULL && gf_buf_append(out, l->s + run, l->pos - run) != GF_OK)
                return lex_nomem(l);
            l->pos++;
            if (c == '"')
                return GF_OK;
            if (l->pos >= l->len)
                break;
            char e = l->s[l->pos++];
            char enc[4];
            size_t n = 1;
            switch (e) {
            case '"': enc[0] = '"'; break;
            case '\\': enc[0] = '\\'; break;
            case '/': enc[0] = '/'; break;
            case 'b': enc[0] = '\b'; break;
            case 'f': enc[0] = '\f'; break;
            case 'n': enc[0] = '\n'; break;
            case 'r': enc[0] = '\r'; break;
            case 't': enc[0] = '\t'; break;
            case 'u': {
                uint32_t cp, lo;
                if (!hex4(l, &cp))
                    return gf_json_lex_fail(l, "bad \\u escape");
                if (cp >= 0xDC00 && cp <= 0xDFFF)
                    return gf_json_lex_fail(l, "lone low surrogate in \\u escape");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (l->len - l->pos < 2 || l->s[l->pos] != '\\' || l->s[l->pos + 1] != 'u')
                        return gf_json_lex_fail(l, "lone high surrogate in \\u escape");
                    l->pos += 2;
                    if (!hex4(l, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                        return gf_json_lex_fail(l, "lone high surrogate in \\u escape");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                n = gf_utf8_encode(cp, enc);
                break;
            }
            default:
                l->pos--;
                return gf_json_lex_fail(l, "unknown escape in a string");
            }
            if (out != NULL && gf_buf_append(out, enc, n) != GF_OK)
                return lex_nomem(l);
            run = l->pos;
            continue;
        }
        if (c < 0x20)
            return gf_json_lex_fail(l, "control character in a string");
        if (c < 0x80) {
            l->pos++;
            continue;
        }
        size_t n = gf_utf8_seq_len(l->s + l->pos, l->len - l->pos);
        if (n == 0)
            return gf_json_lex_fail(l, "invalid UTF-8 in a string");
        l->pos += n;
    }
    return gf_json_lex_fail(l, "unterminated string");
}

/* One pass over the number: the grammar is checked while the significand w
 * (its first 19 digits), the decimal exponent and the integer value are
 * gathered; the double comes from gf_decimal_fast when one rounding gives
 * it (tensor data sent as JSON is mostly such numbers; strtod was the
 * largest cost of parsing them), else from strtod. */
gf_status gf_json_lex_number(gf_json_lexer *l, gf_json_num *n)
{
    gf_json_lex_peek(l);
    gf_json_num unused;
    bool want = n != NULL; /* NULL: the grammar only (skipping a value) */
    if (!want)
        n = &unused;
    memset(n, 0, sizeof *n);
    const char *s = l->s;
    size_t len = l->len, pos = l->pos, start = pos;
    bool neg = pos < len && s[pos] == '-';
    pos += neg;
    if (pos >= len || s[pos] < '0' || s[pos] > '9') {
        l->pos = pos;
        return gf_json_lex_fail(l, "expected a digit");
    }
    uint64_t w = 0;
    int digits = 0, e = 0;
    if (s[pos] == '0') {
        pos++;
        digits = 1;
        if (pos < len && s[pos] >= '0' && s[pos] <= '9') {
            l->pos = pos;
            return gf_json_lex_fail(l, "leading zero in a number");
        }
    } else {
        for (; pos < len && s[pos] >= '0' && s[pos] <= '9'; pos++, digits++)
            w = w * 10 + (uint64_t)(s[pos] - '0'); /* wraps past 19 digits: unused then */
    }
    size_t int_end = pos;
    int int_digits = digits;
    n->integral = true;
    if (pos < len && s[pos] == '.') {
        pos++;
        if (pos >= len || s[pos] < '0' || s[pos] > '9') {
            l->pos = pos;
            return gf_json_lex_fail(l, "expected a digit after '.'");
        }
        for (; pos < len && s[pos] >= '0' && s[pos] <= '9'; pos++, digits++, e--)
            w = w * 10 + (uint64_t)(s[pos] - '0');
        n->integral = false;
    }
    bool big_exp = false;
    if (pos < len && (s[pos] == 'e' || s[pos] == 'E')) {
        pos++;
        bool eneg = pos < len && s[pos] == '-';
        if (pos < len && (s[pos] == '+' || s[pos] == '-'))
            pos++;
        if (pos >= len || s[pos] < '0' || s[pos] > '9') {
            l->pos = pos;
            return gf_json_lex_fail(l, "expected a digit in the exponent");
        }
        int x = 0;
        for (; pos < len && s[pos] >= '0' && s[pos] <= '9'; pos++)
            if (!big_exp && (x = x * 10 + (s[pos] - '0')) > 1000)
                big_exp = true;
        e += eneg ? -x : x;
        n->integral = false;
    }
    l->pos = pos;
    if (!want)
        return GF_OK;
    if (n->integral) {
        uint64_t u = w;
        bool ovf = false;
        if (int_digits > 19) { /* w wrapped: the exact check */
            u = 0;
            for (size_t k = start + (neg ? 1 : 0); k < int_end && !ovf; k++) {
                uint64_t d = (uint64_t)(s[k] - '0');
                ovf = u > (UINT64_MAX - d) / 10;
                u = ovf ? u : u * 10 + d;
            }
        }
        if (!ovf && !neg) {
            n->u = u;
            n->is_uint = true;
            if (u <= (uint64_t)INT64_MAX) {
                n->i = (int64_t)u;
                n->is_int = true;
            }
            n->d = (double)u;
            return GF_OK;
        }
        if (!ovf && u <= (uint64_t)INT64_MAX + 1) {
            n->i = u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
            n->is_int = true;
            if (u == 0) { /* "-0" is the integer 0 */
                n->u = 0;
                n->is_uint = true;
            }
            n->d = u == 0 ? -0.0 : (double)n->i;
            return GF_OK;
        }
    }
    if (digits <= 19 && !big_exp && gf_decimal_fast(w, e, neg, &n->d))
        return GF_OK;
    /* strtod needs a terminated copy; numbers are short, but do not trust it */
    len = pos - start;
    char small[64];
    char *p = len < sizeof small ? small : malloc(len + 1);
    if (p == NULL)
        return lex_nomem(l);
    memcpy(p, s + start, len);
    p[len] = '\0';
    n->d = strtod(p, NULL); /* overflow gives +-HUGE_VAL: acceptable */
    if (p != small)
        free(p);
    return GF_OK;
}

gf_status gf_json_lex_literal(gf_json_lexer *l, const char *word)
{
    gf_json_lex_peek(l);
    size_t n = strlen(word);
    if (l->len - l->pos < n || memcmp(l->s + l->pos, word, n) != 0)
        return gf_json_lex_fail(l, "invalid literal (expected a value)");
    l->pos += n;
    return GF_OK;
}

gf_status gf_json_lex_member(gf_json_lexer *l, bool *first, gf_buf *key, bool *done)
{
    gf_status st;
    if (*first) {
        if (gf_json_lex_peek(l) != '{')
            return gf_json_lex_fail(l, "expected an object");
        if ((st = lex_enter(l)) != GF_OK)
            return st;
        *first = false;
        if (gf_json_lex_eat(l, '}')) {
            l->depth--;
            *done = true;
            return GF_OK;
        }
    } else {
        if (gf_json_lex_eat(l, '}')) {
            l->depth--;
            *done = true;
            return GF_OK;
        }
        if (!gf_json_lex_eat(l, ','))
            return gf_json_lex_fail(l, "expected ',' or '}' in an object");
    }
    if (gf_json_lex_peek(l) != '"')
        return gf_json_lex_fail(l, "expected a string key in an object");
    if ((st = gf_json_lex_string(l, key)) != GF_OK)
        return st;
    if (!gf_json_lex_eat(l, ':'))
        return gf_json_lex_fail(l, "expected ':' after an object key");
    *done = false;
    return GF_OK;
}

gf_status gf_json_lex_element(gf_json_lexer *l, bool *first, bool *done)
{
    gf_status st;
    if (*first) {
        if (gf_json_lex_peek(l) != '[')
            return gf_json_lex_fail(l, "expected an array");
        if ((st = lex_enter(l)) != GF_OK)
            return st;
        *first = false;
        if (gf_json_lex_eat(l, ']')) {
            l->depth--;
            *done = true;
            return GF_OK;
        }
        *done = false;
        return GF_OK;
    }
    if (gf_json_lex_eat(l, ']')) {
        l->depth--;
        *done = true;
        return GF_OK;
    }
    if (!gf_json_lex_eat(l, ','))
        return gf_json_lex_fail(l, "expected ',' or ']' in an array");
    *done = false;
    return GF_OK;
}

gf_json_type gf_json_lex_value_type(gf_json_lexer *l, gf_status *st)
{
    int c = gf_json_lex_peek(l);
    *st = GF_OK;
    switch (c) {
    case '{': return GF_JSON_OBJECT;
    case '[': return GF_JSON_ARRAY;
    case '"': return GF_JSON_STRING;
    case 't':
    case 'f': return GF_JSON_BOOL;
    case 'n': return GF_JSON_NULL;
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return GF_JSON_NUMBER;
        *st = gf_json_lex_fail(l, c < 0 ? "unexpected end of JSON"
                                        : "unexpected character (expected a value)");
        return GF_JSON_NULL;
    }
}

gf_status gf_json_lex_skip(gf_json_lexer *l)
{
    gf_status st;
    gf_json_type t = gf_json_lex_value_type(l, &st);
    if (st != GF_OK)
        return st;
    bool first = true, done = false;
    switch (t) {
    case GF_JSON_OBJECT:
        while ((st = gf_json_lex_member(l, &first, NULL, &done)) == GF_OK && !done)
            if ((st = gf_json_lex_skip(l)) != GF_OK)
                break;
        return st;
    case GF_JSON_ARRAY:
        while ((st = gf_json_lex_element(l, &first, &done)) == GF_OK && !done)
            if ((st = gf_json_lex_skip(l)) != GF_OK)
                break;
        return st;
    case GF_JSON_STRING:
        return gf_json_lex_string(l, NULL);
    case GF_JSON_BOOL:
        return gf_json_lex_literal(l, gf_json_lex_peek(l) == 't' ? "true" : "false");
    case GF_JSON_NULL:
        return gf_json_lex_literal(l, "null");
    case GF_JSON_NUMBER:
        return gf_json_lex_number(l, NULL);
    }
    return GF_ERR_INTERNAL;
}

gf_status gf_json_lex_end(gf_json_lexer *l)
{
    if (gf_json_lex_peek(l) >= 0)
        return gf_json_lex_fail(l, "trailing characters after the value");
    return GF_OK;
}
