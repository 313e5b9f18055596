/*
 * text_stream.c — see text_stream.h. stop_text calls its sink once per
 * emission; the sink here appends each emission to the caller's slices.
 * Capacity: an emission is at most what stop_text holds (EA_STOP_TEXT_HOLD)
 * plus one token's bytes, and stop_text emits early only when its hold is
 * full, which a token of at most EA_TEXT_TOKEN_MAX bytes does a few times at
 * most; both bounds are asserted.
 */
#include "serve/text_stream.h"

#include <string.h>

#include "base/status.h"
#include "serve/detok.h"

static void sink(void *ctx, const char *text, int n) {
    ea_text_slices *out = ctx;
    int at = out->n ? out->end[out->n - 1] : 0;
    EA_ASSERT(out->n < EA_TEXT_MAX_SLICES && at + n <= (int)sizeof out->buf);
    memcpy(out->buf + at, text, (size_t)n);
    out->end[out->n++] = at + n;
}

void ea_text_stream_init(ea_text_stream *ts, const struct ea_tokenizer *tok, const char *const *stop, int n_stop,
                         unsigned flags) {
    ts->tok = tok;
    ts->keep_special = (flags & EA_TEXT_KEEP_SPECIAL) != 0;
    ea_stop_text_init(&ts->st, stop, n_stop);
    ts->st.include = (flags & EA_TEXT_INCLUDE_STOP) != 0;
}

void ea_text_stream_arm(ea_text_stream *ts, int armed) { ts->st.disarmed = !armed; }

/* token's bytes into stop_text; returns what ea_stop_text_add does. */
static int add_token(ea_text_stream *ts, int32_t token, ea_text_slices *out) {
    char bytes[EA_TEXT_TOKEN_MAX];
    int nb = ea_detok_token_bytes(ts->tok, token, ts->keep_special, bytes, (int)sizeof bytes);
    return ea_stop_text_add(&ts->st, bytes, nb, sink, out);
}

int ea_text_stream_add(ea_text_stream *ts, int32_t token, ea_text_slices *out) {
    out->n = 0;
    return add_token(ts, token, out);
}

void ea_text_stream_flush(ea_text_stream *ts, ea_text_slices *out) {
    out->n = 0;
    ea_stop_text_flush(&ts->st, sink, out);
}

void ea_text_stream_last(ea_text_stream *ts, int32_t token, ea_text_slices *out) {
    out->n = 0;
    if (ts->st.include) {
        ts->st.disarmed = 1; /* the token ended the text: no stop string ends it again */
        add_token(ts, token, out);
    }
    ea_stop_text_flush(&ts->st, sink, out);
}

const char *ea_text_slice(const ea_text_slices *out, int i, int *len) {
    int start = i ? out->end[i - 1] : 0;
    *len = out->end[i] - start;
    return out->buf + start;
}
