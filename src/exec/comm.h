/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: a communicator (kdag/comm.h), shared by its object's calls
 * (exec/comm.c) and the collective nodes (exec/collective.c). */
#ifndef KDAG_EXEC_COMM_H
#define KDAG_EXEC_COMM_H

#include "cuda/nccl.h"
#include "exec/comm_host.h"
#include "kdag/comm.h"
#include "session/session_impl.h"

/* The ranks kd_comm_create_all made in one process: on CUDA each must be
 * driven by a thread of its own (exec/collective.c checks). */
typedef struct kd_comm_group {
  uint32_t refs;           /* one per member */
  uint64_t serial;         /* unique in the process: what a thread remembers having driven */
} kd_comm_group;

struct kd_comm {
  uint32_t refs;           /* the caller's, and one per collective node (atomic) */
  kd_session *session;
  int rank, nranks;
  kd_tensor token;         /* one element of the session's: every collective reads and writes it, so they
                              run in declaration order; the caller's hold goes with kd_comm_destroy */
  const kd_nccl_api *nccl; /* CUDA */
  kd_nccl_comm nc;
  kd_comm_group *group;    /* CUDA ranks of one kd_comm_create_all; NULL otherwise */
  kd_shm_comm *shm;        /* HOST */
  struct kd_comm *next_live; /* CUDA: the process's live communicators (exec/comm.c), polled at waits */
  int async_seen;          /* NCCL's asynchronous error already reported */
};

void kd_comm_ref(kd_comm *c);
/* The last reference destroys NCCL's communicator or unmaps the segment;
 * runs where a graph lets its resources go (holding the session's lock). */
void kd_comm_unref(kd_comm *c);

#endif
