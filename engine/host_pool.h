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
/* Runs one task; returns tasks made ready (count in *n, at most cap). */
typedef void (*kd_host_task_fn)(kd_host_task *t, kd_host_task **ready, uint32_t *n, uint32_t cap, void *ctx);

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
/* Queues a ready task (from any thread). */
void kd_host_pool_push(kd_host_pool *p, kd_host_task *t);

#endif
