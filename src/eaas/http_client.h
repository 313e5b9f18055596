/*
 * http_client.h — a small blocking HTTP/1.1 client for eaas's own servers
 * (the monitor, an expert server's HTTP port): one request per connection,
 * one deadline for the whole call.
 *
 *   int status; char *body;
 *   ea_status s = ea_http_call("127.0.0.1:7000", "POST", "/heartbeat",
 *                              "{\"id\":\"s1\"}", 1000, &status, &body);
 *   if (s == EA_OK) { ... status (200, 404, ...), body (JSON text) ...; ea_free(body); }
 *   else            { ... ea_errmsg() says why: refused, timed out, malformed ... }
 *
 * What it speaks, and only that:
 *   request   METHOD PATH HTTP/1.1, Host, Connection: close, and with a body
 *             Content-Type: application/json and Content-Length
 *   response  a status line HTTP/1.x NNN, headers (at most 64 KiB), then a
 *             body of Content-Length bytes, or up to EOF when there is no
 *             Content-Length (the server closes: we asked it to). A chunked
 *             body is refused (EA_ERR_UNSUPPORTED): our servers send
 *             Content-Length for JSON. Bodies over EA_HTTP_MAX_BODY are
 *             refused (EA_ERR_RANGE) before they are read.
 * The HTTP status is a result, not an error: a 404 returns EA_OK with
 * *status = 404 and its body.
 *
 * Errors (ea_errmsg names host:port, method and path; the reason is also
 * logged at debug level, so a caller that retries quietly stays quiet):
 *   EA_ERR_INVALID_ARG   hostport is not "host:port", or timeout_ms <= 0
 *   EA_ERR_UNAVAILABLE   the host does not resolve, or the connection was refused
 *   EA_ERR_TIMEOUT       the deadline passed (connect, send or receive)
 *   EA_ERR_IO            any other socket error; the peer closed before a whole response
 *   EA_ERR_FORMAT        a malformed status line or Content-Length
 *   EA_ERR_RANGE         headers over 64 KiB or a body over EA_HTTP_MAX_BODY
 *   EA_ERR_CANCELLED     (ea_http_call_cancel) the cancel fd became readable
 *   EA_ERR_NOMEM
 *
 * Threading: none kept; any thread may call it. SIGPIPE is not raised (sends
 * use MSG_NOSIGNAL).
 */
#ifndef EA_HTTP_CLIENT_H
#define EA_HTTP_CLIENT_H

#include <stddef.h>

#include "base/status.h"

#define EA_HTTP_MAX_BODY ((size_t)16 << 20)  /* 16 MiB */
#define EA_HTTP_MAX_HEAD ((size_t)64 << 10)  /* 64 KiB */

/* One request with a deadline of timeout_ms for all of it.
 * hostport: "host:port" or "[v6addr]:port"; body: NULL (no body) or JSON text.
 * OUT: *status the HTTP status; *resp_body malloc'd (ea_malloc), NUL-terminated,
 * the caller frees it with ea_free; both untouched on an error. */
ea_status ea_http_call(const char *hostport, const char *method, const char *path, const char *body, int timeout_ms,
                       int *status, char **resp_body);

/* The same call, also ended early when cancel_fd (e.g. the read end of a
 * pipe) becomes readable: EA_ERR_CANCELLED. cancel_fd < 0: like ea_http_call.
 * For a thread that must stop promptly while it waits on a long poll. */
ea_status ea_http_call_cancel(const char *hostport, const char *method, const char *path, const char *body,
                              int timeout_ms, int cancel_fd, int *status, char **resp_body);

/* Split "host:port" (or "[v6]:port") into host (NUL-terminated, at most
 * host_len - 1 bytes) and a port in [1, 65535]. EA_ERR_INVALID_ARG otherwise. */
ea_status ea_hostport_parse(const char *s, char *host, size_t host_len, int *port);

/* The response parser, exposed for tests and fuzzing: buf[0..n) holds bytes
 * received so far. Returns EA_OK with *done = 1 once a whole response is there
 * (*status, *body_off, *body_len set; at_eof: the peer closed, so a response
 * without Content-Length ends here); *done = 0 when more bytes are needed; an
 * error for a malformed or too large response. Reads only buf[0..n). */
ea_status ea_http_response_parse(const char *buf, size_t n, int at_eof, int *done, int *status, size_t *body_off,
                                 size_t *body_len);

#endif
