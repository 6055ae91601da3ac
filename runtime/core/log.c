/* gpufaas — logging. */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

volatile int gf_log_threshold = GF_LOG_INFO;

static char gf_log_role_buf[32] = "gpufaas";

static const char *const gf_log_names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

const char *gf_log_role(void)
{
    return gf_log_role_buf;
}

int gf_log_level_parse(const char *name, gf_log_level *out)
{
    static const char *const lower[] = {"error", "warn", "info", "debug", "trace"};
    if (name == NULL)
        return -1;
    for (int i = 0; i < 5; i++) {
        if (strcasecmp(name, lower[i]) == 0 || (name[0] == '0' + i && name[1] == '\0')) {
            *out = (gf_log_level)i;
            return 0;
        }
    }
    if (strcasecmp(name, "warning") == 0) {
        *out = GF_LOG_WARN;
        return 0;
    }
    return -1;
}

void gf_log_init(const char *role, gf_log_level level)
{
    if (role != NULL) {
        strncpy(gf_log_role_buf, role, sizeof gf_log_role_buf - 1);
        gf_log_role_buf[sizeof gf_log_role_buf - 1] = '\0';
    }
    if (level == GF_LOG_DEFAULT) {
        gf_log_level parsed;
        const char *env = getenv("GPUFAAS_LOG");
        level = (env != NULL && gf_log_level_parse(env, &parsed) == 0) ? parsed : GF_LOG_INFO;
    }
    gf_log_threshold = (int)level;
}

static void gf_log_emit(const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(STDERR_FILENO, buf, len);
        if (n <= 0)
            return; /* nothing sensible to do when stderr is gone */
        buf += n;
        len -= (size_t)n;
    }
}

void gf_log_write(gf_log_level level, const char *func, const char *fmt, ...)
{
    char line[2048];
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    int lvl = (int)level;
    if (lvl < 0 || lvl > 4)
        lvl = GF_LOG_ERROR;
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ [%d] %s %-5s %s: ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, (int)(tv.tv_usec / 1000), (int)getpid(), gf_log_role_buf,
                     gf_log_names[lvl], func != NULL ? func : "?");
    if (n < 0)
        return;
    size_t used = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + used, sizeof line - used, fmt, ap);
    va_end(ap);
    if (m > 0)
        used += (size_t)m < sizeof line - used ? (size_t)m : sizeof line - used - 1;
    if (used >= sizeof line - 1)
        used = sizeof line - 2; /* truncated: keep room for the newline */
    line[used++] = '\n';
    gf_log_emit(line, used);
}

void gf_log_sigsafe(const char *msg)
{
    char buf[512];
    size_t used = 0;
    /* role */
    for (const char *p = gf_log_role_buf; *p != '\0' && used < 64; p++)
        buf[used++] = *p;
    buf[used++] = ' ';
    buf[used++] = '[';
    /* pid in decimal, without snprintf */
    char digits[24];
    int nd = 0;
    long pid = (long)getpid();
    do {
        digits[nd++] = (char)('0' + pid % 10);
        pid /= 10;
    } while (pid > 0 && nd < (int)sizeof digits);
    while (nd > 0)
        buf[used++] = digits[--nd];
    buf[used++] = ']';
    buf[used++] = ' ';
    for (const char *p = msg; p != NULL && *p != '\0' && used < sizeof buf - 1; p++)
        buf[used++] = *p;
    buf[used++] = '\n';
    gf_log_emit(buf, used);
}
