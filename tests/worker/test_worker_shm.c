/* gpufaas tests — tensors in system shared memory (issue 17 item 8): the
 * INFER/RESULT "shm tensor" records and INFER's output destinations,
 * encoded and decoded (malformed ones refused); then a real gpufaas-worker
 * (path in GF_WORKER) reading an input from a POSIX shared memory object and
 * writing its output into one, checked against the mlp reference, with no
 * user-space copy in the worker (its STATS), and every bad span answered
 * with ERROR while it keeps serving. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/tensor.h"
#include "mlp.h"
#include "testutil.h"
#include "wharness.h"

#define RECV_MS 30000 /* generous: sanitizer builds on 2 busy cores */

/* ---- the codec ---------------------------------------------------------------------- */

static gf_ipc_frame frame_of(gf_buf *b)
{
    gf_ipc_frame f = {0};
    ck_assert_int_eq(gf_ipc_header_parse((const unsigned char *)b->data, 0, &f.h, NULL), GF_OK);
    f.payload = malloc(f.h.payload_len);
    ck_assert_ptr_nonnull(f.payload);
    memcpy(f.payload, b->data + GF_IPC_HEADER_SIZE, f.h.payload_len);
    return f;
}

START_TEST(test_codec_shm_roundtrip)
{
    float inl[4] = {1, 2, 3, 4};
    gf_ipc_tensor t[2] = {{.name = "a"}, {.name = "b", .shm_key = "/obj", .shm_offset = 4096}};
    int64_t s[2] = {2, 2};
    ck_assert_int_eq(gf_tensor_init(&t[0].t, GF_DT_F32, 2, s, inl, GF_MEM_HOST, -1, NULL), GF_OK);
    ck_assert_int_eq(gf_tensor_init(&t[1].t, GF_DT_F32, 2, s, NULL, GF_MEM_HOST, -1, NULL),
                     GF_OK);
    gf_ipc_shm_dest d[2] = {{0, "/out", 64, 16}, {2, "/out2", 0, 1 << 20}};
    gf_ipc_infer m = {"f@1", 2, t, 0x5, 2, d};
    gf_buf b;
    gf_buf_init(&b);
    gf_err e;
    ck_assert_int_eq(gf_ipc_encode_infer(&b, 7, &m, &e), GF_OK);
    /* the shm tensor's 16 bytes are not in the frame: only the inline one's */
    gf_ipc_frame f = frame_of(&b);
    gf_ipc_infer out;
    ck_assert_msg(gf_ipc_decode_infer(&f, &out, &e) == GF_OK, "%s", e.msg);
    ck_assert_uint_eq(out.n, 2);
    ck_assert_ptr_null(out.t[0].shm_key);
    ck_assert_mem_eq(out.t[0].t.data, inl, sizeof inl);
    ck_assert_str_eq(out.t[1].shm_key, "/obj");
    ck_assert_uint_eq(out.t[1].shm_offset, 4096);
    ck_assert_ptr_null(out.t[1].t.data);
    ck_assert_uint_eq(out.t[1].t.nbytes, 16);
    ck_assert_int_eq(out.t[1].t.dtype, GF_DT_F32);
    ck_assert_uint_eq(out.outputs, 0x5);
    ck_assert_uint_eq(out.n_dests, 2);
    ck_assert_uint_eq(out.dests[1].output, 2);
    ck_assert_str_eq(out.dests[1].key, "/out2");
    ck_assert_uint_eq(out.dests[1].size, 1 << 20);
    ck_assert_uint_eq(out.dests[0].offset, 64);
    gf_ipc_infer_deinit(&out);
    gf_ipc_frame_deinit(&f);

    /* a RESULT output placed in shared memory */
    gf_buf_reset(&b);
    gf_ipc_result r = {.n = 1, .t = &t[1]};
    ck_assert_int_eq(gf_ipc_encode_result(&b, 7, &r, &e), GF_OK);
    f = frame_of(&b);
    gf_ipc_result rr;
    ck_assert_int_eq(gf_ipc_decode_result(&f, &rr, &e), GF_OK);
    ck_assert_str_eq(rr.t[0].shm_key, "/obj");
    ck_assert_uint_eq(rr.t[0].t.nbytes, 16);
    gf_ipc_result_deinit(&rr);
    gf_ipc_frame_deinit(&f);
    gf_buf_deinit(&b);
}
END_TEST

/* Encoders refuse what decoders would; decoders refuse hand-made bad frames. */
START_TEST(test_codec_shm_refused)
{
    gf_ipc_tensor t = {.name = "a", .shm_key = "/obj"};
    int64_t s[1] = {3};
    ck_assert_int_eq(gf_tensor_init(&t.t, GF_DT_F32, 1, s, NULL, GF_MEM_HOST, -1, NULL), GF_OK);
    gf_buf b;
    gf_buf_init(&b);
    gf_ipc_shm_dest d = {1, "/out", 0, 8};
    gf_ipc_infer m = {"f@1", 1, &t, 0, 1, &d};
    ck_assert_int_eq(gf_ipc_encode_infer(&b, 1, &m, NULL), GF_ERR_INVALID); /* no mask */
    m.outputs = 0x1;
    ck_assert_int_eq(gf_ipc_encode_infer(&b, 1, &m, NULL), GF_ERR_INVALID); /* not in mask */
    m.outputs = 0x2;
    t.t.nbytes = 11; /* not 3 x 4 */
    ck_assert_int_eq(gf_ipc_encode_infer(&b, 1, &m, NULL), GF_ERR_INVALID);
    t.t.nbytes = 12;
    t.shm_key = "";
    ck_assert_int_eq(gf_ipc_encode_infer(&b, 1, &m, NULL), GF_ERR_INVALID);
    t.shm_key = "/obj";
    ck_assert_uint_eq(b.len, 0);
    /* a duplicate destination, and one past the mask, made by hand */
    gf_ipc_shm_dest two[2] = {{1, "/o", 0, 8}, {1, "/p", 0, 8}};
    m.dests = two;
    m.n_dests = 2;
    m.outputs = 0x2;
    ck_assert_int_eq(gf_ipc_encode_infer(&b, 1, &m, NULL), GF_OK);
    gf_ipc_frame f = frame_of(&b);
    gf_ipc_infer out;
    gf_err e;
    ck_assert_int_eq(gf_ipc_decode_infer(&f, &out, &e), GF_ERR_PROTOCOL);
    ck_assert_msg(strstr(e.msg, "two destinations") != NULL, "%s", e.msg);
    gf_ipc_infer_deinit(&out);
    gf_ipc_frame_deinit(&f);
    /* offset + size overflowing */
    gf_buf_reset(&b);
    t.shm_offset = UINT64_MAX - 4;
    m.n_dests = 0;
    m.dests = NULL;
    ck_assert_int_eq(gf_ipc_encode_infer(&b, 1, &m, NULL), GF_OK);
    f = frame_of(&b);
    ck_assert_int_eq(gf_ipc_decode_infer(&f, &out, &e), GF_ERR_PROTOCOL);
    ck_assert_msg(strstr(e.msg, "overflows") != NULL, "%s", e.msg);
    gf_ipc_infer_deinit(&out);
    gf_ipc_frame_deinit(&f);
    gf_buf_deinit(&b);
}
END_TEST

/* ---- a real worker -------------------------------------------------------------------- */

typedef struct {
    char name[64];
    void *p;
    size_t len;
} shm_obj;

static void shm_make(shm_obj *o, const char *tag, size_t len)
{
    snprintf(o->name, sizeof o->name, "/gf_test_wshm_%d_%s", (int)getpid(), tag);
    shm_unlink(o->name);
    int fd = shm_open(o->name, O_RDWR | O_CREAT | O_EXCL, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)len), 0);
    o->p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(o->p, MAP_FAILED);
    o->len = len;
    close(fd);
}

static void shm_drop(shm_obj *o)
{
    munmap(o->p, o->len);
    shm_unlink(o->name);
}

typedef struct {
    gf_wh w;
    char *dir;
    gf_test_mlp m;
    char *path, *manifest;
} wfix;

static void wfix_start(wfix *x)
{
    x->dir = gf_test_tmpdir();
    gf_err e;
    gf_err_clear(&e);
    ck_assert_msg(gf_wh_spawn(&x->w, gf_test_prog("GF_WORKER"), x->dir, NULL, NULL, true,
                              RECV_MS, &e) == GF_OK,
                  "spawn: %s", gf_err_msg(&e));
    int64_t dims[] = {8, 16, 4};
    gf_test_mlp_make(&x->m, 11, 2, dims, false, 4);
    x->path = gf_test_path(x->dir, "shm.safetensors");
    ck_assert_msg(gf_test_mlp_write(&x->m, x->path, GF_DT_F32, &e) == GF_OK, "%s", e.msg);
    x->manifest = gf_test_mlp_manifest(&x->m, "shm");
    gf_ipc_load l = {"shm@1", x->manifest, (uint32_t)strlen(x->manifest), x->path, "",
                     GF_TIER_DEVICE};
    uint64_t id = gf_wh_id(&x->w);
    ck_assert_int_eq(gf_ipc_encode_load(&x->w.out, id, &l, NULL), GF_OK);
    gf_ipc_frame f;
    char msg[512];
    uint32_t code = gf_wh_call(&x->w, id, RECV_MS, &f, msg, sizeof msg);
    ck_assert_msg(code == 0 && f.h.type == GF_IPC_LOADED, "LOAD: %u %s", code, msg);
    gf_ipc_frame_deinit(&f);
}

static void wfix_stop(wfix *x)
{
    ck_assert_int_eq(gf_wh_wait(&x->w, 10000, true), 0);
    gf_wh_free(&x->w);
    gf_test_mlp_free(&x->m);
    free(x->path);
    free(x->manifest);
    gf_test_rmtree(x->dir);
}

/* An INFER of `rows` rows of x: from key at in_off when key is not NULL
 * (else inline from x), the output into dest_key at out_off (out_size
 * bytes) when dest_key is not NULL. Returns 0 and *r (a RESULT) or the
 * ERROR's code with its message in msg. */
static uint32_t infer(wfix *x, const float *xin, int64_t rows, const char *key, uint64_t in_off,
                      const char *dest_key, uint64_t out_off, uint64_t out_size,
                      gf_ipc_frame *f, gf_ipc_result *r, char *msg, size_t cap)
{
    gf_ipc_tensor in = {.name = "x", .shm_key = key, .shm_offset = in_off};
    int64_t shape[2] = {rows, x->m.dims[0]};
    ck_assert_int_eq(gf_tensor_init(&in.t, GF_DT_F32, 2, shape, key != NULL ? NULL : (void *)xin,
                                    GF_MEM_HOST, -1, NULL),
                     GF_OK);
    gf_ipc_shm_dest d = {0, dest_key, out_off, out_size};
    gf_ipc_infer m = {"shm@1", 1, &in, dest_key != NULL ? 1 : 0, dest_key != NULL ? 1 : 0, &d};
    uint64_t id = gf_wh_id(&x->w);
    ck_assert_int_eq(gf_ipc_encode_infer(&x->w.out, id, &m, NULL), GF_OK);
    uint32_t code = gf_wh_call(&x->w, id, RECV_MS, f, msg, cap);
    if (code == 0) {
        ck_assert_int_eq(f->h.type, GF_IPC_RESULT);
        ck_assert_int_eq(gf_ipc_decode_result(f, r, NULL), GF_OK);
    }
    return code;
}

static gf_ipc_stats stats(wfix *x)
{
    uint64_t id = gf_wh_id(&x->w);
    ck_assert_int_eq(gf_ipc_encode_empty(&x->w.out, GF_IPC_GET_STATS, id, NULL), GF_OK);
    gf_ipc_frame f;
    ck_assert_uint_eq(gf_wh_call(&x->w, id, RECV_MS, &f, NULL, 0), 0);
    gf_ipc_stats s;
    ck_assert_int_eq(gf_ipc_decode_stats(&f, &s, NULL), GF_OK);
    gf_ipc_frame_deinit(&f);
    return s;
}

START_TEST(test_worker_shm_io)
{
    wfix x;
    wfix_start(&x);
    enum { ROWS = 3 };
    float xin[ROWS * 8], want[ROWS * 4];
    for (int i = 0; i < ROWS * 8; i++)
        xin[i] = 0.125f * (float)(i % 13) - 0.7f;
    gf_test_mlp_ref_f32(&x.m, xin, ROWS, want);
    shm_obj in, out;
    shm_make(&in, "in", 4096);
    shm_make(&out, "out", 8192);
    memcpy((char *)in.p + 256, xin, sizeof xin);
    gf_ipc_stats s0 = stats(&x);
    gf_ipc_frame f;
    gf_ipc_result r;
    char msg[GF_IPC_MAX_MESSAGE + 1] = "";
    uint32_t code = infer(&x, NULL, ROWS, in.name, 256, out.name, 4096 + 64, 1024, &f, &r, msg,
                          sizeof msg);
    ck_assert_msg(code == 0, "INFER: %u %s", code, msg);
    ck_assert_uint_eq(r.n, 1);
    ck_assert_str_eq(r.t[0].name, "y");
    ck_assert_str_eq(r.t[0].shm_key, out.name);
    ck_assert_uint_eq(r.t[0].shm_offset, 4096 + 64);
    ck_assert_uint_eq(r.t[0].t.nbytes, sizeof want);
    ck_assert_int_eq(r.t[0].t.shape[0], ROWS);
    double rel = gf_test_max_rel_err((const float *)((char *)out.p + 4096 + 64), want, ROWS * 4);
    ck_assert_msg(rel < 1e-4, "output in shared memory: max rel err %g", rel);
    gf_ipc_result_deinit(&r);
    gf_ipc_frame_deinit(&f);
    /* the worker copied no tensor byte in user space: H2D and D2H only */
    gf_ipc_stats s1 = stats(&x);
    ck_assert_uint_eq(s1.copied_in_bytes - s0.copied_in_bytes, 0);
    ck_assert_uint_eq(s1.copied_out_bytes - s0.copied_out_bytes, 0);

    /* the object recreated under the same name (another inode): read afresh */
    float x2[ROWS * 8], want2[ROWS * 4];
    for (int i = 0; i < ROWS * 8; i++)
        x2[i] = 0.3f - 0.05f * (float)i;
    gf_test_mlp_ref_f32(&x.m, x2, ROWS, want2);
    shm_drop(&in);
    shm_make(&in, "in", 8192);
    memcpy((char *)in.p + 4096, x2, sizeof x2);
    code = infer(&x, NULL, ROWS, in.name, 4096, NULL, 0, 0, &f, &r, msg, sizeof msg);
    ck_assert_msg(code == 0, "INFER: %u %s", code, msg);
    ck_assert_ptr_null(r.t[0].shm_key); /* asked for inline */
    rel = gf_test_max_rel_err(r.t[0].t.data, want2, ROWS * 4);
    ck_assert_msg(rel < 1e-4, "input from a recreated object: max rel err %g", rel);
    gf_ipc_result_deinit(&r);
    gf_ipc_frame_deinit(&f);

    /* bad spans from the worker's side: ERROR naming the problem, and it serves on */
    struct {
        const char *key;
        uint64_t off;
        const char *dkey;
        uint64_t doff, dsize;
        const char *needle;
    } bad[] = {
        {in.name, 8192 - 16, NULL, 0, 0, "past the end"},            /* input past the end */
        {"/gf_test_wshm_none", 0, NULL, 0, 0, "cannot open"},        /* no such object */
        {in.name, 0, out.name, 0, 8, "shared_memory_byte_size"},      /* output does not fit */
        {in.name, 0, out.name, 8190, 1024, "past the end"},           /* dest past the end */
        {in.name, 0, "/gf_test_wshm_none", 0, 64, "cannot open"},     /* no dest object */
        {in.name, 0, "bad/name", 0, 64, "cannot open"},               /* not a shm name */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        msg[0] = '\0';
        code = infer(&x, NULL, ROWS, bad[i].key, bad[i].off, bad[i].dkey, bad[i].doff,
                     bad[i].dsize, &f, &r, msg, sizeof msg);
        ck_assert_msg(code == GF_ERR_INVALID, "bad case %zu: answered %u (%s)", i, code, msg);
        ck_assert_msg(strstr(msg, bad[i].needle) != NULL, "bad case %zu: '%s' lacks '%s'", i,
                      msg, bad[i].needle);
    }
    code = infer(&x, xin, ROWS, NULL, 0, NULL, 0, 0, &f, &r, msg, sizeof msg);
    ck_assert_msg(code == 0, "serving after the errors: %u %s", code, msg);
    rel = gf_test_max_rel_err(r.t[0].t.data, want, ROWS * 4);
    ck_assert_msg(rel < 1e-4, "inline after: max rel err %g", rel);
    gf_ipc_result_deinit(&r);
    gf_ipc_frame_deinit(&f);
    /* the gateway's SHM_FORGET (unregistered): the worker unmaps both objects */
    ck_assert_uint_eq(stats(&x).shm_mappings, 2);
    ck_assert_int_eq(gf_ipc_encode_shm_forget(&x.w.out, gf_wh_id(&x.w), in.name, NULL), GF_OK);
    ck_assert_int_eq(gf_ipc_encode_shm_forget(&x.w.out, gf_wh_id(&x.w), out.name, NULL), GF_OK);
    ck_assert_int_eq(gf_wh_send(&x.w, NULL), GF_OK);
    ck_assert_uint_eq(stats(&x).shm_mappings, 0); /* frames are handled in order */
    ck_assert_int_eq(gf_ipc_encode_shm_forget(&x.w.out, 1, "", NULL), GF_ERR_INVALID);
    shm_drop(&in);
    shm_drop(&out);
    wfix_stop(&x);
}
END_TEST

static Suite *shm_suite(void)
{
    Suite *s = suite_create("worker_shm");
    TCase *c = tcase_create("codec");
    tcase_add_test(c, test_codec_shm_roundtrip);
    tcase_add_test(c, test_codec_shm_refused);
    suite_add_tcase(s, c);
    TCase *p = tcase_create("process");
    tcase_set_timeout(p, 120);
    tcase_add_test(p, test_worker_shm_io);
    suite_add_tcase(s, p);
    return s;
}

int main(void)
{
    return gf_test_run_suite(shm_suite());
}
