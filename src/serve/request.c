/*
 * request.c — a request's life outside the schedule (see request.h): made
 * and validated at submit (or from the control bus), its events queued for
 * the client, its text emitted through its text stream, freed by the last
 * holder.
 *
 * Locks: r->mu guards r's event ring and refs; everything else in r belongs
 * to the step loop once submitted.
 */
#define _GNU_SOURCE
#include "serve/request.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

/* ------------------------------------------------------------ events */

void ea__req_unref(ea_request *r) {
    pthread_mutex_lock(&r->mu);
    int left = --r->refs;
    pthread_mutex_unlock(&r->mu);
    if (left) return;
    for (int i = 0; i < EA_MAX_STOP; i++) ea_free(r->stop_copy[i]);
    ea_free(r->tokens);
    ea_free(r->bias_copy);
    ea_free(r->forced_copy);
    ea_free(r->gsrc_copy);
    ea_free(r->out_counts);
    ea_free(r->prompt_seen);
    ea_free(r->ev);
    ea_gmatcher_destroy(r->gm);
    ea_grammar_destroy(r->p.grammar);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    ea_free(r);
}

void ea__req_push(ea_request *r, const ea_event *ev) {
    if (r->dp_sink) { /* rank 0 passes it on to the client (scheduler.c "data-parallel attention") */
        ea_sbuf_append(r->dp_sink, &r->id, sizeof r->id);
        ea_sbuf_append(r->dp_sink, ev, sizeof *ev);
        return;
    }
    if (r->headless) return;
    pthread_mutex_lock(&r->mu);
    if (r->ev_n == r->cap_ev) {
        int nc = r->cap_ev * 2;
        ea_event *ne = ea_malloc(sizeof *ne * (size_t)nc);
        if (!ne) { /* cannot grow: drop the oldest TOKEN event rather than block the step loop */
            EA_LOGE("request %llu: event queue full and no memory; dropping an event", (unsigned long long)r->id);
            r->ev_head = (r->ev_head + 1) % r->cap_ev;
            r->ev_n--;
        } else {
            for (int i = 0; i < r->ev_n; i++) ne[i] = r->ev[(r->ev_head + i) % r->cap_ev];
            ea_free(r->ev);
            r->ev = ne;
            r->ev_head = 0;
            r->cap_ev = nc;
        }
    }
    r->ev[(r->ev_head + r->ev_n) % r->cap_ev] = *ev;
    r->ev_n++;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

ea_status ea_req_next(ea_request *r, int timeout_ms, ea_event *ev) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->mu);
    while (r->ev_n == 0) {
        if (pthread_cond_timedwait(&r->cv, &r->mu, &dl) != 0 && r->ev_n == 0) {
            pthread_mutex_unlock(&r->mu);
            return EA_ERR_TIMEOUT;
        }
    }
    *ev = r->ev[r->ev_head];
    r->ev_head = (r->ev_head + 1) % r->cap_ev;
    r->ev_n--;
    pthread_mutex_unlock(&r->mu);
    return EA_OK;
}

void ea_req_cancel(ea_request *r) { atomic_store(&r->cancelled, 1); }
void ea_req_release(ea_request *r) {
    if (r) {
        ea_req_cancel(r);
        ea__req_unref(r);
    }
}
uint64_t ea_req_id(const ea_request *r) { return r->id; }
void ea_req_times(const ea_request *r, double *arrival, double *first_token, double *finished, double *queued) {
    if (arrival) *arrival = r->t_arrival;
    if (first_token) *first_token = r->t_first;
    if (finished) *finished = r->t_finish;
    if (queued) *queued = r->t_admit > 0 ? r->t_admit - r->t_arrival : 0;
}

/* ------------------------------------------------------------ text */

/* Push text as TOKEN events of at most one event's text each, never splitting
 * a character. The first event keeps ev's token and logprobs, later ones
 * carry token -1. Returns the number of events pushed. */
static int push_text(ea_request *r, ea_event *ev, const char *text, int n) {
    int pushed = 0;
    while (n > 0) {
        int c = n < (int)sizeof ev->text - 1 ? n : (int)sizeof ev->text - 1;
        while (c > 0 && c < n && ((unsigned char)text[c] & 0xc0) == 0x80) c--;
        memcpy(ev->text, text, (size_t)c);
        ev->text[c] = 0;
        ev->text_len = c;
        ea__req_push(r, ev);
        ev->token = -1;
        ev->n_top = 0;
        pushed++;
        text += c;
        n -= c;
    }
    return pushed;
}

/* Push every slice of sl; returns the number of events pushed. */
static int push_slices(ea_request *r, ea_event *ev, const ea_text_slices *sl) {
    int pushed = 0;
    for (int i = 0; i < sl->n; i++) {
        int n;
        const char *t = ea_text_slice(sl, i, &n);
        pushed += push_text(r, ev, t, n);
    }
    return pushed;
}

/* The token's event(s): its slices, or one event with empty text when there are
 * none (the token still reports its id). */
static void push_token(ea_request *r, ea_event *ev, const ea_text_slices *sl) {
    if (push_slices(r, ev, sl) > 0) return;
    ev->text[0] = 0;
    ev->text_len = 0;
    ea__req_push(r, ev);
}

int ea__req_emit_text(ea_request *r, ea_event *ev, ea_text_slices *sl) {
    ea_text_stream_arm(&r->text, r->n_generated >= r->p.min_tokens); /* vLLM: checked once min_tokens are out */
    int stopped = ea_text_stream_add(&r->text, ev->token, sl);
    push_token(r, ev, sl);
    return stopped;
}

void ea__req_end_text(ea_request *r, ea_event *ev, ea_text_slices *sl) {
    if (!r->p.include_stop) { /* the token's event has no text; what was held back follows it */
        sl->n = 0;
        push_token(r, ev, sl);
        ea__req_flush_text(r, sl);
        return;
    }
    ea_text_stream_last(&r->text, ev->token, sl); /* held back + the token's text, on its event */
    push_token(r, ev, sl);
}

void ea__req_flush_text(ea_request *r, ea_text_slices *sl) {
    ea_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = EA_EV_TOKEN;
    ev.token = -1;
    ea_text_stream_flush(&r->text, sl);
    push_slices(r, &ev, sl);
}

/* ------------------------------------------------------------ creation */

ea_status ea__req_new(const ea__req_limits *lim, const ea_req_params *p, int headless, ea_request **out) {
    *out = NULL;
    int ctx = lim->max_ctx;
    if (p->n_prompt <= 0) return ea_err(EA_ERR_INVALID_ARG, "the prompt is empty");
    if (p->max_tokens <= 0) return ea_err(EA_ERR_INVALID_ARG, "max_tokens must be at least 1");
    if (p->n_prompt >= ctx)
        return ea_err(EA_ERR_RANGE, "this model's maximum context length is %d tokens, but the prompt has %d", ctx, p->n_prompt);
    if ((long)p->n_prompt + p->max_tokens > ctx)
        return ea_err(EA_ERR_RANGE,
                      "this model's maximum context length is %d tokens; the prompt (%d) plus max_tokens (%d) exceeds it",
                      ctx, p->n_prompt, p->max_tokens);
    /* admission: what can never fit the whole KV cache would only be preempted and fail late */
    if ((long)p->n_prompt + p->max_tokens > lim->kv_tokens)
        return ea_err(EA_ERR_RANGE,
                      "this request can never fit in the KV cache, which holds %d tokens in all: the prompt (%d) plus "
                      "max_tokens (%d) is %ld; reduce them or enlarge the cache (--kv-cache-mib)",
                      lim->kv_tokens, p->n_prompt, p->max_tokens, (long)p->n_prompt + p->max_tokens);
    if (p->n_stop < 0 || p->n_stop > EA_MAX_STOP) return ea_err(EA_ERR_INVALID_ARG, "at most %d stop strings", EA_MAX_STOP);
    if (p->n_stop_ids < 0 || p->n_stop_ids > EA_MAX_STOP_IDS)
        return ea_err(EA_ERR_INVALID_ARG, "at most %d stop token ids", EA_MAX_STOP_IDS);
    for (int i = 0; i < p->n_stop_ids; i++)
        if (p->stop_ids[i] < 0 || p->stop_ids[i] >= lim->vocab)
            return ea_err(EA_ERR_INVALID_ARG, "stop token id %d is outside the model's vocabulary", p->stop_ids[i]);
    if (p->min_tokens < 0 || p->min_tokens > p->max_tokens)
        return ea_err(EA_ERR_INVALID_ARG, "min_tokens (%d) must be between 0 and max_tokens (%d)", p->min_tokens,
                      p->max_tokens);
    if (p->n_bias < 0 || p->n_bias > EA_MAX_LOGIT_BIAS || p->n_forced < 0 || p->n_forced > p->max_tokens)
        return ea_err(EA_ERR_INVALID_ARG, "at most %d logit_bias entries and max_tokens forced tokens", EA_MAX_LOGIT_BIAS);
    for (int i = 0; i < p->n_bias; i++)
        if (p->bias[i].id < 0 || p->bias[i].id >= lim->vocab || !(p->bias[i].bias >= -100 && p->bias[i].bias <= 100))
            return ea_err(EA_ERR_INVALID_ARG, "logit_bias entry %d (id %d) is outside the vocabulary or [-100, 100]", i,
                          p->bias[i].id);
    for (int i = 0; i < p->n_forced; i++)
        if (p->forced[i] < 0 || p->forced[i] >= lim->vocab)
            return ea_err(EA_ERR_INVALID_ARG, "forced token %d is outside the model's vocabulary", p->forced[i]);
    /* the API's ranges, loosened to what the sampler is defined for (eaas generate allows top_p 0):
     * a request that arrives otherwise (a damaged bus batch, a caller's bug) is refused, not sampled */
    const ea_sampling_params *sp = &p->sp;
    if (!(sp->temperature >= 0 && sp->temperature <= FLT_MAX) || !(sp->top_p >= 0 && sp->top_p <= 1) ||
        !(sp->min_p >= 0 && sp->min_p <= 1) || !(sp->repetition_penalty > 0 && sp->repetition_penalty <= FLT_MAX) ||
        !isfinite(sp->presence_penalty) || !isfinite(sp->frequency_penalty))
        return ea_err(EA_ERR_INVALID_ARG,
                      "sampling parameters out of range: temperature %g, top_p %g, min_p %g, repetition_penalty %g, "
                      "presence_penalty %g, frequency_penalty %g",
                      sp->temperature, sp->top_p, sp->min_p, sp->repetition_penalty, sp->presence_penalty,
                      sp->frequency_penalty);
    if (p->top_logprobs < 0 || p->top_logprobs > EA_MAX_TOP_LOGPROBS)
        return ea_err(EA_ERR_INVALID_ARG, "top_logprobs must be between 0 and %d", EA_MAX_TOP_LOGPROBS);
    for (int i = 0; i < p->n_prompt; i++)
        if (p->prompt[i] < 0 || p->prompt[i] >= lim->vocab || (lim->tok && !ea_tokenizer_has_token(lim->tok, p->prompt[i])))
            return ea_err(EA_ERR_INVALID_ARG, "prompt token %d at index %d is not a token id (%s)", p->prompt[i], i,
                          p->prompt[i] < 0 || p->prompt[i] >= lim->vocab ? "outside the model's vocabulary"
                                                                      : "the tokenizer has no token for it");
    for (int i = 0; i < p->n_stop; i++)
        if (!p->stop[i] || !p->stop[i][0] || strlen(p->stop[i]) >= EA_STOP_TEXT_HOLD / 2)
            return ea_err(EA_ERR_INVALID_ARG, "stop string %d is empty or longer than %d bytes", i, EA_STOP_TEXT_HOLD / 2);

    ea_request *r = ea_calloc(1, sizeof *r);
    if (!r) return ea_err(EA_ERR_NOMEM, "request");
    r->p = *p;
    r->headless = headless;
    const ea_model_config *mc = lim->defaults;
    if (mc && !headless) /* followers get the values through the bus */
        ea_sampling_model_defaults(&r->p.sp, mc->gen_temperature, mc->gen_top_p, mc->gen_top_k);
    r->cap = p->n_prompt + p->max_tokens;
    r->tokens = ea_malloc(sizeof(int32_t) * (size_t)r->cap);
    r->cap_ev = 64;
    r->ev = headless ? NULL : ea_malloc(sizeof(ea_event) * (size_t)r->cap_ev);
    int pen = p->sp.frequency_penalty != 0 || p->sp.presence_penalty != 0 || p->sp.repetition_penalty != 1.0f;
    if (pen) r->out_counts = ea_calloc((size_t)lim->vocab, sizeof(int32_t));
    if (p->sp.repetition_penalty != 1.0f) r->prompt_seen = ea_calloc((size_t)lim->vocab, 1);
    if (p->grammar && ea_gmatcher_create(ea_grammar_ref(p->grammar), &r->gm) != EA_OK) r->gm = NULL;
    r->grammar_on = !p->grammar_after_think;
    int ok = (!p->grammar || r->gm) && r->tokens && (headless || r->ev) && (!pen || r->out_counts) && (p->sp.repetition_penalty == 1.0f || r->prompt_seen);
    if (ok && p->n_bias > 0 && (ok = (r->bias_copy = ea_malloc(sizeof *r->bias_copy * (size_t)p->n_bias)) != NULL)) {
        memcpy(r->bias_copy, p->bias, sizeof *r->bias_copy * (size_t)p->n_bias);
        r->p.bias = r->bias_copy;
    }
    if (ok && p->n_forced > 0 && (ok = (r->forced_copy = ea_malloc(sizeof(int32_t) * (size_t)p->n_forced)) != NULL)) {
        memcpy(r->forced_copy, p->forced, sizeof(int32_t) * (size_t)p->n_forced);
        r->p.forced = r->forced_copy;
    }
    if (ok && p->n_grammar_src > 0 && (ok = (r->gsrc_copy = ea_malloc((size_t)p->n_grammar_src)) != NULL)) {
        memcpy(r->gsrc_copy, p->grammar_src, (size_t)p->n_grammar_src);
        r->p.grammar_src = r->gsrc_copy;
    }
    if (p->n_grammar_src <= 0) r->p.grammar_src = NULL, r->p.n_grammar_src = 0;
    for (int i = 0; ok && i < p->n_stop; i++) {
        r->stop_copy[i] = ea_strdup(p->stop[i]);
        r->p.stop[i] = r->stop_copy[i];
        ok = r->stop_copy[i] != NULL;
    }
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->refs = headless ? 1 : 2;
    if (!ok) {
        r->refs = 1;
        ea__req_unref(r);
        return ea_err(EA_ERR_NOMEM, "request");
    }
    memcpy(r->tokens, p->prompt, sizeof(int32_t) * (size_t)p->n_prompt);
    r->p.prompt = r->tokens;
    r->n_tokens = p->n_prompt;
    if (r->prompt_seen)
        for (int i = 0; i < p->n_prompt; i++) r->prompt_seen[p->prompt[i]] = 1;
    ea_text_stream_init(&r->text, lim->tok, r->p.stop, r->p.n_stop,
                        (r->p.keep_special ? EA_TEXT_KEEP_SPECIAL : 0u) | (r->p.include_stop ? EA_TEXT_INCLUDE_STOP : 0u));
    r->seq = -1;
    r->plp_next = p->prompt_logprobs ? 0 : p->n_prompt;
    r->stop_index = r->stop_id = -1;
    ea_rng_seed(&r->rng, p->sp.seed);
    r->t_arrival = ea_now_s();
    *out = r;
    return EA_OK;
}
