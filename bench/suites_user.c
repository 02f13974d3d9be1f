/* SPDX-License-Identifier: Apache-2.0 */
/* Suite "user": a kernel of your own, timed without writing C.
 *
 *   kdag-bench --kernel FILE:NAME --grid X[,Y,Z] --block X[,Y,Z]
 *              [--shared BYTES] [--arg SPEC]...
 *
 * FILE is CUDA C (.cu: compiled with NVRTC for the GPU), PTX, a CUBIN or a
 * fatbin; NAME the kernel (extern "C", or its mangled name). Each --arg is
 * one parameter, in order: a scalar (i32:V, u32:V, i64:V, u64:V, f32:V,
 * f64:V) or a device buffer (buf:BYTES, with a K, M or G suffix, or
 * buf:TYPE:COUNT with TYPE one of i8 u8 i32 u32 i64 u64 f16 bf16 f32 f64),
 * zero-filled, which every launch reads and writes. A submission is a chain
 * of N launches (axis N), measured as the launch suite measures its empty
 * kernels: cuLaunchKernel in a loop (cu_launch), a hand-built CUDA graph
 * (hand_graph), and a kdag graph of N kernel nodes, EAGER and GRAPH; host
 * and GPU time per launch, and ratios to the two baselines. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/size.h"
#include "bench/gpu.h"
#include "bench/kdag_session.h"
#include "bench/suites.h"
#include "kdag/kdag.h"

#define KB_USER_MAX_ARGS 32

typedef enum { ARG_BUF, ARG_I32, ARG_U32, ARG_I64, ARG_U64, ARG_F32, ARG_F64 } arg_kind;

typedef struct user_arg {
  arg_kind kind;
  union {
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
    float f32;
    double f64;
  } v;
  uint64_t bytes; /* ARG_BUF */
} user_arg;

struct kb_user_kernel {
  char path[1024], name[256];
  unsigned grid[3], block[3], shared;
  int has_grid, has_block;
  user_arg args[KB_USER_MAX_ARGS];
  size_t arg_count;
};

/* The suite's state: the module for the driver cases, the buffers they use
 * (the kdag cases make tensors of their own), and the image both load. */
typedef struct user_suite {
  const kb_user_kernel *k;
  kb_gpu *g;
  unsigned char *image; /* CUBIN, fatbin, or PTX text (NUL-terminated) */
  size_t image_size;
  int is_ptx;
  CUmodule module;
  CUfunction fn;
  CUevent done;
  CUdeviceptr bufs[KB_USER_MAX_ARGS];
  void *params[KB_USER_MAX_ARGS];
} user_suite;

/* ---- the command line ----------------------------------------------------- */

static int dims(const char *flag, const char *text, unsigned out[3], char *why, size_t cap) {
  out[0] = out[1] = out[2] = 1;
  const char *p = text;
  for (int i = 0; i < 3; ++i) {
    char *end;
    errno = 0;
    unsigned long v = strtoul(p, &end, 10);
    if (errno || end == p || v == 0 || v > 0x7fffffffUL || *p == '-') break;
    out[i] = (unsigned)v;
    if (!*end) return 0;
    if (*end != ',' || i == 2) break;
    p = end + 1;
  }
  snprintf(why, cap, "%s wants 1 to 3 positive integers, X[,Y[,Z]], not \"%s\"", flag, text);
  return -1;
}

static int number(const char *text, int is_float, int is_signed, user_arg *a) {
  char *end;
  errno = 0;
  if (is_float) {
    double v = strtod(text, &end);
    if (errno || end == text || *end) return -1;
    a->v.f64 = v;
    return 0;
  }
  if (is_signed) {
    long long v = strtoll(text, &end, 0);
    if (errno || end == text || *end) return -1;
    a->v.i64 = v;
  } else {
    if (*text == '-') return -1;
    unsigned long long v = strtoull(text, &end, 0);
    if (errno || end == text || *end) return -1;
    a->v.u64 = v;
  }
  return 0;
}

static int arg_spec(const char *spec, user_arg *a, char *why, size_t cap) {
  static const struct { const char *name; int bytes; } types[] = {
      {"i8", 1}, {"u8", 1}, {"i32", 4}, {"u32", 4}, {"i64", 8}, {"u64", 8},
      {"f16", 2}, {"bf16", 2}, {"f32", 4}, {"f64", 8}};
  memset(a, 0, sizeof *a);
  const char *colon = strchr(spec, ':');
  if (!colon) goto bad;
  size_t kind_len = (size_t)(colon - spec);
  const char *rest = colon + 1;
  if (kind_len == 3 && strncmp(spec, "buf", 3) == 0) {
    a->kind = ARG_BUF;
    const char *second = strchr(rest, ':');
    if (!second) {
      if (!kd_size_parse(rest, &a->bytes) || !a->bytes) goto bad;
      return 0;
    }
    for (size_t i = 0; i < sizeof types / sizeof types[0]; ++i) {
      if (strlen(types[i].name) != (size_t)(second - rest) || strncmp(rest, types[i].name, (size_t)(second - rest)))
        continue;
      uint64_t count;
      if (!kd_size_parse(second + 1, &count) || !count || count > UINT64_MAX / (uint64_t)types[i].bytes) goto bad;
      a->bytes = count * (uint64_t)types[i].bytes;
      return 0;
    }
    goto bad;
  }
  static const struct { const char *name; arg_kind kind; int is_float, is_signed; } scalars[] = {
      {"i32", ARG_I32, 0, 1}, {"u32", ARG_U32, 0, 0}, {"i64", ARG_I64, 0, 1},
      {"u64", ARG_U64, 0, 0}, {"f32", ARG_F32, 1, 1}, {"f64", ARG_F64, 1, 1}};
  for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; ++i) {
    if (strlen(scalars[i].name) != kind_len || strncmp(spec, scalars[i].name, kind_len)) continue;
    a->kind = scalars[i].kind;
    if (number(rest, scalars[i].is_float, scalars[i].is_signed, a)) goto bad;
    if (a->kind == ARG_I32 && (a->v.i64 < INT32_MIN || a->v.i64 > INT32_MAX)) goto bad;
    if (a->kind == ARG_U32 && a->v.u64 > UINT32_MAX) goto bad;
    if (a->kind == ARG_I32) a->v.i32 = (int32_t)a->v.i64;
    if (a->kind == ARG_U32) a->v.u32 = (uint32_t)a->v.u64;
    if (a->kind == ARG_F32) a->v.f32 = (float)a->v.f64;
    return 0;
  }
bad:
  snprintf(why, cap,
           "--arg \"%s\": want a scalar (i32:V, u32:V, i64:V, u64:V, f32:V, f64:V) or a buffer (buf:BYTES, "
           "or buf:TYPE:COUNT with TYPE i8 u8 i32 u32 i64 u64 f16 bf16 f32 f64)",
           spec);
  return -1;
}

int kb_user_kernel_parse(int *argc, char **argv, kb_user_kernel **out, char *why, size_t cap) {
  *out = NULL;
  kb_user_kernel *k = calloc(1, sizeof *k);
  if (!k) return snprintf(why, cap, "out of memory"), -1;
  int given = 0, kept = 1;
  for (int i = 1; i < *argc; ++i) {
    static const char *const flags[] = {"--kernel", "--grid", "--block", "--shared", "--arg"};
    int which = -1;
    const char *value = NULL;
    for (int f = 0; f < 5; ++f) {
      size_t len = strlen(flags[f]);
      if (strncmp(argv[i], flags[f], len) == 0 && (argv[i][len] == 0 || argv[i][len] == '=')) {
        which = f;
        value = argv[i][len] == '=' ? argv[i] + len + 1 : NULL;
        break;
      }
    }
    if (which < 0) {
      argv[kept++] = argv[i];
      continue;
    }
    if (!value) {
      if (i + 1 >= *argc) {
        snprintf(why, cap, "%s wants a value", flags[which]);
        goto fail;
      }
      value = argv[++i];
    }
    given = 1;
    if (which == 0) {
      const char *colon = strrchr(value, ':');
      if (!colon || colon == value || !colon[1] || (size_t)(colon - value) >= sizeof k->path ||
          strlen(colon + 1) >= sizeof k->name) {
        snprintf(why, cap, "--kernel wants FILE:NAME, not \"%s\"", value);
        goto fail;
      }
      memcpy(k->path, value, (size_t)(colon - value));
      snprintf(k->name, sizeof k->name, "%s", colon + 1);
    } else if (which == 1) {
      if (dims("--grid", value, k->grid, why, cap)) goto fail;
      k->has_grid = 1;
    } else if (which == 2) {
      if (dims("--block", value, k->block, why, cap)) goto fail;
      k->has_block = 1;
    } else if (which == 3) {
      uint64_t bytes;
      if (!kd_size_parse(value, &bytes) || bytes > 0x7fffffff) {
        snprintf(why, cap, "--shared wants bytes (or with a K suffix), not \"%s\"", value);
        goto fail;
      }
      k->shared = (unsigned)bytes;
    } else {
      if (k->arg_count == KB_USER_MAX_ARGS) {
        snprintf(why, cap, "at most %d --arg", KB_USER_MAX_ARGS);
        goto fail;
      }
      if (arg_spec(value, &k->args[k->arg_count], why, cap)) goto fail;
      k->arg_count++;
    }
  }
  argv[kept] = NULL;
  *argc = kept;
  if (!given) {
    free(k);
    return 0;
  }
  if (!*k->path) snprintf(why, cap, "--grid, --block, --shared and --arg describe a --kernel FILE:NAME: give one");
  else if (!k->has_grid || !k->has_block) snprintf(why, cap, "--kernel %s:%s wants --grid and --block", k->path, k->name);
  else {
    *out = k;
    return 0;
  }
fail:
  free(k);
  return -1;
}

void kb_user_kernel_free(kb_user_kernel *k) { free(k); }

/* ---- the suite ------------------------------------------------------------ */

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), t = strlen(tail);
  return n >= t && strcmp(s + n - t, tail) == 0;
}

static void user_fini(void *state) {
  user_suite *u = state;
  if (!u) return;
  const kd_cu_table *cu = u->g ? u->g->cu : NULL;
  if (cu) {
    cu->cuStreamSynchronize(u->g->stream);
    for (size_t i = 0; i < KB_USER_MAX_ARGS; ++i)
      if (u->bufs[i]) cu->cuMemFree(u->bufs[i]);
    if (u->done) cu->cuEventDestroy(u->done);
    if (u->module) cu->cuModuleUnload(u->module);
  }
  free(u->image);
  free(u);
}

/* CUDA C through NVRTC, for the GPU's architecture. */
static kb_status compile(user_suite *u, char *why, size_t cap) {
  int major = 0, minor = 0;
  u->g->cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, u->g->device);
  u->g->cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, u->g->device);
  char arch[16];
  snprintf(arch, sizeof arch, "sm_%d%d", major, minor);
  kd_nvrtc_options o;
  kd_nvrtc_options_init(&o);
  o.arch = arch;
  o.program_name = u->k->path;
  kd_binary *b;
  if (kd_nvrtc_compile((const char *)u->image, &o, &b) != KD_OK) {
    snprintf(why, cap, "%s: %s", u->k->path, kd_last_error());
    return KB_FAIL;
  }
  unsigned char *copy = malloc(kd_binary_size(b));
  if (copy) memcpy(copy, kd_binary_data(b), kd_binary_size(b));
  u->image_size = kd_binary_size(b);
  kd_binary_destroy(b);
  if (!copy) return snprintf(why, cap, "out of memory"), KB_FAIL;
  free(u->image);
  u->image = copy;
  u->is_ptx = 0;
  return KB_OK;
}

static size_t arg_size(const user_arg *a) {
  return a->kind == ARG_I32 || a->kind == ARG_U32 || a->kind == ARG_F32 ? 4 : 8; /* a buffer: its address */
}

/* The --arg list against the kernel's parameters, as the driver reports
 * them (cuFuncGetParamInfo, CUDA 12.4 on; older drivers cannot say): a
 * launch with the wrong ones would read garbage or fault. */
static kb_status check_params(user_suite *u, char *why, size_t cap) {
  const kd_cu_table *cu = u->g->cu;
  const kb_user_kernel *k = u->k;
  if (!cu->cuFuncGetParamInfo) return KB_OK;
  size_t sizes[KB_USER_MAX_ARGS + 1], n = 0;
  for (; n <= KB_USER_MAX_ARGS; ++n) {
    size_t offset, size;
    CUresult r = cu->cuFuncGetParamInfo(u->fn, n, &offset, &size);
    if (r == CUDA_ERROR_INVALID_VALUE) break;
    if (r != CUDA_SUCCESS) return KB_OK; /* the driver cannot tell */
    sizes[n] = size;
  }
  int same = n == k->arg_count;
  for (size_t i = 0; same && i < n; ++i) same = sizes[i] == arg_size(&k->args[i]);
  if (same) return KB_OK;
  char want[256] = "", got[256] = "";
  for (size_t i = 0, w = 0; i < n && w < sizeof want; ++i)
    w += (size_t)snprintf(want + w, sizeof want - w, "%s%zu", i ? ", " : "", sizes[i]);
  for (size_t i = 0, w = 0; i < k->arg_count && w < sizeof got; ++i)
    w += (size_t)snprintf(got + w, sizeof got - w, "%s%zu", i ? ", " : "", arg_size(&k->args[i]));
  snprintf(why, cap, "%s takes %zu parameters (%s bytes), the --arg list gives %zu (%s bytes)", k->name, n, want,
           k->arg_count, got);
  return KB_FAIL;
}

static kb_status user_init(kb_harness *h, void *user, void **state, char *why, size_t cap) {
  const kb_user_kernel *k = user;
  kb_gpu *g;
  kb_status st = kb_gpu_acquire_described(h, &g, why, cap);
  if (st != KB_OK) return st;
  user_suite *u = calloc(1, sizeof *u);
  if (!u) return snprintf(why, cap, "out of memory"), KB_FAIL;
  u->k = k;
  u->g = g;
  if (kd_file_read(k->path, &u->image, &u->image_size) != 0) {
    snprintf(why, cap, "%s: %s", k->path, strerror(errno));
    user_fini(u);
    return KB_FAIL;
  }
  u->is_ptx = !memchr(u->image, 0, u->image_size) && strstr((const char *)u->image, ".entry") != NULL;
  if (ends_with(k->path, ".cu") && (st = compile(u, why, cap))) {
    user_fini(u);
    return st;
  }
  const kd_cu_table *cu = g->cu;
  char call[320];
  snprintf(call, sizeof call, "cuModuleGetFunction(%s) in %s", k->name, k->path);
  if ((st = kb_gpu_check_msg(why, cap, cu->cuModuleLoadDataEx(&u->module, u->image, 0, NULL, NULL),
                             "cuModuleLoadDataEx")) ||
      (st = kb_gpu_check_msg(why, cap, cu->cuModuleGetFunction(&u->fn, u->module, k->name), call)) ||
      (st = check_params(u, why, cap)) ||
      (st = kb_gpu_check_msg(why, cap, cu->cuEventCreate(&u->done, CU_EVENT_DISABLE_TIMING), "cuEventCreate"))) {
    user_fini(u);
    return st;
  }
  for (size_t i = 0; i < k->arg_count; ++i) {
    const user_arg *a = &k->args[i];
    if (a->kind == ARG_BUF) {
      if ((st = kb_gpu_check_msg(why, cap, cu->cuMemAlloc(&u->bufs[i], a->bytes), "cuMemAlloc")) ||
          (st = kb_gpu_check_msg(why, cap, cu->cuMemsetD8Async(u->bufs[i], 0, a->bytes, g->stream),
                                 "cuMemsetD8Async")) ||
          (st = kb_gpu_check_msg(why, cap, cu->cuStreamSynchronize(g->stream), "cuStreamSynchronize"))) {
        user_fini(u);
        return st;
      }
      u->params[i] = &u->bufs[i];
    } else {
      u->params[i] = (void *)&a->v;
    }
  }
  *state = u;
  return KB_OK;
}

static int64_t chain_length(kb_run *run) { return kb_run_axis(run, "N", 100); }

static kb_status declare(kb_run *run) {
  int64_t n = chain_length(run);
  if (n < 1) return kb_run_fail(run, "N must be at least 1, not %lld", (long long)n);
  kb_run_per_iteration(run, (double)n, "launch");
  kb_run_throughput(run, (double)n, 0);
  return KB_OK;
}

static kb_status launch_setup(kb_run *run, void **state) {
  (void)state;
  return declare(run);
}

static kb_status launch_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  (void)state;
  user_suite *u = kb_run_suite_state(run);
  const kb_user_kernel *k = u->k;
  const kd_cu_table *cu = u->g->cu;
  uint64_t t0 = 0;
  kb_status st = kb_gpu_batch_begin(u->g, run, &t0);
  if (st) return st;
  for (uint64_t it = 0; it < iterations; ++it) {
    for (int64_t i = 0, n = chain_length(run); i < n; ++i) {
      CUresult r = cu->cuLaunchKernel(u->fn, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1],
                                      k->block[2], k->shared, u->g->stream, k->arg_count ? u->params : NULL, NULL);
      if (r != CUDA_SUCCESS) return kb_gpu_check(run, r, "cuLaunchKernel");
    }
    CUresult r = cu->cuEventRecord(u->done, u->g->stream);
    if (r != CUDA_SUCCESS) return kb_gpu_check(run, r, "cuEventRecord(done)");
  }
  return kb_gpu_batch_end(u->g, run, t0, out);
}

typedef struct hand {
  CUgraph graph;
  CUgraphExec exec;
} hand;

static void hand_teardown(kb_run *run, void *state) {
  hand *hg = state;
  if (!hg) return;
  user_suite *u = kb_run_suite_state(run);
  const kd_cu_table *cu = u->g->cu;
  cu->cuStreamSynchronize(u->g->stream);
  if (hg->exec) cu->cuGraphExecDestroy(hg->exec);
  if (hg->graph) cu->cuGraphDestroy(hg->graph);
  free(hg);
}

#define GRAPH_MIN_BATCH 16 /* as the launch suite: host time over several launches */

static kb_status hand_setup(kb_run *run, void **state) {
  kb_status st = declare(run);
  if (st) return st;
  kb_run_min_batch(run, GRAPH_MIN_BATCH);
  user_suite *u = kb_run_suite_state(run);
  const kb_user_kernel *k = u->k;
  const kd_cu_table *cu = u->g->cu;
  hand *hg = calloc(1, sizeof *hg);
  if (!hg) return kb_run_fail(run, "out of memory");
  *state = hg;
  CUDA_KERNEL_NODE_PARAMS p = {0};
  p.func = u->fn;
  p.gridDimX = k->grid[0], p.gridDimY = k->grid[1], p.gridDimZ = k->grid[2];
  p.blockDimX = k->block[0], p.blockDimY = k->block[1], p.blockDimZ = k->block[2];
  p.sharedMemBytes = k->shared;
  p.kernelParams = k->arg_count ? u->params : NULL;
  if ((st = kb_gpu_check(run, cu->cuGraphCreate(&hg->graph, 0), "cuGraphCreate"))) goto fail;
  CUgraphNode prev = NULL;
  for (int64_t i = 0, n = chain_length(run); i < n; ++i) {
    CUgraphNode node;
    if ((st = kb_gpu_check(run, cu->cuGraphAddKernelNode(&node, hg->graph, prev ? &prev : NULL, prev ? 1 : 0, &p),
                           "cuGraphAddKernelNode")))
      goto fail;
    prev = node;
  }
  if ((st = kb_gpu_instantiate(u->g, run, hg->graph, 0, &hg->exec))) goto fail;
  return KB_OK;
fail:
  hand_teardown(run, hg);
  *state = NULL;
  return st;
}

static kb_status hand_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  hand *hg = state;
  user_suite *u = kb_run_suite_state(run);
  const kd_cu_table *cu = u->g->cu;
  uint64_t t0 = 0;
  kb_status st = kb_gpu_batch_begin(u->g, run, &t0);
  if (st) return st;
  for (uint64_t it = 0; it < iterations; ++it) {
    CUresult r = cu->cuGraphLaunch(hg->exec, u->g->stream);
    if (r != CUDA_SUCCESS) return kb_gpu_check(run, r, "cuGraphLaunch");
    r = cu->cuEventRecord(u->done, u->g->stream);
    if (r != CUDA_SUCCESS) return kb_gpu_check(run, r, "cuEventRecord(done)");
  }
  return kb_gpu_batch_end(u->g, run, t0, out);
}

/* The chain as a kdag graph: buffers as tensors each node reads and
 * writes (so the inferred order is the chain), scalars as values; without
 * a buffer, explicit edges make the chain. */
typedef struct kdag_chain {
  kb_kdag k;
  kd_graph *graph;
  kd_tensor tensors[KB_USER_MAX_ARGS];
} kdag_chain;

typedef struct load_request {
  const user_suite *u;
  kd_function *out;
} load_request;

static kd_status load(kd_raw *raw, void *user) {
  load_request *q = user;
  kd_module m;
  kd_status st = q->u->is_ptx ? kd_raw_load_ptx(raw, (const char *)q->u->image, q->u->image_size + 1, &m)
                              : kd_raw_load_image(raw, q->u->image, q->u->image_size, &m);
  if (!st) st = kd_module_function(kd_raw_session(raw), m, q->u->k->name, q->out);
  return st;
}

static void kdag_teardown(kb_run *run, void *state) {
  kdag_chain *c = state;
  if (!c) return;
  user_suite *u = kb_run_suite_state(run);
  kd_graph_destroy(c->graph);
  for (size_t i = 0; i < u->k->arg_count; ++i)
    if (c->tensors[i].bits) kd_tensor_release(c->k.session, c->tensors[i]);
  kb_kdag_close(&c->k);
  free(c);
}

static kb_status kdag_setup(kb_run *run, void **state) {
  kb_status st = declare(run);
  if (st) return st;
  user_suite *u = kb_run_suite_state(run);
  const kb_user_kernel *k = u->k;
  kdag_chain *c = calloc(1, sizeof *c);
  if (!c) return kb_run_fail(run, "out of memory");
  kd_exec_mode mode = *(const kd_exec_mode *)kb_run_user(run);
  if (mode == KD_EXEC_GRAPH) kb_run_min_batch(run, GRAPH_MIN_BATCH);
  kd_function fn;
  load_request q = {u, &fn};
  if ((st = kb_kdag_open(run, mode, &c->k))) goto fail;
  if (kd_with_raw(c->k.session, "bench.user.load", load, &q)) {
    st = kb_run_fail(run, "loading %s from %s: %s", k->name, k->path, kd_last_error());
    goto fail;
  }
  kd_garg args[KB_USER_MAX_ARGS];
  int buffers = 0;
  for (size_t i = 0; i < k->arg_count; ++i) {
    const user_arg *a = &k->args[i];
    switch (a->kind) {
      case ARG_BUF: {
        kd_tensor_desc d = {.dtype = KD_U8, .rank = 1, .shape = {(int64_t)a->bytes}};
        void *zeros = calloc(1, a->bytes);
        kd_status ks = zeros ? kd_tensor_from_host(c->k.session, &d, zeros, a->bytes, &c->tensors[i])
                             : KD_ERR_OUT_OF_MEMORY;
        free(zeros);
        if (ks) goto kdag_fail;
        args[i] = kd_g_inout(kd_whole(c->tensors[i]));
        buffers++;
        break;
      }
      case ARG_I32: args[i] = kd_g_value(kd_arg_i32(a->v.i32)); break;
      case ARG_U32: args[i] = kd_g_value(kd_arg_u32(a->v.u32)); break;
      case ARG_I64: args[i] = kd_g_value(kd_arg_i64(a->v.i64)); break;
      case ARG_U64: args[i] = kd_g_value(kd_arg_u64(a->v.u64)); break;
      case ARG_F32: args[i] = kd_g_value(kd_arg_f32(a->v.f32)); break;
      case ARG_F64: args[i] = kd_g_value(kd_arg_f64(a->v.f64)); break;
    }
  }
  kd_launch_config cfg = {{k->grid[0], k->grid[1], k->grid[2]}, {k->block[0], k->block[1], k->block[2]}, k->shared, 0};
  if (kd_graph_create(c->k.session, &c->graph) || kd_graph_set_name(c->graph, k->name)) goto kdag_fail;
  kd_node prev = 0;
  for (int64_t i = 0, n = chain_length(run); i < n; ++i) {
    kd_node node;
    if (kd_graph_kernel(c->graph, k->name, fn, &cfg, k->arg_count ? args : NULL, k->arg_count, &node) ||
        (i > 0 && !buffers && kd_graph_edge(c->graph, prev, node)))
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

int kb_register_user_suite(kb_harness *h, kb_user_kernel *k) {
  static char description[1400];
  snprintf(description, sizeof description, "%s from %s: a chain of N launches per submission (--kernel)", k->name,
           k->path);
  kb_suite_desc sd = {.name = "user", .description = description, .needs_gpu = 1, .init = user_init,
                      .fini = user_fini, .user = k, .interleave = 1, .host_cost = 1};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  static const int64_t n[] = {100};
  static const kd_exec_mode eager = KD_EXEC_EAGER, graph = KD_EXEC_GRAPH;
  kb_case_desc cases[] = {
      {.name = "cu_launch", .description = "cuLaunchKernel per launch, cuEventRecord per submission", .baseline = 1,
       .setup = launch_setup, .batch = launch_batch},
      {.name = "hand_graph", .description = "the chain as a hand-built CUDA graph, one cuGraphLaunch per submission",
       .baseline = 1, .setup = hand_setup, .batch = hand_batch, .teardown = hand_teardown},
      {.name = "kdag_eager", .description = "the chain as a kdag graph of N kernel nodes, EAGER",
       .setup = kdag_setup, .batch = kdag_batch, .teardown = kdag_teardown, .user = (void *)&eager},
      {.name = "kdag_graph", .description = "the same kdag graph, GRAPH: one instantiated CUDA graph",
       .setup = kdag_setup, .batch = kdag_batch, .teardown = kdag_teardown, .user = (void *)&graph}};
  if (kb_suite_axis(s, "N", n, 1)) return -1;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    if (kb_case_add(s, &cases[i])) return -1;
  return 0;
}
