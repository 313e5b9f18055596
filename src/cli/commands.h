/*
 * commands.h — the subcommands of `eaas`, one file each (cmd_<name>.c).
 * Each takes argv with argv[0] = the subcommand name and returns the process
 * exit code (0 ok, 1 failure, 2 usage error). Only src/cli/ may exit().
 */
#ifndef EA_COMMANDS_H
#define EA_COMMANDS_H

#include <stdio.h>

#include "base/status.h"

int ea_cmd_make_model(int argc, char **argv);
int ea_cmd_inspect(int argc, char **argv);
int ea_cmd_tokenize(int argc, char **argv);
int ea_cmd_detokenize(int argc, char **argv);
int ea_cmd_chat_template(int argc, char **argv);
int ea_cmd_generate(int argc, char **argv);
int ea_cmd_perplexity(int argc, char **argv);
int ea_cmd_eplb(int argc, char **argv);
int ea_cmd_serve(int argc, char **argv);
int ea_cmd_bench(int argc, char **argv);

/* Print "eaas <cmd>: <status text>: <message>" to stderr and return 1. */
int ea_cli_fail(const char *cmd, ea_status s);

#endif
