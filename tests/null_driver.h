/* SPDX-License-Identifier: Apache-2.0 */
/* The null CUDA driver's own interface (tests/null_driver.c): what a test
 * or a benchmark that loaded it through KDAG_CUDA_DRIVER_PATH looks up with
 * dlsym on the same library. Not part of kdag. */
#ifndef KDAG_TESTS_NULL_DRIVER_H
#define KDAG_TESTS_NULL_DRIVER_H

#include <dlfcn.h>
#include <stdint.h>

/* cuDeviceGetName's answer: says in every report that no GPU ran. */
#define KDAG_NULL_DEVICE_NAME "kdag null driver (no GPU: kernels do nothing)"

/* Calls the driver counted since the process loaded it; every field a
 * uint64_t (the driver counts them as an array). Thread-safe to read. */
typedef struct kdag_null_calls {
  uint64_t calls;               /* every entry point */
  uint64_t ctx_set_current;
  uint64_t stream_syncs;        /* cuStreamSynchronize */
  uint64_t event_syncs;         /* cuEventSynchronize */
  uint64_t event_queries;
  uint64_t event_records;       /* cuEventRecord, not graph event nodes */
  uint64_t stream_event_waits;  /* cuStreamWaitEvent: a device-side wait */
  uint64_t events_created, events_destroyed;
  uint64_t device_allocs, device_frees; /* pool and plain, both */
  uint64_t sync_frees;          /* cuMemFree, cuMemFreeHost: synchronize on a real driver */
  uint64_t pinned_allocs, pinned_frees; /* cuMemHostAlloc, cuMemFreeHost */
  uint64_t host_registers;      /* cuMemHostRegister */
  uint64_t copies;              /* cuMemcpy*Async */
  uint64_t module_loads, module_unloads;
  uint64_t kernel_launches;     /* cuLaunchKernel */
  uint64_t graph_instantiations, graph_launches;
  uint64_t exec_destroys;       /* cuGraphExecDestroy */
  uint64_t kernel_node_patches; /* cuGraphExecKernelNodeSetParams */
  /* A module unloaded, or an executable graph destroyed, before the
   * launches that use it were complete (see null_driver.c). */
  uint64_t lifetime_violations;
  uint64_t ctx_get_current;
  /* Calls that wait for all work in the context on a GPU (module loads
   * and unloads, cuMemFree, cuMemFreeHost, cuMemHostUnregister: measured
   * by tools/wait-probe) made while any enqueued work was not complete:
   * each then completes it, as the wait would. */
  uint64_t context_waits;
  /* Programmatic dependent launch: cuLaunchKernelEx with programmatic
   * stream serialization, and programmatic edges (cuGraphAddDependencies). */
  uint64_t programmatic_launches;
  uint64_t programmatic_edges;  /* last: a field added later goes after the rest */
} kdag_null_calls;

/* KDAG_NULL_SM (default "90"): the compute capability the null driver
 * presents, major * 10 + minor. Below 90 it refuses programmatic launches
 * and edges (CUDA_ERROR_NOT_SUPPORTED), so a test can show kdag never asks
 * for them on a device without PDL. Read at each query. */

/* KDAG_NULL_DEVICES (default "1", at most "4"): how many devices the null
 * driver presents, each with its primary context and PCI bus
 * (0000:0d:00.0 for device d); memory belongs to the device whose context
 * was current when it was allocated (cuPointerGetAttributes says so). One
 * timeline serves every device: work completes in enqueue order. */

/* on != 0: events recorded from now on stay pending until a synchronize
 * reaches them, or until kdag_null_hold(0), which finishes every one. */
void kdag_null_hold(int on);
void kdag_null_calls_get(kdag_null_calls *out);
/* The call of entry after `after` more (one of cuEventCreate, cuEventRecord,
 * cuMemAllocFromPoolAsync, cuMemHostAlloc, cuLaunchKernel, cuStreamEndCapture
 * (a capture the callback broke: the capture ends, its graph is dropped),
 * cuGraphInstantiateWithParams, which then names the graph's node number
 * node as the culprit, cuGraphLaunch, cuGraphExecKernelNodeSetParams,
 * cuGraphExecMemcpyNodeSetParams)
 * fails with the CUresult code, once. entry NULL: disarms. */
void kdag_null_fail(const char *entry, uint32_t after, int code, uint32_t node);
/* A trap in the work enqueued so far: every later call that queries, waits
 * for or enqueues work, or makes an object, fails with the CUresult code
 * (a sticky one, such as CUDA_ERROR_ILLEGAL_ADDRESS), for the process. */
void kdag_null_fault(int code);
/* Device memory as another library would allocate it (kdag_null_api's
 * foreign_alloc, below). */
unsigned long long kdag_null_foreign_alloc(size_t bytes, int ordinal, int managed);
void kdag_null_foreign_free(unsigned long long p);
/* A host stand-in for the kernel called name, for tests that check what a
 * kernel node is given (the null driver's device memory is host memory, so
 * fn can do the kernel's work): a function of that name looked up from
 * then on runs fn wherever it is launched, on a stream when enqueued
 * (not inside a capture), in a graph at each launch, with the parameter
 * bytes the node was last given (taken at cuGraphAddKernelNode and at
 * cuGraphExecKernelNodeSetParams, as the driver takes them). sizes: the
 * bytes of each of the count parameters (at most 8, 512 bytes in all). fn
 * does the whole launch; grid and block are not passed. At most 64 names;
 * a name registered again is replaced. 1, or 0 for arguments out of range. */
typedef void kdag_null_kernel_fn(void *const *params);
int kdag_null_emulate(const char *name, uint32_t count, const uint32_t *sizes, kdag_null_kernel_fn *fn);
/* Their types, for dlsym: kdag loads the driver privately (RTLD_LOCAL). */
typedef int kdag_null_emulate_fn(const char *name, uint32_t count, const uint32_t *sizes, kdag_null_kernel_fn *fn);
typedef void kdag_null_hold_fn(int on);
typedef void kdag_null_calls_get_fn(kdag_null_calls *out);
typedef void kdag_null_fail_fn(const char *entry, uint32_t after, int code, uint32_t node);
typedef void kdag_null_fault_fn(int code);
/* Device memory "another library" allocated: on device ordinal, managed or
 * not, as cuPointerGetAttributes then reports it; 0 when out of memory.
 * kdag_null_foreign_free frees it. */
typedef unsigned long long kdag_null_foreign_alloc_fn(size_t bytes, int ordinal, int managed);
typedef void kdag_null_foreign_free_fn(unsigned long long p);

/* The interface of the null driver kdag loaded from path (the value given
 * to KDAG_CUDA_DRIVER_PATH), with its cuGetProcAddress_v2 for a test that
 * calls the driver itself. */
typedef struct kdag_null_api {
  kdag_null_hold_fn *hold;
  kdag_null_calls_get_fn *calls_get;
  kdag_null_fail_fn *fail;
  kdag_null_fault_fn *fault;
  kdag_null_emulate_fn *emulate;
  kdag_null_foreign_alloc_fn *foreign_alloc;
  kdag_null_foreign_free_fn *foreign_free;
  void *get_proc; /* cuGetProcAddress_v2 */
} kdag_null_api;

/* Fills *api from the copy kdag has loaded (never loads one): 1, or 0 when
 * that library is not loaded or lacks an entry. For tests only. */
static inline int kdag_null_api_get(const char *path, kdag_null_api *api) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return 0;
  api->hold = (kdag_null_hold_fn *)dlsym(lib, "kdag_null_hold");
  api->calls_get = (kdag_null_calls_get_fn *)dlsym(lib, "kdag_null_calls_get");
  api->fail = (kdag_null_fail_fn *)dlsym(lib, "kdag_null_fail");
  api->fault = (kdag_null_fault_fn *)dlsym(lib, "kdag_null_fault");
  api->emulate = (kdag_null_emulate_fn *)dlsym(lib, "kdag_null_emulate");
  api->foreign_alloc = (kdag_null_foreign_alloc_fn *)dlsym(lib, "kdag_null_foreign_alloc");
  api->foreign_free = (kdag_null_foreign_free_fn *)dlsym(lib, "kdag_null_foreign_free");
  api->get_proc = dlsym(lib, "cuGetProcAddress_v2");
  dlclose(lib); /* kdag keeps its own handle: the pointers stay valid */
  return api->hold && api->calls_get && api->fail && api->fault && api->emulate && api->foreign_alloc &&
         api->foreign_free && api->get_proc;
}

/* A CUDA session of exec mode `mode` on the null driver at path (kdag
 * loads it through KDAG_CUDA_DRIVER_PATH, in the test's own process), with
 * its interface in *api when api is non-NULL. Criterion asserts on failure:
 * for tests that include it after kdag_test.h. */
#ifdef KDAG_TESTS_KDAG_TEST_H
/* The same with options *o (backend CUDA). */
static inline kd_session *kdt_null_session_opts(const char *path, const kd_session_options *o, kdag_null_api *api) {
  setenv("KDAG_CUDA_DRIVER_PATH", path, 1);
  kd_session *s;
  KDT_OK(kd_session_create(o, &s));
  if (api) cr_assert(kdag_null_api_get(path, api), "the null driver is not the library kdag loaded");
  return s;
}

static inline kd_session *kdt_null_session(const char *path, kd_exec_mode mode, kdag_null_api *api) {
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = KD_BACKEND_CUDA;
  o.exec_mode = mode;
  return kdt_null_session_opts(path, &o, api);
}
#endif

#endif
