/*
 * fuzz_eplb_text.c — the EPLB text readers (textio.h) on arbitrary bytes.
 *
 * Input: byte 0 selects the reader (even: workload, odd: placement) and, for a
 * workload, the number of redundant slots (byte0 / 2 % 9); the rest is the text.
 * Properties beyond "no crash, no leak, no UB":
 *   - a placement the reader accepts always builds valid metadata (the reader
 *     checks the maps agree), and writes back to text that reads back equal;
 *   - a small workload the reader accepts runs through both algorithms, and the
 *     result builds valid metadata.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "eplb/eplb.h"
#include "eplb/meta.h"
#include "eplb/textio.h"

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_eplb_text: %s: %s\n", what, ea_errmsg());
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (data[0] & 1) {
        ea_eplb_placement pl;
        if (ea_eplb_placement_parse(text, len, "fuzz", &pl) != EA_OK) return 0;
        ea_eplb_meta m;
        check(ea_eplb_meta_init_from_placement(&m, &pl, 1, 1) == EA_OK, "accepted placement gives bad metadata");
        ea_eplb_meta_deinit(&m);
        char *buf = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&buf, &n);
        check(f && ea_eplb_placement_write(f, NULL, &pl) == EA_OK, "write");
        fclose(f);
        ea_eplb_placement back;
        check(ea_eplb_placement_parse(buf, n, "fuzz-back", &back) == EA_OK, "written placement does not read back");
        size_t lp = (size_t)pl.n_layers * (size_t)pl.n_physical;
        check(memcmp(back.phy2log, pl.phy2log, lp * sizeof(int32_t)) == 0 &&
                  memcmp(back.phyrank, pl.phyrank, lp * sizeof(int32_t)) == 0,
              "round trip differs");
        ea_eplb_placement_deinit(&back);
        free(buf);
        ea_eplb_placement_deinit(&pl);
        return 0;
    }
    int L, E;
    int64_t *c;
    if (ea_eplb_workload_parse(text, len, "fuzz", &L, &E, &c) != EA_OK) return 0;
    if ((size_t)L * (size_t)E <= 4096) {
        int P = E + (data[0] / 2) % 9;
        ea_eplb_shape s = {L, E, P, 1, 1, 1};
        ea_eplb_ws *ws;
        ea_eplb_placement pl;
        check(ea_eplb_ws_create(&s, &ws) == EA_OK, "workspace");
        check(ea_eplb_placement_init(&pl, L, E, P) == EA_OK, "placement");
        for (int a = 0; a < 2; a++) {
            check(ea_eplb_rebalance(ws, a ? EA_EPLB_REFINED : EA_EPLB_DEEPSEEK, c, &pl) == EA_OK, "rebalance");
            ea_eplb_meta m;
            check(ea_eplb_meta_init_from_placement(&m, &pl, 1, 1) == EA_OK, "algorithm output gives bad metadata");
            ea_eplb_meta_deinit(&m);
        }
        ea_eplb_placement_deinit(&pl);
        ea_eplb_ws_destroy(ws);
    }
    ea_free(c);
    return 0;
}
