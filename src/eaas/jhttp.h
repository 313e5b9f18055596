/*
 * jhttp.h — a small HTTP/JSON endpoint on libmicrohttpd for the processes of
 * Expert-as-a-Service that are not the OpenAI server (an expert server's own
 * port: /connect, /health, /metrics). One thread per connection, so a handler
 * may block (a /connect waits for the server's poll thread).
 *
 *   static void handle(void *ctx, const ea_jhttp_req *r, ea_jhttp_reply *out) {
 *       if (!strcmp(r->path, "/health")) ea_jhttp_reply_set(out, 200, "{\"status\":\"ok\"}", NULL);
 *   }
 *   ea_jhttp *h;  ea_jhttp_start("127.0.0.1", 0, 1 << 20, handle, ctx, &h);
 *   ... ea_jhttp_port(h) ...
 *   ea_jhttp_stop(h);
 *
 * A route the handler leaves unanswered is a 404; a body over max_body a 413.
 * Both are JSON errors in OpenAI's shape.
 */
#ifndef EA_JHTTP_H
#define EA_JHTTP_H

#include <stddef.h>

#include "base/status.h"

typedef struct {
    const char *method; /* "GET", "POST", ... */
    const char *path;   /* without the query */
    const char *body;   /* NUL-terminated ("" without a body) */
    size_t body_len;
    void *conn; /* for ea_jhttp_arg */
} ea_jhttp_req;

typedef struct {
    int status;               /* 0: not answered (404) */
    char *body;               /* owns (ea_malloc) */
    const char *content_type; /* NULL: application/json */
} ea_jhttp_reply;

typedef void (*ea_jhttp_handler)(void *ctx, const ea_jhttp_req *r, ea_jhttp_reply *out);

typedef struct ea_jhttp ea_jhttp;

ea_status ea_jhttp_start(const char *host, int port, size_t max_body, ea_jhttp_handler h, void *ctx, ea_jhttp **out);
int ea_jhttp_port(const ea_jhttp *h);
void ea_jhttp_stop(ea_jhttp *h);

/* The query argument `name` of r, or NULL. */
const char *ea_jhttp_arg(const ea_jhttp_req *r, const char *name);
/* Sets the reply (body copied; content_type borrowed, static). */
void ea_jhttp_reply_set(ea_jhttp_reply *out, int status, const char *body, const char *content_type);
/* An error reply {"error":{"message":msg,"type":type}}. */
void ea_jhttp_reply_error(ea_jhttp_reply *out, int status, const char *type, const char *msg);

#endif
