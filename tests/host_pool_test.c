/* SPDX-License-Identifier: Apache-2.0 */
/* The HOST thread pool on its own: queueing never waits, however many
 * items are ready at once, and an item that did not fit in the ring stays
 * visible to every worker. */
#include <ck_pr.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "exec/host_pool.h"
#include "kdag_test.h"

/* More items than the ring holds (4,096 slots). */
#define MANY ((1u << 12) * 4 + 100)

typedef struct pool_ctx pool_ctx;
/* The pool never looks inside an item beyond its link. */
typedef struct item {
  kd_host_item link; /* first: the callback casts back */
  int kind;          /* 0 child, 1 spawner, 2 meeter */
} item;

struct pool_ctx {
  kd_host_pool pool;
  uint32_t workers, per_spawner;
  uint32_t arrived;   /* spawners running */
  uint32_t gate;      /* spawners queue their children once it is open */
  uint32_t meet;      /* spawner 0 then queues the two meeters */
  uint32_t children_run;
  uint32_t met;       /* meeters running */
  uint32_t timed_out;
  item *children, *outside;
  item spawners[64], meeters[2];
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void run(kd_host_item *it, void *p) {
  pool_ctx *c = p;
  item *i = (item *)it;
  if (i->kind == 0) {
    ck_pr_inc_32(&c->children_run);
  } else if (i->kind == 1) {
    /* Every worker runs a spawner before any queues its children, so no
     * worker is free to drain the ring while they hand them over. */
    ck_pr_inc_32(&c->arrived);
    while (ck_pr_load_32(&c->arrived) < c->workers || !ck_pr_load_32(&c->gate)) sched_yield();
    uint32_t me = (uint32_t)(i - c->spawners);
    for (uint32_t k = 0; k < c->per_spawner; ++k) kd_host_pool_push(&c->pool, &c->children[me * c->per_spawner + k].link);
    if (me == 0 && c->meet) {
      kd_host_pool_push(&c->pool, &c->meeters[0].link);
      kd_host_pool_push(&c->pool, &c->meeters[1].link);
    }
  } else {
    /* Two meeters wait for each other: they must run at the same time. */
    ck_pr_inc_32(&c->met);
    double until = now_s() + 10.0;
    while (ck_pr_load_32(&c->met) < 2)
      if (now_s() > until) {
        ck_pr_store_32(&c->timed_out, 1);
        return;
      }
  }
}

static pool_ctx *start(uint32_t gate, uint32_t meet) {
  pool_ctx *c = calloc(1, sizeof *c);
  cr_assert_not_null(c);
  c->gate = gate;
  c->meet = meet;
  KDT_OK(kd_host_pool_start(&c->pool, run, c, 0, "host_pool_test"));
  c->workers = c->pool.thread_count;
  cr_assert_geq(c->workers, 2, "the pool starts at least two workers");
  cr_assert_leq(c->workers, 64);
  c->per_spawner = MANY / c->workers + 1;
  c->children = calloc((size_t)c->per_spawner * c->workers, sizeof *c->children);
  c->outside = calloc(MANY, sizeof *c->outside);
  cr_assert(c->children && c->outside);
  for (uint32_t i = 0; i < c->workers; ++i) c->spawners[i] = (item){.kind = 1};
  for (int i = 0; i < 2; ++i) c->meeters[i] = (item){.kind = 2};
  for (uint32_t i = 0; i < c->workers; ++i) kd_host_pool_push(&c->pool, &c->spawners[i].link);
  return c;
}

/* Waits for every child queued so far, then joins the workers. */
static void finish(pool_ctx *c, uint32_t outside) {
  uint32_t want = c->per_spawner * c->workers + outside;
  while (ck_pr_load_32(&c->children_run) < want) sched_yield();
  cr_assert_eq(ck_pr_load_32(&c->children_run), want);
  kd_host_pool_stop(&c->pool);
  free(c->children);
  free(c->outside);
  free(c);
}

/* Until 2026-12-04 a worker waited for room in the ring: with every worker
 * doing so, none made any and the pool stalled for good. */
Test(host_pool, workers_queueing_more_items_than_the_ring_holds_never_stall, .timeout = 60) {
  finish(start(1, 0), 0);
}

/* A thread that is not a worker queues far more than the ring holds while
 * every worker is busy: it must return at once. Until 2026-12-05 it waited
 * for room (on a HOST submit: under the session lock, so a graph whose
 * nodes wait for something the caller does after the submit deadlocked). */
Test(host_pool, queueing_from_outside_never_waits_for_room, .timeout = 60) {
  pool_ctx *c = start(0, 0);
  while (ck_pr_load_32(&c->arrived) < c->workers) sched_yield(); /* every worker busy */
  double t0 = now_s();
  for (uint32_t k = 0; k < MANY; ++k) kd_host_pool_push(&c->pool, &c->outside[k].link);
  double took = now_s() - t0;
  ck_pr_store_32(&c->gate, 1);
  cr_assert_lt(took, 1.0, "queueing %u items with every worker busy took %.3f s", MANY, took);
  finish(c, MANY);
}

/* Two items that wait for each other, queued by a worker after the ring
 * filled up: every worker must see them, or the one that took the first
 * never lets the second run. Until 2026-12-05 items a worker made ready
 * while the ring was full went onto its own stack, invisible to the others,
 * and ran one after the other there. */
Test(host_pool, items_past_a_full_ring_are_seen_by_every_worker, .timeout = 60) {
  pool_ctx *c = start(1, 1);
  while (ck_pr_load_32(&c->met) < 2 && !ck_pr_load_32(&c->timed_out)) sched_yield();
  cr_assert_eq(ck_pr_load_32(&c->timed_out), 0, "the two meeters did not run at the same time");
  finish(c, 0);
}
