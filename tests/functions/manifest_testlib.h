/* gpufaas tests — parsing manifests in the functions suites: a manifest
 * that must parse (the test fails otherwise) or must be refused with a
 * message that says why. */
#ifndef GF_MANIFEST_TESTLIB_H
#define GF_MANIFEST_TESTLIB_H

#include <check.h>
#include <string.h>

#include "functions/manifest.h"

static inline gf_manifest *parse(const char *json)
{
    gf_manifest *m;
    gf_err err;
    ck_assert_msg(gf_manifest_parse(json, strlen(json), &m, &err) == GF_OK, "%s: %s", json,
                  err.msg);
    return m;
}

static inline void parse_bad(const char *json, const char *expect)
{
    gf_manifest *m = (gf_manifest *)0x1;
    gf_err err;
    gf_err_clear(&err);
    ck_assert_msg(gf_manifest_parse(json, strlen(json), &m, &err) != GF_OK, "accepted: %s", json);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(err.msg, expect) != NULL, "'%s': message '%s' lacks '%s'", json,
                  err.msg, expect);
}

#define IO_OK "\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[-1,4]}]," \
              "\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[-1,3]}]"

#endif /* GF_MANIFEST_TESTLIB_H */
