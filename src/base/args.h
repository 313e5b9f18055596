/*
 * args.h — the flag parser every subcommand uses.
 *
 * A subcommand declares its flags as a table; ea_args_parse fills the targets
 * and collects positional arguments. "--name value" and "--name=value" both
 * work; booleans take no value. Unknown flags and bad numbers are errors that
 * name the flag. --help is reported to the caller, which prints its usage
 * (ea_args_usage lists the table).
 *
 *   int n = 16; const char *model = NULL; int chat = 0;
 *   ea_arg spec[] = {
 *       {"model", EA_ARG_STR, &model, "PATH", "model directory or .gguf file"},
 *       {"max-tokens", EA_ARG_INT, &n, "N", "tokens to generate"},
 *       {"chat", EA_ARG_BOOL, &chat, NULL, "apply the chat template"},
 *       {0}};
 */
#ifndef EA_ARGS_H
#define EA_ARGS_H

#include <stdio.h>

#include "base/status.h"

typedef enum { EA_ARG_BOOL, EA_ARG_INT, EA_ARG_LONG, EA_ARG_DOUBLE, EA_ARG_STR } ea_arg_kind;

typedef struct {
    const char *name; /* without the leading "--"; NULL ends the table */
    ea_arg_kind kind;
    void *target; /* int*, long*, double*, const char** (borrows argv) */
    const char *metavar;
    const char *help;
} ea_arg;

typedef struct {
    const char *pos[64]; /* borrows argv */
    int n_pos;
    int help; /* --help or -h was given */
} ea_args_rest;

/* argv[0] is the subcommand name and is skipped. */
ea_status ea_args_parse(const ea_arg *spec, int argc, char **argv, ea_args_rest *rest);
void ea_args_usage(FILE *f, const ea_arg *spec);

#endif
