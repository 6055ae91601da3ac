/* gpufaas benchmarks — bench_density's server and trials (see density.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "density.h"

void dn_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench_density: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

const char *dn_loadavg(void)
{
    static char buf[64];
    snprintf(buf, sizeof buf, "unknown");
    FILE *f = fopen("/proc/loadavg", "r");
    if (f != NULL) {
        double a = 0;
        if (fscanf(f, "%lf", &a) == 1)
            snprintf(buf, sizeof buf, "%.2f", a);
        fclose(f);
    }
    return buf;
}

bool dn_cpu_ticks(uint64_t *total, uint64_t *steal)
{
    FILE *f = fopen("/proc/stat", "r");
    if (f == NULL)
        return false;
    unsigned long long v[8] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n < 8)
        return false;
    *total = 0;
    for (int k = 0; k < 8; k++)
        *total += v[k];
    *steal = v[7];
    return true;
}

uint64_t dn_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull); /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double dn_uniform(uint64_t *s)
{
    return ((double)(dn_rand(s) >> 11) + 0.5) / 9007199254740992.0;
}

void dn_server_start(dn_server *s, const dn_opts *o, const char *dir, const char *policy,
                     int workers, uint64_t link_bps, uint64_t host_memory, const char *const *extra)
{
    char devices[32], dmem[32], hmem[32], page[32], link[32];
    if (strncmp(o->device, "cuda", 4) == 0)
        snprintf(devices, sizeof devices, "%s", o->device);
    else
        snprintf(devices, sizeof devices, "cpu:%d", workers);
    snprintf(dmem, sizeof dmem, "%llu", (unsigned long long)o->device_memory);
    snprintf(hmem, sizeof hmem, "%llu", (unsigned long long)host_memory);
    snprintf(page, sizeof page, "%llu", (unsigned long long)o->page_size);
    snprintf(link, sizeof link, "%llu", (unsigned long long)link_bps);
    const char *args[40];
    int a = 0;
    args[a++] = "--devices";
    args[a++] = devices;
    args[a++] = "--device-memory";
    args[a++] = dmem;
    args[a++] = "--host-memory";
    args[a++] = hmem;
    args[a++] = "--policy";
    args[a++] = policy;
    args[a++] = "--queue-limit";
    args[a++] = "1000000";
    args[a++] = "--log-level";
    args[a++] = "warn";
    args[a++] = "--worker";
    args[a++] = o->worker;
    if (o->page_size > 0) {
        args[a++] = "--page-size";
        args[a++] = page;
    }
    if (link_bps > 0) {
        args[a++] = "--cpu-copy-bandwidth";
        args[a++] = link;
    }
    if (o->schedule != NULL) {
        args[a++] = "--schedule";
        args[a++] = o->schedule;
    }
    for (int i = 0; extra != NULL && extra[i] != NULL && a < 38; i++)
        args[a++] = extra[i];
    args[a] = NULL;
    gf_hh_server_init(&s->srv, dir);
    char msg[256];
    if (gf_hh_server_start(&s->srv, o->gpufaas, args, 120, msg, sizeof msg) != 0) {
        gf_hh_server_dump_log(&s->srv, 4000);
        dn_die("gpufaas serve did not start: %s", msg);
    }
    s->port = (uint16_t)atoi(strrchr(s->srv.url, ':') + 1);
    s->up = true;
}

void dn_server_stop(dn_server *s)
{
    if (!s->up)
        return;
    gf_hh_thread_end();
    int st = gf_hh_server_stop(&s->srv, 60);
    if (st != 0) {
        gf_hh_server_dump_log(&s->srv, 4000);
        dn_die("gpufaas serve exited with %d", st);
    }
    s->up = false;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int pick(const double *cdf, size_t n, double u)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (int)lo;
}

void dn_prefetch(const dn_server *s, const dn_fn *fns, size_t warm_n)
{
    for (size_t i = 0; i < warm_n; i++) {
        char path[128];
        snprintf(path, sizeof path, "/v2/repository/models/%s/load", fns[i].name);
        dn_post(s, path, NULL, 200);
    }
}

double dn_warm_rps(const dn_server *s, const dn_opts *o, const dn_fn *fns, size_t warm_n,
                   const gf_dlg_targets *tg)
{
    dn_prefetch(s, fns, warm_n);
    enum { SEQ = 20000 };
    int *seq = malloc(SEQ * sizeof *seq);
    if (seq == NULL)
        dn_die("out of memory");
    double tot = 0;
    for (size_t i = 0; i < warm_n; i++)
        tot += fns[i].weight;
    uint64_t rng = 7;
    for (int k = 0; k < SEQ; k++) {
        double u = dn_uniform(&rng) * tot, acc = 0;
        size_t i = 0;
        while (i + 1 < warm_n && (acc += fns[i].weight) < u)
            i++;
        seq[k] = (int)i;
    }
    size_t answered, errors;
    char msg[256];
    double secs = o->quick ? 1.0 : 2.0;
    /* the warm-up lets the prefetches land */
    if (gf_dlg_closed_loop(s->port, tg, seq, SEQ, 8, 0.5, secs, &answered, &errors, msg,
                          sizeof msg) != 0)
        dn_die("all-warm throughput: %s", msg);
    free(seq);
    if (errors > 0)
        dn_die("all-warm throughput: %zu answers were not 200", errors);
    return (double)answered / secs;
}

/* Poisson arrivals at rate_rps over fns[0..n) with Zipf popularity (their
 * weights) for span seconds, in order of time (*nreq of them, malloc'd). */
static gf_dlg_req *arrivals(const dn_fn *fns, size_t n, double rate_rps, double span,
                            uint64_t seed, size_t *nreq)
{
    double *cdf = malloc(n * sizeof *cdf);
    double total = 0;
    for (size_t i = 0; i < n; i++)
        total += fns[i].weight;
    double acc = 0;
    for (size_t i = 0; i < n; i++) {
        acc += fns[i].weight / total;
        cdf[i] = acc;
    }
    size_t cap = (size_t)(span * rate_rps * 1.2) + 64, k = 0;
    gf_dlg_req *reqs = calloc(cap, sizeof *reqs);
    if (cdf == NULL || reqs == NULL)
        dn_die("out of memory");
    uint64_t rng = seed;
    for (double t = -log(dn_uniform(&rng)) / rate_rps; t < span;
         t += -log(dn_uniform(&rng)) / rate_rps) {
        if (k == cap) {
            cap *= 2;
            if ((reqs = realloc(reqs, cap * sizeof *reqs)) == NULL)
                dn_die("out of memory");
        }
        memset(&reqs[k], 0, sizeof reqs[k]);
        reqs[k].t = t;
        reqs[k].target = pick(cdf, n, dn_uniform(&rng) * acc);
        k++;
    }
    free(cdf);
    *nreq = k;
    return reqs;
}

/* Latency (s) of request q through the ideal FIFO executor whose next
 * request may start at *free_at (advanced): its function's calibrated
 * execution time, queued, plus its overhead outside execution, not queued. */
static double ideal_latency(const gf_dlg_req *q, const dn_fn *f, double *free_at)
{
    double start = fmax(q->t, *free_at); /* arrivals are in order */
    *free_at = start + f->exec_ms / 1e3;
    return *free_at - q->t + fmax(0, f->warm_ms - f->exec_ms) / 1e3;
}

double dn_queue_model(const dn_fn *fns, size_t n, double rate_rps, double multiple,
                      double seconds, uint64_t seed)
{
    size_t nreq;
    gf_dlg_req *reqs = arrivals(fns, n, rate_rps, seconds, seed, &nreq);
    double free_at = 0;
    size_t met = 0;
    for (size_t i = 0; i < nreq; i++) {
        const dn_fn *f = &fns[reqs[i].target];
        met += ideal_latency(&reqs[i], f, &free_at) * 1e3 <= multiple * f->warm_ms;
    }
    free(reqs);
    return nreq > 0 ? (double)met / (double)nreq : 1;
}

void dn_trial(const dn_server *s, const dn_opts *o, const dn_fn *fns, size_t n,
              const gf_dlg_targets *tg, double rate_rps, uint64_t seed, dn_result *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    out->rate_rps = rate_rps;
    size_t nreq;
    gf_dlg_req *reqs = arrivals(fns, n, rate_rps, o->warmup_s + o->seconds, seed, &nreq);
    char msg[256];
    if (getenv("GF_DN_DEBUG") != NULL)
        fprintf(stderr, "trial n=%zu starts at %.4f\n", n, gf_dlg_now());
    uint64_t tot0 = 0, st0 = 0, tot1 = 0, st1 = 0;
    bool ticks = dn_cpu_ticks(&tot0, &st0);
    if (gf_dlg_open_loop(s->port, tg, reqs, nreq, 256, 30.0, msg, sizeof msg) != 0)
        dn_die("load generator: %s", msg);
    ticks = ticks && dn_cpu_ticks(&tot1, &st1) && tot1 > tot0;
    out->steal = ticks ? (double)(st1 - st0) / (double)(tot1 - tot0) : -1;
    double *lat = malloc((nreq ? nreq : 1) * sizeof *lat);
    double *rel = malloc((nreq ? nreq : 1) * sizeof *rel);
    if (lat == NULL || rel == NULL)
        dn_die("out of memory");
    double sum_all[4] = {0}, sum_miss[4] = {0}, exec_meas = 0, exec_cal = 0;
    size_t model_met = 0;
    double free_at = 0; /* the ideal executor, in the trial's time */
    size_t n_lat = 0, met = 0, cold = 0, rejected = 0, mc = 0, mq = 0, me = 0;
    size_t miss_c = 0, miss_w = 0, miss_big = 0;
    /* the largest tenth: sizes above 10^(0.9) of the log-uniform range */
    double big = exp(log(5 * DN_MB * o->scale) + 0.9 * log(100.0));
    for (size_t i = 0; i < nreq; i++) {
        const gf_dlg_req *q = &reqs[i];
        const dn_fn *f = &fns[q->target];
        double model_lat = ideal_latency(q, f, &free_at);
        if (q->t < o->warmup_s)
            continue;
        out->requests++;
        model_met += model_lat * 1e3 <= f->slo_ms;
        if (q->status == 503) {
            rejected++;
            continue;
        }
        if (q->status != 200) {
            out->errors++;
            continue;
        }
        rel[n_lat] = q->latency * 1e3 / f->slo_ms;
        lat[n_lat++] = q->latency;
        cold += q->cold;
        double part[4] = {fmax(0, q->latency * 1e3 - q->total_us / 1e3), q->queue_us / 1e3,
                          q->load_us / 1e3, q->exec_us / 1e3};
        for (int k = 0; k < 4; k++)
            sum_all[k] += part[k];
        exec_meas += q->exec_us / 1e3;
        exec_cal += f->exec_ms;
        if (q->latency * 1e3 <= f->slo_ms) {
            met++;
            continue;
        }
        for (int k = 0; k < 4; k++)
            sum_miss[k] += part[k];
        miss_c += q->cold;
        miss_w += !q->cold;
        if (getenv("GF_DN_DEBUG") != NULL)
            fprintf(stderr, "missed %s t=%.4f %s bytes=%llu slo_ms=%.1f lat_ms=%.1f total=%u "
                    "queue=%u load=%u exec=%u\n", q->cold ? "cold" : "warm", q->t, fns[q->target].name,
                    (unsigned long long)fns[q->target].bytes, fns[q->target].slo_ms,
                    q->latency * 1e3, q->total_us, q->queue_us, q->load_us, q->exec_us);
        miss_big += (double)fns[q->target].bytes > big;
        if (q->load_us >= q->queue_us && q->load_us >= q->exec_us) {
            mc++;
        } else if (q->queue_us >= q->exec_us) {
            mq++;
        } else {
            me++;
        }
    }
    size_t n_miss = n_lat - met;
    if (n_lat > 0) {
        out->all_outside = sum_all[0] / (double)n_lat;
        out->all_queue = sum_all[1] / (double)n_lat;
        out->all_load = sum_all[2] / (double)n_lat;
        out->all_exec = sum_all[3] / (double)n_lat;
        out->exec_inflation = exec_cal > 0 ? exec_meas / exec_cal : 0;
        qsort(rel, n_lat, sizeof *rel, cmp_d);
        out->p99_over_slo = rel[(n_lat * 99) / 100];
    }
    if (n_miss > 0) {
        out->miss_outside = sum_miss[0] / (double)n_miss;
        out->miss_queue_ms = sum_miss[1] / (double)n_miss;
        out->miss_load = sum_miss[2] / (double)n_miss;
        out->miss_exec_ms = sum_miss[3] / (double)n_miss;
    }
    if (out->requests > 0) {
        double r = (double)out->requests;
        out->queue_model_attainment = (double)model_met / r;
        out->attainment = (double)met / r;
        out->rejected = (double)rejected / r;
        out->miss_cold = (double)mc / r;
        out->miss_queue = (double)mq / r;
        out->miss_exec = (double)me / r;
        out->missed_cold_req = (double)miss_c / r;
        out->missed_warm_req = (double)miss_w / r;
        out->missed_big = (double)miss_big / r;
    }
    if (n_lat > 0) {
        out->cold_fraction = (double)cold / (double)n_lat;
        qsort(lat, n_lat, sizeof *lat, cmp_d);
        out->p50_ms = lat[n_lat / 2] * 1e3;
        out->p99_ms = lat[(n_lat * 99) / 100] * 1e3;
    }
    free(lat);
    free(rel);
    free(reqs);
}

double dn_rate_of(const dn_server *s, const dn_opts *o, const dn_fn *fns, size_t warm_n,
                  const gf_dlg_targets *tg)
{
    double r[3];
    for (int k = 0; k < 3; k++)
        r[k] = dn_warm_rps(s, o, fns, warm_n, tg);
    qsort(r, 3, sizeof r[0], cmp_d);
    printf("all_warm_rps_runs=%.0f,%.0f,%.0f\n", r[0], r[1], r[2]);
    return r[0] * o->load; /* the lowest: what the machine gave at its busiest */
}

/* One all-warm control at rate: true when it meets the target. */
static bool control(const dn_server *s, const dn_opts *o, const dn_fn *fns, size_t warm_n,
                    const gf_dlg_targets *tg, double rate, uint64_t *seed, const char *when)
{
    dn_result c;
    dn_prefetch(s, fns, warm_n);
    dn_trial(s, o, fns, warm_n, tg, rate, (*seed)++, &c);
    if (c.attainment >= o->target)
        return true;
    char label[64];
    snprintf(label, sizeof label, "control_missed_%s", when);
    dn_print_trial(label, &c);
    return false;
}

bool dn_controlled_trial(const dn_server *s, const dn_opts *o, const dn_fn *fns, size_t n,
                         size_t warm_n, const gf_dlg_targets *tg, double rate, uint64_t *seed,
                         const char *label, dn_result *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    out->rate_rps = rate;
    for (int attempt = 0; attempt < DN_TRIAL_TRIES; attempt++) {
        if (!control(s, o, fns, warm_n, tg, rate, seed, "before"))
            continue;
        dn_prefetch(s, fns, warm_n);
        dn_trial(s, o, fns, n, tg, rate, (*seed)++, out);
        dn_print_trial(label, out);
        if (out->attainment >= o->target)
            return true;
        if (out->steal > DN_MAX_STEAL) { /* the machine was away: as a missed control */
            printf("trial %s n=%zu spoilt: steal=%.3f\n", label, n, out->steal);
            continue;
        }
        if (control(s, o, fns, warm_n, tg, rate, seed, "after"))
            return true;
    }
    printf("trial %s n=%zu inconclusive: the all-warm control missed its target %d times\n", label,
           n, DN_TRIAL_TRIES);
    fflush(stdout);
    return false;
}

void dn_print_trial(const char *label, const dn_result *r)
{
    printf(
        "trial %s n=%zu rate_rps=%.0f requests=%zu attainment=%.4f cold_fraction=%.3f p50_ms=%.2f "
        "p99_ms=%.2f rejected=%.4f errors=%zu miss_cold=%.4f miss_queue=%.4f miss_exec=%.4f "
        "missed_cold_req=%.4f missed_warm_req=%.4f missed_big=%.4f p99_over_slo=%.2f "
        "queue_model_attainment=%.4f exec_inflation=%.2f all_ms=%.2f/%.2f/%.2f/%.2f "
        "miss_ms=%.2f/%.2f/%.2f/%.2f steal=%.3f\n",
        label, r->n, r->rate_rps, r->requests, r->attainment, r->cold_fraction, r->p50_ms,
        r->p99_ms, r->rejected, r->errors, r->miss_cold, r->miss_queue, r->miss_exec,
        r->missed_cold_req, r->missed_warm_req, r->missed_big, r->p99_over_slo,
        r->queue_model_attainment, r->exec_inflation, r->all_outside, r->all_queue, r->all_load,
        r->all_exec, r->miss_outside, r->miss_queue_ms, r->miss_load, r->miss_exec_ms, r->steal);
    fflush(stdout);
}
