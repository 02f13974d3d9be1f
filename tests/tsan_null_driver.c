/* SPDX-License-Identifier: Apache-2.0 */
/* ThreadSanitizer lane for the CUDA backend, against the null driver
 * (tests/null_driver.c; no GPU), outside Criterion (whose runner does not
 * work under TSan). One CUDA session shared by four threads: three each
 * submit their own graph (EAGER, GRAPH, AUTO) one to eleven times, wait at
 * its sink, check the data and rebind a tensor now and then, while the
 * fourth reaps, reads the counters, opens raw scopes that the other three
 * call into from their threads (refused: each scope is its thread's), holds
 * completions pending and lets them go (held, the ring of 8 fills in most runs and a submit waits for its oldest; a
 * last single-threaded phase fills it for sure). kdag's session
 * lock must order every access to the session, its ring and its graphs;
 * TSan fails the run on a race, and the run fails on a wrong result or an
 * error. The null driver itself is not instrumented. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kdag/kdag.h"
#include "tests/null_driver.h"

#define LEN 128
#define ROUNDS 300
#define WORKERS 3

typedef struct worker {
  kd_session *s;
  kd_exec_mode mode;
  int id, rc;
} worker;

static atomic_int g_running = WORKERS;
static kdag_null_api g_nd;
/* The churn thread's latest raw scope (open or ended): the workers call
 * into it from their threads, which must be refused, never served. */
static _Atomic(kd_raw *) g_raw;
static atomic_int g_churn_failed;

#define FAIL(...)                                      \
  do {                                                 \
    fprintf(stderr, "worker %d: ", w->id);             \
    fprintf(stderr, __VA_ARGS__);                      \
    fprintf(stderr, ": %s\n", kd_last_error());        \
    w->rc = 1;                                         \
    goto out;                                          \
  } while (0)

/* upload a; b = a; sink a: what is sunk is what was uploaded (the null
 * driver's kernels do nothing, its copies are real). */
static void *work(void *p) {
  worker *w = p;
  kd_session *s = w->s;
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  float in[LEN], out[LEN];
  kd_tensor a = {0}, b = {0}, spare = {0};
  kd_graph *g = NULL;
  kd_sink *sink;
  if (kd_tensor_create(s, &d, &a) || kd_tensor_create(s, &d, &b) || kd_tensor_create(s, &d, &spare))
    FAIL("tensors");
  if (kd_graph_create(s, &g) || kd_graph_set_exec_mode(g, w->mode)) FAIL("graph");
  if (kd_graph_upload(g, "up", a, in, sizeof in, NULL) || kd_graph_op_copy(g, "b=a", kd_whole(b), kd_whole(a), NULL) ||
      kd_graph_sink(g, "a", a, out, sizeof out, &sink))
    FAIL("nodes");
  for (int r = 0; r < ROUNDS; ++r) {
    for (int i = 0; i < LEN; ++i) in[i] = (float)(w->id * 100000 + r * LEN + i);
    if (r % 7 == 3) { /* b <-> spare, in place in GRAPH mode */
      if (kd_graph_rebind(g, b, spare)) FAIL("rebind round %d", r);
      kd_tensor t = b;
      b = spare;
      spare = t;
    }
    for (int k = 0; k <= r % 10; ++k) /* several in flight: held, a ring of 8 fills */
      if (kd_graph_submit(g, NULL)) FAIL("submit round %d", r);
    if (kd_sink_wait(sink)) FAIL("sink wait round %d", r);
    kd_raw *raw = atomic_load(&g_raw);
    void *stream;
    if (raw && kd_raw_stream(raw, &stream) == KD_OK) FAIL("round %d: another thread's raw scope served this one", r);
    for (int i = 0; i < LEN; ++i)
      if (out[i] != in[i]) FAIL("round %d: out[%d] = %g, want %g", r, i, (double)out[i], (double)in[i]);
  }
out:
  if (g) kd_graph_destroy(g);
  kd_tensor_release(s, a);
  kd_tensor_release(s, b);
  kd_tensor_release(s, spare);
  atomic_fetch_sub(&g_running, 1);
  return NULL;
}

static kd_status churn_scope(kd_raw *raw, void *user) {
  (void)user;
  atomic_store(&g_raw, raw);
  void *stream;
  return kd_raw_stream(raw, &stream);
}

/* Reaps, reads counters, opens raw scopes and toggles pending completions
 * until the workers are done. */
static void *churn(void *p) {
  kd_session *s = p;
  for (unsigned i = 0; atomic_load(&g_running); ++i) {
    uint32_t pending;
    kd_session_stats k;
    (void)kd_session_reap(s, &pending);
    (void)kd_session_stats_get(s, &k);
    if (i % 16 == 0 && kd_with_raw(s, "churn", churn_scope, NULL)) {
      fprintf(stderr, "churn: kd_with_raw: %s\n", kd_last_error());
      atomic_store(&g_churn_failed, 1);
    }
    g_nd.hold((i / 64) % 2);
  }
  g_nd.hold(0);
  return NULL;
}

int main(void) {
  setenv("KDAG_CUDA_DRIVER_PATH", KDAG_NULL_DRIVER, 1);
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_CUDA;
  o.completion_ring_capacity = 8; /* full rings too */
  kd_session *s;
  if (kd_session_create(&o, &s)) {
    fprintf(stderr, "kd_session_create: %s\n", kd_last_error());
    return 1;
  }
  if (!kdag_null_api_get(KDAG_NULL_DRIVER, &g_nd)) {
    fprintf(stderr, "the null driver is not loaded\n");
    return 1;
  }
  worker w[WORKERS] = {{s, KD_EXEC_EAGER, 0, 0}, {s, KD_EXEC_GRAPH, 1, 0}, {s, KD_EXEC_AUTO, 2, 0}};
  pthread_t th[WORKERS], ch;
  for (int i = 0; i < WORKERS; ++i)
    if (pthread_create(&th[i], NULL, work, &w[i])) return 1;
  if (pthread_create(&ch, NULL, churn, s)) return 1;
  int rc = 0;
  for (int i = 0; i < WORKERS; ++i) {
    pthread_join(th[i], NULL);
    rc |= w[i].rc;
  }
  pthread_join(ch, NULL);
  rc |= atomic_load(&g_churn_failed);
  /* Whether the threads met a full ring depends on scheduling (most runs
   * do; the count is printed): fill it once more for sure, held, from one
   * thread; the ninth submit waits for the oldest, which that wait reaches. */
  kd_graph *g = NULL;
  kd_tensor t = {0};
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {LEN}};
  static float zeros[LEN];
  if (kd_tensor_from_host(s, &d, zeros, sizeof zeros, &t) || kd_graph_create(s, &g) ||
      kd_graph_op_scale(g, "t*=1", kd_whole(t), 1.0, NULL)) {
    fprintf(stderr, "the full-ring phase: %s\n", kd_last_error());
    rc = 1;
  }
  g_nd.hold(1);
  for (int i = 0; !rc && i < 9; ++i)
    if (kd_graph_submit(g, NULL)) {
      fprintf(stderr, "the full-ring phase, submit %d: %s\n", i, kd_last_error());
      rc = 1;
    }
  g_nd.hold(0);
  kd_graph_destroy(g);
  kd_tensor_release(s, t);
  kd_session_stats k;
  kd_session_stats_get(s, &k);
  kd_session_destroy(s);
  kdag_null_calls c;
  g_nd.calls_get(&c);
  if (c.lifetime_violations || c.device_frees != c.device_allocs || c.exec_destroys != c.graph_instantiations) {
    fprintf(stderr, "violations %llu, device allocations %llu freed %llu, executable graphs %llu destroyed %llu\n",
            (unsigned long long)c.lifetime_violations, (unsigned long long)c.device_allocs,
            (unsigned long long)c.device_frees, (unsigned long long)c.graph_instantiations,
            (unsigned long long)c.exec_destroys);
    rc = 1;
  }
  /* What the run claims to cover happened: GRAPH launches, and a full ring. */
  if (!k.graph_launches || !k.ring_full_waits) {
    fprintf(stderr, "graph launches %llu, full-ring waits %llu: the run did not cover both\n",
            (unsigned long long)k.graph_launches, (unsigned long long)k.ring_full_waits);
    rc = 1;
  }
  printf("tsan_null_driver: %llu submissions (%llu graph launches, %llu full-ring waits) on %d threads: %s\n",
         (unsigned long long)k.submissions, (unsigned long long)k.graph_launches,
         (unsigned long long)k.ring_full_waits, WORKERS, rc ? "FAILED" : "passed");
  return rc;
}
