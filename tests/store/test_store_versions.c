/* Tests for store/ as issue 15 changed it: every refused request's row with
 * its reason, deleting one version, a version's file identity recorded at
 * publish and checked at start without reading the file, the full check,
 * and the names ever deployed with the highest number each had. Real SQLite
 * files in a temporary directory, read back through their own connection. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/sha256.h"
#include "store/store.h"
#include "store_testlib.h"
#include "testutil.h"

static char *tmpdir;
static char *dbpath;

static void setup(void)
{
    tmpdir = gf_test_tmpdir();
    dbpath = gf_test_path(tmpdir, GF_STORE_DB_NAME);
}

static void teardown(void)
{
    free(dbpath);
    gf_test_rmtree(tmpdir);
}

/* Write n bytes of a pattern seeded by seed to dir/name; its sha256 into hex. */
static void write_weights(const char *name, size_t n, unsigned seed, char hex[GF_SHA256_HEX_LEN])
{
    char *path = gf_test_path(tmpdir, name);
    unsigned char *data = malloc(n + 1);
    ck_assert_ptr_nonnull(data);
    for (size_t i = 0; i < n; i++)
        data[i] = (unsigned char)(i * 131 + seed);
    gf_test_write_file(path, data, n);
    ck_assert_int_eq(gf_sha256_buf(data, n, hex, NULL), GF_OK);
    free(data);
    free(path);
}

/* Deploy version `version` of function from a file written here, recording
 * the file's identity as the gateway does at publish. */
static void deploy(gf_store *s, const char *function, int64_t version, size_t n, bool publish)
{
    char name[160], hex[GF_SHA256_HEX_LEN];
    snprintf(name, sizeof name, "%s-v%lld.safetensors", function, (long long)version);
    write_weights(name, n, (unsigned)version, hex);
    char *path = gf_test_path(tmpdir, name);
    gf_store_version_spec spec = {.function = function,
                                  .version = version,
                                  .kind = "mlp",
                                  .manifest = "{\"kind\":\"mlp\"}",
                                  .weights_path = name,
                                  .bytes = n,
                                  .sha256 = hex,
                                  .publish = publish};
    gf_err err;
    ck_assert_int_eq(gf_store_file_id_of(path, &spec.file, &err), GF_OK);
    ck_assert_uint_eq(spec.file.bytes, n);
    ck_assert_uint_ne(spec.file.inode, 0);
    int64_t got = 0;
    ck_assert_msg(gf_store_version_deploy(s, &spec, &got, &err) == GF_OK, "%s", err.msg);
    ck_assert_int_eq(got, version);
    free(path);
}

/* A refused request is a row with its status, code and reason; an answered
 * one has no reason; a request that named no function is recorded under "";
 * a reason longer than the limit is cut at a character boundary. */
START_TEST(test_refused_rows_with_reasons)
{
    gf_store *s = st_open(dbpath, NULL);
    gf_store_invocation ok = st_inv_rec("digits", 1);
    ok.reason = "ignored on success";
    ck_assert_int_eq(gf_store_log_invocation(s, &ok), GF_OK);
    gf_store_invocation r = {.function = "digits",
                             .version = 2,
                             .worker = -1,
                             .status = GF_ERR_INVALID,
                             .http_code = 400,
                             .reason = "unknown output 'probz' requested (function 'digits' has "
                                       "probs)"};
    ck_assert_int_eq(gf_store_log_invocation(s, &r), GF_OK);
    gf_store_invocation nf = {.function = "",
                              .worker = -1,
                              .status = GF_ERR_NOT_FOUND,
                              .http_code = 404,
                              .reason = "function 'nope' not found"};
    ck_assert_int_eq(gf_store_log_invocation(s, &nf), GF_OK);
    /* 300 bytes of two-byte characters: cut to at most 255 bytes, whole ones */
    char longr[301];
    for (int i = 0; i < 300; i += 2) {
        longr[i] = (char)0xc3;
        longr[i + 1] = (char)0xa9; /* é */
    }
    longr[300] = '\0';
    gf_store_invocation lr = {.function = "digits",
                              .worker = -1,
                              .status = GF_ERR_BUSY,
                              .http_code = 429,
                              .reason = longr};
    ck_assert_int_eq(gf_store_log_invocation(s, &lr), GF_OK);
    gf_err err;
    ck_assert_int_eq(gf_store_flush(s, &err), GF_OK);
    sqlite3 *db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);
    char *rows = st_q_rows(db, "SELECT function, version, worker_id IS NULL, status, http_code,"
                               " reason IS NULL FROM invocations ORDER BY id");
    ck_assert_str_eq(rows, "digits|1|0|GF_OK|200|1\n"
                           "digits|2|1|GF_ERR_INVALID|400|0\n"
                           "|0|1|GF_ERR_NOT_FOUND|404|0\n"
                           "digits|0|1|GF_ERR_BUSY|429|0\n");
    free(rows);
    char *why = st_q_text(db, "SELECT reason FROM invocations WHERE http_code = 400");
    ck_assert_str_eq(why, r.reason);
    free(why);
    ck_assert_int_eq(st_q_int(db, "SELECT length(CAST(reason AS BLOB)) FROM invocations"
                                  " WHERE http_code = 429"),
                     254);
    ck_assert_int_eq(st_q_int(db, "SELECT length(reason) FROM invocations WHERE http_code = 429"),
                     127);
    /* the operator's view counts the refusals as errors */
    ck_assert_int_eq(st_q_int(db, "SELECT errors FROM v_function_stats WHERE function = 'digits'"),
                     2);
    sqlite3_close(db);
    st_close(s);
}
END_TEST

/* Deleting one version: its row stays (deleted), its placements go, it is no
 * longer current, the catalog leaves it out, and the function's highest
 * number still counts it. */
START_TEST(test_delete_one_version)
{
    gf_store *s = st_open(dbpath, NULL);
    deploy(s, "f", 1, 1000, true);
    deploy(s, "f", 2, 1000, true);
    deploy(s, "g", 1, 10, true);
    gf_store_worker_spec w = {.id = 0, .device = "cpu:0", .pid = 1};
    gf_err err;
    ck_assert_int_eq(gf_store_worker_register(s, &w, &err), GF_OK);
    gf_store_placement p = {.function = "f",
                            .version = 2,
                            .worker = 0,
                            .tier = GF_TIER_HOST,
                            .bytes = 1000,
                            .state = GF_STORE_PLACEMENT_READY};
    ck_assert_int_eq(gf_store_log_placement(s, &p), GF_OK);
    ck_assert_int_eq(gf_store_version_delete(s, "f", 2, &err), GF_OK);
    ck_assert_int_eq(gf_store_version_delete(s, "f", 2, &err), GF_ERR_NOT_FOUND);
    ck_assert_int_eq(gf_store_version_delete(s, "f", 7, &err), GF_ERR_NOT_FOUND);
    sqlite3 *db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(st_q_int(db, "SELECT count(*) FROM placements"), 0);
    ck_assert_int_eq(st_q_int(db, "SELECT current_version IS NULL FROM functions WHERE name='f'"),
                     1);
    char *st = st_q_text(db, "SELECT state FROM function_versions WHERE function='f' AND "
                             "version=2");
    ck_assert_str_eq(st, "deleted");
    free(st);
    /* delete g entirely: its name stays with its highest number */
    ck_assert_int_eq(gf_store_function_delete(s, "g", &err), GF_OK);
    gf_store_catalog *cat;
    ck_assert_int_eq(gf_store_catalog_load(s, &cat, &err), GF_OK);
    ck_assert_uint_eq(cat->n, 1); /* f v1 */
    ck_assert_str_eq(cat->versions[0].function, "f");
    ck_assert_int_eq(cat->versions[0].version, 1);
    ck_assert(!cat->versions[0].current);
    ck_assert_uint_eq(cat->n_functions, 2);
    ck_assert_str_eq(cat->functions[0].name, "f");
    ck_assert_int_eq(cat->functions[0].max_version, 2);
    ck_assert(!cat->functions[0].deleted);
    ck_assert_str_eq(cat->functions[1].name, "g");
    ck_assert_int_eq(cat->functions[1].max_version, 1);
    ck_assert(cat->functions[1].deleted);
    gf_store_catalog_free(cat);
    /* the numbers continue: a number used before is refused by the table */
    char hex[GF_SHA256_HEX_LEN];
    write_weights("g-again.safetensors", 10, 9, hex);
    gf_store_version_spec again = {.function = "g",
                                   .version = 1,
                                   .kind = "mlp",
                                   .manifest = "{}",
                                   .weights_path = "g-again.safetensors",
                                   .bytes = 10,
                                   .sha256 = hex,
                                   .publish = true};
    ck_assert_int_eq(gf_store_version_deploy(s, &again, NULL, &err), GF_ERR_EXISTS);
    again.version = 2;
    ck_assert_int_eq(gf_store_version_deploy(s, &again, NULL, &err), GF_OK);
    sqlite3_close(db);
    st_close(s);
}
END_TEST

/* Start-up recovery reads no file whose identity (size, mtime, inode) is as
 * published: a change that keeps the identity (the same size written in
 * place with the mtime put back) goes unseen at start and is caught by the
 * full check; a file whose identity changed but whose content is right (a
 * copy) is hashed once, and its new identity recorded. */
START_TEST(test_identity_checks)
{
    gf_store *s = st_open(dbpath, NULL);
    deploy(s, "kept", 1, 100000, true);
    deploy(s, "copied", 1, 100000, true);
    deploy(s, "tampered", 1, 100000, true);
    st_close(s);

    /* tampered: a byte changed in place, the mtime restored */
    char *tp = gf_test_path(tmpdir, "tampered-v1.safetensors");
    struct stat before;
    ck_assert_int_eq(stat(tp, &before), 0);
    FILE *f = fopen(tp, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, 777, SEEK_SET);
    fputc(0x55, f);
    fclose(f);
    struct timespec times[2] = {before.st_atim, before.st_mtim};
    ck_assert_int_eq(utimensat(AT_FDCWD, tp, times, 0), 0);
    /* copied: the same bytes in a new file (a new inode) */
    char *cp = gf_test_path(tmpdir, "copied-v1.safetensors");
    char *cp2 = gf_test_path(tmpdir, "copied-v1.tmp");
    size_t n;
    char *data = gf_test_read_file(cp, &n);
    gf_test_write_file(cp2, data, n);
    free(data);
    ck_assert_int_eq(rename(cp2, cp), 0);

    s = st_open(dbpath, NULL);
    gf_store_catalog *cat;
    gf_err err;
    ck_assert_int_eq(gf_store_recover(s, tmpdir, &cat, &err), GF_OK);
    ck_assert_uint_eq(cat->broken_now, 0); /* the tampered one looks as published */
    ck_assert_uint_eq(cat->hashed_now, 1); /* only the copy was read */
    gf_store_version_info *tampered = NULL;
    for (size_t i = 0; i < cat->n; i++) {
        gf_store_version_info *v = &cat->versions[i];
        ck_assert_int_eq(v->state, GF_STORE_VERSION_READY);
        ck_assert(v->hashed_now == (strcmp(v->function, "copied") == 0));
        if (strcmp(v->function, "tampered") == 0)
            tampered = v;
    }
    ck_assert_ptr_nonnull(tampered);
    /* the copy's new identity is recorded: the next start reads nothing */
    gf_store_catalog *cat2;
    ck_assert_int_eq(gf_store_recover(s, tmpdir, &cat2, &err), GF_OK);
    ck_assert_uint_eq(cat2->hashed_now, 0);
    gf_store_catalog_free(cat2);
    sqlite3 *db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(st_q_int(db, "SELECT checked_at > created_at FROM function_versions"
                                  " WHERE function = 'copied'"),
                     1);
    sqlite3_close(db);

    /* the full check finds the tampered byte; the quick one does not */
    gf_store_check_result res;
    ck_assert_int_eq(gf_store_file_check(tp, tampered, GF_STORE_CHECK_QUICK, NULL, &res), GF_OK);
    ck_assert(res.ok && !res.hashed);
    ck_assert_int_eq(gf_store_file_check(tp, tampered, GF_STORE_CHECK_FULL, NULL, &res), GF_OK);
    ck_assert(!res.ok && res.hashed);
    ck_assert_msg(strstr(res.why, "sha256") != NULL, "%s", res.why);
    ck_assert_int_eq(gf_store_version_mark_broken(s, "tampered", 1, res.why, &err), GF_OK);
    /* a good file's check records when it last matched */
    char *kp = gf_test_path(tmpdir, "kept-v1.safetensors");
    gf_store_version_info *kept = &cat->versions[1];
    ck_assert_str_eq(kept->function, "kept");
    ck_assert_int_eq(gf_store_file_check(kp, kept, GF_STORE_CHECK_FULL, NULL, &res), GF_OK);
    ck_assert(res.ok && res.hashed);
    ck_assert_int_eq(gf_store_version_checked(s, "kept", 1, &res.id, true, &err), GF_OK);
    /* a broken version is left alone */
    ck_assert_int_eq(gf_store_version_checked(s, "tampered", 1, &res.id, true, &err),
                     GF_ERR_NOT_FOUND);
    db = st_raw_open(dbpath, SQLITE_OPEN_READONLY);
    ck_assert_int_eq(st_q_int(db, "SELECT checked_at > created_at FROM function_versions"
                                  " WHERE function = 'kept'"),
                     1);
    char *why = st_q_text(db, "SELECT state_reason FROM function_versions"
                              " WHERE function = 'tampered'");
    ck_assert_ptr_nonnull(strstr(why, "sha256"));
    free(why);
    sqlite3_close(db);
    /* a file that is gone or of another size is broken without reading it */
    gf_store_version_info v = *kept;
    v.bytes = 99;
    ck_assert_int_eq(gf_store_file_check(kp, &v, GF_STORE_CHECK_QUICK, NULL, &res), GF_OK);
    ck_assert(!res.ok && !res.hashed);
    ck_assert_ptr_nonnull(strstr(res.why, "has 100000 bytes, recorded 99"));
    ck_assert_int_eq(gf_store_file_check("/nonexistent/w.safetensors", kept, GF_STORE_CHECK_FULL,
                                         NULL, &res),
                     GF_OK);
    ck_assert(!res.ok);
    ck_assert_ptr_nonnull(strstr(res.why, "missing"));
    gf_store_catalog_free(cat);
    free(kp);
    free(tp);
    free(cp);
    free(cp2);
    st_close(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("store_versions");
    TCase *tc = tcase_create("versions");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_refused_rows_with_reasons);
    tcase_add_test(tc, test_delete_one_version);
    tcase_add_test(tc, test_identity_checks);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
