/* SPDX-License-Identifier: Apache-2.0 */
/* Submitting graphs, tickets and host sinks. */
#include <ck_pr.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "session/trace.h"
#include "exec/exec.h"

kd_status kd_graph_submit(kd_graph *g, kd_ticket *out) {
  static const char *op = "kd_graph_submit";
  if (out) *out = (kd_ticket){UINT64_MAX, 0}; /* what every failure leaves: a ticket kd_ticket_done refuses */
  if (!g) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument graph is NULL", op);
  if (ck_pr_load_32(&g->peer_copies)) return kd_peer_submit(g, op, out);
  return kd_submit_after(g, op, NULL, 0, NULL, NULL, out);
}

kd_status kd_submit_after(kd_graph *g, const char *op, const CUevent *waits, size_t wait_count,
                          void (*locked)(kd_graph *g, void *user), void *user, kd_ticket *out) {
  kd_session *s = g->session;
  kd_status st = kd_session_enter(s, op);
  if (st) return st;
  for (size_t i = 0; !st && i < wait_count; ++i) {
    st = kd_session_note(s, kd_device_wait_event(&s->dev, op, waits[i]));
    if (!st) s->counters.stream_event_waits++;
  }
  if (st) {
    kd_session_leave(s);
    return st;
  }
  if (locked) locked(g, user);
  uint64_t seq = s->next_seq;
  /* The submission as a range named after the graph (base/nvtx.h). */
  uint64_t t0 = s->trace ? kd_trace_now() : 0;
  int traced = kd_nvtx_on();
  if (traced) {
    if (!g->nvtx_named) g->nvtx_name = kd_nvtx_register(kd_graph_name(g));
    g->nvtx_named = 1;
    kd_nvtx_push(g->nvtx_name, kd_graph_name(g), KD_NVTX_SUBMIT);
  }
  if (g->open_count) {
    uint32_t l = g->open[g->open_count - 1];
    st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: graph '%s': %s '%s' (#%u) is still open (kd_graph_end)", op,
                 kd_graph_name(g), g->nodes[l].is_if ? "conditional" : "loop", g->nodes[l].name, l);
  }
  if (!st && !g->plan.valid) {
    st = kd_plan_build(g, op);
    if (!st)
      kd_log(&s->log, KD_LOG_DEBUG, "graph '%s': planned %u nodes, %u edges", kd_graph_name(g), g->node_count,
             g->edge_count);
  }
  if (!st) st = s->ops->submit(g, op);
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
    /* A failed submission issues no ticket (seq would name the next one). */
    if (out) *out = (kd_ticket){seq, s->ticket_id};
  }
  if (traced) kd_nvtx_pop();
  if (s->trace) kd_trace_host(s, kd_graph_name(g), "submit", t0);
  kd_session_leave(s);
  return st;
}

kd_status kd_ticket_check(kd_session *s, kd_ticket t, const char *op) {
  if (t.session && t.session != s->ticket_id)
    return kd_fail(KD_ERR_WRONG_SESSION, "%s: argument ticket is of another session (session #%u, this is #%u)", op,
                   t.session, s->ticket_id);
  if (!t.session || t.seq >= s->next_seq)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument ticket (%llu) was never issued", op,
                   (unsigned long long)t.seq);
  return KD_OK;
}

kd_status kd_ticket_done(kd_session *s, kd_ticket t, int *done) {
  static const char *op = "kd_ticket_done";
  if (!done) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_done is NULL", op);
  kd_status st = kd_session_enter(s, op);
  if (st) return st;
  st = kd_ticket_check(s, t, op);
  if (!st) st = kd_completion_poll_ticket(s, t.seq, op, done);
  if (!st && *done) st = kd_session_async_check(s, op); /* done, but a collective of it failed */
  if (!st && *done && s->has_device) st = kd_comm_poll(s, op);
  kd_session_leave(s);
  return st;
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
  uint64_t t0 = kd_wait_begin(s, op);
  st = s->ops->sink_wait(sk, op);
  if (!st && s->has_device) st = kd_comm_poll(s, op); /* NCCL's errors found after the fact */
  kd_wait_end(s, op, t0);
  if (!st) kd_session_waited(s);
  kd_session_leave(s);
  return st;
}
