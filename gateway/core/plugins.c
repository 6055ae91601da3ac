/* gpufaas — plugin kinds added while the server runs (gateway/core).
 *
 * With --allow-native-functions an operator may add a plugin (a shared
 * object implementing the function ABI) over the admin API. The gateway
 * never loads it: the file is stored as <state>/plugins/<sha256>.so (0600),
 * and a `gpufaas-worker --probe` child loads it and reports its kind. Then
 * the kind is known to the deploy validation (gw->oneshot) and to LOAD
 * (gw->probe: the path each worker dlopens). Stored plugins are probed again,
 * one child each, when the server starts; one that no longer loads is
 * skipped with a warning.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "core/path.h"
#include "store/sha256.h"
#include "gateway/core/internal.h"

/* Probe one plugin file alone; its kind (malloc'd) on success. */
static gf_status probe_one(gf_gw *gw, const char *path, char **kind, gf_err *err)
{
    const char *one[1] = {path};
    gf_oneshot_cfg c = gw->oneshot;
    c.plugins = one;
    c.n_plugins = 1;
    gf_probe p;
    memset(&p, 0, sizeof p);
    gf_status st = gf_oneshot_probe(&c, &p, err);
    if (st == GF_OK && p.n_plugins != 1)
        st = gf_err_set(err, GF_ERR_PROTOCOL, "the probe reported %zu kinds", p.n_plugins);
    if (st == GF_OK && (*kind = strdup(p.plugin_kinds[0])) == NULL)
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    gf_probe_deinit(&p);
    return st;
}

/* Known kind? (lock held) */
static bool kind_taken(const gf_gw *gw, const char *kind)
{
    for (size_t i = 0; i < gw->probe.n_plugins; i++)
        if (strcmp(gw->probe.plugin_kinds[i], kind) == 0)
            return true;
    return false;
}

/* Make path (probed, kind) known to validation and LOAD. Takes kind. */
static gf_status plugin_publish(gf_gw *gw, const char *path, char *kind, gf_err *err)
{
    char *p1 = strdup(path), *p2 = strdup(path);
    char **list = realloc(gw->plugin_list, (gw->n_plugin_list + 1) * sizeof *list);
    if (list != NULL)
        gw->plugin_list = list;
    pthread_mutex_lock(&gw->lock);
    char **k = realloc(gw->probe.plugin_kinds, (gw->probe.n_plugins + 1) * sizeof *k);
    if (k != NULL)
        gw->probe.plugin_kinds = k;
    char **pp = k != NULL ? realloc(gw->probe.plugin_paths, (gw->probe.n_plugins + 1) * sizeof *pp)
                          : NULL;
    if (pp != NULL)
        gw->probe.plugin_paths = pp;
    bool ok = p1 != NULL && p2 != NULL && list != NULL && k != NULL && pp != NULL;
    if (ok) {
        gw->probe.plugin_kinds[gw->probe.n_plugins] = kind;
        gw->probe.plugin_paths[gw->probe.n_plugins] = p1;
        gw->probe.n_plugins++;
    }
    pthread_mutex_unlock(&gw->lock);
    if (!ok) {
        free(p1);
        free(p2);
        free(kind);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    gw->plugin_list[gw->n_plugin_list++] = p2;
    gw->oneshot.plugins = (const char *const *)gw->plugin_list;
    gw->oneshot.n_plugins = gw->n_plugin_list;
    return GF_OK;
}

gf_status gw_plugins_init(gf_gw *gw, gf_err *err)
{
    /* the command line's plugins (probed together already) first */
    for (size_t i = 0; i < gw->cfg.n_plugins; i++) {
        char **list = realloc(gw->plugin_list, (gw->n_plugin_list + 1) * sizeof *list);
        char *p = list != NULL ? strdup(gw->cfg.plugins[i]) : NULL;
        if (list != NULL)
            gw->plugin_list = list;
        if (p == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        gw->plugin_list[gw->n_plugin_list++] = p;
    }
    gw->oneshot.plugins = (const char *const *)gw->plugin_list;
    gw->oneshot.n_plugins = gw->n_plugin_list;
    if (!gw->cfg.allow_native)
        return GF_OK;
    char *dir = gf_path_join(gw->state_dir, "plugins");
    if (dir == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 4 || strcmp(e->d_name + n - 3, ".so") != 0)
            continue;
        char *path = gf_path_join(dir, e->d_name);
        char *kind = NULL;
        gf_err pe;
        gf_err_clear(&pe);
        if (path != NULL && probe_one(gw, path, &kind, &pe) == GF_OK) {
            pthread_mutex_lock(&gw->lock);
            bool taken = kind_taken(gw, kind);
            pthread_mutex_unlock(&gw->lock);
            if (taken) {
                GF_LOG_W("plugin %s: kind '%s' is provided already: skipped", path, kind);
                free(kind);
            } else if (plugin_publish(gw, path, kind, &pe) == GF_OK) {
                GF_LOG_I("plugin %s: kind '%s'", path, gw->probe.plugin_kinds[gw->probe.n_plugins - 1]);
            }
        } else if (path != NULL) {
            GF_LOG_W("plugin %s no longer loads, skipped: %s", path, pe.msg);
        }
        free(path);
    }
    if (d != NULL)
        closedir(d);
    free(dir);
    return GF_OK;
}

void gw_plugins_free(gf_gw *gw)
{
    for (size_t i = 0; i < gw->n_plugin_list; i++)
        free(gw->plugin_list[i]);
    free(gw->plugin_list);
    gw->plugin_list = NULL;
    gw->n_plugin_list = 0;
}

gf_status gf_gw_plugin_add(gf_gw *gw, const void *so, size_t len, char *kind_out,
                           size_t kind_cap, gf_err *err)
{
    if (!gw->cfg.allow_native)
        return gf_err_set(err, GF_ERR_PERMISSION, "this server does not run native code: start "
                          "it with --allow-native-functions to add plugins");
    if (len < 4 || memcmp(so, "\x7f" "ELF", 4) != 0)
        return gf_err_set(err, GF_ERR_INVALID, "the body is not a shared object (no ELF header): "
                          "send the plugin's .so file (Content-Type: application/octet-stream)");
    char hex[GF_SHA256_HEX_LEN], name[GF_SHA256_HEX_LEN + 8];
    gf_status hst = gf_sha256_buf(so, len, hex, err);
    if (hst != GF_OK)
        return hst;
    snprintf(name, sizeof name, "%s.so", hex);
    char *dir = gf_path_join(gw->state_dir, "plugins");
    char *path = dir != NULL ? gf_path_join(dir, name) : NULL;
    char *tmp = path != NULL ? malloc(strlen(path) + 8) : NULL;
    char *kind = NULL;
    gf_status st = GF_OK;
    int fd = -1;
    if (tmp == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto out;
    }
    snprintf(tmp, strlen(path) + 8, "%s.part", path);
    pthread_mutex_lock(&gw->deploy_lock);
    for (size_t i = 0; i < gw->n_plugin_list; i++)
        if (strcmp(gw->plugin_list[i], path) == 0) { /* the same file again */
            pthread_mutex_lock(&gw->lock);
            for (size_t k = 0; k < gw->probe.n_plugins; k++)
                if (strcmp(gw->probe.plugin_paths[k], path) == 0)
                    snprintf(kind_out, kind_cap, "%s", gw->probe.plugin_kinds[k]);
            pthread_mutex_unlock(&gw->lock);
            goto unlock;
        }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        st = gf_err_set(err, GF_ERR_IO, "mkdir(%s): %s", dir, strerror(errno));
        goto unlock;
    }
    unlink(tmp);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    size_t off = 0;
    while (fd >= 0 && off < len) {
        ssize_t w = write(fd, (const char *)so + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    if (fd < 0 || off != len || fsync(fd) != 0 || close(fd) != 0) {
        st = gf_err_set(err, errno == ENOSPC ? GF_ERR_NO_SPACE : GF_ERR_IO, "storing %s: %s",
                        tmp, strerror(errno));
        if (fd >= 0 && off != len)
            close(fd);
        fd = -1;
        unlink(tmp);
        goto unlock;
    }
    fd = -1;
    /* loaded by a child only; a plugin that does not load is the sender's */
    if ((st = probe_one(gw, tmp, &kind, err)) != GF_OK) {
        if (st != GF_ERR_NOMEM)
            st = err != NULL ? (err->code = GF_ERR_INVALID) : GF_ERR_INVALID;
        gf_err_prefix(err, "the plugin does not load in a worker");
        unlink(tmp);
        goto unlock;
    }
    pthread_mutex_lock(&gw->lock);
    bool taken = kind_taken(gw, kind);
    pthread_mutex_unlock(&gw->lock);
    if (taken) {
        st = gf_err_set(err, GF_ERR_EXISTS, "a plugin already provides kind '%s'", kind);
        unlink(tmp);
        goto unlock;
    }
    if (rename(tmp, path) != 0) {
        st = gf_err_set(err, GF_ERR_IO, "rename(%s): %s", path, strerror(errno));
        unlink(tmp);
        goto unlock;
    }
    snprintf(kind_out, kind_cap, "%s", kind);
    st = plugin_publish(gw, path, kind, err);
    kind = NULL;
    if (st == GF_OK)
        GF_LOG_I("plugin added: kind '%s' from %s", kind_out, path);
unlock:
    pthread_mutex_unlock(&gw->deploy_lock);
out:
    free(kind);
    free(tmp);
    free(path);
    free(dir);
    return st;
}
