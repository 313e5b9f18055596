/*
 * constraint.c — response_format and vLLM's guided_* fields to a grammar
 * (constraint.h has the fields). The JSON front ends are the grammar
 * engine's; this file only finds the field, checks its shape, and turns an
 * engine error into a 400 naming the field or the schema's JSON path.
 */
#include "serve/constraint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "serve/tool_choice.h"

static json_t *present(const json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return v && !json_is_null(v) ? v : NULL;
}

static int from_schema(const json_t *schema, const char *path, ea_grammar **g, ea_oai_error *e) {
    char ep[256] = "", err[400] = "";
    if (!json_is_object(schema) && !json_is_boolean(schema))
        return ea_oai_fail(e, 400, NULL, path, NULL, "'%s' must be a JSON Schema object", path);
    ea_status st = ea_grammar_from_json_schema(schema, path, NULL, g, ep, sizeof ep, err, sizeof err);
    if (st == EA_OK) return 0;
    if (st == EA_ERR_NOMEM) return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
    return ea_oai_fail(e, 400, NULL, ep[0] ? ep : path, NULL, "%s: %s", ep[0] ? ep : path, err);
}

static int response_format(const json_t *rf, ea_grammar **g, ea_oai_error *e) {
    if (!json_is_object(rf)) return ea_oai_fail(e, 400, NULL, "response_format", NULL, "'response_format' must be an object");
    json_t *t = json_object_get(rf, "type");
    if (!json_is_string(t))
        return ea_oai_fail(e, 400, NULL, "response_format.type", NULL,
                           "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
    const char *type = json_string_value(t);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)rf, key, v) {
        if (strcmp(key, "type") == 0 || (strcmp(type, "json_schema") == 0 && strcmp(key, "json_schema") == 0)) continue;
        char p[96];
        snprintf(p, sizeof p, "response_format.%.60s", key);
        return ea_oai_fail(e, 400, NULL, p, NULL, "unknown field '%s' for response_format type %s", p, type);
    }
    if (strcmp(type, "text") == 0) return 0;
    if (strcmp(type, "json_object") == 0) {
        if (ea_grammar_json_object(NULL, g) != EA_OK) return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
        return 0;
    }
    if (strcmp(type, "json_schema") != 0)
        return ea_oai_fail(e, 400, NULL, "response_format.type", NULL,
                           "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", got \"%s\"", type);
    json_t *js = json_object_get(rf, "json_schema");
    if (!json_is_object(js))
        return ea_oai_fail(e, 400, NULL, "response_format.json_schema", NULL,
                           "'response_format.json_schema' must be an object with 'name' and 'schema'");
    json_object_foreach(js, key, v) {
        static const char *const ok[] = {"name", "schema", "strict", "description"};
        int known = 0;
        for (size_t i = 0; i < 4 && !known; i++) known = strcmp(key, ok[i]) == 0;
        if (known) continue;
        char p[96];
        snprintf(p, sizeof p, "response_format.json_schema.%.40s", key);
        return ea_oai_fail(e, 400, NULL, p, NULL, "unknown field '%s'", p);
    }
    json_t *name = json_object_get(js, "name"), *strict = present(js, "strict");
    if (!json_is_string(name))
        return ea_oai_fail(e, 400, NULL, "response_format.json_schema.name", NULL,
                           "'response_format.json_schema.name' must be a string");
    if (strict && !json_is_boolean(strict))
        return ea_oai_fail(e, 400, NULL, "response_format.json_schema.strict", NULL,
                           "'response_format.json_schema.strict' must be a boolean");
    json_t *schema = present(js, "schema");
    if (!schema) /* OpenAI: a json_schema without a schema means any JSON object */
        return ea_grammar_json_object(NULL, g) == EA_OK ? 0 : ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
    return from_schema(schema, "response_format.json_schema.schema", g, e);
}

int ea_oai_parse_constraint(const json_t *root, ea_grammar **g, ea_oai_error *e) {
    *g = NULL;
    static const char *const fields[] = {"response_format", "guided_json", "guided_choice", "guided_regex", "grammar",
                                         "guided_grammar"};
    const char *which = NULL;
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        json_t *v = present(root, fields[i]);
        if (!v) continue;
        if (i == 0 && json_is_object(v) && json_is_string(json_object_get(v, "type")) &&
            strcmp(json_string_value(json_object_get(v, "type")), "text") == 0 && json_object_size(v) == 1)
            continue; /* plain text: no constraint */
        if (which)
            return ea_oai_fail(e, 400, NULL, fields[i], NULL, "'%s' and '%s' cannot be used together: give one constraint",
                               which, fields[i]);
        which = fields[i];
    }
    if (!which) {
        json_t *rf = present(root, "response_format");
        return rf ? response_format(rf, g, e) : 0; /* {"type":"text"} */
    }
    json_t *v = present(root, which);
    char err[300] = "";
    if (strcmp(which, "response_format") == 0) return response_format(v, g, e);
    if (strcmp(which, "guided_json") == 0) {
        if (json_is_string(v)) {
            json_error_t je;
            json_t *s = json_loads(json_string_value(v), 0, &je);
            if (!s) return ea_oai_fail(e, 400, NULL, "guided_json", NULL, "'guided_json' is not valid JSON: %s", je.text);
            int rc = from_schema(s, "guided_json", g, e);
            json_decref(s);
            return rc;
        }
        return from_schema(v, "guided_json", g, e);
    }
    if (strcmp(which, "guided_choice") == 0) {
        size_t n = json_is_array(v) ? json_array_size(v) : 0;
        if (n == 0 || n > 4096)
            return ea_oai_fail(e, 400, NULL, "guided_choice", NULL, "'guided_choice' must be a list of 1 to 4096 strings");
        const char **ch = ea_malloc(n * sizeof *ch);
        size_t *lens = ea_malloc(n * sizeof *lens);
        int rc = 0;
        for (size_t i = 0; ch && lens && i < n && !rc; i++) {
            json_t *x = json_array_get(v, i);
            if (!json_is_string(x) || json_string_length(x) == 0)
                rc = ea_oai_fail(e, 400, NULL, "guided_choice", NULL, "'guided_choice[%zu]' must be a non-empty string", i);
            else
                ch[i] = json_string_value(x), lens[i] = json_string_length(x);
        }
        if (!rc && (!ch || !lens)) rc = ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
        if (!rc && ea_grammar_choice(ch, lens, (int)n, g, err, sizeof err) != EA_OK)
            rc = ea_oai_fail(e, 400, NULL, "guided_choice", NULL, "guided_choice: %s", err);
        ea_free(ch);
        ea_free(lens);
        return rc;
    }
    if (strcmp(which, "guided_regex") == 0) {
        if (!json_is_string(v) || json_string_length(v) == 0)
            return ea_oai_fail(e, 400, NULL, "guided_regex", NULL, "'guided_regex' must be a non-empty string");
        if (ea_grammar_from_regex(json_string_value(v), json_string_length(v), g, err, sizeof err) != EA_OK)
            return ea_oai_fail(e, 400, NULL, "guided_regex", NULL, "guided_regex: %s", err);
        return 0;
    }
    /* grammar, guided_grammar: GBNF */
    if (!json_is_string(v) || json_string_length(v) == 0)
        return ea_oai_fail(e, 400, NULL, which, NULL, "'%s' must be a non-empty GBNF grammar string", which);
    ea_status st = ea_grammar_from_gbnf(json_string_value(v), json_string_length(v), g, err, sizeof err);
    if (st == EA_ERR_NOMEM) return ea_oai_fail(e, 500, NULL, NULL, NULL, "out of memory");
    if (st != EA_OK) return ea_oai_fail(e, 400, NULL, which, NULL, "%s: %s", which, err);
    return 0;
}

/* The fields ea_oai_parse_constraint reads; nothing else of the body matters to it. */
static const char *const constraint_fields[] = {"response_format", "guided_json", "guided_choice", "guided_regex",
                                                "grammar", "guided_grammar"};

ea_status ea_oai_constraint_source(const json_t *root, char **src, int *n) {
    *src = NULL;
    *n = 0;
    json_t *o = json_object();
    int bad = !o;
    for (size_t i = 0; !bad && i < sizeof constraint_fields / sizeof *constraint_fields; i++) {
        json_t *v = present(root, constraint_fields[i]);
        if (v) bad = json_object_set(o, constraint_fields[i], v) != 0;
    }
    /* insertion order is kept, and reals print with 17 digits: the text reads back to the same values */
    char *s = bad ? NULL : json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    json_decref(o);
    if (!s) return ea_err(EA_ERR_NOMEM, "structured output: grammar source");
    size_t len = strlen(s);
    *src = ea_strndup(s, len);
    free(s); /* jansson's allocator */
    if (!*src || len > (size_t)1 << 30) {
        ea_free(*src);
        *src = NULL;
        return ea_err(EA_ERR_NOMEM, "structured output: grammar source");
    }
    *n = (int)len;
    return EA_OK;
}

ea_status ea_oai_constraint_compile(const char *src, size_t n, ea_grammar **g) {
    *g = NULL;
    json_error_t je;
    json_t *root = json_loadb(src, n, JSON_REJECT_DUPLICATES, &je);
    if (!root) return ea_err(EA_ERR_FORMAT, "grammar source is not JSON: %s", je.text);
    json_t *calls = json_object_get(root, "eaas_tool_calls"); /* tool_choice.c's source */
    if (calls) {
        ea_status st = ea_tool_choice_compile(calls, g);
        json_decref(root);
        return st;
    }
    ea_oai_error e;
    int rc = ea_oai_parse_constraint(root, g, &e);
    json_decref(root);
    if (rc) return ea_err(EA_ERR_FORMAT, "grammar source refused: %s", e.message);
    if (!*g) return ea_err(EA_ERR_FORMAT, "grammar source has no constraint");
    return EA_OK;
}
