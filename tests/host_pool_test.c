/* The HOST thread pool on its own: a running task hands the tasks it makes
 * ready to the ring, or to its worker's own stack while the ring is full,
 * so the pool keeps going however many tasks one releases at once. */
#include <ck_pr.h>
#include <sched.h>

#include "engine/host_pool.h"
#include "kdag_test.h"

/* More children than the ring holds (65,536 slots). */
#define CHILDREN ((1u << 16) + 4096)

/* The pool never looks inside a task: the test's own items stand in. */
typedef struct item {
  int spawner;
} item;

typedef struct pool_ctx {
  uint32_t workers, per_spawner;
  uint32_t arrived;      /* spawners running */
  uint32_t children_run;
  item spawner, child;
} pool_ctx;

static void run(kd_host_task *t, kd_host_ready *q, void *p) {
  pool_ctx *c = p;
  if (!((item *)t)->spawner) {
    ck_pr_inc_32(&c->children_run);
    return;
  }
  /* Every worker runs a spawner before any releases its children, so no
   * worker is left to drain the ring while they hand them over. */
  ck_pr_inc_32(&c->arrived);
  while (ck_pr_load_32(&c->arrived) < c->workers) sched_yield();
  for (uint32_t i = 0; i < c->per_spawner; ++i) kd_host_ready_push(q, (kd_host_task *)&c->child);
}

/* Before 2026-12-04 a worker waited for room in the ring: with every worker
 * doing so, none made any and the pool stalled for good (this test then
 * times out). */
Test(host_pool, workers_releasing_more_tasks_than_the_ring_holds_never_stall, .timeout = 60) {
  pool_ctx c = {.spawner = {1}, .child = {0}};
  kd_host_pool pool;
  KDT_OK(kd_host_pool_start(&pool, run, &c, "host_pool_test"));
  c.workers = pool.thread_count;
  c.per_spawner = CHILDREN / c.workers + 1;
  cr_assert_geq(c.workers, 2, "the pool starts at least two workers");
  for (uint32_t i = 0; i < c.workers; ++i) kd_host_pool_push(&pool, (kd_host_task *)&c.spawner);
  uint32_t want = c.per_spawner * c.workers;
  while (ck_pr_load_32(&c.children_run) < want) sched_yield();
  cr_assert_eq(ck_pr_load_32(&c.children_run), want);
  kd_host_pool_stop(&pool);
}
