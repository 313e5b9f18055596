/*
 * tiny_model.h — a test's model, made once per build directory:
 *
 *   char model[1024];
 *   if (tiny_model("sched-qwen3", "--family qwen3_moe --preset tiny --seed 5 --format hf", model, sizeof model))
 *       return 1;
 *
 * runs `$EAAS_BIN make-model ARGS --out $EA_BUILD/golden-models/NAME` unless
 * that path exists, and writes the path to out. Returns 0, or 1 after saying
 * why on stderr. Header-only.
 */
#ifndef EA_TINY_MODEL_H
#define EA_TINY_MODEL_H

#include <stdio.h>
#include <stdlib.h>

static inline int tiny_model(const char *name, const char *args, char *out, size_t n) {
    const char *bin = getenv("EAAS_BIN"), *b = getenv("EA_BUILD");
    if (!bin) {
        fprintf(stderr, "EAAS_BIN must name the eaas binary\n");
        return 1;
    }
    snprintf(out, n, "%s/golden-models/%s", b ? b : ".", name);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/golden-models && { [ -e %s ] || \"%s\" make-model %s --out %s >/dev/null; }",
             b ? b : ".", out, bin, args, out);
    if (system(cmd) != 0) {
        fprintf(stderr, "make-model %s failed\n", args);
        return 1;
    }
    return 0;
}

#endif
