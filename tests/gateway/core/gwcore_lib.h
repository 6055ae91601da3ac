/* tests/gateway/core — what the gateway core's tests share: a temporary
 * directory per test, a small mlp and its naive reference, staging and
 * deploying it, gateways with real workers, and a waiter that checks every
 * answer against the reference. */
#ifndef GF_TESTS_GWCORE_LIB_H
#define GF_TESTS_GWCORE_LIB_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gateway/core/gateway.h"
#include "mlp.h"

/* the test's temporary directory (setup makes it, teardown removes it) */
extern char *tmpdir;
void setup(void);
void teardown(void);

/* ---- a small mlp: 8 -> 16 (relu) -> 4 ---- */
#define IN 8
#define HID 16
#define OUT 4

typedef gf_test_mlp mlp_w; /* the tests' one MLP (tests/common/mlp.h): IN -> HID -> OUT */

void mlp_init(mlp_w *m, uint64_t seed);
/* An mlp of 52 x hid bytes of weights (a model of more than a quarter page
 * takes pages of its own; a smaller one shares a page with others). */
void mlp_init_wide(mlp_w *m, uint64_t seed, int64_t hid);
void mlp_ref(const mlp_w *m, const float *x, double *y);

/* Stage an mlp's weights in the upload dir, as the HTTP front would. pad
 * adds a big unused tensor (to make the model take device pages). */
gf_gw_deploy_req stage(gf_gw *gw, const mlp_w *m, size_t pad_floats, char *tmp_path, size_t cap,
                       char *sha);
/* A view's JSON text as a jansson value (NULL when the view failed). */
json_t *parsed(gf_status st, gf_buf *b);
json_t *view(gf_status (*fn)(gf_gw *, gf_buf *), gf_gw *gw);
/* Deploy m as function name (asserting success): the deploy's JSON. */
json_t *deploy(gf_gw *gw, const char *name, const mlp_w *m, size_t pad, int max_batch,
               int delay_us);

/* ---- waiting for results ---- */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done, ok, failed_503, failed_other;
    int64_t max_batch;
    int64_t version_seen[8];
    int bad_values;
    const mlp_w *ref[8]; /* expected weights per version (index = version) */
    bool softmax;        /* the function ends with a softmax */
    float x[IN];
} waiter;

void waiter_init(waiter *w);
/* The done callback of submit: counts the answer, checks its values. */
void on_done(void *arg, gf_gw_result *r);
/* Until n answers came. */
void waiter_wait(waiter *w, int n);
/* Input x of rows x IN floats (a copy of x), for a gf_gw_infer_req. */
gf_gw_tensor *x_input(const float *x, int64_t rows);
/* Submit w->x to function name, answered to on_done(w). */
gf_status submit(gf_gw *gw, const char *name, waiter *w, gf_err *err);

/* A gateway on tmpdir/state with these devices and worker program. */
gf_gw *open_gw_with(const char *devices, uint64_t dev_mem, const char *worker,
                    const char *const *plugins, size_t n_plugins);
gf_gw *open_gw(const char *devices, uint64_t dev_mem);

#endif
