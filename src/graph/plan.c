/* SPDX-License-Identifier: Apache-2.0 */
/* Plans: topological order and successor lists, built once per graph shape. */
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "graph/graph_impl.h"

void kd_plan_free(kd_plan *p) {
  free(p->order);
  free(p->succ_start);
  free(p->succ);
  free(p->indegree);
  if (p->exec) p->exec->destroy(p->exec);
  memset(p, 0, sizeof *p);
}

kd_status kd_plan_build(kd_graph *g, const char *op) {
  kd_plan p;
  memset(&p, 0, sizeof p);
  uint32_t n = g->node_count, m = g->edge_count;
  p.order = malloc(((size_t)n + 1) * sizeof *p.order);
  p.succ_start = calloc((size_t)n + 1, sizeof *p.succ_start);
  p.succ = malloc(((size_t)m + 1) * sizeof *p.succ);
  p.indegree = calloc((size_t)n + 1, sizeof *p.indegree);
  uint32_t *fill = calloc((size_t)n + 1, sizeof *fill);
  if (!p.order || !p.succ_start || !p.succ || !p.indegree || !fill) {
    free(fill);
    kd_plan_free(&p);
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the plan", op);
  }
  /* CSR successors, counted then placed. */
  for (uint32_t e = 0; e < m; ++e) {
    p.succ_start[g->edges[e].from + 1]++;
    p.indegree[g->edges[e].to]++;
  }
  for (uint32_t i = 0; i < n; ++i) p.succ_start[i + 1] += p.succ_start[i];
  for (uint32_t e = 0; e < m; ++e) {
    uint32_t f = g->edges[e].from;
    p.succ[p.succ_start[f] + fill[f]++] = g->edges[e].to;
  }
  /* Kahn's algorithm; ties in insertion order keep EAGER close to program
   * order. fill is reused as the remaining in-degree. */
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
  free(fill);
  if (tail != n) { /* explicit edges are checked when added; this is a bug guard */
    kd_plan_free(&p);
    return kd_fail(KD_ERR_CYCLE, "%s: the graph has a cycle (%u of %u nodes ordered)", op, tail, n);
  }
  kd_plan_free(&g->plan);
  p.valid = 1;
  g->plan = p;
  g->session->counters.plans_built++;
  return KD_OK;
}
