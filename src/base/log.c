/*
 * log.c — see log.h. The level is the one process-wide setting here; it is
 * read with relaxed atomics so a change from the server thread is seen by the
 * pool without locks.
 */
#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_int ea__level = -1;

int ea_log_parse_level(const char *s) {
    static const char *names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (s && strcmp(s, names[i]) == 0) return i;
    return -1;
}

void ea_log_set_level(ea_log_level lvl) { atomic_store(&ea__level, (int)lvl); }

ea_log_level ea_log_get_level(void) {
    int l = atomic_load(&ea__level);
    if (l < 0) {
        l = ea_log_parse_level(getenv("EAAS_LOG"));
        if (l < 0) l = EA_LOG_INFO;
        atomic_store(&ea__level, l);
    }
    return (ea_log_level)l;
}

void ea_log(ea_log_level lvl, const char *fmt, ...) {
    if ((int)lvl > (int)ea_log_get_level()) return;
    char line[2048];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "eaas %c %02d:%02d:%02d.%03ld ", "EWID"[lvl], tm.tm_hour,
                     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}
