/* SPDX-License-Identifier: Apache-2.0 */
/* A graph as Graphviz DOT, and its statistics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "base/grow.h"
#include "graph/build.h"

static const char *kind_name(const kd_gnode *n) {
  static const char *bi[] = {"fill", "copy", "add", "axpy", "scale", "sum"};
  switch (n->kind) {
    case KD_NODE_KERNEL: return "kernel";
    case KD_NODE_BUILTIN: return bi[n->op];
    case KD_NODE_UPLOAD: return "upload";
    case KD_NODE_SINK: return "sink";
    case KD_NODE_HOST: return "host";
    case KD_NODE_FOREIGN: return "foreign";
  }
  return "?";
}

kd_status kd_graph_write_dot(kd_graph *g, FILE *f) {
  static const char *op = "kd_graph_write_dot";
  if (!g || !f) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument %s is NULL", op, g ? "file" : "graph");
  kd_status st = kd_session_enter_host(g->session, op);
  if (st) return st;
  static const char *hz[] = {"", "RAW", "WAR", "WAW", "explicit"};
  fprintf(f, "digraph kdag {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n");
  for (uint32_t i = 0; i < g->node_count; ++i) {
    fprintf(f, "  n%u [label=\"#%u ", i, i);
    for (const char *p = g->nodes[i].name; *p; ++p) /* a DOT string: quote, backslash and line breaks escaped */
      fputs(*p == '"' ? "\\\"" : *p == '\\' ? "\\\\" : *p == '\n' ? "\\n" : *p == '\r' ? "" : (char[]){*p, 0}, f);
    fprintf(f, "\\n%s\"];\n", kind_name(&g->nodes[i]));
  }
  for (uint32_t e = 0; e < g->edge_count; ++e) {
    const kd_gedge *x = &g->edges[e];
    if (x->hazard == KD_HAZ_EXPLICIT)
      fprintf(f, "  n%u -> n%u [label=\"explicit\", style=dashed];\n", x->from, x->to);
    else
      fprintf(f, "  n%u -> n%u [label=\"%s t%u\"];\n", x->from, x->to, hz[x->hazard], x->binding);
  }
  fprintf(f, "}\n");
  kd_session_leave(g->session);
  return ferror(f) ? kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: writing the stream failed", op) : KD_OK;
}

kd_status kd_graph_stats_get(kd_graph *g, kd_graph_stats *out) {
  if (!g || !out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "kd_graph_stats_get: argument %s is NULL", g ? "out_stats" : "graph");
  kd_status st = kd_session_enter_host(g->session, "kd_graph_stats_get");
  if (st) return st;
  kd_graph_stats r = {g->node_count, g->edge_count, g->access_count, g->edges_dropped, 0};
  /* Inferred edges are each node's run (kd_gnode.edge_count); declared
   * ones, when there are any, are counted into their nodes by a pass. */
  uint32_t inferred = 0;
  for (uint32_t i = 0; i < g->node_count; ++i) {
    uint32_t in = g->nodes[i].edge_count;
    r.edges_in_max = in > r.edges_in_max ? in : r.edges_in_max;
    inferred += in;
  }
  if (inferred != g->edge_count) {
    uint32_t *in = calloc(g->node_count ? g->node_count : 1, sizeof *in);
    if (!in) st = kd_fail(KD_ERR_OUT_OF_MEMORY, "kd_graph_stats_get: no memory to count the edges into each node");
    r.edges_in_max = 0;
    for (uint32_t e = 0; in && e < g->edge_count; ++e)
      if (++in[g->edges[e].to] > r.edges_in_max) r.edges_in_max = in[g->edges[e].to];
    free(in);
  }
  if (!st) *out = r;
  kd_session_leave(g->session);
  return st;
}
