/* gpufaas tests — the worker process, for real: gpufaas-worker started over a
 * socketpair (path in GF_WORKER), driven frame by frame. Outputs are checked
 * against mlp references computed here with naive double loops. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/tensor.h"
#include "testutil.h"
#include "wharness.h"

#define RECV_MS 20000 /* generous: sanitizer builds on 2 busy cores */

static const char *worker_exe(void)
{
    return gf_test_prog("GF_WORKER");
}

static void spawn(gf_wh *w, const char *dir, const char *const *extra)
{
    gf_err e;
    gf_err_clear(&e);
    gf_status st = gf_wh_spawn(w, worker_exe(), dir, extra, NULL, true, RECV_MS, &e);
    ck_assert_msg(st == GF_OK, "spawning the worker: %s (exit %d)", gf_err_msg(&e), w->status);
}

static void send_or_fail(gf_wh *w)
{
    gf_err e;
    gf_err_clear(&e);
    ck_assert_msg(gf_wh_send(w, &e) == GF_OK, "send: %s", gf_err_msg(&e));
}

static void recv_or_fail(gf_wh *w, gf_ipc_frame *f)
{
    gf_err e;
    gf_err_clear(&e);
    gf_status st = gf_wh_recv(w, f, RECV_MS, &e);
    ck_assert_msg(st == GF_OK, "recv: %s", gf_err_msg(&e));
}

/* Send a LOAD; returns 0 and fills *out on LOADED, else the ERROR code (the
 * message in msg when non-NULL). */
static uint32_t load_model(gf_wh *w, const char *key, const char *manifest, const char *weights,
                           const char *plugin, int tier, gf_ipc_loaded *out, char *msg, size_t cap)
{
    gf_err e;
    gf_err_clear(&e);
    gf_ipc_load l = {key, manifest, (uint32_t)strlen(manifest), weights, plugin, tier};
    uint64_t id = gf_wh_id(w);
    ck_assert_int_eq(gf_ipc_encode_load(&w->out, id, &l, &e), GF_OK);
    send_or_fail(w);
    gf_ipc_frame f;
    recv_or_fail(w, &f);
    ck_assert_uint_eq(f.h.request_id, id);
    uint32_t code = 0;
    if (f.h.type == GF_IPC_LOADED) {
        gf_ipc_loaded tmp;
        ck_assert_int_eq(gf_ipc_decode_loaded(&f, out != NULL ? out : &tmp, &e), GF_OK);
    } else {
        ck_assert_msg(f.h.type == GF_IPC_ERROR, "LOAD answered %s", gf_ipc_type_name(f.h.type));
        gf_ipc_error er;
        ck_assert_int_eq(gf_ipc_decode_error(&f, &er, &e), GF_OK);
        code = er.code;
        if (msg != NULL)
            snprintf(msg, cap, "%s", er.message);
    }
    gf_ipc_frame_deinit(&f);
    return code;
}

static void load_ok(gf_wh *w, const char *key, const char *manifest, const char *weights, int tier,
                    gf_ipc_loaded *out)
{
    char msg[GF_IPC_MAX_MESSAGE + 1] = "";
    uint32_t code = load_model(w, key, manifest, weights, "", tier, out, msg, sizeof msg);
    ck_assert_msg(code == 0, "LOAD %s failed (%u): %s", key, code, msg);
}

/* One deployed test model: the mlp, its key, file and manifest. */
typedef struct {
    gf_test_mlp m;
    char key[64];
    char *path;
    char *manifest;
} tmodel;

static void tmodel_make(tmodel *t, const char *dir, int idx, uint64_t seed, int layers,
                        const int64_t *dims, bool softmax)
{
    gf_test_mlp_make(&t->m, seed, layers, dims, softmax, 16);
    snprintf(t->key, sizeof t->key, "fn%d@1", idx);
    char file[64], name[32];
    snprintf(file, sizeof file, "fn%d.safetensors", idx);
    snprintf(name, sizeof name, "fn%d", idx);
    t->path = gf_test_path(dir, file);
    gf_err e;
    gf_err_clear(&e);
    ck_assert_msg(gf_test_mlp_write(&t->m, t->path, GF_DT_F32, &e) == GF_OK, "%s", e.msg);
    t->manifest = gf_test_mlp_manifest(&t->m, name);
    ck_assert_ptr_nonnull(t->manifest);
}

static void tmodel_free(tmodel *t)
{
    gf_test_mlp_free(&t->m);
    free(t->path);
    free(t->manifest);
}

static float *random_input(const tmodel *t, int64_t batch, uint64_t seed)
{
    gf_test_rng rng;
    gf_test_rng_seed(&rng, seed);
    size_t n = (size_t)(batch * t->m.dims[0]);
    float *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (size_t i = 0; i < n; i++)
        x[i] = gf_test_rng_float(&rng, -2.0f, 2.0f);
    return x;
}

/* Encode (not send) an INFER of x[batch, in] for t. */
static uint64_t encode_infer(gf_wh *w, const tmodel *t, const float *x, int64_t batch)
{
    gf_err e;
    gf_err_clear(&e);
    gf_ipc_tensor in = {.name = "x"};
    int64_t shape[2] = {batch, t->m.dims[0]};
    ck_assert_int_eq(gf_tensor_init(&in.t, GF_DT_F32, 2, shape, (void *)x, GF_MEM_HOST, -1, &e),
                     GF_OK);
    gf_ipc_infer msg = {t->key, 1, &in, 0, 0, NULL};
    uint64_t id = gf_wh_id(w);
    ck_assert_msg(gf_ipc_encode_infer(&w->out, id, &msg, &e) == GF_OK, "%s", e.msg);
    return id;
}

/* Check a RESULT frame against the reference for x. */
static void check_result(const gf_ipc_frame *f, const tmodel *t, const float *x, int64_t batch,
                         gf_ipc_result *info)
{
    gf_err e;
    gf_err_clear(&e);
    if (f->h.type == GF_IPC_ERROR) {
        gf_ipc_error er;
        gf_ipc_decode_error(f, &er, &e);
        ck_abort_msg("INFER %s answered ERROR %u: %s", t->key, er.code, er.message);
    }
    ck_assert_int_eq(f->h.type, GF_IPC_RESULT);
    gf_ipc_result r;
    ck_assert_msg(gf_ipc_decode_result(f, &r, &e) == GF_OK, "%s", e.msg);
    ck_assert_uint_eq(r.n, 1);
    ck_assert_str_eq(r.t[0].name, "y");
    ck_assert_int_eq(r.t[0].t.dtype, GF_DT_F32);
    ck_assert_int_eq(r.t[0].t.rank, 2);
    int64_t out = t->m.dims[t->m.layers];
    ck_assert_int_eq(r.t[0].t.shape[0], batch);
    ck_assert_int_eq(r.t[0].t.shape[1], out);
    float *ref = malloc((size_t)(batch * out) * sizeof *ref);
    ck_assert_ptr_nonnull(ref);
    gf_test_mlp_ref_f32(&t->m, x, batch, ref);
    double rel = gf_test_max_rel_err(r.t[0].t.data, ref, (size_t)(batch * out));
    ck_assert_msg(rel < 1e-4, "%s: outputs differ from the reference by %g", t->key, rel);
    free(ref);
    if (info != NULL) {
        *info = r;
        info->t = NULL;
        info->n = 0;
    }
    gf_ipc_result_deinit(&r);
}

static void infer_check(gf_wh *w, const tmodel *t, int64_t batch, uint64_t seed,
                        gf_ipc_result *info)
{
    float *x = random_input(t, batch, seed);
    uint64_t id = encode_infer(w, t, x, batch);
    send_or_fail(w);
    gf_ipc_frame f;
    recv_or_fail(w, &f);
    ck_assert_uint_eq(f.h.request_id, id);
    check_result(&f, t, x, batch, info);
    gf_ipc_frame_deinit(&f);
    free(x);
}

/* Expect an ERROR for id; returns its code and copies the message. */
static uint32_t expect_error(gf_wh *w, uint64_t id, char *msg, size_t cap)
{
    gf_ipc_frame f;
    recv_or_fail(w, &f);
    ck_assert_uint_eq(f.h.request_id, id);
    ck_assert_msg(f.h.type == GF_IPC_ERROR, "expected ERROR, got %s", gf_ipc_type_name(f.h.type));
    gf_ipc_error er;
    gf_err e;
    gf_err_clear(&e);
    ck_assert_int_eq(gf_ipc_decode_error(&f, &er, &e), GF_OK);
    if (msg != NULL)
        snprintf(msg, cap, "%s", er.message);
    uint32_t code = er.code;
    gf_ipc_frame_deinit(&f);
    return code;
}

static void send_empty(gf_wh *w, gf_ipc_type type, uint64_t id)
{
    gf_err e;
    gf_err_clear(&e);
    ck_assert_int_eq(gf_ipc_encode_empty(&w->out, type, id, &e), GF_OK);
    send_or_fail(w);
}

static void ping(gf_wh *w)
{
    uint64_t id = gf_wh_id(w);
    send_empty(w, GF_IPC_PING, id);
    gf_ipc_frame f;
    recv_or_fail(w, &f);
    ck_assert_int_eq(f.h.type, GF_IPC_PONG);
    ck_assert_uint_eq(f.h.request_id, id);
    gf_ipc_frame_deinit(&f);
}

static void get_stats(gf_wh *w, gf_ipc_stats *s)
{
    uint64_t id = gf_wh_id(w);
    send_empty(w, GF_IPC_GET_STATS, id);
    gf_ipc_frame f;
    recv_or_fail(w, &f);
    ck_assert_int_eq(f.h.type, GF_IPC_STATS);
    ck_assert_uint_eq(f.h.request_id, id);
    gf_err e;
    gf_err_clear(&e);
    ck_assert_int_eq(gf_ipc_decode_stats(&f, s, &e), GF_OK);
    gf_ipc_frame_deinit(&f);
}

/* PING until at least n LOADED events arrived (loads are asynchronous). */
static void wait_loaded_events(gf_wh *w, uint64_t n)
{
    for (int i = 0; i < 2000 && w->ev_loaded < n; i++) {
        ping(w);
        if (w->ev_loaded < n) {
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    ck_assert_uint_ge(w->ev_loaded, n);
}

static void shutdown_and_wait(gf_wh *w)
{
    send_empty(w, GF_IPC_SHUTDOWN, gf_wh_id(w));
    gf_ipc_frame f;
    gf_err e;
    gf_err_clear(&e);
    gf_status st = gf_wh_recv(w, &f, RECV_MS, &e);
    ck_assert_msg(st == GF_ERR_CLOSED, "after SHUTDOWN: expected end of stream, got %s %s",
                  gf_status_name(st), st == GF_OK ? gf_ipc_type_name(f.h.type) : e.msg);
    ck_assert_int_eq(gf_wh_wait(w, RECV_MS, false), GF_WORKER_EXIT_OK);
}

/* ---- start-up, READY, PING, STATS, EOF -------------------------------------------- */

START_TEST(test_ready_ping_stats_eof)
{
    char *dir = gf_test_tmpdir();
    const char *extra[] = {"--device-memory",
                           "64M",
                           "--host-memory",
                           "32M",
                           "--worker-id",
                           "7",
                           "--policy",
                           "gds",
                           NULL};
    gf_wh w;
    spawn(&w, dir, extra);
    ck_assert_uint_eq(w.ready.protocol_version, GF_IPC_VERSION);
    ck_assert_int_eq(w.ready.worker_id, 7);
    ck_assert_int_eq(w.ready.pid, w.pid);
    ck_assert_int_eq(w.ready.device_kind, GF_DEVICE_CPU);
    ck_assert_uint_eq(w.ready.device_budget, 64u << 20);
    ck_assert_uint_eq(w.ready.host_budget, 32u << 20);
    ck_assert_uint_eq(w.ready.max_frame, GF_IPC_DEFAULT_MAX_FRAME);
    ck_assert_int_eq(w.ready.policy, 1); /* gds */
    ck_assert_uint_gt(w.ready.page_size, 0);
    ck_assert_uint_gt(strlen(w.ready.device_name), 0);
    ping(&w);
    /* HELLO: READY again, with the request id */
    uint64_t id = gf_wh_id(&w);
    send_empty(&w, GF_IPC_HELLO, id);
    gf_ipc_frame f;
    recv_or_fail(&w, &f);
    ck_assert_int_eq(f.h.type, GF_IPC_READY);
    ck_assert_uint_eq(f.h.request_id, id);
    gf_ipc_frame_deinit(&f);
    gf_ipc_stats s;
    get_stats(&w, &s);
    ck_assert_uint_eq(s.device_budget, 64u << 20);
    ck_assert_uint_eq(s.host_budget, 32u << 20);
    ck_assert_uint_eq(s.models, 0);
    ck_assert_uint_eq(s.requests, 0);
    ck_assert_uint_gt(s.process_rss, 0);
    ck_assert_uint_gt(s.uptime_us, 0);
    /* the gateway goes away: the worker exits promptly, with 0 */
    ck_assert_int_eq(gf_wh_wait(&w, 10000, true), GF_WORKER_EXIT_OK);
    gf_wh_free(&w);
    gf_test_rmtree(dir);
}
END_TEST

/* ---- load / infer / unload ----------------------------------------------------- */

START_TEST(test_load_infer_unload)
{
    char *dir = gf_test_tmpdir();
    const char *extra[] = {"--device-memory", "64M", "--host-memory", "64M", NULL};
    gf_wh w;
    spawn(&w, dir, extra);
    int64_t d1[] = {16, 32, 24, 4}, d2[] = {8, 64, 3};
    tmodel a, b;
    tmodel_make(&a, dir, 1, 11, 3, d1, false);
    tmodel_make(&b, dir, 2, 22, 2, d2, true);

    gf_ipc_loaded la, lb;
    load_ok(&w, a.key, a.manifest, a.path, GF_TIER_DEVICE, &la);
    ck_assert_uint_eq(la.n_params, 6);
    ck_assert_int_eq(la.tier, GF_TIER_DEVICE);
    /* 16x32 + 32 + 32x24 + 24 + 24x4 + 4 floats = 5,664 bytes, with alignment:
     * a small model, placed in a shared page, not given a 2 MiB page */
    ck_assert_uint_ge(la.device_bytes, 5664);
    ck_assert_uint_lt(la.device_bytes, w.ready.page_size / 4);
    ck_assert_uint_gt(la.host_bytes, 0);
    load_ok(&w, b.key, b.manifest, b.path, GF_TIER_HOST, &lb);
    ck_assert_int_eq(lb.tier, GF_TIER_HOST);
    ck_assert_uint_eq(lb.n_params, 4);
    /* a prefetched model is warm once its LOADED event arrived */
    wait_loaded_events(&w, 2);
    gf_ipc_result info;
    infer_check(&w, &a, 1, 100, &info);
    ck_assert_uint_eq(info.flags & GF_IPC_RESULT_COLD, 0);
    ck_assert_int_eq(info.source_tier, GF_TIER_DEVICE);
    infer_check(&w, &a, 5, 101, NULL);
    infer_check(&w, &a, 16, 102, NULL);
    /* b is in the host tier only: its first request is cold, from the host */
    infer_check(&w, &b, 3, 103, &info);
    ck_assert_uint_eq(info.flags & GF_IPC_RESULT_COLD, GF_IPC_RESULT_COLD);
    ck_assert_int_eq(info.source_tier, GF_TIER_HOST);
    infer_check(&w, &b, 3, 104, &info);
    ck_assert_uint_eq(info.flags & GF_IPC_RESULT_COLD, 0);
    /* LOAD again with the same content: accepted, idempotent */
    load_ok(&w, a.key, a.manifest, a.path, GF_TIER_DEVICE, NULL);
    /* the same key with another manifest is refused */
    char msg[GF_IPC_MAX_MESSAGE + 1];
    ck_assert_uint_eq(load_model(&w, a.key, b.manifest, a.path, "", 2, NULL, msg, sizeof msg),
                      GF_ERR_EXISTS);

    /* UNLOAD: gone afterwards, and loadable again */
    uint64_t id = gf_wh_id(&w);
    gf_err e;
    gf_err_clear(&e);
    gf_ipc_unload u = {a.key};
    ck_assert_int_eq(gf_ipc_encode_unload(&w.out, id, &u, &e), GF_OK);
    send_or_fail(&w);
    gf_ipc_frame f;
    recv_or_fail(&w, &f);
    ck_assert_int_eq(f.h.type, GF_IPC_UNLOADED);
    ck_assert_uint_eq(f.h.request_id, id);
    gf_ipc_frame_deinit(&f);
    float *x = random_input(&a, 2, 5);
    id = encode_infer(&w, &a, x, 2);
    send_or_fail(&w);
    ck_assert_uint_eq(expect_error(&w, id, msg, sizeof msg), GF_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(msg, a.key));
    id = gf_wh_id(&w);
    ck_assert_int_eq(gf_ipc_encode_unload(&w.out, id, &u, &e), GF_OK);
    send_or_fail(&w);
    ck_assert_uint_eq(expect_error(&w, id, NULL, 0), GF_ERR_NOT_FOUND);
    load_ok(&w, a.key, a.manifest, a.path, GF_TIER_STORE, &la);
    ck_assert_int_eq(la.tier, GF_TIER_STORE);
    infer_check(&w, &a, 2, 105, &info);
    ck_assert_uint_eq(info.flags & GF_IPC_RESULT_COLD, GF_IPC_RESULT_COLD);
    free(x);

    gf_ipc_stats s;
    get_stats(&w, &s);
    ck_assert_uint_eq(s.models, 2);
    ck_assert_uint_eq(s.requests, 7);
    ck_assert_uint_eq(s.request_errors, 1);
    ck_assert_uint_ge(s.hits, 3);
    shutdown_and_wait(&w);
    ck_assert(!w.ev_seq_gap);
    gf_wh_free(&w);
    tmodel_free(&a);
    tmodel_free(&b);
    gf_test_rmtree(dir);
}
END_TEST

/* ---- request errors: answered, and the worker keeps serving ------------------------ */

static uint64_t encode_infer_tensor(gf_wh *w, const char *key, const char *name, gf_dtype dt,
                                    int32_t rank, const int64_t *shape)
{
    gf_err e;
    gf_err_clear(&e);
    gf_ipc_tensor in = {.name = name};
    ck_assert_int_eq(gf_tensor_init(&in.t, dt, rank, shape, NULL, GF_MEM_HOST, -1, &e), GF_OK);
    void *data = calloc(1, in.t.nbytes + 1);
    in.t.data = data;
    gf_ipc_infer msg = {key, 1, &in, 0, 0, NULL};
    uint64_t id = gf_wh_id(w);
    ck_assert_msg(gf_ipc_encode_infer(&w->out, id, &msg, &e) == GF_OK, "%s", e.msg);
    free(data);
    return id;
}

START_TEST(test_request_errors)
{
    char *dir = gf_test_tmpdir();
    const char *extra[] = {"--device-memory", "4M", "--host-memory", "0", NULL};
    gf_wh w;
    spawn(&w, dir, extra);
    int64_t d[] = {16, 16384, 4}; /* ~1.3 MiB: one page */
    tmodel a;
    tmodel_make(&a, dir, 1, 7, 2, d, false);
    a.m.max_batch = 256;
    free(a.manifest);
    a.manifest = gf_test_mlp_manifest(&a.m, "fn1");
    load_ok(&w, a.key, a.manifest, a.path, GF_TIER_DEVICE, NULL);
    char msg[GF_IPC_MAX_MESSAGE + 1];
    int64_t s_ok[2] = {2, 16}, s_bad[2] = {2, 15}, s_big[2] = {257, 16};
    /* the gateway checks requests against the manifest (the one validation)
     * and sends one tensor per input in manifest order: another name is the
     * gateway breaking the protocol, not a bad request; what the kernels
     * could not read (shape, dtype, rank) the runtime's guard refuses */
    uint64_t id = encode_infer_tensor(&w, a.key, "z", GF_DT_F32, 2, s_ok);
    send_or_fail(&w);
    ck_assert_uint_eq(expect_error(&w, id, msg, sizeof msg), GF_ERR_PROTOCOL);
    ck_assert_msg(strstr(msg, "tensor 0 is 'z', not input 'x' (inputs go in manifest order)"),
                  "%s", msg);
    id = encode_infer_tensor(&w, a.key, "x", GF_DT_F32, 2, s_bad);
    send_or_fail(&w);
    ck_assert_uint_eq(expect_error(&w, id, msg, sizeof msg), GF_ERR_INVALID);
    ck_assert_msg(strstr(msg, "input 'x': shape [2, 15] does not match [-1, 16]"), "%s", msg);
    id = encode_infer_tensor(&w, a.key, "x", GF_DT_I32, 2, s_ok);
    send_or_fail(&w);
    ck_assert_uint_eq(expect_error(&w, id, msg, sizeof msg), GF_ERR_INVALID);
    id = encode_infer_tensor(&w, a.key, "x", GF_DT_F32, 1, s_ok);
    send_or_fail(&w);
    ck_assert_uint_eq(expect_error(&w, id, msg, sizeof msg), GF_ERR_INVALID);
    /* two tensors for a one-input function */
    {
        gf_err e;
        gf_err_clear(&e);
        float z[32] = {0};
        gf_ipc_tensor two[2] = {{.name = "x"}, {.name = "x"}};
        gf_tensor_init(&two[0].t, GF_DT_F32, 2, s_ok, z, GF_MEM_HOST, -1, &e);
        two[1].t = two[0].t;
        gf_ipc_infer m2 = {a.key, 2, two, 0, 0, NULL};
        id = gf_wh_id(&w);
        ck_assert_int_eq(gf_ipc_encode_infer(&w.out, id, &m2, &e), GF_OK);
        send_or_fail(&w);
        ck_assert_uint_eq(expect_error(&w, id, msg, sizeof msg), GF_ERR_PROTOCOL);
    }
    id = encode_infer_tensor(&w, "nobody@1", "x", GF_DT_F32, 2, s_ok);
    send_or_fail(&w);
    ck_assert_uint_eq(expect_error(&w, id, msg, sizeof msg), GF_ERR_NOT_FOUND);
    /* activations larger than the whole device budget: the request's fault
     * (GF_ERR_TOO_LARGE, a 413), not a busy device, with the sizes */
    id = encode_infer_tensor(&w, a.key, "x", GF_DT_F32, 2, (int64_t[]){256, 16});
    send_or_fail(&w);
    ck_assert_uint_eq(expect_error(&w, id, msg, sizeof msg), GF_ERR_TOO_LARGE);
    ck_assert_msg(strstr(msg, "bytes") != NULL, "no sizes in '%s'", msg);
    /* over max_batch_size */
    id = encode_infer_tensor(&w, a.key, "x", GF_DT_F32, 2, s_big);
    send_or_fail(&w);
    ck_assert_uint_eq(expect_error(&w, id, msg, sizeof msg), GF_ERR_INVALID);

    /* LOAD failures */
    ck_assert_uint_ne(load_model(&w, "bad@1", "{\"name\":", a.path, "", 2, NULL, msg, sizeof msg),
                      0);
    char *missing = gf_test_path(dir, "missing.safetensors");
    ck_assert_uint_ne(load_model(&w, "m@1", a.manifest, missing, "", 2, NULL, msg, sizeof msg), 0);
    free(missing);
    ck_assert_uint_eq(load_model(&w, "p@1", a.manifest, a.path, "/nonexistent/plugin.so", 2, NULL,
                                 msg, sizeof msg),
                      GF_ERR_PERMISSION);
    ck_assert_uint_eq(load_model(&w, "t@1", a.manifest, a.path, "", 7, NULL, msg, sizeof msg),
                      GF_ERR_INVALID);
    ck_assert_uint_eq(load_model(&w, "", a.manifest, a.path, "", 2, NULL, msg, sizeof msg),
                      GF_ERR_INVALID);
    char *kind_bad = strdup(a.manifest);
    memcpy(strstr(kind_bad, "\"mlp\""), "\"xyz\"", 5);
    ck_assert_uint_eq(load_model(&w, "k@1", kind_bad, a.path, "", 2, NULL, msg, sizeof msg),
                      GF_ERR_NOT_FOUND);
    free(kind_bad);
    /* a failed LOAD leaves nothing behind: the key can be loaded properly */
    load_ok(&w, "bad@1", a.manifest, a.path, GF_TIER_STORE, NULL);

    /* and the worker still serves correct answers */
    infer_check(&w, &a, 4, 9, NULL);
    shutdown_and_wait(&w);
    gf_wh_free(&w);
    tmodel_free(&a);
    gf_test_rmtree(dir);
}
END_TEST

/* ---- more models than fit, in a random order -------------------------------------- */

START_TEST(test_many_models_random_order)
{
    char *dir = gf_test_tmpdir();
    /* each model takes 2 pages (4 MiB) of a 10 MiB device: two fit at once,
     * with room for activations; the host tier (pages of the same size) holds
     * three */
    const char *extra[] = {"--device-memory", "10M", "--host-memory", "12M", NULL};
    gf_wh w;
    spawn(&w, dir, extra);
    enum { N = 8, REQS = 64, BURST = 4 };
    tmodel t[N];
    for (int i = 0; i < N; i++) {
        int64_t d[] = {64, 8192, 8};
        tmodel_make(&t[i], dir, i, 1000 + (uint64_t)i, 2, d, i % 2 == 1);
        load_ok(&w, t[i].key, t[i].manifest, t[i].path, GF_TIER_STORE, NULL);
    }
    gf_test_rng rng;
    gf_test_rng_seed(&rng, 424242);
    int cold = 0, from_host = 0, from_store = 0;
    for (int r = 0; r < REQS; r += BURST) {
        /* a burst of requests in flight at once: the executor leases the next
         * one's model while it runs the current one */
        int which[BURST];
        int64_t batch[BURST];
        float *x[BURST];
        uint64_t ids[BURST];
        for (int k = 0; k < BURST; k++) {
            which[k] = (int)gf_test_rng_below(&rng, N);
            batch[k] = 1 + (int64_t)gf_test_rng_below(&rng, 4);
            x[k] = random_input(&t[which[k]], batch[k], 7000 + (uint64_t)(r + k));
            ids[k] = encode_infer(&w, &t[which[k]], x[k], batch[k]);
        }
        send_or_fail(&w);
        for (int k = 0; k < BURST; k++) {
            gf_ipc_frame f;
            recv_or_fail(&w, &f);
            int j = 0;
            while (j < BURST && ids[j] != f.h.request_id)
                j++;
            ck_assert_int_lt(j, BURST);
            gf_ipc_result info;
            check_result(&f, &t[which[j]], x[j], batch[j], &info);
            gf_ipc_frame_deinit(&f);
            if (info.flags & GF_IPC_RESULT_COLD) {
                cold++;
                from_host += info.source_tier == GF_TIER_HOST;
                from_store += info.source_tier == GF_TIER_STORE;
            }
        }
        for (int k = 0; k < BURST; k++)
            free(x[k]);
    }
    gf_ipc_stats s;
    get_stats(&w, &s);
    ck_assert_uint_eq(s.requests, REQS);
    ck_assert_uint_eq(s.request_errors, 0);
    ck_assert_uint_gt(s.evictions_device, 0);
    ck_assert_uint_le(s.models_on_device, 2);
    ck_assert_int_gt(cold, N);
    ck_assert_int_gt(from_host, 0);
    ck_assert_int_gt(from_store, 0);
    /* EVENTs reported the evictions and the loads, in sequence */
    ck_assert_uint_eq(w.ev_evicted, s.evictions_device + s.evictions_host);
    ck_assert_uint_ge(w.ev_loaded, s.misses);
    ck_assert(!w.ev_seq_gap);
    shutdown_and_wait(&w);
    gf_wh_free(&w);
    for (int i = 0; i < N; i++)
        tmodel_free(&t[i]);
    gf_test_rmtree(dir);
}
END_TEST

/* ---- overlap across requests --------------------------------------------------- */

/* Two cold requests in a row, A (long compute) then B (another model): while
 * A computes, the copy stream swaps B in, so B's LOADED event arrives before
 * A's RESULT and B then runs with its parameters already there. Without the
 * look-ahead B's load could only start after A's RESULT. */
START_TEST(test_next_model_loads_during_compute)
{
    char *dir = gf_test_tmpdir();
    const char *extra[] = {
        "--device-memory", "512M", "--host-memory", "0", "--copy-bandwidth", "64M", NULL};
    gf_wh w;
    spawn(&w, dir, extra);
    int64_t da[] = {512, 512, 512, 512, 8}, db[] = {64, 4096, 8};
    tmodel a, b;
    tmodel_make(&a, dir, 1, 31, 4, da, false);
    tmodel_make(&b, dir, 2, 32, 2, db, false);
    a.m.max_batch = 8192;
    free(a.manifest);
    a.manifest = gf_test_mlp_manifest(&a.m, "fn1");
    load_ok(&w, a.key, a.manifest, a.path, GF_TIER_STORE, NULL);
    load_ok(&w, b.key, b.manifest, b.path, GF_TIER_STORE, NULL);
    int64_t batch_a = 8192; /* ~8.6 G multiply-adds: hundreds of ms */
    float *xa = random_input(&a, batch_a, 1), *xb = random_input(&b, 2, 2);
    uint64_t ida = encode_infer(&w, &a, xa, batch_a);
    uint64_t idb = encode_infer(&w, &b, xb, 2);
    send_or_fail(&w);
    /* read raw frames: EVENTs in order with the answers */
    bool b_loaded = false, a_done = false, b_loaded_before_a = false;
    gf_ipc_result rb;
    memset(&rb, 0, sizeof rb);
    for (int got = 0; got < 2;) {
        gf_ipc_frame f;
        gf_err e;
        gf_err_clear(&e);
        ck_assert_int_eq(gf_ipc_read_frame(&w.rd, &f, 60000, &e), GF_OK);
        if (f.h.type == GF_IPC_EVENT) {
            gf_ipc_event ev;
            ck_assert_int_eq(gf_ipc_decode_event(&f, &ev, &e), GF_OK);
            if (ev.kind == GF_IPC_EV_LOADED && ev.to == GF_TIER_DEVICE &&
                strcmp(ev.key, b.key) == 0) {
                b_loaded = true;
                b_loaded_before_a = !a_done;
            }
        } else if (f.h.request_id == ida) {
            /* checking 8192 rows in double would be slow: check the first 16 */
            ck_assert_int_eq(f.h.type, GF_IPC_RESULT);
            gf_ipc_result ra;
            ck_assert_int_eq(gf_ipc_decode_result(&f, &ra, &e), GF_OK);
            ck_assert_int_eq(ra.t[0].t.shape[0], batch_a);
            float ref[16 * 8];
            gf_test_mlp_ref_f32(&a.m, xa, 16, ref);
            ck_assert(gf_test_max_rel_err(ra.t[0].t.data, ref, 16 * 8) < 1e-4);
            gf_ipc_result_deinit(&ra);
            a_done = true;
            got++;
        } else {
            ck_assert_uint_eq(f.h.request_id, idb);
            check_result(&f, &b, xb, 2, &rb);
            got++;
        }
        gf_ipc_frame_deinit(&f);
    }
    ck_assert(b_loaded);
    ck_assert_msg(b_loaded_before_a, "B was not swapped in while A computed");
    ck_assert_uint_eq(rb.flags & GF_IPC_RESULT_COLD, GF_IPC_RESULT_COLD);
    ck_assert_uint_eq(rb.load_us, 0); /* nothing left to wait for at its turn */
    shutdown_and_wait(&w);
    free(xa);
    free(xb);
    gf_wh_free(&w);
    tmodel_free(&a);
    tmodel_free(&b);
    gf_test_rmtree(dir);
}
END_TEST

/* ---- SIGKILL during an INFER, SHUTDOWN drain, SIGTERM ------------------------------- */

START_TEST(test_sigkill_during_infer)
{
    char *dir = gf_test_tmpdir();
    /* a 4 MiB model over an emulated 4 MB/s link: the INFER takes a second */
    const char *extra[] = {"--device-memory", "64M", "--copy-bandwidth", "4M", NULL};
    gf_wh w;
    spawn(&w, dir, extra);
    int64_t d[] = {64, 16384, 4};
    tmodel a;
    tmodel_make(&a, dir, 1, 3, 2, d, false);
    load_ok(&w, a.key, a.manifest, a.path, GF_TIER_STORE, NULL);
    float *x = random_input(&a, 1, 1);
    encode_infer(&w, &a, x, 1);
    send_or_fail(&w);
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    ck_assert_int_eq(kill(w.pid, SIGKILL), 0);
    gf_ipc_frame f;
    gf_err e;
    gf_err_clear(&e);
    gf_status st = gf_wh_recv(&w, &f, 5000, &e);
    ck_assert_msg(st == GF_ERR_CLOSED, "expected end of stream, got %s", gf_status_name(st));
    ck_assert_int_eq(gf_wh_wait(&w, 5000, false), 128 + SIGKILL);
    free(x);
    gf_wh_free(&w);
    tmodel_free(&a);
    gf_test_rmtree(dir);
}
END_TEST

START_TEST(test_shutdown_drains)
{
    char *dir = gf_test_tmpdir();
    const char *extra[] = {"--device-memory", "64M", "--copy-bandwidth", "16M", NULL};
    gf_wh w;
    spawn(&w, dir, extra);
    int64_t d1[] = {64, 8192, 8}, d2[] = {32, 4096, 4};
    tmodel t[2];
    tmodel_make(&t[0], dir, 1, 5, 2, d1, false);
    tmodel_make(&t[1], dir, 2, 6, 2, d2, true);
    load_ok(&w, t[0].key, t[0].manifest, t[0].path, GF_TIER_STORE, NULL);
    load_ok(&w, t[1].key, t[1].manifest, t[1].path, GF_TIER_STORE, NULL);
    enum { N = 6 };
    float *x[N];
    uint64_t ids[N];
    for (int i = 0; i < N; i++) {
        x[i] = random_input(&t[i % 2], 2, 50 + (uint64_t)i);
        ids[i] = encode_infer(&w, &t[i % 2], x[i], 2);
    }
    ck_assert_int_eq(gf_ipc_encode_empty(&w.out, GF_IPC_SHUTDOWN, gf_wh_id(&w), NULL), GF_OK);
    float *late_x = random_input(&t[0], 1, 99);
    uint64_t late = encode_infer(&w, &t[0], late_x, 1);
    send_or_fail(&w); /* all in one write: 6 INFERs, SHUTDOWN, an INFER too late */
    /* and the gateway closes its writing half: the results must still come */
    ck_assert_int_eq(shutdown(w.fd, SHUT_WR), 0);
    int results = 0;
    bool late_refused = false;
    for (int k = 0; k < N + 1; k++) {
        gf_ipc_frame f;
        recv_or_fail(&w, &f);
        if (f.h.request_id == late) {
            gf_ipc_error er;
            ck_assert_int_eq(f.h.type, GF_IPC_ERROR);
            ck_assert_int_eq(gf_ipc_decode_error(&f, &er, NULL), GF_OK);
            ck_assert_uint_eq(er.code, GF_ERR_CLOSED);
            late_refused = true;
        } else {
            int j = 0;
            while (j < N && ids[j] != f.h.request_id)
                j++;
            ck_assert_int_lt(j, N);
            check_result(&f, &t[j % 2], x[j], 2, NULL);
            results++;
        }
        gf_ipc_frame_deinit(&f);
    }
    ck_assert_int_eq(results, N);
    ck_assert(late_refused);
    gf_ipc_frame f;
    gf_err e;
    gf_err_clear(&e);
    ck_assert_int_eq(gf_wh_recv(&w, &f, RECV_MS, &e), GF_ERR_CLOSED);
    ck_assert_int_eq(gf_wh_wait(&w, RECV_MS, false), GF_WORKER_EXIT_OK);
    for (int i = 0; i < N; i++)
        free(x[i]);
    free(late_x);
    gf_wh_free(&w);
    tmodel_free(&t[0]);
    tmodel_free(&t[1]);
    gf_test_rmtree(dir);
}
END_TEST

START_TEST(test_sigterm_drains)
{
    char *dir = gf_test_tmpdir();
    gf_wh w;
    spawn(&w, dir, NULL);
    ping(&w);
    ck_assert_int_eq(kill(w.pid, SIGTERM), 0);
    gf_ipc_frame f;
    gf_err e;
    gf_err_clear(&e);
    ck_assert_int_eq(gf_wh_recv(&w, &f, RECV_MS, &e), GF_ERR_CLOSED);
    ck_assert_int_eq(gf_wh_wait(&w, RECV_MS, false), GF_WORKER_EXIT_OK);
    gf_wh_free(&w);
    gf_test_rmtree(dir);
}
END_TEST

/* The start-up failures are in test_worker_start.c. */
void tw_start_tests(TCase *tc);
Suite *worker_proc_suite(void);

Suite *worker_proc_suite(void)
{
    Suite *s = suite_create("worker");
    TCase *tc = tcase_create("process");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ready_ping_stats_eof);
    tcase_add_test(tc, test_load_infer_unload);
    tcase_add_test(tc, test_request_errors);
    tcase_add_test(tc, test_many_models_random_order);
    tcase_add_test(tc, test_next_model_loads_during_compute);
    tcase_add_test(tc, test_sigkill_during_infer);
    tcase_add_test(tc, test_shutdown_drains);
    tcase_add_test(tc, test_sigterm_drains);
    tw_start_tests(tc);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return gf_test_run_suite(worker_proc_suite());
}
