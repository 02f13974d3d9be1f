/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: the task graph's data, shared by graph/ (declaring, checking,
 * inferring order) and engine/ (planning, executing). */
#ifndef KDAG_GRAPH_GRAPH_IMPL_H
#define KDAG_GRAPH_GRAPH_IMPL_H

#include "session/session_impl.h"
#include "graph/footprint.h"
#include "base/handle.h"
#include "graph/interval.h"
#include "base/arena.h"
#include "base/nvtx.h"
#include "kdag/graph.h"

typedef enum kd_node_kind {
  KD_NODE_KERNEL, KD_NODE_BUILTIN, KD_NODE_UPLOAD, KD_NODE_SINK, KD_NODE_HOST, KD_NODE_FOREIGN,
  KD_NODE_LOOP             /* a WHILE loop or an IF, its body the nodes after it up to body_end */
} kd_node_kind;

typedef enum kd_builtin_op {
  KD_BI_FILL, KD_BI_COPY, KD_BI_ADD, KD_BI_AXPY, KD_BI_SCALE, KD_BI_SUM
} kd_builtin_op;

typedef enum kd_hazard { KD_HAZ_RAW = 1, KD_HAZ_WAR = 2, KD_HAZ_WAW = 3, KD_HAZ_EXPLICIT = 4 } kd_hazard;

/* A graph-level tensor slot: accesses name bindings, so rebinding a
 * tensor changes one pointer, not every access. */
typedef struct kd_binding {
  kd_tensor_obj *obj;      /* the graph holds a reference */
  int written;             /* an earlier node of this graph writes it */
  int queued;              /* listed in the graph's rebound */
  kd_ivset reads, writes;  /* the accesses that can still conflict with later
                              ones: KD_IN; KD_OUT or KD_INOUT */
  const int64_t *whole;    /* numbers of the whole-tensor view, shared by such accesses; NULL until used */
} kd_binding;

/* One tensor access of a node. Kept small: what inference needs lives in
 * the binding's interval trees only while the access is active. */
typedef struct kd_gaccess {
  uint32_t node, binding;
  kd_access mode;
  int rank;                /* the resolved view's (in bounds) */
  const int64_t *dims;     /* offset, shape[rank], strides[rank] (elements), in the graph's arena */
} kd_gaccess;

static inline int64_t kd_access_offset(const kd_gaccess *a) { return a->dims[0]; }
static inline const int64_t *kd_access_shape(const kd_gaccess *a) { return a->dims + 1; }
static inline const int64_t *kd_access_strides(const kd_gaccess *a) { return a->dims + 1 + a->rank; }
/* Elements the access names. Multiplied unsigned: an empty view's other
 * dimensions may multiply past 2^63 (only non-empty views have their count
 * bounded when added), and the wrapped product times its zero is exactly
 * 0, where a signed one would be undefined. */
static inline int64_t kd_access_elements(const kd_gaccess *a) {
  uint64_t n = 1;
  for (int d = 0; d < a->rank; ++d) n *= (uint64_t)kd_access_shape(a)[d];
  return (int64_t)n;
}

typedef struct kd_gvalue {
  int access;              /* >= 0: index into the node's accesses; -1: value */
  kd_arg value;            /* KD_ARG_BYTES data is owned by the node */
} kd_gvalue;

struct kd_sink {
  kd_graph *graph;
  uint32_t node;
  void *host;
  size_t bytes;
  /* latest submission's copy: */
  int pending;             /* submitted, not yet waited for */
  uint64_t seq;            /* completion sequence of that submission */
  kd_staging_block *block; /* CUDA: the pinned copy (kept until waited) */
  CUevent event;           /* CUDA: recorded right after the copy */
  kd_fence *run;           /* HOST: the latest submission's run (exec/host.c), which holds its copy */
  uint64_t host_copied;    /* HOST: 1 + the seq of the run whose copy is in host (0: none), so a
                              wait that wakes late never writes older data over newer */
  /* CUDA: the block and event of the copy last waited for, kept for the
   * next submission's copy (free: that copy is done; kd_sink_take), so
   * that a submit-and-wait loop uses the same ones every time and, in
   * GRAPH mode, makes no driver call to re-point the graph's copy and
   * event nodes (exec/cuda_graph.c). */
  kd_staging_block *spare;
  CUevent spare_event;
};

/* A CUDA session's host function node as the driver sees it (through
 * kd_host_trampoline): one per node, freed once the submissions made before
 * the graph's destruction have completed. */
typedef struct kd_host_call {
  kd_host_fn fn;
  void *user;
} kd_host_call;

typedef struct kd_foreign_res {
  kd_resource res;         /* first: held sets drop a reference (KD_HELD_RESOURCE) */
  uint32_t refs;
  void *resource;
  void (*release)(void *);
} kd_foreign_res;

/* One node. The fields of each kind share storage (graphs reach 100k+
 * nodes, and a node's bytes are written, and paged in, once per node):
 * read a kind's fields only for nodes of that kind. */
typedef struct kd_gnode {
  uint8_t kind;            /* kd_node_kind (a byte: 96 bytes a node) */
  uint8_t args_queued;     /* kernel: listed in the graph's reargs */
  uint32_t first_access, access_count;
  uint32_t first_edge, edge_count; /* its inferred edges (after reduction): edges[first_edge ..) */
  uint32_t scope;          /* the loop whose body it is in, + 1; 0: the top level */
  char *name;              /* in the graph's arena */
  void *user;              /* host function / foreign */
  union {
    struct { /* KD_NODE_KERNEL */
      kd_module_obj *module; /* the graph holds a reference */
      kd_gvalue *args;
      kd_launch_config config;
      uint32_t fn_index, arg_count;
    };
    struct { /* KD_NODE_BUILTIN */
      double alpha;
      unsigned char fill[16];
      kd_builtin_op op;
      kd_dtype dtype;
    };
    struct { /* KD_NODE_UPLOAD, KD_NODE_SINK */
      const void *host;
      size_t bytes;
      kd_sink *sink;
    };
    struct { /* KD_NODE_HOST, KD_NODE_FOREIGN */
      kd_host_fn host_fn;
      struct kd_host_call *host_call; /* CUDA sessions: what the driver calls back (kd_host_trampoline) */
      kd_foreign_fn foreign_fn;
      size_t workspace_bytes;
      kd_foreign_res *res;
    };
    struct { /* KD_NODE_LOOP: access 0 reads the condition, access 1 (has_trips) writes the trip count */
      uint32_t body_end;   /* one past its body's last node (nested bodies included); 0 while open */
      uint32_t max_trips;
      uint8_t is_if;       /* an IF: its body runs once when the condition is nonzero */
      uint8_t has_trips;
    };
  };
} kd_gnode;

/* The most loops and conditionals open inside one another (the driver
 * nests conditional nodes deeper). */
#define KD_GRAPH_MAX_NESTING KD_GRAPH_MAX_DEPTH

/* A node with per-submission staging (exec/xfer.c): every sink (its
 * event tells kd_sink_wait the copy is done, even an empty one), and an
 * upload with bytes to copy. */
static inline int kd_node_is_xfer(const kd_gnode *node) {
  return node->kind == KD_NODE_SINK || (node->kind == KD_NODE_UPLOAD && node->bytes);
}

typedef struct kd_gedge {
  uint32_t from, to;
  uint32_t binding;        /* the tensor that caused it (UINT32_MAX if explicit) */
  kd_hazard hazard;
} kd_gedge;

/* The plan: built once, reused by every submission until the graph changes.
 * A loop's body is planned on its own: edges between nodes of different
 * bodies (or of a body and the top level) become edges of the loop nodes
 * that contain them, so each level's successors and in-degrees name nodes
 * of that level only, and a loop runs as one node of its level. */
typedef struct kd_plan {
  uint32_t *order;         /* topological order of the top level in [0, top_count), then each
                              loop's body in [body_start[l], body_start[l] + body_count[l]) */
  uint32_t top_count;
  uint32_t *body_start, *body_count; /* per node; a loop's (NULL when the graph has no loop) */
  uint32_t loops;
  uint32_t *succ_start;    /* CSR successors: succ[succ_start[n] .. succ_start[n+1]) */
  uint32_t *succ;
  uint32_t edge_count;     /* of succ: edges between nodes of one level, each once */
  uint32_t *indegree;
  int valid;
  uint64_t submits;        /* submissions of this plan so far (AUTO mode): 64 bits, so that it never wraps
                              back below graph_after */
  kd_resource *exec;       /* what the backend keeps for this plan (exec/: its transfers, executable
                              graph), made by its first submission; destroyed with the plan */
} kd_plan;

struct kd_graph {
  kd_session *session;
  kd_gnode *nodes;
  uint32_t node_count, node_cap;
  kd_gaccess *accesses;
  uint32_t access_count, access_cap;
  kd_gedge *edges;
  uint32_t edge_count, edge_cap, edges_dropped;
  kd_binding *bindings;
  uint32_t binding_count, binding_cap;
  uint32_t *by_slot;       /* tensor handle slot -> binding index + 1 (0: none): handles
                              carry a dense slot index, so no hashing */
  uint32_t by_slot_cap;
  kd_ival **found;         /* scratch for one access's interval queries */
  uint32_t found_cap;
  uint32_t *reduce_heap;   /* scratch of the transitive reduction (KD_REDUCE_HEAP entries) */
  kd_witness_pool witness_blocks; /* reserved for the witnesses a node's accesses may note */
  kd_arena arena;          /* node names, access views */
  /* A node's inferred edges are appended while it is added: a repeat is
   * found by scanning them while they are few, by pred_mark beyond. */
  uint32_t *pred_mark;     /* pred_mark[p] == n + 1: edge p -> n exists (the node being added has
                              more than KD_PRED_SCAN edges) */
  uint32_t pred_cap;
  /* Each node's outgoing edges as a list through the edge array, newest
   * first, so kd_graph_edge's duplicate and cycle checks visit only the
   * edges they follow, not every edge of the graph. Linked on the first
   * kd_graph_edge after edges were added, not while inferring: a graph
   * without explicit edges never touches them, and inference does not pay
   * a cache miss on a random earlier node's list head per edge. */
  uint32_t *out_head;      /* per node: its newest outgoing edge + 1, 0 if none */
  uint32_t out_cap;
  uint32_t *edge_next;     /* per edge: the next older outgoing edge of its from + 1, 0 if none */
  uint32_t edge_next_cap;
  uint32_t out_linked;     /* edges [0, out_linked) are in the lists */
  uint32_t *visit;         /* per node: the search stamp that last reached it (kd_graph_edge's
                              cycle check and the reduction of inferred edges) */
  uint32_t visit_cap, visit_stamp; /* every entry below visit_cap is initialized */
  uint32_t *dfs;           /* the search's stack */
  uint32_t dfs_cap;
  kd_sink **sinks;
  uint32_t sink_count, sink_cap;
  kd_plan plan;
  kd_exec_mode exec_mode;
  int unmarked;            /* a written binding's tensor may not be marked initialized yet */
  uint32_t peer_copies;    /* copy nodes from another session's tensor (exec/cuda_peer.c): its submissions
                              order themselves with that session's */
  /* What changed since the executable graph last caught up, each listed
   * once, so a relaunch patches only those nodes whatever the graph's size. */
  uint32_t *rebound;       /* bindings rebound */
  uint32_t rebound_count, rebound_cap;
  uint32_t *reargs;        /* kernel nodes whose value arguments were set */
  uint32_t reargs_count, reargs_cap;
  uint32_t open[KD_GRAPH_MAX_NESTING]; /* the loops being declared, innermost last */
  uint32_t open_count;
  char *name;              /* kd_graph_set_name's copy; NULL: KD_GRAPH_DEFAULT_NAME */
  kd_nvtx_string nvtx_name; /* name registered with an NVTX tool (base/nvtx.h), once */
  int nvtx_named;          /* nvtx_name is current (NULL without a tool) */
};

#define KD_GRAPH_DEFAULT_NAME "kdag graph"
#define KD_GRAPH_NAME_MAX 255

static inline const char *kd_graph_name(const kd_graph *g) { return g->name ? g->name : KD_GRAPH_DEFAULT_NAME; }

/* The executable graph has caught up with every rebinding and new value. */
static inline void kd_graph_changes_clear(kd_graph *g) {
  for (uint32_t i = 0; i < g->rebound_count; ++i) g->bindings[g->rebound[i]].queued = 0;
  for (uint32_t i = 0; i < g->reargs_count; ++i) g->nodes[g->reargs[i]].args_queued = 0;
  g->rebound_count = g->reargs_count = 0;
}

/* Drops a reference; the last calls the user's release. */
void kd_foreign_res_unref(kd_foreign_res *r);
/* kd_graph_foreign's work, its errors naming op; host_too admits it on a
 * HOST session too (kdag's own foreign nodes, whose function takes the
 * spans' host addresses and a NULL stream). */
kd_status kd_graph_foreign_add(kd_graph *g, const char *op, const char *name, kd_foreign_fn fn, void *user,
                               const kd_garg *accesses, size_t count, size_t workspace_bytes, void *resource,
                               void (*release)(void *), int host_too, kd_node *out);

/* graph/sink.c: frees a sink of a destroyed graph; a copy still in flight
 * goes back to the pools once its submission has retired. */
void kd_sink_free(kd_session *s, kd_sink *sk);

/* graph/plan.c */
kd_status kd_plan_build(kd_graph *g, const char *op);
void kd_plan_free(kd_plan *p);


#endif
