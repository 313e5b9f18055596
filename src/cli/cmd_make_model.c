/*
 * cmd_make_model.c — `eaas make-model`: flag parsing for make_model.c.
 *
 *   eaas make-model --family F --preset tiny|bench --seed S --format hf|gguf
 *                   --dtype f32|f16|bf16|q8_0 --out PATH [--shards N] [--top-k K] [--dry-run]
 *
 * The tokenizer files come from the npm cache: --npm-cache DIR, else
 * $EA_CACHE/npm, else ./.cache/npm (where tools/fetch-npm.sh puts them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/args.h"
#include "base/util.h"
#include "cli/commands.h"
#include "cli/make_model.h"

static const char usage_text[] =
    "usage: eaas make-model --family F --preset P --format hf|gguf --out PATH [flags]\n\n"
    "Writes a random-weight model (deterministic from --seed) with the family's real\n"
    "config, tensor names and tokenizer: an HF directory (config.json, safetensors,\n"
    "tokenizer files) or one GGUF v3 file as llama.cpp's converter writes it.\n"
    "Families: qwen3_moe qwen2_moe mixtral olmoe deepseek_v2 deepseek_v3.\n"
    "Presets: tiny (tests), bench (~2 B parameters; see docs/make-model.md).\n\n"
    "flags:\n";

int ea_cmd_make_model(int argc, char **argv) {
    const char *family = NULL, *preset = "tiny", *format = "hf", *dtype = "bf16", *out = NULL, *npm = NULL;
    long seed = 1;
    int shards = 1, dry = 0, legacy = 0, top_k = 0;
    ea_arg spec[] = {
        {"family", EA_ARG_STR, &family, "F", "qwen3_moe | qwen2_moe | mixtral | olmoe | deepseek_v2 | deepseek_v3"},
        {"preset", EA_ARG_STR, &preset, "P", "tiny (default) | bench"},
        {"seed", EA_ARG_LONG, &seed, "S", "weights are a function of this seed (default 1)"},
        {"format", EA_ARG_STR, &format, "hf|gguf", "HF directory (default) or one GGUF file"},
        {"dtype", EA_ARG_STR, &dtype, "T", "f32 | f16 | bf16 (default) | q8_0 (GGUF only)"},
        {"out", EA_ARG_STR, &out, "PATH", "output directory (hf) or file (gguf)"},
        {"shards", EA_ARG_INT, &shards, "N", "hf: split the weights into N safetensors files + index", 1, 10000},
        {"npm-cache", EA_ARG_STR, &npm, "DIR", "where the npm tokenizer packages are (default $EA_CACHE/npm)"},
        {"top-k", EA_ARG_INT, &top_k, "K", "experts per token instead of the preset's (e.g. 4 for a mixtral that sums more than 2)"},
        {"dry-run", EA_ARG_BOOL, &dry, NULL, "print the shape, counts and tensor list; write nothing"},
        {"legacy-mla", EA_ARG_BOOL, &legacy, NULL, "gguf deepseek: one attn_kv_b (older converters) instead of attn_k_b/attn_v_b"},
        {0}};
    ea_args_rest rest;
    int rc = ea_cli_parse("make-model", usage_text, spec, argc, argv, &rest);
    if (rc >= 0) return rc;
    ea_status st;
    if (rest.n_pos > 0 || !family || (!out && !dry))
        return ea_cli_usage_error("make-model", NULL, "%s (see --help)",
                                  rest.n_pos ? "unexpected positional argument" : "--family and --out are required");
    ea_mm_options o;
    memset(&o, 0, sizeof o);
    o.family = family;
    o.preset = preset;
    o.seed = (uint64_t)seed;
    o.out = out ? out : "(dry run)";
    o.n_shards = shards;
    o.dry_run = dry;
    o.legacy_mla = legacy;
    o.top_k = top_k;
    if (strcmp(format, "hf") == 0)
        o.format = EA_MM_HF;
    else if (strcmp(format, "gguf") == 0)
        o.format = EA_MM_GGUF;
    else
        return ea_cli_usage_error("make-model", NULL, "--format must be hf or gguf, not '%s'", format);
    int dt = ea_dtype_parse(dtype);
    if (dt < 0) return ea_cli_usage_error("make-model", NULL, "unknown --dtype '%s' (f32, f16, bf16, q8_0)", dtype);
    o.dtype = (ea_dtype)dt;
    char cache[4096];
    if (!npm) {
        /* $EA_CACHE, else ./.cache, else the checkout the binary was built in (<exe>/../.cache) */
        const char *ec = getenv("EA_CACHE");
        snprintf(cache, sizeof cache, "%s/npm", ec && *ec ? ec : ".cache");
        if (!(ec && *ec) && !ea_is_dir(cache)) {
            char exe[3000];
            ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
            if (n > 0) {
                exe[n] = 0;
                char *slash = strrchr(exe, '/');
                if (slash) *slash = 0;
                snprintf(cache, sizeof cache, "%s/../.cache/npm", exe);
            }
        }
        npm = cache;
    }
    o.npm_cache = npm;
    st = ea_make_model(&o, stdout);
    if (st != EA_OK) return ea_cli_fail(argv[0], st);
    return 0;
}
