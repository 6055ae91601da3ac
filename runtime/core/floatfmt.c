/* gpufaas — a float as printf's "%.Ng" writes it, without printf (see floatfmt.h). */
#include "core/floatfmt.h"

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
