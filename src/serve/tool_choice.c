/*
 * tool_choice.c — see tool_choice.h. Checks the tool definitions as OpenAI
 * states them (a function needs a name of letters, digits, '_' and '-', at
 * most 64; parameters is a JSON Schema object), so a template never sees a
 * tool it would render wrongly, and a named tool_choice must name one of them.
 */
#include "serve/tool_choice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "grammar/grammar.h"

static int valid_name(const char *s, size_t n) {
    if (n == 0 || n > 64) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.'))
            return 0;
    }
    return 1;
}

static int check_tools(const json_t *tools, ea_oai_error *e) {
    if (!json_is_array(tools)) return ea_oai_fail(e, 400, NULL, "tools", NULL, "'tools' must be an array of tools");
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        char p[64];
        snprintf(p, sizeof p, "tools[%zu]", i);
        json_t *type = json_object_get(t, "type"), *f = json_object_get(t, "function");
        if (!json_is_object(t) || !json_is_string(type) || strcmp(json_string_value(type), "function") != 0 ||
            !json_is_object(f))
            return ea_oai_fail(e, 400, NULL, p, NULL, "'%s' must be {\"type\": \"function\", \"function\": {...}}", p);
        json_t *name = json_object_get(f, "name"), *params = json_object_get(f, "parameters");
        json_t *desc = json_object_get(f, "description");
        snprintf(p, sizeof p, "tools[%zu].function.name", i);
        if (!json_is_string(name) || !valid_name(json_string_value(name), json_string_length(name)))
            return ea_oai_fail(e, 400, NULL, p, NULL, "'%s' must be 1 to 64 letters, digits, '_', '-' or '.'", p);
        for (size_t k = 0; k < i; k++) {
            json_t *other = json_object_get(json_object_get(json_array_get(tools, k), "function"), "name");
            if (json_equal(other, name))
                return ea_oai_fail(e, 400, NULL, p, NULL, "'%s': the function '%s' is defined twice", p,
                                   json_string_value(name));
        }
        snprintf(p, sizeof p, "tools[%zu].function.parameters", i);
        if (params && !json_is_null(params) && !json_is_object(params))
            return ea_oai_fail(e, 400, NULL, p, NULL, "'%s' must be a JSON Schema object", p);
        snprintf(p, sizeof p, "tools[%zu].function.description", i);
        if (desc && !json_is_null(desc) && !json_is_string(desc))
            return ea_oai_fail(e, 400, NULL, p, NULL, "'%s' must be a string", p);
    }
    return 0;
}

/* Does tools define a function called name? */
static int has_tool(const json_t *tools, const char *name) {
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *n = json_object_get(json_object_get(t, "function"), "name");
        if (json_is_string(n) && strcmp(json_string_value(n), name) == 0) return 1;
    }
    return 0;
}

int ea_oai_parse_tools(const json_t *root, ea_oai_request *r, ea_oai_error *e) {
    static const char *legacy[] = {"functions", "function_call"};
    for (size_t i = 0; i < 2; i++) {
        json_t *v = json_object_get(root, legacy[i]);
        if (v && !json_is_null(v))
            return ea_oai_fail(e, 400, NULL, legacy[i], NULL,
                               "'%s' (deprecated by OpenAI) is not supported: use 'tools' and 'tool_choice'", legacy[i]);
    }
    json_t *tools = json_object_get(root, "tools");
    if (tools && json_is_null(tools)) tools = NULL;
    if (tools && check_tools(tools, e)) return -1;
    if (tools && json_array_size(tools) == 0) tools = NULL; /* an empty list is no tools */
    r->tools = json_incref(tools);
    r->tool_choice = tools ? EA_TOOL_CHOICE_AUTO : EA_TOOL_CHOICE_NONE;
    r->parallel_tool_calls = 1;
    json_t *ptc = json_object_get(root, "parallel_tool_calls");
    if (ptc && !json_is_null(ptc)) {
        if (!json_is_boolean(ptc))
            return ea_oai_fail(e, 400, NULL, "parallel_tool_calls", NULL, "'parallel_tool_calls' must be a boolean");
        r->parallel_tool_calls = json_is_true(ptc);
    }
    json_t *tc = json_object_get(root, "tool_choice");
    if (!tc || json_is_null(tc)) return 0;
    if (json_is_string(tc)) {
        const char *v = json_string_value(tc);
        if (!strcmp(v, "none")) r->tool_choice = EA_TOOL_CHOICE_NONE;
        else if (!strcmp(v, "auto")) r->tool_choice = EA_TOOL_CHOICE_AUTO;
        else if (!strcmp(v, "required")) r->tool_choice = EA_TOOL_CHOICE_REQUIRED;
        else
            return ea_oai_fail(e, 400, NULL, "tool_choice", NULL,
                               "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                               "\"function\": {\"name\": ...}}");
    } else {
        json_t *f = json_object_get(tc, "function"), *type = json_object_get(tc, "type");
        json_t *name = json_object_get(f, "name");
        if (!json_is_object(tc) || !json_is_string(type) || strcmp(json_string_value(type), "function") != 0 ||
            !json_is_string(name))
            return ea_oai_fail(e, 400, NULL, "tool_choice", NULL,
                               "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                               "\"function\": {\"name\": ...}}");
        r->tool_choice = EA_TOOL_CHOICE_NAMED;
        if (!(r->tool_name = ea_strdup(json_string_value(name))))
            return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
    }
    if (r->tool_choice != EA_TOOL_CHOICE_NONE && !tools)
        return ea_oai_fail(e, 400, NULL, "tool_choice", NULL, "'tool_choice' other than \"none\" needs 'tools'");
    if (r->tool_choice == EA_TOOL_CHOICE_NAMED && !has_tool(tools, r->tool_name))
        return ea_oai_fail(e, 400, NULL, "tool_choice", NULL, "'tool_choice' names '%s', which is not in 'tools'",
                           r->tool_name);
    return 0;
}

/* How each family writes its calls: exactly as its chat template renders an
 * assistant's tool calls (so a forced call looks like the ones the model was
 * trained on), and as tool_parse.c reads them back. */
static const ea_tool_call_syntax qwen3_calls = {
    .call_open = "<tool_call>\n{\"name\": ", .name_args = ", \"arguments\": ", .call_close = "}\n</tool_call>",
    .sep = "\n", .name_json = 1};
static const ea_tool_call_syntax deepseek_v3_calls = {
    .begin = "<｜tool▁calls▁begin｜>", .end = "<｜tool▁calls▁end｜>", .sep = "\n",
    .call_open = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>", .name_args = "\n```json\n",
    .call_close = "\n```<｜tool▁call▁end｜>", .name_json = 0};

static const ea_tool_call_syntax deepseek_v31_calls = {
    .begin = "<｜tool▁calls▁begin｜>", .end = "<｜tool▁calls▁end｜>", .sep = "", .call_open = "<｜tool▁call▁begin｜>",
    .name_args = "<｜tool▁sep｜>", .call_close = "<｜tool▁call▁end｜>"};

static const ea_tool_call_syntax kimi_k2_calls = {
    .begin = "<|tool_calls_section_begin|>", .end = "<|tool_calls_section_end|>", .sep = "",
    .call_open = "<|tool_call_begin|>functions.", .name_args = "<|tool_call_argument_begin|>",
    .call_close = "<|tool_call_end|>", .name_index = 1};

static const ea_tool_call_syntax qwen3_xml_calls = {
    .call_open = "<tool_call>\n<function=", .name_args = ">\n", .call_close = "</function>\n</tool_call>", .sep = "\n",
    .xml_params = 1};

/* The grammar for tools and a forcing choice (REQUIRED or NAMED with name), in fmt. */
static int calls_grammar(const json_t *tools, ea_tool_choice choice, const char *name, int parallel,
                         ea_tool_format fmt, ea_grammar **out, ea_oai_error *e) {
    ea_tool_call_syntax sy = fmt == EA_TOOL_FMT_QWEN3          ? qwen3_calls
                             : fmt == EA_TOOL_FMT_QWEN3_XML    ? qwen3_xml_calls
                             : fmt == EA_TOOL_FMT_KIMI_K2      ? kimi_k2_calls
                             : fmt == EA_TOOL_FMT_DEEPSEEK_V31 ? deepseek_v31_calls
                                                               : deepseek_v3_calls;
    sy.many = choice == EA_TOOL_CHOICE_REQUIRED && parallel;
    const json_t *use = tools;
    json_t *one = NULL;
    size_t named = 0;
    if (choice == EA_TOOL_CHOICE_NAMED) { /* only that function, by its index in tools */
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            json_t *n = json_object_get(json_object_get(t, "function"), "name");
            if (json_is_string(n) && strcmp(json_string_value(n), name) == 0) break;
        }
        one = json_array();
        if (!one || json_array_append(one, json_array_get(tools, i)))
            return json_decref(one), ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
        use = one;
        named = i;
    }
    char ep[512] = "", msg[512] = "";
    ea_status st = ea_grammar_tool_calls(use, "tools", &sy, out, ep, sizeof ep, msg, sizeof msg);
    json_decref(one);
    if (one && strncmp(ep, "tools[0]", 8) == 0) { /* name the function by its place in the request's tools */
        char tail[512];
        snprintf(tail, sizeof tail, "%s", ep + 8);
        snprintf(ep, sizeof ep, "tools[%zu]%.480s", named, tail);
    }
    if (st == EA_ERR_NOMEM) return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
    if (st != EA_OK)
        return ea_oai_fail(e, 400, NULL, ep[0] ? ep : "tools", NULL, "%s",
                           msg[0] ? msg : "the tools' parameter schemas cannot be compiled into a grammar");
    return 0;
}

/* The source other ranks compile the same grammar from:
 * {"eaas_tool_calls": {"format": F, "choice": C, "name": N, "parallel": P, "tools": [...]}}. */
static ea_status calls_source(const ea_oai_request *r, ea_tool_format fmt, char **src, int *n) {
    json_t *o = json_pack("{s:{s:i,s:i,s:s?,s:b,s:O}}", "eaas_tool_calls", "format", (int)fmt, "choice",
                          (int)r->tool_choice, "name", r->tool_name, "parallel", r->parallel_tool_calls, "tools",
                          r->tools);
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII) : NULL;
    json_decref(o);
    *src = s ? ea_strndup(s, strlen(s)) : NULL;
    *n = *src ? (int)strlen(*src) : 0;
    free(s); /* jansson's allocator */
    return *src ? EA_OK : ea_err(EA_ERR_NOMEM, "tool calls: grammar source");
}

int ea_tool_choice_grammar(ea_oai_request *r, ea_tool_format fmt, ea_oai_error *e) {
    if (r->tool_choice == EA_TOOL_CHOICE_NONE || r->tool_choice == EA_TOOL_CHOICE_AUTO) return 0;
    if (fmt == EA_TOOL_FMT_NONE) return 0; /* the caller refuses tools without a parser */
    if (r->grammar)
        return ea_oai_fail(e, 400, NULL, "tool_choice", NULL,
                           "tool_choice \"required\" or a named function constrains the output to a tool call: it "
                           "cannot be combined with response_format or guided_* (which constrain it too)");
    if (calls_grammar(r->tools, r->tool_choice, r->tool_name, r->parallel_tool_calls, fmt, &r->grammar, e)) return -1;
    r->params.grammar = r->grammar;
    if (calls_source(r, fmt, &r->grammar_src, &r->n_grammar_src) != EA_OK)
        return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
    r->params.grammar_src = r->grammar_src;
    r->params.n_grammar_src = r->n_grammar_src;
    return 0;
}

ea_status ea_tool_choice_compile(const json_t *src, ea_grammar **g) {
    *g = NULL;
    json_t *tools = NULL, *name = NULL;
    int fmt = 0, choice = 0, parallel = 0;
    ea_oai_error e;
    if (json_unpack((json_t *)src, "{s:i,s:i,s?o,s:b,s:o}", "format", &fmt, "choice", &choice, "name", &name, "parallel",
                    &parallel, "tools", &tools) != 0 ||
        (fmt != EA_TOOL_FMT_QWEN3 && fmt != EA_TOOL_FMT_DEEPSEEK_V3 && fmt != EA_TOOL_FMT_QWEN3_XML &&
         fmt != EA_TOOL_FMT_KIMI_K2 && fmt != EA_TOOL_FMT_DEEPSEEK_V31) ||
        (choice != EA_TOOL_CHOICE_REQUIRED && choice != EA_TOOL_CHOICE_NAMED) ||
        (choice == EA_TOOL_CHOICE_NAMED && (!json_is_string(name) || !has_tool(tools, json_string_value(name)))) ||
        !json_is_array(tools) || check_tools(tools, &e))
        return ea_err(EA_ERR_FORMAT, "tool-call grammar source: malformed");
    if (calls_grammar(tools, (ea_tool_choice)choice, json_string_value(name), parallel, (ea_tool_format)fmt, g, &e))
        return ea_err(EA_ERR_FORMAT, "tool-call grammar source refused: %s", e.message);
    return EA_OK;
}
