/* SPDX-License-Identifier: Apache-2.0 */
/* The HOST executor's runs: a submission runs its plan's task table
 * (exec/host_plan.c) on the session's thread pool, each task released as
 * its predecessors finish. A worker that releases a task goes on with it
 * itself (the rest go to the pool), so a chain runs on one worker without
 * a queue or a wake-up per node; a large element-wise built-in is split
 * into slices that idle workers help with. */
#include <ck_pr.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/status_internal.h"
#include "exec/exec.h"
#include "kernels/host.h"

static void finish(kd_host_run *r);

void kd_host_run_unref(kd_host_run *r) {
  if (!kd_host_dec_to_zero(&r->refs)) return;
  if (r->plan) free(r->indegree); /* else one_zero */
  kd_host_plan_unref(r->plan);
  free(r->xfers);
  free(r->parts);
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  free(r);
}

int kd_host_run_done(kd_host_run *r) {
  int done = ck_pr_load_int(&r->done);
  if (done) ck_pr_fence_acquire(); /* the run's writes before what the caller frees */
  return done;
}

void kd_host_run_wait(kd_host_run *r) {
  /* Poll first, yielding the core, as the pool's workers do: a wait that
   * sleeps costs the finishing worker a futex wake and this thread a
   * context switch, which dominate a small graph's submission. The lock
   * below, taken once done is seen, orders the run's writes before what
   * the caller reads. */
  for (int i = 0; i < KD_HOST_POLLS && !ck_pr_load_int(&r->done); ++i) sched_yield();
  pthread_mutex_lock(&r->mu);
  while (!r->done) pthread_cond_wait(&r->cv, &r->mu);
  pthread_mutex_unlock(&r->mu);
}

static void jitter(void) {
  /* Up to 200 us, so a missing edge shows as a wrong result even on two
   * cores. The per-thread seed needs no lock. */
  static _Thread_local unsigned seed;
  if (!seed) seed = (unsigned)(uintptr_t)&seed ^ (unsigned)time(NULL);
  struct timespec ts = {0, (long)(rand_r(&seed) % 200) * 1000};
  nanosleep(&ts, NULL);
}

static void builtin(const kd_host_task *t, const kd_kview *v) {
  switch ((kd_builtin_op)t->op) {
    case KD_BI_FILL: kd_host_fill(t->esize, v[0], t->fill); break;
    case KD_BI_COPY: kd_host_copy(t->esize, v[0], v[1]); break;
    case KD_BI_ADD: kd_host_add((kd_kdtype)t->kdt, v[0], v[1], v[2]); break;
    case KD_BI_AXPY: kd_host_axpy((kd_kdtype)t->kdt, v[0], v[1], t->alpha); break;
    case KD_BI_SCALE: kd_host_scale((kd_kdtype)t->kdt, v[0], t->alpha); break;
    case KD_BI_SUM: kd_host_sum((kd_kdtype)t->kdt, v[0], v[1]); break;
  }
}

/* Takes and runs slices of a split built-in until none is left. */
static void run_slices(kd_host_run *r, kd_host_part *p) {
  const kd_host_task *t = p->task;
  const kd_kview *v = &r->views[t->slot];
  long long extent = v[0].shape[p->dim];
  for (;;) {
    uint32_t k = ck_pr_faa_32(&p->next, 1);
    if (k >= p->slices) return;
    long long lo = extent * k / p->slices, hi = extent * (k + 1) / p->slices;
    kd_kview s[3] = {v[0], v[1], v[2]}; /* a view the op does not use is all zero: narrowing leaves it so */
    for (int j = 0; j < 3; ++j) kd_host_narrow(&s[j], t->esize, p->dim, lo, hi);
    builtin(t, s);
  }
}

/* A built-in marked split: shared with the workers idle now, if any, in
 * more slices than workers so that a helper that starts late takes fewer.
 * 1: done here; 0: a helper still holds it and completes it. */
static int run_split(kd_host_run *r, kd_host_task *t) {
  const kd_kview *v = &r->views[t->slot];
  uint32_t helpers = kd_host_pool_idle(&r->hs->pool);
  long long n = kd_kview_numel(&v[0]), slices = 4 * ((long long)helpers + 1);
  if (slices > KD_HOST_SPLIT_MAX) slices = KD_HOST_SPLIT_MAX;
  if (slices > 2 * n / KD_HOST_SPLIT_MIN_ELEMS) slices = 2 * n / KD_HOST_SPLIT_MIN_ELEMS; /* each >= half the minimum */
  int dim = kd_host_split_dim(&v[0], slices);
  if (dim >= 0 && slices > v[0].shape[dim]) slices = v[0].shape[dim];
  if (!helpers || dim < 0 || slices < 2) {
    builtin(t, v);
    return 1;
  }
  if (helpers > slices - 1) helpers = (uint32_t)slices - 1;
  atomic_fetch_add_explicit(&r->hs->splits, 1, memory_order_relaxed);
  kd_host_part *p = &r->parts[t->part];
  p->task = t;
  p->dim = dim;
  p->slices = (uint32_t)slices;
  p->next = 0;
  p->holders = helpers + 1;
  for (uint32_t j = 0; j < helpers; ++j) { /* the ring's enqueue publishes the fields above */
    p->helpers[j].kind = KD_HOST_ITEM_PART;
    p->helpers[j].index = j;
    kd_host_pool_push(&r->hs->pool, &p->helpers[j]);
  }
  run_slices(r, p);
  return kd_host_dec_to_zero(&p->holders);
}

static void run_body_task(kd_host_run *r, const kd_host_task *t);

/* A loop (or an IF: at most one trip): its body on this worker, in the
 * plan's order, while the condition is nonzero and trips remain. trips,
 * when the loop has one, holds the trips completed: during each, and
 * after. */
static void run_loop(kd_host_run *r, const kd_host_task *t) {
  uint32_t done = 0;
  for (;;) {
    if (t->trips) memcpy(t->trips, &done, 4);
    uint32_t go;
    memcpy(&go, t->cond, 4);
    if (done >= t->max_trips || !go) return;
    for (uint32_t k = 0; k < t->body_count; ++k) run_body_task(r, &r->tasks[r->plan->order[t->body_first + k]]);
    done++;
  }
}

/* A task of a loop's body: never split (the body runs on one worker). */
static void run_body_task(kd_host_run *r, const kd_host_task *t) {
  switch (t->kind) {
    case KD_NODE_BUILTIN: builtin(t, &r->views[t->slot]); break;
    case KD_NODE_UPLOAD: memcpy(t->tensor, kd_host_run_xfer(r, t), t->bytes); break;
    case KD_NODE_LOOP: run_loop(r, t); break;
    default: break; /* no other kind is admitted in a body */
  }
}

/* A foreign node of kdag's own (a collective): its function over the
 * plan's host spans. A failure cannot fail a submission made long ago, so
 * it becomes the session's fault, which its next call reports. */
static void run_foreign(kd_host_run *r, const kd_host_task *t) {
  kd_foreign_call call = {NULL, &r->plan->spans[t->slot], t->span_count, 0, 0, t->resource};
  const char *was = kd_callback_enter("a collective node");
  unsigned long mark = kd_fail_mark();
  kd_status st = kd_fail_unexplained(t->ffn(&call, t->fuser), mark, "the collective");
  kd_callback_leave(was);
  if (st) kd_session_fail_async(r->hs->session, st, kd_last_error());
}

/* Runs one task; 0 when a split built-in's helper completes it instead. */
static int run_task(kd_host_run *r, kd_host_task *t) {
  if (r->jitter) jitter();
  switch (t->kind) {
    case KD_NODE_LOOP: run_loop(r, t); break;
    case KD_NODE_BUILTIN:
      if (t->split) return run_split(r, t);
      builtin(t, &r->views[t->slot]);
      break;
    case KD_NODE_UPLOAD: memcpy(t->tensor, kd_host_run_xfer(r, t), t->bytes); break;
    case KD_NODE_SINK: memcpy(kd_host_run_xfer(r, t), t->host, t->bytes); break;
    case KD_NODE_HOST: kd_host_trampoline(&(kd_host_call){t->fn, t->user}); break; /* marked as on CUDA */
    case KD_NODE_FOREIGN: run_foreign(r, t); break;
    default: break; /* kernel nodes are refused when added to a HOST session */
  }
  return 1;
}

/* Queues a run's roots, the run now the pool's. */
static void push_roots(kd_host_run *r) {
  ck_pr_store_ptr(&r->hs->current, r); /* before any of its items: the ring's enqueue publishes it */
  if (!r->dispensers) {
    kd_host_pool_push(&r->hs->pool, &r->tasks[r->roots[0]].item);
    return;
  }
  for (uint32_t j = 0; j < r->dispensers; ++j) {
    r->dispense[j].kind = KD_HOST_ITEM_ROOTS;
    kd_host_pool_push(&r->hs->pool, &r->dispense[j]);
  }
}

static void start(kd_host_run *r) {
  if (r->root_count) push_roots(r);
  else finish(r); /* an empty graph */
}

/* Marks a run done and starts the submission queued behind it, and so on
 * through any empty ones: a loop, since a chain of empty submissions behind
 * a long one would otherwise recurse once each on a worker's stack. */
static void finish(kd_host_run *r) {
  while (r) {
    pthread_mutex_lock(&r->mu);
    ck_pr_fence_release();
    ck_pr_store_int(&r->done, 1);
    kd_host_run *next = r->next;
    r->next = NULL;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    kd_host_run_unref(r); /* the pool's reference */
    r = NULL;
    if (!next) break;
    if (next->root_count) push_roots(next);
    else r = next; /* empty: done at once; it holds the pool's reference too */
    kd_host_run_unref(next); /* the chain's */
  }
}

/* t is done: counts down its successors, queueing those it makes ready
 * but one, which it returns for this worker to run next (NULL: none).
 * The run's remaining count is the caller's to drop (settle). */
static kd_host_task *complete(kd_host_run *r, const kd_host_task *t) {
  kd_host_task *next = NULL;
  for (uint32_t k = r->succ_start[t->node]; k < r->succ_start[t->node + 1]; ++k) {
    if (!kd_host_dec_to_zero(&r->indegree[r->succ[k]])) continue;
    kd_host_task *ready = &r->tasks[r->succ[k]];
    if (next) kd_host_pool_push(&r->hs->pool, &ready->item);
    else next = ready;
  }
  return next;
}

/* Runs t and, while it is done here and releases a successor, that
 * successor; the number of tasks finished here. */
static uint32_t run_chain(kd_host_run *r, kd_host_task *t, int ran) {
  uint32_t done = 0;
  for (;;) {
    if (!ran && !run_task(r, t)) return done; /* a helper completes it */
    done++;
    if (!(t = complete(r, t))) return done;
    ran = 0;
  }
}

/* Drops count from the run's remaining count: one atomic per worker's
 * batch rather than per task (a count held back keeps the run from
 * finishing, and nothing else); the one that reaches zero finishes it. */
static void settle(kd_host_run *r, uint32_t count) {
  if (!count) return;
  ck_pr_fence_release(); /* what this worker wrote, before the finisher's frees and the waiter's reads */
  if (ck_pr_faa_32(&r->remaining, (uint32_t)-count) != count) return;
  ck_pr_fence_acquire();
  finish(r);
}

/* Pool callback: a task (and then the successors it releases, in turn),
 * a helper's share of a split built-in, or a dispenser of roots. */
void kd_exec_host_task(kd_host_item *it, void *ctx) {
  kd_host_state *hs = ctx;
  ck_pr_fence_load(); /* the item taken, then the run it belongs to */
  kd_host_run *r = ck_pr_load_ptr(&hs->current);
  if (it->kind == KD_HOST_ITEM_ROOTS) {
    /* Roots in batches, a few per worker, so that two workers do not take
     * turns on one counter per task. The roots were listed when the plan
     * was made: scanning indegree here would race with workers already
     * counting it down. The dispenser's own count in remaining keeps the
     * run from finishing while it hands out roots. */
    uint32_t batch = r->root_count / (8 * r->dispensers);
    batch = batch < 1 ? 1 : batch > 64 ? 64 : batch;
    uint32_t done = 1; /* the dispenser's */
    for (;;) {
      uint32_t k = ck_pr_faa_32(&r->root_next, batch);
      if (k >= r->root_count) break;
      uint32_t end = k + batch < r->root_count ? k + batch : r->root_count;
      for (; k < end; ++k) done += run_chain(r, &r->tasks[r->roots[k]], 0);
    }
    settle(r, done);
    return;
  }
  if (it->kind == KD_HOST_ITEM_PART) {
    kd_host_part *p = (kd_host_part *)((char *)(it - it->index) - offsetof(kd_host_part, helpers));
    run_slices(r, p);
    if (kd_host_dec_to_zero(&p->holders)) settle(r, run_chain(r, p->task, 1)); /* the last one out completes it */
    return;
  }
  settle(r, run_chain(r, (kd_host_task *)((char *)it - offsetof(kd_host_task, item)), 0));
}

static void fence_release(kd_fence *f) { kd_host_run_unref((kd_host_run *)f); }
static int fence_done(kd_fence *f) { return kd_host_run_done((kd_host_run *)f); }
static void fence_wait(kd_fence *f) { kd_host_run_wait((kd_host_run *)f); }
static const kd_fence_ops run_fence = {fence_release, fence_done, fence_wait};

/* A run over hp (a reference taken), or with NULL a one-task run whose
 * task and transfer bytes (xfer_bytes) the caller fills in. NULL: no
 * memory. */
static kd_host_run *run_new(kd_session *s, kd_host_plan *hp, size_t xfer_bytes) {
  kd_host_run *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->fence.ops = &run_fence;
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  r->refs = 1;
  r->jitter = (s->opts.flags & KD_SESSION_HOST_JITTER) != 0;
  r->hs = s->exec;
  int oom;
  if (hp) {
    ck_pr_inc_32(&hp->refs);
    r->plan = hp;
    r->tasks = hp->tasks;
    r->views = hp->views;
    r->succ_start = hp->succ_start;
    r->succ = hp->succ;
    r->roots = hp->roots;
    r->task_count = hp->top_count;
    r->root_count = hp->root_count;
    r->indegree = malloc(((size_t)hp->task_count + 1) * sizeof *r->indegree);
    r->xfers = hp->xfer_count ? malloc(hp->xfer_off[hp->xfer_count] + 1) : NULL;
    r->parts = hp->split_count ? calloc(hp->split_count, sizeof *r->parts) : NULL;
    oom = !r->indegree || (hp->xfer_count && !r->xfers) || (hp->split_count && !r->parts);
    if (!oom) memcpy(r->indegree, hp->indegree, (size_t)hp->task_count * sizeof *r->indegree);
  } else {
    r->tasks = &r->one;
    r->succ_start = r->succ = r->roots = r->indegree = r->one_zero;
    r->task_count = r->root_count = 1;
    r->xfers = malloc(xfer_bytes + 1);
    oom = !r->xfers;
  }
  if (oom) {
    kd_host_run_unref(r);
    return NULL;
  }
  return r;
}

/* Hands a filled run to the pool behind the session's previous one.
 * Cannot fail. */
static void run_enqueue(kd_session *s, kd_host_run *r) {
  kd_host_state *hs = s->exec;
  if (r->root_count > 1) {
    r->dispensers = r->root_count < hs->pool.thread_count ? r->root_count : hs->pool.thread_count;
    if (r->dispensers > KD_HOST_SPLIT_MAX) r->dispensers = KD_HOST_SPLIT_MAX;
  }
  r->remaining = r->task_count + r->dispensers;
  ck_pr_inc_32(&r->refs); /* the pool's, dropped when the run finishes */
  /* Submissions run in order, as on a stream: this one starts when the
   * previous one is done. */
  kd_host_run *prev = hs->last_run;
  int queued = 0;
  if (prev) {
    pthread_mutex_lock(&prev->mu);
    if (!prev->done) {
      ck_pr_inc_32(&r->refs); /* the chain's */
      prev->next = r;
      queued = 1;
    }
    pthread_mutex_unlock(&prev->mu);
    kd_host_run_unref(prev); /* the session's hold moves to r */
  }
  ck_pr_inc_32(&r->refs);
  hs->last_run = r;
  if (!queued) start(r);
}

kd_status kd_exec_host_upload(kd_session *s, const char *op, kd_tensor_obj *o, const void *host, kd_held_set *held,
                              kd_host_run **out) {
  kd_host_run *r = run_new(s, NULL, o->bytes);
  kd_status st = r ? kd_held_add(held, KD_HELD_TENSOR, o, op)
                   : kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for a %zu-byte upload", op, o->bytes);
  if (st) {
    if (r) kd_host_run_unref(r);
    return st;
  }
  kd_tensor_ref(o);
  memcpy(r->xfers, host, o->bytes); /* the caller's memory is read now */
  r->one.item.kind = KD_HOST_ITEM_TASK;
  r->one.kind = KD_NODE_UPLOAD;
  r->one.tensor = o->host;
  r->one.bytes = o->bytes;
  run_enqueue(s, r);
  *out = r;
  return KD_OK;
}

kd_status kd_exec_host(kd_graph *g, const char *op, kd_held_set *held, uint64_t stamp, kd_host_run **out) {
  kd_session *s = g->session;
  kd_host_plan *hp = NULL;
  kd_status st = kd_host_plan_get(g, op, &hp);
  if (st) return st;
  kd_host_run *r = run_new(s, hp, 0);
  if (!r)
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for a submission of graph '%s' (%u nodes, %zu bytes of "
                   "transfer buffers)", op, kd_graph_name(g), hp->task_count,
                   hp->xfer_count ? hp->xfer_off[hp->xfer_count] : 0);
  /* Every tensor the graph uses stays alive until the run is done. */
  for (uint32_t b = 0; !st && b < g->binding_count; ++b) st = kd_held_tensor_once(held, g->bindings[b].obj, stamp, op);
  if (st) {
    kd_host_run_unref(r);
    return st;
  }
  /* Nothing fails from here. Uploads read the caller's memory now; sinks
   * point at this run's copies. */
  r->seq = s->next_seq; /* the completion enqueued next takes it */
  for (uint32_t x = 0; x < hp->xfer_count; ++x) {
    kd_host_task *t = &hp->tasks[hp->xfer_task[x]];
    if (t->kind == KD_NODE_UPLOAD) {
      memcpy(kd_host_run_xfer(r, t), t->host, t->bytes);
      continue;
    }
    kd_sink *sk = g->nodes[t->node].sink;
    if (sk->run) sk->run->ops->release(sk->run);
    ck_pr_inc_32(&r->refs);
    sk->run = &r->fence; /* its copy: kd_host_run_xfer(r, t) */
    sk->pending = 1;
  }
  run_enqueue(s, r);
  *out = r;
  return KD_OK;
}
