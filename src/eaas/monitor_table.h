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
 *             event (register, dead, leave) with the version it made
 *   entries   one per member id, in registration order: role, live|dead,
 *             since (the version at which this incarnation registered), the
 *             last heartbeat, and a server's fields (ucx, http, hosted)
 *   events    the last EA_MON_EVENTS_KEPT, in version order
 *
 * Rules: registering an id that exists replaces its entry in place (new
 * since, live; its role may change); a heartbeat of an unknown or dead id is
 * EA_ERR_NOT_FOUND (the member must register again); leave removes the entry;
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

#define EA_MON_MEMBERS_MAX 4096
#define EA_MON_EVENTS_KEPT 1024

typedef struct ea_mon_table ea_mon_table;

typedef struct {
    int servers_live, servers_dead, clients_live, clients_dead;
    uint64_t deaths; /* members marked dead by reap, ever */
} ea_mon_counts;

ea_status ea_mon_table_create(uint64_t epoch, ea_mon_table **out);
void ea_mon_table_destroy(ea_mon_table *t); /* NULL is fine */
uint64_t ea_mon_table_version(const ea_mon_table *t);
uint64_t ea_mon_table_epoch(const ea_mon_table *t);

/* Takes what *r owns (r is emptied either way). */
ea_status ea_mon_table_register(ea_mon_table *t, ea_mon_register *r, uint64_t now_ns);
ea_status ea_mon_table_heartbeat(ea_mon_table *t, const char *id, uint64_t now_ns);
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

#endif
