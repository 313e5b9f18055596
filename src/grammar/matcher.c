/*
 * matcher.c — the incremental pushdown matcher (grammar.h has the model).
 *
 * State: tops[] (ids of stack-top frames in the pool) and a partial code
 * point. Every top is either a CHARS element whose count is below its max,
 * or the accepting frame (pos -1). Expansion (ea__gm_expand) turns a frame
 * into such tops: a CHARS frame whose count reached min may also be left
 * (continue after it), a REF pushes each alternative of its rule above a
 * return frame, an END pops to the parent (or accepts at the bottom).
 *
 * Invariants:
 *   - frames are immutable and a frame's parent has a smaller id, so the pool
 *     is compacted by one pass in id order (gc) and speculative work is undone
 *     by truncating the pool to a mark;
 *   - the count of an unbounded CHARS frame is capped at its min, so equal
 *     states have equal frames (and the state does not grow with the text);
 *   - the tops are deduplicated by (pos, count, parent), through a small hash
 *     stamped with a generation per set being built (O(1) per top).
 * A return frame is skipped when the REF is the last element of its
 * alternative (a tail call), so right recursion (`item*` as `list ::= item list | ""`)
 * keeps the stacks flat.
 */
#include <string.h>

#include "base/alloc.h"
#include "grammar/grammar_internal.h"

static int32_t new_node(ea_gmatcher *m, int32_t pos, int32_t count, int32_t parent) {
    if (ea_grow(&m->nodes, &m->cap_nodes, m->n_nodes + 1, sizeof *m->nodes, 1024)) {
        m->oom = 1;
        return -1;
    }
    m->nodes[m->n_nodes] = (ea__gnode){pos, count, parent};
    return (int32_t)m->n_nodes++;
}

static void add_top(ea_gmatcher *m, int32_t pos, int32_t count, int32_t parent, int32_t self, int32_t **out,
                    size_t *n, size_t *cap) {
    const size_t mask = sizeof m->dd / sizeof m->dd[0] - 1;
    if (*n == 0 && ++m->dd_gen == 0) { /* a new set; on wrap-around forget every stamp */
        memset(m->dd, 0, sizeof m->dd);
        m->dd_gen = 1;
    }
    uint64_t h = ((uint64_t)(uint32_t)pos * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(uint32_t)count * 0xC2B2AE3D27D4EB4Full) ^
                 ((uint64_t)(uint32_t)parent * 0x165667B19E3779F9ull);
    size_t j = (size_t)(h ^ (h >> 31)) & mask;
    for (; m->dd[j].gen == m->dd_gen; j = (j + 1) & mask)
        if (m->dd[j].pos == pos && m->dd[j].count == count && m->dd[j].parent == parent) return;
    if (*n >= EA__GMAX_STACKS) {
        m->oom = 1; /* too ambiguous: reported like a failed allocation */
        return;
    }
    int32_t id = self;
    if (id < 0 && (id = new_node(m, pos, count, parent)) < 0) return;
    if (ea_grow(out, cap, *n + 1, sizeof **out, 16)) {
        m->oom = 1;
        return;
    }
    m->dd[j] = (struct ea__gdd){pos, count, parent, m->dd_gen};
    (*out)[(*n)++] = id;
}

static void expand(ea_gmatcher *m, int32_t pos, int32_t count, int32_t parent, int32_t self, int32_t **out,
                   size_t *n, size_t *cap) {
    const ea_grammar *g = m->g;
    if (m->oom) return;
    const ea__gelem *e = &g->el[pos];
    switch (e->kind) {
    case EA__GE_CHARS:
        if ((e->max < 0 || count < e->max) && g->cls[e->arg].n > 0) add_top(m, pos, count, parent, self, out, n, cap);
        if (count >= e->min) expand(m, pos + 1, 0, parent, -1, out, n, cap);
        break;
    case EA__GE_REF: {
        int32_t ret = parent;
        if (g->el[pos + 1].kind != EA__GE_END && (ret = new_node(m, pos + 1, 0, parent)) < 0) return;
        int r = e->arg;
        for (int a = 0; a < g->rule_nalt[r]; a++) expand(m, g->alt[g->rule_alt0[r] + a], 0, ret, -1, out, n, cap);
        break;
    }
    default: /* END */
        if (parent < 0) {
            add_top(m, -1, 0, -1, -1, out, n, cap);
        } else {
            ea__gnode p = m->nodes[parent];
            expand(m, p.pos, p.count, p.parent, parent, out, n, cap);
        }
        break;
    }
}

void ea__gm_expand(ea_gmatcher *m, int32_t pos, int32_t count, int32_t parent, int32_t **out, size_t *n,
                   size_t *cap) {
    expand(m, pos, count, parent, -1, out, n, cap);
}

/* The tops of cur[0..n) that take code point cp, advanced, into *out. */
static size_t step_cp(ea_gmatcher *m, const int32_t *cur, size_t n, uint32_t cp, int32_t **out, size_t *cap) {
    const ea_grammar *g = m->g;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        ea__gnode t = m->nodes[cur[i]];
        if (t.pos < 0) continue;
        const ea__gelem *e = &g->el[t.pos];
        if (!ea__gclass_has(g, e->arg, cp)) continue;
        int32_t c = t.count + 1;
        if (e->max < 0 && c > e->min) c = e->min;
        expand(m, t.pos, c, t.parent, -1, out, &k, cap);
    }
    return m->oom ? 0 : k;
}

/* Keep the tops of cur[0..n) whose class has a code point in [lo, hi]. */
static size_t filter(ea_gmatcher *m, int32_t *cur, size_t n, uint32_t lo, uint32_t hi) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const ea__gnode *t = &m->nodes[cur[i]];
        if (t->pos >= 0 && ea__gclass_meets(m->g, m->g->el[t->pos].arg, lo, hi)) cur[k++] = cur[i];
    }
    return k;
}

static void swap_buf(int32_t **a, size_t *ca, int32_t **b, size_t *cb) {
    int32_t *t = *a;
    *a = *b;
    *b = t;
    size_t c = *ca;
    *ca = *cb;
    *cb = c;
}

size_t ea__gm_run(ea_gmatcher *m, const int32_t *tops, size_t n, ea__gpartial *part, const uint8_t *s, size_t len,
                  int32_t **out, size_t *cap) {
    static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (ea_grow(&m->tmp, &m->cap_tmp, n + 1, sizeof *m->tmp, 64)) {
        m->oom = 1;
        return 0;
    }
    memcpy(m->tmp, tops, n * sizeof *tops);
    for (size_t i = 0; i < len && n > 0; i++) {
        uint8_t b = s[i];
        uint32_t cp;
        if (part->need == 0) {
            int l = ea__utf8_len(b);
            if (l == 0) return 0;
            if (l == 1) {
                cp = b;
            } else {
                part->bits = b & (0x7Fu >> l);
                part->need = l - 1;
                part->len = l;
                uint32_t lo = part->bits << (6 * part->need), hi = lo | ((1u << (6 * part->need)) - 1);
                if (lo < min_of[l]) lo = min_of[l];
                if (hi > 0x10FFFF) hi = 0x10FFFF;
                if (lo > hi) return 0;
                n = filter(m, m->tmp, n, lo, hi);
                continue;
            }
        } else {
            if ((b & 0xC0) != 0x80) return 0;
            part->bits = part->bits << 6 | (b & 0x3F);
            if (--part->need > 0) {
                uint32_t lo = part->bits << (6 * part->need), hi = lo | ((1u << (6 * part->need)) - 1);
                if (lo < min_of[part->len]) lo = min_of[part->len];
                if (hi > 0x10FFFF) hi = 0x10FFFF;
                if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return 0;
                n = filter(m, m->tmp, n, lo, hi);
                continue;
            }
            cp = part->bits;
            if (cp < min_of[part->len] || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        }
        n = step_cp(m, m->tmp, n, cp, out, cap);
        swap_buf(&m->tmp, &m->cap_tmp, out, cap);
    }
    if (n == 0) return 0;
    if (ea_grow(out, cap, n, sizeof **out, 64)) {
        m->oom = 1;
        return 0;
    }
    memcpy(*out, m->tmp, n * sizeof **out);
    return n;
}

/* ---- the public matcher ---- */

static void start(ea_gmatcher *m) {
    m->n_nodes = 0;
    m->n_tops = 0;
    m->oom = 0;
    memset(&m->part, 0, sizeof m->part);
    const ea_grammar *g = m->g;
    int r = g->root;
    for (int a = 0; a < g->rule_nalt[r]; a++)
        expand(m, g->alt[g->rule_alt0[r] + a], 0, -1, -1, &m->tops, &m->n_tops, &m->cap_tops);
}

ea_status ea_gmatcher_create(const ea_grammar *g, ea_gmatcher **out) {
    ea_gmatcher *m = ea_calloc(1, sizeof *m);
    if (!m) return ea_err(EA_ERR_NOMEM, "grammar matcher");
    m->g = g;
    start(m);
    if (m->oom) {
        ea_gmatcher_destroy(m);
        return ea_err(EA_ERR_NOMEM, "grammar matcher");
    }
    *out = m;
    return EA_OK;
}

void ea_gmatcher_destroy(ea_gmatcher *m) {
    if (!m) return;
    ea_free(m->nodes);
    ea_free(m->tops);
    ea_free(m->tmp);
    ea_free(m->tmp2);
    ea_free(m->tmp3);
    ea_free(m->cls_entry);
    ea_free(m);
}

void ea_gmatcher_reset(ea_gmatcher *m) {
    start(m);
}

/* Drop frames no stack reaches: one pass in id order (parents come first). */
static void gc(ea_gmatcher *m) {
    size_t n = m->n_nodes;
    int32_t *map = ea_malloc(n * sizeof *map);
    if (!map) return; /* keep the garbage; correct, only larger */
    for (size_t i = 0; i < n; i++) map[i] = -1;
    for (size_t i = 0; i < m->n_tops; i++)
        for (int32_t id = m->tops[i]; id >= 0 && map[id] == -1; id = m->nodes[id].parent) map[id] = -2;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (map[i] != -2) continue;
        ea__gnode x = m->nodes[i];
        if (x.parent >= 0) x.parent = map[x.parent];
        m->nodes[k] = x;
        map[i] = (int32_t)k++;
    }
    for (size_t i = 0; i < m->n_tops; i++) m->tops[i] = map[m->tops[i]];
    m->n_nodes = k;
    ea_free(map);
}

ea_status ea_gmatcher_accept_bytes(ea_gmatcher *m, const char *bytes, size_t n) {
    size_t mark = m->n_nodes;
    ea__gpartial part = m->part;
    m->oom = 0;
    size_t k = ea__gm_run(m, m->tops, m->n_tops, &part, (const uint8_t *)bytes, n, &m->tmp2, &m->cap_tmp2);
    if (k == 0) {
        int oom = m->oom;
        m->n_nodes = mark;
        m->oom = 0;
        if (oom) return ea_err(EA_ERR_NOMEM, "grammar matcher: out of memory or more than %d stacks", EA__GMAX_STACKS);
        return ea_err(EA_ERR_INVALID_ARG, "grammar: the text leaves the language");
    }
    swap_buf(&m->tops, &m->cap_tops, &m->tmp2, &m->cap_tmp2);
    m->n_tops = k;
    m->part = part;
    if (m->n_nodes > 4096 && m->n_nodes > 16 * m->n_tops) gc(m);
    return EA_OK;
}

int ea_gmatcher_accepting(const ea_gmatcher *m) {
    if (m->part.need) return 0;
    for (size_t i = 0; i < m->n_tops; i++)
        if (m->nodes[m->tops[i]].pos < 0) return 1;
    return 0;
}

int ea_gmatcher_done(const ea_gmatcher *m) {
    return m->part.need == 0 && m->n_tops == 1 && m->nodes[m->tops[0]].pos < 0;
}

int ea_gmatcher_n_stacks(const ea_gmatcher *m) {
    return (int)m->n_tops;
}
