/* SPDX-License-Identifier: Apache-2.0 */
/* The EAGER executor: every node of the plan, in topological order, on the
 * session's one stream. Ordering comes from the stream itself; the edges
 * matter for the HOST pool and for GRAPH mode. */
#include <ck_pr.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "cuda/cu_status.h"
#include "exec/exec.h"
#include "session/trace.h"

/* Launches node v; *prev is the node whose kernel was the last thing
 * enqueued on the stream in this submission (UINT32_MAX if none): v
 * starts programmatically after it when v opted in (kd_pdl_wanted) and no
 * declared edge leads to v. An empty launch enqueues nothing and leaves
 * *prev as it was. */
static kd_status launch(kd_graph *g, const char *op, uint32_t v, uint32_t *prev) {
  kd_session *s = g->session;
  kd_node_launch L;
  kd_status st = kd_node_launch_resolve(g, op, &g->nodes[v], &L);
  if (st || L.empty) return st;
  const uint8_t *explicit_in = kd_cuda_plan_get(g)->explicit_in;
  int programmatic = *prev != UINT32_MAX && kd_pdl_wanted(g, &L) && !(explicit_in && explicit_in[v]);
  st = kd_session_note(s, kd_cu_launch(&s->dev, op, L.fn, &L.cfg, L.count ? L.params : NULL, programmatic));
  if (st) return st;
  s->counters.launches++;
  s->counters.programmatic_edges += (uint64_t)programmatic;
  *prev = v;
  return KD_OK;
}

/* Enqueues a transfer node's copy (and a sink's event) with the staging
 * and event taken for it, marking in x what enqueued work now uses. */
static kd_status transfer(kd_session *s, const char *op, kd_graph *g, kd_gnode *node, kd_xfer *x) {
  CUdeviceptr dptr = g->bindings[g->accesses[node->first_access].binding].obj->dptr;
  const kd_cu_table *cu = s->dev.cu;
  CUresult r;
  if (node->kind == KD_NODE_UPLOAD) {
    r = cu->cuMemcpyHtoDAsync(dptr, x->block->host, node->bytes, s->dev.stream);
    if (r != CUDA_SUCCESS) return kd_session_note(s, kd_fail_cu(r, op, "cuMemcpyHtoDAsync"));
    x->copying = 1;
    return KD_OK;
  }
  if (node->bytes) {
    r = cu->cuMemcpyDtoHAsync(x->block->host, dptr, node->bytes, s->dev.stream);
    if (r != CUDA_SUCCESS) return kd_session_note(s, kd_fail_cu(r, op, "cuMemcpyDtoHAsync"));
    x->copying = 1;
  }
  r = cu->cuEventRecord(x->event, s->dev.stream);
  if (r != CUDA_SUCCESS) return kd_session_note(s, kd_fail_cu(r, op, "cuEventRecord"));
  x->recorded = 1;
  return KD_OK;
}

static kd_status foreign_call(kd_session *s, const char *op, kd_graph *g, kd_gnode *node, CUdeviceptr workspace,
                              kd_held_set *held) {
  kd_span spans[KD_FOREIGN_MAX_ACCESSES];
  kd_foreign_spans(g, node, spans);
  kd_foreign_call call = {(void *)s->dev.stream, spans, node->access_count, workspace, node->workspace_bytes,
                          node->res ? node->res->resource : NULL};
  if (node->res) {
    (void)kd_held_add(held, KD_HELD_RESOURCE, &node->res->res, op); /* reserved: cannot fail */
    ck_pr_inc_32(&node->res->refs);
  }
  kd_status st = kd_foreign_invoke(node, &call);
  if (st) return kd_fail_context(st, "%s: foreign node '%s'", op, node->name);
  return KD_OK;
}

/* Every foreign node's workspace, into the plan's per-node array
 * (kd_cuda_plan.workspace), allocated in stream order before anything is
 * enqueued and held until the submission completes. */
static kd_status workspaces_take(kd_graph *g, const char *op, kd_held_set *held) {
  kd_session *s = g->session;
  kd_cuda_plan *cp = kd_cuda_plan_get(g);
  if (!cp->workspaces) return KD_OK;
  CUdeviceptr *ws = cp->workspace;
  for (uint32_t n = 0; n < g->node_count; ++n) {
    kd_gnode *node = &g->nodes[n];
    if (node->kind != KD_NODE_FOREIGN || !node->workspace_bytes) continue;
    kd_status st = kd_session_note(s, kd_device_alloc(&s->dev, op, node->workspace_bytes, &ws[n]));
    if (st) /* the ones allocated are in held: freed in stream order */
      return kd_fail_context(st, "%s: foreign node '%s' (#%u): its %zu-byte workspace", op, node->name, n,
                             node->workspace_bytes);
    (void)kd_held_add(held, KD_HELD_DEVPTR, (void *)(uintptr_t)ws[n], op); /* reserved: cannot fail */
  }
  return KD_OK;
}

/* The host waits for what the stream holds so far, on an event of its
 * own (counted in event_waits); what names the wait in a failure. Used by
 * the per-node debug option (a fault is then charged to the node that
 * caused it) and by loops, before each trip. */
static kd_status wait_here(kd_session *s, const char *op, const char *what) {
  CUevent ev;
  kd_status st = kd_session_note(s, kd_event_acquire(&s->dev, op, &ev));
  if (st) return st;
  CUresult r = s->dev.cu->cuEventRecord(ev, s->dev.stream);
  if (r == CUDA_SUCCESS) {
    s->counters.event_waits++;
    r = kd_event_wait(&s->dev, ev);
  }
  kd_event_release_to_pool(&s->dev, ev);
  return r == CUDA_SUCCESS ? KD_OK : kd_session_note(s, kd_fail_cu(r, op, what));
}

/* Each node's name registered with the NVTX tool, once per plan; NULL
 * without memory (the ranges then carry the names as text). */
static kd_nvtx_string *nvtx_names(kd_graph *g) {
  kd_cuda_plan *cp = kd_cuda_plan_get(g);
  if (!cp->nvtx_names && (cp->nvtx_names = calloc(g->node_count + 1, sizeof *cp->nvtx_names)))
    for (uint32_t n = 0; n < g->node_count; ++n) cp->nvtx_names[n] = kd_nvtx_register(g->nodes[n].name);
  return cp->nvtx_names;
}

/* One EAGER submission's state while it enqueues. */
typedef struct eager_run {
  kd_graph *g;
  const char *op;
  kd_held_set *held;
  uint64_t stamp;
  kd_xfer *xf;
  int traced;
  kd_nvtx_string *names;
  kd_trace_batch *tb;
  /* The node whose kernel was enqueued last, with nothing after it: what a
   * launch may overlap programmatically (launch). Any other enqueue, a
   * trace's event records and a debug wait included, clears it. */
  uint32_t prev;
  uint32_t spans;          /* trace spans recorded: the top level's nodes before the one running */
  kd_staging_block *cond_word; /* pinned: where loops read their condition (graphs with loops) */
} eager_run;

static kd_status run_node(eager_run *c, uint32_t v, uint32_t i, int top);

/* A loop, driven from the host: before each trip the condition is copied
 * into pinned memory and waited for (an event of its own: a wait per
 * trip), and the trip count, when the loop has one, set to the trips
 * completed; then the body's nodes in their order. */
static kd_status run_loop(eager_run *c, uint32_t v) {
  kd_graph *g = c->g;
  kd_session *s = g->session;
  const kd_cu_table *cu = s->dev.cu;
  kd_gnode *node = &g->nodes[v];
  CUdeviceptr cond = g->bindings[g->accesses[node->first_access].binding].obj->dptr;
  CUdeviceptr trips = node->has_trips ? g->bindings[g->accesses[node->first_access + 1].binding].obj->dptr : 0;
  volatile uint32_t *word = c->cond_word->host;
  kd_status st = KD_OK;
  for (uint32_t done = 0; !st; ++done) {
    c->prev = UINT32_MAX;
    CUresult r;
    if (trips && (r = cu->cuMemsetD32Async(trips, done, 1, s->dev.stream)) != CUDA_SUCCESS)
      return kd_session_note(s, kd_fail_cu(r, c->op, "cuMemsetD32Async (the loop's trip count)"));
    if (done >= node->max_trips) break;
    r = cu->cuMemcpyDtoHAsync(c->cond_word->host, cond, sizeof(uint32_t), s->dev.stream);
    if (r != CUDA_SUCCESS) return kd_session_note(s, kd_fail_cu(r, c->op, "cuMemcpyDtoHAsync (the loop's condition)"));
    st = wait_here(s, c->op, "cuEventSynchronize (the loop's condition)");
    if (st) return st;
    if (!*word) break;
    for (uint32_t k = 0; !st && k < g->plan.body_count[v]; ++k)
      st = run_node(c, g->plan.order[g->plan.body_start[v] + k], 0, 0);
  }
  c->prev = UINT32_MAX;
  return st;
}

/* Enqueues node v (at position i of the top level when top; a node of a
 * loop's body has no trace span of its own: its loop's span covers it). */
static kd_status run_node(eager_run *c, uint32_t v, uint32_t i, int top) {
  kd_graph *g = c->g;
  kd_session *s = g->session;
  const char *op = c->op;
  kd_gnode *node = &g->nodes[v];
  kd_status st = KD_OK;
  if (c->traced) kd_nvtx_push(c->names ? c->names[v] : NULL, node->name, KD_NVTX_NODE);
  CUevent span_begin = NULL, span_end = NULL;
  if (c->tb && top) {
    c->prev = UINT32_MAX;
    kd_trace_batch_span(c->tb, i, node->name, "node", &span_begin, &span_end);
    (void)s->dev.cu->cuEventRecord(span_begin, s->dev.stream); /* unrecorded, the span is dropped at retire */
  }
  /* Held room was reserved: these cannot fail. */
  for (uint32_t k = 0; k < node->access_count; ++k)
    (void)kd_held_tensor_once(c->held, g->bindings[g->accesses[node->first_access + k].binding].obj, c->stamp, op);
  if (node->kind != KD_NODE_KERNEL && node->kind != KD_NODE_BUILTIN) c->prev = UINT32_MAX;
  switch (node->kind) {
    case KD_NODE_KERNEL:
      (void)kd_held_module_once(c->held, node->module, c->stamp, op);
      st = launch(g, op, v, &c->prev);
      break;
    case KD_NODE_BUILTIN: st = launch(g, op, v, &c->prev); break;
    case KD_NODE_UPLOAD:
    case KD_NODE_SINK: {
      kd_xfer *x = kd_xfer_of(g, c->xf, v);
      if (x) st = transfer(s, op, g, node, x); /* else an upload of nothing */
      break;
    }
    case KD_NODE_HOST: {
      CUresult r = s->dev.cu->cuLaunchHostFunc(s->dev.stream, kd_host_trampoline, node->host_call);
      if (r != CUDA_SUCCESS) st = kd_session_note(s, kd_fail_cu(r, op, "cuLaunchHostFunc"));
      break;
    }
    case KD_NODE_FOREIGN: /* the plan has a workspace array when a foreign node has a workspace */
      st = foreign_call(s, op, g, node, kd_cuda_plan_get(g)->workspace ? kd_cuda_plan_get(g)->workspace[v] : 0,
                        c->held);
      break;
    case KD_NODE_LOOP: st = run_loop(c, v); break;
  }
  if (c->tb && top && !st) {
    (void)s->dev.cu->cuEventRecord(span_end, s->dev.stream);
    c->spans = i + 1;
    c->prev = UINT32_MAX;
  }
  if (!st && (s->opts.flags & KD_SESSION_DEBUG_NODES)) {
    st = wait_here(s, op, "cuEventSynchronize (per-node debug event)");
    c->prev = UINT32_MAX;
  }
  if (c->traced) kd_nvtx_pop();
  if (st && node->kind != KD_NODE_LOOP) st = kd_fail_context(st, "%s: node '%s' (#%u)", op, node->name, v);
  else if (st) st = kd_fail_context(st, "%s: in loop '%s' (#%u)", op, node->name, v);
  return st;
}

kd_status kd_exec_eager(kd_graph *g, const char *op, kd_held_set *held, uint64_t stamp, int *enqueued) {
  kd_session *s = g->session;
  *enqueued = 0;
  /* Everything that can run out is taken first, so that a shortage of
   * memory or events enqueues nothing: room in held for what the nodes
   * use (a tensor per binding at most), transfers, workspaces. */
  kd_xfer *xf = NULL;
  kd_status st = kd_held_reserve_warm(s, held, g->binding_count + kd_cuda_plan_get(g)->holds, op);
  if (!st) st = kd_xfers_take(g, op, &xf);
  if (!st) st = workspaces_take(g, op, held);
  if (st) {
    kd_xfers_settle(g, xf, 0, held, op);
    return st;
  }
  *enqueued = g->node_count != 0;
  /* A range per node, inside the submission's (exec/submit.c), and with a
   * trace a span per node on the GPU (session/trace.h). */
  int traced = kd_nvtx_on();
  kd_nvtx_string *names = traced ? nvtx_names(g) : NULL;
  kd_trace_batch *tb = NULL;
  if (s->trace) {
    kd_fail_keep keep; /* without a batch the nodes' spans are left out; the submission goes on */
    kd_fail_keep_begin(&keep);
    (void)kd_trace_batch_new(s, g->node_count, op, &tb);
    kd_fail_keep_end(&keep);
  }
  eager_run c = {g, op, held, stamp, xf, traced, names, tb, UINT32_MAX, 0, NULL};
  if (g->plan.loops) { /* the pinned word loops read their condition into, before anything is enqueued */
    st = kd_session_note(s, kd_staging_get(&s->dev, op, sizeof(uint32_t), &c.cond_word));
    if (st) {
      kd_xfers_settle(g, xf, 0, held, op);
      *enqueued = 0;
      return st;
    }
  }
  for (uint32_t i = 0; !st && i < g->plan.top_count; ++i) st = run_node(&c, g->plan.order[i], i, 1);
  if (c.cond_word) {
    /* Its last copy was waited for, unless a driver refusal cut a trip
     * short after the copy was enqueued: then the submission holds it. */
    kd_fail_keep keep;
    kd_fail_keep_begin(&keep);
    if (!st || kd_held_add(held, KD_HELD_STAGING, c.cond_word, op) != KD_OK) {
      if (st) (void)kd_stream_wait(&s->dev);
      kd_staging_put(&s->dev, c.cond_word);
    }
    kd_fail_keep_end(&keep);
  }
  uint32_t spans = c.spans;
  if (tb) {
    kd_fail_keep keep;
    kd_fail_keep_begin(&keep);
    kd_trace_batch_used(tb, spans);
    if (!spans || kd_held_add(held, KD_HELD_RESOURCE, kd_trace_batch_resource(tb), op) != KD_OK)
      kd_trace_batch_drop(tb);
    kd_fail_keep_end(&keep);
  }
  /* Refused part way (the driver refused an enqueue, or a foreign callback
   * failed): the nodes before stay enqueued and complete with what they
   * use held, but no sink takes this submission's copy. */
  kd_xfers_settle(g, xf, !st, held, op);
  return st;
}
