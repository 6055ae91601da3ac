/* gpufaas — the function store's files (gateway/core): what a version owns
 * on disk, what goes with a deleted version, what a start removes, and the
 * checks of their content.
 *
 *   <state>/functions/<name>/v<N>.safetensors   a version's weights
 *   <state>/functions/<name>/v<N>.<suffix>      its companion files (a converting kind's)
 *   <state>/derived/<gf_derived_name(key)>      what a worker derived from them at load
 *
 * A start is O(versions): gf_store_recover stats each file against the
 * identity recorded at publish; the full SHA-256 of every file runs after
 * the workers are up, on a thread at the lowest CPU and I/O priority (the
 * background check), and on demand (gf_gw_fsck). A version whose file does
 * not match is marked broken and no longer served. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/path.h"
#include "gateway/core/internal.h"

gf_status gw_make_dirs(const char *path, gf_err *err)
{
    char buf[PATH_MAX];
    if (strlen(path) >= sizeof buf)
        return gf_err_set(err, GF_ERR_INVALID, "path too long: %s", path);
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0700) != 0 && errno != EEXIST)
                return gf_err_set(err, GF_ERR_IO, "mkdir(%s): %s", buf, strerror(errno));
            *p = c;
            if (c == '\0')
                break;
        }
    }
    return GF_OK;
}

int gw_remove_files(const char *dir)
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

/* The stem of a weights path: its file name without ".safetensors" ("v3"),
 * into stem; false when the path has no file name. */
static bool weights_stem(const char *path, char *stem, size_t cap)
{
    const char *base = strrchr(path, '/');
    base = base != NULL ? base + 1 : path;
    size_t n = strlen(base);
    static const char ext[] = ".safetensors";
    if (n > sizeof ext - 1 && strcmp(base + n - (sizeof ext - 1), ext) == 0)
        n -= sizeof ext - 1;
    if (n == 0 || n >= cap)
        return false;
    memcpy(stem, base, n);
    stem[n] = '\0';
    return true;
}

/* True when file name `name` in v's folder belongs to v: its weights or a
 * companion (the same stem, then a dot). */
static bool owns(const gw_version *v, const char *name)
{
    char stem[256];
    if (!weights_stem(v->weights_path, stem, sizeof stem))
        return false;
    size_t n = strlen(stem);
    return strncmp(name, stem, n) == 0 && name[n] == '.';
}

char *gw_derived_path(const gf_gw *gw, const gw_version *v)
{
    char *name = gf_derived_name(v->key);
    char *dir = name != NULL ? gf_path_join(gw->state_dir, GF_DERIVED_DIR) : NULL;
    char *path = dir != NULL ? gf_path_join(dir, name) : NULL;
    free(name);
    free(dir);
    return path;
}

void gw_version_files_remove(gf_gw *gw, const gw_version *v)
{
    if (unlink(v->weights_path) != 0 && errno != ENOENT)
        GF_LOG_W("removing %s: %s", v->weights_path, strerror(errno));
    /* its companion files, beside the weights */
    char *slash = strrchr(v->weights_path, '/');
    if (slash != NULL) {
        char *dir = strndup(v->weights_path, (size_t)(slash - v->weights_path));
        DIR *d = dir != NULL ? opendir(dir) : NULL;
        struct dirent *e;
        while (d != NULL && (e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.' || !owns(v, e->d_name))
                continue;
            char *p = gf_path_join(dir, e->d_name);
            if (p != NULL && unlink(p) != 0 && errno != ENOENT)
                GF_LOG_W("removing %s: %s", p, strerror(errno));
            free(p);
        }
        if (d != NULL)
            closedir(d);
        free(dir);
    }
    char *derived = gw_derived_path(gw, v);
    if (derived != NULL && unlink(derived) != 0 && errno != ENOENT)
        GF_LOG_W("removing %s: %s", derived, strerror(errno));
    free(derived);
}

/* Remove the entry name of dir (a file, a link, or a whole folder) that no
 * version owns; how many entries went (0 or 1). */
static int remove_orphan(const char *dir, const char *name)
{
    char *p = gf_path_join(dir, name);
    if (p == NULL)
        return 0;
    struct stat sb;
    int gone = 0;
    if (lstat(p, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            gf_path_rmtree(p);
        else if (unlink(p) != 0)
            GF_LOG_W("removing %s: %s", p, strerror(errno));
        gone = lstat(p, &sb) != 0;
        if (gone)
            GF_LOG_D("removed %s: no version owns it", p);
    }
    free(p);
    return gone;
}

/* The live version of function f that owns file `name` in its folder, or
 * NULL. Lock held. */
static const gw_version *owner_in(const gw_function *f, const char *name)
{
    for (size_t i = 0; f != NULL && i < f->n; i++) {
        const gw_version *v = f->versions[i];
        if (v->state != GF_STORE_VERSION_DELETED && owns(v, name))
            return v;
    }
    return NULL;
}

void gw_files_clean_orphans(gf_gw *gw)
{
    int removed = 0;
    pthread_mutex_lock(&gw->lock);
    /* functions/<name>/<file>: a folder of a function with live versions,
     * and in it the files of those versions */
    DIR *d = opendir(gw->functions_dir);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        gw_function *f = gf_function_name_valid(e->d_name) ? gw_function_find(gw, e->d_name) : NULL;
        char *sub = f != NULL && !f->deleted ? gf_path_join(gw->functions_dir, e->d_name) : NULL;
        DIR *sd = sub != NULL ? opendir(sub) : NULL;
        if (sd == NULL) {
            removed += remove_orphan(gw->functions_dir, e->d_name);
            free(sub);
            continue;
        }
        struct dirent *fe;
        while ((fe = readdir(sd)) != NULL) {
            if (strcmp(fe->d_name, ".") == 0 || strcmp(fe->d_name, "..") == 0)
                continue;
            if (owner_in(f, fe->d_name) == NULL)
                removed += remove_orphan(sub, fe->d_name);
        }
        closedir(sd);
        free(sub);
    }
    if (d != NULL)
        closedir(d);
    /* derived/<file>: the derived file of a live version */
    char *ddir = gf_path_join(gw->state_dir, GF_DERIVED_DIR);
    d = ddir != NULL ? opendir(ddir) : NULL;
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        bool owned = false;
        for (size_t i = 0; i < gw->n_fns && !owned; i++) {
            const gw_function *f = gw->fns[i];
            for (size_t k = 0; k < f->n && !owned; k++) {
                const gw_version *v = f->versions[k];
                if (v->state == GF_STORE_VERSION_DELETED)
                    continue;
                char *name = gf_derived_name(v->key);
                owned = name != NULL && strcmp(name, e->d_name) == 0;
                free(name);
            }
        }
        if (!owned)
            removed += remove_orphan(ddir, e->d_name);
    }
    if (d != NULL)
        closedir(d);
    free(ddir);
    pthread_mutex_unlock(&gw->lock);
    if (removed > 0)
        GF_LOG_I("removed %d file(s) under functions/ and derived/ that no version owns", removed);
}

/* ---- checks of the content ---------------------------------------------------------- */

/* What a check needs of a version, copied under the lock (the version
 * itself is pinned by a reference meanwhile). */
typedef struct check_item {
    gw_version *v;                /* a reference */
    gf_store_version_info info;   /* strings borrowed from v */
} check_item;

static void item_of(gw_version *v, check_item *it)
{
    gw_version_ref(v);
    memset(it, 0, sizeof *it);
    it->v = v;
    it->info.function = v->fn->name;
    it->info.version = v->version;
    it->info.weights_path = v->weights_path;
    it->info.bytes = v->bytes;
    snprintf(it->info.sha256, sizeof it->info.sha256, "%s", v->sha256);
    it->info.file = v->file;
}

/* Apply the verdict of a check of it (lock not held): record a good file,
 * or mark the version broken, stop serving it and say why. */
static void apply_check(gf_gw *gw, check_item *it, const gf_store_check_result *res)
{
    gw_version *v = it->v;
    gf_err e;
    if (res->ok) {
        pthread_mutex_lock(&gw->lock);
        v->verified = true;
        v->file = res->id;
        pthread_mutex_unlock(&gw->lock);
        if (gf_store_version_checked(gw->store, v->fn->name, v->version, &res->id, res->hashed,
                                     &e) != GF_OK &&
            e.code != GF_ERR_NOT_FOUND)
            GF_LOG_W("function '%s' version %lld: recording its check: %s", v->fn->name,
                     (long long)v->version, e.msg);
        return;
    }
    pthread_mutex_lock(&gw->lock);
    bool was_ready = v->state == GF_STORE_VERSION_READY;
    if (was_ready) {
        v->state = GF_STORE_VERSION_BROKEN;
        free(v->reason);
        v->reason = strdup(res->why);
        gw_worker_unload_all(gw, v);
    }
    pthread_mutex_unlock(&gw->lock);
    if (!was_ready)
        return;
    GF_LOG_W("function '%s' version %lld is broken and no longer served: %s", v->fn->name,
             (long long)v->version, res->why);
    if (gf_store_version_mark_broken(gw->store, v->fn->name, v->version, res->why, &e) != GF_OK)
        GF_LOG_W("function '%s' version %lld: marking it broken: %s", v->fn->name,
                 (long long)v->version, e.msg);
}

/* The next ready version no check has hashed in this run, pinned into *it;
 * false when there is none. Lock held. */
static bool next_unverified(gf_gw *gw, check_item *it)
{
    for (size_t i = 0; i < gw->n_fns; i++) {
        gw_function *f = gw->fns[i];
        for (size_t k = 0; k < f->n; k++) {
            gw_version *v = f->versions[k];
            if (v->state == GF_STORE_VERSION_READY && !v->verified && !v->checking) {
                v->checking = true;
                item_of(v, it);
                return true;
            }
        }
    }
    return false;
}

/* The background check (arg is the gateway): hash every version's file once
 * after a start, at the lowest priority, stopping at shutdown. */
static void *checker_main(void *arg)
{
    gf_gw *gw = arg;
    pid_t tid = (pid_t)syscall(SYS_gettid);
    if (setpriority(PRIO_PROCESS, (id_t)tid, 19) != 0)
        GF_LOG_D("background check: setpriority: %s", strerror(errno));
    /* ioprio_set(IOPRIO_WHO_PROCESS, tid, IOPRIO_PRIO_VALUE(IOPRIO_CLASS_IDLE, 0)) */
    if (syscall(SYS_ioprio_set, 1, (int)tid, 3 << 13) != 0)
        GF_LOG_D("background check: ioprio_set: %s", strerror(errno));
    uint64_t t0 = gf_mono_us(), bytes = 0;
    size_t checked = 0, broken = 0;
    gf_store_check_result *res = malloc(sizeof *res);
    while (res != NULL && !atomic_load(&gw->checker_stop)) {
        check_item it;
        pthread_mutex_lock(&gw->lock);
        bool more = next_unverified(gw, &it);
        pthread_mutex_unlock(&gw->lock);
        if (!more)
            break;
        gf_status st = gf_store_file_check(it.v->weights_path, &it.info, GF_STORE_CHECK_FULL,
                                           &gw->checker_stop, res);
        if (st == GF_OK) {
            apply_check(gw, &it, res);
            checked++;
            bytes += it.info.bytes;
            broken += !res->ok;
        }
        pthread_mutex_lock(&gw->lock);
        it.v->checking = false;
        pthread_mutex_unlock(&gw->lock);
        gw_version_unref(it.v);
        if (st != GF_OK)
            break; /* stopping, or out of memory */
    }
    free(res);
    if (checked > 0)
        GF_LOG_I("background check: %zu version(s), %.1f MiB hashed in %.1f s, %zu broken",
                 checked, (double)bytes / 1048576.0, (double)(gf_mono_us() - t0) / 1e6, broken);
    atomic_store(&gw->checker_done, true);
    return NULL;
}

gf_status gw_checker_start(gf_gw *gw, gf_err *err)
{
    atomic_store(&gw->checker_stop, false);
    int rc = pthread_create(&gw->checker, NULL, checker_main, gw);
    if (rc != 0)
        return gf_err_set(err, GF_ERR_NOMEM, "pthread_create(background check): %s",
                          strerror(rc));
    gw->checker_running = true;
    return GF_OK;
}

void gw_checker_stop(gf_gw *gw)
{
    if (!gw->checker_running)
        return;
    atomic_store(&gw->checker_stop, true);
    pthread_join(gw->checker, NULL);
    gw->checker_running = false;
}

gf_status gf_gw_fsck(gf_gw *gw, gf_buf *out, gf_err *err)
{
    /* every live version, pinned, in catalogue order */
    pthread_mutex_lock(&gw->lock);
    size_t n = 0;
    for (size_t i = 0; i < gw->n_fns; i++)
        for (size_t k = 0; k < gw->fns[i]->n; k++)
            n += gw->fns[i]->versions[k]->state != GF_STORE_VERSION_DELETED;
    check_item *items = calloc(n ? n : 1, sizeof *items);
    size_t m = 0;
    for (size_t i = 0; items != NULL && i < gw->n_fns; i++)
        for (size_t k = 0; k < gw->fns[i]->n; k++)
            if (gw->fns[i]->versions[k]->state != GF_STORE_VERSION_DELETED)
                item_of(gw->fns[i]->versions[k], &items[m++]);
    pthread_mutex_unlock(&gw->lock);
    gf_store_check_result *res = malloc(sizeof *res);
    if (items == NULL || res == NULL) {
        free(items);
        free(res);
        return gf_err_set(err, GF_ERR_NOMEM, "fsck: out of memory");
    }
    uint64_t t0 = gf_mono_us(), bytes = 0;
    gf_buf ok, bad;
    gf_buf_init(&ok);
    gf_buf_init(&bad);
    gf_status st = GF_OK;
    for (size_t i = 0; i < m; i++) {
        gw_version *v = items[i].v;
        pthread_mutex_lock(&gw->lock);
        bool was_broken = v->state == GF_STORE_VERSION_BROKEN;
        char *old_reason = was_broken && v->reason != NULL ? strdup(v->reason) : NULL;
        pthread_mutex_unlock(&gw->lock);
        gf_status cs = GF_OK;
        if (was_broken) {
            /* reported with the reason it was marked for; its file is not served */
            res->ok = false;
            snprintf(res->why, sizeof res->why, "%s", old_reason ? old_reason : "broken");
        } else {
            cs = gf_store_file_check(v->weights_path, &items[i].info, GF_STORE_CHECK_FULL, NULL,
                                     res);
            if (cs == GF_OK) {
                apply_check(gw, &items[i], res);
                bytes += items[i].info.bytes;
            }
        }
        free(old_reason);
        if (cs != GF_OK) {
            st = gf_err_set(err, cs, "fsck: checking function '%s' version %lld: %s",
                            v->fn->name, (long long)v->version, gf_strerror(cs));
            break;
        }
        gf_buf *b = res->ok ? &ok : &bad;
        gf_status ws = gf_buf_printf(b, "%s{\"function\":", b->len ? "," : "");
        if (ws == GF_OK)
            ws = gf_buf_append_json_str(b, v->fn->name, strlen(v->fn->name));
        if (ws == GF_OK)
            ws = gf_buf_printf(b, ",\"version\":%lld", (long long)v->version);
        if (ws == GF_OK && !res->ok) {
            ws = gf_buf_append_str(b, ",\"reason\":");
            if (ws == GF_OK)
                ws = gf_buf_append_json_str(b, res->why, strlen(res->why));
        }
        if (ws == GF_OK)
            ws = gf_buf_append_str(b, "}");
        if (ws != GF_OK) {
            st = gf_err_set(err, ws, "fsck: out of memory");
            break;
        }
    }
    if (st == GF_OK)
        st = gf_buf_printf(out,
                           "{\"checked\":%zu,\"bytes\":%llu,\"seconds\":%.3f,\"broken\":[%s],"
                           "\"ok\":[%s]}",
                           m, (unsigned long long)bytes, (double)(gf_mono_us() - t0) / 1e6,
                           bad.data != NULL ? bad.data : "", ok.data != NULL ? ok.data : "");
    for (size_t i = 0; i < m; i++)
        gw_version_unref(items[i].v);
    free(items);
    free(res);
    gf_buf_deinit(&ok);
    gf_buf_deinit(&bad);
    if (st == GF_OK)
        GF_LOG_I("fsck: %zu version(s) checked", m);
    return st;
}
