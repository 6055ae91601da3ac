/* gpufaas — running gpufaas-worker's one-shot modes from the gateway:
 * spawn, collect the answer within a deadline, read it. */
#include "gateway/core/oneshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/log.h"
#include "core/path.h"
#include "functions/manifest.h"
#include "gateway/core/gateway.h"
#include "gf_config.h"
#include "runtime/ipc.h"

extern char **environ;

#define ONESHOT_WORK_PREFIX "validate-"

char *gf_worker_program_find(const char *configured)
{
    if (configured != NULL)
        return strdup(configured);
    const char *env = getenv("GPUFAAS_WORKER");
    if (env != NULL && env[0] != '\0')
        return strdup(env);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    const char *cands[3] = {NULL, NULL, GF_BUILD_DIR "/runtime/worker/gpufaas-worker"};
    char c0[PATH_MAX + 32], c1[PATH_MAX + 64];
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash != NULL)
            *slash = '\0';
        snprintf(c0, sizeof c0, "%s/gpufaas-worker", self);
        snprintf(c1, sizeof c1, "%s/../runtime/worker/gpufaas-worker", self);
        cands[0] = c0;
        cands[1] = c1;
    }
    for (int i = 0; i < 3; i++)
        if (cands[i] != NULL && access(cands[i], X_OK) == 0)
            return realpath(cands[i], NULL);
    return NULL;
}

/* ---- running a child ------------------------------------------------------------ */

/* "killed by signal 11 (Segmentation fault)" / "exited with status 3" */
static void describe_exit(int status, char *buf, size_t cap)
{
    if (WIFSIGNALED(status))
        snprintf(buf, cap, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else if (WIFEXITED(status))
        snprintf(buf, cap, "exited with status %d", WEXITSTATUS(status));
    else
        snprintf(buf, cap, "ended (status 0x%x)", (unsigned)status);
}

/* Run argv with stdin from /dev/null, stdout into *out (at most
 * GF_IPC_ONESHOT_MAX_ANSWER bytes, NUL-terminated), stderr shared with the
 * gateway (its log). what names the child in messages. */
static gf_status run_child(const char *const *argv, uint32_t timeout_ms, const char *what,
                           gf_buf *out, gf_err *err)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0)
        return gf_err_set(err, GF_ERR_IO, "%s: pipe2: %s", what, strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
#endif
    sigset_t none, dflt;
    sigemptyset(&none);
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGPIPE);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &dflt);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, &attr, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(pfd[1]);
    if (rc != 0) {
        close(pfd[0]);
        return gf_err_set(err, GF_ERR_IO, "%s: cannot run %s: %s", what, argv[0], strerror(rc));
    }
    uint64_t deadline = gf_mono_us() + (uint64_t)(timeout_ms ? timeout_ms
                                                              : GF_GW_DEFAULT_VALIDATE_TIMEOUT_MS) * 1000u;
    gf_status st = GF_OK;
    bool eof = false, timed_out = false;
    char chunk[16384];
    while (!eof && st == GF_OK) {
        uint64_t now = gf_mono_us();
        if (now >= deadline) {
            timed_out = true;
            break;
        }
        struct pollfd p = {pfd[0], POLLIN, 0};
        uint64_t left_ms = (deadline - now) / 1000u + 1;
        int n = poll(&p, 1, left_ms > INT_MAX ? INT_MAX : (int)left_ms);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            st = gf_err_set(err, GF_ERR_IO, "%s: poll: %s", what, strerror(errno));
            break;
        }
        if (n == 0)
            continue;
        ssize_t r = read(pfd[0], chunk, sizeof chunk);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            eof = true;
        } else if (out->len + (size_t)r > GF_IPC_ONESHOT_MAX_ANSWER) {
            st = gf_err_set(err, GF_ERR_PROTOCOL, "%s: answer longer than %u bytes", what,
                            GF_IPC_ONESHOT_MAX_ANSWER);
        } else if (gf_buf_append(out, chunk, (size_t)r) != GF_OK) {
            st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        }
    }
    close(pfd[0]);
    /* reap it: at once when it is done, else at the deadline, killed */
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR) {
            status = 0;
            break;
        }
        if (r == 0 && (timed_out || st != GF_OK || gf_mono_us() >= deadline)) {
            timed_out = timed_out || st == GF_OK;
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (st != GF_OK)
        return st;
    if (timed_out)
        return gf_err_set(err, GF_ERR_TIMEOUT, "%s took longer than %u s and was stopped", what,
                          (timeout_ms ? timeout_ms : GF_GW_DEFAULT_VALIDATE_TIMEOUT_MS) / 1000u);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != GF_WORKER_EXIT_OK) {
        char how[96];
        describe_exit(status, how, sizeof how);
        return gf_err_set(err, GF_ERR_INTERNAL, "%s (%s) %s without answering; the gateway is "
                          "unaffected (see the log above for its messages)", what, argv[0], how);
    }
    if (gf_buf_append(out, "", 1) != GF_OK)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    out->len--;
    return GF_OK;
}

/* The argv shared by both modes: program, mode, plugins. */
static size_t base_argv(const gf_oneshot_cfg *cfg, const char *mode, const char **argv,
                        size_t cap)
{
    size_t a = 0;
    argv[a++] = cfg->worker_path;
    argv[a++] = mode;
    static const char *const lv[] = {"error", "warn", "info", "debug", "trace"};
    int t = gf_log_threshold < 0 ? 0 : gf_log_threshold > 4 ? 4 : gf_log_threshold;
    argv[a++] = "--log-level";
    argv[a++] = lv[t];
    if (cfg->allow_native)
        argv[a++] = "--allow-native-functions";
    for (size_t i = 0; i < cfg->n_plugins && a + 3 < cap; i++) {
        argv[a++] = "--plugin";
        argv[a++] = cfg->plugins[i];
    }
    return a;
}

/* Run and read the answer: GF_OK with *doc when it says yes; its code and
 * message when it says no. */
static gf_status ask(const gf_oneshot_cfg *cfg, const char *const *argv, const char *what,
                     gf_json_doc **doc, gf_err *err)
{
    *doc = NULL;
    if (cfg->worker_path == NULL)
        return gf_err_set(err, GF_ERR_NOT_FOUND, "cannot find the gpufaas-worker program (set "
                          "GPUFAAS_WORKER to its path)");
    gf_buf out;
    gf_buf_init(&out);
    gf_status st = run_child(argv, cfg->timeout_ms, what, &out, err);
    if (st == GF_OK && gf_json_parse(out.data ? out.data : "", out.len, 0, doc, err) != GF_OK)
        st = gf_err_prefix(err, "%s: its answer is not JSON", what);
    gf_buf_deinit(&out);
    if (st != GF_OK)
        return st;
    const gf_json *root = gf_json_doc_root(*doc);
    const gf_json *ok = gf_json_get(root, "ok");
    if (ok == NULL || ok->type != GF_JSON_BOOL) {
        st = gf_err_set(err, GF_ERR_PROTOCOL, "%s: its answer has no \"ok\"", what);
    } else if (!ok->u.b) {
        const gf_json *code = gf_json_get(root, "code");
        const gf_json *msg = gf_json_get(root, "message");
        gf_status c = GF_ERR_INTERNAL;
        if (code != NULL && code->type == GF_JSON_NUMBER && code->u.num.is_int &&
            code->u.num.i > 0 && code->u.num.i < GF_STATUS_COUNT_)
            c = (gf_status)code->u.num.i;
        st = gf_err_set(err, c, "%s", msg != NULL && msg->type == GF_JSON_STRING ? msg->u.str.s
                                                                                 : gf_strerror(c));
    }
    if (st != GF_OK) {
        gf_json_doc_free(*doc);
        *doc = NULL;
    }
    return st;
}

/* ---- probe ------------------------------------------------------------------------- */

void gf_probe_deinit(gf_probe *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->n_plugins; i++) {
        free(p->plugin_kinds[i]);
        free(p->plugin_paths[i]);
    }
    free(p->plugin_kinds);
    free(p->plugin_paths);
    memset(p, 0, sizeof *p);
}

gf_status gf_oneshot_probe(const gf_oneshot_cfg *cfg, gf_probe *out, gf_err *err)
{
    memset(out, 0, sizeof *out);
    const char *argv[16 + 2 * GF_IPC_ONESHOT_MAX_PLUGINS];
    if (cfg->n_plugins > GF_IPC_ONESHOT_MAX_PLUGINS)
        return gf_err_set(err, GF_ERR_INVALID, "more than %d plugins",
                          GF_IPC_ONESHOT_MAX_PLUGINS);
    size_t a = base_argv(cfg, "--probe", argv, sizeof argv / sizeof argv[0]);
    argv[a] = NULL;
    gf_json_doc *doc;
    gf_status st = ask(cfg, argv, "the probe (gpufaas-worker --probe)", &doc, err);
    if (st != GF_OK)
        return st;
    const gf_json *root = gf_json_doc_root(doc);
    const gf_json *n = gf_json_get(root, "cuda_devices");
    const gf_json *kinds = gf_json_get(root, "kinds");
    if (n == NULL || n->type != GF_JSON_NUMBER || !n->u.num.is_int || n->u.num.i < 0 ||
        n->u.num.i > 1024 || kinds == NULL || kinds->type != GF_JSON_ARRAY) {
        st = gf_err_set(err, GF_ERR_PROTOCOL, "the probe's answer lacks cuda_devices or kinds");
        goto done;
    }
    out->cuda_devices = (int)n->u.num.i;
    out->plugin_kinds = calloc(cfg->n_plugins + 1, sizeof *out->plugin_kinds);
    out->plugin_paths = calloc(cfg->n_plugins + 1, sizeof *out->plugin_paths);
    if (out->plugin_kinds == NULL || out->plugin_paths == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* the plugins come after the built-ins, in the order they were given */
    for (size_t i = 0; i < kinds->u.arr.n; i++) {
        const gf_json *name = gf_json_get(kinds->u.arr.items[i], "name");
        const gf_json *path = gf_json_get(kinds->u.arr.items[i], "plugin");
        if (name == NULL || name->type != GF_JSON_STRING || path == NULL ||
            path->type != GF_JSON_STRING || !gf_function_name_valid(name->u.str.s)) {
            st = gf_err_set(err, GF_ERR_PROTOCOL, "the probe's answer has a malformed kind");
            goto done;
        }
        if (path->u.str.s[0] == '\0')
            continue;
        if (out->n_plugins == cfg->n_plugins) {
            st = gf_err_set(err, GF_ERR_PROTOCOL, "the probe reported more plugins than given");
            goto done;
        }
        out->plugin_kinds[out->n_plugins] = strdup(name->u.str.s);
        out->plugin_paths[out->n_plugins] = strdup(path->u.str.s);
        out->n_plugins++;
        if (out->plugin_kinds[out->n_plugins - 1] == NULL ||
            out->plugin_paths[out->n_plugins - 1] == NULL) {
            st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
done:
    gf_json_doc_free(doc);
    if (st != GF_OK)
        gf_probe_deinit(out);
    return st;
}

/* ---- validate ---------------------------------------------------------------------- */

void gf_validation_deinit(gf_validation *v)
{
    if (v == NULL)
        return;
    if (v->work_dir != NULL)
        gf_path_rmtree(v->work_dir);
    free(v->work_dir);
    free(v->manifest_json);
    free(v->weights);
    for (size_t i = 0; i < v->n_companions; i++) {
        free(v->companions[i]);
        free(v->companion_files[i]);
    }
    free(v->companions);
    free(v->companion_files);
    memset(v, 0, sizeof *v);
}

int gf_oneshot_clean(const char *dir)
{
    int removed = 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, ONESHOT_WORK_PREFIX, sizeof ONESHOT_WORK_PREFIX - 1) != 0)
            continue;
        char *p = gf_path_join(dir, e->d_name);
        if (p != NULL)
            gf_path_rmtree(p);
        free(p);
        removed++;
    }
    closedir(d);
    return removed;
}

/* Fill v from the child's "yes". */
static gf_status read_validation(const gf_json *root, const char *out_dir, gf_validation *v,
                                 gf_err *err)
{
    const gf_json *mf = gf_json_get(root, "manifest");
    const gf_json *w = gf_json_get(root, "weights");
    const gf_json *comp = gf_json_get(root, "companions");
    if (mf == NULL || mf->type != GF_JSON_OBJECT || w == NULL ||
        (w->type != GF_JSON_NULL && w->type != GF_JSON_STRING) || comp == NULL ||
        comp->type != GF_JSON_ARRAY || comp->u.arr.n > GF_IPC_ONESHOT_MAX_COMPANIONS)
        return gf_err_set(err, GF_ERR_PROTOCOL, "the validator's answer is malformed");
    gf_buf b;
    gf_buf_init(&b);
    if (gf_json_write(mf, &b) != GF_OK || (v->manifest_json = gf_buf_steal(&b, NULL)) == NULL) {
        gf_buf_deinit(&b);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    /* the names are fixed: the child only says whether they exist */
    if (w->type == GF_JSON_STRING) {
        struct stat sb;
        if (strcmp(w->u.str.s, GF_CONVERTED_WEIGHTS) != 0)
            return gf_err_set(err, GF_ERR_PROTOCOL, "the validator named weights '%.64s'",
                              w->u.str.s);
        if ((v->weights = gf_path_join(out_dir, GF_CONVERTED_WEIGHTS)) == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        if (lstat(v->weights, &sb) != 0 || !S_ISREG(sb.st_mode))
            return gf_err_set(err, GF_ERR_PROTOCOL, "the validator's converted weights are not "
                              "a regular file");
    }
    size_t n = comp->u.arr.n;
    v->companions = calloc(n + 1, sizeof *v->companions);
    v->companion_files = calloc(n + 1, sizeof *v->companion_files);
    if (v->companions == NULL || v->companion_files == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const gf_json *s = comp->u.arr.items[i];
        if (s->type != GF_JSON_STRING || !gf_companion_suffix_valid(s->u.str.s))
            return gf_err_set(err, GF_ERR_PROTOCOL, "the validator named a companion file "
                              "with a malformed suffix");
        char name[sizeof GF_CONVERTED_BASE + GF_COMPANION_SUFFIX_MAX + 2];
        snprintf(name, sizeof name, "%s.%s", GF_CONVERTED_BASE, s->u.str.s);
        v->companions[i] = strdup(s->u.str.s);
        v->companion_files[i] = gf_path_join(out_dir, name);
        v->n_companions = i + 1;
        if (v->companions[i] == NULL || v->companion_files[i] == NULL)
            return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        struct stat sb;
        if (lstat(v->companion_files[i], &sb) != 0 || !S_ISREG(sb.st_mode))
            return gf_err_set(err, GF_ERR_PROTOCOL, "the validator's companion file '%s' is not "
                              "a regular file", name);
    }
    return GF_OK;
}

gf_status gf_oneshot_validate(const gf_oneshot_cfg *cfg, const gf_fn_deploy_in *d,
                              const char *parent_dir, gf_validation *out, gf_err *err)
{
    memset(out, 0, sizeof *out);
    if (cfg->n_plugins > GF_IPC_ONESHOT_MAX_PLUGINS)
        return gf_err_set(err, GF_ERR_INVALID, "more than %d plugins",
                          GF_IPC_ONESHOT_MAX_PLUGINS);
    if (d->n_uploads < 1 || d->n_uploads > GF_MAX_UPLOADS)
        return gf_err_set(err, GF_ERR_INVALID, "a deploy brings 1 to %d files, not %zu",
                          GF_MAX_UPLOADS, d->n_uploads);
    gf_status st;
    char *mpath = NULL, *out_dir = NULL;
    gf_json_doc *doc = NULL;
    char tmpl[PATH_MAX];
    snprintf(tmpl, sizeof tmpl, "%s/" ONESHOT_WORK_PREFIX "XXXXXX", parent_dir);
    if (mkdtemp(tmpl) == NULL)
        return gf_err_set(err, GF_ERR_IO, "mkdtemp(%s): %s", tmpl, strerror(errno));
    if ((out->work_dir = strdup(tmpl)) == NULL) {
        rmdir(tmpl);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    mpath = gf_path_join(out->work_dir, "manifest.json");
    out_dir = gf_path_join(out->work_dir, "out");
    if (mpath == NULL || out_dir == NULL) {
        st = gf_err_set(err, GF_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (mkdir(out_dir, 0700) != 0) {
        st = gf_err_set(err, GF_ERR_IO, "mkdir(%s): %s", out_dir, strerror(errno));
        goto done;
    }
    if (d->manifest != NULL) {
        FILE *f = fopen(mpath, "wb");
        bool written = f != NULL && fwrite(d->manifest, 1, d->manifest_len, f) == d->manifest_len;
        if (f != NULL && fclose(f) != 0)
            written = false;
        if (!written) {
            st = gf_err_set(err, GF_ERR_IO, "writing %s: %s", mpath, strerror(errno));
            goto done;
        }
    }
    const char *argv[32 + 2 * (GF_IPC_ONESHOT_MAX_PLUGINS + GF_MAX_UPLOADS)];
    size_t a = base_argv(cfg, "--validate", argv,
                         sizeof argv / sizeof argv[0] - 9 - 2 * GF_MAX_UPLOADS);
    if (d->manifest != NULL) {
        argv[a++] = "--manifest";
        argv[a++] = mpath;
    }
    if (d->name != NULL) {
        argv[a++] = "--name";
        argv[a++] = d->name;
    }
    if (d->kind != NULL) {
        argv[a++] = "--kind";
        argv[a++] = d->kind;
    }
    for (size_t i = 0; i < d->n_uploads; i++) {
        argv[a++] = "--upload";
        argv[a++] = d->uploads[i];
    }
    argv[a++] = "--out-dir";
    argv[a++] = out_dir;
    argv[a] = NULL;
    st = ask(cfg, argv, "the validator (gpufaas-worker --validate)", &doc, err);
    if (st == GF_OK)
        st = read_validation(gf_json_doc_root(doc), out_dir, out, err);
done:
    gf_json_doc_free(doc);
    free(mpath);
    free(out_dir);
    if (st != GF_OK)
        gf_validation_deinit(out);
    return st;
}
