/*
 * textio.c — readers and writers of the EPLB workload and placement text
 * formats (formats in textio.h).
 *
 * The readers treat the file as untrusted: the header sizes are bounded
 * (EA_EPLB_MAX_DIM, R <= 128) before anything is allocated from them, every
 * row must have exactly its number of integers, every value is range-checked,
 * and the first problem is reported as "FILE:LINE: what is wrong". A placement
 * is also checked for agreement between its three tables (phy2log, logcnt,
 * log2phy) so that what reaches ea_eplb_meta is a consistent placement.
 */
#include "eplb/textio.h"

#include <string.h>

#include "base/alloc.h"
#include "base/util.h"

#define EA__SMALL 65536 /* values we allocate for before checking the file is big enough */

typedef struct {
    const char *p, *end; /* views the text */
    const char *what;    /* file name for messages */
    int line;            /* 1-based number of the current line */
    const char *ls, *le; /* current line [ls, le) */
} ea__rd;

static int ea__blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Next line that is neither blank nor a '#' comment; 0 at end of text. */
static int ea__next(ea__rd *r) {
    while (r->p < r->end) {
        const char *ls = r->p, *nl = memchr(ls, '\n', (size_t)(r->end - ls));
        const char *le = nl ? nl : r->end;
        r->p = nl ? nl + 1 : r->end;
        r->line++;
        const char *q = ls;
        while (q < le && ea__blank(*q)) q++;
        if (q == le || *q == '#') continue;
        r->ls = ls;
        r->le = le;
        return 1;
    }
    return 0;
}

/* Parse exactly n integers of the current line into out, each in [lo, hi].
 * `row` describes the row for messages ("phy2log row of layer 3"). */
static ea_status ea__ints(ea__rd *r, int n, int64_t *out, int64_t lo, int64_t hi, const char *row, int row_i) {
    const char *q = r->ls;
    int found = 0;
    for (;;) {
        while (q < r->le && ea__blank(*q)) q++;
        if (q == r->le) break;
        const char *tok = q;
        int neg = 0;
        if (*q == '-' || *q == '+') neg = *q++ == '-';
        const char *d0 = q;
        int64_t v = 0;
        int over = 0;
        while (q < r->le && *q >= '0' && *q <= '9') {
            if (v > (INT64_MAX - 9) / 10) over = 1;
            else v = v * 10 + (*q - '0');
            q++;
        }
        if (q == d0 || (q < r->le && !ea__blank(*q))) {
            const char *te = tok;
            while (te < r->le && !ea__blank(*te)) te++;
            return ea_err(EA_ERR_FORMAT, "%s:%d: '%.*s' is not an integer (%s %d, value %d)", r->what, r->line,
                          (int)(te - tok > 40 ? 40 : te - tok), tok, row, row_i, found + 1);
        }
        if (neg) v = -v;
        if (found < n) {
            if (over || v < lo || v > hi) {
                if (lo == 0 && v < 0)
                    return ea_err(EA_ERR_FORMAT, "%s:%d: negative value %.*s (%s %d, value %d)", r->what, r->line,
                                  (int)(q - tok), tok, row, row_i, found + 1);
                return ea_err(EA_ERR_FORMAT, "%s:%d: value %.*s out of range [%lld, %lld] (%s %d, value %d)",
                              r->what, r->line, (int)(q - tok > 40 ? 40 : q - tok), tok, (long long)lo, (long long)hi,
                              row, row_i, found + 1);
            }
            out[found] = v;
        }
        found++;
    }
    if (found != n)
        return ea_err(EA_ERR_FORMAT, "%s:%d: expected %d integers (%s %d), found %d", r->what, r->line, n, row, row_i,
                      found);
    return EA_OK;
}

static ea_status ea__row(ea__rd *r, int n, int64_t *out, int64_t lo, int64_t hi, const char *row, int row_i,
                         int rows_total) {
    if (!ea__next(r))
        return ea_err(EA_ERR_FORMAT, "%s:%d: truncated: file ends before %s %d (of %d)", r->what, r->line, row, row_i,
                      rows_total);
    return ea__ints(r, n, out, lo, hi, row, row_i);
}

static ea_status ea__end(ea__rd *r) {
    if (ea__next(r)) return ea_err(EA_ERR_FORMAT, "%s:%d: unexpected data after the last row", r->what, r->line);
    return EA_OK;
}

ea_status ea_eplb_workload_parse(const char *text, size_t len, const char *what, int *n_layers, int *n_logical,
                                 int64_t **counts) {
    *counts = NULL;
    ea__rd r = {text, text + len, what, 0, NULL, NULL};
    int64_t hd[2];
    if (!ea__next(&r)) return ea_err(EA_ERR_FORMAT, "%s:%d: empty: no 'L E' header line", what, r.line);
    EA_TRY(ea__ints(&r, 2, hd, 1, EA_EPLB_MAX_DIM, "header 'L E'", 1));
    int L = (int)hd[0], E = (int)hd[1];
    /* every value takes at least two bytes ("0 "): a large header promising more
     * values than the file can hold must not size an allocation (small ones go on,
     * so the error names the line where the data ends) */
    if ((size_t)L * (size_t)E > EA__SMALL && (size_t)L * (size_t)E > len / 2 + 1)
        return ea_err(EA_ERR_FORMAT, "%s:%d: truncated: header says %d x %d counts but the file has %zu bytes", what,
                      r.line, L, E, len);
    int64_t *c = ea_malloc((size_t)L * (size_t)E * sizeof *c);
    if (!c) return ea_err(EA_ERR_NOMEM, "%s: %d x %d counts", what, L, E);
    ea_status st = EA_OK;
    for (int l = 0; l < L && st == EA_OK; l++)
        st = ea__row(&r, E, c + (size_t)l * E, 0, INT64_MAX / 2, "count row of layer", l, L);
    if (st == EA_OK) st = ea__end(&r);
    if (st != EA_OK) {
        ea_free(c);
        return st;
    }
    *n_layers = L;
    *n_logical = E;
    *counts = c;
    return EA_OK;
}

ea_status ea_eplb_workload_read(const char *path, int *n_layers, int *n_logical, int64_t **counts) {
    char *text;
    size_t n;
    *counts = NULL;
    EA_TRY(ea_read_file(path, &text, &n));
    ea_status st = ea_eplb_workload_parse(text, n, path, n_layers, n_logical, counts);
    ea_free(text);
    return st;
}

static ea_status ea__io(FILE *f) {
    if (ferror(f)) return ea_err(EA_ERR_IO, "EPLB: write failed");
    return EA_OK;
}

/* One row of ints as "a b c\n", formatted by hand (fprintf per value made
 * writing a 48x128 placement slower than computing it). */
static void ea__row_out(FILE *f, const int32_t *v, int n) {
    char buf[4096];
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        if (k > sizeof buf - 16) {
            fwrite(buf, 1, k, f);
            k = 0;
        }
        if (i) buf[k++] = ' ';
        int64_t x = v[i];
        if (x < 0) {
            buf[k++] = '-';
            x = -x;
        }
        char d[12];
        int nd = 0;
        do {
            d[nd++] = (char)('0' + x % 10);
            x /= 10;
        } while (x);
        while (nd) buf[k++] = d[--nd];
    }
    buf[k++] = '\n';
    fwrite(buf, 1, k, f);
}

ea_status ea_eplb_workload_write(FILE *f, const char *comment, int n_layers, int n_logical, const int64_t *counts) {
    for (const char *c = comment; c && *c;) {
        const char *nl = strchr(c, '\n');
        int n = nl ? (int)(nl - c) : (int)strlen(c);
        fprintf(f, "# %.*s\n", n, c);
        c += n + (nl ? 1 : 0);
    }
    fprintf(f, "%d %d\n", n_layers, n_logical);
    for (int l = 0; l < n_layers; l++) {
        const int64_t *c = counts + (size_t)l * n_logical;
        for (int e = 0; e < n_logical; e++) fprintf(f, e ? " %lld" : "%lld", (long long)c[e]);
        fputc('\n', f);
    }
    return ea__io(f);
}

ea_status ea_eplb_placement_write(FILE *f, const char *header, const ea_eplb_placement *pl) {
    int L = pl->n_layers, E = pl->n_logical, P = pl->n_physical, M = ea_eplb_placement_max_replicas(pl);
    if (header) fputs(header, f);
    fprintf(f, "%d %d %d %d\n", L, E, P, M);
    for (int l = 0; l < L; l++) ea__row_out(f, pl->phy2log + (size_t)l * P, P);
    for (int l = 0; l < L; l++) ea__row_out(f, pl->logcnt + (size_t)l * E, E);
    /* log2phy rows: invert (phy2log, phyrank) one layer at a time into [E][M] */
    if (M > EA_EPLB_MAX_REDUNDANT + 1)
        return ea_err(EA_ERR_INVALID_ARG, "EPLB: %d replicas of one expert > %d", M, EA_EPLB_MAX_REDUNDANT + 1);
    int32_t *tab = ea_malloc((size_t)E * (size_t)(M ? M : 1) * sizeof *tab);
    if (!tab) return ea_err(EA_ERR_NOMEM, "EPLB: log2phy table %d x %d", E, M);
    for (int l = 0; l < L; l++) {
        const int32_t *p2l = pl->phy2log + (size_t)l * P, *prk = pl->phyrank + (size_t)l * P;
        for (size_t i = 0; i < (size_t)E * (size_t)M; i++) tab[i] = -1;
        for (int p = 0; p < P; p++)
            if (p2l[p] >= 0 && p2l[p] < E && prk[p] >= 0 && prk[p] < M) tab[(size_t)p2l[p] * M + prk[p]] = p;
        for (int e = 0; e < E; e++) ea__row_out(f, tab + (size_t)e * M, M);
    }
    ea_free(tab);
    return ea__io(f);
}

ea_status ea_eplb_placement_parse(const char *text, size_t len, const char *what, ea_eplb_placement *pl) {
    memset(pl, 0, sizeof *pl);
    ea__rd r = {text, text + len, what, 0, NULL, NULL};
    int64_t hd[4];
    if (!ea__next(&r)) return ea_err(EA_ERR_FORMAT, "%s:%d: empty: no 'L E P M' header line", what, r.line);
    EA_TRY(ea__ints(&r, 4, hd, 0, EA_EPLB_MAX_DIM, "header 'L E P M'", 1));
    int hline = r.line;
    int L = (int)hd[0], E = (int)hd[1], P = (int)hd[2], M = (int)hd[3];
    if (L < 1 || E < 1) return ea_err(EA_ERR_FORMAT, "%s:%d: L %d and E %d must be >= 1", what, hline, L, E);
    if (P < E || P - E > EA_EPLB_MAX_REDUNDANT)
        return ea_err(EA_ERR_FORMAT, "%s:%d: P %d must be in [E, E + %d] (E = %d)", what, hline, P,
                      EA_EPLB_MAX_REDUNDANT, E);
    if (M < 1 || M > P - E + 1)
        return ea_err(EA_ERR_FORMAT, "%s:%d: M %d must be in [1, P - E + 1 = %d]", what, hline, M, P - E + 1);
    size_t need = (size_t)L * (size_t)P + (size_t)L * (size_t)E * (size_t)(M + 1);
    if (need > EA__SMALL && need > len / 2 + 1)
        return ea_err(EA_ERR_FORMAT, "%s:%d: truncated: header 'L E P M' = %d %d %d %d needs %zu values but the file has %zu bytes",
                      what, hline, L, E, P, M, need, len);
    EA_TRY(ea_eplb_placement_init(pl, L, E, P));
    int64_t *buf = ea_malloc((size_t)P * sizeof *buf);
    int32_t *seen = ea_malloc((size_t)P * sizeof *seen);
    int *p2l_line = ea_malloc((size_t)L * sizeof *p2l_line);
    ea_status st = EA_OK;
    if (!buf || !seen || !p2l_line) st = ea_err(EA_ERR_NOMEM, "%s: placement buffers", what);
    for (int l = 0; l < L && st == EA_OK; l++) {
        st = ea__row(&r, P, buf, 0, E - 1, "phy2log row of layer", l, L);
        p2l_line[l] = r.line;
        for (int p = 0; p < P && st == EA_OK; p++) {
            pl->phy2log[(size_t)l * P + p] = (int32_t)buf[p];
            pl->phyrank[(size_t)l * P + p] = -1;
        }
    }
    for (int l = 0; l < L && st == EA_OK; l++) {
        st = ea__row(&r, E, buf, 1, M, "logcnt row of layer", l, L);
        for (int e = 0; e < E && st == EA_OK; e++) {
            int held = 0;
            for (int p = 0; p < P; p++) held += pl->phy2log[(size_t)l * P + p] == e;
            if (held != buf[e])
                st = ea_err(EA_ERR_FORMAT, "%s:%d: layer %d expert %d: logcnt %lld but %d slots hold it (phy2log line %d)",
                            what, r.line, l, e, (long long)buf[e], held, p2l_line[l]);
            pl->logcnt[(size_t)l * E + e] = (int32_t)buf[e];
        }
    }
    for (int l = 0; l < L && st == EA_OK; l++) {
        for (int p = 0; p < P; p++) seen[p] = 0;
        for (int e = 0; e < E && st == EA_OK; e++) {
            st = ea__row(&r, M, buf, -1, P - 1, "log2phy row", l * E + e, L * E);
            int cnt = pl->logcnt[(size_t)l * E + e];
            for (int k = 0; k < M && st == EA_OK; k++) {
                int64_t p = buf[k];
                if (k >= cnt) {
                    if (p != -1)
                        st = ea_err(EA_ERR_FORMAT, "%s:%d: layer %d expert %d: replica %d is slot %lld but the expert has only %d replicas (expected -1)",
                                    what, r.line, l, e, k, (long long)p, cnt);
                } else if (p < 0) {
                    st = ea_err(EA_ERR_FORMAT, "%s:%d: layer %d expert %d: replica %d is missing (-1) but logcnt is %d",
                                what, r.line, l, e, k, cnt);
                } else if (pl->phy2log[(size_t)l * P + p] != e) {
                    st = ea_err(EA_ERR_FORMAT, "%s:%d: layer %d expert %d: replica %d is slot %lld, which holds expert %d",
                                what, r.line, l, e, k, (long long)p, pl->phy2log[(size_t)l * P + p]);
                } else if (seen[p]++) {
                    st = ea_err(EA_ERR_FORMAT, "%s:%d: layer %d expert %d: slot %lld listed twice", what, r.line, l, e,
                                (long long)p);
                } else {
                    pl->phyrank[(size_t)l * P + p] = k;
                }
            }
        }
    }
    if (st == EA_OK) st = ea__end(&r);
    ea_free(buf);
    ea_free(seen);
    ea_free(p2l_line);
    if (st != EA_OK) ea_eplb_placement_deinit(pl);
    return st;
}

ea_status ea_eplb_placement_read(const char *path, ea_eplb_placement *pl) {
    char *text;
    size_t n;
    memset(pl, 0, sizeof *pl);
    EA_TRY(ea_read_file(path, &text, &n));
    ea_status st = ea_eplb_placement_parse(text, n, path, pl);
    ea_free(text);
    return st;
}
