/* Tests for the gateway core (gateway/core) without HTTP, about where a
 * request's function is: real gpufaas-worker processes, real SQLite files,
 * real function files, a real shared store directory. A device load that
 * comes while a deploy's host warm is on its way; two nodes on one shared
 * store, where a request for a function only the other node has deployed
 * waits for this node's lookup and keeps everything it asked for. */
#include <check.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/http/http.h"
#include "gwcore_lib.h"
#include "testutil.h"

/* The tier of name's copy on worker w per the placements view ("" = none). */
static void placed_tier(gf_gw *gw, const char *name, int w, char *tier, size_t cap)
{
    json_t *j = view(gf_gw_placements_json, gw);
    ck_assert_ptr_nonnull(j);
    tier[0] = '\0';
    json_t *ps = json_object_get(j, "placements");
    for (size_t i = 0; i < json_array_size(ps); i++) {
        json_t *p = json_array_get(ps, i);
        if (strcmp(json_string_value(json_object_get(p, "function")), name) == 0 &&
            json_integer_value(json_object_get(p, "worker")) == w &&
            strcmp(tier, "device") != 0) /* one entry per copy: the highest wins */
            snprintf(tier, cap, "%s", json_string_value(json_object_get(p, "tier")));
    }
    json_decref(j);
}

/* A deploy warms the host tier of the worker that would run it; a load onto
 * that worker's device that comes while the warm's LOAD is still in flight
 * is sent all the same (it was taken for done, and the copy stayed in host
 * memory: `gpufaas load` then waited 30 s for nothing). */
START_TEST(test_device_load_behind_the_host_warm)
{
    gf_gw *gw = open_gw("cpu:1", 64 << 20);
    mlp_w m;
    mlp_init(&m, 3);
    char name[16], tier[16] = "";
    for (int round = 0; round < 5; round++) {
        snprintf(name, sizeof name, "warm%d", round);
        json_decref(deploy(gw, name, &m, 0, 1, 0)); /* its host warm is on its way */
        gf_err err;
        ck_assert_msg(gf_gw_repo_load_on(gw, name, 0, &err) == GF_OK, "%s", err.msg);
        for (int i = 0; i < 300 && strcmp(tier, "device") != 0; i++) {
            usleep(100 * 1000);
            placed_tier(gw, name, 0, tier, sizeof tier);
        }
        ck_assert_msg(strcmp(tier, "device") == 0, "%s: '%s' after 30 s", name, tier);
        tier[0] = '\0';
    }
    gf_gw_free(gw);
    gf_test_mlp_free(&m);
}
END_TEST

/* ---- two nodes on one shared store ---- */

/* A node: its own state directory under tmpdir, the shared store, one cpu
 * worker; it reads the store only when asked (the scan is an hour away). */
static gf_gw *open_node(const char *name, const char *shared)
{
    char sub[32];
    snprintf(sub, sizeof sub, "state-%s", name);
    char *state = gf_test_path(tmpdir, sub);
    gf_gw_config cfg = {.state_dir = state, .devices = "cpu:1", .device_memory = 64 << 20,
                        .host_memory = 64 << 20, .worker_path = gf_test_prog("GF_WORKER"),
                        .drain_timeout_ms = 5000, .shared_store = shared,
                        .shared_scan_ms = 3600 * 1000, .protocol_code = gf_http_status_of};
    gf_gw *gw;
    gf_err err;
    gf_status st = gf_gw_new(&cfg, &gw, &err);
    free(state);
    ck_assert_msg(st == GF_OK, "gf_gw_new %s: %s", name, err.msg);
    return gw;
}

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    gf_status status;
    char message[512];
    size_t n_outputs;
    bool placed;          /* its one output was written into the shared memory */
    float y[OUT];         /* ... else its values */
} answer;

static void answer_done(void *arg, gf_gw_result *r)
{
    answer *a = arg;
    pthread_mutex_lock(&a->lock);
    a->status = r->status;
    snprintf(a->message, sizeof a->message, "%s", r->message);
    a->n_outputs = r->n_outputs;
    if (r->status == GF_OK && r->n_outputs == 1) {
        a->placed = r->outputs[0].placed;
        if (!a->placed && r->outputs[0].t.nbytes == sizeof a->y)
            memcpy(a->y, r->outputs[0].t.data, sizeof a->y);
    }
    a->done = true;
    pthread_cond_broadcast(&a->cond);
    pthread_mutex_unlock(&a->lock);
    gf_gw_result_free(r);
}

/* Submit x to name on gw asking for output `out` (into *shm when not NULL),
 * and wait for the answer. */
static void ask(gf_gw *gw, const char *name, const float *x, const char *out,
                const gf_gw_shm *shm, answer *a)
{
    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->cond, NULL);
    gf_gw_tensor *in = x_input(x, 1);
    const char *outs[1] = {out};
    gf_gw_infer_req req = {.function = name, .inputs = in, .n_inputs = 1, .outputs = outs,
                           .n_outputs = 1, .out_shm = shm, .done = answer_done, .done_arg = a};
    gf_err err;
    gf_status st = gf_gw_submit(gw, &req, &err);
    if (st != GF_OK) { /* answered at once, without done */
        a->status = st;
        snprintf(a->message, sizeof a->message, "%s", err.msg);
        return;
    }
    pthread_mutex_lock(&a->lock);
    while (!a->done)
        pthread_cond_wait(&a->cond, &a->lock);
    pthread_mutex_unlock(&a->lock);
}

/* True when function name is known to gw (its functions view lists it). */
static bool knows(gf_gw *gw, const char *name)
{
    json_t *j = view(gf_gw_functions_json, gw);
    bool found = false;
    json_t *fs = json_object_get(j, "functions");
    for (size_t i = 0; i < json_array_size(fs); i++)
        found |= strcmp(json_string_value(json_object_get(json_array_get(fs, i), "name")),
                        name) == 0;
    json_decref(j);
    return found;
}

/* The request is parked on node b until b has looked the function up, then
 * submitted again: it used to lose the outputs it asked for (an unknown one
 * was served, and an output meant for shared memory came back in the
 * answer while the client read its region). */
START_TEST(test_a_parked_request_keeps_what_it_asked)
{
    char *shared = gf_test_path(tmpdir, "shared");
    ck_assert_int_eq(mkdir(shared, 0755), 0);
    gf_gw *a = open_node("a", shared), *b = open_node("b", shared);
    mlp_w m;
    mlp_init(&m, 5);
    float x[IN];
    for (int i = 0; i < IN; i++)
        x[i] = (float)i * 0.5f - 2.0f;
    double want[OUT];
    mlp_ref(&m, x, want);

    /* an output the function does not have: refused, on b as on a */
    answer r;
    json_decref(deploy(a, "far1", &m, 0, 1, 0));
    ck_assert(!knows(b, "far1"));
    ask(b, "far1", x, "nope", NULL, &r);
    ck_assert_msg(r.status == GF_ERR_INVALID && strstr(r.message, "unknown output 'nope'"),
                  "%s: %s", gf_status_name(r.status), r.message);
    ask(a, "far1", x, "nope", NULL, &r);
    ck_assert_int_eq(r.status, GF_ERR_INVALID);

    /* the output asked for, into a shared memory span: the worker writes it there */
    char key[64];
    snprintf(key, sizeof key, "/gf-test-park-%d", (int)getpid());
    int fd = shm_open(key, O_CREAT | O_EXCL | O_RDWR, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, 4096), 0);
    float *region = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(region, MAP_FAILED);
    close(fd);
    memset(region, 0, 4096);
    gf_gw_shm dest = {.key = key, .offset = 64, .size = OUT * sizeof(float)};
    json_decref(deploy(a, "far2", &m, 0, 1, 0));
    ck_assert(!knows(b, "far2"));
    ask(b, "far2", x, "y", &dest, &r);
    ck_assert_msg(r.status == GF_OK, "%s: %s", gf_status_name(r.status), r.message);
    ck_assert_uint_eq(r.n_outputs, 1);
    ck_assert_msg(r.placed, "the output came back in the answer, not in shared memory");
    for (int o = 0; o < OUT; o++)
        ck_assert_msg(fabs(region[16 + o] - want[o]) <= 1e-4 * (1 + fabs(want[o])),
                      "y[%d] = %g in the region, want %g", o, region[16 + o], want[o]);
    /* and without shared memory, the values in the answer */
    json_decref(deploy(a, "far3", &m, 0, 1, 0));
    ask(b, "far3", x, "y", NULL, &r);
    ck_assert_msg(r.status == GF_OK && !r.placed, "%s", r.message);
    for (int o = 0; o < OUT; o++)
        ck_assert(fabs(r.y[o] - want[o]) <= 1e-4 * (1 + fabs(want[o])));
    gf_gw_free(b);
    gf_gw_free(a);
    munmap(region, 4096);
    shm_unlink(key);
    gf_test_mlp_free(&m);
    free(shared);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gateway_core_nodes");
    TCase *tc = tcase_create("nodes");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_device_load_behind_the_host_warm);
    tcase_add_test(tc, test_a_parked_request_keeps_what_it_asked);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
