/* tests/gateway/core — what the gateway core's tests share (gwcore_lib.h). */
#include "gwcore_lib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "core/safetensors.h"
#include "store/sha256.h"
#include "gateway/http/http.h"
#include "testutil.h"

char *tmpdir;
void setup(void) { tmpdir = gf_test_tmpdir(); }
void teardown(void)
{
    gf_test_rmtree(tmpdir);
    tmpdir = NULL;
}

/* ---- a small mlp: 8 -> 16 (relu) -> 4 ---- */

void mlp_init(mlp_w *m, uint64_t seed)
{
    gf_test_mlp_make(m, seed, 2, (int64_t[]){IN, HID, OUT}, false, 8);
}

/* An mlp of 52 x hid bytes of weights (a model of more than a quarter page
 * takes pages of its own; a smaller one shares a page with others). */
void mlp_init_wide(mlp_w *m, uint64_t seed, int64_t hid)
{
    gf_test_mlp_make(m, seed, 2, (int64_t[]){IN, hid, OUT}, false, 8);
}

void mlp_ref(const mlp_w *m, const float *x, double *y)
{
    gf_test_mlp_ref(m, GF_DT_F32, x, 1, y);
}

/* Stage an mlp's weights in the upload dir, as the HTTP front would. pad
 * adds a big unused tensor (to make the model take device pages). */
gf_gw_deploy_req stage(gf_gw *gw, const mlp_w *m, size_t pad_floats, char *tmp_path,
                              size_t cap, char *sha)
{
    static int counter;
    snprintf(tmp_path, cap, "%s/stage-%d-%d", gf_gw_upload_dir(gw), (int)getpid(), counter++);
    float *pad = pad_floats ? calloc(pad_floats, sizeof(float)) : NULL;
    gf_st_wtensor ts[5] = {
        {"0.weight", GF_DT_F32, 2, (int64_t[]){m->dims[1], IN}, m->w[0]},
        {"0.bias", GF_DT_F32, 1, (int64_t[]){m->dims[1]}, m->b[0]},
        {"2.weight", GF_DT_F32, 2, (int64_t[]){OUT, m->dims[1]}, m->w[1]},
        {"2.bias", GF_DT_F32, 1, (int64_t[]){OUT}, m->b[1]},
        {"pad", GF_DT_F32, 1, (int64_t[]){(int64_t)pad_floats}, pad},
    };
    ck_assert_int_eq(gf_st_write(tmp_path, ts, pad_floats ? 5 : 4, NULL, 0, NULL), GF_OK);
    free(pad);
    uint64_t size;
    ck_assert_int_eq(gf_sha256_file(tmp_path, sha, &size, NULL), GF_OK);
    gf_gw_deploy_req r = {.weights_tmp = tmp_path, .sha256_hex = sha, .bytes = size};
    return r;
}

/* A view's JSON text as a jansson value (NULL when the view failed). */
json_t *parsed(gf_status st, gf_buf *b)
{
    json_t *j = st == GF_OK ? json_loadb(b->data, b->len, 0, NULL) : NULL;
    gf_buf_deinit(b);
    return j;
}

json_t *view(gf_status (*fn)(gf_gw *, gf_buf *), gf_gw *gw)
{
    gf_buf b;
    gf_buf_init(&b);
    return parsed(fn(gw, &b), &b);
}

json_t *deploy(gf_gw *gw, const char *name, const mlp_w *m, size_t pad, int max_batch,
                      int delay_us)
{
    char tmp[512], sha[GF_SHA256_HEX_LEN], manifest[1024];
    gf_gw_deploy_req r = stage(gw, m, pad, tmp, sizeof tmp, sha);
    snprintf(manifest, sizeof manifest,
             "{\"name\":\"%s\",\"kind\":\"mlp\",\"inputs\":[{\"name\":\"x\",\"datatype\":"
             "\"FP32\",\"shape\":[-1,%d]}],\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\","
             "\"shape\":[-1,%d]}],\"max_batch_size\":%d,\"max_queue_delay_us\":%d%s}",
             name, IN, OUT, max_batch, delay_us,
             pad ? ",\"ignore_weights\":[\"pad\"]" : ""); /* mlp reads no 'pad' */
    r.manifest = manifest;
    r.manifest_len = strlen(manifest);
    gf_gw_deployed out;
    gf_err err;
    gf_status st = gf_gw_deploy(gw, &r, &out, &err);
    ck_assert_msg(st == GF_OK, "deploy %s: %s", name, err.msg);
    ck_assert_str_eq(out.name, name);
    ck_assert_int_ne(access(tmp, F_OK), 0); /* the staged file was moved */
    return parsed(GF_OK, &out.json);
}

/* ---- waiting for results ---- */

void waiter_init(waiter *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    for (int i = 0; i < IN; i++)
        w->x[i] = (float)i * 0.25f - 1.0f;
}

void on_done(void *arg, gf_gw_result *r)
{
    waiter *w = arg;
    pthread_mutex_lock(&w->lock);
    w->done++;
    if (r->status == GF_OK) {
        w->ok++;
        if (r->batch_size > w->max_batch)
            w->max_batch = r->batch_size;
        if (r->version >= 0 && r->version < 8)
            w->version_seen[r->version]++;
        const mlp_w *m = r->version < 8 ? w->ref[r->version] : NULL;
        if (m == NULL || r->n_outputs != 1 || r->outputs[0].t.shape[0] != 1 ||
            r->outputs[0].t.shape[1] != OUT) {
            w->bad_values++;
        } else {
            double want[OUT];
            mlp_ref(m, w->x, want);
            if (w->softmax) {
                double mx = want[0], sum = 0;
                for (int o = 1; o < OUT; o++)
                    mx = want[o] > mx ? want[o] : mx;
                for (int o = 0; o < OUT; o++)
                    sum += (want[o] = exp(want[o] - mx));
                for (int o = 0; o < OUT; o++)
                    want[o] /= sum;
            }
            const float *got = r->outputs[0].t.data;
            for (int o = 0; o < OUT; o++)
                if (fabs(got[o] - want[o]) > 1e-4 * (1 + fabs(want[o])))
                    w->bad_values++;
        }
    } else if (gf_http_status_of(r->status) == 503) {
        w->failed_503++;
    } else {
        w->failed_other++;
        fprintf(stderr, "request failed: %s %s\n", gf_status_name(r->status), r->message);
    }
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    gf_gw_result_free(r);
}

void waiter_wait(waiter *w, int n)
{
    pthread_mutex_lock(&w->lock);
    while (w->done < n)
        pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
}

gf_gw_tensor *x_input(const float *x, int64_t rows)
{
    gf_gw_tensor *in = calloc(1, sizeof *in);
    ck_assert_ptr_nonnull(in);
    in->name = strdup("x");
    in->t.dtype = GF_DT_F32;
    in->t.rank = 2;
    in->t.shape[0] = rows;
    in->t.shape[1] = IN;
    in->t.nbytes = (size_t)rows * IN * sizeof(float);
    in->t.data = malloc(in->t.nbytes);
    ck_assert_ptr_nonnull(in->t.data);
    memcpy(in->t.data, x, in->t.nbytes);
    in->t.mem = GF_MEM_HOST;
    in->t.device_id = -1;
    return in;
}

gf_status submit(gf_gw *gw, const char *name, waiter *w, gf_err *err)
{
    gf_gw_infer_req req = {.function = name,
                           .inputs = x_input(w->x, 1),
                           .n_inputs = 1,
                           .done = on_done,
                           .done_arg = w};
    return gf_gw_submit(gw, &req, err);
}

gf_gw *open_gw_with(const char *devices, uint64_t dev_mem, const char *worker,
                           const char *const *plugins, size_t n_plugins)
{
    char *state = gf_test_path(tmpdir, "state");
    gf_gw_config cfg = {.state_dir = state, .devices = devices, .device_memory = dev_mem,
                        .host_memory = 64 << 20, .worker_path = worker,
                        .drain_timeout_ms = 5000, .plugins = plugins, .n_plugins = n_plugins,
                        .allow_native = n_plugins > 0, .protocol_code = gf_http_status_of};
    gf_gw *gw;
    gf_err err;
    gf_status st = gf_gw_new(&cfg, &gw, &err);
    free(state);
    ck_assert_msg(st == GF_OK, "gf_gw_new: %s", err.msg);
    return gw;
}

gf_gw *open_gw(const char *devices, uint64_t dev_mem)
{
    return open_gw_with(devices, dev_mem, gf_test_prog("GF_WORKER"), NULL, 0);
}