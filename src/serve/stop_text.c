/*
 * stop_text.c — UTF-8 assembly and stop-string hold-back; see stop_text.h.
 *
 * A token's bytes go to pend; when pend holds a whole character it moves to
 * hold. After each token: the earliest match of any stop string in hold ends
 * the text (what precedes it is emitted); otherwise hold is emitted except its
 * longest suffix that is a proper prefix of a stop string. So a stop string
 * spanning token boundaries is never emitted, even in part.
 * Invariant between calls: no stop string occurs in hold.
 */
#define _GNU_SOURCE
#include "serve/stop_text.h"

#include <string.h>

static int utf8_len(unsigned char c) {
    return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1; /* stray byte: alone */
}

/* Longest n such that hold[len-n..len) is a proper prefix of some stop string. */
static int stop_suffix(const ea_stop_text *st) {
    int keep = 0, len = st->n_hold;
    for (int i = 0; i < st->n_stop; i++) {
        int sl = (int)strlen(st->stop[i]);
        for (int n = sl - 1 < len ? sl - 1 : len; n > keep; n--)
            if (memcmp(st->hold + len - n, st->stop[i], (size_t)n) == 0) {
                keep = n;
                break;
            }
    }
    return keep;
}

/* Emit hold[0..n) and drop it from hold. */
static void emit(ea_stop_text *st, int n, ea_stop_text_sink sink, void *ctx) {
    if (n <= 0) return;
    sink(ctx, st->hold, n);
    memmove(st->hold, st->hold + n, (size_t)(st->n_hold - n));
    st->n_hold -= n;
}

void ea_stop_text_init(ea_stop_text *st, const char *const *stop, int n_stop) {
    memset(st, 0, sizeof *st);
    st->stop = stop;
    st->n_stop = n_stop;
}

int ea_stop_text_add(ea_stop_text *st, const char *bytes, int n, ea_stop_text_sink sink, void *ctx) {
    for (int i = 0; i < n; i++) {
        if (st->n_pend < (int)sizeof st->pend) st->pend[st->n_pend++] = bytes[i];
        if (st->n_pend < utf8_len((unsigned char)st->pend[0])) continue;
        if (st->n_hold + st->n_pend > EA_STOP_TEXT_HOLD) /* hold is full of stop-free text: emit it */
            emit(st, st->n_hold - stop_suffix(st), sink, ctx);
        memcpy(st->hold + st->n_hold, st->pend, (size_t)st->n_pend);
        st->n_hold += st->n_pend;
        st->n_pend = 0;
    }
    /* the earliest match anywhere in hold */
    int cut = -1, cut_len = 0, which = -1;
    for (int i = 0; i < st->n_stop; i++) {
        const char *m = memmem(st->hold, (size_t)st->n_hold, st->stop[i], strlen(st->stop[i]));
        if (m && (cut < 0 || m - st->hold < cut)) {
            cut = (int)(m - st->hold);
            cut_len = (int)strlen(st->stop[i]);
            which = i;
        }
    }
    if (cut >= 0 && st->disarmed) { /* emit through the end of the last match; none is left after it */
        int end = 0;
        for (int i = 0; i < st->n_stop; i++) {
            size_t sl = strlen(st->stop[i]);
            for (const char *m = st->hold; (m = memmem(m, (size_t)(st->hold + st->n_hold - m), st->stop[i], sl));
                 m++)
                if ((int)(m - st->hold + (long)sl) > end) end = (int)(m - st->hold + (long)sl);
        }
        emit(st, end, sink, ctx);
        cut = -1;
    }
    if (cut < 0) {
        int keep = stop_suffix(st); /* could still become a stop string */
        emit(st, st->n_hold - keep, sink, ctx);
        return 0;
    }
    emit(st, st->include ? cut + cut_len : cut, sink, ctx);
    st->n_hold = 0;
    st->matched = which;
    return 1;
}

void ea_stop_text_flush(ea_stop_text *st, ea_stop_text_sink sink, void *ctx) { emit(st, st->n_hold, sink, ctx); }
