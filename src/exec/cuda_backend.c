/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA backend (session/backend.h): work on the session's stream, a
 * submission run by the EAGER executor (exec/cuda_eager.c) or as the
 * plan's executable CUDA graph (exec/cuda_graph.c), with the AUTO policy
 * between them here; uploads and downloads through pinned staging. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "cuda/cu_status.h"
#include "exec/exec.h"
#include "session/trace.h"

/* Out of memory (host, device or pinned: the driver's code does not tell
 * them apart) this many times in a row, AUTO gives up on the CUDA graph. */
#define KD_AUTO_OOM_TRIES 3

static void plan_destroy(kd_resource *r) {
  kd_cuda_plan *cp = (kd_cuda_plan *)r;
  free(cp->xfers);
  free(cp->workspace);
  free(cp->nvtx_names);
  free(cp->explicit_in);
  kd_gexec_release(cp->gexec);
  free(cp);
}

kd_status kd_cuda_plan_make(kd_graph *g, const char *op, kd_cuda_plan **out) {
  uint32_t n = g->node_count, xfers = 0;
  for (uint32_t i = 0; i < n; ++i) xfers += (uint32_t)kd_node_is_xfer(&g->nodes[i]);
  kd_cuda_plan *cp = calloc(1, sizeof *cp);
  if (cp) cp->res.destroy = plan_destroy;
  if (!cp || !(cp->xfers = calloc((size_t)xfers + 1, sizeof *cp->xfers))) {
    free(cp);
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the plan", op);
  }
  /* Per submission, EAGER holds each module once, a foreign node's
   * resource and workspace, and per transfer two entries: an upload's
   * block, or a sink's earlier block and event (or, refused, its own).
   * Modules are counted once each by a stamp of their own, as a
   * submission holds them: a chain of many launches of one kernel holds
   * one. */
  uint64_t stamp = kd_stamp_next(&g->session->stamps);
  for (uint32_t i = 0; i < n; ++i) {
    kd_gnode *node = &g->nodes[i];
    if (kd_node_is_xfer(node)) cp->xfers[cp->xfer_count++].node = i;
    cp->workspaces += node->kind == KD_NODE_FOREIGN && node->workspace_bytes;
    cp->holds += node->kind == KD_NODE_FOREIGN ? 2 : 0;
    if (node->kind == KD_NODE_KERNEL && node->module->held_by_scope != stamp) {
      node->module->held_by_scope = stamp;
      cp->holds++;
    }
  }
  cp->holds += 2 * cp->xfer_count;
  int oom = cp->workspaces && !(cp->workspace = calloc(n, sizeof *cp->workspace));
  for (uint32_t e = 0; !oom && g->session->dev.pdl && e < g->edge_count; ++e)
    if (g->edges[e].hazard == KD_HAZ_EXPLICIT) {
      if (!cp->explicit_in && !(cp->explicit_in = calloc(n, 1))) oom = 1;
      else cp->explicit_in[g->edges[e].to] = 1;
    }
  if (oom) {
    plan_destroy(&cp->res);
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the plan", op);
  }
  g->plan.exec = &cp->res;
  *out = cp;
  return KD_OK;
}

/* Whether this submission of g runs as a CUDA graph: GRAPH mode, or AUTO
 * once the plan has run graph_after times and the driver has not refused
 * it. Debug nodes run each node on its own, eagerly. */
static int graph_wanted(kd_graph *g, const kd_cuda_plan *cp) {
  kd_session *s = g->session;
  if (s->opts.flags & KD_SESSION_DEBUG_NODES) return 0;
  if (g->exec_mode == KD_EXEC_GRAPH) return 1;
  return g->exec_mode == KD_EXEC_AUTO && !cp->graph_refused && g->plan.submits >= s->opts.graph_after;
}

/* Runs the submission with held: *what names it, *enqueued whether
 * anything was (even when it fails). */
static kd_status run(kd_graph *g, const char *op, kd_cuda_plan *cp, kd_held_set *held, const char **what,
                     int *enqueued) {
  kd_session *s = g->session;
  uint64_t stamp = kd_stamp_next(&s->stamps);
  *what = "an EAGER graph submission";
  if (!graph_wanted(g, cp)) return kd_exec_eager(g, op, held, stamp, enqueued);
  *what = "a CUDA graph launch";
  kd_status st = kd_exec_graph(g, op, held);
  if (!st) cp->graph_oom = 0;
  *enqueued = !st; /* a refused graph launch enqueues nothing */
  if (!st || st == KD_ERR_DEVICE_FAULT || g->exec_mode != KD_EXEC_AUTO) return st;
  /* AUTO: the same submission runs eagerly. If that works, the failure
   * was the CUDA graph's: the plan runs eagerly from now on. Out of
   * memory is no verdict on the plan, unless it keeps happening: the next
   * submission tries the CUDA graph again, up to KD_AUTO_OOM_TRIES in a
   * row. A failure of both (a foreign callback's, memory for the
   * submission) says nothing about the graph. */
  char *why = strdup(kd_last_error());
  kd_status graph_st = st;
  *what = "an EAGER graph submission";
  st = kd_exec_eager(g, op, held, stamp, enqueued);
  if (!st) {
    int refused = graph_st != KD_ERR_OUT_OF_MEMORY || ++cp->graph_oom >= KD_AUTO_OOM_TRIES;
    /* Staying EAGER for good costs every later submission: a warning. */
    kd_log(&s->log, refused ? KD_LOG_WARN : KD_LOG_INFO, "graph '%s': AUTO %s EAGER: %s", kd_graph_name(g),
           refused ? "stays" : "runs this submission", why ? why : "(no memory for the message)");
    if (refused) { /* what the executable graph holds is not needed any more */
      cp->graph_refused = 1;
      kd_gexec_release(cp->gexec);
      cp->gexec = NULL;
    }
  }
  free(why);
  return st;
}

/* A traced submission (session/trace.h): its span on the GPU, from an
 * event before its work to one after. Without memory or events the span
 * is left out; the submission goes on. */
static kd_trace_batch *trace_begin(kd_graph *g, const char *op) {
  kd_session *s = g->session;
  kd_fail_keep keep;
  kd_fail_keep_begin(&keep);
  kd_trace_batch *tb;
  (void)kd_trace_batch_new(s, 1, op, &tb);
  CUevent begin, end;
  if (tb) {
    kd_trace_batch_span(tb, 0, kd_graph_name(g), "submission", &begin, &end);
    (void)s->dev.cu->cuEventRecord(begin, s->dev.stream); /* unrecorded, the span is dropped at retire */
  }
  kd_fail_keep_end(&keep);
  return tb;
}

static void trace_end(kd_graph *g, kd_trace_batch *tb, int enqueued, const char *what, kd_held_set *held,
                      const char *op) {
  kd_session *s = g->session;
  kd_fail_keep keep;
  kd_fail_keep_begin(&keep);
  CUevent begin, end;
  kd_trace_batch_span(tb, 0, kd_graph_name(g), what, &begin, &end);
  if (enqueued) {
    (void)s->dev.cu->cuEventRecord(end, s->dev.stream);
    kd_trace_batch_used(tb, 1);
  }
  if (!enqueued || kd_held_add(held, KD_HELD_RESOURCE, kd_trace_batch_resource(tb), op) != KD_OK)
    kd_trace_batch_drop(tb);
  kd_fail_keep_end(&keep);
}

static kd_status submit(kd_graph *g, const char *op) {
  kd_session *s = g->session;
  kd_cuda_plan *cp;
  kd_status st = kd_cuda_plan_of(g, op, &cp);
  if (st) return st;
  /* The completion's event: taken before anything is enqueued, so that a
   * failure to create one refuses the submission whole. */
  CUevent done = NULL;
  st = kd_session_note(s, kd_event_acquire(&s->dev, op, &done));
  if (st) return st;
  kd_held_set held = {0};
  const char *what;
  int enqueued = 0; /* whether anything was: then a completion covers it, even after a failure */
  kd_trace_batch *tb = s->trace ? trace_begin(g, op) : NULL;
  st = run(g, op, cp, &held, &what, &enqueued);
  if (tb) trace_end(g, tb, enqueued, what, &held, op);
  if (st && !enqueued) {
    /* Nothing to complete: the event goes back, and a full ring is not
     * waited for by a call that failed. */
    kd_event_release_to_pool(&s->dev, done);
    kd_held_release_all(s, &held);
    return st;
  }
  /* Whatever was enqueued, even before a failure, completes with the
   * objects it uses held: nothing already submitted is lost. The built-in
   * module needs no hold: the session keeps it until kd_session_destroy,
   * which first waits for all work. */
  char *first = st ? strdup(kd_last_error()) : NULL; /* the node's error names it: keep it */
  kd_status cst = kd_completion_submit(s, op, &held, done, what);
  if (first) {
    kd_fail(st, "%s", first);
    free(first);
  }
  if (cst) {
    s->counters.stream_syncs++;
    (void)kd_stream_wait(&s->dev);
    kd_held_release_all(s, &held);
    if (!st) st = cst;
  }
  return st;
}

static kd_status upload(kd_session *s, const char *op, kd_tensor_obj *o, const void *host, int fresh) {
  (void)fresh; /* the stream orders the copy after earlier work either way */
  if (o->residency == KD_RESIDENCY_HOST) {
    memcpy(o->host, host, o->bytes);
    return KD_OK;
  }
  if (!o->bytes) return KD_OK;
  /* Everything that can fail but the copy and its record first: the
   * staging block, the completion's event, room to hold both objects. */
  kd_staging_block *b;
  kd_status st = kd_session_note(s, kd_staging_get(&s->dev, op, o->bytes, &b));
  if (st) return st;
  CUevent done = NULL;
  kd_held_set held = {0};
  st = kd_session_note(s, kd_event_acquire(&s->dev, op, &done));
  if (!st) st = kd_held_reserve(&held, 2, op);
  if (st) {
    if (done) kd_event_release_to_pool(&s->dev, done);
    kd_held_release_all(s, &held);
    kd_staging_put(&s->dev, b);
    return st;
  }
  /* The caller's memory is read here, at the call; the copy engine reads
   * only the staging block, which the completion keeps until it is done. */
  memcpy(b->host, host, o->bytes);
  CUresult r = s->dev.cu->cuMemcpyHtoDAsync(o->dptr, b->host, o->bytes, s->dev.stream);
  if (r != CUDA_SUCCESS) {
    kd_event_release_to_pool(&s->dev, done);
    kd_held_release_all(s, &held);
    kd_staging_put(&s->dev, b);
    return kd_session_note(s, kd_fail_cu(r, op, "cuMemcpyHtoDAsync"));
  }
  (void)kd_held_add(&held, KD_HELD_STAGING, b, op); /* in the room reserved: cannot fail */
  kd_tensor_ref(o);
  (void)kd_held_add(&held, KD_HELD_TENSOR, o, op);
  st = kd_completion_submit(s, op, &held, done, "an upload");
  if (st) {
    /* The copy is enqueued: wait for the stream before giving its staging
     * block back, so nothing is reused under the copy engine. */
    s->counters.stream_syncs++;
    (void)kd_stream_wait(&s->dev);
    kd_held_release_all(s, &held);
  }
  return st;
}

static kd_status download(kd_session *s, const char *op, kd_tensor_obj *o, void *host) {
  if (o->residency == KD_RESIDENCY_HOST) {
    memcpy(host, o->host, o->bytes);
    return KD_OK;
  }
  if (!o->bytes) return KD_OK;
  kd_staging_block *b;
  kd_status st = kd_session_note(s, kd_staging_get(&s->dev, op, o->bytes, &b));
  if (st) return st;
  CUevent ev = NULL;
  st = kd_session_note(s, kd_event_acquire(&s->dev, op, &ev));
  CUresult r = CUDA_SUCCESS;
  int enqueued = 0;
  if (!st) {
    r = s->dev.cu->cuMemcpyDtoHAsync(b->host, o->dptr, o->bytes, s->dev.stream);
    if (r != CUDA_SUCCESS) st = kd_session_note(s, kd_fail_cu(r, op, "cuMemcpyDtoHAsync"));
    else enqueued = 1;
  }
  if (!st) st = kd_session_note(s, kd_event_record(&s->dev, op, ev));
  if (!st) {
    /* The explicit host wait: this copy's event alone. */
    uint64_t seq = s->next_seq;
    s->counters.event_records++;
    s->counters.event_waits++;
    r = s->dev.cu->cuEventSynchronize(ev);
    if (r != CUDA_SUCCESS) st = kd_session_note(s, kd_fail_cu(r, op, "cuEventSynchronize"));
    else {
      memcpy(host, b->host, o->bytes);
      kd_completion_retire_before(s, seq);
    }
  }
  if (ev) kd_event_release_to_pool(&s->dev, ev);
  if (st && enqueued) {
    /* The copy may still be writing the block: wait before reusing it. */
    s->counters.stream_syncs++;
    (void)kd_stream_wait(&s->dev);
  }
  kd_staging_put(&s->dev, b);
  if (!st) st = kd_comm_poll(s, op); /* NCCL's errors found after the fact */
  return st;
}

static kd_status sink_wait(kd_sink *sk, const char *op) {
  kd_session *s = sk->graph->session;
  s->counters.event_waits++;
  CUresult r = s->dev.cu->cuEventSynchronize(sk->event);
  if (r != CUDA_SUCCESS) return kd_session_note(s, kd_fail_cu(r, op, "cuEventSynchronize"));
  memcpy(sk->host, sk->block->host, sk->bytes);
  if (!sk->spare) sk->spare = sk->block; /* the next launch's copy may take them */
  else kd_staging_put(&s->dev, sk->block);
  if (!sk->spare_event) sk->spare_event = sk->event;
  else kd_event_release_to_pool(&s->dev, sk->event);
  sk->block = NULL;
  sk->event = NULL;
  sk->pending = 0;
  /* Everything recorded before this copy has completed too. */
  kd_completion_retire_before(s, sk->seq);
  return KD_OK;
}

static void destroy(kd_session *s) {
  kd_cuda_state *cs = s->exec;
  if (!cs) return;
  if (cs->capture_stream) s->dev.cu->cuStreamDestroy(cs->capture_stream);
  free(cs);
  s->exec = NULL;
}

static const kd_backend_ops cuda_backend = {
  .destroy = destroy,
  .submit = submit,
  .upload = upload,
  .download = download,
  .sink_wait = sink_wait,
};

kd_status kd_cuda_backend_start(kd_session *s, const char *op) {
  kd_cuda_state *cs = calloc(1, sizeof *cs);
  if (!cs) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the CUDA backend", op);
  s->exec = cs;
  s->ops = &cuda_backend;
  return KD_OK;
}
