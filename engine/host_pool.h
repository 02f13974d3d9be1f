/* Internal: the HOST backend's thread pool. Workers are placed one per core
 * with hwloc and take ready tasks from a Concurrency Kit MPMC ring; a
 * semaphore counts queued tasks so idle workers sleep. */
#ifndef KDAG_ENGINE_HOST_POOL_H
#define KDAG_ENGINE_HOST_POOL_H

#include <ck_ring.h>
#include <hwloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>

#include "kdag/status.h"

typedef struct kd_host_task kd_host_task;
/* A worker's hand-off for the tasks a running task makes ready: the ring,
 * or, when it is full, the worker's own stack, run next, depth first. A
 * worker never waits for room in the ring: if every worker did, none would
 * make any. Valid during the kd_host_task_fn call that received it. */
typedef struct kd_host_ready kd_host_ready;
void kd_host_ready_push(kd_host_ready *q, kd_host_task *t);
/* Runs one task on a worker; hands the tasks it makes ready to q. */
typedef void (*kd_host_task_fn)(kd_host_task *t, kd_host_ready *q, void *ctx);

typedef struct kd_host_pool {
  pthread_t *threads;
  uint32_t thread_count;
  ck_ring_t ring;
  ck_ring_buffer_t *buf;
  sem_t queued;
  int stop;
  kd_host_task_fn run;
  void *ctx;
  hwloc_topology_t topo;
  char placement[160];
} kd_host_pool;

kd_status kd_host_pool_start(kd_host_pool *p, kd_host_task_fn run, void *ctx, const char *op);
void kd_host_pool_stop(kd_host_pool *p);
/* Queues a ready task from a thread that is not a worker, waiting for room
 * in the ring when it is full (the workers drain it: none of them waits). */
void kd_host_pool_push(kd_host_pool *p, kd_host_task *t);

#endif
