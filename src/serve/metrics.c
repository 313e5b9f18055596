/*
 * metrics.c — counters and fixed-bucket histograms for /metrics.
 *
 * Histogram buckets are cumulative only when rendered: each observation adds
 * 1 to the first bucket whose upper bound is >= the value (or to +Inf), so an
 * observation is O(buckets) with no allocation. The bounds are vLLM's, so
 * figures from both servers can share a dashboard.
 *
 * Invariant: every field below `mu` is read and written only with `mu` held.
 */
#include "serve/metrics.h"

#include <pthread.h>
#include <string.h>

#include "base/alloc.h"

#define MAX_BUCKETS 24

static const double ttft_b[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
static const double itl_b[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4,  0.5,
                               0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
static const double e2e_b[] = {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                               30.0, 40.0, 50.0, 60.0, 120., 240.0, 480.0, 960.0, 1920.0, 7680.0};

static const struct {
    const char *name, *help;
    const double *b;
    int n;
} hist_def[EA_HIST_COUNT] = {
    {"time_to_first_token_seconds", "Time from arrival to the first generated token.", ttft_b,
     (int)(sizeof ttft_b / sizeof ttft_b[0])},
    {"inter_token_latency_seconds", "Time between consecutive generated tokens of a request.", itl_b,
     (int)(sizeof itl_b / sizeof itl_b[0])},
    {"e2e_request_latency_seconds", "Time from arrival to the last token.", e2e_b,
     (int)(sizeof e2e_b / sizeof e2e_b[0])},
    {"request_queue_time_seconds", "Time a request waited before its first step.", e2e_b,
     (int)(sizeof e2e_b / sizeof e2e_b[0])},
};

#define N_FINISH 4 /* none(error), stop, length, abort */
#define N_CODES 16

struct ea_metrics {
    pthread_mutex_t mu;
    uint64_t hist[EA_HIST_COUNT][MAX_BUCKETS + 1]; /* last: +Inf */
    double sum[EA_HIST_COUNT];
    uint64_t count[EA_HIST_COUNT];
    uint64_t finished[N_FINISH];
    int codes[N_CODES]; /* HTTP statuses seen, 0 = free */
    uint64_t code_count[N_CODES];
};

ea_status ea_metrics_create(ea_metrics **out) {
    ea_metrics *m = ea_calloc(1, sizeof *m);
    if (!m) return ea_err(EA_ERR_NOMEM, "metrics");
    pthread_mutex_init(&m->mu, NULL);
    *out = m;
    return EA_OK;
}

void ea_metrics_destroy(ea_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    ea_free(m);
}

void ea_metrics_observe(ea_metrics *m, ea_hist_id h, double v) {
    if (!m || h < 0 || h >= EA_HIST_COUNT || !(v >= 0)) return;
    int i = 0;
    while (i < hist_def[h].n && v > hist_def[h].b[i]) i++;
    pthread_mutex_lock(&m->mu);
    m->hist[h][i]++;
    m->sum[h] += v;
    m->count[h]++;
    pthread_mutex_unlock(&m->mu);
}

void ea_metrics_finished(ea_metrics *m, ea_finish f) {
    if (!m) return;
    int i = f == EA_FINISH_STOP ? 1 : f == EA_FINISH_LENGTH ? 2 : f == EA_FINISH_CANCELLED ? 3 : 0;
    pthread_mutex_lock(&m->mu);
    m->finished[i]++;
    pthread_mutex_unlock(&m->mu);
}

void ea_metrics_http_status(ea_metrics *m, int status) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < N_CODES; i++) {
        if (m->codes[i] == 0) m->codes[i] = status;
        if (m->codes[i] == status) {
            m->code_count[i]++;
            break;
        }
    }
    pthread_mutex_unlock(&m->mu);
}

static void gauge(ea_sbuf *o, const char *name, const char *help, double v) {
    ea_sbuf_printf(o, "# HELP eaas:%s %s\n# TYPE eaas:%s gauge\neaas:%s %.17g\n", name, help, name, name, v);
}

static void counter(ea_sbuf *o, const char *name, const char *help, unsigned long long v) {
    ea_sbuf_printf(o, "# HELP eaas:%s %s\n# TYPE eaas:%s counter\neaas:%s %llu\n", name, help, name, name, v);
}

void ea_metrics_render(ea_metrics *m, const ea_sched_stats *st, ea_sbuf *o) {
    if (st) {
        gauge(o, "num_requests_running", "Requests in the running batch.", st->running);
        gauge(o, "num_requests_waiting", "Requests waiting to be scheduled.", st->waiting);
        gauge(o, "kv_blocks_used", "KV cache blocks in use.", st->kv_blocks_used);
        gauge(o, "kv_blocks_total", "KV cache blocks in all.", st->kv_blocks_total);
        gauge(o, "kv_cache_usage_perc", "Fraction of KV cache blocks in use (0..1).",
              st->kv_blocks_total > 0 ? (double)st->kv_blocks_used / st->kv_blocks_total : 0.0);
        gauge(o, "recurrent_state_bytes", "Recurrent state of every sequence slot (hybrid models' DeltaNet layers).",
              (double)st->lin_state_bytes);
        gauge(o, "state_snapshots", "Recurrent-state snapshots the prefix cache holds (hybrid models).",
              st->state_snapshots);
        gauge(o, "state_snapshot_bytes", "KV-block bytes the state snapshots take (in kv_blocks_used too).",
              (double)st->state_snapshot_bytes);
        counter(o, "prompt_tokens_total", "Prompt tokens processed.", (unsigned long long)st->prompt_tokens);
        counter(o, "generation_tokens_total", "Tokens generated.", (unsigned long long)st->generation_tokens);
        counter(o, "prefix_cache_hit_tokens_total", "Prompt tokens served from the prefix cache.",
                (unsigned long long)st->prefix_hit_tokens);
        counter(o, "num_preemptions_total", "Requests preempted for lack of KV blocks.",
                (unsigned long long)st->preemptions);
        counter(o, "steps_total", "Forward steps run by the step loop.", (unsigned long long)st->steps);
        counter(o, "kv_disk_writes_total", "KV blocks written to the prefix-cache disk tier.",
                (unsigned long long)st->kv_disk_writes);
        counter(o, "kv_disk_reads_total", "KV blocks read back from the prefix-cache disk tier.",
                (unsigned long long)st->kv_disk_reads);
        counter(o, "kv_disk_skipped_total", "Disk-tier files skipped as corrupt or foreign.",
                (unsigned long long)st->kv_disk_skipped);
        if (st->dp_ranks > 0) {
            ea_sbuf_puts(o, "# HELP eaas:dp_requests_assigned_total Requests rank 0 gave each rank to run "
                            "(data-parallel attention).\n# TYPE eaas:dp_requests_assigned_total counter\n");
            for (int r = 0; r < st->dp_ranks; r++)
                ea_sbuf_printf(o, "eaas:dp_requests_assigned_total{rank=\"%d\"} %llu\n", r,
                               (unsigned long long)st->dp_assigned[r]);
        }
    }
    pthread_mutex_lock(&m->mu);
    static const char *fin[N_FINISH] = {"error", "stop", "length", "abort"};
    ea_sbuf_puts(o, "# HELP eaas:request_success_total Finished generation requests by finish reason.\n"
                    "# TYPE eaas:request_success_total counter\n");
    for (int i = 0; i < N_FINISH; i++)
        ea_sbuf_printf(o, "eaas:request_success_total{finished_reason=\"%s\"} %llu\n", fin[i],
                       (unsigned long long)m->finished[i]);
    ea_sbuf_puts(o, "# HELP eaas:http_requests_total HTTP responses by status code.\n"
                    "# TYPE eaas:http_requests_total counter\n");
    for (int i = 0; i < N_CODES && m->codes[i]; i++)
        ea_sbuf_printf(o, "eaas:http_requests_total{code=\"%d\"} %llu\n", m->codes[i],
                       (unsigned long long)m->code_count[i]);
    for (int h = 0; h < EA_HIST_COUNT; h++) {
        const char *n = hist_def[h].name;
        ea_sbuf_printf(o, "# HELP eaas:%s %s\n# TYPE eaas:%s histogram\n", n, hist_def[h].help, n);
        uint64_t cum = 0;
        for (int i = 0; i < hist_def[h].n; i++) {
            cum += m->hist[h][i];
            ea_sbuf_printf(o, "eaas:%s_bucket{le=\"%g\"} %llu\n", n, hist_def[h].b[i], (unsigned long long)cum);
        }
        cum += m->hist[h][hist_def[h].n];
        ea_sbuf_printf(o, "eaas:%s_bucket{le=\"+Inf\"} %llu\n", n, (unsigned long long)cum);
        ea_sbuf_printf(o, "eaas:%s_sum %.9g\neaas:%s_count %llu\n", n, m->sum[h], n, (unsigned long long)m->count[h]);
    }
    pthread_mutex_unlock(&m->mu);
}

void ea_metrics_label_all(ea_sbuf *b, const char *key, const char *value) {
    if (b->failed || !b->data) return;
    ea_sbuf lab = {0}, out = {0};
    ea_sbuf_printf(&lab, "%s=\"", key);
    for (const char *v = value ? value : ""; *v; v++) {
        if (*v == '\\' || *v == '"') ea_sbuf_printf(&lab, "\\%c", *v);
        else if (*v == '\n') ea_sbuf_puts(&lab, "\\n");
        else ea_sbuf_append(&lab, v, 1);
    }
    ea_sbuf_puts(&lab, "\"");
    for (size_t i = 0; i < b->len;) {
        const char *line = b->data + i, *nl = memchr(line, '\n', b->len - i);
        size_t n = nl ? (size_t)(nl - line) + 1 : b->len - i;
        size_t name = 0;
        if (n > 5 && !memcmp(line, "eaas:", 5))
            while (name < n && line[name] != '{' && line[name] != ' ' && line[name] != '\n') name++;
        if (name == 0 || name == n) {
            ea_sbuf_append(&out, line, n); /* a comment, or not a sample line */
        } else {
            ea_sbuf_append(&out, line, name);
            ea_sbuf_append(&out, "{", 1);
            ea_sbuf_append(&out, lab.data, lab.len);
            if (line[name] == '{') {
                if (name + 1 < n && line[name + 1] != '}') ea_sbuf_append(&out, ",", 1);
                ea_sbuf_append(&out, line + name + 1, n - name - 1);
            } else {
                ea_sbuf_append(&out, "}", 1);
                ea_sbuf_append(&out, line + name, n - name);
            }
        }
        i += n;
    }
    if (out.failed || lab.failed) {
        b->failed = 1;
    } else {
        ea_sbuf tmp = *b;
        *b = out;
        out = tmp;
    }
    ea_sbuf_deinit(&out);
    ea_sbuf_deinit(&lab);
}
