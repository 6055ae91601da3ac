/* The fixture of the suites that run a real server (see hhfixture.h). */
#include "hhfixture.h"

#include <check.h>
#include <stddef.h>

#include "testutil.h"

#define LOG_TAIL 6000 /* bytes of the server's log printed on a failure */
#define MAX_ARGS 64

const char *const gf_hf_cpu2[] = {"--devices",       "cpu:2", "--device-memory", "256M",
                                  "--host-memory", "256M",  NULL};

void gf_hf_setup(gf_hh_server *s, char **dir)
{
    *dir = gf_test_tmpdir();
    gf_hh_server_init(s, *dir);
}

static size_t add_args(const char **all, size_t n, const char *const *args)
{
    for (size_t i = 0; args != NULL && args[i] != NULL; i++) {
        ck_assert_msg(n < MAX_ARGS - 1, "more than %d arguments for gpufaas serve", MAX_ARGS - 1);
        all[n++] = args[i];
    }
    return n;
}

void gf_hf_start(gf_hh_server *s, const char *const *base, const char *const *extra,
                 int timeout_s)
{
    const char *all[MAX_ARGS] = {"--worker", gf_test_prog("GF_WORKER")};
    size_t n = add_args(all, add_args(all, 2, base), extra);
    all[n] = NULL;
    char msg[256];
    if (gf_hh_server_start(s, gf_test_prog("GF_GPUFAAS"), all, timeout_s, msg, sizeof msg) != 0) {
        gf_hh_server_dump_log(s, LOG_TAIL);
        ck_abort_msg("%s", msg);
    }
}

void gf_hf_teardown(gf_hh_server *s, char **dir)
{
    int st = gf_hh_server_stop(s, 30);
    if (st != 0)
        gf_hh_server_dump_log(s, LOG_TAIL);
    gf_hh_thread_end();
    gf_test_rmtree(*dir);
    *dir = NULL;
    ck_assert_msg(st == 0, "gpufaas serve exited with %d after SIGTERM", st);
}
