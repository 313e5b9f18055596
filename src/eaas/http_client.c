/*
 * http_client.c — blocking HTTP/1.1 calls on plain sockets (see http_client.h).
 *
 * One call: resolve, connect (non-blocking, poll until the deadline), send the
 * request, receive until ea_http_response_parse says the response is whole
 * (or the peer closed), copy the body out. Every wait is a poll() with the
 * time left until the one deadline, so a silent peer costs at most
 * timeout_ms. The socket is non-blocking throughout; nothing is kept between
 * calls.
 *
 * The receive buffer grows as bytes come and is bounded by EA_HTTP_MAX_HEAD +
 * EA_HTTP_MAX_BODY: a Content-Length above the limit is refused as soon as
 * the headers are in, a body without one is refused once it passes the limit.
 */
#include "eaas/http_client.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/util.h"

/* ---- host:port -------------------------------------------------------------------- */

static ea_status bad_hostport(const char *s) {
    return ea_err(EA_ERR_INVALID_ARG, "'%s' is not host:port (port in [1, 65535])", s ? s : "(null)");
}

ea_status ea_hostport_parse(const char *s, char *host, size_t host_len, int *port) {
    if (!s || !host || host_len == 0) return bad_hostport(s);
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s) return bad_hostport(s);
    const char *h = s;
    size_t hn = (size_t)(colon - s);
    if (s[0] == '[') { /* [v6]:port */
        if (hn < 3 || s[hn - 1] != ']') return bad_hostport(s);
        h = s + 1;
        hn -= 2;
    } else if (memchr(s, ':', hn)) {
        return bad_hostport(s); /* a bare v6 address needs brackets */
    }
    if (hn + 1 > host_len) return bad_hostport(s);
    const char *p = colon + 1;
    long v = 0;
    if (!*p || strlen(p) > 5) return bad_hostport(s);
    for (; *p; p++) {
        if (*p < '0' || *p > '9') return bad_hostport(s);
        v = v * 10 + (*p - '0');
    }
    if (v < 1 || v > 65535) return bad_hostport(s);
    memcpy(host, h, hn);
    host[hn] = 0;
    *port = (int)v;
    return EA_OK;
}

/* ---- response parsing --------------------------------------------------------------- */

/* Offset just past "\r\n\r\n" in buf[0..n), or 0 if not there yet. */
static size_t head_end(const char *buf, size_t n) {
    for (size_t i = 3; i < n; i++)
        if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r') return i + 1;
    return 0;
}

/* "HTTP/1.x NNN ..." */
static ea_status status_line(const char *buf, size_t n, int *status) {
    if (n < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ') return ea_err(EA_ERR_FORMAT, "bad status line");
    int v = 0;
    for (int i = 9; i < 12; i++) {
        if (buf[i] < '0' || buf[i] > '9') return ea_err(EA_ERR_FORMAT, "bad status code");
        v = v * 10 + (buf[i] - '0');
    }
    if (v < 100) return ea_err(EA_ERR_FORMAT, "bad status code %d", v);
    *status = v;
    return EA_OK;
}

/* The value of header `name` in the head buf[0..n) (trimmed), or NULL. */
static const char *header(const char *buf, size_t n, const char *name, size_t *vlen) {
    size_t nl = strlen(name);
    const char *line = memchr(buf, '\n', n);
    while (line && (size_t)(line + 1 - buf) < n) {
        const char *s = line + 1, *end = buf + n;
        const char *eol = memchr(s, '\n', (size_t)(end - s));
        if (!eol) break;
        if ((size_t)(eol - s) > nl && s[nl] == ':' && strncasecmp(s, name, nl) == 0) {
            const char *v = s + nl + 1, *ve = eol;
            while (v < ve && (*v == ' ' || *v == '\t')) v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t')) ve--;
            *vlen = (size_t)(ve - v);
            return v;
        }
        line = eol;
    }
    return NULL;
}

/* Content-Length: -1 when absent; an error when malformed or over the limit. */
static ea_status content_length(const char *buf, size_t n, long long *len) {
    size_t vl = 0;
    const char *v = header(buf, n, "content-length", &vl);
    *len = -1;
    if (!v) return EA_OK;
    if (vl == 0 || vl > 12) return ea_err(EA_ERR_FORMAT, "bad Content-Length");
    long long x = 0;
    for (size_t i = 0; i < vl; i++) {
        if (v[i] < '0' || v[i] > '9') return ea_err(EA_ERR_FORMAT, "bad Content-Length");
        x = x * 10 + (v[i] - '0');
    }
    if ((size_t)x > EA_HTTP_MAX_BODY) return ea_err(EA_ERR_RANGE, "response body of %lld bytes is over the %zu-byte limit", x, EA_HTTP_MAX_BODY);
    *len = x;
    return EA_OK;
}

ea_status ea_http_response_parse(const char *buf, size_t n, int at_eof, int *done, int *status, size_t *body_off,
                                 size_t *body_len) {
    *done = 0;
    size_t he = head_end(buf, n < EA_HTTP_MAX_HEAD ? n : EA_HTTP_MAX_HEAD);
    if (!he) {
        if (n >= EA_HTTP_MAX_HEAD) return ea_err(EA_ERR_RANGE, "response headers over %zu bytes", EA_HTTP_MAX_HEAD);
        return at_eof ? ea_err(EA_ERR_IO, "connection closed before the response headers ended") : EA_OK;
    }
    EA_TRY(status_line(buf, he, status));
    size_t vl = 0;
    const char *te = header(buf, he, "transfer-encoding", &vl);
    if (te && !(vl == 8 && strncasecmp(te, "identity", 8) == 0))
        return ea_err(EA_ERR_UNSUPPORTED, "Transfer-Encoding %.*s (only Content-Length bodies)", (int)(vl < 32 ? vl : 32), te);
    long long cl;
    EA_TRY(content_length(buf, he, &cl));
    size_t have = n - he;
    if (cl < 0 && have > EA_HTTP_MAX_BODY) return ea_err(EA_ERR_RANGE, "response body over the %zu-byte limit", EA_HTTP_MAX_BODY);
    if (cl >= 0 && have < (size_t)cl) {
        return at_eof ? ea_err(EA_ERR_IO, "connection closed after %zu of %lld body bytes", have, cl) : EA_OK;
    }
    if (cl < 0 && !at_eof) return EA_OK;
    *body_off = he;
    *body_len = cl >= 0 ? (size_t)cl : have;
    *done = 1;
    return EA_OK;
}

/* ---- socket I/O with a deadline --------------------------------------------------- */

/* ms left until deadline_ns (at least 0). */
static int ms_left(uint64_t deadline_ns) {
    uint64_t now = ea_now_ns();
    return now >= deadline_ns ? 0 : (int)((deadline_ns - now + 999999) / 1000000);
}

/* One call's deadline and its cancel fd (-1: none). */
typedef struct {
    uint64_t deadline_ns;
    int cancel_fd;
} limits;

/* Wait for `events` on fd: EA_OK, EA_ERR_TIMEOUT, EA_ERR_CANCELLED, or EA_ERR_IO. */
static ea_status wait_fd(int fd, short events, const limits *l, const char *what) {
    for (;;) {
        int ms = ms_left(l->deadline_ns);
        if (ms <= 0) return ea_err(EA_ERR_TIMEOUT, "%s: deadline passed", what);
        struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = l->cancel_fd, .events = POLLIN}};
        int r = poll(p, l->cancel_fd >= 0 ? 2 : 1, ms);
        if (r > 0 && l->cancel_fd >= 0 && p[1].revents) return ea_err(EA_ERR_CANCELLED, "%s: cancelled", what);
        if (r > 0) return EA_OK;
        if (r < 0 && errno != EINTR) return ea_err(EA_ERR_IO, "%s: poll: %s", what, strerror(errno));
    }
}

static ea_status connect_one(const struct addrinfo *ai, const limits *l, int *out) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) return ea_err(EA_ERR_IO, "socket: %s", strerror(errno));
    int one = 1; /* small messages: no Nagle delay */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        return ea_err(e == ECONNREFUSED ? EA_ERR_UNAVAILABLE : EA_ERR_IO, "connect: %s", strerror(e));
    }
    ea_status s = wait_fd(fd, POLLOUT, l, "connect");
    int err = 0;
    socklen_t el = sizeof err;
    if (s == EA_OK && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err != 0)
        s = ea_err(err == ECONNREFUSED ? EA_ERR_UNAVAILABLE : EA_ERR_IO, "connect: %s", strerror(err));
    if (s != EA_OK) {
        close(fd);
        return s;
    }
    *out = fd;
    return EA_OK;
}

static ea_status open_conn(const char *host, int port, const limits *l, int *fd) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    char ps[8];
    snprintf(ps, sizeof ps, "%d", port);
    int g = getaddrinfo(host, ps, &hints, &ai);
    if (g != 0 || !ai) return ea_err(EA_ERR_UNAVAILABLE, "resolve %s: %s", host, gai_strerror(g));
    ea_status s = EA_ERR_UNAVAILABLE;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        if ((s = connect_one(a, l, fd)) == EA_OK || s == EA_ERR_TIMEOUT || s == EA_ERR_CANCELLED) break;
    }
    freeaddrinfo(ai);
    return s;
}

/* more: MSG_MORE, so the head and the body leave in one segment when they fit. */
static ea_status send_all(int fd, const char *p, size_t n, int more, const limits *l) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            EA_TRY(wait_fd(fd, POLLOUT, l, "send"));
        } else if (w < 0 && errno != EINTR) {
            return ea_err(EA_ERR_IO, "send: %s", strerror(errno));
        }
    }
    return EA_OK;
}

static ea_status send_request(int fd, const char *hostport, const char *method, const char *path, const char *body,
                              const limits *l) {
    char head[1024];
    size_t bl = body ? strlen(body) : 0;
    int n = body ? snprintf(head, sizeof head,
                            "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
                            "Content-Length: %zu\r\n\r\n",
                            method, path, hostport, bl)
                 : snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", method, path,
                            hostport);
    if (n < 0 || (size_t)n >= sizeof head) return ea_err(EA_ERR_INVALID_ARG, "request line too long");
    EA_TRY(send_all(fd, head, (size_t)n, bl > 0, l));
    return send_all(fd, body ? body : "", bl, 0, l);
}

/* The received bytes, grown as they come. */
typedef struct {
    char *data; /* owns */
    size_t len, cap;
} rbuf;

static ea_status rbuf_room(rbuf *b) {
    /* cap is the allocation; its last byte stays for the NUL */
    if (b->cap > b->len && b->cap - b->len - 1 >= 4096) return EA_OK;
    if (ea_grow(&b->data, &b->cap, b->len + 4096 + 1, 1, 16384))
        return ea_err(EA_ERR_NOMEM, "response buffer of %zu bytes", b->len + 4096);
    return EA_OK;
}

/* Receive until the response is whole. OUT: *status, body slice of b. */
static ea_status recv_response(int fd, rbuf *b, const limits *l, int *status, size_t *off, size_t *len) {
    int eof = 0, done = 0;
    for (;;) {
        EA_TRY(ea_http_response_parse(b->data ? b->data : "", b->len, eof, &done, status, off, len));
        if (done) return EA_OK;
        EA_TRY(rbuf_room(b));
        ssize_t r = recv(fd, b->data + b->len, b->cap - b->len - 1, 0);
        if (r > 0) b->len += (size_t)r;
        else if (r == 0) eof = 1;
        else if (errno == EAGAIN || errno == EWOULDBLOCK) EA_TRY(wait_fd(fd, POLLIN, l, "receive"));
        else if (errno != EINTR) return ea_err(EA_ERR_IO, "receive: %s", strerror(errno));
    }
}

static ea_status call_on(int fd, const char *hostport, const char *method, const char *path, const char *body,
                         const limits *l, int *status, char **resp_body) {
    ea_status sent = send_request(fd, hostport, method, path, body, l);
    if (sent != EA_OK && sent != EA_ERR_IO) return sent;
    /* a send that failed (EPIPE, ECONNRESET) may be a server that answered early
     * (413) and closed: its answer, when we can read it, is the result */
    rbuf b = {0};
    size_t off = 0, len = 0;
    int st = 0;
    char why[256];
    snprintf(why, sizeof why, "%s", sent != EA_OK ? ea_errmsg() : "");
    ea_status s = recv_response(fd, &b, l, &st, &off, &len);
    if (s != EA_OK && sent != EA_OK) s = ea_err(sent, "%s", why);
    char *out = s == EA_OK ? ea_malloc(len + 1) : NULL;
    if (s == EA_OK && !out) s = ea_err(EA_ERR_NOMEM, "response body of %zu bytes", len);
    if (s == EA_OK) {
        if (len) memcpy(out, b.data + off, len);
        out[len] = 0;
        *status = st;
        *resp_body = out;
    }
    ea_free(b.data);
    return s;
}

ea_status ea_http_call_cancel(const char *hostport, const char *method, const char *path, const char *body,
                              int timeout_ms, int cancel_fd, int *status, char **resp_body) {
    char host[256];
    int port = 0, fd = -1;
    EA_TRY(ea_hostport_parse(hostport, host, sizeof host, &port));
    if (timeout_ms <= 0) return ea_err(EA_ERR_INVALID_ARG, "http call to %s: timeout %d ms", hostport, timeout_ms);
    limits l = {ea_now_ns() + (uint64_t)timeout_ms * 1000000ull, cancel_fd};
    ea_status s = open_conn(host, port, &l, &fd);
    if (s == EA_OK) {
        s = call_on(fd, hostport, method, path, body, &l, status, resp_body);
        close(fd);
    }
    if (s != EA_OK) {
        ea_err_wrap(s, "%s %s %s (deadline %d ms): ", method, hostport, path, timeout_ms);
        EA_LOGD("http client: %s", ea_errmsg());
    }
    return s;
}

ea_status ea_http_call(const char *hostport, const char *method, const char *path, const char *body, int timeout_ms,
                       int *status, char **resp_body) {
    return ea_http_call_cancel(hostport, method, path, body, timeout_ms, -1, status, resp_body);
}
