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

/* Weight bytes one decode token reads per phase of ea_forward_times: router,
 * experts (the k routed, the shared one and its gate), LM head; attention is
 * the rest of active_bytes (its projections, and the norms). */
static void phase_bytes(const ea_model *m, double active, double out[EA_N_PHASES]) {
    const ea_model_config *c = &m->cfg;
    memset(out, 0, sizeof(double) * EA_N_PHASES);
    for (int l = 0; l < c->n_layers; l++) {
        if (!c->layer_is_moe[l]) continue;
        const ea_layer_weights *L = &m->layers[l];
        const ea_ffn_weights *e = &L->experts[0], *sh = &L->shared;
        out[EA_PHASE_ROUTER] += (double)L->router.nbytes;
        out[EA_PHASE_EXPERTS] += (double)(e->gate.nbytes + e->up.nbytes + e->down.nbytes) * c->n_experts_per_tok +
                                 (double)(sh->gate.nbytes + sh->up.nbytes + sh->down.nbytes + L->shared_gate.nbytes);
    }
    out[EA_PHASE_LM_HEAD] = (double)m->lm_head.nbytes;
    out[EA_PHASE_ATTENTION] = active - out[EA_PHASE_ROUTER] - out[EA_PHASE_EXPERTS] - out[EA_PHASE_LM_HEAD];
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
                     {"phases", EA_ARG_BOOL, &phases, NULL, "batch-1 decode: time per phase and the GB/s each phase's weights stream at"},
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
        for (int rep = 0; rep < (reps > 0 ? reps : 1) && s == EA_OK; rep++) {
            r = r0;
            ea_kv_seq_release(&e->kv, 0);
            ea_kv_seq_reserve(&e->kv, 0, prefill);
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
            if (rep == 0) first = dt;
            if (rep == 0 || dt < best) best = dt;
        }
        printf("{\"bench\":\"prefill\",\"arch\":\"%s\",\"dtype\":\"%s\",\"threads\":%d,\"isa\":\"%s\","
               "\"prompt\":%d,\"chunk\":%d,\"reps\":%d,\"seconds\":%.4f,\"tok_s\":%.2f,\"first_tok_s\":%.2f}\n",
               ea_arch_names[c->arch], dtype, ea_pool_size(e->pool), ea_kctx_isa(e->kctx), prefill, chunk, reps, best,
               prefill / best, prefill / first);
        fflush(stdout);
    }
    /* decode: the batch list is run `rounds` times in turn (so slow minutes of
     * this shared machine hit every batch size alike); each line reports the
     * median round, every round, and the ratio to batch 1's median */
    double tps_all[16][16], bw_all[16] = {0};
    ea_forward_times ph = {0}; /* batch-1 decode steps of every round (--phases) */
    int ph_tokens = 0;
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
            if (phases && B == 1) ea_forward_set_times(e->fw, &ph);
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
            if (phases && B == 1) ph_tokens += steps;
        }
    double med1 = 0;
    for (int bi = 0; bi < nb && s == EA_OK; bi++) {
        double v[16];
        memcpy(v, tps_all[bi], sizeof(double) * (size_t)rounds);
        qsort(v, (size_t)rounds, sizeof(double), cmp_double);
        double med = rounds % 2 ? v[rounds / 2] : 0.5 * (v[rounds / 2 - 1] + v[rounds / 2]);
        if (bl[bi] == 1) med1 = med;
        printf("{\"bench\":\"decode\",\"arch\":\"%s\",\"dtype\":\"%s\",\"threads\":%d,\"isa\":\"%s\",\"batch\":%d,"
               "\"steps\":%d,\"decode_ctx\":%d,\"kv_dtype\":\"%s\",\"tok_s\":%.2f,\"rounds\":[",
               ea_arch_names[c->arch], dtype, ea_pool_size(e->pool), ea_kctx_isa(e->kctx), bl[bi], steps, dctx,
               ea_dtypes[e->kv.dtype].name, med);
        for (int rd = 0; rd < rounds; rd++) printf("%s%.2f", rd ? "," : "", tps_all[bi][rd]);
        printf("],\"active_bytes_per_token\":%.0f", abytes);
        if (med1 > 0) printf(",\"vs_batch1\":%.2f", med / med1);
        if (bl[bi] == 1 && bw_all[0] > 0) { /* each round against the bandwidth read just before it */
            double fr[16], bw[16];
            for (int rd = 0; rd < rounds; rd++) fr[rd] = tps_all[bi][rd] * abytes / (bw_all[rd] * 1e9);
            printf(",\"membw_gbps_rounds\":[");
            for (int rd = 0; rd < rounds; rd++) printf("%s%.2f", rd ? "," : "", bw_all[rd]);
            printf("],\"bw_frac_rounds\":[");
            for (int rd = 0; rd < rounds; rd++) printf("%s%.3f", rd ? "," : "", fr[rd]);
            memcpy(bw, bw_all, sizeof(double) * (size_t)rounds);
            qsort(fr, (size_t)rounds, sizeof(double), cmp_double);
            qsort(bw, (size_t)rounds, sizeof(double), cmp_double);
            double mbw = rounds % 2 ? bw[rounds / 2] : 0.5 * (bw[rounds / 2 - 1] + bw[rounds / 2]);
            double mfr = rounds % 2 ? fr[rounds / 2] : 0.5 * (fr[rounds / 2 - 1] + fr[rounds / 2]);
            printf("],\"bw_limit_tok_s\":%.2f,\"bw_frac\":%.3f,\"bw_frac_min\":%.3f", mbw * 1e9 / abytes, mfr, fr[0]);
        }
        printf("}\n");
        fflush(stdout);
    }
    if (s == EA_OK && ph_tokens > 0) { /* µs per token and GB/s per phase; rest = embedding, norms, residuals */
        static const char *names[EA_N_PHASES] = {"attention", "attend", "router", "experts", "lm_head"};
        double pb[EA_N_PHASES], rest = ph.total;
        phase_bytes(e->m, abytes, pb);
        printf("{\"bench\":\"decode_phases\",\"arch\":\"%s\",\"dtype\":\"%s\",\"threads\":%d,\"isa\":\"%s\",\"batch\":1,"
               "\"tokens\":%d,\"us_per_token\":{",
               ea_arch_names[c->arch], dtype, ea_pool_size(e->pool), ea_kctx_isa(e->kctx), ph_tokens);
        for (int i = 0; i < EA_N_PHASES; i++) {
            printf("%s\"%s\":%.1f", i ? "," : "", names[i], 1e6 * ph.s[i] / ph_tokens);
            rest -= ph.s[i];
        }
        printf(",\"rest\":%.1f,\"total\":%.1f},\"gbps\":{", 1e6 * rest / ph_tokens, 1e6 * ph.total / ph_tokens);
        for (int i = 0, first = 1; i < EA_N_PHASES; i++)
            if (pb[i] > 0 && ph.s[i] > 0) {
                printf("%s\"%s\":%.2f", first ? "" : ",", names[i], pb[i] * ph_tokens / ph.s[i] / 1e9);
                first = 0;
            }
        printf("}");
        if (bw_all[0] > 0) printf(",\"membw_gbps\":%.2f", median(bw_all, rounds));
        printf("}\n");
        fflush(stdout);
    }
    if (s != EA_OK) fprintf(stderr, "bench_forward: %s: %s\n", ea_status_text(s), ea_errmsg());
    int kd, vd;
    ea_forward_kv_dims(c, &kd, &vd);
    double kv_bytes = (double)ea_kv_bytes_per_block(e->kv.dtype, e->kv.n_layers, kd, vd, e->kv.block_size) * e->kv.n_blocks;
    printf("{\"bench\":\"memory\",\"weights_bytes\":%lld,\"kv_bytes\":%.0f,\"kv_values_per_token_per_layer\":%d,"
           "\"peak_rss_bytes\":%zu}\n",
           (long long)e->m->weight_bytes, kv_bytes, kd + vd, ea_peak_rss_bytes());
    ea_engine_destroy(e);
    if (membw_mb > 0) membw_free(&mbuf);
    free(tok); free(pos); free(seq); free(rows); free(logits);
    return s == EA_OK ? 0 : 1;
}
