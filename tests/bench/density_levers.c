/* gpufaas benchmarks — bench_density's levers, each a trial at the same N
 * functions as a baseline trial of the same server, at the same arrival
 * rate (half the all-warm throughput measured at the start):
 *
 *   pin         the most popular functions pinned (PUT .../residency), as
 *               many as the pin limit (half the device) takes;
 *   priority    the most popular tenth "high", the least popular half "low";
 *   keep_warm   every function kept warm for a second after each use (the
 *               kept-warm bytes share the pin limit);
 *   replicate   two cpu workers with the router's replication on and off
 *               (--replicate), at half the two workers' all-warm throughput;
 *   admission   every function redeployed with "admission":
 *               {"max_predicted_slo": 1}: late requests are answered 503
 *               at once (they count as missed; rejected= says how many).
 *
 * Each is a controlled trial (dn_controlled_trial: between all-warm
 * controls) at the run's arrival rate, and prints lever_<name>_attainment=,
 * lever_<name>_p99_ms= and a trial line; lever_baseline_* is the same trial
 * without a lever. */
#include <stdio.h>
#include <string.h>

#include "density.h"

static void lever_print(const char *name, const dn_result *r)
{
    char label[64];
    snprintf(label, sizeof label, "lever_%s", name);
    dn_print_trial(label, r);
    printf("lever_%s_attainment=%.4f\n", name, r->attainment);
    printf("lever_%s_p99_ms=%.2f\n", name, r->p99_ms);
    printf("lever_%s_cold_fraction=%.3f\n", name, r->cold_fraction);
    if (r->rejected > 0)
        printf("lever_%s_rejected=%.4f\n", name, r->rejected);
    fflush(stdout);
}

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

/* A controlled trial of the lever `name` at lr->rate; printed. */
static void lever_trial(const dn_server *s, lever_run *lr, const char *name)
{
    char label[64];
    snprintf(label, sizeof label, "lever_%s", name);
    dn_result r;
    if (!dn_controlled_trial(s, lr->o, lr->fns, lr->n, lr->warm_n, lr->tg, lr->rate, &lr->seed,
                             label, &r)) {
        lr->inconclusive++;
        printf("lever_%s_inconclusive=1\n", name);
    }
    lever_print(name, &r);
}

void dn_levers(dn_server *s, const dn_opts *o, const char *model_dir, const char *state_dir,
               const char *policy, dn_fn *fns, size_t n, size_t warm_n, const gf_dlg_targets *tg,
               double rate, uint64_t link, uint64_t host)
{
    lever_run lr = {o, fns, n, warm_n, tg, rate, 1000, 0};
    printf("levers_functions=%zu levers_policy=%s levers_rate_rps=%.0f\n", n, policy, rate);
    lever_trial(s, &lr, "baseline");

    /* pin: the most popular, within the pin limit (half the device) */
    uint64_t pinned = 0;
    size_t k = 0;
    while (k < n && pinned + fns[k].device_bytes <= o->device_memory / 2)
        pinned += fns[k++].device_bytes;
    for (size_t i = 0; i < k; i++)
        set_residency(s, &fns[i], "{\"pin\": true}");
    printf("lever_pin_functions=%zu\n", k);
    lever_trial(s, &lr, "pin");
    reset_residency(s, fns, k);

    /* priority classes by popularity */
    for (size_t i = 0; i < n; i++)
        if (i < n / 10 || i >= n / 2)
            set_residency(s, &fns[i],
                          i < n / 10 ? "{\"priority\": \"high\"}" : "{\"priority\": \"low\"}");
    lever_trial(s, &lr, "priority");
    for (size_t i = 0; i < n; i++)
        if (i < n / 10 || i >= n / 2)
            set_residency(s, &fns[i], NULL);

    /* keep warm for a second after each use */
    for (size_t i = 0; i < n; i++)
        set_residency(s, &fns[i], "{\"keep_warm_s\": 1}");
    lever_trial(s, &lr, "keep_warm");
    reset_residency(s, fns, n);

    /* replication: two workers, the router's replication off then on */
    if (strncmp(o->device, "cuda", 4) != 0) {
        static const char *const off[] = {"--replicate", "off", NULL};
        static const char *const on[] = {"--replicate", "on", NULL};
        dn_server_stop(s);
        dn_server_start(s, o, state_dir, policy, 2, link, host, off);
        lever_run two = lr;
        two.rate = dn_rate_of(s, o, fns, warm_n, tg); /* the two workers' own */
        printf("lever_replicate_rate_rps=%.0f\n", two.rate);
        lever_trial(s, &two, "replicate_off");
        dn_server_stop(s);
        dn_server_start(s, o, state_dir, policy, 2, link, host, on);
        lever_trial(s, &two, "replicate_on");
        lr.inconclusive += two.inconclusive;
        dn_server_stop(s);
        dn_server_start(s, o, state_dir, policy, 1, link, host, NULL);
    }

    /* admission: new versions that ask for it (the last lever: they stay) */
    for (size_t i = 0; i < n; i++) {
        dn_fn_write(&fns[i], i, model_dir, true, "{\"admission\": {\"max_predicted_slo\": 1}}");
        dn_deploy(s, &fns[i], model_dir);
    }
    lever_trial(s, &lr, "admission");
    printf("levers_inconclusive=%zu\n", lr.inconclusive);
}
