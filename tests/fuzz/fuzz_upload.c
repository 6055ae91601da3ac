/* libFuzzer target: the deploy upload's state machine (gateway/http/
 * upload.c) as libmicrohttpd's post processor drives it: a sequence of part
 * chunks decoded from the input (1 byte: which part, 2 bytes: length, then
 * the chunk), then the end of the body. Staged files go to a private
 * directory and must all be removed when the upload is freed. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/http/upload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char dir[] = "/tmp/gf-fuzz-upload-XXXXXX";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (mkdtemp(dir) == NULL)
        abort();
    return 0;
}

static int dir_entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    if (d != NULL)
        closedir(d);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const keys[] = {"manifest", "weights", "model", "model_data", "name",
                                       "other", ""};
    static const char *const files[] = {"m.json", "w.safetensors", "m.onnx", "m.data", NULL,
                                        "x", NULL};
    gf_upload *u;
    gf_err err;
    if (gf_upload_new(dir, 1u << 20, &u, &err) != GF_OK)
        abort();
    uint64_t off[7] = {0};
    size_t i = 0;
    while (i + 3 <= size) {
        unsigned k = data[i] % 7;
        size_t n = (size_t)data[i + 1] | (size_t)data[i + 2] << 8;
        i += 3;
        if (n > size - i)
            n = size - i;
        gf_upload_iter(u, MHD_POSTDATA_KIND, keys[k], files[k], "application/octet-stream",
                       NULL, (const char *)data + i, off[k], n);
        off[k] += n;
        i += n;
    }
    if (gf_upload_finish(u, &err) == GF_OK) {
        size_t mlen;
        (void)gf_upload_manifest(u, &mlen);
        (void)gf_upload_sha256(u);
    }
    gf_upload_free(u);
    if (dir_entries() != 0)
        abort(); /* a staged file was left behind */
    return 0;
}
