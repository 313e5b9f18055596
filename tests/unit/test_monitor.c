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
#include "eaas/monitor_load.h"
#include "eaas/monitor_table.h"
#include "eaas/replicas.h"
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

/* ---- replicas of hot experts: messages, table, load ------------------------------------ */

TEST(heartbeat_parse_accepts_load_and_replicas) {
    ea_mon_heartbeat h;
    const char *b = "{\"id\":\"c1\"}";
    CHECK_EQ(ea_mon_heartbeat_parse(b, strlen(b), &h), EA_OK);
    CHECK(!strcmp(h.id, "c1") && h.n_load == 0 && h.load == NULL && !h.has_replicas && h.replicas == NULL);
    ea_mon_heartbeat_free(&h);
    b = "{\"id\":\"c1\",\"load\":[[0,1,5],[3,1000000,1000000000],[0,1,2]],\"replicas\":[[2,3],[0,1000000]],\"x\":1}";
    CHECK_EQ(ea_mon_heartbeat_parse(b, strlen(b), &h), EA_OK);
    CHECK_EQ(h.n_load, 3);
    CHECK(h.load[1].layer == 3 && h.load[1].expert == 1000000 && h.load[1].pairs == 1000000000);
    CHECK(h.load[2].layer == 0 && h.load[2].expert == 1 && h.load[2].pairs == 2); /* a pair again: kept, summed later */
    CHECK(h.has_replicas && h.n_replicas == 2);
    CHECK(h.replicas[0].layer == 2 && h.replicas[0].expert == 3 && h.replicas[1].expert == 1000000); /* as received */
    ea_mon_heartbeat_free(&h);
    CHECK(h.load == NULL && h.replicas == NULL);
    b = "{\"id\":\"s1\",\"load\":[],\"replicas\":[]}"; /* "none" */
    CHECK_EQ(ea_mon_heartbeat_parse(b, strlen(b), &h), EA_OK);
    CHECK(h.has_replicas && h.n_replicas == 0 && h.n_load == 0);
    ea_mon_heartbeat_free(&h);
}

TEST(heartbeat_parse_refuses_with_the_path) {
    static const struct {
        const char *body, *says;
        ea_status st;
    } cases[] = {
        {"{\"load\":[]}", "id: missing", EA_ERR_FORMAT},
        {"{\"id\":\"c\",\"load\":{}}", "load: expected an array", EA_ERR_FORMAT},
        {"{\"id\":\"c\",\"load\":null}", "load: expected an array", EA_ERR_FORMAT},
        {"{\"id\":\"c\",\"load\":[[0,1]]}", "load[0]: expected [layer, expert, pairs]", EA_ERR_FORMAT},
        {"{\"id\":\"c\",\"load\":[7]}", "load[0]: expected [layer, expert, pairs]", EA_ERR_FORMAT},
        {"{\"id\":\"c\",\"load\":[[0,1,5],[0,1,2],[0,1,5],[0,2,0]]}", "load[3][2]: 0 < 1", EA_ERR_RANGE},
        {"{\"id\":\"c\",\"load\":[[0,1,1000000001]]}", "load[0][2]: 1000000001 > 1000000000", EA_ERR_RANGE},
        {"{\"id\":\"c\",\"load\":[[-1,1,1]]}", "load[0][0]: -1 < 0", EA_ERR_RANGE},
        {"{\"id\":\"c\",\"load\":[[0,1000001,1]]}", "load[0][1]: 1000001 > 1000000", EA_ERR_RANGE},
        {"{\"id\":\"c\",\"load\":[[0,1.5,1]]}", "load[0][1]: expected an integer", EA_ERR_FORMAT},
        {"{\"id\":\"c\",\"load\":[[0,1,\"3\"]]}", "load[0][2]: expected an integer", EA_ERR_FORMAT},
        {"{\"id\":\"s\",\"replicas\":{}}", "replicas: expected an array", EA_ERR_FORMAT},
        {"{\"id\":\"s\",\"replicas\":[[0]]}", "replicas[0]: expected [layer, expert]", EA_ERR_FORMAT},
        {"{\"id\":\"s\",\"replicas\":[[0,1],[0,-1]]}", "replicas[1][1]: -1 < 0", EA_ERR_RANGE},
        {"{\"id\":\"s\",\"replicas\":[[1000001,0]]}", "replicas[0][0]: 1000001 > 1000000", EA_ERR_RANGE},
        {"{\"id\":\"s\",\"replicas\":[[0,true]]}", "replicas[0][1]: expected an integer", EA_ERR_FORMAT},
        {"{\"id\":\"s\",\"replicas\":[[0,1],[2,3],[4,5],[2,3]]}", "replicas[3]: [2, 3] is also replicas[1]", EA_ERR_RANGE},
        {"{\"id\":\"s\",\"load\":[[0,1,1]],\"replicas\":[[5,5],[5,5]]}", "replicas[1]: [5, 5] is also replicas[0]", EA_ERR_RANGE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ea_mon_heartbeat h;
        ea_status s = ea_mon_heartbeat_parse(cases[i].body, strlen(cases[i].body), &h);
        if (s != cases[i].st || !strstr(ea_errmsg(), cases[i].says))
            FAIL_("case %zu: status %s, message '%s', expected '%s'", i, ea_status_name(s), ea_errmsg(), cases[i].says);
        CHECK(h.load == NULL && h.replicas == NULL && h.n_load == 0);
    }
}

/* EA_MON_LOAD_MAX triples and EA_MON_REPLICAS_MAX pairs pass; one more does not. */
TEST(heartbeat_parse_limits) {
    size_t cap = (size_t)EA_MON_LOAD_MAX * 24 + 64;
    char *body = ea_malloc(cap);
    CHECK(body != NULL);
    for (int n = EA_MON_LOAD_MAX; n <= EA_MON_LOAD_MAX + 1; n++) {
        size_t o = (size_t)snprintf(body, cap, "{\"id\":\"c\",\"load\":[");
        for (int i = 0; i < n; i++) o += (size_t)snprintf(body + o, cap - o, "%s[%d,%d,1]", i ? "," : "", i / 256, i % 256);
        snprintf(body + o, cap - o, "]}");
        ea_mon_heartbeat h;
        ea_status s = ea_mon_heartbeat_parse(body, strlen(body), &h);
        ea_mon_heartbeat_free(&h);
        if (s != (n == EA_MON_LOAD_MAX ? EA_OK : EA_ERR_RANGE) || (s != EA_OK && !strstr(ea_errmsg(), "load: 65537 triples")))
            FAIL_("%d triples: %s '%s'", n, ea_status_name(s), ea_errmsg());
    }
    for (int n = EA_MON_REPLICAS_MAX; n <= EA_MON_REPLICAS_MAX + 1; n++) {
        size_t o = (size_t)snprintf(body, cap, "{\"id\":\"s\",\"replicas\":[");
        for (int i = 0; i < n; i++) o += (size_t)snprintf(body + o, cap - o, "%s[%d,%d]", i ? "," : "", i / 64, i % 64 + (i == 4096));
        snprintf(body + o, cap - o, "]}");
        ea_mon_heartbeat h;
        ea_status s = ea_mon_heartbeat_parse(body, strlen(body), &h);
        CHECK(s != EA_OK || (h.n_replicas == n && h.replicas[n - 1].layer == (n - 1) / 64));
        ea_mon_heartbeat_free(&h);
        if (s != (n == EA_MON_REPLICAS_MAX ? EA_OK : EA_ERR_RANGE) || (s != EA_OK && !strstr(ea_errmsg(), "replicas: 4097 pairs")))
            FAIL_("%d pairs: %s '%s'", n, ea_status_name(s), ea_errmsg());
    }
    ea_free(body);
}

TEST(register_replica_slots) {
    static const struct {
        const char *slots; /* the value's JSON text; NULL: absent */
        ea_status st;
        int want;
        const char *says;
    } cases[] = {{NULL, EA_OK, 0, ""},
                 {"0", EA_OK, 0, ""},
                 {"4096", EA_OK, 4096, ""},
                 {"-1", EA_ERR_RANGE, 0, "replica_slots: -1 < 0"},
                 {"4097", EA_ERR_RANGE, 0, "replica_slots: 4097 > 4096"},
                 {"\"2\"", EA_ERR_FORMAT, 0, "replica_slots: expected an integer"},
                 {"2.0", EA_ERR_FORMAT, 0, "replica_slots: expected an integer"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"role\":\"server\",\"id\":\"s\",\"ucx\":\"AA==\",\"http\":\"h:1\",%s%s%s"
                 "\"hosted\":{\"layers\":[[0,1]],\"experts\":[[0,1]]}}",
                 cases[i].slots ? "\"replica_slots\":" : "", cases[i].slots ? cases[i].slots : "", cases[i].slots ? "," : "");
        ea_mon_register r;
        ea_status s = ea_mon_register_parse(body, strlen(body), &r);
        if (s != cases[i].st || (s == EA_OK && r.replica_slots != cases[i].want) || !strstr(ea_errmsg(), cases[i].says))
            FAIL_("case %zu: %s '%s'", i, ea_status_name(s), ea_errmsg());
        CHECK(s == EA_OK || (r.ucx == NULL && r.layers == NULL));
        ea_mon_register_free(&r);
    }
    /* the member's builder: emitted when not 0, refused past the limits */
    uint8_t addr[2] = {1, 2};
    ea_range l = {0, 1};
    char *f = ea_member_server_fields(addr, 2, "h:1", &l, 1, &l, 1, 5);
    CHECK(f && strstr(f, "\"replica_slots\":5"));
    ea_free(f);
    f = ea_member_server_fields(addr, 2, "h:1", &l, 1, &l, 1, 0);
    CHECK(f && !strstr(f, "replica_slots"));
    ea_free(f);
    CHECK(ea_member_server_fields(addr, 2, "h:1", &l, 1, &l, 1, EA_MON_REPLICAS_MAX + 1) == NULL);
    CHECK(strstr(ea_errmsg(), "replica_slots: 4097 > 4096"));
    CHECK(ea_member_server_fields(addr, 2, "h:1", &l, 1, &l, 1, -1) == NULL);
}

static const char rep_server[] = "{\"role\":\"server\",\"id\":\"r1\",\"ucx\":\"AAECAw==\",\"http\":\"127.0.0.1:9001\","
                                 "\"replica_slots\":3,\"hosted\":{\"layers\":[[0,3]],\"experts\":[[0,7]]}}";

/* The kinds of the events after version `after`, e.g. "register,hosted". */
static const char *event_kinds(const ea_mon_table *t, uint64_t after) {
    static char buf[512];
    ea_cluster c;
    size_t o = 0;
    buf[0] = 0;
    render(t, 1, after, &c);
    for (int i = 0; i < c.n_events && o < 400; i++)
        o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", i ? "," : "", ea_mon_event_name(c.events[i].kind));
    ea_cluster_free(&c);
    return buf;
}

/* A server's heartbeat "replicas": one hosted event when the set changes, none when it does not. */
TEST(table_replicas_from_heartbeats) {
    ea_mon_table *t;
    CHECK_EQ(ea_mon_table_create(3, &t), EA_OK);
    reg(t, rep_server, 0);
    reg(t, "{\"role\":\"client\",\"id\":\"c1\"}", 0);
    uint64_t v0 = ea_mon_table_version(t);
    ea_mon_role role = EA_MON_CLIENT;
    CHECK_EQ(hb_role(t, "{\"id\":\"r1\",\"replicas\":[[5,2],[0,9]]}", 1, &role), EA_OK);
    CHECK_EQ(role, EA_MON_SERVER);
    CHECK_EQ(ea_mon_table_version(t), v0 + 1);
    CHECK_EQ(hb(t, "{\"id\":\"r1\",\"replicas\":[[0,9],[5,2]]}", 2), EA_OK); /* the same set */
    CHECK_EQ(hb(t, "{\"id\":\"r1\"}", 3), EA_OK);                             /* absent: no change */
    CHECK_EQ(hb(t, "{\"id\":\"r1\",\"load\":[[0,1,5]]}", 3), EA_OK);          /* a server's load: ignored */
    CHECK_EQ(ea_mon_table_version(t), v0 + 1);
    CHECK_STREQ(event_kinds(t, v0), "hosted");
    ea_cluster c;
    render(t, 0, 0, &c);
    CHECK(c.n_servers == 1 && c.servers[0].replica_slots == 3 && c.servers[0].n_replicas == 2 && !c.servers[0].has_assigned);
    CHECK(c.servers[0].replicas[0].layer == 0 && c.servers[0].replicas[0].expert == 9); /* sorted */
    CHECK(c.servers[0].replicas[1].layer == 5 && c.servers[0].replicas[1].expert == 2);
    CHECK(ea_cluster_hosts(&c.servers[0], 0, 9) && ea_cluster_hosts(&c.servers[0], 5, 2)); /* outside its ranges */
    CHECK(ea_cluster_hosts(&c.servers[0], 3, 7) && !ea_cluster_hosts(&c.servers[0], 5, 3) && !ea_cluster_hosts(&c.servers[0], 0, 8));
    ea_cluster_free(&c);
    CHECK_EQ(hb(t, "{\"id\":\"r1\",\"replicas\":[]}", 4), EA_OK); /* now none: a change */
    CHECK_STREQ(event_kinds(t, v0), "hosted,hosted");
    uint64_t v1 = ea_mon_table_version(t);
    CHECK_EQ(hb_role(t, "{\"id\":\"c1\",\"replicas\":[[1,1]]}", 4, &role), EA_OK); /* a client's: ignored */
    CHECK_EQ(role, EA_MON_CLIENT);
    /* more than its slots: refused, nothing changes, not even the time of its last heartbeat */
    CHECK_EQ(hb(t, "{\"id\":\"r1\",\"replicas\":[[5,2],[0,9],[6,0],[6,1]]}", 5), EA_ERR_RANGE);
    CHECK(strstr(ea_errmsg(), "replicas: 4 pairs, more than replica_slots 3"));
    CHECK_EQ(ea_mon_table_version(t), v1);
    CHECK_EQ(ea_mon_table_reap(t, 7, 2), 2); /* r1's last heartbeat is 4, not 5 */
    ea_mon_table_destroy(t);
}

/* The plan's path through the table: input, assign (one assign event per server that
 * changed), a registration again keeps nothing, a dead server's plan is cleared. */
TEST(table_plan_assign_and_render) {
    ea_mon_table *t;
    CHECK_EQ(ea_mon_table_create(3, &t), EA_OK);
    reg(t, "{\"role\":\"server\",\"id\":\"a\",\"ucx\":\"AA==\",\"http\":\"h:1\",\"replica_slots\":2,"
           "\"hosted\":{\"layers\":[[0,0]],\"experts\":[[0,3]]}}", 0);
    reg(t, "{\"role\":\"client\",\"id\":\"c\"}", 0);
    reg(t, "{\"role\":\"server\",\"id\":\"b\",\"ucx\":\"AA==\",\"http\":\"h:2\",\"replica_slots\":2,"
           "\"hosted\":{\"layers\":[[0,0]],\"experts\":[[4,7]]}}", 0);
    ea_mon_plan_input in;
    CHECK_EQ(ea_mon_table_plan_input(t, &in), EA_OK);
    CHECK(in.n == 2 && in.n_slotted == 2 && !strcmp(in.id[1], "b") && in.s[1].experts[0].a == 4 && !in.s[0].has_current);
    ea_replicas_load load[8] = {{0, 0, 1}, {0, 1, 10}, {0, 2, 1}, {0, 3, 1}, {0, 4, 1}, {0, 5, 1}, {0, 6, 1}, {0, 7, 1}};
    ea_replicas_result r;
    CHECK_EQ(ea_replicas_plan(in.s, in.n, load, 8, 0.1, &r), EA_OK);
    uint64_t v0 = ea_mon_table_version(t);
    int n_changed = -1;
    CHECK_EQ(ea_mon_table_assign(t, &in, r.plan, &n_changed), EA_OK);
    CHECK_EQ(n_changed, 2);
    CHECK_STREQ(event_kinds(t, v0), "assign,assign");
    CHECK_EQ(ea_mon_table_assign(t, &in, r.plan, &n_changed), EA_OK); /* the same again: no change */
    CHECK_EQ(n_changed, 0);
    CHECK_EQ(ea_mon_table_version(t), v0 + 2);
    ea_mon_counts cnt;
    ea_mon_table_counts(t, &cnt);
    CHECK_EQ(cnt.replicas_assigned, 2);
    ea_cluster c;
    render(t, 0, 0, &c);
    CHECK(c.servers[0].has_assigned && c.servers[0].n_assigned == 1 && c.servers[0].assigned[0].expert == 4);
    CHECK(c.servers[1].has_assigned && c.servers[1].n_assigned == 1 && c.servers[1].assigned[0].expert == 1);
    CHECK(c.servers[1].replica_slots == 2 && c.servers[1].n_replicas == 0 && c.servers[1].replicas == NULL);
    CHECK(!ea_cluster_hosts(&c.servers[1], 0, 1)); /* assigned is not hosted: only replicas count */
    ea_cluster_free(&c);
    /* the next plan sees it as current: the same load changes nothing */
    ea_replicas_result_free(&r);
    ea_mon_plan_input_free(&in);
    CHECK_EQ(ea_mon_table_plan_input(t, &in), EA_OK);
    CHECK(in.s[0].has_current && in.s[0].n_current == 1 && in.s[0].current[0].expert == 4);
    CHECK_EQ(ea_replicas_plan(in.s, in.n, load, 8, 0.1, &r), EA_OK);
    CHECK(!r.changed);
    ea_replicas_result_free(&r);
    /* an assignment for an incarnation that is gone is not applied */
    reg(t, "{\"role\":\"server\",\"id\":\"b\",\"ucx\":\"AA==\",\"http\":\"h:2\",\"replica_slots\":2,"
           "\"hosted\":{\"layers\":[[0,0]],\"experts\":[[4,7]]}}", 1);
    CHECK_EQ(hb(t, "{\"id\":\"b\",\"replicas\":[[0,1]]}", 1), EA_OK);
    ea_replicas_assign none[2] = {{1, NULL, 0}, {1, NULL, 0}};
    CHECK_EQ(ea_mon_table_assign(t, &in, none, &n_changed), EA_OK);
    CHECK_EQ(n_changed, 1); /* a only */
    ea_mon_plan_input_free(&in);
    render(t, 0, 0, &c);
    CHECK(c.servers[0].has_assigned && c.servers[0].n_assigned == 0); /* "assigned": [] */
    CHECK(!c.servers[1].has_assigned && c.servers[1].n_replicas == 1); /* registered again: no plan, its new replicas */
    ea_cluster_free(&c);
    /* b dies: the next plan clears its plan and a (2 slots) takes b's pairs, now unhosted */
    ea_replicas_assign plan_b[2] = {{1, NULL, 0}, {1, (ea_mon_pair[]){{0, 0}}, 1}};
    CHECK_EQ(ea_mon_table_plan_input(t, &in), EA_OK);
    CHECK_EQ(ea_mon_table_assign(t, &in, plan_b, &n_changed), EA_OK);
    ea_mon_plan_input_free(&in);
    CHECK_EQ(hb(t, "a", 10), EA_OK);
    CHECK_EQ(hb(t, "c", 10), EA_OK);
    CHECK_EQ(ea_mon_table_reap(t, 10, 5), 1);
    CHECK_EQ(ea_mon_table_plan_input(t, &in), EA_OK);
    CHECK(in.n == 2 && !in.s[1].live && in.s[1].has_current && in.n_slotted == 1);
    CHECK_EQ(ea_replicas_plan(in.s, in.n, load, 8, 0.1, &r), EA_OK);
    CHECK(r.changed && !r.current_valid && !r.plan[1].has);
    CHECK_EQ(r.plan[0].n, 2);
    CHECK(r.plan[0].pairs[0].expert == 4 && r.plan[0].pairs[1].expert == 5); /* the heaviest unhosted; ties: lower expert */
    v0 = ea_mon_table_version(t);
    CHECK_EQ(ea_mon_table_assign(t, &in, r.plan, &n_changed), EA_OK);
    CHECK_EQ(n_changed, 2);
    CHECK_STREQ(event_kinds(t, v0), "assign,assign");
    render(t, 0, 0, &c);
    CHECK(c.servers[0].n_assigned == 2 && !c.servers[1].has_assigned && !c.servers[1].live);
    ea_cluster_free(&c);
    ea_replicas_result_free(&r);
    ea_mon_plan_input_free(&in);
    ea_mon_table_destroy(t);
}

/* What a member reads: replica fields, the new event kinds, and the same checks as the monitor's. */
TEST(cluster_parse_replica_fields) {
    const char *ok = "{\"epoch\":\"0000000000000001\",\"version\":5,\"clients\":[],\"servers\":[{\"id\":\"s\",\"state\":"
                     "\"live\",\"since\":2,\"ucx\":\"AA==\",\"http\":\"h:1\",\"hosted\":{\"layers\":[[0,1]],\"experts\":[[0,1]]},"
                     "\"replica_slots\":2,\"replicas\":[[3,4]],\"assigned\":[]}],\"events\":[{\"version\":4,\"kind\":"
                     "\"hosted\",\"role\":\"server\",\"id\":\"s\"},{\"version\":5,\"kind\":\"assign\",\"role\":\"server\","
                     "\"id\":\"s\"}]}";
    ea_cluster c;
    CHECK_EQ(ea_cluster_parse(ok, strlen(ok), &c), EA_OK);
    CHECK(c.servers[0].replica_slots == 2 && c.servers[0].n_replicas == 1 && c.servers[0].has_assigned &&
          c.servers[0].n_assigned == 0);
    CHECK(c.n_events == 2 && c.events[0].kind == EA_MON_EV_HOSTED && c.events[1].kind == EA_MON_EV_ASSIGN);
    CHECK(ea_cluster_hosts(&c.servers[0], 3, 4));
    ea_cluster_free(&c);
    /* an older monitor's entry (no replica fields) still parses: no slots, no replicas, no plan */
    const char *old = "{\"epoch\":\"0000000000000001\",\"version\":2,\"clients\":[],\"servers\":[{\"id\":\"s\",\"state\":"
                      "\"live\",\"since\":2,\"ucx\":\"AA==\",\"http\":\"h:1\",\"hosted\":{\"layers\":[[0,1]],\"experts\":[[0,1]]}}]}";
    CHECK_EQ(ea_cluster_parse(old, strlen(old), &c), EA_OK);
    CHECK(c.servers[0].replica_slots == 0 && c.servers[0].n_replicas == 0 && !c.servers[0].has_assigned);
    ea_cluster_free(&c);
    static const struct {
        const char *fields, *says;
    } bad[] = {
        {"\"replica_slots\":1,\"replicas\":[[3,4],[3,5]]", "servers[0].replicas: 2 pairs, more than replica_slots 1"},
        {"\"replicas\":[[3,4]]", "servers[0].replicas: 1 pairs, more than replica_slots 0"},
        {"\"replica_slots\":2,\"assigned\":[[3,4],[3,4]]", "servers[0].assigned[1]: [3, 4] is also servers[0].assigned[0]"},
        {"\"replica_slots\":2,\"assigned\":[[3,-4]]", "servers[0].assigned[0][1]: -4 < 0"},
        {"\"replica_slots\":-2", "servers[0].replica_slots: -2 < 0"},
        {"\"replica_slots\":2,\"replicas\":\"none\"", "servers[0].replicas: expected an array"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[1024];
        snprintf(body, sizeof body,
                 "{\"epoch\":\"0000000000000001\",\"version\":2,\"clients\":[],\"servers\":[{\"id\":\"s\",\"state\":"
                 "\"live\",\"since\":2,\"ucx\":\"AA==\",\"http\":\"h:1\",\"hosted\":{\"layers\":[[0,1]],\"experts\":"
                 "[[0,1]]},%s}]}",
                 bad[i].fields);
        ea_status s = ea_cluster_parse(body, strlen(body), &c);
        if (s == EA_OK || !strstr(ea_errmsg(), bad[i].says)) FAIL_("case %zu: %s '%s'", i, ea_status_name(s), ea_errmsg());
        CHECK(c.servers == NULL);
    }
    const char *kind = "{\"epoch\":\"0000000000000001\",\"version\":2,\"clients\":[],\"servers\":[],\"events\":[{\"version\":"
                       "2,\"kind\":\"moved\",\"role\":\"server\",\"id\":\"s\"}]}";
    CHECK_EQ(ea_cluster_parse(kind, strlen(kind), &c), EA_ERR_RANGE);
    CHECK(strstr(ea_errmsg(), "events[0].kind: 'moved'"));
    CHECK_STREQ(ea_mon_event_name(EA_MON_EV_HOSTED), "hosted");
    CHECK_STREQ(ea_mon_event_name(EA_MON_EV_ASSIGN), "assign");
}

/* The load sum: exact decay, duplicates summed, forgetting, the bound, sorted output. */
TEST(load_sum_decay_and_bound) {
    ea_mon_loadsum *s;
    CHECK_EQ(ea_mon_loadsum_create(3, &s), EA_OK);
    ea_mon_load a[3] = {{2, 0, 8}, {0, 5, 3}, {2, 0, 8}};
    CHECK_EQ(ea_mon_loadsum_add(s, a, 3), 0);
    ea_replicas_load *l;
    int n;
    CHECK_EQ(ea_mon_loadsum_tick(s, 0.5, &l, &n), EA_OK);
    CHECK(n == 2 && l[0].layer == 0 && l[0].expert == 5 && l[0].load == 3 && l[1].layer == 2 && l[1].load == 16);
    ea_free(l);
    ea_mon_load b[1] = {{0, 5, 1}};
    CHECK_EQ(ea_mon_loadsum_add(s, b, 1), 0);
    CHECK_EQ(ea_mon_loadsum_tick(s, 0.5, &l, &n), EA_OK); /* (0,5): 1.5 + 1; (2,0): 8 */
    CHECK(n == 2 && l[0].load == 2.5 && l[1].load == 8);
    ea_free(l);
    ea_mon_load c[3] = {{1, 1, 1}, {1, 2, 1}, {0, 5, 4}}; /* room for one new pair: (1,2) is ignored */
    CHECK_EQ(ea_mon_loadsum_add(s, c, 3), 1);
    ea_mon_loadsum_stats st;
    ea_mon_loadsum_get_stats(s, &st);
    CHECK(st.pairs_total == 26 && st.triples_ignored == 1 && st.n_pairs == 3);
    CHECK_EQ(ea_mon_loadsum_tick(s, 0.5, &l, &n), EA_OK);
    CHECK(n == 3 && l[0].load == 5.25 && l[1].layer == 1 && l[1].load == 1 && l[2].load == 4);
    ea_free(l);
    /* silent: (1,1) at 1 falls below 0.01 after 7 halvings (1/128), (2,0) at 4 after 9 */
    int ticks = 0;
    do {
        CHECK_EQ(ea_mon_loadsum_tick(s, 0.5, &l, &n), EA_OK);
        ea_free(l);
        ticks++;
    } while (n > 0 && ticks < 50);
    CHECK_EQ(ticks, 10); /* (0,5) at 5.25: below 0.01 after 10 */
    CHECK(l == NULL);
    ea_mon_load d[3] = {{7, 7, 1}, {8, 8, 1}, {9, 9, 1}}; /* forgotten pairs free their places */
    CHECK_EQ(ea_mon_loadsum_add(s, d, 3), 0);
    ea_mon_loadsum_destroy(s);
    ea_mon_loadsum_destroy(NULL);
    /* many pairs: the hash grows past its first size and still finds every pair */
    CHECK_EQ(ea_mon_loadsum_create(5000, &s), EA_OK);
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 5000; i++) {
            ea_mon_load x = {i % 97, i, 1 + i % 3};
            CHECK_EQ(ea_mon_loadsum_add(s, &x, 1), 0);
        }
    CHECK_EQ(ea_mon_loadsum_tick(s, 0.5, &l, &n), EA_OK);
    CHECK_EQ(n, 5000);
    for (int k = 0; k < n; k++) {
        if (k && (l[k].layer < l[k - 1].layer || (l[k].layer == l[k - 1].layer && l[k].expert <= l[k - 1].expert)))
            FAIL_("not sorted at %d", k);
        if (l[k].load != 2 * (1 + l[k].expert % 3)) FAIL_("pair %d: %g", k, l[k].load);
    }
    ea_free(l);
    ea_mon_loadsum_destroy(s);
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

/* The planner of a live monitor (every 50 ms): two servers with two slots each, a client
 * reporting the load skewed to (0,1) (test_replicas.c, hand_computed_plan, x 100): the
 * table gets a's plan [(0,4)] and b's [(0,1)], one assign event each; b's heartbeat with
 * its replicas is one hosted event; too many replicas are a 400; when b leaves, a takes
 * b's pairs that are now unhosted; when a dies, its plan goes. Metrics count it all. */
TEST(live_monitor_plans_replicas) {
    ea_monitor_opts o = {.host = "127.0.0.1", .heartbeat_ms = HB_MS, .dead_after_ms = DEAD_MS, .replicate_ms = 50,
                         .replicate_min_gain = 0.1};
    ea_monitor *m = NULL;
    CHECK_EQ(ea_monitor_start(&o, &m), EA_OK);
    int port = ea_monitor_port(m);
    static const char *const srv[2] = {
        "{\"role\":\"server\",\"id\":\"a\",\"ucx\":\"AA==\",\"http\":\"h:1\",\"replica_slots\":2,"
        "\"hosted\":{\"layers\":[[0,0]],\"experts\":[[0,3]]}}",
        "{\"role\":\"server\",\"id\":\"b\",\"ucx\":\"AA==\",\"http\":\"h:2\",\"replica_slots\":2,"
        "\"hosted\":{\"layers\":[[0,0]],\"experts\":[[4,7]]}}"};
    CHECK_EQ(call(port, "POST", "/register", srv[0], NULL), 200);
    CHECK_EQ(call(port, "POST", "/register", srv[1], NULL), 200);
    CHECK_EQ(call(port, "POST", "/register", "{\"role\":\"client\",\"id\":\"c\"}", NULL), 200);
    const char *load = "{\"id\":\"c\",\"load\":[[0,0,100],[0,1,1000],[0,2,100],[0,3,100],[0,4,100],[0,5,100],[0,6,100],"
                       "[0,7,100]]}";
    ea_cluster c;
    int n_hb = 0, planned = 0;
    for (int i = 0; i < 200 && !planned; i++) {
        CHECK_EQ(call(port, "POST", "/heartbeat", load, NULL), 200);
        n_hb++;
        CHECK_EQ(call(port, "POST", "/heartbeat", "{\"id\":\"a\"}", NULL), 200);
        CHECK_EQ(call(port, "POST", "/heartbeat", "{\"id\":\"b\",\"load\":[[0,7,100000]]}", NULL), 200); /* ignored */
        CHECK(get_cluster(port, "/cluster", &c));
        planned = c.servers[0].has_assigned && c.servers[1].has_assigned;
        ea_cluster_free(&c);
        if (!planned) nap_ms(20);
    }
    CHECK(planned);
    CHECK(get_cluster(port, "/cluster?after=4", &c)); /* 2..4: the registrations */
    CHECK(c.has_events && c.n_events == 2 && c.events[0].kind == EA_MON_EV_ASSIGN && c.events[1].kind == EA_MON_EV_ASSIGN);
    CHECK(c.servers[0].n_assigned == 1 && c.servers[0].assigned[0].layer == 0 && c.servers[0].assigned[0].expert == 4);
    CHECK(c.servers[1].n_assigned == 1 && c.servers[1].assigned[0].expert == 1);
    CHECK(c.servers[0].replica_slots == 2 && c.servers[1].n_replicas == 0);
    uint64_t v = c.version;
    ea_cluster_free(&c);
    char *r = NULL, want[96];
    CHECK_EQ(call(port, "GET", "/metrics", NULL, &r), 200);
    snprintf(want, sizeof want, "eaas:monitor_load_pairs_total %d\n", n_hb * 1700);
    CHECK(r && strstr(r, want) && strstr(r, "eaas:monitor_replica_plans_total 1\n") &&
          strstr(r, "eaas:monitor_replicas_assigned 2\n") && strstr(r, "eaas:monitor_plan_balance 1.000000\n") &&
          strstr(r, "eaas:monitor_load_ignored_total 0\n"));
    ea_free(r);
    /* b loads its assignment and says so: one hosted event; the table says b hosts (0,1) */
    CHECK_EQ(call(port, "POST", "/heartbeat", "{\"id\":\"b\",\"replicas\":[[0,1]]}", NULL), 200);
    CHECK_EQ(call(port, "POST", "/heartbeat", "{\"id\":\"b\",\"replicas\":[[0,1]]}", NULL), 200);
    CHECK_EQ(call(port, "POST", "/heartbeat", "{\"id\":\"c\",\"replicas\":[[0,2]]}", NULL), 200); /* a client's: ignored */
    char path[64];
    snprintf(path, sizeof path, "/cluster?after=%llu", (unsigned long long)v);
    CHECK(get_cluster(port, path, &c));
    CHECK(c.n_events == 1 && c.events[0].kind == EA_MON_EV_HOSTED && !strcmp(c.events[0].id, "b"));
    CHECK(ea_cluster_hosts(&c.servers[1], 0, 1) && !ea_cluster_hosts(&c.servers[0], 0, 5));
    ea_cluster_free(&c);
    CHECK_EQ(call(port, "POST", "/heartbeat", "{\"id\":\"b\",\"replicas\":[[0,1],[0,2],[0,3]]}", &r), 400);
    CHECK(r && strstr(r, "more than replica_slots 2") && strstr(r, "invalid_request_error"));
    ea_free(r);
    CHECK_EQ(call(port, "POST", "/heartbeat", "{\"id\":\"b\",\"replicas\":[[0,1],[0,1]]}", &r), 400);
    CHECK(r && strstr(r, "replicas[1]: [0, 1] is also replicas[0]"));
    ea_free(r);
    /* b leaves: (0,4)..(0,7) lose their host; a's next plan takes the two heaviest (ties: lower expert) */
    CHECK_EQ(call(port, "POST", "/leave", "{\"id\":\"b\"}", NULL), 200);
    int moved = 0;
    for (int i = 0; i < 200 && !moved; i++) {
        CHECK_EQ(call(port, "POST", "/heartbeat", load, NULL), 200);
        CHECK_EQ(call(port, "POST", "/heartbeat", "{\"id\":\"a\"}", NULL), 200);
        CHECK(get_cluster(port, "/cluster", &c));
        moved = c.n_servers == 1 && c.servers[0].n_assigned == 2;
        if (moved) CHECK(c.servers[0].assigned[0].expert == 4 && c.servers[0].assigned[1].expert == 5);
        ea_cluster_free(&c);
        if (!moved) nap_ms(20);
    }
    CHECK(moved);
    CHECK_EQ(call(port, "GET", "/metrics", NULL, &r), 200);
    CHECK(r && strstr(r, "eaas:monitor_replica_plans_total 2\n") && strstr(r, "eaas:monitor_replicas_assigned 2\n"));
    ea_free(r);
    /* a stops heartbeating: dead after DEAD_MS, and the tick after that clears its plan
     * although no live server has slots left */
    int cleared = 0;
    for (int i = 0; i < 300 && !cleared; i++) {
        CHECK_EQ(call(port, "POST", "/heartbeat", load, NULL), 200);
        CHECK(get_cluster(port, "/cluster", &c));
        cleared = !c.servers[0].live && !c.servers[0].has_assigned;
        ea_cluster_free(&c);
        if (!cleared) nap_ms(25);
    }
    CHECK(cleared);
    CHECK_EQ(call(port, "GET", "/metrics", NULL, &r), 200);
    CHECK(r && strstr(r, "eaas:monitor_replica_plans_total 3\n") && strstr(r, "eaas:monitor_replicas_assigned 0\n"));
    ea_free(r);
    ea_monitor_stop(m);
    /* a min gain outside [0, 1] is refused */
    o.replicate_min_gain = 1.5;
    CHECK_EQ(ea_monitor_start(&o, &m), EA_ERR_INVALID_ARG);
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
    RUN(heartbeat_parse_accepts_load_and_replicas);
    RUN(heartbeat_parse_refuses_with_the_path);
    RUN(heartbeat_parse_limits);
    RUN(register_replica_slots);
    RUN(table_replicas_from_heartbeats);
    RUN(table_plan_assign_and_render);
    RUN(cluster_parse_replica_fields);
    RUN(load_sum_decay_and_bound);
    RUN(member_options_checked);
    RUN(live_monitor);
    RUN(live_monitor_plans_replicas);
    RUN(member_waits_for_the_monitor);
    return TEST_SUMMARY();
}
