/* gpufaas ps — the worker processes (GET /v1/workers): device, state, memory
 * used and budget per tier, and the models each one holds. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "gateway/cli/cli.h"
#include "gateway/cli/client.h"

static void ps_usage(FILE *out)
{
    fprintf(out, "usage: gpufaas ps [options]\n\n"
                 "List the server's workers: id, device, state, pid, device and host memory\n"
                 "(used / budget), requests in flight, restarts, and the models resident in\n"
                 "each (FUNCTION:VERSION and the tiers it has a copy in: device, host).\n\n");
    gf_cli_common_usage(out);
}

/* "2.0 MiB / 4.0 MiB" from {"used", "budget"}. */
static void mem_str(const json_t *m, char *buf, size_t cap)
{
    char used[32], budget[32];
    gf_cli_fmt_size((uint64_t)gf_cli_json_int(m, "used", 0), used, sizeof used);
    gf_cli_fmt_size((uint64_t)gf_cli_json_int(m, "budget", 0), budget, sizeof budget);
    snprintf(buf, cap, "%s / %s", used, budget);
}

static int ps_run(gf_cli_client *c, const char **pos, int n_pos)
{
    (void)pos;
    (void)n_pos;
    json_t *j = gf_cli_get_json(c, "/v1/workers");
    if (j == NULL)
        return 1;
    if (c->json) {
        int rc = gf_cli_print_json(c, j);
        json_decref(j);
        return rc;
    }
    gf_cli_table t;
    gf_cli_table_init(&t, 9);
    gf_cli_table_row(&t, "ID", "DEVICE", "STATE", "PID", "DEVICE MEMORY", "HOST MEMORY",
                     "IN FLIGHT", "RESTARTS", "MODELS");
    const json_t *ws = json_object_get(j, "workers");
    for (size_t i = 0; i < json_array_size(ws); i++) {
        const json_t *w = json_array_get(ws, i);
        char id[24], pid[24], dev[80], host[80], infl[24], rest[24], models[1024];
        snprintf(id, sizeof id, "%lld", gf_cli_json_int(w, "id", -1));
        snprintf(pid, sizeof pid, "%lld", gf_cli_json_int(w, "pid", 0));
        snprintf(infl, sizeof infl, "%lld", gf_cli_json_int(w, "in_flight", 0));
        snprintf(rest, sizeof rest, "%lld", gf_cli_json_int(w, "restarts", 0));
        mem_str(json_object_get(w, "device_memory"), dev, sizeof dev);
        mem_str(json_object_get(w, "host_memory"), host, sizeof host);
        size_t off = 0;
        const json_t *ms = json_object_get(w, "models");
        models[0] = '\0';
        /* one entry per copy, a version's copies together: "pin:1 (device, host)" */
        for (size_t k = 0; k < json_array_size(ms); k++) {
            const json_t *m = json_array_get(ms, k), *prev = k ? json_array_get(ms, k - 1) : NULL;
            const char *fn = gf_cli_json_str(m, "function", "?");
            const char *tier = gf_cli_json_str(m, "tier", "?");
            long long ver = gf_cli_json_int(m, "version", 0);
            bool same = prev != NULL && strcmp(gf_cli_json_str(prev, "function", ""), fn) == 0 &&
                        gf_cli_json_int(prev, "version", 0) == ver;
            /* the same version's next tier goes inside its parentheses */
            size_t at = same ? off - 1 : off;
            char keep = models[at];
            models[at] = '\0';
            if (!(same ? gf_cli_appendf(models, sizeof models, &at, ", %s)", tier)
                       : gf_cli_appendf(models, sizeof models, &at, "%s%s:%lld (%s)",
                                        k ? ", " : "", fn, ver, tier))) {
                models[at] = keep;
                break;
            }
            off = at;
        }
        gf_cli_table_row(&t, id, gf_cli_json_str(w, "device", "?"),
                         gf_cli_json_str(w, "state", "?"), pid, dev, host, infl, rest,
                         off > 0 ? models : "-");
    }
    int rc = gf_cli_table_print(&t, c, stdout);
    gf_cli_table_deinit(&t);
    json_decref(j);
    return rc;
}

int gf_cmd_ps(int argc, char **argv)
{
    return gf_cli_run_simple("ps", argc, argv, ps_usage, 0, ps_run);
}
