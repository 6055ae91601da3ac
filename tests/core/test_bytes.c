/* Tests for BYTES tensors' serialization (runtime/core/bytes.c): what is
 * accepted, what is refused and why, spans of elements, appends. The
 * serialization is written out byte by byte here (Triton's format: 4-byte
 * little-endian length, then the bytes); tests/gateway checks it against the
 * stock tritonclient's serialize_byte_tensor. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/tensor.h"
#include "testutil.h"

/* "ab", "", "xyz" */
static const unsigned char k_three[] = {2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0,
                                        3, 0, 0, 0, 'x', 'y', 'z'};

START_TEST(test_check)
{
    gf_err err;
    ck_assert_int_eq(gf_bytes_check(k_three, sizeof k_three, 3, &err), GF_OK);
    ck_assert_int_eq(gf_bytes_check(NULL, 0, 0, &err), GF_OK);
    /* fewer elements than the shape says */
    ck_assert_int_eq(gf_bytes_check(k_three, sizeof k_three, 4, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "ends after 3 of its 4 elements") != NULL, "%s", err.msg);
    /* more bytes than the shape's elements */
    ck_assert_int_eq(gf_bytes_check(k_three, sizeof k_three, 2, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "7 bytes after the 2 elements") != NULL, "%s", err.msg);
    /* a length past the end, every truncation of the buffer */
    for (size_t cut = 1; cut < sizeof k_three; cut++) {
        ck_assert_int_eq(gf_bytes_check(k_three, sizeof k_three - cut, 3, &err), GF_ERR_INVALID);
    }
    ck_assert_int_eq(gf_bytes_check(k_three, 5, 1, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "element 0 says 2 bytes but only 1") != NULL, "%s", err.msg);
    /* a huge length (would wrap a 32-bit sum) and a huge count stay bounded */
    unsigned char huge[8] = {0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4};
    ck_assert_int_eq(gf_bytes_check(huge, sizeof huge, 1, &err), GF_ERR_INVALID);
    ck_assert_int_eq(gf_bytes_check(k_three, sizeof k_three, UINT64_MAX, &err), GF_ERR_INVALID);
    unsigned char zeros[4000] = {0}; /* 1000 empty strings */
    ck_assert_int_eq(gf_bytes_check(zeros, sizeof zeros, 1000, &err), GF_OK);
    ck_assert_int_eq(gf_bytes_check(zeros, sizeof zeros, (uint64_t)1 << 62, &err), GF_ERR_INVALID);
}
END_TEST

START_TEST(test_walk_and_span)
{
    size_t pos = 0;
    const char *e;
    uint32_t n;
    ck_assert(gf_bytes_next(k_three, sizeof k_three, &pos, &e, &n));
    ck_assert(n == 2 && memcmp(e, "ab", 2) == 0);
    ck_assert(gf_bytes_next(k_three, sizeof k_three, &pos, &e, &n));
    ck_assert_uint_eq(n, 0);
    ck_assert(gf_bytes_next(k_three, sizeof k_three, &pos, &e, &n));
    ck_assert(n == 3 && memcmp(e, "xyz", 3) == 0);
    ck_assert(!gf_bytes_next(k_three, sizeof k_three, &pos, &e, &n));
    size_t off, len;
    gf_err err;
    ck_assert_int_eq(gf_bytes_span(k_three, sizeof k_three, 1, 2, &off, &len, &err), GF_OK);
    ck_assert_uint_eq(off, 6);
    ck_assert_uint_eq(len, 11);
    ck_assert_int_eq(gf_bytes_span(k_three, sizeof k_three, 0, 0, &off, &len, &err), GF_OK);
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(gf_bytes_span(k_three, sizeof k_three, 2, 2, &off, &len, &err),
                     GF_ERR_INVALID);
}
END_TEST

START_TEST(test_append_and_tensor)
{
    gf_buf b;
    gf_buf_init(&b);
    gf_err err;
    ck_assert_int_eq(gf_bytes_append(&b, "ab", 2, &err), GF_OK);
    ck_assert_int_eq(gf_bytes_append(&b, NULL, 0, &err), GF_OK);
    ck_assert_int_eq(gf_bytes_append(&b, "xyz", 3, &err), GF_OK);
    ck_assert_uint_eq(b.len, sizeof k_three);
    ck_assert(memcmp(b.data, k_three, sizeof k_three) == 0);
    ck_assert_int_eq(gf_bytes_append(&b, "x", (size_t)UINT32_MAX + 1, &err), GF_ERR_TOO_LARGE);
    ck_assert_uint_eq(b.len, sizeof k_three);

    gf_tensor t;
    int64_t shape[2] = {1, 3};
    ck_assert_int_eq(gf_tensor_init_bytes(&t, 2, shape, b.data, b.len, &err), GF_OK);
    ck_assert_int_eq(t.dtype, GF_DT_BYTES);
    ck_assert_uint_eq(t.nbytes, sizeof k_three);
    ck_assert_int_eq(t.mem, GF_MEM_HOST);
    ck_assert_int_eq(gf_tensor_check_data(&t, &err), GF_OK);
    shape[1] = 2;
    ck_assert_int_eq(gf_tensor_init_bytes(&t, 2, shape, b.data, b.len, &err), GF_ERR_INVALID);
    t.shape[1] = 4;
    ck_assert_int_eq(gf_tensor_check_data(&t, &err), GF_ERR_INVALID);
    /* a numeric tensor: nbytes against its shape */
    float f[6];
    int64_t fs[2] = {2, 3};
    ck_assert_int_eq(gf_tensor_init(&t, GF_DT_F32, 2, fs, f, GF_MEM_HOST, -1, &err), GF_OK);
    ck_assert_int_eq(gf_tensor_check_data(&t, &err), GF_OK);
    t.nbytes = 20;
    ck_assert_int_eq(gf_tensor_check_data(&t, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "20 bytes but its shape and dtype need 24") != NULL, "%s",
                  err.msg);
    gf_buf_deinit(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("core_bytes");
    TCase *tc = tcase_create("bytes");
    tcase_add_test(tc, test_check);
    tcase_add_test(tc, test_walk_and_span);
    tcase_add_test(tc, test_append_and_tensor);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
