/* SPDX-License-Identifier: Apache-2.0 */
/* Copies from another session's tensor (kd_graph_copy_peer): a kdag
 * foreign node on the graph's stream (cuMemcpyDtoDAsync, which crosses
 * devices through unified addressing, directly where peer access is on),
 * and the submissions of a graph holding one ordered with the other
 * session on the device: the graph's stream waits for an event recorded
 * on the peer's stream just before, and the peer's stream then waits for
 * the submission's ticket. The two sessions' locks are taken in turn. */
#include <ck_pr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "cuda/cu_status.h"
#include "exec/exec.h"

typedef struct kd_peer_copy {
  kd_session *peer;
  kd_view src;             /* the peer's view, as declared */
  size_t esize, bytes;
  CUdeviceptr src_ptr;     /* resolved at each submission, under the graph's session lock */
  const kd_cu_table *cu;   /* the graph's session's driver */
  char name[96];           /* the node's, for messages */
} kd_peer_copy;

static kd_status copy_run(const kd_foreign_call *call, void *user) {
  (void)user;
  const kd_peer_copy *p = call->resource;
  if (!p->bytes) return KD_OK;
  CUresult r = p->cu->cuMemcpyDtoDAsync((CUdeviceptr)call->spans[0].device_ptr, p->src_ptr, p->bytes,
                                        (CUstream)call->stream);
  return r == CUDA_SUCCESS ? KD_OK : kd_fail_cu(r, "the peer copy", "cuMemcpyDtoDAsync");
}

static int is_peer_copy(const kd_gnode *n) { return n->kind == KD_NODE_FOREIGN && n->foreign_fn == copy_run; }

kd_status kd_graph_copy_peer(kd_graph *g, const char *name, kd_view dst, kd_session *peer, kd_view src,
                             kd_node *out) {
  static const char *op = "kd_graph_copy_peer";
  const char *nm = name ? name : "(null)";
  kd_status st = kd_callback_check(op);
  if (st) return st;
  if (!g) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument g is NULL", op);
  if (!peer) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s': argument peer is NULL", op, nm);
  if (peer == g->session)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s': argument peer is the graph's own session (a copy "
                   "inside one session is kd_graph_op_copy)", op, nm);
  if (!g->session->has_device || !peer->has_device)
    return kd_fail(KD_ERR_WRONG_BACKEND, "%s: node '%s': %s is a HOST session; peer copies run between CUDA "
                   "sessions (HOST sessions exchange tensors through a communicator, kdag/comm.h)", op, nm,
                   g->session->has_device ? "peer" : "the graph's session");
  kd_tensor_desc pd, dd;
  st = kd_tensor_info(peer, src.tensor, &pd);
  if (st) return kd_fail_context(st, "%s: node '%s': argument src (a tensor of peer)", op, nm);
  if (pd.residency != KD_RESIDENCY_DEVICE)
    return kd_fail(KD_ERR_NOT_RESIDENT, "%s: node '%s': argument src is a host-resident tensor of peer", op, nm);
  if (src.rank >= 0) {
    st = kd_view_check(peer, &src);
    if (st) return kd_fail_context(st, "%s: node '%s': argument src", op, nm);
    if (!kd_view_is_compact(&src))
      return kd_fail(KD_ERR_NOT_COMPACT, "%s: node '%s': argument src is strided; a peer copy moves one "
                     "contiguous run (copy it compact in its own session first)", op, nm);
  }
  st = kd_tensor_info(g->session, dst.tensor, &dd);
  if (st) return kd_fail_context(st, "%s: node '%s': argument dst", op, nm);
  uint64_t ns = kd_view_elements(&src, &pd), nd = kd_view_elements(&dst, &dd);
  if (pd.dtype != dd.dtype || ns != nd)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s': dst is %llu %s elements and src %llu %s: a copy "
                   "keeps both", op, nm, (unsigned long long)nd, kd_dtype_name(dd.dtype), (unsigned long long)ns,
                   kd_dtype_name(pd.dtype));
  kd_peer_copy *p = calloc(1, sizeof *p);
  if (!p) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: node '%s': no memory for its record", op, nm);
  p->peer = peer;
  p->src = src;
  p->esize = kd_dtype_size(pd.dtype);
  p->bytes = (size_t)ns * p->esize;
  p->cu = g->session->dev.cu;
  snprintf(p->name, sizeof p->name, "%s", nm);
  /* Direct access where the devices have it: turned on in the graph's
   * context, once per pair (the driver keeps it). */
  int direct = 0;
  st = kd_session_enter(g->session, op);
  if (!st) {
    st = kd_session_note(g->session, kd_device_enable_peer(&g->session->dev, &peer->dev, op, &direct));
    kd_session_leave(g->session);
  }
  kd_garg a = {0};
  a.is_tensor = 1;
  a.access = KD_OUT;
  a.view = dst;
  if (!st) st = kd_graph_foreign_add(g, op, name, copy_run, NULL, &a, 1, 0, p, free, 0, out);
  if (st) {
    free(p);
    return st;
  }
  ck_pr_inc_32(&g->peer_copies);
  return KD_OK;
}

/* ---- submitting ---------------------------------------------------------- */

typedef struct peer_plan {
  kd_peer_copy **copies;   /* the graph's peer copies */
  CUdeviceptr *ptrs;       /* their sources, resolved */
  uint32_t count;
  kd_session **peers;      /* distinct, in first-use order */
  CUevent *events;         /* each peer's stream, just before */
  uint32_t peer_count;
} peer_plan;

static void set_sources(kd_graph *g, void *user) {
  (void)g;
  peer_plan *pp = user;
  for (uint32_t i = 0; i < pp->count; ++i) pp->copies[i]->src_ptr = pp->ptrs[i];
}

/* The sources of peer P's copies, looked up under P's lock, and an event
 * on P's stream after its work so far. */
static kd_status peer_before(peer_plan *pp, uint32_t k, const char *op) {
  kd_session *p = pp->peers[k];
  kd_status st = kd_session_enter(p, op);
  if (st) return st;
  for (uint32_t i = 0; !st && i < pp->count; ++i) {
    kd_peer_copy *c = pp->copies[i];
    if (c->peer != p) continue;
    kd_tensor_obj *o;
    st = kd_tensor_lookup(p, c->src.tensor, &o, op, "the source of a peer copy");
    if (st) st = kd_fail_context(st, "%s: node '%s'", op, c->name);
    else pp->ptrs[i] = o->dptr + (CUdeviceptr)((size_t)(c->src.rank < 0 ? 0 : c->src.offset) * c->esize);
  }
  if (!st) st = kd_session_note(p, kd_device_event_export(&p->dev, op, &pp->events[k]));
  kd_session_leave(p);
  return st;
}

kd_status kd_peer_submit(kd_graph *g, const char *op, kd_ticket *out) {
  kd_session *s = g->session;
  peer_plan pp = {0};
  kd_status st = kd_session_enter_host(s, op);
  if (st) return st;
  uint32_t n = 0;
  for (uint32_t i = 0; i < g->node_count; ++i) n += is_peer_copy(&g->nodes[i]);
  pp.copies = calloc(n + 1, sizeof *pp.copies);
  pp.ptrs = calloc(n + 1, sizeof *pp.ptrs);
  pp.peers = calloc(n + 1, sizeof *pp.peers);
  pp.events = calloc(n + 1, sizeof *pp.events);
  if (!pp.copies || !pp.ptrs || !pp.peers || !pp.events) {
    st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: graph '%s': no memory to order its %u peer copies", op, kd_graph_name(g), n);
  } else {
    for (uint32_t i = 0; i < g->node_count; ++i) {
      if (!is_peer_copy(&g->nodes[i])) continue;
      kd_peer_copy *c = g->nodes[i].res->resource;
      pp.copies[pp.count++] = c;
      uint32_t k = 0;
      while (k < pp.peer_count && pp.peers[k] != c->peer) ++k;
      if (k == pp.peer_count) pp.peers[pp.peer_count++] = c->peer;
    }
  }
  kd_session_leave(s);
  for (uint32_t k = 0; !st && k < pp.peer_count; ++k) st = peer_before(&pp, k, op);
  kd_ticket t = {UINT64_MAX, 0};
  if (!st) st = kd_submit_after(g, op, pp.events, pp.peer_count, set_sources, &pp, &t);
  for (uint32_t k = 0; k < pp.peer_count; ++k) /* the waits hold what they need of them */
    if (pp.events[k]) kd_device_event_destroy(&pp.peers[k]->dev, pp.events[k]);
  /* The peers' later work after this submission, on their devices. */
  for (uint32_t k = 0; !st && k < pp.peer_count; ++k) {
    st = kd_session_wait_ticket(pp.peers[k], s, t);
    if (st) st = kd_fail_context(st, "%s: graph '%s' was submitted, but its peer's later work is not ordered after "
                                 "it", op, kd_graph_name(g));
  }
  if (!st && out) *out = t;
  free(pp.copies);
  free(pp.ptrs);
  free(pp.peers);
  free(pp.events);
  return st;
}
