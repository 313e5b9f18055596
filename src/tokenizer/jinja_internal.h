/*
 * jinja_internal.h — shared inside the chat-template interpreter only
 * (chat_template.c, jinja_lex.c, jinja_parse.c, jinja_value.c, jinja_eval.c).
 *
 * The interpreter reproduces the semantics of the reference renderer the
 * project compares against (@huggingface/jinja, what transformers.js and
 * most JS tooling use), including its quirks: JS number formatting, JS loose
 * equality for ==, strip()/lstrip()/rstrip() ignoring their argument, and
 * trim_blocks + lstrip_blocks always on. Where the reference's behaviour is
 * too murky to reproduce exactly (comparing a list with a string, locale
 * sorting, ...), we return an error instead of guessing: a chat template
 * must never produce a wrong prompt silently.
 *
 * Memory: a template owns one chunk pool (jj_pool) holding the preprocessed
 * source and the AST; every render has its own pool for values, freed at once
 * when the render ends. Values are immutable once built, except namespace
 * maps (`{% set ns.x = ... %}`), so they are shared freely by pointer; pointer
 * identity is list/dict identity (what JS == compares for objects).
 */
#ifndef EA_JINJA_INTERNAL_H
#define EA_JINJA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/status.h"

/* ---- chunk pool ---------------------------------------------------------- */

typedef struct jj_chunk jj_chunk;
typedef struct {
    jj_chunk *head; /* owns the chunk list */
    size_t used_total;
    size_t limit; /* total bytes this pool may hand out; 0 = no limit */
    bool failed;  /* an allocation failed (out of memory or over the limit) */
} jj_pool;

void ea__jj_pool_init(jj_pool *p, size_t limit);
void ea__jj_pool_deinit(jj_pool *p);
/* 16-byte aligned, zeroed; NULL on failure (sets p->failed). */
void *ea__jj_alloc(jj_pool *p, size_t n);
char *ea__jj_strndup(jj_pool *p, const char *s, size_t n);
/* Grow a pool array: *(T **)pp holds n elements of elem bytes and has room for
 * *cap; make room for need (capacity: ea_grow_cap from first, base/alloc.h) by
 * copying the n into a new pool block (the pool frees nothing before it is
 * deinitialized). false when out of memory (array and *cap unchanged). */
bool ea__jj_grow(jj_pool *p, void *pp, size_t n, size_t *cap, size_t need, size_t elem, size_t first);

/* ---- source positions ---------------------------------------------------- */

typedef struct {
    const char *orig; /* borrows: the template text as given */
    size_t orig_len;
    const uint32_t *map; /* preprocessed offset -> original offset (n_map + 1 entries) */
    size_t n_map;
} jj_srcmap;

/* Line and column (1-based, column in bytes) of a preprocessed offset. */
void ea__jj_linecol(const jj_srcmap *m, size_t pos, int *line, int *col);

/* ---- lexer ---------------------------------------------------------------- */

typedef enum {
    JT_TEXT, JT_NUM, JT_STR, JT_IDENT, JT_EQUALS, JT_LPAREN, JT_RPAREN,
    JT_OPEN_STMT, JT_CLOSE_STMT, JT_OPEN_EXPR, JT_CLOSE_EXPR,
    JT_LBRACKET, JT_RBRACKET, JT_LBRACE, JT_RBRACE, JT_COMMA, JT_DOT, JT_COLON, JT_PIPE,
    JT_ADD, JT_MUL, JT_POW, JT_CMP, JT_UNARY, JT_COMMENT
} jj_toktype;

typedef struct {
    jj_toktype type;
    const char *s; /* owned by the template pool: value (decoded for strings) */
    size_t n;
    uint32_t pos; /* preprocessed offset where the token starts */
} jj_token;

/* Preprocess (trailing newline, lstrip_blocks, trim_blocks, generation tags)
 * and tokenize. OUT: *toks, *n_toks, *map (preprocessed offset -> original), *n_map. */
ea_status ea__jj_lex(jj_pool *pool, const char *text, size_t len, jj_token **toks, size_t *n_toks,
                     uint32_t **map, size_t *n_map);

/* ---- AST ------------------------------------------------------------------ */

typedef enum {
    JN_TEXT, JN_IF, JN_FOR, JN_SET, JN_BREAK, JN_CONTINUE, JN_COMMENT,
    JN_INT, JN_FLOAT, JN_STR, JN_ARRAY, JN_TUPLE, JN_OBJECT, JN_IDENT,
    JN_CALL, JN_MEMBER, JN_SLICE, JN_UNARY, JN_BINARY, JN_FILTER, JN_TEST,
    JN_SELECT, JN_TERNARY, JN_KWARG
} jj_nodekind;

typedef enum {
    JOP_NONE, JOP_AND, JOP_OR, JOP_NOT, JOP_EQ, JOP_NE, JOP_LT, JOP_GT, JOP_LE, JOP_GE,
    JOP_IN, JOP_NOT_IN, JOP_ADD, JOP_SUB, JOP_CONCAT, JOP_MUL, JOP_DIV, JOP_FLOORDIV,
    JOP_MOD, JOP_POW, JOP_NEG, JOP_POS
} jj_op;

typedef struct jj_node jj_node;
struct jj_node {
    jj_nodekind kind;
    jj_op op;
    uint32_t pos;    /* preprocessed offset, for error messages */
    const char *s;   /* TEXT, STR, IDENT, KWARG key, TEST name (pool) */
    size_t n;
    double num;      /* INT, FLOAT */
    bool flag;       /* MEMBER: computed; TEST: negated */
    jj_node *a, *b, *c;
    jj_node **list;  /* bodies, args, elements, object keys */
    size_t n_list;
    jj_node **list2; /* else bodies, object values */
    size_t n_list2;
};
/* Node roles:
 *   IF      a=test  list=body  list2=else
 *   FOR     a=target (IDENT or TUPLE)  b=iterable (SELECT: filtered)  list=body  list2=else
 *   SET     a=target  b=value (NULL: list=block body)
 *   MEMBER  a=object  b=property  flag=computed ([...])
 *   SLICE   a,b,c = start, stop, step (NULL = omitted)
 *   CALL    a=callee  list=args (KWARG nodes for name=value)
 *   FILTER  a=operand  b=filter (IDENT or CALL)
 *   TEST    a=operand  s=test name  flag=negated
 *   SELECT  a=value  b=condition       TERNARY  a=cond  b=then  c=else
 *   UNARY   op a      BINARY op a b    OBJECT list=keys list2=values */

ea_status ea__jj_parse(jj_pool *pool, const jj_token *toks, size_t n_toks, const jj_srcmap *sm,
                       jj_node ***body, size_t *n_body);

/* ---- values ---------------------------------------------------------------- */

typedef enum {
    JV_UNDEF, JV_NULL, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_ARRAY, JV_TUPLE,
    JV_OBJECT, JV_KWARGS, JV_NAMESPACE, JV_FUNC
} jj_vtype;

typedef struct jj_val jj_val;
typedef struct {
    const char **keys; /* pool strings, NUL-terminated (keys never contain NUL here) */
    size_t *key_lens;
    jj_val **vals;
    size_t n, cap;
} jj_map;

typedef enum {
    JF_NAMESPACE, JF_RAISE, JF_RANGE, JF_STRFTIME,
    JF_S_UPPER, JF_S_LOWER, JF_S_STRIP, JF_S_TITLE, JF_S_CAPITALIZE, JF_S_RSTRIP, JF_S_LSTRIP,
    JF_S_STARTSWITH, JF_S_ENDSWITH, JF_S_SPLIT, JF_S_REPLACE,
    JF_O_GET, JF_O_ITEMS, JF_O_KEYS, JF_O_VALUES, JF_O_DICTSORT
} jj_func;

struct jj_val {
    jj_vtype t;
    bool b;
    double num; /* INT and FLOAT are both doubles, as in JS */
    const char *s; /* STR: pool bytes (UTF-8, may hold NUL), s[n] == 0 */
    size_t n;
    jj_val **items; /* ARRAY, TUPLE */
    size_t n_items;
    jj_map *map; /* OBJECT, KWARGS, NAMESPACE */
    jj_func fn;  /* FUNC */
    jj_val *self; /* FUNC: bound receiver of a method */
};

jj_val *ea__jj_undef(void);
jj_val *ea__jj_null(void);
jj_val *ea__jj_bool(bool b);
jj_val *ea__jj_num(jj_pool *p, jj_vtype t, double v);
jj_val *ea__jj_str(jj_pool *p, const char *s, size_t n); /* copies */
jj_val *ea__jj_str_take(jj_pool *p, const char *s, size_t n); /* s already in pool, s[n]==0 */
jj_val *ea__jj_array(jj_pool *p, jj_vtype t, jj_val **items, size_t n); /* copies the pointer array */
jj_val *ea__jj_mapval(jj_pool *p, jj_vtype t);
jj_val *ea__jj_func(jj_pool *p, jj_func fn, jj_val *self);

jj_val *ea__jj_map_get(const jj_map *m, const char *k, size_t n);
bool ea__jj_map_set(jj_pool *p, jj_map *m, const char *k, size_t n, jj_val *v);

/* JSON (jansson) -> value, with JS object key order (integer-like keys first). */
jj_val *ea__jj_from_json(jj_pool *p, const json_t *j, int depth);

/* Growable byte buffer in the pool. */
typedef struct {
    jj_pool *pool;
    char *s;
    size_t n, cap;
} jj_buf;
void ea__jj_buf_init(jj_buf *b, jj_pool *p);
bool ea__jj_buf_add(jj_buf *b, const char *s, size_t n);
bool ea__jj_buf_addc(jj_buf *b, char c);

/* JS Number#toString. */
void ea__jj_fmt_num(char out[40], double v);
/* How a value prints in output (RuntimeValue.toString). false: cannot print (function). */
bool ea__jj_to_output(jj_buf *b, const jj_val *v);
/* `value.toString()` as used by + and ~ on the JS value. false if unsupported. */
bool ea__jj_to_js_string(jj_buf *b, const jj_val *v);
typedef struct {
    int indent;            /* 0: none */
    bool ensure_ascii;
    const char *item_sep, *key_sep; /* NULL: defaults */
    size_t item_sep_n, key_sep_n;
    bool undef_as_null;
} jj_json_opts;
/* toJSON of the reference; false if the value holds a function. */
bool ea__jj_to_json(jj_buf *b, const jj_val *v, const jj_json_opts *o, int depth);

bool ea__jj_truthy(const jj_val *v);
/* JS `a.value == b.value`. Returns 0/1, or -1 when not reproducible (list vs scalar). */
int ea__jj_loose_eq(const jj_val *a, const jj_val *b);
/* JS `a.value === b.value`. */
bool ea__jj_strict_eq(const jj_val *a, const jj_val *b);

/* Unicode helpers on UTF-8 with JS semantics. */
bool ea__jj_utf8_valid(const char *s, size_t n);
size_t ea__jj_utf16_len(const char *s, size_t n);
/* Length in bytes of the JS-whitespace character at s (0 if none). */
size_t ea__jj_ws_at(const char *s, size_t n);
/* Length of a JS-whitespace character ending at s+n (0 if none). */
size_t ea__jj_ws_before(const char *s, size_t n);
/* Decode one UTF-8 character; returns its byte length (1 on malformed input). */
size_t ea__jj_utf8_dec(const char *s, size_t n, uint32_t *cp);
size_t ea__jj_utf8_enc(uint32_t cp, char out[4]);

/* ---- evaluation ------------------------------------------------------------- */

typedef struct {
    unsigned long long max_steps; /* 0: default */
    size_t max_bytes;             /* 0: default */
} jj_limits;

/* Render `body` with the variables of `ctx` (a JSON object). OUT: *out (ea_malloc), *out_len. */
ea_status ea__jj_render(jj_node **body, size_t n_body, const jj_srcmap *sm, const jj_limits *lim,
                        const json_t *ctx, char **out, size_t *out_len);

#endif
