/* SPDX-License-Identifier: Apache-2.0 */
/* Inferred order: each access ordered after the earlier active accesses
 * of its tensor that it conflicts with, the implied edges dropped, and
 * declared edges (kd_graph_edge) checked for cycles. */
#include <string.h>

#include "base/status_internal.h"
#include "base/grow.h"
#include "graph/build.h"

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
  if (!kd_grow_zeroed(&g->out_head, &g->out_cap, g->node_count) || /* a new node has no edges yet */
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
void kd_infer_access(kd_graph *g, uint32_t node, uint32_t first_edge, uint64_t *seen, kd_access mode,
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

void kd_infer_reduce(kd_graph *g, uint32_t node, uint32_t first) {
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
  if (!st && g->nodes[before].scope != g->nodes[after].scope)
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: nodes '%s' (#%u) -> '%s' (#%u): %s; an edge joins nodes of one level "
                 "(order a loop's body as a whole through its loop node)", op, g->nodes[before].name, before,
                 g->nodes[after].name, after, "they are in different loop bodies, or one is at the top level");
  if (!st && (!KD_GROW(g->edges, g->edge_cap, g->edge_count + 1) || !link_out(g) ||
              !kd_grow_zeroed(&g->visit, &g->visit_cap, g->node_count) || /* new room: no earlier stamp */
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
