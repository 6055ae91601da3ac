/* gpufaas tests — small helpers shared by the Check suites. */
#ifndef GF_TESTUTIL_H
#define GF_TESTUTIL_H

#include <check.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Exit status meson reads as "skipped". */
#define GF_TEST_SKIP 77

/* Create a fresh temporary directory (under $TMPDIR or /tmp); the returned
 * path is malloc'd. Aborts the test on failure. */
char *gf_test_tmpdir(void);

/* Remove a directory tree made by gf_test_tmpdir (best effort) and free path. */
void gf_test_rmtree(char *path);

/* path = dir + "/" + name, malloc'd. */
char *gf_test_path(const char *dir, const char *name);

/* The committed test file tests/fixtures/<name> (under $GF_SOURCE_ROOT, set
 * by meson), malloc'd. Fails the test when GF_SOURCE_ROOT is unset. */
char *gf_test_fixture(const char *name);

/* Write n bytes to path (creating/truncating). Aborts the test on failure. */
void gf_test_write_file(const char *path, const void *data, size_t n);

/* Read a whole file; malloc'd, NUL-terminated; *n gets the length. NULL on failure. */
char *gf_test_read_file(const char *path, size_t *n);

/* A small deterministic PRNG (xorshift64*), so failures reproduce. */
typedef struct {
    uint64_t s;
} gf_test_rng;
void gf_test_rng_seed(gf_test_rng *r, uint64_t seed);
uint64_t gf_test_rng_u64(gf_test_rng *r);
/* Uniform in [0, n). */
uint64_t gf_test_rng_below(gf_test_rng *r, uint64_t n);
/* Uniform float in [lo, hi). */
float gf_test_rng_float(gf_test_rng *r, float lo, float hi);

/* Run argv (argv[0] a path) with stdin from /dev/null; capture stdout and
 * stderr (malloc'd, NUL-terminated; pass NULL to discard). Returns the exit
 * status, 128 + signal when killed, or -1 when it could not be run. Kills the
 * child and fails the test after timeout_s seconds. */
int gf_test_run_cmd(char *const argv[], char **out, char **err, int timeout_s);

/* Path of a built program from the environment variable `var` (set by meson
 * in tests/meson.build). Fails the test when unset. */
const char *gf_test_prog(const char *var);

/* A gate for the cpu backend's copy hook (gf_cpu_copy_hook): each copy
 * waits at the gate until the test allows it, so a test holds the copy
 * stream at a known point. */
typedef struct gf_test_gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int allowed; /* copies allowed to proceed so far */
    int started; /* copies that reached the gate */
} gf_test_gate;
#define GF_TEST_GATE_INIT {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0}
/* The hook itself: pass it with the gate as its argument. */
void gf_test_gate_hook(void *gate, size_t nbytes);
void gf_test_gate_allow(gf_test_gate *g, int n);
/* Block until at least n copies reached the gate. */
void gf_test_gate_wait_started(gf_test_gate *g, int n);

/* fn() evaluated in a forked child, its result (0..100) returned: for
 * questions like "how many CUDA devices are there" whose answer initialises
 * state (a CUDA context) that must not exist in the parent, because every
 * Check test runs in a forked child and a CUDA context does not survive
 * fork. Returns 0 when the child fails. */
int gf_test_ask_in_child(int (*fn)(void));

/* Run a suite and return the process exit status (0 when every test passed).
 * Uses CK_FORK so a crashing test is reported, not fatal. */
int gf_test_run_suite(Suite *s);

#endif /* GF_TESTUTIL_H */
