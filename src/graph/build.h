/* SPDX-License-Identifier: Apache-2.0 */
/* Internal to src/graph: what declaring a node shares between its files.
 * A node's accesses are resolved and checked one by one into a node_ctx
 * (access.c), then committed at once, each access ordered after the ones
 * it conflicts with (infer.c); the node constructors (nodes.c) sit on
 * top. Not thread-safe: the session lock covers all of it. */
#ifndef KDAG_GRAPH_BUILD_H
#define KDAG_GRAPH_BUILD_H

#include "graph/graph_impl.h"

typedef struct pending {
  kd_tensor_obj *obj;
  kd_access mode;
  int whole;         /* the view is kd_whole: its numbers are shared per binding */
  const kd_view *view; /* resolved: the caller's, not copied (this runs for every
                          access), so it must live until the node is added or
                          refused; or whole_view, for every kd_whole access (a
                          caller may pass a kd_whole of its own frame) */
  kd_view whole_view; /* kd_whole resolved; set only for such accesses */
  kd_footprint fp;
  int64_t elements;  /* the view's element count (kd_extent) */
  uint32_t slot;     /* obj's handle slot */
  size_t arg;        /* argument position, for messages */
  int64_t binding;   /* existing binding of obj, -1 if new to the graph */
} pending;

typedef struct node_ctx {
  kd_graph *g;
  const char *op;    /* "kd_graph_op_add" */
  const char *name;  /* the node's name */
  uint32_t index;    /* the node's index if added */
  pending acc[KD_NODE_MAX_ACCESSES];
  uint32_t count;
} node_ctx;


/* The binding of o (live, in handle slot slot), -1 if o is new to the graph.
 * A slot's entry may be stale (its tensor released, the slot reused): the
 * binding's own object decides. Inline: it runs for every access. */
static inline int64_t kd_binding_of(kd_graph *g, kd_tensor_obj *o, uint32_t slot) {
  if (slot >= g->by_slot_cap || !g->by_slot[slot]) return -1;
  uint32_t b = g->by_slot[slot] - 1;
  return g->bindings[b].obj == o ? (int64_t)b : -1;
}
/* Makes by_slot[slot] addressable; new entries are empty. 0: no memory. */
int kd_graph_reserve_slot(kd_graph *g, uint32_t slot);

/* access.c: a node's declaration, under the session lock from
 * kd_node_enter (which checks g and name, enters the session for host
 * work only and starts c) to the constructor's kd_session_leave. Each
 * kd_node_access resolves and checks one access (compact: the node takes
 * compact views only; any_residency: host tensors too); kd_node_commit
 * adds the node from proto, unless st or the commit fails (then the graph
 * is as it was), and frees c either way. */
kd_status kd_node_enter(kd_graph *g, const char *op, const char *name, node_ctx *c);
kd_status kd_node_access(node_ctx *c, size_t arg, kd_access mode, const kd_view *view, int compact,
                         int any_residency);
kd_status kd_node_commit(node_ctx *c, kd_status st, kd_gnode *proto, kd_node *out);

/* infer.c: orders one access of node (being committed, its inferred edges
 * from first_edge on) after the active accesses it conflicts with; then
 * the node's edges lose those its other predecessors imply. Neither fails:
 * the commit reserved the room (edges, found, witness blocks, and
 * KD_REDUCE_HEAP entries of reduce_heap). */
#define KD_REDUCE_HEAP 256
void kd_infer_access(kd_graph *g, uint32_t node, uint32_t first_edge, uint64_t *seen, kd_access mode,
                     kd_footprint *fp, uint32_t bi);
void kd_infer_reduce(kd_graph *g, uint32_t node, uint32_t first);

/* scope.c: KD_OK when a node of kind may be added where the graph's
 * declaration is (sinks, host functions and foreign nodes are refused in
 * a loop's body), else the error naming op, the node and the loop. */
kd_status kd_scope_admits(kd_graph *g, const char *op, const char *name, uint32_t index, kd_node_kind kind);

/* graph.c: frees what a node owns (its arguments, module, foreign
 * resource, host record). */
void kd_gnode_free(kd_session *s, kd_gnode *n);

#endif
