/* SPDX-License-Identifier: Apache-2.0 */
/* Seeded random graphs over pools of tensors and views, shared by the host
 * property test and the GPU differential tests. rg_build: i32 tensors,
 * rank-1 views (ranges, strided). rg_build_mixed: also f32 tensors, rank-2
 * views, in-place (KD_INOUT) nodes, transposes and explicit edges. Each
 * added node can also be applied to a reference copy with the host
 * implementations, in insertion order. */
#ifndef KDAG_TESTS_RANDOM_GRAPH_H
#define KDAG_TESTS_RANDOM_GRAPH_H

#include <math.h>

#include "kdag_test.h"
#include "kernels/host.h"

#define RG_POOL 4
#define RG_LEN 64
#define RG_MAX_NODES 14
#define RG_LONG_NODES 256 /* rg_build_mixed's longest graphs: sets grow past a scan */

typedef struct rg_rng { uint64_t s; } rg_rng;

static inline uint32_t rg_next(rg_rng *r) {
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return (uint32_t)(r->s >> 16);
}

static inline kd_view rg_view(rg_rng *r, kd_tensor t, int64_t n) {
  int64_t stride = 1 + rg_next(r) % 3;
  while ((n - 1) * stride >= RG_LEN) --stride;
  int64_t room = RG_LEN - ((n - 1) * stride + 1);
  kd_view v = {.tensor = t, .rank = 1, .offset = room ? rg_next(r) % (room + 1) : 0, .shape = {n}, .strides = {stride}};
  return v;
}

static inline kd_kview rg_kview_of(void *base, size_t esize, const kd_view *v) {
  kd_kview k;
  memset(&k, 0, sizeof k);
  k.base = (unsigned long long)(uintptr_t)((char *)base + (size_t)v->offset * esize);
  k.rank = v->rank;
  for (int i = 0; i < v->rank; ++i) {
    k.shape[i] = v->shape[i];
    k.strides[i] = v->strides[i];
  }
  return k;
}

static inline kd_kview rg_kview(int32_t *base, const kd_view *v) { return rg_kview_of(base, 4, v); }

/* A rows x cols view (each 1..5) inside a tensor of RG_LEN elements: column
 * major or row major, with a random gap between columns (rows), so some
 * are strided and some write views overlap others of the same tensor only
 * in their bounding intervals. */
static inline kd_view rg_view2(rg_rng *r, kd_tensor t, int64_t rows, int64_t cols) {
  int64_t s0, s1;
  if (rg_next(r) % 2) {
    s0 = 1 + rg_next(r) % 2;
    s1 = rows * s0 + rg_next(r) % 2;
  } else {
    s1 = 1 + rg_next(r) % 2;
    s0 = cols * s1 + rg_next(r) % 2;
  }
  int64_t room = RG_LEN - ((rows - 1) * s0 + (cols - 1) * s1 + 1); /* at least 11 */
  kd_view v = {.tensor = t, .rank = 2, .offset = rg_next(r) % (room + 1), .shape = {rows, cols}, .strides = {s0, s1}};
  return v;
}

/* The tensor a node writes, drawn from r; never pool index avoid (-1:
 * any). */
static inline int rg_written(rg_rng *r, int avoid) {
  int a = (int)(rg_next(r) % RG_POOL);
  return a == avoid ? (a + 1) % RG_POOL : a;
}

/* One node of the i32 kinds (op 0..3: fill, copy, add, sum over rank-1
 * views of t) that writes no tensor of pool index avoid (-1: any), applied
 * to ref too when accepted and ref is non-NULL. KD_OK, or KD_ERR_ALIASING
 * when refused. */
static inline kd_status rg_int_node(kd_graph *g, kd_tensor *t, rg_rng *r, int32_t (*ref)[RG_LEN], int op,
                                    int avoid, kd_node *id) {
  int64_t n = 1 + rg_next(r) % 24;
  int a = rg_written(r, avoid), b = (int)(rg_next(r) % RG_POOL), c = (int)(rg_next(r) % RG_POOL);
  kd_view va = rg_view(r, t[a], n), vb = rg_view(r, t[b], n), vc = rg_view(r, t[c], n);
  int32_t value = (int32_t)(rg_next(r) % 100);
  kd_status st;
  if (op == 0) st = kd_graph_op_fill(g, "fill", va, &value, id);
  else if (op == 1) st = kd_graph_op_copy(g, "copy", va, vb, id);
  else if (op == 2) st = kd_graph_op_add(g, "add", va, vb, vc, id);
  else {
    va = rg_view(r, t[a], 1);
    st = kd_graph_op_sum(g, "sum", va, vb, id);
  }
  if (st || !ref) return st;
  kd_kpattern p = {{(unsigned long long)(uint32_t)value, 0}};
  if (op == 0) kd_host_fill(4, rg_kview(ref[a], &va), p);
  else if (op == 1) kd_host_copy(4, rg_kview(ref[a], &va), rg_kview(ref[b], &vb));
  else if (op == 2) kd_host_add(KD_K_I32, rg_kview(ref[a], &va), rg_kview(ref[b], &vb), rg_kview(ref[c], &vc));
  else kd_host_sum(KD_K_I32, rg_kview(ref[a], &va), rg_kview(ref[b], &vb));
  return KD_OK;
}

/* Adds up to RG_MAX_NODES random i32 nodes to g over tensors t. With ref
 * non-NULL, applies each accepted node to ref (the sequential
 * interpretation). Returns the number of nodes refused for aliasing. */
static inline int rg_build(kd_graph *g, kd_tensor *t, rg_rng *r, int32_t (*ref)[RG_LEN]) {
  int rejected = 0;
  int count = 1 + (int)(rg_next(r) % RG_MAX_NODES);
  for (int k = 0; k < count; ++k) {
    kd_status st = rg_int_node(g, t, r, ref, (int)(rg_next(r) % 4), -1, NULL);
    if (st == KD_ERR_ALIASING) { /* refused: graph and reference unchanged */
      rejected++;
      continue;
    }
    cr_assert_eq(st, KD_OK, "node %d: %s: %s", k, kd_status_name(st), kd_last_error());
  }
  return rejected;
}

/* Mixed graphs: the i32 kinds, rank-2 copies and transposes, f32 axpy and
 * scale (KD_INOUT accesses), add, copy and sum, and explicit edges. */
typedef struct rg_pools {
  kd_tensor i[RG_POOL], f[RG_POOL]; /* i32 and f32 tensors of RG_LEN elements */
  int32_t (*iref)[RG_LEN];          /* their sequential interpretation, or NULL */
  float (*fref)[RG_LEN];
  double (*dref)[RG_LEN];           /* the f32 tensors' interpretation in f64, or NULL */
  double (*mref)[RG_LEN];           /* the same on magnitudes (|inputs|, |alpha|), or NULL:
                                       what an element's rounding errors scale with */
} rg_pools;

/* Applies float node kind op (6 axpy, 7 scale, 8 add, 9 copy, 10 sum) to
 * arrays of one precision: t KD_K_F32 with floats, KD_K_F64 with doubles. */
static inline void rg_float_op(int op, kd_kdtype t, void *a, void *b, void *c, const kd_view *va, const kd_view *vb,
                               const kd_view *vc, double alpha) {
  size_t es = t == KD_K_F64 ? 8 : 4;
  kd_kview ka = rg_kview_of(a, es, va);
  if (op == 6) kd_host_axpy(t, ka, rg_kview_of(b, es, vb), alpha);
  else if (op == 7) kd_host_scale(t, ka, alpha);
  else if (op == 8) kd_host_add(t, ka, rg_kview_of(b, es, vb), rg_kview_of(c, es, vc));
  else if (op == 9) kd_host_copy(es, ka, rg_kview_of(b, es, vb));
  else kd_host_sum(t, ka, rg_kview_of(b, es, vb));
}

/* Applies an accepted float node to both references the pools have. */
static inline void rg_float_refs(rg_pools *p, int op, int a, int b, int c, const kd_view *va, const kd_view *vb,
                                 const kd_view *vc, double alpha) {
  if (p->fref) rg_float_op(op, KD_K_F32, p->fref[a], p->fref[b], p->fref[c], va, vb, vc, alpha);
  if (p->dref) rg_float_op(op, KD_K_F64, p->dref[a], p->dref[b], p->dref[c], va, vb, vc, alpha);
  if (p->mref) rg_float_op(op, KD_K_F64, p->mref[a], p->mref[b], p->mref[c], va, vb, vc, fabs(alpha));
}

enum { RG_KINDS = 12 };
typedef struct rg_counts {
  uint64_t added[RG_KINDS]; /* accepted nodes (explicit edges) by kind */
  uint64_t rejected;        /* nodes refused for aliasing */
  int (*probe)(const kd_graph *g); /* optional: asked after every accepted node */
  uint64_t probed;          /* the nodes after which probe said 1 */
} rg_counts;

/* Up to max_nodes (at most RG_LONG_NODES) nodes, or exactly max_nodes when
 * it is negative; returns how many were added. */
static inline int rg_build_mixed(kd_graph *g, rg_pools *p, rg_rng *r, rg_counts *counts, int max_nodes) {
  kd_node ids[RG_LONG_NODES];
  int nodes = 0, count = max_nodes < 0 ? -max_nodes : 1 + (int)(rg_next(r) % (uint32_t)max_nodes);
  for (int k = 0; k < count; ++k) {
    /* Sums are drawn three times as often as the rest: they read whole
     * views and write one element, so readers pile up. In the first three
     * quarters of an exact-length (long) graph nothing writes the pools'
     * first tensors, so their readers stay active and some sets grow past
     * a scan (sorted sets, their binary searches); the last quarter's
     * writes then retire and sweep them. */
    int op = (int)(rg_next(r) % (RG_KINDS + 4));
    if (op >= RG_KINDS) op = op % 2 ? 3 : 10;
    int avoid = max_nodes < 0 && k < count * 3 / 4 ? 0 : -1;
    kd_status st;
    kd_node id = 0;
    if (op < 4) {
      st = rg_int_node(g, p->i, r, p->iref, op, avoid, &id);
    } else if (op == 11) { /* an explicit edge, forward: never a cycle */
      if (nodes < 2) continue;
      int from = (int)(rg_next(r) % (uint32_t)(nodes - 1));
      int to = from + 1 + (int)(rg_next(r) % (uint32_t)(nodes - 1 - from));
      KDT_OK(kd_graph_edge(g, ids[from], ids[to]));
      counts->added[op]++;
      continue;
    } else {
      int a = rg_written(r, avoid), b = (int)(rg_next(r) % RG_POOL), c = (int)(rg_next(r) % RG_POOL);
      int64_t rows = 1 + rg_next(r) % 5, cols = 1 + rg_next(r) % 5, n = 1 + rg_next(r) % 24;
      double alpha = ((double)(rg_next(r) % 7) - 3.0) * 0.37; /* not a float: axpy and scale round */
      kd_view va, vb, vc = {0};
      switch (op) {
      case 4: /* i32 rank-2 copy */
        va = rg_view2(r, p->i[a], rows, cols), vb = rg_view2(r, p->i[b], rows, cols);
        st = kd_graph_op_copy(g, "copy2", va, vb, &id);
        if (!st && p->iref) kd_host_copy(4, rg_kview(p->iref[a], &va), rg_kview(p->iref[b], &vb));
        break;
      case 5: /* i32 transpose: dst cols x rows */
        va = rg_view2(r, p->i[a], cols, rows), vb = rg_view2(r, p->i[b], rows, cols);
        st = kd_graph_op_transpose(g, "transpose", va, vb, &id);
        /* dst(j, i) = src(i, j), element by element: not the library's own
         * swapped-view copy (the views cannot overlap: that is refused) */
        for (int64_t i = 0; !st && p->iref && i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j)
            p->iref[a][va.offset + j * va.strides[0] + i * va.strides[1]] =
                p->iref[b][vb.offset + i * vb.strides[0] + j * vb.strides[1]];
        break;
      case 6: /* f32 y += alpha x: y is KD_INOUT */
        va = rg_view(r, p->f[a], n), vb = rg_view(r, p->f[b], n);
        st = kd_graph_op_axpy(g, "axpy", va, vb, alpha, &id);
        break;
      case 7: /* f32 y *= alpha, in place */
        va = rg_view2(r, p->f[a], rows, cols);
        st = kd_graph_op_scale(g, "scale", va, alpha, &id);
        break;
      case 8: /* f32 rank-2 add */
        va = rg_view2(r, p->f[a], rows, cols), vb = rg_view2(r, p->f[b], rows, cols);
        vc = rg_view2(r, p->f[c], rows, cols);
        st = kd_graph_op_add(g, "fadd", va, vb, vc, &id);
        break;
      case 9: /* f32 copy, rank 1 */
        va = rg_view(r, p->f[a], n), vb = rg_view(r, p->f[b], n);
        st = kd_graph_op_copy(g, "fcopy", va, vb, &id);
        break;
      default: /* 10: f32 sum into one element */
        va = rg_view(r, p->f[a], 1), vb = rg_view2(r, p->f[b], rows, cols);
        st = kd_graph_op_sum(g, "fsum", va, vb, &id);
        break;
      }
      if (!st && op >= 6) rg_float_refs(p, op, a, b, c, &va, &vb, &vc, alpha);
    }
    if (st == KD_ERR_ALIASING) { /* refused: graph and reference unchanged */
      counts->rejected++;
      continue;
    }
    cr_assert_eq(st, KD_OK, "node %d (kind %d): %s: %s", k, op, kd_status_name(st), kd_last_error());
    counts->added[op]++;
    ids[nodes++] = id;
    if (counts->probe) counts->probed += (uint64_t)counts->probe(g);
  }
  return nodes;
}

/* A mixed graph's data: the pools' contents, their interpretations and
 * what a run sank. */
typedef struct rg_data {
  int32_t iref[RG_POOL][RG_LEN], igot[RG_POOL][RG_LEN];
  float fref[RG_POOL][RG_LEN], fgot[RG_POOL][RG_LEN];
  double dref[RG_POOL][RG_LEN], mref[RG_POOL][RG_LEN]; /* f64, and f64 on magnitudes */
} rg_data;

/* Draws the pools' first contents from r into every interpretation: i32 in
 * [-500, 500), f32 reals of up to 100 in magnitude, rounded to f32. */
static inline void rg_data_init(rg_data *d, rg_rng *r) {
  for (int i = 0; i < RG_POOL; ++i)
    for (int j = 0; j < RG_LEN; ++j) {
      d->iref[i][j] = (int32_t)(rg_next(r) % 1000) - 500;
      d->fref[i][j] = (float)((double)((int32_t)(rg_next(r) % 2000001) - 1000000) / 9973.0);
      d->dref[i][j] = d->fref[i][j];
      d->mref[i][j] = fabs(d->dref[i][j]);
    }
}

/* Fresh tensors on s holding d's references as they are. */
static inline void rg_pools_make(kd_session *s, const rg_data *d, rg_pools *p) {
  memset(p, 0, sizeof *p);
  kd_tensor_desc di = {.dtype = KD_I32, .rank = 1, .shape = {RG_LEN}};
  kd_tensor_desc df = {.dtype = KD_F32, .rank = 1, .shape = {RG_LEN}};
  for (int i = 0; i < RG_POOL; ++i) {
    KDT_OK(kd_tensor_from_host(s, &di, d->iref[i], sizeof d->iref[i], &p->i[i]));
    KDT_OK(kd_tensor_from_host(s, &df, d->fref[i], sizeof d->fref[i], &p->f[i]));
  }
}

/* Sinks every tensor of p into d->igot and d->fgot (sinks: 2 * RG_POOL). */
static inline void rg_pools_sink(kd_graph *g, const rg_pools *p, rg_data *d, kd_sink **sinks) {
  for (int i = 0; i < RG_POOL; ++i) {
    KDT_OK(kd_graph_sink(g, "i", p->i[i], d->igot[i], sizeof d->igot[i], &sinks[2 * i]));
    KDT_OK(kd_graph_sink(g, "f", p->f[i], d->fgot[i], sizeof d->fgot[i], &sinks[2 * i + 1]));
  }
}

static inline void rg_pools_release(kd_session *s, const rg_pools *p) {
  for (int i = 0; i < RG_POOL; ++i) {
    KDT_OK(kd_tensor_release(s, p->i[i]));
    KDT_OK(kd_tensor_release(s, p->f[i]));
  }
}

/* Runs one mixed graph on s: fresh tensors holding d's references as they
 * are, the graph drawn from r (up to max_nodes, see rg_build_mixed),
 * submitted, the tensors released while in flight (the submission keeps
 * them), every tensor sunk into d->igot and d->fgot. With interpret, each
 * accepted node is applied to d's references too. Returns the graph's
 * stats. */
static inline kd_graph_stats rg_run_mixed(kd_session *s, rg_data *d, rg_rng *r, int max_nodes, int interpret,
                                          rg_counts *counts) {
  rg_pools p;
  rg_pools_make(s, d, &p);
  if (interpret) p.iref = d->iref, p.fref = d->fref, p.dref = d->dref, p.mref = d->mref;
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  rg_build_mixed(g, &p, r, counts, max_nodes);
  kd_sink *sinks[2 * RG_POOL];
  rg_pools_sink(g, &p, d, sinks);
  kd_graph_stats st;
  KDT_OK(kd_graph_stats_get(g, &st));
  KDT_OK(kd_graph_submit(g, NULL));
  rg_pools_release(s, &p); /* in flight: the submission keeps them */
  for (int i = 0; i < 2 * RG_POOL; ++i) KDT_OK(kd_sink_wait(sinks[i]));
  kd_graph_destroy(g);
  return st;
}

/* Loops against their unrolling: a graph of random nodes, then a WHILE
 * loop of `trips` trips (a countdown it writes itself) whose body is
 * random nodes (and, with nested, an IF inside it on a flag that is 1,
 * around more random nodes), then random nodes again; or the same with
 * the body declared trips times in a row and no loop (unrolled). Each part
 * is drawn from its own copy of r, so both graphs hold the same nodes.
 * Runs it on s over fresh tensors holding d's references and sinks every
 * tensor into d->igot and d->fgot. */
static inline void rg_run_looped(kd_session *s, rg_data *d, rg_rng r, int trips, int nested, int unrolled,
                                 rg_counts *counts) {
  rg_pools p;
  rg_pools_make(s, d, &p);
  kd_tensor_desc one = {.dtype = KD_I32, .rank = 1, .shape = {1}};
  int32_t m1 = -1, yes = 1;
  kd_tensor c, tmp, minus1, flag;
  KDT_OK(kd_tensor_from_host(s, &one, &trips, sizeof trips, &c));
  KDT_OK(kd_tensor_create(s, &one, &tmp));
  KDT_OK(kd_tensor_from_host(s, &one, &m1, sizeof m1, &minus1));
  KDT_OK(kd_tensor_from_host(s, &one, &yes, sizeof yes, &flag));
  rg_rng head = r, body = r, inner = r, tail = r;
  body.s ^= 0x9E3779B97F4A7C15ull, inner.s ^= 0xBF58476D1CE4E5B9ull, tail.s ^= 0x94D049BB133111EBull;
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  rg_build_mixed(g, &p, &head, counts, RG_MAX_NODES);
  kd_node loop = 0, cond = 0;
  if (!unrolled) KDT_OK(kd_graph_while_begin(g, "loop", c, (uint32_t)trips + 3, kd_no_tensor(), &loop));
  for (int k = 0; k < (unrolled ? trips : 1); ++k) {
    rg_rng b = body, in = inner;
    rg_build_mixed(g, &p, &b, counts, RG_MAX_NODES);
    if (nested && !unrolled) KDT_OK(kd_graph_if_begin(g, "if", flag, &cond));
    if (nested) rg_build_mixed(g, &p, &in, counts, RG_MAX_NODES / 2);
    if (nested && !unrolled) KDT_OK(kd_graph_end(g, cond));
  }
  if (!unrolled) {
    KDT_OK(kd_graph_op_add(g, "tmp = c - 1", kd_whole(tmp), kd_whole(c), kd_whole(minus1), NULL));
    KDT_OK(kd_graph_op_copy(g, "c = tmp", kd_whole(c), kd_whole(tmp), NULL));
    KDT_OK(kd_graph_end(g, loop));
  }
  rg_build_mixed(g, &p, &tail, counts, RG_MAX_NODES);
  kd_sink *sinks[2 * RG_POOL];
  rg_pools_sink(g, &p, d, sinks);
  KDT_OK(kd_graph_submit(g, NULL));
  for (int i = 0; i < 2 * RG_POOL; ++i) KDT_OK(kd_sink_wait(sinks[i]));
  kd_graph_destroy(g);
  kd_tensor counters[] = {c, tmp, minus1, flag};
  for (int i = 0; i < 4; ++i) KDT_OK(kd_tensor_release(s, counters[i]));
  rg_pools_release(s, &p);
}

/* Runs `graphs` looped graphs (rg_run_looped, 0 to 4 trips, every other
 * one nested) on each of the sessions in on[] (count of them) and their
 * unrolled twins on host: every result bit for bit the unrolled one's. */
static inline void rg_loop_differential(kd_session **on, const char *const *names, int count, kd_session *host,
                                        uint64_t seed, int graphs) {
  static rg_data d;
  static int32_t iwant[RG_POOL][RG_LEN];
  static float fwant[RG_POOL][RG_LEN];
  rg_rng r = {seed};
  rg_counts counts;
  memset(&counts, 0, sizeof counts);
  for (int gi = 0; gi < graphs; ++gi) {
    rg_data_init(&d, &r);
    int trips = (int)(rg_next(&r) % 5), nested = gi % 2;
    rg_rng draw = {rg_next(&r) | 1};
    rg_run_looped(host, &d, draw, trips, nested, 1, &counts);
    memcpy(iwant, d.igot, sizeof iwant);
    memcpy(fwant, d.fgot, sizeof fwant);
    for (int k = 0; k < count; ++k) {
      rg_run_looped(on[k], &d, draw, trips, nested, 0, &counts);
      for (int i = 0; i < RG_POOL; ++i)
        for (int j = 0; j < RG_LEN; ++j) {
          cr_assert_eq(d.igot[i][j], iwant[i][j], "graph %d (%d trips%s): %s i32 tensor %d[%d] = %d, unrolled %d", gi,
                       trips, nested ? ", nested IF" : "", names[k], i, j, d.igot[i][j], iwant[i][j]);
          cr_assert(memcmp(&d.fgot[i][j], &fwant[i][j], sizeof(float)) == 0,
                    "graph %d (%d trips%s): %s f32 tensor %d[%d] = %a, unrolled %a", gi, trips,
                    nested ? ", nested IF" : "", names[k], i, j, (double)d.fgot[i][j], (double)fwant[i][j]);
        }
    }
  }
}

/* Asserts that what a run sank (igot, fgot; by who, for messages) is
 * the sequential interpretation in d, bit for bit: the built-in kernels of
 * every backend promise the host twins' exact operation order. */
static inline void rg_check_exact(const rg_data *d, int32_t (*igot)[RG_LEN], float (*fgot)[RG_LEN], int gi,
                                  const char *who) {
  for (int i = 0; i < RG_POOL; ++i)
    for (int j = 0; j < RG_LEN; ++j) {
      cr_assert_eq(igot[i][j], d->iref[i][j], "graph %d: %s i32 tensor %d[%d] = %d, sequential gives %d", gi, who, i,
                   j, igot[i][j], d->iref[i][j]);
      cr_assert(memcmp(&fgot[i][j], &d->fref[i][j], sizeof(float)) == 0,
                "graph %d: %s f32 tensor %d[%d] = %a, sequential gives %a", gi, who, i, j, fgot[i][j], d->fref[i][j]);
    }
}

/* The stated error of f32 results: within 2^-20 of the f64 interpretation,
 * relative to the same computation on magnitudes (an element's rounding
 * errors scale with that, not with its value, which cancellation can make
 * small). Asserts it for every element of fgot; returns the worst error in
 * units of 2^-24 times the magnitude. */
static inline double rg_check_f32_bound(const rg_data *d, float (*fgot)[RG_LEN], int gi) {
  double worst = 0;
  for (int i = 0; i < RG_POOL; ++i)
    for (int j = 0; j < RG_LEN; ++j) {
      double err = fabs((double)fgot[i][j] - d->dref[i][j]), m = d->mref[i][j];
      cr_assert_leq(err, 0x1p-20 * m, "graph %d: f32 tensor %d[%d] = %.9g, f64 gives %.17g (magnitude %.3g)", gi, i,
                    j, (double)fgot[i][j], d->dref[i][j], m);
      if (m > 0 && err / (m * 0x1p-24) > worst) worst = err / (m * 0x1p-24);
    }
  return worst;
}

/* Runs `graphs` mixed random graphs (the last 20 long) on dev and on host
 * (a HOST session) from one seed: dev's results bit for bit the HOST
 * backend's and the sequential interpretation's (the built-in kernels
 * promise the host twins' exact operation order), and its f32 within the
 * stated bound of f64. Returns the worst f32 error in units of 2^-24 times
 * the magnitude. */
static inline double rg_differential(kd_session *dev, kd_session *host, uint64_t seed, int graphs) {
  static rg_data d;
  static int32_t idev[RG_POOL][RG_LEN];
  static float fdev[RG_POOL][RG_LEN];
  rg_rng r = {seed};
  rg_counts counts;
  memset(&counts, 0, sizeof counts);
  double worst = 0;
  for (int gi = 0; gi < graphs; ++gi) {
    rg_data_init(&d, &r);
    int max_nodes = gi < graphs - 20 ? RG_MAX_NODES : -RG_LONG_NODES;
    rg_rng on_dev = r;
    rg_run_mixed(dev, &d, &on_dev, max_nodes, 0, &counts); /* the references stay as drawn */
    memcpy(idev, d.igot, sizeof idev);
    memcpy(fdev, d.fgot, sizeof fdev);
    rg_run_mixed(host, &d, &r, max_nodes, 1, &counts); /* the same graph: r was copied */
    rg_check_exact(&d, d.igot, d.fgot, gi, "HOST");
    rg_check_exact(&d, idev, fdev, gi, "device");
    double w = rg_check_f32_bound(&d, fdev, gi);
    if (w > worst) worst = w;
  }
  cr_assert_gt(worst, 0, "the f32 results were all exact: the bound was not tested");
  /* Every kind of node ran (counted on both sessions): graphs emptied by a
   * check gone wrong would compare equal too. */
  for (int k = 0; k < RG_KINDS; ++k)
    cr_assert_gt(counts.added[k], (uint64_t)graphs / 10, "kind %d: only %llu nodes added in %d graphs", k,
                 (unsigned long long)counts.added[k], graphs);
  return worst;
}

#endif
