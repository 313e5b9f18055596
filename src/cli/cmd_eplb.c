/*
 * cmd_eplb.c — `eaas eplb place|score`: run the expert-placement algorithms
 * offline on a workload file (token counts per layer and logical expert, e.g.
 * a recorder dump) and score placements.
 *
 *   eaas eplb place --workload W --physical P --groups G --nodes N --ranks R
 *                   [--algorithm deepseek|refined] [--case NAME] [--out FILE]
 *   eaas eplb score --workload W --placement FILE --ranks R [--nodes N] [--json]
 *
 * `place` writes the placement format of ../shared/eplb/expected/ byte for
 * byte, including its two comment lines; the first names the case, taken from
 * --case, else from the --out file name without ".out.txt", else from the
 * workload file name. With --algorithm refined the first comment line says so
 * (the table rows are what the format defines; comments are free text).
 * `score` checks the placement's invariants (seed 003) as the engine would at
 * load time, then prints balancedness (mean over layers, worst layer) for the
 * placement and for the baseline (contiguous sharding, no replicas).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/args.h"
#include "cli/commands.h"
#include "eplb/eplb.h"
#include "eplb/meta.h"
#include "eplb/textio.h"

static const char usage_text[] =
    "usage: eaas eplb place --workload FILE --physical P --groups G --nodes N --ranks R\n"
    "                       [--algorithm deepseek|refined] [--case NAME] [--out FILE]\n"
    "       eaas eplb score --workload FILE --placement FILE --ranks R [--nodes N] [--json]\n\n"
    "place: compute an expert placement from token counts (format of ../shared/eplb/expected).\n"
    "score: balancedness (mean/max rank load) of a placement and of the contiguous baseline.\n\n";

/* basename of path without `suffix` (if it ends with it) into buf. */
static void ea__stem(char *buf, size_t n, const char *path, const char *suffix) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t len = strlen(b), sl = strlen(suffix);
    if (len > sl && strcmp(b + len - sl, suffix) == 0) len -= sl;
    snprintf(buf, n, "%.*s", (int)len, b);
}

static int ea__place(int argc, char **argv) {
    const char *workload = NULL, *out = NULL, *algo_s = "deepseek", *case_name = NULL;
    int P = 0, G = 1, N = 1, R = 0;
    ea_arg spec[] = {
        {"workload", EA_ARG_STR, &workload, "FILE", "token counts: 'L E' then L rows of E integers"},
        {"physical", EA_ARG_INT, &P, "P", "physical expert slots per layer (E + redundant)", 1, 1 << 20},
        {"groups", EA_ARG_INT, &G, "G", "expert groups (1 = global policy)", 1, 1 << 20},
        {"nodes", EA_ARG_INT, &N, "N", "nodes (hierarchical policy iff groups % nodes == 0)", 1, 1 << 20},
        {"ranks", EA_ARG_INT, &R, "R", "EP ranks (GPUs in the reference)", 1, 1 << 20},
        {"algorithm", EA_ARG_STR, &algo_s, "NAME", "deepseek (the reference) or refined"},
        {"case", EA_ARG_STR, &case_name, "NAME", "case name for the header comment"},
        {"out", EA_ARG_STR, &out, "FILE", "output file (default stdout)"},
        {0}};
    ea_args_rest rest;
    int rc = ea_cli_parse("eplb place", usage_text, spec, argc, argv, &rest);
    if (rc >= 0) return rc;
    ea_status st;
    if (!workload || P <= 0 || R <= 0 || rest.n_pos)
        return ea_cli_usage_error("eplb place", usage_text, "--workload, --physical and --ranks are required");
    ea_eplb_algo algo;
    if ((st = ea_eplb_algo_parse(algo_s, &algo)) != EA_OK) return ea_cli_fail("eplb place", st) + 1;
    int L, E;
    int64_t *counts = NULL;
    ea_eplb_ws *ws = NULL;
    ea_eplb_placement pl = {0};
    FILE *f = NULL;
    rc = 1;
    if ((st = ea_eplb_workload_read(workload, &L, &E, &counts)) != EA_OK) goto fail;
    ea_eplb_shape shape = {L, E, P, G, N, R};
    ea_eplb_shape_policy(&shape); /* hierarchical iff groups % nodes == 0, else global */
    if ((st = ea_eplb_ws_create(&shape, &ws)) != EA_OK) goto fail;
    if ((st = ea_eplb_placement_init(&pl, L, E, P)) != EA_OK) goto fail;
    if ((st = ea_eplb_rebalance(ws, algo, counts, &pl)) != EA_OK) goto fail;
    char name[256], header[512];
    if (case_name) snprintf(name, sizeof name, "%s", case_name);
    else if (out && strcmp(out, "-") != 0) ea__stem(name, sizeof name, out, ".out.txt");
    else ea__stem(name, sizeof name, workload, ".txt");
    snprintf(header, sizeof header,
             "# EPLB output %s case=%s\n"
             "# format: 'L E P M'; L rows phy2log[P]; L rows logcnt[E]; L*E rows log2phy[M] (-1 padded, "
             "replica-rank order); M may be 0\n",
             algo == EA_EPLB_DEEPSEEK ? "reference (torch stable sort)" : "eaas refined (local search)", name);
    f = out && strcmp(out, "-") != 0 ? fopen(out, "w") : stdout;
    if (!f) {
        st = ea_err(EA_ERR_IO, "%s: cannot open for writing", out);
        goto fail;
    }
    if ((st = ea_eplb_placement_write(f, header, &pl)) != EA_OK) goto fail;
    if (f != stdout) {
        FILE *g = f;
        f = NULL;
        if (fclose(g) != 0) {
            st = ea_err(EA_ERR_IO, "%s: write failed", out);
            goto fail;
        }
    }
    rc = 0;
fail:
    if (rc) ea_cli_fail("eplb place", st);
    if (f && f != stdout) fclose(f);
    ea_eplb_placement_deinit(&pl);
    ea_eplb_ws_destroy(ws);
    ea_free(counts);
    return rc;
}

static int ea__score(int argc, char **argv) {
    const char *workload = NULL, *placement = NULL;
    int R = 0, N = 1, json = 0;
    ea_arg spec[] = {
        {"workload", EA_ARG_STR, &workload, "FILE", "token counts: 'L E' then L rows of E integers"},
        {"placement", EA_ARG_STR, &placement, "FILE", "placement ('L E P M' format)"},
        {"ranks", EA_ARG_INT, &R, "R", "EP ranks", 1, 1 << 20},
        {"nodes", EA_ARG_INT, &N, "N", "nodes (for the invariant check of the dispatch map)", 1, 1 << 20},
        {"json", EA_ARG_BOOL, &json, NULL, "print one JSON object"},
        {0}};
    ea_args_rest rest;
    int rc = ea_cli_parse("eplb score", usage_text, spec, argc, argv, &rest);
    if (rc >= 0) return rc;
    ea_status st;
    if (!workload || !placement || R <= 0 || rest.n_pos)
        return ea_cli_usage_error("eplb score", usage_text, "--workload, --placement and --ranks are required");
    int L, E;
    rc = 1;
    int64_t *counts = NULL;
    ea_eplb_placement pl = {0};
    ea_eplb_meta meta = {0};
    ea_eplb_score sc, base;
    if ((st = ea_eplb_workload_read(workload, &L, &E, &counts)) != EA_OK) goto fail;
    if ((st = ea_eplb_placement_read(placement, &pl)) != EA_OK) goto fail;
    if (pl.n_layers != L || pl.n_logical != E) {
        st = ea_err(EA_ERR_INVALID_ARG, "%s has %d layers x %d experts but %s has %d x %d", placement, pl.n_layers,
                    pl.n_logical, workload, L, E);
        goto fail;
    }
    if ((st = ea_eplb_meta_init_from_placement(&meta, &pl, R, N)) != EA_OK) {
        st = ea_err_wrap(st, "%s: ", placement);
        goto fail;
    }
    if ((st = ea_eplb_score_placement(&pl, counts, R, NULL, &sc)) != EA_OK) goto fail;
    if ((st = ea_eplb_score_baseline(counts, L, E, R, NULL, &base)) != EA_OK) goto fail;
    if (json) {
        json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:{s:f, s:f, s:i}, s:{s:f, s:f, s:i}}", "workload",
                              workload, "placement", placement, "layers", L, "logical", E, "physical", pl.n_physical,
                              "ranks", R, "balancedness", "mean", sc.mean, "worst", sc.worst, "worst_layer",
                              sc.worst_layer, "baseline", "mean", base.mean, "worst", base.worst, "worst_layer",
                              base.worst_layer);
        char *txt = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
        if (!txt) {
            json_decref(o);
            st = ea_err(EA_ERR_NOMEM, "JSON output");
            goto fail;
        }
        printf("%s\n", txt);
        free(txt);
        json_decref(o);
    }
    else
        printf("placement  balancedness mean %.6f  worst %.6f (layer %d)\n"
               "baseline   balancedness mean %.6f  worst %.6f (layer %d)  [contiguous, no replicas]\n",
               sc.mean, sc.worst, sc.worst_layer, base.mean, base.worst, base.worst_layer);
    rc = 0;
fail:
    if (rc) ea_cli_fail("eplb score", st);
    ea_eplb_meta_deinit(&meta);
    ea_eplb_placement_deinit(&pl);
    ea_free(counts);
    return rc;
}

int ea_cmd_eplb(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage_text, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "place") == 0) return ea__place(argc - 1, argv + 1);
    if (strcmp(argv[1], "score") == 0) return ea__score(argc - 1, argv + 1);
    return ea_cli_usage_error("eplb", usage_text, "unknown subcommand '%s'", argv[1]);
}
