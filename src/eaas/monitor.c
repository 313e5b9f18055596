/*
 * monitor.c — the monitor's HTTP front and its reaper thread (see monitor.h).
 *
 * Every handler takes `mu`, calls the table (monitor_table.h), and, when the
 * version moved, logs the new events and broadcasts `changed`. A long poll
 * (GET /cluster?after=N&wait_ms=M) waits on `changed` with a deadline on the
 * monotonic clock; it answers at once when the version is already past N, or
 * when the caller's epoch (epoch=E) is not ours — a member that long-polls a
 * restarted monitor learns of the new table without waiting M ms.
 *
 * Bodies are read whole (at most MAX_BODY; a larger declared Content-Length is
 * refused with 413 before it is read) and parsed by monitor_msg.c, whose
 * error message — the JSON path and what was wrong — is the 400's message.
 *
 * A heartbeat's "replicas" go to the table (a "hosted" event when they
 * change); a client's "load" goes to the load sum (monitor_load.h). The
 * planner thread wakes every replicate_ms: under `mu` it decays the load and
 * copies the servers (ea_mon_table_plan_input); without `mu` it plans
 * (replicas.h: the greedy is linear in servers x loaded pairs per replica
 * placed, too long to block heartbeats and long polls); under `mu` again it
 * writes the plan to the servers that are still the same incarnation
 * (ea_mon_table_assign), one "assign" event each.
 *
 * Stop: `stopping` is set under `mu` and both condition variables are
 * broadcast, so long polls answer and the reaper and the planner return; then
 * MHD stops (closing connections and joining their threads) and the reaper and
 * the planner are joined.
 */
#include "eaas/monitor.h"

#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/sbuf.h"
#include "base/util.h"
#include "eaas/monitor_load.h"
#include "eaas/monitor_table.h"
#include "eaas/replicas.h"

#define MAX_BODY ((size_t)1 << 20)
#define IDLE_TIMEOUT_S 60u
#define LOAD_PAIRS_MAX (EA_MON_LOAD_MAX * 16) /* distinct (layer, expert) pairs the load sum keeps */

struct ea_monitor {
    ea_monitor_opts o;
    char host[256];
    int port;
    struct MHD_Daemon *d;
    pthread_t reaper, planner;
    int reaper_started, planner_started;
    int sync_ready; /* mu and the condition variables exist */
    /* guarded by mu */
    pthread_mutex_t mu;
    pthread_cond_t changed; /* a new version, or stopping (monotonic clock) */
    pthread_cond_t wake;    /* the reaper's and the planner's sleep; broadcast at stop only (monotonic clock) */
    ea_mon_table *t;        /* owns */
    ea_mon_loadsum *load;   /* owns: the clients' reported load */
    uint64_t plans;         /* replica plans adopted (that changed some server's "assigned") */
    double plan_balance;    /* estimated mean / max server load of the last adopted plan; 1 before */
    int stopping;
};

typedef struct {
    ea_sbuf body;
    int too_large;
} conn_ctx;

/* ---- helpers --------------------------------------------------------------------- */

static struct timespec deadline_in(int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

static enum MHD_Result send_text(struct MHD_Connection *c, int status, const char *ctype, const ea_sbuf *b) {
    static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}";
    const char *data = b->failed ? oom : b->data ? b->data : "";
    size_t len = b->failed ? sizeof oom - 1 : b->len;
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, b->failed ? "application/json" : ctype);
    enum MHD_Result ret = MHD_queue_response(c, b->failed ? 500u : (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply(struct MHD_Connection *c, int status, ea_sbuf *b) {
    enum MHD_Result r = send_text(c, status, "application/json", b);
    ea_sbuf_deinit(b);
    return r;
}

/* {"error":{"message":msg,"type":type,"param":null,"code":null}} */
static enum MHD_Result reply_error(struct MHD_Connection *c, int status, const char *type, const char *msg) {
    ea_sbuf b = {0};
    json_t *o = json_pack("{s:{s:s, s:s, s:n, s:n}}", "error", "message", msg, "type", type, "param", "code");
    if (o) ea_sbuf_json(&b, o);
    else b.failed = 1;
    json_decref(o);
    return reply(c, status, &b);
}

static enum MHD_Result bad_request(struct MHD_Connection *c) {
    return reply_error(c, 400, "invalid_request_error", ea_errmsg());
}

/* {"epoch","version"} and the extra pairs of register. */
static void ack(const ea_monitor *m, int with_timing, ea_sbuf *b) {
    char ep[17];
    ea_mon_epoch_format(ea_mon_table_epoch(m->t), ep);
    ea_sbuf_printf(b, "{\"epoch\":\"%s\",\"version\":%llu", ep, (unsigned long long)ea_mon_table_version(m->t));
    if (with_timing) ea_sbuf_printf(b, ",\"heartbeat_ms\":%d,\"dead_after_ms\":%d", m->o.heartbeat_ms, m->o.dead_after_ms);
    ea_sbuf_puts(b, "}");
}

/* After a change: log each new event (a plan's "assign" events at debug level: the plan
 * has its own line), wake the long polls. Called with mu held. */
static void changed_since(ea_monitor *m, uint64_t before) {
    static const char *const what[] = {"registered", "is dead (no heartbeat)", "left", "reported new replicas",
                                       "has a new replica assignment"};
    uint64_t now = ea_mon_table_version(m->t);
    for (uint64_t v = before + 1; v <= now; v++) {
        ea_cluster_event e;
        if (!ea_mon_table_event(m->t, v, &e)) continue;
        if (e.kind == EA_MON_EV_ASSIGN)
            EA_LOGD("monitor: %s %s %s (version %llu)", ea_mon_role_name(e.role), e.id, what[e.kind], (unsigned long long)v);
        else
            EA_LOGI("monitor: %s %s %s (version %llu)", ea_mon_role_name(e.role), e.id, what[e.kind], (unsigned long long)v);
    }
    if (now != before) pthread_cond_broadcast(&m->changed);
}

/* ---- handlers -------------------------------------------------------------------- */

static enum MHD_Result handle_register(ea_monitor *m, struct MHD_Connection *c, const ea_sbuf *body) {
    ea_mon_register r;
    if (ea_mon_register_parse(body->data, body->len, &r) != EA_OK) return bad_request(c);
    ea_sbuf b = {0};
    pthread_mutex_lock(&m->mu);
    uint64_t before = ea_mon_table_version(m->t);
    ea_status s = ea_mon_table_register(m->t, &r, ea_now_ns());
    if (s == EA_OK) ack(m, 1, &b);
    changed_since(m, before);
    pthread_mutex_unlock(&m->mu);
    if (s != EA_OK) return reply_error(c, s == EA_ERR_BUSY ? 503 : 500, "server_error", ea_errmsg());
    return reply(c, 200, &b);
}

/* The status of a refused heartbeat or leave: 400 a check against the entry, 404 no such live member. */
static enum MHD_Result refused(struct MHD_Connection *c, ea_status s) {
    if (s == EA_ERR_NOT_FOUND) return reply_error(c, 404, "not_found_error", ea_errmsg());
    if (s == EA_ERR_RANGE) return bad_request(c);
    return reply_error(c, 500, "server_error", ea_errmsg());
}

/* A server's "replicas" go to the table; a client's "load" to the load sum. */
static enum MHD_Result handle_heartbeat(ea_monitor *m, struct MHD_Connection *c, const ea_sbuf *body) {
    ea_mon_heartbeat h;
    if (ea_mon_heartbeat_parse(body->data, body->len, &h) != EA_OK) return bad_request(c);
    ea_sbuf b = {0};
    ea_mon_role role = EA_MON_CLIENT;
    pthread_mutex_lock(&m->mu);
    uint64_t before = ea_mon_table_version(m->t);
    ea_status s = ea_mon_table_heartbeat(m->t, &h, ea_now_ns(), &role);
    if (s == EA_OK && role == EA_MON_CLIENT && h.n_load) ea_mon_loadsum_add(m->load, h.load, h.n_load);
    if (s == EA_OK) ack(m, 0, &b);
    changed_since(m, before);
    pthread_mutex_unlock(&m->mu);
    ea_mon_heartbeat_free(&h);
    return s == EA_OK ? reply(c, 200, &b) : refused(c, s);
}

static enum MHD_Result handle_leave(ea_monitor *m, struct MHD_Connection *c, const ea_sbuf *body) {
    char id[EA_MON_ID_MAX + 1];
    if (ea_mon_id_parse(body->data, body->len, id) != EA_OK) return bad_request(c);
    ea_sbuf b = {0};
    pthread_mutex_lock(&m->mu);
    uint64_t before = ea_mon_table_version(m->t);
    ea_status s = ea_mon_table_leave(m->t, id);
    if (s == EA_OK) ack(m, 0, &b);
    changed_since(m, before);
    pthread_mutex_unlock(&m->mu);
    return s == EA_OK ? reply(c, 200, &b) : refused(c, s);
}

/* Long poll: until the version passes `after`, the deadline, or stop. Called with mu held. */
static void wait_change(ea_monitor *m, uint64_t after, int wait_ms) {
    struct timespec dl = deadline_in(wait_ms);
    while (!m->stopping && ea_mon_table_version(m->t) <= after)
        if (pthread_cond_timedwait(&m->changed, &m->mu, &dl) == ETIMEDOUT) break;
}

static enum MHD_Result handle_cluster(ea_monitor *m, struct MHD_Connection *c) {
    const char *a = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "after");
    const char *w = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "wait_ms");
    const char *e = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "epoch");
    uint64_t after, epoch;
    int wait_ms, has_epoch;
    if (ea_mon_query_parse(a, w, e, &after, &wait_ms, &epoch, &has_epoch) != EA_OK) return bad_request(c);
    ea_sbuf b = {0};
    pthread_mutex_lock(&m->mu);
    int same_epoch = !has_epoch || epoch == ea_mon_table_epoch(m->t);
    if (a && wait_ms > 0 && same_epoch) wait_change(m, after, wait_ms);
    ea_mon_table_render(m->t, a != NULL && same_epoch, after, &b);
    pthread_mutex_unlock(&m->mu);
    return reply(c, 200, &b);
}

static enum MHD_Result handle_health(ea_monitor *m, struct MHD_Connection *c) {
    ea_sbuf b = {0};
    ea_mon_counts n;
    pthread_mutex_lock(&m->mu);
    ea_mon_table_counts(m->t, &n);
    char ep[17];
    ea_mon_epoch_format(ea_mon_table_epoch(m->t), ep);
    unsigned long long v = (unsigned long long)ea_mon_table_version(m->t);
    pthread_mutex_unlock(&m->mu);
    ea_sbuf_printf(&b, "{\"status\":\"ok\",\"epoch\":\"%s\",\"version\":%llu,\"servers_live\":%d,\"clients_live\":%d}", ep, v,
                   n.servers_live, n.clients_live);
    return reply(c, 200, &b);
}

static enum MHD_Result handle_metrics(ea_monitor *m, struct MHD_Connection *c) {
    ea_sbuf b = {0};
    ea_mon_counts n;
    ea_mon_loadsum_stats ls;
    pthread_mutex_lock(&m->mu);
    ea_mon_table_counts(m->t, &n);
    ea_mon_loadsum_get_stats(m->load, &ls);
    unsigned long long v = (unsigned long long)ea_mon_table_version(m->t), plans = (unsigned long long)m->plans;
    double balance = m->plan_balance;
    pthread_mutex_unlock(&m->mu);
    ea_sbuf_printf(&b,
                   "# HELP eaas:monitor_servers Expert servers in the table, by state.\n"
                   "# TYPE eaas:monitor_servers gauge\n"
                   "eaas:monitor_servers{state=\"live\"} %d\neaas:monitor_servers{state=\"dead\"} %d\n"
                   "# HELP eaas:monitor_clients Attention clients in the table, by state.\n"
                   "# TYPE eaas:monitor_clients gauge\n"
                   "eaas:monitor_clients{state=\"live\"} %d\neaas:monitor_clients{state=\"dead\"} %d\n"
                   "# HELP eaas:monitor_version Version of the table (+1 on every change).\n"
                   "# TYPE eaas:monitor_version gauge\neaas:monitor_version %llu\n"
                   "# HELP eaas:monitor_deaths_total Members declared dead for missing heartbeats.\n"
                   "# TYPE eaas:monitor_deaths_total counter\neaas:monitor_deaths_total %llu\n",
                   n.servers_live, n.servers_dead, n.clients_live, n.clients_dead, v, (unsigned long long)n.deaths);
    ea_sbuf_printf(&b,
                   "# HELP eaas:monitor_replica_plans_total Replica plans adopted (each changed some server's assigned replicas).\n"
                   "# TYPE eaas:monitor_replica_plans_total counter\neaas:monitor_replica_plans_total %llu\n"
                   "# HELP eaas:monitor_replicas_assigned Replica pairs assigned, over all servers.\n"
                   "# TYPE eaas:monitor_replicas_assigned gauge\neaas:monitor_replicas_assigned %d\n"
                   "# HELP eaas:monitor_load_pairs_total (token, slot) pairs the clients reported in their heartbeats' load.\n"
                   "# TYPE eaas:monitor_load_pairs_total counter\neaas:monitor_load_pairs_total %llu\n"
                   "# HELP eaas:monitor_load_ignored_total Load triples ignored: a new (layer, expert) while the load sum was full.\n"
                   "# TYPE eaas:monitor_load_ignored_total counter\neaas:monitor_load_ignored_total %llu\n"
                   "# HELP eaas:monitor_plan_balance Estimated mean / max server load of the adopted replica plan (1 when none).\n"
                   "# TYPE eaas:monitor_plan_balance gauge\neaas:monitor_plan_balance %.6f\n",
                   plans, n.replicas_assigned, (unsigned long long)ls.pairs_total, (unsigned long long)ls.triples_ignored,
                   balance);
    enum MHD_Result r = send_text(c, 200, "text/plain; version=0.0.4", &b);
    ea_sbuf_deinit(&b);
    return r;
}

/* ---- routing --------------------------------------------------------------------- */

typedef enum { R_REGISTER, R_HEARTBEAT, R_LEAVE, R_CLUSTER, R_HEALTH, R_METRICS } route;

static enum MHD_Result dispatch(ea_monitor *m, struct MHD_Connection *c, const char *url, const char *method,
                                const conn_ctx *cc) {
    static const struct {
        const char *path, *method;
        route r;
    } table[] = {{"/register", "POST", R_REGISTER}, {"/heartbeat", "POST", R_HEARTBEAT}, {"/leave", "POST", R_LEAVE},
                 {"/cluster", "GET", R_CLUSTER},    {"/health", "GET", R_HEALTH},       {"/metrics", "GET", R_METRICS}};
    size_t i = 0, n = sizeof table / sizeof table[0];
    while (i < n && strcmp(url, table[i].path) != 0) i++;
    if (i == n) return reply_error(c, 404, "not_found_error", "no such endpoint");
    if (strcmp(method, table[i].method) != 0) return reply_error(c, 405, "invalid_request_error", "method not allowed");
    if (cc->too_large) return reply_error(c, 413, "invalid_request_error", "request body is larger than 1 MiB");
    switch (table[i].r) {
    case R_REGISTER: return handle_register(m, c, &cc->body);
    case R_HEARTBEAT: return handle_heartbeat(m, c, &cc->body);
    case R_LEAVE: return handle_leave(m, c, &cc->body);
    case R_CLUSTER: return handle_cluster(m, c);
    case R_HEALTH: return handle_health(m, c);
    case R_METRICS: return handle_metrics(m, c);
    }
    return MHD_NO;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    conn_ctx *cc = *con_cls;
    (void)version;
    if (!cc) {
        if (!(cc = ea_calloc(1, sizeof *cc))) return MHD_NO;
        *con_cls = cc;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > MAX_BODY) { /* refuse before reading; MHD closes after */
            cc->too_large = 2;
            return reply_error(c, 413, "invalid_request_error", "request body is larger than 1 MiB");
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (cc->too_large != 2 && cc->body.len + *upload_size > MAX_BODY) cc->too_large = 1;
        if (!cc->too_large) ea_sbuf_append(&cc->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (cc->too_large == 2) return MHD_YES;
    if (cc->body.failed) return MHD_NO;
    if (!cc->body.data) ea_sbuf_puts(&cc->body, ""); /* a NUL-terminated empty body */
    return dispatch(cls, c, url, method, cc);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c, (void)toe;
    conn_ctx *cc = *con_cls;
    if (cc) ea_sbuf_deinit(&cc->body);
    ea_free(cc);
    *con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    char msg[512];
    (void)cls;
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = 0;
    EA_LOGD("monitor http: %s", msg);
}

/* ---- reaper and life cycle ----------------------------------------------------------- */

static void *reaper_main(void *arg) {
    ea_monitor *m = arg;
    int period = m->o.heartbeat_ms / 4 > 5 ? m->o.heartbeat_ms / 4 : 5;
    pthread_mutex_lock(&m->mu);
    while (!m->stopping) {
        struct timespec dl = deadline_in(period);
        pthread_cond_timedwait(&m->wake, &m->mu, &dl);
        uint64_t before = ea_mon_table_version(m->t);
        ea_mon_table_reap(m->t, ea_now_ns(), (uint64_t)m->o.dead_after_ms * 1000000ull);
        changed_since(m, before);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

/* ---- the replica planner ------------------------------------------------------------- */

/* One planning period: decay the load; plan if load is left and a live server has slots
 * (or some server still has a plan: the last slotted server died, and its plan goes).
 * Called with mu held; releases it while it plans. */
static void plan_tick(ea_monitor *m) {
    ea_replicas_load *load = NULL;
    int n_load = 0;
    ea_mon_plan_input in = {0};
    double keep = pow(0.5, (double)m->o.replicate_ms / m->o.replicate_halflife_ms);
    if (ea_mon_loadsum_tick(m->load, keep, &load, &n_load) != EA_OK || n_load == 0 ||
        ea_mon_table_plan_input(m->t, &in) != EA_OK || (in.n_slotted == 0 && in.n_planned == 0)) {
        ea_free(load);
        ea_mon_plan_input_free(&in);
        return;
    }
    pthread_mutex_unlock(&m->mu);
    ea_replicas_result r;
    ea_status s = ea_replicas_plan(in.s, in.n, load, n_load, m->o.replicate_min_gain, &r);
    pthread_mutex_lock(&m->mu);
    int n_changed = 0;
    uint64_t before = ea_mon_table_version(m->t);
    if (s == EA_OK && r.changed && !m->stopping) s = ea_mon_table_assign(m->t, &in, r.plan, &n_changed);
    if (s != EA_OK) EA_LOGW("monitor: replica plan: %s", ea_errmsg());
    if (n_changed > 0) {
        m->plans++;
        m->plan_balance = r.after.max > 0 ? r.after.mean / r.after.max : 1;
        EA_LOGI("monitor: replica plan: %d replicas on %d servers (%d changed); estimated server load "
                "max %.1f mean %.1f -> max %.1f mean %.1f, unhosted %.1f -> %.1f (version %llu)",
                r.after.n_replicas, in.n_slotted, n_changed, r.before.max, r.before.mean, r.after.max, r.after.mean,
                r.before.unhosted, r.after.unhosted, (unsigned long long)ea_mon_table_version(m->t));
    }
    changed_since(m, before);
    ea_replicas_result_free(&r);
    ea_free(load);
    ea_mon_plan_input_free(&in);
}

static void *planner_main(void *arg) {
    ea_monitor *m = arg;
    pthread_mutex_lock(&m->mu);
    struct timespec dl = deadline_in(m->o.replicate_ms);
    while (!m->stopping) {
        if (pthread_cond_timedwait(&m->wake, &m->mu, &dl) != ETIMEDOUT || m->stopping) continue;
        plan_tick(m);
        dl = deadline_in(m->o.replicate_ms);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

static ea_status init_sync(ea_monitor *m) {
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) ||
        pthread_cond_init(&m->changed, &ca) || pthread_cond_init(&m->wake, &ca))
        return ea_err(EA_ERR_INTERNAL, "monitor: condition variables");
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&m->mu, NULL);
    return EA_OK;
}

static ea_status listen_on(ea_monitor *m) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", m->o.port);
    int g = getaddrinfo(m->host, port, &hints, &ai);
    if (g != 0 || !ai) return ea_err(EA_ERR_INVALID_ARG, "--host %s: %s", m->host, gai_strerror(g));
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    m->d = MHD_start_daemon(flags, (uint16_t)m->o.port, NULL, NULL, on_request, m, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, m, MHD_OPTION_CONNECTION_LIMIT, 1024u,
                            MHD_OPTION_CONNECTION_TIMEOUT, IDLE_TIMEOUT_S, MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u,
                            MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, m, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!m->d) return ea_err(EA_ERR_IO, "monitor: cannot listen on %s:%d (port in use or address not available)", m->host, m->o.port);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_BIND_PORT);
    m->port = di ? di->port : m->o.port;
    return EA_OK;
}

static ea_status start(ea_monitor *m) {
    uint64_t epoch;
    EA_TRY(init_sync(m));
    m->sync_ready = 1;
    EA_TRY(ea_random_bytes(&epoch, sizeof epoch));
    EA_TRY(ea_mon_table_create(epoch, &m->t));
    EA_TRY(ea_mon_loadsum_create(LOAD_PAIRS_MAX, &m->load));
    if (pthread_create(&m->reaper, NULL, reaper_main, m) != 0) return ea_err(EA_ERR_INTERNAL, "monitor: reaper thread");
    m->reaper_started = 1;
    if (m->o.replicate_ms > 0) {
        if (pthread_create(&m->planner, NULL, planner_main, m) != 0) return ea_err(EA_ERR_INTERNAL, "monitor: planner thread");
        m->planner_started = 1;
    }
    return listen_on(m);
}

ea_status ea_monitor_start(const ea_monitor_opts *o, ea_monitor **out) {
    *out = NULL;
    if (!(o->replicate_min_gain >= 0 && o->replicate_min_gain <= 1))
        return ea_err(EA_ERR_INVALID_ARG, "monitor: replicate_min_gain %g not in [0, 1]", o->replicate_min_gain);
    ea_monitor *m = ea_calloc(1, sizeof *m);
    if (!m) return ea_err(EA_ERR_NOMEM, "monitor");
    m->o = *o;
    if (m->o.heartbeat_ms <= 0) m->o.heartbeat_ms = 200;
    if (m->o.dead_after_ms <= 0) m->o.dead_after_ms = 1000;
    if (m->o.replicate_ms < 0) m->o.replicate_ms = 0;
    if (m->o.replicate_halflife_ms <= 0) m->o.replicate_halflife_ms = 30000;
    m->plan_balance = 1;
    snprintf(m->host, sizeof m->host, "%s", o->host && o->host[0] ? o->host : "127.0.0.1");
    ea_status s = start(m);
    if (s != EA_OK) {
        ea_monitor_stop(m);
        return s;
    }
    char ep[17];
    ea_mon_epoch_format(ea_mon_table_epoch(m->t), ep);
    EA_LOGI("monitor: listening on %s:%d, epoch %s, heartbeat %d ms, dead after %d ms", m->host, m->port, ep,
            m->o.heartbeat_ms, m->o.dead_after_ms);
    if (m->o.replicate_ms > 0)
        EA_LOGI("monitor: replica plan every %d ms, min gain %g, load half-life %d ms", m->o.replicate_ms,
                m->o.replicate_min_gain, m->o.replicate_halflife_ms);
    else
        EA_LOGI("monitor: no replica plan (replicate_ms 0)");
    *out = m;
    return EA_OK;
}

int ea_monitor_port(const ea_monitor *m) { return m->port; }

unsigned long long ea_monitor_epoch(const ea_monitor *m) { return (unsigned long long)ea_mon_table_epoch(m->t); }

void ea_monitor_stop(ea_monitor *m) {
    if (!m) return;
    if (m->sync_ready) {
        pthread_mutex_lock(&m->mu);
        m->stopping = 1;
        pthread_cond_broadcast(&m->changed);
        pthread_cond_broadcast(&m->wake);
        pthread_mutex_unlock(&m->mu);
    }
    if (m->d) MHD_stop_daemon(m->d);
    if (m->reaper_started) pthread_join(m->reaper, NULL);
    if (m->planner_started) pthread_join(m->planner, NULL);
    if (m->sync_ready) {
        pthread_cond_destroy(&m->changed);
        pthread_cond_destroy(&m->wake);
        pthread_mutex_destroy(&m->mu);
    }
    ea_mon_table_destroy(m->t);
    ea_mon_loadsum_destroy(m->load);
    ea_free(m);
}
