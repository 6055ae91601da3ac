/* Tests for the HTTP front's request parser and response renderer
 * (gateway/http/codec.c): no core, no sockets. */
#include <check.h>
#include <inttypes.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/json.h"
#include "core/tensor.h"
#include "gateway/http/codec.h"
#include "gateway/http/http.h"
#include "testutil.h"

/* Parse a v2 (or v1) request; the body is a C string unless len is given. */
static gf_status parse_ex(const char *body, size_t len, const char *hlen, bool v1,
                          gf_codec_request *r, int *status, gf_err *err)
{
    gf_codec_opts o = {.half_as_json = v1, .max_depth = 0};
    gf_err_clear(err);
    gf_status st = gf_codec_request_parse(body, len, hlen, &o, r, err);
    *status = gf_http_status_of(st); /* what the client gets, through the one table */
    return st;
}

static gf_status parse(const char *body, gf_codec_request *r, gf_err *err)
{
    int status;
    gf_status st = parse_ex(body, strlen(body), NULL, false, r, &status, err);
    ck_assert_int_eq(status, st == GF_OK ? 200 : 400);
    return st;
}

/* The request must fail with 400 and a message containing want. */
static void expect_bad_ex(const char *body, size_t len, const char *hlen, bool v1, const char *want)
{
    gf_codec_request r;
    gf_err err;
    int status = 0;
    gf_status st = parse_ex(body, len, hlen, v1, &r, &status, &err);
    ck_assert_msg(st != GF_OK, "accepted: %.200s", body);
    ck_assert_int_eq(status, 400);
    ck_assert_msg(strstr(err.msg, want) != NULL, "message '%s' lacks '%s' (body %.200s)", err.msg,
                  want, body);
    ck_assert_ptr_null(r.inputs);
    ck_assert_ptr_null(r.outputs);
    ck_assert_ptr_null(r.id);
}

static void expect_bad(const char *body, const char *want)
{
    expect_bad_ex(body, strlen(body), NULL, false, want);
}

START_TEST(test_flat_and_nested_fp32)
{
    const char *flat = "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,3],\"datatype\":\"FP32\","
                       "\"data\":[1,2.5,-3,4e2,0.125,-0]}]}";
    /* members in another order, data nested, whitespace everywhere */
    const char *nested = " { \"inputs\" : [ { \"data\" : [ [ 1 , 2.5 , -3 ] , [ 400 , 1.25e-1 , "
                         "-0.0 ] ] , \"datatype\" : \"FP32\" , \"name\" : \"x\" , \"shape\" : [ 2 "
                         ", 3 ] } ] }\n";
    const float want[6] = {1, 2.5f, -3, 400, 0.125f, -0.0f};
    const char *bodies[2] = {flat, nested};
    for (int b = 0; b < 2; b++) {
        gf_codec_request r;
        gf_err err;
        ck_assert_msg(parse(bodies[b], &r, &err) == GF_OK, "%s", err.msg);
        ck_assert_uint_eq(r.n_inputs, 1);
        ck_assert_str_eq(r.inputs[0].name, "x");
        const gf_tensor *t = &r.inputs[0].t;
        ck_assert_int_eq(t->dtype, GF_DT_F32);
        ck_assert_int_eq(t->rank, 2);
        ck_assert_int_eq(t->shape[0], 2);
        ck_assert_int_eq(t->shape[1], 3);
        ck_assert_uint_eq(t->nbytes, 24);
        ck_assert_int_eq(t->mem, GF_MEM_HOST);
        ck_assert(memcmp(t->data, want, sizeof want) == 0);
        ck_assert(signbit(((float *)t->data)[5]));
        ck_assert_ptr_null(r.outputs);
        ck_assert(!r.binary_output);
        gf_codec_request_deinit(&r);
    }
}
END_TEST

START_TEST(test_fp_range_edges)
{
    /* the largest finite values and ones that underflow are representable (rounded) */
    gf_codec_request r;
    gf_err err;
    const char *body =
        "{\"inputs\":[{\"name\":\"f\",\"datatype\":\"FP32\",\"shape\":[3],"
        "\"data\":[3.4028234e38,-3.4028234e38,1e-50]},"
        "{\"name\":\"d\",\"datatype\":\"FP64\",\"shape\":[1],\"data\":[1.7976931348623157e308]}]}";
    ck_assert_msg(parse(body, &r, &err) == GF_OK, "%s", err.msg);
    const float *f = r.inputs[0].t.data;
    ck_assert(f[0] == FLT_MAX && f[1] == -FLT_MAX && f[2] == 0);
    ck_assert(*(const double *)r.inputs[1].t.data == DBL_MAX);
    gf_codec_request_deinit(&r);
}
END_TEST

START_TEST(test_every_dtype)
{
    gf_codec_request r;
    gf_err err;
    const char *body =
        "{\"id\":\"req-7\",\"inputs\":["
        "{\"name\":\"b\",\"datatype\":\"BOOL\",\"shape\":[3],\"data\":[true,false,true]},"
        "{\"name\":\"u8\",\"datatype\":\"UINT8\",\"shape\":[2],\"data\":[0,255]},"
        "{\"name\":\"u16\",\"datatype\":\"UINT16\",\"shape\":[1],\"data\":[65535]},"
        "{\"name\":\"u32\",\"datatype\":\"UINT32\",\"shape\":[1],\"data\":[4294967295]},"
        "{\"name\":\"u64\",\"datatype\":\"UINT64\",\"shape\":[1],\"data\":[18446744073709551615]},"
        "{\"name\":\"i8\",\"datatype\":\"INT8\",\"shape\":[2],\"data\":[-128,127]},"
        "{\"name\":\"i16\",\"datatype\":\"INT16\",\"shape\":[1],\"data\":[-32768]},"
        "{\"name\":\"i32\",\"datatype\":\"INT32\",\"shape\":[1],\"data\":[-2147483648]},"
        "{\"name\":\"i64\",\"datatype\":\"INT64\",\"shape\":[2],"
        "\"data\":[-9223372036854775808,9223372036854775807]},"
        "{\"name\":\"f64\",\"datatype\":\"FP64\",\"shape\":[1],\"data\":[0.1]},"
        "{\"name\":\"scalar\",\"datatype\":\"INT32\",\"shape\":[],\"data\":5},"
        "{\"name\":\"scalar2\",\"datatype\":\"INT32\",\"shape\":[],\"data\":[6]},"
        "{\"name\":\"empty\",\"datatype\":\"FP32\",\"shape\":[0,4],\"data\":[]}"
        "],\"unknown_field\":{\"ignored\":[1,{\"x\":null}]}}";
    ck_assert_msg(parse(body, &r, &err) == GF_OK, "%s", err.msg);
    ck_assert_str_eq(r.id, "req-7");
    ck_assert_uint_eq(r.n_inputs, 13);
    const uint8_t *b = r.inputs[0].t.data;
    ck_assert(b[0] == 1 && b[1] == 0 && b[2] == 1);
    ck_assert_uint_eq(((uint8_t *)r.inputs[1].t.data)[1], 255);
    ck_assert_uint_eq(((uint16_t *)r.inputs[2].t.data)[0], 65535);
    ck_assert_uint_eq(((uint32_t *)r.inputs[3].t.data)[0], 4294967295u);
    ck_assert(((uint64_t *)r.inputs[4].t.data)[0] == UINT64_MAX);
    ck_assert_int_eq(((int8_t *)r.inputs[5].t.data)[0], -128);
    ck_assert_int_eq(((int16_t *)r.inputs[6].t.data)[0], -32768);
    ck_assert_int_eq(((int32_t *)r.inputs[7].t.data)[0], INT32_MIN);
    ck_assert(((int64_t *)r.inputs[8].t.data)[0] == INT64_MIN);
    ck_assert(((int64_t *)r.inputs[8].t.data)[1] == INT64_MAX);
    ck_assert(((double *)r.inputs[9].t.data)[0] == 0.1);
    ck_assert_int_eq(r.inputs[10].t.rank, 0);
    ck_assert_int_eq(((int32_t *)r.inputs[10].t.data)[0], 5);
    ck_assert_int_eq(((int32_t *)r.inputs[11].t.data)[0], 6);
    ck_assert_uint_eq(r.inputs[12].t.nbytes, 0);
    gf_codec_request_deinit(&r);
    gf_codec_request_deinit(&r); /* idempotent */
}
END_TEST

START_TEST(test_outputs_and_parameters)
{
    gf_codec_request r;
    gf_err err;
    const char *body =
        "{\"parameters\":{\"binary_data_output\":true,\"priority\":3,\"x\":\"y\"},"
        "\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],"
        "\"data\":[1],\"parameters\":{\"note\":\"z\"}}],"
        "\"outputs\":[{\"name\":\"probs\",\"parameters\":{\"binary_data\":false}},"
        "{\"name\":\"logits\"},{\"name\":\"h\",\"parameters\":{\"binary_data\":true}}]}";
    ck_assert_msg(parse(body, &r, &err) == GF_OK, "%s", err.msg);
    ck_assert(r.binary_output);
    ck_assert_uint_eq(r.n_outputs, 3);
    ck_assert_str_eq(r.outputs[0].name, "probs");
    ck_assert_int_eq(r.outputs[0].binary, 0);
    ck_assert_int_eq(r.outputs[1].binary, -1);
    ck_assert_int_eq(r.outputs[2].binary, 1);
    gf_codec_request_deinit(&r);

    /* names with escapes are decoded */
    ck_assert(parse("{\"inputs\":[{\"name\":\"caf\\u00e9\\ud83d\\ude00\\n\",\"datatype\":\"INT8\","
                    "\"shape\":[1],\"data\":[1]}]}",
                    &r, &err) == GF_OK);
    ck_assert_str_eq(r.inputs[0].name, "caf\xc3\xa9\xf0\x9f\x98\x80\n");
    gf_codec_request_deinit(&r);
}
END_TEST

/* The arrays of inputs and requested outputs grow as they come: all 64 a
 * manifest may have are kept, in order, with their data; a 65th is refused. */
START_TEST(test_many_inputs_and_outputs)
{
    for (int n = 63; n <= 65; n++) {
        gf_buf b;
        gf_buf_init(&b);
        gf_buf_append_str(&b, "{\"inputs\":[");
        for (int i = 0; i < n; i++)
            gf_buf_printf(&b, "%s{\"name\":\"in%d\",\"datatype\":\"INT32\",\"shape\":[2],"
                          "\"data\":[%d,%d]}", i ? "," : "", i, i, -i);
        gf_buf_append_str(&b, "],\"outputs\":[");
        for (int i = 0; i < (n < 65 ? n : 1); i++)
            gf_buf_printf(&b, "%s{\"name\":\"out%d\"}", i ? "," : "", i);
        gf_buf_append_str(&b, "]}");
        gf_codec_request r;
        gf_err err;
        gf_status st = parse(b.data, &r, &err);
        if (n == 65) {
            ck_assert_int_eq(st, GF_ERR_INVALID);
            ck_assert_msg(strstr(err.msg, "more than 64 inputs") != NULL, "%s", err.msg);
        } else {
            ck_assert_msg(st == GF_OK, "%d: %s", n, err.msg);
            ck_assert_uint_eq(r.n_inputs, (size_t)n);
            ck_assert_uint_eq(r.n_outputs, (size_t)n);
            for (int i = 0; i < n; i++) {
                char name[16];
                snprintf(name, sizeof name, "in%d", i);
                ck_assert_str_eq(r.inputs[i].name, name);
                ck_assert_int_eq(((const int32_t *)r.inputs[i].t.data)[1], -i);
                snprintf(name, sizeof name, "out%d", i);
                ck_assert_str_eq(r.outputs[i].name, name);
                ck_assert_int_eq(r.outputs[i].binary, -1);
                ck_assert_ptr_null(r.outputs[i].shm);
            }
            gf_codec_request_deinit(&r);
        }
        gf_buf_deinit(&b);
    }
}
END_TEST

START_TEST(test_malformed_json)
{
    expect_bad("", "empty body");
    expect_bad("   ", "empty body");
    expect_bad("[1,2]", "must be a JSON object");
    expect_bad("{\"inputs\":[}", "each entry of \"inputs\" must be an object");
    expect_bad("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}",
               "malformed JSON at byte 64: expected ',' or ']'");
    expect_bad("{\"inputs\":[{\"name\":\"x\",}]}", "malformed JSON");
    expect_bad("{\"inputs\":[{\"name\":\"x\" \"datatype\":\"FP32\"}]}", "expected ',' or '}'");
    expect_bad("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[01]}]}",
               "leading zero");
    expect_bad("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1.]}]}",
               "expected a digit after '.'");
    expect_bad("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[NaN]}]}",
               "malformed JSON");
    expect_bad("{\"inputs\":[{\"name\":\"a\\qb\"}]}", "unknown escape");
    expect_bad("{\"inputs\":[{\"name\":\"a\\ud800\"}]}", "lone high surrogate");
    expect_bad("{\"inputs\":[{\"name\":\"a\\udc00\"}]}", "lone low surrogate");
    expect_bad("{\"inputs\":[{\"name\":\"a\xff\"}]}", "invalid UTF-8");
    expect_bad("{\"inputs\":[{\"name\":\"a\nb\"}]}", "control character");
    expect_bad("{\"inputs\":[{\"name\":\"abc", "unterminated string");
    expect_bad("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]} x",
               "unexpected data after the JSON object");
    expect_bad("{\"inputs\":[],\"inputs\":[]}", "\"inputs\" given twice");
    expect_bad("{\"x\":tru}", "expected a value");
    expect_bad("{\"inputs\": 5}", "\"inputs\" must be an array");
    expect_bad("{\"id\": 5, \"inputs\":[]}", "\"id\" must be a string");
}
END_TEST

START_TEST(test_nesting_too_deep)
{
    /* 40 levels inside an ignored member */
    char body[512];
    int n = snprintf(body, sizeof body, "{\"x\":");
    for (int i = 0; i < 40; i++)
        body[n++] = '[';
    for (int i = 0; i < 40; i++)
        body[n++] = ']';
    snprintf(body + n, sizeof body - (size_t)n, "}");
    expect_bad(body, "JSON nesting deeper than 32 levels");
    /* the same bound, from the same lexer, for the bodies read as a tree */
    gf_json_doc *doc;
    gf_err err;
    ck_assert_int_eq(gf_json_parse(body, strlen(body), 32, &doc, &err), GF_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "JSON nesting deeper than 32 levels"), "%s", err.msg);
    ck_assert_int_eq(gf_json_parse(body, strlen(body), 41, &doc, &err), GF_OK);
    gf_json_doc_free(doc);
    ck_assert_int_eq(gf_json_parse("\"[[[[[\"", 7, 1, &doc, &err), GF_OK); /* in a string */
    gf_json_doc_free(doc);

    /* and inside data */
    n = snprintf(body, sizeof body,
                 "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":");
    for (int i = 0; i < 40; i++)
        body[n++] = '[';
    body[n++] = '1';
    for (int i = 0; i < 40; i++)
        body[n++] = ']';
    snprintf(body + n, sizeof body - (size_t)n, "}]}");
    expect_bad(body, "JSON nesting deeper than 32 levels");
}
END_TEST

START_TEST(test_bad_tensors)
{
#define IN(rest) "{\"inputs\":[{\"name\":\"x\"," rest "}]}"
    expect_bad(IN("\"datatype\":\"FP33\",\"shape\":[1],\"data\":[1]"),
               "input 'x': unknown datatype 'FP33'");
    expect_bad(IN("\"datatype\":\"BYTES\",\"shape\":[2],\"data\":[\"a\",1]"),
               "element 1 of data is not a string (BYTES)"); /* more in test_http_bytes */
    expect_bad(IN("\"datatype\":7,\"shape\":[1],\"data\":[1]"), "\"datatype\" must be a string");
    expect_bad(IN("\"shape\":[1],\"data\":[1]"), "input 'x' has no \"datatype\"");
    expect_bad(IN("\"datatype\":\"FP32\",\"data\":[1]"), "input 'x' has no \"shape\"");
    expect_bad(IN("\"datatype\":\"FP32\",\"shape\":[1]"), "input 'x' has no \"data\"");
    expect_bad("{\"inputs\":[{\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}",
               "an input has no \"name\"");
    expect_bad("{\"inputs\":[{\"name\":\"\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}",
               "non-empty string");
    expect_bad("{\"inputs\":[]}", "the request has no inputs");
    expect_bad("{}", "the request has no inputs");
    expect_bad("{\"inputs\":[5]}", "must be an object");
    expect_bad(IN("\"datatype\":\"FP32\",\"shape\":[-1],\"data\":[1]"),
               "shape dimension 0 (-1) is not a non-negative integer");
    expect_bad(IN("\"datatype\":\"FP32\",\"shape\":[1.5],\"data\":[1]"),
               "is not a non-negative integer");
    expect_bad(IN("\"datatype\":\"FP32\",\"shape\":\"[1]\",\"data\":[1]"),
               "shape must be an array of integers");
    expect_bad(IN("\"datatype\":\"FP32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data\":[1]"),
               "more than 8 dimensions");
    expect_bad(IN("\"datatype\":\"FP32\",\"shape\":[2,2],\"data\":[1,2,3]"),
               "input 'x': data has 3 elements but shape [2, 2] needs 4");
    expect_bad(IN("\"datatype\":\"FP32\",\"shape\":[2],\"data\":[[1],[2],[3]]"),
               "data has 3 elements but shape [2] needs 2");
    expect_bad(IN("\"datatype\":\"FP32\",\"shape\":[4294967296,4294967296,4294967296],"
                  "\"data\":[1]"),
               "is too large");
    expect_bad(IN("\"datatype\":\"FP32\",\"shape\":[100000000000],\"data\":[1]"),
               "data has 1 elements but shape [100000000000] needs 100000000000");
    expect_bad(IN("\"datatype\":\"INT32\",\"shape\":[2],\"data\":[1,1.5]"),
               "element 1 of data (1.5) is not an integer, as INT32");
    expect_bad(IN("\"datatype\":\"UINT8\",\"shape\":[1],\"data\":[256]"),
               "element 0 of data (256) is not in the range of UINT8");
    expect_bad(IN("\"datatype\":\"UINT32\",\"shape\":[1],\"data\":[-1]"), "not in the range");
    expect_bad(IN("\"datatype\":\"INT8\",\"shape\":[1],\"data\":[-129]"), "not in the range");
    expect_bad(IN("\"datatype\":\"INT64\",\"shape\":[1],\"data\":[9223372036854775808]"),
               "not in the range");
    /* JSON has no Infinity: a value beyond the datatype's range is refused, not rounded to one */
    expect_bad(IN("\"datatype\":\"FP32\",\"shape\":[2],\"data\":[1,1e39]"),
               "element 1 of data (1e+39) is beyond the range of FP32, not representable in it");
    expect_bad(IN("\"datatype\":\"FP32\",\"shape\":[1],\"data\":[-3.5e38]"),
               "beyond the range of FP32");
    expect_bad(IN("\"datatype\":\"FP64\",\"shape\":[1],\"data\":[1e400]"),
               "element 0 of data is a number beyond the range of FP64, so not representable in FP64");
    {
        char big[10100];
        int n = snprintf(big, sizeof big, "%s", "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
                                                "\"shape\":[1],\"data\":[");
        memset(big + n, '9', 10000);
        snprintf(big + n + 10000, sizeof big - (size_t)n - 10000, "]}]}");
        expect_bad(big, "element 0 of data is a number beyond the range of FP64");
    }
    expect_bad(IN("\"datatype\":\"INT64\",\"shape\":[1],\"data\":[1" "000000000000000000000000000"
                  "00000000000000000000000000000000000000000000000000000000000000000000000000000000"
                  "00000000000000000000000000000000000000000000000000000000000000000000000000000000"
                  "00000000000000000000000000000000000000000000000000000000000000000000000000000000"
                  "0000000000000000000000000000000000000000000000000000000000000000000000000000000]"),
               "element 0 of data is an integer beyond the range of INT64");
    expect_bad(IN("\"datatype\":\"BOOL\",\"shape\":[1],\"data\":[1]"),
               "element 0 of data is not true or false (BOOL)");
    expect_bad(IN("\"datatype\":\"FP32\",\"shape\":[1],\"data\":[true]"),
               "element 0 of data is a boolean, expected FP32");
    expect_bad(IN("\"datatype\":\"FP32\",\"shape\":[1],\"data\":[\"1\"]"),
               "element 0 of data is a string, expected FP32");
    expect_bad(IN("\"datatype\":\"FP32\",\"shape\":[1],\"data\":[null]"), "data holds null");
    expect_bad(IN("\"datatype\":\"FP32\",\"shape\":[1],\"data\":[{}]"), "data holds an object");
    expect_bad(IN("\"datatype\":\"FP16\",\"shape\":[1],\"data\":[1]"),
               "FP16 data must be sent as binary");
    expect_bad(IN("\"datatype\":\"BF16\",\"shape\":[1],\"data\":[1]"),
               "BF16 data must be sent as binary");
    expect_bad(IN("\"datatype\":\"FP32\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]"),
               "\"datatype\" given twice");
    expect_bad("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]},"
               "{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}",
               "input 'x' appears twice");
    expect_bad(IN("\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1],"
                  "\"parameters\":{\"shared_memory_region\":\"r\"}"),
               "shared-memory extension is not supported here"); /* no region table: /v1 */
    expect_bad("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}],"
               "\"outputs\":[{\"name\":\"y\"},{\"name\":\"y\"}]}",
               "output 'y' is requested twice");
    expect_bad("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}],"
               "\"outputs\":[{\"parameters\":{}}]}",
               "has no \"name\"");
    expect_bad("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}],"
               "\"outputs\":[{\"name\":\"y\",\"parameters\":{\"classification\":0}}]}",
               "classification must be a class count >= 1");
    expect_bad(IN("\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1],"
                  "\"parameters\":{\"classification\":2}"),
               "classification is a parameter of an output");
    expect_bad("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}],"
               "\"outputs\":[{\"name\":\"y\",\"parameters\":{\"binary_data\":1}}]}",
               "binary_data must be true or false");
    expect_bad("{\"parameters\":{\"binary_data_output\":\"yes\"},\"inputs\":[]}",
               "binary_data_output must be true or false");
#undef IN
}
END_TEST

START_TEST(test_half_as_json_v1)
{
    gf_codec_request r;
    gf_err err;
    int status;
    const char *body =
        "{\"inputs\":[{\"name\":\"h\",\"datatype\":\"FP16\",\"shape\":[3],"
        "\"data\":[1,0.1,65504]},{\"name\":\"b\",\"datatype\":\"BF16\",\"shape\":[1],"
        "\"data\":[3.140625]}]}";
    ck_assert(parse_ex(body, strlen(body), NULL, true, &r, &status, &err) == GF_OK);
    const uint16_t *h = r.inputs[0].t.data;
    ck_assert_uint_eq(h[0], 0x3c00);
    ck_assert_uint_eq(h[1], gf_f32_to_f16(0.1f));
    ck_assert_uint_eq(h[2], 0x7bff); /* the largest finite half */
    ck_assert(gf_bf16_to_f32(((uint16_t *)r.inputs[1].t.data)[0]) == 3.140625f);
    gf_codec_request_deinit(&r);
    /* one that would round to infinity is refused, not turned into one */
    const char *big = "{\"inputs\":[{\"name\":\"h\",\"datatype\":\"FP16\",\"shape\":[1],"
                      "\"data\":[65520]}]}";
    expect_bad_ex(big, strlen(big), NULL, true, "(65520) is beyond the range of FP16");
    const char *bbig = "{\"inputs\":[{\"name\":\"b\",\"datatype\":\"BF16\",\"shape\":[1],"
                       "\"data\":[-1e39]}]}";
    expect_bad_ex(bbig, strlen(bbig), NULL, true, "beyond the range of BF16");
}
END_TEST

/* A body: JSON header + raw bytes. */
static char *bin_body(const char *json, const void *bin, size_t bin_len, size_t *len, char hlen[24])
{
    size_t jl = strlen(json);
    char *b = malloc(jl + bin_len + 1);
    memcpy(b, json, jl);
    memcpy(b + jl, bin, bin_len);
    b[jl + bin_len] = '\0';
    *len = jl + bin_len;
    snprintf(hlen, 24, "%zu", jl);
    return b;
}

START_TEST(test_binary_extension)
{
    float x[4] = {1.5f, -2, 3, 4};
    uint16_t h[2] = {0x3c00, 0xc000};
    uint8_t bin[16 + 4 + 3];
    memcpy(bin, x, 16);
    memcpy(bin + 16, h, 4);
    bin[20] = 1, bin[21] = 0, bin[22] = 1;
    const char *json = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2,2],"
                       "\"parameters\":{\"binary_data_size\":16}},"
                       "{\"name\":\"j\",\"datatype\":\"INT32\",\"shape\":[1],\"data\":[7]},"
                       "{\"name\":\"h\",\"datatype\":\"FP16\",\"shape\":[2],"
                       "\"parameters\":{\"binary_data_size\":4}},"
                       "{\"name\":\"b\",\"datatype\":\"BOOL\",\"shape\":[3],"
                       "\"parameters\":{\"binary_data_size\":3}}]}";
    size_t len;
    char hlen[24];
    char *body = bin_body(json, bin, sizeof bin, &len, hlen);
    gf_codec_request r;
    gf_err err;
    int status;
    ck_assert_msg(parse_ex(body, len, hlen, false, &r, &status, &err) == GF_OK, "%s", err.msg);
    ck_assert_uint_eq(r.n_inputs, 4);
    ck_assert(memcmp(r.inputs[0].t.data, x, 16) == 0);
    ck_assert_int_eq(((int32_t *)r.inputs[1].t.data)[0], 7);
    ck_assert(memcmp(r.inputs[2].t.data, h, 4) == 0);
    ck_assert(memcmp(r.inputs[3].t.data, bin + 20, 3) == 0);
    gf_codec_request_deinit(&r);

    /* the header length header itself */
    expect_bad_ex(body, len, "abc", false, "Inference-Header-Content-Length 'abc' is not a number");
    expect_bad_ex(body, len, "", false, "is not a number");
    expect_bad_ex(body, len, "-5", false, "is not a number");
    expect_bad_ex(body, len, "0", false, "is out of range");
    expect_bad_ex(body, len, "100000", false,
                  "Inference-Header-Content-Length 100000 is out of "
                  "range: the body has");
    expect_bad_ex(body, len, "99999999999999999999999", false, "is not a number");
    /* a header that cuts the JSON short */
    expect_bad_ex(body, len, "10", false, "\"inputs\" must be an array");
    /* too few binary bytes, too many */
    expect_bad_ex(body, len - 1, hlen, false, "input 'b': binary_data_size 3 exceeds the 2 bytes");
    free(body);
    uint8_t more[24];
    memcpy(more, bin, sizeof bin);
    more[23] = 9;
    body = bin_body(json, more, sizeof more, &len, hlen);
    expect_bad_ex(body, len, hlen, false,
                  "1 bytes of binary data after the JSON header belong to no input");
    free(body);

    const char *j2 = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2,2],"
                     "\"parameters\":{\"binary_data_size\":12}}]}";
    body = bin_body(j2, bin, 12, &len, hlen);
    expect_bad_ex(body, len, hlen, false,
                  "input 'x': binary_data_size is 12 but shape [2, 2] of FP32 needs 16 bytes");
    free(body);
    const char *j3 = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],"
                     "\"parameters\":{\"binary_data_size\":4}}]}";
    expect_bad_ex(j3, strlen(j3), NULL, false, "has no Inference-Header-Content-Length header");
    const char *j4 =
        "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1],"
        "\"parameters\":{\"binary_data_size\":4}}]}";
    body = bin_body(j4, bin, 4, &len, hlen);
    expect_bad_ex(body, len, hlen, false, "has both \"data\" and the binary_data_size parameter");
    free(body);
    const char *j5 = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],"
                     "\"parameters\":{\"binary_data_size\":-4}}]}";
    body = bin_body(j5, bin, 4, &len, hlen);
    expect_bad_ex(body, len, hlen, false, "binary_data_size must be a non-negative integer");
    free(body);
}
END_TEST

/* Random damage to valid requests: never a crash, never a leak (ASan), and
 * a failure is always a 400 with a message. */
START_TEST(test_mutations)
{
    const char *good =
        "{\"id\":\"a\",\"parameters\":{\"binary_data_output\":false},\"inputs\":["
        "{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2,2],"
        "\"data\":[[1,2],[3.5e-3,-4]]},{\"name\":\"b\",\"datatype\":\"BOOL\","
        "\"shape\":[2],\"data\":[true,false]},{\"name\":\"y\",\"datatype\":\"UINT16\","
        "\"shape\":[1],\"parameters\":{\"binary_data_size\":2}}],"
        "\"outputs\":[{\"name\":\"o\",\"parameters\":{\"binary_data\":true}}]}";
    size_t gl = strlen(good);
    char hlen[24];
    snprintf(hlen, sizeof hlen, "%zu", gl);
    gf_test_rng rng;
    gf_test_rng_seed(&rng, 12345);
    char *buf = malloc(gl + 8);
    const char alphabet[] = "{}[]\",:0123456789.-eE tfnul\\\x80\xff";
    int ok = 0;
    for (int it = 0; it < 20000; it++) {
        memcpy(buf, good, gl);
        size_t jl = gl; /* the JSON part; two binary bytes follow it */
        int edits = 1 + (int)gf_test_rng_below(&rng, 3);
        for (int e = 0; e < edits && jl > 0; e++) {
            size_t at = (size_t)gf_test_rng_below(&rng, jl);
            switch (gf_test_rng_below(&rng, 3)) {
            case 0:
                buf[at] = alphabet[gf_test_rng_below(&rng, sizeof alphabet - 1)];
                break;
            case 1: /* delete a byte */
                memmove(buf + at, buf + at + 1, jl - at - 1);
                jl--;
                break;
            default: /* truncate */
                jl = at;
                break;
            }
        }
        memcpy(buf + jl, "\x01\x02", 2);
        size_t len = jl + 2;
        char hl[24];
        snprintf(hl, sizeof hl, "%zu", jl);
        gf_codec_request r;
        gf_err err;
        int status = 0;
        gf_status st = parse_ex(buf, len, hl, false, &r, &status, &err);
        if (st == GF_OK) {
            ok++;
            ck_assert_int_eq(status, 200);
            gf_codec_request_deinit(&r);
        } else {
            ck_assert_int_eq(status, 400);
            ck_assert(err.msg[0] != '\0');
            ck_assert_ptr_null(r.inputs);
        }
    }
    /* and every prefix */
    for (size_t n = 0; n < gl; n++) {
        gf_codec_request r;
        gf_err err;
        int status;
        ck_assert(parse_ex(good, n, NULL, false, &r, &status, &err) != GF_OK);
        ck_assert_int_eq(status, 400);
    }
    free(buf);
    ck_assert_int_gt(ok, 0); /* some mutations are harmless (a digit for a digit) */
}
END_TEST

/* ---- the status table ------------------------------------------------------------ */

/* Every status has an HTTP code; the ones docs/api.md promises are those. */
START_TEST(test_status_table)
{
    for (int st = 0; st < GF_STATUS_COUNT_; st++) {
        int code = gf_http_status_of((gf_status)st);
        ck_assert_msg(code >= 200 && code <= 599, "%s -> %d", gf_status_name((gf_status)st),
                      code);
        ck_assert_int_eq(code == 200, st == GF_OK);
    }
    static const struct {
        gf_status st;
        int code;
    } want[] = {{GF_ERR_INVALID, 400}, {GF_ERR_FORMAT, 400},    {GF_ERR_NOT_FOUND, 404},
                {GF_ERR_EXISTS, 409},  {GF_ERR_TOO_LARGE, 413}, {GF_ERR_BUSY, 429},
                {GF_ERR_NOMEM, 500},   {GF_ERR_INTERNAL, 500},  {GF_ERR_CLOSED, 503},
                {GF_ERR_STATE, 503},   {GF_ERR_NO_SPACE, 507},  {GF_ERR_PERMISSION, 403},
                {GF_ERR_CONFLICT, 409},  {GF_ERR_OVERLOADED, 503}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_int_eq(gf_http_status_of(want[i].st), want[i].code);
    ck_assert_int_eq(gf_http_status_of((gf_status)999), 500);
}
END_TEST

/* ---- rendering ------------------------------------------------------------------ */

/* The renderers, with the HTTP status the one table gives their result. */
static gf_status render_v2(const gf_gw_result *res, const char *name, const gf_codec_request *req,
                           gf_buf *out, size_t *hl, int *status, gf_err *err)
{
    gf_status st = gf_codec_render_v2(res, name, req, out, hl, err);
    *status = gf_http_status_of(st);
    return st;
}

static gf_status render_v1(const gf_gw_result *res, const gf_codec_request *req, gf_buf *out,
                           int *status, gf_err *err)
{
    gf_status st = gf_codec_render_v1(res, req, out, err);
    *status = gf_http_status_of(st);
    return st;
}

static gf_gw_result *make_result(void)
{
    gf_gw_result *res = calloc(1, sizeof *res);
    snprintf(res->function, sizeof res->function, "digits");
    res->version = 3;
    res->n_outputs = 3;
    res->outputs = calloc(3, sizeof *res->outputs);
    int64_t s1[2] = {1, 4};
    float *p = malloc(16);
    p[0] = 0.1f, p[1] = 1e-30f, p[2] = -0.0f, p[3] = 16777216.0f;
    gf_tensor_init(&res->outputs[0].t, GF_DT_F32, 2, s1, p, GF_MEM_HOST, -1, NULL);
    res->outputs[0].name = strdup("probs");
    int64_t s2[1] = {2};
    uint16_t *h = malloc(4);
    h[0] = 0x3c00, h[1] = 0x3555;
    gf_tensor_init(&res->outputs[1].t, GF_DT_F16, 1, s2, h, GF_MEM_HOST, -1, NULL);
    res->outputs[1].name = strdup("half");
    int64_t s3[1] = {3};
    int64_t *l = malloc(24);
    l[0] = INT64_MIN, l[1] = 0, l[2] = 42;
    gf_tensor_init(&res->outputs[2].t, GF_DT_I64, 1, s3, l, GF_MEM_HOST, -1, NULL);
    res->outputs[2].name = strdup("label");
    res->worker = 1;
    res->cold = true;
    res->batch_size = 4;
    res->queue_us = 10, res->load_us = 20, res->exec_us = 30, res->total_us = 70;
    return res;
}

static void free_result(gf_gw_result *res)
{
    gf_gw_tensors_free(res->outputs, res->n_outputs);
    free(res);
}

START_TEST(test_render_v2)
{
    gf_gw_result *res = make_result();
    gf_buf out;
    gf_buf_init(&out);
    size_t hl;
    int status;
    gf_err err;
    /* no request: all outputs, JSON, except FP16 which is always binary */
    ck_assert(render_v2(res, "digits", NULL, &out, &hl, &status, &err) == GF_OK);
    ck_assert_int_eq(status, 200);
    ck_assert_uint_gt(hl, 0);
    ck_assert_uint_eq(out.len, hl + 4);
    json_error_t je;
    json_t *j = json_loadb(out.data, hl, 0, &je);
    ck_assert_msg(j != NULL, "%s: %.*s", je.text, (int)hl, out.data);
    ck_assert_str_eq(json_string_value(json_object_get(j, "model_name")), "digits");
    ck_assert_str_eq(json_string_value(json_object_get(j, "model_version")), "3");
    ck_assert_ptr_null(json_object_get(j, "id"));
    json_t *outs = json_object_get(j, "outputs");
    ck_assert_uint_eq(json_array_size(outs), 3);
    json_t *o0 = json_array_get(outs, 0);
    ck_assert_str_eq(json_string_value(json_object_get(o0, "datatype")), "FP32");
    json_t *d0 = json_object_get(o0, "data");
    const float want[4] = {0.1f, 1e-30f, -0.0f, 16777216.0f};
    for (int i = 0; i < 4; i++)
        ck_assert((float)json_number_value(json_array_get(d0, (size_t)i)) == want[i]);
    /* -0 is written "-0.0": "-0" would read back as the integer 0 */
    ck_assert(json_is_real(json_array_get(d0, 2)) && signbit(json_real_value(json_array_get(d0, 2))));
    ck_assert(strstr(out.data, "\"data\":[0.1,1e-30,-0.0,16777216]") != NULL);
    json_t *o1 = json_array_get(outs, 1);
    ck_assert_ptr_null(json_object_get(o1, "data"));
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(o1, "parameters"), "binary_data_size")),
        4);
    ck_assert(memcmp(out.data + hl, res->outputs[1].t.data, 4) == 0);
    ck_assert(strstr(out.data, "\"data\":[-9223372036854775808,0,42]") != NULL);
    json_decref(j);

    /* a request: id echoed, outputs selected in its order, binary as asked */
    gf_codec_request req;
    const char *body =
        "{\"id\":\"q\\\"1\",\"parameters\":{\"binary_data_output\":true},"
        "\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}],"
        "\"outputs\":[{\"name\":\"label\",\"parameters\":{\"binary_data\":false}},"
        "{\"name\":\"probs\"}]}";
    ck_assert(parse(body, &req, &err) == GF_OK);
    gf_buf_reset(&out);
    ck_assert(render_v2(res, "digits", &req, &out, &hl, &status, &err) == GF_OK);
    j = json_loadb(out.data, hl, 0, &je);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(json_string_value(json_object_get(j, "id")), "q\"1");
    outs = json_object_get(j, "outputs");
    ck_assert_uint_eq(json_array_size(outs), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(outs, 0), "name")), "label");
    ck_assert_ptr_nonnull(json_object_get(json_array_get(outs, 0), "data"));
    ck_assert_ptr_null(json_object_get(json_array_get(outs, 1), "data"));
    ck_assert_uint_eq(out.len, hl + 16);
    ck_assert(memcmp(out.data + hl, res->outputs[0].t.data, 16) == 0);
    json_decref(j);
    gf_codec_request_deinit(&req);

    /* an output the function does not have */
    body = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}],"
           "\"outputs\":[{\"name\":\"nope\"}]}";
    ck_assert(parse(body, &req, &err) == GF_OK);
    gf_buf_reset(&out);
    ck_assert(render_v2(res, "digits", &req, &out, &hl, &status, &err) != GF_OK);
    ck_assert_int_eq(status, 400);
    ck_assert_msg(strstr(err.msg, "unknown output 'nope' requested (function 'digits' has "
                                  "'probs', 'half', 'label')") != NULL,
                  "%s", err.msg);
    ck_assert_uint_eq(out.len, 0);
    gf_codec_request_deinit(&req);
    gf_buf_deinit(&out);
    free_result(res);
}
END_TEST

START_TEST(test_render_v1)
{
    gf_gw_result *res = make_result();
    gf_buf out;
    gf_buf_init(&out);
    int status;
    gf_err err;
    ck_assert(render_v1(res, NULL, &out, &status, &err) == GF_OK);
    json_error_t je;
    json_t *j = json_loadb(out.data, out.len, 0, &je);
    ck_assert_msg(j != NULL, "%s: %s", je.text, out.data);
    ck_assert_str_eq(json_string_value(json_object_get(j, "function")), "digits");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "version")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "worker")), 1);
    ck_assert(json_is_true(json_object_get(j, "cold")));
    ck_assert_int_eq(json_integer_value(json_object_get(j, "batch_size")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "timing_us"), "total")),
                     70);
    json_t *half = json_array_get(json_object_get(j, "outputs"), 1);
    json_t *hd = json_object_get(half, "data");
    ck_assert_uint_eq(json_array_size(hd), 2);
    ck_assert(json_number_value(json_array_get(hd, 0)) == 1.0);
    ck_assert((float)json_number_value(json_array_get(hd, 1)) == gf_f16_to_f32(0x3555));
    json_decref(j);
    gf_buf_deinit(&out);
    free_result(res);
}
END_TEST

START_TEST(test_render_special_floats)
{
    gf_gw_result res;
    memset(&res, 0, sizeof res);
    snprintf(res.function, sizeof res.function, "f");
    gf_gw_tensor o;
    float v[5] = {NAN, INFINITY, -INFINITY, 3.4028235e38f, 1.4e-45f};
    int64_t s[1] = {5};
    gf_tensor_init(&o.t, GF_DT_F32, 1, s, v, GF_MEM_HOST, -1, NULL);
    o.name = (char *)"o";
    res.outputs = &o;
    res.n_outputs = 1;
    gf_buf out;
    gf_buf_init(&out);
    size_t hl;
    int status;
    gf_err err;
    ck_assert(render_v2(&res, "f", NULL, &out, &hl, &status, &err) == GF_OK);
    ck_assert_uint_eq(hl, 0);
    ck_assert_msg(strstr(out.data, "[NaN,Infinity,-Infinity,3.40282347e+38,1.401298e-45]") != NULL,
                  "%s", out.data);
    gf_buf_deinit(&out);
}
END_TEST

static Suite *codec_suite(void)
{
    Suite *s = suite_create("http_codec");
    TCase *tc = tcase_create("codec");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_flat_and_nested_fp32);
    tcase_add_test(tc, test_every_dtype);
    tcase_add_test(tc, test_fp_range_edges);
    tcase_add_test(tc, test_outputs_and_parameters);
    tcase_add_test(tc, test_many_inputs_and_outputs);
    tcase_add_test(tc, test_malformed_json);
    tcase_add_test(tc, test_nesting_too_deep);
    tcase_add_test(tc, test_bad_tensors);
    tcase_add_test(tc, test_half_as_json_v1);
    tcase_add_test(tc, test_binary_extension);
    tcase_add_test(tc, test_mutations);
    tcase_add_test(tc, test_status_table);
    tcase_add_test(tc, test_render_v2);
    tcase_add_test(tc, test_render_v1);
    tcase_add_test(tc, test_render_special_floats);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return gf_test_run_suite(codec_suite());
}
