/* SPDX-License-Identifier: Apache-2.0 */
/// @file
/// kdag/comm.h — communicators and collective nodes: a graph's all-reduce,
/// reduce-scatter, all-gather, broadcast, send and receive, ordered by
/// their declared tensor accesses like any node.
///
/// A communicator (kd_comm) joins one session per rank: ranks may be
/// sessions of one process (a session per device, kd_comm_create_all) or
/// of several processes (one per rank, launched by mpirun or any other
/// launcher that passes the kd_comm_id from rank 0 to the others).
/// - On a CUDA session the collectives are NCCL's, on the session's stream,
///   captured into the executable graph in GRAPH mode. NCCL is loaded at
///   run time, like the driver: the file $KDAG_NCCL_PATH names, else
///   libnccl.so.2 through the loader's path, else the nvidia-nccl pip
///   wheel under $KDAG_PYTHON_SITE. Without it, KD_ERR_LIBRARY_MISSING.
/// - On a HOST session they are kdag's own, over shared memory between the
///   processes (or sessions) of one machine: a collective node runs on a
///   worker of the pool and waits there for its peers.
///
/// Every collective node of a communicator in one graph reads and writes
/// the communicator's order token (one element of the session's, made
/// with it), so the collectives of one communicator run in the order the
/// graph declares them, on every executor: ranks that declare the same
/// collectives in the same order match them up. Peers must agree on sizes
/// and types; the HOST implementation checks and fails with
/// KD_ERR_COMM_FAILED, NCCL does not check (its behaviour is undefined).
///
/// Threads: a communicator is an object of its session (its lock, its
/// rules). NCCL blocks the thread that issues a rank's collective until
/// its peers join, so in one process each rank of a CUDA communicator
/// needs a thread of its own to submit its graphs: a thread that has
/// submitted a collective of one rank and then submits one of another
/// rank of the same kd_comm_create_all group is refused (KD_ERR_BUSY). HOST
/// collectives wait on the pool's workers, so one thread may submit every
/// rank's graph.
///
/// Failures: on HOST, a peer that never arrives (KDAG_COMM_TIMEOUT_S,
/// default 600 seconds) or that disagrees on a collective leaves the
/// communicator failed and the session with it: the wait that finds it
/// and the session's later calls return KD_ERR_COMM_FAILED with the
/// reason, as after a device fault; the release calls still work. On CUDA,
/// an NCCL call kdag makes that fails fails the submission, naming the
/// node and NCCL's message; an error NCCL finds later (a peer lost on the
/// network: ncclCommGetAsyncError, asked after every sink wait, download
/// and completed kd_ticket_done) fails the session the same way.
#ifndef KDAG_COMM_H
#define KDAG_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "kdag/graph.h"
#include "kdag/session.h"
#include "kdag/status.h"
#include "kdag/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/// A communicator: one rank's membership, an object of one session.
typedef struct kd_comm kd_comm;

/// The bytes of a communicator's id (NCCL's unique id has as many).
#define KD_COMM_ID_BYTES 128
/// What rank 0 makes (kd_comm_id_create) and every rank passes to
/// kd_comm_create: copy it between processes as plain bytes.
typedef struct kd_comm_id {
  unsigned char bytes[KD_COMM_ID_BYTES]; ///< opaque
} kd_comm_id;

/// "No peer" for kd_graph_send_recv: that side of the exchange is left out.
#define KD_NO_PEER (-1)

/// Reductions (NCCL's, and HOST's in the same element order per rank).
typedef enum kd_reduce {
  KD_REDUCE_SUM = 0,  ///< sum
  KD_REDUCE_PROD = 1, ///< product
  KD_REDUCE_MAX = 2,  ///< maximum
  KD_REDUCE_MIN = 3,  ///< minimum
  KD_REDUCE_AVG = 4   ///< the sum divided by the ranks (floating-point types only)
} kd_reduce;

/// Makes a new id for one communicator, on the rank that will hand it to
/// the others: NCCL's unique id for a CUDA session (it opens NCCL's
/// bootstrap socket in this process), the name of a shared-memory segment
/// on HOST. Every rank's session must be of the same backend. Errors:
/// KD_ERR_INVALID_ARGUMENT, KD_ERR_LIBRARY_MISSING (no NCCL), KD_ERR_COMM_FAILED
/// (NCCL refused).
KD_API kd_status kd_comm_id_create(kd_session *session, kd_comm_id *out_id);

/// Joins rank `rank` of `nranks` (1 <= nranks <= 65536 on CUDA, <=
/// KD_COMM_HOST_MAX_RANKS on HOST) to the communicator named by id. On a
/// CUDA session this blocks until every rank has joined (ncclCommInitRank):
/// in one process, join the ranks from a thread each, or all at once with
/// kd_comm_create_all. On HOST it does not wait; the first collective does.
/// The session must outlive the communicator. Errors:
/// KD_ERR_INVALID_ARGUMENT (NULL, rank out of [0, nranks), nranks out of
/// range, on HOST an id no kd_comm_id_create of a HOST session made),
/// KD_ERR_LIBRARY_MISSING, KD_ERR_OUT_OF_MEMORY, KD_ERR_COMM_FAILED (NCCL
/// refused, a foreign id included; the shared memory could not be mapped).
KD_API kd_status kd_comm_create(kd_session *session, const kd_comm_id *id, int nranks, int rank,
                                kd_comm **out_comm);

/// The ranks of one process at once: sessions[i] becomes rank i of count,
/// out_comms[i] its communicator (the caller's array of count). The
/// sessions must be distinct and of one backend; on CUDA each of another
/// device (NCCL refuses two ranks on one GPU). One call from one thread
/// (NCCL's group of initializations); all or nothing. The ranks form a
/// group: each must then be submitted from its own thread (see top).
/// Errors: those of kd_comm_create, naming the session's index.
KD_API kd_status kd_comm_create_all(kd_session *const *sessions, int count, kd_comm **out_comms);

/// The caller's reference goes; the communicator itself (NCCL's, or the
/// shared memory) once the last submission using it has completed. Graphs
/// that hold a collective node of it keep it alive. NULL is ignored.
KD_API void kd_comm_destroy(kd_comm *comm);

/// This rank and the number of ranks. Errors: KD_ERR_INVALID_ARGUMENT.
KD_API kd_status kd_comm_info(kd_comm *comm, int *out_rank, int *out_nranks);

/// The most ranks of a HOST communicator.
#define KD_COMM_HOST_MAX_RANKS 64

/// Collective nodes. Every view is compact (KD_ERR_NOT_COMPACT) and of a
/// tensor of the graph's session (KD_ERR_WRONG_SESSION, as is a
/// communicator of another session); dst and src have one dtype
/// (KD_ERR_INVALID_ARGUMENT) and either are the same view (in place) or do
/// not overlap (KD_ERR_ALIASING). Sizes, in elements, checked here:
/// - all_reduce: dst and src of equal size; every rank's dst gets the
///   elementwise reduction of every rank's src. Complex types reduce
///   with SUM and AVG only; AVG needs a floating-point type.
/// - reduce_scatter: src of nranks * n elements, dst of n: rank r's dst
///   gets the reduction of the ranks' src elements [r * n, (r + 1) * n).
/// - all_gather: src of n, dst of nranks * n: rank r's src lands at
///   [r * n, (r + 1) * n) of every rank's dst.
/// - broadcast: buf of root is read, every other rank's buf is written.
/// - send_recv: send (to rank send_to) and recv (from rank recv_from)
///   in one step, so that a ring or a halo exchange cannot deadlock;
///   KD_NO_PEER leaves a side out, its view ignored (kd_no_tensor's whole
///   view, or any), both sides a node that moves nothing (the edge ranks
///   of a halo exchange on one rank); a rank may send to itself. The byte counts must match
///   the peer's (checked on HOST).
/// A collective node is not allowed inside a loop body (a graph loop
/// would issue collectives the host never saw). The graph holds a
/// reference on comm. Beyond those: KD_ERR_INVALID_ARGUMENT (NULL comm, op out
/// of range, root or peer out of [0, nranks)).
/// @{
KD_API kd_status kd_graph_all_reduce(kd_graph *g, const char *name, kd_comm *comm, kd_view dst, kd_view src,
                                     kd_reduce op, kd_node *out_node);
KD_API kd_status kd_graph_reduce_scatter(kd_graph *g, const char *name, kd_comm *comm, kd_view dst, kd_view src,
                                         kd_reduce op, kd_node *out_node);
KD_API kd_status kd_graph_all_gather(kd_graph *g, const char *name, kd_comm *comm, kd_view dst, kd_view src,
                                     kd_node *out_node);
KD_API kd_status kd_graph_broadcast(kd_graph *g, const char *name, kd_comm *comm, kd_view buf, int root,
                                    kd_node *out_node);
KD_API kd_status kd_graph_send_recv(kd_graph *g, const char *name, kd_comm *comm, kd_view send, int send_to,
                                    kd_view recv, int recv_from, kd_node *out_node);
/// @}

#ifdef __cplusplus
}
#endif

#endif
