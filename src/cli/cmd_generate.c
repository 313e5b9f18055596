/*
 * cmd_generate.c — `eaas generate`: one prompt, streamed to stdout.
 *
 * The prompt is tokenized (with the chat template when --chat) and submitted
 * to the same scheduler the server runs (serve/scheduler.h), so prefill,
 * sampling, the ids that are never sampled, EOS, stop strings and the text
 * (whole UTF-8 characters, invalid bytes as U+FFFD) are the server's: the same
 * model, prompt, seed and sampling fields give the same text as a request to
 * `eaas serve`. Sampling defaults come from the model's generation_config.json
 * for what is not given (vLLM's --generation-config auto; `vllm` turns that
 * off), as in the server. Under mpirun the other ranks follow rank 0's control
 * bus. Timing goes to stderr: prompt tokens/s (prefill) and decode tokens/s.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/args.h"
#include "base/sbuf.h"
#include "base/util.h"
#include "cli/commands.h"
#include "ep/bus.h"
#include "ep/ep_engine.h"
#include "serve/engine.h"
#include "serve/scheduler.h"
#include "serve/stop_text.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

static const char *usage_text =
    "usage: eaas generate --model M --prompt TEXT [flags]\n\n"
    "Generate text from a prompt and stream it to stdout; speed goes to stderr.\n\n";

static ea_status render_chat(const char *model, const char *system, const char *prompt, char **out) {
    json_t *msgs = json_array();
    if (system) json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "system", "content", system));
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", prompt));
    size_t n;
    ea_status s = ea_chat_render_model(model, msgs, NULL, 1, NULL, out, &n);
    json_decref(msgs);
    return s;
}

int ea_cmd_generate(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *system = NULL;
    int chat = 0, max_tokens = 128, ignore_eos = 0, threads = 0, top_k = 0, ctx = 0, allow_long = 0;
    long seed = 0;
    double temperature = -1, top_p = -1, min_p = 0, dist_timeout = -1; /* -1: not given */
    const char *parallel = NULL, *stop = NULL, *gen_config = "auto", *kv_dtype = "f32";
    ea_arg spec[] = {
        {"model", EA_ARG_STR, &model, "PATH", "model directory (HF) or .gguf file"},
        {"prompt", EA_ARG_STR, &prompt, "TEXT", "the prompt"},
        {"chat", EA_ARG_BOOL, &chat, NULL, "wrap the prompt as a user message with the chat template"},
        {"system", EA_ARG_STR, &system, "TEXT", "system message", 0, 0, "chat"},
        {"max-tokens", EA_ARG_INT, &max_tokens, "N", "tokens to generate (default 128)", 1, 1 << 24},
        {"ignore-eos", EA_ARG_BOOL, &ignore_eos, NULL, "do not stop at end-of-sequence tokens"},
        {"threads", EA_ARG_INT, &threads, "N", "threads (default 0: CPU count)", 0, 4096},
        {"ctx", EA_ARG_INT, &ctx, "N", "context length (default 0: min(model, 4096))", 0, 1 << 24},
        {"allow-long-max-ctx", EA_ARG_BOOL, &allow_long, NULL, "allow --ctx above the model's max_position_embeddings (also EAAS_ALLOW_LONG_MAX_CTX=1)"},
        {"temperature", EA_ARG_DOUBLE, &temperature, "T", "0 = greedy (default: generation_config, else 1)"},
        {"top-p", EA_ARG_DOUBLE, &top_p, "P", "nucleus sampling (default: generation_config, else 1)", 0, 1},
        {"top-k", EA_ARG_INT, &top_k, "K", "top-k sampling, 0 or -1 = off (default: generation_config, else off)", -1, 1 << 30},
        {"min-p", EA_ARG_DOUBLE, &min_p, "P", "min-p sampling (default 0: off)", 0, 1},
        {"seed", EA_ARG_LONG, &seed, "S", "random seed (default 0)"},
        {"stop", EA_ARG_STR, &stop, "TEXT", "stop when the output contains TEXT (not printed), as the API's stop"},
        {"kv-cache-dtype", EA_ARG_STR, &kv_dtype, "f32|f16|bf16", "KV cache elements (default f32)"},
        {"generation-config", EA_ARG_STR, &gen_config, "auto|vllm",
         "auto: sampling fields not given take generation_config.json's values (default); vllm: they do not"},
        {"parallel", EA_ARG_STR, &parallel, "MODE", "expert|tensor: split the model over the ranks of an mpirun launch"},
        {"dist-timeout", EA_ARG_DOUBLE, &dist_timeout, "S", "deadline of every MPI collective in seconds (default 30)", 0.001, 604800, "parallel"},
        {0}};
    ea_args_rest rest;
    int rc = ea_cli_parse("generate", usage_text, spec, argc, argv, &rest);
    if (rc >= 0) return rc;
    if (!model || !prompt || rest.n_pos)
        return ea_cli_usage_error("generate", NULL, "%s (see --help)",
                                  rest.n_pos ? "unexpected argument; quote the prompt" : "--model and --prompt are required");
    if ((rc = ea_cli_check_model(argv[0], model, ctx, "--ctx", allow_long)) != 0) return rc;
    if (strcmp(gen_config, "auto") && strcmp(gen_config, "vllm"))
        return ea_cli_usage_error("generate", NULL, "--generation-config: '%s', expected auto or vllm", gen_config);
    if (ea_kv_dtype_parse(kv_dtype) < 0)
        return ea_cli_usage_error("generate", NULL, "--kv-cache-dtype: '%s', expected f32, f16 or bf16", kv_dtype);
    if (stop && (!stop[0] || strlen(stop) >= EA_STOP_TEXT_HOLD / 2))
        return ea_cli_usage_error("generate", NULL, "--stop: 1 to %d bytes", EA_STOP_TEXT_HOLD / 2 - 1);
    ea_status s;

    ea_tokenizer *tok = NULL;
    ea_engine *e = NULL;
    ea_sched *sched = NULL;
    ea_request *req = NULL;
    char *text = NULL;
    ea_tokens ids = {0};
    ea_sbuf out = {0};
    rc = 1;
    ea_dist *dist = NULL;
    ea_dist_bus bctx = {0};
    ea_sched_bus bus = {&bctx, 0, ea_dist_bus_bcast, ea_dist_bus_agree_min};
    ea_par_mode pmode = EA_PAR_NONE;
    int started = 0;
    if ((s = ea_par_launch(parallel, dist_timeout, &pmode, &dist)) != EA_OK) goto fail;
    ea_par_quiet_stdout(dist); /* only rank 0 prints the text */
    int rank = dist ? ea_dist_rank(dist) : 0;
    bctx.d = dist;
    bus.rank = rank;

    ea_engine_opts eo = {.model_path = model, .threads = threads, .max_tokens = 512, .max_ctx = ctx, .max_seqs = 1,
                         .kv_dtype = (ea_dtype)ea_kv_dtype_parse(kv_dtype), .moe = ea_engine_moe_parallel(pmode, dist)};
    if ((s = ea_engine_create(&eo, &e)) != EA_OK) goto fail;
    if ((s = ea_tokenizer_load(model, &tok)) != EA_OK) goto fail;
    ea_sched_opts so = {.bus = dist ? &bus : NULL, .max_running = 1, .max_queue = 1, .max_batch_tokens = 512,
                        .model_sampling_defaults = strcmp(gen_config, "vllm") != 0};
    if ((s = ea_sched_create(e, tok, &so, &sched)) != EA_OK) goto fail;
    if (rank != 0) { /* follow rank 0's control bus until it shuts down */
        s = ea_sched_run(sched);
        if (s == EA_OK) rc = 0;
        goto fail;
    }
    if ((s = ea_sched_start(sched)) != EA_OK) goto fail;
    started = 1;
    if (chat) {
        if ((s = render_chat(model, system, prompt, &text)) != EA_OK) goto fail;
        s = ea_tokenizer_encode(tok, text, strlen(text), EA_TOK_PARSE_SPECIAL, &ids);
    } else {
        s = ea_tokenizer_encode(tok, prompt, strlen(prompt), EA_TOK_ADD_SPECIAL | EA_TOK_PARSE_SPECIAL, &ids);
    }
    if (s != EA_OK) goto fail;
    int n_prompt = (int)ids.n, max_ctx = e->o.max_ctx;
    if (n_prompt == 0) {
        s = ea_err(EA_ERR_INVALID_ARG, "the prompt has no tokens");
        goto fail;
    }
    if (n_prompt >= max_ctx) {
        s = ea_err(EA_ERR_RANGE, "the prompt has %d tokens; the context holds %d", n_prompt, max_ctx);
        goto fail;
    }
    if (n_prompt + max_tokens > max_ctx) max_tokens = max_ctx - n_prompt;

    ea_req_params rp = {.prompt = ids.ids, .n_prompt = n_prompt, .max_tokens = max_tokens, .ignore_eos = ignore_eos,
                        .n_stop = stop ? 1 : 0};
    rp.stop[0] = stop;
    ea_sampling_defaults(&rp.sp);
    if (temperature >= 0) rp.sp.temperature = (float)temperature, rp.sp.given |= EA_SP_TEMPERATURE;
    if (top_p >= 0) rp.sp.top_p = (float)top_p, rp.sp.given |= EA_SP_TOP_P;
    if (ea_args_given(spec, &rest, "top-k")) rp.sp.top_k = top_k > 0 ? top_k : 0, rp.sp.given |= EA_SP_TOP_K;
    rp.sp.min_p = (float)min_p;
    rp.sp.seed = (uint64_t)seed;
    if ((s = ea_sched_submit(sched, &rp, &req)) != EA_OK) goto fail;
    ea_event ev;
    int done = 0;
    while (!done) {
        if ((s = ea_req_next(req, 1000, &ev)) == EA_ERR_TIMEOUT) continue;
        if (s != EA_OK) goto fail;
        if (ev.kind == EA_EV_TOKEN && ev.text_len > 0) {
            out.len = 0;
            ea_sbuf_append_utf8(&out, ev.text, (size_t)ev.text_len);
            fwrite(out.data, 1, out.len, stdout);
            fflush(stdout);
        } else if (ev.kind == EA_EV_ERROR) {
            s = ea_err(ev.status ? ev.status : EA_ERR_INTERNAL, "%s", ev.message);
            goto fail;
        }
        done = ev.kind == EA_EV_DONE;
    }
    printf("\n");
    double t_arr, t_first, t_end, t_queue;
    ea_req_times(req, &t_arr, &t_first, &t_end, &t_queue);
    int n_gen = ev.completion_tokens;
    fprintf(stderr,
            "eaas generate: prompt %d tokens in %.3f s (%.2f tok/s), generated %d tokens in %.3f s (%.2f tok/s), "
            "%d threads, isa %s\n",
            n_prompt, t_first - t_arr, n_prompt / (t_first - t_arr), n_gen, t_end - t_first,
            n_gen > 1 ? (n_gen - 1) / (t_end - t_first) : 0.0, ea_pool_size(e->pool), ea_kctx_isa(e->kctx));
    rc = 0;
fail:
    if (req) ea_req_release(req);
    if (started) ea_sched_stop(sched, 0); /* rank 0: shuts the followers down through the bus */
    /* every rank that reached the scheduler, whatever happened since: the report is a collective */
    if (sched && e->par && ea_dist_healthy(dist)) {
        ea_status ms = ea_ep_engine_report_memory(e->par, stderr);
        if (rc == 0 && ms != EA_OK) rc = 1, s = ms;
    }
    if (rc && ea_par_report_here(dist)) ea_cli_fail(argv[0], s);
    ea_sched_destroy(sched);
    ea_sbuf_deinit(&out);
    ea_tokens_free(&ids);
    ea_free(text);
    ea_tokenizer_destroy(tok);
    ea_engine_destroy(e);
    ea_dist_bus_deinit(&bctx);
    ea_dist_destroy(dist);
    return rc;
}
