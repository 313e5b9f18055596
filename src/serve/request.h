/*
 * request.h — a request as the scheduler holds it (internal to src/serve/:
 * scheduler.c and request.c share it). Public callers see only the opaque
 * ea_request of scheduler.h and its ea_req_* functions.
 *
 * State: tokens[0..n_tokens) are known (prompt, then sampled tokens) and
 * tokens[0..n_computed) have KV in the cache; the output text goes through
 * `text` (text_stream.h); events go to the client through a ring guarded by
 * mu, which is the only part another thread touches (ea_req_next). refs
 * counts the holders: 2 at submit (the client and the scheduler), 1 for a
 * headless request made from the control bus on a rank without clients.
 */
#ifndef EA_REQUEST_H
#define EA_REQUEST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/sbuf.h"
#include "model/config.h"
#include "serve/scheduler.h"
#include "serve/text_stream.h"

struct ea_request {
    uint64_t id;
    ea_req_params p;          /* stop strings and prompt point into owned copies */
    char *stop_copy[EA_MAX_STOP];
    ea_logit_bias *bias_copy; /* owns: (p.n_bias); p.bias points here */
    int32_t *forced_copy;     /* owns: (p.n_forced); p.forced points here */
    char *gsrc_copy;          /* owns: (p.n_grammar_src); p.grammar_src points here */
    int32_t *tokens;          /* owns: (cap) prompt then generated */
    int n_tokens, cap;
    int n_computed;
    int n_generated;
    int plp_next;             /* prompt logprobs: the prompt token whose PROMPT event is next
                                 (p.n_prompt: all sent, or none asked for) */
    int seq;                  /* sequence slot, -1 when not running */
    int cached_tokens;
    int32_t *out_counts;      /* owns: (vocab) when penalties are used */
    uint8_t *prompt_seen;     /* owns: (vocab) when repetition penalty is used */
    ea_rng rng;
    struct ea_gmatcher *gm;   /* owns: the matcher of p.grammar (which holds a reference), NULL without one */
    int grammar_on;           /* gm masks and takes tokens (after p.think_end under p.grammar_after_think) */
    ea_text_stream text;      /* the output text: UTF-8 assembly and stop-string hold-back */
    int stop_index;           /* what ended it (the DONE event's stop_index / stop_id); -1: not that */
    int32_t stop_id;
    int finished;             /* step loop: DONE/ERROR pushed */
    int headless;             /* made from the control bus on a rank without clients */
    int owner;                /* data-parallel attention: the rank that runs it (0 otherwise) */
    ea_sbuf *dp_sink;         /* data-parallel attention, on its rank > 0: events go here ([u64 id | ea_event]
                                 records, for rank 0), not to a client */
    int cancel_applied;       /* step loop: cancel arrived through the bus */
    atomic_int cancelled;
    double t_arrival, t_first, t_finish, t_admit;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    ea_event *ev;             /* owns: ring of cap_ev events */
    int ev_head, ev_n, cap_ev;
    int refs;                 /* 2 at submit: the client and the scheduler */
    ea_request *next;         /* in incoming / waiting / running lists */
};

/* What a request is checked against at creation. */
typedef struct {
    int max_ctx;                     /* positions per sequence */
    int kv_tokens;                   /* tokens the whole KV cache holds */
    int vocab;                       /* the model's vocabulary rows */
    const struct ea_tokenizer *tok;  /* borrows; NULL: ids only (every id below vocab is a token) */
    const ea_model_config *defaults; /* generation_config.json sampling defaults for fields left out; NULL: none */
} ea__req_limits;

/* Validate p against lim and make a request (refs 2: client and scheduler; 1 when
 * headless). The prompt and stop strings are copied. */
ea_status ea__req_new(const ea__req_limits *lim, const ea_req_params *p, int headless, ea_request **out);
/* Drop one reference; the last frees r. */
void ea__req_unref(ea_request *r);
/* Queue ev for the client (nothing when headless); never blocks the step loop. */
void ea__req_push(ea_request *r, const ea_event *ev);
/* Add ev's token to r's text and push its TOKEN event(s): at least one, with empty
 * text if all of it is held back (the token still reports its id). sl is the
 * step loop's scratch. Returns 1 if a stop string matched. */
int ea__req_emit_text(ea_request *r, ea_event *ev, ea_text_slices *sl);
/* Push the text held back (the request ends with no stop string matched). */
void ea__req_flush_text(ea_request *r, ea_text_slices *sl);
/* ev's token (EOS or a stop id) ends r: push its TOKEN event with no text,
 * then the text held back; with include_stop, the text held back and the
 * token's own text on its event. */
void ea__req_end_text(ea_request *r, ea_event *ev, ea_text_slices *sl);

#endif
