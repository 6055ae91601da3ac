/* gpufaas — byte sizes as people write them (runtime/core).
 *
 * The one parser of "512M"-style sizes, shared by every command-line flag
 * and environment variable that takes one (gpufaas serve, gpufaas-worker).
 */
#ifndef GF_CORE_UNITS_H
#define GF_CORE_UNITS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parse a byte size: decimal digits with an optional K, M, G or T suffix
 * (case-insensitive; powers of 1024), which may be followed by "iB" or "B"
 * ("512M", "2GiB", "64KB", "4096"). Nothing else is allowed: no sign, no
 * space, no fraction. GF_ERR_INVALID naming s, or GF_ERR_OVERFLOW when it
 * does not fit in 64 bits. s is borrowed. */
gf_status gf_size_parse(const char *s, uint64_t *out, gf_err *err);

/* Write bytes as a short human size ("512 MiB", "1.5 GiB", "100 B") into buf
 * (always NUL-terminated). Returns buf. */
char *gf_size_format(uint64_t bytes, char *buf, size_t cap);

/* Write bytes as gf_size_parse reads it, in the largest unit that divides it
 * exactly ("64M", "16G", "1500") into buf (always NUL-terminated): how a
 * flag's default is shown. Returns buf. */
char *gf_size_format_exact(uint64_t bytes, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_UNITS_H */
