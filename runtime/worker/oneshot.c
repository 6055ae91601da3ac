/* gpufaas-worker's one-shot modes: --probe and --validate (runtime/ipc.h,
 * "One-shot modes"). The gateway runs them as short-lived children for the
 * work it must not do itself: loading plugins, asking the CUDA driver how
 * many devices there are, and running a kind's code on an upload. Whatever
 * that code does, it does here, in a process that answers and exits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/buf.h"
#include "core/log.h"
#include "functions/deploy.h"
#include "functions/runtime.h"
#include "ipc.h"
#include "worker/worker.h"


typedef struct {
    bool probe, validate, allow_native;
    const char *manifest, *name, *kind, *out_dir;
    const char *uploads[GF_MAX_UPLOADS];
    size_t n_uploads;
    const char *plugins[GF_IPC_ONESHOT_MAX_PLUGINS];
    size_t n_plugins;
    gf_log_level log_level;
} oneshot_args;

bool gf_worker_is_oneshot(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--probe") == 0 || strcmp(argv[i], "--validate") == 0)
            return true;
    return false;
}

static gf_status parse(int argc, char **argv, oneshot_args *a, gf_err *err)
{
    memset(a, 0, sizeof *a);
    a->log_level = GF_LOG_DEFAULT;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "--probe") == 0) {
            a->probe = true;
        } else if (strcmp(f, "--validate") == 0) {
            a->validate = true;
        } else if (strcmp(f, "--allow-native-functions") == 0) {
            a->allow_native = true;
        } else if (strcmp(f, "--manifest") == 0 || strcmp(f, "--upload") == 0 ||
                   strcmp(f, "--out-dir") == 0 || strcmp(f, "--plugin") == 0 ||
                   strcmp(f, "--log-level") == 0 || strcmp(f, "--name") == 0 ||
                   strcmp(f, "--kind") == 0) {
            if (i + 1 >= argc)
                return gf_err_set(err, GF_ERR_INVALID, "%s needs a value", f);
            const char *v = argv[++i];
            if (strcmp(f, "--manifest") == 0) {
                a->manifest = v;
            } else if (strcmp(f, "--name") == 0) {
                a->name = v;
            } else if (strcmp(f, "--kind") == 0) {
                a->kind = v;
            } else if (strcmp(f, "--upload") == 0) {
                if (a->n_uploads == GF_MAX_UPLOADS)
                    return gf_err_set(err, GF_ERR_INVALID, "more than %d --upload flags",
                                      GF_MAX_UPLOADS);
                a->uploads[a->n_uploads++] = v;
            } else if (strcmp(f, "--out-dir") == 0) {
                a->out_dir = v;
            } else if (strcmp(f, "--log-level") == 0) {
                if (gf_log_level_parse(v, &a->log_level) != 0)
                    return gf_err_set(err, GF_ERR_INVALID, "--log-level: '%s' is not error, warn, "
                                      "info, debug or trace", v);
            } else if (a->n_plugins == GF_IPC_ONESHOT_MAX_PLUGINS) {
                return gf_err_set(err, GF_ERR_INVALID, "more than %d --plugin flags",
                                  GF_IPC_ONESHOT_MAX_PLUGINS);
            } else {
                a->plugins[a->n_plugins++] = v;
            }
        } else {
            return gf_err_set(err, GF_ERR_INVALID, "unknown flag '%s' for --probe/--validate", f);
        }
    }
    if (a->probe == a->validate)
        return gf_err_set(err, GF_ERR_INVALID, "give exactly one of --probe and --validate");
    if (a->validate && (a->n_uploads == 0 || a->out_dir == NULL))
        return gf_err_set(err, GF_ERR_INVALID, "--validate needs --upload and --out-dir");
    return GF_OK;
}

/* Print the answer (one line) and return the exit code. */
static int answer(gf_buf *b)
{
    if (b->data == NULL || gf_buf_append(b, "\n", 1) != GF_OK) {
        fprintf(stderr, "gpufaas-worker: out of memory writing the answer\n");
        return GF_WORKER_EXIT_FAILURE;
    }
    size_t done = 0;
    while (done < b->len) {
        ssize_t n = write(STDOUT_FILENO, b->data + done, b->len - done);
        if (n <= 0) {
            perror("gpufaas-worker: writing the answer");
            return GF_WORKER_EXIT_FAILURE;
        }
        done += (size_t)n;
    }
    return GF_WORKER_EXIT_OK;
}

static int answer_no(gf_buf *b, const gf_err *e)
{
    gf_buf_reset(b);
    const char *msg = gf_err_msg(e);
    gf_buf_printf(b, "{\"ok\":false,\"code\":%d,\"message\":", (int)e->code);
    gf_buf_append_json_str(b, msg, strlen(msg));
    gf_buf_append_str(b, "}");
    return answer(b);
}

static gf_status load_plugins(const oneshot_args *a, gf_err *err)
{
    for (size_t i = 0; i < a->n_plugins; i++) {
        const gf_fn_kind *k;
        char *abs = realpath(a->plugins[i], NULL);
        gf_status st = gf_fn_plugin_load(abs != NULL ? abs : a->plugins[i], a->allow_native, &k,
                                         err);
        free(abs);
        if (st != GF_OK)
            return st;
    }
    return GF_OK;
}

static int probe(gf_buf *b)
{
    gf_buf_printf(b, "{\"ok\":true,\"cuda_devices\":%d,\"kinds\":[",
                  gf_backend_cuda_device_count());
    for (size_t i = 0; i < gf_fn_kind_count(); i++) {
        const gf_fn_kind *k = gf_fn_kind_at(i);
        const char *path = gf_fn_kind_path(k);
        gf_buf_printf(b, "%s{\"name\":", i ? "," : "");
        gf_buf_append_json_str(b, gf_fn_kind_name(k), strlen(gf_fn_kind_name(k)));
        gf_buf_append_str(b, ",\"plugin\":");
        gf_buf_append_json_str(b, path != NULL ? path : "", path != NULL ? strlen(path) : 0);
        gf_buf_append_str(b, "}");
    }
    gf_buf_append_str(b, "]}");
    return answer(b);
}

static int validate(const oneshot_args *a, gf_buf *b)
{
    gf_err e;
    gf_err_clear(&e);
    char *text = NULL;
    size_t len = 0;
    if (a->manifest != NULL) {
        FILE *f = fopen(a->manifest, "rb");
        text = malloc(GF_MANIFEST_MAX_BYTES + 1);
        len = f != NULL && text != NULL ? fread(text, 1, GF_MANIFEST_MAX_BYTES + 1, f) : 0;
        bool read_ok = f != NULL && text != NULL && !ferror(f);
        if (f != NULL)
            fclose(f);
        if (!read_ok) {
            free(text);
            gf_err_set(&e, GF_ERR_IO, "cannot read the manifest %s", a->manifest);
            return answer_no(b, &e);
        }
    }
    gf_fn_deploy_in in = {text, len, a->name, a->kind, a->uploads, a->n_uploads};
    gf_fn_deployed d;
    gf_status st = gf_fn_deploy_check(&in, a->out_dir, &d, &e);
    free(text);
    if (st != GF_OK)
        return answer_no(b, &e);
    gf_buf_append_str(b, "{\"ok\":true,\"manifest\":");
    st = gf_manifest_to_json(d.mf, b);
    gf_buf_printf(b, ",\"weights\":%s,\"companions\":[",
                  d.converted ? "\"" GF_CONVERTED_WEIGHTS "\"" : "null");
    for (size_t i = 0; i < d.n_companions; i++) {
        gf_buf_append_str(b, i ? "," : "");
        gf_buf_append_json_str(b, d.companions[i], strlen(d.companions[i]));
    }
    gf_buf_append_str(b, "]}");
    gf_fn_deployed_deinit(&d);
    if (st != GF_OK) {
        gf_err_set(&e, st, "out of memory writing the answer");
        return answer_no(b, &e);
    }
    return answer(b);
}

int gf_worker_oneshot_main(int argc, char **argv)
{
    oneshot_args a;
    gf_err e;
    gf_err_clear(&e);
    if (parse(argc, argv, &a, &e) != GF_OK) {
        fprintf(stderr, "gpufaas-worker: %s (see --help)\n", gf_err_msg(&e));
        return GF_WORKER_EXIT_FATAL;
    }
    gf_log_init(a.probe ? "probe" : "validate", a.log_level);
    gf_buf b;
    gf_buf_init(&b);
    int code;
    if (load_plugins(&a, &e) != GF_OK)
        code = answer_no(&b, &e);
    else
        code = a.probe ? probe(&b) : validate(&a, &b);
    gf_buf_deinit(&b);
    return code;
}
