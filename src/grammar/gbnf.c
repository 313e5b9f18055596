/*
 * gbnf.c — llama.cpp's GBNF grammar text to a grammar (not yet: refused with
 * a clear message until the parser lands; the request field `grammar` answers 400).
 */
#include <stdio.h>

#include "grammar/grammar_internal.h"

ea_status ea_grammar_from_gbnf(const char *text, size_t n, ea_grammar **out, char *err, size_t n_err) {
    (void)text, (void)n;
    *out = NULL;
    if (err && n_err) snprintf(err, n_err, "GBNF grammars are not supported yet");
    return ea_err(EA_ERR_UNSUPPORTED, "GBNF grammars are not supported yet");
}
