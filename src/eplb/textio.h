/*
 * textio.h — the EPLB text formats of ../shared/eplb/ (read and write).
 *
 * Workload (token counts; what `eaas eplb place` reads, what the recorder dumps):
 *   '#' comment lines
 *   L E                       two integers
 *   L rows of E integers      counts[l][e] >= 0, tokens routed to logical expert e
 *
 * Placement (what `eaas eplb place` writes, `eaas eplb score` and
 * --init-expert-location read; the .out.txt files in ../shared/eplb/expected/):
 *   '#' comment lines
 *   L E P M                   M = the largest replica count over all layers
 *   L rows of P integers      phy2log[l][p]
 *   L rows of E integers      logcnt[l][e]
 *   L*E rows of M integers    log2phy[l][e][k]: the slot of replica k (row l*E+e),
 *                             -1 padded; replica-rank order, not slot order
 *
 * Integers are decimal, separated by single spaces (readers accept any spaces
 * and tabs), one row per line. Readers skip '#' lines and blank lines anywhere.
 * Every reading error is one message naming the file and line: a row with the
 * wrong number of values, a negative count, a value out of range, a truncated
 * file, data after the last row, or (placement) maps that disagree.
 */
#ifndef EA_EPLB_TEXTIO_H
#define EA_EPLB_TEXTIO_H

#include <stdint.h>
#include <stdio.h>

#include "eplb/eplb.h"

#define EA_EPLB_MAX_DIM 65536 /* largest L or E accepted from a file */

/* OUT: *counts [L][E] (free with ea_free), *n_layers, *n_logical. */
ea_status ea_eplb_workload_read(const char *path, int *n_layers, int *n_logical, int64_t **counts);
/* Parse text already in memory; `what` names it in errors. */
ea_status ea_eplb_workload_parse(const char *text, size_t len, const char *what, int *n_layers, int *n_logical,
                                 int64_t **counts);
/* comment: written as '# ' lines (may be NULL; may contain newlines). */
ea_status ea_eplb_workload_write(FILE *f, const char *comment, int n_layers, int n_logical, const int64_t *counts);

/* OUT: pl (initialised here; deinit by the caller). Checks the maps agree. */
ea_status ea_eplb_placement_read(const char *path, ea_eplb_placement *pl);
ea_status ea_eplb_placement_parse(const char *text, size_t len, const char *what, ea_eplb_placement *pl);
/* header: exact comment text written first (must end in '\n' or be NULL). */
ea_status ea_eplb_placement_write(FILE *f, const char *header, const ea_eplb_placement *pl);

#endif
