/* SPDX-License-Identifier: Apache-2.0 */
/* Suite "fanout": W independent small kernels per submission, so that what
 * can overlap shows. Each kernel is one block of 128 threads running `iters`
 * dependent multiply-adds per thread (axis iters, default 2048: a few
 * microseconds on one SM; iters=0 makes the kernels launch-bound) and
 * writing its own 128-float buffer: one instance leaves the GPU mostly idle.
 *   serial_stream  the W kernels with cuLaunchKernel one after another on
 *                  one stream, one completion event per batch (baseline)
 *   hand_graph     a hand-built CUDA graph of W independent kernel nodes,
 *                  instantiated once, one cuGraphLaunch + event per batch
 *                  (baseline)
 *   kdag_eager     a kdag graph of W kernel nodes, each writing its own
 *                  tensor (so no order between them), EAGER: serial on the
 *                  session stream
 *   kdag_graph     the same graph with exec_mode GRAPH
 * Metric: time per batch of W kernels; items/s counts kernels. Issue 5's
 * target: kdag_graph at least 3.5x faster than serial_stream at W = 64 (the
 * H200 baseline in DESIGN.md: one graph ~3.9x faster than the stream). */
#include <stdlib.h>

#include "bench/gpu.h"
#include "bench/kdag_session.h"
#include "bench/suites.h"
#include "kdag/kdag.h"
#include "kernels/embedded.h"

#define FANOUT_THREADS 128

static int64_t width(kb_run *run) { return kb_run_axis(run, "W", 64); }
static int work_iters(kb_run *run) { return (int)kb_run_axis(run, "iters", 2048); }

static kb_status declare(kb_run *run) {
  int64_t w = width(run), iters = kb_run_axis(run, "iters", 2048);
  if (w < 1 || w > 1000000) return kb_run_fail(run, "W must be in 1..1000000, not %lld", (long long)w);
  if (iters < 0 || iters > 100000000)
    return kb_run_fail(run, "iters must be in 0..100000000, not %lld", (long long)iters);
  kb_run_per_iteration(run, 1, "batch");
  kb_run_throughput(run, (double)w, 0);
  return KB_OK;
}

/* ---- serial_stream and hand_graph: driver calls on plain buffers ---------- */

typedef struct raw_fanout {
  CUdeviceptr buffers; /* W x 128 floats, kernel w writes the w-th 128 */
  CUgraph graph;
  CUgraphExec exec;
} raw_fanout;

static void raw_teardown(kb_run *run, void *state) {
  raw_fanout *r = state;
  if (!r) return;
  kb_kernel_suite *s = kb_run_suite_state(run);
  const kd_cu_table *cu = s->g->cu;
  cu->cuStreamSynchronize(s->g->stream);
  if (r->exec) cu->cuGraphExecDestroy(r->exec);
  if (r->graph) cu->cuGraphDestroy(r->graph);
  if (r->buffers) cu->cuMemFree(r->buffers);
  free(r);
}

static kb_status raw_alloc(kb_run *run, raw_fanout **out) {
  kb_status st = declare(run);
  if (st) return st;
  kb_kernel_suite *s = kb_run_suite_state(run);
  raw_fanout *r = calloc(1, sizeof *r);
  if (!r) return kb_run_fail(run, "out of memory");
  size_t bytes = (size_t)width(run) * FANOUT_THREADS * sizeof(float);
  if ((st = kb_gpu_check(run, s->g->cu->cuMemAlloc(&r->buffers, bytes), "cuMemAlloc(fanout buffers)"))) {
    raw_teardown(run, r);
    return st;
  }
  *out = r;
  return KB_OK;
}

static CUdeviceptr buffer_of(const raw_fanout *r, int64_t w) {
  return r->buffers + (CUdeviceptr)w * FANOUT_THREADS * sizeof(float);
}

static kb_status serial_setup(kb_run *run, void **state) {
  raw_fanout *r;
  kb_status st = raw_alloc(run, &r);
  if (!st) *state = r;
  return st;
}

static kb_status serial_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  raw_fanout *r = state;
  kb_kernel_suite *s = kb_run_suite_state(run);
  const kd_cu_table *cu = s->g->cu;
  CUstream stream = s->g->stream;
  int64_t w = width(run);
  int n = FANOUT_THREADS, iters = work_iters(run);
  uint64_t t0 = 0; /* set by the begin call, after its event */
  kb_status st = kb_gpu_batch_begin(s->g, run, &t0);
  if (st) return st;
  for (uint64_t it = 0; it < iterations; ++it) {
    for (int64_t i = 0; i < w; ++i) {
      CUdeviceptr p = buffer_of(r, i);
      void *params[] = {&p, &n, &iters};
      CUresult e = cu->cuLaunchKernel(s->fn, 1, 1, 1, FANOUT_THREADS, 1, 1, 0, stream, params, NULL);
      if (e != CUDA_SUCCESS) return kb_gpu_check(run, e, "cuLaunchKernel(bench_work_kernel)");
    }
    CUresult e = cu->cuEventRecord(s->done, stream);
    if (e != CUDA_SUCCESS) return kb_gpu_check(run, e, "cuEventRecord(done)");
  }
  return kb_gpu_batch_end(s->g, run, t0, out);
}

/* W kernel nodes without dependencies, instantiated once (outside the timing). */
static kb_status graph_setup(kb_run *run, void **state) {
  raw_fanout *r;
  kb_status st = raw_alloc(run, &r);
  if (st) return st;
  kb_kernel_suite *s = kb_run_suite_state(run);
  const kd_cu_table *cu = s->g->cu;
  if ((st = kb_gpu_check(run, cu->cuGraphCreate(&r->graph, 0), "cuGraphCreate"))) goto fail;
  int n = FANOUT_THREADS, iters = work_iters(run);
  for (int64_t i = 0, w = width(run); i < w; ++i) {
    CUdeviceptr p = buffer_of(r, i);
    void *params[] = {&p, &n, &iters}; /* copied by cuGraphAddKernelNode */
    CUDA_KERNEL_NODE_PARAMS kp = {0};
    kp.func = s->fn;
    kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = FANOUT_THREADS, kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = params;
    CUgraphNode node;
    if ((st = kb_gpu_check(run, cu->cuGraphAddKernelNode(&node, r->graph, NULL, 0, &kp), "cuGraphAddKernelNode")))
      goto fail;
  }
  if ((st = kb_gpu_instantiate(s->g, run, r->graph, 0, &r->exec))) goto fail;
  *state = r;
  return KB_OK;
fail:
  raw_teardown(run, r);
  return st;
}

static kb_status graph_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  raw_fanout *r = state;
  kb_kernel_suite *s = kb_run_suite_state(run);
  const kd_cu_table *cu = s->g->cu;
  CUstream stream = s->g->stream;
  uint64_t t0 = 0; /* set by the begin call, after its event */
  kb_status st = kb_gpu_batch_begin(s->g, run, &t0);
  if (st) return st;
  for (uint64_t it = 0; it < iterations; ++it) {
    CUresult e = cu->cuGraphLaunch(r->exec, stream);
    if (e != CUDA_SUCCESS) return kb_gpu_check(run, e, "cuGraphLaunch");
    e = cu->cuEventRecord(s->done, stream);
    if (e != CUDA_SUCCESS) return kb_gpu_check(run, e, "cuEventRecord(done)");
  }
  return kb_gpu_batch_end(s->g, run, t0, out);
}

/* ---- kdag_eager, kdag_graph ------------------------------------------------ */

typedef struct kdag_fanout {
  kb_kdag k;
  kd_graph *graph;
} kdag_fanout;

static void kdag_teardown(kb_run *run, void *state) {
  (void)run;
  kdag_fanout *f = state;
  if (!f) return;
  kd_graph_destroy(f->graph);
  kb_kdag_close(&f->k); /* also frees the tensors */
  free(f);
}

static kb_status kdag_setup(kb_run *run, void **state) {
  kb_status st = declare(run);
  if (st) return st;
  kdag_fanout *f = calloc(1, sizeof *f);
  if (!f) return kb_run_fail(run, "out of memory");
  kd_function fn;
  if ((st = kb_kdag_open(run, *(const kd_exec_mode *)kb_run_user(run), &f->k)) ||
      (st = kb_kdag_function(run, &f->k, kd_kernel_bench_cubin, kd_kernel_bench_cubin_size, kd_kernel_bench_ptx,
                             kd_kernel_bench_ptx_size, "bench_work_kernel", &fn)))
    goto fail;
  kd_session *session = f->k.session;
  if (kd_graph_create(session, &f->graph)) goto kdag_fail;
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {FANOUT_THREADS}};
  kd_launch_config config = {{1, 1, 1}, {FANOUT_THREADS, 1, 1}, 0, 0};
  for (int64_t i = 0, w = width(run); i < w; ++i) {
    kd_tensor t;
    if (kd_tensor_create(session, &d, &t)) goto kdag_fail;
    kd_garg args[] = {kd_g_out(kd_whole(t)), kd_g_value(kd_arg_i32(FANOUT_THREADS)),
                      kd_g_value(kd_arg_i32(work_iters(run)))};
    kd_status ks = kd_graph_kernel(f->graph, "work", fn, &config, args, 3, NULL);
    /* The graph holds its own reference: drop ours at once. */
    if (kd_tensor_release(session, t) || ks) goto kdag_fail;
  }
  if ((st = kb_kdag_preflight(run, &f->k, f->graph))) goto fail;
  *state = f;
  return KB_OK;
kdag_fail:
  st = kb_run_fail(run, "kdag: %s", kd_last_error());
fail:
  kdag_teardown(run, f);
  return st;
}

static kb_status kdag_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  kdag_fanout *f = state;
  return kb_kdag_submit_batch(run, &f->k, f->graph, iterations, out);
}

int kb_register_fanout_suite(kb_harness *h) {
  static const kb_kernel_spec kernel = {kd_kernel_bench_cubin, kd_kernel_bench_ptx, "bench_work_kernel"};
  kb_suite_desc sd = {.name = "fanout",
                      .description = "W independent small kernels per submission (one 128-thread block of "
                                     "`iters` dependent FMAs each, own buffer): what overlaps",
                      .needs_gpu = 1, .init = kb_kernel_suite_init, .fini = kb_kernel_suite_fini,
                      .flush = kb_kernel_suite_flush, .user = (void *)&kernel, .interleave = 1};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  static const int64_t w[] = {4, 16, 64}, iters[] = {2048};
  static const kd_exec_mode eager = KD_EXEC_EAGER, graph_mode = KD_EXEC_GRAPH;
  kb_case_desc serial = {.name = "serial_stream",
                         .description = "cuLaunchKernel x W on one stream, one cuEventRecord per batch",
                         .baseline = 1, .setup = serial_setup, .batch = serial_batch, .teardown = raw_teardown};
  kb_case_desc hand = {.name = "hand_graph",
                       .description = "a hand-built CUDA graph of W independent kernel nodes, one "
                                      "cuGraphLaunch + cuEventRecord per batch",
                       .baseline = 1, .setup = graph_setup, .batch = graph_batch, .teardown = raw_teardown};
  kb_case_desc keager = {.name = "kdag_eager",
                         .description = "a kdag graph of W kernel nodes on W tensors, EAGER (serial on the "
                                        "session stream)",
                         .setup = kdag_setup, .batch = kdag_batch, .teardown = kdag_teardown,
                         .user = (void *)&eager};
  kb_case_desc kgraph = {.name = "kdag_graph",
                         .description = "the same kdag graph with exec_mode GRAPH (issue 5: >= 3.5x faster "
                                        "than serial_stream at W = 64)",
                         .setup = kdag_setup, .batch = kdag_batch, .teardown = kdag_teardown,
                         .user = (void *)&graph_mode};
  if (kb_suite_axis(s, "W", w, sizeof w / sizeof w[0]) || kb_suite_axis(s, "iters", iters, 1) ||
      kb_case_add(s, &serial) || kb_case_add(s, &hand) ||
      kb_case_add(s, &keager) || kb_case_add(s, &kgraph))
    return -1;
  return 0;
}
