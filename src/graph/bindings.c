/* SPDX-License-Identifier: Apache-2.0 */
/* What changes between submissions without a new plan: a binding's
 * tensor (kd_graph_rebind) and a kernel node's value arguments
 * (kd_graph_set_arg). GRAPH mode then patches the executable graph in
 * place. */
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "base/grow.h"
#include "graph/build.h"

int kd_graph_reserve_slot(kd_graph *g, uint32_t slot) { return kd_grow_zeroed(&g->by_slot, &g->by_slot_cap, slot + 1); }

kd_status kd_graph_rebind(kd_graph *g, kd_tensor old, kd_tensor replacement) {
  static const char *op = "kd_graph_rebind";
  if (!g) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument graph is NULL", op);
  kd_status st = kd_session_enter_host(g->session, op);
  if (st) return st;
  kd_tensor_obj *a = NULL, *b = NULL;
  st = kd_tensor_lookup(g->session, old, &a, op, "old");
  if (!st) st = kd_tensor_lookup(g->session, replacement, &b, op, "replacement");
  uint32_t slot_a = kd_handle_index(old.bits), slot_b = kd_handle_index(replacement.bits);
  int64_t idx = st ? -1 : kd_binding_of(g, a, slot_a);
  if (!st && idx < 0) st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument old is not used by this graph", op);
  if (!st && kd_binding_of(g, b, slot_b) >= 0)
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument replacement is already used by this graph", op);
  if (!st) {
    int same = a->dtype == b->dtype && a->rank == b->rank && a->residency == b->residency;
    for (int i = 0; same && i < a->rank; ++i) same = a->shape[i] == b->shape[i];
    if (!same)
      st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: replacement differs from old in dtype, shape or residency", op);
  }
  if (!st && !b->initialized) {
    /* Reads of the binding were checked against old's state: apply the
     * declaration rule to replacement. A read (KD_IN or KD_INOUT) is
     * defined once an earlier node writes the binding; a write of the same
     * node does not count. Accesses are stored in node order. */
    int before = 0, in_node = 0;
    uint32_t node = UINT32_MAX;
    for (uint32_t i = 0; !st && !before && i < g->access_count; ++i) {
      const kd_gaccess *acc = &g->accesses[i];
      if (acc->node != node) {
        before = in_node;
        node = acc->node;
      }
      if (before || acc->binding != (uint32_t)idx) continue;
      if (acc->mode & KD_IN)
        st = kd_fail(KD_ERR_UNINITIALIZED, "%s: node '%s' (#%u) reads old before any node writes it, and "
                     "replacement was never written", op, g->nodes[acc->node].name, acc->node);
      if ((acc->mode & KD_OUT) && kd_access_elements(acc)) in_node = 1; /* an empty view writes nothing */
    }
  }
  if (!st) st = kd_deferred_reserve(g->session, 1, op);
  if (!st) {
    if (!kd_graph_reserve_slot(g, slot_b) ||
        (!g->bindings[idx].queued && !KD_GROW(g->rebound, g->rebound_cap, g->rebound_count + 1))) {
      st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory", op);
    } else {
      g->by_slot[slot_a] = 0;
      g->by_slot[slot_b] = (uint32_t)idx + 1;
      kd_tensor_ref(b);
      g->bindings[idx].obj = b;
      if (!g->bindings[idx].queued) g->rebound[g->rebound_count++] = (uint32_t)idx;
      g->bindings[idx].queued = 1;
      /* The next submission marks what the graph writes initialized, a walk
       * over every binding: only needed when this brings in a tensor that
       * is not yet. Swapping between tensors already written (double
       * buffering, inputs) stays O(1) per submission. */
      if (g->bindings[idx].written && !b->initialized) g->unmarked = 1;
      /* A GRAPH-mode launch in flight may still use old. */
      kd_release_after_inflight(g->session, KD_HELD_TENSOR, a);
    }
  }
  kd_session_leave(g->session);
  return st;
}

kd_status kd_graph_set_arg(kd_graph *g, kd_node node, uint32_t index, kd_arg value) {
  static const char *op = "kd_graph_set_arg";
  if (!g) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument graph is NULL", op);
  kd_status st = kd_session_enter_host(g->session, op);
  if (st) return st;
  kd_gnode *n = node < g->node_count ? &g->nodes[node] : NULL;
  kd_gvalue *a = n && n->kind == KD_NODE_KERNEL && index < n->arg_count ? &n->args[index] : NULL;
  if (!n) {
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument node %u is not a node of this graph", op, node);
  } else if (n->kind != KD_NODE_KERNEL) {
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' is not a kernel node", op, n->name);
  } else if (!a) {
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' has %u arguments, index is %u", op, n->name,
                 n->arg_count, index);
  } else if ((unsigned)value.kind > KD_ARG_BYTES) {
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' argument %u: value kind %d is not a kd_arg_kind", op,
                 n->name, index, (int)value.kind);
  } else if (a->access >= 0 || value.kind == KD_ARG_TENSOR || value.kind == KD_ARG_TENSOR_MUT) {
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' argument %u: only value arguments can be set "
                 "(rebind tensors with kd_graph_rebind)", op, n->name, index);
  } else if (kd_arg_size(&value) != kd_arg_size(&a->value) || value.kind != a->value.kind) {
    st = kd_fail(KD_ERR_ARGUMENT_MISMATCH, "%s: node '%s' argument %u is %zu bytes of kind %d; value is %zu "
                 "bytes of kind %d", op, n->name, index, kd_arg_size(&a->value), (int)a->value.kind,
                 kd_arg_size(&value), (int)value.kind);
  } else if (value.kind == KD_ARG_BYTES && !value.v.bytes.data) {
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' argument %u: value bytes are NULL", op, n->name, index);
  }
  /* Listed once until the executable graph catches up (room first: a
   * failure leaves the argument as it was). */
  if (!st && !n->args_queued && !KD_GROW(g->reargs, g->reargs_cap, g->reargs_count + 1))
    st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory", op);
  if (!st && value.kind == KD_ARG_BYTES) {
    /* The node owns its bytes: copy them in place (same size). */
    memcpy((void *)a->value.v.bytes.data, value.v.bytes.data, value.v.bytes.size);
  } else if (!st) {
    a->value = value;
  }
  if (!st && !n->args_queued) {
    g->reargs[g->reargs_count++] = node;
    n->args_queued = 1;
  }
  kd_session_leave(g->session);
  return st;
}
