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
 * reaches n_tokens, and one token is sampled for them. A request that asked
 * for prompt logprobs also gets the logits rows of its prompt positions
 * (b_plp), each turned into a PROMPT event as its prefill goes.
 *
 * The step loop's other state lives in its own modules, each with its design
 * in its header: the request object, its event ring and its checks
 * (request.h), the prefix cache with its disk tier (prefix_cache.h), a
 * request's output text with its stop strings (text_stream.h), and the
 * control bus's batch format (bus_codec.h; the MPI transport is ep/bus.c).
 * This file keeps the queues, the plan of each step and the step loop; a
 * logits row's way to a token and its events is sched_output.c; the
 * multi-rank part of the loop — the control bus round and data-parallel
 * attention — is sched_bus.c (state shared through sched_impl.h).
 *
 * Hybrid models (DeltaNet layers) with the prefix cache: only a prompt's
 * tokens up to its last multiple of the snapshot interval are cached (they ran
 * in the chunked form, cut at absolute multiples of 64, as any sequence with
 * the same prefix runs them; tokens past the prompt ran one per call and are
 * not what a later prompt would compute); a prompt call never crosses that
 * last boundary, and a snapshot of the state is kept at the end of every
 * prompt call that ends on a boundary (prefix_cache.h).
 *
 * Locks: s->mu guards incoming, n_incoming, stopping, stats; r->mu guards
 * r's event ring and refs. The step loop holds no lock while it computes.
 */
#define _GNU_SOURCE
#include "serve/scheduler.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "serve/bus_codec.h"
#include "serve/grammar_step.h"
#include "serve/prefix_cache.h"
#include "kernels/deltanet.h"
#include "serve/request.h"
#include "serve/sched_impl.h"
#include "tokenizer/tokenizer.h"


/* ------------------------------------------------------------ prefix cache */

/* prefix_cache.h's on_disk: the disk tier's counters into the stats, after each disk operation. */
static void ea__disk_stats(void *ctx, const ea_kv_disk_stats *ds) {
    ea_sched *s = ctx;
    pthread_mutex_lock(&s->mu);
    s->st.kv_disk_writes = ds->writes;
    s->st.kv_disk_reads = ds->reads;
    s->st.kv_disk_skipped = ds->skipped;
    pthread_mutex_unlock(&s->mu);
}

/* Hybrid models: the positions of r a cache may keep (a multiple of the
 * snapshot interval, within the prompt); others: all it computed. */
static int ea__cacheable(const ea_sched *s, const ea_request *r) {
    int every = ea_prefix_cache_snap_every(s->pc);
    if (!s->hybrid) return r->n_computed;
    if (every <= 0) return 0;
    int a = r->p.n_prompt - r->p.n_prompt % every;
    return r->n_computed < a ? r->n_computed : a;
}

/* ------------------------------------------------------------ lifecycle */

void ea__finish(ea_sched *s, ea_request *r, ea_finish why, ea_status err, const char *msg) {
    if (r->finished) return;
    r->finished = 1;
    if (s->o.bus && s->o.bus->dp && s->o.bus->rank == 0) s->dp_load[0]--;
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
        ev.stop_index = why == EA_FINISH_STOP ? r->stop_index : -1;
        ev.stop_id = why == EA_FINISH_STOP ? r->stop_id : -1;
    }
    ea__req_push(r, &ev);
    if (r->seq >= 0) {
        if (err == EA_OK) ea_prefix_cache_add_seq(s->pc, r->seq, r->tokens, ea__cacheable(s, r));
        ea_kv_seq_release(&s->e->kv, r->seq);
        s->slots[r->seq] = NULL;
        r->seq = -1;
    }
    pthread_mutex_lock(&s->mu);
    s->st.requests_finished++;
    pthread_mutex_unlock(&s->mu);
}

void ea__list_remove(ea_request **head, ea_request *r) {
    for (ea_request **p = head; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            r->next = NULL;
            return;
        }
}

void ea__list_append(ea_request **head, ea_request *r) {
    ea_request **p = head;
    while (*p) p = &(*p)->next;
    r->next = NULL;
    *p = r;
}

static void ea__preempt(ea_sched *s, ea_request *r) {
    EA_LOGD("preempting request %llu (%d tokens)", (unsigned long long)r->id, r->n_tokens);
    ea_prefix_cache_add_seq(s->pc, r->seq, r->tokens, ea__cacheable(s, r));
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
        if (ea_prefix_cache_evict_one(s->pc)) continue;
        ea_request *victim = NULL;
        for (ea_request *q = s->running; q; q = q->next)
            if (q != r) victim = q; /* the newest */
        if (!victim) return st;
        ea__preempt(s, victim);
    }
}

/* ------------------------------------------------------------ one step */

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
            ea__req_flush_text(r, &s->slices);
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

/* How many of r's tokens may come from the prefix cache: all, unless r still owes
 * prompt logprobs, whose logits rows must be computed: prompt token i's logprob
 * is row i - 1, so the KV from position plp_next - 1 on is computed here
 * (docs/decisions.md "Prompt logprobs"). */
static int ea__attach_max(const ea_sched *s, const ea_request *r) {
    int m = r->plp_next >= r->p.n_prompt ? r->n_tokens : r->plp_next > 0 ? r->plp_next - 1 : 0;
    /* hybrid: tokens past the prompt ran one per call; a cached prompt ran them in chunks */
    return s->hybrid && m > r->p.n_prompt ? r->p.n_prompt : m;
}

/* All ranks compute r from the same position: the smallest hit. A rank that
 * attached more attaches again up to it. Hybrid models may then get less (no
 * state snapshot at that boundary on this rank: its disk tier lost one the
 * others have), so they agree again until every rank holds the agreed hit; the
 * rounds are collectives, so every rank takes the same ones. */
static ea_status ea__agree_hit(ea_sched *s, ea_request *r, int slot) {
    for (;;) {
        int agreed = r->n_computed;
        EA_TRY(s->o.bus->agree_min(s->o.bus->ctx, &agreed));
        if (agreed < r->n_computed) {
            ea_kv_seq_release(&s->e->kv, slot);
            r->n_computed = ea_prefix_cache_attach(s->pc, slot, r->tokens, r->n_tokens, agreed);
        }
        if (!s->hybrid) {
            if (r->n_computed != agreed)
                return ea_err(EA_ERR_INTERNAL, "prefix cache: %d tokens attached again, %d agreed", r->n_computed, agreed);
            return EA_OK;
        }
        int all = r->n_computed == agreed;
        EA_TRY(s->o.bus->agree_min(s->o.bus->ctx, &all));
        if (all) return EA_OK;
    }
}

/* Admit waiting requests while sequences and KV blocks allow. Fails only when
 * the ranks cannot agree on a prefix hit (the control bus's deadline). */
static ea_status ea__admit(ea_sched *s) {
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
        r->n_computed = ea_prefix_cache_attach(s->pc, slot, r->tokens, r->n_tokens, ea__attach_max(s, r));
        if (s->pc && s->o.bus && !s->o.bus->dp) EA_TRY(ea__agree_hit(s, r, slot));
        /* admit only if the first chunk fits without preempting anyone */
        int first = r->n_tokens - r->n_computed;
        if (first > s->o.max_batch_tokens) first = s->o.max_batch_tokens;
        ea_status st = ea_kv_seq_reserve(kv, slot, r->n_computed + first);
        while (st == EA_ERR_BUSY && ea_prefix_cache_evict_one(s->pc)) st = ea_kv_seq_reserve(kv, slot, r->n_computed + first);
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
    return EA_OK;
}

/* Plan one batch: decode tokens first, then prefill chunks, both in admission order.
 * Reserving KV may preempt a newer request; then the plan starts over (the freed
 * blocks make the next attempt succeed). Returns the number of planned requests. */
/* Hybrid models (DeltaNet layers, model/deltanet.c): a sequence's bits depend on how
 * its tokens are cut into forward calls, so the cut is made a function of the
 * sequence alone, whatever else is running: prompt tokens go in calls that end
 * at a multiple of 64 (the chunk) or at the prompt's end; tokens past the
 * prompt (a recompute after preemption) one per call, as they first ran.
 * With snapshots (every > 0) a call also stops at the prompt's last multiple
 * of `every`, so that the state there is kept (also a multiple of 64: the
 * same bits as a call through it).
 * Returns the tokens to run now (<= cnt), 0 to wait for a larger budget. */
static int ea__hybrid_cnt(const ea_request *r, int cnt, int every) {
    int prompt = r->n_tokens - r->n_generated, at = r->n_computed;
    if (at >= prompt) return 1;
    int end = at + cnt, last = every > 0 ? prompt - prompt % every : 0;
    if (at < last && end > last) end = last;
    if (end >= prompt) return prompt - at;
    end -= end % EA_K_DELTA_CHUNK;
    return end > at ? end - at : 0;
}

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
                if (s->hybrid && !decoding && (cnt = ea__hybrid_cnt(r, cnt, ea_prefix_cache_snap_every(s->pc))) == 0) continue;
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

/* Hybrid models: keep the state of each planned request whose prompt call
 * ended on a snapshot boundary (prefix_cache.h), before its tokens are sampled. */
static void ea__snapshots(ea_sched *s, int np) {
    int every = ea_prefix_cache_snap_every(s->pc);
    for (int k = 0; every > 0 && k < np; k++) {
        ea_request *r = s->p_req[k];
        int prompt = r->n_tokens - r->n_generated;
        if (!r->finished && r->n_computed <= prompt && r->n_computed % every == 0)
            ea_prefix_cache_snapshot(s->pc, r->seq, r->tokens, r->n_computed);
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
            int pos = r->n_computed + i;
            s->b_tok[n] = r->tokens[pos];
            s->b_pos[n] = pos;
            s->b_seq[n] = r->seq;
            if (pos + 1 >= r->plp_next && pos + 1 < r->p.n_prompt) { /* a prompt logprob's row */
                s->b_rows[n_out] = n;
                s->b_plp[n_out] = pos + 1;
                s->b_req[n_out++] = r;
            }
            n++;
        }
        if (r->n_computed + cnt == r->n_tokens) {
            s->b_rows[n_out] = n - 1;
            s->b_plp[n_out] = -1;
            s->b_req[n_out++] = r;
        }
        if (!(cnt == 1 && r->n_generated > 0)) {
            pthread_mutex_lock(&s->mu);
            s->st.prompt_tokens += (uint64_t)cnt;
            pthread_mutex_unlock(&s->mu);
        }
        r->n_computed += cnt;
    }
    if (s->o.bus && s->o.bus->dp) { /* every rank steps when any rank has tokens: the MoE exchange needs all */
        int v = n > 0 ? -1 : 0;
        ea_status ast = s->o.bus->agree_min(s->o.bus->ctx, &v);
        if (ast != EA_OK) {
            pthread_mutex_lock(&s->mu);
            s->st.failed = 1;
            snprintf(s->st.failure, sizeof s->st.failure, "control bus: %s", ea_errmsg());
            pthread_mutex_unlock(&s->mu);
            return 1;
        }
        if (v == 0) return 0;
    } else if (n == 0) {
        return 0;
    }
    ea_status st = n ? ea_forward_run(s->e->fw, n, s->b_tok, s->b_pos, s->b_seq, n_out, s->b_rows, s->logits)
                     : ea_forward_run_empty(s->e->fw);
    if (st != EA_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "forward pass failed: %s", ea_errmsg());
        EA_LOGE("%s", msg);
        for (int k = 0; k < np; k++) ea__finish(s, s->p_req[k], EA_FINISH_NONE, st, msg);
        /* a rank is gone, or ranks may have stopped at different collectives of the step: lockstep is lost */
        if (st == EA_ERR_TIMEOUT || st == EA_ERR_PEER || s->o.bus) {
            pthread_mutex_lock(&s->mu);
            s->st.failed = 1;
            snprintf(s->st.failure, sizeof s->st.failure, "%s", msg);
            pthread_mutex_unlock(&s->mu);
        }
    } else {
        ea__fail_partial(s, np);
        ea__snapshots(s, np);
        for (int i = 0; i < n_out; i++) {
            ea_request *r = s->b_req[i];
            float *row = s->logits + (size_t)i * s->vocab;
            if (r->finished) continue;
            if (s->b_plp[i] >= 0)
                ea__prompt_logprob(s, r, s->b_plp[i], row);
            else
                ea__after_logits(s, r, row);
        }
    }
    /* statistics; under EPLB a rebalance moves expert weights here, between steps */
    ea_moe_end_step(s->e->be);
    pthread_mutex_lock(&s->mu);
    s->st.steps++;
    s->st.last_step_time = ea_now_s();
    pthread_mutex_unlock(&s->mu);
    return 1;
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
    ea__dp_drop_proxies(s, st, why);
    ea__drop_finished(s);
}

static void *ea__loop(void *arg) {
    ea_sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        int stopping = s->stopping;
        double dl = s->drain_deadline;
        pthread_mutex_unlock(&s->mu);
        int quit = stopping && (ea_now_s() > dl || (!s->running && !s->waiting && !s->n_incoming && !s->proxies));
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
            ea__dp_drop_proxies(s, EA_OK, NULL);
            ea__drop_finished(s);
            break;
        }
        ea__drop_finished(s);
        ea_status ast = ea__admit(s);
        if (ast != EA_OK) {
            char why[256];
            snprintf(why, sizeof why, "control bus: %s", ea_errmsg());
            ea__fail_all(s, ast, why);
            break;
        }
        int ran = ea__step(s);
        ea__drop_finished(s);
        if (s->o.bus && s->o.bus->dp && (ast = ea__dp_exchange(s)) != EA_OK) {
            char why[256];
            snprintf(why, sizeof why, "control bus: %s", ea_errmsg());
            ea__fail_all(s, ast, why);
            break;
        }
        pthread_mutex_lock(&s->mu);
        int failed = s->st.failed;
        s->st.running = s->n_running;
        s->n_waiting_pub = s->n_waiting;
        s->st.waiting = s->n_waiting + s->n_incoming;
        s->st.kv_blocks_total = s->e->kv.n_blocks;
        s->st.kv_blocks_used = s->e->kv.n_blocks - s->e->kv.n_free;
        size_t snap_bytes = 0;
        ea_prefix_cache_get_stats(s->pc, &s->st.state_snapshots, &snap_bytes);
        s->st.state_snapshot_bytes = snap_bytes;
        if (!ran) {
            s->st.last_step_time = ea_now_s(); /* idle is progress */
            /* followers block in the bus instead; rank 0 (or a lone process) naps until work comes */
            if (!s->n_incoming && !s->stopping && !s->n_proxies && (!s->o.bus || s->o.bus->rank == 0)) {
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
    if (o->bus && o->bus->dp && (o->bus->n_ranks < 1 || o->bus->n_ranks > EA_SCHED_DP_MAX_RANKS || !o->bus->gather)) {
        ea_free(s);
        return ea_err(EA_ERR_INVALID_ARG, "data-parallel attention over %d ranks (1..%d, with a gather)",
                      o->bus->n_ranks, EA_SCHED_DP_MAX_RANKS);
    }
    s->st.dp_ranks = o->bus && o->bus->dp ? o->bus->n_ranks : 0;
    s->vocab = e->m->cfg.vocab_size;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    size_t T = (size_t)s->o.max_batch_tokens;
    ea_status st = ea_sampler_create(s->vocab, &s->sampler);
    if (st == EA_OK) st = ea_gstep_create(tok, s->vocab, &s->gstep);
    s->logits = ea_aligned_alloc(64, sizeof(float) * T * (size_t)s->vocab);
    s->raw = ea_malloc(sizeof(float) * (size_t)s->vocab);
    s->b_tok = ea_malloc(sizeof(int32_t) * T);
    s->b_pos = ea_malloc(sizeof(int32_t) * T);
    s->b_seq = ea_malloc(sizeof(int32_t) * T);
    s->b_rows = ea_malloc(sizeof(int32_t) * T);
    s->b_req = ea_malloc(sizeof(ea_request *) * T);
    s->b_plp = ea_malloc(sizeof(int32_t) * T);
    s->p_req = ea_malloc(sizeof(ea_request *) * (size_t)e->kv.max_seqs);
    s->p_cnt = ea_malloc(sizeof(int) * (size_t)e->kv.max_seqs);
    s->slots = ea_calloc((size_t)e->kv.max_seqs, sizeof(ea_request *));
    if (st == EA_OK && tok) { /* ids with no token are never sampled (tokenizer.h: the one rule) */
        int n_pad = 0;
        st = ea_sampler_forbid_untokenized(s->sampler, tok, &n_pad);
        if (st == EA_OK && n_pad)
            EA_LOGI("%d of the model's %d vocabulary ids have no token in the tokenizer: never sampled", n_pad, s->vocab);
    }
    s->hybrid = e->m->cfg.n_linear_layers > 0;
    if (s->hybrid && s->o.max_batch_tokens < EA_K_DELTA_CHUNK)
        st = ea_err(EA_ERR_INVALID_ARG, "%s: --max-batch-tokens %d is below one DeltaNet chunk (%d)",
                    ea_arch_names[e->m->cfg.arch], s->o.max_batch_tokens, EA_K_DELTA_CHUNK);
    if (st == EA_OK && o->prefix_cache) {
        ea_prefix_cache_opts po = {.disk_dir = o->kv_disk_dir, .disk_max_mib = o->kv_disk_max_mib, .par_mode = o->par_mode,
                                   .par_world = o->par_world, .par_rank = o->par_rank,
                                   .on_disk = ea__disk_stats, .on_disk_ctx = s, .lin = s->hybrid ? &e->lin : NULL};
        st = ea_prefix_cache_create(&e->kv, e->m, &po, &s->pc);
    }
    if (st == EA_OK && (!s->logits || !s->raw || !s->b_tok || !s->b_pos || !s->b_seq || !s->b_rows || !s->b_req || !s->b_plp || !s->p_req || !s->p_cnt ||
                        !s->slots))
        st = ea_err(EA_ERR_NOMEM, "scheduler buffers");
    if (st != EA_OK) {
        ea_sched_destroy(s);
        return st;
    }
    s->lim = (ea__req_limits){.max_ctx = e->o.max_ctx, .kv_tokens = ea_sched_kv_tokens(s), .vocab = s->vocab, .tok = tok,
                              .defaults = o->model_sampling_defaults ? &e->m->cfg : NULL};
    s->st.last_step_time = ea_now_s();
    s->st.lin_state_bytes = s->hybrid ? (uint64_t)e->lin.max_seqs * e->lin.seq_floats * sizeof(float) : 0;
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
    ea_prefix_cache_destroy(s->pc); /* writes what it holds to the disk tier for the next start */
    ea_sampler_destroy(s->sampler);
    ea_gstep_destroy(s->gstep);
    ea_aligned_free(s->logits);
    ea_free(s->raw);
    ea_free(s->b_tok);
    ea_free(s->b_pos);
    ea_free(s->b_seq);
    ea_free(s->b_rows);
    ea_free(s->b_req);
    ea_free(s->b_plp);
    ea_free(s->p_req);
    ea_free(s->p_cnt);
    ea_free(s->slots);
    ea_sbuf_deinit(&s->bus_out);
    ea_sbuf_deinit(&s->dp_out);
    ea_sbuf_deinit(&s->dp_in);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    ea_free(s);
}

int ea_sched_context_len(const ea_sched *s) { return s->e->o.max_ctx; }

int ea_sched_kv_tokens(const ea_sched *s) { return s->e->kv.n_blocks * s->e->kv.block_size; }
ea_moe_health ea_sched_moe_health(ea_sched *s, char *why, size_t n) { return ea_moe_backend_health(s->e->be, why, n); }

ea_status ea_sched_submit(ea_sched *s, const ea_req_params *p, ea_request **out) {
    *out = NULL;
    if (s->o.bus && s->o.bus->rank != 0) return ea_err(EA_ERR_INVALID_ARG, "only rank 0 accepts requests");
    if (s->o.bus && p->grammar && (p->n_grammar_src <= 0 || !s->o.compile_grammar))
        return ea_err(EA_ERR_INVALID_ARG, "this constraint is not supported with --parallel: its grammar has no "
                                          "source to send to the other ranks over the control bus");
    ea_request *r;
    EA_TRY(ea__req_new(&s->lim, p, 0, &r));
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
