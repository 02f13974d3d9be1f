/* SPDX-License-Identifier: Apache-2.0 */
/* wait-probe: which driver calls wait for unrelated work in the same
 * context.
 *
 * For each call, a kernel that spins for SPIN_MS runs on a stream of the
 * device's primary context, and the call is made on the host (touching
 * other objects, another stream where it needs one); its time is compared
 * with the same call made while nothing runs. A call that waits for the
 * spinning kernel takes about SPIN_MS longer. kdag (session.h, "waits")
 * defers or documents every call this finds waiting. One more row runs
 * the kernel in a second context: a call there must not wait.
 *
 *   cc -std=c11 -O2 -I$CUDA/include tools/wait-probe.c -L$CUDA/lib64/stubs -lcuda -o wait-probe
 *   ./wait-probe            (needs a GPU; prints a markdown table)
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SPIN_MS 200.0

static const char *ptx =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry spin(.param .u64 ns) { .reg .b64 %t0, %t1, %d, %n; .reg .pred %p;\n"
    "  ld.param.u64 %n, [ns]; mov.u64 %t0, %globaltimer;\n"
    "L: mov.u64 %t1, %globaltimer; sub.u64 %d, %t1, %t0; setp.lt.u64 %p, %d, %n; @%p bra L; ret; }\n"
    ".visible .entry empty() { ret; }\n";

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void check(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS) return;
  const char *name = "?";
  cuGetErrorName(r, &name);
  fprintf(stderr, "wait-probe: %s: %s\n", what, name);
  exit(1);
}

static CUcontext ctx;
static CUstream spin_stream, other_stream;
static CUfunction spin_fn;
static CUmodule spin_mod;

/* State a probe's setup leaves for its call, and its cleanup. */
typedef struct probe_state {
  CUmodule mod;
  CUfunction fn;
  CUlibrary lib;
  CUdeviceptr dptr;
  void *host;
  CUstream stream;
  CUevent event;
  CUgraph graph;
  CUgraphExec exec;
  CUmemoryPool pool;
  size_t image_size;
  void *image;
} probe_state;

typedef void probe_fn(probe_state *st);

static void *cubin_image; /* the PTX compiled for this GPU by the driver's linker */
static size_t cubin_size;

static void load_cubin(probe_state *st) { check(cuModuleLoadData(&st->mod, cubin_image), "cuModuleLoadData(cubin)"); }
static void load_ptx(probe_state *st) { check(cuModuleLoadData(&st->mod, ptx), "cuModuleLoadData(ptx)"); }
static void get_function(probe_state *st) { check(cuModuleGetFunction(&st->fn, st->mod, "empty"), "cuModuleGetFunction"); }
static void func_attribute(probe_state *st) {
  int v;
  check(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, st->fn), "cuFuncGetAttribute");
}
static void func_set_attribute(probe_state *st) {
  check(cuFuncSetAttribute(st->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024), "cuFuncSetAttribute");
}
static void first_launch(probe_state *st) {
  check(cuLaunchKernel(st->fn, 1, 1, 1, 1, 1, 1, 0, other_stream, NULL, NULL), "cuLaunchKernel");
}
static void unload(probe_state *st) {
  check(cuModuleUnload(st->mod), "cuModuleUnload");
  st->mod = NULL;
}
static void library_load(probe_state *st) {
  check(cuLibraryLoadData(&st->lib, cubin_image, NULL, NULL, 0, NULL, NULL, 0), "cuLibraryLoadData");
}
static void library_unload(probe_state *st) {
  check(cuLibraryUnload(st->lib), "cuLibraryUnload");
  st->lib = NULL;
}
static void mem_alloc(probe_state *st) { check(cuMemAlloc(&st->dptr, 1 << 20), "cuMemAlloc"); }
static void mem_free(probe_state *st) {
  check(cuMemFree(st->dptr), "cuMemFree");
  st->dptr = 0;
}
static void alloc_async(probe_state *st) { check(cuMemAllocAsync(&st->dptr, 1 << 20, other_stream), "cuMemAllocAsync"); }
static void free_async(probe_state *st) {
  check(cuMemFreeAsync(st->dptr, other_stream), "cuMemFreeAsync");
  st->dptr = 0;
}
static void pool_trim(probe_state *st) {
  (void)st;
  CUmemoryPool pool;
  check(cuDeviceGetDefaultMemPool(&pool, 0), "cuDeviceGetDefaultMemPool");
  check(cuMemPoolTrimTo(pool, 0), "cuMemPoolTrimTo");
}
static void host_alloc(probe_state *st) { check(cuMemHostAlloc(&st->host, 1 << 20, 0), "cuMemHostAlloc"); }
static void free_host(probe_state *st) {
  check(cuMemFreeHost(st->host), "cuMemFreeHost");
  st->host = NULL;
}
static void host_register(probe_state *st) {
  check(cuMemHostRegister(st->host, 1 << 20, CU_MEMHOSTREGISTER_PORTABLE), "cuMemHostRegister");
}
static void host_unregister(probe_state *st) { check(cuMemHostUnregister(st->host), "cuMemHostUnregister"); }
static void stream_create(probe_state *st) { check(cuStreamCreate(&st->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"); }
static void stream_destroy(probe_state *st) {
  check(cuStreamDestroy(st->stream), "cuStreamDestroy");
  st->stream = NULL;
}
static void event_create(probe_state *st) { check(cuEventCreate(&st->event, CU_EVENT_DISABLE_TIMING), "cuEventCreate"); }
static void event_destroy(probe_state *st) {
  check(cuEventDestroy(st->event), "cuEventDestroy");
  st->event = NULL;
}
static void graph_build(probe_state *st) {
  check(cuGraphCreate(&st->graph, 0), "cuGraphCreate");
  CUDA_KERNEL_NODE_PARAMS p = {0};
  p.func = st->fn;
  p.gridDimX = p.gridDimY = p.gridDimZ = p.blockDimX = p.blockDimY = p.blockDimZ = 1;
  CUgraphNode n;
  check(cuGraphAddKernelNode(&n, st->graph, NULL, 0, &p), "cuGraphAddKernelNode");
}
static void graph_instantiate(probe_state *st) { check(cuGraphInstantiate(&st->exec, st->graph, 0), "cuGraphInstantiate"); }
static void graph_launch(probe_state *st) { check(cuGraphLaunch(st->exec, other_stream), "cuGraphLaunch"); }
static void exec_destroy(probe_state *st) {
  check(cuGraphExecDestroy(st->exec), "cuGraphExecDestroy");
  st->exec = NULL;
}
static void graph_destroy(probe_state *st) {
  check(cuGraphDestroy(st->graph), "cuGraphDestroy");
  st->graph = NULL;
}
static void capture(probe_state *st) {
  CUgraph g;
  check(cuStreamBeginCapture(other_stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
  check(cuLaunchKernel(st->fn, 1, 1, 1, 1, 1, 1, 0, other_stream, NULL, NULL), "cuLaunchKernel (captured)");
  check(cuStreamEndCapture(other_stream, &g), "cuStreamEndCapture");
  check(cuGraphDestroy(g), "cuGraphDestroy");
}
static void pool_create(probe_state *st) {
  CUmemPoolProps p = {0};
  p.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = 0;
  check(cuMemPoolCreate(&st->pool, &p), "cuMemPoolCreate");
}
static void pool_destroy(probe_state *st) {
  check(cuMemPoolDestroy(st->pool), "cuMemPoolDestroy");
  st->pool = NULL;
}
static void ctx_synchronize(probe_state *st) {
  (void)st;
  check(cuCtxSynchronize(), "cuCtxSynchronize");
}

/* Setups: what each call needs first (made before the kernel starts). */
static void need_module(probe_state *st) { load_cubin(st); }
static void need_function(probe_state *st) {
  load_cubin(st);
  get_function(st);
}
static void need_loaded_function(probe_state *st) {
  need_function(st);
  func_attribute(st);
}
static void need_library(probe_state *st) { library_load(st); }
static void need_dptr(probe_state *st) { mem_alloc(st); }
static void need_async(probe_state *st) {
  alloc_async(st);
  check(cuStreamSynchronize(other_stream), "cuStreamSynchronize");
}
static void need_host(probe_state *st) { host_alloc(st); }
static void need_malloc(probe_state *st) { st->host = malloc(1 << 20); }
static void need_registered(probe_state *st) {
  need_malloc(st);
  host_register(st);
}
static void need_stream(probe_state *st) { stream_create(st); }
static void need_event(probe_state *st) { event_create(st); }
static void need_graph(probe_state *st) {
  need_loaded_function(st);
  graph_build(st);
}
static void need_exec(probe_state *st) {
  need_graph(st);
  graph_instantiate(st);
}
static void need_pool(probe_state *st) { pool_create(st); }

static void cleanup(probe_state *st) {
  cuCtxSynchronize();
  if (st->exec) cuGraphExecDestroy(st->exec);
  if (st->graph) cuGraphDestroy(st->graph);
  if (st->mod) cuModuleUnload(st->mod);
  if (st->lib) cuLibraryUnload(st->lib);
  if (st->dptr) cuMemFree(st->dptr);
  if (st->stream) cuStreamDestroy(st->stream);
  if (st->event) cuEventDestroy(st->event);
  if (st->pool) cuMemPoolDestroy(st->pool);
  memset(st, 0, sizeof *st);
}

typedef struct probe {
  const char *call;
  probe_fn *setup, *fn;
  int frees_malloc; /* st->host is malloc'd, not pinned by the driver */
} probe;

static const probe probes[] = {
    {"cuModuleLoadData (CUBIN)", NULL, load_cubin, 0},
    {"cuModuleLoadData (PTX, JIT)", NULL, load_ptx, 0},
    {"cuModuleGetFunction (lazy module)", need_module, get_function, 0},
    {"cuFuncGetAttribute (first)", need_function, func_attribute, 0},
    {"cuFuncSetAttribute", need_loaded_function, func_set_attribute, 0},
    {"cuLaunchKernel (first of a function)", need_function, first_launch, 0},
    {"cuModuleUnload", need_module, unload, 0},
    {"cuLibraryLoadData", NULL, library_load, 0},
    {"cuLibraryUnload", need_library, library_unload, 0},
    {"cuMemAlloc", NULL, mem_alloc, 0},
    {"cuMemFree (cuMemAlloc memory)", need_dptr, mem_free, 0},
    {"cuMemAllocAsync", NULL, alloc_async, 0},
    {"cuMemFreeAsync", need_async, free_async, 0},
    {"cuMemPoolTrimTo", NULL, pool_trim, 0},
    {"cuMemPoolCreate", NULL, pool_create, 0},
    {"cuMemPoolDestroy", need_pool, pool_destroy, 0},
    {"cuMemHostAlloc", NULL, host_alloc, 0},
    {"cuMemFreeHost", need_host, free_host, 0},
    {"cuMemHostRegister", need_malloc, host_register, 1},
    {"cuMemHostUnregister", need_registered, host_unregister, 1},
    {"cuStreamCreate", NULL, stream_create, 0},
    {"cuStreamDestroy", need_stream, stream_destroy, 0},
    {"cuEventCreate", NULL, event_create, 0},
    {"cuEventDestroy", need_event, event_destroy, 0},
    {"cuGraphInstantiate", need_graph, graph_instantiate, 0},
    {"cuGraphLaunch (first)", need_exec, graph_launch, 0},
    {"cuGraphExecDestroy", need_exec, exec_destroy, 0},
    {"cuGraphDestroy", need_graph, graph_destroy, 0},
    {"cuStreamBeginCapture..EndCapture", need_loaded_function, capture, 0},
    {"cuCtxSynchronize (a wait, for scale)", NULL, ctx_synchronize, 0},
};

/* The call's time in ms, with the spinning kernel running (spin) or not. */
static double time_call(const probe *p, int spin, CUcontext spin_ctx) {
  probe_state st = {0};
  if (p->setup) p->setup(&st);
  check(cuCtxSynchronize(), "cuCtxSynchronize (before)");
  if (spin) {
    check(cuCtxSetCurrent(spin_ctx), "cuCtxSetCurrent (spin)");
    unsigned long long ns = (unsigned long long)(SPIN_MS * 1e6);
    void *args[] = {&ns};
    CUfunction f = spin_fn;
    CUstream s = spin_stream;
    if (spin_ctx != ctx) { /* its own module and stream in that context */
      CUmodule m;
      check(cuModuleLoadData(&m, ptx), "cuModuleLoadData (other context)");
      check(cuModuleGetFunction(&f, m, "spin"), "cuModuleGetFunction (other context)");
      check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate (other context)");
    }
    check(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL), "cuLaunchKernel(spin)");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    struct timespec ts = {0, 10 * 1000 * 1000}; /* it has started */
    nanosleep(&ts, NULL);
  }
  double t0 = now_ms();
  p->fn(&st);
  double t = now_ms() - t0;
  if (spin_ctx != ctx) {
    check(cuCtxSetCurrent(spin_ctx), "cuCtxSetCurrent (spin)");
    check(cuCtxSynchronize(), "cuCtxSynchronize (other context)");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  }
  if (p->frees_malloc) {
    void *h = st.host;
    st.host = NULL;
    cleanup(&st);
    (void)cuMemHostUnregister(h); /* where the call registered it */
    free(h);
  } else {
    if (st.host) cuMemFreeHost(st.host);
    st.host = NULL;
    cleanup(&st);
  }
  return t;
}

int main(void) {
  CUdevice dev;
  check(cuInit(0), "cuInit");
  check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  char name[256];
  int drv = 0;
  cuDeviceGetName(name, sizeof name, dev);
  cuDriverGetVersion(&drv);
  check(cuModuleLoadData(&spin_mod, ptx), "cuModuleLoadData(spin)");
  check(cuModuleGetFunction(&spin_fn, spin_mod, "spin"), "cuModuleGetFunction(spin)");
  check(cuStreamCreate(&spin_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  check(cuStreamCreate(&other_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  /* A CUBIN of the probe's PTX, for the loads that take a binary. */
  CUlinkState link;
  void *out;
  check(cuLinkCreate(0, NULL, NULL, &link), "cuLinkCreate");
  check(cuLinkAddData(link, CU_JIT_INPUT_PTX, (void *)ptx, strlen(ptx) + 1, "probe", 0, NULL, NULL), "cuLinkAddData");
  check(cuLinkComplete(link, &out, &cubin_size), "cuLinkComplete");
  cubin_image = malloc(cubin_size);
  memcpy(cubin_image, out, cubin_size);
  cuLinkDestroy(link);
  CUcontext other;
  CUctxCreateParams cp = {0};
  check(cuCtxCreate(&other, &cp, 0, dev), "cuCtxCreate");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  printf("wait-probe on %s (driver %d): each call made while a %.0f ms kernel runs on another stream of the "
         "same context, against the same call with nothing running\n\n", name, drv, SPIN_MS);
  printf("| call | idle ms | kernel running, ms | waits |\n|---|---|---|---|\n");
  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; ++i) {
    double idle = time_call(&probes[i], 0, ctx), busy = time_call(&probes[i], 1, ctx);
    printf("| %s | %.3f | %.3f | %s |\n", probes[i].call, idle, busy, busy - idle > SPIN_MS / 2 ? "yes" : "no");
    fflush(stdout);
  }
  /* The same unload while the kernel runs in another context. */
  const probe *u = &probes[6];
  double idle = time_call(u, 0, ctx), busy = time_call(u, 1, other);
  printf("| %s, kernel in another context | %.3f | %.3f | %s |\n", u->call, idle, busy,
         busy - idle > SPIN_MS / 2 ? "yes" : "no");
  cuCtxDestroy(other);
  return 0;
}
