/* SPDX-License-Identifier: Apache-2.0 */
/// @file
/// kdag/graph.h — a task graph: nodes with declared tensor accesses, their
/// order inferred from those accesses, run as a whole on the session's
/// backend.
///
/// Objects: kd_graph (the caller's: kd_graph_create, kd_graph_destroy
/// before its session), kd_node (an index, valid for the graph's life),
/// kd_sink (a host copy-out, owned by its graph), kd_ticket (a value naming
/// one submission).
///
/// Declaring: every tensor argument says how the node uses it (KD_IN,
/// KD_OUT, KD_INOUT) over a view. A node is checked when added (aliasing
/// inside it, bounds, residency, reads of tensors nothing has written, the
/// launch configuration and arguments); a refused node leaves the graph as
/// it was. Nodes are ordered after the earlier nodes whose accesses overlap
/// theirs, one of the two writing; the overlap test is exact for the views
/// a stencil, a tile or a strip uses, and conservative (it may order, it
/// never misses) past KD_GRAPH_EXACT_RUNS runs. Iterative pipelines keep a
/// bounded state and add the same edges every sweep, each node's edges
/// reduced. docs/design/inference.md tells how.
///
/// Running: kd_graph_submit plans the graph once and reuses the plan; a
/// CUDA session runs it node by node on its stream (EAGER) or as one CUDA
/// graph (GRAPH), a HOST session on a thread pool. Each submission keeps
/// what it uses alive until it completes, so the caller may release every
/// handle at once. The host waits only in kd_sink_wait and
/// kd_tensor_download, and in the three cases docs/design/lifetimes.md
/// lists (a full completion ring, no memory to defer a release, a refused
/// completion event), each counted in kd_session_stats. No call here waits
/// for work of the device's context beyond its own (kdag/session.h,
/// "Waits").
///
/// Errors every node-adding call may return besides its own, each message
/// naming the call, the node and the argument: KD_ERR_INVALID_ARGUMENT
/// (NULL graph, a NULL or empty name, NULL args with a count), the tensor
/// checks (KD_ERR_RELEASED, KD_ERR_WRONG_SESSION, KD_ERR_NOT_RESIDENT,
/// KD_ERR_OUT_OF_BOUNDS, KD_ERR_ALIASING, KD_ERR_UNINITIALIZED),
/// KD_ERR_OUT_OF_MEMORY and KD_ERR_DEVICE_FAULT.
#ifndef KDAG_GRAPH_H
#define KDAG_GRAPH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kdag/raw.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Per tensor, a view of up to this many contiguous runs is compared
/// exactly when the order is inferred; one with more is compared by its
/// bounding interval, conservatively (docs/design/inference.md).
#define KD_GRAPH_EXACT_RUNS 4096
/// Within one node, two accesses of one tensor, one of them writing, are
/// compared exactly on views of up to this many runs each, whatever
/// KD_GRAPH_EXACT_RUNS: an overlap is KD_ERR_ALIASING, and so are two views
/// with more runs whose intervals meet (they cannot be told apart). A
/// written view must name each element once: its strides prove it (sorted,
/// each at least the extent of the dimensions below it), or its runs do
/// when there are at most this many; a view with more runs whose strides
/// prove nothing is KD_ERR_ALIASING too, with a message that says so.
#define KD_NODE_ALIAS_RUNS (1 << 20)
/// Tensor accesses one node may declare (kernel arguments that are tensors,
/// a host or foreign node's accesses); more is KD_ERR_INVALID_ARGUMENT.
#define KD_NODE_MAX_ACCESSES 64

/// A task graph of one session. Opaque; kd_graph_create.
typedef struct kd_graph kd_graph;
/// A node's index in its graph, in the order nodes were added.
typedef uint32_t kd_node;
/// A host sink of a graph (kd_graph_sink). Opaque; the graph owns it.
typedef struct kd_sink kd_sink;

/// How a node uses a view: the order is inferred from these.
typedef enum kd_access {
  KD_IN = 1,   ///< reads it
  KD_OUT = 2,  ///< writes every element of it (reads none)
  KD_INOUT = 3 ///< reads and writes it
} kd_access;

/// A view covering the whole tensor, resolved when the node is added.
static inline kd_view kd_whole(kd_tensor t) {
  kd_view v;
  v.tensor = t;
  v.rank = -1;
  v.offset = 0;
  for (int i = 0; i < KD_MAX_RANK; ++i) v.shape[i] = v.strides[i] = 0;
  return v;
}

/// One argument of a kernel or foreign node: a tensor access or a value.
typedef struct kd_garg {
  int is_tensor;     ///< 1: a tensor access (access, view); 0: a value
  kd_access access;  ///< is_tensor == 1: how the node uses view
  kd_view view;      ///< is_tensor == 1: the view accessed
  kd_arg value; ///< is_tensor == 0: any scalar or KD_ARG_BYTES kind (bytes copied at add)
} kd_garg;

/// Builds a kd_garg: a tensor access (kd_g_in, kd_g_out, kd_g_inout) or a
/// value (kd_g_value).
/// @{
static inline kd_garg kd_g_access(kd_access a, kd_view v) { kd_garg g; g.is_tensor = 1; g.access = a; g.view = v; g.value = kd_arg_i32(0); return g; }
static inline kd_garg kd_g_in(kd_view v) { return kd_g_access(KD_IN, v); }
static inline kd_garg kd_g_out(kd_view v) { return kd_g_access(KD_OUT, v); }
static inline kd_garg kd_g_inout(kd_view v) { return kd_g_access(KD_INOUT, v); }
static inline kd_garg kd_g_value(kd_arg a) {
  kd_tensor none; /* no compound literal: the header is valid C++ too */
  none.bits = 0;
  kd_garg g;
  g.is_tensor = 0;
  g.access = KD_IN;
  g.view = kd_whole(none);
  g.value = a;
  return g;
}
/// @}

/// Errors: KD_ERR_INVALID_ARGUMENT, KD_ERR_OUT_OF_MEMORY. *out_graph owned
/// (kd_graph_destroy, before the session is destroyed: the graph holds no
/// reference on it); NULL on failure.
KD_API kd_status kd_graph_create(kd_session *session, kd_graph **out_graph);
/// Waits for nothing (unless no memory is left to defer its releases, see
/// above): in-flight submissions keep what they use. NULL ignored. graph is
/// invalid afterwards; no other thread may use it during the call. Called
/// from a callback that must not call kdag, it destroys nothing (and says so
/// in kd_last_error).
KD_API void kd_graph_destroy(kd_graph *graph);

/// Names the graph (name is copied; 1 to 255 bytes) for the tools that
/// show kdag's work: each submission is an NVTX range of this name in
/// Nsight Systems (an EAGER one holds a range per node, named after the
/// node), and a span of this name in a trace (trace_path of
/// kd_session_options). Default "kdag graph". Errors: KD_ERR_INVALID_ARGUMENT (NULL
/// graph or name, an empty or longer name), KD_ERR_OUT_OF_MEMORY.
KD_API kd_status kd_graph_set_name(kd_graph *graph, const char *name);

/// A user kernel. Tensor arguments must be compact, device-resident views
/// (a strided view is KD_ERR_NOT_COMPACT: canonicalize it with kd_graph_op_copy
/// into a compact tensor first). On a HOST session: KD_ERR_NO_HOST_IMPL.
/// name is copied and used in errors and DOT output. config and args are
/// borrowed for the call: the node keeps copies (KD_ARG_BYTES data too).
/// out_node (may be NULL) gets the node's index.
KD_API kd_status kd_graph_kernel(kd_graph *g, const char *name, kd_function fn,
                                 const kd_launch_config *config, const kd_garg *args,
                                 size_t arg_count, kd_node *out_node);

/// Built-in kernels (kernels/): views may be strided; shapes must match.
/// fill: value points to one element of dst's dtype (copied). copy also
/// canonicalizes (strided src, compact dst). transpose swaps the first two
/// dimensions of a rank-2 src. sum writes the sum of x into the one-element
/// dst, in a fixed order (256 running sums, every 256th element each, then a
/// tree), on one thread block: for modest sizes, its time and its rounding
/// error growing with the element count. add/axpy/scale/sum take f32, f64,
/// f16 and bf16 (the 16-bit ones computed in f32, rounded once to the type;
/// sum keeps f32 partial sums), add and sum also i32, i64, u8, u32 and u64
/// (wrapping). CUDA and HOST give the same bits for every
/// result that is not a NaN (docs/testing.md). name is copied; the views
/// are values; out_node (may be NULL) gets the node's index, written only
/// on success.
/// @{
KD_API kd_status kd_graph_op_fill(kd_graph *g, const char *name, kd_view dst, const void *value, kd_node *out_node);
KD_API kd_status kd_graph_op_copy(kd_graph *g, const char *name, kd_view dst, kd_view src, kd_node *out_node);
KD_API kd_status kd_graph_op_transpose(kd_graph *g, const char *name, kd_view dst, kd_view src, kd_node *out_node);
KD_API kd_status kd_graph_op_add(kd_graph *g, const char *name, kd_view dst, kd_view a, kd_view b, kd_node *out_node);
KD_API kd_status kd_graph_op_axpy(kd_graph *g, const char *name, kd_view y, kd_view x, double alpha, kd_node *out_node);
KD_API kd_status kd_graph_op_scale(kd_graph *g, const char *name, kd_view y, double alpha, kd_node *out_node);
KD_API kd_status kd_graph_op_sum(kd_graph *g, const char *name, kd_view dst, kd_view x, kd_node *out_node);
/// @}

/// Uploads host memory into a whole compact tensor on every submission. The
/// caller's memory is read during kd_graph_submit (copied into staging), so
/// it may change between submissions. host must stay valid while the graph
/// can be submitted (it is fixed for the node's life). name is copied; out_node
/// (may be NULL) gets the node's index, written only on success.
KD_API kd_status kd_graph_upload(kd_graph *g, const char *name, kd_tensor dst, const void *host,
                                 size_t bytes, kd_node *out_node);

/// A host sink: the tensor is copied out at the node's turn, and
/// kd_sink_wait(sink) waits for the copy of the latest submission made
/// before the call (its event alone), then writes host; a submission another
/// thread makes meanwhile stays pending for a later wait. host must stay
/// valid while the graph lives. name is copied. *out_sink is owned by the graph:
/// valid until kd_graph_destroy, never freed by the caller.
KD_API kd_status kd_graph_sink(kd_graph *g, const char *name, kd_tensor src, void *host, size_t bytes,
                               kd_sink **out_sink);

/// A host function node: fn(user) runs after every node it depends on and
/// before every node depending on it; its accesses only declare order (any
/// view of any residency; a written one must still name each element once,
/// KD_ERR_ALIASING, as for every node). It cannot fail: report errors through user. It must not call
/// kdag (refused with KD_ERR_BUSY): on a HOST session it runs on a pool
/// worker while an API call may hold the session's lock waiting for it, and
/// on a CUDA session it runs as a stream-ordered host callback on the
/// driver's thread (cuLaunchHostFunc, or a CUDA graph's host node), which
/// must not call CUDA either. user is passed as is on every submission: it must stay
/// valid until every submission of the graph has completed, which may be
/// after kd_graph_destroy. name is copied (as by every node-adding
/// function); accesses is borrowed for the call.
/// @{
typedef void (*kd_host_fn)(void *user);
KD_API kd_status kd_graph_host(kd_graph *g, const char *name, kd_host_fn fn, void *user,
                               const kd_garg *accesses, size_t count, kd_node *out_node);
/// @}

/// What a foreign node's callback receives (kd_graph_foreign).
typedef struct kd_foreign_call {
  void *stream;              ///< CUstream; never keep it, never destroy it
  const kd_span *spans;      ///< one per access, in declaration order
  size_t span_count;         ///< the number of spans
  uint64_t workspace;        ///< CUdeviceptr, workspace_bytes long (0 if none)
  size_t workspace_bytes;    ///< as declared
  void *resource;            ///< kd_graph_foreign's resource: the graph owns it (release); never free it
} kd_foreign_call;
/// A foreign node's callback: enqueue the library's work on call->stream.
typedef kd_status (*kd_foreign_fn)(const kd_foreign_call *call, void *user);
/// The most tensor accesses a foreign node declares.
#define KD_FOREIGN_MAX_ACCESSES 64

/// A foreign-library node (cuBLAS, cuSOLVER, ...): fn receives the session
/// stream, one span per declared access (bounded, valid only during the
/// call), and a workspace of the declared size that kdag allocates per
/// submission. A span is one contiguous run, so every access must be a
/// compact view (KD_ERR_NOT_COMPACT otherwise: canonicalize a strided view
/// with kd_graph_op_copy first). resource (may be NULL) is released with
/// release(resource) only after the last submission using it has
/// completed, on whichever thread makes the kdag call that finds it
/// complete (a submit, a wait, a reap, kd_graph_destroy or
/// kd_session_destroy), holding the session's lock. fn runs inside a kdag
/// call (holding the session's lock, in GRAPH mode while capturing): it may
/// enqueue work on the stream but must not call kdag, and neither may
/// release; kdag refuses every call into a session made there (any call
/// given a session, graph, sink, tensor or raw scope, and
/// kd_session_create) with KD_ERR_BUSY. user must stay valid
/// while the graph can be submitted; accesses is borrowed for the call;
/// resource is owned by the graph from a successful call (refused, it stays
/// the caller's). CUDA only. Errors, beyond those of every node:
/// KD_ERR_NO_HOST_IMPL on a HOST session; KD_ERR_INVALID_ARGUMENT for a NULL
/// fn, more than KD_FOREIGN_MAX_ACCESSES accesses, or a workspace_bytes
/// larger than the device's memory; KD_ERR_NOT_COMPACT.
KD_API kd_status kd_graph_foreign(kd_graph *g, const char *name, kd_foreign_fn fn, void *user,
                                  const kd_garg *accesses, size_t count, size_t workspace_bytes,
                                  void *resource, void (*release)(void *resource), kd_node *out_node);

/// Loops and conditionals that run on the device: iterate until a
/// residual is small, or take a branch, without a round trip to the host.
///
/// kd_graph_while_begin adds a loop node; every node added after it, up
/// to kd_graph_end(g, loop), is the loop's body: declared with the same
/// calls, over the graph's tensors, ordered among themselves as any nodes.
/// The loop runs as one node of the level it was added to, ordered by its
/// body's accesses (edges between a body and the nodes outside it become
/// edges of the loop node). Before every trip, the first included, the
/// loop reads its condition, a one-element KD_I32 or KD_U32 tensor: zero
/// ends the loop. At most max_trips trips run (0: none). trips (optional:
/// a zero handle for none) is a one-element KD_I32 or KD_U32 tensor the
/// loop writes: the trips completed so far, so 0 during the first and the
/// total after the loop; a loop stopped by its limit has trips ==
/// max_trips. kd_no_tensor() leaves trips out. The body must write the condition (kd_graph_end refuses the
/// loop otherwise), and the condition must be written before the loop
/// (its read is checked as any node's). kd_graph_if_begin adds a
/// conditional: its body runs once when the condition, written before
/// it, is nonzero.
///
/// A body holds kernels, built-ins, uploads and nested loops and
/// conditionals, at most KD_GRAPH_MAX_DEPTH open at once; a sink, host
/// function or foreign node inside one is KD_ERR_INVALID_ARGUMENT (the
/// driver runs only kernels, copies, memsets and nested conditionals in a
/// conditional body). An explicit edge (kd_graph_edge) joins nodes of one
/// level only. A graph with a loop still open cannot be submitted.
/// A tensor the body writes counts as written after the loop, even when
/// the loop ran no trip (it then holds what it held before).
///
/// How each mode runs one: GRAPH, as a conditional node of the CUDA graph
/// (CUDA 12.3+ drivers), its condition set by a small kdag kernel before
/// the loop and at the end of each trip; EAGER, driven from the host: the
/// condition is copied to pinned memory and the host waits for it before
/// each trip (a wait per trip, counted in kd_session_stats.event_waits);
/// HOST, by the worker that reaches the loop, its body in order.
/// The results are the same in every mode (bit for bit for built-ins).
/// name is copied; out_node (may be NULL) gets the loop node. Errors, beyond
/// those of every node: KD_ERR_INVALID_ARGUMENT (a condition or trips
/// tensor of another dtype or size, more than KD_GRAPH_MAX_DEPTH open,
/// trips given to an IF), and for kd_graph_end: KD_ERR_INVALID_ARGUMENT
/// (loop is not the innermost open loop; a WHILE whose body never writes
/// its condition: the loop stays open).
/// @{
#define KD_GRAPH_MAX_DEPTH 8
KD_API kd_status kd_graph_while_begin(kd_graph *g, const char *name, kd_tensor condition, uint32_t max_trips,
                                      kd_tensor trips, kd_node *out_node);
KD_API kd_status kd_graph_if_begin(kd_graph *g, const char *name, kd_tensor condition, kd_node *out_node);
KD_API kd_status kd_graph_end(kd_graph *g, kd_node loop);
/// @}

/// An explicit edge: after runs after before, both of one level (the top
/// level, or one loop's body). One that would close a cycle
/// is KD_ERR_CYCLE and leaves the graph unchanged; one that exists already
/// (declared, or inferred from the accesses) is not added again and counts
/// in kd_graph_stats.edges_dropped. A node after itself, or a node that is
/// not of this graph, is KD_ERR_INVALID_ARGUMENT.
KD_API kd_status kd_graph_edge(kd_graph *g, kd_node before, kd_node after);

/// Rebinds every access of tensor old to tensor replacement (same dtype,
/// shape and residency) for later submissions, without re-planning. The
/// graph takes a reference to replacement and drops its reference to old
/// once every submission made so far has completed, so old may be released
/// at once. Errors: KD_ERR_INVALID_ARGUMENT (old not used by the graph,
/// replacement already used, or of another dtype, shape or residency),
/// KD_ERR_UNINITIALIZED (the graph reads old before writing it and
/// replacement was never written), KD_ERR_RELEASED, KD_ERR_WRONG_SESSION
/// (a tensor of another session), KD_ERR_OUT_OF_MEMORY; on error the graph
/// is unchanged.
KD_API kd_status kd_graph_rebind(kd_graph *g, kd_tensor old, kd_tensor replacement);

/// Sets value argument index of kernel node node (same kind and size) for
/// later submissions, without re-planning; value's bytes are copied. Tensor
/// arguments change with kd_graph_rebind. Errors: KD_ERR_INVALID_ARGUMENT,
/// KD_ERR_ARGUMENT_MISMATCH, KD_ERR_OUT_OF_MEMORY; on error the argument is
/// unchanged.
KD_API kd_status kd_graph_set_arg(kd_graph *g, kd_node node, uint32_t index, kd_arg value);

/// Writes the graph as Graphviz DOT: nodes, and edges labelled with the
/// hazard (RAW/WAR/WAW and the tensor, as t<k>: the k-th distinct tensor
/// the graph's nodes name, counted from 0 in declaration order, which
/// kd_graph_rebind keeps) or "explicit"; two nodes ordered by
/// several conflicts get one edge, labelled with one of them. file is the caller's,
/// written during the call and left open; a stream in error, before or
/// after, is KD_ERR_INVALID_ARGUMENT.
KD_API kd_status kd_graph_write_dot(kd_graph *g, FILE *file);

/// A graph's size, for tests and tuning (kd_graph_stats_get).
typedef struct kd_graph_stats {
  uint32_t nodes;         ///< nodes added
  uint32_t edges;         ///< edges kept: inferred and explicit, after reduction
  uint32_t accesses;      ///< tensor accesses the nodes declared
  uint32_t edges_dropped; ///< edges not added: a repeat between one pair of nodes (hazard or
                          ///< kd_graph_edge), or one that other edges imply (a covering
                          ///< read, a witness, the reduction of a node's edges)
  uint32_t edges_in_max;  ///< the most edges into one node
} kd_graph_stats;
/// out_stats is written during the call only, on success. Errors:
/// KD_ERR_INVALID_ARGUMENT (NULL graph or out_stats), KD_ERR_OUT_OF_MEMORY (a graph
/// with declared edges is counted by target in a scratch array).
KD_API kd_status kd_graph_stats_get(kd_graph *g, kd_graph_stats *out_stats);

/// A submission's ticket, a value: seq orders the session's submissions;
/// session names the session that issued it (0: none was issued), a number
/// no later session of the process takes (for 2^32 - 1 sessions).
typedef struct kd_ticket {
  uint64_t seq;      ///< the submission's place in its session's order, from 1
  uint32_t session;  ///< the issuing session's number; 0: no ticket
} kd_ticket;

/// How a CUDA session runs this graph from the next submission on; starts as
/// the session's exec_mode option. GRAPH keeps one executable CUDA graph per
/// plan (rebuilt when nodes or edges are added): rebinding a tensor or
/// setting a scalar patches it in place; a foreign node is captured from its
/// callback once per executable graph, with a workspace that lives as long
/// as it does, and a rebinding that changes a foreign node's spans captures
/// it again. KD_SESSION_DEBUG_NODES runs every mode eagerly so that a fault
/// names its node. Errors: KD_ERR_INVALID_ARGUMENT.
KD_API kd_status kd_graph_set_exec_mode(kd_graph *g, kd_exec_mode mode);

/// Plans (once) and enqueues the whole graph. out_ticket (may be NULL) gets the
/// submission's ticket; on failure, one that kd_ticket_done refuses. With
/// completion_ring_capacity submissions in flight already, it waits for the
/// oldest once its own work is enqueued (counted in ring_full_waits; a
/// fault that wait finds fails the call, and the work, being enqueued,
/// is waited for before what it holds is let go).
/// Errors: KD_ERR_INVALID_ARGUMENT (NULL graph), KD_ERR_OUT_OF_MEMORY
/// (events, pinned staging and workspaces are all taken before anything is
/// enqueued: running short of them enqueues nothing), KD_ERR_DEVICE_FAULT,
/// and a refused enqueue or a foreign callback's error naming the node.
/// EAGER may have enqueued the nodes before a refused one: they complete
/// with what they use held, and no sink takes the failed submission's
/// copy. The one refusal that comes after the whole submission is enqueued
/// is of its completion's event record (KD_ERR_DRIVER): kdag then waits
/// for the stream (stream_syncs), so the submission has run: its writes
/// are done and its sinks hold its copies, but no ticket is issued.
/// Nothing already submitted is lost.
KD_API kd_status kd_graph_submit(kd_graph *g, kd_ticket *out_ticket);

/// Non-blocking: *out_done (the caller's, written during the call only) is 1
/// when the submission has completed, 0 if not yet. Polls that
/// submission's completion alone (one event query); when it is done, it
/// and every earlier submission retire, releasing what they held.
/// Errors: KD_ERR_INVALID_ARGUMENT (a ticket never issued: zeroed, or from a
/// failed submission), KD_ERR_WRONG_SESSION (another session's ticket),
/// KD_ERR_DEVICE_FAULT.
KD_API kd_status kd_ticket_done(kd_session *session, kd_ticket ticket, int *out_done);

/// A submission's completion as a CUevent for other libraries' streams:
/// *out_event is a new event (no timing) the caller owns and destroys
/// (cuEventDestroy). It is recorded after the work enqueued on the session
/// so far, so it completes no earlier than the ticket's submission (and
/// no later than the session's work before this call); for a ticket
/// already retired it is an event never recorded, which is complete.
/// No host wait. CUDA sessions only. Errors: KD_ERR_INVALID_ARGUMENT (NULL
/// out_event, a ticket never issued), KD_ERR_WRONG_SESSION (another
/// session's ticket), KD_ERR_WRONG_BACKEND (a HOST session),
/// KD_ERR_OUT_OF_MEMORY, KD_ERR_DRIVER, KD_ERR_DEVICE_FAULT.
KD_API kd_status kd_ticket_event(kd_session *session, kd_ticket ticket, void **out_event);

/// Makes session's work from now on wait, on the device, for another
/// session's submission (its ticket), on the same device or another: the
/// basis for pipelines across sessions and GPUs. Neither host waits; a
/// retired ticket, or one of session itself (its stream is in order
/// already), adds no wait. The two sessions' locks are taken one after the
/// other, never together. CUDA sessions only. Errors: those of
/// kd_ticket_event for other and ticket, and of kd_session_wait_event.
KD_API kd_status kd_session_wait_ticket(kd_session *session, kd_session *other, kd_ticket ticket);

/// A copy node from a tensor of another CUDA session (peer), on the same
/// device or another, into dst of the graph's session: the copy between
/// GPUs of one process. Direct where the devices have peer access (kdag
/// turns it on), staged by the driver otherwise. dst is ordered among the
/// graph's nodes like any write. Against the peer, each submission of the
/// graph waits on the device for the work the peer submitted before it
/// (the copy reads src after those writes), and the peer's work submitted
/// after it waits on the device for the whole submission (a later write
/// of src cannot overtake the copy, and memory the peer frees later stays
/// until the copy is done). Neither host waits. Put the copies in a small
/// graph of their own where the peer should not wait for more. The two
/// sessions' locks are taken one after the other, never together. src
/// is checked when the node is added and looked up again at each
/// submission (a released tensor fails the submission, KD_ERR_RELEASED,
/// naming the node, before anything is enqueued); peer must outlive the
/// graph. Errors, beyond those of every node: KD_ERR_INVALID_ARGUMENT
/// (NULL peer, peer is the graph's session: use kd_graph_op_copy; dst and
/// src of another dtype or size), KD_ERR_WRONG_BACKEND (either session
/// HOST), KD_ERR_NOT_COMPACT (src or dst strided), KD_ERR_NOT_RESIDENT
/// (src in host memory), KD_ERR_OUT_OF_BOUNDS, KD_ERR_DRIVER.
KD_API kd_status kd_graph_copy_peer(kd_graph *g, const char *name, kd_view dst, kd_session *peer, kd_view src,
                                    kd_node *out_node);

/// Waits for the sink of the latest submission that ran it, then copies the
/// data into the sink's host memory. On a HOST session it waits without the
/// session's lock, so other threads may submit meanwhile; no thread may
/// destroy the sink's graph, or the session, while a wait on it runs.
/// Each submission is waited for once (on HOST, two threads already waiting
/// on one submission at once both return with its data). Errors: KD_ERR_INVALID_ARGUMENT (no
/// submission to wait for: never submitted, or its latest submission waited
/// for already), KD_ERR_DEVICE_FAULT.
KD_API kd_status kd_sink_wait(kd_sink *sink);

#ifndef KDAG_NO_DEPRECATED
/// Names of the previous release, kept for one release (kdag/kdag.h).
/// @{
#define kd_graph_fill kd_graph_op_fill
#define kd_graph_copy kd_graph_op_copy
#define kd_graph_transpose kd_graph_op_transpose
#define kd_graph_add kd_graph_op_add
#define kd_graph_axpy kd_graph_op_axpy
#define kd_graph_scale kd_graph_op_scale
#define kd_graph_sum kd_graph_op_sum
/// @}
#endif

#ifdef __cplusplus
}
#endif
#endif /* KDAG_GRAPH_H */
