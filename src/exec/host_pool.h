/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: the HOST backend's thread pool. Workers are placed one per core
 * of the creating thread's CPU binding with hwloc and take ready tasks from
 * a Concurrency Kit MPMC ring; a semaphore counts queued tasks so idle
 * workers sleep. When the ring is full, a task goes onto an intrusive FIFO
 * under a mutex (the rare path: more ready tasks than the ring holds) that
 * every worker takes from once the ring is empty: queueing a task never
 * waits for room and never allocates, however many tasks are ready at once,
 * each queue and take is O(1), and a task that did not fit stays visible to
 * every worker. */
#ifndef KDAG_ENGINE_HOST_POOL_H
#define KDAG_ENGINE_HOST_POOL_H

#include <ck_ring.h>
#include <hwloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/log.h"
#include "kdag/status.h"

/* Polls, yielding the core between them, before a HOST wait sleeps: a
 * worker waiting for its next task (on the pool's semaphore) and a caller
 * waiting for a run (kd_host_run_wait). One that sleeps between tiny tasks
 * pays a futex wake and a context switch for each; one that spins without
 * yielding takes the core from the thread queueing the work (kdag-bench
 * --suite hostexec; docs/design/executors.md). */
#define KD_HOST_POLLS 200

/* What the pool queues: the caller embeds one in each task and gets it
 * back in its kd_host_item_fn. An item is queued at most once at a time
 * (its link is the overflow FIFO's). kind and index are the caller's, to
 * tell its kinds of item apart. */
typedef struct kd_host_item {
  struct kd_host_item *next;
  uint32_t kind, index;
} kd_host_item;
/* Runs one item on a worker; it may queue more with kd_host_pool_push. */
typedef void (*kd_host_item_fn)(kd_host_item *it, void *ctx);

typedef struct kd_host_pool {
  pthread_t *threads;
  uint32_t thread_count;
  ck_ring_t ring;
  ck_ring_buffer_t *buf;
  pthread_mutex_t overflow_mu; /* queued while the ring was full, oldest first: */
  kd_host_item *overflow_head, *overflow_tail; /* head read unlocked to peek (ck_pr) */
  int overflow_ready;
  sem_t queued;            /* one token per item in the ring or the overflow */
  int sem_ready;
  int stop;
  /* Workers waiting for an item: a hint, read without ordering. C11
   * atomics rather than Concurrency Kit's, whose volatile loads
   * ThreadSanitizer cannot tell from plain reads. */
  _Atomic uint32_t idle;
  kd_host_item_fn run;
  void *ctx;
  hwloc_topology_t topo;
  hwloc_cpuset_t *bind;    /* bind_count cores (or PUs) of the binding; worker i uses i % bind_count */
  uint32_t bind_count;
  char placement[192];
} kd_host_pool;

/* Starts the workers, telling log (INFO) where they were placed, and why
 * a placement fell back. */
kd_status kd_host_pool_start(kd_host_pool *p, kd_host_item_fn run, void *ctx, const kd_logger *log, const char *op);
/* Joins the workers; items still queued are dropped (the session drains
 * its work first). */
void kd_host_pool_stop(kd_host_pool *p);
/* Queues a ready item, from any thread. Never fails, and never waits for
 * a worker or for room: at most it spins while another thread finishes
 * its own enqueue into the ring's slot before this one (Concurrency Kit's
 * MPMC ring publishes slots in order). */
void kd_host_pool_push(kd_host_pool *p, kd_host_item *it);
/* How many workers are waiting for an item now: a hint for splitting work,
 * stale as soon as it is read. */
static inline uint32_t kd_host_pool_idle(kd_host_pool *p) { return atomic_load_explicit(&p->idle, memory_order_relaxed); }

#endif
