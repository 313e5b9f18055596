/*
 * eplb_internal.h — the workspace shared by the placement algorithms of
 * src/eplb/ (deepseek.c, refine.c). Not a public interface.
 *
 * Everything an algorithm needs per layer lives here, sized once from the
 * shape by ea_eplb_ws_create; the algorithms run layer by layer and never
 * allocate.
 */
#ifndef EA_EPLB_INTERNAL_H
#define EA_EPLB_INTERNAL_H

#include "eplb/eplb.h"

struct ea_eplb_ws {
    ea_eplb_shape s;
    int gs, gpn, En, Pn, Gn, ppg; /* README names: group size, groups/node, experts/node,
                                     slots/node, ranks/node, slots/rank */
    /* reference, one layer at a time */
    float *wf;        /* [E] counts as float32 */
    float *gload;     /* [groups] */
    int32_t *gpack, *grank;      /* [groups] */
    int32_t *log2mlog, *mlog2log; /* [E] */
    float *y, *ratio;            /* [En] */
    int32_t *mcnt;               /* [E] replicas per node-local logical id, all nodes */
    int32_t *phy2mlog, *prank;   /* [Pn] */
    float *z;                    /* [Pn] */
    int32_t *pk, *rk, *pphy2phy; /* [Pn] */
    int32_t *sidx, *stmp;        /* [max(Pn, groups)] sort scratch */
    float *packw;                /* [max(nodes, Gn)] */
    int32_t *packn;              /* [max(nodes, Gn)] */
    /* refinement, one layer at a time */
    double *w;        /* [E] counts as double */
    double *sw;       /* [P] slot load w[e] / cnt[e] */
    double *rload;    /* [ranks] */
    double *delta;    /* [ranks] load change of a candidate move */
    int32_t *p2l;     /* [P] candidate phy2log of the layer */
    int32_t *cnt;     /* [E] candidate replica counts */
    int32_t *home;    /* [E] node of the expert's replica 0 in the reference */
    int32_t *homecnt; /* [E] replicas on the home node */
    int32_t *off;     /* [E + 1] CSR offsets: slots of expert e are slots[off[e] .. off[e+1]) */
    int32_t *slots;   /* [P] */
    int32_t *touched; /* [ranks] ranks with a non-zero delta */
    int32_t *cursor;  /* [E] CSR fill cursor */
    int32_t *xr;      /* [ranks] other replicas of the retargeted expert per rank */
    int32_t *on_a;    /* [E] slots of each expert on the most loaded rank */
};

/* Stable descending order of x[0..n) into idx (ties: lower index first). */
void ea__eplb_sort_desc(const float *x, int n, int32_t *idx, int32_t *tmp);
/* The reference balanced_packing on one row. */
void ea__eplb_pack(ea_eplb_ws *ws, const float *x, int n, int m, int32_t *pack, int32_t *rank);
/* The reference replicate_experts on one row. */
void ea__eplb_replicate(ea_eplb_ws *ws, const float *x, int n, int q, int32_t *phy2log,
                        int32_t *rank, int32_t *cnt);
/* Recompute phyrank (slot order) from phy2log for one layer; cnt gets the counts. */
void ea__eplb_ranks_from_p2l(const int32_t *p2l, int n_physical, int n_logical, int32_t *rank,
                             int32_t *cnt);

#endif
