/*
 * args.c — see args.h.
 */
#include "base/args.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static ea_status ea__set(const ea_arg *a, const char *v) {
    char *end;
    errno = 0;
    switch (a->kind) {
    case EA_ARG_BOOL: *(int *)a->target = 1; return EA_OK;
    case EA_ARG_STR: *(const char **)a->target = v; return EA_OK;
    case EA_ARG_INT:
    case EA_ARG_LONG: {
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end) return ea_err(EA_ERR_INVALID_ARG, "--%s: '%s' is not an integer", a->name, v);
        if (a->kind == EA_ARG_INT) {
            if (x < -2147483647LL - 1 || x > 2147483647LL)
                return ea_err(EA_ERR_INVALID_ARG, "--%s: %s is out of range", a->name, v);
            *(int *)a->target = (int)x;
        } else {
            *(long *)a->target = (long)x;
        }
        return EA_OK;
    }
    case EA_ARG_DOUBLE: {
        double x = strtod(v, &end);
        if (errno || end == v || *end) return ea_err(EA_ERR_INVALID_ARG, "--%s: '%s' is not a number", a->name, v);
        *(double *)a->target = x;
        return EA_OK;
    }
    }
    return ea_err(EA_ERR_INTERNAL, "--%s: bad flag kind", a->name);
}

ea_status ea_args_parse(const ea_arg *spec, int argc, char **argv, ea_args_rest *rest) {
    memset(rest, 0, sizeof *rest);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            rest->help = 1;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            for (i++; i < argc; i++) {
                if (rest->n_pos == 64) return ea_err(EA_ERR_INVALID_ARG, "too many arguments");
                rest->pos[rest->n_pos++] = argv[i];
            }
            break;
        }
        if (strncmp(arg, "--", 2) != 0 || arg[2] == 0) {
            if (rest->n_pos == 64) return ea_err(EA_ERR_INVALID_ARG, "too many arguments");
            rest->pos[rest->n_pos++] = arg;
            continue;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const ea_arg *a = NULL;
        for (const ea_arg *s = spec; s->name; s++)
            if (strlen(s->name) == nlen && strncmp(s->name, name, nlen) == 0) a = s;
        if (!a) return ea_err(EA_ERR_INVALID_ARG, "unknown flag --%.*s (see --help)", (int)nlen, name);
        const char *v = NULL;
        if (a->kind == EA_ARG_BOOL) {
            if (eq) return ea_err(EA_ERR_INVALID_ARG, "--%s takes no value", a->name);
        } else if (eq) {
            v = eq + 1;
        } else {
            if (i + 1 >= argc) return ea_err(EA_ERR_INVALID_ARG, "--%s needs a value", a->name);
            v = argv[++i];
        }
        EA_TRY(ea__set(a, v));
    }
    return EA_OK;
}

void ea_args_usage(FILE *f, const ea_arg *spec) {
    for (const ea_arg *s = spec; s->name; s++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", s->name, s->metavar ? " " : "", s->metavar ? s->metavar : "");
        fprintf(f, "  %-28s %s\n", left, s->help ? s->help : "");
    }
}
