/* Tests for store/: schema and migrations, admin writes, fire-and-forget
 * records, batching, retention, a full queue, fault injection and recovery.
 * Every test works on a real SQLite file in a temporary directory and checks
 * the result through its own connection, as an operator would. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/fault.h"
#include "store/sha256.h"
#include "store/schema.h"
#include "store/store.h"
#include "store_testlib.h"
#include "testutil.h"

static char *tmpdir;
static char *dbpath;

static void setup(void)
{
    tmpdir = gf_test_tmpdir();
    dbpath = gf_test_path(tmpdir, GF_STORE_DB_NAME);
    gf_fault_reset();
}

static void teardown(void)
{
    gf_fault_reset();
    free(dbpath);
    gf_test_rmtree(tmpdir);
}

/* A configuration without periodic retention, so that nothing but the test's
 * own actions runs transactions. */
static gf_store_config quiet_config(void)
{
    gf_store_config c;
    gf_store_config_default(&c);
    c.retain_rows = -1;
    c.retain_age_s = -1;
    return c;
}

static gf_store_invocation inv(const char *fn, int64_t seq)
{
    return st_inv_rec(fn, seq);
}

/* ---- open, pragmas, paths ------------------------------------------------ */

START_TEST(test_open_creates_wal_db)
{
    char *p = NULL;
    gf_err err;
    ck_assert_int_eq(gf_store_default_path("/var/lib/gpufaas", &p, &err), GF_OK);
    ck_assert_str_eq(p, "/var/lib/gpufaas/gpufaas.db");
    free(p);
    ck_assert_int_eq(gf_store_default_path("/srv/state/", &p, &err), GF_OK);
    ck_assert_str_eq(p, "/srv/state/gpufaas.db");
    free(p);
    ck_assert_int_eq(gf_store_default_path("", &p, &err), GF_ERR_INVALID);
    ck_assert_ptr_null(p);

    gf_store *s = st_open(dbpath, NULL);
    sqlite3 *db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);
    char *mode = st_q_text(db, "PRAGMA journal_mode");
    ck_assert_str_eq(mode, "wal");
    free(mode);
    ck_assert_int_eq(st_q_int(db, "PRAGMA user_version"), gf_store_schema_version());
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'view'"
                                  " AND name IN ('v_placement', 'v_function_stats',"
                                  " 'v_worker_memory', 'v_recent_swaps')"),
                     4);
    sqlite3_close(db);
    st_close(s);
    ck_assert_int_eq(gf_store_close(NULL, NULL), GF_OK);
}
END_TEST

START_TEST(test_config_checked)
{
    gf_store_config c;
    gf_store *s = (gf_store *)0x1;
    gf_err err;
    gf_store_config_default(&c);
    c.commit_interval_ms = 51;
    ck_assert_int_eq(gf_store_open(dbpath, &c, &s, &err), GF_ERR_INVALID);
    ck_assert_ptr_null(s);
    ck_assert_ptr_nonnull(strstr(err.msg, "commit_interval_ms"));
    gf_store_config_default(&c);
    c.batch_max = 0;
    ck_assert_int_eq(gf_store_open(dbpath, &c, &s, &err), GF_ERR_INVALID);
    gf_store_config_default(&c);
    c.queue_cap = 1;
    ck_assert_int_eq(gf_store_open(dbpath, &c, &s, &err), GF_ERR_INVALID);
    ck_assert_int_eq(gf_store_open("", NULL, &s, &err), GF_ERR_INVALID);
    /* a queue size that is not a power of two is rounded up */
    gf_store_config_default(&c);
    c.queue_cap = 1000;
    s = st_open(dbpath, &c);
    gf_store_stats stats;
    gf_store_stats_get(s, &stats);
    ck_assert_uint_eq(stats.queue_cap, 1024);
    st_close(s);
}
END_TEST

/* ---- migrations -------------------------------------------------------- */

/* The schema as text, for comparing databases. */
static char *schema_dump(const char *path)
{
    sqlite3 *db = st_raw_open(path, SQLITE_OPEN_READONLY);
    char *out = st_q_rows(db, "SELECT type, name, tbl_name, sql FROM sqlite_master"
                              " ORDER BY type, name");
    sqlite3_close(db);
    return out;
}

START_TEST(test_migration_table_well_formed)
{
    ck_assert_uint_ge(gf_store_migrations_n, 1);
    ck_assert_int_eq(gf_store_schema_version(), (int)gf_store_migrations_n);
    for (size_t i = 0; i < gf_store_migrations_n; i++) {
        ck_assert_int_eq(gf_store_migrations[i].version, (int)i + 1);
        ck_assert(strlen(gf_store_migrations[i].summary) > 10);
        ck_assert(strlen(gf_store_migrations[i].sql) > 0);
    }
}
END_TEST

/* From every earlier version (0 = a new empty file) to the current one: the
 * result has exactly the schema of a database created fresh, and keeps its
 * data and integrity. */
START_TEST(test_migrate_from_every_version)
{
    char *fresh_path = gf_test_path(tmpdir, "fresh.db");
    st_close(st_open(fresh_path, NULL));
    char *fresh = schema_dump(fresh_path);
    ck_assert_ptr_nonnull(strstr(fresh, "CREATE TABLE invocations"));

    for (int from = 0; from < gf_store_schema_version(); from++) {
        char name[32];
        snprintf(name, sizeof name, "from%d.db", from);
        char *path = gf_test_path(tmpdir, name);
        sqlite3 *db = st_raw_open(path, 0);
        gf_err err;
        if (from > 0)
            ck_assert_msg(gf_store_schema_migrate(db, from, &err) == GF_OK, "%s", err.msg);
        ck_assert_int_eq(st_q_int(db, "PRAGMA user_version"), from);
        if (from >= 1) {
            /* data written under the old schema */
            ck_assert_int_eq(sqlite3_exec(db,
                                          "INSERT INTO functions (name, created_at) VALUES"
                                          " ('keep-me', 1)",
                                          NULL, NULL, NULL),
                             SQLITE_OK);
        }
        sqlite3_close(db);

        gf_store *s = st_open(path, NULL);
        st_close(s);
        char *got = schema_dump(path);
        ck_assert_msg(strcmp(got, fresh) == 0,
                      "schema after migrating from %d differs:\n%s\n--\n%s", from, got, fresh);
        db = st_raw_open(path, SQLITE_OPEN_READONLY);
        ck_assert_int_eq(st_q_int(db, "PRAGMA user_version"), gf_store_schema_version());
        char *ok = st_q_text(db, "PRAGMA integrity_check");
        ck_assert_str_eq(ok, "ok");
        free(ok);
        if (from >= 1)
            ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM functions WHERE name='keep-me'"),
                             1);
        sqlite3_close(db);
        free(got);
        free(path);
    }
    /* and a zero-byte file, as left by a crash right after creation */
    char *empty = gf_test_path(tmpdir, "empty.db");
    gf_test_write_file(empty, "", 0);
    st_close(st_open(empty, NULL));
    char *got = schema_dump(empty);
    ck_assert_str_eq(got, fresh);
    free(got);
    free(empty);
    free(fresh);
    free(fresh_path);
}
END_TEST

START_TEST(test_newer_schema_refused)
{
    sqlite3 *db = st_raw_open(dbpath, 0);
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", gf_store_schema_version() + 1);
    ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    gf_store *s = (gf_store *)0x1;
    gf_err err;
    ck_assert_int_eq(gf_store_open(dbpath, NULL, &s, &err), GF_ERR_UNSUPPORTED);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err.msg, "newer") != NULL, "%s", err.msg);
    /* the file is untouched: still no tables */
    db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM sqlite_master"), 0);
    sqlite3_close(db);
}
END_TEST

START_TEST(test_not_a_database)
{
    char junk[4096];
    memset(junk, 'x', sizeof junk);
    gf_test_write_file(dbpath, junk, sizeof junk);
    gf_store *s = (gf_store *)0x1;
    gf_err err;
    ck_assert_int_eq(gf_store_open(dbpath, NULL, &s, &err), GF_ERR_FORMAT);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err.msg, dbpath) != NULL, "%s", err.msg);
    /* a directory that does not exist */
    ck_assert_int_ne(gf_store_open("/nonexistent/gf/dir/gpufaas.db", NULL, &s, &err), GF_OK);
    ck_assert_ptr_null(s);
}
END_TEST

/* A migration that fails half-way leaves the file at the old version. */
START_TEST(test_migration_failure_rolls_back)
{
    gf_fault_arm("store_migrate", 1, 1);
    gf_store *s = (gf_store *)0x1;
    gf_err err;
    ck_assert_int_eq(gf_store_open(dbpath, NULL, &s, &err), GF_ERR_IO);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(gf_fault_failures("store_migrate"), 1);
    sqlite3 *db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(st_q_int(db, "PRAGMA user_version"), 0);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM sqlite_master"), 0);
    sqlite3_close(db);
    gf_fault_reset();
    st_close(st_open(dbpath, NULL));
}
END_TEST

/* ---- admin writes -------------------------------------------------------- */

START_TEST(test_admin_writes_visible_on_return)
{
    gf_store *s = st_open(dbpath, NULL);
    sqlite3 *db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);
    gf_err err;

    ck_assert_int_eq(st_deploy(s, tmpdir, "resnet50", 1000, 0), 1);
    /* visible at once through another connection: the call waited for COMMIT */
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM function_versions"
                                  " WHERE function='resnet50' AND version=1 AND state='ready'"),
                     1);
    ck_assert_int_eq(st_q_int(db, "SELECT current_version IS NULL FROM functions"
                                  " WHERE name='resnet50'"),
                     1);
    ck_assert_int_eq(st_deploy(s, tmpdir, "resnet50", 1000, 1), 2);
    ck_assert_int_eq(st_q_int(db, "SELECT current_version FROM functions WHERE name='resnet50'"),
                     2);
    ck_assert_int_eq(gf_store_version_publish(s, "resnet50", 1, &err), GF_OK);
    ck_assert_int_eq(st_q_int(db, "SELECT current_version FROM functions WHERE name='resnet50'"),
                     1);

    /* explicit version numbers; a duplicate is refused and changes nothing */
    gf_store_version_spec spec = {
        .function = "resnet50",
        .version = 2,
        .kind = "resnet",
        .manifest = "{}",
        .weights_path = "/w.safetensors",
        .bytes = 1,
        .sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"};
    ck_assert_int_eq(gf_store_version_deploy(s, &spec, NULL, &err), GF_ERR_EXISTS);
    ck_assert_ptr_nonnull(strstr(err.msg, "version 2 exists"));
    spec.version = 7;
    int64_t v = 0;
    ck_assert_int_eq(gf_store_version_deploy(s, &spec, &v, &err), GF_OK);
    ck_assert_int_eq(v, 7);
    ck_assert_int_eq(st_q_int(db, "SELECT kind = 'resnet' FROM function_versions"
                                  " WHERE function='resnet50' AND version=7"),
                     1);

    /* bad input, each named */
    gf_store_version_spec bad = spec;
    bad.version = 0;
    bad.function = "bad/name";
    ck_assert_int_eq(gf_store_version_deploy(s, &bad, NULL, &err), GF_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.msg, "function name"));
    bad = spec;
    bad.version = 0;
    bad.manifest = "{\"a\":";
    ck_assert_int_eq(gf_store_version_deploy(s, &bad, NULL, &err), GF_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "manifest"));
    bad = spec;
    bad.version = 0;
    bad.sha256 = "abc";
    ck_assert_int_eq(gf_store_version_deploy(s, &bad, NULL, &err), GF_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(err.msg, "sha256"));
    bad = spec;
    bad.version = -3;
    ck_assert_int_eq(gf_store_version_deploy(s, &bad, NULL, &err), GF_ERR_INVALID);
    char longname[GF_STORE_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    bad = spec;
    bad.function = longname;
    ck_assert_int_eq(gf_store_version_deploy(s, &bad, NULL, &err), GF_ERR_INVALID);

    /* publish errors */
    ck_assert_int_eq(gf_store_version_publish(s, "resnet50", 99, &err), GF_ERR_NOT_FOUND);
    ck_assert_int_eq(gf_store_version_publish(s, "nobody", 1, &err), GF_ERR_NOT_FOUND);
    ck_assert_int_eq(gf_store_version_mark_broken(s, "resnet50", 7, "bad weights", &err), GF_OK);
    ck_assert_int_eq(gf_store_version_publish(s, "resnet50", 7, &err), GF_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(err.msg, "broken"));
    char *reason = st_q_text(db, "SELECT state || ':' || state_reason FROM function_versions"
                                 " WHERE function='resnet50' AND version=7");
    ck_assert_str_eq(reason, "broken:bad weights");
    free(reason);
    ck_assert_int_eq(gf_store_version_mark_broken(s, "resnet50", 70, NULL, &err), GF_ERR_NOT_FOUND);

    /* workers; re-registering resets use and placements */
    gf_store_worker_spec w = {.id = 3, .device = "cuda:0", .pid = 100, .device_budget = 1000};
    ck_assert_int_eq(gf_store_worker_register(s, &w, &err), GF_OK);
    ck_assert_int_eq(st_q_int(db, "SELECT pid FROM workers WHERE id=3 AND state='starting'"), 100);
    gf_store_placement p = {.function = "resnet50",
                            .version = 1,
                            .worker = 3,
                            .tier = GF_TIER_DEVICE,
                            .bytes = 10,
                            .state = GF_STORE_PLACEMENT_READY};
    ck_assert_int_eq(gf_store_log_placement(s, &p), GF_OK);
    ck_assert_int_eq(gf_store_flush(s, &err), GF_OK);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM placements WHERE worker_id=3"), 1);
    w.pid = 101;
    ck_assert_int_eq(gf_store_worker_register(s, &w, &err), GF_OK);
    ck_assert_int_eq(st_q_int(db, "SELECT pid FROM workers WHERE id=3"), 101);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM placements WHERE worker_id=3"), 0);
    w.device = "";
    ck_assert_int_eq(gf_store_worker_register(s, &w, &err), GF_ERR_INVALID);

    /* delete: versions deleted, nothing current, placements gone, history kept;
     * the name can come back and its numbers continue */
    ck_assert_int_eq(gf_store_log_placement(s, &p), GF_OK);
    gf_store_invocation r = inv("resnet50", 1);
    ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_OK);
    ck_assert_int_eq(gf_store_function_delete(s, "resnet50", &err), GF_OK);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM function_versions"
                                  " WHERE function='resnet50' AND state <> 'deleted'"),
                     0);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM placements"), 0);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM invocations"), 1);
    ck_assert_int_eq(st_q_int(db, "SELECT deleted_at IS NOT NULL AND current_version IS NULL"
                                  " FROM functions WHERE name='resnet50'"),
                     1);
    ck_assert_int_eq(gf_store_function_delete(s, "resnet50", &err), GF_ERR_NOT_FOUND);
    ck_assert_int_eq(gf_store_version_publish(s, "resnet50", 1, &err), GF_ERR_STATE);
    ck_assert_int_eq(st_deploy(s, tmpdir, "resnet50", 10, 1), 8);
    ck_assert_int_eq(st_q_int(db, "SELECT deleted_at IS NULL FROM functions"
                                  " WHERE name='resnet50'"),
                     1);
    gf_store_catalog *cat;
    ck_assert_int_eq(gf_store_catalog_load(s, &cat, &err), GF_OK);
    ck_assert_uint_eq(cat->n, 1); /* deleted versions are not listed */
    ck_assert_int_eq(cat->versions[0].version, 8);
    ck_assert(cat->versions[0].current);
    gf_store_catalog_free(cat);

    char *fk = st_q_rows(db, "PRAGMA foreign_key_check");
    ck_assert_str_eq(fk, "");
    free(fk);
    sqlite3_close(db);
    st_close(s);
}
END_TEST

/* ---- fire-and-forget records ------------------------------------------------ */

START_TEST(test_records_applied)
{
    gf_store_config c = quiet_config(); /* the made-up times below are from 1970 */
    gf_store *s = st_open(dbpath, &c);
    gf_err err;
    st_deploy(s, tmpdir, "mlp", 100, 1);
    gf_store_worker_spec w = {.id = 0, .device = "cpu:0", .pid = 7};
    ck_assert_int_eq(gf_store_worker_register(s, &w, &err), GF_OK);

    gf_store_placement p = {.function = "mlp",
                            .version = 1,
                            .worker = 0,
                            .tier = GF_TIER_DEVICE,
                            .bytes = 4096,
                            .state = GF_STORE_PLACEMENT_LOADING,
                            .at_us = 1000};
    ck_assert_int_eq(gf_store_log_placement(s, &p), GF_OK);
    ck_assert_int_eq(gf_store_flush(s, &err), GF_OK);
    sqlite3 *db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(st_q_int(db, "SELECT loaded_at IS NULL AND state = 'loading' FROM placements"),
                     1);
    p.state = GF_STORE_PLACEMENT_READY;
    p.at_us = 2000;
    ck_assert_int_eq(gf_store_log_placement(s, &p), GF_OK);
    p.at_us = 3000; /* ready again: the load time stays the first one */
    ck_assert_int_eq(gf_store_log_placement(s, &p), GF_OK);
    p.at_us = 5000;
    ck_assert_int_eq(gf_store_log_placement_hit(s, &p, 3), GF_OK);
    p.at_us = 4000; /* out of order: last_used_at keeps the latest */
    ck_assert_int_eq(gf_store_log_placement_hit(s, &p, 1), GF_OK);
    ck_assert_int_eq(gf_store_flush(s, &err), GF_OK);
    char *row = st_q_rows(db, "SELECT state, bytes, loaded_at, last_used_at, hits FROM placements");
    ck_assert_str_eq(row, "ready|4096|2000|5000|4\n");
    free(row);

    gf_store_swap sw = {.worker = 0,
                        .function = "mlp",
                        .version = 1,
                        .from = GF_TIER_DEVICE,
                        .to = GF_TIER_HOST,
                        .bytes = 4096,
                        .elapsed_us = 17,
                        .at_us = 6000};
    ck_assert_int_eq(gf_store_log_swap(s, &sw), GF_OK);
    ck_assert_int_eq(gf_store_log_placement_remove(s, &p), GF_OK);
    gf_store_heartbeat hb = {.worker = 0,
                             .device_budget = 100,
                             .device_used = 40,
                             .host_budget = 200,
                             .host_used = 50,
                             .at_us = 7000};
    ck_assert_int_eq(gf_store_log_heartbeat(s, &hb), GF_OK);
    ck_assert_int_eq(gf_store_log_worker_state(s, 0, GF_STORE_WORKER_READY, -1), GF_OK);
    gf_store_invocation r = inv("mlp", 0);
    r.worker = -1;
    r.status = GF_ERR_TIMEOUT;
    r.http_code = 504;
    r.cold = true;
    r.at_us = 8000;
    ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_OK);
    ck_assert_int_eq(gf_store_flush(s, &err), GF_OK);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM placements"), 0);
    row = st_q_rows(db, "SELECT worker_id, function, version, from_tier, to_tier, bytes,"
                        " elapsed_us, at FROM swap_events");
    ck_assert_str_eq(row, "0|mlp|1|device|host|4096|17|6000\n");
    free(row);
    row = st_q_rows(db, "SELECT state, pid, device_budget, device_used, host_budget, host_used,"
                        " last_heartbeat, restarts FROM workers");
    ck_assert_str_eq(row, "ready|7|100|40|200|50|7000|0\n");
    free(row);
    row = st_q_rows(db, "SELECT function, version, worker_id IS NULL, status, http_code, cold, at"
                        " FROM invocations");
    ck_assert_str_eq(row, "mlp|1|1|GF_ERR_TIMEOUT|504|1|8000\n");
    free(row);

    /* a restart: counted, new pid, placements dropped */
    p.state = GF_STORE_PLACEMENT_READY;
    ck_assert_int_eq(gf_store_log_placement(s, &p), GF_OK);
    ck_assert_int_eq(gf_store_log_restart(s, 0, 99, 9000), GF_OK);
    ck_assert_int_eq(gf_store_flush(s, &err), GF_OK);
    row = st_q_rows(db, "SELECT state, pid, restarts, started_at, device_used FROM workers");
    ck_assert_str_eq(row, "starting|99|1|9000|0\n");
    free(row);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM placements"), 0);

    /* records the database refuses are counted, not fatal */
    gf_store_stats before;
    gf_store_stats_get(s, &before);
    hb.worker = 55; /* no such worker */
    ck_assert_int_eq(gf_store_log_heartbeat(s, &hb), GF_OK);
    p.version = 9; /* no such version: foreign key */
    ck_assert_int_eq(gf_store_log_placement(s, &p), GF_OK);
    r.worker = 0;
    ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_OK);
    ck_assert_int_eq(gf_store_flush(s, &err), GF_OK);
    gf_store_stats after;
    gf_store_stats_get(s, &after);
    ck_assert_uint_eq(after.rejected - before.rejected, 2);
    ck_assert_uint_eq(after.committed - before.committed, 1);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM invocations"), 2);

    /* bad handovers are refused at once */
    char longname[GF_STORE_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    r.function = longname;
    ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_ERR_INVALID);
    r.function = NULL;
    ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_ERR_INVALID);
    r.function = ""; /* a refused request that named no function is recorded */
    ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_OK);
    longname[GF_STORE_NAME_MAX] = '\0'; /* exactly the maximum is fine */
    r.function = longname;
    ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_OK);
    p.tier = GF_TIER_STORE;
    ck_assert_int_eq(gf_store_log_placement(s, &p), GF_ERR_INVALID);
    sw.to = sw.from;
    ck_assert_int_eq(gf_store_log_swap(s, &sw), GF_ERR_INVALID);
    ck_assert_int_eq(gf_store_log_worker_state(s, -2, GF_STORE_WORKER_READY, 1), GF_ERR_INVALID);
    ck_assert_int_eq(gf_store_log_restart(s, 0, -1, 0), GF_ERR_INVALID);
    sqlite3_close(db);
    st_close(s);
}
END_TEST

/* ---- batching ---------------------------------------------------------------- */

static uint64_t cb_calls, cb_records, cb_total;
static void count_commit(void *arg, uint64_t records, uint64_t total)
{
    (void)arg;
    cb_calls++;
    cb_records += records;
    cb_total = total;
}

/* 20,000 records with batch_max 100 commit in about 200 transactions, not
 * 20,000; every record lands. */
START_TEST(test_batching)
{
    gf_store_config c = quiet_config();
    c.batch_max = 100;
    c.on_commit = count_commit;
    cb_calls = cb_records = cb_total = 0;
    gf_store *s = st_open(dbpath, &c);
    gf_store_stats before;
    gf_store_stats_get(s, &before);
    const int n = 20000;
    for (int i = 0; i < n; i++) {
        gf_store_invocation r = inv("mlp", i);
        gf_status st;
        while ((st = gf_store_log_invocation(s, &r)) == GF_ERR_BUSY)
            usleep(100);
        ck_assert_int_eq(st, GF_OK);
    }
    /* let the store thread commit at its own pace (a flush would take the
     * rest in one transaction) */
    gf_store_stats after;
    for (int tries = 0; tries < 1000; tries++) {
        gf_store_stats_get(s, &after);
        if (after.committed == (uint64_t)n)
            break;
        usleep(5000);
    }
    uint64_t txns = after.commits - before.commits;
    ck_assert_uint_eq(after.committed, (uint64_t)n);
    ck_assert_msg(txns >= (uint64_t)n / 100 && txns <= (uint64_t)n / 20,
                  "%llu transactions for %d records (batch_max 100)", (unsigned long long)txns, n);
    ck_assert_uint_eq(cb_total, (uint64_t)n);
    ck_assert_uint_eq(cb_calls, txns);
    ck_assert_uint_eq(cb_records, (uint64_t)n);
    st_close(s);
    sqlite3 *db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM invocations"), n);
    /* one producer: order kept */
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM invocations WHERE queue_us <> id - 1"), 0);
    sqlite3_close(db);
}
END_TEST

/* A lone record is committed by the timer (within the commit interval), with
 * nobody flushing or closing. */
START_TEST(test_commit_interval)
{
    gf_store_config c = quiet_config();
    c.commit_interval_ms = 20;
    gf_store *s = st_open(dbpath, &c);
    sqlite3 *db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);
    gf_store_invocation r = inv("mlp", 1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_OK);
    int64_t n = 0;
    double ms = 0;
    while (n == 0 && ms < 2000) {
        usleep(2000);
        n = st_q_int(db, "SELECT count(*) FROM invocations");
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    }
    ck_assert_msg(n == 1, "not committed after %.0f ms", ms);
    /* 20 ms interval; allow a loaded 2-core machine plenty of slack */
    ck_assert_msg(ms < 500, "committed only after %.0f ms", ms);
    sqlite3_close(db);
    st_close(s);
}
END_TEST

/* Closing commits what is still queued. */
START_TEST(test_close_commits_queue)
{
    gf_store_config c = quiet_config();
    c.batch_max = 1u << 20;
    gf_store *s = st_open(dbpath, &c);
    for (int i = 0; i < 5000; i++) {
        gf_store_invocation r = inv("mlp", i);
        ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_OK);
    }
    st_close(s);
    sqlite3 *db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM invocations"), 5000);
    sqlite3_close(db);
}
END_TEST

/* Records a thread handed over before an admin call are committed no later
 * than the admin change: visible as soon as the admin call returns. */
START_TEST(test_admin_after_records_keeps_order)
{
    gf_store_config c = quiet_config();
    c.batch_max = 1u << 20; /* no batch fills: only the admin call commits them */
    gf_store *s = st_open(dbpath, &c);
    sqlite3 *db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);
    gf_err err;
    for (int round = 1; round <= 3; round++) {
        for (int i = 0; i < 3000; i++) {
            gf_store_invocation r = inv("mlp", i);
            ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_OK);
        }
        gf_store_worker_spec w = {.id = round, .device = "cpu:0"};
        ck_assert_int_eq(gf_store_worker_register(s, &w, &err), GF_OK);
        ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM invocations"), round * 3000);
    }
    sqlite3_close(db);
    st_close(s);
}
END_TEST

/* ---- retention ------------------------------------------------------------------- */

START_TEST(test_retention_by_rows)
{
    gf_store_config c = quiet_config();
    c.retain_rows = 100;
    gf_store *s = st_open(dbpath, &c);
    for (int i = 0; i < 1000; i++) {
        gf_store_invocation r = inv("mlp", i);
        ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_OK);
        gf_store_swap sw = {.worker = 0,
                            .function = "mlp",
                            .version = 1,
                            .from = GF_TIER_HOST,
                            .to = GF_TIER_DEVICE,
                            .bytes = (uint64_t)i,
                            .elapsed_us = 1};
        ck_assert_int_eq(gf_store_log_swap(s, &sw), GF_OK);
    }
    gf_err err;
    ck_assert_int_eq(gf_store_flush(s, &err), GF_OK);
    sqlite3 *db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM invocations"), 100);
    ck_assert_int_eq(st_q_int(db, "SELECT min(queue_us) FROM invocations"), 900); /* newest kept */
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM swap_events"), 100);
    ck_assert_int_eq(st_q_int(db, "SELECT min(bytes) FROM swap_events"), 900);
    gf_store_stats stats;
    gf_store_stats_get(s, &stats);
    ck_assert_uint_eq(stats.retention_deleted, 1800);
    sqlite3_close(db);
    st_close(s);
}
END_TEST

START_TEST(test_retention_by_age)
{
    gf_store_config c = quiet_config();
    c.retain_age_s = 3600;
    c.retention_every_ms = 20; /* and it runs by itself, without a flush */
    gf_store *s = st_open(dbpath, &c);
    int64_t now = st_now_us();
    for (int i = 0; i < 100; i++) {
        gf_store_invocation r = inv("mlp", i);
        r.at_us = i < 50 ? now - 2 * 3600000000ll : now - 60000000;
        ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_OK);
    }
    sqlite3 *db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);
    int64_t n = -1;
    for (int tries = 0; tries < 200 && n != 50; tries++) {
        usleep(10000);
        n = st_q_int(db, "SELECT count(*) FROM invocations");
    }
    ck_assert_int_eq(n, 50);
    ck_assert_int_eq(st_q_int(db, "SELECT min(queue_us) FROM invocations"), 50);
    sqlite3_close(db);
    st_close(s);
}
END_TEST

/* ---- a full queue never blocks the request path ------------------------------------ */

START_TEST(test_queue_full_drops_and_counts)
{
    gf_store_config c = quiet_config();
    c.queue_cap = 64;
    c.busy_timeout_ms = 30;
    gf_store *s = st_open(dbpath, &c);
    /* an operator holds the write lock: the store thread cannot commit */
    sqlite3 *locker = st_raw_open(dbpath, 0);
    ck_assert_int_eq(sqlite3_exec(locker, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int ok = 0, busy = 0;
    for (int i = 0; i < 2000; i++) {
        gf_store_invocation r = inv("mlp", i);
        gf_status st = gf_store_log_invocation(s, &r);
        ck_assert(st == GF_OK || st == GF_ERR_BUSY);
        if (st == GF_OK)
            ok++;
        else
            busy++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    ck_assert_msg(ms < 100, "2000 handovers took %.1f ms while the database was locked", ms);
    ck_assert_int_le(ok, 64);
    ck_assert_int_ge(busy, 2000 - 64);
    gf_store_stats stats;
    gf_store_stats_get(s, &stats);
    ck_assert_uint_eq(stats.dropped, (uint64_t)busy);
    /* an admin write meanwhile fails cleanly with BUSY */
    gf_err err;
    gf_store_worker_spec w = {.id = 0, .device = "cpu:0"};
    ck_assert_int_eq(gf_store_worker_register(s, &w, &err), GF_ERR_BUSY);
    ck_assert_msg(strstr(err.msg, "locked") != NULL, "%s", err.msg);

    ck_assert_int_eq(sqlite3_exec(locker, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(locker);
    ck_assert_int_eq(gf_store_flush(s, &err), GF_OK);
    sqlite3 *db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM invocations"), ok);
    sqlite3_close(db);
    gf_store_stats_get(s, &stats);
    ck_assert_uint_eq(stats.committed, (uint64_t)ok);
    ck_assert_uint_eq(stats.lost, 0);
    st_close(s);
}
END_TEST

/* ---- fault injection ----------------------------------------------------------------- */

/* Every allocation-like step of open failing in turn: a clean error, no
 * leak (LeakSanitizer checks each test), and the next open works. */
START_TEST(test_open_faults)
{
    static const char *const sites[] = {"store_open", "store_prepare", "store_thread"};
    for (size_t i = 0; i < sizeof sites / sizeof sites[0]; i++) {
        int failures = 0;
        for (long nth = 1; nth < 100; nth++) {
            gf_fault_reset();
            gf_fault_arm(sites[i], nth, 1);
            gf_store *s = (gf_store *)0x1;
            gf_err err;
            gf_err_clear(&err);
            gf_status st = gf_store_open(dbpath, NULL, &s, &err);
            if (gf_fault_failures(sites[i]) == 0) {
                /* past the last call at this site: opened normally */
                ck_assert_int_eq(st, GF_OK);
                st_close(s);
                break;
            }
            ck_assert_msg(st != GF_OK, "%s #%ld: open succeeded", sites[i], nth);
            ck_assert_ptr_null(s);
            ck_assert(err.msg[0] != '\0');
            failures++;
        }
        ck_assert_msg(failures >= 1, "site %s never reached", sites[i]);
    }
}
END_TEST

START_TEST(test_commit_fault)
{
    gf_store_config c = quiet_config();
    gf_store *s = st_open(dbpath, &c);
    sqlite3 *db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);
    gf_err err;
    /* an admin write whose COMMIT fails gets the error and leaves no trace
     * (nothing else runs transactions here: no records, no retention) */
    gf_fault_arm("store_commit", 1, 1);
    gf_store_worker_spec w = {.id = 0, .device = "cpu:0"};
    ck_assert_int_eq(gf_store_worker_register(s, &w, &err), GF_ERR_IO);
    ck_assert_msg(strstr(err.msg, "COMMIT") != NULL, "%s", err.msg);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM workers"), 0);
    ck_assert_int_eq(gf_store_worker_register(s, &w, &err), GF_OK);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM workers"), 1);

    /* records in a transaction whose COMMIT fails are lost and counted (the
     * failing transaction is the timer's or the flush's, whichever comes
     * first) */
    gf_fault_arm("store_commit", 1, 1);
    for (int i = 0; i < 10; i++) {
        gf_store_invocation r = inv("mlp", i);
        ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_OK);
    }
    gf_status st = gf_store_flush(s, &err);
    ck_assert(st == GF_OK || st == GF_ERR_IO);
    ck_assert_int_eq(gf_fault_failures("store_commit"), 1);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM invocations"), 0);
    gf_store_stats stats;
    gf_store_stats_get(s, &stats);
    ck_assert_uint_eq(stats.lost, 10);
    /* the store carries on */
    gf_store_invocation r = inv("mlp", 10);
    ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_OK);
    ck_assert_int_eq(gf_store_flush(s, &err), GF_OK);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM invocations"), 1);

    /* BEGIN failing (as when the database is locked): an admin write gets
     * BUSY; queued records stay queued and commit later */
    gf_fault_arm("store_begin", 1, 1);
    ck_assert_int_eq(gf_store_worker_register(s, &w, &err), GF_ERR_BUSY);
    gf_fault_arm("store_begin", 1, 1);
    for (int i = 0; i < 5; i++) {
        r = inv("mlp", 11 + i);
        ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_OK);
    }
    st = gf_store_flush(s, &err);
    ck_assert(st == GF_OK || st == GF_ERR_BUSY);
    ck_assert_int_eq(gf_store_flush(s, &err), GF_OK);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM invocations"), 6);
    sqlite3_close(db);
    /* the close reports that records were lost during the store's life */
    ck_assert_int_eq(gf_store_close(s, &err), GF_ERR_IO);
    ck_assert_ptr_nonnull(strstr(err.msg, "10 record(s) were lost"));
}
END_TEST

/* ---- recovery ------------------------------------------------------------------------- */

START_TEST(test_recovery)
{
    gf_store *s = st_open(dbpath, NULL);
    gf_err err;
    st_deploy(s, tmpdir, "good", 5000, 1);
    st_deploy(s, tmpdir, "missing", 5000, 1);
    st_deploy(s, tmpdir, "flipped", 5000, 1);
    st_deploy(s, tmpdir, "short", 5000, 1);
    st_deploy(s, tmpdir, "gone", 100, 1);
    ck_assert_int_eq(gf_store_function_delete(s, "gone", &err), GF_OK);
    gf_store_worker_spec w = {.id = 0, .device = "cuda:0", .pid = 1};
    ck_assert_int_eq(gf_store_worker_register(s, &w, &err), GF_OK);
    gf_store_placement p = {.function = "good",
                            .version = 1,
                            .worker = 0,
                            .tier = GF_TIER_DEVICE,
                            .bytes = 5000,
                            .state = GF_STORE_PLACEMENT_READY};
    ck_assert_int_eq(gf_store_log_placement(s, &p), GF_OK);
    st_close(s);

    /* damage: one file removed, one with a flipped byte, one truncated */
    char *path = gf_test_path(tmpdir, "missing-v1.safetensors");
    ck_assert_int_eq(unlink(path), 0);
    free(path);
    path = gf_test_path(tmpdir, "flipped-v1.safetensors");
    size_t n;
    char *data = gf_test_read_file(path, &n);
    data[1234] ^= 1;
    gf_test_write_file(path, data, n);
    free(data);
    free(path);
    path = gf_test_path(tmpdir, "short-v1.safetensors");
    gf_test_write_file(path, "abc", 3);
    free(path);

    s = st_open(dbpath, NULL);
    gf_store_catalog *cat = NULL;
    ck_assert_int_eq(gf_store_recover(s, tmpdir, &cat, &err), GF_OK);
    ck_assert_uint_eq(cat->n, 4); /* the deleted function is not listed */
    ck_assert_uint_eq(cat->broken_now, 3);
    for (size_t i = 0; i < cat->n; i++) {
        gf_store_version_info *v = &cat->versions[i];
        ck_assert(v->current);
        ck_assert_int_eq(v->version, 1);
        ck_assert_str_eq(v->kind, "mlp");
        ck_assert_ptr_nonnull(strstr(v->manifest, "max_batch_size"));
        ck_assert(gf_sha256_hex_valid(v->sha256));
        if (strcmp(v->function, "good") == 0) {
            ck_assert_int_eq(v->state, GF_STORE_VERSION_READY);
            ck_assert_uint_eq(v->bytes, 5000);
            ck_assert_ptr_null(v->state_reason);
        } else {
            ck_assert_int_eq(v->state, GF_STORE_VERSION_BROKEN);
            const char *want = strcmp(v->function, "missing") == 0   ? "missing"
                               : strcmp(v->function, "flipped") == 0 ? "sha256"
                                                                     : "3 bytes";
            ck_assert_msg(strstr(v->state_reason, want) != NULL, "%s: %s", v->function,
                          v->state_reason);
        }
    }
    gf_store_catalog_free(cat);
    sqlite3 *db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM workers"), 0);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM placements"), 0);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM function_versions WHERE state='broken'"),
                     3);
    /* a broken version cannot be published */
    ck_assert_int_eq(gf_store_version_publish(s, "flipped", 1, &err), GF_ERR_STATE);

    /* a second recovery finds nothing new and keeps them broken */
    ck_assert_int_eq(gf_store_recover(s, tmpdir, &cat, &err), GF_OK);
    ck_assert_uint_eq(cat->broken_now, 0);
    gf_store_catalog_free(cat);
    /* resolved against the wrong directory, the good one is missing too */
    ck_assert_int_eq(gf_store_recover(s, "/nonexistent", &cat, &err), GF_OK);
    ck_assert_uint_eq(cat->broken_now, 1);
    gf_store_catalog_free(cat);
    sqlite3_close(db);
    st_close(s);
}
END_TEST

/* ---- the views on a populated database -------------------------------------------------- */

START_TEST(test_views)
{
    gf_store *s = st_open(dbpath, NULL);
    st_populate(s, tmpdir);
    sqlite3 *db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);

    char *rows = st_q_rows(db, "SELECT function, version, current, tier, worker, device, state,"
                               " hits FROM v_placement");
    ck_assert_str_eq(rows, "bert-base|1|1|host|1|cpu:0|loading|0\n"
                           "mlp-small|1|1|store|||broken|\n"
                           "resnet50|1|0|store|||ready|\n"
                           "resnet50|2|1|device|0|cuda:0|ready|40\n"
                           "resnet50|2|1|host|0|cuda:0|ready|0\n");
    free(rows);
    /* readable times */
    char *t = st_q_text(db, "SELECT loaded_at FROM v_placement WHERE tier='device'");
    ck_assert_msg(strlen(t) == 23 && t[4] == '-' && t[10] == ' ' && t[19] == '.', "%s", t);
    free(t);

    rows = st_q_rows(db, "SELECT function, requests, errors, cold_starts, cold_pct, p50_ms, p99_ms,"
                         " avg_queue_ms FROM v_function_stats");
    ck_assert_str_eq(rows, "resnet50|100|5|10|10.0|50.0|99.0|0.2\n"
                           "bert-base|20|0|2|10.0|5.0|5.0|0.2\n");
    free(rows);

    rows = st_q_rows(db, "SELECT worker, device, tier, budget_mib, used_mib, free_mib, models"
                         " FROM v_worker_memory");
    ck_assert_str_eq(rows, "0|cuda:0|device|8192.0|3072.0|5120.0|1\n"
                           "0|cuda:0|host|32768.0|5120.0|27648.0|1\n"
                           "1|cpu:0|device|2048.0|0.0|2048.0|0\n"
                           "1|cpu:0|host|4096.0|1024.0|3072.0|1\n");
    free(rows);

    rows = st_q_rows(db, "SELECT worker, function, version, from_tier, to_tier, direction, mib, ms,"
                         " gb_per_s FROM v_recent_swaps");
    ck_assert_str_eq(rows, "0|resnet50|1|host|store|out|64.0|5.0|13.42\n"
                           "0|bert-base|1|device|host|out|64.0|5.0|13.42\n"
                           "0|bert-base|1|store|host|in|64.0|5.0|13.42\n"
                           "0|resnet50|2|host|device|in|64.0|5.0|13.42\n"
                           "0|resnet50|2|store|host|in|64.0|5.0|13.42\n");
    free(rows);
    sqlite3_close(db);
    st_close(s);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("store");
    TCase *tc = tcase_create("store");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_open_creates_wal_db);
    tcase_add_test(tc, test_config_checked);
    tcase_add_test(tc, test_migration_table_well_formed);
    tcase_add_test(tc, test_migrate_from_every_version);
    tcase_add_test(tc, test_newer_schema_refused);
    tcase_add_test(tc, test_not_a_database);
    tcase_add_test(tc, test_migration_failure_rolls_back);
    tcase_add_test(tc, test_admin_writes_visible_on_return);
    tcase_add_test(tc, test_records_applied);
    tcase_add_test(tc, test_batching);
    tcase_add_test(tc, test_commit_interval);
    tcase_add_test(tc, test_close_commits_queue);
    tcase_add_test(tc, test_admin_after_records_keeps_order);
    tcase_add_test(tc, test_retention_by_rows);
    tcase_add_test(tc, test_retention_by_age);
    tcase_add_test(tc, test_queue_full_drops_and_counts);
    tcase_add_test(tc, test_open_faults);
    tcase_add_test(tc, test_commit_fault);
    tcase_add_test(tc, test_recovery);
    tcase_add_test(tc, test_views);
    suite_add_tcase(su, tc);
    return gf_test_run_suite(su);
}
