/*
 * monitor_load.h — the load the attention clients report in their heartbeats
 * ("load": [[layer, expert, pairs], ...], docs/protocol.md "Monitor"), summed
 * per (layer, expert) and decayed once per planning period: the input of the
 * replica plan (replicas.h). No sockets, threads or clock of its own: the
 * monitor (monitor.c) calls it under its mutex, tests call it directly.
 *
 * Per pair it keeps `reported` (the pairs reported since the last tick) and
 * `decayed`. A tick with factor `keep` (0 < keep <= 1) does, for every pair,
 *
 *   decayed = keep x decayed + reported;   reported = 0
 *
 * The monitor ticks once per planning period with keep = 0.5^(period /
 * half-life) (--replicate-halflife-ms, 30 s): a pair no longer routed to
 * loses half its weight per half-life. The half-life must be long against a
 * forward step and a client's report (once a second): a report holds the
 * layers the client ran in that second, and a step of a long prompt runs its
 * layers one after another for seconds, so with a half-life of one period
 * (500 ms) the estimate followed the layer being run and every plan moved
 * the replicas to it (measured on the bench model: a new plan every tick, the
 * replicas in the last three layers). A pair whose decayed load falls below
 * EA_MON_LOAD_FORGET is forgotten at that tick, which frees its place.
 *
 * Bounded: at most max_pairs distinct pairs (the monitor: EA_MON_LOAD_MAX x
 * 16). A triple of a pair not yet known while the sum is full is ignored and
 * counted (`triples_ignored`); known pairs keep summing.
 *
 * Storage: the pairs in an array, found through an open-addressing hash of
 * their indices (linear probing; capacity a power of two, at least twice the
 * pairs; doubled when needed; rebuilt at each tick from the pairs kept, so
 * no tombstones).
 *
 * Threading: none; the caller holds its lock around every call.
 */
#ifndef EA_MONITOR_LOAD_H
#define EA_MONITOR_LOAD_H

#include <stdint.h>

#include "base/status.h"
#include "eaas/monitor_msg.h"
#include "eaas/replicas.h"

#define EA_MON_LOAD_FORGET 0.01 /* a decayed load below this many pairs is dropped */

typedef struct ea_mon_loadsum ea_mon_loadsum;

typedef struct {
    uint64_t pairs_total;     /* the pairs of every triple added, ever (ignored ones too) */
    uint64_t triples_ignored; /* triples of new pairs while full (or out of memory), ever */
    int n_pairs;              /* distinct pairs kept now */
} ea_mon_loadsum_stats;

ea_status ea_mon_loadsum_create(int max_pairs, ea_mon_loadsum **out);
void ea_mon_loadsum_destroy(ea_mon_loadsum *s); /* NULL is fine */
/* Adds a client's triples (as ea_mon_heartbeat_parse checked them). Returns how many were ignored. */
int ea_mon_loadsum_add(ea_mon_loadsum *s, const ea_mon_load *l, int n);
/* The tick: decays every pair by keep as above and forgets the faint ones. OUT: *out (owns,
 * free with ea_free; NULL when empty), the pairs kept with their decayed load, sorted by
 * (layer, expert); *n. EA_ERR_NOMEM leaves the sum decayed and *out NULL. */
ea_status ea_mon_loadsum_tick(ea_mon_loadsum *s, double keep, ea_replicas_load **out, int *n);
void ea_mon_loadsum_get_stats(const ea_mon_loadsum *s, ea_mon_loadsum_stats *out);

#endif
