/* SPDX-License-Identifier: Apache-2.0 */
/* Element footprints of views: runs, boxes of arithmetic progressions, or a
 * bounding interval. */
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "graph/footprint.h"

/* ---- one dimension: the progression first + step * t, 0 <= t < n ------ */

typedef struct kd_ap {
  int64_t first, step, n; /* n >= 1; step >= 1 */
} kd_ap;

static inline int64_t ap_last(kd_ap a) { return a.first + a.step * (a.n - 1); }

static inline int ap_member(kd_ap a, int64_t x) {
  return x >= a.first && x <= ap_last(a) && (a.step == 1 || (x - a.first) % a.step == 0);
}

/* Values of a below x. */
static inline int64_t ap_below(kd_ap a, int64_t x) {
  if (x <= a.first) return 0;
  int64_t k = a.step == 1 ? x - a.first : (x - a.first + a.step - 1) / a.step;
  return k < a.n ? k : a.n;
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* The inverse of a modulo m (gcd(a, m) = 1, m >= 1). */
static int64_t inverse_mod(int64_t a, int64_t m) {
  int64_t r0 = m, r1 = a % m, t0 = 0, t1 = 1;
  while (r1) {
    int64_t q = r0 / r1, r = r0 - q * r1, t = t0 - q * t1;
    r0 = r1, r1 = r;
    t0 = t1, t1 = t;
  }
  return t0 < 0 ? t0 + m : t0;
}

static int ap_overlap(kd_ap a, kd_ap b) {
  int64_t lo = a.first > b.first ? a.first : b.first;
  int64_t la = ap_last(a), lb = ap_last(b), hi = la < lb ? la : lb;
  if (lo > hi) return 0;
  if (a.n == 1) return ap_member(b, a.first);
  if (b.n == 1) return ap_member(a, b.first);
  if (a.step == b.step) return (a.first - b.first) % a.step == 0;
  /* first_a + step_a t = first_b + step_b u: solvable when gcd divides the
   * difference; the solutions repeat every lcm. The smallest at or after
   * lo must not pass hi. */
  int64_t g = gcd64(a.step, b.step), diff = b.first - a.first;
  if (diff % g) return 0;
  int64_t sb = b.step / g;
  __int128 t = (__int128)((diff / g) % sb + sb) % sb * inverse_mod((a.step / g) % sb, sb) % sb;
  __int128 x = (__int128)a.first + (__int128)a.step * t, period = (__int128)a.step * sb;
  if (x < lo) x += (lo - x + period - 1) / period * period;
  return x <= hi;
}

static int ap_covers(kd_ap outer, kd_ap inner) {
  if (inner.n == 1) return ap_member(outer, inner.first);
  if (outer.n == 1) return 0;
  return inner.step % outer.step == 0 && (inner.first - outer.first) % outer.step == 0 &&
         inner.first >= outer.first && ap_last(inner) <= ap_last(outer);
}

static inline kd_ap box_ap(const int64_t *b, int r, int d) {
  kd_ap a = {KD_BOX_LO(b, r)[d], KD_BOX_STEP(b, r)[d], KD_BOX_N(b, r)[d]};
  return a;
}

/* ---- boxes ------------------------------------------------------------- */

int64_t kd_box_elements(const int64_t *b, int r) {
  int64_t n = 1;
  for (int d = 0; d < r; ++d) n *= KD_BOX_N(b, r)[d];
  return n;
}

int64_t kd_box_count_below(const int64_t *b, int r, int64_t x) {
  const int64_t *ext = KD_BOX_EXT(b, r);
  if (x <= 0) return 0;
  /* x's index in each dimension, most significant (last) first, and the
   * elements of the box in the dimensions below each. */
  int64_t coord[KD_MAX_RANK], inner[KD_MAX_RANK], size = 1, rest = x;
  for (int d = 0; d < r; ++d) {
    inner[d] = size;
    size *= KD_BOX_N(b, r)[d];
    if (d < r - 1) {
      coord[d] = rest % ext[d];
      rest /= ext[d];
    } else {
      coord[d] = rest;
    }
  }
  /* Tuples of the box below x: those smaller in the first dimension (from
   * the top) where they differ from x; the count stops at the first
   * dimension whose index x has is not in the box. */
  int64_t below = 0;
  for (int d = r - 1; d >= 0; --d) {
    kd_ap a = box_ap(b, r, d);
    below += ap_below(a, coord[d]) * inner[d];
    if (!ap_member(a, coord[d])) return below;
  }
  return below; /* x itself is in the box: not below it */
}

static int box_overlap(const int64_t *a, const int64_t *b, int r) {
  for (int d = 0; d < r; ++d)
    if (!ap_overlap(box_ap(a, r, d), box_ap(b, r, d))) return 0;
  return 1;
}

static int box_covers(const int64_t *outer, const int64_t *inner, int r) {
  for (int d = 0; d < r; ++d)
    if (!ap_covers(box_ap(outer, r, d), box_ap(inner, r, d))) return 0;
  return 1;
}

/* Elements of the box in [lo, hi). */
static inline int64_t box_count_in(const int64_t *b, int r, int64_t lo, int64_t hi) {
  return kd_box_count_below(b, r, hi) - kd_box_count_below(b, r, lo);
}

/* The view as a box over the tensor's dimensions: each of its dimensions
 * longer than 1 must step along one tensor dimension (its stride a
 * multiple of that dimension's) without wrapping into the next, and no two
 * along the same one. 0 when it is no box. */
static int box_of(const kd_view *v, int r, const int64_t *shape, int64_t *b, int *revisits) {
  int64_t g[KD_MAX_RANK], x = v->offset;
  int64_t *ext = KD_BOX_EXT(b, r), *lo = KD_BOX_LO(b, r), *step = KD_BOX_STEP(b, r), *n = KD_BOX_N(b, r);
  for (int d = 0; d < r; ++d) {
    g[d] = d ? g[d - 1] * shape[d - 1] : 1;
    ext[d] = shape[d];
  }
  for (int d = r - 1; d >= 0; --d) { /* the offset's index per dimension */
    lo[d] = x / g[d];
    x -= lo[d] * g[d];
    step[d] = n[d] = 1;
  }
  *revisits = 0;
  for (int k = 0; k < v->rank; ++k) {
    int64_t len = v->shape[k], w = v->strides[k];
    if (len == 1) continue;
    if (w == 0) { /* the same elements again */
      *revisits = 1;
      continue;
    }
    /* The highest dimension whose stride divides w (the only one along
     * which a step of w can stay inside the dimension). */
    int d = r - 1;
    while (d >= 0 && (shape[d] == 1 || g[d] > w || w % g[d])) --d;
    if (d < 0 || n[d] != 1) return 0;
    int64_t s = w / g[d];
    if (s >= shape[d] || lo[d] + s * (len - 1) >= shape[d]) return 0; /* wraps into the next dimension */
    step[d] = s;
    n[d] = len;
  }
  return 1;
}

/* ---- building ----------------------------------------------------------- */

static int cmp_run(const void *x, const void *y) {
  const kd_run *a = x, *b = y;
  return a->lo < b->lo ? -1 : a->lo > b->lo;
}

kd_status kd_footprint_build_runs(const kd_view *v, const kd_extent *e, uint32_t max_runs, kd_footprint *out,
                                  const char *op) {
  /* Not memset: this runs for every access of every node. */
  out->data = NULL;
  out->count = 0;
  out->kind = KD_FP_RUNS;
  out->revisits = 0;
  out->one.lo = out->one.hi = v->offset;
  if (e->elements == 0) return KD_OK; /* touches nothing */
  out->one.hi = e->last + 1;
  out->count = 1;
  if (e->compact) return KD_OK; /* one run, the common case: no walk over the dimensions */
  /* Leading dimensions that are contiguous form one run per outer index
   * (more than one: the view is not compact). */
  int inner = 0;
  int64_t run = 1;
  while (inner < v->rank && (v->shape[inner] == 1 || v->strides[inner] == run)) run *= v->shape[inner++];
  int64_t outer = e->elements / run;
  if (outer > (int64_t)max_runs) { /* too many runs: the view's interval, inexact */
    out->kind = KD_FP_SPAN;
    return KD_OK;
  }
  kd_run *runs = malloc(((size_t)outer + KD_FP_SPARE_RUNS) * sizeof *runs); /* and witnesses (footprint.h) */
  if (!runs) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for a footprint", op);
  int64_t idx[KD_MAX_RANK] = {0};
  for (int64_t r = 0; r < outer; ++r) {
    int64_t base = v->offset;
    for (int d = inner; d < v->rank; ++d) base += idx[d] * v->strides[d];
    runs[r].lo = base;
    runs[r].hi = base + run;
    for (int d = inner; d < v->rank; ++d) { /* next outer index, column-major */
      if (++idx[d] < v->shape[d]) break;
      idx[d] = 0;
    }
  }
  qsort(runs, (size_t)outer, sizeof *runs, cmp_run);
  /* Merge overlapping or adjacent runs (a view may revisit elements). */
  uint32_t n = 0;
  for (int64_t r = 0; r < outer; ++r) {
    if (n && runs[r].lo <= runs[n - 1].hi) {
      if (runs[r].hi > runs[n - 1].hi) runs[n - 1].hi = runs[r].hi;
    } else {
      runs[n++] = runs[r];
    }
  }
  if (n == 1) { /* a view that revisits one run: inline */
    free(runs);
    return KD_OK;
  }
  out->data = runs;
  out->count = n;
  return KD_OK;
}

kd_status kd_footprint_build_strided(const kd_view *v, const kd_extent *e, const int *rank,
                                     const int64_t *tensor_shape, uint32_t max_runs, kd_footprint *out,
                                     const char *op) {
  int tensor_rank = *rank;
  if (tensor_rank == 0) return kd_footprint_build_runs(v, e, max_runs, out, op);
  int64_t b[4 * KD_MAX_RANK];
  int revisits;
  if (!box_of(v, tensor_rank, tensor_shape, b, &revisits)) return kd_footprint_build_runs(v, e, max_runs, out, op);
  size_t bytes = 4 * (size_t)tensor_rank * sizeof *b;
  out->data = malloc(bytes + KD_FP_SPARE_RUNS * sizeof(kd_run)); /* and witnesses (footprint.h) */
  if (!out->data) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for a footprint", op);
  memcpy(out->data, b, bytes);
  out->kind = KD_FP_BOX;
  out->count = (uint32_t)tensor_rank;
  out->revisits = (uint8_t)revisits;
  out->one.lo = v->offset;
  out->one.hi = e->last + 1;
  return KD_OK;
}

void kd_footprint_free(kd_footprint *f) {
  free(f->data);
  memset(f, 0, sizeof *f);
}

/* ---- tests -------------------------------------------------------------- */

static int runs_overlap(const kd_footprint *fa, const kd_footprint *fb) {
  const kd_run *a = kd_footprint_runs(fa), *b = kd_footprint_runs(fb);
  uint32_t i = 0, j = 0;
  while (i < fa->count && j < fb->count) {
    if (a[i].hi <= b[j].lo) ++i;
    else if (b[j].hi <= a[i].lo) ++j;
    else return 1;
  }
  return 0;
}

static int runs_cover(const kd_footprint *outer, const kd_footprint *inner) {
  const kd_run *o = kd_footprint_runs(outer), *in = kd_footprint_runs(inner);
  uint32_t j = 0;
  for (uint32_t i = 0; i < inner->count; ++i) {
    /* Runs are merged, so one outer run must hold the whole inner run. */
    while (j < outer->count && o[j].hi <= in[i].lo) ++j;
    if (j == outer->count || o[j].lo > in[i].lo || o[j].hi < in[i].hi) return 0;
  }
  return 1;
}

/* A footprint's runs, or its interval (SPAN) as one run. */
static const kd_run *runs_of(const kd_footprint *f, uint32_t *count) {
  *count = f->kind == KD_FP_SPAN ? 1 : f->count;
  return f->kind == KD_FP_SPAN ? &f->one : kd_footprint_runs(f);
}

int kd_footprint_overlap_any(const kd_footprint *a, const kd_footprint *b) {
  if (a->kind == KD_FP_SPAN || b->kind == KD_FP_SPAN) {
    /* An interval meets what it may hold: conservative, unless the other
     * side is exact and misses the interval entirely. */
    const kd_footprint *exact = a->kind == KD_FP_SPAN ? b : a, *span = a->kind == KD_FP_SPAN ? a : b;
    if (exact->kind == KD_FP_SPAN) return 1;
    kd_footprint f = {NULL, span->one, 1, KD_FP_RUNS, 0};
    return kd_footprint_overlap_any(exact, &f);
  }
  if (a->kind == KD_FP_BOX && b->kind == KD_FP_BOX) {
    if (a->count != b->count) return 1; /* boxes of one tensor share its rank; never otherwise */
    return box_overlap(a->data, b->data, (int)a->count);
  }
  if (a->kind == KD_FP_BOX || b->kind == KD_FP_BOX) {
    const kd_footprint *box = a->kind == KD_FP_BOX ? a : b, *list = a->kind == KD_FP_BOX ? b : a;
    uint32_t n;
    const kd_run *r = runs_of(list, &n);
    for (uint32_t i = 0; i < n; ++i)
      if (r[i].hi > box->one.lo && r[i].lo < box->one.hi &&
          box_count_in(box->data, (int)box->count, r[i].lo, r[i].hi) > 0)
        return 1;
    return 0;
  }
  return runs_overlap(a, b);
}

int kd_footprint_covers_any(const kd_footprint *outer, const kd_footprint *inner) {
  if (outer->kind == KD_FP_BOX && inner->kind == KD_FP_BOX) {
    if (outer->count != inner->count) return 0;
    return box_covers(outer->data, inner->data, (int)outer->count);
  }
  if (outer->kind == KD_FP_BOX) { /* every run of inner (or its interval) inside the box */
    uint32_t n;
    const kd_run *r = runs_of(inner, &n);
    for (uint32_t i = 0; i < n; ++i)
      if (box_count_in(outer->data, (int)outer->count, r[i].lo, r[i].hi) != r[i].hi - r[i].lo) return 0;
    return 1;
  }
  if (inner->kind == KD_FP_BOX) { /* the runs hold every element of the box: they are disjoint */
    const kd_run *r = kd_footprint_runs(outer);
    int64_t held = 0;
    for (uint32_t i = 0; i < outer->count; ++i) held += box_count_in(inner->data, (int)inner->count, r[i].lo, r[i].hi);
    return held == kd_box_elements(inner->data, (int)inner->count);
  }
  if (inner->kind == KD_FP_SPAN) {
    kd_footprint f = {NULL, inner->one, 1, KD_FP_RUNS, 0};
    return runs_cover(outer, &f);
  }
  return runs_cover(outer, inner);
}

int kd_view_distinct(const kd_view *v, int64_t numel, const kd_footprint *fp) {
  if (numel <= 1) return 1;
  if (fp->kind == KD_FP_BOX) return !fp->revisits; /* each dimension steps along its own tensor dimension */
  if (fp->kind == KD_FP_RUNS) {
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

int kd_footprint_witness(const kd_footprint *f, kd_run *out) {
  if (!f->count || f->kind == KD_FP_SPAN) return 0;
  if (f->kind == KD_FP_RUNS) {
    *out = kd_footprint_runs(f)[f->count / 2];
    return 1;
  }
  const int64_t *b = f->data;
  int r = (int)f->count;
  int64_t at = 0, g = 1;
  for (int d = 0; d < r; ++d) {
    int64_t i = d ? KD_BOX_LO(b, r)[d] + KD_BOX_STEP(b, r)[d] * (KD_BOX_N(b, r)[d] / 2) : KD_BOX_LO(b, r)[0];
    at += i * g;
    g *= KD_BOX_EXT(b, r)[d];
  }
  out->lo = at;
  out->hi = at + (KD_BOX_STEP(b, r)[0] == 1 ? KD_BOX_N(b, r)[0] : 1);
  return 1;
}

int kd_footprint_meets(const kd_footprint *f, kd_run r) {
  kd_footprint run = {NULL, r, 1, KD_FP_RUNS, 0};
  return kd_footprint_overlap(f, &run);
}
