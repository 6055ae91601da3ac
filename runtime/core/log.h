/* gpufaas — logging (runtime/core).
 *
 * One macro, GF_LOG, checks the level before its arguments are evaluated, so a
 * disabled debug line costs one comparison. Every line carries the UTC time,
 * the pid and the role of the process ("gateway", "worker 2", "cli"):
 *
 *   2026-11-29T19:21:28.123Z [4242] gateway INFO  gf_worker_spawn: worker 0 up (cpu)
 *
 * Lines go to stderr with one write(2) each, so lines of concurrent threads and
 * processes do not interleave. The level comes from gf_log_init() (a flag) or,
 * when that is given GF_LOG_DEFAULT, from the environment variable GPUFAAS_LOG
 * (error|warn|info|debug|trace), else info.
 */
#ifndef GF_CORE_LOG_H
#define GF_CORE_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gf_log_level {
    GF_LOG_DEFAULT = -1, /* for gf_log_init: take GPUFAAS_LOG, else INFO */
    GF_LOG_ERROR = 0,
    GF_LOG_WARN = 1,
    GF_LOG_INFO = 2,
    GF_LOG_DEBUG = 3,
    GF_LOG_TRACE = 4,
} gf_log_level;

/* Current threshold; lines with a level above it are dropped. Read without a
 * lock: a torn read is impossible for an int and a stale one is harmless. */
extern volatile int gf_log_threshold;

/* Set the role shown on every line (copied; at most 31 bytes kept) and the
 * level. Call once at process start, before threads; safe to call again in a
 * forked child to change the role. */
void gf_log_init(const char *role, gf_log_level level);

/* The role set by gf_log_init ("gpufaas" before). Static storage. */
const char *gf_log_role(void);

/* Parse "error", "warn", "info", "debug", "trace" (case-insensitive) or a
 * digit 0-4. Returns 0 and sets *out, or -1 when the name is unknown. */
int gf_log_level_parse(const char *name, gf_log_level *out);

/* Write one line. Use GF_LOG instead, which checks the level first. */
void gf_log_write(gf_log_level level, const char *func, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Async-signal-safe: writes "<role> [pid] <msg>\n" with write(2) only, no
 * time stamp, no formatting. For signal handlers and after fork. */
void gf_log_sigsafe(const char *msg);

#define GF_LOG(level, ...)                                                    \
    do {                                                                      \
        if ((int)(level) <= gf_log_threshold)                                 \
            gf_log_write((level), __func__, __VA_ARGS__);                     \
    } while (0)

#define GF_LOG_E(...) GF_LOG(GF_LOG_ERROR, __VA_ARGS__)
#define GF_LOG_W(...) GF_LOG(GF_LOG_WARN, __VA_ARGS__)
#define GF_LOG_I(...) GF_LOG(GF_LOG_INFO, __VA_ARGS__)
#define GF_LOG_D(...) GF_LOG(GF_LOG_DEBUG, __VA_ARGS__)
#define GF_LOG_T(...) GF_LOG(GF_LOG_TRACE, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif /* GF_CORE_LOG_H */
