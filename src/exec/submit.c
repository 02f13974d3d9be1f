/* Submitting graphs, tickets and host sinks. */
#include <ck_pr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "cuda/cu_status.h"
#include "exec/exec.h"

/* Out of memory (host, device or pinned: the driver's code does not tell
 * them apart) this many times in a row, AUTO gives up on the CUDA graph. */
#define KD_AUTO_OOM_TRIES 3

kd_status kd_graph_submit(kd_graph *g, kd_ticket *out) {
  static const char *op = "kd_graph_submit";
  if (out) *out = (kd_ticket){UINT64_MAX, 0}; /* what every failure leaves: a ticket kd_ticket_done refuses */
  if (!g) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument graph is NULL", op);
  kd_session *s = g->session;
  kd_status st = kd_session_enter(s, op);
  if (st) return st;
  if (!g->plan.valid) st = kd_plan_build(g, op);
  if (st) {
    kd_session_leave(s);
    return st;
  }
  kd_held_set held = {0};
  uint64_t stamp = kd_stamp_next(&s->stamps);
  uint64_t seq = s->next_seq;
  CUevent done = NULL; /* the completion's: taken before anything is enqueued, so that a failure to create
                         one refuses the submission whole */
  if (s->backend == KD_BACKEND_CUDA && (st = kd_session_note(s, kd_event_acquire(&s->dev, op, &done)))) {
    kd_session_leave(s);
    return st;
  }
  if (s->backend == KD_BACKEND_CUDA) {
    const char *what = "an EAGER graph submission";
    int enqueued = 0; /* whether anything was: then a completion covers it, even after a failure */
    if (kd_exec_graph_wanted(g)) {
      what = "a CUDA graph launch";
      st = kd_exec_graph(g, op, &held);
      if (!st) g->plan.graph_oom = 0;
      enqueued = !st; /* a refused graph launch enqueues nothing */
      if (st && st != KD_ERR_DEVICE_FAULT && g->exec_mode == KD_EXEC_AUTO) {
        /* AUTO: the same submission runs eagerly. If that works, the
         * failure was the CUDA graph's: the plan runs eagerly from now on.
         * Out of memory is no verdict on the plan, unless it keeps
         * happening: the next submission tries the CUDA graph again, up to
         * KD_AUTO_OOM_TRIES in a row. A failure of both (a foreign
         * callback's, memory for the submission) says nothing about the
         * graph. */
        char *why = strdup(kd_last_error());
        kd_status graph_st = st;
        what = "an EAGER graph submission";
        st = kd_exec_eager(g, op, &held, stamp, &enqueued);
        if (!st) {
          int refused = graph_st != KD_ERR_OUT_OF_MEMORY || ++g->plan.graph_oom >= KD_AUTO_OOM_TRIES;
          if (s->opts.flags & KD_SESSION_VERBOSE)
            fprintf(stderr, "kdag: AUTO %s EAGER: %s\n", refused ? "stays" : "runs this submission",
                    why ? why : "(no memory for the message)");
          if (refused) { /* what the executable graph holds is not needed any more */
            g->plan.graph_refused = 1;
            kd_gexec_release(g->plan.gexec);
            g->plan.gexec = NULL;
          }
        }
        free(why);
      }
    } else {
      st = kd_exec_eager(g, op, &held, stamp, &enqueued);
    }
    if (st && !enqueued) {
      /* Nothing to complete: the event goes back, and a full ring is not
       * waited for by a call that failed. */
      kd_event_release_to_pool(&s->dev, done);
      kd_held_release_all(s, &held);
    } else {
      /* Whatever was enqueued, even before a failure, completes with the
       * objects it uses held: nothing already submitted is lost. The
       * built-in module needs no hold: the session keeps it until
       * kd_session_destroy, which first waits for all work. */
      char *first = st ? strdup(kd_last_error()) : NULL; /* the node's error names it: keep it */
      kd_status cst = kd_completion_submit(s, op, &held, done, what);
      if (first) {
        kd_fail(st, "%s", first);
        free(first);
      }
      if (cst) {
        s->counters.stream_syncs++;
        s->dev.cu->cuStreamSynchronize(s->dev.stream);
        kd_held_release_all(s, &held);
        if (!st) st = cst;
      }
    }
  } else {
    kd_host_run *run = NULL;
    st = kd_exec_host(g, op, &held, stamp, &run);
    if (!st) st = kd_completion_submit_fence(s, op, &held, &run->fence, "a HOST graph submission");
    if (st) kd_held_release_all(s, &held);
  }
  if (!st) {
    s->counters.submissions++;
    g->plan.submits++;
    /* What the graph writes is written by the time anything after the
     * submission (a download, a later graph, a raw scope) reads it. Marked
     * once per new binding: a tensor never becomes uninitialized again. */
    if (g->unmarked) {
      for (uint32_t i = 0; i < g->binding_count; ++i)
        if (g->bindings[i].written) g->bindings[i].obj->initialized = 1;
      g->unmarked = 0;
    }
  }
  /* A failed submission issues no ticket (seq would name the next one). On
   * HOST a failed kd_exec_host queued nothing, and the ring takes a run it
   * accepted without failing (a full ring waits for its oldest run). */
  if (out && !st) *out = (kd_ticket){seq, s->ticket_id};
  kd_session_leave(s);
  return st;
}

kd_status kd_ticket_done(kd_session *s, kd_ticket t, int *done) {
  static const char *op = "kd_ticket_done";
  if (!done) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument done is NULL", op);
  kd_status st = kd_session_enter(s, op);
  if (st) return st;
  if (t.session && t.session != s->ticket_id)
    st = kd_fail(KD_ERR_WRONG_SESSION, "%s: argument ticket is of another session (session #%u, this is #%u)", op,
                 t.session, s->ticket_id);
  else if (!t.session || t.seq >= s->next_seq)
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument ticket (%llu) was never issued", op,
                 (unsigned long long)t.seq);
  if (!st) st = kd_completion_poll_ticket(s, t.seq, op, done);
  kd_session_leave(s);
  return st;
}

void kd_sink_free(kd_session *s, kd_sink *sk) {
  if (sk->spare) kd_staging_put(&s->dev, sk->spare); /* their copy was waited for */
  if (sk->spare_event) kd_event_release_to_pool(&s->dev, sk->spare_event);
  if (sk->block) {
    /* The copy may still be in flight, and destroying a graph never waits:
     * the block is reused once the submission that wrote it has retired. */
    if (sk->seq < s->retired_seq) {
      kd_event_release_to_pool(&s->dev, sk->event);
      kd_staging_put(&s->dev, sk->block);
    } else {
      struct kd_orphan *grown = s->orphan_count == s->orphan_cap
                                    ? realloc(s->orphans, (s->orphan_cap ? s->orphan_cap * 2 : 8) * sizeof *grown)
                                    : s->orphans;
      if (grown) {
        if (s->orphan_count == s->orphan_cap) s->orphan_cap = s->orphan_cap ? s->orphan_cap * 2 : 8;
        s->orphans = grown;
        s->orphans[s->orphan_count++] = (struct kd_orphan){sk->seq, sk->block, sk->event};
      } else { /* no memory to defer: waiting on this copy alone is the safe fallback */
        s->counters.event_waits++;
        s->dev.cu->cuEventSynchronize(sk->event);
        kd_event_release_to_pool(&s->dev, sk->event);
        kd_staging_put(&s->dev, sk->block);
      }
    }
  }
  if (sk->run) kd_host_run_unref(sk->run);
  free(sk);
}

kd_status kd_sink_wait(kd_sink *sk) {
  static const char *op = "kd_sink_wait";
  if (!sk) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument sink is NULL", op);
  kd_session *s = sk->graph->session;
  kd_status st = kd_session_enter(s, op);
  if (st) return st;
  if (!sk->pending) {
    kd_session_leave(s);
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: sink '%s' has no submission to wait for (submit the graph "
                   "first; each submission can be waited for once)", op, sk->graph->nodes[sk->node].name);
  }
  if (!s->has_device) {
    /* HOST: wait for this run alone, without the session lock, so the
     * pool and other threads keep going (the header asks callers not to
     * destroy the graph or the session meanwhile). The lock is simply
     * taken again: a HOST session has no context to make current and
     * cannot fault. */
    kd_host_run *r = sk->run;
    ck_pr_inc_32(&r->refs);
    kd_session_leave(s);
    kd_host_run_wait(r);
    pthread_mutex_lock(&s->lock);
    /* r's own copy (each run has one, alive while r is): right even when
     * another thread submitted the graph again meanwhile, which leaves
     * that later submission pending for its own wait; skipped when a wait
     * for a later run already copied its newer data. */
    if (r->seq + 1 > sk->host_copied) {
      memcpy(sk->host, r->tasks[sk->node].dst, sk->bytes);
      sk->host_copied = r->seq + 1;
    }
    if (sk->run == r) { /* waited for: the sink lets go of the run, and its buffers go at the next reap */
      sk->pending = 0;
      sk->run = NULL;
      kd_host_run_unref(r);
    }
    kd_host_run_unref(r); /* this wait's */
    s->counters.event_waits++;
    kd_completion_reap(s, op);
  } else {
    s->counters.event_waits++;
    CUresult r = s->dev.cu->cuEventSynchronize(sk->event);
    if (r != CUDA_SUCCESS) {
      st = kd_session_note(s, kd_fail_cu(r, op, "cuEventSynchronize"));
    } else {
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
    }
  }
  if (!st) kd_session_waited(s);
  kd_session_leave(s);
  return st;
}
