/* gpufaas — the weights a kind sees while it loads. */
#include "functions/weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/filetype.h"
#include "functions/runtime.h"

gf_status gf_fn_weights_open(const char *path, gf_st_file **out, gf_err *err)
{
    gf_status st = gf_st_open(path, out, err);
    if (st != GF_ERR_FORMAT)
        return st;
    unsigned char head[64];
    size_t n = 0;
    FILE *f = fopen(path, "rb");
    if (f != NULL) {
        n = fread(head, 1, sizeof head, f);
        fclose(f);
    }
    if (gf_filetype_sniff(head, n) != GF_FILE_ONNX)
        return st;
    if (gf_fn_kind_find("onnx") != NULL)
        return gf_err_set(err, GF_ERR_FORMAT,
                          "not a safetensors file: it is an ONNX model. Deploy it with kind "
                          "\"onnx\", sending the file as the part \"model\" instead of "
                          "\"weights\" (docs/functions.md)");
    return gf_err_set(err, GF_ERR_FORMAT,
                      "not a safetensors file: it is an ONNX model, and this server does not "
                      "run ONNX models yet. For a built-in kind, save the PyTorch model's "
                      "state_dict with safetensors.torch.save_file");
}

gf_status gf_fn_weights_init(gf_fn_weights *w, gf_st_file *f, const gf_manifest *mf, gf_err *err)
{
    memset(w, 0, sizeof *w);
    w->f = f;
    w->mf = mf;
    size_t n = gf_st_count(f);
    w->visible = calloc(n ? n : 1, sizeof *w->visible);
    w->used = calloc(n ? n : 1, sizeof *w->used);
    w->hidden = calloc(n ? n : 1, sizeof *w->hidden);
    if (w->visible == NULL || w->used == NULL || w->hidden == NULL) {
        gf_fn_weights_deinit(w);
        return gf_err_set(err, GF_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        w->hidden[i] = gf_manifest_ignores_weight(mf, gf_st_at(f, i)->name);
        if (!w->hidden[i])
            w->visible[w->n++] = i;
    }
    return GF_OK;
}

void gf_fn_weights_deinit(gf_fn_weights *w)
{
    free(w->visible);
    free(w->used);
    free(w->hidden);
    memset(w, 0, sizeof *w);
}

static long visible_index(const gf_fn_weights *w, const char *name)
{
    long i = gf_st_index(w->f, name);
    return i >= 0 && !w->hidden[i] ? i : -1;
}

const gf_st_tensor *gf_fn_weights_find(const gf_fn_weights *w, const char *name)
{
    long i = visible_index(w, name);
    return i >= 0 ? gf_st_at(w->f, (size_t)i) : NULL;
}

const gf_st_tensor *gf_fn_weights_at(const gf_fn_weights *w, size_t i)
{
    return i < w->n ? gf_st_at(w->f, w->visible[i]) : NULL;
}

bool gf_fn_weights_use(gf_fn_weights *w, const char *name)
{
    long i = visible_index(w, name);
    if (i < 0)
        return false;
    w->used[i] = true;
    return true;
}

/* What a left-over tensor looks like, by the names PyTorch, torchvision and
 * Hugging Face give: the hint that tells a user what their file holds. */
static const struct {
    char where; /* 'p' prefix, 's' suffix, 'c' contains */
    const char *pattern, *hint;
} gf_unused_hints[] = {
    {'s', ".running_mean", "a BatchNorm's statistics"},
    {'s', ".running_var", "a BatchNorm's statistics"},
    {'s', ".num_batches_tracked", "a BatchNorm's counter"},
    {'s', ".weight_orig", "spectral_norm's tensors: remove it before saving"},
    {'s', ".weight_u", "spectral_norm's tensors: remove it before saving"},
    {'s', ".weight_g", "weight_norm's tensors: remove it before saving"},
    {'c', ".parametrizations.", "a parametrization: remove_parametrizations before saving"},
    {'s', ".in_proj_weight", "an nn.MultiheadAttention"},
    {'p', "module.", "saved from DataParallel: save model.module.state_dict()"},
    {'p', "_orig_mod.", "saved from torch.compile: save the original module's state_dict()"},
    {'p', "cls.predictions.", "a pre-training head: BertForMaskedLM or BertForPreTraining?"},
    {'p', "cls.seq_relationship.", "a pre-training head: BertForPreTraining?"},
    {'p', "lm_head.", "a language-model head"},
    {'c', "aux", "an auxiliary head?"},
};

static const char *unused_hint(const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof gf_unused_hints / sizeof gf_unused_hints[0]; i++) {
        const char *p = gf_unused_hints[i].pattern;
        size_t k = strlen(p);
        bool hit = gf_unused_hints[i].where == 'p'   ? strncmp(name, p, k) == 0
                   : gf_unused_hints[i].where == 's' ? n >= k && strcmp(name + n - k, p) == 0
                                                     : strstr(name, p) != NULL;
        if (hit)
            return gf_unused_hints[i].hint;
    }
    return NULL;
}

gf_status gf_fn_weights_check_unused(const gf_fn_weights *w, const char *kind, gf_err *err)
{
    size_t n_unused = 0, first = 0;
    for (size_t i = 0; i < w->n; i++)
        if (!w->used[w->visible[i]] && n_unused++ == 0)
            first = w->visible[i];
    if (n_unused == 0)
        return GF_OK;
    const char *name = gf_st_at(w->f, first)->name, *hint = unused_hint(name);
    /* the others last: a long list is what a full message buffer cuts */
    char others[256] = "";
    size_t len = 0, listed = 0;
    for (size_t i = 0; i < w->n && listed < 3 && n_unused > 1; i++) {
        size_t fi = w->visible[i];
        if (w->used[fi] || fi == first)
            continue;
        int k = snprintf(others + len, sizeof others - len, "%s'%.48s'",
                         listed == 0 ? " (" : ", ", gf_st_at(w->f, fi)->name);
        if (k < 0 || (size_t)k >= sizeof others - len)
            break;
        len += (size_t)k;
        listed++;
    }
    if (n_unused > 1)
        snprintf(others + len, sizeof others - len, "%s: %zu in all)",
                 n_unused - 1 > listed ? " and more" : "", n_unused);
    bool many = n_unused > 1;
    return gf_err_set(err, GF_ERR_INVALID,
                      "tensor '%.96s'%s%s%s is not used by kind %s, so the model would be served "
                      "without it. Remove %s from the file, or list %s in the manifest's "
                      "\"ignore_weights\" to deploy without %s%s%s",
                      name, hint ? " (" : "", hint ? hint : "", hint ? ")" : "", kind,
                      many ? "such tensors" : "it", many ? "them" : "it", many ? "them" : "it",
                      many ? "; unused" : "", others);
}

const char *gf_fn_weights_missing_hint(const gf_fn_weights *w, const char *name, char *buf,
                                       size_t cap)
{
    size_t n = strlen(name);
    buf[0] = '\0';
    for (size_t i = 0; i < w->n; i++) {
        const char *have = gf_st_at(w->f, w->visible[i])->name;
        size_t k = strlen(have);
        if (k > n + 1 && have[k - n - 1] == '.' && strcmp(have + k - n, name) == 0) {
            snprintf(buf, cap, " (the file has '%.96s': strip the prefix '%.*s')", have,
                     (int)(k - n) > 64 ? 64 : (int)(k - n), have);
            break;
        }
    }
    return buf;
}
