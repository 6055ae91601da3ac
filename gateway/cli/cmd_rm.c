/* gpufaas rm NAME... — delete functions (DELETE /v1/functions/NAME, admin),
 * or one version: gpufaas rm NAME --version V (DELETE
 * /v1/functions/NAME/versions/V). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/cli/cli.h"
#include "gateway/cli/client.h"

static void rm_usage(FILE *out)
{
    fprintf(out, "usage: gpufaas rm NAME... [options]\n"
                 "       gpufaas rm NAME --version V [options]\n\n"
                 "Delete functions: unload them from every worker and remove their weights.\n"
                 "Their history stays in the server's database, and the name is free again:\n"
                 "a new deploy of it continues its version numbers. With --version, delete\n"
                 "that one version (not the current one while others exist: 'gpufaas\n"
                 "activate' another first; the only one deletes the function). An admin call:\n"
                 "it needs the token when the server has one. Every NAME is tried; the exit\n"
                 "status is 1 when any of them failed.\n\n"
                 "options:\n"
                 "  --version V   delete version V of NAME only\n\n");
    gf_cli_common_usage(out);
}

int gf_cmd_rm(int argc, char **argv)
{
    if (gf_cli_wants_help(argc, argv)) {
        rm_usage(stdout);
        return 0;
    }
    gf_cli_client c;
    gf_cli_client_init(&c, "rm");
    const char **names = calloc((size_t)argc, sizeof *names);
    int n_names = 0, rc = 1;
    if (names == NULL) {
        gf_cli_errorf(&c, "out of memory");
        goto out;
    }
    /* --version V is rm's own option; the rest are the common ones */
    const char *version_s = NULL;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    int n_rest = 0;
    rc = rest == NULL ? 1 : 0;
    for (int i = 0; rc == 0 && i < argc; i++) {
        const char *v = NULL;
        int t = i > 0 ? gf_cli_take(&c, argc, argv, &i, "version", &v) : 0;
        if (t < 0)
            rc = 2;
        else if (t == 0)
            rest[n_rest++] = argv[i];
        else
            version_s = v;
    }
    if (rc == 0)
        rc = gf_cli_parse_simple(&c, n_rest, rest, rm_usage, names, argc, &n_names);
    free(rest);
    if (rc != 0)
        goto out;
    long long version = 0;
    if (version_s != NULL && !gf_cli_parse_int(version_s, 1, (long long)1 << 62, &version)) {
        gf_cli_errorf(&c, "--version: '%s' is not a positive integer", version_s);
        rc = 2;
        goto out;
    }
    if (version_s != NULL && n_names != 1) {
        gf_cli_errorf(&c, "--version deletes a version of one function: give one NAME");
        rc = 2;
        goto out;
    }
    if (n_names == 0) {
        rm_usage(stderr);
        rc = 2;
        goto out;
    }
    rc = 0;
    for (int k = 0; k < n_names; k++) {
        const char *name = names[k];
        if (!gf_cli_name_ok(&c, name)) {
            rc = 1;
            continue;
        }
        char path[160];
        if (version > 0)
            snprintf(path, sizeof path, "/v1/functions/%s/versions/%lld", name, version);
        else
            snprintf(path, sizeof path, "/v1/functions/%s", name);
        json_t *j = gf_cli_call_json(&c, "DELETE", path, NULL, NULL, 0);
        if (j == NULL) {
            rc = 1;
            continue;
        }
        if (c.json)
            gf_cli_print_json(&c, j);
        else if (version > 0)
            printf("deleted %s version %lld\n", name, version);
        else
            printf("deleted %s\n", name);
        json_decref(j);
    }
out:
    free(names);
    gf_cli_client_deinit(&c);
    return rc;
}
