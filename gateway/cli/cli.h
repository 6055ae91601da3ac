/* gpufaas — the `gpufaas` command: subcommand entry points (gateway/cli). */
#ifndef GF_GATEWAY_CLI_H
#define GF_GATEWAY_CLI_H

#include <stdbool.h>
#include <stdio.h>

/* Every subcommand has this shape: argv[0] is the subcommand's name. Returns
 * the process exit status (0 success, 1 failure, 2 usage error). */
typedef int (*gf_cli_fn)(int argc, char **argv);

int gf_cmd_version(int argc, char **argv);
int gf_cmd_inspect(int argc, char **argv);
int gf_cmd_mkmodel(int argc, char **argv);
int gf_cmd_serve(int argc, char **argv);
/* The client commands (they talk to a server over HTTP; gateway/cli/client.h). */
int gf_cmd_deploy(int argc, char **argv);
int gf_cmd_invoke(int argc, char **argv);
int gf_cmd_ls(int argc, char **argv);
int gf_cmd_rm(int argc, char **argv);
int gf_cmd_ps(int argc, char **argv);
int gf_cmd_load(int argc, char **argv);
int gf_cmd_unload(int argc, char **argv);
int gf_cmd_top(int argc, char **argv);
int gf_cmd_activate(int argc, char **argv);
int gf_cmd_fsck(int argc, char **argv);

/* True when argv holds -h or --help (before a "--"). */
bool gf_cli_wants_help(int argc, char **argv);

struct gf_cli_client;

/* The frame of a client command that takes only the common options and at
 * most max_pos (<= 4) positionals: -h/--help prints usage(stdout) and
 * returns 0; otherwise a client named cmd (static) parses argv
 * (gf_cli_parse_simple: 2 on a usage error) and run(c, pos, n_pos) gives
 * the exit status; the client is freed afterwards either way. */
int gf_cli_run_simple(const char *cmd, int argc, char **argv, void (*usage)(FILE *), int max_pos,
                      int (*run)(struct gf_cli_client *c, const char **pos, int n_pos));

#endif /* GF_GATEWAY_CLI_H */
