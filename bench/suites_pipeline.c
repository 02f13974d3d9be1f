/* SPDX-License-Identifier: Apache-2.0 */
/* Suite "pipeline": a bandwidth-bound kdag graph of 4 elementwise stages
 * over 2^log2n floats (default 2^26, 256 MiB per tensor), built from kdag's
 * built-in kernels:
 *   y = 0.5 y        kd_graph_op_scale   reads y, writes y      2 x bytes
 *   y = y + 1.0 x    kd_graph_op_axpy    reads x, y, writes y   3 x bytes
 *   z = x + y        kd_graph_op_add     reads x, y, writes z   3 x bytes
 *   z = 0.5 z        kd_graph_op_scale   reads z, writes z      2 x bytes
 * so 10 tensor sizes of traffic per submission, declared as the case's
 * bytes; bytes/s and, when the run also has the copy suite (its d2d_copy is
 * the bandwidth reference), bandwidth_share against that copy measured in
 * the same run: run it as --suite copy,pipeline. The values stay bounded
 * (y tends to 2x) however often the graph runs.
 *   kdag_eager  a session with exec_mode EAGER
 *   kdag_graph  a session with exec_mode GRAPH */
#include <stdlib.h>

#include "bench/gpu.h"
#include "bench/kdag_session.h"
#include "bench/suites.h"
#include "kdag/kdag.h"

#define PIPELINE_STAGE_TRAFFIC 10 /* tensor sizes read + written per submission */

static kb_status pipeline_init(kb_harness *h, void *user, void **state, char *why, size_t cap) {
  (void)user, (void)state;
  kb_gpu *g;
  kb_status st = kb_gpu_acquire(&g, why, cap);
  if (st == KB_OK) kb_gpu_describe(g, kb_harness_machine(h));
  return st;
}

static kb_status pipeline_flush(void *state, char *why, size_t cap) {
  (void)state;
  kb_gpu *g;
  kb_status st = kb_gpu_acquire(&g, why, cap);
  return st ? st : kb_gpu_flush_l2(g, why, cap);
}

typedef struct pipeline {
  kb_kdag k;
  kd_graph *graph;
} pipeline;

static void pipeline_teardown(kb_run *run, void *state) {
  (void)run;
  pipeline *p = state;
  if (!p) return;
  kd_graph_destroy(p->graph);
  kb_kdag_close(&p->k); /* also frees the tensors */
  free(p);
}

static kb_status pipeline_setup(kb_run *run, void **state) {
  int64_t log2n = kb_run_axis(run, "log2n", 26);
  if (log2n < 10 || log2n > 32) return kb_run_fail(run, "log2n must be in 10..32, not %lld", (long long)log2n);
  int64_t n = (int64_t)1 << log2n;
  double bytes = (double)n * sizeof(float);
  kb_run_per_iteration(run, 1, "submission");
  kb_run_throughput(run, 0, PIPELINE_STAGE_TRAFFIC * bytes);
  pipeline *p = calloc(1, sizeof *p);
  if (!p) return kb_run_fail(run, "out of memory");
  kb_status st = kb_kdag_open(run, *(const kd_exec_mode *)kb_run_user(run), &p->k);
  if (st) goto fail;
  kd_session *session = p->k.session;
  kd_tensor x, y, z;
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {n}};
  const float one = 1.0f, two = 2.0f;
  kd_graph *init = NULL;
  /* x = 1, y = 2 by a graph of its own, submitted once: the pipeline then
   * reads initialised tensors and its own traffic is only its 4 stages. */
  if (kd_tensor_create(session, &d, &x) || kd_tensor_create(session, &d, &y) ||
      kd_tensor_create(session, &d, &z) || kd_graph_create(session, &init) ||
      kd_graph_op_fill(init, "x=1", kd_whole(x), &one, NULL) || kd_graph_op_fill(init, "y=2", kd_whole(y), &two, NULL) ||
      kd_graph_submit(init, NULL)) {
    st = kb_run_fail(run, "kdag: %s", kd_last_error());
    kd_graph_destroy(init);
    goto fail;
  }
  kd_graph_destroy(init);
  if ((st = kb_kdag_wait(run, &p->k))) goto fail;
  if (kd_graph_create(session, &p->graph) || kd_graph_op_scale(p->graph, "y*=0.5", kd_whole(y), 0.5, NULL) ||
      kd_graph_op_axpy(p->graph, "y+=x", kd_whole(y), kd_whole(x), 1.0, NULL) ||
      kd_graph_op_add(p->graph, "z=x+y", kd_whole(z), kd_whole(x), kd_whole(y), NULL) ||
      kd_graph_op_scale(p->graph, "z*=0.5", kd_whole(z), 0.5, NULL)) {
    st = kb_run_fail(run, "kdag: %s", kd_last_error());
    goto fail;
  }
  if ((st = kb_kdag_preflight(run, &p->k, p->graph))) goto fail;
  *state = p;
  return KB_OK;
fail:
  pipeline_teardown(run, p);
  return st;
}

static kb_status pipeline_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  pipeline *p = state;
  return kb_kdag_submit_batch(run, &p->k, p->graph, iterations, out);
}

int kb_register_pipeline_suite(kb_harness *h) {
  kb_suite_desc sd = {.name = "pipeline",
                      .description = "4 elementwise built-in stages (scale, axpy, add, scale) over 2^log2n "
                                     "floats: bytes/s and share of d2d_copy (run with the copy suite)",
                      .needs_gpu = 1, .init = pipeline_init, .flush = pipeline_flush, .interleave = 1};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  static const int64_t log2n[] = {26};
  static const kd_exec_mode eager = KD_EXEC_EAGER, graph_mode = KD_EXEC_GRAPH;
  kb_case_desc keager = {.name = "kdag_eager", .description = "the 4-stage graph on an EAGER session",
                         .baseline = 1, .setup = pipeline_setup, .batch = pipeline_batch,
                         .teardown = pipeline_teardown, .user = (void *)&eager};
  kb_case_desc kgraph = {.name = "kdag_graph", .description = "the 4-stage graph on a GRAPH session",
                         .setup = pipeline_setup, .batch = pipeline_batch, .teardown = pipeline_teardown,
                         .user = (void *)&graph_mode};
  if (kb_suite_axis(s, "log2n", log2n, 1) || kb_case_add(s, &keager) || kb_case_add(s, &kgraph)) return -1;
  return 0;
}
