/* gpufaas — the `gpufaas` command: dispatch to subcommands. */
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "gateway/cli/cli.h"
#include "gateway/cli/client.h"
#include "gf_config.h"

/* The subcommand table: one line each, in the order `gpufaas --help` lists them. */
static const struct {
    const char *name;
    gf_cli_fn fn;
    const char *summary;
} gf_commands[] = {
    {"serve", gf_cmd_serve, "run the gateway: workers, the HTTP APIs, /metrics"},
    {"deploy", gf_cmd_deploy, "upload a function: weights and manifest (progress on a terminal)"},
    {"invoke", gf_cmd_invoke, "run a function on JSON or .npy input and print its outputs"},
    {"ls", gf_cmd_ls, "list functions: versions, kind, size, state, where placed"},
    {"rm", gf_cmd_rm, "delete functions, or one version of a function"},
    {"activate", gf_cmd_activate, "make a version the one served: roll back or forward"},
    {"ps", gf_cmd_ps, "list workers: device, state, memory per tier, resident models"},
    {"load", gf_cmd_load, "load a function onto a worker's device"},
    {"unload", gf_cmd_unload, "evict a function from every worker"},
    {"top", gf_cmd_top, "a live view: memory per tier, requests/s and p99, swaps"},
    {"fsck", gf_cmd_fsck, "check every version's weights file against its recorded SHA-256"},
    {"version", gf_cmd_version, "print the version and the backends this build has"},
    {"inspect", gf_cmd_inspect, "list the tensors and metadata of a safetensors file"},
    {"mkmodel", gf_cmd_mkmodel, "write random weights and a manifest for a built-in kind"},
};

#define GF_NCOMMANDS (sizeof gf_commands / sizeof gf_commands[0])

bool gf_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return false;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return true;
    }
    return false;
}

int gf_cli_run_simple(const char *cmd, int argc, char **argv, void (*usage)(FILE *), int max_pos,
                      int (*run)(gf_cli_client *c, const char **pos, int n_pos))
{
    if (gf_cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    gf_cli_client c;
    gf_cli_client_init(&c, cmd);
    const char *pos[4];
    int n_pos = 0;
    int rc = gf_cli_parse_simple(&c, argc, argv, usage, pos, max_pos < 4 ? max_pos : 4, &n_pos);
    if (rc == 0)
        rc = run(&c, pos, n_pos);
    gf_cli_client_deinit(&c);
    return rc;
}

static void gf_usage(FILE *out)
{
    fprintf(out, "usage: gpufaas <command> [options]\n\n"
                 "gpufaas %s: a serverless GPU inference runtime.\n\ncommands:\n",
            GF_VERSION);
    for (size_t i = 0; i < GF_NCOMMANDS; i++)
        fprintf(out, "  %-10s %s\n", gf_commands[i].name, gf_commands[i].summary);
    fprintf(out, "\nRun 'gpufaas <command> --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
    gf_log_init("cli", GF_LOG_DEFAULT);
    if (argc < 2) {
        gf_usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        gf_usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0)
        return gf_cmd_version(1, argv + 1);
    for (size_t i = 0; i < GF_NCOMMANDS; i++)
        if (strcmp(argv[1], gf_commands[i].name) == 0)
            return gf_commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "gpufaas: unknown command '%s'\n\n", argv[1]);
    gf_usage(stderr);
    return 2;
}
