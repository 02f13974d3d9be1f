/* SPDX-License-Identifier: Apache-2.0 */
/* Suite "hostexec" (CPU): the HOST executor's own cost per node, against
 * StarPU in the same run. N no-op host nodes (tasks):
 *  - chain: each after the one before (one read-write access of one
 *    tensor: each node released by its predecessor's worker),
 *  - independent: no access (N roots at once),
 * as
 *  - kdag: the graph built once, each iteration submits it and waits at
 *    its sink (N + 1 nodes, the sink's included),
 *  - kdag_declare: each iteration declares the graph (kd_graph_create, N
 *    nodes, the sink), submits it, waits and destroys it,
 *  - starpu: each iteration inserts N tasks of a no-op CPU codelet
 *    (starpu_task_insert; the chain's with STARPU_RW on one registered
 *    variable, so StarPU infers the order from the accesses as kdag does)
 *    and waits for all of them. StarPU has no graph to build once and
 *    submit again: its figure is the declare-and-run one. Built when
 *    kdag-bench finds StarPU (Debian's libstarpu-dev); skipped, saying so,
 *    otherwise. Run with STARPU_NCPU=2 on the build machine (its workers
 *    are paused between this case's batches, so they take no core from
 *    the others).
 * Times are per node (task). What is timed is declaring, queueing, waking,
 * dependency counting and completion: the work of the HOST lane's
 * reference runs, which CI and the differential tests rely on. */
#include <stdlib.h>

#include "bench/suites.h"
#include "kdag/kdag.h"

#ifdef KDAG_BENCH_STARPU
#include <starpu.h>
#endif

enum { KIND_KDAG, KIND_KDAG_DECLARE, KIND_STARPU };

typedef struct hostexec_variant {
  int kind;
  int chain;
} hostexec_variant;

typedef struct hostexec_case {
  hostexec_variant v;
  int64_t n;
  kd_session *session;
  kd_tensor t;
  kd_graph *g;
  kd_sink *sink;
  float out;
#ifdef KDAG_BENCH_STARPU
  int starpu;
  starpu_data_handle_t handle;
  float value;
#endif
} hostexec_case;

static void nothing(void *user) { (void)user; }

/* The graph of N no-op host nodes and the sink. */
static kd_status declare(hostexec_case *c) {
  kd_status st = kd_graph_create(c->session, &c->g);
  kd_garg acc = kd_g_inout(kd_whole(c->t));
  for (int64_t i = 0; !st && i < c->n; ++i) st = kd_graph_host(c->g, "node", nothing, NULL, &acc, c->v.chain ? 1 : 0, NULL);
  if (!st) st = kd_graph_sink(c->g, "out", c->t, &c->out, sizeof c->out, &c->sink);
  return st;
}

#ifdef KDAG_BENCH_STARPU
static void starpu_nothing(void *buffers[], void *arg) {
  (void)buffers;
  (void)arg;
}
static struct starpu_codelet chain_codelet = {.cpu_funcs = {starpu_nothing}, .nbuffers = 1, .modes = {STARPU_RW},
                                              .name = "kdag-bench no-op"};
static struct starpu_codelet free_codelet = {.cpu_funcs = {starpu_nothing}, .nbuffers = 0, .name = "kdag-bench no-op"};

/* StarPU is initialized once for every case that uses it (cases may be
 * set up side by side) and kept paused between batches: its pause is a
 * depth, so one pause stands for all of them. Cases run one at a time. */
static int starpu_users;

static int starpu_acquire(void) {
  if (starpu_users == 0) {
    setenv("STARPU_SILENT", "1", 0);
    if (starpu_init(NULL) != 0) return -1;
    starpu_pause(); /* between batches: its workers take no core from the other cases */
  }
  starpu_users++;
  return 0;
}

static void starpu_release(starpu_data_handle_t handle) {
  starpu_resume();
  starpu_data_unregister(handle);
  if (--starpu_users == 0) starpu_shutdown();
  else starpu_pause();
}
#endif

static void hostexec_free(hostexec_case *c) {
  if (!c) return;
#ifdef KDAG_BENCH_STARPU
  if (c->starpu) starpu_release(c->handle);
#endif
  kd_graph_destroy(c->g);
  kd_session_destroy(c->session);
  free(c);
}

static kb_status hostexec_setup(kb_run *run, void **state) {
  hostexec_case *c = calloc(1, sizeof *c);
  if (!c) return kb_run_fail(run, "out of memory");
  c->v = *(const hostexec_variant *)kb_run_user(run);
  c->n = kb_run_axis(run, "N", 1000);
  if (c->v.kind == KIND_STARPU) {
#ifdef KDAG_BENCH_STARPU
    if (starpu_acquire()) {
      free(c);
      return kb_run_fail(run, "starpu_init failed");
    }
    c->starpu = 1;
    starpu_variable_data_register(&c->handle, STARPU_MAIN_RAM, (uintptr_t)&c->value, sizeof c->value);
    kb_run_per_iteration(run, (double)c->n, "node");
    *state = c;
    return KB_OK;
#else
    free(c);
    return kb_run_skip(run, "kdag-bench was built without StarPU (install libstarpu-dev and configure again)");
#endif
  }
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  float zero = 0;
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {1}};
  kd_status st = kd_session_create(&o, &c->session);
  if (!st) st = kd_tensor_from_host(c->session, &d, &zero, sizeof zero, &c->t);
  if (!st && c->v.kind == KIND_KDAG) st = declare(c);
  if (st) {
    kb_status r = kb_run_fail(run, "kdag: %s", kd_last_error());
    hostexec_free(c);
    return r;
  }
  kb_run_per_iteration(run, (double)(c->n + 1), "node"); /* the sink is a node too */
  *state = c;
  return KB_OK;
}

static kb_status hostexec_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  hostexec_case *c = state;
  out->gpu_ns = -1;
#ifdef KDAG_BENCH_STARPU
  if (c->starpu) {
    starpu_resume();
    uint64_t t0 = kb_now_ns();
    for (uint64_t it = 0; it < iterations; ++it) {
      for (int64_t i = 0; i < c->n; ++i) {
        int r = c->v.chain ? starpu_task_insert(&chain_codelet, STARPU_RW, c->handle, 0)
                           : starpu_task_insert(&free_codelet, 0);
        if (r) {
          starpu_task_wait_for_all();
          starpu_pause();
          return kb_run_fail(run, "starpu_task_insert: %d", r);
        }
      }
      starpu_task_wait_for_all();
    }
    out->host_ns = (double)(kb_now_ns() - t0);
    starpu_pause();
    return KB_OK;
  }
#endif
  uint64_t t0 = kb_now_ns();
  for (uint64_t it = 0; it < iterations; ++it) {
    if (c->v.kind == KIND_KDAG_DECLARE && declare(c)) return kb_run_fail(run, "kdag: %s", kd_last_error());
    if (kd_graph_submit(c->g, NULL) || kd_sink_wait(c->sink)) return kb_run_fail(run, "kdag: %s", kd_last_error());
    if (c->v.kind == KIND_KDAG_DECLARE) {
      kd_graph_destroy(c->g);
      c->g = NULL;
    }
  }
  out->host_ns = (double)(kb_now_ns() - t0);
  return KB_OK;
}

static void hostexec_teardown(kb_run *run, void *state) {
  (void)run;
  hostexec_free(state);
}

int kb_register_hostexec_suite(kb_harness *h) {
  kb_suite_desc sd = {.name = "hostexec",
                      .description = "the HOST executor's cost per node: N no-op host nodes, chained or "
                                     "independent, run (graph built once) and declared and run, against StarPU",
                      .interleave = 1};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  static const int64_t n[] = {100, 10000, 100000};
  static const hostexec_variant v[] = {{KIND_KDAG, 1},   {KIND_KDAG_DECLARE, 1}, {KIND_STARPU, 1},
                                       {KIND_KDAG, 0},   {KIND_KDAG_DECLARE, 0}, {KIND_STARPU, 0}};
  static const char *const names[] = {"chain_kdag", "chain_kdag_declare", "chain_starpu",
                                      "independent_kdag", "independent_kdag_declare", "independent_starpu"};
  static const char *const what[] = {
      "each node after the one before (one inout access): submit and sink-wait a graph built once",
      "the same, the graph declared, submitted, waited for and destroyed each iteration",
      "StarPU: N tasks inserted with STARPU_RW on one variable, then starpu_task_wait_for_all",
      "no access (N roots): submit and sink-wait a graph built once",
      "the same, declared, submitted, waited for and destroyed each iteration",
      "StarPU: N tasks without data inserted, then starpu_task_wait_for_all"};
  if (kb_suite_axis(s, "N", n, 3)) return -1;
  for (size_t i = 0; i < sizeof v / sizeof v[0]; ++i) {
    kb_case_desc d = {.name = names[i], .description = what[i], .baseline = v[i].kind == KIND_STARPU,
                      .setup = hostexec_setup, .batch = hostexec_batch, .teardown = hostexec_teardown,
                      .user = (void *)&v[i]};
    if (kb_case_add(s, &d)) return -1;
  }
  return 0;
}
