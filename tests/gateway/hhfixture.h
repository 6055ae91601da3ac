/* gpufaas tests — the per-test fixture of the Check suites that run a real
 * `gpufaas serve` (httpharness.h): a fresh folder, the server started with
 * the test build's worker, and stopped (its exit status asserted) at the end.
 * One place for what every such suite did alike. */
#ifndef GF_HHFIXTURE_H
#define GF_HHFIXTURE_H

#include "httpharness.h"

/* The usual server: 2 cpu workers, 256 MiB of device and host memory. */
extern const char *const gf_hf_cpu2[];

/* A fresh temporary folder in *dir and s prepared for a server whose state
 * and log live there. */
void gf_hf_setup(gf_hh_server *s, char **dir);

/* Start `gpufaas serve --worker <GF_WORKER>` with base then extra (each
 * NULL-terminated, or NULL; a flag given twice: the later one wins) and wait
 * up to timeout_s; fails the test, printing the server's log, when it does
 * not come up. */
void gf_hf_start(gf_hh_server *s, const char *const *base, const char *const *extra,
                 int timeout_s);

/* SIGTERM the server (30 s, then SIGKILL), print its log when it did not
 * exit 0, close this thread's client connection, remove *dir (set to NULL);
 * then fail the test when the exit status was not 0. */
void gf_hf_teardown(gf_hh_server *s, char **dir);

#endif /* GF_HHFIXTURE_H */
