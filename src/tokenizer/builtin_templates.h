/*
 * builtin_templates.h — the published chat templates of model families whose
 * tokenizer files we cannot ship (no download here), kept as data so that
 * `eaas make-model` can write a realistic tokenizer_config.json.
 *
 *   const char *t = ea_builtin_chat_template("mixtral");
 *
 * Families: "mixtral" (Mixtral-8x7B-Instruct-v0.1) and "olmoe"
 * (OLMoE-1B-7B-0924-Instruct), as published; "qwen3_5_moe", ours in
 * Qwen3.5's format (XML tool calls; builtin_templates.c says what holds).
 * Qwen3 and DeepSeek-V3 templates are not here: they ship inside the npm
 * tokenizer packages (tokenizer_config.json).
 * Returns a static NUL-terminated string, or NULL for an unknown family.
 */
#ifndef EA_BUILTIN_TEMPLATES_H
#define EA_BUILTIN_TEMPLATES_H

const char *ea_builtin_chat_template(const char *family);

/* The BOS/EOS token texts those templates expect (static strings; *bos may be
 * NULL). Returns 0, or -1 for an unknown family. */
int ea_builtin_special_tokens(const char *family, const char **bos, const char **eos);

#endif
