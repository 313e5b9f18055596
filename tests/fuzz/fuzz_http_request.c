/*
 * fuzz_http_request.c — raw bytes from a client on the API port: the server's
 * HTTP/1.1 request handling as it runs (serve/http.c on libmicrohttpd, one
 * thread per connection, on a loopback port of this process).
 *
 * Why a socket and not a parser function: the request line, headers,
 * Content-Length / chunked bodies and keep-alive pipelining are parsed by
 * libmicrohttpd, not by us; what is ours is what http.c does with them (the
 * Content-Length refusal before the body is read, the body cap for chunked
 * bodies, routing, the API key, CORS preflight, the extra endpoints, error
 * bodies). Fuzzing the two together is the only way to check our code sees
 * what a client can really send. The server is not "ready" (no model): the
 * generation endpoints answer 503 before their body is parsed, which
 * fuzz_openai_request covers.
 *
 * Input: the bytes one client sends on one connection (any number of
 * pipelined requests), then it closes its sending side and reads until the
 * server closes (3 s at most). Properties beyond "no crash, no leak, no UB in
 * our callbacks" (libmicrohttpd itself is not instrumented):
 *   - the server answers or closes within the deadline (no hang);
 *   - what it sends is a sequence of whole HTTP/1.1 responses, each framed by
 *     its Content-Length or chunked encoding, none cut off;
 *   - 401 says WWW-Authenticate: Bearer; a 413 of ours closes the connection;
 *     a JSON body parses, and an error status carries {"error": {"message"}}
 *     (/health's 503: {"status": why});
 *   - afterwards a fresh connection still gets /health (503 "loading").
 */
#define _GNU_SOURCE /* memmem */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "serve/http.h"
#include "serve/metrics.h"

static void check(int ok, const char *what, const char *got, size_t n) {
    if (!ok) {
        fprintf(stderr, "fuzz_http_request: %s\n--- received (%zu bytes) ---\n%.*s\n", what, n, (int)(n < 2000 ? n : 2000),
                got ? got : "");
        abort();
    }
}

/* /ext/... is the caller's endpoint (as /eplb/ is in the real server): its body names the path. */
static int ext_handle(void *ctx, const char *method, const char *url, int *status, const char **ctype, ea_sbuf *out) {
    (void)ctx;
    if (strncmp(url, "/ext/", 5) != 0) return 0;
    *status = 200;
    *ctype = "application/json";
    json_t *o = json_pack("{s:s,s:s}", "method", method, "url", url);
    ea_sbuf_json(out, o);
    json_decref(o);
    return 1;
}

static int server_port(void) {
    static ea_http *h;
    static ea_metrics *m;
    static const ea_http_ext ext = {NULL, ext_handle, NULL};
    if (h) return ea_http_port(h);
    signal(SIGPIPE, SIG_IGN);
    ea_log_set_level(EA_LOG_ERROR);
    ea_http_opts o = {.host = "127.0.0.1", .api_key = "sk-fuzz", .served_model = "m", .version = "v",
                      .commit = "c", .allowed_origins = "http://a.example, http://b.example",
                      .max_body_bytes = 1024, .stall_seconds = 30, .max_connections = 64, .idle_timeout_s = 2};
    if (ea_metrics_create(&m) != EA_OK || ea_http_start(&o, m, &h) != EA_OK) {
        fprintf(stderr, "fuzz_http_request: no server: %s\n", ea_errmsg());
        abort();
    }
    ea_http_set_ext(h, &ext);
    return ea_http_port(h);
}

static int dial(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Send data, close the sending side, read until the server closes (*how: 0 closed,
 * 1 reset: data it sent may be lost, 2 no close within 3 s). */
static char *exchange(int port, const void *data, size_t n, size_t *got, int *how) {
    int fd = dial(port);
    check(fd >= 0, "cannot connect: the server is gone", NULL, 0);
    for (size_t off = 0; off < n;) {
        ssize_t k = send(fd, (const char *)data + off, n - off, MSG_NOSIGNAL);
        if (k <= 0) break; /* the server may close early (a 413, a malformed request) */
        off += (size_t)k;
    }
    shutdown(fd, SHUT_WR);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    check(buf != NULL, "no memory", NULL, 0);
    double t_end = ea_now_s() + 3;
    *how = 0;
    for (;;) {
        if (len == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            check(nb != NULL, "no memory", NULL, 0);
            buf = nb, cap *= 2;
        }
        ssize_t k = recv(fd, buf + len, cap - len, 0);
        if (k > 0) len += (size_t)k;
        else if (k == 0) break;
        else if (errno == ECONNRESET) {
            *how = 1;
            break;
        } else if (errno != EINTR || ea_now_s() >= t_end) {
            *how = 2;
            break;
        }
    }
    close(fd);
    buf[len] = 0;
    *got = len;
    return buf;
}

/* The value of header name in the header block h[0..n), or NULL; *vn its length. */
static const char *header(const char *h, size_t n, const char *name, size_t *vn) {
    size_t nl = strlen(name);
    for (const char *p = h, *end = h + n; p < end;) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        if ((size_t)(eol - p) > nl + 1 && !strncasecmp(p, name, nl) && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (v < eol && *v == ' ') v++;
            *vn = (size_t)(eol - v) - (eol > v && eol[-1] == '\r');
            return v;
        }
        p = eol + 1;
    }
    return NULL;
}

/* The chunked body at b[0..n): its length including the terminator, or 0 if cut. */
static size_t chunked_len(const char *b, size_t n) {
    size_t at = 0;
    for (;;) {
        const char *eol = memchr(b + at, '\n', n - at);
        if (!eol) return 0;
        unsigned long sz = strtoul(b + at, NULL, 16);
        at = (size_t)(eol - b) + 1;
        if (sz == 0) { /* trailers, then an empty line */
            for (;;) {
                const char *e2 = memchr(b + at, '\n', n - at);
                if (!e2) return 0;
                size_t line = (size_t)(e2 - (b + at));
                at += line + 1;
                if (line <= 1) return at;
            }
        }
        if (sz > n - at || n - at - sz < 2) return 0;
        at += sz + 2;
    }
}

/* Every response in b[0..n) whole and well formed; cut_ok: the last may be cut (a reset
 * loses what was in flight). no_body_ok: a response may omit its body (a HEAD request). */
static void check_responses(const char *b, size_t n, int cut_ok, int no_body_ok) {
    for (size_t at = 0; at < n;) {
        const char *r = b + at, *hend = memmem(r, n - at, "\r\n\r\n", 4);
        if (!hend) {
            check(cut_ok, "a response cut in its headers", b, n);
            return;
        }
        size_t hn = (size_t)(hend - r) + 4, vn = 0, body_n;
        check(hn >= 12 && !memcmp(r, "HTTP/1.", 7) && r[9] >= '1' && r[9] <= '5' && r[10] >= '0' && r[10] <= '9' &&
                  r[11] >= '0' && r[11] <= '9',
              "not an HTTP/1.x status line", b, n);
        int status = atoi(r + 9);
        /* libmicrohttpd's own refusal of a malformed request (an HTML body, no Content-Type):
         * it closes after it, and 0.9.75 sends its status line and headers twice for a bad
         * Content-Length (docs/testing.md): not ours to check further */
        if (status >= 400 && !header(r, hn, "Content-Type", &vn)) return;
        const char *body = r + hn, *v;
        size_t left = n - at - hn;
        if (status == 401) check(header(r, hn, "WWW-Authenticate", &vn) != NULL, "a 401 without WWW-Authenticate", b, n);
        if ((v = header(r, hn, "Transfer-Encoding", &vn)) && vn >= 7 && !strncasecmp(v, "chunked", 7)) {
            body_n = chunked_len(body, left);
            if (!body_n) {
                check(cut_ok, "a chunked response cut off", b, n);
                return;
            }
        } else if ((v = header(r, hn, "Content-Length", &vn))) {
            body_n = strtoull(v, NULL, 10);
            if (no_body_ok && (left == 0 || !memcmp(body, "HTTP/1.", 7))) body_n = 0;
            if (body_n > left) {
                check(cut_ok, "a response shorter than its Content-Length", b, n);
                return;
            }
        } else {
            body_n = status == 204 || status == 304 || status < 200 ? 0 : left; /* until the close */
        }
        if (status == 413 && memmem(body, body_n, "request_too_large", 17)) {
            v = header(r, hn, "Connection", &vn);
            check(v && vn >= 5 && !strncasecmp(v, "close", 5), "our 413 keeps the connection open", b, n);
        }
        v = header(r, hn, "Content-Type", &vn);
        if (v && vn >= 16 && !strncmp(v, "application/json", 16) && body_n) {
            json_t *o = json_loadb(body, body_n, 0, NULL);
            check(o != NULL, "a JSON response that does not parse", b, n);
            if (status >= 400) /* /health's 503 is {"status": why} */
                check(json_is_string(json_object_get(json_object_get(o, "error"), "message")) ||
                          (status == 503 && json_is_string(json_object_get(o, "status"))),
                      "an error without {\"error\": {\"message\"}}", b, n);
            json_decref(o);
        }
        at += hn + body_n;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int port = server_port(), how;
    size_t n;
    char *got = exchange(port, data, size, &n, &how);
    check(how != 2, "no answer and no close within 3 s", got, n);
    check_responses(got, n, how == 1, memmem(data, size, "HEAD", 4) != NULL);
    free(got);
    static const char health[] = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    got = exchange(port, health, sizeof health - 1, &n, &how);
    check(how == 0 && n > 12 && !memcmp(got, "HTTP/1.1 503", 12) && strstr(got, "loading"),
          "/health does not answer after the input", got, n);
    free(got);
    return 0;
}
