/* SPDX-License-Identifier: Apache-2.0 */
/* The HOST backend (session/backend.h): tensors in host memory, each
 * submission a run of tasks on the session's thread pool (exec/host.c),
 * started when the one before it is done, as work on a stream. */
#include <ck_pr.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "exec/exec.h"

static kd_status submit(kd_graph *g, const char *op) {
  kd_session *s = g->session;
  kd_held_set held = {0};
  kd_host_run *run = NULL;
  kd_status st = kd_exec_host(g, op, &held, kd_stamp_next(&s->stamps), &run);
  /* A failed kd_exec_host queued nothing, and the ring takes a run it
   * accepted without failing (a full ring waits for its oldest run). */
  if (!st) st = kd_completion_submit_fence(s, op, &held, &run->fence, "a HOST graph submission");
  if (st) kd_held_release_all(s, &held);
  return st;
}

/* In order after the submissions before it, without waiting for them:
 * with none in flight (or a tensor made by this call, which none can use)
 * the copy is made now, else a snapshot of host is copied in by a run
 * queued behind them. */
static kd_status upload(kd_session *s, const char *op, kd_tensor_obj *o, const void *host, int fresh) {
  kd_host_state *hs = s->exec;
  if (fresh || !hs->last_run || kd_host_run_done(hs->last_run)) {
    memcpy(o->host, host, o->bytes);
    return KD_OK;
  }
  kd_held_set held = {0};
  kd_host_run *run = NULL;
  kd_status st = kd_exec_host_upload(s, op, o, host, &held, &run);
  if (!st) st = kd_completion_submit_fence(s, op, &held, &run->fence, "an upload");
  if (st) kd_held_release_all(s, &held);
  return st;
}

static kd_status download(kd_session *s, const char *op, kd_tensor_obj *o, void *host) {
  kd_host_state *hs = s->exec;
  if (hs->last_run) kd_host_run_wait(hs->last_run); /* the explicit wait: after submitted graphs */
  s->counters.event_waits++;
  memcpy(host, o->host, o->bytes);
  return kd_session_async_check(s, op);
}

/* Waits for this run alone, without the session lock, so the pool and
 * other threads keep going (the header asks callers not to destroy the
 * graph or the session meanwhile). The lock is simply taken again: a HOST
 * session has no context to make current and cannot fault. */
static kd_status sink_wait(kd_sink *sk, const char *op) {
  kd_session *s = sk->graph->session;
  kd_host_run *r = (kd_host_run *)sk->run;
  ck_pr_inc_32(&r->refs);
  kd_session_leave(s);
  kd_host_run_wait(r);
  kd_session_lock(s);
  /* r's own copy (each run has one, alive while r is): right even when
   * another thread submitted the graph again meanwhile, which leaves that
   * later submission pending for its own wait; skipped when a wait for a
   * later run already copied its newer data. */
  if (r->seq + 1 > sk->host_copied) {
    memcpy(sk->host, kd_host_run_xfer(r, &r->tasks[sk->node]), sk->bytes);
    sk->host_copied = r->seq + 1;
  }
  if (sk->run == &r->fence) { /* waited for: the sink lets go of the run, and its buffers go at the next reap */
    sk->pending = 0;
    sk->run = NULL;
    kd_host_run_unref(r);
  }
  kd_host_run_unref(r); /* this wait's */
  s->counters.event_waits++;
  kd_completion_reap(s, op);
  return kd_session_async_check(s, op); /* a collective of the run failed: its data is not to be trusted */
}

static void stats(kd_session *s, kd_session_stats *out) {
  kd_host_state *hs = s->exec;
  out->host_splits = atomic_load_explicit(&hs->splits, memory_order_relaxed);
}

static void destroy(kd_session *s) {
  kd_host_state *hs = s->exec;
  if (!hs) return;
  if (hs->last_run) kd_host_run_unref(hs->last_run);
  kd_host_pool_stop(&hs->pool);
  free(hs);
  s->exec = NULL;
}

static const kd_backend_ops host_backend = {
  .destroy = destroy,
  .submit = submit,
  .upload = upload,
  .download = download,
  .sink_wait = sink_wait,
  .stats = stats,
};

kd_status kd_host_backend_start(kd_session *s, const char *op) {
  kd_host_state *hs = calloc(1, sizeof *hs);
  if (!hs) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the HOST backend", op);
  hs->session = s;
  kd_status st = kd_host_pool_start(&hs->pool, kd_exec_host_task, hs, &s->log, op);
  if (st) {
    free(hs);
    return st;
  }
  s->exec = hs;
  s->ops = &host_backend;
  return KD_OK;
}
