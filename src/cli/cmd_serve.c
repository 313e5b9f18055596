/*
 * cmd_serve.c — `eaas serve --model M`: an OpenAI-compatible HTTP server.
 *
 * Order of start-up: every flag is checked first, and the model path and its
 * config (--max-ctx against max_position_embeddings), so a bad flag is
 * reported before anything listens; then the HTTP port opens (so /health can
 * say 503 while the model loads), then engine, tokenizer/chat template and
 * scheduler; then requests are accepted. Shutdown on SIGTERM/SIGINT (or after
 * --max-requests generation requests, for tests): refuse new generation
 * requests (the port stays open so /health says 503 "draining"), let in-flight
 * requests finish for up to --drain-seconds, cancel the rest, wait until every
 * client has its last bytes (abort chunk, [DONE], chunked terminator, or JSON
 * body), close, free. A second signal cancels everything at once (clients
 * still get their terminal chunk where the flush allows); a third kills the
 * process. When a rank is lost under --parallel, rank 0 keeps answering
 * /health with 503 naming it for --drain-seconds (or until a signal), then
 * stops. The signal handler only counts signals; the main thread polls the
 * count.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "base/args.h"
#include "base/log.h"
#include "base/util.h"
#include "cli/commands.h"
#include "serve/constraint.h"
#include "serve/engine.h"
#include "serve/http.h"
#include "serve/metrics.h"
#include "serve/scheduler.h"
#include "serve/textops.h"
#include "base/alloc.h"
#include "cli/serve_ext.h"
#include "ep/dist.h"
#include "ep/bus.h"
#include "ep/ep_engine.h"

/* ea_version.c, generated at build time by cmake/version.cmake (as in main.c) */
extern const char ea_version_string[], ea_version_commit[];

static volatile sig_atomic_t g_stop; /* SIGTERM/SIGINT received so far */

static void on_signal(int sig) {
    if (g_stop < 2) g_stop = g_stop + 1;
    if (g_stop >= 2) signal(sig, SIG_DFL); /* a third one kills */
}


static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static const char *base_name(const char *p) {
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') n--;
    static char buf[256];
    size_t i = n;
    while (i > 0 && p[i - 1] != '/') i--;
    snprintf(buf, sizeof buf, "%.*s", (int)(n - i), p + i);
    return buf;
}

typedef struct {
    const char *model, *host, *api_key, *served_name, *allowed_origins, *kv_dtype;
    int port, threads, max_running, max_queue, max_batch_tokens, kv_mib, max_ctx, allow_long_ctx, no_prefix_cache,
        max_requests;
    long max_body;
    double stall_s, request_timeout_s, drain_s, keepalive_s, idle_timeout_s;
    /* EPLB */
    int eplb, eplb_redundant, eplb_ranks, eplb_window, eplb_interval, eplb_layers_per_step;
    double eplb_min_bal;
    const char *eplb_algorithm, *init_expert_location;
    /* multi-rank (mpirun) */
    const char *parallel;
    double dist_timeout, ep_capacity_factor;
    int dp_attention;
    /* prefix cache disk tier */
    const char *kv_disk_dir;
    int kv_disk_max_mib;
    const char *generation_config; /* auto | vllm */
    const char *reasoning_parser;  /* none | qwen3 | deepseek_r1 */
    const char *tool_call_parser;  /* auto | hermes | qwen3_coder | deepseek_v3 | deepseek_v31 | kimi_k2 | none */
    /* Expert-as-a-Service */
    const char *experts_remote;
    int expert_timeout_ms;
    int enable_dbo, dbo_min_tokens;
} serve_flags;

/* The EPLB tuning flags only make sense with EPLB on */
#define EA_EPLB_NEEDS "eplb|init-expert-location"

/* Load progress: a bar on a terminal, nothing otherwise. */
static void on_progress(void *ctx, double frac) {
    (void)ctx;
    if (!isatty(2)) return;
    int w = 40, n = (int)(frac * w + 0.5);
    fprintf(stderr, "\rloading [%.*s%*s] %3.0f%%", n, "########################################", w - n, "", frac * 100);
    if (frac >= 1.0) fprintf(stderr, "\n");
    fflush(stderr);
}

/* Connections MHD takes at once: well above the work the scheduler takes
 * (running + queue), so overload meets the scheduler's 503 and /health, /metrics
 * and idle keep-alive connections still find a slot; within the open-file limit
 * (the soft limit is raised to the hard one, as nginx's worker_rlimit_nofile does). */
static int max_connections(const serve_flags *f) {
    long want = 2L * (f->max_running + f->max_queue) + 512;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < rl.rlim_max) {
            rlim_t cur = rl.rlim_cur;
            rl.rlim_cur = rl.rlim_max;
            if (setrlimit(RLIMIT_NOFILE, &rl) != 0) rl.rlim_cur = cur;
        }
        long room = rl.rlim_cur == RLIM_INFINITY ? want : (long)rl.rlim_cur - 128; /* model files, MPI, logs */
        if (room < want) {
            EA_LOGW("the open-file limit (%ld) allows %ld connections, not %ld", (long)rl.rlim_cur, room, want);
            want = room > 64 ? room : 64;
        }
    }
    return (int)want;
}

/* ea_http_shutdown's question: cancel everything now? */
static int second_signal(void *ctx) {
    (void)ctx;
    return g_stop >= 2;
}

/* What the flag table (ranges, needs) cannot say; before the port opens. */
static int check_flags(const serve_flags *f) {
    const char *bad = NULL;
    if (!f->model) bad = "--model is required";
    else if (ea_reasoning_mode_parse(f->reasoning_parser) < 0)
        bad = "--reasoning-parser must be none, qwen3, deepseek_r1 or kimi_k2";
    else if (ea_tool_format_parse(f->tool_call_parser) == -1)
        bad = "--tool-call-parser must be auto, hermes, qwen3_coder, deepseek_v3, deepseek_v31, kimi_k2 or none";
    else if (ea_kv_dtype_parse(f->kv_dtype) < 0) bad = "--kv-cache-dtype must be f32, f16 or bf16";
    else if (f->kv_disk_dir && f->no_prefix_cache) bad = "--kv-disk-dir needs the prefix cache (drop --no-prefix-cache)";
    else if (f->kv_disk_dir && !f->kv_disk_dir[0]) bad = "--kv-disk-dir must not be empty";
    else if (f->eplb_algorithm && strcmp(f->eplb_algorithm, "deepseek") && strcmp(f->eplb_algorithm, "refined"))
        bad = "--eplb-algorithm must be deepseek or refined";
    else if (strcmp(f->generation_config, "auto") && strcmp(f->generation_config, "vllm"))
        bad = "--generation-config must be auto or vllm";
    else if (f->ep_capacity_factor > 0 && (!f->parallel || strcmp(f->parallel, "expert")))
        bad = "--ep-capacity-factor needs --parallel expert";
    else if (f->dp_attention && (!f->parallel || strcmp(f->parallel, "expert")))
        bad = "--dp-attention needs --parallel expert";
    char why[300];
    if (!bad && f->init_expert_location && !ea_file_exists(f->init_expert_location)) {
        snprintf(why, sizeof why, "--init-expert-location %.200s: no such file", f->init_expert_location);
        bad = why;
    }
    if (bad) {
        if (ea_par_report_here(NULL)) fprintf(stderr, "eaas serve: %s\n", bad);
        return 2;
    }
    return ea_cli_check_model("serve", f->model, f->max_ctx, "--max-ctx", f->allow_long_ctx);
}

#define EA_WEEK_S 604800.0 /* upper bound of the time flags */

static const char usage_text[] =
    "usage: eaas serve --model PATH [flags]\n\nServe a model over an OpenAI-compatible HTTP API:\n"
    "/v1/completions, /v1/chat/completions, /v1/models, /tokenize, /detokenize, /health, /metrics.\n\n";

int ea_cmd_serve(int argc, char **argv) {
    serve_flags f = {.dist_timeout = -1, .kv_dtype = "f32", .generation_config = "auto", .reasoning_parser = "none", .tool_call_parser = "auto", .host = "127.0.0.1", .port = 8000, .max_running = 16, .max_queue = 256, .max_batch_tokens = 512,
                     .max_body = 1 << 20, .stall_s = 30, .drain_s = 30, .keepalive_s = 10, .idle_timeout_s = 5,
                     .kv_disk_max_mib = 1024, .eplb_window = 1000, .eplb_interval = 1000, .eplb_min_bal = 0.9,
                     .expert_timeout_ms = 1000, .dbo_min_tokens = 2};
    ea_arg spec[] = {
        {"model", EA_ARG_STR, &f.model, "PATH", "model directory (HF) or .gguf file"},
        {"host", EA_ARG_STR, &f.host, "ADDR", "address to listen on (default 127.0.0.1)"},
        {"port", EA_ARG_INT, &f.port, "N", "port (default 8000; 0 = any free port, printed at start)", 0, 65535},
        {"api-key", EA_ARG_STR, &f.api_key, "KEY", "require 'Authorization: Bearer KEY' on /v1/* and /tokenize"},
        {"allowed-origins", EA_ARG_STR, &f.allowed_origins, "LIST",
         "CORS: comma-separated origins (or '*') allowed to call from a browser (default: none, no CORS headers)"},
        {"served-model-name", EA_ARG_STR, &f.served_name, "NAME", "model name in the API (default: the model's file name)"},
        {"threads", EA_ARG_INT, &f.threads, "N", "compute threads (default 0: CPU count)", 0, 4096},
        {"max-running", EA_ARG_INT, &f.max_running, "N", "sequences decoding at once (default 16)", 1, 4096},
        {"max-queue", EA_ARG_INT, &f.max_queue, "N", "waiting requests before 503 (default 256)", 0, 1 << 20},
        {"max-batch-tokens", EA_ARG_INT, &f.max_batch_tokens, "N", "tokens per forward step (default 512)", 1, 1 << 20},
        {"kv-cache-mib", EA_ARG_INT, &f.kv_mib, "N", "KV cache size (default 0: full context for every running sequence)", 0, 1 << 24},
        {"kv-cache-dtype", EA_ARG_STR, &f.kv_dtype, "f32|f16|bf16",
         "KV cache elements (default f32; f16 / bf16 halve its memory and reads, rounding each key and value once)"},
        {"max-ctx", EA_ARG_INT, &f.max_ctx, "N", "context length (default 0: the model's, at most 4096)", 0, 1 << 24},
        {"allow-long-max-ctx", EA_ARG_BOOL, &f.allow_long_ctx, NULL, "allow --max-ctx above the model's max_position_embeddings (also EAAS_ALLOW_LONG_MAX_CTX=1)"},
        {"no-prefix-cache", EA_ARG_BOOL, &f.no_prefix_cache, NULL, "turn the prefix cache off"},
        {"generation-config", EA_ARG_STR, &f.generation_config, "auto|vllm",
         "auto: sampling fields a request leaves out take generation_config.json's values (default); vllm: they do not"},
        {"reasoning-parser", EA_ARG_STR, &f.reasoning_parser, "none|qwen3|deepseek_r1|kimi_k2",
         "chat: return <think>...</think> as reasoning_content (default none: it stays in content, as vLLM without the flag)"},
        {"tool-call-parser", EA_ARG_STR, &f.tool_call_parser, "auto|hermes|qwen3_coder|deepseek_v3|deepseek_v31|kimi_k2|none",
         "chat: how the model writes tool calls (default auto: as its chat template renders them)"},
        {"kv-disk-dir", EA_ARG_STR, &f.kv_disk_dir, "DIR", "prefix cache disk tier: evicted KV blocks kept under DIR (off by default)"},
        {"kv-disk-max-mib", EA_ARG_INT, &f.kv_disk_max_mib, "N", "bound on this rank's disk tier files, oldest deleted first (1024; 0 = none)", 0, 1 << 30, "kv-disk-dir"},
        {"stall-seconds", EA_ARG_DOUBLE, &f.stall_s, "S", "/health is 503 after S s without a step while work waits (30)", 0, EA_WEEK_S},
        {"request-timeout", EA_ARG_DOUBLE, &f.request_timeout_s, "S", "cancel a request after S s with 504 (0 = never)", 0, EA_WEEK_S},
        {"drain-seconds", EA_ARG_DOUBLE, &f.drain_s, "S", "on SIGTERM/SIGINT, let requests finish for S s (30)", 0, EA_WEEK_S},
        {"keepalive-seconds", EA_ARG_DOUBLE, &f.keepalive_s, "S", "SSE keep-alive comment after S s of silence (10)", 0, EA_WEEK_S},
        {"idle-timeout-seconds", EA_ARG_DOUBLE, &f.idle_timeout_s, "S", "close a keep-alive connection idle for S s (5; 0 = never)", 0, EA_WEEK_S},
        {"max-body-bytes", EA_ARG_LONG, &f.max_body, "N", "largest request body; larger gets 413 (1 MiB)", 1024, 1 << 30},
        {"max-requests", EA_ARG_INT, &f.max_requests, "N", "exit after N generation requests (for tests; 0 = no limit)"},
        {"eplb", EA_ARG_BOOL, &f.eplb, NULL, "expert-placement load balancing (docs/eplb.md)"},
        {"eplb-redundant", EA_ARG_INT, &f.eplb_redundant, "R", "redundant expert slots per layer (default 0)", 0, 128, EA_EPLB_NEEDS},
        {"eplb-ranks", EA_ARG_INT, &f.eplb_ranks, "N", "ranks the placement spreads over (default 1; the world size under EP)", 1, 4096, EA_EPLB_NEEDS},
        {"eplb-window", EA_ARG_INT, &f.eplb_window, "W", "steps in the expert-load window (default 1000)", 1, 100000000, EA_EPLB_NEEDS},
        {"eplb-interval", EA_ARG_INT, &f.eplb_interval, "N", "check balance every N steps (default 1000; 0 or -1: only on request)", -1, 1000000000, EA_EPLB_NEEDS},
        {"eplb-min-balancedness", EA_ARG_DOUBLE, &f.eplb_min_bal, "X", "rebalance below this mean/max load (default 0.9; 0: only on request)", 0, 1, EA_EPLB_NEEDS},
        {"eplb-layers-per-step", EA_ARG_INT, &f.eplb_layers_per_step, "K", "layers switched per step (default 0: all)", 0, 100000, EA_EPLB_NEEDS},
        {"eplb-algorithm", EA_ARG_STR, &f.eplb_algorithm, "NAME", "deepseek (default) or refined", 0, 0, EA_EPLB_NEEDS},
        {"init-expert-location", EA_ARG_STR, &f.init_expert_location, "FILE", "initial placement (eplb place output); implies --eplb"},
        {"parallel", EA_ARG_STR, &f.parallel, "MODE", "expert|tensor over the ranks of an mpirun launch (rank 0 serves HTTP)"},
        {"dist-timeout", EA_ARG_DOUBLE, &f.dist_timeout, "S", "deadline of every MPI collective and of the control bus (30)", 0.001, EA_WEEK_S, "parallel"},
        {"dp-attention", EA_ARG_BOOL, &f.dp_attention, NULL, "expert mode: each rank runs its own requests' attention and KV cache; rank 0 assigns them (docs/parallel.md)", 0, 0, "parallel"},
        {"ep-capacity-factor", EA_ARG_DOUBLE, &f.ep_capacity_factor, "X", "expert mode: combine buffers per rank hold X times an even share of a step's pairs; the rest goes in more rounds, never dropped (1.25)", 0.01, 1000, "parallel"},
        {"experts-remote", EA_ARG_STR, &f.experts_remote, "HOST:PORT", "run the experts on expert servers (eaas expert) found through this monitor"},
        {"expert-timeout-ms", EA_ARG_INT, &f.expert_timeout_ms, "MS", "an expert server's answer to one call; past it the call goes to a replica (1000)", 1, 3600000, "experts-remote"},
        {"enable-dbo", EA_ARG_BOOL, &f.enable_dbo, NULL, "double-batch overlap: a step runs as two micro-batches, one's attention while the expert servers run the other's experts (two slots per server)", 0, 0, "experts-remote"},
        {"dbo-min-tokens", EA_ARG_INT, &f.dbo_min_tokens, "N", "overlap only steps of at least N tokens (2)", 2, 1 << 20, "enable-dbo"},
        {0}};
    ea_args_rest rest;
    int rc = ea_cli_parse("serve", usage_text, spec, argc, argv, &rest);
    if (rc >= 0) return rc;
    if (rest.n_pos > 0) return ea_cli_usage_error("serve", NULL, "unexpected argument '%s'", rest.pos[0]);
    if (f.init_expert_location) f.eplb = 1;
    if ((rc = check_flags(&f)) != 0) return rc;

    ea_cli_stop_signals(on_signal);

    ea_metrics *metrics = NULL;
    ea_http *http = NULL;
    ea_engine *engine = NULL;
    ea_serve_text *text = NULL;
    ea_sched *sched = NULL;
    ea_text_ops ops;
    ea_serve_ext_ctx ext_ctx = {0};
    ea_http_ext ext = {0};
    ea_dist *dist = NULL;
    ea_par_mode pmode = EA_PAR_NONE;
    ea_dist_bus bctx = {0};
    ea_sched_bus bus = {&bctx, 0, ea_dist_bus_bcast, ea_dist_bus_agree_min, .gather = ea_dist_bus_gather};
    ea_sched_stats ss = {0}; /* rank 0's last look at the scheduler; ss.failed: a rank was lost */
    int started = 0, rank = 0;
    ea_status st = EA_OK;
    rc = 1;
    const char *name = f.served_name ? f.served_name : base_name(f.model);
    /* MPI first (seed 002: the backend is initialised before anything is loaded) */
    if ((st = ea_par_launch(f.parallel, f.dist_timeout, &pmode, &dist)) != EA_OK) goto fail;
    if (dist) {
        rank = bus.rank = ea_dist_rank(dist);
        bctx.d = dist;
        bus.dp = f.dp_attention;
        bus.n_ranks = ea_dist_size(dist);
    }
    if (rank == 0) { /* only rank 0 opens the port */
        ea_http_opts ho = {.host = f.host, .port = f.port, .api_key = f.api_key, .served_model = name,
                           .version = ea_version_string, .commit = ea_version_commit,
                           .allowed_origins = f.allowed_origins,
                           .max_body_bytes = (size_t)f.max_body, .request_timeout_s = f.request_timeout_s,
                           .stall_seconds = f.stall_s, .keepalive_s = f.keepalive_s, .max_requests = f.max_requests,
                           .max_connections = max_connections(&f), .idle_timeout_s = f.idle_timeout_s};
        if ((st = ea_metrics_create(&metrics)) != EA_OK || (st = ea_http_start(&ho, metrics, &http)) != EA_OK) goto fail;
        EA_LOGI("listening on http://%s:%d (model '%s' loading%s%s)", f.host, ea_http_port(http), name,
                dist ? ", parallel " : "", dist ? ea_par_mode_name(pmode) : "");
        fflush(stderr);
    }

    double t_load = ea_now_s();
    ea_engine_opts eo = {.model_path = f.model, .threads = f.threads, .max_tokens = f.max_batch_tokens,
                         .max_ctx = f.max_ctx, .max_seqs = f.max_running, .kv_mib = (size_t)f.kv_mib,
                         .kv_dtype = (ea_dtype)ea_kv_dtype_parse(f.kv_dtype),
                         .progress = rank == 0 ? on_progress : NULL, .moe = ea_engine_moe_parallel(pmode, dist),
                         .eplb = {.on = f.eplb, .redundant = f.eplb_redundant, .ranks = f.eplb_ranks,
                                  .window = f.eplb_window,
                                  /* the engine reads interval -1 as "only on request"; min-balancedness 0 means the same here */
                                  .interval = f.eplb_interval > 0 && f.eplb_min_bal > 0 ? f.eplb_interval : -1,
                                  .min_balancedness = f.eplb_min_bal, .layers_per_step = f.eplb_layers_per_step,
                                  .algorithm = f.eplb_algorithm, .init_expert_location = f.init_expert_location}};
    eo.moe.ep.capacity_factor = f.ep_capacity_factor;
    eo.moe.ep.dp_attention = f.dp_attention;
    if (f.experts_remote && pmode == EA_PAR_NONE) /* under --parallel the ranks hold the experts */
        eo.moe = (ea_engine_moe_opts){.kind = EA_BACKEND_REMOTE,
                                      .remote = {.monitor = f.experts_remote, .timeout_s = f.expert_timeout_ms / 1000.0}};
    eo.dbo_min_tokens = f.enable_dbo ? f.dbo_min_tokens : 0;
    if ((st = ea_engine_create(&eo, &engine)) != EA_OK) goto fail;
    /* each rank's resident memory against the plan, on rank 0's log (a collective: every rank calls it) */
    if (engine->par && (st = ea_ep_engine_report_memory(engine->par, stderr)) != EA_OK) goto fail;
    /* every rank needs the tokenizer: stop strings end requests, and all ranks must agree when */
    if ((st = ea_serve_text_load(f.model, engine->m->cfg.vocab_size, &text, &ops)) != EA_OK) goto fail;
    int tfmt = ea_tool_format_parse(f.tool_call_parser);
    ops.tool_format = tfmt >= 0 ? (ea_tool_format)tfmt : ea_serve_text_tool_format(text, ea_arch_names[engine->m->cfg.arch]);
    ops.reasoning = (ea_reasoning_mode)ea_reasoning_mode_parse(f.reasoning_parser);
    ops.test_hooks = getenv("EAAS_TEST_HOOKS") && !strcmp(getenv("EAAS_TEST_HOOKS"), "1");
    if (ops.test_hooks && rank == 0) EA_LOGW("EAAS_TEST_HOOKS=1: requests may force the model's output (tests only)");
    ea_sched_opts so = {.bus = dist ? &bus : NULL, .max_running = f.max_running, .max_queue = f.max_queue,
                        .max_batch_tokens = f.max_batch_tokens, .prefix_cache = !f.no_prefix_cache,
                        .model_sampling_defaults = strcmp(f.generation_config, "vllm") != 0,
                        .kv_disk_dir = f.kv_disk_dir, .kv_disk_max_mib = (size_t)f.kv_disk_max_mib,
                        .par_mode = dist ? ea_par_mode_name(pmode) : "single", .par_world = dist ? ea_dist_size(dist) : 1,
                        .par_rank = rank};
    so.compile_grammar = ea_oai_constraint_compile; /* constrained requests: every rank builds rank 0's grammar */
    if ((st = ea_sched_create(engine, ea_serve_text_tokenizer(text), &so, &sched)) != EA_OK) goto fail;
    if (rank != 0) {
        EA_LOGI("rank %d of %d: model loaded in %.1f s; following rank 0's control bus", rank, ea_dist_size(dist),
                ea_now_s() - t_load);
        st = ea_sched_run(sched); /* until rank 0 sends shutdown, or the bus fails */
        rc = st == EA_OK ? 0 : 1;
        goto fail;
    }
    ext_ctx.eplb = engine->eplb;
    ext_ctx.be = engine->be;
    ext_ctx.sched = sched;
    ea_serve_ext_init(&ext_ctx, &ext);
    ea_http_set_ext(http, &ext);
    if ((st = ea_sched_start(sched)) != EA_OK) goto fail;
    started = 1;
    ea_http_set_ready(http, sched, &ops, ea_sched_context_len(sched));
    EA_LOGI("ready: model '%s' loaded in %.1f s, context %d, max-running %d, max-batch-tokens %d, KV cache %lld "
            "tokens (%s)", name, ea_now_s() - t_load, ea_sched_context_len(sched), f.max_running, f.max_batch_tokens,
            (long long)engine->kv.n_blocks * engine->kv.block_size, ea_dtypes[engine->kv.dtype].name);
    fflush(stderr);

    while (!g_stop && !ea_http_exit_requested(http)) {
        ea_sched_get_stats(sched, &ss);
        if (ss.failed && dist) break; /* lockstep lost: a rank died; requests were answered with the error */
        sleep_ms(50);
    }
    if (g_stop) {
        EA_LOGI("shutting down (signal): draining for up to %g s", f.drain_s);
    } else if (ss.failed) {
        EA_LOGE("shutting down (a rank failed: %s): /health answers 503 for %g s", ss.failure, f.drain_s);
        ea_http_begin_drain(http);
        for (double t_end = ea_now_s() + f.drain_s; !g_stop && ea_now_s() < t_end;) sleep_ms(50);
    } else {
        EA_LOGI("shutting down (--max-requests %d reached): draining for up to %g s", f.max_requests, f.drain_s);
    }
    rc = 0;
fail:
    if (rc && ea_par_report_here(dist)) ea_cli_fail(argv[0], st);
    if (http) ea_http_begin_drain(http);
    if (started) ea_http_shutdown(http, f.drain_s, second_signal, NULL);
    ea_http_stop(http);
    ea_sched_destroy(sched);
    ea_serve_text_destroy(text);
    ea_engine_destroy(engine);
    ea_metrics_destroy(metrics);
    ea_dist_bus_deinit(&bctx);
    ea_dist_destroy(dist);
    if (!rc && rank == 0) EA_LOGI("stopped");
    return rc ? rc : ss.failed ? 1 : 0; /* a lost rank is a failure for whoever restarts us */
}
