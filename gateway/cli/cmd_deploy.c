/* gpufaas deploy NAME --kind K --weights FILE [--manifest FILE | --input SPEC...
 * --output SPEC...] — upload a function (POST /v1/functions, admin).
 * gpufaas deploy NAME --onnx MODEL.onnx [--onnx-data FILE] — an ONNX model (the
 * part 'model'): the server derives the manifest; flags override its fields.
 *
 * The manifest comes from --manifest, or is built from the flags; flags given
 * next to --manifest override its fields. The weights are streamed from the
 * file by libcurl's mime API (never read into memory), with a progress bar on
 * a terminal (bytes, rate, ETA) or a few plain lines otherwise, on stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/dtype.h"
#include "gateway/cli/cli.h"
#include "gateway/cli/client.h"
#include "gateway/cli/flags.h"

#define MAX_SPECS 64   /* the manifest's limit on inputs and outputs */
#define MAX_IGNORE 256 /* the manifest's limit on ignore_weights */

enum {
    D_KIND, D_WEIGHTS, D_ONNX, D_ONNX_DATA, D_MANIFEST, D_INPUT, D_OUTPUT, D_MAX_BATCH, D_MAX_DELAY,
    D_SLO, D_CONFIG, D_IGNORE, D_ALLOW_IC, D_QUIET, D_COUNT_
};

static void deploy_usage(FILE *out);

static const gf_cli_flag deploy_flags[D_COUNT_] = {
    [D_KIND] = {"kind", 0, "KIND", 0, "the function kind: mlp, resnet, bert, or a plugin's"},
    [D_WEIGHTS] = {"weights", 0, "FILE", 0, "the safetensors file"},
    [D_ONNX] = {"onnx", 0, "FILE", 0,
                "an ONNX model (torch.onnx.export, Hugging Face, skl2onnx)\ninstead of --weights; "
                "kind onnx, the manifest optional"},
    [D_ONNX_DATA] = {"onnx-data", 0, "FILE", 0,
                     "the model's external data (model.onnx.data, > 2 GB models)"},
    [D_MANIFEST] = {"manifest", 0, "FILE", 0,
                    "a manifest (JSON); the options below override its fields"},
    [D_INPUT] = {"input", 0, "SPEC", MAX_SPECS,
                 "an input as NAME:DATATYPE:DIMS, e.g. x:FP32:-1,64\n(-1 = any size; a leading "
                 "-1 is the batch); repeat per input"},
    [D_OUTPUT] = {"output", 0, "SPEC", MAX_SPECS, "an output, the same way"},
    [D_MAX_BATCH] = {"max-batch", 0, "N", 0,
                     "max_batch_size: the largest batch the server forms"},
    [D_MAX_DELAY] = {"max-delay-us", 0, "N", 0,
                     "max_queue_delay_us: how long a batch may wait to fill"},
    [D_SLO] = {"slo-ms", 0, "MS", 0, "slo_ms: the latency target the router works to"},
    [D_CONFIG] = {"config", 0, "JSON", 0, "the kind's config object, e.g. '{\"softmax\": true}'"},
    [D_IGNORE] = {"ignore-weights", 0, "NAME", MAX_IGNORE,
                  "a weights tensor to deploy without (ignore_weights;\na prefix ends in *, e.g. "
                  "'cls.*'); repeat per tensor"},
    [D_ALLOW_IC] = {"allow-interface-change", 0, NULL, 0,
                    "deploy even when the inputs or outputs change\n(?interface_change=allow)"},
    [D_QUIET] = {"quiet", 'q', NULL, 0, "no progress output"},
};

static const gf_cli_cmd deploy_cmd = {"deploy", deploy_flags, D_COUNT_, deploy_usage};

static void deploy_usage(FILE *out)
{
    fprintf(out,
            "usage: gpufaas deploy NAME --kind KIND --weights FILE.safetensors\n"
            "                      [--manifest FILE.json | --input SPEC... --output SPEC...]\n"
            "                      [options]\n"
            "       gpufaas deploy NAME --onnx MODEL.onnx [--onnx-data FILE] [options]\n\n"
            "Upload a function: its weights (a safetensors file, streamed) and its manifest,\n"
            "or an ONNX model, whose inputs and outputs the server reads from the graph.\n"
            "The server validates both, stores them as a new version of NAME (the next\n"
            "number, unless the manifest names one) and makes it current. Uploading what a\n"
            "version already is (the same weights and manifest) makes no new version: that\n"
            "one is made current. A version that would change the inputs or outputs clients\n"
            "of the current one see is refused unless --allow-interface-change. An admin\n"
            "call. Prints the version and how to invoke it.\n\n"
            "options:\n");
    gf_cli_flags_usage(out, &deploy_cmd);
    fputc('\n', out);
    gf_cli_common_usage(out);
}

/* ---- the manifest ---------------------------------------------------------------------- */

/* "x:FP32:-1,64" -> {"name": "x", "datatype": "FP32", "shape": [-1, 64]}; NULL
 * after reporting a malformed spec. The name may itself contain ':'. */
static json_t *parse_spec(const gf_cli_client *c, const char *opt, const char *spec)
{
    const char *dims = strrchr(spec, ':');
    const char *dt = NULL;
    if (dims != NULL)
        for (const char *p = dims - 1; p >= spec; p--)
            if (*p == ':') {
                dt = p;
                break;
            }
    if (dims == NULL || dt == NULL || dt == spec || dims[1] == '\0') {
        gf_cli_errorf(c, "--%s '%s': expected NAME:DATATYPE:DIMS, e.g. x:FP32:-1,64", opt, spec);
        return NULL;
    }
    char dtype[16];
    size_t dl = (size_t)(dims - dt - 1);
    if (dl == 0 || dl >= sizeof dtype) {
        gf_cli_errorf(c, "--%s '%s': bad datatype", opt, spec);
        return NULL;
    }
    for (size_t i = 0; i < dl; i++)
        dtype[i] = (char)(dt[1 + i] >= 'a' && dt[1 + i] <= 'z' ? dt[1 + i] - 32 : dt[1 + i]);
    dtype[dl] = '\0';
    gf_dtype d = gf_dtype_from_kserve_name(dtype, dl);
    if (d == GF_DT_INVALID)
        d = gf_dtype_from_st_name(dtype, dl);
    if (d == GF_DT_INVALID) {
        gf_cli_errorf(c,
                      "--%s '%s': unknown datatype '%s' (BOOL, UINT8..UINT64, INT8..INT64, "
                      "FP16, BF16, FP32, FP64)",
                      opt, spec, dtype);
        return NULL;
    }
    json_t *shape = json_array();
    const char *p = dims + 1;
    while (shape != NULL) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno != 0 || (v < 1 && v != -1) || (*end != ',' && *end != '\0')) {
            gf_cli_errorf(c,
                          "--%s '%s': dimensions are positive integers or -1, separated by "
                          "','",
                          opt, spec);
            json_decref(shape);
            return NULL;
        }
        json_array_append_new(shape, json_integer(v));
        if (*end == '\0')
            break;
        p = end + 1;
    }
    json_t *o = json_pack("{s:s%, s:s, s:o}", "name", spec, (size_t)(dt - spec), "datatype",
                          gf_dtype_kserve_name(d), "shape", shape);
    if (o == NULL)
        gf_cli_errorf(c, "out of memory");
    return o;
}

typedef struct deploy_opts {
    const char *name, *kind, *weights, *manifest, *config;
    const char *onnx, *onnx_data; /* --onnx, --onnx-data: a model upload */
    const char *inputs[MAX_SPECS], *outputs[MAX_SPECS];
    int n_inputs, n_outputs;
    const char *ignore[MAX_IGNORE]; /* --ignore-weights, replacing the manifest's list */
    int n_ignore;
    long long max_batch, max_delay_us; /* -1 = not given */
    double slo_ms;                     /* < 0 = not given */
    bool quiet;
    bool allow_interface_change; /* --allow-interface-change */
} deploy_opts;

/* The manifest as JSON text (malloc'd), or NULL after reporting why. */
static char *build_manifest(const gf_cli_client *c, const deploy_opts *o)
{
    json_t *m = NULL;
    json_error_t je;
    if (o->manifest != NULL) {
        m = json_load_file(o->manifest, JSON_REJECT_DUPLICATES, &je);
        if (m == NULL) {
            gf_cli_errorf(c, "%s: %s (line %d, column %d)", o->manifest, je.text, je.line,
                          je.column);
            return NULL;
        }
        if (!json_is_object(m)) {
            gf_cli_errorf(c, "%s: a manifest is a JSON object", o->manifest);
            json_decref(m);
            return NULL;
        }
        const char *mname = gf_cli_json_str(m, "name", NULL);
        if (mname != NULL && strcmp(mname, o->name) != 0)
            fprintf(stderr, "note: %s names the function '%s'; deploying it as '%s'\n", o->manifest,
                    mname, o->name);
    } else {
        if (o->onnx == NULL && (o->kind == NULL || o->n_inputs == 0 || o->n_outputs == 0)) {
            gf_cli_errorf(c, "without --manifest, give --kind, --input and --output (e.g. --kind "
                             "mlp --input x:FP32:-1,64 --output y:FP32:-1,10)");
            return NULL;
        }
        m = json_object();
        if (m == NULL)
            goto oom;
    }
    if (json_object_set_new(m, "name", json_string(o->name)) != 0)
        goto oom;
    if (o->kind != NULL && json_object_set_new(m, "kind", json_string(o->kind)) != 0)
        goto oom;
    for (int pass = 0; pass < 2; pass++) {
        const char *const *specs = pass == 0 ? o->inputs : o->outputs;
        int n = pass == 0 ? o->n_inputs : o->n_outputs;
        if (n == 0)
            continue;
        json_t *arr = json_array();
        if (arr == NULL || json_object_set_new(m, pass == 0 ? "inputs" : "outputs", arr) != 0)
            goto oom;
        for (int i = 0; i < n; i++) {
            json_t *t = parse_spec(c, pass == 0 ? "input" : "output", specs[i]);
            if (t == NULL) {
                json_decref(m);
                return NULL;
            }
            json_array_append_new(arr, t);
        }
    }
    if (o->max_batch >= 0 &&
        json_object_set_new(m, "max_batch_size", json_integer(o->max_batch)) != 0)
        goto oom;
    if (o->max_delay_us >= 0 &&
        json_object_set_new(m, "max_queue_delay_us", json_integer(o->max_delay_us)) != 0)
        goto oom;
    if (o->slo_ms >= 0 && json_object_set_new(m, "slo_ms", json_real(o->slo_ms)) != 0)
        goto oom;
    if (o->n_ignore > 0) {
        json_t *arr = json_array();
        if (arr == NULL || json_object_set_new(m, "ignore_weights", arr) != 0)
            goto oom;
        for (int i = 0; i < o->n_ignore; i++)
            if (json_array_append_new(arr, json_string(o->ignore[i])) != 0)
                goto oom;
    }
    if (o->config != NULL) {
        json_t *cfg = json_loads(o->config, JSON_REJECT_DUPLICATES, &je);
        if (cfg == NULL || !json_is_object(cfg)) {
            if (cfg == NULL)
                gf_cli_errorf(c, "--config: %s (column %d)", je.text, je.column);
            else
                gf_cli_errorf(c, "--config: the kind's config is a JSON object");
            json_decref(cfg);
            json_decref(m);
            return NULL;
        }
        if (json_object_set_new(m, "config", cfg) != 0)
            goto oom;
    }
    char *text = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    if (text == NULL)
        gf_cli_errorf(c, "out of memory");
    return text;
oom:
    json_decref(m);
    gf_cli_errorf(c, "out of memory");
    return NULL;
}

/* ---- progress --------------------------------------------------------------------------- */

typedef struct progress {
    bool tty, quiet;
    double t0, last; /* seconds, monotonic */
    bool finished;   /* the 100% line was written */
} progress;

static void fmt_eta(double s, char *buf, size_t cap)
{
    if (!(s >= 0) || s > 359999)
        snprintf(buf, cap, "--:--");
    else if (s >= 3600)
        snprintf(buf, cap, "%d:%02d:%02d", (int)s / 3600, (int)s / 60 % 60, (int)s % 60);
    else
        snprintf(buf, cap, "%d:%02d", (int)s / 60, (int)s % 60);
}

static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal;
    (void)dlnow;
    progress *p = arg;
    if (p->quiet || p->finished || ultotal <= 0)
        return 0;
    double t = gf_mono_s(), el = t - p->t0;
    bool done = ulnow >= ultotal;
    if (!done && t - p->last < (p->tty ? 0.1 : 2.0))
        return 0;
    p->last = t;
    double rate = el > 0 ? (double)ulnow / el : 0;
    char now[32], total[32], rs[32], eta[16];
    gf_cli_fmt_size((uint64_t)ulnow, now, sizeof now);
    gf_cli_fmt_size((uint64_t)ultotal, total, sizeof total);
    gf_cli_fmt_size((uint64_t)rate, rs, sizeof rs);
    fmt_eta(rate > 0 ? (double)(ultotal - ulnow) / rate : -1, eta, sizeof eta);
    int pct = (int)((double)ulnow * 100.0 / (double)ultotal);
    if (p->tty) {
        struct winsize ws;
        int cols = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
        int bar = cols - 60;
        bar = bar > 40 ? 40 : bar;
        char b[48];
        int fill = bar > 0 ? (int)((double)bar * (double)ulnow / (double)ultotal) : 0;
        for (int i = 0; i < bar; i++)
            b[i] = i < fill ? '#' : '-';
        b[bar > 0 ? bar : 0] = '\0';
        fprintf(stderr, "\r%3d%% %s%s%s %s / %s  %s/s  ETA %s\033[K", pct, bar > 0 ? "[" : "", b,
                bar > 0 ? "]" : "", now, total, rs, eta);
        if (done)
            fprintf(stderr, "\n");
    } else if (done) {
        fprintf(stderr, "uploaded %s in %.1f s (%s/s)\n", total, el, rs);
    } else {
        fprintf(stderr, "uploading: %s / %s (%d%%), %s/s, ETA %s\n", now, total, pct, rs, eta);
    }
    p->finished = done;
    return 0;
}

/* ---- the command ------------------------------------------------------------------------- */

/* The size of a file to upload, or -1 after reporting why it cannot be. */
static long long upload_size(const gf_cli_client *c, const char *what, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0) {
        gf_cli_errorf(c, "cannot open the %s %s: %s", what, path, strerror(errno));
        return -1;
    }
    bool ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode);
    close(fd);
    if (!ok) {
        gf_cli_errorf(c, "the %s %s is not a regular file", what, path);
        return -1;
    }
    return (long long)sb.st_size;
}

/* A file part of the upload, streamed from path by libcurl. */
static bool add_file_part(curl_mime *mime, const char *name, const char *path)
{
    curl_mimepart *p = curl_mime_addpart(mime);
    return p != NULL && curl_mime_name(p, name) == CURLE_OK &&
           curl_mime_filedata(p, path) == CURLE_OK &&
           curl_mime_type(p, "application/octet-stream") == CURLE_OK;
}

static int deploy_run(gf_cli_client *c, const deploy_opts *o)
{
    const char *file = o->onnx != NULL ? o->onnx : o->weights;
    long long size = upload_size(c, o->onnx != NULL ? "model" : "weights", file);
    long long dsize = o->onnx_data != NULL ? upload_size(c, "model data", o->onnx_data) : 0;
    if (size < 0 || dsize < 0)
        return 1;
    char *manifest = build_manifest(c, o);
    if (manifest == NULL)
        return 1;
    gf_cli_resp r;
    gf_cli_resp_init(&r);
    int rc = 1;
    curl_mime *mime = NULL;
    CURL *e = gf_cli_prepare(c, "POST",
                             o->allow_interface_change ? "/v1/functions?interface_change=allow"
                                                       : "/v1/functions",
                             &r);
    if (e == NULL)
        goto out;
    mime = curl_mime_init(e);
    curl_mimepart *pm = mime != NULL ? curl_mime_addpart(mime) : NULL;
    if (pm == NULL || curl_mime_name(pm, "manifest") != CURLE_OK ||
        curl_mime_data(pm, manifest, CURL_ZERO_TERMINATED) != CURLE_OK ||
        curl_mime_type(pm, "application/json") != CURLE_OK ||
        !add_file_part(mime, o->onnx != NULL ? "model" : "weights", file) ||
        (o->onnx_data != NULL && !add_file_part(mime, "model_data", o->onnx_data))) {
        gf_cli_errorf(c, "cannot build the upload of %s", file);
        goto out;
    }
    curl_easy_setopt(e, CURLOPT_MIMEPOST, mime);
    progress p = {
        .tty = isatty(STDERR_FILENO) == 1,
        .quiet = o->quiet,
        .t0 = gf_mono_s(),
    };
    p.last = p.t0;
    if (!o->quiet && !p.tty) {
        char size_s[32];
        fprintf(stderr, "uploading %s (%s) to %s\n", file,
                gf_cli_fmt_size((uint64_t)(size + dsize), size_s, sizeof size_s), c->server);
    }
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, &p);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    int st = gf_cli_perform(c, NULL, &r);
    if (p.tty && !p.quiet && !p.finished)
        fprintf(stderr, "\n"); /* end the bar's line */
    if (st != 0 || gf_cli_resp_ok(c, &r) != 0)
        goto out;
    json_t *j = gf_cli_resp_json(c, &r, "POST", "/v1/functions");
    if (j == NULL)
        goto out;
    if (c->json) {
        rc = gf_cli_print_json(c, j);
    } else {
        char stored[32];
        gf_cli_fmt_size((uint64_t)gf_cli_json_int(j, "bytes", 0), stored, sizeof stored);
        if (json_is_false(json_object_get(j, "created")))
            printf("%s version %lld already has these weights and this manifest: no new "
                   "version; it is current (%s, %s, sha256 %.12s)\n",
                   gf_cli_json_str(j, "name", o->name), gf_cli_json_int(j, "version", 0),
                   gf_cli_json_str(j, "kind", "?"), stored, gf_cli_json_str(j, "sha256", "?"));
        else
            printf("deployed %s version %lld (%s, %s, sha256 %.12s)\n",
                   gf_cli_json_str(j, "name", o->name), gf_cli_json_int(j, "version", 0),
                   gf_cli_json_str(j, "kind", "?"), stored, gf_cli_json_str(j, "sha256", "?"));
        const json_t *ins = json_object_get(j, "inputs");
        for (size_t i = 0; i < json_array_size(ins); i++) {
            const json_t *t = json_array_get(ins, i);
            char shape[128];
            printf("%-10s %s %s %s\n", i == 0 ? "inputs:" : "", gf_cli_json_str(t, "name", "?"),
                   gf_cli_json_str(t, "datatype", "?"),
                   gf_cli_fmt_shape(json_object_get(t, "shape"), shape, sizeof shape));
        }
        printf("invoke:    gpufaas invoke %s --data '[...]'  (or --file input.json, --npy x.npy)\n",
               o->name);
        printf("           POST %s%s\n", c->server, gf_cli_json_str(j, "invoke", ""));
        printf("           POST %s%s\n", c->server, gf_cli_json_str(j, "v2", ""));
        rc = 0;
    }
    json_decref(j);
out:
    curl_mime_free(mime); /* after the transfer: libcurl reads it while sending */
    gf_cli_resp_deinit(&r);
    free(manifest);
    return rc;
}

int gf_cmd_deploy(int argc, char **argv)
{
    if (gf_cli_wants_help(argc, argv)) {
        deploy_usage(stdout);
        return 0;
    }
    gf_cli_client c;
    gf_cli_client_init(&c, "deploy");
    deploy_opts o = {.max_batch = -1, .max_delay_us = -1, .slo_ms = -1};
    gf_cli_val val[D_COUNT_];
    const char *pos[1];
    int n_pos;
    int rc = gf_cli_parse(&deploy_cmd, &c, val, argc, argv, pos, 1, &n_pos);
    if (rc != 0)
        goto out;
    rc = 2;
    o.name = n_pos > 0 ? pos[0] : NULL;
    o.kind = val[D_KIND].v;
    o.weights = val[D_WEIGHTS].v;
    o.onnx = val[D_ONNX].v;
    o.onnx_data = val[D_ONNX_DATA].v;
    o.manifest = val[D_MANIFEST].v;
    o.config = val[D_CONFIG].v;
    o.quiet = val[D_QUIET].n > 0;
    o.n_inputs = val[D_INPUT].n;
    o.n_outputs = val[D_OUTPUT].n;
    o.n_ignore = val[D_IGNORE].n;
    memcpy(o.inputs, val[D_INPUT].all, (size_t)o.n_inputs * sizeof o.inputs[0]);
    memcpy(o.outputs, val[D_OUTPUT].all, (size_t)o.n_outputs * sizeof o.outputs[0]);
    memcpy(o.ignore, val[D_IGNORE].all, (size_t)o.n_ignore * sizeof o.ignore[0]);
    if (!gf_cli_flag_int(&deploy_cmd, &c, D_MAX_BATCH, val, 1, 65536, NULL, &o.max_batch) ||
        !gf_cli_flag_int(&deploy_cmd, &c, D_MAX_DELAY, val, 0, 10000000, NULL,
                         &o.max_delay_us) ||
        !gf_cli_flag_num(&deploy_cmd, &c, D_SLO, val, 0, true, 1e12,
                         "a positive number of milliseconds", &o.slo_ms))
        goto out;
    o.allow_interface_change = val[D_ALLOW_IC].n > 0;
    if (o.name == NULL || (o.weights == NULL) == (o.onnx == NULL)) {
        gf_cli_errorf(&c, "%s", o.name == NULL ? "give the function's NAME"
                                : o.onnx == NULL ? "give --weights FILE (or --onnx MODEL.onnx)"
                                                 : "give --weights or --onnx, not both");
        deploy_usage(stderr);
        goto out;
    }
    if (o.onnx_data != NULL && o.onnx == NULL) {
        gf_cli_errorf(&c, "--onnx-data goes with --onnx");
        goto out;
    }
    if (o.onnx != NULL && o.kind != NULL && strcmp(o.kind, "onnx") != 0) {
        gf_cli_errorf(&c, "--onnx deploys kind onnx, not '%s'", o.kind);
        goto out;
    }
    rc = 1;
    if (!gf_cli_name_ok(&c, o.name))
        goto out;
    rc = deploy_run(&c, &o);
out:
    gf_cli_client_deinit(&c);
    return rc;
}
