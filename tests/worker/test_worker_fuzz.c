/* gpufaas tests — 10,000 random, mutated and truncated frames against real
 * gpufaas-worker processes. Every frame is sent on its own and its outcome
 * checked before the next one:
 *   - a well-formed frame gets its answer (ERROR for nonsense, and a RESULT
 *     that matches the reference whenever the request happens to be valid);
 *   - a malformed or truncated frame gets at most an ERROR, then end of
 *     stream and exit code GF_WORKER_EXIT_PROTOCOL; the worker is restarted;
 *   - nothing hangs: every wait is bounded. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/tensor.h"
#include "testutil.h"
#include "wharness.h"

#define FRAMES 10000
#define WAIT_MS 20000
#define KEY "fz@1"

typedef struct {
    gf_wh w;
    bool alive;
    char *dir, *weights, *manifest;
    gf_test_mlp m;
    gf_test_rng rng;
    long restarts, answered, results_checked, fatal;
} fuzz;

static void fz_start(fuzz *z)
{
    gf_err e;
    gf_err_clear(&e);
    const char *extra[] = {"--device-memory", "16M", "--host-memory", "8M", "--log-level",
                           "error",           NULL};
    gf_status st = gf_wh_spawn(&z->w, gf_test_prog("GF_WORKER"), z->dir, extra, "/dev/null", true,
                               WAIT_MS, &e);
    ck_assert_msg(st == GF_OK, "spawn: %s", gf_err_msg(&e));
    gf_ipc_load l = {KEY,        z->manifest, (uint32_t)strlen(z->manifest),
                     z->weights, "",          GF_TIER_DEVICE};
    ck_assert_int_eq(gf_ipc_encode_load(&z->w.out, gf_wh_id(&z->w), &l, &e), GF_OK);
    ck_assert_int_eq(gf_wh_send(&z->w, &e), GF_OK);
    gf_ipc_frame f;
    ck_assert_int_eq(gf_wh_recv(&z->w, &f, WAIT_MS, &e), GF_OK);
    ck_assert_int_eq(f.h.type, GF_IPC_LOADED);
    gf_ipc_frame_deinit(&f);
    z->alive = true;
}

/* The worker must now close the stream (after at most one ERROR) and exit
 * with the protocol-error code. */
static void fz_expect_exit(fuzz *z, const char *what)
{
    gf_err e;
    gf_err_clear(&e);
    gf_ipc_frame f;
    gf_status st = gf_wh_recv(&z->w, &f, WAIT_MS, &e);
    if (st == GF_OK) {
        ck_assert_msg(f.h.type == GF_IPC_ERROR, "%s: answered %s before closing", what,
                      gf_ipc_type_name(f.h.type));
        gf_ipc_error er;
        ck_assert_int_eq(gf_ipc_decode_error(&f, &er, NULL), GF_OK);
        ck_assert_msg(er.code == GF_ERR_PROTOCOL || er.code == GF_ERR_TOO_LARGE,
                      "%s: ERROR code %u", what, er.code);
        gf_ipc_frame_deinit(&f);
        st = gf_wh_recv(&z->w, &f, WAIT_MS, &e);
    }
    ck_assert_msg(st == GF_ERR_CLOSED, "%s: expected end of stream, got %s (%s)", what,
                  gf_status_name(st), e.msg);
    int code = gf_wh_wait(&z->w, WAIT_MS, true);
    ck_assert_msg(code == GF_WORKER_EXIT_PROTOCOL, "%s: exit code %d", what, code);
    gf_wh_free(&z->w);
    z->alive = false;
    z->fatal++;
}

/* Is this decoded INFER a valid request for our model? 0: no; 1: yes, and
 * its outputs can be checked; 2: yes, but its inputs are not finite (or so
 * large that the reference would not be meaningful). */
static int valid_request(const fuzz *z, const gf_ipc_infer *m)
{
    if (strcmp(m->key, KEY) != 0 || m->n != 1 || strcmp(m->t[0].name, "x") != 0)
        return 0;
    const gf_tensor *t = &m->t[0].t;
    if (t->dtype != GF_DT_F32 || t->rank != 2 || t->shape[1] != z->m.dims[0] || t->shape[0] < 1 ||
        t->shape[0] > z->m.max_batch)
        return 0;
    const float *x = t->data;
    for (size_t i = 0; i < t->nbytes / 4; i++) {
        float v;
        memcpy(&v, &x[i], sizeof v);
        if (!isfinite(v) || fabsf(v) > 1e6f)
            return 2;
    }
    return 1;
}

/* Expect the answer to a well-formed request: an ERROR, or (when req is a
 * valid INFER) a RESULT matching the reference. */
static void fz_expect_answer(fuzz *z, uint64_t id, gf_ipc_type ok_type, const gf_ipc_infer *req)
{
    gf_err e;
    gf_err_clear(&e);
    gf_ipc_frame f;
    gf_status st = gf_wh_recv(&z->w, &f, WAIT_MS, &e);
    ck_assert_msg(st == GF_OK, "no answer to request %llu: %s", (unsigned long long)id,
                  gf_err_msg(&e));
    ck_assert_uint_eq(f.h.request_id, id);
    int valid = req != NULL ? valid_request(z, req) : 0;
    if (valid == 2) {
        ck_assert_msg(f.h.type == GF_IPC_RESULT, "a valid INFER answered %s",
                      gf_ipc_type_name(f.h.type));
    } else if (valid == 1) {
        if (f.h.type == GF_IPC_ERROR) {
            gf_ipc_error er;
            gf_ipc_decode_error(&f, &er, NULL);
            ck_abort_msg("a valid INFER was refused: %u %s", er.code, er.message);
        }
        ck_assert_int_eq(f.h.type, GF_IPC_RESULT);
        gf_ipc_result r;
        ck_assert_int_eq(gf_ipc_decode_result(&f, &r, &e), GF_OK);
        int64_t batch = req->t[0].t.shape[0], out = z->m.dims[z->m.layers];
        ck_assert_uint_eq(r.n, 1);
        ck_assert_int_eq(r.t[0].t.shape[0], batch);
        float *x = malloc(req->t[0].t.nbytes), *ref = malloc((size_t)(batch * out) * 4);
        memcpy(x, req->t[0].t.data, req->t[0].t.nbytes);
        gf_test_mlp_ref_f32(&z->m, x, batch, ref);
        double rel = gf_test_max_rel_err(r.t[0].t.data, ref, (size_t)(batch * out));
        ck_assert_msg(rel < 1e-4, "wrong answer: relative error %g", rel);
        free(x);
        free(ref);
        gf_ipc_result_deinit(&r);
        z->results_checked++;
    } else {
        ck_assert_msg(f.h.type == GF_IPC_ERROR || f.h.type == ok_type, "request %llu answered %s",
                      (unsigned long long)id, gf_ipc_type_name(f.h.type));
        if (ok_type == GF_IPC_RESULT)
            ck_assert_msg(f.h.type == GF_IPC_ERROR, "an invalid INFER got a RESULT");
    }
    gf_ipc_frame_deinit(&f);
    z->answered++;
}

static void rand_ascii(gf_test_rng *r, char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        s[i] = (char)(' ' + gf_test_rng_below(r, 95));
    s[n] = '\0';
}

/* A well-formed INFER with random content (valid about a third of the time). */
static void fz_random_infer(fuzz *z)
{
    gf_test_rng *r = &z->rng;
    char key[16], name[8];
    bool good_key = gf_test_rng_below(r, 3) != 0;
    if (good_key)
        snprintf(key, sizeof key, "%s", KEY);
    else
        rand_ascii(r, key, 1 + gf_test_rng_below(r, 8));
    uint32_t n = gf_test_rng_below(r, 8) == 0 ? (uint32_t)gf_test_rng_below(r, 3) : 1;
    gf_ipc_tensor t[2] = {{0}, {0}};
    void *data[2] = {NULL, NULL};
    for (uint32_t i = 0; i < n; i++) {
        bool good = gf_test_rng_below(r, 2) == 0;
        if (good || gf_test_rng_below(r, 2))
            snprintf(name, sizeof name, "x");
        else
            rand_ascii(r, name, 1 + gf_test_rng_below(r, 4));
        t[i].name = strdup(name);
        gf_dtype dt = good ? GF_DT_F32 /* a fixed-size type: BYTES has its own tests */
                           : (gf_dtype)(1 + gf_test_rng_below(r, GF_DT_BYTES - 1));
        int32_t rank = good ? 2 : (int32_t)gf_test_rng_below(r, 4);
        int64_t shape[4];
        for (int32_t k = 0; k < rank; k++)
            shape[k] = (int64_t)gf_test_rng_below(r, 6);
        if (good) {
            shape[0] = 1 + (int64_t)gf_test_rng_below(r, 20); /* over max_batch sometimes */
            shape[1] = gf_test_rng_below(r, 8) ? z->m.dims[0] : 15;
        }
        gf_tensor_init(&t[i].t, dt, rank, shape, NULL, GF_MEM_HOST, -1, NULL);
        data[i] = malloc(t[i].t.nbytes + 1);
        if (dt == GF_DT_F32) {
            float *f = data[i];
            for (size_t k = 0; k < t[i].t.nbytes / 4; k++)
                f[k] = gf_test_rng_float(r, -3, 3);
        } else {
            for (size_t k = 0; k < t[i].t.nbytes; k++)
                ((unsigned char *)data[i])[k] = (unsigned char)gf_test_rng_u64(r);
        }
        t[i].t.data = data[i];
    }
    gf_ipc_infer m = {key, n, t, 0, 0, NULL};
    uint64_t id = gf_wh_id(&z->w);
    ck_assert_int_eq(gf_ipc_encode_infer(&z->w.out, id, &m, NULL), GF_OK);
    ck_assert_int_eq(gf_wh_send(&z->w, NULL), GF_OK);
    fz_expect_answer(z, id, GF_IPC_RESULT, &m);
    for (uint32_t i = 0; i < n; i++) {
        free((void *)t[i].name);
        free(data[i]);
    }
}

/* A valid INFER, then 1-3 payload bytes changed; judged by decoding it here. */
static void fz_mutated_infer(fuzz *z)
{
    gf_test_rng *r = &z->rng;
    int64_t batch = 1 + (int64_t)gf_test_rng_below(r, 4);
    float x[4 * 16];
    for (int i = 0; i < 4 * 16; i++)
        x[i] = gf_test_rng_float(r, -2, 2);
    gf_ipc_tensor t = {.name = "x"};
    gf_tensor_init(&t.t, GF_DT_F32, 2, (int64_t[]){batch, z->m.dims[0]}, x, GF_MEM_HOST, -1, NULL);
    gf_ipc_infer m = {KEY, 1, &t, 0, 0, NULL};
    uint64_t id = gf_wh_id(&z->w);
    gf_buf *b = &z->w.out;
    ck_assert_int_eq(gf_ipc_encode_infer(b, id, &m, NULL), GF_OK);
    size_t plen = b->len - GF_IPC_HEADER_SIZE;
    int muts = 1 + (int)gf_test_rng_below(r, 3);
    for (int k = 0; k < muts; k++) {
        /* mostly the tensor data (the request stays well-formed and its
         * answer is checked), sometimes any byte (usually fatal) */
        size_t at = gf_test_rng_below(r, 5) != 0
                        ? b->len - t.t.nbytes + gf_test_rng_below(r, t.t.nbytes)
                        : GF_IPC_HEADER_SIZE + gf_test_rng_below(r, plen);
        b->data[at] = (char)(gf_test_rng_below(r, 2) ? (unsigned char)gf_test_rng_u64(r)
                                                     : (unsigned char)(b->data[at] ^ 1));
    }
    gf_ipc_frame f = {0};
    unsigned char *p = aligned_alloc(64, (plen + 63) / 64 * 64);
    memcpy(p, b->data + GF_IPC_HEADER_SIZE, plen);
    f.h = (gf_ipc_header){GF_IPC_INFER, id, plen};
    f.payload = p;
    gf_ipc_infer dm;
    gf_status st = gf_ipc_decode_infer(&f, &dm, NULL);
    ck_assert_int_eq(gf_wh_send(&z->w, NULL), GF_OK);
    if (st == GF_OK)
        fz_expect_answer(z, id, GF_IPC_RESULT, &dm);
    else
        fz_expect_exit(z, "mutated INFER");
    gf_ipc_infer_deinit(&dm);
    free(p);
}

static void fz_control(fuzz *z)
{
    static const gf_ipc_type q[3] = {GF_IPC_PING, GF_IPC_GET_STATS, GF_IPC_HELLO};
    static const gf_ipc_type a[3] = {GF_IPC_PONG, GF_IPC_STATS, GF_IPC_READY};
    int k = (int)gf_test_rng_below(&z->rng, 3);
    uint64_t id = gf_wh_id(&z->w);
    ck_assert_int_eq(gf_ipc_encode_empty(&z->w.out, q[k], id, NULL), GF_OK);
    ck_assert_int_eq(gf_wh_send(&z->w, NULL), GF_OK);
    gf_ipc_frame f;
    ck_assert_int_eq(gf_wh_recv(&z->w, &f, WAIT_MS, NULL), GF_OK);
    ck_assert_int_eq(f.h.type, a[k]);
    ck_assert_uint_eq(f.h.request_id, id);
    gf_ipc_frame_deinit(&f);
    z->answered++;
}

/* LOAD with nonsense (or, rarely, a manifest that parses), or UNLOAD. */
static void fz_admin(fuzz *z)
{
    gf_test_rng *r = &z->rng;
    uint64_t id = gf_wh_id(&z->w);
    char key[24], text[96], path[32];
    rand_ascii(r, key, 1 + gf_test_rng_below(r, 12));
    if (strcmp(key, KEY) == 0)
        key[0] = 'Z';
    if (gf_test_rng_below(r, 4) == 0) {
        gf_ipc_unload u = {key};
        ck_assert_int_eq(gf_ipc_encode_unload(&z->w.out, id, &u, NULL), GF_OK);
        ck_assert_int_eq(gf_wh_send(&z->w, NULL), GF_OK);
        fz_expect_answer(z, id, GF_IPC_UNLOADED, NULL);
        return;
    }
    const char *manifest = text;
    if (gf_test_rng_below(r, 2))
        rand_ascii(r, text, gf_test_rng_below(r, sizeof text - 1));
    else
        manifest = z->manifest; /* good manifest, maybe a bad path or tier */
    rand_ascii(r, path, 1 + gf_test_rng_below(r, 10));
    const char *weights = gf_test_rng_below(r, 2) ? path : z->weights;
    gf_ipc_load l = {key,
                     manifest,
                     (uint32_t)strlen(manifest),
                     weights,
                     gf_test_rng_below(r, 8) == 0 ? path : "",
                     (int32_t)gf_test_rng_below(r, 8) - 2};
    ck_assert_int_eq(gf_ipc_encode_load(&z->w.out, id, &l, NULL), GF_OK);
    ck_assert_int_eq(gf_wh_send(&z->w, NULL), GF_OK);
    fz_expect_answer(z, id, GF_IPC_LOADED, NULL);
}

/* Part of a frame, then our side shuts its writing half. */
static void fz_truncated(fuzz *z)
{
    gf_test_rng *r = &z->rng;
    gf_buf *b = &z->w.out;
    float x[16] = {0};
    gf_ipc_tensor t = {.name = "x"};
    gf_tensor_init(&t.t, GF_DT_F32, 2, (int64_t[]){1, 16}, x, GF_MEM_HOST, -1, NULL);
    gf_ipc_infer m = {KEY, 1, &t, 0, 0, NULL};
    ck_assert_int_eq(gf_ipc_encode_infer(b, gf_wh_id(&z->w), &m, NULL), GF_OK);
    size_t cut = 1 + gf_test_rng_below(r, b->len - 1);
    ck_assert_int_eq(gf_wh_send_raw(&z->w, b->data, cut, NULL), GF_OK);
    gf_buf_reset(b);
    shutdown(z->w.fd, SHUT_WR);
    fz_expect_exit(z, "truncated frame");
}

/* A broken header, a frame in the wrong direction, or a random payload. */
static void fz_bad_frame(fuzz *z)
{
    gf_test_rng *r = &z->rng;
    unsigned char raw[GF_IPC_HEADER_SIZE + 64];
    gf_buf *b = &z->w.out;
    int kind = (int)gf_test_rng_below(r, 5);
    if (kind == 0) { /* random header bytes */
        for (size_t i = 0; i < sizeof raw; i++)
            raw[i] = (unsigned char)gf_test_rng_u64(r);
        raw[16] = 8; /* a small length when the magic happens to be right */
        memset(raw + 17, 0, 7);
        ck_assert_int_eq(gf_wh_send_raw(&z->w, raw, GF_IPC_HEADER_SIZE + 8, NULL), GF_OK);
    } else {
        ck_assert_int_eq(gf_ipc_encode_empty(b, GF_IPC_PING, gf_wh_id(&z->w), NULL), GF_OK);
        if (kind == 1)
            b->data[4] = 9; /* version */
        else if (kind == 2)
            b->data[6] = (char)(gf_test_rng_below(r, 2) ? GF_IPC_RESULT : 77); /* direction */
        else if (kind == 3)
            b->data[20] = 1; /* 4 GiB payload: over the limit */
        if (kind == 4) {     /* a gateway type with a random payload */
            static const gf_ipc_type ty[3] = {GF_IPC_INFER, GF_IPC_LOAD, GF_IPC_UNLOAD};
            size_t n = 1 + gf_test_rng_below(r, 64);
            b->data[6] = (char)ty[gf_test_rng_below(r, 3)];
            b->data[16] = (char)n;
            for (size_t i = 0; i < n; i++) {
                char c = (char)gf_test_rng_u64(r);
                gf_buf_append(b, &c, 1);
            }
        }
        ck_assert_int_eq(gf_wh_send(&z->w, NULL), GF_OK);
    }
    fz_expect_exit(z, "bad frame");
}

START_TEST(test_fuzz_frames)
{
    fuzz z;
    memset(&z, 0, sizeof z);
    gf_test_rng_seed(&z.rng, 0x5eed0fu);
    z.dir = gf_test_tmpdir();
    z.weights = gf_test_path(z.dir, "fz.safetensors");
    int64_t dims[] = {16, 32, 4};
    gf_test_mlp_make(&z.m, 77, 2, dims, true, 16);
    ck_assert_int_eq(gf_test_mlp_write(&z.m, z.weights, GF_DT_F32, NULL), GF_OK);
    z.manifest = gf_test_mlp_manifest(&z.m, "fz");
    for (int i = 0; i < FRAMES; i++) {
        if (!z.alive) {
            fz_start(&z);
            z.restarts++;
        }
        unsigned k = (unsigned)gf_test_rng_below(&z.rng, 1000);
        if (k < 200)
            fz_control(&z);
        else if (k < 560)
            fz_random_infer(&z);
        else if (k < 700)
            fz_admin(&z);
        else if (k < 990)
            fz_mutated_infer(&z);
        else if (k < 995)
            fz_truncated(&z);
        else
            fz_bad_frame(&z);
    }
    if (z.alive) {
        ck_assert_int_eq(gf_ipc_encode_empty(&z.w.out, GF_IPC_SHUTDOWN, 1, NULL), GF_OK);
        ck_assert_int_eq(gf_wh_send(&z.w, NULL), GF_OK);
        ck_assert_int_eq(gf_wh_wait(&z.w, WAIT_MS, false), GF_WORKER_EXIT_OK);
        gf_wh_free(&z.w);
    }
    fprintf(stderr, "fuzz: %d frames, %ld answered (%ld results checked), %ld fatal, %ld starts\n",
            FRAMES, z.answered, z.results_checked, z.fatal, z.restarts);
    ck_assert_int_eq(z.answered + z.fatal, FRAMES);
    ck_assert_int_gt(z.results_checked, 1000);
    ck_assert_int_gt(z.fatal, 100);
    gf_test_mlp_free(&z.m);
    free(z.weights);
    free(z.manifest);
    gf_test_rmtree(z.dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("worker_fuzz");
    TCase *tc = tcase_create("fuzz");
    tcase_set_timeout(tc, 280);
    tcase_add_test(tc, test_fuzz_frames);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
