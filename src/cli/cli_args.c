/*
 * cli_args.c — what every subcommand does with its flags before its own work
 * (commands.h): parse the table, print usage on --help, report a flag error
 * in one line "eaas CMD: ...", and the model checks of the commands that load
 * a model (path, context length against the model's). The validation rules
 * themselves are in base/args.c; this file only prints. Under an MPI launch
 * every rank checks the same flags; only rank 0 prints, so a bad flag is one
 * line, not one per rank.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/args.h"
#include "cli/commands.h"
#include "ep/ep_engine.h"
#include "model/model.h"

int ea_cli_parse(const char *cmd, const char *usage, const ea_arg *spec, int argc, char **argv, ea_args_rest *rest) {
    ea_status s = ea_args_parse(spec, argc, argv, rest);
    if (s != EA_OK) {
        if (ea_par_report_here(NULL)) fprintf(stderr, "eaas %s: %s\n", cmd, ea_errmsg());
        return 2;
    }
    if (rest->help) {
        fputs(usage, stdout);
        ea_args_usage(stdout, spec);
        return 0;
    }
    return -1;
}

int ea_cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "eaas %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (usage) fputs(usage, stderr);
    return 2;
}

int ea_cli_allow_long_ctx(int flag) {
    const char *e = getenv("EAAS_ALLOW_LONG_MAX_CTX");
    return flag || (e && (strcmp(e, "1") == 0 || strcmp(e, "true") == 0));
}

static ea_status check_model(const char *path, int ctx, const char *ctx_flag, int allow_long) {
    ea_model_config c;
    EA_TRY(ea_model_read_config(path, &c));
    if (ctx > c.max_position_embeddings && !ea_cli_allow_long_ctx(allow_long))
        return ea_err(EA_ERR_INVALID_ARG,
                      "%s %d is above the model's max_position_embeddings (%d); pass --allow-long-max-ctx (or set "
                      "EAAS_ALLOW_LONG_MAX_CTX=1) to use it anyway: positions past the trained length may give "
                      "wrong output",
                      ctx_flag, ctx, c.max_position_embeddings);
    return EA_OK;
}

int ea_cli_check_model(const char *cmd, const char *path, int ctx, const char *ctx_flag, int allow_long) {
    ea_status s = check_model(path, ctx, ctx_flag, allow_long);
    if (s == EA_OK) return 0;
    return ea_par_report_here(NULL) ? ea_cli_fail(cmd, s) : 1;
}

void ea_cli_stop_signals(void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}
