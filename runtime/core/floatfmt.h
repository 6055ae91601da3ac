/* gpufaas — a float as printf's "%.Ng" writes it, without printf (runtime/core).
 *
 * Rendering an inference answer as JSON formats every output element; glibc's
 * printf takes about a microsecond per float (multi-precision arithmetic),
 * which made the formatting of four outputs a tenth of the gateway's CPU per
 * request. This gives the same text from one scaled double: the digits are
 * the rounded scaled value, and where that value lies too near a rounding
 * tie for the double's error to decide it, snprintf does it (about 2 in
 * 10,000 floats). */
#ifndef GF_CORE_FLOATFMT_H
#define GF_CORE_FLOATFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Write f (finite) into out as snprintf(out, 32, "%.*g", precision, (double)f)
 * does, for precision 1..9, and return the length. A NaN, an infinity or
 * another precision is handed to snprintf. out holds at least 32 bytes. */
int gf_fmt_float_g(char *out, float f, int precision);

/* The double nearest to (neg ? -1 : 1) * w * 10^e when that is one
 * correctly rounded operation away: w <= 2^53 and |e| <= 22 make w and
 * 10^|e| exact doubles, so w * 10^e or w / 10^e, rounded once, is what
 * strtod returns (Clinger's fast path). Otherwise false (strtod decides). */
bool gf_decimal_fast(uint64_t w, int e, bool neg, double *out);

/* What strtof returns for the decimal number s[0, len) (as printf's %g
 * writes them: [-]digits[.digits][e[+-]digits]) when gf_decimal_fast gives
 * its double and that double is not halfway between two floats (so rounding
 * it to float rounds the decimal the same way); otherwise false. */
bool gf_decimal_to_float_fast(const char *s, size_t len, float *out);

/* Write v in decimal into out (as "%" PRIu64 / "%" PRId64 would, NUL
 * terminated) and return the length; out holds at least GF_FMT_INT_MAX
 * bytes. The request path formats a few integers per request (shapes,
 * versions, status codes): printf costs ~500 instructions each. */
#define GF_FMT_INT_MAX 24
int gf_fmt_u64(char *out, uint64_t v);
int gf_fmt_i64(char *out, int64_t v);

#endif /* GF_CORE_FLOATFMT_H */
