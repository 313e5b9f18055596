/*
 * cmd_generate.c — `eaas generate`: one prompt, streamed to stdout.
 *
 * The prompt is tokenized (with the chat template when --chat), prefilled in
 * chunks of up to 512 tokens, then decoded one token per step until EOS,
 * --max-tokens, or the context end. Sampling defaults come from the model's
 * generation_config.json (as vLLM does) unless given; --temperature 0 is
 * greedy. Text is streamed as whole UTF-8 characters. Timing goes to stderr:
 * prompt tokens/s (prefill) and decode tokens/s.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/args.h"
#include "base/util.h"
#include "cli/commands.h"
#include "ep/ep_engine.h"
#include "serve/engine.h"
#include "serve/sampler.h"
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

static int is_eos(const ea_model_config *c, int32_t t) {
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_token_ids[i] == t) return 1;
    return 0;
}

int ea_cmd_generate(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *system = NULL;
    int chat = 0, max_tokens = 128, ignore_eos = 0, threads = 0, top_k = 0, ctx = 0, allow_long = 0;
    long seed = 0;
    double temperature = -1, top_p = -1, min_p = 0, dist_timeout = -1; /* -1: not given */
    const char *parallel = NULL;
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
        {"parallel", EA_ARG_STR, &parallel, "MODE", "expert|tensor: split the model over the ranks of an mpirun launch"},
        {"dist-timeout", EA_ARG_DOUBLE, &dist_timeout, "S", "deadline of every MPI collective in seconds (default 30)", 0.001, 604800, "parallel"},
        {0}};
    ea_args_rest rest;
    int rc = ea_cli_parse("generate", usage_text, spec, argc, argv, &rest);
    if (rc >= 0) return rc;
    if (!model || !prompt || rest.n_pos) {
        fprintf(stderr, "eaas generate: %s (see --help)\n",
                rest.n_pos ? "unexpected argument; quote the prompt" : "--model and --prompt are required");
        return 2;
    }
    if ((rc = ea_cli_check_model(argv[0], model, ctx, "--ctx", allow_long)) != 0) return rc;
    ea_status s;

    ea_tokenizer *tok = NULL;
    ea_engine *e = NULL;
    ea_sampler *sm = NULL;
    char *text = NULL;
    ea_tokens ids = {0};
    float *logits = NULL;
    int32_t *chunk = NULL, *pos = NULL, *seq = NULL;
    rc = 1;
    ea_dist *dist = NULL;
    ea_par_mode pmode = EA_PAR_NONE;
    if ((s = ea_par_launch(parallel, dist_timeout, &pmode, &dist)) != EA_OK) goto fail;
    ea_par_quiet_stdout(dist); /* only rank 0 prints the text */

    ea_engine_opts eo = {.model_path = model, .threads = threads, .max_tokens = 512, .max_ctx = ctx, .max_seqs = 1,
                         .dist = dist, .parallel = pmode};
    if ((s = ea_engine_create(&eo, &e)) != EA_OK) goto fail;
    if ((s = ea_tokenizer_load(model, &tok)) != EA_OK) goto fail;
    const ea_model_config *c = &e->m->cfg;
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

    ea_sampling_params sp;
    ea_sampling_defaults(&sp);
    sp.temperature = temperature >= 0 ? (float)temperature : c->gen_temperature >= 0 ? c->gen_temperature : 1.0f;
    sp.top_p = top_p >= 0 ? (float)top_p : c->gen_top_p >= 0 ? c->gen_top_p : 1.0f;
    sp.top_k = ea_args_given(spec, &rest, "top-k") ? (top_k > 0 ? top_k : 0) : c->gen_top_k >= 0 ? c->gen_top_k : 0;
    sp.min_p = (float)min_p;
    sp.seed = (uint64_t)seed;
    ea_rng rng;
    ea_rng_seed(&rng, sp.seed);

    int V = c->vocab_size, T = e->o.max_tokens;
    logits = malloc(sizeof(float) * (size_t)V);
    chunk = malloc(sizeof(int32_t) * (size_t)T);
    pos = malloc(sizeof(int32_t) * (size_t)T);
    seq = calloc((size_t)T, sizeof(int32_t));
    if (!logits || !chunk || !pos || !seq || (s = ea_sampler_create(V, &sm)) != EA_OK) {
        s = s != EA_OK ? s : ea_err(EA_ERR_NOMEM, "generate buffers");
        goto fail;
    }
    if ((s = ea_kv_seq_reserve(&e->kv, 0, n_prompt + max_tokens)) != EA_OK) goto fail;

    double t0 = ea_now_s();
    for (int at = 0; at < n_prompt; at += T) {
        int n = n_prompt - at < T ? n_prompt - at : T;
        for (int i = 0; i < n; i++) chunk[i] = ids.ids[at + i], pos[i] = at + i;
        int32_t last = n - 1;
        if ((s = ea_forward_run(e->fw, n, chunk, pos, seq, at + n == n_prompt ? 1 : 0, &last, logits)) != EA_OK)
            goto fail;
        ea_moe_end_step(e->be);
    }
    double t1 = ea_now_s();
    ea_detok_stream ds;
    ea_detok_stream_init(&ds, EA_DETOK_SKIP_SPECIAL);
    ea_tok_text out = {0};
    int n_gen = 0;
    for (;;) {
        int32_t t = ea_sample(sm, &sp, &rng, logits, NULL, NULL);
        n_gen++;
        if (!ignore_eos && is_eos(c, t)) break;
        out.len = 0;
        if ((s = ea_detok_stream_push(tok, &ds, t, &out)) != EA_OK) goto fail;
        if (out.len) {
            fwrite(out.data, 1, out.len, stdout);
            fflush(stdout);
        }
        if (n_gen >= max_tokens) break;
        int32_t p = n_prompt + n_gen - 1, z = 0;
        if ((s = ea_forward_run(e->fw, 1, &t, &p, seq, 1, &z, logits)) != EA_OK) goto fail;
        ea_moe_end_step(e->be);
    }
    out.len = 0;
    ea_detok_stream_flush(&ds, &out);
    if (out.len) fwrite(out.data, 1, out.len, stdout);
    ea_tok_text_free(&out);
    double t2 = ea_now_s();
    printf("\n");
    if (!dist || ea_dist_rank(dist) == 0)
        fprintf(stderr, "eaas generate: prompt %d tokens in %.3f s (%.2f tok/s), generated %d tokens in %.3f s (%.2f tok/s), %d threads, isa %s\n",
            n_prompt, t1 - t0, n_prompt / (t1 - t0), n_gen, t2 - t1, n_gen > 1 ? (n_gen - 1) / (t2 - t1) : 0.0,
            ea_pool_size(e->pool), ea_kctx_isa(e->kctx));
    if (e->par && (s = ea_ep_engine_report_memory(e->par, stderr)) != EA_OK) goto fail;
    rc = 0;
fail:
    if (rc && ea_par_report_here(dist)) ea_cli_fail(argv[0], s);
    free(logits);
    free(chunk);
    free(pos);
    free(seq);
    ea_tokens_free(&ids);
    ea_free(text);
    ea_sampler_destroy(sm);
    ea_tokenizer_destroy(tok);
    ea_engine_destroy(e);
    ea_dist_destroy(dist);
    return rc;
}
