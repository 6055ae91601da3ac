/* gpufaas — the command line's options, declared once (gateway/cli).
 *
 * A command lists its options in one table; the same table parses argv and
 * prints the option lines of --help, so the two cannot disagree (gpufaas
 * serve's own table does the same for its environment variables too).
 * Values stay text here: a command turns them into numbers with
 * gf_cli_flag_int / gf_cli_flag_num, which name the option in their
 * messages.
 */
#ifndef GF_GATEWAY_CLI_FLAGS_H
#define GF_GATEWAY_CLI_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "gateway/cli/client.h"

#define GF_CLI_MAX_REPEAT 256/* values one repeatable option may collect */

typedef struct gf_cli_flag {
    const char *name; /* without "--" */
    char alias;       /* a one-letter form ('q' for -q); 0 = none */
    const char *arg;  /* the value's name in --help ("FILE"); NULL: a switch */
    int repeat;       /* 0: once (the last one given wins); N: up to N values, kept in order */
    const char *help; /* what --help says (continuation lines start with '\n') */
    unsigned tag;     /* the command's own grouping (mkmodel: the kinds a flag applies to) */
} gf_cli_flag;

/* What the command line said for one option. */
typedef struct gf_cli_val {
    int n;                                /* times given */
    const char *v;                        /* the last value; "1" for a switch; NULL if absent */
    const char *all[GF_CLI_MAX_REPEAT];   /* every value, in order (repeatable options) */
} gf_cli_val;

typedef struct gf_cli_cmd {
    const char *name;               /* "deploy", for messages */
    const gf_cli_flag *flags;
    size_t n_flags;
    void (*usage)(FILE *out);       /* printed to stderr after a usage error */
} gf_cli_cmd;

/* Parse argv (argv[0] is the command) against cmd's flags: vals[i] (n_flags
 * of them, zeroed first) gets flags[i]'s values, pos the positionals (at most
 * max_pos, *n_pos of them; "--" ends the options). "--name value" and
 * "--name=value" both work. With a client c, its common options (--server,
 * --token, --json) are taken too and messages go through it; c may be NULL.
 * Returns 0, or 2 after reporting a usage error (an unknown option, a missing
 * value, too many values or arguments) and printing cmd->usage(stderr). */
int gf_cli_parse(const gf_cli_cmd *cmd, gf_cli_client *c, gf_cli_val *vals, int argc, char **argv,
                 const char **pos, int max_pos, int *n_pos);

/* The option lines of --help, from the table. */
void gf_cli_flags_usage(FILE *out, const gf_cli_cmd *cmd);
/* Only the flags whose tag is `tag`. */
void gf_cli_flags_usage_tag(FILE *out, const gf_cli_cmd *cmd, unsigned tag);

/* The value of an option given (vals[i].v) as an integer in [lo, hi] into
 * *out; false after reporting "--name: 'x' is not an integer in lo..hi"
 * (what, when not NULL, replaces "an integer in lo..hi"). */
bool gf_cli_flag_int(const gf_cli_cmd *cmd, gf_cli_client *c, size_t i, const gf_cli_val *vals,
                     long long lo, long long hi, const char *what, long long *out);

/* The same for a number in (lo, hi] (lo_open) or [lo, hi]. */
bool gf_cli_flag_num(const gf_cli_cmd *cmd, gf_cli_client *c, size_t i, const gf_cli_val *vals,
                     double lo, bool lo_open, double hi, const char *what, double *out);

#endif /* GF_GATEWAY_CLI_FLAGS_H */
