/* Changing a kernel node's value arguments between submissions: the plan
 * stays, and GRAPH mode patches the executable graph in place. */
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "graph/graph_impl.h"
#include "base/grow.h"

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
