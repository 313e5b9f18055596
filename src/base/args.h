/*
 * args.h — the flag parser every subcommand uses.
 *
 * A subcommand declares its flags as a table; ea_args_parse fills the targets
 * and collects positional arguments. "--name value" and "--name=value" both
 * work; booleans take no value. --help is reported to the caller, which prints
 * its usage (ea_args_usage lists the table).
 *
 *   int n = 16; const char *model = NULL, *dir = NULL; int chat = 0, cap = 1024;
 *   ea_arg spec[] = {
 *       {"model", EA_ARG_STR, &model, "PATH", "model directory or .gguf file"},
 *       {"max-tokens", EA_ARG_INT, &n, "N", "tokens to generate", 1, 1 << 20},
 *       {"chat", EA_ARG_BOOL, &chat, NULL, "apply the chat template"},
 *       {"disk-dir", EA_ARG_STR, &dir, "DIR", "cache directory"},
 *       {"disk-max-mib", EA_ARG_INT, &cap, "N", "bound on the files", 0, 0, "disk-dir"},
 *       {0}};
 *
 * The one validation rule for flags, so every command says the same thing:
 *   - a value that does not parse as the flag's type, an unknown flag, a
 *     missing value: an error naming the flag;
 *   - numeric flags (INT, LONG, DOUBLE) have an inclusive range [min, max];
 *     a value outside it is an error naming the flag and the range
 *     ("--eplb-window: -5 is out of range: expected an integer in [1, 100000000]").
 *     min == max == 0 (fields left out) means [0, largest value of the type]:
 *     no flag takes a negative number unless its table row says so.
 *     EA_ARG_NO_MAX as max means no upper bound (DOUBLE: +inf);
 *   - `needs` names the flag(s) this one only makes sense with ("a" or
 *     "a|b" for any of them); giving it without them is an error naming both
 *     ("--kv-disk-max-mib needs --kv-disk-dir").
 * Defaults are whatever the target holds before parsing; they are not checked
 * (a default may be a sentinel such as -1 = "not given").
 */
#ifndef EA_ARGS_H
#define EA_ARGS_H

#include <stdio.h>

#include "base/status.h"

typedef enum { EA_ARG_BOOL, EA_ARG_INT, EA_ARG_LONG, EA_ARG_DOUBLE, EA_ARG_STR } ea_arg_kind;

#define EA_ARG_NO_MAX 1e300 /* as max: the largest value of the type */
#define EA_ARGS_MAX 128     /* flags per table */

typedef struct {
    const char *name; /* without the leading "--"; NULL ends the table */
    ea_arg_kind kind;
    void *target; /* int*, long*, double*, const char** (borrows argv) */
    const char *metavar;
    const char *help;
    double min, max;   /* numeric kinds: allowed range, inclusive; both 0: [0, type's largest] */
    const char *needs; /* NULL, or "flag" / "flag1|flag2": given only together with (one of) these */
} ea_arg;

typedef struct {
    const char *pos[64]; /* borrows argv */
    int n_pos;
    int help; /* --help or -h was given */
    unsigned char given[EA_ARGS_MAX]; /* given[i]: spec[i] was on the command line */
} ea_args_rest;

/* argv[0] is the subcommand name and is skipped. Errors: EA_ERR_INVALID_ARG
 * with a message naming the flag (ea_errmsg). */
ea_status ea_args_parse(const ea_arg *spec, int argc, char **argv, ea_args_rest *rest);
void ea_args_usage(FILE *f, const ea_arg *spec);
/* 1 if the flag `name` of spec was given (after ea_args_parse). */
int ea_args_given(const ea_arg *spec, const ea_args_rest *rest, const char *name);

#endif
