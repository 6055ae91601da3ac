/* Tests for store/: schema and migrations, admin writes, fault injection,
 * recovery and the views (here); fire-and-forget records, batching,
 * retention and a full queue (test_store_records.c).
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
#include "store/store_impl.h"
#include "store_suite.h"
#include "store_testlib.h"
#include "testutil.h"

char *ts_tmpdir;
char *ts_dbpath;

static void setup(void)
{
    ts_tmpdir = gf_test_tmpdir();
    ts_dbpath = gf_test_path(ts_tmpdir, GF_STORE_DB_NAME);
    gf_fault_reset();
}

static void teardown(void)
{
    gf_fault_reset();
    free(ts_dbpath);
    gf_test_rmtree(ts_tmpdir);
}

gf_store_config ts_quiet_config(void)
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

    gf_store *s = st_open(ts_dbpath, NULL);
    sqlite3 *db = st_raw_open(ts_dbpath, SQLITE_OPEN_READONLY);
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
    ck_assert_int_eq(gf_store_open(ts_dbpath, &c, &s, &err), GF_ERR_INVALID);
    ck_assert_ptr_null(s);
    ck_assert_ptr_nonnull(strstr(err.msg, "commit_interval_ms"));
    gf_store_config_default(&c);
    c.batch_max = 0;
    ck_assert_int_eq(gf_store_open(ts_dbpath, &c, &s, &err), GF_ERR_INVALID);
    gf_store_config_default(&c);
    c.queue_cap = 1;
    ck_assert_int_eq(gf_store_open(ts_dbpath, &c, &s, &err), GF_ERR_INVALID);
    ck_assert_int_eq(gf_store_open("", NULL, &s, &err), GF_ERR_INVALID);
    /* a queue size that is not a power of two is rounded up */
    gf_store_config_default(&c);
    c.queue_cap = 1000;
    s = st_open(ts_dbpath, &c);
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
    char *fresh_path = gf_test_path(ts_tmpdir, "fresh.db");
    st_close(st_open(fresh_path, NULL));
    char *fresh = schema_dump(fresh_path);
    ck_assert_ptr_nonnull(strstr(fresh, "CREATE TABLE invocations"));

    for (int from = 0; from < gf_store_schema_version(); from++) {
        char name[32];
        snprintf(name, sizeof name, "from%d.db", from);
        char *path = gf_test_path(ts_tmpdir, name);
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
    char *empty = gf_test_path(ts_tmpdir, "empty.db");
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

/* Migration 5: a file at version 4 keeps its invocations, and afterwards the
 * slo CHECK accepts and refuses what it did, without an ephemeral table in
 * the insert every answered request runs (store.c's GF_SQL_INV_INSERT). */
START_TEST(test_slo_check_migrated)
{
    sqlite3 *db = st_raw_open(ts_dbpath, 0);
    gf_err err;
    ck_assert_msg(gf_store_schema_migrate(db, 4, &err) == GF_OK, "%s", err.msg);
    static const char ins[] =
        "INSERT INTO invocations (function, version, status, http_code, batch_size, cold,"
        " queue_us, load_us, exec_us, total_us, at, slo) VALUES ('f', 1, 'GF_OK', 200, 1, 0,"
        " 0, 0, 0, 0, 0, %s)";
    char sql[512];
    snprintf(sql, sizeof sql, ins, "'met'");
    ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3 *reader = st_raw_open(ts_dbpath, SQLITE_OPEN_READONLY); /* open across it */
    ck_assert_int_eq(st_q_int(reader, "SELECT count(*) FROM invocations"), 1);
    ck_assert_msg(gf_store_schema_migrate(db, 5, &err) == GF_OK, "%s", err.msg);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM invocations WHERE slo = 'met'"), 1);
    char *ok = st_q_text(db, "PRAGMA integrity_check");
    ck_assert_str_eq(ok, "ok");
    free(ok);
    static const char *const good[] = {"'met'", "'cold'", "'queue'", "'exec'", "'failed'",
                                       "NULL"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        snprintf(sql, sizeof sql, ins, good[i]);
        ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK, "%s", good[i]);
    }
    static const char *const bad[] = {"'late'", "''", "'MET'", "1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(sql, sizeof sql, ins, bad[i]);
        ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_CONSTRAINT, "%s", bad[i]);
    }
    /* the other connection sees the new definition too (schema_version moved) */
    char *def = st_q_text(reader, "SELECT sql FROM sqlite_schema WHERE name = 'invocations'");
    ck_assert_ptr_null(strstr(def, "slo IN"));
    ck_assert_ptr_nonnull(strstr(def, "slo = 'failed'"));
    free(def);
    ck_assert_int_eq(st_q_int(reader, "SELECT count(*) FROM invocations"), 7);
    sqlite3_close(reader);
    /* the store's insert opens no ephemeral table */
    snprintf(sql, sizeof sql, "EXPLAIN %s", gf_store_sql_text(GF_SQL_INV_INSERT));
    sqlite3_stmt *st = NULL;
    ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    int ops = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        ops++;
        ck_assert_str_ne((const char *)sqlite3_column_text(st, 1), "OpenEphemeral");
    }
    ck_assert_int_gt(ops, 10);
    sqlite3_finalize(st);
    sqlite3_close(db);
}
END_TEST

/* A file whose slo CHECK is not migration 3's text (edited by hand) still
 * opens: migration 5 leaves that definition as it is, and the file reaches
 * version 5 with its rows and its integrity. */
START_TEST(test_slo_check_other_text_kept)
{
    sqlite3 *db = st_raw_open(ts_dbpath, 0);
    gf_err err;
    ck_assert_msg(gf_store_schema_migrate(db, 4, &err) == GF_OK, "%s", err.msg);
    ck_assert_int_eq(sqlite3_exec(db,
                                  "PRAGMA writable_schema = ON;"
                                  "UPDATE sqlite_schema SET sql = replace(sql, 'slo IN (''met'', "
                                  "''cold''', 'slo IN (''met'',''cold''') WHERE name = "
                                  "'invocations';"
                                  "PRAGMA writable_schema = OFF;",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    db = st_raw_open(ts_dbpath, 0);
    char *before = st_q_text(db, "SELECT sql FROM sqlite_schema WHERE name = 'invocations'");
    ck_assert_ptr_nonnull(strstr(before, "'met','cold'"));
    ck_assert_msg(gf_store_schema_migrate(db, 5, &err) == GF_OK, "%s", err.msg);
    ck_assert_int_eq(st_q_int(db, "PRAGMA user_version"), 5);
    char *after = st_q_text(db, "SELECT sql FROM sqlite_schema WHERE name = 'invocations'");
    ck_assert_str_eq(after, before);
    char *ok = st_q_text(db, "PRAGMA integrity_check");
    ck_assert_str_eq(ok, "ok");
    free(ok);
    free(before);
    free(after);
    sqlite3_close(db);
}
END_TEST

START_TEST(test_newer_schema_refused)
{
    sqlite3 *db = st_raw_open(ts_dbpath, 0);
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", gf_store_schema_version() + 1);
    ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    gf_store *s = (gf_store *)0x1;
    gf_err err;
    ck_assert_int_eq(gf_store_open(ts_dbpath, NULL, &s, &err), GF_ERR_UNSUPPORTED);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err.msg, "newer") != NULL, "%s", err.msg);
    /* the file is untouched: still no tables */
    db = st_raw_open(ts_dbpath, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM sqlite_master"), 0);
    sqlite3_close(db);
}
END_TEST

START_TEST(test_not_a_database)
{
    char junk[4096];
    memset(junk, 'x', sizeof junk);
    gf_test_write_file(ts_dbpath, junk, sizeof junk);
    gf_store *s = (gf_store *)0x1;
    gf_err err;
    ck_assert_int_eq(gf_store_open(ts_dbpath, NULL, &s, &err), GF_ERR_FORMAT);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err.msg, ts_dbpath) != NULL, "%s", err.msg);
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
    ck_assert_int_eq(gf_store_open(ts_dbpath, NULL, &s, &err), GF_ERR_IO);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(gf_fault_failures("store_migrate"), 1);
    sqlite3 *db = st_raw_open(ts_dbpath, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(st_q_int(db, "PRAGMA user_version"), 0);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM sqlite_master"), 0);
    sqlite3_close(db);
    gf_fault_reset();
    st_close(st_open(ts_dbpath, NULL));
}
END_TEST

/* ---- admin writes -------------------------------------------------------- */

START_TEST(test_admin_writes_visible_on_return)
{
    gf_store *s = st_open(ts_dbpath, NULL);
    sqlite3 *db = st_raw_open(ts_dbpath, SQLITE_OPEN_READONLY);
    gf_err err;

    ck_assert_int_eq(st_deploy(s, ts_tmpdir, "resnet50", 1000, 0), 1);
    /* visible at once through another connection: the call waited for COMMIT */
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM function_versions"
                                  " WHERE function='resnet50' AND version=1 AND state='ready'"),
                     1);
    ck_assert_int_eq(st_q_int(db, "SELECT current_version IS NULL FROM functions"
                                  " WHERE name='resnet50'"),
                     1);
    ck_assert_int_eq(st_deploy(s, ts_tmpdir, "resnet50", 1000, 1), 2);
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
    ck_assert_int_eq(st_deploy(s, ts_tmpdir, "resnet50", 10, 1), 8);
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
            gf_status st = gf_store_open(ts_dbpath, NULL, &s, &err);
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
    gf_store_config c = ts_quiet_config();
    gf_store *s = st_open(ts_dbpath, &c);
    sqlite3 *db = st_raw_open(ts_dbpath, SQLITE_OPEN_READONLY);
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
    gf_store *s = st_open(ts_dbpath, NULL);
    gf_err err;
    st_deploy(s, ts_tmpdir, "good", 5000, 1);
    st_deploy(s, ts_tmpdir, "missing", 5000, 1);
    st_deploy(s, ts_tmpdir, "flipped", 5000, 1);
    st_deploy(s, ts_tmpdir, "short", 5000, 1);
    st_deploy(s, ts_tmpdir, "gone", 100, 1);
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
    char *path = gf_test_path(ts_tmpdir, "missing-v1.safetensors");
    ck_assert_int_eq(unlink(path), 0);
    free(path);
    path = gf_test_path(ts_tmpdir, "flipped-v1.safetensors");
    size_t n;
    char *data = gf_test_read_file(path, &n);
    data[1234] ^= 1;
    gf_test_write_file(path, data, n);
    free(data);
    free(path);
    path = gf_test_path(ts_tmpdir, "short-v1.safetensors");
    gf_test_write_file(path, "abc", 3);
    free(path);

    s = st_open(ts_dbpath, NULL);
    gf_store_catalog *cat = NULL;
    ck_assert_int_eq(gf_store_recover(s, ts_tmpdir, &cat, &err), GF_OK);
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
    sqlite3 *db = st_raw_open(ts_dbpath, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM workers"), 0);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM placements"), 0);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM function_versions WHERE state='broken'"),
                     3);
    /* a broken version cannot be published */
    ck_assert_int_eq(gf_store_version_publish(s, "flipped", 1, &err), GF_ERR_STATE);

    /* a second recovery finds nothing new and keeps them broken */
    ck_assert_int_eq(gf_store_recover(s, ts_tmpdir, &cat, &err), GF_OK);
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
    gf_store *s = st_open(ts_dbpath, NULL);
    st_populate(s, ts_tmpdir);
    sqlite3 *db = st_raw_open(ts_dbpath, SQLITE_OPEN_READONLY);

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
    tcase_add_test(tc, test_slo_check_migrated);
    tcase_add_test(tc, test_slo_check_other_text_kept);
    tcase_add_test(tc, test_newer_schema_refused);
    tcase_add_test(tc, test_not_a_database);
    tcase_add_test(tc, test_migration_failure_rolls_back);
    tcase_add_test(tc, test_admin_writes_visible_on_return);
    ts_records_tests(tc);
    tcase_add_test(tc, test_open_faults);
    tcase_add_test(tc, test_commit_fault);
    tcase_add_test(tc, test_recovery);
    tcase_add_test(tc, test_views);
    suite_add_tcase(su, tc);
    return gf_test_run_suite(su);
}
