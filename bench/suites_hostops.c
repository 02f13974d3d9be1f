/* SPDX-License-Identifier: Apache-2.0 */
/* Suite "hostops" (CPU): the HOST backend's built-ins against plain C
 * loops in the same run. Per iteration, one operation over n = 2^log2n
 * floats: out = a + b (add), y = alpha x + y (axpy) or y = alpha y
 * (scale), as
 *  - c_loop: a single-thread C loop (the baseline),
 *  - c_loop_2t: the same loop split over two threads (pthreads, created
 *    once; each iteration hands both a half and waits for both),
 *  - kdag: a HOST session's graph of the one built-in node over compact
 *    tensors, submitted and waited for (a host node after it writes a
 *    one-element flag, which a sink copies back: nothing of n is copied),
 *  - kdag_strided: the same over views of every second element,
 *  - c_loop_strided: the single-thread C loop over every second element
 *    of arrays twice as long (the strided case's own baseline).
 * Times are per element. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bench/suites.h"
#include "kdag/kdag.h"

enum { OP_ADD, OP_AXPY, OP_SCALE };

typedef struct hostops_variant {
  int op;
  int kind; /* 0 c_loop, 1 c_loop_2t, 2 kdag, 3 kdag_strided, 4 c_loop_strided */
} hostops_variant;

typedef struct half {
  float *out;
  const float *a, *b;
  int64_t begin, end;
  int op;
  int64_t step; /* elements between two used ones: 1, or 2 (c_loop_strided) */
} half;

typedef struct hostops_case {
  hostops_variant v;
  int64_t n;
  float *a, *b, *out; /* C loops */
  pthread_t worker;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint64_t posted, done; /* the worker's half: handed out, finished */
  int quit, started;
  half second;
  kd_session *session; /* kdag */
  kd_graph *g;
  kd_sink *sink;
  float flag;
} hostops_case;

static void run_half(const half *h) {
  if (h->step == 2) { /* written out with a literal step, as one would */
    if (h->op == OP_ADD)
      for (int64_t i = h->begin; i < h->end; ++i) h->out[2 * i] = h->a[2 * i] + h->b[2 * i];
    else if (h->op == OP_SCALE)
      for (int64_t i = h->begin; i < h->end; ++i) h->out[2 * i] = 0.5f * h->out[2 * i];
    else
      for (int64_t i = h->begin; i < h->end; ++i) {
        float prod = 2.0f * h->a[2 * i];
        h->out[2 * i] = prod + h->out[2 * i];
      }
    return;
  }
  if (h->op == OP_ADD)
    for (int64_t i = h->begin; i < h->end; ++i) h->out[i] = h->a[i] + h->b[i];
  else if (h->op == OP_SCALE)
    for (int64_t i = h->begin; i < h->end; ++i) h->out[i] = 0.5f * h->out[i];
  else
    for (int64_t i = h->begin; i < h->end; ++i) {
      float prod = 2.0f * h->a[i];
      h->out[i] = prod + h->out[i];
    }
}

static void *worker(void *arg) {
  hostops_case *c = arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&c->lock);
  for (;;) {
    while (c->posted == seen && !c->quit) pthread_cond_wait(&c->cond, &c->lock);
    if (c->quit) break;
    seen = c->posted;
    pthread_mutex_unlock(&c->lock);
    run_half(&c->second);
    pthread_mutex_lock(&c->lock);
    c->done = seen;
    pthread_cond_broadcast(&c->cond);
  }
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

static void set_flag(void *user) { *(float *)user = 1.0f; }

static void hostops_free(hostops_case *c) {
  if (!c) return;
  if (c->started) {
    pthread_mutex_lock(&c->lock);
    c->quit = 1;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->worker, NULL);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
  }
  free(c->a);
  free(c->b);
  free(c->out);
  kd_graph_destroy(c->g);
  kd_session_destroy(c->session);
  free(c);
}

/* The kdag graph: the built-in over a, b (inputs) and out, compact or over
 * every second element of tensors twice as long; then the flag node. */
static kd_status kdag_graph(hostops_case *c, int strided) {
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  int64_t len = strided ? 2 * c->n : c->n;
  float *init = malloc((size_t)len * sizeof *init);
  if (!init) return KD_ERR_OUT_OF_MEMORY;
  for (int64_t i = 0; i < len; ++i) init[i] = (float)(i % 1000) * 0.001f;
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {len}};
  kd_tensor_desc d1 = {.dtype = KD_F32, .rank = 1, .shape = {1}};
  kd_tensor t[3] = {{0}}, flag = {0};
  kd_status st = kd_session_create(&o, &c->session);
  for (int k = 0; !st && k < 3; ++k) st = kd_tensor_from_host(c->session, &d, init, (size_t)len * sizeof *init, &t[k]);
  free(init);
  if (!st) st = kd_tensor_from_host(c->session, &d1, &c->flag, sizeof c->flag, &flag);
  if (!st) st = kd_graph_create(c->session, &c->g);
  kd_view v[3];
  for (int k = 0; k < 3; ++k) {
    v[k] = kd_whole(t[k]);
    if (strided) v[k] = (kd_view){.tensor = t[k], .rank = 1, .offset = 0, .shape = {c->n}, .strides = {2}};
  }
  if (!st && c->v.op == OP_ADD) st = kd_graph_op_add(c->g, "add", v[2], v[0], v[1], NULL);
  if (!st && c->v.op == OP_AXPY) st = kd_graph_op_axpy(c->g, "axpy", v[2], v[0], 2.0, NULL);
  if (!st && c->v.op == OP_SCALE) st = kd_graph_op_scale(c->g, "scale", v[2], 0.5, NULL);
  kd_garg acc[2] = {kd_g_in(v[2]), kd_g_out(kd_whole(flag))};
  if (!st) st = kd_graph_host(c->g, "flag", set_flag, &c->flag, acc, 2, NULL);
  if (!st) st = kd_graph_sink(c->g, "flag out", flag, &c->flag, sizeof c->flag, &c->sink);
  for (int k = 0; k < 3; ++k)
    if (t[k].bits) (void)kd_tensor_release(c->session, t[k]); /* the graph holds them */
  if (flag.bits) (void)kd_tensor_release(c->session, flag);
  return st;
}

static kb_status hostops_setup(kb_run *run, void **state) {
  int64_t log2n = kb_run_axis(run, "log2n", 16);
  if (log2n < 4 || log2n > 28) return kb_run_fail(run, "log2n must be in [4, 28], not %lld", (long long)log2n);
  hostops_case *c = calloc(1, sizeof *c);
  if (!c) return kb_run_fail(run, "out of memory");
  *state = c;
  c->v = *(const hostops_variant *)kb_run_user(run);
  c->n = (int64_t)1 << log2n;
  kb_run_per_iteration(run, (double)c->n, "element");
  /* Arrays read and written: add and axpy read two and write one, scale
   * reads and writes one. */
  kb_run_throughput(run, (double)c->n, (double)c->n * sizeof(float) * (c->v.op == OP_SCALE ? 2 : 3));
  if (c->v.kind == 2 || c->v.kind == 3) {
    if (kdag_graph(c, c->v.kind == 3)) {
      kb_status r = kb_run_fail(run, "kdag: %s", kd_last_error());
      hostops_free(c);
      *state = NULL;
      return r;
    }
    return KB_OK;
  }
  int64_t len = c->v.kind == 4 ? 2 * c->n : c->n;
  c->a = malloc((size_t)len * sizeof(float));
  c->b = malloc((size_t)len * sizeof(float));
  c->out = malloc((size_t)len * sizeof(float));
  if (!c->a || !c->b || !c->out) {
    hostops_free(c);
    *state = NULL;
    return kb_run_fail(run, "out of memory");
  }
  for (int64_t i = 0; i < len; ++i) c->a[i] = c->b[i] = c->out[i] = (float)(i % 1000) * 0.001f;
  if (c->v.kind == 1) {
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    c->second = (half){c->out, c->a, c->b, c->n / 2, c->n, c->v.op, 1};
    if (pthread_create(&c->worker, NULL, worker, c)) {
      pthread_mutex_destroy(&c->lock);
      pthread_cond_destroy(&c->cond);
      hostops_free(c);
      *state = NULL;
      return kb_run_fail(run, "pthread_create failed");
    }
    c->started = 1;
  }
  return KB_OK;
}

static kb_status hostops_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  hostops_case *c = state;
  out->gpu_ns = -1;
  uint64_t t0 = kb_now_ns();
  for (uint64_t it = 0; it < iterations; ++it) {
    if (c->v.kind == 2 || c->v.kind == 3) {
      if (kd_graph_submit(c->g, NULL) || kd_sink_wait(c->sink)) return kb_run_fail(run, "kdag: %s", kd_last_error());
      continue;
    }
    half first = {c->out, c->a, c->b, 0, c->v.kind == 1 ? c->n / 2 : c->n, c->v.op, c->v.kind == 4 ? 2 : 1};
    if (c->v.kind == 1) {
      pthread_mutex_lock(&c->lock);
      c->posted++;
      pthread_cond_broadcast(&c->cond);
      pthread_mutex_unlock(&c->lock);
    }
    run_half(&first);
    if (c->v.kind == 1) {
      pthread_mutex_lock(&c->lock);
      while (c->done != c->posted) pthread_cond_wait(&c->cond, &c->lock);
      pthread_mutex_unlock(&c->lock);
    }
  }
  out->host_ns = (double)(kb_now_ns() - t0);
  return KB_OK;
}

static void hostops_teardown(kb_run *run, void *state) {
  (void)run;
  hostops_free(state);
}

int kb_register_hostops_suite(kb_harness *h) {
  kb_suite_desc sd = {.name = "hostops",
                      .description = "the HOST backend's add, axpy and scale built-ins over n floats against "
                                     "single- and two-thread C loops",
                      .interleave = 1};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  static const int64_t log2n[] = {16, 22};
  static const hostops_variant v[] = {{OP_ADD, 0},   {OP_ADD, 1},   {OP_ADD, 2},   {OP_ADD, 3},   {OP_ADD, 4},
                                      {OP_AXPY, 0},  {OP_AXPY, 1},  {OP_AXPY, 2},  {OP_AXPY, 3},  {OP_AXPY, 4},
                                      {OP_SCALE, 0}, {OP_SCALE, 1}, {OP_SCALE, 2}, {OP_SCALE, 3}, {OP_SCALE, 4}};
  static const char *const names[] = {"add_c_loop",   "add_c_loop_2t",   "add_kdag",   "add_kdag_strided",
                                      "add_c_loop_strided",
                                      "axpy_c_loop",  "axpy_c_loop_2t",  "axpy_kdag",  "axpy_kdag_strided",
                                      "axpy_c_loop_strided",
                                      "scale_c_loop", "scale_c_loop_2t", "scale_kdag", "scale_kdag_strided",
                                      "scale_c_loop_strided"};
  static const char *const what[] = {"out[i] = a[i] + b[i], one thread",
                                     "the same, split over two threads",
                                     "kd_graph_op_add on a HOST session, compact tensors",
                                     "kd_graph_op_add over every second element",
                                     "out[2i] = a[2i] + b[2i], one thread",
                                     "y[i] = 2 x[i] + y[i], one thread",
                                     "the same, split over two threads",
                                     "kd_graph_op_axpy on a HOST session, compact tensors",
                                     "kd_graph_op_axpy over every second element",
                                     "y[2i] = 2 x[2i] + y[2i], one thread",
                                     "y[i] = 0.5 y[i], one thread",
                                     "the same, split over two threads",
                                     "kd_graph_op_scale on a HOST session, compact tensors",
                                     "kd_graph_op_scale over every second element",
                                     "y[2i] = 0.5 y[2i], one thread"};
  if (kb_suite_axis(s, "log2n", log2n, 2)) return -1;
  for (size_t i = 0; i < sizeof v / sizeof v[0]; ++i) {
    kb_case_desc d = {.name = names[i], .description = what[i], .baseline = v[i].kind == 0 || v[i].kind == 4,
                      .setup = hostops_setup, .batch = hostops_batch, .teardown = hostops_teardown,
                      .user = (void *)&v[i]};
    if (kb_case_add(s, &d)) return -1;
  }
  return 0;
}
