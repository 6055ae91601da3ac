/* gpufaas mkmodel KIND [options] OUT.safetensors
 *
 * Writes weights with random values for a built-in kind (mlp, resnet, bert),
 * named exactly as PyTorch / Hugging Face name them, plus the matching
 * manifest; then validates the pair as a deploy would. For tests and
 * benchmarks: resnet50 is ~100 MB, bert (bert-base sizes by default) ~440 MB
 * in F32.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/dtype.h"
#include "core/safetensors.h"
#include "core/tensor.h"
#include "functions/manifest.h"
#include "gateway/core/oneshot.h"
#include "gateway/cli/cli.h"
#include "gateway/cli/flags.h"

#define MK_MAX_LAYERS 64
#define MK_MAX_DIM ((int64_t)1 << 31)

/* ---- options ---- */

enum { MK_MLP = 1, MK_RESNET = 2, MK_BERT = 4, MK_ALL = 7 };

typedef struct mk_opts {
    int kind;
    int depth;
    const char *out, *manifest, *name;
    gf_dtype dtype;
    uint64_t seed;
    int64_t max_batch, max_delay_us;
    int64_t sizes[MK_MAX_LAYERS + 1];
    int nsizes;
    const char *act;
    bool softmax;
    int64_t classes, image;
    int64_t layers, hidden, heads, inter, vocab, max_pos, labels, seq;
} mk_opts;

/* Parse a decimal integer in [lo, hi]. */
static bool mk_int(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool mk_sizes(const char *s, mk_opts *o)
{
    o->nsizes = 0;
    const char *p = s;
    while (*p != '\0') {
        char num[32];
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= sizeof num || o->nsizes > MK_MAX_LAYERS)
            return false;
        memcpy(num, p, n);
        num[n] = '\0';
        if (!mk_int(num, 1, MK_MAX_DIM, &o->sizes[o->nsizes++]))
            return false;
        p += n;
        if (*p == ',' && *++p == '\0')
            return false;
    }
    return o->nsizes >= 2;
}

/* The options, one table: what --help shows and what mk_parse takes. tag:
 * the kinds an option applies to. */
enum {
    M_DTYPE, M_SEED, M_MANIFEST, M_NAME, M_MAX_BATCH, M_MAX_DELAY, M_SIZES, M_ACTIVATION,
    M_SOFTMAX, M_CLASSES, M_IMAGE, M_LAYERS, M_HIDDEN, M_HEADS, M_INTER, M_VOCAB, M_MAX_POS,
    M_LABELS, M_SEQ, M_COUNT_
};

static void mkmodel_usage(FILE *out);

static const gf_cli_flag mk_flags[M_COUNT_] = {
    [M_DTYPE] = {"dtype", 0, "FP32|FP16|BF16", 0, "weight dtype (default FP32; F32, F16 work too)",
                 MK_ALL},
    [M_SEED] = {"seed", 0, "N", 0, "random seed (default 1); same seed, same bytes", MK_ALL},
    [M_MANIFEST] = {"manifest", 0, "PATH", 0,
                    "where to write the manifest (default: OUT with\n.safetensors replaced by "
                    ".json)", MK_ALL},
    [M_NAME] = {"name", 0, "NAME", 0, "function name (default: OUT's file name)", MK_ALL},
    [M_MAX_BATCH] = {"max-batch", 0, "N", 0, "manifest max_batch_size (default 8)", MK_ALL},
    [M_MAX_DELAY] = {"max-delay-us", 0, "N", 0, "manifest max_queue_delay_us (default 1000)",
                     MK_ALL},
    [M_SIZES] = {"sizes", 0, "A,B,...", 0, "layer widths, input first (default 784,256,10)",
                 MK_MLP},
    [M_ACTIVATION] = {"activation", 0, "ACT", 0,
                      "between layers: relu, gelu, gelu_tanh, silu, tanh,\nsigmoid (default "
                      "relu); the last layer is identity", MK_MLP},
    [M_SOFTMAX] = {"softmax", 0, NULL, 0, "end with a softmax", MK_MLP},
    [M_CLASSES] = {"classes", 0, "N", 0, "fc outputs (default 1000)", MK_RESNET},
    [M_IMAGE] = {"image", 0, "N", 0,
                 "input height and width in the manifest (default 224;\n0 = any size)",
                 MK_RESNET},
    [M_LAYERS] = {"layers", 0, "N", 0, "encoder layers (default 12)", MK_BERT},
    [M_HIDDEN] = {"hidden", 0, "N", 0, "hidden size (default 768)", MK_BERT},
    [M_HEADS] = {"heads", 0, "N", 0, "attention heads (default 12)", MK_BERT},
    [M_INTER] = {"intermediate", 0, "N", 0, "feed-forward size (default 3072)", MK_BERT},
    [M_VOCAB] = {"vocab", 0, "N", 0, "vocabulary size (default 30522)", MK_BERT},
    [M_MAX_POS] = {"max-positions", 0, "N", 0, "position embeddings (default 512)", MK_BERT},
    [M_LABELS] = {"labels", 0, "N", 0, "classifier outputs (default 2)", MK_BERT},
    [M_SEQ] = {"seq", 0, "N", 0, "sequence length in the manifest (default 0 = any)", MK_BERT},
};

static const gf_cli_cmd mk_cmd = {"mkmodel", mk_flags, M_COUNT_, mkmodel_usage};

static void mkmodel_usage(FILE *out)
{
    fprintf(out, "usage: gpufaas mkmodel KIND [options] OUT.safetensors\n"
                 "\n"
                 "Write weights with random values for a built-in function kind, named as\n"
                 "PyTorch / Hugging Face name them, and the matching manifest (OUT.json, or\n"
                 "--manifest PATH). The pair is validated as a deploy would validate it.\n"
                 "\n"
                 "kinds:\n"
                 "  mlp                      nn.Sequential of Linear layers and activations\n"
                 "  resnet18 resnet34 resnet50 resnet101 resnet152\n"
                 "                           torchvision ResNet (resnet50 FP32: ~100 MB)\n"
                 "  bert                     BertForSequenceClassification; bert-base sizes by\n"
                 "                           default (FP32: ~440 MB)\n"
                 "\n"
                 "options for every kind:\n");
    gf_cli_flags_usage_tag(out, &mk_cmd, MK_ALL);
    fprintf(out, "mlp:\n");
    gf_cli_flags_usage_tag(out, &mk_cmd, MK_MLP);
    fprintf(out, "resnet:\n");
    gf_cli_flags_usage_tag(out, &mk_cmd, MK_RESNET);
    fprintf(out, "bert:\n");
    gf_cli_flags_usage_tag(out, &mk_cmd, MK_BERT);
    fprintf(out, "\n"
                 "examples:\n"
                 "  gpufaas mkmodel resnet50 --classes 10 --dtype FP16 r50.safetensors\n"
                 "  gpufaas mkmodel bert --layers 2 --hidden 128 --heads 2 --intermediate 512 "
                 "b.safetensors\n"
                 "  gpufaas mkmodel mlp --sizes 64,32,10 --softmax mlp.safetensors\n");
}

/* The integer options: their range and where they go. */
static const struct {
    int flag;
    int64_t lo, hi;
    size_t off; /* offsetof(mk_opts, field) of an int64_t */
} mk_ints[] = {
    {M_MAX_BATCH, 1, 1 << 20, offsetof(mk_opts, max_batch)},
    {M_MAX_DELAY, 0, 60000000, offsetof(mk_opts, max_delay_us)},
    {M_CLASSES, 1, MK_MAX_DIM, offsetof(mk_opts, classes)},
    {M_IMAGE, 0, 65536, offsetof(mk_opts, image)},
    {M_LAYERS, 0, 1000, offsetof(mk_opts, layers)},
    {M_HIDDEN, 1, MK_MAX_DIM, offsetof(mk_opts, hidden)},
    {M_HEADS, 1, MK_MAX_DIM, offsetof(mk_opts, heads)},
    {M_INTER, 1, MK_MAX_DIM, offsetof(mk_opts, inter)},
    {M_VOCAB, 1, MK_MAX_DIM, offsetof(mk_opts, vocab)},
    {M_MAX_POS, 1, MK_MAX_DIM, offsetof(mk_opts, max_pos)},
    {M_LABELS, 1, MK_MAX_DIM, offsetof(mk_opts, labels)},
    {M_SEQ, 0, MK_MAX_DIM, offsetof(mk_opts, seq)},
};

static const char *mk_kind_name(int kind)
{
    return kind == MK_MLP ? "mlp" : kind == MK_RESNET ? "resnet" : "bert";
}

/* Parse argv into o. Returns 0, or 2 after printing a usage error. */
static int mk_parse(int argc, char **argv, mk_opts *o)
{
    *o = (mk_opts){.dtype = GF_DT_F32,
                   .seed = 1,
                   .max_batch = 8,
                   .max_delay_us = 1000,
                   .sizes = {784, 256, 10},
                   .nsizes = 3,
                   .act = "relu",
                   .classes = 1000,
                   .image = 224,
                   .layers = 12,
                   .hidden = 768,
                   .heads = 12,
                   .inter = 3072,
                   .vocab = 30522,
                   .max_pos = 512,
                   .labels = 2};
    if (argc < 2) {
        mkmodel_usage(stderr);
        return 2;
    }
    const char *kind = argv[1];
    static const int depths[] = {18, 34, 50, 101, 152};
    if (strcmp(kind, "mlp") == 0)
        o->kind = MK_MLP;
    else if (strcmp(kind, "bert") == 0)
        o->kind = MK_BERT;
    for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++) {
        char name[16];
        snprintf(name, sizeof name, "resnet%d", depths[i]);
        if (strcmp(kind, name) == 0) {
            o->kind = MK_RESNET;
            o->depth = depths[i];
        }
    }
    if (o->kind == 0) {
        fprintf(stderr,
                "gpufaas mkmodel: unknown kind '%s' (mlp, resnet18, resnet34, "
                "resnet50, resnet101, resnet152, bert)\n",
                kind);
        return 2;
    }
    gf_cli_val val[M_COUNT_];
    const char *pos[1];
    int n_pos;
    if (gf_cli_parse(&mk_cmd, NULL, val, argc - 1, argv + 1, pos, 1, &n_pos) != 0)
        return 2;
    o->out = n_pos > 0 ? pos[0] : NULL;
    for (int f = 0; f < M_COUNT_; f++) {
        if (val[f].n > 0 && !(mk_flags[f].tag & (unsigned)o->kind)) {
            fprintf(stderr, "gpufaas mkmodel: option --%s does not apply to kind %s\n",
                    mk_flags[f].name, mk_kind_name(o->kind));
            return 2;
        }
    }
    const char *v;
    if ((v = val[M_DTYPE].v) != NULL) {
        /* KServe's spelling (FP32) or safetensors' (F32) */
        o->dtype = gf_dtype_from_kserve_name(v, strlen(v));
        if (o->dtype == GF_DT_INVALID)
            o->dtype = gf_dtype_from_st_name(v, strlen(v));
        if (o->dtype != GF_DT_F32 && o->dtype != GF_DT_F16 && o->dtype != GF_DT_BF16) {
            fprintf(stderr, "gpufaas mkmodel: --dtype must be FP32, FP16 or BF16, not '%s'\n", v);
            return 2;
        }
    }
    int64_t n;
    if ((v = val[M_SEED].v) != NULL) {
        if (!mk_int(v, 0, INT64_MAX, &n)) {
            fprintf(stderr, "gpufaas mkmodel: bad value '%s' for --seed\n", v);
            return 2;
        }
        o->seed = (uint64_t)n;
    }
    o->manifest = val[M_MANIFEST].v;
    if ((v = val[M_NAME].v) != NULL) {
        if (!gf_function_name_valid(v)) {
            fprintf(stderr, "gpufaas mkmodel: --name '%s' must match ^[a-z0-9][a-z0-9_.-]{0,62}$\n",
                    v);
            return 2;
        }
        o->name = v;
    }
    if ((v = val[M_SIZES].v) != NULL && !mk_sizes(v, o)) {
        fprintf(stderr,
                "gpufaas mkmodel: --sizes needs 2 to %d positive widths separated by commas "
                "(input first), not '%s'\n",
                MK_MAX_LAYERS + 1, v);
        return 2;
    }
    if (val[M_ACTIVATION].v != NULL)
        o->act = val[M_ACTIVATION].v;
    o->softmax = val[M_SOFTMAX].n > 0;
    for (size_t j = 0; j < sizeof mk_ints / sizeof mk_ints[0]; j++) {
        if ((v = val[mk_ints[j].flag].v) == NULL)
            continue;
        if (!mk_int(v, mk_ints[j].lo, mk_ints[j].hi, &n)) {
            fprintf(stderr,
                    "gpufaas mkmodel: --%s must be an integer in [%" PRId64 ", %" PRId64
                    "], not '%s'\n",
                    mk_flags[mk_ints[j].flag].name, mk_ints[j].lo, mk_ints[j].hi, v);
            return 2;
        }
        *(int64_t *)((char *)o + mk_ints[j].off) = n;
    }
    if (o->out == NULL) {
        fprintf(stderr, "gpufaas mkmodel: no output file given\n\n");
        mkmodel_usage(stderr);
        return 2;
    }
    if (o->kind == MK_BERT && o->hidden % o->heads != 0) {
        fprintf(stderr,
                "gpufaas mkmodel: --hidden %" PRId64 " is not a multiple of --heads %" PRId64 "\n",
                o->hidden, o->heads);
        return 2;
    }
    if (o->kind == MK_BERT && o->seq > o->max_pos) {
        fprintf(stderr, "gpufaas mkmodel: --seq %" PRId64 " exceeds --max-positions %" PRId64 "\n",
                o->seq, o->max_pos);
        return 2;
    }
    static const char *const acts[] = {"relu", "gelu",    "gelu_tanh", "silu",
                                       "tanh", "sigmoid", "identity"};
    bool act_ok = false;
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        act_ok = act_ok || strcmp(o->act, acts[i]) == 0;
    if (!act_ok) {
        fprintf(stderr,
                "gpufaas mkmodel: unknown --activation '%s' (relu, gelu, gelu_tanh, "
                "silu, tanh, sigmoid, identity)\n",
                o->act);
        return 2;
    }
    return 0;
}

/* ---- the tensor list ---- */

/* One tensor to generate: values uniform in [lo, hi). */
typedef struct mk_tensor {
    char *name;
    int32_t rank;
    int64_t shape[4];
    float lo, hi;
} mk_tensor;

typedef struct mk_list {
    mk_tensor *t;
    size_t n, cap;
    bool oom;
} mk_list;

static void mk_add(mk_list *l, const char *name, int32_t rank, const int64_t *shape, float lo,
                   float hi)
{
    if (l->oom)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        mk_tensor *t = realloc(l->t, cap * sizeof *t);
        if (t == NULL) {
            l->oom = true;
            return;
        }
        l->t = t;
        l->cap = cap;
    }
    mk_tensor *t = &l->t[l->n];
    t->name = strdup(name);
    if (t->name == NULL) {
        l->oom = true;
        return;
    }
    t->rank = rank;
    memcpy(t->shape, shape, (size_t)rank * sizeof *shape);
    t->lo = lo;
    t->hi = hi;
    l->n++;
}

static void mk_list_free(mk_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->t[i].name);
    free(l->t);
}

/* A Linear layer `prefix`: weight [out, in] with the variance of 1/in, bias
 * [out] small. */
static void mk_linear(mk_list *l, const char *prefix, int64_t out, int64_t in)
{
    char name[160];
    float a = sqrtf(3.0f / (float)in);
    snprintf(name, sizeof name, "%s.weight", prefix);
    mk_add(l, name, 2, (int64_t[]){out, in}, -a, a);
    snprintf(name, sizeof name, "%s.bias", prefix);
    mk_add(l, name, 1, &out, -0.1f, 0.1f);
}

/* A conv (He-uniform weights) followed by its batchnorm. */
static void mk_conv_bn(mk_list *l, const char *conv, const char *bn, int64_t oc, int64_t ic,
                       int64_t k)
{
    char name[160];
    float a = sqrtf(6.0f / (float)(ic * k * k));
    snprintf(name, sizeof name, "%s.weight", conv);
    mk_add(l, name, 4, (int64_t[]){oc, ic, k, k}, -a, a);
    static const struct {
        const char *part;
        float lo, hi;
    } bn_parts[] = {{"weight", 0.5f, 1.0f},
                    {"bias", -0.1f, 0.1f},
                    {"running_mean", -0.1f, 0.1f},
                    {"running_var", 0.5f, 1.5f}};
    for (size_t i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", bn, bn_parts[i].part);
        mk_add(l, name, 1, &oc, bn_parts[i].lo, bn_parts[i].hi);
    }
}

static void mk_build_mlp(const mk_opts *o, mk_list *l)
{
    for (int i = 0; i + 1 < o->nsizes; i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "%d", 2 * i); /* Linear at even Sequential indices */
        mk_linear(l, prefix, o->sizes[i + 1], o->sizes[i]);
    }
}

static void mk_build_resnet(const mk_opts *o, mk_list *l)
{
    static const struct {
        int depth, blocks[4];
    } table[] = {{18, {2, 2, 2, 2}},
                 {34, {3, 4, 6, 3}},
                 {50, {3, 4, 6, 3}},
                 {101, {3, 4, 23, 3}},
                 {152, {3, 8, 36, 3}}};
    const int *blocks = NULL;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].depth == o->depth)
            blocks = table[i].blocks;
    bool bottleneck = o->depth >= 50;
    int64_t e = bottleneck ? 4 : 1, in = 64;
    mk_conv_bn(l, "conv1", "bn1", 64, 3, 7);
    for (int li = 0; li < 4; li++) {
        int64_t planes = (int64_t)64 << li;
        for (int b = 0; b < blocks[li]; b++) {
            char conv[64], bn[64];
            int64_t s = (b == 0 && li > 0) ? 2 : 1;
            int nconv = bottleneck ? 3 : 2;
            for (int c = 0; c < nconv; c++) {
                int64_t ic = c == 0 ? in : planes;
                int64_t oc = bottleneck && c == 2 ? planes * 4 : planes;
                int64_t k = bottleneck && c != 1 ? 1 : 3;
                snprintf(conv, sizeof conv, "layer%d.%d.conv%d", li + 1, b, c + 1);
                snprintf(bn, sizeof bn, "layer%d.%d.bn%d", li + 1, b, c + 1);
                mk_conv_bn(l, conv, bn, oc, ic, k);
            }
            if (s != 1 || in != planes * e) {
                snprintf(conv, sizeof conv, "layer%d.%d.downsample.0", li + 1, b);
                snprintf(bn, sizeof bn, "layer%d.%d.downsample.1", li + 1, b);
                mk_conv_bn(l, conv, bn, planes * e, in, 1);
            }
            in = planes * e;
        }
    }
    mk_linear(l, "fc", o->classes, in);
}

static void mk_layernorm(mk_list *l, const char *prefix, int64_t h)
{
    char name[160];
    snprintf(name, sizeof name, "%s.weight", prefix);
    mk_add(l, name, 1, &h, 0.9f, 1.1f);
    snprintf(name, sizeof name, "%s.bias", prefix);
    mk_add(l, name, 1, &h, -0.1f, 0.1f);
}

static void mk_build_bert(const mk_opts *o, mk_list *l)
{
    int64_t h = o->hidden;
    mk_add(l, "bert.embeddings.word_embeddings.weight", 2, (int64_t[]){o->vocab, h}, -1, 1);
    mk_add(l, "bert.embeddings.position_embeddings.weight", 2, (int64_t[]){o->max_pos, h}, -0.5f,
           0.5f);
    mk_add(l, "bert.embeddings.token_type_embeddings.weight", 2, (int64_t[]){2, h}, -0.5f, 0.5f);
    mk_layernorm(l, "bert.embeddings.LayerNorm", h);
    for (int64_t i = 0; i < o->layers; i++) {
        char p[128];
#define MK_PART(suffix) (snprintf(p, sizeof p, "bert.encoder.layer.%" PRId64 ".%s", i, suffix), p)
        mk_linear(l, MK_PART("attention.self.query"), h, h);
        mk_linear(l, MK_PART("attention.self.key"), h, h);
        mk_linear(l, MK_PART("attention.self.value"), h, h);
        mk_linear(l, MK_PART("attention.output.dense"), h, h);
        mk_layernorm(l, MK_PART("attention.output.LayerNorm"), h);
        mk_linear(l, MK_PART("intermediate.dense"), o->inter, h);
        mk_linear(l, MK_PART("output.dense"), h, o->inter);
        mk_layernorm(l, MK_PART("output.LayerNorm"), h);
#undef MK_PART
    }
    mk_linear(l, "bert.pooler.dense", h, h);
    mk_linear(l, "classifier", o->labels, h);
}

/* ---- writing ---- */

static uint64_t mk_splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Fill n elements of dtype dt with values uniform in [lo, hi). */
static void mk_fill(void *data, gf_dtype dt, size_t n, float lo, float hi, uint64_t seed)
{
    uint64_t s = seed;
    float span = hi - lo;
    for (size_t i = 0; i < n; i++) {
        float u = (float)(mk_splitmix(&s) >> 40) * (1.0f / 16777216.0f);
        float v = lo + span * u;
        if (dt == GF_DT_F32)
            ((float *)data)[i] = v;
        else if (dt == GF_DT_F16)
            ((uint16_t *)data)[i] = gf_f32_to_f16(v);
        else
            ((uint16_t *)data)[i] = gf_f32_to_bf16(v);
    }
}

/* Write text to path through a temporary file and a rename. */
static int mk_write_text(const char *path, const char *text, size_t len)
{
    size_t plen = strlen(path) + 16;
    char *tmp = malloc(plen);
    if (tmp == NULL)
        return -1;
    snprintf(tmp, plen, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    bool ok = f != NULL && fwrite(text, 1, len, f) == len;
    if (f != NULL && fclose(f) != 0)
        ok = false;
    if (ok && rename(tmp, path) != 0)
        ok = false;
    if (!ok) {
        fprintf(stderr, "gpufaas mkmodel: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    return ok ? 0 : -1;
}

/* The manifest for the generated weights. */
static gf_status mk_manifest(const mk_opts *o, const char *name, gf_buf *b)
{
    gf_status st = gf_buf_printf(b, "{\n  \"name\": \"%s\",\n  \"kind\": \"%s\",\n", name,
                                 mk_kind_name(o->kind));
    if (o->kind == MK_MLP) {
        st = st ? st
                : gf_buf_printf(b,
                                "  \"inputs\": [{\"name\": \"x\", \"datatype\": \"FP32\", "
                                "\"shape\": [-1, %" PRId64 "]}],\n"
                                "  \"outputs\": [{\"name\": \"y\", \"datatype\": "
                                "\"FP32\", \"shape\": [-1, %" PRId64 "]}],\n",
                                o->sizes[0], o->sizes[o->nsizes - 1]);
    } else if (o->kind == MK_RESNET) {
        int64_t hw = o->image > 0 ? o->image : -1;
        st = st ? st
                : gf_buf_printf(b,
                                "  \"inputs\": [{\"name\": \"input\", \"datatype\": "
                                "\"FP32\", \"shape\": [-1, 3, %" PRId64 ", %" PRId64
                                "]}],\n  \"outputs\": [{\"name\": \"logits\", "
                                "\"datatype\": \"FP32\", \"shape\": [-1, %" PRId64 "]}],\n",
                                hw, hw, o->classes);
    } else {
        int64_t s = o->seq > 0 ? o->seq : -1;
        st = st ? st
                : gf_buf_printf(b,
                                "  \"inputs\": [\n    {\"name\": \"input_ids\", "
                                "\"datatype\": \"INT64\", \"shape\": [-1, %" PRId64
                                "]},\n    {\"name\": \"attention_mask\", \"datatype\": "
                                "\"INT64\", \"shape\": [-1, %" PRId64 "]}\n  ],\n"
                                "  \"outputs\": [{\"name\": \"logits\", \"datatype\": "
                                "\"FP32\", \"shape\": [-1, %" PRId64 "]}],\n",
                                s, s, o->labels);
    }
    st = st ? st
            : gf_buf_printf(b,
                            "  \"max_batch_size\": %" PRId64 ",\n  \"max_queue_delay_us\": %" PRId64
                            ",\n  \"config\": ",
                            o->max_batch, o->max_delay_us);
    if (o->kind == MK_MLP) {
        st = st ? st : gf_buf_printf(b, "{\"activations\": [");
        for (int i = 0; i + 1 < o->nsizes; i++)
            st = st ? st
                    : gf_buf_printf(b, "%s\"%s\"", i ? ", " : "",
                                    i + 2 < o->nsizes ? o->act : "identity");
        st = st ? st : gf_buf_printf(b, "], \"softmax\": %s}", o->softmax ? "true" : "false");
    } else if (o->kind == MK_RESNET) {
        st = st ? st
                : gf_buf_printf(b, "{\"depth\": %d, \"num_classes\": %" PRId64 "}", o->depth,
                                o->classes);
    } else {
        st = st ? st
                : gf_buf_printf(b,
                                "{\n    \"hidden_size\": %" PRId64 ",\n"
                                "    \"num_attention_heads\": %" PRId64 ",\n"
                                "    \"num_hidden_layers\": %" PRId64 ",\n"
                                "    \"intermediate_size\": %" PRId64 ",\n"
                                "    \"max_position_embeddings\": %" PRId64 ",\n"
                                "    \"vocab_size\": %" PRId64 ",\n"
                                "    \"type_vocab_size\": 2,\n"
                                "    \"hidden_act\": \"gelu\",\n"
                                "    \"layer_norm_eps\": 1e-12\n  }",
                                o->hidden, o->heads, o->layers, o->inter, o->max_pos, o->vocab);
    }
    return st ? st : gf_buf_printf(b, "\n}\n");
}

/* The default function name: OUT's file name without its extension, made
 * lower case with other characters turned into '-'. */
static void mk_default_name(const char *out, char *name, size_t cap)
{
    const char *base = strrchr(out, '/');
    base = base ? base + 1 : out;
    size_t n = strcspn(base, ".");
    if (n == 0)
        n = strlen(base);
    if (n >= cap)
        n = cap - 1;
    for (size_t i = 0; i < n; i++) {
        char c = base[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
        name[i] = ok ? c : '-';
    }
    name[n] = '\0';
}

/* Validate the weights at path against the manifest in a gpufaas-worker
 * --validate child, working in a directory beside the weights. 0 when they
 * fit; else the message is printed. */
static int mk_validate(const char *path, const gf_buf *man)
{
    char *dir = strdup(path);
    char *slash = dir != NULL ? strrchr(dir, '/') : NULL;
    if (slash != NULL)
        *slash = '\0';
    char *worker = gf_worker_program_find(NULL);
    gf_oneshot_cfg cfg = {worker, false, NULL, 0, 0};
    gf_validation v;
    gf_err err;
    gf_err_clear(&err);
    const char *uploads[1] = {path};
    gf_fn_deploy_in in = {man->data, man->len, NULL, NULL, uploads, 1};
    gf_status st = dir == NULL ? gf_err_set(&err, GF_ERR_NOMEM, "out of memory")
                   : gf_oneshot_validate(&cfg, &in, slash != NULL ? dir : ".", &v, &err);
    if (st == GF_OK)
        gf_validation_deinit(&v);
    else
        fprintf(stderr, "gpufaas mkmodel: internal error: the generated function does not "
                "validate: %s\n", gf_err_msg(&err));
    free(worker);
    free(dir);
    return st == GF_OK ? 0 : 1;
}

int gf_cmd_mkmodel(int argc, char **argv)
{
    if (gf_cli_wants_help(argc, argv)) {
        mkmodel_usage(stdout);
        return 0;
    }
    mk_opts o;
    int rc = mk_parse(argc, argv, &o);
    if (rc != 0)
        return rc;
    char name[64];
    if (o.name != NULL) {
        snprintf(name, sizeof name, "%s", o.name);
    } else {
        mk_default_name(o.out, name, sizeof name);
        if (!gf_function_name_valid(name)) {
            fprintf(stderr,
                    "gpufaas mkmodel: cannot make a function name from '%s'; give "
                    "--name\n",
                    o.out);
            return 2;
        }
    }
    char *mpath = NULL;
    if (o.manifest != NULL) {
        mpath = strdup(o.manifest);
    } else {
        size_t len = strlen(o.out), ext = strlen(".safetensors");
        if (len > ext && strcmp(o.out + len - ext, ".safetensors") == 0)
            len -= ext;
        mpath = malloc(len + 6);
        if (mpath != NULL)
            snprintf(mpath, len + 6, "%.*s.json", (int)len, o.out);
    }
    mk_list l = {0};
    gf_st_wtensor *wt = NULL;
    void **bufs = NULL;
    gf_buf man;
    gf_buf_init(&man);
    rc = 1;
    if (mpath == NULL)
        goto oom;
    if (o.kind == MK_MLP)
        mk_build_mlp(&o, &l);
    else if (o.kind == MK_RESNET)
        mk_build_resnet(&o, &l);
    else
        mk_build_bert(&o, &l);
    if (l.oom)
        goto oom;
    wt = calloc(l.n, sizeof *wt);
    bufs = calloc(l.n, sizeof *bufs);
    if (wt == NULL || bufs == NULL)
        goto oom;
    uint64_t total = 0, params = 0;
    size_t esize = gf_dtype_size(o.dtype);
    for (size_t i = 0; i < l.n; i++) {
        const mk_tensor *t = &l.t[i];
        gf_tensor d;
        gf_err e;
        if (gf_tensor_init(&d, o.dtype, t->rank, t->shape, NULL, GF_MEM_HOST, -1, &e) != GF_OK ||
            total + d.nbytes < total) {
            fprintf(stderr, "gpufaas mkmodel: tensor '%s' is too large\n", t->name);
            goto done;
        }
        total += d.nbytes;
        params += d.nbytes / esize;
        bufs[i] = malloc(d.nbytes ? d.nbytes : 1);
        if (bufs[i] == NULL) {
            fprintf(stderr, "gpufaas mkmodel: out of memory for tensor '%s' (%zu bytes)\n", t->name,
                    d.nbytes);
            goto done;
        }
        mk_fill(bufs[i], o.dtype, d.nbytes / esize, t->lo, t->hi, o.seed * 1000003u + i);
        wt[i] = (gf_st_wtensor){t->name, o.dtype, t->rank, t->shape, bufs[i]};
    }
    gf_err err;
    gf_err_clear(&err);
    const char *meta[] = {"format", "pt", "gpufaas.mkmodel", argv[1]};
    if (gf_st_write(o.out, wt, l.n, meta, 2, &err) != GF_OK) {
        fprintf(stderr, "gpufaas mkmodel: %s\n", gf_err_msg(&err));
        goto done;
    }
    if (mk_manifest(&o, name, &man) != GF_OK)
        goto oom;
    /* Check the pair as a deploy would (in a gpufaas-worker --validate
     * child), before publishing the manifest. */
    if (mk_validate(o.out, &man) != 0)
        goto done;
    if (mk_write_text(mpath, man.data, man.len) != 0)
        goto done;
    printf("wrote %s: %s, %zu tensors, %" PRIu64 " parameters, %s, %.1f MB\n", o.out, argv[1], l.n,
           params, gf_dtype_kserve_name(o.dtype), (double)total / 1e6);
    printf("wrote %s: function '%s' (kind %s)\n", mpath, name, mk_kind_name(o.kind));
    rc = 0;
    goto done;
oom:
    fprintf(stderr, "gpufaas mkmodel: out of memory\n");
done:
    gf_buf_deinit(&man);
    for (size_t i = 0; bufs != NULL && i < l.n; i++)
        free(bufs[i]);
    free(bufs);
    free(wt);
    mk_list_free(&l);
    free(mpath);
    return rc;
}
