/* Tests for the gpufaas command line's client subcommands — deploy, invoke,
 * ls, rm, ps, load, unload, top — run as a user runs them, against a real
 * `gpufaas serve` on a free loopback port (two cpu workers with small memory
 * budgets, an admin token, a temporary state directory), checking what they
 * print and their exit status. `top`'s tests, in a pseudo-terminal, are in
 * test_cli_top.c (the same executable and server). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/safetensors.h"
#include "cli_client_lib.h"
#include "httpharness.h"
#include "testutil.h"

#define TOKEN "cli-test-token"

static gf_hh_server srv;
static char *dir;     /* temporary directory: state, log, model files */
static char *weights; /* dir/id4.safetensors: y = x through a 4x4 identity */

/* ---- the server (started once, in Check's parent process) -------------------------- */

static void die(const char *what)
{
    fprintf(stderr, "test_cli_client: %s\n", what);
    gf_hh_server_dump_log(&srv, 4000);
    exit(1);
}

static void server_up(void)
{
    dir = gf_test_tmpdir();
    gf_hh_server_init(&srv, dir);
    /* an identity: mlp with one Linear layer, weight I, bias 0, no activation */
    weights = gf_test_path(dir, "id4.safetensors");
    float w[16] = {0}, b[4] = {0};
    for (int i = 0; i < 4; i++)
        w[i * 4 + i] = 1;
    int64_t ws[2] = {4, 4}, bs[1] = {4};
    gf_st_wtensor ts[2] = {{"0.weight", GF_DT_F32, 2, ws, w}, {"0.bias", GF_DT_F32, 1, bs, b}};
    gf_err e;
    if (gf_st_write(weights, ts, 2, NULL, 0, &e) != GF_OK)
        die(e.msg);
    const char *args[] = {
        "--devices", "cpu:2",    "--device-memory",   "4M", "--host-memory", "16M", "--admin-token",
        TOKEN,       "--worker", getenv("GF_WORKER"), NULL};
    if (args[9] == NULL)
        die("GF_WORKER is not set (meson sets it)");
    char msg[256];
    if (gf_hh_server_start(&srv, getenv("GF_GPUFAAS"), args, 60, msg, sizeof msg) != 0)
        die(msg);
}

static void server_down(void)
{
    int st = gf_hh_server_stop(&srv, 30);
    if (st != 0)
        gf_hh_server_dump_log(&srv, 4000);
    gf_test_rmtree(dir);
    free(weights);
    if (st != 0) {
        fprintf(stderr, "gpufaas serve exited with %d after SIGTERM\n", st);
        exit(1);
    }
}

const char *cc_server_url(void) { return srv.url; }

/* ---- running the CLI --------------------------------------------------------------- */

/* Run gpufaas with the arguments (NULL-terminated); with `server`, add
 * --server URL --token TOKEN. Captures stdout and stderr (caller frees). */
static int vrun(bool server, char **out, char **err, va_list ap)
{
    char *argv[48];
    int a = 0;
    argv[a++] = (char *)gf_test_prog("GF_GPUFAAS");
    const char *s;
    while ((s = va_arg(ap, const char *)) != NULL) {
        ck_assert_int_lt(a, 42);
        argv[a++] = (char *)s;
    }
    if (server) {
        argv[a++] = "--server";
        argv[a++] = srv.url;
        argv[a++] = "--token";
        argv[a++] = TOKEN;
    }
    argv[a] = NULL;
    return gf_test_run_cmd(argv, out, err, 60);
}

/* gpufaas ARGS... --server URL --token TOKEN */
int cc_cli(char **out, char **err, ...)
{
    va_list ap;
    va_start(ap, err);
    int rc = vrun(true, out, err, ap);
    va_end(ap);
    return rc;
}

/* gpufaas ARGS... as given */
static int cli_raw(char **out, char **err, ...)
{
    va_list ap;
    va_start(ap, err);
    int rc = vrun(false, out, err, ap);
    va_end(ap);
    return rc;
}

void cc_freeboth(char **out, char **err)
{
    free(*out);
    free(*err);
    *out = *err = NULL;
}

/* The last 3000 bytes of s: what fits in a Check message. */
const char *cc_tail3k(const char *s)
{
    size_t n = strlen(s);
    return n > 3000 ? s + n - 3000 : s;
}

/* Deploy the identity as name (version 1 on a fresh name). */
void cc_deploy_identity(const char *name)
{
    char *out, *err;
    int rc = cc_cli(&out, &err, "deploy", name, "--kind", "mlp", "--weights", weights, "--input",
                 "x:FP32:-1,4", "--output", "y:FP32:-1,4", "--max-batch", "4", "--config",
                 "{\"activations\": [\"identity\"]}", "-q", NULL);
    ck_assert_msg(rc == 0, "deploy %s: %d\n%s%s", name, rc, out, err);
    cc_freeboth(&out, &err);
}

static char *write_text(const char *name, const char *text)
{
    char *p = gf_test_path(dir, name);
    gf_test_write_file(p, text, strlen(text));
    return p;
}

/* An .npy file (version 1) of dict's array with n bytes of data. */
static char *write_npy(const char *name, const char *dict, const void *data, size_t n)
{
    gf_buf b;
    gf_buf_init(&b);
    size_t hl = strlen(dict) + 1;
    while ((10 + hl) % 64 != 0)
        hl++;
    unsigned char pre[10] = {
        0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)hl, (unsigned char)(hl >> 8)};
    gf_buf_append(&b, pre, 10);
    gf_buf_append_str(&b, dict);
    for (size_t k = strlen(dict); k + 1 < hl; k++)
        gf_buf_append(&b, " ", 1);
    gf_buf_append(&b, "\n", 1);
    gf_buf_append(&b, data, n);
    char *p = gf_test_path(dir, name);
    gf_test_write_file(p, b.data, b.len);
    gf_buf_deinit(&b);
    return p;
}

/* ---- help and usage ---------------------------------------------------------------------- */

START_TEST(test_help_and_usage)
{
    static const char *const cmds[] = {"deploy", "invoke", "ls",     "rm",
                                       "ps",     "load",   "unload", "top"};
    char *out, *err;
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        ck_assert_int_eq(cli_raw(&out, &err, cmds[i], "--help", NULL), 0);
        char want[64];
        snprintf(want, sizeof want, "usage: gpufaas %s", cmds[i]);
        HAS(out, want);
        HAS(out, "--server URL");
        cc_freeboth(&out, &err);
    }
    ck_assert_int_eq(cli_raw(&out, &err, "--help", NULL), 0);
    HAS(out, "deploy");
    HAS(out, "top");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cli_raw(&out, &err, "ls", "--bogus", NULL), 2);
    HAS(err, "gpufaas ls: unknown option '--bogus'");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cli_raw(&out, &err, "deploy", "x", NULL), 2);
    HAS(err, "give --weights FILE");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cli_raw(&out, &err, "invoke", "x", NULL), 2);
    HAS(err, "give one of --data, --file or --npy");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cli_raw(&out, &err, "invoke", "x", "--data", "[1]", "--file", "f", NULL), 2);
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cli_raw(&out, &err, "load", NULL), 2);
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cli_raw(&out, &err, "load", "x", "one", NULL), 2);
    HAS(err, "WORKER must be a worker id");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cli_raw(&out, &err, "top", "--interval", "0", NULL), 2);
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cli_raw(&out, &err, "ps", "--server", NULL), 2);
    HAS(err, "--server needs a value");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cli_raw(&out, &err, "ps", "--server", "ftp://x", NULL), 2);
    HAS(err, "not an http:// or https:// URL");
    cc_freeboth(&out, &err);
}
END_TEST

/* ---- an unreachable server ----------------------------------------------------------- */

/* A loopback port nobody listens on (bound, then released). */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

START_TEST(test_unreachable_server)
{
    char url[64], want[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", closed_port());
    snprintf(want, sizeof want, "cannot reach the server at %s: connection refused", url);
    const char *const cmds[][12] = {
        {"ls", NULL},
        {"ps", NULL},
        {"rm", "f", NULL},
        {"load", "f", "0", NULL},
        {"unload", "f", NULL},
        {"invoke", "f", "--data", "[1, 2, 3, 4]", NULL},
        {"top", "--once", NULL},
        {"deploy", "f", "--kind", "mlp", "--weights", weights, "--input", "x:FP32:-1,4", "--output",
         "y:FP32:-1,4", "-q", NULL},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char *argv[16];
        int a = 0;
        argv[a++] = (char *)gf_test_prog("GF_GPUFAAS");
        for (int k = 0; cmds[i][k] != NULL; k++)
            argv[a++] = (char *)cmds[i][k];
        argv[a++] = "--server";
        argv[a++] = url;
        argv[a] = NULL;
        char *out, *err;
        ck_assert_int_eq(gf_test_run_cmd(argv, &out, &err, 30), 1);
        HAS(err, want);
        HASNT(err, "curl");
        cc_freeboth(&out, &err);
    }
    /* the server from the environment, as host:port */
    setenv("GPUFAAS_SERVER", url + strlen("http://"), 1);
    char *out, *err;
    ck_assert_int_eq(cli_raw(&out, &err, "ls", NULL), 1);
    HAS(err, want);
    cc_freeboth(&out, &err);
    unsetenv("GPUFAAS_SERVER");
}
END_TEST

/* ---- deploy and invoke --------------------------------------------------------------- */

START_TEST(test_deploy_and_invoke)
{
    char *out, *err;
    /* deploy from flags: the manifest is built from --kind, --input, --output */
    int rc = cc_cli(&out, &err, "deploy", "ident", "--kind", "mlp", "--weights", weights, "--input",
                 "x:FP32:-1,4", "--output", "y:fp32:-1,4", "--max-batch", "4", "--config",
                 "{\"activations\": [\"identity\"]}", NULL);
    ck_assert_msg(rc == 0, "%s%s", out, err);
    HAS(out, "deployed ident version 1 (mlp, ");
    HAS(out, "inputs:    x FP32 [-1, 4]");
    HAS(out, "gpufaas invoke ident");
    char url[512];
    snprintf(url, sizeof url, "POST %s/v1/functions/ident/invoke", srv.url);
    HAS(out, url);
    snprintf(url, sizeof url, "POST %s/v2/models/ident/versions/1/infer", srv.url);
    HAS(out, url);
    HAS(err, "uploading ");
    HAS(err, "uploaded "); /* plain progress lines: stderr is not a terminal */
    cc_freeboth(&out, &err);

    /* one sample, flat: the batch dimension is added */
    ck_assert_int_eq(cc_cli(&out, &err, "invoke", "ident", "--data", "[1, 5, 2, 3]", NULL), 0);
    HAS(out, "y  FP32  [1, 4]\n");
    HAS(out, "  [0]   1 5 2 3\n");
    HAS(out, "version 1, worker ");
    ck_assert_str_eq(err, "");
    cc_freeboth(&out, &err);
    /* --top: the largest values of each row with their indices */
    ck_assert_int_eq(cc_cli(&out, &err, "invoke", "ident", "--data", "[[1, 5, 2, 3], [9, 0, 0, 8]]",
                         "--top", "2", NULL),
                     0);
    HAS(out, "y  FP32  [2, 4]  (top values: index: value)");
    HAS(out, "  [0]   1: 5   3: 3\n");
    HAS(out, "  [1]   0: 9   3: 8\n");
    cc_freeboth(&out, &err);
    /* --json: the server's answer, plus the top values */
    ck_assert_int_eq(
        cc_cli(&out, &err, "invoke", "ident", "--data", "[1, 5, 2, 3]", "--top", "1", "--json", NULL),
        0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    ck_assert_msg(j != NULL, "not JSON: %s", out);
    json_t *o0 = json_array_get(json_object_get(j, "outputs"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(o0, "name")), "y");
    json_t *data = json_object_get(o0, "data");
    ck_assert_uint_eq(json_array_size(data), 4);
    ck_assert(json_number_value(json_array_get(data, 1)) == 5);
    json_t *top = json_array_get(json_array_get(json_object_get(o0, "top"), 0), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(top, "index")), 1);
    ck_assert(json_is_integer(json_object_get(j, "worker")));
    json_decref(j);
    cc_freeboth(&out, &err);

    /* --file: nested data, and an object naming the input */
    char *f1 = write_text("in1.json", "[[4, 3, 2, 1]]\n");
    ck_assert_int_eq(cc_cli(&out, &err, "invoke", "ident", "--file", f1, NULL), 0);
    HAS(out, "  [0]   4 3 2 1\n");
    cc_freeboth(&out, &err);
    char *f2 = write_text("in2.json", "{\"x\": [[0.5, 0.25, 0, -1]]}");
    ck_assert_int_eq(cc_cli(&out, &err, "invoke", "ident", "--file", f2, NULL), 0);
    HAS(out, "  [0]   0.5 0.25 0 -1\n");
    cc_freeboth(&out, &err);
    /* a whole KServe v2 request is sent as it is */
    ck_assert_int_eq(
        cc_cli(&out, &err, "invoke", "ident", "--data",
            "{\"inputs\": [{\"name\": \"x\", \"datatype\": \"FP32\", \"shape\": [1, 4],"
            " \"data\": [7, 6, 5, 4]}]}",
            NULL),
        0);
    HAS(out, "  [0]   7 6 5 4\n");
    cc_freeboth(&out, &err);

    /* --npy: float64 converted to the input's FP32; big-endian float32; a 1-d sample */
    double d64[8] = {1, 2, 3, 4, 0.5, -2, 8, 1};
    char *n1 = write_npy("a.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 4), }",
                         d64, sizeof d64);
    ck_assert_int_eq(cc_cli(&out, &err, "invoke", "ident", "--npy", n1, "--top", "1", NULL), 0);
    HAS(out, "y  FP32  [2, 4]");
    HAS(out, "  [0]   3: 4\n");
    HAS(out, "  [1]   2: 8\n");
    cc_freeboth(&out, &err);
    unsigned char be[16] = {0x3f, 0x80, 0, 0, 0x40, 0, 0, 0, 0x40, 0x40, 0, 0, 0x40, 0x80, 0, 0};
    char *n2 = write_npy("be.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", be,
                         sizeof be);
    char arg[600];
    snprintf(arg, sizeof arg, "x=%s", n2);
    ck_assert_int_eq(cc_cli(&out, &err, "invoke", "ident", "--npy", arg, NULL), 0);
    HAS(out, "y  FP32  [1, 4]");
    HAS(out, "  [0]   1 2 3 4\n");
    cc_freeboth(&out, &err);

    /* version 2 from a manifest file, whose name and max_batch_size the flags override */
    char *mf = write_text("ident.json",
                          "{\"name\": \"other\", \"kind\": \"mlp\", \"inputs\": [{\"name\": \"x\", "
                          "\"datatype\": \"FP32\", \"shape\": [-1, 4]}], \"outputs\": [{\"name\": "
                          "\"y\", \"datatype\": \"FP32\", \"shape\": [-1, 4]}], \"max_batch_size\":"
                          " 1, \"config\": {\"activations\": [\"identity\"]}}");
    ck_assert_int_eq(cc_cli(&out, &err, "deploy", "ident", "--weights", weights, "--manifest", mf,
                         "--max-batch", "2", "--json", "-q", NULL),
                     0);
    j = json_loads(out, 0, &je);
    ck_assert_msg(j != NULL, "not JSON: %s", out);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "version")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "max_batch_size")), 2);
    json_decref(j);
    HAS(err, "names the function 'other'; deploying it as 'ident'");
    cc_freeboth(&out, &err);
    /* --version: the v2 path, to the version asked for */
    ck_assert_int_eq(
        cc_cli(&out, &err, "invoke", "ident", "--version", "1", "--data", "[1, 2, 3, 4]", NULL), 0);
    HAS(out, "  [0]   1 2 3 4\n");
    HAS(out, "version 1\n");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(
        cc_cli(&out, &err, "invoke", "ident", "--version", "7", "--data", "[1, 2, 3, 4]", NULL), 1);
    HAS(err, "gpufaas invoke: function 'ident' has no version 7");
    cc_freeboth(&out, &err);
    free(f1);
    free(f2);
    free(n1);
    free(n2);
    free(mf);
}
END_TEST

/* ---- errors ------------------------------------------------------------------------------- */

START_TEST(test_errors)
{
    char *out, *err;
    cc_deploy_identity("errs");
    /* a bad token, and none: the server's message, a hint, exit 1 */
    ck_assert_int_eq(cli_raw(&out, &err, "deploy", "errs", "--weights", weights, "--kind", "mlp",
                             "--input", "x:FP32:-1,4", "--output", "y:FP32:-1,4", "--server",
                             srv.url, "--token", "wrong", "-q", NULL),
                     1);
    HAS(err, "gpufaas deploy: bad admin token");
    HAS(err, "hint: pass the server's admin token with --token or GPUFAAS_TOKEN");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cli_raw(&out, &err, "rm", "errs", "--server", srv.url, NULL), 1);
    HAS(err, "gpufaas rm: this call needs the admin token");
    cc_freeboth(&out, &err);
    setenv("GPUFAAS_TOKEN", TOKEN, 1); /* the token from the environment */
    setenv("GPUFAAS_SERVER", srv.url, 1);
    ck_assert_int_eq(cli_raw(&out, &err, "unload", "errs", NULL), 0);
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cli_raw(&out, &err, "invoke", "errs", "--data", "[1, 2, 3, 4]", NULL), 1);
    HAS(err, "unavailable: unloaded"); /* until it is loaded again */
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cli_raw(&out, &err, "load", "errs", "--no-wait", NULL), 0);
    cc_freeboth(&out, &err);
    unsetenv("GPUFAAS_TOKEN");
    unsetenv("GPUFAAS_SERVER");

    /* unknown functions */
    static const char *const unknown[][6] = {
        {"invoke", "nope", "--data", "[1, 2, 3, 4]", NULL},
        {"ls", "nope", NULL},
        {"rm", "nope", NULL},
        {"load", "nope", NULL},
        {"unload", "nope", NULL},
    };
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *const *a = unknown[i];
        ck_assert_int_eq(cc_cli(&out, &err, a[0], a[1], a[2], a[3], NULL), 1);
        HAS(err, "function 'nope' not found");
        cc_freeboth(&out, &err);
    }
    ck_assert_int_eq(cc_cli(&out, &err, "invoke", "No/Such", "--data", "[1]", NULL), 1);
    HAS(err, "'No/Such' is not a valid function name");
    cc_freeboth(&out, &err);

    /* malformed input files */
    char *bad = write_text("bad.json", "{\"x\": [[1, 2,\n");
    ck_assert_int_eq(cc_cli(&out, &err, "invoke", "errs", "--file", bad, NULL), 1);
    HAS(err, "bad.json: malformed JSON at line 2");
    ck_assert_str_eq(out, "");
    cc_freeboth(&out, &err);
    char *missing = gf_test_path(dir, "missing.json");
    ck_assert_int_eq(cc_cli(&out, &err, "invoke", "errs", "--file", missing, NULL), 1);
    HAS(err, "cannot read");
    HAS(err, "No such file");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cc_cli(&out, &err, "invoke", "errs", "--data", "[1, 2", NULL), 1);
    HAS(err, "--data: malformed JSON");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cc_cli(&out, &err, "invoke", "errs", "--data", "[[1, 2], [3]]", NULL), 1);
    HAS(err, "arrays of equal length");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cc_cli(&out, &err, "invoke", "errs", "--data", "{\"z\": [1]}", NULL), 1);
    HAS(err, "function 'errs' has no input 'z'");
    cc_freeboth(&out, &err);
    float f4[4] = {1, 2, 3, 4};
    char *trunc = write_npy("trunc.npy",
                            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, "
                            "4), }",
                            f4, sizeof f4);
    ck_assert_int_eq(cc_cli(&out, &err, "invoke", "errs", "--npy", trunc, NULL), 1);
    HAS(err, "trunc.npy: truncated: the data has 16 bytes but shape needs 32");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cc_cli(&out, &err, "invoke", "errs", "--npy", bad, NULL), 1);
    HAS(err, "bad.json: not a .npy file");
    cc_freeboth(&out, &err);
    char *fort = write_npy("f.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                           f4, sizeof f4);
    ck_assert_int_eq(cc_cli(&out, &err, "invoke", "errs", "--npy", fort, NULL), 1);
    HAS(err, "Fortran-order arrays are not supported");
    cc_freeboth(&out, &err);

    /* input the server refuses: its message */
    ck_assert_int_eq(cc_cli(&out, &err, "invoke", "errs", "--data", "[1, 2, 3]", NULL), 1);
    HAS(err, "gpufaas invoke: input 'x': shape [1, 3] does not match [-1, 4]");
    cc_freeboth(&out, &err);
    /* deploys that cannot work */
    ck_assert_int_eq(cc_cli(&out, &err, "deploy", "errs", "--weights", missing, "--kind", "mlp",
                         "--input", "x:FP32:-1,4", "--output", "y:FP32:-1,4", NULL),
                     1);
    HAS(err, "cannot open the weights");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cc_cli(&out, &err, "deploy", "errs", "--weights", weights, "--kind", "mlp",
                         "--input", "x:FP32", "--output", "y:FP32:-1,4", NULL),
                     1);
    HAS(err, "expected NAME:DATATYPE:DIMS");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cc_cli(&out, &err, "deploy", "errs", "--weights", bad, "--kind", "mlp", "--input",
                         "x:FP32:-1,4", "--output", "y:FP32:-1,4", "-q", NULL),
                     1);
    HAS(err, "gpufaas deploy: ");
    HAS(err, "weights");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cc_cli(&out, &err, "deploy", "errs", "--weights", weights, "--kind", "mlp",
                         "--input", "x:FP32:-1,5", "--output", "y:FP32:-1,4", "-q", NULL),
                     1);
    HAS(err, "gpufaas deploy: ");
    HAS(err, "0.weight");
    cc_freeboth(&out, &err);
    /* a tensor the kind does not read is refused by name, unless the deploy
     * says to do without it */
    float pad[2] = {0, 0};
    int64_t ws[2] = {4, 4}, bs[1] = {4}, ps[1] = {2};
    float w[16] = {0}, b[4] = {0};
    gf_st_wtensor ts[3] = {{"0.weight", GF_DT_F32, 2, ws, w},
                           {"0.bias", GF_DT_F32, 1, bs, b},
                           {"aux.scale", GF_DT_F32, 1, ps, pad}};
    char *extra = gf_test_path(dir, "extra.safetensors");
    ck_assert_int_eq(gf_st_write(extra, ts, 3, NULL, 0, NULL), GF_OK);
    ck_assert_int_eq(cc_cli(&out, &err, "deploy", "errs", "--weights", extra, "--kind", "mlp",
                         "--input", "x:FP32:-1,4", "--output", "y:FP32:-1,4", "-q", NULL),
                     1);
    HAS(err, "tensor 'aux.scale' is not named as an nn.Sequential names its modules");
    HAS(err, "\"ignore_weights\"");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cc_cli(&out, &err, "deploy", "extra", "--weights", extra, "--kind", "mlp",
                         "--input", "x:FP32:-1,4", "--output", "y:FP32:-1,4", "-q",
                         "--ignore-weights", "aux.*", NULL),
                     0);
    cc_freeboth(&out, &err);
    free(extra);
    /* and nothing changed: errs is still version 1 */
    ck_assert_int_eq(cc_cli(&out, &err, "ls", "errs", NULL), 0);
    HAS(out, "current version 1\n");
    cc_freeboth(&out, &err);
    free(bad);
    free(missing);
    free(trunc);
    free(fort);
}
END_TEST

/* ---- ls, ps, rm ------------------------------------------------------------------------ */

START_TEST(test_ls_ps_rm)
{
    char *out, *err;
    cc_deploy_identity("lsme");
    ck_assert_int_eq(cc_cli(&out, &err, "ls", NULL), 0);
    HAS(out, "NAME");
    HAS(out, "PLACED");
    const char *line = strstr(out, "\nlsme ");
    ck_assert_msg(line != NULL, "%s", out);
    char name[32], ver[16], vers[16], kind[16];
    ck_assert_int_eq(sscanf(line + 1, "%31s %15s %15s %15s", name, ver, vers, kind), 4);
    ck_assert_str_eq(ver, "1");
    ck_assert_str_eq(kind, "mlp");
    HAS(line, "ready");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cc_cli(&out, &err, "ls", "lsme", NULL), 0);
    HAS(out, "lsme  kind mlp  current version 1\n");
    HAS(out, "  version 1 (current)  ready  ");
    HAS(out, "    inputs   x FP32 [-1, 4]\n");
    HAS(out, "    outputs  y FP32 [-1, 4]\n");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cc_cli(&out, &err, "ls", "--json", NULL), 0);
    json_t *j = json_loads(out, 0, NULL);
    ck_assert_msg(json_is_array(json_object_get(j, "functions")), "%s", out);
    bool found = false;
    for (size_t i = 0; i < json_array_size(json_object_get(j, "functions")); i++)
        found |= strcmp(json_string_value(json_object_get(
                            json_array_get(json_object_get(j, "functions"), i), "name")),
                        "lsme") == 0;
    ck_assert(found);
    json_decref(j);
    cc_freeboth(&out, &err);

    ck_assert_int_eq(cc_cli(&out, &err, "ps", NULL), 0);
    HAS(out, "DEVICE MEMORY");
    HAS(out, "\n0   cpu:0   up ");
    HAS(out, "\n1   cpu:1   up ");
    HAS(out, " / 4 MiB ");
    HAS(out, " / 16 MiB ");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cc_cli(&out, &err, "ps", "--json", NULL), 0);
    j = json_loads(out, 0, NULL);
    ck_assert_uint_eq(json_array_size(json_object_get(j, "workers")), 2);
    json_decref(j);
    cc_freeboth(&out, &err);

    ck_assert_int_eq(cc_cli(&out, &err, "rm", "lsme", NULL), 0);
    ck_assert_str_eq(out, "deleted lsme\n");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cc_cli(&out, &err, "ls", NULL), 0);
    HASNT(out, "\nlsme ");
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cc_cli(&out, &err, "rm", "lsme", NULL), 1);
    HAS(err, "function 'lsme' not found");
    cc_freeboth(&out, &err);
}
END_TEST

/* ---- load, unload ---------------------------------------------------------------------- */

/* The highest tier of function `fn` on worker `w` per `gpufaas ps --json`,
 * "" when it is not there. */
static void tier_on(const char *fn, int w, char *tier, size_t cap)
{
    char *out, *err;
    ck_assert_int_eq(cc_cli(&out, &err, "ps", "--json", NULL), 0);
    json_t *j = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(j);
    tier[0] = '\0';
    json_t *ms =
        json_object_get(json_array_get(json_object_get(j, "workers"), (size_t)w), "models");
    for (size_t i = 0; i < json_array_size(ms); i++) {
        json_t *m = json_array_get(ms, i);
        /* one entry per copy: the highest tier wins */
        if (strcmp(json_string_value(json_object_get(m, "function")), fn) == 0 &&
            strcmp(tier, "device") != 0)
            snprintf(tier, cap, "%s", json_string_value(json_object_get(m, "tier")));
    }
    json_decref(j);
    cc_freeboth(&out, &err);
}

/* tier_on until it says want, up to 10 s: the copies `ps` lists follow the
 * workers' LOADED and EVICTED events, which travel on their own thread and
 * may arrive just after the answer to a load or an unload. */
static void tier_settles(const char *fn, int w, const char *want, char *tier, size_t cap)
{
    for (int i = 0; i < 100; i++) {
        tier_on(fn, w, tier, cap);
        if (strcmp(tier, want) == 0)
            return;
        usleep(100 * 1000);
    }
}

START_TEST(test_load_unload)
{
    char *out, *err, tier[16];
    cc_deploy_identity("pin");
    /* onto each worker in turn: the load waits until the model is on that device */
    for (int w = 1; w >= 0; w--) {
        char wid[8];
        snprintf(wid, sizeof wid, w == 0 ? "w%d" : "%d", w);
        ck_assert_int_eq(cc_cli(&out, &err, "load", "pin", wid, NULL), 0);
        char want[96];
        snprintf(want, sizeof want, "loaded pin version 1 on worker %d (device, ", w);
        HAS(out, want);
        cc_freeboth(&out, &err);
        tier_settles("pin", w, "device", tier, sizeof tier);
        ck_assert_str_eq(tier, "device");
    }
    ck_assert_int_eq(cc_cli(&out, &err, "load", "pin", "1", "--json", NULL), 0);
    json_t *j = json_loads(out, 0, NULL);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "worker")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(j, "tier")), "device");
    json_decref(j);
    cc_freeboth(&out, &err);
    ck_assert_int_eq(cc_cli(&out, &err, "load", "pin", "9", NULL), 1);
    HAS(err, "gpufaas load: no worker 9 (this server has 2)");
    cc_freeboth(&out, &err);
    /* the server side of the extension: a worker id that is not one */
    const char *auth[] = {"Authorization: Bearer " TOKEN, NULL};
    gf_hh_resp r;
    const char *body = "{\"parameters\": {\"worker\": \"one\"}}";
    ck_assert_int_eq(gf_hh_http(srv.url, "POST", "/v2/repository/models/pin/load", auth, body,
                                strlen(body), false, &r),
                     400);
    char why[256];
    ck_assert_msg(gf_hh_is_json_error(&r, "parameters.worker must be a worker id", why, sizeof why),
                  "%s", why);
    gf_hh_resp_free(&r);
    gf_hh_thread_end();

    ck_assert_int_eq(cc_cli(&out, &err, "unload", "pin", NULL), 0);
    ck_assert_str_eq(out, "unloaded pin from every worker\n");
    cc_freeboth(&out, &err);
    tier_settles("pin", 0, "", tier, sizeof tier);
    ck_assert_str_eq(tier, "");
    tier_settles("pin", 1, "", tier, sizeof tier);
    ck_assert_str_eq(tier, "");
    ck_assert_int_eq(cc_cli(&out, &err, "load", "pin", "--no-wait", NULL), 0);
    HAS(out, "load of pin version 1 accepted");
    cc_freeboth(&out, &err);
}
END_TEST

int main(void)
{
    unsetenv("GPUFAAS_SERVER");
    unsetenv("GPUFAAS_TOKEN");
    Suite *s = suite_create("gateway_cli_client");
    TCase *tc = tcase_create("cli");
    tcase_add_unchecked_fixture(tc, server_up, server_down);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_help_and_usage);
    tcase_add_test(tc, test_unreachable_server);
    tcase_add_test(tc, test_deploy_and_invoke);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_ls_ps_rm);
    tcase_add_test(tc, test_load_unload);
    cc_top_tests(tc);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
