/* SPDX-License-Identifier: Apache-2.0 */
/* The HOST executor: a submission becomes one task per node, released to
 * the thread pool as their predecessors finish. */
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

/* Drops one count of a counter other threads drop too; 1 when it was the
 * last. The fences make what this thread wrote before visible to the thread
 * that sees zero (and then frees, or runs a successor that reads it): x86's
 * locked instructions order that already, aarch64's plain exclusives do
 * not. */
static bool dec_to_zero(uint32_t *c) {
  bool zero = false;
  ck_pr_fence_release();
  ck_pr_dec_32_zero(c, &zero);
  if (zero) ck_pr_fence_acquire();
  return zero;
}

void kd_host_run_unref(kd_host_run *r) {
  if (!dec_to_zero(&r->refs)) return;
  for (uint32_t i = 0; i < r->buffer_count; ++i) free(r->buffers[i]);
  free(r->buffers);
  free(r->tasks);
  free(r->succ_start);
  free(r->succ);
  free(r->indegree);
  free(r->roots);
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

static void run_task(kd_host_task *t) {
  switch (t->kind) {
    case KD_NODE_BUILTIN:
      switch (t->op) {
        case KD_BI_FILL: kd_host_fill(t->esize, t->v[0], t->fill); break;
        case KD_BI_COPY: kd_host_copy(t->esize, t->v[0], t->v[1]); break;
        case KD_BI_ADD: kd_host_add(t->kdt, t->v[0], t->v[1], t->v[2]); break;
        case KD_BI_AXPY: kd_host_axpy(t->kdt, t->v[0], t->v[1], t->alpha); break;
        case KD_BI_SCALE: kd_host_scale(t->kdt, t->v[0], t->alpha); break;
        case KD_BI_SUM: kd_host_sum(t->kdt, t->v[0], t->v[1]); break;
      }
      break;
    case KD_NODE_UPLOAD:
    case KD_NODE_SINK: memcpy(t->dst, t->src, t->bytes); break;
    case KD_NODE_HOST: kd_host_trampoline(&(kd_host_call){t->fn, t->user}); break; /* marked as on CUDA */
    case KD_NODE_KERNEL:
    case KD_NODE_FOREIGN: break; /* refused when added to a HOST session */
  }
}

/* Queues a run's roots. */
static void push_roots(kd_host_run *r) {
  /* The roots were listed up front: scanning indegree here would race
   * with workers already decrementing it and queue a task twice. */
  for (uint32_t i = 0; i < r->root_count; ++i) kd_host_pool_push(r->pool, &r->tasks[r->roots[i]].item);
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

/* Pool callback: run the task, release successors, finish the run. */
void kd_exec_host_task(kd_host_item *it, void *ctx) {
  (void)ctx;
  kd_host_task *t = (kd_host_task *)((char *)it - offsetof(kd_host_task, item));
  kd_host_run *r = t->run;
  if (r->jitter) jitter();
  run_task(t);
  for (uint32_t k = r->succ_start[t->node]; k < r->succ_start[t->node + 1]; ++k)
    if (dec_to_zero(&r->indegree[r->succ[k]])) kd_host_pool_push(r->pool, &r->tasks[r->succ[k]].item);
  if (dec_to_zero(&r->remaining)) finish(r);
}

static kd_status keep_buffer(kd_host_run *r, size_t bytes, void **out, const char *op) {
  if (r->buffer_count == r->buffer_cap) { /* doubling: a graph of many transfers stays linear */
    uint32_t cap = r->buffer_cap ? 2 * r->buffer_cap : 4;
    void **grown = realloc(r->buffers, (size_t)cap * sizeof *grown);
    if (!grown) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the run's transfer buffers", op);
    r->buffers = grown;
    r->buffer_cap = cap;
  }
  void *b = malloc(bytes ? bytes : 1);
  if (!b) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for a %zu-byte transfer buffer", op, bytes);
  r->buffers[r->buffer_count++] = b;
  *out = b;
  return KD_OK;
}

/* A run of n tasks and m edges, its arrays unfilled; NULL: no memory. */
static void fence_release(kd_fence *f) { kd_host_run_unref((kd_host_run *)f); }
static int fence_done(kd_fence *f) { return kd_host_run_done((kd_host_run *)f); }
static void fence_wait(kd_fence *f) { kd_host_run_wait((kd_host_run *)f); }
static const kd_fence_ops run_fence = {fence_release, fence_done, fence_wait};

static kd_host_run *run_new(kd_session *s, uint32_t n, uint32_t m) {
  kd_host_run *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->fence.ops = &run_fence;
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  r->refs = 1;
  r->jitter = (s->opts.flags & KD_SESSION_HOST_JITTER) != 0;
  r->task_count = n;
  r->tasks = calloc((size_t)n + 1, sizeof *r->tasks);
  r->succ_start = malloc(((size_t)n + 1) * sizeof *r->succ_start);
  r->succ = malloc(((size_t)m + 1) * sizeof *r->succ);
  r->indegree = malloc(((size_t)n + 1) * sizeof *r->indegree);
  r->roots = malloc(((size_t)n + 1) * sizeof *r->roots);
  if (!r->tasks || !r->succ_start || !r->succ || !r->indegree || !r->roots) {
    kd_host_run_unref(r);
    return NULL;
  }
  return r;
}

/* Hands a filled run to the pool behind the session's previous one.
 * Cannot fail. */
static void run_enqueue(kd_session *s, kd_host_run *r) {
  r->remaining = r->task_count;
  kd_host_state *hs = s->exec;
  r->pool = &hs->pool;
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
  kd_host_run *r = run_new(s, 1, 0);
  void *snap = NULL;
  kd_status st = r ? keep_buffer(r, o->bytes, &snap, op)
                   : kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the upload", op);
  if (!st) {
    st = kd_held_add(held, KD_HELD_TENSOR, o, op);
    if (!st) kd_tensor_ref(o);
  }
  if (st) {
    if (r) kd_host_run_unref(r);
    return st;
  }
  memcpy(snap, host, o->bytes); /* the caller's memory is read now */
  kd_host_task *t = &r->tasks[0];
  t->run = r;
  t->kind = KD_NODE_UPLOAD;
  t->src = snap;
  t->dst = o->host;
  t->bytes = o->bytes;
  r->succ_start[0] = r->succ_start[1] = 0;
  r->indegree[0] = 0;
  r->roots[0] = 0;
  r->root_count = 1;
  run_enqueue(s, r);
  *out = r;
  return KD_OK;
}

kd_status kd_exec_host(kd_graph *g, const char *op, kd_held_set *held, uint64_t stamp, kd_host_run **out) {
  kd_session *s = g->session;
  uint32_t n = g->node_count, m = g->edge_count;
  kd_host_run *r = run_new(s, n, m);
  if (!r) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the submission", op);
  /* The run owns copies: later graph edits never reach work in flight. */
  memcpy(r->succ_start, g->plan.succ_start, ((size_t)n + 1) * sizeof *r->succ_start);
  memcpy(r->succ, g->plan.succ, (size_t)m * sizeof *r->succ);
  memcpy(r->indegree, g->plan.indegree, (size_t)n * sizeof *r->indegree);
  for (uint32_t i = 0; i < n; ++i)
    if (!r->indegree[i]) r->roots[r->root_count++] = i;
  kd_status st = KD_OK;
  for (uint32_t i = 0; !st && i < n; ++i) {
    kd_gnode *node = &g->nodes[i];
    kd_host_task *t = &r->tasks[i];
    t->run = r;
    t->node = i;
    t->kind = node->kind;
    t->op = node->op;
    t->alpha = node->alpha;
    t->fn = node->host_fn;
    t->user = node->user;
    for (uint32_t k = 0; !st && k < node->access_count; ++k) {
      kd_gaccess *a = &g->accesses[node->first_access + k];
      kd_tensor_obj *o = g->bindings[a->binding].obj;
      st = kd_held_tensor_once(held, o, stamp, op);
      if (k < 3) t->v[k] = kd_access_kview(a, (uint64_t)(uintptr_t)o->host, kd_dtype_size(o->dtype));
      if (k == 0) {
        t->esize = kd_dtype_size(o->dtype);
        t->kdt = kd_kdtype_of(o->dtype);
        memcpy(t->fill.w, node->fill, sizeof t->fill.w);
      }
    }
    if (!st && node->kind == KD_NODE_UPLOAD) {
      void *snap = NULL; /* set by keep_buffer on KD_OK */
      st = keep_buffer(r, node->bytes, &snap, op);
      if (!st) {
        memcpy(snap, node->host, node->bytes); /* the caller's memory is read now */
        t->src = snap;
        t->dst = g->bindings[g->accesses[node->first_access].binding].obj->host;
        t->bytes = node->bytes;
      }
    } else if (!st && node->kind == KD_NODE_SINK) { /* a failed hold above stays the node's error */
      void *copy = NULL;
      st = keep_buffer(r, node->bytes, &copy, op);
      if (!st) {
        t->src = g->bindings[g->accesses[node->first_access].binding].obj->host;
        t->dst = copy;
        t->bytes = node->bytes;
      }
    }
    if (st) st = kd_fail_context(st, "%s: node '%s' (#%u)", op, node->name, i);
  }
  if (st) {
    kd_host_run_unref(r);
    return st;
  }
  /* Nothing fails from here. Sinks now point at this run's copies. */
  r->seq = s->next_seq; /* the completion enqueued next takes it */
  for (uint32_t i = 0; i < n; ++i) {
    kd_gnode *node = &g->nodes[i];
    if (node->kind != KD_NODE_SINK) continue;
    kd_sink *sk = node->sink;
    if (sk->run) sk->run->ops->release(sk->run);
    ck_pr_inc_32(&r->refs);
    sk->run = &r->fence; /* its copy: r->tasks[i].dst */
    sk->pending = 1;
  }
  run_enqueue(s, r);
  *out = r;
  return KD_OK;
}
