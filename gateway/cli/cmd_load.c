/* gpufaas load NAME [WORKER] and gpufaas unload NAME — move a function's
 * current version onto a worker's device ahead of its requests, or evict it
 * from every worker (the KServe v2 repository extension: POST
 * /v2/repository/models/NAME/load and .../unload, admin calls). A WORKER is
 * named in the load's parameters ({"parameters": {"worker": N}}); load then
 * polls /v1/placements until the model is on that device. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "gateway/cli/cli.h"
#include "gateway/cli/client.h"
#include "gateway/cli/flags.h"

enum { L_NO_WAIT, L_TIMEOUT, L_COUNT_ };

static void load_usage(FILE *out);

static const gf_cli_flag load_flags[L_COUNT_] = {
    [L_NO_WAIT] = {"no-wait", 0, NULL, 0, "return once the server accepted the load"},
    [L_TIMEOUT] = {"timeout", 0, "SECONDS", 0, "how long to wait for the load [30]"},
};

static const gf_cli_cmd load_cmd = {"load", load_flags, L_COUNT_, load_usage};

static void load_usage(FILE *out)
{
    fprintf(out, "usage: gpufaas load NAME [WORKER] [options]\n\n"
                 "Load the current version of function NAME into the device memory of worker\n"
                 "WORKER (a number as 'gpufaas ps' shows it; without it the server's router\n"
                 "chooses), and wait until it is there. An admin call.\n\n"
                 "options:\n");
    gf_cli_flags_usage(out, &load_cmd);
    fputc('\n', out);
    gf_cli_common_usage(out);
}

static void unload_usage(FILE *out)
{
    fprintf(out, "usage: gpufaas unload NAME [options]\n\n"
                 "Evict function NAME from the device and host memory of every worker and make it\n"
                 "unavailable: it stays deployed, but answers requests with 400 until\n"
                 "`gpufaas load NAME` (or a new deploy). An admin call.\n\n");
    gf_cli_common_usage(out);
}

/* The placement of name:version on the device of worker (-1: any) that is
 * ready, from GET /v1/placements; a new reference or NULL. *failed is set
 * when the request failed (reported). */
static json_t *find_on_device(gf_cli_client *c, const char *name, long long version, int worker,
                              bool *failed)
{
    json_t *j = gf_cli_get_json(c, "/v1/placements");
    if (j == NULL) {
        *failed = true;
        return NULL;
    }
    json_t *found = NULL;
    const json_t *ps = json_object_get(j, "placements");
    for (size_t i = 0; i < json_array_size(ps) && found == NULL; i++) {
        json_t *p = json_array_get(ps, i);
        if (strcmp(gf_cli_json_str(p, "function", ""), name) == 0 &&
            gf_cli_json_int(p, "version", -1) == version &&
            strcmp(gf_cli_json_str(p, "tier", ""), "device") == 0 &&
            strcmp(gf_cli_json_str(p, "state", ""), "ready") == 0 &&
            (worker < 0 || gf_cli_json_int(p, "worker", -1) == worker))
            found = json_incref(p);
    }
    json_decref(j);
    return found;
}

int gf_cmd_load(int argc, char **argv)
{
    if (gf_cli_wants_help(argc, argv)) {
        load_usage(stdout);
        return 0;
    }
    gf_cli_client c;
    gf_cli_client_init(&c, "load");
    gf_cli_val val[L_COUNT_];
    const char *pos[2];
    int n_pos;
    long long timeout_s = 30;
    int rc = gf_cli_parse(&load_cmd, &c, val, argc, argv, pos, 2, &n_pos);
    if (rc != 0)
        goto out;
    rc = 2;
    const char *name = n_pos > 0 ? pos[0] : NULL, *wname = n_pos > 1 ? pos[1] : NULL;
    bool wait = val[L_NO_WAIT].n == 0;
    if (!gf_cli_flag_int(&load_cmd, &c, L_TIMEOUT, val, 1, 86400,
                         "a number of seconds (1..86400)", &timeout_s))
        goto out;
    if (name == NULL) {
        load_usage(stderr);
        goto out;
    }
    long long worker = -1;
    if (wname != NULL &&
        !gf_cli_parse_int(wname[0] == 'w' ? wname + 1 : wname, 0, 1 << 20, &worker)) {
        gf_cli_errorf(&c, "WORKER must be a worker id as 'gpufaas ps' shows it, not '%s'", wname);
        goto out;
    }
    rc = 1;
    if (!gf_cli_name_ok(&c, name))
        goto out;
    /* the current version (and a clear 404 for an unknown function) */
    char path[160];
    snprintf(path, sizeof path, "/v1/functions/%s", name);
    json_t *f = gf_cli_get_json(&c, path);
    if (f == NULL)
        goto out;
    long long version = gf_cli_json_int(f, "version", -1);
    json_decref(f);
    if (version < 0) {
        gf_cli_errorf(&c, "function '%s' has no version that can serve", name);
        goto out;
    }
    char body[96] = "";
    if (worker >= 0)
        snprintf(body, sizeof body, "{\"parameters\": {\"worker\": %lld}}", worker);
    snprintf(path, sizeof path, "/v2/repository/models/%s/load", name);
    gf_cli_resp r;
    gf_cli_resp_init(&r);
    int st = gf_cli_call(&c, "POST", path, "application/json", body, strlen(body), &r);
    gf_cli_resp_deinit(&r);
    if (st != 0)
        goto out;
    json_t *p = NULL;
    if (wait) {
        double deadline = gf_mono_s() + (double)timeout_s;
        bool failed = false;
        while ((p = find_on_device(&c, name, version, (int)worker, &failed)) == NULL && !failed &&
               gf_mono_s() < deadline) {
            struct timespec ts = {0, 100 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        if (p == NULL) {
            if (!failed) {
                if (worker >= 0)
                    gf_cli_errorf(&c,
                                  "%s version %lld is not on the device of worker %lld after "
                                  "%lld s",
                                  name, version, worker, timeout_s);
                else
                    gf_cli_errorf(&c, "%s version %lld is not on a device after %lld s", name,
                                  version, timeout_s);
            }
            goto out;
        }
    }
    if (c.json) {
        json_t *o = p != NULL ? json_incref(p)
                              : json_pack("{s:s, s:I, s:b}", "function", name, "version",
                                          (json_int_t)version, "accepted", 1);
        rc = o != NULL ? gf_cli_print_json(&c, o) : 1;
        json_decref(o);
    } else if (p != NULL) {
        char size[32];
        gf_cli_fmt_size((uint64_t)gf_cli_json_int(p, "bytes", 0), size, sizeof size);
        printf("loaded %s version %lld on worker %lld (device, %s)\n", name, version,
               gf_cli_json_int(p, "worker", -1), size);
        rc = 0;
    } else {
        printf("load of %s version %lld accepted%s\n", name, version,
               worker >= 0 ? " for that worker" : "");
        rc = 0;
    }
    json_decref(p);
out:
    gf_cli_client_deinit(&c);
    return rc;
}

static int unload_run(gf_cli_client *c, const char **pos, int n)
{
    if (n == 0) {
        unload_usage(stderr);
        return 2;
    }
    const char *name = pos[0];
    if (!gf_cli_name_ok(c, name))
        return 1;
    char path[160];
    snprintf(path, sizeof path, "/v2/repository/models/%s/unload", name);
    gf_cli_resp r;
    gf_cli_resp_init(&r);
    int st = gf_cli_call(c, "POST", path, "application/json", "", 0, &r);
    gf_cli_resp_deinit(&r);
    if (st != 0)
        return 1;
    if (!c->json) {
        printf("unloaded %s from every worker\n", name);
        return 0;
    }
    json_t *o = json_pack("{s:s, s:b}", "function", name, "unloaded", 1);
    int rc = o != NULL ? gf_cli_print_json(c, o) : 1;
    json_decref(o);
    return rc;
}

int gf_cmd_unload(int argc, char **argv)
{
    return gf_cli_run_simple("unload", argc, argv, unload_usage, 1, unload_run);
}
