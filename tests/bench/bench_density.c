/* Benchmark: density — how many functions one device serves within their
 * SLO, through a real `gpufaas serve` and its workers.
 *
 *   bench_density [--quick] [--gpufaas PATH] [--worker PATH] [--device cpu|cuda:N]
 *                 [--policies lru,gds,gdsf] [--no-levers] [--scale X]
 *                 [--device-memory BYTES] [--page-size BYTES] [--slo-multiple K|auto]
 *                 [--ratio R] [--seconds S] [--warmup S] [--load F] [--max-ratio M]
 *                 [--keep DIR] [--trials N@RPS,... [--uncontrolled]]
 *                 [--schedule ready-first|deadline|fifo] [--variants "FLAGS;FLAGS;..."]
 *                 [--levers-at N] [--lever-rounds R] [--lever-names L,...] [--repeats R]
 *
 * The mix. Functions are mlps (16 -> h -> h -> 1, FP32) whose weights
 * follow a log-uniform law over 5-500 MB, scaled down with the device
 * budget (--scale, 1/100 by default: 50 KB - 5 MB against a 32 MiB device
 * of 64 KiB pages, where a GPU has 2 MiB pages). Popularity is Zipf(0.9)
 * over the functions in a fixed order, independent of their sizes.
 *
 * The steps, all in one run:
 *  1. calibration: a server without emulation runs six functions spanning
 *     the sizes, one at a time and warm; each function's warm latency is
 *     read off their latencies (straight lines between the two measured
 *     sizes around it, in log-log), and its SLO is --slo-multiple (5)
 *     times that (auto: chosen in step 4); a line through their execution
 *     times sets the link;
 *  2. the link: on cpu the copy stream emulates a host-to-device link
 *     (`gpufaas serve --cpu-copy-bandwidth`) whose swap time over compute
 *     time at the reference size (100 MB x scale, a ResNet-50) is --ratio
 *     (1: an H200 swaps ResNet-50's 100 MB over PCIe Gen5 in about the 2 ms
 *     it runs). On cuda there is no emulation: the swaps cross PCIe;
 *  3. every function is deployed (manifests carry slo_ms) on the server
 *     that the rest of the run uses;
 *  4. the all-warm throughput: as many functions as fit on the device,
 *     prefetched, under a closed loop (the lowest of three); arrivals from
 *     then on are open-loop Poisson at half of it (--load 0.5), the same
 *     rate for every trial of every policy. With --slo-multiple auto the
 *     multiple is then the smallest from 5 up in halves at which the same
 *     arrivals over the all-warm set through one ideal FIFO executor (the
 *     calibrated times, no machine) meet 99.9%: queueing alone may take a
 *     tenth of the 1% a trial may miss, the rest is placement's (printed:
 *     slo_candidate lines, slo_multiple=, slo_multiple_chosen_by=, and
 *     queue_model_attainment_at_slo= whatever chose the multiple);
 *  5. per policy, the largest N at which >= 99% of requests meet their SLO:
 *     trials at N = 1, 2, 3, 4, 6, 8, ... device capacities until one fails,
 *     then bisection; the verdict at each N is the majority of up to
 *     --repeats (3; 1 with --quick) trials, each on fresh arrivals. Latency
 *     is measured by the client from each request's arrival time to its
 *     answer's last byte. Each trial runs between
 *     all-warm controls at the same rate (dn_controlled_trial): on a shared
 *     machine a burst of other work can break the SLO with every function
 *     resident, and a trial spoilt so does not count (it is run again;
 *     three spoilt tries count as a failure, inconclusive_trials=);
 *  6. the levers at the first N the best policy failed, at least twice
 *     the capacity so that placement is what they act on (see the end of
 *     this file's main).
 *
 * Prints key=value lines, among them device_capacity_models=,
 * functions_at_slo_<policy>=, functions_at_slo_best=, density_ratio= (best
 * over capacity; target >= 10), and p50_ms=, p99_ms=, cold_fraction= at
 * the best N; one "trial ..." line per trial, which also says where the
 * time went and why requests missed: p99_over_slo= (the 99th percentile
 * of latency / SLO), all_ms= and miss_ms= (outside/queue/load/exec means
 * over every answer and over the late ones: outside is the client, HTTP
 * and the gateway's parse and render, latency less the gateway's total),
 * exec_inflation= (execution time against its unloaded calibration: how
 * much the machine slowed the compute thread), and
 * queue_model_attainment= (the same arrivals through one ideal FIFO
 * executor at the calibrated execution times: what queueing alone leaves
 * of the target at this rate and SLO), and steal= (the share of the
 * machine's CPU time the hypervisor took during the trial: on a virtual
 * machine the vCPUs stall while it is high; calibration_steal= and
 * steal_run= the same over the calibration and the run). GF_DN_DEBUG=1 prints every late
 * request to stderr. Never fails on speed. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "density.h"
#include "gf_config.h"

#define DN_MAX_POLICIES 4

static void usage(void)
{
    fprintf(stderr, "usage: bench_density [--quick] [--gpufaas PATH] [--worker PATH] [--device "
                    "cpu|cuda:N]\n  [--policies lru,gds,...] [--no-levers] [--scale X] "
                    "[--device-memory BYTES]\n  [--page-size BYTES] [--slo-multiple K|auto] [--ratio R] "
                    "[--seconds S] [--warmup S]\n  [--load F] [--max-ratio M] [--keep DIR] "
                    "[--trials N@RPS,... [--uncontrolled]]\n  [--schedule ready-first|deadline|fifo] [--variants "
                    "\"FLAGS;FLAGS;...\"]\n  [--levers-at N] [--lever-rounds R] [--lever-names L,...] "
                    "[--repeats R]\n");
    exit(2);
}

static void parse(int argc, char **argv, dn_opts *o)
{
    memset(o, 0, sizeof *o);
    o->gpufaas = GF_BUILD_DIR "/gateway/gpufaas";
    o->worker = GF_BUILD_DIR "/runtime/worker/gpufaas-worker";
    o->device = "cpu";
    o->scale = 0.01;
    o->device_memory = 32u << 20;
    o->page_size = 64u << 10;
    o->slo_multiple = 5;
    o->ratio = 1;
    o->target = 0.99;
    o->load = 0.5;
    o->max_ratio = 24;
    o->rows = 480; /* about 4 ms of compute at the reference size: an SLO of ~25 ms */
    o->exec_exponent = 0.3;
    o->warmup_s = 2;
    o->seconds = 8;
    o->policies = "lru,gds,gdsf";
    o->levers = true;
    o->lever_rounds = 1;
    o->repeats = 3;
    bool page_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            o->quick = true;
            continue;
        }
        if (strcmp(a, "--uncontrolled") == 0) {
            o->uncontrolled = true;
            continue;
        }
        if (strcmp(a, "--no-levers") == 0) {
            o->levers = false;
            continue;
        }
        if (v == NULL)
            usage();
        i++;
        if (strcmp(a, "--gpufaas") == 0)
            o->gpufaas = v;
        else if (strcmp(a, "--worker") == 0)
            o->worker = v;
        else if (strcmp(a, "--device") == 0)
            o->device = v;
        else if (strcmp(a, "--policies") == 0)
            o->policies = v;
        else if (strcmp(a, "--scale") == 0)
            o->scale = atof(v);
        else if (strcmp(a, "--device-memory") == 0)
            o->device_memory = strtoull(v, NULL, 10);
        else if (strcmp(a, "--page-size") == 0)
            o->page_size = strtoull(v, NULL, 10), page_given = true;
        else if (strcmp(a, "--slo-multiple") == 0 && strcmp(v, "auto") == 0)
            o->slo_auto = true;
        else if (strcmp(a, "--slo-multiple") == 0)
            o->slo_multiple = atof(v), o->slo_auto = false;
        else if (strcmp(a, "--ratio") == 0)
            o->ratio = atof(v);
        else if (strcmp(a, "--seconds") == 0)
            o->seconds = atof(v);
        else if (strcmp(a, "--warmup") == 0)
            o->warmup_s = atof(v);
        else if (strcmp(a, "--load") == 0)
            o->load = atof(v);
        else if (strcmp(a, "--max-ratio") == 0)
            o->max_ratio = atof(v);
        else if (strcmp(a, "--rows") == 0)
            o->rows = atoi(v);
        else if (strcmp(a, "--exec-exponent") == 0)
            o->exec_exponent = atof(v);
        else if (strcmp(a, "--keep") == 0)
            o->keep = v;
        else if (strcmp(a, "--trials") == 0)
            o->trials = v;
        else if (strcmp(a, "--schedule") == 0)
            o->schedule = v;
        else if (strcmp(a, "--variants") == 0)
            o->variants = v;
        else if (strcmp(a, "--levers-at") == 0)
            o->levers_at = strtoul(v, NULL, 10);
        else if (strcmp(a, "--lever-names") == 0)
            o->lever_names = v;
        else if (strcmp(a, "--lever-rounds") == 0)
            o->lever_rounds = atoi(v);
        else if (strcmp(a, "--repeats") == 0)
            o->repeats = atoi(v);
        else
            usage();
    }
    if (o->quick) {
        o->repeats = 1;
        o->warmup_s = o->warmup_s < 1 ? o->warmup_s : 1;
        o->seconds = o->seconds < 3 ? o->seconds : 3;
    }
    if (strncmp(o->device, "cuda", 4) == 0 && !page_given)
        o->page_size = 0; /* the GPU's own pages (2 MiB) */
    if (o->scale <= 0 || o->device_memory < (1u << 20) || o->slo_multiple <= 1 || o->ratio <= 0 ||
        o->seconds <= 0 || o->max_ratio < 1 || o->rows < 1 || o->load <= 0 || o->load > 1 ||
        o->exec_exponent < 0 || o->exec_exponent > 1 || o->lever_rounds < 1 || o->repeats < 1)
        usage();
}

/* ---- calibration ------------------------------------------------------------------- */

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Least squares y = a + b x. */
static void fit(const double *x, const double *y, int n, double *a, double *b)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) {
        sx += x[i];
        sy += y[i];
        sxx += x[i] * x[i];
        sxy += x[i] * y[i];
    }
    double d = n * sxx - sx * sx;
    *b = d != 0 ? (n * sxy - sx * sy) / d : 0;
    *a = (sy - *b * sx) / n;
}

enum { DN_CALIB_K = 6 };

typedef struct {
    /* warm latency: through the measured points (ln bytes, ln ms), in size
     * order, joined by straight lines and flat beyond the ends */
    double lx[DN_CALIB_K], ly[DN_CALIB_K];
    double ey[DN_CALIB_K]; /* ln exec us at the same points */
    double lat_b;          /* the slope of a line through them all (printed) */
    double exec_a, exec_b; /* worker exec: ln us = a + b ln bytes */
} dn_calib;

/* Send `per` requests to target k, `gap` seconds apart, after `first` s;
 * the median warm latency (ms) and mean exec (us) of the last 4/5. */
static void calib_run(const dn_server *s, const gf_dlg_targets *tg, int k, int per, double first,
                      double gap, double *lat_ms, double *exec_us)
{
    gf_dlg_req *reqs = calloc((size_t)per, sizeof *reqs);
    double *l = calloc((size_t)per, sizeof *l);
    if (reqs == NULL || l == NULL)
        dn_die("out of memory");
    for (int i = 0; i < per; i++) {
        reqs[i].t = first + gap * i;
        reqs[i].target = k;
    }
    char msg[256];
    if (gf_dlg_open_loop(s->port, tg, reqs, (size_t)per, 4, 60, msg, sizeof msg) != 0)
        dn_die("calibration: %s", msg);
    int m = 0;
    double esum = 0;
    for (int i = per / 5; i < per; i++) { /* the first fifth warms up */
        if (reqs[i].status != 200 || reqs[i].cold)
            continue;
        l[m++] = reqs[i].latency * 1e3;
        esum += reqs[i].exec_us;
    }
    if (m < per / 2)
        dn_die("calibration: only %d of %d requests were warm answers", m, per);
    qsort(l, (size_t)m, sizeof *l, cmp_d);
    *lat_ms = l[m / 2];
    *exec_us = esum / m;
    free(reqs);
    free(l);
}

/* Six functions spanning the sizes, one at a time, warm, one request in
 * flight at a time (no queueing). */
static void calibrate(const dn_opts *o, const char *dir, const dn_fn *fns, size_t n, dn_calib *c)
{
    enum { K = DN_CALIB_K };
    size_t pick[K];
    size_t *order = malloc(n * sizeof *order);
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    for (size_t i = 1; i < n; i++) /* insertion sort by size */
        for (size_t j = i; j > 0 && fns[order[j]].bytes < fns[order[j - 1]].bytes; j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int k = 0; k < K; k++)
        pick[k] = order[(size_t)k * (n - 1) / (K - 1)];
    free(order);
    char cdir[600];
    snprintf(cdir, sizeof cdir, "%s/calib", dir);
    mkdir(cdir, 0755);
    dn_server s;
    dn_server_start(&s, o, cdir, "lru", 1, 0, 512u << 20, NULL);
    dn_fn cf[K];
    for (int k = 0; k < K; k++) {
        cf[k] = fns[pick[k]];
        cf[k].slo_ms = 0;
        dn_fn_write(&cf[k], pick[k], dir, true, NULL);
        dn_deploy(&s, &cf[k], dir);
    }
    gf_dlg_targets tg;
    dn_targets_make(&tg, cf, K);
    double x[K], lat[K], ex[K];
    int per = o->quick ? 40 : 100;
    /* rounds over the six, each function's figure the lowest of its rounds'
     * medians: a burst of other work on a shared machine during one round
     * must not set a function's SLO */
    enum { ROUNDS = 3 };
    for (int k = 0; k < K; k++) {
        char path[512];
        snprintf(path, sizeof path, "/v2/repository/models/%.*s/load", (int)sizeof cf[k].name,
                 cf[k].name);
        dn_post(&s, path, NULL, 200);
        lat[k] = ex[k] = INFINITY;
    }
    /* a function's figure taken while the hypervisor stole more than
     * DN_MAX_STEAL of the machine does not count (its latency would loosen
     * every SLO read off it): up to three more rounds for the functions
     * without one, then the lowest of all if none came */
    double all_lat[K], all_ex[K];
    int good[K];
    for (int k = 0; k < K; k++) {
        all_lat[k] = all_ex[k] = INFINITY;
        good[k] = 0;
    }
    for (int round = 0; round < ROUNDS + 3; round++) {
        bool need = round < ROUNDS;
        for (int k = 0; k < K; k++)
            need = need || good[k] == 0;
        if (!need)
            break;
        for (int k = 0; k < K; k++) {
            if (round >= ROUNDS && good[k] > 0)
                continue;
            uint64_t tot0 = 0, st0 = 0, tot1 = 0, st1 = 0;
            bool ticks = dn_cpu_ticks(&tot0, &st0);
            double l0, e0;
            calib_run(&s, &tg, k, 10, 0.1, 0.05, &l0, &e0); /* how long one takes */
            double l1, e1;
            calib_run(&s, &tg, k, per, 0.05, 2.5 * l0 / 1e3 + 0.002, &l1, &e1);
            double steal = ticks && dn_cpu_ticks(&tot1, &st1) && tot1 > tot0
                               ? (double)(st1 - st0) / (double)(tot1 - tot0)
                               : 0;
            printf("calibration round=%d function=%s bytes=%llu rows=%d warm_p50_ms=%.3f "
                   "exec_us=%.1f steal=%.3f\n",
                   round, cf[k].name, (unsigned long long)cf[k].bytes, cf[k].rows, l1, e1, steal);
            fflush(stdout);
            all_lat[k] = fmin(all_lat[k], l1);
            all_ex[k] = fmin(all_ex[k], e1);
            if (steal <= DN_MAX_STEAL) {
                lat[k] = fmin(lat[k], l1);
                ex[k] = fmin(ex[k], e1);
                good[k]++;
            }
        }
    }
    for (int k = 0; k < K; k++)
        if (good[k] == 0) {
            printf("calibration function=%s spoilt: steal above %.2f in every round\n",
                   cf[k].name, DN_MAX_STEAL);
            lat[k] = all_lat[k];
            ex[k] = all_ex[k];
        }
    for (int k = 0; k < K; k++) {
        x[k] = log((double)cf[k].bytes);
        printf("calibration function=%s warm_ms=%.3f exec_us=%.1f\n", cf[k].name, lat[k], ex[k]);
        lat[k] = log(lat[k]);
        ex[k] = log(ex[k]);
    }
    dn_targets_free(&tg);
    dn_server_stop(&s);
    double lat_a;
    fit(x, lat, K, &lat_a, &c->lat_b);
    fit(x, ex, K, &c->exec_a, &c->exec_b);
    /* each function's warm latency is read off the measured points, not off
     * one power law: the smallest functions carry the most rows (their
     * request bodies are the largest), so latency is not monotone in size
     * and a line through all six misstates most of them */
    for (int k = 0; k < K; k++) { /* picked in size order */
        c->lx[k] = x[k];
        c->ly[k] = lat[k];
        c->ey[k] = ex[k];
    }
}

/* y at bytes off the points (lx, y), in log-log, flat beyond the ends. */
static double calib_at(const dn_calib *c, const double *y, double bytes)
{
    double lb = log(bytes);
    if (lb <= c->lx[0])
        return exp(y[0]);
    for (int k = 1; k < DN_CALIB_K; k++) {
        if (lb <= c->lx[k]) {
            double w = c->lx[k] > c->lx[k - 1] ? (lb - c->lx[k - 1]) / (c->lx[k] - c->lx[k - 1]) : 1;
            return exp(y[k - 1] + w * (y[k] - y[k - 1]));
        }
    }
    return exp(y[DN_CALIB_K - 1]);
}

static double calib_lat_ms(const dn_calib *c, double bytes)
{
    return calib_at(c, c->ly, bytes);
}

static double calib_exec_us(const dn_calib *c, double bytes)
{
    return exp(c->exec_a + c->exec_b * log(bytes));
}

/* ---- the search -------------------------------------------------------------------- */

typedef struct {
    const dn_opts *o;
    dn_server *s;
    const dn_fn *fns;
    size_t warm_n; /* the all-warm set: functions 0..warm_n-1 */
    const gf_dlg_targets *tg;
    double rate; /* the arrival rate: half the all-warm throughput */
    uint64_t seed;
    size_t inconclusive; /* trials whose all-warm controls all missed */
} dn_run;

/* The verdict at n functions: the majority of up to --repeats controlled
 * trials (each between all-warm controls, on fresh arrivals; it stops once
 * a majority agrees), so that one trial spoilt by a burst of other work
 * decides neither way. An inconclusive trial (the machine too busy for the
 * all-warm controls every try) counts as a failure, so the figure errs low.
 * *out is the median trial of those that stood. */
static bool trial_at(dn_run *r, const char *label, size_t n, dn_result *out)
{
    enum { MAX_REPEATS = 9 };
    dn_result res[MAX_REPEATS];
    int repeats = r->o->repeats < MAX_REPEATS ? r->o->repeats : MAX_REPEATS;
    int need = repeats / 2 + 1, pass = 0, fail = 0, k = 0;
    while (pass < need && fail < need) {
        dn_result t;
        if (!dn_controlled_trial(r->s, r->o, r->fns, n, r->warm_n, r->tg, r->rate, &r->seed, label,
                                 &t)) {
            r->inconclusive++;
            fail++;
            continue;
        }
        res[k++] = t;
        if (t.attainment >= r->o->target)
            pass++;
        else
            fail++;
    }
    for (int i = 1; i < k; i++) /* by attainment */
        for (int j = i; j > 0 && res[j].attainment < res[j - 1].attainment; j--) {
            dn_result x = res[j];
            res[j] = res[j - 1];
            res[j - 1] = x;
        }
    if (k > 0)
        *out = res[(k - 1) / 2];
    else
        memset(out, 0, sizeof *out);
    if (pass + fail > 1)
        printf("verdict %s n=%zu %s: %d of %d trials met the target\n", label, n,
               pass >= need ? "passed" : "failed", pass, pass + fail);
    fflush(stdout);
    return pass >= need;
}

/* The largest N that passes, *at_best its trial; *first_fail the smallest
 * N seen failing (0 when none did). */
static size_t search(dn_run *r, const char *policy, size_t cap, size_t n_max, dn_result *at_best,
                     size_t *first_fail)
{
    static const double full[] = {1, 2, 3, 4, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64};
    static const double quick[] = {1, 2, 4, 8, 16, 32, 64};
    const double *grid = r->o->quick ? quick : full;
    size_t n_grid = r->o->quick ? sizeof quick / sizeof quick[0] : sizeof full / sizeof full[0];
    size_t lo = 0, hi = 0;
    dn_result res;
    memset(at_best, 0, sizeof *at_best);
    for (size_t g = 0; g < n_grid; g++) {
        size_t n = (size_t)(grid[g] * (double)cap + 0.5);
        if (n > n_max)
            n = n_max;
        if (n <= lo)
            break;
        if (trial_at(r, policy, n, &res)) {
            lo = n;
            *at_best = res;
        } else {
            hi = n;
            break;
        }
    }
    if (lo == 0 && hi > 0) { /* not even one device's worth: look below */
        for (size_t n = hi / 2; n >= 1; n /= 2) {
            if (trial_at(r, policy, n, &res)) {
                lo = n;
                *at_best = res;
                break;
            }
            hi = n;
        }
    }
    int steps = r->o->quick ? 1 : 2;
    for (int k = 0; k < steps && hi > lo + 1 && hi - lo > cap / 4; k++) {
        size_t mid = (lo + hi) / 2;
        if (trial_at(r, policy, mid, &res)) {
            lo = mid;
            *at_best = res;
        } else {
            hi = mid;
        }
    }
    *first_fail = hi;
    return lo;
}

/* ---- paired comparisons ------------------------------------------------------------------ */

enum { DN_MAX_VARIANTS = 4, DN_MAX_VARIANT_ARGS = 8 };

/* --trials with --variants "FLAGS;FLAGS": each trial on a server started
 * with each variant's extra flags in turn (the order reversed every other
 * trial, so that a drift of the machine's load favours none), each after
 * the all-warm set is prefetched, every variant on the same arrivals;
 * printed as "trial POLICY[FLAGS] ...". */
static void run_variants(dn_run *r, dn_server *s, const char *policy, const char *sdir,
                         uint64_t link, uint64_t host, size_t n_max)
{
    char vbuf[512];
    snprintf(vbuf, sizeof vbuf, "%s", r->o->variants);
    char *label[DN_MAX_VARIANTS];
    const char *args[DN_MAX_VARIANTS][DN_MAX_VARIANT_ARGS + 1];
    char *words[DN_MAX_VARIANTS];
    int nv = 0;
    char *save = NULL;
    for (char *t = strtok_r(vbuf, ";", &save); t != NULL && nv < DN_MAX_VARIANTS;
         t = strtok_r(NULL, ";", &save))
        label[nv++] = t;
    for (int v = 0; v < nv; v++) {
        words[v] = strdup(label[v]);
        int k = 0;
        char *s2 = NULL;
        for (char *w = strtok_r(words[v], " ", &s2); w != NULL && k < DN_MAX_VARIANT_ARGS;
             w = strtok_r(NULL, " ", &s2))
            args[v][k++] = w;
        args[v][k] = NULL;
    }
    char tl[256];
    snprintf(tl, sizeof tl, "%s", r->o->trials);
    int round = 0;
    for (char *t = strtok_r(tl, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save), round++) {
        size_t n = strtoul(t, NULL, 10);
        const char *at = strchr(t, '@');
        double rate = at != NULL ? atof(at + 1) : r->rate;
        n = n < 1 ? 1 : n > n_max ? n_max : n;
        for (int j = 0; j < nv; j++) {
            int v = round % 2 == 0 ? j : nv - 1 - j;
            dn_server_stop(s);
            dn_server_start(s, r->o, sdir, policy, 1, link, host, args[v]);
            dn_prefetch(s, r->fns, r->warm_n);
            dn_result res;
            dn_trial(s, r->o, r->fns, n, r->tg, rate, r->seed + (uint64_t)round, &res);
            char lb[600];
            snprintf(lb, sizeof lb, "%s[%s]", policy, label[v]);
            dn_print_trial(lb, &res);
        }
    }
    for (int v = 0; v < nv; v++)
        free(words[v]);
}

/* ---- the SLOs -------------------------------------------------------------------------- */

/* The queue model's share of the 1 % a trial may miss: --slo-multiple auto
 * takes the smallest multiple at which the ideal executor keeps this much of
 * the all-warm set within its SLO, so that queueing alone takes at most a
 * tenth of the budget and the rest is placement's. */
#define DN_MODEL_TARGET 0.999
#define DN_MODEL_REQUESTS 400000.0 /* arrivals replayed: 400 misses at the target */
#define DN_MODEL_SEED 99

static void set_slos(dn_fn *fns, size_t n, double multiple)
{
    for (size_t i = 0; i < n; i++)
        fns[i].slo_ms = multiple * fns[i].warm_ms;
}

/* --slo-multiple auto: from `floor` (the 5) up in halves, the first
 * multiple at which the ideal FIFO executor (dn_queue_model) meets
 * DN_MODEL_TARGET over the all-warm set at the run's rate. A fixed multiple
 * cannot stay right while the time outside execution changes: when the
 * gateway got faster, 5 x its c1 latency came to measure queueing (the ideal
 * executor met 0.9885-0.9988 of it) rather than placement. */
static double choose_multiple(const dn_fn *fns, size_t warm_n, double rate, double floor)
{
    double k = floor;
    for (; k < 20; k += 0.5) {
        double a = dn_queue_model(fns, warm_n, rate, k, DN_MODEL_REQUESTS / rate, DN_MODEL_SEED);
        printf("slo_candidate multiple=%.1f queue_model_attainment=%.4f\n", k, a);
        if (a >= DN_MODEL_TARGET)
            break;
    }
    fflush(stdout);
    return k;
}

/* Deploy fns[from..to) with their SLOs (the weights written unless there;
 * functions deployed already, by an earlier step or an earlier run of the
 * same --keep directory, get new versions: the SLOs are this run's). */
static void deploy_range(const dn_server *s, const dn_fn *fns, size_t from, size_t to,
                         const char *dir)
{
    for (size_t i = from; i < to; i++) {
        dn_fn_write(&fns[i], i, dir, true, NULL);
        dn_deploy(s, &fns[i], dir);
    }
}

/* The run's start (`start`: remember now), or print key= the share of the
 * machine's CPU time the hypervisor stole since then (nothing where
 * /proc/stat cannot be read). */
static void steal_since(const char *key, bool start)
{
    static uint64_t tot0, st0;
    static bool have;
    uint64_t tot, st;
    if (start) {
        have = dn_cpu_ticks(&tot0, &st0);
        return;
    }
    if (have && dn_cpu_ticks(&tot, &st) && tot > tot0)
        printf("%s=%.3f\n", key, (double)(st - st0) / (double)(tot - tot0));
    fflush(stdout);
}

/* ---- main ---------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    dn_opts o;
    parse(argc, argv, &o);
    bool cuda = strncmp(o.device, "cuda", 4) == 0;
    char dir[512];
    if (o.keep != NULL) {
        snprintf(dir, sizeof dir, "%s", o.keep);
        mkdir(dir, 0755);
    } else {
        snprintf(dir, sizeof dir, "/tmp/gfdensity.XXXXXX");
        if (mkdtemp(dir) == NULL)
            dn_die("mkdtemp failed");
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    uint64_t page = o.page_size ? o.page_size : (2u << 20);

    /* the mix, and how many of it fit on one device */
    size_t probe = 4096;
    dn_fn *fns = calloc(probe, sizeof *fns);
    dn_mix_make(fns, probe, &o, page);
    double mean_dev = 0;
    for (size_t i = 0; i < probe; i++)
        mean_dev += (double)fns[i].device_bytes / (double)probe;
    size_t cap = (size_t)((double)o.device_memory / mean_dev);
    if (cap < 2)
        dn_die("the device (%llu bytes) holds fewer than two functions of the mix",
               (unsigned long long)o.device_memory);
    size_t n_max = (size_t)(o.max_ratio * (double)cap);
    if (n_max > probe)
        n_max = probe;
    uint64_t total_dev = 0;
    for (size_t i = 0; i < n_max; i++)
        total_dev += fns[i].device_bytes;
    printf("device=%s\n", o.device);
    printf("loadavg_start=%s\n", dn_loadavg());
    printf("mode=%s\n", o.quick ? "quick" : "full");
    printf("model_mb_min=%.3f model_mb_max=%.3f model_mb_mean=%.3f\n", 5 * o.scale, 500 * o.scale,
           mean_dev / DN_MB);
    printf("device_memory_mib=%.0f page_kib=%.0f\n", (double)o.device_memory / 1048576.0,
           (double)page / 1024.0);
    printf("device_capacity_models=%zu\n", cap);
    printf("functions_max=%zu\n", n_max);
    fflush(stdout);

    /* 1. calibration */
    steal_since(NULL, true);
    dn_calib cal;
    calibrate(&o, dir, fns, n_max, &cal);
    steal_since("calibration_steal", false);
    double ref = 100 * DN_MB * o.scale;
    double exec_ref_us = calib_exec_us(&cal, ref);
    if (exec_ref_us < 5)
        exec_ref_us = 5;
    /* 2. the link */
    uint64_t link = cuda ? 0 : (uint64_t)(ref / (o.ratio * exec_ref_us) * 1e6);
    printf("warm_latency_ms_ref=%.3f warm_latency_exponent=%.3f\n", calib_lat_ms(&cal, ref),
           cal.lat_b);
    printf("exec_exponent=%.3f\n", cal.exec_b);
    printf("exec_ref_us=%.1f\n", exec_ref_us);
    if (cuda)
        printf("link=pcie (no emulation)\n");
    else
        printf("emulated_link_gbps=%.3f swap_compute_ratio=%.2f\n", (double)link / 1e9, o.ratio);
    for (size_t i = 0; i < n_max; i++) {
        fns[i].warm_ms = calib_lat_ms(&cal, (double)fns[i].bytes);
        fns[i].exec_ms = calib_at(&cal, cal.ey, (double)fns[i].bytes) / 1e3;
        fns[i].swap_ms = link > 0 ? (double)fns[i].device_bytes / (double)link * 1e3 : 0;
    }
    set_slos(fns, n_max, o.slo_multiple);

    /* 3. deploy everything on the run's server: the all-warm set (what fits
     * on the device) first, since its throughput sets the rate, and that
     * rate the multiple with --slo-multiple auto */
    char pols[128];
    snprintf(pols, sizeof pols, "%s", o.policies);
    char *policy[DN_MAX_POLICIES];
    int n_pol = 0;
    for (char *t = strtok(pols, ","); t != NULL && n_pol < DN_MAX_POLICIES; t = strtok(NULL, ","))
        policy[n_pol++] = t;
    if (n_pol == 0)
        usage();
    uint64_t host = total_dev + total_dev / 4 + (64u << 20);
    char sdir[600];
    snprintf(sdir, sizeof sdir, "%s/run", dir);
    mkdir(sdir, 0755);
    dn_server s;
    dn_server_start(&s, &o, sdir, policy[0], 1, link, host, NULL);
    double t0 = gf_dlg_now();
    size_t warm_n = 0;
    uint64_t used = 0;
    while (warm_n < n_max && used + fns[warm_n].device_bytes <= o.device_memory * 9 / 10)
        used += fns[warm_n++].device_bytes;
    deploy_range(&s, fns, 0, warm_n, dir);
    gf_dlg_targets tg;
    dn_targets_make(&tg, fns, n_max);

    /* 4. all warm: what fits on the device, prefetched, closed loop */
    double rate = dn_rate_of(&s, &o, fns, warm_n, &tg);
    printf("all_warm_functions=%zu all_warm_rps=%.0f load=%.2f arrival_rps=%.0f\n", warm_n,
           rate / o.load, o.load, rate);
    double k = o.slo_auto ? choose_multiple(fns, warm_n, rate, o.slo_multiple) : o.slo_multiple;
    if (k != o.slo_multiple) { /* new versions of the all-warm set with the chosen SLOs */
        set_slos(fns, n_max, k);
        deploy_range(&s, fns, 0, warm_n, dir);
    }
    deploy_range(&s, fns, warm_n, n_max, dir);
    printf("deployed=%zu deploy_s=%.1f\n", n_max, gf_dlg_now() - t0);
    double slo_lo = INFINITY, slo_hi = 0;
    for (size_t i = 0; i < n_max; i++) {
        slo_lo = fmin(slo_lo, fns[i].slo_ms);
        slo_hi = fmax(slo_hi, fns[i].slo_ms);
    }
    printf("slo_multiple=%.1f slo_multiple_chosen_by=%s slo_ms_min=%.2f slo_ms_max=%.2f\n", k,
           o.slo_auto ? "queue_model" : "flag", slo_lo, slo_hi);
    printf("queue_model_attainment_at_slo=%.4f\n",
           dn_queue_model(fns, warm_n, rate, k, DN_MODEL_REQUESTS / rate, DN_MODEL_SEED));
    fflush(stdout);

    /* 5. per policy, the largest N at the SLO */
    dn_run run = {&o, &s, fns, warm_n, &tg, rate, 1, 0};
    if (o.trials != NULL && o.variants != NULL) {
        run_variants(&run, &s, policy[0], sdir, link, host, n_max);
        steal_since("steal_run", false);
        dn_server_stop(&s);
        return 0;
    }
    if (o.levers_at > 0) { /* the levers alone, at a given N */
        size_t at = o.levers_at < n_max ? o.levers_at : n_max;
        double tl = gf_dlg_now();
        dn_levers(&s, &o, dir, sdir, policy[0], fns, at, warm_n, &tg, rate, link, host);
        printf("levers_s=%.0f\n", gf_dlg_now() - tl);
        steal_since("steal_run", false);
        dn_server_stop(&s);
        return 0;
    }
    if (o.trials != NULL) { /* by hand: N@RPS,... */
        char tl[256];
        snprintf(tl, sizeof tl, "%s", o.trials);
        for (char *t = strtok(tl, ","); t != NULL; t = strtok(NULL, ",")) {
            size_t n = strtoul(t, NULL, 10);
            const char *at = strchr(t, '@');
            run.rate = at != NULL ? atof(at + 1) : rate;
            dn_result res;
            char label[64];
            snprintf(label, sizeof label, "%s", policy[0]);
            n = n < 1 ? 1 : n > n_max ? n_max : n;
            if (o.uncontrolled) { /* the trial alone, after the all-warm set is prefetched */
                dn_prefetch(&s, fns, warm_n);
                dn_trial(&s, &o, fns, n, &tg, run.rate, run.seed++, &res);
                dn_print_trial(label, &res);
            } else {
                trial_at(&run, label, n, &res);
            }
        }
        steal_since("steal_run", false);
        dn_server_stop(&s);
        return 0;
    }
    size_t best = 0, best_fail = 0;
    int best_pol = 0;
    dn_result best_res;
    memset(&best_res, 0, sizeof best_res);
    for (int p = 0; p < n_pol; p++) {
        if (p > 0) {
            dn_server_stop(&s);
            dn_server_start(&s, &o, sdir, policy[p], 1, link, host, NULL);
        }
        double ts = gf_dlg_now();
        dn_result at;
        size_t fail;
        size_t n = search(&run, policy[p], cap, n_max, &at, &fail);
        printf("functions_at_slo_%s=%zu\n", policy[p], n);
        printf("search_s_%s=%.0f\n", policy[p], gf_dlg_now() - ts);
        fflush(stdout);
        if (n > best || p == 0) {
            best = n;
            best_pol = p;
            best_res = at;
            best_fail = fail;
        }
    }
    printf("functions_at_slo_best=%zu\n", best);
    printf("best_policy=%s\n", policy[best_pol]);
    printf("density_ratio=%.2f\n", (double)best / (double)cap);
    printf("p50_ms=%.2f\n", best_res.p50_ms);
    printf("p99_ms=%.2f\n", best_res.p99_ms);
    printf("cold_fraction=%.3f\n", best_res.cold_fraction);
    if (best_fail == 0)
        printf("search_limit_reached=%zu\n", n_max);
    printf("inconclusive_trials=%zu\n", run.inconclusive);
    fflush(stdout);

    /* 6. the levers, where the best policy first failed (or at its best) */
    if (o.levers) {
        if (best_pol != n_pol - 1) {
            dn_server_stop(&s);
            dn_server_start(&s, &o, sdir, policy[best_pol], 1, link, host, NULL);
        }
        /* where the best policy first failed; at least twice the capacity,
         * so that placement is what the levers act on */
        size_t at = best_fail > 0 ? best_fail : n_max;
        if (at < 2 * cap)
            at = 2 * cap < n_max ? 2 * cap : n_max;
        double tl = gf_dlg_now();
        dn_levers(&s, &o, dir, sdir, policy[best_pol], fns, at, warm_n, &tg, rate, link, host);
        printf("levers_s=%.0f\n", gf_dlg_now() - tl);
    }

    printf("loadavg_end=%s\n", dn_loadavg());
    steal_since("steal_run", false);
    dn_server_stop(&s);
    dn_targets_free(&tg);
    free(fns);
    curl_global_cleanup();
    if (o.keep == NULL) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0)
            return 1;
    }
    return 0;
}
