/* SPDX-License-Identifier: Apache-2.0 */
/* A submission's transfers on a CUDA session: the pinned staging block of
 * each upload and sink, and each sink's event, taken before anything is
 * enqueued (both executors), so that running out of pinned memory or
 * events refuses a submission whole; then either handed to the
 * submission's completion and the sinks, or given back. */
#include <string.h>

#include "base/status_internal.h"
#include "exec/exec.h"

kd_status kd_sink_take(kd_session *s, kd_sink *sk, size_t bytes, const char *op, kd_staging_block **block,
                       CUevent *event) {
  kd_staging_block *b = sk->spare;
  kd_status st = b ? KD_OK : kd_staging_get(&s->dev, op, bytes ? bytes : 1, &b);
  if (st) return st;
  CUevent e = sk->spare_event;
  st = e ? KD_OK : kd_event_acquire(&s->dev, op, &e);
  if (st) {
    if (!sk->spare) kd_staging_put(&s->dev, b);
    return st;
  }
  sk->spare = NULL;
  sk->spare_event = NULL;
  *block = b;
  *event = e;
  return KD_OK;
}

void kd_sink_commit(kd_session *s, kd_sink *sk, kd_staging_block *block, CUevent event, kd_held_set *held,
                    const char *op) {
  /* An earlier copy nobody waited for completes before this submission
   * does: hand its block and event to this submission's completion (the
   * callers reserved room for both, so these adds cannot fail). */
  if (sk->block) {
    kd_held_add(held, KD_HELD_STAGING, sk->block, op);
    kd_held_add(held, KD_HELD_EVENT, sk->event, op);
  }
  s->counters.event_records++;
  sk->block = block;
  sk->event = event;
  sk->seq = s->next_seq;
  sk->pending = 1;
}

static void give_back(kd_session *s, const kd_xfer *xf, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    if (xf[i].block) kd_staging_put(&s->dev, xf[i].block);
    if (xf[i].event) kd_event_release_to_pool(&s->dev, xf[i].event);
  }
}

kd_status kd_xfers_take(kd_graph *g, const char *op, kd_xfer **out) {
  kd_session *s = g->session;
  kd_cuda_plan *cp = kd_cuda_plan_get(g);
  kd_xfer *xf = cp->xfers; /* the plan's: no allocation per submission */
  *out = NULL;
  for (uint32_t i = 0; i < cp->xfer_count; ++i) {
    kd_gnode *node = &g->nodes[xf[i].node];
    xf[i].block = NULL;
    xf[i].event = NULL;
    xf[i].copying = xf[i].recorded = 0;
    kd_status st = node->kind == KD_NODE_SINK
                       ? kd_sink_take(s, node->sink, node->bytes, op, &xf[i].block, &xf[i].event)
                       : kd_staging_get(&s->dev, op, node->bytes, &xf[i].block);
    if (st) {
      give_back(s, xf, i);
      /* Pinned memory and events are refused with the sticky code after a
       * fault: noted, so the session refuses work from now on. */
      st = kd_fail_context(st, "%s: node '%s' (#%u): staging for its %zu-byte %s", op, node->name, xf[i].node,
                           node->bytes, node->kind == KD_NODE_SINK ? "download" : "upload");
      return kd_session_note(s, st);
    }
    if (node->kind == KD_NODE_UPLOAD) memcpy(xf[i].block->host, node->host, node->bytes); /* read at submit */
  }
  if (cp->xfer_count) *out = xf;
  return KD_OK;
}

kd_xfer *kd_xfer_of(const kd_graph *g, kd_xfer *xf, uint32_t node) {
  uint32_t count = kd_cuda_plan_get(g)->xfer_count;
  uint32_t lo = 0, hi = count; /* xf is in node order */
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (xf[mid].node < node) lo = mid + 1;
    else hi = mid;
  }
  return lo < count && xf[lo].node == node ? &xf[lo] : NULL;
}

void kd_xfers_settle(kd_graph *g, kd_xfer *xf, int ran, kd_held_set *held, const char *op) {
  kd_session *s = g->session;
  for (uint32_t i = 0; xf && i < kd_cuda_plan_get(g)->xfer_count; ++i) {
    kd_gnode *node = &g->nodes[xf[i].node];
    if (ran && node->kind == KD_NODE_SINK) {
      kd_sink_commit(s, node->sink, xf[i].block, xf[i].event, held, op);
      continue;
    }
    /* An upload's block, or a refused submission's: held while enqueued
     * work uses it, given back otherwise. */
    if (ran || xf[i].copying) kd_held_add(held, KD_HELD_STAGING, xf[i].block, op);
    else kd_staging_put(&s->dev, xf[i].block);
    if (xf[i].event && xf[i].recorded) kd_held_add(held, KD_HELD_EVENT, xf[i].event, op);
    else if (xf[i].event) kd_event_release_to_pool(&s->dev, xf[i].event);
  }
}
