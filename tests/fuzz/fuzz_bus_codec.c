/*
 * fuzz_bus_codec.c — the control bus's batch decoder (serve/bus_codec.h) on
 * bytes a rank receives: every rank but 0 decodes what rank 0 broadcast, so a
 * batch damaged on the way (or written by a rank 0 of another build) must be
 * refused with EA_ERR_FORMAT, never read past its end.
 *
 * Input: one batch, copied into a buffer of exactly its length (an over-read
 * crashes under ASan). Properties beyond "no crash, no over-read, no UB":
 *   - an accepted submit has counts inside their limits (n_prompt 1..2^24,
 *     n_stop, n_stop_ids, n_bias, n_forced <= max_tokens), its views (prompt,
 *     bias, forced, grammar source) inside the batch, stop strings that are
 *     C strings of the length they were sent with;
 *   - the events read, written again with ea_bus_put_* (as rank 0 does), take
 *     exactly as many bytes as were read (no field skipped or read twice) and
 *     decode again to a batch that writes to the same bytes (the codec is a
 *     fixed point after one round; the first round may normalise: a shutdown's
 *     id is written as 0, prompt_logprobs, keep_special and include_stop as 0/1);
 *   - an accepted submit goes on as a follower takes it: ea__req_new (headless,
 *     vocabulary 512, context 4096) and, if that accepts it, one token sampled
 *     with its sampling parameters (the bias and penalties applied as the step
 *     loop does), which must be an id of the vocabulary.
 * The seed corpus is written by the codec itself (ea_bus_put_*), plus batches
 * cut short or with a count past its limit.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sbuf.h"
#include "serve/bus_codec.h"
#include "serve/request.h"
#include "serve/sampler.h"

#define VOCAB 512

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_bus_codec: %s\n", what);
        abort();
    }
}

static int inside(const void *v, size_t n, const uint8_t *buf, size_t len) {
    const uint8_t *p = v;
    return p >= buf && p <= buf + len && n <= (size_t)(buf + len - p);
}

/* The request a follower makes of submit p, then one token sampled for it (the step loop's
 * order: logit bias, then ea_sample with the request's penalties and rng). */
static void as_follower(const ea_req_params *p) {
    ea__req_limits lim = {.max_ctx = 4096, .kv_tokens = 8192, .vocab = VOCAB};
    ea_request *r;
    if (ea__req_new(&lim, p, 1, &r) != EA_OK) return;
    ea_sampler *s;
    check(ea_sampler_create(VOCAB, &s) == EA_OK, "no memory");
    float logits[VOCAB];
    for (int i = 0; i < VOCAB; i++) logits[i] = (float)((i * 37) % 101) / 10.0f;
    for (int i = 0; i < r->p.n_bias; i++) logits[r->p.bias[i].id] += r->p.bias[i].bias;
    int t = ea_sample(s, &r->p.sp, &r->rng, logits, r->out_counts, r->prompt_seen);
    check(t >= 0 && t < VOCAB, "an accepted request samples a token outside the vocabulary");
    ea_sampler_destroy(s);
    ea__req_unref(r);
}

/* Append ev to b as rank 0 writes it; the views are copied to aligned arrays first. A submit
 * also goes through as_follower. */
static void put_again(ea_sbuf *b, const ea_bus_event *ev) {
    switch (ev->kind) {
    case EA_BUS_CANCEL: ea_bus_put_cancel(b, ev->id); return;
    case EA_BUS_SHUTDOWN: ea_bus_put_shutdown(b); return; /* its id is written as 0 */
    case EA_BUS_ASSIGN: ea_bus_put_assign(b, ev->id, ev->rank); return;
    case EA_BUS_SUBMIT: break;
    }
    ea_req_params p = ev->p;
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)p.n_prompt);
    ea_logit_bias *bias = malloc(sizeof *bias * (size_t)(p.n_bias + 1));
    int32_t *forced = malloc(sizeof(int32_t) * (size_t)(p.n_forced + 1));
    check(prompt && bias && forced, "no memory");
    memcpy(prompt, ev->prompt, sizeof(int32_t) * (size_t)p.n_prompt);
    if (p.n_bias) memcpy(bias, ev->bias, sizeof *bias * (size_t)p.n_bias);
    if (p.n_forced) memcpy(forced, ev->forced, sizeof(int32_t) * (size_t)p.n_forced);
    p.prompt = prompt;
    p.bias = bias;
    p.forced = forced;
    p.grammar_src = ev->grammar_src;
    ea_bus_put_submit(b, ev->id, &p);
    p.grammar_src = NULL; /* not compiled here: the grammar engine has its own target */
    p.n_grammar_src = 0;
    as_follower(&p);
    free(prompt);
    free(bias);
    free(forced);
}

static void check_submit(const ea_bus_event *ev, const uint8_t *buf, size_t len) {
    const ea_req_params *p = &ev->p;
    check(p->n_prompt >= 1 && p->n_prompt <= (1 << 24) && p->n_stop >= 0 && p->n_stop <= EA_MAX_STOP &&
              p->n_stop_ids >= 0 && p->n_stop_ids <= EA_MAX_STOP_IDS && p->n_bias >= 0 &&
              p->n_bias <= EA_MAX_LOGIT_BIAS && p->n_forced >= 0 && p->n_forced <= p->max_tokens &&
              p->n_grammar_src >= 0 && (uint32_t)p->n_grammar_src <= EA_BUS_MAX_GRAMMAR_SRC,
          "a submit with a count past its limit");
    check(inside(ev->prompt, sizeof(int32_t) * (size_t)p->n_prompt, buf, len) &&
              inside(ev->bias, 8 * (size_t)p->n_bias, buf, len) &&
              inside(ev->forced, 4 * (size_t)p->n_forced, buf, len) &&
              (p->n_grammar_src ? inside(ev->grammar_src, (size_t)p->n_grammar_src, buf, len) : !ev->grammar_src),
          "a submit's view outside the batch");
    for (int k = 0; k < p->n_stop; k++)
        check(p->stop[k] == ev->stops[k] && memchr(ev->stops[k], 0, sizeof ev->stops[k]), "a stop string unterminated");
}

/* Decode buf[0..len); on success *used is how far the events went and out holds them written
 * again. 0 if the batch was refused. */
static int decode_put(const uint8_t *buf, size_t len, size_t *used, ea_sbuf *out) {
    ea_bus_reader rd;
    if (ea_bus_read_begin(&rd, buf, len) != EA_OK) return 0;
    ea_bus_begin(out, rd.step);
    ea_bus_event *ev = malloc(sizeof *ev);
    check(ev != NULL, "no memory");
    int more = 0;
    ea_status st;
    while ((st = ea_bus_read_next(&rd, ev, &more)) == EA_OK && more) {
        check(ev->kind == EA_BUS_SUBMIT || ev->kind == EA_BUS_CANCEL || ev->kind == EA_BUS_SHUTDOWN ||
                  ev->kind == EA_BUS_ASSIGN,
              "an event of an unknown kind accepted");
        if (ev->kind == EA_BUS_SUBMIT) check_submit(ev, buf, len);
        if (ev->kind == EA_BUS_ASSIGN) check(ev->rank >= 0, "a negative rank accepted");
        put_again(out, ev);
    }
    check(rd.i <= rd.n, "read past n_events");
    check(!out->failed, "no memory");
    *used = (size_t)(rd.p - buf);
    free(ev);
    return st == EA_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    ea_sbuf a = {0}, b = {0};
    size_t used = 0, used2 = 0;
    if (decode_put(buf, size, &used, &a)) {
        check(used <= size, "read past the batch");
        check(a.len == used, "written again, the events take another number of bytes than were read");
        check(decode_put((const uint8_t *)a.data, a.len, &used2, &b) && used2 == a.len, "a batch written again is refused");
        check(b.len == a.len && memcmp(a.data, b.data, a.len) == 0, "a second round changes the batch");
    }
    ea_sbuf_deinit(&a);
    ea_sbuf_deinit(&b);
    free(buf);
    return 0;
}
