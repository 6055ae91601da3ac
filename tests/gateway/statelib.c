/* Helpers of the tests of a server's state over HTTP (see statelib.h). */
#include "statelib.h"
#include "hhfixture.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

gf_hh_server sl_srv;
char *sl_dir;

void sl_setup(void)
{
    gf_hf_setup(&sl_srv, &sl_dir);
}

void sl_teardown(void)
{
    gf_hf_teardown(&sl_srv, &sl_dir);
}

void sl_start(const char *const *args)
{
    gf_hf_start(&sl_srv, NULL, args, 120);
}

void sl_model_make(sl_model *f, const char *name, int tag, uint64_t seed, int64_t in_dim,
                   const char *extra)
{
    snprintf(f->name, sizeof f->name, "%s", name);
    int64_t dims[] = {in_dim > 0 ? in_dim : SL_IN, 16, SL_OUT};
    gf_test_mlp_make(&f->m, seed, 2, dims, false, 8);
    char file[96];
    snprintf(file, sizeof file, "%s-%d.safetensors", name, tag);
    f->weights = gf_test_path(sl_dir, file);
    gf_err err;
    ck_assert_msg(gf_test_mlp_write(&f->m, f->weights, GF_DT_F32, &err) == GF_OK, "%s", gf_err_msg(&err));
    char *text = gf_test_mlp_manifest(&f->m, name);
    json_t *j = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(j);
    json_object_del(j, "version");
    if (extra != NULL) {
        char buf[512];
        snprintf(buf, sizeof buf, "{%s}", extra);
        json_t *x = json_loads(buf, 0, NULL);
        ck_assert_msg(x != NULL, "bad extra: %s", extra);
        json_object_update(j, x);
        json_decref(x);
    }
    char *out = json_dumps(j, JSON_COMPACT);
    snprintf(file, sizeof file, "%s-%d.json", name, tag);
    f->manifest = gf_test_path(sl_dir, file);
    gf_test_write_file(f->manifest, out, strlen(out));
    free(out);
    free(text);
    json_decref(j);
}

void sl_model_free(sl_model *f)
{
    gf_test_mlp_free(&f->m);
    free(f->weights);
    free(f->manifest);
}

long sl_deploy(const sl_model *f, const char *query, int64_t *version, char **body)
{
    gf_hh_resp r;
    long st = gf_hh_deploy_query(sl_srv.url, query, f->manifest, f->weights, NULL, &r);
    json_t *j = r.body.data != NULL ? json_loadb(r.body.data, r.body.len, 0, NULL) : NULL;
    if (version != NULL)
        *version = (int64_t)json_integer_value(json_object_get(j, "version"));
    if (body != NULL)
        *body = strdup(r.body.data != NULL ? r.body.data : "");
    json_decref(j);
    gf_hh_resp_free(&r);
    return st;
}

long sl_invoke(const char *name, int64_t version, const char *extra, int64_t *served)
{
    char body[1024], path[160];
    size_t off = (size_t)snprintf(body, sizeof body,
                                  "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
                                  "\"shape\":[1,%d],\"data\":[",
                                  SL_IN);
    for (int k = 0; k < SL_IN; k++)
        off += (size_t)snprintf(body + off, sizeof body - off, "%s%.3f", k ? "," : "",
                                0.125 * k - 0.5);
    snprintf(body + off, sizeof body - off, "]}]%s%s}", extra != NULL ? "," : "",
             extra != NULL ? extra : "");
    if (version > 0)
        snprintf(path, sizeof path, "/v2/models/%s/versions/%lld/infer", name, (long long)version);
    else
        snprintf(path, sizeof path, "/v1/functions/%s/invoke", name);
    gf_hh_resp r;
    long st = gf_hh_http(sl_srv.url, "POST", path, NULL, body, strlen(body), false, &r);
    if (served != NULL) {
        *served = 0;
        json_t *j = st == 200 ? json_loadb(r.body.data, r.body.len, 0, NULL) : NULL;
        json_t *v = json_object_get(j, version > 0 ? "model_version" : "version");
        *served = json_is_string(v) ? atoll(json_string_value(v)) : json_integer_value(v);
        json_decref(j);
    }
    gf_hh_resp_free(&r);
    return st;
}

long sl_call(const char *method, const char *path, const char *body, json_t **out)
{
    gf_hh_resp r;
    long st = gf_hh_http(sl_srv.url, method, path, NULL, body, body != NULL ? strlen(body) : 0,
                         false, &r);
    if (out != NULL)
        *out = r.body.data != NULL ? json_loadb(r.body.data, r.body.len, 0, NULL) : NULL;
    gf_hh_resp_free(&r);
    return st;
}

json_t *sl_get(const char *path)
{
    json_t *j = NULL;
    long st = sl_call("GET", path, NULL, &j);
    ck_assert_msg(st == 200 && j != NULL, "GET %s: %ld", path, st);
    return j;
}

sqlite3 *sl_db(void)
{
    char *path = gf_test_path(sl_srv.state, "gpufaas.db");
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    free(path);
    return db;
}

int64_t sl_q_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    ck_assert_msg(sqlite3_step(st) == SQLITE_ROW, "%s: no row", sql);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

char *sl_q_rows(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    gf_buf b;
    gf_buf_init(&b);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        for (int c = 0; c < sqlite3_column_count(st); c++) {
            const unsigned char *t = sqlite3_column_text(st, c);
            gf_buf_printf(&b, "%s%s", c ? "|" : "", t != NULL ? (const char *)t : "");
        }
        gf_buf_append_str(&b, "\n");
    }
    ck_assert_msg(rc == SQLITE_DONE, "%s: %s", sql, sqlite3_errmsg(db));
    sqlite3_finalize(st);
    char *s = gf_buf_steal(&b, NULL);
    return s != NULL ? s : strdup("");
}

char *sl_metrics(void)
{
    gf_hh_resp r;
    long st = gf_hh_http(sl_srv.url, "GET", "/metrics", NULL, NULL, 0, false, &r);
    ck_assert_int_eq(st, 200);
    char *t = gf_buf_steal(&r.body, NULL);
    gf_hh_resp_free(&r);
    return t;
}

double sl_metric(const char *text, const char *name, const char *labels)
{
    char key[512];
    snprintf(key, sizeof key, "\n%s{%s} ", name, labels);
    const char *p = strstr(text, key);
    return p != NULL ? atof(p + strlen(key)) : -1;
}

int sl_cli(char **out, const char *const *args)
{
    char *argv[32] = {(char *)gf_test_prog("GF_GPUFAAS")};
    int n = 1;
    for (int i = 0; args[i] != NULL && n < 29; i++)
        argv[n++] = (char *)args[i];
    argv[n++] = "--server";
    argv[n++] = sl_srv.url;
    argv[n] = NULL;
    char *err = NULL;
    int rc = gf_test_run_cmd(argv, out, &err, 60);
    free(err);
    return rc;
}

char *sl_doc_recipe(const char *heading)
{
    const char *cli = getenv("GF_SQLITE3");
    if (cli == NULL || cli[0] == '\0')
        return NULL;
    char *doc_path = gf_test_path(gf_test_prog("GF_SOURCE_ROOT"), "docs/operations.md");
    char *text = gf_test_read_file(doc_path, NULL);
    ck_assert_msg(text != NULL, "cannot read %s", doc_path);
    char *at = strstr(text, heading);
    ck_assert_msg(at != NULL && (at == text || at[-1] == '\n'), "%s has no recipe '%s'",
                  doc_path, heading);
    char *body = strstr(at, "\n```sh\n");
    ck_assert_msg(body != NULL, "no ```sh block after '%s' in %s", heading, doc_path);
    body += 7;
    char *end = strstr(body, "\n```");
    ck_assert_ptr_nonnull(end);
    *end = '\0';
    /* sqlite3 on PATH, $DB the server's file, as the document says */
    char *dir = strdup(cli);
    *strrchr(dir, '/') = '\0';
    const char *old = getenv("PATH");
    char *path = malloc(strlen(dir) + strlen(old != NULL ? old : "") + 2);
    sprintf(path, "%s:%s", dir, old != NULL ? old : "");
    char *db = gf_test_path(sl_srv.state, "gpufaas.db");
    char *argv[] = {"/usr/bin/env", "PATH", "DB", "/bin/sh", "-ec", body, NULL};
    char *pathv = NULL, *dbv = NULL;
    ck_assert(asprintf(&pathv, "PATH=%s", path) > 0 && asprintf(&dbv, "DB=%s", db) > 0);
    argv[1] = pathv;
    argv[2] = dbv;
    char *out = NULL, *err = NULL;
    int rc = gf_test_run_cmd(argv, &out, &err, 60);
    ck_assert_msg(rc == 0 && err[0] == '\0', "recipe '%s' failed (exit %d):\n%s\nstderr: %s",
                  heading, rc, body, err);
    free(err);
    free(pathv);
    free(dbv);
    free(db);
    free(path);
    free(dir);
    free(text);
    free(doc_path);
    return out;
}

bool sl_eventually(bool (*ok)(void *arg), void *arg, int timeout_ms)
{
    for (int waited = 0;; waited += 50) {
        if (ok(arg))
            return true;
        if (waited >= timeout_ms)
            return false;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}
