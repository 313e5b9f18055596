/*
 * grammar.h — constrained decoding: grammars over Unicode text, an
 * incremental matcher, and the per-step mask of allowed tokens.
 *
 * A grammar is a set of rules; a rule is a list of alternatives; an
 * alternative is a sequence of elements, each either
 *   CHARS(class, min, max)  min..max code points from a class (a sorted set
 *                           of code point ranges); max -1 = unbounded. The
 *                           count lives in the matcher's stack frame, so
 *                           `[a-z]{0,64}` is one element, not 64 rules.
 *   REF(rule)               one match of another rule.
 * The language is the root rule's. Front ends build grammars through the
 * builder below:
 *   ea_grammar_from_json_schema  JSON Schema subset (json_schema.c)
 *   ea_grammar_json_object       any JSON object (response_format json_object)
 *   ea_grammar_from_regex        a regular expression, anchored (regex.c)
 *   ea_grammar_choice            one of n literal strings (guided_choice)
 *   ea_grammar_from_gbnf         llama.cpp's GBNF (gbnf.c)
 * and every grammar is checked at build: each rule derives some finite text
 * (no recursion without a base case), and no rule is left-recursive.
 *
 * The matcher (matcher.c) is a pushdown automaton over UTF-8 bytes: its
 * state is a set of stacks (a graph-structured stack: frames are shared
 * between stacks and never change), each stack's top a CHARS element with
 * its count. A byte advances every stack; a stack whose top cannot take the
 * code point dies; the state is dead when no stack is left. A code point
 * split across tokens waits as a partial sequence; the stacks are filtered
 * by whether their class can still hold a code point with that prefix.
 *
 * The mask (token_index.c): an ea_token_index holds the vocabulary's token
 * bytes and, per character class met so far, which tokens lie wholly inside
 * the class (with their length in code points) and which only start in it.
 * The allowed tokens of a state are the union over its stacks of
 *   - tokens wholly inside the top's class that fit the count (no matcher
 *     work: a precomputed bitset or id list, context-independent), and
 *   - tokens that start inside the class and leave it: their first
 *     out-of-class code point is tested against the classes that can follow
 *     (the stack with its top popped, expanded once per stack), and only the
 *     survivors run the matcher over the rest of their bytes.
 * So a step costs a few bitset ORs plus matcher work for the few tokens that
 * cross an element's end; no walk over the whole vocabulary.
 *
 *   ea_grammar *g;  char err[256];
 *   if (ea_grammar_from_json_schema(schema, "response_format.json_schema.schema", &g, err, sizeof err)) ...;
 *   ea_gmatcher *m;  ea_gmatcher_create(g, &m);
 *   ea_token_index *ix;  ea_token_index_create(bytes, lens, n_vocab, &ix);   // once per vocabulary
 *   ea_gmatcher_mask(m, ix, bits);          // bit i set: token i keeps the text a valid prefix
 *   ea_gmatcher_accept_token(m, ix, id);    // after sampling
 *   ea_gmatcher_accepting(m), ea_gmatcher_done(m)
 *
 * Threads: a grammar is read-only after build and may be shared; a matcher
 * and a token index belong to one thread at a time (the step loop).
 */
#ifndef EA_GRAMMAR_H
#define EA_GRAMMAR_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct ea_grammar ea_grammar;
typedef struct ea_gmatcher ea_gmatcher;
typedef struct ea_token_index ea_token_index;

/* ---- building ---------------------------------------------------------------- */

typedef struct ea_gbuild ea_gbuild;
typedef struct {
    uint32_t lo, hi; /* code points, inclusive */
} ea_grange;

/* One alternative under construction (caller-owned; ea_gseq_deinit). */
typedef struct {
    struct ea__gelem *e; /* owns */
    size_t n, cap;
    int oom;             /* an append failed: the builder reports it at ea_gb_alt */
} ea_gseq;

ea_status ea_gb_create(ea_gbuild **out);
void ea_gb_destroy(ea_gbuild *b);
/* A new rule with no alternatives yet; name is for error messages (copied; NULL ok). */
int ea_gb_rule(ea_gbuild *b, const char *name);
/* The rule named name (GBNF), or -1. */
int ea_gb_find_rule(const ea_gbuild *b, const char *name);
/* Add seq as one alternative of rule (an empty seq matches the empty text). */
ea_status ea_gb_alt(ea_gbuild *b, int rule, const ea_gseq *seq);
void ea_gseq_deinit(ea_gseq *s);
void ea_gseq_clear(ea_gseq *s);
/* min..max code points of a class: n ranges (any order, may overlap); negate
 * takes the complement within U+0000..U+10FFFF minus surrogates. max -1: unbounded. */
void ea_gseq_chars(ea_gseq *s, ea_gbuild *b, const ea_grange *r, int n, int negate, int min, int max);
void ea_gseq_ref(ea_gseq *s, int rule);
/* The UTF-8 text s[0..n) literally (invalid UTF-8: each bad byte as U+FFFD is NOT
 * what you want — callers pass valid UTF-8; a bad byte marks the builder failed). */
void ea_gseq_lit(ea_gseq *s, ea_gbuild *b, const char *text, size_t n);
/* Finish: check, then make the grammar with `root` as its language. On error err
 * says which rule is wrong (by name). b is consumed (destroyed) either way. */
ea_status ea_gb_finish(ea_gbuild *b, int root, ea_grammar **out, char *err, size_t n_err);

/* Grammars are reference-counted (a request keeps the one its parser made):
 * ea_grammar_ref adds a holder, ea_grammar_destroy drops one and frees at zero. */
ea_grammar *ea_grammar_ref(ea_grammar *g);
void ea_grammar_destroy(ea_grammar *g);
/* Rules and elements, for tests and sizing. */
void ea_grammar_size(const ea_grammar *g, int *n_rules, int *n_elems, int *n_classes);

/* ---- front ends ---------------------------------------------------------------- */

/* Options of the JSON front ends (json_schema.c). */
typedef struct {
    int max_depth; /* nesting of a generic JSON value (json_object, {} schemas); 0: 8 */
} ea_json_grammar_opts;

/* schema -> grammar of its instances (compact JSON, no whitespace). path names the
 * schema in the request ("response_format.json_schema.schema"); on error err_path
 * gets the JSON path of the offending node (e.g. path + ".properties.a.$ref") and
 * err a message. opts NULL: defaults. */
ea_status ea_grammar_from_json_schema(const json_t *schema, const char *path, const ea_json_grammar_opts *opts,
                                      ea_grammar **out, char *err_path, size_t n_path, char *err, size_t n_err);
/* Any JSON object (response_format {"type":"json_object"}). */
ea_status ea_grammar_json_object(const ea_json_grammar_opts *opts, ea_grammar **out);
/* One of n strings, literally (vLLM's guided_choice). */
ea_status ea_grammar_choice(const char *const *choices, const size_t *lens, int n, ea_grammar **out, char *err,
                            size_t n_err);
/* A regular expression matched in full (vLLM's guided_regex): literals, escapes
 * (\d \w \s \D \W \S \n \t \r \f \v \uXXXX \xXX and escaped punctuation), . [...] [^...],
 * groups ( ) (?: ), |, * + ? {n} {n,} {n,m} (a trailing ? for laziness is accepted:
 * it changes nothing for a full match), ^ at the start and $ at the end. No
 * backreferences or lookaround (refused). */
ea_status ea_grammar_from_regex(const char *re, size_t n, ea_grammar **out, char *err, size_t n_err);
/* llama.cpp's GBNF: `name ::= alternatives`, "literals", [classes], (groups), * + ?
 * {m} {m,} {m,n}, # comments; the language is rule `root`. */
ea_status ea_grammar_from_gbnf(const char *text, size_t n, ea_grammar **out, char *err, size_t n_err);

/* How a model writes its tool calls, for the grammar that forces one
 * (tool_choice "required" or a named function). Each call is
 *   call_open NAME name_args ARGUMENTS call_close
 * with NAME the function's name (as a JSON string if name_json, else bare) and
 * ARGUMENTS an instance of its parameters (compact JSON); the calls are wrapped
 * as  begin CALL (sep CALL)* end  when many, begin CALL end otherwise. The
 * chat formats (Qwen3's <tool_call> lines, DeepSeek-V3's marker tokens,
 * Qwen3.5's XML) live with their parser (serve/tool_choice.c); NULL is one bare
 * {"name":"f","arguments":{...}} object.
 *
 * xml_params: ARGUMENTS are instead Qwen3-Coder's parameter blocks, one per
 * property in the schema's order (required ones always, optional ones may be
 * left out):  <parameter=KEY>\nVALUE\n</parameter>\n
 * VALUE is raw text for a property typed string (no "</" inside; enum, const,
 * pattern, format and min/maxLength hold as for JSON strings), compact JSON
 * of its schema otherwise. The parameters schema must then be an object with
 * properties, or without them: any parameters of raw text (none when
 * additionalProperties is false, as for a function without parameters).
 *
 * name_index: NAME is followed by ':' and 1 to 4 decimal digits of the
 * model's choosing (Kimi K2's call ids, functions.NAME:IDX). */
typedef struct {
    const char *begin, *end, *sep;
    const char *call_open, *name_args, *call_close;
    int name_json, many, xml_params, name_index;
} ea_tool_call_syntax;

/* Does JSON Schema s take only strings (type "string", or an enum / const of
 * strings)? xml_params writes such values raw; the XML call parser
 * (serve/tool_parse.c) reads them back as strings by the same test. */
int ea_schema_takes_strings(const json_t *s);

/* The calls of the functions in tools (OpenAI's `tools` array: each
 * {"type":"function","function":{"name","parameters"}}; for a named function
 * pass a one-element array), written in syntax. path names the array in
 * errors ("tools"): err_path is e.g. "tools[1].function.parameters.properties.x.type". */
ea_status ea_grammar_tool_calls(const json_t *tools, const char *path, const ea_tool_call_syntax *syntax,
                                ea_grammar **out, char *err_path, size_t n_path, char *err, size_t n_err);
/* Building blocks the tool-calling code reuses: a rule for a regex (inside a builder;
 * json_string: the text is inside a JSON string, so " \ and controls are escaped),
 * and one for a JSON Schema value. */
ea_status ea_gb_regex_rule(ea_gbuild *b, const char *re, size_t n, int json_string, int *rule, char *err,
                           size_t n_err);
ea_status ea_gb_json_schema_rule(ea_gbuild *b, const json_t *schema, const char *path,
                                 const ea_json_grammar_opts *opts, int *rule, char *err_path, size_t n_path,
                                 char *err, size_t n_err);

/* ---- matching ---------------------------------------------------------------- */

ea_status ea_gmatcher_create(const ea_grammar *g, ea_gmatcher **out); /* borrows g */
void ea_gmatcher_destroy(ea_gmatcher *m);
void ea_gmatcher_reset(ea_gmatcher *m);
/* Advance by bytes; EA_ERR_INVALID_ARG (state unchanged) if they leave the language's prefixes. */
ea_status ea_gmatcher_accept_bytes(ea_gmatcher *m, const char *bytes, size_t n);
/* 1 if the text so far is in the language (EOS may follow). */
int ea_gmatcher_accepting(const ea_gmatcher *m);
/* 1 if the text is complete and nothing may follow it (the request ends). */
int ea_gmatcher_done(const ea_gmatcher *m);
/* Number of stacks in the state (for tests and limits). */
int ea_gmatcher_n_stacks(const ea_gmatcher *m);

/* ---- the vocabulary ------------------------------------------------------------ */

/* tokens[i] (lens[i] bytes) is token i's text; NULL or length 0: never allowed as text
 * (special tokens, ids without a token). Copied. */
ea_status ea_token_index_create(const char *const *tokens, const size_t *lens, int n_vocab, ea_token_index **out);
void ea_token_index_destroy(ea_token_index *ix);
int ea_token_index_vocab(const ea_token_index *ix);
/* bits ((n_vocab + 63) / 64 words): set exactly the tokens whose bytes keep m's text a
 * valid prefix. EOS is the caller's (allowed iff ea_gmatcher_accepting). */
ea_status ea_gmatcher_mask(ea_gmatcher *m, ea_token_index *ix, uint64_t *bits);
/* The same by testing every token through the matcher (slow; the reference for tests).
 * EA_ERR_RANGE when a token would need more than the matcher's stack limit (a very
 * ambiguous grammar): the fast mask judges per stack and may then allow more, and
 * accepting such a token fails with EA_ERR_NOMEM (the request ends with an error). */
ea_status ea_gmatcher_mask_ref(ea_gmatcher *m, const ea_token_index *ix, uint64_t *bits);
ea_status ea_gmatcher_accept_token(ea_gmatcher *m, const ea_token_index *ix, int32_t id);

#endif
