/* Tests for runtime/core json: a strict RFC 8259 parser. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/json.h"
#include "testutil.h"

static gf_json_doc *parse_ok(const char *text)
{
    gf_json_doc *doc = NULL;
    gf_err err;
    gf_err_clear(&err);
    gf_status st = gf_json_parse(text, strlen(text), 0, &doc, &err);
    ck_assert_msg(st == GF_OK, "parse of %s failed: %s", text, gf_err_msg(&err));
    return doc;
}

static void parse_bad(const char *text, size_t len, const char *expect)
{
    gf_json_doc *doc = NULL;
    gf_err err;
    gf_err_clear(&err);
    gf_status st = gf_json_parse(text, len, 0, &doc, &err);
    ck_assert_msg(st == GF_ERR_FORMAT, "'%.*s' should be rejected (got %d)", (int)len, text,
                  (int)st);
    ck_assert_ptr_null(doc);
    ck_assert_msg(strstr(err.msg, expect) != NULL, "'%.*s': message '%s' lacks '%s'", (int)len,
                  text, err.msg, expect);
}

START_TEST(test_values)
{
    gf_json_doc *doc = parse_ok(" {\"a\": [1, -2, 3.5, 1e3, true, false, null, \"x\"], "
                                "\"b\": {}, \"c\": []} ");
    const gf_json *root = gf_json_doc_root(doc);
    ck_assert_int_eq(root->type, GF_JSON_OBJECT);
    ck_assert_uint_eq(root->u.obj.n, 3);
    const gf_json *a = gf_json_get(root, "a");
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(a->type, GF_JSON_ARRAY);
    ck_assert_uint_eq(a->u.arr.n, 8);
    ck_assert(a->u.arr.items[0]->u.num.is_int && a->u.arr.items[0]->u.num.i == 1);
    ck_assert(a->u.arr.items[1]->u.num.is_int && a->u.arr.items[1]->u.num.i == -2);
    ck_assert(!a->u.arr.items[1]->u.num.is_uint);
    ck_assert(!a->u.arr.items[2]->u.num.is_int && a->u.arr.items[2]->u.num.d == 3.5);
    ck_assert(!a->u.arr.items[3]->u.num.is_int && a->u.arr.items[3]->u.num.d == 1000.0);
    ck_assert(a->u.arr.items[4]->type == GF_JSON_BOOL && a->u.arr.items[4]->u.b);
    ck_assert(a->u.arr.items[5]->type == GF_JSON_BOOL && !a->u.arr.items[5]->u.b);
    ck_assert_int_eq(a->u.arr.items[6]->type, GF_JSON_NULL);
    ck_assert_str_eq(a->u.arr.items[7]->u.str.s, "x");
    ck_assert_uint_eq(gf_json_get(root, "b")->u.obj.n, 0);
    ck_assert_uint_eq(gf_json_get(root, "c")->u.arr.n, 0);
    ck_assert_ptr_null(gf_json_get(root, "zz"));
    ck_assert_ptr_null(gf_json_get(a, "a")); /* not an object */
    gf_json_doc_free(doc);
}
END_TEST

START_TEST(test_integers)
{
    gf_json_doc *doc = parse_ok("[9223372036854775807, -9223372036854775808, "
                                "18446744073709551615, 18446744073709551616, -0, 0]");
    const gf_json *a = gf_json_doc_root(doc);
    const gf_json *const *it = (const gf_json *const *)a->u.arr.items;
    ck_assert(it[0]->u.num.is_int && it[0]->u.num.i == INT64_MAX);
    ck_assert(it[0]->u.num.is_uint && it[0]->u.num.u == (uint64_t)INT64_MAX);
    ck_assert(it[1]->u.num.is_int && it[1]->u.num.i == INT64_MIN);
    ck_assert(!it[2]->u.num.is_int && it[2]->u.num.is_uint && it[2]->u.num.u == UINT64_MAX);
    ck_assert(!it[3]->u.num.is_int && !it[3]->u.num.is_uint);
    ck_assert(it[3]->u.num.d == 18446744073709551616.0);
    ck_assert(it[4]->u.num.is_uint && it[4]->u.num.u == 0);
    ck_assert(it[5]->u.num.is_int && it[5]->u.num.i == 0);
    gf_json_doc_free(doc);
}
END_TEST

/* Every non-integer number reads as the double strtod gives, bit for bit:
 * the lexer's fast path (short significands, small exponents) and strtod's
 * slow one agree on edge cases and on 50,000 random numbers of every shape. */
static void num_matches_strtod(const char *text)
{
    gf_json_lexer l;
    gf_err err;
    gf_err_clear(&err);
    gf_json_lexer_init(&l, text, strlen(text), 8, &err);
    gf_json_num n;
    ck_assert_msg(gf_json_lex_number(&l, &n) == GF_OK, "%s: %s", text, err.msg);
    double want = strtod(text, NULL);
    ck_assert_msg(memcmp(&n.d, &want, sizeof want) == 0, "%s: %.17g, strtod %.17g", text, n.d,
                  want);
    /* skipping it (grammar only) takes the same bytes */
    size_t end = l.pos;
    gf_json_lexer_init(&l, text, strlen(text), 8, &err);
    ck_assert_int_eq(gf_json_lex_skip(&l), GF_OK);
    ck_assert_uint_eq(l.pos, end);
}

START_TEST(test_numbers_as_strtod)
{
    static const char *const edge[] = {
        "0.0", "-0.0", "0e0", "-0e-5", "1.5", "-2.25e3", "0.1", "0.3", "1e22", "1e23",
        "1e-22", "1e-23", "9007199254740992.5", "9007199254740993e0", "9007199254740992e22",
        "123456789012345678.9", "1234567890123456789.0", "12345678901234567890.0",
        "0.000000000000000000001", "4.9e-324", "2.4703282292062327e-324", "1.7976931348623157e308",
        "1e309", "-1e400", "1e-400", "3.4028235e38", "1.17549435e-38", "0.1e1", "00.5e0",
        "1E+2", "1e+0022", "1e-0022", "5e-1000", "2.2250738585072011e-308",
    };
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
        if (strncmp(edge[i], "00", 2) != 0) /* a leading zero is not JSON */
            num_matches_strtod(edge[i]);
    unsigned seed = 12345;
    for (int i = 0; i < 50000; i++) {
        char t[64];
        int p = 0;
        if (rand_r(&seed) % 2)
            t[p++] = '-';
        int ints = 1 + rand_r(&seed) % 12, fracs = 1 + rand_r(&seed) % 14;
        t[p++] = (char)('1' + rand_r(&seed) % 9);
        if (rand_r(&seed) % 4 == 0) { /* 0.xxx */
            t[p - 1] = '0';
            ints = 1;
        }
        for (int k = 1; k < ints; k++)
            t[p++] = (char)('0' + rand_r(&seed) % 10);
        t[p++] = '.';
        for (int k = 0; k < fracs; k++)
            t[p++] = (char)('0' + rand_r(&seed) % 10);
        if (rand_r(&seed) % 2)
            p += snprintf(t + p, sizeof t - (size_t)p, "e%d", (int)(rand_r(&seed) % 61) - 30);
        t[p] = '\0';
        num_matches_strtod(t);
        /* and a float's shortest forms, as clients print them */
        float f;
        uint32_t bits = (uint32_t)rand_r(&seed) ^ ((uint32_t)rand_r(&seed) << 16);
        memcpy(&f, &bits, sizeof f);
        if (isfinite(f)) {
            snprintf(t, sizeof t, "%.9g", (double)f);
            if (strchr(t, '.') != NULL || strchr(t, 'e') != NULL)
                num_matches_strtod(t);
        }
    }
}
END_TEST

START_TEST(test_strings)
{
    gf_json_doc *doc =
        parse_ok("[\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\", \"\\u00e9\\u20ac\\ud83d\\ude00\", "
                 "\"caf\xc3\xa9\", \"nul\\u0000in\"]");
    const gf_json *a = gf_json_doc_root(doc);
    ck_assert_str_eq(a->u.arr.items[0]->u.str.s, "a\"b\\c/d\b\f\n\r\t");
    ck_assert_str_eq(a->u.arr.items[1]->u.str.s, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    ck_assert_str_eq(a->u.arr.items[2]->u.str.s, "caf\xc3\xa9");
    ck_assert_uint_eq(a->u.arr.items[3]->u.str.len, 6);
    ck_assert(memcmp(a->u.arr.items[3]->u.str.s, "nul\0in", 6) == 0);
    gf_json_doc_free(doc);
}
END_TEST

START_TEST(test_rejects)
{
    parse_bad("", 0, "unexpected end");
    parse_bad("[1,]", 4, "unexpected character");
    parse_bad("{\"a\":1,}", 8, "expected a string key");
    parse_bad("[01]", 4, "leading zero");
    parse_bad("[1.]", 4, "digit after '.'");
    parse_bad("[1e]", 4, "exponent");
    parse_bad("[-]", 3, "expected a digit");
    parse_bad("[NaN]", 5, "unexpected character");
    parse_bad("[tru]", 5, "invalid literal");
    parse_bad("\"abc", 4, "unterminated string");
    parse_bad("\"a\tb\"", 5, "control character");
    parse_bad("\"\\x\"", 4, "unknown escape");
    parse_bad("\"\\u12g4\"", 8, "bad \\u escape");
    parse_bad("\"\\ud800\"", 8, "lone high surrogate");
    parse_bad("\"\\udc00\"", 8, "lone low surrogate");
    parse_bad("\"\xff\"", 3, "invalid UTF-8");
    parse_bad("\"\xc0\xaf\"", 4, "invalid UTF-8");       /* overlong */
    parse_bad("\"\xed\xa0\x80\"", 5, "invalid UTF-8");   /* surrogate */
    parse_bad("{\"a\" 1}", 7, "expected ':'");
    parse_bad("[1 2]", 5, "expected ',' or ']'");
    parse_bad("{} {}", 5, "trailing characters");
    parse_bad("// c\n{}", 7, "unexpected character");
    /* nesting beyond the limit */
    char deep[300];
    memset(deep, '[', 200);
    memset(deep + 200, ']', 100);
    parse_bad(deep, 300, "nesting deeper than 64 levels");
}
END_TEST

START_TEST(test_depth_limit_and_no_nul_termination)
{
    gf_json_doc *doc = NULL;
    gf_err err;
    ck_assert_int_eq(gf_json_parse("[[[1]]]", 7, 3, &doc, &err), GF_OK);
    gf_json_doc_free(doc);
    ck_assert_int_eq(gf_json_parse("[[[[1]]]]", 9, 3, &doc, &err), GF_ERR_FORMAT);
    /* length is honoured: bytes after len are not read */
    const char text[] = {'[', '1', ']', 'x'};
    ck_assert_int_eq(gf_json_parse(text, 3, 0, &doc, &err), GF_OK);
    gf_json_doc_free(doc);
    char *heap = malloc(2);
    memcpy(heap, "12", 2); /* not NUL-terminated: ASan catches an over-read */
    ck_assert_int_eq(gf_json_parse(heap, 2, 0, &doc, &err), GF_OK);
    ck_assert_int_eq(gf_json_doc_root(doc)->u.num.i, 12);
    gf_json_doc_free(doc);
    free(heap);
}
END_TEST

START_TEST(test_duplicates)
{
    gf_json_doc *doc = parse_ok("{\"b\":1,\"a\":2,\"c\":3,\"a\":4}");
    ck_assert_int_eq(gf_json_obj_find_dup(gf_json_doc_root(doc)), 3);
    gf_json_doc_free(doc);
    doc = parse_ok("{\"b\":1,\"a\":2,\"ab\":3}");
    ck_assert_int_eq(gf_json_obj_find_dup(gf_json_doc_root(doc)), -1);
    gf_json_doc_free(doc);
}
END_TEST

START_TEST(test_large_document)
{
    /* many members exercise the arena's block chaining */
    size_t n = 20000, cap = n * 24 + 16, len = 0;
    char *text = malloc(cap);
    text[len++] = '{';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len, "%s\"k%zu\":[%zu]", i ? "," : "", i, i);
    text[len++] = '}';
    gf_json_doc *doc = NULL;
    gf_err err;
    ck_assert_int_eq(gf_json_parse(text, len, 0, &doc, &err), GF_OK);
    const gf_json *root = gf_json_doc_root(doc);
    ck_assert_uint_eq(root->u.obj.n, n);
    ck_assert_int_eq(gf_json_get(root, "k12345")->u.arr.items[0]->u.num.i, 12345);
    ck_assert_int_eq(gf_json_obj_find_dup(root), -1);
    gf_json_doc_free(doc);
    free(text);
}
END_TEST

START_TEST(test_random_bytes_never_crash)
{
    gf_test_rng r;
    gf_test_rng_seed(&r, 7);
    static const char alphabet[] = "{}[]\":,0123456789-+.eEtrufalsn \\u\xc3\xa9";
    for (int iter = 0; iter < 20000; iter++) {
        size_t len = gf_test_rng_below(&r, 40);
        char *buf = malloc(len ? len : 1);
        for (size_t i = 0; i < len; i++)
            buf[i] = alphabet[gf_test_rng_below(&r, sizeof alphabet - 1)];
        gf_json_doc *doc = NULL;
        gf_status st = gf_json_parse(buf, len, 8, &doc, NULL);
        ck_assert(st == GF_OK || st == GF_ERR_FORMAT);
        ck_assert((st == GF_OK) == (doc != NULL));
        gf_json_doc_free(doc);
        free(buf);
    }
}
END_TEST

/* JSON Pointer (RFC 6901): its own examples, what leads nowhere, and the
 * malformed pointers refused. */
START_TEST(test_pointer)
{
    gf_json_doc *d = parse_ok("{\"foo\": [\"bar\", \"baz\"], \"\": 0, \"a/b\": 1, \"m~n\": 8,"
                              " \" \": 7, \"i\\\\j\": 5}");
    const gf_json *root = gf_json_doc_root(d), *v;
    gf_err e;
    ck_assert_int_eq(gf_json_pointer(root, "", &v, &e), GF_OK);
    ck_assert_ptr_eq(v, root);
    ck_assert_int_eq(gf_json_pointer(root, "/foo", &v, &e), GF_OK);
    ck_assert_int_eq(v->type, GF_JSON_ARRAY);
    ck_assert_int_eq(gf_json_pointer(root, "/foo/0", &v, &e), GF_OK);
    ck_assert_str_eq(v->u.str.s, "bar");
    static const struct {
        const char *ptr;
        int64_t want;
    } ints[] = {{"/", 0}, {"/a~1b", 1}, {"/m~0n", 8}, {"/ ", 7}, {"/i\\j", 5}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        ck_assert_int_eq(gf_json_pointer(root, ints[i].ptr, &v, &e), GF_OK);
        ck_assert_msg(v != NULL && v->u.num.i == ints[i].want, "%s", ints[i].ptr);
    }
    static const char *const nowhere[] = {"/foo/2", "/foo/01", "/foo/-", "/foo/0/x", "/nope",
                                          "/a/b", "/foo/99999999999999999999"};
    for (size_t i = 0; i < sizeof nowhere / sizeof nowhere[0]; i++) {
        ck_assert_int_eq(gf_json_pointer(root, nowhere[i], &v, &e), GF_OK);
        ck_assert_msg(v == NULL, "%s", nowhere[i]);
    }
    static const char *const bad[] = {"foo", "/m~2n", "/a~", "/nope/~x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(gf_json_pointer(root, bad[i], &v, &e), GF_ERR_INVALID);
        ck_assert_msg(strstr(e.msg, bad[i]) != NULL, "%s", e.msg);
    }
    gf_json_doc_free(d);
}
END_TEST

START_TEST(test_write_round_trip)
{
    const char *text = "{\"a\":[1,-2,3.5,true,false,null,\"x\\\"y\"],\"b\":{},"
                       "\"big\":18446744073709551615,\"e\":1e300,"
                       "\"inf\":1e400,\"ninf\":-1e400,\"nz\":-0.0,\"iz\":-0}";
    gf_json_doc *doc = parse_ok(text);
    gf_buf b;
    gf_buf_init(&b);
    ck_assert_int_eq(gf_json_write(gf_json_doc_root(doc), &b), GF_OK);
    ck_assert_str_eq(b.data, "{\"a\":[1,-2,3.5,true,false,null,\"x\\\"y\"],\"b\":{},"
                             "\"big\":18446744073709551615,\"e\":1.0000000000000001e+300,"
                             /* not C's "inf": a number that reads back the same */
                             "\"inf\":1e999,\"ninf\":-1e999,\"nz\":-0.0,\"iz\":0}");
    /* what was written parses back to the same text again */
    gf_json_doc *doc2 = parse_ok(b.data);
    gf_buf b2;
    gf_buf_init(&b2);
    ck_assert_int_eq(gf_json_write(gf_json_doc_root(doc2), &b2), GF_OK);
    ck_assert_str_eq(b.data, b2.data);
    gf_buf_deinit(&b);
    gf_buf_deinit(&b2);
    gf_json_doc_free(doc);
    gf_json_doc_free(doc2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("core_json");
    TCase *tc = tcase_create("json");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_values);
    tcase_add_test(tc, test_integers);
    tcase_add_test(tc, test_numbers_as_strtod);
    tcase_add_test(tc, test_strings);
    tcase_add_test(tc, test_rejects);
    tcase_add_test(tc, test_depth_limit_and_no_nul_termination);
    tcase_add_test(tc, test_duplicates);
    tcase_add_test(tc, test_large_document);
    tcase_add_test(tc, test_random_bytes_never_crash);
    tcase_add_test(tc, test_write_round_trip);
    tcase_add_test(tc, test_pointer);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
