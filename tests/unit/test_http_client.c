/*
 * test_http_client.c — eaas/http_client.h: host:port parsing, the response
 * parser on whole and partial inputs, and calls against a one-shot loopback
 * server thread that answers with canned bytes (or nothing), for the status
 * and the error of each case: refused, timed out, cancelled, chunked, too
 * large, closed early.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/util.h"
#include "eaas/http_client.h"
#include "harness.h"

TEST(hostport_parse) {
    char h[64];
    int p = 0;
    CHECK_EQ(ea_hostport_parse("127.0.0.1:8000", h, sizeof h, &p), EA_OK);
    CHECK(!strcmp(h, "127.0.0.1") && p == 8000);
    CHECK_EQ(ea_hostport_parse("[::1]:65535", h, sizeof h, &p), EA_OK);
    CHECK(!strcmp(h, "::1") && p == 65535);
    CHECK_EQ(ea_hostport_parse("localhost:1", h, sizeof h, &p), EA_OK);
    const char *bad[] = {"", "host", ":80", "h:", "h:0", "h:65536", "h:8x", "::1:80", "[::1:80", "h:123456", "[]:80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (ea_hostport_parse(bad[i], h, sizeof h, &p) != EA_ERR_INVALID_ARG) FAIL_("'%s' accepted", bad[i]);
    CHECK_EQ(ea_hostport_parse("abcdefgh:1", h, 8, &p), EA_ERR_INVALID_ARG); /* host does not fit */
}

static ea_status parse(const char *r, int eof, int *done, int *st, size_t *off, size_t *len) {
    return ea_http_response_parse(r, strlen(r), eof, done, st, off, len);
}

TEST(response_parse) {
    int done, st;
    size_t off, len;
    const char *ok = "HTTP/1.1 404 Not Found\r\nContent-Type: x\r\ncontent-length:  5 \r\n\r\nhello";
    CHECK_EQ(parse(ok, 0, &done, &st, &off, &len), EA_OK);
    CHECK(done && st == 404 && len == 5 && !memcmp(ok + off, "hello", 5));
    /* every shorter prefix needs more, or is an error once the peer closed */
    for (size_t n = 0; n < strlen(ok); n++) {
        CHECK_EQ(ea_http_response_parse(ok, n, 0, &done, &st, &off, &len), EA_OK);
        CHECK(!done);
        CHECK_EQ(ea_http_response_parse(ok, n, 1, &done, &st, &off, &len), EA_ERR_IO);
    }
    CHECK_EQ(parse("HTTP/1.0 200 OK\r\n\r\nto the end", 0, &done, &st, &off, &len), EA_OK);
    CHECK(!done); /* no Content-Length: until EOF */
    CHECK_EQ(parse("HTTP/1.0 200 OK\r\n\r\nto the end", 1, &done, &st, &off, &len), EA_OK);
    CHECK(done && len == 10);
    CHECK_EQ(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 0, &done, &st, &off, &len),
             EA_ERR_UNSUPPORTED);
    CHECK_EQ(parse("HTTP/1.1 200 OK\r\nContent-Length: 16777217\r\n\r\n", 0, &done, &st, &off, &len), EA_ERR_RANGE);
    CHECK_EQ(parse("HTTP/1.1 200 OK\r\nContent-Length: 16777216\r\n\r\n", 0, &done, &st, &off, &len), EA_OK);
    CHECK_EQ(parse("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0, &done, &st, &off, &len), EA_ERR_FORMAT);
    CHECK_EQ(parse("HTTP/1.1 2x0 OK\r\n\r\n", 0, &done, &st, &off, &len), EA_ERR_FORMAT);
    CHECK_EQ(parse("SSH-2.0-OpenSSH\r\n\r\n", 0, &done, &st, &off, &len), EA_ERR_FORMAT);
}

/* ---- a one-shot server: accept one connection, read the request, answer `reply` ---------- */

typedef struct {
    int lfd, port;
    const char *reply; /* NULL: say nothing, hold the connection for hold_ms */
    size_t reply_len;  /* 0: strlen(reply) */
    int hold_ms;
    char got[2048];    /* the request as received */
    double call_s;     /* how long the call took */
} server;

static void nap_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *serve_once(void *arg) {
    server *s = arg;
    int c = accept(s->lfd, NULL, NULL);
    if (c < 0) return NULL;
    struct timeval tv = {0, 200000};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    size_t have = 0;
    ssize_t n;
    while (have < sizeof s->got - 1 && (n = recv(c, s->got + have, sizeof s->got - 1 - have, 0)) > 0) {
        have += (size_t)n;
        s->got[have] = 0;
        const char *end = strstr(s->got, "\r\n\r\n"), *cl = strstr(s->got, "Content-Length: ");
        if (end && (!cl || strlen(end + 4) >= strtoul(cl + 16, NULL, 10))) break; /* the whole request */
    }
    if (s->reply) {
        size_t len = s->reply_len ? s->reply_len : strlen(s->reply);
        for (size_t o = 0; o < len;) {
            ssize_t w = send(c, s->reply + o, len - o, MSG_NOSIGNAL);
            if (w <= 0) break;
            o += (size_t)w;
        }
    } else {
        nap_ms(s->hold_ms);
    }
    close(c);
    return NULL;
}

static int listen_any(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    socklen_t al = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 4) != 0) return -1;
    getsockname(fd, (struct sockaddr *)&a, &al);
    *port = ntohs(a.sin_port);
    return fd;
}

/* One call against a server answering `reply`. OUT: status, body. */
static ea_status one_call(server *s, const char *body, int timeout_ms, int cancel_fd, int *st, char **out) {
    s->lfd = listen_any(&s->port);
    pthread_t th;
    pthread_create(&th, NULL, serve_once, s);
    char hp[32];
    snprintf(hp, sizeof hp, "127.0.0.1:%d", s->port);
    double t0 = ea_now_s();
    ea_status r = ea_http_call_cancel(hp, body ? "POST" : "GET", "/x?y=1", body, timeout_ms, cancel_fd, st, out);
    s->call_s = ea_now_s() - t0;
    pthread_join(th, NULL);
    close(s->lfd);
    return r;
}

TEST(call_ok_and_request_bytes) {
    server s = {.reply = "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}"};
    int st = 0;
    char *b = NULL;
    CHECK_EQ(one_call(&s, "{\"a\":1}", 2000, -1, &st, &b), EA_OK);
    CHECK(st == 201 && b && !strcmp(b, "{}"));
    ea_free(b);
    CHECK(!strncmp(s.got, "POST /x?y=1 HTTP/1.1\r\n", 22));
    CHECK(strstr(s.got, "\r\nConnection: close\r\n") && strstr(s.got, "\r\nContent-Length: 7\r\n\r\n{\"a\":1}"));
    CHECK(strstr(s.got, "\r\nHost: 127.0.0.1:"));
}

TEST(call_errors) {
    int st = -7;
    char *b = NULL;
    server silent = {.hold_ms = 600};
    CHECK_EQ(one_call(&silent, NULL, 200, -1, &st, &b), EA_ERR_TIMEOUT);
    CHECK(silent.call_s >= 0.19 && silent.call_s < 0.55); /* the deadline, not the server, ended the call */
    CHECK(strstr(ea_errmsg(), "GET 127.0.0.1:") && strstr(ea_errmsg(), "deadline 200 ms"));
    server chunked = {.reply = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"};
    CHECK_EQ(one_call(&chunked, NULL, 2000, -1, &st, &b), EA_ERR_UNSUPPORTED);
    server huge = {.reply = "HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\n"};
    CHECK_EQ(one_call(&huge, NULL, 2000, -1, &st, &b), EA_ERR_RANGE);
    server cut = {.reply = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"};
    CHECK_EQ(one_call(&cut, NULL, 2000, -1, &st, &b), EA_ERR_IO);
    CHECK(st == -7 && b == NULL); /* untouched on errors */
    int p;
    int fd = listen_any(&p); /* bound, then closed: nobody listens there */
    close(fd);
    char hp[32];
    snprintf(hp, sizeof hp, "127.0.0.1:%d", p);
    CHECK_EQ(ea_http_call(hp, "GET", "/", NULL, 1000, &st, &b), EA_ERR_UNAVAILABLE);
    CHECK_EQ(ea_http_call(hp, "GET", "/", NULL, 0, &st, &b), EA_ERR_INVALID_ARG);
    CHECK_EQ(ea_http_call("no-port", "GET", "/", NULL, 1000, &st, &b), EA_ERR_INVALID_ARG);
}

TEST(call_cancelled) {
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    CHECK(write(pfd[1], "x", 1) == 1);
    server silent = {.hold_ms = 300};
    int st;
    char *b = NULL;
    CHECK_EQ(one_call(&silent, NULL, 5000, pfd[0], &st, &b), EA_ERR_CANCELLED);
    CHECK(silent.call_s < 0.25); /* at once, not after the server's 300 ms or the 5 s deadline */
    close(pfd[0]);
    close(pfd[1]);
}

int main(void) {
    RUN(hostport_parse);
    RUN(response_parse);
    RUN(call_ok_and_request_bytes);
    RUN(call_errors);
    RUN(call_cancelled);
    return TEST_SUMMARY();
}
