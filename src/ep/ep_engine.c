/*
 * ep_engine.c — launcher checks and per-rank bring-up; see ep_engine.h.
 *
 * Bring-up order on every rank (all collective steps have the dist deadline):
 *   1. the config fingerprint (FNV-1a over the parsed config) is compared
 *      over MPI: ranks that opened different models stop here, by name
 *   2. expert: EPLB's initial placement, or the trivial one (eplb/meta.h:
 *      slot p = expert p, on rank p / (E/N)), ea_model_load_dense, then ea_model_load_experts(layer, the
 *      experts of own slots) for every MoE layer, so only this rank's expert
 *      pages are resident; the ep backend over a table of own slots
 *      (model/experts.h)
 *      tensor: tp.c's views and column copies, its backend and attention slice
 *   3. a barrier named "bring-up", so a rank that failed in 2 is reported by
 *      the others as "did not arrive" instead of leaving them in the first step
 *
 * The memory plan counts weight bytes from ea_model_foreach: routed experts are
 * the split part in expert mode; in tensor mode attention projections and
 * routed experts are split, the rest replicated.
 */
#include "ep/ep_engine.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/util.h"
#include "ep/tp.h"
#include "model/experts.h"

struct ea_ep_engine {
    ea_dist *d;        /* borrows */
    ea_par_mode mode;
    const ea_model *m; /* borrows */
    ea_eplb_meta place; /* owns: expert mode's placement */
    ea_moe_backend *be;   /* owns until taken */
    ea_moe_backend *be_view; /* borrows: the backend after it was taken (stats) */
    ea_tp *tp;            /* owns (tensor) */
    double replicated_b, split_b; /* weight bytes */
};

/* ------------------------------------------------------------ launch */

ea_status ea_par_mode_parse(const char *s, ea_par_mode *out) {
    *out = EA_PAR_NONE;
    if (!s) return EA_OK;
    if (strcmp(s, "expert") == 0) *out = EA_PAR_EXPERT;
    else if (strcmp(s, "tensor") == 0) *out = EA_PAR_TENSOR;
    else return ea_err(EA_ERR_INVALID_ARG, "--parallel: '%s' is not one of expert, tensor", s);
    return EA_OK;
}

const char *ea_par_mode_name(ea_par_mode m) {
    return m == EA_PAR_EXPERT ? "expert" : m == EA_PAR_TENSOR ? "tensor" : "none";
}

ea_status ea_par_launch(const char *parallel, double dist_timeout, ea_par_mode *mode, ea_dist **dist) {
    *dist = NULL;
    EA_TRY(ea_par_mode_parse(parallel, mode));
    int launched = ea_dist_launched(), n = ea_dist_launch_size();
    if (*mode == EA_PAR_NONE) {
        if (dist_timeout >= 0) return ea_err(EA_ERR_INVALID_ARG, "--dist-timeout needs --parallel expert|tensor");
        if (launched && n > 1)
            return ea_err(EA_ERR_INVALID_ARG,
                          "started by an MPI launcher with %d ranks but without --parallel: every rank would run the "
                          "whole model alone; pass --parallel expert or --parallel tensor",
                          n);
        return EA_OK;
    }
    if (!launched)
        return ea_err(EA_ERR_INVALID_ARG,
                      "--parallel %s needs an MPI launch (mpirun -n N eaas ...): no OMPI_COMM_WORLD_SIZE, PMI_SIZE or "
                      "PMIX_RANK in the environment",
                      parallel);
    if (dist_timeout >= 0 && !(dist_timeout > 0))
        return ea_err(EA_ERR_INVALID_ARG, "--dist-timeout must be > 0 seconds (got %g)", dist_timeout);
    return ea_dist_create(NULL, NULL, dist_timeout > 0 ? dist_timeout : 30.0, dist);
}

static int ea__env_rank(void) {
    const char *names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v) return atoi(v);
    }
    return 0;
}

int ea_par_report_here(const ea_dist *dist) {
    if (!dist) return ea__env_rank() == 0;
    return ea_dist_rank(dist) == 0 || !ea_dist_healthy(dist);
}

void ea_par_quiet_stdout(const ea_dist *dist) {
    if (!dist || ea_dist_rank(dist) == 0) return;
    fflush(stdout);
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        close(fd);
    }
}

/* ------------------------------------------------------------ memory plan */

typedef struct {
    const ea_model *m;
    ea_par_mode mode;
    double replicated, split;
} ea__sizes;

static void ea__size_fn(void *ctx, const ea_tensor *t, int layer, int expert) {
    ea__sizes *z = ctx;
    int split = expert >= 0;
    if (z->mode == EA_PAR_TENSOR && layer >= 0 && expert < 0) {
        const ea_layer_weights *L = &z->m->layers[layer];
        split = t == &L->wq || t == &L->wk || t == &L->wv || t == &L->wo;
    }
    if (split) z->split += (double)t->nbytes;
    else z->replicated += (double)t->nbytes;
}

void ea_ep_engine_plan(const ea_ep_engine *pe, ea_ep_mem_plan *out) {
    int N = ea_dist_size(pe->d);
    const double mib = 1024.0 * 1024.0;
    out->replicated_mib = pe->replicated_b / mib;
    out->split_mib_total = pe->split_b / mib;
    out->split_mib_rank = pe->split_b / N / mib;
    out->one_process_mib = (pe->replicated_b + pe->split_b) / mib;
}

/* ------------------------------------------------------------ set-up */

static ea_status ea__check_same_model(ea_dist *d, const ea_model *m) {
    uint64_t h = ea_hash64(&m->cfg, sizeof m->cfg, 0);
    int64_t v[2] = {(int64_t)(h >> 1), -(int64_t)(h >> 1)};
    EA_TRY(ea_dist_allreduce_max_i64(d, v, 2, "bring-up: model fingerprint"));
    if (v[0] != (int64_t)(h >> 1) || -v[1] != (int64_t)(h >> 1))
        return ea_err(EA_ERR_INVALID_ARG, "rank %d: the ranks opened different models (config fingerprints differ); "
                                          "every rank needs the same --model",
                      ea_dist_rank(d));
    return EA_OK;
}

/* keep[p]: slot p is this rank's. */
static void ea__own_slots(const ea_eplb_meta *pl, int rank, uint8_t *keep) {
    for (int p = 0; p < pl->n_physical; p++) keep[p] = ea_eplb_meta_rank_of_slot(pl, p) == rank;
}

/* Read in the experts this rank's slots hold, layer by layer (mask: n_experts bytes of scratch). */
static ea_status ea__load_own(ea_model *m, const ea_eplb_meta *pl, const uint8_t *keep, uint8_t *mask) {
    const ea_model_config *c = &m->cfg;
    EA_TRY(ea_model_load_dense(m));
    for (int l = 0, ml = 0; l < c->n_layers; l++) {
        if (!c->layer_is_moe[l]) continue;
        const int32_t *p2l = pl->phy2log + (size_t)ml++ * (size_t)pl->n_physical;
        memset(mask, 0, (size_t)c->n_experts);
        for (int p = 0; p < pl->n_physical; p++)
            if (keep[p]) mask[p2l[p]] = 1;
        EA_TRY(ea_model_load_experts(m, l, mask));
    }
    return EA_OK;
}

/* place: EPLB's initial placement (NULL: the trivial one, slot p = expert p). */
static ea_status ea__setup_expert(ea_ep_engine *pe, ea_model *m, ea_kctx *kctx, const ea_ep_engine_opts *po) {
    const ea_model_config *c = &m->cfg;
    const ea_eplb_meta *place = po->place;
    int N = ea_dist_size(pe->d), n_moe = 0, P = place ? place->n_physical : c->n_experts;
    if (P % N)
        return ea_err(EA_ERR_INVALID_ARG, "--parallel expert: %d %s do not split evenly over %d ranks", P,
                      place ? "expert slots (experts + --eplb-redundant)" : "routed experts", N);
    for (int l = 0; l < c->n_layers; l++) n_moe += c->layer_is_moe[l] != 0;
    if (place && (place->n_ranks != N || place->n_layers != n_moe || place->n_logical != c->n_experts))
        return ea_err(EA_ERR_INVALID_ARG, "--parallel expert: the EPLB placement is for %d ranks, %d layers, %d experts; "
                      "this job has %d ranks and the model %d MoE layers, %d experts", place->n_ranks, place->n_layers,
                      place->n_logical, N, n_moe, c->n_experts);
    if (place) {
        EA_TRY(ea_eplb_meta_init(&pe->place, n_moe, c->n_experts, P, N, place->n_nodes));
        for (int l = 0; l < n_moe; l++) ea_eplb_meta_copy_layer(&pe->place, place, l);
    } else {
        EA_TRY(ea_eplb_meta_init_trivial(&pe->place, n_moe, c->n_experts, c->n_experts, N, 1));
    }
    uint8_t *keep = ea_malloc((size_t)P + (size_t)c->n_experts);
    if (!keep) return ea_err(EA_ERR_NOMEM, "expert mask");
    ea__own_slots(&pe->place, ea_dist_rank(pe->d), keep);
    ea_expert_table t = {0};
    ea_status s = ea__load_own(m, &pe->place, keep, keep + P);
    if (s == EA_OK) s = ea_model_expert_table(m, pe->place.phy2log, pe->place.n_physical, keep, &t);
    ea_free(keep);
    if (s != EA_OK) return s;
    ea_ep_opts o = {.dist = pe->d, .place = &pe->place, .n_layers = c->n_layers, .hidden = c->hidden_size,
                    .ff = c->moe_intermediate_size, .max_tokens = po->max_tokens, .max_k = c->n_experts_per_tok,
                    .experts = (ea_ffn_weights *const *)t.layer, .kctx = kctx, .capacity_factor = po->capacity_factor,
                    .dp_attention = po->dp_attention};
    s = ea_ep_backend_create(&o, &pe->be);
    ea_expert_table_deinit(&t);
    pe->be_view = pe->be;
    return s;
}

ea_status ea_ep_engine_setup(ea_dist *d, ea_par_mode mode, ea_model *m, ea_kctx *kctx, const ea_ep_engine_opts *o,
                             ea_ep_engine **out) {
    *out = NULL;
    if (!d || mode == EA_PAR_NONE) return ea_err(EA_ERR_INVALID_ARG, "parallel set-up without a mode or MPI context");
    if (m->cfg.n_experts < 1) return ea_err(EA_ERR_UNSUPPORTED, "--parallel: %s has no routed experts", m->path);
    ea_ep_engine *pe = ea_calloc(1, sizeof *pe);
    if (!pe) return ea_err(EA_ERR_NOMEM, "parallel set-up");
    pe->d = d;
    pe->mode = mode;
    pe->m = m;
    ea__sizes z = {m, mode, 0, 0};
    ea_model_foreach(m, ea__size_fn, &z);
    pe->replicated_b = z.replicated;
    pe->split_b = z.split;
    ea_status s = ea__check_same_model(d, m);
    if (s == EA_OK) {
        if (mode == EA_PAR_EXPERT) {
            s = ea__setup_expert(pe, m, kctx, o);
        } else {
            s = ea_tp_create(d, m, kctx, o->max_tokens, &pe->tp);
            if (s == EA_OK) pe->be = ea_tp_take_backend(pe->tp);
        }
    }
    if (s != EA_OK) { /* the others stop at the bring-up barrier and name this rank */
        ea_ep_engine_destroy(pe);
        return s;
    }
    s = ea_dist_barrier(d, "bring-up");
    if (s != EA_OK) {
        ea_ep_engine_destroy(pe);
        return s;
    }
    *out = pe;
    return EA_OK;
}

ea_moe_backend *ea_ep_engine_take_backend(ea_ep_engine *pe) {
    ea_moe_backend *be = pe->be;
    pe->be = NULL;
    return be;
}

const ea_forward_tp *ea_ep_engine_forward_tp(const ea_ep_engine *pe) { return pe->tp ? ea_tp_forward(pe->tp) : NULL; }

int ea_ep_engine_stats(const ea_ep_engine *pe, ea_ep_stats *out) {
    if (pe->mode != EA_PAR_EXPERT || !pe->be_view) return 0;
    ea_ep_backend_stats(pe->be_view, out);
    return 1;
}

void ea_ep_engine_destroy(ea_ep_engine *pe) {
    if (!pe) return;
    ea_moe_backend_destroy(pe->be);
    ea_tp_destroy(pe->tp);
    ea_eplb_meta_deinit(&pe->place);
    ea_free(pe);
}

/* ------------------------------------------------------------ reports */

/* "0-3" or "0-3,8-11" for the experts rank r holds in MoE layer ml (its slots' experts, slot order). */
static void ea__ranges(const ea_eplb_meta *p, int ml, int r, char *buf, size_t n) {
    const int32_t *p2l = p->phy2log + (size_t)ml * (size_t)p->n_physical;
    int per = p->n_physical / p->n_ranks, lo = r * per, hi = lo + per;
    size_t o = 0;
    buf[0] = 0;
    for (int i = lo; i < hi && o + 24 < n; i++) {
        int e = p2l[i], end = e;
        if (i > lo && p2l[i - 1] == e - 1) continue;
        for (int j = i + 1; j < hi && p2l[j] == end + 1; j++) end++;
        o += (size_t)snprintf(buf + o, n - o, "%s%d", o ? "," : "", e);
        if (end > e) o += (size_t)snprintf(buf + o, n - o, "-%d", end);
    }
}

void ea_ep_engine_print_plan(const ea_ep_engine *pe, FILE *f) {
    if (ea_dist_rank(pe->d) != 0) return;
    const ea_model_config *c = &pe->m->cfg;
    int N = ea_dist_size(pe->d), n_moe = pe->place.n_layers;
    ea_ep_mem_plan mp;
    ea_ep_engine_plan(pe, &mp);
    fprintf(f, "eaas: parallel %s over %d ranks (%s), collective deadline %.1f s\n", ea_par_mode_name(pe->mode), N,
            ea_dist_library(pe->d), ea_dist_timeout(pe->d));
    if (pe->mode == EA_PAR_EXPERT) {
        for (int r = 0; r < N; r++) {
            char rg[256];
            int same = 1;
            ea__ranges(&pe->place, 0, r, rg, sizeof rg);
            for (int ml = 1; ml < n_moe; ml++) {
                char o[256];
                ea__ranges(&pe->place, ml, r, o, sizeof o);
                same &= strcmp(o, rg) == 0;
            }
            fprintf(f, "eaas:   rank %d: routed experts %s of %d %s %d MoE layers\n", r, rg, c->n_experts,
                    same ? "in each of" : "in layer of first; varies over", n_moe);
        }
        fprintf(f, "eaas: memory plan per rank: replicated %.1f MiB + routed %.1f of %.1f MiB = %.1f MiB "
                   "(one process: %.1f MiB)\n",
                mp.replicated_mib, mp.split_mib_rank, mp.split_mib_total, mp.replicated_mib + mp.split_mib_rank,
                mp.one_process_mib);
    } else {
        const ea_forward_tp *tp = ea_ep_engine_forward_tp(pe);
        int nh = tp ? tp->n_heads : 0, nkv = tp ? tp->n_kv_heads : 0, fr = c->moe_intermediate_size / N;
        for (int r = 0; r < N; r++)
            fprintf(f, "eaas:   rank %d: heads %d-%d, KV heads %d-%d, expert FFN columns %d-%d of every expert\n", r,
                    r * nh, (r + 1) * nh - 1, r * nkv, (r + 1) * nkv - 1, r * fr, (r + 1) * fr - 1);
        fprintf(f, "eaas: memory plan per rank: replicated %.1f MiB + split (attention, experts) %.1f of %.1f MiB "
                   "= %.1f MiB (one process: %.1f MiB)\n",
                mp.replicated_mib, mp.split_mib_rank, mp.split_mib_total, mp.replicated_mib + mp.split_mib_rank,
                mp.one_process_mib);
    }
}

ea_status ea_ep_engine_report_memory(ea_ep_engine *pe, FILE *f) {
    int N = ea_dist_size(pe->d), r = ea_dist_rank(pe->d);
    int64_t *all = ea_calloc((size_t)N * 2, sizeof(int64_t));
    size_t *counts = ea_calloc((size_t)N, sizeof(size_t));
    if (!all || !counts) {
        ea_free(all);
        ea_free(counts);
        return ea_err(EA_ERR_NOMEM, "memory report");
    }
    int64_t mine[2] = {(int64_t)ea_rss_bytes(), (int64_t)ea_peak_rss_bytes()};
    for (int i = 0; i < N; i++) counts[i] = sizeof mine;
    ea_status s = ea_dist_allgatherv(pe->d, mine, all, counts, "memory report");
    if (s == EA_OK && r == 0) {
        ea_ep_mem_plan mp;
        ea_ep_engine_plan(pe, &mp);
        for (int i = 0; i < N; i++)
            fprintf(f, "eaas: rank %d: resident %.1f MiB, peak %.1f MiB (weights planned %.1f MiB)\n", i,
                    (double)all[2 * i] / 1048576.0, (double)all[2 * i + 1] / 1048576.0,
                    mp.replicated_mib + mp.split_mib_rank);
    }
    ea_free(all);
    ea_free(counts);
    return s;
}
