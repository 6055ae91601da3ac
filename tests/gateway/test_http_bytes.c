/* Tests for BYTES tensors in the HTTP front's parser and renderer
 * (gateway/http/codec.c, render.c): JSON strings and the binary tensor data
 * extension's length-prefixed elements in, both out, every malformed
 * serialization a 400 naming the input. No core, no sockets; the stock
 * tritonclient's side is in tests/gateway/triton_tools_test.py. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/tensor.h"
#include "gateway/http/codec.h"
#include "gateway/http/http.h"
#include "testutil.h"

static gf_status parse_bin(const char *json, const void *bin, size_t bin_len, bool v1,
                           gf_codec_request *r, gf_err *err)
{
    size_t jl = strlen(json);
    char *body = malloc(jl + bin_len + 1);
    memcpy(body, json, jl);
    if (bin_len > 0)
        memcpy(body + jl, bin, bin_len);
    char hlen[24];
    snprintf(hlen, sizeof hlen, "%zu", jl);
    gf_codec_opts o = {.half_as_json = v1};
    gf_err_clear(err);
    gf_status st = gf_codec_request_parse(body, jl + bin_len, bin != NULL ? hlen : NULL, &o, r,
                                          err);
    free(body);
    return st;
}

static void expect_bad(const char *json, const void *bin, size_t bin_len, const char *want)
{
    gf_codec_request r;
    gf_err err;
    gf_status st = parse_bin(json, bin, bin_len, false, &r, &err);
    ck_assert_msg(st != GF_OK, "accepted: %s", json);
    ck_assert_int_eq(gf_http_status_of(st), 400);
    ck_assert_msg(strstr(err.msg, want) != NULL, "message '%s' lacks '%s'", err.msg, want);
    ck_assert_ptr_null(r.inputs);
}

/* "ab", "", "xyz" serialised */
static const unsigned char k_three[] = {2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0,
                                        3, 0, 0, 0, 'x', 'y', 'z'};

START_TEST(test_json_strings)
{
    const char *body = "{\"inputs\":[{\"name\":\"t\",\"datatype\":\"BYTES\",\"shape\":[2,2],"
                       "\"data\":[[\"ab\",\"\"],[\"\\u00e9\\u0000z\",\"\\\"q\\\"\"]]}]}";
    gf_codec_request r;
    gf_err err;
    ck_assert_msg(parse_bin(body, NULL, 0, false, &r, &err) == GF_OK, "%s", err.msg);
    ck_assert_uint_eq(r.n_inputs, 1);
    const gf_tensor *t = &r.inputs[0].t;
    ck_assert_int_eq(t->dtype, GF_DT_BYTES);
    ck_assert_int_eq(t->rank, 2);
    /* each element: length prefix and the decoded bytes (e9 is two UTF-8 bytes) */
    static const unsigned char want[] = {2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0,
                                         4, 0, 0, 0, 0xc3, 0xa9, 0, 'z',
                                         3, 0, 0, 0, '"', 'q', '"'};
    ck_assert_uint_eq(t->nbytes, sizeof want);
    ck_assert(memcmp(t->data, want, sizeof want) == 0);
    gf_codec_request_deinit(&r);
    /* flat data for a [3] shape, also through /v1 */
    const char *flat = "{\"inputs\":[{\"name\":\"t\",\"datatype\":\"BYTES\",\"shape\":[3],"
                       "\"data\":[\"ab\",\"\",\"xyz\"]}]}";
    ck_assert(parse_bin(flat, NULL, 0, true, &r, &err) == GF_OK);
    ck_assert_uint_eq(r.inputs[0].t.nbytes, sizeof k_three);
    ck_assert(memcmp(r.inputs[0].t.data, k_three, sizeof k_three) == 0);
    gf_codec_request_deinit(&r);

#define IN(rest) "{\"inputs\":[{\"name\":\"t\",\"datatype\":\"BYTES\"," rest "}]}"
    expect_bad(IN("\"shape\":[3],\"data\":[\"a\",\"b\"]"), NULL, 0,
               "input 't': data has 2 elements but shape [3] needs 3");
    expect_bad(IN("\"shape\":[2],\"data\":[\"a\",2]"), NULL, 0,
               "input 't': element 1 of data is not a string (BYTES)");
    expect_bad(IN("\"shape\":[1],\"data\":[true]"), NULL, 0, "element 0 of data is not a string");
    expect_bad(IN("\"shape\":[1],\"data\":[null]"), NULL, 0, "data holds null");
    expect_bad(IN("\"shape\":[1],\"data\":[\"\\ud800\"]"), NULL, 0, "");
    expect_bad("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"INT32\",\"shape\":[1],"
               "\"data\":[\"7\"]}]}",
               NULL, 0, "input 'x': element 0 of data is a string, expected INT32");
}
END_TEST

START_TEST(test_binary)
{
    const char *json = "{\"inputs\":[{\"name\":\"t\",\"datatype\":\"BYTES\",\"shape\":[1,3],"
                       "\"parameters\":{\"binary_data_size\":17}},"
                       "{\"name\":\"x\",\"datatype\":\"INT8\",\"shape\":[1],"
                       "\"parameters\":{\"binary_data_size\":1}}]}";
    unsigned char bin[18];
    memcpy(bin, k_three, 17);
    bin[17] = 5;
    gf_codec_request r;
    gf_err err;
    ck_assert_msg(parse_bin(json, bin, sizeof bin, false, &r, &err) == GF_OK, "%s", err.msg);
    ck_assert_uint_eq(r.inputs[0].t.nbytes, 17);
    ck_assert(memcmp(r.inputs[0].t.data, k_three, 17) == 0);
    ck_assert_int_eq(((int8_t *)r.inputs[1].t.data)[0], 5);
    gf_codec_request_deinit(&r);

#define BIN(shape, size) \
    "{\"inputs\":[{\"name\":\"t\",\"datatype\":\"BYTES\",\"shape\":" shape \
    ",\"parameters\":{\"binary_data_size\":" size "}}]}"
    /* the shape holds more elements than the data */
    expect_bad(BIN("[4]", "17"), k_three, 17,
               "input 't': BYTES data of 17 bytes ends after 3 of its 4 elements");
    /* fewer: bytes left over */
    expect_bad(BIN("[2]", "17"), k_three, 17,
               "input 't': BYTES data has 7 bytes after the 2 elements its shape holds");
    /* a length past the end of the tensor (the next tensor's bytes are not its) */
    unsigned char over[8] = {9, 0, 0, 0, 'a', 'b', 'c', 'd'};
    expect_bad(BIN("[1]", "8"), over, 8, "input 't': BYTES element 0 says 9 bytes but only 4");
    unsigned char huge[8] = {0xff, 0xff, 0xff, 0xff, 'a', 'b', 'c', 'd'};
    expect_bad(BIN("[1]", "8"), huge, 8, "says 4294967295 bytes");
    /* binary_data_size past the body */
    expect_bad(BIN("[3]", "18"), k_three, 17, "binary_data_size 18 exceeds the 17 bytes");
    /* a huge shape with little data is refused without allocating for it */
    expect_bad(BIN("[1000000000000]", "17"), k_three, 17, "ends after 3 of its 1000000000000");
    expect_bad(BIN("[0]", "0"), NULL, 0, "has no Inference-Header-Content-Length");
    unsigned char none[1] = {0};
    ck_assert(parse_bin(BIN("[0]", "0"), none, 0, false, &r, &err) == GF_OK);
    ck_assert_uint_eq(r.inputs[0].t.nbytes, 0);
    gf_codec_request_deinit(&r);
}
END_TEST

static gf_gw_result *bytes_result(void)
{
    gf_gw_result *res = calloc(1, sizeof *res);
    snprintf(res->function, sizeof res->function, "strings");
    res->version = 1;
    res->n_outputs = 1;
    res->outputs = calloc(1, sizeof *res->outputs);
    static const unsigned char ser[] = {2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0,
                                        3, 0, 0, 0, 0xff, '"', 'z'}; /* "ab", "", bad UTF-8 */
    void *data = malloc(sizeof ser);
    memcpy(data, ser, sizeof ser);
    int64_t shape[2] = {3, 1};
    gf_tensor_init_bytes(&res->outputs[0].t, 2, shape, data, sizeof ser, NULL);
    res->outputs[0].name = strdup("upper");
    return res;
}

START_TEST(test_render)
{
    gf_gw_result *res = bytes_result();
    gf_buf out;
    gf_buf_init(&out);
    size_t hl;
    gf_err err;
    ck_assert(gf_codec_render_v2(res, "strings", NULL, &out, &hl, &err) == GF_OK);
    ck_assert_uint_eq(hl, 0);
    json_error_t je;
    json_t *j = json_loadb(out.data, out.len, 0, &je);
    ck_assert_msg(j != NULL, "%s: %s", je.text, out.data);
    json_t *o = json_array_get(json_object_get(j, "outputs"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(o, "datatype")), "BYTES");
    json_t *d = json_object_get(o, "data");
    ck_assert_uint_eq(json_array_size(d), 3);
    ck_assert_str_eq(json_string_value(json_array_get(d, 0)), "ab");
    ck_assert_str_eq(json_string_value(json_array_get(d, 1)), "");
    ck_assert_str_eq(json_string_value(json_array_get(d, 2)), "\xef\xbf\xbd\"z"); /* U+FFFD */
    json_decref(j);

    /* binary: the serialization as it is, announced by its size */
    gf_codec_request req;
    const char *body = "{\"inputs\":[{\"name\":\"t\",\"datatype\":\"BYTES\",\"shape\":[1],"
                       "\"data\":[\"a\"]}],\"outputs\":[{\"name\":\"upper\","
                       "\"parameters\":{\"binary_data\":true}}]}";
    ck_assert(parse_bin(body, NULL, 0, false, &req, &err) == GF_OK);
    gf_buf_reset(&out);
    ck_assert(gf_codec_render_v2(res, "strings", &req, &out, &hl, &err) == GF_OK);
    ck_assert_uint_eq(out.len, hl + res->outputs[0].t.nbytes);
    ck_assert(memcmp(out.data + hl, res->outputs[0].t.data, res->outputs[0].t.nbytes) == 0);
    j = json_loadb(out.data, hl, 0, &je);
    o = json_array_get(json_object_get(j, "outputs"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(o, "parameters"),
                                                        "binary_data_size")),
                     17);
    json_decref(j);
    gf_codec_request_deinit(&req);

    /* classification of strings is refused, naming the output */
    body = "{\"inputs\":[{\"name\":\"t\",\"datatype\":\"BYTES\",\"shape\":[1],\"data\":[\"a\"]}],"
           "\"outputs\":[{\"name\":\"upper\",\"parameters\":{\"classification\":2}}]}";
    ck_assert(parse_bin(body, NULL, 0, false, &req, &err) == GF_OK);
    gf_buf_reset(&out);
    gf_status st = gf_codec_render_v2(res, "strings", &req, &out, &hl, &err);
    ck_assert_int_eq(gf_http_status_of(st), 400);
    ck_assert_msg(strstr(err.msg, "output 'upper': classification needs a numeric output") !=
                      NULL, "%s", err.msg);
    gf_codec_request_deinit(&req);

    /* /v1: JSON strings too */
    gf_buf_reset(&out);
    ck_assert(gf_codec_render_v1(res, NULL, &out, &err) == GF_OK);
    ck_assert_msg(strstr(out.data, "\"datatype\":\"BYTES\",\"shape\":[3,1],\"data\":[\"ab\",\"\","
                                   "\"\xef\xbf\xbd\\\"z\"]") != NULL, "%s", out.data);
    gf_buf_deinit(&out);
    gf_gw_tensors_free(res->outputs, res->n_outputs);
    free(res);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http_bytes");
    TCase *tc = tcase_create("bytes");
    tcase_add_test(tc, test_json_strings);
    tcase_add_test(tc, test_binary);
    tcase_add_test(tc, test_render);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
