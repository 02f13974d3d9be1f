/* Element footprints of views: exact run lists, or a bounding interval. */
#include <stdlib.h>
#include <string.h>

#include "cuda/status_internal.h"
#include "graph/footprint.h"

static int cmp_run(const void *x, const void *y) {
  const kd_run *a = x, *b = y;
  return a->lo < b->lo ? -1 : a->lo > b->lo;
}

kd_status kd_footprint_build(const kd_view *v, const kd_extent *e, uint32_t max_runs, kd_footprint *out,
                             const char *op) {
  /* Not memset: this runs for every access of every node. */
  out->runs = NULL;
  out->count = 0;
  out->exact = 1;
  if (e->elements == 0) return KD_OK; /* touches nothing */
  if (e->compact) { /* one run, the common case: no walk over the dimensions */
    out->one.lo = v->offset;
    out->one.hi = v->offset + e->elements;
    out->count = 1;
    return KD_OK;
  }
  /* Leading dimensions that are contiguous form one run per outer index
   * (more than one: the view is not compact). */
  int inner = 0;
  int64_t run = 1;
  while (inner < v->rank && (v->shape[inner] == 1 || v->strides[inner] == run)) run *= v->shape[inner++];
  int64_t outer = e->elements / run;
  if (outer > (int64_t)max_runs) { /* too many runs: the view's interval, inexact */
    out->one.lo = v->offset;
    out->one.hi = e->last + 1;
    out->count = 1;
    out->exact = 0;
    return KD_OK;
  }
  out->runs = malloc((size_t)outer * sizeof *out->runs);
  if (!out->runs) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for a footprint", op);
  int64_t idx[KD_MAX_RANK] = {0};
  for (int64_t r = 0; r < outer; ++r) {
    int64_t base = v->offset;
    for (int d = inner; d < v->rank; ++d) base += idx[d] * v->strides[d];
    out->runs[r].lo = base;
    out->runs[r].hi = base + run;
    for (int d = inner; d < v->rank; ++d) { /* next outer index, column-major */
      if (++idx[d] < v->shape[d]) break;
      idx[d] = 0;
    }
  }
  qsort(out->runs, (size_t)outer, sizeof *out->runs, cmp_run);
  /* Merge overlapping or adjacent runs (a view may revisit elements). */
  uint32_t n = 0;
  for (int64_t r = 0; r < outer; ++r) {
    if (n && out->runs[r].lo <= out->runs[n - 1].hi) {
      if (out->runs[r].hi > out->runs[n - 1].hi) out->runs[n - 1].hi = out->runs[r].hi;
    } else {
      out->runs[n++] = out->runs[r];
    }
  }
  out->count = n;
  return KD_OK;
}

void kd_footprint_free(kd_footprint *f) {
  free(f->runs);
  memset(f, 0, sizeof *f);
}

int kd_footprint_overlap_runs(const kd_footprint *fa, const kd_footprint *fb) {
  const kd_run *a = kd_footprint_runs(fa), *b = kd_footprint_runs(fb);
  uint32_t i = 0, j = 0;
  while (i < fa->count && j < fb->count) {
    if (a[i].hi <= b[j].lo) ++i;
    else if (b[j].hi <= a[i].lo) ++j;
    else return 1;
  }
  return 0;
}

int kd_footprint_covers_runs(const kd_footprint *outer, const kd_footprint *inner) {
  const kd_run *o = kd_footprint_runs(outer), *in = kd_footprint_runs(inner);
  uint32_t j = 0;
  for (uint32_t i = 0; i < inner->count; ++i) {
    /* Runs are merged, so one outer run must hold the whole inner run. */
    while (j < outer->count && o[j].hi <= in[i].lo) ++j;
    if (j == outer->count || o[j].lo > in[i].lo || o[j].hi < in[i].hi) return 0;
  }
  return 1;
}

int kd_view_distinct(const kd_view *v, int64_t numel, const kd_footprint *fp) {
  if (numel <= 1) return 1;
  if (fp->exact) {
    const kd_run *r = kd_footprint_runs(fp);
    int64_t covered = 0;
    for (uint32_t i = 0; i < fp->count; ++i) covered += r[i].hi - r[i].lo;
    return covered == numel;
  }
  /* The dimensions longer than 1, by stride (insertion sort: rank <= 8). */
  int dim[KD_MAX_RANK], n = 0;
  for (int i = 0; i < v->rank; ++i) {
    if (v->shape[i] <= 1) continue;
    int j = n++;
    for (; j > 0 && v->strides[dim[j - 1]] > v->strides[i]; --j) dim[j] = dim[j - 1];
    dim[j] = i;
  }
  int64_t extent = 1; /* elements spanned by the dimensions so far */
  for (int k = 0; k < n; ++k) {
    const int64_t stride = v->strides[dim[k]];
    if (stride < extent) return 0;
    extent += (v->shape[dim[k]] - 1) * stride; /* in bounds, so no overflow */
  }
  return 1;
}
