/* gpufaas — SHA-256 through libcrypto's EVP interface (see sha256.h). */
#include "store/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

/* Reads of 1 MiB: large enough that the system calls cost nothing next to
 * the hashing, small enough to stay in the L2 cache. */
#define GF_SHA256_CHUNK ((size_t)1 << 20)

gf_status gf_sha256_init(gf_sha256 *c, gf_err *err)
{
    c->failed = false;
    EVP_MD_CTX *md = c->md != NULL ? c->md : EVP_MD_CTX_new();
    if (md == NULL)
        return gf_err_set(err, GF_ERR_NOMEM, "%s: EVP_MD_CTX_new failed", __func__);
    c->md = md;
    if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
        return gf_err_set(err, GF_ERR_INTERNAL, "%s: EVP_DigestInit_ex(sha256) failed", __func__);
    return GF_OK;
}

void gf_sha256_update(gf_sha256 *c, const void *data, size_t n)
{
    if (n == 0 || c->failed)
        return;
    if (c->md == NULL || EVP_DigestUpdate(c->md, data, n) != 1)
        c->failed = true;
}

gf_status gf_sha256_final(gf_sha256 *c, char hex[GF_SHA256_HEX_LEN], gf_err *err)
{
    hex[0] = '\0';
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (c->failed || c->md == NULL || EVP_DigestFinal_ex(c->md, d, &len) != 1 ||
        len != GF_SHA256_LEN)
        return gf_err_set(err, GF_ERR_INTERNAL, "%s: the SHA-256 computation failed", __func__);
    static const char digits[] = "0123456789abcdef";
    for (unsigned i = 0; i < GF_SHA256_LEN; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[2 * GF_SHA256_LEN] = '\0';
    return GF_OK;
}

void gf_sha256_deinit(gf_sha256 *c)
{
    EVP_MD_CTX_free(c->md); /* NULL is a no-op */
    c->md = NULL;
}

gf_status gf_sha256_buf(const void *data, size_t n, char hex[GF_SHA256_HEX_LEN], gf_err *err)
{
    gf_sha256 c = {0};
    gf_status st = gf_sha256_init(&c, err);
    if (st == GF_OK) {
        gf_sha256_update(&c, data, n);
        st = gf_sha256_final(&c, hex, err);
    }
    gf_sha256_deinit(&c);
    return st;
}

bool gf_sha256_hex_valid(const char *s)
{
    if (s == NULL)
        return false;
    for (int i = 0; i < 2 * GF_SHA256_LEN; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return s[2 * GF_SHA256_LEN] == '\0';
}

gf_status gf_sha256_file_until(const char *path, const _Atomic bool *stop,
                               char hex[GF_SHA256_HEX_LEN], uint64_t *size_out, gf_err *err)
{
    hex[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return gf_err_set(err, e == ENOENT ? GF_ERR_NOT_FOUND : GF_ERR_IO, "%s: open: %s", path,
                          strerror(e));
    }
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    char *buf = malloc(GF_SHA256_CHUNK);
    gf_sha256 c = {0};
    gf_status st = buf == NULL ? gf_err_set(err, GF_ERR_NOMEM, "%s: out of memory", __func__)
                               : gf_sha256_init(&c, err);
    uint64_t total = 0;
    while (st == GF_OK) {
        if (stop != NULL && atomic_load_explicit(stop, memory_order_relaxed)) {
            st = gf_err_set(err, GF_ERR_CLOSED, "%s: hashing stopped", path);
            break;
        }
        ssize_t r = read(fd, buf, GF_SHA256_CHUNK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            st = gf_err_set(err, GF_ERR_IO, "%s: read: %s", path, strerror(errno));
            break;
        }
        if (r == 0)
            break;
        gf_sha256_update(&c, buf, (size_t)r);
        total += (uint64_t)r;
    }
    if (st == GF_OK)
        st = gf_sha256_final(&c, hex, err);
    gf_sha256_deinit(&c);
    free(buf);
    close(fd);
    if (st == GF_OK && size_out != NULL)
        *size_out = total;
    return st;
}

gf_status gf_sha256_file(const char *path, char hex[GF_SHA256_HEX_LEN], uint64_t *size_out,
                         gf_err *err)
{
    return gf_sha256_file_until(path, NULL, hex, size_out, err);
}
