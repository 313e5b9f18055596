/*
 * cmd_expert.c — `eaas expert --model M --monitor HOST:P [--experts all|A-B,...]
 * [--layers all|A-B,...] [--host H] [--port Q] [--threads N]`: a stateless
 * expert server (eaas/node.h). Runs until SIGINT or SIGTERM, then leaves the
 * monitor (its clients move to replicas) and stops.
 */
#include <signal.h>
#include <stdio.h>
#include <time.h>

#include "cli/commands.h"
#include "eaas/node.h"

static const char usage_text[] =
    "usage: eaas expert --model MODEL --monitor HOST:PORT [--experts all|A-B,...] [--layers all|A-B,...]\n"
    "                   [--host H] [--port Q] [--threads N] [--max-tokens T]\n\n"
    "Serve the experts of MODEL (the given layers x experts; ranges inclusive) to\n"
    "attention clients (`eaas serve --experts-remote HOST:PORT`) over UCX. The server\n"
    "registers with the monitor at HOST:PORT and answers GET /health and GET /metrics\n"
    "on its own port Q. Stop it with SIGINT or SIGTERM.\n\nflags:\n";

static volatile sig_atomic_t g_stop;

static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

int ea_cmd_expert(int argc, char **argv) {
    ea_xnode_opts o = {.layers = "all", .experts = "all", .max_tokens = 512, .max_clients = 16, .replica_grace_ms = 3000};
    double gather_us = 0;
    ea_arg spec[] = {{"model", EA_ARG_STR, &o.model_path, "MODEL", "model directory or .gguf file"},
                     {"monitor", EA_ARG_STR, &o.monitor, "HOST:PORT", "the monitor (eaas monitor)"},
                     {"experts", EA_ARG_STR, &o.experts, "RANGES", "experts to host: all, or A-B[,C-D...]"},
                     {"layers", EA_ARG_STR, &o.layers, "RANGES", "layers whose experts to host: all, or A-B[,...]"},
                     {"host", EA_ARG_STR, &o.host, "H", "address to listen on and publish (127.0.0.1)"},
                     {"port", EA_ARG_INT, &o.port, "Q", "HTTP port; 0: any free one", 0, 65535},
                     {"id", EA_ARG_STR, &o.id, "ID", "member id (default expert-HOST-PORT)"},
                     {"threads", EA_ARG_INT, &o.threads, "N", "threads for the expert products (CPU count)", 0, 4096},
                     {"max-tokens", EA_ARG_INT, &o.max_tokens, "T", "tokens of one client call (512)", 1, 65536},
                     {"max-clients", EA_ARG_INT, &o.max_clients, "N", "clients at once (16)", 1, 4096},
                     {"gather-us", EA_ARG_DOUBLE, &gather_us, "US", "once a client's call arrives, wait up to this long for the other clients' to batch them together (0)", 0, 1e6},
                     {"replica-slots", EA_ARG_INT, &o.replica_slots, "N", "replicas of hot experts the monitor may place here, beyond --layers x --experts (0)", 0, 4096},
                     {"replica-grace-ms", EA_ARG_INT, &o.replica_grace_ms, "MS", "a replica the monitor takes back is still served this long (3000)", 1, 600000},
                     {0}};
    ea_args_rest rest;
    int rc = ea_cli_parse("expert", usage_text, spec, argc, argv, &rest);
    if (rc >= 0) return rc;
    if (!o.model_path || !o.monitor || rest.n_pos > 0) {
        fprintf(stderr, "eaas expert: needs --model MODEL and --monitor HOST:PORT; see --help\n");
        return 2;
    }
    if (ea_cli_check_model("expert", o.model_path, 0, NULL, 0)) return 1;
    o.gather_s = gather_us * 1e-6;
    ea_cli_stop_signals(on_signal);
    ea_xnode *n;
    ea_status s = ea_xnode_start(&o, &n);
    if (s != EA_OK) return ea_cli_fail("expert", s);
    printf("expert server listening on %s:%d\n", o.host ? o.host : "127.0.0.1", ea_xnode_port(n));
    fflush(stdout);
    while (!g_stop) nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    ea_xnode_stop(n);
    return 0;
}
