/* SPDX-License-Identifier: Apache-2.0 */
/* Suite "hostexec" (CPU): the HOST executor's own cost per node. A graph
 * of N no-op host nodes is built once and each iteration submits it and
 * waits at its sink (times are per node of the N + 1, the sink's included): "chain" orders every node after the one before (one
 * inout access of one tensor: each node released by its predecessor's
 * worker), "independent" declares no access (N roots queued at once, more
 * than the pool's ring holds at N = 10000). What is timed is queueing,
 * waking, dependency counting and completion: the work of the HOST lane's
 * reference runs, which CI and the differential tests rely on. */
#include <stdlib.h>

#include "bench/suites.h"
#include "kdag/kdag.h"

typedef struct hostexec_case {
  kd_session *session;
  kd_tensor t;
  kd_graph *g;
  kd_sink *sink;
  float out;
} hostexec_case;

static void nothing(void *user) { (void)user; }

static void hostexec_free(hostexec_case *c) {
  if (!c) return;
  kd_graph_destroy(c->g);
  kd_session_destroy(c->session);
  free(c);
}

static kb_status setup(kb_run *run, void **state, int chain) {
  int64_t n = kb_run_axis(run, "N", 1000);
  hostexec_case *c = calloc(1, sizeof *c);
  if (!c) return kb_run_fail(run, "out of memory");
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  float zero = 0;
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {1}};
  kd_status st = kd_session_create(&o, &c->session);
  if (!st) st = kd_tensor_from_host(c->session, &d, &zero, sizeof zero, &c->t);
  if (!st) st = kd_graph_create(c->session, &c->g);
  kd_garg acc = kd_g_inout(kd_whole(c->t));
  for (int64_t i = 0; !st && i < n; ++i) st = kd_graph_host(c->g, "node", nothing, NULL, &acc, chain ? 1 : 0, NULL);
  if (!st) st = kd_graph_sink(c->g, "out", c->t, &c->out, sizeof c->out, &c->sink);
  if (!st) st = kd_tensor_release(c->session, c->t); /* the graph holds it */
  if (st) {
    kb_status r = kb_run_fail(run, "kdag: %s", kd_last_error());
    hostexec_free(c);
    return r;
  }
  kb_run_per_iteration(run, (double)(n + 1), "node"); /* the sink is a node too */
  *state = c;
  return KB_OK;
}

static kb_status chain_setup(kb_run *run, void **state) { return setup(run, state, 1); }
static kb_status independent_setup(kb_run *run, void **state) { return setup(run, state, 0); }

static kb_status batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  hostexec_case *c = state;
  out->gpu_ns = -1;
  uint64_t t0 = kb_now_ns();
  for (uint64_t it = 0; it < iterations; ++it)
    if (kd_graph_submit(c->g, NULL) || kd_sink_wait(c->sink)) return kb_run_fail(run, "kdag: %s", kd_last_error());
  out->host_ns = (double)(kb_now_ns() - t0);
  return KB_OK;
}

static void teardown(kb_run *run, void *state) {
  (void)run;
  hostexec_free(state);
}

int kb_register_hostexec_suite(kb_harness *h) {
  kb_suite_desc sd = {.name = "hostexec",
                      .description = "the HOST executor's cost per node: submit and sink-wait a graph of N no-op "
                                     "host nodes"};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  static const int64_t n[] = {100, 10000};
  kb_case_desc chain = {.name = "chain", .description = "each node after the one before (one inout access)",
                        .setup = chain_setup, .batch = batch, .teardown = teardown};
  kb_case_desc independent = {.name = "independent",
                              .description = "no access: N roots queued at once (past the pool's ring at 10000)",
                              .setup = independent_setup, .batch = batch, .teardown = teardown};
  if (kb_suite_axis(s, "N", n, 2) || kb_case_add(s, &chain) || kb_case_add(s, &independent)) return -1;
  return 0;
}
