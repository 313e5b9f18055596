/*
 * experts.h — the per-layer expert table every MoE backend of this process
 * computes from, built in one place from the model's experts.
 *
 * A backend looks experts up by PHYSICAL slot: without EPLB slot p of a
 * layer is logical expert p; under a placement (eplb/meta.h) slot p of the
 * m-th MoE layer holds logical expert phy2log[m][p], replicas being views of
 * the same weights. A process that holds only some slots (an EP rank) leaves
 * the others empty. The table is views into the model (`ea_model.experts`,
 * built at open, is the table of the model itself: one slot per expert):
 *
 *   ea_expert_table t;
 *   EA_TRY(ea_model_expert_table(m, meta.phy2log, meta.n_physical, mine, &t));
 *   ea_moe_local_opts o = {..., .n_experts = t.n_slots, .experts = (ea_ffn_weights *const *)t.layer};
 *   s = ea_moe_local_create(&o, &be);       // copies the views
 *   ea_expert_table_deinit(&t);
 *
 * Layers are the model's (the forward pass's layer ids); the placement rows
 * count MoE layers only, in model order (dense layers have none).
 */
#ifndef EA_MODEL_EXPERTS_H
#define EA_MODEL_EXPERTS_H

#include <stdint.h>

#include "kernels/matmul.h"
#include "model/model.h"
#include "moe/moe.h"

typedef struct {
    int n_layers, n_slots;
    ea_ffn_weights **layer; /* owns (one allocation with the rows): [n_layers] -> n_slots views, NULL for
                               dense layers; a view whose gate.data is NULL is not held here */
} ea_expert_table;

/* The table of a placement. phy2log: [MoE layers][n_slots] logical expert of
 * each slot, or NULL for one slot per expert (n_slots must then be
 * cfg.n_experts). keep: n_slots bytes, the same for every layer (slot
 * ownership does not depend on the layer, meta.h), or NULL: every slot is
 * held. Errors name the layer and slot of an expert out of range. */
ea_status ea_model_expert_table(const ea_model *m, const int32_t *phy2log, int n_slots, const uint8_t *keep,
                                ea_expert_table *out);
void ea_expert_table_deinit(ea_expert_table *t);

/* The `local` backend over the model's experts in this process, one slot per
 * expert (phy2log NULL) or under a placement of n_slots slots per MoE layer;
 * its apply_placement rebinds slots to the model's experts. */
ea_status ea_model_local_backend(const ea_model *m, ea_kctx *kctx, int max_tokens, const int32_t *phy2log,
                                 int n_slots, ea_moe_backend **out);

#endif
