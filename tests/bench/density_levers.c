/* gpufaas benchmarks — bench_density's levers, each a trial at the same N
 * functions as a baseline trial of the same server, at the same arrival
 * rate (half the all-warm throughput measured at the start):
 *
 *   pin         the most popular functions pinned (PUT .../residency), as
 *               many as the pin limit (half the device) takes;
 *   pin_tight   the functions whose cold swap leaves them no room (tight():
 *               their SLO less their warm latency and their swap is under
 *               one more warm latency, so a cold request of theirs misses
 *               with anything ahead of it), the most popular first, as many
 *               as the pin limit takes;
 *   priority    the most popular tenth "high", the least popular half "low";
 *   keep_warm   every function kept warm for a second after each use (the
 *               kept-warm bytes share the pin limit);
 *   replicate   two cpu workers with the router's replication on and off
 *               (--replicate), at half the two workers' all-warm throughput;
 *   admission   every function redeployed with "admission":
 *               {"max_predicted_slo": 1}: late requests are answered 503
 *               at once (they count as missed; rejected= says how many).
 *
 *   policy_<p>  each eviction policy of --policies on its own server.
 *
 * Each lever is paired with a baseline trial on the same arrivals just
 * before it (--lever-rounds pairs, 1 by default), each trial controlled
 * (dn_controlled_trial: between all-warm controls) or, with --uncontrolled,
 * alone; prints a trial line per trial and lever_<name>_attainment=,
 * _p99_ms=, _cold_fraction= (means over the rounds) and
 * lever_<name>_vs_baseline= (its attainment less its baselines').
 * --lever-names pin_tight,policy,... runs only those (policy: the
 * policies; replicate: the two-worker pair). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "density.h"

static void set_residency(const dn_server *s, const dn_fn *f, const char *json)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/functions/%s/residency", f->name);
    if (json != NULL)
        dn_http(s, "PUT", path, json, 200);
    else
        dn_http(s, "DELETE", path, NULL, 200);
}

static void reset_residency(const dn_server *s, const dn_fn *fns, size_t n)
{
    for (size_t i = 0; i < n; i++)
        set_residency(s, &fns[i], NULL);
}

typedef struct {
    const dn_opts *o;
    const dn_fn *fns;
    size_t n, warm_n;
    const gf_dlg_targets *tg;
    double rate;
    uint64_t seed;
    size_t inconclusive;
} lever_run;

/* One trial of lever `name` (label) at lr->rate on arrivals `seed`:
 * controlled (between all-warm controls), or with o->uncontrolled alone
 * after the all-warm set is prefetched. Printed as a trial line. */
static void lever_one(const dn_server *s, lever_run *lr, const char *name, uint64_t seed,
                      dn_result *r)
{
    char label[64];
    snprintf(label, sizeof label, "lever_%s", name);
    if (lr->o->uncontrolled) {
        dn_prefetch(s, lr->fns, lr->warm_n);
        dn_trial(s, lr->o, lr->fns, lr->n, lr->tg, lr->rate, seed, r);
        dn_print_trial(label, r);
        return;
    }
    uint64_t sd = seed;
    if (!dn_controlled_trial(s, lr->o, lr->fns, lr->n, lr->warm_n, lr->tg, lr->rate, &sd, label,
                             r)) {
        lr->inconclusive++;
        printf("lever_%s_inconclusive=1\n", name);
    }
}

/* The mean over a lever's rounds (attainment, p99, cold fraction,
 * rejected), accumulated by lever_add. */
typedef struct {
    double att, p99, cold, rej;
    int n;
} lever_sum;

static void lever_add(lever_sum *m, const dn_result *r)
{
    m->att += r->attainment;
    m->p99 += r->p99_ms;
    m->cold += r->cold_fraction;
    m->rej += r->rejected;
    m->n++;
}

/* Print lever_<name>_attainment= (and friends) as means over its rounds,
 * and lever_<name>_vs_baseline= its attainment less that of the baseline
 * trials it was paired with (the same arrivals, just before it). */
static void lever_report(const char *name, const lever_sum *m, const lever_sum *base)
{
    if (m->n == 0)
        return;
    double n = m->n;
    printf("lever_%s_attainment=%.4f\n", name, m->att / n);
    printf("lever_%s_p99_ms=%.2f\n", name, m->p99 / n);
    printf("lever_%s_cold_fraction=%.3f\n", name, m->cold / n);
    if (m->rej > 0)
        printf("lever_%s_rejected=%.4f\n", name, m->rej / n);
    if (base != NULL && base->n > 0)
        printf("lever_%s_vs_baseline=%+.4f\n", name, m->att / n - base->att / base->n);
    fflush(stdout);
}

/* A lever's rounds: a baseline trial, then the lever (set up by `on`, taken
 * off by `off`) on the same arrivals; o->lever_rounds times. */
typedef void (*lever_fn)(const dn_server *s, const dn_fn *fns, size_t n, const dn_opts *o,
                         const char *model_dir);

/* True when --lever-names is not given or names `name`. */
static bool lever_wanted(const dn_opts *o, const char *name)
{
    if (o->lever_names == NULL)
        return true;
    size_t len = strlen(name);
    for (const char *p = o->lever_names; (p = strstr(p, name)) != NULL; p += len)
        if ((p == o->lever_names || p[-1] == ',') && (p[len] == ',' || p[len] == '\0'))
            return true;
    return false;
}

static void lever_paired(const dn_server *s, lever_run *lr, const char *name, lever_fn on,
                         lever_fn off, const char *model_dir)
{
    if (!lever_wanted(lr->o, name))
        return;
    lever_sum m = {0}, base = {0};
    for (int k = 0; k < lr->o->lever_rounds; k++) {
        uint64_t seed = lr->seed++;
        dn_result r;
        char bl[64];
        snprintf(bl, sizeof bl, "baseline_for_%s", name);
        lever_one(s, lr, bl, seed, &r);
        lever_add(&base, &r);
        on(s, lr->fns, lr->n, lr->o, model_dir);
        lever_one(s, lr, name, seed, &r);
        lever_add(&m, &r);
        off(s, lr->fns, lr->n, lr->o, model_dir);
    }
    lever_report(name, &m, &base);
}

/* pin: the most popular, within the pin limit (half the device) */
static size_t pin_count(const dn_fn *fns, size_t n, const dn_opts *o)
{
    uint64_t pinned = 0;
    size_t k = 0;
    while (k < n && pinned + fns[k].device_bytes <= o->device_memory / 2)
        pinned += fns[k++].device_bytes;
    return k;
}

static void pin_on(const dn_server *s, const dn_fn *fns, size_t n, const dn_opts *o,
                   const char *dir)
{
    (void)dir;
    for (size_t i = 0, k = pin_count(fns, n, o); i < k; i++)
        set_residency(s, &fns[i], "{\"pin\": true}");
}

static void pin_off(const dn_server *s, const dn_fn *fns, size_t n, const dn_opts *o,
                    const char *dir)
{
    (void)dir;
    reset_residency(s, fns, pin_count(fns, n, o));
}

/* A cold request of f misses if one request of its size is ahead of it:
 * its SLO less its swap and its own warm latency is under one more warm
 * latency. */
static bool tight(const dn_fn *f)
{
    return f->swap_ms > 0 && f->slo_ms - f->swap_ms - f->warm_ms < f->warm_ms;
}

/* The tight functions pin_tight pins (the most popular first, within the
 * pin limit): into pick[] (n of them at most), their count returned. */
static size_t tight_pick(const dn_fn *fns, size_t n, const dn_opts *o, size_t *pick)
{
    uint64_t pinned = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (tight(&fns[i]) && pinned + fns[i].device_bytes <= o->device_memory / 2) {
            pinned += fns[i].device_bytes;
            pick[k++] = i;
        }
    return k;
}

static void tight_set(const dn_server *s, const dn_fn *fns, size_t n, const dn_opts *o,
                      const char *json)
{
    size_t *pick = malloc(n * sizeof *pick);
    if (pick == NULL)
        dn_die("out of memory");
    for (size_t i = 0, k = tight_pick(fns, n, o, pick); i < k; i++)
        set_residency(s, &fns[pick[i]], json);
    free(pick);
}

static void tight_on(const dn_server *s, const dn_fn *fns, size_t n, const dn_opts *o,
                     const char *dir)
{
    (void)dir;
    tight_set(s, fns, n, o, "{\"pin\": true}");
}

static void tight_off(const dn_server *s, const dn_fn *fns, size_t n, const dn_opts *o,
                      const char *dir)
{
    (void)dir;
    tight_set(s, fns, n, o, NULL);
}

/* priority classes by popularity: the first tenth high, the last half low */
static void prio_on(const dn_server *s, const dn_fn *fns, size_t n, const dn_opts *o,
                    const char *dir)
{
    (void)o, (void)dir;
    for (size_t i = 0; i < n; i++)
        if (i < n / 10 || i >= n / 2)
            set_residency(s, &fns[i],
                          i < n / 10 ? "{\"priority\": \"high\"}" : "{\"priority\": \"low\"}");
}

static void prio_off(const dn_server *s, const dn_fn *fns, size_t n, const dn_opts *o,
                     const char *dir)
{
    (void)o, (void)dir;
    for (size_t i = 0; i < n; i++)
        if (i < n / 10 || i >= n / 2)
            set_residency(s, &fns[i], NULL);
}

/* keep warm for a second after each use */
static void warm_on(const dn_server *s, const dn_fn *fns, size_t n, const dn_opts *o,
                    const char *dir)
{
    (void)o, (void)dir;
    for (size_t i = 0; i < n; i++)
        set_residency(s, &fns[i], "{\"keep_warm_s\": 1}");
}

static void all_off(const dn_server *s, const dn_fn *fns, size_t n, const dn_opts *o,
                    const char *dir)
{
    (void)o, (void)dir;
    reset_residency(s, fns, n);
}

/* admission: new versions that ask for it, then new ones that do not */
static void adm_on(const dn_server *s, const dn_fn *fns, size_t n, const dn_opts *o,
                   const char *dir)
{
    (void)o;
    for (size_t i = 0; i < n; i++) {
        dn_fn_write(&fns[i], i, dir, false, "{\"admission\": {\"max_predicted_slo\": 1}}");
        dn_deploy(s, &fns[i], dir);
    }
}

static void adm_off(const dn_server *s, const dn_fn *fns, size_t n, const dn_opts *o,
                    const char *dir)
{
    (void)o;
    for (size_t i = 0; i < n; i++) {
        dn_fn_write(&fns[i], i, dir, false, NULL);
        dn_deploy(s, &fns[i], dir);
    }
}

void dn_levers(dn_server *s, const dn_opts *o, const char *model_dir, const char *state_dir,
               const char *policy, dn_fn *fns, size_t n, size_t warm_n, const gf_dlg_targets *tg,
               double rate, uint64_t link, uint64_t host)
{
    lever_run lr = {o, fns, n, warm_n, tg, rate, 1000, 0};
    printf("levers_functions=%zu levers_policy=%s levers_rate_rps=%.0f levers_rounds=%d\n", n,
           policy, rate, o->lever_rounds);
    printf("lever_pin_functions=%zu\n", pin_count(fns, n, o));
    lever_paired(s, &lr, "pin", pin_on, pin_off, model_dir);
    size_t n_tight = 0, *pick = malloc(n * sizeof *pick);
    double w_tight = 0, w_all = 0;
    if (pick == NULL)
        dn_die("out of memory");
    for (size_t i = 0; i < n; i++) {
        n_tight += tight(&fns[i]);
        w_tight += tight(&fns[i]) ? fns[i].weight : 0;
        w_all += fns[i].weight;
    }
    size_t n_pick = tight_pick(fns, n, o, pick);
    double w_pinned = 0;
    for (size_t i = 0; i < n_pick; i++)
        w_pinned += fns[pick[i]].weight;
    free(pick);
    printf("lever_pin_tight_functions=%zu tight_functions=%zu tight_requests=%.3f "
           "pinned_tight_requests=%.3f\n",
           n_pick, n_tight, w_all > 0 ? w_tight / w_all : 0, w_all > 0 ? w_pinned / w_all : 0);
    lever_paired(s, &lr, "pin_tight", tight_on, tight_off, model_dir);
    lever_paired(s, &lr, "priority", prio_on, prio_off, model_dir);
    lever_paired(s, &lr, "keep_warm", warm_on, all_off, model_dir);
    lever_paired(s, &lr, "admission", adm_on, adm_off, model_dir);

    /* the eviction policies, each on its own server, on the same arrivals */
    char pols[128];
    snprintf(pols, sizeof pols, "%s", o->policies);
    lever_sum pm[4] = {{0}};
    char *pn[4];
    int np = 0;
    char *save = NULL;
    for (char *t = strtok_r(pols, ",", &save); t != NULL && np < 4; t = strtok_r(NULL, ",", &save))
        pn[np++] = t;
    for (int k = 0; k < o->lever_rounds && np > 1 && lever_wanted(o, "policy"); k++) {
        uint64_t seed = lr.seed++;
        for (int p = 0; p < np; p++) {
            dn_server_stop(s);
            dn_server_start(s, o, state_dir, pn[p], 1, link, host, NULL);
            char name[64];
            snprintf(name, sizeof name, "policy_%s", pn[p]);
            dn_result r;
            lever_one(s, &lr, name, seed, &r);
            lever_add(&pm[p], &r);
        }
    }
    for (int p = 0; p < np && np > 1; p++) {
        char name[64];
        snprintf(name, sizeof name, "policy_%s", pn[p]);
        lever_report(name, &pm[p], &pm[0]);
    }

    /* replication: two workers, the router's replication off then on, at
     * half the two workers' own all-warm throughput */
    if (strncmp(o->device, "cuda", 4) != 0 && lever_wanted(o, "replicate")) {
        static const char *const off[] = {"--replicate", "off", NULL};
        static const char *const on[] = {"--replicate", "on", NULL};
        dn_server_stop(s);
        dn_server_start(s, o, state_dir, policy, 2, link, host, off);
        lever_run two = lr;
        two.rate = dn_rate_of(s, o, fns, warm_n, tg);
        printf("lever_replicate_rate_rps=%.0f\n", two.rate);
        lever_sum mon = {0}, moff = {0};
        for (int k = 0; k < o->lever_rounds; k++) {
            uint64_t seed = two.seed++;
            dn_result r;
            if (k > 0) {
                dn_server_stop(s);
                dn_server_start(s, o, state_dir, policy, 2, link, host, off);
            }
            lever_one(s, &two, "replicate_off", seed, &r);
            lever_add(&moff, &r);
            dn_server_stop(s);
            dn_server_start(s, o, state_dir, policy, 2, link, host, on);
            lever_one(s, &two, "replicate_on", seed, &r);
            lever_add(&mon, &r);
        }
        lever_report("replicate_off", &moff, NULL);
        lever_report("replicate_on", &mon, &moff);
        lr.inconclusive += two.inconclusive;
    }
    dn_server_stop(s);
    dn_server_start(s, o, state_dir, policy, 1, link, host, NULL);
    printf("levers_inconclusive=%zu\n", lr.inconclusive);
}
