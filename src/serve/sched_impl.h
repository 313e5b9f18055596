/*
 * sched_impl.h — what scheduler.c (queues, plan, step loop), sched_output.c
 * (a logits row to a token and its events) and sched_bus.c (control bus,
 * data-parallel attention) share; not for other callers.
 */
#ifndef EA_SCHED_IMPL_H
#define EA_SCHED_IMPL_H

#include <pthread.h>

#include "base/sbuf.h"
#include "serve/engine.h"
#include "serve/grammar_step.h"
#include "serve/prefix_cache.h"
#include "serve/request.h"
#include "serve/sampler.h"
#include "serve/scheduler.h"
#include "serve/text_stream.h"

struct ea_sched {
    ea_engine *e;
    const struct ea_tokenizer *tok;
    ea_sched_opts o;
    int vocab;
    int hybrid;                /* the model has DeltaNet layers: prefill cut by ea__hybrid_cnt; the prefix cache keeps state snapshots */
    ea__req_limits lim;     /* what submitted requests are checked against */
    ea_sampler *sampler;
    float *logits;          /* (max_batch_tokens, vocab) */
    float *raw;             /* (vocab) copy for logprobs */
    int32_t *b_tok, *b_pos, *b_seq, *b_rows;
    ea_request **b_req;     /* request of each logits row */
    int32_t *b_plp;         /* of each logits row: the prompt token whose logprob it gives, or -1 (sample) */
    ea_request **p_req;     /* planned requests of this step */
    int *p_cnt;             /* tokens each planned request contributes */
    ea_request **slots;     /* (max_seqs) running request of each sequence slot */

    ea_prefix_cache *pc;    /* owns; NULL when the prefix cache is off */
    ea_gstep *gstep;        /* owns: structured outputs' mask (grammar_step.h) */
    ea_text_slices slices;  /* step loop: the text of the token being emitted */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    ea_request *incoming, *incoming_tail;
    int n_incoming;
    int n_waiting_pub;      /* the step loop's waiting count as of its last look (guarded by mu) */
    int stopping;           /* 1: reject submits; 2: cancel everything and exit */
    double drain_deadline;
    ea_sched_stats st;
    pthread_t thread;
    int started;
    int loop_ended;         /* the step loop returned (guarded by mu) */
    uint64_t next_id;

    ea_request *waiting;    /* step loop only */
    int n_waiting;
    ea_request *running;    /* step loop only, in admission order */
    int n_running;
    int shutdown_seen;      /* step loop: the bus carried a shutdown */
    ea_sbuf bus_out;        /* step loop: the batch being built (rank 0) */
    /* data-parallel attention (o.bus->dp), step loop only */
    ea_request *proxies;    /* rank 0: requests another rank runs; their events come back through dp_in */
    int n_proxies;
    int dp_load[EA_SCHED_DP_MAX_RANKS]; /* rank 0: unfinished requests of each rank */
    ea_sbuf dp_out, dp_in;  /* this rank's events of this step; every rank's */
};

/* scheduler.c */
void ea__finish(ea_sched *s, ea_request *r, ea_finish why, ea_status err, const char *msg);
void ea__list_remove(ea_request **head, ea_request *r);
void ea__list_append(ea_request **head, ea_request *r);

/* sched_output.c: sample r's next token from logits row `row`, emit it, end r when it is done */
void ea__after_logits(ea_sched *s, ea_request *r, float *row);
/* sched_output.c: the PROMPT event of prompt token i (its logprob under row `row`) */
void ea__prompt_logprob(ea_sched *s, ea_request *r, int i, float *row);

/* sched_bus.c: one round of the control bus (rank 0 sends, every rank applies) */
ea_status ea__bus_round(ea_sched *s, int shutdown);
/* sched_bus.c, data-parallel attention: every rank's events of the step to rank 0's proxies */
ea_status ea__dp_exchange(ea_sched *s);
/* sched_bus.c: rank 0 ends every proxy (stopping, or the loop failed) */
void ea__dp_drop_proxies(ea_sched *s, ea_status st, const char *why);

#endif
