/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: executing a planned graph. Each submission resolves every
 * node's arguments against the current bindings (so rebinding and graph
 * edits never touch work in flight) and keeps what it uses in a held set
 * handed to the completion ring. */
#ifndef KDAG_ENGINE_EXEC_H
#define KDAG_ENGINE_EXEC_H

#include <ck_pr.h>
#include <stdbool.h>

#include "exec/host_pool.h"
#include "graph/graph_impl.h"
#include "kernels/strided.h"

/* The backends' states (kd_session.exec) and how kd_session_create starts
 * them (exec/cuda_backend.c, exec/host_backend.c): each sets s->ops and
 * s->exec, or fails and leaves both. */
typedef struct kd_cuda_state {
  CUstream capture_stream; /* GRAPH: where foreign nodes are captured; created on first use */
} kd_cuda_state;

typedef struct kd_host_state {
  kd_host_pool pool;       /* the workers */
  struct kd_host_run *last_run; /* the newest submission (the session's reference) */
  struct kd_host_run *current;  /* the run the workers are on: a session runs one at a time */
  _Atomic uint64_t splits;      /* built-ins split (kd_session_stats.host_splits) */
  kd_session *session;          /* whose fault a failing task records (kd_session_fail_async) */
} kd_host_state;

kd_status kd_cuda_backend_start(kd_session *s, const char *op);
kd_status kd_host_backend_start(kd_session *s, const char *op);

/* The HOST executor (exec/host_plan.c, exec/host.c). A graph's plan gets a
 * task table, resolved against the bindings once and kept until the graph
 * changes; each submission is a run over it with its own dependency
 * counters and transfer buffers, so submitting allocates per run, never
 * per node. */

/* Pool item kinds: a task, a helper's share of a split built-in, or a
 * dispenser of a run's roots (workers take roots from it in turn, so a
 * graph of many independent nodes is not queued one by one). */
enum { KD_HOST_ITEM_TASK, KD_HOST_ITEM_PART, KD_HOST_ITEM_ROOTS };

/* Most slices a built-in is split into, and the fewest elements worth
 * handing a slice to another worker. */
#define KD_HOST_SPLIT_MAX 16
#define KD_HOST_SPLIT_MIN_ELEMS (1 << 15)

/* One node, resolved: what a worker runs. Read-only while a run uses it,
 * but for item, which only the run on it touches (a session runs one at a
 * time). */
typedef struct kd_host_task {
  kd_host_item item;       /* the pool's link (kind KD_HOST_ITEM_TASK) */
  uint32_t node;
  uint8_t kind;            /* kd_node_kind */
  uint8_t op;              /* kd_builtin_op */
  uint8_t kdt;             /* kd_kdtype */
  uint8_t split;           /* a built-in that may be split (splittable op, enough elements) */
  uint32_t slot;           /* built-ins: their first view in the plan's views; transfers: their buffer */
  union {
    struct { /* KD_NODE_BUILTIN */
      double alpha;
      kd_kpattern fill;
      size_t esize;
      uint32_t part;       /* split: its entry in the run's parts */
    };
    struct { /* KD_NODE_UPLOAD (src: the caller's bytes, copied at submit), KD_NODE_SINK (dst: the tensor) */
      const void *host;    /* upload: the caller's memory; sink: the tensor's */
      void *tensor;        /* upload: the tensor's memory */
      size_t bytes;
    };
    struct { /* KD_NODE_HOST */
      kd_host_fn fn;
      void *user;
    };
    struct { /* KD_NODE_FOREIGN (kdag's own collectives): spans[slot, + span_count) of the plan */
      kd_foreign_fn ffn;
      void *fuser;
      void *resource;
      kd_foreign_res *hold; /* the table's reference: a run may outlive the graph */
      uint32_t span_count;
    };
    struct { /* KD_NODE_LOOP: its body is order[body_first, + body_count) of the plan */
      const void *cond;    /* the condition's 4 bytes */
      void *trips;         /* the trip count's 4 bytes; NULL: none */
      uint32_t max_trips, body_first, body_count;
    };
  };
} kd_host_task;

/* A plan's task table (kd_plan.exec): shared by the runs using it, so
 * refcounted; replaced rather than changed while a run holds it. */
typedef struct kd_host_plan {
  kd_resource res;         /* first */
  uint32_t refs;           /* the graph's plan and each run on it */
  uint32_t task_count, root_count, xfer_count, split_count;
  uint32_t top_count;      /* tasks of the top level: loops' bodies run inside their loop task */
  uint32_t *order;         /* the plan's order, for loops' bodies (NULL without loops) */
  kd_host_task *tasks;
  kd_kview *views;         /* built-ins' views, three a node */
  kd_span *spans;          /* foreign nodes' spans (host addresses), one per access */
  uint32_t *succ_start, *succ, *indegree, *roots;
  size_t *xfer_off;        /* each transfer's buffer in a run's block; xfer_off[xfer_count]: its size */
  uint32_t *xfer_task;     /* each transfer's task */
} kd_host_plan;

/* Drops one count of a counter other threads drop too; 1 when it was the
 * last. The fences make what this thread wrote before visible to the thread
 * that sees zero (and then frees, or runs a successor that reads it): x86's
 * locked instructions order that already, aarch64's plain exclusives do
 * not. */
static inline bool kd_host_dec_to_zero(uint32_t *c) {
  bool zero = false;
  ck_pr_fence_release();
  ck_pr_dec_32_zero(c, &zero);
  if (zero) ck_pr_fence_acquire();
  return zero;
}

/* The plan's task table, built or brought up to date with the bindings
 * (a plan a run still uses is copied first). */
kd_status kd_host_plan_get(kd_graph *g, const char *op, kd_host_plan **out);
void kd_host_plan_unref(kd_host_plan *hp);

/* A split built-in's shares in one run: slices taken in turn by its worker
 * and by helpers woken for it. */
typedef struct kd_host_part {
  kd_host_item helpers[KD_HOST_SPLIT_MAX - 1]; /* kind KD_HOST_ITEM_PART, index: position here */
  kd_host_task *task;
  uint32_t next;           /* the next slice to take */
  uint32_t slices;
  uint32_t holders;        /* the task's worker and each queued helper: the last one out completes it */
  int dim;
} kd_host_part;

/* A HOST submission in flight; refcounted by its completion and by sinks
 * whose latest copy it holds. */
typedef struct kd_host_run {
  kd_fence fence;          /* first: what its completion waits for (session/fence.h) */
  uint32_t refs;
  uint32_t remaining;      /* tasks not yet finished, and dispensers not yet done */
  int done;                /* set (under mu) when remaining reaches 0 */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  kd_host_plan *plan;      /* a reference; NULL: a one-task upload */
  kd_host_task *tasks;     /* the plan's, or one */
  kd_kview *views;
  const uint32_t *succ_start, *succ, *roots;
  uint32_t task_count, root_count;
  uint32_t root_next;      /* the next root a dispenser hands out */
  uint32_t dispensers;     /* queued for its roots (none for a single root: that is queued itself) */
  kd_host_item dispense[KD_HOST_SPLIT_MAX];
  uint32_t *indegree;      /* this run's counters, atomically decremented */
  unsigned char *xfers;    /* upload snapshots and sink copies (the plan's xfer_off) */
  kd_host_part *parts;     /* one per split task */
  int jitter;              /* test option: random delay before each task */
  struct kd_host_run *next;/* starts when this one is done (session order), under mu */
  uint64_t seq;            /* its completion's sequence number (kd_graph submissions) */
  kd_host_state *hs;
  kd_host_task one;        /* an upload run's task: */
  uint32_t one_zero[3];    /* its successor offsets (none), root and indegree */
} kd_host_run;

/* Where a transfer task's bytes are in run r: an upload's snapshot, a
 * sink's copy. */
static inline void *kd_host_run_xfer(const kd_host_run *r, const kd_host_task *t) {
  return r->plan ? r->xfers + r->plan->xfer_off[t->slot] : r->xfers;
}

/* A kernel or built-in node resolved against the graph's current bindings:
 * what cuLaunchKernel, or a kernel node of a CUDA graph, needs. params
 * point into the struct itself, so it is resolved in place and never
 * copied. sizes[i] is the byte size of *params[i]. */
typedef struct kd_node_launch {
  kd_cu_function *fn;
  kd_launch_config cfg;
  uint32_t count;
  int empty;               /* nothing to run: a built-in over zero elements */
  void *params[KD_PTX_MAX_PARAMS];
  uint32_t sizes[KD_PTX_MAX_PARAMS];
  CUdeviceptr ptrs[KD_PTX_MAX_PARAMS];
  kd_kview v[3];
  kd_kpattern pat;
} kd_node_launch;
kd_status kd_node_launch_resolve(kd_graph *g, const char *op, kd_gnode *node, kd_node_launch *out);

/* The device spans of a foreign node's accesses (spans has access_count
 * entries). */
void kd_foreign_spans(kd_graph *g, const kd_gnode *node, kd_span *spans);

/* A submission's transfers (exec/xfer.c). Both CUDA executors take the
 * staging block of every transfer node and every sink's event before they
 * enqueue anything, so that running out of pinned memory or events refuses
 * the submission whole, and settle them after. The entries are the plan's
 * (kd_plan.xfers: node set when the plan is built, the rest one
 * submission's at a time, under the session lock). */
typedef struct kd_xfer {
  uint32_t node;
  kd_staging_block *block; /* an upload's holds the caller's bytes, copied in at the take */
  CUevent event;           /* sinks' */
  uint8_t copying;         /* EAGER: its copy is enqueued (the block is in use) */
  uint8_t recorded;        /* EAGER: its event is recorded */
} kd_xfer;
/* Takes the staging and events of every transfer of g's plan into the
 * plan's entries, in node order; *out the entries (NULL when the plan has
 * none, or on failure). On failure nothing is taken, and the error names
 * the node. */
kd_status kd_xfers_take(kd_graph *g, const char *op, kd_xfer **out);
/* node's entry in xf (NULL: not a transfer node). */
kd_xfer *kd_xfer_of(const kd_graph *g, kd_xfer *xf, uint32_t node);
/* Hands xf's blocks and events on (xf NULL: nothing). ran (the whole
 * submission was enqueued): uploads' blocks to held, sinks' copies to
 * their sinks (kd_sink_commit). Otherwise (refused): what enqueued work
 * uses (copying, recorded) to held, the rest back to the pools; no sink
 * changes. held needs room for two entries per transfer. */
void kd_xfers_settle(kd_graph *g, kd_xfer *xf, int ran, kd_held_set *held, const char *op);
/* A sink copy's staging block and event: the ones its last waited copy
 * used (sk->spare, sk->spare_event), or from the pools. On failure nothing
 * is taken. A submit-and-wait loop thus copies into the same block and
 * records the same event every round (GRAPH mode then re-points nothing). */
kd_status kd_sink_take(kd_session *s, kd_sink *sk, size_t bytes, const char *op, kd_staging_block **block,
                       CUevent *event);
/* The sink's latest copy is now (block, written by the event's work): an
 * earlier copy nobody waited for is handed to held, which completes after
 * it (room for two entries reserved by the caller). */
void kd_sink_commit(kd_session *s, kd_sink *sk, kd_staging_block *block, CUevent event, kd_held_set *held,
                    const char *op);

/* What the CUDA executors keep per plan (kd_plan.exec): made by the plan's
 * first CUDA submission (kd_cuda_plan_of), freed with the plan. */
typedef struct kd_gexec kd_gexec;
typedef struct kd_cuda_plan {
  kd_resource res;         /* first: the plan's exec */
  /* What one submission takes before it enqueues anything
   * (exec/xfer.c, exec/eager.c): */
  kd_xfer *xfers;          /* the transfer nodes (kd_node_is_xfer), in node order; each
                              submission's staging and events in them (exec/xfer.c) */
  uint32_t xfer_count;
  uint32_t workspaces;     /* foreign nodes with a workspace */
  CUdeviceptr *workspace;  /* EAGER, when workspaces: each node's workspace for the submission being
                              enqueued, 0 for nodes without; the plan's, so that a submission allocates
                              no array (submissions run one at a time) */
  uint32_t holds;          /* held entries an EAGER submission adds beyond one per binding */
  int graph_refused;       /* AUTO: the driver refused this plan as a CUDA graph */
  uint32_t graph_oom;      /* AUTO: CUDA-graph launches of this plan in a row that ran out of memory */
  kd_gexec *gexec;         /* GRAPH: the executable graph of this plan, or NULL */
  kd_nvtx_string *nvtx_names; /* EAGER under an NVTX tool: each node's name, registered by the
                                 first such submission (base/nvtx.h); NULL otherwise */
  uint8_t *explicit_in;    /* with programmatic dependent launch and declared edges: per node, 1 when a
                              declared edge (kd_graph_edge) leads to it, which keeps it a full dependency
                              in EAGER; NULL otherwise */
} kd_cuda_plan;

/* Whether a kernel or built-in launch L may start programmatically
 * (KD_LAUNCH_PDL; docs/pdl.md): the session uses PDL and the launch opted
 * in. Which edges into it then are programmatic is the executor's rule:
 * those from a kernel launch, not declared with kd_graph_edge
 * (exec/cuda_eager.c, exec/cuda_graph.c). */
static inline int kd_pdl_wanted(const kd_graph *g, const kd_node_launch *L) {
  return g->session->dev.pdl && (L->cfg.flags & KD_LAUNCH_PDL) && L->fn->grid_wait != KD_GRID_WAIT_PRE_SM90;
}
/* g's (valid) plan's CUDA state, made on first use (the check inline:
 * every submission asks). */
kd_status kd_cuda_plan_make(kd_graph *g, const char *op, kd_cuda_plan **out);
static inline kd_status kd_cuda_plan_of(kd_graph *g, const char *op, kd_cuda_plan **out) {
  if (__builtin_expect(g->plan.exec != NULL, 1)) {
    *out = (kd_cuda_plan *)g->plan.exec;
    return KD_OK;
  }
  return kd_cuda_plan_make(g, op, out);
}
/* The same once kd_cuda_plan_of has succeeded for the plan. */
static inline kd_cuda_plan *kd_cuda_plan_get(const kd_graph *g) { return (kd_cuda_plan *)g->plan.exec; }

/* exec/cuda_graph.c: a plan's executable graph. Frees one no launch can
 * still use. */
void kd_gexec_destroy(kd_gexec *x);
/* The plan lets go of x: freed once the work in flight has completed. */
void kd_gexec_release(kd_gexec *x);

/* A view of one access as a kernel view over a base address. */
kd_kview kd_access_kview(const kd_gaccess *a, uint64_t tensor_base, size_t esize);
/* The kernel element type of a dtype (f32, f64, i32, i64). */
kd_kdtype kd_kdtype_of(kd_dtype d);
/* KD_OK when t is a ticket s issued (the session entered); else
 * KD_ERR_WRONG_SESSION or KD_ERR_INVALID_ARGUMENT naming op. */
kd_status kd_ticket_check(kd_session *s, kd_ticket t, const char *op);

/* Both resolve and enqueue the whole plan, adding what it uses to held
 * (each object once per stamp). */
kd_status kd_exec_host(kd_graph *g, const char *op, kd_held_set *held, uint64_t stamp, kd_host_run **out);
/* A HOST upload: a snapshot of host taken now, copied into o by a one-task
 * run queued behind the session's submissions (in order, never waiting);
 * o is added to held. */
kd_status kd_exec_host_upload(kd_session *s, const char *op, kd_tensor_obj *o, const void *host, kd_held_set *held,
                              kd_host_run **out);
/* EAGER: the nodes in plan order on the session stream. Staging, events
 * and workspaces are taken first: a shortage enqueues nothing (*enqueued
 * 0; held may have workspaces, whose frees are stream-ordered). A driver
 * refusal or a foreign callback's failure later leaves the nodes before
 * it enqueued (*enqueued 1), held, and commits no sink copy. */
kd_status kd_exec_eager(kd_graph *g, const char *op, kd_held_set *held, uint64_t stamp, int *enqueued);
/* GRAPH mode (exec/cuda_graph.c): launches the plan's executable graph,
 * building or patching it first. Enqueues nothing when it fails. */
kd_status kd_exec_graph(kd_graph *g, const char *op, kd_held_set *held);
void kd_exec_host_task(kd_host_item *it, void *ctx);

/* Calls a foreign node's fn as both CUDA executors do (EAGER on the
 * session stream, GRAPH while capturing): marked as a callback, so a kdag
 * call from it is refused, and given a message when it fails without one. */
kd_status kd_foreign_invoke(const kd_gnode *node, const kd_foreign_call *call);

/* What the driver calls back for a CUDA session's host function node
 * (call: its kd_host_call), and what a HOST worker calls for one:
 * fn(user), marked as a callback
 * (kd_callback_enter), so a kdag call from it is refused instead of waiting
 * for the lock that a thread waiting for this very callback holds. */
void CUDA_CB kd_host_trampoline(void *call);

void kd_host_run_unref(kd_host_run *r);
/* Blocks until the run is done. */
void kd_host_run_wait(kd_host_run *r);
int kd_host_run_done(kd_host_run *r);

/* kd_graph_submit's work (submit.c), after making the session's stream
 * wait for waits (events of any context) and calling locked(g, user)
 * with the session locked, before anything is enqueued. */
kd_status kd_submit_after(kd_graph *g, const char *op, const CUevent *waits, size_t wait_count,
                          void (*locked)(kd_graph *g, void *user), void *user, kd_ticket *out);
/* The elements view v of tensor t (kd_tensor_info's) names: the whole
 * tensor for rank -1. Its numbers unchecked yet (the node's access check
 * comes later), a negative extent counts as 0 here. */
static inline uint64_t kd_view_elements(const kd_view *v, const kd_tensor_desc *t) {
  int rank = v->rank < 0 ? t->rank : v->rank;
  const int64_t *shape = v->rank < 0 ? t->shape : v->shape;
  uint64_t n = 1;
  for (int k = 0; k < rank; ++k) n *= (uint64_t)(shape[k] < 0 ? 0 : shape[k]);
  return n;
}

/* After a wait on a CUDA session (locked): NCCL's asynchronous errors of
 * the session's communicators (exec/comm.c), the first one made the
 * session's fault (KD_ERR_COMM_FAILED, naming op), or KD_OK. */
kd_status kd_comm_poll(kd_session *s, const char *op);
/* A graph with copies from other sessions' tensors (cuda_peer.c): ordered
 * after those sessions' work so far, and their later work after it. */
kd_status kd_peer_submit(kd_graph *g, const char *op, kd_ticket *out);

#endif
