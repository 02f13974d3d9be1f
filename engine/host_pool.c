/* The HOST backend's worker threads. */
#include <ck_pr.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/status_internal.h"
#include "engine/host_pool.h"

#define KD_POOL_RING (1u << 16)
#define KD_POOL_MAX_THREADS 64

typedef struct worker_arg {
  kd_host_pool *pool;
  uint32_t index;
} worker_arg;

struct kd_host_ready {
  kd_host_pool *pool;
  kd_host_task **local;    /* made ready while the ring was full: run here next */
  uint32_t n, cap;
};

void kd_host_ready_push(kd_host_ready *q, kd_host_task *t) {
  if (ck_ring_enqueue_mpmc(&q->pool->ring, q->pool->buf, t)) {
    sem_post(&q->pool->queued);
    return;
  }
  if (q->n == q->cap) {
    uint32_t cap = q->cap ? q->cap * 2 : 64;
    kd_host_task **grown = realloc(q->local, cap * sizeof *grown);
    if (!grown) { /* no memory either: the last resort is to wait for room */
      kd_host_pool_push(q->pool, t);
      return;
    }
    q->local = grown;
    q->cap = cap;
  }
  q->local[q->n++] = t;
}

static void *worker(void *p) {
  worker_arg *w = p;
  kd_host_pool *pool = w->pool;
  if (pool->topo) {
    /* One worker per core: keeps independent nodes truly parallel and their
     * caches apart. Failing to bind only costs locality. */
    int cores = hwloc_get_nbobjs_by_type(pool->topo, HWLOC_OBJ_CORE);
    hwloc_obj_t core = cores > 0 ? hwloc_get_obj_by_type(pool->topo, HWLOC_OBJ_CORE, (unsigned)((int)w->index % cores)) : NULL;
    if (core) hwloc_set_cpubind(pool->topo, core->cpuset, HWLOC_CPUBIND_THREAD);
  }
  free(w);
  kd_host_ready q = {.pool = pool};
  for (;;) {
    kd_host_task *t = NULL;
    if (q.n) {
      t = q.local[--q.n];
    } else {
      while (sem_wait(&pool->queued) != 0) {}
      if (ck_pr_load_int(&pool->stop)) break;
      void *item = NULL;
      while (!ck_ring_dequeue_mpmc(&pool->ring, pool->buf, &item)) sched_yield();
      t = item;
    }
    pool->run(t, &q, pool->ctx);
  }
  free(q.local);
  return NULL;
}

kd_status kd_host_pool_start(kd_host_pool *p, kd_host_task_fn run, void *ctx, const char *op) {
  memset(p, 0, sizeof p[0]);
  p->run = run;
  p->ctx = ctx;
  uint32_t n = 2;
  if (hwloc_topology_init(&p->topo) == 0 && hwloc_topology_load(p->topo) == 0) {
    int cores = hwloc_get_nbobjs_by_type(p->topo, HWLOC_OBJ_CORE);
    if (cores > 2) n = (uint32_t)cores;
    snprintf(p->placement, sizeof p->placement, "%u workers, one per core (hwloc, %d cores)", n < 2 ? 2 : n, cores);
  } else {
    if (p->topo) hwloc_topology_destroy(p->topo);
    p->topo = NULL;
    snprintf(p->placement, sizeof p->placement, "2 workers, unplaced (hwloc topology unavailable)");
  }
  /* At least two workers even on one core: independent nodes must be able
   * to run at the same time (a node may wait for another). */
  if (n > KD_POOL_MAX_THREADS) n = KD_POOL_MAX_THREADS;
  p->buf = calloc(KD_POOL_RING, sizeof *p->buf);
  p->threads = calloc(n, sizeof *p->threads);
  if (!p->buf || !p->threads || sem_init(&p->queued, 0, 0) != 0) {
    free(p->buf);
    free(p->threads);
    if (p->topo) hwloc_topology_destroy(p->topo);
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the host thread pool", op);
  }
  ck_ring_init(&p->ring, KD_POOL_RING);
  for (uint32_t i = 0; i < n; ++i) {
    worker_arg *w = malloc(sizeof *w);
    if (w) *w = (worker_arg){p, i};
    if (!w || pthread_create(&p->threads[i], NULL, worker, w) != 0) {
      free(w);
      p->thread_count = i;
      kd_host_pool_stop(p);
      return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: could not start host worker %u", op, i);
    }
    p->thread_count = i + 1;
  }
  return KD_OK;
}

void kd_host_pool_push(kd_host_pool *p, kd_host_task *t) {
  while (!ck_ring_enqueue_mpmc(&p->ring, p->buf, t)) sched_yield();
  sem_post(&p->queued);
}

void kd_host_pool_stop(kd_host_pool *p) {
  ck_pr_store_int(&p->stop, 1);
  for (uint32_t i = 0; i < p->thread_count; ++i) sem_post(&p->queued);
  for (uint32_t i = 0; i < p->thread_count; ++i) pthread_join(p->threads[i], NULL);
  sem_destroy(&p->queued);
  free(p->threads);
  free(p->buf);
  if (p->topo) hwloc_topology_destroy(p->topo);
  memset(p, 0, sizeof *p);
}
