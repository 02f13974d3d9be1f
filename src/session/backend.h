/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: the interface between a session and the backend that runs its
 * work, as ggml's ggml_backend_i: one table per backend, each slot
 * required unless marked optional.
 *
 * It is declared here, in the session layer, and implemented in exec/:
 * the CUDA backend (EAGER, GRAPH and the AUTO policy between them on the
 * session's stream, exec/cuda_backend.c) and the HOST backend (a thread
 * pool, exec/host_backend.c). The session's own calls (uploads, downloads,
 * destroy) then reach the executors through it without naming one, and
 * no layer looks up. kd_session_create (exec/backend.c) picks the table.
 *
 * Every slot runs under the session lock (the caller entered the session),
 * except where noted. */
#ifndef KDAG_SESSION_BACKEND_H
#define KDAG_SESSION_BACKEND_H

#include "kdag/status.h"

typedef struct kd_session kd_session;
struct kd_tensor_obj;
struct kd_graph;
struct kd_sink;
struct kd_session_stats;

typedef struct kd_backend_ops {
  /* Frees what the backend keeps (its state, s->exec), after every
   * completion has retired. */
  void (*destroy)(kd_session *s);
  /* Runs one submission of g's plan (valid) in order after the work
   * before it, and hands it to the completion ring. On failure whatever
   * was enqueued still completes with its objects held (nothing submitted
   * is lost) and the error names the node. */
  kd_status (*submit)(struct kd_graph *g, const char *op);
  /* Copies host (o->bytes, read before it returns) into the memory of o,
   * a tensor of the backend's residency, after the work submitted before.
   * fresh: no submitted work can use o yet. */
  kd_status (*upload)(kd_session *s, const char *op, struct kd_tensor_obj *o, const void *host, int fresh);
  /* Copies o (initialized) into host once the work submitted before it is
   * done: the explicit host wait. */
  kd_status (*download)(kd_session *s, const char *op, struct kd_tensor_obj *o, void *host);
  /* Waits for the latest submitted copy of sk (pending) and copies it to
   * the sink's host memory. May let go of the session lock while it waits
   * (HOST); it holds it again when it returns. */
  kd_status (*sink_wait)(struct kd_sink *sk, const char *op);
  /* Optional: fills the counters the backend keeps itself (those its
   * threads count without the session lock). */
  void (*stats)(kd_session *s, struct kd_session_stats *out);
} kd_backend_ops;

#endif
