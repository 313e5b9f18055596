/*
 * stop_text.h — a request's output text on its way to the client: the bytes of
 * each sampled token become whole UTF-8 characters, and text that could still
 * be the start of a stop string is held back until a later token decides.
 *
 *   ea_stop_text st;
 *   ea_stop_text_init(&st, stops, n_stops);          // stops borrowed, non-empty
 *   for each token: if (ea_stop_text_add(&st, bytes, n, sink, ctx)) -> finish "stop"
 *   at the end without a stop:  ea_stop_text_flush(&st, sink, ctx);
 *
 * sink(ctx, text, n) receives text to emit, n > 0, whole characters only (a
 * stray byte that starts no character counts as one). Its calls, concatenated,
 * are the output up to (not including) the earliest stop string; after a match
 * nothing more is emitted (with `include` set, the calls end with the matched
 * stop string itself: vLLM's include_stop_str_in_output; of two matches at the
 * same place, the stop string listed first). Text is held back in two cases only: an unfinished
 * UTF-8 character (pend), and a suffix of the held text that is a proper prefix
 * of some stop string (hold). When hold fills (a stop string is at most
 * EA_STOP_TEXT_HOLD / 2 bytes), text that no stop string can start in is
 * emitted first. While `disarmed` is set (the caller's min_tokens not yet
 * reached), whole stop strings are emitted as text; a stop string that ends
 * in a token added after it is cleared still matches, even if it began before.
 *
 * Owned by one request; the scheduler's step loop is its only user.
 */
#ifndef EA_STOP_TEXT_H
#define EA_STOP_TEXT_H

#define EA_STOP_TEXT_HOLD 1024

typedef void (*ea_stop_text_sink)(void *ctx, const char *text, int n);

typedef struct {
    const char *const *stop; /* borrows n_stop non-empty strings, each < EA_STOP_TEXT_HOLD / 2 bytes */
    int n_stop;
    char pend[8];                  /* bytes of an unfinished UTF-8 character */
    int n_pend;
    char hold[EA_STOP_TEXT_HOLD];  /* whole characters not yet emitted */
    int n_hold;
    int disarmed;                  /* 1: a stop string here does not end the text (min_tokens not
                                      reached); it is emitted, what may start one is still held */
    int include;                   /* 1: a matched stop string is emitted before the text ends */
    int matched;                   /* after ea_stop_text_add returned 1: the index of that stop string */
} ea_stop_text;

void ea_stop_text_init(ea_stop_text *st, const char *const *stop, int n_stop);
/* Add one token's bytes; emits what no stop string can still claim. Returns 1 if a
 * stop string matched (the text before it is emitted, the rest dropped), else 0. */
int ea_stop_text_add(ea_stop_text *st, const char *bytes, int n, ea_stop_text_sink sink, void *ctx);
/* Emit everything held (the request ended without a stop match). */
void ea_stop_text_flush(ea_stop_text *st, ea_stop_text_sink sink, void *ctx);

#endif
