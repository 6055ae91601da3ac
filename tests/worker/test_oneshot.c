/* gpufaas tests — gpufaas-worker's one-shot modes, run as the gateway runs
 * them (runtime/ipc.h, "One-shot modes"): --probe lists the CUDA devices and
 * the kinds with their plugins; --validate answers yes with the manifest to
 * store, or no with a code and a message naming the problem; a converting
 * kind (gpufaas-worker-convtest's `convtest`) writes the converted weights, a
 * companion file and a derived manifest; a plugin that crashes while
 * validating takes down that process only, without an answer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/safetensors.h"
#include "functions/manifest.h"
#include "testutil.h"

static char *tmpdir;
static void setup(void) { tmpdir = gf_test_tmpdir(); }
static void teardown(void)
{
    gf_test_rmtree(tmpdir);
    tmpdir = NULL;
}

/* Run the program with args (NULL-terminated); the parsed answer, or NULL
 * when there was none. *status gets the exit status. */
static gf_json_doc *run(const char *prog, const char *const *args, int *status)
{
    char *argv[40];
    int a = 0;
    argv[a++] = (char *)prog;
    for (; *args != NULL && a < 39; args++)
        argv[a++] = (char *)*args;
    argv[a] = NULL;
    char *out = NULL, *err = NULL;
    *status = gf_test_run_cmd(argv, &out, &err, 60);
    gf_json_doc *doc = NULL;
    if (out != NULL && out[0] != '\0') {
        gf_err e;
        ck_assert_msg(gf_json_parse(out, strlen(out), 0, &doc, &e) == GF_OK, "answer %s: %s",
                      out, e.msg);
        ck_assert_msg(strchr(out, '\n') == out + strlen(out) - 1, "one line: %s", out);
    }
    free(out);
    free(err);
    return doc;
}

static gf_json_doc *validate(const char *prog, const char *m, const char *w, const char *out,
                             int *status)
{
    return run(gf_test_prog(prog),
               (const char *[]){"--validate", "--manifest", m, "--upload", w, "--out-dir", out,
                                NULL},
               status);
}

static const gf_json *get(gf_json_doc *d, const char *ptr)
{
    const gf_json *v;
    ck_assert_int_eq(gf_json_pointer(gf_json_doc_root(d), ptr, &v, NULL), GF_OK);
    ck_assert_msg(v != NULL, "no %s in the answer", ptr);
    return v;
}

static bool is_true(gf_json_doc *d, const char *ptr)
{
    const gf_json *v = get(d, ptr);
    return v->type == GF_JSON_BOOL && v->u.b;
}

/* A 4 -> 3 -> 2 mlp's tensors, under the given names. */
static char *write_mlp(const char *file, const char *const names[4], const char *softmax)
{
    static float w0[12], b0[3], w1[6], b1[2];
    for (int i = 0; i < 12; i++)
        w0[i] = (float)i * 0.1f;
    gf_st_wtensor ts[4] = {{names[0], GF_DT_F32, 2, (int64_t[]){3, 4}, w0},
                           {names[1], GF_DT_F32, 1, (int64_t[]){3}, b0},
                           {names[2], GF_DT_F32, 2, (int64_t[]){2, 3}, w1},
                           {names[3], GF_DT_F32, 1, (int64_t[]){2}, b1}};
    char *path = gf_test_path(tmpdir, file);
    const char *meta[] = {"softmax", softmax};
    ck_assert_int_eq(gf_st_write(path, ts, 4, meta, softmax != NULL ? 1 : 0, NULL), GF_OK);
    return path;
}

static char *write_manifest(const char *file, const char *kind, int in)
{
    char text[512];
    snprintf(text, sizeof text,
             "{\"name\":\"f\",\"kind\":\"%s\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
             "\"shape\":[-1,%d]}],\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":"
             "[-1,2]}],\"max_batch_size\":4}",
             kind, in);
    char *path = gf_test_path(tmpdir, file);
    gf_test_write_file(path, text, strlen(text));
    return path;
}

static char *fresh_dir(const char *name)
{
    char *d = gf_test_path(tmpdir, name);
    ck_assert_int_eq(mkdir(d, 0700), 0);
    return d;
}

START_TEST(test_probe)
{
    int status;
    gf_json_doc *d = run(gf_test_prog("GF_WORKER"), (const char *[]){"--probe", NULL}, &status);
    ck_assert_int_eq(status, 0);
    ck_assert(is_true(d, "/ok"));
    const gf_json *n = get(d, "/cuda_devices");
    ck_assert(n->type == GF_JSON_NUMBER && n->u.num.is_int && n->u.num.i >= 0);
    ck_assert_str_eq(get(d, "/kinds/0/name")->u.str.s, "mlp");
    ck_assert_str_eq(get(d, "/kinds/0/plugin")->u.str.s, "");
    ck_assert_str_eq(get(d, "/kinds/2/name")->u.str.s, "bert");
    ck_assert_str_eq(get(d, "/kinds/3/name")->u.str.s, "onnx");
    gf_json_doc_free(d);
    /* a plugin: its kind and its absolute path, only when allowed */
    const char *so = gf_test_prog("GF_PLUGIN_EXAMPLE");
    d = run(gf_test_prog("GF_WORKER"),
            (const char *[]){"--probe", "--allow-native-functions", "--plugin", so, NULL}, &status);
    ck_assert_int_eq(status, 0);
    ck_assert_str_eq(get(d, "/kinds/4/name")->u.str.s, "linear");
    char *abs = realpath(so, NULL);
    ck_assert_str_eq(get(d, "/kinds/4/plugin")->u.str.s, abs);
    free(abs);
    gf_json_doc_free(d);
    d = run(gf_test_prog("GF_WORKER"), (const char *[]){"--probe", "--plugin", so, NULL},
            &status);
    ck_assert_int_eq(status, 0);
    ck_assert(!is_true(d, "/ok"));
    ck_assert_int_eq(get(d, "/code")->u.num.i, GF_ERR_PERMISSION);
    ck_assert(strstr(get(d, "/message")->u.str.s, "--allow-native-functions") != NULL);
    gf_json_doc_free(d);
    /* flags it does not know: the do-not-respawn code, no answer */
    ck_assert_ptr_null(run(gf_test_prog("GF_WORKER"), (const char *[]){"--probe", "--x", NULL},
                           &status));
    ck_assert_int_eq(status, 78);
    ck_assert_ptr_null(run(gf_test_prog("GF_WORKER"), (const char *[]){"--validate", NULL},
                           &status));
    ck_assert_int_eq(status, 78);
}
END_TEST

START_TEST(test_validate_yes_and_no)
{
    static const char *const mlp_names[4] = {"0.weight", "0.bias", "2.weight", "2.bias"};
    char *w = write_mlp("w.safetensors", mlp_names, NULL);
    char *m = write_manifest("m.json", "mlp", 4);
    char *out = fresh_dir("out");
    int status;
    gf_json_doc *d = validate("GF_WORKER", m, w, out, &status);
    ck_assert_int_eq(status, 0);
    ck_assert(is_true(d, "/ok"));
    ck_assert_int_eq(get(d, "/weights")->type, GF_JSON_NULL);
    ck_assert_int_eq(get(d, "/companions")->u.arr.n, 0);
    /* the manifest to store is the canonical form of the one given */
    size_t len;
    char *text = gf_test_read_file(m, &len);
    gf_manifest *mf;
    ck_assert_int_eq(gf_manifest_parse(text, len, &mf, NULL), GF_OK);
    gf_buf want, got;
    gf_buf_init(&want);
    gf_buf_init(&got);
    ck_assert_int_eq(gf_manifest_to_json(mf, &want), GF_OK);
    ck_assert_int_eq(gf_json_write(get(d, "/manifest"), &got), GF_OK);
    ck_assert_str_eq(got.data, want.data);
    gf_buf_deinit(&want);
    gf_buf_deinit(&got);
    gf_manifest_free(mf);
    free(text);
    gf_json_doc_free(d);
    /* weights that do not fit: no, naming the tensor and both shapes */
    char *m5 = write_manifest("m5.json", "mlp", 5);
    d = validate("GF_WORKER", m5, w, out, &status);
    ck_assert_int_eq(status, 0);
    ck_assert(!is_true(d, "/ok"));
    ck_assert_int_eq(get(d, "/code")->u.num.i, GF_ERR_INVALID);
    ck_assert_msg(strstr(get(d, "/message")->u.str.s, "tensor '0.weight' has shape [3, 4], "
                                                      "expected [-1, 5]"),
                  "%s", get(d, "/message")->u.str.s);
    gf_json_doc_free(d);
    /* an unknown kind: no, listing the kinds there are */
    char *mk = write_manifest("mk.json", "vgg", 4);
    d = validate("GF_WORKER", mk, w, out, &status);
    ck_assert(!is_true(d, "/ok"));
    ck_assert_str_eq(get(d, "/message")->u.str.s,
                     "unknown kind 'vgg' (available: mlp, resnet, bert, onnx)");
    gf_json_doc_free(d);
    free(mk);
    free(m5);
    free(out);
    free(m);
    free(w);
}
END_TEST

START_TEST(test_validate_converting_kind)
{
    static const char *const up_names[4] = {"W1", "b1", "W2", "b2"};
    char *w = write_mlp("up.bin", up_names, "true");
    /* a partial manifest: the converter derives the rest */
    char *m = gf_test_path(tmpdir, "m.json");
    const char *partial = "{\"name\":\"f\",\"kind\":\"convtest\"}";
    gf_test_write_file(m, partial, strlen(partial));
    char *note = gf_test_path(tmpdir, "note.txt");
    gf_test_write_file(note, "hello", 5);
    char *out = fresh_dir("out");
    int status;
    gf_json_doc *d = run(gf_test_prog("GF_WORKER_CONVTEST"),
                         (const char *[]){"--validate", "--manifest", m, "--upload", w,
                                          "--upload", note, "--out-dir", out, NULL},
                         &status);
    ck_assert_int_eq(status, 0);
    ck_assert_msg(is_true(d, "/ok"), "%s", get(d, "/message")->u.str.s);
    ck_assert_str_eq(get(d, "/weights")->u.str.s, GF_CONVERTED_WEIGHTS);
    ck_assert_int_eq(get(d, "/companions")->u.arr.n, 1);
    ck_assert_str_eq(get(d, "/companions/0")->u.str.s, "note");
    ck_assert_int_eq(get(d, "/manifest/config/softmax")->type, GF_JSON_BOOL);
    ck_assert_str_eq(get(d, "/manifest/kind")->u.str.s, "convtest");
    ck_assert_int_eq(get(d, "/manifest/inputs/0/shape/1")->u.num.i, 4);
    gf_json_doc_free(d);
    /* what it wrote: the weights under the names its load needs, the note */
    char *cw = gf_test_path(out, GF_CONVERTED_WEIGHTS);
    gf_st_file *f;
    ck_assert_int_eq(gf_st_open(cw, &f, NULL), GF_OK);
    ck_assert_ptr_nonnull(gf_st_find(f, "0.weight"));
    ck_assert_ptr_null(gf_st_find(f, "W1"));
    gf_st_close(f);
    char *cn = gf_test_path(out, GF_CONVERTED_BASE ".note");
    size_t len;
    char *text = gf_test_read_file(cn, &len);
    ck_assert_str_eq(text, "converted: hello\n");
    free(text);
    /* no manifest at all: the name and the kind given apart */
    char *out2 = fresh_dir("out2");
    d = run(gf_test_prog("GF_WORKER_CONVTEST"),
            (const char *[]){"--validate", "--name", "g", "--kind", "convtest", "--upload", w,
                             "--out-dir", out2, NULL},
            &status);
    ck_assert_msg(is_true(d, "/ok"), "%s", get(d, "/message")->u.str.s);
    ck_assert_str_eq(get(d, "/manifest/name")->u.str.s, "g");
    gf_json_doc_free(d);
    /* a kind that does not convert needs a whole manifest and one file */
    char *out3 = fresh_dir("out3");
    d = run(gf_test_prog("GF_WORKER_CONVTEST"),
            (const char *[]){"--validate", "--name", "g", "--kind", "mlp", "--upload", w,
                             "--out-dir", out3, NULL},
            &status);
    ck_assert(!is_true(d, "/ok"));
    ck_assert_str_eq(get(d, "/message")->u.str.s, "kind 'mlp' needs a manifest");
    gf_json_doc_free(d);
    d = run(gf_test_prog("GF_WORKER_CONVTEST"),
            (const char *[]){"--validate", "--manifest", m, "--kind", "mlp", "--upload", w,
                             "--out-dir", out3, NULL},
            &status);
    ck_assert(!is_true(d, "/ok"));
    ck_assert_str_eq(get(d, "/message")->u.str.s,
                     "the manifest says kind 'convtest' but the upload is for kind 'mlp'");
    gf_json_doc_free(d);
    free(out3);
    free(out2);
    free(cn);
    free(cw);
    free(out);
    free(note);
    free(m);
    free(w);
}
END_TEST

START_TEST(test_validate_crash_is_contained)
{
    static const char *const mlp_names[4] = {"0.weight", "0.bias", "2.weight", "2.bias"};
    char *w = write_mlp("w.safetensors", mlp_names, NULL);
    char *m = write_manifest("m.json", "crash", 4);
    char *out = fresh_dir("out");
    int status;
    gf_json_doc *d = run(gf_test_prog("GF_WORKER"),
                         (const char *[]){"--validate", "--allow-native-functions", "--plugin",
                                          gf_test_prog("GF_PLUGIN_CRASH"), "--manifest", m,
                                          "--upload", w, "--out-dir", out, NULL},
                         &status);
    ck_assert_ptr_null(d); /* no answer */
    ck_assert_int_ne(status, 0);
    free(out);
    free(m);
    free(w);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("worker_oneshot");
    TCase *tc = tcase_create("oneshot");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_probe);
    tcase_add_test(tc, test_validate_yes_and_no);
    tcase_add_test(tc, test_validate_converting_kind);
    tcase_add_test(tc, test_validate_crash_is_contained);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
