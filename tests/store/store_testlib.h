/* Helpers shared by the store test suites: raw SQLite access (the tests read
 * the file through their own connections, as an operator would) and a
 * realistic population of the database. */
#ifndef GF_STORE_TESTLIB_H
#define GF_STORE_TESTLIB_H

#include <sqlite3.h>
#include <stdint.h>

#include "store/store.h"

/* Open path read-write (flags 0) or with the given SQLITE_OPEN_* flags; fails
 * the test on error. Busy timeout 5 s. */
sqlite3 *st_raw_open(const char *path, int flags);

/* The single integer the query returns (fails the test on error). */
int64_t st_q_int(sqlite3 *db, const char *sql);

/* The first column of the first row as malloc'd text ("" for NULL); fails
 * the test on error or when there is no row. */
char *st_q_text(sqlite3 *db, const char *sql);

/* Every row of the query, columns joined by '|' and rows by '\n' (malloc'd). */
char *st_q_rows(sqlite3 *db, const char *sql);

/* Open a store or fail the test with its message. cfg may be NULL. */
gf_store *st_open(const char *path, const gf_store_config *cfg);

/* Close a store or fail the test. */
void st_close(gf_store *s);

/* A successful invocation of version 1 of fn on worker 0, numbered seq (in
 * queue_us, so tests can check order and completeness). */
gf_store_invocation st_inv_rec(const char *fn, int64_t seq);

/* Current time in microseconds since the epoch. */
int64_t st_now_us(void);

/* Deploy the next version of function with a weights file of n bytes written
 * under dir (named "<function>-v<version>.safetensors", recorded relative to
 * dir); the sha256 is computed here. publish makes it current. Returns the
 * version the store chose. */
int64_t st_deploy(gf_store *s, const char *dir, const char *function, size_t n, int publish);

/* The data set the views and the operator recipes are tested against:
 *  functions resnet50 (v1, v2 current), bert-base (v1 current), mlp-small (v1
 *  current, marked broken), old-model (deleted); workers 0 (cuda:0) and
 *  1 (cpu:0) with heartbeats; placements of resnet50 v2 (device + host on
 *  worker 0, hits 40), bert-base v1 (host on worker 1, loading);
 *  invocations in the last hour: resnet50 100 (total 1..100 ms, 10 cold,
 *  5 errors), bert-base 20 (total 5 ms each, 2 cold); older ones (2 h and
 *  2 days ago) that the one-hour views must not count; swap events: 3 loads
 *  and 2 evictions in the last hour, 1 eviction 3 hours ago. Flushed. */
void st_populate(gf_store *s, const char *dir);

#endif
