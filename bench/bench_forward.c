/*
 * bench_forward.c — decode and prefill speed of the forward pass, as JSON lines.
 *
 *   bench_forward --model M [--threads N] [--batches 1,4,16,64] [--steps S]
 *                 [--rounds R] [--prefill 512] [--chunk C] [--reps R] [--membw-mb N | --membw-gbs X]
 *
 * decode at batch B: B sequences, each with a 16-token prompt already in the
 * cache, then S steps of one token per sequence in one forward call per step;
 * tokens/s = B*S / time. With --rounds R the batch list runs R times in turn
 * and each line reports the median round and its ratio to batch 1's median. prefill: one sequence, a P-token prompt in calls of
 * up to --chunk tokens, run R times; "tok_s" is the best run, "first_tok_s"
 * the first (which also pays first-touch page faults). Token ids are fixed pseudo-random values (speed does
 * not depend on them beyond routing, which random ids exercise).
 * "bw_frac" is the decode speed at batch 1 relative to the memory-bandwidth
 * bound: active weight bytes per token / bandwidth. The bandwidth is read in
 * this process right before every batch-1 round (bench_membw's reader, on a
 * buffer of --membw-mb MiB, with the engine's threads, best of 3 passes), so
 * each round has its own fraction ("bw_frac_rounds"; "bw_frac" is their
 * median): on a shared machine the bandwidth itself moves by a fifth between
 * minutes. --membw-gbs X takes a fixed bandwidth instead; --membw-mb 0 reads
 * none. The last line reports peak RSS against weights + KV cache +
 * activations.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "membw.h"

#include "base/args.h"
#include "base/util.h"
#include "serve/engine.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int parse_list(const char *s, int *out, int max) {
    int n = 0;
    while (*s && n < max) {
        out[n++] = atoi(s);
        const char *c = strchr(s, ',');
        if (!c) break;
        s = c + 1;
    }
    return n;
}

/* Active weight bytes per token: everything but the routed experts, plus k experts per MoE layer,
 * minus the embedding table (one row is read). */
static double active_bytes(const ea_model *m) {
    const ea_model_config *c = &m->cfg;
    double total = (double)m->weight_bytes, experts_all = 0, experts_active = 0;
    for (int l = 0; l < c->n_layers; l++) {
        if (!c->layer_is_moe[l]) continue;
        const ea_ffn_weights *e = &m->layers[l].experts[0];
        double one = (double)(e->gate.nbytes + e->up.nbytes + e->down.nbytes);
        experts_all += one * c->n_experts;
        experts_active += one * c->n_experts_per_tok;
    }
    return total - experts_all + experts_active - (double)m->tok_embd.nbytes;
}

/* Per token and phase of ea_forward_times: the weight bytes a batch-1 step
 * reads and the weights' multiply-adds (one per weight; attention scores not
 * counted). Router; experts (the k routed, the shared one and its gate); LM
 * head; attention: its projections' params, and bytes = the rest of
 * active_bytes (the projections and the norms). */
static double numel(const ea_tensor *t) { return t->data ? (double)ea_tensor_rows(t) * (double)ea_tensor_cols(t) : 0.0; }
static double ffn_numel(const ea_ffn_weights *w) { return numel(&w->gate) + numel(&w->up) + numel(&w->down); }

static void phase_work(const ea_model *m, double active, double bytes[EA_N_PHASES], double macs[EA_N_PHASES]) {
    const ea_model_config *c = &m->cfg;
    memset(bytes, 0, sizeof(double) * EA_N_PHASES);
    memset(macs, 0, sizeof(double) * EA_N_PHASES);
    for (int l = 0; l < c->n_layers; l++) {
        const ea_layer_weights *L = &m->layers[l];
        const ea_tensor *att[] = {&L->wq,  &L->wk,    &L->wv,    &L->wo,    &L->wq_a,  &L->wq_b,  &L->wkv_a,
                                  &L->wkv_b, &L->lin_qkv, &L->lin_z, &L->lin_b, &L->lin_a, &L->lin_out};
        for (size_t i = 0; i < sizeof att / sizeof *att; i++) macs[EA_PHASE_ATTENTION] += numel(att[i]);
        if (!c->layer_is_moe[l]) continue;
        const ea_ffn_weights *e = &L->experts[0], *sh = &L->shared;
        bytes[EA_PHASE_ROUTER] += (double)L->router.nbytes;
        macs[EA_PHASE_ROUTER] += numel(&L->router);
        bytes[EA_PHASE_EXPERTS] += (double)(e->gate.nbytes + e->up.nbytes + e->down.nbytes) * c->n_experts_per_tok +
                                   (double)(sh->gate.nbytes + sh->up.nbytes + sh->down.nbytes + L->shared_gate.nbytes);
        macs[EA_PHASE_EXPERTS] += ffn_numel(e) * c->n_experts_per_tok + ffn_numel(sh) + numel(&L->shared_gate);
    }
    bytes[EA_PHASE_LM_HEAD] = (double)m->lm_head.nbytes;
    macs[EA_PHASE_LM_HEAD] = numel(&m->lm_head);
    bytes[EA_PHASE_ATTENTION] = active - bytes[EA_PHASE_ROUTER] - bytes[EA_PHASE_EXPERTS] - bytes[EA_PHASE_LM_HEAD];
}

/* One "<bench>_phases" line (--phases): µs per token of each phase, the GB/s
 * its weights streamed at (batch-1 decode: each weight read once a step) and
 * G multiply-adds/s of its products; `tokens` rows were timed, of which
 * `lm_rows` went through the LM head; rest = embedding, norms, residuals. */
static void print_phases(const char *bench, const char *head, int batch, const ea_forward_times *t, double tokens,
                         double lm_rows, const double *bytes, const double *macs, double membw) {
    static const char *names[EA_N_PHASES] = {"attention", "attend", "router", "experts", "lm_head"};
    double rest = t->total;
    printf("{\"bench\":\"%s_phases\",%s,\"batch\":%d,\"tokens\":%.0f,\"us_per_token\":{", bench, head, batch, tokens);
    for (int i = 0; i < EA_N_PHASES; i++) {
        printf("%s\"%s\":%.1f", i ? "," : "", names[i], 1e6 * t->s[i] / tokens);
        rest -= t->s[i];
    }
    printf(",\"rest\":%.1f,\"total\":%.1f}", 1e6 * rest / tokens, 1e6 * t->total / tokens);
    for (int g = batch == 1 && lm_rows == tokens ? 0 : 1; g < 2; g++) {
        printf(g ? ",\"gmacs\":{" : ",\"gbps\":{");
        for (int i = 0, first = 1; i < EA_N_PHASES; i++) {
            double w = g ? macs[i] * (i == EA_PHASE_LM_HEAD ? lm_rows : tokens) : bytes[i] * tokens;
            if (w <= 0 || t->s[i] <= 0) continue;
            printf("%s\"%s\":%.2f", first ? "" : ",", names[i], w / t->s[i] / 1e9);
            first = 0;
        }
        printf("}");
    }
    if (membw > 0) printf(",\"membw_gbps\":%.2f", membw);
    printf("}\n");
    fflush(stdout);
}

static double median(const double *x, int n) {
    double v[16];
    memcpy(v, x, sizeof(double) * (size_t)n);
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    const char *model = NULL, *batches = "1,4,16,64";
    int threads = 0, steps = 16, prefill = 512, chunk = 512, reps = 3, rounds = 1, dctx = 16;
    const char *kv_dtype = "f32";
    double membw = 0;
    int membw_mb = 1024, phases = 0;
    ea_arg spec[] = {{"model", EA_ARG_STR, &model, "PATH", "model directory or .gguf"},
                     {"threads", EA_ARG_INT, &threads, "N", "threads (default: CPU count)"},
                     {"batches", EA_ARG_STR, &batches, "LIST", "decode batch sizes"},
                     {"steps", EA_ARG_INT, &steps, "S", "decode steps per batch size"},
                     {"decode-ctx", EA_ARG_INT, &dctx, "N", "decode: each sequence's prompt (prefilled first) is N tokens (default 16)"},
                     {"kv-cache-dtype", EA_ARG_STR, &kv_dtype, "f32|f16|bf16", "KV cache elements (default f32)"},
                     {"prefill", EA_ARG_INT, &prefill, "P", "prefill prompt length (0 = skip)"},
                     {"chunk", EA_ARG_INT, &chunk, "C", "prefill tokens per forward call"},
                     {"reps", EA_ARG_INT, &reps, "R", "prefill runs; the best is reported (the first one too)"},
                     {"rounds", EA_ARG_INT, &rounds, "R", "decode: run the batch list R times in turn; median reported"},
                     {"membw-mb", EA_ARG_INT, &membw_mb, "N", "MiB read for the bandwidth beside each batch-1 round (0: none)"},
                     {"membw-gbs", EA_ARG_DOUBLE, &membw, "X", "a fixed memory bandwidth for bw_frac instead"},
                     {"phases", EA_ARG_BOOL, &phases, NULL, "time per phase of the forward pass, with GB/s (batch 1) and G multiply-adds/s"},
                     {0}};
    ea_args_rest rest;
    if (ea_args_parse(spec, argc, argv, &rest) != EA_OK || rest.help || !model) {
        fprintf(stderr, "%s\nusage: bench_forward --model M [flags]\n", ea_errmsg());
        ea_args_usage(stderr, spec);
        return 2;
    }
    int bl[16];
    int nb = parse_list(batches, bl, 16);
    if (ea_kv_dtype_parse(kv_dtype) < 0 || dctx < 1) {
        fprintf(stderr, "bench_forward: --kv-cache-dtype f32|f16|bf16, --decode-ctx >= 1\n");
        return 2;
    }
    if (rounds < 1 || rounds > 16) {
        fprintf(stderr, "bench_forward: --rounds %d outside 1..16\n", rounds);
        return 2;
    }
    int max_b = 1;
    for (int i = 0; i < nb; i++) max_b = bl[i] > max_b ? bl[i] : max_b;
    int max_tokens = chunk > max_b ? chunk : max_b;
    int ctx_need = prefill > dctx ? prefill : dctx;
    ea_engine_opts eo = {.model_path = model, .threads = threads, .max_tokens = max_tokens,
                         .max_ctx = (ctx_need > 64 ? ctx_need : 64) + steps + 32, .max_seqs = max_b,
                         .kv_dtype = (ea_dtype)ea_kv_dtype_parse(kv_dtype)};
    ea_engine *e;
    /* the engine loads every weight at create (model.c), so nothing is read from the file while timing */
    double tl = ea_now_s();
    ea_status s = ea_engine_create(&eo, &e);
    if (s != EA_OK) {
        fprintf(stderr, "bench_forward: %s: %s\n", ea_status_text(s), ea_errmsg());
        return 1;
    }
    fprintf(stderr, "bench_forward: engine created, weights loaded, in %.1f s\n", ea_now_s() - tl);
    const ea_model_config *c = &e->m->cfg;
    double abytes = active_bytes(e->m);
    const char *dtype = ea_dtypes[e->m->layers[0].wq.data ? e->m->layers[0].wq.dtype : e->m->tok_embd.dtype].name;
    int V = c->vocab_size;
    char head[256]; /* the fields every line starts with */
    snprintf(head, sizeof head, "\"arch\":\"%s\",\"dtype\":\"%s\",\"threads\":%d,\"isa\":\"%s\"", ea_arch_names[c->arch],
             dtype, ea_pool_size(e->pool), ea_kctx_isa(e->kctx));
    double pbytes[EA_N_PHASES], pmacs[EA_N_PHASES];
    phase_work(e->m, abytes, pbytes, pmacs);
    int32_t *tok = malloc(sizeof(int32_t) * max_tokens), *pos = malloc(sizeof(int32_t) * max_tokens),
            *seq = malloc(sizeof(int32_t) * max_tokens), *rows = malloc(sizeof(int32_t) * max_tokens);
    float *logits = malloc(sizeof(float) * (size_t)V * max_b);
    uint64_t r = 12345;
#define NEXT_TOK() (int32_t)((r = r * 6364136223846793005ull + 1442695040888963407ull) >> 33) % V

    if (prefill > 0) {
        /* R runs of the same prompt, each from an empty sequence; the first one
         * also pays for first-touch page faults of the KV cache and buffers */
        double best = 0.0, first = 0.0;
        uint64_t r0 = r;
        ea_forward_times pph = {0}; /* every run after the first (--phases) */
        int n_reps = reps > 0 ? reps : 1, pph_runs = 0;
        for (int rep = 0; rep < n_reps && s == EA_OK; rep++) {
            r = r0;
            ea_kv_seq_release(&e->kv, 0);
            ea_kv_seq_reserve(&e->kv, 0, prefill);
            if (phases && (rep > 0 || n_reps == 1)) {
                ea_forward_set_times(e->fw, &pph);
                pph_runs++;
            }
            double t0 = ea_now_s();
            for (int at = 0; at < prefill; at += chunk) {
                int n = prefill - at < chunk ? prefill - at : chunk;
                for (int i = 0; i < n; i++) {
                    tok[i] = NEXT_TOK();
                    pos[i] = at + i;
                    seq[i] = 0;
                }
                rows[0] = n - 1;
                s = ea_forward_run(e->fw, n, tok, pos, seq, at + n == prefill ? 1 : 0, rows, logits);
                if (s != EA_OK) break;
            }
            double dt = ea_now_s() - t0;
            ea_forward_set_times(e->fw, NULL);
            if (rep == 0) first = dt;
            if (rep == 0 || dt < best) best = dt;
        }
        printf("{\"bench\":\"prefill\",\"arch\":\"%s\",\"dtype\":\"%s\",\"threads\":%d,\"isa\":\"%s\","
               "\"prompt\":%d,\"chunk\":%d,\"reps\":%d,\"seconds\":%.4f,\"tok_s\":%.2f,\"first_tok_s\":%.2f}\n",
               ea_arch_names[c->arch], dtype, ea_pool_size(e->pool), ea_kctx_isa(e->kctx), prefill, chunk, reps, best,
               prefill / best, prefill / first);
        fflush(stdout);
        if (s == EA_OK && pph_runs > 0)
            print_phases("prefill", head, 1, &pph, (double)prefill * pph_runs, pph_runs, pbytes, pmacs, 0);
    }
    /* decode: the batch list is run `rounds` times in turn (so slow minutes of
     * this shared machine hit every batch size alike); each line reports the
     * median round, every round, and the ratio to batch 1's median */
    double tps_all[16][16], bw_all[16] = {0};
    ea_forward_times ph[16] = {{{0}}}; /* per batch size, the timed steps of every round (--phases) */
    membw_buf mbuf = {0};
    int has_b1 = 0;
    for (int bi = 0; bi < nb; bi++) has_b1 |= bl[bi] == 1;
    if (membw > 0 || !has_b1) membw_mb = 0;
    if (membw_mb > 0 && !membw_init(&mbuf, (size_t)membw_mb)) {
        fprintf(stderr, "bench_forward: cannot allocate %d MiB for the bandwidth reading\n", membw_mb);
        return 1;
    }
    for (int rd = 0; rd < rounds && s == EA_OK; rd++)
        for (int bi = 0; bi < nb && s == EA_OK; bi++) {
            int B = bl[bi];
            if (B == 1) bw_all[rd] = membw_mb > 0 ? membw_measure(&mbuf, e->pool, ea_pool_size(e->pool), 3) : membw;
            for (int b = 0; b < B; b++) {
                ea_kv_seq_release(&e->kv, b);
                ea_kv_seq_reserve(&e->kv, b, dctx + steps + 1);
            }
            /* prompts of dctx tokens, in calls of at most max_tokens */
            for (int b = 0; b < B && s == EA_OK; b++)
                for (int at = 0; at < dctx && s == EA_OK; at += max_tokens) {
                    int n = dctx - at < max_tokens ? dctx - at : max_tokens;
                    for (int i = 0; i < n; i++) {
                        tok[i] = NEXT_TOK();
                        pos[i] = at + i;
                        seq[i] = b;
                    }
                    s = ea_forward_run(e->fw, n, tok, pos, seq, 0, rows, logits);
                }
            for (int b = 0; b < B; b++) rows[b] = b;
            if (phases) ea_forward_set_times(e->fw, &ph[bi]);
            double t0 = ea_now_s();
            for (int st = 0; st < steps && s == EA_OK; st++) {
                for (int b = 0; b < B; b++) {
                    tok[b] = NEXT_TOK();
                    pos[b] = dctx + st;
                    seq[b] = b;
                }
                s = ea_forward_run(e->fw, B, tok, pos, seq, B, rows, logits);
            }
            tps_all[bi][rd] = (double)B * steps / (ea_now_s() - t0);
            ea_forward_set_times(e->fw, NULL);
        }
    double med1 = 0;
    for (int bi = 0; bi < nb && s == EA_OK; bi++) {
        double med = median(tps_all[bi], rounds);
        if (bl[bi] == 1) med1 = med;
        printf("{\"bench\":\"decode\",\"arch\":\"%s\",\"dtype\":\"%s\",\"threads\":%d,\"isa\":\"%s\",\"batch\":%d,"
               "\"steps\":%d,\"decode_ctx\":%d,\"kv_dtype\":\"%s\",\"tok_s\":%.2f,\"rounds\":[",
               ea_arch_names[c->arch], dtype, ea_pool_size(e->pool), ea_kctx_isa(e->kctx), bl[bi], steps, dctx,
               ea_dtypes[e->kv.dtype].name, med);
        for (int rd = 0; rd < rounds; rd++) printf("%s%.2f", rd ? "," : "", tps_all[bi][rd]);
        printf("],\"active_bytes_per_token\":%.0f", abytes);
        if (med1 > 0) printf(",\"vs_batch1\":%.2f", med / med1);
        if (bl[bi] == 1 && bw_all[0] > 0) { /* each round against the bandwidth read just before it */
            double fr[16], fr_min = 1e30;
            for (int rd = 0; rd < rounds; rd++) fr[rd] = tps_all[bi][rd] * abytes / (bw_all[rd] * 1e9);
            printf(",\"membw_gbps_rounds\":[");
            for (int rd = 0; rd < rounds; rd++) printf("%s%.2f", rd ? "," : "", bw_all[rd]);
            printf("],\"bw_frac_rounds\":[");
            for (int rd = 0; rd < rounds; rd++) printf("%s%.3f", rd ? "," : "", fr[rd]);
            for (int rd = 0; rd < rounds; rd++) fr_min = fr[rd] < fr_min ? fr[rd] : fr_min;
            printf("],\"bw_limit_tok_s\":%.2f,\"bw_frac\":%.3f,\"bw_frac_min\":%.3f", median(bw_all, rounds) * 1e9 / abytes,
                   median(fr, rounds), fr_min);
        }
        printf("}\n");
        fflush(stdout);
    }
    for (int bi = 0; bi < nb && s == EA_OK && phases; bi++) {
        double tokens = (double)bl[bi] * steps * rounds;
        print_phases("decode", head, bl[bi], &ph[bi], tokens, tokens, pbytes, pmacs,
                     bl[bi] == 1 && bw_all[0] > 0 ? median(bw_all, rounds) : 0);
    }
    if (s != EA_OK) fprintf(stderr, "bench_forward: %s: %s\n", ea_status_text(s), ea_errmsg());
    int kd = e->kv.k_dim, vd = e->kv.v_dim;
    double kv_bytes = (double)ea_kv_bytes_per_block(e->kv.dtype, e->kv.n_layers, kd, vd, e->kv.block_size) * e->kv.n_blocks;
    printf("{\"bench\":\"memory\",\"weights_bytes\":%lld,\"kv_bytes\":%.0f,\"kv_values_per_token_per_layer\":%d,"
           "\"peak_rss_bytes\":%zu}\n",
           (long long)e->m->weight_bytes, kv_bytes, kd + vd, ea_peak_rss_bytes());
    ea_engine_destroy(e);
    if (membw_mb > 0) membw_free(&mbuf);
    free(tok); free(pos); free(seq); free(rows); free(logits);
    return s == EA_OK ? 0 : 1;
}
