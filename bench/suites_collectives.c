/* SPDX-License-Identifier: Apache-2.0 */
/* Suite "collectives" [GPU]: an all-reduce (sum of f32, out of place) of
 * KiB kibibytes per rank, per iteration, on R ranks: the GPUs of this
 * process, one thread each (KDAG_BENCH_RANKS: 1 by default, 0 for every
 * device). The timed rank is 0, on the bench's GPU; the others run the
 * same iterations alongside.
 *  - nccl_direct (baseline): ncclAllReduce on a stream, NCCL loaded by the
 *    bench itself (KDAG_NCCL_PATH, libnccl.so.2, the pip wheel under
 *    KDAG_PYTHON_SITE) and called as a user of NCCL alone would;
 *  - nccl_graph: the same call captured once into a CUDA graph by hand,
 *    launched;
 *  - kdag_eager: a kdag graph of one kd_graph_all_reduce node on an EAGER
 *    session, submitted;
 *  - kdag_graph: the same graph in GRAPH mode (kdag captures NCCL into its
 *    executable graph once), submitted.
 * Sizes: 4 KiB (the launch path), 64 MiB, 1 GiB (the bandwidth). */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/gpu.h"
#include "bench/kdag_session.h"
#include "bench/suites.h"
#include "kdag/kdag.h"

#define COLL_MAX_RANKS 16

/* NCCL's ABI, as nccl.h declares it: what the baselines call. */
typedef struct coll_nccl_id { char internal[128]; } coll_nccl_id;
typedef struct coll_nccl {
  void *handle;
  int (*GetUniqueId)(coll_nccl_id *);
  int (*CommInitRank)(void **comm, int nranks, coll_nccl_id id, int rank);
  int (*CommDestroy)(void *comm);
  int (*AllReduce)(const void *, void *, size_t, int, int, void *, CUstream);
  int (*GroupStart)(void);
  int (*GroupEnd)(void);
  const char *(*GetErrorString)(int);
} coll_nccl;
enum { COLL_NCCL_FLOAT32 = 7, COLL_NCCL_SUM = 0 };

/* Loaded once for the process; NULL handle when not found (why says so). */
static coll_nccl g_nccl;
static char g_nccl_why[1024];

static void *open_nccl(void) {
  const char *env = getenv("KDAG_NCCL_PATH");
  void *h = env && *env ? dlopen(env, RTLD_NOW) : dlopen("libnccl.so.2", RTLD_NOW);
  const char *site = getenv("KDAG_PYTHON_SITE");
  char path[1024];
  while (!h && site && *site) {
    const char *end = strchr(site, ':');
    int len = end ? (int)(end - site) : (int)strlen(site);
    snprintf(path, sizeof path, "%.*s/nvidia/nccl/lib/libnccl.so.2", len, site);
    h = dlopen(path, RTLD_NOW);
    site = end ? end + 1 : NULL;
  }
  return h;
}

static int nccl_load(void) {
  if (g_nccl.handle) return 1;
  if (g_nccl_why[0]) return 0;
  void *h = open_nccl();
  if (!h) {
    snprintf(g_nccl_why, sizeof g_nccl_why, "NCCL not found (KDAG_NCCL_PATH, libnccl.so.2, KDAG_PYTHON_SITE)");
    return 0;
  }
  void **slots[] = {(void **)&g_nccl.GetUniqueId, (void **)&g_nccl.CommInitRank, (void **)&g_nccl.CommDestroy,
                    (void **)&g_nccl.AllReduce, (void **)&g_nccl.GroupStart, (void **)&g_nccl.GroupEnd,
                    (void **)&g_nccl.GetErrorString};
  const char *names[] = {"ncclGetUniqueId", "ncclCommInitRank", "ncclCommDestroy", "ncclAllReduce",
                         "ncclGroupStart", "ncclGroupEnd", "ncclGetErrorString"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i)
    if (!(*slots[i] = dlsym(h, names[i]))) {
      snprintf(g_nccl_why, sizeof g_nccl_why, "NCCL lacks %s", names[i]);
      dlclose(h);
      return 0;
    }
  g_nccl.handle = h;
  return 1;
}

typedef enum coll_kind { COLL_DIRECT, COLL_NCCL_GRAPH, COLL_KDAG_EAGER, COLL_KDAG_GRAPH } coll_kind;

typedef struct coll_rank {
  /* The NCCL baselines: the device's primary context, a stream, buffers. */
  CUcontext ctx;
  CUstream stream;
  CUdeviceptr src, dst;
  void *comm;
  CUgraphExec exec;
  /* kdag: a session of the device (rank 0: the timed kb_kdag's). */
  kd_session *session;
  kd_comm *kcomm;
  kd_graph *graph;
  kd_tensor tsrc, tdst;
} coll_rank;

typedef struct coll_case {
  coll_kind kind;
  kb_kdag k;
  kb_gpu *g;
  int ranks;
  size_t count;
  coll_rank r[COLL_MAX_RANKS];
  /* a batch's work for the rank threads */
  uint64_t iterations;
  kb_run *run;
  kb_status st[COLL_MAX_RANKS];
  kb_timing *timing;
} coll_case;

static int ranks_wanted(void) {
  const char *env = getenv("KDAG_BENCH_RANKS");
  int n = env && *env ? atoi(env) : 1, devices = 0;
  const kd_cu_table *cu = NULL;
  kb_gpu *g;
  char why[KB_MESSAGE_MAX];
  if (kb_gpu_acquire(&g, why, sizeof why) == KB_OK) cu = g->cu;
  if (cu && cu->cuDeviceGetCount(&devices) != CUDA_SUCCESS) devices = 1;
  if (n <= 0 || n > devices) n = devices;
  return n < 1 ? 1 : n > COLL_MAX_RANKS ? COLL_MAX_RANKS : n;
}

/* Runs fn for every rank at once: ranks 1.. on threads of their own (NCCL
 * waits for every rank's call), rank 0 on the harness's thread. */
typedef kb_status (*rank_fn)(coll_case *c, int r);
typedef struct rank_job { coll_case *c; int r; rank_fn fn; } rank_job;

static void *rank_thread(void *p) {
  rank_job *j = p;
  j->c->st[j->r] = j->fn(j->c, j->r);
  return NULL;
}

static kb_status each_rank(coll_case *c, rank_fn fn) {
  pthread_t t[COLL_MAX_RANKS];
  rank_job jobs[COLL_MAX_RANKS];
  int started[COLL_MAX_RANKS] = {0};
  for (int r = 1; r < c->ranks; ++r) {
    jobs[r] = (rank_job){c, r, fn};
    started[r] = pthread_create(&t[r], NULL, rank_thread, &jobs[r]) == 0;
    if (!started[r]) c->st[r] = kb_run_fail(c->run, "pthread_create for rank %d failed", r);
  }
  kb_status st = fn(c, 0);
  for (int r = 1; r < c->ranks; ++r) {
    if (started[r]) pthread_join(t[r], NULL);
    if (!st && c->st[r]) st = c->st[r];
  }
  return st;
}

static kb_status nccl_check(kb_run *run, int r, int res, const char *call) {
  if (!res) return KB_OK;
  return kb_run_fail(run, "%s failed on rank %d: %s", call, r, g_nccl.GetErrorString(res));
}

static kb_status kdag_check(kb_run *run, kd_status st, const char *call) {
  return st ? kb_run_fail(run, "%s: %s", call, kd_last_error()) : KB_OK;
}

/* ---- set-up of each kind ---- */

static kb_status direct_setup(coll_case *c) {
  const kd_cu_table *cu = c->g->cu;
  kb_status st = KB_OK;
  for (int r = 0; r < c->ranks && !st; ++r) {
    coll_rank *k = &c->r[r];
    if (r == 0) {
      k->ctx = c->g->context;
      k->stream = c->g->stream;
    } else {
      CUdevice dev;
      st = kb_gpu_check(c->run, cu->cuDeviceGet(&dev, r), "cuDeviceGet");
      if (!st) st = kb_gpu_check(c->run, cu->cuDevicePrimaryCtxRetain(&k->ctx, dev), "cuDevicePrimaryCtxRetain");
      if (!st) st = kb_gpu_check(c->run, cu->cuCtxSetCurrent(k->ctx), "cuCtxSetCurrent");
      if (!st) st = kb_gpu_check(c->run, cu->cuStreamCreate(&k->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    }
    if (!st) st = kb_gpu_check(c->run, cu->cuCtxSetCurrent(k->ctx), "cuCtxSetCurrent");
    if (!st) st = kb_gpu_check(c->run, cu->cuMemAlloc(&k->src, c->count * 4), "cuMemAlloc");
    if (!st) st = kb_gpu_check(c->run, cu->cuMemAlloc(&k->dst, c->count * 4), "cuMemAlloc");
    if (!st) st = kb_gpu_check(c->run, cu->cuMemsetD32Async(k->src, 0x3f800000u, c->count, k->stream), "cuMemsetD32Async");
  }
  coll_nccl_id id;
  if (!st) st = nccl_check(c->run, 0, g_nccl.GetUniqueId(&id), "ncclGetUniqueId");
  if (!st) { /* one thread initializes every rank: NCCL's group */
    int res = g_nccl.GroupStart();
    for (int r = 0; r < c->ranks && !res; ++r) {
      cu->cuCtxSetCurrent(c->r[r].ctx);
      res = g_nccl.CommInitRank(&c->r[r].comm, c->ranks, id, r);
    }
    int end = g_nccl.GroupEnd();
    st = nccl_check(c->run, 0, res ? res : end, "ncclCommInitRank");
  }
  cu->cuCtxSetCurrent(c->g->context);
  return st;
}

static kb_status capture_rank(coll_case *c, int r) {
  const kd_cu_table *cu = c->g->cu;
  coll_rank *k = &c->r[r];
  CUgraph graph = NULL;
  kb_status st = kb_gpu_check(c->run, cu->cuCtxSetCurrent(k->ctx), "cuCtxSetCurrent");
  if (!st) st = kb_gpu_check(c->run, cu->cuStreamBeginCapture(k->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                             "cuStreamBeginCapture");
  if (st) return st;
  int res = g_nccl.AllReduce((void *)k->src, (void *)k->dst, c->count, COLL_NCCL_FLOAT32, COLL_NCCL_SUM, k->comm,
                             k->stream);
  CUresult e = cu->cuStreamEndCapture(k->stream, &graph);
  st = nccl_check(c->run, r, res, "ncclAllReduce (captured)");
  if (!st) st = kb_gpu_check(c->run, e, "cuStreamEndCapture");
  if (!st) st = kb_gpu_check(c->run, cu->cuGraphInstantiateWithFlags(&k->exec, graph, 0), "cuGraphInstantiate");
  if (graph) cu->cuGraphDestroy(graph);
  return st;
}

static kb_status kdag_setup(coll_case *c) {
  kd_exec_mode mode = c->kind == COLL_KDAG_GRAPH ? KD_EXEC_GRAPH : KD_EXEC_EAGER;
  kb_status st = kb_kdag_open(c->run, mode, &c->k);
  if (st) return st;
  kd_session *sessions[COLL_MAX_RANKS];
  for (int r = 0; r < c->ranks && !st; ++r) {
    coll_rank *k = &c->r[r];
    if (r == 0) {
      k->session = c->k.session;
    } else {
      kd_session_options o;
      kd_session_options_init(&o);
      o.backend = KD_BACKEND_CUDA;
      o.device_ordinal = r;
      o.exec_mode = mode;
      st = kdag_check(c->run, kd_session_create(&o, &k->session), "kd_session_create");
    }
    sessions[r] = k->session;
  }
  if (!st) {
    kd_comm *comms[COLL_MAX_RANKS];
    st = kdag_check(c->run, kd_comm_create_all(sessions, c->ranks, comms), "kd_comm_create_all");
    for (int r = 0; !st && r < c->ranks; ++r) c->r[r].kcomm = comms[r];
  }
  float *ones = st ? NULL : malloc(c->count * 4);
  if (!st && !ones) st = kb_run_fail(c->run, "out of memory");
  for (size_t i = 0; ones && i < c->count; ++i) ones[i] = 1.0f;
  for (int r = 0; r < c->ranks && !st; ++r) {
    coll_rank *k = &c->r[r];
    kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {(int64_t)c->count}};
    st = kdag_check(c->run, kd_tensor_from_host(k->session, &d, ones, c->count * 4, &k->tsrc), "kd_tensor_from_host");
    if (!st) st = kdag_check(c->run, kd_tensor_create(k->session, &d, &k->tdst), "kd_tensor_create");
    if (!st) st = kdag_check(c->run, kd_graph_create(k->session, &k->graph), "kd_graph_create");
    if (!st)
      st = kdag_check(c->run, kd_graph_all_reduce(k->graph, "all_reduce", k->kcomm, kd_whole(k->tdst),
                                                  kd_whole(k->tsrc), KD_REDUCE_SUM, NULL),
                      "kd_graph_all_reduce");
  }
  free(ones);
  return st;
}

static void coll_teardown(kb_run *run, void *state) {
  (void)run;
  coll_case *c = state;
  if (!c) return;
  const kd_cu_table *cu = c->g->cu;
  for (int r = c->ranks - 1; r >= 0; --r) {
    coll_rank *k = &c->r[r];
    if (k->graph) kd_graph_destroy(k->graph);
    if (k->tsrc.bits) kd_tensor_release(k->session, k->tsrc);
    if (k->tdst.bits) kd_tensor_release(k->session, k->tdst);
    kd_comm_destroy(k->kcomm);
    if (r > 0) kd_session_destroy(k->session);
    if (k->ctx) cu->cuCtxSetCurrent(k->ctx);
    if (k->stream) cu->cuStreamSynchronize(k->stream);
    if (k->exec) cu->cuGraphExecDestroy(k->exec);
    if (k->comm) g_nccl.CommDestroy(k->comm);
    if (k->src) cu->cuMemFree(k->src);
    if (k->dst) cu->cuMemFree(k->dst);
    if (r > 0 && k->stream) cu->cuStreamDestroy(k->stream);
    if (r > 0 && k->ctx) {
      CUdevice dev;
      if (cu->cuDeviceGet(&dev, r) == CUDA_SUCCESS) cu->cuDevicePrimaryCtxRelease(dev);
    }
  }
  cu->cuCtxSetCurrent(c->g->context);
  kb_kdag_close(&c->k);
  free(c);
}

static kb_status coll_setup(kb_run *run, void **state) {
  kb_gpu *g = kb_run_suite_state(run);
  if (!nccl_load()) return kb_run_skip(run, "%s", g_nccl_why);
  coll_case *c = calloc(1, sizeof *c);
  if (!c) return kb_run_fail(run, "out of memory");
  c->kind = (coll_kind)(uintptr_t)kb_run_user(run);
  c->g = g;
  c->run = run;
  c->ranks = ranks_wanted();
  c->count = (size_t)kb_run_axis(run, "KiB", 4) * 1024 / 4;
  kb_status st = c->kind == COLL_DIRECT || c->kind == COLL_NCCL_GRAPH ? direct_setup(c) : kdag_setup(c);
  if (!st && c->kind == COLL_NCCL_GRAPH) st = each_rank(c, capture_rank);
  g->cu->cuCtxSetCurrent(g->context);
  if (st) {
    coll_teardown(run, c);
    return st;
  }
  kb_run_per_iteration(run, 1, "all_reduce");
  kb_run_throughput(run, 1, (double)c->count * 4); /* the bytes each rank contributes */
  *state = c;
  return KB_OK;
}

/* ---- a batch: every rank runs `iterations` of its kind ---- */

static kb_status rank_iterations(coll_case *c, int r) {
  const kd_cu_table *cu = c->g->cu;
  coll_rank *k = &c->r[r];
  uint64_t t0 = 0;
  kb_status st = KB_OK;
  int kdag = c->kind == COLL_KDAG_EAGER || c->kind == COLL_KDAG_GRAPH;
  if (!kdag) st = kb_gpu_check(c->run, cu->cuCtxSetCurrent(k->ctx), "cuCtxSetCurrent");
  if (!st && r == 0) st = kdag ? kb_kdag_begin(c->run, &c->k, &t0) : kb_gpu_batch_begin(c->g, c->run, &t0);
  kd_ticket last = {0, 0};
  for (uint64_t it = 0; it < c->iterations && !st; ++it) {
    switch (c->kind) {
      case COLL_DIRECT:
        st = nccl_check(c->run, r, g_nccl.AllReduce((void *)k->src, (void *)k->dst, c->count, COLL_NCCL_FLOAT32,
                                                    COLL_NCCL_SUM, k->comm, k->stream), "ncclAllReduce");
        break;
      case COLL_NCCL_GRAPH: st = kb_gpu_check(c->run, cu->cuGraphLaunch(k->exec, k->stream), "cuGraphLaunch"); break;
      default: st = kdag_check(c->run, kd_graph_submit(k->graph, &last), "kd_graph_submit"); break;
    }
  }
  if (r == 0) {
    if (!st) st = kdag ? kb_kdag_end(c->run, &c->k, t0, c->timing) : kb_gpu_batch_end(c->g, c->run, t0, c->timing);
    return st;
  }
  /* The other ranks wait for their own work before the batch ends. */
  if (!st && !kdag) st = kb_gpu_check(c->run, cu->cuStreamSynchronize(k->stream), "cuStreamSynchronize");
  int done = 0;
  while (!st && kdag && last.session && !done) {
    st = kdag_check(c->run, kd_ticket_done(k->session, last, &done), "kd_ticket_done");
    if (!done) sched_yield();
  }
  return st;
}

static kb_status coll_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  coll_case *c = state;
  c->run = run;
  c->iterations = iterations;
  c->timing = out;
  kb_status st = each_rank(c, rank_iterations);
  c->g->cu->cuCtxSetCurrent(c->g->context);
  return st;
}

int kb_register_collectives_suite(kb_harness *h) {
  kb_suite_desc sd = {.name = "collectives",
                      .description = "an f32 all-reduce per iteration (KDAG_BENCH_RANKS GPUs, a thread each): NCCL "
                                     "called directly, NCCL in a hand-captured CUDA graph, and a kdag all-reduce node "
                                     "in EAGER and GRAPH mode",
                      .needs_gpu = 1, .init = kb_gpu_suite_init, .interleave = 1};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  static const int64_t kib[] = {4, 64 * 1024, 1024 * 1024};
  if (kb_suite_axis(s, "KiB", kib, sizeof kib / sizeof kib[0])) return -1;
  static const struct { const char *name, *description; coll_kind kind; int baseline; } cases[] = {
      {"nccl_direct", "ncclAllReduce on a stream, NCCL alone", COLL_DIRECT, 1},
      {"nccl_graph", "ncclAllReduce captured once into a CUDA graph by hand, launched", COLL_NCCL_GRAPH, 0},
      {"kdag_eager", "a kdag graph of one kd_graph_all_reduce node, EAGER, submitted", COLL_KDAG_EAGER, 0},
      {"kdag_graph", "the same graph in GRAPH mode (NCCL captured by kdag), submitted", COLL_KDAG_GRAPH, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    kb_case_desc c = {.name = cases[i].name, .description = cases[i].description, .baseline = cases[i].baseline,
                      .setup = coll_setup, .batch = coll_batch, .teardown = coll_teardown,
                      .user = (void *)(uintptr_t)cases[i].kind};
    if (kb_case_add(s, &c)) return -1;
  }
  return 0;
}
