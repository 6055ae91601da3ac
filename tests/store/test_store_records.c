/* Tests for store/'s record path (store_records.c, store_thread.c):
 * fire-and-forget records applied in order, batching and the commit
 * interval, what close commits, retention by rows and by age, and a full
 * queue that drops and counts instead of blocking. Part of the store suite
 * (test_store.c: the fixture gives each test ts_dbpath in a fresh directory). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"
#include "store_suite.h"
#include "store_testlib.h"
#include "testutil.h"

/* ---- fire-and-forget records ------------------------------------------------ */

START_TEST(test_records_applied)
{
    gf_store_config c = ts_quiet_config(); /* the made-up times below are from 1970 */
    gf_store *s = st_open(ts_dbpath, &c);
    gf_err err;
    st_deploy(s, ts_tmpdir, "mlp", 100, 1);
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
    sqlite3 *db = st_raw_open(ts_dbpath, SQLITE_OPEN_READONLY);
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
    gf_store_invocation r = st_inv_rec("mlp", 0);
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
    gf_store_config c = ts_quiet_config();
    c.batch_max = 100;
    c.on_commit = count_commit;
    cb_calls = cb_records = cb_total = 0;
    gf_store *s = st_open(ts_dbpath, &c);
    gf_store_stats before;
    gf_store_stats_get(s, &before);
    const int n = 20000;
    for (int i = 0; i < n; i++) {
        gf_store_invocation r = st_inv_rec("mlp", i);
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
    sqlite3 *db = st_raw_open(ts_dbpath, SQLITE_OPEN_READONLY);
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
    gf_store_config c = ts_quiet_config();
    c.commit_interval_ms = 20;
    gf_store *s = st_open(ts_dbpath, &c);
    sqlite3 *db = st_raw_open(ts_dbpath, SQLITE_OPEN_READONLY);
    gf_store_invocation r = st_inv_rec("mlp", 1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_OK);
    int64_t n = 0;
    double ms = 0;
    while (n == 0 && ms < 10000) {
        usleep(2000);
        n = st_q_int(db, "SELECT count(*) FROM invocations");
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    }
    /* 20 ms interval, nobody flushing: without the timer it would never
     * commit. No tighter bound: a loaded machine may delay the timer. */
    ck_assert_msg(n == 1, "not committed after %.0f ms", ms);
    sqlite3_close(db);
    st_close(s);
}
END_TEST

/* Closing commits what is still queued. */
START_TEST(test_close_commits_queue)
{
    gf_store_config c = ts_quiet_config();
    c.batch_max = 1u << 20;
    gf_store *s = st_open(ts_dbpath, &c);
    for (int i = 0; i < 5000; i++) {
        gf_store_invocation r = st_inv_rec("mlp", i);
        ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_OK);
    }
    st_close(s);
    sqlite3 *db = st_raw_open(ts_dbpath, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM invocations"), 5000);
    sqlite3_close(db);
}
END_TEST

/* Records a thread handed over before an admin call are committed no later
 * than the admin change: visible as soon as the admin call returns. */
START_TEST(test_admin_after_records_keeps_order)
{
    gf_store_config c = ts_quiet_config();
    c.batch_max = 1u << 20; /* no batch fills: only the admin call commits them */
    gf_store *s = st_open(ts_dbpath, &c);
    sqlite3 *db = st_raw_open(ts_dbpath, SQLITE_OPEN_READONLY);
    gf_err err;
    for (int round = 1; round <= 3; round++) {
        for (int i = 0; i < 3000; i++) {
            gf_store_invocation r = st_inv_rec("mlp", i);
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
    gf_store_config c = ts_quiet_config();
    c.retain_rows = 100;
    gf_store *s = st_open(ts_dbpath, &c);
    for (int i = 0; i < 1000; i++) {
        gf_store_invocation r = st_inv_rec("mlp", i);
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
    sqlite3 *db = st_raw_open(ts_dbpath, SQLITE_OPEN_READONLY);
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
    gf_store_config c = ts_quiet_config();
    c.retain_age_s = 3600;
    c.retention_every_ms = 20; /* and it runs by itself, without a flush */
    gf_store *s = st_open(ts_dbpath, &c);
    int64_t now = st_now_us();
    for (int i = 0; i < 100; i++) {
        gf_store_invocation r = st_inv_rec("mlp", i);
        r.at_us = i < 50 ? now - 2 * 3600000000ll : now - 60000000;
        ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_OK);
    }
    sqlite3 *db = st_raw_open(ts_dbpath, SQLITE_OPEN_READONLY);
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
    gf_store_config c = ts_quiet_config();
    c.queue_cap = 64;
    c.busy_timeout_ms = 30;
    gf_store *s = st_open(ts_dbpath, &c);
    /* an operator holds the write lock: the store thread cannot commit */
    sqlite3 *locker = st_raw_open(ts_dbpath, 0);
    ck_assert_int_eq(sqlite3_exec(locker, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int ok = 0, busy = 0;
    for (int i = 0; i < 2000; i++) {
        gf_store_invocation r = st_inv_rec("mlp", i);
        gf_status st = gf_store_log_invocation(s, &r);
        ck_assert(st == GF_OK || st == GF_ERR_BUSY);
        if (st == GF_OK)
            ok++;
        else
            busy++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    /* blocking on the lock would cost busy_timeout (30 ms) per call, 60 s
     * for 2000; a tenth of that leaves any loaded machine its slack */
    ck_assert_msg(ms < 6000, "2000 handovers took %.1f ms while the database was locked", ms);
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
    sqlite3 *db = st_raw_open(ts_dbpath, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM invocations"), ok);
    sqlite3_close(db);
    gf_store_stats_get(s, &stats);
    ck_assert_uint_eq(stats.committed, (uint64_t)ok);
    ck_assert_uint_eq(stats.lost, 0);
    st_close(s);
}
END_TEST

void ts_records_tests(TCase *tc)
{
    tcase_add_test(tc, test_records_applied);
    tcase_add_test(tc, test_batching);
    tcase_add_test(tc, test_commit_interval);
    tcase_add_test(tc, test_close_commits_queue);
    tcase_add_test(tc, test_admin_after_records_keeps_order);
    tcase_add_test(tc, test_retention_by_rows);
    tcase_add_test(tc, test_retention_by_age);
    tcase_add_test(tc, test_queue_full_drops_and_counts);
}
