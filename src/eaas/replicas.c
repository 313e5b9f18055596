/*
 * replicas.c — the greedy plan of replicas of hot experts (see replicas.h for
 * the load model, the greedy and the stability rule).
 *
 * Data: the loaded pairs, sorted by (layer, expert) and merged, are the
 * candidates c[P] (so a candidate's index is also its (layer, expert) rank,
 * the tie order of the greedy); a binary max-heap of candidate indices orders
 * them by L / r. The replicas placed so far are a list per candidate (place[],
 * linked by `next`), so "does server s host c" is a range check plus a walk
 * of c's placements. During the greedy, server loads are kept up to date by
 * differences; the estimates of the two plans compared at the end are
 * recomputed from scratch (loads_of), so the greedy's rounding does not reach
 * before / after.
 *
 * Invariants during the greedy: c[k].r = live base hosts of c[k] + its
 * placements; free[s] = slots of s - placements on s (0 for a server that is
 * not live); load[s] = sum over what s hosts of L / r, up to rounding.
 */
#include "eaas/replicas.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

typedef struct {
    int32_t layer, expert;
    double load;
    int base_r; /* live servers hosting it in their base ranges */
    int r;      /* base_r + replicas placed by the greedy */
    int head;   /* its first placement (index in place[]); -1: none */
} cand;

typedef struct {
    int server, next; /* next: the same candidate's next placement; -1: none */
} placement;

typedef struct {
    const ea_replicas_server *s; /* borrows [n_s] */
    int n_s;
    cand *c; /* owns [n_c], sorted by (layer, expert), distinct */
    int n_c;
    double eps; /* server loads closer than this are a tie */
    int *heap;  /* owns [n_c]: candidate indices; heap[0] the highest */
    int n_heap;
    placement *place; /* owns [n_place] */
    size_t n_place, cap_place;
    double *load; /* owns [n_s]: server loads during the greedy */
    int *free;    /* owns [n_s]: free slots during the greedy */
    int *rr;      /* owns [n_c]: scratch of loads_of */
} plan_ws;

int ea_replicas_base_hosts(const ea_replicas_server *s, int32_t layer, int32_t expert) {
    int in_l = 0, in_e = 0;
    for (int i = 0; i < s->n_layers && !in_l; i++) in_l = layer >= s->layers[i].a && layer <= s->layers[i].b;
    for (int i = 0; i < s->n_experts && !in_e; i++) in_e = expert >= s->experts[i].a && expert <= s->experts[i].b;
    return in_l && in_e;
}

static int pair_cmp(const void *a, const void *b) {
    const ea_mon_pair *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return (x->expert > y->expert) - (x->expert < y->expert);
}

static int load_cmp(const void *a, const void *b) {
    const ea_replicas_load *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return (x->expert > y->expert) - (x->expert < y->expert);
}

static int same_pair(const ea_mon_pair *a, const ea_mon_pair *b) { return a->layer == b->layer && a->expert == b->expert; }

/* The candidate of (layer, expert), or -1. */
static int find_cand(const plan_ws *w, int32_t layer, int32_t expert) {
    int lo = 0, hi = w->n_c - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const cand *c = &w->c[mid];
        if (c->layer == layer && c->expert == expert) return mid;
        if (c->layer < layer || (c->layer == layer && c->expert < expert)) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* c[] from the load: sorted, duplicates summed, base hosts counted; eps from the total. */
static ea_status candidates(plan_ws *w, const ea_replicas_load *load, int n_load) {
    ea_replicas_load *l = n_load ? ea_malloc((size_t)n_load * sizeof *l) : NULL;
    w->c = n_load ? ea_malloc((size_t)n_load * sizeof *w->c) : NULL;
    if (n_load && (!l || !w->c)) {
        ea_free(l);
        return ea_err(EA_ERR_NOMEM, "replica plan: %d pairs", n_load);
    }
    if (n_load) { /* memcpy and qsort want pointers even for 0 bytes */
        memcpy(l, load, (size_t)n_load * sizeof *l);
        qsort(l, (size_t)n_load, sizeof *l, load_cmp);
    }
    double total = 0;
    for (int i = 0; i < n_load; i++) {
        EA_ASSERT(l[i].load > 0 && isfinite(l[i].load));
        total += l[i].load;
        if (w->n_c && w->c[w->n_c - 1].layer == l[i].layer && w->c[w->n_c - 1].expert == l[i].expert) {
            w->c[w->n_c - 1].load += l[i].load;
            continue;
        }
        w->c[w->n_c++] = (cand){.layer = l[i].layer, .expert = l[i].expert, .load = l[i].load, .head = -1};
    }
    ea_free(l);
    for (int k = 0; k < w->n_c; k++) {
        for (int s = 0; s < w->n_s; s++)
            w->c[k].base_r += w->s[s].live && ea_replicas_base_hosts(&w->s[s], w->c[k].layer, w->c[k].expert);
        w->c[k].r = w->c[k].base_r;
    }
    w->eps = total * 1e-12;
    return EA_OK;
}

/* ---- estimates ------------------------------------------------------------------------ */

/* Each pair of plan[s] (sorted) that counts as a replica: its candidate, or -1 for a pair
 * without load, a pair twice, or a pair s hosts in its base ranges. */
static int replica_cand(const plan_ws *w, int s, const ea_replicas_assign *a, int i) {
    const ea_mon_pair *p = &a->pairs[i];
    if (i > 0 && same_pair(p, &a->pairs[i - 1])) return -1;
    if (ea_replicas_base_hosts(&w->s[s], p->layer, p->expert)) return -1;
    return find_cand(w, p->layer, p->expert);
}

/* Server loads (0 for one not live) under `plan` (NULL: no replicas). rr: scratch [n_c]. */
static void loads_of(const plan_ws *w, const ea_replicas_assign *plan, int *rr, double *load) {
    for (int k = 0; k < w->n_c; k++) rr[k] = w->c[k].base_r;
    for (int s = 0; plan && s < w->n_s; s++) {
        if (!w->s[s].live || !plan[s].has) continue;
        for (int i = 0; i < plan[s].n; i++) {
            int k = replica_cand(w, s, &plan[s], i);
            if (k >= 0) rr[k]++;
        }
    }
    for (int s = 0; s < w->n_s; s++) {
        double sum = 0;
        for (int k = 0; w->s[s].live && k < w->n_c; k++)
            if (ea_replicas_base_hosts(&w->s[s], w->c[k].layer, w->c[k].expert)) sum += w->c[k].load / rr[k];
        for (int i = 0; plan && w->s[s].live && plan[s].has && i < plan[s].n; i++) {
            int k = replica_cand(w, s, &plan[s], i);
            if (k >= 0) sum += w->c[k].load / rr[k];
        }
        load[s] = sum;
    }
}

static void estimate(const plan_ws *w, const ea_replicas_assign *plan, ea_replicas_estimate *e) {
    memset(e, 0, sizeof *e);
    loads_of(w, plan, w->rr, w->load);
    double total = 0;
    int n_live = 0;
    for (int s = 0; s < w->n_s; s++) {
        if (!w->s[s].live) continue;
        n_live++;
        total += w->load[s];
        if (w->load[s] > e->max) e->max = w->load[s];
        for (int i = 0; plan && plan[s].has && i < plan[s].n; i++)
            e->n_replicas += i == 0 || !same_pair(&plan[s].pairs[i], &plan[s].pairs[i - 1]);
    }
    for (int k = 0; k < w->n_c; k++)
        if (w->rr[k] == 0) e->unhosted += w->c[k].load;
    e->mean = n_live ? total / n_live : 0;
}

/* ---- the greedy ------------------------------------------------------------------------ */

/* 1 if candidate a comes before b: r = 0 first (heaviest first), then the highest L / r,
 * then the lower (layer, expert), which is the lower index. */
static int before(const plan_ws *w, int a, int b) {
    const cand *x = &w->c[a], *y = &w->c[b];
    if ((x->r == 0) != (y->r == 0)) return x->r == 0;
    double px = x->r ? x->load / x->r : x->load, py = y->r ? y->load / y->r : y->load;
    if (px != py) return px > py;
    return a < b;
}

static void heap_push(plan_ws *w, int k) {
    int i = w->n_heap++;
    while (i > 0 && before(w, k, w->heap[(i - 1) / 2])) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = k;
}

static int heap_pop(plan_ws *w) {
    int top = w->heap[0], last = w->heap[--w->n_heap], i = 0;
    for (;;) {
        int ch = 2 * i + 1;
        if (ch >= w->n_heap) break;
        if (ch + 1 < w->n_heap && before(w, w->heap[ch + 1], w->heap[ch])) ch++;
        if (!before(w, w->heap[ch], last)) break;
        w->heap[i] = w->heap[ch];
        i = ch;
    }
    if (w->n_heap) w->heap[i] = last;
    return top;
}

/* 1 if s hosts candidate k now: base ranges (s live) or a replica placed. */
static int hosts_now(const plan_ws *w, int s, int k) {
    if (w->s[s].live && ea_replicas_base_hosts(&w->s[s], w->c[k].layer, w->c[k].expert)) return 1;
    for (int p = w->c[k].head; p >= 0; p = w->place[p].next)
        if (w->place[p].server == s) return 1;
    return 0;
}

/* The server to take one more replica of k: free slot, does not host k, lowest load
 * (ties: first). -1 if none. */
static int receiver(const plan_ws *w, int k) {
    int best = -1;
    for (int s = 0; s < w->n_s; s++)
        if (w->free[s] > 0 && !hosts_now(w, s, k) && (best < 0 || w->load[s] < w->load[best] - w->eps)) best = s;
    return best;
}

static double max_load(const plan_ws *w) {
    double m = 0;
    for (int s = 0; s < w->n_s; s++)
        if (w->s[s].live && w->load[s] > m) m = w->load[s];
    return m;
}

/* One more replica of k on s: its hosts lose L/r - L/(r+1) each, s gains L/(r+1). */
static ea_status place(plan_ws *w, int k, int s) {
    cand *c = &w->c[k];
    if (ea_grow(&w->place, &w->cap_place, w->n_place + 1, sizeof *w->place, 64))
        return ea_err(EA_ERR_NOMEM, "replica plan: placements");
    double share = c->load / (c->r + 1), d = c->r ? c->load / c->r - share : 0;
    for (int h = 0; d > 0 && h < w->n_s; h++)
        if (hosts_now(w, h, k)) w->load[h] -= d;
    w->load[s] += share;
    w->place[w->n_place] = (placement){s, c->head};
    c->head = (int)w->n_place++;
    c->r++;
    w->free[s]--;
    return EA_OK;
}

static ea_status greedy(plan_ws *w) {
    long long n_free = 0;
    loads_of(w, NULL, w->rr, w->load);
    for (int s = 0; s < w->n_s; s++) {
        w->free[s] = w->s[s].live ? w->s[s].slots : 0;
        n_free += w->free[s];
    }
    for (int k = 0; k < w->n_c; k++) heap_push(w, k);
    double top = max_load(w);
    while (n_free > 0 && w->n_heap > 0) {
        int k = heap_pop(w), s = receiver(w, k);
        if (s < 0) continue; /* no server can take it: dropped */
        const cand *c = &w->c[k];
        if (c->r > 0 && !(w->load[s] + c->load / (c->r + 1) < top - w->eps)) continue; /* would raise the max: dropped */
        EA_TRY(place(w, k, s));
        n_free--;
        top = max_load(w);
        heap_push(w, k);
    }
    return EA_OK;
}

/* ---- plans ------------------------------------------------------------------------------ */

static void plan_free(ea_replicas_assign *p, int n) {
    for (int i = 0; p && i < n; i++) ea_free(p[i].pairs);
    ea_free(p);
}

/* The greedy's placements as a plan: every live server with slots has one. */
static ea_status greedy_plan(const plan_ws *w, ea_replicas_assign **out) {
    ea_replicas_assign *p = ea_calloc((size_t)w->n_s + 1, sizeof *p);
    if (!p) return ea_err(EA_ERR_NOMEM, "replica plan");
    for (size_t i = 0; i < w->n_place; i++) p[w->place[i].server].n++;
    for (int s = 0; s < w->n_s; s++) {
        p[s].has = w->s[s].live && w->s[s].slots > 0;
        if (p[s].n && !(p[s].pairs = ea_malloc((size_t)p[s].n * sizeof *p[s].pairs))) {
            plan_free(p, w->n_s);
            return ea_err(EA_ERR_NOMEM, "replica plan");
        }
        p[s].n = 0;
    }
    for (int k = 0; k < w->n_c; k++)
        for (int i = w->c[k].head; i >= 0; i = w->place[i].next) {
            ea_replicas_assign *a = &p[w->place[i].server];
            a->pairs[a->n++] = (ea_mon_pair){w->c[k].layer, w->c[k].expert};
        }
    for (int s = 0; s < w->n_s; s++)
        if (p[s].n > 1) qsort(p[s].pairs, (size_t)p[s].n, sizeof *p[s].pairs, pair_cmp);
    *out = p;
    return EA_OK;
}

/* The current plan, copied, each server's pairs sorted. */
static ea_status current_plan(const plan_ws *w, ea_replicas_assign **out) {
    ea_replicas_assign *p = ea_calloc((size_t)w->n_s + 1, sizeof *p);
    if (!p) return ea_err(EA_ERR_NOMEM, "replica plan");
    for (int s = 0; s < w->n_s; s++) {
        const ea_replicas_server *v = &w->s[s];
        if (!v->has_current) continue;
        p[s].has = 1;
        if (!v->n_current) continue;
        if (!(p[s].pairs = ea_malloc((size_t)v->n_current * sizeof *p[s].pairs))) {
            plan_free(p, w->n_s);
            return ea_err(EA_ERR_NOMEM, "replica plan");
        }
        memcpy(p[s].pairs, v->current, (size_t)v->n_current * sizeof *p[s].pairs);
        p[s].n = v->n_current;
        if (p[s].n > 1) qsort(p[s].pairs, (size_t)p[s].n, sizeof *p[s].pairs, pair_cmp);
    }
    *out = p;
    return EA_OK;
}

/* Some server has a current plan and none breaks a rule (replicas.h, "Stability"). */
static int current_valid(const plan_ws *w, const ea_replicas_assign *cur) {
    int any = 0;
    for (int s = 0; s < w->n_s; s++) {
        const ea_replicas_server *v = &w->s[s];
        if (!cur[s].has) continue;
        any = 1;
        if (!v->live || cur[s].n > v->slots) return 0;
        for (int i = 0; i < cur[s].n; i++)
            if ((i > 0 && same_pair(&cur[s].pairs[i], &cur[s].pairs[i - 1])) ||
                ea_replicas_base_hosts(v, cur[s].pairs[i].layer, cur[s].pairs[i].expert))
                return 0;
    }
    return any;
}

static int plans_differ(const ea_replicas_assign *a, const ea_replicas_assign *b, int n) {
    for (int s = 0; s < n; s++)
        if (a[s].has != b[s].has || a[s].n != b[s].n ||
            (a[s].n && memcmp(a[s].pairs, b[s].pairs, (size_t)a[s].n * sizeof *a[s].pairs) != 0))
            return 1;
    return 0;
}

static void ws_free(plan_ws *w) {
    ea_free(w->c);
    ea_free(w->heap);
    ea_free(w->place);
    ea_free(w->load);
    ea_free(w->free);
    ea_free(w->rr);
}

static ea_status plan_in(plan_ws *w, const ea_replicas_load *load, int n_load, double min_gain, ea_replicas_result *out,
                         ea_replicas_assign **cur, ea_replicas_assign **next) {
    EA_TRY(candidates(w, load, n_load));
    w->heap = ea_malloc(((size_t)w->n_c + 1) * sizeof *w->heap);
    w->rr = ea_malloc(((size_t)w->n_c + 1) * sizeof *w->rr);
    w->load = ea_malloc(((size_t)w->n_s + 1) * sizeof *w->load);
    w->free = ea_malloc(((size_t)w->n_s + 1) * sizeof *w->free);
    if (!w->heap || !w->rr || !w->load || !w->free) return ea_err(EA_ERR_NOMEM, "replica plan");
    EA_TRY(greedy(w));
    EA_TRY(greedy_plan(w, next));
    EA_TRY(current_plan(w, cur));
    estimate(w, *cur, &out->before);
    estimate(w, *next, &out->after);
    out->current_valid = current_valid(w, *cur);
    double tol = out->before.unhosted * 1e-12;
    out->adopted = !out->current_valid || out->after.unhosted < out->before.unhosted - tol ||
                   out->after.max < (1 - min_gain) * out->before.max;
    out->changed = out->adopted && plans_differ(*cur, *next, w->n_s);
    return EA_OK;
}

ea_status ea_replicas_plan(const ea_replicas_server *s, int n_servers, const ea_replicas_load *load, int n_load,
                           double min_gain, ea_replicas_result *out) {
    EA_ASSERT(n_servers >= 0 && n_load >= 0 && min_gain >= 0 && min_gain <= 1);
    memset(out, 0, sizeof *out);
    plan_ws w = {.s = s, .n_s = n_servers};
    ea_replicas_assign *cur = NULL, *next = NULL;
    ea_status st = plan_in(&w, load, n_load, min_gain, out, &cur, &next);
    ws_free(&w);
    if (st != EA_OK) {
        plan_free(cur, n_servers);
        plan_free(next, n_servers);
        memset(out, 0, sizeof *out);
        return st;
    }
    out->plan = out->adopted ? next : cur;
    out->n_servers = n_servers;
    plan_free(out->adopted ? cur : next, n_servers);
    return EA_OK;
}

void ea_replicas_result_free(ea_replicas_result *r) {
    plan_free(r->plan, r->n_servers);
    memset(r, 0, sizeof *r);
}
