/* Tests for BYTES tensors in worker frames (runtime/ipc.c): a BYTES tensor
 * crosses INFER and RESULT as its serialization, and a frame whose
 * serialization is broken (an element running past the tensor, too few or
 * too many elements for its shape) is refused by the encoder and by the
 * decoder, which walks every element before anything else does. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "core/tensor.h"
#include "ipc.h"
#include "testutil.h"

/* "ab", "", "xyz" */
static const unsigned char k_three[] = {2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0,
                                        3, 0, 0, 0, 'x', 'y', 'z'};

/* Decode the INFER frame in b; *payload (freed by the caller) holds what the
 * decoded tensors point into. */
static gf_status decode(const gf_buf *b, gf_ipc_infer *m, unsigned char **payload, gf_err *e)
{
    gf_ipc_frame f = {0};
    ck_assert_int_eq(gf_ipc_header_parse((const unsigned char *)b->data, 0, &f.h, e), GF_OK);
    f.payload = aligned_alloc(64, (f.h.payload_len + 63) / 64 * 64);
    memcpy(f.payload, b->data + GF_IPC_HEADER_SIZE, f.h.payload_len);
    *payload = f.payload;
    return gf_ipc_decode_infer(&f, m, e);
}

START_TEST(test_bytes_round_trip)
{
    gf_ipc_tensor t[2] = {{.name = "text"}, {.name = "n"}};
    gf_err e;
    int64_t shape[2] = {1, 3};
    ck_assert_int_eq(gf_tensor_init_bytes(&t[0].t, 2, shape, (void *)k_three, sizeof k_three, &e),
                     GF_OK);
    int32_t n = 7;
    ck_assert_int_eq(gf_tensor_init(&t[1].t, GF_DT_I32, 1, (int64_t[]){1}, &n, GF_MEM_HOST, -1, &e),
                     GF_OK);
    gf_ipc_infer m = {"strings@1", 2, t, 0, 0, NULL};
    gf_buf b;
    gf_buf_init(&b);
    ck_assert_msg(gf_ipc_encode_infer(&b, 9, &m, &e) == GF_OK, "%s", e.msg);
    gf_ipc_infer in;
    unsigned char *p;
    ck_assert_msg(decode(&b, &in, &p, &e) == GF_OK, "%s", e.msg);
    ck_assert_uint_eq(in.n, 2);
    ck_assert_int_eq(in.t[0].t.dtype, GF_DT_BYTES);
    ck_assert_int_eq(in.t[0].t.shape[1], 3);
    ck_assert_uint_eq(in.t[0].t.nbytes, sizeof k_three);
    ck_assert(memcmp(in.t[0].t.data, k_three, sizeof k_three) == 0);
    ck_assert_int_eq(*(int32_t *)in.t[1].t.data, 7);
    gf_ipc_infer_deinit(&in);
    free(p);

    /* the decoder walks the elements: break the serialization in the frame */
    size_t at = (size_t)((const char *)memmem(b.data, b.len, k_three, sizeof k_three) - b.data);
    b.data[at] = 3; /* "ab" claims 3 bytes: the elements no longer end where the tensor does */
    ck_assert_int_eq(decode(&b, &in, &p, &e), GF_ERR_PROTOCOL);
    gf_ipc_infer_deinit(&in); /* a failed decode is deinit'ed too */
    free(p);
    ck_assert_msg(strstr(e.msg, "tensor 'text': BYTES element 1 says") != NULL, "%s", e.msg);
    b.data[at] = 200; /* past the end of the tensor */
    ck_assert_int_eq(decode(&b, &in, &p, &e), GF_ERR_PROTOCOL);
    gf_ipc_infer_deinit(&in); /* a failed decode is deinit'ed too */
    free(p);
    ck_assert_msg(strstr(e.msg, "BYTES element 0 says 200 bytes") != NULL, "%s", e.msg);
    gf_buf_deinit(&b);

    /* the encoder refuses what the decoder would */
    t[0].t.shape[1] = 4;
    gf_buf_init(&b);
    ck_assert_int_eq(gf_ipc_encode_infer(&b, 9, &m, &e), GF_ERR_INVALID);
    ck_assert_msg(strstr(e.msg, "INFER: tensor 'text': BYTES data of 17 bytes ends after 3") !=
                      NULL, "%s", e.msg);
    ck_assert_uint_eq(b.len, 0);
    gf_buf_deinit(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ipc_bytes");
    TCase *tc = tcase_create("bytes");
    tcase_add_test(tc, test_bytes_round_trip);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
