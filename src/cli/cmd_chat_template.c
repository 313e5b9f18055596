/*
 * cmd_chat_template.c — `eaas chat-template`: print the prompt a model's chat
 * template makes of a conversation.
 *
 * The messages file is either a JSON array of messages or a JSON object with
 * "messages" and any other template variables (tools, enable_thinking, ...),
 * which are passed through. --tools and --no-generation-prompt override.
 * Exit codes: 0 ok, 1 render failure (including a template's
 * raise_exception, e.g. roles that do not alternate), 2 usage error.
 */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/args.h"
#include "base/util.h"
#include "cli/commands.h"
#include "tokenizer/builtin_templates.h"
#include "tokenizer/chat_template.h"

static const char usage_text[] =
    "usage: eaas chat-template (--model MODEL | --builtin FAMILY) --messages FILE.json [options]\n\n"
    "Render a conversation with the model's chat template (tokenizer_config.json\n"
    "chat_template, or tokenizer.chat_template of a .gguf) and print the prompt.\n"
    "FILE.json: an array of {role, content, ...} or an object {\"messages\": [...],\n"
    "other template variables...}. A template that rejects the conversation\n"
    "(raise_exception) exits 1 with its message.\n\noptions:\n";

static ea_status load_json(const char *path, json_t **out) { return ea_json_load_file(path, out); }

int ea_cmd_chat_template(int argc, char **argv) {
    const char *model = NULL, *builtin = NULL, *messages_path = NULL, *tools_path = NULL, *template_path = NULL;
    int no_gen = 0, print_template = 0, print_config = 0;
    ea_arg spec[] = {
        {"model", EA_ARG_STR, &model, "MODEL", "model directory (tokenizer_config.json) or .gguf file"},
        {"builtin", EA_ARG_STR, &builtin, "FAMILY", "use a built-in template instead: mixtral, olmoe"},
        {"template", EA_ARG_STR, &template_path, "FILE", "use this Jinja file as the template (tokens still from the model)"},
        {"messages", EA_ARG_STR, &messages_path, "FILE", "conversation JSON (required unless printing the template)"},
        {"tools", EA_ARG_STR, &tools_path, "FILE", "JSON array of tool definitions"},
        {"no-generation-prompt", EA_ARG_BOOL, &no_gen, NULL, "do not open an assistant turn at the end"},
        {"print-template", EA_ARG_BOOL, &print_template, NULL, "print the template source and exit"},
        {"print-config", EA_ARG_BOOL, &print_config, NULL, "print {chat_template, bos_token, eos_token} as JSON and exit"},
        {0}};
    ea_args_rest rest;
    int rc = ea_cli_parse("chat-template", usage_text, spec, argc, argv, &rest);
    if (rc >= 0) return rc;
    ea_status s;
    if ((!model && !builtin) || (model && builtin) || rest.n_pos > 0)
        return ea_cli_usage_error("chat-template", NULL, "give exactly one of --model or --builtin (see --help)");
    if (!messages_path && !print_template && !print_config)
        return ea_cli_usage_error("chat-template", NULL, "--messages FILE is required (see --help)");

    json_t *doc = NULL, *tools = NULL, *ctx = NULL;
    ea_chat_config cfg = {0};
    ea_chat_template *t = NULL;
    char *out = NULL;
    size_t out_len = 0;
    rc = 1;

    if (builtin) {
        const char *src = ea_builtin_chat_template(builtin);
        const char *bos = NULL, *eos = NULL;
        if (!src || ea_builtin_special_tokens(builtin, &bos, &eos) != 0)
            return ea_cli_usage_error("chat-template", NULL, "unknown --builtin family '%s' (mixtral, olmoe)", builtin);
        cfg.template_src = ea_strdup(src);
        cfg.template_len = strlen(src);
        cfg.bos_token = bos ? ea_strdup(bos) : NULL;
        cfg.eos_token = eos ? ea_strdup(eos) : NULL;
        if (!cfg.template_src) {
            s = ea_err(EA_ERR_NOMEM, "out of memory");
            goto fail;
        }
    }
    if (messages_path) {
        s = load_json(messages_path, &doc);
        if (s != EA_OK) goto fail;
        if (json_is_array(doc)) {
            ctx = json_object();
            json_object_set(ctx, "messages", doc);
        } else if (json_is_object(doc) && json_is_array(json_object_get(doc, "messages"))) {
            ctx = json_deep_copy(doc);
        } else {
            s = ea_err(EA_ERR_FORMAT, "%s: expected an array of messages or an object with a \"messages\" array",
                       messages_path);
            goto fail;
        }
    }
    if (tools_path) {
        s = load_json(tools_path, &tools);
        if (s != EA_OK) goto fail;
        if (!json_is_array(tools)) {
            s = ea_err(EA_ERR_FORMAT, "%s: tools must be a JSON array", tools_path);
            goto fail;
        }
    }
    if (model) {
        int want_tools = tools || (ctx && json_object_get(ctx, "tools"));
        s = ea_chat_config_load(model, want_tools, &cfg);
        if (s != EA_OK) goto fail;
    }
    if (template_path) {
        char *src;
        size_t n;
        s = ea_read_file(template_path, &src, &n);
        if (s != EA_OK) goto fail;
        ea_free(cfg.template_src);
        cfg.template_src = src;
        cfg.template_len = n;
    }
    if (print_template) {
        fwrite(cfg.template_src, 1, cfg.template_len, stdout);
        rc = 0;
        goto done;
    }
    if (print_config) {
        json_t *c = json_object();
        json_object_set_new(c, "chat_template", json_stringn(cfg.template_src, cfg.template_len));
        if (cfg.bos_token) json_object_set_new(c, "bos_token", json_string(cfg.bos_token));
        if (cfg.eos_token) json_object_set_new(c, "eos_token", json_string(cfg.eos_token));
        char *txt = json_dumps(c, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(c);
        if (txt) puts(txt);
        free(txt);
        rc = txt ? 0 : 1;
        goto done;
    }
    s = ea_chat_template_create(cfg.template_src, cfg.template_len, &t);
    if (s != EA_OK) goto fail;
    if (tools) json_object_set(ctx, "tools", tools);
    json_object_set_new(ctx, "add_generation_prompt", json_boolean(!no_gen));
    if (cfg.bos_token) json_object_set_new(ctx, "bos_token", json_string(cfg.bos_token));
    if (cfg.eos_token) json_object_set_new(ctx, "eos_token", json_string(cfg.eos_token));
    s = ea_chat_template_render(t, ctx, &out, &out_len);
    if (s != EA_OK) goto fail;
    fwrite(out, 1, out_len, stdout);
    rc = 0;
    goto done;
fail:
    rc = ea_cli_fail(argv[0], s);
done:
    ea_free(out);
    ea_chat_template_destroy(t);
    ea_chat_config_deinit(&cfg);
    json_decref(doc);
    json_decref(tools);
    json_decref(ctx);
    return rc;
}
