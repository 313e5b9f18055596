/*
 * cmd_perplexity.c — `eaas perplexity`: the check users run after converting
 * or quantising a model, computed the way llama.cpp's perplexity tool does so
 * the numbers compare:
 *   - the whole file is tokenized once (BOS added if the tokenizer adds one);
 *   - it is cut into non-overlapping windows of --ctx tokens; window i holds
 *     tokens [i*ctx, (i+1)*ctx); when the tokenizer adds BOS, the window's first
 *     token is replaced by BOS;
 *   - each window is evaluated from an empty KV cache, and only predictions of
 *     its second half are scored: for j in [ctx/2, ctx-1) the negative log
 *     likelihood of token j+1 given logits at j (ctx - ctx/2 - 1 per window);
 *   - after each window the running estimate exp(mean NLL) is printed as
 *     "[i]value"; the last line is "PPL = <value> +/- <stderr>".
 * log-softmax is computed in double per row.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/args.h"
#include "base/util.h"
#include "cli/commands.h"
#include "serve/engine.h"
#include "tokenizer/tokenizer.h"

#define EA_PPL_ROWS 64 /* logits rows per forward call */

static const char usage_text[] =
    "usage: eaas perplexity --model M --file TEXT [--ctx N] [--chunks K] [--threads N]\n\n"
    "Perplexity of the model on a text, with llama.cpp's method (windows of N tokens,\n"
    "second half of each scored). The last line is 'PPL = <value> +/- <error>'.\n\n";

int ea_cmd_perplexity(int argc, char **argv) {
    const char *model = NULL, *file = NULL;
    int ctx = 512, chunks = -1, threads = 0, allow_long = 0; /* chunks -1: all */
    ea_arg spec[] = {{"model", EA_ARG_STR, &model, "PATH", "model directory (HF) or .gguf file"},
                     {"file", EA_ARG_STR, &file, "TEXT", "text file to score"},
                     {"ctx", EA_ARG_INT, &ctx, "N", "window length in tokens (default 512)", 8, 1 << 24},
                     {"allow-long-max-ctx", EA_ARG_BOOL, &allow_long, NULL, "allow --ctx above the model's max_position_embeddings (also EAAS_ALLOW_LONG_MAX_CTX=1)"},
                     {"chunks", EA_ARG_INT, &chunks, "K", "score at most K windows (default: all)", 1, 1 << 30},
                     {"threads", EA_ARG_INT, &threads, "N", "threads (default 0: CPU count)", 0, 4096},
                     {0}};
    ea_args_rest rest;
    int rc = ea_cli_parse("perplexity", usage_text, spec, argc, argv, &rest);
    if (rc >= 0) return rc;
    if (!model || !file || rest.n_pos)
        return ea_cli_usage_error("perplexity", NULL, "--model and --file are required (see --help)");
    if ((rc = ea_cli_check_model(argv[0], model, ctx, "--ctx", allow_long)) != 0) return rc;
    ea_status s;
    ea_tokenizer *tok = NULL;
    ea_engine *e = NULL;
    char *text = NULL;
    size_t n_text = 0;
    ea_tokens ids = {0}, bos = {0};
    float *logits = NULL;
    int32_t *pos = NULL, *seq = NULL, *rows = NULL;
    rc = 1;

    if ((s = ea_read_file(file, &text, &n_text)) != EA_OK) goto fail;
    if ((s = ea_tokenizer_load(model, &tok)) != EA_OK) goto fail;
    if ((s = ea_tokenizer_encode(tok, text, n_text, EA_TOK_ADD_SPECIAL, &ids)) != EA_OK) goto fail;
    /* does the tokenizer add BOS? encode "" with specials and see */
    if ((s = ea_tokenizer_encode(tok, "", 0, EA_TOK_ADD_SPECIAL, &bos)) != EA_OK) goto fail;
    int add_bos = bos.n > 0;
    int n_windows = (int)(ids.n / (size_t)ctx);
    if (chunks >= 0 && chunks < n_windows) n_windows = chunks;
    if (n_windows < 1) {
        s = ea_err(EA_ERR_INVALID_ARG, "%s: %zu tokens, fewer than one window of %d (use a smaller --ctx)", file, ids.n, ctx);
        goto fail;
    }
    ea_engine_opts eo = {.model_path = model, .threads = threads, .max_tokens = 512, .max_ctx = ctx, .max_seqs = 1};
    if ((s = ea_engine_create(&eo, &e)) != EA_OK) goto fail;
    int V = e->m->cfg.vocab_size, T = e->o.max_tokens;
    logits = malloc(sizeof(float) * (size_t)V * EA_PPL_ROWS);
    pos = malloc(sizeof(int32_t) * (size_t)T);
    seq = calloc((size_t)T, sizeof(int32_t));
    rows = malloc(sizeof(int32_t) * EA_PPL_ROWS);
    if (!logits || !pos || !seq || !rows) {
        s = ea_err(EA_ERR_NOMEM, "perplexity buffers");
        goto fail;
    }
    fprintf(stderr, "eaas perplexity: %zu tokens, %d windows of %d, scoring %d tokens each%s\n", ids.n, n_windows, ctx,
            ctx - ctx / 2 - 1, add_bos ? " (BOS first)" : "");
    double nll = 0, nll2 = 0, t0 = ea_now_s();
    long count = 0;
    int first = ctx / 2;
    int32_t *win = malloc(sizeof(int32_t) * (size_t)ctx);
    if (!win) {
        s = ea_err(EA_ERR_NOMEM, "perplexity window");
        goto fail;
    }
    for (int w = 0; w < n_windows; w++) {
        memcpy(win, ids.ids + (size_t)w * ctx, sizeof(int32_t) * (size_t)ctx);
        if (add_bos) win[0] = bos.ids[0];
        ea_kv_seq_release(&e->kv, 0);
        if ((s = ea_kv_seq_reserve(&e->kv, 0, ctx)) != EA_OK) break;
        /* calls of at most EA_PPL_ROWS tokens once scoring starts, of T before */
        for (int at = 0; at < ctx && s == EA_OK;) {
            int lim = at < first ? (first - at < T ? first - at : T) : (ctx - at < EA_PPL_ROWS ? ctx - at : EA_PPL_ROWS);
            int n_out = 0;
            for (int i = 0; i < lim; i++) {
                pos[i] = at + i;
                if (at + i >= first && at + i < ctx - 1) rows[n_out++] = i;
            }
            s = ea_forward_run(e->fw, lim, win + at, pos, seq, n_out, rows, logits);
            ea_moe_end_step(e->be);
            for (int r = 0; r < n_out && s == EA_OK; r++) {
                const float *l = logits + (size_t)r * V;
                int j = at + rows[r];
                float m = l[0];
                for (int i = 1; i < V; i++) m = l[i] > m ? l[i] : m;
                double z = 0;
                for (int i = 0; i < V; i++) z += exp((double)l[i] - m);
                double v = -((double)l[win[j + 1]] - m - log(z));
                nll += v;
                nll2 += v * v;
                count++;
            }
            at += lim;
        }
        if (s != EA_OK) break;
        printf("[%d]%.4f%s", w + 1, exp(nll / count), (w + 1) % 8 == 0 ? "\n" : ",");
        fflush(stdout);
    }
    free(win);
    if (s != EA_OK) goto fail;
    double mean = nll / count, var = nll2 / count - mean * mean;
    double ppl = exp(mean), err = count > 1 && var > 0 ? ppl * sqrt(var / (count - 1)) : 0;
    printf("\n%d windows, %ld tokens scored in %.2f s\nPPL = %.4f +/- %.5f\n", n_windows, count, ea_now_s() - t0, ppl, err);
    rc = 0;
fail:
    if (rc) ea_cli_fail(argv[0], s);
    free(logits);
    free(pos);
    free(seq);
    free(rows);
    ea_tokens_free(&ids);
    ea_tokens_free(&bos);
    ea_free(text);
    ea_tokenizer_destroy(tok);
    ea_engine_destroy(e);
    return rc;
}
