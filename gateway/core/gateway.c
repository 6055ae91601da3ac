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

/* The state directory holds the database, every function's weights and the
 * lock: refuse one that another user could write into (or replace files
 * in), whatever created it. */
static gf_status check_state_dir(const char *dir, gf_err *err)
{
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return gf_err_set(err, GF_ERR_IO, "state directory %s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return gf_err_set(err, GF_ERR_INVALID, "state directory %s is not a directory", dir);
    if (sb.st_uid != geteuid())
        return gf_err_set(err, GF_ERR_INVALID, "state directory %s belongs to uid %u, not to "
                          "this user (uid %u)", dir, (unsigned)sb.st_uid, (unsigned)geteuid());
    if ((sb.st_mode & (S_IWGRP | S_IWOTH)) != 0)
        return gf_err_set(err, GF_ERR_INVALID, "state directory %s can be written by %s (mode "
                          "%04o): chmod 700 it", dir,
                          (sb.st_mode & S_IWOTH) != 0 ? "every user" : "its group",
                          (unsigned)(sb.st_mode & 07777));
    return GF_OK;
}

/* Take the state directory's lock: one gateway per state directory. The
 * descriptor stays open (and the lock held) until gf_gw_free. */
static gf_status lock_state_dir(gf_gw *gw, gf_err *err)
{
    char *path = gf_path_join(gw->state_dir, "gpufaas.lock");
    if (path == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
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

/* Remove what a previous run left in the upload directory (uploads and
 * validations cut short by a crash). */
static void clean_uploads(const char *dir)
{
    int validations = gf_oneshot_clean(dir);
    if (validations > 0)
        GF_LOG_I("removed %d unfinished validation(s) left by a previous run", validations);
    int removed = gw_remove_files(dir);
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
    if ((st = gw_make_dirs(sd, err)) != GF_OK) {
        gf_err_prefix(err, "cannot create the state directory %s", sd);
        goto fail;
    }
    gw->state_dir = realpath(sd, NULL);
    if (gw->state_dir == NULL) {
        st = gf_err_set(err, GF_ERR_IO, "state directory %s: %s", sd, strerror(errno));
        goto fail;
    }
    if ((st = check_state_dir(gw->state_dir, err)) != GF_OK ||
        (st = lock_state_dir(gw, err)) != GF_OK)
        goto fail;
    gw->functions_dir = gf_path_join(gw->state_dir, "functions");
    gw->upload_dir = gf_path_join(gw->state_dir, "uploads");
    if (gw->functions_dir == NULL || gw->upload_dir == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = gw_make_dirs(gw->functions_dir, err)) != GF_OK ||
        (st = gw_make_dirs(gw->upload_dir, err)) != GF_OK)
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
    if ((st = gw_plugins_init(gw, err)) != GF_OK)
        goto fail;
    char *db;
    if ((st = gf_store_default_path(gw->state_dir, &db, err)) != GF_OK)
        goto fail;
    gf_store_config sc;
    gf_store_config_default(&sc);
    if (cfg->retention_rows > 0)
        sc.retain_rows = (int64_t)cfg->retention_rows;
    if (cfg->retention_age_s > 0)
        sc.retain_age_s = (int64_t)cfg->retention_age_s;
    /* created (or tightened) as 0600 first: SQLite gives its -wal and -shm
     * files the database's mode */
    int dbfd = open(db, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (dbfd < 0 || fchmod(dbfd, 0600) != 0) {
        st = gf_err_set(err, GF_ERR_IO, "database %s: %s", db, strerror(errno));
        if (dbfd >= 0)
            close(dbfd);
        free(db);
        goto fail;
    }
    close(dbfd);
    st = gf_store_open(db, &sc, &gw->store, err);
    free(db);
    if (st != GF_OK)
        goto fail;
    /* O(versions): a stat per weights file, no reads (files.c) */
    if ((st = gw_registry_recover(gw, err)) != GF_OK)
        goto fail;
    gw_files_clean_orphans(gw);
    if ((st = gw_batcher_start(gw, err)) != GF_OK || (st = gw_workers_start(gw, err)) != GF_OK ||
        (st = gw_checker_start(gw, err)) != GF_OK)
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
    gw_checker_stop(gw);
    gw_batcher_stop(gw); /* answers what is still queued */
    /* and what is in batches, now: stopping the workers takes seconds more */
    gw_abandon_inflight(gw);
    if (gw->n_workers > 0)
        gw_workers_stop(gw);
    if (gw->store != NULL) {
        pthread_mutex_lock(&gw->lock);
        gw_copies_flush_hits(gw); /* the last hits, so the database ends true */
        pthread_mutex_unlock(&gw->lock);
    }
    /* The store stays open until gf_gw_free: the HTTP front's threads still
     * record refusals (a stalled client's 408, a 503 while stopping) until
     * gf_http_stop has joined them, and they read gw->store unlocked. */
}

void gf_gw_free(gf_gw *gw)
{
    if (gw == NULL)
        return;
    if (!gw->shut && (gw->batcher_running || gw->n_workers > 0 || gw->store != NULL ||
                      gw->checker_running))
        gf_gw_shutdown(gw);
    if (gw->store != NULL) { /* commits what is still queued */
        gf_err err;
        if (gf_store_close(gw->store, &err) != GF_OK)
            GF_LOG_W("closing the store: %s", err.msg);
        gw->store = NULL;
    }
    gw_sync_stop(gw);
    gw_registry_free(gw);
    gw_metrics_free(gw->metrics);
    gf_probe_deinit(&gw->probe);
    gw_plugins_free(gw);
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
    uint64_t t0 = req->t0_us != 0 ? req->t0_us : gf_mono_us();
    gf_err local;
    if (err == NULL)
        err = &local; /* a refusal is recorded with its message */
    gf_err_clear(err);
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
    if (f != NULL && !f->deleted)
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
    double predicted_us = v->mf->admission_max_slo > 0 ? gw_route_predict_us(gw, v) : -1;
    gw_version_ref(v);
    pthread_mutex_unlock(&gw->lock);
    if (predicted_us >= 0) {
        /* requests already waiting in the batcher run first */
        pthread_mutex_lock(&gw->qlock);
        size_t waiting = v->q_len;
        pthread_mutex_unlock(&gw->qlock);
        double batches = (double)((waiting + (size_t)v->mf->max_batch_size - 1) /
                                  (size_t)v->mf->max_batch_size);
        predicted_us += batches * (v->exec_us > 0 ? v->exec_us : 0);
        double limit_us = v->mf->admission_max_slo * v->mf->slo_ms * 1000.0;
        if (predicted_us > limit_us) {
            st = gf_err_set(err, GF_ERR_OVERLOADED,
                            "function '%s' would answer in about %.1f ms, more than %.3g times "
                            "its %.3g ms SLO: try again later",
                            req->function, predicted_us / 1000.0, v->mf->admission_max_slo,
                            v->mf->slo_ms);
            goto fail;
        }
    }

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
    /* the outputs asked for, before any work: a wrong name is the request's
     * fault, and the model must not run for it */
    uint64_t want = req->n_outputs == 0 ? gw_all_outputs(mf) : 0;
    gf_ipc_shm_dest dests[GF_MANIFEST_MAX_IO];
    uint32_t n_dests = 0;
    for (size_t i = 0; i < req->n_outputs; i++) {
        const char *o = req->outputs[i];
        int k = o != NULL ? gf_manifest_output_index(mf, o) : -1;
        if (k >= 0) {
            want |= (uint64_t)1 << k; /* < GF_MANIFEST_MAX_IO = 64 */
            const gf_gw_shm *d = req->out_shm != NULL ? &req->out_shm[i] : NULL;
            if (d != NULL && d->key != NULL && n_dests < GF_MANIFEST_MAX_IO)
                dests[n_dests++] = (gf_ipc_shm_dest){(uint32_t)k, d->key, d->offset, d->size};
            continue;
        }
        gf_buf names;
        gf_buf_init(&names);
        for (size_t j = 0; j < mf->n_outputs; j++)
            gf_buf_printf(&names, "%s%s", j ? ", " : "", mf->outputs[j].name);
        st = gf_err_set(err, GF_ERR_INVALID, "unknown output '%.64s' requested (function '%s' "
                        "has %s)", o != NULL ? o : "", mf->name, names.data ? names.data : "");
        gf_buf_deinit(&names);
        goto fail;
    }
    q = calloc(1, sizeof *q);
    gf_gw_result *res = calloc(1, sizeof *res);
    if (q == NULL || res == NULL) {
        free(res);
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (n_dests > 0 && (q->dests = malloc(n_dests * sizeof *q->dests)) == NULL) {
        free(res);
        free(q);
        q = NULL;
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (n_dests > 0)
        memcpy(q->dests, dests, n_dests * sizeof *q->dests);
    q->n_dests = n_dests;
    q->alone = n_dests > 0;
    for (size_t i = 0; i < mf->n_inputs; i++)
        q->alone |= ordered[i].shm.key != NULL;
    q->v = v;
    q->inputs = ordered;
    q->rows = v->batchable ? rows : 1;
    q->want = want;
    q->done = req->done;
    q->done_arg = req->done_arg;
    q->t_submit_us = gf_mono_us();
    q->res = res;
    uint64_t tmo_us = req->timeout_us;
    if (tmo_us == 0 && gw->cfg.infer_timeout_ms != UINT32_MAX)
        tmo_us = (uint64_t)(gw->cfg.infer_timeout_ms ? gw->cfg.infer_timeout_ms
                                                     : GF_GW_DEFAULT_INFER_TIMEOUT_MS) * 1000u;
    q->deadline_us = tmo_us > 0 && tmo_us < UINT64_MAX - q->t_submit_us ? q->t_submit_us + tmo_us
                                                                         : 0;
    atomic_init(&q->release, 0);
    /* the queue limit: every request the gateway holds, from here until it
     * is freed (queued, waiting for a LOAD, in flight on a worker, its frame
     * written towards one), per function and in total; one decision, here */
    size_t limit = gw->cfg.queue_limit ? gw->cfg.queue_limit : GF_GW_DEFAULT_QUEUE_LIMIT;
    size_t total = gw->cfg.queue_limit_total ? gw->cfg.queue_limit_total
                                             : GF_GW_DEFAULT_QUEUE_LIMIT_TOTAL;
    size_t held_fn = atomic_fetch_add(&v->fn->held, 1);
    size_t held_all = atomic_fetch_add(&gw->held_reqs, 1);
    if (held_fn >= limit || held_all >= total) {
        atomic_fetch_sub(&v->fn->held, 1);
        atomic_fetch_sub(&gw->held_reqs, 1);
        st = held_fn >= limit
                 ? gf_err_set(err, GF_ERR_BUSY, "function '%s' holds %zu requests (queued, in "
                              "flight or being sent to a worker), its limit (--queue-limit): "
                              "try again shortly", v->fn->name, held_fn)
                 : gf_err_set(err, GF_ERR_BUSY, "the server holds %zu requests, its limit "
                              "(--queue-limit-total): try again shortly", held_all);
        q->inputs = NULL;
        free(q->res);
        free(q->dests);
        free(q);
        q = NULL;
        goto fail;
    }
    atomic_fetch_add(&gw->inflight_reqs, 1);
    st = gw_enqueue(gw, q, err);
    if (st != GF_OK) {
        atomic_fetch_sub(&v->fn->held, 1);
        atomic_fetch_sub(&gw->held_reqs, 1);
        atomic_fetch_sub(&gw->inflight_reqs, 1);
        q->inputs = NULL;
        free(q->res);
        free(q->dests);
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
    /* answered here, without a callback: counted and recorded all the same */
    gw_answer_refused(gw, req->function, req->version, st,
                      err->code == st && err->msg[0] != '\0' ? err->msg : gf_strerror(st), t0);
    if (v != NULL) {
        gf_gw_tensors_free(ordered, v->mf->n_inputs);
        gw_version_unref(v);
    }
    return st;
}

/* ---- the repository extension ---------------------------------------------------- */

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
    gw_function *f = gf_function_name_valid(name) ? gw_function_find(gw, name) : NULL;
    bool was_unloaded = f != NULL && !f->deleted && f->unloaded;
    pthread_mutex_unlock(&gw->lock);
    /* durable first: loaded again, it serves after a restart too */
    if (was_unloaded) {
        gf_status s0 = gf_store_function_unloaded(gw->store, name, false, err);
        if (s0 != GF_OK)
            return s0;
    }
    pthread_mutex_lock(&gw->lock);
    gw_version *v = current_or_404(gw, name, err);
    gf_status st = v == NULL ? GF_ERR_NOT_FOUND : GF_OK;
    if (v != NULL && v->state != GF_STORE_VERSION_READY) {
        st = gf_err_set(err, GF_ERR_STATE, "function '%s' version %lld cannot be served: %s",
                        name, (long long)v->version, v->reason ? v->reason : "it is broken");
        v = NULL;
    }
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
            /* it can never fit: a failed load, as Triton answers it (400) */
            st = gf_err_set(err, GF_ERR_INVALID, "model '%s' cannot be loaded: %s", name, reason);
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
    bool found = f != NULL && !f->deleted;
    pthread_mutex_unlock(&gw->lock);
    if (!found)
        return gf_err_set(err, GF_ERR_NOT_FOUND, "function '%.80s' not found", name);
    /* durable first: after a restart it is still unloaded */
    gf_status st = gf_store_function_unloaded(gw->store, name, true, err);
    if (st != GF_OK)
        return st;
    pthread_mutex_lock(&gw->lock);
    f = gw_function_find(gw, name);
    if (f == NULL || f->deleted) { /* deleted meanwhile */
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

