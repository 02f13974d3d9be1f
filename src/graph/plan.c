/* SPDX-License-Identifier: Apache-2.0 */
/* Plans: topological order and successor lists, built once per graph shape. */
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "graph/graph_impl.h"

void kd_plan_free(kd_plan *p) {
  free(p->order);
  free(p->body_start);
  free(p->body_count);
  free(p->succ_start);
  free(p->succ);
  free(p->indegree);
  if (p->exec) p->exec->destroy(p->exec);
  memset(p, 0, sizeof *p);
}

/* The two nodes an edge a -> b joins at the level where both are: each
 * replaced by the loop of that level that contains it (a node of that
 * level stands for itself). Loops nest at most KD_GRAPH_MAX_DEPTH deep. */
static void lift(const kd_graph *g, const uint8_t *depth, uint32_t *a, uint32_t *b) {
  while (g->nodes[*a].scope != g->nodes[*b].scope) {
    if (depth[*a] >= depth[*b]) *a = g->nodes[*a].scope - 1;
    else *b = g->nodes[*b].scope - 1;
  }
}

/* Edges of the plan: the graph's own, or with loops each lifted to the
 * level where its two ends are (lift), dropped when both ends are one
 * loop, and each kept once. CSR by source into p; p->indegree counted. */
static int successors(kd_graph *g, kd_plan *p, uint32_t *scratch) {
  uint32_t n = g->node_count, m = g->edge_count;
  uint8_t *depth = NULL;
  uint32_t *from = NULL, *to = NULL;
  if (p->loops) {
    depth = malloc((size_t)n + 1);
    from = malloc(((size_t)m + 1) * sizeof *from);
    to = malloc(((size_t)m + 1) * sizeof *to);
    if (!depth || !from || !to) {
      free(depth), free(from), free(to);
      return 0;
    }
    for (uint32_t v = 0; v < n; ++v) depth[v] = g->nodes[v].scope ? (uint8_t)(depth[g->nodes[v].scope - 1] + 1) : 0;
  }
  /* Count, then place; with loops the lifted ends, repeats removed after. */
  for (uint32_t e = 0; e < m; ++e) {
    uint32_t a = g->edges[e].from, b = g->edges[e].to;
    if (p->loops) {
      lift(g, depth, &a, &b);
      from[e] = a, to[e] = b;
      if (a == b) continue;
    }
    p->succ_start[a + 1]++;
  }
  for (uint32_t i = 0; i < n; ++i) p->succ_start[i + 1] += p->succ_start[i];
  memset(scratch, 0, ((size_t)n + 1) * sizeof *scratch);
  for (uint32_t e = 0; e < m; ++e) {
    uint32_t a = p->loops ? from[e] : g->edges[e].from, b = p->loops ? to[e] : g->edges[e].to;
    if (a == b) continue;
    p->succ[p->succ_start[a] + scratch[a]++] = b;
  }
  p->edge_count = m;
  if (p->loops) { /* two edges into one body from one node are one edge of its loop */
    uint32_t w = 0;
    for (uint32_t v = 0; v < n; ++v) scratch[v] = UINT32_MAX;
    for (uint32_t a = 0, start = 0; a < n; ++a) {
      uint32_t end = p->succ_start[a + 1];
      p->succ_start[a] = w;
      for (uint32_t k = start; k < end; ++k) {
        uint32_t b = p->succ[k];
        if (scratch[b] == a) continue;
        scratch[b] = a;
        p->succ[w++] = b;
      }
      start = end;
    }
    p->succ_start[n] = w;
    p->edge_count = w;
  }
  for (uint32_t k = 0; k < p->edge_count; ++k) p->indegree[p->succ[k]]++;
  free(depth), free(from), free(to);
  return 1;
}

kd_status kd_plan_build(kd_graph *g, const char *op) {
  kd_plan p;
  memset(&p, 0, sizeof p);
  uint32_t n = g->node_count, m = g->edge_count;
  for (uint32_t v = 0; v < n; ++v) p.loops += g->nodes[v].kind == KD_NODE_LOOP;
  p.order = malloc(((size_t)n + 1) * sizeof *p.order);
  p.succ_start = calloc((size_t)n + 1, sizeof *p.succ_start);
  p.succ = malloc(((size_t)m + 1) * sizeof *p.succ);
  p.indegree = calloc((size_t)n + 1, sizeof *p.indegree);
  uint32_t *fill = calloc((size_t)n + 1, sizeof *fill);
  if (p.loops) {
    p.body_start = calloc((size_t)n + 1, sizeof *p.body_start);
    p.body_count = calloc((size_t)n + 1, sizeof *p.body_count);
  }
  if (!p.order || !p.succ_start || !p.succ || !p.indegree || !fill || (p.loops && (!p.body_start || !p.body_count)) ||
      !successors(g, &p, fill)) {
    free(fill);
    kd_plan_free(&p);
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the plan", op);
  }
  /* Kahn's algorithm; ties in insertion order keep EAGER close to program
   * order. fill is reused as the remaining in-degree. Edges join nodes of
   * one level, so the order is topological within each level. */
  uint32_t head = 0, tail = 0;
  for (uint32_t i = 0; i < n; ++i) {
    fill[i] = p.indegree[i];
    if (!fill[i]) p.order[tail++] = i;
  }
  while (head < tail) {
    uint32_t v = p.order[head++];
    for (uint32_t k = p.succ_start[v]; k < p.succ_start[v + 1]; ++k)
      if (--fill[p.succ[k]] == 0) p.order[tail++] = p.succ[k];
  }
  if (tail != n) { /* explicit edges are checked when added; this is a bug guard */
    free(fill);
    kd_plan_free(&p);
    return kd_fail(KD_ERR_CYCLE, "%s: the graph has a cycle (%u of %u nodes ordered)", op, tail, n);
  }
  p.top_count = n;
  if (p.loops) { /* grouped by level, stably: the top level, then each body in loop order */
    for (uint32_t v = 0; v < n; ++v)
      if (g->nodes[v].scope) p.body_count[g->nodes[v].scope - 1]++;
    uint32_t at = 0;
    for (uint32_t v = 0; v < n; ++v) at += !g->nodes[v].scope;
    p.top_count = at;
    for (uint32_t v = 0; v < n; ++v)
      if (g->nodes[v].kind == KD_NODE_LOOP) {
        p.body_start[v] = at;
        at += p.body_count[v];
      }
    uint32_t top = 0;
    for (uint32_t v = 0; v < n; ++v) fill[v] = 0; /* each body's members placed so far */
    uint32_t *sorted = malloc(((size_t)n + 1) * sizeof *sorted);
    if (!sorted) {
      free(fill);
      kd_plan_free(&p);
      return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the plan", op);
    }
    for (uint32_t i = 0; i < n; ++i) {
      uint32_t v = p.order[i], l = g->nodes[v].scope;
      if (!l) sorted[top++] = v;
      else sorted[p.body_start[l - 1] + fill[l - 1]++] = v;
    }
    free(p.order);
    p.order = sorted;
  }
  free(fill);
  kd_plan_free(&g->plan);
  p.valid = 1;
  g->plan = p;
  g->session->counters.plans_built++;
  return KD_OK;
}
