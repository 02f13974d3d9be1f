/* SPDX-License-Identifier: Apache-2.0 */
/* Suites "workloads_*": pipelines a user would write (bench/workloads.h),
 * each against hand-written CUDA of the same kernels in the same run:
 *   hand_loop   every kernel of a submission by cuLaunchKernel on one
 *               stream, and one completion event (kdag records one)
 *   hand_graph  the same kernels as a CUDA graph built by hand: a chain,
 *               or a chain per image (what one would write), launched
 *               with a completion event
 *   kdag_eager  the workload's kdag graph on an EAGER session
 *   kdag_graph  the same on a GRAPH session
 *   kdag_declare declaring the workload's graph: host time per node, and
 *               edges_per_node (mean in-degree) and edges_in_max_per_node
 *               (the most edges into one node) as counts
 * An iteration is one sweep, CG iteration, pass over the images or
 * factor-and-solve of the systems: times are per iteration; a submission
 * runs `iters` of them. Every case checks
 * its result against the host reference (bit-exact) before it is timed.
 *
 * Suite "workloads_declare" (CPU, HOST): the Jacobi of built-ins declared
 * at 100, 1,000 and 10,000 sweeps on 256^2 and 8192^2 grids: host time per
 * node, edges_per_node and edges_in_max_per_node.
 *
 * Suite "workloads_host" (CPU): the Jacobi of built-ins run on a HOST
 * session (checked bit-exact against the reference first) against the
 * reference's own sweep as a C loop on one thread: time per sweep. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/gpu.h"
#include "bench/kdag_session.h"
#include "bench/suites.h"
#include "bench/workloads.h"
#include "kernels/embedded.h"

#define PARAM_BYTES sizeof(kd_kview) /* the largest parameter: a built-in's view */
#define MAX_PARAMS 6
#define GRAPH_MIN_BATCH 4

typedef struct wl_suite_spec {
  kb_wl_kind kind;
} wl_suite_spec;

static kb_wl_spec spec_of(kb_run *run) {
  const wl_suite_spec *u = kb_run_user(run);
  kb_wl_spec s = {u->kind, kb_run_axis(run, "n", 256), (int)kb_run_axis(run, "iters", 10),
                  (int)kb_run_axis(run, "batch", 0)};
  return s;
}

static kb_status declare_iteration(kb_run *run, kb_wl_spec *spec) {
  *spec = spec_of(run);
  char why[256];
  if (kb_wl_spec_check(spec, why, sizeof why)) return kb_run_fail(run, "%s", why);
  kb_run_per_iteration(run, spec->iters, "iteration");
  return KB_OK;
}

/* ---- the hand-written baselines ---------------------------------------------- */

typedef struct hand_launch {
  CUfunction fn;
  kb_wl_launch_cfg cfg;
  uint32_t shared;      /* dynamic shared memory bytes */
  int chain;            /* hand_graph: follows the last launch of its chain */
  unsigned count;
  unsigned char values[MAX_PARAMS][PARAM_BYTES];
  void *params[MAX_PARAMS];
} hand_launch;

typedef struct hand {
  kb_wl_spec spec;
  kb_gpu *g;
  CUmodule user, builtins;
  kd_launch_config dx[2]; /* cholesky: potrf's, potrs's */
  CUdeviceptr buf[8];
  int buffers;
  hand_launch *launches; /* one submission's */
  size_t count;
  CUgraph graph;
  CUgraphExec exec;
  CUevent done;
} hand;

static void hand_teardown(kb_run *run, void *state) {
  (void)run;
  hand *h = state;
  if (!h) return;
  const kd_cu_table *cu = h->g->cu;
  cu->cuStreamSynchronize(h->g->stream);
  if (h->exec) cu->cuGraphExecDestroy(h->exec);
  if (h->graph) cu->cuGraphDestroy(h->graph);
  if (h->done) cu->cuEventDestroy(h->done);
  for (int i = 0; i < h->buffers; ++i) cu->cuMemFree(h->buf[i]);
  if (h->user) cu->cuModuleUnload(h->user);
  if (h->builtins) cu->cuModuleUnload(h->builtins);
  free(h->launches);
  free(h);
}

static hand_launch *add_launch(hand *h, CUmodule m, const char *kernel, kb_wl_launch_cfg cfg, int chain) {
  hand_launch *l = &h->launches[h->count++];
  memset(l, 0, sizeof *l);
  if (h->g->cu->cuModuleGetFunction(&l->fn, m, kernel) != CUDA_SUCCESS) return NULL;
  l->cfg = cfg;
  l->chain = chain;
  return l;
}

static void arg(hand_launch *l, const void *value, size_t bytes) {
  memcpy(l->values[l->count], value, bytes);
  l->params[l->count] = l->values[l->count];
  l->count++;
}
static void arg_ptr(hand_launch *l, CUdeviceptr p) { arg(l, &p, sizeof p); }
static void arg_int(hand_launch *l, int v) { arg(l, &v, sizeof v); }

/* kdag's launch of a built-in kernel over `elements`: 256 threads, a
 * grid-stride loop over at most 32 blocks a multiprocessor
 * (exec/eager.c). */
static kb_wl_launch_cfg builtin_config(int64_t elements, int sm_count) {
  int64_t want = (elements + 255) / 256, cap = (int64_t)sm_count * 32;
  kb_wl_launch_cfg c = {{(uint32_t)(want < cap ? want : cap), 1, 1}, {256, 1, 1}};
  return c;
}

/* A whole compact tensor of rank r and shape as kdag views it. */
static kd_kview whole(CUdeviceptr base, int r, const int64_t *shape) {
  kd_kview v;
  memset(&v, 0, sizeof v);
  v.base = base;
  v.rank = r;
  for (int d = 0, stride = 1; d < r; stride *= (int)shape[d], ++d) {
    v.shape[d] = shape[d];
    v.strides[d] = stride;
  }
  return v;
}

static hand_launch *add_dx_launch(hand *h, const char *kernel, const kd_launch_config *c) {
  kb_wl_launch_cfg cfg = {{c->grid[0], c->grid[1], c->grid[2]}, {c->block[0], c->block[1], c->block[2]}};
  hand_launch *l = add_launch(h, h->user, kernel, cfg, 0);
  if (l) l->shared = c->shared_bytes;
  return l;
}

/* A view of an n x n grid's interior, shifted by (di, dj), as kdag passes
 * it to a built-in kernel. */
static kd_kview interior(CUdeviceptr base, int64_t n, int di, int dj) {
  kd_kview v;
  memset(&v, 0, sizeof v);
  v.base = base + (CUdeviceptr)(((1 + di) + (1 + dj) * n) * 4);
  v.rank = 2;
  v.shape[0] = v.shape[1] = n - 2;
  v.strides[0] = 1;
  v.strides[1] = n;
  return v;
}

/* The launches of one submission, in the order kb_wl_declare adds the
 * nodes, with the same kernels, configs and arguments. 0, or -1. */
static int hand_launches(hand *h, int sm_count) {
  const kb_wl_spec *s = &h->spec;
  int64_t n = s->n, plane = n * n;
  h->launches = calloc((size_t)kb_wl_nodes(s), sizeof *h->launches);
  if (!h->launches) return -1;
  for (int it = 0; it < s->iters; ++it) {
    hand_launch *l;
    switch (s->kind) {
    case KB_WL_JACOBI: {
      CUdeviceptr a = h->buf[it % 2], b = h->buf[1 - it % 2];
      kb_wl_launch_cfg c = builtin_config((n - 2) * (n - 2), sm_count);
      kd_kview in = interior(b, n, 0, 0), up = interior(a, n, -1, 0), down = interior(a, n, 1, 0);
      kd_kview left = interior(a, n, 0, -1), right = interior(a, n, 0, 1);
      double one = 1.0, quarter = 0.25;
      if (!(l = add_launch(h, h->builtins, "kd_add_f32", c, 0))) return -1;
      arg(l, &in, sizeof in), arg(l, &up, sizeof up), arg(l, &down, sizeof down);
      if (!(l = add_launch(h, h->builtins, "kd_axpy_f32", c, 0))) return -1;
      arg(l, &in, sizeof in), arg(l, &left, sizeof left), arg(l, &one, sizeof one);
      if (!(l = add_launch(h, h->builtins, "kd_axpy_f32", c, 0))) return -1;
      arg(l, &in, sizeof in), arg(l, &right, sizeof right), arg(l, &one, sizeof one);
      if (!(l = add_launch(h, h->builtins, "kd_scale_f32", c, 0))) return -1;
      arg(l, &in, sizeof in), arg(l, &quarter, sizeof quarter);
      break;
    }
    case KB_WL_JACOBI_KERNEL:
      if (!(l = add_launch(h, h->user, "jacobi_step", kb_wl_config(s, "jacobi_step", plane), 0))) return -1;
      arg_ptr(l, h->buf[1 - it % 2]), arg_ptr(l, h->buf[it % 2]), arg_int(l, (int)n);
      break;
    case KB_WL_CG: {
      CUdeviceptr x = h->buf[0], r = h->buf[1], p = h->buf[2], ap = h->buf[3], sc = h->buf[4];
      CUdeviceptr rr = sc, pap = sc + 4, rrn = sc + 8, alpha = sc + 12, beta = sc + 16;
      if (!(l = add_launch(h, h->user, "poisson_apply", kb_wl_config(s, "poisson_apply", plane), 0))) return -1;
      arg_ptr(l, ap), arg_ptr(l, p), arg_int(l, (int)n);
      if (!(l = add_launch(h, h->user, "dot", kb_wl_config(s, "dot", plane), 0))) return -1;
      arg_ptr(l, pap), arg_ptr(l, p), arg_ptr(l, ap), arg_int(l, (int)plane);
      if (!(l = add_launch(h, h->user, "cg_alpha", kb_wl_config(s, "cg_alpha", 1), 0))) return -1;
      arg_ptr(l, alpha), arg_ptr(l, rr), arg_ptr(l, pap);
      if (!(l = add_launch(h, h->user, "cg_update", kb_wl_config(s, "cg_update", plane), 0))) return -1;
      arg_ptr(l, x), arg_ptr(l, r), arg_ptr(l, p), arg_ptr(l, ap), arg_ptr(l, alpha), arg_int(l, (int)plane);
      if (!(l = add_launch(h, h->user, "dot", kb_wl_config(s, "dot", plane), 0))) return -1;
      arg_ptr(l, rrn), arg_ptr(l, r), arg_ptr(l, r), arg_int(l, (int)plane);
      if (!(l = add_launch(h, h->user, "cg_beta", kb_wl_config(s, "cg_beta", 1), 0))) return -1;
      arg_ptr(l, beta), arg_ptr(l, rr), arg_ptr(l, rrn);
      if (!(l = add_launch(h, h->user, "cg_direction", kb_wl_config(s, "cg_direction", plane), 0))) return -1;
      arg_ptr(l, p), arg_ptr(l, r), arg_ptr(l, beta), arg_int(l, (int)plane);
      break;
    }
    case KB_WL_IMAGE:
      for (int k = 0; k < s->batch; ++k) {
        CUdeviceptr img = h->buf[0] + (CUdeviceptr)(k * plane * 4), blur = h->buf[1] + (CUdeviceptr)(k * plane * 4);
        CUdeviceptr grad = h->buf[2] + (CUdeviceptr)(k * plane * 4), mask = h->buf[3] + (CUdeviceptr)(k * plane * 4);
        CUdeviceptr hist = h->buf[4] + (CUdeviceptr)(k * 64 * 4);
        if (!(l = add_launch(h, h->user, "blur3", kb_wl_config(s, "blur3", plane), k))) return -1;
        arg_ptr(l, blur), arg_ptr(l, img), arg_int(l, (int)n), arg_int(l, (int)n);
        if (!(l = add_launch(h, h->user, "gradient", kb_wl_config(s, "gradient", plane), k))) return -1;
        arg_ptr(l, grad), arg_ptr(l, blur), arg_int(l, (int)n), arg_int(l, (int)n);
        if (!(l = add_launch(h, h->user, "threshold", kb_wl_config(s, "threshold", plane), k))) return -1;
        arg_ptr(l, mask), arg_ptr(l, grad), arg_int(l, 200), arg_int(l, (int)plane);
        if (!(l = add_launch(h, h->user, "histogram", kb_wl_config(s, "histogram", plane), k))) return -1;
        arg_ptr(l, hist), arg_ptr(l, blur), arg_ptr(l, mask), arg_int(l, (int)plane), arg_int(l, 64), arg_int(l, 6);
      }
      break;
    case KB_WL_CHOLESKY: {
      int64_t mats[3] = {32, 32, s->batch}, vecs[2] = {32, s->batch};
      kd_kview a0 = whole(h->buf[0], 3, mats), a = whole(h->buf[1], 3, mats);
      kd_kview b0 = whole(h->buf[2], 2, vecs), x = whole(h->buf[3], 2, vecs);
      if (!(l = add_launch(h, h->builtins, "kd_copy_e8", builtin_config(32 * 32 * s->batch, sm_count), 0))) return -1;
      arg(l, &a, sizeof a), arg(l, &a0, sizeof a0);
      if (!(l = add_launch(h, h->builtins, "kd_copy_e8", builtin_config(32 * s->batch, sm_count), 0))) return -1;
      arg(l, &x, sizeof x), arg(l, &b0, sizeof b0);
      if (!(l = add_dx_launch(h, "dx_potrf_batched", &h->dx[0]))) return -1;
      arg_ptr(l, h->buf[1]), arg_ptr(l, h->buf[4]), arg_int(l, s->batch);
      if (!(l = add_dx_launch(h, "dx_potrs_batched", &h->dx[1]))) return -1;
      arg_ptr(l, h->buf[3]), arg_ptr(l, h->buf[1]), arg_int(l, s->batch);
      break;
    }
    }
  }
  return 0;
}

/* Launches one submission's kernels on the stream. */
static kb_status hand_enqueue(kb_run *run, hand *h) {
  const kd_cu_table *cu = h->g->cu;
  for (size_t i = 0; i < h->count; ++i) {
    const hand_launch *l = &h->launches[i];
    CUresult r = cu->cuLaunchKernel(l->fn, l->cfg.grid[0], l->cfg.grid[1], l->cfg.grid[2], l->cfg.block[0],
                                    l->cfg.block[1], l->cfg.block[2], l->shared, h->g->stream, (void **)l->params,
                                    NULL);
    if (r != CUDA_SUCCESS) return kb_gpu_check(run, r, "cuLaunchKernel");
  }
  return KB_OK;
}

/* Runs one submission and holds its result to the host reference. */
static kb_status hand_check(kb_run *run, hand *h) {
  const kd_cu_table *cu = h->g->cu;
  kb_status st = hand_enqueue(run, h);
  if (st) return st;
  if ((st = kb_gpu_check(run, cu->cuStreamSynchronize(h->g->stream), "cuStreamSynchronize"))) return st;
  void *got = NULL;
  int bad = 0;
  void *const *want = kb_wl_reference(&h->spec, 1);
  if (!want) return kb_run_fail(run, "out of memory");
  unsigned results = kb_wl_results(&h->spec);
  for (int i = 0; i < h->buffers && !st && !bad; ++i) {
    if (!(results >> i & 1)) continue;
    size_t bytes = kb_wl_buffer_bytes(&h->spec, i);
    if (!(got = malloc(bytes))) {
      st = kb_run_fail(run, "out of memory");
      break;
    }
    CUresult r = cu->cuMemcpyDtoHAsync(got, h->buf[i], bytes, h->g->stream);
    if (r == CUDA_SUCCESS) r = cu->cuStreamSynchronize(h->g->stream);
    st = kb_gpu_check(run, r, "cuMemcpyDtoHAsync");
    double err = st ? 0 : kb_wl_compare(&h->spec, i, got, want);
    free(got);
    bad = err > KB_WL_TOLERANCE;
    if (bad) st = kb_run_fail(run, "buffer %d differs from the host reference after one submission: %g", i, err);
    else if (err > 0) fprintf(stderr, "%s: buffer %d within %g of the host reference, not bit-exact\n",
                              kb_run_case_name(run), i, err);
  }
  return st;
}

static kb_status hand_setup(kb_run *run, void **state, int as_graph) {
  kb_wl_spec spec;
  kb_status st = declare_iteration(run, &spec);
  if (st) return st;
  if (as_graph) kb_run_min_batch(run, GRAPH_MIN_BATCH);
  hand *h = calloc(1, sizeof *h);
  if (!h) return kb_run_fail(run, "out of memory");
  char why[KB_MESSAGE_MAX];
  if ((st = kb_gpu_acquire(&h->g, why, sizeof why))) {
    free(h);
    return st == KB_SKIP ? kb_run_skip(run, "%s", why) : kb_run_fail(run, "%s", why);
  }
  h->spec = spec;
  *state = h;
  const kd_cu_table *cu = h->g->cu;
  int major = 0, minor = 0, sms = 0;
  cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, h->g->device);
  cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, h->g->device);
  cu->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, h->g->device);
  if (kb_wl_source(spec.kind)) { /* the user kernels, as kdag compiles them */
    char arch[16];
    snprintf(arch, sizeof arch, "sm_%d%d", major, minor);
    const char *opts[] = {KB_WL_FMAD};
    kd_nvrtc_options o = {.struct_size = sizeof(kd_nvrtc_options), .arch = arch, .extra_flags = opts, .extra_flag_count = 1, .program_name = "workload.cu"};
    kd_binary *b = NULL;
    if (kd_nvrtc_compile(kb_wl_source(spec.kind), &o, &b)) {
      st = kb_run_fail(run, "kd_nvrtc_compile: %s", kd_last_error());
      goto fail;
    }
    CUresult r = cu->cuModuleLoadDataEx(&h->user, kd_binary_data(b), 0, NULL, NULL);
    kd_binary_destroy(b);
    if ((st = kb_gpu_check(run, r, "cuModuleLoadDataEx(workload kernels)"))) goto fail;
  }
  if (spec.kind == KB_WL_CHOLESKY) { /* the same module kdag's graph loads */
    kd_binary *b = NULL;
    int rc = kb_wl_cholesky_module(major * 10 + minor, spec.batch, &b, &h->dx[0], &h->dx[1], why, sizeof why);
    if (rc) {
      st = rc > 0 ? kb_run_not_applicable(run, "%s", why) : kb_run_fail(run, "%s", why);
      goto fail;
    }
    CUresult r = cu->cuModuleLoadDataEx(&h->user, kd_binary_data(b), 0, NULL, NULL);
    kd_binary_destroy(b);
    if ((st = kb_gpu_check(run, r, "cuModuleLoadDataEx(Cholesky)"))) goto fail;
  }
  if ((spec.kind == KB_WL_JACOBI || spec.kind == KB_WL_CHOLESKY) &&
      (st = kb_gpu_load_module(h->g, kd_kernel_builtins_cubin, kd_kernel_builtins_ptx, &h->builtins, why,
                               sizeof why))) {
    st = kb_run_fail(run, "%s", why);
    goto fail;
  }
  /* The buffers, with the workload's first contents. */
  h->buffers = kb_wl_buffers(&spec);
  void *host[8] = {0};
  for (int i = 0; i < h->buffers && !st; ++i) {
    size_t bytes = kb_wl_buffer_bytes(&spec, i);
    if (!(host[i] = malloc(bytes))) st = kb_run_fail(run, "out of memory");
    else st = kb_gpu_check(run, cu->cuMemAlloc(&h->buf[i], bytes), "cuMemAlloc");
  }
  if (!st) {
    kb_wl_init(&spec, host);
    for (int i = 0; i < h->buffers && !st; ++i)
      st = kb_gpu_check(run, cu->cuMemcpyHtoDAsync(h->buf[i], host[i], kb_wl_buffer_bytes(&spec, i), h->g->stream),
                        "cuMemcpyHtoDAsync");
    if (!st) st = kb_gpu_check(run, cu->cuStreamSynchronize(h->g->stream), "cuStreamSynchronize");
  }
  for (int i = 0; i < h->buffers; ++i) free(host[i]);
  if (st) goto fail;
  if (hand_launches(h, sms)) {
    st = kb_run_fail(run, "cuModuleGetFunction or out of memory building the launches");
    goto fail;
  }
  if ((st = hand_check(run, h))) goto fail;
  if ((st = kb_gpu_check(run, cu->cuEventCreate(&h->done, CU_EVENT_DISABLE_TIMING), "cuEventCreate"))) goto fail;
  if (as_graph) {
    if ((st = kb_gpu_check(run, cu->cuGraphCreate(&h->graph, 0), "cuGraphCreate"))) goto fail;
    CUgraphNode last[64] = {0}; /* the last node of each chain */
    for (size_t i = 0; i < h->count && !st; ++i) {
      const hand_launch *l = &h->launches[i];
      CUDA_KERNEL_NODE_PARAMS p = {0};
      p.func = l->fn;
      p.gridDimX = l->cfg.grid[0], p.gridDimY = l->cfg.grid[1], p.gridDimZ = l->cfg.grid[2];
      p.blockDimX = l->cfg.block[0], p.blockDimY = l->cfg.block[1], p.blockDimZ = l->cfg.block[2];
      p.kernelParams = (void **)l->params;
      p.sharedMemBytes = l->shared;
      CUgraphNode node, *prev = &last[l->chain];
      st = kb_gpu_check(run, cu->cuGraphAddKernelNode(&node, h->graph, *prev ? prev : NULL, *prev ? 1 : 0, &p),
                        "cuGraphAddKernelNode");
      *prev = node;
    }
    if (!st) st = kb_gpu_instantiate(h->g, run, h->graph, 1, &h->exec);
    if (st) goto fail;
  }
  return KB_OK;
fail:
  hand_teardown(run, h);
  *state = NULL;
  return st;
}

static kb_status hand_loop_setup(kb_run *run, void **state) { return hand_setup(run, state, 0); }
static kb_status hand_graph_setup(kb_run *run, void **state) { return hand_setup(run, state, 1); }

static kb_status hand_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  hand *h = state;
  const kd_cu_table *cu = h->g->cu;
  uint64_t t0 = 0;
  kb_status st = kb_gpu_batch_begin(h->g, run, &t0);
  for (uint64_t it = 0; !st && it < iterations; ++it) {
    if (h->exec) st = kb_gpu_check(run, cu->cuGraphLaunch(h->exec, h->g->stream), "cuGraphLaunch");
    else st = hand_enqueue(run, h);
    if (!st) st = kb_gpu_check(run, cu->cuEventRecord(h->done, h->g->stream), "cuEventRecord(done)");
  }
  return st ? st : kb_gpu_batch_end(h->g, run, t0, out);
}

/* ---- kdag ----------------------------------------------------------------------- */

typedef struct kdag_case {
  kb_kdag k;
  kd_session *host; /* workloads_declare: a HOST session instead */
  kb_wl w;
} kdag_case;

static void kdag_teardown(kb_run *run, void *state) {
  (void)run;
  kdag_case *c = state;
  if (!c) return;
  kb_wl_destroy(&c->w);
  kb_kdag_close(&c->k);
  kd_session_destroy(c->host);
  free(c);
}

/* A session (CUDA in mode, or HOST) with the workload on it. */
static kb_status kdag_open(kb_run *run, const kb_wl_spec *spec, int on_host, kd_exec_mode mode, uint32_t flags,
                           kdag_case **out) {
  kdag_case *c = calloc(1, sizeof *c);
  if (!c) return kb_run_fail(run, "out of memory");
  kb_status st = KB_OK;
  char why[KB_MESSAGE_MAX];
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_HOST;
  if (on_host && kd_session_create(&o, &c->host)) st = kb_run_fail(run, "kd_session_create: %s", kd_last_error());
  if (!on_host) st = kb_kdag_open_flags(run, mode, flags, &c->k);
  int rc = st ? 0 : kb_wl_create(on_host ? c->host : c->k.session, spec, &c->w, why, sizeof why);
  if (rc) st = rc > 0 ? kb_run_not_applicable(run, "%s", why) : kb_run_fail(run, "%s", why);
  if (st) {
    kdag_teardown(run, c);
    return st;
  }
  *out = c;
  return KB_OK;
}

static kb_status kdag_setup(kb_run *run, void **state, kd_exec_mode mode, uint32_t flags) {
  kb_wl_spec spec;
  kb_status st = declare_iteration(run, &spec);
  if (st) return st;
  if (mode == KD_EXEC_GRAPH) kb_run_min_batch(run, GRAPH_MIN_BATCH);
  kdag_case *c = NULL;
  char why[KB_MESSAGE_MAX];
  double err = 0;
  if ((st = kdag_open(run, &spec, 0, mode, flags, &c))) return st;
  if ((st = kb_kdag_preflight(run, &c->k, c->w.g))) goto fail;
  c->w.submitted = 1;
  if (kb_wl_check(&c->w, &err, why, sizeof why)) {
    st = kb_run_fail(run, "%s", why);
    goto fail;
  }
  if (err > KB_WL_TOLERANCE) {
    st = kb_run_fail(run, "the result differs from the host reference after one submission: %g", err);
    goto fail;
  }
  if (err > 0)
    fprintf(stderr, "%s: within %g of the host reference, not bit-exact\n", kb_run_case_name(run), err);
  *state = c;
  return KB_OK;
fail:
  kdag_teardown(run, c);
  return st;
}

static kb_status kdag_eager_setup(kb_run *run, void **state) { return kdag_setup(run, state, KD_EXEC_EAGER, 0); }
static kb_status kdag_graph_setup(kb_run *run, void **state) { return kdag_setup(run, state, KD_EXEC_GRAPH, 0); }
/* The same without programmatic dependent launch (its kernels opt in). */
static kb_status kdag_eager_nopdl_setup(kb_run *run, void **state) {
  return kdag_setup(run, state, KD_EXEC_EAGER, KD_SESSION_NO_PDL);
}
static kb_status kdag_graph_nopdl_setup(kb_run *run, void **state) {
  return kdag_setup(run, state, KD_EXEC_GRAPH, KD_SESSION_NO_PDL);
}

static kb_status kdag_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  kdag_case *c = state;
  return kb_kdag_submit_batch(run, &c->k, c->w.g, iterations, out);
}

/* Declaring: a fresh graph per iteration of the batch, over the case's
 * tensors and kernels. */
static kb_status declare_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  kdag_case *c = state;
  out->host_ns = 0;
  out->gpu_ns = -1;
  for (uint64_t it = 0; it < iterations; ++it) {
    kd_graph *g;
    char why[KB_MESSAGE_MAX];
    if (kd_graph_create(c->w.s, &g)) return kb_run_fail(run, "kd_graph_create: %s", kd_last_error());
    uint64_t t0 = kb_now_ns();
    int rc = kb_wl_declare(&c->w, g, why, sizeof why);
    out->host_ns += (double)(kb_now_ns() - t0);
    kd_graph_stats gs;
    if (!rc && kd_graph_stats_get(g, &gs)) rc = -1, snprintf(why, sizeof why, "%s", kd_last_error());
    kd_graph_destroy(g);
    if (rc) return kb_run_fail(run, "%s", why);
    kb_run_count(run, "edges", (double)gs.edges / (double)gs.nodes);
    kb_run_count(run, "edges_in_max", gs.edges_in_max);
  }
  return KB_OK;
}

static kb_status declare_setup_on(kb_run *run, void **state, int on_host) {
  kb_wl_spec spec;
  kb_status st = declare_iteration(run, &spec);
  if (st) return st;
  kb_run_per_iteration(run, (double)kb_wl_nodes(&spec), "node");
  kb_run_max_batch(run, 1);
  return kdag_open(run, &spec, on_host, KD_EXEC_EAGER, 0, (kdag_case **)state);
}
static kb_status declare_setup(kb_run *run, void **state) { return declare_setup_on(run, state, 0); }
static kb_status declare_host_setup(kb_run *run, void **state) { return declare_setup_on(run, state, 1); }

/* ---- workloads_host: the Jacobi of built-ins on HOST against a C loop ---------- */

typedef struct host_wl_case {
  kdag_case *k;        /* kdag: the HOST session's workload */
  kd_sink *sink;       /* its end: a flag written after the last sweep */
  float flag;
  kb_wl_spec spec;     /* c_loop: the reference's own loop over buffers */
  void *buf[8];
  int buffers;
} host_wl_case;

static void host_wl_free(host_wl_case *c) {
  if (!c) return;
  if (c->k) kdag_teardown(NULL, c->k);
  for (int i = 0; i < c->buffers; ++i) free(c->buf[i]);
  free(c);
}

static void set_flag(void *user) { *(float *)user = 1.0f; }

/* c_loop: kb_wl_run, the host reference's sweep (the same arithmetic in
 * the same order as the built-ins), on one thread. */
static kb_status host_loop_setup(kb_run *run, void **state) {
  host_wl_case *c = calloc(1, sizeof *c);
  if (!c) return kb_run_fail(run, "out of memory");
  kb_status st = declare_iteration(run, &c->spec);
  if (st) {
    free(c);
    return st;
  }
  c->buffers = kb_wl_buffers(&c->spec);
  for (int i = 0; i < c->buffers; ++i)
    if (!(c->buf[i] = malloc(kb_wl_buffer_bytes(&c->spec, i)))) {
      host_wl_free(c);
      return kb_run_fail(run, "out of memory");
    }
  kb_wl_init(&c->spec, c->buf);
  *state = c;
  return KB_OK;
}

/* kdag: the workload's graph on a HOST session, checked bit-exact after
 * one submission, then given a host node after the sweeps that sets a flag
 * a sink copies back: each iteration submits and waits at that sink. */
static kb_status host_kdag_setup(kb_run *run, void **state) {
  host_wl_case *c = calloc(1, sizeof *c);
  if (!c) return kb_run_fail(run, "out of memory");
  kb_status st = declare_iteration(run, &c->spec);
  if (!st) st = kdag_open(run, &c->spec, 1, KD_EXEC_EAGER, 0, &c->k);
  char why[KB_MESSAGE_MAX];
  double err = 0;
  if (!st && kd_graph_submit(c->k->w.g, NULL)) st = kb_run_fail(run, "kd_graph_submit: %s", kd_last_error());
  if (c->k) c->k->w.submitted = 1;
  if (!st && kb_wl_check(&c->k->w, &err, why, sizeof why)) st = kb_run_fail(run, "%s", why);
  if (!st && err != 0) st = kb_run_fail(run, "the HOST result differs from the host reference: %g", err);
  kd_tensor flag = {0};
  kd_tensor_desc d1 = {.dtype = KD_F32, .rank = 1, .shape = {1}};
  if (!st) {
    kd_session *s = c->k->w.s;
    kd_status ks = kd_tensor_from_host(s, &d1, &c->flag, sizeof c->flag, &flag);
    kd_garg acc[3] = {kd_g_in(kd_whole(c->k->w.t[0])), kd_g_in(kd_whole(c->k->w.t[1])), kd_g_out(kd_whole(flag))};
    if (!ks) ks = kd_graph_host(c->k->w.g, "done", set_flag, &c->flag, acc, 3, NULL);
    if (!ks) ks = kd_graph_sink(c->k->w.g, "done", flag, &c->flag, sizeof c->flag, &c->sink);
    if (flag.bits) (void)kd_tensor_release(s, flag); /* the graph holds it */
    if (ks) st = kb_run_fail(run, "kdag: %s", kd_last_error());
  }
  if (st) {
    host_wl_free(c);
    return st;
  }
  *state = c;
  return KB_OK;
}

static kb_status host_wl_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  host_wl_case *c = state;
  out->gpu_ns = -1;
  uint64_t t0 = kb_now_ns();
  for (uint64_t it = 0; it < iterations; ++it) {
    if (!c->k) {
      kb_wl_run(&c->spec, c->buf, 1);
      continue;
    }
    if (kd_graph_submit(c->k->w.g, NULL) || kd_sink_wait(c->sink)) return kb_run_fail(run, "kdag: %s", kd_last_error());
  }
  out->host_ns = (double)(kb_now_ns() - t0);
  return KB_OK;
}

static void host_wl_teardown(kb_run *run, void *state) {
  (void)run;
  host_wl_free(state);
}

/* ---- registration ----------------------------------------------------------- */

/* On the null driver (tests/null_driver.c, loaded through
 * KDAG_CUDA_DRIVER_PATH to measure kdag's own host work) the kernels run
 * as their host twins, so that every case's result check holds there too. */
typedef int null_emulate_fn(const char *name, uint32_t count, const uint32_t *sizes, kb_wl_host_kernel *fn);

static kb_status wl_init(kb_harness *h, void *user, void **state, char *why, size_t cap) {
  (void)state;
  kb_gpu *g;
  kb_status st = kb_gpu_acquire_described(h, &g, why, cap);
  if (st != KB_OK) return st;
  const char *path = getenv("KDAG_CUDA_DRIVER_PATH");
  void *lib = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  null_emulate_fn *emulate = lib ? (null_emulate_fn *)dlsym(lib, "kdag_null_emulate") : NULL;
  if (emulate && kb_wl_register_host_kernels(((const wl_suite_spec *)user)->kind, emulate)) {
    snprintf(why, cap, "the null driver took no more stand-ins");
    st = KB_FAIL;
  }
  if (lib) dlclose(lib); /* kdag keeps its own handle */
  return st;
}

static int register_gpu_suite(kb_harness *h, const char *name, const char *description, const wl_suite_spec *u,
                              const int64_t *n, size_t n_count, int64_t iters, int64_t batch) {
  kb_suite_desc sd = {.name = name, .description = description, .needs_gpu = 1, .init = wl_init, .interleave = 1,
                      .host_cost = 1, .user = (void *)u};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  kb_case_desc cases[] = {
      {.name = "hand_loop", .description = "the same kernels by cuLaunchKernel, one event per submission",
       .baseline = 1, .setup = hand_loop_setup, .batch = hand_batch, .teardown = hand_teardown, .user = (void *)u},
      {.name = "hand_graph", .description = "the same kernels as a hand-built CUDA graph (chains)", .baseline = 1,
       .setup = hand_graph_setup, .batch = hand_batch, .teardown = hand_teardown, .user = (void *)u},
      {.name = "kdag_eager", .description = "the workload's kdag graph, EAGER (its kernels opt in to PDL)",
       .setup = kdag_eager_setup, .batch = kdag_batch, .teardown = kdag_teardown, .user = (void *)u},
      {.name = "kdag_graph", .description = "the workload's kdag graph, GRAPH (its kernels opt in to PDL)",
       .setup = kdag_graph_setup, .batch = kdag_batch, .teardown = kdag_teardown, .user = (void *)u},
      {.name = "kdag_eager_nopdl", .description = "kdag_eager with KD_SESSION_NO_PDL", .setup = kdag_eager_nopdl_setup,
       .batch = kdag_batch, .teardown = kdag_teardown, .user = (void *)u},
      {.name = "kdag_graph_nopdl", .description = "kdag_graph with KD_SESSION_NO_PDL", .setup = kdag_graph_nopdl_setup,
       .batch = kdag_batch, .teardown = kdag_teardown, .user = (void *)u},
      {.name = "kdag_declare", .description = "declaring the workload's graph: host time per node, edges",
       .setup = declare_setup, .batch = declare_batch, .teardown = kdag_teardown, .user = (void *)u},
  };
  if (kb_suite_axis(s, "n", n, n_count) || kb_suite_axis(s, "iters", &iters, 1)) return -1;
  if (batch && kb_suite_axis(s, "batch", &batch, 1)) return -1;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    if (kb_case_add(s, &cases[i])) return -1;
  return 0;
}

int kb_register_workloads_suites(kb_harness *h) {
  static const wl_suite_spec jacobi = {KB_WL_JACOBI}, jacobi_kernel = {KB_WL_JACOBI_KERNEL}, cg = {KB_WL_CG},
                             image = {KB_WL_IMAGE}, cholesky = {KB_WL_CHOLESKY};
  static const int64_t grids[] = {256, 8192}, cg_n[] = {256}, image_n[] = {512}, dx_n[] = {32},
                       sweeps[] = {100, 1000, 10000};
  if (register_gpu_suite(h, "workloads_jacobi",
                         "2D 5-point Jacobi of built-in nodes over shifted views (4 a sweep), n x n f32",
                         &jacobi, grids, 2, 100, 0) ||
      register_gpu_suite(h, "workloads_jacobi_kernel", "2D 5-point Jacobi, one NVRTC kernel a sweep, n x n f32",
                         &jacobi_kernel, grids, 2, 100, 0) ||
      register_gpu_suite(h, "workloads_cg",
                         "conjugate gradient on the 2D Poisson matrix, n x n unknowns, matrix-free: 7 NVRTC "
                         "kernels an iteration, dot products into one-element tensors",
                         &cg, cg_n, 1, 50, 0) ||
      register_gpu_suite(h, "workloads_image",
                         "a batch of n x n i32 images: blur, gradient, threshold, histogram of edge pixels "
                         "(4 NVRTC kernels an image, independent images), passes over the batch",
                         &image, image_n, 1, 10, 8) ||
      register_gpu_suite(h, "workloads_cholesky",
                         "a batch of 32 x 32 f64 systems: copy A and b (built-ins), cuSOLVERDx Cholesky, the two "
                         "triangular solves (MathDx kernels); checked by the residual",
                         &cholesky, dx_n, 1, 10, 2048))
    return -1;
  kb_suite_desc sd = {.name = "workloads_declare",
                      .description = "declaring the Jacobi of built-ins on a HOST session: host time per node, "
                                     "edges_per_node (mean in-degree), edges_in_max_per_node"};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  kb_case_desc declare = {.name = "jacobi", .description = "iters sweeps of 4 built-in nodes",
                          .setup = declare_host_setup, .batch = declare_batch, .teardown = kdag_teardown,
                          .user = (void *)&jacobi};
  if (kb_suite_axis(s, "n", grids, 2) || kb_suite_axis(s, "iters", sweeps, 3) || kb_case_add(s, &declare)) return -1;
  kb_suite_desc hd = {.name = "workloads_host",
                      .description = "the Jacobi of built-ins (4 nodes a sweep) on a HOST session against the "
                                     "same sweep as a C loop on one thread, n x n f32",
                      .interleave = 1, .user = (void *)&jacobi};
  static const int64_t host_n[] = {256, 1024}, host_iters = 100;
  kb_suite *hs = kb_suite_add(h, &hd);
  if (!hs) return -1;
  kb_case_desc loop = {.name = "c_loop", .description = "kb_wl_run: the reference's sweep, one thread",
                       .baseline = 1, .setup = host_loop_setup, .batch = host_wl_batch, .teardown = host_wl_teardown,
                       .user = (void *)&jacobi};
  kb_case_desc kdag = {.name = "kdag_host", .description = "the workload's graph on a HOST session, submitted and "
                       "waited for at a sink after its last sweep",
                       .setup = host_kdag_setup, .batch = host_wl_batch, .teardown = host_wl_teardown,
                       .user = (void *)&jacobi};
  if (kb_suite_axis(hs, "n", host_n, 2) || kb_suite_axis(hs, "iters", &host_iters, 1) || kb_case_add(hs, &loop) ||
      kb_case_add(hs, &kdag))
    return -1;
  return 0;
}
