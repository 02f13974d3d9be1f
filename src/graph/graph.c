/* SPDX-License-Identifier: Apache-2.0 */
/* Graphs: creation, destruction, the execution mode. A graph's nodes are
 * declared in nodes.c (checked in access.c, ordered in infer.c), its
 * bindings changed in bindings.c, drawn in dot.c. */
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "base/grow.h"
#include "graph/build.h"

_Static_assert(KD_GRAPH_EXACT_RUNS <= KD_IVAL_MAX_RUNS, "an exact footprint's runs must fit an interval entry");

kd_status kd_graph_create(kd_session *s, kd_graph **out) {
  static const char *op = "kd_graph_create";
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_graph is NULL", op);
  *out = NULL;
  kd_status st = kd_session_enter_host(s, op);
  if (st) return st;
  kd_graph *g = calloc(1, sizeof *g);
  if (!g) {
    kd_session_leave(s);
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the graph", op);
  }
  g->session = s;
  g->exec_mode = s->opts.exec_mode;
  *out = g;
  kd_session_leave(s);
  return KD_OK;
}

kd_status kd_graph_set_name(kd_graph *g, const char *name) {
  static const char *op = "kd_graph_set_name";
  if (!g) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument graph is NULL", op);
  if (!name) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument name is NULL", op);
  size_t len = strnlen(name, KD_GRAPH_NAME_MAX + 1);
  if (len == 0 || len > KD_GRAPH_NAME_MAX)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument name is %s (1 to %d bytes)", op,
                   len ? "too long" : "empty", KD_GRAPH_NAME_MAX);
  kd_session *s = g->session;
  kd_status st = kd_session_enter_host(s, op);
  if (st) return st;
  char *copy = strdup(name);
  if (!copy) {
    st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the name", op);
  } else {
    free(g->name);
    g->name = copy;
    g->nvtx_named = 0;
  }
  kd_session_leave(s);
  return st;
}

void kd_gnode_free(kd_session *s, kd_gnode *n) {
  if (n->kind == KD_NODE_KERNEL) {
    for (uint32_t i = 0; i < n->arg_count; ++i)
      if (n->args[i].access < 0 && n->args[i].value.kind == KD_ARG_BYTES) free((void *)n->args[i].value.v.bytes.data);
    free(n->args);
    if (n->module) kd_module_unref(s, n->module);
  } else if (n->kind == KD_NODE_FOREIGN && n->res) {
    kd_foreign_res_unref(n->res);
  } else if (n->kind == KD_NODE_HOST && n->host_call) {
    kd_release_after_inflight(s, KD_HELD_MEMORY, n->host_call); /* the driver may yet call it back */
  }
}

void kd_graph_destroy(kd_graph *g) {
  if (!g || kd_callback_check("kd_graph_destroy")) return; /* from a callback: refused, nothing destroyed */
  kd_session *s = g->session;
  kd_session_lock(s);
  /* Unloading a module or freeing a tensor the graph held last needs the
   * session's context current on this thread, whatever the caller's is
   * (a fault here only means the work faulted: destroying goes on). */
  if (s->has_device) s->ctx_current = !kd_device_make_current(&s->dev, "kd_graph_destroy");
  /* What the work in flight may still use goes once it has completed:
   * host functions' records (the driver may yet call them back), the
   * bound tensors (GRAPH-mode launches hold none of their own) and the
   * executable graph. Room for all of them first: without it, a release
   * waits for the work in flight instead. */
  uint32_t hosts = 0;
  for (uint32_t i = 0; i < g->node_count; ++i) hosts += g->nodes[i].kind == KD_NODE_HOST && g->nodes[i].host_call;
  (void)kd_deferred_room(s, hosts + g->binding_count + 1);
  for (uint32_t i = 0; i < g->node_count; ++i) kd_gnode_free(s, &g->nodes[i]);
  for (uint32_t i = 0; i < g->binding_count; ++i) {
    kd_release_after_inflight(s, KD_HELD_TENSOR, g->bindings[i].obj);
    kd_ivset_free(&g->bindings[i].reads);
    kd_ivset_free(&g->bindings[i].writes);
  }
  for (uint32_t i = 0; i < g->sink_count; ++i) kd_sink_free(s, g->sinks[i]);
  KD_GROW_FREE(g->sinks, g->sink_cap);
  KD_GROW_FREE(g->nodes, g->node_cap);
  KD_GROW_FREE(g->accesses, g->access_cap);
  KD_GROW_FREE(g->edges, g->edge_cap);
  KD_GROW_FREE(g->bindings, g->binding_cap);
  KD_GROW_FREE(g->rebound, g->rebound_cap);
  KD_GROW_FREE(g->reargs, g->reargs_cap);
  KD_GROW_FREE(g->pred_mark, g->pred_cap);
  KD_GROW_FREE(g->out_head, g->out_cap);
  KD_GROW_FREE(g->edge_next, g->edge_next_cap);
  KD_GROW_FREE(g->visit, g->visit_cap);
  KD_GROW_FREE(g->dfs, g->dfs_cap);
  KD_GROW_FREE(g->found, g->found_cap);
  free(g->reduce_heap);
  free(g->name);
  kd_witness_pool_free(&g->witness_blocks);
  kd_arena_free(&g->arena);
  kd_plan_free(&g->plan);
  KD_GROW_FREE(g->by_slot, g->by_slot_cap);
  free(g);
  kd_session_leave(s); /* runs the release callbacks of external tensors it let go */
}

kd_status kd_graph_set_exec_mode(kd_graph *g, kd_exec_mode mode) {
  static const char *op = "kd_graph_set_exec_mode";
  if (!g) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument graph is NULL", op);
  if (mode != KD_EXEC_AUTO && mode != KD_EXEC_EAGER && mode != KD_EXEC_GRAPH)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument mode %d is not a kd_exec_mode", op, (int)mode);
  kd_status st = kd_session_enter_host(g->session, op);
  if (st) return st;
  g->exec_mode = mode;
  kd_session_leave(g->session);
  return KD_OK;
}
