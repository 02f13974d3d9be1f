/* SPDX-License-Identifier: Apache-2.0 */
/* A node's declaration: each tensor access resolved and checked (bounds,
 * residency, initialization, aliasing within the node) before anything
 * changes, then the node committed with everything it needs reserved
 * first, so a refused node leaves the graph as it was. */
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "base/grow.h"
#include "graph/build.h"

static void ctx_free(node_ctx *c) {
  for (uint32_t i = 0; i < c->count; ++i) kd_footprint_free(&c->acc[i].fp);
  c->count = 0;
}

/* A lower layer's failure, with the node, argument and tensor it hit. */
static kd_status in_access(const node_ctx *c, size_t arg, const kd_view *view, kd_status st) {
  return kd_fail_context(st, "node '%s' (#%u), argument %zu, tensor 0x%llx", c->name, c->index, arg,
                         (unsigned long long)view->tensor.bits);
}

/* Two accesses of one node whose footprints met only as bounding
 * intervals (past KD_GRAPH_EXACT_RUNS runs): refusing the node must not be
 * conservative the way ordering two nodes may be, so they are compared on
 * footprints of up to KD_NODE_ALIAS_RUNS runs, built for this test alone.
 * *overlap: 1 they share an element, 0 they do not, -1 too many runs to
 * tell. */
static kd_status overlap_exactly(const pending *a, const pending *b, int64_t elements, const char *op,
                                 int *overlap) {
  kd_footprint fa = {0}, fb = {0};
  kd_extent ea, eb;
  const kd_tensor_obj *o = a->obj;
  kd_status st = kd_view_extent(op, a->view, elements, &ea);
  if (!st) st = kd_view_extent(op, b->view, elements, &eb);
  if (!st) st = kd_footprint_build(a->view, &ea, &o->rank, o->shape, KD_NODE_ALIAS_RUNS, &fa, op);
  if (!st) st = kd_footprint_build(b->view, &eb, &o->rank, o->shape, KD_NODE_ALIAS_RUNS, &fb, op);
  if (!st) *overlap = kd_footprint_exact(&fa) && kd_footprint_exact(&fb) ? kd_footprint_overlap(&fa, &fb) : -1;
  kd_footprint_free(&fa);
  kd_footprint_free(&fb);
  return st;
}

/* Whether a written strided view names each element once (*once 1), not
 * (0), or has more than KD_NODE_ALIAS_RUNS runs and strides that do not
 * prove it (-1). Past KD_GRAPH_EXACT_RUNS runs the strides prove it for
 * most views; one they cannot (interleaved strides, such as 2 and 3) is
 * tested on a footprint built for this test alone, as overlap_exactly
 * does: refusing a node must not be conservative. */
static kd_status writes_once(const pending *p, const kd_extent *e, const char *op, int *once) {
  *once = kd_view_distinct(p->view, e->elements, &p->fp);
  if (*once || kd_footprint_exact(&p->fp)) return KD_OK;
  kd_footprint f = {0};
  kd_status st = kd_footprint_build_runs(p->view, e, KD_NODE_ALIAS_RUNS, &f, op);
  if (!st) *once = kd_footprint_exact(&f) ? kd_view_distinct(p->view, e->elements, &f) : -1;
  kd_footprint_free(&f);
  return st;
}

/* Resolves and checks one tensor access. compact: user kernels need compact views. */
kd_status kd_node_access(node_ctx *c, size_t arg, kd_access mode, const kd_view *view, int compact,
                            int any_residency) {
  /* Messages are formatted only on failure: this runs for every access. */
#define KD_AT "%s: node '%s' (#%u), argument %zu"
#define KD_AT_ARGS c->op, c->name, c->index, arg
  const char *op = c->op;
  if (mode != KD_IN && mode != KD_OUT && mode != KD_INOUT)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, KD_AT ": access %d is not KD_IN, KD_OUT or KD_INOUT", KD_AT_ARGS, (int)mode);
  if (c->count == KD_NODE_MAX_ACCESSES)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, KD_AT ": more than %d tensor accesses in one node", KD_AT_ARGS,
                   KD_NODE_MAX_ACCESSES);
  kd_session *s = c->g->session;
  kd_tensor_obj *o;
  kd_status st = kd_tensor_lookup(s, view->tensor, &o, op, "tensor");
  if (st) return in_access(c, arg, view, st);
  if (!any_residency && o->residency != KD_RESIDENCY_DEVICE)
    return kd_fail(KD_ERR_NOT_RESIDENT, KD_AT ": tensor 0x%llx lives in host memory, not in the session's device memory",
                   KD_AT_ARGS, (unsigned long long)view->tensor.bits);
  if (mode != KD_IN && o->read_only)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, KD_AT ": tensor 0x%llx is read-only (wrapped with KD_EXTERNAL_READ_ONLY), "
                   "and the node would write it", KD_AT_ARGS, (unsigned long long)view->tensor.bits);
  pending *p = &c->acc[c->count];
  /* Every field is set below (not memset: this runs for every access). */
  p->obj = o;
  p->mode = mode;
  p->arg = arg;
  p->whole = view->rank == -1; /* kd_whole; any other negative rank is refused by kd_view_extent */
  p->view = view;
  kd_extent e;
  if (p->whole) { /* the tensor's own numbers: compact and in bounds */
    kd_view *w = &p->whole_view;
    w->tensor = view->tensor;
    w->rank = o->rank;
    w->offset = 0;
    int64_t stride = 1;
    for (int i = 0; i < o->rank; ++i) {
      w->shape[i] = o->shape[i];
      w->strides[i] = stride;
      stride *= o->shape[i];
    }
    p->view = w;
    e = (kd_extent){.elements = o->elements, .last = o->elements ? o->elements - 1 : 0, .compact = 1};
  } else {
    st = kd_view_extent(op, view, o->elements, &e);
    if (st) return in_access(c, arg, view, st);
  }
  if (compact && !e.compact)
    return kd_fail(KD_ERR_NOT_COMPACT, KD_AT ": the view of tensor 0x%llx is strided; kernel and foreign nodes take "
                   "compact views only: canonicalize it with kd_graph_op_copy first", KD_AT_ARGS,
                   (unsigned long long)view->tensor.bits);
  p->elements = e.elements;
  p->slot = kd_handle_index(view->tensor.bits);
  p->binding = kd_binding_of(c->g, o, p->slot);
  if ((mode & KD_IN) && !o->initialized && !(p->binding >= 0 && c->g->bindings[p->binding].written))
    return kd_fail(KD_ERR_UNINITIALIZED, KD_AT ": reads tensor 0x%llx, which no earlier node or upload writes",
                   KD_AT_ARGS, (unsigned long long)view->tensor.bits);
  st = kd_footprint_build(p->view, &e, &o->rank, o->shape, KD_GRAPH_EXACT_RUNS, &p->fp, op);
  if (st) return in_access(c, arg, view, st);
  c->count++; /* its footprint is freed with the node's from here */
  if ((mode & KD_OUT) && !e.compact) {
    int once;
    st = writes_once(p, &e, op, &once);
    if (st) return in_access(c, arg, view, st);
    if (once < 0)
      return kd_fail(KD_ERR_ALIASING, KD_AT ": may write some elements of tensor 0x%llx more than once: the view "
                     "has more than %d runs, too many to tell, and its strides do not prove each element is "
                     "written once (sorted, each at least the extent of the dimensions below it)", KD_AT_ARGS,
                     (unsigned long long)view->tensor.bits, KD_NODE_ALIAS_RUNS);
    if (!once)
      return kd_fail(KD_ERR_ALIASING, KD_AT ": writes some elements of tensor 0x%llx more than once (a stride of "
                     "0, or strides that make the view overlap itself); only reads may revisit elements",
                     KD_AT_ARGS, (unsigned long long)view->tensor.bits);
  }
  /* Within one node, two accesses of one tensor that overlap, one writing,
   * would race inside the kernel. */
  for (uint32_t j = 0; j + 1 < c->count; ++j) {
    pending *q = &c->acc[j];
    if (q->obj != o || !((q->mode | mode) & KD_OUT) || !kd_footprint_overlap(&q->fp, &p->fp)) continue;
    int overlap = 1;
    if (!kd_footprint_exact(&q->fp) || !kd_footprint_exact(&p->fp)) {
      st = overlap_exactly(q, p, o->elements, op, &overlap);
      if (st) return in_access(c, arg, view, st);
    }
    if (overlap < 0)
      return kd_fail(KD_ERR_ALIASING, KD_AT ": may overlap argument %zu on tensor 0x%llx, and one of them writes: "
                     "their views have more than %d runs each, too many to tell", KD_AT_ARGS, q->arg,
                     (unsigned long long)view->tensor.bits, KD_NODE_ALIAS_RUNS);
    if (overlap)
      return kd_fail(KD_ERR_ALIASING, KD_AT ": overlaps argument %zu on tensor 0x%llx and one of them writes",
                     KD_AT_ARGS, q->arg, (unsigned long long)view->tensor.bits);
  }
  return KD_OK;
#undef KD_AT
#undef KD_AT_ARGS
}

/* A view's numbers in the arena: offset, shape[rank], strides[rank]. */
static size_t view_bytes(int rank) { return kd_arena_size(sizeof(int64_t) * (1 + 2 * (size_t)rank)); }

static const int64_t *store_view(kd_graph *g, const kd_view *v) {
  int64_t *d = kd_arena_take(&g->arena, view_bytes(v->rank));
  d[0] = v->offset;
  for (int i = 0; i < v->rank; ++i) {
    d[1 + i] = v->shape[i];
    d[1 + v->rank + i] = v->strides[i];
  }
  return d;
}

static kd_status no_memory(node_ctx *c) {
  ctx_free(c);
  return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: node '%s' (#%u): no memory to add it; the graph is as it was", c->op,
                 c->name, c->index);
}

/* Adds the node: everything that can fail for want of memory is reserved
 * first, so a rejected node leaves the graph as it was. */
static kd_status ctx_commit(node_ctx *c, kd_gnode *proto, kd_node *out) {
  kd_graph *g = c->g;
  /* Worst cases: an edge per active entry; a query returns at most the
   * active entries plus this node's own; a view's numbers per access; a
   * witness block per active entry a write meets. */
  uint32_t new_bindings = 0, extra_edges = 0, most_active = 0, overwrites = 0;
  size_t name_len = strlen(c->name), arena = kd_arena_size(name_len + 1);
  for (uint32_t i = 0; i < c->count; ++i) {
    const pending *p = &c->acc[i];
    const kd_binding *b = p->binding >= 0 ? &g->bindings[p->binding] : NULL;
    if (!b) new_bindings++;
    uint32_t active = b ? b->reads.count + b->writes.count : 0;
    extra_edges += active;
    overwrites += (p->mode & KD_OUT) ? active : 0;
    if (active > most_active) most_active = active;
    if (!p->whole || !b || !b->whole) arena += view_bytes(p->view->rank);
  }
  if (!KD_GROW(g->nodes, g->node_cap, g->node_count + 1) ||
      !KD_GROW(g->accesses, g->access_cap, g->access_count + c->count) ||
      !KD_GROW(g->bindings, g->binding_cap, g->binding_count + new_bindings) ||
      !KD_GROW(g->edges, g->edge_cap, g->edge_count + extra_edges) ||
      !KD_GROW(g->pred_mark, g->pred_cap, g->node_count + 1) ||
      !kd_grow_zeroed(&g->visit, &g->visit_cap, g->node_count + 1) || /* new room: no earlier stamp */
      (!g->reduce_heap && !(g->reduce_heap = malloc(KD_REDUCE_HEAP * sizeof *g->reduce_heap))) ||
      !KD_GROW(g->found, g->found_cap, most_active + c->count) || !kd_arena_reserve(&g->arena, arena) ||
      !kd_witness_pool_reserve(&g->witness_blocks, overwrites)) {
    return no_memory(c);
  }
  g->pred_mark[g->node_count] = 0;
  /* Bindings: append new ones, reserve entries and index slots. */
  uint32_t bind[KD_NODE_MAX_ACCESSES];
  uint32_t first_new = g->binding_count;
  for (uint32_t i = 0; i < c->count; ++i) {
    int64_t b = c->acc[i].binding;
    if (b < 0) {
      for (uint32_t j = first_new; j < g->binding_count && b < 0; ++j)
        if (g->bindings[j].obj == c->acc[i].obj) b = j;
    }
    if (b < 0) {
      b = g->binding_count++;
      g->bindings[b] = (kd_binding){.obj = c->acc[i].obj};
      kd_ivset_init(&g->bindings[b].reads);
      kd_ivset_init(&g->bindings[b].writes);
    }
    bind[i] = (uint32_t)b;
  }
  int ok = 1;
  for (uint32_t i = 0; i < c->count && ok; ++i) {
    kd_binding *b = &g->bindings[bind[i]];
    ok = kd_ivset_reserve((c->acc[i].mode & KD_OUT) ? &b->writes : &b->reads, c->count) &&
         (bind[i] < first_new || kd_graph_reserve_slot(g, c->acc[i].slot));
  }
  if (!ok) {
    for (uint32_t j = first_new; j < g->binding_count; ++j) {
      kd_ivset_free(&g->bindings[j].reads);
      kd_ivset_free(&g->bindings[j].writes);
    }
    g->binding_count = first_new;
    return no_memory(c);
  }
  /* From here nothing fails. */
  for (uint32_t j = first_new; j < g->binding_count; ++j) kd_tensor_ref(g->bindings[j].obj);
  for (uint32_t i = 0; i < c->count; ++i)
    if (bind[i] >= first_new) g->by_slot[c->acc[i].slot] = bind[i] + 1;
  uint32_t node = g->node_count++, first_edge = g->edge_count;
  uint64_t seen = 0; /* add_edge's filter */
  /* The prototype first, then this node's own fields on the copy: setting
   * them on the prototype and copying it whole made the copy's wide loads
   * wait for those narrow stores (store forwarding cannot serve them). */
  kd_gnode *dst = &g->nodes[node];
  *dst = *proto;
  dst->name = memcpy(kd_arena_take(&g->arena, name_len + 1), c->name, name_len + 1);
  dst->first_access = g->access_count;
  dst->access_count = c->count;
  dst->scope = g->open_count ? g->open[g->open_count - 1] + 1 : 0;
  for (uint32_t i = 0; i < c->count; ++i) {
    pending *p = &c->acc[i];
    kd_binding *b = &g->bindings[bind[i]];
    uint32_t a = g->access_count++;
    kd_gaccess *acc = &g->accesses[a];
    *acc = (kd_gaccess){.node = node, .binding = bind[i], .mode = p->mode, .rank = p->view->rank};
    if (p->whole && !b->whole) b->whole = store_view(g, p->view);
    acc->dims = p->whole ? b->whole : store_view(g, p->view);
    int writes = (p->mode & KD_OUT) && p->fp.count; /* an empty view writes nothing */
    kd_infer_access(g, node, first_edge, &seen, p->mode, &p->fp, bind[i]);
    if (writes) b->written = g->unmarked = 1;
  }
  kd_infer_reduce(g, node, first_edge);
  dst->first_edge = first_edge;
  dst->edge_count = g->edge_count - first_edge;
  c->count = 0; /* footprints now belong to the graph (or were empty) */
  g->plan.valid = 0;
  if (out) *out = node;
  return KD_OK;
}

/* Common prologue: session lock, name, node index for messages. */
kd_status kd_node_enter(kd_graph *g, const char *op, const char *name, node_ctx *c) {
  if (!g) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument graph is NULL", op);
  if (!name || !*name) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument name is NULL or empty", op);
  kd_status st = kd_session_enter_host(g->session, op);
  if (st) return st;
  /* Not memset: acc[] is 64 entries and only count of them are used. */
  c->count = 0;
  c->g = g;
  c->op = op;
  c->name = name;
  c->index = g->node_count;
  return KD_OK;
}

kd_status kd_node_commit(node_ctx *c, kd_status st, kd_gnode *proto, kd_node *out) {
  if (!st) st = kd_scope_admits(c->g, c->op, c->name, c->index, (kd_node_kind)proto->kind);
  if (!st) st = ctx_commit(c, proto, out);
  if (st) ctx_free(c);
  return st;
}
