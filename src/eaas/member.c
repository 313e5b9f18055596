/*
 * member.c — registration, heartbeats and the table long poll of a member
 * (see member.h).
 *
 * The register body is built and checked once at start (ea_mon_register_parse,
 * the monitor's own check), so a bad option fails at start, not as a stream of
 * 400s. Both threads sleep by polling the read end of `stop_pipe`; stop writes
 * one byte to it, which wakes every sleep and cancels a long poll in flight
 * (ea_http_call_cancel), so stop never waits for a 10 s long poll.
 *
 * State: the heartbeat thread owns its registration state and outage flag;
 * `registered` is published with atomics for ea_member_registered. The table
 * thread owns the last (epoch, version) it handed over.
 */
#include "eaas/member.h"

#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"
#include "base/sbuf.h"
#include "eaas/http_client.h"

#define CALL_MS 1000      /* deadline of register, heartbeat and leave */
#define LEAVE_MS 500
#define POLL_WAIT_MS 10000 /* the long poll's wait_ms unless the options say */
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000

struct ea_member {
    char monitor[EA_MON_HTTP_MAX + 1];
    char id[EA_MON_ID_MAX + 1];
    ea_mon_role role;
    char *reg_body; /* owns: the /register JSON */
    void (*on_table)(void *ctx, const char *cluster_json);
    char *(*beat_fields)(void *ctx);
    void *ctx;
    int poll_wait_ms;
    int stop_pipe[2]; /* [0] readable once stopping */
    pthread_t hb, tb;
    int hb_started, tb_started, stopped;
    atomic_int registered;
};

/* ---- small helpers -------------------------------------------------------------------- */

/* Sleep up to ms; 1 if stop was asked. */
static int nap(ea_member *m, int ms) {
    struct pollfd p = {.fd = m->stop_pipe[0], .events = POLLIN};
    return poll(&p, 1, ms) > 0;
}

static int next_backoff(int ms) { return ms * 2 < BACKOFF_MAX_MS ? ms * 2 : BACKOFF_MAX_MS; }

/* The integer `key` of a JSON object text in [lo, hi], or `dflt`. */
static long long json_int_field(const json_t *o, const char *key, long long lo, long long hi, long long dflt) {
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) return dflt;
    return json_integer_value(v);
}

/* The epoch of an answer {"epoch":"..."}; 0 with EA_ERR_FORMAT if absent or bad. */
static ea_status answer_epoch(const json_t *o, uint64_t *epoch) {
    const json_t *e = json_object_get(o, "epoch");
    if (!json_is_string(e)) return ea_err(EA_ERR_FORMAT, "monitor answer without an epoch");
    return ea_mon_epoch_parse(json_string_value(e), epoch);
}

/* ---- heartbeat thread ------------------------------------------------------------------- */

typedef struct {
    int registered, in_outage, heartbeat_ms;
    uint64_t epoch;
} hb_state;

static void outage(ea_member *m, hb_state *h, const char *why) {
    if (!h->in_outage) EA_LOGW("member %s: monitor %s unreachable (%s); retrying quietly, serving on the last table", m->id, m->monitor, why);
    h->in_outage = 1;
}

static void reachable(ea_member *m, hb_state *h) {
    if (h->in_outage) EA_LOGI("member %s: monitor %s reachable again", m->id, m->monitor);
    h->in_outage = 0;
}

/* One POST; a status other than 200 and 404 counts as unreachable. OUT: *status, *o (200 only). */
static ea_status post(ea_member *m, hb_state *h, const char *path, const char *body, int *status, json_t **o) {
    char *resp = NULL;
    *o = NULL;
    ea_status s = ea_http_call_cancel(m->monitor, "POST", path, body, CALL_MS, m->stop_pipe[0], status, &resp);
    if (s == EA_OK && *status == 200) s = ea_json_parse(resp, strlen(resp), path, o);
    else if (s == EA_OK && *status != 404) s = ea_err(EA_ERR_PEER, "%s answered %d: %.200s", path, *status, resp);
    ea_free(resp);
    if (s == EA_OK) reachable(m, h);
    else if (s != EA_ERR_CANCELLED) outage(m, h, ea_errmsg());
    return s;
}

static void do_register(ea_member *m, hb_state *h) {
    int st;
    json_t *o;
    if (post(m, h, "/register", m->reg_body, &st, &o) != EA_OK || st != 200) return;
    if (answer_epoch(o, &h->epoch) == EA_OK) {
        h->heartbeat_ms = (int)json_int_field(o, "heartbeat_ms", 1, 60000, 200);
        h->registered = 1;
        EA_LOGI("member %s: registered with monitor %s (epoch %016" PRIx64 ", heartbeat %d ms)", m->id, m->monitor,
                h->epoch, h->heartbeat_ms);
    }
    json_decref(o);
}

/* {"id":ID} and the caller's beat fields (ea_malloc'd; NULL out of memory). */
static char *heartbeat_body(ea_member *m) {
    char *f = m->beat_fields ? m->beat_fields(m->ctx) : NULL;
    const char *rest = f && f[0] == '{' && f[1] && f[1] != '}' ? f + 1 : "}"; /* the object's fields and its '}' */
    ea_sbuf b = {0};
    ea_sbuf_printf(&b, "{\"id\":\"%s\"%s%s", m->id, rest[0] == '}' ? "" : ",", rest); /* ids need no escaping */
    ea_free(f);
    if (b.failed) {
        ea_sbuf_deinit(&b);
        return NULL;
    }
    return b.data;
}

static void do_heartbeat(ea_member *m, hb_state *h) {
    int st;
    json_t *o;
    char *body = heartbeat_body(m);
    ea_status s = body ? post(m, h, "/heartbeat", body, &st, &o) : ea_err(EA_ERR_NOMEM, "heartbeat");
    ea_free(body);
    if (s != EA_OK) return;
    uint64_t epoch = 0;
    if (st == 404 || answer_epoch(o, &epoch) != EA_OK || epoch != h->epoch) {
        EA_LOGI("member %s: the monitor does not know us (%s): registering again", m->id,
                st == 404 ? "restarted, or declared us dead" : "new epoch");
        h->registered = 0;
    }
    json_decref(o);
}

static void *hb_main(void *arg) {
    ea_member *m = arg;
    hb_state h = {0};
    int backoff = BACKOFF_MIN_MS;
    while (!nap(m, 0)) {
        if (!h.registered) {
            do_register(m, &h);
            atomic_store(&m->registered, h.registered);
            if (!h.registered && nap(m, backoff)) break;
            backoff = h.registered ? BACKOFF_MIN_MS : next_backoff(backoff);
            continue;
        }
        if (nap(m, h.heartbeat_ms)) break;
        do_heartbeat(m, &h);
        atomic_store(&m->registered, h.registered && !h.in_outage);
    }
    return NULL;
}

/* ---- table thread ------------------------------------------------------------------------ */

static void *tb_main(void *arg) {
    ea_member *m = arg;
    uint64_t epoch = 0, version = 0;
    int have = 0, backoff = BACKOFF_MIN_MS;
    while (!nap(m, 0)) {
        char path[128];
        if (have) snprintf(path, sizeof path, "/cluster?after=%" PRIu64 "&wait_ms=%d&epoch=%016" PRIx64, version, m->poll_wait_ms, epoch);
        else snprintf(path, sizeof path, "/cluster");
        int st = 0;
        char *body = NULL;
        ea_status s = ea_http_call_cancel(m->monitor, "GET", path, NULL, m->poll_wait_ms + 5000, m->stop_pipe[0], &st, &body);
        if (s == EA_ERR_CANCELLED) break;
        ea_cluster c;
        if (s == EA_OK && st == 200 && ea_cluster_parse(body, strlen(body), &c) == EA_OK) {
            if (!have || c.epoch != epoch || c.version > version) {
                m->on_table(m->ctx, body);
                epoch = c.epoch, version = c.version, have = 1;
            }
            ea_cluster_free(&c);
            backoff = BACKOFF_MIN_MS;
        } else {
            EA_LOGD("member %s: /cluster: %s", m->id, s == EA_OK ? "bad answer" : ea_errmsg());
            if (nap(m, backoff)) s = EA_ERR_CANCELLED;
            backoff = next_backoff(backoff);
        }
        ea_free(body);
        if (s == EA_ERR_CANCELLED) break;
    }
    return NULL;
}

/* ---- life cycle ------------------------------------------------------------------------ */

/* role, id and the caller's fields as one register body, checked as the monitor checks it. */
static ea_status build_register(ea_member *m, const char *fields) {
    json_error_t je;
    json_t *o = fields ? json_loads(fields, 0, &je) : json_object();
    if (!json_is_object(o)) {
        json_decref(o);
        return ea_err(EA_ERR_INVALID_ARG, "member fields: not a JSON object");
    }
    json_object_set_new(o, "role", json_string(ea_mon_role_name(m->role)));
    json_object_set_new(o, "id", json_string(m->id));
    char *txt = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!txt || !(m->reg_body = ea_strdup(txt))) {
        free(txt);
        return ea_err(EA_ERR_NOMEM, "member register body");
    }
    free(txt);
    ea_mon_register r;
    ea_status s = ea_mon_register_parse(m->reg_body, strlen(m->reg_body), &r);
    ea_mon_register_free(&r);
    return s == EA_OK ? EA_OK : ea_err_wrap(EA_ERR_INVALID_ARG, "member: the monitor would refuse our registration: ");
}

static ea_status set_id(ea_member *m, const char *id) {
    if (id) {
        snprintf(m->id, sizeof m->id, "%s", id);
        return strlen(id) <= EA_MON_ID_MAX ? EA_OK : ea_err(EA_ERR_INVALID_ARG, "member id longer than %d", EA_MON_ID_MAX);
    }
    uint64_t r;
    EA_TRY(ea_random_bytes(&r, sizeof r));
    snprintf(m->id, sizeof m->id, "%s-%016" PRIx64, ea_mon_role_name(m->role), r);
    return EA_OK;
}

static ea_status start(ea_member *m, const ea_member_opts *o) {
    char host[EA_MON_HTTP_MAX + 1];
    int port;
    EA_TRY(ea_hostport_parse(o->monitor, host, sizeof host, &port));
    snprintf(m->monitor, sizeof m->monitor, "%s", o->monitor);
    EA_TRY(set_id(m, o->id));
    EA_TRY(build_register(m, o->fields));
    if (pipe(m->stop_pipe) != 0) return ea_err(EA_ERR_IO, "member: pipe");
    for (int i = 0; i < 2; i++) fcntl(m->stop_pipe[i], F_SETFD, FD_CLOEXEC);
    if (pthread_create(&m->hb, NULL, hb_main, m) != 0) return ea_err(EA_ERR_INTERNAL, "member: heartbeat thread");
    m->hb_started = 1;
    if (m->on_table && pthread_create(&m->tb, NULL, tb_main, m) != 0) return ea_err(EA_ERR_INTERNAL, "member: table thread");
    m->tb_started = m->on_table != NULL;
    return EA_OK;
}

ea_status ea_member_start(const ea_member_opts *o, ea_member **out) {
    *out = NULL;
    ea_member *m = ea_calloc(1, sizeof *m);
    if (!m) return ea_err(EA_ERR_NOMEM, "member");
    m->role = o->role;
    m->on_table = o->on_table;
    m->beat_fields = o->beat_fields;
    m->ctx = o->ctx;
    m->poll_wait_ms = o->poll_wait_ms > 0 && o->poll_wait_ms <= EA_MON_WAIT_MAX_MS ? o->poll_wait_ms : POLL_WAIT_MS;
    m->stop_pipe[0] = m->stop_pipe[1] = -1;
    ea_status s = start(m, o);
    if (s != EA_OK) {
        ea_member_abandon(m);
        return s;
    }
    *out = m;
    return EA_OK;
}

/* Wake and join the threads (once). */
static void stop_threads(ea_member *m) {
    if (m->stopped) return;
    m->stopped = 1;
    if (m->stop_pipe[1] >= 0 && write(m->stop_pipe[1], "x", 1) != 1) EA_LOGE("member %s: cannot signal stop", m->id);
    if (m->hb_started) pthread_join(m->hb, NULL);
    if (m->tb_started) pthread_join(m->tb, NULL);
}

static void destroy(ea_member *m) {
    for (int i = 0; i < 2; i++)
        if (m->stop_pipe[i] >= 0) close(m->stop_pipe[i]);
    ea_free(m->reg_body);
    ea_free(m);
}

void ea_member_abandon(ea_member *m) {
    if (!m) return;
    stop_threads(m);
    destroy(m);
}

void ea_member_stop(ea_member *m) {
    if (!m) return;
    stop_threads(m);
    char body[EA_MON_ID_MAX + 16], *resp = NULL;
    int st = 0;
    snprintf(body, sizeof body, "{\"id\":\"%s\"}", m->id);
    if (ea_http_call(m->monitor, "POST", "/leave", body, LEAVE_MS, &st, &resp) == EA_OK)
        EA_LOGI("member %s: left monitor %s (%d)", m->id, m->monitor, st);
    ea_free(resp);
    destroy(m);
}

const char *ea_member_id(const ea_member *m) { return m->id; }

int ea_member_registered(const ea_member *m) { return atomic_load(&m->registered); }
