/* Helpers shared by the store test suites. */
#include "store_testlib.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "store/sha256.h"
#include "testutil.h"

sqlite3 *st_raw_open(const char *path, int flags)
{
    sqlite3 *db = NULL;
    if (flags == 0)
        flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    int rc = sqlite3_open_v2(path, &db, flags, NULL);
    ck_assert_msg(rc == SQLITE_OK, "open %s: %s", path, db ? sqlite3_errmsg(db) : "?");
    sqlite3_busy_timeout(db, 5000);
    return db;
}

static sqlite3_stmt *st_prep(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    ck_assert_msg(rc == SQLITE_OK, "prepare '%s': %s", sql, sqlite3_errmsg(db));
    return st;
}

int64_t st_q_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = st_prep(db, sql);
    int rc = sqlite3_step(st);
    ck_assert_msg(rc == SQLITE_ROW, "'%s': %s", sql, sqlite3_errmsg(db));
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

char *st_q_text(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = st_prep(db, sql);
    int rc = sqlite3_step(st);
    ck_assert_msg(rc == SQLITE_ROW, "'%s': %s", sql, sqlite3_errmsg(db));
    const char *t = (const char *)sqlite3_column_text(st, 0);
    char *out = strdup(t != NULL ? t : "");
    sqlite3_finalize(st);
    return out;
}

char *st_q_rows(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = st_prep(db, sql);
    gf_buf b;
    gf_buf_init(&b);
    gf_buf_append_str(&b, "");
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        for (int i = 0; i < sqlite3_column_count(st); i++) {
            const char *t = (const char *)sqlite3_column_text(st, i);
            gf_buf_printf(&b, "%s%s", i ? "|" : "", t != NULL ? t : "");
        }
        gf_buf_append_str(&b, "\n");
    }
    ck_assert_msg(rc == SQLITE_DONE, "'%s': %s", sql, sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return gf_buf_steal(&b, NULL);
}

gf_store *st_open(const char *path, const gf_store_config *cfg)
{
    gf_store *s = NULL;
    gf_err err;
    gf_err_clear(&err);
    gf_status st = gf_store_open(path, cfg, &s, &err);
    ck_assert_msg(st == GF_OK, "gf_store_open(%s): %s", path, err.msg);
    return s;
}

void st_close(gf_store *s)
{
    gf_err err;
    gf_err_clear(&err);
    ck_assert_msg(gf_store_close(s, &err) == GF_OK, "gf_store_close: %s", err.msg);
}

gf_store_invocation st_inv_rec(const char *fn, int64_t seq)
{
    gf_store_invocation r = {.function = fn,
                             .version = 1,
                             .worker = 0,
                             .status = GF_OK,
                             .http_code = 200,
                             .batch_size = 1,
                             .queue_us = seq,
                             .exec_us = 10,
                             .total_us = 20};
    return r;
}

int64_t st_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t st_deploy(gf_store *s, const char *dir, const char *function, size_t n, int publish)
{
    /* name the file after the number the store will likely choose (the
     * catalog does not list deleted versions, so after a delete the name and
     * the number may differ; the store chooses, version 0) */
    gf_store_catalog *cat;
    gf_err err;
    ck_assert_int_eq(gf_store_catalog_load(s, &cat, &err), GF_OK);
    int64_t next = 1;
    for (size_t i = 0; i < cat->n; i++)
        if (strcmp(cat->versions[i].function, function) == 0 && cat->versions[i].version >= next)
            next = cat->versions[i].version + 1;
    gf_store_catalog_free(cat);

    char name[200];
    snprintf(name, sizeof name, "%s-v%lld.safetensors", function, (long long)next);
    char *path = gf_test_path(dir, name);
    unsigned char *data = malloc(n + 1);
    ck_assert_ptr_nonnull(data);
    for (size_t i = 0; i < n; i++)
        data[i] = (unsigned char)(i * 31 + (size_t)next);
    gf_test_write_file(path, data, n);
    char hex[GF_SHA256_HEX_LEN];
    gf_sha256_buf(data, n, hex, NULL);
    free(data);
    free(path);

    char manifest[256];
    snprintf(manifest, sizeof manifest,
             "{\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
             "\"shape\":[-1,4]}],\"max_batch_size\":8}");
    gf_store_version_spec spec = {
        .function = function,
        .version = 0,
        .kind = "mlp",
        .manifest = manifest,
        .weights_path = name,
        .bytes = n,
        .sha256 = hex,
        .publish = publish != 0,
    };
    int64_t got = 0;
    gf_err_clear(&err);
    ck_assert_msg(gf_store_version_deploy(s, &spec, &got, &err) == GF_OK, "deploy %s: %s", function,
                  err.msg);
    ck_assert_int_ge(got, next);
    return got;
}

static void st_inv(gf_store *s, const char *fn, int64_t version, int32_t worker, int64_t total_us,
                   int cold, gf_status status, int64_t at)
{
    gf_store_invocation r = {
        .function = fn,
        .version = version,
        .worker = worker,
        .status = status,
        .http_code = status == GF_OK ? 200 : 500,
        .batch_size = 4,
        .cold = cold != 0,
        .queue_us = 200,
        .load_us = cold ? total_us / 2 : 0,
        .exec_us = total_us / 4,
        .total_us = total_us,
        .at_us = at,
        .reason = status != GF_OK ? "test: the worker did not answer within 30 s" : NULL,
    };
    if (strcmp(fn, "resnet50") == 0) { /* an SLO of 50 ms, and how each request fared */
        r.slo_us = 50000;
        r.slo = status != GF_OK         ? GF_STORE_SLO_FAILED
                : total_us <= r.slo_us ? GF_STORE_SLO_MET
                : cold                 ? GF_STORE_SLO_COLD
                                       : GF_STORE_SLO_EXEC;
    }
    ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_OK);
}

static void st_swap(gf_store *s, const char *fn, int64_t version, gf_tier from,
                    gf_tier to, int64_t at)
{
    gf_store_swap r = {.worker = 0,
                       .function = fn,
                       .version = version,
                       .from = from,
                       .to = to,
                       .bytes = 64u << 20,
                       .elapsed_us = 5000,
                       .at_us = at};
    ck_assert_int_eq(gf_store_log_swap(s, &r), GF_OK);
}

void st_populate(gf_store *s, const char *dir)
{
    gf_err err;
    int64_t now = st_now_us();
    st_deploy(s, dir, "resnet50", 3000, 1);
    st_deploy(s, dir, "resnet50", 3100, 1);
    st_deploy(s, dir, "bert-base", 2000, 1);
    st_deploy(s, dir, "mlp-small", 500, 1);
    st_deploy(s, dir, "old-model", 100, 1);
    ck_assert_int_eq(gf_store_version_mark_broken(s, "mlp-small", 1, "test: bad weights", &err),
                     GF_OK);
    ck_assert_int_eq(gf_store_function_delete(s, "old-model", &err), GF_OK);
    gf_residency pin = {true, GF_PRIORITY_HIGH, 30000000}; /* set at run time */
    ck_assert_int_eq(gf_store_function_residency(s, "bert-base", &pin, &err), GF_OK);
    ck_assert_int_eq(gf_store_function_residency(s, "nobody", &pin, &err), GF_ERR_NOT_FOUND);

    gf_store_worker_spec w0 = {.id = 0,
                               .device = "cuda:0",
                               .pid = 4242,
                               .device_budget = 8ull << 30,
                               .host_budget = 32ull << 30};
    gf_store_worker_spec w1 = {.id = 1,
                               .device = "cpu:0",
                               .pid = 4243,
                               .device_budget = 2ull << 30,
                               .host_budget = 4ull << 30};
    ck_assert_int_eq(gf_store_worker_register(s, &w0, &err), GF_OK);
    ck_assert_int_eq(gf_store_worker_register(s, &w1, &err), GF_OK);
    ck_assert_int_eq(gf_store_log_worker_state(s, 0, GF_STORE_WORKER_READY, -1), GF_OK);
    ck_assert_int_eq(gf_store_log_worker_state(s, 1, GF_STORE_WORKER_READY, -1), GF_OK);
    gf_store_heartbeat hb0 = {.worker = 0,
                              .device_budget = 8ull << 30,
                              .device_used = 3ull << 30,
                              .host_budget = 32ull << 30,
                              .host_used = 5ull << 30};
    gf_store_heartbeat hb1 = {.worker = 1,
                              .device_budget = 2ull << 30,
                              .device_used = 0,
                              .host_budget = 4ull << 30,
                              .host_used = 1ull << 30};
    ck_assert_int_eq(gf_store_log_heartbeat(s, &hb0), GF_OK);
    ck_assert_int_eq(gf_store_log_heartbeat(s, &hb1), GF_OK);

    gf_store_placement p = {.function = "resnet50",
                            .version = 2,
                            .worker = 0,
                            .tier = GF_TIER_DEVICE,
                            .bytes = 100u << 20,
                            .state = GF_STORE_PLACEMENT_READY,
                            .at_us = now - 600000000};
    ck_assert_int_eq(gf_store_log_placement(s, &p), GF_OK);
    p.at_us = now - 60000000;
    ck_assert_int_eq(gf_store_log_placement_hit(s, &p, 40), GF_OK);
    p.tier = GF_TIER_HOST;
    ck_assert_int_eq(gf_store_log_placement(s, &p), GF_OK);
    gf_store_placement q = {.function = "bert-base",
                            .version = 1,
                            .worker = 1,
                            .tier = GF_TIER_HOST,
                            .bytes = 400u << 20,
                            .state = GF_STORE_PLACEMENT_LOADING};
    ck_assert_int_eq(gf_store_log_placement(s, &q), GF_OK);

    for (int i = 0; i < 100; i++)
        st_inv(s, "resnet50", 2, 0, (i + 1) * 1000, i % 10 == 0,
               i % 20 == 7 ? GF_ERR_TIMEOUT : GF_OK, now - 1000000 - (int64_t)i * 10000000);
    for (int i = 0; i < 20; i++)
        st_inv(s, "bert-base", 1, 1, 5000, i < 2, GF_OK, now - 2000000 - (int64_t)i * 1000000);
    /* older than the views' one-hour window */
    st_inv(s, "resnet50", 1, 0, 900000, 1, GF_OK, now - 2 * 3600000000ll);
    st_inv(s, "resnet50", 1, 0, 800000, 1, GF_OK, now - 2 * 86400000000ll);

    st_swap(s, "resnet50", 2, GF_TIER_STORE, GF_TIER_HOST, now - 700000000);
    st_swap(s, "resnet50", 2, GF_TIER_HOST, GF_TIER_DEVICE, now - 650000000);
    st_swap(s, "bert-base", 1, GF_TIER_STORE, GF_TIER_HOST, now - 300000000);
    st_swap(s, "bert-base", 1, GF_TIER_DEVICE, GF_TIER_HOST, now - 200000000);
    st_swap(s, "resnet50", 1, GF_TIER_HOST, GF_TIER_STORE, now - 100000000);
    st_swap(s, "resnet50", 1, GF_TIER_DEVICE, GF_TIER_HOST, now - 3 * 3600000000ll);
    ck_assert_int_eq(gf_store_flush(s, &err), GF_OK);
    gf_store_stats stats;
    gf_store_stats_get(s, &stats);
    ck_assert_uint_eq(stats.rejected, 0);
}
