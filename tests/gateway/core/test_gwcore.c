/* Tests for the gateway core (gateway/core) without HTTP: real
 * gpufaas-worker processes, a real SQLite file, real function files.
 * Deploy and infer with outputs checked against a naive reference; dynamic
 * batching; the checks submit makes; a worker SIGKILLed under load; a new
 * version deployed under load; a restart of the gateway; evictions seen in
 * /metrics and in the database; shutdown draining. */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/safetensors.h"
#include "store/sha256.h"
#include "gateway/core/gateway.h"
#include "gateway/http/http.h"
#include "mlp.h"
#include "testutil.h"

#include "gwcore_lib.h"

/* Stage a manifest text and weights under the names the convtest kind's
 * uploads use (W1, b1, W2, b2; softmax in the metadata). */
static gf_gw_deploy_req stage_convtest(gf_gw *gw, const mlp_w *m, char *tmp, size_t cap,
                                       char *sha, const char *manifest)
{
    snprintf(tmp, cap, "%s/stage-conv-%d", gf_gw_upload_dir(gw), (int)getpid());
    gf_st_wtensor ts[4] = {{"W1", GF_DT_F32, 2, (int64_t[]){HID, IN}, m->w[0]},
                           {"b1", GF_DT_F32, 1, (int64_t[]){HID}, m->b[0]},
                           {"W2", GF_DT_F32, 2, (int64_t[]){OUT, HID}, m->w[1]},
                           {"b2", GF_DT_F32, 1, (int64_t[]){OUT}, m->b[1]}};
    const char *meta[] = {"softmax", "true"};
    ck_assert_int_eq(gf_st_write(tmp, ts, 4, meta, 1, NULL), GF_OK);
    uint64_t size;
    ck_assert_int_eq(gf_sha256_file(tmp, sha, &size, NULL), GF_OK);
    gf_gw_deploy_req r = {.manifest = manifest, .manifest_len = strlen(manifest),
                          .weights_tmp = tmp, .sha256_hex = sha, .bytes = size};
    return r;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    if (d != NULL)
        closedir(d);
    return n;
}

/* Deploys are checked in a gpufaas-worker --validate child: a kind that
 * crashes there fails that deploy (500, saying so) and the gateway serves
 * on; a kind that converts its upload has the converted weights, its
 * companion file and its derived manifest published and served. */
START_TEST(test_deploy_validated_in_a_child)
{
    const char *plugins[1] = {gf_test_prog("GF_PLUGIN_CRASH")};
    gf_gw *gw = open_gw_with("cpu:1", 64 << 20, gf_test_prog("GF_WORKER_CONVTEST"), plugins, 1);
    mlp_w m;
    mlp_init(&m, 7);
    char tmp[512], sha[GF_SHA256_HEX_LEN];
    const char *crash = "{\"name\":\"boom\",\"kind\":\"crash\",\"inputs\":[{\"name\":\"x\","
                        "\"datatype\":\"FP32\",\"shape\":[-1,8]}],\"outputs\":[{\"name\":\"y\","
                        "\"datatype\":\"FP32\",\"shape\":[-1,4]}]}";
    gf_gw_deploy_req r = stage(gw, &m, 0, tmp, sizeof tmp, sha);
    r.manifest = crash;
    r.manifest_len = strlen(crash);
    gf_gw_deployed dep;
    gf_err err;
    ck_assert_int_eq(gf_gw_deploy(gw, &r, &dep, &err), GF_ERR_INTERNAL);
    ck_assert_msg(strstr(err.msg, "without answering; the gateway is unaffected"), "%s", err.msg);
    ck_assert_int_eq(count_entries(gf_gw_upload_dir(gw)), 0); /* upload and work dir gone */
    ck_assert(gf_gw_ready(gw));
    /* the converting kind, from a partial manifest and two files: what is
     * stored is what the converter wrote and derived */
    const char *conv = "{\"name\":\"conv\",\"kind\":\"convtest\"}";
    r = stage_convtest(gw, &m, tmp, sizeof tmp, sha, conv);
    char *extra = gf_test_path(gf_gw_upload_dir(gw), "stage-note");
    gf_test_write_file(extra, "from the second part", 20);
    const char *extras[1] = {extra};
    r.extra_tmp = extras;
    r.n_extra = 1;
    ck_assert_msg(gf_gw_deploy(gw, &r, &dep, &err) == GF_OK, "%s", err.msg);
    ck_assert_str_eq(dep.name, "conv");
    json_t *out = parsed(GF_OK, &dep.json);
    ck_assert_int_eq(count_entries(gf_gw_upload_dir(gw)), 0);
    char *fdir = gf_test_path(tmpdir, "state/functions/conv");
    char *w1 = gf_test_path(fdir, "v1.safetensors"), *note = gf_test_path(fdir, "v1.note");
    size_t nlen;
    char *ntext = gf_test_read_file(note, &nlen);
    ck_assert_str_eq(ntext, "converted: from the second part\n");
    free(ntext);
    free(extra);
    char wsha[GF_SHA256_HEX_LEN];
    uint64_t wbytes;
    ck_assert_int_eq(gf_sha256_file(w1, wsha, &wbytes, NULL), GF_OK);
    ck_assert_str_ne(wsha, sha); /* not the upload's */
    ck_assert_str_eq(json_string_value(json_object_get(out, "sha256")), wsha);
    ck_assert_int_eq(json_integer_value(json_object_get(out, "bytes")), (json_int_t)wbytes);
    json_decref(out);
    /* served with the derived manifest (its config turns the softmax on) */
    waiter w;
    waiter_init(&w);
    w.ref[1] = &m;
    w.softmax = true;
    for (int i = 0; i < 3; i++)
        ck_assert_msg(submit(gw, "conv", &w, &err) == GF_OK, "%s", err.msg);
    waiter_wait(&w, 3);
    ck_assert_int_eq(w.ok, 3);
    ck_assert_int_eq(w.bad_values, 0);
    /* deleting it removes every file of the version */
    ck_assert_int_eq(gf_gw_delete(gw, "conv", &err), GF_OK);
    ck_assert_int_ne(access(fdir, F_OK), 0);
    free(w1);
    free(note);
    free(fdir);
    gf_gw_free(gw);
    gf_test_mlp_free(&m);
}
END_TEST

START_TEST(test_deploy_infer_batch_and_errors)
{
    gf_gw *gw = open_gw("cpu:1", 64 << 20);
    ck_assert(gf_gw_ready(gw));
    mlp_w m;
    mlp_init(&m, 1);
    json_t *d = deploy(gw, "adder", &m, 0, 8, 20000);
    ck_assert_int_eq(json_integer_value(json_object_get(d, "version")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(d, "invoke")),
                     "/v1/functions/adder/invoke");
    json_decref(d);
    waiter w;
    waiter_init(&w);
    w.ref[1] = &m;
    gf_err err;
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(submit(gw, "adder", &w, &err), GF_OK);
    waiter_wait(&w, 8);
    ck_assert_int_eq(w.ok, 8);
    ck_assert_int_eq(w.bad_values, 0);
    ck_assert_int_gt(w.max_batch, 1); /* 8 requests within 20 ms share batches */
    /* checks at submit */
    ck_assert_int_eq(submit(gw, "nope", &w, &err), GF_ERR_NOT_FOUND);
    ck_assert_int_eq(submit(gw, "../x", &w, &err), GF_ERR_INVALID);
    gf_gw_tensor *bad = calloc(1, sizeof *bad);
    bad->name = strdup("x");
    bad->t.dtype = GF_DT_F32;
    bad->t.rank = 2;
    bad->t.shape[0] = 1;
    bad->t.shape[1] = IN + 1;
    bad->t.nbytes = (IN + 1) * 4;
    bad->t.data = calloc(IN + 1, 4);
    gf_gw_infer_req req = {.function = "adder",
                           .inputs = bad,
                           .n_inputs = 1,
                           .done = on_done,
                           .done_arg = &w};
    ck_assert_int_eq(gf_gw_submit(gw, &req, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "shape [1, 9] does not match [-1, 8]"), "%s", err.msg);
    ck_assert_ptr_null(req.inputs);
    gf_gw_tensor *wrong = calloc(1, sizeof *wrong);
    wrong->name = strdup("z");
    gf_gw_infer_req req2 = {.function = "adder",
                           .inputs = wrong,
                           .n_inputs = 1,
                           .done = on_done,
                           .done_arg = &w};
    ck_assert_int_eq(gf_gw_submit(gw, &req2, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "no input named 'z' (its inputs: x)"), "%s", err.msg);
    /* views */
    gf_buf vb;
    gf_buf_init(&vb);
    json_t *fj = parsed(gf_gw_function_json(gw, "adder", &vb, &err), &vb);
    ck_assert_ptr_nonnull(fj);
    json_decref(fj);
    ck_assert_int_eq(gf_gw_function_json(gw, "nope", &vb, &err), GF_ERR_NOT_FOUND);
    ck_assert_str_eq(err.msg, "function 'nope' not found");
    ck_assert_int_eq(gf_gw_model_metadata(gw, "adder", 7, &vb, &err), GF_ERR_NOT_FOUND);
    ck_assert_msg(strstr(err.msg, "version 7 is not found"), "%s", err.msg);
    json_t *md = parsed(gf_gw_model_metadata(gw, "adder", 0, &vb, &err), &vb);
    ck_assert_ptr_nonnull(md);
    ck_assert_str_eq(json_string_value(json_object_get(md, "platform")), "gpufaas_mlp");
    json_decref(md);
    ck_assert(gf_gw_model_ready(gw, "adder", 1));
    ck_assert(!gf_gw_model_ready(gw, "adder", 2));
    gf_buf mt;
    gf_buf_init(&mt);
    ck_assert_int_eq(gf_gw_metrics_text(gw, &mt), GF_OK);
    ck_assert_msg(strstr(mt.data, "gpufaas_requests_total{function=\"adder\",version=\"1\",code=\"200\"} 8"),
                  "%s", mt.data);
    ck_assert_msg(strstr(mt.data, "gpufaas_workers{state=\"up\"} 1"), "%s", mt.data);
    /* requests refused at submit are counted too: the bad shape and the
     * unknown input under the function, the unknown function without a name */
    ck_assert_msg(
        strstr(mt.data, "gpufaas_requests_total{function=\"adder\",version=\"1\",code=\"400\"} 2"),
        "%s", mt.data);
    ck_assert_msg(
        strstr(mt.data, "gpufaas_requests_total{function=\"\",version=\"\",code=\"404\"} 1"),
        "%s", mt.data);
    gf_buf_deinit(&mt);
    /* a deploy with weights that do not fit the manifest: 400 naming the tensor */
    char tmp[512], sha[GF_SHA256_HEX_LEN];
    gf_gw_deploy_req r = stage(gw, &m, 0, tmp, sizeof tmp, sha);
    const char *mf = "{\"name\":\"adder\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\","
                     "\"datatype\":\"FP32\",\"shape\":[-1,5]}],\"outputs\":[{\"name\":\"y\","
                     "\"datatype\":\"FP32\",\"shape\":[-1,4]}]}";
    r.manifest = mf;
    r.manifest_len = strlen(mf);
    gf_gw_deployed out;
    ck_assert_int_eq(gf_gw_deploy(gw, &r, &out, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "tensor '0.weight' has shape [16, 8], expected [-1, 5]"), "%s",
                  err.msg);
    ck_assert_int_ne(access(tmp, F_OK), 0); /* the staged file is removed */
    gf_gw_free(gw);
    gf_test_mlp_free(&m);
}
END_TEST

/* Inputs larger than the socket's buffer, alone and from several threads at
 * once: a request that finds the worker idle is written from the submitting
 * thread and what the socket does not take at once is finished by the
 * writer; others queue behind it. Every row of every answer is checked. */
#define BIG_ROWS 30000

typedef struct big_req {
    pthread_mutex_t *lock;
    pthread_cond_t *cond;
    int *done;
    const mlp_w *m;
    float *x; /* BIG_ROWS * IN */
    int status;
    int bad_rows;
} big_req;

static void big_done(void *arg, gf_gw_result *r)
{
    big_req *b = arg;
    int bad = 0;
    if (r->status == GF_OK && r->n_outputs == 1 && r->outputs[0].t.shape[0] == BIG_ROWS) {
        const float *got = r->outputs[0].t.data;
        for (int64_t row = 0; row < BIG_ROWS; row++) {
            double want[OUT];
            mlp_ref(b->m, b->x + row * IN, want);
            for (int o = 0; o < OUT; o++)
                bad += fabs(got[row * OUT + o] - want[o]) > 1e-4 * (1 + fabs(want[o]));
        }
    } else {
        bad = BIG_ROWS;
    }
    pthread_mutex_lock(b->lock);
    b->status = r->status;
    b->bad_rows = bad;
    (*b->done)++;
    pthread_cond_broadcast(b->cond);
    pthread_mutex_unlock(b->lock);
    gf_gw_result_free(r);
}

static void big_submit(gf_gw *gw, big_req *b)
{
    gf_gw_tensor *in = x_input(b->x, BIG_ROWS);
    gf_gw_infer_req req = {.function = "big",
                           .inputs = in,
                           .n_inputs = 1,
                           .done = big_done,
                           .done_arg = b};
    gf_err err;
    ck_assert_msg(gf_gw_submit(gw, &req, &err) == GF_OK, "%s", err.msg);
}

typedef struct big_client {
    gf_gw *gw;
    big_req *reqs;
    int n;
} big_client;

static void *big_client_main(void *arg)
{
    big_client *c = arg;
    for (int i = 0; i < c->n; i++)
        big_submit(c->gw, &c->reqs[i]);
    return NULL;
}

START_TEST(test_large_frames_in_pieces)
{
    gf_gw *gw = open_gw("cpu:1", 64 << 20);
    mlp_w m;
    mlp_init(&m, 5);
    json_decref(deploy(gw, "big", &m, 0, 65536, 0));
    enum { NB = 13 };
    big_req reqs[NB];
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
    int done = 0;
    gf_test_rng g;
    gf_test_rng_seed(&g, 77);
    for (int i = 0; i < NB; i++) {
        reqs[i] = (big_req){&lock, &cond, &done, &m, malloc((size_t)BIG_ROWS * IN * 4), 0, 0};
        for (int k = 0; k < BIG_ROWS * IN; k++)
            reqs[i].x[k] = gf_test_rng_float(&g, -1.0f, 1.0f);
    }
    /* alone: the worker is idle, so it is written from here, in pieces */
    big_submit(gw, &reqs[0]);
    pthread_mutex_lock(&lock);
    while (done < 1)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    /* then from 4 threads at once */
    pthread_t t[4];
    big_client c[4];
    for (int i = 0; i < 4; i++) {
        c[i] = (big_client){gw, &reqs[1 + 3 * i], 3};
        ck_assert_int_eq(pthread_create(&t[i], NULL, big_client_main, &c[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    pthread_mutex_lock(&lock);
    while (done < NB)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < NB; i++) {
        ck_assert_msg(reqs[i].status == GF_OK && reqs[i].bad_rows == 0,
                      "request %d: status %d, %d wrong rows", i, reqs[i].status,
                      reqs[i].bad_rows);
        free(reqs[i].x);
    }
    gf_gw_free(gw);
    gf_test_mlp_free(&m);
}
END_TEST

typedef struct {
    gf_gw *gw;
    waiter *w;
    atomic_int stop; /* set by the test thread while the loader reads it */
    int sent, refused;
} loader_arg;

static void *load_thread(void *arg)
{
    loader_arg *a = arg;
    while (!atomic_load(&a->stop)) {
        gf_err err;
        if (submit(a->gw, "f", a->w, &err) == GF_OK)
            a->sent++;
        else
            a->refused++;
        usleep(500);
    }
    return NULL;
}

START_TEST(test_new_version_under_load_and_worker_kill)
{
    gf_gw *gw = open_gw("cpu:2", 64 << 20);
    mlp_w m1, m2;
    mlp_init(&m1, 11);
    mlp_init(&m2, 22);
    json_decref(deploy(gw, "f", &m1, 0, 4, 1000));
    waiter w;
    waiter_init(&w);
    w.ref[1] = &m1;
    w.ref[2] = &m2;
    loader_arg la = {gw, &w, 0, 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, load_thread, &la);
    usleep(300 * 1000);
    json_decref(deploy(gw, "f", &m2, 0, 4, 1000)); /* version 2 under load */
    usleep(300 * 1000);
    atomic_store(&la.stop, 1);
    pthread_join(t, NULL);
    waiter_wait(&w, la.sent);
    ck_assert_int_eq(la.refused, 0);
    ck_assert_int_eq(w.ok, la.sent); /* zero failed requests */
    ck_assert_int_eq(w.bad_values, 0);
    ck_assert_int_gt(w.version_seen[1], 0);
    ck_assert_int_gt(w.version_seen[2], 0);

    /* SIGKILL a worker under load: every request gets its answer or a clean
     * 503, and the worker comes back */
    json_t *ws = view(gf_gw_workers_json, gw);
    json_t *w0 = json_array_get(json_object_get(ws, "workers"), 0);
    pid_t pid = (pid_t)json_integer_value(json_object_get(w0, "pid"));
    json_decref(ws);
    ck_assert_int_gt(pid, 0);
    waiter w2;
    waiter_init(&w2);
    w2.ref[2] = &m2;
    loader_arg lb = {gw, &w2, 0, 0, 0};
    pthread_create(&t, NULL, load_thread, &lb);
    usleep(200 * 1000);
    kill(pid, SIGKILL);
    usleep(400 * 1000);
    atomic_store(&lb.stop, 1);
    pthread_join(t, NULL);
    waiter_wait(&w2, lb.sent);
    ck_assert_int_eq(w2.failed_other, 0);
    ck_assert_int_eq(w2.ok + w2.failed_503, lb.sent);
    ck_assert_int_eq(w2.bad_values, 0);
    /* it comes back */
    int up = 0;
    for (int i = 0; i < 100 && up < 2; i++) {
        usleep(100 * 1000);
        ws = view(gf_gw_workers_json, gw);
        up = 0;
        json_t *arr = json_object_get(ws, "workers");
        for (size_t k = 0; k < json_array_size(arr); k++)
            up += strcmp(json_string_value(json_object_get(json_array_get(arr, k), "state")),
                         "up") == 0;
        json_decref(ws);
    }
    ck_assert_int_eq(up, 2);
    gf_gw_free(gw);
    gf_test_mlp_free(&m1);
    gf_test_mlp_free(&m2);
}
END_TEST

START_TEST(test_restart_keeps_functions_and_evictions_are_recorded)
{
    /* device budget 6 MiB; each function's 624 KB of weights take a 2 MiB
     * page (more than a quarter page: not shared): 8 do not fit */
    gf_gw *gw = open_gw("cpu:1", 6 << 20);
    mlp_w ms[8];
    char name[16];
    for (int i = 0; i < 8; i++) {
        mlp_init_wide(&ms[i], 100 + (uint64_t)i, 12000);
        snprintf(name, sizeof name, "m%d", i);
        json_decref(deploy(gw, name, &ms[i], 400000, 1, 0));
    }
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 8; i++) {
            waiter w;
            waiter_init(&w);
            w.ref[1] = &ms[i];
            snprintf(name, sizeof name, "m%d", i);
            gf_err err;
            ck_assert_int_eq(submit(gw, name, &w, &err), GF_OK);
            waiter_wait(&w, 1);
            ck_assert_int_eq(w.ok, 1);
            ck_assert_int_eq(w.bad_values, 0);
        }
    }
    usleep(1500 * 1000); /* let EVENT and STATS frames arrive */
    gf_buf mt;
    gf_buf_init(&mt);
    ck_assert_int_eq(gf_gw_metrics_text(gw, &mt), GF_OK);
    const char *ev = strstr(mt.data, "gpufaas_evictions_total{worker=\"0\"} ");
    ck_assert_msg(ev != NULL && atoi(ev + strlen("gpufaas_evictions_total{worker=\"0\"} ")) > 0,
                  "%s", mt.data);
    ck_assert_msg(strstr(mt.data, "gpufaas_cold_starts_total{function=\"m0\",version=\"1\"}") != NULL, "%s",
                  mt.data);
    gf_buf_deinit(&mt);
    gf_gw_free(gw);
    /* the database saw the swaps */
    char *db = gf_test_path(tmpdir, "state/gpufaas.db");
    char *argv[] = {(char *)"/usr/bin/sqlite3", db,
                    (char *)"select count(*) from swap_events where to_tier='device'", NULL};
    char *out = NULL;
    ck_assert_int_eq(gf_test_run_cmd(argv, &out, NULL, 30), 0);
    ck_assert_msg(atoi(out) >= 8, "swap events: %s", out);
    free(out);
    free(db);
    /* restart: still deployed, still serving */
    gw = open_gw("cpu:1", 6 << 20);
    /* a second gateway on the same state directory is refused */
    char *state = gf_test_path(tmpdir, "state");
    gf_gw_config cfg2 = {.state_dir = state, .devices = "cpu:1",
                         .worker_path = gf_test_prog("GF_WORKER")};
    gf_gw *gw2 = (gf_gw *)0x1;
    gf_err err2;
    ck_assert_int_eq(gf_gw_new(&cfg2, &gw2, &err2), GF_ERR_BUSY);
    ck_assert_msg(strstr(err2.msg, "is in use by another gpufaas serve (pid "), "%s", err2.msg);
    free(state);
    json_t *all = view(gf_gw_functions_json, gw);
    ck_assert_uint_eq(json_array_size(json_object_get(all, "functions")), 8);
    json_decref(all);
    waiter w;
    waiter_init(&w);
    w.ref[1] = &ms[3];
    gf_err err;
    ck_assert_int_eq(submit(gw, "m3", &w, &err), GF_OK);
    waiter_wait(&w, 1);
    ck_assert_int_eq(w.ok, 1);
    ck_assert_int_eq(w.bad_values, 0);
    /* delete: gone, 404 after */
    ck_assert_int_eq(gf_gw_delete(gw, "m3", &err), GF_OK);
    ck_assert_int_eq(submit(gw, "m3", &w, &err), GF_ERR_NOT_FOUND);
    ck_assert_int_eq(gf_gw_delete(gw, "m3", &err), GF_ERR_NOT_FOUND);
    gf_gw_free(gw);
    for (int i = 0; i < 8; i++)
        gf_test_mlp_free(&ms[i]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gateway_core");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_deploy_infer_batch_and_errors);
    tcase_add_test(tc, test_deploy_validated_in_a_child);
    tcase_add_test(tc, test_large_frames_in_pieces);
    tcase_add_test(tc, test_new_version_under_load_and_worker_kill);
    tcase_add_test(tc, test_restart_keeps_functions_and_evictions_are_recorded);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
