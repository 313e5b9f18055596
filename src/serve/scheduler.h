/*
 * scheduler.h — continuous batching over one engine, on one step-loop thread.
 *
 * Threads: the step loop (ea_sched_start) is the only thread that touches the
 * engine, the KV cache and the sampler. Any other thread (HTTP handlers)
 * submits requests and reads their events; each request has its own mutex +
 * condition variable guarding its event queue, and the scheduler's waiting
 * queue has one mutex. Nothing blocks the step loop on a client.
 *
 * Each step: admit waiting requests while KV blocks and --max-running allow;
 * build one batch: every running decode sequence contributes 1 token, then
 * prefill chunks fill the rest of --max-batch-tokens (chunked prefill, oldest
 * first); run the forward pass once; sample for every sequence whose prompt is
 * complete; emit events; end requests on EOS, stop string, max tokens, cancel.
 * When the KV cache runs out, the newest running request is preempted (its
 * blocks freed, its tokens kept) and recomputed later — never failed.
 * Prefix cache: full KV blocks are keyed by a hash chain of their tokens;
 * a new request reuses the longest cached chain and skips that prefill.
 *
 * Event stream of a request: PROMPT events when prompt logprobs are asked
 * for, TOKEN events (text delta — whole UTF-8 only —
 * the token id, optional logprobs), then exactly one DONE (finish reason,
 * usage) or ERROR event. Stop strings are never emitted: text that might be
 * the start of a stop string is held back until it cannot be.
 */
#ifndef EA_SCHEDULER_H
#define EA_SCHEDULER_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "serve/engine.h"
#include "serve/sampler.h"

typedef struct ea_sched ea_sched;
typedef struct ea_request ea_request;
struct ea_tokenizer;

#define EA_MAX_STOP 8
#define EA_MAX_TOP_LOGPROBS 20
#define EA_MAX_STOP_IDS 32
#define EA_MAX_LOGIT_BIAS 1024 /* logit_bias entries per request */

/* logit_bias: bias is added to the logit of id before sampling (not to the logprobs reported). */
typedef struct {
    int32_t id;
    float bias;
} ea_logit_bias;

typedef struct {
    const int32_t *prompt;     /* copied at submit */
    int n_prompt;
    int max_tokens;            /* > 0 */
    int ignore_eos;
    ea_sampling_params sp;
    const char *stop[EA_MAX_STOP]; /* copied at submit */
    int n_stop;
    int logprobs;              /* report the chosen token's logprob */
    int top_logprobs;          /* 0..EA_MAX_TOP_LOGPROBS */
    int prompt_logprobs;       /* also report each prompt token's logprob (and top_logprobs) as PROMPT
                                  events before the first TOKEN; the rows are computed, never taken
                                  from the prefix cache (docs/decisions.md "Prompt logprobs") */
    int32_t stop_ids[EA_MAX_STOP_IDS]; /* sampling one ends the request (finish stop, no text), as EOS */
    int n_stop_ids;
    int min_tokens;            /* 0..max_tokens: before this many tokens, EOS (unless ignore_eos) and
                                  stop_ids are never sampled and stop strings do not match */
    int keep_special;          /* special tokens' text is output (vLLM's skip_special_tokens false); stop
                                  strings then also match in it. 0: specials give no text */
    int include_stop;          /* the matched stop string, and the text of the EOS or stop id that ended
                                  the request, end the output (vLLM's include_stop_str_in_output) */
    const ea_logit_bias *bias; /* copied at submit: (n_bias), ids below the vocabulary */
    int n_bias;
    /* Test hook (EAAS_TEST_HOOKS, docs/serving.md): the first n_forced tokens are these
     * instead of sampled ones (logprobs still the model's), so a random-weight model
     * "says" a given text. Copied at submit; 0 in normal use. */
    const int32_t *forced;
    int n_forced;
    struct ea_grammar *grammar; /* structured output (grammar/grammar.h): only tokens that keep the text a
                                  prefix of its language are sampled; EOS and stop_ids only where the text
                                  is complete; the request ends (stop) when nothing may follow. NULL: none.
                                  Submit takes its own reference. Under a control bus it needs a source: */
    const char *grammar_src;   /* what grammar was compiled from, opaque here (copied at submit): under a
                                  control bus it travels in the submit event and every other rank compiles
                                  it with ea_sched_opts.compile_grammar; a grammar without one is refused
                                  there. NULL: none */
    int n_grammar_src;
    /* Reasoning first (vLLM's order): with grammar_after_think the grammar applies
     * only to the tokens after think_end (the token that closes the think block the
     * prompt opened), and nothing is masked before it. 0: from the first token. */
    int grammar_after_think;
    int32_t think_end;
} ea_req_params;

typedef enum { EA_FINISH_NONE = 0, EA_FINISH_STOP, EA_FINISH_LENGTH, EA_FINISH_CANCELLED } ea_finish;

/* PROMPT (ea_req_params.prompt_logprobs): one per prompt token, in order, before
 * the first TOKEN: token, logprob (NAN for the first, which has no context: the
 * API's null) and top; no text. */
typedef enum { EA_EV_TOKEN = 1, EA_EV_DONE = 2, EA_EV_ERROR = 3, EA_EV_PROMPT = 4 } ea_event_kind;

typedef struct {
    ea_event_kind kind;
    /* TOKEN (and PROMPT: token, logprob, top) */
    char text[256];            /* UTF-8 delta (may be empty while held back); NUL-terminated */
    int text_len;
    int32_t token;
    float logprob;
    int rank;                  /* PROMPT: 1 + the ids with a higher logprob (vLLM's rank) */
    int n_top;
    int32_t top_ids[EA_MAX_TOP_LOGPROBS];
    float top_lp[EA_MAX_TOP_LOGPROBS];
    /* DONE */
    ea_finish finish;
    int prompt_tokens, completion_tokens, cached_tokens;
    int stop_index;   /* finish stop by a stop string: its index in the request's stop; else -1 */
    int32_t stop_id;  /* finish stop by one of stop_token_ids: that id; else -1 (EOS: both -1) */
    /* ERROR */
    ea_status status;
    char message[256];
} ea_event;

/* The control bus (multi-rank serving, DESIGN.md section 4): each step rank 0
 * sends one ordered batch of events — submit (the whole request), cancel (id),
 * shutdown, or nothing (a tick) — and every rank, rank 0 included, applies the
 * same batch before the step, so all ranks run the same schedule. Only rank 0
 * accepts ea_sched_submit; the other ranks' requests are made from the bus and
 * have no reader. The batch format is in docs/protocol.md ("Control bus"). */
typedef struct {
    void *ctx;
    int rank;
    /* Rank 0: send (*buf, *len). Others: receive into a new ea_malloc'd *buf of *len
     * bytes (the caller frees it). Must give up with an error naming the missing
     * rank when its deadline passes. */
    ea_status (*bcast)(void *ctx, uint8_t **buf, size_t *len);
    /* Every rank: *v = the minimum of *v over ranks (each rank's prefix-cache hit,
     * at admission, so that a block one rank's disk lacks is recomputed by all).
     * Same deadline rule as bcast. */
    ea_status (*agree_min)(void *ctx, int *v);
    /* Data-parallel attention (dp = 1): each request runs on one rank, which
     * rank 0 names on the bus (EA_BUS_ASSIGN); every rank runs its own batch
     * each step (an empty one too: the MoE exchange needs every rank), and
     * sends the events of its requests back. gather: every rank's
     * mine[0..len) to every rank, into *all as (u64 length, bytes) per rank in
     * rank order. Same deadline rule as bcast. */
    int dp, n_ranks;
    ea_status (*gather)(void *ctx, const void *mine, size_t len, ea_sbuf *all);
} ea_sched_bus;

typedef struct {
    const ea_sched_bus *bus;   /* NULL: one process */
    int max_running;           /* sequences decoding at once */
    int max_queue;             /* waiting requests; submit beyond it -> EA_ERR_BUSY */
    int max_batch_tokens;      /* tokens per forward call (<= engine max_tokens) */
    int prefix_cache;          /* 1 = on */
    int model_sampling_defaults; /* 1: fields a request leaves out take generation_config.json's values
                                  (ea_sampling_model_defaults; applied on rank 0 before the bus) */
    /* Prefix cache disk tier (serve/kv_disk.h; needs prefix_cache): evicted full
     * blocks go to <kv_disk_dir>/<fingerprint>/<par_mode>-<par_world>/rank_<par_rank>/
     * and are read back on a prefix hit. NULL: off. */
    const char *kv_disk_dir;
    size_t kv_disk_max_mib;    /* 0: unbounded */
    const char *par_mode;      /* NULL: "single" */
    int par_world, par_rank;   /* world <= 0: 1 */
    /* Control bus, ranks other than 0: the grammar of a submit from its source
     * (ea_req_params.grammar_src), the same one rank 0's was compiled from, so
     * every rank masks the same tokens. NULL: constrained requests are refused
     * under a bus. OUT: *g, one reference for the caller. */
    ea_status (*compile_grammar)(const char *src, size_t n, struct ea_grammar **g);
} ea_sched_opts;

#define EA_SCHED_DP_MAX_RANKS 64 /* ranks data-parallel attention spreads requests over */

typedef struct {
    int running, waiting;
    int kv_blocks_used, kv_blocks_total;
    uint64_t steps;            /* forward steps so far */
    double last_step_time;     /* ea_now_s() of the last completed step (or start) */
    uint64_t prompt_tokens, generation_tokens, prefix_hit_tokens, preemptions;
    uint64_t requests_finished;
    uint64_t kv_disk_writes, kv_disk_reads, kv_disk_skipped; /* disk tier: files (blocks, states) written, read back, skipped */
    /* hybrid models (DeltaNet layers): the recurrent state of every sequence slot, and the
     * prefix cache's state snapshots (in KV blocks: counted in kv_blocks_used too) */
    uint64_t lin_state_bytes;
    int state_snapshots;
    uint64_t state_snapshot_bytes;
    uint64_t dp_assigned[EA_SCHED_DP_MAX_RANKS]; /* data-parallel attention, rank 0: requests given to each rank */
    int dp_ranks;              /* 0 without data-parallel attention */
    int failed;                /* the bus or a collective failed: this rank stopped serving */
    char failure[256];
} ea_sched_stats;

/* engine and tok are borrowed. */
ea_status ea_sched_create(ea_engine *e, const struct ea_tokenizer *tok, const ea_sched_opts *o, ea_sched **out);
/* Start the step-loop thread. */
ea_status ea_sched_start(ea_sched *s);
/* Run the step loop on the calling thread until shutdown (ranks other than 0). */
ea_status ea_sched_run(ea_sched *s);
/* Stop accepting and let in-flight requests finish until drain_seconds from now,
 * then cancel the rest (each gets a DONE event with EA_FINISH_CANCELLED); returns
 * at once. A second call may only bring the deadline closer (0: cancel now). */
void ea_sched_shutdown(ea_sched *s, double drain_seconds);
/* 1 once the step loop has ended (after a shutdown or a failure) or never started:
 * every request then has its last event. */
int ea_sched_done(ea_sched *s);
/* ea_sched_shutdown, then wait for the step loop to end and join it. */
void ea_sched_stop(ea_sched *s, double drain_seconds);
void ea_sched_destroy(ea_sched *s);

/* Queue a request. EA_ERR_BUSY when the waiting queue is full; EA_ERR_INVALID_ARG /
 * EA_ERR_RANGE with a message for bad parameters (prompt longer than the context, ...). */
ea_status ea_sched_submit(ea_sched *s, const ea_req_params *p, ea_request **out);
/* Next event; waits up to timeout_ms (EA_ERR_TIMEOUT if none: e.g. send an SSE keep-alive). */
ea_status ea_req_next(ea_request *r, int timeout_ms, ea_event *ev);
/* Ask to stop (client went away): the slot is freed at the next step. */
void ea_req_cancel(ea_request *r);
/* The caller is done with r (after DONE/ERROR, or after cancel). */
void ea_req_release(ea_request *r);
uint64_t ea_req_id(const ea_request *r);
/* Times (ea_now_s) for metrics: arrival, first token, finish. */
void ea_req_times(const ea_request *r, double *arrival, double *first_token, double *finished, double *queued);

void ea_sched_get_stats(ea_sched *s, ea_sched_stats *st);
int ea_sched_context_len(const ea_sched *s);
/* Tokens the whole KV cache holds (blocks x block size): no request may need more. */
int ea_sched_kv_tokens(const ea_sched *s);
/* The MoE backend chain's health (moe.h), from any thread: degraded while an
 * expert cannot run, failed when a lockstep peer is gone. */
ea_moe_health ea_sched_moe_health(ea_sched *s, char *why, size_t n);

#endif
