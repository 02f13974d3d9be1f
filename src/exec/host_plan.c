/* SPDX-License-Identifier: Apache-2.0 */
/* The HOST executor's task table: each node of a graph's plan resolved
 * once against the bindings, kept with the plan (kd_plan.exec) and shared
 * by its runs. A rebinding re-resolves it before the next submission, in
 * place when no run holds it, else into a fresh table, so work in flight
 * never sees a change. */
#include <ck_pr.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "exec/exec.h"

void kd_host_plan_unref(kd_host_plan *hp) {
  if (!hp || !kd_host_dec_to_zero(&hp->refs)) return; /* a worker's reads of the table before whoever frees it */
  for (uint32_t i = 0; hp->tasks && i < hp->task_count; ++i)
    if (hp->tasks[i].kind == KD_NODE_FOREIGN && hp->tasks[i].hold) kd_foreign_res_unref(hp->tasks[i].hold);
  free(hp->tasks);
  free(hp->views);
  free(hp->spans);
  free(hp->succ_start);
  free(hp->succ);
  free(hp->indegree);
  free(hp->roots);
  free(hp->xfer_off);
  free(hp->xfer_task);
  free(hp->order);
  free(hp);
}

static void plan_destroy(kd_resource *r) { kd_host_plan_unref((kd_host_plan *)r); }

/* Fills the binding-dependent fields of every task: built-ins' views,
 * transfers' tensor addresses. Called on a table no run holds. */
static void resolve(kd_graph *g, kd_host_plan *hp) {
  for (uint32_t i = 0; i < hp->task_count; ++i) {
    kd_gnode *node = &g->nodes[i];
    kd_host_task *t = &hp->tasks[i];
    if (node->kind == KD_NODE_BUILTIN) {
      for (uint32_t k = 0; k < node->access_count && k < 3; ++k) {
        kd_gaccess *a = &g->accesses[node->first_access + k];
        kd_tensor_obj *o = g->bindings[a->binding].obj;
        hp->views[t->slot + k] = kd_access_kview(a, (uint64_t)(uintptr_t)o->host, kd_dtype_size(o->dtype));
      }
    } else if (node->kind == KD_NODE_UPLOAD || node->kind == KD_NODE_SINK) {
      void *mem = g->bindings[g->accesses[node->first_access].binding].obj->host;
      if (node->kind == KD_NODE_UPLOAD) t->tensor = mem;
      else t->host = mem;
    } else if (node->kind == KD_NODE_FOREIGN) {
      kd_foreign_spans(g, node, &hp->spans[t->slot]);
    } else if (node->kind == KD_NODE_LOOP) { /* whole one-element tensors */
      t->cond = g->bindings[g->accesses[node->first_access].binding].obj->host;
      t->trips = node->has_trips ? g->bindings[g->accesses[node->first_access + 1].binding].obj->host : NULL;
    }
  }
}

/* Whether built-in node's work may be split across workers: an
 * element-wise op over enough elements (sum keeps its one fixed order). */
static int splittable(const kd_host_plan *hp, const kd_host_task *t) {
  if (t->op == KD_BI_SUM) return 0;
  return kd_kview_numel(&hp->views[t->slot]) >= KD_HOST_SPLIT_MIN_ELEMS;
}

static kd_status build(kd_graph *g, const char *op, kd_host_plan **out) {
  uint32_t n = g->node_count, m = g->plan.edge_count, builtins = 0, xfers = 0, spans = 0;
  for (uint32_t i = 0; i < n; ++i) {
    builtins += g->nodes[i].kind == KD_NODE_BUILTIN;
    spans += g->nodes[i].kind == KD_NODE_FOREIGN ? g->nodes[i].access_count : 0;
    xfers += g->nodes[i].kind == KD_NODE_UPLOAD || g->nodes[i].kind == KD_NODE_SINK;
  }
  kd_host_plan *hp = calloc(1, sizeof *hp);
  if (hp) {
    hp->res.destroy = plan_destroy;
    hp->refs = 1;
    hp->task_count = n;
    hp->tasks = calloc((size_t)n + 1, sizeof *hp->tasks);
    hp->views = calloc(3 * (size_t)builtins + 1, sizeof *hp->views);
    hp->spans = calloc((size_t)spans + 1, sizeof *hp->spans);
    hp->succ_start = malloc(((size_t)n + 1) * sizeof *hp->succ_start);
    hp->succ = malloc(((size_t)m + 1) * sizeof *hp->succ);
    hp->indegree = malloc(((size_t)n + 1) * sizeof *hp->indegree);
    hp->roots = malloc(((size_t)n + 1) * sizeof *hp->roots);
    hp->xfer_off = malloc(((size_t)xfers + 1) * sizeof *hp->xfer_off);
    hp->xfer_task = malloc(((size_t)xfers + 1) * sizeof *hp->xfer_task);
    if (g->plan.loops) hp->order = malloc(((size_t)n + 1) * sizeof *hp->order);
  }
  if (!hp || !hp->tasks || !hp->views || !hp->spans || !hp->succ_start || !hp->succ || !hp->indegree || !hp->roots ||
      !hp->xfer_off || !hp->xfer_task || (g->plan.loops && !hp->order)) {
    kd_host_plan_unref(hp);
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the HOST plan of %u nodes", op, n);
  }
  memcpy(hp->succ_start, g->plan.succ_start, ((size_t)n + 1) * sizeof *hp->succ_start);
  memcpy(hp->succ, g->plan.succ, (size_t)m * sizeof *hp->succ);
  memcpy(hp->indegree, g->plan.indegree, (size_t)n * sizeof *hp->indegree);
  if (hp->order) memcpy(hp->order, g->plan.order, (size_t)n * sizeof *hp->order);
  hp->top_count = g->plan.top_count;
  size_t off = 0;
  uint32_t views = 0;
  spans = 0;
  for (uint32_t i = 0; i < n; ++i) {
    kd_gnode *node = &g->nodes[i];
    kd_host_task *t = &hp->tasks[i];
    if (!hp->indegree[i] && !node->scope) hp->roots[hp->root_count++] = i; /* bodies run in their loop */
    t->item.kind = KD_HOST_ITEM_TASK;
    t->node = i;
    t->kind = node->kind;
    switch (node->kind) {
      case KD_NODE_BUILTIN: {
        kd_tensor_obj *o = g->bindings[g->accesses[node->first_access].binding].obj;
        t->op = (uint8_t)node->op;
        t->kdt = (uint8_t)kd_kdtype_of(o->dtype);
        t->esize = kd_dtype_size(o->dtype);
        t->alpha = node->alpha;
        memcpy(t->fill.w, node->fill, sizeof t->fill.w);
        t->slot = views;
        views += 3;
        break;
      }
      case KD_NODE_UPLOAD:
      case KD_NODE_SINK:
        t->host = node->kind == KD_NODE_UPLOAD ? node->host : NULL;
        t->bytes = node->bytes;
        t->slot = hp->xfer_count;
        hp->xfer_task[hp->xfer_count] = i;
        hp->xfer_off[hp->xfer_count++] = off;
        off += (node->bytes + 63) & ~(size_t)63; /* each on its own cache lines */
        break;
      case KD_NODE_HOST:
        t->fn = node->host_fn;
        t->user = node->user;
        break;
      case KD_NODE_LOOP:
        t->max_trips = node->max_trips;
        t->body_first = g->plan.body_start[i];
        t->body_count = g->plan.body_count[i];
        break;
      case KD_NODE_FOREIGN: /* only kdag's own (collectives) are admitted on HOST */
        t->ffn = node->foreign_fn;
        t->fuser = node->user;
        t->resource = node->res ? node->res->resource : NULL;
        t->hold = node->res; /* released with the table, after the last run using it */
        if (t->hold) ck_pr_inc_32(&t->hold->refs);
        t->span_count = node->access_count;
        t->slot = spans;
        spans += node->access_count;
        break;
      default: break; /* kernel nodes are refused when added to a HOST session */
    }
  }
  hp->xfer_off[hp->xfer_count] = off;
  resolve(g, hp);
  for (uint32_t i = 0; i < n; ++i) {
    kd_host_task *t = &hp->tasks[i];
    if (t->kind == KD_NODE_BUILTIN && !g->nodes[i].scope && splittable(hp, t)) { /* bodies run on one worker */
      t->split = 1;
      t->part = hp->split_count++;
    }
  }
  *out = hp;
  return KD_OK;
}

kd_status kd_host_plan_get(kd_graph *g, const char *op, kd_host_plan **out) {
  kd_host_plan *hp = (kd_host_plan *)g->plan.exec;
  if (!hp) {
    kd_status st = build(g, op, &hp);
    if (st) return st;
    g->plan.exec = &hp->res;
  } else if (g->rebound_count) {
    /* Runs drop their references on workers; 1 (the graph's) read here,
     * under the session lock, means none holds it or can take it. */
    if (ck_pr_load_32(&hp->refs) == 1) {
      ck_pr_fence_acquire();
      resolve(g, hp);
    } else {
      kd_host_plan *c = NULL;
      kd_status st = build(g, op, &c); /* the same graph: the same table over the new bindings */
      if (st) return st;
      kd_host_plan_unref(hp);
      hp = c;
      g->plan.exec = &hp->res;
    }
  }
  kd_graph_changes_clear(g);
  *out = hp;
  return KD_OK;
}
