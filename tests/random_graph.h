/* Seeded random graphs over a pool of i32 tensors and rank-1 views (whole,
 * ranges, strided), shared by the host property test and the GPU
 * differential test. Each added node can also be applied to a reference
 * copy with the host implementations, in insertion order. */
#ifndef KDAG_TESTS_RANDOM_GRAPH_H
#define KDAG_TESTS_RANDOM_GRAPH_H

#include "kdag_test.h"
#include "kernels/host.h"

#define RG_POOL 4
#define RG_LEN 64
#define RG_MAX_NODES 14

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

static inline kd_kview rg_kview(int32_t *base, const kd_view *v) {
  kd_kview k;
  memset(&k, 0, sizeof k);
  k.base = (unsigned long long)(uintptr_t)(base + v->offset);
  k.rank = 1;
  k.shape[0] = v->shape[0];
  k.strides[0] = v->strides[0];
  return k;
}

/* Adds up to RG_MAX_NODES random nodes to g over tensors t. With ref non-NULL,
 * applies each accepted node to ref (the sequential interpretation).
 * Returns the number of nodes refused for aliasing. */
static inline int rg_build(kd_graph *g, kd_tensor *t, rg_rng *r, int32_t (*ref)[RG_LEN]) {
  int rejected = 0;
  int count = 1 + (int)(rg_next(r) % RG_MAX_NODES);
  for (int k = 0; k < count; ++k) {
    int op = (int)(rg_next(r) % 4);
    int64_t n = 1 + rg_next(r) % 24;
    int a = (int)(rg_next(r) % RG_POOL), b = (int)(rg_next(r) % RG_POOL), c = (int)(rg_next(r) % RG_POOL);
    kd_view va = rg_view(r, t[a], n), vb = rg_view(r, t[b], n), vc = rg_view(r, t[c], n);
    int32_t value = (int32_t)(rg_next(r) % 100);
    kd_status st;
    if (op == 0) st = kd_graph_fill(g, "fill", va, &value, NULL);
    else if (op == 1) st = kd_graph_copy(g, "copy", va, vb, NULL);
    else if (op == 2) st = kd_graph_add(g, "add", va, vb, vc, NULL);
    else {
      va = rg_view(r, t[a], 1);
      st = kd_graph_sum(g, "sum", va, vb, NULL);
    }
    if (st == KD_ERR_ALIASING) { /* refused: graph and reference unchanged */
      rejected++;
      continue;
    }
    cr_assert_eq(st, KD_OK, "node %d: %s: %s", k, kd_status_name(st), kd_last_error());
    if (!ref) continue;
    kd_kpattern p = {{(unsigned long long)(uint32_t)value, 0}};
    if (op == 0) kd_host_fill(4, rg_kview(ref[a], &va), p);
    else if (op == 1) kd_host_copy(4, rg_kview(ref[a], &va), rg_kview(ref[b], &vb));
    else if (op == 2) kd_host_add(KD_K_I32, rg_kview(ref[a], &va), rg_kview(ref[b], &vb), rg_kview(ref[c], &vc));
    else kd_host_sum(KD_K_I32, rg_kview(ref[a], &va), rg_kview(ref[b], &vb));
  }
  return rejected;
}

#endif
