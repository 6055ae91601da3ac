/* gpufaas — reading the Prometheus text format (gateway/cli). */
#include "gateway/cli/prom.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

static bool name_char(char c)
{
    return name_start(c) || (c >= '0' && c <= '9');
}

void gf_prom_free(gf_prom *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->n; i++)
        free(p->v[i].block);
    free(p->v);
    p->v = NULL;
    p->n = p->cap = 0;
}

/* Parse one sample line [s, end) into *out (its block allocated). */
static gf_status parse_line(const char *s, const char *end, gf_prom_sample *out, gf_err *err)
{
    memset(out, 0, sizeof *out);
    /* the block holds at most the line's bytes plus a NUL per string */
    size_t cap = (size_t)(end - s) + 2 * GF_PROM_MAX_LABELS + 2;
    char *blk = malloc(cap);
    if (blk == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    out->block = blk;
    size_t w = 0;
    const char *p = s;
    if (!name_start(*p))
        return gf_err_set(err, GF_ERR_FORMAT, "a sample must start with a metric name");
    out->name = blk;
    while (p < end && name_char(*p))
        blk[w++] = *p++;
    blk[w++] = '\0';
    if (p < end && *p == '{') {
        p++;
        for (;;) {
            while (p < end && (*p == ' ' || *p == '\t'))
                p++;
            if (p < end && *p == '}') {
                p++;
                break;
            }
            if (out->n_labels == GF_PROM_MAX_LABELS)
                return gf_err_set(err, GF_ERR_FORMAT, "more than %d labels", GF_PROM_MAX_LABELS);
            if (p >= end || !name_start(*p))
                return gf_err_set(err, GF_ERR_FORMAT, "bad label name");
            out->key[out->n_labels] = blk + w;
            while (p < end && name_char(*p))
                blk[w++] = *p++;
            blk[w++] = '\0';
            if (p + 1 >= end || p[0] != '=' || p[1] != '"')
                return gf_err_set(err, GF_ERR_FORMAT, "a label needs =\"value\"");
            p += 2;
            out->val[out->n_labels] = blk + w;
            while (p < end && *p != '"') {
                if (*p == '\\') {
                    if (p + 1 >= end)
                        return gf_err_set(err, GF_ERR_FORMAT, "unterminated label value");
                    p++;
                    blk[w++] = *p == 'n' ? '\n' : *p;
                    p++;
                } else {
                    blk[w++] = *p++;
                }
            }
            if (p >= end)
                return gf_err_set(err, GF_ERR_FORMAT, "unterminated label value");
            p++;
            blk[w++] = '\0';
            out->n_labels++;
            if (p < end && *p == ',')
                p++;
            else if (p >= end || *p != '}')
                return gf_err_set(err, GF_ERR_FORMAT, "labels must be separated by ','");
        }
    }
    if (p >= end || (*p != ' ' && *p != '\t'))
        return gf_err_set(err, GF_ERR_FORMAT, "no value after the name");
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    char num[64];
    size_t n = 0;
    while (p < end && *p != ' ' && *p != '\t' && n < sizeof num - 1)
        num[n++] = *p++;
    num[n] = '\0';
    char *stop;
    out->value = strtod(num, &stop);
    if (n == 0 || *stop != '\0')
        return gf_err_set(err, GF_ERR_FORMAT, "bad value '%s'", num);
    /* an optional timestamp follows; it is ignored */
    return GF_OK;
}

gf_status gf_prom_parse(const char *text, size_t len, gf_prom *out, gf_err *err)
{
    memset(out, 0, sizeof *out);
    const char *p = text, *end = text + len;
    size_t line_no = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl != NULL ? nl : end;
        line_no++;
        const char *s = p;
        while (s < le && (*s == ' ' || *s == '\t'))
            s++;
        const char *e = le;
        while (e > s && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
            e--;
        p = nl != NULL ? nl + 1 : end;
        if (s == e || *s == '#')
            continue;
        if (out->n == out->cap) {
            size_t ncap = out->cap ? out->cap * 2 : 256;
            gf_prom_sample *nv = realloc(out->v, ncap * sizeof *nv);
            if (nv == NULL)
                return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            out->v = nv;
            out->cap = ncap;
        }
        gf_status st = parse_line(s, e, &out->v[out->n], err);
        if (st != GF_OK) {
            free(out->v[out->n].block);
            return gf_err_prefix(err, "metrics line %zu", line_no);
        }
        out->n++;
    }
    return GF_OK;
}

const char *gf_prom_label(const gf_prom_sample *s, const char *key)
{
    for (int i = 0; i < s->n_labels; i++)
        if (strcmp(s->key[i], key) == 0)
            return s->val[i];
    return NULL;
}

static bool matches(const gf_prom_sample *s, const char *name, gf_prom_match match)
{
    if (strcmp(s->name, name) != 0)
        return false;
    for (size_t i = 0; match != NULL && match[i] != NULL; i += 2) {
        const char *v = gf_prom_label(s, match[i]);
        if (v == NULL || match[i + 1] == NULL || strcmp(v, match[i + 1]) != 0)
            return false;
    }
    return true;
}

double gf_prom_sum(const gf_prom *p, const char *name, gf_prom_match match)
{
    double sum = 0;
    for (size_t i = 0; i < p->n; i++)
        if (matches(&p->v[i], name, match))
            sum += p->v[i].value;
    return sum;
}

size_t gf_prom_buckets(const gf_prom *p, const char *base, gf_prom_match match, double *le,
                       double *count, size_t cap)
{
    char name[160];
    if (snprintf(name, sizeof name, "%s_bucket", base) >= (int)sizeof name)
        return 0;
    size_t n = 0;
    for (size_t i = 0; i < p->n && n < cap; i++) {
        if (!matches(&p->v[i], name, match))
            continue;
        const char *l = gf_prom_label(&p->v[i], "le");
        char *stop;
        double b = l != NULL ? strtod(l, &stop) : NAN;
        if (l == NULL || *stop != '\0' || isnan(b))
            continue;
        /* insert in order of le */
        size_t k = n;
        while (k > 0 && le[k - 1] > b) {
            le[k] = le[k - 1];
            count[k] = count[k - 1];
            k--;
        }
        le[k] = b;
        count[k] = p->v[i].value;
        n++;
    }
    return n;
}

double gf_prom_quantile(double q, const double *le, const double *count, size_t n)
{
    if (n == 0 || !(count[n - 1] > 0))
        return NAN;
    double rank = q * count[n - 1];
    size_t i = 0;
    while (i < n && count[i] < rank)
        i++;
    if (i >= n)
        i = n - 1;
    if (isinf(le[i]))
        return i > 0 ? le[i - 1] : NAN;
    double lower = i > 0 ? le[i - 1] : 0, below = i > 0 ? count[i - 1] : 0;
    if (i == 0 && le[0] <= 0)
        return le[0];
    double in_bucket = count[i] - below;
    if (!(in_bucket > 0))
        return le[i];
    return lower + (le[i] - lower) * (rank - below) / in_bucket;
}
