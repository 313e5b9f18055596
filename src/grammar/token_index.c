/*
 * token_index.c — the vocabulary as the grammar sees it, and the per-step
 * mask of allowed tokens (grammar.h has the idea; this is the detail).
 *
 * The index holds every text token's bytes, the ids sorted by first byte,
 * and one entry per character class met so far (keyed by the class's
 * ranges, so all grammars and requests share it):
 *   full[]  tokens whose bytes are whole code points all in the class, sorted
 *           by their length in code points (full_ncp[]); full_bits is the same
 *           set as a bitset when it is large
 *   part[]  tokens that start in the class and then leave it: after j
 *           in-class code points comes either a complete code point cp out
 *           of the class (kind 0, at byte off) or an incomplete tail that may
 *           become any of lo..hi (kind 1)
 * Tokens whose first code point is not in the class are in neither list.
 *
 * Mask of a state: for each stack top t = CHARS(class C, min, max) at count c,
 * rem = max - c code points may still come from C:
 *   1. full tokens with ncp <= rem: allowed (the bitset OR'd in, less the
 *      longer ones when they are fewer, else the prefix of full[] set bit by bit);
 *   2. X = the stacks after leaving t (its element popped, expanded): the
 *      classes that may follow C. If none of them meets C, a token that leaves
 *      C can only do so at its first out-of-class code point, so for part[]:
 *      kind 0: allowed iff c + j >= min, cp is in a class of X, and the rest of
 *              the token (from off) runs through X;
 *      kind 1: allowed iff the tail may stay in C (j < rem) or leave to X
 *              (c + j >= min and a class of X meets lo..hi);
 *      and full tokens with ncp > rem are not allowed.
 *      If some class of X meets C, a token may leave C early, so every
 *      candidate not yet allowed runs through the matcher from t (exact, slower;
 *      regexes like [a-z]*b meet it, the JSON grammars do not).
 * A state with a partial code point pending runs the tokens that start with a
 * continuation byte through the matcher (nothing else can follow).
 * The accepting top allows no text (EOS is the caller's).
 *
 * ea_gmatcher_mask_ref runs every token through the matcher: the tests check
 * both give the same bits.
 *
 * Memory: entries are freed all at once when they pass EA__IX_MAX_MEM (a
 * generation counter tells matchers their cached pointers are stale).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "grammar/grammar_internal.h"

#define EA__IX_MAX_MEM ((size_t)512 << 20)

typedef struct {
    int32_t id;
    int32_t j;     /* complete in-class code points before the way out */
    uint32_t off;  /* byte offset of the way out */
    uint8_t kind;  /* 0: complete code point cp; 1: incomplete tail lo..hi */
    uint32_t cp, lo, hi;
} part_ent;

typedef struct centry {
    uint64_t hash;
    ea_grange *rg; /* owns (n_rg) */
    int n_rg;
    int32_t *full;     /* owns (n_full) */
    int32_t *full_ncp; /* owns (n_full) */
    int n_full, max_ncp;
    uint64_t *full_bits; /* owns (n_words) or NULL */
    part_ent *part;      /* owns (n_part) */
    int n_part;
    struct centry *next;
} centry;

struct ea_token_index {
    int n_vocab;
    size_t n_words;
    uint8_t *bytes;    /* owns: all tokens' bytes */
    uint32_t *off;     /* owns (n_vocab + 1); a token with no text has length 0 */
    int32_t *by_first; /* owns: text token ids sorted by first byte */
    uint32_t first_off[257];
    centry **tab;      /* owns: hash chains (cap_tab) */
    size_t cap_tab, n_ent, mem;
    uint64_t gen;
    uint64_t *scratch; /* owns (n_words): a class's full tokens minus the too-long ones */
};

static size_t tok_len(const ea_token_index *ix, int32_t id) {
    return ix->off[id + 1] - ix->off[id];
}

ea_status ea_token_index_create(const char *const *tokens, const size_t *lens, int n_vocab, ea_token_index **out) {
    ea_token_index *ix = ea_calloc(1, sizeof *ix);
    if (!ix) return ea_err(EA_ERR_NOMEM, "token index");
    ix->n_vocab = n_vocab;
    ix->n_words = ((size_t)n_vocab + 63) / 64;
    size_t total = 0;
    for (int i = 0; i < n_vocab; i++)
        if (tokens[i]) total += lens[i];
    ix->bytes = ea_malloc(total + 1);
    ix->off = ea_malloc(((size_t)n_vocab + 1) * sizeof *ix->off);
    ix->by_first = ea_malloc(((size_t)n_vocab + 1) * sizeof *ix->by_first);
    ix->scratch = ea_malloc((ix->n_words + 1) * sizeof *ix->scratch);
    ix->cap_tab = 1024;
    ix->tab = ea_calloc(ix->cap_tab, sizeof *ix->tab);
    if (!ix->bytes || !ix->off || !ix->by_first || !ix->tab || !ix->scratch || total > UINT32_MAX) {
        ea_token_index_destroy(ix);
        return ea_err(EA_ERR_NOMEM, "token index");
    }
    uint32_t at = 0, cnt[257] = {0};
    for (int i = 0; i < n_vocab; i++) {
        ix->off[i] = at;
        if (tokens[i] && lens[i]) {
            memcpy(ix->bytes + at, tokens[i], lens[i]);
            at += (uint32_t)lens[i];
            cnt[(uint8_t)tokens[i][0] + 1]++;
        }
    }
    ix->off[n_vocab] = at;
    for (int b = 0; b < 256; b++) cnt[b + 1] += cnt[b];
    memcpy(ix->first_off, cnt, sizeof cnt);
    for (int i = 0; i < n_vocab; i++)
        if (tok_len(ix, i)) ix->by_first[cnt[ix->bytes[ix->off[i]]]++] = i;
    *out = ix;
    return EA_OK;
}

static void free_entry(centry *e) {
    ea_free(e->rg);
    ea_free(e->full);
    ea_free(e->full_ncp);
    ea_free(e->full_bits);
    ea_free(e->part);
    ea_free(e);
}

static void flush(ea_token_index *ix) {
    for (size_t i = 0; i < ix->cap_tab; i++) {
        for (centry *e = ix->tab[i], *nx; e; e = nx) {
            nx = e->next;
            free_entry(e);
        }
        ix->tab[i] = NULL;
    }
    ix->n_ent = 0;
    ix->mem = 0;
    ix->gen++;
}

void ea_token_index_destroy(ea_token_index *ix) {
    if (!ix) return;
    if (ix->tab) flush(ix);
    ea_free(ix->tab);
    ea_free(ix->bytes);
    ea_free(ix->off);
    ea_free(ix->by_first);
    ea_free(ix->scratch);
    ea_free(ix);
}

int ea_token_index_vocab(const ea_token_index *ix) {
    return ix->n_vocab;
}

/* The code points a sequence with lead byte b stands for, [*lo, *hi]; 0 if b leads none. */
static int lead_range(int b, uint32_t *lo, uint32_t *hi) {
    int l = ea__utf8_len((uint8_t)b);
    if (l == 0) return 0;
    if (l == 1) {
        *lo = *hi = (uint32_t)b;
        return 1;
    }
    static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t v = (uint32_t)b & (0x7Fu >> l);
    *lo = v << (6 * (l - 1));
    *hi = *lo | ((1u << (6 * (l - 1))) - 1);
    if (*lo < min_of[l]) *lo = min_of[l];
    if (*hi > 0x10FFFF) *hi = 0x10FFFF;
    return *lo <= *hi;
}

static int cmp_ncp(const void *a, const void *b) {
    const int32_t *x = a, *y = b;
    if (x[1] != y[1]) return x[1] < y[1] ? -1 : 1;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static centry *build_entry(ea_token_index *ix, const ea_grange *rg, int n_rg, uint64_t h) {
    centry *e = ea_calloc(1, sizeof *e);
    if (!e) return NULL;
    e->hash = h;
    e->n_rg = n_rg;
    e->rg = ea_malloc((size_t)(n_rg ? n_rg : 1) * sizeof *rg);
    int32_t *pairs = NULL; /* (id, ncp) */
    size_t n_pairs = 0, cap_pairs = 0, cap_part = 0;
    if (!e->rg) goto oom;
    memcpy(e->rg, rg, (size_t)n_rg * sizeof *rg);
    for (int b = 0; b < 256; b++) {
        uint32_t lo, hi;
        if (!lead_range(b, &lo, &hi) || !ea__granges_meets(rg, n_rg, lo, hi)) continue;
        for (uint32_t k = ix->first_off[b]; k < ix->first_off[b + 1]; k++) {
            int32_t id = ix->by_first[k];
            const uint8_t *p = ix->bytes + ix->off[id];
            size_t len = tok_len(ix, id), i = 0;
            int32_t j = 0;
            part_ent pe = {id, 0, 0, 0, 0, 0, 0};
            int what = -1; /* 0 full, 1 part, -1 never */
            while (i < len) {
                uint32_t cp, l2, h2;
                int r = ea__utf8_next(p + i, len - i, &cp, &l2, &h2);
                if (r < 0) break;
                if (r == 0) {
                    if (j > 0 || ea__granges_meets(rg, n_rg, l2, h2)) {
                        pe.kind = 1, pe.lo = l2, pe.hi = h2, what = 1;
                    }
                    break;
                }
                if (!ea__granges_has(rg, n_rg, cp)) {
                    if (j > 0) pe.kind = 0, pe.cp = cp, what = 1;
                    break;
                }
                j++;
                i += (size_t)r;
                if (i == len) what = 0;
            }
            if (what == 0) {
                if (ea_grow(&pairs, &cap_pairs, (n_pairs + 1) * 2, sizeof *pairs, 256)) goto oom;
                pairs[2 * n_pairs] = id;
                pairs[2 * n_pairs + 1] = j;
                n_pairs++;
            } else if (what == 1) {
                pe.j = j;
                pe.off = (uint32_t)i;
                if (ea_grow(&e->part, &cap_part, (size_t)e->n_part + 1, sizeof *e->part, 64)) goto oom;
                e->part[e->n_part++] = pe;
            }
        }
    }
    if (n_pairs) qsort(pairs, n_pairs, 2 * sizeof *pairs, cmp_ncp);
    e->n_full = (int)n_pairs;
    e->full = ea_malloc((n_pairs + 1) * sizeof *e->full);
    e->full_ncp = ea_malloc((n_pairs + 1) * sizeof *e->full_ncp);
    if (!e->full || !e->full_ncp) goto oom;
    for (size_t i = 0; i < n_pairs; i++) {
        e->full[i] = pairs[2 * i];
        e->full_ncp[i] = pairs[2 * i + 1];
    }
    e->max_ncp = n_pairs ? e->full_ncp[n_pairs - 1] : 0;
    if (n_pairs * 64 >= (size_t)ix->n_vocab) {
        if (!(e->full_bits = ea_calloc(ix->n_words, sizeof *e->full_bits))) goto oom;
        for (size_t i = 0; i < n_pairs; i++) e->full_bits[e->full[i] >> 6] |= 1ull << (e->full[i] & 63);
    }
    ea_free(pairs);
    ix->mem += n_pairs * 8 + (size_t)e->n_part * sizeof *e->part + (e->full_bits ? ix->n_words * 8 : 0) + 128;
    return e;
oom:
    ea_free(pairs);
    free_entry(e);
    return NULL;
}

static uint64_t hash_rg(const ea_grange *r, int n) {
    uint64_t h = 0xCBF29CE484222325ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h = (h ^ r[i].lo) * 0x100000001B3ull;
        h = (h ^ r[i].hi) * 0x100000001B3ull;
    }
    return h ^ (h >> 31);
}

/* The entry of grammar class c (cached in the matcher). */
static centry *entry(ea_gmatcher *m, ea_token_index *ix, int c) {
    const ea_grammar *g = m->g;
    if (m->ix != ix || m->ix_gen != ix->gen || !m->cls_entry) {
        if (!m->cls_entry && !(m->cls_entry = ea_calloc((size_t)g->n_cls + 1, sizeof *m->cls_entry))) return NULL;
        memset(m->cls_entry, 0, ((size_t)g->n_cls + 1) * sizeof *m->cls_entry);
        m->ix = ix;
        m->ix_gen = ix->gen;
    }
    if (m->cls_entry[c]) return m->cls_entry[c];
    const ea_grange *rg = g->rg + g->cls[c].first;
    int n = g->cls[c].n;
    uint64_t h = hash_rg(rg, n);
    centry **slot = &ix->tab[h & (ix->cap_tab - 1)];
    for (centry *e = *slot; e; e = e->next)
        if (e->hash == h && e->n_rg == n && memcmp(e->rg, rg, (size_t)n * sizeof *rg) == 0) return m->cls_entry[c] = e;
    if (ix->mem > EA__IX_MAX_MEM) { /* forget every entry (and every matcher's pointers) */
        flush(ix);
        memset(m->cls_entry, 0, ((size_t)g->n_cls + 1) * sizeof *m->cls_entry);
        m->ix_gen = ix->gen;
        slot = &ix->tab[h & (ix->cap_tab - 1)];
    }
    centry *e = build_entry(ix, rg, n, h);
    if (!e) return NULL;
    e->next = *slot;
    *slot = e;
    ix->n_ent++;
    return m->cls_entry[c] = e;
}

static inline void set_bit(uint64_t *bits, int32_t id) {
    bits[id >> 6] |= 1ull << (id & 63);
}

static inline int has_bit(const uint64_t *bits, int32_t id) {
    return (int)(bits[id >> 6] >> (id & 63) & 1);
}

/* 1 if the token's bytes from off keep the state (tops[0..n), part) alive. Nodes made are dropped. */
static int runs(ea_gmatcher *m, const ea_token_index *ix, const int32_t *tops, size_t n, ea__gpartial part,
                int32_t id, size_t off) {
    size_t mark = m->n_nodes;
    m->oom = 0;
    size_t k = ea__gm_run(m, tops, n, &part, ix->bytes + ix->off[id] + off, tok_len(ix, id) - off, &m->tmp2,
                          &m->cap_tmp2);
    if (m->oom) m->capped = 1;
    m->oom = 0;
    m->n_nodes = mark;
    return k > 0;
}

/* 1 if a class of the tops x[0..nx) has cp (or meets [lo, hi] when cp is UINT32_MAX). */
static int x_takes(const ea_gmatcher *m, const int32_t *x, size_t nx, uint32_t lo, uint32_t hi) {
    for (size_t i = 0; i < nx; i++) {
        const ea__gnode *t = &m->nodes[x[i]];
        if (t->pos >= 0 && ea__gclass_meets(m->g, m->g->el[t->pos].arg, lo, hi)) return 1;
    }
    return 0;
}

/* The allowed tokens of one stack top (see the header). */
static ea_status mask_top(ea_gmatcher *m, ea_token_index *ix, int32_t top, uint64_t *bits) {
    const ea_grammar *g = m->g;
    ea__gnode t = m->nodes[top];
    const ea__gelem *el = &g->el[t.pos];
    centry *ce = entry(m, ix, el->arg);
    if (!ce) return ea_err(EA_ERR_NOMEM, "token index");
    int rem = el->max < 0 ? INT_MAX : el->max - t.count;
    int n_le = 0; /* full tokens with ncp <= rem: a prefix of full[] */
    if (rem >= ce->max_ncp) {
        n_le = ce->n_full;
    } else {
        int a = 0, b = ce->n_full;
        while (a < b) {
            int mid = (a + b) / 2;
            if (ce->full_ncp[mid] <= rem) a = mid + 1;
            else b = mid;
        }
        n_le = a;
    }
    if (ce->full_bits && n_le == ce->n_full) {
        for (size_t w = 0; w < ix->n_words; w++) bits[w] |= ce->full_bits[w];
    } else if (ce->full_bits && ce->n_full - n_le < n_le) { /* fewer to take out than to put in */
        memcpy(ix->scratch, ce->full_bits, ix->n_words * sizeof *bits);
        for (int i = n_le; i < ce->n_full; i++) ix->scratch[ce->full[i] >> 6] &= ~(1ull << (ce->full[i] & 63));
        for (size_t w = 0; w < ix->n_words; w++) bits[w] |= ix->scratch[w];
    } else {
        for (int i = 0; i < n_le; i++) set_bit(bits, ce->full[i]);
    }
    if (ce->n_part == 0 && rem >= ce->max_ncp) return EA_OK;
    /* X: the stacks after leaving this element */
    size_t mark = m->n_nodes, nx = 0;
    m->oom = 0;
    ea__gm_expand(m, t.pos + 1, 0, t.parent, &m->tmp3, &nx, &m->cap_tmp3);
    if (m->oom) {
        m->n_nodes = mark;
        return ea_err(EA_ERR_NOMEM, "grammar matcher");
    }
    const int32_t *x = m->tmp3;
    int overlap = 0;
    const ea_grange *crg = g->rg + g->cls[el->arg].first;
    for (int i = 0; i < g->cls[el->arg].n && !overlap; i++) overlap = x_takes(m, x, nx, crg[i].lo, crg[i].hi);
    ea__gpartial none = {0, 0, 0};
    if (overlap) {
        for (int i = 0; i < ce->n_full; i++)
            if (ce->full_ncp[i] > rem && !has_bit(bits, ce->full[i]) && runs(m, ix, &top, 1, none, ce->full[i], 0))
                set_bit(bits, ce->full[i]);
        for (int i = 0; i < ce->n_part; i++)
            if (!has_bit(bits, ce->part[i].id) && runs(m, ix, &top, 1, none, ce->part[i].id, 0))
                set_bit(bits, ce->part[i].id);
    } else {
        for (int i = 0; i < ce->n_part; i++) {
            const part_ent *p = &ce->part[i];
            if (p->j > rem || has_bit(bits, p->id)) continue;
            int can_leave = t.count + p->j >= el->min;
            if (p->kind == 0) {
                if (can_leave && x_takes(m, x, nx, p->cp, p->cp) && runs(m, ix, x, nx, none, p->id, p->off))
                    set_bit(bits, p->id);
            } else if ((p->j < rem && ea__gclass_meets(g, el->arg, p->lo, p->hi)) ||
                       (can_leave && x_takes(m, x, nx, p->lo, p->hi))) {
                set_bit(bits, p->id);
            }
        }
    }
    m->n_nodes = mark;
    return EA_OK;
}

ea_status ea_gmatcher_mask(ea_gmatcher *m, ea_token_index *ix, uint64_t *bits) {
    memset(bits, 0, ix->n_words * sizeof *bits);
    m->capped = 0;
    if (m->part.need) { /* only continuation bytes may follow */
        for (uint32_t k = ix->first_off[0x80]; k < ix->first_off[0xC0]; k++)
            if (runs(m, ix, m->tops, m->n_tops, m->part, ix->by_first[k], 0)) set_bit(bits, ix->by_first[k]);
        return EA_OK;
    }
    for (size_t i = 0; i < m->n_tops; i++) {
        if (m->nodes[m->tops[i]].pos < 0) continue;
        EA_TRY(mask_top(m, ix, m->tops[i], bits));
    }
    return EA_OK;
}

ea_status ea_gmatcher_mask_ref(ea_gmatcher *m, const ea_token_index *ix, uint64_t *bits) {
    memset(bits, 0, ix->n_words * sizeof *bits);
    m->capped = 0;
    for (int id = 0; id < ix->n_vocab; id++)
        if (tok_len(ix, id) && runs(m, ix, m->tops, m->n_tops, m->part, id, 0)) set_bit(bits, id);
    if (m->capped)
        return ea_err(EA_ERR_RANGE, "grammar: a token would need more than %d stacks (too ambiguous)", EA__GMAX_STACKS);
    return EA_OK;
}

ea_status ea_gmatcher_accept_token(ea_gmatcher *m, const ea_token_index *ix, int32_t id) {
    if (id < 0 || id >= ix->n_vocab || !tok_len(ix, id))
        return ea_err(EA_ERR_INVALID_ARG, "grammar: token %d has no text", (int)id);
    return ea_gmatcher_accept_bytes(m, (const char *)ix->bytes + ix->off[id], tok_len(ix, id));
}
