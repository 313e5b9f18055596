/*
 * commands.h — the subcommands of `eaas`, one file each (cmd_<name>.c).
 * Each takes argv with argv[0] = the subcommand name and returns the process
 * exit code (0 ok, 1 failure, 2 usage error). Only src/cli/ may exit().
 */
#ifndef EA_COMMANDS_H
#define EA_COMMANDS_H

#include <stdio.h>

#include "base/args.h"
#include "base/status.h"

int ea_cmd_make_model(int argc, char **argv);
int ea_cmd_inspect(int argc, char **argv);
int ea_cmd_convert_fp8(int argc, char **argv);
int ea_cmd_tokenize(int argc, char **argv);
int ea_cmd_detokenize(int argc, char **argv);
int ea_cmd_chat_template(int argc, char **argv);
int ea_cmd_generate(int argc, char **argv);
int ea_cmd_perplexity(int argc, char **argv);
int ea_cmd_eplb(int argc, char **argv);
int ea_cmd_serve(int argc, char **argv);
int ea_cmd_bench(int argc, char **argv);
int ea_cmd_expert(int argc, char **argv);
int ea_cmd_monitor(int argc, char **argv);

/* Print "eaas <cmd>: <status text>: <message>" to stderr and return 1. */
int ea_cli_fail(const char *cmd, ea_status s);

/* Flags (cli_args.c). Parse argv by spec (base/args.h has the rules): on a
 * flag error print "eaas <cmd>: <message>" (on MPI rank 0 only) and return 2; on --help print
 * usage then the flag table to stdout and return 0; otherwise return -1 and
 * the caller goes on. */
int ea_cli_parse(const char *cmd, const char *usage, const ea_arg *spec, int argc, char **argv, ea_args_rest *rest);
/* A usage error the flag table cannot see (a required flag or argument missing,
 * a stray argument, a value of the wrong word): print "eaas <cmd>: <message>"
 * to stderr, then `usage` when it is not NULL, and return 2.
 *   if (!model) return ea_cli_usage_error("perplexity", NULL, "--model is required (see --help)"); */
int ea_cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The stop signals of a long-running command (serve, monitor, expert):
 * SIGINT and SIGTERM go to handler, SIGPIPE is ignored (a peer that went away
 * is an error of the write, not the death of the process). */
void ea_cli_stop_signals(void (*handler)(int));
/* 1 if a context longer than the model's max_position_embeddings is allowed:
 * flag (--allow-long-max-ctx) or EAAS_ALLOW_LONG_MAX_CTX=1 in the environment
 * (as vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN). */
int ea_cli_allow_long_ctx(int flag);
/* The checks of a command that loads a model, before it loads (or opens a
 * port): path is a model directory or a GGUF file (ea_model_check_path), and
 * ctx (0: the default, always fine) is at most the model's
 * max_position_embeddings unless allowed. ctx_flag names the flag in the
 * error ("--max-ctx"). Reads only the config. Returns 0, or 1 after printing
 * the error (on MPI rank 0 only). */
int ea_cli_check_model(const char *cmd, const char *path, int ctx, const char *ctx_flag, int allow_long);

#endif
