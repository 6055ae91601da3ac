/* gpufaas — UTF-8 validation (RFC 3629, table 3-7 of the Unicode standard). */
#include "core/utf8.h"

size_t gf_utf8_seq_len(const char *s, size_t len)
{
    if (len == 0)
        return 0;
    const unsigned char *p = (const unsigned char *)s;
    unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
    } else if (c == 0xe0) {
        n = 3;
        lo = 0xa0; /* no overlongs */
    } else if (c >= 0xe1 && c <= 0xec) {
        n = 3;
    } else if (c == 0xed) {
        n = 3;
        hi = 0x9f; /* no surrogates */
    } else if (c >= 0xee && c <= 0xef) {
        n = 3;
    } else if (c == 0xf0) {
        n = 4;
        lo = 0x90; /* no overlongs */
    } else if (c >= 0xf1 && c <= 0xf3) {
        n = 4;
    } else if (c == 0xf4) {
        n = 4;
        hi = 0x8f; /* <= U+10FFFF */
    } else {
        return 0; /* continuation byte, C0, C1 or F5..FF */
    }
    if (len < n)
        return 0;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return n;
}

bool gf_utf8_valid(const char *s, size_t len, size_t *bad_at)
{
    size_t i = 0;
    while (i < len) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        size_t n = gf_utf8_seq_len(s + i, len - i);
        if (n == 0) {
            if (bad_at != NULL)
                *bad_at = i;
            return false;
        }
        i += n;
    }
    return true;
}

size_t gf_utf8_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp >= 0xd800 && cp <= 0xdfff)
        return 0;
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    if (cp <= 0x10ffff) {
        out[0] = (char)(0xf0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[3] = (char)(0x80 | (cp & 0x3f));
        return 4;
    }
    return 0;
}
