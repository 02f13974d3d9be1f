/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: the HOST backend's collectives, over a shared-memory segment
 * that the ranks of one machine map (processes or sessions of one
 * process). Every call blocks until its peers have done their part; a
 * peer that does not come within the timeout, or that disagrees on the
 * operation or its size, fails the call on every rank (KD_ERR_COMM_FAILED)
 * and the segment for good. Ranks call collectives in one order (kdag's
 * order token sees to that), and one call at a time per rank. */
#ifndef KDAG_EXEC_COMM_HOST_H
#define KDAG_EXEC_COMM_HOST_H

#include <stddef.h>

#include "kdag/comm.h"

typedef struct kd_shm_comm kd_shm_comm;

/* A fresh id: the name of a segment no other id names. */
kd_status kd_shm_id_create(const char *op, kd_comm_id *out);
/* Maps the segment id names as rank of nranks, creating it if this rank
 * is the first; the last rank to arrive removes its name (the mappings
 * stay). Does not wait for the others. Errors name op. */
kd_status kd_shm_open(const char *op, const kd_comm_id *id, int nranks, int rank, kd_shm_comm **out);
void kd_shm_close(kd_shm_comm *c);

/* The collectives, on host memory; what names the node in messages.
 * count is in elements of dtype: all_reduce's of src and dst,
 * reduce_scatter's of dst (src has nranks times as many), all_gather's of
 * src (dst has nranks times as many). */
kd_status kd_shm_all_reduce(kd_shm_comm *c, const char *what, const void *src, void *dst, size_t count,
                            kd_dtype dtype, kd_reduce op);
kd_status kd_shm_reduce_scatter(kd_shm_comm *c, const char *what, const void *src, void *dst, size_t count,
                                kd_dtype dtype, kd_reduce op);
kd_status kd_shm_all_gather(kd_shm_comm *c, const char *what, const void *src, void *dst, size_t bytes);
kd_status kd_shm_broadcast(kd_shm_comm *c, const char *what, void *buf, size_t bytes, int root);
/* send (to: KD_NO_PEER for none) and recv (from) at once. */
kd_status kd_shm_send_recv(kd_shm_comm *c, const char *what, const void *send, size_t send_bytes, int to,
                           void *recv, size_t recv_bytes, int from);

#endif
