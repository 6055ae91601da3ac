/* Tests for gateway/core/versions.c, the rules of a function's versions:
 * numbering that never reuses a number, explicit versions, identical
 * redeploys, interface changes, activation and deletion, each with the
 * message a user gets. The rules are a pure function, so these tests give it
 * states and requests directly. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/core/versions.h"
#include "testutil.h"

#define MF_OLD                                                                                 \
    "{\"name\":\"f\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","   \
    "\"shape\":[-1,4]}],\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[-1,2]}]}"

static gf_manifest *mf_parse(const char *text)
{
    gf_manifest *m = NULL;
    gf_err err;
    ck_assert_msg(gf_manifest_parse(text, strlen(text), &m, &err) == GF_OK, "%s", err.msg);
    return m;
}

/* A function with versions 1 (ready), 2 (broken), 3 (ready, current) of the
 * same interface, and number 5 used before (4 and 5 deleted). */
typedef struct rig {
    gf_manifest *mf;
    gf_buf identity;
    gf_ver_entry e[3];
    gf_ver_state s;
} rig;

static void rig_init(rig *r)
{
    memset(r, 0, sizeof *r);
    r->mf = mf_parse(MF_OLD);
    gf_buf_init(&r->identity);
    ck_assert_int_eq(gf_ver_identity(r->mf, &r->identity), GF_OK);
    static const char *const sha[3] = {
        "1111111111111111111111111111111111111111111111111111111111111111",
        "2222222222222222222222222222222222222222222222222222222222222222",
        "3333333333333333333333333333333333333333333333333333333333333333"};
    for (int i = 0; i < 3; i++)
        r->e[i] = (gf_ver_entry){.version = i + 1,
                                 .ready = i != 1,
                                 .current = i == 2,
                                 .sha256 = sha[i],
                                 .identity = r->identity.data,
                                 .mf = r->mf};
    r->s = (gf_ver_state){.function = "f", .live = r->e, .n_live = 3, .max_version = 5};
}

static void rig_deinit(rig *r)
{
    gf_manifest_free(r->mf);
    gf_buf_deinit(&r->identity);
}

static gf_ver_request deploy_of(const rig *r, const char *sha, int64_t version)
{
    return (gf_ver_request){.op = GF_VER_DEPLOY,
                            .version = version,
                            .sha256 = sha,
                            .identity = r->identity.data,
                            .mf = r->mf};
}

#define SHA_NEW "abababababababababababababababababababababababababababababababab"

START_TEST(test_numbering_never_reuses)
{
    rig r;
    rig_init(&r);
    gf_ver_decision d;
    gf_ver_request q = deploy_of(&r, SHA_NEW, 0);
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.status, GF_OK);
    ck_assert_int_eq(d.outcome, GF_VER_CREATE);
    ck_assert_int_eq(d.version, 6); /* after the highest ever used, not after 3 */
    ck_assert(d.changes_current);

    /* a deleted function (no live version) that had 5: the name is free, the
     * numbers continue */
    gf_ver_state gone = {.function = "f", .live = NULL, .n_live = 0, .max_version = 5};
    gf_ver_decide(&gone, &q, &d);
    ck_assert_int_eq(d.status, GF_OK);
    ck_assert_int_eq(d.version, 6);
    /* a name never deployed starts at 1 */
    gf_ver_state fresh = {.function = "g", .max_version = 0};
    gf_ver_decide(&fresh, &q, &d);
    ck_assert_int_eq(d.status, GF_OK);
    ck_assert_int_eq(d.version, 1);
    rig_deinit(&r);
}
END_TEST

START_TEST(test_explicit_versions)
{
    rig r;
    rig_init(&r);
    gf_ver_decision d;
    /* a number never used: taken */
    gf_ver_request q = deploy_of(&r, SHA_NEW, 9);
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.status, GF_OK);
    ck_assert_int_eq(d.outcome, GF_VER_CREATE);
    ck_assert_int_eq(d.version, 9);
    /* held by a live version with other weights: 409 naming the way out */
    q = deploy_of(&r, SHA_NEW, 3);
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.status, GF_ERR_EXISTS);
    ck_assert_ptr_nonnull(strstr(d.why, "already has version 3"));
    ck_assert_ptr_nonnull(strstr(d.why, "version 6"));
    /* used before and deleted: never given again */
    q = deploy_of(&r, SHA_NEW, 4);
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.status, GF_ERR_EXISTS);
    ck_assert_ptr_nonnull(strstr(d.why, "never reused"));
    ck_assert_ptr_nonnull(strstr(d.why, "6 or more"));
    /* the same content under its own number: idempotent */
    q = deploy_of(&r, r.e[0].sha256, 1);
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.status, GF_OK);
    ck_assert_int_eq(d.outcome, GF_VER_EXISTING);
    ck_assert_int_eq(d.version, 1);
    rig_deinit(&r);
}
END_TEST

START_TEST(test_identical_redeploy)
{
    rig r;
    rig_init(&r);
    gf_ver_decision d;
    /* the current version again: nothing changes */
    gf_ver_request q = deploy_of(&r, r.e[2].sha256, 0);
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.status, GF_OK);
    ck_assert_int_eq(d.outcome, GF_VER_EXISTING);
    ck_assert_int_eq(d.version, 3);
    ck_assert(!d.changes_current);
    /* an older version again: it is returned and becomes current */
    q = deploy_of(&r, r.e[0].sha256, 0);
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.outcome, GF_VER_EXISTING);
    ck_assert_int_eq(d.version, 1);
    ck_assert(d.changes_current);
    /* a broken version's content is a new version (the broken file stays) */
    q = deploy_of(&r, r.e[1].sha256, 0);
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.outcome, GF_VER_CREATE);
    ck_assert_int_eq(d.version, 6);
    /* the same weights with another manifest are a new version */
    gf_manifest *m2 = mf_parse("{\"name\":\"f\",\"kind\":\"mlp\",\"max_batch_size\":8,"
                               "\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[-1,4]}],"
                               "\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\","
                               "\"shape\":[-1,2]}]}");
    gf_buf id2;
    gf_buf_init(&id2);
    ck_assert_int_eq(gf_ver_identity(m2, &id2), GF_OK);
    q = (gf_ver_request){GF_VER_DEPLOY, 0, r.e[2].sha256, id2.data, m2, false};
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.status, GF_OK);
    ck_assert_int_eq(d.outcome, GF_VER_CREATE);
    /* the manifest's own version does not count in its identity */
    gf_manifest *m3 = mf_parse("{\"name\":\"f\",\"kind\":\"mlp\",\"version\":3,"
                               "\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[-1,4]}],"
                               "\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\","
                               "\"shape\":[-1,2]}]}");
    gf_buf id3;
    gf_buf_init(&id3);
    ck_assert_int_eq(gf_ver_identity(m3, &id3), GF_OK);
    ck_assert_str_eq(id3.data, r.identity.data);
    gf_buf_deinit(&id2);
    gf_buf_deinit(&id3);
    gf_manifest_free(m2);
    gf_manifest_free(m3);
    rig_deinit(&r);
}
END_TEST

START_TEST(test_interface_change)
{
    rig r;
    rig_init(&r);
    gf_manifest *wide = mf_parse(
        "{\"name\":\"f\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
        "\"shape\":[-1,8]}],\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[-1,2]}]}");
    gf_buf id;
    gf_buf_init(&id);
    ck_assert_int_eq(gf_ver_identity(wide, &id), GF_OK);
    gf_ver_request q = {GF_VER_DEPLOY, 0, SHA_NEW, id.data, wide, false};
    gf_ver_decision d;
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.status, GF_ERR_CONFLICT);
    ck_assert_msg(strstr(d.why, "input 'x': FP32 [-1,4] -> FP32 [-1,8]") != NULL, "%s", d.why);
    ck_assert_ptr_nonnull(strstr(d.why, "interface_change=allow"));
    ck_assert_ptr_nonnull(strstr(d.why, "--allow-interface-change"));
    ck_assert_ptr_nonnull(strstr(d.why, "version 3"));
    q.allow_interface_change = true;
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.status, GF_OK);
    ck_assert_int_eq(d.outcome, GF_VER_CREATE);
    /* without a current version there is no interface to keep */
    r.e[2].current = false;
    q.allow_interface_change = false;
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.status, GF_OK);
    gf_buf_deinit(&id);
    gf_manifest_free(wide);

    /* the differences named: a new output, an output gone, a datatype */
    gf_manifest *a = mf_parse(MF_OLD);
    gf_manifest *b = mf_parse(
        "{\"name\":\"f\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
        "\"shape\":[-1,4]}],\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[-1,2]},"
        "{\"name\":\"z\",\"datatype\":\"INT64\",\"shape\":[-1]}]}");
    gf_manifest *c = mf_parse(
        "{\"name\":\"f\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP16\","
        "\"shape\":[-1,4]}],\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[-1,2]}]}");
    char why[256];
    ck_assert(gf_ver_same_interface(a, a, why, sizeof why));
    ck_assert(!gf_ver_same_interface(a, b, why, sizeof why));
    ck_assert_msg(strstr(why, "a new output 'z' INT64 [-1]") != NULL, "%s", why);
    ck_assert(!gf_ver_same_interface(b, a, why, sizeof why));
    ck_assert_msg(strstr(why, "output 'z': INT64 [-1] is gone") != NULL, "%s", why);
    ck_assert(!gf_ver_same_interface(a, c, why, sizeof why));
    ck_assert_msg(strstr(why, "input 'x': FP32 [-1,4] -> FP16 [-1,4]") != NULL, "%s", why);
    gf_manifest_free(a);
    gf_manifest_free(b);
    gf_manifest_free(c);
    rig_deinit(&r);
}
END_TEST

START_TEST(test_activate)
{
    rig r;
    rig_init(&r);
    gf_ver_decision d;
    gf_ver_request q = {.op = GF_VER_ACTIVATE, .version = 1};
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.status, GF_OK);
    ck_assert_int_eq(d.outcome, GF_VER_CURRENT);
    ck_assert(d.changes_current);
    q.version = 3; /* already current */
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.status, GF_OK);
    ck_assert(!d.changes_current);
    q.version = 2; /* broken */
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.status, GF_ERR_CONFLICT);
    ck_assert_ptr_nonnull(strstr(d.why, "broken"));
    q.version = 4; /* deleted */
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.status, GF_ERR_NOT_FOUND);
    ck_assert_msg(strstr(d.why, "its versions: 1, 2, 3") != NULL, "%s", d.why);
    gf_ver_state gone = {.function = "f", .max_version = 5};
    gf_ver_decide(&gone, &q, &d);
    ck_assert_int_eq(d.status, GF_ERR_NOT_FOUND);
    ck_assert_str_eq(d.why, "function 'f' not found");
    rig_deinit(&r);
}
END_TEST

START_TEST(test_delete)
{
    rig r;
    rig_init(&r);
    gf_ver_decision d;
    gf_ver_request q = {.op = GF_VER_DELETE_VERSION, .version = 1};
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.status, GF_OK);
    ck_assert_int_eq(d.outcome, GF_VER_REMOVE);
    ck_assert(!d.changes_current);
    q.version = 3; /* the current one, while others live */
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.status, GF_ERR_CONFLICT);
    ck_assert_ptr_nonnull(strstr(d.why, "activate another one first"));
    ck_assert_ptr_nonnull(strstr(d.why, "/v1/functions/f/versions/N/activate"));
    q.version = 7;
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.status, GF_ERR_NOT_FOUND);
    /* the only live version: the function goes with it */
    gf_ver_state one = {.function = "f", .live = &r.e[2], .n_live = 1, .max_version = 5};
    q.version = 3;
    gf_ver_decide(&one, &q, &d);
    ck_assert_int_eq(d.status, GF_OK);
    ck_assert_int_eq(d.outcome, GF_VER_REMOVE_ALL);
    q = (gf_ver_request){.op = GF_VER_DELETE};
    gf_ver_decide(&r.s, &q, &d);
    ck_assert_int_eq(d.status, GF_OK);
    ck_assert_int_eq(d.outcome, GF_VER_REMOVE_ALL);
    gf_ver_state gone = {.function = "f", .max_version = 5};
    gf_ver_decide(&gone, &q, &d);
    ck_assert_int_eq(d.status, GF_ERR_NOT_FOUND);
    rig_deinit(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gateway_versions");
    TCase *tc = tcase_create("versions");
    tcase_add_test(tc, test_numbering_never_reuses);
    tcase_add_test(tc, test_explicit_versions);
    tcase_add_test(tc, test_identical_redeploy);
    tcase_add_test(tc, test_interface_change);
    tcase_add_test(tc, test_activate);
    tcase_add_test(tc, test_delete);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
