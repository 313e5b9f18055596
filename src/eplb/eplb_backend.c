/*
 * eplb_backend.c — the EPLB moe backend wrapper (contract in eplb_backend.h).
 *
 * State, all sized at create (a forward call and a step allocate nothing):
 *   moe_of[n_layers]      model layer -> MoE index (-1 dense); layer_of[] the inverse
 *   inner                 the backend over the physical slots (any kind: moe.h)
 *   meta                  the current placement (meta.h)
 *   win, rec              window recorder (feeds the manager; always on) and dump
 *                         recorder (HTTP start/stop/dump)
 *   periodic, forced      two managers over the same meta: `periodic` runs every
 *                         `interval` steps with the configured threshold; `forced`
 *                         (interval 1, threshold 2 > any balancedness) carries out
 *                         POST /eplb/rebalance. At most one has a plan in
 *                         progress (`active`); the other is not stepped meanwhile.
 *
 * Invariants:
 *   - the inner backend's slot p of MoE layer l computes model expert
 *     meta.phy2log[l][p], for every layer at every forward step: a chunk is
 *     applied to the inner backend layer by layer (a failure puts the layers
 *     already applied back), then the manager commits the maps of the same
 *     layers — both in end_step, on the step-loop thread.
 *   - mu guards win, rec, the managers' stats, meta against readers on other
 *     threads, and the pending flags. The step loop writes meta and slots only
 *     while holding mu; it reads them in forward without mu (it is their only
 *     writer). Recording takes mu for two array updates per layer call.
 */
#include "eplb/eplb_backend.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "eplb/manager.h"
#include "eplb/recorder.h"

struct ea_eplb_backend {
    ea_moe_backend base;          /* must be first: the vtable's functions cast back */
    ea_eplb_backend_opts o;       /* init_location not kept (borrowed at create only) */
    int n_moe, P;
    ea_moe_backend *inner;        /* owns: the backend over the physical slots */
    int32_t *moe_of;              /* owns [n_layers] */
    int32_t *layer_of;            /* owns [n_moe] */
    int32_t *phys;                /* owns [lanes][max_tokens * max_k] physical ids of a call */
    ea_moe_call call[EA_MOE_MAX_LANES]; /* per lane the inner call in flight (ids = phys), submit to wait */
    ea_eplb_meta meta;            /* owns */
    ea_eplb_recorder win, rec;    /* own */
    ea_eplb_manager *periodic;    /* owns; NULL when interval <= 0 */
    ea_eplb_manager *forced;      /* owns */
    ea_eplb_manager *active;      /* borrows periodic or forced while a plan is in progress */
    uint64_t active_done;         /* rebalances + failures of `active` when its plan began */
    pthread_mutex_t mu;
    int force_pending;            /* guarded by mu */
    int fail_moves;               /* test hook, guarded by mu */
    uint64_t steps, last_switch_step;
    double last_before, last_after;
    uint64_t seen_failures;       /* failures already copied into reason */
    char reason[256];
};

void ea_eplb_backend_opts_default(ea_eplb_backend_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_ranks = 1;
    o->n_nodes = 1;
    o->n_groups = 1;
    o->window = 1000;
    o->interval = 1000;
    o->min_balancedness = 0.9;
    o->algo = EA_EPLB_DEEPSEEK;
}

static uint64_t ea__done(const ea_eplb_manager *m) {
    const ea_eplb_manager_stats *s = ea_eplb_manager_get_stats(m);
    return s->n_rebalances + s->n_failures;
}

/* ---------------------------------------------------------------- data path */

static ea_status ea__be_submit(ea_moe_backend *be, const ea_moe_call *c) {
    ea_eplb_backend *b = (ea_eplb_backend *)be;
    int layer = c->layer, n = c->n_tokens, k = c->k;
    const int32_t *ids = c->ids;
    if (layer < 0 || layer >= b->o.n_layers || b->moe_of[layer] < 0)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB: layer %d has no routed experts", layer);
    if (n < 0 || k < 0 || n > b->o.max_tokens || k > b->o.max_k)
        return ea_err(EA_ERR_RANGE, "EPLB: moe call of %d tokens x %d slots exceeds %d x %d", n, k, b->o.max_tokens,
                      b->o.max_k);
    if (c->lane < 0 || c->lane >= EA_MOE_MAX_LANES) return ea_err(EA_ERR_RANGE, "EPLB: lane %d", c->lane);
    int ml = b->moe_of[layer], nk = n * k;
    int32_t *phys = b->phys + (size_t)c->lane * b->o.max_tokens * b->o.max_k;
    /* record (logical ids) */
    pthread_mutex_lock(&b->mu);
    ea_eplb_record(&b->win, ml, ids, nk);
    ea_eplb_record(&b->rec, ml, ids, nk);
    pthread_mutex_unlock(&b->mu);
    /* logical -> physical, nearest replica to the sending rank */
    if (b->o.rank >= 0)
        ea_eplb_meta_map(&b->meta, ml, b->o.rank, ids, nk, phys);
    else
        for (int t = 0; t < n; t++)
            ea_eplb_meta_map(&b->meta, ml, t % b->meta.n_ranks, ids + (size_t)t * k, k, phys + (size_t)t * k);
    for (int i = 0; i < nk; i++)
        if (phys[i] < 0)
            return ea_err(EA_ERR_RANGE, "EPLB: layer %d token %d slot %d: logical expert %d not in [0, %d)", layer,
                          i / k, i % k, ids[i], b->o.n_logical);
    ea_moe_call *call = &b->call[c->lane];
    *call = *c;
    call->ids = phys;
    return b->inner->vt->submit(b->inner, call);
}

/* The inner backend names PHYSICAL slots in its failures; the outcome speaks of logical experts. */
static ea_status ea__be_wait(ea_moe_backend *be, const ea_moe_call *c, ea_moe_outcome *out) {
    ea_eplb_backend *b = (ea_eplb_backend *)be;
    if (c->lane < 0 || c->lane >= EA_MOE_MAX_LANES) return ea_err(EA_ERR_RANGE, "EPLB: lane %d", c->lane);
    const ea_moe_call *call = &b->call[c->lane];
    int before = out ? out->n_fail : 0;
    EA_TRY(b->inner->vt->wait(b->inner, call, out));
    const int32_t *p2l = b->meta.phy2log + (size_t)b->moe_of[call->layer] * (size_t)b->P;
    for (int i = before; out && i < out->n_fail; i++)
        if (out->fail[i].layer == call->layer && out->fail[i].expert >= 0 && out->fail[i].expert < b->P)
            out->fail[i].expert = p2l[out->fail[i].expert];
    return EA_OK;
}

static ea_moe_health ea__be_health(ea_moe_backend *be, char *why, size_t n) {
    return ea_moe_backend_health(((ea_eplb_backend *)be)->inner, why, n);
}

static int ea__be_lanes(ea_moe_backend *be) { return ea_moe_lanes(((ea_eplb_backend *)be)->inner); }

static void ea__be_stats(ea_moe_backend *be, json_t *json, ea_sbuf *prom) {
    ea_eplb_backend *b = (ea_eplb_backend *)be;
    ea_eplb_backend_stats st;
    ea_eplb_backend_get_stats(b, &st);
    if (json)
        json_object_set_new(
            json, "eplb",
            json_pack("{s:f, s:I, s:I, s:I, s:I, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f}", "balancedness",
                      st.balancedness, "rebalances_total", (json_int_t)st.rebalances_total, "failures",
                      (json_int_t)st.failures, "layer_switches", (json_int_t)st.layer_switches, "steps",
                      (json_int_t)st.steps, "plan_in_progress", st.plan_in_progress, "recording", st.recording,
                      "layers", st.n_layers, "logical", st.n_logical, "physical", st.n_physical, "ranks", st.n_ranks,
                      "last_plan_before", st.last_plan_before, "last_plan_after", st.last_plan_after));
    if (prom)
        ea_sbuf_printf(prom,
                       "# HELP eaas:eplb_balancedness Mean over MoE layers of mean/max rank load on the window.\n"
                       "# TYPE eaas:eplb_balancedness gauge\neaas:eplb_balancedness %.6f\n"
                       "# HELP eaas:eplb_rebalances_total Placements fully switched.\n"
                       "# TYPE eaas:eplb_rebalances_total counter\neaas:eplb_rebalances_total %llu\n"
                       "# HELP eaas:eplb_failures_total Rebalances that failed (old placement kept).\n"
                       "# TYPE eaas:eplb_failures_total counter\neaas:eplb_failures_total %llu\n",
                       st.balancedness, (unsigned long long)st.rebalances_total, (unsigned long long)st.failures);
    ea_moe_backend_stats(b->inner, json, prom);
}

/* Switch a chunk's layers to next's placement in the inner backend, all or
 * none: on a failure the layers already switched get their current rows back. */
static ea_status ea__apply(ea_eplb_backend *b, const ea_eplb_meta *next, const int32_t *layers, int n_layers) {
    size_t P = (size_t)b->P;
    ea_status s = EA_OK;
    int i = 0;
    for (; i < n_layers; i++) {
        int ml = layers[i], l = b->layer_of[ml];
        if (b->fail_moves > 0) {
            b->fail_moves--;
            s = ea_err(EA_ERR_INTERNAL, "injected weight-move failure at MoE layer %d (model layer %d)", ml, l);
            break;
        }
        if ((s = ea_moe_apply_placement(b->inner, l, next->phy2log + (size_t)ml * P, b->P)) != EA_OK) break;
    }
    while (s != EA_OK && i-- > 0) { /* layers[0..i) switched; the one that failed kept its placement */
        int ml = layers[i];
        ea_status back = ea_moe_apply_placement(b->inner, b->layer_of[ml], b->meta.phy2log + (size_t)ml * P, b->P);
        EA_ASSERT(back == EA_OK); /* the placement it held a moment ago */
    }
    return s;
}

/* Copy the reason of a new failure of manager m (the one just stepped). */
static void ea__note_failures(ea_eplb_backend *b, const ea_eplb_manager *m) {
    uint64_t total = ea_eplb_manager_get_stats(b->forced)->n_failures +
                     (b->periodic ? ea_eplb_manager_get_stats(b->periodic)->n_failures : 0);
    if (total != b->seen_failures) {
        snprintf(b->reason, sizeof b->reason, "%s", ea_eplb_manager_get_stats(m)->reason);
        b->seen_failures = total;
    }
}

static void ea__be_end_step(ea_moe_backend *be) {
    ea_eplb_backend *b = (ea_eplb_backend *)be;
    ea_moe_end_step(b->inner);
    /* Ranks in lockstep (ep) run the same managers on the same counts, so they
     * plan alike; a requested rebalance reaches rank 0 only, so they take rank
     * 0's word for it here (before the lock: it is a collective). */
    pthread_mutex_lock(&b->mu);
    int64_t force = b->force_pending;
    pthread_mutex_unlock(&b->mu);
    if (ea_moe_agree(b->inner, &force, 1) != EA_OK) {
        EA_LOGE("eplb: ranks could not agree on a requested rebalance: %s", ea_errmsg()); /* the dist is broken */
        return;
    }
    /* With data-parallel attention each rank routed its own tokens: the step's
     * counts become their sum over ranks, so every rank's window, managers and
     * plans are the same (the weight moves check it). Summed in place without
     * the lock: win's open step is written only on this thread and read by no
     * other; rec (started and stopped from HTTP) takes the same sum under it. */
    size_t le = (size_t)b->n_moe * (size_t)b->o.n_logical;
    if (ea_moe_tally(b->inner, ea_eplb_recorder_step(&b->win), (int)le) != EA_OK) {
        EA_LOGE("eplb: ranks could not sum their routing counts: %s", ea_errmsg()); /* the dist is broken */
        return;
    }
    pthread_mutex_lock(&b->mu);
    if (b->rec.on) memcpy(ea_eplb_recorder_step(&b->rec), ea_eplb_recorder_step(&b->win), le * sizeof(int64_t));
    ea_eplb_recorder_end_step(&b->win);
    ea_eplb_recorder_end_step(&b->rec);
    b->steps++;
    ea_eplb_manager *m = b->active;
    if (!m && force) m = b->forced;
    if (!m) m = b->periodic;
    if (force) b->force_pending = 0; /* taken now, or merged into the plan in progress */
    if (!m) {
        pthread_mutex_unlock(&b->mu);
        return;
    }
    ea_eplb_step_result r;
    ea_status st = ea_eplb_manager_step(m, &b->meta, ea_eplb_recorder_counts(&b->win), &r);
    if (st != EA_OK) {
        EA_LOGE("eplb: manager step: %s", ea_errmsg()); /* a bug: a commit outstanding */
        pthread_mutex_unlock(&b->mu);
        return;
    }
    if (r.action == EA_EPLB_SWITCH) {
        if (!b->active) {
            b->active = m;
            b->active_done = ea__done(m);
            b->last_before = r.balancedness_before;
            b->last_after = r.balancedness_after;
            EA_LOGI("eplb: rebalancing (%s, step %llu): window balancedness %.4f -> %.4f planned",
                    m == b->forced ? "requested" : "periodic", (unsigned long long)b->steps, r.balancedness_before,
                    r.balancedness_after);
        }
        ea_status ms = ea__apply(b, ea_eplb_manager_next(m), r.layers, r.n_layers);
        ea_eplb_manager_commit(m, &b->meta, ms);
        if (ms == EA_OK) b->last_switch_step = b->steps;
        if (ea__done(m) != b->active_done) b->active = NULL;
    } else if (m == b->forced) {
        if (r.action == EA_EPLB_SKIP_NO_DATA) EA_LOGI("eplb: rebalance requested, but the window has no tokens");
        if (r.action == EA_EPLB_SKIP_UNCHANGED) EA_LOGI("eplb: rebalance requested: placement already optimal");
    }
    ea__note_failures(b, m);
    pthread_mutex_unlock(&b->mu);
}

/* ---------------------------------------------------------------- create */

void ea_eplb_backend_destroy(ea_eplb_backend *b) {
    if (!b) return;
    ea_moe_backend_destroy(b->inner);
    ea_eplb_manager_destroy(b->periodic);
    ea_eplb_manager_destroy(b->forced);
    ea_eplb_recorder_deinit(&b->win);
    ea_eplb_recorder_deinit(&b->rec);
    ea_eplb_meta_deinit(&b->meta);
    ea_free(b->moe_of);
    ea_free(b->layer_of);
    ea_free(b->phys);
    pthread_mutex_destroy(&b->mu);
    ea_free(b);
}

static void ea__be_destroy(ea_moe_backend *be) { ea_eplb_backend_destroy((ea_eplb_backend *)be); }

static const ea_moe_backend_vtable ea__be_vt = {.submit = ea__be_submit,
                                                .wait = ea__be_wait,
                                                .end_step = ea__be_end_step,
                                                .health = ea__be_health,
                                                .lanes = ea__be_lanes,
                                                .stats = ea__be_stats,
                                                .destroy = ea__be_destroy,
                                                .name = "eplb",
                                                .fails = EA_MOE_FAILS_TOKENS /* whatever the inner backend reports */};

ea_moe_backend *ea_eplb_backend_moe(ea_eplb_backend *b) { return b ? &b->base : NULL; }

static ea_status ea__check_opts(const ea_eplb_backend_opts *o) {
    if (o->n_layers <= 0 || o->n_logical <= 0 || o->max_tokens <= 0 || o->max_k <= 0 || !o->layer_is_moe)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB backend: model shape (layers %d, experts %d, max tokens %d, k %d) "
                      "and its MoE layers are required", o->n_layers, o->n_logical, o->max_tokens, o->max_k);
    if (o->n_redundant < 0 || o->n_redundant > EA_EPLB_MAX_REDUNDANT)
        return ea_err(EA_ERR_INVALID_ARG, "--eplb-redundant %d: must be in 0..%d", o->n_redundant,
                      EA_EPLB_MAX_REDUNDANT);
    if (o->n_ranks < 1 || o->n_nodes < 1 || o->n_ranks % o->n_nodes)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB: %d ranks over %d nodes: need ranks >= 1 and a multiple of nodes",
                      o->n_ranks, o->n_nodes);
    if (o->rank < -1 || o->rank >= o->n_ranks)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB: rank %d not in [0, %d) (or -1)", o->rank, o->n_ranks);
    if (o->window < 1) return ea_err(EA_ERR_INVALID_ARG, "--eplb-window %d: must be >= 1", o->window);
    if (o->layers_per_step < 0)
        return ea_err(EA_ERR_INVALID_ARG, "--eplb-layers-per-step %d: must be >= 0", o->layers_per_step);
    if (!(o->min_balancedness >= 0.0))
        return ea_err(EA_ERR_INVALID_ARG, "--eplb-min-balancedness %g: must be >= 0", o->min_balancedness);
    return EA_OK;
}

static int ea__n_moe(const ea_eplb_backend_opts *o) {
    int n = 0;
    for (int l = 0; l < o->n_layers; l++) n += o->layer_is_moe[l] != 0;
    return n;
}

ea_status ea_eplb_initial_placement(const ea_eplb_backend_opts *o, ea_eplb_meta *out) {
    memset(out, 0, sizeof *out);
    EA_TRY(ea__check_opts(o));
    int E = o->n_logical, n_moe = ea__n_moe(o);
    if (n_moe == 0) return ea_err(EA_ERR_INVALID_ARG, "EPLB: the model has no MoE layer");
    if (!o->init_location) {
        int P = E + o->n_redundant;
        if (P % o->n_ranks)
            return ea_err(EA_ERR_INVALID_ARG, "EPLB: %d physical slots (%d experts + %d redundant) are not a "
                          "multiple of %d ranks", P, E, o->n_redundant, o->n_ranks);
        return ea_eplb_meta_init_trivial(out, n_moe, E, P, o->n_ranks, o->n_nodes);
    }
    EA_TRY(ea_eplb_meta_init_from_file(out, o->init_location, o->n_ranks, o->n_nodes));
    ea_status s = EA_OK;
    if (out->n_layers != n_moe || out->n_logical != E)
        s = ea_err(EA_ERR_INVALID_ARG, "--init-expert-location %s: placement has %d layers x %d experts, the "
                   "model has %d MoE layers x %d experts", o->init_location, out->n_layers, out->n_logical, n_moe, E);
    else if (o->n_redundant > 0 && out->n_physical != E + o->n_redundant)
        s = ea_err(EA_ERR_INVALID_ARG, "--init-expert-location %s: placement has %d physical slots, "
                   "--eplb-redundant %d asks for %d", o->init_location, out->n_physical, o->n_redundant,
                   E + o->n_redundant);
    if (s != EA_OK) ea_eplb_meta_deinit(out);
    return s;
}

/* moe_of / layer_of from the model's MoE layers; the placement has one row per MoE layer. */
static ea_status ea__layers(ea_eplb_backend *b, const ea_eplb_backend_opts *o) {
    int L = o->n_layers;
    b->moe_of = ea_malloc(sizeof(int32_t) * (size_t)L);
    b->layer_of = ea_malloc(sizeof(int32_t) * (size_t)L);
    if (!b->moe_of || !b->layer_of) return ea_err(EA_ERR_NOMEM, "EPLB backend");
    for (int l = 0; l < L; l++) {
        b->moe_of[l] = o->layer_is_moe[l] ? b->n_moe : -1;
        if (o->layer_is_moe[l]) b->layer_of[b->n_moe++] = l;
    }
    if (b->n_moe != b->meta.n_layers || b->meta.n_logical != o->n_logical)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB: placement of %d layers x %d experts for %d MoE layers x %d experts",
                      b->meta.n_layers, b->meta.n_logical, b->n_moe, o->n_logical);
    return EA_OK;
}

/* The window recorder (always on) and the dump recorder, and the two managers. */
static ea_status ea__manage(ea_eplb_backend *b, const ea_eplb_backend_opts *o) {
    int E = o->n_logical;
    EA_TRY(ea_eplb_recorder_init(&b->win, b->n_moe, E, o->window));
    EA_TRY(ea_eplb_recorder_init(&b->rec, b->n_moe, E, o->record_window > 0 ? o->record_window : o->window));
    ea_eplb_recorder_start(&b->win);
    if (o->record) ea_eplb_recorder_start(&b->rec);
    ea_eplb_manager_cfg mc = {.interval = o->interval > 0 ? o->interval : 1, .layers_per_step = o->layers_per_step,
                              .min_balancedness = o->min_balancedness, .algo = o->algo,
                              .n_groups = o->n_groups > 1 ? o->n_groups : 1};
    if (o->interval > 0) EA_TRY(ea_eplb_manager_create(&mc, &b->meta, &b->periodic));
    mc.interval = 1;
    mc.min_balancedness = 2.0; /* above any balancedness: a request always plans */
    return ea_eplb_manager_create(&mc, &b->meta, &b->forced);
}

ea_status ea_eplb_backend_create(const ea_eplb_backend_opts *o, ea_eplb_meta *place, ea_moe_backend *inner,
                                 ea_eplb_backend **out) {
    *out = NULL;
    ea_eplb_backend *b = ea_calloc(1, sizeof *b);
    if (!b) {
        ea_moe_backend_destroy(inner);
        ea_eplb_meta_deinit(place);
        return ea_err(EA_ERR_NOMEM, "EPLB backend");
    }
    pthread_mutex_init(&b->mu, NULL);
    b->base.vt = &ea__be_vt;
    b->inner = inner;
    b->meta = *place;
    memset(place, 0, sizeof *place);
    b->o = *o;
    b->o.init_location = NULL;
    b->o.layer_is_moe = NULL;
    b->last_before = b->last_after = -1.0;
    int P = b->P = b->meta.n_physical;
    ea_status s = ea__check_opts(o);
    if (s == EA_OK) s = ea__layers(b, o);
    if (s == EA_OK && !(b->phys = ea_malloc(sizeof(int32_t) * EA_MOE_MAX_LANES * (size_t)o->max_tokens * (size_t)o->max_k)))
        s = ea_err(EA_ERR_NOMEM, "EPLB backend");
    if (s == EA_OK) s = ea__manage(b, o);
    if (s != EA_OK) {
        ea_eplb_backend_destroy(b);
        return s;
    }
    EA_LOGD("eplb: %d MoE layers, %d experts, %d slots over %d ranks / %d nodes, %s placement, window %d, interval %d",
            b->n_moe, o->n_logical, P, o->n_ranks, o->n_nodes, o->init_location ? o->init_location : "trivial",
            o->window, o->interval);
    *out = b;
    return EA_OK;
}

/* ---------------------------------------------------------------- control */

void ea_eplb_record_start(ea_eplb_backend *b) {
    pthread_mutex_lock(&b->mu);
    ea_eplb_recorder_start(&b->rec);
    pthread_mutex_unlock(&b->mu);
}

void ea_eplb_record_stop(ea_eplb_backend *b) {
    pthread_mutex_lock(&b->mu);
    ea_eplb_recorder_stop(&b->rec);
    pthread_mutex_unlock(&b->mu);
}

ea_status ea_eplb_record_dump(ea_eplb_backend *b, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    /* bound: comment lines + header + L*E counts of at most 20 digits and a separator */
    size_t cap = 1024 + (size_t)b->n_moe * ((size_t)b->o.n_logical * 21 + 1);
    char *buf = ea_malloc(cap);
    if (!buf) return ea_err(EA_ERR_NOMEM, "EPLB dump of %zu bytes", cap);
    FILE *f = fmemopen(buf, cap, "w");
    if (!f) {
        ea_free(buf);
        return ea_err(EA_ERR_IO, "EPLB dump: fmemopen failed");
    }
    pthread_mutex_lock(&b->mu);
    ea_status s = ea_eplb_recorder_dump(&b->rec, f);
    pthread_mutex_unlock(&b->mu);
    long n = ftell(f);
    if (fclose(f) != 0 && s == EA_OK) s = ea_err(EA_ERR_IO, "EPLB dump: write failed");
    if (s == EA_OK && (n < 0 || (size_t)n >= cap)) s = ea_err(EA_ERR_INTERNAL, "EPLB dump: %ld bytes over bound", n);
    if (s != EA_OK) {
        ea_free(buf);
        return s;
    }
    buf[n] = '\0';
    *text = buf;
    *len = (size_t)n;
    return EA_OK;
}

void ea_eplb_request_rebalance(ea_eplb_backend *b) {
    pthread_mutex_lock(&b->mu);
    b->force_pending = 1;
    pthread_mutex_unlock(&b->mu);
}

/* Mean over MoE layers of mean/max rank load of the current placement on the window. */
static double ea__balancedness(const ea_eplb_backend *b) {
    const ea_eplb_meta *m = &b->meta;
    const int64_t *c = ea_eplb_recorder_counts(&b->win);
    int E = m->n_logical, P = m->n_physical;
    double sum = 0.0;
    for (int l = 0; l < m->n_layers; l++) {
        const int64_t *cl = c + (size_t)l * E;
        double total = 0.0;
        for (int e = 0; e < E; e++) total += (double)cl[e];
        double mx = ea_eplb_layer_max_load(m->phy2log + (size_t)l * P, m->log2all_n + (size_t)l * E, cl, P,
                                           m->n_ranks);
        sum += mx > 0.0 ? total / (double)m->n_ranks / mx : 1.0;
    }
    return sum / (double)m->n_layers;
}

void ea_eplb_backend_get_stats(ea_eplb_backend *b, ea_eplb_backend_stats *out) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&b->mu);
    out->balancedness = ea__balancedness(b);
    const ea_eplb_manager *ms[2] = {b->periodic, b->forced};
    for (int i = 0; i < 2; i++) {
        if (!ms[i]) continue;
        const ea_eplb_manager_stats *s = ea_eplb_manager_get_stats(ms[i]);
        out->rebalances_total += s->n_rebalances;
        out->failures += s->n_failures;
        out->layer_switches += s->n_layer_switches;
    }
    out->steps = b->steps;
    out->last_switch_step = b->last_switch_step;
    out->last_plan_before = b->last_before;
    out->last_plan_after = b->last_after;
    out->plan_in_progress = b->active != NULL;
    out->recording = b->rec.on;
    out->n_layers = b->meta.n_layers;
    out->n_logical = b->meta.n_logical;
    out->n_physical = b->meta.n_physical;
    out->n_ranks = b->meta.n_ranks;
    snprintf(out->reason, sizeof out->reason, "%s", b->reason);
    pthread_mutex_unlock(&b->mu);
}

const ea_eplb_meta *ea_eplb_backend_meta(const ea_eplb_backend *b) { return &b->meta; }

int ea_eplb_backend_moe_layer(const ea_eplb_backend *b, int layer) {
    return layer >= 0 && layer < b->o.n_layers ? b->moe_of[layer] : -1;
}

void ea_eplb_backend_fail_moves(ea_eplb_backend *b, int n) {
    pthread_mutex_lock(&b->mu);
    b->fail_moves = n;
    pthread_mutex_unlock(&b->mu);
}
