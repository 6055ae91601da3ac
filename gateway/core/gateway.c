/* gpufaas — the gateway core: start and stop, submitting requests, deploying
 * and deleting functions, and the JSON and metrics views. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/path.h"
#include "core/safetensors.h"
#include "store/sha256.h"
#include "gateway/core/internal.h"
#include "gf_config.h"

/* mkdir -p */
static gf_status make_dirs(const char *path, gf_err *err)
{
    char buf[PATH_MAX];
    if (strlen(path) >= sizeof buf)
        return gf_err_set(err, GF_ERR_INVALID, "path too long: %s", path);
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return gf_err_set(err, GF_ERR_IO, "mkdir(%s): %s", buf, strerror(errno));
            *p = c;
            if (c == '\0')
                break;
        }
    }
    return GF_OK;
}

/* Take the state directory's lock: one gateway per state directory. The
 * descriptor stays open (and the lock held) until gf_gw_free. */
static gf_status lock_state_dir(gf_gw *gw, gf_err *err)
{
    char *path = gf_path_join(gw->state_dir, "gpufaas.lock");
    if (path == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        gf_status st = gf_err_set(err, GF_ERR_IO, "open(%s): %s", path, strerror(errno));
        free(path);
        return st;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        close(fd);
        gf_status st = gf_err_set(err, GF_ERR_BUSY, "state directory %s is in use by another "
                                  "gpufaas serve (pid %s)", gw->state_dir,
                                  pid[0] ? pid : "unknown");
        free(path);
        return st;
    }
    free(path);
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len)
        GF_LOG_W("could not record the pid in the state directory's lock file");
    gw->lock_fd = fd;
    return GF_OK;
}

/* Remove the files (not the directories) in dir; how many. */
static int remove_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char *p = gf_path_join(dir, e->d_name);
        if (p != NULL && unlink(p) == 0)
            removed++;
        free(p);
    }
    closedir(d);
    return removed;
}

/* Remove what a previous run left in the upload directory (uploads and
 * validations cut short by a crash). */
static void clean_uploads(const char *dir)
{
    int validations = gf_oneshot_clean(dir);
    if (validations > 0)
        GF_LOG_I("removed %d unfinished validation(s) left by a previous run", validations);
    int removed = remove_files(dir);
    if (removed > 0)
        GF_LOG_I("removed %d unfinished upload(s) left by a previous run", removed);
}

/* ---- lifetime ------------------------------------------------------------------- */

gf_status gf_gw_new(const gf_gw_config *cfg, gf_gw **out, gf_err *err)
{
    *out = NULL;
    gf_gw *gw = calloc(1, sizeof *gw);
    if (gw == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    gw->cfg = *cfg;
    pthread_mutex_init(&gw->lock, NULL);
    pthread_cond_init(&gw->cond, NULL);
    pthread_mutex_init(&gw->qlock, NULL);
    pthread_mutex_init(&gw->deploy_lock, NULL);
    atomic_init(&gw->next_id, 1);
    atomic_init(&gw->stopping, false);
    atomic_init(&gw->inflight_reqs, 0);
    gw->lock_fd = -1;
    gf_status st;
    const char *sd = cfg->state_dir != NULL ? cfg->state_dir : GF_GW_DEFAULT_STATE_DIR;
    if ((st = make_dirs(sd, err)) != GF_OK) {
        gf_err_prefix(err, "cannot create the state directory %s", sd);
        goto fail;
    }
    gw->state_dir = realpath(sd, NULL);
    if (gw->state_dir == NULL) {
        st = gf_err_set(err, GF_ERR_IO, "state directory %s: %s", sd, strerror(errno));
        goto fail;
    }
    if ((st = lock_state_dir(gw, err)) != GF_OK)
        goto fail;
    gw->functions_dir = gf_path_join(gw->state_dir, "functions");
    gw->upload_dir = gf_path_join(gw->state_dir, "uploads");
    if (gw->functions_dir == NULL || gw->upload_dir == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = make_dirs(gw->functions_dir, err)) != GF_OK ||
        (st = make_dirs(gw->upload_dir, err)) != GF_OK)
        goto fail;
    clean_uploads(gw->upload_dir);
    gw->worker_path = gf_worker_program_find(cfg->worker_path);
    if (gw->worker_path == NULL) {
        st = gf_err_set(err, GF_ERR_NOT_FOUND, "cannot find the gpufaas-worker program (set "
                        "GPUFAAS_WORKER to its path)");
        goto fail;
    }
    gw->metrics = gw_metrics_new();
    if (gw->metrics == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    /* which kind each plugin provides, and how many GPUs there are: asked
     * of a gpufaas-worker --probe child, so that no plugin is loaded and no
     * device driver initialised in this process */
    gw->oneshot = (gf_oneshot_cfg){gw->worker_path, gw->cfg.allow_native, gw->cfg.plugins,
                                   gw->cfg.n_plugins, gw->cfg.validate_timeout_ms};
    if (cfg->n_plugins > 0 || cfg->devices == NULL || cfg->devices[0] == '\0' ||
        strcmp(cfg->devices, GF_GW_DEFAULT_DEVICES) == 0) {
        if ((st = gf_oneshot_probe(&gw->oneshot, &gw->probe, err)) != GF_OK)
            goto fail;
    }
    char *db;
    if ((st = gf_store_default_path(gw->state_dir, &db, err)) != GF_OK)
        goto fail;
    gf_store_config sc;
    gf_store_config_default(&sc);
    if (cfg->retention_rows > 0)
        sc.retain_rows = (int64_t)cfg->retention_rows;
    if (cfg->retention_age_s > 0)
        sc.retain_age_s = (int64_t)cfg->retention_age_s;
    st = gf_store_open(db, &sc, &gw->store, err);
    free(db);
    if (st != GF_OK)
        goto fail;
    if ((st = gw_registry_recover(gw, err)) != GF_OK ||
        (st = gw_batcher_start(gw, err)) != GF_OK || (st = gw_workers_start(gw, err)) != GF_OK)
        goto fail;
    if (cfg->shared_store != NULL && cfg->shared_store[0] != '\0' &&
        (st = gw_sync_start(gw, err)) != GF_OK)
        goto fail;
    *out = gw;
    return GF_OK;
fail:
    gf_gw_free(gw);
    return st;
}

void gf_gw_shutdown(gf_gw *gw)
{
    if (gw->shut)
        return;
    gw->shut = true;
    atomic_store(&gw->stopping, true);
    uint64_t timeout_us = (uint64_t)(gw->cfg.drain_timeout_ms ? gw->cfg.drain_timeout_ms
                                                              : GF_GW_DEFAULT_DRAIN_TIMEOUT_MS) *
                          1000u;
    uint64_t deadline = gf_mono_us() + timeout_us;
    int left;
    while ((left = atomic_load(&gw->inflight_reqs)) > 0 && gf_mono_us() < deadline) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (left > 0)
        GF_LOG_W("shutting down with %d request(s) still in flight: they are refused", left);
    gw_sync_stop(gw);
    gw_batcher_stop(gw);
    if (gw->n_workers > 0)
        gw_workers_stop(gw);
    if (gw->store != NULL) {
        gf_err err;
        if (gf_store_close(gw->store, &err) != GF_OK)
            GF_LOG_W("closing the store: %s", err.msg);
        gw->store = NULL;
    }
}

void gf_gw_free(gf_gw *gw)
{
    if (gw == NULL)
        return;
    if (!gw->shut && (gw->batcher_running || gw->n_workers > 0 || gw->store != NULL))
        gf_gw_shutdown(gw);
    else if (gw->store != NULL)
        gf_store_close(gw->store, NULL);
    gw_sync_stop(gw);
    gw_registry_free(gw);
    gw_metrics_free(gw->metrics);
    gf_probe_deinit(&gw->probe);
    free(gw->ready);
    free(gw->state_dir);
    free(gw->functions_dir);
    free(gw->upload_dir);
    free(gw->worker_path);
    if (gw->lock_fd >= 0)
        close(gw->lock_fd); /* releases the state directory */
    pthread_mutex_destroy(&gw->lock);
    pthread_cond_destroy(&gw->cond);
    pthread_mutex_destroy(&gw->qlock);
    pthread_mutex_destroy(&gw->deploy_lock);
    if (gw->qcond_ready)
        pthread_cond_destroy(&gw->qcond);
    free(gw);
}

bool gf_gw_ready(gf_gw *gw)
{
    if (atomic_load(&gw->stopping))
        return false;
    pthread_mutex_lock(&gw->lock);
    bool ready = gw_workers_up(gw) > 0 && gw_sync_can_serve(gw);
    pthread_mutex_unlock(&gw->lock);
    return ready;
}

const char *gf_gw_upload_dir(gf_gw *gw)
{
    return gw->upload_dir;
}

int gw_protocol_code(const gf_gw *gw, gf_status st)
{
    return gw->cfg.protocol_code != NULL ? gw->cfg.protocol_code(st) : 0;
}

void gf_gw_count_answer(gf_gw *gw, const char *function, int protocol_code)
{
    char code[16];
    snprintf(code, sizeof code, "%d", protocol_code);
    const char *l2[2] = {function != NULL ? function : "", code};
    gw_metric_add(gw->metrics, GW_M_REQUESTS, l2, 1);
}

uint64_t gw_max_device_budget(gf_gw *gw)
{
    uint64_t best = 0;
    for (int i = 0; i < gw->n_workers; i++) {
        const gw_worker *w = &gw->workers[i];
        uint64_t b = w->have_stats ? w->stats.device_budget : w->ready.device_budget;
        if (b > best)
            best = b;
    }
    return best;
}

const char *gw_version_unavailable(gf_gw *gw, const gw_version *v, char *buf, size_t cap)
{
    if (v->state != GF_STORE_VERSION_READY) {
        snprintf(buf, cap, "version %lld is %s%s%s", (long long)v->version,
                 gf_store_vstate_name(v->state), v->reason != NULL ? ": " : "",
                 v->reason != NULL ? v->reason : "");
        return buf;
    }
    if (v->fn->unloaded) {
        snprintf(buf, cap, "unloaded (POST /v2/repository/models/%s/load loads it)", v->fn->name);
        return buf;
    }
    uint64_t need = v->device_bytes > 0 ? v->device_bytes : v->bytes;
    uint64_t budget = gw_max_device_budget(gw);
    if (budget > 0 && need > budget) {
        snprintf(buf, cap,
                 "its parameters need %llu bytes of device memory, more than any worker's "
                 "device budget (the largest is %llu bytes)",
                 (unsigned long long)need, (unsigned long long)budget);
        return buf;
    }
    return NULL;
}

/* ---- inference ------------------------------------------------------------------ */

gf_status gf_gw_submit(gf_gw *gw, gf_gw_infer_req *req, gf_err *err)
{
    return gw_submit(gw, req, true, err);
}

gf_status gw_submit(gf_gw *gw, gf_gw_infer_req *req, bool may_park, gf_err *err)
{
    gf_gw_tensor *given = req->inputs;
    size_t n_given = req->n_inputs;
    req->inputs = NULL;
    req->n_inputs = 0;
    gf_status st;
    gw_version *v = NULL;
    gf_gw_tensor *ordered = NULL;
    gw_req *q = NULL;
    bool known = false; /* the function exists (for the metrics label) */
    if (atomic_load(&gw->stopping)) {
        st = gf_err_set(err, GF_ERR_CLOSED, "the server is shutting down");
        goto fail;
    }
    if (!gf_function_name_valid(req->function)) {
        st = gf_err_set(err, GF_ERR_INVALID, "'%.80s' is not a valid function name",
                        req->function);
        goto fail;
    }
    pthread_mutex_lock(&gw->lock);
    gw_function *f = gw_function_find(gw, req->function);
    known = f != NULL && !f->deleted;
    if (known)
        v = gw_version_find(f, req->version);
    if (v == NULL) {
        pthread_mutex_unlock(&gw->lock);
        /* not here (yet): with a shared store, the thread looks it up and
         * resubmits it or answers it */
        if (may_park && gw_sync_park(gw, req, given, n_given))
            return GF_OK;
        if (f == NULL || f->deleted)
            st = gf_err_set(err, GF_ERR_NOT_FOUND, "function '%s' not found", req->function);
        else if (req->version != 0)
            st = gf_err_set(err, GF_ERR_NOT_FOUND, "function '%s' has no version %lld",
                            req->function, (long long)req->version);
        else
            st = gf_err_set(err, GF_ERR_NOT_FOUND, "function '%s' has no version to serve",
                            req->function);
        goto fail;
    }
    char why[256];
    if (gw_version_unavailable(gw, v, why, sizeof why) != NULL) {
        int64_t vn = v->version;
        pthread_mutex_unlock(&gw->lock);
        v = NULL;
        st = gf_err_set(err, GF_ERR_STATE, "function '%s' version %lld is unavailable: %s",
                        req->function, (long long)vn, why);
        goto fail;
    }
    if (gw_workers_up(gw) == 0) {
        pthread_mutex_unlock(&gw->lock);
        v = NULL;
        st = gf_err_set(err, GF_ERR_CLOSED, "no worker is up");
        goto fail;
    }
    gw_version_ref(v);
    pthread_mutex_unlock(&gw->lock);

    /* inputs: each manifest input exactly once, checked */
    const gf_manifest *mf = v->mf;
    ordered = calloc(mf->n_inputs, sizeof *ordered);
    if (ordered == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n_given; i++) {
        long k = given[i].name != NULL ? gf_manifest_input_index(mf, given[i].name) : -1;
        if (k < 0) {
            gf_buf names;
            gf_buf_init(&names);
            for (size_t j = 0; j < mf->n_inputs; j++)
                gf_buf_printf(&names, "%s%s", j ? ", " : "", mf->inputs[j].name);
            st = gf_err_set(err, GF_ERR_INVALID, "function '%s' has no input named '%.64s' (its "
                            "inputs: %s)", mf->name, given[i].name ? given[i].name : "",
                            names.data ? names.data : "");
            gf_buf_deinit(&names);
            goto fail;
        }
        if (ordered[k].name != NULL) {
            st = gf_err_set(err, GF_ERR_INVALID, "input '%s' is given twice", given[i].name);
            goto fail;
        }
        ordered[k] = given[i];
        memset(&given[i], 0, sizeof given[i]);
    }
    int64_t rows = -1;
    for (size_t i = 0; i < mf->n_inputs; i++) {
        if (ordered[i].name == NULL) {
            st = gf_err_set(err, GF_ERR_INVALID, "missing input '%s' of function '%s'",
                            mf->inputs[i].name, mf->name);
            goto fail;
        }
        if ((st = gf_manifest_check_tensor(mf, &mf->inputs[i], &ordered[i].t, err)) != GF_OK)
            goto fail;
        if (v->batchable) {
            if (rows >= 0 && ordered[i].t.shape[0] != rows) {
                st = gf_err_set(err, GF_ERR_INVALID, "inputs disagree on the batch size (%lld "
                                "and %lld rows)", (long long)rows,
                                (long long)ordered[i].t.shape[0]);
                goto fail;
            }
            rows = ordered[i].t.shape[0];
        }
    }
    q = calloc(1, sizeof *q);
    gf_gw_result *res = calloc(1, sizeof *res);
    if (q == NULL || res == NULL) {
        free(res);
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    q->v = v;
    q->inputs = ordered;
    q->rows = v->batchable ? rows : 1;
    q->done = req->done;
    q->done_arg = req->done_arg;
    q->t_submit_us = gf_mono_us();
    q->res = res;
    atomic_fetch_add(&gw->inflight_reqs, 1);
    st = gw_enqueue(gw, q, err);
    if (st != GF_OK) {
        atomic_fetch_sub(&gw->inflight_reqs, 1);
        q->inputs = NULL;
        free(q->res);
        free(q);
        q = NULL;
        goto fail;
    }
    gf_gw_tensors_free(given, n_given);
    return GF_OK;
fail:
    if (st == GF_OK)
        st = GF_ERR_INTERNAL;
    gf_gw_tensors_free(given, n_given);
    /* answered here, without a callback: count it (labelled with the
     * function only when it exists, so random names cannot grow /metrics) */
    gf_gw_count_answer(gw, known ? req->function : NULL, gw_protocol_code(gw, st));
    if (v != NULL) {
        gf_gw_tensors_free(ordered, v->mf->n_inputs);
        gw_version_unref(v);
    }
    return st;
}

/* ---- functions ------------------------------------------------------------------ */

/* A version's files on their way into the function store: where each is
 * now. A rename moves one; whatever is still somewhere when a deploy fails
 * is removed. */
typedef struct {
    char *weights;          /* the weights file (the upload, or the converted file) */
    size_t n;
    char **companions;      /* borrowed from the validation: paths updated in place */
    char *const *suffixes;
} vfiles;

static void vfiles_remove(vfiles *f)
{
    if (f->weights != NULL)
        unlink(f->weights);
    for (size_t i = 0; i < f->n; i++)
        unlink(f->companions[i]);
}

/* Move every file to <dir>/v<version>.safetensors and .<suffix>. */
static gf_status vfiles_place(vfiles *f, const char *dir, int64_t version, gf_err *err)
{
    char name[96];
    snprintf(name, sizeof name, "v%lld.safetensors", (long long)version);
    char *dst = gf_path_join(dir, name);
    if (dst == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    if (rename(f->weights, dst) != 0) {
        gf_status st = gf_err_set(err, GF_ERR_IO, "storing the weights: rename(%s, %s): %s",
                                  f->weights, dst, strerror(errno));
        free(dst);
        return st;
    }
    free(f->weights);
    f->weights = dst;
    for (size_t i = 0; i < f->n; i++) {
        char *c = gf_companion_path(f->weights, f->suffixes[i]);
        if (c == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        if (rename(f->companions[i], c) != 0) {
            gf_status st = gf_err_set(err, GF_ERR_IO, "storing companion file '%s': rename(%s, "
                                      "%s): %s", f->suffixes[i], f->companions[i], c,
                                      strerror(errno));
            free(c);
            return st;
        }
        free(f->companions[i]);
        f->companions[i] = c;
    }
    return GF_OK;
}

gf_status gf_gw_deploy(gf_gw *gw, const gf_gw_deploy_req *req, gf_gw_deployed *out,
                       gf_err *err)
{
    memset(out, 0, sizeof *out);
    gf_buf_init(&out->json);
    gf_manifest *mf = NULL;
    gf_validation val;
    memset(&val, 0, sizeof val);
    vfiles files = {0};
    char *dir = NULL;
    char sha[GF_SHA256_HEX_LEN];
    uint64_t bytes = req->bytes;
    gf_status st;
    pthread_mutex_lock(&gw->deploy_lock);
    if (atomic_load(&gw->stopping)) {
        st = gf_err_set(err, GF_ERR_CLOSED, "the server is shutting down");
        goto out;
    }
    /* the kind's code (validation, conversion) runs in a child, never here */
    const char *uploads[GF_MAX_UPLOADS];
    if (req->n_extra + 1 > GF_MAX_UPLOADS) {
        st = gf_err_set(err, GF_ERR_INVALID, "a deploy brings at most %d files", GF_MAX_UPLOADS);
        goto out;
    }
    uploads[0] = req->weights_tmp;
    for (size_t i = 0; i < req->n_extra; i++)
        uploads[1 + i] = req->extra_tmp[i];
    gf_fn_deploy_in in = {req->manifest, req->manifest_len, req->name, req->kind, uploads,
                          1 + req->n_extra};
    st = gf_oneshot_validate(&gw->oneshot, &in, gw->upload_dir, &val, err);
    if (st != GF_OK)
        goto out;
    if ((st = gf_manifest_parse(val.manifest_json, strlen(val.manifest_json), &mf, err)) !=
        GF_OK) {
        gf_err_prefix(err, "the validator's manifest");
        st = err != NULL ? (err->code = GF_ERR_INTERNAL) : GF_ERR_INTERNAL;
        goto out;
    }
    if (val.weights == NULL && req->n_extra > 0) {
        st = gf_err_set(err, GF_ERR_INTERNAL, "kind '%s' took %zu files but wrote no weights",
                        mf->kind, 1 + req->n_extra);
        goto out;
    }
    files.n = val.n_companions;
    files.companions = val.companion_files;
    files.suffixes = val.companions;
    if (val.weights != NULL) {
        /* converted: the upload is spent; the new file is what is stored */
        unlink(req->weights_tmp);
        files.weights = strdup(val.weights);
        if (files.weights != NULL &&
            (st = gf_sha256_file(files.weights, sha, &bytes, err)) != GF_OK) {
            goto out;
        }
    } else {
        files.weights = strdup(req->weights_tmp);
        snprintf(sha, sizeof sha, "%s", req->sha256_hex);
    }
    if (files.weights == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (gw->sync != NULL) {
        /* the store's log chooses the version; every node installs it */
        gf_buf cj;
        gf_buf_init(&cj);
        if (gf_manifest_to_json(mf, &cj) != GF_OK) {
            gf_buf_deinit(&cj);
            st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            goto out;
        }
        /* interface changes are allowed, as on a node of its own */
        gw_sync_deploy_in sin = {mf, cj.data, files.weights, sha, bytes, files.companions,
                                 files.suffixes, files.n, true};
        bool taken = false;
        st = gw_sync_deploy(gw, &sin, &taken, out, err);
        gf_buf_deinit(&cj);
        if (taken) { /* moved into the function store: not ours to remove any more */
            free(files.weights);
            files.weights = NULL;
            files.n = 0;
        } else {
            vfiles_remove(&files); /* refused, or identical to a version there is */
        }
        if (st == GF_OK)
            GF_LOG_I("function '%s' version %lld deployed through the shared store (%s, %llu "
                     "bytes, sha256 %.12s...)", mf->name, (long long)out->version, mf->kind,
                     (unsigned long long)bytes, sha);
        goto out;
    }
    /* choose the version and put the files in place */
    pthread_mutex_lock(&gw->lock);
    uint64_t budget = gw_max_device_budget(gw);
    if (budget > 0 && bytes > budget) {
        pthread_mutex_unlock(&gw->lock);
        st = gf_err_set(err, GF_ERR_INVALID,
                        "function '%s': its parameters need %llu bytes of device memory, more "
                        "than any worker's device budget (the largest is %llu bytes): it could "
                        "never run here",
                        mf->name, (unsigned long long)bytes, (unsigned long long)budget);
        goto out;
    }
    gw_function *f = gw_function_find(gw, mf->name);
    int64_t version = mf->version;
    if (version > 0 && f != NULL && gw_version_find(f, version) != NULL) {
        pthread_mutex_unlock(&gw->lock);
        st = gf_err_set(err, GF_ERR_EXISTS, "function '%s' already has version %lld", mf->name,
                        (long long)version);
        goto out;
    }
    if (version == 0) {
        version = 1;
        if (f != NULL)
            for (size_t i = 0; i < f->n; i++)
                if (f->versions[i]->version >= version)
                    version = f->versions[i]->version + 1;
    }
    pthread_mutex_unlock(&gw->lock);
    dir = gf_path_join(gw->functions_dir, mf->name);
    if (dir == NULL || (st = make_dirs(dir, err)) != GF_OK) {
        if (dir == NULL)
            st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto out;
    }
    gf_buf mj;
    gf_buf_init(&mj);
    if (gf_manifest_to_json(mf, &mj) != GF_OK) {
        gf_buf_deinit(&mj);
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int attempt = 0; attempt < 64; attempt++) {
        if ((st = vfiles_place(&files, dir, version, err)) != GF_OK)
            break;
        gf_store_version_spec spec = {mf->name, version, mf->kind, mj.data, files.weights,
                                      bytes, sha, true};
        st = gf_store_version_deploy(gw->store, &spec, NULL, err);
        if (st == GF_ERR_EXISTS && mf->version == 0) {
            version++; /* a version number used before (and deleted) */
            continue;
        }
        break;
    }
    if (st != GF_OK) {
        gf_buf_deinit(&mj);
        goto out;
    }
    /* publish in memory: requests from now on get the new version; those in
     * flight finish on the one they started with */
    pthread_mutex_lock(&gw->lock);
    gw_version *v;
    st = gw_registry_add(gw, mf->name, mf->kind, version, mj.data, files.weights, sha, bytes,
                         GF_STORE_VERSION_READY, NULL, &v, err);
    if (st == GF_OK) {
        v->fn->current = v;
        v->fn->unloaded = false; /* a deploy loads it */
        /* warm the host tier of the worker that would run it */
        gw_worker *w = gw_route(gw, v, -1, NULL);
        if (w != NULL)
            gw_worker_load(gw, w, v, GF_TIER_HOST, NULL);
        if ((st = gw_version_json(gw, v, &out->json)) != GF_OK)
            st = gf_err_set(err, st, "out of memory describing the new version");
        snprintf(out->name, sizeof out->name, "%s", mf->name);
        out->version = version;
    }
    pthread_mutex_unlock(&gw->lock);
    gf_buf_deinit(&mj);
    if (st != GF_OK)
        goto out;
    GF_LOG_I("function '%s' version %lld deployed (%s, %llu bytes, sha256 %.12s...%s)", mf->name,
             (long long)version, mf->kind, (unsigned long long)bytes, sha,
             val.weights != NULL ? ", converted" : "");
out:
    if (st != GF_OK) {
        vfiles_remove(&files);
        unlink(req->weights_tmp);
    }
    for (size_t i = 0; i < req->n_extra; i++) /* spent by the conversion, or refused */
        unlink(req->extra_tmp[i]);
    free(files.weights);
    gf_validation_deinit(&val);
    pthread_mutex_unlock(&gw->deploy_lock);
    gf_manifest_free(mf);
    free(dir);
    return st;
}

gf_status gf_gw_delete(gf_gw *gw, const char *name, gf_err *err)
{
    if (!gf_function_name_valid(name)) {
        return gf_err_set(err, GF_ERR_INVALID, "'%.80s' is not a valid function name", name);
    }
    pthread_mutex_lock(&gw->deploy_lock);
    gf_status st = gw->sync != NULL ? gw_sync_delete(gw, name, err)
                                    : gw_delete_local(gw, name, err);
    pthread_mutex_unlock(&gw->deploy_lock);
    return st;
}

gf_status gw_delete_local(gf_gw *gw, const char *name, gf_err *err)
{
    pthread_mutex_lock(&gw->lock);
    gw_function *f = gw_function_find(gw, name);
    if (f == NULL || f->deleted) {
        pthread_mutex_unlock(&gw->lock);
        return gf_err_set(err, GF_ERR_NOT_FOUND, "function '%s' not found", name);
    }
    f->deleted = true;
    f->current = NULL;
    size_t n = f->n;
    char **paths = calloc(n ? n : 1, sizeof *paths);
    for (size_t i = 0; i < n; i++) {
        gw_version *v = f->versions[i];
        v->state = GF_STORE_VERSION_DELETED;
        gw_worker_unload_all(gw, v);
        if (paths != NULL)
            paths[i] = strdup(v->weights_path);
    }
    pthread_mutex_unlock(&gw->lock);
    gf_status st = gf_store_function_delete(gw->store, name, err);
    if (st != GF_OK && st != GF_ERR_NOT_FOUND)
        GF_LOG_W("deleting '%s' in the store: %s", name, gf_err_msg(err));
    for (size_t i = 0; paths != NULL && i < n; i++) {
        if (paths[i] != NULL && unlink(paths[i]) != 0 && errno != ENOENT)
            GF_LOG_W("removing %s: %s", paths[i], strerror(errno));
        free(paths[i]);
    }
    free(paths);
    char *dir = gf_path_join(gw->functions_dir, name);
    if (dir != NULL) {
        remove_files(dir); /* the versions' companion files */
        rmdir(dir);
    }
    free(dir);
    GF_LOG_I("function '%s' deleted", name);
    return GF_OK;
}

static gw_version *current_or_404(gf_gw *gw, const char *name, gf_err *err)
{
    gw_function *f = gf_function_name_valid(name) ? gw_function_find(gw, name) : NULL;
    if (f == NULL || f->deleted || f->current == NULL) {
        gf_err_set(err, GF_ERR_NOT_FOUND, "function '%.80s' not found", name);
        return NULL;
    }
    return f->current;
}

gf_status gf_gw_repo_load(gf_gw *gw, const char *name, gf_err *err)
{
    return gf_gw_repo_load_on(gw, name, -1, err);
}

gf_status gf_gw_repo_load_on(gf_gw *gw, const char *name, int worker, gf_err *err)
{
    pthread_mutex_lock(&gw->lock);
    gw_version *v = current_or_404(gw, name, err);
    gf_status st = v == NULL ? GF_ERR_NOT_FOUND : GF_OK;
    if (v != NULL && worker >= gw->n_workers) {
        st = gf_err_set(err, GF_ERR_NOT_FOUND, "no worker %d (this server has %d)", worker,
                        gw->n_workers);
    } else if (v != NULL && worker >= 0 && gw->workers[worker].state != GW_W_UP) {
        st = gf_err_set(err, GF_ERR_CLOSED, "worker %d is not up", worker);
    } else if (v != NULL) {
        v->fn->unloaded = false; /* loaded again: it serves, whatever the prefetch does */
        char why[256];
        const char *reason = gw_version_unavailable(gw, v, why, sizeof why);
        gw_worker *w = worker >= 0 ? &gw->workers[worker] : gw_route(gw, v, -1, NULL);
        if (reason != NULL)
            st = gf_err_set(err, GF_ERR_STATE, "model '%s' cannot be loaded: %s", name, reason);
        else if (w == NULL)
            st = gf_err_set(err, GF_ERR_CLOSED, "no worker is up");
        else
            st = gw_worker_load(gw, w, v, GF_TIER_DEVICE, err);
    }
    pthread_mutex_unlock(&gw->lock);
    return st;
}

gf_status gf_gw_repo_unload(gf_gw *gw, const char *name, gf_err *err)
{
    pthread_mutex_lock(&gw->lock);
    gw_function *f = gf_function_name_valid(name) ? gw_function_find(gw, name) : NULL;
    if (f == NULL || f->deleted) {
        pthread_mutex_unlock(&gw->lock);
        return gf_err_set(err, GF_ERR_NOT_FOUND, "function '%.80s' not found", name);
    }
    f->unloaded = true; /* UNAVAILABLE until a load or a deploy */
    for (size_t i = 0; i < f->n; i++)
        gw_worker_unload_all(gw, f->versions[i]);
    pthread_mutex_unlock(&gw->lock);
    GF_LOG_I("function '%s' unloaded: unavailable until it is loaded again", name);
    return GF_OK;
}

