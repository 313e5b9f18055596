/*
 * client.h — the attention client's membership (`eaas serve --experts-remote`,
 * DESIGN.md section 5): a remote MoE backend (remote.h) whose servers come from
 * the monitor's table and change while it runs.
 *
 *   member thread   registers this client, heartbeats, receives every table
 *                   (member.h) and keeps the newest
 *   step thread     at the start of each MoE call (the remote backend's sync
 *                   hook) applies a newer table: a live server not known yet is
 *                   connected (POST /connect on its HTTP port, then UCX); a
 *                   known one the table says is dead, that left, or that came
 *                   back as a new incarnation (another `since`) is dropped and
 *                   its experts go to their replicas
 *
 * A server the table no longer lists is kept as it is (a restarted monitor
 * lists servers only as they register again); a server that really died is
 * also caught by the backend's own deadline.
 */
#ifndef EA_EAAS_CLIENT_H
#define EA_EAAS_CLIENT_H

#include "moe/moe.h"

typedef struct {
    const char *monitor;  /* "host:port" */
    const char *id;       /* member id; NULL: a random one */
    const char *arch;     /* the model's family name, checked against each server's */
    int n_layers, n_experts, hidden, max_tokens, max_k;
    double timeout_s;     /* an expert server's answer to one call (--expert-timeout-ms) */
    int lanes;            /* 2: two slots per server, for double-batch overlap (--enable-dbo); else 1 */
    double wait_first_s;  /* create waits this long for a table with a live server; <= 0: 30 s */
} ea_eaas_client_opts;

ea_status ea_eaas_client_create(const ea_eaas_client_opts *o, ea_moe_backend **out);

#endif
