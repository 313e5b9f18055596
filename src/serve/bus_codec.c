/*
 * bus_codec.c — see bus_codec.h for the format. Writing appends to an
 * ea_sbuf (a failed growth sets b->failed, checked once by the caller);
 * reading copies each field out of the batch after checking it is there.
 */
#include "serve/bus_codec.h"

#include <string.h>

#define N_EVENTS_AT 12 /* offset of n_events in the header */
_Static_assert(sizeof(ea_logit_bias) == 8, "logit bias pairs travel as (i32 id, f32 bias)");

void ea_bus_begin(ea_sbuf *b, uint64_t step) {
    uint32_t magic = EA_BUS_MAGIC, n = 0;
    ea_sbuf_reset(b);
    ea_sbuf_append(b, &magic, sizeof magic);
    ea_sbuf_append(b, &step, sizeof step);
    ea_sbuf_append(b, &n, sizeof n);
}

/* Event header: kind, id; counted in the batch's n_events. */
static void put_event(ea_sbuf *b, ea_bus_kind kind, uint64_t id) {
    uint8_t k = (uint8_t)kind;
    ea_sbuf_append(b, &k, 1);
    ea_sbuf_append(b, &id, sizeof id);
    if (b->failed || b->len < N_EVENTS_AT + 4) return;
    uint32_t n;
    memcpy(&n, b->data + N_EVENTS_AT, 4);
    n++;
    memcpy(b->data + N_EVENTS_AT, &n, 4);
}

void ea_bus_put_submit(ea_sbuf *b, uint64_t id, const ea_req_params *p) {
    int32_t iv[6] = {p->n_prompt, p->max_tokens, p->ignore_eos, p->logprobs, p->top_logprobs, p->n_stop};
    float fv[2] = {p->sp.temperature, p->sp.top_p};
    int32_t tk = p->sp.top_k;
    float fv2[4] = {p->sp.min_p, p->sp.presence_penalty, p->sp.frequency_penalty, p->sp.repetition_penalty};
    uint64_t seed = p->sp.seed;
    put_event(b, EA_BUS_SUBMIT, id);
    ea_sbuf_append(b, iv, sizeof iv);
    ea_sbuf_append(b, fv, sizeof fv);
    ea_sbuf_append(b, &tk, sizeof tk);
    ea_sbuf_append(b, fv2, sizeof fv2);
    ea_sbuf_append(b, &seed, sizeof seed);
    int32_t iv2[5] = {p->n_stop_ids, p->min_tokens, p->prompt_logprobs, p->keep_special, p->include_stop};
    ea_sbuf_append(b, iv2, sizeof iv2);
    ea_sbuf_append(b, p->stop_ids, sizeof(int32_t) * (size_t)p->n_stop_ids);
    for (int i = 0; i < p->n_stop; i++) {
        uint32_t n = (uint32_t)strlen(p->stop[i]);
        ea_sbuf_append(b, &n, sizeof n);
        ea_sbuf_append(b, p->stop[i], n);
    }
    int32_t iv3[2] = {p->n_bias, p->n_forced};
    ea_sbuf_append(b, iv3, sizeof iv3);
    for (int i = 0; i < p->n_bias; i++) {
        ea_sbuf_append(b, &p->bias[i].id, 4);
        ea_sbuf_append(b, &p->bias[i].bias, 4);
    }
    if (p->n_forced > 0) ea_sbuf_append(b, p->forced, sizeof(int32_t) * (size_t)p->n_forced);
    uint32_t ng = p->grammar_src && p->n_grammar_src > 0 ? (uint32_t)p->n_grammar_src : 0;
    ea_sbuf_append(b, &ng, sizeof ng);
    if (ng) ea_sbuf_append(b, p->grammar_src, ng);
    int32_t gate[2] = {p->grammar_after_think, p->think_end};
    ea_sbuf_append(b, gate, sizeof gate);
    ea_sbuf_append(b, p->prompt, sizeof(int32_t) * (size_t)p->n_prompt);
}

void ea_bus_put_cancel(ea_sbuf *b, uint64_t id) { put_event(b, EA_BUS_CANCEL, id); }
void ea_bus_put_shutdown(ea_sbuf *b) { put_event(b, EA_BUS_SHUTDOWN, 0); }
void ea_bus_put_assign(ea_sbuf *b, uint64_t id, int rank) {
    int32_t r = rank;
    put_event(b, EA_BUS_ASSIGN, id);
    ea_sbuf_append(b, &r, sizeof r);
}

static int get(ea_bus_reader *rd, void *out, size_t n) {
    if ((size_t)(rd->end - rd->p) < n) return 0;
    memcpy(out, rd->p, n);
    rd->p += n;
    return 1;
}

ea_status ea_bus_read_begin(ea_bus_reader *rd, const void *buf, size_t len) {
    rd->p = buf;
    rd->end = rd->p + len;
    rd->i = 0;
    uint32_t magic;
    if (!get(rd, &magic, 4) || magic != EA_BUS_MAGIC || !get(rd, &rd->step, 8) || !get(rd, &rd->n, 4))
        return ea_err(EA_ERR_FORMAT, "control bus: bad batch header (%zu bytes)", len);
    return EA_OK;
}

static ea_status read_submit(ea_bus_reader *rd, ea_bus_event *ev) {
    unsigned long long id = (unsigned long long)ev->id;
    int32_t iv[6], tk, iv2[5];
    float fv[2], fv2[4];
    uint64_t seed;
    if (!get(rd, iv, sizeof iv) || !get(rd, fv, sizeof fv) || !get(rd, &tk, 4) || !get(rd, fv2, sizeof fv2) ||
        !get(rd, &seed, 8) || !get(rd, iv2, sizeof iv2) || iv2[0] < 0 || iv2[0] > EA_MAX_STOP_IDS || iv[5] < 0 || iv[5] > EA_MAX_STOP || iv[0] <= 0 || iv[0] > (1 << 24))
        return ea_err(EA_ERR_FORMAT, "control bus: submit %llu malformed", id);
    ea_req_params *p = &ev->p;
    memset(p, 0, sizeof *p);
    p->n_prompt = iv[0];
    p->max_tokens = iv[1];
    p->ignore_eos = iv[2];
    p->logprobs = iv[3];
    p->top_logprobs = iv[4];
    p->n_stop = iv[5];
    p->sp.temperature = fv[0];
    p->sp.top_p = fv[1];
    p->sp.top_k = tk;
    p->sp.min_p = fv2[0];
    p->sp.presence_penalty = fv2[1];
    p->sp.frequency_penalty = fv2[2];
    p->sp.repetition_penalty = fv2[3];
    p->sp.seed = seed;
    p->n_stop_ids = iv2[0];
    p->min_tokens = iv2[1];
    p->prompt_logprobs = iv2[2] != 0;
    p->keep_special = iv2[3] != 0;
    p->include_stop = iv2[4] != 0;
    if (!get(rd, p->stop_ids, sizeof(int32_t) * (size_t)p->n_stop_ids))
        return ea_err(EA_ERR_FORMAT, "control bus: stop token ids of %llu", id);
    for (int k = 0; k < p->n_stop; k++) {
        uint32_t sl;
        /* what rank 0 writes is a C string, non-empty (stop_text.h): anything else was damaged */
        if (!get(rd, &sl, 4) || sl == 0 || sl >= sizeof ev->stops[k] || !get(rd, ev->stops[k], sl) ||
            memchr(ev->stops[k], 0, sl))
            return ea_err(EA_ERR_FORMAT, "control bus: stop string %d of %llu empty, too long or holding a NUL", k,
                          id);
        ev->stops[k][sl] = 0;
        p->stop[k] = ev->stops[k];
    }
    int32_t iv3[2];
    if (!get(rd, iv3, sizeof iv3) || iv3[0] < 0 || iv3[0] > EA_MAX_LOGIT_BIAS || iv3[1] < 0 || iv3[1] > p->max_tokens)
        return ea_err(EA_ERR_FORMAT, "control bus: logit bias / forced counts of %llu", id);
    p->n_bias = iv3[0];
    p->n_forced = iv3[1];
    size_t nb = 8 * (size_t)p->n_bias, nf = sizeof(int32_t) * (size_t)p->n_forced;
    if ((size_t)(rd->end - rd->p) < nb + nf) return ea_err(EA_ERR_FORMAT, "control bus: logit bias of %llu truncated", id);
    ev->bias = rd->p; /* (id i32, bias f32) pairs: the layout of ea_logit_bias */
    ev->forced = rd->p + nb;
    rd->p += nb + nf;
    uint32_t ng;
    if (!get(rd, &ng, 4) || ng > EA_BUS_MAX_GRAMMAR_SRC || (size_t)(rd->end - rd->p) < ng)
        return ea_err(EA_ERR_FORMAT, "control bus: grammar source of %llu truncated or longer than %u bytes", id,
                      EA_BUS_MAX_GRAMMAR_SRC);
    ev->grammar_src = ng ? (const char *)rd->p : NULL;
    p->n_grammar_src = (int)ng;
    rd->p += ng;
    int32_t gate[2];
    if (!get(rd, gate, sizeof gate) || (gate[0] != 0 && gate[0] != 1) || gate[1] < 0)
        return ea_err(EA_ERR_FORMAT, "control bus: grammar gate of %llu", id);
    p->grammar_after_think = gate[0];
    p->think_end = gate[1];
    size_t n = sizeof(int32_t) * (size_t)p->n_prompt;
    if ((size_t)(rd->end - rd->p) < n) return ea_err(EA_ERR_FORMAT, "control bus: prompt of %llu truncated", id);
    ev->prompt = rd->p;
    rd->p += n;
    return EA_OK;
}

ea_status ea_bus_read_next(ea_bus_reader *rd, ea_bus_event *ev, int *more) {
    *more = 0;
    if (rd->i == rd->n) return EA_OK;
    uint8_t kind;
    if (!get(rd, &kind, 1) || !get(rd, &ev->id, 8))
        return ea_err(EA_ERR_FORMAT, "control bus: event %u of %u truncated", rd->i, rd->n);
    rd->i++;
    ev->kind = (ea_bus_kind)kind;
    ev->prompt = NULL;
    if (kind == EA_BUS_SUBMIT) EA_TRY(read_submit(rd, ev));
    else if (kind == EA_BUS_ASSIGN) {
        int32_t r;
        if (!get(rd, &r, sizeof r) || r < 0)
            return ea_err(EA_ERR_FORMAT, "control bus: assign of request %llu truncated or negative",
                          (unsigned long long)ev->id);
        ev->rank = r;
    } else if (kind != EA_BUS_CANCEL && kind != EA_BUS_SHUTDOWN)
        return ea_err(EA_ERR_FORMAT, "control bus: unknown event kind %u", kind);
    *more = 1;
    return EA_OK;
}
