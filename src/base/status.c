/*
 * status.c — names of status codes and the per-thread error message.
 *
 * The message buffer is thread-local so that threads of the pool or of the
 * server never overwrite each other's details. 1 KiB is enough for a path, a
 * tensor name and an offset; longer messages are cut, never overflowed.
 */
#include "base/status.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char ea__msg[1024];

const char *ea_status_name(ea_status s) {
    switch (s) {
#define EA__STATUS_NAME(name, value, text) \
    case name: return #name;
        EA_STATUS_LIST(EA__STATUS_NAME)
#undef EA__STATUS_NAME
    }
    return "EA_UNKNOWN";
}

const char *ea_status_text(ea_status s) {
    switch (s) {
#define EA__STATUS_TEXT(name, value, text) \
    case name: return text;
        EA_STATUS_LIST(EA__STATUS_TEXT)
#undef EA__STATUS_TEXT
    }
    return "unknown status";
}

ea_status ea_err(ea_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ea__msg, sizeof ea__msg, fmt, ap);
    va_end(ap);
    return s;
}

ea_status ea_err_wrap(ea_status s, const char *fmt, ...) {
    char old[sizeof ea__msg];
    memcpy(old, ea__msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(ea__msg, sizeof ea__msg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof ea__msg)
        snprintf(ea__msg + n, sizeof ea__msg - (size_t)n, "%s", old);
    return s;
}

const char *ea_errmsg(void) { return ea__msg; }

void ea_err_clear(void) { ea__msg[0] = 0; }

void ea__assert_fail(const char *cond, const char *file, int line) {
    fprintf(stderr, "eaas: assertion failed: %s (%s:%d)\n", cond, file, line);
    abort();
}
