/*
 * main.c — `eaas <subcommand> [flags]`: finds the subcommand in one table and
 * runs it. Global flag: --log-level error|warn|info|debug (also EAAS_LOG).
 * `eaas -h`, `--help` and `help` print the usage; `eaas --version` and
 * `version` print the version, git commit, build type and kernel ISA (all
 * exit 0).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "cli/commands.h"
#include "kernels/matmul.h"

/* ea_version.c, generated at build time by cmake/version.cmake */
extern const char ea_version_string[], ea_version_commit[], ea_version_build[];

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} ea_command;

static const ea_command commands[] = {
    {"make-model", ea_cmd_make_model, "write a random-weight test model (HF or GGUF)"},
    {"inspect", ea_cmd_inspect, "describe a model: architecture, sizes, parameters, file problems"},
    {"convert-fp8", ea_cmd_convert_fp8, "write a bf16 copy of an FP8 checkpoint (DeepSeek-V3, Kimi K2)"},
    {"tokenize", ea_cmd_tokenize, "print the token ids of a text as a JSON array"},
    {"detokenize", ea_cmd_detokenize, "print the text of token ids"},
    {"chat-template", ea_cmd_chat_template, "render a conversation with the model's chat template"},
    {"generate", ea_cmd_generate, "generate text from a prompt"},
    {"perplexity", ea_cmd_perplexity, "measure perplexity on a text file"},
    {"serve", ea_cmd_serve, "serve a model over an OpenAI-compatible HTTP API"},
    {"bench", ea_cmd_bench, "benchmarks: 'bench serve' drives an OpenAI-compatible server"},
    {"eplb", ea_cmd_eplb, "expert placement: place, score"},
    {"expert", ea_cmd_expert, "an expert server: serve some experts to attention clients over UCX"},
    {"monitor", ea_cmd_monitor, "Expert-as-a-Service membership: servers and clients register and heartbeat"},
};

int ea_cli_fail(const char *cmd, ea_status s) {
    const char *m = ea_errmsg();
    fprintf(stderr, "eaas %s: %s%s%s\n", cmd, ea_status_text(s), m[0] ? ": " : "", m);
    return 1;
}

static void usage(FILE *f) {
    fprintf(f, "usage: eaas [--log-level L] <command> [flags]\n\n"
               "Serves Mixture-of-Experts models; experts local, over MPI, or on expert servers.\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-14s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "  %-14s %s\n  %-14s %s\n", "help", "this text ('eaas help <command>' = 'eaas <command> --help')", "version",
            "version, git commit, build type and kernel ISA (also --version)");
    fprintf(f, "\n'eaas <command> --help' describes a command's flags.\n");
}

/* The ISA the kernels use here: EAAS_ISA if set, else the best this CPU runs (kernels/matmul.h). */
static void version(void) {
    const char *env = getenv("EAAS_ISA"), *best = ea_k_isa_best();
    printf("eaas %s\ncommit %s\nbuild %s\n", ea_version_string, ea_version_commit, ea_version_build);
    if (env && *env) printf("isa %s (EAAS_ISA%s; best on this CPU: %s)\n", env, ea_k_isa_supported(env) ? "" : ", not supported here", best);
    else printf("isa %s\n", best);
    const char *all[] = {"amx", "avx512_bf16", "avx512", "avx2", "scalar"};
    printf("isa supported");
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (ea_k_isa_supported(all[i])) printf(" %s", all[i]);
    printf("\n");
}

int main(int argc, char **argv) {
    int i = 1;
    while (i < argc && argv[i][0] == '-') {
        if (strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--version") == 0) {
            version();
            return 0;
        } else if (strcmp(argv[i], "--log-level") == 0 && i + 1 < argc) {
            int l = ea_log_parse_level(argv[i + 1]);
            if (l < 0) {
                fprintf(stderr, "eaas: unknown log level '%s'\n", argv[i + 1]);
                return 2;
            }
            ea_log_set_level((ea_log_level)l);
            i += 2;
        } else {
            fprintf(stderr, "eaas: unknown flag %s\n", argv[i]);
            return 2;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[i], "help") == 0 && i + 1 == argc) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[i], "help") == 0) { /* eaas help CMD = eaas CMD --help */
        static char help_flag[] = "--help";
        argv[i] = argv[i + 1];
        argv[i + 1] = help_flag;
    }
    if (strcmp(argv[i], "version") == 0) {
        version();
        return 0;
    }
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++)
        if (strcmp(argv[i], commands[c].name) == 0) return commands[c].run(argc - i, argv + i);
    fprintf(stderr, "eaas: unknown command '%s'\n\n", argv[i]);
    usage(stderr);
    return 2;
}
