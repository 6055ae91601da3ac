/* gpufaas — ONNX's own backend test data against the onnx kind.
 *
 *   onnx_conformance DATA_DIR [-v] [-k FILTER] [--device cpu|cuda:0]
 *                    [--rtol R] [--atol A] [--strict] [--export DIR]
 *
 * DATA_DIR is ONNX's backend test data (Debian's libonnx-testdata:
 * /usr/share/libonnx-testdata/data) with the sets node, pytorch-converted,
 * pytorch-operator and simple, or one set of tests in the same layout
 * (tests/functions/onnx/ml: named by the folder). Each test directory holds
 * model.onnx and test_data_set_N/input_K.pb and output_K.pb. A test runs the way a deployed
 * function does: the importer (deploy-time checks, weights file, manifest),
 * the function runtime's prepare, the parameter cache and gf_fn_infer on a
 * backend. Outputs are compared with ONNX's backend-test tolerance (rtol
 * 1e-3, atol 1e-7; NaN equals NaN).
 *
 * A test is skipped when the importer refuses the model as unsupported (an
 * op, dtype or attribute value gpufaas does not claim), or, for a graph
 * whose shapes depend on an input's values, its first run does: the reason is
 * printed with -v; with --strict (for sets of models we claim, every op
 * supported) a refusal is a failure. It fails when anything else goes wrong
 * or an output differs. --export DIR writes each passing test, imported, into
 * DIR/<set>_<test>/ (weights.safetensors, manifest.json, inputs.safetensors
 * and our outputs as expected.safetensors): what tests/gpu's cuda check runs
 * on a machine without protobuf-c (onnx_crosscheck). Prints <set>_tests_passed=, _failed=, _skipped= per set and exits
 * 1 when any test failed.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/dtype.h"
#include "core/safetensors.h"
#include "core/tensor.h"
#include "functions/onnx/optable.h"
#include "functions/onnx/import.h"
#include "functions/runtime.h"

static const char *const sets[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
static const char *const set_keys[] = {"node", "pytorch_converted", "pytorch_operator",
                                       "simple"};

typedef struct {
    gf_backend *be;
    gf_cache *cache;
    const char *tmp;
    int verbose;
    int seq;
    int strict;        /* a refusal fails the test */
    double rtol, atol; /* |got - want| <= atol + rtol |want| */
    const char *export_dir; /* --export, or NULL */
} rig;

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted entries of dir starting with prefix (NULL-terminated; free each). */
static char **list_dir(const char *dir, const char *prefix, size_t *n_out)
{
    *n_out = 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return NULL;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        if (n + 1 >= cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (nn == NULL)
                break;
            names = nn;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (names != NULL) {
        qsort(names, n, sizeof *names, cmp_names);
        names[n] = NULL;
    }
    *n_out = n;
    return names;
}

static void free_list(char **l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(l[i]);
    free(l);
}

static bool close_enough(const rig *r, const gf_tensor *got, const gf_onnx_const *want,
                         char *why, size_t cap)
{
    if (got->dtype != want->dtype || !gf_shape_equal(got->rank, got->shape, want->rank,
                                                     want->shape)) {
        char a[96], b[96];
        gf_shape_str(a, sizeof a, got->rank, got->shape);
        gf_shape_str(b, sizeof b, want->rank, want->shape);
        snprintf(why, cap, "got %s %s, expected %s %s", gf_dtype_st_name(got->dtype), a,
                 gf_dtype_st_name(want->dtype), b);
        return false;
    }
    if (want->dtype == GF_DT_BYTES) { /* strings: exactly */
        if (got->nbytes == want->nbytes && memcmp(got->data, want->data, want->nbytes) == 0)
            return true;
        snprintf(why, cap, "the strings differ");
        return false;
    }
    gf_onnx_const g = {.dtype = got->dtype, .rank = got->rank, .nbytes = got->nbytes,
                       .data = got->data};
    int64_t n = (int64_t)(want->nbytes / (gf_dtype_size(want->dtype) ? gf_dtype_size(want->dtype)
                                                                      : 1));
    bool fl = gf_dtype_is_float(want->dtype);
    for (int64_t i = 0; i < n; i++) {
        if (fl) {
            double x = gf_onnx_const_f64(&g, i), y = gf_onnx_const_f64(want, i);
            if (isnan(x) && isnan(y))
                continue;
            if (isinf(y) && x == y)
                continue;
            if (!(fabs(x - y) <= r->atol + r->rtol * fabs(y))) {
                snprintf(why, cap, "element %lld is %.9g, expected %.9g", (long long)i, x, y);
                return false;
            }
        } else if (gf_onnx_const_i64(&g, i) != gf_onnx_const_i64(want, i)) {
            snprintf(why, cap, "element %lld is %lld, expected %lld", (long long)i,
                     (long long)gf_onnx_const_i64(&g, i), (long long)gf_onnx_const_i64(want, i));
            return false;
        }
    }
    return true;
}

/* Tests whose expected data contradicts the operator spec as it stands (and
 * onnxruntime): skipped, with the reason. */
static const struct {
    const char *test, *why;
} known_bad_data[] = {
    {"test_cast_FLOAT_to_BFLOAT16", "ONNX 1.12's expected data truncates to bfloat16; the spec "
     "rounds to nearest even"},
    {"test_castlike_BFLOAT16_to_FLOAT", "the model declares input 'like' as [3, 4]; its data is [1]"},
    {"test_castlike_BFLOAT16_to_FLOAT_expanded", "the model declares input 'like' as [3, 4]; its "
     "data is [1]"},
    {"test_castlike_FLOAT_to_BFLOAT16", "the model declares input 'like' as [3, 4]; its data is [1]"},
    {"test_castlike_FLOAT_to_BFLOAT16_expanded", "the model declares input 'like' as [3, 4]; its "
     "data is [1]"},
};

/* Tensors named as the manifest's inputs (or outputs) into a safetensors
 * file. */
static gf_status write_named(const char *path, const gf_manifest_io *io, const gf_tensor *t,
                             size_t n, gf_err *err)
{
    gf_st_wtensor *wt = calloc(n + 1, sizeof *wt);
    if (wt == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        wt[i] = (gf_st_wtensor){io[i].name, t[i].dtype, t[i].rank, t[i].shape, t[i].data};
    gf_status st = gf_st_write(path, wt, n, NULL, 0, err);
    free(wt);
    return st;
}

/* --export: the imported test, its inputs and our outputs. */
static void export_case(const rig *r, const char *key, const char *test, const char *weights,
                        const char *mj, const gf_manifest *mf, const gf_tensor *in,
                        const gf_fn_outputs *fo)
{
    char d[4096], p[4200];
    for (size_t i = 0; i < fo->n; i++)
        if (fo->t[i].dtype == GF_DT_BYTES)
            return; /* strings have no safetensors form: the cuda check runs without it */
    snprintf(d, sizeof d, "%s/%s_%s", r->export_dir, key, test);
    mkdir(d, 0755);
    gf_err err;
    snprintf(p, sizeof p, "%s/weights.safetensors", d);
    bool ok = rename(weights, p) == 0;
    snprintf(p, sizeof p, "%s/manifest.json", d);
    FILE *f = fopen(p, "w");
    ok = ok && f != NULL && fputs(mj, f) >= 0;
    if (f != NULL)
        ok = fclose(f) == 0 && ok;
    snprintf(p, sizeof p, "%s/inputs.safetensors", d);
    ok = ok && write_named(p, mf->inputs, in, mf->n_inputs, &err) == GF_OK;
    snprintf(p, sizeof p, "%s/expected.safetensors", d);
    ok = ok && write_named(p, mf->outputs, fo->t, fo->n, &err) == GF_OK;
    if (!ok)
        fprintf(stderr, "onnx_conformance: cannot export %s\n", d);
}

/* 0 passed, 1 failed, 2 skipped */
static int run_one(rig *r, const char *dir, const char *key, const char *test, char *why,
                   size_t cap)
{
    for (size_t i = 0; i < sizeof known_bad_data / sizeof known_bad_data[0]; i++)
        if (strcmp(test, known_bad_data[i].test) == 0) {
            snprintf(why, cap, "known bad test data: %s", known_bad_data[i].why);
            return 2;
        }
    char model[4096], out[4096], derived[4200];
    snprintf(model, sizeof model, "%s/%s/model.onnx", dir, test);
    snprintf(out, sizeof out, "%s/t%d.safetensors", r->tmp, r->seq++);
    snprintf(derived, sizeof derived, "%s.derived", out);
    gf_onnx_import_req req = {.model_path = model, .name = "t", .out_path = out};
    char *mj = NULL;
    gf_err err;
    gf_status st = gf_onnx_import(&req, &mj, &err);
    if (st != GF_OK) {
        snprintf(why, cap, "%s", err.msg);
        return st == GF_ERR_UNSUPPORTED && !r->strict ? 2 : 1;
    }
    int result = 1;
    gf_manifest *mf = NULL;
    gf_fn_plan *plan = NULL;
    gf_cache_model *cm = NULL;
    size_t n_sets = 0;
    char **data_sets = NULL;
    if (gf_manifest_parse(mj, strlen(mj), &mf, &err) != GF_OK ||
        /* as a worker prepares it: Conv weights packed for this backend */
        gf_fn_prepare_on(gf_fn_kind_find("onnx"), mf, out, derived, r->be, &plan, &err) !=
            GF_OK ||
        gf_cache_model_add(r->cache, test, gf_fn_plan_cache_path(plan),
                           gf_fn_plan_param_names(plan), gf_fn_plan_param_count(plan), &cm,
                           &err) != GF_OK) {
        snprintf(why, cap, "%s", err.msg);
        goto done;
    }
    char tdir[4096];
    snprintf(tdir, sizeof tdir, "%s/%s", dir, test);
    data_sets = list_dir(tdir, "test_data_set_", &n_sets);
    if (n_sets == 0) {
        snprintf(why, cap, "no test data");
        goto done;
    }
    result = 0;
    for (size_t ds = 0; ds < n_sets && result == 0; ds++) {
        gf_tensor *in = calloc(mf->n_inputs + 1, sizeof *in);
        gf_onnx_const **ic = calloc(mf->n_inputs + 1, sizeof *ic);
        gf_fn_outputs fo = {0};
        for (size_t i = 0; i < mf->n_inputs && result == 0; i++) {
            char p[4200];
            snprintf(p, sizeof p, "%s/%s/input_%zu.pb", tdir, data_sets[ds], i);
            if (gf_onnx_tensor_read(p, &ic[i], &err) != GF_OK) {
                snprintf(why, cap, "reading %s: %s", p, err.msg);
                result = 1;
                break;
            }
            /* the test data of ONNX 1.12 stores bfloat16 tensors as UINT16 */
            if (ic[i]->dtype == GF_DT_U16 && mf->inputs[i].dtype == GF_DT_BF16)
                ic[i]->dtype = GF_DT_BF16;
            gf_tensor_init(&in[i], ic[i]->dtype, ic[i]->rank, ic[i]->shape, ic[i]->data,
                           GF_MEM_HOST, -1, NULL);
        }
        gf_lease *lease = NULL;
        if (result == 0 && gf_cache_acquire(r->cache, cm, &lease, &err) != GF_OK) {
            snprintf(why, cap, "acquire: %s", err.msg);
            result = 1;
        }
        if (result == 0) {
            gf_fn_timing tm;
            st = gf_fn_infer(plan, r->be, r->cache, lease, in, mf->n_inputs, &fo, &tm, &err);
            if (st != GF_OK) {
                /* a graph shaped by an input's values is compiled at its first
                 * request: a refusal then is the deploy's refusal, made later */
                snprintf(why, cap, "infer: %s", err.msg);
                result = st == GF_ERR_UNSUPPORTED && !r->strict ? 2 : 1;
            }
        }
        if (lease != NULL)
            gf_lease_release(lease);
        for (size_t i = 0; result == 0 && i < fo.n; i++) {
            char p[4200];
            gf_onnx_const *want;
            snprintf(p, sizeof p, "%s/%s/output_%zu.pb", tdir, data_sets[ds], i);
            if (gf_onnx_tensor_read(p, &want, &err) != GF_OK) {
                snprintf(why, cap, "reading %s: %s", p, err.msg);
                result = 1;
                break;
            }
            if (want->dtype == GF_DT_U16 && fo.t[i].dtype == GF_DT_BF16)
                want->dtype = GF_DT_BF16;
            char w2[400];
            if (!close_enough(r, &fo.t[i], want, w2, sizeof w2)) {
                snprintf(why, cap, "output %zu: %s", i, w2);
                result = 1;
            }
            gf_onnx_const_free(want);
        }
        if (result == 0 && ds == 0 && r->export_dir != NULL)
            export_case(r, key, test, out, mj, mf, in, &fo);
        gf_fn_outputs_free(&fo);
        for (size_t i = 0; i < mf->n_inputs; i++)
            gf_onnx_const_free(ic[i]);
        free(ic);
        free(in);
    }
done:
    if (cm != NULL)
        gf_cache_model_remove(r->cache, cm, NULL);
    free_list(data_sets, n_sets);
    gf_fn_plan_free(plan);
    gf_manifest_free(mf);
    free(mj);
    unlink(out);
    unlink(derived);
    return result;
}

int main(int argc, char **argv)
{
    const char *data = NULL, *filter = NULL, *device = "cpu";
    setvbuf(stdout, NULL, _IOLBF, 0);
    rig r = {.rtol = 1e-3, .atol = 1e-7};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0)
            r.verbose = 1;
        else if (strcmp(argv[i], "-k") == 0 && i + 1 < argc)
            filter = argv[++i];
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
            device = argv[++i];
        else if (strcmp(argv[i], "--rtol") == 0 && i + 1 < argc)
            r.rtol = atof(argv[++i]);
        else if (strcmp(argv[i], "--atol") == 0 && i + 1 < argc)
            r.atol = atof(argv[++i]);
        else if (strcmp(argv[i], "--strict") == 0)
            r.strict = 1;
        else if (strcmp(argv[i], "--export") == 0 && i + 1 < argc)
            r.export_dir = argv[++i];
        else
            data = argv[i];
    }
    if (data == NULL) {
        fprintf(stderr, "usage: onnx_conformance DATA_DIR [-v] [-k FILTER] [--device D]\n");
        return 2;
    }
    struct stat sb;
    if (stat(data, &sb) != 0) {
        printf("SKIP: no ONNX test data at %s (install libonnx-testdata)\n", data);
        return 77;
    }
    if (r.export_dir != NULL)
        mkdir(r.export_dir, 0755);
    char tmpl[] = "/tmp/gf-onnx-conf-XXXXXX";
    r.tmp = mkdtemp(tmpl);
    gf_err err;
    gf_backend_config cfg = {.device = device, .device_budget = (size_t)2 << 30};
    if (r.tmp == NULL || gf_backend_open(&cfg, &r.be, &err) != GF_OK) {
        printf("SKIP: cannot open backend %s: %s\n", device, r.tmp ? err.msg : "mkdtemp");
        return 77;
    }
    gf_cache_config cc = {.host_budget = 0};
    if (gf_cache_new(r.be, &cc, &r.cache, &err) != GF_OK) {
        fprintf(stderr, "cache: %s\n", err.msg);
        return 2;
    }
    /* ONNX's four sets, or DATA_DIR itself as one set named by its folder */
    char node_dir[4096], one_key[256];
    snprintf(node_dir, sizeof node_dir, "%s/node", data);
    bool one = stat(node_dir, &sb) != 0;
    const char *base = strrchr(data, '/') != NULL && strrchr(data, '/')[1] ? strrchr(data, '/') + 1
                                                                             : data;
    snprintf(one_key, sizeof one_key, "%s", base);
    for (char *p = one_key; *p; p++)
        if (*p == '-')
            *p = '_';
    size_t n_sets = one ? 1 : sizeof sets / sizeof sets[0];
    int any_failed = 0;
    for (size_t s = 0; s < n_sets; s++) {
        char dir[4096];
        const char *key = one ? one_key : set_keys[s], *set = one ? base : sets[s];
        if (one)
            snprintf(dir, sizeof dir, "%s", data);
        else
            snprintf(dir, sizeof dir, "%s/%s", data, sets[s]);
        size_t n;
        char **tests = list_dir(dir, "test_", &n);
        int passed = 0, failed = 0, skipped = 0;
        for (size_t t = 0; t < n; t++) {
            if (filter != NULL && strstr(tests[t], filter) == NULL)
                continue;
            char why[600] = "";
            int rc = run_one(&r, dir, key, tests[t], why, sizeof why);
            if (rc == 0)
                passed++;
            else if (rc == 1)
                failed++;
            else
                skipped++;
            if (rc == 1 || (r.verbose && rc == 2))
                printf("%s %s/%s: %s\n", rc == 1 ? "FAIL" : "skip", set, tests[t], why);
            else if (r.verbose)
                printf("ok   %s/%s\n", set, tests[t]);
        }
        free_list(tests, n);
        printf("%s_tests_passed=%d\n%s_tests_failed=%d\n%s_tests_skipped=%d\n", key, passed,
               key, failed, key, skipped);
        any_failed |= failed > 0;
    }
    gf_cache_free(r.cache);
    gf_backend_free(r.be);
    rmdir(r.tmp);
    return any_failed ? 1 : 0;
}
