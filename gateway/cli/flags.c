/* gpufaas — the command line's option tables: parsing and --help. */
#include "gateway/cli/flags.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static void flag_error(const gf_cli_cmd *cmd, gf_cli_client *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void flag_error(const gf_cli_cmd *cmd, gf_cli_client *c, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c != NULL)
        gf_cli_errorf(c, "%s", msg);
    else
        fprintf(stderr, "gpufaas %s: %s\n", cmd->name, msg);
}

/* The flag argv[i] names ("--name", "--name=v", "-a"), or -1; *eq is the
 * value after '=' when there is one. */
static int find_flag(const gf_cli_cmd *cmd, const char *a, const char **eq)
{
    *eq = NULL;
    if (a[0] == '-' && a[1] != '-' && a[1] != '\0' && a[2] == '\0') {
        for (size_t k = 0; k < cmd->n_flags; k++)
            if (cmd->flags[k].alias == a[1])
                return (int)k;
        return -1;
    }
    if (strncmp(a, "--", 2) != 0)
        return -1;
    const char *name = a + 2, *e = strchr(name, '=');
    size_t n = e != NULL ? (size_t)(e - name) : strlen(name);
    for (size_t k = 0; k < cmd->n_flags; k++) {
        if (strlen(cmd->flags[k].name) == n && strncmp(cmd->flags[k].name, name, n) == 0) {
            *eq = e != NULL ? e + 1 : NULL;
            return (int)k;
        }
    }
    return -1;
}

int gf_cli_parse(const gf_cli_cmd *cmd, gf_cli_client *c, gf_cli_val *vals, int argc, char **argv,
                 const char **pos, int max_pos, int *n_pos)
{
    memset(vals, 0, cmd->n_flags * sizeof *vals);
    *n_pos = 0;
    bool options = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options && strcmp(a, "--") == 0) {
            options = false;
            continue;
        }
        if (options && c != NULL) {
            int r = gf_cli_client_opt(c, argc, argv, &i);
            if (r < 0)
                return 2;
            if (r > 0)
                continue;
        }
        const char *eq;
        int k = options ? find_flag(cmd, a, &eq) : -1;
        if (k < 0 && options && a[0] == '-' && a[1] != '\0') {
            flag_error(cmd, c, "unknown option '%s'", a);
            cmd->usage(stderr);
            return 2;
        }
        if (k < 0) {
            if (*n_pos == max_pos) {
                flag_error(cmd, c, "unexpected argument '%s'", a);
                cmd->usage(stderr);
                return 2;
            }
            pos[(*n_pos)++] = a;
            continue;
        }
        const gf_cli_flag *f = &cmd->flags[k];
        const char *v = "1";
        if (f->arg == NULL && eq != NULL) {
            flag_error(cmd, c, "--%s takes no value", f->name);
            return 2;
        }
        if (f->arg != NULL) {
            if (eq != NULL) {
                v = eq;
            } else if (i + 1 < argc) {
                v = argv[++i];
            } else {
                flag_error(cmd, c, "--%s needs a value", f->name);
                return 2;
            }
        }
        gf_cli_val *val = &vals[k];
        if (f->repeat > 0) {
            if (val->n == f->repeat || val->n == GF_CLI_MAX_REPEAT) {
                flag_error(cmd, c, "at most %d --%s", val->n, f->name); /* the limit */
                return 2;
            }
            val->all[val->n] = v;
        }
        val->n++;
        val->v = v;
    }
    return 0;
}

static void usage_lines(FILE *out, const gf_cli_cmd *cmd, bool all, unsigned tag)
{
    for (size_t k = 0; k < cmd->n_flags; k++) {
        const gf_cli_flag *f = &cmd->flags[k];
        if (!all && f->tag != tag)
            continue;
        char left[64];
        if (f->alias != 0)
            snprintf(left, sizeof left, "-%c, --%s%s%s", f->alias, f->name, f->arg ? " " : "",
                     f->arg ? f->arg : "");
        else
            snprintf(left, sizeof left, "--%s%s%s", f->name, f->arg ? " " : "",
                     f->arg ? f->arg : "");
        fprintf(out, "  %-22s", left);
        if (strlen(left) > 21)
            fprintf(out, "\n  %-22s", "");
        for (const char *h = f->help; *h != '\0'; h++) {
            if (*h == '\n')
                fprintf(out, "\n  %-22s", "");
            else
                fputc(*h, out);
        }
        fputc('\n', out);
    }
}

void gf_cli_flags_usage(FILE *out, const gf_cli_cmd *cmd)
{
    usage_lines(out, cmd, true, 0);
}

void gf_cli_flags_usage_tag(FILE *out, const gf_cli_cmd *cmd, unsigned tag)
{
    usage_lines(out, cmd, false, tag);
}

bool gf_cli_flag_int(const gf_cli_cmd *cmd, gf_cli_client *c, size_t i, const gf_cli_val *vals,
                     long long lo, long long hi, const char *what, long long *out)
{
    if (vals[i].v == NULL)
        return true;
    if (gf_cli_parse_int(vals[i].v, lo, hi, out))
        return true;
    if (what != NULL)
        flag_error(cmd, c, "--%s: '%s' is not %s", cmd->flags[i].name, vals[i].v, what);
    else
        flag_error(cmd, c, "--%s: '%s' is not an integer in %lld..%lld", cmd->flags[i].name,
                   vals[i].v, lo, hi);
    return false;
}

bool gf_cli_flag_num(const gf_cli_cmd *cmd, gf_cli_client *c, size_t i, const gf_cli_val *vals,
                     double lo, bool lo_open, double hi, const char *what, double *out)
{
    const char *s = vals[i].v;
    if (s == NULL)
        return true;
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    bool ok = end != s && *end == '\0' && errno == 0 && (lo_open ? d > lo : d >= lo) && d <= hi;
    if (ok) {
        *out = d;
        return true;
    }
    flag_error(cmd, c, "--%s: '%s' is not %s", cmd->flags[i].name, s,
               what != NULL ? what : "a number in range");
    return false;
}
