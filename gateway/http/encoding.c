/* gpufaas — HTTP content codings with zlib (gateway/http). */
#include "gateway/http/encoding.h"

#include <ctype.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <zlib.h>

const char *gf_http_coding_name(gf_http_coding c)
{
    switch (c) {
    case GF_CODING_GZIP: return "gzip";
    case GF_CODING_DEFLATE: return "deflate";
    case GF_CODING_IDENTITY: break;
    }
    return "identity";
}

/* Trim spaces and tabs around [*s, *e). */
static void trim(const char **s, const char **e)
{
    while (*s < *e && (**s == ' ' || **s == '\t'))
        (*s)++;
    while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '\t'))
        (*e)--;
}

static bool token_is(const char *s, const char *e, const char *word)
{
    size_t n = strlen(word);
    return (size_t)(e - s) == n && strncasecmp(s, word, n) == 0;
}

gf_status gf_http_coding_parse(const char *value, gf_http_coding *out, gf_err *err)
{
    *out = GF_CODING_IDENTITY;
    if (value == NULL)
        return GF_OK;
    const char *s = value, *e = value + strlen(value);
    trim(&s, &e);
    if (s == e || token_is(s, e, "identity"))
        return GF_OK;
    if (token_is(s, e, "gzip") || token_is(s, e, "x-gzip")) {
        *out = GF_CODING_GZIP;
        return GF_OK;
    }
    if (token_is(s, e, "deflate")) {
        *out = GF_CODING_DEFLATE;
        return GF_OK;
    }
    return gf_err_set(err, GF_ERR_UNSUPPORTED,
                      "Content-Encoding '%.60s' is not supported (gzip, deflate or identity)",
                      value);
}

/* The q-value of one Accept-Encoding element's parameters [s, e) (1 when
 * absent). */
static double qvalue(const char *s, const char *e)
{
    while (s < e) {
        const char *semi = memchr(s, ';', (size_t)(e - s));
        const char *pe = semi != NULL ? semi : e;
        const char *ps = s;
        trim(&ps, &pe);
        if (pe - ps >= 2 && (ps[0] == 'q' || ps[0] == 'Q') && ps[1] == '=') {
            char tmp[16];
            size_t n = (size_t)(pe - ps - 2);
            if (n >= sizeof tmp)
                n = sizeof tmp - 1;
            memcpy(tmp, ps + 2, n);
            tmp[n] = '\0';
            return strtod(tmp, NULL);
        }
        s = semi != NULL ? semi + 1 : e;
    }
    return 1;
}

gf_http_coding gf_http_coding_accept(const char *accept)
{
    if (accept == NULL)
        return GF_CODING_IDENTITY;
    double q_gzip = -1, q_deflate = -1, q_star = -1;
    const char *s = accept;
    while (*s != '\0') {
        const char *comma = strchr(s, ',');
        const char *e = comma != NULL ? comma : s + strlen(s);
        const char *semi = memchr(s, ';', (size_t)(e - s));
        const char *ts = s, *te = semi != NULL ? semi : e;
        trim(&ts, &te);
        double q = semi != NULL ? qvalue(semi + 1, e) : 1;
        if (token_is(ts, te, "gzip") || token_is(ts, te, "x-gzip"))
            q_gzip = q;
        else if (token_is(ts, te, "deflate"))
            q_deflate = q;
        else if (token_is(ts, te, "*"))
            q_star = q;
        s = comma != NULL ? comma + 1 : e;
    }
    if (q_gzip < 0)
        q_gzip = q_star;
    if (q_gzip > 0 && q_gzip >= q_deflate)
        return GF_CODING_GZIP;
    if (q_deflate > 0)
        return GF_CODING_DEFLATE;
    return GF_CODING_IDENTITY;
}

/* zlib's window bits for a coding: gzip's header, zlib's, or none (raw). */
static int window_bits(gf_http_coding c, bool raw)
{
    return c == GF_CODING_GZIP ? 16 + MAX_WBITS : raw ? -MAX_WBITS : MAX_WBITS;
}

static gf_status inflate_once(gf_http_coding c, bool raw, const void *in, size_t len,
                              uint64_t limit, gf_http_charge_fn charge, void *charge_arg,
                              gf_buf *out, gf_err *err)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, window_bits(c, raw)) != Z_OK)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory inflating the request body");
    const unsigned char *p = in;
    size_t left = len;
    gf_status st = GF_OK;
    int rc = Z_OK;
    unsigned char chunk[64 * 1024];
    while (rc != Z_STREAM_END) {
        if (z.avail_in == 0 && left > 0) {
            z.next_in = (unsigned char *)p;
            z.avail_in = left > UINT_MAX ? UINT_MAX : (unsigned)left;
            p += z.avail_in;
            left -= z.avail_in;
        }
        z.next_out = chunk;
        z.avail_out = sizeof chunk;
        rc = inflate(&z, Z_NO_FLUSH);
        if (rc == Z_NEED_DICT || rc == Z_DATA_ERROR || rc == Z_STREAM_ERROR) {
            st = gf_err_set(err, GF_ERR_FORMAT, "the %s request body is corrupt: %s",
                            gf_http_coding_name(c), z.msg != NULL ? z.msg : "bad data");
            break;
        }
        if (rc == Z_MEM_ERROR) {
            st = gf_err_set(err, GF_ERR_NOMEM, "out of memory inflating the request body");
            break;
        }
        size_t got = sizeof chunk - z.avail_out;
        if (limit > 0 && (uint64_t)out->len + got > limit) {
            st = gf_err_set(err, GF_ERR_TOO_LARGE,
                            "the %s request body inflates to more than the limit of %llu bytes "
                            "(--max-body)",
                            gf_http_coding_name(c), (unsigned long long)limit);
            break;
        }
        if (got > 0 && charge != NULL && !charge(charge_arg, got)) {
            st = gf_err_set(err, GF_ERR_OVERLOADED,
                            "no memory left for the inflated %s request body (--body-memory): "
                            "try again shortly", gf_http_coding_name(c));
            break;
        }
        if (got > 0 && gf_buf_append(out, chunk, got) != GF_OK) {
            st = gf_err_set(err, GF_ERR_NOMEM, "out of memory inflating the request body");
            break;
        }
        if (rc == Z_BUF_ERROR && z.avail_in == 0 && left == 0) {
            st = gf_err_set(err, GF_ERR_FORMAT, "the %s request body ends early (truncated)",
                            gf_http_coding_name(c));
            break;
        }
    }
    if (st == GF_OK && (z.avail_in > 0 || left > 0))
        st = gf_err_set(err, GF_ERR_FORMAT, "%zu bytes follow the end of the %s stream",
                        (size_t)z.avail_in + left, gf_http_coding_name(c));
    inflateEnd(&z);
    return st;
}

gf_status gf_http_inflate(gf_http_coding c, const void *in, size_t len, uint64_t limit,
                          gf_http_charge_fn charge, void *charge_arg, gf_buf *out,
                          gf_err *err)
{
    gf_buf_reset(out);
    out->limit = 0; /* the limit is checked here, with a better message */
    gf_status st = inflate_once(c, false, in, len, limit, charge, charge_arg, out, err);
    if (st == GF_ERR_FORMAT && c == GF_CODING_DEFLATE && out->len == 0) {
        gf_buf_reset(out); /* not the zlib format: maybe a raw deflate stream */
        gf_err raw_err;
        if (inflate_once(c, true, in, len, limit, charge, charge_arg, out, &raw_err) == GF_OK)
            st = GF_OK;
        else
            gf_buf_reset(out);
    }
    if (st != GF_OK)
        gf_buf_deinit(out);
    return st;
}

gf_status gf_http_deflate(gf_http_coding c, const void *in, size_t len, char **out,
                          size_t *out_len, gf_err *err)
{
    *out = NULL;
    *out_len = 0;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, window_bits(c, false), 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory compressing the response");
    uLong bound = deflateBound(&z, (uLong)len);
    char *buf = malloc(bound > 0 ? bound : 1);
    if (buf == NULL || len > UINT_MAX || bound > UINT_MAX) {
        free(buf);
        deflateEnd(&z);
        return gf_err_set(err, GF_ERR_NOMEM, "cannot compress a response of %zu bytes", len);
    }
    z.next_in = (unsigned char *)in;
    z.avail_in = (unsigned)len;
    z.next_out = (unsigned char *)buf;
    z.avail_out = (unsigned)bound;
    int rc = deflate(&z, Z_FINISH);
    size_t n = (size_t)z.total_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(buf);
        return gf_err_set(err, GF_ERR_INTERNAL, "deflate failed (%d)", rc);
    }
    *out = buf;
    *out_len = n;
    return GF_OK;
}
