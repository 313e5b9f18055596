/*
 * metrics.h — the server's Prometheus metrics (text format 0.0.4, prefix
 * `eaas:`), named like vLLM's `vllm:` metrics so dashboards carry over.
 *
 * Gauges come from the scheduler at scrape time (ea_sched_stats):
 *   eaas:num_requests_running, eaas:num_requests_waiting, eaas:kv_blocks_used,
 *   eaas:kv_blocks_total, eaas:kv_cache_usage_perc
 * Counters: eaas:prompt_tokens_total, eaas:generation_tokens_total,
 *   eaas:prefix_cache_hit_tokens_total, eaas:num_preemptions_total (scheduler),
 *   eaas:request_success_total{finished_reason}, eaas:http_requests_total{code}
 * Histograms (_bucket{le}, _sum, _count; vLLM's bucket bounds):
 *   eaas:time_to_first_token_seconds, eaas:inter_token_latency_seconds,
 *   eaas:e2e_request_latency_seconds, eaas:request_queue_time_seconds
 *
 * Thread safety: one mutex inside; observe from any HTTP thread.
 */
#ifndef EA_METRICS_H
#define EA_METRICS_H

#include "base/status.h"
#include "base/sbuf.h"
#include "serve/scheduler.h"

typedef struct ea_metrics ea_metrics;

typedef enum {
    EA_HIST_TTFT = 0,
    EA_HIST_ITL,
    EA_HIST_E2E,
    EA_HIST_QUEUE,
    EA_HIST_COUNT
} ea_hist_id;

ea_status ea_metrics_create(ea_metrics **out);
void ea_metrics_destroy(ea_metrics *m);

void ea_metrics_observe(ea_metrics *m, ea_hist_id h, double seconds);
/* One finished generation request (finish NONE counts as "error"). */
void ea_metrics_finished(ea_metrics *m, ea_finish f);
/* One HTTP response with this status. */
void ea_metrics_http_status(ea_metrics *m, int status);

/* Prometheus text; st may be NULL (still loading: gauges omitted). */
void ea_metrics_render(ea_metrics *m, const ea_sched_stats *st, ea_sbuf *out);

#endif
