/*
 * status.h — the one error type of eaas.
 *
 * Every function that can fail returns an ea_status: 0 is success, every error
 * is negative. The list below is the only place codes are defined; names come
 * from the same list (X-macro), so a code and its name cannot drift apart.
 *
 * Details travel beside the code: ea_err() records a formatted message in a
 * per-thread buffer (like errno/dlerror) and returns the code, so a failing
 * function writes `return ea_err(EA_ERR_FORMAT, "%s: tensor %s: offset %llu past end", ...)`
 * and the caller that finally reports it prints ea_errmsg(). The message of the
 * innermost failure wins unless an outer layer adds context with ea_err_wrap().
 *
 * Foreign codes (errno, MPI, UCX) are converted at the boundary where they are
 * met; nothing above that boundary sees them.
 */
#ifndef EA_STATUS_H
#define EA_STATUS_H

#include <stdio.h>

#define EA_STATUS_LIST(X)                                              \
    X(EA_OK, 0, "ok")                                                  \
    X(EA_ERR_NOMEM, -1, "out of memory")                               \
    X(EA_ERR_IO, -2, "i/o error")                                      \
    X(EA_ERR_FORMAT, -3, "malformed input")                            \
    X(EA_ERR_INVALID_ARG, -4, "invalid argument")                      \
    X(EA_ERR_UNSUPPORTED, -5, "unsupported")                           \
    X(EA_ERR_NOT_FOUND, -6, "not found")                               \
    X(EA_ERR_RANGE, -7, "out of range")                                \
    X(EA_ERR_TIMEOUT, -8, "timed out")                                 \
    X(EA_ERR_PEER, -9, "peer failed")                                  \
    X(EA_ERR_BUSY, -10, "busy")                                        \
    X(EA_ERR_CANCELLED, -11, "cancelled")                              \
    X(EA_ERR_INTERNAL, -12, "internal error")                          \
    X(EA_ERR_UNAVAILABLE, -13, "unavailable")

typedef enum {
#define EA__STATUS_ENUM(name, value, text) name = value,
    EA_STATUS_LIST(EA__STATUS_ENUM)
#undef EA__STATUS_ENUM
} ea_status;

/* "EA_ERR_FORMAT" for EA_ERR_FORMAT; "EA_UNKNOWN" for values not in the list. */
const char *ea_status_name(ea_status s);
/* "malformed input" for EA_ERR_FORMAT. */
const char *ea_status_text(ea_status s);

/* Record a message for this thread and return `s`. */
ea_status ea_err(ea_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefix the current message with more context ("loading X: " + old) and return `s`. */
ea_status ea_err_wrap(ea_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The last recorded message of this thread ("" if none). */
const char *ea_errmsg(void);
void ea_err_clear(void);

/* The one control-flow macro: evaluate, and return the status if it failed. */
#define EA_TRY(expr)                      \
    do {                                  \
        ea_status ea__s = (expr);         \
        if (ea__s != EA_OK) return ea__s; \
    } while (0)

/* Always-on assert for bugs (never for bad input). */
#define EA_ASSERT(cond)                                               \
    do {                                                              \
        if (!(cond)) ea__assert_fail(#cond, __FILE__, __LINE__);      \
    } while (0)
_Noreturn void ea__assert_fail(const char *cond, const char *file, int line);

#endif
