/* SPDX-License-Identifier: Apache-2.0 */
/* A null CUDA driver for the host lane: a shared library with
 * cuGetProcAddress_v2 and every entry point kdag resolves
 * (cuda/driver_symbols.h), loaded through KDAG_CUDA_DRIVER_PATH.
 *
 * It runs no GPU work and proves nothing about a GPU. What it is for:
 *   - kdag's own host work per submission, measured with the driver's
 *     cost taken out (kdag-bench's launch and rebind suites on it: a
 *     hand-built graph costs next to nothing here, so kdag_graph minus
 *     hand_graph is kdag's work alone);
 *   - the CUDA backend's bookkeeping (completion ring, held objects,
 *     deferred releases, GRAPH-mode patching) under ASan and UBSan in CI,
 *     with the driver counting the calls kdag makes, independently of
 *     kdag's own counters (tests/host_null_driver_test.c).
 *
 * The model: one device whose memory is host memory (an allocation is a
 * calloc, a CUdeviceptr its address), on which copies and memsets happen
 * at once when enqueued and kernels do nothing; host functions run when
 * enqueued; a CUDA graph runs its nodes in insertion order (kdag adds them
 * in plan order, so that is a topological order: a dependency on a node
 * not yet added is refused). All streams share one timeline: every
 * launch, copy and event record takes the next place on it. An event
 * finishes the timeline through its place when recorded, but while
 * kdag_null_hold(1) is in force it stays pending (cuEventQuery:
 * CUDA_ERROR_NOT_READY) until a wait reaches it (cuEventSynchronize on it
 * or a later one, cuStreamSynchronize) or kdag_null_hold(0) finishes it
 * all.
 *
 * A call that waits for all work in the context on a GPU (a module load
 * or unload, cuMemFree, cuMemFreeHost, cuMemHostUnregister: what
 * tools/wait-probe measured waiting) made while the timeline is not
 * finished counts as a context wait, and finishes it, as the wait would.
 *
 * A launch (of a kernel, or of an executable graph) or a copy counts as
 * complete once the timeline is finished through its place: an event
 * recorded after it has finished, or a stream wait. Unloading
 * a module or destroying an executable graph before the launches that use
 * it are complete, and copying to or from pinned memory (or freeing it)
 * while an earlier copy of that allocation is not complete, are counted as
 * lifetime violations: on a GPU that work could still be running, and
 * kdag's staging blocks must not be reused before it has.
 *
 * kdag_null_fault(code) is a trap in the work already enqueued: from then
 * on, as with a real sticky error, every call that queries, waits for or
 * enqueues work, or makes an object, fails with code; freeing and
 * destroying still work (and count no violation: nothing runs any more).
 *
 * kdag_null_fail makes a coming call of one entry point fail with a
 * chosen result (an instantiation naming a chosen node as the culprit), so
 * tests can reach the error paths a real driver takes rarely: a refused
 * instantiation, update, launch, event record or allocation. */
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/null_driver.h"

#define ND_EXPORT __attribute__((visibility("default")))

/* ---- objects ------------------------------------------------------------- */

struct CUctx_st {
  int ordinal; /* its device's */
};
struct CUstream_st {
  CUgraph capture; /* the graph being captured into, or NULL */
};
struct CUevent_st {
  uint64_t serial; /* its place on the timeline; 0: never recorded */
  unsigned flags;  /* cuEventCreate's: CU_EVENT_DISABLE_TIMING refuses cuEventElapsedTime */
  double stamp_ms; /* the host's monotonic clock when recorded: the null "GPU" time */
};
struct CUmemPoolHandle_st {
  int unused;
};
struct CUmod_st {
  struct CUfunc_st *funcs;
  uint64_t busy_until; /* complete once the timeline has finished this serial */
};
/* A kernel's host stand-in (kdag_null_emulate). */
#define ND_EMUL_MAX 64
#define ND_EMUL_PARAMS 8
#define ND_EMUL_BYTES 512 /* three built-in views of 144 bytes fit */
typedef struct nd_emul {
  char name[64];
  uint32_t count, sizes[ND_EMUL_PARAMS], at[ND_EMUL_PARAMS], bytes;
  kdag_null_kernel_fn *fn;
} nd_emul;
static nd_emul g_emul[ND_EMUL_MAX];
static uint32_t g_emul_count;

struct CUfunc_st {
  struct CUfunc_st *next; /* the module's functions, freed with it */
  CUmodule module;
  const nd_emul *emul;    /* a registered stand-in of that name, or NULL */
};

enum nd_kind { ND_KERNEL, ND_COPY, ND_HOST, ND_EMPTY, ND_CHILD, ND_EVENT };

/* A node's payload; an executable graph holds its own copies. */
typedef struct nd_work {
  enum nd_kind kind;
  CUmodule module; /* kernels: the function's */
  const nd_emul *emul;                /* kernels with a stand-in: it runs on args */
  unsigned char args[ND_EMUL_BYTES];  /* the parameter bytes, as the node was last given them */
  CUDA_MEMCPY3D copy;
  CUhostFn fn;
  void *data;
  CUevent event;
  CUgraph child; /* the graph's own clone */
} nd_work;

struct CUgraphNode_st {
  CUgraph graph;
  uint32_t index;
};
struct CUgraph_st {
  CUgraphNode *nodes;
  nd_work *work;
  uint32_t count, cap;
};
struct CUgraphExec_st {
  nd_work *work;
  uint32_t count;
  CUgraph graph; /* for checking that a node is of this graph */
  uint64_t busy_until;
};

/* KDAG_NULL_DEVICES (1 to ND_MAX_DEVICES, default 1) devices, each with
 * its primary context; memory records the device of the context current
 * when it was allocated. One timeline serves them all. */
#define ND_MAX_DEVICES 4
static struct CUctx_st g_ctx[ND_MAX_DEVICES] = {{0}, {1}, {2}, {3}};
static _Thread_local CUcontext g_current;
static int nd_devices(void) {
  const char *v = getenv("KDAG_NULL_DEVICES");
  int n = v ? atoi(v) : 1;
  return n >= 1 && n <= ND_MAX_DEVICES ? n : 1;
}
static int bad_device(CUdevice d) { return d < 0 || d >= nd_devices(); }
static int is_ctx(CUcontext c) { return c && c >= g_ctx && c < g_ctx + nd_devices(); }
/* The timeline: every enqueued launch, copy and event record takes the
 * next serial; work is complete once g_done has reached its serial. */
static _Atomic uint64_t g_seq, g_done;
static _Atomic int g_hold;
/* A sticky fault: 0, or the CUresult every working call now returns. */
static _Atomic int g_fault;

ND_EXPORT void kdag_null_fault(int code) { atomic_store(&g_fault, code); }

ND_EXPORT int kdag_null_emulate(const char *name, uint32_t count, const uint32_t *sizes, kdag_null_kernel_fn *fn) {
  if (!name || strlen(name) >= sizeof g_emul[0].name || count > ND_EMUL_PARAMS || (count && !sizes) || !fn) return 0;
  uint32_t k = 0;
  while (k < g_emul_count && strcmp(g_emul[k].name, name)) ++k; /* a name registered again is replaced */
  if (k == ND_EMUL_MAX) return 0;
  nd_emul *e = &g_emul[k];
  memset(e, 0, sizeof *e);
  snprintf(e->name, sizeof e->name, "%s", name);
  for (uint32_t i = 0; i < count; ++i) {
    if (!sizes[i] || e->bytes + sizes[i] > ND_EMUL_BYTES) {
      e->fn = NULL; /* nothing half-registered */
      return 0;
    }
    e->at[i] = e->bytes;
    e->sizes[i] = sizes[i];
    e->bytes += sizes[i];
  }
  e->count = count;
  e->fn = fn;
  if (k == g_emul_count) g_emul_count++;
  return 1;
}

/* Copies a launch's parameters into out, as the driver does when it takes them. */
static CUresult emul_take(const nd_emul *e, void **params, unsigned char *out) {
  if (!e) return CUDA_SUCCESS;
  if (e->count && !params) return CUDA_ERROR_INVALID_VALUE;
  for (uint32_t i = 0; i < e->count; ++i) memcpy(out + e->at[i], params[i], e->sizes[i]);
  return CUDA_SUCCESS;
}
static void emul_run(const nd_emul *e, const unsigned char *args) {
  void *params[ND_EMUL_PARAMS];
  for (uint32_t i = 0; i < e->count; ++i) params[i] = (void *)(args + e->at[i]);
  e->fn(params);
}

#define FAULTED() \
  do { \
    int nd_f_ = atomic_load_explicit(&g_fault, memory_order_relaxed); \
    if (nd_f_) return (CUresult)nd_f_; \
  } while (0)

/* The one armed failure: entry's call after `after` more fails with code.
 * Set and consumed by the test's thread (kdag calls the driver on the
 * caller's thread). */
static struct {
  _Atomic int armed;
  char entry[64];
  uint32_t after;
  CUresult code;
  uint32_t node;
} g_fail;

ND_EXPORT void kdag_null_fail(const char *entry, uint32_t after, int code, uint32_t node) {
  if (!entry) { /* disarm */
    atomic_store(&g_fail.armed, 0);
    return;
  }
  snprintf(g_fail.entry, sizeof g_fail.entry, "%s", entry);
  g_fail.after = after;
  g_fail.code = (CUresult)code;
  g_fail.node = node;
  atomic_store(&g_fail.armed, 1);
}

/* CUDA_SUCCESS, or the armed failure when its call of entry has come
 * (disarmed then). */
static CUresult injected(const char *entry) {
  if (!atomic_load_explicit(&g_fail.armed, memory_order_relaxed) || strcmp(entry, g_fail.entry)) return CUDA_SUCCESS;
  if (g_fail.after) {
    g_fail.after--;
    return CUDA_SUCCESS;
  }
  atomic_store(&g_fail.armed, 0);
  return g_fail.code;
}
#define FAIL_POINT(entry) \
  do { \
    CUresult nd_r_ = injected(entry); \
    if (nd_r_ != CUDA_SUCCESS) return nd_r_; \
  } while (0)

/* kdag_null_calls, field by field (all uint64_t). */
static _Atomic uint64_t g_count[sizeof(kdag_null_calls) / sizeof(uint64_t)];

#define COUNT(field) \
  atomic_fetch_add_explicit(&g_count[offsetof(kdag_null_calls, field) / sizeof(uint64_t)], 1, memory_order_relaxed)

static void finish_through(uint64_t serial);

ND_EXPORT void kdag_null_hold(int on) {
  atomic_store(&g_hold, on);
  if (!on) finish_through(atomic_load(&g_seq)); /* g_done never moves back */
}

ND_EXPORT void kdag_null_calls_get(kdag_null_calls *out) {
  uint64_t v[sizeof g_count / sizeof g_count[0]];
  for (size_t i = 0; i < sizeof v / sizeof v[0]; ++i) v[i] = atomic_load_explicit(&g_count[i], memory_order_relaxed);
  memcpy(out, v, sizeof v);
}

/* The place on the timeline of work enqueued now. */
static uint64_t enqueue_serial(void) { return atomic_fetch_add(&g_seq, 1) + 1; }
static void check_idle(uint64_t busy_until) {
  if (busy_until > atomic_load(&g_done) && !atomic_load(&g_fault)) COUNT(lifetime_violations);
}

/* Finishes the timeline through serial (a wait on it). */
static void finish_through(uint64_t serial) {
  uint64_t done = atomic_load(&g_done);
  while (done < serial && !atomic_compare_exchange_weak(&g_done, &done, serial)) {
  }
}

/* A call that waits for all work in the context (see the top). */
static void context_wait(void) {
  uint64_t seq = atomic_load(&g_seq);
  if (atomic_load(&g_done) >= seq || atomic_load(&g_fault)) return;
  COUNT(context_waits);
  finish_through(seq);
}

/* Each entry point is declared with its type from cuda.h (typeof of the
 * macro-mapped name), so a definition that does not match is an error. */
#define KD_CU_SYMBOL(name) static __typeof__(name) nd_##name;
#define KD_CU_SYMBOL_OPTIONAL(name)
#include "cuda/driver_symbols.h"
#undef KD_CU_SYMBOL
#undef KD_CU_SYMBOL_OPTIONAL

/* ---- init, devices, contexts --------------------------------------------- */

static CUresult nd_cuInit(unsigned int flags) {
  COUNT(calls);
  return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
static CUresult nd_cuDriverGetVersion(int *v) {
  COUNT(calls);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = CUDA_VERSION;
  return CUDA_SUCCESS;
}

static CUresult nd_cuGetErrorName(CUresult r, const char **out) {
  COUNT(calls);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  switch (r) {
    case CUDA_SUCCESS: *out = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *out = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_NOT_READY: *out = "CUDA_ERROR_NOT_READY"; break;
    case CUDA_ERROR_INVALID_HANDLE: *out = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *out = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *out = "CUDA_ERROR_NOT_SUPPORTED"; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *out = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *out = "CUDA_ERROR_LAUNCH_FAILED"; break;
    default: *out = "CUDA_ERROR_UNKNOWN"; break;
  }
  return CUDA_SUCCESS;
}
static CUresult nd_cuGetErrorString(CUresult r, const char **out) {
  COUNT(calls);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  *out = r == CUDA_SUCCESS ? "no error" : "refused by the null driver";
  return CUDA_SUCCESS;
}

static CUresult nd_cuDeviceGetCount(int *n) {
  COUNT(calls);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  *n = nd_devices();
  return CUDA_SUCCESS;
}
static CUresult nd_cuDeviceGet(CUdevice *d, int ordinal) {
  COUNT(calls);
  if (!d || bad_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
static CUresult nd_cuDeviceGetName(char *name, int len, CUdevice d) {
  COUNT(calls);
  if (!name || len <= 0 || bad_device(d)) return CUDA_ERROR_INVALID_VALUE;
  snprintf(name, (size_t)len, "%s", KDAG_NULL_DEVICE_NAME);
  return CUDA_SUCCESS;
}
/* The compute capability presented (null_driver.h: KDAG_NULL_SM). */
static int null_sm(void) {
  const char *v = getenv("KDAG_NULL_SM");
  int sm = v ? atoi(v) : 90;
  return sm >= 30 && sm < 1000 ? sm : 90;
}
/* An H200's figures where kdag reads them. */
static CUresult nd_cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
  COUNT(calls);
  if (!v || bad_device(d)) return CUDA_ERROR_INVALID_VALUE;
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = null_sm() / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = null_sm() % 10; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *v = 1; break;
    default: *v = 0; break;
  }
  return CUDA_SUCCESS;
}
static CUresult nd_cuDeviceGetPCIBusId(char *id, int len, CUdevice d) {
  COUNT(calls);
  if (!id || len <= 0 || bad_device(d)) return CUDA_ERROR_INVALID_VALUE;
  snprintf(id, (size_t)len, "0000:%02x:00.0", (unsigned)d); /* a bus each */
  return CUDA_SUCCESS;
}
/* The device's memory: 16 GiB, and no allocation larger (as on a GPU). */
#define ND_TOTAL_MEM ((size_t)1 << 34)
static CUresult nd_cuDeviceTotalMem(size_t *bytes, CUdevice d) {
  COUNT(calls);
  if (!bytes || bad_device(d)) return CUDA_ERROR_INVALID_VALUE;
  *bytes = ND_TOTAL_MEM;
  return CUDA_SUCCESS;
}
static CUresult nd_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
  COUNT(calls);
  if (!c || bad_device(d)) return CUDA_ERROR_INVALID_VALUE;
  *c = &g_ctx[d];
  return CUDA_SUCCESS;
}
static CUresult nd_cuDevicePrimaryCtxRelease(CUdevice d) {
  COUNT(calls);
  return bad_device(d) ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}
static CUresult nd_cuCtxSetCurrent(CUcontext c) {
  COUNT(calls);
  COUNT(ctx_set_current);
  if (c && !is_ctx(c)) return CUDA_ERROR_INVALID_CONTEXT;
  g_current = c;
  return CUDA_SUCCESS;
}
static CUresult nd_cuCtxGetCurrent(CUcontext *c) {
  COUNT(calls);
  COUNT(ctx_get_current);
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  *c = g_current;
  return CUDA_SUCCESS;
}

/* Entry points that need a current context refuse without one, as the
 * driver does (frees and unloads too, stricter than the driver may be):
 * kdag makes its context current before it calls any of them. */
#define NEED_CTX() \
  do { \
    if (!is_ctx(g_current)) return CUDA_ERROR_INVALID_CONTEXT; \
  } while (0)

/* ---- streams and events -------------------------------------------------- */

static CUresult nd_cuStreamCreate(CUstream *s, unsigned int flags) {
  COUNT(calls);
  FAULTED();
  (void)flags;
  NEED_CTX();
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  *s = calloc(1, sizeof **s);
  return *s ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
static CUresult nd_cuStreamDestroy(CUstream s) {
  COUNT(calls);
  if (!s || s->capture) return CUDA_ERROR_INVALID_HANDLE;
  free(s);
  return CUDA_SUCCESS;
}
static CUresult nd_cuStreamSynchronize(CUstream s) {
  COUNT(calls);
  FAULTED();
  COUNT(stream_syncs);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  finish_through(atomic_load(&g_seq));
  return CUDA_SUCCESS;
}
static CUresult nd_cuEventCreate(CUevent *e, unsigned int flags) {
  COUNT(calls);
  FAULTED();
  NEED_CTX();
  FAIL_POINT("cuEventCreate");
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  *e = calloc(1, sizeof **e);
  if (!*e) return CUDA_ERROR_OUT_OF_MEMORY;
  (*e)->flags = flags;
  COUNT(events_created);
  return CUDA_SUCCESS;
}
static CUresult nd_cuEventDestroy(CUevent e) {
  COUNT(calls);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  COUNT(events_destroyed);
  free(e);
  return CUDA_SUCCESS;
}
static void record(CUevent e) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  e->stamp_ms = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
  e->serial = enqueue_serial();
  if (!atomic_load(&g_hold)) finish_through(e->serial);
}
static CUresult nd_cuEventRecord(CUevent e, CUstream s) {
  COUNT(calls);
  FAULTED();
  FAIL_POINT("cuEventRecord");
  COUNT(event_records);
  if (!e || !s) return CUDA_ERROR_INVALID_HANDLE;
  if (s->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  record(e);
  return CUDA_SUCCESS;
}
/* Work here runs when enqueued, so nothing is left to order: a wait on an
 * event is counted, and its handles checked. */
static CUresult nd_cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
  COUNT(calls);
  FAULTED();
  COUNT(stream_event_waits);
  if (!s || !e || flags) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}
static CUresult nd_cuEventQuery(CUevent e) {
  COUNT(calls);
  FAULTED();
  COUNT(event_queries);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  return e->serial <= atomic_load(&g_done) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
static CUresult nd_cuEventSynchronize(CUevent e) {
  COUNT(calls);
  FAULTED();
  COUNT(event_syncs);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  finish_through(e->serial);
  return CUDA_SUCCESS;
}
/* As the driver: both recorded with timing, both complete. */
static CUresult nd_cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
  COUNT(calls);
  if (!ms || !a || !b) return CUDA_ERROR_INVALID_VALUE;
  if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (!a->serial || !b->serial) return CUDA_ERROR_INVALID_HANDLE;
  uint64_t done = atomic_load(&g_done);
  if (a->serial > done || b->serial > done) return CUDA_ERROR_NOT_READY;
  *ms = (float)(b->stamp_ms - a->stamp_ms);
  return CUDA_SUCCESS;
}

/* ---- memory --------------------------------------------------------------- */

static CUresult nd_cuMemPoolCreate(CUmemoryPool *p, const CUmemPoolProps *props) {
  COUNT(calls);
  FAULTED();
  NEED_CTX();
  if (!p || !props) return CUDA_ERROR_INVALID_VALUE;
  *p = calloc(1, sizeof **p);
  return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
static CUresult nd_cuMemPoolDestroy(CUmemoryPool p) {
  COUNT(calls);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  free(p);
  return CUDA_SUCCESS;
}
static CUresult nd_cuMemPoolSetAttribute(CUmemoryPool p, CUmemPool_attribute a, void *v) {
  COUNT(calls);
  (void)a;
  return p && v ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
/* Live device allocations, for cuPointerGetAttributes: where each starts,
 * its size, the device it is on and whether it is managed memory (a test
 * makes those two up through kdag_null_foreign_alloc). */
#define ND_ALLOCS 65536
static struct {
  pthread_mutex_t mu;
  struct nd_alloc { CUdeviceptr start; size_t bytes; int ordinal, managed; } at[ND_ALLOCS];
  uint32_t count;
} g_allocs = {.mu = PTHREAD_MUTEX_INITIALIZER};
static int allocs_add(CUdeviceptr p, size_t bytes, int ordinal, int managed) {
  pthread_mutex_lock(&g_allocs.mu);
  int ok = g_allocs.count < ND_ALLOCS;
  if (ok) g_allocs.at[g_allocs.count++] = (struct nd_alloc){p, bytes, ordinal, managed};
  pthread_mutex_unlock(&g_allocs.mu);
  return ok;
}
static void allocs_remove(CUdeviceptr p) {
  pthread_mutex_lock(&g_allocs.mu);
  for (uint32_t i = 0; i < g_allocs.count; ++i)
    if (g_allocs.at[i].start == p) {
      g_allocs.at[i] = g_allocs.at[--g_allocs.count];
      break;
    }
  pthread_mutex_unlock(&g_allocs.mu);
}
static CUresult alloc_on(CUdeviceptr *out, size_t bytes, int ordinal, int managed) {
  if (!out || !bytes) return CUDA_ERROR_INVALID_VALUE;
  if (bytes > ND_TOTAL_MEM) return CUDA_ERROR_OUT_OF_MEMORY;
  void *p = calloc(1, bytes);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  *out = (CUdeviceptr)(uintptr_t)p;
  if (!allocs_add(*out, bytes, ordinal, managed)) {
    free(p);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  COUNT(device_allocs);
  return CUDA_SUCCESS;
}
/* On the device of the current context. */
static CUresult alloc(CUdeviceptr *out, size_t bytes) {
  return alloc_on(out, bytes, is_ctx(g_current) ? g_current->ordinal : 0, 0);
}
static CUresult dealloc(CUdeviceptr p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  COUNT(device_frees);
  allocs_remove(p);
  free((void *)(uintptr_t)p);
  return CUDA_SUCCESS;
}
ND_EXPORT unsigned long long kdag_null_foreign_alloc(size_t bytes, int ordinal, int managed) {
  CUdeviceptr p = 0;
  return alloc_on(&p, bytes, ordinal, managed) == CUDA_SUCCESS ? p : 0;
}
ND_EXPORT void kdag_null_foreign_free(unsigned long long p) { (void)dealloc(p); }
/* As the driver: an address it does not know gets zeroed attributes and
 * CUDA_SUCCESS. Device memory here is host memory; pinned host memory is
 * reported as host memory. */
static CUresult nd_cuPointerGetAttributes(unsigned n, CUpointer_attribute *attrs, void **data, CUdeviceptr p) {
  COUNT(calls);
  if (!attrs || !data) return CUDA_ERROR_INVALID_VALUE;
  struct nd_alloc found = {0, 0, 0, 0};
  int known = 0;
  pthread_mutex_lock(&g_allocs.mu);
  for (uint32_t i = 0; i < g_allocs.count && !known; ++i)
    if (p >= g_allocs.at[i].start && p - g_allocs.at[i].start < g_allocs.at[i].bytes) {
      found = g_allocs.at[i];
      known = 1;
    }
  pthread_mutex_unlock(&g_allocs.mu);
  for (unsigned i = 0; i < n; ++i) {
    switch (attrs[i]) {
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data[i] = known ? (found.managed ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_DEVICE) : 0;
        break;
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data[i] = known ? found.ordinal : -2; break;
      case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data[i] = found.start; break;
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data[i] = found.bytes; break;
      case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(int *)data[i] = found.managed; break;
      default: return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}
static CUresult nd_cuMemAllocFromPoolAsync(CUdeviceptr *out, size_t bytes, CUmemoryPool p, CUstream s) {
  COUNT(calls);
  FAULTED();
  NEED_CTX();
  FAIL_POINT("cuMemAllocFromPoolAsync");
  if (!p || !s) return CUDA_ERROR_INVALID_VALUE;
  return alloc(out, bytes);
}
static CUresult nd_cuMemFreeAsync(CUdeviceptr p, CUstream s) {
  COUNT(calls);
  NEED_CTX();
  return s ? dealloc(p) : CUDA_ERROR_INVALID_VALUE;
}
static CUresult nd_cuMemAlloc(CUdeviceptr *out, size_t bytes) {
  COUNT(calls);
  FAULTED();
  NEED_CTX();
  return alloc(out, bytes);
}
static CUresult nd_cuMemFree(CUdeviceptr p) {
  COUNT(calls);
  NEED_CTX();
  COUNT(sync_frees);
  context_wait();
  return dealloc(p);
}
/* Pinned allocations, and until when an enqueued copy uses each. */
#define ND_PINNED 4096
static struct {
  pthread_mutex_t mu;
  struct {
    char *p;
    size_t bytes;
    uint64_t busy_until;
  } at[ND_PINNED];
  uint32_t count;
} g_pinned = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* p's pinned allocation is used by a copy complete at busy_until (0: freed
 * now, not used): a violation if an earlier copy of it is pending. Memory
 * that is not pinned is not tracked. */
static void use_pinned(const void *p, uint64_t busy_until, int free_it) {
  pthread_mutex_lock(&g_pinned.mu);
  for (uint32_t i = 0; i < g_pinned.count; ++i) {
    if ((const char *)p < g_pinned.at[i].p || (const char *)p >= g_pinned.at[i].p + g_pinned.at[i].bytes) continue;
    check_idle(g_pinned.at[i].busy_until);
    if (free_it)
      g_pinned.at[i] = g_pinned.at[--g_pinned.count];
    else
      g_pinned.at[i].busy_until = busy_until;
    break;
  }
  pthread_mutex_unlock(&g_pinned.mu);
}

static CUresult nd_cuMemHostAlloc(void **p, size_t bytes, unsigned int flags) {
  COUNT(calls);
  FAULTED();
  (void)flags;
  NEED_CTX();
  FAIL_POINT("cuMemHostAlloc");
  if (!p || !bytes) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_pinned.mu);
  *p = g_pinned.count < ND_PINNED ? calloc(1, bytes) : NULL;
  if (*p) g_pinned.at[g_pinned.count++] = (__typeof__(g_pinned.at[0])){*p, bytes, 0};
  pthread_mutex_unlock(&g_pinned.mu);
  if (!*p) return CUDA_ERROR_OUT_OF_MEMORY;
  COUNT(pinned_allocs);
  return CUDA_SUCCESS;
}
static CUresult nd_cuMemFreeHost(void *p) {
  COUNT(calls);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  COUNT(sync_frees);
  COUNT(pinned_frees);
  use_pinned(p, 0, 1);
  context_wait();
  free(p);
  return CUDA_SUCCESS;
}
static CUresult nd_cuMemHostRegister(void *p, size_t bytes, unsigned int flags) {
  COUNT(calls);
  (void)flags;
  COUNT(host_registers);
  return p && bytes ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
static CUresult nd_cuMemHostUnregister(void *p) {
  COUNT(calls);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  context_wait();
  return CUDA_SUCCESS;
}

static CUresult add_node(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps, nd_work w);
/* Stream work happens when enqueued; in a capture (kdag captures only a
 * foreign node's callback), copies and host functions become nodes of the
 * captured graph, and the rest is dropped. */
static CUresult enqueue_copy(CUstream s, void *dst, const void *src, size_t bytes) {
  FAULTED();
  NEED_CTX();
  if (!s || ((!dst || !src) && bytes)) return CUDA_ERROR_INVALID_VALUE;
  COUNT(copies);
  if (s->capture && bytes) {
    CUDA_MEMCPY3D c = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = src, .dstMemoryType = CU_MEMORYTYPE_HOST,
                       .dstHost = dst, .WidthInBytes = bytes, .Height = 1, .Depth = 1};
    CUgraphNode n;
    return add_node(&n, s->capture, NULL, 0, (nd_work){.kind = ND_COPY, .copy = c});
  }
  if (s->capture || !bytes) return CUDA_SUCCESS;
  uint64_t busy = enqueue_serial();
  use_pinned(dst, busy, 0);
  use_pinned(src, busy, 0);
  memmove(dst, src, bytes);
  return CUDA_SUCCESS;
}
static void *host_of(CUdeviceptr p) { return (void *)(uintptr_t)p; }
static CUresult nd_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes, CUstream s) {
  COUNT(calls);
  return enqueue_copy(s, host_of(dst), src, bytes);
}
static CUresult nd_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes, CUstream s) {
  COUNT(calls);
  return enqueue_copy(s, dst, host_of(src), bytes);
}
static CUresult nd_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s) {
  COUNT(calls);
  return enqueue_copy(s, host_of(dst), host_of(src), bytes);
}
static CUresult nd_cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  COUNT(calls);
  FAULTED();
  NEED_CTX();
  if (!s || (!dst && n)) return CUDA_ERROR_INVALID_VALUE;
  if (!s->capture && n) memset(host_of(dst), v, n);
  return CUDA_SUCCESS;
}
static CUresult nd_cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) {
  COUNT(calls);
  FAULTED();
  NEED_CTX();
  if (!s || (!dst && n) || (dst & 3)) return CUDA_ERROR_INVALID_VALUE;
  uint32_t *p = host_of(dst);
  for (size_t i = 0; !s->capture && i < n; ++i) p[i] = v;
  return CUDA_SUCCESS;
}

/* ---- modules and launches -------------------------------------------------- */

static CUresult nd_cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned int n, CUjit_option *o, void **v) {
  COUNT(calls);
  FAULTED();
  (void)n, (void)o, (void)v;
  NEED_CTX();
  if (!m || !image) return CUDA_ERROR_INVALID_VALUE;
  context_wait();
  *m = calloc(1, sizeof **m);
  if (!*m) return CUDA_ERROR_OUT_OF_MEMORY;
  COUNT(module_loads);
  return CUDA_SUCCESS;
}
static CUresult nd_cuModuleUnload(CUmodule m) {
  COUNT(calls);
  NEED_CTX();
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  check_idle(m->busy_until);
  context_wait();
  for (struct CUfunc_st *f = m->funcs, *next; f; f = next) {
    next = f->next;
    free(f);
  }
  free(m);
  COUNT(module_unloads);
  return CUDA_SUCCESS;
}
/* Any name is found: the null driver does not read the image. */
static CUresult nd_cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
  COUNT(calls);
  if (!f || !m || !name) return CUDA_ERROR_INVALID_VALUE;
  struct CUfunc_st *fn = calloc(1, sizeof *fn);
  if (!fn) return CUDA_ERROR_OUT_OF_MEMORY;
  fn->next = m->funcs;
  fn->module = m;
  for (uint32_t k = 0; k < g_emul_count; ++k)
    if (g_emul[k].fn && !strcmp(g_emul[k].name, name)) fn->emul = &g_emul[k];
  m->funcs = fn;
  *f = fn;
  return CUDA_SUCCESS;
}
static CUresult nd_cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f) {
  COUNT(calls);
  if (!v || !f) return CUDA_ERROR_INVALID_VALUE;
  switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = 48 * 1024; break;
    default: *v = 0; break;
  }
  return CUDA_SUCCESS;
}
static CUresult nd_cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  COUNT(calls);
  NEED_CTX();
  (void)a, (void)v;
  return f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
static int bad_shape(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz) {
  return !gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024;
}
static CUresult nd_cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                  unsigned int by, unsigned int bz, unsigned int smem, CUstream s, void **params,
                                  void **extra) {
  COUNT(calls);
  FAULTED();
  (void)smem, (void)params, (void)extra;
  NEED_CTX();
  if (!f || !s) return CUDA_ERROR_INVALID_HANDLE;
  if (bad_shape(gx, gy, gz, bx, by, bz)) return CUDA_ERROR_INVALID_VALUE;
  FAIL_POINT("cuLaunchKernel");
  if (f->emul && f->emul->count && !params) return CUDA_ERROR_INVALID_VALUE;
  COUNT(kernel_launches);
  f->module->busy_until = enqueue_serial();
  if (f->emul && !s->capture) { /* in stream order: copies run at their enqueue too */
    unsigned char args[ND_EMUL_BYTES];
    emul_take(f->emul, params, args);
    emul_run(f->emul, args);
  }
  return CUDA_SUCCESS;
}
/* Programmatic stream serialization is the one attribute kdag sets; any
 * other, or the attribute on a device before sm_90, is refused. */
static CUresult nd_cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
  if (!c || (c->numAttrs && !c->attrs)) return CUDA_ERROR_INVALID_VALUE;
  int programmatic = 0;
  for (unsigned i = 0; i < c->numAttrs; ++i) {
    if (c->attrs[i].id != CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) return CUDA_ERROR_INVALID_VALUE;
    programmatic |= c->attrs[i].value.programmaticStreamSerializationAllowed != 0;
  }
  if (programmatic && null_sm() < 90) {
    COUNT(calls);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  CUresult r = nd_cuLaunchKernel(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                                 c->sharedMemBytes, c->hStream, params, extra);
  if (r == CUDA_SUCCESS && programmatic) COUNT(programmatic_launches);
  return r;
}
static CUresult nd_cuLaunchHostFunc(CUstream s, CUhostFn fn, void *data) {
  COUNT(calls);
  FAULTED();
  NEED_CTX();
  if (!s || !fn) return CUDA_ERROR_INVALID_VALUE;
  if (!s->capture) {
    fn(data);
    return CUDA_SUCCESS;
  }
  CUgraphNode n; /* captured: a host node of the graph, run at each launch */
  return add_node(&n, s->capture, NULL, 0, (nd_work){.kind = ND_HOST, .fn = fn, .data = data});
}

/* ---- graphs ------------------------------------------------------------------ */

/* What cuGraphCreate and cuGraphDestroy do, for the driver's own use too
 * (clones, captures), where it is not counted as a call of kdag's. */
static CUresult graph_new(CUgraph *g) {
  *g = calloc(1, sizeof **g);
  return *g ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
static void graph_free(CUgraph g) {
  for (uint32_t i = 0; i < g->count; ++i) {
    if (g->work[i].kind == ND_CHILD) graph_free(g->work[i].child);
    free(g->nodes[i]);
  }
  free(g->nodes);
  free(g->work);
  free(g);
}
static CUresult nd_cuGraphCreate(CUgraph *g, unsigned int flags) {
  COUNT(calls);
  if (!g || flags) return CUDA_ERROR_INVALID_VALUE;
  return graph_new(g);
}
static CUresult nd_cuGraphDestroy(CUgraph g) {
  COUNT(calls);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  graph_free(g);
  return CUDA_SUCCESS;
}
static CUresult graph_clone(CUgraph g, CUgraph *out);

/* Appends a node after its dependencies, which must be nodes of g already. */
static CUresult add_node(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps, nd_work w) {
  if (!out || !g || (ndeps && !deps)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < ndeps; ++i)
    if (!deps[i] || deps[i]->graph != g) return CUDA_ERROR_INVALID_VALUE;
  if (g->count == g->cap) {
    uint32_t cap = g->cap ? 2 * g->cap : 16;
    CUgraphNode *nodes = realloc(g->nodes, cap * sizeof *nodes);
    if (nodes) g->nodes = nodes;
    nd_work *work = nodes ? realloc(g->work, cap * sizeof *work) : NULL;
    if (!work) return CUDA_ERROR_OUT_OF_MEMORY;
    g->work = work;
    g->cap = cap;
  }
  CUgraphNode n = calloc(1, sizeof *n);
  if (!n) return CUDA_ERROR_OUT_OF_MEMORY;
  if (w.kind == ND_CHILD) {
    CUresult r = graph_clone(w.child, &w.child);
    if (r != CUDA_SUCCESS) {
      free(n);
      return r;
    }
  }
  n->graph = g;
  n->index = g->count;
  g->nodes[g->count] = n;
  g->work[g->count++] = w;
  *out = n;
  return CUDA_SUCCESS;
}
/* A copy of g's nodes (children cloned too), without edges: they run in order. */
static CUresult graph_clone(CUgraph g, CUgraph *out) {
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  CUgraph c;
  CUresult r = graph_new(&c);
  for (uint32_t i = 0; r == CUDA_SUCCESS && i < g->count; ++i) {
    CUgraphNode n;
    r = add_node(&n, c, NULL, 0, g->work[i]);
  }
  if (r != CUDA_SUCCESS && c) graph_free(c);
  *out = r == CUDA_SUCCESS ? c : NULL;
  return r;
}
static CUresult nd_cuGraphAddKernelNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                                        const CUDA_KERNEL_NODE_PARAMS *p) {
  COUNT(calls);
  if (!p || !p->func || bad_shape(p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ))
    return CUDA_ERROR_INVALID_VALUE;
  nd_work w = {.kind = ND_KERNEL, .module = p->func->module, .emul = p->func->emul};
  if (emul_take(w.emul, p->kernelParams, w.args) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  return add_node(out, g, deps, ndeps, w);
}
static CUresult nd_cuGraphAddMemcpyNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                                        const CUDA_MEMCPY3D *c, CUcontext ctx) {
  COUNT(calls);
  if (!c || !is_ctx(ctx)) return CUDA_ERROR_INVALID_VALUE;
  return add_node(out, g, deps, ndeps, (nd_work){.kind = ND_COPY, .copy = *c});
}
static CUresult nd_cuGraphAddHostNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                                      const CUDA_HOST_NODE_PARAMS *p) {
  COUNT(calls);
  if (!p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
  return add_node(out, g, deps, ndeps, (nd_work){.kind = ND_HOST, .fn = p->fn, .data = p->userData});
}
static CUresult nd_cuGraphAddEmptyNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps) {
  COUNT(calls);
  return add_node(out, g, deps, ndeps, (nd_work){.kind = ND_EMPTY});
}
static CUresult nd_cuGraphAddChildGraphNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                                            CUgraph child) {
  COUNT(calls);
  if (!child) return CUDA_ERROR_INVALID_VALUE;
  return add_node(out, g, deps, ndeps, (nd_work){.kind = ND_CHILD, .child = child});
}
static CUresult nd_cuGraphAddEventRecordNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                                             CUevent e) {
  COUNT(calls);
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  return add_node(out, g, deps, ndeps, (nd_work){.kind = ND_EVENT, .event = e});
}
/* Edges are not kept (the nodes run in order); only their data is checked:
 * a programmatic edge must join two kernel nodes, from the programmatic
 * port, with to_port and the reserved bytes zero, on sm_90 or later. */
static CUresult nd_cuGraphAddDependencies(CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
                                          const CUgraphEdgeData *data, size_t n) {
  COUNT(calls);
  if (!g || (n && (!from || !to))) return CUDA_ERROR_INVALID_VALUE;
  uint64_t programmatic = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!from[i] || !to[i] || from[i]->graph != g || to[i]->graph != g || from[i]->index >= to[i]->index)
      return CUDA_ERROR_INVALID_VALUE;
    if (!data || data[i].type == CU_GRAPH_DEPENDENCY_TYPE_DEFAULT) continue;
    static const unsigned char zero[sizeof data[i].reserved];
    if (data[i].type != CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC || data[i].to_port ||
        memcmp(data[i].reserved, zero, sizeof zero) ||
        data[i].from_port != CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC || g->work[from[i]->index].kind != ND_KERNEL ||
        g->work[to[i]->index].kind != ND_KERNEL)
      return CUDA_ERROR_INVALID_VALUE;
    if (null_sm() < 90) return CUDA_ERROR_NOT_SUPPORTED;
    programmatic++;
  }
  for (uint64_t i = 0; i < programmatic; ++i) COUNT(programmatic_edges);
  return CUDA_SUCCESS;
}
static CUresult instantiate(CUgraphExec *out, CUgraph g) {
  if (!out || !g) return CUDA_ERROR_INVALID_VALUE;
  CUgraphExec x = calloc(1, sizeof *x);
  CUgraph c = NULL;
  if (!x || graph_clone(g, &c) != CUDA_SUCCESS) {
    free(x);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  /* The clone's work, and g for node lookups (kdag keeps g alive). */
  x->work = c->work;
  x->count = c->count;
  x->graph = g;
  c->work = NULL;
  for (uint32_t i = 0; i < c->count; ++i) free(c->nodes[i]);
  free(c->nodes);
  free(c);
  COUNT(graph_instantiations);
  *out = x;
  return CUDA_SUCCESS;
}
static CUresult nd_cuGraphInstantiateWithParams(CUgraphExec *out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
  COUNT(calls);
  FAULTED();
  if (!p || !g) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = injected("cuGraphInstantiateWithParams");
  if (r != CUDA_SUCCESS) { /* as the driver reports it: the node it could not take */
    p->result_out = CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED;
    p->hErrNode_out = g_fail.node < g->count ? g->nodes[g_fail.node] : NULL;
    return r;
  }
  r = instantiate(out, g);
  p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
  p->hErrNode_out = NULL;
  return r;
}
static CUresult nd_cuGraphInstantiateWithFlags(CUgraphExec *out, CUgraph g, unsigned long long flags) {
  COUNT(calls);
  FAULTED();
  (void)flags;
  return instantiate(out, g);
}
static void free_work(nd_work *w, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i)
    if (w[i].kind == ND_CHILD) graph_free(w[i].child);
  free(w);
}
static CUresult nd_cuGraphExecDestroy(CUgraphExec x) {
  COUNT(calls);
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  COUNT(exec_destroys);
  check_idle(x->busy_until);
  free_work(x->work, x->count);
  free(x);
  return CUDA_SUCCESS;
}
/* The executable graph's node for n, or NULL if n is not of its graph. */
static nd_work *exec_node(CUgraphExec x, CUgraphNode n, enum nd_kind kind) {
  if (!x || !n || n->graph != x->graph || n->index >= x->count || x->work[n->index].kind != kind) return NULL;
  return &x->work[n->index];
}
static CUresult nd_cuGraphExecKernelNodeSetParams(CUgraphExec x, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS *p) {
  COUNT(calls);
  FAULTED();
  COUNT(kernel_node_patches);
  FAIL_POINT("cuGraphExecKernelNodeSetParams");
  nd_work *w = exec_node(x, n, ND_KERNEL);
  if (!w || !p || !p->func) return CUDA_ERROR_INVALID_VALUE;
  unsigned char args[ND_EMUL_BYTES];
  if (emul_take(p->func->emul, p->kernelParams, args) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  w->module = p->func->module;
  w->emul = p->func->emul;
  if (w->emul) memcpy(w->args, args, w->emul->bytes);
  return CUDA_SUCCESS;
}
static CUresult nd_cuGraphExecMemcpyNodeSetParams(CUgraphExec x, CUgraphNode n, const CUDA_MEMCPY3D *c,
                                                  CUcontext ctx) {
  COUNT(calls);
  FAULTED();
  nd_work *w = exec_node(x, n, ND_COPY);
  if (!w || !c || !is_ctx(ctx)) return CUDA_ERROR_INVALID_VALUE;
  FAIL_POINT("cuGraphExecMemcpyNodeSetParams");
  w->copy = *c;
  return CUDA_SUCCESS;
}
static CUresult nd_cuGraphExecEventRecordNodeSetEvent(CUgraphExec x, CUgraphNode n, CUevent e) {
  COUNT(calls);
  FAULTED();
  nd_work *w = exec_node(x, n, ND_EVENT);
  if (!w || !e) return CUDA_ERROR_INVALID_VALUE;
  w->event = e;
  return CUDA_SUCCESS;
}
static CUresult nd_cuGraphExecChildGraphNodeSetParams(CUgraphExec x, CUgraphNode n, CUgraph child) {
  COUNT(calls);
  FAULTED();
  nd_work *w = exec_node(x, n, ND_CHILD);
  CUgraph c;
  if (!w || graph_clone(child, &c) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  graph_free(w->child);
  w->child = c;
  return CUDA_SUCCESS;
}
/* Copies as a 1-D memcpy node describes them (kdag's are all 1-D). */
static void run_copy(const CUDA_MEMCPY3D *c, uint64_t busy_until) { /* its own serial */
  void *dst = c->dstMemoryType == CU_MEMORYTYPE_HOST ? c->dstHost : host_of(c->dstDevice);
  const void *src = c->srcMemoryType == CU_MEMORYTYPE_HOST ? c->srcHost : host_of(c->srcDevice);
  if (!c->WidthInBytes) return;
  use_pinned(dst, busy_until, 0);
  use_pinned(src, busy_until, 0);
  memmove(dst, src, c->WidthInBytes * (c->Height ? c->Height : 1) * (c->Depth ? c->Depth : 1));
}

/* Runs a graph's work, copies and event records each in its turn on the
 * timeline (a sink's event after its copy). */
static void run_work(const nd_work *w, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    switch (w[i].kind) {
      case ND_COPY: run_copy(&w[i].copy, enqueue_serial()); break;
      case ND_HOST: w[i].fn(w[i].data); break;
      case ND_EVENT: record(w[i].event); break;
      case ND_CHILD: run_work(w[i].child->work, w[i].child->count); break;
      case ND_KERNEL:
        if (w[i].emul) emul_run(w[i].emul, w[i].args);
        break;
      case ND_EMPTY: break;
    }
  }
}
/* The graph's kernels keep their modules busy until the graph is done. */
static void modules_busy(const nd_work *w, uint32_t count, uint64_t busy_until) {
  for (uint32_t i = 0; i < count; ++i) {
    if (w[i].kind == ND_KERNEL) w[i].module->busy_until = busy_until;
    if (w[i].kind == ND_CHILD) modules_busy(w[i].child->work, w[i].child->count, busy_until);
  }
}
static CUresult nd_cuGraphLaunch(CUgraphExec x, CUstream s) {
  COUNT(calls);
  FAULTED();
  NEED_CTX();
  if (!x || !s) return CUDA_ERROR_INVALID_HANDLE;
  FAIL_POINT("cuGraphLaunch");
  COUNT(graph_launches);
  if (s->capture) return CUDA_SUCCESS;
  run_work(x->work, x->count);
  x->busy_until = enqueue_serial(); /* the whole graph: after its nodes */
  modules_busy(x->work, x->count, x->busy_until);
  return CUDA_SUCCESS;
}
static CUresult nd_cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode) {
  COUNT(calls);
  FAULTED();
  (void)mode;
  if (!s || s->capture) return CUDA_ERROR_INVALID_VALUE;
  return graph_new(&s->capture);
}
static CUresult nd_cuStreamEndCapture(CUstream s, CUgraph *out) {
  COUNT(calls);
  if (!s || !out || !s->capture) return CUDA_ERROR_INVALID_VALUE;
  CUgraph captured = s->capture;
  s->capture = NULL; /* refused or not, the capture has ended (as on a GPU: it was invalidated) */
  CUresult r = injected("cuStreamEndCapture");
  if (r != CUDA_SUCCESS) {
    graph_free(captured);
    *out = NULL;
    return r;
  }
  *out = captured;
  return CUDA_SUCCESS;
}

/* ---- the one exported entry point kdag looks up --------------------------------- */

static const struct {
  const char *name;
  void *fn;
} g_table[] = {
#define KD_CU_SYMBOL(name) {#name, (void *)nd_##name},
#define KD_CU_SYMBOL_OPTIONAL(name)
#include "cuda/driver_symbols.h"
#undef KD_CU_SYMBOL
#undef KD_CU_SYMBOL_OPTIONAL
    /* The optional entry points it has. */
    {"cuLaunchKernelEx", (void *)nd_cuLaunchKernelEx},
    {"cuGraphAddDependencies", (void *)nd_cuGraphAddDependencies},
};

ND_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status) {
  (void)version, (void)flags;
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof g_table / sizeof g_table[0]; ++i)
    if (!strcmp(g_table[i].name, symbol)) {
      *pfn = g_table[i].fn;
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  *pfn = NULL;
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}
