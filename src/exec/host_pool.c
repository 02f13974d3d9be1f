/* SPDX-License-Identifier: Apache-2.0 */
/* The HOST backend's worker threads. */
#include <ck_pr.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "exec/host_pool.h"

#define KD_POOL_RING (1u << 12)
#define KD_POOL_MAX_THREADS 64

void kd_host_pool_push(kd_host_pool *p, kd_host_item *it) {
  if (!ck_ring_enqueue_mpmc(&p->ring, p->buf, it)) {
    it->next = NULL;
    pthread_mutex_lock(&p->overflow_mu);
    if (p->overflow_tail) p->overflow_tail->next = it;
    else ck_pr_store_ptr(&p->overflow_head, it);
    p->overflow_tail = it;
    pthread_mutex_unlock(&p->overflow_mu);
  }
  sem_post(&p->queued); /* after the item is visible: a token always finds one */
}

/* Takes an item for the token just taken: the ring first, then the
 * overflow's oldest. Each item is visible before its token is posted and
 * tokens never outnumber queued items, so one is there; the retry is only
 * a guard. */
static kd_host_item *take(kd_host_pool *p) {
  for (;;) {
    void *item = NULL;
    if (ck_ring_dequeue_mpmc(&p->ring, p->buf, &item)) return item;
    if (ck_pr_load_ptr(&p->overflow_head)) {
      pthread_mutex_lock(&p->overflow_mu);
      kd_host_item *it = p->overflow_head;
      if (it) {
        ck_pr_store_ptr(&p->overflow_head, it->next);
        if (!it->next) p->overflow_tail = NULL;
      }
      pthread_mutex_unlock(&p->overflow_mu);
      if (it) return it;
    }
    sched_yield();
  }
}

/* Takes a token: polls KD_HOST_POLLS times, then sleeps on the semaphore. */
static void await_token(kd_host_pool *p) {
  for (int i = 0; i < KD_HOST_POLLS; ++i) {
    if (sem_trywait(&p->queued) == 0) return;
    sched_yield();
  }
  while (sem_wait(&p->queued) != 0) {}
}

static void *worker(void *arg) {
  kd_host_pool *p = arg;
  for (;;) {
    atomic_fetch_add_explicit(&p->idle, 1, memory_order_relaxed);
    await_token(p);
    atomic_fetch_sub_explicit(&p->idle, 1, memory_order_relaxed);
    if (ck_pr_load_int(&p->stop)) break;
    p->run(take(p), p->ctx);
  }
  return NULL;
}

/* The cores (else the PUs) of the creating thread's CPU binding, each
 * narrowed to that binding: a session created inside taskset or an MPI
 * rank's binding keeps its workers there. 0 when hwloc knows none. */
static uint32_t binding_sets(kd_host_pool *p) {
  hwloc_bitmap_t allowed = hwloc_bitmap_dup(hwloc_topology_get_allowed_cpuset(p->topo));
  hwloc_bitmap_t mine = hwloc_bitmap_alloc();
  if (!allowed || !mine) {
    hwloc_bitmap_free(allowed);
    hwloc_bitmap_free(mine);
    return 0;
  }
  if (hwloc_get_cpubind(p->topo, mine, HWLOC_CPUBIND_THREAD) == 0 && !hwloc_bitmap_iszero(mine))
    hwloc_bitmap_and(allowed, allowed, mine);
  hwloc_bitmap_free(mine);
  uint32_t count = 0;
  hwloc_obj_type_t types[2] = {HWLOC_OBJ_CORE, HWLOC_OBJ_PU};
  for (int k = 0; k < 2 && !count; ++k) {
    int n = hwloc_get_nbobjs_by_type(p->topo, types[k]);
    if (n <= 0) continue;
    p->bind = calloc((size_t)n, sizeof *p->bind);
    if (!p->bind) break;
    for (int i = 0; i < n && count < KD_POOL_MAX_THREADS; ++i) {
      hwloc_obj_t o = hwloc_get_obj_by_type(p->topo, types[k], (unsigned)i);
      if (!o || !hwloc_bitmap_intersects(o->cpuset, allowed)) continue;
      hwloc_bitmap_t set = hwloc_bitmap_dup(o->cpuset);
      if (!set) break;
      hwloc_bitmap_and(set, set, allowed);
      p->bind[count++] = set;
      p->bind_count = count;
    }
    if (!count) {
      free(p->bind);
      p->bind = NULL;
    }
  }
  hwloc_bitmap_free(allowed);
  return count;
}

kd_status kd_host_pool_start(kd_host_pool *p, kd_host_item_fn run, void *ctx, const kd_logger *log, const char *op) {
  memset(p, 0, sizeof p[0]);
  p->run = run;
  p->ctx = ctx;
  uint32_t places = 0;
  if (hwloc_topology_init(&p->topo) == 0 && hwloc_topology_load(p->topo) == 0) {
    places = binding_sets(p);
  } else if (p->topo) {
    hwloc_topology_destroy(p->topo);
    p->topo = NULL;
  }
  /* At least two workers even on one core: independent nodes must be able
   * to run at the same time (a node may wait for another). */
  uint32_t n = places > 2 ? places : 2;
  p->buf = calloc(KD_POOL_RING, sizeof *p->buf);
  p->threads = calloc(n, sizeof *p->threads);
  p->sem_ready = p->buf && p->threads && sem_init(&p->queued, 0, 0) == 0;
  if (!p->sem_ready) {
    kd_host_pool_stop(p);
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the host thread pool", op);
  }
  ck_ring_init(&p->ring, KD_POOL_RING);
  p->overflow_ready = pthread_mutex_init(&p->overflow_mu, NULL) == 0;
  if (!p->overflow_ready) {
    kd_host_pool_stop(p);
    return kd_fail(KD_ERR_RESOURCE_EXHAUSTED, "%s: could not create the host pool's overflow lock", op);
  }
  uint32_t unbound = 0;
  int create_error = 0;
  for (uint32_t i = 0; i < n; ++i) {
    create_error = pthread_create(&p->threads[i], NULL, worker, p);
    if (create_error) break;
    p->thread_count = i + 1;
    /* From here: the worker may already run, unbound for a moment. */
    if (places && hwloc_set_thread_cpubind(p->topo, p->threads[i], p->bind[i % places], 0) != 0) unbound++;
  }
  /* Two workers are the floor above; fewer than asked for beyond it (a
   * process or container thread limit) only costs parallelism. */
  if (p->thread_count < 2) {
    kd_host_pool_stop(p);
    return kd_fail(KD_ERR_RESOURCE_EXHAUSTED, "%s: could not start the host pool's second worker: pthread_create: %s",
                   op, strerror(create_error));
  }
  int len;
  if (!places)
    len = snprintf(p->placement, sizeof p->placement, "%u workers, unplaced (%s)", p->thread_count,
                   p->topo ? "hwloc knows no core or PU" : "hwloc topology unavailable");
  else
    len = snprintf(p->placement, sizeof p->placement, "%u workers over the %u %s of the creating thread's CPU binding (hwloc)",
                   p->thread_count, places, hwloc_get_nbobjs_by_type(p->topo, HWLOC_OBJ_CORE) > 0 ? "cores" : "PUs");
  if (unbound && len > 0 && (size_t)len < sizeof p->placement)
    len += snprintf(p->placement + len, sizeof p->placement - (size_t)len, "; %u could not be bound", unbound);
  if (p->thread_count < n && len > 0 && (size_t)len < sizeof p->placement)
    snprintf(p->placement + len, sizeof p->placement - (size_t)len, "; %u of %u started (pthread_create: %s)",
             p->thread_count, n, strerror(create_error));
  kd_log(log, KD_LOG_INFO, "HOST pool: %s", p->placement);
  return KD_OK;
}

void kd_host_pool_stop(kd_host_pool *p) {
  ck_pr_store_int(&p->stop, 1);
  for (uint32_t i = 0; i < p->thread_count; ++i) sem_post(&p->queued);
  for (uint32_t i = 0; i < p->thread_count; ++i) pthread_join(p->threads[i], NULL);
  if (p->sem_ready) sem_destroy(&p->queued);
  if (p->overflow_ready) pthread_mutex_destroy(&p->overflow_mu);
  free(p->threads);
  free(p->buf);
  for (uint32_t i = 0; i < p->bind_count; ++i) hwloc_bitmap_free(p->bind[i]);
  free(p->bind);
  if (p->topo) hwloc_topology_destroy(p->topo);
  memset(p, 0, sizeof *p);
}
