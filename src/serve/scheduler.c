/*
 * scheduler.c — continuous batching; see scheduler.h for the contract.
 *
 * Request life: submit -> incoming (locked list) -> waiting (step loop's FIFO)
 * -> running (holds a sequence slot and KV blocks) -> finished (DONE/ERROR
 * event pushed, slot and blocks released). A preempted request goes back to
 * the front of waiting with its tokens (prompt + generated so far) and will
 * recompute them; batch invariance makes the recomputed KV identical, so its
 * output continues exactly as if it had never been preempted.
 *
 * Per request, tokens[0..n_tokens) are known (prompt, then sampled tokens)
 * and tokens[0..n_computed) have KV in the cache. A step gives each running
 * request either its next prefill chunk or, when only the last known token is
 * uncomputed, one decode token; logits are taken for requests whose chunk
 * reaches n_tokens, and one token is sampled for them.
 *
 * Prefix cache: block i of a sequence is keyed by
 *   h_i = hash(h_{i-1}, tokens of block i)        (h_{-1} = 0)
 * and maps to a KV block the cache holds one reference on. Only full blocks
 * are inserted. At admission a request shares the longest run of cached
 * blocks of its prompt, leaving at least one prompt token to compute (its
 * logits are needed). Blocks whose only holder is the cache are evicted
 * least-recently-used first when the free list runs dry.
 * Disk tier (kv_disk.h, optional): an evicted block is written to disk under
 * its key first (and every cached block at destroy); at admission, when the
 * chain misses in memory, the next key is looked up on disk and, if valid,
 * read into a free block that joins the memory cache and is shared.
 * Multi-rank: every rank evicts and reads the same keys since all run the same
 * schedule; a file valid on one rank but not another would make their
 * schedules differ (see docs/serving.md "Prefix cache disk tier").
 *
 * Text (stop_text.h): a token's bytes become whole UTF-8 characters; of
 * those, everything that cannot be the start of a stop string is emitted. A
 * stop string found ends the request with finish "stop" and is not emitted.
 *
 * Locks: s->mu guards incoming, n_incoming, stopping, stats; r->mu guards
 * r's event ring and refs. The step loop holds no lock while it computes.
 */
#define _GNU_SOURCE
#include "serve/scheduler.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "serve/detok.h"
#include "serve/kv_disk.h"
#include "serve/stop_text.h"
#include "tokenizer/tokenizer.h"

struct ea_request {
    uint64_t id;
    ea_req_params p;          /* stop strings and prompt point into owned copies */
    char *stop_copy[EA_MAX_STOP];
    int32_t *tokens;          /* owns: (cap) prompt then generated */
    int n_tokens, cap;
    int n_computed;
    int n_generated;
    int seq;                  /* sequence slot, -1 when not running */
    int cached_tokens;
    int32_t *out_counts;      /* owns: (vocab) when penalties are used */
    uint8_t *prompt_seen;     /* owns: (vocab) when repetition penalty is used */
    ea_rng rng;
    ea_stop_text text;        /* UTF-8 assembly and stop-string hold-back of the output */
    int finished;             /* step loop: DONE/ERROR pushed */
    int headless;             /* made from the control bus on a rank without clients */
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

typedef struct {
    uint64_t key;
    int32_t block;   /* -1 = empty slot, -2 = tombstone */
    uint64_t stamp;  /* last use, for LRU */
} ea__pc_entry;

struct ea_sched {
    ea_engine *e;
    const struct ea_tokenizer *tok;
    ea_sched_opts o;
    int vocab;
    ea_sampler *sampler;
    float *logits;          /* (max_batch_tokens, vocab) */
    float *raw;             /* (vocab) copy for logprobs */
    int32_t *b_tok, *b_pos, *b_seq, *b_rows;
    ea_request **b_req;     /* request of each logits row */
    ea_request **p_req;     /* planned requests of this step */
    int *p_cnt;             /* tokens each planned request contributes */
    ea_request **slots;     /* (max_seqs) running request of each sequence slot */

    /* prefix cache: open addressing, power-of-two size */
    ea__pc_entry *pc;
    int pc_cap;
    uint64_t pc_clock;
    ea_kv_disk *disk;       /* owns: the disk tier, or NULL */

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
    uint8_t *bus_buf;       /* step loop: the batch being built (rank 0) */
    size_t bus_len, bus_cap;
};

static ea_status ea__req_new(ea_sched *s, const ea_req_params *p, int headless, ea_request **out);

/* ------------------------------------------------------------ events */

static void ea__req_unref(ea_request *r) {
    pthread_mutex_lock(&r->mu);
    int left = --r->refs;
    pthread_mutex_unlock(&r->mu);
    if (left) return;
    for (int i = 0; i < EA_MAX_STOP; i++) ea_free(r->stop_copy[i]);
    ea_free(r->tokens);
    ea_free(r->out_counts);
    ea_free(r->prompt_seen);
    ea_free(r->ev);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    ea_free(r);
}

static void ea__push(ea_request *r, const ea_event *ev) {
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

/* ------------------------------------------------------------ prefix cache */

static int ea__pc_find(ea_sched *s, uint64_t key) {
    if (!s->pc) return -1;
    for (int i = (int)(key & (uint64_t)(s->pc_cap - 1)), n = 0; n < s->pc_cap; i = (i + 1) & (s->pc_cap - 1), n++) {
        if (s->pc[i].block == -1) return -1;
        if (s->pc[i].block >= 0 && s->pc[i].key == key) return i;
    }
    return -1;
}

static void ea__pc_insert(ea_sched *s, uint64_t key, int32_t block) {
    if (!s->pc || ea__pc_find(s, key) >= 0) return;
    for (int i = (int)(key & (uint64_t)(s->pc_cap - 1)), n = 0; n < s->pc_cap; i = (i + 1) & (s->pc_cap - 1), n++)
        if (s->pc[i].block < 0) {
            s->pc[i].key = key;
            s->pc[i].block = block;
            s->pc[i].stamp = ++s->pc_clock;
            s->e->kv.refcnt[block]++; /* the cache's reference */
            return;
        }
}

static void ea__disk_stats(ea_sched *s) {
    ea_kv_disk_stats ds;
    ea_kv_disk_get_stats(s->disk, &ds);
    pthread_mutex_lock(&s->mu);
    s->st.kv_disk_writes = ds.writes;
    s->st.kv_disk_reads = ds.reads;
    s->st.kv_disk_skipped = ds.skipped;
    pthread_mutex_unlock(&s->mu);
}

/* Write cache entry i's block to the disk tier (a failure costs only the copy). */
static void ea__disk_put(ea_sched *s, int i) {
    if (!s->disk || ea_kv_disk_has(s->disk, s->pc[i].key)) return;
    if (ea_kv_disk_put(s->disk, s->pc[i].key, &s->e->kv, s->pc[i].block) != EA_OK)
        EA_LOGW("kv disk: block not written: %s", ea_errmsg());
    ea__disk_stats(s);
}

/* Free one block held only by the cache (LRU). 1 if one was freed. */
static int ea__pc_evict_one(ea_sched *s) {
    if (!s->pc) return 0;
    int best = -1;
    for (int i = 0; i < s->pc_cap; i++)
        if (s->pc[i].block >= 0 && s->e->kv.refcnt[s->pc[i].block] == 1 && (best < 0 || s->pc[i].stamp < s->pc[best].stamp))
            best = i;
    if (best < 0) return 0;
    ea__disk_put(s, best);
    ea_kv_cache *kv = &s->e->kv;
    int32_t b = s->pc[best].block;
    kv->refcnt[b] = 0;
    kv->free_list[kv->n_free++] = b;
    s->pc[best].block = -2;
    return 1;
}

static uint64_t ea__block_hash(uint64_t prev, const int32_t *t, int n) { return ea_hash64(t, sizeof(int32_t) * (size_t)n, prev ? prev : 0x9e3779b97f4a7c15ull); }

/* Insert r's full computed blocks (cheap to repeat: already-present keys are skipped). */
static void ea__pc_add_seq(ea_sched *s, ea_request *r) {
    if (!s->pc) return;
    ea_kv_cache *kv = &s->e->kv;
    int B = kv->block_size;
    uint64_t h = 0;
    const int32_t *table = kv->tables + (size_t)r->seq * kv->max_blocks_per_seq;
    for (int i = 0; (i + 1) * B <= r->n_computed; i++) {
        h = ea__block_hash(h, r->tokens + (size_t)i * B, B);
        ea__pc_insert(s, h, table[i]);
    }
}

/* Read key from the disk tier into a free block and insert it in the memory cache.
 * The cache entry's index, or -1 (not on disk, invalid, or no block free). */
static int ea__disk_load(ea_sched *s, uint64_t key) {
    if (!s->disk || !ea_kv_disk_has(s->disk, key)) return -1;
    ea_kv_cache *kv = &s->e->kv;
    if (kv->n_free == 0 && !ea__pc_evict_one(s)) return -1;
    int32_t b = kv->free_list[--kv->n_free];
    int at = -1;
    if (ea_kv_disk_get(s->disk, key, kv, b) == EA_OK) {
        ea__pc_insert(s, key, b);
        at = ea__pc_find(s, key);
        if (at >= 0 && s->pc[at].block != b) at = -1; /* cannot happen: the key missed in memory */
    } else {
        EA_LOGW("kv disk: %s", ea_errmsg());
    }
    if (at < 0) kv->free_list[kv->n_free++] = b; /* refcnt stays 0 */
    ea__disk_stats(s);
    return at;
}

/* Share the longest cached prefix of r's tokens; leaves >= 1 token to compute. */
static void ea__pc_attach(ea_sched *s, ea_request *r) {
    if (!s->pc) return;
    ea_kv_cache *kv = &s->e->kv;
    int B = kv->block_size;
    uint64_t h = 0;
    for (int i = 0; (i + 1) * B < r->n_tokens; i++) {
        h = ea__block_hash(h, r->tokens + (size_t)i * B, B);
        int at = ea__pc_find(s, h);
        if (at < 0) at = ea__disk_load(s, h);
        if (at < 0) break;
        if (ea_kv_seq_share(kv, r->seq, s->pc[at].block) != EA_OK) break;
        s->pc[at].stamp = ++s->pc_clock;
        r->n_computed = (i + 1) * B;
    }
}

/* ------------------------------------------------------------ lifecycle */

static void ea__finish(ea_sched *s, ea_request *r, ea_finish why, ea_status err, const char *msg) {
    if (r->finished) return;
    r->finished = 1;
    r->t_finish = ea_now_s();
    ea_event ev;
    memset(&ev, 0, sizeof ev);
    if (err != EA_OK) {
        ev.kind = EA_EV_ERROR;
        ev.status = err;
        snprintf(ev.message, sizeof ev.message, "%s", msg ? msg : ea_status_text(err));
    } else {
        ev.kind = EA_EV_DONE;
        ev.finish = why;
        ev.prompt_tokens = r->p.n_prompt;
        ev.completion_tokens = r->n_generated;
        ev.cached_tokens = r->cached_tokens;
    }
    ea__push(r, &ev);
    if (r->seq >= 0) {
        if (err == EA_OK) ea__pc_add_seq(s, r);
        ea_kv_seq_release(&s->e->kv, r->seq);
        s->slots[r->seq] = NULL;
        r->seq = -1;
    }
    pthread_mutex_lock(&s->mu);
    s->st.requests_finished++;
    pthread_mutex_unlock(&s->mu);
}

static void ea__list_remove(ea_request **head, ea_request *r) {
    for (ea_request **p = head; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            r->next = NULL;
            return;
        }
}

static void ea__list_append(ea_request **head, ea_request *r) {
    ea_request **p = head;
    while (*p) p = &(*p)->next;
    r->next = NULL;
    *p = r;
}

static void ea__preempt(ea_sched *s, ea_request *r) {
    EA_LOGD("preempting request %llu (%d tokens)", (unsigned long long)r->id, r->n_tokens);
    ea__pc_add_seq(s, r);
    ea_kv_seq_release(&s->e->kv, r->seq);
    s->slots[r->seq] = NULL;
    r->seq = -1;
    r->n_computed = 0;
    ea__list_remove(&s->running, r);
    s->n_running--;
    r->next = s->waiting; /* front: it was admitted before everyone waiting */
    s->waiting = r;
    s->n_waiting++;
    pthread_mutex_lock(&s->mu);
    s->st.preemptions++;
    pthread_mutex_unlock(&s->mu);
}

/* Make r's sequence cover n_pos positions: evict cached blocks, then preempt the newest
 * other running request, as needed. EA_ERR_BUSY if r alone does not fit. */
static ea_status ea__reserve(ea_sched *s, ea_request *r, int n_pos) {
    for (;;) {
        ea_status st = ea_kv_seq_reserve(&s->e->kv, r->seq, n_pos);
        if (st != EA_ERR_BUSY) return st;
        if (ea__pc_evict_one(s)) continue;
        ea_request *victim = NULL;
        for (ea_request *q = s->running; q; q = q->next)
            if (q != r) victim = q; /* the newest */
        if (!victim) return st;
        ea__preempt(s, victim);
    }
}

/* ------------------------------------------------------------ text */

/* Where r's emitted text goes: TOKEN events of at most one event's text each,
 * never splitting a character. The first event keeps ev's token and logprobs,
 * later ones carry token -1. */
typedef struct {
    ea_request *r;
    ea_event *ev;
    int pushed;
} ea__text_out;

static void ea__text_sink(void *ctx, const char *text, int n) {
    ea__text_out *o = ctx;
    while (n > 0) {
        int c = n < (int)sizeof o->ev->text - 1 ? n : (int)sizeof o->ev->text - 1;
        while (c > 0 && c < n && ((unsigned char)text[c] & 0xc0) == 0x80) c--;
        memcpy(o->ev->text, text, (size_t)c);
        o->ev->text[c] = 0;
        o->ev->text_len = c;
        ea__push(o->r, o->ev);
        o->ev->token = -1;
        o->ev->n_top = 0;
        o->pushed = 1;
        text += c;
        n -= c;
    }
}

/* Add a token's text and push its TOKEN event(s): at least one, with empty text
 * if all of it is held back (the token still reports its id). Returns 1 if a
 * stop string matched (the text before it is emitted, the rest dropped). */
static int ea__text(ea_sched *s, ea_request *r, int32_t tok, ea_event *ev) {
    char bytes[1024];
    int nb = ea_detok_token_bytes(s->tok, tok, bytes, (int)sizeof bytes);
    ea__text_out o = {r, ev, 0};
    int stopped = ea_stop_text_add(&r->text, bytes, nb, ea__text_sink, &o);
    if (!o.pushed) {
        ev->text[0] = 0;
        ev->text_len = 0;
        ea__push(r, ev);
    }
    return stopped;
}

/* Flush held text at the end (no stop string matched). */
static void ea__flush_text(ea_request *r) {
    ea_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = EA_EV_TOKEN;
    ev.token = -1;
    ea__text_out o = {r, &ev, 0};
    ea_stop_text_flush(&r->text, ea__text_sink, &o);
}

/* ------------------------------------------------------------ one step */

static int ea__is_eos(const ea_sched *s, int32_t t) {
    const ea_model_config *c = &s->e->m->cfg;
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_token_ids[i] == t) return 1;
    return 0;
}

/* Sample r's next token from logits row `row` and emit it. */
static void ea__after_logits(ea_sched *s, ea_request *r, float *row) {
    ea_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = EA_EV_TOKEN;
    int want_lp = r->p.logprobs || r->p.top_logprobs > 0;
    ea_sampler_mask(s->sampler, row); /* logprobs too only over ids that have a token */
    if (want_lp) memcpy(s->raw, row, sizeof(float) * (size_t)s->vocab);
    int32_t t = ea_sample(s->sampler, &r->p.sp, &r->rng, row, r->out_counts, r->prompt_seen);
    if (want_lp) {
        ev.n_top = r->p.top_logprobs;
        ev.logprob = ea_logprob(s->raw, s->vocab, t, ev.n_top, ev.top_ids, ev.top_lp);
    }
    ev.token = t;
    if (r->n_tokens == r->cap) { /* cap was sized n_prompt + max_tokens at submit */
        ea__finish(s, r, EA_FINISH_LENGTH, EA_OK, NULL);
        return;
    }
    r->tokens[r->n_tokens++] = t;
    r->n_generated++;
    if (r->out_counts) r->out_counts[t]++;
    if (r->t_first == 0) r->t_first = ea_now_s();
    pthread_mutex_lock(&s->mu);
    s->st.generation_tokens++;
    pthread_mutex_unlock(&s->mu);

    int eos = !r->p.ignore_eos && ea__is_eos(s, t);
    int stopped = 0;
    if (!eos)
        stopped = ea__text(s, r, t, &ev); /* pushes the TOKEN event(s) */
    else
        ea__push(r, &ev);
    if (eos || stopped) {
        if (!stopped) ea__flush_text(r);
        ea__finish(s, r, EA_FINISH_STOP, EA_OK, NULL);
    } else if (r->n_generated >= r->p.max_tokens) {
        ea__flush_text(r);
        ea__finish(s, r, EA_FINISH_LENGTH, EA_OK, NULL);
    }
}

static void ea__take_incoming(ea_sched *s) {
    pthread_mutex_lock(&s->mu);
    ea_request *in = s->incoming;
    int n = s->n_incoming;
    s->incoming = s->incoming_tail = NULL;
    s->n_incoming = 0;
    s->n_waiting_pub = s->n_waiting + n;
    pthread_mutex_unlock(&s->mu);
    while (in) {
        ea_request *nx = in->next;
        ea__list_append(&s->waiting, in);
        in = nx;
    }
    s->n_waiting += n;
}

/* Without a bus a cancel takes effect at once; with one, only when it came through the bus. */
static int ea__cancelled(const ea_sched *s, ea_request *r) {
    return s->o.bus ? r->cancel_applied : atomic_load(&r->cancelled);
}

static void ea__drop_finished(ea_sched *s) {
    for (ea_request **p = &s->running; *p;) {
        ea_request *r = *p;
        if (ea__cancelled(s, r) && !r->finished) {
            ea__flush_text(r);
            ea__finish(s, r, EA_FINISH_CANCELLED, EA_OK, NULL);
        }
        if (r->finished) {
            *p = r->next;
            s->n_running--;
            ea__req_unref(r);
        } else {
            p = &r->next;
        }
    }
    for (ea_request **p = &s->waiting; *p;) {
        ea_request *r = *p;
        if (ea__cancelled(s, r) && !r->finished) ea__finish(s, r, EA_FINISH_CANCELLED, EA_OK, NULL);
        if (r->finished) {
            *p = r->next;
            s->n_waiting--;
            ea__req_unref(r);
        } else {
            p = &r->next;
        }
    }
}

static void ea__admit(ea_sched *s) {
    ea_kv_cache *kv = &s->e->kv;
    while (s->waiting && s->n_running < s->o.max_running) {
        int slot = -1;
        for (int i = 0; i < kv->max_seqs; i++)
            if (!s->slots[i]) {
                slot = i;
                break;
            }
        if (slot < 0) break;
        ea_request *r = s->waiting;
        r->seq = slot;
        r->n_computed = 0;
        ea__pc_attach(s, r);
        /* admit only if the first chunk fits without preempting anyone */
        int first = r->n_tokens - r->n_computed;
        if (first > s->o.max_batch_tokens) first = s->o.max_batch_tokens;
        ea_status st = ea_kv_seq_reserve(kv, slot, r->n_computed + first);
        while (st == EA_ERR_BUSY && ea__pc_evict_one(s)) st = ea_kv_seq_reserve(kv, slot, r->n_computed + first);
        if (st != EA_OK) {
            ea_kv_seq_release(kv, slot);
            r->seq = -1;
            r->n_computed = 0;
            if (s->n_running == 0) { /* nothing will free memory: this request can never run */
                s->waiting = r->next;
                s->n_waiting--;
                ea__finish(s, r, EA_FINISH_NONE, EA_ERR_RANGE, "the KV cache is too small for this request");
                ea__req_unref(r);
                continue;
            }
            break;
        }
        if (r->cached_tokens == 0 && r->n_generated == 0) {
            r->cached_tokens = r->n_computed;
            pthread_mutex_lock(&s->mu);
            s->st.prefix_hit_tokens += (uint64_t)r->n_computed;
            pthread_mutex_unlock(&s->mu);
        }
        if (r->t_admit == 0) r->t_admit = ea_now_s();
        s->slots[slot] = r;
        s->waiting = r->next;
        s->n_waiting--;
        ea__list_append(&s->running, r);
        s->n_running++;
    }
}

/* Plan one batch: decode tokens first, then prefill chunks, both in admission order.
 * Reserving KV may preempt a newer request; then the plan starts over (the freed
 * blocks make the next attempt succeed). Returns the number of planned requests. */
static int ea__plan(ea_sched *s, ea_request **pr, int *pcnt) {
    for (;;) {
        int np = 0, budget = s->o.max_batch_tokens, replan = 0;
        for (int pass = 0; pass < 2 && !replan; pass++) {
            for (ea_request *r = s->running; r && budget > 0; r = r->next) {
                if (r->finished || r->seq < 0) continue;
                int todo = r->n_tokens - r->n_computed;
                int decoding = todo == 1 && r->n_generated > 0;
                if (todo <= 0 || (pass == 0) != decoding) continue;
                int cnt = todo < budget ? todo : budget;
                uint64_t before = s->st.preemptions;
                ea_status st = ea__reserve(s, r, r->n_computed + cnt);
                if (st != EA_OK) {
                    ea__finish(s, r, EA_FINISH_NONE, EA_ERR_RANGE, "the KV cache is too small for this request");
                    continue;
                }
                if (s->st.preemptions != before) {
                    replan = 1;
                    break;
                }
                pr[np] = r;
                pcnt[np++] = cnt;
                budget -= cnt;
            }
        }
        if (!replan) return np;
    }
}

/* A partial MoE failure (moe.h): only the requests with a token whose
 * experts could not run end, with an error naming the layer and expert; the
 * rows of the others are exact. The planned requests' tokens lie in plan
 * order, p_cnt[k] each. */
static void ea__fail_partial(ea_sched *s, int np) {
    const ea_moe_outcome *oc = ea_forward_outcome(s->e->fw);
    for (int k = 0, t0 = 0; oc->n_failed_tokens > 0 && k < np; t0 += s->p_cnt[k++]) {
        int f = -1;
        for (int t = t0; t < t0 + s->p_cnt[k] && f < 0; t++) f = oc->tok_fail[t];
        if (f < 0) continue;
        const ea_moe_failure *x = &oc->fail[f];
        char msg[256];
        if (x->peer >= 0)
            snprintf(msg, sizeof msg, "layer %d expert %d is unavailable (peer %d): %s", x->layer, x->expert, x->peer,
                     x->why);
        else
            snprintf(msg, sizeof msg, "layer %d expert %d is unavailable: %s", x->layer, x->expert, x->why);
        EA_LOGW("request %llu: %s", (unsigned long long)s->p_req[k]->id, msg);
        ea__finish(s, s->p_req[k], EA_FINISH_NONE, EA_ERR_UNAVAILABLE, msg);
    }
}

/* Build and run one batch. Returns 1 if it ran anything. */
static int ea__step(ea_sched *s) {
    int np = ea__plan(s, s->p_req, s->p_cnt);
    int n = 0, n_out = 0;
    for (int k = 0; k < np; k++) {
        ea_request *r = s->p_req[k];
        int cnt = s->p_cnt[k];
        for (int i = 0; i < cnt; i++) {
            s->b_tok[n] = r->tokens[r->n_computed + i];
            s->b_pos[n] = r->n_computed + i;
            s->b_seq[n] = r->seq;
            n++;
        }
        if (r->n_computed + cnt == r->n_tokens) {
            s->b_rows[n_out] = n - 1;
            s->b_req[n_out++] = r;
        }
        if (!(cnt == 1 && r->n_generated > 0)) {
            pthread_mutex_lock(&s->mu);
            s->st.prompt_tokens += (uint64_t)cnt;
            pthread_mutex_unlock(&s->mu);
        }
        r->n_computed += cnt;
    }
    if (n == 0) return 0;
    ea_status st = ea_forward_run(s->e->fw, n, s->b_tok, s->b_pos, s->b_seq, n_out, s->b_rows, s->logits);
    if (st != EA_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "forward pass failed: %s", ea_errmsg());
        EA_LOGE("%s", msg);
        for (int k = 0; k < np; k++) ea__finish(s, s->p_req[k], EA_FINISH_NONE, st, msg);
        if (st == EA_ERR_TIMEOUT || st == EA_ERR_PEER) { /* a rank is gone: lockstep is lost */
            pthread_mutex_lock(&s->mu);
            s->st.failed = 1;
            snprintf(s->st.failure, sizeof s->st.failure, "%s", msg);
            pthread_mutex_unlock(&s->mu);
        }
    } else {
        ea__fail_partial(s, np);
        for (int i = 0; i < n_out; i++)
            if (!s->b_req[i]->finished) ea__after_logits(s, s->b_req[i], s->logits + (size_t)i * s->vocab);
    }
    /* statistics; under EPLB a rebalance moves expert weights here, between steps */
    ea_moe_end_step(s->e->be);
    pthread_mutex_lock(&s->mu);
    s->st.steps++;
    s->st.last_step_time = ea_now_s();
    pthread_mutex_unlock(&s->mu);
    return 1;
}

/* ------------------------------------------------------------ control bus
 *
 * One batch per step (little-endian):
 *   u32 magic "EAB1"   u64 step   u32 n_events   then n_events of:
 *   u8 kind (1 submit, 2 cancel, 3 shutdown)   u64 request id
 *   submit only: i32 n_prompt, max_tokens, ignore_eos, logprobs, top_logprobs, n_stop;
 *                f32 temperature, top_p; i32 top_k; f32 min_p, presence, frequency,
 *                repetition; u64 seed; n_stop x (u32 len, bytes); n_prompt x i32 ids
 * An empty batch (n_events 0) is the tick that keeps every rank in step.
 */

static int ea__put(ea_sched *s, const void *p, size_t n) {
    if (s->bus_len + n > s->bus_cap) {
        size_t nc = s->bus_cap ? s->bus_cap * 2 : 4096;
        while (nc < s->bus_len + n) nc *= 2;
        uint8_t *nb = ea_realloc(s->bus_buf, nc);
        if (!nb) return 0;
        s->bus_buf = nb;
        s->bus_cap = nc;
    }
    memcpy(s->bus_buf + s->bus_len, p, n);
    s->bus_len += n;
    return 1;
}
#define EA__PUT(v) ok &= ea__put(s, &(v), sizeof(v))

static int ea__put_submit(ea_sched *s, const ea_request *r) {
    int ok = 1;
    uint8_t kind = 1;
    int32_t iv[6] = {r->p.n_prompt, r->p.max_tokens, r->p.ignore_eos, r->p.logprobs, r->p.top_logprobs, r->p.n_stop};
    float fv[2] = {r->p.sp.temperature, r->p.sp.top_p};
    int32_t tk = r->p.sp.top_k;
    float fv2[4] = {r->p.sp.min_p, r->p.sp.presence_penalty, r->p.sp.frequency_penalty, r->p.sp.repetition_penalty};
    uint64_t seed = r->p.sp.seed;
    EA__PUT(kind);
    EA__PUT(r->id);
    EA__PUT(iv);
    EA__PUT(fv);
    EA__PUT(tk);
    EA__PUT(fv2);
    EA__PUT(seed);
    for (int i = 0; i < r->p.n_stop; i++) {
        uint32_t n = (uint32_t)strlen(r->p.stop[i]);
        EA__PUT(n);
        ok &= ea__put(s, r->p.stop[i], n);
    }
    ok &= ea__put(s, r->tokens, sizeof(int32_t) * (size_t)r->p.n_prompt);
    return ok;
}

typedef struct {
    const uint8_t *p, *end;
} ea__rd;

static int ea__get(ea__rd *d, void *out, size_t n) {
    if ((size_t)(d->end - d->p) < n) return 0;
    memcpy(out, d->p, n);
    d->p += n;
    return 1;
}

static ea_request *ea__find(ea_sched *s, uint64_t id) {
    for (ea_request *r = s->running; r; r = r->next)
        if (r->id == id) return r;
    for (ea_request *r = s->waiting; r; r = r->next)
        if (r->id == id) return r;
    return NULL;
}

/* Apply one received batch. `mine` is rank 0's list of the requests it announced. */
static ea_status ea__apply(ea_sched *s, const uint8_t *buf, size_t len, ea_request **mine) {
    ea__rd d = {buf, buf + len};
    uint32_t magic, n;
    uint64_t step;
    if (!ea__get(&d, &magic, 4) || magic != 0x31424145u || !ea__get(&d, &step, 8) || !ea__get(&d, &n, 4))
        return ea_err(EA_ERR_FORMAT, "control bus: bad batch header (%zu bytes)", len);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t kind;
        uint64_t id;
        if (!ea__get(&d, &kind, 1) || !ea__get(&d, &id, 8))
            return ea_err(EA_ERR_FORMAT, "control bus: event %u of %u truncated", i, n);
        if (kind == 1) {
            int32_t iv[6], tk;
            float fv[2], fv2[4];
            uint64_t seed;
            if (!ea__get(&d, iv, sizeof iv) || !ea__get(&d, fv, sizeof fv) || !ea__get(&d, &tk, 4) ||
                !ea__get(&d, fv2, sizeof fv2) || !ea__get(&d, &seed, 8) || iv[5] < 0 || iv[5] > EA_MAX_STOP ||
                iv[0] <= 0 || iv[0] > (1 << 24))
                return ea_err(EA_ERR_FORMAT, "control bus: submit %llu malformed", (unsigned long long)id);
            ea_request *r = NULL;
            if (mine && *mine) { /* rank 0: the request object already exists, in this order */
                r = *mine;
                *mine = r->next;
                if (r->id != id) return ea_err(EA_ERR_INTERNAL, "control bus: order mismatch at request %llu", (unsigned long long)id);
                r->next = NULL;
                for (int k = 0; k < iv[5]; k++) {
                    uint32_t sl;
                    if (!ea__get(&d, &sl, 4) || (size_t)(d.end - d.p) < sl) return ea_err(EA_ERR_FORMAT, "control bus: stop");
                    d.p += sl;
                }
                if ((size_t)(d.end - d.p) < sizeof(int32_t) * (size_t)iv[0]) return ea_err(EA_ERR_FORMAT, "control bus: prompt");
                d.p += sizeof(int32_t) * (size_t)iv[0];
            } else {
                char stops[EA_MAX_STOP][EA_STOP_TEXT_HOLD / 2];
                ea_req_params p;
                memset(&p, 0, sizeof p);
                p.n_prompt = iv[0];
                p.max_tokens = iv[1];
                p.ignore_eos = iv[2];
                p.logprobs = iv[3];
                p.top_logprobs = iv[4];
                p.n_stop = iv[5];
                p.sp.temperature = fv[0];
                p.sp.top_p = fv[1];
                p.sp.top_k = tk;
                p.sp.min_p = fv2[0];
                p.sp.presence_penalty = fv2[1];
                p.sp.frequency_penalty = fv2[2];
                p.sp.repetition_penalty = fv2[3];
                p.sp.seed = seed;
                for (int k = 0; k < p.n_stop; k++) {
                    uint32_t sl;
                    if (!ea__get(&d, &sl, 4) || sl >= sizeof stops[k] || !ea__get(&d, stops[k], sl))
                        return ea_err(EA_ERR_FORMAT, "control bus: stop string of %llu", (unsigned long long)id);
                    stops[k][sl] = 0;
                    p.stop[k] = stops[k];
                }
                if ((size_t)(d.end - d.p) < sizeof(int32_t) * (size_t)p.n_prompt)
                    return ea_err(EA_ERR_FORMAT, "control bus: prompt of %llu truncated", (unsigned long long)id);
                p.prompt = (const int32_t *)(const void *)d.p; /* copied by ea__req_new */
                int32_t *tmp = ea_malloc(sizeof(int32_t) * (size_t)p.n_prompt);
                if (!tmp) return ea_err(EA_ERR_NOMEM, "control bus");
                memcpy(tmp, d.p, sizeof(int32_t) * (size_t)p.n_prompt);
                p.prompt = tmp;
                d.p += sizeof(int32_t) * (size_t)p.n_prompt;
                ea_status st = ea__req_new(s, &p, 1, &r);
                ea_free(tmp);
                if (st != EA_OK) return ea_err_wrap(st, "control bus: request %llu: ", (unsigned long long)id);
                r->id = id;
            }
            ea__list_append(&s->waiting, r);
            s->n_waiting++;
        } else if (kind == 2) {
            ea_request *r = ea__find(s, id);
            if (r) r->cancel_applied = 1;
        } else if (kind == 3) {
            s->shutdown_seen = 1;
        } else {
            return ea_err(EA_ERR_FORMAT, "control bus: unknown event kind %u", kind);
        }
    }
    return EA_OK;
}

/* One round of the bus: rank 0 builds and sends the batch, everyone applies it. */
static ea_status ea__bus_round(ea_sched *s, int shutdown) {
    const ea_sched_bus *bus = s->o.bus;
    uint8_t *buf = NULL;
    size_t len = 0;
    ea_request *mine = NULL;
    if (bus->rank == 0) {
        pthread_mutex_lock(&s->mu);
        mine = s->incoming;
        s->n_waiting_pub = s->n_waiting + s->n_incoming;
        s->incoming = s->incoming_tail = NULL;
        s->n_incoming = 0;
        pthread_mutex_unlock(&s->mu);
        s->bus_len = 0;
        int ok = 1;
        uint32_t magic = 0x31424145u, n = 0;
        uint64_t step = s->st.steps;
        EA__PUT(magic);
        EA__PUT(step);
        size_t n_at = s->bus_len;
        EA__PUT(n);
        for (ea_request *r = mine; r; r = r->next, n++) ok &= ea__put_submit(s, r);
        for (int pass = 0; pass < 2; pass++)
            for (ea_request *r = pass ? s->waiting : s->running; r; r = r->next)
                if (atomic_load(&r->cancelled) && !r->cancel_applied && !r->finished) {
                    uint8_t kind = 2;
                    EA__PUT(kind);
                    EA__PUT(r->id);
                    n++;
                }
        if (shutdown) {
            uint8_t kind = 3;
            uint64_t z = 0;
            EA__PUT(kind);
            EA__PUT(z);
            n++;
        }
        if (!ok) return ea_err(EA_ERR_NOMEM, "control bus batch");
        memcpy(s->bus_buf + n_at, &n, 4);
        buf = s->bus_buf;
        len = s->bus_len;
    }
    EA_TRY(bus->bcast(bus->ctx, &buf, &len));
    ea_status st = ea__apply(s, buf, len, bus->rank == 0 ? &mine : NULL);
    if (bus->rank != 0) ea_free(buf);
    return st;
}

static void ea__fail_all(ea_sched *s, ea_status st, const char *why) {
    EA_LOGE("step loop stopped: %s", why);
    pthread_mutex_lock(&s->mu);
    s->st.failed = 1;
    snprintf(s->st.failure, sizeof s->st.failure, "%s", why);
    pthread_mutex_unlock(&s->mu);
    ea__take_incoming(s);
    for (ea_request *r = s->running; r; r = r->next) ea__finish(s, r, EA_FINISH_NONE, st, why);
    for (ea_request *r = s->waiting; r; r = r->next) ea__finish(s, r, EA_FINISH_NONE, st, why);
    ea__drop_finished(s);
}

static void *ea__loop(void *arg) {
    ea_sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        int stopping = s->stopping;
        double dl = s->drain_deadline;
        pthread_mutex_unlock(&s->mu);
        int quit = stopping && (ea_now_s() > dl || (!s->running && !s->waiting && !s->n_incoming));
        if (s->o.bus) {
            ea_status st = ea__bus_round(s, quit);
            if (st != EA_OK) {
                char why[256];
                snprintf(why, sizeof why, "control bus: %s", ea_errmsg());
                ea__fail_all(s, st, why);
                break;
            }
            quit = s->shutdown_seen;
        } else {
            ea__take_incoming(s);
        }
        if (quit) {
            for (ea_request *r = s->running; r; r = r->next) r->cancel_applied = 1, ea_req_cancel(r);
            for (ea_request *r = s->waiting; r; r = r->next) r->cancel_applied = 1, ea_req_cancel(r);
            ea__drop_finished(s);
            break;
        }
        ea__drop_finished(s);
        ea__admit(s);
        int ran = ea__step(s);
        ea__drop_finished(s);
        pthread_mutex_lock(&s->mu);
        int failed = s->st.failed;
        s->st.running = s->n_running;
        s->n_waiting_pub = s->n_waiting;
        s->st.waiting = s->n_waiting + s->n_incoming;
        s->st.kv_blocks_total = s->e->kv.n_blocks;
        s->st.kv_blocks_used = s->e->kv.n_blocks - s->e->kv.n_free;
        if (!ran) {
            s->st.last_step_time = ea_now_s(); /* idle is progress */
            /* followers block in the bus instead; rank 0 (or a lone process) naps until work comes */
            if (!s->n_incoming && !s->stopping && (!s->o.bus || s->o.bus->rank == 0)) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 20 * 1000000L;
                if (ts.tv_nsec >= 1000000000L) {
                    ts.tv_sec++;
                    ts.tv_nsec -= 1000000000L;
                }
                pthread_cond_timedwait(&s->cv, &s->mu, &ts);
            }
        }
        pthread_mutex_unlock(&s->mu);
        if (failed) {
            ea__fail_all(s, EA_ERR_PEER, s->st.failure);
            break;
        }
    }
    pthread_mutex_lock(&s->mu);
    s->loop_ended = 1;
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

ea_status ea_sched_run(ea_sched *s) {
    ea__loop(s);
    return s->st.failed ? ea_err(EA_ERR_PEER, "%s", s->st.failure) : EA_OK;
}

/* ------------------------------------------------------------ API */

ea_status ea_sched_create(ea_engine *e, const struct ea_tokenizer *tok, const ea_sched_opts *o, ea_sched **out) {
    *out = NULL;
    ea_sched *s = ea_calloc(1, sizeof *s);
    if (!s) return ea_err(EA_ERR_NOMEM, "scheduler");
    s->e = e;
    s->tok = tok;
    s->o = *o;
    if (s->o.max_batch_tokens <= 0 || s->o.max_batch_tokens > e->o.max_tokens) s->o.max_batch_tokens = e->o.max_tokens;
    if (s->o.max_running <= 0 || s->o.max_running > e->kv.max_seqs) s->o.max_running = e->kv.max_seqs;
    if (s->o.max_queue <= 0) s->o.max_queue = 1024;
    s->vocab = e->m->cfg.vocab_size;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    size_t T = (size_t)s->o.max_batch_tokens;
    ea_status st = ea_sampler_create(s->vocab, &s->sampler);
    s->logits = ea_aligned_alloc(64, sizeof(float) * T * (size_t)s->vocab);
    s->raw = ea_malloc(sizeof(float) * (size_t)s->vocab);
    s->b_tok = ea_malloc(sizeof(int32_t) * T);
    s->b_pos = ea_malloc(sizeof(int32_t) * T);
    s->b_seq = ea_malloc(sizeof(int32_t) * T);
    s->b_rows = ea_malloc(sizeof(int32_t) * T);
    s->b_req = ea_malloc(sizeof(ea_request *) * T);
    s->p_req = ea_malloc(sizeof(ea_request *) * (size_t)e->kv.max_seqs);
    s->p_cnt = ea_malloc(sizeof(int) * (size_t)e->kv.max_seqs);
    s->slots = ea_calloc((size_t)e->kv.max_seqs, sizeof(ea_request *));
    if (o->prefix_cache) {
        s->pc_cap = 1;
        while (s->pc_cap < 2 * e->kv.n_blocks) s->pc_cap *= 2;
        s->pc = ea_malloc(sizeof *s->pc * (size_t)s->pc_cap);
        if (s->pc)
            for (int i = 0; i < s->pc_cap; i++) s->pc[i].block = -1;
    }
    if (st == EA_OK && tok) { /* ids with no token are never sampled (tokenizer.h: the one rule) */
        int n_pad = 0;
        st = ea_sampler_forbid_untokenized(s->sampler, tok, &n_pad);
        if (st == EA_OK && n_pad)
            EA_LOGI("%d of the model's %d vocabulary ids have no token in the tokenizer: never sampled", n_pad, s->vocab);
    }
    if (st == EA_OK && o->prefix_cache && s->pc && o->kv_disk_dir && o->kv_disk_dir[0]) {
        ea_kv_disk_opts dopt = {.dir = o->kv_disk_dir, .mode = o->par_mode, .world = o->par_world, .rank = o->par_rank,
                                .max_bytes = o->kv_disk_max_mib * 1024 * 1024};
        st = ea_kv_disk_open(&dopt, e->m, &e->kv, &s->disk);
        if (st == EA_OK) ea__disk_stats(s);
    }
    if (st == EA_OK && (!s->logits || !s->raw || !s->b_tok || !s->b_pos || !s->b_seq || !s->b_rows || !s->b_req || !s->p_req || !s->p_cnt ||
                        !s->slots || (o->prefix_cache && !s->pc)))
        st = ea_err(EA_ERR_NOMEM, "scheduler buffers");
    if (st != EA_OK) {
        ea_sched_destroy(s);
        return st;
    }
    s->st.last_step_time = ea_now_s();
    *out = s;
    return EA_OK;
}

ea_status ea_sched_start(ea_sched *s) {
    if (pthread_create(&s->thread, NULL, ea__loop, s) != 0) return ea_err(EA_ERR_INTERNAL, "cannot start the step loop");
    s->started = 1;
    return EA_OK;
}

void ea_sched_shutdown(ea_sched *s, double drain_seconds) {
    if (!s) return;
    double dl = ea_now_s() + (drain_seconds > 0 ? drain_seconds : 0);
    pthread_mutex_lock(&s->mu);
    if (!s->stopping || dl < s->drain_deadline) s->drain_deadline = dl;
    s->stopping = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

int ea_sched_done(ea_sched *s) {
    if (!s) return 1;
    pthread_mutex_lock(&s->mu);
    int done = !s->started || s->loop_ended;
    pthread_mutex_unlock(&s->mu);
    return done;
}

void ea_sched_stop(ea_sched *s, double drain_seconds) {
    if (!s || !s->started) return;
    ea_sched_shutdown(s, drain_seconds);
    pthread_join(s->thread, NULL);
    s->started = 0;
    /* requests that arrived after the loop's last look */
    ea__take_incoming(s);
    for (ea_request *r = s->waiting; r; r = r->next) ea_req_cancel(r);
    ea__drop_finished(s);
}

void ea_sched_destroy(ea_sched *s) {
    if (!s) return;
    ea_sched_stop(s, 0);
    if (s->disk) { /* keep what the memory cache holds for the next start */
        for (int i = 0; i < s->pc_cap; i++)
            if (s->pc[i].block >= 0) ea__disk_put(s, i);
        ea_kv_disk_close(s->disk);
    }
    ea_sampler_destroy(s->sampler);
    ea_aligned_free(s->logits);
    ea_free(s->raw);
    ea_free(s->b_tok);
    ea_free(s->b_pos);
    ea_free(s->b_seq);
    ea_free(s->b_rows);
    ea_free(s->b_req);
    ea_free(s->p_req);
    ea_free(s->p_cnt);
    ea_free(s->slots);
    ea_free(s->pc);
    ea_free(s->bus_buf);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    ea_free(s);
}

int ea_sched_context_len(const ea_sched *s) { return s->e->o.max_ctx; }

int ea_sched_kv_tokens(const ea_sched *s) { return s->e->kv.n_blocks * s->e->kv.block_size; }
ea_moe_health ea_sched_moe_health(ea_sched *s, char *why, size_t n) { return ea_moe_backend_health(s->e->be, why, n); }

/* Validate p and make a request (refs 2: client and scheduler; 1 when headless). */
static ea_status ea__req_new(ea_sched *s, const ea_req_params *p, int headless, ea_request **out) {
    *out = NULL;
    int ctx = s->e->o.max_ctx;
    if (p->n_prompt <= 0) return ea_err(EA_ERR_INVALID_ARG, "the prompt is empty");
    if (p->max_tokens <= 0) return ea_err(EA_ERR_INVALID_ARG, "max_tokens must be at least 1");
    if (p->n_prompt >= ctx)
        return ea_err(EA_ERR_RANGE, "this model's maximum context length is %d tokens, but the prompt has %d", ctx, p->n_prompt);
    if ((long)p->n_prompt + p->max_tokens > ctx)
        return ea_err(EA_ERR_RANGE,
                      "this model's maximum context length is %d tokens; the prompt (%d) plus max_tokens (%d) exceeds it",
                      ctx, p->n_prompt, p->max_tokens);
    /* admission: what can never fit the whole KV cache would only be preempted and fail late */
    if ((long)p->n_prompt + p->max_tokens > ea_sched_kv_tokens(s))
        return ea_err(EA_ERR_RANGE,
                      "this request can never fit in the KV cache, which holds %d tokens in all: the prompt (%d) plus "
                      "max_tokens (%d) is %ld; reduce them or enlarge the cache (--kv-cache-mib)",
                      ea_sched_kv_tokens(s), p->n_prompt, p->max_tokens, (long)p->n_prompt + p->max_tokens);
    if (p->n_stop < 0 || p->n_stop > EA_MAX_STOP) return ea_err(EA_ERR_INVALID_ARG, "at most %d stop strings", EA_MAX_STOP);
    if (p->top_logprobs < 0 || p->top_logprobs > EA_MAX_TOP_LOGPROBS)
        return ea_err(EA_ERR_INVALID_ARG, "top_logprobs must be between 0 and %d", EA_MAX_TOP_LOGPROBS);
    for (int i = 0; i < p->n_prompt; i++)
        if (p->prompt[i] < 0 || p->prompt[i] >= s->vocab || (s->tok && !ea_tokenizer_has_token(s->tok, p->prompt[i])))
            return ea_err(EA_ERR_INVALID_ARG, "prompt token %d at index %d is not a token id (%s)", p->prompt[i], i,
                          p->prompt[i] < 0 || p->prompt[i] >= s->vocab ? "outside the model's vocabulary"
                                                                      : "the tokenizer has no token for it");
    for (int i = 0; i < p->n_stop; i++)
        if (!p->stop[i] || !p->stop[i][0] || strlen(p->stop[i]) >= EA_STOP_TEXT_HOLD / 2)
            return ea_err(EA_ERR_INVALID_ARG, "stop string %d is empty or longer than %d bytes", i, EA_STOP_TEXT_HOLD / 2);

    ea_request *r = ea_calloc(1, sizeof *r);
    if (!r) return ea_err(EA_ERR_NOMEM, "request");
    r->p = *p;
    r->headless = headless;
    const ea_model_config *mc = &s->e->m->cfg;
    if (s->o.model_sampling_defaults && !headless) /* followers get the values through the bus */
        ea_sampling_model_defaults(&r->p.sp, mc->gen_temperature, mc->gen_top_p, mc->gen_top_k);
    r->cap = p->n_prompt + p->max_tokens;
    r->tokens = ea_malloc(sizeof(int32_t) * (size_t)r->cap);
    r->cap_ev = 64;
    r->ev = headless ? NULL : ea_malloc(sizeof(ea_event) * (size_t)r->cap_ev);
    int pen = p->sp.frequency_penalty != 0 || p->sp.presence_penalty != 0 || p->sp.repetition_penalty != 1.0f;
    if (pen) r->out_counts = ea_calloc((size_t)s->vocab, sizeof(int32_t));
    if (p->sp.repetition_penalty != 1.0f) r->prompt_seen = ea_calloc((size_t)s->vocab, 1);
    int ok = r->tokens && (headless || r->ev) && (!pen || r->out_counts) && (p->sp.repetition_penalty == 1.0f || r->prompt_seen);
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
    ea_stop_text_init(&r->text, r->p.stop, r->p.n_stop);
    r->seq = -1;
    ea_rng_seed(&r->rng, p->sp.seed);
    r->t_arrival = ea_now_s();
    *out = r;
    return EA_OK;
}

ea_status ea_sched_submit(ea_sched *s, const ea_req_params *p, ea_request **out) {
    *out = NULL;
    if (s->o.bus && s->o.bus->rank != 0) return ea_err(EA_ERR_INVALID_ARG, "only rank 0 accepts requests");
    ea_request *r;
    EA_TRY(ea__req_new(s, p, 0, &r));
    pthread_mutex_lock(&s->mu);
    if (s->stopping || s->st.failed) {
        pthread_mutex_unlock(&s->mu);
        r->refs = 1;
        ea__req_unref(r);
        return ea_err(EA_ERR_BUSY, s->st.failed ? "the server failed: %s" : "the server is shutting down%s",
                      s->st.failed ? s->st.failure : "");
    }
    if (s->n_waiting_pub + s->n_incoming >= s->o.max_queue) {
        pthread_mutex_unlock(&s->mu);
        r->refs = 1;
        ea__req_unref(r);
        return ea_err(EA_ERR_BUSY, "the waiting queue is full (%d requests)", s->o.max_queue);
    }
    r->id = ++s->next_id;
    if (s->incoming_tail)
        s->incoming_tail->next = r;
    else
        s->incoming = r;
    s->incoming_tail = r;
    s->n_incoming++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    *out = r;
    return EA_OK;
}

void ea_sched_get_stats(ea_sched *s, ea_sched_stats *st) {
    pthread_mutex_lock(&s->mu);
    *st = s->st;
    st->waiting = s->st.waiting > s->n_incoming ? s->st.waiting : s->n_incoming;
    pthread_mutex_unlock(&s->mu);
}
