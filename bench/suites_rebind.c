/* SPDX-License-Identifier: Apache-2.0 */
/* Suite "rebind" (issue 5): re-submitting one GRAPH-mode kdag graph, a
 * chain of N step kernels (node i: t[i+1] = 0.5 t[i] + 1, 256 floats, one
 * block), with and without rebinding tensors between submissions:
 *   relaunch    kd_graph_submit, nothing changed (baseline)
 *   rebind_one  kd_graph_rebind of the chain's input t[0], alternating
 *               between two tensors, then kd_graph_submit (issue 5's
 *               target: <= 1.2x relaunch's host time per submission)
 *   rebind_all  every tensor t[0..N] rebound to its alternate, then submit
 *   hand_graph  cuGraphLaunch + cuEventRecord of the equivalent executable
 *               CUDA graph built by hand (baseline)
 *   hand_rebind_one  the same with the first node's input switched by
 *               cuGraphExecKernelNodeSetParams before each launch: the
 *               driver's own cost of what rebind_one does
 *   hand_rebind_one_upload  the same, instantiated with the upload flag
 *               as kdag instantiates (diagnostic)
 *   hand_rebind_one_extra  hand_rebind_one_upload passing the parameters
 *               as one buffer (CU_LAUNCH_PARAM_BUFFER_POINTER in extra), laid
 *               out at the offsets cuFuncGetParamInfo gives (diagnostic: the
 *               driver's other way to take them)
 *   rebind_only the kd_graph_rebind calls of rebind_one with no
 *               submission: kdag's part before the patch (diagnostic)
 *   rebind_undone  rebind_one's kd_graph_rebind, then one back to the
 *               tensor the executable graph holds, then kd_graph_submit:
 *               every step of kdag's rebinding path (the patch walk
 *               resolves the node and finds its parameters unchanged) but
 *               the driver's patch, on the real driver (diagnostic:
 *               rebind_one - rebind_undone + rebind_only is the patch call
 *               as kdag makes it, next to hand_rebind_one - hand_graph)
 * The host time per submission includes the kd_graph_rebind calls. The
 * header promises that GRAPH mode patches the executable graph in place
 * when only bindings change: the setup warns (stderr) when a rebinding
 * re-instantiated it instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/gpu.h"
#include "bench/kdag_session.h"
#include "bench/suites.h"
#include "kdag/kdag.h"
#include "kernels/embedded.h"

#define REBIND_ELEMS 256

typedef enum rebind_kind { RELAUNCH, REBIND_ONE, REBIND_ALL, REBIND_ONLY, REBIND_UNDONE } rebind_kind;

/* What a hand case does: rebind node 0 before each launch; instantiate
 * with CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD, as kdag does. */
typedef struct hand_kind {
  int rebind, upload, extra;
} hand_kind;

static int64_t chain_length(kb_run *run) { return kb_run_axis(run, "N", 100); }

static kb_status declare(kb_run *run) {
  int64_t n = chain_length(run);
  if (n < 1 || n > 100000) return kb_run_fail(run, "N must be in 1..100000, not %lld", (long long)n);
  kb_run_per_iteration(run, 1, "submission");
  return KB_OK;
}

/* ---- hand_graph ------------------------------------------------------------ */

typedef struct hand_chain {
  CUdeviceptr buffers; /* (N + 2) x 256 floats: the chain's N + 1, then the alternate input */
  CUgraph graph;
  CUgraphExec exec;
  int rebind;          /* hand_rebind_one* */
  int extra;           /* hand_rebind_one_extra: patch through one parameter buffer */
  size_t offsets[3], buffer_size;
  unsigned char buffer[64];
  CUgraphNode first;
  CUDA_KERNEL_NODE_PARAMS first_params;
  CUdeviceptr first_out, inputs[2];
  int elems;
  unsigned flip;
} hand_chain;

static void hand_teardown(kb_run *run, void *state) {
  hand_chain *c = state;
  if (!c) return;
  kb_kernel_suite *s = kb_run_suite_state(run);
  const kd_cu_table *cu = s->g->cu;
  cu->cuStreamSynchronize(s->g->stream);
  if (c->exec) cu->cuGraphExecDestroy(c->exec);
  if (c->graph) cu->cuGraphDestroy(c->graph);
  if (c->buffers) cu->cuMemFree(c->buffers);
  free(c);
}

static kb_status hand_setup(kb_run *run, void **state) {
  kb_status st = declare(run);
  if (st) return st;
  kb_kernel_suite *s = kb_run_suite_state(run);
  const kd_cu_table *cu = s->g->cu;
  hand_chain *c = calloc(1, sizeof *c);
  if (!c) return kb_run_fail(run, "out of memory");
  int64_t n = chain_length(run);
  size_t stride = REBIND_ELEMS * sizeof(float);
  static const hand_kind plain = {0};
  const hand_kind *kind = kb_run_user(run) ? kb_run_user(run) : &plain;
  c->rebind = kind->rebind;
  c->extra = kind->extra;
  if (c->extra) { /* where the driver wants each of (out, in, elems) */
    if (!cu->cuFuncGetParamInfo) {
      st = kb_run_skip(run, "the driver has no cuFuncGetParamInfo (CUDA 12.4+)");
      goto fail;
    }
    for (size_t i = 0; i < 3; ++i) {
      size_t size = 0;
      if ((st = kb_gpu_check(run, cu->cuFuncGetParamInfo(s->fn, i, &c->offsets[i], &size), "cuFuncGetParamInfo")))
        goto fail;
      if (c->offsets[i] + size > c->buffer_size) c->buffer_size = c->offsets[i] + size;
    }
    size_t offset = 0, size = 0;
    if (cu->cuFuncGetParamInfo(s->fn, 3, &offset, &size) != CUDA_ERROR_INVALID_VALUE) {
      st = kb_run_fail(run, "the step kernel takes more than (out, in, elems)");
      goto fail;
    }
    if (c->buffer_size > sizeof c->buffer) {
      st = kb_run_fail(run, "the step kernel's parameters take %zu bytes", c->buffer_size);
      goto fail;
    }
  }
  if ((st = kb_gpu_check(run, cu->cuMemAlloc(&c->buffers, (size_t)(n + 2) * stride), "cuMemAlloc(chain)")) ||
      /* Defined inputs (and everything else): zeros. */
      (st = kb_gpu_check(run, cu->cuMemsetD32Async(c->buffers, 0, (size_t)(n + 2) * REBIND_ELEMS, s->g->stream),
                         "cuMemsetD32Async(chain)")) ||
      (st = kb_gpu_check(run, cu->cuGraphCreate(&c->graph, 0), "cuGraphCreate")))
    goto fail;
  CUgraphNode prev = NULL;
  int elems = REBIND_ELEMS;
  for (int64_t i = 0; i < n; ++i) {
    CUdeviceptr in = c->buffers + (CUdeviceptr)i * stride, out = in + stride;
    void *params[] = {&out, &in, &elems}; /* copied by cuGraphAddKernelNode */
    CUDA_KERNEL_NODE_PARAMS kp = {0};
    kp.func = s->fn;
    kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = REBIND_ELEMS, kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = params;
    CUgraphNode node;
    if ((st = kb_gpu_check(run, cu->cuGraphAddKernelNode(&node, c->graph, prev ? &prev : NULL, prev ? 1 : 0, &kp),
                           "cuGraphAddKernelNode")))
      goto fail;
    if (i == 0) {
      c->first = node;
      c->first_params = kp;
      c->first_out = out;
      c->inputs[0] = in;
      c->inputs[1] = c->buffers + (CUdeviceptr)(n + 1) * stride;
    }
    prev = node;
  }
  c->elems = elems;
  if ((st = kb_gpu_instantiate(s->g, run, c->graph, kind->upload, &c->exec)) ||
      (st = kb_gpu_check(run, cu->cuStreamSynchronize(s->g->stream), "cuStreamSynchronize")))
    goto fail;
  *state = c;
  return KB_OK;
fail:
  hand_teardown(run, c);
  return st;
}

static kb_status hand_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  hand_chain *c = state;
  kb_kernel_suite *s = kb_run_suite_state(run);
  const kd_cu_table *cu = s->g->cu;
  CUstream stream = s->g->stream;
  uint64_t t0 = 0; /* set by the begin call, after its event */
  kb_status st = kb_gpu_batch_begin(s->g, run, &t0);
  if (st) return st;
  for (uint64_t it = 0; it < iterations; ++it) {
    if (c->rebind) { /* node 0 reads the other input from now on */
      CUdeviceptr in = c->inputs[++c->flip & 1];
      void *params[] = {&c->first_out, &in, &c->elems};
      CUDA_KERNEL_NODE_PARAMS kp = c->first_params;
      kp.kernelParams = params;
      void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, c->buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &c->buffer_size,
                       CU_LAUNCH_PARAM_END};
      if (c->extra) {
        memcpy(c->buffer + c->offsets[0], &c->first_out, sizeof c->first_out);
        memcpy(c->buffer + c->offsets[1], &in, sizeof in);
        memcpy(c->buffer + c->offsets[2], &c->elems, sizeof c->elems);
        kp.kernelParams = NULL;
        kp.extra = extra;
      }
      CUresult e = cu->cuGraphExecKernelNodeSetParams(c->exec, c->first, &kp);
      if (e != CUDA_SUCCESS) return kb_gpu_check(run, e, "cuGraphExecKernelNodeSetParams");
    }
    CUresult e = cu->cuGraphLaunch(c->exec, stream);
    if (e != CUDA_SUCCESS) return kb_gpu_check(run, e, "cuGraphLaunch");
    e = cu->cuEventRecord(s->done, stream);
    if (e != CUDA_SUCCESS) return kb_gpu_check(run, e, "cuEventRecord(done)");
  }
  return kb_gpu_batch_end(s->g, run, t0, out);
}

/* ---- the kdag cases ------------------------------------------------------- */

typedef struct kdag_chain {
  kb_kdag k;
  kd_graph *graph;
  rebind_kind kind;
  int64_t n;
  kd_tensor *t[2]; /* t[0][i] and its alternate t[1][i], i in 0..n */
  unsigned char *bound; /* which of the two t[.][i] the graph uses now */
} kdag_chain;

static void kdag_teardown(kb_run *run, void *state) {
  (void)run;
  kdag_chain *c = state;
  if (!c) return;
  kd_graph_destroy(c->graph);
  kb_kdag_close(&c->k); /* also frees the tensors */
  free(c->t[0]);
  free(c->t[1]);
  free(c->bound);
  free(c);
}

/* Rebinds what this case rebinds, each to its alternate (REBIND_UNDONE:
 * and back). */
static kd_status rebind_step(kdag_chain *c) {
  int64_t count = c->kind == REBIND_ALL ? c->n + 1 : c->kind == RELAUNCH ? 0 : 1;
  for (int64_t i = 0; i < count; ++i) {
    for (int k = 0; k < (c->kind == REBIND_UNDONE ? 2 : 1); ++k) {
      unsigned b = c->bound[i];
      kd_status st = kd_graph_rebind(c->graph, c->t[b][i], c->t[!b][i]);
      if (st) return st;
      c->bound[i] = (unsigned char)!b;
    }
  }
  return KD_OK;
}

static kb_status kdag_setup(kb_run *run, void **state) {
  kb_status st = declare(run);
  if (st) return st;
  kdag_chain *c = calloc(1, sizeof *c);
  if (!c) return kb_run_fail(run, "out of memory");
  c->kind = *(const rebind_kind *)kb_run_user(run);
  c->n = chain_length(run);
  c->t[0] = calloc((size_t)c->n + 1, sizeof(kd_tensor));
  c->t[1] = calloc((size_t)c->n + 1, sizeof(kd_tensor));
  c->bound = calloc((size_t)c->n + 1, 1);
  if (!c->t[0] || !c->t[1] || !c->bound) {
    kdag_teardown(run, c);
    return kb_run_fail(run, "out of memory");
  }
  kd_function fn;
  if ((st = kb_kdag_open(run, KD_EXEC_GRAPH, &c->k)) ||
      (st = kb_kdag_function(run, &c->k, kd_kernel_bench_cubin, kd_kernel_bench_cubin_size, kd_kernel_bench_ptx,
                             kd_kernel_bench_ptx_size, "bench_step_kernel", &fn)))
    goto fail;
  kd_session *session = c->k.session;
  /* Every tensor and its alternate start as zeros, so each is initialised
   * whichever of the pair the graph reads. */
  static const float zeros[REBIND_ELEMS];
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {REBIND_ELEMS}};
  for (int b = 0; b < 2; ++b)
    for (int64_t i = 0; i <= c->n; ++i)
      if (kd_tensor_from_host(session, &d, zeros, sizeof zeros, &c->t[b][i])) goto kdag_fail;
  if (kd_graph_create(session, &c->graph)) goto kdag_fail;
  kd_launch_config config = {{1, 1, 1}, {REBIND_ELEMS, 1, 1}, 0, 0};
  for (int64_t i = 0; i < c->n; ++i) {
    kd_garg args[] = {kd_g_out(kd_whole(c->t[0][i + 1])), kd_g_in(kd_whole(c->t[0][i])),
                      kd_g_value(kd_arg_i32(REBIND_ELEMS))};
    if (kd_graph_kernel(c->graph, "step", fn, &config, args, 3, NULL)) goto kdag_fail;
  }
  if ((st = kb_kdag_preflight(run, &c->k, c->graph))) goto fail;
  if (c->kind != RELAUNCH) {
    /* One rebinding submission outside the timing: it must not instantiate
     * a new executable graph (the header's promise); warn if it does. */
    kd_session_stats before, after;
    if ((st = kb_kdag_counters(run, &c->k, &before))) goto fail;
    if (rebind_step(c) || kd_graph_submit(c->graph, NULL)) goto kdag_fail;
    if ((st = kb_kdag_wait(run, &c->k)) || (st = kb_kdag_counters(run, &c->k, &after))) goto fail;
    if (after.graph_instantiations != before.graph_instantiations)
      fprintf(stderr,
              "kdag-bench: rebind/%s: a submission after kd_graph_rebind instantiated the CUDA graph again "
              "(graph_instantiations %llu -> %llu, graph_updates %llu -> %llu); expected an in-place update\n",
              kb_run_case_name(run), (unsigned long long)before.graph_instantiations,
              (unsigned long long)after.graph_instantiations, (unsigned long long)before.graph_updates,
              (unsigned long long)after.graph_updates);
  }
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
  uint64_t t0 = 0; /* set by the begin call, after its event */
  kb_status st = kb_kdag_begin(run, &c->k, &t0);
  if (st) return st;
  for (uint64_t it = 0; it < iterations; ++it) {
    if (rebind_step(c)) return kb_run_fail(run, "kd_graph_rebind: %s", kd_last_error());
    if (c->kind != REBIND_ONLY && kd_graph_submit(c->graph, NULL))
      return kb_run_fail(run, "kd_graph_submit: %s", kd_last_error());
  }
  return kb_kdag_end(run, &c->k, t0, out);
}

int kb_register_rebind_suite(kb_harness *h) {
  static const kb_kernel_spec kernel = {kd_kernel_bench_cubin, kd_kernel_bench_ptx, "bench_step_kernel"};
  kb_suite_desc sd = {.name = "rebind",
                      .description = "re-submitting a GRAPH-mode chain of N step kernels, with tensors rebound "
                                     "between submissions (host cost per submission)",
                      .needs_gpu = 1, .init = kb_kernel_suite_init, .fini = kb_kernel_suite_fini,
                      .flush = kb_kernel_suite_flush, .user = (void *)&kernel, .interleave = 1,
                      .host_cost = 1};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  static const int64_t n[] = {100};
  static const rebind_kind relaunch = RELAUNCH, one = REBIND_ONE, all = REBIND_ALL, only = REBIND_ONLY,
                           undone = REBIND_UNDONE;
  static const hand_kind hand_one = {.rebind = 1}, hand_one_upload = {.rebind = 1, .upload = 1},
                         hand_one_extra = {.rebind = 1, .upload = 1, .extra = 1};
  kb_case_desc cases[] = {
      {.name = "relaunch", .description = "kd_graph_submit of the unchanged graph (exec_mode GRAPH)",
       .baseline = 1, .setup = kdag_setup, .batch = kdag_batch, .teardown = kdag_teardown,
       .user = (void *)&relaunch},
      {.name = "rebind_one",
       .description = "kd_graph_rebind of the input (alternating between two tensors) + kd_graph_submit "
                      "(issue 5: host time <= 1.2x relaunch)",
       .setup = kdag_setup, .batch = kdag_batch, .teardown = kdag_teardown, .user = (void *)&one},
      {.name = "rebind_all", .description = "kd_graph_rebind of all N + 1 tensors + kd_graph_submit",
       .setup = kdag_setup, .batch = kdag_batch, .teardown = kdag_teardown, .user = (void *)&all},
      {.name = "hand_graph",
       .description = "cuGraphLaunch + cuEventRecord of the same chain built by hand, instantiated once",
       .baseline = 1, .setup = hand_setup, .batch = hand_batch, .teardown = hand_teardown},
      {.name = "hand_rebind_one",
       .description = "hand_graph with node 0's input switched by cuGraphExecKernelNodeSetParams before each "
                      "launch: the driver's part of rebind_one (diagnostic)",
       .setup = hand_setup, .batch = hand_batch, .teardown = hand_teardown, .user = (void *)&hand_one},
      {.name = "hand_rebind_one_upload",
       .description = "hand_rebind_one instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD, as kdag does "
                      "(diagnostic)",
       .setup = hand_setup, .batch = hand_batch, .teardown = hand_teardown, .user = (void *)&hand_one_upload},
      {.name = "hand_rebind_one_extra",
       .description = "hand_rebind_one_upload passing the parameters as one buffer (extra, "
                      "CU_LAUNCH_PARAM_BUFFER_POINTER) instead of kernelParams (diagnostic)",
       .setup = hand_setup, .batch = hand_batch, .teardown = hand_teardown, .user = (void *)&hand_one_extra},
      {.name = "rebind_only",
       .description = "kd_graph_rebind of the input alone, no submission: kdag's own part of rebind_one before "
                      "the patch (diagnostic)",
       .setup = kdag_setup, .batch = kdag_batch, .teardown = kdag_teardown, .user = (void *)&only},
      {.name = "rebind_undone",
       .description = "kd_graph_rebind of the input and back, then kd_graph_submit: kdag's rebinding path with "
                      "the parameters found unchanged, so no driver patch (diagnostic)",
       .setup = kdag_setup, .batch = kdag_batch, .teardown = kdag_teardown, .user = (void *)&undone}};
  if (kb_suite_axis(s, "N", n, 1)) return -1;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    if (kb_case_add(s, &cases[i])) return -1;
  return 0;
}
