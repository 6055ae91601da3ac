/* gpufaas ls [NAME] — the deployed functions (GET /v1/functions), or one
 * function's versions in full (GET /v1/functions/NAME). */
#include <stdio.h>
#include <string.h>

#include "gateway/cli/cli.h"
#include "gateway/cli/client.h"

static void ls_usage(FILE *out)
{
    fprintf(out, "usage: gpufaas ls [NAME] [options]\n\n"
                 "List the deployed functions: name, current version, all versions, kind, size\n"
                 "of the weights, state, and where the current version is placed (worker and\n"
                 "tier). With NAME, every version of that function in full: inputs, outputs,\n"
                 "sha256 and placements.\n\n");
    gf_cli_common_usage(out);
}

/* "w0:device w1:host", or "-" when the array is empty. */
static void placed_str(const json_t *placements, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < json_array_size(placements); i++) {
        const json_t *p = json_array_get(placements, i);
        if (!gf_cli_appendf(buf, cap, &off, "%sw%lld:%s", i > 0 ? " " : "",
                            gf_cli_json_int(p, "worker", -1), gf_cli_json_str(p, "tier", "?")))
            break;
    }
    if (off == 0)
        snprintf(buf, cap, "-");
}

/* "pin high warm:30s (api)": what the residency keeps, "-" for the
 * defaults (not pinned, normal priority, no keep-warm time). */
static void residency_str(const json_t *res, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    if (json_is_true(json_object_get(res, "pin")))
        off += (size_t)snprintf(buf + off, cap - off, "pin");
    const char *pr = gf_cli_json_str(res, "priority", "normal");
    if (strcmp(pr, "normal") != 0 && off + 1 < cap)
        off += (size_t)snprintf(buf + off, cap - off, "%s%s", off ? " " : "", pr);
    double kw = json_number_value(json_object_get(res, "keep_warm_s"));
    if (kw > 0 && off + 1 < cap)
        off += (size_t)snprintf(buf + off, cap - off, "%swarm:%gs", off ? " " : "", kw);
    if (off == 0)
        snprintf(buf, cap, "-");
    else if (off + 1 < cap && strcmp(gf_cli_json_str(res, "source", ""), "api") == 0)
        snprintf(buf + off, cap - off, " (api)");
}

static int ls_all(gf_cli_client *c)
{
    json_t *j = gf_cli_get_json(c, "/v1/functions");
    if (j == NULL)
        return 1;
    int rc = 0;
    json_t *fns = json_object_get(j, "functions");
    if (c->json) {
        rc = gf_cli_print_json(c, j);
    } else if (json_array_size(fns) == 0) {
        printf("no functions deployed (gpufaas deploy NAME --kind KIND --weights FILE ...)\n");
    } else {
        gf_cli_table t;
        gf_cli_table_init(&t, 9);
        gf_cli_table_row(&t, "NAME", "VERSION", "VERSIONS", "KIND", "SIZE", "STATE", "SLO",
                         "RESIDENCY", "PLACED");
        for (size_t i = 0; i < json_array_size(fns); i++) {
            const json_t *f = json_array_get(fns, i);
            char ver[24], vers[256], size[32], placed[512], slo[32], res[96];
            long long v = gf_cli_json_int(f, "version", -1);
            snprintf(ver, sizeof ver, v >= 0 ? "%lld" : "-", v);
            size_t off = 0;
            const json_t *vs = json_object_get(f, "versions");
            vers[0] = '\0';
            for (size_t k = 0; k < json_array_size(vs) && off + 24 < sizeof vers; k++)
                off += (size_t)snprintf(vers + off, sizeof vers - off, "%s%lld", k ? "," : "",
                                        (long long)json_integer_value(json_array_get(vs, k)));
            json_t *bytes = json_object_get(f, "bytes");
            if (json_is_integer(bytes))
                gf_cli_fmt_size((uint64_t)json_integer_value(bytes), size, sizeof size);
            else
                snprintf(size, sizeof size, "-");
            placed_str(json_object_get(f, "placements"), placed, sizeof placed);
            json_t *sj = json_object_get(f, "slo_ms");
            if (json_is_number(sj))
                snprintf(slo, sizeof slo, "%gms", json_number_value(sj));
            else
                snprintf(slo, sizeof slo, "-");
            residency_str(json_object_get(f, "residency"), res, sizeof res);
            gf_cli_table_row(&t, gf_cli_json_str(f, "name", "?"), ver, vers[0] ? vers : "-",
                             gf_cli_json_str(f, "kind", "?"), size,
                             gf_cli_json_str(f, "state", "?"), slo, res, placed);
        }
        rc = gf_cli_table_print(&t, c, stdout);
        gf_cli_table_deinit(&t);
    }
    json_decref(j);
    return rc;
}

static void print_io(const char *what, const json_t *io)
{
    for (size_t i = 0; i < json_array_size(io); i++) {
        const json_t *t = json_array_get(io, i);
        char shape[128];
        printf("    %-8s %s %s %s\n", i == 0 ? what : "", gf_cli_json_str(t, "name", "?"),
               gf_cli_json_str(t, "datatype", "?"),
               gf_cli_fmt_shape(json_object_get(t, "shape"), shape, sizeof shape));
    }
}

static int ls_one(gf_cli_client *c, const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/functions/%s", name);
    json_t *f = gf_cli_get_json(c, path);
    if (f == NULL)
        return 1;
    if (c->json) {
        int rc = gf_cli_print_json(c, f);
        json_decref(f);
        return rc;
    }
    long long cur = gf_cli_json_int(f, "version", -1);
    printf("%s  kind %s  ", gf_cli_json_str(f, "name", name), gf_cli_json_str(f, "kind", "?"));
    if (cur >= 0)
        printf("current version %lld\n", cur);
    else
        printf("no current version\n");
    const json_t *res = json_object_get(f, "residency");
    if (res != NULL) {
        char rs[96];
        residency_str(res, rs, sizeof rs);
        printf("  residency %s\n", rs);
    }
    const json_t *vs = json_object_get(f, "versions");
    for (size_t i = 0; i < json_array_size(vs); i++) {
        const json_t *v = json_array_get(vs, i);
        char size[32], placed[512];
        json_t *b = json_object_get(v, "bytes");
        gf_cli_fmt_size(json_is_integer(b) ? (uint64_t)json_integer_value(b) : 0, size,
                        sizeof size);
        printf("  version %lld%s  %s  %s  sha256 %.12s\n", gf_cli_json_int(v, "version", 0),
               json_is_true(json_object_get(v, "current")) ? " (current)" : "",
               gf_cli_json_str(v, "state", "?"), size, gf_cli_json_str(v, "sha256", "?"));
        const char *reason = gf_cli_json_str(v, "reason", NULL);
        if (reason != NULL)
            printf("    reason   %s\n", reason);
        print_io("inputs", json_object_get(v, "inputs"));
        print_io("outputs", json_object_get(v, "outputs"));
        printf("    %-8s %lld\n", "batch", gf_cli_json_int(v, "max_batch_size", 1));
        placed_str(json_object_get(v, "placements"), placed, sizeof placed);
        printf("    %-8s %s\n", "placed", placed);
    }
    printf("  invoke: gpufaas invoke %s --data JSON   (POST %s%s)\n", name, c->server,
           gf_cli_json_str(f, "invoke", ""));
    json_decref(f);
    return 0;
}

static int ls_run(gf_cli_client *c, const char **pos, int n_pos)
{
    if (n_pos == 0)
        return ls_all(c);
    return gf_cli_name_ok(c, pos[0]) ? ls_one(c, pos[0]) : 1;
}

int gf_cmd_ls(int argc, char **argv)
{
    return gf_cli_run_simple("ls", argc, argv, ls_usage, 1, ls_run);
}
