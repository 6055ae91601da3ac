/* gpufaas — a float as printf's "%.Ng" writes it, without printf (see floatfmt.h). */
#include "core/floatfmt.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* 10^0 .. 10^60: exact up to 10^22, the nearest double beyond. */
static const double pow10_tab[] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11, 1e12,
    1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25,
    1e26, 1e27, 1e28, 1e29, 1e30, 1e31, 1e32, 1e33, 1e34, 1e35, 1e36, 1e37, 1e38,
    1e39, 1e40, 1e41, 1e42, 1e43, 1e44, 1e45, 1e46, 1e47, 1e48, 1e49, 1e50, 1e51,
    1e52, 1e53, 1e54, 1e55, 1e56, 1e57, 1e58, 1e59, 1e60};

/* v (> 0) / 10^e, one rounding for the power and one for the operation:
 * a relative error of at most ~1.5 * 2^-53. |e| <= 60. */
static double scale(double v, int e)
{
    return e >= 0 ? v / pow10_tab[e] : v * pow10_tab[-e];
}

static int fallback(char *out, float f, int precision)
{
    int n = snprintf(out, 32, "%.*g", precision, (double)f);
    return n < 0 ? 0 : n;
}

int gf_fmt_float_g(char *out, float f, int precision)
{
    if (!isfinite(f) || precision < 1 || precision > 9)
        return fallback(out, f, precision);
    char *p = out;
    if (signbit(f))
        *p++ = '-';
    double v = fabs((double)f); /* exact */
    if (v == 0) {
        *p++ = '0';
        *p = '\0';
        return (int)(p - out);
    }
    /* the decimal exponent k, first from the binary one (log10 2 ~ 0.30103),
     * then corrected so that the scaled value has precision digits */
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    uint32_t be = (bits >> 23) & 0xffu, m = bits & 0x7fffffu;
    int e2 = be != 0 ? (int)be - 127 /* v in [2^e2, 2^(e2+1)) */
                     : (31 - __builtin_clz(m)) - 149; /* subnormal: m * 2^-149 */
    int k = e2 * 30103;
    k = k >= 0 ? k / 100000 : -((-k + 99999) / 100000);
    const double lo = pow10_tab[precision - 1], hi = pow10_tab[precision];
    double s = scale(v, k - precision + 1);
    for (int i = 0; i < 3 && s >= hi; i++)
        s = scale(v, ++k - precision + 1);
    for (int i = 0; i < 3 && s < lo; i++)
        s = scale(v, --k - precision + 1);
    if (s < lo || s >= hi)
        return fallback(out, f, precision);
    uint64_t d = (uint64_t)s;
    double frac = s - (double)d;
    /* the error of s is below 1e-6 here (s < 1e9): a fraction within 1e-4
     * of one half is too near the tie to round from s */
    if (frac > 0.4999 && frac < 0.5001)
        return fallback(out, f, precision);
    if (frac > 0.5)
        d++;
    if ((double)d >= hi) { /* 9.9999999 rounded up: 10.00000 */
        d /= 10;
        k++;
    }
    /* the digits, without trailing zeros (%g drops them) */
    char dig[16];
    int nd = precision;
    for (int i = precision - 1; i >= 0; i--) {
        dig[i] = (char)('0' + d % 10);
        d /= 10;
    }
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    if (k < -4 || k >= precision) { /* d.ddde+XX */
        *p++ = dig[0];
        if (nd > 1) {
            *p++ = '.';
            memcpy(p, dig + 1, (size_t)(nd - 1));
            p += nd - 1;
        }
        *p++ = 'e';
        *p++ = k < 0 ? '-' : '+';
        int x = k < 0 ? -k : k;
        if (x >= 100)
            *p++ = (char)('0' + x / 100);
        *p++ = (char)('0' + x / 10 % 10);
        *p++ = (char)('0' + x % 10);
    } else if (k >= 0) { /* ddd.ddd or ddd */
        int ints = k + 1;
        for (int i = 0; i < ints; i++)
            *p++ = i < nd ? dig[i] : '0';
        if (nd > ints) {
            *p++ = '.';
            memcpy(p, dig + ints, (size_t)(nd - ints));
            p += nd - ints;
        }
    } else { /* 0.000ddd */
        *p++ = '0';
        *p++ = '.';
        for (int i = 0; i < -k - 1; i++)
            *p++ = '0';
        memcpy(p, dig, (size_t)nd);
        p += nd;
    }
    *p = '\0';
    return (int)(p - out);
}

int gf_fmt_u64(char *out, uint64_t v)
{
    char tmp[GF_FMT_INT_MAX];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (int i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = '\0';
    return n;
}

int gf_fmt_i64(char *out, int64_t v)
{
    if (v >= 0)
        return gf_fmt_u64(out, (uint64_t)v);
    out[0] = '-';
    return 1 + gf_fmt_u64(out + 1, (uint64_t)0 - (uint64_t)v); /* INT64_MIN too */
}

bool gf_decimal_fast(uint64_t w, int e, bool neg, double *out)
{
#if FLT_EVAL_METHOD == 0
    static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (w > ((uint64_t)1 << 53) || e < -22 || e > 22)
        return false;
    double d = (double)w;
    d = e < 0 ? d / pow10[-e] : d * pow10[e];
    *out = neg ? -d : d;
    return true;
#else
    (void)w;
    (void)e;
    (void)neg;
    (void)out;
    return false;
#endif
}

/* The float after f upwards (up) or downwards, for a finite f (nextafterf
 * without libm: runtime/core needs only libc). */
static float next_float(float f, bool up)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    if ((b & 0x7fffffffu) == 0)
        b = up ? 1u : 0x80000001u; /* the smallest subnormals */
    else if ((b >> 31) == 0)
        b = up ? b + 1 : b - 1;
    else
        b = up ? b - 1 : b + 1; /* negative: up is towards zero */
    memcpy(&f, &b, sizeof f);
    return f;
}

bool gf_decimal_to_float_fast(const char *s, size_t len, float *out)
{
    size_t k = 0;
    bool neg = k < len && s[k] == '-';
    k += neg;
    uint64_t w = 0;
    int digits = 0, e = 0;
    for (; k < len && s[k] >= '0' && s[k] <= '9'; k++, digits++)
        w = w * 10 + (uint64_t)(s[k] - '0');
    if (k < len && s[k] == '.')
        for (k++; k < len && s[k] >= '0' && s[k] <= '9'; k++, digits++, e--)
            w = w * 10 + (uint64_t)(s[k] - '0');
    if (digits == 0 || digits > 19)
        return false;
    if (k < len && (s[k] == 'e' || s[k] == 'E')) {
        k++;
        bool eneg = k < len && s[k] == '-';
        k += k < len && (s[k] == '-' || s[k] == '+');
        int x = 0, xd = 0;
        for (; k < len && s[k] >= '0' && s[k] <= '9' && x <= 1000; k++, xd++)
            x = x * 10 + (s[k] - '0');
        if (xd == 0)
            return false;
        e += eneg ? -x : x;
    }
    double d;
    if (k != len || !gf_decimal_fast(w, e, neg, &d))
        return false;
    float f = (float)d;
    if (isinf(f))
        return false;
    if ((double)f != d) {
        /* halfway between f and its neighbour on d's side: the decimal may
         * lie on either side of it */
        float g = next_float(f, d > (double)f);
        if (d == ((double)f + (double)g) / 2)
            return false;
    }
    *out = f;
    return true;
}
