/*
 * sched_output.c — the step loop's last stage: a logits row of a request
 * becomes its next token (masks, logit bias, min_tokens, the grammar, the
 * sampler or the test hook's forced tokens), the TOKEN event with its
 * logprobs and text, and the end of the request when the token ends it; and
 * the PROMPT events of prompt logprobs. Split from scheduler.c, which plans
 * and runs the steps; state shared through sched_impl.h. Runs on the step
 * thread only; s->mu is taken only for the counters.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "serve/grammar_step.h"
#include "serve/request.h"
#include "serve/sched_impl.h"

/* 1 if t is one of r's stop_token_ids (what vLLM reports as the stop_reason). */
static int ea__is_stop_id(const ea_request *r, int32_t t) {
    for (int i = 0; i < r->p.n_stop_ids; i++)
        if (r->p.stop_ids[i] == t) return 1;
    return 0;
}

/* A token that ends r: EOS unless it asked to ignore EOS, or one of its stop_token_ids. */
static int ea__is_eos(const ea_sched *s, const ea_request *r, int32_t t) {
    const ea_model_config *c = &s->e->m->cfg;
    if (ea__is_stop_id(r, t)) return 1;
    if (r->p.ignore_eos) return 0;
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_token_ids[i] == t) return 1;
    return 0;
}

/* min_tokens (vLLM's): until r has that many tokens, the tokens that would end it
 * get logit -inf. After the raw copy for logprobs, which stay the model's. */
static void ea__mask_min_tokens(const ea_sched *s, const ea_request *r, float *row) {
    if (r->n_generated >= r->p.min_tokens) return;
    const ea_model_config *c = &s->e->m->cfg;
    for (int i = 0; i < r->p.n_stop_ids; i++) row[r->p.stop_ids[i]] = -INFINITY;
    for (int i = 0; !r->p.ignore_eos && i < c->n_eos; i++)
        if (c->eos_token_ids[i] >= 0 && c->eos_token_ids[i] < s->vocab) row[c->eos_token_ids[i]] = -INFINITY;
}

/* logit_bias (OpenAI's, vLLM's order: before penalties and temperature), after the
 * raw copy for logprobs, which stay the model's. */
static void ea__apply_logit_bias(const ea_request *r, float *row) {
    for (int i = 0; i < r->p.n_bias; i++) row[r->p.bias[i].id] += r->p.bias[i].bias;
}

/* Structured output: the tokens that would leave r's grammar to -inf (EOS and stop
 * ids only where the text is complete). 0, or -1 after ending r with an error. */
static int ea__mask_grammar(ea_sched *s, ea_request *r, float *row) {
    const ea_model_config *c = &s->e->m->cfg;
    int32_t ends[EA_MAX_STOP_IDS + 8];
    int n_end = 0, n_allowed = 0;
    for (int i = 0; i < r->p.n_stop_ids; i++) ends[n_end++] = r->p.stop_ids[i];
    for (int i = 0; !r->p.ignore_eos && i < c->n_eos && n_end < (int)(sizeof ends / sizeof *ends); i++)
        ends[n_end++] = c->eos_token_ids[i];
    ea_status st = ea_gstep_mask(s->gstep, r->gm, ends, n_end, row, &n_allowed);
    if (st == EA_OK && n_allowed > 0) return 0;
    char msg[256];
    snprintf(msg, sizeof msg, "structured output: %s", st != EA_OK ? ea_errmsg() : "no token can continue the text");
    ea__finish(s, r, EA_FINISH_NONE, st != EA_OK ? st : EA_ERR_INTERNAL, msg);
    return -1;
}

/* Sample r's next token from logits row `row` (ids without a token masked, and
 * under a grammar the tokens it forbids) into a new TOKEN event, with its
 * logprobs over that masked row when asked. The test hook's forced tokens come
 * first (ea_req_params.forced). 0, or -1 when r ended with an error. */
static int ea__sample(ea_sched *s, ea_request *r, float *row, ea_event *ev) {
    memset(ev, 0, sizeof *ev);
    ev->kind = EA_EV_TOKEN;
    int want_lp = r->p.logprobs || r->p.top_logprobs > 0;
    ea_sampler_mask(s->sampler, row); /* logprobs too only over ids that have a token */
    if (r->gm && r->grammar_on && ea__mask_grammar(s, r, row)) return -1;
    if (want_lp) memcpy(s->raw, row, sizeof(float) * (size_t)s->vocab);
    ea__mask_min_tokens(s, r, row);
    ea__apply_logit_bias(r, row);
    if (r->n_generated < r->p.n_forced)
        ev->token = r->p.forced[r->n_generated];
    else
        ev->token = ea_sample(s->sampler, &r->p.sp, &r->rng, row, r->out_counts, r->prompt_seen);
    if (want_lp) {
        ev->n_top = r->p.top_logprobs;
        ev->logprob = ea_logprob(s->raw, s->vocab, ev->token, ev->n_top, ev->top_ids, ev->top_lp);
    }
    return 0;
}

/* Append token t to r's tokens and count it. 0 if r has no room left (its
 * tokens were sized n_prompt + max_tokens at submit). */
static int ea__append_token(ea_sched *s, ea_request *r, int32_t t) {
    if (r->n_tokens == r->cap) return 0;
    r->tokens[r->n_tokens++] = t;
    r->n_generated++;
    if (r->out_counts) r->out_counts[t]++;
    if (r->t_first == 0) r->t_first = ea_now_s();
    pthread_mutex_lock(&s->mu);
    s->st.generation_tokens++;
    pthread_mutex_unlock(&s->mu);
    return 1;
}

/* Why r ends after its last token: EOS or a stop string (stop), max_tokens
 * (length), or not yet (EA_FINISH_NONE). */
static ea_finish ea__finish_reason(const ea_request *r, int eos, int stopped) {
    if (eos || stopped) return EA_FINISH_STOP;
    if (r->n_generated >= r->p.max_tokens) return EA_FINISH_LENGTH;
    return EA_FINISH_NONE;
}

/* Prompt logprobs: the PROMPT event of token 0, which has no context (logprob
 * NAN, the API's null); it goes out before any other. */
static void ea__prompt_first(ea_request *r) {
    ea_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = EA_EV_PROMPT;
    ev.token = r->tokens[0];
    ev.logprob = NAN;
    ea__req_push(r, &ev);
    r->plp_next = 1;
}

/* Sample r's next token from logits row `row`, emit it, and end r when it is done. */
void ea__after_logits(ea_sched *s, ea_request *r, float *row) {
    ea_event ev;
    if (r->plp_next < r->p.n_prompt) { /* a one-token prompt: only token 0's PROMPT event */
        EA_ASSERT(r->p.n_prompt == 1);
        ea__prompt_first(r);
    }
    if (ea__sample(s, r, row, &ev)) return;
    if (!ea__append_token(s, r, ev.token)) {
        ea__finish(s, r, EA_FINISH_LENGTH, EA_OK, NULL);
        return;
    }
    int eos = ea__is_eos(s, r, ev.token), stopped = 0;
    if (r->gm && !eos && !r->grammar_on) { /* reasoning first: the grammar starts after the think block */
        r->grammar_on = ev.token == r->p.think_end;
    } else if (r->gm && !eos) { /* the grammar takes the token; complete with nothing to follow: stop */
        ea_status st = ea_gstep_accept(s->gstep, r->gm, ev.token);
        if (st != EA_OK) { /* out of memory, or a grammar too ambiguous for the matcher's stack limit */
            char msg[256];
            snprintf(msg, sizeof msg, "structured output: %s", ea_errmsg());
            ea__finish(s, r, EA_FINISH_NONE, st, msg);
            return;
        }
        eos = ea_gmatcher_done(r->gm) ? 2 : 0;
    }
    if (eos == 1) { /* EOS and stop ids: the text held back, and theirs only with include_stop */
        if (ea__is_stop_id(r, ev.token)) r->stop_id = ev.token;
        ea__req_end_text(r, &ev, &s->slices);
    } else if ((stopped = ea__req_emit_text(r, &ev, &s->slices)))
        r->stop_index = r->text.st.matched;
    ea_finish why = ea__finish_reason(r, eos, stopped);
    if (why == EA_FINISH_NONE) return;
    if (!stopped && eos != 1) ea__req_flush_text(r, &s->slices);
    ea__finish(s, r, why, EA_OK, NULL);
}

/* One PROMPT event: prompt token i's logprob (and top) under logits row `row`,
 * the model's distribution over ids that have a token (no penalties, bias or
 * grammar: those shape sampling, not what the prompt was). Token 0's event
 * (no context: logprob NAN) goes out first. */
void ea__prompt_logprob(ea_sched *s, ea_request *r, int i, float *row) {
    if (r->plp_next == 0) ea__prompt_first(r);
    ea_event ev;
    EA_ASSERT(i == r->plp_next);
    memset(&ev, 0, sizeof ev);
    ev.kind = EA_EV_PROMPT;
    ev.token = r->tokens[i];
    ea_sampler_mask(s->sampler, row);
    ev.n_top = r->p.top_logprobs;
    ev.logprob = ea_logprob(row, s->vocab, ev.token, ev.n_top, ev.top_ids, ev.top_lp);
    ev.rank = 1;
    for (int v = 0; v < s->vocab; v++) ev.rank += row[v] > row[ev.token];
    ea__req_push(r, &ev);
    r->plp_next = i + 1;
}
