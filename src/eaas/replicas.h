/*
 * replicas.h — the monitor's plan of replicas of hot experts: which expert
 * server should hold which (layer, expert) pairs beyond its `hosted` ranges
 * (docs/protocol.md, "Replicas of hot experts: the monitor's plan"). Pure
 * functions: no table, no clock, no threads. The monitor (monitor.c) calls
 * ea_replicas_plan every replicate_ms with the table's servers and the
 * clients' decayed load; tests call it on hand-made inputs.
 *
 * Load model. A (layer, expert) pair with load L (pairs routed to it per
 * planning period; any unit) hosted by r live servers — in their base ranges
 * or as a replica — sends each of them L / r. A server's load is the sum over
 * the pairs it hosts. A pair that no live server hosts (r = 0) loads no
 * server; its L counts as unhosted. The estimate of a plan:
 *
 *   max       the largest server load over the live servers
 *   mean      the hosted load / the number of live servers (replicas move
 *             load between servers; only hosting an unhosted pair adds to it)
 *   unhosted  the load of the pairs no live server hosts
 *
 * The greedy (DeepSeek EPLB's "replicate the heaviest per replica", over all
 * layers at once), starting from no replicas:
 *
 *   candidates: the pairs with load, each with r = its live base hosts
 *   while some live server has a free slot and a candidate is left:
 *     c = the candidate with the highest L / r; r = 0 ranks above any r > 0
 *         (heaviest first); ties: lower layer, then lower expert
 *     s = the live server with a free slot that does not host c yet, with the
 *         lowest estimated load; ties: the first in input (table) order
 *     no such s, or r > 0 and load(s) + L/(r+1) would not stay below the
 *     current max server load: drop c from the candidates
 *     else: one more replica of c on s; each of c's r hosts loses
 *         L/r - L/(r+1), s gains L/(r+1), r += 1
 *
 * The guard (the "would not stay below" clause, which plain EPLB does not
 * need because it places every slot) keeps the max from rising: each step
 * lowers c's hosts and leaves s below the old max, so the plan's max is at
 * most the max with no replicas. An unhosted pair (r = 0) is placed even when
 * it raises the max: a pair that no server serves fails its tokens.
 *
 * Stability. The new plan replaces the current one (the servers' "assigned")
 * only when
 *   - no server has a current plan;
 *   - the current plan is invalid: it gives a plan to a server that is not
 *     live, more pairs than a server's slots, a pair twice, or a pair the
 *     server already hosts in its base ranges;
 *   - the new plan hosts load that the current one leaves unhosted
 *     (after.unhosted < before.unhosted: a server that died took pairs with it);
 *   - or after.max < (1 - min_gain) x before.max.
 * Otherwise the current plan stays, so a small drift of the load does not
 * move replicas around (each move makes a server read an expert's weights).
 *
 *   ea_range l0 = {0, 0}, a = {0, 3}, b = {4, 7};
 *   ea_replicas_server s[2] = {
 *       {.layers = &l0, .n_layers = 1, .experts = &a, .n_experts = 1, .live = 1, .slots = 2},
 *       {.layers = &l0, .n_layers = 1, .experts = &b, .n_experts = 1, .live = 1, .slots = 2}};
 *   ea_replicas_load load[2] = {{0, 1, 80.0}, {0, 5, 10.0}};
 *   ea_replicas_result r;
 *   EA_TRY(ea_replicas_plan(s, 2, load, 2, 0.1, &r));
 *   if (r.changed) ... r.plan[i].has, r.plan[i].pairs[0 .. r.plan[i].n) ...
 *   ea_replicas_result_free(&r);
 *
 * Deterministic: the same input gives the same output, with each server's
 * pairs sorted by (layer, expert); a pair that comes twice in the load is
 * summed. Server loads are compared with a tolerance of 1e-12 x the total
 * load, so sums that differ only by rounding count as ties. Cost: O(S x P x R)
 * to count hosts and estimate (S servers, P loaded pairs, R ranges per
 * server), plus O(log P + S x (R + r)) per replica placed.
 */
#ifndef EA_REPLICAS_H
#define EA_REPLICAS_H

#include <stdint.h>

#include "base/status.h"
#include "eaas/monitor_msg.h"

/* One expert server as the planner sees it. */
typedef struct {
    const ea_range *layers, *experts; /* borrow: base `hosted` ranges (their cross product) */
    int n_layers, n_experts;
    int live;                   /* 0: hosts nothing, gets no plan */
    int slots;                  /* replica_slots, >= 0 */
    int has_current;            /* it has a plan now ("assigned" in the table) */
    const ea_mon_pair *current; /* borrows [n_current]: that plan */
    int n_current;
} ea_replicas_server;

/* The load of one pair. */
typedef struct {
    int32_t layer, expert;
    double load; /* > 0, finite */
} ea_replicas_load;

typedef struct {
    double max, mean, unhosted; /* as above; 0 with no live server */
    int n_replicas;             /* pairs planned over the live servers */
} ea_replicas_estimate;

/* The plan of one server. */
typedef struct {
    int has;            /* 1: the plan covers it ("assigned" present); 0: no plan */
    ea_mon_pair *pairs; /* owns [n], sorted by (layer, expert) */
    int n;
} ea_replicas_assign;

typedef struct {
    ea_replicas_assign *plan;           /* owns [n_servers]: the adopted plan, or a copy of the current one */
    int n_servers;
    ea_replicas_estimate before, after; /* the current plan (none: no replicas); the greedy's */
    int current_valid;                  /* some server has a plan, and the plan is valid */
    int adopted;                        /* `plan` is the greedy's: it covers exactly the live servers with slots */
    int changed;                        /* `plan` differs from the current one (some server's has or pairs) */
} ea_replicas_result;

/* Plan from servers s[0..n_servers) and the load (n_load pairs), min_gain in [0, 1].
 * OUT: *out (free with ea_replicas_result_free; empty on an error). EA_ERR_NOMEM only. */
ea_status ea_replicas_plan(const ea_replicas_server *s, int n_servers, const ea_replicas_load *load, int n_load,
                           double min_gain, ea_replicas_result *out);
void ea_replicas_result_free(ea_replicas_result *r);

/* 1 if (layer, expert) is in the base ranges of s. */
int ea_replicas_base_hosts(const ea_replicas_server *s, int32_t layer, int32_t expert);

#endif
