/* gpufaas activate NAME VERSION and gpufaas fsck — a function's versions and
 * the function store's files (admin calls): make a version the one served
 * (POST /v1/functions/NAME/versions/V/activate), and check every version's
 * weights file against the SHA-256 recorded at publish (POST /v1/fsck).
 * Deleting one version is `gpufaas rm NAME --version V`. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "gateway/cli/cli.h"
#include "gateway/cli/client.h"

static void activate_usage(FILE *out)
{
    fprintf(out, "usage: gpufaas activate NAME VERSION [options]\n\n"
                 "Make VERSION the version of function NAME that is served: roll back to an\n"
                 "older one, or forward again. Requests from now on get it; those in flight\n"
                 "finish on theirs. A broken version cannot be activated. An admin call.\n"
                 "'gpufaas ls NAME' lists the versions.\n\n");
    gf_cli_common_usage(out);
}

static void fsck_usage(FILE *out)
{
    fprintf(out, "usage: gpufaas fsck [options]\n\n"
                 "Read every deployed version's weights file and compare its SHA-256 with the\n"
                 "one recorded when it was deployed. A version whose file is missing or does\n"
                 "not match is marked broken (with the reason, in the server's database) and\n"
                 "is no longer served; deploy it again to repair it. Takes as long as reading\n"
                 "every file. Exits 1 when a version is broken. An admin call.\n\n");
    gf_cli_common_usage(out);
}

/* "1, 2, 4 (current 4)" from a GET /v1/functions/NAME answer, into buf. */
static void versions_str(const json_t *f, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    const json_t *vs = json_object_get(f, "versions");
    for (size_t i = 0; i < json_array_size(vs); i++) {
        const json_t *v = json_array_get(vs, i);
        bool ready = strcmp(gf_cli_json_str(v, "state", ""), "ready") == 0;
        if (!gf_cli_appendf(buf, cap, &off, "%s%lld%s", i ? ", " : "",
                            gf_cli_json_int(v, "version", 0), ready ? "" : " (broken)"))
            break;
    }
}

static int activate_run(gf_cli_client *c, const char **pos, int n)
{
    long long version = 0;
    if (n != 2) {
        activate_usage(stderr);
        return 2;
    }
    if (!gf_cli_parse_int(pos[1], 1, (long long)1 << 62, &version)) {
        gf_cli_errorf(c, "VERSION '%s' is not a positive integer", pos[1]);
        return 2;
    }
    if (!gf_cli_name_ok(c, pos[0]))
        return 1;
    char path[160];
    snprintf(path, sizeof path, "/v1/functions/%s/versions/%lld/activate", pos[0], version);
    json_t *j = gf_cli_call_json(c, "POST", path, NULL, NULL, 0);
    if (j == NULL)
        return 1;
    int rc = 0;
    if (c->json) {
        rc = gf_cli_print_json(c, j);
    } else {
        char list[256];
        versions_str(j, list, sizeof list);
        printf("%s version %lld is current (versions: %s)\n", pos[0], version, list);
    }
    json_decref(j);
    return rc;
}

int gf_cmd_activate(int argc, char **argv)
{
    return gf_cli_run_simple("activate", argc, argv, activate_usage, 2, activate_run);
}

static int fsck_run(gf_cli_client *c, const char **pos, int n)
{
    (void)pos;
    (void)n;
    json_t *j = gf_cli_call_json(c, "POST", "/v1/fsck", NULL, NULL, 0);
    if (j == NULL)
        return 1;
    int rc;
    const json_t *broken = json_object_get(j, "broken");
    if (c->json) {
        rc = gf_cli_print_json(c, j);
    } else {
        char size[32];
        gf_cli_fmt_size((uint64_t)gf_cli_json_int(j, "bytes", 0), size, sizeof size);
        printf("checked %lld version(s): %s read in %.1f s, %zu broken\n",
               gf_cli_json_int(j, "checked", 0), size,
               json_number_value(json_object_get(j, "seconds")), json_array_size(broken));
        for (size_t i = 0; i < json_array_size(broken); i++) {
            const json_t *b = json_array_get(broken, i);
            printf("  broken: %s version %lld: %s\n", gf_cli_json_str(b, "function", "?"),
                   gf_cli_json_int(b, "version", 0), gf_cli_json_str(b, "reason", "?"));
        }
        rc = 0;
    }
    if (rc == 0 && json_array_size(broken) > 0)
        rc = 1;
    json_decref(j);
    return rc;
}

int gf_cmd_fsck(int argc, char **argv)
{
    return gf_cli_run_simple("fsck", argc, argv, fsck_usage, 0, fsck_run);
}
