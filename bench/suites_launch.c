/* SPDX-License-Identifier: Apache-2.0 */
/* Suite "launch": a chain of N empty kernels per submission, launched
 * directly (raw_loop), as a CUDA graph built by hand with the driver's
 * cuGraph* calls (hand_graph), or as a kdag graph run EAGER (kdag_eager) or
 * as one instantiated CUDA graph (kdag_graph). Each records one completion
 * event per submission, as kdag does; the GPU time comes from events around
 * a batch. */
#include <stdlib.h>

#include "bench/gpu.h"
#include "bench/kdag_session.h"
#include "bench/suites.h"
#include "kdag/kdag.h"
#include "kernels/embedded.h"

static int64_t chain_length(kb_run *run) { return kb_run_axis(run, "N", 10); }

static kb_status declare(kb_run *run) {
  int64_t n = chain_length(run);
  if (n < 1) return kb_run_fail(run, "N must be at least 1, not %lld", (long long)n);
  kb_run_per_iteration(run, (double)n, "node");
  kb_run_throughput(run, (double)n, 0);
  return KB_OK;
}

/* Graph launches: a long chain's launch runs for milliseconds, so a batch
 * sized by time would hold one launch, and its host time would be one call
 * after a wait (cold caches, a woken thread) instead of the steady
 * submission rate the ratios are about. 16 stay far below the launch
 * queue's depth. */
#define GRAPH_MIN_BATCH 16

/* ---- raw_loop ----------------------------------------------------------- */

static kb_status raw_setup(kb_run *run, void **state) {
  (void)state;
  return declare(run);
}

static kb_status raw_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  (void)state;
  kb_kernel_suite *s = kb_run_suite_state(run);
  const kd_cu_table *cu = s->g->cu;
  CUstream stream = s->g->stream;
  int64_t n = chain_length(run);
  uint64_t t0 = 0; /* set by the begin call, after its event */
  kb_status st = kb_gpu_batch_begin(s->g, run, &t0);
  if (st) return st;
  for (uint64_t it = 0; it < iterations; ++it) {
    for (int64_t i = 0; i < n; ++i) {
      CUresult r = cu->cuLaunchKernel(s->fn, 1, 1, 1, 1, 1, 1, 0, stream, NULL, NULL);
      if (r != CUDA_SUCCESS) return kb_gpu_check(run, r, "cuLaunchKernel(empty_kernel)");
    }
    CUresult r = cu->cuEventRecord(s->done, stream);
    if (r != CUDA_SUCCESS) return kb_gpu_check(run, r, "cuEventRecord(done)");
  }
  return kb_gpu_batch_end(s->g, run, t0, out);
}

/* ---- hand_graph --------------------------------------------------------- */

/* What a hand_graph case varies, to tell apart what costs kdag_graph GPU
 * time: the plain baseline, or one of kdag's choices (instantiating with
 * the upload flag, a different completion event per launch, the session's
 * stream), or a stream of the bench's own made for the case, which tells
 * "a kdag session's stream" apart from "a stream other than the first". */
typedef struct hand_variant {
  int upload;     /* CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD on the launch stream */
  int events;     /* completion events rotated per launch (0: the suite's one) */
  int on_session; /* launched on a kdag session's stream, in one raw scope per batch */
  int own_stream; /* launched on a non-blocking stream created by the case's setup */
  int own_pool;   /* own_stream, with a memory pool created first (1), and used on the stream (2), as a
                     kdag session does */
  int beside;     /* own_stream, created while a kdag session (unused) is open */
  int ctx_query;  /* cuCtxGetCurrent before each launch, as every kdag entry point asks */
  int reap;       /* events, polled as kdag's completion ring reaps: every 64th launch the oldest
                     pending event, and if it has fired the newest, then between them by halves */
} hand_variant;

#define HAND_EVENTS 64
#define HAND_RING 1024 /* reap: kdag's default completion_ring_capacity */

static uint32_t hand_ring(const hand_variant *v) { return v->reap ? HAND_RING : HAND_EVENTS; }

typedef struct hand_graph {
  CUgraph graph;
  CUgraphExec exec;
  hand_variant v;
  CUevent events[HAND_RING];
  uint32_t next_event;
  /* reap only, as kdag's completion ring and event pool: each pending
   * launch's event by launch number, the launches known to have fired,
   * and the free events, the last retired on top. */
  CUevent pending[HAND_RING];
  uint32_t retired;
  CUevent free_events[HAND_RING];
  uint32_t free_count;
  kb_kdag k;          /* on_session only */
  kb_gpu on_own;      /* own_stream only: the suite's GPU with the case's stream */
  CUmemoryPool pool;  /* own_pool only */
} hand_graph;

static void graph_teardown(kb_run *run, void *state) {
  hand_graph *hg = state;
  if (!hg) return;
  kb_kernel_suite *s = kb_run_suite_state(run);
  const kd_cu_table *cu = s->g->cu;
  cu->cuStreamSynchronize(s->g->stream);
  kb_kdag_close(&hg->k); /* drains the session stream */
  if (hg->on_own.stream) {
    cu->cuStreamSynchronize(hg->on_own.stream);
    cu->cuStreamDestroy(hg->on_own.stream);
  }
  if (hg->pool) cu->cuMemPoolDestroy(hg->pool);
  if (hg->exec) cu->cuGraphExecDestroy(hg->exec);
  if (hg->graph) cu->cuGraphDestroy(hg->graph);
  for (int i = 0; i < HAND_RING; ++i)
    if (hg->events[i]) cu->cuEventDestroy(hg->events[i]);
  free(hg);
}

/* Builds the chain once (outside the timing): node i depends on node i-1,
 * then instantiates it. Every sample launches the same executable graph. */
static kb_status graph_setup(kb_run *run, void **state) {
  kb_status st = declare(run);
  if (st) return st;
  kb_run_min_batch(run, GRAPH_MIN_BATCH);
  kb_kernel_suite *s = kb_run_suite_state(run);
  const kd_cu_table *cu = s->g->cu;
  hand_graph *hg = calloc(1, sizeof *hg);
  if (!hg) return kb_run_fail(run, "out of memory");
  *state = hg;
  if ((st = kb_gpu_check(run, cu->cuGraphCreate(&hg->graph, 0), "cuGraphCreate"))) goto fail;
  CUDA_KERNEL_NODE_PARAMS p = {0};
  p.func = s->fn;
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = p.blockDimY = p.blockDimZ = 1;
  CUgraphNode prev = NULL;
  for (int64_t i = 0, n = chain_length(run); i < n; ++i) {
    CUgraphNode node;
    CUresult r = cu->cuGraphAddKernelNode(&node, hg->graph, prev ? &prev : NULL, prev ? 1 : 0, &p);
    if ((st = kb_gpu_check(run, r, "cuGraphAddKernelNode"))) goto fail;
    prev = node;
  }
  static const hand_variant plain = {0};
  const hand_variant *v = kb_run_user(run) ? kb_run_user(run) : &plain;
  hg->v = *v;
  if ((v->on_session || v->beside) && (st = kb_kdag_open(run, KD_EXEC_EAGER, &hg->k))) goto fail;
  if (v->own_stream) {
    hg->on_own = *s->g;
    hg->on_own.stream = NULL;
    if (v->own_pool) {
      CUmemPoolProps props = {0};
      props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
      props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      props.location.id = 0;
      if ((st = kb_gpu_check(run, cu->cuMemPoolCreate(&hg->pool, &props), "cuMemPoolCreate"))) goto fail;
    }
    if ((st = kb_gpu_check(run, cu->cuStreamCreate(&hg->on_own.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate")))
      goto fail;
    if (v->own_pool == 2) {
      CUdeviceptr mem = 0;
      if ((st = kb_gpu_check(run, cu->cuMemAllocFromPoolAsync(&mem, 256, hg->pool, hg->on_own.stream),
                             "cuMemAllocFromPoolAsync")) ||
          (st = kb_gpu_check(run, cu->cuMemFreeAsync(mem, hg->on_own.stream), "cuMemFreeAsync")) ||
          (st = kb_gpu_check(run, cu->cuStreamSynchronize(hg->on_own.stream), "cuStreamSynchronize")))
        goto fail;
    }
  }
  for (uint32_t i = 0; v->events && i < hand_ring(v); ++i)
    if ((st = kb_gpu_check(run, cu->cuEventCreate(&hg->events[i], CU_EVENT_DISABLE_TIMING), "cuEventCreate")))
      goto fail;
  for (uint32_t i = v->reap ? HAND_RING : 0; i > 0; --i) hg->free_events[hg->free_count++] = hg->events[i - 1];
  if ((st = kb_gpu_instantiate(s->g, run, hg->graph, v->upload, &hg->exec))) goto fail;
  return KB_OK;
fail:
  graph_teardown(run, hg);
  *state = NULL;
  return st;
}

typedef struct hand_launches {
  kb_run *run;
  hand_graph *hg;
  uint64_t iterations;
  kb_status st;
} hand_launches;

/* Launches up to done have fired: their events go back to the pool,
 * oldest first, as kdag's retire_oldest hands them back. */
static void retire_through(hand_graph *hg, uint32_t done) {
  while (hg->retired != done + 1) hg->free_events[hg->free_count++] = hg->pending[hg->retired++ % HAND_RING];
}

/* The event queries kdag's ring makes on its every 64th submission (see
 * kd_completion_reap): the oldest pending launch, and if that has fired
 * the newest, then between the two by halves. At most HAND_RING launches
 * are pending, so each pending launch's event is still its own. */
static void reap(const kd_cu_table *cu, hand_graph *hg) {
  uint32_t done = hg->retired, pending = hg->next_event;
  if (done == pending || cu->cuEventQuery(hg->pending[done % HAND_RING]) != CUDA_SUCCESS) return;
  for (uint32_t probe = pending - 1; probe > done; probe = done + (pending - done) / 2) {
    if (cu->cuEventQuery(hg->pending[probe % HAND_RING]) == CUDA_SUCCESS) done = probe;
    else pending = probe;
  }
  retire_through(hg, done);
}

/* The batch's launches on stream, each followed by a completion event. */
static kb_status launch_all(kb_run *run, hand_graph *hg, CUstream stream, uint64_t iterations) {
  kb_kernel_suite *s = kb_run_suite_state(run);
  const kd_cu_table *cu = s->g->cu;
  for (uint64_t it = 0; it < iterations; ++it) {
    if (hg->v.ctx_query) {
      CUcontext cur = NULL;
      CUresult r = cu->cuCtxGetCurrent(&cur);
      if (r != CUDA_SUCCESS) return kb_gpu_check(run, r, "cuCtxGetCurrent");
    }
    if (hg->v.reap && hg->next_event - hg->retired == HAND_RING) { /* as kdag's full ring: wait */
      CUresult r = cu->cuEventSynchronize(hg->pending[hg->retired % HAND_RING]);
      if (r != CUDA_SUCCESS) return kb_gpu_check(run, r, "cuEventSynchronize");
      retire_through(hg, hg->retired);
    }
    CUresult r = cu->cuGraphLaunch(hg->exec, stream);
    if (r != CUDA_SUCCESS) return kb_gpu_check(run, r, "cuGraphLaunch");
    CUevent done = s->done;
    if (hg->v.reap) /* the pool's top, as kd_event_acquire */
      done = hg->pending[hg->next_event++ % HAND_RING] = hg->free_events[--hg->free_count];
    else if (hg->v.events)
      done = hg->events[hg->next_event++ % HAND_EVENTS];
    r = cu->cuEventRecord(done, stream);
    if (r != CUDA_SUCCESS) return kb_gpu_check(run, r, "cuEventRecord(done)");
    /* kdag's seq 0, 64, ..., or every one once the ring is half full */
    if (hg->v.reap && (hg->next_event % HAND_EVENTS == 1 || 2 * (hg->next_event - hg->retired) >= HAND_RING))
      reap(cu, hg);
  }
  return KB_OK;
}

static kd_status launch_in_scope(kd_raw *raw, void *user) {
  hand_launches *l = user;
  void *stream = NULL;
  kd_status st = kd_raw_stream(raw, &stream);
  if (!st) l->st = launch_all(l->run, l->hg, (CUstream)stream, l->iterations);
  return st;
}

static kb_status graph_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  hand_graph *hg = state;
  kb_kernel_suite *s = kb_run_suite_state(run);
  uint64_t t0 = 0; /* set by the begin call, after its event */
  kb_status st;
  if (hg->v.on_session) {
    if ((st = kb_kdag_begin(run, &hg->k, &t0))) return st;
    hand_launches l = {run, hg, iterations, KB_OK};
    if (kd_with_raw(hg->k.session, "bench.hand_graph", launch_in_scope, &l))
      return kb_run_fail(run, "a raw scope: %s", kd_last_error());
    if (l.st) return l.st;
    return kb_kdag_end(run, &hg->k, t0, out);
  }
  kb_gpu *g = hg->v.own_stream ? &hg->on_own : s->g;
  if ((st = kb_gpu_batch_begin(g, run, &t0))) return st;
  if ((st = launch_all(run, hg, g->stream, iterations))) return st;
  return kb_gpu_batch_end(g, run, t0, out);
}

/* ---- kdag_eager, kdag_graph -------------------------------------------- */

/* The same chain as a kdag graph of N kernel nodes in a chain of explicit
 * edges (empty kernels declare no accesses, so nothing else orders them),
 * submitted on a kdag session (its own stream, same primary context) whose
 * exec_mode is the case's: EAGER enqueues the nodes one by one, GRAPH
 * launches the plan as one instantiated CUDA graph. GPU time comes from
 * events recorded on the session stream inside raw scopes. */
typedef struct kdag_chain {
  kb_kdag k;
  kd_graph *graph;
} kdag_chain;

static void kdag_teardown(kb_run *run, void *state) {
  (void)run;
  kdag_chain *c = state;
  if (!c) return;
  kd_graph_destroy(c->graph);
  kb_kdag_close(&c->k);
  free(c);
}

static kb_status kdag_setup(kb_run *run, void **state) {
  kb_status st = declare(run);
  if (st) return st;
  kdag_chain *c = calloc(1, sizeof *c);
  if (!c) return kb_run_fail(run, "out of memory");
  kd_exec_mode mode = *(const kd_exec_mode *)kb_run_user(run);
  if (mode == KD_EXEC_GRAPH) kb_run_min_batch(run, GRAPH_MIN_BATCH);
  kd_function fn;
  kd_launch_config one = {{1, 1, 1}, {1, 1, 1}, 0, 0};
  if ((st = kb_kdag_open(run, mode, &c->k)) ||
      (st = kb_kdag_function(run, &c->k, kd_kernel_test_cubin, kd_kernel_test_cubin_size, kd_kernel_test_ptx,
                             kd_kernel_test_ptx_size, "empty_kernel", &fn)))
    goto fail;
  if (kd_graph_create(c->k.session, &c->graph)) goto kdag_fail;
  kd_node prev = 0;
  for (int64_t i = 0, n = chain_length(run); i < n; ++i) {
    kd_node node;
    if (kd_graph_kernel(c->graph, "empty", fn, &one, NULL, 0, &node) ||
        (i > 0 && kd_graph_edge(c->graph, prev, node)))
      goto kdag_fail;
    prev = node;
  }
  if ((st = kb_kdag_preflight(run, &c->k, c->graph))) goto fail;
  *state = c;
  return KB_OK;
kdag_fail:
  st = kb_run_fail(run, "kdag: %s", kd_last_error());
fail:
  kdag_teardown(run, c);
  return st;
}

static kb_status kdag_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  kdag_chain *c = state;
  return kb_kdag_submit_batch(run, &c->k, c->graph, iterations, out);
}

static kb_case_desc hand_case(const char *name, const char *description, const hand_variant *v) {
  kb_case_desc d = {.name = name, .description = description, .setup = graph_setup, .batch = graph_batch,
                    .teardown = graph_teardown, .user = (void *)v};
  return d;
}

int kb_register_launch_suite(kb_harness *h) {
  static const kb_kernel_spec kernel = {kd_kernel_test_cubin, kd_kernel_test_ptx, "empty_kernel"};
  kb_suite_desc sd = {
      .name = "launch",
      .description = "a chain of N empty kernels per submission, one completion event each",
      .needs_gpu = 1, .init = kb_kernel_suite_init, .fini = kb_kernel_suite_fini,
      .flush = kb_kernel_suite_flush, .user = (void *)&kernel, .interleave = 1, .host_cost = 1};
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
  static const kd_exec_mode eager = KD_EXEC_EAGER, graph_mode = KD_EXEC_GRAPH;
  kb_case_desc kdag = {.name = "kdag_eager",
                       .description = "the chain as a kdag graph of N kernel nodes joined by explicit edges, "
                                      "kd_graph_submit per submission (EAGER: one completion event each)",
                       .setup = kdag_setup, .batch = kdag_batch, .teardown = kdag_teardown,
                       .user = (void *)&eager};
  kb_case_desc kgraph_again = {.name = "kdag_graph_again",
                               .description = "kdag_graph again, on a second GRAPH session set up after the "
                                              "diagnostics (diagnostic)",
                               .setup = kdag_setup, .batch = kdag_batch, .teardown = kdag_teardown,
                               .user = (void *)&graph_mode};
  kb_case_desc kgraph = {.name = "kdag_graph",
                         .description = "the same kdag graph on a session with exec_mode GRAPH: one "
                                        "instantiated CUDA graph per plan, one launch per submission (issue 5: "
                                        "<= 1.05x hand_graph GPU time per node, and host time for N >= 100; "
                                        ">= 4x faster per node than raw_loop for N >= 100)",
                         .setup = kdag_setup, .batch = kdag_batch, .teardown = kdag_teardown,
                         .user = (void *)&graph_mode};
  /* Diagnostics: hand_graph with one of kdag_graph's differences each. */
  static const hand_variant upload = {.upload = 1}, events = {.events = 1}, on_session = {.on_session = 1},
                            own_stream = {.own_stream = 1}, own_pool = {.own_stream = 1, .own_pool = 1},
                            own_pool_used = {.own_stream = 1, .own_pool = 2},
                            beside = {.own_stream = 1, .beside = 1}, again = {0}, stream_again = {.own_stream = 1},
                            stream_first = {.own_stream = 1}, ctx_query = {.ctx_query = 1},
                            kdag_calls = {.events = 1, .ctx_query = 1, .reap = 1};
  static const struct { const char *name, *description; const hand_variant *v; } diag[] = {
      {"hand_graph_upload", "hand_graph instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD, as kdag does (diagnostic)", &upload},
      {"hand_graph_events", "hand_graph recording one of 64 events per launch, as kdag's completion ring does (diagnostic)",
       &events},
      {"hand_graph_session", "hand_graph launched on a kdag session's stream inside one raw scope per batch (diagnostic)",
       &on_session},
      {"hand_graph_stream", "hand_graph launched on a non-blocking stream the case creates, no kdag session (diagnostic)",
       &own_stream},
      {"hand_graph_stream_pool", "hand_graph_stream with a memory pool created before the stream, as a kdag "
       "session has (diagnostic)", &own_pool},
      {"hand_graph_stream_pool_used", "hand_graph_stream_pool after one allocation from the pool on the stream (diagnostic)",
       &own_pool_used},
      {"hand_graph_stream_beside", "hand_graph_stream created while an idle kdag session is open (diagnostic)", &beside},
      {"hand_graph_ctx", "hand_graph asking cuCtxGetCurrent before each launch, as kdag's entry points do (diagnostic)",
       &ctx_query},
      {"hand_graph_kdag_calls", "hand_graph making every driver call a kdag_graph relaunch makes: cuCtxGetCurrent, "
       "an event from a pool as kdag's (the last retired first), and every 64th launch the reap's event queries "
       "(diagnostic)", &kdag_calls},
      /* Copies: how far two instances of one case (another executable
       * graph; another stream, made later) differ, the floor under any
       * difference above. */
      {"hand_graph_again", "hand_graph again, a second executable graph on the suite's stream (diagnostic)", &again},
      {"hand_graph_stream_again", "hand_graph_stream again, on another stream made later (diagnostic)",
       &stream_again}};
  /* Cases run in this order at each N. The graph cases come first: on the
   * H200 the GPU time of a 10-node graph launch, hand-built or not, rose by
   * a third after the EAGER case had run (2026-12-03, without turns), and
   * kdag_eager, compared with raw_loop (host bound), last.
   * hand_graph_stream_first is set up before kdag_graph, so its stream is
   * the second made in the context and the session's the third: a 10-node
   * graph's GPU time varies by a few percent with that order (r6: 1.05x on
   * the second stream, kdag_graph 1.01x on the third). */
  kb_case_desc first = hand_case("hand_graph_stream_first",
                                 "hand_graph_stream set up before kdag_graph, its stream the second made (diagnostic)",
                                 &stream_first);
  if (kb_suite_axis(s, "N", n, sizeof n / sizeof n[0]) || kb_case_add(s, &raw) || kb_case_add(s, &graph) ||
      kb_case_add(s, &first) || kb_case_add(s, &kgraph))
    return -1;
  for (size_t i = 0; i < sizeof diag / sizeof diag[0]; ++i) {
    kb_case_desc d = hand_case(diag[i].name, diag[i].description, diag[i].v);
    if (kb_case_add(s, &d)) return -1;
  }
  if (kb_case_add(s, &kgraph_again) || kb_case_add(s, &kdag)) return -1;
  return 0;
}
