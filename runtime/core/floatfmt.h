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

#include <stddef.h>

/* Write f (finite) into out as snprintf(out, 32, "%.*g", precision, (double)f)
 * does, for precision 1..9, and return the length. A NaN, an infinity or
 * another precision is handed to snprintf. out holds at least 32 bytes. */
int gf_fmt_float_g(char *out, float f, int precision);

#endif /* GF_CORE_FLOATFMT_H */
