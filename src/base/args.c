/*
 * args.c — see args.h. The range and "needs" rules live here and nowhere
 * else, so every command reports a bad flag the same way.
 */
#include "base/args.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static double type_top(const ea_arg *a) {
    return a->kind == EA_ARG_INT ? (double)INT_MAX : a->kind == EA_ARG_LONG ? (double)LONG_MAX : EA_ARG_NO_MAX;
}

/* The range a numeric flag accepts (args.h: both 0 = [0, type's largest]). */
static void range_of(const ea_arg *a, double *lo, double *hi) {
    double top = type_top(a);
    *lo = a->min;
    *hi = a->min == 0 && a->max == 0 ? top : a->max < top ? a->max : top;
}

/* "in [1, 100]" or ">= 0" into buf. */
static const char *range_text(const ea_arg *a, char *buf, size_t n) {
    double lo, hi, top = type_top(a);
    range_of(a, &lo, &hi);
    if (a->kind == EA_ARG_DOUBLE) {
        if (hi >= top) snprintf(buf, n, ">= %g", lo);
        else snprintf(buf, n, "in [%g, %g]", lo, hi);
    } else {
        if (hi >= top) snprintf(buf, n, ">= %lld", (long long)lo);
        else snprintf(buf, n, "in [%lld, %lld]", (long long)lo, (long long)hi);
    }
    return buf;
}

static ea_status out_of_range(const ea_arg *a, const char *v) {
    char r[96];
    return ea_err(EA_ERR_INVALID_ARG, "--%s: %s is out of range: expected %s %s", a->name, v,
                  a->kind == EA_ARG_DOUBLE ? "a number" : "an integer", range_text(a, r, sizeof r));
}

static ea_status set_value(const ea_arg *a, const char *v) {
    char *end;
    double lo, hi;
    range_of(a, &lo, &hi);
    errno = 0;
    switch (a->kind) {
    case EA_ARG_BOOL: *(int *)a->target = 1; return EA_OK;
    case EA_ARG_STR: *(const char **)a->target = v; return EA_OK;
    case EA_ARG_INT:
    case EA_ARG_LONG: {
        long long x = strtoll(v, &end, 10);
        if (end == v || *end) return ea_err(EA_ERR_INVALID_ARG, "--%s: '%s' is not an integer", a->name, v);
        if (errno == ERANGE || (double)x < lo || (double)x > hi) return out_of_range(a, v);
        if (a->kind == EA_ARG_INT) *(int *)a->target = (int)x;
        else *(long *)a->target = (long)x;
        return EA_OK;
    }
    case EA_ARG_DOUBLE: {
        double x = strtod(v, &end);
        if (end == v || *end) return ea_err(EA_ERR_INVALID_ARG, "--%s: '%s' is not a number", a->name, v);
        if (!(x >= lo && x <= hi)) return out_of_range(a, v); /* also NaN and overflow to inf */
        *(double *)a->target = x;
        return EA_OK;
    }
    }
    return ea_err(EA_ERR_INTERNAL, "--%s: bad flag kind", a->name);
}

static int find(const ea_arg *spec, const char *name, size_t nlen) {
    for (int i = 0; spec[i].name; i++)
        if (strlen(spec[i].name) == nlen && strncmp(spec[i].name, name, nlen) == 0) return i;
    return -1;
}

int ea_args_given(const ea_arg *spec, const ea_args_rest *rest, const char *name) {
    int i = find(spec, name, strlen(name));
    return i >= 0 && rest->given[i];
}

/* "--a" or "--a or --b" for a `needs` list "a|b", into buf. */
static const char *needs_text(const char *n, char *buf, size_t cap) {
    buf[0] = 0;
    for (const char *p = n; *p;) {
        size_t len = strcspn(p, "|"), o = strlen(buf);
        snprintf(buf + o, cap - o, "%s--%.*s", o ? " or " : "", (int)len, p);
        p += len + (p[len] == '|');
    }
    return buf;
}

/* Every given flag with `needs` has one of the flags it names. */
static ea_status check_needs(const ea_arg *spec, const ea_args_rest *rest) {
    for (int i = 0; spec[i].name; i++) {
        const char *n = spec[i].needs;
        if (!n || !rest->given[i]) continue;
        int ok = 0;
        for (const char *p = n; *p;) {
            size_t len = strcspn(p, "|");
            int j = find(spec, p, len);
            if (j < 0) return ea_err(EA_ERR_INTERNAL, "--%s needs an unknown flag --%.*s", spec[i].name, (int)len, p);
            ok |= rest->given[j];
            p += len + (p[len] == '|');
        }
        char list[160];
        if (!ok) return ea_err(EA_ERR_INVALID_ARG, "--%s needs %s", spec[i].name, needs_text(n, list, sizeof list));
    }
    return EA_OK;
}

ea_status ea_args_parse(const ea_arg *spec, int argc, char **argv, ea_args_rest *rest) {
    memset(rest, 0, sizeof *rest);
    int n_spec = 0;
    while (spec[n_spec].name) n_spec++;
    if (n_spec > EA_ARGS_MAX) return ea_err(EA_ERR_INTERNAL, "%d flags in one table, at most %d", n_spec, EA_ARGS_MAX);
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
        int k = find(spec, name, nlen);
        if (k < 0) return ea_err(EA_ERR_INVALID_ARG, "unknown flag --%.*s (see --help)", (int)nlen, name);
        const ea_arg *a = &spec[k];
        const char *v = NULL;
        if (a->kind == EA_ARG_BOOL) {
            if (eq) return ea_err(EA_ERR_INVALID_ARG, "--%s takes no value", a->name);
        } else if (eq) {
            v = eq + 1;
        } else {
            if (i + 1 >= argc) return ea_err(EA_ERR_INVALID_ARG, "--%s needs a value", a->name);
            v = argv[++i];
        }
        EA_TRY(set_value(a, v));
        rest->given[k] = 1;
    }
    return rest->help ? EA_OK : check_needs(spec, rest);
}

void ea_args_usage(FILE *f, const ea_arg *spec) {
    for (const ea_arg *s = spec; s->name; s++) {
        char left[64], range[96] = "", needs[192] = "", r[80], list[160];
        snprintf(left, sizeof left, "--%s%s%s", s->name, s->metavar ? " " : "", s->metavar ? s->metavar : "");
        if (s->kind != EA_ARG_BOOL && s->kind != EA_ARG_STR && (s->min != 0 || s->max != 0))
            snprintf(range, sizeof range, " (%s)", range_text(s, r, sizeof r));
        if (s->needs) snprintf(needs, sizeof needs, " (with %s)", needs_text(s->needs, list, sizeof list));
        fprintf(f, "  %-28s %s%s%s\n", left, s->help ? s->help : "", range, needs);
    }
}
