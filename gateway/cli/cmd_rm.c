/* gpufaas rm NAME... — delete functions (DELETE /v1/functions/NAME, admin). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/cli/cli.h"
#include "gateway/cli/client.h"

static void rm_usage(FILE *out)
{
    fprintf(out, "usage: gpufaas rm NAME... [options]\n\n"
                 "Delete functions: unload them from every worker and remove their weights.\n"
                 "Their history stays in the server's database. An admin call: it needs the\n"
                 "token when the server has one. Every NAME is tried; the exit status is 1\n"
                 "when any of them failed.\n\n");
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
    rc = gf_cli_parse_simple(&c, argc, argv, rm_usage, names, argc, &n_names);
    if (rc != 0)
        goto out;
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
        char path[128];
        snprintf(path, sizeof path, "/v1/functions/%s", name);
        json_t *j = gf_cli_call_json(&c, "DELETE", path, NULL, NULL, 0);
        if (j == NULL) {
            rc = 1;
            continue;
        }
        if (c.json)
            gf_cli_print_json(&c, j);
        else
            printf("deleted %s\n", name);
        json_decref(j);
    }
out:
    free(names);
    gf_cli_client_deinit(&c);
    return rc;
}
