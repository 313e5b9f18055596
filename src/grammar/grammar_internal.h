/*
 * grammar_internal.h — what the files of src/grammar/ share: the flat rule
 * representation, the matcher's stacks, UTF-8 helpers. Not for other callers.
 *
 * A grammar's elements are one array; each alternative is a run of elements
 * ending with an END element (arg = its rule). rule_alt0[r] .. + rule_nalt[r]
 * index `alt`, which holds each alternative's first element. Classes are
 * sorted, disjoint ranges without surrogates.
 */
#ifndef EA_GRAMMAR_INTERNAL_H
#define EA_GRAMMAR_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"

enum { EA__GE_CHARS = 1, EA__GE_REF = 2, EA__GE_END = 3 };

typedef struct ea__gelem {
    uint8_t kind;
    int32_t arg;      /* CHARS: class id; REF: rule id; END: rule id */
    int32_t min, max; /* CHARS: count bounds, max -1 = unbounded */
} ea__gelem;

typedef struct {
    int32_t first, n; /* ranges rg[first .. first+n) */
} ea__gclass;

struct ea_grammar {
    ea__gelem *el;   /* owns (n_el) */
    int n_el;
    int32_t *alt;    /* owns (n_alt): first element of each alternative, grouped by rule */
    int n_alt;
    int32_t *rule_alt0, *rule_nalt; /* owns (n_rules) */
    char **names;    /* owns (n_rules), each may be NULL */
    int n_rules;
    ea_grange *rg;   /* owns (n_rg) */
    int n_rg;
    ea__gclass *cls; /* owns (n_cls) */
    int n_cls;
    int root;
    atomic_int refs; /* ea_grammar_ref / ea_grammar_destroy */
};

/* 1 if cp is in class c of g. */
int ea__gclass_has(const ea_grammar *g, int c, uint32_t cp);
/* 1 if class c has a code point in [lo, hi]. */
int ea__gclass_meets(const ea_grammar *g, int c, uint32_t lo, uint32_t hi);
/* Same over a bare range list. */
int ea__granges_has(const ea_grange *r, int n, uint32_t cp);
int ea__granges_meets(const ea_grange *r, int n, uint32_t lo, uint32_t hi);

/* UTF-8: the length of a sequence starting with lead byte b (1..4), 0 if b cannot start one. */
int ea__utf8_len(uint8_t b);
/* Decode one code point at s[0..n): returns bytes used (> 0) and *cp; 0 if s holds
 * only the start of a valid sequence (then *lo..*hi are the code points it may
 * become); -1 if invalid. */
int ea__utf8_next(const uint8_t *s, size_t n, uint32_t *cp, uint32_t *lo, uint32_t *hi);

/* ---- the matcher's state ---- */

/* A stack frame: at element pos with count code points taken (CHARS), below it
 * parent (-1: the bottom). pos -1 marks the accepting stack. Frames never change
 * once made, and a frame's parent has a smaller id. */
typedef struct {
    int32_t pos, count, parent;
} ea__gnode;

/* A code point split across tokens: bytes still needed and the bits so far. */
typedef struct {
    uint32_t bits;
    int need, len; /* len: the sequence's total length */
} ea__gpartial;

#define EA__GMAX_STACKS 512 /* a bound on a step's work: beyond it the request ends with an error */

struct ea_gmatcher {
    const ea_grammar *g;
    ea__gnode *nodes;            /* owns: the frame pool */
    size_t n_nodes, cap_nodes;
    int32_t *tops;               /* owns: the current state's stack tops */
    size_t n_tops, cap_tops;
    ea__gpartial part;
    int32_t *tmp;                /* owns: scratch tops */
    size_t cap_tmp;
    int32_t *tmp2;               /* owns: scratch tops (speculative runs) */
    size_t cap_tmp2;
    int32_t *tmp3;               /* owns */
    size_t cap_tmp3;
    int oom;                     /* an allocation failed during expansion, or EA__GMAX_STACKS was passed */
    int capped;                  /* a speculative run (mask) hit oom: its "no" may be wrong */
    struct ea__gdd {             /* the tops being built, hashed to deduplicate them in O(1): */
        int32_t pos, count, parent;
        uint32_t gen;            /* an entry is in the current set iff gen == dd_gen */
    } dd[2 * EA__GMAX_STACKS];  /* a power of two, at most half full */
    uint32_t dd_gen;
    /* token_index.c's per-class cache entries for this grammar (a view into ix) */
    const ea_token_index *ix;
    uint64_t ix_gen;
    void **cls_entry;            /* owns the array (n_cls), borrows the entries */
};


/* Expand frame (pos, count, parent) into tops: append every stack top reachable
 * without consuming text to *out (grown as needed), deduplicated. */
void ea__gm_expand(ea_gmatcher *m, int32_t pos, int32_t count, int32_t parent, int32_t **out, size_t *n, size_t *cap);
/* Advance the state (tops[0..n), part) by bytes into *out; returns the number of
 * tops left (0: dead). *part is updated. Nodes made are left in the pool. */
size_t ea__gm_run(ea_gmatcher *m, const int32_t *tops, size_t n, ea__gpartial *part, const uint8_t *s, size_t len,
                  int32_t **out, size_t *cap);

#endif

/* Append atom{min,max} to s (max -1: unbounded): a single CHARS{1,1} atom takes the
 * bounds itself; anything else becomes a rule repeated (min copies, then a chain of
 * optional ones or a right-recursive tail). Fails (0) past limit elements. */
int ea__gseq_repeat(ea_gbuild *b, ea_gseq *s, const ea_gseq *atom, int min, int max, const char *name);
/* The front ends' error text: "at offset <at>: " + the message, into err[0..n) (nothing
 * if a message is already there: the first error wins). Returns -1. */
int ea__gfail_at(char *err, size_t n, int *failed, size_t at, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));
/* The schema front ends' error: path into err_path[0..n_path), the message into
 * err[0..n_err) (either may be NULL). Returns -1. */
int ea__gfail_path(char *err_path, size_t n_path, char *err, size_t n_err, const char *path, const char *fmt,
                   va_list ap) __attribute__((format(printf, 6, 0)));
/* The value of hex digit c, -1 if it is not one. */
int ea__hexval(int c);
/* A rule matching exactly one of the n texts (valid UTF-8), as a trie: texts
 * that share a prefix share its elements, so the matcher holds one stack per
 * distinct next character, not one per text (guided_choice, enum). -1 on bad UTF-8
 * or no memory. */
int ea__gb_literals_rule(ea_gbuild *b, const char *const *texts, const size_t *lens, int n, const char *name);
/* Append the elements of a to s. */
void ea__gseq_append(ea_gseq *s, const ea_gseq *a);
/* ea_gb_json_schema_rule for schema, a node inside the document root ($refs
 * resolve in root; root_path names root, path names schema). */
ea_status ea__gb_json_subschema_rule(ea_gbuild *b, const json_t *root, const char *root_path, const json_t *schema,
                                     const char *path, const ea_json_grammar_opts *opts, int *rule, char *err_path,
                                     size_t n_path, char *err, size_t n_err);
/* The regex (unanchored) of a JSON Schema string format ("date", "uuid", ...), or NULL. */
const char *ea__json_format_regex(const char *name);
/* A new rule whose only alternative is seq; returns the rule id. */
int ea__gb_rule_of(ea_gbuild *b, const ea_gseq *seq, const char *name);
