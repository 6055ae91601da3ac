/* gpufaas — reading the Prometheus text format, for `gpufaas top`
 * (gateway/cli).
 *
 * top scrapes /metrics every second and turns the difference between two
 * scrapes into rates (requests/s, swap bytes/s) and latency quantiles (p99
 * from the histogram buckets that moved). This parses one scrape into
 * samples; the lookups below answer what top asks.
 *
 * Accepted: the text exposition format 0.0.4 — comment lines (# HELP, # TYPE
 * and others) are skipped; a sample is NAME[{k="v",...}] VALUE [TIMESTAMP],
 * label values with the escapes \\, \" and \n; values as Go writes them
 * (including +Inf, -Inf and NaN). A malformed line is an error naming it.
 */
#ifndef GF_GATEWAY_CLI_PROM_H
#define GF_GATEWAY_CLI_PROM_H

#include <stddef.h>

#include "core/error.h"

#define GF_PROM_MAX_LABELS 8

typedef struct gf_prom_sample {
    char *name; /* points into block */
    int n_labels;
    char *key[GF_PROM_MAX_LABELS]; /* point into block */
    char *val[GF_PROM_MAX_LABELS];
    double value;
    char *block; /* owned: name and labels, NUL-separated */
} gf_prom_sample;

typedef struct gf_prom {
    gf_prom_sample *v; /* owned */
    size_t n, cap;
} gf_prom;

/* Parse len bytes of text into *out (initialised here; free with
 * gf_prom_free, also after a failure). */
gf_status gf_prom_parse(const char *text, size_t len, gf_prom *out, gf_err *err);

/* Free the samples; *p is empty afterwards. NULL is a no-op. */
void gf_prom_free(gf_prom *p);

/* The value of label key of s, or NULL. Borrowed from s. */
const char *gf_prom_label(const gf_prom_sample *s, const char *key);

/* A selection of samples by their labels: pairs of a key and the value it
 * must have, ended by NULL ({"function", "m", "version", "2", NULL}); NULL
 * selects every sample. */
typedef const char *const *gf_prom_match;

/* Sum of the samples called name that match. 0 when there is none. */
double gf_prom_sum(const gf_prom *p, const char *name, gf_prom_match match);

/* The cumulative buckets of histogram base (samples base + "_bucket") that
 * match (they must name one series: select every label but le): le[]
 * ascending and count[] (cumulative), at most cap; returns how many (the
 * last is +Inf when the histogram is complete). */
size_t gf_prom_buckets(const gf_prom *p, const char *base, gf_prom_match match, double *le,
                       double *count, size_t cap);

/* The q-quantile (0 < q < 1) of a histogram given as n cumulative buckets,
 * interpolated linearly within the bucket, as Prometheus's
 * histogram_quantile does. When it falls into the +Inf bucket, the highest
 * finite bound. NaN when there are no observations. */
double gf_prom_quantile(double q, const double *le, const double *count, size_t n);

#endif /* GF_GATEWAY_CLI_PROM_H */
