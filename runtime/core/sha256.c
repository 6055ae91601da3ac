/* gpufaas — SHA-256 (FIPS 180-4, section 6.2). */
#include "core/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* First 32 bits of the fractional parts of the cube roots of the first 64
 * primes (FIPS 180-4, 4.2.2). */
static const uint32_t gf_sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t gf_rotr(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32 - n));
}

static inline uint32_t gf_load_be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void gf_store_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Process one 64-byte block p (borrowed). */
static void gf_sha256_block(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
        w[t] = gf_load_be32(p + 4 * t);
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = gf_rotr(w[t - 15], 7) ^ gf_rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = gf_rotr(w[t - 2], 17) ^ gf_rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t S1 = gf_rotr(e, 6) ^ gf_rotr(e, 11) ^ gf_rotr(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = k + S1 + ch + gf_sha256_k[t] + w[t];
        uint32_t S0 = gf_rotr(a, 2) ^ gf_rotr(a, 13) ^ gf_rotr(a, 22);
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = S0 + maj;
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

void gf_sha256_init(gf_sha256 *c)
{
    /* First 32 bits of the fractional parts of the square roots of the first
     * 8 primes (FIPS 180-4, 5.3.3). */
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, iv, sizeof iv);
    c->total = 0;
    c->fill = 0;
}

void gf_sha256_update(gf_sha256 *c, const void *data, size_t n)
{
    const unsigned char *p = data;
    c->total += n;
    if (c->fill > 0) {
        size_t take = 64 - c->fill < n ? 64 - c->fill : n;
        memcpy(c->block + c->fill, p, take);
        c->fill += take;
        p += take;
        n -= take;
        if (c->fill < 64)
            return;
        gf_sha256_block(c->h, c->block);
        c->fill = 0;
    }
    while (n >= 64) {
        gf_sha256_block(c->h, p);
        p += 64;
        n -= 64;
    }
    if (n > 0) {
        memcpy(c->block, p, n);
        c->fill = n;
    }
}

void gf_sha256_final(gf_sha256 *c, unsigned char out[GF_SHA256_LEN])
{
    /* Padding: 0x80, zeros up to 56 mod 64, then the length in bits as a
     * 64-bit big-endian number. (Messages are < 2^61 bytes: total * 8 fits.) */
    uint64_t bits = c->total * 8;
    c->block[c->fill++] = 0x80;
    if (c->fill > 56) {
        memset(c->block + c->fill, 0, 64 - c->fill);
        gf_sha256_block(c->h, c->block);
        c->fill = 0;
    }
    memset(c->block + c->fill, 0, 56 - c->fill);
    gf_store_be32(c->block + 56, (uint32_t)(bits >> 32));
    gf_store_be32(c->block + 60, (uint32_t)bits);
    gf_sha256_block(c->h, c->block);
    for (int i = 0; i < 8; i++)
        gf_store_be32(out + 4 * i, c->h[i]);
    memset(c, 0, sizeof *c);
}

void gf_sha256_buf(const void *data, size_t n, unsigned char out[GF_SHA256_LEN])
{
    gf_sha256 c;
    gf_sha256_init(&c);
    gf_sha256_update(&c, data, n);
    gf_sha256_final(&c, out);
}

void gf_sha256_hex(const unsigned char digest[GF_SHA256_LEN], char hex[GF_SHA256_HEX_LEN])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < GF_SHA256_LEN; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[64] = '\0';
}

int gf_sha256_hex_valid(const char *s)
{
    if (s == NULL)
        return 0;
    for (int i = 0; i < 64; i++) {
        char ch = s[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
            return 0;
    }
    return s[64] == '\0';
}

gf_status gf_sha256_file(const char *path, char hex[GF_SHA256_HEX_LEN], uint64_t *size_out,
                         gf_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return gf_err_set(err, e == ENOENT ? GF_ERR_NOT_FOUND : GF_ERR_IO, "open(%s): %s", path,
                          strerror(e));
    }
    gf_sha256 c;
    gf_sha256_init(&c);
    unsigned char buf[1 << 16];
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r == 0)
            break;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            return gf_err_set(err, GF_ERR_IO, "read(%s): %s", path, strerror(e));
        }
        gf_sha256_update(&c, buf, (size_t)r);
    }
    close(fd);
    if (size_out != NULL)
        *size_out = c.total;
    unsigned char d[GF_SHA256_LEN];
    gf_sha256_final(&c, d);
    gf_sha256_hex(d, hex);
    return GF_OK;
}
