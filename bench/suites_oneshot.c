/* SPDX-License-Identifier: Apache-2.0 */
/* Suite "oneshot" (issue 5): a graph used once. One iteration is the whole
 * life of a graph of N nodes: kd_graph_create, N kd_graph_kernel calls (a
 * chain through one INOUT access each, x += 1 on 256 floats: the order is
 * inferred), kd_graph_submit (planning, and in GRAPH mode building and
 * instantiating the CUDA graph, then the launch), a wait for the session
 * stream, and kd_graph_destroy. Host (wall) time per node, over N, so that
 * linearity shows: a flat time per node across N is linear.
 *   kdag_eager  a session with exec_mode EAGER
 *   hand_graph  the same chain with the driver's cuGraph* calls alone
 *   kdag_graph  a session with exec_mode GRAPH
 * For reference only (a literature figure, not measured here): CUDASTF's
 * graph_ctx is reported at about 28 us per task at N = 1000 on an H200. */
#include <stdio.h>
#include <stdlib.h>

#include "bench/gpu.h"
#include "bench/kdag_session.h"
#include "bench/suites.h"
#include "kdag/kdag.h"
#include "kernels/embedded.h"

#define ONESHOT_ELEMS 256

static kb_status oneshot_init(kb_harness *h, void *user, void **state, char *why, size_t cap) {
  (void)user, (void)state;
  kb_gpu *g;
  return kb_gpu_acquire_described(h, &g, why, cap);
}

static kb_status oneshot_flush(void *state, char *why, size_t cap) {
  (void)state;
  kb_gpu *g;
  kb_status st = kb_gpu_acquire(&g, why, cap);
  return st ? st : kb_gpu_flush_l2(g, why, cap);
}

/* Where a one-shot graph's time goes, summed over the batches' graphs
 * (warm-up included) and printed per node at teardown (stderr): what grows
 * with N shows. */
enum { PH_DECLARE, PH_SUBMIT, PH_WAIT, PH_DESTROY, PH_COUNT };
static const char *const phase_name[PH_COUNT] = {"declare", "submit", "wait", "destroy"};

typedef struct oneshot {
  kb_kdag k;
  kd_function fn;
  kd_tensor x;
  int timing;              /* the batch's graphs add to phase_ns */
  double phase_ns[PH_COUNT];
  uint64_t phase_nodes;
} oneshot;

static int64_t node_count(kb_run *run) { return kb_run_axis(run, "N", 1000); }

/* The phase breakdown on stderr, per node, once a case has timed graphs. */
static void print_phases(kb_run *run, const char *const *names, const double *ns, int count, uint64_t nodes) {
  if (!nodes) return;
  fprintf(stderr, "kdag-bench oneshot %s N=%lld: per node", kb_run_case_name(run), (long long)node_count(run));
  for (int i = 0; i < count; ++i) fprintf(stderr, " %s %.3f us", names[i], ns[i] / 1e3 / (double)nodes);
  fputc('\n', stderr);
}

static void oneshot_teardown(kb_run *run, void *state) {
  oneshot *o = state;
  if (!o) return;
  print_phases(run, phase_name, o->phase_ns, PH_COUNT, o->phase_nodes);
  kb_kdag_close(&o->k); /* also frees the tensor */
  free(o);
}

/* One graph's life, nodes nodes long. Returns KD_OK or kdag's status
 * (message in kd_last_error). */
static kb_status one_graph(kb_run *run, oneshot *o, int64_t nodes, kd_session_stats *before, kd_session_stats *after) {
  kb_status st;
  kd_graph *g = NULL;
  kd_launch_config config = {{1, 1, 1}, {ONESHOT_ELEMS, 1, 1}, 0, 0};
  kd_garg args[] = {kd_g_inout(kd_whole(o->x)), kd_g_value(kd_arg_i32(ONESHOT_ELEMS))};
  uint64_t t[PH_COUNT + 1];
  t[0] = kb_now_ns();
  if (kd_graph_create(o->k.session, &g)) return kb_run_fail(run, "kd_graph_create: %s", kd_last_error());
  for (int64_t i = 0; i < nodes; ++i)
    if (kd_graph_kernel(g, "inc", o->fn, &config, args, 2, NULL)) {
      st = kb_run_fail(run, "kd_graph_kernel: %s", kd_last_error());
      kd_graph_destroy(g);
      return st;
    }
  if (before && (st = kb_kdag_counters(run, &o->k, before))) {
    kd_graph_destroy(g);
    return st;
  }
  t[1] = kb_now_ns();
  if (kd_graph_submit(g, NULL)) {
    st = kb_run_fail(run, "kd_graph_submit: %s", kd_last_error());
    kd_graph_destroy(g);
    return st;
  }
  t[2] = kb_now_ns();
  st = kb_kdag_wait(run, &o->k);
  t[3] = kb_now_ns();
  if (!st && after) st = kb_kdag_counters(run, &o->k, after);
  kd_graph_destroy(g);
  t[4] = kb_now_ns();
  if (!st && o->timing) {
    for (int i = 0; i < PH_COUNT; ++i) o->phase_ns[i] += (double)(t[i + 1] - t[i]);
    o->phase_nodes += (uint64_t)nodes;
  }
  return st;
}

/* Checks N and declares an iteration as N nodes. */
static kb_status declare_nodes(kb_run *run) {
  int64_t n = node_count(run);
  if (n < 1 || n > 10000000) return kb_run_fail(run, "N must be in 1..10000000, not %lld", (long long)n);
  kb_run_per_iteration(run, (double)n, "node");
  kb_run_throughput(run, (double)n, 0);
  return KB_OK;
}

static kb_status oneshot_setup(kb_run *run, void **state) {
  if (declare_nodes(run)) return KB_FAIL;
  oneshot *o = calloc(1, sizeof *o);
  if (!o) return kb_run_fail(run, "out of memory");
  kb_status st;
  static const float zeros[ONESHOT_ELEMS];
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {ONESHOT_ELEMS}};
  if ((st = kb_kdag_open(run, *(const kd_exec_mode *)kb_run_user(run), &o->k)) ||
      (st = kb_kdag_function(run, &o->k, kd_kernel_bench_cubin, kd_kernel_bench_cubin_size, kd_kernel_bench_ptx,
                             kd_kernel_bench_ptx_size, "bench_inc_kernel", &o->fn)))
    goto fail;
  if (kd_tensor_from_host(o->k.session, &d, zeros, sizeof zeros, &o->x)) {
    st = kb_run_fail(run, "kd_tensor_from_host: %s", kd_last_error());
    goto fail;
  }
  /* A small graph first, outside the timing: it loads what a first
   * submission loads, and shows whether GRAPH mode really ran. */
  kd_session_stats before, after;
  if ((st = one_graph(run, o, 10, &before, &after)) || (st = kb_kdag_check_mode(run, &o->k, &before, &after)))
    goto fail;
  *state = o;
  return KB_OK;
fail:
  oneshot_teardown(run, o);
  return st;
}

static kb_status oneshot_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  oneshot *o = state;
  int64_t n = node_count(run);
  uint64_t t0 = kb_now_ns();
  o->timing = 1;
  for (uint64_t it = 0; it < iterations; ++it) {
    kb_status st = one_graph(run, o, n, NULL, NULL);
    if (st) return st;
  }
  out->host_ns = (double)(kb_now_ns() - t0);
  out->gpu_ns = -1; /* the figure is the wall time of the whole cycle */
  return KB_OK;
}

/* ---- hand_graph: the driver's own floor ---------------------------------
 * The same chain written straight against the driver, once per iteration:
 * cuGraphCreate, N cuGraphAddKernelNode (each after the one before),
 * cuGraphInstantiateWithFlags, cuGraphLaunch, cuStreamSynchronize,
 * cuGraphExecDestroy, cuGraphDestroy. What kdag_graph costs above it is
 * kdag's; what grows with N here is the driver's. */
enum { HP_BUILD, HP_INSTANTIATE, HP_RUN, HP_DESTROY, HP_COUNT };
static const char *const hand_phase[HP_COUNT] = {"build", "instantiate", "launch+wait", "destroy"};

typedef struct hand_oneshot {
  kb_gpu *g;
  CUmodule module;
  CUfunction fn;
  CUdeviceptr x;
  CUgraphNode *nodes;
  double phase_ns[HP_COUNT];
  uint64_t phase_nodes;
} hand_oneshot;

static void hand_teardown(kb_run *run, void *state) {
  hand_oneshot *o = state;
  if (!o) return;
  print_phases(run, hand_phase, o->phase_ns, HP_COUNT, o->phase_nodes);
  if (o->x) o->g->cu->cuMemFree(o->x);
  if (o->module) o->g->cu->cuModuleUnload(o->module);
  free(o->nodes);
  free(o);
}

static kb_status hand_setup(kb_run *run, void **state) {
  if (declare_nodes(run)) return KB_FAIL;
  int64_t n = node_count(run);
  hand_oneshot *o = calloc(1, sizeof *o);
  if (!o || !(o->nodes = malloc((size_t)n * sizeof *o->nodes))) {
    free(o);
    return kb_run_fail(run, "out of memory");
  }
  char why[512];
  kb_status st = kb_gpu_acquire(&o->g, why, sizeof why);
  if (!st) st = kb_gpu_load_module(o->g, kd_kernel_bench_cubin, kd_kernel_bench_ptx, &o->module, why, sizeof why);
  if (st) {
    hand_teardown(run, o);
    return kb_run_fail(run, "%s", why);
  }
  if ((st = kb_gpu_check(run, o->g->cu->cuModuleGetFunction(&o->fn, o->module, "bench_inc_kernel"),
                         "cuModuleGetFunction")) ||
      (st = kb_gpu_check(run, o->g->cu->cuMemAlloc(&o->x, ONESHOT_ELEMS * sizeof(float)), "cuMemAlloc"))) {
    hand_teardown(run, o);
    return st;
  }
  *state = o;
  return KB_OK;
}

static kb_status hand_one(kb_run *run, hand_oneshot *o, int64_t n) {
  const kd_cu_table *cu = o->g->cu;
  int elems = ONESHOT_ELEMS;
  void *params[] = {&o->x, &elems};
  CUDA_KERNEL_NODE_PARAMS p = {0};
  p.func = o->fn;
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = ONESHOT_ELEMS;
  p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = params;
  CUgraph graph = NULL;
  CUgraphExec exec = NULL;
  uint64_t t[HP_COUNT + 1];
  t[0] = kb_now_ns();
  kb_status st = kb_gpu_check(run, cu->cuGraphCreate(&graph, 0), "cuGraphCreate");
  for (int64_t i = 0; !st && i < n; ++i)
    st = kb_gpu_check(run, cu->cuGraphAddKernelNode(&o->nodes[i], graph, i ? &o->nodes[i - 1] : NULL, i ? 1 : 0, &p),
                      "cuGraphAddKernelNode");
  t[1] = kb_now_ns();
  if (!st) st = kb_gpu_instantiate(o->g, run, graph, 0, &exec);
  t[2] = kb_now_ns();
  if (!st) st = kb_gpu_check(run, cu->cuGraphLaunch(exec, o->g->stream), "cuGraphLaunch");
  if (!st) st = kb_gpu_check(run, cu->cuStreamSynchronize(o->g->stream), "cuStreamSynchronize");
  t[3] = kb_now_ns();
  if (exec) cu->cuGraphExecDestroy(exec);
  if (graph) cu->cuGraphDestroy(graph);
  t[4] = kb_now_ns();
  if (!st) {
    for (int i = 0; i < HP_COUNT; ++i) o->phase_ns[i] += (double)(t[i + 1] - t[i]);
    o->phase_nodes += (uint64_t)n;
  }
  return st;
}

static kb_status hand_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  hand_oneshot *o = state;
  int64_t n = node_count(run);
  uint64_t t0 = kb_now_ns();
  for (uint64_t it = 0; it < iterations; ++it) {
    kb_status st = hand_one(run, o, n);
    if (st) return st;
  }
  out->host_ns = (double)(kb_now_ns() - t0);
  out->gpu_ns = -1;
  return KB_OK;
}

int kb_register_oneshot_suite(kb_harness *h) {
  kb_suite_desc sd = {.name = "oneshot",
                      .description = "a graph used once: create, N nodes (inferred chain), submit, wait, "
                                     "destroy; wall time per node (literature, not measured: CUDASTF "
                                     "graph_ctx ~28 us per task at N=1000 on an H200)",
                      .needs_gpu = 1, .init = oneshot_init, .flush = oneshot_flush, .interleave = 1};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  static const int64_t n[] = {10, 100, 1000, 10000};
  static const kd_exec_mode eager = KD_EXEC_EAGER, graph_mode = KD_EXEC_GRAPH;
  kb_case_desc keager = {.name = "kdag_eager", .description = "one-shot graph on an EAGER session",
                         .baseline = 1, .setup = oneshot_setup, .batch = oneshot_batch,
                         .teardown = oneshot_teardown, .user = (void *)&eager};
  kb_case_desc kgraph = {.name = "kdag_graph",
                         .description = "one-shot graph on a GRAPH session (instantiation included)",
                         .setup = oneshot_setup, .batch = oneshot_batch, .teardown = oneshot_teardown,
                         .user = (void *)&graph_mode};
  kb_case_desc hand = {.name = "hand_graph",
                       .description = "the chain built, instantiated, launched, waited for and destroyed with "
                                      "the driver's cuGraph* calls alone: the floor under kdag_graph",
                       .baseline = 1, .setup = hand_setup, .batch = hand_batch, .teardown = hand_teardown};
  if (kb_suite_axis(s, "N", n, 4) || kb_case_add(s, &keager) || kb_case_add(s, &hand) || kb_case_add(s, &kgraph))
    return -1;
  return 0;
}
