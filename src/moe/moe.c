/*
 * moe.c — the backend seam's shared calls (see moe.h): per-token outcomes,
 * submit+wait, placement switches, the chain-wide end_step, health and
 * statistics, and the slot binding every expert table is made with.
 */
#include "moe/moe.h"

#include <stdio.h>
#include <string.h>

void ea_moe_outcome_clear(ea_moe_outcome *o, int n_tokens) {
    for (int t = 0; t < n_tokens; t++) o->tok_fail[t] = -1;
    o->n_tokens = n_tokens;
    o->t0 = 0;
    o->n_failed_tokens = 0;
    o->n_fail = 0;
}

ea_status ea_moe_outcome_fail(ea_moe_outcome *o, int t, int layer, int expert, int peer, const char *why) {
    if (!why) why = "failed";
    if (!o)
        return peer >= 0 ? ea_err(EA_ERR_UNAVAILABLE, "layer %d expert %d (peer %d): %s", layer, expert, peer, why)
                         : ea_err(EA_ERR_UNAVAILABLE, "layer %d expert %d: %s", layer, expert, why);
    t += o->t0;
    if (t < 0 || t >= o->n_tokens || o->tok_fail[t] >= 0) return EA_OK;
    int i = 0;
    while (i < o->n_fail && !(o->fail[i].layer == layer && o->fail[i].expert == expert && o->fail[i].peer == peer)) i++;
    if (i == o->n_fail) {
        if (o->n_fail < EA_MOE_MAX_FAILURES) o->n_fail++;
        i = o->n_fail - 1;
        o->fail[i] = (ea_moe_failure){.layer = layer, .expert = expert, .peer = peer};
        snprintf(o->fail[i].why, sizeof o->fail[i].why, "%s", why);
    }
    o->tok_fail[t] = (int16_t)i;
    o->n_failed_tokens++;
    return EA_OK;
}

ea_status ea_moe_submit(ea_moe_backend *be, const ea_moe_call *c) { return be->vt->submit(be, c); }

ea_status ea_moe_wait(ea_moe_backend *be, const ea_moe_call *c, ea_moe_outcome *out) { return be->vt->wait(be, c, out); }

int ea_moe_lanes(ea_moe_backend *be) {
    int n = be->vt->lanes ? be->vt->lanes(be) : 1;
    return n < 1 ? 1 : n > EA_MOE_MAX_LANES ? EA_MOE_MAX_LANES : n;
}

ea_status ea_moe_forward(ea_moe_backend *be, const ea_moe_call *c, ea_moe_outcome *out) {
    EA_TRY(ea_moe_submit(be, c));
    return ea_moe_wait(be, c, out);
}

ea_status ea_moe_apply_placement(ea_moe_backend *be, int layer, const int32_t *physical_to_logical, int n_physical) {
    if (!be->vt->apply_placement)
        return ea_err(EA_ERR_UNSUPPORTED, "the %s MoE backend cannot change its expert placement", be->vt->name);
    return be->vt->apply_placement(be, layer, physical_to_logical, n_physical);
}

ea_status ea_moe_agree(ea_moe_backend *be, int64_t *v, int n) {
    return be->vt->agree ? be->vt->agree(be, v, n) : EA_OK;
}

ea_status ea_moe_tally(ea_moe_backend *be, int64_t *v, int n) {
    return be->vt->tally ? be->vt->tally(be, v, n) : EA_OK;
}

void ea_ffn_bind_slots(ea_ffn_weights *slot, const ea_ffn_weights *logical, const int32_t *p2l, const uint8_t *keep,
                       int n) {
    for (int p = 0; p < n; p++)
        slot[p] = keep && !keep[p] ? (ea_ffn_weights){0} : logical[p2l ? p2l[p] : p];
}

void ea_moe_end_step(ea_moe_backend *be) {
    if (be->vt->end_step) be->vt->end_step(be);
}

ea_moe_health ea_moe_backend_health(ea_moe_backend *be, char *why, size_t n) {
    if (n) why[0] = 0;
    return be->vt->health ? be->vt->health(be, why, n) : EA_MOE_OK;
}

void ea_moe_backend_stats(ea_moe_backend *be, json_t *json, ea_sbuf *prom) {
    if (be->vt->stats) be->vt->stats(be, json, prom);
}
