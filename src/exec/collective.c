/* SPDX-License-Identifier: Apache-2.0 */
/* Collective nodes: kdag's own foreign nodes (graph/nodes.c), so every
 * executor runs them as it runs a foreign library's call: EAGER on the
 * stream, GRAPH captured once into the executable graph, HOST on a worker
 * with the spans' host addresses. Each reads and writes its
 * communicator's order token first, so one communicator's collectives keep
 * the graph's declaration order on every rank. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "exec/comm.h"
#include "exec/exec.h"
#include "graph/graph_impl.h"

typedef enum coll_kind { C_ALL_REDUCE, C_REDUCE_SCATTER, C_ALL_GATHER, C_BROADCAST, C_SEND_RECV } coll_kind;

/* A collective node's description: the foreign node's resource, released
 * with the graph's hold on it (dropping the communicator's reference). */
typedef struct kd_coll {
  kd_comm *comm;
  coll_kind kind;
  kd_reduce op;
  kd_dtype dtype;
  int in_place, root, to, from;
  size_t count;            /* elements: all_reduce's, reduce_scatter's dst, all_gather's src, broadcast's */
  size_t send_bytes, recv_bytes;
  char what[160];          /* "all_reduce node 'name'", for messages */
} kd_coll;

static void coll_release(void *r) {
  kd_coll *c = r;
  kd_comm_unref(c->comm);
  free(c);
}

/* ---- running ------------------------------------------------------------- */

static int nccl_type(kd_dtype t, size_t *mult) {
  *mult = 1;
  switch (t) {
    case KD_F32: return KD_NCCL_FLOAT32;
    case KD_F64: return KD_NCCL_FLOAT64;
    case KD_I32: return KD_NCCL_INT32;
    case KD_I64: return KD_NCCL_INT64;
    case KD_U8: return KD_NCCL_UINT8;
    case KD_U32: return KD_NCCL_UINT32;
    case KD_U64: return KD_NCCL_UINT64;
    case KD_F16: return KD_NCCL_FLOAT16;
    case KD_BF16: return KD_NCCL_BFLOAT16;
    case KD_I8: return KD_NCCL_INT8;
    case KD_C32: *mult = 2; return KD_NCCL_FLOAT32; /* SUM and AVG only: per component */
    case KD_C64: *mult = 2; return KD_NCCL_FLOAT64;
    default: return -1;
  }
}

/* NCCL blocks the thread that issues a rank's collective until its peers
 * issue theirs: in one process, a thread that issued one rank's and then
 * another rank's of the same group would wait for itself. */
static _Thread_local uint64_t tls_group;
static _Thread_local int tls_rank;

static kd_status thread_check(const kd_coll *c) {
  const kd_comm_group *g = c->comm->group;
  if (!g) return KD_OK;
  if (tls_group == g->serial && tls_rank != c->comm->rank)
    return kd_fail(KD_ERR_BUSY, "%s: this thread issued rank %d's collectives of the same kd_comm_create_all group, "
                   "and now rank %d's: NCCL would wait for the one thread twice; submit each rank's graphs from a "
                   "thread of its own", c->what, tls_rank, c->comm->rank);
  tls_group = g->serial;
  tls_rank = c->comm->rank;
  return KD_OK;
}

/* Where a collective's data is in its spans (after the token): src and
 * dst in 0 and (out of place) 1; send_recv's send then recv, each only
 * when it has a peer. Addresses are device ones on CUDA, host ones on
 * HOST. */
typedef struct coll_buffers {
  void *src, *dst, *send, *recv;
} coll_buffers;

static coll_buffers buffers(const kd_coll *c, const kd_span *sp) {
  coll_buffers b = {0};
  if (c->kind == C_SEND_RECV) {
    if (c->to >= 0) b.send = (void *)(uintptr_t)sp[0].device_ptr;
    if (c->from >= 0) b.recv = (void *)(uintptr_t)sp[c->to >= 0 ? 1 : 0].device_ptr;
  } else {
    b.src = (void *)(uintptr_t)sp[0].device_ptr;
    b.dst = (void *)(uintptr_t)sp[c->in_place ? 0 : 1].device_ptr;
  }
  return b;
}

static kd_status nccl_run(const kd_coll *c, const kd_span *sp, CUstream stream) {
  kd_status st = thread_check(c);
  if (st) return st;
  const kd_nccl_api *n = c->comm->nccl;
  kd_nccl_comm nc = c->comm->nc;
  size_t mult;
  int t = nccl_type(c->dtype, &mult);
  coll_buffers b = buffers(c, sp);
  kd_nccl_result r = 0;
  const char *call = "";
  switch (c->kind) {
    case C_ALL_REDUCE:
      call = "ncclAllReduce";
      r = n->AllReduce(b.src, b.dst, c->count * mult, t, (int)c->op, nc, stream);
      break;
    case C_REDUCE_SCATTER:
      call = "ncclReduceScatter";
      r = n->ReduceScatter(b.src, b.dst, c->count * mult, t, (int)c->op, nc, stream);
      break;
    case C_ALL_GATHER:
      call = "ncclAllGather";
      r = n->AllGather(b.src, b.dst, c->count * kd_dtype_size(c->dtype), KD_NCCL_UINT8, nc, stream);
      break;
    case C_BROADCAST:
      call = "ncclBroadcast";
      r = n->Broadcast(b.dst, b.dst, c->count * kd_dtype_size(c->dtype), KD_NCCL_UINT8, c->root, nc, stream);
      break;
    case C_SEND_RECV: { /* one group: neither side waits for the other */
      if (!b.send && !b.recv) break; /* neither side: nothing to move */
      call = "ncclGroupStart";
      r = n->GroupStart();
      if (r) break;
      kd_nccl_result e = 0;
      if (b.send) {
        call = "ncclSend";
        e = n->Send(b.send, c->send_bytes, KD_NCCL_UINT8, c->to, nc, stream);
      }
      if (!e && b.recv) {
        call = "ncclRecv";
        e = n->Recv(b.recv, c->recv_bytes, KD_NCCL_UINT8, c->from, nc, stream);
      }
      r = n->GroupEnd();
      if (e) r = e;
      else if (r) call = "ncclGroupEnd";
      break;
    }
  }
  if (!r) return KD_OK;
  char what[256];
  snprintf(what, sizeof what, "%s: %s", c->what, call);
  return kd_nccl_fail(n, nc, r, "the collective", what);
}

static kd_status host_run(const kd_coll *c, const kd_span *sp) {
  kd_shm_comm *m = c->comm->shm;
  coll_buffers b = buffers(c, sp);
  switch (c->kind) {
    case C_ALL_REDUCE: return kd_shm_all_reduce(m, c->what, b.src, b.dst, c->count, c->dtype, c->op);
    case C_REDUCE_SCATTER: return kd_shm_reduce_scatter(m, c->what, b.src, b.dst, c->count, c->dtype, c->op);
    case C_ALL_GATHER: return kd_shm_all_gather(m, c->what, b.src, b.dst, c->count * kd_dtype_size(c->dtype));
    case C_BROADCAST: return kd_shm_broadcast(m, c->what, b.dst, c->count * kd_dtype_size(c->dtype), c->root);
    case C_SEND_RECV:
      return kd_shm_send_recv(m, c->what, b.send, c->send_bytes, c->to, b.recv, c->recv_bytes, c->from);
  }
  return KD_OK;
}

/* The foreign node's function: spans[0] is the order token. */
static kd_status coll_run(const kd_foreign_call *call, void *user) {
  (void)user;
  const kd_coll *c = call->resource;
  return call->stream ? nccl_run(c, call->spans + 1, (CUstream)call->stream) : host_run(c, call->spans + 1);
}

/* ---- declaring ----------------------------------------------------------- */

typedef struct decl {
  kd_graph *g;
  const char *op, *name;
  kd_comm *comm;
} decl;

static const char *node_name(const char *name) { return name ? name : "(null)"; }

static kd_status begin(decl *d, kd_graph *g, const char *op, const char *name, kd_comm *comm) {
  *d = (decl){g, op, name, comm};
  kd_status st = kd_callback_check(op);
  if (st) return st;
  if (!g) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument g is NULL", op);
  if (!comm)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s': argument comm is NULL", op, node_name(name));
  if (comm->session != g->session)
    return kd_fail(KD_ERR_WRONG_SESSION, "%s: node '%s': argument comm is a communicator of another session than "
                   "the graph's", op, node_name(name));
  return KD_OK;
}

/* The view's dtype and elements (a view's own bounds and compactness are
 * checked when the node is added). */
static kd_status view_info(const decl *d, const char *arg, const kd_view *v, kd_dtype *dtype, size_t *elements) {
  kd_tensor_desc t;
  kd_status st = kd_tensor_info(d->g->session, v->tensor, &t);
  if (st) return kd_fail_context(st, "%s: node '%s': argument %s", d->op, node_name(d->name), arg);
  *dtype = t.dtype;
  *elements = (size_t)kd_view_elements(v, &t);
  return KD_OK;
}

static int same_view(const kd_view *a, const kd_view *b) {
  if (a->tensor.bits != b->tensor.bits || a->rank != b->rank) return 0;
  if (a->rank < 0) return 1;
  if (a->offset != b->offset) return 0;
  for (int k = 0; k < a->rank; ++k)
    if (a->shape[k] != b->shape[k] || a->strides[k] != b->strides[k]) return 0;
  return 1;
}

static kd_status check_peer(const decl *d, const char *arg, int peer, int none_ok) {
  if (none_ok && peer == KD_NO_PEER) return KD_OK;
  if (peer < 0 || peer >= d->comm->nranks)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s': argument %s is %d, not a rank of the communicator's "
                   "%d", d->op, node_name(d->name), arg, peer, d->comm->nranks);
  return KD_OK;
}

static kd_status check_reduce(const decl *d, kd_reduce op, kd_dtype t) {
  if ((unsigned)op > KD_REDUCE_AVG)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s': argument op is %d, not a kd_reduce", d->op,
                   node_name(d->name), (int)op);
  int floating = t == KD_F32 || t == KD_F64 || t == KD_F16 || t == KD_BF16 || t == KD_C32 || t == KD_C64;
  int complex = t == KD_C32 || t == KD_C64;
  if ((op == KD_REDUCE_AVG && !floating) || (complex && op != KD_REDUCE_SUM && op != KD_REDUCE_AVG))
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s': %s elements have no %s reduction", d->op,
                   node_name(d->name), kd_dtype_name(t), op == KD_REDUCE_AVG ? "average" : "ordered");
  return KD_OK;
}

/* Adds the node: the token's access, then the given ones; the description
 * goes to the graph with its reference on the communicator. */
static kd_status add(const decl *d, kd_coll *proto, const char *kind, const kd_garg *args, size_t n,
                     kd_node *out) {
  kd_coll *c = malloc(sizeof *c);
  if (!c) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: node '%s': no memory for its description", d->op,
                         node_name(d->name));
  *c = *proto;
  c->comm = d->comm;
  snprintf(c->what, sizeof c->what, "%s node '%s'", kind, node_name(d->name));
  kd_garg all[3];
  all[0] = (kd_garg){0};
  all[0].is_tensor = 1;
  all[0].access = KD_INOUT;
  all[0].view = (kd_view){.tensor = d->comm->token, .rank = -1};
  for (size_t i = 0; i < n; ++i) all[i + 1] = args[i];
  kd_comm_ref(d->comm);
  kd_status st = kd_graph_foreign_add(d->g, d->op, d->name, coll_run, NULL, all, n + 1, 0, c, coll_release, 1, out);
  if (st) {
    kd_comm_unref(d->comm);
    free(c);
  }
  return st;
}

static kd_garg garg(kd_access mode, kd_view v) {
  kd_garg a = {0};
  a.is_tensor = 1;
  a.access = mode;
  a.view = v;
  return a;
}

/* dst and src of one dtype: in place (one read-write access) or two. */
static size_t pair(kd_view dst, kd_view src, kd_garg *args, int *in_place) {
  *in_place = same_view(&dst, &src);
  if (*in_place) {
    args[0] = garg(KD_INOUT, dst);
    return 1;
  }
  args[0] = garg(KD_IN, src);
  args[1] = garg(KD_OUT, dst);
  return 2;
}

static kd_status dtypes_match(const decl *d, kd_dtype a, kd_dtype b) {
  if (a == b) return KD_OK;
  return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s': dst is %s and src %s: one dtype", d->op,
                 node_name(d->name), kd_dtype_name(a), kd_dtype_name(b));
}

static kd_status sizes(const decl *d, const char *rule, size_t dst, size_t src, int ok) {
  if (ok) return KD_OK;
  return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: node '%s': dst has %zu elements and src %zu; %s", d->op,
                 node_name(d->name), dst, src, rule);
}

/* begin, then dst's and src's dtype (one) and elements. */
static kd_status begin_pair(decl *d, kd_graph *g, const char *op, const char *name, kd_comm *comm, const kd_view *dst,
                            const kd_view *src, kd_dtype *t, size_t *nd, size_t *ns) {
  kd_dtype ts = KD_F32;
  kd_status st = begin(d, g, op, name, comm);
  if (!st) st = view_info(d, "dst", dst, t, nd);
  if (!st) st = view_info(d, "src", src, &ts, ns);
  if (!st) st = dtypes_match(d, *t, ts);
  return st;
}

kd_status kd_graph_all_reduce(kd_graph *g, const char *name, kd_comm *comm, kd_view dst, kd_view src, kd_reduce op,
                              kd_node *out) {
  decl d;
  kd_dtype td = KD_F32;
  size_t nd = 0, ns = 0;
  kd_status st = begin_pair(&d, g, "kd_graph_all_reduce", name, comm, &dst, &src, &td, &nd, &ns);
  if (!st) st = check_reduce(&d, op, td);
  if (!st) st = sizes(&d, "they must be equal", nd, ns, nd == ns);
  if (st) return st;
  kd_coll c = {.kind = C_ALL_REDUCE, .op = op, .dtype = td, .count = nd};
  kd_garg args[2];
  size_t n = pair(dst, src, args, &c.in_place);
  return add(&d, &c, "all_reduce", args, n, out);
}

kd_status kd_graph_reduce_scatter(kd_graph *g, const char *name, kd_comm *comm, kd_view dst, kd_view src,
                                  kd_reduce op, kd_node *out) {
  decl d;
  kd_dtype td = KD_F32;
  size_t nd = 0, ns = 0;
  kd_status st = begin_pair(&d, g, "kd_graph_reduce_scatter", name, comm, &dst, &src, &td, &nd, &ns);
  if (!st) st = check_reduce(&d, op, td);
  if (!st) st = sizes(&d, "src must have nranks times dst's", nd, ns, ns == nd * (size_t)comm->nranks);
  if (st) return st;
  kd_coll c = {.kind = C_REDUCE_SCATTER, .op = op, .dtype = td, .count = nd};
  kd_garg args[2] = {garg(KD_IN, src), garg(KD_OUT, dst)};
  return add(&d, &c, "reduce_scatter", args, 2, out);
}

kd_status kd_graph_all_gather(kd_graph *g, const char *name, kd_comm *comm, kd_view dst, kd_view src,
                              kd_node *out) {
  decl d;
  kd_dtype td = KD_F32;
  size_t nd = 0, ns = 0;
  kd_status st = begin_pair(&d, g, "kd_graph_all_gather", name, comm, &dst, &src, &td, &nd, &ns);
  if (!st) st = sizes(&d, "dst must have nranks times src's", nd, ns, nd == ns * (size_t)comm->nranks);
  if (st) return st;
  kd_coll c = {.kind = C_ALL_GATHER, .dtype = td, .count = ns};
  kd_garg args[2] = {garg(KD_IN, src), garg(KD_OUT, dst)};
  return add(&d, &c, "all_gather", args, 2, out);
}

kd_status kd_graph_broadcast(kd_graph *g, const char *name, kd_comm *comm, kd_view buf, int root, kd_node *out) {
  decl d;
  kd_status st = begin(&d, g, "kd_graph_broadcast", name, comm);
  kd_dtype t = KD_F32;
  size_t n = 0;
  if (!st) st = check_peer(&d, "root", root, 0);
  if (!st) st = view_info(&d, "buf", &buf, &t, &n);
  if (st) return st;
  kd_coll c = {.kind = C_BROADCAST, .dtype = t, .count = n, .root = root, .in_place = 1};
  kd_garg args[1] = {garg(KD_INOUT, buf)}; /* the root's is only read, but one declaration serves every rank */
  return add(&d, &c, "broadcast", args, 1, out);
}

kd_status kd_graph_send_recv(kd_graph *g, const char *name, kd_comm *comm, kd_view send, int send_to, kd_view recv,
                             int recv_from, kd_node *out) {
  decl d;
  kd_status st = begin(&d, g, "kd_graph_send_recv", name, comm);
  if (!st) st = check_peer(&d, "send_to", send_to, 1);
  if (!st) st = check_peer(&d, "recv_from", recv_from, 1);
  kd_coll c = {.kind = C_SEND_RECV, .to = send_to, .from = recv_from, .dtype = KD_U8};
  kd_garg args[2];
  size_t n = 0;
  kd_dtype t = KD_U8;
  size_t elems = 0;
  if (!st && send_to != KD_NO_PEER && !(st = view_info(&d, "send", &send, &t, &elems))) {
    c.send_bytes = elems * kd_dtype_size(t);
    args[n++] = garg(KD_IN, send);
  }
  if (!st && recv_from != KD_NO_PEER && !(st = view_info(&d, "recv", &recv, &t, &elems))) {
    c.recv_bytes = elems * kd_dtype_size(t);
    args[n++] = garg(KD_OUT, recv);
  }
  if (st) return st;
  return add(&d, &c, "send_recv", args, n, out);
}
