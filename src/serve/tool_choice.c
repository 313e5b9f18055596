/*
 * tool_choice.c — see tool_choice.h. Checks the tool definitions as OpenAI
 * states them (a function needs a name of letters, digits, '_' and '-', at
 * most 64; parameters is a JSON Schema object), so a template never sees a
 * tool it would render wrongly, and a named tool_choice must name one of them.
 */
#include "serve/tool_choice.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

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

ea_status ea_tool_choice_grammar(const json_t *tools, ea_tool_choice choice, const char *name, ea_tool_format fmt,
                                 void **grammar) {
    (void)tools;
    (void)fmt;
    *grammar = NULL;
    if (choice == EA_TOOL_CHOICE_NONE || choice == EA_TOOL_CHOICE_AUTO) return EA_OK;
    if (choice == EA_TOOL_CHOICE_REQUIRED)
        return ea_err(EA_ERR_UNSUPPORTED, "tool_choice 'required' needs constrained decoding, not built yet");
    return ea_err(EA_ERR_UNSUPPORTED, "tool_choice naming the function '%s' needs constrained decoding, not built yet",
                  name ? name : "");
}
