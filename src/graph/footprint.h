/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: the set of elements a view touches, for overlap and coverage
 * tests between accesses. Three kinds, chosen when the access is declared:
 *
 *   RUNS  sorted disjoint runs of element indices: one run for a compact
 *         view (stored inline), a list for a strided view that is no box
 *   BOX   a strided view that maps onto the tensor's own dimensions: per
 *         dimension of the tensor an arithmetic progression of indices
 *         (first, step, count), so that overlap and cover tests between two
 *         boxes cost O(rank) whatever the view's size (interiors, halos,
 *         shifted stencil views, rows of a column-major matrix, every other
 *         column). Exact on any grid.
 *   SPAN  a view that is neither and has too many runs: its bounding
 *         element interval, inexact (conservative: it may order, never
 *         misses; it covers nothing).
 *
 * Every kind keeps its bounding interval [one.lo, one.hi), which the
 * interval sets index. Tests between kinds are exact but for SPAN: a box
 * counts its elements inside a run in O(rank) (kd_box_count_below), so a
 * box meets a run list in O(runs * rank). */
#ifndef KDAG_GRAPH_FOOTPRINT_H
#define KDAG_GRAPH_FOOTPRINT_H

#include <stdint.h>

#include "session/view.h"

typedef struct kd_run {
  int64_t lo, hi; /* elements [lo, hi) */
} kd_run;

typedef enum kd_fp_kind { KD_FP_RUNS = 0, KD_FP_BOX = 1, KD_FP_SPAN = 2 } kd_fp_kind;

/* A box over a tensor of rank r is 4 r numbers, malloc'd: the tensor's
 * extents, then per dimension the first index, the step and the count of
 * the progression (count >= 1; step 1 where count is 1). */
#define KD_BOX_EXT(b, r) (b)
#define KD_BOX_LO(b, r) ((b) + (r))
#define KD_BOX_STEP(b, r) ((b) + 2 * (r))
#define KD_BOX_N(b, r) ((b) + 3 * (r))

#define KD_FP_SPARE_RUNS 4

typedef struct kd_footprint {
  void *data;      /* RUNS of more than one run: kd_run[count]; BOX: its numbers; else NULL.
                      malloc'd and owned, with room for KD_FP_SPARE_RUNS runs more (an
                      interval set's entry keeps its witnesses there, graph/interval.h) */
  kd_run one;      /* the bounding interval (RUNS of one run: the run itself) */
  uint32_t count;  /* RUNS: runs (0: touches nothing); BOX: the tensor's rank; SPAN: 1 */
  uint8_t kind;    /* kd_fp_kind */
  uint8_t revisits; /* BOX: a dimension of stride 0 names its elements more than once */
} kd_footprint;

static inline const kd_run *kd_footprint_runs(const kd_footprint *f) {
  return f->data ? (const kd_run *)f->data : &f->one;
}
static inline int kd_footprint_exact(const kd_footprint *f) { return f->kind != KD_FP_SPAN; }

/* Builds the footprint of a resolved, in-bounds view of a tensor of rank
 * *tensor_rank and shape tensor_shape, from what kd_view_extent found (so
 * its checks run once): a compact view is one run; a strided one a box
 * when its dimensions map onto the tensor's, else runs, or its interval
 * (SPAN) past max_runs runs. Errors: KD_ERR_OUT_OF_MEMORY. Inline for the
 * compact views most accesses name (every access of every node comes
 * here), which do not read the tensor's rank and shape (a pointer to it,
 * so that its cache line is not loaded: on a large graph it missed, four
 * times a node); kd_footprint_build_strided does the rest. */
kd_status kd_footprint_build_strided(const kd_view *v, const kd_extent *e, const int *tensor_rank,
                                     const int64_t *tensor_shape, uint32_t max_runs, kd_footprint *out,
                                     const char *op);
static inline kd_status kd_footprint_build(const kd_view *v, const kd_extent *e, const int *tensor_rank,
                                           const int64_t *tensor_shape, uint32_t max_runs, kd_footprint *out,
                                           const char *op) {
  if (e->elements && !e->compact)
    return kd_footprint_build_strided(v, e, tensor_rank, tensor_shape, max_runs, out, op);
  /* Not memset: this runs for every access of every node. */
  out->data = NULL;
  out->kind = KD_FP_RUNS;
  out->revisits = 0;
  out->one.lo = v->offset;
  out->one.hi = e->elements ? e->last + 1 : v->offset;
  out->count = e->elements != 0;
  return KD_OK;
}
/* Runs only (no box): for views that are no box, and for the tests that
 * compare the two. */
kd_status kd_footprint_build_runs(const kd_view *v, const kd_extent *e, uint32_t max_runs, kd_footprint *out,
                                  const char *op);
void kd_footprint_free(kd_footprint *f);

/* 1 when the view (of numel elements, footprint fp) names each element at
 * most once, as a write must: exact for runs and boxes, else from its
 * strides (sorted, each at least the extent of the dimensions below it),
 * which can refuse a view that does not revisit but is never wrong in
 * accepting one. */
int kd_view_distinct(const kd_view *v, int64_t numel, const kd_footprint *fp);

/* The general cases of the two tests below. */
int kd_footprint_overlap_any(const kd_footprint *a, const kd_footprint *b);
int kd_footprint_covers_any(const kd_footprint *outer, const kd_footprint *inner);

/* 1 when some element is in both (SPAN: when the intervals meet). One run
 * each is the common case: inline. */
static inline int kd_footprint_overlap(const kd_footprint *a, const kd_footprint *b) {
  if (!(a->one.lo < b->one.hi && b->one.lo < a->one.hi) || !a->count || !b->count) return 0;
  if (a->count == 1 && b->count == 1 && a->kind == KD_FP_RUNS && b->kind == KD_FP_RUNS) return 1;
  return kd_footprint_overlap_any(a, b);
}

/* 1 when every element of inner is in outer (an inexact outer covers
 * nothing; an inexact inner is covered when its whole interval is). */
static inline int kd_footprint_covers(const kd_footprint *outer, const kd_footprint *inner) {
  if (outer->kind == KD_FP_SPAN || !outer->count || !inner->count) return 0;
  if (inner->one.lo < outer->one.lo || inner->one.hi > outer->one.hi) return 0;
  if (outer->count == 1 && outer->kind == KD_FP_RUNS) return 1; /* one run holding inner's interval */
  return kd_footprint_covers_any(outer, inner);
}

/* A run of elements of f, near its middle (the middle column of a box, or
 * element where the tensor's first dimension is strided): what a
 * shifted view of the same region still meets. 0 for SPAN, whose
 * elements are not known, or an empty footprint. */
int kd_footprint_witness(const kd_footprint *f, kd_run *out);

/* 1 when f meets the run r (SPAN: its interval does). */
int kd_footprint_meets(const kd_footprint *f, kd_run r);

/* Elements of box (numbers b, rank r) whose index is below x: O(r). */
int64_t kd_box_count_below(const int64_t *b, int r, int64_t x);
/* Elements of the box. */
int64_t kd_box_elements(const int64_t *b, int r);

#endif
