/* gpufaas — a node's side of the shared store (gf_gw_config.shared_store):
 * deploys and deletes go through the store's log, and a thread keeps this
 * node's registry and SQLite in step with every function's folded log.
 *
 *   deploy (any node)  validate here; publish the objects; append the entry;
 *                      fold the log: the entry's outcome is the answer
 *   every node         reads new entries (at once for a function it is asked
 *                      about and does not know; every scan_ms for all), folds
 *                      them, copies a new version's objects into its state
 *                      directory, records it, then switches to it; a function
 *                      deleted in the store is deleted here
 *   store unreadable   serve what is here; what would need the store is
 *                      answered GF_ERR_CLOSED (503: a router retries elsewhere)
 *
 * Deploys and deletes through the store are in sync_deploy.c; what both
 * files share, in sync_impl.h.
 *
 * Locks: gw->deploy_lock (deploys and deletes) > s->lock (the folds, the
 * registry changes made from them) > gw->lock. s->qlock guards the requests
 * for the thread and the parked inferences, and is never held with the others.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/path.h"
#include "store/sha256.h"
#include "gateway/core/internal.h"
#include "gateway/core/shared.h"
#include "gateway/core/sync_impl.h"

#define SYNC_MAX_PARKED 4096  /* inferences waiting for their function to arrive */
#define SYNC_WAIT_VIEW_MS 2000 /* a metadata request waits this long for a lookup */

typedef struct gw_parked {
    struct gw_parked *next;
    char name[64];
    int64_t version;
    gf_gw_tensor *inputs;
    size_t n_inputs;
    char **outputs;            /* copies of the names of the outputs asked for */
    size_t n_outputs;
    gf_gw_shm *out_shm;        /* NULL, or a copy of the request's (keys borrowed until done) */
    gf_gw_done_fn done;
    void *done_arg;
    uint64_t timeout_us;
    gf_gw_result *res;         /* allocated when parked, so answering needs no memory */
    uint64_t t0_us;            /* when the request arrived (monotonic) */
} gw_parked;

static void gw_sync_stop_free(gw_sync *s);

/* ---- the folds ---------------------------------------------------------------------- */

gw_sync_fn *gw_sync_fn_get(gw_sync *s, const char *name, bool create)
{
    for (size_t i = 0; i < s->n_fns; i++)
        if (strcmp(s->fns[i]->name, name) == 0)
            return s->fns[i];
    if (!create)
        return NULL;
    if (s->n_fns == s->cap_fns) {
        size_t nc = s->cap_fns ? 2 * s->cap_fns : 64;
        gw_sync_fn **nf = realloc(s->fns, nc * sizeof *nf);
        if (nf == NULL)
            return NULL;
        s->fns = nf;
        s->cap_fns = nc;
    }
    gw_sync_fn *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    snprintf(f->name, sizeof f->name, "%s", name);
    gf_shared_fold_init(&f->fold, name);
    s->fns[s->n_fns++] = f;
    return f;
}

/* Note whether the store could be reached: st from an access to it. A log
 * entry this node cannot understand (GF_ERR_FORMAT) is that function's
 * problem, not the store's. */
void gw_sync_health(gw_sync *s, gf_status st, const gf_err *e)
{
    if (st != GF_OK && st != GF_ERR_IO && st != GF_ERR_NOT_FOUND) {
        GF_LOG_W("%s", gf_err_msg(e));
        st = GF_OK;
    }
    bool ok = st == GF_OK;
    bool was = atomic_exchange(&s->healthy, ok);
    bool first = ok && !atomic_exchange(&s->ever_read, true);
    pthread_mutex_lock(&s->qlock);
    if (!ok)
        snprintf(s->last_err, sizeof s->last_err, "%s", gf_err_msg(e));
    pthread_mutex_unlock(&s->qlock);
    if (was && !ok)
        GF_LOG_E("shared store %s cannot be read: %s (serving what this node holds)", s->dir,
                 gf_err_msg(e));
    else if (!was && ok)
        GF_LOG_I("shared store %s %s", s->dir, first ? "read" : "is readable again");
    if (was != ok)
        gw_metric_set(s->gw->metrics, GW_M_SHARED_UP, NULL, ok ? 1 : 0);
    if (ok) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        gw_metric_set(s->gw->metrics, GW_M_SHARED_SYNCED, NULL, (double)ts.tv_sec);
    }
}

gf_status gw_sync_ensure_open(gw_sync *s, gf_err *err)
{
    if (s->sh != NULL)
        return GF_OK;
    gf_status st = gf_shared_open(s->dir, NULL, &s->sh, err);
    if (st != GF_OK)
        gf_err_prefix(err, "shared store");
    return st;
}

/* Read and fold name's new entries (s->lock held). When seq > 0, *out gets
 * the outcome of entry seq. */
gf_status gw_sync_fold_new(gw_sync *s, gw_sync_fn *f, uint64_t seq, gf_shared_outcome *out,
                           gf_err *err)
{
    gf_shared_entry *v = NULL;
    size_t n = 0;
    gf_status st = gw_sync_ensure_open(s, err);
    if (st == GF_OK)
        st = gf_shared_read(s->sh, f->name, f->fold.seq, &v, &n, err);
    for (size_t i = 0; st == GF_OK && i < n; i++) {
        gf_shared_outcome o;
        uint64_t q = v[i].seq;
        st = gf_shared_fold_apply(&f->fold, &v[i], &o, err);
        if (st == GF_OK && q == seq && out != NULL)
            *out = o;
        f->dirty = true;
    }
    gf_shared_entries_free(v, n);
    return st;
}

/* ---- applying a fold here -------------------------------------------------------- */

/* Put version sv's files into functions/<name>/v<N>.* (from the deploy that
 * made them here, or copied from the store), record it and add it to the
 * registry (s->lock held). */
static gf_status install(gw_sync *s, gw_sync_fn *f, const gf_shared_version *sv,
                         local_files *lf, gf_err *err)
{
    gf_gw *gw = s->gw;
    const gf_shared_entry *e = sv->deploy;
    char vname[96];
    snprintf(vname, sizeof vname, "v%lld.safetensors", (long long)sv->version);
    char *dir = gf_path_join(gw->functions_dir, f->name);
    char *dst = dir != NULL ? gf_path_join(dir, vname) : NULL;
    char **comp = calloc(e->n_companions + 1, sizeof *comp);
    gf_status st = GF_OK;
    size_t placed = 0;
    bool mine = lf != NULL && lf->version == sv->version && lf->weights != NULL;
    if (dst == NULL || comp == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        st = gf_err_set(err, GF_ERR_IO, "mkdir %s: %s", dir, strerror(errno));
        goto out;
    }
    for (size_t i = 0; i < e->n_companions; i++)
        if ((comp[i] = gf_companion_path(dst, e->companions[i].suffix)) == NULL) {
            st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            goto out;
        }
    if (mine) {
        if (rename(lf->weights, dst) != 0) {
            st = gf_err_set(err, GF_ERR_IO, "rename %s: %s", lf->weights, strerror(errno));
            goto out;
        }
        free(lf->weights);
        lf->weights = NULL;
        for (size_t i = 0; i < lf->n; i++)
            for (size_t k = 0; k < e->n_companions; k++)
                if (strcmp(lf->suffixes[i], e->companions[k].suffix) == 0 &&
                    rename(lf->companions[i], comp[k]) == 0)
                    placed++;
        if (placed != e->n_companions) {
            st = gf_err_set(err, GF_ERR_INTERNAL, "a companion file of the deploy is missing");
            goto out;
        }
    } else {
        if ((st = gf_shared_object_get(s->sh, &e->weights, dst, err)) != GF_OK)
            goto out;
        for (size_t i = 0; i < e->n_companions; i++, placed++)
            if ((st = gf_shared_object_get(s->sh, &e->companions[i], comp[i], err)) != GF_OK)
                goto out;
    }
    gf_store_version_spec spec = {.function = f->name,
                                  .version = sv->version,
                                  .kind = e->kind,
                                  .manifest = e->manifest,
                                  .weights_path = dst,
                                  .bytes = e->weights.bytes,
                                  .sha256 = e->weights.sha256,
                                  .publish = false};
    gf_store_file_id_of(dst, &spec.file, NULL); /* the identity a restart checks */
    st = gf_store_version_deploy(gw->store, &spec, NULL, err);
    if (st == GF_ERR_EXISTS) /* recorded by an earlier run of this node */
        st = GF_OK;
    if (st != GF_OK)
        goto out;
    pthread_mutex_lock(&gw->lock);
    gw_version *v;
    st = gw_registry_add(gw, f->name, e->kind, sv->version, e->manifest, dst, e->weights.sha256,
                         e->weights.bytes, GF_STORE_VERSION_READY, NULL, &v, err);
    pthread_mutex_unlock(&gw->lock);
    if (st == GF_OK)
        GF_LOG_I("function '%s' version %lld %s (%s, %llu bytes)", f->name,
                 (long long)sv->version, mine ? "published to the shared store" :
                 "copied from the shared store", e->kind,
                 (unsigned long long)e->weights.bytes);
out:
    if (st != GF_OK && dst != NULL) {
        unlink(dst);
        for (size_t i = 0; i < e->n_companions && comp != NULL; i++)
            if (comp[i] != NULL)
                unlink(comp[i]);
    }
    for (size_t i = 0; comp != NULL && i < e->n_companions; i++)
        free(comp[i]);
    free(comp);
    free(dst);
    free(dir);
    return st;
}

/* Make this node's registry and SQLite agree with f's fold (s->lock held). */
void gw_sync_reconcile(gw_sync *s, gw_sync_fn *f, local_files *lf)
{
    gf_gw *gw = s->gw;
    gf_shared_fold *fold = &f->fold;
    f->dirty = false;
    f->fetch_err[0] = '\0';
    if (fold->current == 0) {
        pthread_mutex_lock(&gw->lock);
        gw_function *lfn = gw_function_find(gw, f->name);
        bool here = lfn != NULL && !lfn->deleted && lfn->current != NULL;
        pthread_mutex_unlock(&gw->lock);
        gf_err e;
        if (here && fold->seq > 0 && gw_delete_local(gw, f->name, &e) == GF_OK)
            GF_LOG_I("function '%s' deleted through the shared store", f->name);
        return;
    }
    for (size_t i = 0; i < fold->n_versions; i++) {
        const gf_shared_version *sv = &fold->versions[i];
        if (!sv->live)
            continue;
        pthread_mutex_lock(&gw->lock);
        gw_function *lfn = gw_function_find(gw, f->name);
        gw_version *lv = lfn != NULL ? gw_version_find(lfn, sv->version) : NULL;
        bool have = lv != NULL && lv->state == GF_STORE_VERSION_READY &&
                    strcmp(lv->sha256, sv->deploy->weights.sha256) == 0;
        bool other = lv != NULL && !have;
        pthread_mutex_unlock(&gw->lock);
        if (have)
            continue;
        if (other) {
            snprintf(f->fetch_err, sizeof f->fetch_err, "this node has another version %lld of "
                     "'%s' than the shared store", (long long)sv->version, f->name);
            GF_LOG_W("%s: keeping this node's", f->fetch_err);
            continue;
        }
        gf_err e;
        if (install(s, f, sv, lf, &e) != GF_OK) {
            snprintf(f->fetch_err, sizeof f->fetch_err, "version %lld: %s",
                     (long long)sv->version, gf_err_msg(&e));
            GF_LOG_W("function '%s' %s (tried again at the next scan)", f->name, f->fetch_err);
            f->dirty = true;
        }
    }
    /* the store's current version, once it is here */
    pthread_mutex_lock(&gw->lock);
    gw_function *lfn = gw_function_find(gw, f->name);
    gw_version *cur = lfn != NULL ? gw_version_find(lfn, fold->current) : NULL;
    bool change = cur != NULL && cur->state == GF_STORE_VERSION_READY && lfn->current != cur;
    if (change)
        lfn->deleted = false;
    pthread_mutex_unlock(&gw->lock);
    gf_err pe;
    if (change && gw_publish_local(gw, cur, &pe) != GF_OK)
        GF_LOG_W("function '%s': making version %lld current: %s", f->name,
                 (long long)fold->current, gf_err_msg(&pe));
    /* versions deleted in the store go here too (once another is current here) */
    for (size_t i = 0; i < fold->n_versions; i++) {
        const gf_shared_version *sv = &fold->versions[i];
        if (sv->live)
            continue;
        pthread_mutex_lock(&gw->lock);
        gw_version *lv = gw_version_find(gw_function_find(gw, f->name), sv->version);
        bool here = lv != NULL && lv->state != GF_STORE_VERSION_DELETED &&
                    lv->fn->current != lv;
        pthread_mutex_unlock(&gw->lock);
        gf_err e;
        if (here && gw_delete_version_local(gw, f->name, sv->version, &e) != GF_OK)
            GF_LOG_W("function '%s': deleting version %lld as the shared store did: %s",
                     f->name, (long long)sv->version, gf_err_msg(&e));
    }
}

/* Read, fold and apply name's log (s->lock held). */
static gf_status sync_one(gw_sync *s, const char *name, gf_err *err)
{
    gw_sync_fn *f = gw_sync_fn_get(s, name, true);
    if (f == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    gf_status st = gw_sync_fold_new(s, f, 0, NULL, err);
    gw_sync_health(s, st, err);
    if (f->dirty)
        gw_sync_reconcile(s, f, NULL);
    return st;
}


/* ---- requests waiting for a lookup --------------------------------------------------- */

/* Free what p copied of its request, and p. */
static void parked_free(gw_parked *p)
{
    for (size_t i = 0; i < p->n_outputs; i++)
        free(p->outputs[i]);
    free(p->outputs);
    free(p->out_shm);
    free(p);
}

/* Answer parked request p with an error (count: also in /metrics; not when a
 * submit counted it already) and free it. */
static void answer(gf_gw *gw, gw_parked *p, gf_status st, const char *msg, bool count)
{
    gf_gw_result *r = p->res;
    gf_gw_tensors_free(p->inputs, p->n_inputs);
    if (count) /* counted and recorded as every answer is */
        gw_answer_refused(gw, p->name, p->version, st, msg, p->t0_us);
    r->status = st;
    r->worker = -1;
    r->version = p->version;
    snprintf(r->function, sizeof r->function, "%s", p->name);
    snprintf(r->message, sizeof r->message, "%s", msg);
    gf_gw_done_fn done = p->done;
    void *arg = p->done_arg;
    parked_free(p);
    atomic_fetch_sub(&gw->inflight_reqs, 1);
    done(arg, r);
}

/* Submit again the requests parked for name (now that the store was read),
 * or answer them when that cannot help: unreadable store, a failed copy. */
static void unpark(gw_sync *s, const char *name, gf_status read_st, const char *why)
{
    gf_gw *gw = s->gw;
    pthread_mutex_lock(&s->qlock);
    gw_parked *mine = NULL, **pp = &s->parked;
    while (*pp != NULL) {
        gw_parked *p = *pp;
        if (strcmp(p->name, name) == 0) {
            *pp = p->next;
            p->next = mine;
            mine = p;
            s->n_parked--;
        } else {
            pp = &p->next;
        }
    }
    pthread_mutex_unlock(&s->qlock);
    while (mine != NULL) {
        gw_parked *p = mine;
        mine = p->next;
        if (read_st != GF_OK || why[0] != '\0') {
            char msg[512];
            snprintf(msg, sizeof msg, "function '%s' is not on this node and %s", name,
                     read_st != GF_OK ? "the shared store cannot be read" : why);
            answer(gw, p, GF_ERR_CLOSED, msg, true);
            continue;
        }
        gf_gw_infer_req req = {.function = p->name,
                               .version = p->version,
                               .inputs = p->inputs,
                               .n_inputs = p->n_inputs,
                               .outputs = (const char *const *)p->outputs,
                               .n_outputs = p->n_outputs,
                               .out_shm = p->out_shm,
                               .done = p->done,
                               .done_arg = p->done_arg,
                               .t0_us = p->t0_us,
                               .timeout_us = p->timeout_us};
        p->inputs = NULL; /* the submit takes them over in every case */
        p->n_inputs = 0;
        gf_err e;
        gf_status st = gw_submit(gw, &req, false, &e);
        if (st == GF_OK) {         /* in flight again, counted by the submit */
            free(p->res);
            parked_free(p);
            atomic_fetch_sub(&gw->inflight_reqs, 1);
        } else {                   /* answered here; the submit counted it */
            answer(gw, p, st, e.msg, false);
        }
    }
}

/* Ask the thread to look name up (qlock held): false when out of memory. */
static bool want_push(gw_sync *s, const char *name)
{
    for (size_t i = 0; i < s->n_want; i++)
        if (strcmp(s->want[i], name) == 0)
            return true;
    if (s->n_want == s->cap_want) {
        size_t nc = s->cap_want ? 2 * s->cap_want : 16;
        char(*nw)[64] = realloc(s->want, nc * sizeof *nw);
        if (nw == NULL)
            return false;
        s->want = nw;
        s->cap_want = nc;
    }
    snprintf(s->want[s->n_want++], 64, "%s", name);
    return true;
}

bool gw_sync_park(gf_gw *gw, const gf_gw_infer_req *req, gf_gw_tensor *inputs, size_t n)
{
    gw_sync *s = gw->sync;
    if (s == NULL)
        return false;
    gw_parked *p = calloc(1, sizeof *p);
    gf_gw_result *r = calloc(1, sizeof *r);
    if (p == NULL || r == NULL) {
        free(p);
        free(r);
        return false;
    }
    p->res = r;
    /* what it asks of the outputs goes with it: the names are the caller's
     * for the call only; the shm keys are borrowed until done, as the
     * request's own are */
    if (req->n_outputs > 0) {
        p->outputs = calloc(req->n_outputs, sizeof *p->outputs);
        p->out_shm = req->out_shm != NULL ? calloc(req->n_outputs, sizeof *p->out_shm) : NULL;
        bool ok = p->outputs != NULL && (req->out_shm == NULL || p->out_shm != NULL);
        for (size_t i = 0; ok && i < req->n_outputs; i++) {
            p->outputs[i] = strdup(req->outputs[i] != NULL ? req->outputs[i] : "");
            ok = p->outputs[i] != NULL;
            p->n_outputs = i + 1;
        }
        if (!ok) {
            free(r);
            parked_free(p);
            return false;
        }
        if (req->out_shm != NULL)
            memcpy(p->out_shm, req->out_shm, req->n_outputs * sizeof *p->out_shm);
    }
    snprintf(p->name, sizeof p->name, "%s", req->function);
    p->version = req->version;
    p->done = req->done;
    p->done_arg = req->done_arg;
    p->t0_us = req->t0_us != 0 ? req->t0_us : gf_mono_us();
    p->timeout_us = req->timeout_us;
    pthread_mutex_lock(&s->qlock);
    if (s->stop || s->n_parked >= SYNC_MAX_PARKED || !want_push(s, req->function)) {
        pthread_mutex_unlock(&s->qlock);
        free(p->res);
        parked_free(p);
        return false;
    }
    p->inputs = inputs;
    p->n_inputs = n;
    p->next = s->parked;
    s->parked = p;
    s->n_parked++;
    s->asked++;
    atomic_fetch_add(&gw->inflight_reqs, 1);
    pthread_cond_signal(&s->qcond);
    pthread_mutex_unlock(&s->qlock);
    return true;
}

void gw_sync_lookup(gf_gw *gw, const char *name, int64_t version)
{
    gw_sync *s = gw->sync;
    if (s == NULL || !gf_function_name_valid(name))
        return;
    pthread_mutex_lock(&gw->lock);
    gw_function *f = gw_function_find(gw, name);
    bool known = f != NULL && !f->deleted && gw_version_find(f, version) != NULL;
    pthread_mutex_unlock(&gw->lock);
    if (known)
        return;
    pthread_mutex_lock(&s->qlock);
    if (!s->stop && want_push(s, name)) {
        uint64_t round = ++s->asked;
        pthread_cond_signal(&s->qcond);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += SYNC_WAIT_VIEW_MS / 1000;
        until.tv_nsec += (long)(SYNC_WAIT_VIEW_MS % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (!s->stop && s->answered < round &&
               pthread_cond_timedwait(&s->qdone, &s->qlock, &until) == 0) {
        }
    }
    pthread_mutex_unlock(&s->qlock);
}

/* ---- the thread ------------------------------------------------------------------------ */

/* Look up every name asked for, then answer or resubmit what waited on them. */
static void serve_wanted(gw_sync *s)
{
    pthread_mutex_lock(&s->qlock);
    char(*want)[64] = s->want;
    size_t n = s->n_want;
    uint64_t round = s->asked;
    s->want = NULL;
    s->n_want = s->cap_want = 0;
    pthread_mutex_unlock(&s->qlock);
    for (size_t i = 0; i < n; i++) {
        gf_err e;
        char why[300] = "";
        pthread_mutex_lock(&s->lock);
        gf_status st = sync_one(s, want[i], &e);
        gw_sync_fn *f = gw_sync_fn_get(s, want[i], false);
        if (st == GF_OK && f != NULL && f->fetch_err[0] != '\0')
            snprintf(why, sizeof why, "could not be copied from the shared store: %s",
                     f->fetch_err);
        pthread_mutex_unlock(&s->lock);
        unpark(s, want[i], st, why);
    }
    free(want);
    pthread_mutex_lock(&s->qlock);
    if (round > s->answered)
        s->answered = round;
    pthread_cond_broadcast(&s->qdone);
    pthread_mutex_unlock(&s->qlock);
}

static void scan_all(gw_sync *s)
{
    gf_err e;
    char **names = NULL;
    size_t n = 0;
    pthread_mutex_lock(&s->lock);
    gf_status st = gw_sync_ensure_open(s, &e);
    if (st == GF_OK)
        st = gf_shared_names(s->sh, &names, &n, &e);
    gw_sync_health(s, st, &e);
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; i < n; i++) {
        if (st == GF_OK) {
            pthread_mutex_lock(&s->lock);
            gf_status r = sync_one(s, names[i], &e);
            pthread_mutex_unlock(&s->lock);
            if (r == GF_ERR_IO || r == GF_ERR_NOT_FOUND) /* unreachable: try later */
                st = r;
            serve_wanted(s); /* a request waiting for a lookup does not wait for the scan */
        }
        free(names[i]);
    }
    free(names);
}

static void *sync_main(void *arg)
{
    gw_sync *s = arg;
    uint64_t next_scan = 0;
    pthread_mutex_lock(&s->qlock);
    while (!s->stop) {
        uint64_t now = gf_mono_us();
        if (s->n_want == 0 && now < next_scan) {
            uint64_t wait_us = next_scan - now;
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += (time_t)(wait_us / 1000000u);
            until.tv_nsec += (long)(wait_us % 1000000u) * 1000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&s->qcond, &s->qlock, &until);
            continue;
        }
        pthread_mutex_unlock(&s->qlock);
        serve_wanted(s);
        if (now >= next_scan) {
            scan_all(s);
            next_scan = gf_mono_us() + (uint64_t)s->scan_ms * 1000u;
        }
        pthread_mutex_lock(&s->qlock);
    }
    pthread_mutex_unlock(&s->qlock);
    return NULL;
}

/* ---- start, stop, health ---------------------------------------------------------------- */

gf_status gw_sync_start(gf_gw *gw, gf_err *err)
{
    gw_sync *s = calloc(1, sizeof *s);
    if (s == NULL || (s->dir = strdup(gw->cfg.shared_store)) == NULL) {
        free(s);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    s->gw = gw;
    s->scan_ms = gw->cfg.shared_scan_ms ? gw->cfg.shared_scan_ms : GF_GW_DEFAULT_SHARED_SCAN_MS;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->qlock, NULL);
    pthread_cond_init(&s->qcond, NULL);
    pthread_cond_init(&s->qdone, NULL);
    atomic_init(&s->healthy, false);
    atomic_init(&s->ever_read, false);
    gw_metric_set(gw->metrics, GW_M_SHARED_UP, NULL, 0);
    gf_err e;
    pthread_mutex_lock(&s->lock);
    gf_status st = gw_sync_ensure_open(s, &e); /* not fatal: the thread tries again */
    pthread_mutex_unlock(&s->lock);
    if (st != GF_OK)
        GF_LOG_E("%s (serving what this node holds; trying again every %u ms)", e.msg,
                 s->scan_ms);
    gw->sync = s;
    if (pthread_create(&s->thread, NULL, sync_main, s) != 0) {
        gw->sync = NULL;
        gw_sync_stop_free(s);
        return gf_err_set(err, GF_ERR_NOMEM, "cannot start the shared store's thread");
    }
    s->running = true;
    GF_LOG_I("shared store %s: scanned every %u ms", s->dir, s->scan_ms);
    return GF_OK;
}

static void gw_sync_stop_free(gw_sync *s)
{
    if (s->running) {
        pthread_mutex_lock(&s->qlock);
        s->stop = true;
        pthread_cond_broadcast(&s->qcond);
        pthread_cond_broadcast(&s->qdone);
        pthread_mutex_unlock(&s->qlock);
        pthread_join(s->thread, NULL);
        s->running = false;
    }
    /* what still waits for a lookup is refused, as other requests are at shutdown */
    gw_parked *p = s->parked;
    s->parked = NULL;
    while (p != NULL) {
        gw_parked *next = p->next;
        answer(s->gw, p, GF_ERR_CLOSED, "the server is shutting down", true);
        p = next;
    }
    for (size_t i = 0; i < s->n_fns; i++) {
        gf_shared_fold_deinit(&s->fns[i]->fold);
        free(s->fns[i]);
    }
    free(s->fns);
    free(s->want);
    gf_shared_free(s->sh);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->qlock);
    pthread_cond_destroy(&s->qcond);
    pthread_cond_destroy(&s->qdone);
    free(s->dir);
    free(s);
}

void gw_sync_stop(gf_gw *gw)
{
    if (gw->sync == NULL)
        return;
    gw_sync_stop_free(gw->sync);
    gw->sync = NULL;
}

bool gw_sync_can_serve(gf_gw *gw)
{
    gw_sync *s = gw->sync;
    if (s == NULL || atomic_load(&s->healthy))
        return true;
    /* the store is unreadable: ready while this node holds something to serve */
    for (size_t i = 0; i < gw->n_fns; i++) {
        const gw_function *f = gw->fns[i];
        if (!f->deleted && f->current != NULL && f->current->state == GF_STORE_VERSION_READY)
            return true;
    }
    return false;
}
