/* Declaring a task graph: nodes, access checks, inferred order, DOT. */
#include <ck_pr.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "graph/graph_impl.h"
#include "base/grow.h"

_Static_assert(KD_GRAPH_EXACT_RUNS <= KD_IVAL_MAX_RUNS, "an exact footprint's runs must fit an interval entry");

kd_status kd_graph_create(kd_session *s, kd_graph **out) {
  static const char *op = "kd_graph_create";
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out is NULL", op);
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

static void free_node(kd_session *s, kd_gnode *n) {
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
  pthread_mutex_lock(&s->lock);
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
  for (uint32_t i = 0; i < g->node_count; ++i) free_node(s, &g->nodes[i]);
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
  kd_witness_pool_free(&g->witness_blocks);
  kd_arena_free(&g->arena);
  kd_plan_free(&g->plan);
  KD_GROW_FREE(g->by_slot, g->by_slot_cap);
  pthread_mutex_unlock(&s->lock);
  free(g);
}

/* The binding of o (live, in handle slot slot), -1 if o is new to the graph.
 * A slot's entry may be stale (its tensor released, the slot reused): the
 * binding's own object decides. */
static int64_t binding_of(kd_graph *g, kd_tensor_obj *o, uint32_t slot) {
  if (slot >= g->by_slot_cap || !g->by_slot[slot]) return -1;
  uint32_t b = g->by_slot[slot] - 1;
  return g->bindings[b].obj == o ? (int64_t)b : -1;
}

/* Grows a uint32_t array to hold need entries, every new one 0. */
static int grow_zeroed(uint32_t **arr, uint32_t *cap, uint32_t need) {
  if (need <= *cap) return 1;
  uint32_t old = *cap;
  if (!kd_grow((void **)arr, cap, need, sizeof **arr)) return 0; /* KD_GROW's own check is the one above */
  /* Only when it grew: glibc's memset of 0 bytes still issues a masked
   * store at the array's end, which past the last touched page costs a
   * microcode assist (perf put half of kd_graph_edge's time there). */
  memset(*arr + old, 0, (size_t)(*cap - old) * sizeof **arr);
  return 1;
}

/* Makes by_slot[slot] addressable; new entries are empty. */
static int reserve_slot(kd_graph *g, uint32_t slot) { return grow_zeroed(&g->by_slot, &g->by_slot_cap, slot + 1); }

/* ---- one node's accesses, checked before anything changes ------------- */

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
  const char *op;    /* "kd_graph_add" */
  const char *name;  /* the node's name */
  uint32_t index;    /* the node's index if added */
  pending acc[KD_NODE_MAX_ACCESSES];
  uint32_t count;
} node_ctx;

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
static kd_status ctx_access(node_ctx *c, size_t arg, kd_access mode, const kd_view *view, int compact,
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
                   "compact views only: canonicalize it with kd_graph_copy first", KD_AT_ARGS,
                   (unsigned long long)view->tensor.bits);
  p->elements = e.elements;
  p->slot = kd_handle_index(view->tensor.bits);
  p->binding = binding_of(c->g, o, p->slot);
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

/* Edges into the node being added scanned for a repeat; beyond this many,
 * pred_mark is used (a scan would be quadratic in a node's edges). */
#define KD_PRED_SCAN 16

/* Adds the inferred edge from -> to (the node being added, whose edges are
 * [first, edge_count)) unless it exists, in room reserved by ctx_commit.
 * *seen has bit (p mod 64) set for each of those edges' p: a clear bit
 * needs no scan. */
static void add_edge(kd_graph *g, uint32_t first, uint64_t *seen, uint32_t from, uint32_t to, uint32_t binding,
                     kd_hazard hz) {
  if (from == to) return;
  uint32_t have = g->edge_count - first;
  uint64_t bit = 1ull << (from & 63);
  int repeat = 0;
  if (have <= KD_PRED_SCAN) {
    for (uint32_t e = first; (*seen & bit) && e < g->edge_count && !repeat; ++e) repeat = g->edges[e].from == from;
    *seen |= bit;
  } else {
    repeat = g->pred_mark[from] == to + 1;
  }
  if (repeat) {
    g->edges_dropped++;
    return;
  }
  g->edges[g->edge_count++] = (kd_gedge){from, to, binding, hz};
  if (have == KD_PRED_SCAN) { /* from here on pred_mark answers: mark them all */
    for (uint32_t e = first; e < g->edge_count; ++e) g->pred_mark[g->edges[e].from] = to + 1;
  } else if (have > KD_PRED_SCAN) {
    g->pred_mark[from] = to + 1;
  }
}

/* Puts edge e, in room out_head and edge_next have, at the head of its
 * from's outgoing list. */
static void link_edge(kd_graph *g, uint32_t e) {
  uint32_t from = g->edges[e].from;
  g->edge_next[e] = g->out_head[from];
  g->out_head[from] = e + 1;
}

/* Links edges [out_linked, edge_count) into their from's outgoing list, in
 * order, so each list stays newest first, with room for one more edge.
 * 0: out of memory, no edge linked. */
static int link_out(kd_graph *g) {
  if (!grow_zeroed(&g->out_head, &g->out_cap, g->node_count) || /* a new node has no edges yet */
      !KD_GROW(g->edge_next, g->edge_next_cap, g->edge_count + 1))
    return 0;
  for (uint32_t e = g->out_linked; e < g->edge_count; ++e) link_edge(g, e);
  g->out_linked = g->edge_count;
  return 1;
}

/* Orders an access of node after the active accesses of its tensor that it
 * conflicts with, then updates the tensor's active sets; fp moves into
 * them. Cannot fail: the caller reserved edges, entries and scratch.
 *
 * What stays active is what a later access may still have to follow:
 *  - a write that covers an earlier access (read or write) orders it before
 *    everything that later meets either: it retires;
 *  - a read that covers an earlier write shadows it: later writes meet the
 *    read, and are ordered after it, so after the write (reads still meet
 *    the write itself);
 *  - a read that a later write overlaps without covering it is marked
 *    overwritten; a later read that covers it retires it: that read meets
 *    the write, so follows it (and with it the overwritten read), and every
 *    later write that meets the old read meets the new one. Stencil sweeps
 *    read shifted views that reach boundaries no interior write covers;
 *    this is what keeps their readers from piling up sweep after sweep;
 *  - an access that a later write overlaps without covering it keeps a
 *    run of that write as a witness (kd_ival_witnesses): a later access that
 *    meets the witness follows that write, so its edge from the access is
 *    implied (an initial fill of a whole grid, whose boundary no interior
 *    sweep rewrites, is not tied to every sweep after). */
static void infer(kd_graph *g, uint32_t node, uint32_t first_edge, uint64_t *seen, kd_access mode,
                  kd_footprint *fp, uint32_t bi) {
  kd_binding *b = &g->bindings[bi];
  if (!fp->count) return; /* touches nothing, so conflicts with nothing */
  int64_t lo = fp->one.lo, hi = fp->one.hi;
  kd_run witness;
  int has_witness = -1; /* not yet looked for: most writes overwrite nothing in part */
  /* A read conflicts only with writes (and visits the reads only for an
   * overwritten one to retire); a write with both. Entries whose
   * intervals miss [lo, hi) cannot overlap, cover or be covered. The
   * matches come out in each set's own order (none in a small set, by
   * element in a large one), writes then reads: a node's edges are a set
   * (add_edge keeps the first of repeats, and with it that one's hazard
   * for the DOT label), so their order carries no meaning and sorting them
   * would be wasted work. They are visited last first, reads before
   * writes: a retirement from a small set moves its last entry into the
   * retired one's place, which only matches already visited can have been
   * (the two sets are separate arrays). */
  uint32_t n = kd_ivset_find(&b->writes, lo, hi, g->found);
  if ((mode & KD_OUT) || b->reads.overwritten) n += kd_ivset_find(&b->reads, lo, hi, g->found + n);
  for (uint32_t k = n; k-- > 0;) {
    kd_ival *prev = g->found[k];
    int prev_writes = (prev->mode & KD_OUT) != 0;
    if (!prev_writes && mode == KD_IN) { /* two reads: only a retirement */
      if ((prev->flags & KD_IVAL_OVERWRITTEN) && prev->node != node && kd_ival_covered(prev, fp))
        kd_ivset_retire(&b->reads, prev);
      continue;
    }
    if (!kd_ival_overlaps(prev, fp)) continue;
    /* Implied: prev -> covering read -> this write, or prev -> the write
     * its witness is part of -> this access. */
    uint32_t nw;
    const kd_run *w = kd_ival_witnesses(prev, &nw);
    int implied = (prev->flags & KD_IVAL_SHADOWED) && mode == KD_OUT;
    for (uint32_t i = 0; i < nw && !implied; ++i) implied = kd_footprint_meets(fp, w[i]);
    if (implied) {
      g->edges_dropped++;
    } else {
      /* [earlier access][this one], looked up rather than branched on */
      static const uint8_t hazard_of[4][4] = {
          [KD_IN] = {[KD_OUT] = KD_HAZ_WAR, [KD_INOUT] = KD_HAZ_WAR},
          [KD_OUT] = {[KD_IN] = KD_HAZ_RAW, [KD_OUT] = KD_HAZ_WAW, [KD_INOUT] = KD_HAZ_RAW},
          [KD_INOUT] = {[KD_IN] = KD_HAZ_RAW, [KD_OUT] = KD_HAZ_WAW, [KD_INOUT] = KD_HAZ_RAW}};
      add_edge(g, first_edge, seen, prev->node, node, bi, (kd_hazard)hazard_of[prev->mode & 3][mode & 3]);
    }
    if (prev->node == node) continue;
    int covered = kd_ival_covered(prev, fp);
    if (mode == KD_IN) prev->flags |= covered ? KD_IVAL_SHADOWED : 0; /* prev writes */
    else if (covered) kd_ivset_retire(prev_writes ? &b->writes : &b->reads, prev);
    else {
      if (has_witness < 0) has_witness = kd_footprint_witness(fp, &witness);
      kd_ivset_overwrite(prev_writes ? &b->writes : &b->reads, prev, has_witness ? &witness : NULL,
                         &g->witness_blocks);
    }
  }
  kd_ivset_sweep(&b->writes);
  kd_ivset_sweep(&b->reads);
  kd_ivset_insert((mode & KD_OUT) ? &b->writes : &b->reads, node, (uint8_t)mode, fp);
}

/* A new search stamp for g->visit (room for every node reserved). */
static uint32_t visit_stamp(kd_graph *g) {
  if (++g->visit_stamp == 0) { /* wrapped: no entry may look visited */
    memset(g->visit, 0, (size_t)g->visit_cap * sizeof *g->visit);
    g->visit_stamp = 1;
  }
  return g->visit_stamp;
}

/* The transitive reduction of a node's inferred edges: an edge from p is
 * dropped when p reaches another of the node's predecessors, as the order
 * then follows anyway. Nodes are added in an order their inferred edges
 * follow (every edge goes from an earlier node to a later one), so a
 * search backwards from the predecessors, highest node first, finds the
 * implied ones. It looks only at the KD_REDUCE_WINDOW nodes below the
 * highest predecessor (an iterative pipeline's implied edges come from its
 * last sweep or two) and stops after KD_REDUCE_VISITS nodes, or
 * KD_REDUCE_HEAP waiting: what it has not shown implied stays, an edge
 * more, never one missing. Declared edges are not followed (the same: an
 * edge may stay that one of them implies). */
#define KD_REDUCE_WINDOW 64
#define KD_REDUCE_VISITS 64
#define KD_REDUCE_HEAP 256

static void heap_push(uint32_t *h, uint32_t *n, uint32_t v) {
  uint32_t i = (*n)++;
  while (i && h[(i - 1) / 2] < v) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = v;
}

static uint32_t heap_pop(uint32_t *h, uint32_t *n) {
  uint32_t top = h[0], v = h[--*n], i = 0;
  for (;;) {
    uint32_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && h[c + 1] > h[c]) c++;
    if (h[c] <= v) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = v;
  return top;
}

/* Queues u's inferred predecessors not below lowest and not yet queued. */
static void queue_preds(kd_graph *g, uint32_t u, uint32_t lowest, uint32_t stamp, uint32_t *waiting) {
  const kd_gnode *x = &g->nodes[u];
  for (uint32_t e = x->first_edge, end = e + x->edge_count; e < end && *waiting < KD_REDUCE_HEAP; ++e) {
    uint32_t p = g->edges[e].from;
    if (p < lowest || g->visit[p] == stamp) continue;
    g->visit[p] = stamp;
    heap_push(g->reduce_heap, waiting, p);
  }
}

static void reduce(kd_graph *g, uint32_t node, uint32_t first) {
  if (g->edge_count - first < 2) return;
  uint32_t top = 0;
  for (uint32_t e = first; e < g->edge_count; ++e)
    if (g->edges[e].from > top) top = g->edges[e].from;
  /* Only predecessors in the window can be shown implied, and only by
   * another one above them: with one there, nothing to search (and no
   * mark is written: a store to a distant predecessor's mark misses the
   * cache, on most nodes of a large graph). */
  uint32_t floor = top > KD_REDUCE_WINDOW ? top - KD_REDUCE_WINDOW : 0, lowest = top, mark = node + 1, in_window = 0;
  for (uint32_t e = first; e < g->edge_count; ++e) {
    uint32_t p = g->edges[e].from;
    in_window += p >= floor;
    if (p >= floor && p < lowest) lowest = p; /* the search goes no lower */
  }
  if (in_window < 2) return;
  for (uint32_t e = first; e < g->edge_count; ++e)
    if (g->edges[e].from >= lowest) g->pred_mark[g->edges[e].from] = mark; /* not (yet) shown implied */
  uint32_t stamp = visit_stamp(g), waiting = 0;
  for (uint32_t e = first; e < g->edge_count; ++e)
    if (g->edges[e].from > lowest) queue_preds(g, g->edges[e].from, lowest, stamp, &waiting);
  for (uint32_t visits = 0; waiting && visits < KD_REDUCE_VISITS; ++visits) {
    uint32_t u = heap_pop(g->reduce_heap, &waiting);
    if (g->pred_mark[u] == mark) g->pred_mark[u] = 0; /* reached from another predecessor */
    queue_preds(g, u, lowest, stamp, &waiting);
  }
  uint32_t kept = first;
  for (uint32_t e = first; e < g->edge_count; ++e) {
    uint32_t p = g->edges[e].from;
    if (p < lowest || g->pred_mark[p] == mark) g->edges[kept++] = g->edges[e];
  }
  g->edges_dropped += g->edge_count - kept;
  g->edge_count = kept;
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
      !grow_zeroed(&g->visit, &g->visit_cap, g->node_count + 1) || /* new room: no earlier stamp */
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
         (bind[i] < first_new || reserve_slot(g, c->acc[i].slot));
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
  for (uint32_t i = 0; i < c->count; ++i) {
    pending *p = &c->acc[i];
    kd_binding *b = &g->bindings[bind[i]];
    uint32_t a = g->access_count++;
    kd_gaccess *acc = &g->accesses[a];
    *acc = (kd_gaccess){.node = node, .binding = bind[i], .mode = p->mode, .rank = p->view->rank};
    if (p->whole && !b->whole) b->whole = store_view(g, p->view);
    acc->dims = p->whole ? b->whole : store_view(g, p->view);
    int writes = (p->mode & KD_OUT) && p->fp.count; /* an empty view writes nothing */
    infer(g, node, first_edge, &seen, p->mode, &p->fp, bind[i]);
    if (writes) b->written = g->unmarked = 1;
  }
  reduce(g, node, first_edge);
  dst->first_edge = first_edge;
  dst->edge_count = g->edge_count - first_edge;
  c->count = 0; /* footprints now belong to the graph (or were empty) */
  g->plan.valid = 0;
  if (out) *out = node;
  return KD_OK;
}

kd_view kd_access_view(const kd_graph *g, const kd_gaccess *a) {
  kd_view v;
  memset(&v, 0, sizeof v);
  v.tensor.bits = g->bindings[a->binding].obj->handle;
  v.rank = a->rank;
  v.offset = kd_access_offset(a);
  for (int i = 0; i < a->rank; ++i) {
    v.shape[i] = kd_access_shape(a)[i];
    v.strides[i] = kd_access_strides(a)[i];
  }
  return v;
}

/* Common prologue: session lock, name, node index for messages. */
static kd_status node_begin(kd_graph *g, const char *op, const char *name, node_ctx *c) {
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

static kd_status node_end(node_ctx *c, kd_status st, kd_gnode *proto, kd_node *out) {
  if (!st) st = ctx_commit(c, proto, out);
  if (st) ctx_free(c);
  kd_session_leave(c->g->session);
  return st;
}

/* ---- built-in kernels ------------------------------------------------- */

static int same_shape(const kd_view *a, const kd_view *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; ++i)
    if (a->shape[i] != b->shape[i]) return 0;
  return 1;
}

static kd_status need_host_or_builtins(node_ctx *c) {
  kd_session *s = c->g->session;
  if (s->backend == KD_BACKEND_CUDA) return kd_builtins_module(s, c->op, NULL);
  return KD_OK;
}

/* A view's shape as "[4, 6]" (rank 0: "[]"), for messages. */
static const char *shape_text(const kd_view *v, char *buf, size_t cap) {
  size_t used = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < v->rank && used < cap; ++i)
    used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "", (long long)v->shape[i]);
  if (used < cap) snprintf(buf + used, cap - used, "]");
  return buf;
}

/* Checks shapes and dtypes of a built-in's accesses (already resolved). */
static kd_status builtin_types(node_ctx *c, kd_builtin_op op, kd_dtype *dtype) {
  pending *a = c->acc;
  kd_dtype t = a[0].obj->dtype;
  for (uint32_t i = 1; i < c->count; ++i) {
    if (a[i].obj->dtype != t)
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument %zu (tensor 0x%llx) is %s, argument 0 "
                     "(tensor 0x%llx) is %s", c->op, c->name, c->index, a[i].arg,
                     (unsigned long long)a[i].view->tensor.bits, kd_dtype_name(a[i].obj->dtype),
                     (unsigned long long)a[0].view->tensor.bits, kd_dtype_name(t));
    if (op != KD_BI_SUM && !same_shape(a[0].view, a[i].view)) {
      char s0[160], si[160];
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument %zu (tensor 0x%llx) has shape %s, "
                     "argument 0 (tensor 0x%llx) %s", c->op, c->name, c->index, a[i].arg,
                     (unsigned long long)a[i].view->tensor.bits, shape_text(a[i].view, si, sizeof si),
                     (unsigned long long)a[0].view->tensor.bits, shape_text(a[0].view, s0, sizeof s0));
    }
  }
  int fp = t == KD_F32 || t == KD_F64, integer = t == KD_I32 || t == KD_I64;
  if ((op == KD_BI_AXPY || op == KD_BI_SCALE) && !fp)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument 0 (tensor 0x%llx) is %s; this built-in "
                   "takes f32 or f64", c->op, c->name, c->index, (unsigned long long)a[0].view->tensor.bits,
                   kd_dtype_name(t));
  if ((op == KD_BI_ADD || op == KD_BI_SUM) && !fp && !integer)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument 0 (tensor 0x%llx) is %s; this built-in "
                   "takes f32, f64, i32 or i64", c->op, c->name, c->index, (unsigned long long)a[0].view->tensor.bits,
                   kd_dtype_name(t));
  if (op == KD_BI_SUM && a[0].elements != 1) /* counted by ctx_access (an empty view: 0, whatever its shape) */
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument 0 (out, tensor 0x%llx) must hold one "
                   "element, it holds %lld", c->op, c->name, c->index, (unsigned long long)a[0].view->tensor.bits,
                   (long long)a[0].elements);
  *dtype = t;
  return KD_OK;
}

static kd_status builtin(kd_graph *g, const char *op, const char *name, kd_builtin_op bop,
                         const kd_view *views, const kd_access *modes, int count, double alpha,
                         const void *fill, kd_node *out) {
  node_ctx c;
  kd_status st = node_begin(g, op, name, &c);
  if (st) return st;
  kd_gnode proto;
  memset(&proto, 0, sizeof proto);
  proto.kind = KD_NODE_BUILTIN;
  proto.op = bop;
  proto.alpha = alpha;
  for (int i = 0; !st && i < count; ++i) st = ctx_access(&c, (size_t)i, modes[i], &views[i], 0, 0);
  if (!st) st = builtin_types(&c, bop, &proto.dtype);
  if (!st && bop == KD_BI_FILL) {
    if (!fill) st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument value is NULL", op, name, c.index);
    else memcpy(proto.fill, fill, kd_dtype_size(proto.dtype));
  }
  if (!st) st = need_host_or_builtins(&c);
  return node_end(&c, st, &proto, out);
}

kd_status kd_graph_fill(kd_graph *g, const char *name, kd_view dst, const void *value, kd_node *out) {
  kd_access m[] = {KD_OUT};
  return builtin(g, "kd_graph_fill", name, KD_BI_FILL, &dst, m, 1, 0, value, out);
}

kd_status kd_graph_copy(kd_graph *g, const char *name, kd_view dst, kd_view src, kd_node *out) {
  kd_view v[] = {dst, src};
  kd_access m[] = {KD_OUT, KD_IN};
  return builtin(g, "kd_graph_copy", name, KD_BI_COPY, v, m, 2, 0, NULL, out);
}

kd_status kd_graph_transpose(kd_graph *g, const char *name, kd_view dst, kd_view src, kd_node *out) {
  if (!g) return kd_fail(KD_ERR_INVALID_ARGUMENT, "kd_graph_transpose: argument graph is NULL");
  if (!name || !*name) return kd_fail(KD_ERR_INVALID_ARGUMENT, "kd_graph_transpose: argument name is NULL or empty");
  kd_tensor named = src.tensor;
  if (src.rank == -1) { /* resolve the whole tensor to swap its dimensions */
    kd_status st = kd_view_whole(g->session, src.tensor, &src);
    if (st) return kd_fail_context(st, "kd_graph_transpose: node '%s', argument 1 (tensor 0x%llx)", name,
                                   (unsigned long long)named.bits);
  }
  if (src.rank != 2)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "kd_graph_transpose: node '%s': argument 1 (tensor 0x%llx) has rank %d, "
                   "not 2", name, (unsigned long long)named.bits, src.rank);
  int64_t t = src.shape[0];
  src.shape[0] = src.shape[1];
  src.shape[1] = t;
  t = src.strides[0];
  src.strides[0] = src.strides[1];
  src.strides[1] = t;
  kd_view v[] = {dst, src};
  kd_access m[] = {KD_OUT, KD_IN};
  return builtin(g, "kd_graph_transpose", name, KD_BI_COPY, v, m, 2, 0, NULL, out);
}

kd_status kd_graph_add(kd_graph *g, const char *name, kd_view out, kd_view a, kd_view b, kd_node *node) {
  kd_view v[] = {out, a, b};
  kd_access m[] = {KD_OUT, KD_IN, KD_IN};
  return builtin(g, "kd_graph_add", name, KD_BI_ADD, v, m, 3, 0, NULL, node);
}

kd_status kd_graph_axpy(kd_graph *g, const char *name, kd_view y, kd_view x, double alpha, kd_node *out) {
  kd_view v[] = {y, x};
  kd_access m[] = {KD_INOUT, KD_IN};
  return builtin(g, "kd_graph_axpy", name, KD_BI_AXPY, v, m, 2, alpha, NULL, out);
}

kd_status kd_graph_scale(kd_graph *g, const char *name, kd_view y, double alpha, kd_node *out) {
  kd_access m[] = {KD_INOUT};
  return builtin(g, "kd_graph_scale", name, KD_BI_SCALE, &y, m, 1, alpha, NULL, out);
}

kd_status kd_graph_sum(kd_graph *g, const char *name, kd_view out, kd_view x, kd_node *node) {
  kd_view v[] = {out, x};
  kd_access m[] = {KD_OUT, KD_IN};
  return builtin(g, "kd_graph_sum", name, KD_BI_SUM, v, m, 2, 0, NULL, node);
}

/* ---- transfers, host functions ---------------------------------------- */

/* The checks shared by uploads and sinks: one whole, compact tensor whose
 * size is the host buffer's. */
static kd_status transfer_node(node_ctx *c, kd_gnode *proto, kd_node_kind kind, kd_tensor t, const void *host,
                               size_t bytes) {
  memset(proto, 0, sizeof *proto);
  proto->kind = kind;
  proto->host = host;
  proto->bytes = bytes;
  kd_view whole = kd_whole(t); /* of this frame: ctx_access keeps its own copy of a kd_whole */
  if (!host) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument host is NULL", c->op, c->name,
                            c->index);
  kd_status st = ctx_access(c, 0, kind == KD_NODE_UPLOAD ? KD_OUT : KD_IN, &whole, 1, 0);
  if (!st && bytes != c->acc[0].obj->bytes)
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument bytes is %zu, tensor 0x%llx holds %zu",
                 c->op, c->name, c->index, bytes, (unsigned long long)t.bits, c->acc[0].obj->bytes);
  return st;
}

kd_status kd_graph_upload(kd_graph *g, const char *name, kd_tensor dst, const void *host, size_t bytes,
                          kd_node *out) {
  node_ctx c;
  kd_status st = node_begin(g, "kd_graph_upload", name, &c);
  if (st) return st;
  kd_gnode proto;
  st = transfer_node(&c, &proto, KD_NODE_UPLOAD, dst, host, bytes);
  return node_end(&c, st, &proto, out);
}

kd_status kd_graph_sink(kd_graph *g, const char *name, kd_tensor src, void *host, size_t bytes, kd_sink **out) {
  static const char *op = "kd_graph_sink";
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out is NULL", op);
  *out = NULL;
  node_ctx c;
  kd_status st = node_begin(g, op, name, &c);
  if (st) return st;
  kd_gnode proto;
  st = transfer_node(&c, &proto, KD_NODE_SINK, src, host, bytes);
  proto.host = NULL; /* a sink's host memory belongs to the kd_sink */
  kd_sink *sink = NULL;
  if (!st && (!(sink = calloc(1, sizeof *sink)) || !KD_GROW(g->sinks, g->sink_cap, g->sink_count + 1)))
    st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: node '%s' (#%u): no memory for the sink; the graph is as it was", op,
                 name, c.index);
  if (sink) {
    sink->graph = g;
    sink->node = c.index;
    sink->host = host;
    sink->bytes = bytes;
    proto.sink = sink;
  }
  /* Hold the (recursive) lock across node_end so the sink is listed in the
   * same critical section that added its node. */
  pthread_mutex_lock(&g->session->lock);
  st = node_end(&c, st, &proto, NULL);
  if (st) free(sink);
  else g->sinks[g->sink_count++] = sink;
  pthread_mutex_unlock(&g->session->lock);
  if (!st) *out = sink;
  return st;
}

/* compact: the node gets one contiguous span per access (a foreign node),
 * so a strided or broadcast view is refused. */
static kd_status declared(node_ctx *c, const kd_garg *accesses, size_t count, int any_residency, int compact) {
  if (count && !accesses)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument accesses is NULL with count %zu", c->op,
                   c->name, c->index, count);
  for (size_t i = 0; i < count; ++i) {
    if (!accesses[i].is_tensor)
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): access %zu is a value, not a tensor access",
                     c->op, c->name, c->index, i);
    kd_status st = ctx_access(c, i, accesses[i].access, &accesses[i].view, compact, any_residency);
    if (st) return st;
  }
  return KD_OK;
}

kd_status kd_graph_host(kd_graph *g, const char *name, kd_host_fn fn, void *user, const kd_garg *accesses,
                        size_t count, kd_node *out) {
  static const char *op = "kd_graph_host";
  node_ctx c;
  kd_status st = node_begin(g, op, name, &c);
  if (st) return st;
  kd_gnode proto;
  memset(&proto, 0, sizeof proto);
  proto.kind = KD_NODE_HOST;
  proto.host_fn = fn;
  proto.user = user;
  if (!fn) st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument fn is NULL", op, name, c.index);
  if (!st) st = declared(&c, accesses, count, 1, 0); /* accesses only order it: any view */
  if (!st && g->session->has_device) { /* HOST workers mark their own calls */
    proto.host_call = malloc(sizeof *proto.host_call);
    if (!proto.host_call)
      st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: node '%s' (#%u): no memory for its callback record", op, name, c.index);
    else *proto.host_call = (kd_host_call){fn, user};
  }
  st = node_end(&c, st, &proto, out);
  if (st) free(proto.host_call); /* never launched */
  return st;
}

void kd_foreign_res_unref(kd_foreign_res *r) {
  bool zero = false;
  ck_pr_dec_32_zero(&r->refs, &zero);
  if (!zero) return;
  if (r->release) {
    const char *was = kd_callback_enter("a foreign resource's release callback");
    r->release(r->resource);
    kd_callback_leave(was);
  }
  free(r);
}

static void foreign_res_drop(kd_resource *r) { kd_foreign_res_unref((kd_foreign_res *)r); }

kd_status kd_graph_foreign(kd_graph *g, const char *name, kd_foreign_fn fn, void *user, const kd_garg *accesses,
                           size_t count, size_t workspace_bytes, void *resource, void (*release)(void *),
                           kd_node *out) {
  static const char *op = "kd_graph_foreign";
  node_ctx c;
  kd_status st = node_begin(g, op, name, &c);
  if (st) return st;
  kd_gnode proto;
  memset(&proto, 0, sizeof proto);
  proto.kind = KD_NODE_FOREIGN;
  proto.foreign_fn = fn;
  proto.user = user;
  proto.workspace_bytes = workspace_bytes;
  if (g->session->backend != KD_BACKEND_CUDA)
    st = kd_fail(KD_ERR_NO_HOST_IMPL, "%s: node '%s' (#%u): a foreign-library node has no host implementation; "
                 "this session's backend is HOST", op, name, c.index);
  if (!st && !fn) st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument fn is NULL", op, name, c.index);
  /* Refused now, not at a submission's allocation: no device holds it. */
  if (!st && workspace_bytes > g->session->dev.info.memory_bytes)
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): argument workspace_bytes is %zu, more than the "
                 "device's %zu bytes of memory", op, name, c.index, workspace_bytes, g->session->dev.info.memory_bytes);
  if (!st && count > KD_FOREIGN_MAX_ACCESSES)
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s' (#%u): %zu accesses, at most %d", op, name, c.index, count,
                 KD_FOREIGN_MAX_ACCESSES);
  if (!st) st = declared(&c, accesses, count, 0, 1); /* spans: compact views only */
  if (!st && (resource || release)) {
    proto.res = calloc(1, sizeof *proto.res);
    if (!proto.res)
      st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: node '%s' (#%u): no memory for its resource's hold", op, name,
                   c.index);
    else *proto.res = (kd_foreign_res){{foreign_res_drop}, 1, resource, release};
  }
  st = node_end(&c, st, &proto, out);
  if (st && proto.res) free(proto.res); /* never used: the caller keeps its resource */
  return st;
}

/* ---- user kernels ----------------------------------------------------- */

/* "op: node 'name' (#index)", as snprintf would write it (truncated to
 * cap), for the messages of a kernel node's checks. Written on every
 * declaration, before any check can fail, so built by hand: snprintf was
 * a tenth of declaring and launching a one-shot graph. */
static void node_context(char *buf, size_t cap, const char *op, const char *name, uint32_t index) {
  char digits[16];
  size_t nd = 0;
  do digits[nd++] = (char)('0' + index % 10); while ((index /= 10) && nd < sizeof digits);
  const char *parts[] = {op, ": node '", name, "' (#"};
  size_t at = 0;
  for (size_t p = 0; p < 4; ++p)
    for (const char *q = parts[p]; *q && at + 1 < cap; ++q) buf[at++] = *q;
  while (nd && at + 1 < cap) buf[at++] = digits[--nd];
  if (at + 1 < cap) buf[at++] = ')';
  buf[at] = 0;
}

kd_status kd_graph_kernel(kd_graph *g, const char *name, kd_function fn, const kd_launch_config *config,
                          const kd_garg *args, size_t n, kd_node *out) {
  static const char *op = "kd_graph_kernel";
  node_ctx c;
  kd_status st = node_begin(g, op, name, &c);
  if (st) return st;
  kd_session *s = g->session;
  kd_gnode proto;
  memset(&proto, 0, sizeof proto);
  proto.kind = KD_NODE_KERNEL;
  kd_module_obj *mod = NULL;
  kd_cu_function *f = NULL;
  char ctx[300];
  node_context(ctx, sizeof ctx, op, name, c.index);
  if (s->backend != KD_BACKEND_CUDA)
    st = kd_fail(KD_ERR_NO_HOST_IMPL, "%s: a user kernel has no host implementation; this session's backend "
                 "is HOST (%s)", ctx, s->reason);
  if (!st && !config) st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument config is NULL", ctx);
  if (!st && n && !args) st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: args is NULL with %zu arguments", ctx, n);
  if (!st) st = kd_function_lookup(s, fn, &mod, &f, ctx);
  /* Raising the kernel's dynamic shared-memory limit (kd_cu_check_config)
   * is a driver call, which this host-only call makes current for. */
  if (!st && (int64_t)config->shared_bytes > f->dyn_smem_limit) kd_session_device(s);
  if (!st) st = kd_session_note(s, kd_cu_check_config(&s->dev, ctx, f, config));
  if (!st && n > KD_PTX_MAX_PARAMS) /* a launch passes at most this many, whatever the driver reports */
    st = kd_fail(KD_ERR_ARGUMENT_MISMATCH, "%s: %zu arguments given; a kernel takes at most %d", ctx, n,
                 KD_PTX_MAX_PARAMS);
  if (!st && f->params_known && f->param_count != n)
    st = kd_fail(KD_ERR_ARGUMENT_MISMATCH, "%s: kernel %s takes %u parameters, %zu arguments given", ctx, f->name,
                 f->param_count, n);
  if (!st && n && !(proto.args = calloc(n, sizeof *proto.args)))
    st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory", ctx);
  for (size_t i = 0; !st && i < n; ++i) {
    size_t size = args[i].is_tensor ? sizeof(CUdeviceptr) : kd_arg_size(&args[i].value);
    if (!args[i].is_tensor && ((unsigned)args[i].value.kind < KD_ARG_I32 || args[i].value.kind > KD_ARG_BYTES)) {
      st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument %zu is a value of kind %d; tensors go through "
                   "kd_g_in/kd_g_out/kd_g_inout", ctx, i, (int)args[i].value.kind);
      break;
    }
    if (f->params_known && size != f->param_sizes[i]) {
      char what[48] = "";
      if (args[i].is_tensor)
        snprintf(what, sizeof what, " (tensor 0x%llx, a device pointer)", (unsigned long long)args[i].view.tensor.bits);
      st = kd_fail(KD_ERR_ARGUMENT_MISMATCH, "%s: kernel %s parameter %zu is %u bytes, argument %zu%s is %zu bytes",
                   ctx, f->name, i, f->param_sizes[i], i, what, size);
      break;
    }
    if (args[i].is_tensor) {
      proto.args[i].access = (int)c.count;
      st = ctx_access(&c, i, args[i].access, &args[i].view, 1, 0);
    } else {
      proto.args[i].access = -1;
      proto.args[i].value = args[i].value;
      if (args[i].value.kind == KD_ARG_BYTES) {
        const kd_arg *a = &args[i].value;
        void *copy = NULL;
        if (!a->v.bytes.data || !a->v.bytes.size)
          st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument %zu (bytes) is NULL or empty", ctx, i);
        else if (!(copy = malloc(a->v.bytes.size)))
          st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: argument %zu: no memory for its %zu bytes", ctx, i, a->v.bytes.size);
        if (st) {
          proto.args[i].value.kind = KD_ARG_I32; /* nothing to free */
          break;
        }
        memcpy(copy, a->v.bytes.data, a->v.bytes.size);
        proto.args[i].value.v.bytes.data = copy;
      }
    }
    proto.arg_count = (uint32_t)(i + 1);
  }
  if (!st) {
    proto.module = mod;
    proto.fn_index = fn.index;
    proto.config = *config;
    kd_module_ref(mod);
  }
  kd_gnode copy = proto;
  /* A refused node's cleanup may drop the module's last reference (another
   * thread released its handle meanwhile), which frees a handle slot and
   * unloads: under the session's (recursive) lock, as kd_graph_destroy's. */
  pthread_mutex_lock(&s->lock);
  st = node_end(&c, st, &proto, out);
  if (st) free_node(s, &copy);
  pthread_mutex_unlock(&s->lock);
  return st;
}

/* ---- edges, rebinding, DOT ------------------------------------------- */

/* 1 when to is reachable from from along the graph's edges: a depth-first
 * search over the outgoing lists, in room the caller reserved (visit and
 * dfs cover every node), visiting only what from reaches. */
static int reachable(kd_graph *g, uint32_t from, uint32_t to) {
  uint32_t stamp = visit_stamp(g), top = 0;
  g->dfs[top++] = from;
  g->visit[from] = stamp;
  while (top) {
    uint32_t n = g->dfs[--top];
    if (n == to) return 1;
    for (uint32_t e = g->out_head[n]; e; e = g->edge_next[e - 1]) {
      uint32_t next = g->edges[e - 1].to;
      if (g->visit[next] != stamp) {
        g->visit[next] = stamp;
        g->dfs[top++] = next;
      }
    }
  }
  return 0;
}

kd_status kd_graph_edge(kd_graph *g, kd_node before, kd_node after) {
  static const char *op = "kd_graph_edge";
  if (!g) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument graph is NULL", op);
  kd_status st = kd_session_enter_host(g->session, op);
  if (st) return st;
  if (before >= g->node_count || after >= g->node_count || before == after)
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: nodes %u -> %u: %s", op, before, after,
                 before == after        ? "a node cannot follow itself"
                 : before >= g->node_count ? "argument before is no node of this graph"
                                           : "argument after is no node of this graph");
  if (!st && (!KD_GROW(g->edges, g->edge_cap, g->edge_count + 1) || !link_out(g) ||
              !grow_zeroed(&g->visit, &g->visit_cap, g->node_count) || /* new room: no earlier stamp */
              !KD_GROW(g->dfs, g->dfs_cap, g->node_count)))
    st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: nodes %u -> %u: no memory; the graph is as it was", op, before, after);
  /* An edge that exists already, declared or inferred, is not added again:
   * a CUDA graph node's dependencies must not repeat. */
  int duplicate = 0;
  for (uint32_t e = st ? 0 : g->out_head[before]; e && !duplicate; e = g->edge_next[e - 1])
    duplicate = g->edges[e - 1].to == after;
  if (duplicate) {
    g->edges_dropped++;
    kd_session_leave(g->session);
    return KD_OK;
  }
  if (!st && reachable(g, after, before))
    st = kd_fail(KD_ERR_CYCLE, "%s: edge '%s' (#%u) -> '%s' (#%u) would close a cycle: '%s' already runs after '%s'",
                 op, g->nodes[before].name, before, g->nodes[after].name, after, g->nodes[before].name,
                 g->nodes[after].name);
  if (!st) {
    uint32_t e = g->edge_count++; /* in the room link_out made, linked at once */
    g->edges[e] = (kd_gedge){before, after, UINT32_MAX, KD_HAZ_EXPLICIT};
    link_edge(g, e);
    g->out_linked = g->edge_count;
    g->plan.valid = 0;
  }
  kd_session_leave(g->session);
  return st;
}

kd_status kd_graph_rebind(kd_graph *g, kd_tensor old, kd_tensor replacement) {
  static const char *op = "kd_graph_rebind";
  if (!g) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument graph is NULL", op);
  kd_status st = kd_session_enter_host(g->session, op);
  if (st) return st;
  kd_tensor_obj *a = NULL, *b = NULL;
  st = kd_tensor_lookup(g->session, old, &a, op, "old");
  if (!st) st = kd_tensor_lookup(g->session, replacement, &b, op, "replacement");
  uint32_t slot_a = kd_handle_index(old.bits), slot_b = kd_handle_index(replacement.bits);
  int64_t idx = st ? -1 : binding_of(g, a, slot_a);
  if (!st && idx < 0) st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument old is not used by this graph", op);
  if (!st && binding_of(g, b, slot_b) >= 0)
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
    if (!reserve_slot(g, slot_b) ||
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
  if (!g || !f) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument %s is NULL", op, g ? "out" : "graph");
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
  if (!g || !out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "kd_graph_stats_get: argument %s is NULL", g ? "out" : "graph");
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
