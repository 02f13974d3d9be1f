/* SPDX-License-Identifier: Apache-2.0 */
/* Suites "loops_cg" and "loops_jacobi": an iterative solver run until it
 * converges, with the loop on the device or driven from the host.
 *  - loops_cg: conjugate gradient on the 2D Poisson matrix (n x n
 *    unknowns, the workloads' kernels: apply, two dot products, alpha,
 *    update, beta, direction, 8 kernels a trip with the check), from x = 0
 *    and b = 1, until the residual's squared norm falls below 1e-4 of its
 *    start (at most 1000 trips);
 *  - loops_jacobi: the 2D Laplace equation on an n x n grid, its first row
 *    held at 1 and the other edges at 0, from 0 inside: a trip is two
 *    Jacobi sweeps (x to y, y to x) and a kernel that sums the squared
 *    change and checks it (3 kernels), until the change's squared norm
 *    falls below 1e-6 (at most 500 trips).
 * A check kernel writes the loop's condition. Each iteration of a batch is
 * one whole solve, waited for (the trips it took are read back):
 *  - hand_graph: a CUDA graph built by hand with the driver API, the
 *    iterations inside a conditional WHILE node whose handle kernels are
 *    the ones kdag uses (kernels/loop.cu), launched and waited for;
 *  - kdag_loop: a kdag graph with kd_graph_while_begin, GRAPH mode,
 *    submitted and waited for at a sink of its trip count;
 *  - kdag_eager_loop: the same graph on an EAGER session (kdag drives the
 *    loop from the host: a wait per trip);
 *  - kdag_host_driven: what one writes without device loops: a kdag GRAPH
 *    graph of one iteration and its check, submitted and waited for at a
 *    sink of the condition, again until it is 0.
 * Every case reports the trips it took (count trips_per_iteration); the
 * arithmetic is the same in each, so the trips are too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/gpu.h"
#include "bench/kdag_session.h"
#include "bench/suites.h"
#include "bench/workloads.h"
#include "kdag/kdag.h"
#include "kernels/embedded.h"

#define LOOP_MAX_TRIPS 1000u
#define LOOP_REL_TOL2 1e-4f

#define JACOBI_MAX_TRIPS 500u
#define JACOBI_TOL2 1e-6f

static const char check_source[] =
    "extern \"C\" __global__ void cg_check(int *go, const float *rr, float tol2) { *go = *rr > tol2; }\n"
    /* One block of 256: the squared change, summed in a fixed order, and
     * the check, in one kernel. */
    "extern \"C\" __global__ void change_check(int *go, const float *a, const float *b, int len, float tol2) {\n"
    "  __shared__ float s[256];\n"
    "  float v = 0.0f;\n"
    "  for (int i = threadIdx.x; i < len; i += 256) { float d = a[i] - b[i]; v += d * d; }\n"
    "  s[threadIdx.x] = v;\n"
    "  __syncthreads();\n"
    "  for (int h = 128; h > 0; h >>= 1) {\n"
    "    if (threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (threadIdx.x == 0) *go = s[0] > tol2;\n"
    "}\n";

enum { K_APPLY, K_DOT, K_ALPHA, K_UPDATE, K_BETA, K_DIRECTION, K_CHECK, K_SWEEP, K_CHANGE, K_COUNT };
static const char *const k_names[K_COUNT] = {"poisson_apply", "dot", "cg_alpha", "cg_update", "cg_beta",
                                            "cg_direction", "cg_check", "jacobi_step", "change_check"};

enum { SOLVER_CG, SOLVER_JACOBI };

enum { CASE_HAND, CASE_KDAG_GRAPH, CASE_KDAG_EAGER, CASE_HOST_DRIVEN };

/* Buffers: x, r, p, ap (n*n floats); rr, pap, alpha, rrn, beta (one float
 * each); go and trips (one int each). */
enum { B_X, B_R, B_P, B_AP, B_RR, B_PAP, B_ALPHA, B_RRN, B_BETA, B_GO, B_TRIPS, B_COUNT };

typedef struct loop_case {
  int kind, solver;
  int n, len;
  float tol2;
  uint32_t max_trips;
  /* hand_graph */
  kb_gpu *g;
  CUmodule user, loops;
  CUfunction fn[K_COUNT], head, tail;
  CUdeviceptr buf[B_COUNT];
  CUgraph graph;
  CUgraphExec exec;
  /* kdag */
  kb_kdag k;
  kd_function kf[K_COUNT];
  kd_tensor t[B_COUNT];
  kd_graph *kg, *init, *iter;
  kd_sink *trips_sink, *go_sink;
  int32_t trips_out, go_out;
} loop_case;

/* The workloads' CG kernels and Jacobi sweep (each with its PDL_WAIT
 * macro: defined twice, identically), then the checks. */
static char *full_source(void) {
  const char *cg = kb_wl_source(KB_WL_CG), *jacobi = kb_wl_source(KB_WL_JACOBI_KERNEL);
  char *s = malloc(strlen(cg) + strlen(jacobi) + sizeof check_source);
  if (s) strcat(strcat(strcpy(s, cg), jacobi), check_source);
  return s;
}

static void loop_teardown(kb_run *run, void *state) {
  (void)run;
  loop_case *c = state;
  if (!c) return;
  if (c->g) {
    const kd_cu_table *cu = c->g->cu;
    if (c->exec) cu->cuGraphExecDestroy(c->exec);
    if (c->graph) cu->cuGraphDestroy(c->graph);
    for (int i = 0; i < B_COUNT; ++i)
      if (c->buf[i]) cu->cuMemFree(c->buf[i]);
    if (c->user) cu->cuModuleUnload(c->user);
    if (c->loops) cu->cuModuleUnload(c->loops);
  }
  kd_graph_destroy(c->kg);
  kd_graph_destroy(c->init);
  kd_graph_destroy(c->iter);
  kb_kdag_close(&c->k);
  free(c);
}

/* A kernel's launch shape: 16 x 16 tiles for the stencil, one block of
 * 256 for the dot products, one thread for the scalars, 256-thread blocks
 * over the vectors. */
static void shape(const loop_case *c, int k, unsigned grid[3], unsigned block[3]) {
  grid[0] = grid[1] = grid[2] = block[0] = block[1] = block[2] = 1;
  if (k == K_APPLY) {
    grid[0] = grid[1] = (unsigned)(c->n + 15) / 16;
    block[0] = block[1] = 16;
  } else if (k == K_SWEEP) { /* the interior, as the workloads launch it */
    grid[0] = (unsigned)(c->n - 2 + 31) / 32, grid[1] = (unsigned)(c->n - 2 + 7) / 8;
    block[0] = 32, block[1] = 8;
  } else if (k == K_DOT || k == K_CHANGE) {
    block[0] = 256;
  } else if (k == K_UPDATE || k == K_DIRECTION) {
    grid[0] = (unsigned)(c->len + 255) / 256;
    block[0] = 256;
  }
}

/* ---- hand_graph ------------------------------------------------------------- */

typedef struct hand_node {
  CUgraphNode node;
  void *args[8];
  CUdeviceptr ptr[6];
  int i32;
  float f32;
  CUgraphConditionalHandle h;
  unsigned u32;
} hand_node;

static CUresult add_kernel(loop_case *c, CUgraph graph, CUfunction f, int k, void **args, CUgraphNode *prev,
                           CUgraphNode *out) {
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  unsigned grid[3], block[3];
  shape(c, k, grid, block);
  p.func = f;
  p.gridDimX = grid[0], p.gridDimY = grid[1], p.gridDimZ = grid[2];
  p.blockDimX = block[0], p.blockDimY = block[1], p.blockDimZ = block[2];
  p.kernelParams = args;
  CUresult r = c->g->cu->cuGraphAddKernelNode(out, graph, prev && *prev ? prev : NULL, prev && *prev ? 1 : 0, &p);
  if (r == CUDA_SUCCESS && prev) *prev = *out;
  return r;
}

/* The CG iteration and its check as a chain into graph after *prev. */
static CUresult add_iteration(loop_case *c, CUgraph graph, CUgraphNode *prev) {
  CUdeviceptr *b = c->buf;
  int n = c->n, len = c->len;
  float tol2 = c->tol2;
  CUgraphNode node;
  CUresult r;
  void *apply[] = {&b[B_AP], &b[B_P], &n};
  void *pap[] = {&b[B_PAP], &b[B_P], &b[B_AP], &len};
  void *alpha[] = {&b[B_ALPHA], &b[B_RR], &b[B_PAP]};
  void *update[] = {&b[B_X], &b[B_R], &b[B_P], &b[B_AP], &b[B_ALPHA], &len};
  void *rrn[] = {&b[B_RRN], &b[B_R], &b[B_R], &len};
  void *beta[] = {&b[B_BETA], &b[B_RR], &b[B_RRN]};
  void *dir[] = {&b[B_P], &b[B_R], &b[B_BETA], &len};
  void *check[] = {&b[B_GO], &b[B_RR], &tol2};
  if ((r = add_kernel(c, graph, c->fn[K_APPLY], K_APPLY, apply, prev, &node)) ||
      (r = add_kernel(c, graph, c->fn[K_DOT], K_DOT, pap, prev, &node)) ||
      (r = add_kernel(c, graph, c->fn[K_ALPHA], K_ALPHA, alpha, prev, &node)) ||
      (r = add_kernel(c, graph, c->fn[K_UPDATE], K_UPDATE, update, prev, &node)) ||
      (r = add_kernel(c, graph, c->fn[K_DOT], K_DOT, rrn, prev, &node)) ||
      (r = add_kernel(c, graph, c->fn[K_BETA], K_BETA, beta, prev, &node)) ||
      (r = add_kernel(c, graph, c->fn[K_DIRECTION], K_DIRECTION, dir, prev, &node)))
    return r;
  return add_kernel(c, graph, c->fn[K_CHECK], K_CHECK, check, prev, &node);
}

/* Two Jacobi sweeps and the change's check as a chain into graph. */
static CUresult add_sweeps(loop_case *c, CUgraph graph, CUgraphNode *prev) {
  CUdeviceptr *b = c->buf;
  int n = c->n, len = c->len;
  float tol2 = c->tol2;
  CUgraphNode node;
  CUresult r;
  void *xy[] = {&b[B_R], &b[B_X], &n}, *yx[] = {&b[B_X], &b[B_R], &n};
  void *change[] = {&b[B_GO], &b[B_X], &b[B_R], &len, &tol2};
  if ((r = add_kernel(c, graph, c->fn[K_SWEEP], K_SWEEP, xy, prev, &node)) ||
      (r = add_kernel(c, graph, c->fn[K_SWEEP], K_SWEEP, yx, prev, &node)))
    return r;
  return add_kernel(c, graph, c->fn[K_CHANGE], K_CHANGE, change, prev, &node);
}

/* A 1-D memset node of words after *prev. */
static CUresult add_memset(loop_case *c, CUgraph graph, CUdeviceptr dst, unsigned value, size_t words,
                           CUgraphNode *prev) {
  CUDA_MEMSET_NODE_PARAMS m;
  memset(&m, 0, sizeof m);
  m.dst = dst, m.value = value, m.elementSize = 4, m.width = words, m.height = 1;
  CUgraphNode node;
  CUresult r = c->g->cu->cuGraphAddMemsetNode(&node, graph, *prev ? prev : NULL, *prev ? 1 : 0, &m, c->g->context);
  if (r == CUDA_SUCCESS) *prev = node;
  return r;
}

static kb_status hand_setup(kb_run *run, loop_case *c) {
  char why[KB_MESSAGE_MAX];
  kb_status st = kb_gpu_acquire(&c->g, why, sizeof why);
  if (st) return st == KB_SKIP ? kb_run_skip(run, "%s", why) : kb_run_fail(run, "%s", why);
  const kd_cu_table *cu = c->g->cu;
  if (!cu->cuGraphConditionalHandleCreate || !cu->cuGraphAddNode || !cu->cuGraphAddMemsetNode)
    return kb_run_not_applicable(run, "the driver has no conditional graph nodes");
  int major = 0, minor = 0;
  cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c->g->device);
  cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c->g->device);
  char arch[16];
  snprintf(arch, sizeof arch, "sm_%d%d", major, minor);
  const char *opts[] = {KB_WL_FMAD};
  kd_nvrtc_options o;
  kd_nvrtc_options_init(&o);
  o.arch = arch, o.extra_flags = opts, o.extra_flag_count = 1, o.program_name = "loops.cu";
  char *src = full_source();
  kd_binary *bin = NULL;
  if (!src || kd_nvrtc_compile(src, &o, &bin)) {
    free(src);
    return kb_run_fail(run, "kd_nvrtc_compile: %s", src ? kd_last_error() : "out of memory");
  }
  free(src);
  CUresult r = cu->cuModuleLoadDataEx(&c->user, kd_binary_data(bin), 0, NULL, NULL);
  kd_binary_destroy(bin);
  if ((st = kb_gpu_check(run, r, "cuModuleLoadDataEx(CG)"))) return st;
  if ((st = kb_gpu_load_module(c->g, kd_kernel_loop_cubin, kd_kernel_loop_ptx, &c->loops, why, sizeof why)))
    return kb_run_fail(run, "%s", why);
  for (int k = 0; k < K_COUNT; ++k)
    if ((st = kb_gpu_check(run, cu->cuModuleGetFunction(&c->fn[k], c->user, k_names[k]), k_names[k]))) return st;
  if ((st = kb_gpu_check(run, cu->cuModuleGetFunction(&c->head, c->loops, "kd_loop_head"), "kd_loop_head")) ||
      (st = kb_gpu_check(run, cu->cuModuleGetFunction(&c->tail, c->loops, "kd_loop_tail"), "kd_loop_tail")))
    return st;
  for (int i = 0; i < B_COUNT; ++i) {
    size_t bytes = i <= B_AP ? (size_t)c->len * sizeof(float) : sizeof(float);
    if ((st = kb_gpu_check(run, cu->cuMemAlloc(&c->buf[i], bytes), "cuMemAlloc"))) return st;
  }
  /* CG: x = 0, r = p = 1; rr = r.r; go = rr > tol2. Jacobi: x = y = 0,
   * their first rows 1; go = 1. Then the loop. */
  CUdeviceptr *b = c->buf;
  CUgraphNode prev = NULL, node;
  if ((st = kb_gpu_check(run, cu->cuGraphCreate(&c->graph, 0), "cuGraphCreate"))) return st;
  if (c->solver == SOLVER_CG) {
    if ((r = add_memset(c, c->graph, b[B_X], 0u, (size_t)c->len, &prev)) == CUDA_SUCCESS &&
        (r = add_memset(c, c->graph, b[B_R], 0x3f800000u, (size_t)c->len, &prev)) == CUDA_SUCCESS)
      r = add_memset(c, c->graph, b[B_P], 0x3f800000u, (size_t)c->len, &prev);
    if ((st = kb_gpu_check(run, r, "cuGraphAddMemsetNode"))) return st;
    int len = c->len;
    float tol2 = c->tol2;
    void *rr[] = {&b[B_RR], &b[B_R], &b[B_R], &len};
    void *check[] = {&b[B_GO], &b[B_RR], &tol2};
    if ((st = kb_gpu_check(run, add_kernel(c, c->graph, c->fn[K_DOT], K_DOT, rr, &prev, &node), "rr")) ||
        (st = kb_gpu_check(run, add_kernel(c, c->graph, c->fn[K_CHECK], K_CHECK, check, &prev, &node), "check")))
      return st;
  } else {
    if ((r = add_memset(c, c->graph, b[B_X], 0u, (size_t)c->len, &prev)) == CUDA_SUCCESS &&
        (r = add_memset(c, c->graph, b[B_R], 0u, (size_t)c->len, &prev)) == CUDA_SUCCESS &&
        (r = add_memset(c, c->graph, b[B_X], 0x3f800000u, (size_t)c->n, &prev)) == CUDA_SUCCESS &&
        (r = add_memset(c, c->graph, b[B_R], 0x3f800000u, (size_t)c->n, &prev)) == CUDA_SUCCESS)
      r = add_memset(c, c->graph, b[B_GO], 1u, 1, &prev);
    if ((st = kb_gpu_check(run, r, "cuGraphAddMemsetNode"))) return st;
  }
  CUgraphConditionalHandle h;
  r = cu->cuGraphConditionalHandleCreate(&h, c->graph, c->g->context, 0, 0);
  if ((st = kb_gpu_check(run, r, "cuGraphConditionalHandleCreate"))) return st;
  unsigned max = c->max_trips;
  void *loop_args[] = {&h, &b[B_GO], &b[B_TRIPS], &max};
  if ((st = kb_gpu_check(run, add_kernel(c, c->graph, c->head, -1, loop_args, &prev, &node), "kd_loop_head")))
    return st;
  CUgraphNodeParams np;
  memset(&np, 0, sizeof np);
  np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  np.conditional.handle = h;
  np.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
  np.conditional.size = 1;
  np.conditional.ctx = c->g->context;
  if ((st = kb_gpu_check(run, cu->cuGraphAddNode(&node, c->graph, &prev, NULL, 1, &np), "cuGraphAddNode")))
    return st;
  CUgraph body = np.conditional.phGraph_out[0];
  CUgraphNode bprev = NULL;
  r = c->solver == SOLVER_CG ? add_iteration(c, body, &bprev) : add_sweeps(c, body, &bprev);
  if ((st = kb_gpu_check(run, r, "the body")) ||
      (st = kb_gpu_check(run, add_kernel(c, body, c->tail, -1, loop_args, &bprev, &node), "kd_loop_tail")))
    return st;
  return kb_gpu_instantiate(c->g, run, c->graph, 1, &c->exec);
}

/* ---- kdag --------------------------------------------------------------------- */

static kd_status load_all(kd_raw *raw, void *user) {
  loop_case *c = user;
  char *src = full_source();
  if (!src) return KD_ERR_OUT_OF_MEMORY;
  const char *opts[] = {KB_WL_FMAD};
  kd_nvrtc_options o;
  kd_nvrtc_options_init(&o);
  o.extra_flags = opts, o.extra_flag_count = 1, o.program_name = "loops.cu";
  kd_module m;
  kd_status st = kd_raw_compile_nvrtc(raw, src, &o, &m);
  free(src);
  for (int k = 0; !st && k < K_COUNT; ++k) st = kd_module_function(kd_raw_session(raw), m, k_names[k], &c->kf[k]);
  return st;
}

static kd_status kernel(loop_case *c, kd_graph *g, int k, const kd_garg *args, size_t count) {
  unsigned grid[3], block[3];
  shape(c, k, grid, block);
  kd_launch_config cfg = {.grid = {grid[0], grid[1], grid[2]}, .block = {block[0], block[1], block[2]},
                          .shared_bytes = 0, .flags = 0};
  return kd_graph_kernel(g, k_names[k], c->kf[k], &cfg, args, count, NULL);
}

/* The CG iteration and its check, into g. */
static kd_status iteration(loop_case *c, kd_graph *g) {
  kd_tensor *t = c->t;
  kd_garg apply[] = {kd_g_out(kd_whole(t[B_AP])), kd_g_in(kd_whole(t[B_P])), kd_g_value(kd_arg_i32(c->n))};
  kd_garg pap[] = {kd_g_out(kd_whole(t[B_PAP])), kd_g_in(kd_whole(t[B_P])), kd_g_in(kd_whole(t[B_AP])),
                   kd_g_value(kd_arg_i32(c->len))};
  kd_garg alpha[] = {kd_g_out(kd_whole(t[B_ALPHA])), kd_g_in(kd_whole(t[B_RR])), kd_g_in(kd_whole(t[B_PAP]))};
  kd_garg update[] = {kd_g_inout(kd_whole(t[B_X])), kd_g_inout(kd_whole(t[B_R])), kd_g_in(kd_whole(t[B_P])),
                      kd_g_in(kd_whole(t[B_AP])), kd_g_in(kd_whole(t[B_ALPHA])), kd_g_value(kd_arg_i32(c->len))};
  kd_garg rrn[] = {kd_g_out(kd_whole(t[B_RRN])), kd_g_in(kd_whole(t[B_R])), kd_g_in(kd_whole(t[B_R])),
                   kd_g_value(kd_arg_i32(c->len))};
  kd_garg beta[] = {kd_g_out(kd_whole(t[B_BETA])), kd_g_inout(kd_whole(t[B_RR])), kd_g_in(kd_whole(t[B_RRN]))};
  kd_garg dir[] = {kd_g_inout(kd_whole(t[B_P])), kd_g_in(kd_whole(t[B_R])), kd_g_in(kd_whole(t[B_BETA])),
                   kd_g_value(kd_arg_i32(c->len))};
  kd_garg check[] = {kd_g_out(kd_whole(t[B_GO])), kd_g_in(kd_whole(t[B_RR])), kd_g_value(kd_arg_f32(c->tol2))};
  kd_status st = kernel(c, g, K_APPLY, apply, 3);
  if (!st) st = kernel(c, g, K_DOT, pap, 4);
  if (!st) st = kernel(c, g, K_ALPHA, alpha, 3);
  if (!st) st = kernel(c, g, K_UPDATE, update, 6);
  if (!st) st = kernel(c, g, K_DOT, rrn, 4);
  if (!st) st = kernel(c, g, K_BETA, beta, 3);
  if (!st) st = kernel(c, g, K_DIRECTION, dir, 4);
  if (!st) st = kernel(c, g, K_CHECK, check, 3);
  return st;
}

/* x = 0, r = p = 1, rr = r.r, go = rr > tol2. */
static kd_status start(loop_case *c, kd_graph *g) {
  kd_tensor *t = c->t;
  kd_garg rr[] = {kd_g_out(kd_whole(t[B_RR])), kd_g_in(kd_whole(t[B_R])), kd_g_in(kd_whole(t[B_R])),
                  kd_g_value(kd_arg_i32(c->len))};
  kd_garg check[] = {kd_g_out(kd_whole(t[B_GO])), kd_g_in(kd_whole(t[B_RR])), kd_g_value(kd_arg_f32(c->tol2))};
  kd_status st = kd_graph_op_fill(g, "x = 0", kd_whole(t[B_X]), (float[]){0.0f}, NULL);
  if (!st) st = kd_graph_op_fill(g, "r = 1", kd_whole(t[B_R]), (float[]){1.0f}, NULL);
  if (!st) st = kd_graph_op_fill(g, "p = 1", kd_whole(t[B_P]), (float[]){1.0f}, NULL);
  if (!st) st = kernel(c, g, K_DOT, rr, 4);
  if (!st) st = kernel(c, g, K_CHECK, check, 3);
  return st;
}

/* Two Jacobi sweeps (each updates the interior of its output: KD_INOUT)
 * and the change's check, into g. */
static kd_status sweeps(loop_case *c, kd_graph *g) {
  kd_tensor x = c->t[B_X], y = c->t[B_R];
  kd_garg xy[] = {kd_g_inout(kd_whole(y)), kd_g_in(kd_whole(x)), kd_g_value(kd_arg_i32(c->n))};
  kd_garg yx[] = {kd_g_inout(kd_whole(x)), kd_g_in(kd_whole(y)), kd_g_value(kd_arg_i32(c->n))};
  kd_garg change[] = {kd_g_out(kd_whole(c->t[B_GO])), kd_g_in(kd_whole(x)), kd_g_in(kd_whole(y)),
                      kd_g_value(kd_arg_i32(c->len)), kd_g_value(kd_arg_f32(c->tol2))};
  kd_status st = kernel(c, g, K_SWEEP, xy, 3);
  if (!st) st = kernel(c, g, K_SWEEP, yx, 3);
  if (!st) st = kernel(c, g, K_CHANGE, change, 5);
  return st;
}

/* x = y = 0 with their first rows 1, go = 1. */
static kd_status jacobi_start(loop_case *c, kd_graph *g) {
  kd_view xrow = {.tensor = c->t[B_X], .rank = 1, .offset = 0, .shape = {c->n}, .strides = {1}};
  kd_view yrow = {.tensor = c->t[B_R], .rank = 1, .offset = 0, .shape = {c->n}, .strides = {1}};
  kd_status st = kd_graph_op_fill(g, "x = 0", kd_whole(c->t[B_X]), (float[]){0.0f}, NULL);
  if (!st) st = kd_graph_op_fill(g, "y = 0", kd_whole(c->t[B_R]), (float[]){0.0f}, NULL);
  if (!st) st = kd_graph_op_fill(g, "x row = 1", xrow, (float[]){1.0f}, NULL);
  if (!st) st = kd_graph_op_fill(g, "y row = 1", yrow, (float[]){1.0f}, NULL);
  if (!st) st = kd_graph_op_fill(g, "go = 1", kd_whole(c->t[B_GO]), (int32_t[]){1}, NULL);
  return st;
}

static kb_status kdag_setup(kb_run *run, loop_case *c) {
  kb_status bs = kb_kdag_open(run, c->kind == CASE_KDAG_EAGER ? KD_EXEC_EAGER : KD_EXEC_GRAPH, &c->k);
  if (bs) return bs;
  kd_session *s = c->k.session;
  kd_status st = kd_with_raw(s, "bench.loops", load_all, c);
  for (int i = 0; !st && i < B_COUNT; ++i) {
    kd_tensor_desc d = {.dtype = i >= B_GO ? KD_I32 : KD_F32, .rank = 1, .shape = {i <= B_AP ? c->len : 1}};
    st = kd_tensor_create(s, &d, &c->t[i]);
  }
  if (!st && c->kind != CASE_HOST_DRIVEN) {
    kd_node loop;
    st = kd_graph_create(s, &c->kg);
    if (!st) st = c->solver == SOLVER_CG ? start(c, c->kg) : jacobi_start(c, c->kg);
    if (!st) st = kd_graph_while_begin(c->kg, "solve", c->t[B_GO], c->max_trips, c->t[B_TRIPS], &loop);
    if (!st) st = c->solver == SOLVER_CG ? iteration(c, c->kg) : sweeps(c, c->kg);
    if (!st) st = kd_graph_end(c->kg, loop);
    if (!st) st = kd_graph_sink(c->kg, "trips", c->t[B_TRIPS], &c->trips_out, sizeof c->trips_out, &c->trips_sink);
  } else if (!st) {
    st = kd_graph_create(s, &c->init);
    if (!st) st = c->solver == SOLVER_CG ? start(c, c->init) : jacobi_start(c, c->init);
    if (!st) st = kd_graph_sink(c->init, "go", c->t[B_GO], &c->go_out, sizeof c->go_out, &c->go_sink);
    /* Run once before the iteration is declared: what it reads is then
     * written (a graph of its own checks its reads against the tensors). */
    if (!st) st = kd_graph_submit(c->init, NULL);
    if (!st) st = kd_sink_wait(c->go_sink);
    kd_sink *go2 = NULL;
    if (!st) st = kd_graph_create(s, &c->iter);
    if (!st) st = c->solver == SOLVER_CG ? iteration(c, c->iter) : sweeps(c, c->iter);
    if (!st) st = kd_graph_sink(c->iter, "go", c->t[B_GO], &c->go_out, sizeof c->go_out, &go2);
    c->trips_sink = go2; /* the iteration's sink: its wait is the check */
  }
  return st ? kb_run_fail(run, "kdag: %s", kd_last_error()) : KB_OK;
}

/* One solve, waited for: the trips it took. */
static int solve(kb_run *run, loop_case *c, int32_t *trips) {
  if (c->kind == CASE_HAND) {
    const kd_cu_table *cu = c->g->cu;
    CUresult r = cu->cuGraphLaunch(c->exec, c->g->stream);
    if (r == CUDA_SUCCESS) r = cu->cuMemcpyDtoHAsync(trips, c->buf[B_TRIPS], sizeof *trips, c->g->stream);
    if (r == CUDA_SUCCESS) r = cu->cuStreamSynchronize(c->g->stream);
    return kb_gpu_check(run, r, "hand_graph solve") ? -1 : 0;
  }
  if (c->kind != CASE_HOST_DRIVEN) {
    if (kd_graph_submit(c->kg, NULL) || kd_sink_wait(c->trips_sink)) return kb_run_fail(run, "kdag: %s", kd_last_error()), -1;
    *trips = c->trips_out;
    return 0;
  }
  if (kd_graph_submit(c->init, NULL) || kd_sink_wait(c->go_sink)) return kb_run_fail(run, "kdag: %s", kd_last_error()), -1;
  int32_t done = 0;
  while (c->go_out && (uint32_t)done < c->max_trips) {
    if (kd_graph_submit(c->iter, NULL) || kd_sink_wait(c->trips_sink)) return kb_run_fail(run, "kdag: %s", kd_last_error()), -1;
    done++;
  }
  *trips = done;
  return 0;
}

static kb_status loop_setup(kb_run *run, void **state) {
  loop_case *c = calloc(1, sizeof *c);
  if (!c) return kb_run_fail(run, "out of memory");
  *state = c;
  intptr_t u = (intptr_t)kb_run_user(run);
  c->kind = (int)(u & 0xff);
  c->solver = (int)(u >> 8);
  c->n = (int)kb_run_axis(run, "n", 64);
  c->len = c->n * c->n;
  c->tol2 = c->solver == SOLVER_CG ? LOOP_REL_TOL2 * (float)c->len : JACOBI_TOL2; /* CG: r.r starts at len */
  c->max_trips = c->solver == SOLVER_CG ? LOOP_MAX_TRIPS : JACOBI_MAX_TRIPS;
  kb_run_per_iteration(run, 1, "solve");
  kb_status st = c->kind == CASE_HAND ? hand_setup(run, c) : kdag_setup(run, c);
  int32_t trips = 0;
  if (!st && solve(run, c, &trips)) st = KB_FAIL;
  if (!st && (trips <= 0 || (uint32_t)trips > c->max_trips))
    st = kb_run_fail(run, "the solve took %d trips, not 1 to %u", trips, c->max_trips);
  if (st) {
    loop_teardown(run, c);
    *state = NULL;
  }
  return st;
}

static kb_status loop_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  loop_case *c = state;
  out->gpu_ns = -1;
  uint64_t t0 = kb_now_ns();
  int32_t trips = 0;
  for (uint64_t it = 0; it < iterations; ++it)
    if (solve(run, c, &trips)) return KB_FAIL;
  out->host_ns = (double)(kb_now_ns() - t0);
  kb_run_count(run, "trips", trips);
  return KB_OK;
}

static int register_solver(kb_harness *h, const char *name, const char *description, int solver) {
  kb_suite_desc sd = {.name = name, .description = description, .needs_gpu = 1, .init = kb_gpu_suite_init,
                      .interleave = 1, .host_cost = 1};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  static const int64_t n[] = {64, 256};
  intptr_t sv = (intptr_t)solver << 8;
  kb_case_desc cases[] = {
      {.name = "hand_graph", .description = "a CUDA graph with a conditional WHILE node, built with the driver API",
       .baseline = 1, .setup = loop_setup, .batch = loop_batch, .teardown = loop_teardown,
       .user = (void *)(sv | CASE_HAND)},
      {.name = "kdag_loop", .description = "kd_graph_while_begin, GRAPH mode, waited for at a sink of its trips",
       .setup = loop_setup, .batch = loop_batch, .teardown = loop_teardown, .user = (void *)(sv | CASE_KDAG_GRAPH)},
      {.name = "kdag_eager_loop", .description = "the same graph, EAGER: kdag drives the loop from the host",
       .setup = loop_setup, .batch = loop_batch, .teardown = loop_teardown, .user = (void *)(sv | CASE_KDAG_EAGER)},
      {.name = "kdag_host_driven", .description = "a GRAPH graph of one trip and its check, submitted and its "
       "condition waited for until it is 0", .baseline = 1, .setup = loop_setup, .batch = loop_batch,
       .teardown = loop_teardown, .user = (void *)(sv | CASE_HOST_DRIVEN)},
  };
  if (kb_suite_axis(s, "n", n, 2)) return -1;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    if (kb_case_add(s, &cases[i])) return -1;
  return 0;
}

int kb_register_loops_suites(kb_harness *h) {
  return register_solver(h, "loops_cg", "conjugate gradient until it converges (8 kernels a trip): the loop as a "
                         "conditional node (by hand, kdag GRAPH), driven by kdag EAGER, or from the host", SOLVER_CG) ||
         register_solver(h, "loops_jacobi", "Jacobi until the change is small (3 kernels a trip): the loop as a "
                         "conditional node (by hand, kdag GRAPH), driven by kdag EAGER, or from the host",
                         SOLVER_JACOBI);
}
