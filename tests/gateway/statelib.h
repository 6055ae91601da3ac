/* Helpers of the tests of a server's state over HTTP (test_http_state.c,
 * test_http_versions.c): one real `gpufaas serve`, models written with
 * tests/common/mlp.h, deploys and invokes over HTTP, and the SQLite file
 * read through a connection of the test's own, as an operator reads it. */
#ifndef GF_TESTS_STATELIB_H
#define GF_TESTS_STATELIB_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "httpharness.h"
#include "mlp.h"

#define SL_IN 8
#define SL_OUT 4

/* The server under test and the folder of its files (set by sl_setup). */
extern gf_hh_server sl_srv;
extern char *sl_dir;

/* Per test: a fresh folder and server record; sl_teardown stops the server
 * (failing the test when it does not exit 0) and removes the folder. */
void sl_setup(void);
void sl_teardown(void);

/* Start `gpufaas serve` with args (NULL-terminated) after the worker's path;
 * fails the test (with the server's log) when it does not come up. */
void sl_start(const char *const *args);

/* A model: an mlp SL_IN -> hidden -> SL_OUT (in = SL_IN unless in_dim > 0:
 * another interface), its weights and manifest written in sl_dir as
 * <name>-<tag>.safetensors and .json; extra is JSON members added to the
 * manifest ("\"version\": 2"; NULL = none). */
typedef struct sl_model {
    char name[32];
    gf_test_mlp m;
    char *weights, *manifest;
} sl_model;
void sl_model_make(sl_model *f, const char *name, int tag, uint64_t seed, int64_t in_dim,
                   const char *extra);
void sl_model_free(sl_model *f);

/* POST /v1/functions (with the query string, NULL = none): the HTTP status;
 * *version gets the version answered (may be NULL) and *body, when not
 * NULL, the body (malloc'd). */
long sl_deploy(const sl_model *f, const char *query, int64_t *version, char **body);

/* Invoke name (version 0: the current one) with one row of SL_IN values;
 * extra is JSON members of the request ("\"outputs\": [...]"; NULL = none).
 * Returns the status; *served gets the version that answered a 200. */
long sl_invoke(const char *name, int64_t version, const char *extra, int64_t *served);

/* GET or another method on path with an optional JSON body: the status, and
 * the body as JSON into *out when out is not NULL (NULL when not JSON). */
long sl_call(const char *method, const char *path, const char *body, json_t **out);

/* GET path, which must answer 200 with JSON. */
json_t *sl_get(const char *path);

/* The server's SQLite file, read-only, busy timeout 5 s. */
sqlite3 *sl_db(void);
/* The one integer / every row ('|' between columns, '\n' after each) of a
 * query; fail the test on an error. */
int64_t sl_q_int(sqlite3 *db, const char *sql);
char *sl_q_rows(sqlite3 *db, const char *sql);

/* GET /metrics, which must answer 200: its text (malloc'd). */
char *sl_metrics(void);

/* The value of the /metrics sample name{labels} (labels exactly as written,
 * e.g. "function=\"f\",version=\"1\",code=\"200\""); -1 when absent. */
double sl_metric(const char *text, const char *name, const char *labels);

/* Run the gpufaas command line (GF_GPUFAAS) against the server: its exit
 * status, and stdout into *out (malloc'd). */
int sl_cli(char **out, const char *const *args);

/* Run the recipe of docs/operations.md that follows the line starting with
 * heading (its first ```sh block) as written, with /bin/sh, the sqlite3
 * command-line tool (GF_SQLITE3) on PATH and $DB naming the server's file:
 * its stdout (malloc'd); the test fails when it fails or writes to stderr.
 * NULL when there is no sqlite3 tool (the caller skips that check). */
char *sl_doc_recipe(const char *heading);

/* Wait (up to timeout_ms, polling) until ok(arg) is true. */
bool sl_eventually(bool (*ok)(void *arg), void *arg, int timeout_ms);

#endif /* GF_TESTS_STATELIB_H */
