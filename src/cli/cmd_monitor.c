/*
 * cmd_monitor.c — `eaas monitor --port P [--host ADDR] [--heartbeat-ms N]
 * [--dead-after-ms N] [--replicate-ms MS] [--replicate-min-gain X]`: the
 * membership service of Expert-as-a-Service, and the planner of replicas of
 * hot experts (eaas/monitor.h; its messages in docs/protocol.md, "Monitor").
 *
 * Prints one line, "monitor listening on HOST:PORT", to standard output once
 * the port is open (with --port 0, the port the kernel chose; an IPv6 HOST in
 * brackets, so the line's address is what --monitor takes), then serves
 * until SIGINT or SIGTERM, and stops cleanly: long polls are answered, every
 * thread is joined, exit status 0. The signal handler only sets a flag; the
 * main thread polls it. A second signal kills the process (default action).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/args.h"
#include "base/log.h"
#include "cli/commands.h"
#include "eaas/monitor.h"

static volatile sig_atomic_t g_stop;

static void on_signal(int sig) {
    g_stop = 1;
    signal(sig, SIG_DFL);
}

static const char usage_text[] =
    "usage: eaas monitor --port P [--host ADDR] [--heartbeat-ms N] [--dead-after-ms N]\n"
    "                    [--replicate-ms MS] [--replicate-min-gain X] [--replicate-halflife-ms MS]\n\n"
    "Membership of expert servers and attention clients: members register and heartbeat;\n"
    "a member silent for --dead-after-ms is marked dead. Every --replicate-ms the monitor\n"
    "plans which servers with replica slots hold replicas of the experts the clients report\n"
    "as hot (docs/protocol.md, \"Replicas of hot experts\"). HTTP/JSON: POST /register,\n"
    "/heartbeat, /leave; GET /cluster (?after=N&wait_ms=M: long poll), /health, /metrics.\n"
    "Prints \"monitor listening on HOST:PORT\" once listening; stops on SIGINT/SIGTERM.\n\nflags:\n";

int ea_cmd_monitor(int argc, char **argv) {
    const char *host = "127.0.0.1";
    int port = -1, heartbeat_ms = 200, dead_after_ms = 1000, replicate_ms = 2000, halflife_ms = 30000;
    double min_gain = 0.1;
    ea_arg spec[] = {
        {"port", EA_ARG_INT, &port, "P", "port to listen on (0 = any free port, printed at start)", 0, 65535},
        {"host", EA_ARG_STR, &host, "ADDR", "address to listen on (default 127.0.0.1)"},
        {"heartbeat-ms", EA_ARG_INT, &heartbeat_ms, "N", "heartbeat period members are told to keep (200)", 10, 60000},
        {"dead-after-ms", EA_ARG_INT, &dead_after_ms, "N", "a member silent this long is dead (1000)", 20, 3600000},
        {"replicate-ms", EA_ARG_INT, &replicate_ms, "MS", "period of the replica plan (2000; 0 = never plan)", 0, 3600000},
        {"replicate-min-gain", EA_ARG_DOUBLE, &min_gain, "X",
         "a new replica plan must lower the estimated max server load by this fraction (0.1)", 0, 1},
        {"replicate-halflife-ms", EA_ARG_INT, &halflife_ms, "MS",
         "half-life of the clients' reported load the plan is made from (30000)", 1, 86400000},
        {0}};
    ea_args_rest rest;
    int rc = ea_cli_parse("monitor", usage_text, spec, argc, argv, &rest);
    if (rc >= 0) return rc;
    if (rest.n_pos > 0 || port < 0) {
        fprintf(stderr, rest.n_pos ? "eaas monitor: unexpected argument '%s'\n" : "eaas monitor: --port is required%s\n",
                rest.n_pos ? rest.pos[0] : "");
        return 2;
    }
    if (dead_after_ms <= heartbeat_ms) {
        fprintf(stderr, "eaas monitor: --dead-after-ms %d must be more than --heartbeat-ms %d\n", dead_after_ms, heartbeat_ms);
        return 2;
    }
    ea_cli_stop_signals(on_signal);
    ea_monitor_opts o = {.host = host, .port = port, .heartbeat_ms = heartbeat_ms, .dead_after_ms = dead_after_ms,
                         .replicate_ms = replicate_ms, .replicate_min_gain = min_gain,
                         .replicate_halflife_ms = halflife_ms};
    ea_monitor *m;
    ea_status s = ea_monitor_start(&o, &m);
    if (s != EA_OK) return ea_cli_fail("monitor", s);
    int v6 = strchr(host, ':') != NULL; /* an IPv6 address: [addr]:port, as ea_hostport_parse reads it */
    printf("monitor listening on %s%s%s:%d\n", v6 ? "[" : "", host, v6 ? "]" : "", ea_monitor_port(m));
    fflush(stdout);
    struct timespec nap = {0, 50 * 1000000L};
    while (!g_stop) nanosleep(&nap, NULL);
    EA_LOGI("monitor: stopping (signal)");
    ea_monitor_stop(m);
    EA_LOGI("monitor: stopped");
    return 0;
}
