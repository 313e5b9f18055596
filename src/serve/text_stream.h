/*
 * text_stream.h — a request's output text, token by token: the token's bytes
 * (detok.h: special tokens give none) go through the UTF-8 assembly and the
 * stop-string hold-back of stop_text.h, and what may be shown comes back as
 * text slices for the scheduler to push as TOKEN events.
 *
 *   ea_text_stream ts;
 *   ea_text_stream_init(&ts, tok, stops, n_stops, flags);   // tok and stops borrowed
 *   ea_text_slices out;                              // the caller's scratch, reused
 *   for each sampled token:
 *       int stop = ea_text_stream_add(&ts, token, &out);
 *       for (int i = 0; i < out.n; i++) push(ea_text_slice(&out, i, &len), len);
 *       if (stop) -> finish "stop"
 *   at the end without a stop: ea_text_stream_flush(&ts, &out), push its slices.
 *   ended by EOS or a stop id, with EA_TEXT_INCLUDE_STOP: ea_text_stream_last(&ts, token, &out)
 *
 * flags: EA_TEXT_KEEP_SPECIAL (special tokens give their text: vLLM's
 * skip_special_tokens false; stop strings match in it too) and
 * EA_TEXT_INCLUDE_STOP (the matched stop string, or the text of the token that
 * ended the request, ends the text: vLLM's include_stop_str_in_output).
 *
 * The slices of one call, in order, are what stop_text emitted in that call:
 * whole characters only (a stray byte that starts no character counts as one;
 * bytes pass raw, the API turns bad ones into U+FFFD), never any part of a
 * stop string. One slice per emission of stop_text, so a consumer that cuts
 * each slice into events sees the same events as a sink would have.
 *
 * Owned by one request; the scheduler's step loop is its only user. No heap.
 */
#ifndef EA_TEXT_STREAM_H
#define EA_TEXT_STREAM_H

#include <stdint.h>

#include "serve/stop_text.h"

struct ea_tokenizer;

#define EA_TEXT_TOKEN_MAX 1024 /* bytes of one token's text taken at most */
#define EA_TEXT_MAX_SLICES 8

/* The text of one call: slice i is buf[start(i) .. end[i]), start(0) = 0, start(i) = end[i-1]. */
typedef struct {
    char buf[EA_STOP_TEXT_HOLD + EA_TEXT_TOKEN_MAX + 16];
    int n;                        /* slices */
    int end[EA_TEXT_MAX_SLICES];
} ea_text_slices;

enum { EA_TEXT_KEEP_SPECIAL = 1, EA_TEXT_INCLUDE_STOP = 2 };

typedef struct {
    const struct ea_tokenizer *tok; /* borrows; NULL: tokens have no text (tests with ids only) */
    int keep_special;
    ea_stop_text st;
} ea_text_stream;

void ea_text_stream_init(ea_text_stream *ts, const struct ea_tokenizer *tok, const char *const *stop, int n_stop,
                         unsigned flags);
/* armed 0: stop strings do not end the text yet (min_tokens); see stop_text.h. */
void ea_text_stream_arm(ea_text_stream *ts, int armed);
/* Add one token. OUT: *out, the text that may now be shown. Returns 1 if a stop string
 * matched (out holds the text before it; nothing more will come), else 0. */
int ea_text_stream_add(ea_text_stream *ts, int32_t token, ea_text_slices *out);
/* Everything held back (the request ended without a stop match), into *out. */
void ea_text_stream_flush(ea_text_stream *ts, ea_text_slices *out);
/* The request ended with token (EOS or a stop id): everything held back, then
 * with EA_TEXT_INCLUDE_STOP the token's own text, into *out (no stop string is
 * looked for); without the flag, what ea_text_stream_flush gives. */
void ea_text_stream_last(ea_text_stream *ts, int32_t token, ea_text_slices *out);
/* Slice i of out (*len bytes, > 0). */
const char *ea_text_slice(const ea_text_slices *out, int i, int *len);

#endif
