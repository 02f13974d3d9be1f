/* SPDX-License-Identifier: Apache-2.0 */
/* Suite "pdl": programmatic dependent launch (KD_LAUNCH_PDL, docs/pdl.md).
 * A chain of N dependent kernels, each a read-modify-write of the same 128
 * floats (bench_pdl_step, which waits for its grid dependency), per
 * submission:
 *  - as a CUDA graph: built by hand with full edges (hand_graph, the
 *    baseline), by hand with programmatic edges (hand_graph_pdl), and as a
 *    kdag graph of N kernel nodes in GRAPH mode, without PDL
 *    (kdag_graph_nopdl, KD_SESSION_NO_PDL) and with it (kdag_graph);
 *  - launched one by one, queued behind a kernel that holds the stream while
 *    the host enqueues the batch, so the GPU time is the GPU's and not the
 *    host's launch rate: cuLaunchKernel (raw_loop_blocked, the baseline),
 *    cuLaunchKernelEx with programmatic stream serialization
 *    (raw_loop_pdl_blocked), and a kdag EAGER session without and with PDL.
 * The timed span starts after the blocking kernel. The blocked cases stop
 * at 1000 launches a batch (N <= 1000): more would fill the launch queue,
 * and the host would wait for the GPU inside the batch. */
#include <stdlib.h>

#include "bench/gpu.h"
#include "bench/kdag_session.h"
#include "bench/suites.h"
#include "kdag/kdag.h"
#include "kernels/embedded.h"

#define PDL_THREADS 128
#define BLOCKED_MAX_LAUNCHES 1000
/* The blocking kernel's hold: enough for the host to enqueue the batch at
 * 20 us a launch (kdag EAGER enqueues one in 2 to 4 us), and 1 ms more. */
#define BLOCK_NS_PER_LAUNCH 20000ull
#define BLOCK_NS_BASE 1000000ull

static int64_t chain_length(kb_run *run) { return kb_run_axis(run, "N", 100); }

typedef struct pdl_variant {
  int pdl;         /* programmatic edges or launches */
  int kdag;        /* a kdag session (else the driver directly) */
  int graph;       /* a CUDA graph (GRAPH mode); else launches behind a blocking kernel */
} pdl_variant;

typedef struct pdl_case {
  pdl_variant v;
  CUdeviceptr x;        /* the driver cases' 128 floats */
  CUfunction spin;
  CUgraph graph;
  CUgraphExec exec;
  kb_kdag k;            /* kdag cases */
  kd_graph *kg;
  kd_tensor t;
} pdl_case;

static void pdl_teardown(kb_run *run, void *state) {
  pdl_case *c = state;
  if (!c) return;
  kb_kernel_suite *s = kb_run_suite_state(run);
  const kd_cu_table *cu = s->g->cu;
  if (c->exec) cu->cuGraphExecDestroy(c->exec);
  if (c->graph) cu->cuGraphDestroy(c->graph);
  if (c->x) cu->cuMemFree(c->x);
  if (c->kg) kd_graph_destroy(c->kg);
  if (c->k.session && c->t.bits) (void)kd_tensor_release(c->k.session, c->t);
  kb_kdag_close(&c->k);
  free(c);
}

/* The hand-built chain: node i after node i-1, full or programmatic. */
static kb_status hand_graph(kb_run *run, kb_kernel_suite *s, pdl_case *c) {
  const kd_cu_table *cu = s->g->cu;
  kb_status st;
  if ((st = kb_gpu_check(run, cu->cuGraphCreate(&c->graph, 0), "cuGraphCreate"))) return st;
  void *params[] = {&c->x};
  CUDA_KERNEL_NODE_PARAMS p = {0};
  p.func = s->fn;
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = PDL_THREADS;
  p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = params;
  CUgraphEdgeData prog = {0};
  prog.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
  prog.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
  CUgraphNode prev = NULL;
  for (int64_t i = 0, n = chain_length(run); i < n; ++i) {
    CUgraphNode node;
    int full = prev && !c->v.pdl;
    if ((st = kb_gpu_check(run, cu->cuGraphAddKernelNode(&node, c->graph, full ? &prev : NULL, full, &p),
                           "cuGraphAddKernelNode")))
      return st;
    if (prev && c->v.pdl &&
        (st = kb_gpu_check(run, cu->cuGraphAddDependencies(c->graph, &prev, &node, &prog, 1),
                           "cuGraphAddDependencies (programmatic)")))
      return st;
    prev = node;
  }
  return kb_gpu_instantiate(s->g, run, c->graph, 1, &c->exec);
}

/* The kdag chain: N kernel nodes updating one tensor in place (the
 * declared accesses order them), opted in to PDL; the session decides. */
static kb_status kdag_chain(kb_run *run, pdl_case *c) {
  kb_status st = kb_kdag_open_flags(run, c->v.graph ? KD_EXEC_GRAPH : KD_EXEC_EAGER,
                                    c->v.pdl ? 0 : KD_SESSION_NO_PDL, &c->k);
  if (st) return st;
  kd_function fn;
  if ((st = kb_kdag_function(run, &c->k, kd_kernel_bench_cubin, kd_kernel_bench_cubin_size, kd_kernel_bench_ptx,
                             kd_kernel_bench_ptx_size, "bench_pdl_step", &fn)))
    return st;
  static const float zeros[PDL_THREADS];
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {PDL_THREADS}};
  kd_launch_config one = {{1, 1, 1}, {PDL_THREADS, 1, 1}, 0, KD_LAUNCH_PDL};
  kd_garg args[1];
  if (kd_tensor_from_host(c->k.session, &d, zeros, sizeof zeros, &c->t) || kd_graph_create(c->k.session, &c->kg))
    return kb_run_fail(run, "kdag: %s", kd_last_error());
  args[0] = kd_g_inout(kd_whole(c->t));
  for (int64_t i = 0, n = chain_length(run); i < n; ++i)
    if (kd_graph_kernel(c->kg, "step", fn, &one, args, 1, NULL)) return kb_run_fail(run, "kdag: %s", kd_last_error());
  if ((st = kb_kdag_preflight(run, &c->k, c->kg))) return st;
  kd_session_stats stats;
  if ((st = kb_kdag_counters(run, &c->k, &stats))) return st;
  if (c->v.pdl && !stats.programmatic_edges)
    return kb_run_skip(run, "the session made no edge programmatic: this device or driver has no programmatic "
                            "dependent launch");
  return KB_OK;
}

static kb_status pdl_setup(kb_run *run, void **state) {
  int64_t n = chain_length(run);
  if (n < 2) return kb_run_fail(run, "N must be at least 2, not %lld", (long long)n);
  const pdl_variant *v = kb_run_user(run);
  if (!v->graph && n > BLOCKED_MAX_LAUNCHES)
    return kb_run_not_applicable(run, "launches behind a blocking kernel stop at N = %d (the launch queue)",
                                 BLOCKED_MAX_LAUNCHES);
  kb_run_per_iteration(run, (double)n, "node");
  kb_run_throughput(run, (double)n, 0);
  kb_run_min_batch(run, v->graph ? 16 : 1);
  if (!v->graph) kb_run_max_batch(run, (uint64_t)(BLOCKED_MAX_LAUNCHES / n));
  kb_kernel_suite *s = kb_run_suite_state(run);
  const kd_cu_table *cu = s->g->cu;
  if (v->pdl && (!cu->cuLaunchKernelEx || !cu->cuGraphAddDependencies))
    return kb_run_skip(run, "the driver has no cuLaunchKernelEx or no cuGraphAddDependencies with edge data");
  pdl_case *c = calloc(1, sizeof *c);
  if (!c) return kb_run_fail(run, "out of memory");
  c->v = *v;
  *state = c;
  kb_status st;
  if ((st = kb_gpu_check(run, cu->cuModuleGetFunction(&c->spin, s->module, "bench_spin"), "cuModuleGetFunction")))
    goto fail;
  if (v->kdag) st = kdag_chain(run, c);
  else if ((st = kb_gpu_check(run, cu->cuMemAlloc(&c->x, PDL_THREADS * sizeof(float)), "cuMemAlloc")) == KB_OK &&
           (st = kb_gpu_check(run, cu->cuMemsetD32Async(c->x, 0, PDL_THREADS, s->g->stream), "cuMemsetD32Async")) ==
               KB_OK &&
           v->graph)
    st = hand_graph(run, s, c);
  if (st) goto fail;
  return KB_OK;
fail:
  pdl_teardown(run, c);
  *state = NULL;
  return st;
}

typedef struct spin_call {
  const kd_cu_table *cu;
  CUfunction spin;
  unsigned long long ns;
} spin_call;

static CUresult spin_on(CUstream stream, void *user) {
  spin_call *q = user;
  void *params[] = {&q->ns};
  return q->cu->cuLaunchKernel(q->spin, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL);
}

static kb_status pdl_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  pdl_case *c = state;
  kb_kernel_suite *s = kb_run_suite_state(run);
  const kd_cu_table *cu = s->g->cu;
  int64_t n = chain_length(run);
  spin_call spin = {cu, c->spin, BLOCK_NS_BASE + BLOCK_NS_PER_LAUNCH * iterations * (uint64_t)n};
  kb_status st;
  uint64_t t0 = 0;
  if (c->v.kdag) {
    if (!c->v.graph && (st = kb_kdag_on_stream(run, &c->k, spin_on, &spin, "cuLaunchKernel(bench_spin)")))
      return st;
    if ((st = kb_kdag_begin(run, &c->k, &t0))) return st;
    for (uint64_t it = 0; it < iterations; ++it)
      if (kd_graph_submit(c->kg, NULL)) return kb_run_fail(run, "kd_graph_submit: %s", kd_last_error());
    return kb_kdag_end(run, &c->k, t0, out);
  }
  CUstream stream = s->g->stream;
  if (!c->v.graph && (st = kb_gpu_check(run, spin_on(stream, &spin), "cuLaunchKernel(bench_spin)"))) return st;
  if ((st = kb_gpu_batch_begin(s->g, run, &t0))) return st;
  void *params[] = {&c->x};
  CUlaunchAttribute attr = {0};
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig lc = {1, 1, 1, PDL_THREADS, 1, 1, 0, stream, &attr, 1};
  for (uint64_t it = 0; it < iterations; ++it) {
    CUresult r = CUDA_SUCCESS;
    if (c->v.graph) {
      r = cu->cuGraphLaunch(c->exec, stream);
    } else {
      for (int64_t i = 0; r == CUDA_SUCCESS && i < n; ++i) /* the first of a submission follows an event record */
        r = c->v.pdl && i ? cu->cuLaunchKernelEx(&lc, s->fn, params, NULL)
                          : cu->cuLaunchKernel(s->fn, 1, 1, 1, PDL_THREADS, 1, 1, 0, stream, params, NULL);
    }
    if (r == CUDA_SUCCESS) r = cu->cuEventRecord(s->done, stream); /* one completion event per submission, as kdag */
    if ((st = kb_gpu_check(run, r, c->v.graph ? "cuGraphLaunch" : "a launch of bench_pdl_step"))) return st;
  }
  return kb_gpu_batch_end(s->g, run, t0, out);
}

int kb_register_pdl_suite(kb_harness *h) {
  static const kb_kernel_spec kernel = {kd_kernel_bench_cubin, kd_kernel_bench_ptx, "bench_pdl_step"};
  kb_suite_desc sd = {
      .name = "pdl",
      .description = "a chain of N dependent 128-float read-modify-write kernels per submission, with and "
                     "without programmatic dependent launch",
      .needs_gpu = 1, .init = kb_kernel_suite_init, .fini = kb_kernel_suite_fini,
      .flush = kb_kernel_suite_flush, .user = (void *)&kernel, .interleave = 1, .host_cost = 1};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  static const int64_t n[] = {100, 1000, 10000};
  static const pdl_variant hg = {0, 0, 1}, hg_pdl = {1, 0, 1}, kg_off = {0, 1, 1}, kg = {1, 1, 1},
                           raw = {0, 0, 0}, raw_pdl = {1, 0, 0}, ke_off = {0, 1, 0}, ke = {1, 1, 0};
  static const struct {
    const char *name, *description;
    int baseline;
    const pdl_variant *v;
  } cases[] = {
      {"hand_graph", "a hand-built CUDA graph of the chain, full edges", 1, &hg},
      {"hand_graph_pdl", "the hand-built graph with programmatic edges (cuGraphAddDependencies with edge data)", 0,
       &hg_pdl},
      {"kdag_graph_nopdl", "the chain as a kdag graph in GRAPH mode, KD_SESSION_NO_PDL", 0, &kg_off},
      {"kdag_graph", "the kdag graph in GRAPH mode with PDL (issue 32: GPU time per node <= 0.70x hand_graph)", 0,
       &kg},
      {"raw_loop_blocked", "cuLaunchKernel per node behind a blocking kernel", 1, &raw},
      {"raw_loop_pdl_blocked", "cuLaunchKernelEx with programmatic stream serialization per node, behind a "
                               "blocking kernel", 0, &raw_pdl},
      {"kdag_eager_nopdl_blocked", "the kdag graph in EAGER mode behind a blocking kernel, KD_SESSION_NO_PDL", 0,
       &ke_off},
      {"kdag_eager_blocked", "the kdag graph in EAGER mode behind a blocking kernel, with PDL", 0, &ke}};
  if (kb_suite_axis(s, "N", n, sizeof n / sizeof n[0])) return -1;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    kb_case_desc d = {.name = cases[i].name, .description = cases[i].description, .baseline = cases[i].baseline,
                      .setup = pdl_setup, .batch = pdl_batch, .teardown = pdl_teardown,
                      .user = (void *)cases[i].v};
    if (kb_case_add(s, &d)) return -1;
  }
  return 0;
}
