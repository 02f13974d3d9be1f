/* SPDX-License-Identifier: Apache-2.0 */
/* Declaring loops and conditionals (kd_graph_while_begin, kd_graph_if_begin,
 * kd_graph_end): a loop node, then its body, the nodes added until its
 * end. Each node records the loop it is in (kd_gnode.scope); the plan
 * (graph/plan.c) turns that into one level per body. */
#include <string.h>

#include "base/status_internal.h"
#include "graph/build.h"

/* The condition and trip count: one element of a 4-byte integer type. */
static kd_status counter_check(node_ctx *c, uint32_t i, const char *what) {
  const pending *p = &c->acc[i];
  if ((p->obj->dtype != KD_I32 && p->obj->dtype != KD_U32) || p->elements != 1)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument %s (tensor 0x%llx) must be one KD_I32 or "
                   "KD_U32 element; it is %s with %lld elements", c->op, c->name, c->index, what,
                   (unsigned long long)p->view->tensor.bits, kd_dtype_name(p->obj->dtype), (long long)p->elements);
  return KD_OK;
}

static kd_status begin(kd_graph *g, const char *op, const char *name, kd_tensor cond, int is_if, uint32_t max_trips,
                       kd_tensor trips, kd_node *out) {
  node_ctx c;
  kd_status st = kd_node_enter(g, op, name, &c);
  if (st) return st;
  kd_gnode proto;
  memset(&proto, 0, sizeof proto);
  proto.kind = KD_NODE_LOOP;
  proto.is_if = (uint8_t)is_if;
  proto.max_trips = is_if ? 1 : max_trips;
  proto.has_trips = trips.bits != 0;
  kd_view cv = kd_whole(cond), tv = kd_whole(trips); /* of this frame, as kd_node_access asks */
  if (g->open_count == KD_GRAPH_MAX_NESTING)
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): %u loops and conditionals are open already, the most "
                 "(KD_GRAPH_MAX_DEPTH); innermost: '%s' (#%u)", op, name, c.index, g->open_count,
                 g->nodes[g->open[g->open_count - 1]].name, g->open[g->open_count - 1]);
  if (!st) st = kd_node_access(&c, 0, KD_IN, &cv, 1, 0);
  if (!st) st = counter_check(&c, 0, "condition");
  if (!st && proto.has_trips) {
    st = kd_node_access(&c, 1, KD_OUT, &tv, 1, 0);
    if (!st) st = counter_check(&c, 1, "trips");
  }
  st = kd_node_commit(&c, st, &proto, out);
  if (!st) g->open[g->open_count++] = g->node_count - 1;
  kd_session_leave(g->session);
  return st;
}

kd_status kd_graph_while_begin(kd_graph *g, const char *name, kd_tensor condition, uint32_t max_trips,
                               kd_tensor trips, kd_node *out) {
  return begin(g, "kd_graph_while_begin", name, condition, 0, max_trips, trips, out);
}

kd_status kd_graph_if_begin(kd_graph *g, const char *name, kd_tensor condition, kd_node *out) {
  kd_tensor none = {0};
  return begin(g, "kd_graph_if_begin", name, condition, 1, 1, none, out);
}

kd_status kd_graph_end(kd_graph *g, kd_node loop) {
  static const char *op = "kd_graph_end";
  if (!g) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument graph is NULL", op);
  kd_status st = kd_session_enter_host(g->session, op);
  if (st) return st;
  uint32_t inner = g->open_count ? g->open[g->open_count - 1] : UINT32_MAX;
  if (!g->open_count)
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument loop (%u): no loop or conditional is open", op, loop);
  else if (loop != inner)
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument loop (%u) is not the innermost open loop, '%s' (#%u): end "
                 "that one first", op, loop, g->nodes[inner].name, inner);
  kd_gnode *node = st ? NULL : &g->nodes[loop];
  if (node && !node->is_if) { /* a WHILE's body must be able to stop it */
    uint32_t cond = g->accesses[node->first_access].binding, writes = 0;
    for (uint32_t a = g->nodes[loop].first_access + node->access_count; !writes && a < g->access_count; ++a) {
      const kd_gaccess *acc = &g->accesses[a];
      writes = acc->binding == cond && (acc->mode & KD_OUT) && kd_access_elements(acc) > 0;
    }
    if (!writes)
      st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: loop '%s' (#%u): no node of its body writes its condition (tensor "
                   "0x%llx), so nothing could end it before its limit; the loop stays open", op, node->name, loop,
                   (unsigned long long)g->bindings[cond].obj->handle);
  }
  if (!st) {
    node->body_end = g->node_count;
    g->open_count--;
    g->plan.valid = 0;
  }
  kd_session_leave(g->session);
  return st;
}

kd_status kd_scope_admits(kd_graph *g, const char *op, const char *name, uint32_t index, kd_node_kind kind) {
  if (!g->open_count || (kind != KD_NODE_SINK && kind != KD_NODE_HOST && kind != KD_NODE_FOREIGN)) return KD_OK;
  uint32_t l = g->open[g->open_count - 1];
  return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u) would be in the body of %s '%s' (#%u), which runs on "
                 "the device: a body holds kernels, built-ins, uploads and nested loops, not %s", op, name, index,
                 g->nodes[l].is_if ? "conditional" : "loop", g->nodes[l].name, l,
                 kind == KD_NODE_SINK ? "sinks" : kind == KD_NODE_HOST ? "host functions"
                 : "foreign nodes (collectives and peer copies are foreign nodes of kdag's own)");
}
