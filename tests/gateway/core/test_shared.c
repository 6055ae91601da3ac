/* tests/gateway/core — the shared store (gateway/core/shared.h) on a real
 * directory: its layout, objects, the log (with processes appending at once)
 * and the fold of a log into versions. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/path.h"
#include "store/sha256.h"
#include "gateway/core/shared.h"
#include "testutil.h"

#define MF_A "{\"name\":\"f\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\"," \
             "\"shape\":[-1,4]}],\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[-1,2]}]}"
#define MF_B "{\"name\":\"f\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\"," \
             "\"shape\":[-1,8]}],\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[-1,2]}]}"

static gf_shared *open_at(const char *dir, const char *node)
{
    gf_shared *s = NULL;
    gf_err e;
    ck_assert_msg(gf_shared_open(dir, node, &s, &e) == GF_OK, "%s", gf_err_msg(&e));
    return s;
}

/* A blob for n bytes of content filled with byte c, written to path. */
static gf_shared_blob blob_file(const char *path, size_t n, int c)
{
    char *data = malloc(n);
    memset(data, c, n);
    gf_test_write_file(path, data, n);
    gf_shared_blob b;
    memset(&b, 0, sizeof b);
    gf_sha256_buf(data, n, b.sha256, NULL);
    b.bytes = n;
    free(data);
    return b;
}

static gf_shared_entry deploy_entry(const char *manifest, char sha_digit, int64_t version)
{
    gf_shared_entry e;
    memset(&e, 0, sizeof e);
    e.op = GF_SHARED_DEPLOY;
    e.version = version;
    e.kind = strdup("mlp");
    e.manifest = strdup(manifest);
    memset(e.weights.sha256, sha_digit, 64);
    e.weights.bytes = 100;
    return e;
}

static gf_shared_entry op_entry(gf_shared_op op, int64_t version)
{
    gf_shared_entry e;
    memset(&e, 0, sizeof e);
    e.op = op;
    e.version = version;
    return e;
}

START_TEST(test_open_layout)
{
    char *dir = gf_test_tmpdir();
    gf_shared *s = open_at(dir, "n1");
    gf_shared_free(s);
    char *fmt = gf_test_path(dir, "FORMAT");
    size_t n;
    char *text = gf_test_read_file(fmt, &n);
    ck_assert_str_eq(text, GF_SHARED_FORMAT);
    free(text);
    s = open_at(dir, "n2"); /* a second node opens what the first made */
    gf_shared_free(s);

    /* another format, or not a directory: refused with a reason */
    chmod(fmt, 0644);
    gf_test_write_file(fmt, "gpufaas-shared-store 9\n", 23);
    gf_err e;
    ck_assert_int_eq(gf_shared_open(dir, NULL, &s, &e), GF_ERR_UNSUPPORTED);
    ck_assert_ptr_null(s);
    ck_assert_ptr_nonnull(strstr(gf_err_msg(&e), "gpufaas-shared-store 9"));
    ck_assert_int_eq(gf_shared_open(fmt, NULL, &s, &e), GF_ERR_INVALID);
    char *none = gf_test_path(dir, "absent");
    ck_assert_int_eq(gf_shared_open(none, NULL, &s, &e), GF_ERR_NOT_FOUND);
    free(none);
    free(fmt);
    gf_test_rmtree(dir);
}
END_TEST

START_TEST(test_objects)
{
    char *dir = gf_test_tmpdir();
    char *store = gf_test_path(dir, "shared");
    mkdir(store, 0755);
    gf_shared *s = open_at(store, "n1");
    char *src = gf_test_path(dir, "w.safetensors");
    gf_shared_blob b = blob_file(src, 3u << 20, 'w'); /* more than one copy chunk */
    gf_err e;
    ck_assert_msg(gf_shared_object_put(s, src, &b, &e) == GF_OK, "%s", gf_err_msg(&e));
    ck_assert_int_eq(gf_shared_object_put(s, src, &b, &e), GF_OK); /* already there */

    char rel[160];
    snprintf(rel, sizeof rel, "objects/sha256/%.2s/%s", b.sha256, b.sha256);
    char *obj = gf_test_path(store, rel);
    struct stat st;
    ck_assert_int_eq(stat(obj, &st), 0);
    ck_assert_int_eq((int)st.st_size, 3 << 20);
    ck_assert_int_eq(st.st_mode & 0777, 0444); /* immutable */

    /* fetched into a node's own directory, byte for byte */
    char *dst = gf_test_path(dir, "local.safetensors");
    ck_assert_msg(gf_shared_object_get(s, &b, dst, &e) == GF_OK, "%s", gf_err_msg(&e));
    char hex[GF_SHA256_HEX_LEN];
    uint64_t size;
    ck_assert_int_eq(gf_sha256_file(dst, hex, &size, &e), GF_OK);
    ck_assert_str_eq(hex, b.sha256);
    ck_assert_uint_eq(size, 3u << 20);
    unlink(dst);

    /* a size that does not match is refused on the way in */
    gf_shared_blob wrong = b;
    wrong.bytes = 17;
    wrong.sha256[0] = wrong.sha256[0] == 'a' ? 'b' : 'a';
    ck_assert_int_eq(gf_shared_object_put(s, src, &wrong, &e), GF_ERR_FORMAT);

    /* a corrupt object is refused on the way out, and nothing is left behind */
    chmod(obj, 0644);
    int fd = open(obj, O_WRONLY);
    ck_assert_int_eq((int)pwrite(fd, "X", 1, 12345), 1);
    close(fd);
    ck_assert_int_eq(gf_shared_object_get(s, &b, dst, &e), GF_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(gf_err_msg(&e), "corrupt"));
    ck_assert_int_ne(access(dst, F_OK), 0);
    char *tmp = malloc(strlen(dst) + 16);
    sprintf(tmp, "%s.fetch.tmp", dst);
    ck_assert_int_ne(access(tmp, F_OK), 0);
    free(tmp);

    /* absent, or not a sha256 */
    gf_shared_blob absent = b;
    memset(absent.sha256, '0', 64);
    ck_assert_int_eq(gf_shared_object_get(s, &absent, dst, &e), GF_ERR_NOT_FOUND);
    strcpy(absent.sha256, "../../etc/passwd");
    ck_assert_int_eq(gf_shared_object_get(s, &absent, dst, &e), GF_ERR_INVALID);

    gf_shared_free(s);
    free(obj);
    free(dst);
    free(src);
    free(store);
    gf_test_rmtree(dir);
}
END_TEST

START_TEST(test_log_roundtrip)
{
    char *dir = gf_test_tmpdir();
    gf_shared *s = open_at(dir, "node-a");
    gf_err e;
    gf_shared_entry d = deploy_entry(MF_A, 'a', 0);
    d.n_companions = 1;
    d.companions = calloc(1, sizeof *d.companions);
    strcpy(d.companions[0].suffix, "graph");
    memset(d.companions[0].sha256, 'c', 64);
    d.companions[0].bytes = 7;
    d.interface_change = true;
    uint64_t seq;
    ck_assert_msg(gf_shared_append(s, "f", &d, &seq, &e) == GF_OK, "%s", gf_err_msg(&e));
    ck_assert_uint_eq(seq, 1);
    gf_shared_entry a = op_entry(GF_SHARED_ACTIVATE, 1);
    ck_assert_int_eq(gf_shared_append(s, "f", &a, &seq, &e), GF_OK);
    ck_assert_uint_eq(seq, 2);
    gf_shared_entry x = op_entry(GF_SHARED_DELETE, 1);
    ck_assert_int_eq(gf_shared_append(s, "f", &x, &seq, &e), GF_OK);
    ck_assert_uint_eq(seq, 3);
    ck_assert_int_eq(gf_shared_append(s, "Bad/Name", &x, &seq, &e), GF_ERR_INVALID);

    gf_shared_entry *v;
    size_t n;
    ck_assert_int_eq(gf_shared_read(s, "f", 0, &v, &n, &e), GF_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(v[0].op, GF_SHARED_DEPLOY);
    ck_assert_uint_eq(v[0].seq, 1);
    ck_assert_str_eq(v[0].kind, "mlp");
    ck_assert_str_eq(v[0].node, "node-a");
    ck_assert(v[0].time_ms > 0);
    ck_assert(v[0].interface_change);
    ck_assert_str_eq(v[0].weights.sha256, d.weights.sha256);
    ck_assert_uint_eq(v[0].n_companions, 1);
    ck_assert_str_eq(v[0].companions[0].suffix, "graph");
    ck_assert_uint_eq(v[0].companions[0].bytes, 7);
    ck_assert_ptr_nonnull(strstr(v[0].manifest, "\"shape\":[-1,4]"));
    ck_assert_int_eq(v[1].op, GF_SHARED_ACTIVATE);
    ck_assert_int_eq(v[1].version, 1);
    ck_assert_int_eq(v[2].op, GF_SHARED_DELETE);
    gf_shared_entries_free(v, n);
    ck_assert_int_eq(gf_shared_read(s, "f", 2, &v, &n, &e), GF_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(v[0].seq, 3);
    gf_shared_entries_free(v, n);
    ck_assert_int_eq(gf_shared_read(s, "never", 0, &v, &n, &e), GF_OK);
    ck_assert_uint_eq(n, 0);

    /* an entry not yet visible ends the read there; a bad one is named */
    char *e5 = gf_test_path(dir, "log/f/0000000005.json");
    gf_test_write_file(e5, "{\"op\":\"activate\",\"version\":1}", 29);
    ck_assert_int_eq(gf_shared_read(s, "f", 0, &v, &n, &e), GF_OK);
    ck_assert_uint_eq(n, 3);
    gf_shared_entries_free(v, n);
    char *e4 = gf_test_path(dir, "log/f/0000000004.json");
    gf_test_write_file(e4, "{\"op\":\"explode\",\"version\":1}", 28);
    ck_assert_int_eq(gf_shared_read(s, "f", 3, &v, &n, &e), GF_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(gf_err_msg(&e), "0000000004.json"));
    ck_assert_ptr_nonnull(strstr(gf_err_msg(&e), "explode"));

    char **names;
    ck_assert_int_eq(gf_shared_names(s, &names, &n, &e), GF_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(names[0], "f");
    free(names[0]);
    free(names);

    /* a store that cannot be read says so */
    char *logf = gf_test_path(dir, "log/f"), *aside = gf_test_path(dir, "aside");
    ck_assert_int_eq(rename(logf, aside), 0);
    gf_test_write_file(logf, "x", 1);
    ck_assert_int_eq(gf_shared_read(s, "f", 0, &v, &n, &e), GF_ERR_IO);
    ck_assert_ptr_nonnull(strstr(gf_err_msg(&e), "log/f"));

    gf_shared_entry_deinit(&d);
    gf_shared_free(s);
    free(e4);
    free(e5);
    free(logf);
    free(aside);
    gf_test_rmtree(dir);
}
END_TEST

/* Four processes, each with its own handle, append 25 entries to one log at
 * once: 100 entries, numbered 1..100, each exactly once. */
START_TEST(test_log_concurrent)
{
    char *dir = gf_test_tmpdir();
    enum { PROCS = 4, EACH = 25 };
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        if ((pids[p] = fork()) == 0) {
            char node[16];
            snprintf(node, sizeof node, "p%d", p);
            gf_shared *s = NULL;
            if (gf_shared_open(dir, node, &s, NULL) != GF_OK)
                _exit(1);
            for (int k = 1; k <= EACH; k++) {
                gf_shared_entry a = op_entry(GF_SHARED_ACTIVATE, k);
                uint64_t seq;
                if (gf_shared_append(s, "hot", &a, &seq, NULL) != GF_OK)
                    _exit(2);
            }
            gf_shared_free(s);
            _exit(0);
        }
    }
    for (int p = 0; p < PROCS; p++) {
        int st;
        ck_assert_int_eq(waitpid(pids[p], &st, 0), pids[p]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "appender %d failed", p);
    }
    gf_shared *s = open_at(dir, "reader");
    gf_shared_entry *v;
    size_t n;
    gf_err e;
    ck_assert_int_eq(gf_shared_read(s, "hot", 0, &v, &n, &e), GF_OK);
    ck_assert_uint_eq(n, PROCS * EACH);
    int seen[PROCS][EACH + 1];
    memset(seen, 0, sizeof seen);
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(v[i].seq, i + 1);
        int p = v[i].node[1] - '0';
        ck_assert(p >= 0 && p < PROCS && v[i].version >= 1 && v[i].version <= EACH);
        seen[p][v[i].version]++;
    }
    for (int p = 0; p < PROCS; p++)
        for (int k = 1; k <= EACH; k++)
            ck_assert_int_eq(seen[p][k], 1);
    gf_shared_entries_free(v, n);
    /* nothing left in tmp/ */
    char *tmp = gf_test_path(dir, "tmp");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", tmp);
    ck_assert_int_eq(system(cmd), 0);
    free(tmp);
    gf_shared_free(s);
    gf_test_rmtree(dir);
}
END_TEST

static void fold_one(gf_shared_fold *f, gf_shared_entry e, gf_shared_outcome *o)
{
    e.seq = f->seq + 1;
    gf_err err;
    ck_assert_msg(gf_shared_fold_apply(f, &e, o, &err) == GF_OK, "%s", gf_err_msg(&err));
    gf_shared_entry_deinit(&e);
}

/* The fold applies a single node's rules (gf_ver_decide): the same
 * outcomes, numbers and messages as tests/gateway/test_http_versions.c sees
 * from one gateway. */
START_TEST(test_fold_rules)
{
    gf_shared_fold f;
    gf_shared_fold_init(&f, "f");
    gf_shared_outcome o;
    fold_one(&f, deploy_entry(MF_A, 'a', 0), &o);
    ck_assert_int_eq(o.status, GF_OK);
    ck_assert_int_eq(o.version, 1);
    ck_assert_int_eq(f.current, 1);
    fold_one(&f, deploy_entry(MF_A, 'b', 0), &o); /* new weights: the next version */
    ck_assert_int_eq(o.version, 2);
    ck_assert_int_eq(f.current, 2);
    fold_one(&f, deploy_entry(MF_A, 'a', 0), &o); /* identical to v1: that one, made current */
    ck_assert_int_eq(o.status, GF_OK);
    ck_assert(o.identical);
    ck_assert_int_eq(o.version, 1);
    ck_assert_int_eq(f.current, 1);
    ck_assert_uint_eq(f.n_versions, 2);
    fold_one(&f, deploy_entry(MF_A, 'c', 2), &o); /* a number a version holds */
    ck_assert_int_eq(o.status, GF_ERR_EXISTS);
    ck_assert_msg(strstr(o.message, "already has version 2") != NULL &&
                      strstr(o.message, "version 3") != NULL, "%s", o.message);
    fold_one(&f, deploy_entry(MF_B, 'd', 0), &o); /* another interface, not allowed */
    ck_assert_int_eq(o.status, GF_ERR_CONFLICT);
    ck_assert_msg(strstr(o.message, "interface_change=allow") != NULL, "%s", o.message);
    ck_assert_int_eq(f.current, 1);
    fold_one(&f, op_entry(GF_SHARED_ACTIVATE, 2), &o); /* roll forward */
    ck_assert_int_eq(o.status, GF_OK);
    ck_assert_int_eq(f.current, 2);
    fold_one(&f, op_entry(GF_SHARED_DELETE_VERSION, 2), &o); /* the current one */
    ck_assert_int_eq(o.status, GF_ERR_CONFLICT);
    ck_assert_msg(strstr(o.message, "activate another") != NULL, "%s", o.message);
    fold_one(&f, op_entry(GF_SHARED_ACTIVATE, 1), &o); /* roll back */
    ck_assert_int_eq(f.current, 1);
    fold_one(&f, op_entry(GF_SHARED_DELETE_VERSION, 2), &o);
    ck_assert_int_eq(o.status, GF_OK);
    ck_assert_ptr_null(gf_shared_fold_find(&f, 2));
    fold_one(&f, op_entry(GF_SHARED_ACTIVATE, 2), &o);
    ck_assert_int_eq(o.status, GF_ERR_NOT_FOUND);
    ck_assert_msg(strstr(o.message, "its versions: 1") != NULL, "%s", o.message);
    gf_shared_entry ic = deploy_entry(MF_B, 'd', 0);
    ic.interface_change = true;
    fold_one(&f, ic, &o);
    ck_assert_int_eq(o.status, GF_OK);
    ck_assert_int_eq(o.version, 3); /* numbers are never reused */
    ck_assert_int_eq(gf_shared_fold_find(&f, 0)->version, 3);
    fold_one(&f, deploy_entry(MF_B, 'd', 3), &o); /* the same, naming its own number */
    ck_assert_int_eq(o.status, GF_OK);
    ck_assert(o.identical);
    ck_assert_int_eq(o.version, 3);
    fold_one(&f, op_entry(GF_SHARED_DELETE, 3), &o);
    ck_assert_int_eq(o.status, GF_OK);
    ck_assert_int_eq(f.current, 0);
    ck_assert_ptr_null(gf_shared_fold_find(&f, 0));
    fold_one(&f, op_entry(GF_SHARED_DELETE, 3), &o);
    ck_assert_int_eq(o.status, GF_ERR_NOT_FOUND);
    fold_one(&f, deploy_entry(MF_B, 'e', 1), &o); /* a number used before the delete */
    ck_assert_int_eq(o.status, GF_ERR_EXISTS);
    ck_assert_msg(strstr(o.message, "never reused") != NULL, "%s", o.message);
    fold_one(&f, deploy_entry(MF_A, 'e', 0), &o); /* the name is free; numbers go on */
    ck_assert_int_eq(o.status, GF_OK);             /* (any interface: nothing is current) */
    ck_assert_int_eq(o.version, 4);
    ck_assert_int_eq(f.current, 4);
    ck_assert_uint_eq(f.generation, 1);
    fold_one(&f, op_entry(GF_SHARED_DELETE_VERSION, 4), &o); /* the last: the function goes */
    ck_assert_int_eq(o.status, GF_OK);
    ck_assert_int_eq(f.current, 0);
    ck_assert_uint_eq(f.generation, 2);
    fold_one(&f, deploy_entry("{\"name\": 1}", 'f', 0), &o); /* cannot be applied */
    ck_assert_int_eq(o.status, GF_ERR_INVALID);
    ck_assert_int_eq(f.next_version, 5);

    gf_shared_entry late = op_entry(GF_SHARED_ACTIVATE, 1);
    late.seq = f.seq + 2;
    gf_err err;
    ck_assert_int_eq(gf_shared_fold_apply(&f, &late, &o, &err), GF_ERR_INTERNAL);
    gf_shared_entry_deinit(&late);
    gf_shared_fold_deinit(&f);
}
END_TEST

/* Two nodes deploy the same name at once: the log orders them, and every
 * reader's fold gives distinct versions and the same current one. */
START_TEST(test_fold_two_nodes)
{
    char *dir = gf_test_tmpdir();
    pid_t pids[2];
    for (int p = 0; p < 2; p++) {
        if ((pids[p] = fork()) == 0) {
            gf_shared *s = NULL;
            if (gf_shared_open(dir, p == 0 ? "a" : "b", &s, NULL) != GF_OK)
                _exit(1);
            gf_shared_entry d = deploy_entry(MF_A, p == 0 ? 'a' : 'b', 0);
            uint64_t seq;
            gf_status st = gf_shared_append(s, "same", &d, &seq, NULL);
            gf_shared_entry_deinit(&d);
            gf_shared_free(s);
            _exit(st == GF_OK ? 0 : 2);
        }
    }
    for (int p = 0; p < 2; p++) {
        int st;
        waitpid(pids[p], &st, 0);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    int64_t current[2];
    char first[2][64];
    for (int r = 0; r < 2; r++) {
        gf_shared *s = open_at(dir, "reader");
        gf_shared_entry *v;
        size_t n;
        gf_err e;
        ck_assert_int_eq(gf_shared_read(s, "same", 0, &v, &n, &e), GF_OK);
        ck_assert_uint_eq(n, 2);
        gf_shared_fold f;
        gf_shared_fold_init(&f, "same");
        gf_shared_outcome o[2];
        for (size_t i = 0; i < n; i++)
            ck_assert_int_eq(gf_shared_fold_apply(&f, &v[i], &o[i], &e), GF_OK);
        ck_assert_int_eq(o[0].version, 1);
        ck_assert_int_eq(o[1].version, 2);
        current[r] = f.current;
        snprintf(first[r], sizeof first[r], "%s", gf_shared_fold_find(&f, 1)->deploy->node);
        gf_shared_fold_deinit(&f);
        gf_shared_entries_free(v, n);
        gf_shared_free(s);
    }
    ck_assert_int_eq(current[0], 2);
    ck_assert_int_eq(current[1], 2);
    ck_assert_str_eq(first[0], first[1]);
    gf_test_rmtree(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shared store");
    TCase *tc = tcase_create("shared");
    tcase_add_test(tc, test_open_layout);
    tcase_add_test(tc, test_objects);
    tcase_add_test(tc, test_log_roundtrip);
    tcase_add_test(tc, test_log_concurrent);
    tcase_add_test(tc, test_fold_rules);
    tcase_add_test(tc, test_fold_two_nodes);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
