/* Suite "launch": a chain of N empty kernels per submission, launched
 * directly (raw_loop) or as a CUDA graph built by hand with the driver's
 * cuGraph* calls (hand_graph). Both record one completion event per
 * submission, as kdag does; the GPU time comes from events around a batch. */
#include <stdlib.h>

#include "bench/gpu.h"
#include "bench/suites.h"
#include "kdag/kdag.h"
#include "kernels/embedded.h"

typedef struct launch_suite {
  kb_gpu *g;
  CUmodule module;
  CUfunction empty;
  CUevent done; /* the per-submission completion event */
} launch_suite;

static kb_status launch_init(kb_harness *h, void *user, void **state, char *why, size_t cap) {
  (void)user;
  kb_gpu *g;
  kb_status st = kb_gpu_acquire(&g, why, cap);
  if (st != KB_OK) return st;
  kb_gpu_describe(g, kb_harness_machine(h));
  launch_suite *s = calloc(1, sizeof *s);
  if (!s) return snprintf(why, cap, "out of memory"), KB_FAIL;
  s->g = g;
  const kd_cu_table *cu = g->cu;
  /* The embedded CUBIN targets KDAG_CUDA_ARCH; another GPU JITs the PTX. */
  CUresult r = cu->cuModuleLoadDataEx(&s->module, kd_kernel_test_cubin, 0, NULL, NULL);
  if (r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE)
    r = cu->cuModuleLoadDataEx(&s->module, kd_kernel_test_ptx, 0, NULL, NULL);
  if ((st = kb_gpu_check_msg(why, cap, r, "cuModuleLoadDataEx(test kernels)")) ||
      (st = kb_gpu_check_msg(why, cap, cu->cuModuleGetFunction(&s->empty, s->module, "empty_kernel"),
                             "cuModuleGetFunction(empty_kernel)")) ||
      (st = kb_gpu_check_msg(why, cap, cu->cuEventCreate(&s->done, CU_EVENT_DISABLE_TIMING),
                             "cuEventCreate(done)"))) {
    if (s->module) cu->cuModuleUnload(s->module);
    free(s);
    return st;
  }
  *state = s;
  return KB_OK;
}

static void launch_fini(void *state) {
  launch_suite *s = state;
  if (!s) return;
  const kd_cu_table *cu = s->g->cu;
  cu->cuCtxSetCurrent(s->g->context);
  cu->cuStreamSynchronize(s->g->stream);
  cu->cuEventDestroy(s->done);
  cu->cuModuleUnload(s->module);
  free(s);
}

static kb_status launch_flush(void *state, char *why, size_t cap) {
  return kb_gpu_flush_l2(((launch_suite *)state)->g, why, cap);
}

static int64_t chain_length(kb_run *run) { return kb_run_axis(run, "N", 10); }

static kb_status declare(kb_run *run) {
  int64_t n = chain_length(run);
  if (n < 1) return kb_run_fail(run, "N must be at least 1, not %lld", (long long)n);
  kb_run_per_iteration(run, (double)n, "node");
  kb_run_throughput(run, (double)n, 0);
  return KB_OK;
}

/* ---- raw_loop ----------------------------------------------------------- */

static kb_status raw_setup(kb_run *run, void **state) {
  (void)state;
  return declare(run);
}

static kb_status raw_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  (void)state;
  launch_suite *s = kb_run_suite_state(run);
  const kd_cu_table *cu = s->g->cu;
  CUstream stream = s->g->stream;
  int64_t n = chain_length(run);
  uint64_t t0 = kb_now_ns();
  kb_status st = kb_gpu_batch_begin(s->g, run);
  if (st) return st;
  for (uint64_t it = 0; it < iterations; ++it) {
    for (int64_t i = 0; i < n; ++i) {
      CUresult r = cu->cuLaunchKernel(s->empty, 1, 1, 1, 1, 1, 1, 0, stream, NULL, NULL);
      if (r != CUDA_SUCCESS) return kb_gpu_check(run, r, "cuLaunchKernel(empty_kernel)");
    }
    CUresult r = cu->cuEventRecord(s->done, stream);
    if (r != CUDA_SUCCESS) return kb_gpu_check(run, r, "cuEventRecord(done)");
  }
  return kb_gpu_batch_end(s->g, run, t0, out);
}

/* ---- hand_graph --------------------------------------------------------- */

typedef struct hand_graph {
  CUgraph graph;
  CUgraphExec exec;
} hand_graph;

static void graph_teardown(kb_run *run, void *state) {
  hand_graph *hg = state;
  if (!hg) return;
  launch_suite *s = kb_run_suite_state(run);
  const kd_cu_table *cu = s->g->cu;
  cu->cuStreamSynchronize(s->g->stream);
  if (hg->exec) cu->cuGraphExecDestroy(hg->exec);
  if (hg->graph) cu->cuGraphDestroy(hg->graph);
  free(hg);
}

/* Builds the chain once (outside the timing): node i depends on node i-1,
 * then instantiates it. Every sample launches the same executable graph. */
static kb_status graph_setup(kb_run *run, void **state) {
  kb_status st = declare(run);
  if (st) return st;
  launch_suite *s = kb_run_suite_state(run);
  const kd_cu_table *cu = s->g->cu;
  hand_graph *hg = calloc(1, sizeof *hg);
  if (!hg) return kb_run_fail(run, "out of memory");
  *state = hg;
  if ((st = kb_gpu_check(run, cu->cuGraphCreate(&hg->graph, 0), "cuGraphCreate"))) goto fail;
  CUDA_KERNEL_NODE_PARAMS p = {0};
  p.func = s->empty;
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = p.blockDimY = p.blockDimZ = 1;
  CUgraphNode prev = NULL;
  for (int64_t i = 0, n = chain_length(run); i < n; ++i) {
    CUgraphNode node;
    CUresult r = cu->cuGraphAddKernelNode(&node, hg->graph, prev ? &prev : NULL, prev ? 1 : 0, &p);
    if ((st = kb_gpu_check(run, r, "cuGraphAddKernelNode"))) goto fail;
    prev = node;
  }
  if ((st = kb_gpu_check(run, cu->cuGraphInstantiateWithFlags(&hg->exec, hg->graph, 0),
                         "cuGraphInstantiateWithFlags")))
    goto fail;
  return KB_OK;
fail:
  graph_teardown(run, hg);
  *state = NULL;
  return st;
}

static kb_status graph_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  hand_graph *hg = state;
  launch_suite *s = kb_run_suite_state(run);
  const kd_cu_table *cu = s->g->cu;
  CUstream stream = s->g->stream;
  uint64_t t0 = kb_now_ns();
  kb_status st = kb_gpu_batch_begin(s->g, run);
  if (st) return st;
  for (uint64_t it = 0; it < iterations; ++it) {
    CUresult r = cu->cuGraphLaunch(hg->exec, stream);
    if (r != CUDA_SUCCESS) return kb_gpu_check(run, r, "cuGraphLaunch");
    r = cu->cuEventRecord(s->done, stream);
    if (r != CUDA_SUCCESS) return kb_gpu_check(run, r, "cuEventRecord(done)");
  }
  return kb_gpu_batch_end(s->g, run, t0, out);
}

/* ---- kdag_eager ---------------------------------------------------------- */

/* The same chain as a kdag graph of N kernel nodes, submitted EAGER on a
 * kdag session (its own stream, same primary context). GPU time comes from
 * events recorded on the session stream inside raw scopes. */
typedef struct eager {
  kd_session *session;
  kd_graph *graph;
  CUevent start, stop;
} eager;

typedef struct stream_event {
  const kd_cu_table *cu;
  CUevent event;
  CUresult result;
} stream_event;

static kd_status record_on_session(kd_raw *raw, void *user) {
  stream_event *e = user;
  void *stream = NULL;
  kd_status st = kd_raw_stream(raw, &stream);
  if (st) return st;
  e->result = e->cu->cuEventRecord(e->event, (CUstream)stream);
  return KD_OK;
}

static kd_status load_empty(kd_raw *raw, void *user) {
  kd_module m;
  kd_status st = kd_raw_load_image(raw, kd_kernel_test_cubin, kd_kernel_test_cubin_size, &m);
  if (st == KD_ERR_NO_BINARY_FOR_GPU)
    st = kd_raw_load_ptx(raw, (const char *)kd_kernel_test_ptx, kd_kernel_test_ptx_size, &m);
  if (!st) st = kd_module_function(kd_raw_session(raw), m, "empty_kernel", user);
  return st;
}

static void eager_teardown(kb_run *run, void *state) {
  eager *e = state;
  if (!e) return;
  launch_suite *s = kb_run_suite_state(run);
  kd_graph_destroy(e->graph);
  kd_session_destroy(e->session);
  if (e->start) s->g->cu->cuEventDestroy(e->start);
  if (e->stop) s->g->cu->cuEventDestroy(e->stop);
  free(e);
}

static kb_status eager_setup(kb_run *run, void **state) {
  kb_status st = declare(run);
  if (st) return st;
  launch_suite *s = kb_run_suite_state(run);
  eager *e = calloc(1, sizeof *e);
  if (!e) return kb_run_fail(run, "out of memory");
  *state = e;
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_CUDA;
  kd_function fn;
  kd_launch_config one = {{1, 1, 1}, {1, 1, 1}, 0};
  if (kd_session_create(&o, &e->session) || kd_with_raw(e->session, "bench.load", load_empty, &fn) ||
      kd_graph_create(e->session, &e->graph))
    goto fail;
  for (int64_t i = 0, n = chain_length(run); i < n; ++i)
    if (kd_graph_kernel(e->graph, "empty", fn, &one, NULL, 0, NULL)) goto fail;
  if (s->g->cu->cuEventCreate(&e->start, CU_EVENT_DEFAULT) || s->g->cu->cuEventCreate(&e->stop, CU_EVENT_DEFAULT)) {
    st = kb_run_fail(run, "cuEventCreate failed");
    eager_teardown(run, e);
    *state = NULL;
    return st;
  }
  return KB_OK;
fail:
  st = kb_run_fail(run, "kdag: %s", kd_last_error());
  eager_teardown(run, e);
  *state = NULL;
  return st;
}

static kb_status eager_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  eager *e = state;
  launch_suite *s = kb_run_suite_state(run);
  stream_event ev = {s->g->cu, e->start, CUDA_SUCCESS};
  uint64_t t0 = kb_now_ns();
  if (kd_with_raw(e->session, "bench.start", record_on_session, &ev) || ev.result)
    return kb_run_fail(run, "recording the start event: %s", kd_last_error());
  for (uint64_t it = 0; it < iterations; ++it)
    if (kd_graph_submit(e->graph, NULL)) return kb_run_fail(run, "kd_graph_submit: %s", kd_last_error());
  ev.event = e->stop;
  if (kd_with_raw(e->session, "bench.stop", record_on_session, &ev) || ev.result)
    return kb_run_fail(run, "recording the stop event: %s", kd_last_error());
  out->host_ns = (double)(kb_now_ns() - t0);
  kb_status st = kb_gpu_check(run, s->g->cu->cuEventSynchronize(e->stop), "cuEventSynchronize(stop)");
  float ms = 0;
  if (!st) st = kb_gpu_check(run, s->g->cu->cuEventElapsedTime(&ms, e->start, e->stop), "cuEventElapsedTime");
  out->gpu_ns = (double)ms * 1e6;
  kd_session_reap(e->session, NULL);
  return st;
}

int kb_register_launch_suite(kb_harness *h) {
  kb_suite_desc sd = {
      .name = "launch",
      .description = "a chain of N empty kernels per submission, one completion event each",
      .needs_gpu = 1, .init = launch_init, .fini = launch_fini, .flush = launch_flush};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  static const int64_t n[] = {10, 100, 1000, 10000};
  kb_case_desc raw = {.name = "raw_loop",
                      .description = "cuLaunchKernel per node, cuEventRecord per submission",
                      .baseline = 1, .setup = raw_setup, .batch = raw_batch};
  kb_case_desc graph = {.name = "hand_graph",
                        .description = "the chain as a hand-built CUDA graph, instantiated once, "
                                       "one cuGraphLaunch + cuEventRecord per submission",
                        .baseline = 1, .setup = graph_setup, .batch = graph_batch,
                        .teardown = graph_teardown};
  kb_case_desc kdag = {.name = "kdag_eager",
                       .description = "the chain as a kdag graph of N kernel nodes, kd_graph_submit "
                                      "per submission (EAGER: one completion event each)",
                       .setup = eager_setup, .batch = eager_batch, .teardown = eager_teardown};
  if (kb_suite_axis(s, "N", n, sizeof n / sizeof n[0]) || kb_case_add(s, &raw) || kb_case_add(s, &graph) ||
      kb_case_add(s, &kdag))
    return -1;
  return 0;
}
