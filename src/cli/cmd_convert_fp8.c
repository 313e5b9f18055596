/*
 * cmd_convert_fp8.c — `eaas convert-fp8 --model DIR --out NEW_DIR [--shards N]`:
 * a bf16 copy of an FP8 checkpoint (DeepSeek-V3, Kimi K2, Qwen3 "-FP8"),
 * which eaas then serves; model/fp8.h says what is computed. Prints one
 * JSON line of counts.
 */
#include <stdio.h>

#include "base/args.h"
#include "cli/commands.h"
#include "model/fp8.h"

static const char usage_text[] =
    "usage: eaas convert-fp8 --model DIR --out NEW_DIR [--shards N]\n\n"
    "Write a bf16 copy of an FP8 checkpoint (config.json quantization_config\n"
    "quant_method \"fp8\", F8_E4M3 weights with block scales \"*_scale_inv\"):\n"
    "each weight dequantized and rounded to bf16, as DeepSeek's fp8_cast_bf16.py,\n"
    "the other tensors and files copied. eaas loads the copy.\n\nflags:\n";

int ea_cmd_convert_fp8(int argc, char **argv) {
    const char *model = NULL, *out = NULL;
    int shards = 1;
    ea_arg spec[] = {{"model", EA_ARG_STR, &model, "DIR", "the FP8 model directory"},
                     {"out", EA_ARG_STR, &out, "NEW_DIR", "where the bf16 copy goes (created; must hold no model)"},
                     {"shards", EA_ARG_INT, &shards, "N", "safetensors files to write (1..1000, default 1)", 1, 1000},
                     {0}};
    ea_args_rest rest;
    int rc = ea_cli_parse("convert-fp8", usage_text, spec, argc, argv, &rest);
    if (rc >= 0) return rc;
    if (!model || !out || rest.n_pos)
        return ea_cli_usage_error("convert-fp8", NULL, "needs --model DIR and --out NEW_DIR; see --help");
    ea_fp8_stats st;
    ea_status s = ea_fp8_convert(model, out, shards, &st);
    if (s != EA_OK) return ea_cli_fail(argv[0], s);
    printf("{\"out\": \"%s\", \"dequantized\": %d, \"copied\": %d, \"other_files\": %d, \"fp8_nan\": %lld}\n", out,
           st.n_fp8, st.n_copied, st.n_files, (long long)st.n_nan);
    return 0;
}
