/*
 * sched_bus.c — the scheduler's multi-rank part: one round of the control bus
 * per step (rank 0 builds the batch, every rank applies it), and
 * data-parallel attention (requests assigned to ranks, events back to rank
 * 0). The batch format is bus_codec.h, the MPI transport ep/bus.c, the state
 * sched_impl.h; the step loop that calls these is scheduler.c.
 */
#include <stdatomic.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "grammar/grammar.h"
#include "serve/bus_codec.h"
#include "serve/request.h"
#include "serve/sched_impl.h"

/* ------------------------------------------------------------ control bus
 *
 * The batch format is bus_codec.h; the transport is s->o.bus (ep/bus.c).
 */

static ea_request *ea__find(ea_sched *s, uint64_t id) {
    for (ea_request *r = s->running; r; r = r->next)
        if (r->id == id) return r;
    for (ea_request *r = s->waiting; r; r = r->next)
        if (r->id == id) return r;
    return NULL;
}

/* Make the request of a submit event on a rank without clients (headless). */
static ea_status ea__bus_request(ea_sched *s, const ea_bus_event *ev, ea_request **out) {
    ea_req_params p = ev->p;
    /* aligned copies of the batch's views; copied again by ea__req_new */
    int32_t *tmp = ea_malloc(sizeof(int32_t) * ((size_t)p.n_prompt + (size_t)p.n_forced));
    ea_logit_bias *bias = p.n_bias ? ea_malloc(sizeof *bias * (size_t)p.n_bias) : NULL;
    if (!tmp || (p.n_bias && !bias)) {
        ea_free(tmp);
        ea_free(bias);
        return ea_err(EA_ERR_NOMEM, "control bus");
    }
    memcpy(tmp, ev->prompt, sizeof(int32_t) * (size_t)p.n_prompt);
    if (p.n_forced) memcpy(tmp + p.n_prompt, ev->forced, sizeof(int32_t) * (size_t)p.n_forced);
    if (bias) memcpy(bias, ev->bias, sizeof *bias * (size_t)p.n_bias);
    p.prompt = tmp;
    p.forced = tmp + p.n_prompt;
    p.bias = bias;
    p.grammar_src = ev->grammar_src;
    ea_status st = EA_OK;
    if (p.n_grammar_src > 0) { /* the same grammar as rank 0's, from the same source */
        st = s->o.compile_grammar ? s->o.compile_grammar(p.grammar_src, (size_t)p.n_grammar_src, &p.grammar)
                                  : ea_err(EA_ERR_INVALID_ARG, "no grammar compiler on this rank");
        if (st != EA_OK) st = ea_err_wrap(st, "structured output: ");
    }
    if (st == EA_OK) st = ea__req_new(&s->lim, &p, 1, out);
    ea_grammar_destroy(p.grammar); /* the request holds its own reference */
    ea_free(tmp);
    ea_free(bias);
    if (st != EA_OK) return ea_err_wrap(st, "control bus: request %llu: ", (unsigned long long)ev->id);
    (*out)->id = ev->id;
    return EA_OK;
}

/* ------------------------------------------------------------ data-parallel attention
 *
 * With o.bus->dp each request runs on one rank: rank 0 assigns it to the rank
 * with the fewest unfinished requests (an EA_BUS_ASSIGN event after its
 * submit, so every rank agrees); the other ranks drop it, and rank 0 keeps a
 * proxy holding the client. Every step each rank runs its own batch (ea__step:
 * all step together when any has tokens, an empty batch included), then every
 * rank's events of the step go to rank 0 (ea__dp_exchange), which pushes them
 * to the proxies' clients. Sampling happens on the running rank with the
 * request's own seed, so the output is the one process's.
 */

/* Rank 0: the rank a new request goes to. */
static int ea__dp_pick(ea_sched *s) {
    int best = 0;
    for (int r = 1; r < s->o.bus->n_ranks; r++)
        if (s->dp_load[r] < s->dp_load[best]) best = r;
    return best;
}

static ea_status ea__dp_assign(ea_sched *s, uint64_t id, int owner) {
    const ea_sched_bus *bus = s->o.bus;
    ea_request *r = ea__find(s, id);
    if (!bus->dp || owner >= bus->n_ranks || !r || r->seq >= 0)
        return ea_err(EA_ERR_FORMAT, "control bus: request %llu assigned to rank %d", (unsigned long long)id, owner);
    r->owner = owner;
    if (owner == bus->rank) {
        if (bus->rank != 0) r->dp_sink = &s->dp_out;
        return EA_OK;
    }
    ea__list_remove(&s->waiting, r);
    s->n_waiting--;
    r->next = NULL;
    if (bus->rank != 0) {
        ea__req_unref(r);
        return EA_OK;
    }
    ea__list_append(&s->proxies, r);
    s->n_proxies++;
    return EA_OK;
}

/* Rank 0: a proxy's event from its rank, to the client; the last one ends the proxy. */
static void ea__dp_deliver(ea_sched *s, int from, uint64_t id, ea_event *ev) {
    ea_request **pp = &s->proxies;
    while (*pp && (*pp)->id != id) pp = &(*pp)->next;
    ea_request *r = *pp;
    if (!r || r->owner != from) {
        EA_LOGW("data-parallel attention: rank %d sent an event of request %llu, which is not its", from,
                (unsigned long long)id);
        return;
    }
    ev->text[sizeof ev->text - 1] = 0;
    ev->message[sizeof ev->message - 1] = 0;
    ea__req_push(r, ev);
    pthread_mutex_lock(&s->mu);
    if (ev->kind == EA_EV_TOKEN) s->st.generation_tokens++;
    if (ev->kind == EA_EV_DONE) s->st.prompt_tokens += (uint64_t)ev->prompt_tokens;
    int last = ev->kind == EA_EV_DONE || ev->kind == EA_EV_ERROR;
    if (last) s->st.requests_finished++;
    pthread_mutex_unlock(&s->mu);
    if (!last) return;
    *pp = r->next;
    s->n_proxies--;
    s->dp_load[from]--;
    r->finished = 1;
    ea__req_unref(r);
}

/* Every rank's events of this step to rank 0 (a collective each loop turn). */
ea_status ea__dp_exchange(ea_sched *s) {
    const ea_sched_bus *bus = s->o.bus;
    EA_TRY(bus->gather(bus->ctx, s->dp_out.data, s->dp_out.len, &s->dp_in));
    ea_sbuf_reset(&s->dp_out);
    if (bus->rank != 0) return EA_OK;
    const size_t rec = sizeof(uint64_t) + sizeof(ea_event);
    size_t at = 0;
    for (int from = 0; from < bus->n_ranks; from++) {
        uint64_t len;
        if (at + sizeof len > s->dp_in.len) return ea_err(EA_ERR_PEER, "data-parallel attention: events truncated");
        memcpy(&len, s->dp_in.data + at, sizeof len);
        at += sizeof len;
        if (len % rec || len > s->dp_in.len - at)
            return ea_err(EA_ERR_PEER, "data-parallel attention: rank %d sent %llu bytes of events", from,
                          (unsigned long long)len);
        for (size_t q = at; q < at + len; q += rec) {
            uint64_t id;
            ea_event ev;
            memcpy(&id, s->dp_in.data + q, sizeof id);
            memcpy(&ev, s->dp_in.data + q + sizeof id, sizeof ev);
            ea__dp_deliver(s, from, id, &ev);
        }
        at += len;
    }
    return EA_OK;
}

/* Rank 0, stopping or failed: the proxies end here (their ranks stop too). */
void ea__dp_drop_proxies(ea_sched *s, ea_status st, const char *why) {
    while (s->proxies) {
        ea_request *r = s->proxies;
        s->proxies = r->next;
        ea__finish(s, r, st == EA_OK ? EA_FINISH_CANCELLED : EA_FINISH_NONE, st, why);
        ea__req_unref(r);
    }
    s->n_proxies = 0;
}

/* Apply one received batch. `mine` is rank 0's list of the requests it announced. */
static ea_status ea__apply(ea_sched *s, const uint8_t *buf, size_t len, ea_request **mine) {
    ea_bus_reader rd;
    ea_bus_event ev;
    int more;
    EA_TRY(ea_bus_read_begin(&rd, buf, len));
    for (;;) {
        EA_TRY(ea_bus_read_next(&rd, &ev, &more));
        if (!more) return EA_OK;
        if (ev.kind == EA_BUS_SUBMIT) {
            ea_request *r = NULL;
            if (mine && *mine) { /* rank 0: the request object already exists, in this order */
                r = *mine;
                *mine = r->next;
                if (r->id != ev.id)
                    return ea_err(EA_ERR_INTERNAL, "control bus: order mismatch at request %llu", (unsigned long long)ev.id);
                r->next = NULL;
            } else {
                EA_TRY(ea__bus_request(s, &ev, &r));
            }
            ea__list_append(&s->waiting, r);
            s->n_waiting++;
        } else if (ev.kind == EA_BUS_ASSIGN) {
            EA_TRY(ea__dp_assign(s, ev.id, ev.rank));
        } else if (ev.kind == EA_BUS_CANCEL) {
            ea_request *r = ea__find(s, ev.id);
            if (r) r->cancel_applied = 1;
        } else {
            s->shutdown_seen = 1;
        }
    }
}

/* Rank 0: this step's batch into s->bus_out — the new requests (`mine`, in
 * order), the cancels not yet sent, and the shutdown when it is time. */
static ea_status ea__bus_build(ea_sched *s, ea_request *mine, int shutdown) {
    ea_sbuf *b = &s->bus_out;
    ea_bus_begin(b, s->st.steps);
    int dp = s->o.bus->dp;
    for (ea_request *r = mine; r; r = r->next) {
        ea_bus_put_submit(b, r->id, &r->p);
        if (!dp) continue;
        int owner = ea__dp_pick(s);
        s->dp_load[owner]++;
        pthread_mutex_lock(&s->mu);
        s->st.dp_assigned[owner]++;
        pthread_mutex_unlock(&s->mu);
        ea_bus_put_assign(b, r->id, owner);
    }
    for (int pass = 0; pass < 2; pass++)
        for (ea_request *r = pass ? s->waiting : s->running; r; r = r->next)
            if (atomic_load(&r->cancelled) && !r->cancel_applied && !r->finished) ea_bus_put_cancel(b, r->id);
    for (ea_request *r = s->proxies; r; r = r->next) /* their rank cancels them and says so */
        if (atomic_load(&r->cancelled) && !r->cancel_applied) r->cancel_applied = 1, ea_bus_put_cancel(b, r->id);
    if (shutdown) ea_bus_put_shutdown(b);
    return b->failed ? ea_err(EA_ERR_NOMEM, "control bus batch") : EA_OK;
}

/* One round of the bus: rank 0 builds and sends the batch, everyone applies it. */
ea_status ea__bus_round(ea_sched *s, int shutdown) {
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
        EA_TRY(ea__bus_build(s, mine, shutdown));
        buf = (uint8_t *)s->bus_out.data;
        len = s->bus_out.len;
    }
    EA_TRY(bus->bcast(bus->ctx, &buf, &len));
    ea_status st = ea__apply(s, buf, len, bus->rank == 0 ? &mine : NULL);
    if (bus->rank != 0) ea_free(buf);
    return st;
}

