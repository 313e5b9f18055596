/*
 * test_eplb_reference.c — DeepSeek EPLB against the public reference's outputs,
 * and the refined algorithm against the reference, on every case of
 * ../shared/eplb/cases.txt.
 *
 * For each case:
 *   1. the library (ea_eplb_rebalance, deepseek) written in the placement format
 *      equals expected/<case>.out.txt byte for byte;
 *   2. `$EAAS_BIN eplb place ... --out F` writes the same bytes (the command a
 *      user runs);
 *   3. refined: valid metadata, balancedness >= the reference's on every layer,
 *      and a strictly higher mean on the skewed workloads (zipf0.5, zipf1.0,
 *      edge) — except where the reference is provably optimal: with no
 *      redundant slots (P == E) a rank holding the heaviest expert also holds
 *      P/ranks - 1 others, so max load >= max(mean, w_max + the P/ranks - 1
 *      lightest); when the reference meets that bound on every layer, refined
 *      must equal it;
 *   4. the reference figures quoted in the README (mean balancedness) hold.
 * Prints the table of baseline / reference / refined means that docs/eplb.md quotes.
 *
 * Finding ../shared: $EA_SHARED, else $EA_SRC/../shared, else the first
 * shared/eplb/cases.txt found walking up from the current directory.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/util.h"
#include "eplb/eplb.h"
#include "eplb/meta.h"
#include "eplb/textio.h"
#include "harness.h"

static char shared[1024];

static int find_shared(void) {
    char p[1200];
    const char *env = getenv("EA_SHARED");
    if (env) {
        snprintf(shared, sizeof shared, "%s", env);
        snprintf(p, sizeof p, "%s/eplb/cases.txt", shared);
        return ea_file_exists(p);
    }
    const char *src = getenv("EA_SRC");
    if (src) {
        snprintf(shared, sizeof shared, "%s/../shared", src);
        snprintf(p, sizeof p, "%s/eplb/cases.txt", shared);
        if (ea_file_exists(p)) return 1;
    }
    char dir[900];
    if (!getcwd(dir, sizeof dir)) return 0;
    for (int up = 0; up < 8; up++) {
        snprintf(p, sizeof p, "%s/shared/eplb/cases.txt", dir);
        if (ea_file_exists(p)) {
            snprintf(shared, sizeof shared, "%s/shared", dir);
            return 1;
        }
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir) break;
        *slash = 0;
    }
    return 0;
}

/* First differing line of two texts, for the failure message. */
static void report_diff(const char *what, const char *a, size_t na, const char *b, size_t nb) {
    int line = 1;
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) line += a[i++] == '\n';
    fprintf(stderr, "  %s: differs at line %d (byte %zu; sizes %zu vs %zu)\n", what, line, i, na, nb);
}

static int is_skewed(const char *workload) {
    return strstr(workload, "zipf0.5") || strstr(workload, "zipf1.0") || strstr(workload, "edge");
}

/* Per-layer lower bound on the max rank load with P == E (see the header). */
static double r0_bound(const int64_t *c, int E, int ranks, int64_t *tmp) {
    double total = 0.0;
    for (int e = 0; e < E; e++) {
        tmp[e] = c[e];
        total += (double)c[e];
    }
    for (int i = 1; i < E; i++) { /* insertion sort ascending */
        int64_t v = tmp[i];
        int j = i;
        while (j > 0 && tmp[j - 1] > v) {
            tmp[j] = tmp[j - 1];
            j--;
        }
        tmp[j] = v;
    }
    double lb = (double)tmp[E - 1];
    for (int k = 0; k < E / ranks - 1; k++) lb += (double)tmp[k];
    double mean = total / (double)ranks;
    return lb > mean ? lb : mean;
}

typedef struct {
    const char *name;
    double mean;
    double tol;
} readme_figure;

/* README: "qwen3 zipf1.0 r0 0.604 (baseline 0.454), r8 0.9997, r16 0.9997; qwen3
 * zipf0.5 r0 0.951, r8 0.9996; small glob zipf1.0 0.988 (baseline 0.725); small glob edge 0.910." */
/* Tolerance 1e-3 / 1e-4 by the digits quoted: the README's "0.951" for
 * qwen3_r0 zipf0.5 is 0.95045 by its own definition (checked independently in
 * Python on the expected file), so the quoted figures are loosely rounded. */
static const readme_figure figures[] = {
    {"qwen3_r0__qwen3_zipf1.0", 0.604, 1e-3},  {"qwen3_r8__qwen3_zipf1.0", 0.9997, 1e-4},
    {"qwen3_r16__qwen3_zipf1.0", 0.9997, 1e-4}, {"qwen3_r0__qwen3_zipf0.5", 0.951, 1e-3},
    {"qwen3_r8__qwen3_zipf0.5", 0.9996, 1e-4},  {"small_glob__small_zipf1.0", 0.988, 1e-3},
    {"small_glob__small_edge", 0.910, 1e-3},
};

static int n_cases;

static void run_case(const char *name, const char *wl, int L, int E, int P, int G, int N, int R) {
    char path[2048], expected_path[2048];
    snprintf(path, sizeof path, "%s/eplb/%s", shared, wl);
    snprintf(expected_path, sizeof expected_path, "%s/eplb/expected/%s.out.txt", shared, name);
    int l2, e2;
    int64_t *c = NULL;
    char *expected = NULL, *mine = NULL, *cli = NULL;
    size_t n_exp = 0, n_mine = 0, n_cli = 0;
    ea_eplb_ws *ws = NULL;
    ea_eplb_placement ref = {0}, fine = {0};
    ea_eplb_meta meta = {0};
    double *bref = ea_malloc((size_t)L * sizeof *bref), *bfine = ea_malloc((size_t)L * sizeof *bfine);
    int64_t *tmp = ea_malloc((size_t)E * sizeof *tmp);
    n_cases++;

    if (ea_eplb_workload_read(path, &l2, &e2, &c) != EA_OK) {
        fprintf(stderr, "  %s: %s\n", name, ea_errmsg());
        goto fail;
    }
    if (l2 != L || e2 != E) {
        fprintf(stderr, "  %s: workload is %dx%d, cases.txt says %dx%d\n", name, l2, e2, L, E);
        goto fail;
    }
    if (ea_read_file(expected_path, &expected, &n_exp) != EA_OK) {
        fprintf(stderr, "  %s: %s\n", name, ea_errmsg());
        goto fail;
    }
    ea_eplb_shape s = {L, E, P, G, N, R};
    ea_eplb_shape_policy(&s);
    if (ea_eplb_ws_create(&s, &ws) != EA_OK || ea_eplb_placement_init(&ref, L, E, P) != EA_OK ||
        ea_eplb_placement_init(&fine, L, E, P) != EA_OK || ea_eplb_rebalance(ws, EA_EPLB_DEEPSEEK, c, &ref) != EA_OK ||
        ea_eplb_rebalance(ws, EA_EPLB_REFINED, c, &fine) != EA_OK) {
        fprintf(stderr, "  %s: %s\n", name, ea_errmsg());
        goto fail;
    }
    /* 1. library output */
    char header[1024];
    snprintf(header, sizeof header,
             "# EPLB output reference (torch stable sort) case=%s\n"
             "# format: 'L E P M'; L rows phy2log[P]; L rows logcnt[E]; L*E rows log2phy[M] (-1 padded, "
             "replica-rank order); M may be 0\n",
             name);
    FILE *f = open_memstream(&mine, &n_mine);
    if (!f || ea_eplb_placement_write(f, header, &ref) != EA_OK) goto fail;
    fclose(f);
    if (n_mine != n_exp || memcmp(mine, expected, n_exp) != 0) {
        report_diff(name, mine, n_mine, expected, n_exp);
        goto fail;
    }
    /* 2. the command */
    const char *bin = getenv("EAAS_BIN");
    if (!bin) {
        fprintf(stderr, "  %s: EAAS_BIN is not set (run under ctest)\n", name);
        goto fail;
    }
    char out[512], cmd[4096];
    /* the case name in the header comes from the --out file name */
    char tdir[128];
    snprintf(tdir, sizeof tdir, "/tmp/eaas_eplb_%d", (int)getpid());
    mkdir(tdir, 0700);
    snprintf(out, sizeof out, "%s/%s.out.txt", tdir, name);
    snprintf(cmd, sizeof cmd,
             "'%s' eplb place --workload '%s' --physical %d --groups %d --nodes %d --ranks %d --out '%s'", bin, path, P,
             G, N, R, out);
    int rc = system(cmd);
    if (rc != 0 || ea_read_file(out, &cli, &n_cli) != EA_OK) {
        fprintf(stderr, "  %s: '%s' failed (%d)\n", name, cmd, rc);
        unlink(out);
        rmdir(tdir);
        goto fail;
    }
    unlink(out);
    rmdir(tdir);
    if (n_cli != n_exp || memcmp(cli, expected, n_exp) != 0) {
        report_diff("eaas eplb place", cli, n_cli, expected, n_exp);
        goto fail;
    }
    /* 3. refined */
    if (ea_eplb_meta_init_from_placement(&meta, &fine, R, s.n_nodes) != EA_OK) {
        fprintf(stderr, "  %s refined: %s\n", name, ea_errmsg());
        goto fail;
    }
    ea_eplb_score sref, sfine, sbase;
    if (ea_eplb_score_placement(&ref, c, R, bref, &sref) != EA_OK ||
        ea_eplb_score_placement(&fine, c, R, bfine, &sfine) != EA_OK ||
        ea_eplb_score_baseline(c, L, E, R, NULL, &sbase) != EA_OK)
        goto fail;
    for (int l = 0; l < L; l++)
        if (bfine[l] < bref[l]) {
            fprintf(stderr, "  %s: refined worse on layer %d: %.9f < %.9f\n", name, l, bfine[l], bref[l]);
            goto fail;
        }
    int optimal = 0;
    if (P == E) {
        optimal = 1;
        for (int l = 0; l < L && optimal; l++) {
            double mx = ea_eplb_layer_max_load(ref.phy2log + (size_t)l * P, ref.logcnt + (size_t)l * E,
                                               c + (size_t)l * E, P, R);
            optimal = mx <= r0_bound(c + (size_t)l * E, E, R, tmp) * (1 + 1e-12);
        }
    }
    const char *verdict = sfine.mean > sref.mean ? "better" : "equal";
    if (is_skewed(wl)) {
        if (optimal) {
            if (sfine.mean != sref.mean) {
                fprintf(stderr, "  %s: reference is optimal but refined differs\n", name);
                goto fail;
            }
            verdict = "equal (reference optimal)";
        } else if (!(sfine.mean > sref.mean)) {
            fprintf(stderr, "  %s: skewed case not improved: refined %.6f vs reference %.6f\n", name, sfine.mean,
                    sref.mean);
            goto fail;
        }
    }
    /* 4. README figures */
    for (size_t i = 0; i < sizeof figures / sizeof figures[0]; i++)
        if (strcmp(figures[i].name, name) == 0 && (sref.mean < figures[i].mean - figures[i].tol ||
                                                   sref.mean > figures[i].mean + figures[i].tol)) {
            fprintf(stderr, "  %s: reference mean %.6f, README says %.4f\n", name, sref.mean, figures[i].mean);
            goto fail;
        }
    printf("| %-26s | %8.6f | %8.6f | %8.6f | %8.6f | %8.6f | %s |\n", name, sbase.mean, sref.mean, sref.worst,
           sfine.mean, sfine.worst, verdict);
    ea_t_passed++;
    goto done;
fail:
    ea_t_failed++;
    fprintf(stderr, "FAIL %s\n", name);
done:
    ea_eplb_meta_deinit(&meta);
    ea_eplb_placement_deinit(&ref);
    ea_eplb_placement_deinit(&fine);
    ea_eplb_ws_destroy(ws);
    ea_free(c);
    ea_free(expected);
    free(mine);
    ea_free(cli);
    ea_free(bref);
    ea_free(bfine);
    ea_free(tmp);
}

/* Run a shell command, capture stdout+stderr into buf; returns the exit code. */
static int run_capture(const char *cmd, char *buf, size_t n) {
    char full[4400];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t k = fread(buf, 1, n - 1, p);
    buf[k] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* `eaas eplb score`: JSON figures equal the library's; bad files fail with one
 * line naming the file and line. */
static void score_command(void) {
    const char *bin = getenv("EAAS_BIN");
    char wl[2048], pl[2048], cmd[4200], out[8192];
    snprintf(wl, sizeof wl, "%s/eplb/workloads/small_zipf1.0.txt", shared);
    snprintf(pl, sizeof pl, "%s/eplb/expected/small_glob__small_zipf1.0.out.txt", shared);
    int ok = bin != NULL;
    if (ok) {
        snprintf(cmd, sizeof cmd, "'%s' eplb score --workload '%s' --placement '%s' --ranks 2 --json", bin, wl, pl);
        int rc = run_capture(cmd, out, sizeof out);
        json_t *j = rc == 0 ? json_loads(out, 0, NULL) : NULL;
        double mean = j ? json_real_value(json_object_get(json_object_get(j, "balancedness"), "mean")) : 0;
        double base = j ? json_real_value(json_object_get(json_object_get(j, "baseline"), "mean")) : 0;
        /* README: small glob zipf1.0 0.988 (baseline 0.725) */
        if (!j || mean < 0.987 || mean > 0.989 || base < 0.724 || base > 0.726) {
            fprintf(stderr, "  score --json: rc %d, output '%s'\n", rc, out);
            ok = 0;
        }
        json_decref(j);
    }
    struct { const char *text, *want; } bad[] = {
        {"4 8\n1 2 3 4 5 6 7 8\n", ":2: truncated"},
        {"4 8\n1 2 3 4 5 6 7 8\n1 2 3 -4 5 6 7 8\n", ":3: negative value -4"},
        {"4 8\n1 2 3 4 5 6 7\n", ":2: expected 8 integers"},
    };
    for (size_t i = 0; ok && i < sizeof bad / sizeof bad[0]; i++) {
        char tmp[128];
        snprintf(tmp, sizeof tmp, "/tmp/eaas_eplb_bad_%d.txt", (int)getpid());
        ea_write_file(tmp, bad[i].text, strlen(bad[i].text));
        snprintf(cmd, sizeof cmd, "'%s' eplb score --workload '%s' --placement '%s' --ranks 2", bin, tmp, pl);
        int rc = run_capture(cmd, out, sizeof out);
        char want[256];
        snprintf(want, sizeof want, "%s%s", tmp, bad[i].want);
        if (rc != 1 || !strstr(out, want) || strchr(out, '\n') != out + strlen(out) - 1) {
            fprintf(stderr, "  bad workload %zu: rc %d, want one line with '%s', got '%s'\n", i, rc, want, out);
            ok = 0;
        }
        unlink(tmp);
    }
    if (ok) ea_t_passed++;
    else {
        ea_t_failed++;
        fprintf(stderr, "FAIL score_command\n");
    }
}

int main(void) {
    (void)ea_t_cur_failed; /* cases are counted by run_case, not RUN() */
    if (!find_shared()) {
        fprintf(stderr, "cannot find shared/eplb/cases.txt (set EA_SHARED, or EA_SRC with ../shared beside it)\n");
        printf("0 passed, 1 failed\n");
        return 1;
    }
    char p[1200];
    snprintf(p, sizeof p, "%s/eplb/cases.txt", shared);
    FILE *f = fopen(p, "r");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", p);
        return 1;
    }
    printf("| case                       | baseline | ref mean | ref worst| refined  | ref.worst| verdict |\n");
    char line[1024];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n') continue;
        char name[256], wl[512];
        int L, E, P, G, N, R;
        if (sscanf(line, "%255s %511s %d %d %d %d %d %d", name, wl, &L, &E, &P, &G, &N, &R) != 8) {
            fprintf(stderr, "%s:%d: malformed case line\n", p, lineno);
            ea_t_failed++;
            continue;
        }
        run_case(name, wl, L, E, P, G, N, R);
    }
    fclose(f);
    score_command();
    if (n_cases < 18) {
        fprintf(stderr, "only %d cases found\n", n_cases);
        ea_t_failed++;
    }
    return TEST_SUMMARY();
}
