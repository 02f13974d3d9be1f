/* SPDX-License-Identifier: Apache-2.0 */
/* The GRAPH executor: a plan as one executable CUDA graph, launched on the
 * session stream.
 *
 * Built once per plan, on the submission that first runs the plan in GRAPH
 * mode: one CUDA graph node per kdag node (kernel, memcpy for uploads and
 * sinks plus an event record node after each sink's copy, host, a child
 * graph captured from a foreign node's callback, an empty node for work of
 * zero size), each depending on the nodes of its plan predecessors, so the
 * graph carries the plan's reduced edge set and independent branches run
 * concurrently. Instantiated with an upload on the session stream.
 *
 * Every later submission launches the same executable graph. What changes
 * between submissions is patched in place first: kernel parameters when a
 * tensor was rebound or a scalar changed (compared against the bytes each
 * node was last given; after a rebinding only the bytes that hold a
 * tensor's address, kd_gexec_kernel), a foreign node's child graph when
 * its spans moved, and each upload's and sink's staging block and each
 * sink's event, which are per launch so that launches in flight never
 * share them (re-pointed only when they differ from the last launch's: a
 * sink's are the same in a submit-and-wait loop, see kd_sink_take).
 * Patching an executable graph affects only later launches.
 *
 * Lifetimes: the plan owns the executable graph, and the executable graph
 * holds the modules its kernels use, foreign resources and workspaces. A
 * launch holds none of them, nor the graph's tensors: whatever the graph
 * lets go of (a rebound tensor; the executable graph when the plan
 * replaces it; everything when the graph is destroyed) is released only
 * once every completion submitted before has retired
 * (kd_release_after_inflight). So a rebinding costs O(1) instead of a
 * reference per bound tensor, and a launch no reference count at all
 * (two atomic updates per launch were a third of kdag's own work per
 * launch, measured against tests/null_driver.c). */
#include <ck_pr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "cuda/cu_status.h"
#include "exec/exec.h"
#include "session/trace.h"

/* Parameter bytes that hold a tensor's address: the bound tensor's plus a
 * fixed byte offset (a rebinding keeps dtype and shape, so the offset of
 * the view into its tensor never changes). */
typedef struct kd_gexec_ptr {
  uint32_t at;      /* where in the parameter bytes */
  uint32_t binding;
  uint64_t offset;  /* bytes past the tensor's address */
} kd_gexec_ptr;

/* A kernel node's launch as the executable graph has it (in kd_gexec's
 * params arena). kp goes to the driver as it is, its kernelParams
 * pointing into blob, so a patch after a rebinding rewrites the address
 * bytes in ptrs and nothing else: no walk over the node's arguments,
 * accesses and function. */
typedef struct kd_gexec_kernel {
  CUDA_KERNEL_NODE_PARAMS kp;
  unsigned char *blob; /* the parameter bytes the node was last given */
  uint32_t blob_len;
  uint32_t ptr_count;
  kd_gexec_ptr ptrs[]; /* then kp.kernelParams' array, then blob */
} kd_gexec_kernel;

typedef struct kd_gexec_node {
  CUgraphNode cu;          /* the node its successors depend on (NULL before it is added) */
  CUgraphNode event;       /* sinks: the event record node after the copy */
  kd_gexec_kernel *kernel; /* kernels and built-ins that run (an empty one is an empty node) */
  CUdeviceptr *spans;      /* foreign: the span addresses of its capture */
  /* Transfers: what the executable graph's copy and event nodes point at
   * now, so a launch given the same staging block, tensor and event as
   * the one before (a submit-and-wait loop, whose pools hand them back)
   * makes no driver call to point them there again. */
  void *xfer_host;
  CUdeviceptr xfer_dptr;
  CUevent xfer_event;
  /* A traced session's graph (session/trace.h): event record nodes before
   * the node (after its predecessors' end records) and after it, pointed
   * at each launch's trace events. */
  CUgraphNode trace_begin, trace_end;
  /* Loops: the kernel before the conditional node (cu) and, for a WHILE,
   * the last node of its body, which set the node's handle; and the
   * device word counting trips when the loop has no trips tensor. */
  CUgraphNode loop_head, loop_tail;
  CUgraphConditionalHandle loop_handle;
  CUdeviceptr loop_scratch;
} kd_gexec_node;

struct kd_gexec {
  kd_resource res;         /* first: deferred as KD_HELD_RESOURCE, its destroy kd_gexec_destroy */
  kd_session *session;
  CUgraph graph;
  CUgraphExec exec;
  uint32_t node_count;
  kd_gexec_node *nodes;
  uint32_t *users_start;   /* per binding: the kernel, built-in and foreign nodes using it, */
  uint32_t *users;         /* users[users_start[b] .. users_start[b + 1]) */
  uint32_t *dirty;         /* per node: the patch round that last marked it */
  uint32_t round;
  uint32_t kernels;        /* kernel nodes, for counters.launches */
  int updated;             /* patched in place since its last launch (counters.graph_updates) */
  int refused;             /* the driver refused an in-place change (update_refused): rebuild */
  uint64_t stamp;          /* kd_held_module_once's, while building */
  kd_held_set keep;        /* modules (once each), foreign resources and workspaces */
  kd_arena params;         /* the kernel nodes' records: one allocation for many nodes */
  CUdeviceptr *workspaces; /* per node: foreign workspace (0 if none) */
  int traced;              /* built with trace nodes (a traced session's graphs all are) */
};

static void gexec_drop(kd_resource *r) { kd_gexec_destroy((kd_gexec *)r); }

void kd_gexec_release(kd_gexec *x) {
  if (!x) return;
  kd_session *s = x->session;
  (void)kd_deferred_room(s, 1); /* without room, the release waits instead */
  kd_release_after_inflight(s, KD_HELD_RESOURCE, &x->res);
}

void kd_gexec_destroy(kd_gexec *x) {
  if (!x) return;
  kd_session *s = x->session;
  /* It may run where no entry point made the context current (a retire
   * inside any call), and must not write the thread's message there. */
  (void)kd_device_try_current(&s->dev);
  if (x->exec) s->dev.cu->cuGraphExecDestroy(x->exec);
  if (x->graph) s->dev.cu->cuGraphDestroy(x->graph);
  for (uint32_t i = 0; x->nodes && i < x->node_count; ++i) free(x->nodes[i].spans); /* NULL: build ran out of memory */
  kd_arena_free(&x->params);
  kd_held_release_all(s, &x->keep);
  free(x->nodes);
  free(x->users_start);
  free(x->users);
  free(x->dirty);
  free(x->workspaces);
  free(x);
}



/* The error for a driver call on one node, naming it. */
static kd_status node_fail(kd_graph *g, uint32_t n, CUresult r, const char *op, const char *call) {
  kd_status st = kd_session_note(g->session, kd_fail_cu(r, op, call));
  return kd_fail_context(st, "%s: node '%s' (#%u)", op, g->nodes[n].name, n);
}

/* The driver refused to change node n of x in place: node_fail, and x
 * marked so that rebuild_if_refused instantiates afresh. Only these
 * refusals are answered that way: a foreign callback's own error, or a
 * capture it broke, would come back from a fresh build too. */
static kd_status update_refused(kd_graph *g, kd_gexec *x, uint32_t n, CUresult r, const char *op, const char *call) {
  x->refused = 1;
  return node_fail(g, n, r, op, call);
}

/* Parameters are a few bytes each (pointers, scalars, 144-byte views):
 * compared inline, eight bytes at a time, rather than by a memcmp call
 * per parameter. */
static int bytes_equal(const unsigned char *a, const unsigned char *b, uint32_t n) {
  if (n > 128) return memcmp(a, b, n) == 0;
  uint64_t diff = 0;
  uint32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    memcpy(&x, a + i, 8);
    memcpy(&y, b + i, 8);
    diff |= x ^ y;
  }
  for (; i < n; ++i) diff |= (uint64_t)(a[i] ^ b[i]);
  return diff == 0;
}

static int blob_same(const kd_gexec_kernel *k, const kd_node_launch *L) {
  uint32_t at = 0;
  for (uint32_t i = 0; i < L->count; at += L->sizes[i], ++i)
    if (at + L->sizes[i] > k->blob_len || !bytes_equal(k->blob + at, L->params[i], L->sizes[i])) return 0;
  return at == k->blob_len;
}

/* A node's parameter sizes are its kernel's, fixed when it is added: the
 * bytes always fit (bounded all the same). */
static void blob_write(kd_gexec_kernel *k, const kd_node_launch *L) {
  for (uint32_t i = 0, at = 0; i < L->count && at + L->sizes[i] <= k->blob_len; at += L->sizes[i], ++i)
    memcpy(k->blob + at, L->params[i], L->sizes[i]);
}

/* The driver's descriptions of a node are written in place, field by
 * field, into the caller's struct: one built here and returned by value
 * was copied with wide loads right after its narrow stores, which stalls
 * store-to-load forwarding (80% of a patch's own time, measured against
 * tests/null_driver.c). */
static void kernel_params(const kd_node_launch *L, CUDA_KERNEL_NODE_PARAMS *p) {
  memset(p, 0, sizeof *p);
  p->func = L->fn->fn;
  p->gridDimX = L->cfg.grid[0];
  p->gridDimY = L->cfg.grid[1];
  p->gridDimZ = L->cfg.grid[2];
  p->blockDimX = L->cfg.block[0];
  p->blockDimY = L->cfg.block[1];
  p->blockDimZ = L->cfg.block[2];
  p->sharedMemBytes = L->cfg.shared_bytes;
  p->kernelParams = L->count ? (void **)L->params : NULL;
}

/* The node's kernel record, from its resolved launch: the parameter bytes,
 * the driver's description of the node pointing at them, and which bytes
 * hold a tensor's address (a kernel's pointer arguments, a built-in's view
 * bases), with the offset read back from the bytes themselves, so the
 * address arithmetic stays kd_node_launch_resolve's alone. */
static kd_status kernel_record(kd_graph *g, kd_gexec *x, kd_gexec_node *xn, const kd_gnode *node,
                               const kd_node_launch *L, const char *op) {
  uint32_t at[KD_PTX_MAX_PARAMS], len = 0, np = 0;
  for (uint32_t i = 0; i < L->count; ++i) {
    at[i] = len;
    len += L->sizes[i];
  }
  kd_gexec_ptr ptrs[KD_PTX_MAX_PARAMS];
  for (uint32_t i = 0; i < L->count; ++i) {
    const kd_gaccess *acc = NULL;
    uint32_t where = at[i];
    if (node->kind == KD_NODE_KERNEL && i < node->arg_count && node->args[i].access >= 0) {
      acc = &g->accesses[node->first_access + (uint32_t)node->args[i].access];
    } else if (node->kind == KD_NODE_BUILTIN && i < node->access_count && i < 3) { /* params[i] is view i */
      acc = &g->accesses[node->first_access + i];
      where += (uint32_t)offsetof(kd_kview, base);
    }
    if (!acc) continue;
    uint64_t address;
    memcpy(&address, (const unsigned char *)L->params[i] + (where - at[i]), sizeof address);
    ptrs[np++] = (kd_gexec_ptr){where, acc->binding, address - g->bindings[acc->binding].obj->dptr};
  }
  size_t head = kd_arena_size(sizeof(kd_gexec_kernel) + np * sizeof(kd_gexec_ptr));
  size_t array = kd_arena_size((L->count ? L->count : 1) * sizeof(void *)), bytes = kd_arena_size(len ? len : 1);
  if (!kd_arena_reserve(&x->params, head + array + bytes))
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for kernel parameters", op);
  kd_gexec_kernel *k = kd_arena_take(&x->params, head);
  void **params = kd_arena_take(&x->params, array);
  k->blob = kd_arena_take(&x->params, bytes);
  k->blob_len = len;
  k->ptr_count = np;
  memcpy(k->ptrs, ptrs, np * sizeof *ptrs);
  blob_write(k, L);
  for (uint32_t i = 0; i < L->count; ++i) params[i] = k->blob + at[i];
  kernel_params(L, &k->kp);
  k->kp.kernelParams = L->count ? params : NULL;
  xn->kernel = k;
  return KD_OK;
}

static void copy_params(const kd_gnode *node, CUdeviceptr dev, void *host, CUDA_MEMCPY3D *c) {
  memset(c, 0, sizeof *c);
  if (node->kind == KD_NODE_UPLOAD) {
    c->srcMemoryType = CU_MEMORYTYPE_HOST;
    c->srcHost = host;
    c->dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c->dstDevice = dev;
  } else {
    c->srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c->srcDevice = dev;
    c->dstMemoryType = CU_MEMORYTYPE_HOST;
    c->dstHost = host;
  }
  c->WidthInBytes = node->bytes;
  c->Height = 1;
  c->Depth = 1;
}

static CUdeviceptr transfer_dptr(kd_graph *g, const kd_gnode *node) {
  return g->bindings[g->accesses[node->first_access].binding].obj->dptr;
}

static kd_status capture_stream(kd_session *s, const char *op) {
  kd_cuda_state *cs = s->exec;
  if (cs->capture_stream) return KD_OK;
  CUresult r = s->dev.cu->cuStreamCreate(&cs->capture_stream, CU_STREAM_NON_BLOCKING);
  return r == CUDA_SUCCESS ? KD_OK : kd_session_note(s, kd_fail_cu(r, op, "cuStreamCreate (capture stream)"));
}

/* Runs a foreign node's callback with a stream in capture over spans (the
 * node's current ones, kd_foreign_spans), so what it enqueues becomes *out
 * (owned by the caller). The caller records the spans in xn (spans_seen)
 * only once the capture is in the executable graph: spans that say
 * "patched" while the graph still holds an older capture would keep a
 * rebinding from ever reaching it. */
static kd_status capture_foreign(kd_graph *g, kd_gexec *x, uint32_t n, const kd_span *spans, const char *op,
                                 CUgraph *out) {
  kd_session *s = g->session;
  kd_gnode *node = &g->nodes[n];
  kd_gexec_node *xn = &x->nodes[n];
  kd_status st = capture_stream(s, op);
  if (st) return st;
  CUstream cap = ((kd_cuda_state *)s->exec)->capture_stream;
  if (!xn->spans && node->access_count) { /* room first: nothing can fail after the capture is in */
    xn->spans = calloc(node->access_count, sizeof *xn->spans);
    if (!xn->spans)
      return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: foreign node '%s' (#%u): no memory for its spans", op, node->name, n);
  }
  kd_foreign_call call = {(void *)cap, spans, node->access_count, x->workspaces[n],
                          node->workspace_bytes, node->res ? node->res->resource : NULL};
  CUresult r = s->dev.cu->cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  if (r != CUDA_SUCCESS) return node_fail(g, n, r, op, "cuStreamBeginCapture");
  st = kd_foreign_invoke(node, &call);
  CUgraph child = NULL;
  r = s->dev.cu->cuStreamEndCapture(cap, &child);
  if (st) {
    if (child) s->dev.cu->cuGraphDestroy(child);
    return kd_fail_context(st, "%s: foreign node '%s' (#%u), captured for a CUDA graph", op, node->name, n);
  }
  if (r != CUDA_SUCCESS) { /* the node first, then the advice, then the driver's words */
    st = kd_session_note(s, kd_fail_cu(r, op, "cuStreamEndCapture"));
    return kd_fail_context(st, "%s: foreign node '%s' (#%u), captured for a CUDA graph: the callback must "
                           "enqueue its work on call->stream only, without waiting", op, node->name, n);
  }
  *out = child;
  return KD_OK;
}

/* The spans a foreign node's capture in the executable graph was made
 * with (room made by capture_foreign). */
static void spans_seen(kd_gexec_node *xn, const kd_span *spans, uint32_t count) {
  for (uint32_t k = 0; k < count; ++k) xn->spans[k] = spans[k].device_ptr;
}

/* Makes the edges into kernel node n from the last nprog of deps, kernel
 * nodes whose edges to n come from declared accesses, programmatic
 * (KD_LAUNCH_PDL): the rest of deps were given to cuGraphAddKernelNode. */
static kd_status programmatic_deps(kd_graph *g, kd_gexec *x, uint32_t n, const CUgraphNode *from, size_t nprog,
                                   const char *op) {
  CUgraphEdgeData data[8];
  CUgraphNode to[8];
  memset(data, 0, sizeof data);
  for (size_t i = 0; i < 8; ++i) {
    data[i].from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
    data[i].type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
    to[i] = x->nodes[n].cu;
  }
  for (size_t done = 0; done < nprog;) { /* in batches of eight: the arrays' room */
    size_t k = nprog - done < 8 ? nprog - done : 8;
    CUresult r = g->session->dev.cu->cuGraphAddDependencies(x->graph, from + done, to, data, k);
    if (r != CUDA_SUCCESS) return node_fail(g, n, r, op, "cuGraphAddDependencies (programmatic)");
    done += k;
  }
  g->session->counters.programmatic_edges += nprog;
  return KD_OK;
}

/* Adds node n after deps. The last nprog of them are kernel nodes whose
 * edges to n come from declared accesses: programmatic when n is a kernel
 * that opted in (kd_pdl_wanted), full otherwise. */
static kd_status add_node(kd_graph *g, kd_gexec *x, uint32_t n, const CUgraphNode *deps, size_t ndeps, size_t nprog,
                          const kd_xfer *xf, const char *op, CUgraph graph) {
  kd_session *s = g->session;
  const kd_cu_table *cu = s->dev.cu;
  kd_gnode *node = &g->nodes[n];
  kd_gexec_node *xn = &x->nodes[n];
  CUresult r;
  switch (node->kind) {
    case KD_NODE_KERNEL:
    case KD_NODE_BUILTIN: {
      kd_node_launch L;
      kd_status st = kd_node_launch_resolve(g, op, node, &L);
      if (st) return kd_fail_context(st, "%s: node '%s' (#%u)", op, node->name, n);
      kd_module_obj *m = node->kind == KD_NODE_KERNEL ? node->module : s->builtins;
      st = kd_held_module_once(&x->keep, m, x->stamp, op);
      if (st) return kd_fail_context(st, "%s: node '%s' (#%u)", op, node->name, n);
      if (L.empty) {
        r = cu->cuGraphAddEmptyNode(&xn->cu, graph, deps, ndeps);
        return r == CUDA_SUCCESS ? KD_OK : node_fail(g, n, r, op, "cuGraphAddEmptyNode");
      }
      st = kernel_record(g, x, xn, node, &L, op);
      if (st) return kd_fail_context(st, "%s: node '%s' (#%u)", op, node->name, n);
      size_t prog = kd_pdl_wanted(g, &L) ? nprog : 0;
      r = cu->cuGraphAddKernelNode(&xn->cu, graph, deps, ndeps - prog, &xn->kernel->kp);
      if (r != CUDA_SUCCESS) return node_fail(g, n, r, op, "cuGraphAddKernelNode");
      x->kernels++;
      return prog ? programmatic_deps(g, x, n, deps + ndeps - prog, prog, op) : KD_OK;
    }
    case KD_NODE_UPLOAD:
    case KD_NODE_SINK:
      if (!node->bytes) { /* a memcpy node cannot be empty */
        r = cu->cuGraphAddEmptyNode(&xn->cu, graph, deps, ndeps);
      } else {
        CUDA_MEMCPY3D c;
        xn->xfer_host = xf->block->host;
        xn->xfer_dptr = transfer_dptr(g, node);
        copy_params(node, xn->xfer_dptr, xn->xfer_host, &c);
        r = cu->cuGraphAddMemcpyNode(&xn->cu, graph, deps, ndeps, &c, s->dev.ctx);
      }
      if (r != CUDA_SUCCESS) return node_fail(g, n, r, op, node->bytes ? "cuGraphAddMemcpyNode" : "cuGraphAddEmptyNode");
      if (node->kind == KD_NODE_SINK) {
        r = cu->cuGraphAddEventRecordNode(&xn->event, graph, &xn->cu, 1, xf->event);
        if (r != CUDA_SUCCESS) return node_fail(g, n, r, op, "cuGraphAddEventRecordNode");
        xn->xfer_event = xf->event;
      }
      return KD_OK;
    case KD_NODE_HOST: {
      CUDA_HOST_NODE_PARAMS p = {kd_host_trampoline, node->host_call};
      r = cu->cuGraphAddHostNode(&xn->cu, graph, deps, ndeps, &p);
      return r == CUDA_SUCCESS ? KD_OK : node_fail(g, n, r, op, "cuGraphAddHostNode");
    }
    case KD_NODE_FOREIGN: {
      kd_status st;
      if (node->workspace_bytes) {
        CUdeviceptr ws = 0;
        st = kd_session_note(s, kd_device_alloc(&s->dev, op, node->workspace_bytes, &ws));
        if (!st) st = kd_held_add(&x->keep, KD_HELD_DEVPTR, (void *)(uintptr_t)ws, op);
        if (st) {
          if (ws) kd_device_free(&s->dev, ws);
          return kd_fail_context(st, "%s: foreign node '%s' (#%u): its %zu-byte workspace", op, node->name, n,
                                 node->workspace_bytes);
        }
        x->workspaces[n] = ws;
      }
      if (node->res) {
        st = kd_held_add(&x->keep, KD_HELD_RESOURCE, &node->res->res, op);
        if (st) return kd_fail_context(st, "%s: foreign node '%s' (#%u)", op, node->name, n);
        ck_pr_inc_32(&node->res->refs);
      }
      CUgraph child;
      kd_span spans[KD_FOREIGN_MAX_ACCESSES];
      kd_foreign_spans(g, node, spans);
      st = capture_foreign(g, x, n, spans, op, &child);
      if (st) return st;
      r = cu->cuGraphAddChildGraphNode(&xn->cu, graph, deps, ndeps, child); /* clones child */
      cu->cuGraphDestroy(child);
      if (r != CUDA_SUCCESS) return node_fail(g, n, r, op, "cuGraphAddChildGraphNode");
      spans_seen(xn, spans, node->access_count);
      return KD_OK;
    }
  }
  return KD_OK;
}

/* The parameters of a loop's head (tail 0) or tail (tail 1) kernel, over
 * the current bindings: the handle, the condition, the trip count (the
 * loop's tensor, its scratch word, or for an IF none) and the limit. args
 * and values are the caller's storage, alive until the driver has them. */
typedef struct loop_args {
  CUgraphConditionalHandle handle;
  CUdeviceptr cond, trips;
  unsigned max_trips;
  void *args[4];
} loop_args;

static kd_status loop_params(kd_graph *g, kd_gexec_node *xn, uint32_t v, int tail, const char *op, loop_args *a,
                             CUDA_KERNEL_NODE_PARAMS *p) {
  kd_session *s = g->session;
  kd_gnode *node = &g->nodes[v];
  kd_module_obj *m;
  kd_status st = kd_loops_module(s, op, &m);
  uint32_t fi = 0;
  if (!st) st = kd_session_note(s, kd_cu_module_function(&s->dev, op, &m->cu, tail ? "kd_loop_tail" : "kd_loop_head",
                                                        &fi));
  if (st) return kd_fail_context(st, "%s: loop '%s' (#%u)", op, node->name, v);
  a->handle = xn->loop_handle;
  a->cond = g->bindings[g->accesses[node->first_access].binding].obj->dptr;
  a->trips = node->has_trips ? g->bindings[g->accesses[node->first_access + 1].binding].obj->dptr : xn->loop_scratch;
  a->max_trips = node->max_trips;
  a->args[0] = &a->handle, a->args[1] = &a->cond, a->args[2] = &a->trips, a->args[3] = &a->max_trips;
  memset(p, 0, sizeof *p);
  p->func = m->cu.fns[fi].fn;
  p->gridDimX = p->gridDimY = p->gridDimZ = 1;
  p->blockDimX = p->blockDimY = p->blockDimZ = 1;
  p->kernelParams = a->args;
  return KD_OK;
}

static kd_status build_level(kd_graph *g, kd_gexec *x, CUgraph graph, const uint32_t *order, uint32_t count,
                             const uint32_t *pred_start, const uint32_t *pred, CUgraphNode *deps, const kd_xfer *xf,
                             const uint32_t *xf_of, kd_trace_batch *tb, const char *op);

/* Loop v after deps: its head kernel, then the conditional node (xn->cu,
 * what its successors depend on) with the body built into the node's
 * graph and, for a WHILE, the tail kernel after the body's last nodes. */
static kd_status add_loop(kd_graph *g, kd_gexec *x, uint32_t v, CUgraph graph, const CUgraphNode *deps, size_t nd,
                          const uint32_t *pred_start, const uint32_t *pred, CUgraphNode *scratch, const kd_xfer *xf,
                          const uint32_t *xf_of, const char *op) {
  kd_session *s = g->session;
  const kd_cu_table *cu = s->dev.cu;
  kd_gnode *node = &g->nodes[v];
  kd_gexec_node *xn = &x->nodes[v];
  if (!cu->cuGraphConditionalHandleCreate || !cu->cuGraphAddNode)
    return kd_fail(KD_ERR_DRIVER, "%s: loop '%s' (#%u): the driver has no conditional graph nodes (CUDA 12.3+ "
                   "drivers do); run the graph EAGER", op, node->name, v);
  kd_module_obj *m;
  kd_status st = kd_loops_module(s, op, &m);
  if (!st) st = kd_held_module_once(&x->keep, m, x->stamp, op);
  if (!st && !node->has_trips && !node->is_if) { /* the trips are counted somewhere: a word of its own */
    st = kd_session_note(s, kd_device_alloc(&s->dev, op, sizeof(uint32_t), &xn->loop_scratch));
    if (!st) st = kd_held_add(&x->keep, KD_HELD_DEVPTR, (void *)(uintptr_t)xn->loop_scratch, op);
    if (st && xn->loop_scratch) kd_device_free(&s->dev, xn->loop_scratch);
    if (st) xn->loop_scratch = 0;
  }
  if (st) return kd_fail_context(st, "%s: loop '%s' (#%u)", op, node->name, v);
  CUresult r = cu->cuGraphConditionalHandleCreate(&xn->loop_handle, graph, s->dev.ctx, 0, 0);
  if (r != CUDA_SUCCESS) return node_fail(g, v, r, op, "cuGraphConditionalHandleCreate");
  loop_args a;
  CUDA_KERNEL_NODE_PARAMS kp;
  st = loop_params(g, xn, v, 0, op, &a, &kp);
  if (st) return st;
  r = cu->cuGraphAddKernelNode(&xn->loop_head, graph, deps, nd, &kp);
  if (r != CUDA_SUCCESS) return node_fail(g, v, r, op, "cuGraphAddKernelNode (the loop's head)");
  CUgraphNodeParams np;
  memset(&np, 0, sizeof np);
  np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  np.conditional.handle = xn->loop_handle;
  np.conditional.type = node->is_if ? CU_GRAPH_COND_TYPE_IF : CU_GRAPH_COND_TYPE_WHILE;
  np.conditional.size = 1;
  np.conditional.ctx = s->dev.ctx;
  r = cu->cuGraphAddNode(&xn->cu, graph, &xn->loop_head, NULL, 1, &np);
  if (r != CUDA_SUCCESS) return node_fail(g, v, r, op, "cuGraphAddNode (conditional)");
  CUgraph body = np.conditional.phGraph_out[0];
  const uint32_t *members = g->plan.order + g->plan.body_start[v];
  uint32_t count = g->plan.body_count[v];
  st = build_level(g, x, body, members, count, pred_start, pred, scratch, xf, xf_of, NULL, op);
  if (st || node->is_if) return st;
  /* The tail after every body node nothing in the body follows. */
  size_t last = 0;
  for (uint32_t k = 0; k < count; ++k) {
    uint32_t b = members[k];
    if (g->plan.succ_start[b] == g->plan.succ_start[b + 1]) scratch[last++] = x->nodes[b].cu;
  }
  st = loop_params(g, xn, v, 1, op, &a, &kp);
  if (st) return st;
  r = cu->cuGraphAddKernelNode(&xn->loop_tail, body, scratch, last, &kp);
  return r == CUDA_SUCCESS ? KD_OK : node_fail(g, v, r, op, "cuGraphAddKernelNode (the loop's tail)");
}

/* One level of a graph with loops into graph: the nodes in order, each
 * after its predecessors of the level (pred, by node). With tb (the top
 * level of a traced session's graph) each node between two event record
 * nodes. No edge is programmatic. deps is scratch for node_count entries;
 * a loop reuses it for its body once its own dependencies are added. */
static kd_status build_level(kd_graph *g, kd_gexec *x, CUgraph graph, const uint32_t *order, uint32_t count,
                             const uint32_t *pred_start, const uint32_t *pred, CUgraphNode *deps, const kd_xfer *xf,
                             const uint32_t *xf_of, kd_trace_batch *tb, const char *op) {
  const kd_cu_table *cu = g->session->dev.cu;
  kd_status st = KD_OK;
  for (uint32_t i = 0; !st && i < count; ++i) {
    uint32_t v = order[i];
    kd_gexec_node *xn = &x->nodes[v];
    size_t nd = 0;
    for (uint32_t k = pred_start[v]; k < pred_start[v + 1]; ++k)
      deps[nd++] = tb ? x->nodes[pred[k]].trace_end : x->nodes[pred[k]].cu;
    CUevent begin = NULL, end = NULL;
    CUresult r;
    if (tb) {
      kd_trace_batch_span(tb, i, g->nodes[v].name, "node", &begin, &end);
      r = cu->cuGraphAddEventRecordNode(&xn->trace_begin, graph, deps, nd, begin);
      if (r != CUDA_SUCCESS) return node_fail(g, v, r, op, "cuGraphAddEventRecordNode (trace)");
      deps[0] = xn->trace_begin;
      nd = 1;
    }
    if (g->nodes[v].kind == KD_NODE_LOOP)
      st = add_loop(g, x, v, graph, deps, nd, pred_start, pred, deps, xf, xf_of, op);
    else
      st = add_node(g, x, v, deps, nd, 0, xf_of[v] ? &xf[xf_of[v] - 1] : NULL, op, graph);
    if (!st && tb && (r = cu->cuGraphAddEventRecordNode(&xn->trace_end, graph, &xn->cu, 1, end)) != CUDA_SUCCESS)
      st = node_fail(g, v, r, op, "cuGraphAddEventRecordNode (trace)");
  }
  return st;
}

/* Which nodes use each binding, so a rebinding patches only those. */
static kd_status index_users(kd_graph *g, kd_gexec *x, const char *op) {
  uint32_t nb = g->binding_count;
  x->users_start = calloc((size_t)nb + 2, sizeof *x->users_start);
  x->users = malloc(((size_t)g->access_count + 1) * sizeof *x->users);
  x->dirty = calloc((size_t)g->node_count + 1, sizeof *x->dirty);
  if (!x->users_start || !x->users || !x->dirty)
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the CUDA graph's index of tensor users", op);
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t n = 0; n < g->node_count; ++n) {
      kd_gnode *node = &g->nodes[n];
      if (node->kind != KD_NODE_KERNEL && node->kind != KD_NODE_BUILTIN && node->kind != KD_NODE_FOREIGN &&
          node->kind != KD_NODE_LOOP)
        continue;
      for (uint32_t k = 0; k < node->access_count; ++k) {
        uint32_t b = g->accesses[node->first_access + k].binding;
        if (pass == 0) x->users_start[b + 2]++;
        else x->users[x->users_start[b + 1]++] = n;
      }
    }
    if (pass == 0)
      for (uint32_t b = 0; b < nb; ++b) x->users_start[b + 2] += x->users_start[b + 1];
  }
  return KD_OK; /* users_start[b] .. users_start[b + 1] after the second pass */
}

/* Builds and instantiates the plan's CUDA graph, its transfers pointed at
 * this launch's blocks and events, and with tb (a traced session's) each
 * node between two event record nodes pointed at tb's events. */
static kd_status build(kd_graph *g, const char *op, const kd_xfer *xf, kd_trace_batch *tb, kd_gexec **out) {
  kd_session *s = g->session;
  const kd_cu_table *cu = s->dev.cu;
  uint32_t n = g->node_count;
  kd_gexec *x = calloc(1, sizeof *x);
  if (x) x->res.destroy = gexec_drop;
  uint32_t *pred_start = calloc((size_t)n + 1, sizeof *pred_start);
  uint32_t *pred = malloc(((size_t)g->edge_count + 1) * sizeof *pred);
  uint32_t *fill = calloc((size_t)n + 1, sizeof *fill);
  uint32_t *xf_of = calloc((size_t)n + 1, sizeof *xf_of); /* per node: its transfer + 1, 0 if none */
  CUgraphNode *deps = malloc(((size_t)n + 1) * sizeof *deps);
  kd_status st = KD_OK;
  if (x) {
    x->session = s;
    /* Modules are held once per executable graph, however many nodes use one. */
    x->stamp = kd_stamp_next(&s->stamps);
    x->node_count = n;
    x->nodes = calloc((size_t)n + 1, sizeof *x->nodes);
    x->workspaces = calloc((size_t)n + 1, sizeof *x->workspaces);
  }
  if (!x || !pred_start || !pred || !fill || !xf_of || !deps || !x->nodes || !x->workspaces) {
    st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the CUDA graph", op);
    goto done;
  }
  for (uint32_t i = 0; i < kd_cuda_plan_get(g)->xfer_count; ++i) xf_of[xf[i].node] = i + 1;
  /* Edges into each node in CSR, from the graph's (already reduced) edges. */
  for (uint32_t e = 0; e < g->edge_count; ++e) pred_start[g->edges[e].to + 1]++;
  for (uint32_t i = 0; i < n; ++i) pred_start[i + 1] += pred_start[i];
  for (uint32_t e = 0; e < g->edge_count; ++e) {
    uint32_t t = g->edges[e].to;
    pred[pred_start[t] + fill[t]++] = e;
  }
  st = index_users(g, x, op);
  if (st) goto done;
  CUresult r = cu->cuGraphCreate(&x->graph, 0);
  if (r != CUDA_SUCCESS) {
    st = kd_session_note(s, kd_fail_cu(r, op, "cuGraphCreate"));
    goto done;
  }
  x->traced = tb != NULL;
  if (g->plan.loops) { /* levels: each node after its predecessors of its level, by node */
    memset(pred_start, 0, ((size_t)n + 1) * sizeof *pred_start);
    memset(fill, 0, ((size_t)n + 1) * sizeof *fill);
    for (uint32_t k = 0; k < g->plan.edge_count; ++k) pred_start[g->plan.succ[k] + 1]++;
    for (uint32_t i = 0; i < n; ++i) pred_start[i + 1] += pred_start[i];
    for (uint32_t a = 0; a < n; ++a)
      for (uint32_t k = g->plan.succ_start[a]; k < g->plan.succ_start[a + 1]; ++k) {
        uint32_t b = g->plan.succ[k];
        pred[pred_start[b] + fill[b]++] = a;
      }
    st = build_level(g, x, x->graph, g->plan.order, g->plan.top_count, pred_start, pred, deps, xf, xf_of, tb, op);
  }
  for (uint32_t i = 0; !g->plan.loops && !st && i < n; ++i) {
    uint32_t v = g->plan.order[i];
    kd_gexec_node *xn = &x->nodes[v];
    size_t nd = 0, nprog = 0;
    /* Full dependencies first, then the edges that may be programmatic
     * (add_node): from kernel nodes, from declared accesses. */
    for (int last = 0; last < 2; ++last)
      for (uint32_t k = pred_start[v]; k < pred_start[v + 1]; ++k) {
        const kd_gedge *e = &g->edges[pred[k]];
        int may = !tb && s->dev.pdl && e->hazard != KD_HAZ_EXPLICIT && x->nodes[e->from].kernel;
        if (may != last) continue;
        /* Traced, after the predecessors' end events: a node's span never
         * starts before the spans it depends on have ended (their events
         * would otherwise be recorded in either order). */
        deps[nd++] = tb ? x->nodes[e->from].trace_end : x->nodes[e->from].cu;
        nprog += (size_t)may;
      }
    CUevent begin = NULL, end = NULL;
    if (tb) { /* begin on the predecessors' ends, the node on begin, end on the node */
      kd_trace_batch_span(tb, i, g->nodes[v].name, "node", &begin, &end);
      r = cu->cuGraphAddEventRecordNode(&xn->trace_begin, x->graph, deps, nd, begin);
      if (r != CUDA_SUCCESS) {
        st = node_fail(g, v, r, op, "cuGraphAddEventRecordNode (trace)");
        break;
      }
      deps[0] = xn->trace_begin;
      nd = 1;
    }
    st = add_node(g, x, v, deps, nd, nprog, xf_of[v] ? &xf[xf_of[v] - 1] : NULL, op, x->graph);
    if (!st && tb && (r = cu->cuGraphAddEventRecordNode(&xn->trace_end, x->graph, &xn->cu, 1, end)) != CUDA_SUCCESS)
      st = node_fail(g, v, r, op, "cuGraphAddEventRecordNode (trace)");
  }
  if (st) goto done;
  CUDA_GRAPH_INSTANTIATE_PARAMS ip;
  memset(&ip, 0, sizeof ip);
  ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
  ip.hUploadStream = s->dev.stream;
  r = cu->cuGraphInstantiateWithParams(&x->exec, x->graph, &ip);
  if (r != CUDA_SUCCESS) {
    x->exec = NULL;
    st = kd_session_note(s, kd_fail_cu(r, op, "cuGraphInstantiateWithParams"));
    for (uint32_t i = 0; i < n; ++i)
      if (ip.hErrNode_out && (x->nodes[i].cu == ip.hErrNode_out || x->nodes[i].event == ip.hErrNode_out))
        st = kd_fail_context(st, "%s: node '%s' (#%u)", op, g->nodes[i].name, i);
    st = kd_fail_context(st, "instantiate result %d", (int)ip.result_out);
    goto done;
  }
  s->counters.graph_instantiations++;
  kd_log(&s->log, KD_LOG_DEBUG, "graph '%s': CUDA graph instantiated (%u nodes)", kd_graph_name(g), g->node_count);
  kd_graph_changes_clear(g); /* built from the current bindings and values */
done:
  free(pred_start);
  free(pred);
  free(fill);
  free(xf_of);
  free(deps);
  if (st && x) { /* never launched */
    kd_gexec_destroy(x);
    x = NULL;
  }
  *out = x;
  return st;
}

/* A kernel node's tensor addresses, from the current bindings: whether any
 * moved. was receives the bytes they replace. */
static int addresses_refresh(kd_graph *g, kd_gexec_kernel *k, uint64_t *was) {
  int moved = 0;
  for (uint32_t i = 0; i < k->ptr_count; ++i) {
    const kd_gexec_ptr *p = &k->ptrs[i];
    uint64_t now = g->bindings[p->binding].obj->dptr + p->offset;
    memcpy(&was[i], k->blob + p->at, sizeof now);
    if (now != was[i]) {
      memcpy(k->blob + p->at, &now, sizeof now);
      moved = 1;
    }
  }
  return moved;
}

/* Patches node n where the executable graph's copy is out of date: a
 * kernel's parameters, a foreign node's capture. scalars: the node's
 * values may have been set (kd_graph_set_arg), so every parameter is
 * resolved and compared; otherwise only tensors were rebound, and only
 * the address bytes are. A failure leaves the executable graph as it was
 * (the caller rebuilds it, or tries again). */
static kd_status patch_node(kd_graph *g, kd_gexec *x, uint32_t n, int scalars, const char *op) {
  const kd_cu_table *cu = g->session->dev.cu;
  kd_gnode *node = &g->nodes[n];
  kd_gexec_node *xn = &x->nodes[n];
  if (node->kind == KD_NODE_FOREIGN) {
    kd_span spans[KD_FOREIGN_MAX_ACCESSES];
    kd_foreign_spans(g, node, spans);
    uint32_t k = 0;
    while (k < node->access_count && spans[k].device_ptr == xn->spans[k]) ++k;
    if (k == node->access_count) return KD_OK;
    CUgraph child;
    kd_status st = capture_foreign(g, x, n, spans, op, &child);
    if (st) return st;
    CUresult r = cu->cuGraphExecChildGraphNodeSetParams(x->exec, xn->cu, child);
    cu->cuGraphDestroy(child);
    if (r != CUDA_SUCCESS) return update_refused(g, x, n, r, op, "cuGraphExecChildGraphNodeSetParams");
    spans_seen(xn, spans, node->access_count);
    x->updated = 1;
    return KD_OK;
  }
  if (node->kind == KD_NODE_LOOP) { /* its condition or trip count rebound: both kernels' addresses */
    for (int tail = 0; tail < 1 + !node->is_if; ++tail) {
      loop_args a;
      CUDA_KERNEL_NODE_PARAMS kp;
      kd_status st = loop_params(g, xn, n, tail, op, &a, &kp);
      if (st) return st;
      CUresult r = cu->cuGraphExecKernelNodeSetParams(x->exec, tail ? xn->loop_tail : xn->loop_head, &kp);
      if (r != CUDA_SUCCESS) return update_refused(g, x, n, r, op, "cuGraphExecKernelNodeSetParams (loop)");
    }
    x->updated = 1;
    return KD_OK;
  }
  kd_gexec_kernel *k = xn->kernel;
  if (!k) return KD_OK; /* an empty built-in stays empty: shapes never change */
  CUresult r;
  if (!scalars) {
    uint64_t was[KD_PTX_MAX_PARAMS];
    if (!addresses_refresh(g, k, was)) return KD_OK;
    r = cu->cuGraphExecKernelNodeSetParams(x->exec, xn->cu, &k->kp);
    if (r != CUDA_SUCCESS) { /* the bytes say what the executable graph has */
      for (uint32_t i = 0; i < k->ptr_count; ++i) memcpy(k->blob + k->ptrs[i].at, &was[i], sizeof was[i]);
      return update_refused(g, x, n, r, op, "cuGraphExecKernelNodeSetParams");
    }
  } else {
    kd_node_launch L;
    kd_status st = kd_node_launch_resolve(g, op, node, &L);
    if (st) return kd_fail_context(st, "%s: node '%s' (#%u)", op, node->name, n);
    if (blob_same(k, &L)) return KD_OK;
    CUDA_KERNEL_NODE_PARAMS p;
    kernel_params(&L, &p);
    r = cu->cuGraphExecKernelNodeSetParams(x->exec, xn->cu, &p);
    if (r != CUDA_SUCCESS) return update_refused(g, x, n, r, op, "cuGraphExecKernelNodeSetParams");
    blob_write(k, &L);
  }
  x->updated = 1;
  return KD_OK;
}

/* Patches kernel parameters and foreign captures that changed since the
 * executable graph last saw them: only nodes using a rebound tensor, or
 * whose scalars were set. After a failure the lists stay, so the next try
 * patches them all again, on this executable graph or (when the driver
 * refused the change, rebuild_if_refused) a fresh one. */
static kd_status patch(kd_graph *g, kd_gexec *x, const char *op) {
  if (!g->rebound_count && !g->reargs_count) return KD_OK; /* the common relaunch: O(1) */
  uint32_t round = ++x->round;
  if (round == 0) { /* wrapped (2^32 patching submissions): no mark may look current */
    memset(x->dirty, 0, (size_t)x->node_count * sizeof *x->dirty);
    round = x->round = 1;
  }
  kd_status st = KD_OK;
  /* Nodes with values set first, whole: a node also using a rebound
   * tensor is then done. */
  for (uint32_t i = 0; !st && i < g->reargs_count; ++i) {
    uint32_t n = g->reargs[i];
    if (x->dirty[n] == round) continue;
    x->dirty[n] = round;
    st = patch_node(g, x, n, 1, op);
  }
  for (uint32_t i = 0; !st && i < g->rebound_count; ++i) {
    uint32_t b = g->rebound[i];
    for (uint32_t u = x->users_start[b]; !st && u < x->users_start[b + 1]; ++u) {
      uint32_t n = x->users[u];
      if (x->dirty[n] == round) continue;
      x->dirty[n] = round;
      st = patch_node(g, x, n, 0, op);
    }
  }
  if (st) return st; /* the lists stay: the next try patches them all again */
  kd_graph_changes_clear(g);
  return KD_OK;
}

/* Points the executable graph's transfers at this launch's blocks and events. */
static kd_status repoint(kd_graph *g, kd_gexec *x, const kd_xfer *xf, const char *op) {
  kd_session *s = g->session;
  const kd_cu_table *cu = s->dev.cu;
  for (uint32_t i = 0; i < kd_cuda_plan_get(g)->xfer_count; ++i) {
    uint32_t n = xf[i].node;
    kd_gnode *node = &g->nodes[n];
    kd_gexec_node *xn = &x->nodes[n];
    CUresult r;
    CUdeviceptr dptr = node->bytes ? transfer_dptr(g, node) : 0;
    if (node->bytes && (xn->xfer_host != xf[i].block->host || xn->xfer_dptr != dptr)) {
      CUDA_MEMCPY3D c;
      copy_params(node, dptr, xf[i].block->host, &c);
      r = cu->cuGraphExecMemcpyNodeSetParams(x->exec, xn->cu, &c, s->dev.ctx);
      if (r != CUDA_SUCCESS) return update_refused(g, x, n, r, op, "cuGraphExecMemcpyNodeSetParams");
      xn->xfer_host = xf[i].block->host;
      xn->xfer_dptr = dptr;
    }
    if (xf[i].event && xn->xfer_event != xf[i].event) {
      r = cu->cuGraphExecEventRecordNodeSetEvent(x->exec, xn->event, xf[i].event);
      if (r != CUDA_SUCCESS) return update_refused(g, x, n, r, op, "cuGraphExecEventRecordNodeSetEvent");
      xn->xfer_event = xf[i].event;
    }
  }
  return KD_OK;
}

/* A traced launch: every node's trace event nodes pointed at tb's events
 * (the last launch's may not have retired: each launch has its own). */
static kd_status trace_point(kd_graph *g, kd_gexec *x, kd_trace_batch *tb, const char *op) {
  const kd_cu_table *cu = g->session->dev.cu;
  for (uint32_t i = 0; i < g->plan.top_count; ++i) { /* a loop's body has no trace nodes: its span is the loop's */
    uint32_t v = g->plan.order[i];
    kd_gexec_node *xn = &x->nodes[v];
    CUevent begin, end;
    kd_trace_batch_span(tb, i, g->nodes[v].name, "node", &begin, &end);
    CUresult r = cu->cuGraphExecEventRecordNodeSetEvent(x->exec, xn->trace_begin, begin);
    if (r == CUDA_SUCCESS) r = cu->cuGraphExecEventRecordNodeSetEvent(x->exec, xn->trace_end, end);
    if (r != CUDA_SUCCESS) return update_refused(g, x, v, r, op, "cuGraphExecEventRecordNodeSetEvent (trace)");
  }
  return KD_OK;
}

/* After an in-place change of the executable graph *x: when the driver
 * refused it (update_refused; but for out of memory and a fault, which
 * would fail again), the plan lets go of *x (it goes once the launches in
 * flight have completed) and a fresh one is instantiated instead: KD_OK,
 * *x NULL. Otherwise st: a foreign callback's error keeps *x, and the
 * next submission patches again. */
static kd_status rebuild_if_refused(kd_graph *g, kd_gexec **x, kd_status st) {
  int refused = (*x)->refused;
  (*x)->refused = 0;
  if (!st || !refused || st == KD_ERR_DEVICE_FAULT || st == KD_ERR_OUT_OF_MEMORY) return st;
  kd_gexec_release(kd_cuda_plan_get(g)->gexec);
  kd_cuda_plan_get(g)->gexec = *x = NULL;
  return KD_OK;
}

kd_status kd_exec_graph(kd_graph *g, const char *op, kd_held_set *held) {
  kd_session *s = g->session;
  kd_gexec *x = kd_cuda_plan_get(g)->gexec;
  kd_status st = x ? rebuild_if_refused(g, &x, patch(g, x, op)) : KD_OK;
  kd_xfer *xf = NULL;
  if (!st) st = kd_xfers_take(g, op, &xf);
  if (!st && x) st = rebuild_if_refused(g, &x, repoint(g, x, xf, op));
  /* A traced session: this launch's span events, into the graph's trace
   * nodes (session/trace.h); held by the submission below. */
  kd_trace_batch *tb = NULL;
  if (!st && s->trace) st = kd_trace_batch_new(s, g->node_count, op, &tb);
  if (!st && x && tb) st = rebuild_if_refused(g, &x, x->traced ? trace_point(g, x, tb, op) : KD_OK);
  if (!st && !x) {
    st = build(g, op, xf, tb, &x);
    if (!st) kd_cuda_plan_get(g)->gexec = x;
  }
  /* Room for everything added, which then cannot fail: upload blocks, and
   * each sink's earlier block and event. The executable graph and the
   * tensors need no reference per launch: the plan and the graph hold
   * them, and let go only after the work in flight
   * (kd_release_after_inflight). */
  if (!st) st = kd_held_reserve_warm(s, held, 2 * kd_cuda_plan_get(g)->xfer_count + (tb != NULL), op);
  if (!st) {
    CUresult r = s->dev.cu->cuGraphLaunch(x->exec, s->dev.stream);
    if (r != CUDA_SUCCESS) st = kd_session_note(s, kd_fail_cu(r, op, "cuGraphLaunch"));
  }
  if (st) {
    kd_xfers_settle(g, xf, 0, held, op); /* nothing was enqueued that uses them */
    if (tb) kd_trace_batch_drop(tb);
    return st;
  }
  if (tb) {
    kd_trace_batch_used(tb, g->plan.top_count); /* a loop's body has no spans of its own */
    (void)kd_held_add(held, KD_HELD_RESOURCE, kd_trace_batch_resource(tb), op); /* reserved: cannot fail */
  }
  s->counters.graph_launches++;
  s->counters.graph_updates += x->updated; /* counted with the launch that runs the patched graph */
  x->updated = 0;
  s->counters.launches += x->kernels;
  kd_xfers_settle(g, xf, 1, held, op);
  return KD_OK;
}
