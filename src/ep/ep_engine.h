/*
 * ep_engine.h — bring-up of a multi-rank engine: flag validation against the
 * launcher, MPI start, and the per-rank MoE backend and attention slice.
 *
 * The CLI calls, in this order (seed 002: backend first, then a shard-aware load):
 *
 *   ea_par_mode mode; ea_dist *dist = NULL;
 *   EA_TRY(ea_par_launch(parallel_flag, dist_timeout_flag, &mode, &dist)); // validates, MPI_Init
 *   ea_par_quiet_stdout(dist);                     // ranks > 0 print nothing on stdout
 *   ... ea_engine_create(): model opened, kernels built, then
 *   ea_ep_engine_opts po = {.max_tokens = n, .place = eplb_place_or_NULL, .capacity_factor = 1.25};
 *   EA_TRY(ea_ep_engine_setup(dist, mode, m, kctx, &po, &pe));
 *   be = ea_ep_engine_take_backend(pe);            // the engine owns and destroys it
 *   fo.tp = ea_ep_engine_forward_tp(pe);           // NULL in expert mode
 *   ea_ep_engine_print_plan(pe, stderr);           // rank 0: expert table, memory plan
 *   ... run; at the end (a collective): ea_ep_engine_report_memory(pe, stderr);
 *   ea_ep_engine_destroy(pe) after the backend; ea_dist_destroy(dist) last.
 *
 * Modes:
 *   expert  routed experts split over ranks (ep.h); rank r reads in only its
 *           experts' pages (ea_model_load_experts with its mask); everything
 *           else replicated; results bit-identical to one process.
 *   tensor  attention heads and routed-expert FFN columns split over ranks;
 *           partial results all-reduced after the attention output projection
 *           and after the routed experts (tp.c). Dense FFN layers, shared
 *           experts, router, embeddings and lm_head stay replicated. The split
 *           changes the summation order of those two products, so results are
 *           close to one process, not bit-identical (docs/parallel.md).
 */
#ifndef EA_EP_ENGINE_H
#define EA_EP_ENGINE_H

#include <stdio.h>

#include "ep/dist.h"
#include "ep/ep.h"
#include "kernels/matmul.h"
#include "model/forward.h"
#include "model/model.h"

typedef enum { EA_PAR_NONE = 0, EA_PAR_EXPERT = 1, EA_PAR_TENSOR = 2 } ea_par_mode;

/* "expert"/"tensor" (NULL = none); errors name the flag. */
ea_status ea_par_mode_parse(const char *s, ea_par_mode *out);
const char *ea_par_mode_name(ea_par_mode m);

/* Validate --parallel / --dist-timeout against how the process was started
 * and start MPI when a mode is chosen. parallel: the flag's text or NULL;
 * dist_timeout: the flag's value, or < 0 when not given (default 30 s).
 * Errors (one line, naming the flag): --parallel without an MPI launcher,
 * an mpirun launch of several ranks without --parallel, --dist-timeout without
 * --parallel or <= 0, an unknown mode. OUT: *mode, *dist (NULL without a mode). */
ea_status ea_par_launch(const char *parallel, double dist_timeout, ea_par_mode *mode, ea_dist **dist);
/* 1 if this process should print an error it failed with: rank 0, or any rank
 * whose collectives broke (a timeout names the dead peer from every survivor),
 * or any process outside MPI. Stops N copies of the same validation error. */
int ea_par_report_here(const ea_dist *dist);
/* On ranks > 0, point stdout at /dev/null (only rank 0 prints results). */
void ea_par_quiet_stdout(const ea_dist *dist);

typedef struct ea_ep_engine ea_ep_engine;

/* Build this rank's part. Checks (one clear error each): every rank opened the
 * same model (config fingerprint compared over MPI), experts divisible by the
 * ranks (expert), heads / KV heads / expert FFN divisible and splittable
 * (tensor), and families tensor mode does not split (MLA, full q/k norm). */
typedef struct {
    int max_tokens;             /* tokens per forward call */
    const ea_eplb_meta *place;  /* expert mode: EPLB's initial placement, whose slots the ranks hold
                                   (copied; its slots must split evenly over the ranks); NULL: one per expert */
    double capacity_factor;     /* expert mode: ea_ep_opts.capacity_factor (<= 0: 1.25) */
    int dp_attention;           /* expert mode: ea_ep_opts.dp_attention */
} ea_ep_engine_opts;
ea_status ea_ep_engine_setup(ea_dist *d, ea_par_mode mode, ea_model *m, ea_kctx *kctx, const ea_ep_engine_opts *o,
                             ea_ep_engine **out);
/* The MoE backend; ownership passes to the caller (call once). */
ea_moe_backend *ea_ep_engine_take_backend(ea_ep_engine *pe);
/* The attention slice for ea_forward_opts.tp; NULL in expert mode. Lives as long as pe. */
const ea_forward_tp *ea_ep_engine_forward_tp(const ea_ep_engine *pe);
/* Rank 0 writes the per-rank expert table and memory plan; other ranks write nothing. */
void ea_ep_engine_print_plan(const ea_ep_engine *pe, FILE *f);
/* Collective: every rank's resident and peak memory, printed by rank 0 beside the plan. */
ea_status ea_ep_engine_report_memory(ea_ep_engine *pe, FILE *f);
/* The EP backend's statistics (expert mode, while the backend lives); 0 if not expert mode. */
int ea_ep_engine_stats(const ea_ep_engine *pe, ea_ep_stats *out);
void ea_ep_engine_destroy(ea_ep_engine *pe);

/* Planned weight bytes per rank: replicated part and this mode's share of the split part. */
typedef struct {
    double replicated_mib, split_mib_total, split_mib_rank, one_process_mib;
} ea_ep_mem_plan;
void ea_ep_engine_plan(const ea_ep_engine *pe, ea_ep_mem_plan *out);

#endif
