/*
 * experts.c — the per-layer expert table and the local backend over it; see
 * experts.h. The table is one allocation: n_layers row pointers, then the
 * rows of the MoE layers, n_slots views each (ea_ffn_bind_slots fills a row,
 * the same call the local backend's apply_placement makes).
 */
#include "model/experts.h"

#include <string.h>

#include "base/alloc.h"
#include "moe/moe_local.h"

/* Every logical id of a placement row in [0, E), checked before anything is bound. */
static ea_status check_row(const int32_t *p2l, int n_slots, int E, int layer) {
    for (int p = 0; p < n_slots; p++)
        if (p2l[p] < 0 || p2l[p] >= E)
            return ea_err(EA_ERR_RANGE, "expert table: layer %d slot %d holds expert %d, not in [0, %d)", layer, p,
                          p2l[p], E);
    return EA_OK;
}

ea_status ea_model_expert_table(const ea_model *m, const int32_t *phy2log, int n_slots, const uint8_t *keep,
                                ea_expert_table *out) {
    const ea_model_config *c = &m->cfg;
    memset(out, 0, sizeof *out);
    if (!phy2log && n_slots != c->n_experts)
        return ea_err(EA_ERR_INVALID_ARG, "expert table: %d slots without a placement, the model has %d experts",
                      n_slots, c->n_experts);
    int L = c->n_layers, n_moe = 0;
    for (int l = 0; l < L; l++) n_moe += m->experts[l] != NULL;
    size_t head = sizeof(ea_ffn_weights *) * (size_t)L;
    char *mem = ea_calloc(1, head + sizeof(ea_ffn_weights) * (size_t)n_moe * (size_t)(n_slots > 0 ? n_slots : 1));
    if (!mem) return ea_err(EA_ERR_NOMEM, "expert table: %d layers x %d slots", n_moe, n_slots);
    out->layer = (ea_ffn_weights **)mem;
    out->n_layers = L;
    out->n_slots = n_slots;
    ea_ffn_weights *row = (ea_ffn_weights *)(mem + head);
    for (int l = 0, ml = 0; l < L; l++) {
        if (!m->experts[l]) continue;
        const int32_t *p2l = phy2log ? phy2log + (size_t)ml * (size_t)n_slots : NULL;
        ea_status s = p2l ? check_row(p2l, n_slots, c->n_experts, l) : EA_OK;
        if (s != EA_OK) {
            ea_expert_table_deinit(out);
            return s;
        }
        out->layer[l] = row + (size_t)ml++ * (size_t)n_slots;
        ea_ffn_bind_slots(out->layer[l], m->experts[l], p2l, keep, n_slots);
    }
    return EA_OK;
}

void ea_expert_table_deinit(ea_expert_table *t) {
    if (!t) return;
    ea_free(t->layer);
    memset(t, 0, sizeof *t);
}

ea_status ea_model_local_backend(const ea_model *m, ea_kctx *kctx, int max_tokens, const int32_t *phy2log,
                                 int n_slots, ea_moe_backend **out) {
    *out = NULL;
    const ea_model_config *c = &m->cfg;
    ea_expert_table t;
    EA_TRY(ea_model_expert_table(m, phy2log, phy2log ? n_slots : c->n_experts, NULL, &t));
    ea_moe_local_opts o = {.n_layers = c->n_layers,
                           .hidden = c->hidden_size,
                           .ff = c->moe_intermediate_size,
                           .n_experts = t.n_slots,
                           .max_tokens = max_tokens,
                           .max_k = c->n_experts_per_tok,
                           .experts = (ea_ffn_weights *const *)t.layer,
                           .logical = (ea_ffn_weights *const *)m->experts,
                           .n_logical = c->n_experts,
                           .kctx = kctx};
    ea_status s = ea_moe_local_create(&o, out);
    ea_expert_table_deinit(&t);
    return s;
}
