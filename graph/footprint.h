/* Internal: the set of elements a view touches, as sorted disjoint runs of
 * element indices, for overlap and coverage tests between accesses. */
#ifndef KDAG_GRAPH_FOOTPRINT_H
#define KDAG_GRAPH_FOOTPRINT_H

#include <stdint.h>

#include "graph/extent.h"

typedef struct kd_run {
  int64_t lo, hi; /* elements [lo, hi) */
} kd_run;

typedef struct kd_footprint {
  kd_run *runs;    /* sorted, disjoint, non-adjacent; malloc'd, or NULL when
                      the one run is stored inline (the common case) */
  kd_run one;
  uint32_t count;
  int exact;       /* 0: one run spanning the view's interval (too many runs) */
} kd_footprint;

static inline const kd_run *kd_footprint_runs(const kd_footprint *f) { return f->runs ? f->runs : &f->one; }

/* Builds the footprint of a resolved, in-bounds view from what
 * kd_view_extent found (so its checks run once). Views of more than
 * max_runs runs get their bounding interval (exact = 0).
 * Errors: KD_ERR_OUT_OF_MEMORY. */
kd_status kd_footprint_build(const kd_view *v, const kd_extent *e, uint32_t max_runs, kd_footprint *out,
                             const char *op);
void kd_footprint_free(kd_footprint *f);

/* 1 when the view (of numel elements, footprint fp) names each element at
 * most once, as a write must: exact from the runs (they merge what the
 * view revisits), else from its strides (sorted, each at least the extent
 * of the dimensions below it), which can refuse a view that does not
 * revisit but is never wrong in accepting one. */
int kd_view_distinct(const kd_view *v, int64_t numel, const kd_footprint *fp);

int kd_footprint_overlap_runs(const kd_footprint *a, const kd_footprint *b);
int kd_footprint_covers_runs(const kd_footprint *outer, const kd_footprint *inner);

/* 1 when some element is in both. One run each is the common case: inline. */
static inline int kd_footprint_overlap(const kd_footprint *a, const kd_footprint *b) {
  if (a->count == 1 && b->count == 1) {
    const kd_run *x = kd_footprint_runs(a), *y = kd_footprint_runs(b);
    return x->lo < y->hi && y->lo < x->hi;
  }
  return kd_footprint_overlap_runs(a, b);
}

/* 1 when every element of inner is in outer (an inexact outer covers only
 * what its interval provably holds: nothing unless it is exact). */
static inline int kd_footprint_covers(const kd_footprint *outer, const kd_footprint *inner) {
  if (!outer->exact) return 0;
  if (outer->count == 1 && inner->count == 1) {
    const kd_run *o = kd_footprint_runs(outer), *in = kd_footprint_runs(inner);
    return o->lo <= in->lo && in->hi <= o->hi;
  }
  return kd_footprint_covers_runs(outer, inner);
}

#endif
