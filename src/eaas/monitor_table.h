/*
 * monitor_table.h — the monitor's versioned membership table, without
 * sockets, threads or clocks of its own (the caller passes the time), so the
 * monitor (monitor.c) serves it and tests and the fuzz target drive it
 * directly.
 *
 * State:
 *   epoch     chosen by the caller at creation (the monitor: random); a
 *             restarted monitor has a new one, so a member knows its table
 *             was rebuilt
 *   version   1 for the empty table, +1 on every change; every change is one
 *             event (register, dead, leave, hosted, assign) with the version
 *             it made
 *   entries   one per member id, in registration order: role, live|dead,
 *             since (the version at which this incarnation registered), the
 *             last heartbeat, and a server's fields (ucx, http, hosted,
 *             replica_slots), its replicas (what its last heartbeat with
 *             "replicas" said it holds) and its assigned replicas (the
 *             monitor's plan for it, when there is one); both pair lists are
 *             kept sorted by (layer, expert)
 *   events    the last EA_MON_EVENTS_KEPT, in version order
 *
 * Rules: registering an id that exists replaces its entry in place (new
 * since, live; its role may change; nothing of the old replicas or plan is
 * kept: the new incarnation reports its replicas again); a heartbeat of an
 * unknown or dead id is EA_ERR_NOT_FOUND (the member must register again); a
 * server's heartbeat with "replicas" replaces its replicas — a "hosted" event
 * when they differ as a set, EA_ERR_RANGE (nothing changes, not even the
 * heartbeat time) when there are more than its replica_slots; a client's
 * "replicas" and a server's "load" are ignored; leave removes the entry;
 * reap marks dead every live member whose last heartbeat (or registration) is
 * older than dead_after. At EA_MON_MEMBERS_MAX entries a new id takes the
 * place of the dead entry that registered first (EA_ERR_BUSY when none is
 * dead); the register event stands for both changes.
 *
 * Threading: none; the monitor holds its mutex around every call.
 */
#ifndef EA_MONITOR_TABLE_H
#define EA_MONITOR_TABLE_H

#include <stdint.h>

#include "base/sbuf.h"
#include "base/status.h"
#include "eaas/monitor_msg.h"
#include "eaas/replicas.h"

#define EA_MON_MEMBERS_MAX 4096
#define EA_MON_EVENTS_KEPT 1024

typedef struct ea_mon_table ea_mon_table;

typedef struct {
    int servers_live, servers_dead, clients_live, clients_dead;
    uint64_t deaths;       /* members marked dead by reap, ever */
    int replicas_assigned; /* pairs in every server's "assigned" */
} ea_mon_counts;

ea_status ea_mon_table_create(uint64_t epoch, ea_mon_table **out);
void ea_mon_table_destroy(ea_mon_table *t); /* NULL is fine */
uint64_t ea_mon_table_version(const ea_mon_table *t);
uint64_t ea_mon_table_epoch(const ea_mon_table *t);

/* Takes what *r owns (r is emptied either way). */
ea_status ea_mon_table_register(ea_mon_table *t, ea_mon_register *r, uint64_t now_ns);
/* A heartbeat h (ea_mon_heartbeat_parse). OUT: *role, the member's role (what the caller
 * does with a client's "load"). Errors: EA_ERR_NOT_FOUND, EA_ERR_RANGE (above). */
ea_status ea_mon_table_heartbeat(ea_mon_table *t, const ea_mon_heartbeat *h, uint64_t now_ns, ea_mon_role *role);
ea_status ea_mon_table_leave(ea_mon_table *t, const char *id);
/* Marks dead the live members silent for longer than dead_after_ns; returns how many. */
int ea_mon_table_reap(ea_mon_table *t, uint64_t now_ns, uint64_t dead_after_ns);

/* The /cluster JSON: {"epoch","version","servers":[...],"clients":[...]} and,
 * when with_events, "events" — every change after version `after` in order —
 * if the table still keeps all of them (else no "events": take the table as
 * a whole). */
void ea_mon_table_render(const ea_mon_table *t, int with_events, uint64_t after, ea_sbuf *out);
void ea_mon_table_counts(const ea_mon_table *t, ea_mon_counts *out);
/* The event that made `version`, if still kept: 1 and *out, else 0. */
int ea_mon_table_event(const ea_mon_table *t, uint64_t version, ea_cluster_event *out);

/* ---- the replica plan (replicas.h) ---------------------------------------------------- */

/* The servers, live and dead, in table order, as the planner's input: copies, so the
 * caller can plan without holding its lock; id and since name each one's incarnation. */
typedef struct {
    ea_replicas_server *s;         /* owns [n]; ranges and current plans point into the arrays below */
    char (*id)[EA_MON_ID_MAX + 1]; /* owns [n] */
    uint64_t *since;               /* owns [n] */
    int n;
    int n_slotted;                 /* live servers with replica_slots > 0 */
    int n_planned;                 /* servers (live or not) with a plan ("assigned") */
    ea_range *ranges;              /* owns: every server's layers and experts */
    ea_mon_pair *pairs;            /* owns: every server's assigned pairs */
} ea_mon_plan_input;

ea_status ea_mon_table_plan_input(const ea_mon_table *t, ea_mon_plan_input *out);
void ea_mon_plan_input_free(ea_mon_plan_input *in); /* the struct is zeroed */
/* Sets "assigned" of each server of `in` to plan[i] (ea_replicas_result.plan, same
 * order) if that entry is still the same incarnation (id and since): one "assign"
 * event for each whose plan changed (has, or the pairs as a set). OUT: *n_changed. */
ea_status ea_mon_table_assign(ea_mon_table *t, const ea_mon_plan_input *in, const ea_replicas_assign *plan,
                              int *n_changed);

#endif
