/*
 * test_monitor.c — the monitor (eaas/monitor.h), its messages and table
 * (monitor_msg.h, monitor_table.h) and the member side (member.h), in one
 * process over loopback HTTP; no UCX needed (label unit).
 *
 * The live monitor runs with heartbeat 100 ms and dead_after 1000 ms. Waits are
 * bounded loops; the only timed checks are that a death is not declared
 * before dead_after, is declared within dead_after + heartbeat (+ 1 s of
 * slack for a loaded machine), and that a long poll without a change waits
 * its wait_ms.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/util.h"
#include "eaas/http_client.h"
#include "eaas/member.h"
#include "eaas/monitor.h"
#include "eaas/monitor_table.h"
#include "harness.h"

#define HB_MS 100
#define DEAD_MS 1000 /* 10 heartbeats: a member slowed down by a busy machine is not declared dead */

static void nap_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static const char server_body[] =
    "{\"role\":\"server\",\"id\":\"s1\",\"ucx\":\"AAECAw==\",\"http\":\"127.0.0.1:9001\","
    "\"hosted\":{\"layers\":[[0,3]],\"experts\":[[0,7],[10,12]]}}";

/* ---- messages, without a socket -------------------------------------------------------- */

TEST(base64_round_trip_and_strict_decode) {
    uint8_t raw[7] = {0, 1, 2, 0xfb, 0xff, 0x80, 7}, back[8];
    for (size_t n = 0; n <= sizeof raw; n++) {
        char txt[16];
        size_t m = 99;
        ea_base64_encode(raw, n, txt);
        CHECK_EQ(strlen(txt), ea_base64_enc_len(n));
        CHECK_EQ(ea_base64_decode(txt, strlen(txt), back, &m), EA_OK);
        CHECK_EQ(m, n);
        CHECK(memcmp(raw, back, n) == 0);
    }
    char t[8];
    ea_base64_encode("\xfb\xff", 2, t);
    CHECK_STREQ(t, "+/8=");
    size_t m;
    const char *bad[] = {"AAE", "A===", "AA=A", "AB==", "AAE=AAAA", "AA\nA", "AA-_"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_EQ(ea_base64_decode(bad[i], strlen(bad[i]), back, &m), EA_ERR_FORMAT);
}

TEST(register_parse_accepts_a_server_and_a_client) {
    ea_mon_register r;
    CHECK_EQ(ea_mon_register_parse(server_body, strlen(server_body), &r), EA_OK);
    CHECK_EQ(r.role, EA_MON_SERVER);
    CHECK_STREQ(r.id, "s1");
    CHECK_STREQ(r.http, "127.0.0.1:9001");
    CHECK_EQ(r.n_layers, 1);
    CHECK_EQ(r.n_experts, 2);
    CHECK_EQ(r.experts[1].a, 10);
    CHECK_EQ(r.experts[1].b, 12);
    ea_mon_register_free(&r);
    const char *c = "{\"role\":\"client\",\"id\":\"c-1.x@h:2\",\"extra\":[1]}";
    CHECK_EQ(ea_mon_register_parse(c, strlen(c), &r), EA_OK);
    CHECK_EQ(r.role, EA_MON_CLIENT);
    CHECK(r.ucx == NULL && r.layers == NULL);
    ea_mon_register_free(&r);
}

/* Each malformed message is refused and the message names the field. */
TEST(register_parse_refuses_with_the_path) {
    static const struct {
        const char *body, *says;
    } cases[] = {
        {"", "invalid JSON"},
        {"[1]", "expected a JSON object"},
        {"{\"id\":\"a\"}", "role: missing"},
        {"{\"role\":\"boss\",\"id\":\"a\"}", "role: 'boss'"},
        {"{\"role\":\"client\"}", "id: missing"},
        {"{\"role\":\"client\",\"id\":7}", "id: expected a string"},
        {"{\"role\":\"client\",\"id\":\"\"}", "id: length 0"},
        {"{\"role\":\"client\",\"id\":\"a b\"}", "id: character 1"},
        {"{\"role\":\"client\",\"id\":\"a\\u0000b\"}", "id: character 1"},
        {"{\"role\":\"server\",\"id\":\"s\",\"http\":\"h:1\",\"hosted\":{}}", "ucx: missing"},
        {"{\"role\":\"server\",\"id\":\"s\",\"ucx\":\"AA==\",\"http\":\"h\",\"hosted\":{}}", "http: 'h' is not host:port"},
        {"{\"role\":\"server\",\"id\":\"s\",\"ucx\":\"AA==\",\"http\":\"h:1\"}", "hosted: expected an object"},
        {"{\"role\":\"server\",\"id\":\"s\",\"ucx\":\"AA==\",\"http\":\"h:1\",\"hosted\":{\"layers\":[],\"experts\":[[0,1]]}}",
         "hosted.layers: 0 ranges"},
        {"{\"role\":\"server\",\"id\":\"s\",\"ucx\":\"AA==\",\"http\":\"h:1\",\"hosted\":{\"layers\":[[0,1]],\"experts\":[[2,1]]}}",
         "hosted.experts[0]: 2 > 1"},
        {"{\"role\":\"server\",\"id\":\"s\",\"ucx\":\"AA==\",\"http\":\"h:1\",\"hosted\":{\"layers\":[[0,1]],\"experts\":[[-1,1]]}}",
         "hosted.experts[0][0]: -1 not in"},
        {"{\"role\":\"server\",\"id\":\"s\",\"ucx\":\"AA==\",\"http\":\"h:1\",\"hosted\":{\"layers\":[[0,1.5]],\"experts\":[[0,1]]}}",
         "hosted.layers[0][1]: expected an integer"},
        {"{\"role\":\"server\",\"id\":\"s\",\"ucx\":\"AA==\",\"http\":\"h:1\",\"hosted\":{\"layers\":[[0]],\"experts\":[[0,1]]}}",
         "hosted.layers[0]: expected [a, b]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ea_mon_register r;
        ea_status s = ea_mon_register_parse(cases[i].body, strlen(cases[i].body), &r);
        if (s == EA_OK || !strstr(ea_errmsg(), cases[i].says))
            FAIL_("case %zu: status %s, message '%s', expected '%s'", i, ea_status_name(s), ea_errmsg(), cases[i].says);
        CHECK(r.ucx == NULL && r.layers == NULL && r.experts == NULL);
    }
}

TEST(register_parse_limits) {
    char id[EA_MON_ID_MAX + 2];
    memset(id, 'a', sizeof id - 1);
    id[EA_MON_ID_MAX] = 0; /* 128 characters: fine */
    char body[8192 * 8];
    ea_mon_register r;
    snprintf(body, sizeof body, "{\"role\":\"client\",\"id\":\"%s\"}", id);
    CHECK_EQ(ea_mon_register_parse(body, strlen(body), &r), EA_OK);
    ea_mon_register_free(&r);
    id[EA_MON_ID_MAX] = 'a', id[EA_MON_ID_MAX + 1] = 0; /* 129 */
    snprintf(body, sizeof body, "{\"role\":\"client\",\"id\":\"%s\"}", id);
    CHECK_EQ(ea_mon_register_parse(body, strlen(body), &r), EA_ERR_RANGE);
    /* 4096 ranges pass, 4097 do not */
    for (int n = EA_MON_RANGES_MAX; n <= EA_MON_RANGES_MAX + 1; n++) {
        size_t o = (size_t)snprintf(body, sizeof body, "{\"role\":\"server\",\"id\":\"s\",\"ucx\":\"AA==\",\"http\":\"h:1\","
                                                       "\"hosted\":{\"experts\":[[0,1]],\"layers\":[");
        for (int i = 0; i < n; i++) o += (size_t)snprintf(body + o, sizeof body - o, "%s[%d,%d]", i ? "," : "", i, i);
        snprintf(body + o, sizeof body - o, "]}}");
        CHECK_EQ(ea_mon_register_parse(body, strlen(body), &r), n == EA_MON_RANGES_MAX ? EA_OK : EA_ERR_RANGE);
        ea_mon_register_free(&r);
    }
}

TEST(id_and_query_parse) {
    char id[EA_MON_ID_MAX + 1];
    CHECK_EQ(ea_mon_id_parse("{\"id\":\"s1\"}", 11, id), EA_OK);
    CHECK_STREQ(id, "s1");
    CHECK_EQ(ea_mon_id_parse("{\"id\":null}", 11, id), EA_ERR_FORMAT);
    CHECK_EQ(ea_mon_id_parse("{\"di\":\"s1\"}", 11, id), EA_ERR_FORMAT);
    uint64_t after, epoch;
    int wait, has;
    CHECK_EQ(ea_mon_query_parse("12", "30000", "00000000000000ff", &after, &wait, &epoch, &has), EA_OK);
    CHECK(after == 12 && wait == 30000 && epoch == 255 && has == 1);
    CHECK_EQ(ea_mon_query_parse(NULL, NULL, NULL, &after, &wait, &epoch, &has), EA_OK);
    CHECK(after == 0 && wait == 0 && has == 0);
    CHECK_EQ(ea_mon_query_parse("-1", NULL, NULL, &after, &wait, &epoch, &has), EA_ERR_FORMAT);
    CHECK_EQ(ea_mon_query_parse("1", "30001", NULL, &after, &wait, &epoch, &has), EA_ERR_RANGE);
    CHECK_EQ(ea_mon_query_parse("99999999999999999999", NULL, NULL, &after, &wait, &epoch, &has), EA_ERR_FORMAT);
    CHECK_EQ(ea_mon_query_parse(NULL, NULL, "ff", &after, &wait, &epoch, &has), EA_ERR_FORMAT);
}

static void reg(ea_mon_table *t, const char *body, uint64_t now) {
    ea_mon_register r;
    EA_ASSERT(ea_mon_register_parse(body, strlen(body), &r) == EA_OK);
    EA_ASSERT(ea_mon_table_register(t, &r, now) == EA_OK);
}

/* A heartbeat of body (a JSON object) or of {"id": body} when body is an id. OUT: *role, if not NULL. */
static ea_status hb_role(ea_mon_table *t, const char *body, uint64_t now, ea_mon_role *role) {
    char whole[256];
    if (body[0] != '{') snprintf(whole, sizeof whole, "{\"id\":\"%s\"}", body), body = whole;
    ea_mon_heartbeat h;
    EA_ASSERT(ea_mon_heartbeat_parse(body, strlen(body), &h) == EA_OK);
    ea_mon_role r;
    ea_status s = ea_mon_table_heartbeat(t, &h, now, &r);
    if (role && s == EA_OK) *role = r;
    ea_mon_heartbeat_free(&h);
    return s;
}

static ea_status hb(ea_mon_table *t, const char *body, uint64_t now) { return hb_role(t, body, now, NULL); }

static void render(const ea_mon_table *t, int with_events, uint64_t after, ea_cluster *c) {
    ea_sbuf b = {0};
    ea_mon_table_render(t, with_events, after, &b);
    EA_ASSERT(!b.failed && ea_cluster_parse(b.data, b.len, c) == EA_OK);
    ea_sbuf_deinit(&b);
}

/* Versions, since, events, reaping and leave, on the table alone (the caller's clock). */
TEST(table_versions_events_and_reaping) {
    ea_mon_table *t;
    CHECK_EQ(ea_mon_table_create(0xabcull, &t), EA_OK);
    CHECK_EQ(ea_mon_table_version(t), 1);
    reg(t, server_body, 0);
    reg(t, "{\"role\":\"client\",\"id\":\"c1\"}", 0);
    CHECK_EQ(hb(t, "s1", 400), EA_OK);
    CHECK_EQ(ea_mon_table_reap(t, 500, 500), 0);  /* c1 silent exactly 500: not yet */
    CHECK_EQ(ea_mon_table_reap(t, 501, 500), 1);  /* c1 dead */
    CHECK_EQ(hb(t, "c1", 502), EA_ERR_NOT_FOUND);
    CHECK_EQ(hb(t, "nobody", 502), EA_ERR_NOT_FOUND);
    reg(t, "{\"role\":\"client\",\"id\":\"c1\"}", 600); /* back: new since */
    CHECK_EQ(ea_mon_table_leave(t, "s1"), EA_OK);
    CHECK_EQ(ea_mon_table_leave(t, "s1"), EA_ERR_NOT_FOUND);
    CHECK_EQ(ea_mon_table_version(t), 6);
    ea_cluster c;
    render(t, 1, 1, &c);
    CHECK_EQ(c.epoch, 0xabc);
    CHECK_EQ(c.n_servers, 0);
    CHECK(c.n_clients == 1 && c.clients[0].live && c.clients[0].since == 5);
    CHECK(c.has_events && c.n_events == 5);
    static const ea_mon_event_kind kinds[] = {EA_MON_EV_REGISTER, EA_MON_EV_REGISTER, EA_MON_EV_DEAD, EA_MON_EV_REGISTER,
                                              EA_MON_EV_LEAVE};
    for (int i = 0; i < c.n_events && i < 5; i++) CHECK(c.events[i].version == (uint64_t)i + 2 && c.events[i].kind == kinds[i]);
    CHECK_STREQ(c.events[4].id, "s1");
    ea_cluster_free(&c);
    ea_mon_table_destroy(t);
}

/* Only the last EA_MON_EVENTS_KEPT events are kept: an older `after` gets no "events". */
TEST(table_events_ring) {
    ea_mon_table *t;
    CHECK_EQ(ea_mon_table_create(1, &t), EA_OK);
    for (int i = 0; i < EA_MON_EVENTS_KEPT + 10; i++) reg(t, "{\"role\":\"client\",\"id\":\"c\"}", 0);
    uint64_t v = ea_mon_table_version(t); /* 1 + KEPT + 10 */
    ea_cluster c;
    render(t, 1, v - EA_MON_EVENTS_KEPT, &c); /* exactly the kept ones */
    CHECK(c.has_events && c.n_events == EA_MON_EVENTS_KEPT && c.events[0].version == v - EA_MON_EVENTS_KEPT + 1);
    ea_cluster_free(&c);
    render(t, 1, v - EA_MON_EVENTS_KEPT - 1, &c); /* one too old */
    CHECK(!c.has_events);
    ea_cluster_free(&c);
    render(t, 1, v, &c);
    CHECK(c.has_events && c.n_events == 0);
    ea_cluster_free(&c);
    ea_mon_table_destroy(t);
}

/* A full table takes a new id in the place of the oldest dead entry, and refuses it when none is dead. */
TEST(table_full) {
    ea_mon_table *t;
    CHECK_EQ(ea_mon_table_create(1, &t), EA_OK);
    char body[96];
    for (int i = 0; i < EA_MON_MEMBERS_MAX; i++) {
        snprintf(body, sizeof body, "{\"role\":\"client\",\"id\":\"c%d\"}", i);
        reg(t, body, i < 2 ? 0 : 10);
    }
    ea_mon_register r;
    const char *extra = "{\"role\":\"client\",\"id\":\"new\"}";
    CHECK_EQ(ea_mon_register_parse(extra, strlen(extra), &r), EA_OK);
    CHECK_EQ(ea_mon_table_register(t, &r, 10), EA_ERR_BUSY);
    CHECK(r.ucx == NULL);
    CHECK_EQ(ea_mon_table_reap(t, 8, 5), 2); /* c0, c1 */
    reg(t, extra, 10);
    CHECK_EQ(hb(t, "c0", 11), EA_ERR_NOT_FOUND);
    CHECK_EQ(hb(t, "new", 11), EA_OK);
    ea_mon_counts n;
    ea_mon_table_counts(t, &n);
    CHECK(n.clients_live == EA_MON_MEMBERS_MAX - 1 && n.clients_dead == 1 && n.deaths == 2);
    ea_mon_table_destroy(t);
}

TEST(server_fields_and_cluster_parse) {
    uint8_t addr[5] = {9, 8, 7, 0, 255};
    ea_range layers[1] = {{0, 5}}, experts[2] = {{2, 3}, {8, 8}};
    char *f = ea_member_server_fields(addr, sizeof addr, "127.0.0.1:9", layers, 1, experts, 2, 0);
    CHECK(f != NULL);
    char body[512];
    snprintf(body, sizeof body, "{\"role\":\"server\",\"id\":\"x1\",%s", f + 1);
    ea_free(f);
    ea_mon_table *t;
    CHECK_EQ(ea_mon_table_create(7, &t), EA_OK);
    reg(t, body, 0);
    ea_cluster c;
    render(t, 0, 0, &c);
    CHECK(!c.has_events && c.n_servers == 1 && c.version == 2);
    ea_cluster_server *s = &c.servers[0];
    CHECK(s->ucx_len == 5 && memcmp(s->ucx, addr, 5) == 0);
    CHECK_STREQ(s->http, "127.0.0.1:9");
    CHECK(ea_cluster_hosts(s, 5, 8) && ea_cluster_hosts(s, 0, 3) && !ea_cluster_hosts(s, 6, 2) && !ea_cluster_hosts(s, 1, 4));
    ea_cluster_free(&c);
    ea_mon_table_destroy(t);
    CHECK(ea_member_server_fields(addr, 5, "nohostport", layers, 1, experts, 2, 0) == NULL);
    CHECK(ea_member_server_fields(addr, 5, "h:1", layers, 0, experts, 2, 0) == NULL);
    const char *bad = "{\"epoch\":\"0000000000000001\",\"version\":3,\"servers\":[],\"clients\":[],"
                      "\"events\":[{\"version\":3,\"kind\":\"leave\",\"role\":\"client\",\"id\":\"a\"},"
                      "{\"version\":2,\"kind\":\"leave\",\"role\":\"client\",\"id\":\"b\"}]}";
    CHECK_EQ(ea_cluster_parse(bad, strlen(bad), &c), EA_ERR_RANGE); /* events out of order */
    CHECK(c.events == NULL);
}

/* ---- the live monitor -------------------------------------------------------------------- */

static ea_monitor *start_monitor(int port) {
    ea_monitor_opts o = {.host = "127.0.0.1", .port = port, .heartbeat_ms = HB_MS, .dead_after_ms = DEAD_MS};
    ea_monitor *m = NULL;
    for (int i = 0; i < 50 && ea_monitor_start(&o, &m) != EA_OK; i++) nap_ms(100); /* same port again: retry bind */
    return m;
}

static void hostport(int port, char *buf) { snprintf(buf, 32, "127.0.0.1:%d", port); }

/* One call to the monitor; returns the HTTP status (-1 on a transport error). */
static int call(int port, const char *method, const char *path, const char *body, char **resp) {
    char hp[32];
    int st = -1;
    char *r = NULL;
    hostport(port, hp);
    if (ea_http_call(hp, method, path, body, 40000, &st, &r) != EA_OK) st = -1;
    if (resp) *resp = r;
    else ea_free(r);
    return st;
}

static int get_cluster(int port, const char *path, ea_cluster *c) {
    char *r = NULL;
    int st = call(port, "GET", path, NULL, &r);
    int ok = st == 200 && ea_cluster_parse(r, strlen(r), c) == EA_OK;
    ea_free(r);
    return ok;
}

/* Live members (by id prefix match of the whole id) in the current table. */
static int n_live(int port, const char *a, const char *b) {
    ea_cluster c;
    if (!get_cluster(port, "/cluster", &c)) return -1;
    int n = 0;
    for (int i = 0; i < c.n_servers; i++) n += c.servers[i].live && (!strcmp(c.servers[i].id, a) || !strcmp(c.servers[i].id, b));
    for (int i = 0; i < c.n_clients; i++) n += c.clients[i].live && (!strcmp(c.clients[i].id, a) || !strcmp(c.clients[i].id, b));
    ea_cluster_free(&c);
    return n;
}

static int wait_live(int port, const char *a, const char *b, int want) {
    for (int i = 0; i < 200; i++) {
        if (n_live(port, a, b) == want) return 1;
        nap_ms(25);
    }
    return 0;
}

/* on_table recorder: every (epoch, version) handed over, in order. */
typedef struct {
    pthread_mutex_t mu;
    uint64_t epoch[256], version[256];
    int n;
} tables;

static void on_table(void *ctx, const char *json) {
    tables *t = ctx;
    ea_cluster c;
    EA_ASSERT(ea_cluster_parse(json, strlen(json), &c) == EA_OK);
    pthread_mutex_lock(&t->mu);
    if (t->n < 256) t->epoch[t->n] = c.epoch, t->version[t->n] = c.version, t->n++;
    pthread_mutex_unlock(&t->mu);
    ea_cluster_free(&c);
}

/* Within each epoch the versions handed over rise strictly; returns the number of epochs. */
static int check_order(tables *t, int *ordered) {
    pthread_mutex_lock(&t->mu);
    int epochs = t->n > 0;
    *ordered = 1;
    for (int i = 1; i < t->n; i++) {
        if (t->epoch[i] != t->epoch[i - 1]) epochs++;
        else if (t->version[i] <= t->version[i - 1]) *ordered = 0;
    }
    pthread_mutex_unlock(&t->mu);
    return epochs;
}

static ea_member *member(int port, ea_mon_role role, const char *id, const char *fields, tables *tb) {
    char hp[32];
    hostport(port, hp);
    ea_member_opts o = {.monitor = hp, .role = role, .id = id, .fields = fields, .on_table = tb ? on_table : NULL, .ctx = tb,
                        .poll_wait_ms = 150}; /* long polls time out often: an old table handed over again would show */
    ea_member *m = NULL;
    EA_ASSERT(ea_member_start(&o, &m) == EA_OK);
    return m;
}

static char *fields_of_server(void) {
    uint8_t addr[4] = {1, 2, 3, 4};
    ea_range layers[1] = {{0, 3}}, experts[2] = {{0, 7}, {10, 12}};
    return ea_member_server_fields(addr, 4, "127.0.0.1:9001", layers, 1, experts, 2, 0);
}

typedef struct {
    int port;
    uint64_t after;
    ea_cluster c;
    int ok;
} poll_arg;

static void *long_poll(void *arg) {
    poll_arg *p = arg;
    char path[96];
    snprintf(path, sizeof path, "/cluster?after=%llu&wait_ms=20000", (unsigned long long)p->after);
    p->ok = get_cluster(p->port, path, &p->c);
    return NULL;
}

/* A long poll answers on a change, with the change's event; without one it waits wait_ms. */
static void check_long_poll(int port) {
    ea_cluster c;
    CHECK(get_cluster(port, "/cluster", &c));
    poll_arg p = {.port = port, .after = c.version};
    ea_cluster_free(&c);
    pthread_t th;
    pthread_create(&th, NULL, long_poll, &p);
    nap_ms(100);
    CHECK_EQ(call(port, "POST", "/register", "{\"role\":\"client\",\"id\":\"poke\"}", NULL), 200);
    pthread_join(th, NULL);
    CHECK(p.ok && p.c.version == p.after + 1 && p.c.has_events && p.c.n_events == 1);
    CHECK(p.c.events[0].kind == EA_MON_EV_REGISTER && !strcmp(p.c.events[0].id, "poke"));
    ea_cluster_free(&p.c);
    CHECK_EQ(call(port, "POST", "/leave", "{\"id\":\"poke\"}", NULL), 200);
    CHECK(get_cluster(port, "/cluster", &c));
    uint64_t v = c.version;
    ea_cluster_free(&c);
    char path[96];
    snprintf(path, sizeof path, "/cluster?after=%llu&wait_ms=300", (unsigned long long)v);
    double t0 = ea_now_s();
    CHECK(get_cluster(port, path, &c));
    CHECK(ea_now_s() - t0 >= 0.29);
    CHECK(c.version == v && c.has_events && c.n_events == 0);
    ea_cluster_free(&c);
}

/* A member registered by hand and never heard from again is dead after DEAD_MS, not before.
 * Observed through long polls (each wakes on a change), so the test's own polling adds
 * little; the upper bound still has a second of slack for a loaded machine under ASan. */
static void check_death(int port) {
    double t0 = ea_now_s();
    char *r = NULL;
    CHECK_EQ(call(port, "POST", "/register", "{\"role\":\"client\",\"id\":\"mute\"}", &r), 200);
    ea_cluster c;
    uint64_t v = strstr(r, "\"version\":") ? strtoull(strstr(r, "\"version\":") + 10, NULL, 10) : 0;
    ea_free(r);
    int dead = 0;
    double t_dead = 0;
    while (!dead && ea_now_s() - t0 < 5) {
        char path[96];
        snprintf(path, sizeof path, "/cluster?after=%llu&wait_ms=5000", (unsigned long long)v);
        CHECK(get_cluster(port, path, &c));
        t_dead = ea_now_s() - t0;
        for (int i = 0; i < c.n_events; i++) dead |= c.events[i].kind == EA_MON_EV_DEAD && !strcmp(c.events[i].id, "mute");
        v = c.version;
        ea_cluster_free(&c);
    }
    CHECK(dead);
    CHECK(t_dead >= DEAD_MS / 1000.0);
    CHECK(t_dead <= (DEAD_MS + HB_MS) / 1000.0 + 1.0);
    CHECK_EQ(call(port, "POST", "/heartbeat", "{\"id\":\"mute\"}", NULL), 404);
    CHECK_EQ(call(port, "GET", "/metrics", NULL, &r), 200);
    CHECK(r && strstr(r, "eaas:monitor_deaths_total 1\n") && strstr(r, "eaas:monitor_clients{state=\"dead\"} 1\n"));
    ea_free(r);
    CHECK_EQ(call(port, "POST", "/leave", "{\"id\":\"mute\"}", NULL), 200);
}

/* Send raw request bytes, read the answer until the monitor closes (it refuses, so it does). */
static char *raw_exchange(int port, const char *req) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(0x7f000001)};
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char *out = ea_calloc(1, 4096);
    size_t n = 0;
    ssize_t r = 1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && send(fd, req, strlen(req), MSG_NOSIGNAL) > 0)
        while (n < 4095 && (r = recv(fd, out + n, 4095 - n, 0)) > 0) n += (size_t)r;
    close(fd);
    return out;
}

/* Malformed messages get a 400 naming the problem; wrong paths, methods and ids their codes. */
static void check_bad_requests(int port) {
    static const struct {
        const char *method, *path, *body;
        int status;
        const char *says;
    } cases[] = {
        {"POST", "/register", "{\"role\":\"server\",\"id\":\"s\"}", 400, "ucx: missing"},
        {"POST", "/register", "not json", 400, "invalid JSON"},
        {"POST", "/register", NULL, 400, "invalid JSON"},
        {"POST", "/heartbeat", "{\"id\":[]}", 400, "id: expected a string"},
        {"POST", "/heartbeat", "{\"id\":\"ghost\"}", 404, "not registered"},
        {"POST", "/leave", "{\"id\":\"ghost\"}", 404, "not registered"},
        {"GET", "/cluster?after=x", NULL, 400, "after: expected a decimal"},
        {"GET", "/cluster?after=1&wait_ms=30001", NULL, 400, "wait_ms: 30001"},
        {"GET", "/register", NULL, 405, "method"},
        {"GET", "/nowhere", NULL, 404, "no such endpoint"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *r = NULL;
        int st = call(port, cases[i].method, cases[i].path, cases[i].body, &r);
        int ok = st == cases[i].status && r && strstr(r, cases[i].says) && strstr(r, "\"error\"");
        if (ok && st == 400) ok = strstr(r, "\"type\":\"invalid_request_error\"") != NULL;
        if (!ok) FAIL_("case %zu: %d '%s'", i, st, r ? r : "");
        ea_free(r);
    }
    char *r = raw_exchange(port, "POST /register HTTP/1.1\r\nHost: x\r\nContent-Length: 1048577\r\n\r\n{}");
    CHECK(r && !strncmp(r, "HTTP/1.1 413", 12) && strstr(r, "larger than 1 MiB"));
    ea_free(r);
    CHECK_EQ(call(port, "GET", "/health", NULL, NULL), 200);
}

/* Two members register, appear live; the monitor restarts on the same port; they come back under a new epoch. */
TEST(live_monitor) {
    ea_monitor *m = start_monitor(0);
    CHECK(m != NULL);
    int port = ea_monitor_port(m);
    uint64_t epoch1 = ea_monitor_epoch(m);
    /* static: a failed CHECK returns with the members still running */
    static tables ts = {.mu = PTHREAD_MUTEX_INITIALIZER}, tc = {.mu = PTHREAD_MUTEX_INITIALIZER};
    char *fields = fields_of_server();
    ea_member *srv = member(port, EA_MON_SERVER, "srv-1", fields, &ts);
    ea_member *cli = member(port, EA_MON_CLIENT, NULL, NULL, &tc);
    ea_free(fields);
    CHECK(!strncmp(ea_member_id(cli), "client-", 7) && strlen(ea_member_id(cli)) == 23);
    CHECK(wait_live(port, "srv-1", ea_member_id(cli), 2));
    ea_cluster c;
    CHECK(get_cluster(port, "/cluster", &c));
    CHECK(c.epoch == epoch1 && c.version == 3 && c.n_servers == 1 && c.n_clients == 1);
    CHECK(c.servers[0].since != c.clients[0].since && c.servers[0].since >= 2 && c.clients[0].since >= 2);
    CHECK(c.servers[0].ucx_len == 4 && c.servers[0].n_experts == 2 && ea_cluster_hosts(&c.servers[0], 3, 11));
    ea_cluster_free(&c);
    nap_ms(3 * DEAD_MS); /* heartbeats keep both live */
    CHECK_EQ(n_live(port, "srv-1", ea_member_id(cli)), 2);
    check_long_poll(port);
    check_death(port);
    check_bad_requests(port);

    ea_monitor_stop(m);
    nap_ms(300); /* the members see the monitor gone */
    m = start_monitor(port);
    CHECK(m != NULL);
    CHECK(ea_monitor_epoch(m) != epoch1);
    CHECK(wait_live(port, "srv-1", ea_member_id(cli), 2));
    for (int i = 0; i < 200 && (check_order(&ts, &(int){0}) < 2 || check_order(&tc, &(int){0}) < 2); i++)
        nap_ms(25); /* both members' table threads see the new epoch */
    int ordered_s, ordered_c;
    CHECK_EQ(check_order(&ts, &ordered_s), 2);
    CHECK(check_order(&tc, &ordered_c) == 2);
    CHECK(ordered_s && ordered_c);
    CHECK(ts.epoch[ts.n - 1] == ea_monitor_epoch(m));

    ea_member_stop(cli); /* leaves: gone from the table at once */
    CHECK(get_cluster(port, "/cluster", &c));
    CHECK(c.n_clients == 0 && c.n_servers == 1);
    ea_cluster_free(&c);
    ea_member_abandon(srv); /* no leave: dead after DEAD_MS */
    for (int i = 0; i < 100 && n_live(port, "srv-1", "") != 0; i++) nap_ms(25);
    CHECK(get_cluster(port, "/cluster", &c));
    CHECK(c.n_servers == 1 && !c.servers[0].live);
    ea_cluster_free(&c);
    ea_monitor_stop(m);
}

/* A member whose monitor is not there keeps trying, and registers once one starts. */
TEST(member_waits_for_the_monitor) {
    ea_monitor *m = start_monitor(0);
    CHECK(m != NULL);
    int port = ea_monitor_port(m);
    ea_monitor_stop(m);
    ea_member *mb = member(port, EA_MON_CLIENT, "early", NULL, NULL);
    nap_ms(300);
    CHECK(!ea_member_registered(mb));
    m = start_monitor(port);
    CHECK(m != NULL);
    for (int i = 0; i < 200 && !ea_member_registered(mb); i++) nap_ms(25);
    CHECK(ea_member_registered(mb));
    CHECK_EQ(n_live(port, "early", ""), 1);
    double t0 = ea_now_s();
    ea_member_stop(mb);
    CHECK(ea_now_s() - t0 < 3); /* stop does not wait out a heartbeat or a long poll */
    ea_monitor_stop(m);
}

TEST(member_options_checked) {
    ea_member *mb = NULL;
    ea_member_opts o = {.monitor = "nohost", .role = EA_MON_CLIENT};
    CHECK_EQ(ea_member_start(&o, &mb), EA_ERR_INVALID_ARG);
    o.monitor = "127.0.0.1:1";
    o.id = "bad id";
    CHECK_EQ(ea_member_start(&o, &mb), EA_ERR_INVALID_ARG);
    o.id = NULL;
    o.role = EA_MON_SERVER; /* a server without its fields */
    CHECK_EQ(ea_member_start(&o, &mb), EA_ERR_INVALID_ARG);
    CHECK(mb == NULL);
}

int main(void) {
    RUN(base64_round_trip_and_strict_decode);
    RUN(register_parse_accepts_a_server_and_a_client);
    RUN(register_parse_refuses_with_the_path);
    RUN(register_parse_limits);
    RUN(id_and_query_parse);
    RUN(table_versions_events_and_reaping);
    RUN(table_events_ring);
    RUN(table_full);
    RUN(server_fields_and_cluster_parse);
    RUN(member_options_checked);
    RUN(live_monitor);
    RUN(member_waits_for_the_monitor);
    return TEST_SUMMARY();
}
