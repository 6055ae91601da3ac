/* What gateway_cli_client's files share (test_cli_client.c defines it): one
 * `gpufaas serve` started in Check's parent process (two cpu workers, an
 * admin token), and running the gpufaas command against it. */
#ifndef GF_TESTS_GATEWAY_CLI_CLIENT_LIB_H
#define GF_TESTS_GATEWAY_CLI_CLIENT_LIB_H

#include <check.h>
#include <string.h>

/* The server's base URL ("http://127.0.0.1:PORT"). */
const char *cc_server_url(void);

/* Run gpufaas ARGS... (NULL-terminated) with --server URL --token TOKEN
 * added; captures stdout and stderr into *out, *err (free both with
 * cc_freeboth). Returns the exit status. */
int cc_cli(char **out, char **err, ...);
void cc_freeboth(char **out, char **err);

/* The last 3000 bytes of s: what fits in a Check message. */
const char *cc_tail3k(const char *s);

/* The output s holds / does not hold the text. */
#define HAS(s, want) \
    ck_assert_msg(strstr((s), (want)) != NULL, "no '%s' in:\n%s", (want), cc_tail3k(s))
#define HASNT(s, bad) \
    ck_assert_msg(strstr((s), (bad)) == NULL, "'%s' in:\n%s", (bad), cc_tail3k(s))

/* Deploy the 4x4 identity (mlp) as name: version 1 on a fresh name. */
void cc_deploy_identity(const char *name);

/* `top`'s tests (test_cli_top.c). */
void cc_top_tests(TCase *tc);

#endif
